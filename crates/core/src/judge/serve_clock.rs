//! The serve's own clock, beside the client's, for `[assert.rate] source = "server" | "both"` (the serve's
//! own figures as a witness of the client's, across the llama.cpp, llama-cpp-python and vLLM dialects): llama.cpp's per-reply `timings` are read by the reply parser; this module reads the two other
//! sources, a log line the gate names and vLLM's `/metrics` histograms.
//!
//! ## A log line the gate names
//!
//! `[assert.rate] server_log = 'REGEX'` names the
//! line a serve prints per request with its decode rate, in a named group `tok_s`, for serves that send no
//! llama.cpp `timings` (llama-cpp-python prints `llama_perf_context_print: eval time = X ms / N runs
//! (Y ms per token, Z tokens per second)` after each completion). Pure: reads the `serve.log` text the
//! caller loaded into the evidence (`Evidence::serve_log`), never the file.
//!
//! Attribution, the one rule: the log is read as the route judge reads it (escapes stripped), and the k-th line
//! the regex matches is the k-th request the serve answered with HTTP 200, in send order, warmup included
//! (a serve logs its warmup replies too). When the number of matching lines is not the number of answered
//! requests, which line is whose cannot be told: no request gets a serve figure, and the verdict says why.
//! A line whose `tok_s` is not a positive number gives its request no figure.
//!
//! ## Histograms (vLLM, SGLang, TGI `/metrics`)
//!
//! The serve's own clock from its histograms (`/metrics`, `run.json` `serve.metrics`; the series by engine:
//! `evidence::serve_clock::SERIES`) as the serve-side figure of `[assert.rate] source = "both"`, when the
//! replies carry no per-reply timings.
//!
//! The figure is `1 / mean inter-token latency` over the run's decode steps (the histogram's exact
//! `sum / count`; TGI: its batch decode step, one token per step with one request in flight); one figure for
//! the run, not per reply. The serve's request counter over the same window (`run.json` `serve.counters`) is
//! stated beside the requests the run sent; more than sent means other clients shared the clock (INDETERMINATE). The buckets only bound the median: the message
//! states the bucket that holds it (`evidence::serve_clock::HistogramDelta::median_bounds`). The deltas
//! cover every request of the run, warmup included. Pure.

use std::collections::HashMap;

use regex::Regex;

use crate::analysis::Evidence;

/// The serve-log figures of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogRates {
    /// Decode rate, tok/s, by request `index`.
    pub by_index: HashMap<usize, f64>,
    /// Why a request has no figure: the run-wide problem (no log, a count mismatch), or per request.
    pub problem: Option<String>,
    /// Why one request's line gave no figure, by request `index`.
    pub bad_line: HashMap<usize, String>,
}

/// Reads the serve-log figures of `evidence` with `re` (module doc).
pub fn log_rates(evidence: &Evidence, re: &Regex) -> LogRates {
    let mut out = LogRates::default();
    let Some(raw) = &evidence.serve_log else {
        out.problem = Some("no serve.log in the evidence to read the serve's rate from".into());
        return out;
    };
    if raw.contains(crate::evidence::SERVE_LOG_CUT_MARK) {
        out.problem = Some(
            "serve.log is larger than servegate reads: its rate lines cannot all be read".into(),
        );
        return out;
    }
    let log = crate::text::strip_escapes(raw);
    let hits: Vec<(usize, Option<String>)> = log
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            re.captures(l)
                .map(|c| (i + 1, c.name("tok_s").map(|m| m.as_str().to_string())))
        })
        .collect();
    let mut answered: Vec<usize> = evidence
        .requests
        .iter()
        .filter(|r| r.record.http_status == Some(200) && r.record.transport_error.is_none())
        .map(|r| r.record.index)
        .collect();
    answered.sort_unstable();
    if hits.len() != answered.len() {
        out.problem = Some(format!(
            "serve.log has {} line{} matching /{}/ for {} answered request{}: which line is whose cannot be told",
            hits.len(),
            if hits.len() == 1 { "" } else { "s" },
            re.as_str(),
            answered.len(),
            if answered.len() == 1 { "" } else { "s" },
        ));
        return out;
    }
    for (index, (line, value)) in answered.into_iter().zip(hits) {
        match value.as_deref().map(str::parse::<f64>) {
            Some(Ok(v)) if v.is_finite() && v > 0.0 => {
                out.by_index.insert(index, v);
            }
            _ => {
                out.bad_line.insert(
                    index,
                    format!(
                        "serve.log line {line}: `tok_s` {:?} is no positive rate",
                        value.unwrap_or_default()
                    ),
                );
            }
        }
    }
    out
}

/// Why request `index` has no serve-log figure, if it has none.
pub fn why_none(rates: &LogRates, index: usize) -> String {
    rates
        .problem
        .clone()
        .or_else(|| rates.bad_line.get(&index).cloned())
        .unwrap_or_else(|| "no serve.log line for this request".into())
}

// ---- histograms and counters (vLLM, SGLang, TGI /metrics) ----

use super::verdict::{Outcome, Verdict};
use crate::evidence::serve_clock::{series_of, ClockRole, HistogramDelta};
use crate::vocab::AssertionKind;

/// vLLM's inter-token-latency histogram (one of the [`ClockRole::Itl`] series of
/// `evidence::serve_clock::SERIES`).
pub const ITL: &str = "vllm:inter_token_latency_seconds";
/// vLLM's time-to-first-token histogram, shown beside it.
pub const TTFT: &str = "vllm:time_to_first_token_seconds";

/// The run's delta of the first series of `role` (by `run.json` name), with its series.
fn of_role(
    acct: &super::accounting::Accounting,
    role: ClockRole,
) -> Option<(
    &HistogramDelta,
    &'static crate::evidence::serve_clock::ClockSeries,
)> {
    acct.serve_metrics.iter().find_map(|h| {
        series_of(&h.name)
            .filter(|s| s.role == role)
            .map(|s| (h, s))
    })
}

/// The serve-side rate verdict from the run's inter-token-latency histogram (vLLM's or SGLang's ITL, TGI's
/// decode step) against `floor_tok_s`, or `None` when the run has no such histogram or it observed nothing.
/// Its median is the serve's rate (tok/s), `1 / mean`. When the serve's request counter over the run counted
/// more requests than the run sent, other clients' requests are in its clock: the verdict is INDETERMINATE
/// with the two counts (its figure is not this run's alone).
pub(crate) fn rate_from_histograms(
    floor_tok_s: f64,
    acct: &super::accounting::Accounting,
) -> Option<Verdict> {
    let (itl, series) = of_role(acct, ClockRole::Itl)?;
    let mean_s = itl.mean()?;
    if mean_s <= 0.0 {
        return None;
    }
    let rate = 1.0 / mean_s;
    let mut outcome = if rate >= floor_tok_s {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    let mut details = format!(
        "{rate:.2} tok/s from the serve's {} (1 / mean {:.1} ms over {} {}; {}) (floor {floor_tok_s})",
        itl.name,
        mean_s * 1000.0,
        itl.count,
        series.unit,
        median_phrase(itl, "ITL"),
    );
    if let Some((ttft, _)) = of_role(acct, ClockRole::Ttft) {
        if let Some(m) = ttft.mean() {
            details.push_str(&format!(
                "; serve TTFT mean {:.1} ms over {}, {}",
                m * 1000.0,
                crate::text::counted(ttft.count as usize, "request"),
                median_phrase(ttft, "TTFT")
            ));
        }
    }
    let counted = acct.serve_counters.iter().find(|c| {
        series_of(&c.name)
            .is_some_and(|s| s.role == ClockRole::Requests && s.engine == series.engine)
    });
    if let Some(c) = counted {
        let sent = acct.sent_all;
        details.push_str(&format!(
            "; the serve counted {} {} ({}) for {sent} sent",
            c.delta,
            series_of(&c.name).map_or("requests", |s| s.unit),
            c.name
        ));
        if c.delta > sent as f64 {
            outcome = Outcome::Indeterminate;
            details.push_str(&format!(
                ": {} more than this run sent, so other clients' requests are in its clock and its figure is not this run's alone (run the gate on a serve nothing else uses)",
                c.delta - sent as f64
            ));
        }
    }
    let mut v = Verdict::new(AssertionKind::Rate, outcome, details);
    v.median = Some(rate);
    Some(v)
}

/// `median ITL in (100, 150] ms by the buckets` (or `above 150 ms` for the +Inf bucket).
fn median_phrase(h: &HistogramDelta, what: &str) -> String {
    match h.median_bounds() {
        Some((lo, Some(hi))) => format!(
            "median {what} in ({:.0}, {:.0}] ms by the buckets",
            lo * 1000.0,
            hi * 1000.0
        ),
        Some((lo, None)) => format!("median {what} above {:.0} ms by the buckets", lo * 1000.0),
        None => format!("no {what} observed"),
    }
}

#[cfg(test)]
mod histogram_tests {
    use super::*;

    fn acct(metrics: Vec<HistogramDelta>) -> crate::judge::Accounting {
        crate::judge::Accounting {
            planned: 1,
            sent: 1,
            plan_recorded: true,
            warmup: 0,
            never_sent: vec![],
            failed: vec![],
            serve_failure: None,
            serve_failure_code: None,
            serve_metrics: metrics,
            serve_counters: vec![],
            sent_all: 8,
        }
    }

    fn itl(count: f64, sum: f64) -> HistogramDelta {
        HistogramDelta {
            name: ITL.into(),
            count,
            sum,
            buckets: vec![(Some(0.1), 2.0), (Some(0.15), count), (None, count)],
        }
    }

    #[test]
    fn the_serve_rate_is_one_over_the_mean_itl_and_states_the_median_bucket() {
        // 7 intervals over 0.875 s: mean 125 ms, 8 tok/s.
        let v = rate_from_histograms(5.0, &acct(vec![itl(7.0, 0.875)])).unwrap();
        assert_eq!(v.outcome, Outcome::Pass);
        assert!((v.median.unwrap() - 8.0).abs() < 1e-9);
        assert!(
            v.details()
                .contains("median ITL in (100, 150] ms by the buckets"),
            "{}",
            v.details()
        );
        let slow = rate_from_histograms(9.0, &acct(vec![itl(7.0, 0.875)])).unwrap();
        assert_eq!(slow.outcome, Outcome::Fail);
    }

    #[test]
    fn no_histogram_or_no_observation_gives_no_serve_figure() {
        assert!(rate_from_histograms(1.0, &acct(vec![])).is_none());
        assert!(rate_from_histograms(1.0, &acct(vec![itl(0.0, 0.0)])).is_none());
    }
}
