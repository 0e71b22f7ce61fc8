//! The error classification: an error as the serve put it (in a chunk, an SSE field or an event) to a failure code.

use serde_json::{Map, Value};

use super::fields::*;
use crate::vocab::FailureCode;

/// An error as the serve put it: message and its own type.
pub(super) struct ErrInfo {
    pub(super) message: String,
    pub(super) error_type: Option<String>,
}

/// Finds the serve's error in a JSON object: an `error` member (object or string, with a sibling
/// `error_type`), a vLLM-style `"object": "error"`, or — when `event_error_data` is given (an SSE
/// `event: error`) — the object itself.
pub(super) fn error_of(
    obj: &Map<String, Value>,
    event_error_data: Option<&str>,
) -> Option<ErrInfo> {
    let sibling_type = str_of(obj.get("error_type"))
        .or_else(|| str_of(obj.get("type")))
        .map(str::to_string);
    match obj.get("error") {
        Some(Value::Object(e)) => {
            let message = str_of(e.get("message"))
                .map(str::to_string)
                .unwrap_or_else(|| Value::Object(e.clone()).to_string());
            let error_type = str_of(e.get("type"))
                .or_else(|| str_of(e.get("error_type")))
                .map(str::to_string)
                .or(sibling_type);
            return Some(ErrInfo {
                message,
                error_type,
            });
        }
        Some(Value::String(s)) => {
            return Some(ErrInfo {
                message: s.clone(),
                error_type: sibling_type,
            })
        }
        Some(Value::Null) | None => {}
        Some(other) => {
            return Some(ErrInfo {
                message: other.to_string(),
                error_type: sibling_type,
            })
        }
    }
    let vllm_style = str_of(obj.get("object")) == Some("error");
    if vllm_style || event_error_data.is_some() {
        let message = str_of(obj.get("message"))
            .or_else(|| str_of(obj.get("details")))
            .or_else(|| str_of(obj.get("detail")))
            .map(str::to_string)
            .unwrap_or_else(|| {
                event_error_data
                    .map(str::to_string)
                    .unwrap_or_else(|| Value::Object(obj.clone()).to_string())
            });
        return Some(ErrInfo {
            message,
            error_type: sibling_type,
        });
    }
    None
}

/// The error an `event: error` or a raw `error:` line carries: the JSON's error (as [`error_of`] reads it,
/// `message`, then `details` or `detail`), or the text itself when it is no JSON object.
pub(super) fn error_event_info(d: &str) -> ErrInfo {
    match serde_json::from_str::<Value>(d) {
        Ok(Value::Object(o)) => error_of(&o, Some(d)).unwrap_or(ErrInfo {
            message: d.to_string(),
            error_type: None,
        }),
        _ => ErrInfo {
            message: if d.is_empty() {
                "(no text)".into()
            } else {
                d.to_string()
            },
            error_type: None,
        },
    }
}

/// See [`ServeError::kind`].
pub(super) fn classify(
    e: &ErrInfo,
    streamed: bool,
    http_status: Option<u16>,
    after_tokens: bool,
) -> FailureCode {
    if streamed && after_tokens {
        return FailureCode::ErrorMidStream;
    }
    let t = e.error_type.as_deref().unwrap_or("").to_ascii_lowercase();
    let m = e.message.to_ascii_lowercase();
    let context_msg = [
        "context size",
        "context length",
        "context window",
        "maximum context",
        "context_length",
    ]
    .iter()
    .any(|k| m.contains(k));
    if t.contains("context") || context_msg {
        return FailureCode::ContextExceeded;
    }
    if t.contains("validation") || t.contains("invalid_request") || t.contains("badrequest") {
        return FailureCode::ValidationError;
    }
    if streamed {
        FailureCode::ErrorInStream
    } else if http_status.is_some_and(|s| s >= 400) {
        FailureCode::HttpStatus
    } else {
        FailureCode::ServerError
    }
}
