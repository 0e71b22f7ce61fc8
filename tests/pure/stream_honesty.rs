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

use crate::fixtures::stream::{check, conformance_shapes, content_chunk, dir, shapes, STOP};
use serde_json::Value;
use servegate::analysis::measure::measure;
use servegate::analysis::reply::{parse_stream, NoteKind};
use servegate::inspect::summarize;
use servegate::io::reads;

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
