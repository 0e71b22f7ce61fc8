//! The reply: what one chat-completion response said, parsed from its evidence (timed reads of an SSE stream,
//! or a plain JSON body). Owns the interpretation of OpenAI-compatible chunks (choices, delta, usage, timings,
//! finish_reason, errors inside 200 streams). Pure: takes bytes and times, returns values; never does I/O.
//!
//! Conventions (tests/data/cases/CASES.md): a *token chunk* is a parsed chunk whose first choice has non-empty
//! `delta.content`, or non-empty `delta.reasoning_content` / `delta.reasoning`, or any `delta.tool_calls`.
//! An event's time is the arrival of the read that completes it. The last non-null `usage` wins (never summed).

mod body;
mod error;
mod fields;
mod finish;
pub mod foreign;
mod stream;
#[cfg(test)]
mod tests;

pub use crate::analysis::quote::{printable, quoted, DETAILS_KEPT};
pub use crate::analysis::reply_types::*;
pub use body::parse_body;
pub use stream::parse_stream;

use crate::io::reads::TimedRead;
pub use crate::vocab::{Failure, FailureCode, Failures, Note, NoteKind};

/// Parses one request's reads into a [`Reply`], as judging sees it: a transport error becomes the reply's
/// error (kind `transport`); an HTTP error status or a non-streamed body is parsed as a JSON body; a 200
/// stream is parsed as SSE.
pub fn reply_of(rec: &crate::evidence::RequestRecord, reads: &[TimedRead]) -> Reply {
    let is_sse = rec.stream
        && rec
            .http_status
            .map(|s| (200..300).contains(&s))
            .unwrap_or(true);
    let mut reply = if is_sse {
        parse_stream(reads, rec.http_status)
    } else {
        let bytes: Vec<u8> = reads
            .iter()
            .map(|r| r.bytes.as_slice())
            .collect::<Vec<&[u8]>>()
            .concat();
        let t = reads.last().map(|r| r.t_ms).unwrap_or(0.0);
        parse_body(&bytes, rec.http_status, t)
    };
    if let Some(err) = &rec.transport_error {
        if reply.error.is_none() {
            reply.error = Some(ServeError {
                kind: FailureCode::Transport,
                message: err.clone(),
                http_status: rec.http_status,
                error_type: None,
            });
        }
    }
    if rec.body_truncated {
        reply.warnings.push(Note::new(
            NoteKind::BodyCapped,
            format!("only the first {} bytes were kept", rec.body_bytes),
        ));
        // A capped body is never a pass: whatever was parsed is a prefix of a reply that went on.
        if reply.error.is_none() {
            let message = format!("the response body passed the {} MiB cap; only its first {} bytes were kept and read", crate::io::exchange::BODY_CAP_BYTES >> 20, rec.body_bytes);
            reply.error = Some(ServeError {
                kind: FailureCode::BodyCapped,
                message,
                http_status: rec.http_status,
                error_type: None,
            });
        }
    }
    reply
}

/// [`reply_of`] with the response's head (`NN.response.json`), when there is one: a `not_an_event_stream`
/// failure names the `Content-Type` the serve sent, and a `text/html` one calls the body an HTML page
/// whatever its first bytes ([`foreign::not_an_event_stream`]).
pub fn reply_of_response(
    rec: &crate::evidence::RequestRecord,
    response: Option<&crate::io::exchange::ResponseMeta>,
    reads: &[TimedRead],
) -> Reply {
    let mut reply = reply_of(rec, reads);
    let content_type = response.and_then(|m| m.headers.get("content-type"));
    if let (Some(ct), Some(e)) = (content_type, reply.error.as_mut()) {
        if e.kind == FailureCode::NotAnEventStream {
            let body: Vec<u8> = reads.iter().flat_map(|r| r.bytes.iter().copied()).collect();
            e.message = foreign::not_an_event_stream(&body, Some(ct));
        }
    }
    reply
}

/// Whether the model the requests ask for (`asked`) is one `/v1/models` lists: an id equal to it, or with
/// the same last path component (`/m/Qwen3-0.6B` and `Qwen3-0.6B`), case-insensitively. `None` when the
/// serve lists nothing (it does not say).
pub fn model_served(asked: &str, listed: &[String]) -> Option<bool> {
    if listed.is_empty() {
        return None;
    }
    let last = |s: &str| {
        s.trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_lowercase()
    };
    Some(listed.iter().any(|id| {
        id.eq_ignore_ascii_case(asked) || (!last(id).is_empty() && last(id) == last(asked))
    }))
}

/// The identity of a reply judged against what the serve says it serves (the model a serve says it serves, checked at readiness; case 36): a reply's
/// `model` field only echoes the request, so identity comes from `/v1/models`. `Some((code, detail, echoes))`
/// when `asked` is not listed ([`model_served`] is false): code [`FailureCode::ModelNotServed`], and `echoes`
/// true when the reply's `model` is the asked name (then the reply flags
/// [`crate::vocab::NoteKind::ResponseModelEchoesRequest`]). `None` when the model is listed or the serve
/// listed nothing.
pub fn identity_problem(
    asked: &str,
    listed: &[String],
    reply_model: Option<&str>,
) -> Option<(FailureCode, String, bool)> {
    if model_served(asked, listed) != Some(false) {
        return None;
    }
    let echoes = reply_model.is_some_and(|m| m == asked);
    let mut detail = format!("the request asks for {asked:?}; /v1/models lists {listed:?}");
    if echoes {
        detail.push_str(" (the reply's `model` only echoes the request)");
    }
    Some((FailureCode::ModelNotServed, detail, echoes))
}
