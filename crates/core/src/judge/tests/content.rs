//! Tests of `content` and `known_answer`.

use super::*;
// The plan-fitting judge of these tests, not the glob-imported one.
use super::judge;
use crate::io::reads::TimedRead;
use crate::judge::verdict::*;

/// A reply whose answer is text of content chunks 50 ms apart from 100 ms, finish `finish`, [DONE].
pub(super) fn reply_of_deltas(deltas: &[&str], finish: &str) -> Vec<TimedRead> {
    let mut r: Vec<TimedRead> = deltas
        .iter()
        .enumerate()
        .map(|(i, d)| {
            ev_line(
                100.0 + 50.0 * i as f64,
                &format!(r#"{{"choices":[{{"index":0,"delta":{d}}}]}}"#),
            )
        })
        .collect();
    let t = 100.0 + 50.0 * deltas.len() as f64;
    r.push(ev_line(
        t,
        &format!(
            r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{finish}"}}],"usage":{{"completion_tokens":{}}}}}"#,
            deltas.len()
        ),
    ));
    r.push(TimedRead {
        recv_ms: None,
        t_ms: t + 1.0,
        bytes: b"data: [DONE]\n\n".to_vec(),
    });
    r
}

pub(super) fn tool_call_reply() -> Vec<TimedRead> {
    reply_of_deltas(
        &[
            r#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_capital","arguments":""}}]}"#,
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"country\":"}}]}"#,
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"France\"}"}}]}"#,
        ],
        "tool_calls",
    )
}

/// A tool-call reply has no content and is valid: `content` passes (never `content_empty`) and shows the
/// call; `known_answer` matches the call's name and joined arguments.
#[test]
pub(super) fn a_tool_call_reply_passes_content_and_known_answer_matches_the_call() {
    let g = gate_text(&GATE.replace("matches = \"Paris\"", "matches = 'get_capital\\(.*France'"));
    let ev = evidence(Some(1), vec![request(0, &tool_call_reply(), None)]);
    let v = judge(&g, &ev);
    let c = find(&v, "content");
    assert_eq!(c.outcome, Outcome::Pass, "{}", c.message);
    assert!(
        c.message
            .ends_with(r#"; tool calls: request 00: "get_capital({\"country\":\"France\"})""#),
        "{}",
        c.message
    );
    let k = find(&v, "known_answer");
    assert_eq!(k.outcome, Outcome::Pass, "{}", k.message);
    // The default gate asks for "Paris": the call does not say it, and the failure shows the call.
    let k = find(&judge(&gate(), &ev), "known_answer").clone();
    assert_eq!(k.outcome, Outcome::Fail);
    assert!(k.message.contains("get_capital("), "{}", k.message);
}

/// Reasoning markup in content is judged out of it: `<think>…</think>Paris.` passes `known_answer` on
/// "Paris." and a reply that is all markup is empty content, all tokens in reasoning.
#[test]
pub(super) fn think_markup_is_not_the_answer() {
    let ev = evidence(
        Some(1),
        vec![request(
            0,
            &reply_of_deltas(
                &[
                    r#"{"content":"<think>France? Its capital is Paris"}"#,
                    r#"{"content":"</think>"}"#,
                    r#"{"content":"Lyon."}"#,
                ],
                "stop",
            ),
            None,
        )],
    );
    let k = find(&judge(&gate(), &ev), "known_answer").clone();
    assert_eq!(
        k.outcome,
        Outcome::Fail,
        "Paris is only in the thinking: {}",
        k.message
    );
    assert!(
        k.message.contains("\"Lyon.\" does not match"),
        "{}",
        k.message
    );
    let ev = evidence(
        Some(1),
        vec![request(
            0,
            &reply_of_deltas(
                &[r#"{"content":"<think>Let me"}"#, r#"{"content":" see"}"#],
                "length",
            ),
            None,
        )],
    );
    let c = find(&judge(&gate(), &ev), "content").clone();
    assert_eq!(c.outcome, Outcome::Fail);
    assert!(
        c.message.contains("content_empty_all_tokens_in_reasoning"),
        "{}",
        c.message
    );
}

/// With `chat_template_kwargs.enable_thinking = false`, a reply that still thinks fails `content`, saying
/// so, whether the thinking came in the reasoning field or as markup; without the switch it passes.
#[test]
pub(super) fn thinking_turned_off_but_still_thinking_fails_content() {
    let off = gate_text(&format!(
        "{GATE}[request.extra.chat_template_kwargs]\nenable_thinking = false\n"
    ));
    assert!(off.request.thinking_off() && !gate().request.thinking_off());
    let field = reply_of_deltas(
        &[r#"{"reasoning_content":"hmm"}"#, r#"{"content":"Paris."}"#],
        "stop",
    );
    let markup = reply_of_deltas(
        &[
            r#"{"content":"<think>hmm</think>"}"#,
            r#"{"content":"Paris."}"#,
        ],
        "stop",
    );
    for (reads, how) in [
        (&field, "in its reasoning field"),
        (&markup, "as reasoning markup in its content"),
    ] {
        let ev = evidence(Some(1), vec![request(0, reads, None)]);
        let c = find(&judge(&off, &ev), "content").clone();
        assert_eq!(c.outcome, Outcome::Fail, "{}", c.message);
        assert!(
            c.message.contains(&format!("request 00: thinking_not_off: the gate turns thinking off (chat_template_kwargs.enable_thinking = false) but the reply still thinks (3 chars {how})")),
            "{}",
            c.message
        );
        assert_eq!(find(&judge(&gate(), &ev), "content").outcome, Outcome::Pass);
    }
    let ev = evidence(Some(1), vec![request(0, &good(), None)]);
    assert_eq!(find(&judge(&off, &ev), "content").outcome, Outcome::Pass);
}

/// A reply carrying ANSI colour codes (or any other control character but TAB, LF and CR) is not sane text:
/// `content` fails it as `control_characters`, counting the escape sequences and quoting them escaped, and
/// a load run counts it as a failed request; the same words without the codes pass.
#[test]
pub(super) fn a_reply_with_terminal_escape_sequences_fails_content() {
    let coloured = reply_of_deltas(
        &[
            r#"{"content":"\u001b[1;31mParis"}"#,
            r#"{"content":"\u001b[0m is the capital."}"#,
        ],
        "stop",
    );
    let ev = evidence(Some(1), vec![request(0, &coloured, None)]);
    let c = find(&judge(&gate(), &ev), "content").clone();
    assert_eq!(c.outcome, Outcome::Fail, "{}", c.message);
    assert!(
        c.message.contains(r#"request 00: control_characters: 2 control characters, opening 2 terminal escape sequences (from char 0: "\u{1b}[1;31mParis\u{1b}[0m is the "…)"#),
        "{}",
        c.message
    );
    assert!(!c.message.contains('\u{1b}'), "{}", c.message);
    let plain = reply_of_deltas(
        &[
            r#"{"content":"Paris"}"#,
            r#"{"content":" is the capital.\n\tOK\r\n"}"#,
        ],
        "stop",
    );
    let ev = evidence(Some(1), vec![request(0, &plain, None)]);
    assert_eq!(find(&judge(&gate(), &ev), "content").outcome, Outcome::Pass);
}

/// A 200 HTML page where a stream should be (a proxy's error page) is named for what it is on every line
/// that counts it (content, rate, first_token, known_answer), with its Content-Type when the response head
/// is in the evidence: an HTML page, not an SSE stream, never a "cut" or "truncated" stream.
#[test]
pub(super) fn an_html_page_is_named_on_every_line_never_a_cut_stream() {
    let page = TimedRead {
        recv_ms: None,
        t_ms: 3.0,
        bytes: b"<!DOCTYPE html><html><head><title>Bad Gateway</title></head><body>nginx</body></html>\n"
            .to_vec(),
    };
    let mut html = request(0, std::slice::from_ref(&page), None);
    let mut meta = crate::io::exchange::ResponseMeta {
        status: Some(200),
        ..Default::default()
    };
    meta.headers
        .insert("content-type".into(), "text/html; charset=utf-8".into());
    html.reply =
        crate::analysis::reply_of_response(&html.record, Some(&meta), std::slice::from_ref(&page));
    html.response = Some(meta);
    let ev = evidence(Some(1), vec![html]);
    let v = judge(&gate(), &ev);
    for name in ["content", "rate", "first_token", "known_answer"] {
        let m = &find(&v, name).message;
        assert_eq!(find(&v, name).outcome, Outcome::Fail, "{m}");
        assert!(
            m.contains(r#"not_an_event_stream: Content-Type "text/html; charset=utf-8": an HTML page (title "Bad Gateway"), not an SSE stream"#),
            "{name}: {m}"
        );
        assert!(
            !m.contains("truncated") && !m.contains("cut stream"),
            "{name}: {m}"
        );
    }
    assert!(
        find(&v, "content")
            .message
            .contains("request 00: failed reply: not_an_event_stream"),
        "{}",
        find(&v, "content").message
    );
}
