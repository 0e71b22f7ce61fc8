//! k6's `--out json=FILE` of a script whose requests go through xk6-llm's client (`import llm from
//! 'k6/x/llm'`, github.com/msradam/xk6-llm, `metrics.go` and `client.go` at commit 20e1c03): one JSON
//! envelope per line, as k6 writes them (grafana/k6 `internal/output/json/wrapper.go` at 4815d6c and
//! `json.go`):
//!
//! * `{"type":"Metric","metric":NAME,"data":{...}}` the first time a metric is seen (skipped here);
//! * `{"type":"Point","metric":NAME,"data":{"time":T,"value":V,"tags":{...},"metadata":{...}}}` per sample,
//!   `T` RFC 3339 with nanoseconds (Go's `time.Time`).
//!
//! xk6-llm pushes one request's samples together (one `ConnectedSamples`), all with one time (taken just
//! after the request ended) and one tag set (the VU's tags, `model`, the request's own `tags`):
//! `llm_requests` (1) first, then `llm_request_duration` (ms from the send to the end of the stream),
//! `llm_chunks_per_request` (content chunks), `llm_ttft` (ms from the send to the first content, reasoning
//! or tool-call chunk), `llm_itl` (one sample per gap between consecutive content chunks, in order: the first
//! is chunk 2 minus chunk 1), `llm_completion_tokens` (the serve's `usage.completion_tokens`, when it sent
//! usage), and others not read here (`llm_tpot`, `llm_prompt_tokens`, goodput, cost...). `llm_aborted` marks a
//! stream the script cut short (`abort_after_ms` / `abort_after_tokens`). A failed request is one
//! `llm_errors` sample tagged `error_type` (`network`, `timeout`, `http_4xx`, `http_5xx`, `stream`,
//! `decode`).
//!
//! So each request is rebuilt as: start = the samples' time − `llm_request_duration`; the first arrival at
//! `llm_ttft`, each next one `llm_itl` later; the end at `llm_request_duration`. The file states no version,
//! no command, no load and no reply text: `--tool-version`, `--tool-command` and `--point` say them, and
//! content assertions have no text to read. k6's own `http_req_*` samples (a whole response timed, never a
//! token) are skipped.
//!
//! The file has no request id: a request whose samples (time to the nanosecond, tags, every value) repeat
//! an earlier request's exactly is one request recorded twice (files joined, lines repeated), refused naming
//! both lines, never counted twice.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::{ToolRequest, ToolRun};

/// One request's samples while they are read: the line of its `llm_requests` sample, its key (time and
/// tags), and the values read so far.
#[derive(Default)]
struct Open {
    line: usize,
    key: String,
    /// Every sample of the request, as read (metric and value, after the time and tags): a request whose
    /// samples repeat another's exactly is one request recorded twice.
    samples: String,
    end_ms: f64,
    duration: Option<f64>,
    duration_line: usize,
    ttft: Option<f64>,
    itl: Vec<f64>,
    chunks: Option<u64>,
    tokens: Option<u64>,
    aborted: bool,
    unary: bool,
}

/// Parses k6's JSON output of an xk6-llm script. Errors name the line (1-based).
pub fn parse(text: &str) -> Result<ToolRun, String> {
    let trimmed = text.trim_start();
    if looks_like_summary(trimmed) {
        return Err(
            "not k6's --out json output (one envelope per line): this looks like k6's end-of-test summary (--summary-export or handleSummary: aggregates); servegate judges percentiles from per-request samples only: run k6 with --out json=FILE"
                .into(),
        );
    }
    let mut requests = Vec::new();
    let mut open: Option<Open> = None;
    // Each request's samples (time, tags, values) -> the line of its first: see [`seen_once`].
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut models = BTreeSet::new();
    let (mut k6_own, mut embed, mut points) = (0usize, 0usize, 0usize);
    if let Some(why) = one_document(text) {
        return Err(why);
    }
    for (k, (n, line, rest)) in super::json::lines(text).enumerate() {
        let v = envelope(line, n, k == 0, rest)?;
        let kind = v["type"].as_str();
        let metric = v["metric"].as_str();
        let (Some(kind), Some(metric)) = (kind, metric) else {
            return Err(format!(
                "line {n}: not a k6 JSON output envelope (needs type and metric): another tool's file?"
            ));
        };
        match kind {
            "Metric" => continue,
            "Point" => points += 1,
            other => {
                return Err(format!(
                    "line {n}: envelope type {other:?}, k6 writes \"Metric\" or \"Point\""
                ))
            }
        }
        if !metric.starts_with("llm_") {
            k6_own += 1;
            continue;
        }
        if metric.starts_with("llm_embed_") {
            embed += 1;
            continue;
        }
        let data = &v["data"];
        let value = data["value"]
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("line {n}: {metric}: data.value missing or not a number"))?;
        let time = data["time"]
            .as_str()
            .ok_or_else(|| format!("line {n}: {metric}: data.time missing"))?;
        let at_ms = parse_time(time).map_err(|e| format!("line {n}: {metric}: data.time {e}"))?;
        let tags = &data["tags"];
        let key = format!("{time} {tags}");
        if let Some(m) = tags["model"].as_str() {
            models.insert(m.to_string());
        }
        match metric {
            "llm_requests" => {
                flush(&mut open, &mut requests, &mut seen)?;
                open = Some(Open {
                    line: n,
                    samples: format!("{key} {metric}={value}"),
                    key,
                    end_ms: at_ms,
                    unary: tags["mode"].as_str() == Some("unary"),
                    ..Default::default()
                });
            }
            "llm_errors" => {
                flush(&mut open, &mut requests, &mut seen)?;
                seen_once(&mut seen, format!("{key} {metric}={value}"), n)?;
                let kind = tags["error_type"].as_str().unwrap_or("(no error_type tag)");
                requests.push((
                    n,
                    ToolRequest {
                        // xk6-llm times a failure's samples when it failed and records no duration: the start is
                        // not in the file; the failure's time stands for it (it orders the requests only).
                        start_ms: at_ms,
                        error: Some(format!(
                            "{kind}: xk6-llm's error_type (its samples carry no message)"
                        )),
                        ..Default::default()
                    },
                ));
            }
            _ => {
                let Some(o) = open.as_mut().filter(|o| o.key == key) else {
                    return Err(format!(
                        "line {n}: a {metric} sample whose time and tags match no llm_requests sample before it (xk6-llm pushes a request's samples together, llm_requests first): a file cut or reordered?"
                    ));
                };
                o.samples.push_str(&format!(" {metric}={value}"));
                read_sample(o, metric, value, n)?;
            }
        }
    }
    flush(&mut open, &mut requests, &mut seen)?;
    if requests.is_empty() {
        return Err(if k6_own > 0 || embed > 0 {
            format!(
                "no xk6-llm chat sample (llm_requests or llm_errors) among {points} samples: k6's own http_req_* metrics time a whole response, never a token; servegate imports the per-request samples of xk6-llm's client (k6/x/llm)"
            )
        } else {
            "no k6 sample in the file: an empty run?".into()
        });
    }
    let mut notes = vec![
        "k6 + xk6-llm: each request's start is its samples' time minus llm_request_duration; the arrivals are llm_ttft, then each llm_itl after the one before".to_string(),
    ];
    if k6_own > 0 {
        notes.push(format!(
            "k6: {k6_own} samples of k6's own metrics (http_req_*, iterations, vus...) not read"
        ));
    }
    if embed > 0 {
        notes.push(format!(
            "k6: {embed} llm_embed_* samples (embeddings calls) not read"
        ));
    }
    for m in models {
        notes.push(format!("k6 model tag: {m}"));
    }
    let (lines, requests): (Vec<usize>, Vec<ToolRequest>) = requests.into_iter().unzip();
    let run = ToolRun {
        version: None,
        command: None,
        point: None,
        max_concurrency: None,
        planned: None,
        requests,
        lacks: Vec::new(),
        notes,
        file_sha256: None,
    };
    super::check_starts(&run, |i| format!("line {}", lines[i]))?;
    Ok(run)
}

/// Line `n` (its text `line`, the text after it `rest`) read as JSON; the error says a value cut where
/// nothing but blanks follows is truncated, and one that the `first` line opens and the next lines go on
/// with is a multi-line document.
fn envelope(line: &str, n: usize, first: bool, rest: Option<&str>) -> Result<Value, String> {
    serde_json::from_str(line).map_err(|e| {
        if e.is_eof() && super::json::only_blanks(rest) {
            format!("line {n}: truncated: the line ends inside a JSON value (a file cut while written?)")
        } else if e.is_eof() && first {
            format!("line {n}: the line ends inside a JSON value and the file goes on: not k6's JSON-lines output (k6 --out json writes one envelope per line; this is a multi-line JSON document: another tool's file?)")
        } else {
            format!("line {n}: not JSON: {e}")
        }
    })
}

/// Closes the open request, if any, into `requests` (with the line of its `llm_requests` sample), refused
/// when its samples repeat an earlier request's ([`seen_once`]).
fn flush(
    open: &mut Option<Open>,
    requests: &mut Vec<(usize, ToolRequest)>,
    seen: &mut HashMap<String, usize>,
) -> Result<(), String> {
    if let Some(mut o) = open.take() {
        let line = o.line;
        seen_once(seen, std::mem::take(&mut o.samples), line)?;
        requests.push((line, close(o)?));
    }
    Ok(())
}

/// Records the samples of the request at `line` (its time, tags and every value, as read) in `seen`;
/// an error naming both lines when an earlier request's were the same. xk6-llm stamps a request's samples
/// with the time it ended, to the nanosecond, and the VU's tags: two requests with the same time, tags and
/// values are one request recorded twice (files joined, lines repeated), refused, never counted twice.
fn seen_once(
    seen: &mut HashMap<String, usize>,
    samples: String,
    line: usize,
) -> Result<(), String> {
    match seen.insert(samples, line) {
        Some(first) => Err(format!(
            "line {line}: the request's samples (time, tags and values) are line {first}'s too: {}",
            super::recorded_twice(" (files joined, or lines repeated?)")
        )),
        None => Ok(()),
    }
}

/// Why `text` is not k6's JSON lines, when it is one JSON document that is not one envelope (another tool's
/// file, pretty-printed or on one line), or a multi-line document whose first line opens it (`{` or `[`
/// alone); None otherwise (the lines are then read one by one).
fn one_document(text: &str) -> Option<String> {
    let (i, first) = text
        .lines()
        .enumerate()
        .find(|(_, l)| !l.trim().is_empty())?;
    let opener = matches!(first.trim(), "{" | "[");
    let whole = serde_json::from_str::<Value>(text).ok();
    let envelope = whole
        .as_ref()
        .is_some_and(|v| v.get("type").is_some() && v.get("metric").is_some());
    if envelope || (whole.is_none() && !opener) {
        return None;
    }
    let what = match &whole {
        Some(v) => format!("the file is one JSON document ({})", super::json::kind(v)),
        None => format!(
            "the line is {:?} alone, the start of a multi-line JSON document",
            first.trim()
        ),
    };
    Some(format!(
        "line {}: not k6's JSON-lines output (k6 --out json writes one envelope per line): {what}: another tool's file?",
        i + 1
    ))
}

/// True when the text is one JSON document with k6's summary shape (`metrics` of aggregates, `root_group`).
fn looks_like_summary(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .map(|v| {
            v.get("metrics").is_some()
                && (v.get("root_group").is_some() || v.get("state").is_some())
        })
        .unwrap_or(false)
}

/// Reads one of a request's samples into it.
fn read_sample(o: &mut Open, metric: &str, value: f64, line: usize) -> Result<(), String> {
    let nonneg = |x: f64| {
        if x < 0.0 {
            Err(format!(
                "line {line}: {metric}: negative ({})",
                super::shown_num(x)
            ))
        } else {
            Ok(x)
        }
    };
    let whole = |x: f64| {
        if x < 0.0 || x.fract() != 0.0 {
            Err(format!(
                "line {line}: {metric}: not a whole number >= 0 ({})",
                super::shown_num(x)
            ))
        } else {
            Ok(x as u64)
        }
    };
    // One sample per request of each of these (xk6-llm pushes one); a second is lines repeated.
    let again = match metric {
        "llm_request_duration" => o.duration.is_some(),
        "llm_ttft" => o.ttft.is_some(),
        "llm_chunks_per_request" => o.chunks.is_some(),
        "llm_completion_tokens" => o.tokens.is_some(),
        _ => false,
    };
    if again {
        return Err(format!(
            "line {line}: a second {metric} sample for the request of line {} (xk6-llm pushes one per request): lines repeated?",
            o.line
        ));
    }
    match metric {
        "llm_request_duration" => {
            o.duration = Some(nonneg(value)?);
            o.duration_line = line;
        }
        "llm_ttft" => o.ttft = Some(nonneg(value)?),
        "llm_itl" => o.itl.push(nonneg(value)?),
        "llm_chunks_per_request" => o.chunks = Some(whole(value)?),
        "llm_completion_tokens" => o.tokens = Some(whole(value)?),
        "llm_aborted" => o.aborted = value > 0.0,
        _ => {}
    }
    Ok(())
}

/// A request whose samples are all read.
fn close(o: Open) -> Result<ToolRequest, String> {
    let at = format!("line {} (llm_requests)", o.line);
    let duration = o
        .duration
        .ok_or_else(|| format!("{at}: the request has no llm_request_duration sample"))?;
    let end_field = format!("line {}: llm_request_duration", o.duration_line);
    super::check_times(&at, &[], duration, &end_field)?;
    let start_ms = o.end_ms - duration;
    if o.unary {
        return Err(format!(
            "{at}: a stream: false request (tag mode=unary): xk6-llm times no first token or chunk for it; servegate judges streamed requests"
        ));
    }
    if o.aborted {
        return Ok(ToolRequest {
            start_ms,
            end_ms: duration,
            error: Some(
                "aborted: cut short by the script (xk6-llm's abort_after_ms or abort_after_tokens)"
                    .into(),
            ),
            ..Default::default()
        });
    }
    let ttft = o
        .ttft
        .ok_or_else(|| format!("{at}: a streamed request without llm_ttft: no chunk arrived?"))?;
    let mut arrivals = vec![ttft];
    match o.chunks {
        // Only reasoning or tool-call deltas: the first token is timed, no content chunk is.
        Some(0) if o.itl.is_empty() => {}
        Some(c) if c as usize != o.itl.len() + 1 => {
            return Err(format!(
                "{at}: llm_chunks_per_request {c} but {} llm_itl samples (one per gap between content chunks expected): the chunks cannot be placed",
                o.itl.len()
            ))
        }
        _ => {
            for gap in &o.itl {
                let t = arrivals.last().copied().unwrap_or(ttft) + gap;
                arrivals.push(t);
            }
        }
    }
    // Every time within a day, and no chunk after the request's end (the shared check: its values printed
    // through `shown_ms`, never as 300 digits).
    super::check_times(&at, &arrivals, duration, &end_field)?;
    let tokens = o.tokens.or(o.chunks.filter(|c| *c > 0)).ok_or_else(|| {
        format!("{at}: no llm_completion_tokens (the serve sent no usage) and no llm_chunks_per_request: no token count")
    })?;
    Ok(ToolRequest {
        start_ms,
        warmup: false,
        arrivals_ms: arrivals,
        per_arrival: None,
        end_ms: duration,
        tokens: Some(tokens),
        text: None,
        error: None,
        status: None,
    })
}

/// Go's `time.Time` JSON (RFC 3339, up to nanoseconds, any offset) as ms since the Unix epoch.
fn parse_time(s: &str) -> Result<f64, String> {
    let t = OffsetDateTime::parse(s, &Rfc3339)
        .map_err(|e| format!("{s:?} is not an RFC 3339 time: {e}"))?;
    Ok(t.unix_timestamp_nanos() as f64 / 1e6)
}
