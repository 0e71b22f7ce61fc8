//! A streamed reply (SSE) parsed event by event ([`parse_stream`]): the stream state and its event handling.

use serde_json::{Map, Value};

use super::body::*;
use super::error::*;
use super::fields::*;
use super::finish::*;
use crate::analysis::quote::*;
use crate::analysis::reply_types::*;
use crate::io::reads::TimedRead;
use crate::vocab::{FailureCode, Note, NoteKind};

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
///   (warning `not_an_sse_stream`); one that is no JSON either, not blank, with no line an SSE reader acts
///   on (`data`, `event`, `id`, `retry`, `error`, a comment, a near miss of one) fails
///   `not_an_event_stream` with a 2xx status (or none), named for what it is
///   ([`super::foreign::not_an_event_stream`]: an HTML page with its title, ...), never read as a cut
///   stream; with an error status it is read by [`parse_body`] (the serve's HTTP error, the page named).
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
        let text = String::from_utf8_lossy(&body);
        if !text.trim().is_empty()
            && stats.near_miss_count == 0
            && !super::foreign::has_sse_line(&text)
        {
            // An error status with a page: the serve's HTTP error, its body read as a body.
            if http_status.is_some_and(|s| !(200..300).contains(&s)) {
                return parse_body(&body, http_status, end_ms.unwrap_or(0.0));
            }
            return Reply {
                streamed: true,
                http_status,
                end_ms,
                error: Some(ServeError {
                    kind: FailureCode::NotAnEventStream,
                    message: super::foreign::not_an_event_stream(&body, None),
                    http_status,
                    error_type: None,
                }),
                ..Default::default()
            };
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

/// Tokens in one token chunk by running counter: (from `usage.completion_tokens`, from `timings.predicted_n`).
pub(super) type Deltas = (Option<u64>, Option<u64>);

/// The state of one stream while its events are read.
pub(super) struct StreamState {
    pub(super) reply: Reply,
    /// Running counters seen on any chunk so far: usage.completion_tokens, timings.predicted_n.
    pub(super) prev_usage_ct: u64,
    pub(super) prev_pred_n: u64,
    /// Per token chunk: (usage delta, timings delta), when that chunk carried the counter.
    pub(super) deltas: Vec<Deltas>,
    pub(super) events: usize,
    /// Line and name of the first skipped named event.
    pub(super) first_named: Option<(usize, String)>,
    /// [`TokenChunk::after_ms`] of the events the current read completes.
    pub(super) read_after_ms: Option<f64>,
}

impl StreamState {
    pub(super) fn new(http_status: Option<u16>) -> Self {
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

    pub(super) fn in_200(&self) -> bool {
        self.reply
            .http_status
            .is_none_or(|s| (200..300).contains(&s))
    }

    pub(super) fn set_error(&mut self, e: ErrInfo) {
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
    pub(super) fn error_event(&mut self, line: usize, e: ErrInfo) {
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
    pub(super) fn divergence(&mut self, what: String) {
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
    pub(super) fn malformed(&mut self, line: usize, t_ms: f64, reason: &str, data: &str) {
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
    pub(super) fn after_done(&mut self, after: &[&[u8]]) {
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
    pub(super) fn on_error_field(&mut self, e: &crate::analysis::sse::ErrorField) {
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
    pub(super) fn on_event(
        &mut self,
        event_type: Option<&str>,
        data: &str,
        t_ms: f64,
        line: usize,
    ) {
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
                    self.note_usage_on_finish(obj, choice);
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

    /// A dialect fact: usage on the finish chunk (transformers serve), not on a chunk of its own with
    /// `choices: []` after it (the OpenAI API's `stream_options.include_usage`): flagged once.
    fn note_usage_on_finish(&mut self, obj: &Map<String, Value>, choice: &Map<String, Value>) {
        let finishes = choice.get("finish_reason").is_some_and(|f| !f.is_null());
        if finishes
            && obj.get("usage").is_some_and(|u| !u.is_null())
            && !crate::vocab::has_note(&self.reply.flags, NoteKind::UsageOnFinishChunk)
        {
            self.reply
                .flags
                .push(Note::flag(NoteKind::UsageOnFinishChunk));
        }
    }

    pub(super) fn on_choice(
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

    pub(super) fn finish(
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
