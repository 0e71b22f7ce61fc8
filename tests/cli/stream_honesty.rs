//! What goes here: the shapes through `servegate inspect`, and `servegate run` against the scripted serve.
//! Through the parser in process: tests/pure/stream_honesty.rs.
//!
//! Stream honesty: a failed reply never feeds a median (the SSE framing part), and no event is silently
//! dropped: a stream that ends inside an event is cut, and no event is
//! silently dropped. Each shape is a fixture in tests/data/repro/stream/ (`NAME.sse`, some with a timed
//! `NAME.reads.jsonl`) with its expected outcome in `shapes.expected.json`; each is checked through the library
//! (`reply::parse_stream` + `inspect::summarize`, the judge's reply-level verdict) and through
//! `servegate inspect`. One end-to-end run (`servegate run`) against the scripted serve
//! (src/replay/scripted.rs; [`malformed_or_cut`]) sending a malformed event and a cut final event shows the
//! gate failing content and known_answer, naming both; another ([`unknown_fields`]) shows lines SSE ignores
//! noted, never a failure.
//!
//! Expected keys per shape: `ok`, `fail_reason` (the failure's name), `fail_detail_contains` (substrings of
//! the judge's reason), `content`, `finish_reason`, `done_seen`, `notes` (warning/flag names that must be
//! present), `warning_contains` (substrings of some warning). Every key is checked; an unknown key fails.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use servegate::replay::scripted::{Body, Inject, Reply, Script};

use crate::fixtures;
use crate::fixtures::stream::{check, conformance_shapes, dir, inspect, shapes};

#[test]
fn every_stream_shape_gives_its_outcome_through_servegate_inspect() {
    for (name, want) in &shapes() {
        let want = want.as_object().expect("shape object");
        for ext in ["sse", "reads.jsonl"] {
            let input = dir().join(format!("{name}.{ext}"));
            if !input.is_file() {
                continue;
            }
            let (out, raw) = inspect(&input);
            check(&input.display().to_string(), &out["summary"], want);
            // Nothing the serve sent reaches the terminal raw: no control byte but the newlines of the JSON.
            assert!(
                !raw.iter().any(|&b| b < 0x20 && b != b'\n'),
                "{name}: a raw control byte in the output"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// End to end: `servegate run` against the scripted serve

/// One chat chunk as the stdlib repro serves wrote it (Python's `json.dumps`: `", "` and `": "`
/// separators), without its blank line.
fn py_chunk(delta: &str, finish: &str) -> String {
    format!(
        r#"data: {{"id": "s", "object": "chat.completion.chunk", "model": "m", "choices": [{{"index": 0, "delta": {delta}, "finish_reason": {finish}}}]}}"#
    )
}

/// The serve whose replies read "It is safe." to a careless client (the repro's `malformed_or_cut.py`):
/// every reply is a role chunk, `It is`, ` safe.`, the finish chunk and `[DONE]`, the body ended by
/// closing the connection (HTTP/1.0 style). Request 1: before ` safe.` comes the event carrying ` not`,
/// its JSON cut short (both OpenAI SDKs raise on it), so the text without it says the opposite of what
/// the serve sent. Request 2: after ` safe.` the finish chunk is whole JSON but the connection closes
/// before the blank line that would dispatch it (no [DONE]): no SSE client delivers that event. Later
/// requests: a whole, well-formed reply.
fn malformed_or_cut() -> Script {
    let whole = Reply {
        stream: Some(true),
        framing: Some(Body::Close),
        tokens: vec!["It is".into(), " safe.".into()],
        usage: false,
        ..Reply::default()
    };
    let broken = py_chunk(r#"{"content": " not"}"#, "null");
    let malformed = Reply {
        inject: vec![Inject {
            at: 2,
            raw: format!("{}\n\n", &broken[..broken.len() - 4]),
        }],
        ..whole.clone()
    };
    let cut = Reply {
        finish_reason: None,
        done: false,
        inject: vec![Inject {
            at: 3,
            raw: py_chunk("{}", r#""stop""#),
        }],
        ..whole.clone()
    };
    Script {
        models: vec!["m".into()],
        replies: vec![malformed, cut],
        reply: whole,
        ..Script::default()
    }
}

/// A serve whose every reply carries two lines SSE ignores between its events (the repro's
/// `unknown_fields.py`): `foobar:xxx` (an unknown field) after the third word and a line with no colon
/// after the fifth; 12 words 20 ms apart, no role chunk, the finish chunk, usage and `[DONE]`, the body
/// ended by closing the connection.
fn unknown_fields() -> Script {
    Script {
        models: vec!["m".into()],
        reply: Reply {
            stream: Some(true),
            framing: Some(Body::Close),
            tokens: fixtures::word_tokens("Paris is the capital of France and a city on the Seine"),
            token_ms: 20.0,
            role_chunk: false,
            prompt_tokens: 3,
            inject: vec![
                Inject {
                    at: 3,
                    raw: "foobar:xxx\n\n".into(),
                },
                Inject {
                    at: 5,
                    raw: "a line with no colon\n\n".into(),
                },
            ],
            ..Reply::default()
        },
        ..Script::default()
    }
}

/// The gate `name` (`[request]` and assertions as `rest`) on the scripted serve playing `serve`, written
/// in `dir`; its path.
fn gate(dir: &Path, name: &str, serve: &Script, rest: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "[gate]\nname = \"{name}\"\n[serve]\ncommand = {}\n{rest}",
        fixtures::scripted_command(serve)
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn servegate_run_fails_content_and_known_answer_on_a_malformed_and_a_cut_reply() {
    let runs = tempfile::tempdir().expect("temp dir");
    let tmp = tempfile::tempdir().expect("temp dir");
    let g = gate(
        tmp.path(),
        "stream-malformed-or-cut",
        &malformed_or_cut(),
        "[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"Is it safe?\"]\nrepeats = 3\n\
         [assert.content]\n[assert.known_answer]\nmatches = \"safe\"\n",
    );
    let (so, se) = (tmp.path().join("stdout"), tmp.path().join("stderr"));
    let mut child = fixtures::servegate()
        // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
        .env("SERVEGATE_VERBOSE", "1")
        .arg("run")
        .arg(&g)
        .env("SERVEGATE_RUNS", runs.path())
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&so).unwrap())
        .stderr(std::fs::File::create(&se).unwrap())
        .spawn()
        .expect("spawn servegate");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("servegate run did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&so).unwrap();
    let stderr = std::fs::read_to_string(&se).unwrap();
    let all = format!(
        "exit {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        status.code()
    );
    assert_eq!(status.code(), Some(1), "{all}");
    let line = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line:\n{all}"))
            .to_string()
    };
    for name in ["content", "known_answer"] {
        let l = line(&format!("{name} "));
        assert!(l.starts_with(&format!("{name} FAIL ")), "{l}");
        assert!(
            l.contains(
                "request 00: failed reply: malformed_event: event 3 (line 5): malformed JSON ("
            ),
            "{l}"
        );
        assert!(
            l.contains(r#"\"content\": \" not\""#),
            "the event is quoted: {l}"
        );
        assert!(
            l.contains(
                "request 01: failed reply: truncated_stream: no finish_reason, no [DONE], incomplete last event"
            ),
            "{l}"
        );
        // The well-formed third reply is not named.
        assert!(!l.contains("request 02"), "{l}");
    }
    assert_eq!(line("RESULT: "), "RESULT: FAIL");
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{all}"
    );
}

/// A serve whose streams carry `foobar:xxx` and a line with no colon between events: the WHATWG rules and
/// every OpenAI SDK skip those lines and deliver the stream whole, so the gate passes content and
/// known_answer, and the content verdict notes the lines (a line meant to be `data:` would fail instead:
/// `misnamed_field`, the near misses above).
#[test]
fn servegate_run_passes_a_stream_with_unknown_fields_and_notes_them() {
    let runs = tempfile::tempdir().expect("temp dir");
    let tmp = tempfile::tempdir().expect("temp dir");
    let g = gate(
        tmp.path(),
        "stream-unknown-fields",
        &unknown_fields(),
        "[request]\nmodel = \"m\"\nmax_tokens = 16\nprompts = [\"What is the capital of France?\"]\n\
         repeats = 2\n[assert.content]\n[assert.known_answer]\nmatches = \"Paris\"\n",
    );
    let out = fixtures::servegate()
        .arg("run")
        .arg(&g)
        .env("SERVEGATE_RUNS", runs.path())
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .stdin(Stdio::null())
        .output()
        .expect("run servegate");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let all = format!(
        "exit {:?}\n{stdout}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{all}");
    let content = stdout
        .lines()
        .find(|l| l.starts_with("content "))
        .unwrap_or_else(|| panic!("{all}"));
    assert!(
        content.starts_with("content PASS 2 of 2 replies have sane content"),
        "{content}"
    );
    assert!(
        content.contains("note: 2 of 2 replies' streams had lines SSE ignores (request 00, 01; first: 2 lines with a field SSE ignores (first: \"foobar\"))"),
        "{content}"
    );
    assert!(stdout.contains("known_answer PASS"), "{all}");
}

#[test]
fn conformance_shapes_give_their_outcome_through_servegate_inspect() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, source, body, want) in conformance_shapes() {
        let path = tmp.path().join(format!("{name}.sse"));
        std::fs::write(&path, &body).expect("write");
        let (out, raw) = inspect(&path);
        check(
            &format!("{name} ({source})"),
            &out["summary"],
            want.as_object().expect("object"),
        );
        assert!(
            !raw.iter().any(|&b| b < 0x20 && b != b'\n'),
            "{name}: a raw control byte"
        );
    }
}
