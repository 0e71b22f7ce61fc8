//! `servegate inspect FILE`: one response, parsed and measured, as JSON a person can read and a script can
//! check. Pure apart from [`inspect_file`], which reads the one file.
//!
//! Inputs, by file name:
//! * `*.reads.jsonl` — timed network reads (the evidence format, [`crate::io::reads`]): times are real, so TTFT
//!   and the decode rate are the ones a live run would measure;
//! * `*.http` — a raw HTTP/1.1 response (status line, headers, blank line, body; a `chunked` body is
//!   de-chunked): an event stream when `Content-Type` says `text/event-stream`, else a JSON body, with the
//!   response's status;
//! * `*.json` — a non-streamed JSON body;
//! * anything else (`*.sse`) — raw SSE bytes, all of them in one read at t = 0 (so every event time is 0 and
//!   no decode rate can be measured); a file that holds one JSON document is read as a body.
//!
//! The HTTP status is unknown (`null`) for everything but `.http`.
//!
//! The output is `{file, input, summary, figures, reply}`: [`Summary`] first, in the vocabulary of the case
//! files' `*.expected.json` (`ttft_ms`, `decode_tok_s`, `completion_tokens`, `completion_tokens_source`,
//! `content`, `reasoning`, `finish_reason`, `done_seen`, `chunks`, `empty_chunks`, `comments_ignored`,
//! `parse_errors`, `warnings`, `flags`, `ok`, `fail_reason`, ...), then the full [`Figures`] and [`Reply`].

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::measure::{measure, Figures, TokenSource};
use crate::analysis::reply::{parse_body, parse_stream, Reply, ServeError, Timings, Usage};
use crate::analysis::stats;
use crate::io::reads;

/// How the input file was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    /// `.reads.jsonl`: timed reads.
    Reads,
    /// Raw SSE bytes in one read at t = 0.
    Sse,
    /// A raw HTTP response.
    Http,
    /// A JSON body.
    Json,
    /// A serve log (`*.log`), read as the route judge reads it ([`inspect_log`]).
    Log,
}

/// Inter-token latency in brief: gaps between consecutive token chunks, ms (see [`Figures::itl_ms`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ItlSummary {
    /// Number of gaps (token chunks − 1).
    pub n: usize,
    /// Median gap (`stats::median`), ms.
    pub p50_ms: Option<f64>,
    /// 90th percentile (`stats::percentile`, linear), ms.
    pub p90_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Largest gap, ms.
    pub max_ms: Option<f64>,
}

/// The readable summary of one reply. Key names are those of the case files' `expected` objects wherever
/// a case states the value, so `summary[key] == expected[key]` checks a case from outside the test suite
/// (with `warnings`/`flags` checked by name against `notes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The reply-level verdict: true when the judge's `content` assertion would accept this reply
    /// (`judge::content_problem` is none: no serve error, not truncated, content neither empty nor
    /// degenerate). Timing bounds are a gate's, not a reply's, and are not judged here.
    pub ok: bool,
    /// When not ok, the failure's name: the serve error's kind (`context_exceeded`, `validation_error`,
    /// `error_mid_stream`, `error_in_stream`, `http_status`, ...), `truncated_stream`/`truncated_body`,
    /// `unparseable_body`, `malformed_event` (an event an SSE client would raise on: broken JSON, empty data,
    /// ...), `misnamed_field` (a ` data:`/`DATA:`/BOM line a client ignores), `invalid_utf8`,
    /// `content_empty_all_tokens_in_reasoning`, `content_empty`,
    /// `content_whitespace_only` or `degenerate_output`.
    pub fail_reason: Option<String>,
    /// When not ok, the judge's own reason text for this reply.
    pub fail_detail: Option<String>,
    /// HTTP status (only known for `.http` input).
    pub http_status: Option<u16>,
    /// The serve's own error type (`error.type` / `error_type`), verbatim.
    pub error_type: Option<String>,
    /// The serve's error: kind, message, status, type.
    pub error: Option<ServeError>,
    /// The serve's error message alone (`error.message`), as the case files name it.
    pub error_message: Option<String>,
    /// True when parsed as an SSE stream (false: a JSON body).
    pub streamed: bool,
    /// First data event of any kind (a role-only chunk counts), ms. Not TTFT.
    pub first_event_ms: Option<f64>,
    /// TTFT: the first token chunk (content, reasoning or tool call), ms. Null for a failed reply (its
    /// partial figures are no figures; `first_token_ms` keeps the evidence).
    pub ttft_ms: Option<f64>,
    /// Arrival of the first token chunk as read, ms, failed reply or not: evidence, not a figure.
    pub first_token_ms: Option<f64>,
    /// First non-empty content (after any reasoning), ms.
    pub first_content_ms: Option<f64>,
    /// End to end: the last read, ms.
    pub e2e_ms: Option<f64>,
    /// Decode rate, tok/s, first arrival excluded; null when not measurable (then `decode_note` says why).
    pub decode_tok_s: Option<f64>,
    /// How the decode rate was obtained when not plain (estimate, multi-token share, batched first read), or
    /// why there is none.
    pub decode_note: Option<String>,
    /// True when chunks carried more than one token.
    pub multi_token: bool,
    /// N as the serve reported it (usage, timings or per-chunk counts); null when it did not say.
    pub completion_tokens: Option<u64>,
    /// The token-chunk count, when the serve reported no token count (an estimate: chunks are not tokens).
    pub completion_tokens_estimate: Option<u64>,
    /// Where N came from: `usage`, `timings`, `per_chunk` or `token_chunk_count_estimate`.
    pub completion_tokens_source: Option<TokenSource>,
    /// `usage.completion_tokens_details.reasoning_tokens`: the part of N spent thinking (a breakdown, never
    /// added to N). Shown only when the serve reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// TPOT = (e2e − ttft) / (N − 1), ms.
    pub tpot_ms: Option<f64>,
    /// Inter-token latency distribution.
    pub itl: ItlSummary,
    /// Concatenated content.
    pub content: String,
    /// Concatenated reasoning (`reasoning_content` / `reasoning`).
    pub reasoning: String,
    /// Tool calls assembled (their pieces are in `reply.tool_calls`).
    pub tool_calls: usize,
    /// The final finish_reason; null when none was seen.
    pub finish_reason: Option<String>,
    /// `data: [DONE]` seen.
    pub done_seen: bool,
    /// The stream (or body) ended too early: no finish_reason and no `[DONE]`, or cut inside an event.
    pub truncated: bool,
    /// The body ended inside an SSE event (or inside its JSON).
    pub incomplete_tail: bool,
    /// Parsed data chunks, excluding `[DONE]` and comments.
    pub chunks: usize,
    /// Token chunks (content, reasoning or tool-call deltas).
    pub token_chunks: usize,
    /// Chunks with a choice that carried no token and no finish_reason (role-only, prefill `""`).
    pub empty_chunks: usize,
    /// SSE comment lines (`: ping`) ignored.
    pub comments_ignored: usize,
    /// Named SSE events (not `message`, not `error`) that carried no chat chunk, skipped (docs/stream.md).
    pub named_events_ignored: usize,
    /// True when a benchmark record with rates may come from this reply: it passed and has a decode rate
    /// (never for a failed reply, whose partial content is evidence only).
    pub publish_record: bool,
    /// Number of parse errors (their reasons are in `parse_error_messages`).
    pub parse_errors: usize,
    /// Each parse error with its reason.
    pub parse_error_messages: Vec<String>,
    /// U+FFFD characters produced by invalid UTF-8.
    pub replacement_chars: usize,
    /// The last non-null `usage`.
    pub usage: Option<Usage>,
    /// llama.cpp `timings`, as sent.
    pub timings: Option<Timings>,
    /// `timings.prompt_per_second` as llama.cpp computed it, tok/s.
    pub timings_prompt_per_second: Option<f64>,
    /// `timings.predicted_per_second` as llama.cpp computed it, tok/s.
    pub timings_predicted_per_second: Option<f64>,
    /// The serve's decode rate as servegate reads it (`Figures::server_decode_tok_s`), tok/s.
    pub server_decode_tok_s: Option<f64>,
    /// The serve's prefill rate (`Figures::server_prefill_tok_s`), tok/s; null on a prompt-cache hit.
    pub server_prefill_tok_s: Option<f64>,
    /// True when a prefill rate was measured (no prompt-cache hit).
    pub prefill_measured: bool,
    /// `timings.cache_n`: prompt tokens served from the cache.
    pub cache_n: Option<u64>,
    /// `timings.prompt_n`: prompt tokens processed.
    pub prompt_n: Option<u64>,
    /// Warnings, `name` or `name: detail`: the parser's, then the measurements'.
    pub warnings: Vec<String>,
    /// Flags, `name` or `name: detail`: the parser's, then `multi_token` when the figures say so.
    pub flags: Vec<String>,
    /// Every warning and flag by name (the text before `:` or a space), sorted, once each.
    pub notes: Vec<String>,
    /// `model` as the serve named it.
    pub model: Option<String>,
    /// The model the request asked for (`inspect --model`), when given: identity is then judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_model: Option<String>,
    /// The ids the serve's `/v1/models` lists (`inspect --models`), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_models: Option<Vec<String>>,
    /// The reply's `model` field when identity is judged (the case files' name for it): it only echoes the
    /// request, so it is shown and never taken as the served model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    /// `system_fingerprint` (llama.cpp's build).
    pub system_fingerprint: Option<String>,
}

/// The reply-level verdict: `None` when ok, else (failure name, the judge's reason text).
pub(crate) fn reply_failure(reply: &Reply, figures: &Figures) -> Option<(String, String)> {
    let (kind, detail) = crate::judge::reply_problem(reply, figures)?;
    Some((kind.name().to_string(), detail))
}

/// The summary of one reply and its figures (see [`Summary`]).
pub fn summarize(reply: &Reply, figures: &Figures) -> Summary {
    let failure = reply_failure(reply, figures);
    let publish_record = failure.is_none() && figures.decode_tok_s.is_some();
    let warnings: Vec<String> = reply
        .warnings
        .iter()
        .chain(&figures.warnings)
        .map(|n| n.to_string())
        .collect();
    // The one list of dialect notes, as run.json keeps them per request.
    let notes = crate::analysis::dialect::note_names(reply, figures);
    let mut flags: Vec<String> = reply.flags.iter().map(|n| n.to_string()).collect();
    if figures.multi_token {
        flags.push("multi_token".into());
    }
    let itl = &figures.itl_ms;
    let timings = reply.timings.as_ref();
    Summary {
        ok: failure.is_none(),
        fail_reason: failure.as_ref().map(|f| f.0.clone()),
        fail_detail: failure.map(|f| f.1),
        http_status: reply.http_status,
        error_type: reply.error.as_ref().and_then(|e| e.error_type.clone()),
        error: reply.error.clone(),
        error_message: reply.error.as_ref().map(|e| e.message.clone()),
        streamed: reply.streamed,
        first_event_ms: figures.first_event_ms,
        ttft_ms: figures.ttft_ms,
        first_token_ms: reply.token_chunks.first().map(|c| c.t_ms),
        first_content_ms: figures.first_content_ms,
        e2e_ms: figures.e2e_ms,
        decode_tok_s: figures.decode_tok_s,
        decode_note: figures.decode_note.clone(),
        multi_token: figures.multi_token,
        completion_tokens: figures.completion_tokens,
        completion_tokens_estimate: figures.completion_tokens_estimate,
        completion_tokens_source: figures.completion_tokens_source,
        reasoning_tokens: reply.usage.as_ref().and_then(|u| u.reasoning_tokens),
        tpot_ms: figures.tpot_ms,
        itl: ItlSummary {
            n: itl.len(),
            p50_ms: stats::median(itl),
            p90_ms: stats::percentile(itl, 90.0),
            p99_ms: stats::percentile(itl, 99.0),
            max_ms: stats::max(itl),
        },
        content: reply.content.clone(),
        reasoning: reply.reasoning.clone(),
        tool_calls: reply.tool_calls.len(),
        finish_reason: reply.finish_reason.clone(),
        done_seen: reply.done_seen,
        truncated: reply.truncated,
        incomplete_tail: reply.incomplete_tail,
        chunks: reply.chunks,
        token_chunks: reply.token_chunks.len(),
        empty_chunks: reply.empty_chunks,
        comments_ignored: reply.comments_ignored,
        named_events_ignored: reply.named_events_ignored,
        publish_record,
        parse_errors: reply.parse_errors.len(),
        parse_error_messages: reply.parse_errors.clone(),
        replacement_chars: reply.replacement_chars,
        usage: reply.usage.clone(),
        timings: reply.timings.clone(),
        timings_prompt_per_second: timings.and_then(|t| t.prompt_per_second),
        timings_predicted_per_second: timings.and_then(|t| t.predicted_per_second),
        server_decode_tok_s: figures.server_decode_tok_s,
        server_prefill_tok_s: figures.server_prefill_tok_s,
        prefill_measured: figures.server_prefill_tok_s.is_some(),
        cache_n: timings.and_then(|t| t.cache_n),
        prompt_n: timings.and_then(|t| t.prompt_n),
        warnings,
        flags,
        notes,
        model: reply.model.clone(),
        system_fingerprint: reply.system_fingerprint.clone(),
        requested_model: None,
        served_models: None,
        response_model: None,
    }
}

/// What `servegate inspect` may know besides the response: the model the request asked for and the ids the
/// serve's `/v1/models` listed (as `servegate run` records them in `run.json` `serve.models`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    /// The request's `model` (`--model`).
    pub requested_model: Option<String>,
    /// The serve's `/v1/models` ids (`--models FILE`).
    pub served_models: Option<Vec<String>>,
}

/// Judges the reply's identity into `s` when both the requested model and the served list are known
/// ([`crate::analysis::reply::identity_problem`], case 36): a model the serve does not list fails the reply
/// `model_not_served` (its figures are no figures: TTFT and decode rate null, no record), and a reply whose
/// `model` is the asked name is flagged `response_model_echoes_request`. An earlier failure keeps its reason.
pub fn apply_identity(s: &mut Summary, id: &Identity) {
    s.requested_model = id.requested_model.clone();
    s.served_models = id.served_models.clone();
    let (Some(asked), Some(listed)) = (&id.requested_model, &id.served_models) else {
        return;
    };
    s.response_model = s.model.clone();
    let Some((code, detail, echoes)) =
        crate::analysis::reply::identity_problem(asked, listed, s.model.as_deref())
    else {
        return;
    };
    if echoes {
        let n = crate::vocab::NoteKind::ResponseModelEchoesRequest
            .name()
            .to_string();
        s.flags.push(n.clone());
        s.notes.push(n);
        s.notes.sort();
        s.notes.dedup();
    }
    if s.ok {
        s.ok = false;
        s.fail_reason = Some(code.name().to_string());
        s.fail_detail = Some(format!("{code}: {detail}"));
    }
    s.ttft_ms = None;
    s.decode_tok_s = None;
    s.publish_record = false;
}

/// The model ids of a `/v1/models` answer: a JSON body (`data[].id`, OpenAI's list) or a `*.polls.jsonl`
/// (its `GET /v1/models` poll with status 200, the case files' format). Errors say what is missing.
pub fn served_models_of(name: &str, bytes: &[u8]) -> Result<Vec<String>, String> {
    let text = String::from_utf8_lossy(bytes);
    let ids = |body: &str| -> Result<Vec<String>, String> {
        let v: Value =
            serde_json::from_str(body).map_err(|e| format!("not a /v1/models body: {e}"))?;
        let data = v["data"]
            .as_array()
            .ok_or("a /v1/models body without a `data` list")?;
        Ok(data
            .iter()
            .filter_map(|m| m["id"].as_str().map(String::from))
            .collect())
    };
    if !name.ends_with(".jsonl") {
        return ids(&text);
    }
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        let path = v["path"].as_str().unwrap_or("");
        if matches!(path, "/v1/models" | "/models") && v["status"].as_u64() == Some(200) {
            return ids(v["body"].as_str().unwrap_or(""))
                .map_err(|e| format!("line {}: {e}", i + 1));
        }
    }
    Err("no GET /v1/models poll with status 200".into())
}

/// The route judge's reading of one serve log, in the case files' vocabulary (case 38).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogSummary {
    /// False when the required route line is missing or a forbidden line is present.
    pub ok: bool,
    /// `forbidden_log_match` (a forbidden line is present) or `route_not_matched` (the required line is not).
    pub fail_reason: Option<String>,
    /// The required pattern matched a line.
    pub route_matched: bool,
    /// Its 1-based line.
    pub route_line: Option<usize>,
    /// The forbidden pattern matched a line.
    pub forbid_matched: bool,
    /// Its 1-based line.
    pub forbid_line: Option<usize>,
    /// The named groups of both matches.
    pub captures: std::collections::BTreeMap<String, String>,
    /// Escape sequences removed before matching ([`crate::judge::strip_escapes_counted`]).
    pub ansi_sequences_stripped: usize,
    /// `log_ansi_stripped` when any were removed.
    pub flags: Vec<String>,
    /// None so far (the key is there for the case files' shape).
    pub warnings: Vec<String>,
    /// Lines read.
    pub lines: usize,
}

/// What `servegate inspect FILE.log` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogInspection {
    /// The file as given.
    pub file: String,
    /// Always [`Input::Log`].
    pub input: Input,
    /// The reading.
    pub summary: LogSummary,
}

/// Reads a serve log as `[assert.route]` does: escapes stripped first (line numbers hold; the raw bytes are
/// not changed), then the first line each of `require` (the fast route) and `forbid` (the slow route) matches.
pub fn inspect_log(
    file: &str,
    bytes: &[u8],
    require: Option<&regex::Regex>,
    forbid: Option<&regex::Regex>,
) -> LogInspection {
    let (log, stripped) = crate::judge::strip_escapes_counted(&String::from_utf8_lossy(bytes));
    let mut s = LogSummary {
        ansi_sequences_stripped: stripped,
        lines: log.lines().count(),
        ..LogSummary::default()
    };
    if stripped > 0 {
        s.flags
            .push(crate::vocab::NoteKind::LogAnsiStripped.name().to_string());
    }
    let mut first = |re: &regex::Regex| -> Option<usize> {
        let (i, c) = log
            .lines()
            .enumerate()
            .find_map(|(i, l)| re.captures(l).map(|c| (i, c)))?;
        for n in re.capture_names().flatten() {
            if let Some(m) = c.name(n) {
                s.captures.insert(n.to_string(), m.as_str().to_string());
            }
        }
        Some(i + 1)
    };
    let route = require.and_then(&mut first);
    let forbidden = forbid.and_then(&mut first);
    s.route_matched = route.is_some();
    s.route_line = route;
    s.forbid_matched = forbidden.is_some();
    s.forbid_line = forbidden;
    s.fail_reason = if forbidden.is_some() {
        Some("forbidden_log_match".into())
    } else if require.is_some() && route.is_none() {
        Some("route_not_matched".into())
    } else {
        None
    };
    s.ok = s.fail_reason.is_none();
    LogInspection {
        file: file.to_string(),
        input: Input::Log,
        summary: s,
    }
}

/// What `servegate inspect` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    /// The file as given.
    pub file: String,
    /// How it was read.
    pub input: Input,
    /// The readable summary.
    pub summary: Summary,
    /// All measurements.
    pub figures: Figures,
    /// The parsed reply, in full.
    pub reply: Reply,
}

/// Parses one response file's bytes, choosing the reading by `name` (see the module doc).
pub(crate) fn parse_input(name: &str, bytes: &[u8]) -> Result<(Input, Reply), String> {
    if name.ends_with(crate::evidence::layout::READS_SUFFIX) {
        let rs = reads::decode(&String::from_utf8_lossy(bytes)).map_err(|e| e.to_string())?;
        return Ok((Input::Reads, parse_stream(&rs, None)));
    }
    if name.ends_with(".http") {
        let (status, event_stream, body, framing) = split_http(bytes)?;
        let mut reply = if event_stream {
            parse_stream(&reads::single_read(body), Some(status))
        } else {
            parse_body(&body, Some(status), 0.0)
        };
        match framing {
            // Cut by its own framing: truncated, whatever the bytes that arrived parse as.
            Some(Framing::Cut(why)) => {
                reply.truncated = true;
                reply.incomplete_tail = true;
                reply.parse_errors.push(why);
            }
            Some(Framing::Extra(why)) => reply.parse_errors.push(why),
            None => {}
        }
        return Ok((Input::Http, reply));
    }
    if name.ends_with(".json") {
        return Ok((Input::Json, parse_body(bytes, None, 0.0)));
    }
    Ok((
        Input::Sse,
        parse_stream(&reads::single_read(bytes.to_vec()), None),
    ))
}

/// Parses, measures and summarises one response: what `servegate inspect` prints.
pub(crate) fn inspect_bytes(file: &str, bytes: &[u8]) -> Result<Inspection, String> {
    let (input, reply) = parse_input(file, bytes)?;
    let figures = measure(&reply);
    let summary = summarize(&reply, &figures);
    Ok(Inspection {
        file: file.to_string(),
        input,
        summary,
        figures,
        reply,
    })
}

/// The most bytes `servegate inspect` reads of one file: twice the client's body cap
/// ([`crate::io::client::BODY_CAP_BYTES`], 64 MiB), room for the largest body a run keeps in its reads
/// file's encoding. A larger file is refused before it is read (its size from the file system, or, for a
/// pipe, by reading one byte past the cap), so memory is bounded by the cap, never by the file.
pub const INSPECT_CAP_BYTES: u64 = 2 * crate::io::client::BODY_CAP_BYTES;

/// Reads `path` (at most [`INSPECT_CAP_BYTES`]) and inspects it. Errors name the file.
pub fn inspect_file(path: &Path) -> Result<Inspection, String> {
    let file = path.display().to_string();
    // A regular file or a pipe (`<(curl ...)`), never a device; a FIFO nobody writes reads as empty.
    let bytes = crate::io::input::read_piped(path, INSPECT_CAP_BYTES).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            format!(
                "{file}: over inspect's cap of {INSPECT_CAP_BYTES} bytes (one response: a run keeps at most {} bytes of a body): {e}",
                crate::io::client::BODY_CAP_BYTES
            )
        } else {
            format!("{file}: {e}")
        }
    })?;
    inspect_bytes(&file, &bytes).map_err(|e| format!("{file}: {e}"))
}

/// A raw HTTP/1.x response → (status, is an event stream, body). Headers end at the first blank line (CRLF
/// or LF); a `Transfer-Encoding: chunked` body is de-chunked.
pub(crate) fn split_http(raw: &[u8]) -> Result<(u16, bool, Vec<u8>, Option<Framing>), String> {
    let (head_end, sep) = match find(raw, b"\r\n\r\n") {
        Some(i) => (i, 4),
        None => (
            find(raw, b"\n\n").ok_or("not an HTTP response: no blank line after the headers")?,
            2,
        ),
    };
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let mut lines = head.lines();
    let status_line = lines.next().unwrap_or_default();
    if !status_line.starts_with("HTTP/") {
        return Err(format!("not an HTTP response: status line {status_line:?}"));
    }
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status code in {status_line:?}"))?;
    let mut event_stream = false;
    let mut chunked = false;
    let mut content_length: Option<usize> = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (
            name.trim().to_ascii_lowercase(),
            value.trim().to_ascii_lowercase(),
        );
        if name == "content-type" && value.starts_with("text/event-stream") {
            event_stream = true;
        }
        if name == "transfer-encoding" && value.split(',').any(|v| v.trim() == "chunked") {
            chunked = true;
        }
        if name == "content-length" {
            content_length = Some(
                value
                    .parse()
                    .map_err(|_| format!("bad Content-Length {value:?}"))?,
            );
        }
    }
    let r = framed(raw, head_end + sep, chunked, content_length)?;
    Ok((status, event_stream, r.0, r.1))
}

/// The body of a response whose headers end at `start`, as its framing delimits it, and what the framing
/// says is wrong: a chunked body cut inside a chunk or before its last (zero) chunk, a body shorter than its
/// `Content-Length` (both cut: the reply is truncated), or longer (the bytes past it are dropped, as an HTTP
/// client reads the response).
fn framed(
    raw: &[u8],
    start: usize,
    chunked: bool,
    content_length: Option<usize>,
) -> Result<(Vec<u8>, Option<Framing>), String> {
    let body = &raw[start..];
    if chunked {
        let (out, cut) = dechunk_checked(body)?;
        return Ok((out, cut.map(Framing::Cut)));
    }
    match content_length {
        Some(n) if body.len() < n => Ok((
            body.to_vec(),
            Some(Framing::Cut(format!(
                "the body is {} bytes, its Content-Length {n}: the response was cut",
                body.len()
            ))),
        )),
        Some(n) if body.len() > n => Ok((
            body[..n].to_vec(),
            Some(Framing::Extra(format!(
                "{} bytes after the Content-Length of {n} (dropped, as an HTTP client reads the response)",
                body.len() - n
            ))),
        )),
        _ => Ok((body.to_vec(), None)),
    }
}

/// What an HTTP response's framing (`Content-Length`, chunked encoding) says is wrong with its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Framing {
    /// The body ended before its framing said it would: the reply is truncated.
    Cut(String),
    /// Bytes after the body's end as its framing delimits it (dropped).
    Extra(String),
}

/// Decodes a `chunked` transfer-encoded body (chunk extensions and trailers ignored; a body cut inside a
/// chunk gives what arrived), and why the body is cut when it is: it ends inside a chunk (fewer bytes than
/// its size line says) or before the last, zero-size chunk.
pub(crate) fn dechunk_checked(mut body: &[u8]) -> Result<(Vec<u8>, Option<String>), String> {
    let mut out = Vec::new();
    let no_last = |out: &Vec<u8>| {
        Some(format!(
            "the chunked body ends after {} bytes without its last (zero-size) chunk: the response was cut",
            out.len()
        ))
    };
    loop {
        let Some(eol) = find(body, b"\n") else {
            let cut = no_last(&out);
            return Ok((out, cut));
        };
        let size_line = String::from_utf8_lossy(&body[..eol]);
        let size_hex = size_line
            .trim()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim();
        if size_hex.is_empty() && eol + 1 >= body.len() {
            let cut = no_last(&out);
            return Ok((out, cut));
        }
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size line {size_line:?}"))?;
        body = &body[eol + 1..];
        if size == 0 {
            return Ok((out, None));
        }
        let take = size.min(body.len());
        out.extend_from_slice(&body[..take]);
        if take < size {
            let cut = format!(
                "the chunked body is cut inside a chunk ({take} of its {size} bytes arrived): the response was cut"
            );
            return Ok((out, Some(cut)));
        }
        body = &body[take..];
        // The CRLF after the chunk data.
        body = body
            .strip_prefix(b"\r\n")
            .or_else(|| body.strip_prefix(b"\n"))
            .unwrap_or(body);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
        data: [DONE]\n\n";

    #[test]
    fn http_event_stream_gets_its_status_and_a_chunked_body_is_dechunked() {
        let body = STREAM.as_bytes();
        let (a, b) = body.split_at(40);
        let mut raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for part in [a, b] {
            raw.extend_from_slice(format!("{:x};ext=1\r\n", part.len()).as_bytes());
            raw.extend_from_slice(part);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        let (input, r) = parse_input("x.http", &raw).unwrap();
        assert_eq!(input, Input::Http);
        assert!(r.streamed);
        assert_eq!(r.http_status, Some(200));
        assert_eq!(r.content, "Hi");
        assert!(r.parse_errors.is_empty(), "{:?}", r.parse_errors);
    }

    #[test]
    fn http_json_error_body_is_a_body_with_its_status() {
        let raw = b"HTTP/1.1 503 Service Unavailable\nContent-Type: application/json\n\n{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\"}}";
        let (_, r) = parse_input("x.http", raw).unwrap();
        assert!(!r.streamed);
        assert_eq!(r.http_status, Some(503));
        let s = summarize(&r, &measure(&r));
        assert!(!s.ok);
        assert_eq!(s.fail_reason.as_deref(), Some("http_status"));
        assert_eq!(s.error_type.as_deref(), Some("unavailable_error"));
    }

    #[test]
    fn not_http_is_an_error_not_a_panic() {
        assert!(parse_input("x.http", b"data: x\n\n").is_err());
        assert!(parse_input("x.http", b"no blank line").is_err());
        assert!(parse_input("x.http", b"HTTP/1.1 abc\r\n\r\n").is_err());
        assert!(parse_input("x.reads.jsonl", b"{\"t_ms\": \"x\"}\n").is_err());
    }

    #[test]
    fn sse_is_one_read_at_zero_and_json_is_a_body() {
        let (input, r) = parse_input("x.sse", STREAM.as_bytes()).unwrap();
        assert_eq!(input, Input::Sse);
        let s = summarize(&r, &measure(&r));
        assert_eq!(s.ttft_ms, Some(0.0));
        assert_eq!(s.first_event_ms, Some(0.0));
        assert_eq!(s.decode_tok_s, None);
        assert_eq!(s.empty_chunks, 1);
        assert_eq!(s.chunks, 3);
        assert!(s.ok, "{s:?}");
        let (input, r) = parse_input(
            "x.json",
            br#"{"choices":[{"index":0,"message":{"content":"Paris."},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert_eq!(input, Input::Json);
        assert!(!r.streamed);
        assert_eq!(r.content, "Paris.");
    }

    #[test]
    fn fail_reasons_are_named_like_the_cases() {
        let body = |content: &str, reasoning: &str| {
            format!(
                r#"{{"choices":[{{"index":0,"message":{{"content":{content:?},"reasoning_content":{reasoning:?}}},"finish_reason":"length"}}],"usage":{{"completion_tokens":8}}}}"#
            )
        };
        for (content, reasoning, want) in [
            (
                "",
                "thinking",
                Some("content_empty_all_tokens_in_reasoning"),
            ),
            ("", "", Some("content_empty")),
            ("  \n", "", Some("content_whitespace_only")),
            ("////////", "", Some("degenerate_output")),
            ("Paris.", "", None),
        ] {
            let (_, r) = parse_input("x.json", body(content, reasoning).as_bytes()).unwrap();
            let f = measure(&r);
            let s = summarize(&r, &f);
            assert_eq!(s.fail_reason.as_deref(), want, "{content:?}");
            assert_eq!(s.ok, want.is_none());
            // ok agrees with the judge's content check, and the detail is the judge's text.
            assert_eq!(s.fail_detail, crate::judge::content_problem(&r, &f));
        }
        let r = parse_stream(&reads::single_read(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The\"}}]}\n\ndata: {\"cho".to_vec()), None);
        let s = summarize(&r, &measure(&r));
        assert_eq!(s.fail_reason.as_deref(), Some("truncated_stream"));
        assert_eq!(s.content, "The");
    }

    #[test]
    fn summary_carries_notes_itl_and_server_figures() {
        let rs = vec![
            reads::TimedRead { recv_ms: None, t_ms: 10.0, bytes: b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n".to_vec() },
            reads::TimedRead { recv_ms: None, t_ms: 30.0, bytes: b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n".to_vec() },
            reads::TimedRead {
                recv_ms: None, t_ms: 70.0,
                bytes: b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"},\"finish_reason\":\"length\"}],\"timings\":{\"cache_n\":5,\"prompt_n\":1,\"prompt_ms\":2.0,\"predicted_per_second\":40.0}}\n\ndata: [DONE]\n\n".to_vec(),
            },
        ];
        let r = parse_stream(&rs, None);
        let f = measure(&r);
        let s = summarize(&r, &f);
        assert_eq!(
            s.itl,
            ItlSummary {
                n: 2,
                p50_ms: Some(30.0),
                p90_ms: Some(38.0),
                p99_ms: Some(39.8),
                max_ms: Some(40.0)
            }
        );
        assert_eq!(s.completion_tokens_estimate, Some(3));
        assert_eq!(s.completion_tokens, None);
        assert!(s.notes.contains(&"usage_missing".to_string()));
        assert!(s.notes.contains(&"prompt_cache_hit".to_string()));
        assert!(s.notes.contains(&"truncated_by_max_tokens".to_string()));
        assert!(s.flags.iter().any(|f| f == "truncated_by_max_tokens"));
        assert!(s
            .warnings
            .iter()
            .any(|w| w.starts_with("prompt_cache_hit 5/6")));
        assert!(!s.prefill_measured);
        assert_eq!((s.cache_n, s.prompt_n), (Some(5), Some(1)));
        assert_eq!(s.timings_predicted_per_second, Some(40.0));
        assert_eq!(s.server_decode_tok_s, Some(40.0));
        // The JSON value has the same keys.
        let v = serde_json::to_value(summarize(&r, &f)).expect("a Summary always serialises");
        assert_eq!(v["ttft_ms"], serde_json::json!(10.0));
        assert_eq!(
            v["completion_tokens_source"],
            serde_json::json!("token_chunk_count_estimate")
        );
    }

    #[test]
    fn dechunk_handles_lf_only_and_a_cut_body() {
        let dechunk = |b: &[u8]| dechunk_checked(b).map(|(b, _)| b);
        assert_eq!(dechunk(b"3\nabc\n0\n\n").unwrap(), b"abc");
        assert_eq!(dechunk(b"5\r\nab").unwrap(), b"ab");
        assert_eq!(dechunk(b"").unwrap(), b"");
        assert!(dechunk(b"zz\r\nab").is_err());
    }
}
