//! What goes here: the JUnit schema check itself, in process. The harness's and `servegate run`'s JUnit and
//! JSON reports, from child processes, are tests/cli/junit.rs.
//!
//! The gate harness's CI outputs, end to end: the harness program (`servegate::run::harness::main_code`, what
//! `cargo test --test gates` runs) over the test gates in tests/data/junit/gates (a pass, a failure and an
//! ignored gate, served by the scripted fake tests/data/junit/serves/ (`servegate scripted-serve`)), configured by the environment
//! (`SERVEGATE_GATES`, `SERVEGATE_RUNS`, `SERVEGATE_JUNIT`, `SERVEGATE_JSON`, `SERVEGATE_STRICT`, `NEXTEST*`)
//! as in CI. Each harness run is a child process (this test binary re-executed on `harness_child`), so its
//! output, exit code and environment are its own. The XML is parsed back (well-formed XML 1.0, then as JUnit)
//! and its counts compared with the closing line the harness printed. Also: filters and `--list`, strict
//! mode, and one serve per gate under nextest (several processes sharing one nextest run id), or a refusal.

use crate::fixtures::junit::assert_junit_schema;

/// The schema check refuses what the Jenkins schema refuses (so it can fail): an unknown attribute, a
/// testcase without a name, a time with a comma or an exponent, properties after a testcase, a testcase
/// outside a testsuite; and accepts a minimal valid file.
#[test]
fn the_schema_check_refuses_what_the_jenkins_junit_schema_refuses() {
    let ok = r#"<testsuites tests="1"><testsuite name="g" tests="1" time="2.000"><properties><property name="a" value="b"/></properties><testcase name="g::rate" classname="g" time="0.125"/></testsuite></testsuites>"#;
    assert_junit_schema(ok);
    for bad in [
        ok.replace("classname=", "klass="),
        ok.replace(r#"name="g::rate" "#, ""),
        ok.replace(r#"time="0.125""#, r#"time="0,125""#),
        ok.replace(r#"time="2.000""#, r#"time="2e0""#),
        ok.replace(r#"tests="1" time"#, r#"tests="one" time"#),
        ok.replace(
            r#"<properties><property name="a" value="b"/></properties><testcase name="g::rate" classname="g" time="0.125"/>"#,
            r#"<testcase name="g::rate"/><properties/>"#,
        ),
        r#"<testsuites><testcase name="x"/></testsuites>"#.to_string(),
    ] {
        let refused = std::panic::catch_unwind(|| assert_junit_schema(&bad)).is_err();
        assert!(refused, "accepted: {bad}");
    }
}
