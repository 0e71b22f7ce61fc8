//! What goes here: the field cases whose expected values belong to the judge, the route, the JUnit exporter
//! or the model listing, checked in process. Through the binary (`inspect --models`, `inspect FILE.log`,
//! `check`): tests/cli/cases.rs.
//!
//! The second set of shared cases not covered by tests/pure/cases/mod.rs and tests/cli/inspect.rs (CASES.md sections 36,
//! 38, 41, 42, 44; inputs in tests/data/cases, copied from shared/cases). Each expected value is checked through
//! the part of servegate that owns it: 36 through `servegate inspect --model --models` (the reply judged against
//! the serve's `/v1/models` answer, the case's polls.jsonl), 38 through `servegate inspect FILE.log --require
//! --forbid` and through the route judge (`servegate judge` on a run dir holding the case's log), 41/42 through
//! the JUnit exporter (the case's results.json as servegate results), 44 through `servegate check`.

use crate::fixtures::cases::{expected, text, C38};
use regex::Regex;
use serde_json::Value;
use servegate::judge::strip_escapes;
use servegate::sinks::export::Format;
use servegate::sinks::report::{
    AssertionResult, Counts, FailureKind, GateResults, GateStatus, Producer, Results, TestOutcome,
};

// ---------------------------------------------------------------------------------------------------------
// 27 (first set, not a reply): the models listing of another server on the port. The live run fails it
// `wrong_server_answering` with `[serve] expect_model` (tests/cli/serve_lifecycle.rs); here the listing is read
// as `servegate inspect --models` reads it and judged with the same comparison the runner uses.

#[test]
fn case_27_the_listing_of_another_server_does_not_serve_the_expected_model() {
    let e = expected("case-27-port-in-use-wrong-server");
    let want = &e["expected"]["main"];
    let name = "case-27-port-in-use-wrong-server.models.json";
    let seen = servegate::inspect::served_models_of(name, text(name).as_bytes()).unwrap();
    assert_eq!(Value::from(seen.clone()), want["seen_models"]);
    let expect = want["expected_model"].as_str().unwrap();
    assert_eq!(
        servegate::analysis::reply::model_served(expect, &seen),
        Some(false)
    );
    assert_eq!(want["fail_reason"], "wrong_server_answering");
    assert_eq!(
        servegate::vocab::FailureCode::of_recorded(
            "wrong_server_answering: /v1/models lists [\"server-A\"]"
        ),
        Some(servegate::vocab::FailureCode::WrongServerAnswering)
    );
}

// ---------------------------------------------------------------------------------------------------------
// 38: ANSI colour in the serve log

/// First (1-based line, captures) where `re` matches a line of `log`, read as the route judge reads it.
fn first_match(log: &str, re: &Regex) -> Option<(usize, Vec<(String, String)>)> {
    log.lines().enumerate().find_map(|(i, l)| {
        re.captures(l).map(|c| {
            let caps = re
                .capture_names()
                .flatten()
                .filter_map(|n| c.name(n).map(|m| (n.to_string(), m.as_str().to_string())))
                .collect();
            (i + 1, caps)
        })
    })
}

#[test]
fn case_38_route_regexes_match_the_stripped_log_and_miss_the_raw_one() {
    let e = expected(C38);
    let route = &e["inputs"]["route"];
    let require = Regex::new(route["require"].as_str().unwrap()).unwrap();
    let forbid = Regex::new(route["forbid"].as_str().unwrap()).unwrap();
    let csi = Regex::new("\x1b\\[[0-?]*[ -/]*[@-~]").unwrap();
    for v in ["a", "b"] {
        let want = &e["expected"][v];
        let raw = text(&format!("{C38}.{v}.log"));
        assert_eq!(
            csi.find_iter(&raw).count() as u64,
            want["ansi_sequences_stripped"].as_u64().unwrap(),
            "{v}: sequences in the input"
        );
        let log = strip_escapes(&raw);
        assert!(!log.contains('\x1b'), "{v}: an escape survived");
        assert_eq!(
            log.lines().count(),
            raw.lines().count(),
            "{v}: line numbers hold"
        );
        let (line, caps) = first_match(&log, &require).expect("require matches the stripped log");
        assert_eq!(Some(line as u64), want["route_line"].as_u64(), "{v}");
        assert_eq!(
            caps,
            vec![(
                "backend".into(),
                want["captures"]["backend"].as_str().unwrap().into()
            )]
        );
        let forbid_hit = first_match(&log, &forbid);
        assert_eq!(
            forbid_hit.is_some(),
            want["forbid_matched"].as_bool().unwrap(),
            "{v}"
        );
        if let Some((fl, fc)) = forbid_hit {
            assert_eq!(Some(fl as u64), want["forbid_line"].as_u64());
            assert_eq!(
                fc,
                vec![("op".into(), want["captures"]["op"].as_str().unwrap().into())]
            );
        }
        // Without stripping, both would miss (the case's `_wrong_without_strip`).
        assert!(
            first_match(&raw, &require).is_none(),
            "{v}: raw text should not match"
        );
        assert!(
            first_match(&raw, &forbid).is_none(),
            "{v}: raw text should not match"
        );
    }
}

#[test]
fn case_38_the_route_verdict_says_how_many_escape_sequences_it_removed() {
    let e = expected(C38);
    for v in ["a", "b"] {
        let raw = text(&format!("{C38}.{v}.log"));
        let (log, n) = servegate::judge::strip_escapes_counted(&raw);
        assert_eq!(log, strip_escapes(&raw));
        assert_eq!(
            Some(n as u64),
            e["expected"][v]["ansi_sequences_stripped"].as_u64(),
            "{v}"
        );
    }
    assert_eq!(servegate::judge::strip_escapes_counted("plain\n").1, 0);
}

// ---------------------------------------------------------------------------------------------------------
// 41/42: JUnit

/// The results of a case's `results.json` as servegate results: one gate named after the model, one
/// assertion per case entry, its test name the prompt (so entries of two routes collide, as in the case).
fn results_of(case_results: &Value) -> Results {
    let model = case_results["model"].as_str().unwrap().to_string();
    let assertions: Vec<AssertionResult> = case_results["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let ok = c["ok"].as_bool().unwrap();
            let mut message = c["fail_reason"].as_str().unwrap_or("ok").to_string();
            if let Some(got) = c["got_content"].as_str() {
                message = format!("{message}\ngot: {got}");
            }
            AssertionResult {
                name: "content".into(),
                test: c["prompt"].as_str().unwrap().into(),
                outcome: if ok {
                    TestOutcome::Passed
                } else {
                    TestOutcome::Failed
                },
                failure_kind: (!ok).then_some(FailureKind::Assertion),
                message,
                duration_s: c["seconds"].as_f64().unwrap(),
                median: None,
                bound: None,
                bound_kind: None,
                unit: None,
                metric: None,
                values: vec![],
                skip_reason: None,
                line: None,
            }
        })
        .collect();
    let failed = assertions
        .iter()
        .filter(|a| a.outcome == TestOutcome::Failed)
        .count() as u64;
    let tests = assertions.len() as u64;
    Results {
        schema: "servegate-results/1".into(),
        servegate_version: "test".into(),
        producer: Producer::Run,
        started_utc: "2026-01-01T00:00:00Z".into(),
        ended_utc: "2026-01-01T00:00:09Z".into(),
        duration_s: 9.0,
        strict: false,
        exit_code: i32::from(failed > 0),
        counts: Counts {
            tests,
            passed: tests - failed,
            failed,
            skipped: 0,
            ..Counts::default()
        },
        gates: vec![GateResults {
            name: model,
            file: "gates/case.toml".into(),
            description: String::new(),
            status: if failed > 0 {
                GateStatus::Failed
            } else {
                GateStatus::Passed
            },
            failure_kind: (failed > 0).then_some(FailureKind::Assertion),
            exit_code: i32::from(failed > 0),
            reason: None,
            duration_s: 8.6,
            provenance: None,
            assertions,
            requests: vec![],
            serve_log_tail: None,
            not_run: vec![],
        }],
        problems: vec![],
    }
}

/// The JUnit XML servegate writes for `results`; asserts it is well-formed XML 1.0.
fn junit_of(results: &Results) -> String {
    let bytes = Format::Junit
        .exporter()
        .serialize(results)
        .expect("serializes");
    let text = String::from_utf8(bytes).expect("UTF-8");
    assert!(
        text.chars().all(xml10),
        "a character XML 1.0 forbids: {text:?}"
    );
    let mut reader = quick_xml::Reader::from_str(&text);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("not well-formed: {e}\n{text}"),
        }
    }
    text
}

/// (classname, name) of every testcase of `junit`, in order.
fn case_ids(junit: &str) -> Vec<(String, String)> {
    let tc = Regex::new(r"<testcase [^>]*>").unwrap();
    let attr = |t: &str, k: &str| {
        Regex::new(&format!(r#"\b{k}="([^"]*)""#))
            .unwrap()
            .captures(t)
            .map(|c| c[1].to_string())
            .unwrap()
    };
    tc.find_iter(junit)
        .map(|m| (attr(m.as_str(), "classname"), attr(m.as_str(), "name")))
        .collect()
}

const C41: &str = "case-41-junit-duplicate-ids-dotted-classname";

#[test]
fn case_41_junit_ids_are_unique_and_no_model_dot_becomes_a_package() {
    let e = expected(C41);
    // The naive file of the case really has the duplicates the case's lint names.
    let mut seen = std::collections::BTreeMap::<(String, String), usize>::new();
    for id in case_ids(&text(&format!("{C41}.a.junit.xml"))) {
        *seen.entry(id).or_default() += 1;
    }
    let dups: Vec<Value> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|((c, n), _)| serde_json::json!([c, n]))
        .collect();
    assert_eq!(Value::Array(dups), e["expected"]["a"]["duplicate_case_ids"]);

    let results: Value = serde_json::from_str(&text(&format!("{C41}.results.json"))).unwrap();
    let junit = junit_of(&results_of(&results));
    let ids = case_ids(&junit);
    let want = &e["expected"]["b"];
    assert_eq!(ids.len() as u64, want["tests"].as_u64().unwrap());
    assert_eq!(
        junit.matches("<failure").count() as u64,
        want["failures"].as_u64().unwrap()
    );
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "duplicate (classname, name): {ids:?}"
    );
    for (class, _) in &ids {
        // Jenkins splits at the last dot into package and class.
        let (package, class) = class.rsplit_once('.').expect("a package");
        assert_eq!(package, want["jenkins_split"]["package"], "{ids:?}");
        assert_eq!(class, want["jenkins_split"]["class"], "{ids:?}");
    }
    // servegate's testcases are `<gate>::<assertion>` (one serve, one route per gate), so the route is no part
    // of a test's name; a name repeated within a classname gets ` #2` before writing (docs/ci.md).
    assert_eq!(ids[1].1, "chat-short #2");
}

fn xml10(c: char) -> bool {
    matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

const C42: &str = "case-42-junit-illegal-xml-chars";

#[test]
fn case_42_illegal_xml_characters_are_escaped_visibly_and_the_file_stays_well_formed() {
    let e = expected(C42);
    let mut results: Value = serde_json::from_str(&text(&format!("{C42}.results.json"))).unwrap();
    // The results file spells U+FFFE as `M-oM-?M->` (cat -v of EF BF BE); the case means the code point.
    let got = results["cases"][0]["got_content"]
        .as_str()
        .unwrap()
        .replace("M-oM-?M->", "\u{FFFE}");
    assert!(got.contains('\u{0}') && got.contains('\u{FFFE}') && got.contains("]]>"));
    results["cases"][0]["got_content"] = Value::from(got);
    assert_eq!(e["expected"]["b"]["well_formed"], true);
    let junit = junit_of(&results_of(&results));
    assert!(!junit.contains("<![CDATA["), "no CDATA");
    // The case's failure text, with `>` escaped as XML writes it.
    let want_text = e["expected"]["b"]["failure_text"].as_str().unwrap();
    assert!(
        junit.contains(&want_text.replace('>', "&gt;")),
        "{want_text} in {junit}"
    );
    for (code, n) in e["expected"]["b"]["substitutions"].as_object().unwrap() {
        let hex = code.trim_start_matches("U+").to_lowercase();
        assert_eq!(
            junit.matches(&format!("\\u{hex}")).count() as u64,
            n.as_u64().unwrap(),
            "{code}"
        );
    }
    assert!(!junit.contains('\x1b'));
}
