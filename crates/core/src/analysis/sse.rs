//! SSE framing: turns the bytes of a `text/event-stream` body, as they arrive in network reads, into events.
//!
//! Owns the wire format of the WHATWG "server-sent events" spec and nothing above it: it knows lines, fields
//! (`data`, `event`, `id`, `retry`), comments and the blank line that dispatches an event. It does not know
//! JSON, chunks, `[DONE]` or tokens (that is [`crate::analysis::reply`]). Pure: no I/O, no clock; the caller passes each
//! read's arrival time.
//!
//! Rules (spec section "Interpreting an event stream", with what the field has shown us):
//! * Framing is on **bytes**, independent of reads: an event may span reads, a read may hold several events.
//! * A line ends at CRLF, LF or CR. A CR at the end of one read followed by an LF at the start of the next is
//!   **one** line end (the state survives between [`Framer::push`] calls).
//! * Each complete line is decoded as UTF-8 on its own, so a multi-byte character split across reads is
//!   decoded whole. Invalid bytes become U+FFFD and are counted.
//! * `field:value` — exactly one leading space of the value is stripped when present (`data:  x` → `" x"`).
//!   A line without a colon is a field with an empty value. Lines starting with `:` are comments (counted).
//! * Several `data:` lines in one event are joined with `\n`.
//! * A blank line dispatches the event if it has at least one `data` line (spec: otherwise nothing is sent).
//! * **Event time** = `t_ms` of the read that completes the event (the read holding its dispatching line end).
//! * At EOF ([`Framer::finish`]) an event that was started but not dispatched is returned as [`Incomplete`],
//!   never silently dropped. It is **not** an event: the spec says "Once the end of the file is reached, any
//!   pending data must be discarded. (If the file ends in the middle of an event, before the final empty line,
//!   the incomplete event is not dispatched.)" (WHATWG HTML, 9.2.6 "Interpreting an event stream"), and both
//!   OpenAI SDKs agree: openai-python's `SSEDecoder.decode` (`src/openai/_streaming.py`) builds a
//!   `ServerSentEvent` only on an empty line, and openai-node's `SSEDecoder.decode`
//!   (`src/core/streaming.ts`) likewise returns an event only for an empty line, so the last line that
//!   `LineDecoder.flush()` hands it at EOF is buffered and never yielded.
//! * One leading U+FEFF (its three bytes may straddle reads) is stripped ("The UTF-8 decode algorithm strips
//!   one leading UTF-8 Byte Order Mark (BOM), if any"); [`FramerStats::leading_bom`] says so. A BOM anywhere
//!   else is part of the line.
//! * Field names are compared literally ("with no case folding"): ` data:`, `DATA:` or `\u{FEFF}data:` are
//!   unknown fields and ignored, as a client ignores them. Because such a line was almost surely meant to carry
//!   an event, it is recorded as a [`NearMiss`] (line number, what it missed, why) so the reply can fail on
//!   it instead of forgetting it.
//! * Lines are numbered from 1 (a CRLF is one line end); events and near misses carry their line number.
//! * A line whose field name is exactly `error` is no SSE field (a spec client drops it), but llama.cpp
//!   before PR #16109 sent its mid-stream errors that way (`error: {"code":500,...}`, case 32a). The framer
//!   keeps each such line as an [`ErrorField`], in order, for the caller to take with
//!   [`Framer::take_error_fields`] after each push; it is neither an unknown field nor a near miss.
//!
//! Never panics on any input. docs/stream.md lists each rule with its source (WHATWG, web-platform-tests,
//! the OpenAI SDKs) and where the SDKs differ from the spec.

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The `event:` field, if the event had one (e.g. `error`). `None` means the default type `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n` (one leading space stripped from each).
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
    /// Event time: arrival of the read that completed the event, ms since the request was sent.
    pub t_ms: f64,
    /// Line number (from 1) of the event's first field line.
    pub line: usize,
}

/// A line whose field name is not one the spec knows but is `data`, `event` or `error` once byte-order marks
/// and whitespace are removed and letter case is ignored (` data:`, `DATA:`, `\u{FEFF}data:`); see
/// [`near_miss`]. A spec client ignores it; it looked meant to carry part of the reply.
#[derive(Debug, Clone, PartialEq)]
pub struct NearMiss {
    /// Line number, from 1.
    pub line: usize,
    /// The field name as it appeared (may hold U+FEFF, spaces, capitals).
    pub field: String,
    /// The field it looks meant to be: `data`, `event` or `error`.
    pub meant: &'static str,
    /// Why it is not that field: `a byte-order mark (U+FEFF)`, `a leading space`, `letter case`, joined
    /// with `, `.
    pub why: String,
    /// The whole line (decoded), at most [`NEAR_MISS_TEXT_CHARS`] characters.
    pub text: String,
    /// Arrival time of the read that completed the line, ms.
    pub t_ms: f64,
}

/// A raw `error:` line (field name exactly `error`): no SSE field, but a serve's error (see the module rules).
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorField {
    /// The value after `error:` (one leading space stripped), as decoded.
    pub value: String,
    /// Line number, from 1.
    pub line: usize,
    /// Arrival time of the read that completed the line, ms.
    pub t_ms: f64,
}

/// Characters of a near-miss line kept in [`NearMiss::text`].
pub const NEAR_MISS_TEXT_CHARS: usize = 200;

/// Near misses kept in [`FramerStats::near_misses`] (all are counted in `near_miss_count`).
pub const NEAR_MISSES_KEPT: usize = 8;

/// An event that was started but not dispatched when the body ended (EOF inside an event).
#[derive(Debug, Clone, PartialEq)]
pub struct Incomplete {
    /// The `event:` field seen so far.
    pub event: Option<String>,
    /// The `data:` seen so far, joined with `\n`, including a last `data:` line cut by EOF.
    pub data: String,
    /// True when at least one `data:` line (complete or cut) was seen.
    pub has_data: bool,
    /// True when the last line had no line end (EOF in the middle of a line).
    pub cut_line: bool,
    /// Bytes of the stream after the last dispatched event (excluding blank lines and comments before it).
    pub bytes: usize,
    /// Arrival time of the last read, ms.
    pub t_ms: f64,
    /// Line number (from 1) of the event's first field line.
    pub line: usize,
}

/// Counters kept while framing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FramerStats {
    /// Comment lines (`:` ...), e.g. keep-alive pings.
    pub comments: usize,
    /// Lines whose field name is not one of `data`, `event`, `id`, `retry` (ignored, per spec).
    pub unknown_fields: usize,
    /// Events with fields but no `data` line, discarded at their blank line (per spec).
    pub discarded_no_data: usize,
    /// U+FFFD characters produced by decoding invalid UTF-8.
    pub replacement_chars: usize,
    /// Lines that contained invalid UTF-8.
    pub invalid_utf8_lines: usize,
    /// Bytes pushed in total.
    pub bytes: usize,
    /// Lines seen (a cut last line counts once [`Framer::finish`] has run).
    pub lines: usize,
    /// Line number of the first line that contained invalid UTF-8.
    pub first_invalid_utf8_line: Option<usize>,
    /// True when one leading U+FEFF was stripped from the stream.
    pub leading_bom: bool,
    /// The first field name of an unknown-field line (near misses included), as it appeared.
    pub first_unknown_field: Option<String>,
    /// Unknown-field lines that look meant to be a known field (counted in `unknown_fields` too).
    pub near_miss_count: usize,
    /// The first [`NEAR_MISSES_KEPT`] near misses.
    pub near_misses: Vec<NearMiss>,
    /// Raw `error:` lines seen (see [`ErrorField`]).
    pub error_fields: usize,
    /// Events with an `event:` name but no `data` line, discarded at their blank line as the spec says (also
    /// counted in `discarded_no_data`). Both OpenAI SDKs dispatch them with empty data instead.
    pub named_no_data: usize,
    /// Line number and name of the first such event.
    pub first_named_no_data: Option<(usize, String)>,
    /// Blank lines at which openai-python (`SSEDecoder.decode`, `src/openai/_streaming.py`) dispatches an
    /// event with no data and no name, where the spec and openai-node dispatch nothing: its last event id
    /// persists once an `id:` line set it (or a `retry:` line with an integer is pending), so a blank line after
    /// an `id:` line with no `data:` (or an extra blank line anywhere after one) gives an event `""`, which it
    /// then raises parsing as JSON.
    pub py_empty_events: usize,
    /// Line number of the first such blank line.
    pub first_py_empty_event: Option<usize>,
}

/// Incremental SSE framer. Feed reads with [`Framer::push`], then call [`Framer::finish`] once at EOF.
#[derive(Debug, Clone, Default)]
pub struct Framer {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous byte was a CR that ended a line: a following LF belongs to it.
    after_cr: bool,
    /// No line completed yet (a leading BOM is stripped from the first line).
    first_line_done: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    id: Option<String>,
    /// Bytes belonging to the event being built (from its first field line on).
    pending_bytes: usize,
    /// Some field line was seen for the event being built.
    pending_fields: bool,
    /// Line number of the first field line of the event being built.
    pending_line: usize,
    last_t_ms: f64,
    stats: FramerStats,
    /// Raw `error:` lines not yet taken by the caller.
    error_fields: Vec<ErrorField>,
    /// openai-python's decoder state: its last event id is set and not empty (it never resets it).
    py_last_id: bool,
    /// openai-python's decoder state: a `retry:` with an integer value since its last dispatch.
    py_retry: bool,
}

impl Framer {
    /// A framer at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one network read that arrived at `t_ms` (ms since the request was sent). Returns the events this
    /// read completed, each stamped `t_ms`.
    pub fn push(&mut self, bytes: &[u8], t_ms: f64) -> Vec<Event> {
        let mut out = Vec::new();
        let mut rest = bytes;
        self.last_t_ms = t_ms;
        while !rest.is_empty() {
            let (used, ev) = self.push_partial(rest, t_ms);
            rest = &rest[used..];
            out.extend(ev);
        }
        out
    }

    /// Feeds the start of one read, up to and including the line end that dispatches the next event. Returns
    /// the bytes consumed (all of them when no event was completed) and the event, if one was. Lets a caller
    /// stop framing right after an event (e.g. after `data: [DONE]`) with the framer's counters covering only
    /// what came before. Consumes at least one byte of a non-empty input.
    pub fn push_partial(&mut self, bytes: &[u8], t_ms: f64) -> (usize, Option<Event>) {
        self.last_t_ms = t_ms;
        for (i, &b) in bytes.iter().enumerate() {
            self.stats.bytes += 1;
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    // The LF of a CRLF whose CR ended the line (possibly in the previous read).
                    self.pending_bytes += usize::from(self.pending_fields);
                    continue;
                }
            }
            let ev = match b {
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(t_ms)
                }
                b'\n' => self.end_line(t_ms),
                _ => {
                    self.line.push(b);
                    None
                }
            };
            if ev.is_some() {
                return (i + 1, ev);
            }
        }
        (bytes.len(), None)
    }

    /// Ends the stream. Returns the started-but-undispatched event, if any (EOF inside an event). Per spec the
    /// caller must not treat it as a dispatched event; it is reported so truncation is visible.
    pub fn finish(&mut self) -> Option<Incomplete> {
        let cut = std::mem::take(&mut self.line);
        let cut_len = cut.len();
        let mut data = std::mem::take(&mut self.data);
        let mut has_data = self.has_data;
        let mut event = self.event.take();
        let mut started = self.pending_fields;
        let mut bytes = self.pending_bytes;
        let mut cut_line = false;
        let mut line = self.pending_line;
        if cut_len > 0 {
            self.stats.lines += 1;
            let text = self.decode(cut);
            if !started {
                line = self.stats.lines;
            }
            if text.starts_with(':') {
                // A cut comment is still a comment; nothing of an event.
                self.stats.comments += 1;
            } else {
                started = true;
                cut_line = true;
                bytes += cut_len;
                let (field, value) = split_field(&text);
                match field {
                    "data" => {
                        data.push_str(value);
                        data.push('\n');
                        has_data = true;
                    }
                    "event" => event = Some(value.to_string()),
                    "id" | "retry" => {}
                    "error" => {
                        let line_no = self.stats.lines;
                        self.error_field(value, line_no, self.last_t_ms);
                    }
                    other => {
                        let other = other.to_string();
                        let line_no = self.stats.lines;
                        self.unknown_field(&other, &text, line_no, self.last_t_ms);
                    }
                }
            }
        }
        if data.ends_with('\n') {
            data.pop();
        }
        let t_ms = self.last_t_ms;
        self.reset_event();
        started.then_some(Incomplete {
            event,
            data,
            has_data,
            cut_line,
            bytes,
            t_ms,
            line,
        })
    }

    /// The raw `error:` lines completed since the last call, in order (at most [`NEAR_MISSES_KEPT`] are
    /// kept between calls; all are counted in [`FramerStats::error_fields`]).
    pub fn take_error_fields(&mut self) -> Vec<ErrorField> {
        std::mem::take(&mut self.error_fields)
    }

    /// Counters so far (comments, invalid UTF-8, ...).
    pub fn stats(&self) -> &FramerStats {
        &self.stats
    }

    fn decode(&mut self, mut line: Vec<u8>) -> String {
        if !self.first_line_done {
            self.first_line_done = true;
            if line.starts_with(&[0xEF, 0xBB, 0xBF]) {
                line.drain(..3);
                self.stats.leading_bom = true;
            }
        }
        match String::from_utf8(line) {
            Ok(s) => s,
            Err(e) => {
                let bytes = e.into_bytes();
                let valid_fffd = bytes
                    .windows(3)
                    .filter(|w| *w == [0xEF, 0xBF, 0xBD])
                    .count();
                let s = String::from_utf8_lossy(&bytes).into_owned();
                let total = s.chars().filter(|&c| c == '\u{FFFD}').count();
                self.stats.replacement_chars += total.saturating_sub(valid_fffd);
                self.stats.invalid_utf8_lines += 1;
                self.stats
                    .first_invalid_utf8_line
                    .get_or_insert(self.stats.lines);
                s
            }
        }
    }

    fn end_line(&mut self, t_ms: f64) -> Option<Event> {
        let raw = std::mem::take(&mut self.line);
        let raw_len = raw.len();
        self.stats.lines += 1;
        let text = self.decode(raw);
        if text.is_empty() {
            // What openai-python does with this blank line: it dispatches when it has a name, data, a last
            // event id or a retry (`SSEDecoder.decode`); an event with neither data nor a name is its own.
            let py_name = self.event.as_deref().is_some_and(|e| !e.is_empty());
            if py_name || self.has_data || self.py_last_id || self.py_retry {
                if !py_name && !self.has_data {
                    self.stats.py_empty_events += 1;
                    self.stats
                        .first_py_empty_event
                        .get_or_insert(self.stats.lines);
                }
                self.py_retry = false;
            }
            let mut out = None;
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                if data.ends_with('\n') {
                    data.pop();
                }
                out = Some(Event {
                    event: self.event.take(),
                    data,
                    id: self.id.take(),
                    t_ms,
                    line: self.pending_line,
                });
            } else if self.pending_fields {
                self.stats.discarded_no_data += 1;
                if let Some(name) = &self.event {
                    self.stats.named_no_data += 1;
                    if self.stats.first_named_no_data.is_none() {
                        self.stats.first_named_no_data = Some((self.pending_line, name.clone()));
                    }
                }
            }
            self.reset_event();
            return out;
        }
        if text.starts_with(':') {
            self.stats.comments += 1;
            return None;
        }
        if !self.pending_fields {
            self.pending_line = self.stats.lines;
        }
        self.pending_fields = true;
        self.pending_bytes += raw_len + 1;
        let (field, value) = split_field(&text);
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" => {
                if !value.contains('\0') {
                    self.id = Some(value.to_string());
                    self.py_last_id = !value.is_empty();
                }
            }
            "retry" => {
                // Python's `int(value)`: optional sign, digits with single underscores, surrounding spaces.
                let v = value.trim();
                let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
                if !digits.is_empty()
                    && digits.chars().all(|c| c.is_ascii_digit() || c == '_')
                    && !digits.starts_with('_')
                    && !digits.ends_with('_')
                    && !digits.contains("__")
                {
                    self.py_retry = true;
                }
            }
            "error" => {
                let line_no = self.stats.lines;
                self.error_field(value, line_no, t_ms);
            }
            other => {
                let other = other.to_string();
                let line_no = self.stats.lines;
                self.unknown_field(&other, &text, line_no, t_ms);
            }
        }
        None
    }

    /// Keeps a raw `error:` line for the caller.
    fn error_field(&mut self, value: &str, line: usize, t_ms: f64) {
        self.stats.error_fields += 1;
        if self.error_fields.len() < NEAR_MISSES_KEPT {
            self.error_fields.push(ErrorField {
                value: value.to_string(),
                line,
                t_ms,
            });
        }
    }

    /// Counts an unknown-field line and records it when it is a near miss of a known field.
    fn unknown_field(&mut self, field: &str, text: &str, line: usize, t_ms: f64) {
        self.stats.unknown_fields += 1;
        if self.stats.first_unknown_field.is_none() {
            self.stats.first_unknown_field = Some(field.to_string());
        }
        if let Some((meant, why)) = near_miss(field) {
            self.stats.near_miss_count += 1;
            if self.stats.near_misses.len() < NEAR_MISSES_KEPT {
                self.stats.near_misses.push(NearMiss {
                    line,
                    field: field.to_string(),
                    meant,
                    why,
                    text: text.chars().take(NEAR_MISS_TEXT_CHARS).collect(),
                    t_ms,
                });
            }
        }
    }

    fn reset_event(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.event = None;
        self.id = None;
        self.pending_bytes = 0;
        self.pending_fields = false;
        self.pending_line = 0;
    }
}

/// The field an unknown field name looks meant to be, and why it is not: `Some(("data", "a leading
/// space"))` for `" data"`. Removes U+FEFF and whitespace and ignores letter case; `None` when the name is
/// then none of `data`, `event`, `error` — the fields that carry part of a reply (`error` is no SSE field,
/// but a serve that writes `error: {...}` means an error, see case 32). A misnamed `id` or `retry` loses
/// nothing of the reply and is only an unknown field.
pub fn near_miss(field: &str) -> Option<(&'static str, String)> {
    let bare: String = field
        .chars()
        .filter(|&c| c != '\u{FEFF}' && !c.is_whitespace())
        .collect();
    let folded = bare.to_lowercase();
    let meant = ["data", "event", "error"]
        .into_iter()
        .find(|k| *k == folded)?;
    if meant == field && meant != "error" {
        return None;
    }
    let mut why = Vec::new();
    if field.contains('\u{FEFF}') {
        why.push("a byte-order mark (U+FEFF)");
    }
    let trimmed = field.trim_matches(|c: char| c == '\u{FEFF}');
    if trimmed.starts_with(char::is_whitespace) {
        why.push("a leading space");
    }
    if trimmed.trim_start().contains(char::is_whitespace) {
        why.push("a space in the name");
    }
    if bare != meant {
        why.push("letter case (field names are case-sensitive)");
    }
    if why.is_empty() {
        // `error` itself: no SSE field at all.
        why.push("not an SSE field");
    }
    Some((meant, why.join(", ")))
}

/// Splits `field:value`, stripping exactly one leading space from the value. No colon: the whole line is the
/// field name and the value is empty.
fn split_field(line: &str) -> (&str, &str) {
    match line.find(':') {
        Some(i) => {
            let field = &line[..i];
            let rest = &line[i + 1..];
            (field, rest.strip_prefix(' ').unwrap_or(rest))
        }
        None => (line, ""),
    }
}

/// Frames a whole body given as timed reads: all dispatched events, the incomplete tail (if any) and the
/// counters. Convenience over [`Framer`].
pub fn frame_all<'a, I>(reads: I) -> (Vec<Event>, Option<Incomplete>, FramerStats)
where
    I: IntoIterator<Item = (&'a [u8], f64)>,
{
    let mut f = Framer::new();
    let mut events = Vec::new();
    for (bytes, t) in reads {
        events.extend(f.push(bytes, t));
    }
    let tail = f.finish();
    (events, tail, f.stats().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(parts: &[&[u8]]) -> (Vec<Event>, Option<Incomplete>, FramerStats) {
        frame_all(parts.iter().enumerate().map(|(i, p)| (*p, i as f64 * 10.0)))
    }

    fn datas(ev: &[Event]) -> Vec<&str> {
        ev.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn data_without_space_and_with_two_spaces_strip_exactly_one() {
        let (ev, tail, _) = frame(&[b"data:x\n\ndata: y\n\ndata:  z\n\n"]);
        assert_eq!(datas(&ev), ["x", "y", " z"]);
        assert!(tail.is_none());
    }

    #[test]
    fn crlf_lf_and_cr_line_ends_frame_the_same_events() {
        for body in [
            &b"data: a\r\n\r\ndata: b\r\n\r\n"[..],
            b"data: a\n\ndata: b\n\n",
            b"data: a\r\rdata: b\r\r",
        ] {
            let (ev, tail, _) = frame(&[body]);
            assert_eq!(
                datas(&ev),
                ["a", "b"],
                "{:?}",
                String::from_utf8_lossy(body)
            );
            assert!(tail.is_none());
        }
    }

    #[test]
    fn cr_at_end_of_read_and_lf_at_start_of_next_is_one_line_end() {
        let (ev, tail, _) = frame(&[b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(datas(&ev), ["a", "b"]);
        // "a" is completed by the second CR, which arrived in the second read (t = 10).
        assert_eq!(ev[0].t_ms, 10.0);
        assert!(tail.is_none());
    }

    #[test]
    fn event_is_stamped_with_the_read_that_completes_it() {
        let (ev, _, _) = frame(&[b"data: one\n\ndata: tw", b"o\n", b"\n"]);
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].t_ms, 0.0);
        assert_eq!(ev[1].t_ms, 20.0);
        assert_eq!(ev[1].data, "two");
    }

    #[test]
    fn multi_line_data_is_joined_with_newline() {
        let (ev, _, _) = frame(&[b"data: a\ndata:\ndata: c\n\n"]);
        assert_eq!(datas(&ev), ["a\n\nc"]);
    }

    #[test]
    fn comments_are_counted_and_not_events() {
        let (ev, tail, st) = frame(&[b":\n\n: ping - 2024\n\ndata: x\n\n"]);
        assert_eq!(datas(&ev), ["x"]);
        assert_eq!(st.comments, 2);
        assert!(tail.is_none());
    }

    #[test]
    fn event_field_is_read() {
        let (ev, _, _) = frame(&[b"event: error\ndata: {\"a\":1}\n\n"]);
        assert_eq!(ev[0].event.as_deref(), Some("error"));
        assert_eq!(ev[0].data, "{\"a\":1}");
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let (ev, _, st) = frame(&[b"event: ping\n\ndata: x\n\nid: 3\n\n"]);
        assert_eq!(datas(&ev), ["x"]);
        assert_eq!(ev[0].event, None);
        assert_eq!(st.discarded_no_data, 2);
        assert_eq!(st.named_no_data, 1);
        assert_eq!(st.first_named_no_data, Some((1, "ping".to_string())));
    }

    #[test]
    fn utf8_character_split_across_reads_is_decoded_whole() {
        let s = "data: é€\n\n".as_bytes();
        // split inside 'é' (2 bytes) and inside '€' (3 bytes)
        let (ev, _, st) = frame(&[&s[..7], &s[7..9], &s[9..]]);
        assert_eq!(datas(&ev), ["é€"]);
        assert_eq!(st.replacement_chars, 0);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_and_is_counted() {
        let (ev, _, st) = frame(&[b"data: a\xFFb\n\n"]);
        assert_eq!(datas(&ev), ["a\u{FFFD}b"]);
        assert_eq!(st.replacement_chars, 1);
        assert_eq!(st.invalid_utf8_lines, 1);
    }

    #[test]
    fn eof_inside_event_is_reported_with_partial_data() {
        let (ev, tail, _) = frame(&[b"data: a\n\ndata: {\"cr"]);
        assert_eq!(datas(&ev), ["a"]);
        let tail = tail.expect("incomplete tail");
        assert!(tail.cut_line);
        assert!(tail.has_data);
        assert_eq!(tail.data, "{\"cr");
    }

    #[test]
    fn eof_after_data_line_without_blank_line_is_incomplete_but_whole_line() {
        let (ev, tail, _) = frame(&[b"data: [DONE]\n"]);
        assert!(ev.is_empty());
        let tail = tail.expect("tail");
        assert!(!tail.cut_line);
        assert_eq!(tail.data, "[DONE]");
    }

    #[test]
    fn trailing_blank_lines_and_comments_leave_no_tail() {
        let (_, tail, _) = frame(&[b"data: a\n\n\n\n: bye\n"]);
        assert!(tail.is_none());
        let (_, tail, _) = frame(&[b"data: a\n\n: cut comm"]);
        assert!(tail.is_none());
    }

    #[test]
    fn leading_bom_is_stripped() {
        let (ev, _, _) = frame(&[b"\xEF\xBB\xBFdata: a\n\n"]);
        assert_eq!(datas(&ev), ["a"]);
    }

    #[test]
    fn line_without_colon_is_a_field_with_empty_value() {
        let (ev, _, st) = frame(&[b"data\n\nfoo\ndata: b\n\n"]);
        assert_eq!(datas(&ev), ["", "b"]);
        assert_eq!(st.unknown_fields, 1);
    }

    #[test]
    fn id_and_retry_fields_are_known_and_an_id_with_nul_is_ignored() {
        let (ev, _, st) = frame(&[b"id: 7\nretry: 100\ndata: x\n\nid: a\0b\ndata: y\n\n"]);
        assert_eq!(ev[0].id.as_deref(), Some("7"));
        assert_eq!(ev[1].id, None);
        assert_eq!(st.unknown_fields, 0);
    }

    #[test]
    fn bytes_are_counted_and_a_tail_reports_its_own_bytes() {
        let (_, tail, st) = frame(&[b"data: a\n\n", b"data: {\"cr"]);
        assert_eq!(st.bytes, 19);
        // Only the bytes after the last dispatched event: `data: {"cr` is 10 bytes.
        assert_eq!(tail.expect("tail").bytes, 10);
        // A CRLF line counts both line-end bytes, even when the CR and the LF arrive in different reads.
        let body = b"data: a\r\ndata: {\"x";
        for split in [0, 8, 9] {
            let (_, tail, _) = frame(&[&body[..split], &body[split..]]);
            assert_eq!(tail.expect("tail").bytes, body.len(), "split at {split}");
        }
    }

    #[test]
    fn cut_lines_at_eof_keep_their_field() {
        // A cut `event:` line still names the event of the incomplete tail.
        let (_, tail, _) = frame(&[b"data: {}\nevent: err"]);
        let tail = tail.expect("tail");
        assert_eq!(tail.event.as_deref(), Some("err"));
        assert!(tail.has_data && tail.cut_line);
        // A cut comment is counted like any comment.
        let (_, tail, st) = frame(&[b": one\n\ndata: a\n\n: cut comm"]);
        assert!(tail.is_none());
        assert_eq!(st.comments, 2);
    }

    #[test]
    fn a_leading_bom_split_across_reads_is_stripped_once_and_said() {
        let (ev, _, st) = frame(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]);
        assert_eq!(datas(&ev), ["a"]);
        assert!(st.leading_bom);
        assert_eq!(st.replacement_chars, 0);
        assert!(st.near_misses.is_empty());
        let (_, _, st) = frame(&[b"data: a\n\n"]);
        assert!(!st.leading_bom);
    }

    #[test]
    fn misnamed_data_lines_are_ignored_as_the_spec_says_and_recorded() {
        let (ev, _, st) = frame(&[
            b"data: a\n\n data: b\n\nDATA: c\n\n\xEF\xBB\xBFdata: d\n\nfoo: e\n\nid : 1\n\n",
        ]);
        assert_eq!(datas(&ev), ["a"]);
        assert_eq!(st.unknown_fields, 5);
        assert_eq!(st.near_miss_count, 3);
        assert_eq!(st.first_unknown_field.as_deref(), Some(" data"));
        let got: Vec<(usize, &str, &str)> = st
            .near_misses
            .iter()
            .map(|m| (m.line, m.meant, m.why.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (3, "data", "a leading space"),
                (5, "data", "letter case (field names are case-sensitive)"),
                (7, "data", "a byte-order mark (U+FEFF)"),
            ]
        );
        assert_eq!(st.near_misses[0].text, " data: b");
        assert_eq!(
            near_miss("error"),
            Some(("error", "not an SSE field".into()))
        );
        assert_eq!(near_miss("foo"), None);
        // A known field is no near miss, nor is a misnamed `id` (it carries nothing of the reply).
        assert_eq!(near_miss("data"), None);
        assert_eq!(near_miss("id "), None);
        assert_eq!(
            near_miss("da ta"),
            Some(("data", "a space in the name".into()))
        );
    }

    #[test]
    fn events_and_tails_carry_their_first_line() {
        let (ev, tail, _) = frame(&[b": hi\n\nevent: x\ndata: a\n\ndata: b\r\n\r\ndata: {\"c"]);
        assert_eq!(ev.iter().map(|e| e.line).collect::<Vec<_>>(), [3, 6]);
        assert_eq!(tail.expect("tail").line, 8);
    }

    #[test]
    fn push_partial_stops_right_after_an_event() {
        let mut f = Framer::new();
        let body = b"data: a\r\n\r\ndata: b\n\n";
        let (used, ev) = f.push_partial(body, 1.0);
        assert_eq!(ev.expect("event").data, "a");
        // Dispatched by the CR of the blank line; its LF is still to come.
        assert_eq!(used, 10);
        assert_eq!(f.stats().bytes, 10);
        let (used2, ev) = f.push_partial(&body[used..], 2.0);
        assert_eq!(ev.expect("event").data, "b");
        assert_eq!(used + used2, body.len());
        assert_eq!(f.push_partial(b"data: c", 3.0), (7, None));
    }

    #[test]
    fn raw_error_lines_are_kept_in_order_and_are_no_unknown_field() {
        let mut f = Framer::new();
        let (used, ev) = f.push_partial(b"data: a\n\nerror: {\"message\":\"x\"}\n\n", 5.0);
        assert_eq!(ev.expect("event").data, "a");
        assert!(f.take_error_fields().is_empty());
        let _ = f.push(&b"data: a\n\nerror: {\"message\":\"x\"}\n\n"[used..], 7.0);
        let got = f.take_error_fields();
        assert_eq!(
            got,
            [ErrorField {
                value: "{\"message\":\"x\"}".into(),
                line: 3,
                t_ms: 7.0
            }]
        );
        assert!(f.take_error_fields().is_empty(), "taken once");
        // A cut `error:` line at EOF is kept too; ` error:` and `ERROR:` stay near misses.
        let _ = f.push(b" error: y\nERROR: z\nerror: cut", 9.0);
        let _ = f.finish();
        let st = f.stats();
        assert_eq!(
            (st.error_fields, st.near_miss_count, st.unknown_fields),
            (2, 2, 2)
        );
        assert_eq!(f.take_error_fields()[0].value, "cut");
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut f = Framer::new();
        let junk: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        for c in junk.chunks(7) {
            let _ = f.push(c, 1.0);
        }
        let _ = f.finish();
    }
}
