//! The results document: one value holding what a gate run (the harness behind `cargo test --test gates`,
//! or `servegate run`) decided, for machines. It is built from run outcomes (verdicts, `run.json`) and
//! consumed by the output formats behind [`crate::sinks::export::Exporter`] (`sinks/json.rs`: schema
//! [`RESULTS_SCHEMA`], documented field by field in docs/results-json.md; `sinks/junit.rs`;
//! `sinks/markdown.rs`). Each export is a pure `serialize(&results) -> bytes`; [`write_atomic`] is the
//! separate write. This module starts nothing and judges nothing; the files it reads are the tail of a
//! failed gate's `serve.log` ([`serve_log_tail`]) and, for a pair run, each arm's `run.json` (the arm's
//! serve command and provenance in the results).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::exit;
use crate::evidence::HostInfo;
use crate::judge::outcome::RunOutcome;
use crate::judge::Verdict;
use crate::spec::GateSpec;
use crate::vocab::{AssertionKind, Better, BoundKind, Metric, Unit};

/// One output format: a pure serialization of the results document into the bytes of its file. Each format
/// (`sinks/json.rs`, `sinks/junit.rs`, `sinks/markdown.rs`) implements it over this model alone;
/// [`crate::sinks::export::Format::exporter`] picks one.
pub trait Exporter {
    /// The file's bytes, or why the document cannot be written in this format.
    fn serialize(&self, results: &Results) -> Result<Vec<u8>, String>;
}

/// The schema id of the results document. Bumped when a field is removed or changes meaning; new fields may
/// be added within a version. `/2` states, per assertion, its declaring line (`line`), the metric it bounds
/// (`metric`: registry name, unit, which way is better) and which side its bound is (`bound_kind`: floor or
/// limit), so no reader guesses them from the assertion's name.
pub const RESULTS_SCHEMA: &str = "servegate.results/2";

/// The first schema id, still read ([`Results::from_json`]): its assertions carry no `line`, `metric` or
/// `bound_kind`.
pub(crate) const RESULTS_SCHEMA_V1: &str = "servegate.results/1";

/// Lines of `serve.log` kept in [`GateResults::serve_log_tail`] when a gate has a failed assertion.
pub(crate) const SERVE_LOG_TAIL_LINES: usize = 40;

/// At most this many bytes (the end) of those lines.
pub(crate) const SERVE_LOG_TAIL_BYTES: usize = 16 * 1024;

/// Who produced the document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Producer {
    /// The gate harness (`cargo test --test gates`).
    Harness,
    /// `servegate run`.
    Run,
    /// `servegate judge` (recorded evidence re-judged).
    Judge,
}

/// The outcome of one test (one assertion of one gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    /// The assertion held.
    Passed,
    /// It did not, or the gate could not be run (see [`FailureKind`]).
    Failed,
    /// The gate was ignored (unmet `[requires]`), with the reason.
    Skipped,
    /// The evidence could not decide (the verdict says the n that would): a failure by default
    /// (`failure_kind` indeterminate); with the gate's `on_indeterminate = "pass"` it carries no failure kind and
    /// does not fail the run, but it is still reported as indeterminate, never as passed.
    Indeterminate,
    /// The baseline no longer applies (what the gate fixes or the machine differs): failed (`failure_kind`
    /// incomparable, exit 9) naming the fields and the bless command, unless the assertion says
    /// `on_incomparable = "skip"` (then skipped with that reason, and failed again under
    /// `SERVEGATE_STRICT=1`).
    Incomparable,
    /// Not compared (busy runner): the runner's host load is outside every applicable baseline's. Skipped
    /// with the loads named (its own reason in every count, never with unprovisioned runtimes), or failed
    /// under `SERVEGATE_STRICT=1` (`failure_kind` incomparable).
    NotCompared,
    /// The client fell behind its schedule: a failure (`failure_kind` void).
    Void,
}

impl TestOutcome {
    /// The test of a verdict's outcome.
    pub(crate) fn of(o: crate::judge::Outcome) -> TestOutcome {
        use crate::judge::Outcome;
        match o {
            Outcome::Pass => TestOutcome::Passed,
            Outcome::Fail => TestOutcome::Failed,
            Outcome::Indeterminate => TestOutcome::Indeterminate,
            Outcome::Incomparable => TestOutcome::Incomparable,
            Outcome::NotCompared => TestOutcome::NotCompared,
            Outcome::Void => TestOutcome::Void,
            // An unsupported `[contract]` check that `may_lack` allows: skipped with its reason, never a pass.
            Outcome::Unsupported => TestOutcome::Skipped,
            // A `[contract]` check failing as `known_fail` states: skipped with its reason, never a pass.
            Outcome::KnownFail => TestOutcome::Skipped,
        }
    }

    /// The state as exports and JUnit properties write it: `pass`, `fail`, `skipped`, `indeterminate`,
    /// `incomparable`, `not_compared`, `void`.
    pub(crate) fn state(self) -> &'static str {
        match self {
            TestOutcome::Passed => "pass",
            TestOutcome::Failed => "fail",
            TestOutcome::Skipped => "skipped",
            TestOutcome::Indeterminate => "indeterminate",
            TestOutcome::Incomparable => "incomparable",
            TestOutcome::NotCompared => "not_compared",
            TestOutcome::Void => "void",
        }
    }
}

pub use crate::error::FailureKind;

/// The whole document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Always [`RESULTS_SCHEMA`].
    pub schema: String,
    /// servegate's version.
    pub servegate_version: String,
    /// `harness` or `run`.
    pub producer: Producer,
    /// UTC start, RFC 3339.
    pub started_utc: String,
    /// UTC end, RFC 3339.
    pub ended_utc: String,
    /// Wall time of the whole run, seconds.
    pub duration_s: f64,
    /// `SERVEGATE_STRICT` was set: unmet requirements fail instead of being skipped.
    pub strict: bool,
    /// The `servegate` exit code for these results (0 pass, 1 assertion failed, 3 spec invalid, 4 serve never
    /// ready, 5 evidence error, 6 requirement unmet under strict): the worst (highest) of the gates'.
    pub exit_code: i32,
    /// Counts over every listed test of every gate.
    pub counts: Counts,
    /// Every gate with at least one listed test, in run order.
    pub gates: Vec<GateResults>,
    /// Problems of the run as a whole that make it fail although no listed test failed (e.g. `nothing was
    /// checked: ...`, a report that could not be written). Absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// Test counts. `tests = passed + failed + skipped + indeterminate + incomparable + not_compared + void`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Tests listed.
    pub tests: u64,
    /// Tests passed.
    pub passed: u64,
    /// Tests failed.
    pub failed: u64,
    /// Tests skipped (ignored gates).
    pub skipped: u64,
    /// Tests the evidence could not decide.
    #[serde(default)]
    pub indeterminate: u64,
    /// Tests whose baseline no longer applies.
    #[serde(default)]
    pub incomparable: u64,
    /// Tests not compared because the runner was busy (host load outside every applicable baseline's).
    #[serde(default)]
    pub not_compared: u64,
    /// Tests of void runs (the client fell behind its schedule).
    #[serde(default)]
    pub void: u64,
    /// The tests that neither passed nor failed the run (skipped, not compared, incomparable under
    /// `on_incomparable = "skip"`, indeterminate under `on_indeterminate = "pass"`), counted by reason
    /// ([`AssertionResult::skip_reason`]), most first: `1 not compared: busy runner, 34 not provisioned, 5 no
    /// device` ([`Counts::skips_text`]). Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_reasons: Vec<SkipCount>,
}

/// One reason tests were skipped and how many ([`Counts::skip_reasons`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipCount {
    /// The reason ([`AssertionResult::skip_reason`]).
    pub reason: String,
    /// Tests skipped for it.
    pub count: u64,
}

/// The skip reason of a busy runner ([`TestOutcome::NotCompared`]).
pub(crate) const SKIP_BUSY_RUNNER: &str = "not compared: busy runner";
/// The skip reason of a baseline that no longer applies, skipped by `on_incomparable = "skip"`.
pub(crate) const SKIP_INCOMPARABLE: &str = "not compared: baseline does not apply";
/// The skip reason of an indeterminate verdict let through by `on_indeterminate = "pass"`.
pub(crate) const SKIP_INDETERMINATE: &str = "indeterminate, let through";
/// The skip reason of an unsupported `[contract]` check that the gate's `may_lack` allows.
pub(crate) const SKIP_UNSUPPORTED: &str = "unsupported, allowed by [contract] may_lack";
/// The skip reason of a test not run (filtered or ignored by the test arguments).
pub(crate) const SKIP_NOT_RUN: &str = "not run";
/// The skip reason of a `[contract]` check failing as the gate's `known_fail` states.
pub(crate) const SKIP_KNOWN_FAIL: &str = "a known failure, stated by [contract] known_fail";

/// The skip reason of a gate whose `[requires]` are unmet, from its unmet reasons
/// ([`crate::spec::GateSpec::requirements`]), the first that applies of: `no device` (a path under `/dev/`),
/// `not provisioned` (a runtime), `command missing`, `environment unset`, `path missing`.
pub(crate) fn unmet_reason(unmet: &[String]) -> &'static str {
    let any = |f: &dyn Fn(&str) -> bool| unmet.iter().any(|u| f(u));
    if any(&|u| u.starts_with("path /dev/")) {
        "no device"
    } else if any(&|u| u.starts_with("runtime ") && u.contains(" is not provisioned")) {
        "not provisioned"
    } else if any(&|u| u.starts_with("command ")) {
        "command missing"
    } else if any(&|u| u.starts_with("environment variable ")) {
        "environment unset"
    } else {
        "path missing"
    }
}

impl Counts {
    /// The skips by reason as one phrase, `1 not compared: busy runner, 34 not provisioned`; empty when none.
    pub(crate) fn skips_text(&self) -> String {
        self.skip_reasons
            .iter()
            .map(|s| format!("{} {}", s.count, s.reason))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The status of one gate, over its listed tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateStatus {
    /// Every listed test passed.
    Passed,
    /// At least one listed test failed (`failure_kind` says why).
    Failed,
    /// Every listed test was skipped: unmet `[requires]`, or a baseline that no longer applies under
    /// `on_incomparable = "skip"`.
    Ignored,
    /// No listed test failed, but at least one is indeterminate, void, not compared (busy runner) or
    /// incomparable beside tests that ran: never a pass.
    Indeterminate,
    /// The gate ran and no listed test failed, but some of its tests were not run (`not_run`: filtered out by
    /// the test arguments, `cargo test --test gates -- --skip gate::rate`): what was not run is not passed, so
    /// neither is the gate.
    Partial,
}

/// One gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResults {
    /// `gate.name` (the file stem for a spec that did not parse).
    pub name: String,
    /// The gate file as given.
    pub file: String,
    /// `gate.description` (empty for an invalid spec).
    pub description: String,
    /// `passed`, `failed` or `ignored`.
    pub status: GateStatus,
    /// For a failed gate, the most severe failure kind among its tests.
    pub failure_kind: Option<FailureKind>,
    /// The `servegate` exit code for this gate alone.
    pub exit_code: i32,
    /// Why the gate was ignored, could not run, or has an invalid spec; None when it ran.
    pub reason: Option<String>,
    /// Wall time spent on the gate (serve start, requests, stop, judging), seconds.
    pub duration_s: f64,
    /// Where and on what it ran; None when it did not run (ignored, invalid spec, no evidence).
    pub provenance: Option<Provenance>,
    /// One entry per listed assertion, in declaration order.
    pub assertions: Vec<AssertionResult>,
    /// Per-request figures from `run.json`, warmup included (flagged), in send order.
    pub requests: Vec<RequestFigures>,
    /// The last [`SERVE_LOG_TAIL_LINES`] lines of `serve.log` when a test of the gate failed (for a pair gate,
    /// the last lines of each arm's log, each headed `== <arm dir>/serve.log ==`); else None.
    pub serve_log_tail: Option<String>,
    /// Tests of this gate that were not run although the gate ran (the harness's test arguments filtered them
    /// out while selecting another of its tests), in declaration order; they are not listed in `assertions`.
    /// Not empty: the gate is [`GateStatus::Partial`], never passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

/// Provenance of a gate run, from its `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The run directory holding the evidence.
    pub evidence_dir: String,
    /// UTC start of the run, RFC 3339.
    pub started_utc: String,
    /// UTC end of the run, RFC 3339.
    pub ended_utc: Option<String>,
    /// `command` (started by the runner) or `url` (already running).
    pub serve_mode: String,
    /// The argv started, placeholders expanded (empty for a `url` serve).
    pub serve_command: Vec<String>,
    /// Base URL the requests went to.
    pub base_url: String,
    /// `request.model` (`~` expanded).
    pub model: String,
    /// The body's `model` (`request.served_model`, else `request.model`).
    pub served_model: String,
    /// Model ids listed by the serve's `/v1/models`.
    pub serve_models: Vec<String>,
    /// The serve's version where it says it (llama.cpp `/props` build_info).
    pub serve_version: Option<String>,
    /// ms from spawn to the first HTTP 200 on the ready path.
    pub serve_ready_ms: Option<f64>,
    /// Why the serve never became ready or failed during the run.
    pub serve_failure: Option<String>,
    /// Host facts (hostname, os, cpus).
    pub host: HostInfo,
    /// 1, 5, 15 minute load averages at the start of the run.
    pub load_avg_start: Option<[f64; 3]>,
    /// The same at the end.
    pub load_avg_end: Option<[f64; 3]>,
    /// SHA-256 of the model file, where the run hashed it (pair gates); else None.
    pub model_sha256: Option<String>,
    /// The arms of a pair gate, in run order (each its own serve and run directory); empty otherwise.
    pub arms: Vec<ArmProvenance>,
    /// The run's notes from `run.json` (`dialect: ...` with each note's count over the judged replies,
    /// `cold_first_request: ...`, `models_empty: ...`, `model_not_listed: ...`, ...); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One arm of a pair gate, from its own `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmProvenance {
    /// 1-based position in the run order.
    pub arm: usize,
    /// `ours` or `theirs`.
    pub role: String,
    /// The runtime's description from the gate.
    pub runtime: String,
    /// The arm's run directory.
    pub evidence_dir: String,
    /// The argv started for the arm.
    pub serve_command: Vec<String>,
    /// The arm's serve version where it says it.
    pub serve_version: Option<String>,
    /// Why the arm's serve never became ready or failed during the run.
    pub serve_failure: Option<String>,
}

/// One test: one assertion of one gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssertionResult {
    /// The assertion (`route`, `rate`, `first_token`, `content`, `known_answer`; `spec` for an invalid spec).
    pub name: String,
    /// The test name, `<gate>::<assertion>`, as libtest lists it.
    pub test: String,
    /// `passed`, `failed` or `skipped`.
    pub outcome: TestOutcome,
    /// Why it failed; None unless `outcome` is `failed`.
    pub failure_kind: Option<FailureKind>,
    /// The verdict line (`rate PASS median 47.0 tok/s (...)`), or the failure or skip reason; guarded by
    /// [`crate::text::lines`] (no control byte, no CI workflow command).
    pub message: String,
    /// Wall time of the test, seconds. The gate's run is charged to the first of its tests that runs.
    pub duration_s: f64,
    /// The statistic compared with the bound (the median), for `rate` and `first_token`.
    pub median: Option<f64>,
    /// The bound: `floor_tok_s` for `rate`, `limit_ms` for `first_token` and `tpot`.
    pub bound: Option<f64>,
    /// Which side `bound` holds the median on: `floor` (at least) or `limit` (at most), from the metric's
    /// registry entry (`vocab::Bound::kind`); None without a bound (and in `/1` files without a metric).
    #[serde(default)]
    pub bound_kind: Option<BoundKind>,
    /// Unit of `median`, `bound` and `values`: `tok/s` or `ms`.
    pub unit: Option<String>,
    /// The metric `median`, `bound` and `values` are of, as the metric registry states it; None for an
    /// assertion without a figure.
    #[serde(default)]
    pub metric: Option<MetricResult>,
    /// The per-request values judged, in send order; null where a request had none.
    pub values: Vec<Option<f64>>,
    /// Why a test that neither passed nor failed the run was not checked, as the counts name it
    /// ([`Counts::skip_reasons`]): `not compared: busy runner`, `not compared: baseline does not apply`,
    /// `indeterminate, let through`, `not provisioned`, `no device`, `command missing`, `environment unset`,
    /// `path missing`, `not run`. None for a test that passed or fails the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// The 1-based line of the gate file declaring the assertion ([`GateSpec::decl_line_of`], kept from the
    /// parse), where JUnit's `gate_line` and the GitHub annotations point; None where no gate parsed (read as
    /// line 1: [`AssertionResult::gate_line`]). Written as `line` (null when unknown; absent in `/1` files).
    #[serde(default)]
    pub line: Option<usize>,
}

/// The metric a figure assertion bounds, as the registry (`vocab::Metric::info`) states it: written into the
/// results so a reader (the exports) takes the direction from here, never from the assertion's name.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricResult {
    /// The registry's wire name: `decode_rate`, `server_decode_rate`, `ttft`, `tpot`, ...
    pub name: Metric,
    /// The unit of its values (`tok/s`, `ms`).
    pub unit: Unit,
    /// Which way is better: `higher` (a gate sets a floor) or `lower` (a limit).
    pub better: Better,
}

impl MetricResult {
    /// The registry's entry for `metric`.
    pub const fn of(metric: Metric) -> MetricResult {
        let i = metric.info();
        MetricResult {
            name: metric,
            unit: i.unit,
            better: i.better,
        }
    }

    /// True when higher values are better.
    pub(crate) fn higher_is_better(&self) -> bool {
        self.better == Better::Higher
    }
}

/// One request's figures (docs/metrics.md defines each).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestFigures {
    /// Send order, 0-based (the evidence files are `NN.*`).
    pub index: usize,
    /// Recorded, never judged.
    pub warmup: bool,
    /// Index into the gate's prompts.
    pub prompt_index: usize,
    /// HTTP status, when a response arrived.
    pub http_status: Option<u16>,
    /// Transport failure, verbatim.
    pub transport_error: Option<String>,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Decode rate, tok/s, first token excluded.
    pub decode_tok_s: Option<f64>,
    /// llama.cpp's own `timings.predicted_per_second`.
    pub server_decode_tok_s: Option<f64>,
    /// Completion tokens as reported.
    pub completion_tokens: Option<u64>,
    /// End-to-end latency, ms.
    pub e2e_ms: Option<f64>,
    /// Time per output token, ms.
    pub tpot_ms: Option<f64>,
}

impl Results {
    /// A results document read back from its JSON: the current schema ([`RESULTS_SCHEMA`]) as written, or a
    /// `/1` one ([`RESULTS_SCHEMA_V1`]) brought up to it: each figure assertion's `metric` and `bound_kind`
    /// are those of the registry metric its kind bounds (`AssertionKind::metric`: `rate` the client decode
    /// rate, which is what a `/1` file's `rate` measured unless its gate said `source = "server"`), its `line`
    /// stays unknown. Any other schema is an error naming it.
    pub fn from_json(v: serde_json::Value) -> Result<Results, String> {
        let schema = v.get("schema").and_then(|s| s.as_str()).map(str::to_string);
        let old = match schema.as_deref() {
            Some(RESULTS_SCHEMA) => false,
            Some(RESULTS_SCHEMA_V1) => true,
            other => return Err(format!("not a results document (schema {other:?})")),
        };
        let mut r: Results = serde_json::from_value(v)
            .map_err(|e| format!("not {}: {e}", schema.unwrap_or_default()))?;
        if old {
            for t in r.gates.iter_mut().flat_map(|g| g.assertions.iter_mut()) {
                if t.metric.is_none() && t.median.is_some() {
                    let metric = AssertionKind::from_name(&t.name).and_then(AssertionKind::metric);
                    t.metric = metric.map(MetricResult::of);
                    t.bound_kind = metric
                        .filter(|_| t.bound.is_some())
                        .map(|m| crate::vocab::Bound::for_metric(m, 0.0).kind());
                }
            }
            r.schema = RESULTS_SCHEMA.into();
        }
        Ok(r)
    }

    /// An empty document, started now.
    pub fn begin(producer: Producer, strict: bool) -> Results {
        Results {
            schema: RESULTS_SCHEMA.into(),
            servegate_version: env!("CARGO_PKG_VERSION").into(),
            producer,
            started_utc: crate::evidence::now_utc(),
            ended_utc: String::new(),
            duration_s: 0.0,
            strict,
            exit_code: exit::PASS,
            counts: Counts::default(),
            gates: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Adds a gate (a gate with no listed test is dropped: the document lists only what ran or was ignored).
    pub fn push(&mut self, gate: GateResults) {
        if !gate.assertions.is_empty() {
            self.gates.push(gate);
        }
    }

    /// Stamps the end, the counts and the exit code (the worst of the gates').
    pub fn finish(&mut self, duration_s: f64) {
        self.ended_utc = crate::evidence::now_utc();
        self.duration_s = duration_s;
        let mut c = Counts::default();
        for t in self.gates.iter().flat_map(|g| &g.assertions) {
            c.tests += 1;
            match t.outcome {
                TestOutcome::Passed => c.passed += 1,
                TestOutcome::Failed => c.failed += 1,
                TestOutcome::Skipped => c.skipped += 1,
                TestOutcome::Indeterminate => c.indeterminate += 1,
                TestOutcome::Incomparable => c.incomparable += 1,
                TestOutcome::NotCompared => c.not_compared += 1,
                TestOutcome::Void => c.void += 1,
            }
            if let Some(r) = &t.skip_reason {
                match c.skip_reasons.iter_mut().find(|s| s.reason == *r) {
                    Some(s) => s.count += 1,
                    None => c.skip_reasons.push(SkipCount {
                        reason: r.clone(),
                        count: 1,
                    }),
                }
            }
        }
        // Most first; a tie in first-seen order (the sort is stable).
        c.skip_reasons.sort_by_key(|s| std::cmp::Reverse(s.count));
        self.counts = c;
        self.exit_code = self.gate_exit_code();
    }

    /// The worst (highest) exit code of the gates ([`GateResults::exit_code`]), PASS when there is none.
    pub fn gate_exit_code(&self) -> i32 {
        self.gates
            .iter()
            .map(|g| g.exit_code)
            .fold(exit::PASS, exit::worse)
    }
}

impl GateResults {
    /// A gate with its spec and listed tests; status, failure kind and exit code follow from the tests.
    fn new(
        name: &str,
        file: &Path,
        description: &str,
        reason: Option<String>,
        assertions: Vec<AssertionResult>,
    ) -> GateResults {
        let mut g = GateResults {
            name: name.to_string(),
            file: file.display().to_string(),
            description: description.to_string(),
            status: GateStatus::Passed,
            failure_kind: None,
            exit_code: exit::PASS,
            reason,
            duration_s: assertions.iter().map(|a| a.duration_s).sum(),
            provenance: None,
            assertions,
            requests: Vec::new(),
            serve_log_tail: None,
            not_run: Vec::new(),
        };
        g.settle();
        g
    }

    /// Recomputes `status`, `failure_kind` and `exit_code` from the tests.
    pub(crate) fn settle(&mut self) {
        self.failure_kind = self
            .assertions
            .iter()
            .filter_map(|a| a.failure_kind)
            .max_by_key(|k| k.severity());
        let any = |o: TestOutcome| self.assertions.iter().any(|a| a.outcome == o);
        let unsettled = |k: Option<FailureKind>| {
            matches!(
                k,
                None | Some(
                    FailureKind::Indeterminate | FailureKind::Incomparable | FailureKind::Void
                )
            )
        };
        self.status = if any(TestOutcome::Failed) || !unsettled(self.failure_kind) {
            GateStatus::Failed
        } else if any(TestOutcome::Indeterminate)
            || any(TestOutcome::Void)
            || any(TestOutcome::NotCompared)
            || (any(TestOutcome::Incomparable)
                && !self.assertions.iter().all(|a| {
                    a.outcome == TestOutcome::Skipped || a.outcome == TestOutcome::Incomparable
                }))
            || self.failure_kind.is_some()
        {
            GateStatus::Indeterminate
        } else if !self.assertions.is_empty()
            && self.assertions.iter().all(|a| {
                a.outcome == TestOutcome::Skipped || a.outcome == TestOutcome::Incomparable
            })
        {
            GateStatus::Ignored
        } else if !self.not_run.is_empty() {
            GateStatus::Partial
        } else {
            GateStatus::Passed
        };
        self.exit_code = crate::error::exit_code(match self.status {
            GateStatus::Failed => Some(match self.failure_kind {
                Some(k) if !unsettled(Some(k)) => k,
                _ => FailureKind::Assertion,
            }),
            _ => self.failure_kind,
        });
    }

    /// A gate that ran. `assertions` are its listed tests (see [`assertion_from_verdict`]); provenance and
    /// request figures come from the outcome; the serve log tail is read when a test failed.
    pub(crate) fn ran(
        spec: &GateSpec,
        outcome: &RunOutcome,
        assertions: Vec<AssertionResult>,
    ) -> GateResults {
        let mut g = GateResults::new(&spec.name, &spec.file, &spec.description, None, assertions);
        g.provenance = Some(provenance(spec, outcome));
        g.requests = outcome
            .summary
            .requests
            .iter()
            .map(|r| {
                let f = r.figures.clone().unwrap_or_default();
                RequestFigures {
                    index: r.index,
                    warmup: r.warmup,
                    prompt_index: r.prompt_index,
                    http_status: r.http_status,
                    transport_error: r.transport_error.clone(),
                    ttft_ms: f.ttft_ms,
                    decode_tok_s: f.decode_tok_s,
                    server_decode_tok_s: f.server_decode_tok_s,
                    completion_tokens: f.completion_tokens,
                    e2e_ms: f.e2e_ms,
                    tpot_ms: f.tpot_ms,
                }
            })
            .collect();
        if g.status == GateStatus::Failed {
            g.serve_log_tail = match &outcome.pair {
                None => serve_log_tail(
                    &outcome.dir.join(crate::evidence::layout::SERVE_LOG),
                    SERVE_LOG_TAIL_LINES,
                ),
                Some(p) => {
                    // A pair: each arm's serve has its own log; the tail of each, headed by its directory.
                    let lines = (SERVE_LOG_TAIL_LINES / p.arms.len().max(1)).max(10);
                    let tails: Vec<String> = p
                        .arms
                        .iter()
                        .filter_map(|a| {
                            serve_log_tail(
                                &outcome
                                    .dir
                                    .join(&a.dir)
                                    .join(crate::evidence::layout::SERVE_LOG),
                                lines,
                            )
                            .map(|t| format!("== {}/serve.log ==\n{t}", a.dir))
                        })
                        .collect();
                    (!tails.is_empty()).then(|| tails.join("\n"))
                }
            };
        }
        g
    }

    /// A gate that did not run: ignored (unmet requirements), an evidence error, an invalid spec.
    /// `reason` says why; the tests carry their own outcomes.
    pub fn not_run(
        name: &str,
        file: &Path,
        description: &str,
        reason: &str,
        assertions: Vec<AssertionResult>,
    ) -> GateResults {
        GateResults::new(
            name,
            file,
            description,
            Some(reason.to_string()),
            assertions,
        )
    }

    /// A gate whose spec does not parse: one failed `<stem>::spec` test.
    pub(crate) fn spec_invalid(file: &Path, error: &str, duration_s: f64) -> GateResults {
        let stem = spec_stem(file);
        let t = AssertionResult::new(
            &stem,
            "spec",
            TestOutcome::Failed,
            Some(FailureKind::SpecInvalid),
            error,
            duration_s,
        );
        GateResults::new(&stem, file, "", Some(error.to_string()), vec![t])
    }
}

/// The trial prefix for a gate file whose spec does not parse: its file stem.
pub(crate) fn spec_stem(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "gate".into())
}

impl AssertionResult {
    /// A test without measurements.
    pub fn new(
        gate: &str,
        assertion: &str,
        outcome: TestOutcome,
        failure_kind: Option<FailureKind>,
        message: &str,
        duration_s: f64,
    ) -> AssertionResult {
        AssertionResult {
            name: assertion.to_string(),
            test: format!("{gate}::{assertion}"),
            outcome,
            failure_kind: match outcome {
                TestOutcome::Failed => failure_kind.or(Some(FailureKind::Assertion)),
                TestOutcome::Passed | TestOutcome::Skipped => None,
                // Indeterminate / incomparable / void: a kind when they fail the run, none when let through.
                _ => failure_kind,
            },
            // What a gate author or a serve wrote (a `requires` path, an evidence error quoting a serve) carries
            // no control byte into any report, annotation or console line; servegate's own line breaks stay.
            message: crate::text::lines(message),
            duration_s,
            median: None,
            bound: None,
            bound_kind: None,
            unit: None,
            metric: None,
            values: Vec::new(),
            skip_reason: None,
            line: None,
        }
    }

    /// This test with the line of its gate file declaring it ([`AssertionResult::line`]).
    pub(crate) fn at_line(mut self, line: usize) -> AssertionResult {
        self.line = Some(line);
        self
    }

    /// The line annotations and JUnit name: [`AssertionResult::line`], 1 when unknown.
    pub(crate) fn gate_line(&self) -> usize {
        self.line.unwrap_or(1)
    }

    /// This test with its skip reason ([`AssertionResult::skip_reason`]), kept only when the test neither
    /// passed nor fails the run.
    pub(crate) fn with_skip_reason(mut self, reason: &str) -> AssertionResult {
        if self.outcome != TestOutcome::Passed && self.failure_kind.is_none() {
            self.skip_reason = Some(reason.to_string());
        }
        self
    }

    /// Copies the verdict's figures (median, values, the bound with its side, unit and metric) onto this
    /// test: all data the verdict carries (`Verdict::bound`, built once from the registry), nothing read back
    /// from the spec or the message.
    pub(crate) fn with_figures(mut self, _spec: &GateSpec, v: &Verdict) -> AssertionResult {
        self.median = v.median;
        self.values = v.values.clone();
        self.bound = v.bound.map(|b| b.value);
        self.bound_kind = v.bound.map(|b| b.kind());
        self.unit = v.bound.map(|b| b.unit.to_string());
        self.metric = v.bound.map(|b| MetricResult::of(b.metric));
        self
    }
}

/// The failure kind of a failed verdict in `outcome`, from the run's exit code: the serve never became
/// ready, the spec is unusable (e.g. a pair on two different model files), or the assertion itself.
pub(crate) fn verdict_failure_kind(outcome: &RunOutcome) -> FailureKind {
    outcome.failure_kind().unwrap_or(FailureKind::Assertion)
}

/// A test straight from a verdict: the one mapping from a verdict to a listed test, for `servegate run`,
/// `servegate judge` and the harness (through [`crate::sinks::events::Collector`] and the harness's trials).
pub(crate) fn assertion_from_verdict(
    spec: &GateSpec,
    outcome: &RunOutcome,
    v: &Verdict,
    duration_s: f64,
) -> AssertionResult {
    let o = TestOutcome::of(v.outcome);
    let kind = match o {
        TestOutcome::Passed | TestOutcome::Skipped => None,
        TestOutcome::Failed => Some(verdict_failure_kind(outcome)),
        // A serve that never became ready (or an unusable spec) outranks the state of one verdict.
        _ if matches!(
            outcome.failure_kind(),
            Some(FailureKind::ServeNotReady | FailureKind::SpecInvalid)
        ) =>
        {
            Some(verdict_failure_kind(outcome))
        }
        TestOutcome::Indeterminate if spec.on_indeterminate_passes() => None,
        TestOutcome::Indeterminate => Some(FailureKind::Indeterminate),
        // A baseline that no longer applies fails, unless the assertion skips it; strict fails it anyway.
        TestOutcome::Incomparable
            if crate::error::strict() || !spec.on_incomparable_skips(&v.assertion) =>
        {
            Some(FailureKind::Incomparable)
        }
        TestOutcome::Incomparable => None,
        TestOutcome::NotCompared if crate::error::strict() => Some(FailureKind::Incomparable),
        TestOutcome::NotCompared => None,
        TestOutcome::Void => Some(FailureKind::Void),
    };
    let reason = match o {
        _ if v.outcome == crate::judge::Outcome::Unsupported => SKIP_UNSUPPORTED,
        _ if v.outcome == crate::judge::Outcome::KnownFail => SKIP_KNOWN_FAIL,
        TestOutcome::NotCompared => SKIP_BUSY_RUNNER,
        TestOutcome::Incomparable => SKIP_INCOMPARABLE,
        _ => SKIP_INDETERMINATE,
    };
    AssertionResult::new(&spec.name, &v.assertion, o, kind, &v.message, duration_s)
        .with_figures(spec, v)
        .with_skip_reason(reason)
        .at_line(spec.decl_line_of(&v.assertion))
}

/// Provenance from a run outcome.
pub(crate) fn provenance(spec: &GateSpec, outcome: &RunOutcome) -> Provenance {
    let s = &outcome.summary;
    Provenance {
        evidence_dir: outcome.dir.display().to_string(),
        started_utc: s.started_utc.clone(),
        ended_utc: s.ended_utc.clone(),
        serve_mode: s.serve.mode.clone(),
        serve_command: s.serve.command.clone(),
        base_url: s.serve.base_url.clone(),
        model: spec.request.model.clone(),
        served_model: spec.request.served_model.clone(),
        serve_models: s.serve.models.clone(),
        serve_version: s.serve.version.clone(),
        serve_ready_ms: s.serve.ready_ms,
        serve_failure: s.serve.failure.clone(),
        host: s.host.clone(),
        load_avg_start: s.load_avg_start,
        load_avg_end: s.load_avg_end,
        model_sha256: outcome.pair.as_ref().and_then(|p| p.model_sha256.clone()),
        arms: outcome
            .pair
            .as_ref()
            .map(|p| {
                p.arms
                    .iter()
                    .map(|a| {
                        let dir = outcome.dir.join(&a.dir);
                        let run: Option<crate::evidence::RunSummary> = crate::io::input::read(
                            &dir.join(crate::evidence::layout::RUN_FILE),
                            crate::io::input::MAX_EVIDENCE_BYTES,
                        )
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok());
                        ArmProvenance {
                            arm: a.arm,
                            role: a.role.clone(),
                            runtime: a.runtime.clone(),
                            evidence_dir: dir.display().to_string(),
                            serve_command: run
                                .as_ref()
                                .map(|r| r.serve.command.clone())
                                .unwrap_or_default(),
                            serve_version: run.as_ref().and_then(|r| r.serve.version.clone()),
                            serve_failure: run.as_ref().and_then(|r| r.serve.failure.clone()),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default(),
        notes: s.notes.clone(),
    }
}

/// The last `lines` lines (at most [`SERVE_LOG_TAIL_BYTES`]) of a log, lossy UTF-8; None when the file is
/// missing or empty.
pub(crate) fn serve_log_tail(path: &Path, lines: usize) -> Option<String> {
    // Only the end of the file is read (a serve's log can be hundreds of MB).
    let text = crate::io::serve::tail_file(path, lines);
    let tail = tail_lines(&text, lines, SERVE_LOG_TAIL_BYTES);
    (!tail.is_empty()).then_some(tail)
}

/// The last `lines` lines of `text`, cut to its last `max_bytes` bytes (on a character boundary).
pub(crate) fn tail_lines(text: &str, lines: usize, max_bytes: usize) -> String {
    let text = text.trim_end_matches(['\n', '\r']);
    let start = text
        .rmatch_indices('\n')
        .nth(lines.saturating_sub(1))
        .map(|(i, _)| i + 1)
        .unwrap_or(0);
    let mut tail = &text[start..];
    if tail.len() > max_bytes {
        let mut cut = tail.len() - max_bytes;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = &tail[cut..];
    }
    tail.to_string()
}

pub use crate::io::fs::write_atomic;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_lines_and_bytes() {
        assert_eq!(tail_lines("a\nb\nc\nd\n", 2, 100), "c\nd");
        assert_eq!(tail_lines("a\nb", 5, 100), "a\nb");
        assert_eq!(tail_lines("", 5, 100), "");
        assert_eq!(tail_lines("héllo", 1, 4), "llo");
    }

    #[test]
    fn gate_status_follows_the_worst_test() {
        let f = Path::new("gates/x.toml");
        let pass = AssertionResult::new("x", "rate", TestOutcome::Passed, None, "rate PASS", 0.1);
        let fail = AssertionResult::new("x", "route", TestOutcome::Failed, None, "route FAIL", 0.0);
        let not_ready = AssertionResult::new(
            "x",
            "content",
            TestOutcome::Failed,
            Some(FailureKind::ServeNotReady),
            "x",
            0.0,
        );
        let g = GateResults::not_run("x", f, "", "r", vec![pass.clone(), fail.clone()]);
        assert_eq!(
            (g.status, g.failure_kind, g.exit_code),
            (GateStatus::Failed, Some(FailureKind::Assertion), 1)
        );
        let g = GateResults::not_run("x", f, "", "r", vec![fail, not_ready]);
        assert_eq!(
            (g.status, g.exit_code),
            (GateStatus::Failed, exit::SERVE_NOT_READY)
        );
        let g = GateResults::not_run("x", f, "", "r", vec![pass]);
        assert_eq!((g.status, g.exit_code), (GateStatus::Passed, 0));
        let skip = AssertionResult::new(
            "x",
            "rate",
            TestOutcome::Skipped,
            None,
            "requires: ...",
            0.0,
        );
        let g = GateResults::not_run("x", f, "", "r", vec![skip]);
        assert_eq!((g.status, g.exit_code), (GateStatus::Ignored, 0));
    }

    #[test]
    fn indeterminate_incomparable_and_void_are_never_a_pass() {
        let t = |o, k| AssertionResult::new("g", "regression", o, k, "regression X", 0.0);
        let gate = |tests: Vec<AssertionResult>| {
            GateResults::new("g", Path::new("g.toml"), "", None, tests)
        };
        let pass = || t(TestOutcome::Passed, None);
        let ind = gate(vec![
            pass(),
            t(TestOutcome::Indeterminate, Some(FailureKind::Indeterminate)),
        ]);
        assert_eq!(
            (ind.status, ind.exit_code),
            (GateStatus::Indeterminate, exit::INDETERMINATE)
        );
        // on_indeterminate = "pass": no failure kind, the run passes, the state stays indeterminate.
        let let_through = gate(vec![pass(), t(TestOutcome::Indeterminate, None)]);
        assert_eq!(
            (let_through.status, let_through.exit_code),
            (GateStatus::Indeterminate, exit::PASS)
        );
        let void = gate(vec![t(TestOutcome::Void, Some(FailureKind::Void))]);
        assert_eq!(
            (void.status, void.exit_code),
            (GateStatus::Indeterminate, exit::VOID)
        );
        // A failure outranks an indeterminate verdict in the same gate.
        let both = gate(vec![
            t(TestOutcome::Indeterminate, Some(FailureKind::Indeterminate)),
            t(TestOutcome::Failed, Some(FailureKind::Assertion)),
        ]);
        assert_eq!(
            (both.status, both.exit_code),
            (GateStatus::Failed, exit::ASSERTION_FAILED)
        );
        // Incomparable: skipped (ignored gate) without strict, exit 9 under strict.
        let skip = gate(vec![t(TestOutcome::Incomparable, None)]);
        assert_eq!(
            (skip.status, skip.exit_code),
            (GateStatus::Ignored, exit::PASS)
        );
        let strict = gate(vec![
            pass(),
            t(TestOutcome::Incomparable, Some(FailureKind::Incomparable)),
        ]);
        assert_eq!(
            (strict.status, strict.exit_code),
            (GateStatus::Indeterminate, exit::INCOMPARABLE)
        );
        let mut r = Results::begin(Producer::Run, false);
        r.push(ind);
        r.push(both);
        r.push(skip);
        r.finish(1.0);
        assert_eq!(r.exit_code, exit::ASSERTION_FAILED, "the worst by severity");
        assert_eq!(
            (
                r.counts.indeterminate,
                r.counts.incomparable,
                r.counts.passed
            ),
            (2, 1, 1)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&serde_json::to_vec_pretty(&r).unwrap()).unwrap();
        assert_eq!(v["gates"][0]["status"], "indeterminate");
        assert_eq!(v["gates"][0]["assertions"][1]["outcome"], "indeterminate");
        assert_eq!(
            v["gates"][0]["assertions"][1]["failure_kind"],
            "indeterminate"
        );
    }

    #[test]
    fn counts_and_exit_code_cover_every_listed_test() {
        let mut r = Results::begin(Producer::Harness, false);
        r.push(GateResults::spec_invalid(
            Path::new("gates/bad.toml"),
            "bad.toml:1:1: oops",
            0.0,
        ));
        r.push(GateResults::not_run(
            "empty",
            Path::new("gates/empty.toml"),
            "",
            "filtered",
            vec![],
        ));
        r.push(GateResults::not_run(
            "ok",
            Path::new("gates/ok.toml"),
            "",
            "",
            vec![AssertionResult::new(
                "ok",
                "rate",
                TestOutcome::Passed,
                None,
                "",
                0.0,
            )],
        ));
        r.finish(1.0);
        assert_eq!(r.gates.len(), 2, "a gate with no listed test is dropped");
        assert_eq!(
            r.counts,
            Counts {
                tests: 2,
                passed: 1,
                failed: 1,
                ..Counts::default()
            }
        );
        assert_eq!(r.exit_code, exit::SPEC_INVALID);
        assert_eq!(r.gates[0].assertions[0].test, "bad::spec");
        let v: serde_json::Value =
            serde_json::from_slice(&serde_json::to_vec_pretty(&r).unwrap()).unwrap();
        assert_eq!(v["schema"], RESULTS_SCHEMA);
        assert_eq!(v["gates"][0]["failure_kind"], "spec_invalid");
        assert_eq!(v["gates"][0]["assertions"][0]["outcome"], "failed");
    }

    #[test]
    fn reports_are_written_whole_and_parent_dirs_created() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/results.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
    }
}
