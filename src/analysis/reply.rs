//! The reply: what one chat-completion response said, parsed from its evidence (timed reads of an SSE stream,
//! or a plain JSON body). Owns the interpretation of OpenAI-compatible chunks (choices, delta, usage, timings,
//! finish_reason, errors inside 200 streams). Pure: takes bytes and times, returns values; never does I/O.
//!
//! Conventions (tests/data/cases/CASES.md): a *token chunk* is a parsed chunk whose first choice has non-empty
//! `delta.content`, or non-empty `delta.reasoning_content` / `delta.reasoning`, or any `delta.tool_calls`.
//! An event's time is the arrival of the read that completes it. The last non-null `usage` wins (never summed).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::io::reads::TimedRead;
pub use crate::vocab::{Failure, FailureCode, Failures, Note, NoteKind};

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
    fn http_error(message: String, http_status: Option<u16>) -> ServeError {
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

/// Parses a streamed response (SSE) from its timed reads.
///
/// Framing is [`crate::analysis::sse`]; this reads each data event as an OpenAI-compatible chunk:
/// * Each rule and its source (WHATWG, web-platform-tests, openai-python, openai-node) is listed in
///   docs/stream.md; where the spec and the SDKs differ the reply is read as the SDKs deliver it, with the
///   warning `sse_client_divergence`.
/// * `data: [DONE]` sets `done_seen` and ends the reading: both OpenAI SDKs stop there (openai-python
///   `Stream.__stream__` breaks on `sse.data.startswith("[DONE]")`; openai-node `Stream.fromSSEResponse`
///   sets `done` and skips everything after). Data starting `[DONE]` with more after it ends it too (python
///   does, node raises: a divergence); `" [DONE]"` (`data:  [DONE]`) ends it for neither and is malformed.
/// * An event named other than `message`/`error`/empty whose data is no chat chunk (no `choices`) and has no
///   `error` member is skipped before anything else: not a chunk, not a parse error, not the first event;
///   counted in `named_events_ignored` (flag `named_events_ignored`). A chat chunk in such an event is read
///   (both SDKs read it; a browser does not: a divergence). Whatever follows is counted in `bytes_after_done` and reported
///   as the warning `data_after_done: N bytes after [DONE] (K data events), not read: "excerpt"` — never
///   content, never a parse error, never a failure.
/// * Any other data must be a JSON object with an array (or no) `choices`; else the event is **malformed**:
///   it goes to `parse_errors` (with its time) and to `malformed_events` (which fails the reply), naming the
///   event by number and line with an escaped excerpt. Empty data is malformed too (`JSON.parse("")` and
///   `json.loads("")` both raise in the SDKs), as is JSON that serde rejects (a lone surrogate `\ud800`, a raw
///   NUL or other control byte inside a string).
/// * Lines that an SSE client ignores but that looked meant to carry a field (` data:`, `DATA:`, a BOM
///   before `data:` anywhere but at the very start; see [`crate::analysis::sse::near_miss`]) go to
///   `parse_errors` and `misnamed_fields` (which fails the reply). Other unknown fields: warning
///   `unknown_sse_fields`. A stripped leading BOM: flag `leading_bom_stripped`.
/// * Invalid UTF-8 before `[DONE]`: a parse error with the count, and a failure (`invalid_utf8`).
/// * A chunk with an `error` member (object, or string with a sibling `error_type`), a vLLM-style
///   `"object": "error"`, any event of type `error` (flag `sse_error_event`; its data's `message`, `details`
///   or `detail`, else its text) or a raw `error:` line (flag `nonstandard_sse_error_field`, llama.cpp before
///   PR #16109) is the serve's error (see [`ServeError::kind`]); the first one is kept, an `error` event is
///   no chunk. Flag `error_inside_200_stream` when the status is 2xx or unknown.
/// * `choices: []` chunks are metadata (usage, timings); choice 0 (by `index`, or the first without one) is
///   the reply. Token chunk: non-empty `delta.content`, `delta.reasoning_content`/`delta.reasoning` or a
///   non-empty `delta.tool_calls` (also `text` of a completions stream). A choice that is none of these and
///   carries no finish_reason counts as an `empty_chunks` (role-only, `""`/`null` content).
/// * `finish_reason` `""`/null/missing is "none"; the last non-empty one wins; text on the finish chunk counts.
/// * Last non-null `usage` wins; last `timings` wins.
/// * Per-chunk token counts: when **every** token chunk carries a running counter — `usage.completion_tokens`
///   (vLLM `continuous_usage_stats`) or else `timings.predicted_n` (llama.cpp `timings_per_token`) — each
///   token chunk gets the difference from the previous value seen on any chunk (start 0). Otherwise none.
///   Flag `multi_token_chunks` when a chunk has more than one token.
/// * End of stream inside an event (no blank line after its last line): the event was never dispatched, so
///   — as in the WHATWG rules and both SDKs, see [`crate::analysis::sse`] — it counts for nothing, whatever its data;
///   it is a parse error naming its bytes and an excerpt, and the reply is `truncated` (`incomplete last
///   event`) when it held data or a cut line. One exception: data that is exactly `[DONE]` sets `done_seen`
///   (warning `unterminated_last_event`), since nothing of the reply depends on it. `truncated` = no serve
///   error and (the tail was lost, or neither a finish_reason nor `[DONE]` arrived).
/// * Warnings: `usage_missing`, `finish_reason_missing` (`[DONE]` without any finish_reason),
///   `no_done_marker` (finish_reason but no `[DONE]`), `data_after_done`. Flag `truncated_by_max_tokens` on
///   finish_reason `length`.
/// * A body with no SSE event or comment at all that is one JSON document is parsed by [`parse_body`]
///   (warning `not_an_sse_stream`).
pub fn parse_stream(reads: &[TimedRead], http_status: Option<u16>) -> Reply {
    let mut framer = crate::analysis::sse::Framer::new();
    let mut st = StreamState::new(http_status);
    let end_ms: Option<f64> = reads.iter().map(|r| r.t_ms).reduce(f64::max);
    let mut any_event = false;
    // The bytes after the `[DONE]` event, once it arrived (slices of the reads, not a copy).
    let mut after_done: Option<Vec<&[u8]>> = None;
    for (i, r) in reads.iter().enumerate() {
        // A kernel-stamped read's bytes arrived after the previous read returned (its `recv_ms`, else its
        // stamp, which is no later), or after the request was sent.
        st.read_after_ms = r.recv_ms.map(|_| match i {
            0 => 0.0,
            _ => reads[i - 1].recv_ms.unwrap_or(reads[i - 1].t_ms),
        });
        let mut rest: &[u8] = &r.bytes;
        if rest.is_empty() {
            framer.push(rest, r.t_ms);
        }
        while !rest.is_empty() {
            let (used, ev) = framer.push_partial(rest, r.t_ms);
            rest = &rest[used..];
            // Raw `error:` lines come before the event whose blank line this push reached.
            for e in framer.take_error_fields() {
                st.on_error_field(&e);
            }
            if let Some(ev) = ev {
                any_event = true;
                st.on_event(ev.event.as_deref(), &ev.data, ev.t_ms, ev.line);
                if st.reply.done_seen {
                    let mut tail = vec![rest];
                    tail.extend(reads[i + 1..].iter().map(|r| r.bytes.as_slice()));
                    after_done = Some(tail);
                    break;
                }
            }
        }
        if after_done.is_some() {
            break;
        }
    }
    let tail = framer.finish();
    if after_done.is_none() {
        for e in framer.take_error_fields() {
            st.on_error_field(&e);
        }
    }
    let stats = framer.stats().clone();

    if !any_event && stats.comments == 0 {
        let body: Vec<u8> = reads
            .iter()
            .map(|r| r.bytes.as_slice())
            .collect::<Vec<&[u8]>>()
            .concat();
        let is_json = std::str::from_utf8(&body)
            .ok()
            .map(|s| s.trim())
            .filter(|s| s.starts_with('{') || s.starts_with('['))
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .is_some();
        if is_json {
            let mut r = parse_body(&body, http_status, end_ms.unwrap_or(0.0));
            r.warnings.push(Note::new(
                NoteKind::NotAnSseStream,
                "the body is one JSON document, parsed as such",
            ));
            return r;
        }
    }

    if let Some(after) = after_done {
        st.after_done(&after);
    }
    let mut tail_lost = false;
    if let Some(inc) = &tail {
        st.reply.incomplete_tail = true;
        if inc.has_data && inc.data == "[DONE]" {
            st.reply.warnings.push(Note::new(
                NoteKind::UnterminatedLastEvent,
                format!(
                    "EOF before the blank line ending `data: [DONE]` ({} bytes), taken as [DONE]",
                    inc.bytes
                ),
            ));
            st.on_event(inc.event.as_deref(), &inc.data, inc.t_ms, inc.line);
        } else {
            tail_lost = inc.has_data || inc.cut_line;
            st.reply.parse_errors.push(format!(
                "incomplete last event at EOF (line {}, {} bytes{}): never dispatched (no blank line ends it), so not used: {}",
                inc.line,
                inc.bytes,
                if inc.cut_line { ", last line cut" } else { "" },
                quoted(&inc.data, SNIPPET_CHARS)
            ));
        }
    }
    let mut r = st.finish(stats, end_ms, tail_lost);
    move_reasoning_markup(&mut r);
    r
}

/// Reasoning markup at the start of the content (`<think>…</think>`, [`crate::analysis::content::reasoning_markup`])
/// is reasoning, not the answer: moved to `reasoning` (after any reasoning the serve sent in its own field),
/// the content keeps the rest, and warning `reasoning_in_content` says what was moved. The token chunks keep
/// their text as it arrived (timing is about arrival, not meaning).
fn move_reasoning_markup(r: &mut Reply) {
    let Some(m) = crate::analysis::content::reasoning_markup(&r.content) else {
        return;
    };
    let open = if m.opened {
        format!("<{}>", m.tag)
    } else {
        "(opened by the template)".to_string()
    };
    let close = if m.closed {
        format!("</{}>", m.tag)
    } else {
        "(never closed)".to_string()
    };
    r.warnings.push(Note::new(
        NoteKind::ReasoningInContent,
        format!(
            "{open}…{close} at the start of content: {} chars judged as reasoning, not content",
            m.reasoning.chars().count()
        ),
    ));
    if !r.reasoning.is_empty() && !m.reasoning.is_empty() {
        r.reasoning.push('\n');
    }
    r.reasoning.push_str(&m.reasoning);
    r.content = m.rest;
}

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
            } else {
                r.parse_errors.push(format!(
                    "body is not JSON ({e}): {}",
                    quoted(&text, SNIPPET_CHARS)
                ));
            }
            if is_error_status {
                r.error = Some(ServeError::http_error(snippet(&text), http_status));
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

/// Tokens in one token chunk by running counter: (from `usage.completion_tokens`, from `timings.predicted_n`).
type Deltas = (Option<u64>, Option<u64>);

/// The state of one stream while its events are read.
struct StreamState {
    reply: Reply,
    /// Running counters seen on any chunk so far: usage.completion_tokens, timings.predicted_n.
    prev_usage_ct: u64,
    prev_pred_n: u64,
    /// Per token chunk: (usage delta, timings delta), when that chunk carried the counter.
    deltas: Vec<Deltas>,
    events: usize,
    /// Line and name of the first skipped named event.
    first_named: Option<(usize, String)>,
    /// [`TokenChunk::after_ms`] of the events the current read completes.
    read_after_ms: Option<f64>,
}

impl StreamState {
    fn new(http_status: Option<u16>) -> Self {
        StreamState {
            reply: Reply {
                streamed: true,
                http_status,
                ..Default::default()
            },
            prev_usage_ct: 0,
            prev_pred_n: 0,
            deltas: Vec::new(),
            events: 0,
            first_named: None,
            read_after_ms: None,
        }
    }

    fn in_200(&self) -> bool {
        self.reply
            .http_status
            .is_none_or(|s| (200..300).contains(&s))
    }

    fn set_error(&mut self, e: ErrInfo) {
        if self.reply.error.is_some() {
            return;
        }
        let after_tokens = !self.reply.token_chunks.is_empty();
        let kind = classify(&e, true, self.reply.http_status, after_tokens);
        if self.in_200() {
            self.reply
                .flags
                .push(Note::flag(NoteKind::ErrorInside200Stream));
        }
        self.reply.error = Some(ServeError {
            kind,
            message: e.message,
            http_status: self.reply.http_status,
            error_type: e.error_type,
        });
    }

    /// An `event: error`: the serve's error, flagged `sse_error_event`.
    fn error_event(&mut self, line: usize, e: ErrInfo) {
        if self.reply.error.is_none() {
            self.reply.flags.push(Note::new(
                NoteKind::SseErrorEvent,
                format!("line {line}: `event: error` (openai-node raises it; openai-python only when its data has an `error` member)"),
            ));
        }
        self.set_error(e);
    }

    /// A warning that the spec (browsers) and the OpenAI SDKs read this stream differently; one per reply,
    /// later ones counted in its detail.
    fn divergence(&mut self, what: String) {
        if let Some(n) = self
            .reply
            .warnings
            .iter_mut()
            .find(|n| n.kind == NoteKind::SseClientDivergence)
        {
            if let Some(d) = n.detail.as_mut() {
                if let Some(i) = d.find(" (+") {
                    let more: usize = d[i + 3..].trim_end_matches(" more)").parse().unwrap_or(0);
                    d.truncate(i);
                    d.push_str(&format!(" (+{} more)", more + 1));
                } else {
                    d.push_str(" (+1 more)");
                }
            }
            return;
        }
        self.reply
            .warnings
            .push(Note::new(NoteKind::SseClientDivergence, what));
    }

    /// Records a dispatched event that cannot be read as a chunk: a parse error (with its time) and a
    /// malformed event (which fails the reply). Only the first [`DETAILS_KEPT`] are described; all are counted.
    fn malformed(&mut self, line: usize, t_ms: f64, reason: &str, data: &str) {
        self.reply.malformed_event_count += 1;
        if self.reply.malformed_event_count > DETAILS_KEPT {
            return;
        }
        let excerpt = quoted(data, SNIPPET_CHARS);
        self.reply.parse_errors.push(format!(
            "event {} at {t_ms} ms (line {line}): {reason}: {excerpt}",
            self.events
        ));
        self.reply.malformed_events.push(format!(
            "event {} (line {line}): {reason}: {excerpt}",
            self.events
        ));
    }

    /// The bytes after the `[DONE]` event (as slices of the reads): counted and reported, never read as
    /// events. Line ends right after `[DONE]` are its own and not counted; only whitespace is nothing.
    fn after_done(&mut self, after: &[&[u8]]) {
        let mut framer = crate::analysis::sse::Framer::new();
        let (mut n, mut events, mut leading, mut blank) = (0usize, 0usize, true, true);
        let mut head: Vec<u8> = Vec::new();
        for part in after {
            let mut part: &[u8] = part;
            if leading {
                let start = part
                    .iter()
                    .position(|&b| b != b'\r' && b != b'\n')
                    .unwrap_or(part.len());
                part = &part[start..];
                leading = part.is_empty();
            }
            n += part.len();
            blank &= part.iter().all(u8::is_ascii_whitespace);
            if head.len() < 400 {
                head.extend_from_slice(&part[..part.len().min(400 - head.len())]);
            }
            events += framer.push(part, 0.0).len();
        }
        if blank {
            return;
        }
        self.reply.bytes_after_done = n;
        let shown = quoted(&String::from_utf8_lossy(&head), 80);
        let cut = if head.len() < n && !shown.ends_with('…') {
            "…"
        } else {
            ""
        };
        self.reply.warnings.push(Note::new(NoteKind::DataAfterDone, format!(
            "{n} bytes after [DONE] ({events} data events), not read (an SSE client stops at [DONE]): {shown}{cut}"
        )));
    }

    /// A raw `error:` line (case 32a): the serve's error, flagged `nonstandard_sse_error_field`. Its value is
    /// read like the data of an `event: error`.
    fn on_error_field(&mut self, e: &crate::analysis::sse::ErrorField) {
        if self.reply.done_seen {
            return;
        }
        if self.reply.error.is_none() {
            self.reply.flags.push(Note::new(
                NoteKind::NonstandardSseErrorField,
                format!(
                    "line {}: a raw `error:` line, no SSE field (a spec client and both OpenAI SDKs drop it), read as the serve's error",
                    e.line
                ),
            ));
        }
        self.set_error(error_event_info(e.value.trim()));
    }

    /// One dispatched event, read as the OpenAI SDKs read it (openai-python `Stream.__stream__`, openai-node
    /// `Stream.fromSSEResponse`; docs/stream.md): `[DONE]` ends the stream; an `error` event, or data whose
    /// JSON has an `error` member, is the serve's error; an event with any other name is read as a chunk
    /// only when its JSON has `choices` (warning `sse_client_divergence`: a browser's `onmessage` does not see
    /// it), else it is skipped and counted (`named_events_ignored`) without starting any clock.
    fn on_event(&mut self, event_type: Option<&str>, data: &str, t_ms: f64, line: usize) {
        let is_error_event = event_type == Some("error");
        // An empty name is the default type (WHATWG: "If the event type buffer has a value other than the
        // empty string, change the type of the newly created event to equal the value"; wpt
        // eventsource/format-field-event-empty.htm).
        let named = event_type.filter(|e| !matches!(*e, "" | "message" | "error"));
        // Both SDKs test `[DONE]` before the event name: python `data.startswith("[DONE]")`, node
        // `data === '[DONE]'`.
        if data.starts_with("[DONE]") {
            self.events += 1;
            self.reply.first_event_ms.get_or_insert(t_ms);
            if data != "[DONE]" {
                self.divergence(format!(
                    "line {line}: end marker {} is not exactly `[DONE]`: openai-python ends the stream (it tests `startswith(\"[DONE]\")`), openai-node parses it as JSON and raises",
                    quoted(data, 40)
                ));
            }
            self.reply.done_seen = true;
            return;
        }
        let d = data.trim();
        let parsed: Option<Value> = serde_json::from_str(d).ok();
        if let Some(name) = named {
            let obj = parsed.as_ref().and_then(Value::as_object);
            let is_chunk = obj.is_some_and(|o| o.contains_key("choices"));
            let has_error =
                obj.is_some_and(|o| !matches!(o.get("error"), None | Some(Value::Null)));
            if !is_chunk && !has_error {
                self.reply.named_events_ignored += 1;
                self.first_named
                    .get_or_insert_with(|| (line, printable(name)));
                return;
            }
            if is_chunk {
                self.divergence(format!(
                    "line {line}: a chat chunk inside `event: {}`: the OpenAI SDKs read it, a browser EventSource's `onmessage` never sees it",
                    printable(name)
                ));
            }
        }
        self.events += 1;
        if self.reply.first_event_ms.is_none() {
            self.reply.first_event_ms = Some(t_ms);
        }
        if d.is_empty() {
            if is_error_event {
                self.error_event(
                    line,
                    ErrInfo {
                        message: "(event: error with empty data)".into(),
                        error_type: None,
                    },
                );
            } else {
                self.malformed(
                    line,
                    t_ms,
                    "empty data (both OpenAI SDKs raise on it)",
                    data,
                );
            }
            return;
        }
        if is_error_event {
            self.error_event(line, error_event_info(d));
            return;
        }
        if d == "[DONE]" {
            self.malformed(
                line,
                t_ms,
                "`[DONE]` after a space is not the end marker for openai-python or openai-node (both raise parsing it as JSON)",
                data,
            );
            return;
        }
        let v: Value = match parsed {
            Some(v) => v,
            None => {
                let e = serde_json::from_str::<Value>(d).expect_err("did not parse");
                let values = serde_json::Deserializer::from_str(d)
                    .into_iter::<Value>()
                    .take_while(Result::is_ok)
                    .count();
                // Name the causes a reader would not guess from serde's message.
                let why = if values > 1 && e.to_string().contains("trailing characters") {
                    format!(", {values} JSON values in one event: several `data:` lines are joined with a newline, and no client reads that as {values} chunks")
                } else if d.contains('\0') {
                    ", raw NUL".into()
                } else if e.to_string().contains("escape")
                    && d.to_ascii_lowercase().contains("\\ud")
                {
                    ", lone surrogate".into()
                } else {
                    String::new()
                };
                self.malformed(line, t_ms, &format!("malformed JSON ({e}{why})"), d);
                return;
            }
        };
        let Some(obj) = v.as_object() else {
            self.malformed(line, t_ms, "data is JSON but not an object", d);
            return;
        };
        self.reply.chunks += 1;
        if let Some(e) = error_of(obj, None) {
            self.set_error(e);
            return;
        }
        if let Some(m) = str_of(obj.get("model")) {
            self.reply.model = Some(m.to_string());
        }
        if let Some(f) = str_of(obj.get("system_fingerprint")) {
            self.reply.system_fingerprint = Some(f.to_string());
        }
        let usage = obj.get("usage").and_then(usage_of);
        let timings = obj.get("timings").and_then(timings_of);
        let usage_ct = usage.as_ref().and_then(|u| u.completion_tokens);
        let pred_n = timings.as_ref().and_then(|t| t.predicted_n);
        if let Some(u) = usage {
            self.reply.usage = Some(u);
        }
        if let Some(t) = timings {
            self.reply.timings = Some(t);
        }

        match obj.get("choices") {
            Some(Value::Array(arr)) => {
                if let Some(choice) = first_choice(arr) {
                    self.on_choice(choice, t_ms, usage_ct, pred_n);
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => self.malformed(line, t_ms, "`choices` is not an array", d),
        }
        if let Some(c) = usage_ct {
            self.prev_usage_ct = c;
        }
        if let Some(p) = pred_n {
            self.prev_pred_n = p;
        }
    }

    fn on_choice(
        &mut self,
        choice: &Map<String, Value>,
        t_ms: f64,
        usage_ct: Option<u64>,
        pred_n: Option<u64>,
    ) {
        let delta = choice
            .get("delta")
            .and_then(Value::as_object)
            .or_else(|| choice.get("message").and_then(Value::as_object));
        let content = delta
            .and_then(|d| str_of(d.get("content")))
            .or_else(|| str_of(choice.get("text")))
            .unwrap_or("");
        let reasoning = delta.map(reasoning_of).unwrap_or("");
        let tool_calls = delta
            .and_then(|d| d.get("tool_calls"))
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty());
        let finish = finish_of(choice);
        if let Some(lps) = crate::analysis::logprobs::of_choice(choice) {
            self.reply.logprobs.extend(lps);
        }
        let is_token = !content.is_empty() || !reasoning.is_empty() || tool_calls.is_some();
        if is_token {
            self.reply.content.push_str(content);
            self.reply.reasoning.push_str(reasoning);
            if let Some(tcs) = tool_calls {
                merge_tool_calls(&mut self.reply.tool_calls, tcs);
            }
            self.reply.token_chunks.push(TokenChunk {
                t_ms,
                content: content.to_string(),
                reasoning: reasoning.to_string(),
                tool_call: tool_calls.is_some(),
                tokens: None,
                after_ms: self.read_after_ms,
            });
            self.deltas.push((
                usage_ct.and_then(|c| c.checked_sub(self.prev_usage_ct)),
                pred_n.and_then(|p| p.checked_sub(self.prev_pred_n)),
            ));
        } else if finish.is_none() {
            self.reply.empty_chunks += 1;
        }
        if finish.is_some() {
            self.reply.finish_reason = finish;
            self.reply.finish_ms = Some(t_ms);
        }
    }

    fn finish(
        mut self,
        stats: crate::analysis::sse::FramerStats,
        end_ms: Option<f64>,
        tail_lost: bool,
    ) -> Reply {
        let r = &mut self.reply;
        r.end_ms = end_ms;
        r.comments_ignored = stats.comments;
        r.replacement_chars = stats.replacement_chars;
        if stats.replacement_chars > 0 {
            let detail = format!(
                "{} replacement characters in {} lines (first: line {})",
                stats.replacement_chars,
                stats.invalid_utf8_lines,
                stats.first_invalid_utf8_line.unwrap_or(0)
            );
            r.parse_errors.push(format!("invalid UTF-8: {detail}"));
            r.invalid_utf8 = Some(detail);
        }

        // Per-chunk token counts: only when every token chunk carried the same kind of running counter.
        let all = |pick: fn(&Deltas) -> Option<u64>| -> Option<Vec<u64>> {
            if self.deltas.is_empty() {
                return None;
            }
            self.deltas
                .iter()
                .map(|d| pick(d).filter(|&n| n > 0))
                .collect()
        };
        let per_chunk = all(|d| d.0).or_else(|| all(|d| d.1));
        if let Some(counts) = per_chunk {
            for (tc, n) in r.token_chunks.iter_mut().zip(counts) {
                tc.tokens = Some(n);
            }
            if r.token_chunks.iter().any(|t| t.tokens.unwrap_or(1) > 1) {
                r.flags.push(Note::flag(NoteKind::MultiTokenChunks));
            }
        }

        if stats.leading_bom {
            r.flags.push(Note::flag(NoteKind::LeadingBomStripped));
        }
        if let Some((line, name)) = &self.first_named {
            let n = self.reply.named_events_ignored;
            self.reply.flags.push(Note::new(
                NoteKind::NamedEventsIgnored,
                format!(
                    "{n} named event{} skipped, no chat chunk in {} (first: `event: {name}` at line {line})",
                    if n == 1 { "" } else { "s" },
                    if n == 1 { "it" } else { "them" }
                ),
            ));
        }
        if stats.leading_bom {
            self.divergence(
                "a leading byte-order mark: the spec and openai-node (TextDecoder) strip it, openai-python decodes lines as plain UTF-8, keeps it in the first field name and loses the first event".into(),
            );
        }
        if let Some((line, name)) = &stats.first_named_no_data {
            self.divergence(format!(
                "{} events with a name but no data (first: `event: {}` at line {line}): the spec drops them, both OpenAI SDKs hand them on with empty data and raise parsing it as JSON",
                stats.named_no_data,
                printable(name)
            ));
        }
        if let Some(line) = stats.first_py_empty_event {
            self.divergence(format!(
                "{} blank line{} after an `id:` (or `retry:`) line with no data (first at line {line}): the spec and openai-node dispatch nothing, openai-python (whose last event id persists) dispatches an event with empty data and raises parsing it as JSON",
                stats.py_empty_events,
                if stats.py_empty_events == 1 { "" } else { "s" }
            ));
        }
        let r = &mut self.reply;
        for m in &stats.near_misses {
            let what = format!(
                "line {}: {} is not `{}` ({}); an SSE client ignores the line: {}",
                m.line,
                quoted(&m.field, 40),
                m.meant,
                m.why,
                quoted(&m.text, SNIPPET_CHARS)
            );
            r.parse_errors.push(what.clone());
            r.misnamed_fields.push(what);
        }
        r.misnamed_field_count = stats.near_miss_count;
        if stats.near_miss_count > stats.near_misses.len() {
            r.parse_errors.push(format!(
                "and {} more misnamed field lines",
                stats.near_miss_count - stats.near_misses.len()
            ));
        }
        if r.malformed_event_count > DETAILS_KEPT {
            r.parse_errors.push(format!(
                "and {} more malformed events",
                r.malformed_event_count - DETAILS_KEPT
            ));
        }
        let other_unknown = stats.unknown_fields - stats.near_miss_count;
        if other_unknown > 0 {
            r.warnings.push(Note::new(
                NoteKind::UnknownSseFields,
                format!(
                    "{other_unknown} lines with a field SSE ignores (first: {})",
                    quoted(stats.first_unknown_field.as_deref().unwrap_or(""), 40)
                ),
            ));
        }
        if r.usage.is_none() {
            r.warnings.push(Note::new(
                NoteKind::UsageMissing,
                "the stream carried no usage object",
            ));
        }
        if r.error.is_none() {
            if r.done_seen && r.finish_reason.is_none() {
                r.warnings.push(Note::new(
                    NoteKind::FinishReasonMissing,
                    "[DONE] arrived but no chunk had a finish_reason",
                ));
            }
            if !r.done_seen && r.finish_reason.is_some() && !tail_lost {
                r.warnings.push(Note::new(
                    NoteKind::NoDoneMarker,
                    "finish_reason seen, the stream ended without data: [DONE]",
                ));
            }
        }
        if r.finish_reason.as_deref() == Some("length") {
            r.flags.push(Note::flag(NoteKind::TruncatedByMaxTokens));
        }
        if r.error.is_none() {
            if let Some(s) = r.http_status.filter(|&s| s >= 400) {
                r.error = Some(ServeError::http_error(
                    format!("HTTP {s} with an event stream carrying no error"),
                    Some(s),
                ));
            }
        }
        r.truncated =
            r.error.is_none() && (tail_lost || (r.finish_reason.is_none() && !r.done_seen));
        if r.truncated {
            if let Some(why) = r.failure() {
                r.warnings.push(Note::of_failures(&why));
            }
        }
        self.reply
    }
}

/// An error as the serve put it: message and its own type.
struct ErrInfo {
    message: String,
    error_type: Option<String>,
}

/// Finds the serve's error in a JSON object: an `error` member (object or string, with a sibling
/// `error_type`), a vLLM-style `"object": "error"`, or — when `event_error_data` is given (an SSE
/// `event: error`) — the object itself.
fn error_of(obj: &Map<String, Value>, event_error_data: Option<&str>) -> Option<ErrInfo> {
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
fn error_event_info(d: &str) -> ErrInfo {
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
fn classify(
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

/// Choice 0: the element whose `index` is 0, else the first element without an `index`.
fn first_choice(arr: &[Value]) -> Option<&Map<String, Value>> {
    arr.iter()
        .filter_map(Value::as_object)
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or_else(|| {
            arr.iter()
                .filter_map(Value::as_object)
                .find(|c| c.get("index").is_none_or(Value::is_null))
        })
}

fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// `reasoning_content`, or `reasoning` when that is absent or empty (never both: some serves send the same
/// text under both names).
fn reasoning_of(m: &Map<String, Value>) -> &str {
    match str_of(m.get("reasoning_content")) {
        Some(s) if !s.is_empty() => s,
        _ => str_of(m.get("reasoning")).unwrap_or(""),
    }
}

/// `finish_reason` with `""` and non-strings normalised to none.
fn finish_of(choice: &Map<String, Value>) -> Option<String> {
    str_of(choice.get("finish_reason"))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn u64_of(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

fn f64_of(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|f| f.is_finite())
}

fn usage_of(v: &Value) -> Option<Usage> {
    let o = v.as_object()?;
    Some(Usage {
        prompt_tokens: u64_of(o.get("prompt_tokens")),
        completion_tokens: u64_of(o.get("completion_tokens")),
        total_tokens: u64_of(o.get("total_tokens")),
        reasoning_tokens: o
            .get("completion_tokens_details")
            .and_then(|d| u64_of(d.get("reasoning_tokens"))),
    })
}

fn timings_of(v: &Value) -> Option<Timings> {
    let o = v.as_object()?;
    Some(Timings {
        cache_n: u64_of(o.get("cache_n")),
        prompt_n: u64_of(o.get("prompt_n")),
        prompt_ms: f64_of(o.get("prompt_ms")),
        prompt_per_second: f64_of(o.get("prompt_per_second")),
        predicted_n: u64_of(o.get("predicted_n")),
        predicted_ms: f64_of(o.get("predicted_ms")),
        predicted_per_second: f64_of(o.get("predicted_per_second")),
    })
}

fn merge_tool_calls(acc: &mut Vec<ToolCall>, pieces: &[Value]) {
    for (pos, p) in pieces.iter().enumerate() {
        let Some(p) = p.as_object() else { continue };
        let index = u64_of(p.get("index")).unwrap_or(pos as u64);
        let i = match acc.iter().position(|t| t.index == index) {
            Some(i) => i,
            None => {
                acc.push(ToolCall {
                    index,
                    ..Default::default()
                });
                acc.len() - 1
            }
        };
        let Some(tc) = acc.get_mut(i) else { continue };
        if let Some(id) = str_of(p.get("id")).filter(|s| !s.is_empty()) {
            tc.id = Some(id.to_string());
        }
        if let Some(f) = p.get("function").and_then(Value::as_object) {
            if let Some(n) = str_of(f.get("name")).filter(|s| !s.is_empty()) {
                tc.name = Some(n.to_string());
            }
            match f.get("arguments") {
                Some(Value::String(a)) => tc.arguments.push_str(a),
                Some(Value::Null) | None => {}
                Some(other) => tc.arguments.push_str(&other.to_string()),
            }
        }
    }
}

/// Characters of serve text quoted in a message.
const SNIPPET_CHARS: usize = 200;

/// Malformed events described one by one in [`Reply::malformed_events`] (all are counted).
pub const DETAILS_KEPT: usize = 8;

/// Serve text for a message: at most `max` characters, quoted and escaped as a Rust string literal (`"a\"b"`,
/// `"\u{1b}[31m"`, `"\0"`, `"\u{feff}"`), so control bytes never reach a terminal; `…` after the closing quote
/// when cut.
pub fn quoted(s: &str, max: usize) -> String {
    let head: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        format!("{head:?}…")
    } else {
        format!("{head:?}")
    }
}

/// Serve text with control and invisible formatting characters escaped (`\u{1b}`, `\n`, `\u{202e}`) and
/// everything else as it is: for a message quoted in a verdict line.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let invisible = matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}');
        if c.is_control() || invisible {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The first 200 characters of a text, for messages.
fn snippet(s: &str) -> String {
    const MAX: usize = 200;
    let mut out: String = s.chars().take(MAX).collect();
    if s.chars().count() > MAX {
        out.push('…');
    }
    out
}

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
            let message = format!("the response body passed the {} MiB cap; only its first {} bytes were kept and read", crate::io::client::BODY_CAP_BYTES >> 20, rec.body_bytes);
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let r = one("data:{\"error\":\"Input validation error: too long\",\"error_type\":\"validation\"}\n\n");
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
}
