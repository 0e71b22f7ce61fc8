//! The serve's own clock read from its log (issue 15, kind 1): `[assert.rate] server_log = 'REGEX'` names the
//! line a serve prints per request with its decode rate, in a named group `tok_s`, for serves that send no
//! llama.cpp `timings` (llama-cpp-python prints `llama_perf_context_print: eval time = X ms / N runs
//! (Y ms per token, Z tokens per second)` after each completion). Pure: reads the evidence's `serve.log`.
//!
//! Attribution, the one rule: the log is read as the route judge reads it (escapes stripped), and the k-th line
//! the regex matches is the k-th request the serve answered with HTTP 200, in send order, warmup included
//! (a serve logs its warmup replies too). When the number of matching lines is not the number of answered
//! requests, which line is whose cannot be told: no request gets a serve figure, and the verdict says why.
//! A line whose `tok_s` is not a positive number gives its request no figure.

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
    let log = super::strip_escapes(raw);
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
