//! JUnit XML for CI (GitLab, Jenkins, GitHub test reporters): a pure [`serialize`] of the results document
//! ([`crate::sinks::report::Results`]) into bytes, through quick-junit (no hand escaping). Writing is the caller's
//! (`report::write_atomic`). It starts nothing and reads nothing.
//!
//! Shape: `<testsuites name="servegate">`, one `<testsuite>` per gate (name = the gate; properties = the
//! run's provenance; `time` the gate's own wall time), one `<testcase>` per listed assertion (name
//! `<gate>::<assertion>`, classname `servegate.` and the gate with each `.` written `_` ([`classname`]: Jenkins
//! and GitLab split a classname at its dots into packages, so `qwen2.5-7b` would become package `qwen2`), `time` in plain
//! seconds with a dot and three decimals, `1.250`): a pass carries its verdict line as `<system-out>`; a failure carries
//! `<failure message="verdict line" type="assertion|serve_not_ready|...">` with the full text, and the tail
//! of `serve.log` as `<system-out>`; a test that was not checked carries `<skipped message="[reason] ...">`,
//! its reason first (`[not provisioned] requires: ...`, `[not compared: busy runner] regression NOT-COMPARED
//! ...`: `AssertionResult::skip_reason`), and each suite counts its skips by reason in a `skipped_by_reason`
//! property (`1 not compared: busy runner`).
//! Every (classname, name) pair is unique in the file: a repeat (two gate files with one name) gets ` #2`,
//! ` #3`... after its name, since readers key results by that pair and would merge or drop the repeat.
//! Text is made valid XML 1.0 ([`xml`]): every character XML 1.0 forbids (C0 controls but tab, newline and
//! carriage return, ESC included; U+FFFE, U+FFFF) is written visibly as `\uXXXX` (`\u001b[31m`, `\u0000`),
//! never raw, never inside CDATA, never dropped unseen. A problem of the run as a whole (`problems` in the results, e.g. "nothing was checked")
//! is one failed `<testcase name="servegate::run" classname="servegate">` in a last suite named `servegate`.

use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite, XmlString,
};

use crate::sinks::report::{AssertionResult, GateResults, Results, TestOutcome};

/// The `<testsuites name=...>`.
pub(crate) const REPORT_NAME: &str = "servegate";

/// True for a character the XML 1.0 `Char` production forbids (W3C XML 1.0, section 2.2): C0 controls but
/// tab, newline and carriage return (ESC included), and U+FFFE, U+FFFF (surrogates cannot occur in a `str`);
/// and the two private-use characters that stand for a tab and a carriage return on their way through
/// quick-junit ([`TAB_MARK`], [`CR_MARK`]), so that one in the text itself is shown, not taken for one.
fn xml10_forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{B}' | '\u{C}' | '\u{E}'..='\u{1F}' | '\u{FFFE}' | '\u{FFFF}')
        || c == TAB_MARK
        || c == CR_MARK
}

/// What a tab is written as until [`attribute_breaks`] writes the XML: quick-junit's [`XmlString`] strips
/// ANSI escapes with the `strip-ansi-escapes` crate, which drops tabs and carriage returns too
/// (`"second\tline"` became `secondline`). A private-use character passes it untouched.
const TAB_MARK: char = '\u{E009}';
/// What a carriage return is written as until [`attribute_breaks`] (see [`TAB_MARK`]).
const CR_MARK: char = '\u{E00D}';

/// Text made valid for XML 1.0, visibly (case 42's rule): every forbidden character is written as the six
/// characters `\uXXXX` (lowercase hex: ESC is `\u001b`, so a colour code reads `\u001b[31m`; NUL `\u0000`;
/// U+FFFE `\ufffe`); `&`, `<`, `>` and quotes are escaped by quick-junit's [`XmlString`]. No CDATA. A tab
/// and a carriage return are kept ([`TAB_MARK`], [`CR_MARK`] until [`attribute_breaks`]).
pub(crate) fn xml(s: &str) -> XmlString {
    if s.contains(|c| xml10_forbidden(c) || c == '\t' || c == '\r') {
        let mut out = String::with_capacity(s.len() + 8);
        for c in s.chars() {
            if xml10_forbidden(c) {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else if c == '\t' {
                out.push(TAB_MARK);
            } else if c == '\r' {
                out.push(CR_MARK);
            } else {
                out.push(c);
            }
        }
        XmlString::new(out)
    } else {
        XmlString::new(s)
    }
}

/// The classname of a gate's testcases: `servegate.` and the gate name with `.` written `_`, so Jenkins (which
/// splits a classname at its last dot into package and class) files every gate under package `servegate`
/// with the gate as its class, and no reader turns a model name's dots (`qwen2.5-7b`) into packages (case 41).
pub(crate) fn classname(gate: &str) -> String {
    format!("{REPORT_NAME}.{}", gate.replace('.', "_"))
}

/// `name`, or `name #k` (k = 2, 3...) when (`class`, `name`) is already in `seen`; the pair returned is added.
fn unique_name(
    seen: &mut std::collections::HashSet<(String, String)>,
    class: &str,
    name: &str,
) -> String {
    let mut candidate = name.to_string();
    let mut k = 2;
    while !seen.insert((class.to_string(), candidate.clone())) {
        candidate = format!("{name} #{k}");
        k += 1;
    }
    candidate
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
pub(crate) fn shell_join(argv: &[String]) -> String {
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

/// The suite of one gate; `seen` holds the (classname, name) pairs already written. In steps: the gate's
/// properties ([`suite_properties`]), one testcase per assertion ([`testcase`]), the skip counts
/// ([`count_skips`]).
fn suite(g: &GateResults, seen: &mut std::collections::HashSet<(String, String)>) -> TestSuite {
    let mut s = TestSuite::new(xml(&g.name));
    s.set_time(secs(g.duration_s));
    let (props, arm_props) = suite_properties(g);
    if let Some(p) = &g.provenance {
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

    for a in &g.assertions {
        s.add_test_case(testcase(g, a, seen));
    }
    count_skips(&mut s, g);
    s
}

/// One property of a suite: its name and value.
type Prop = (&'static str, String);

/// The properties of a gate's suite: the gate's own and its run's provenance, then one group per arm of a
/// pair gate (`arm1_role`, `arm1_runtime`, ...).
fn suite_properties(g: &GateResults) -> (Vec<Prop>, Vec<(String, String)>) {
    let mut props: Vec<Prop> = vec![("gate_file", g.file.clone())];
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
        // The host name only when the evidence has it (`[record] publish_host`; docs/evidence.md "Privacy").
        if !p.host.hostname.is_empty() {
            props.push(("host", p.host.hostname.clone()));
        }
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
    }
    (props, arm_props)
}

/// The testcase of one assertion `a` of gate `g`: its status (success, skipped with its reason, or a
/// failure with its kind and text), its output, and where a person looks next.
fn testcase(
    g: &GateResults,
    a: &AssertionResult,
    seen: &mut std::collections::HashSet<(String, String)>,
) -> TestCase {
    let evidence = g.provenance.as_ref().map(|p| p.evidence_dir.as_str());
    // Only a pass is a success; an indeterminate verdict that the gate lets through
    // (`on_indeterminate = "pass"`) is the one non-pass that is not a failure, and its message says so.
    let failing = a.outcome == TestOutcome::Failed || a.failure_kind.is_some();
    let status = match a.outcome {
        TestOutcome::Passed => TestCaseStatus::success(),
        TestOutcome::Indeterminate if !failing => TestCaseStatus::success(),
        TestOutcome::Skipped | TestOutcome::Incomparable | TestOutcome::NotCompared if !failing => {
            let mut st = TestCaseStatus::skipped();
            st.set_message(xml(&match &a.skip_reason {
                Some(r) => format!("[{r}] {}", a.message),
                None => a.message.clone(),
            }));
            st
        }
        _ => {
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
    };
    let class = classname(&g.name);
    let name = unique_name(seen, &class, &a.test);
    let mut tc = TestCase::new(xml(&name), status);
    tc.set_classname(xml(&class));
    tc.set_time(secs(a.duration_s));
    match a.outcome {
        TestOutcome::Passed => {
            tc.set_system_out(xml(&a.message));
        }
        TestOutcome::Indeterminate if !failing => {
            tc.set_system_out(xml(&a.message));
        }
        TestOutcome::Skipped | TestOutcome::Incomparable | TestOutcome::NotCompared if !failing => {
        }
        _ => {
            if let Some(tail) = &g.serve_log_tail {
                tc.set_system_out(xml(&format!("tail of the serve log:\n{tail}")));
            }
        }
    }
    tc.add_property(Property::new("state", a.outcome.state()));
    // Where a person looks next (docs/ci.md): the gate file and the line declaring the assertion, the
    // evidence, and what ran (model hash, engine version; `unknown` where the run did not say).
    let p = g.provenance.as_ref();
    let unknown = || "unknown".to_string();
    for (k, v) in [
        ("gate_file", g.file.clone()),
        ("gate_line", a.gate_line().to_string()),
        (
            "evidence_dir",
            evidence.map(str::to_string).unwrap_or_else(unknown),
        ),
        (
            "model_sha256",
            p.and_then(|p| p.model_sha256.clone())
                .unwrap_or_else(unknown),
        ),
        (
            "engine_version",
            p.and_then(|p| p.serve_version.clone())
                .unwrap_or_else(unknown),
        ),
    ] {
        tc.add_property(Property::new(k, xml(&v)));
    }
    tc
}

/// The suite's skip counts: `skipped` (quick-junit counts skips as `disabled`) and `skipped_by_reason`.
fn count_skips(s: &mut TestSuite, g: &GateResults) {
    // quick-junit counts skipped tests as `disabled`; readers also look for `skipped`.
    let skipped = s.disabled;
    s.extra.insert(xml("skipped"), xml(&skipped.to_string()));
    let mut by_reason: Vec<(String, u64)> = Vec::new();
    for r in g.assertions.iter().filter_map(|a| a.skip_reason.as_ref()) {
        match by_reason.iter_mut().find(|(x, _)| x == r) {
            Some((_, n)) => *n += 1,
            None => by_reason.push((r.clone(), 1)),
        }
    }
    if !by_reason.is_empty() {
        let text = by_reason
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect::<Vec<_>>()
            .join(", ");
        s.add_property(Property::new("skipped_by_reason", xml(&text)));
    }
}

/// The quick-junit report of `results`.
pub(crate) fn to_report(results: &Results) -> Report {
    let mut r = Report::new(REPORT_NAME);
    r.set_time(secs(results.duration_s));
    let mut seen = std::collections::HashSet::new();
    r.add_test_suites(results.gates.iter().map(|g| suite(g, &mut seen)));
    if !results.problems.is_empty() {
        r.add_test_suite(problems_suite(results, &mut seen));
    }
    r
}

/// A run-level problem (`results.problems`, e.g. "nothing was checked") as a failed testcase of a suite named
/// `servegate`, so a CI test reporter shows the job red even when no gate test failed.
fn problems_suite(
    results: &Results,
    seen: &mut std::collections::HashSet<(String, String)>,
) -> TestSuite {
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
        let name = unique_name(seen, REPORT_NAME, &name);
        let mut tc = TestCase::new(xml(&name), st);
        tc.set_classname(xml(REPORT_NAME));
        s.add_test_case(tc);
    }
    s
}

/// The JUnit XML of `results`, as bytes (UTF-8, with an XML declaration); every tab, line feed and carriage
/// return inside an attribute value written as a character reference ([`attribute_breaks`]).
pub(crate) fn serialize(results: &Results) -> Result<Vec<u8>, quick_junit::SerializeError> {
    let mut raw = Vec::new();
    to_report(results).serialize(&mut raw)?;
    let mut out = attribute_breaks(&raw);
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    Ok(out)
}

/// `xml` (as quick-junit wrote it) with every tab, line feed and carriage return inside an attribute value
/// written as the character references `&#9;`, `&#10;`, `&#13;`, and in text content a tab written raw and a
/// carriage return as `&#13;` (a raw one is read as a line feed); tabs and carriage returns arrive as
/// [`TAB_MARK`] and [`CR_MARK`] ([`xml`]). A reader normalizes a raw one in an
/// attribute value to a space (W3C XML 1.0, section 3.3.3 "Attribute-Value Normalization"), so a gate's
/// two-line description or a serve failure's line break would reach the CI page as one run-on line;
/// quick-xml escapes only `<`, `>`, `&` and quotes there. Text content (`<system-out>`, a failure's text)
/// keeps its line breaks raw, as XML keeps them. The scan needs no parser: in what quick-xml writes, a raw
/// `<` starts markup, and inside markup a quote opens or closes an attribute value (a quote inside a value is
/// `&quot;`); quick-junit writes no comment, CDATA or processing instruction but the declaration.
fn attribute_breaks(xml: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(xml);
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    let mut quote: Option<char> = None;
    for c in text.chars() {
        let in_value = in_tag && quote.is_some();
        match (in_tag, quote, c) {
            (false, _, '<') => in_tag = true,
            (true, None, '>') => in_tag = false,
            (true, None, '"' | '\'') => quote = Some(c),
            (true, Some(q), c) if c == q => quote = None,
            _ => {}
        }
        match c {
            '\t' | TAB_MARK if in_value => out.push_str("&#9;"),
            '\n' if in_value => out.push_str("&#10;"),
            '\r' | CR_MARK => out.push_str("&#13;"),
            TAB_MARK => out.push('\t'),
            _ => out.push(c),
        }
    }
    out.into_bytes()
}

/// The JUnit XML exporter.
pub(crate) struct Junit;

impl crate::sinks::report::Exporter for Junit {
    fn serialize(&self, results: &Results) -> Result<Vec<u8>, String> {
        serialize(results).map_err(|e| format!("cannot serialize the JUnit XML: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::report::{AssertionResult, FailureKind, GateResults, Producer};
    use std::path::Path;

    /// A gate description with a line break, a tab and a carriage return reaches its attribute as character references, so a reader gets the text back whole; text content
    /// keeps its line breaks; a raw break is in no attribute.
    #[test]
    fn line_breaks_in_attribute_values_are_character_references() {
        let mut r = Results::begin(Producer::Harness, false);
        let t = AssertionResult::new(
            "g",
            "rate",
            TestOutcome::Failed,
            Some(FailureKind::Assertion),
            "rate FAIL median 5.0 tok/s",
            0.0,
        );
        let g = GateResults::not_run(
            "g",
            Path::new("gates/g.toml"),
            "first line\nsecond\tline\r",
            "r",
            vec![t],
        );
        r.push(g);
        let xml = String::from_utf8(serialize(&r).unwrap()).unwrap();
        assert!(
            xml.contains(r#"value="first line&#10;second&#9;line&#13;""#),
            "{xml}"
        );
        // Text content keeps its tab and line feed raw, a carriage return as a reference (a raw one is read
        // as a line feed); a private-use character of the text itself is shown, not taken for a tab.
        assert_eq!(
            attribute_breaks(b"<a b=\"x\ty\rz\" c='1\n2'>t\n\tu\rv</a>\n"),
            b"<a b=\"x&#9;y&#13;z\" c='1&#10;2'>t\n\tu&#13;v</a>\n".to_vec()
        );
        assert_eq!(super::xml("a\tb\u{E009}").as_str(), "a\u{E009}b\\ue009");
        // Read back by an XML reader: the attribute is the description as written.
        let mut reader = quick_xml::Reader::from_str(&xml);
        let mut found = None;
        loop {
            match reader.read_event().unwrap() {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Empty(e) | quick_xml::events::Event::Start(e) => {
                    let attrs: Vec<_> = e.attributes().map(|a| a.unwrap()).collect();
                    if attrs
                        .iter()
                        .any(|a| a.value.as_ref() == b"gate_description")
                    {
                        let v = attrs.iter().find(|a| a.key.as_ref() == b"value").unwrap();
                        found = Some(v.unescape_value().unwrap().into_owned());
                    }
                }
                _ => {}
            }
        }
        assert_eq!(found.as_deref(), Some("first line\nsecond\tline\r"));
        // No raw break inside any tag's attributes.
        for tag in xml.split('<').skip(1) {
            let head = tag.split('>').next().unwrap();
            assert!(!head.contains(['\n', '\r', '\t']), "{head:?}");
        }
    }

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
                    m.contains("\"<b>Tom & Jerry's</b>\" \\u{1b}[31mred\\u{1b}[0m does not match /x/ \\u{7}\\uffff"),
                    "ESC and BEL shown escaped by the results model (text::lines), U+FFFF written as \\uXXXX: {m}"
                );
                assert_eq!(ty.as_ref().unwrap().as_str(), "assertion");
            }
            other => panic!("{other:?}"),
        }
        assert!(tc
            .system_out
            .as_ref()
            .unwrap()
            .contains("\\u001b[1mbold\\u001b[0m line <1>"));
    }

    /// Two gates of one name (two files), a model name with dots, and two run problems: every
    /// (classname, name) pair unique, no dot in a classname, `time` as plain seconds, the suite's time the
    /// gate's own (not the sum of its tests').
    #[test]
    fn pairs_are_unique_classnames_have_no_dots_and_times_are_plain_seconds() {
        let mut r = Results::begin(Producer::Harness, false);
        for file in ["gates/a.toml", "gates/b.toml"] {
            let tests = vec![
                AssertionResult::new("qwen2.5-7b", "rate", TestOutcome::Passed, None, "ok", 2.0),
                AssertionResult::new(
                    "qwen2.5-7b",
                    "content",
                    TestOutcome::Passed,
                    None,
                    "ok",
                    2.0,
                ),
            ];
            let mut g = GateResults::not_run("qwen2.5-7b", Path::new(file), "", "r", tests);
            g.duration_s = 2.25;
            r.push(g);
        }
        r.problems = vec!["nothing was checked".into(), "second problem".into()];
        r.finish(4.5);
        let text = String::from_utf8(serialize(&r).unwrap()).unwrap();
        let back = Report::deserialize_from_str(&text).unwrap();
        let mut pairs = std::collections::HashSet::new();
        for s in &back.test_suites {
            for c in &s.test_cases {
                let class = c.classname.as_ref().unwrap().as_str().to_string();
                // Jenkins splits at the last dot: package `servegate`, the gate (its dots as `_`) the class.
                let (package, rest) = class.split_once('.').unwrap_or(("", &class));
                assert!(!rest.contains('.'), "{class}");
                if !rest.is_empty() && package == "servegate" {
                    assert!(rest == "qwen2_5-7b" || class == "servegate", "{class}");
                }
                assert!(pairs.insert((class, c.name.as_str().to_string())), "{text}");
            }
        }
        assert_eq!(pairs.len(), 6);
        assert!(
            pairs.contains(&("servegate.qwen2_5-7b".into(), "qwen2.5-7b::rate #2".into())),
            "{pairs:?}"
        );
        let times = regex::Regex::new(r#" time="([^"]*)""#).unwrap();
        let all: Vec<&str> = times
            .captures_iter(&text)
            .map(|c| c.get(1).unwrap().as_str())
            .collect();
        assert!(!all.is_empty());
        let plain = regex::Regex::new(r"^[0-9]+\.[0-9]{3}$").unwrap();
        assert!(all.iter().all(|t| plain.is_match(t)), "{all:?}");
        assert_eq!(
            back.test_suites[0].time,
            Some(std::time::Duration::from_secs_f64(2.25))
        );
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
