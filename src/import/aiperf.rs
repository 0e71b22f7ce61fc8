//! AIPerf's per-request `profile_export.jsonl`: one `MetricRecordInfo` per line, as ai-dynamo/aiperf
//! documents it (docs/tutorials/working-with-profile-exports.md, commit 13992dbd96879c76e9584f2e8dc05db49bee6cf2;
//! models in src/aiperf/common/models/record_models.py):
//!
//! * `metadata.request_start_ns`, `metadata.request_end_ns`: epoch ns of the send and of the last response;
//!   `metadata.benchmark_phase`: `profiling` (or `warmup`);
//! * `metrics.<name>.value` with `metrics.<name>.unit`: `time_to_first_token` (ms), `inter_chunk_latency`
//!   (ms, a list: the gap before each chunk after the first; AIPerf 0.13.0 wrote 15 for 16 chunks
//!   received), `request_latency` (ms), `usage_completion_tokens` (the serve's count, when it sent usage),
//!   `output_sequence_length` (AIPerf's tokenizer's count; `output_token_count` in some versions);
//! * `error`: null, or `{code, type, message}` (then `metrics` holds no timings).
//!
//! AIPerf records no reply text: the reads carry placeholders and content is not judged. Its aggregate file
//! (`profile_export_aiperf.json`: percentiles of the whole run) is refused as the input (a percentile is
//! judged from per-request values), but read beside the JSONL for the version (`aiperf_version`) and the
//! command (`run_info.cli_command`) the JSONL does not state ([`sibling`]).

use std::path::Path;

use super::json::Node;
use super::{ToolRequest, ToolRun};

/// The version (`aiperf_version`) and command (`run_info.cli_command`) from `profile_export_aiperf.json`
/// beside the JSONL at `jsonl` (AIPerf writes both in one artifact directory), each None when the file or
/// the field is absent or unreadable.
pub fn sibling(jsonl: &Path) -> (Option<String>, Option<String>) {
    let Some(dir) = jsonl.parent() else {
        return (None, None);
    };
    let Some(v) = crate::io::input::read_to_string(
        &dir.join("profile_export_aiperf.json"),
        super::MAX_FILE_BYTES,
    )
    .ok()
    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok()) else {
        return (None, None);
    };
    (
        v["aiperf_version"].as_str().map(str::to_string),
        v["run_info"]["cli_command"].as_str().map(str::to_string),
    )
}

/// Parses an AIPerf `profile_export.jsonl`. Errors name the line (1-based) and the field.
pub fn parse(text: &str) -> Result<ToolRun, String> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if !v.is_object() {
            return Err(format!(
                "line 1: not AIPerf's profile_export.jsonl (one record per line): the file is one JSON document ({}): another tool's file?",
                super::json::kind(&v)
            ));
        }
        if v.get("metadata").is_none() {
            let aggregate = v.as_object().is_some_and(|o| {
                o.values()
                    .any(|m| m.get("p99").is_some() || m.get("avg").is_some())
            });
            return Err(if aggregate {
                "the file is one JSON object of aggregates (AIPerf's profile_export_aiperf.json: percentiles of the whole run), not per-request records; servegate judges percentiles from per-request values only: import profile_export.jsonl".into()
            } else {
                "line 1: not an AIPerf profile_export.jsonl record (no `metadata`): another tool's file?".into()
            });
        }
    }
    let mut requests = Vec::new();
    // `metadata.x_request_id` -> the line that holds it: a record listed twice is refused, never counted twice.
    let mut ids: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (no, line, rest) in super::json::lines(text) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            if rest.is_none() && e.is_eof() {
                format!("line {no}: truncated: the last line ends inside its JSON record and has no newline (a file cut while written?)")
            } else if e.is_eof() && !super::json::only_blanks(rest) && requests.is_empty() {
                format!("line {no}: the line ends inside a JSON value and the file goes on: not AIPerf's profile_export.jsonl (one record per line; this is a multi-line JSON document: another tool's file?)")
            } else {
                format!("line {no}: not JSON: {e}")
            }
        })?;
        let root = Node::root(&v, &format!("line {no}: $"));
        if !v.is_object() || !root.has("metadata") || !root.has("metrics") {
            return Err(format!(
                "line {no}: not an AIPerf profile_export.jsonl record (needs `metadata` and `metrics`): another tool's file?"
            ));
        }
        if let Some(id) = v["metadata"]["x_request_id"].as_str() {
            if let Some(first) = ids.insert(id.to_string(), no) {
                return Err(format!(
                    "line {no}: metadata.x_request_id {:?} is line {first}'s too: {}",
                    id.chars().take(80).collect::<String>(),
                    super::recorded_twice(" (files joined, or a line repeated?)")
                ));
            }
        }
        requests.push(record(&root)?);
    }
    if requests.is_empty() {
        return Err("the file holds no record".into());
    }
    Ok(ToolRun {
        version: None,
        command: None,
        point: None,
        max_concurrency: None,
        planned: None,
        requests,
        lacks: Vec::new(),
        notes: Vec::new(),
        file_sha256: None,
    })
}

/// One record.
fn record(root: &Node) -> Result<ToolRequest, String> {
    let md = root.get("metadata")?;
    let start_ns = md.get("request_start_ns")?.u64()?;
    let end_ns = md.get("request_end_ns")?.u64()?;
    if end_ns < start_ns {
        return Err(format!(
            "{}.request_end_ns ({end_ns}) is before request_start_ns ({start_ns})",
            md.path
        ));
    }
    let warmup = match md.opt("benchmark_phase") {
        Some(p) => p.str()? == "warmup",
        None => false,
    };
    let start_ms = start_ns as f64 / 1e6;
    // A request AIPerf cancelled (its `--request-cancellation-rate`, or the end of the run) did not
    // complete: a failure, never a success from whatever metrics it kept.
    let cancelled = md
        .opt("was_cancelled")
        .is_some_and(|c| c.v.as_bool() == Some(true));
    if cancelled && root.opt("error").is_none() {
        return Ok(ToolRequest {
            start_ms,
            warmup,
            end_ms: (end_ns - start_ns) as f64 / 1e6,
            error: Some("cancelled (aiperf metadata.was_cancelled: true)".into()),
            ..Default::default()
        });
    }
    if let Some(err) = root.opt("error") {
        let message = err
            .opt("message")
            .and_then(|m| m.v.as_str().map(str::to_string));
        let kind = err
            .opt("type")
            .and_then(|m| m.v.as_str().map(str::to_string));
        let code = err.opt("code").and_then(|c| c.v.as_u64());
        return Ok(ToolRequest {
            start_ms,
            warmup,
            end_ms: (end_ns - start_ns) as f64 / 1e6,
            error: Some(format!(
                "{}{}{}",
                kind.unwrap_or_else(|| "error".into()),
                code.map(|c| format!(" {c}")).unwrap_or_default(),
                message.map(|m| format!(": {m}")).unwrap_or_default()
            )),
            status: code
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (100..600).contains(c)),
            ..Default::default()
        });
    }
    let metrics = root.get("metrics")?;
    let value_ms = |name: &str| -> Result<Node, String> {
        let m = metrics.get(name)?;
        let unit = m.get("unit")?.str()?;
        if unit != "ms" {
            return Err(format!("{}.unit is {unit:?}, expected \"ms\"", m.path));
        }
        m.get("value")
    };
    let ttft = value_ms("time_to_first_token")
        .map_err(|e| {
            if e.ends_with("missing") {
                format!(
                    "{e} (a streamed record has a TTFT; a non-streamed run cannot be judged for it)"
                )
            } else {
                e
            }
        })?
        .nonneg()?;
    let latency = value_ms("request_latency")?.nonneg()?;
    let gaps: Vec<f64> = match metrics.opt("inter_chunk_latency") {
        Some(_) => value_ms("inter_chunk_latency")?
            .items()?
            .iter()
            .map(|g| g.nonneg())
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    // The serve's count (`usage_completion_tokens`, what servegate's own client counts) before AIPerf's
    // tokenizer's (`output_sequence_length`): on the synthetic serve AIPerf's tokenizer read 39 tokens in a
    // 16-token reply, and a TPOT over 39 would read 2.5x fast.
    let tokens = match metrics
        .opt("usage_completion_tokens")
        .or_else(|| metrics.opt("output_sequence_length"))
        .or_else(|| metrics.opt("output_token_count"))
    {
        Some(m) => m.get("value")?.u64()?,
        None => {
            return Err(format!(
                "{}.output_sequence_length: missing (and no usage_completion_tokens, output_token_count): a token count is never read as zero",
                metrics.path
            ))
        }
    };
    let mut arrivals = vec![ttft];
    let mut t = ttft;
    for g in gaps {
        t += g;
        arrivals.push(t);
    }
    // `request_latency` is the send to the last response: a chunk after it is impossible, refused.
    super::check_times(
        &format!("{}.time_to_first_token", metrics.path),
        &arrivals,
        latency,
        &format!("{}.request_latency", metrics.path),
    )?;
    Ok(ToolRequest {
        start_ms,
        warmup,
        end_ms: latency.max(t),
        arrivals_ms: arrivals,
        per_arrival: None,
        tokens: Some(tokens),
        text: None,
        error: None,
        status: None,
    })
}
