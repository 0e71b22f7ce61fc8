//! What goes here: the JUnit schema check itself, in process. The harness's and `servegate run`'s JUnit and
//! JSON reports, from child processes, are tests/cli/junit.rs.
//!
//! The gate harness's CI outputs, end to end: the harness program (`servegate::run::harness::main_code`, what
//! `cargo test --test gates` runs) over the test gates in tests/data/junit/gates (a pass, a failure and an
//! ignored gate, served by the scripted fake tests/data/junit/chat_serve.py), configured by the environment
//! (`SERVEGATE_GATES`, `SERVEGATE_RUNS`, `SERVEGATE_JUNIT`, `SERVEGATE_JSON`, `SERVEGATE_STRICT`, `NEXTEST*`)
//! as in CI. Each harness run is a child process (this test binary re-executed on `harness_child`), so its
//! output, exit code and environment are its own. The XML is parsed back (well-formed XML 1.0, then as JUnit)
//! and its counts compared with the closing line the harness printed. Also: filters and `--list`, strict
//! mode, and one serve per gate under nextest (several processes sharing one nextest run id), or a refusal.

use quick_xml::events::Event;

/// The element rules of the Jenkins JUnit schema (jenkinsci/xunit-plugin,
/// `src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd`, the newest the plugin
/// validates against; Ant's format as Jenkins, GitLab and GitHub reporters read it): for each element, its
/// allowed attributes (required ones marked `!`) and allowed children. The schema is not vendored: no XSD
/// validator is available offline (python3's stdlib has none, libxml2-utils is not installed), so its rules
/// are checked here instead, element by element, in document order.
const JUNIT10: &[(&str, &[&str], &[&str])] = &[
    (
        "testsuites",
        &["name", "time", "tests", "failures", "disabled", "errors"],
        &["testsuite"],
    ),
    (
        "testsuite",
        &[
            "!name",
            "!tests",
            "failures",
            "errors",
            "group",
            "time",
            "disabled",
            "skipped",
            "timestamp",
            "hostname",
            "id",
            "package",
            "file",
            "log",
            "url",
            "version",
        ],
        &["properties", "testcase", "system-out", "system-err"],
    ),
    ("properties", &[], &["property"]),
    ("property", &["!name", "!value"], &[]),
    (
        "testcase",
        &[
            "!name",
            "assertions",
            "time",
            "classname",
            "status",
            "class",
            "file",
            "line",
            "log",
            "group",
            "url",
        ],
        // + `properties`: per-testcase properties (state, gate file and line, evidence, model sha256, engine
        // version) as Maven Surefire's schema allows and the Jenkins JUnit plugin, GitLab and
        // GitHub test reporters read; junit-10.xsd itself has none.
        &[
            "properties",
            "skipped",
            "error",
            "failure",
            "system-out",
            "system-err",
        ],
    ),
    ("skipped", &["message"], &[]),
    ("error", &["message", "type"], &[]),
    ("failure", &["message", "type"], &[]),
    ("system-out", &[], &[]),
    ("system-err", &[], &[]),
];

/// Checks `text` against [`JUNIT10`]: a `<testsuites>` root, only known elements where the schema puts them,
/// required attributes present and no others; inside a `<testsuite>`, `<properties>` at most once and first,
/// then the testcases; `time` attributes plain decimal seconds (the schema's `SUREFIRE_TIME`: digits, an
/// optional dot and at most three decimals); numeric counts whole numbers.
fn assert_junit_schema(text: &str) {
    let rule = |name: &str| {
        JUNIT10
            .iter()
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("<{name}> is not a JUnit element"))
    };
    let time = regex::Regex::new(r"^[0-9]+(\.[0-9]{1,3})?$").unwrap();
    let whole = regex::Regex::new(r"^[0-9]+$").unwrap();
    let mut reader = quick_xml::Reader::from_str(text);
    let mut stack: Vec<(String, Vec<String>)> = Vec::new();
    let check = |e: &quick_xml::events::BytesStart, stack: &mut Vec<(String, Vec<String>)>| {
        let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
        let (_, attrs, _) = rule(&name);
        match stack.last_mut() {
            None => assert_eq!(name, "testsuites", "the root element"),
            Some((parent, children)) => {
                let (_, _, allowed) = rule(parent);
                assert!(
                    allowed.contains(&name.as_str()),
                    "<{name}> inside <{parent}>"
                );
                if name == "properties" {
                    assert!(
                        children.is_empty(),
                        "<properties> first and once in <{parent}>"
                    );
                }
                children.push(name.clone());
            }
        }
        let mut present = Vec::new();
        for a in e.attributes() {
            let a = a.unwrap();
            let key = String::from_utf8(a.key.as_ref().to_vec()).unwrap();
            let value = a.unescape_value().unwrap().to_string();
            assert!(
                attrs.iter().any(|k| k.trim_start_matches('!') == key),
                "attribute {key} on <{name}>"
            );
            if key == "time" {
                assert!(time.is_match(&value), "time=\"{value}\" on <{name}>");
            }
            if ["tests", "failures", "errors", "disabled", "skipped"].contains(&key.as_str()) {
                assert!(whole.is_match(&value), "{key}=\"{value}\" on <{name}>");
            }
            present.push(key);
        }
        for req in attrs.iter().filter_map(|k| k.strip_prefix('!')) {
            assert!(
                present.iter().any(|p| p == req),
                "<{name}> without its {req}"
            );
        }
        name
    };
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) => {
                let name = check(&e, &mut stack);
                stack.push((name, Vec::new()));
            }
            Event::Empty(e) => {
                check(&e, &mut stack);
            }
            Event::End(_) => {
                stack.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
}

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
