//! What goes here: every shape through `reply::parse_stream` in process. Through `servegate inspect` and
//! `servegate run` against a stdlib serve: tests/cli/stream_honesty.rs.
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

use std::path::{Path, PathBuf};

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
                    recv_ms: None,
                    t_ms: 1.0,
                    bytes: body[..cut].to_vec(),
                },
                reads::TimedRead {
                    recv_ms: None,
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
// The stream as the standards and the clients read it (the SSE standard, the OpenAI client's decoder). Each shape below is one public
// conformance test or one client decoder rule, reduced to a chat stream, and names the file it comes from:
// * web-platform-tests `eventsource/` format tests (github.com/web-platform-tests/wpt, the commit given with
//   each file); their server, `eventsource/resources/message.php`, sends `message + newline + "\n"` with
//   newline `"\n\n"` by default and `""` for `newline=none`;
// * openai-python `src/openai/_streaming.py` (`SSEDecoder.decode`, `Stream.__stream__`) at commit
//   e43b422412a9e96c9cc5192c61fffbe2d7e04836;
// * openai-node `src/core/streaming.ts` (`SSEDecoder.decode`, `Stream.fromSSEResponse`) and
//   `src/internal/decoders/line.ts` at commit 7b7d6ca71130d37ec09792c50056b47861f2eccf.
// Each is checked through `parse_stream` + `inspect::summarize` and through `servegate inspect` on the
// same bytes, with the keys of `check` above.

const WPT: &str = "web-platform-tests/wpt eventsource/";
const PY: &str = "openai-python src/openai/_streaming.py @ e43b422";
const NODE: &str = "openai-node src/core/streaming.ts @ 7b7d6ca";
/// The decoders read again for the `id:` rule (what was left of the standards' reading): `SSEDecoder.decode` dispatches on a
/// blank line `if not (not self._event and not self._data and not self._last_event_id and self._retry is
/// None)` and never resets `_last_event_id` ("as per the SSE spec"); node's `SSEDecoder.decode` keeps no id
/// and dispatches only `if (this.event || this.data.length)`.
const PY_ID: &str = "openai-python src/openai/_streaming.py @ 0044c4d SSEDecoder.decode";
const NODE_ID: &str = "openai-node src/core/streaming.ts @ 009322d SSEDecoder.decode";
const WHATWG: &str = "WHATWG HTML 9.2.6 Interpreting an event stream";

fn content_chunk(text: &str) -> String {
    format!(
        "{{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}},\"finish_reason\":null}}]}}",
        serde_json::to_string(text).expect("string")
    )
}

const STOP: &str = r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;

/// (name, source, body, expected summary keys).
fn conformance_shapes() -> Vec<(&'static str, String, Vec<u8>, Value)> {
    let (a, b) = (content_chunk("Hello"), content_chunk(" there"));
    let end = format!("data:{STOP}\n\ndata: [DONE]\n\n");
    vec![
        (
            // wpt format-bom.js (65cfe0a7): `\uFEFFdata:1\n\n\uFEFFdata:2\n\ndata:3`: 1 and 3 arrive, 2 does
            // not: only the stream's first BOM is stripped. Here 2 is lost to users: the reply fails naming it.
            "wpt-format-bom",
            format!("{WPT}format-bom.js"),
            format!("\u{FEFF}data:{a}\n\n\u{FEFF}data:{b}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "misnamed_field", "content": "Hello",
                "done_seen": true, "notes": ["leading_bom_stripped", "sse_client_divergence"],
                "fail_detail_contains": ["line 3", "a byte-order mark (U+FEFF)"],
                "warning_contains": ["openai-python"]}),
        ),
        (
            // wpt format-bom-2.any.js (5f9fb0d9): two BOMs: the first is stripped, the second makes the
            // first line's field unknown, so event 1 is lost and 2, 3 arrive.
            "wpt-format-bom-2",
            format!("{WPT}format-bom-2.any.js"),
            format!("\u{FEFF}\u{FEFF}data:{a}\n\ndata:{b}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "misnamed_field", "content": " there",
                "fail_detail_contains": ["line 1"]}),
        ),
        (
            // wpt format-comments.js (65cfe0a7): comments between data lines, with CR, LF and CRLF line ends
            // mixed, a comment holding NUL and a 2 KiB comment: the data lines join as if no comment were there.
            "wpt-format-comments",
            format!("{WPT}format-comments.js"),
            format!(
                "data:{{\"choices\":[{{\"index\":0,\r:\0\n:\r\ndata:\"delta\":{{\"content\":\"Hi\"}},\n:{}\rdata:\"finish_reason\":\"stop\"}}]}}\n:data:fail\r:x\n\n{}",
                "x".repeat(2048),
                "data: [DONE]\n\n"
            )
            .into_bytes(),
            serde_json::json!({"ok": true, "content": "Hi", "finish_reason": "stop", "done_seen": true}),
        ),
        (
            // wpt format-data-before-final-empty-line.js (65cfe0a7): `data:test2` with no blank line after it
            // is never dispatched. A chat stream whose finish chunk lacks its blank line is cut.
            "wpt-format-data-before-final-empty-line",
            format!("{WPT}format-data-before-final-empty-line.js"),
            format!("retry:1000\ndata:{a}\n\nid:test\ndata:{STOP}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "truncated_stream", "content": "Hello",
                "finish_reason": null, "done_seen": false,
                "fail_detail_contains": ["incomplete last event"]}),
        ),
        (
            // wpt format-field-data.js (65cfe0a7): `data:` alone is an event with data "", `data` twice (no
            // colon) is "\n". As a chat event, empty data is one both SDKs raise on (`json.loads("")`,
            // `JSON.parse("")`): a malformed event.
            "wpt-format-field-data",
            format!("{WPT}format-field-data.js; {PY}; {NODE}"),
            format!("data:{a}\n\ndata:\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "malformed_event", "content": "Hello",
                "fail_detail_contains": ["empty data"]}),
        ),
        (
            // wpt format-field-event-empty.htm (500d1c77): `event: ` (empty name) is the default `message`:
            // the chunk is read, nothing is skipped.
            "wpt-format-field-event-empty",
            format!("{WPT}format-field-event-empty.htm"),
            format!("event: \ndata:{a}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "done_seen": true, "notes": []}),
        ),
        (
            // wpt format-field-event.htm (116d43a2): `event:test` goes to the `test` listener, not `onmessage`.
            // Its data here is no chat chunk: skipped and counted, never a parse error, never the first event.
            "wpt-format-field-event",
            format!("{WPT}format-field-event.htm"),
            format!("event:test\ndata:x\n\ndata:{a}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "notes": ["named_events_ignored"]}),
        ),
        (
            // wpt format-null-character.html (500d1c77): `data:\0` delivers "\0". Inside a JSON string a raw
            // NUL is invalid JSON, so both SDKs raise: a malformed event that says "raw NUL".
            "wpt-format-null-character",
            format!("{WPT}format-null-character.html"),
            format!("data:{a}\n\ndata:{{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"a\0b\"}}}}]}}\n\n{end}\n")
                .into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "malformed_event",
                "fail_detail_contains": ["raw NUL"]}),
        ),
        (
            // wpt format-utf-8.js (65cfe0a7): the stream is UTF-8 whatever the charset says; `…` (3 bytes) whole.
            "wpt-format-utf-8",
            format!("{WPT}format-utf-8.js"),
            format!("data:{}\n\n{end}\n", content_chunk("ok…")).into_bytes(),
            serde_json::json!({"ok": true, "content": "ok…"}),
        ),
        (
            // Both SDKs: `data:  [DONE]` (two spaces) leaves " [DONE]", which is not the end marker (python
            // `startswith("[DONE]")`, node `=== '[DONE]'`); both then parse it as JSON and raise.
            "sdk-done-two-spaces",
            format!("{PY}; {NODE}"),
            format!("data:{a}\n\ndata:{STOP}\n\ndata:  [DONE]\n\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "malformed_event", "done_seen": false,
                "content": "Hello", "fail_detail_contains": ["not the end marker"]}),
        ),
        (
            // `data: [DONE] ` (trailing space): openai-python ends the stream, openai-node raises. Judged as
            // the end, with a compatibility warning.
            "sdk-done-trailing-space",
            format!("{PY}; {NODE}"),
            format!("data:{a}\n\ndata:{STOP}\n\ndata: [DONE] \n\n").into_bytes(),
            serde_json::json!({"ok": true, "done_seen": true, "notes": ["sse_client_divergence"],
                "warning_contains": ["openai-node parses it as JSON and raises"]}),
        ),
        (
            // A chat chunk inside a named event: both SDKs (any name not starting `thread.`) parse and yield
            // it; a browser's `onmessage` never sees it. Read, with a compatibility warning.
            "sdk-chunk-in-named-event",
            format!("{PY}; {NODE}"),
            format!("data:{a}\n\nevent: delta\ndata:{b}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello there", "notes": ["sse_client_divergence"],
                "warning_contains": ["inside `event: delta`"]}),
        ),
        (
            // An `error` member in a named event's data: both SDKs raise APIError with its message.
            "sdk-error-member-in-named-event",
            format!("{PY}; {NODE}"),
            format!("data:{a}\n\nevent: progress\ndata: {{\"error\":{{\"message\":\"gpu lost\"}}}}\n\n{end}\n")
                .into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "error_mid_stream",
                "fail_detail_contains": ["gpu lost"]}),
        ),
        (
            // `event: error` whose data has no `error` member: openai-node raises (`data?.error ?? data`);
            // openai-python yields it as a chunk. The serve said error: the reply fails, flagged.
            "sdk-error-event-without-error-member",
            format!("{PY}; {NODE}"),
            format!("event: error\ndata: {{\"detail\":\"model not loaded\"}}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "error_in_stream",
                "notes": ["sse_error_event"], "fail_detail_contains": ["model not loaded"]}),
        ),
        (
            // An event with a name and no data: the spec drops it; both SDKs dispatch it with data "" and
            // raise parsing it (python dispatches when `_event` is set, node when `this.event` is).
            "sdk-named-event-without-data",
            format!("{PY}; {NODE}"),
            format!("event: ping\n\ndata:{a}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "notes": ["sse_client_divergence"],
                "warning_contains": ["`event: ping` at line 1"]}),
        ),
        (
            // A raw `error:` line (llama.cpp before PR #16109): no SSE field, dropped by the spec and both
            // SDKs (their decoders ignore unknown fields); the serve meant an error: it fails the reply.
            "llamacpp-raw-error-field",
            format!("case 32a; {PY}; {NODE}"),
            format!("data:{a}\n\nerror: {{\"code\":500,\"message\":\"kv cache full\"}}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "error_mid_stream", "content": "Hello",
                "notes": ["nonstandard_sse_error_field"], "fail_detail_contains": ["kv cache full"]}),
        ),
        (
            // openai-python's quirk: once an `id:` line set its last event id, which it never resets, every
            // blank line dispatches, so an extra blank line after an event gives an event with data "" that it
            // raises parsing; the spec and node dispatch nothing (no data). Judged as the spec and node read it
            // (the answer is whole), with a compatibility warning naming the line.
            "py-extra-blank-line-after-an-id",
            format!("{PY_ID}; {NODE_ID}; {WHATWG}"),
            format!("id: 1\ndata:{a}\n\n\ndata:{b}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello there", "done_seen": true,
                "notes": ["sse_client_divergence"],
                "warning_contains": ["first at line 4", "openai-python (whose last event id persists)"]}),
        ),
        (
            // An event of an `id:` line alone: python dispatches it with data "" and raises; spec and node don't.
            "py-id-only-event",
            format!("{PY_ID}; {NODE_ID}; {WHATWG}"),
            format!("id: 7\n\ndata:{a}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "notes": ["sse_client_divergence"],
                "warning_contains": ["1 blank line after an `id:`", "first at line 2"]}),
        ),
        (
            // `retry:` with an integer is kept by python until its next dispatch: a blank line after it alone is
            // an empty event to python (`self._retry is None` is false).
            "py-retry-only-event",
            format!("{PY_ID}; {NODE_ID}; {WHATWG}"),
            format!("retry: 3000\n\ndata:{a}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "notes": ["sse_client_divergence"],
                "warning_contains": ["first at line 2"]}),
        ),
        (
            // `id:` with an empty value sets python's last event id to "" (falsy): extra blank lines after it
            // are nothing to any reader. And without any id, extra blank lines are nothing either.
            "py-empty-id-resets",
            format!("{PY_ID}; {WHATWG}"),
            format!("id: 1\ndata:{a}\n\nid:\ndata:{b}\n\n\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello there", "notes": []}),
        ),
        (
            "extra-blank-lines-without-id",
            format!("{PY_ID}; {NODE_ID}; {WHATWG}"),
            format!("\n\ndata:{a}\n\n\n\ndata:{b}\n\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello there", "notes": []}),
        ),
        (
            // `[DONE]` ends the stream for both SDKs (python breaks, node skips the rest): what follows is not
            // read, and said.
            "sdk-done-ends-the-stream",
            format!("{PY}; {NODE}"),
            format!("data:{a}\n\n{end}data:{b}\n\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "done_seen": true,
                "notes": ["data_after_done"]}),
        ),
        (
            // Field names are compared literally: `DATA:` is no field to the spec or either SDK (python
            // `fieldname == "data"`, node `fieldname === 'data'`): the chunk it carried is lost to users.
            "field-names-are-case-sensitive",
            format!("{WHATWG}; {PY}; {NODE}"),
            format!("data:{a}\n\nDATA:{b}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "misnamed_field", "content": "Hello",
                "fail_detail_contains": ["letter case"]}),
        ),
        (
            // An unknown field is ignored by all three readers: warned, nothing lost.
            "unknown-field-ignored",
            format!("{WHATWG}; {PY}; {NODE}"),
            format!("foo: bar\ndata:{a}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": true, "content": "Hello", "notes": ["unknown_sse_fields"]}),
        ),
        (
            // wpt format-utf-8.js: the stream is decoded as UTF-8; an invalid byte becomes U+FFFD (the spec;
            // python's `decode("utf-8")` raises on it): the reply fails, naming it.
            "invalid-utf8-fails",
            format!("{WPT}format-utf-8.js; {PY}"),
            [
                format!("data:{a}\n\ndata:{{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" b").into_bytes(),
                vec![0xff],
                format!("\"}}}}]}}\n\n{end}\n").into_bytes(),
            ]
            .concat(),
            serde_json::json!({"ok": false, "fail_reason": "invalid_utf8",
                "fail_detail_contains": ["line 3"]}),
        ),
        (
            // Two JSON objects in one event (two `data:` lines join with "\n"): no client reads two chunks
            // from it; a malformed event that says so, not "content empty".
            "two-json-objects-in-one-event",
            format!("{PY}; {NODE}; WHATWG HTML 9.2.6 (data lines joined with U+000A)"),
            format!("data:{a}\ndata:{b}\n\n{end}\n").into_bytes(),
            serde_json::json!({"ok": false, "fail_reason": "malformed_event",
                "fail_detail_contains": ["2 JSON values in one event"]}),
        ),
    ]
}

#[test]
fn conformance_shapes_give_their_outcome_through_parse_stream() {
    let shapes = conformance_shapes();
    assert!(shapes.len() >= 17);
    for (name, source, body, want) in shapes {
        let reply = parse_stream(&reads::single_read(body), Some(200));
        let figures = measure(&reply);
        let summary = serde_json::to_value(summarize(&reply, &figures)).expect("summary");
        let want = want.as_object().expect("object");
        check(&format!("{name} ({source})"), &summary, want);
        // `"notes": []` means nothing noted but the usage these shapes never send.
        if want.get("notes") == Some(&Value::Array(vec![])) {
            assert_eq!(
                summary["notes"],
                serde_json::json!(["usage_missing"]),
                "{name}: no notes"
            );
        }
    }
}

#[test]
fn a_named_event_never_starts_a_clock_whatever_the_read_boundaries() {
    // Case 31's shape, timed: a progress event at 55 ms before the first token at 300 ms.
    let role = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
    let parts: Vec<(f64, String)> = vec![
        (40.0, format!("data: {role}\n\n")),
        (
            55.0,
            "event: tool.progress\ndata: {\"tool\":\"lookup\"}\n\n".into(),
        ),
        (300.0, format!("data: {}\n\n", content_chunk("The"))),
        (350.0, format!("data: {}\n\n", content_chunk(" sky"))),
        (390.0, format!("data: {STOP}\n\ndata: [DONE]\n\n")),
    ];
    let rs: Vec<reads::TimedRead> = parts
        .iter()
        .map(|(t, s)| reads::TimedRead {
            recv_ms: None,
            t_ms: *t,
            bytes: s.clone().into_bytes(),
        })
        .collect();
    let r = parse_stream(&rs, Some(200));
    let f = measure(&r);
    assert_eq!(f.ttft_ms, Some(300.0));
    assert_eq!(r.first_event_ms, Some(40.0));
    assert_eq!(
        (r.named_events_ignored, r.chunks, r.parse_errors.len()),
        (1, 4, 0)
    );
    assert!(r.has_note(NoteKind::NamedEventsIgnored));
    // A stream of named events only: no first event at all, nothing to time.
    let only = reads::single_read(b"event: tool.progress\ndata: {}\n\n".to_vec());
    let r = parse_stream(&only, Some(200));
    assert_eq!((r.first_event_ms, r.named_events_ignored), (None, 1));
    assert_eq!(measure(&r).ttft_ms, None);
}

#[test]
fn divergences_are_one_warning_that_counts_the_rest_and_done_wins_over_a_name() {
    // Two chat chunks in named events: one warning, the second counted in it.
    let body = format!(
        "event: delta\ndata:{}\n\nevent: delta\ndata:{}\n\ndata:{STOP}\n\ndata: [DONE]\n\n",
        content_chunk("a"),
        content_chunk("b")
    );
    let r = parse_stream(&reads::single_read(body.into_bytes()), Some(200));
    let div: Vec<String> = r
        .warnings
        .iter()
        .filter(|n| n.kind == NoteKind::SseClientDivergence)
        .map(|n| n.to_string())
        .collect();
    assert_eq!(div.len(), 1, "{div:?}");
    assert!(div[0].ends_with(" (+1 more)"), "{div:?}");
    assert_eq!((r.content.as_str(), r.named_events_ignored), ("ab", 0));
    // Both SDKs test `[DONE]` before the event name (py `__stream__`, node `fromSSEResponse`).
    let body = format!(
        "data:{}\n\ndata:{STOP}\n\nevent: end\ndata: [DONE]\n\n",
        content_chunk("a")
    );
    let r = parse_stream(&reads::single_read(body.into_bytes()), Some(200));
    assert!(r.done_seen && r.failure().is_none());
    assert_eq!(r.named_events_ignored, 0);
}
