//! The serve's own clock from Prometheus histograms (vLLM's `/metrics`): the histograms as read before and
//! after a run, and their difference, which is what the serve measured of this run's requests alone.
//!
//! A run with `[serve] clock = "metrics"` (the vLLM profile) reads `/metrics` before the first request and
//! after the last; both texts are kept in the run directory (`metrics.before.txt`, `metrics.after.txt`) and
//! the deltas of the histograms named in [`HISTOGRAMS`] go to `run.json` `serve.metrics`. Pure parsing and
//! arithmetic; the runner does the reads.
//!
//! A histogram's buckets bound its median, they do not give it: with cumulative counts `c(le)` over the
//! bucket upper bounds, the median lies in the first bucket whose `c(le) >= count / 2`, i.e. between the
//! previous bound and that one ([`HistogramDelta::median_bounds`]). The mean (`sum / count`) is exact.
//! The Prometheus text format: <https://prometheus.io/docs/instrumenting/exposition_formats/>.

use serde::{Deserialize, Serialize};

/// The histograms a run records the deltas of: vLLM's time to first token and inter-token latency,
/// both in seconds.
pub const HISTOGRAMS: [&str; 2] = [
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
];

/// One histogram's change over a run, summed over its label sets (model, engine).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramDelta {
    /// The metric name, e.g. `vllm:inter_token_latency_seconds`.
    pub name: String,
    /// Observations added during the run (`_count` after minus before).
    pub count: f64,
    /// Their sum, in the metric's unit (seconds for the two above).
    pub sum: f64,
    /// Cumulative bucket counts added during the run: `(le, count)`, `le` ascending, `+Inf` last as
    /// `f64::INFINITY` (serialised as `null`).
    pub buckets: Vec<(Option<f64>, f64)>,
}

impl HistogramDelta {
    /// `sum / count`, exact; `None` without observations.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The bucket bounds that hold the median: `(lower, upper)` of the first bucket whose cumulative count
    /// reaches half the observations (`lower` = the previous bound, 0 for the first; `upper` = `None` for
    /// `+Inf`). `None` without observations.
    pub fn median_bounds(&self) -> Option<(f64, Option<f64>)> {
        if self.count <= 0.0 {
            return None;
        }
        let half = self.count / 2.0;
        let mut lower = 0.0;
        for (le, c) in &self.buckets {
            if *c >= half {
                return Some((lower, *le));
            }
            if let Some(le) = le {
                lower = *le;
            }
        }
        Some((lower, None))
    }
}

/// One histogram as read: the sums over its label sets of `_bucket{le}`, `_sum`, `_count`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// `(le, cumulative count)` ascending by `le` (`+Inf` as `f64::INFINITY`).
    pub buckets: Vec<(f64, f64)>,
    /// `_sum`.
    pub sum: f64,
    /// `_count`.
    pub count: f64,
}

/// Reads histogram `name` from a Prometheus text exposition, summing over label sets. `None` when no
/// `name_count` sample is present. Lines that do not parse are skipped (comments, other metrics).
pub fn parse_histogram(text: &str, name: &str) -> Option<Histogram> {
    let mut h = Histogram::default();
    let mut seen = false;
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (suffix, rest) = match rest.find(['{', ' ']) {
            Some(i) => rest.split_at(i),
            None => continue,
        };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => match r.rsplit_once('}') {
                Some((l, v)) => (l, v),
                None => continue,
            },
            None => ("", rest),
        };
        let Some(v) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        match suffix {
            "_count" => {
                h.count += v;
                seen = true;
            }
            "_sum" => h.sum += v,
            "_bucket" => {
                let Some(le) = label_value(labels, "le").and_then(parse_le) else {
                    continue;
                };
                match buckets.iter_mut().find(|(b, _)| *b == le) {
                    Some(b) => b.1 += v,
                    None => buckets.push((le, v)),
                }
            }
            _ => {}
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    h.buckets = buckets;
    seen.then_some(h)
}

fn parse_le(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        _ => s.parse().ok(),
    }
}

/// The value of label `key` in a `k="v",k2="v2"` list (no escapes inside values are needed for `le`).
fn label_value<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"'))
    })
}

/// The change of histogram `name` from `before` to `after` (two expositions of one serve). `None` when
/// `after` lacks it; a histogram missing `before` counts from zero (the serve had not observed any yet).
/// Negative deltas (the serve restarted in between) give `None`: they describe no run.
pub fn delta(before: &str, after: &str, name: &str) -> Option<HistogramDelta> {
    let a = parse_histogram(after, name)?;
    let b = parse_histogram(before, name).unwrap_or_default();
    let count = a.count - b.count;
    if count < 0.0 {
        return None;
    }
    let buckets = a
        .buckets
        .iter()
        .map(|(le, c)| {
            let prev = b.buckets.iter().find(|(l, _)| l == le).map_or(0.0, |x| x.1);
            (le.is_finite().then_some(*le), c - prev)
        })
        .collect();
    Some(HistogramDelta {
        name: name.to_string(),
        count,
        sum: a.sum - b.sum,
        buckets,
    })
}

/// The deltas of every [`HISTOGRAMS`] entry present in `after`.
pub fn deltas(before: &str, after: &str) -> Vec<HistogramDelta> {
    HISTOGRAMS
        .iter()
        .filter_map(|n| delta(before, after, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str =
        "# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.\n\
# TYPE vllm:inter_token_latency_seconds histogram\n\
vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"smollm2\"} 1.0\n\
vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.1\",model_name=\"smollm2\"} 2.0\n\
vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"0.15\",model_name=\"smollm2\"} 8.0\n\
vllm:inter_token_latency_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"smollm2\"} 10.0\n\
vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"smollm2\"} 10.0\n";

    #[test]
    fn deltas_subtract_before_from_after_bucket_by_bucket() {
        let after = BEFORE
            .replace(
                "_sum{engine=\"0\",model_name=\"smollm2\"} 1.0",
                "_sum{engine=\"0\",model_name=\"smollm2\"} 3.2",
            )
            .replace(
                "le=\"0.1\",model_name=\"smollm2\"} 2.0",
                "le=\"0.1\",model_name=\"smollm2\"} 3.0",
            )
            .replace(
                "le=\"0.15\",model_name=\"smollm2\"} 8.0",
                "le=\"0.15\",model_name=\"smollm2\"} 25.0",
            )
            .replace(
                "le=\"+Inf\",model_name=\"smollm2\"} 10.0",
                "le=\"+Inf\",model_name=\"smollm2\"} 30.0",
            )
            .replace(
                "_count{engine=\"0\",model_name=\"smollm2\"} 10.0",
                "_count{engine=\"0\",model_name=\"smollm2\"} 30.0",
            );
        let d = delta(BEFORE, &after, "vllm:inter_token_latency_seconds").unwrap();
        assert_eq!(d.count, 20.0);
        assert!((d.sum - 2.2).abs() < 1e-9);
        assert_eq!(
            d.buckets,
            vec![(Some(0.1), 1.0), (Some(0.15), 17.0), (None, 20.0)]
        );
        // 10 of 20 observations are reached in the (0.1, 0.15] bucket: the median lies there.
        assert_eq!(d.median_bounds(), Some((0.1, Some(0.15))));
        assert!((d.mean().unwrap() - 0.11).abs() < 1e-9);
    }

    #[test]
    fn a_histogram_absent_before_counts_from_zero_and_a_restart_gives_none() {
        let d = delta("", BEFORE, "vllm:inter_token_latency_seconds").unwrap();
        assert_eq!(d.count, 10.0);
        assert!(delta(BEFORE, "", "vllm:inter_token_latency_seconds").is_none());
        let restarted = BEFORE.replace("} 10.0\n", "} 1.0\n");
        assert!(delta(BEFORE, &restarted, "vllm:inter_token_latency_seconds").is_none());
    }

    #[test]
    fn no_observations_bound_no_median() {
        let d = HistogramDelta::default();
        assert_eq!(d.median_bounds(), None);
        assert_eq!(d.mean(), None);
    }
}
