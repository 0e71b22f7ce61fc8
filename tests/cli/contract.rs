//! `[contract]` end to end (docs/contract.md): `servegate run` on a gate whose serve is the scripted serve
//! (src/replay/scripted.rs), the check's requests sent after the speed trial, written under
//! `contract/<check>/` and judged from there. What goes here: for each check, one scripted serve that honours
//! it (PASS) and one that breaks it (FAIL with the reason); unsupported, hang and garbage answers; and
//! `servegate check`'s refusals of a bad `[contract]`. The judging rules alone are unit-tested in
//! crates/core/src/judge/contract/tests.rs.
//!
//! The scripted serve answers chat requests by arrival order (`Script::replies`): reply 0 is the gate's one
//! speed-trial request, the next ones the check's requests in the order `spec::contract::requests` sends them.

use std::path::{Path, PathBuf};

use servegate::replay::scripted::{Crash, LogLine, OnDrop, Reply, Route, Script, ToolCall};

use crate::fixtures;

/// Writes a gate running `contract` (the `[contract]` table's body) on a scripted serve answering the
/// speed trial with the default reply and the contract requests with `replies`; runs it. Returns the
/// output's text, the temp project (kept alive) and the run directory in it.
fn run(contract: &str, replies: Vec<Reply>) -> (String, tempfile::TempDir, PathBuf) {
    run_script(
        contract,
        Script {
            replies,
            ..Script::default()
        },
    )
}

/// As [`run`], on `script` (its `replies` answer the contract requests, after the speed trial's default
/// reply).
fn run_script(contract: &str, mut script: Script) -> (String, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    script.replies.insert(0, Reply::default());
    let gate = format!(
        r#"[gate]
name = "contract"
[serve]
command = {command}
[request]
model = "fake"
max_tokens = 8
prompts = ["What is the capital of France?"]
[assert.content]
[contract]
{contract}
"#,
        command = fixtures::scripted_command(&script)
    );
    let path = dir.path().join("gate.toml");
    std::fs::write(&path, gate).unwrap();
    let out = fixtures::servegate_in(&["run", path.to_str().unwrap()], dir.path());
    let text = fixtures::text(&out);
    let ev = fixtures::evidence_dir(&String::from_utf8_lossy(&out.stdout));
    let ev = if ev.is_absolute() {
        ev
    } else {
        dir.path().join(ev)
    };
    (text, dir, ev)
}

/// The verdict line of `check` in `text` (`contract.<check> WORD ...`).
fn line<'a>(text: &'a str, check: &str) -> &'a str {
    let head = format!("contract.{check} ");
    text.lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no verdict line for {check} in:\n{text}"))
}

fn assert_word(text: &str, check: &str, word: &str, has: &str) {
    let l = line(text, check);
    assert!(
        l.starts_with(&format!("contract.{check} {word}")),
        "{check}: expected {word}, got: {l}\n{text}"
    );
    assert!(l.contains(has), "{check}: {l:?} should say {has:?}");
}

fn ok(tokens: &[&str], finish: &str) -> Reply {
    Reply {
        tokens: tokens.iter().map(|t| t.to_string()).collect(),
        finish_reason: Some(finish.into()),
        ..Reply::default()
    }
}

fn status(code: u16) -> Reply {
    Reply {
        status: code,
        ..Reply::default()
    }
}

fn raw(code: u16, body: &str) -> Reply {
    Reply {
        status: code,
        body: Some(body.into()),
        stream: Some(false),
        ..Reply::default()
    }
}

fn has_file(dir: &Path, rel: &str) -> bool {
    dir.join(rel).is_file()
}

#[test]
fn shape_passes_on_the_openai_objects_and_its_evidence_is_on_disk() {
    let (text, _d, dir) = run(
        r#"expect = ["shape"]"#,
        vec![Reply::default(), Reply::default(), status(400)],
    );
    assert_word(&text, "shape", "PASS", "match the OpenAI objects");
    for f in [
        "contract/shape/check.json",
        "contract/shape/body.request.json",
        "contract/shape/stream.reads.jsonl",
        "contract/shape/error.response.json",
    ] {
        assert!(has_file(&dir, f), "{f} missing in {}", dir.display());
    }
}

#[test]
fn shape_fails_a_body_without_an_id() {
    let body = r#"{"object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Paris."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}"#;
    let (text, _d, _) = run(
        r#"expect = ["shape"]"#,
        vec![raw(200, body), Reply::default(), status(400)],
    );
    assert_word(&text, "shape", "FAIL", "\"id\" is a required property");
}

#[test]
fn max_tokens_passes_a_serve_that_stops_at_the_count() {
    let (text, _d, _) = run(
        "expect = [\"max_tokens\"]\n[contract.max_tokens]\nmax_tokens = 3",
        vec![ok(&["1", "\n2", "\n3"], "length"), Reply::default()],
    );
    assert_word(&text, "max_tokens", "PASS", "exactly max_tokens 3");
}

#[test]
fn max_tokens_fails_a_serve_that_runs_past_the_count() {
    let (text, _d, _) = run(
        "expect = [\"max_tokens\"]\n[contract.max_tokens]\nmax_tokens = 3",
        vec![
            ok(&["1", "\n2", "\n3", "\n4", "\n5"], "stop"),
            Reply::default(),
        ],
    );
    assert_word(
        &text,
        "max_tokens",
        "FAIL",
        "after 5 tokens, not \"length\"",
    );
}

#[test]
fn stop_passes_a_serve_that_honours_it_and_fails_one_that_leaves_it_in() {
    let honoured = ok(&["1, 2, 3, 4, "], "stop");
    let (text, _d, _) = run(r#"expect = ["stop"]"#, vec![honoured.clone(), honoured]);
    assert_word(&text, "stop", "PASS", "honoured");
    let left_in = ok(&["1, 2, 3, 4, 5"], "stop");
    let (text, _d, _) = run(r#"expect = ["stop"]"#, vec![left_in.clone(), left_in]);
    assert_word(&text, "stop", "FAIL", "is in the text");
}

#[test]
fn usage_passes_when_it_adds_up_and_fails_a_stream_that_undercounts() {
    let (text, _d, _) = run(
        r#"expect = ["usage"]"#,
        vec![Reply::default(), Reply::default()],
    );
    assert_word(&text, "usage", "PASS", "9 + 2 = 11");
    let undercount = Reply {
        completion_tokens: Some(1),
        ..Reply::default()
    };
    let (text, _d, _) = run(r#"expect = ["usage"]"#, vec![Reply::default(), undercount]);
    assert_word(&text, "usage", "FAIL", "fewer than its 2 token chunks");
}

#[test]
fn stream_parity_passes_the_same_answer_and_fails_a_different_stream() {
    let (text, _d, _) = run(
        r#"expect = ["stream_parity"]"#,
        vec![Reply::default(), Reply::default()],
    );
    assert_word(&text, "stream_parity", "PASS", "the same text");
    let (text, _d, _) = run(
        r#"expect = ["stream_parity"]"#,
        vec![Reply::default(), ok(&["Lyon", "."], "stop")],
    );
    assert_word(
        &text,
        "stream_parity",
        "FAIL",
        "the texts differ from character 0",
    );
}

#[test]
fn errors_passes_4xx_answers_and_fails_a_serve_that_takes_an_unknown_model() {
    let (text, _d, _) = run(
        r#"expect = ["errors"]"#,
        vec![
            status(400),
            status(400),
            status(400),
            status(404),
            Reply::default(),
        ],
    );
    assert_word(&text, "errors", "PASS", "unknown_model 404");
    let (text, _d, _) = run(
        r#"expect = ["errors"]"#,
        vec![
            status(400),
            status(400),
            status(400),
            Reply::default(),
            Reply::default(),
        ],
    );
    assert_word(
        &text,
        "errors",
        "FAIL",
        "`unknown_model` (an unknown model) got HTTP 200",
    );
    let (text, _d, _) = run(
        r#"expect = ["errors"]"#,
        vec![
            status(400),
            status(500),
            status(400),
            status(400),
            Reply::default(),
        ],
    );
    assert_word(
        &text,
        "errors",
        "FAIL",
        "`bad_role` (a bad role) got HTTP 500",
    );
}

#[test]
fn errors_a_serve_that_takes_malformed_requests_as_ordinary_ones_lacks_validation() {
    // llama.cpp's answer (docs/contract.md "Measured"): an unknown model and a bad role get a 200 chat
    // completion. Allowed by may_lack (its own state, with the cases), a failure under expect.
    let replies = || {
        vec![
            status(400),
            Reply::default(),
            status(400),
            Reply::default(),
            Reply::default(),
        ]
    };
    let (text, _d, _) = run(r#"may_lack = ["errors"]"#, replies());
    assert_word(
        &text,
        "errors",
        "UNSUPPORTED",
        "does not reject every malformed request",
    );
    let (text, _d, _) = run(r#"expect = ["errors"]"#, replies());
    assert_word(
        &text,
        "errors",
        "FAIL",
        "unsupported, and [contract] expect lists it",
    );
}

#[test]
fn an_unsupported_check_fails_when_expected_and_is_its_own_state_when_it_may_lack() {
    let no = raw(
        400,
        r#"{"error":{"message":"'stop' is not supported by this server","type":"invalid_request_error"}}"#,
    );
    let (text, _d, _) = run(r#"may_lack = ["stop"]"#, vec![no.clone(), no.clone()]);
    assert_word(&text, "stop", "UNSUPPORTED", "is not supported");
    let (text, _d, _) = run(r#"expect = ["stop"]"#, vec![no.clone(), no]);
    assert_word(
        &text,
        "stop",
        "FAIL",
        "unsupported, and [contract] expect lists it",
    );
}

#[test]
fn a_hang_or_garbage_fails_its_check_and_the_next_check_still_runs() {
    // `shape`'s body request stalls past its 1 s limit; `usage` after it is answered as usual.
    let hang = Reply {
        stream: Some(true),
        stall_after: Some(1),
        ..Reply::default()
    };
    let (text, _d, _) = run(
        "expect = [\"shape\", \"usage\"]\n[contract.shape]\ntimeout_s = 1",
        vec![
            hang,
            Reply::default(),
            status(400),
            Reply::default(),
            Reply::default(),
        ],
    );
    assert_word(&text, "shape", "FAIL", "no whole reply");
    assert_word(&text, "usage", "PASS", "9 + 2 = 11");
    let (text, _d, _) = run(
        r#"expect = ["stream_parity"]"#,
        vec![raw(200, "<html>oops</html>"), Reply::default()],
    );
    assert_word(&text, "stream_parity", "FAIL", "not one JSON document");
}

/// `servegate check` on a gate whose `[contract]` body is `contract`: its output.
fn check(contract: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let gate = format!(
        "[gate]\nname = \"c\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\n[contract]\n{contract}\n"
    );
    let path = dir.path().join("gate.toml");
    std::fs::write(&path, gate).unwrap();
    let out = fixtures::servegate_in(&["check", path.to_str().unwrap()], dir.path());
    assert!(!out.status.success(), "{}", fixtures::text(&out));
    fixtures::text(&out)
}

#[test]
fn check_refuses_an_unknown_check_with_its_line_a_suggestion_and_the_known_ones() {
    let text = check("expect = [\"shape\",\n  \"stp\"]");
    assert!(text.contains(":11:"), "the line of the entry: {text}");
    assert!(
        text.contains("unknown contract check \\\"stp\\\"")
            || text.contains("unknown contract check \"stp\""),
        "{text}"
    );
    assert!(text.contains("did you mean"), "{text}");
    assert!(
        text.contains("shape, max_tokens, stop, usage, stream_parity, tools, json_object, json_schema, logprobs, seed, n, errors, cancel, completions, embeddings, responses, models"),
        "{text}"
    );
    let text = check("expect = [\"stop\"]\nmay_lack = [\"stop\"]");
    assert!(text.contains("named twice"), "{text}");
    let text = check("expect = [\"shape\"]\n[contract.stop]\nstop = \"x\"");
    assert!(text.contains("a check the gate does not run"), "{text}");
}

/// A reply calling `get_weather` with `arguments` (in pieces), finish_reason "tool_calls".
fn calls(id: Option<&str>, arguments: &[&str]) -> Reply {
    Reply {
        tokens: Vec::new(),
        tool_calls: vec![ToolCall {
            id: id.map(str::to_string),
            name: "get_weather".into(),
            arguments: arguments.iter().map(|a| a.to_string()).collect(),
        }],
        finish_reason: Some("tool_calls".into()),
        ..Reply::default()
    }
}

#[test]
fn tools_passes_a_named_call_and_fails_arguments_that_are_no_json_or_a_delta_without_an_id() {
    let good = calls(Some("call_1"), &["{\"city\":", " \"Paris\"}"]);
    let (text, _d, _) = run(
        r#"expect = ["tools"]"#,
        vec![Reply::default(), good.clone(), good.clone()],
    );
    assert_word(&text, "tools", "PASS", "called get_weather");
    let bad = calls(Some("call_1"), &["{city: Paris"]);
    let (text, _d, _) = run(
        r#"expect = ["tools"]"#,
        vec![Reply::default(), bad.clone(), bad],
    );
    assert_word(&text, "tools", "FAIL", "do not parse as JSON");
    let (text, _d, _) = run(
        r#"expect = ["tools"]"#,
        vec![
            Reply::default(),
            good,
            calls(None, &["{\"city\": \"Paris\"}"]),
        ],
    );
    assert_word(&text, "tools", "FAIL", "carries no id and type");
}

#[test]
fn tools_dropped_from_the_prompt_are_unsupported_and_a_wrong_finish_fails() {
    // llama.cpp with a chat template that has no tool support (docs/contract.md "Measured"): a plain
    // answer, and the same prompt_tokens as without tools.
    let (text, _d, _) = run(
        r#"may_lack = ["tools"]"#,
        vec![Reply::default(), Reply::default(), Reply::default()],
    );
    assert_word(&text, "tools", "UNSUPPORTED", "ignored silently");
    let stops = Reply {
        finish_reason: Some("stop".into()),
        ..calls(Some("call_1"), &["{\"city\": \"Paris\"}"])
    };
    let (text, _d, _) = run(
        r#"may_lack = ["tools"]"#,
        vec![Reply::default(), stops.clone(), stops],
    );
    assert_word(&text, "tools", "FAIL", "not \"tool_calls\"");
}

#[test]
fn json_object_and_json_schema_pass_valid_json_and_fail_invalid_or_ignored_formats() {
    let (text, _d, _) = run(
        r#"expect = ["json_object"]"#,
        vec![Reply::default(), ok(&["{\"city\": \"Paris\"}"], "stop")],
    );
    assert_word(&text, "json_object", "PASS", "parses as a JSON object");
    let (text, _d, _) = run(
        r#"expect = ["json_object"]"#,
        vec![Reply::default(), ok(&["Paris is the capital."], "stop")],
    );
    assert_word(&text, "json_object", "FAIL", "does not parse as JSON");
    let (text, _d, _) = run(
        r#"may_lack = ["json_object"]"#,
        vec![Reply::default(), Reply::default()],
    );
    assert_word(&text, "json_object", "UNSUPPORTED", "ignored silently");
    let (text, _d, _) = run(
        r#"expect = ["json_schema"]"#,
        vec![
            Reply::default(),
            ok(&["{\"city\": \"Paris\", \"population\": 2102650}"], "stop"),
        ],
    );
    assert_word(&text, "json_schema", "PASS", "validates against the schema");
    let (text, _d, _) = run(
        r#"expect = ["json_schema"]"#,
        vec![Reply::default(), ok(&["{\"city\": \"Paris\"}"], "stop")],
    );
    assert_word(
        &text,
        "json_schema",
        "FAIL",
        "\"population\" is a required property",
    );
}

/// One token's logprob entry: its text, its logprob, its top alternatives (text, logprob).
type Entry<'a> = (&'a str, f64, &'a [(&'a str, f64)]);

/// A chat completion body whose one choice has `logprobs.content` of `entries`.
fn with_logprobs(entries: &[Entry]) -> Reply {
    let content: Vec<serde_json::Value> = entries
        .iter()
        .map(|(t, l, top)| {
            serde_json::json!({"token": t, "logprob": l, "top_logprobs": top.iter().map(|(t, l)| serde_json::json!({"token": t, "logprob": l})).collect::<Vec<_>>()})
        })
        .collect();
    let text: String = entries.iter().map(|e| e.0).collect();
    let body = serde_json::json!({"id": "c", "object": "chat.completion", "created": 1, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length",
            "logprobs": {"content": content}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": entries.len(), "total_tokens": 9 + entries.len()}});
    raw(200, &body.to_string())
}

#[test]
fn logprobs_passes_sorted_alternatives_and_fails_unsorted_ones_or_none() {
    let top: &[(&str, f64)] = &[("1", -0.2), ("One", -2.5), ("Sure", -3.0)];
    let top2: &[(&str, f64)] = &[("\n", -0.2), (",", -1.9), (" ", -4.0)];
    let (text, _d, _) = run(
        r#"expect = ["logprobs"]"#,
        vec![with_logprobs(&[("1", -0.2, top), ("\n", -0.2, top2)])],
    );
    assert_word(&text, "logprobs", "PASS", "3 sorted alternatives");
    let unsorted: &[(&str, f64)] = &[("1", -0.2), ("Sure", -3.0), ("One", -2.5)];
    let (text, _d, _) = run(
        r#"expect = ["logprobs"]"#,
        vec![with_logprobs(&[("1", -0.2, unsorted)])],
    );
    assert_word(&text, "logprobs", "FAIL", "not sorted most likely first");
    let (text, _d, _) = run(r#"may_lack = ["logprobs"]"#, vec![Reply::default()]);
    assert_word(&text, "logprobs", "UNSUPPORTED", "no logprobs.content");
}

#[test]
fn seed_passes_the_same_text_for_the_same_seed_and_is_unsupported_when_it_differs() {
    let (text, _d, _) = run(
        r#"may_lack = ["seed"]"#,
        vec![
            ok(&["A river"], "length"),
            ok(&["A river"], "length"),
            ok(&["The stream"], "length"),
        ],
    );
    assert_word(&text, "seed", "PASS", "seed 42 gave the same text twice");
    let (text, _d, _) = run(
        r#"may_lack = ["seed"]"#,
        vec![
            ok(&["A river"], "length"),
            ok(&["The stream"], "length"),
            ok(&["Water"], "length"),
        ],
    );
    assert_word(&text, "seed", "UNSUPPORTED", "not deterministic by seed");
    let (text, _d, _) = run(
        r#"may_lack = ["seed"]"#,
        vec![Reply::default(), Reply::default(), Reply::default()],
    );
    assert_word(
        &text,
        "seed",
        "INDETERMINATE",
        "the same text at temperature 1",
    );
}

#[test]
fn n_passes_two_choices_and_one_choice_or_a_refusal_of_n_is_unsupported() {
    let two = r#"{"id":"c","object":"chat.completion","created":1,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"A river"},"finish_reason":"length"},{"index":1,"message":{"role":"assistant","content":"The stream"},"finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":16,"total_tokens":25}}"#;
    let (text, _d, _) = run(r#"expect = ["n"]"#, vec![raw(200, two)]);
    assert_word(&text, "n", "PASS", "two choices, index 0 and 1");
    let (text, _d, _) = run(r#"may_lack = ["n"]"#, vec![Reply::default()]);
    assert_word(&text, "n", "UNSUPPORTED", "got 1 choice");
    let refused = r#"{"error":{"code":400,"message":"Field 'n': Value must be between 1 <= value <= 1, but got 2","type":"invalid_request_error"}}"#;
    let (text, _d, _) = run(r#"may_lack = ["n"]"#, vec![raw(400, refused)]);
    assert_word(&text, "n", "UNSUPPORTED", "refusing `n`");
    let (text, _d, _) = run(r#"expect = ["n"]"#, vec![raw(400, refused)]);
    assert_word(
        &text,
        "n",
        "FAIL",
        "unsupported, and [contract] expect lists it",
    );
}

#[test]
fn completions_passes_the_completion_object_and_fails_a_chat_object_or_a_different_stream() {
    let tc = |tokens: &[&str]| Reply {
        text_completion: true,
        ..ok(tokens, "length")
    };
    let (text, _d, dir) = run(
        r#"expect = ["completions"]"#,
        vec![tc(&[" Paris", "."]), tc(&[" Paris", "."])],
    );
    assert_word(&text, "completions", "PASS", "the completion object");
    let sent = std::fs::read_to_string(dir.join("contract/completions/check.json")).unwrap();
    assert!(sent.contains("\"/v1/completions\""), "{sent}");
    let (text, _d, _) = run(
        r#"expect = ["completions"]"#,
        vec![Reply::default(), tc(&[" Paris", "."])],
    );
    assert_word(&text, "completions", "FAIL", "is no completion object");
    let (text, _d, _) = run(
        r#"expect = ["completions"]"#,
        vec![tc(&[" Paris", "."]), tc(&[" Lyon", "."])],
    );
    assert_word(&text, "completions", "FAIL", "the greedy texts differ");
    let (text, _d, _) = run(
        r#"may_lack = ["completions"]"#,
        vec![status(404), status(404)],
    );
    assert_word(&text, "completions", "UNSUPPORTED", "no such route");
}

fn embedding(vectors: &[&[f64]]) -> Reply {
    let data: Vec<serde_json::Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| serde_json::json!({"object": "embedding", "index": i, "embedding": v}))
        .collect();
    let body = serde_json::json!({"object": "list", "data": data, "model": "fake", "usage": {"prompt_tokens": 7, "total_tokens": 7}});
    raw(200, &body.to_string())
}

#[test]
fn embeddings_passes_a_repeatable_vector_and_fails_one_that_moves_or_is_unsupported_on_a_501() {
    let v: &[f64] = &[0.1, -0.2, 0.3];
    let w: &[f64] = &[0.3, 0.2, -0.1];
    let (text, _d, _) = run(
        r#"expect = ["embeddings"]"#,
        vec![embedding(&[v]), embedding(&[v]), embedding(&[v, w])],
    );
    assert_word(&text, "embeddings", "PASS", "dimension 3");
    let (text, _d, _) = run(
        r#"expect = ["embeddings"]"#,
        vec![embedding(&[v]), embedding(&[w]), embedding(&[v, w])],
    );
    assert_word(&text, "embeddings", "FAIL", "not repeatable");
    let no = r#"{"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}}"#;
    let (text, _d, _) = run(
        r#"may_lack = ["embeddings"]"#,
        vec![raw(501, no), raw(501, no), raw(501, no)],
    );
    assert_word(&text, "embeddings", "UNSUPPORTED", "HTTP 501");
}

#[test]
fn models_passes_a_list_with_the_served_model_and_fails_a_model_object_without_created() {
    let (text, _d, _) = run(r#"expect = ["models"]"#, Vec::new());
    assert_word(
        &text,
        "models",
        "PASS",
        "the served model \"fake\" among them",
    );
    let script = Script {
        routes: vec![Route {
            method: Some("GET".into()),
            path: "/v1/models".into(),
            status: 200,
            headers: Vec::new(),
            body: r#"{"object":"list","data":[{"id":"fake","object":"model","owned_by":"me"}]}"#
                .into(),
            delay_ms: 0.0,
        }],
        ..Script::default()
    };
    let (text, _d, _) = run_script(r#"expect = ["models"]"#, script);
    assert_word(
        &text,
        "models",
        "FAIL",
        "\"created\" is a required property",
    );
}

#[test]
fn check_refuses_a_log_line_outside_cancel_a_bad_regex_and_a_known_failure_named_twice() {
    let text = check("expect = [\"stop\"]\n[contract.stop]\nlog_line = \"x\"");
    assert!(
        text.contains("only [contract.cancel] takes `log_line`"),
        "{text}"
    );
    let text = check("expect = [\"cancel\"]\n[contract.cancel]\nlog_line = \"cancel (task\"");
    assert!(
        text.contains("contract.cancel.log_line") && text.contains("not a regex"),
        "{text}"
    );
    let text = check("expect = [\"stop\"]\nknown_fail = [\"stop\"]");
    assert!(text.contains("named twice"), "{text}");
}

#[test]
fn a_known_failure_is_shown_and_lets_the_gate_pass_and_a_pass_under_known_fail_fails_it() {
    let left_in = ok(&["1, 2, 3, 4, 5"], "stop");
    let (text, _d, _) = run(r#"known_fail = ["stop"]"#, vec![left_in.clone(), left_in]);
    assert_word(&text, "stop", "KNOWN-FAIL", "is in the text");
    assert!(text.contains("RESULT: PASS"), "{text}");
    let honoured = ok(&["1, 2, 3, 4, "], "stop");
    let (text, _d, _) = run(r#"known_fail = ["stop"]"#, vec![honoured.clone(), honoured]);
    assert_word(&text, "stop", "FAIL", "move it to expect");
}

#[test]
fn check_refuses_settings_a_check_does_not_read() {
    let text = check("expect = [\"models\"]\n[contract.models]\nprompt = \"x\"");
    assert!(text.contains("it takes no `prompt`"), "{text}");
    let text = check("expect = [\"embeddings\"]\n[contract.embeddings]\nmax_tokens = 4");
    assert!(text.contains("it takes no `max_tokens`"), "{text}");
}

/// `servegate conformance` run in `cwd`, on the evidence root `contract` and the pages `pages/conformance.*`
/// there (relative paths, as a checkout has them), with `extra`: its output.
fn conformance(cwd: &Path, extra: &[&str]) -> std::process::Output {
    let registry = fixtures::root().join("data/coverage/registry.toml");
    let mut args = vec![
        "conformance",
        "--runs",
        "contract",
        "--out",
        "pages/conformance.md",
        "--registry",
        registry.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    fixtures::servegate_in(&args, cwd)
}

#[test]
fn conformance_renders_each_state_as_a_word_linked_to_its_evidence_and_checks_the_page() {
    let no = raw(
        400,
        r#"{"error":{"message":"'stop' is not supported by this server","type":"invalid_request_error"}}"#,
    );
    let (_, _d, run_dir) = run(
        "expect = [\"shape\", \"usage\"]\nmay_lack = [\"stop\"]",
        vec![
            Reply::default(),
            Reply::default(),
            status(400),
            no.clone(),
            no,
            Reply::default(),
            Reply {
                completion_tokens: Some(1),
                ..Reply::default()
            },
        ],
    );
    let t = tempfile::tempdir().unwrap();
    let runs = t.path().join("contract");
    let stamp = run_dir.file_name().unwrap();
    fixtures::copy_dir(&run_dir, &runs.join("contract").join(stamp));
    let docs = t.path().join("pages");
    std::fs::create_dir_all(&docs).unwrap();
    let out = conformance(t.path(), &[]);
    assert!(out.status.success(), "{}", fixtures::text(&out));
    let md = std::fs::read_to_string(docs.join("conformance.md")).unwrap();
    let stamp = stamp.to_string_lossy();
    assert!(
        md.contains(&format!(
            "| `shape` | [PASS](../contract/contract/{stamp}/contract/shape/) |"
        )),
        "{md}"
    );
    assert!(md.contains("| `stop` | [UNSUPPORTED]("), "{md}");
    assert!(md.contains("(may lack) |"), "{md}");
    assert!(md.contains("| `usage` | [FAIL]("), "{md}");
    assert!(md.contains("| `tools` | NOT RUN |"), "{md}");
    let html = std::fs::read_to_string(docs.join("conformance.html")).unwrap();
    assert!(html.contains(r#"<td class="pass"><a href="#), "{html}");
    for page in [&md, &html] {
        for glyph in ['\u{2705}', '\u{274c}', '\u{1f7e1}'] {
            assert!(!page.contains(glyph), "a state as a glyph: {glyph}");
        }
    }
    let out = conformance(t.path(), &["--check"]);
    assert!(out.status.success(), "{}", fixtures::text(&out));
    std::fs::write(docs.join("conformance.md"), md.replace("[PASS]", "[FAIL]")).unwrap();
    let out = conformance(t.path(), &["--check"]);
    assert_eq!(out.status.code(), Some(1), "{}", fixtures::text(&out));
    assert!(
        fixtures::text(&out).contains("differs from the page the evidence"),
        "{}",
        fixtures::text(&out)
    );
}

#[test]
fn the_committed_conformance_page_is_the_one_its_evidence_gives() {
    let out = fixtures::servegate_in(&["conformance", "--check"], &fixtures::root());
    assert!(
        out.status.success(),
        "pages/conformance.md is stale: run `servegate conformance` and commit it\n{}",
        fixtures::text(&out)
    );
}

/// A streamed reply of `tokens` numbered lines, the first after `first_ms`, each next `token_ms` later,
/// ending "length".
fn counting(tokens: usize, first_ms: f64, token_ms: f64) -> Reply {
    Reply {
        tokens: (1..=tokens).map(|i| format!("{i}\n")).collect(),
        first_token_ms: first_ms,
        token_ms,
        finish_reason: Some("length".into()),
        ..Reply::default()
    }
}

/// The cancel check on a one-slot scripted serve: `baseline` and `after` 4 tokens after 100 ms, `dropped`
/// 200 tokens 20 ms apart (4 s), which the client drops after 4; `dropped` as `tune` makes it.
fn cancel_run(contract_extra: &str, tune: impl FnOnce(&mut Reply)) -> String {
    let mut dropped = counting(200, 20.0, 20.0);
    tune(&mut dropped);
    let script = Script {
        one_slot: true,
        replies: vec![counting(4, 100.0, 5.0), dropped, counting(4, 100.0, 5.0)],
        ..Script::default()
    };
    let (text, _d, dir) = run_script(
        &format!("expect = [\"cancel\"]\n[contract.cancel]\nmax_tokens = 200\n{contract_extra}"),
        script,
    );
    let check = std::fs::read_to_string(dir.join("contract/cancel/check.json")).unwrap_or_default();
    format!("{text}\ncheck.json: {check}")
}

#[test]
fn cancel_passes_a_serve_that_frees_its_slot_when_the_client_drops_the_stream() {
    let text = cancel_run("log_line = 'srv +stop: cancel task'", |r| {
        r.drop_log = vec![LogLine::err("srv  stop: cancel task, id_task = 7")];
    });
    // PASS with the line, whether or not the first token also came within the bound (a runner so busy that
    // it did not still passes on the serve's word, never fails).
    assert_word(&text, "cancel", "PASS", "the serve logged its cancellation");
    assert!(text.contains("\"dropped_after\": 4"), "{text}");
}

#[test]
fn cancel_passes_on_timing_alone_where_no_cancellation_line_is_known() {
    let text = cancel_run("", |_| {});
    let l = line(&text, "cancel");
    // The bound is 3 x 100 ms + 250 ms against a rest of 4 s: PASS, or INDETERMINATE on a runner too busy to
    // answer within it; never FAIL.
    assert!(
        l.starts_with("contract.cancel PASS the slot was freed")
            || l.starts_with("contract.cancel INDETERMINATE"),
        "{text}"
    );
}

#[test]
fn cancel_fails_a_serve_that_keeps_generating_for_a_client_that_left() {
    let text = cancel_run("", |r| r.on_drop = Some(OnDrop::Finish));
    assert_word(&text, "cancel", "FAIL", "the slot stayed busy");
}

#[test]
fn cancel_fails_a_serve_that_dies_when_the_client_drops_the_stream() {
    let text = cancel_run("", |r| r.on_drop = Some(OnDrop::Crash(Crash::Code(3))));
    assert_word(&text, "cancel", "FAIL", "");
    assert!(
        text.contains("did not answer `after`") || text.contains("exited"),
        "{text}"
    );
}

#[test]
fn cancel_fails_when_the_engines_cancellation_line_is_not_in_its_log() {
    // The slot is freed in time, but the line the gate names never comes: the serve did not notice the drop
    // as its engine says it does.
    let text = cancel_run("log_line = 'cancel task'", |_| {});
    assert_word(&text, "cancel", "FAIL", "has no cancellation line");
}

/// A Responses API response object with `text`, as a non-streamed body.
fn response_object(text: &str, status: &str) -> serde_json::Value {
    serde_json::json!({"id": "resp_1", "object": "response", "created_at": 1, "status": status,
        "model": "fake", "output": [{"type": "message", "id": "msg_1", "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}})
}

/// The Responses API's events for `deltas` as one SSE body, ending with `last` (`response.completed`).
fn response_events(deltas: &[&str], last: &str) -> Reply {
    let text: String = deltas.concat();
    let mut body = String::new();
    let mut ev = |v: serde_json::Value| {
        body.push_str(&format!(
            "event: {}\ndata: {v}\n\n",
            v["type"].as_str().unwrap()
        ));
    };
    ev(
        serde_json::json!({"type": "response.created", "sequence_number": 0, "response": response_object("", "in_progress")}),
    );
    for d in deltas {
        ev(
            serde_json::json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": d}),
        );
    }
    ev(serde_json::json!({"type": last, "response": response_object(&text, "completed")}));
    Reply {
        status: 200,
        body: Some(body),
        stream: Some(true),
        headers: vec![("content-type".into(), "text/event-stream".into())],
        ..Reply::default()
    }
}

#[test]
fn responses_passes_the_response_object_and_its_events_and_fails_a_stream_that_never_completes() {
    let body = raw(200, &response_object("Paris.", "completed").to_string());
    let (text, _d, dir) = run(
        r#"expect = ["responses"]"#,
        vec![
            body.clone(),
            response_events(&["Paris", "."], "response.completed"),
            Reply::default(),
        ],
    );
    assert_word(
        &text,
        "responses",
        "PASS",
        "the same text \"Paris.\" as chat's",
    );
    let sent = std::fs::read_to_string(dir.join("contract/responses/check.json")).unwrap();
    assert!(sent.contains("\"/v1/responses\""), "{sent}");
    let (text, _d, _) = run(
        r#"expect = ["responses"]"#,
        vec![
            body.clone(),
            response_events(&["Paris", "."], "response.in_progress"),
            Reply::default(),
        ],
    );
    assert_word(&text, "responses", "FAIL", "not \"response.completed\"");
    let (text, _d, _) = run(
        r#"expect = ["responses"]"#,
        vec![
            body,
            response_events(&["Lyon", "."], "response.completed"),
            Reply::default(),
        ],
    );
    assert_word(&text, "responses", "FAIL", "the greedy texts differ");
    let chat_shaped = Reply::default();
    let (text, _d, _) = run(
        r#"expect = ["responses"]"#,
        vec![chat_shaped, Reply::default(), Reply::default()],
    );
    assert_word(&text, "responses", "FAIL", "is no response object");
    let (text, _d, _) = run(
        r#"may_lack = ["responses"]"#,
        vec![status(404), status(404), Reply::default()],
    );
    assert_word(&text, "responses", "UNSUPPORTED", "no such route");
}
