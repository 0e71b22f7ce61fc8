//! The second set of shared cases not covered by tests/cases.rs and tests/inspect.rs (CASES.md sections 36,
//! 38, 41, 42, 44; inputs in tests/data/cases, copied from shared/cases). Each expected value is checked through
//! the part of servegate that owns it: 36 through `servegate inspect --model --models` (the reply judged against
//! the serve's `/v1/models` answer, the case's polls.jsonl), 38 through `servegate inspect FILE.log --require
//! --forbid` and through the route judge (`servegate judge` on a run dir holding the case's log), 41/42 through
//! the JUnit exporter (the case's results.json as servegate results), 44 through `servegate check`.

use std::path::{Path, PathBuf};
use std::process::Command;

use regex::Regex;
use serde_json::Value;
use servegate::judge::strip_escapes;
use servegate::sinks::export::Format;
use servegate::sinks::report::{
    AssertionResult, Counts, FailureKind, GateResults, GateStatus, Producer, Results, TestOutcome,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/cases")
}

fn text(name: &str) -> String {
    std::fs::read_to_string(data_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn expected(case: &str) -> Value {
    serde_json::from_str(&text(&format!("{case}.expected.json"))).expect("expected.json")
}

/// `servegate inspect FILE`'s `summary` object.
fn inspect_summary(name: &str) -> Value {
    inspect_with(name, &[])
}

/// `servegate inspect FILE ARGS...`'s `summary` object (a path argument after `--models` is in the data dir).
fn inspect_with(name: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_servegate"));
    cmd.arg("inspect").arg(data_dir().join(name));
    let mut it = args.iter();
    while let Some(a) = it.next() {
        cmd.arg(a);
        if *a == "--models" {
            cmd.arg(data_dir().join(it.next().unwrap()));
        }
    }
    let out = cmd.output().expect("run servegate");
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["summary"].clone()
}

// ---------------------------------------------------------------------------------------------------------
// 36: the model echo is not identity

const C36: &str = "case-36-model-echo-is-not-identity";

#[test]
fn case_36_a_an_echoed_model_is_not_identity_the_models_listing_is() {
    let e = expected(C36);
    let a = &e["expected"]["a"];
    let want_model = e["inputs"]["request"]["model"].as_str().unwrap();
    let polls = format!("{C36}.polls.jsonl");
    for input in ["a.sse", "a.reads.jsonl"] {
        let s = inspect_with(
            &format!("{C36}.{input}"),
            &["--model", want_model, "--models", &polls],
        );
        for key in [
            "ok",
            "fail_reason",
            "served_models",
            "requested_model",
            "response_model",
            "flags",
            "ttft_ms",
            "decode_tok_s",
            "content",
            "done_seen",
            "publish_record",
        ] {
            assert_eq!(s[key], a[key], "{input}: {key}");
        }
        // `warnings` name notes that must be there (tests/inspect.rs's reading): none here, and the flag is one.
        assert!(a["warnings"].as_array().unwrap().is_empty());
        assert!(s["notes"]
            .as_array()
            .unwrap()
            .contains(&Value::from("response_model_echoes_request")));
        assert!(
            s["fail_detail"]
                .as_str()
                .unwrap()
                .starts_with("model_not_served: the request asks for \"llama-3.1-8b-instruct\""),
            "{s}"
        );
        // Without the serve's listing there is nothing to judge identity by: the reply alone is clean.
        let alone = inspect_summary(&format!("{C36}.{input}"));
        assert_eq!(alone["ok"], true, "{input}");
        assert_eq!(alone["model"].as_str(), Some(want_model));
        // A serve that does list the asked model passes the same reply.
        let listed = tempfile::tempdir().unwrap();
        let models = listed.path().join("models.json");
        std::fs::write(&models, format!(r#"{{"data":[{{"id":"{want_model}"}}]}}"#)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_servegate"))
            .arg("inspect")
            .arg(data_dir().join(format!("{C36}.{input}")))
            .args(["--model", want_model, "--models"])
            .arg(&models)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["summary"]["ok"], true, "{input}");
        assert_eq!(v["summary"]["flags"], serde_json::json!([]), "{input}");
    }
}

#[test]
fn case_36_b_a_404_for_the_model_is_a_failed_reply_with_the_serves_message() {
    let b = &expected(C36)["expected"]["b"];
    let s = inspect_summary(&format!("{C36}.b.http"));
    assert_eq!(s["ok"], b["ok"]);
    assert_eq!(s["http_status"], b["http_status"]);
    assert_eq!(s["error_message"], b["error_message"]);
    assert_eq!(s["ttft_ms"], b["ttft_ms"]);
    assert_eq!(s["decode_tok_s"], b["decode_tok_s"]);
    assert_eq!(s["completion_tokens"], b["completion_tokens"]);
    assert_eq!(s["done_seen"], b["done_seen"]);
    assert_eq!(s["publish_record"], b["publish_record"]);
    assert_eq!(s["flags"], b["flags"]);
    assert_eq!(s["warnings"], b["warnings"]);
    assert_eq!(s["fail_reason"], b["fail_reason"]);
    // The code's name before issue 15 still reads as the same code in old evidence and results.
    assert_eq!(
        servegate::vocab::FailureCode::of_recorded("http_error: 404"),
        Some(servegate::vocab::FailureCode::HttpStatus)
    );
    assert_eq!(
        servegate::vocab::Note::read("http_error: no model").name(),
        "http_status"
    );
}

// ---------------------------------------------------------------------------------------------------------
// 27 (first set, not a reply): the models listing of another server on the port. The live run fails it
// `wrong_server_answering` with `[serve] expect_model` (tests/serve_lifecycle.rs); here the listing is read
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

const C38: &str = "case-38-ansi-colour-in-serve-log";

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
fn case_38_through_inspect_the_log_is_read_stripped_and_the_stripped_sequences_counted() {
    let e = expected(C38);
    let route = &e["inputs"]["route"];
    let args = [
        "--require",
        route["require"].as_str().unwrap(),
        "--forbid",
        route["forbid"].as_str().unwrap(),
    ];
    for v in ["a", "b"] {
        let want = &e["expected"][v];
        let s = inspect_with(&format!("{C38}.{v}.log"), &args);
        for key in [
            "ok",
            "route_matched",
            "route_line",
            "forbid_matched",
            "ansi_sequences_stripped",
            "flags",
            "warnings",
            "captures",
        ] {
            assert_eq!(s[key], want[key], "{v}: {key}");
        }
        if want["ok"] == false {
            assert_eq!(s["fail_reason"], want["fail_reason"], "{v}");
            assert_eq!(s["forbid_line"], want["forbid_line"], "{v}");
        } else {
            assert_eq!(s["fail_reason"], Value::Null);
        }
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
                unit: None,
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

// ---------------------------------------------------------------------------------------------------------
// 44: TOML int/float and unknown keys, through `servegate check` (the case's keys mapped onto servegate's
// spec: gate.decode_floor_tok_s -> assert.rate.floor_tok_s, gate.max_tokens -> request.max_tokens)

fn gate(floor: &str, max_tokens: &str) -> String {
    format!(
        "[gate]\nname = \"c44\"\n[serve]\ncommand = [\"python3\", \"serve.py\", \"--port\", \"{{port}}\"]\n\
         [request]\nmodel = \"qwen2.5-7b-instruct\"\nmax_tokens = {max_tokens}\nprompts = [\"hi\"]\n\
         [assert.rate]\n{floor}\n"
    )
}

fn check(text: &str) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("g.toml");
    std::fs::write(&file, text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_servegate"))
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    (
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn case_44_int_for_float_is_accepted_misspelling_and_float_for_int_are_refused() {
    let e = expected("case-44-toml-int-float-and-unknown-keys");
    let want = &e["expected"];
    // a: `floor_tok_s = 60` (integer) is accepted and read as 60.0.
    let a = gate("floor_tok_s = 60", "256");
    let (code, out) = check(&a);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(want["a"]["config_ok"], true);
    let spec = servegate::spec::parse(
        Path::new("a.toml"),
        &a,
        &servegate::spec::Context::for_file(Path::new("a.toml")),
    )
    .expect("parses");
    let rate = spec.assertions.rate.expect("rate");
    assert_eq!(
        Value::from(rate.floor_tok_s),
        want["a"]["effective"]["decode_floor_tok_s"]
    );
    assert_eq!(
        Value::from(spec.request.max_tokens),
        want["a"]["effective"]["max_tokens"]
    );
    // b: misspelled key, refused with a did-you-mean on its line.
    let (code, out) = check(&gate("flor_tok_s = 60.0", "256"));
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(want["b"]["config_ok"], false);
    assert!(out.contains("assert.rate.flor_tok_s"), "{out}");
    assert!(out.contains("unknown field"), "{out}");
    assert!(out.contains("did you mean `floor_tok_s`"), "{out}");
    assert!(out.contains(":10:"), "names the line: {out}");
    // c: a float where a whole number is expected, refused naming the key and the value.
    let (code, out) = check(&gate("floor_tok_s = 60.0", "256.0"));
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(want["c"]["config_ok"], false);
    assert!(out.contains("request.max_tokens"), "{out}");
    assert!(
        out.contains("256.0") && out.contains("whole number"),
        "{out}"
    );
}
