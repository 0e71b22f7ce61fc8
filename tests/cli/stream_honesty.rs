//! What goes here: the shapes through `servegate inspect`, and `servegate run` against a tiny stdlib serve.
//! Through the parser in process: tests/pure/stream_honesty.rs.
//!
//! Stream honesty: a failed reply never feeds a median (the SSE framing part), and no event is silently
//! dropped: a stream that ends inside an event is cut, and no event is
//! silently dropped. Each shape is a fixture in tests/data/repro/stream/ (`NAME.sse`, some with a timed
//! `NAME.reads.jsonl`) with its expected outcome in `shapes.expected.json`; each is checked through the library
//! (`reply::parse_stream` + `inspect::summarize`, the judge's reply-level verdict) and through
//! `servegate inspect`. One end-to-end run (`servegate run`) against a tiny stdlib serve that sends a
//! malformed event and a cut final event shows the gate failing content and known_answer, naming both.
//!
//! Expected keys per shape: `ok`, `fail_reason` (the failure's name), `fail_detail_contains` (substrings of
//! the judge's reason), `content`, `finish_reason`, `done_seen`, `notes` (warning/flag names that must be
//! present), `warning_contains` (substrings of some warning). Every key is checked; an unknown key fails.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
// End to end: `servegate run` against tests/data/repro/stream/malformed_or_cut.py

fn python3() -> bool {
    Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn servegate_run_fails_content_and_known_answer_on_a_malformed_and_a_cut_reply() {
    assert!(python3(), "python3 is needed for the serve of this test");
    let runs = tempfile::tempdir().expect("temp dir");
    let tmp = tempfile::tempdir().expect("temp dir");
    let (so, se) = (tmp.path().join("stdout"), tmp.path().join("stderr"));
    let mut child = fixtures::servegate()
        // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
        .env("SERVEGATE_VERBOSE", "1")
        .arg("run")
        .arg(dir().join("malformed_or_cut.toml"))
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
    assert!(python3(), "python3 is needed for the serve of this test");
    let runs = tempfile::tempdir().expect("temp dir");
    let out = fixtures::servegate()
        .arg("run")
        .arg(dir().join("unknown_fields.toml"))
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
