//! A non-streamed reply: a plain JSON body ([`parse_body`]).

use serde_json::Value;

use super::error::*;
use super::fields::*;
use super::finish::*;
use crate::analysis::quote::*;
use crate::analysis::reply_types::*;
use crate::vocab::{Note, NoteKind};

/// Parses a non-streamed response body (a `chat.completion` or an error JSON) that arrived at `t_ms`.
///
/// Reads choice 0's `message` (`content`, `reasoning_content`/`reasoning`, `tool_calls`; `text` for a
/// completions body), `finish_reason`, `usage`, `timings`, `model`, `system_fingerprint`. An `error` member
/// (object or string + `error_type`) or `"object": "error"` is classified as in [`ServeError::kind`]; an HTTP
/// status ≥ 400 without a readable error is `http_status` with the start of the body as message. A body cut
/// inside its JSON sets `truncated` and `incomplete_tail`. No token chunks and no TTFT: a body has no
/// per-token timing. Warnings `usage_missing`, `finish_reason_missing`; flag `truncated_by_max_tokens`.
pub fn parse_body(bytes: &[u8], http_status: Option<u16>, t_ms: f64) -> Reply {
    let mut r = Reply {
        streamed: false,
        http_status,
        end_ms: Some(t_ms),
        ..Default::default()
    };
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => {
            let s = String::from_utf8_lossy(bytes).into_owned();
            let valid = bytes
                .windows(3)
                .filter(|w| *w == [0xEF, 0xBF, 0xBD])
                .count();
            r.replacement_chars = s
                .chars()
                .filter(|&c| c == '\u{FFFD}')
                .count()
                .saturating_sub(valid);
            r.parse_errors.push(format!(
                "invalid UTF-8 in body: {} replacement characters",
                r.replacement_chars
            ));
            s
        }
    };
    let is_error_status = http_status.is_some_and(|s| s >= 400);
    let v: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => {
            if e.is_eof() && !text.trim().is_empty() {
                r.truncated = true;
                r.incomplete_tail = true;
                r.parse_errors.push(format!(
                    "body ends inside JSON ({} bytes): {}",
                    bytes.len(),
                    quoted(&text, SNIPPET_CHARS)
                ));
            } else if super::foreign::is_html(&text, None) {
                // A proxy's error page where a reply should be: named for what it is.
                r.parse_errors.push(format!(
                    "body is {}, not JSON ({e}): {}",
                    super::foreign::what_body_is(&text, None),
                    quoted(text.trim_start(), SNIPPET_CHARS)
                ));
            } else {
                r.parse_errors.push(format!(
                    "body is not JSON ({e}): {}",
                    quoted(&text, SNIPPET_CHARS)
                ));
            }
            if is_error_status {
                let message = if super::foreign::is_html(&text, None) {
                    format!(
                        "{}: {}",
                        super::foreign::what_body_is(&text, None),
                        snippet(text.trim_start())
                    )
                } else {
                    snippet(&text)
                };
                r.error = Some(ServeError::http_error(message, http_status));
                r.truncated = false;
            }
            return r;
        }
    };
    let Some(obj) = v.as_object() else {
        r.parse_errors.push(format!(
            "body is JSON but not an object: {}",
            quoted(&text, SNIPPET_CHARS)
        ));
        if is_error_status {
            r.error = Some(ServeError::http_error(snippet(&text), http_status));
        }
        return r;
    };
    r.model = str_of(obj.get("model")).map(str::to_string);
    r.system_fingerprint = str_of(obj.get("system_fingerprint")).map(str::to_string);
    r.usage = obj.get("usage").and_then(usage_of);
    r.timings = obj.get("timings").and_then(timings_of);

    if let Some(e) = error_of(obj, None) {
        let kind = classify(&e, false, http_status, false);
        if !is_error_status {
            r.flags.push(Note::flag(NoteKind::ErrorInside200Body));
        }
        r.error = Some(ServeError {
            kind,
            message: e.message,
            http_status,
            error_type: e.error_type,
        });
        return r;
    }

    match obj.get("choices").and_then(Value::as_array) {
        Some(arr) => {
            if let Some(choice) = first_choice(arr) {
                let msg = choice.get("message").and_then(Value::as_object);
                let content = msg
                    .and_then(|m| str_of(m.get("content")))
                    .or_else(|| str_of(choice.get("text")));
                r.content = content.unwrap_or("").to_string();
                if let Some(m) = msg {
                    r.reasoning = reasoning_of(m).to_string();
                    if let Some(tcs) = m.get("tool_calls").and_then(Value::as_array) {
                        merge_tool_calls(&mut r.tool_calls, tcs);
                    }
                }
                r.finish_reason = finish_of(choice);
                r.logprobs = crate::analysis::logprobs::of_choice(choice).unwrap_or_default();
            } else if !arr.is_empty() {
                r.parse_errors
                    .push("no choice with index 0 in the body".into());
            }
        }
        None => {
            if !is_error_status {
                r.parse_errors.push(format!(
                    "body has neither `choices` nor `error`: {}",
                    quoted(&text, SNIPPET_CHARS)
                ));
            }
        }
    }
    if is_error_status {
        r.error = Some(ServeError::http_error(snippet(&text), http_status));
        return r;
    }
    if r.usage.is_none() {
        r.warnings.push(Note::new(
            NoteKind::UsageMissing,
            "the body carried no usage object",
        ));
    }
    if r.finish_reason.is_none() && r.parse_errors.is_empty() {
        r.warnings.push(Note::new(
            NoteKind::FinishReasonMissing,
            "the body has no finish_reason",
        ));
    }
    if r.finish_reason.as_deref() == Some("length") {
        r.flags.push(Note::flag(NoteKind::TruncatedByMaxTokens));
    }
    move_reasoning_markup(&mut r);
    r
}
