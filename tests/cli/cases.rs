//! What goes here: the field cases through the binary (`servegate inspect --model --models`, `servegate
//! inspect FILE.log`, `servegate check`). The same cases in process: tests/pure/cases/outside_the_stream.rs;
//! the stream and body cases: tests/pure/cases/ and tests/cli/inspect.rs.
//!
//! The second set of shared cases not covered by tests/pure/cases/mod.rs and tests/cli/inspect.rs (CASES.md sections 36,
//! 38, 41, 42, 44; inputs in tests/data/cases, copied from shared/cases). Each expected value is checked through
//! the part of servegate that owns it: 36 through `servegate inspect --model --models` (the reply judged against
//! the serve's `/v1/models` answer, the case's polls.jsonl), 38 through `servegate inspect FILE.log --require
//! --forbid` and through the route judge (`servegate judge` on a run dir holding the case's log), 41/42 through
//! the JUnit exporter (the case's results.json as servegate results), 44 through `servegate check`.

use std::path::Path;

use crate::fixtures;
use crate::fixtures::cases::{data_dir, expected, C38};
use serde_json::Value;

/// `servegate inspect FILE`'s `summary` object.
fn inspect_summary(name: &str) -> Value {
    inspect_with(name, &[])
}

/// `servegate inspect FILE ARGS...`'s `summary` object (a path argument after `--models` is in the data dir).
fn inspect_with(name: &str, args: &[&str]) -> Value {
    let mut cmd = fixtures::servegate();
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
        // `warnings` name notes that must be there (tests/cli/inspect.rs's reading): none here, and the flag is one.
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
        let out = fixtures::servegate()
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
    // The code's older name still reads as the same code in old evidence and results.
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
// 38: ANSI colour in the serve log

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

// ---------------------------------------------------------------------------------------------------------
// 44: TOML int/float and unknown keys, through `servegate check` (the case's keys mapped onto servegate's
// spec: gate.decode_floor_tok_s -> assert.rate.floor_tok_s, gate.max_tokens -> request.max_tokens)

fn gate(floor: &str, max_tokens: &str) -> String {
    // The scripted serve (checked, never started here).
    let serve = fixtures::scripted_command(&servegate::replay::scripted::Script::default());
    format!(
        "[gate]\nname = \"c44\"\n[serve]\ncommand = {serve}\n\
         [request]\nmodel = \"qwen2.5-7b-instruct\"\nmax_tokens = {max_tokens}\nprompts = [\"hi\"]\n\
         [assert.rate]\n{floor}\n"
    )
}

fn check(text: &str) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("g.toml");
    std::fs::write(&file, text).unwrap();
    let o = fixtures::servegate()
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
