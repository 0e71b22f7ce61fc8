//! The gate spec: `gates/NAME.toml`, parsed, validated and expanded. Owns the TOML schema and every check that
//! can be made before anything starts. Pure apart from [`load`] reading the file and [`GateSpec::requirements`]
//! looking at the file system and `PATH`.
//!
//! The fully commented reference is `docs/gate-format.md`. Unknown keys are errors; every error names the file,
//! the line and column, and the key (toml's own spans).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use crate::error::SpecError;

pub mod regression;
use crate::vocab::{AssertionKind, Metric, Role};
pub use regression::{BaselineServe, RegressionAssert, RegressionBaseline};

pub mod detect;
pub mod drift;
pub mod interleave;
pub mod load;
pub mod matrix;
pub mod profile;
pub(crate) mod record;

pub use record::RunRecordSpec;

/// Default `[serve] log_cap_bytes`: `serve.log`'s cap on disk, bytes (32 MiB: 16 MiB of head and 16 of
/// tail kept; under the 64 MiB judging reads). See `evidence::log_cap`.
pub const DEFAULT_LOG_CAP_BYTES: u64 = 32 << 20;
/// Smallest `[serve] log_cap_bytes` a gate may set, bytes (64 KiB: room for a startup banner and the last
/// lines).
pub const MIN_LOG_CAP_BYTES: u64 = 64 << 10;

/// Largest duration a gate may give in seconds (`timeout_s`, `ready_timeout_s`, `stop_grace_s`, `wait_s`).
pub const MAX_SECONDS: f64 = 1_000_000.0;
/// Lines no route or answer pattern should match: a pattern that matches two or more of them (`.`, `\w`,
/// `\b|x`, `[a-z]`) matches nearly any log line or reply, so it is refused like one that matches the empty
/// text.
pub const NONSENSE_LINES: [&str; 4] = ["qzxv", "wjkp 4821", "~#~", "ÆØÅ ĳ"];

/// Most requests one gate may send (warmup + repeats rounds of all prompts).
pub const MAX_REQUESTS: u64 = 100_000;
/// Largest gate file read, bytes (1 MiB). A gate is a few hundred bytes to a few KiB; a bigger file is a
/// mistake (a log or a model given as the gate) and is refused before it is read whole.
pub const MAX_GATE_BYTES: u64 = 1 << 20;
/// Keys `[request] extra` may not set: the gate's own `[request]` fields (or the runner) set them, and an
/// `extra` value would silently override what the gate says it asks (`extra.max_tokens` over `max_tokens`).
pub const RESERVED_EXTRA: [&str; 10] = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_k",
    "top_p",
    "stream",
    "stream_options",
    "n",
];

/// The raw TOML shape. `deny_unknown_fields` everywhere: a misspelt key is an error naming the key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    gate: RawGateMeta,
    #[serde(default)]
    requires: Requires,
    #[serde(default)]
    vars: BTreeMap<String, Spanned<String>>,
    serve: RawServe,
    request: RawRequest,
    #[serde(default)]
    pair: Option<RawPair>,
    #[serde(default)]
    hold: Option<RawHold>,
    #[serde(default)]
    record: Option<toml::Table>,
    #[serde(default, rename = "assert")]
    assertions: RawAssertions,
    #[serde(default)]
    load: Option<load::RawLoad>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHold {
    #[serde(default)]
    lock: Option<String>,
    #[serde(default = "default_hold_wait_s")]
    wait_s: Spanned<f64>,
    #[serde(default)]
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    ticket: Option<Spanned<String>>,
}

fn default_hold_wait_s() -> Spanned<f64> {
    Spanned::new(0..0, 600.0)
}

/// `[hold]`: how the gate holds its device for the whole run (all arms of a pair): an exclusive lock file
/// (`lock`), an external hold wrapper the serve runs under (`command`), and/or a ticket file that must exist
/// before the gate starts (`ticket`; docs/gate-format.md, docs/ci.md). At least one of the three.
#[derive(Debug, Clone, PartialEq)]
pub struct HoldSpec {
    /// The lock file (`~` and placeholders expanded), e.g. `/run/lock/npu.lock`; None without `lock`.
    pub lock: Option<PathBuf>,
    /// Seconds to wait for the lock before failing the gate (default 600).
    pub wait_s: f64,
    /// The hold wrapper's argv (`["npu-hold", "--"]`): the runner starts every serve as `wrapper... serve
    /// argv...`; empty without `command`.
    pub command: Vec<String>,
    /// The ticket file (`~` expanded, e.g. `/home/ci/NPU-TOKEN`) that must exist or the gate refuses to start
    /// (`--allow-no-hold` / `SERVEGATE_ALLOW_NO_HOLD=1` for a lane that holds the device some other way).
    pub ticket: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPair {
    #[serde(default)]
    order: Option<Spanned<Vec<String>>>,
    ours: RawArm,
    theirs: RawArm,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArm {
    #[serde(default)]
    runtime: String,
    command: Spanned<Vec<String>>,
    #[serde(default)]
    model_file: Option<Spanned<String>>,
    #[serde(default)]
    derived_from: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGateMeta {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    on_indeterminate: OnIndeterminate,
}

/// `[gate] on_indeterminate`: what an indeterminate verdict does to the trial. `"fail"` (the default): the
/// trial fails with `INDETERMINATE` in its message and the run exits 8. `"pass"`: the trial does not fail the
/// run, but every output still shows it as indeterminate, never as passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnIndeterminate {
    /// Fail the trial (the default).
    #[default]
    Fail,
    /// Let the trial through, still shown as indeterminate.
    Pass,
}

/// `on_incomparable` of `[assert.regression]` and `[assert.drift]`: what a baseline that no longer applies
/// (what the gate fixes or the machine differs from the baseline's: `judge::Outcome::Incomparable`) does to
/// the trial. `"fail"` (the default): the trial fails (exit 9) naming the fields and the bless command that
/// renews the baseline. `"skip"`: the trial is skipped with that reason (counted as `not compared: baseline
/// does not apply`), and still fails under `SERVEGATE_STRICT=1`. Never a pass either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnIncomparable {
    /// Fail the trial (the default).
    #[default]
    Fail,
    /// Skip the trial, with the reason.
    Skip,
}

/// `[requires]`: when unmet, every trial of the gate is ignored with the reason (or failed under
/// `SERVEGATE_STRICT=1`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Requires {
    /// Paths that must exist (`~` expands), e.g. `/dev/accel/accel0`.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Commands that must be found on `PATH` (or be an existing path).
    #[serde(default)]
    pub commands: Vec<String>,
    /// Environment variables that must be set.
    #[serde(default)]
    pub env: Vec<String>,
    /// Runtimes that must be provisioned: `"vllm"` is met when the marker `{cache}/provisioned/vllm`
    /// (written last by `scripts/provision-vllm.sh`) exists; unmet, the reason names that script.
    #[serde(default)]
    pub provisioned: Vec<String>,
    /// The marker paths of `provisioned`, resolved against `{cache}` (filled by validation).
    #[serde(skip)]
    pub provisioned_markers: Vec<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServe {
    #[serde(default)]
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    url: Option<Spanned<String>>,
    #[serde(default)]
    setup: Vec<String>,
    #[serde(default = "default_host")]
    host: String,
    #[serde(default)]
    port: u16,
    #[serde(default)]
    ready: Option<String>,
    #[serde(default)]
    engine: Option<String>,
    #[serde(default)]
    clock: Option<String>,
    #[serde(default = "default_ready_timeout_s")]
    ready_timeout_s: Spanned<f64>,
    #[serde(default = "default_stop_grace_s")]
    stop_grace_s: Spanned<f64>,
    #[serde(default)]
    log_cap_bytes: Option<Spanned<i64>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    expect_model: Option<String>,
    #[serde(default)]
    log_file: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    model: String,
    #[serde(default)]
    served_model: Option<String>,
    max_tokens: Spanned<i64>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_k: Option<u32>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default = "default_true")]
    stream: bool,
    #[serde(default)]
    warmup: u32,
    #[serde(default = "default_one")]
    repeats: Spanned<u32>,
    #[serde(default = "default_request_timeout_s")]
    timeout_s: Spanned<f64>,
    #[serde(default = "default_run_timeout_s")]
    run_timeout_s: Spanned<f64>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    extra: toml::Table,
    prompts: Spanned<Vec<String>>,
    #[serde(default)]
    untimed: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAssertions {
    route: Option<RawRoute>,
    rate: Option<RawRate>,
    first_token: Option<RawFirstToken>,
    tpot: Option<RawTpot>,
    content: Option<ContentAssert>,
    known_answer: Option<RawKnownAnswer>,
    ratio: Option<RawRatio>,
    same_answers: Option<SameAnswersAssert>,
    drift: Option<drift::RawDrift>,
    latency: Option<load::RawLatency>,
    throughput: Option<load::RawThroughput>,
    goodput: Option<load::RawGoodput>,
    errors: Option<load::RawErrors>,
    consistency: Option<load::RawConsistency>,
    regression: Option<regression::RawRegression>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRatio {
    #[serde(default)]
    metric: PairMetric,
    #[serde(default)]
    at_least: Option<Spanned<f64>>,
    #[serde(default)]
    at_most: Option<Spanned<f64>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    fast: Spanned<String>,
    #[serde(default)]
    slow: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRate {
    floor_tok_s: Spanned<f64>,
    #[serde(default)]
    source: RateSource,
    #[serde(default)]
    agree_pct: Option<Spanned<f64>>,
    #[serde(default)]
    server_log: Option<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFirstToken {
    limit_ms: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTpot {
    limit_ms: Spanned<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKnownAnswer {
    matches: Spanned<String>,
    #[serde(default)]
    prompt: Option<Spanned<String>>,
    #[serde(default)]
    identical: bool,
    #[serde(default)]
    untimed: Option<Spanned<bool>>,
}

fn default_host() -> String {
    "127.0.0.1".into()
}
fn default_ready() -> String {
    "/health".into()
}

/// The `[serve] engine` of a raw gate and its profile, or a file:line:key error (spec/profile.rs).
/// `"auto"` is the same as no engine: detected after readiness (spec/detect.rs).
fn engine_of(raw: Option<&str>) -> Result<Option<profile::Engine>, String> {
    raw.filter(|e| *e != "auto")
        .map(profile::Engine::parse)
        .transpose()
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
/// Default whole-run deadline of `[request] run_timeout_s`, seconds (one hour).
pub const DEFAULT_RUN_TIMEOUT_S: f64 = 3600.0;
fn default_run_timeout_s() -> Spanned<f64> {
    Spanned::new(0..0, DEFAULT_RUN_TIMEOUT_S)
}
fn default_true() -> bool {
    true
}
fn default_one() -> Spanned<u32> {
    Spanned::new(0..0, 1)
}

/// Which decode-rate figure the `rate` assertion judges.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateSource {
    /// The client's decode rate from SSE arrival times (`measure::Figures::decode_tok_s`). Default.
    #[default]
    Client,
    /// llama.cpp's own `timings.predicted_per_second` (`measure::Figures::server_decode_tok_s`).
    Server,
    /// Both: the floor must hold on the client's median and on the serve's, and the two medians must agree
    /// within `agree_pct` (the serve's clock witnesses the client's: a buffering proxy or fake streaming
    /// shows as disagreement).
    Both,
}

/// Default `[assert.rate] agree_pct`: client and serve decode medians within 20 % of the serve's
/// (the same tolerance as the `client_server_disagree` warning, `measure::DECODE_MISMATCH_RATIO`).
pub const DEFAULT_AGREE_PCT: f64 = 20.0;

/// How the serve is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum ServeMode {
    /// Started and stopped by the runner: argv with placeholders expanded except `{port}`, which the runner fills.
    Command(Vec<String>),
    /// Already running at this base URL (`http://host:port`, no trailing slash).
    Url(String),
}

/// `[serve]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSpec {
    /// Command or URL.
    pub mode: ServeMode,
    /// Optional idempotent provisioning command (argv, placeholders expanded), run before the serve starts.
    pub setup: Vec<String>,
    /// Host the serve listens on (`{host}`), default `127.0.0.1`.
    pub host: String,
    /// Port; 0 = the runner picks a free one (`{port}`).
    pub port: u16,
    /// Readiness path polled until HTTP 200: the gate's `ready`, else the engine profile's, else `/health`.
    pub ready_path: String,
    /// `[serve] engine` (spec/profile.rs): the dialect whose defaults the gate inherits; `None` = unstated.
    pub engine: Option<profile::Engine>,
    /// Where the serve's own clock comes from: the gate's `clock`, else the profile's, else `timings`.
    pub clock: profile::ServeClock,
    /// Whether the gate set `clock` itself (without an engine, a detected engine's clock applies otherwise:
    /// spec/detect.rs).
    pub clock_set: bool,
    /// Seconds to wait for readiness, default 120.
    pub ready_timeout_s: f64,
    /// Seconds between SIGTERM and SIGKILL when stopping, default 5.
    pub stop_grace_s: f64,
    /// `serve.log`'s cap on disk, bytes (`log_cap_bytes`; default 32 MiB, at least 64 KiB):
    /// `evidence::log_cap`.
    pub log_cap_bytes: u64,
    /// Extra environment for the serve and setup (placeholders expanded).
    pub env: BTreeMap<String, String>,
    /// When set, `/v1/models` must list a model id containing this (a different server answering fails).
    pub expect_model: Option<String>,
    /// For `url` serves: a log file of the serve to copy into the evidence for `route`.
    pub log_file: Option<PathBuf>,
    /// Name of an environment variable holding an API key, sent as `Authorization: Bearer <key>`. The key
    /// itself is never written anywhere (evidence, logs, JUnit, records, messages).
    pub api_key_env: Option<String>,
}

/// `[request]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    /// The model as the gate names it (`{model}`, `~` expanded); a path or a name.
    pub model: String,
    /// The `model` field sent in the body; defaults to `model`.
    pub served_model: String,
    /// OpenAI `max_tokens`, >= 1.
    pub max_tokens: u32,
    /// OpenAI `temperature`; omitted from the body when unset.
    pub temperature: Option<f64>,
    /// `top_k` (llama.cpp, vLLM); omitted when unset. Pair gates must pin it: runtimes' defaults differ.
    pub top_k: Option<u32>,
    /// OpenAI `top_p`; omitted when unset.
    pub top_p: Option<f64>,
    /// Streamed (SSE) with `stream_options.include_usage`, default true.
    pub stream: bool,
    /// Requests sent first and recorded but not judged.
    pub warmup: u32,
    /// How many times the prompt list is sent (judged).
    pub repeats: u32,
    /// Per-request timeout, seconds.
    pub timeout_s: f64,
    /// Whole-run deadline for the requests, seconds, counted from the first request (default
    /// [`DEFAULT_RUN_TIMEOUT_S`]): past it no request is sent and the run fails with `run_timeout`.
    pub run_timeout_s: f64,
    /// Optional system message.
    pub system: Option<String>,
    /// Merged into the request body last (e.g. `chat_template_kwargs`).
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// The prompts, each sent as one user message.
    pub prompts: Vec<String>,
    /// Prompts asked for their answer only (`[request] untimed`, and the prompt of `[assert.known_answer]`
    /// with `untimed = true`): their replies are judged by `content` and `known_answer` but never feed
    /// `rate`, `first_token`, `tpot` or `regression` (a one-word reply is one inter-token gap at best, so
    /// its "rate" is that gap's jitter). Each is one of `prompts`, exactly; at least one prompt stays timed.
    pub untimed: Vec<String>,
}

impl RequestSpec {
    /// True when replies to `prompt` are timed (it is not one of [`RequestSpec::untimed`]).
    pub fn timed(&self, prompt: &str) -> bool {
        !self.untimed.iter().any(|u| u == prompt)
    }

    /// True when the gate turns the model's thinking off: `[request.extra.chat_template_kwargs]
    /// enable_thinking = false` (the switch of Qwen3-style chat templates, passed through by llama.cpp, vLLM
    /// and SGLang). A reply that still thinks then fails `content` (`thinking_not_off`).
    pub fn thinking_off(&self) -> bool {
        self.extra
            .get("chat_template_kwargs")
            .and_then(|k| k.get("enable_thinking"))
            .and_then(serde_json::Value::as_bool)
            == Some(false)
    }
}

/// `[assert.route]`: regexes on the serve log.
#[derive(Debug, Clone)]
pub struct RouteAssert {
    /// Must be found.
    pub fast: Regex,
    /// Must not be found; both found counts as the slow route.
    pub slow: Option<Regex>,
}

/// `[assert.rate]`: median decode rate >= floor.
#[derive(Debug, Clone)]
pub struct RateAssert {
    /// Floor, tok/s, > 0.
    pub floor_tok_s: f64,
    /// Which figure is judged.
    pub source: RateSource,
    /// With `source = "both"`: the most the client's median may differ from the serve's, percent of the
    /// serve's (> 0; default [`DEFAULT_AGREE_PCT`]). Only allowed with `source = "both"`.
    pub agree_pct: f64,
    /// `server_log`: the serve's own decode rate read from a line of `serve.log` (a regex with a named group
    /// `tok_s`, e.g. llama-cpp-python's `llama_perf_context_print: eval time = ... tokens per second)`) instead
    /// of llama.cpp `timings`; the k-th matching line is the k-th answered request's
    /// (`judge::serve_clock`, docs/metrics.md). Only with `source = "server"` or `"both"`.
    pub server_log: Option<Regex>,
}

/// `[assert.first_token]`: median TTFT <= limit.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstTokenAssert {
    /// Limit, ms, > 0.
    pub limit_ms: f64,
}

/// `[assert.tpot]`: median TPOT <= limit (TPOT = (e2e − ttft) / (N − 1) per reply, ms; docs/metrics.md).
#[derive(Debug, Clone, PartialEq)]
pub struct TpotAssert {
    /// Limit, ms, > 0.
    pub limit_ms: f64,
}

/// `[assert.content]`: every judged reply has non-empty, non-degenerate content and no error.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ContentAssert {}

/// `[assert.known_answer]`: replies to the known-answer prompt match a regex (and are identical).
#[derive(Debug, Clone)]
pub struct KnownAnswerAssert {
    /// Every judged reply (to `prompt`, if set) must match.
    pub matches: Regex,
    /// Only replies to this prompt are judged; it must be one of the request's prompts.
    pub prompt: Option<String>,
    /// All judged replies must be the same text.
    pub identical: bool,
}

/// Which figure a pair's `ratio` compares.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairMetric {
    /// Decode rate, tok/s (`measure::Figures::decode_tok_s`). Default.
    #[default]
    Decode,
    /// TTFT, ms (`measure::Figures::ttft_ms`).
    FirstToken,
}

impl PairMetric {
    /// The registry metric it names (wire `decode` is the decode rate, `first_token` the TTFT).
    pub const fn metric(self) -> crate::vocab::Metric {
        match self {
            PairMetric::Decode => crate::vocab::Metric::DecodeRate,
            PairMetric::FirstToken => crate::vocab::Metric::Ttft,
        }
    }
}

/// `[assert.ratio]` of a pair gate: theirs / ours of the metric's medians within bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct RatioAssert {
    /// The metric compared.
    pub metric: PairMetric,
    /// Lower bound of theirs / ours (inclusive), if any.
    pub at_least: Option<f64>,
    /// Upper bound (inclusive), if any.
    pub at_most: Option<f64>,
}

/// `[assert.same_answers]` of a pair gate: for every prompt (or the one named), every reply of both runtimes
/// is the same text.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SameAnswersAssert {
    /// Only this prompt's replies are compared.
    #[serde(default)]
    pub prompt: Option<String>,
    /// `exact` (default: the same text) or `logprobs_close` (the arms' tokens compared as `[assert.drift]`
    /// does, docs/drift.md).
    #[serde(default)]
    pub rule: drift::Rule,
    /// Alternatives per position for `logprobs_close`, 1-20 (default 5; [`SameAnswersAssert::top_k`]).
    #[serde(default)]
    pub top_k: Option<u32>,
}

impl SameAnswersAssert {
    /// `top_k`, or [`drift::DEFAULT_TOP_K`].
    pub fn top_k(&self) -> u32 {
        self.top_k.unwrap_or(drift::DEFAULT_TOP_K)
    }
}

/// One arm's runtime of a pair gate.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmSpec {
    /// `ours` or `theirs`.
    pub role: String,
    /// What runtime this is, for people and records (e.g. `llama.cpp b11434, 1 thread`).
    pub runtime: String,
    /// The serve argv (placeholders expanded except `{port}` / `{host}`).
    pub command: Vec<String>,
    /// The model file this arm loads (must appear in its command); both arms must load the same file.
    pub model_file: String,
    /// `derived_from`: the file `model_file` (then a directory, e.g. vLLM's float32 copy of a GGUF) was
    /// derived from. The pair's same-file check uses this file, and the directory's
    /// `servegate-provenance.json` must name its sha256 (`source_sha256`; scripts/gguf_to_hf.py).
    pub derived_from: Option<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
}

/// `[pair]`: two runtimes on one model file, run in arms (default order theirs, ours, ours, theirs), each arm
/// starting its serve, sending all requests and stopping it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairSpec {
    /// `ours`.
    pub ours: ArmSpec,
    /// `theirs`.
    pub theirs: ArmSpec,
    /// Arm order, each `ours` or `theirs`; both appear at least once.
    pub order: Vec<String>,
}

impl PairSpec {
    /// The arm spec of a role name (`order` holds only [`Role`] wire names: validated).
    pub fn arm(&self, role: &str) -> &ArmSpec {
        self.arm_of(Role::from_name(role).unwrap_or(Role::Theirs))
    }

    /// The arm spec of a role.
    pub fn arm_of(&self, role: Role) -> &ArmSpec {
        match role {
            Role::Ours => &self.ours,
            Role::Theirs => &self.theirs,
        }
    }
}

/// The assertions a gate declares; each present one becomes a trial `<gate>::<name>`.
#[derive(Debug, Clone, Default)]
pub struct Assertions {
    /// `route`
    pub route: Option<RouteAssert>,
    /// `rate`
    pub rate: Option<RateAssert>,
    /// `first_token`
    pub first_token: Option<FirstTokenAssert>,
    /// `tpot`
    pub tpot: Option<TpotAssert>,
    /// `content`
    pub content: Option<ContentAssert>,
    /// `known_answer`
    pub known_answer: Option<KnownAnswerAssert>,
    /// `ratio` (pair gates)
    pub ratio: Option<RatioAssert>,
    /// `same_answers` (pair gates)
    pub same_answers: Option<SameAnswersAssert>,
    /// `drift` (docs/drift.md)
    pub drift: Option<drift::DriftAssert>,
    /// `regression` (against a stored or interleaved baseline; docs/regression.md)
    pub regression: Option<RegressionAssert>,
}

impl Assertions {
    /// True when the gate declares this assertion.
    pub fn declares(&self, kind: AssertionKind) -> bool {
        match kind {
            AssertionKind::Route => self.route.is_some(),
            AssertionKind::Rate => self.rate.is_some(),
            AssertionKind::FirstToken => self.first_token.is_some(),
            AssertionKind::Tpot => self.tpot.is_some(),
            AssertionKind::Content => self.content.is_some(),
            AssertionKind::KnownAnswer => self.known_answer.is_some(),
            AssertionKind::Ratio => self.ratio.is_some(),
            AssertionKind::SameAnswers => self.same_answers.is_some(),
            AssertionKind::Drift => self.drift.is_some(),
            // A load gate's verdicts are named per sweep point (`GateSpec::trial_names`).
            AssertionKind::Load => false,
            AssertionKind::Regression => self.regression.is_some(),
        }
    }

    /// The declared assertions, in report order ([`AssertionKind::ALL`]'s).
    pub fn kinds(&self) -> Vec<AssertionKind> {
        AssertionKind::ALL
            .iter()
            .copied()
            .filter(|k| self.declares(*k))
            .collect()
    }

    /// Wire names of the declared assertions, in report order.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds().into_iter().map(AssertionKind::name).collect()
    }
}

/// A validated gate.
#[derive(Debug, Clone)]
pub struct GateSpec {
    /// `gate.name`: `[A-Za-z0-9_.-]+`, used in trial names and the evidence path.
    pub name: String,
    /// `gate.description`.
    pub description: String,
    /// The file it was read from.
    pub file: PathBuf,
    /// The TOML text as read (copied into the evidence).
    pub source: String,
    /// `[requires]`.
    pub requires: Requires,
    /// `[serve]`.
    pub serve: ServeSpec,
    /// `[request]`.
    pub request: RequestSpec,
    /// `[assert.*]`.
    pub assertions: Assertions,
    /// `[pair]`, for a paired comparison of two runtimes; then `[serve]` holds the settings both arms share
    /// and no `command`/`url`.
    pub pair: Option<PairSpec>,
    /// `[hold]`: the device lock taken for the whole run.
    pub hold: Option<HoldSpec>,
    /// `[record]`: what a record written from this gate's runs (`servegate run --record ID`) cannot learn from
    /// the evidence (`record::RunRecordSpec` without `id` and `metric`; `model_file` defaults to the model).
    pub record: Option<toml::Table>,
    /// `[gate] on_indeterminate`: `fail` (default) or `pass`.
    pub on_indeterminate: OnIndeterminate,
    /// `[load]` and the load assertions (docs/load.md): a load gate.
    pub load: Option<load::LoadGate>,
    /// The 1-based line of [`Self::source`] declaring each declared assertion, read from the TOML spans at
    /// parse time ([`line_of`]'s rule: the `floor_tok_s` line for `rate`, else the `[assert.X]` header or the
    /// inline key). Read it with [`Self::decl_line`].
    pub decl_lines: BTreeMap<AssertionKind, usize>,
}

impl GateSpec {
    /// What a run of this gate must read before it starts a serve and cannot: its `[load] dataset` missing or
    /// unreadable (or, read now, a bad line), as a spec error at the `dataset` line. `check`, `run` and the
    /// harness refuse the gate with it (exit 3), so a bad dataset is never reported as a serve that "never
    /// became ready". None when there is nothing to read or it reads.
    pub fn unreadable_input(&self) -> Option<SpecError> {
        let load = self.load.as_ref()?;
        let path = load.spec.dataset.as_ref()?;
        let e = load::read_dataset(path, self.request.max_tokens).err()?;
        let span = toml_edit::ImDocument::parse(self.source.as_str())
            .ok()
            .and_then(|d| key_span(d.as_table(), "load.dataset"))
            .unwrap_or(0..0);
        Some(SpecError::at(
            &self.file,
            &self.source,
            span,
            "load.dataset",
            e,
        ))
    }

    /// The `record::RunRecordSpec` for `id` and `metric` (`decode_rate` or `first_token`) from `[record]`.
    /// Errors name the key.
    pub fn record_spec(&self, id: &str, metric: &str) -> Result<record::RunRecordSpec, String> {
        let Some(table) = &self.record else {
            return Err(format!("{}: the gate has no [record] table (model_name, weights, device, route, engine, what_would_make_it_wrong)", self.file.display()));
        };
        let mut t = table.clone();
        for k in ["id", "metric"] {
            if t.contains_key(k) {
                return Err(format!("record.{k} is given on the command line (`servegate run --record ID`), not in the gate"));
            }
        }
        t.insert("id".into(), toml::Value::String(id.into()));
        t.insert("metric".into(), toml::Value::String(metric.into()));
        if !t.contains_key("model_file") {
            let model_file = self
                .pair
                .as_ref()
                .map(|p| p.ours.model_file.clone())
                .unwrap_or_else(|| self.request.model.clone());
            t.insert("model_file".into(), toml::Value::String(model_file));
        }
        toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| format!("[record]: {}", e.message()))
    }
}

/// Context for placeholder expansion: the values the runner knows before starting.
#[derive(Debug, Clone)]
pub struct Context {
    /// `{gate_dir}`: the directory of the gate file.
    pub gate_dir: PathBuf,
    /// `{cache}`: `$SERVEGATE_CACHE`, default `~/.cache/servegate`.
    pub cache: PathBuf,
    /// `~` for expansion.
    pub home: Option<PathBuf>,
}

impl Context {
    /// The context of a gate file from the process environment.
    pub fn for_file(file: &Path) -> Context {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cache = match std::env::var_os("SERVEGATE_CACHE") {
            Some(c) if !c.is_empty() => PathBuf::from(c),
            _ => home
                .clone()
                .unwrap_or_else(|| PathBuf::from("/tmp"))
                .join(".cache/servegate"),
        };
        let gate_dir = file
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let gate_dir = std::fs::canonicalize(gate_dir).unwrap_or_else(|_| gate_dir.to_path_buf());
        Context {
            gate_dir,
            cache,
            home,
        }
    }
}

/// Reads and validates a gate file. Errors name the file, line, column and key; a file over
/// [`MAX_GATE_BYTES`] is refused without being read whole.
pub fn load(file: &Path) -> Result<GateSpec, SpecError> {
    let text = read_text(file)?;
    parse(file, &text, &Context::for_file(file))
}

/// Reads a gate file's text: at most [`MAX_GATE_BYTES`] (a larger file is refused), valid UTF-8 (else an error at
/// the first invalid byte's line and column). The one reader of gate files ([`load`], `matrix::load_all`).
pub fn read_text(file: &Path) -> Result<String, SpecError> {
    use std::io::Read;
    let io = |e| SpecError::Io {
        file: file.to_path_buf(),
        source: e,
    };
    let f = std::fs::File::open(file).map_err(io)?;
    let mut bytes = Vec::new();
    f.take(MAX_GATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_GATE_BYTES {
        return Err(SpecError::at(
            file,
            "",
            0..0,
            "",
            format!(
                "the file is over {} MiB: a gate is a few KiB of TOML (is this the right file?)",
                MAX_GATE_BYTES >> 20
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        SpecError::at(
            file,
            &String::from_utf8_lossy(e.as_bytes()),
            at..at + 1,
            "",
            "the file is not valid UTF-8",
        )
    })
}

/// Parses and validates gate TOML text (`file` is used for messages and `{gate_dir}`).
pub fn parse(file: &Path, text: &str, ctx: &Context) -> Result<GateSpec, SpecError> {
    if text.trim().is_empty() {
        return Err(SpecError::at(
            file,
            text,
            0..0,
            "",
            "the file is empty; a gate needs [gate], [serve] and [request]",
        ));
    }
    let doc = toml_edit::ImDocument::parse(text).ok();
    let raw: RawGate = toml::from_str(text).map_err(|e| {
        let mut span = e.span().unwrap_or(0..0);
        let missing = e
            .message()
            .strip_prefix("missing field `")
            .and_then(|m| m.split('`').next())
            .map(str::to_string);
        let whole = span == (0..0) || (span.start == 0 && span.end >= text.trim_end().len());
        let table = doc
            .as_ref()
            .filter(|_| !whole)
            .and_then(|d| table_at(d.as_table(), "", span.start));
        let key = match (&missing, table) {
            // A required key absent from a table: the table's path and the key, at the table's header.
            (Some(field), Some(t)) => format!("{t}.{field}"),
            // A required table absent from the file: at the file's last line (where it would go).
            (Some(field), None) => {
                let end = text.trim_end().len();
                let at = text[..end].rfind('\n').map(|i| i + 1).unwrap_or(0);
                span = at..end.max(at + 1);
                field.clone()
            }
            (None, _) => doc
                .as_ref()
                .and_then(|d| key_at(d.as_table(), "", span.start))
                .or_else(|| key_on_line(text, span.start))
                .unwrap_or_default(),
        };
        let span = if span == (0..0) && !key.is_empty() {
            doc.as_ref()
                .and_then(|d| key_span(d.as_table(), &key))
                .unwrap_or(span)
        } else {
            span
        };
        let message = match e.message() {
            // The TOML reader's words for an integer past 64 bits: say the rule.
            m if m.contains("number too large to fit in target type") => format!(
                "integer too large: TOML integers stop at {}; this key's range is in docs/gate-format.md (\"Ranges\")",
                i64::MAX
            ),
            // A sweep key's own type in words, not serde's internal enum's name.
            m if m.contains("untagged enum OneOrMany") => {
                if key.ends_with("concurrency") {
                    "must be a whole number or a list of whole numbers (a sweep: [1, 4, 16])".to_string()
                } else {
                    "must be a number or a list of numbers (a sweep: [0.5, 2, 8])".to_string()
                }
            }
            m => did_you_mean(&plain_types(m)),
        };
        SpecError::at(file, text, span, &key, message)
    })?;
    let v = Validator {
        file,
        text,
        ctx,
        vars: BTreeMap::new(),
        doc,
    };
    v.build(raw)
}

/// The dotted key written on the line holding byte `offset` of `text` (`request.max_tokens` for
/// `max_tokens = 1` under `[request]`), read from the text itself: for an error the TOML reader finds before a
/// document exists (an integer past 64 bits). `None` when that line assigns no key.
fn key_on_line(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = text[start..].lines().next().unwrap_or("");
    let (k, _) = line.split_once('=')?;
    let k = k.trim().trim_matches('"');
    if k.is_empty() || k.starts_with('[') || k.starts_with('#') {
        return None;
    }
    let table = text[..start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| {
            l.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        });
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{k}"),
        _ => k.to_string(),
    })
}

/// serde's `unknown field `flor_tok_s`, expected one of `floor_tok_s`, `source`` (or `expected `x``) with
/// `; did you mean `floor_tok_s`?` appended when one expected key is close to the unknown one (normalized
/// Damerau-Levenshtein similarity >= 0.7, or the same key up to case, `-`/`_`, order of the letters). Any
/// other message is returned unchanged.
pub fn did_you_mean(message: &str) -> String {
    let Some((_, rest)) = message.split_once("unknown field `") else {
        return message.to_string();
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return message.to_string();
    };
    let candidates: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| !c.is_empty())
        .collect();
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let best = candidates
        .iter()
        .map(|c| {
            let score = if norm(c) == norm(unknown) {
                1.0
            } else {
                strsim::normalized_damerau_levenshtein(&norm(unknown), &norm(c))
            };
            (score, *c)
        })
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, c)) => format!("{message}; did you mean `{c}`?"),
        None => message.to_string(),
    }
}

/// serde's type names in a toml message (`expected f64`) in words (`expected a number`).
fn plain_types(message: &str) -> String {
    let mut m = message.to_string();
    for (from, to) in [
        ("expected f64", "expected a number"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number >= 0"),
        ("expected i64", "expected a whole number"),
        ("expected a sequence", "expected a list of strings"),
        ("floating point", "number"),
        ("expected a boolean", "expected true or false"),
    ] {
        m = m.replace(from, to);
    }
    m
}

/// The 1-based line of `gate`'s file that declares `assertion`, for annotations and JUnit properties: the
/// `floor_tok_s` line of `[assert.rate]` for `rate` (the bound a person edits), else the `[assert.X]` header
/// (`assert.X` may also be written inline, `assert = { X = ... }`: then the key's line). Falls back to the
/// `[assert]`/first line: 1 when the assertion is not found (e.g. `spec` for a file that does not parse).
pub fn line_of(gate: &GateSpec, assertion: &str) -> usize {
    line_in(&gate.source, assertion)
}

/// [`line_of`] on the TOML text itself (for a gate file that did not parse into a [`GateSpec`]).
pub fn line_in(text: &str, assertion: &str) -> usize {
    let Ok(doc) = text.parse::<toml_edit::ImDocument<String>>() else {
        return 1;
    };
    decl_line_in(doc.as_table(), text, assertion).unwrap_or(1)
}

/// [`GateSpec::decl_lines`]: the declaring line of each of `assertions` in `doc`, the parsed document of `text`.
fn decl_lines(
    doc: &toml_edit::Table,
    text: &str,
    assertions: &Assertions,
) -> BTreeMap<AssertionKind, usize> {
    assertions
        .kinds()
        .into_iter()
        .filter_map(|k| Some((k, decl_line_in(doc, text, k.name())?)))
        .collect()
}

/// [`GateSpec::decl_lines`] read from the text itself, for a gate parsed from other text than its source (a
/// matrix entry is parsed expanded; its lines are the file's).
pub(crate) fn decl_lines_in(text: &str, assertions: &Assertions) -> BTreeMap<AssertionKind, usize> {
    match text.parse::<toml_edit::ImDocument<String>>() {
        Ok(doc) => decl_lines(doc.as_table(), text, assertions),
        Err(_) => BTreeMap::new(),
    }
}

/// [`line_in`] on the parsed document `doc` of `text`: None when `assertion` is not found.
fn decl_line_in(doc: &toml_edit::Table, text: &str, assertion: &str) -> Option<usize> {
    let line = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let keys: &[&str] = if assertion == "rate" {
        &["assert.rate.floor_tok_s", "assert.rate"]
    } else {
        &[]
    };
    for k in keys {
        if let Some(r) = key_span(doc, k) {
            return Some(line(r.start));
        }
    }
    let table = doc
        .get("assert")
        .and_then(|a| a.as_table_like())
        .and_then(|t| t.get_key_value(assertion));
    if let Some((k, item)) = table {
        if let Some(r) = item.as_table().and_then(|t| t.span()).or_else(|| k.span()) {
            return Some(line(r.start));
        }
    }
    None
}

/// The byte span of a dotted key (`serve.host`, `request.extra.max_tokens`) in a parsed document: the key
/// itself where written; where absent, the nearest enclosing table that is (its header or first key).
fn key_span(table: &dyn toml_edit::TableLike, key: &str) -> Option<Range<usize>> {
    let (head, rest) = match key.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (key, None),
    };
    let (k, item) = table.get_key_value(head)?;
    let here = k.span().or_else(|| item.span()).or_else(|| {
        // An implicit table (`[assert.rate]` without `[assert]`): where its first key is.
        item.as_table_like()
            .and_then(|t| t.iter().next().map(|(name, _)| name.to_string()))
            .and_then(|first| key_span(item.as_table_like()?, &first))
    });
    match (rest, item.as_table_like()) {
        (Some(r), Some(t)) => key_span(t, r).or(here),
        _ => here,
    }
}

/// The dotted key whose key or value span holds `offset` (the deepest one), for toml's own errors.
fn key_at(table: &dyn toml_edit::TableLike, prefix: &str, offset: usize) -> Option<String> {
    for (name, item) in table.iter() {
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(t) = item.as_table_like() {
            if let Some(found) = key_at(t, &path, offset) {
                return Some(found);
            }
        }
        let (k, _) = table.get_key_value(name)?;
        let within = |r: Option<Range<usize>>| {
            r.is_some_and(|r| r.start <= offset && offset < r.end.max(r.start + 1))
        };
        if item.as_table().is_none() && (within(k.span()) || within(item.span())) {
            return Some(path);
        }
    }
    None
}

/// The dotted path of the (deepest) table whose header holds `offset`, for toml's "missing field" errors.
fn table_at(table: &dyn toml_edit::TableLike, prefix: &str, offset: usize) -> Option<String> {
    for (name, item) in table.iter() {
        let Some(t) = item.as_table_like() else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(deeper) = table_at(t, &path, offset) {
            return Some(deeper);
        }
        let span = item
            .as_table()
            .and_then(|t| t.span())
            .or_else(|| item.span());
        if span.is_some_and(|r| r.start <= offset && offset < r.end.max(r.start + 1)) {
            return Some(path);
        }
    }
    None
}

/// True when an `http(s)://` URL's authority is `host` or `host:port` with a valid host ([`valid_host`]) and a
/// port of 1 to 65535 (no user info).
fn valid_url_authority(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return false;
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (format!("[{h}]"), p.strip_prefix(':')),
            None => return false,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    valid_host(&host) && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

/// True for a host servegate can listen on or connect to: an IPv4 or IPv6 address (brackets allowed) or a
/// DNS name (labels of A-Z a-z 0-9 and inner `-`, 1 to 63 characters each, 253 at most in all).
pub fn valid_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

struct Validator<'a> {
    file: &'a Path,
    text: &'a str,
    ctx: &'a Context,
    vars: BTreeMap<String, String>,
    doc: Option<toml_edit::ImDocument<&'a str>>,
}

impl Validator<'_> {
    /// An error at `span`; an unknown span (`0..0`: a default, or a value read without one) is looked up by
    /// `key` in the document, so every error names a line.
    /// True when the gate's text writes `key` (dotted), as opposed to taking its default.
    fn written(&self, key: &str) -> bool {
        let Some(doc) = self.doc.as_ref() else {
            return false;
        };
        let mut item: Option<&dyn toml_edit::TableLike> = Some(doc.as_table());
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let Some(t) = item else { return false };
            let Some(v) = t.get(part) else { return false };
            if i + 1 == parts.len() {
                return true;
            }
            item = v.as_table_like();
        }
        false
    }

    fn err(&self, span: Range<usize>, key: &str, msg: impl Into<String>) -> SpecError {
        let span = if span == (0..0) && !key.is_empty() {
            // The key, else its nearest written parent, else the file's last line (where a missing table
            // would go).
            let mut k = key;
            loop {
                if let Some(found) = self.doc.as_ref().and_then(|d| key_span(d.as_table(), k)) {
                    break found;
                }
                match k.rsplit_once('.') {
                    Some((parent, _)) => k = parent,
                    None => {
                        let end = self.text.trim_end().len();
                        let at = self.text[..end].rfind('\n').map(|i| i + 1).unwrap_or(0);
                        break at..end.max(at + 1);
                    }
                }
            }
        } else {
            span
        };
        SpecError::at(self.file, self.text, span, key, msg)
    }

    /// `argv` must name a program: its first word is not empty (`command = [""]` starts nothing).
    fn argv(&self, argv: &[String], span: Range<usize>, key: &str) -> Result<(), SpecError> {
        match argv.first() {
            None => Err(self.err(span, key, "must not be empty")),
            Some(p) if p.trim().is_empty() => {
                Err(self.err(span, key, "its first word (the program) is empty"))
            }
            _ => Ok(()),
        }
    }

    fn expand_tilde(&self, s: &str) -> String {
        if s == "~" || s.starts_with("~/") {
            if let Some(home) = &self.ctx.home {
                return format!("{}{}", home.display(), &s[1..]);
            }
        }
        s.to_string()
    }

    /// Expands `{name}` placeholders (and `~` at the start). `{port}` and `{host}` are left for the runner
    /// when `keep_runtime` is set. `{{` and `}}` are literal braces.
    fn expand(
        &self,
        s: &str,
        span: Range<usize>,
        key: &str,
        keep_runtime: bool,
    ) -> Result<String, SpecError> {
        let s = self.expand_tilde(s);
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find(['{', '}']) {
            out.push_str(&rest[..i]);
            let c = rest.as_bytes()[i];
            if rest[i + 1..].starts_with(c as char) {
                out.push(c as char);
                rest = &rest[i + 2..];
                continue;
            }
            if c == b'}' {
                return Err(self.err(
                    span,
                    key,
                    format!("unmatched `}}` in {s:?} (write `}}}}` for a literal brace)"),
                ));
            }
            let Some(end) = rest[i..].find('}') else {
                return Err(self.err(span, key, format!("unclosed `{{` in {s:?}")));
            };
            let name = &rest[i + 1..i + end];
            let value = match name {
                "port" | "host" if keep_runtime => Some(format!("{{{name}}}")),
                "gate_dir" => Some(self.ctx.gate_dir.display().to_string()),
                "cache" => Some(self.ctx.cache.display().to_string()),
                _ => self.vars.get(name).cloned(),
            };
            let Some(value) = value else {
                let mut known: Vec<String> = vec!["gate_dir".into(), "cache".into()];
                if keep_runtime {
                    known.extend(["port".into(), "host".into()]);
                }
                known.extend(self.vars.keys().cloned());
                return Err(self.err(
                    span,
                    key,
                    format!(
                        "placeholder `{{{name}}}` is not defined (defined here: {})",
                        known.join(", ")
                    ),
                ));
            };
            out.push_str(&value);
            rest = &rest[i + end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A regex that can mean something: valid, not matching the empty text (`""`, `.*`, `x?` match every
    /// line, so a route or known answer judged with them proves nothing), and not matching two or more of
    /// [`NONSENSE_LINES`] (`.`, `\w`, `\b|x` match nearly every real line too).
    fn regex(&self, s: &Spanned<String>, key: &str) -> Result<Regex, SpecError> {
        let re = Regex::new(s.get_ref())
            .map_err(|e| self.err(s.span(), key, format!("invalid regex: {e}")))?;
        if re.is_match("") {
            return Err(self.err(
                s.span(),
                key,
                format!(
                    "the regex {:?} matches the empty text, so it matches anything: it would prove nothing",
                    s.get_ref()
                ),
            ));
        }
        let hits = NONSENSE_LINES.iter().filter(|l| re.is_match(l)).count();
        if hits >= 2 {
            return Err(self.err(
                s.span(),
                key,
                format!(
                    "the regex {:?} matches {hits} of {} nonsense lines ({:?}), so it matches almost any log \
                     line or reply: it would prove nothing",
                    s.get_ref(),
                    NONSENSE_LINES.len(),
                    NONSENSE_LINES
                ),
            ));
        }
        Ok(re)
    }

    fn positive(&self, v: &Spanned<f64>, key: &str, unit: &str) -> Result<f64, SpecError> {
        let x = *v.get_ref();
        if !x.is_finite() || x <= 0.0 {
            return Err(self.err(
                v.span(),
                key,
                format!("must be a finite number > 0 ({unit}), got {x}"),
            ));
        }
        Ok(x)
    }

    /// A duration in seconds: finite, > 0 and at most [`MAX_SECONDS`] (larger values overflow the clock's
    /// arithmetic: the runner would panic instead of waiting).
    /// `[serve] log_cap_bytes`: at least `evidence::log_cap::MIN_LOG_CAP_BYTES`; default
    /// `DEFAULT_LOG_CAP_BYTES`.
    fn log_cap_bytes(&self, v: &Option<Spanned<i64>>) -> Result<u64, SpecError> {
        match v {
            None => Ok(DEFAULT_LOG_CAP_BYTES),
            Some(b) if *b.get_ref() >= MIN_LOG_CAP_BYTES as i64 => Ok(*b.get_ref() as u64),
            Some(b) => Err(self.err(
                b.span(),
                "serve.log_cap_bytes",
                format!(
                    "must be at least {MIN_LOG_CAP_BYTES} bytes (64 KiB), got {}",
                    b.get_ref()
                ),
            )),
        }
    }

    fn seconds(&self, v: &Spanned<f64>, key: &str) -> Result<f64, SpecError> {
        let x = self.positive(v, key, "seconds")?;
        if x > MAX_SECONDS {
            return Err(self.err(
                v.span(),
                key,
                format!("must be at most {MAX_SECONDS} seconds (about 11 days), got {x:e}"),
            ));
        }
        Ok(x)
    }

    fn build(mut self, raw: RawGate) -> Result<GateSpec, SpecError> {
        let name = raw.gate.name.get_ref().clone();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(self.err(
                raw.gate.name.span(),
                "gate.name",
                format!("must be non-empty and use only A-Z a-z 0-9 - _ . (got {name:?})"),
            ));
        }
        // The name is a directory of the evidence root: `.`/`..` (or any leading dot) would write elsewhere
        // or hide it.
        if name.starts_with('.') || name.starts_with('-') {
            return Err(self.err(
                raw.gate.name.span(),
                "gate.name",
                format!("must start with a letter, a digit or `_` (it names the evidence directory), got {name:?}"),
            ));
        }

        // [vars]: expanded in file order; a var may use `{gate_dir}`, `{cache}` and the vars above it.
        let mut vars: Vec<(&String, &Spanned<String>)> = raw.vars.iter().collect();
        vars.sort_by_key(|(_, v)| v.span().start);
        for (k, v) in vars {
            if matches!(
                k.as_str(),
                "port" | "host" | "gate_dir" | "cache" | "model" | "served_model"
            ) {
                return Err(self.err(
                    v.span(),
                    &format!("vars.{k}"),
                    format!("`{k}` is a built-in placeholder and cannot be redefined"),
                ));
            }
            let expanded = self.expand(v.get_ref(), v.span(), &format!("vars.{k}"), false)?;
            self.vars.insert(k.clone(), expanded);
        }

        // [request]
        let r = raw.request;
        let model = self.expand(&r.model, 0..0, "request.model", false)?;
        if model.trim().is_empty() {
            return Err(self.err(0..0, "request.model", "must not be empty"));
        }
        self.vars.insert("model".into(), model.clone());
        // `{served_model}`: the name the serve is asked to answer to (a matrix entry's `served_model`).
        let served = r.served_model.clone().unwrap_or_else(|| model.clone());
        self.vars.insert("served_model".into(), served);
        let max_tokens = *r.max_tokens.get_ref();
        if max_tokens < 1 || max_tokens > u32::MAX as i64 {
            return Err(self.err(
                r.max_tokens.span(),
                "request.max_tokens",
                format!("must be between 1 and {}, got {max_tokens}", u32::MAX),
            ));
        }
        if let Some(t) = r.temperature {
            if !t.is_finite() || t < 0.0 {
                return Err(self.err(
                    0..0,
                    "request.temperature",
                    format!("must be a finite number >= 0, got {t}"),
                ));
            }
        }
        if let Some(p) = r.top_p {
            if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
                return Err(self.err(
                    0..0,
                    "request.top_p",
                    format!("must be a number from 0 to 1 (nucleus sampling's probability mass), got {p}"),
                ));
            }
        }
        if *r.repeats.get_ref() < 1 {
            return Err(self.err(r.repeats.span(), "request.repeats", "must be >= 1"));
        }
        let rounds = u64::from(*r.repeats.get_ref()) + u64::from(r.warmup);
        if rounds * r.prompts.get_ref().len() as u64 > MAX_REQUESTS {
            return Err(self.err(r.repeats.span(), "request.repeats", format!("(warmup + repeats) x prompts must be at most {MAX_REQUESTS} requests, got {rounds} rounds of {} prompts", r.prompts.get_ref().len())));
        }
        let timeout_s = self.seconds(&r.timeout_s, "request.timeout_s")?;
        let run_timeout_s = self.seconds(&r.run_timeout_s, "request.run_timeout_s")?;
        if r.prompts.get_ref().is_empty() {
            return Err(self.err(
                r.prompts.span(),
                "request.prompts",
                "a gate needs at least one prompt",
            ));
        }
        if r.prompts.get_ref().iter().any(|p| p.trim().is_empty()) {
            return Err(self.err(r.prompts.span(), "request.prompts", "a prompt is empty"));
        }
        let extra = match serde_json::to_value(&r.extra) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return Err(self.err(0..0, "request.extra", "must be a table")),
        };
        for reserved in RESERVED_EXTRA {
            if extra.contains_key(reserved) {
                return Err(self.err(
                    0..0,
                    &format!("request.extra.{reserved}"),
                    format!("`{reserved}` is set from the gate's [request] (or by the runner); an `extra` value would silently override it"),
                ));
            }
        }
        let mut untimed = Vec::new();
        let untimed_span = r.untimed.as_ref().map(|u| u.span()).unwrap_or(0..0);
        if let Some(u) = &r.untimed {
            for p in u.get_ref() {
                if !r.prompts.get_ref().contains(p) {
                    return Err(self.err(
                        u.span(),
                        "request.untimed",
                        format!(
                            "{p:?} is not one of [request] prompts (each must be one, exactly)"
                        ),
                    ));
                }
                if !untimed.contains(p) {
                    untimed.push(p.clone());
                }
            }
        }
        let mut request = RequestSpec {
            served_model: r.served_model.clone().unwrap_or_else(|| model.clone()),
            model,
            max_tokens: max_tokens as u32,
            temperature: r.temperature,
            top_k: r.top_k,
            top_p: r.top_p,
            stream: r.stream,
            warmup: r.warmup,
            repeats: *r.repeats.get_ref(),
            timeout_s,
            run_timeout_s,
            system: r.system.clone(),
            extra,
            prompts: r.prompts.get_ref().clone(),
            untimed,
        };

        // [serve]
        let s = raw.serve;
        if raw.pair.is_some() && (s.command.is_some() || s.url.is_some()) {
            return Err(self.err(0..0, "serve", "a pair gate's commands go in [pair.ours] and [pair.theirs]; [serve] holds only shared settings (no command or url)"));
        }
        let mode = match (&s.command, &s.url) {
            (Some(c), None) => {
                self.argv(c.get_ref(), c.span(), "serve.command")?;
                let argv = c
                    .get_ref()
                    .iter()
                    .map(|a| self.expand(a, c.span(), "serve.command", true))
                    .collect::<Result<Vec<_>, _>>()?;
                ServeMode::Command(argv)
            }
            (None, Some(u)) => {
                let url = self.expand(u.get_ref(), u.span(), "serve.url", false)?;
                let url = url.trim_end_matches('/').to_string();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(self.err(u.span(), "serve.url", format!("must start with http:// or https://, got {url:?}")));
                }
                if !valid_url_authority(&url) {
                    return Err(self.err(u.span(), "serve.url", format!("needs a valid host (an IP address or a host name) and an optional numeric port, got {url:?}")));
                }
                ServeMode::Url(url)
            }
            (Some(c), Some(_)) => {
                return Err(self.err(c.span(), "serve", "give either `command` (the runner starts the serve) or `url` (already running), not both"))
            }
            (None, None) if raw.pair.is_some() => ServeMode::Command(Vec::new()),
            (None, None) => return Err(self.err(0..0, "serve", "needs `command` (the runner starts the serve) or `url` (already running)")),
        };
        let setup = s
            .setup
            .iter()
            .map(|a| self.expand(a, 0..0, "serve.setup", false))
            .collect::<Result<Vec<_>, _>>()?;
        if !setup.is_empty() {
            self.argv(&setup, 0..0, "serve.setup")?;
        }
        if !valid_host(&s.host) {
            return Err(self.err(
                0..0,
                "serve.host",
                format!("is not an IP address or a host name, got {:?}", s.host),
            ));
        }
        let engine =
            engine_of(s.engine.as_deref()).map_err(|e| self.err(0..0, "serve.engine", e))?;
        let prof = engine.map(profile::Engine::profile);
        let ready = s
            .ready
            .clone()
            .or_else(|| prof.as_ref().map(|p| p.ready_path.to_string()))
            .unwrap_or_else(default_ready);
        if !ready.starts_with('/') {
            return Err(self.err(
                0..0,
                "serve.ready",
                format!("must be a path starting with `/`, got {ready:?}"),
            ));
        }
        let clock = match &s.clock {
            Some(c) => {
                profile::ServeClock::parse(c).map_err(|e| self.err(0..0, "serve.clock", e))?
            }
            None => prof
                .as_ref()
                .map_or(profile::ServeClock::Timings, |p| p.clock),
        };
        // Greedy parity: the profile's fields, unless the gate's [request.extra] sets the same key.
        if let (Some(p), Some(t)) = (&prof, request.temperature) {
            if t == 0.0 {
                for (k, v) in p.greedy_fields {
                    request
                        .extra
                        .entry(k.to_string())
                        .or_insert_with(|| serde_json::json!(v));
                }
            }
        }
        let mut env = BTreeMap::new();
        for (k, v) in &s.env {
            env.insert(
                k.clone(),
                self.expand(v, 0..0, &format!("serve.env.{k}"), true)?,
            );
        }
        if matches!(mode, ServeMode::Url(_)) {
            // Settings of a serve the runner starts: on a serve already running they would be ignored.
            for (key, why) in [
                ("serve.port", "the port is the url's"),
                ("serve.host", "the host is the url's"),
                (
                    "serve.stop_grace_s",
                    "the runner never stops a serve it did not start",
                ),
            ] {
                if self.written(key) {
                    return Err(self.err(
                        0..0,
                        key,
                        format!("is for a serve the runner starts (`command`); a `url` serve is already running and {why}: drop it"),
                    ));
                }
            }
            if let Some(c) = raw.hold.as_ref().and_then(|h| h.command.as_ref()) {
                return Err(self.err(
                    c.span(),
                    "hold.command",
                    "wraps the serve the runner starts (`command`); a `url` serve is already running, so the wrapper would never run: hold the device with `lock` or `ticket`, or start the serve with `command`",
                ));
            }
        }
        let mut serve = ServeSpec {
            mode,
            setup,
            host: s.host.clone(),
            port: s.port,
            ready_path: ready,
            engine,
            clock,
            clock_set: s.clock.is_some(),
            ready_timeout_s: self.seconds(&s.ready_timeout_s, "serve.ready_timeout_s")?,
            stop_grace_s: self.seconds(&s.stop_grace_s, "serve.stop_grace_s")?,
            log_cap_bytes: self.log_cap_bytes(&s.log_cap_bytes)?,
            env,
            expect_model: s.expect_model.clone(),
            log_file: match &s.log_file {
                Some(f) => Some(PathBuf::from(self.expand(
                    f,
                    0..0,
                    "serve.log_file",
                    false,
                )?)),
                None => None,
            },
            api_key_env: s.api_key_env.clone(),
        };
        if let Some(f) = &serve.log_file {
            if f.as_os_str().is_empty() {
                return Err(self.err(0..0, "serve.log_file", "must not be empty"));
            }
            if matches!(serve.mode, ServeMode::Command(_)) {
                return Err(self.err(0..0, "serve.log_file", "is for `url` serves only: a serve the runner starts has its stdout and stderr recorded as serve.log"));
            }
        }
        if let Some(k) = &serve.api_key_env {
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.err(0..0, "serve.api_key_env", format!("must name an environment variable (A-Z 0-9 _), got {k:?}; never put the key itself in a gate")));
            }
        }
        let hold = match &raw.hold {
            Some(h) => {
                let lock = match &h.lock {
                    Some(l) if l.trim().is_empty() => {
                        return Err(self.err(0..0, "hold.lock", "must name a lock file"))
                    }
                    Some(l) => Some(PathBuf::from(self.expand(l, 0..0, "hold.lock", false)?)),
                    None => None,
                };
                let command = match &h.command {
                    Some(c) => {
                        self.argv(c.get_ref(), c.span(), "hold.command")?;
                        c.get_ref()
                            .iter()
                            .map(|a| self.expand(a, c.span(), "hold.command", false))
                            .collect::<Result<Vec<_>, _>>()?
                    }
                    None => Vec::new(),
                };
                let ticket = match &h.ticket {
                    Some(t) if t.get_ref().trim().is_empty() => {
                        return Err(self.err(t.span(), "hold.ticket", "must name a ticket file"))
                    }
                    Some(t) => Some(PathBuf::from(self.expand(
                        t.get_ref(),
                        t.span(),
                        "hold.ticket",
                        false,
                    )?)),
                    None => None,
                };
                if lock.is_none() && command.is_empty() && ticket.is_none() {
                    return Err(self.err(0..0, "hold", "give `lock` (a lock file), `command` (a hold wrapper the serve runs under) or `ticket` (a file that must exist)"));
                }
                Some(HoldSpec {
                    lock,
                    wait_s: self.seconds(&h.wait_s, "hold.wait_s")?,
                    command,
                    ticket,
                })
            }
            None => None,
        };

        // [assert.*]
        let mut a = raw.assertions;
        let load_asserts = load::RawLoadAsserts {
            latency: a.latency.take(),
            throughput: a.throughput.take(),
            goodput: a.goodput.take(),
            errors: a.errors.take(),
            consistency: a.consistency.take(),
        };
        let load = self.load_gate(raw.load, load_asserts, request.stream, request.max_tokens)?;
        let mut assertions = Assertions::default();
        if let Some(route) = a.route {
            if matches!(serve.mode, ServeMode::Url(_)) && serve.log_file.is_none() {
                return Err(self.err(route.fast.span(), "assert.route", "a `url` serve has no log of its own in the evidence: set serve.log_file to the serve's log (or drop [assert.route])"));
            }
            assertions.route = Some(RouteAssert {
                fast: self.regex(&route.fast, "assert.route.fast")?,
                slow: match &route.slow {
                    Some(s) => Some(self.regex(s, "assert.route.slow")?),
                    None => None,
                },
            });
        }
        if let Some(rate) = a.rate {
            assertions.rate = Some(RateAssert {
                floor_tok_s: self.positive(
                    &rate.floor_tok_s,
                    "assert.rate.floor_tok_s",
                    Metric::DecodeRate.info().unit.name(),
                )?,
                source: rate.source,
                agree_pct: match &rate.agree_pct {
                    None => DEFAULT_AGREE_PCT,
                    Some(p) if rate.source != RateSource::Both => {
                        return Err(self.err(
                            p.span(),
                            "assert.rate.agree_pct",
                            "agree_pct applies only with source = \"both\" (the client and the serve's figure compared)",
                        ))
                    }
                    Some(p) => self.positive(p, "assert.rate.agree_pct", "%")?,
                },
                server_log: match &rate.server_log {
                    None => None,
                    Some(_) if rate.source == RateSource::Client => {
                        let p = rate.server_log.as_ref().expect("some");
                        return Err(self.err(
                            p.span(),
                            "assert.rate.server_log",
                            "server_log applies only with source = \"server\" or \"both\" (it is the serve's figure)",
                        ));
                    }
                    Some(p) => {
                        let re = self.regex(p, "assert.rate.server_log")?;
                        if !re.capture_names().flatten().any(|n| n == "tok_s") {
                            return Err(self.err(
                                p.span(),
                                "assert.rate.server_log",
                                "the regex needs a named group `(?P<tok_s>...)` holding the decode rate in tok/s",
                            ));
                        }
                        Some(re)
                    }
                },
            });
        }
        if let Some(ft) = a.first_token {
            assertions.first_token = Some(FirstTokenAssert {
                limit_ms: self.positive(
                    &ft.limit_ms,
                    "assert.first_token.limit_ms",
                    Metric::Ttft.info().unit.name(),
                )?,
            });
        }
        if let Some(t) = a.tpot {
            assertions.tpot = Some(TpotAssert {
                limit_ms: self.positive(
                    &t.limit_ms,
                    "assert.tpot.limit_ms",
                    Metric::Tpot.info().unit.name(),
                )?,
            });
        }
        if !request.stream {
            if let Some(k) = assertions.kinds().into_iter().find(|k| k.needs_stream()) {
                return Err(self.err(0..0, "request.stream", format!("is false, but [assert.{k}] needs a streamed reply: a whole body has no token arrival times")));
            }
        }
        assertions.content = a.content;
        if let Some(ka) = a.known_answer {
            let prompt = match &ka.prompt {
                Some(p) => {
                    if !request.prompts.contains(p.get_ref()) {
                        return Err(self.err(
                            p.span(),
                            "assert.known_answer.prompt",
                            "must be one of [request] prompts, exactly",
                        ));
                    }
                    Some(p.get_ref().clone())
                }
                None => None,
            };
            if let Some(u) = ka.untimed.as_ref().filter(|u| *u.get_ref()) {
                let Some(p) = &prompt else {
                    return Err(self.err(
                        u.span(),
                        "assert.known_answer.untimed",
                        "needs `prompt`: it marks the known-answer prompt untimed, and without one every prompt is the known-answer prompt",
                    ));
                };
                if !request.untimed.contains(p) {
                    request.untimed.push(p.clone());
                }
            }
            assertions.known_answer = Some(KnownAnswerAssert {
                matches: self.regex(&ka.matches, "assert.known_answer.matches")?,
                prompt,
                identical: ka.identical,
            });
        }
        if let Some(r) = a.ratio {
            let at_least = match &r.at_least {
                Some(v) => Some(self.positive(v, "assert.ratio.at_least", "ratio")?),
                None => None,
            };
            let at_most = match &r.at_most {
                Some(v) => Some(self.positive(v, "assert.ratio.at_most", "ratio")?),
                None => None,
            };
            if at_least.is_none() && at_most.is_none() {
                return Err(self.err(0..0, "assert.ratio", "needs at_least, at_most or both"));
            }
            if let (Some(lo), Some(hi)) = (at_least, at_most) {
                if lo > hi {
                    return Err(self.err(
                        0..0,
                        "assert.ratio",
                        format!("at_least {lo} is above at_most {hi}"),
                    ));
                }
            }
            assertions.ratio = Some(RatioAssert {
                metric: r.metric,
                at_least,
                at_most,
            });
        }
        if let Some(r) = a.regression {
            assertions.regression = Some(self.regression(r, raw.pair.is_some())?);
        }
        if let Some(sa) = a.same_answers {
            if let Some(p) = &sa.prompt {
                if !request.prompts.contains(p) {
                    return Err(self.err(
                        0..0,
                        "assert.same_answers.prompt",
                        "must be one of [request] prompts, exactly",
                    ));
                }
            }
            if let Some(k) = sa.top_k {
                self.top_k(
                    &Some(Spanned::new(0..0, k as i64)),
                    "assert.same_answers.top_k",
                )?;
            }
            assertions.same_answers = Some(sa);
        }
        if let Some(d) = &a.drift {
            assertions.drift = Some(self.drift(d, &request)?);
        }
        if !request.untimed.is_empty() && request.prompts.iter().all(|p| !request.timed(p)) {
            let timed_kinds: Vec<String> = assertions
                .kinds()
                .into_iter()
                .filter(|k| {
                    k.metric().is_some()
                        || matches!(k, AssertionKind::Regression | AssertionKind::Ratio)
                })
                .map(|k| k.to_string())
                .collect();
            if !timed_kinds.is_empty() {
                return Err(self.err(
                    untimed_span,
                    "request.untimed",
                    format!(
                        "every prompt is untimed, but [assert.{}] times replies",
                        timed_kinds.join("], [assert.")
                    ),
                ));
            }
        }
        let pair = match &raw.pair {
            None => {
                if assertions.ratio.is_some() || assertions.same_answers.is_some() {
                    return Err(self.err(
                        0..0,
                        if assertions.ratio.is_some() {
                            "assert.ratio"
                        } else {
                            "assert.same_answers"
                        },
                        "[assert.ratio] and [assert.same_answers] need a [pair] gate",
                    ));
                }
                match assertions
                    .regression
                    .as_ref()
                    .map(|r| (&r.baseline, r.blocks))
                {
                    // An interleaved baseline serve: the gate runs as a pair (theirs = the baseline serve,
                    // ours = this gate's serve) in A-B-B-A blocks (spec::interleave).
                    Some((RegressionBaseline::Serve(b), blocks)) => {
                        let key = "assert.regression.baseline_serve";
                        if let Some(k) = assertions.kinds().into_iter().find(|k| !k.in_pair_gate())
                        {
                            return Err(self.err(0..0, &format!("assert.{k}"), "is not judged in a gate with an interleaved baseline_serve (it runs as a pair of two serves): judge it in a gate of its own"));
                        }
                        let ServeMode::Command(argv) = &serve.mode else {
                            return Err(self.err(0..0, key, "needs [serve] command (the runner starts both serves in turn), not url"));
                        };
                        let p = interleave::as_pair(argv, &serve.env, &request.model, b, blocks)
                            .map_err(|e| self.err(0..0, key, e))?;
                        serve.mode = ServeMode::Command(Vec::new());
                        Some(p)
                    }
                    _ => None,
                }
            }
            Some(p) => {
                if let Some(k) = assertions.kinds().into_iter().find(|k| !k.in_pair_gate()) {
                    return Err(self.err(0..0, &format!("assert.{k}"), "is not judged in a pair gate (the arms are two runtimes): use [assert.ratio]"));
                }
                if request.temperature.is_none() || request.top_k.is_none() {
                    return Err(self.err(0..0, "request", "a pair gate must pin sampling explicitly: set temperature and top_k (runtimes have different defaults)"));
                }
                let arm = |role: &str, a: &RawArm| -> Result<ArmSpec, SpecError> {
                    let key = format!("pair.{role}");
                    self.argv(
                        a.command.get_ref(),
                        a.command.span(),
                        &format!("{key}.command"),
                    )?;
                    let command = a
                        .command
                        .get_ref()
                        .iter()
                        .map(|x| self.expand(x, a.command.span(), &format!("{key}.command"), true))
                        .collect::<Result<Vec<_>, _>>()?;
                    let model_file = match &a.model_file {
                        Some(m) => {
                            self.expand(m.get_ref(), m.span(), &format!("{key}.model_file"), false)?
                        }
                        None => request.model.clone(),
                    };
                    if !command.iter().any(|x| x.contains(&model_file)) {
                        return Err(self.err(a.command.span(), &format!("{key}.command"), format!("does not pass its model file {model_file:?} (set {key}.model_file to the file this command loads)")));
                    }
                    let mut env = BTreeMap::new();
                    for (k, v) in &a.env {
                        env.insert(
                            k.clone(),
                            self.expand(v, 0..0, &format!("{key}.env.{k}"), true)?,
                        );
                    }
                    Ok(ArmSpec {
                        role: role.into(),
                        runtime: if a.runtime.is_empty() {
                            role.into()
                        } else {
                            a.runtime.clone()
                        },
                        command,
                        model_file,
                        derived_from: match &a.derived_from {
                            Some(d) => Some(self.expand(
                                d.get_ref(),
                                d.span(),
                                &format!("{key}.derived_from"),
                                false,
                            )?),
                            None => None,
                        },
                        env,
                    })
                };
                let ours = arm(Role::Ours.name(), &p.ours)?;
                let theirs = arm(Role::Theirs.name(), &p.theirs)?;
                let order = match &p.order {
                    Some(o) => {
                        if let Some(bad) = o.get_ref().iter().find(|x| Role::from_name(x).is_none())
                        {
                            return Err(self.err(
                                o.span(),
                                "pair.order",
                                format!("arms are \"ours\" or \"theirs\", got {bad:?}"),
                            ));
                        }
                        if !o.get_ref().iter().any(|x| x == "ours")
                            || !o.get_ref().iter().any(|x| x == "theirs")
                        {
                            return Err(self.err(
                                o.span(),
                                "pair.order",
                                "both \"ours\" and \"theirs\" must run",
                            ));
                        }
                        o.get_ref().clone()
                    }
                    None => vec![
                        "theirs".into(),
                        "ours".into(),
                        "ours".into(),
                        "theirs".into(),
                    ],
                };
                // A regression pairs the arms by A-B-B-A block: whole blocks of four, each with both roles.
                if assertions.regression.is_some()
                    && (order.len() % 4 != 0
                        || order.chunks(4).any(|b| {
                            !b.iter().any(|x| x == "ours") || !b.iter().any(|x| x == "theirs")
                        }))
                {
                    return Err(self.err(0..0, "pair.order", format!("[assert.regression] pairs the arms by block: the order must be whole A-B-B-A blocks of four arms (theirs, ours, ours, theirs), got {} arms", order.len())));
                }
                Some(PairSpec {
                    ours,
                    theirs,
                    order,
                })
            }
        };
        if load.is_some() && pair.is_some() {
            return Err(self.err(0..0, "load", "a pair gate cannot also be a load gate"));
        }
        if assertions.names().is_empty() && load.is_none() {
            return Err(self.err(0..0, "assert", "the gate declares no assertion ([assert.route], [assert.rate], [assert.first_token], [assert.tpot], [assert.content], [assert.known_answer])"));
        }

        if load.is_some() {
            // A load gate judges its sweep points; the per-request assertions would judge the gate's own
            // run directory, which holds no request: they could never pass.
            if let Some(k) = assertions.kinds().first() {
                return Err(self.err(
                    0..0,
                    &format!("assert.{}", k.name()),
                    format!("[assert.{}] judges a plain run's requests; a [load] gate's requests are its sweep points', judged by [assert.latency], [assert.throughput], [assert.goodput], [assert.errors] and [assert.consistency]: it could never pass here", k.name()),
                ));
            }
        }
        if let Some(e) = raw.requires.env.iter().find(|e| e.contains('=')) {
            return Err(self.err(
                0..0,
                "requires.env",
                format!("{e:?} names no environment variable (a name holds no `=`; `requires.env` asks that a variable be set, not its value): it could never be met"),
            ));
        }
        for (list, entries) in [
            ("paths", &raw.requires.paths),
            ("commands", &raw.requires.commands),
            ("env", &raw.requires.env),
            ("provisioned", &raw.requires.provisioned),
        ] {
            if entries.iter().any(|e| e.trim().is_empty()) {
                return Err(self.err(
                    0..0,
                    &format!("requires.{list}"),
                    "an entry is empty (it would be met or unmet by accident)",
                ));
            }
        }
        let requires = Requires {
            paths: raw
                .requires
                .paths
                .iter()
                .map(|p| self.expand_tilde(p))
                .collect(),
            commands: raw.requires.commands.clone(),
            env: raw.requires.env.clone(),
            provisioned: raw.requires.provisioned.clone(),
            provisioned_markers: raw
                .requires
                .provisioned
                .iter()
                .map(|n| self.ctx.cache.join("provisioned").join(n))
                .collect(),
        };
        if let Some(bad) = raw.requires.provisioned.iter().find(|n| {
            !n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        }) {
            return Err(self.err(
                0..0,
                "requires.provisioned",
                format!("{bad:?} is not a runtime name (letters, digits, '-', '_': the marker {{cache}}/provisioned/NAME)"),
            ));
        }

        // Answers compared with logprobs: ask for them in every request.
        let logprobs_k = match (&assertions.drift, &assertions.same_answers) {
            (Some(d), _) => Some(d.top_k),
            (None, Some(sa)) if sa.rule == drift::Rule::LogprobsClose => Some(sa.top_k()),
            _ => load
                .as_ref()
                .and_then(|l| l.assertions.consistency)
                .filter(|c| c.rule == drift::Rule::LogprobsClose)
                .map(|c| c.top_k),
        };
        let request = drift::ask_logprobs(request, logprobs_k);
        let decl_lines = match &self.doc {
            Some(d) => decl_lines(d.as_table(), self.text, &assertions),
            None => BTreeMap::new(),
        };
        Ok(GateSpec {
            name,
            description: raw.gate.description,
            file: self.file.to_path_buf(),
            source: self.text.to_string(),
            requires,
            serve,
            request,
            assertions,
            pair,
            hold,
            record: raw.record,
            on_indeterminate: raw.gate.on_indeterminate,
            load,
            decl_lines,
        })
        .and_then(|g: GateSpec| match g.record_spec("check", "decode_rate") {
            Ok(_) => Ok(g),
            Err(e) if g.record.is_some() => {
                // `unknown field `x``: at the key `record.x`; otherwise at the [record] table.
                let key = e
                    .split_once("unknown field `")
                    .and_then(|(_, rest)| rest.split('`').next())
                    .map(|f| format!("record.{f}"))
                    .unwrap_or_else(|| "record".into());
                Err(self.err(0..0, &key, did_you_mean(&e)))
            }
            Err(_) => Ok(g),
        })
    }
}

impl GateSpec {
    /// The 1-based line of the gate file declaring assertion `kind` (where annotations and the JUnit
    /// `gate_line` property point): the `floor_tok_s` line of `[assert.rate]` for `rate`, else the
    /// `[assert.X]` header (or the `X = {...}` key of an inline `[assert]`). None when the gate does not
    /// declare `kind`, and for [`AssertionKind::Load`] (a load gate's verdicts are per sweep point, declared by
    /// several tables). Kept from the parse: no file is read again.
    pub fn decl_line(&self, kind: AssertionKind) -> Option<usize> {
        self.decl_lines.get(&kind).copied()
    }

    /// [`Self::decl_line`] for a trial name after the gate's (`rate`, `[c=16]::ttft_p95`), 1 when it names no
    /// declared assertion: the same line [`line_in`] finds in the file's text.
    pub fn decl_line_of(&self, name: &str) -> usize {
        AssertionKind::from_name(name)
            .and_then(|k| self.decl_line(k))
            .unwrap_or(1)
    }

    /// True when the gate lets indeterminate verdicts through (`[gate] on_indeterminate = "pass"`).
    pub fn on_indeterminate_passes(&self) -> bool {
        self.on_indeterminate == OnIndeterminate::Pass
    }

    /// True when the assertion named `assertion` (`regression` or `drift`) skips rather than fails on a
    /// baseline that no longer applies (`on_incomparable = "skip"`).
    pub fn on_incomparable_skips(&self, assertion: &str) -> bool {
        let o = match assertion {
            "regression" => self
                .assertions
                .regression
                .as_ref()
                .map(|r| r.on_incomparable),
            "drift" => self.assertions.drift.as_ref().map(|d| d.on_incomparable),
            _ => None,
        };
        o == Some(OnIncomparable::Skip)
    }

    /// The unmet `[requires]`, each as a reason (`path /dev/accel/accel0 does not exist`); empty when all met.
    pub fn requirements(&self) -> Vec<String> {
        let mut unmet = Vec::new();
        for p in &self.requires.paths {
            if !Path::new(p).exists() {
                unmet.push(format!("path {p} does not exist"));
            }
        }
        for c in &self.requires.commands {
            if !command_exists(c) {
                unmet.push(format!("command `{c}` is not on PATH"));
            }
        }
        for e in &self.requires.env {
            if std::env::var_os(e).is_none() {
                unmet.push(format!("environment variable {e} is not set"));
            }
        }
        for (name, marker) in self
            .requires
            .provisioned
            .iter()
            .zip(&self.requires.provisioned_markers)
        {
            if !marker.exists() {
                unmet.push(format!(
                    "runtime {name} is not provisioned (no {}): run scripts/provision-{name}.sh",
                    marker.display()
                ));
            }
        }
        unmet
    }
}

/// True when `cmd` is an existing path (if it contains `/`) or is found in a `PATH` directory.
pub fn command_exists(cmd: &str) -> bool {
    if cmd.contains('/') {
        return Path::new(cmd).exists();
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

pub use crate::error::line_col;

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            gate_dir: PathBuf::from("/g"),
            cache: PathBuf::from("/c"),
            home: Some(PathBuf::from("/home/u")),
        }
    }

    const GOOD: &str = r#"
[gate]
name = "smoke"
[serve]
command = ["srv", "-m", "{model}", "--port", "{port}", "{gate_dir}/x"]
[request]
model = "~/m.gguf"
max_tokens = 16
prompts = ["What is the capital of France?"]
[assert.route]
fast = "n_threads = 1"
[assert.rate]
floor_tok_s = 10.0
"#;

    fn parse_str(s: &str) -> Result<GateSpec, SpecError> {
        parse(Path::new("gates/t.toml"), s, &ctx())
    }

    #[test]
    fn good_gate_expands_placeholders_and_tilde() {
        let g = parse_str(GOOD).unwrap();
        assert_eq!(g.request.model, "/home/u/m.gguf");
        assert_eq!(
            g.serve.mode,
            ServeMode::Command(vec![
                "srv".into(),
                "-m".into(),
                "/home/u/m.gguf".into(),
                "--port".into(),
                "{port}".into(),
                "/g/x".into()
            ])
        );
        assert_eq!(g.assertions.names(), vec!["route", "rate"]);
        assert!(g.request.stream);
    }

    #[test]
    fn misspelt_key_names_file_line_and_key() {
        let bad = GOOD.replace("floor_tok_s", "flor_tok_s");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("gates/t.toml:13:1"), "{e}");
        assert!(e.contains("flor_tok_s"), "{e}");
    }

    #[test]
    fn a_misspelt_key_gets_a_did_you_mean_and_a_far_one_does_not() {
        let bad = GOOD.replace("floor_tok_s", "flor_tok_s");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("did you mean `floor_tok_s`?"), "{e}");
        let bad = GOOD.replace("floor_tok_s", "Floor-Tok-S");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("did you mean `floor_tok_s`?"), "{e}");
        let bad = GOOD.replace("floor_tok_s", "zebra");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("zebra"), "{e}");
        assert!(!e.contains("did you mean"), "{e}");
        assert_eq!(did_you_mean("expected a number"), "expected a number");
        assert_eq!(
            did_you_mean("unknown field `tmeout_s`, expected `timeout_s`"),
            "unknown field `tmeout_s`, expected `timeout_s`; did you mean `timeout_s`?"
        );
    }

    #[test]
    fn an_integer_is_accepted_where_a_number_is_expected() {
        let g = parse_str(&GOOD.replace("floor_tok_s = ", "floor_tok_s = 60 #")).unwrap();
        assert_eq!(g.assertions.rate.as_ref().unwrap().floor_tok_s, 60.0);
        let g = parse_str(&format!("{GOOD}[assert.first_token]\nlimit_ms = 500\n")).unwrap();
        assert_eq!(g.assertions.first_token.as_ref().unwrap().limit_ms, 500.0);
    }

    #[test]
    fn tpot_limit_is_parsed_in_report_order_and_a_bad_one_refused_with_its_line() {
        let g = parse_str(&format!("{GOOD}[assert.tpot]\nlimit_ms = 40\n")).unwrap();
        assert_eq!(g.assertions.tpot, Some(TpotAssert { limit_ms: 40.0 }));
        assert_eq!(
            g.assertions.kinds(),
            vec![
                AssertionKind::Route,
                AssertionKind::Rate,
                AssertionKind::Tpot
            ]
        );
        assert_eq!(g.assertions.names(), vec!["route", "rate", "tpot"]);
        for bad in ["0", "-3", "nan"] {
            let e = parse_str(&format!("{GOOD}[assert.tpot]\nlimit_ms = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("gates/t.toml:15:12"), "{bad}: {e}");
            assert!(e.contains("assert.tpot.limit_ms"), "{bad}: {e}");
        }
        let e = parse_str(&format!("{GOOD}[assert.tpot]\nlimit = 40\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("limit"), "{e}");
        // TPOT needs token arrival times: a whole-body request cannot have one.
        let body = GOOD
            .replace("max_tokens = 16", "max_tokens = 16\nstream = false")
            .replace("[assert.rate]\nfloor_tok_s = 10.0\n", "");
        let e = parse_str(&format!("{body}[assert.tpot]\nlimit_ms = 40\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("[assert.tpot] needs a streamed reply"), "{e}");
    }

    /// `[assert.rate] source = "both"` with `agree_pct`: parsed; default 20 %; a bad percent or an
    /// `agree_pct` without `source = "both"` is refused naming its key.
    #[test]
    fn rate_source_both_and_agree_pct_parse_and_are_checked() {
        let both = |extra: &str| {
            GOOD.replace(
                "floor_tok_s = 10.0\n",
                &format!("floor_tok_s = 10.0\n{extra}"),
            )
        };
        let g = parse_str(&both("source = \"both\"\nagree_pct = 15.0\n")).unwrap();
        let r = g.assertions.rate.as_ref().unwrap();
        assert_eq!((r.source, r.agree_pct), (RateSource::Both, 15.0));
        let g = parse_str(&both("source = \"both\"\n")).unwrap();
        assert_eq!(g.assertions.rate.unwrap().agree_pct, DEFAULT_AGREE_PCT);
        let e = parse_str(&both("source = \"both\"\nagree_pct = -5.0\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("assert.rate.agree_pct"), "{e}");
        assert!(e.contains("> 0"), "{e}");
        let e = parse_str(&both("agree_pct = 10.0\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("assert.rate.agree_pct"), "{e}");
        assert!(e.contains("only with source = \"both\""), "{e}");
        assert!(parse_str(&both("source = \"either\"\n")).is_err());
    }

    #[test]
    fn floor_not_positive_is_refused_with_its_line() {
        let bad = GOOD.replace("floor_tok_s = 10.0", "floor_tok_s = -1.0");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("gates/t.toml:13:15"), "{e}");
        assert!(e.contains("assert.rate.floor_tok_s"), "{e}");
    }

    #[test]
    fn invalid_regex_is_refused() {
        let bad = GOOD.replace("n_threads = 1", "n_threads = (1");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(
            e.contains("assert.route.fast") && e.contains("invalid regex"),
            "{e}"
        );
        assert!(e.contains(":11:"), "{e}");
    }

    #[test]
    fn no_prompts_is_refused() {
        let bad = GOOD.replace(
            r#"prompts = ["What is the capital of France?"]"#,
            "prompts = []",
        );
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(
            e.contains("request.prompts") && e.contains("at least one prompt"),
            "{e}"
        );
    }

    #[test]
    fn undefined_placeholder_is_refused() {
        let bad = GOOD.replace("{gate_dir}/x", "{modle}");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("`{modle}` is not defined"), "{e}");
        assert!(e.contains("serve.command"), "{e}");
    }

    #[test]
    fn vars_are_placeholders() {
        let g = parse_str(
            &GOOD
                .replace("[serve]", "[vars]\nbin = \"{cache}/bin\"\n[serve]")
                .replace("\"srv\"", "\"{bin}/srv\""),
        )
        .unwrap();
        match g.serve.mode {
            ServeMode::Command(argv) => assert_eq!(argv[0], "/c/bin/srv"),
            _ => panic!(),
        }
    }

    #[test]
    fn wrong_type_is_named() {
        let bad = GOOD.replace("max_tokens = 16", "max_tokens = \"sixteen\"");
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(
            e.contains("gates/t.toml:8:14") && e.contains("max_tokens = \"sixteen\""),
            "{e}"
        );
    }

    #[test]
    fn empty_file_is_a_clear_error() {
        assert!(parse_str("").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn command_and_url_together_are_refused() {
        let bad = GOOD.replace("[request]", "url = \"http://127.0.0.1:1\"\n[request]");
        assert!(parse_str(&bad)
            .unwrap_err()
            .to_string()
            .contains("either `command`"));
    }

    #[test]
    fn untimed_prompts_are_gate_prompts_and_leave_one_timed() {
        let two = GOOD.replace(
            r#"prompts = ["What is the capital of France?"]"#,
            r#"prompts = ["What is the capital of France?", "Tell me a story."]"#,
        );
        // [request] untimed: parsed, each must be a prompt, exactly.
        let ok = two.replace(
            "max_tokens = 16\n",
            "max_tokens = 16\nuntimed = [\"What is the capital of France?\"]\n",
        );
        let g = parse_str(&ok).unwrap();
        assert_eq!(g.request.untimed, ["What is the capital of France?"]);
        assert!(!g.request.timed("What is the capital of France?"));
        assert!(g.request.timed("Tell me a story."));
        let bad = two.replace(
            "max_tokens = 16\n",
            "max_tokens = 16\nuntimed = [\"nope\"]\n",
        );
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(
            e.contains("request.untimed") && e.contains("\"nope\""),
            "{e}"
        );
        // Every prompt untimed while rate times replies: refused.
        let all = two.replace(
            "max_tokens = 16\n",
            "max_tokens = 16\nuntimed = [\"What is the capital of France?\", \"Tell me a story.\"]\n",
        );
        let e = parse_str(&all).unwrap_err().to_string();
        assert!(
            e.contains("every prompt is untimed, but [assert.rate] times replies"),
            "{e}"
        );
        // [assert.known_answer] untimed = true marks its prompt; without a prompt it is refused.
        let ka = format!("{two}[assert.known_answer]\nmatches = \"Paris\"\nprompt = \"What is the capital of France?\"\nuntimed = true\n");
        assert_eq!(
            parse_str(&ka).unwrap().request.untimed,
            ["What is the capital of France?"]
        );
        let e = parse_str(&format!(
            "{two}[assert.known_answer]\nmatches = \"Paris\"\nuntimed = true\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("assert.known_answer.untimed") && e.contains("needs `prompt`"),
            "{e}"
        );
    }

    #[test]
    fn known_answer_prompt_must_be_a_gate_prompt() {
        let bad = format!("{GOOD}[assert.known_answer]\nmatches = \"Paris\"\nprompt = \"nope\"\n");
        assert!(parse_str(&bad)
            .unwrap_err()
            .to_string()
            .contains("assert.known_answer.prompt"));
    }

    #[test]
    fn key_span_finds_keys_tables_and_implicit_tables() {
        let text = "[gate]\nname = \"g\"\n[serve]\nhost = \"h\"\n[assert.rate]\nfloor_tok_s = 1\n[request.extra]\nx = { y = 1 }\n";
        let doc = toml_edit::ImDocument::parse(text).unwrap();
        let line = |k: &str| key_span(doc.as_table(), k).map(|s| line_col(text, s.start).0);
        assert_eq!(line("gate.name"), Some(2));
        assert_eq!(line("serve.host"), Some(4));
        assert_eq!(line("serve"), Some(3));
        // Absent key: the nearest written parent.
        assert_eq!(line("serve.port"), Some(3));
        assert_eq!(
            line("assert"),
            Some(5),
            "implicit [assert]: where its first table is named"
        );
        assert_eq!(line("assert.rate.floor_tok_s"), Some(6));
        assert_eq!(line("request.extra.x.y"), Some(8));
        assert_eq!(line("nope"), None);
        assert_eq!(
            key_at(doc.as_table(), "", text.find("\"h\"").unwrap()).as_deref(),
            Some("serve.host")
        );
    }

    #[test]
    fn hosts_are_addresses_or_names() {
        for ok in [
            "127.0.0.1",
            "::1",
            "[::1]",
            "0.0.0.0",
            "localhost",
            "a-b.c9",
        ] {
            assert!(valid_host(ok), "{ok}");
        }
        for bad in [
            "", " ", "a b", "a/b", "-a", "a-", "a..b", "http://x", "[::1", "x:80",
        ] {
            assert!(!valid_host(bad), "{bad}");
        }
    }

    #[test]
    fn url_authorities_are_checked() {
        for ok in [
            "http://127.0.0.1:8080",
            "https://api.example.com",
            "http://[::1]:9/v1",
            "http://h:1/x?y",
        ] {
            assert!(valid_url_authority(ok), "{ok}");
        }
        for bad in [
            "http://",
            "http://:80",
            "http://a b:80",
            "http://h:0",
            "http://h:x",
            "http://u@h",
            "http://[::1",
        ] {
            assert!(!valid_url_authority(bad), "{bad}");
        }
    }

    #[test]
    fn type_names_are_words() {
        assert_eq!(
            plain_types("invalid type: string \"x\", expected f64"),
            "invalid type: string \"x\", expected a number"
        );
        assert_eq!(
            plain_types("invalid type: string \"x\", expected a sequence"),
            "invalid type: string \"x\", expected a list of strings"
        );
        assert!(
            plain_types("invalid type: floating point `1.5`, expected i64")
                .contains("number `1.5`, expected a whole number")
        );
    }

    #[test]
    fn vars_expand_in_file_order_not_name_order() {
        let g = GOOD.replace(
            "[serve]",
            "[vars]\nzz = \"/base\"\naa = \"{zz}/x\"\n[serve]",
        );
        let spec = parse_str(&g).unwrap();
        assert_eq!(spec.source, g);
        let bad = GOOD.replace(
            "[serve]",
            "[vars]\naa = \"{zz}/x\"\nzz = \"/base\"\n[serve]",
        );
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(e.contains("vars.aa") && e.contains("{zz}"), "{e}");
    }

    #[test]
    fn errors_without_a_span_name_the_keys_line() {
        let bad = GOOD.replace("[request]", "ready = \"health\"\n[request]");
        let line = bad.lines().position(|l| l.starts_with("ready")).unwrap() + 1;
        let e = parse_str(&bad).unwrap_err().to_string();
        assert!(
            e.contains(&format!(":{line}:")) && e.contains("serve.ready"),
            "{e}"
        );
    }

    #[test]
    fn declaring_lines_are_the_ones_the_file_text_gives() {
        // Every gate of gates/ (matrix entries included): the line kept at parse time is the one found by
        // reading the file's text again, for every trial name.
        let mut seen = 0;
        for entry in std::fs::read_dir("gates").unwrap() {
            let file = entry.unwrap().path();
            if file.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for g in matrix::load_all(&file).unwrap() {
                for name in g.trial_names() {
                    assert_eq!(
                        g.decl_line_of(&name),
                        line_in(&text, &name),
                        "{file:?} {name}"
                    );
                    seen += 1;
                }
                for k in g.assertions.kinds() {
                    assert!(g.decl_line(k).is_some_and(|l| l > 1), "{file:?} {k}");
                }
                assert_eq!(g.decl_line(AssertionKind::Load), None);
            }
        }
        assert!(seen > 10, "{seen}");
        // Inline `[assert]` keys and the `floor_tok_s` line of `[assert.rate]`.
        let text = GOOD
            .replace("[assert.rate]\n", "")
            .replace("floor_tok_s = 10.0\n", "")
            .replace(
                "[assert.route]",
                "[assert]\ncontent = {}\n[assert.rate]\nsource = \"client\"\nfloor_tok_s = 1.0\n[assert.route]",
            );
        let g = parse_str(&text).unwrap();
        for k in [
            AssertionKind::Content,
            AssertionKind::Rate,
            AssertionKind::Route,
        ] {
            assert_eq!(g.decl_line(k), Some(line_in(&text, k.name())), "{k}");
        }
        assert_eq!(g.decl_line(AssertionKind::Tpot), None);
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 3), (2, 1));
        assert_eq!(line_col("ab\ncd", 1), (1, 2));
    }
}
