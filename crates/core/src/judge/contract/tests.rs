//! The contract checks' rules on hand-made exchanges: each check passing, failing with its reason, and the
//! states around them (unsupported, indeterminate, a reply not read whole).

use serde_json::json;

use super::*;
use crate::analysis::reply::{parse_body, parse_stream};
use crate::evidence::contract::ContractRecord;
use crate::io::reads::TimedRead;

fn record(label: &str, stream: bool, status: Option<u16>) -> ContractRecord {
    ContractRecord {
        label: label.into(),
        endpoint: "/v1/chat/completions".into(),
        stream,
        sent_utc: String::new(),
        http_status: status,
        transport_error: None,
        body_bytes: 0,
        body_truncated: false,
        timeout_s: 60.0,
        dropped_after: None,
        dropped_ms: None,
    }
}

/// The context of a check judged for `served_model`, no engine, no log.
fn ctx(served_model: &str) -> CheckContext<'_> {
    CheckContext {
        served_model,
        ..CheckContext::default()
    }
}

/// A non-streamed exchange answering `body` with `status`.
fn body(label: &str, status: u16, body: &str) -> ContractExchange {
    ContractExchange {
        record: record(label, false, Some(status)),
        request: json!({}),
        body: body.as_bytes().to_vec(),
        reply: parse_body(body.as_bytes(), Some(status), 1.0),
    }
}

/// A streamed 200 exchange of `events` (each a JSON chunk, `[DONE]` added).
fn stream(label: &str, events: &[serde_json::Value]) -> ContractExchange {
    let mut text = String::new();
    for e in events {
        text.push_str(&format!("data: {e}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    let reads = vec![TimedRead {
        t_ms: 1.0,
        recv_ms: None,
        bytes: text.clone().into_bytes(),
    }];
    ContractExchange {
        record: record(label, true, Some(200)),
        request: json!({}),
        body: text.into_bytes(),
        reply: parse_stream(&reads, Some(200)),
    }
}

fn completion(content: &str, finish: &str, completion_tokens: u64) -> String {
    json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens, "total_tokens": 5 + completion_tokens}})
    .to_string()
}

fn chunk(choices: serde_json::Value) -> serde_json::Value {
    json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices})
}

/// A stream of `tokens` ending `finish`, then a usage chunk (`choices: []`) of `completion_tokens`.
fn chunks(tokens: &[&str], finish: &str, completion_tokens: u64) -> Vec<serde_json::Value> {
    let mut v = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]),
    )];
    for t in tokens {
        v.push(chunk(
            json!([{"index": 0, "delta": {"content": t}, "finish_reason": null}]),
        ));
    }
    v.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let mut u = chunk(json!([]));
    u["usage"] = json!({"prompt_tokens": 5, "completion_tokens": completion_tokens, "total_tokens": 5 + completion_tokens});
    v.push(u);
    v
}

const ERROR: &str =
    r#"{"error":{"message":"messages is required","type":"invalid_request_error","code":400}}"#;

fn spec(check: ContractCheck, expected: bool) -> CheckSpec {
    CheckSpec {
        check,
        expected,
        known_fail: false,
        line: 1,
        timeout_s: 60.0,
        prompt: "p".into(),
        max_tokens: 3,
        stop: (check == ContractCheck::Stop).then(|| "5".into()),
        log_line: None,
    }
}

fn state(check: ContractCheck, xs: &[ContractExchange]) -> CheckState {
    judge_check(&spec(check, true), xs, &ctx("m"))
}

fn fails_with(s: CheckState, has: &str) {
    match s {
        CheckState::Fail(d) => assert!(d.contains(has), "{d:?} should say {has:?}"),
        other => panic!("expected a failure saying {has:?}, got {other:?}"),
    }
}

#[test]
fn shape_passes_the_openai_objects_and_fails_a_wrong_type() {
    let good = [
        body("body", 200, &completion("Paris.", "stop", 2)),
        stream("stream", &chunks(&["Paris", "."], "stop", 2)),
        body("error", 400, ERROR),
    ];
    assert!(matches!(
        state(ContractCheck::Shape, &good),
        CheckState::Pass(_)
    ));
    let mut bad_chunk = chunks(&["Paris"], "stop", 1);
    bad_chunk[1]["created"] = json!("today");
    let xs = [
        body("body", 200, &completion("Paris.", "stop", 2)),
        stream("stream", &bad_chunk),
        body("error", 400, ERROR),
    ];
    fails_with(state(ContractCheck::Shape, &xs), "`stream` chunk 2 of");
    let xs = [
        body("body", 200, &completion("Paris.", "stop", 2)),
        stream("stream", &chunks(&["Paris"], "stop", 1)),
        body("error", 400, r#"{"detail":"bad"}"#),
    ];
    fails_with(state(ContractCheck::Shape, &xs), "is no error object");
}

#[test]
fn max_tokens_passes_the_exact_count_and_is_indeterminate_on_an_early_end() {
    let short = body("short", 200, &completion("yes", "stop", 1));
    let xs = [
        body("long", 200, &completion("1 2 3", "length", 3)),
        short.clone(),
    ];
    assert!(matches!(
        state(ContractCheck::MaxTokens, &xs),
        CheckState::Pass(_)
    ));
    let xs = [
        body("long", 200, &completion("1 2 3 4", "length", 4)),
        short.clone(),
    ];
    fails_with(
        state(ContractCheck::MaxTokens, &xs),
        "after 4 tokens; max_tokens was 3",
    );
    let xs = [body("long", 200, &completion("1", "stop", 1)), short];
    assert!(matches!(
        state(ContractCheck::MaxTokens, &xs),
        CheckState::Indeterminate(_)
    ));
}

#[test]
fn stop_fails_the_stop_string_left_in_the_text() {
    let xs = [
        body("body", 200, &completion("1, 2, 3, 4, ", "stop", 8)),
        stream("stream", &chunks(&["1, 2, 3, 4, "], "stop", 8)),
    ];
    assert!(matches!(
        state(ContractCheck::Stop, &xs),
        CheckState::Pass(_)
    ));
    let xs = [
        body("body", 200, &completion("1, 2, 3, 4, 5", "stop", 9)),
        stream("stream", &chunks(&["1, 2, 3, 4, "], "stop", 8)),
    ];
    fails_with(state(ContractCheck::Stop, &xs), "is in the text");
}

#[test]
fn usage_fails_a_total_that_does_not_add_up_and_usage_on_a_choice_chunk() {
    let xs = [
        body("body", 200, &completion("Paris.", "stop", 2)),
        stream("stream", &chunks(&["Paris", "."], "stop", 2)),
    ];
    assert!(matches!(
        state(ContractCheck::Usage, &xs),
        CheckState::Pass(_)
    ));
    let off = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":9}}"#;
    let xs = [
        body("body", 200, off),
        stream("stream", &chunks(&["Paris", "."], "stop", 2)),
    ];
    fails_with(state(ContractCheck::Usage, &xs), "is not total_tokens 9");
    let mut on_choice = chunks(&["Paris", "."], "stop", 2);
    let usage = on_choice.pop().unwrap()["usage"].clone();
    let last = on_choice.len() - 1;
    on_choice[last]["usage"] = usage;
    let xs = [
        body("body", 200, &completion("Paris.", "stop", 2)),
        stream("stream", &on_choice),
    ];
    fails_with(state(ContractCheck::Usage, &xs), "a chunk of its own");
}

#[test]
fn stream_parity_fails_a_different_usage() {
    let xs = [
        body("body", 200, &completion("Paris.", "stop", 2)),
        stream("stream", &chunks(&["Paris", "."], "stop", 3)),
    ];
    fails_with(
        state(ContractCheck::StreamParity, &xs),
        "usage (prompt, completion) differs",
    );
}

#[test]
fn errors_fails_a_200_and_a_serve_that_does_not_answer_after() {
    let mut xs = vec![
        body("no_messages", 400, ERROR),
        body("bad_role", 400, ERROR),
        body("negative_max_tokens", 422, ERROR),
        body("unknown_model", 404, ERROR),
        body("after", 200, &completion("yes", "stop", 1)),
    ];
    assert!(matches!(
        state(ContractCheck::Errors, &xs),
        CheckState::Pass(_)
    ));
    xs[1] = body("bad_role", 200, &completion("hm", "stop", 1));
    let mut dead = xs[4].clone();
    dead.record.transport_error = Some("connect failed: refused".into());
    xs[4] = dead;
    match state(ContractCheck::Errors, &xs) {
        CheckState::Fail(d) => {
            assert!(d.contains("`bad_role` (a bad role) got HTTP 200"), "{d}");
            assert!(
                d.contains("did not answer the next request normally"),
                "{d}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unsupported_needs_a_clean_not_supported_4xx_and_fails_only_when_expected() {
    let no = r#"{"error":{"message":"stop sequences are not supported","type":"invalid_request_error"}}"#;
    let xs = [body("body", 400, no), body("stream", 400, no)];
    let s = state(ContractCheck::Stop, &xs);
    assert!(matches!(s, CheckState::Unsupported(_)), "{s:?}");
    let v = verdict_of(&spec(ContractCheck::Stop, false), s.clone());
    assert_eq!(v.outcome, Outcome::Unsupported);
    assert_eq!(v.assertion, "contract.stop");
    assert!(
        v.message.starts_with("contract.stop UNSUPPORTED "),
        "{}",
        v.message
    );
    let v = verdict_of(&spec(ContractCheck::Stop, true), s);
    assert_eq!(v.outcome, Outcome::Fail);
    // Any other 4xx, and a timeout, are failures, never unsupported.
    let xs = [body("body", 400, ERROR), body("stream", 400, ERROR)];
    fails_with(state(ContractCheck::Stop, &xs), "HTTP 400");
    let mut hung = body("body", 200, "");
    hung.record.http_status = None;
    hung.record.transport_error = Some("timeout: the body did not end within 1 s".into());
    fails_with(
        state(ContractCheck::Stop, &[hung]),
        "no whole reply: timeout",
    );
}

#[test]
fn a_cut_stream_never_passes() {
    let mut text = String::new();
    for e in &chunks(&["Paris"], "stop", 1)[..2] {
        text.push_str(&format!("data: {e}\n\n"));
    }
    let reads = vec![TimedRead {
        t_ms: 1.0,
        recv_ms: None,
        bytes: text.clone().into_bytes(),
    }];
    let cut = ContractExchange {
        record: record("stream", true, Some(200)),
        request: json!({}),
        body: text.into_bytes(),
        reply: parse_stream(&reads, Some(200)),
    };
    let xs = [body("body", 200, &completion("Paris", "stop", 1)), cut];
    fails_with(state(ContractCheck::StreamParity, &xs), "a cut stream");
}

#[test]
fn errors_answered_as_ordinary_requests_are_unsupported_and_a_5xx_among_them_fails() {
    // llama.cpp (measured, docs/contract.md): an unknown model and a bad role answered 200 as ordinary
    // requests, the others rejected: the serve lacks that validation.
    let mut xs = vec![
        body("no_messages", 400, ERROR),
        body("bad_role", 200, &completion("Paris.", "stop", 2)),
        body("negative_max_tokens", 400, ERROR),
        body("unknown_model", 200, &completion("Paris.", "stop", 2)),
        body("after", 200, &completion("Paris.", "stop", 2)),
    ];
    match state(ContractCheck::Errors, &xs) {
        CheckState::Unsupported(d) => {
            assert!(d.contains("`bad_role` (a bad role) got HTTP 200"), "{d}");
            assert!(d.contains("`unknown_model`"), "{d}");
            assert!(
                d.contains("no_messages 400, negative_max_tokens 400"),
                "{d}"
            );
        }
        other => panic!("{other:?}"),
    }
    let v = verdict_of(
        &spec(ContractCheck::Errors, true),
        state(ContractCheck::Errors, &xs),
    );
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    // A 500 is broken, never lacking: the whole check fails, the 200s named too.
    xs[2] = body("negative_max_tokens", 500, ERROR);
    match state(ContractCheck::Errors, &xs) {
        CheckState::Fail(d) => {
            assert!(d.contains("got HTTP 500"), "{d}");
            assert!(d.contains("`bad_role` (a bad role) got HTTP 200"), "{d}");
        }
        other => panic!("{other:?}"),
    }
    // A 200 that is not a chat completion (an error inside it) is no ordinary answer.
    xs[2] = body("negative_max_tokens", 400, ERROR);
    xs[1] = body("bad_role", 200, ERROR);
    fails_with(state(ContractCheck::Errors, &xs), "got HTTP 200, not a 4xx");
}

#[test]
fn a_501_not_implemented_is_unsupported_and_another_5xx_is_not() {
    let no = r#"{"error":{"code":501,"message":"This server does not support embeddings. Start it with `--embeddings`","type":"not_supported_error"}}"#;
    let x = body("body", 501, no);
    assert!(unsupported(&x).is_some_and(|u| u.starts_with("HTTP 501")));
    let x = body("body", 503, no);
    assert_eq!(unsupported(&x), None);
}

fn spec_of(check: ContractCheck) -> CheckSpec {
    spec(check, true)
}

#[test]
fn logprobs_fails_a_chosen_token_inconsistent_with_its_place() {
    let body_with = |chosen: f64, top: serde_json::Value| {
        json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "1"}, "finish_reason": "length",
                "logprobs": {"content": [{"token": "1", "logprob": chosen, "top_logprobs": top}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
        .to_string()
    };
    let top = json!([{"token": "1", "logprob": -0.5}, {"token": "One", "logprob": -1.5}, {"token": "A", "logprob": -3.0}]);
    let ok = body_with(-0.5, top.clone());
    assert!(matches!(
        judge_check(
            &spec_of(ContractCheck::Logprobs),
            &[body("body", 200, &ok)],
            &ctx("m")
        ),
        CheckState::Pass(_)
    ));
    // Its own entry says another logprob.
    let off = body_with(-0.9, top);
    fails_with(
        judge_check(
            &spec_of(ContractCheck::Logprobs),
            &[body("body", 200, &off)],
            &ctx("m"),
        ),
        "differs from its own entry",
    );
    // Not listed, yet more likely than the least listed alternative.
    let unlisted = json!([{"token": "One", "logprob": -1.5}, {"token": "A", "logprob": -2.0}, {"token": "B", "logprob": -3.0}]);
    fails_with(
        judge_check(
            &spec_of(ContractCheck::Logprobs),
            &[body("body", 200, &body_with(-2.5, unlisted))],
            &ctx("m"),
        ),
        "is above the least listed alternative",
    );
}

#[test]
fn models_fails_a_list_without_the_served_model_and_embeddings_two_dimensions() {
    let list =
        r#"{"object":"list","data":[{"id":"other","object":"model","created":1,"owned_by":"x"}]}"#;
    let x = body("list", 200, list);
    fails_with(
        judge_check(
            &spec_of(ContractCheck::Models),
            std::slice::from_ref(&x),
            &ctx("smollm2"),
        ),
        "does not list the served model",
    );
    assert!(matches!(
        judge_check(&spec_of(ContractCheck::Models), &[x], &ctx("other")),
        CheckState::Pass(_)
    ));
    let emb = |vs: &[&[f64]]| {
        let data: Vec<_> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
            .collect();
        json!({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1}}).to_string()
    };
    let xs = [
        body("first", 200, &emb(&[&[0.1, 0.2]])),
        body("again", 200, &emb(&[&[0.1, 0.2]])),
        body("batch", 200, &emb(&[&[0.1, 0.2], &[0.3]])),
    ];
    fails_with(
        judge_check(&spec_of(ContractCheck::Embeddings), &xs, &ctx("m")),
        "not of one dimension",
    );
}

/// A streamed 200 exchange whose token chunks arrive at the given ms; a finish chunk and `[DONE]` when
/// `end`, else cut there, as a client that dropped it after them (`dropped_after`).
fn timed(label: &str, tokens: &[(f64, &str)], end: bool, max_tokens: u64) -> ContractExchange {
    let mut reads = vec![TimedRead {
        t_ms: 0.5,
        recv_ms: None,
        bytes: format!(
            "data: {}\n\n",
            chunk(json!([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]))
        )
        .into_bytes(),
    }];
    for (t, tok) in tokens {
        reads.push(TimedRead {
            t_ms: *t,
            recv_ms: None,
            bytes: format!(
                "data: {}\n\n",
                chunk(json!([{"index": 0, "delta": {"content": tok}, "finish_reason": null}]))
            )
            .into_bytes(),
        });
    }
    if end {
        let last = tokens.last().map(|t| t.0).unwrap_or(1.0);
        reads.push(TimedRead {
            t_ms: last + 1.0,
            recv_ms: None,
            bytes: format!(
                "data: {}\n\ndata: [DONE]\n\n",
                chunk(json!([{"index": 0, "delta": {}, "finish_reason": "length"}]))
            )
            .into_bytes(),
        });
    }
    let mut rec = record(label, true, Some(200));
    if !end {
        rec.dropped_after = Some(tokens.len());
        rec.dropped_ms = tokens.last().map(|t| t.0);
    }
    ContractExchange {
        record: rec,
        request: json!({"max_tokens": max_tokens}),
        body: reads.iter().flat_map(|r| r.bytes.clone()).collect(),
        reply: parse_stream(&reads, Some(200)),
    }
}

fn cancel_xs(after_first_ms: f64, dropped_end: bool) -> Vec<ContractExchange> {
    let four = |t0: f64| {
        [
            (t0, "1"),
            (t0 + 5.0, "2"),
            (t0 + 10.0, "3"),
            (t0 + 15.0, "4"),
        ]
    };
    vec![
        timed("baseline", &four(40.0), true, 4),
        timed(
            "dropped",
            &[(40.0, "1"), (60.0, "2"), (80.0, "3"), (100.0, "4")],
            dropped_end,
            512,
        ),
        timed("after", &four(after_first_ms), true, 4),
    ]
}

#[test]
fn cancel_passes_a_freed_slot_fails_a_busy_one_and_cannot_tell_a_reply_that_ended_first() {
    // The rest of the dropped reply: 508 tokens at 20 ms = 10160 ms; the bound 3 × 40 + 250 = 370 ms.
    let c = spec_of(ContractCheck::Cancel);
    match judge_check(&c, &cancel_xs(60.0, false), &ctx("m")) {
        CheckState::Pass(d) => assert!(d.contains("the slot was freed"), "{d}"),
        other => panic!("{other:?}"),
    }
    fails_with(
        judge_check(&c, &cancel_xs(9000.0, false), &ctx("m")),
        "the slot stayed busy",
    );
    match judge_check(&c, &cancel_xs(2000.0, false), &ctx("m")) {
        CheckState::Indeterminate(d) => assert!(d.contains("cannot be told apart"), "{d}"),
        other => panic!("{other:?}"),
    }
    match judge_check(&c, &cancel_xs(60.0, true), &ctx("m")) {
        CheckState::Indeterminate(d) => assert!(d.contains("ended on its own"), "{d}"),
        other => panic!("{other:?}"),
    }
    // The engine's cancellation line: required when known and the log is kept.
    let llama = CheckContext {
        served_model: "m",
        engine: Some(Engine::LlamaCpp),
        log: Some("srv  update_slots: all slots are idle\n"),
        metrics: None,
    };
    fails_with(
        judge_check(&c, &cancel_xs(60.0, false), &llama),
        "has no cancellation line",
    );
    let logged = CheckContext {
        log: Some("0.08.644.697 W srv          stop: cancel task, id_task = 0\n"),
        ..llama
    };
    match judge_check(&c, &cancel_xs(60.0, false), &logged) {
        CheckState::Pass(d) => assert!(d.contains("logged its cancellation"), "{d}"),
        other => panic!("{other:?}"),
    }
    // A dead serve after the drop.
    let mut xs = cancel_xs(60.0, false);
    xs[2].record.transport_error = Some("connect failed: connection refused".into());
    fails_with(judge_check(&c, &xs, &ctx("m")), "did not answer `after`");
}

#[test]
fn a_known_failure_is_its_own_state_and_a_pass_under_known_fail_fails() {
    let mut c = spec(ContractCheck::Stop, false);
    c.known_fail = true;
    let v = verdict_of(
        &c,
        CheckState::Fail("the stop string is in the text".into()),
    );
    assert_eq!(v.outcome, Outcome::KnownFail);
    assert!(
        v.message
            .contains("KNOWN-FAIL fails as [contract] known_fail states"),
        "{}",
        v.message
    );
    let v = verdict_of(&c, CheckState::Pass("honoured".into()));
    assert_eq!(v.outcome, Outcome::Fail);
    assert!(v.message.contains("move it to expect"), "{}", v.message);
}

#[test]
fn the_engine_profile_s_word_makes_a_clean_failure_unsupported_never_a_cut_reply() {
    // llama-cpp-python answers response_format json_schema with a 500 from its request validation; its
    // profile states it lacks json_schema.
    let refused = r#"{"error":{"message":"1 validation error: Input should be 'text' or 'json_object'","type":"internal_server_error"}}"#;
    let xs = [
        body("plain", 200, &completion("Paris", "stop", 1)),
        body("body", 500, refused),
    ];
    let c = spec(ContractCheck::JsonSchema, false);
    fails_with(judge_check(&c, &xs, &ctx("m")), "HTTP 500");
    let lcp = CheckContext {
        served_model: "m",
        engine: Some(Engine::LlamaCppPython),
        log: None,
        metrics: None,
    };
    match judge_check(&c, &xs, &lcp) {
        CheckState::Unsupported(d) => {
            assert!(d.contains("the llama-cpp-python profile"), "{d}");
            assert!(d.contains("HTTP 500"), "{d}");
        }
        other => panic!("{other:?}"),
    }
    // A timeout is never covered by the profile's word.
    let mut cut = xs.clone();
    cut[1].record.transport_error = Some("timeout: the body did not end".into());
    fails_with(judge_check(&c, &cut, &lcp), "no whole reply");
    // Nor a check the profile does not name.
    let vllm = CheckContext {
        engine: Some(Engine::Vllm),
        ..lcp
    };
    fails_with(judge_check(&c, &xs, &vllm), "HTTP 500");
}

#[test]
fn cancel_reads_vllm_s_running_requests_where_no_log_line_says_it() {
    // vllm 0.32.0: the dropped request gone from vllm:num_requests_running after the check (its abort is
    // not counted in vllm:request_success_total).
    let c = spec_of(ContractCheck::Cancel);
    let m = |running: f64| {
        format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{engine=\"0\",model_name=\"smollm2\"}} {running}\n"
        )
    };
    let (idle, busy) = (m(0.0), m(1.0));
    let vllm = |after: &str| {
        let ctx = CheckContext {
            served_model: "m",
            engine: Some(Engine::Vllm),
            log: Some(""),
            metrics: Some(("", after)),
        };
        judge_check(&c, &cancel_xs(60.0, false), &ctx)
    };
    match vllm(&idle) {
        CheckState::Pass(d) => assert!(d.contains("runs no request after the check"), "{d}"),
        other => panic!("{other:?}"),
    }
    fails_with(vllm(&busy), "the dropped reply went on");
    assert_eq!(
        cancel::counter(&m(2.0), "vllm:num_requests_running", ""),
        Some(2.0)
    );
    assert_eq!(
        cancel::counter("x{a=\"1\",b=\"2\"} 3\nx{a=\"2\"} 4\n", "x", r#"a="1""#),
        Some(3.0)
    );
}
