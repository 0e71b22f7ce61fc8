//! `[contract]` end to end (docs/contract.md): `servegate run` on a gate whose serve is the scripted serve
//! (src/replay/scripted.rs), the check's requests sent after the speed trial, written under
//! `contract/<check>/` and judged from there. What goes here: for each check, one scripted serve that honours
//! it (PASS) and one that breaks it (FAIL with the reason); unsupported, hang and garbage answers; and
//! `servegate check`'s refusals of a bad `[contract]`. The judging rules alone are unit-tested in
//! src/judge/contract/tests.rs.
//!
//! The scripted serve answers chat requests by arrival order (`Script::replies`): reply 0 is the gate's one
//! speed-trial request, the next ones the check's requests in the order `spec::contract::requests` sends them.

use std::path::{Path, PathBuf};

use servegate::replay::scripted::{Reply, Script};

use crate::fixtures;

/// Writes a gate running `contract` (the `[contract]` table's body) on a scripted serve answering the
/// speed trial with the default reply and the contract requests with `replies`; runs it. Returns the
/// output's text, the temp project (kept alive) and the run directory in it.
fn run(contract: &str, replies: Vec<Reply>) -> (String, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let mut all = vec![Reply::default()];
    all.extend(replies);
    let script = Script {
        replies: all,
        ..Script::default()
    };
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
        text.contains("shape, max_tokens, stop, usage, stream_parity, errors"),
        "{text}"
    );
    let text = check("expect = [\"stop\"]\nmay_lack = [\"stop\"]");
    assert!(text.contains("named twice"), "{text}");
    let text = check("expect = [\"shape\"]\n[contract.stop]\nstop = \"x\"");
    assert!(text.contains("a check the gate does not run"), "{text}");
}
