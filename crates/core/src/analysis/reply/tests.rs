use super::body::*;
use super::fields::*;
use super::stream::*;
use crate::analysis::quote::*;
use crate::analysis::reply_types::*;
use crate::io::reads::TimedRead;
use crate::vocab::{FailureCode, NoteKind};

/// One SSE data event holding a chat.completion.chunk with this delta JSON and finish_reason JSON.
fn ev(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

fn reads(parts: &[(f64, &str)]) -> Vec<TimedRead> {
    parts
        .iter()
        .map(|(t, s)| TimedRead {
            recv_ms: None,
            t_ms: *t,
            bytes: s.as_bytes().to_vec(),
        })
        .collect()
}

fn one(body: &str) -> Reply {
    parse_stream(&reads(&[(0.0, body)]), Some(200))
}

const DONE: &str = "data: [DONE]\n\n";

#[test]
fn role_only_and_empty_content_chunks_are_empty_chunks_not_tokens() {
    let body = [
        ev(r#"{"role":"assistant"}"#, "null"),
        ev(r#"{"role":"assistant","content":""}"#, "null"),
        ev(r#"{"content":null}"#, "null"),
        ev(r#"{"content":"Hi"}"#, "null"),
        ev("{}", r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.empty_chunks, 3);
    assert_eq!(r.token_chunks.len(), 1);
    assert_eq!(r.chunks, 5);
    assert_eq!(r.content, "Hi");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert!(!r.truncated);
}

#[test]
fn empty_choices_chunk_is_metadata_and_last_usage_wins_unsummed() {
    let body = [
        ev(r#"{"content":"a"}"#, "null").replace("]}", r#"],"usage":{"completion_tokens":1}}"#),
        ev(r#"{"content":"b"}"#, r#""stop""#),
        "data: {\"choices\":[],\"usage\":null}\n\n".into(),
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n".into(),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.usage.as_ref().and_then(|u| u.completion_tokens), Some(2));
    assert_eq!(r.usage.as_ref().and_then(|u| u.prompt_tokens), Some(3));
    assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    assert!(!r.has_note(NoteKind::UsageMissing));
}

#[test]
fn string_error_with_sibling_error_type_is_a_validation_error() {
    let r = one(
        "data:{\"error\":\"Input validation error: too long\",\"error_type\":\"validation\"}\n\n",
    );
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind, "validation_error");
    assert_eq!(e.error_type.as_deref(), Some("validation"));
    assert!(r.has_note(NoteKind::ErrorInside200Stream));
    assert!(!r.truncated);
    assert!(r
        .failure()
        .unwrap()
        .starts_with("validation_error: Input validation error"));
}

#[test]
fn error_after_tokens_is_mid_stream_and_keeps_partial_content() {
    let body = [
        ev(r#"{"content":"def"}"#, "null"),
        "data: {\"error\":{\"code\":500,\"message\":\"the request exceeds the available context size\",\"type\":\"exceed_context_size_error\"}}\n\n".into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.error.as_ref().unwrap().kind, "error_mid_stream");
    assert_eq!(r.content, "def");
    assert_eq!(r.finish_reason, None);
}

#[test]
fn event_error_with_plain_text_data_is_an_error() {
    let r = one("event: error\ndata: upstream overloaded\n\n");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind, "error_in_stream");
    assert_eq!(e.message, "upstream overloaded");
    assert!(r.parse_errors.is_empty());
}

#[test]
fn vllm_style_error_object_is_an_error() {
    let r = parse_body(
        br#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}"#,
        Some(400),
        5.0,
    );
    assert_eq!(r.error.as_ref().unwrap().kind, "context_exceeded");
    assert_eq!(r.error.as_ref().unwrap().http_status, Some(400));
}

#[test]
fn malformed_json_is_recorded_with_reason_and_stream_goes_on() {
    let body = [
        ev(r#"{"content":"a"}"#, "null"),
        "data: {\"choices\":[\n\n".into(),
        ev(r#"{"content":"b"}"#, r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.content, "ab");
    assert_eq!(r.parse_errors.len(), 1);
    assert!(
        r.parse_errors[0].contains("malformed JSON"),
        "{:?}",
        r.parse_errors
    );
}

#[test]
fn empty_string_finish_reason_is_none_and_done_without_finish_warns() {
    let body = [ev(r#"{"content":"a"}"#, r#""""#), DONE.into()].concat();
    let r = one(&body);
    assert_eq!(r.finish_reason, None);
    assert!(r.has_note(NoteKind::FinishReasonMissing));
    assert!(!r.truncated);
}

#[test]
fn finish_without_done_warns_no_done_marker_and_is_not_truncated() {
    let r = one(&ev(r#"{"content":"a"}"#, r#""stop""#));
    assert!(r.has_note(NoteKind::NoDoneMarker));
    assert!(!r.truncated);
    assert_eq!(r.failure(), None);
}

#[test]
fn eof_without_finish_or_done_is_truncated() {
    let r = one(&ev(r#"{"content":"a"}"#, "null"));
    assert!(r.truncated);
    assert!(!r.incomplete_tail);
    assert_eq!(
        r.failure().as_deref(),
        Some("truncated_stream: no finish_reason, no [DONE]")
    );
}

#[test]
fn unterminated_done_at_eof_is_used_with_a_warning() {
    let body = [ev(r#"{"content":"a"}"#, r#""stop""#), "data: [DONE]".into()].concat();
    let r = one(&body);
    assert!(r.done_seen);
    assert!(r.incomplete_tail);
    assert!(!r.truncated);
    assert!(r.has_note(NoteKind::UnterminatedLastEvent));
}

#[test]
fn cut_usage_chunk_after_finish_is_truncated() {
    let body = [
        ev(r#"{"content":"a"}"#, r#""stop""#),
        "data: {\"choices\":[],\"usa".into(),
    ]
    .concat();
    let r = one(&body);
    assert!(r.truncated);
    assert_eq!(
        r.failure().as_deref(),
        Some("truncated_stream: no [DONE], incomplete last event")
    );
}

#[test]
fn reasoning_and_reasoning_content_are_both_read_and_never_doubled() {
    let body = [
        ev(r#"{"reasoning":"think"}"#, "null"),
        ev(r#"{"reasoning_content":" more"}"#, "null"),
        ev(r#"{"reasoning_content":" x","reasoning":" x"}"#, "null"),
        ev(r#"{"content":"ok"}"#, r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.reasoning, "think more x");
    assert_eq!(r.content, "ok");
    assert_eq!(r.token_chunks.len(), 4);
}

#[test]
fn tool_calls_first_chunk_is_a_token_chunk_and_calls_are_assembled() {
    let body = [
        ev(r#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}"#, "null"),
        ev(r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}"#, "null"),
        ev(r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}"#, "null"),
        ev(r#"{"tool_calls":[]}"#, r#""tool_calls""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.token_chunks.len(), 3);
    assert!(r.token_chunks[0].tool_call);
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name.as_deref(), Some("get_weather"));
    assert_eq!(r.tool_calls[0].id.as_deref(), Some("call_1"));
    assert_eq!(r.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

/// `<think>…</think>` at the start of streamed content is reasoning: moved out of the content (judged
/// without it), after the serve's own reasoning field, with warning `reasoning_in_content`.
#[test]
fn think_markup_in_streamed_content_is_moved_to_reasoning_with_a_warning() {
    let body = [
        ev(r#"{"content":"<think>"}"#, "null"),
        ev(r#"{"content":"2+2 is 4."}"#, "null"),
        ev(r#"{"content":"</think>\n\n"}"#, "null"),
        ev(r#"{"content":"The answer is 4."}"#, r#""stop""#),
        DONE.to_string(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.content, "The answer is 4.");
    assert_eq!(r.reasoning, "2+2 is 4.");
    assert_eq!(r.token_chunks.len(), 4, "arrival is untouched");
    let w: Vec<String> = r
        .warnings
        .iter()
        .filter(|n| n.kind != NoteKind::UsageMissing)
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        w,
        ["reasoning_in_content: <think>…</think> at the start of content: 9 chars judged as reasoning, not content"]
    );
    // A plain answer is left alone and warns nothing.
    let r = one(&[
        ev(r#"{"content":"I think so."}"#, r#""stop""#),
        DONE.to_string(),
    ]
    .concat());
    assert_eq!(r.content, "I think so.");
    assert!(
        !r.has_note(NoteKind::ReasoningInContent),
        "{:?}",
        r.warnings
    );
}

/// A non-streamed body gets the same treatment; markup never closed leaves no content at all.
#[test]
fn think_markup_in_a_body_is_moved_too_and_unclosed_markup_leaves_no_content() {
    let body = br#"{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"first","content":"<think>second"},"finish_reason":"length"}],"usage":{"completion_tokens":8}}"#;
    let r = parse_body(body, Some(200), 5.0);
    assert_eq!(r.content, "");
    assert_eq!(r.reasoning, "first\nsecond");
    assert!(r.has_note(NoteKind::ReasoningInContent));
    assert!(r
        .warnings
        .iter()
        .any(|n| n.to_string().contains("<think>…(never closed)")));
}

/// `usage.completion_tokens_details.reasoning_tokens` is read as a breakdown (OpenAI shape).
#[test]
fn reasoning_tokens_are_read_from_completion_tokens_details() {
    let body = br#"{"choices":[{"index":0,"message":{"content":"4"},"finish_reason":"stop"}],"usage":{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":6}}}"#;
    let u = parse_body(body, Some(200), 1.0).usage.unwrap();
    assert_eq!(
        (u.completion_tokens, u.reasoning_tokens),
        (Some(9), Some(6))
    );
}

#[test]
fn llama_cpp_timings_per_token_give_per_chunk_counts() {
    let t = |n: u64| {
        format!(
            r#","timings":{{"predicted_n":{n},"predicted_ms":1.0,"predicted_per_second":40.0}}}}"#
        )
    };
    let body = [
        ev(r#"{"role":"assistant","content":null}"#, "null"),
        ev(r#"{"content":"The"}"#, "null").replacen("]}", &format!("]{}", t(1)), 1),
        ev(r#"{"content":" capital of"}"#, "null").replacen("]}", &format!("]{}", t(3)), 1),
        ev("{}", r#""length""#).replacen("]}", &format!("]{}", t(3)), 1),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    let counts: Vec<_> = r.token_chunks.iter().map(|c| c.tokens).collect();
    assert_eq!(counts, [Some(1), Some(2)]);
    assert!(r.has_note(NoteKind::MultiTokenChunks));
    assert!(r.has_note(NoteKind::TruncatedByMaxTokens));
    assert_eq!(r.timings.as_ref().and_then(|t| t.predicted_n), Some(3));
}

#[test]
fn per_chunk_counts_need_every_token_chunk_to_carry_them() {
    // Usage only on the last token chunk (a serve that attaches final usage to the finish chunk).
    let body = [
        ev(r#"{"content":"a"}"#, "null"),
        ev(r#"{"content":"b"}"#, r#""stop""#).replacen(
            "]}",
            r#"],"usage":{"completion_tokens":2}}"#,
            1,
        ),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert!(r.token_chunks.iter().all(|c| c.tokens.is_none()));
    assert!(!r.has_note(NoteKind::MultiTokenChunks));
}

#[test]
fn non_streamed_body_is_read() {
    let body = br#"{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"The capital of France is Paris."}}],"model":"smollm2-135m","object":"chat.completion","usage":{"completion_tokens":8,"prompt_tokens":32,"total_tokens":40},"timings":{"cache_n":31,"prompt_n":1,"predicted_n":8,"predicted_per_second":31.15}}"#;
    let r = parse_body(body, Some(200), 260.0);
    assert!(!r.streamed);
    assert_eq!(r.content, "The capital of France is Paris.");
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(r.usage.as_ref().and_then(|u| u.completion_tokens), Some(8));
    assert_eq!(r.timings.as_ref().and_then(|t| t.cache_n), Some(31));
    assert_eq!(r.end_ms, Some(260.0));
    assert!(r.token_chunks.is_empty());
    assert_eq!(r.failure(), None);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn bad_json_400_body_is_a_validation_error() {
    let body = br#"{"error":{"code":400,"message":"[json.exception.parse_error.101] parse error","type":"invalid_request_error"}}"#;
    let r = parse_body(body, Some(400), 1.0);
    assert_eq!(r.error.as_ref().unwrap().kind, "validation_error");
}

#[test]
fn non_json_error_body_is_http_status_with_text() {
    let r = parse_body(b"Internal Server Error", Some(500), 1.0);
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind, "http_status");
    assert_eq!(e.message, "Internal Server Error");
}

#[test]
fn cut_body_is_truncated() {
    let r = parse_body(
        br#"{"choices":[{"message":{"content":"The cap"#,
        Some(200),
        1.0,
    );
    assert!(r.truncated && r.incomplete_tail);
    assert!(r.failure().unwrap().starts_with("truncated_body"));
}

#[test]
fn plain_json_body_given_as_stream_is_parsed_as_body() {
    let r = parse_stream(
        &reads(&[(
            3.0,
            r#"{"error":{"message":"Loading model","type":"unavailable_error","code":503}}"#,
        )]),
        Some(503),
    );
    assert!(r.has_note(NoteKind::NotAnSseStream));
    assert_eq!(r.error.as_ref().unwrap().kind, "http_status");
    assert_eq!(r.error.as_ref().unwrap().message, "Loading model");
}

#[test]
fn chunk_not_an_object_is_a_parse_error() {
    let r = one("data: 42\n\ndata: [DONE]\n\n");
    assert_eq!(r.parse_errors.len(), 1);
    assert_eq!(r.chunks, 0);
}

#[test]
fn a_well_formed_stream_has_no_warnings_and_no_flags() {
    let body = [
        ev(r#"{"role":"assistant"}"#, "null"),
        ev(r#"{"content":"Hi"}"#, r#""stop""#),
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n".into(),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert!(
        r.warnings.is_empty() && r.flags.is_empty(),
        "{:?} {:?}",
        r.warnings,
        r.flags
    );
    assert!(!r.truncated && r.failure().is_none());
    assert_eq!(r.http_status, Some(200));
}

#[test]
fn data_after_done_is_counted() {
    let body = [
        ev(r#"{"content":"a"}"#, r#""stop""#),
        DONE.into(),
        ev(r#"{"content":"b"}"#, "null"),
        ev("{}", "null"),
    ]
    .concat();
    let r = one(&body);
    assert!(
        r.warnings.iter().any(|w| w.to_string().starts_with(
            "data_after_done: 209 bytes after [DONE] (2 data events), not read (an SSE client stops at [DONE]): \"data: {\\\"object"
        )),
        "{:?}",
        r.warnings
    );
    // Not content, not judged: the reply is the one before [DONE].
    assert_eq!(r.content, "a");
    assert_eq!(r.chunks, 1);
    assert_eq!(r.bytes_after_done, 209);
    assert_eq!(r.failure(), None);
}

#[test]
fn parse_errors_name_the_event_number_and_time() {
    let body = [
        ev(r#"{"content":"a"}"#, "null"),
        "data: {oops\n\n".into(),
        ev("{}", r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = parse_stream(&reads(&[(7.5, &body)]), Some(200));
    assert_eq!(r.parse_errors.len(), 1);
    assert!(
        r.parse_errors[0].starts_with("event 2 at 7.5 ms (line 3): malformed JSON"),
        "{:?}",
        r.parse_errors
    );
}

#[test]
fn empty_reasoning_content_falls_back_to_reasoning() {
    let r = one(&[
        ev(r#"{"reasoning_content":"","reasoning":"x"}"#, "null"),
        ev(r#"{"content":"ok"}"#, r#""stop""#),
        DONE.into(),
    ]
    .concat());
    assert_eq!(r.reasoning, "x");
}

#[test]
fn token_counts_accept_whole_floats_only() {
    let u = |v: &str| {
        usage_of(&serde_json::from_str(&format!(r#"{{"completion_tokens":{v}}}"#)).unwrap())
            .unwrap()
            .completion_tokens
    };
    assert_eq!(u("8"), Some(8));
    assert_eq!(u("8.0"), Some(8));
    assert_eq!(u("0.0"), Some(0));
    assert_eq!(u("8.5"), None);
    assert_eq!(u("-1.0"), None);
    assert_eq!(u("-1"), None);
    assert_eq!(u("\"8\""), None);
}

#[test]
fn snippets_cut_at_200_characters() {
    let exactly = "é".repeat(200);
    assert_eq!(snippet(&exactly), exactly);
    let longer = "é".repeat(201);
    assert_eq!(snippet(&longer), format!("{exactly}…"));
}

#[test]
fn several_tool_calls_are_assembled_by_index() {
    let body = [
        ev(r#"{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":"}},{"index":1,"id":"b","function":{"name":"g","arguments":"{"}}]}"#, "null"),
        ev(r#"{"tool_calls":[{"index":1,"function":{"arguments":"}"}},{"index":0,"function":{"arguments":"1}"}}]}"#, r#""tool_calls""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.tool_calls.len(), 2);
    assert_eq!(
        (
            r.tool_calls[0].index,
            r.tool_calls[0].name.as_deref(),
            r.tool_calls[0].arguments.as_str()
        ),
        (0, Some("f"), "{\"x\":1}")
    );
    assert_eq!(
        (
            r.tool_calls[1].index,
            r.tool_calls[1].name.as_deref(),
            r.tool_calls[1].arguments.as_str()
        ),
        (1, Some("g"), "{}")
    );
    // Pieces without an index take their position.
    let mut acc = Vec::new();
    merge_tool_calls(
        &mut acc,
        &[
            serde_json::json!({"function":{"name":"p"}}),
            serde_json::json!({"function":{"name":"q"}}),
        ],
    );
    assert_eq!(acc.iter().map(|t| t.index).collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn a_counter_that_does_not_advance_on_a_token_chunk_gives_no_per_chunk_counts() {
    let with = |n: u64, content: &str| {
        ev(&format!(r#"{{"content":"{content}"}}"#), "null").replacen(
            "]}",
            &format!(r#"],"usage":{{"completion_tokens":{n}}}}}"#),
            1,
        )
    };
    let body = [
        with(1, "a"),
        with(1, "b"),
        with(2, "c"),
        ev("{}", r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert!(
        r.token_chunks.iter().all(|t| t.tokens.is_none()),
        "{:?}",
        r.token_chunks
    );
    let body = [
        with(1, "a"),
        with(2, "b"),
        with(3, "c"),
        ev("{}", r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert!(r.token_chunks.iter().all(|t| t.tokens == Some(1)));
    assert!(!r.has_note(NoteKind::MultiTokenChunks));
}

#[test]
fn an_error_event_in_a_non_200_stream_is_not_flagged_as_inside_200() {
    let r = parse_stream(
        &reads(&[(0.0, "event: error\ndata: {\"message\":\"overloaded\"}\n\n")]),
        Some(503),
    );
    assert_eq!(r.error.as_ref().unwrap().message, "overloaded");
    assert!(!r.has_note(NoteKind::ErrorInside200Stream));
    let r = parse_stream(
        &reads(&[(0.0, "event: error\ndata: {\"message\":\"overloaded\"}\n\n")]),
        None,
    );
    assert!(r.has_note(NoteKind::ErrorInside200Stream));
}

#[test]
fn no_done_marker_only_when_the_stream_ended_cleanly() {
    let r = one(&ev(r#"{"content":"a"}"#, r#""stop""#));
    assert!(r.has_note(NoteKind::NoDoneMarker));
    // After a finish chunk, a cut usage chunk is a truncation, not a missing [DONE].
    let r = one(&[
        ev(r#"{"content":"a"}"#, r#""stop""#),
        "data: {\"choices\":[],\"usa".into(),
    ]
    .concat());
    assert!(!r.has_note(NoteKind::NoDoneMarker), "{:?}", r.warnings);
    assert!(!r.has_note(NoteKind::FinishReasonMissing));
    // [DONE] without any finish_reason warns; with one it does not.
    assert!(
        !one(&[ev(r#"{"content":"a"}"#, r#""stop""#), DONE.into()].concat())
            .has_note(NoteKind::FinishReasonMissing)
    );
}

#[test]
fn an_incomplete_tail_is_a_truncation_when_it_held_data_or_was_cut() {
    // The last line is whole but its JSON is not, and no blank line follows.
    let r = one(&[
        ev(r#"{"content":"a"}"#, r#""stop""#),
        "data: {\"choices\":[\n".into(),
    ]
    .concat());
    assert!(r.truncated && r.incomplete_tail);
    // A cut `event:` line with no data is lost too.
    let r = one(&[ev(r#"{"content":"a"}"#, r#""stop""#), "event: mess".into()].concat());
    assert!(r.truncated, "{:?}", r.warnings);
    // A whole `event:` line with no data and no cut is nothing lost.
    let r = one(&[ev(r#"{"content":"a"}"#, r#""stop""#), "event: x\n".into()].concat());
    assert!(!r.truncated && r.incomplete_tail, "{:?}", r.warnings);
    // After [DONE] it is not even read.
    let r = one(&[
        ev(r#"{"content":"a"}"#, r#""stop""#),
        DONE.into(),
        "event: x\n".into(),
    ]
    .concat());
    assert!(!r.truncated && !r.incomplete_tail);
    assert_eq!(r.bytes_after_done, 9);
}

#[test]
fn bodies_say_what_is_wrong_with_them() {
    // Not JSON at all, or empty, with a 200: unparseable, not truncated.
    for body in [&b"hello"[..], b"", b"  "] {
        let r = parse_body(body, Some(200), 1.0);
        assert!(!r.truncated, "{body:?}");
        assert!(
            r.failure()
                .unwrap()
                .starts_with("unparseable_body: body is not JSON"),
            "{:?}",
            r.failure()
        );
    }
    // Cut: the exact failure.
    let r = parse_body(
        br#"{"choices":[{"message":{"content":"The cap"#,
        Some(200),
        1.0,
    );
    assert_eq!(
        r.failure().as_deref(),
        Some("truncated_body: no finish_reason, body ends inside JSON")
    );
    assert_eq!(r.http_status, Some(200));
    // Invalid UTF-8 is counted; a real U+FFFD is not.
    let r = parse_body(b"{\"choices\":[{\"index\":0,\"message\":{\"content\":\"a\xffb\xef\xbf\xbd\"},\"finish_reason\":\"stop\"}]}", Some(200), 1.0);
    assert_eq!(r.replacement_chars, 1);
    assert_eq!(
        r.parse_errors,
        ["invalid UTF-8 in body: 1 replacement characters"]
    );
    // An error object in a 200 body is flagged; in a 400 body it is not.
    let err = br#"{"error":{"message":"bad","type":"server_error"}}"#;
    assert!(parse_body(err, Some(200), 1.0).has_note(NoteKind::ErrorInside200Body));
    assert_eq!(
        parse_body(err, Some(200), 1.0).error.unwrap().kind,
        "server_error"
    );
    assert!(!parse_body(err, Some(400), 1.0).has_note(NoteKind::ErrorInside200Body));
    // No choice 0, no choices at all, neither choices nor error.
    let r = parse_body(
        br#"{"choices":[{"index":1,"message":{"content":"x"}}]}"#,
        Some(200),
        1.0,
    );
    assert_eq!(r.parse_errors, ["no choice with index 0 in the body"]);
    assert!(!r.has_note(NoteKind::FinishReasonMissing));
    let r = parse_body(br#"{"choices":[]}"#, Some(200), 1.0);
    assert!(r.parse_errors.is_empty());
    assert!(r.has_note(NoteKind::FinishReasonMissing));
    assert!(parse_body(b"{}", Some(200), 1.0).parse_errors[0]
        .starts_with("body has neither `choices` nor `error`"));
    assert!(parse_body(b"{}", Some(404), 1.0).error.is_some());
    assert!(parse_body(b"[1]", Some(200), 1.0).parse_errors[0]
        .starts_with("body is JSON but not an object"));
    // finish_reason length flags the body.
    let r = parse_body(br#"{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"length"}],"usage":{"completion_tokens":1}}"#, Some(200), 1.0);
    assert_eq!(r.flags, ["truncated_by_max_tokens"]);
    assert!(r.warnings.is_empty());
}

#[test]
fn invalid_utf8_in_a_stream_is_a_parse_error_with_the_count() {
    let body = [
        ev(r#"{"content":"a\u00e9"}"#, r#""stop""#).into_bytes(),
        b"data: {\"choices\":[],\"x\":\"\xff\xfe\"}\n\n".to_vec(),
        DONE.as_bytes().to_vec(),
    ]
    .concat();
    let r = parse_stream(
        &[TimedRead {
            recv_ms: None,
            t_ms: 0.0,
            bytes: body,
        }],
        Some(200),
    );
    assert_eq!(r.replacement_chars, 2);
    assert_eq!(
        r.parse_errors,
        ["invalid UTF-8: 2 replacement characters in 1 lines (first: line 3)"]
    );
    assert_eq!(
        r.failure().as_deref(),
        Some("invalid_utf8: 2 replacement characters in 1 lines (first: line 3)")
    );
    assert!(
        one(&[ev(r#"{"content":"\u00e9"}"#, r#""stop""#), DONE.into()].concat())
            .parse_errors
            .is_empty()
    );
}

#[test]
fn a_whole_json_event_without_its_closing_blank_line_counts_for_nothing() {
    // The finish chunk is whole JSON but no blank line dispatches it: no SSE client delivers it.
    let body = [
        ev(r#"{"content":"Paris"}"#, "null"),
        ev(r#"{"content":"."}"#, r#""stop""#).trim_end().to_string(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.content, "Paris");
    assert_eq!(r.finish_reason, None);
    assert!(r.truncated && r.incomplete_tail);
    assert!(!r.has_note(NoteKind::UnterminatedLastEvent));
    assert_eq!(
        r.failure().as_deref(),
        Some("truncated_stream: no finish_reason, no [DONE], incomplete last event")
    );
    assert!(
        r.parse_errors[0].starts_with("incomplete last event at EOF (line 3, "),
        "{:?}",
        r.parse_errors
    );
    // One line end but no blank line: the same.
    let body = [
        ev(r#"{"content":"Paris"}"#, "null"),
        ev(r#"{"content":"."}"#, r#""stop""#).trim_end().to_string(),
        "\n".into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(
        (r.content.as_str(), r.finish_reason.as_deref()),
        ("Paris", None)
    );
    assert!(r.truncated);
    // Only data that is exactly [DONE] is taken from an unfinished event.
    for (tail, done) in [
        ("data: [DONE]", true),
        ("data: [DONE]\n", true),
        ("data: [DON", false),
        ("data: [DONE]x", false),
        ("data:  [DONE]", false),
    ] {
        let r = one(&[ev(r#"{"content":"a"}"#, r#""stop""#), tail.into()].concat());
        assert_eq!(r.done_seen, done, "{tail:?}");
        assert_eq!(r.truncated, !done, "{tail:?}");
    }
}

#[test]
fn malformed_events_fail_the_reply_naming_the_event() {
    let cases: [(&str, &str); 6] = [
        (
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" not\"}}]\n\n",
            "malformed JSON (EOF while parsing",
        ),
        (
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\ud800\"}}]}\n\n",
            "malformed JSON (unexpected end of hex escape at line 1 column 50, lone surrogate)",
        ),
        (
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\0b\"}}]}\n\n",
            "malformed JSON (control character",
        ),
        ("data:\n\n", "empty data (both OpenAI SDKs raise on it)"),
        ("data: 42\n\n", "data is JSON but not an object"),
        (
            "data: {\"choices\":{\"index\":0}}\n\n",
            "`choices` is not an array",
        ),
    ];
    for (bad, reason) in cases {
        let body = [
            ev(r#"{"content":"It is"}"#, "null"),
            bad.to_string(),
            ev(r#"{"content":" safe."}"#, r#""stop""#),
            DONE.into(),
        ]
        .concat();
        let r = one(&body);
        // The text without the event reads fine, and the opposite of what was sent: the reply fails.
        assert_eq!(r.content, "It is safe.", "{bad:?}");
        assert!(!r.truncated, "{bad:?}");
        let f = r.failure().unwrap_or_else(|| panic!("{bad:?} passed"));
        assert!(
            f.starts_with(&format!("malformed_event: event 2 (line 3): {reason}")),
            "{bad:?}: {f}"
        );
        assert_eq!(r.malformed_events.len(), 1);
        assert!(!f.chars().any(|c| c.is_control()), "{f:?}");
    }
    // The NUL is named and escaped.
    let r = one(&[
        "data: {\"a\":\"x\0y\"}\n\n".to_string(),
        ev("{}", r#""stop""#),
        DONE.into(),
    ]
    .concat());
    let f = r.failure().unwrap();
    assert!(f.contains("raw NUL") && f.contains(r#"\0"#), "{f}");
    // Several: the first is named, the rest counted.
    let r = one("data:\n\ndata: x\n\ndata: [DONE]\n\n");
    assert!(
        r.failure().unwrap().contains("(and 1 more)"),
        "{:?}",
        r.failure()
    );
}

#[test]
fn a_data_line_lost_to_a_space_a_capital_or_a_bom_fails_the_reply() {
    let chunk = r#"{"choices":[{"index":0,"delta":{"content":" not"}}]}"#;
    for (line, why) in [
        (format!(" data: {chunk}"), "a leading space"),
        (format!("DATA: {chunk}"), "letter case"),
        (format!("Data:{chunk}"), "letter case"),
        (
            format!("\u{FEFF}data: {chunk}"),
            "a byte-order mark (U+FEFF)",
        ),
    ] {
        let body = [
            ev(r#"{"content":"It is"}"#, "null"),
            format!("{line}\n\n"),
            ev(r#"{"content":" safe."}"#, r#""stop""#),
            DONE.into(),
        ]
        .concat();
        let r = one(&body);
        assert_eq!(r.content, "It is safe.");
        let f = r.failure().unwrap_or_else(|| panic!("{line:?} passed"));
        assert!(f.starts_with("misnamed_field: line 3: "), "{f}");
        assert!(f.contains(why) && f.contains("is not `data`"), "{f}");
        assert!(!f.contains('\u{FEFF}'), "a BOM is shown escaped: {f}");
    }
    // A BOM at the very start is the one the spec strips: flagged, not failed.
    let r = one(&[
        "\u{FEFF}".to_string(),
        ev(r#"{"content":"Hi"}"#, r#""stop""#),
        DONE.into(),
    ]
    .concat());
    assert_eq!(r.failure(), None);
    assert!(r.has_note(NoteKind::LeadingBomStripped));
    // A second BOM right after it is not.
    let r = one(&[
        "\u{FEFF}\u{FEFF}".to_string(),
        ev(r#"{"content":"Hi"}"#, r#""stop""#),
        DONE.into(),
    ]
    .concat());
    assert!(
        r.failure().unwrap().starts_with("misnamed_field: line 1"),
        "{:?}",
        r.failure()
    );
    // A raw `error:` field (case 32a) fails as the serve's error, with its message; a misnamed
    // ` error:` is a misnamed field; an unknown field is only a warning.
    let r = one(&[
        ev(r#"{"content":"a"}"#, "null"),
        "error: {\"message\":\"kv cache\"}\n\n".into(),
        DONE.into(),
    ]
    .concat());
    assert_eq!(
        r.failure().as_deref(),
        Some("error_mid_stream: kv cache (HTTP 200)")
    );
    assert!(r.has_note(NoteKind::NonstandardSseErrorField));
    assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    let r = one(&[
        ev(r#"{"content":"a"}"#, r#""stop""#),
        "ERROR: {\"message\":\"kv cache\"}\n\n".into(),
        DONE.into(),
    ]
    .concat());
    assert!(
        r.failure()
            .unwrap()
            .starts_with("misnamed_field: line 3: \"ERROR\" is not `error`"),
        "{:?}",
        r.failure()
    );
    let r = one(&[
        ev(r#"{"content":"a"}"#, r#""stop""#),
        "x-trace: 1\n\n".into(),
        DONE.into(),
    ]
    .concat());
    assert_eq!(r.failure(), None);
    assert!(r.has_note(NoteKind::UnknownSseFields));
}

#[test]
fn a_flood_of_malformed_events_is_counted_not_kept() {
    let body = [
        "data:\n\n".repeat(100_000),
        " data: x\n\n".repeat(50),
        ev(r#"{"content":"a"}"#, r#""stop""#),
        DONE.into(),
    ]
    .concat();
    let r = one(&body);
    assert_eq!(r.malformed_event_count, 100_000);
    assert_eq!(r.malformed_events.len(), DETAILS_KEPT);
    assert_eq!(r.misnamed_field_count, 50);
    assert_eq!(
        r.misnamed_fields.len(),
        crate::analysis::sse::NEAR_MISSES_KEPT
    );
    assert!(
        r.parse_errors.len() <= 2 * DETAILS_KEPT + 2,
        "{}",
        r.parse_errors.len()
    );
    let f = r.failure().unwrap();
    assert!(
        f.contains("empty data (both OpenAI SDKs raise on it): \"\" (and 99999 more)"),
        "{f}"
    );
    assert!(f.contains("(and 49 more)"), "{f}");
}

#[test]
fn a_reply_the_serve_aborted_cancelled_or_filtered_fails_naming_its_finish_reason() {
    for reason in ["abort", "error", "cancelled", "content_filter"] {
        let r = one(&[
            ev(r#"{"content":"Paris"}"#, "null"),
            ev(r#"{"content":" is"}"#, &format!("{reason:?}")),
            DONE.into(),
        ]
        .concat());
        let f = r.failure().expect(reason);
        assert_eq!(f.code(), FailureCode::AbnormalFinish, "{f}");
        assert!(f.to_string().contains(&format!("{reason:?}")), "{f}");
    }
    // Normal ends, TGI's included, are not failures.
    for reason in ["stop", "length", "tool_calls", "eos_token", "stop_sequence"] {
        let r = one(&[
            ev(r#"{"content":"Paris"}"#, &format!("{reason:?}")),
            DONE.into(),
        ]
        .concat());
        assert_eq!(r.failure(), None, "{reason}");
    }
}

#[test]
fn nothing_after_done_is_read_or_judged() {
    // Broken JSON, a misnamed line, a cut event and invalid UTF-8 after [DONE]: reported, not failed.
    let body = [
        ev(r#"{"content":"Yes."}"#, r#""stop""#).into_bytes(),
        DONE.as_bytes().to_vec(),
        b"data: {oops\n\n DATA: x\n\ndata: \xff".to_vec(),
    ]
    .concat();
    let r = parse_stream(
        &[TimedRead {
            recv_ms: None,
            t_ms: 0.0,
            bytes: body,
        }],
        Some(200),
    );
    assert_eq!(r.failure(), None, "{:?}", r.parse_errors);
    assert!(r.parse_errors.is_empty());
    assert_eq!(r.content, "Yes.");
    assert!(r.has_note(NoteKind::DataAfterDone));
    assert!(!r.incomplete_tail);
    // Blank lines after [DONE] are nothing.
    let r = one(&[
        ev(r#"{"content":"a"}"#, r#""stop""#),
        DONE.into(),
        "\r\n\n".into(),
    ]
    .concat());
    assert!(!r.has_note(NoteKind::DataAfterDone));
    assert_eq!(r.bytes_after_done, 0);
}

#[test]
fn serve_text_in_a_failure_is_escaped() {
    let r = one("data: {\"error\":{\"message\":\"bad\\u001b[2J\\u0007\\nnext\"}}\n\n");
    let f = r.failure().unwrap();
    assert_eq!(
        &*f,
        "error_in_stream: bad\\u{1b}[2J\\u{7}\\nnext (HTTP 200)"
    );
    let r = parse_body(b"\x1b]0;pwned\x07", Some(200), 1.0);
    let f = r.failure().unwrap();
    assert!(!f.chars().any(|c| c.is_control()), "{f:?}");
    assert_eq!(printable("a\u{202E}b\tc"), "a\\u{202e}b\\tc");
    assert_eq!(quoted("ab\"c", 2), "\"ab\"…");
}

#[test]
fn any_bytes_never_panic() {
    let mut seed: u32 = 7;
    let mut bytes = Vec::new();
    for _ in 0..5000 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let pick = (seed >> 16) as usize;
        let alphabet: &[u8] =
            b"data: {}[]\",:\r\n\xff\xc3event error choices delta content usage 0123456789";
        bytes.push(alphabet[pick % alphabet.len()]);
    }
    let rs: Vec<TimedRead> = bytes
        .chunks(13)
        .enumerate()
        .map(|(i, c)| TimedRead {
            recv_ms: None,
            t_ms: i as f64,
            bytes: c.to_vec(),
        })
        .collect();
    let _ = parse_stream(&rs, None);
    let _ = parse_body(&bytes, Some(200), 0.0);
}
