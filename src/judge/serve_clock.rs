//! The serve's own clock from its histograms (vLLM's `/metrics`, `run.json` `serve.metrics`) as the
//! serve-side figure of `[assert.rate] source = "both"`, when the replies carry no per-reply timings.
//!
//! The figure is `1 / mean inter-token latency` over the run's decode steps (the histogram's exact
//! `sum / count`); one figure for the run, not per reply. The buckets only bound the median: the message
//! states the bucket that holds it (`evidence::serve_clock::HistogramDelta::median_bounds`). The deltas
//! cover every request of the run, warmup included. Pure.

use super::{Outcome, Verdict};
use crate::evidence::serve_clock::HistogramDelta;
use crate::vocab::AssertionKind;

/// The inter-token-latency histogram whose mean gives the serve's decode rate.
pub const ITL: &str = "vllm:inter_token_latency_seconds";
/// The time-to-first-token histogram, shown beside it.
pub const TTFT: &str = "vllm:time_to_first_token_seconds";

/// The serve-side rate verdict from the ITL histogram against `floor_tok_s`, or `None` when the run has
/// no such histogram or it observed nothing. Its median is the serve's rate (tok/s).
pub(crate) fn rate_from_histograms(floor_tok_s: f64, acct: &super::Accounting) -> Option<Verdict> {
    let itl = acct.serve_metrics.iter().find(|h| h.name == ITL)?;
    let mean_s = itl.mean()?;
    if mean_s <= 0.0 {
        return None;
    }
    let rate = 1.0 / mean_s;
    let outcome = if rate >= floor_tok_s {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    let mut details = format!(
        "{rate:.2} tok/s from the serve's {ITL} (1 / mean {:.1} ms over {} intervals; {}) (floor {floor_tok_s})",
        mean_s * 1000.0,
        itl.count,
        median_phrase(itl, "ITL"),
    );
    if let Some(ttft) = acct.serve_metrics.iter().find(|h| h.name == TTFT) {
        if let Some(m) = ttft.mean() {
            details.push_str(&format!(
                "; serve TTFT mean {:.1} ms over {} requests, {}",
                m * 1000.0,
                ttft.count,
                median_phrase(ttft, "TTFT")
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
mod tests {
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
