//! Issue 12, kinds 2 (the SSE framing part) and 5: a stream that ends inside an event is cut, and no event is
//! silently dropped. Each shape is a fixture in tests/data/repro/stream/ (`NAME.sse`, some with a timed
//! `NAME.reads.jsonl`) with its expected outcome in `shapes.expected.json`; each is checked through the library
//! (`reply::parse_stream` + `inspect::summarize`, the judge's reply-level verdict) and through
//! `servegate inspect`. One end-to-end run (`servegate run`) against a tiny stdlib serve that sends a
//! malformed event and a cut final event shows the gate failing content and known_answer, naming both.
//!
//! Expected keys per shape: `ok`, `fail_reason` (the failure's name), `fail_detail_contains` (substrings of
//! the judge's reason), `content`, `finish_reason`, `done_seen`, `notes` (warning/flag names that must be
//! present), `warning_contains` (substrings of some warning). Every key is checked; an unknown key fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use servegate::analysis::measure::measure;
use servegate::analysis::reply::{parse_stream, NoteKind};
use servegate::inspect::summarize;
use servegate::io::reads;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/repro/stream")
}

fn shapes() -> Map<String, Value> {
    let text = std::fs::read_to_string(dir().join("shapes.expected.json")).expect("shapes file");
    serde_json::from_str::<Value>(&text)
        .expect("shapes JSON")
        .as_object()
        .expect("object")
        .clone()
}

/// Checks one summary (the library's, or `servegate inspect`'s, as JSON) against a shape's expectations.
fn check(at: &str, summary: &Value, want: &Map<String, Value>) {
    for (key, w) in want {
        let what = format!("{at}: {key}");
        match key.as_str() {
            "ok" | "fail_reason" | "content" | "finish_reason" | "done_seen" => {
                assert_eq!(&summary[key], w, "{what}; summary {summary:#}")
            }
            "fail_detail_contains" => {
                let detail = summary["fail_detail"].as_str().unwrap_or_default();
                for part in w.as_array().expect("array") {
                    let part = part.as_str().expect("string");
                    assert!(detail.contains(part), "{what}: {part:?} not in {detail:?}");
                }
                assert!(
                    !detail.chars().any(char::is_control),
                    "{what}: a control character in {detail:?}"
                );
            }
            "notes" => {
                let notes: Vec<&str> = summary["notes"]
                    .as_array()
                    .expect("notes")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                for n in w.as_array().expect("array") {
                    let n = n.as_str().expect("string");
                    assert!(notes.contains(&n), "{what}: {n} not in {notes:?}");
                }
            }
            "warning_contains" => {
                let warnings: Vec<&str> = summary["warnings"]
                    .as_array()
                    .expect("warnings")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                for part in w.as_array().expect("array") {
                    let part = part.as_str().expect("string");
                    assert!(
                        warnings.iter().any(|x| x.contains(part)),
                        "{what}: {part:?} not in {warnings:?}"
                    );
                }
            }
            other => panic!("{at}: unknown expected key `{other}`: teach check()"),
        }
    }
}

#[test]
fn every_stream_shape_gives_its_outcome_through_parse_stream() {
    let shapes = shapes();
    assert!(shapes.len() >= 14, "{} shapes", shapes.len());
    for (name, want) in &shapes {
        let want = want.as_object().expect("shape object");
        let mut inputs = vec![dir().join(format!("{name}.sse"))];
        let timed = dir().join(format!("{name}.reads.jsonl"));
        if timed.is_file() {
            inputs.push(timed);
        }
        for input in inputs {
            let text = std::fs::read(&input).expect("fixture");
            let rs = if input.to_string_lossy().ends_with(".reads.jsonl") {
                reads::decode(&String::from_utf8_lossy(&text)).expect("reads")
            } else {
                reads::single_read(text)
            };
            let reply = parse_stream(&rs, Some(200));
            let figures = measure(&reply);
            let summary = serde_json::to_value(summarize(&reply, &figures)).expect("summary");
            check(&input.display().to_string(), &summary, want);
            // The reply-level verdict and Reply::failure agree on the name.
            if want["ok"] == Value::Bool(false) {
                let f = reply.failure().expect("a failing shape has a failure()");
                assert!(
                    f.starts_with(want["fail_reason"].as_str().expect("fail_reason")),
                    "{name}: {f}"
                );
            }
        }
    }
}

fn inspect(path: &Path) -> (Value, Vec<u8>) {
    let out = Command::new(env!("CARGO_BIN_EXE_servegate"))
        .arg("inspect")
        .arg(path)
        .output()
        .expect("run servegate inspect");
    assert!(
        out.status.success(),
        "{}: exit {:?}: {}",
        path.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e})", path.display()));
    (v, out.stdout)
}

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

#[test]
fn a_cut_final_event_gives_no_finish_and_no_token_from_it() {
    // Timed: two token reads at 120 and 140 ms, then at 2000 ms the finish chunk without its blank line.
    let rs = reads::decode(
        &std::fs::read_to_string(dir().join("cut-final-event.reads.jsonl")).expect("reads"),
    )
    .expect("reads");
    let r = parse_stream(&rs, Some(200));
    assert_eq!(r.finish_reason, None);
    assert!(!r.done_seen && r.truncated && r.incomplete_tail);
    assert_eq!(
        r.token_chunks.iter().map(|t| t.t_ms).collect::<Vec<_>>(),
        [120.0, 140.0]
    );
    assert!(
        r.parse_errors
            .iter()
            .any(|p| p.starts_with("incomplete last event at EOF (line 7, ")
                && p.contains("never dispatched")),
        "{:?}",
        r.parse_errors
    );
    assert!(!r.has_note(NoteKind::UnterminatedLastEvent));
    assert_eq!(
        r.failure().as_deref(),
        Some("truncated_stream: no finish_reason, no [DONE], incomplete last event")
    );
}

#[test]
fn the_same_shapes_fail_whatever_the_read_boundaries() {
    // Every byte boundary of the malformed and misnamed shapes: the same failure each time.
    for name in [
        "malformed-json",
        "raw-nul",
        "bom-mid-stream",
        "leading-space-data",
        "cut-final-event",
    ] {
        let body = std::fs::read(dir().join(format!("{name}.sse"))).expect("fixture");
        let whole = parse_stream(&reads::single_read(body.clone()), Some(200)).failure();
        assert!(whole.is_some(), "{name}");
        for cut in 0..=body.len() {
            let rs = vec![
                reads::TimedRead {
                    t_ms: 1.0,
                    bytes: body[..cut].to_vec(),
                },
                reads::TimedRead {
                    t_ms: 2.0,
                    bytes: body[cut..].to_vec(),
                },
            ];
            assert_eq!(
                parse_stream(&rs, Some(200)).failure(),
                whole,
                "{name} cut at {cut}"
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_servegate"))
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
