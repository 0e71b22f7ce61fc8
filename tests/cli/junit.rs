//! What goes here: the harness's and `servegate run`'s JUnit and JSON reports, each run a child process. The
//! schema check itself is tests/pure/junit.rs.
//!
//! The gate harness's CI outputs, end to end: the harness program (`servegate::run::harness::main_code`, what
//! `cargo test --test gates` runs) over the test gates in tests/data/junit/gates (a pass, a failure and an
//! ignored gate, served by the scripted serve playing tests/data/junit/serves/: `servegate scripted-serve`,
//! found on PATH, the binary's directory put first), configured by the environment
//! (`SERVEGATE_GATES`, `SERVEGATE_RUNS`, `SERVEGATE_JUNIT`, `SERVEGATE_JSON`, `SERVEGATE_STRICT`, `NEXTEST*`)
//! as in CI. Each harness run is a child process (this test binary re-executed on `harness_child`: `fixtures::harness`), so its
//! output, exit code and environment are its own. The XML is parsed back (well-formed XML 1.0, then as JUnit)
//! and its counts compared with the closing line the harness printed. Also: filters and `--list`, strict
//! mode, and one serve per gate under nextest (several processes sharing one nextest run id), or a refusal.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use quick_junit::{NonSuccessKind, Report, TestCaseStatus};
use quick_xml::events::Event;
use servegate::run::harness::LIBTEST_FAILED;
use servegate::sinks::report::{Results, RESULTS_SCHEMA};

use crate::fixtures::junit::assert_junit_schema;
use crate::fixtures::{self, Entry};

fn gates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit/gates")
}

/// What a harness child did.
struct Child {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Child {
    /// (passed, failed, skipped) from the closing line `gates: N passed, N failed, N skipped`.
    fn closing_counts(&self) -> (u64, u64, u64) {
        let line = self
            .stdout
            .lines()
            .rev()
            .find(|l| l.starts_with("gates: "))
            .unwrap_or_else(|| panic!("no closing line:\n{}", self.stdout));
        // The skips by reason follow in parentheses when there are any, and add up to the skipped count.
        let (head, reasons) = match line.split_once(" (") {
            Some((h, r)) => (h, Some(r)),
            None => (line, None),
        };
        let n: Vec<u64> = head
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            head,
            format!("gates: {} passed, {} failed, {} skipped", n[0], n[1], n[2])
        );
        match reasons {
            Some(r) => {
                let r = r.strip_suffix(')').unwrap_or_else(|| panic!("{line}"));
                let sum: u64 = r
                    .split(", ")
                    .map(|p| p.split(' ').next().unwrap().parse::<u64>().unwrap())
                    .sum();
                assert_eq!(sum, n[2], "{line}");
            }
            None => assert_eq!(n[2], 0, "{line}"),
        }
        (n[0], n[1], n[2])
    }
}

/// Runs the harness in a child process with `env` (on top of a clean servegate / nextest environment) and
/// libtest `args`.
fn harness(env: &[(&str, &Path)], args: &[&str]) -> Child {
    let mut cmd = fixtures::harness(Entry::Code, args);
    cmd.env("SERVEGATE_GATES", gates_dir())
        .env("PATH", fixtures::path_env());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = fixtures::Out::of(&mut cmd);
    Child {
        code: out.code,
        stdout: out.stdout,
        stderr: out.stderr,
    }
}

/// True for a character XML 1.0 allows (the `Char` production).
fn xml10_char(c: char) -> bool {
    matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

/// Checks that `text` is well-formed XML 1.0: every character allowed, tags balanced and matching, attribute
/// values and entity references resolvable, one root element. Returns the root element's name.
fn assert_well_formed(text: &str) -> String {
    if let Some(bad) = text.chars().find(|c| !xml10_char(*c)) {
        panic!("character {bad:?} is not allowed in XML 1.0");
    }
    let mut reader = quick_xml::Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<String> = Vec::new();
    let mut roots = Vec::new();
    loop {
        let ev = reader.read_event().unwrap_or_else(|e| {
            panic!("not well-formed at byte {}: {e}", reader.buffer_position())
        });
        match ev {
            Event::Start(e) => {
                if stack.is_empty() {
                    roots.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
                }
                for a in e.attributes() {
                    a.expect("attribute")
                        .unescape_value()
                        .expect("attribute value");
                }
                stack.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
            }
            Event::Empty(e) => {
                if stack.is_empty() {
                    roots.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap());
                }
                for a in e.attributes() {
                    a.expect("attribute")
                        .unescape_value()
                        .expect("attribute value");
                }
            }
            Event::End(e) => {
                let open = stack.pop().expect("end tag without start");
                assert_eq!(open.as_bytes(), e.name().as_ref(), "mismatched end tag");
            }
            Event::GeneralRef(r) => {
                let ok = r.resolve_char_ref().expect("character reference").is_some()
                    || [&b"lt"[..], b"gt", b"amp", b"apos", b"quot"].contains(&&*r);
                assert!(
                    ok,
                    "undefined entity &{};",
                    String::from_utf8_lossy(r.as_ref())
                );
            }
            Event::Text(t) => {
                assert!(
                    !stack.is_empty() || t.iter().all(|b| b.is_ascii_whitespace()),
                    "text outside the root element"
                );
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    assert_eq!(roots.len(), 1, "exactly one root element");
    roots.remove(0)
}

/// Parses the JUnit file back: well-formed, a `<testsuites>` root, valid by the Jenkins JUnit schema's rules,
/// readable as JUnit.
fn parse_junit(path: &Path) -> Report {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(assert_well_formed(&text), "testsuites");
    assert_junit_schema(&text);
    assert!(!text.contains('\u{1b}'), "an ANSI escape reached the XML");
    Report::deserialize_from_str(&text).unwrap_or_else(|e| panic!("not JUnit: {e}\n{text}"))
}

/// (tests, failures, skipped) over every testcase of the report.
fn junit_counts(r: &Report) -> (u64, u64, u64) {
    let cases: Vec<_> = r.test_suites.iter().flat_map(|s| &s.test_cases).collect();
    let failures = cases
        .iter()
        .filter(|c| {
            matches!(
                c.status,
                TestCaseStatus::NonSuccess {
                    kind: NonSuccessKind::Failure,
                    ..
                }
            )
        })
        .count();
    let skipped = cases
        .iter()
        .filter(|c| matches!(c.status, TestCaseStatus::Skipped { .. }))
        .count();
    (cases.len() as u64, failures as u64, skipped as u64)
}

fn read_results(path: &Path) -> Results {
    serde_json::from_slice(&std::fs::read(path).unwrap()).expect("results JSON matches the schema")
}

#[test]
fn junit_and_json_match_the_harness_report_for_a_pass_a_failure_and_an_ignored_gate() {
    let runs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (junit, json) = (
        out.path().join("ci/junit.xml"),
        out.path().join("ci/results.json"),
    );
    let run = harness(
        &[
            ("SERVEGATE_RUNS", runs.path()),
            ("SERVEGATE_JUNIT", &junit),
            ("SERVEGATE_JSON", &json),
        ],
        &[],
    );
    assert_eq!(run.code, LIBTEST_FAILED, "{}\n{}", run.stdout, run.stderr);
    let (passed, failed, skipped) = run.closing_counts();
    assert_eq!((passed, failed, skipped), (6, 2, 2), "{}", run.stdout);
    assert!(
        run.stdout.contains("gate report:\njunit-pass: evidence "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "reports: junit {}, json {}",
            junit.display(),
            json.display()
        )),
        "{}",
        run.stdout
    );

    let report = parse_junit(&junit);
    // The counts of the XML are the harness's counts: attributes and testcase elements alike.
    assert_eq!(
        junit_counts(&report),
        (passed + failed + skipped, failed, skipped)
    );
    assert_eq!(
        (report.tests as u64, report.failures as u64, report.errors),
        (passed + failed + skipped, failed, 0)
    );
    let names: Vec<&str> = report.test_suites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["junit-pass", "junit-fail", "junit-ignored"],
        "one testsuite per gate"
    );
    let per_suite: Vec<(usize, usize, usize)> = report
        .test_suites
        .iter()
        .map(|s| (s.tests, s.failures, s.disabled))
        .collect();
    assert_eq!(per_suite, [(5, 0, 0), (3, 2, 0), (2, 0, 2)]);

    for s in &report.test_suites {
        for tc in &s.test_cases {
            assert!(
                tc.name.starts_with(&format!("{}::", s.name.as_str())),
                "{}",
                tc.name.as_str()
            );
            // Package `servegate`, the gate (its dots as `_`) the class (case 41).
            assert_eq!(
                tc.classname.as_deref(),
                Some(format!("servegate.{}", s.name.as_str().replace('.', "_")).as_str())
            );
            assert!(tc.time.is_some(), "every testcase has a duration");
        }
    }

    // Provenance of the gates that ran.
    let pass = &report.test_suites[0];
    let prop = |s: &quick_junit::TestSuite, k: &str| {
        s.properties
            .iter()
            .find(|p| p.name.as_str() == k)
            .map(|p| p.value.as_str().to_string())
    };
    for key in [
        "serve_command",
        "model",
        "serve_version",
        "host_os",
        "load_avg_start",
        "load_avg_end",
        "evidence_dir",
    ] {
        assert!(
            prop(pass, key).is_some_and(|v| !v.is_empty()),
            "property {key} missing: {:?}",
            pass.properties
        );
    }
    assert!(prop(pass, "serve_command")
        .unwrap()
        .contains("scripted-serve --script"));
    assert!(Path::new(&prop(pass, "evidence_dir").unwrap())
        .join("run.json")
        .is_file());
    assert!(pass.time.unwrap().as_secs_f64() > 0.0);
    // A pass carries its verdict line.
    let rate = pass
        .test_cases
        .iter()
        .find(|t| t.name.as_str() == "junit-pass::rate")
        .unwrap();
    assert!(matches!(rate.status, TestCaseStatus::Success { .. }));
    assert!(
        rate.system_out
            .as_ref()
            .unwrap()
            .starts_with("rate PASS median 50.0 tok/s"),
        "{:?}",
        rate.system_out
    );

    // A failure: the verdict message with `<`, `&`, quotes intact and the ANSI code gone; the serve log tail.
    let fail = &report.test_suites[1];
    let route = fail
        .test_cases
        .iter()
        .find(|t| t.name.as_str() == "junit-fail::route")
        .unwrap();
    match &route.status {
        TestCaseStatus::NonSuccess {
            kind: NonSuccessKind::Failure,
            message,
            ty,
            description,
            ..
        } => {
            let m = message.as_ref().unwrap().as_str();
            assert!(m.starts_with("route FAIL the serve log never says"), "{m}");
            assert!(m.contains("route <fast> & \"quoted\" 'single'"), "{m}");
            assert!(!m.contains('\u{1b}'));
            assert_eq!(ty.as_deref(), Some("assertion"));
            assert!(
                description.as_ref().unwrap().contains("\nevidence: "),
                "{description:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let tail = route
        .system_out
        .as_ref()
        .expect("serve log tail on failure")
        .as_str();
    assert!(
        tail.contains("E: per-op <forward> & \"slow\" 'path'"),
        "{tail}"
    );
    assert!(tail.starts_with("tail of the serve log:\n"), "{tail}");

    // Ignored gate: skipped with the reason, no provenance.
    let ign = &report.test_suites[2];
    for tc in &ign.test_cases {
        match &tc.status {
            TestCaseStatus::Skipped { message, .. } => assert_eq!(
                message.as_deref(),
                Some("[path missing] requires: path /nonexistent/servegate-junit-test-device does not exist")
            ),
            other => panic!("{other:?}"),
        }
    }
    assert!(prop(ign, "evidence_dir").is_none());

    // The JSON document says the same.
    let r = read_results(&json);
    assert_eq!(r.schema, RESULTS_SCHEMA);
    assert_eq!(
        (r.counts.passed, r.counts.failed, r.counts.skipped),
        (passed, failed, skipped)
    );
    assert_eq!(
        r.counts.tests,
        r.counts.passed + r.counts.failed + r.counts.skipped
    );
    assert_eq!(r.exit_code, servegate::error::exit::ASSERTION_FAILED);
    let statuses: Vec<String> = r
        .gates
        .iter()
        .map(|g| {
            serde_json::to_value(g.status)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(statuses, ["passed", "failed", "ignored"]);
    let rate = r.gates[0]
        .assertions
        .iter()
        .find(|a| a.name == "rate")
        .unwrap();
    assert_eq!(
        (rate.median, rate.bound, rate.unit.as_deref()),
        (Some(50.0), Some(10.0), Some("tok/s"))
    );
    assert_eq!(rate.values, [Some(50.0), Some(50.0)]);
    assert_eq!(r.gates[0].requests.len(), 2);
    assert!(r.gates[0].serve_log_tail.is_none() && r.gates[1].serve_log_tail.is_some());
    let prov = r.gates[0].provenance.as_ref().unwrap();
    assert_eq!(prov.served_model, "fake-chat");
    assert!(prov.load_avg_start.is_some() && prov.load_avg_end.is_some());
}

#[test]
fn filters_and_list_behave_as_libtest_and_the_junit_lists_only_what_ran() {
    let runs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let junit = out.path().join("junit.xml");
    let env = [
        ("SERVEGATE_RUNS", runs.path()),
        ("SERVEGATE_JUNIT", junit.as_path()),
    ];

    // --list runs nothing and writes nothing.
    let listed = harness(&env, &["--list"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("junit-pass::rate: test"),
        "{}",
        listed.stdout
    );
    assert!(!junit.exists(), "--list wrote a report");
    assert_eq!(
        std::fs::read_dir(runs.path())
            .map(|d| d.count())
            .unwrap_or(0),
        0,
        "--list started a gate"
    );

    // A substring filter: only the known_answer trials, only the gates they belong to.
    let run = harness(&env, &["known_answer"]);
    assert_eq!(run.closing_counts(), (1, 1, 1), "{}", run.stdout);
    let report = parse_junit(&junit);
    let names: Vec<&str> = report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "junit-pass::known_answer",
            "junit-fail::known_answer",
            "junit-ignored::known_answer"
        ]
    );
    assert_eq!(junit_counts(&report), (3, 1, 1));
    assert!(run.stdout.contains("7 filtered out"), "{}", run.stdout);

    // --skip leaves out what it names; --exact runs one trial.
    let run = harness(&env, &["--exact", "junit-pass::content"]);
    assert_eq!(
        (run.code, run.closing_counts()),
        (0, (1, 0, 0)),
        "{}",
        run.stdout
    );
    let report = parse_junit(&junit);
    assert_eq!(report.test_suites.len(), 1);
    assert_eq!(
        report.test_suites[0].test_cases[0].name.as_str(),
        "junit-pass::content"
    );
    let run = harness(&env, &["junit-ignored", "--skip", "route"]);
    assert_eq!(run.closing_counts(), (0, 0, 1), "{}", run.stdout);
}

#[test]
fn strict_mode_fails_unmet_requirements_with_their_kind_and_exit_code() {
    let runs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (junit, json) = (
        out.path().join("junit.xml"),
        out.path().join("results.json"),
    );
    let one = Path::new("1");
    let run = harness(
        &[
            ("SERVEGATE_RUNS", runs.path()),
            ("SERVEGATE_JUNIT", &junit),
            ("SERVEGATE_JSON", &json),
            ("SERVEGATE_STRICT", one),
        ],
        &["junit-ignored"],
    );
    assert_eq!(run.code, LIBTEST_FAILED);
    assert_eq!(run.closing_counts(), (0, 2, 0));
    let report = parse_junit(&junit);
    assert_eq!(junit_counts(&report), (2, 2, 0));
    match &report.test_suites[0].test_cases[0].status {
        TestCaseStatus::NonSuccess { ty, message, .. } => {
            assert_eq!(ty.as_deref(), Some("requirement_unmet"));
            assert!(message.as_deref().unwrap().contains("SERVEGATE_STRICT"));
        }
        other => panic!("{other:?}"),
    }
    let r = read_results(&json);
    assert_eq!(r.exit_code, servegate::error::exit::REQUIREMENT_UNMET);
    assert!(r.strict);
}

#[test]
fn nextest_processes_of_one_run_share_one_serve_per_gate() {
    let runs = tempfile::tempdir().unwrap();
    let junit = runs.path().join("junit.xml");
    let start = |run_id: &str, trial: &str| {
        let mut cmd = fixtures::harness(Entry::Code, &["--exact", trial]);
        cmd.env("SERVEGATE_GATES", gates_dir())
            .env("PATH", fixtures::path_env())
            .env("SERVEGATE_RUNS", runs.path())
            .env("SERVEGATE_JUNIT", &junit)
            .env("NEXTEST", "1")
            .env("NEXTEST_RUN_ID", run_id)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Three trials of one gate in three processes at once, as nextest runs them.
    let trials = [
        "junit-pass::route",
        "junit-pass::rate",
        "junit-pass::known_answer",
    ];
    let children: Vec<_> = trials.iter().map(|t| start("run-one", t)).collect();
    for (t, child) in trials.iter().zip(children) {
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "{t}: {}\n{stdout}\n{stderr}",
            out.status
        );
        assert!(
            stdout.contains("gates: 1 passed, 0 failed, 0 skipped"),
            "{t}: {stdout}"
        );
        assert!(
            stderr.contains("ignored under cargo-nextest"),
            "{t}: {stderr}"
        );
    }
    let run_dirs = |gate: &str| {
        std::fs::read_dir(runs.path().join(gate))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(
        run_dirs("junit-pass"),
        1,
        "the serve started once for the gate"
    );
    assert!(runs
        .path()
        .join(servegate::run::harness::NEXTEST_CACHE_DIR)
        .join("run-one")
        .is_dir());
    assert!(!junit.exists(), "no partial JUnit from one nextest process");

    // A new nextest run (another run id) runs the gate again.
    let out = start("run-two", "junit-pass::content")
        .wait_with_output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(run_dirs("junit-pass"), 2);
}

#[test]
fn nextest_without_a_run_id_is_refused_pointing_to_cargo_test() {
    let runs = tempfile::tempdir().unwrap();
    let one = Path::new("1");
    let run = harness(
        &[("SERVEGATE_RUNS", runs.path()), ("NEXTEST", one)],
        &["--exact", "junit-pass::route"],
    );
    assert_eq!(run.code, servegate::error::exit::USAGE);
    assert!(
        run.stderr.contains("cargo test --test gates"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_dir(runs.path()).unwrap().count(),
        0,
        "nothing started"
    );
    // Listing still works, so nextest can show what it would run.
    let listed = harness(
        &[("SERVEGATE_RUNS", runs.path()), ("NEXTEST", one)],
        &["--list"],
    );
    assert_eq!(listed.code, 0);
    assert!(listed.stdout.contains("junit-pass::route: test"));
}

#[test]
fn servegate_run_writes_junit_and_json_with_its_exit_code() {
    let runs = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (junit, json) = (out.path().join("run.xml"), out.path().join("run.json"));
    let gates: Vec<PathBuf> = ["a-pass.toml", "b-fail.toml", "c-ignored.toml"]
        .iter()
        .map(|f| gates_dir().join(f))
        .collect();
    let run = |extra: &[&Path]| {
        let mut cmd = fixtures::servegate();
        cmd.arg("run")
            .arg("--quiet")
            .arg("--runs")
            .arg(runs.path())
            .arg("--junit")
            .arg(&junit)
            .arg("--json")
            .arg(&json);
        cmd.args(extra)
            .env("PATH", fixtures::path_env())
            .env_remove("SERVEGATE_STRICT")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let args: Vec<&Path> = gates.iter().map(|p| p.as_path()).collect();
    let out1 = run(&args);
    assert_eq!(
        out1.status.code(),
        Some(servegate::error::exit::ASSERTION_FAILED),
        "{}",
        String::from_utf8_lossy(&out1.stderr)
    );
    let report = parse_junit(&junit);
    assert_eq!(junit_counts(&report), (10, 2, 2));
    let r = read_results(&json);
    assert_eq!(
        (
            r.exit_code,
            r.counts.passed,
            r.counts.failed,
            r.counts.skipped
        ),
        (1, 6, 2, 2)
    );
    assert_eq!(serde_json::to_value(r.producer).unwrap(), "run");
    // The run's time is charged to each gate's first assertion; the suite time is the gate's.
    assert!(
        r.gates[0].assertions[0].duration_s > 0.0
            && r.gates[0].duration_s >= r.gates[0].assertions[0].duration_s
    );

    // An invalid spec: exit 3, and the reports say why (one failed `<stem>::spec` test).
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit/invalid/bad-spec.toml");
    let out2 = run(&[bad.as_path()]);
    assert_eq!(
        out2.status.code(),
        Some(servegate::error::exit::SPEC_INVALID)
    );
    let report = parse_junit(&junit);
    assert_eq!(junit_counts(&report), (1, 1, 0));
    let tc = &report.test_suites[0].test_cases[0];
    assert_eq!(tc.name.as_str(), "bad-spec::spec");
    match &tc.status {
        TestCaseStatus::NonSuccess { ty, message, .. } => {
            assert_eq!(ty.as_deref(), Some("spec_invalid"));
            assert!(
                message
                    .as_deref()
                    .unwrap()
                    .contains("unknown field `flor_tok_s`"),
                "{message:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        read_results(&json).exit_code,
        servegate::error::exit::SPEC_INVALID
    );
}

#[test]
fn a_run_that_checked_nothing_is_a_failed_servegate_run_testcase_in_both_reports() {
    let runs = tempfile::tempdir().unwrap();
    let (junit, json) = (runs.path().join("j.xml"), runs.path().join("r.json"));
    let env = [
        ("SERVEGATE_RUNS", runs.path()),
        ("SERVEGATE_JUNIT", junit.as_path()),
        ("SERVEGATE_JSON", json.as_path()),
    ];
    // Only the ignored gate selected: it is skipped, nothing is checked.
    let run = harness(&env, &["junit-ignored"]);
    assert_eq!(
        run.code,
        servegate::error::exit::NOTHING_CHECKED,
        "{}",
        run.stderr
    );
    assert_eq!(run.closing_counts(), (0, 0, 2));
    let report = parse_junit(&junit);
    assert_eq!(junit_counts(&report), (3, 1, 2));
    let last = report.test_suites.last().unwrap();
    assert_eq!(last.name.as_str(), "servegate");
    let case = &last.test_cases[0];
    assert_eq!(case.name.as_str(), "servegate::run");
    match &case.status {
        TestCaseStatus::NonSuccess { ty, message, .. } => {
            assert_eq!(ty.as_deref(), Some("run"));
            assert!(
                message
                    .as_deref()
                    .unwrap()
                    .starts_with("nothing was checked: every selected trial (2) was skipped"),
                "{message:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let r = read_results(&json);
    assert_eq!(r.exit_code, servegate::error::exit::NOTHING_CHECKED);
    assert_eq!(r.problems.len(), 1);
    assert_eq!((r.counts.tests, r.counts.skipped), (2, 2));
}
