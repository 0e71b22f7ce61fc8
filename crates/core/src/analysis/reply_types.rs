//! The reply's data (below the parsers, so that `content` and `logprobs` can name it without a cycle): [`Reply`] and the parts it holds (usage, timings, token chunks, errors, tool calls).

use serde::{Deserialize, Serialize};

use crate::analysis::quote::*;
use crate::vocab::{Failure, FailureCode, Failures, Note, NoteKind};

/// `usage` as the serve reported it (OpenAI field names). Tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens (includes reasoning tokens).
    pub completion_tokens: Option<u64>,
    /// Total tokens.
    pub total_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens`: the part of `completion_tokens` spent thinking (a
    /// breakdown, never added to `completion_tokens`). Absent in older evidence; not written when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// llama.cpp's `timings` object, read from whichever chunk carries it. All fields optional. ms and tok/s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Prompt tokens served from the KV cache.
    pub cache_n: Option<u64>,
    /// Prompt tokens actually processed.
    pub prompt_n: Option<u64>,
    /// Prefill time, ms.
    pub prompt_ms: Option<f64>,
    /// Prefill rate as llama.cpp computes it, tok/s.
    pub prompt_per_second: Option<f64>,
    /// Tokens generated.
    pub predicted_n: Option<u64>,
    /// Generation time, ms.
    pub predicted_ms: Option<f64>,
    /// Generation rate as llama.cpp computes it, tok/s.
    pub predicted_per_second: Option<f64>,
}

/// One token chunk (see module doc) with its event time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenChunk {
    /// Event time, ms since the request was sent.
    pub t_ms: f64,
    /// `delta.content` text of this chunk ("" if none).
    pub content: String,
    /// `delta.reasoning_content` or `delta.reasoning` text ("" if none).
    pub reasoning: String,
    /// True when the chunk carries `delta.tool_calls`.
    pub tool_call: bool,
    /// Tokens in this chunk when the serve says so (llama.cpp `timings_per_token` running `predicted_n`
    /// differences, vLLM `continuous_usage_stats`); `None` when unknown.
    pub tokens: Option<u64>,
    /// The earliest this chunk's bytes can have arrived, ms since the request was sent: when the client's
    /// previous read returned (`TimedRead::recv_ms` of the read before the one that completed this event; 0
    /// for the first read). Set only when the read that completed it carries `recv_ms` (a kernel-stamped
    /// read); `None` keeps the older rule, where `t_ms` is the arrival. The chunk arrived in
    /// `(after_ms, t_ms]` (`analysis::measure` uses it for TTFT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<f64>,
}

/// An error the serve reported, in an HTTP error status or inside a 200 stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeError {
    /// Classification: `context_exceeded`, `validation_error`, `error_mid_stream`, `server_error`,
    /// `http_status`, `transport` (connection failed or timed out), `error_in_stream`.
    ///
    /// Set by this module as follows (first match wins):
    /// 1. in a stream, after at least one token chunk → `error_mid_stream` (partial content is kept);
    /// 2. `type`/`error_type` mentions `context`, or the message mentions context size / length / window
    ///    → `context_exceeded` (so llama.cpp's 400 `exceed_context_size_error` and 500 "Context size has been
    ///    exceeded." give the same verdict);
    /// 3. `type`/`error_type` mentions `validation`, `invalid_request` or `badrequest` → `validation_error`;
    /// 4. otherwise: in a stream → `error_in_stream`; a body with HTTP status ≥ 400 → `http_status`;
    ///    an error body with a 2xx status → `server_error`.
    pub kind: FailureCode,
    /// The serve's own message, verbatim.
    pub message: String,
    /// HTTP status of the response (200 for errors inside a stream), if a response arrived.
    pub http_status: Option<u16>,
    /// The serve's own error type (`error.type`, or a sibling `error_type` as TGI sends), verbatim.
    #[serde(default)]
    pub error_type: Option<String>,
}

impl ServeError {
    /// An HTTP error status (≥ 400) whose body named no error of its own: `message` says what came instead.
    pub(super) fn http_error(message: String, http_status: Option<u16>) -> ServeError {
        ServeError {
            kind: FailureCode::HttpStatus,
            message,
            http_status,
            error_type: None,
        }
    }
}

/// One tool call, assembled from its streamed pieces (or read whole from a body).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `index` of the call within the message.
    pub index: u64,
    /// `id`, when the serve sent one.
    pub id: Option<String>,
    /// `function.name`.
    pub name: Option<String>,
    /// `function.arguments`, concatenated (a JSON text when the serve is well-behaved).
    pub arguments: String,
}

/// Everything one response said. Built by [`parse_stream`] or [`parse_body`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// True when parsed as an SSE stream.
    pub streamed: bool,
    /// HTTP status, when known.
    pub http_status: Option<u16>,
    /// Time of the first SSE data event of any kind (role chunk included), ms.
    pub first_event_ms: Option<f64>,
    /// Time of the last read, ms (end of the response body).
    pub end_ms: Option<f64>,
    /// Parsed data chunks, excluding `[DONE]` and comments.
    pub chunks: usize,
    /// Token chunks in arrival order.
    pub token_chunks: Vec<TokenChunk>,
    /// Chunks with a choice whose content was "" or null and carried no token (prefill / role chunks). Exactly:
    /// choice 0 present, not a token chunk, and no finish_reason (a finish-only chunk is not "empty").
    pub empty_chunks: usize,
    /// SSE comment lines (`:` ...) ignored.
    pub comments_ignored: usize,
    /// Concatenated content.
    pub content: String,
    /// Concatenated reasoning (`reasoning_content` or `reasoning`).
    pub reasoning: String,
    /// Final finish_reason ("" normalised to none); `None` if never seen.
    pub finish_reason: Option<String>,
    /// Event time (ms) of the last chunk carrying a finish_reason; `None` if never seen or not streamed.
    /// vLLM and llama.cpp send the end-of-sequence token's finish chunk one decode step after the last text
    /// chunk (`analysis::measure` ends the decode window there when the count includes that token).
    #[serde(skip)]
    pub finish_ms: Option<f64>,
    /// `data: [DONE]` seen.
    pub done_seen: bool,
    /// The last non-null usage.
    pub usage: Option<Usage>,
    /// llama.cpp timings, from whichever chunk carries them.
    pub timings: Option<Timings>,
    /// `system_fingerprint` of the last chunk that carried one (llama.cpp puts its build there).
    pub system_fingerprint: Option<String>,
    /// `model` as the serve named it.
    pub model: Option<String>,
    /// The error the serve reported, if any.
    pub error: Option<ServeError>,
    /// Parse errors with reasons (malformed events, a misnamed field line, the unfinished last event,
    /// invalid UTF-8), serve text in them quoted and escaped. For a stream, the ones that lose part of the
    /// reply are also in `malformed_events` / `misnamed_fields`.
    pub parse_errors: Vec<String>,
    /// True when the stream ended inside an event or without finish_reason and `[DONE]`.
    pub truncated: bool,
    /// Warnings (e.g. `no_done_marker`, `finish_reason_missing`); each serialises as `name` or
    /// `name: detail` ([`Note`]).
    pub warnings: Vec<Note>,
    /// Flags (e.g. `error_inside_200_stream`, `truncated_by_max_tokens`, `multi_token_chunks`).
    pub flags: Vec<Note>,
    /// True when the body ended inside an SSE event (bytes after the last dispatched event), whether or not
    /// its data could still be used. For a body: the JSON was cut.
    #[serde(default)]
    pub incomplete_tail: bool,
    /// U+FFFD characters produced by decoding invalid UTF-8.
    #[serde(default)]
    pub replacement_chars: usize,
    /// Tool calls, assembled by `index`.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Dispatched events (before `[DONE]`) that could not be read as a chunk and so would be lost: empty data
    /// (both OpenAI SDKs raise on `data:` with nothing after it), broken JSON (a lone surrogate escape or a
    /// raw NUL or other control byte makes it so), JSON that is not an object, `choices` that is not an array.
    /// Each `event N (line L): reason: "escaped excerpt"`. Any entry fails the reply ([`Reply::failure`]).
    #[serde(default)]
    pub malformed_events: Vec<String>,
    /// Malformed events in all; only the first [`DETAILS_KEPT`] are described in `malformed_events` (a hostile
    /// stream of millions of `data:` lines must not cost a string each).
    #[serde(default)]
    pub malformed_event_count: usize,
    /// Lines (before `[DONE]`) that would have carried a field but for a byte-order mark, a space or a capital
    /// letter in the field name (` data:`, `DATA:`, `\u{FEFF}data:`), or a raw `error:` field: an SSE client
    /// ignores them. Each `line L: "field" is not `data` (why): "escaped line"`. Any entry fails the reply.
    #[serde(default)]
    pub misnamed_fields: Vec<String>,
    /// Misnamed field lines in all; the first [`crate::analysis::sse::NEAR_MISSES_KEPT`] are described in
    /// `misnamed_fields`.
    #[serde(default)]
    pub misnamed_field_count: usize,
    /// Named events (an `event:` name other than `message` and `error`) whose data was no chat chunk, skipped
    /// before `[DONE]` (flag `named_events_ignored`): not chunks, not parse errors, not the first event.
    #[serde(default)]
    pub named_events_ignored: usize,
    /// Bytes that came after the `[DONE]` event (its own line ends excluded): not read, as an SSE client stops
    /// there; reported in the warning `data_after_done`, never judged.
    #[serde(default)]
    pub bytes_after_done: usize,
    /// The invalid UTF-8 of a stream, described (`2 replacement characters in 1 lines (first: line 4)`): the
    /// detail of the `invalid_utf8` failure. Not serialised (its text is in `parse_errors`).
    #[serde(skip)]
    pub invalid_utf8: Option<String>,
    /// Per-token logprobs of choice 0 (`logprobs.content[]`, [`crate::analysis::logprobs`]), in order, when
    /// the serve sent them (a gate with a drift assertion asks for them); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<crate::analysis::logprobs::TokenLogprob>,
}

/// `finish_reason` values that end a reply without finishing it: vLLM's `abort` (the request was aborted),
/// `error`, `cancelled`/`canceled`, `timeout`, and OpenAI's `content_filter` (the answer was withheld). Such a
/// reply fails ([`FailureCode::AbnormalFinish`]): it is not the model's whole answer, so it has no figures and
/// no content to judge. Other values (`stop`, `length`, `tool_calls`, `function_call`, TGI's `eos_token` and
/// `stop_sequence`, ...) are normal ends.
pub const ABNORMAL_FINISH_REASONS: &[&str] = &[
    "abort",
    "aborted",
    "error",
    "cancelled",
    "canceled",
    "timeout",
    "content_filter",
];

impl Reply {
    /// Why this reply failed on its own terms (before any gate looks at content or numbers), or `None`.
    /// `name: detail`, several joined with `; ` (the first name is the failure's name). In order:
    /// * the serve's error: `context_exceeded: the request exceeds ... (HTTP 400)` (see [`ServeError::kind`]);
    /// * or a cut: `truncated_stream: no finish_reason, no [DONE], incomplete last event` (a stream that ended
    ///   inside an event is cut: that event counts for nothing unless its data is exactly `[DONE]`),
    ///   `truncated_body: ...`, or `unparseable_body: ...`;
    /// * `malformed_event: event 3 (line 5): malformed JSON (...): "{\"cho"` (the first of
    ///   [`Reply::malformed_events`], with `(and N more)`);
    /// * `misnamed_field: line 7: " data" is not `data` (a leading space) ...` (the first of
    ///   [`Reply::misnamed_fields`]);
    /// * `invalid_utf8: 2 replacement characters in 1 lines (first: line 4)`.
    ///
    /// Serve text in it is escaped: control bytes never reach a terminal. Gate-level checks (content,
    /// finish_reason == stop, degenerate text, rates) are the judge's.
    pub fn failure(&self) -> Option<Failures> {
        let mut parts: Vec<Failure> = Vec::new();
        let mut push = |code: FailureCode, detail: String| parts.push(Failure { code, detail });
        if let Some(e) = &self.error {
            let status = match e.http_status {
                Some(s) => format!(" (HTTP {s})"),
                None => String::new(),
            };
            push(e.kind, format!("{}{}", printable(&e.message), status));
        } else if self.truncated {
            let mut why = Vec::new();
            if self.finish_reason.is_none() {
                why.push("no finish_reason");
            }
            if self.streamed && !self.done_seen {
                why.push("no [DONE]");
            }
            if self.incomplete_tail {
                why.push(if self.streamed {
                    "incomplete last event"
                } else {
                    "body ends inside JSON"
                });
            }
            let code = if self.streamed {
                FailureCode::TruncatedStream
            } else {
                FailureCode::TruncatedBody
            };
            push(code, why.join(", "));
        } else if !self.streamed {
            if let Some(p) = self.parse_errors.first() {
                push(FailureCode::UnparseableBody, printable(p));
            }
        }
        let more = |n: usize| {
            if n > 1 {
                format!(" (and {} more)", n - 1)
            } else {
                String::new()
            }
        };
        if self.error.is_none() {
            if let Some(f) = self.finish_reason.as_deref() {
                if ABNORMAL_FINISH_REASONS.contains(&f) {
                    push(
                        FailureCode::AbnormalFinish,
                        format!(
                            "finish_reason {:?}: the serve ended the reply without finishing it",
                            printable(f)
                        ),
                    );
                }
            }
        }
        if let Some(m) = self.malformed_events.first() {
            push(
                FailureCode::MalformedEvent,
                format!(
                    "{}{}",
                    printable(m),
                    more(self.malformed_event_count.max(self.malformed_events.len()))
                ),
            );
        }
        if let Some(m) = self.misnamed_fields.first() {
            push(
                FailureCode::MisnamedField,
                format!(
                    "{}{}",
                    printable(m),
                    more(self.misnamed_field_count.max(self.misnamed_fields.len()))
                ),
            );
        }
        if self.streamed && self.replacement_chars > 0 {
            if let Some(d) = &self.invalid_utf8 {
                push(FailureCode::InvalidUtf8, d.clone());
            }
        }
        if let Some(d) = crate::analysis::logprobs::impossible(&self.logprobs) {
            push(FailureCode::ImpossibleLogprobs, d);
        }
        Failures::new(parts)
    }

    /// True when any warning or flag is of this kind.
    pub fn has_note(&self, kind: NoteKind) -> bool {
        crate::vocab::has_note(&self.warnings, kind) || crate::vocab::has_note(&self.flags, kind)
    }
}
