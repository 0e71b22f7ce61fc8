//! `[load]` and the load assertions (`[assert.latency]`, `[assert.throughput]`, `[assert.goodput]`,
//! `[assert.errors]`, `[assert.consistency]`): the raw TOML tables and their validation into a
//! [`LoadGate`]. Errors name file, line and key like every other part of the gate (docs/load.md).
//!
//! A load gate drives the serve with many requests at once, in one of two loops:
//! * **closed loop**: `concurrency = 16` (or a sweep `[1, 4, 16]`): that many requests in flight, each
//!   slot sending its next request when its previous reply ended;
//! * **open loop**: `rate_rps = 8.0` (or a sweep), `arrival = "poisson" | "constant"`, `seed`, optionally
//!   capped by `max_concurrency`: requests are due on a schedule that does not wait for replies.
//!
//! Each sweep point is its own set of trials (`gate[c=16]::latency`), its own evidence subdirectory
//! (`c16/`, `r8/`) and its own results.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use crate::error::SpecError;

pub use super::load_driver::{Driver, LocustSpec, MAX_LOCUST_WORKERS};

/// One value or a list of values (a sweep).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub(super) fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(x) => vec![x.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLoad {
    #[serde(default)]
    concurrency: Option<Spanned<OneOrMany<i64>>>,
    #[serde(default)]
    rate_rps: Option<Spanned<OneOrMany<f64>>>,
    #[serde(default)]
    arrival: Option<Spanned<String>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    max_concurrency: Option<Spanned<i64>>,
    #[serde(default)]
    requests: Option<Spanned<i64>>,
    #[serde(default)]
    duration_s: Option<Spanned<f64>>,
    #[serde(default)]
    warmup_requests: Option<Spanned<i64>>,
    #[serde(default)]
    dataset: Option<Spanned<String>>,
    #[serde(default)]
    ignore_eos: bool,
    #[serde(default)]
    max_lag_ms: Option<Spanned<f64>>,
    #[serde(default)]
    client_cpus: Option<Spanned<OneOrMany<i64>>>,
    driver: Option<Spanned<String>>,
    #[serde(default)]
    locust_workers: Option<Spanned<i64>>,
    #[serde(default)]
    locust_remote_workers: Option<Spanned<i64>>,
    #[serde(default)]
    locust_master_bind: Option<Spanned<String>>,
    #[serde(default)]
    parity: Option<Spanned<String>>,
}

/// `[assert.latency]`: keys `<metric>_p<NN>_ms` (metric ttft, itl, tpot, e2e; NN 50, 90, 95, 99).
pub(super) type RawLatency = BTreeMap<String, Spanned<f64>>;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThroughput {
    #[serde(default)]
    floor_tok_s: Option<Spanned<f64>>,
    #[serde(default)]
    floor_rps: Option<Spanned<f64>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGoodput {
    #[serde(default)]
    ttft_ms: Option<Spanned<f64>>,
    #[serde(default)]
    tpot_ms: Option<Spanned<f64>>,
    #[serde(default)]
    e2e_ms: Option<Spanned<f64>>,
    at_least: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawErrors {
    #[serde(default = "zero")]
    max_rate: Spanned<f64>,
}

fn zero() -> Spanned<f64> {
    Spanned::new(0..0, 0.0)
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConsistency {
    #[serde(default)]
    rule: Option<super::drift::Rule>,
    #[serde(default)]
    top_k: Option<Spanned<i64>>,
}

/// The load assertions as read from `[assert.*]` (taken out of the gate's assertions before those are
/// validated).
#[derive(Debug, Clone, Default)]
pub(super) struct RawLoadAsserts {
    pub latency: Option<RawLatency>,
    pub throughput: Option<RawThroughput>,
    pub goodput: Option<RawGoodput>,
    pub errors: Option<RawErrors>,
    pub consistency: Option<RawConsistency>,
    /// `[assert.parity]` (same key shape as `[assert.latency]`).
    pub parity: Option<RawLatency>,
}

impl RawLoadAsserts {
    fn any(&self) -> bool {
        self.parity.is_some()
            || self.latency.is_some()
            || self.throughput.is_some()
            || self.goodput.is_some()
            || self.errors.is_some()
            || self.consistency.is_some()
    }
}

/// How request send times are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Closed loop: each of `concurrency` slots sends its next request when its previous one ended.
    Closed,
    /// Open loop, exponential gaps with mean 1 / rate (a Poisson process), seeded.
    Poisson,
    /// Open loop, every 1 / rate seconds.
    Constant,
}

/// One sweep point: a closed loop at `c` requests in flight, or an open loop at `r` requests/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Point {
    /// Closed loop with this many requests in flight (>= 1).
    Concurrency(u32),
    /// Open loop at this many requests per second (> 0).
    Rate(f64),
}

impl Point {
    /// The requests in flight of a closed-loop point (`load.json` `concurrency`); None for an open loop.
    pub fn concurrency(&self) -> Option<u32> {
        match self {
            Point::Concurrency(c) => Some(*c),
            Point::Rate(_) => None,
        }
    }

    /// The arrival rate of an open-loop point, requests per second (`load.json` `rate_rps`); None for a
    /// closed loop.
    pub fn rate_rps(&self) -> Option<f64> {
        match self {
            Point::Rate(r) => Some(*r),
            Point::Concurrency(_) => None,
        }
    }

    /// The label in trial names: `c=16`, `r=8`.
    pub fn label(&self) -> String {
        match self {
            Point::Concurrency(c) => format!("c={c}"),
            Point::Rate(r) => format!("r={}", fmt_num(*r)),
        }
    }

    /// The evidence subdirectory: `c16`, `r8`, `r0.5`.
    pub fn dir(&self) -> String {
        match self {
            Point::Concurrency(c) => format!("c{c}"),
            Point::Rate(r) => format!("r{}", fmt_num(*r)),
        }
    }
}

fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// `[load]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadSpec {
    /// The sweep points, in the gate's order (one point when not a sweep).
    pub points: Vec<Point>,
    /// How send times are scheduled ([`Arrival::Closed`] for `concurrency`).
    pub arrival: Arrival,
    /// Seed of the Poisson schedule (default 1): the same seed gives the same intended send times.
    pub seed: u64,
    /// Open loop: at most this many requests in flight (a request due while the cap is reached waits in
    /// the client's queue: its queue time is counted in its latency).
    pub max_concurrency: Option<u32>,
    /// Judged requests per sweep point (`requests`), or None with `duration_s`.
    pub requests: Option<u32>,
    /// Seconds of sending per sweep point (`duration_s`), or None with `requests`.
    pub duration_s: Option<f64>,
    /// Requests sent first at each point and recorded but not judged (default 0).
    pub warmup_requests: u32,
    /// A JSONL dataset (`{"prompt": ..., "max_tokens": ...}` per line), resolved against the gate's
    /// directory; None: the gate's `[request] prompts`, cycled.
    pub dataset: Option<PathBuf>,
    /// Send `ignore_eos: true` (llama.cpp, vLLM) so every reply runs to `max_tokens`.
    pub ignore_eos: bool,
    /// The client fell behind its schedule when the p99 of send lag (actual − intended send time) exceeds
    /// this, ms (default [`DEFAULT_MAX_LAG_MS`]): the point is void.
    pub max_lag_ms: f64,
    /// `[load] client_cpus`: the CPUs the load client runs on, one pinned current-thread runtime each;
    /// None (the default): one unpinned runtime on the runner's thread, as before the key existed.
    pub client_cpus: Option<ClientCpus>,
    /// Who sends the requests (`driver`, default servegate's own client).
    pub driver: Driver,
    /// `[load] parity`: the tool (`Driver::VllmBench`, `AiPerf` or `GuideLlm`) that runs every point a
    /// second time beside servegate's own client, for `[assert.parity]` (docs/load.md "Cross-tool
    /// parity"); None: no second run.
    pub parity: Option<Driver>,
}

/// `[load] client_cpus`, validated: which CPUs the load client's runtimes are pinned to (one
/// current-thread runtime per CPU; the streams spread over them, the schedule one). Checked against the
/// CPUs the runner may use (`sched_getaffinity`) when the run starts, not here (a spec is judged on
/// machines other than the one it ran on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCpus {
    /// `client_cpus = N`: the first N CPUs (by id) the runner may use.
    Count(u32),
    /// `client_cpus = [0, 2]`: exactly these CPU ids (distinct, in the gate's order: runtime i is pinned
    /// to the i-th).
    List(Vec<u32>),
}

/// Most load-client runtimes (`client_cpus`), and the largest CPU id (`CPU_SETSIZE` − 1 on Linux).
pub const MAX_CLIENT_CPUS: i64 = 1024;

/// Default `[load] max_lag_ms`: 10 ms of send lag at p99.
pub const DEFAULT_MAX_LAG_MS: f64 = 10.0;
/// Most requests one sweep point may plan.
pub const MAX_REQUESTS: i64 = 1_000_000;
/// Largest concurrency.
pub const MAX_CONCURRENCY: i64 = 4096;
/// Smallest and largest `rate_rps` (requests/s): one request per 100 s at the least (a smaller rate would
/// schedule sends past what a clock can hold, and names a directory by hundreds of digits), 100000 at most.
pub const MIN_RATE_RPS: f64 = 0.01;
/// Largest `rate_rps` (requests/s).
pub const MAX_RATE_RPS: f64 = 100_000.0;
/// Most points of one sweep (`concurrency = [...]`, `rate_rps = [...]`).
pub const MAX_POINTS: usize = 64;

/// The keys a `[load] dataset` line may hold.
pub const DATASET_KEYS: [&str; 2] = ["prompt", "max_tokens"];

/// The most bytes of a `[load] dataset` file ([`read_dataset`] reads it whole): 1 GiB, far past any
/// prompt set (at most [`MAX_REQUESTS`] prompts are sent); a larger file or a device is refused unread.
pub const MAX_DATASET_BYTES: u64 = 1 << 30;

/// Reads a `[load] dataset` file: one JSON object per non-blank line, `{"prompt": "...", "max_tokens": N}`
/// (`max_tokens` optional, 1 to 1000000, else `default_max_tokens`). Returns (prompt, max_tokens) per line.
/// Errors name the file and line: unreadable, not JSON, no string `prompt`, a `max_tokens` out of range, a
/// key other than those two (with "did you mean": a dropped `max_token: 2` would silently run at the
/// gate's max_tokens), or no prompt at all.
pub fn read_dataset(
    path: &std::path::Path,
    default_max_tokens: u32,
) -> Result<Vec<(String, u32)>, String> {
    let text = crate::io::input::read_to_string(path, MAX_DATASET_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: not JSON: {e}", at()))?;
        let obj = v
            .as_object()
            .ok_or_else(|| format!("{}: needs a JSON object {{\"prompt\": ...}}", at()))?;
        if let Some(k) = obj.keys().find(|k| !DATASET_KEYS.contains(&k.as_str())) {
            let expected: Vec<String> = DATASET_KEYS.iter().map(|k| format!("`{k}`")).collect();
            return Err(format!(
                "{}: {}",
                at(),
                super::did_you_mean(&format!(
                    "unknown field `{k}`, expected {}",
                    expected.join(" or ")
                ))
            ));
        }
        let prompt = v
            .get("prompt")
            .and_then(|p| p.as_str())
            .ok_or_else(|| format!("{}: needs \"prompt\": a string", at()))?;
        let max_tokens = match v.get("max_tokens") {
            None => default_max_tokens,
            Some(m) => m
                .as_u64()
                .filter(|m| (1..=1_000_000).contains(m))
                .ok_or_else(|| format!("{}: max_tokens must be a whole number 1..=1000000", at()))?
                as u32,
        };
        out.push((prompt.to_string(), max_tokens));
    }
    if out.is_empty() {
        return Err(format!("{}: no prompts", path.display()));
    }
    Ok(out)
}

/// A latency metric of a load run (per request, ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LatencyMetric {
    /// Time to first token.
    Ttft,
    /// Inter-token latency (every gap of every reply pooled).
    Itl,
    /// Time per output token: (E2E − TTFT) / (N − 1).
    Tpot,
    /// End to end.
    E2e,
}

impl LatencyMetric {
    /// Wire name (`ttft`, `itl`, `tpot`, `e2e`).
    pub fn name(self) -> &'static str {
        match self {
            LatencyMetric::Ttft => "ttft",
            LatencyMetric::Itl => "itl",
            LatencyMetric::Tpot => "tpot",
            LatencyMetric::E2e => "e2e",
        }
    }
    /// The registry's metric ([`crate::vocab::Metric`]: its definition, unit and source).
    pub const fn metric(self) -> crate::vocab::Metric {
        match self {
            LatencyMetric::Ttft => crate::vocab::Metric::Ttft,
            LatencyMetric::Itl => crate::vocab::Metric::Itl,
            LatencyMetric::Tpot => crate::vocab::Metric::Tpot,
            LatencyMetric::E2e => crate::vocab::Metric::E2e,
        }
    }
    pub(super) fn from_name(s: &str) -> Option<LatencyMetric> {
        Some(match s {
            "ttft" => LatencyMetric::Ttft,
            "itl" => LatencyMetric::Itl,
            "tpot" => LatencyMetric::Tpot,
            "e2e" => LatencyMetric::E2e,
            _ => return None,
        })
    }
}

/// One `[assert.latency]` bound: percentile `p` of `metric` at most `limit_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyBound {
    /// The gate key, e.g. `ttft_p95_ms`.
    pub key: String,
    /// The metric.
    pub metric: LatencyMetric,
    /// The percentile, 50, 90, 95 or 99.
    pub p: u32,
    /// Limit, ms.
    pub limit_ms: f64,
}

/// `[assert.throughput]`: floors on output tok/s and requests/s over the measured window.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputAssert {
    /// Output tokens per second, floor.
    pub floor_tok_s: Option<f64>,
    /// Completed requests per second, floor.
    pub floor_rps: Option<f64>,
}

/// `[assert.goodput]`: the share of requests meeting every SLO given is at least `at_least`.
#[derive(Debug, Clone, PartialEq)]
pub struct GoodputAssert {
    /// TTFT SLO, ms.
    pub ttft_ms: Option<f64>,
    /// TPOT SLO, ms.
    pub tpot_ms: Option<f64>,
    /// E2E SLO, ms.
    pub e2e_ms: Option<f64>,
    /// Least SLO attainment, 0..=1.
    pub at_least: f64,
}

/// The load assertions, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadAssertions {
    /// `[assert.latency]`.
    pub latency: Vec<LatencyBound>,
    /// `[assert.throughput]`.
    pub throughput: Option<ThroughputAssert>,
    /// `[assert.goodput]`.
    pub goodput: Option<GoodputAssert>,
    /// `[assert.errors] max_rate`: failed requests / planned, at most (0..=1).
    pub errors_max_rate: Option<f64>,
    /// `[assert.consistency]`: greedy replies at concurrency N against those at concurrency 1, judged with the
    /// drift rules (`analysis::drift::compare`; docs/load.md).
    pub consistency: Option<ConsistencyAssert>,
    /// `[assert.parity]`: per percentile, how far the `[load] parity` tool's figure may lie from servegate's
    /// client's on the same schedule; empty without parity.
    pub parity: Vec<ParityBound>,
}

/// `[assert.consistency]`, validated: `rule` (default `logprobs_close`: a reply may part from its
/// concurrency-1 reply by float noise, to a token within the other's top-k) and `top_k` (1-20, default 5;
/// asked for in every request as `"logprobs": true, "top_logprobs": k` when the rule is `logprobs_close`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConsistencyAssert {
    /// How a reply at concurrency N must agree with the concurrency-1 reply to its prompt.
    pub rule: super::drift::Rule,
    /// Alternatives per position asked for and looked in.
    pub top_k: u32,
}

impl LoadAssertions {
    /// Trial names of the declared assertions, in report order.
    pub fn names(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if !self.latency.is_empty() {
            v.push("latency");
        }
        if self.throughput.is_some() {
            v.push("throughput");
        }
        if self.goodput.is_some() {
            v.push("goodput");
        }
        if self.errors_max_rate.is_some() {
            v.push("errors");
        }
        if self.consistency.is_some() {
            v.push("consistency");
        }
        if !self.parity.is_empty() {
            v.push("parity");
        }
        v
    }
}

/// `[load]` and its assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadGate {
    /// `[load]`.
    pub spec: LoadSpec,
    /// The load assertions.
    pub assertions: LoadAssertions,
}

/// The trial of a load trial name after its point (`[c=16]::ttft_p95` -> `ttft_p95`, as
/// [`LoadGate::trial_names`] makes them), or None for a name that is not a load trial's (`rate`).
pub fn load_trial(name: &str) -> Option<&str> {
    name.split_once("]::").map(|(_, trial)| trial)
}

impl LoadGate {
    /// The names of the verdicts (and trials) a load gate gives, in order: for each point, each latency
    /// bound (`[c=16]::ttft_p95`), then `throughput`, `goodput`, `errors`, `consistency` (consistency not at
    /// concurrency 1, the reference it compares with).
    pub fn trial_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.spec.points {
            let l = p.label();
            for b in &self.assertions.latency {
                out.push(format!("[{l}]::{}", b.key.trim_end_matches("_ms")));
            }
            for n in self.assertions.names() {
                if matches!(n, "latency" | "parity")
                    || (n == "consistency" && *p == Point::Concurrency(1))
                {
                    continue;
                }
                out.push(format!("[{l}]::{n}"));
            }
            for b in &self.assertions.parity {
                out.push(format!("[{l}]::{}", parity_name(b)));
            }
        }
        out
    }
}

impl super::GateSpec {
    /// Every trial name of the gate after its name: the declared assertions (`rate`, ...) then a load gate's
    /// per-point verdicts (`[c=16]::ttft_p95`, ...). The trial is `<gate>::<name>`, or `<gate><name>` for a
    /// load name (`gate[c=16]::ttft_p95`): [`trial_id`].
    pub fn trial_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .assertions
            .names()
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(l) = &self.load {
            v.extend(l.trial_names());
        }
        if let Some(c) = &self.contract {
            v.extend(c.trial_names());
        }
        v.extend(self.assertions.sample.iter().map(|s| s.trial_name()));
        v
    }
}

/// The name of an `[assert.parity]` bound's verdict after the point: `parity_ttft_p50`.
pub fn parity_name(b: &ParityBound) -> String {
    format!("parity_{}_p{}", b.metric.name(), b.p)
}

/// One `[assert.parity]` bound: percentile `p` of `metric` through the `[load] parity` tool lies within
/// `limit` of the same percentile through servegate's client.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityBound {
    /// The gate key, e.g. `ttft_p50_ms` or `ttft_p50_pct`.
    pub key: String,
    /// The metric.
    pub metric: LatencyMetric,
    /// The percentile, 50, 90, 95 or 99.
    pub p: u32,
    /// How far apart the two may be.
    pub limit: ParityLimit,
}

/// How far apart the two figures of a parity bound may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParityLimit {
    /// At most this many ms (`<metric>_p<NN>_ms`, >= 0).
    Ms(f64),
    /// At most this percent of servegate's client's figure (`<metric>_p<NN>_pct`, >= 0).
    Pct(f64),
}

impl ParityLimit {
    /// The bound in ms for servegate's client's figure `ours` (ms).
    pub fn ms(self, ours: f64) -> f64 {
        match self {
            ParityLimit::Ms(x) => x,
            ParityLimit::Pct(x) => x / 100.0 * ours.abs(),
        }
    }
}

/// The libtest trial name of assertion `name` of gate `gate`: `gate::rate`, `gate[c=16]::ttft_p95`.
pub fn trial_id(gate: &str, name: &str) -> String {
    if name.starts_with('[') {
        format!("{gate}{name}")
    } else {
        format!("{gate}::{name}")
    }
}

impl super::Validator<'_> {
    pub(super) fn count(
        &self,
        v: &Spanned<i64>,
        key: &str,
        lo: i64,
        hi: i64,
    ) -> Result<u32, SpecError> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            return Err(self.err(
                v.span(),
                key,
                format!("must be a whole number between {lo} and {hi}, got {x}"),
            ));
        }
        Ok(x as u32)
    }

    /// Validates `[load]` and the load assertions; `Ok(None)` when neither is present.
    pub(super) fn load_gate(
        &self,
        raw: Option<RawLoad>,
        asserts: RawLoadAsserts,
        stream: bool,
        default_max_tokens: u32,
    ) -> Result<Option<LoadGate>, SpecError> {
        let Some(raw) = raw else {
            if asserts.any() {
                return Err(self.err(0..0, "assert", "[assert.latency], [assert.throughput], [assert.goodput], [assert.errors], [assert.consistency] and [assert.parity] judge a load run: the gate needs a [load] table"));
            }
            return Ok(None);
        };
        if !stream {
            return Err(self.err(
                0..0,
                "request.stream",
                "a load gate measures TTFT and ITL from the stream: request.stream must be true",
            ));
        }
        let (points, arrival) = self.sweep(&raw)?;
        let spec = self.load_spec(&raw, points, arrival, default_max_tokens)?;
        let assertions = self.load_assertions(asserts, &spec)?;
        Ok(Some(LoadGate { spec, assertions }))
    }

    /// `[load] concurrency` (a closed loop) or `rate_rps` (an open loop, with its `arrival`): the sweep's
    /// points, each once, and how requests arrive.
    fn sweep(&self, raw: &RawLoad) -> Result<(Vec<Point>, Arrival), SpecError> {
        let (points, arrival) = match (&raw.concurrency, &raw.rate_rps) {
            (Some(_), Some(r)) => {
                return Err(self.err(r.span(), "load.rate_rps", "give either `concurrency` (closed loop) or `rate_rps` (open loop), not both"))
            }
            (None, None) => {
                return Err(self.err(0..0, "load", "needs `concurrency = N` (closed loop, or a sweep [1, 4, 16]) or `rate_rps = R` (open loop)"))
            }
            (Some(c), None) => {
                let list = c.get_ref().to_vec();
                if list.is_empty() {
                    return Err(self.err(c.span(), "load.concurrency", "the sweep is empty"));
                }
                if list.len() > MAX_POINTS {
                    return Err(self.err(c.span(), "load.concurrency", format!("a sweep has at most {MAX_POINTS} points, got {}", list.len())));
                }
                let mut points = Vec::new();
                for x in list {
                    if !(1..=MAX_CONCURRENCY).contains(&x) {
                        return Err(self.err(c.span(), "load.concurrency", format!("each concurrency must be between 1 and {MAX_CONCURRENCY}, got {x}")));
                    }
                    points.push(Point::Concurrency(x as u32));
                }
                if let Some(a) = &raw.arrival {
                    return Err(self.err(a.span(), "load.arrival", "`arrival` schedules an open loop (`rate_rps`); a closed loop (`concurrency`) sends when a slot frees"));
                }
                (points, Arrival::Closed)
            }
            (None, Some(r)) => {
                let list = r.get_ref().to_vec();
                if list.is_empty() {
                    return Err(self.err(r.span(), "load.rate_rps", "the sweep is empty"));
                }
                if list.len() > MAX_POINTS {
                    return Err(self.err(r.span(), "load.rate_rps", format!("a sweep has at most {MAX_POINTS} points, got {}", list.len())));
                }
                let mut points = Vec::new();
                for x in list {
                    if !(x.is_finite() && (MIN_RATE_RPS..=MAX_RATE_RPS).contains(&x)) {
                        return Err(self.err(r.span(), "load.rate_rps", format!("each rate must be a number from {MIN_RATE_RPS} to {MAX_RATE_RPS:.0} (requests/s), got {x:?}")));
                    }
                    points.push(Point::Rate(x));
                }
                let arrival = match raw.arrival.as_ref().map(|a| a.get_ref().as_str()) {
                    None | Some("poisson") => Arrival::Poisson,
                    Some("constant") => Arrival::Constant,
                    Some(other) => {
                        let a = raw.arrival.as_ref().map(|a| a.span()).unwrap_or(0..0);
                        return Err(self.err(a, "load.arrival", format!("must be \"poisson\" or \"constant\", got {other:?}")));
                    }
                };
                (points, arrival)
            }
        };
        let mut labels: Vec<String> = points.iter().map(Point::dir).collect();
        labels.sort();
        labels.dedup();
        if labels.len() != points.len() {
            return Err(self.err(0..0, "load", "a sweep point appears twice"));
        }
        Ok((points, arrival))
    }

    /// The rest of `[load]` for the sweep's `points`: the open loop's cap, how many requests a point sends
    /// (within [`MAX_REQUESTS`]), the dataset (read now when it is there) and the schedule's lag bound.
    fn load_spec(
        &self,
        raw: &RawLoad,
        points: Vec<Point>,
        arrival: Arrival,
        default_max_tokens: u32,
    ) -> Result<LoadSpec, SpecError> {
        let max_concurrency = match &raw.max_concurrency {
            None => None,
            Some(_) if arrival == Arrival::Closed => {
                return Err(self.err(
                    0..0,
                    "load.max_concurrency",
                    "caps an open loop (`rate_rps`); a closed loop's `concurrency` is its cap",
                ))
            }
            Some(m) => Some(self.count(m, "load.max_concurrency", 1, MAX_CONCURRENCY)?),
        };
        let (requests, duration_s) = match (&raw.requests, &raw.duration_s) {
            (Some(_), Some(d)) => {
                return Err(self.err(
                    d.span(),
                    "load.duration_s",
                    "give either `requests` or `duration_s`, not both",
                ))
            }
            (None, None) => {
                return Err(self.err(
                    0..0,
                    "load",
                    "needs `requests = N` (per sweep point) or `duration_s = S`",
                ))
            }
            (Some(n), None) => (Some(self.count(n, "load.requests", 1, MAX_REQUESTS)?), None),
            (None, Some(d)) => (None, Some(self.seconds(d, "load.duration_s")?)),
        };
        let warmup_requests = match &raw.warmup_requests {
            None => 0,
            Some(w) => self.count(w, "load.warmup_requests", 0, MAX_REQUESTS)?,
        };
        self.point_fits(raw, &points, requests, duration_s, warmup_requests)?;
        let dataset = self.dataset(raw, default_max_tokens)?;
        let max_lag_ms = match &raw.max_lag_ms {
            None => DEFAULT_MAX_LAG_MS,
            Some(m) => self.positive(m, "load.max_lag_ms", "ms")?,
        };
        let rd = super::load_driver::RawDriver {
            driver: raw.driver.as_ref(),
            workers: raw.locust_workers.as_ref(),
            remote_workers: raw.locust_remote_workers.as_ref(),
            master_bind: raw.locust_master_bind.as_ref(),
            open_loop: raw.rate_rps.as_ref().map(|r| r.span()),
            duration: raw.duration_s.as_ref().map(|d| d.span()),
            constant: raw
                .arrival
                .as_ref()
                .filter(|a| a.get_ref() == "constant")
                .map(|a| a.span()),
            client_cpus: raw.client_cpus.as_ref().map(|c| c.span()),
        };
        let driver = self.load_driver(rd.clone())?;
        let parity = self.load_parity(raw.parity.as_ref(), &driver, &rd)?;
        let client_cpus = self.client_cpus(raw)?;
        if let (Some(c), super::load_driver::Driver::Locust(_)) = (&raw.client_cpus, &driver) {
            return Err(self.err(
                c.span(),
                "load.client_cpus",
                "spreads servegate's own client over CPUs; with driver = \"locust\" the workers send (set `locust_workers`)",
            ));
        }
        let spec = LoadSpec {
            points,
            arrival,
            seed: raw.seed.unwrap_or(1),
            max_concurrency,
            requests,
            duration_s,
            warmup_requests,
            dataset,
            ignore_eos: raw.ignore_eos,
            max_lag_ms,
            client_cpus,
            driver,
            parity,
        };
        Ok(spec)
    }

    /// `[load] client_cpus`: a count (1 to [`MAX_CLIENT_CPUS`]) or a non-empty list of distinct CPU ids
    /// (0 to [`MAX_CLIENT_CPUS`] − 1).
    fn client_cpus(&self, raw: &RawLoad) -> Result<Option<ClientCpus>, SpecError> {
        const KEY: &str = "load.client_cpus";
        let Some(c) = &raw.client_cpus else {
            return Ok(None);
        };
        match c.get_ref() {
            OneOrMany::One(n) => {
                if !(1..=MAX_CLIENT_CPUS).contains(n) {
                    return Err(self.err(c.span(), KEY, format!("a count of CPUs must be between 1 and {MAX_CLIENT_CPUS}, got {n} (or give a list of CPU ids, [0, 1])")));
                }
                Ok(Some(ClientCpus::Count(*n as u32)))
            }
            OneOrMany::Many(list) => {
                if list.is_empty() {
                    return Err(self.err(c.span(), KEY, "the list of CPUs is empty: give CPU ids ([0, 1]), a count, or leave the key out for one runtime"));
                }
                if list.len() as i64 > MAX_CLIENT_CPUS {
                    return Err(self.err(
                        c.span(),
                        KEY,
                        format!("at most {MAX_CLIENT_CPUS} CPUs, got {}", list.len()),
                    ));
                }
                let mut seen = std::collections::BTreeSet::new();
                for x in list {
                    if !(0..MAX_CLIENT_CPUS).contains(x) {
                        return Err(self.err(
                            c.span(),
                            KEY,
                            format!("CPU id {x} is not a CPU id (0 to {})", MAX_CLIENT_CPUS - 1),
                        ));
                    }
                    if !seen.insert(*x) {
                        return Err(self.err(
                            c.span(),
                            KEY,
                            format!("CPU {x} is listed twice: one runtime per CPU"),
                        ));
                    }
                }
                Ok(Some(ClientCpus::List(
                    list.iter().map(|x| *x as u32).collect(),
                )))
            }
        }
    }

    /// A point plans at most [`MAX_REQUESTS`] requests, warmup included.
    fn point_fits(
        &self,
        raw: &RawLoad,
        points: &[Point],
        requests: Option<u32>,
        duration_s: Option<f64>,
        warmup_requests: u32,
    ) -> Result<(), SpecError> {
        // What sizes a point: its judged requests (`requests`, or an open loop's `rate_rps x duration_s`) plus
        // its warmup, each request's schedule, body and evidence held at once.
        let judged_max = match (requests, duration_s) {
            (Some(n), _) => f64::from(n),
            (None, Some(d)) => points
                .iter()
                .map(|p| match p {
                    Point::Rate(r) => (d * r).ceil(),
                    Point::Concurrency(_) => 0.0,
                })
                .fold(0.0, f64::max),
            (None, None) => 0.0,
        };
        if judged_max + f64::from(warmup_requests) > MAX_REQUESTS as f64 {
            let (span, key, what) = match (&raw.duration_s, &raw.warmup_requests) {
                (Some(d), _) if requests.is_none() && judged_max > MAX_REQUESTS as f64 => (
                    d.span(),
                    "load.duration_s",
                    format!("rate_rps x duration_s plans {judged_max:e} requests at one point"),
                ),
                (_, Some(w)) => (
                    w.span(),
                    "load.warmup_requests",
                    format!("{judged_max} judged + {warmup_requests} warmup requests at one point"),
                ),
                _ => (
                    0..0,
                    "load",
                    format!("{judged_max:e} requests at one point"),
                ),
            };
            return Err(self.err(
                span,
                key,
                format!("{what}: a point plans at most {MAX_REQUESTS} requests"),
            ));
        }
        Ok(())
    }

    /// `[load] dataset`: expanded, relative to the gate's directory; a file that is there is read now.
    fn dataset(
        &self,
        raw: &RawLoad,
        default_max_tokens: u32,
    ) -> Result<Option<PathBuf>, SpecError> {
        let dataset = match &raw.dataset {
            None => None,
            Some(d) => {
                let s = self.expand(d.get_ref(), d.span(), "load.dataset", false)?;
                let p = PathBuf::from(&s);
                Some(if p.is_absolute() {
                    p
                } else {
                    self.ctx.gate_dir.join(p)
                })
            }
        };
        if let (Some(p), Some(d)) = (&dataset, &raw.dataset) {
            // A dataset that is there is read now, so a bad line is the gate's error at `check`, never a serve
            // that "never became ready". (One that is missing is refused by `check` and `run`; a re-judged
            // run's copied gate may no longer find it, and judging needs no prompt.)
            if p.is_file() {
                read_dataset(p, default_max_tokens)
                    .map_err(|e| self.err(d.span(), "load.dataset", e))?;
            }
        }
        Ok(dataset)
    }

    /// The load assertions of a gate whose `[load]` is `spec`; at least one.
    fn load_assertions(
        &self,
        asserts: RawLoadAsserts,
        spec: &LoadSpec,
    ) -> Result<LoadAssertions, SpecError> {
        let mut a = LoadAssertions::default();
        if let Some(lat) = asserts.latency {
            a.latency = self.latency(lat)?;
        }
        a.throughput = asserts
            .throughput
            .map(|t| self.throughput(&t))
            .transpose()?;
        a.goodput = asserts.goodput.map(|g| self.goodput(&g)).transpose()?;
        a.errors_max_rate = asserts
            .errors
            .map(|e| self.errors_max_rate(&e))
            .transpose()?;
        a.consistency = asserts
            .consistency
            .map(|c| self.consistency(&c, spec))
            .transpose()?;
        a.parity = self.parity_bounds(asserts.parity, spec)?;
        if a.names().is_empty() {
            return Err(self.err(0..0, "load", "a [load] gate declares no load assertion ([assert.latency], [assert.throughput], [assert.goodput], [assert.errors], [assert.consistency], [assert.parity])"));
        }
        Ok(a)
    }

    /// `[assert.latency]`: at least one bound, each `<metric>_p<NN>_ms = limit`.
    fn latency(&self, lat: RawLatency) -> Result<Vec<LatencyBound>, SpecError> {
        let mut bounds = Vec::new();
        if lat.is_empty() {
            return Err(self.err(0..0, "assert.latency", "declares no bound (keys like ttft_p95_ms = 800, tpot_p50_ms = 40, e2e_p99_ms = 5000)"));
        }
        for (key, v) in lat {
            let full = format!("assert.latency.{key}");
            let parsed = key
                .strip_suffix("_ms")
                .and_then(|k| k.rsplit_once("_p"))
                .and_then(|(m, p)| Some((LatencyMetric::from_name(m)?, p.parse::<u32>().ok()?)))
                .filter(|(_, p)| matches!(p, 50 | 90 | 95 | 99));
            let Some((metric, p)) = parsed else {
                return Err(self.err(v.span(), &full, format!("unknown latency bound `{key}`: keys are <metric>_p<NN>_ms with metric ttft, itl, tpot or e2e and NN 50, 90, 95 or 99 (e.g. ttft_p95_ms)")));
            };
            let limit_ms = self.positive(&v, &full, "ms")?;
            bounds.push(LatencyBound {
                key,
                metric,
                p,
                limit_ms,
            });
        }
        Ok(bounds)
    }

    /// `[assert.throughput]`: a floor of tok/s, requests/s or both.
    fn throughput(&self, t: &RawThroughput) -> Result<ThroughputAssert, SpecError> {
        if t.floor_tok_s.is_none() && t.floor_rps.is_none() {
            return Err(self.err(
                0..0,
                "assert.throughput",
                "declares no floor (floor_tok_s, floor_rps)",
            ));
        }
        Ok(ThroughputAssert {
            floor_tok_s: t
                .floor_tok_s
                .as_ref()
                .map(|v| self.positive(v, "assert.throughput.floor_tok_s", "tok/s"))
                .transpose()?,
            floor_rps: t
                .floor_rps
                .as_ref()
                .map(|v| self.positive(v, "assert.throughput.floor_rps", "requests/s"))
                .transpose()?,
        })
    }

    /// `[assert.goodput]`: the SLOs (at least one) and the share of requests meeting all of them.
    fn goodput(&self, g: &RawGoodput) -> Result<GoodputAssert, SpecError> {
        if g.ttft_ms.is_none() && g.tpot_ms.is_none() && g.e2e_ms.is_none() {
            return Err(self.err(
                0..0,
                "assert.goodput",
                "declares no SLO (ttft_ms, tpot_ms, e2e_ms)",
            ));
        }
        let at_least = *g.at_least.get_ref();
        if !(at_least.is_finite() && at_least > 0.0 && at_least <= 1.0) {
            return Err(self.err(
                g.at_least.span(),
                "assert.goodput.at_least",
                format!("must be a share in (0, 1] (e.g. 0.95), got {at_least}"),
            ));
        }
        Ok(GoodputAssert {
            ttft_ms: g
                .ttft_ms
                .as_ref()
                .map(|v| self.positive(v, "assert.goodput.ttft_ms", "ms"))
                .transpose()?,
            tpot_ms: g
                .tpot_ms
                .as_ref()
                .map(|v| self.positive(v, "assert.goodput.tpot_ms", "ms"))
                .transpose()?,
            e2e_ms: g
                .e2e_ms
                .as_ref()
                .map(|v| self.positive(v, "assert.goodput.e2e_ms", "ms"))
                .transpose()?,
            at_least,
        })
    }

    /// `[assert.errors] max_rate`: a share below 1.
    fn errors_max_rate(&self, e: &RawErrors) -> Result<f64, SpecError> {
        let r = *e.max_rate.get_ref();
        if !(r.is_finite() && (0.0..1.0).contains(&r)) {
            return Err(self.err(
                e.max_rate.span(),
                "assert.errors.max_rate",
                format!("must be a share from 0 up to (not including) 1, got {r}: a rate of 1 or more lets every request fail, so the assertion could never fail"),
            ));
        }
        Ok(r)
    }

    /// `[assert.consistency]`: a sweep with concurrency 1 and another point; `top_k` only for `logprobs_close`.
    fn consistency(
        &self,
        c: &RawConsistency,
        spec: &LoadSpec,
    ) -> Result<ConsistencyAssert, SpecError> {
        if !spec.points.contains(&Point::Concurrency(1)) || spec.points.len() < 2 {
            return Err(self.err(0..0, "assert.consistency", "compares replies at concurrency N with those at concurrency 1: the sweep needs 1 and at least one more point (concurrency = [1, 4])"));
        }
        let rule = c.rule.unwrap_or(super::drift::Rule::LogprobsClose);
        if let (super::drift::Rule::Exact, Some(k)) = (rule, &c.top_k) {
            return Err(self.err(
                k.span(),
                "assert.consistency.top_k",
                "is the logprobs_close rule's (each side's token within the other's top k); rule = \"exact\" compares token for token and would ignore it: drop top_k or use rule = \"logprobs_close\"",
            ));
        }
        Ok(ConsistencyAssert {
            rule,
            top_k: self.top_k(&c.top_k, "assert.consistency.top_k")?,
        })
    }
}
