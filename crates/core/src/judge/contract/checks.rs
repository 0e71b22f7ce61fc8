//! Each contract check's rule (docs/contract.md has them in words). Each returns `Ok(state)` when it got to
//! a judgement and `Err(state)` when a request stopped it early (not read whole, not answered, unsupported);
//! [`super::judge_check`] takes either.

use crate::analysis::contract::ContractExchange;
use crate::analysis::quote::quoted;
use crate::analysis::reply::Usage;
use crate::spec::contract::CheckSpec;

use super::{answered, body_json, find, schema, stream_events, whole, CheckState};

type Judged = Result<CheckState, CheckState>;

fn fail(s: impl Into<String>) -> Judged {
    Ok(CheckState::Fail(s.into()))
}

/// `shape`: the non-streamed body matches the chat completion object, every chunk of the stream the chunk
/// object, and the error answer to a request without `messages` the error object.
pub(super) fn shape(xs: &[ContractExchange]) -> Judged {
    let body = find(xs, "body")?;
    answered(body)?;
    if let Some(v) = schema::violation(&schema::completion(), &body_json(body)) {
        return fail(format!("`body` is no chat completion object: {v}"));
    }
    let stream = find(xs, "stream")?;
    answered(stream)?;
    if !stream.reply.streamed {
        return fail("`stream` (stream = true) was not answered as an SSE stream");
    }
    let events = stream_events(stream);
    let chunk = schema::chunk();
    for (i, e) in events.iter().enumerate() {
        if let Some(v) = schema::violation(&chunk, e) {
            return fail(format!(
                "`stream` chunk {} of {} is no chat completion chunk object: {v}",
                i + 1,
                events.len()
            ));
        }
    }
    let error = find(xs, "error")?;
    whole(error).map_err(CheckState::Fail)?;
    let status = error.record.http_status.unwrap_or(0);
    if status < 400 {
        return fail(format!(
            "`error` (a request without messages) got HTTP {status}: no error body to check"
        ));
    }
    if let Some(v) = schema::violation(&schema::error(), &body_json(error)) {
        return fail(format!(
            "`error` (HTTP {status}) is no error object: {v}: {}",
            quoted(&String::from_utf8_lossy(&error.body), 120)
        ));
    }
    Ok(CheckState::Pass(format!(
        "the body, {} stream chunks and the HTTP {status} error body match the OpenAI objects",
        events.len()
    )))
}

/// `usage.completion_tokens` of a reply, or a failure naming what is missing.
fn completion_tokens(x: &ContractExchange) -> Result<u64, CheckState> {
    x.reply
        .usage
        .as_ref()
        .and_then(|u| u.completion_tokens)
        .ok_or_else(|| {
            CheckState::Fail(format!(
                "`{}` has no usage.completion_tokens: the count cannot be shown",
                x.record.label
            ))
        })
}

/// `max_tokens`: the long request stops at exactly `max_tokens` with `finish_reason "length"`; the short
/// one ends `"stop"` under its limit. A long reply that ended on its own first is indeterminate.
pub(super) fn max_tokens(c: &CheckSpec, xs: &[ContractExchange]) -> Judged {
    let long = find(xs, "long")?;
    answered(long)?;
    let n = c.max_tokens as u64;
    let got = completion_tokens(long)?;
    let finish = long.reply.finish_reason.clone().unwrap_or_default();
    if finish != "length" {
        if got < n && finish == "stop" {
            return Ok(CheckState::Indeterminate(format!(
                "`long` ended on its own (finish_reason \"stop\") after {got} of max_tokens {n}: it never ran into the limit (set [contract.max_tokens] prompt to one that runs long)"
            )));
        }
        return fail(format!(
            "`long` (max_tokens {n}) ended with finish_reason {finish:?} after {got} tokens, not \"length\""
        ));
    }
    if got != n {
        return fail(format!(
            "`long` ended \"length\" after {got} tokens; max_tokens was {n}"
        ));
    }
    let short = find(xs, "short")?;
    answered(short)?;
    let finish = short.reply.finish_reason.clone().unwrap_or_default();
    let got_short = completion_tokens(short)?;
    match finish.as_str() {
        "stop" => Ok(CheckState::Pass(format!(
            "`long` stopped at exactly max_tokens {n} with \"length\"; `short` ended \"stop\" after {got_short} tokens"
        ))),
        "length" => Ok(CheckState::Indeterminate(format!(
            "`short` ran to its max_tokens ({got_short} tokens, \"length\"): the model did not end on its own"
        ))),
        other => fail(format!("`short` ended with finish_reason {other:?}, not \"stop\"")),
    }
}

/// `stop`: with a stop string, the text never holds it and the reply ends `"stop"`, streamed and not.
pub(super) fn stop(c: &CheckSpec, xs: &[ContractExchange]) -> Judged {
    let stop = c.stop.clone().unwrap_or_default();
    let mut seen = Vec::new();
    for label in ["body", "stream"] {
        let x = find(xs, label)?;
        answered(x)?;
        let text = &x.reply.content;
        if text.contains(&stop) {
            return fail(format!(
                "`{label}`: the stop string {} is in the text: {}",
                quoted(&stop, 40),
                quoted(text, 120)
            ));
        }
        match x.reply.finish_reason.as_deref() {
            Some("stop") => seen.push(format!("`{label}` {}", quoted(text, 40))),
            Some("length") => {
                return Ok(CheckState::Indeterminate(format!(
                    "`{label}` ran to max_tokens without reaching the stop string {}: {}",
                    quoted(&stop, 40),
                    quoted(text, 80)
                )))
            }
            other => {
                return fail(format!(
                    "`{label}` ended with finish_reason {:?}, not \"stop\"",
                    other.unwrap_or("none")
                ))
            }
        }
    }
    Ok(CheckState::Pass(format!(
        "stop string {} honoured, finish_reason \"stop\": {}",
        quoted(&stop, 40),
        seen.join(", ")
    )))
}

/// Every usage field present and `prompt + completion = total`, or the failure.
fn usage_adds_up(label: &str, u: Option<&Usage>) -> Result<(u64, u64, u64), CheckState> {
    let Some(u) = u else {
        return Err(CheckState::Fail(format!("`{label}` has no usage")));
    };
    let (Some(p), Some(c), Some(t)) = (u.prompt_tokens, u.completion_tokens, u.total_tokens) else {
        return Err(CheckState::Fail(format!(
            "`{label}`: usage lacks a field (prompt {:?}, completion {:?}, total {:?})",
            u.prompt_tokens, u.completion_tokens, u.total_tokens
        )));
    };
    if p + c != t {
        return Err(CheckState::Fail(format!(
            "`{label}`: prompt_tokens {p} + completion_tokens {c} = {} is not total_tokens {t}",
            p + c
        )));
    }
    Ok((p, c, t))
}

/// `usage`: the body's usage adds up; the stream (with `stream_options.include_usage`) ends with a usage
/// chunk whose `choices` is empty, whose usage adds up, and whose `completion_tokens` is at least the
/// streamed token chunks (each carries a token at least), exactly their sum when every chunk says its count.
pub(super) fn usage(xs: &[ContractExchange]) -> Judged {
    let body = find(xs, "body")?;
    answered(body)?;
    let (p, c, t) = usage_adds_up("body", body.reply.usage.as_ref())?;
    let stream = find(xs, "stream")?;
    answered(stream)?;
    let events = stream_events(stream);
    let Some(last) = events.iter().rev().find(|e| e["usage"].is_object()) else {
        return fail("`stream` asked stream_options.include_usage and no chunk carries usage");
    };
    if last["choices"].as_array().is_none_or(|a| !a.is_empty()) {
        return fail(format!(
            "`stream`: the usage chunk has choices {}; with include_usage it is a chunk of its own with `choices: []`",
            quoted(&last["choices"].to_string(), 80)
        ));
    }
    let (_, sc, _) = usage_adds_up("stream", stream.reply.usage.as_ref())?;
    let chunks = &stream.reply.token_chunks;
    let counted: Option<u64> = if chunks.is_empty() {
        None
    } else {
        chunks.iter().map(|k| k.tokens).sum()
    };
    match counted {
        Some(n) if n != sc => {
            return fail(format!(
                "`stream`: completion_tokens {sc}, but its chunks count {n} tokens"
            ))
        }
        None if (chunks.len() as u64) > sc => {
            return fail(format!(
                "`stream`: completion_tokens {sc}, fewer than its {} token chunks",
                chunks.len()
            ))
        }
        _ => {}
    }
    Ok(CheckState::Pass(format!(
        "`body` {p} + {c} = {t}; `stream` usage chunk (choices []) completion_tokens {sc} for {} token chunks",
        chunks.len()
    )))
}

/// `stream_parity`: greedy `stream = false` and `stream = true` give the same text, finish_reason and usage.
pub(super) fn stream_parity(xs: &[ContractExchange]) -> Judged {
    let body = find(xs, "body")?;
    answered(body)?;
    let stream = find(xs, "stream")?;
    answered(stream)?;
    let (a, b) = (&body.reply, &stream.reply);
    if a.content != b.content {
        let at = a
            .content
            .chars()
            .zip(b.content.chars())
            .take_while(|(x, y)| x == y)
            .count();
        return fail(format!(
            "the texts differ from character {at}: `body` {} / `stream` {}",
            quoted(&a.content, 80),
            quoted(&b.content, 80)
        ));
    }
    if a.finish_reason != b.finish_reason {
        return fail(format!(
            "finish_reason differs: `body` {:?} / `stream` {:?}",
            a.finish_reason, b.finish_reason
        ));
    }
    let tokens = |u: &Option<Usage>| u.as_ref().map(|u| (u.prompt_tokens, u.completion_tokens));
    let (ua, ub) = (tokens(&a.usage), tokens(&b.usage));
    let shown = |u: Option<(Option<u64>, Option<u64>)>| match u {
        None => "no usage".to_string(),
        Some((p, c)) => format!(
            "({}, {})",
            p.map_or("none".into(), |v| v.to_string()),
            c.map_or("none".into(), |v| v.to_string())
        ),
    };
    if ua.is_none() || ub.is_none() || ua != ub {
        return fail(format!(
            "usage (prompt, completion) differs: `body` {} / `stream` {}{}",
            shown(ua),
            shown(ub),
            if ub.is_none() {
                " (the stream asked stream_options.include_usage)"
            } else {
                ""
            }
        ));
    }
    let (p, c) = ua.unwrap_or_default();
    let n = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
    Ok(CheckState::Pass(format!(
        "the same text ({} chars), finish_reason {:?} and usage (prompt {}, completion {}) streamed and not",
        a.content.chars().count(),
        a.finish_reason.as_deref().unwrap_or("none"),
        n(p),
        n(c)
    )))
}

/// The malformed requests of `errors`, each with what it lacks.
const MALFORMED: [(&str, &str); 4] = [
    ("no_messages", "no messages"),
    ("bad_role", "a bad role"),
    ("negative_max_tokens", "a negative max_tokens"),
    ("unknown_model", "an unknown model"),
];

/// `errors`: each malformed request gets a 4xx with the error object (never a 200, a 5xx or no answer),
/// and the serve answers the request after them normally. When the only breaches are malformed requests
/// answered as ordinary ones (a whole 200 chat completion object: the serve does not validate what they
/// break) and the serve still answers the next request, the serve lacks that validation: unsupported (a FAIL
/// under `expect`, its own state under `may_lack`). A 5xx, an error body of the wrong shape, garbage or a
/// dead serve is broken, never lacking.
pub(super) fn errors(xs: &[ContractExchange]) -> Judged {
    let mut bad = Vec::new();
    let mut taken = Vec::new();
    let mut good = Vec::new();
    for (label, what) in MALFORMED {
        let x = find(xs, label)?;
        if let Err(e) = whole(x) {
            bad.push(e);
            continue;
        }
        let status = x.record.http_status.unwrap_or(0);
        if status == 200
            && x.reply.error.is_none()
            && schema::violation(&schema::completion(), &body_json(x)).is_none()
        {
            taken.push(format!(
                "`{label}` ({what}) got HTTP 200, not a 4xx: answered as an ordinary request"
            ));
        } else if !(400..500).contains(&status) {
            bad.push(format!("`{label}` ({what}) got HTTP {status}, not a 4xx"));
        } else if let Some(v) = schema::violation(&schema::error(), &body_json(x)) {
            bad.push(format!("`{label}` (HTTP {status}) is no error object: {v}"));
        } else {
            good.push(format!("{label} {status}"));
        }
    }
    let after = find(xs, "after")?;
    if let Err(e) = answered(after) {
        let why = match e {
            CheckState::Fail(s) | CheckState::Unsupported(s) => s,
            CheckState::Pass(s) | CheckState::Indeterminate(s) => s,
        };
        bad.push(format!(
            "the serve did not answer the next request normally: {why}"
        ));
    }
    let rejected = if good.is_empty() {
        "none rejected".to_string()
    } else {
        format!("rejected with the error object: {}", good.join(", "))
    };
    if !bad.is_empty() {
        bad.extend(taken);
        return fail(bad.join("; "));
    }
    if !taken.is_empty() {
        return Ok(CheckState::Unsupported(format!(
            "the serve does not reject every malformed request: {}; {rejected}; the next request answered",
            taken.join("; ")
        )));
    }
    Ok(CheckState::Pass(format!(
        "4xx with the error object for each ({}); the next request answered",
        good.join(", ")
    )))
}
