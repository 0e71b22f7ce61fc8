//! JUnit XML for CI (GitLab, Jenkins, GitHub test reporters): a pure [`serialize`] of the results document
//! ([`crate::sinks::report::Results`]) into bytes, through quick-junit (no hand escaping). Writing is the caller's
//! (`report::write_atomic`). It starts nothing and reads nothing.
//!
//! Shape: `<testsuites name="servegate">`, one `<testsuite>` per gate (name = the gate; properties = the
//! run's provenance), one `<testcase>` per listed assertion (name `<gate>::<assertion>`, classname the gate,
//! `time` in seconds): a pass carries its verdict line as `<system-out>`; a failure carries
//! `<failure message="verdict line" type="assertion|serve_not_ready|...">` with the full text, and the tail
//! of `serve.log` as `<system-out>`; an ignored gate's tests carry `<skipped message="requires: ...">`.
//! Text is made valid XML 1.0: ANSI escape sequences and control characters are removed, U+FFFE and U+FFFF
//! become U+FFFD. A problem of the run as a whole (`problems` in the results, e.g. "nothing was checked")
//! is one failed `<testcase name="servegate::run" classname="servegate">` in a last suite named `servegate`.

use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite, XmlString,
};

use crate::sinks::report::{GateResults, Results, TestOutcome};

/// The `<testsuites name=...>`.
pub const REPORT_NAME: &str = "servegate";

/// Text made valid for XML 1.0. quick-junit's [`XmlString`] strips ANSI escapes and C0 controls other than
/// tab, newline and carriage return; the two non-characters it keeps are replaced here.
pub fn xml(s: &str) -> XmlString {
    if s.contains(['\u{FFFE}', '\u{FFFF}']) {
        XmlString::new(s.replace(['\u{FFFE}', '\u{FFFF}'], "\u{FFFD}"))
    } else {
        XmlString::new(s)
    }
}

fn secs(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s)
    } else {
        Duration::ZERO
    }
}

fn fmt_load(l: &Option<[f64; 3]>) -> Option<String> {
    l.map(|[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

/// Shell-style display of an argv: arguments with spaces or quotes are single-quoted.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%{}".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The suite of one gate.
fn suite(g: &GateResults) -> TestSuite {
    let mut s = TestSuite::new(xml(&g.name));
    s.set_time(secs(g.duration_s));
    let mut props: Vec<(&str, String)> = vec![("gate_file", g.file.clone())];
    let mut arm_props: Vec<(String, String)> = Vec::new();
    if !g.description.is_empty() {
        props.push(("gate_description", g.description.clone()));
    }
    if let Some(r) = &g.reason {
        // Attribute values lose their line breaks to XML normalization: keep the first line (the failure or
        // testcase text has the whole).
        props.push(("reason", r.lines().next().unwrap_or("").to_string()));
    }
    if let Some(p) = &g.provenance {
        if !p.serve_command.is_empty() {
            props.push(("serve_command", shell_join(&p.serve_command)));
        }
        props.push(("serve_mode", p.serve_mode.clone()));
        if !p.base_url.is_empty() {
            props.push(("base_url", p.base_url.clone()));
        }
        props.push(("model", p.model.clone()));
        props.push(("served_model", p.served_model.clone()));
        if !p.serve_models.is_empty() {
            props.push(("serve_models", p.serve_models.join(", ")));
        }
        if p.arms.is_empty() {
            props.push((
                "serve_version",
                p.serve_version.clone().unwrap_or_else(|| "unknown".into()),
            ));
        }
        if let Some(f) = &p.serve_failure {
            props.push(("serve_failure", f.clone()));
        }
        props.push(("host", p.host.hostname.clone()));
        props.push(("host_os", p.host.os.clone()));
        props.push(("host_cpus", p.host.cpus.to_string()));
        if let Some(l) = fmt_load(&p.load_avg_start) {
            props.push(("load_avg_start", l));
        }
        if let Some(l) = fmt_load(&p.load_avg_end) {
            props.push(("load_avg_end", l));
        }
        if let Some(h) = &p.model_sha256 {
            props.push(("model_sha256", h.clone()));
        }
        for a in &p.arms {
            let n = a.arm;
            arm_props.push((format!("arm{n}_role"), a.role.clone()));
            arm_props.push((format!("arm{n}_runtime"), a.runtime.clone()));
            if !a.serve_command.is_empty() {
                arm_props.push((
                    format!("arm{n}_serve_command"),
                    shell_join(&a.serve_command),
                ));
            }
            arm_props.push((
                format!("arm{n}_serve_version"),
                a.serve_version.clone().unwrap_or_else(|| "unknown".into()),
            ));
            if let Some(f) = &a.serve_failure {
                arm_props.push((format!("arm{n}_serve_failure"), f.clone()));
            }
            arm_props.push((format!("arm{n}_evidence_dir"), a.evidence_dir.clone()));
        }
        props.push(("started_utc", p.started_utc.clone()));
        props.push(("evidence_dir", p.evidence_dir.clone()));
        s.extra.insert(xml("timestamp"), xml(&p.started_utc));
        if !p.host.hostname.is_empty() {
            s.extra.insert(xml("hostname"), xml(&p.host.hostname));
        }
    }
    s.add_properties(
        props
            .into_iter()
            .map(|(k, v)| Property::new(xml(k), xml(&v))),
    );
    s.add_properties(
        arm_props
            .into_iter()
            .map(|(k, v)| Property::new(xml(&k), xml(&v))),
    );

    let evidence = g.provenance.as_ref().map(|p| p.evidence_dir.as_str());
    for a in &g.assertions {
        let status = match a.outcome {
            TestOutcome::Passed => TestCaseStatus::success(),
            TestOutcome::Failed => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                let first = a.message.lines().next().unwrap_or("");
                st.set_message(xml(first));
                st.set_type(xml(a
                    .failure_kind
                    .map(|k| k.as_str())
                    .unwrap_or("assertion")));
                let mut text = a.message.clone();
                if let Some(dir) = evidence {
                    text.push_str(&format!("\nevidence: {dir}"));
                }
                st.set_description(xml(&text));
                st
            }
            TestOutcome::Skipped => {
                let mut st = TestCaseStatus::skipped();
                st.set_message(xml(&a.message));
                st
            }
        };
        let mut tc = TestCase::new(xml(&a.test), status);
        tc.set_classname(xml(&g.name));
        tc.set_time(secs(a.duration_s));
        match a.outcome {
            TestOutcome::Passed => {
                tc.set_system_out(xml(&a.message));
            }
            TestOutcome::Failed => {
                if let Some(tail) = &g.serve_log_tail {
                    tc.set_system_out(xml(&format!("tail of the serve log:\n{tail}")));
                }
            }
            TestOutcome::Skipped => {}
        }
        s.add_test_case(tc);
    }
    // quick-junit counts skipped tests as `disabled`; readers also look for `skipped`.
    let skipped = s.disabled;
    s.extra.insert(xml("skipped"), xml(&skipped.to_string()));
    s
}

/// The quick-junit report of `results`.
pub fn to_report(results: &Results) -> Report {
    let mut r = Report::new(REPORT_NAME);
    r.set_time(secs(results.duration_s));
    r.add_test_suites(results.gates.iter().map(suite));
    if !results.problems.is_empty() {
        r.add_test_suite(problems_suite(results));
    }
    r
}

/// A run-level problem (`results.problems`, e.g. "nothing was checked") as a failed testcase of a suite named
/// `servegate`, so a CI test reporter shows the job red even when no gate test failed.
fn problems_suite(results: &Results) -> TestSuite {
    let mut s = TestSuite::new(REPORT_NAME);
    for (i, p) in results.problems.iter().enumerate() {
        let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
        st.set_message(xml(p.lines().next().unwrap_or("")));
        st.set_type(xml("run"));
        st.set_description(xml(p));
        let name = if i == 0 {
            "servegate::run".to_string()
        } else {
            format!("servegate::run{}", i + 1)
        };
        let mut tc = TestCase::new(xml(&name), st);
        tc.set_classname(xml(REPORT_NAME));
        s.add_test_case(tc);
    }
    s
}

/// The JUnit XML of `results`, as bytes (UTF-8, with an XML declaration).
pub fn serialize(results: &Results) -> Result<Vec<u8>, quick_junit::SerializeError> {
    let mut out = Vec::new();
    to_report(results).serialize(&mut out)?;
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    Ok(out)
}

/// The JUnit XML exporter.
pub struct Junit;

impl crate::sinks::export::Exporter for Junit {
    fn serialize(&self, results: &Results) -> Result<Vec<u8>, String> {
        serialize(results).map_err(|e| format!("cannot serialize the JUnit XML: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::report::{AssertionResult, FailureKind, GateResults, Producer};
    use std::path::Path;

    fn results() -> Results {
        let mut r = Results::begin(Producer::Harness, false);
        let nasty = "known_answer FAIL reply \"<b>Tom & Jerry's</b>\" \u{1b}[31mred\u{1b}[0m does not match /x/ \u{7}\u{FFFF}";
        let tests = vec![
            AssertionResult::new(
                "g",
                "rate",
                TestOutcome::Passed,
                None,
                "rate PASS median 47.0 tok/s (floor 15.0; n=6)",
                1.5,
            ),
            AssertionResult::new(
                "g",
                "known_answer",
                TestOutcome::Failed,
                Some(FailureKind::Assertion),
                nasty,
                0.0,
            ),
        ];
        let mut g =
            GateResults::not_run("g", Path::new("gates/g.toml"), "a <gate>", "r & s", tests);
        g.serve_log_tail = Some("\u{1b}[1mbold\u{1b}[0m line <1>\nline 2 & more".into());
        r.push(g);
        let skip = AssertionResult::new(
            "npu",
            "route",
            TestOutcome::Skipped,
            None,
            "requires: path /dev/accel/accel0 does not exist",
            0.0,
        );
        r.push(GateResults::not_run(
            "npu",
            Path::new("gates/npu.toml"),
            "",
            "requires: ...",
            vec![skip],
        ));
        r.finish(2.0);
        r
    }

    #[test]
    fn hostile_text_becomes_valid_xml() {
        let bytes = serialize(&results()).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{FFFF}'),
            "{text}"
        );
        assert!(text.contains("&lt;b&gt;Tom &amp; Jerry"), "{text}");
        let back = Report::deserialize_from_str(&text).unwrap();
        assert_eq!((back.tests, back.failures), (3, 1));
        let tc = &back.test_suites[0].test_cases[1];
        match &tc.status {
            TestCaseStatus::NonSuccess { message, ty, .. } => {
                let m = message.as_ref().unwrap().as_str();
                assert!(
                    m.contains("\"<b>Tom & Jerry's</b>\" red does not match"),
                    "{m}"
                );
                assert_eq!(ty.as_ref().unwrap().as_str(), "assertion");
            }
            other => panic!("{other:?}"),
        }
        assert!(tc.system_out.as_ref().unwrap().contains("bold line <1>"));
    }

    #[test]
    fn shell_join_quotes_what_needs_it() {
        let argv: Vec<String> = ["serve", "--model", "/m/a b.gguf", "it's"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(shell_join(&argv), r"serve --model '/m/a b.gguf' 'it'\''s'");
    }
}
