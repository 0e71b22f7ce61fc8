//! The model of a gate: the validated types [`super::parse`] builds from the raw shapes ([`GateSpec`] and its
//! tables), with what the runner, the judge and the sinks ask of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;

use super::{drift, key_span, line_in, load, profile, record, RegressionAssert, SpecError};
use crate::vocab::{AssertionKind, Role};

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
    /// `[serve] engine` (spec/profile/): the dialect whose defaults the gate inherits; `None` = unstated.
    pub engine: Option<profile::Engine>,
    /// Where the serve's own clock comes from: the gate's `clock`, else the profile's, else `timings`.
    pub clock: profile::ServeClock,
    /// Whether the gate set `clock` itself (without an engine, a detected engine's clock applies otherwise:
    /// spec/detect.rs).
    pub clock_set: bool,
    /// Seconds to wait for readiness, default 120.
    pub ready_timeout_s: f64,
    /// Whether the gate set `ready_timeout_s` itself: on a `url` serve, the gate asks to wait for a serve
    /// starting elsewhere (else a host that does not resolve, or a port that refuses every probe for
    /// `io`'s short window, fails early: nothing to wait for).
    pub ready_timeout_set: bool,
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
    /// For `url` serves: a file holding the serve's pid (one decimal number, as daemons and systemd's
    /// `PIDFile=` write it), read once the serve is ready. The runner measures the footprint of that process,
    /// its process group (when it leads one) and its descendants, as it does for a serve it starts (peak
    /// memory, CPU per token; never the start-up time, which it did not see): `run.json` `serve.footprint`.
    pub pid_file: Option<PathBuf>,
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
    /// Warmup rounds as written (`request.warmup`): each round sends every prompt once, first, recorded but
    /// not judged. 0 when `warmup_requests` is written instead.
    pub warmup: u32,
    /// The warmup requests sent before the judged ones, in all: `warmup` rounds x prompts, or
    /// `request.warmup_requests` (the prompts in order, cycling), the count vLLM's bench (`--num-warmups`) and
    /// AIPerf (`--warmup-request-count`) take. One request takes the first-after-load costs (weights paged
    /// in, buffers allocated) for a fraction of a round's time.
    pub warmup_requests: u32,
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

/// `[assert.route]`: regexes on the serve log, and a response header matched on every judged reply.
#[derive(Debug, Clone)]
pub struct RouteAssert {
    /// Each must be found in the serve log (all of them: a gateway's route is several facts). Empty when the
    /// gate declares only the per-reply `header`.
    pub fast: Vec<Regex>,
    /// Must not be found; both found counts as the slow route. Only with `fast`.
    pub slow: Option<Regex>,
    /// Per-request route evidence: a response header every judged reply must carry, matching a regex.
    pub header: Option<RouteHeader>,
}

/// `[assert.route] header` / `header_fast`: the response header (e.g. a gateway's chosen deployment) whose
/// value must match `fast` on every judged reply that succeeded.
#[derive(Debug, Clone)]
pub struct RouteHeader {
    /// The header's name, lower-case (as `NN.response.json` stores response headers).
    pub name: String,
    /// The regex its value must match.
    pub fast: Regex,
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

/// `[assert.ready]`: the serve's start-up time (`run.json` `serve.ready_ms`: spawn to the first 200 on its
/// ready path) at most a limit.
#[derive(Debug, Clone)]
pub struct ReadyAssert {
    /// Limit, ms, > 0.
    pub limit_ms: f64,
    /// `load_log`: the model-load time the serve itself logs, read from the first line of `serve.log` the
    /// regex matches, in a named group `ms` (milliseconds) or `s` (seconds) (vLLM's `Loading weights took
    /// (?P<s>[\d.]+) seconds`, llama.cpp's `load time = +(?P<ms>[\d.]+) ms`): a figure shown beside
    /// `ready_ms` (`analysis::footprint::model_load_ms`), not bounded. None when the gate names none.
    pub load_log: Option<Regex>,
}

/// `[assert.memory]`: the serve's peak resident memory over its processes (`serve.footprint.rss_peak_mib`)
/// at most a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryAssert {
    /// Limit, MiB, > 0.
    pub limit_mib: f64,
}

/// `[assert.cpu]`: the serve's CPU per completion token over the judged requests (`serve.footprint.cpu`)
/// at most a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuAssert {
    /// Limit, ms of CPU per completion token, > 0.
    pub limit_ms_per_token: f64,
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
    /// `ready` (the serve's start-up)
    pub ready: Option<ReadyAssert>,
    /// `memory` (the serve's peak resident memory)
    pub memory: Option<MemoryAssert>,
    /// `cpu` (the serve's CPU per token)
    pub cpu: Option<CpuAssert>,
    /// `[assert.sample.NAME]`, one per asserted sampler (trials `sample.<name>`)
    pub sample: Vec<super::sample::SampleAssert>,
    /// `content`
    pub content: Option<ContentAssert>,
    /// `known_answer`
    pub known_answer: Option<KnownAnswerAssert>,
    /// `ratio` (pair gates)
    pub ratio: Option<RatioAssert>,
    /// `first_token_ratio` (pair gates; its `metric` is always `first_token`)
    pub first_token_ratio: Option<RatioAssert>,
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
            AssertionKind::Ready => self.ready.is_some(),
            AssertionKind::Memory => self.memory.is_some(),
            AssertionKind::Cpu => self.cpu.is_some(),
            AssertionKind::Content => self.content.is_some(),
            AssertionKind::KnownAnswer => self.known_answer.is_some(),
            AssertionKind::Ratio => self.ratio.is_some(),
            AssertionKind::FirstTokenRatio => self.first_token_ratio.is_some(),
            AssertionKind::SameAnswers => self.same_answers.is_some(),
            AssertionKind::Drift => self.drift.is_some(),
            // A load gate's verdicts are named per sweep point (`GateSpec::trial_names`).
            AssertionKind::Load => false,
            // `[assert.sample.NAME]`'s verdicts are named per sampler (`GateSpec::trial_names`).
            AssertionKind::Sample => false,
            // `[contract]`'s verdicts are named per check (`GateSpec::contract`, `GateSpec::trial_names`).
            AssertionKind::Contract => false,
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
    /// `[contract]`: the serve's API contract checks (docs/contract.md), each its own verdict
    /// `contract.<check>`; None without the table.
    pub contract: Option<super::contract::ContractSpec>,
    /// `[[sample]]`: the samplers read during the run (`spec::sample`); empty without.
    pub samples: Vec<super::sample::SampleSpec>,
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
        let spec: record::RunRecordSpec = toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| format!("[record]: {}", e.message()))?;
        if let Some(why) = record::sentence_problem(&spec.what_would_make_it_wrong) {
            return Err(format!("{SENTENCE_KEY}: {why}"));
        }
        Ok(spec)
    }
}

/// The key of `[record]`'s required sentence, as `GateSpec::record_spec` names it in its refusal.
pub(crate) const SENTENCE_KEY: &str = "record.what_would_make_it_wrong";

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
    /// declared assertion: the same line [`line_in`] finds in the file's text. A load trial's line is its
    /// latency bound's key (`ttft_p95_ms = 800`) or its `[assert.X]` header, found in the gate's text.
    pub fn decl_line_of(&self, name: &str) -> usize {
        if let Some(c) = self.contract.as_ref().and_then(|c| c.by_trial(name)) {
            return c.line;
        }
        if let Some(s) = self
            .assertions
            .sample
            .iter()
            .find(|s| s.trial_name() == name)
        {
            return s.line;
        }
        // A load trial (`[c=16]::ttft_p95`): its bound's key or its `[assert.X]` header.
        if let Some(trial) = super::load::load_trial(name) {
            if let Some(l) = super::lines::load_line_in(&self.source, trial) {
                return l;
            }
        }
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
                // The provisioning script's last failure (`<marker>.failed`: a stamp, a tab, the cause), said
                // with the command, so a runtime that cannot run here says why.
                let failed = marker.with_extension("failed");
                let cause = std::fs::read_to_string(&failed)
                    .ok()
                    .and_then(|t| {
                        t.lines()
                            .next()
                            .map(|l| l.split_once('\t').map_or(l, |(_, c)| c).trim().to_string())
                    })
                    .filter(|c| !c.is_empty())
                    .map(|c| format!("; its last try failed: {}", crate::text::shown(&c)))
                    .unwrap_or_default();
                // Locust, AIPerf and GuideLLM drive the load, they serve no model: no second model with them.
                let flag = if ["locust", "aiperf", "guidellm"].contains(&name.as_str()) {
                    ""
                } else {
                    " --second-model"
                };
                unmet.push(format!(
                    "runtime {name} is not provisioned (no {}{cause}): run scripts/provision-{name}.sh{flag}",
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

/// The 1-based line of `gate`'s file that declares `assertion`, for annotations and JUnit properties: the
/// `floor_tok_s` line of `[assert.rate]` for `rate` (the bound a person edits), else the `[assert.X]` header
/// (`assert.X` may also be written inline, `assert = { X = ... }`: then the key's line). Falls back to the
/// `[assert]`/first line: 1 when the assertion is not found (e.g. `spec` for a file that does not parse).
pub fn line_of(gate: &GateSpec, assertion: &str) -> usize {
    line_in(&gate.source, assertion)
}
