//! The raw shapes of a gate's tables as written (serde, `deny_unknown_fields` everywhere: a misspelt key is an
//! error naming the key), before validation ([`super::Validator`]) makes the model of them. Spans are kept where an
//! error must point at a value. The load, drift and regression tables' raw shapes are in their own files.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{
    contract, drift, load, regression, ContentAssert, OnIndeterminate, PairMetric, RateSource,
    Requires, SameAnswersAssert, DEFAULT_RUN_TIMEOUT_S,
};

/// The raw TOML shape. `deny_unknown_fields` everywhere: a misspelt key is an error naming the key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGate {
    pub(super) gate: RawGateMeta,
    #[serde(default)]
    pub(super) requires: Requires,
    #[serde(default)]
    pub(super) vars: BTreeMap<String, Spanned<String>>,
    pub(super) serve: RawServe,
    pub(super) request: RawRequest,
    #[serde(default)]
    pub(super) pair: Option<RawPair>,
    #[serde(default)]
    pub(super) hold: Option<RawHold>,
    #[serde(default)]
    pub(super) record: Option<toml::Table>,
    #[serde(default, rename = "assert")]
    pub(super) assertions: RawAssertions,
    #[serde(default)]
    pub(super) load: Option<load::RawLoad>,
    #[serde(default)]
    pub(super) contract: Option<contract::RawContract>,
    #[serde(default)]
    pub(super) sample: Vec<super::sample::RawSample>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHold {
    #[serde(default)]
    pub(super) lock: Option<String>,
    #[serde(default = "default_hold_wait_s")]
    pub(super) wait_s: Spanned<f64>,
    #[serde(default)]
    pub(super) command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) ticket: Option<Spanned<String>>,
}

fn default_hold_wait_s() -> Spanned<f64> {
    Spanned::new(0..0, 600.0)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPair {
    #[serde(default)]
    pub(super) order: Option<Spanned<Vec<String>>>,
    pub(super) ours: RawArm,
    pub(super) theirs: RawArm,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawArm {
    #[serde(default)]
    pub(super) runtime: String,
    pub(super) command: Spanned<Vec<String>>,
    #[serde(default)]
    pub(super) model_file: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) derived_from: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGateMeta {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) on_indeterminate: OnIndeterminate,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServe {
    #[serde(default)]
    pub(super) command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) url: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) setup: Vec<String>,
    #[serde(default = "default_host")]
    pub(super) host: String,
    #[serde(default)]
    pub(super) port: u16,
    #[serde(default)]
    pub(super) ready: Option<String>,
    #[serde(default)]
    pub(super) engine: Option<String>,
    #[serde(default)]
    pub(super) clock: Option<String>,
    #[serde(default = "default_ready_timeout_s")]
    pub(super) ready_timeout_s: Spanned<f64>,
    #[serde(default = "default_stop_grace_s")]
    pub(super) stop_grace_s: Spanned<f64>,
    #[serde(default)]
    pub(super) log_cap_bytes: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) expect_model: Option<String>,
    #[serde(default)]
    pub(super) log_file: Option<String>,
    #[serde(default)]
    pub(super) pid_file: Option<String>,
    #[serde(default)]
    pub(super) api_key_env: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequest {
    pub(super) model: String,
    #[serde(default)]
    pub(super) served_model: Option<String>,
    pub(super) max_tokens: Spanned<i64>,
    #[serde(default)]
    pub(super) temperature: Option<f64>,
    #[serde(default)]
    pub(super) top_k: Option<u32>,
    #[serde(default)]
    pub(super) top_p: Option<f64>,
    #[serde(default = "default_true")]
    pub(super) stream: bool,
    #[serde(default)]
    pub(super) warmup: u32,
    #[serde(default)]
    pub(super) warmup_requests: Option<Spanned<i64>>,
    #[serde(default = "default_one")]
    pub(super) repeats: Spanned<u32>,
    #[serde(default = "default_request_timeout_s")]
    pub(super) timeout_s: Spanned<f64>,
    #[serde(default = "default_run_timeout_s")]
    pub(super) run_timeout_s: Spanned<f64>,
    #[serde(default)]
    pub(super) system: Option<String>,
    #[serde(default)]
    pub(super) extra: toml::Table,
    pub(super) prompts: Spanned<Vec<String>>,
    #[serde(default)]
    pub(super) untimed: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAssertions {
    pub(super) route: Option<RawRoute>,
    pub(super) rate: Option<RawRate>,
    pub(super) first_token: Option<RawFirstToken>,
    pub(super) tpot: Option<RawTpot>,
    pub(super) ready: Option<RawReady>,
    pub(super) memory: Option<RawMemory>,
    pub(super) cpu: Option<RawCpu>,
    pub(super) sample: Option<BTreeMap<String, super::sample::RawSampleBound>>,
    pub(super) content: Option<ContentAssert>,
    pub(super) known_answer: Option<RawKnownAnswer>,
    pub(super) ratio: Option<RawRatio>,
    pub(super) first_token_ratio: Option<RawBounds>,
    pub(super) same_answers: Option<SameAnswersAssert>,
    pub(super) drift: Option<drift::RawDrift>,
    pub(super) latency: Option<load::RawLatency>,
    pub(super) throughput: Option<load::RawThroughput>,
    pub(super) goodput: Option<load::RawGoodput>,
    pub(super) errors: Option<load::RawErrors>,
    pub(super) consistency: Option<load::RawConsistency>,
    pub(super) parity: Option<load::RawLatency>,
    pub(super) regression: Option<regression::RawRegression>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRatio {
    #[serde(default)]
    pub(super) metric: PairMetric,
    #[serde(default)]
    pub(super) at_least: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) at_most: Option<Spanned<f64>>,
}

/// `[assert.first_token_ratio]`: the bounds of a ratio whose metric is fixed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBounds {
    #[serde(default)]
    pub(super) at_least: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) at_most: Option<Spanned<f64>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    /// One regex or a list (all must appear in the log).
    #[serde(default)]
    pub(super) fast: Option<Spanned<super::load::OneOrMany<String>>>,
    #[serde(default)]
    pub(super) slow: Option<Spanned<String>>,
    /// A response header naming each reply's route (per-request route evidence).
    #[serde(default)]
    pub(super) header: Option<Spanned<String>>,
    /// The regex `header`'s value must match on every judged reply.
    #[serde(default)]
    pub(super) header_fast: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRate {
    pub(super) floor_tok_s: Spanned<f64>,
    #[serde(default)]
    pub(super) source: RateSource,
    #[serde(default)]
    pub(super) agree_pct: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) server_log: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFirstToken {
    pub(super) limit_ms: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTpot {
    pub(super) limit_ms: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReady {
    pub(super) limit_ms: Spanned<f64>,
    #[serde(default)]
    pub(super) load_log: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMemory {
    pub(super) limit_mib: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCpu {
    pub(super) limit_ms_per_token: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKnownAnswer {
    pub(super) matches: Spanned<String>,
    #[serde(default)]
    pub(super) prompt: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) identical: bool,
    #[serde(default)]
    pub(super) untimed: Option<Spanned<bool>>,
}

fn default_host() -> String {
    "127.0.0.1".into()
}

pub(super) fn default_ready() -> String {
    "/health".into()
}

fn default_ready_timeout_s() -> Spanned<f64> {
    Spanned::new(0..0, 120.0)
}

fn default_stop_grace_s() -> Spanned<f64> {
    Spanned::new(0..0, 5.0)
}

fn default_request_timeout_s() -> Spanned<f64> {
    Spanned::new(0..0, 300.0)
}

fn default_run_timeout_s() -> Spanned<f64> {
    Spanned::new(0..0, DEFAULT_RUN_TIMEOUT_S)
}

fn default_true() -> bool {
    true
}

fn default_one() -> Spanned<u32> {
    Spanned::new(0..0, 1)
}
