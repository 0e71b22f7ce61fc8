//! GuideLLM's benchmarks report JSON (`guidellm benchmark ... --output-path report.json`), as
//! vllm-project/guidellm defines it (read at src/guidellm/benchmark/schemas/generative/benchmark.py and
//! report.py, commit 03820eba155d34eb602244535cc2412c32af6f54; base.py (`BenchmarkConfig.strategy`,
//! `sample_requests`), commit 14ffe9c6f1a2a3ab0f2bfccb306f916bde6ffde6; src/guidellm/schemas/request_stats.py, commit
//! 06cef2910dc1517f863ce09ff118af07d463d055; src/guidellm/schemas/info.py, commit
//! 04fcfd864c6a1313d94cb35d00c1030b77c98801):
//!
//! * `metadata.guidellm_version` (0.8.1 writes it; report.py at the commit above has only `args` and
//!   `benchmarks`);
//! * `benchmarks[]`: one per strategy run; each `config.strategy` (`type_`: `synchronous`, `concurrent`
//!   with `streams`, `constant` / `poisson` with `rate`), and `requests.successful`, `.errored`,
//!   `.incomplete`: lists of `GenerativeRequestStats`;
//! * per request `info.timings`: `request_start`, `first_token_iteration`, `last_token_iteration`,
//!   `request_end` (epoch s), `token_iterations`; `output_metrics.total_tokens` (GuideLLM itself falls
//!   back to `token_iterations` when the serve sent no usage: so does this reader); `output` (the text);
//!   `info.error` for an errored request.
//!
//! GuideLLM keeps the first and last token times per request, not each token's ("evenly space the
//! iterations since we don't have per-iteration timings", request_stats.py): ITL percentiles are refused.
//! A report whose request lists are a sample (`--sample-requests`; `metrics.request_totals` larger than
//! the lists) is refused: percentiles of a sample are not the run's; so is one whose lists hold more than
//! `request_totals` counts, or a `request_id` twice (a request counted twice).

use super::json::{parse_doc, Node};
use super::{ToolRequest, ToolRun};
use crate::spec::load::Point;

/// Parses a GuideLLM benchmarks report JSON. Errors name the JSON path.
pub fn parse(text: &str) -> Result<ToolRun, String> {
    let v = parse_doc(text)?;
    let root = Node::root(&v, "$");
    if !v.is_object() || !root.has("benchmarks") {
        return Err(
            "$.benchmarks: missing: not a GuideLLM benchmarks report (another tool's file?)".into(),
        );
    }
    let benches = root.get("benchmarks")?.items()?;
    let b = match benches.len() {
        1 => &benches[0],
        0 => return Err("$.benchmarks: empty: the report holds no benchmark".into()),
        n => {
            return Err(format!(
                "$.benchmarks holds {n} benchmarks (a sweep of strategies): servegate imports one point per run directory; run GuideLLM with one strategy per report"
            ))
        }
    };
    if !b.has("requests") {
        return Err(format!(
            "{}.requests: missing: the report holds aggregates only; servegate judges percentiles from per-request values only",
            b.path
        ));
    }
    let reqs = b.get("requests")?;
    let mut requests = Vec::new();
    let mut textless = 0;
    // `request_id` -> the JSON path of the entry that holds it: a request listed twice (in one list or in
    // two) is refused, never counted twice.
    let mut ids: std::collections::HashMap<&str, String> = std::collections::HashMap::new();
    let mut counts = Vec::new();
    for status in ["successful", "errored", "incomplete"] {
        let list = match reqs.opt(status) {
            Some(l) => l.items()?,
            None if status == "successful" => {
                return Err(format!("{}.successful: missing", reqs.path))
            }
            None => Vec::new(),
        };
        for r in &list {
            if let Some(id) = r.opt("request_id").and_then(|i| i.v.as_str()) {
                if let Some(first) = ids.insert(id, r.path.clone()) {
                    return Err(format!(
                        "{}.request_id {:?} is {first}'s too: {}",
                        r.path,
                        id.chars().take(80).collect::<String>(),
                        super::recorded_twice(" (reports joined, or an entry repeated?)")
                    ));
                }
            }
            let q = request(r, status)?;
            if q.error.is_none() && q.text.is_none() {
                textless += 1;
            }
            requests.push(q);
        }
        counts.push((status, list.len()));
    }
    // The lists against the run's own totals: fewer is a sample, more is requests the run did not make.
    for (status, n) in counts {
        let Some(total) = b
            .opt("metrics")
            .and_then(|m| m.opt("request_totals"))
            .and_then(|t| t.opt(status))
            .and_then(|t| t.v.as_u64())
        else {
            continue;
        };
        if total as usize > n {
            return Err(format!(
                "{}.{status} keeps {n} of the {total} {status} requests (metrics.request_totals): a sample (--sample-requests); percentiles of a sample are not the run's: rerun keeping every request",
                reqs.path
            ));
        }
        if (total as usize) < n {
            return Err(format!(
                "{}.{status} lists {n} requests but metrics.request_totals counts {total} {status}: {} more than the run made (an entry repeated, or reports joined?); refused, as counting them would judge a run that was not",
                reqs.path,
                n - total as usize
            ));
        }
    }
    if requests.is_empty() {
        return Err(format!("{}: no request recorded", reqs.path));
    }
    let mut notes = Vec::new();
    if textless > 0 {
        notes.push(format!(
            "guidellm: {textless} succeeded requests have no `output` text"
        ));
    }
    let (point, max_concurrency) = point(b)?;
    Ok(ToolRun {
        // GuideLLM 0.8.1 writes `metadata.guidellm_version`; report.py at the commit cited does not.
        version: match root.opt("metadata").and_then(|m| m.opt("guidellm_version")) {
            Some(v) => Some(v.str()?.to_string()),
            None => None,
        },
        command: None,
        point,
        max_concurrency,
        planned: None,
        requests,
        lacks: vec![(
            "itl".into(),
            "GuideLLM records the first and last token times per request, not each token's (request_stats.py spaces the iterations evenly)".into(),
        )],
        notes,
        file_sha256: None,
    })
}

/// The point the benchmark's strategy states, if it is one servegate names (a `streams` under 1 or a
/// `rate` not over 0, which GuideLLM's strategies refuse, is a format error naming its path), and a rate
/// strategy's cap on
/// requests in flight, if it states one (`max_concurrency`: GuideLLM 0.8.1's
/// src/guidellm/scheduler/strategies.py `AsyncConstantStrategy`, `AsyncPoissonStrategy`).
fn point(b: &Node) -> Result<(Option<Point>, Option<u32>), String> {
    let Some(s) = b.opt("config").and_then(|c| c.opt("strategy")) else {
        return Ok((None, None));
    };
    let kind = match s.opt("type_") {
        Some(k) => k.str()?,
        None => return Ok((None, None)),
    };
    Ok(match kind {
        "synchronous" => (Some(Point::Concurrency(1)), None),
        "concurrent" => {
            let n = s.get("streams")?;
            let c = u32::try_from(n.u64()?)
                .ok()
                .filter(|c| *c > 0)
                .ok_or_else(|| format!("{}: not a count of 1 or more streams", n.path))?;
            (Some(Point::Concurrency(c)), None)
        }
        "constant" | "poisson" => {
            let r = super::rate_of(&s.get("rate")?)?;
            let cap = match s.opt("max_concurrency") {
                Some(m) => Some(
                    u32::try_from(m.u64()?)
                        .ok()
                        .filter(|m| *m > 0)
                        .ok_or_else(|| format!("{}: not a cap of 1 or more requests", m.path))?,
                ),
                None => None,
            };
            (Some(Point::Rate(r)), cap)
        }
        _ => (None, None),
    })
}

/// One `GenerativeRequestStats` of list `status`.
fn request(r: &Node, status: &str) -> Result<ToolRequest, String> {
    let info = r.get("info")?;
    let t = info.get("timings")?;
    let start = t.get("request_start")?.f64()?;
    let end = match t.opt("request_end").or_else(|| t.opt("resolve_end")) {
        Some(e) => e.f64()?,
        None => {
            return Err(format!(
                "{}.request_end: missing (and no resolve_end)",
                t.path
            ))
        }
    };
    if end < start {
        return Err(format!("{}.request_end is before request_start", t.path));
    }
    let start_ms = start * 1000.0;
    let end_ms = (end - start) * 1000.0;
    if status != "successful" {
        let why = info
            .opt("error")
            .and_then(|e| e.v.as_str().map(str::to_string))
            .unwrap_or_else(|| match status {
                "incomplete" => {
                    "incomplete: the benchmark ended before the request finished".into()
                }
                _ => "errored (no error text recorded)".into(),
            });
        return Ok(ToolRequest {
            start_ms,
            end_ms,
            error: Some(format!("{status}: {why}")),
            ..Default::default()
        });
    }
    let first = t.get("first_token_iteration")?.f64()?;
    let last = t.get("last_token_iteration")?.f64()?;
    if first < start || last < first {
        return Err(format!(
            "{}: token times out of order (request_start {}, first_token_iteration {}, last_token_iteration {})",
            t.path,
            super::shown_num(start),
            super::shown_num(first),
            super::shown_num(last)
        ));
    }
    let tokens = match r.opt("output_metrics").and_then(|m| m.opt("total_tokens")) {
        Some(n) => n.u64()?,
        None => match t.opt("token_iterations").and_then(|n| n.v.as_u64()) {
            Some(n) if n > 0 => n,
            _ => {
                return Err(format!(
                    "{}.output_metrics.total_tokens: missing (and no token_iterations): a token count is never read as zero",
                    r.path
                ))
            }
        },
    };
    let (arrivals, per) = if tokens > 1 && last > first {
        (
            vec![(first - start) * 1000.0, (last - start) * 1000.0],
            Some(vec![1, tokens - 1]),
        )
    } else {
        (vec![(first - start) * 1000.0], Some(vec![tokens.max(1)]))
    };
    super::check_times(
        &format!("{}.last_token_iteration", t.path),
        &arrivals,
        end_ms,
        &format!("{}.request_end", t.path),
    )?;
    Ok(ToolRequest {
        start_ms,
        warmup: false,
        arrivals_ms: arrivals,
        per_arrival: per,
        end_ms: end_ms.max((last - start) * 1000.0),
        tokens: Some(tokens),
        text: r
            .opt("output")
            .and_then(|o| o.v.as_str().map(str::to_string)),
        error: None,
        status: None,
    })
}
