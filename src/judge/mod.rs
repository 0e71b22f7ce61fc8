//! Judging: a pure function of (gate spec, evidence) to verdicts, one per declared assertion. Judging reads no
//! file, starts nothing and keeps no clock, so any recorded run can be re-judged anywhere (`servegate judge`).
//! The one part of this module that touches the disk is [`redact::scrub_dir`], which the runner calls after a
//! run to mask the API key in the serve's own files; the judge never calls it.
//!
//! Verdict messages show every value and n of N planned: `rate FAIL median 50.0 tok/s (floor 60.0; each:
//! 53.3, 46.4, 50.0; n=3 of 3 planned)`. Medians, never means (`stats::median`). Nothing passes without
//! evidence: a log that names no route fails, a reply without timings fails the rate, no replies at all fail
//! everything, and every planned request is accounted for ([`account`]): one never sent, or sent and failed,
//! is a missing value that fails every figure assertion, never a median left to the others.

mod drift;
pub mod load;
pub mod max_tokens;
pub(crate) mod outcome;
pub mod redact;
pub mod regression;
pub mod serve_clock;

pub use outcome::RunOutcome;

use serde::{Deserialize, Serialize};

use crate::analysis::measure::{self, Figures, TokenSource};
use crate::analysis::stats;
use crate::analysis::{Evidence, RequestEvidence};
use crate::evidence::RunStatus;
use crate::spec::{GateSpec, RateSource};
use crate::vocab::{
    AssertionKind, Bound, ContentProblem, Failure, FailureCode, Failures, Metric, NoteKind,
};

/// The outcome of one assertion: the three honest states (pass, fail, indeterminate) and the three ways a run
/// can be unfit to judge (incomparable with its baseline, not compared because the runner was busy, void
/// because the client fell behind its schedule).
/// Only [`Outcome::Pass`] is a pass, in every output (docs/regression.md, "Three honest states").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The assertion holds on the evidence.
    Pass,
    /// It does not, or the evidence is missing.
    Fail,
    /// The evidence cannot decide: too few samples, a confidence the n cannot reach, an interval that
    /// straddles the bound. The details state the n that would likely decide it. Fails the trial by default
    /// (a gate's `on_indeterminate = "pass"` lets it through, still shown as INDETERMINATE).
    Indeterminate,
    /// The baseline no longer applies: what the gate fixes or the machine differs from the baseline's
    /// (model sha256, prompts, max_tokens, CPU model...). The trial fails (exit 9) with the differing fields
    /// and the bless command that renews it, unless the assertion says `on_incomparable = "skip"`.
    Incomparable,
    /// Not compared (busy runner): a baseline applies, but the runner's host load is outside every applicable
    /// baseline's. Its own state, never a pass and never counted with unprovisioned runtimes: the trial is
    /// skipped with the loads named, or fails under `SERVEGATE_STRICT=1`.
    NotCompared,
    /// The run is void: the client fell behind its schedule, so the figures do not describe the load that
    /// was asked for. Never a pass.
    Void,
}

impl Outcome {
    /// The word of a verdict line: `PASS`, `FAIL`, `INDETERMINATE`, `INCOMPARABLE`, `NOT-COMPARED`, `VOID`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Indeterminate => "INDETERMINATE",
            Outcome::Incomparable => "INCOMPARABLE",
            Outcome::NotCompared => "NOT-COMPARED",
            Outcome::Void => "VOID",
        }
    }

    /// The snake_case name, as results JSON, JUnit properties and exports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Indeterminate => "indeterminate",
            Outcome::Incomparable => "incomparable",
            Outcome::NotCompared => "not_compared",
            Outcome::Void => "void",
        }
    }

    /// The outcome a verdict line's word names (the inverse of [`Outcome::word`]).
    pub fn from_word(word: &str) -> Option<Outcome> {
        [
            Outcome::Pass,
            Outcome::Fail,
            Outcome::Indeterminate,
            Outcome::Incomparable,
            Outcome::NotCompared,
            Outcome::Void,
        ]
        .into_iter()
        .find(|o| o.word() == word)
    }
}

/// One assertion's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The assertion's wire name (`kind.name()`: `route`, `rate`, `first_token`, ...), as results and trial
    /// names show it.
    pub assertion: String,
    /// The assertion's kind.
    pub kind: AssertionKind,
    /// Pass, fail, indeterminate, incomparable, not compared or void.
    pub outcome: Outcome,
    /// The verdict line: `<assertion> PASS|FAIL|INDETERMINATE|INCOMPARABLE|NOT-COMPARED|VOID <details>`. One
    /// line: the details are [`crate::text::shown`] (outside text escaped), so it is printed as it is.
    pub message: String,
    /// The per-request values judged (in the unit of the assertion's metric: tok/s for `rate`, ms for
    /// `first_token` and `tpot`), in send order, one per planned request; None where a request had no value
    /// (it failed, had no measurable figure, or was never sent).
    #[serde(default)]
    pub values: Vec<Option<f64>>,
    /// The statistic compared with the bound (the median), when there is one.
    #[serde(default)]
    pub median: Option<f64>,
    /// The bound a figure assertion compares the median with (value, unit, floor or limit); None for the
    /// assertions on text, logs and pairs.
    #[serde(default)]
    pub bound: Option<Bound>,
    /// The details of the message (what follows `<assertion> PASS|FAIL `), kept as data so nothing strips a
    /// head off the message.
    #[serde(skip)]
    details: String,
}

impl Verdict {
    fn new(kind: AssertionKind, outcome: Outcome, details: impl AsRef<str>) -> Verdict {
        let mut v = Verdict {
            assertion: kind.name().to_string(),
            kind,
            outcome,
            message: String::new(),
            values: Vec::new(),
            median: None,
            bound: None,
            details: details.as_ref().to_string(),
        };
        v.set(outcome, details.as_ref().to_string());
        v
    }

    /// Sets the outcome and the details, and the message from them. The details pass through
    /// [`crate::text::shown`]: whatever a builder quotes (a serve's version, a log line, a reply, an error
    /// body), the verdict line is one line with no control byte and no CI workflow command in it.
    fn set(&mut self, outcome: Outcome, details: String) {
        let word = outcome.word();
        let details = crate::text::shown(&details);
        self.outcome = outcome;
        self.message = format!("{} {word} {details}", self.kind);
        self.details = details;
    }

    /// True when the outcome is Pass.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }

    /// The message without its `<assertion> PASS|FAIL ` head (the part [`Verdict::new`] was given).
    pub fn details(&self) -> &str {
        &self.details
    }
}

/// A judged request: its evidence and figures.
struct Judged<'a> {
    ev: &'a RequestEvidence,
    fig: Figures,
    /// With `[assert.rate] server_log`: why this request has no serve-log rate (its `server_decode_tok_s`
    /// then comes from the log, [`serve_clock`]), or None.
    serve_log_why: Option<String>,
}

fn judged_of(evidence: &Evidence) -> Vec<Judged<'_>> {
    evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .map(|ev| Judged {
            ev,
            fig: measure::measure(&ev.reply),
            serve_log_why: None,
        })
        .collect()
}

/// With `[assert.rate] server_log`: each request's serve decode rate is the one its log line states
/// ([`serve_clock::log_rates`]), replacing llama.cpp `timings`; a request without one says why.
fn with_serve_log(gate: &GateSpec, evidence: &Evidence, judged: &mut [Judged]) {
    let Some(re) = gate
        .assertions
        .rate
        .as_ref()
        .and_then(|r| r.server_log.as_ref())
    else {
        return;
    };
    let rates = serve_clock::log_rates(evidence, re);
    for j in judged {
        let index = j.ev.record.index;
        j.fig.server_decode_tok_s = rates.by_index.get(&index).copied();
        if j.fig.server_decode_tok_s.is_none() {
            j.serve_log_why = Some(serve_clock::why_none(&rates, index));
        }
    }
}

/// Why one sent request failed on its own terms, or None: [`crate::analysis::reply::Reply::failure`] (a serve
/// error, a cut or timed-out stream, no finish_reason and no `[DONE]`, ...), else the transport error the
/// client saw (`transport: <error>`). A failed request has no value for any figure assertion and fails
/// `content` and `known_answer`.
pub fn request_failure(ev: &RequestEvidence) -> Option<Failures> {
    ev.reply.failure().or_else(|| {
        let e = ev.record.transport_error.as_ref()?;
        Failures::new(vec![Failure {
            code: FailureCode::Transport,
            detail: e.clone(),
        }])
    })
}

/// Where each planned judged request of a run stands: every planned request is accounted for, as sent and
/// answered, sent and failed, or never sent. Pure, from the evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting {
    /// Judged (non-warmup) requests the run planned (`run.json` `planned`; in older evidence without it,
    /// the judged requests recorded).
    pub planned: usize,
    /// Judged requests in the evidence (sent).
    pub sent: usize,
    /// True when `planned` came from `run.json`.
    pub plan_recorded: bool,
    /// Warmup requests planned (sent first; the judged plan starts at this index).
    pub warmup: usize,
    /// Send-order indices (warmup included, as the `NN.*` files) of planned judged requests never sent.
    pub never_sent: Vec<usize>,
    /// Sent judged requests that failed: (index, [`request_failure`]).
    pub failed: Vec<(usize, Failures)>,
    /// The serve failed during the run (exited, or was found dead): `run.json` `serve.failure`, with the last
    /// lines of its log when known (`serve.exit_log_tail`, else the end of `serve.log`).
    pub serve_failure: Option<String>,
    /// The code of `serve_failure`, when it names a known one.
    pub serve_failure_code: Option<FailureCode>,
    /// The serve's own histograms' deltas over the run (`run.json` `serve.metrics`, vLLM); empty without.
    pub serve_metrics: Vec<crate::evidence::serve_clock::HistogramDelta>,
}

/// What happened to the run, in words, for a serve failure of `code`: the serve failed, crashed when stopped,
/// or the run passed its deadline (`run_timeout_s`; the serve did not fail).
fn serve_failure_phrase(code: Option<FailureCode>) -> &'static str {
    match code {
        Some(FailureCode::RunTimeout) => "the run passed its run_timeout_s",
        Some(FailureCode::ServerCrashedAtStop) => "the serve crashed when it was stopped",
        _ => "the serve failed during the run",
    }
}

/// Lines of the serve log quoted when the serve exited during the run.
pub const EXIT_LOG_LINES: usize = 5;

/// Accounts for every planned request of a run (see [`Accounting`]).
pub fn account(evidence: &Evidence) -> Accounting {
    let run = &evidence.run;
    let judged: Vec<&RequestEvidence> = evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .collect();
    let sent = judged.len();
    let planned = run.planned.unwrap_or(sent);
    let warm = run
        .planned_warmup
        .unwrap_or_else(|| evidence.requests.iter().filter(|r| r.record.warmup).count());
    // Older evidence (no plan recorded): the sent requests are the plan, none is missing.
    let never_sent: Vec<usize> = if run.planned.is_some() {
        (warm..warm + planned)
            .filter(|i| !judged.iter().any(|r| r.record.index == *i))
            .collect()
    } else {
        Vec::new()
    };
    let failed = judged
        .iter()
        .filter_map(|r| request_failure(r).map(|f| (r.record.index, f)))
        .collect();
    let serve_failure = match (&run.serve.failure, evidence.requests.is_empty()) {
        (Some(f), false) => {
            let tail = run.serve.exit_log_tail.clone().or_else(|| {
                matches!(
                    FailureCode::of_recorded(f),
                    Some(FailureCode::ServerExitedDuringRun | FailureCode::ServerExitedBeforeReady)
                )
                .then(|| {
                    let log = evidence.serve_log.as_deref()?;
                    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
                    Some(lines[lines.len().saturating_sub(EXIT_LOG_LINES)..].join("\n"))
                })
                .flatten()
            });
            Some(match tail.filter(|t| !t.trim().is_empty()) {
                Some(t) => {
                    let lines: Vec<&str> = t.lines().collect();
                    let last = lines[lines.len().saturating_sub(EXIT_LOG_LINES)..].join("\n");
                    let last: String = last.chars().take(400).collect();
                    format!("{f}; serve.log ends: {last:?}")
                }
                None => f.clone(),
            })
        }
        _ => None,
    };
    Accounting {
        planned,
        sent,
        plan_recorded: run.planned.is_some(),
        warmup: warm,
        never_sent,
        failed,
        serve_failure_code: serve_failure
            .as_ref()
            .and(run.serve.failure.as_deref())
            .and_then(FailureCode::of_recorded),
        serve_failure,
        serve_metrics: run.serve.metrics.clone(),
    }
}

impl Accounting {
    /// `n=K of N planned`.
    pub fn n_of(&self, k: usize) -> String {
        format!("n={k} of {} planned", self.planned)
    }

    /// Planned judged requests whose prompt satisfies `keep`, the plan being `repeats` rounds of `prompts`
    /// in order (position `j` asks `prompts[j % prompts.len()]`).
    pub fn planned_for(&self, prompts: &[String], keep: impl Fn(&str) -> bool) -> usize {
        if prompts.is_empty() {
            return self.planned;
        }
        (0..self.planned)
            .filter(|j| keep(&prompts[j % prompts.len()]))
            .count()
    }

    /// True when every planned request was sent and answered without failing, no more were recorded than
    /// planned, and the serve did not fail during the run.
    pub fn whole(&self) -> bool {
        self.never_sent.is_empty()
            && self.failed.is_empty()
            && self.serve_failure.is_none()
            && self.sent <= self.planned
    }

    /// Why the plan was not carried out, or None: requests never sent, more judged requests than planned.
    pub fn unsent(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.never_sent.is_empty() {
            let why = if self.serve_failure.is_some() {
                serve_failure_phrase(self.serve_failure_code)
            } else {
                "the run stopped before sending them"
            };
            parts.push(format!(
                "{} planned request{} never sent: {} ({why})",
                self.never_sent.len(),
                if self.never_sent.len() == 1 { "" } else { "s" },
                ranges(&self.never_sent)
            ));
        }
        if self.sent > self.planned {
            parts.push(format!(
                "the evidence holds {} judged requests, more than the {} planned",
                self.sent, self.planned
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Everything that keeps the run from counting whole, in one line, or None when [`Accounting::whole`].
    pub fn problems(&self) -> Option<String> {
        let mut parts: Vec<String> = self
            .failed
            .iter()
            .map(|(i, f)| format!("request {i:02} failed ({f})"))
            .collect();
        parts.extend(self.unsent());
        if let Some(f) = &self.serve_failure {
            parts.push(format!("serve: {f}"));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// `request 03`, `requests 03-19`, `requests 03, 05-07`.
fn ranges(idx: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && idx[j + 1] == idx[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            format!("{:02}", idx[i])
        } else {
            format!("{:02}-{:02}", idx[i], idx[j])
        });
        i = j + 1;
    }
    let word = if idx.len() == 1 {
        "request"
    } else {
        "requests"
    };
    format!("{word} {}", out.join(", "))
}

/// Judges every declared assertion of `gate` on `evidence`, in the order of `Assertions::names`.
///
/// Every planned request is accounted for ([`account`]): a request never sent, or sent and failed
/// ([`request_failure`]), is a missing value of every figure assertion (shown as `-` with its reason) and a
/// failure of `content` and `known_answer`; lines say `n=K of N planned`. A serve that failed during the run
/// fails every assertion but `route`, naming its exit and the end of its log.
///
/// Masking is part of judging: the gate's API key (its `serve.api_key_env`, when set) is masked in every
/// message ([`redact::mask_verdicts`]), so no caller can forget it; outcomes never depend on it.
pub fn judge(gate: &GateSpec, evidence: &Evidence) -> Vec<Verdict> {
    judge_with(gate, evidence, &JudgeInputs::default())
}

/// What judging needs besides the gate and the run's evidence, loaded by the caller (the judge reads no
/// file): the baseline values of `[assert.regression]`
/// ([`crate::analysis::baseline_values::regression_input`]) and the stored baselines of `[assert.drift]`
/// (each by [`crate::analysis::load_baseline`]: the one path rule and loader, `evidence::baseline`). The runner, the harness and `servegate judge` load them with
/// [`JudgeInputs::load`]. Without them a declared regression or drift FAILs for want of a baseline.
#[derive(Debug, Clone, Default)]
pub struct JudgeInputs {
    /// The baseline side of `[assert.regression]`, when the gate declares one.
    pub regression: Option<crate::analysis::baseline_values::BaselineValues>,
    /// The stored baselines `[assert.drift]` names, in the gate's order.
    pub drift: Vec<crate::analysis::BaselineSlot>,
}

impl JudgeInputs {
    /// Loads every input `gate` needs for `evidence` (reads the stored baselines it names).
    pub fn load(gate: &GateSpec, evidence: &Evidence) -> JudgeInputs {
        JudgeInputs {
            regression: crate::analysis::baseline_values::regression_input(gate, evidence),
            drift: (gate
                .assertions
                .drift
                .as_ref()
                .map(|d| &d.baselines[..])
                .unwrap_or(&[]))
            .iter()
            .map(|b| crate::analysis::load_baseline(&gate.file, std::path::Path::new(b)))
            .collect(),
        }
    }
}

/// [`judge`] with the inputs regression and drift need ([`JudgeInputs`]). Pure like [`judge`].
pub fn judge_with(gate: &GateSpec, evidence: &Evidence, inputs: &JudgeInputs) -> Vec<Verdict> {
    let mut verdicts = judge_unmasked(gate, evidence, inputs);
    for v in &mut verdicts {
        v.bound = declared_bound(gate, v.kind);
    }
    redact::mask_verdicts(gate, &mut verdicts);
    verdicts
}

/// The bound the gate declares for a figure assertion (whatever the evidence held: a verdict failed for want
/// of evidence still carries it), or None for the assertions without one.
pub fn declared_bound(gate: &GateSpec, kind: AssertionKind) -> Option<Bound> {
    let a = &gate.assertions;
    match kind {
        AssertionKind::Rate => a.rate.as_ref().map(|r| {
            let metric = match r.source {
                RateSource::Client | RateSource::Both => Metric::DecodeRate,
                RateSource::Server => Metric::ServerDecodeRate,
            };
            Bound::for_metric(metric, r.floor_tok_s)
        }),
        AssertionKind::FirstToken => a
            .first_token
            .as_ref()
            .map(|f| Bound::for_metric(Metric::Ttft, f.limit_ms)),
        AssertionKind::Tpot => a
            .tpot
            .as_ref()
            .map(|t| Bound::for_metric(Metric::Tpot, t.limit_ms)),
        AssertionKind::Route
        | AssertionKind::Content
        | AssertionKind::KnownAnswer
        | AssertionKind::Ratio
        | AssertionKind::SameAnswers
        | AssertionKind::Drift
        | AssertionKind::Load
        | AssertionKind::Regression => None,
    }
}

fn judge_unmasked(gate: &GateSpec, evidence: &Evidence, inputs: &JudgeInputs) -> Vec<Verdict> {
    let names = gate.assertions.kinds();
    // Whole-run failures: every assertion fails with the same reason.
    let run_failure = if evidence.run.status != RunStatus::Complete {
        Some(format!(
            "the evidence is incomplete (run.json status is `{}`: {})",
            evidence.run.status.name(),
            evidence.run.status.why_incomplete()
        ))
    } else if let (Some(f), true) = (&evidence.run.serve.failure, evidence.requests.is_empty()) {
        // Nothing was sent: the serve never became ready, or the run never started it (a setup that failed,
        // a key refused, two model files in a pair).
        let what = match FailureCode::of_recorded(f) {
            Some(
                FailureCode::ApiKeyUnsafe
                | FailureCode::SetupFailed
                | FailureCode::PairModelMismatch,
            ) => "nothing was sent: the serve was never started",
            _ => "the serve never became ready",
        };
        Some(format!("{what}: {f}"))
    } else {
        None
    };
    if let Some(reason) = run_failure {
        return names
            .iter()
            .map(|n| Verdict::new(*n, Outcome::Fail, &reason))
            .collect();
    }
    let mut judged = judged_of(evidence);
    with_serve_log(gate, evidence, &mut judged);
    for j in judged.iter_mut() {
        let over = max_tokens::over_max_tokens(&j.ev.reply, &j.fig, gate.request.max_tokens);
        j.fig.warnings.extend(over);
    }
    let acct = account(evidence);
    let mut out = Vec::new();
    for name in names {
        let v = match name {
            AssertionKind::Route => judge_route(gate, evidence),
            AssertionKind::Rate
            | AssertionKind::FirstToken
            | AssertionKind::Tpot
            | AssertionKind::Content
            | AssertionKind::KnownAnswer => judge_request_assertion(name, gate, &judged, &acct),
            AssertionKind::Drift => {
                let mut v = drift::judge_drift(gate, evidence, &inputs.drift);
                if let Some(f) = &acct.serve_failure {
                    fail_for_serve(&mut v, f, acct.serve_failure_code);
                }
                v
            }
            // Pair assertions are judged by `judge_pair`; spec validation refuses them in a single gate.
            AssertionKind::Ratio | AssertionKind::SameAnswers => Verdict::new(
                name,
                Outcome::Fail,
                "not judged in a single gate (it needs a [pair])",
            ),
            AssertionKind::Load => continue, // judged per sweep point by `load::judge_points`
            AssertionKind::Regression => {
                let r = gate
                    .assertions
                    .regression
                    .as_ref()
                    .expect("regression declared");
                let mut v = if judged.is_empty() {
                    no_replies(name, &acct)
                } else {
                    regression::judge(gate, r, &judged, &acct, inputs.regression.as_ref())
                };
                if let Some(f) = &acct.serve_failure {
                    fail_for_serve(&mut v, f, acct.serve_failure_code);
                }
                v
            }
        };
        out.push(v);
    }
    out
}

/// One per-request assertion (`rate`, `first_token`, `content`, `known_answer`) of one run, with the
/// serve's failure during the run (if any) failing it.
fn judge_request_assertion(
    name: AssertionKind,
    gate: &GateSpec,
    judged: &[Judged],
    acct: &Accounting,
) -> Verdict {
    let mut v = match name {
        AssertionKind::Rate => with_floor_hint(gate, judge_rate(gate, judged, acct)),
        AssertionKind::FirstToken => judge_first_token(gate, judged, acct),
        AssertionKind::Tpot => judge_tpot(gate, judged, acct),
        AssertionKind::Content => judge_content(gate, judged, acct),
        AssertionKind::KnownAnswer => judge_known_answer(gate, judged, acct),
        AssertionKind::Route
        | AssertionKind::Ratio
        | AssertionKind::SameAnswers
        | AssertionKind::Drift
        | AssertionKind::Load
        | AssertionKind::Regression => {
            Verdict::new(name, Outcome::Fail, "not a per-request assertion")
        }
    };
    if let Some(f) = &acct.serve_failure {
        fail_for_serve(&mut v, f, acct.serve_failure_code);
    }
    v
}

/// Fails `v` because the serve failed during the run: a failing verdict gets ` [serve: <failure>]`; one
/// that would have passed says so after the serve's failure, never as a pass.
fn fail_for_serve(v: &mut Verdict, failure: &str, code: Option<FailureCode>) {
    let details = v.details().to_string();
    let details = if v.passed() {
        let what = serve_failure_phrase(code);
        format!("{what} ({failure}); the replies alone: {details}")
    } else {
        format!("{details} [serve: {failure}]")
    };
    v.set(Outcome::Fail, details);
}

fn no_replies(name: AssertionKind, acct: &Accounting) -> Verdict {
    let unsent = acct.unsent().map(|u| format!(": {u}")).unwrap_or_default();
    Verdict::new(
        name,
        Outcome::Fail,
        format!(
            "no replies at all: the run holds no judged request{unsent} ({})",
            acct.n_of(0)
        ),
    )
}

/// Formats values with `decimals` places, `-` for a missing one.
fn each(values: &[Option<f64>], decimals: usize) -> String {
    values
        .iter()
        .map(|v| {
            v.map(|x| format!("{x:.decimals$}"))
                .unwrap_or_else(|| "-".into())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn judge_route(gate: &GateSpec, evidence: &Evidence) -> Verdict {
    let route = gate.assertions.route.as_ref().expect("route declared");
    let Some(raw_log) = &evidence.serve_log else {
        return Verdict::new(AssertionKind::Route, Outcome::Fail, "no serve log in the evidence: the route cannot be proven (for a `url` serve, set serve.log_file)");
    };
    if let Some(at) = raw_log.find(crate::evidence::SERVE_LOG_CUT_MARK) {
        let rest = &raw_log[at + crate::evidence::SERVE_LOG_CUT_MARK.len()..];
        return Verdict::new(AssertionKind::Route, Outcome::Fail, format!("serve.log is larger than the {} MiB servegate reads to judge ({}): a slow-route line could be in the part not read", crate::evidence::SERVE_LOG_JUDGE_CAP >> 20, rest.trim()));
    }
    // Patterns match what a terminal would show: colour codes and other escapes cannot hide a line.
    let (log, stripped) = strip_escapes_counted(raw_log);
    let log = &log;
    // A log capped on disk (evidence::log_cap): what was dropped cannot be seen, and the verdict says so.
    let capped = crate::evidence::log_cap::marker_in(raw_log);
    let ansi = match capped {
        Some((line, n)) => format!("; serve.log was capped on disk: {n} bytes dropped at line {line} ([serve] log_cap_bytes), a route line there cannot be seen"),
        None => String::new(),
    };
    // Said in the verdict, so the evidence of the judgement shows the log was read stripped (case 38).
    let ansi = if stripped > 0 {
        format!("{ansi}; {}: {stripped} escape sequences removed before matching (serve.log keeps the raw bytes)", crate::vocab::NoteKind::LogAnsiStripped)
    } else {
        ansi
    };
    let find = |re: &regex::Regex| -> Option<(usize, String)> {
        log.lines()
            .enumerate()
            .find(|(_, l)| re.is_match(l))
            .map(|(i, l)| (i + 1, l.trim().chars().take(160).collect()))
    };
    let fast = find(&route.fast);
    let slow = route
        .slow
        .as_ref()
        .and_then(|re| find(re).map(|hit| (re.as_str().to_string(), hit)));
    let lines = log.lines().count();
    match (fast, slow) {
        // A slow pattern absent from a capped log proves nothing: it could be in the dropped middle.
        (Some((fl, ft)), None) if route.slow.is_some() && capped.is_some() => Verdict::new(
            AssertionKind::Route,
            Outcome::Indeterminate,
            format!("fast route: serve.log line {fl} matches /{}/: {ft:?}; slow /{}/ absent from the lines kept, which cannot prove it absent{ansi}", route.fast.as_str(), route.slow.as_ref().map(|s| s.as_str()).unwrap_or_default()),
        ),
        (None, None) if capped.is_some() => Verdict::new(
            AssertionKind::Route,
            Outcome::Indeterminate,
            format!("the serve log's lines kept never say /{}/ ({lines} lines searched){ansi}", route.fast.as_str()),
        ),
        (Some((fl, ft)), None) => {
            let slow_note = route.slow.as_ref().map(|s| format!("; slow /{}/ absent", s.as_str())).unwrap_or_default();
            Verdict::new(AssertionKind::Route, Outcome::Pass, format!("fast route: serve.log line {fl} matches /{}/: {ft:?}{slow_note}{ansi}", route.fast.as_str()))
        }
        (Some((fl, _)), Some((sre, (sl, st)))) => Verdict::new(
            AssertionKind::Route,
            Outcome::Fail,
            format!("both routes named, which counts as the slow route: fast /{}/ at serve.log line {fl}, slow /{sre}/ at line {sl}: {st:?}{ansi}", route.fast.as_str()),
        ),
        (None, Some((sre, (sl, st)))) => Verdict::new(AssertionKind::Route, Outcome::Fail, format!("slow route: serve.log line {sl} matches /{sre}/: {st:?}; fast /{}/ never appears{ansi}", route.fast.as_str())),
        (None, None) => Verdict::new(
            AssertionKind::Route,
            Outcome::Fail,
            format!("the serve log never says /{}/ ({lines} lines searched): the evidence of the route has to be there{ansi}", route.fast.as_str()),
        ),
    }
}

/// `text` without terminal escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \\`, DCS/SOS/PM/APC
/// strings, two-byte `ESC x`, and their 8-bit C1 forms) and without other control characters except tab and
/// newline, so `\x1b[33mper-op\x1b[0m forward` reads `per-op forward`. Line breaks are kept (line numbers hold).
pub fn strip_escapes(text: &str) -> String {
    strip_escapes_counted(text).0
}

/// [`strip_escapes`] and how many escape sequences it removed (each `ESC ...` or 8-bit C1 sequence counts
/// once; other control characters removed are not counted): the `log_ansi_stripped` count (case 38).
pub fn strip_escapes_counted(text: &str) -> (String, usize) {
    let mut sequences = 0;
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars().peekable();
    // Skips a string sequence's body up to BEL, ST (`ESC \\`) or the 8-bit ST.
    fn skip_string(it: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        while let Some(c) = it.next() {
            match c {
                '\u{7}' | '\u{9c}' | '\n' => return,
                '\u{1b}' => {
                    if it.peek() == Some(&'\\') {
                        it.next();
                    }
                    return;
                }
                _ => {}
            }
        }
    }
    fn skip_csi(it: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        while let Some(&c) = it.peek() {
            if ('\u{20}'..='\u{3f}').contains(&c) {
                it.next();
            } else {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    it.next();
                }
                return;
            }
        }
    }
    while let Some(c) = it.next() {
        if matches!(
            c,
            '\u{1b}' | '\u{9b}' | '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}'
        ) {
            sequences += 1;
        }
        match c {
            '\u{1b}' => match it.next() {
                Some('[') => skip_csi(&mut it),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut it),
                Some(c2) if ('\u{20}'..='\u{2f}').contains(&c2) => {
                    // nF: intermediates, then one final byte.
                    while it.peek().is_some_and(|c| ('\u{20}'..='\u{2f}').contains(c)) {
                        it.next();
                    }
                    it.next();
                }
                Some('\n') => out.push('\n'),
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut it),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    (out, sequences)
}

/// Why a request has no value for a timing assertion: its failure first, then the measurement's note.
/// `decode`: the value is a decode rate, whose measurement says why it is missing (`decode_note`).
fn why_missing(j: &Judged, what: &str, decode: bool) -> String {
    if let Some(f) = request_failure(j.ev) {
        return f.to_string();
    }
    if let Some(n) = j.fig.decode_note.as_ref().filter(|_| decode) {
        return n.clone();
    }
    format!("no {what} in the reply")
}

/// Fewest measured replies, as a share of the planned timed ones, a figure assertion judges a median over:
/// one half. A reply not measured because of how it was delivered (its cause stated: a window under the
/// minimum, a burst, a first token read late with later ones) is not a slow reply, but it is no evidence
/// either: with fewer than half of the planned replies measured, the median of the measured is not the run's
/// median (the unmeasured could all lie on one side of it), and the verdict is INDETERMINATE, never a pass
/// and never a fail.
pub const MIN_MEASURED_SHARE: f64 = 0.5;

/// A figure a reply is judged on when the client's own figure is missing (the serve's, under `source = "both"`).
type FallbackFigure<'a> = &'a dyn Fn(&Judged) -> Option<f64>;

/// Per-request values of a figure assertion: the sent timed judged requests' values (a failed request's is
/// None), the missing ones named with their reasons (they fail), the ones not measured because of delivery
/// (they do not), the ones judged on the serve's figure instead of the client's, and the plan.
struct FigureValues {
    /// One per sent timed judged request, in send order.
    values: Vec<Option<f64>>,
    /// `request 02 (reason)` for each sent request without a value that fails the assertion.
    missing: Vec<String>,
    /// `request 03 (cause)` for each request not measured because of how its reply was delivered.
    unmeasured: Vec<String>,
    /// `request 03 (cause)` for each request the client could not time, judged on the serve's figure.
    on_serve: Vec<String>,
    /// Planned timed judged requests.
    planned: usize,
    /// Planned judged requests to untimed prompts (asked for their answer only).
    untimed: usize,
    /// Planned timed requests never sent.
    never_sent: usize,
}

/// The judged requests whose replies are timed (their prompt is not one of `[request] untimed`).
fn timed<'b, 'a>(gate: &GateSpec, judged: &'b [Judged<'a>]) -> Vec<&'b Judged<'a>> {
    judged
        .iter()
        .filter(|j| gate.request.timed(&j.ev.record.prompt))
        .collect()
}

/// The request's cause for having no value because of delivery, when `value` is None: `cause(j)`.
type Cause<'f> = &'f dyn Fn(&Judged) -> Option<String>;

impl FigureValues {
    /// Values of `judged` (the timed requests) by `value`; a request without one is not measured when
    /// `cause` names a delivery cause (then judged on `fallback`, the serve's figure, when it has one),
    /// else missing with `why`.
    fn of<'x, 'a: 'x>(
        judged: impl IntoIterator<Item = &'x Judged<'a>>,
        value: impl Fn(&Judged) -> Option<f64>,
        why: impl Fn(&Judged) -> String,
        cause: Cause,
        fallback: Option<FallbackFigure<'_>>,
    ) -> FigureValues {
        let mut fv = FigureValues {
            values: Vec::new(),
            missing: Vec::new(),
            unmeasured: Vec::new(),
            on_serve: Vec::new(),
            planned: 0,
            untimed: 0,
            never_sent: 0,
        };
        for j in judged {
            let failed = request_failure(j.ev).is_some();
            let mut v = if failed { None } else { value(j) };
            if v.is_none() {
                let label = format!("request {:02}", j.ev.record.index);
                match cause(j).filter(|_| !failed) {
                    Some(c) => match fallback.and_then(|f| f(j)) {
                        Some(s) => {
                            v = Some(s);
                            fv.on_serve.push(format!("{label} ({c})"));
                        }
                        None => fv.unmeasured.push(format!("{label} ({c})")),
                    },
                    None => fv.missing.push(format!("{label} ({})", why(j))),
                }
            }
            fv.values.push(v);
        }
        fv.planned = fv.values.len();
        fv
    }

    /// Sets the plan from the run's accounting: every planned judged request, less those to untimed
    /// prompts (`gate` None: every prompt is timed).
    fn planned_from(mut self, gate: Option<&GateSpec>, acct: &Accounting) -> FigureValues {
        let (planned, never_sent) = match gate {
            Some(g) if !g.request.untimed.is_empty() => {
                let prompts = &g.request.prompts;
                let timed_planned = acct.planned_for(prompts, |p| g.request.timed(p));
                let never = acct
                    .never_sent
                    .iter()
                    .filter(|i| {
                        let pos = i.saturating_sub(acct.warmup);
                        g.request.timed(&prompts[pos % prompts.len()])
                    })
                    .count();
                (timed_planned, never)
            }
            _ => (acct.planned, acct.never_sent.len()),
        };
        self.untimed = acct.planned.saturating_sub(planned);
        self.planned = planned;
        self.never_sent = never_sent;
        self
    }

    /// The values with a None for each planned timed request never sent: one per planned timed request.
    fn planned_values(&self) -> Vec<Option<f64>> {
        let mut v = self.values.clone();
        v.extend((0..self.never_sent).map(|_| None));
        v
    }

    fn present(&self) -> Vec<f64> {
        self.values.iter().flatten().copied().collect()
    }

    /// Values that count: present values; measured means judged on a figure (the client's or the serve's).
    fn measured(&self) -> usize {
        self.values.iter().flatten().count()
    }

    /// True when too few planned timed replies were measured for a median ([`MIN_MEASURED_SHARE`]): the
    /// replies judged on the serve's figure do not count here, so that a client that could time almost
    /// nothing (a buffering proxy, fake streaming) is never passed on the serve's word alone.
    fn too_few_measured(&self) -> bool {
        let m = self.measured() - self.on_serve.len();
        m == 0 || (m as f64) < MIN_MEASURED_SHARE * self.planned as f64
    }

    /// `n=K of N planned` (every sent reply measured), or `n=K of M measured` when some were not; then the
    /// untimed prompts' count, the replies judged on the serve's figure and those not measured, with
    /// their causes (the first three, and how many more).
    fn n_text(&self) -> String {
        let sent = self.values.len();
        let mut s = if self.unmeasured.is_empty() {
            format!("n={sent} of {} planned", self.planned)
        } else if sent == self.planned {
            format!("n={} of {sent} measured", self.measured())
        } else {
            format!(
                "n={} of {sent} measured, {} planned",
                self.measured(),
                self.planned
            )
        };
        if self.untimed > 0 {
            s.push_str(&format!("; {} untimed (answer only)", self.untimed));
        }
        if !self.on_serve.is_empty() {
            s.push_str(&format!(
                "; on the serve's figure (the client could not time it): {}",
                listed(&self.on_serve)
            ));
        }
        if !self.unmeasured.is_empty() {
            s.push_str(&format!("; not measured: {}", listed(&self.unmeasured)));
        }
        s
    }

    /// `K of N replies have no <what>: ...; M planned requests never sent: ...`, or None when every planned
    /// request has a value or is not measured for a delivery cause.
    fn failure_head(&self, what: &str, acct: &Accounting) -> Option<String> {
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!(
                "{} of {} replies have no {what}: {}",
                self.missing.len(),
                self.values.len(),
                self.missing.join("; ")
            ));
        }
        parts.extend(acct.unsent());
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// The first three items and how many more: `a; b; c; and 4 more`.
fn listed(items: &[String]) -> String {
    let mut s = items.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    if items.len() > 3 {
        s.push_str(&format!("; and {} more", items.len() - 3));
    }
    s
}

/// The delivery cause of a missing value of metric `m` ([`measure::unmeasured_cause`]).
fn cause_of(m: Metric) -> impl Fn(&Judged) -> Option<String> {
    move |j: &Judged| measure::unmeasured_cause(&j.fig, m).map(str::to_string)
}

/// `[assert.rate]`: the median decode rate at least the floor. With `source = "both"` the client's and the
/// serve's figures are each judged against the floor ([`judge_rate_of`]) and their medians must agree within
/// `agree_pct` of the serve's: `client median 45.0 tok/s (...); server median 44.0 tok/s server-reported
/// (...); client and server 2% apart (agree within 20%)`. The verdict's values, median and bound are the
/// client's.
fn judge_rate(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    let rate = gate.assertions.rate.as_ref().expect("rate declared");
    if judged.is_empty() {
        return no_replies(AssertionKind::Rate, acct);
    }
    if rate.source != RateSource::Both {
        return judge_rate_of(gate, rate.source, judged, acct);
    }
    let client = judge_rate_of(gate, RateSource::Client, judged, acct);
    let mut server = judge_rate_of(gate, RateSource::Server, judged, acct);
    // No per-reply timings, but the serve's inter-token-latency histogram (vLLM): its run figure.
    if server.values.iter().all(Option::is_none) {
        if let Some(v) = crate::judge::serve_clock::rate_from_histograms(rate.floor_tok_s, acct) {
            server = v;
        }
    }
    // Agreement compares the client's own measurements with the serve's (the replies judged on the serve's
    // figure would agree by construction).
    let own: Vec<f64> = timed(gate, judged)
        .iter()
        .filter(|j| request_failure(j.ev).is_none())
        .filter_map(|j| j.fig.decode_tok_s)
        .collect();
    let agree = match (stats::median(&own), server.median) {
        (Some(c), Some(s)) if s > 0.0 => {
            let apart = (c - s).abs() / s * 100.0;
            let ok = apart <= rate.agree_pct;
            let text = if ok {
                format!(
                    "client and server {apart:.0}% apart (agree within {:.0}%)",
                    rate.agree_pct
                )
            } else {
                format!(
                    "{}: client and server {apart:.0}% apart (more than {:.0}%: a client-bound measurement, a buffering proxy or fake streaming)",
                    NoteKind::ClientServerDisagree.name(),
                    rate.agree_pct
                )
            };
            Some((ok, text))
        }
        _ => None,
    };
    // A fail on either side or a disagreement fails; else an undecided side (too few measured) leaves the
    // rate undecided; both decided and agreeing passes.
    let outcomes = [client.outcome, server.outcome];
    let outcome = if outcomes.contains(&Outcome::Fail) || agree.as_ref().is_some_and(|(ok, _)| !ok)
    {
        Outcome::Fail
    } else if outcomes.contains(&Outcome::Indeterminate) {
        Outcome::Indeterminate
    } else if agree.is_some() {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    let mut parts = vec![
        format!("client {}", client.details),
        format!("server {}", server.details),
    ];
    if let Some((_, text)) = agree {
        parts.push(text);
    }
    let mut v = Verdict::new(AssertionKind::Rate, outcome, parts.join("; "));
    v.values = client.values;
    v.median = client.median;
    v.bound = client.bound;
    v
}

/// A passing rate verdict whose median's 95 % lower bound is more than 25 % above the floor says so, with
/// the floor `servegate bless --floor` would derive (`analysis::regress::floor_hint`): `(floor could be 73.8:
/// servegate bless)`. Only with every planned value present; never changes the outcome.
fn with_floor_hint(gate: &GateSpec, mut v: Verdict) -> Verdict {
    let Some(rate) = gate.assertions.rate.as_ref() else {
        return v;
    };
    if v.outcome != Outcome::Pass || v.values.iter().any(|x| x.is_none()) {
        return v;
    }
    let values: Vec<f64> = v.values.iter().flatten().copied().collect();
    if let Some(f) = crate::analysis::regress::floor_hint(&values, rate.floor_tok_s) {
        let details = format!("{} (floor could be {f:.1}: servegate bless)", v.details);
        v.set(Outcome::Pass, details);
    }
    v
}

/// The `over_max_tokens` finding of a judged reply as text (`over_max_tokens: 9 token chunks, above
/// max_tokens 8`), when [`max_tokens::over_max_tokens`] flagged it.
fn over_max_tokens_note(j: &Judged) -> Option<String> {
    j.fig
        .warnings
        .iter()
        .find(|n| n.kind == NoteKind::OverMaxTokens)
        .map(|n| n.to_string())
}

/// One decode-rate figure (`Client` or `Server`) against the floor: the verdict of `[assert.rate]` with
/// that `source`.
fn judge_rate_of(
    gate: &GateSpec,
    source: RateSource,
    judged: &[Judged],
    acct: &Accounting,
) -> Verdict {
    let rate = gate.assertions.rate.as_ref().expect("rate declared");
    let judged = timed(gate, judged);
    // The client side of `source = "both"`: a reply the client could not time but the serve did is judged
    // on the serve's figure, and the line says so.
    let serve_figure = |j: &Judged| j.fig.server_decode_tok_s;
    let fallback: Option<FallbackFigure<'_>> =
        (rate.source == RateSource::Both && source == RateSource::Client).then_some(&serve_figure);
    let client_cause = cause_of(Metric::DecodeRate);
    let no_cause = |_: &Judged| None;
    let fv = FigureValues::of(
        judged.iter().copied(),
        |j| match source {
            RateSource::Client | RateSource::Both => j.fig.decode_tok_s,
            RateSource::Server => j.fig.server_decode_tok_s,
        },
        |j| {
            if source == RateSource::Server && request_failure(j.ev).is_none() {
                j.serve_log_why
                    .clone()
                    .unwrap_or_else(|| "no llama.cpp timings in the reply".to_string())
            } else {
                why_missing(j, "rate", true)
            }
        },
        if source == RateSource::Server {
            &no_cause
        } else {
            &client_cause
        },
        fallback,
    )
    .planned_from(Some(gate), acct);
    let label = match (source, &rate.server_log) {
        (RateSource::Client | RateSource::Both, _) => String::new(),
        (RateSource::Server, None) => " server-reported (timings.predicted_per_second)".to_string(),
        (RateSource::Server, Some(re)) => format!(" server-reported (serve.log /{}/)", re.as_str()),
    };
    let n = fv.values.len();
    let mut notes = Vec::new();
    let implausible_tokens =
        |j: &Judged| crate::vocab::has_note(&j.fig.warnings, NoteKind::ImplausibleCompletionTokens);
    // Notes describe the replies that were measured: a failed reply has no figure to describe.
    let measured: Vec<&Judged> = judged
        .iter()
        .copied()
        .filter(|j| request_failure(j.ev).is_none())
        .collect();
    let estimates = measured
        .iter()
        .filter(|j| {
            j.fig.completion_tokens_source == Some(TokenSource::TokenChunkCountEstimate)
                && !implausible_tokens(j)
        })
        .count();
    if source == RateSource::Client && estimates > 0 {
        notes.push(format!(
            "{estimates} of {n} estimated from the token-chunk count (the serve reported no usage)"
        ));
    }
    let multi = measured.iter().filter(|j| j.fig.multi_token).count();
    if source == RateSource::Client && multi > 0 {
        notes.push(format!("{multi} of {n} had several tokens per chunk"));
    }
    let over: Vec<String> = measured
        .iter()
        .filter_map(|j| over_max_tokens_note(j))
        .collect();
    if !over.is_empty() {
        notes.push(format!(
            "{} of {n} over max_tokens {} ({}: the serve ignored the limit or miscounts; the rate times what was streamed)",
            over.len(),
            gate.request.max_tokens,
            over.join("; ")
        ));
    }
    let implausible = measured.iter().filter(|j| implausible_tokens(j)).count();
    if source == RateSource::Client && implausible > 0 {
        notes.push(format!(
            "{implausible} of {n} reported more completion tokens than the stream could carry (implausible_completion_tokens: not used; the next count stands in, the token-chunk count at worst)"
        ));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    let what = if label.is_empty() {
        "decode rate".to_string()
    } else {
        format!("{} decode rate", label.trim_start())
    };
    let metric = match source {
        RateSource::Client | RateSource::Both => Metric::DecodeRate,
        RateSource::Server => Metric::ServerDecodeRate,
    };
    judge_figure(
        FigureAssertion {
            kind: AssertionKind::Rate,
            metric,
            bound: Bound::for_metric(metric, rate.floor_tok_s),
            what: &what,
            label: &label,
            notes: &notes,
        },
        &fv,
        acct,
    )
}

/// A figure assertion: the median of one metric's per-request values against a floor or a limit.
struct FigureAssertion<'a> {
    /// The assertion.
    kind: AssertionKind,
    /// The metric judged: its unit and decimals come from the registry.
    metric: Metric,
    /// Floor or limit.
    bound: Bound,
    /// The noun in `K of N replies have no <what>`.
    what: &'a str,
    /// Said after the unit of the median (`" server-reported (...)"`), or "".
    label: &'a str,
    /// `; note; note` after the parenthesis, or "".
    notes: &'a str,
}

/// Judges a figure assertion: fails naming every missing value (and the never-sent requests), else compares
/// the median with the bound. `median 47.0 tok/s (floor 15.0; each: ...; n=6 of 6 planned)`.
fn judge_figure(fa: FigureAssertion, fv: &FigureValues, acct: &Accounting) -> Verdict {
    let info = fa.metric.info();
    let d = info.decimals;
    let unit = info.unit;
    let word = if fa.bound.at_least { "floor" } else { "limit" };
    let bound = fa.bound.value;
    let notes = fa.notes;
    let median = stats::median(&fv.present());
    let mut v = if let Some(head) = fv.failure_head(fa.what, acct) {
        Verdict::new(
            fa.kind,
            Outcome::Fail,
            format!(
                "{head} ({word} {bound:.d$} {unit}; each: {}; {}){notes}",
                each(&fv.values, d),
                fv.n_text()
            ),
        )
    } else if fv.too_few_measured() {
        Verdict::new(
            fa.kind,
            Outcome::Indeterminate,
            format!(
                "too few replies measured for a median (at least half the {} planned; {word} {bound:.d$} {unit}; each: {}; {}){notes}",
                fv.planned,
                each(&fv.values, d),
                fv.n_text()
            ),
        )
    } else {
        let m = median.unwrap_or(f64::NAN);
        let outcome = if fa.bound.holds(m) {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        Verdict::new(
            fa.kind,
            outcome,
            format!(
                "median {m:.d$} {unit}{} ({word} {bound:.d$}; each: {}; {}){notes}",
                fa.label,
                each(&fv.values, d),
                fv.n_text()
            ),
        )
    };
    v.values = fv.planned_values();
    v.median = median;
    v.bound = Some(fa.bound);
    v
}

fn judge_first_token(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    if judged.is_empty() {
        return no_replies(AssertionKind::FirstToken, acct);
    }
    let fv = FigureValues::of(
        timed(gate, judged),
        |j| j.fig.ttft_ms,
        |j| why_missing(j, "token", false),
        &cause_of(Metric::Ttft),
        None,
    )
    .planned_from(Some(gate), acct);
    judge_figure(
        FigureAssertion {
            kind: AssertionKind::FirstToken,
            metric: Metric::Ttft,
            bound: declared_bound(gate, AssertionKind::FirstToken).expect("first_token declared"),
            what: "first token",
            label: "",
            notes: "",
        },
        &fv,
        acct,
    )
}

/// `[assert.tpot]`: the median TPOT (ms) at most the limit; a reply without a TPOT (failed, one token
/// chunk, or the whole reply in one read) is a missing value and fails it, as for `first_token`.
fn judge_tpot(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    if judged.is_empty() {
        return no_replies(AssertionKind::Tpot, acct);
    }
    let fv = FigureValues::of(
        timed(gate, judged),
        |j| measure::metric_value(&j.fig, Metric::Tpot),
        |j| why_missing(j, "TPOT", false),
        &cause_of(Metric::Tpot),
        None,
    )
    .planned_from(Some(gate), acct);
    judge_figure(
        FigureAssertion {
            kind: AssertionKind::Tpot,
            metric: Metric::Tpot,
            bound: declared_bound(gate, AssertionKind::Tpot).expect("tpot declared"),
            what: "TPOT",
            label: "",
            notes: "",
        },
        &fv,
        acct,
    )
}

/// Why one reply fails the content check, or None when its content is sane.
pub fn content_problem(reply: &crate::analysis::reply::Reply, fig: &Figures) -> Option<String> {
    reply_problem(reply, fig).map(|(_, text)| text)
}

/// What kind of problem one reply has (the name `inspect` reports): its failure, or a content problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// The reply failed on its own terms ([`crate::analysis::reply::Reply::failure`]): its first code.
    Failed(FailureCode),
    /// Its content is not sane.
    Content(ContentProblem),
}

impl ProblemKind {
    /// The wire name: the failure code's or the content problem's.
    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::Failed(c) => c.name(),
            ProblemKind::Content(c) => c.name(),
        }
    }
}

/// [`content_problem`] with its kind.
pub fn reply_problem(
    reply: &crate::analysis::reply::Reply,
    fig: &Figures,
) -> Option<(ProblemKind, String)> {
    if let Some(f) = reply.failure() {
        let what = if reply.error.is_some() {
            "error reply"
        } else {
            "failed reply"
        };
        let partial = if reply.content.is_empty() {
            String::new()
        } else {
            // Cut: a hostile serve's partial content can be megabytes, and this goes into one verdict line.
            let n = reply.content.chars().count();
            let head: String = reply.content.chars().take(80).collect();
            if n > 80 {
                format!("; partial content {head:?}… ({n} chars)")
            } else {
                format!("; partial content {head:?}")
            }
        };
        return Some((
            ProblemKind::Failed(f.code()),
            format!("{what}: {f}{partial}"),
        ));
    }
    let finish =
        crate::analysis::reply::printable(reply.finish_reason.as_deref().unwrap_or("none"));
    // A tool-call reply is a valid reply with no content: the calls are the answer.
    if reply.content.trim().is_empty() && !reply.tool_calls.is_empty() {
        return None;
    }
    if reply.content.trim().is_empty() {
        if let Some(why) = crate::analysis::content::reasoning_ate_budget(
            &reply.content,
            &reply.reasoning,
            fig.completion_tokens,
            reply.finish_reason.as_deref(),
        ) {
            return Some((
                ProblemKind::Content(ContentProblem::ContentEmptyAllTokensInReasoning),
                format!("{why} (is thinking left on?)"),
            ));
        }
        if reply.content.is_empty() {
            return Some((
                ProblemKind::Content(ContentProblem::ContentEmpty),
                format!("empty content (finish_reason={finish})"),
            ));
        }
        return Some((
            ProblemKind::Content(ContentProblem::ContentWhitespaceOnly),
            format!(
                "whitespace-only content {:?} (finish_reason={finish})",
                reply.content
            ),
        ));
    }
    if let Some(reason) = crate::analysis::content::degenerate(&reply.content) {
        let tail = if finish == "length" {
            " + ran to max_tokens – possible NaN logits"
        } else {
            ""
        };
        return Some((
            ProblemKind::Content(ContentProblem::DegenerateOutput),
            format!("{reason}{tail}"),
        ));
    }
    None
}

/// `thinking_not_off: ...` when a reply thinks (reasoning in its own field, or markup moved out of its
/// content: warning `reasoning_in_content`) though the gate turned thinking off.
fn still_thinks(reply: &crate::analysis::reply::Reply) -> Option<String> {
    if reply.reasoning.trim().is_empty() {
        return None;
    }
    let how = if reply.has_note(NoteKind::ReasoningInContent) {
        "as reasoning markup in its content"
    } else {
        "in its reasoning field"
    };
    Some(format!(
        "{}: the gate turns thinking off (chat_template_kwargs.enable_thinking = false) but the reply still thinks ({} chars {how})",
        ContentProblem::ThinkingNotOff.name(),
        reply.reasoning.chars().count()
    ))
}

/// `[assert.content]`: every reply sane ([`content_problem`]): a tool-call reply with no content is sane and
/// its calls are shown; with thinking turned off, a reply that still thinks fails ([`still_thinks`]).
fn judge_content(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    if judged.is_empty() {
        return no_replies(AssertionKind::Content, acct);
    }
    let n = judged.len();
    let thinking_off = gate.request.thinking_off();
    let problems: Vec<String> = judged
        .iter()
        .filter_map(|j| {
            content_problem(&j.ev.reply, &j.fig)
                .or_else(|| request_failure(j.ev).map(|f| format!("failed reply: {f}")))
                .or_else(|| over_max_tokens_note(j))
                .or_else(|| thinking_off.then(|| still_thinks(&j.ev.reply)).flatten())
                .map(|p| format!("request {:02}: {p}", j.ev.record.index))
        })
        .collect();
    let unsent = acct.unsent();
    let sse_note = ignored_sse_fields_note(judged);
    if problems.is_empty() && unsent.is_none() {
        let lens: Vec<String> = judged
            .iter()
            .map(|j| j.ev.reply.content.chars().count().to_string())
            .collect();
        let calls: Vec<String> = judged
            .iter()
            .filter(|j| !j.ev.reply.tool_calls.is_empty())
            .map(|j| {
                format!(
                    "request {:02}: {}",
                    j.ev.record.index,
                    crate::analysis::reply::quoted(
                        &crate::analysis::content::tool_calls_text(&j.ev.reply.tool_calls),
                        80
                    )
                )
            })
            .collect();
        let calls = if calls.is_empty() {
            String::new()
        } else {
            format!("; tool calls: {}", calls.join("; "))
        };
        Verdict::new(
            AssertionKind::Content,
            Outcome::Pass,
            format!(
                "{n} of {n} replies have sane content (chars each: {}; {}){calls}{sse_note}",
                lens.join(", "),
                acct.n_of(n)
            ),
        )
    } else {
        let mut parts = Vec::new();
        if !problems.is_empty() {
            parts.push(format!(
                "{} of {n} replies fail: {}",
                problems.len(),
                problems.join("; ")
            ));
        }
        parts.extend(unsent);
        Verdict::new(
            AssertionKind::Content,
            Outcome::Fail,
            format!("{} ({}){sse_note}", parts.join("; "), acct.n_of(n)),
        )
    }
}

/// The note of `content` on replies whose stream had lines with a field SSE ignores (`foobar:xxx`, a line
/// with no colon: [`NoteKind::UnknownSseFields`]): empty when none did. Such lines lose nothing (the WHATWG
/// rules and every OpenAI SDK skip them), so they only warn; a line that looks meant to be `data`, `event`
/// or `error` fails the reply instead (`misnamed_field`).
fn ignored_sse_fields_note(judged: &[Judged]) -> String {
    let with: Vec<&Judged> = judged
        .iter()
        .filter(|j| j.ev.reply.has_note(NoteKind::UnknownSseFields))
        .collect();
    let Some(first) = with.first() else {
        return String::new();
    };
    let detail = first
        .ev
        .reply
        .warnings
        .iter()
        .find(|n| n.kind == NoteKind::UnknownSseFields)
        .and_then(|n| n.detail.clone())
        .unwrap_or_default();
    let which: Vec<String> = with
        .iter()
        .take(5)
        .map(|j| format!("{:02}", j.ev.record.index))
        .collect();
    format!(
        "; note: {} of {} replies' streams had lines SSE ignores (request {}{}; first: {detail}): skipped as the SSE standard and the OpenAI SDKs skip them",
        with.len(),
        judged.len(),
        which.join(", "),
        if with.len() > 5 { ", ..." } else { "" }
    )
}

/// The text `known_answer` matches: the content, or for a tool-call reply with no content its calls as
/// `name(arguments)` joined by `; ` ([`crate::analysis::content::tool_calls_text`]).
fn answer_text(reply: &crate::analysis::reply::Reply) -> String {
    if reply.content.trim().is_empty() && !reply.tool_calls.is_empty() {
        crate::analysis::content::tool_calls_text(&reply.tool_calls)
    } else {
        reply.content.clone()
    }
}

fn judge_known_answer(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    let ka = gate
        .assertions
        .known_answer
        .as_ref()
        .expect("known_answer declared");
    let selected: Vec<&Judged> = judged
        .iter()
        .filter(|j| ka.prompt.as_ref().is_none_or(|p| &j.ev.record.prompt == p))
        .collect();
    if selected.is_empty() {
        return no_replies(AssertionKind::KnownAnswer, acct);
    }
    let n = selected.len();
    let short = |s: &str| -> String {
        let t: String = s.chars().take(80).collect();
        if s.chars().count() > 80 {
            format!("{t:?}…")
        } else {
            format!("{t:?}")
        }
    };
    let mut problems = Vec::new();
    for j in &selected {
        if let Some(f) = request_failure(j.ev) {
            let what = if j.ev.reply.error.is_some() {
                "error reply"
            } else {
                "failed reply"
            };
            problems.push(format!("request {:02}: {what}: {f}", j.ev.record.index));
        } else if !ka.matches.is_match(&answer_text(&j.ev.reply)) {
            problems.push(format!(
                "request {:02}: {} does not match /{}/",
                j.ev.record.index,
                short(&answer_text(&j.ev.reply)),
                ka.matches.as_str()
            ));
        }
    }
    let answers: Vec<String> = selected.iter().map(|j| answer_text(&j.ev.reply)).collect();
    let mut distinct: Vec<&str> = Vec::new();
    for a in &answers {
        if !distinct.contains(&a.as_str()) {
            distinct.push(a);
        }
    }
    if ka.identical && distinct.len() > 1 {
        problems.push(format!(
            "replies differ ({} distinct texts: {})",
            distinct.len(),
            distinct
                .iter()
                .map(|d| short(d))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    problems.extend(acct.unsent());
    let n_of = match &ka.prompt {
        None => acct.n_of(n),
        Some(p) => format!(
            "n={n} of {} planned",
            acct.planned_for(&gate.request.prompts, |x| x == p)
        ),
    };
    if problems.is_empty() {
        let same = if ka.identical { ", identical" } else { "" };
        Verdict::new(
            AssertionKind::KnownAnswer,
            Outcome::Pass,
            format!(
                "{n} of {n} replies match /{}/{same}: {} ({n_of})",
                ka.matches.as_str(),
                short(distinct[0]),
            ),
        )
    } else {
        Verdict::new(
            AssertionKind::KnownAnswer,
            Outcome::Fail,
            format!("{} ({n_of})", problems.join("; ")),
        )
    }
}

/// Judges a pair gate on a pair run: `ratio` (theirs / ours of the metric's medians, both numbers, the ratio
/// and the order in one line), `same_answers` (every reply of both runtimes to a prompt is the same text),
/// and `content` / `known_answer` over every arm. Pure, like [`judge`]. Every arm is accounted for as a run
/// is ([`account`]): a request never sent or failed in any arm is a missing value of `ratio` and fails
/// `same_answers`, and an arm whose serve failed during the run fails every assertion. Messages are masked
/// as [`judge`]'s are.
pub fn judge_pair(gate: &GateSpec, ev: &crate::analysis::PairEvidence) -> Vec<Verdict> {
    let mut verdicts = judge_pair_unmasked(gate, ev);
    redact::mask_verdicts(gate, &mut verdicts);
    verdicts
}

fn judge_pair_unmasked(gate: &GateSpec, ev: &crate::analysis::PairEvidence) -> Vec<Verdict> {
    let names = gate.assertions.kinds();
    let s = &ev.summary;
    let whole = if s.status != RunStatus::Complete {
        Some(format!(
            "the evidence is incomplete (pair.json status is `{}`: {})",
            s.status.name(),
            s.status.why_incomplete()
        ))
    } else if let Some(f) = &s.failure {
        Some(format!("the pair is void: {f}"))
    } else if ev.arms.is_empty() {
        Some("no arm ran".to_string())
    } else if ev.arms.len() < s.order.len() {
        Some(format!(
            "only {} of the {} planned arms ran (order {})",
            ev.arms.len(),
            s.order.len(),
            s.order.join(", ")
        ))
    } else {
        ev.summary.arms.iter().zip(&ev.arms).find_map(|(a, e)| {
            if e.run.status != RunStatus::Complete {
                Some(format!("arm {} ({}) evidence is incomplete", a.arm, a.role))
            } else {
                e.run
                    .serve
                    .failure
                    .as_ref()
                    .filter(|_| e.requests.is_empty())
                    .map(|f| format!("arm {} ({}) serve never became ready: {f}", a.arm, a.role))
            }
        })
    };
    if let Some(reason) = whole {
        return names
            .iter()
            .map(|n| Verdict::new(*n, Outcome::Fail, &reason))
            .collect();
    }
    let accts: Vec<Accounting> = ev.arms.iter().map(account).collect();
    // An arm whose serve failed during the run fails every assertion, naming the arm.
    let serve_failures: Vec<String> = ev
        .summary
        .arms
        .iter()
        .zip(&accts)
        .filter_map(|(a, acct)| {
            acct.serve_failure
                .as_ref()
                .map(|f| format!("arm {} {} serve: {f}", a.arm, a.role))
        })
        .collect();
    let mut out = Vec::new();
    for name in names {
        let mut v = match name {
            AssertionKind::Ratio => judge_ratio(gate, ev, &accts),
            AssertionKind::SameAnswers => judge_same_answers(gate, ev, &accts),
            AssertionKind::Content | AssertionKind::KnownAnswer => {
                let parts: Vec<(String, Verdict)> = ev
                    .summary
                    .arms
                    .iter()
                    .zip(&ev.arms)
                    .zip(&accts)
                    .map(|((a, e), acct)| {
                        let judged = judged_of(e);
                        let v = if name == AssertionKind::Content {
                            judge_content(gate, &judged, acct)
                        } else {
                            judge_known_answer(gate, &judged, acct)
                        };
                        (format!("arm {} {}", a.arm, a.role), v)
                    })
                    .collect();
                let ok = parts.iter().all(|(_, v)| v.passed());
                let detail: Vec<String> = parts
                    .iter()
                    .map(|(label, v)| format!("{label}: {}", v.details()))
                    .collect();
                Verdict::new(
                    name,
                    if ok { Outcome::Pass } else { Outcome::Fail },
                    detail.join(" | "),
                )
            }
            AssertionKind::Route
            | AssertionKind::Rate
            | AssertionKind::FirstToken
            | AssertionKind::Tpot
            | AssertionKind::Drift
            | AssertionKind::Load => Verdict::new(name, Outcome::Fail, "not judged in a pair gate"),
            // The interleaved baseline: `theirs` arms against `ours`, paired by A-B-B-A block.
            AssertionKind::Regression => {
                let r = gate
                    .assertions
                    .regression
                    .as_ref()
                    .expect("regression declared");
                regression::judge_pair_blocks(gate, r, ev, &accts)
            }
        };
        if !serve_failures.is_empty() {
            fail_for_serve(&mut v, &serve_failures.join("; "), None);
        }
        out.push(v);
    }
    out
}

fn judge_ratio(
    gate: &GateSpec,
    ev: &crate::analysis::PairEvidence,
    accts: &[Accounting],
) -> Verdict {
    let r = gate.assertions.ratio.as_ref().expect("ratio declared");
    let unit = match r.metric {
        crate::spec::PairMetric::Decode => crate::analysis::pair::DECODE,
        crate::spec::PairMetric::FirstToken => crate::analysis::pair::FIRST_TOKEN,
    };
    let planned: usize = accts.iter().map(|a| a.planned).sum();
    let mut arms = Vec::new();
    let mut missing = Vec::new();
    let mut all_values: Vec<Option<f64>> = Vec::new();
    let mut sent = 0;
    let mut unmeasured = Vec::new();
    // Each arm's values by position, NaN where a reply was not measured (its partner in the paired
    // interval is dropped with it: `ratio_interval` pairs only values > 0).
    let mut paired = Vec::new();
    for ((a, e), acct) in ev.summary.arms.iter().zip(&ev.arms).zip(accts) {
        let judged = judged_of(e);
        let fv = FigureValues::of(
            timed(gate, &judged),
            |j| measure::metric_value(&j.fig, r.metric.metric()),
            |j| why_missing(j, "rate", true),
            &cause_of(r.metric.metric()),
            None,
        )
        .planned_from(Some(gate), acct);
        sent += fv.values.len();
        missing.extend(
            fv.missing
                .iter()
                .map(|m| format!("arm {} {} {m}", a.arm, a.role)),
        );
        unmeasured.extend(
            fv.unmeasured
                .iter()
                .map(|m| format!("arm {} {} {m}", a.arm, a.role)),
        );
        if let Some(u) = acct.unsent() {
            missing.push(format!("arm {} {}: {u}", a.arm, a.role));
        }
        all_values.extend(fv.planned_values());
        arms.push(crate::analysis::pair::ArmValues {
            role: a.role.clone(),
            values: fv.present(),
        });
        paired.push(crate::analysis::pair::ArmValues {
            role: a.role.clone(),
            values: fv.values.iter().map(|v| v.unwrap_or(f64::NAN)).collect(),
        });
    }
    let planned: usize = if gate.request.untimed.is_empty() {
        planned
    } else {
        accts
            .iter()
            .map(|a| a.planned_for(&gate.request.prompts, |p| gate.request.timed(p)))
            .sum()
    };
    let n_of = if unmeasured.is_empty() {
        format!("n={sent} of {planned} planned")
    } else {
        format!(
            "n={} of {sent} measured; not measured: {}",
            sent - unmeasured.len(),
            listed(&unmeasured)
        )
    };
    if !missing.is_empty() {
        let mut v = Verdict::new(
            AssertionKind::Ratio,
            Outcome::Fail,
            format!(
                "{} of {planned} planned requests have no {} value: {} ({n_of})",
                all_values.iter().filter(|v| v.is_none()).count() - unmeasured.len(),
                unit.name,
                missing.join("; ")
            ),
        );
        v.values = all_values;
        return v;
    }
    let f = match crate::analysis::pair::compute(&arms) {
        Ok(f) => f,
        Err(e) => {
            return Verdict::new(
                AssertionKind::Ratio,
                Outcome::Fail,
                format!("{}: {e} ({n_of})", unit.name),
            )
        }
    };
    let lo_ok = r.at_least.is_none_or(|lo| f.ratio >= lo);
    let hi_ok = r.at_most.is_none_or(|hi| f.ratio <= hi);
    // The interval of the ratio from the paired blocks decides in three states (docs/regression.md); the
    // medians' ratio must hold the bounds too.
    let (ci_outcome, ci) = regression::ratio_interval(&paired, r.at_least, r.at_most);
    let bounds = match (r.at_least, r.at_most) {
        (Some(lo), Some(hi)) => format!("bounds {lo}-{hi}x"),
        (Some(lo), None) => format!("at least {lo}x"),
        (None, Some(hi)) => format!("at most {hi}x"),
        (None, None) => String::new(),
    };
    let outcome = match (lo_ok && hi_ok, ci_outcome) {
        (false, _) | (true, Outcome::Fail) => Outcome::Fail,
        (true, o) => o,
    };
    let mut v = Verdict::new(
        AssertionKind::Ratio,
        outcome,
        format!(
            "{} ({bounds}); {ci}; {}; {n_of}",
            crate::analysis::pair::line(&f, unit),
            crate::analysis::pair::arms_line(&f, unit)
        ),
    );
    v.values = f
        .theirs
        .values
        .iter()
        .chain(&f.ours.values)
        .map(|x| Some(*x))
        .collect();
    v.median = Some(f.ratio);
    v
}

fn judge_same_answers(
    gate: &GateSpec,
    ev: &crate::analysis::PairEvidence,
    accts: &[Accounting],
) -> Verdict {
    let sa = gate
        .assertions
        .same_answers
        .as_ref()
        .expect("same_answers declared");
    let mut problems = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut n = 0;
    let mut prompts = 0;
    for p in &gate.request.prompts {
        if sa.prompt.as_ref().is_some_and(|x| x != p) {
            continue;
        }
        prompts += 1;
        let mut texts: Vec<(String, &str)> = Vec::new();
        let mut replies: Vec<(String, &crate::analysis::reply::Reply)> = Vec::new();
        for (a, e) in ev.summary.arms.iter().zip(&ev.arms) {
            for r in e
                .requests
                .iter()
                .filter(|r| !r.record.warmup && &r.record.prompt == p)
            {
                if let Some(f) = request_failure(r) {
                    problems.push(format!(
                        "arm {} {} request {:02} failed ({f}): its text is not an answer",
                        a.arm, a.role, r.record.index
                    ));
                }
                texts.push((
                    format!("arm {} {}", a.arm, a.role),
                    r.reply.content.as_str(),
                ));
                if request_failure(r).is_none() {
                    replies.push((format!("arm {} {}", a.arm, a.role), &r.reply));
                }
            }
        }
        n += texts.len();
        let mut distinct: Vec<&str> = Vec::new();
        for (_, t) in &texts {
            if !distinct.contains(t) {
                distinct.push(t);
            }
        }
        if texts.is_empty() {
            problems.push(format!("no replies to {p:?}"));
        } else if sa.rule == crate::analysis::drift::Rule::LogprobsClose {
            drift::same_answers_close(p, &replies, sa.top_k() as usize, &mut problems, &mut notes);
        } else if distinct.len() > 1 {
            let shown: Vec<String> = distinct
                .iter()
                .map(|d| format!("{:?}", d.chars().take(60).collect::<String>()))
                .collect();
            problems.push(format!(
                "{} distinct replies to {:?}: {}",
                distinct.len(),
                p.chars().take(40).collect::<String>(),
                shown.join(", ")
            ));
        }
    }
    for (a, acct) in ev.summary.arms.iter().zip(accts) {
        if let Some(u) = acct.unsent() {
            problems.push(format!("arm {} {}: {u}", a.arm, a.role));
        }
    }
    let planned: usize = accts
        .iter()
        .map(|a| {
            a.planned_for(&gate.request.prompts, |p| {
                sa.prompt.as_ref().is_none_or(|x| x == p)
            })
        })
        .sum();
    let n_of = format!("n={n} of {planned} planned");
    if problems.is_empty() {
        Verdict::new(
            AssertionKind::SameAnswers,
            Outcome::Pass,
            if sa.rule == crate::analysis::drift::Rule::LogprobsClose {
                format!(
                    "both runtimes' replies to each of {prompts} prompts are identical or close (rule logprobs_close, top {}){} ({n_of})",
                    sa.top_k(),
                    if notes.is_empty() { String::new() } else { format!("; {}", notes.join("; ")) }
                )
            } else {
                format!("both runtimes gave the same text to each of {prompts} prompts ({n_of})")
            },
        )
    } else {
        Verdict::new(
            AssertionKind::SameAnswers,
            Outcome::Fail,
            format!("{} ({n_of})", problems.join("; ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{RequestRecord, RunSummary, ServeRecord, RUN_SCHEMA};
    use crate::io::reads::TimedRead;

    const GATE: &str = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\nrepeats = 4\n[assert.rate]\nfloor_tok_s = 10.0\n[assert.first_token]\nlimit_ms = 1000\n[assert.content]\n[assert.known_answer]\nmatches = \"Paris\"\n";

    fn gate() -> GateSpec {
        let ctx = crate::spec::Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        crate::spec::parse(std::path::Path::new("g.toml"), GATE, &ctx).unwrap()
    }

    fn ev_line(t: f64, json: &str) -> TimedRead {
        TimedRead {
            recv_ms: None,
            t_ms: t,
            bytes: format!("data: {json}\n\n").into_bytes(),
        }
    }

    /// A complete reply: "Paris is the capital." in 4 chunks 50 ms apart from 100 ms (20 tok/s), [DONE].
    fn good() -> Vec<TimedRead> {
        let mut r: Vec<TimedRead> = ["Paris", " is", " the", " capital."]
            .iter()
            .enumerate()
            .map(|(i, w)| {
                ev_line(
                    100.0 + 50.0 * i as f64,
                    &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{w}"}}}}]}}"#),
                )
            })
            .collect();
        r.push(ev_line(
            260.0,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":4}}"#,
        ));
        r.push(TimedRead {
            recv_ms: None,
            t_ms: 261.0,
            bytes: b"data: [DONE]\n\n".to_vec(),
        });
        r
    }

    /// `good()` cut after its first two chunks: no finish_reason, no [DONE].
    fn cut() -> Vec<TimedRead> {
        good().into_iter().take(2).collect()
    }

    fn request(index: usize, reads: &[TimedRead], transport: Option<&str>) -> RequestEvidence {
        let record = RequestRecord {
            index,
            prompt: "What is the capital of France?".into(),
            stream: true,
            http_status: Some(200),
            transport_error: transport.map(String::from),
            ..Default::default()
        };
        let reply = crate::analysis::reply_of(&record, reads);
        RequestEvidence {
            record,
            response: None,
            reply,
        }
    }

    fn evidence(planned: Option<usize>, requests: Vec<RequestEvidence>) -> Evidence {
        Evidence {
            dir: "/runs/g/1".into(),
            run: RunSummary {
                schema: RUN_SCHEMA.into(),
                status: RunStatus::Complete,
                gate: "g".into(),
                gate_file: "g.toml".into(),
                started_utc: String::new(),
                ended_utc: None,
                host: Default::default(),
                load_avg_start: None,
                load_avg_end: None,
                servegate_version: String::new(),
                serve: ServeRecord::default(),
                planned,
                planned_warmup: planned.map(|_| 0),
                requests: Vec::new(),
                notes: Vec::new(),
            },
            serve_log: Some("listening\n".into()),
            requests,
        }
    }

    fn find<'a>(v: &'a [Verdict], name: &str) -> &'a Verdict {
        v.iter().find(|x| x.assertion == name).unwrap()
    }

    fn gate_text(text: &str) -> GateSpec {
        let ctx = crate::spec::Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        crate::spec::parse(std::path::Path::new("g.toml"), text, &ctx).unwrap()
    }

    /// `good()` whose finish chunk carries llama.cpp timings with `predicted_per_second = server`.
    fn good_with_timings(server: f64) -> Vec<TimedRead> {
        let mut r = good();
        r[4] = ev_line(
            260.0,
            &format!(
                r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{{"completion_tokens":4}},"timings":{{"predicted_n":4,"predicted_ms":190.0,"predicted_per_second":{server}}}}}"#
            ),
        );
        r
    }

    fn both_gate(extra: &str) -> GateSpec {
        gate_text(&GATE.replace(
            "floor_tok_s = 10.0\n",
            &format!("floor_tok_s = 10.0\nsource = \"both\"\n{extra}"),
        ))
    }

    /// `[assert.rate] server_log` with llama-cpp-python's log shape (tests/data/serve-clock): gate text.
    fn log_gate(source: &str) -> GateSpec {
        gate_text(&format!(
            "{}\n[assert.rate]\nfloor_tok_s = 10.0\nsource = \"{source}\"\nserver_log = '{}'\n",
            "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\nrepeats = 2\nwarmup = 1",
            r"llama_perf_context_print: +eval time = .*\(\s*[\d.]+ ms per token, +(?P<tok_s>[\d.]+) tokens per second\)"
        ))
    }

    /// One warmup and two judged requests, all answered, with the fixture log (eval 40.00, 21.00, 19.00 tok/s).
    fn log_evidence(log: &str) -> Evidence {
        let mut warm = request(0, &good(), None);
        warm.record.warmup = true;
        let mut ev = evidence(
            Some(2),
            vec![warm, request(1, &good(), None), request(2, &good(), None)],
        );
        ev.run.planned_warmup = Some(1);
        ev.serve_log = Some(log.to_string());
        ev
    }

    const LLAMA_CPP_PYTHON_LOG: &str =
        include_str!("../../tests/data/serve-clock/llama-cpp-python.log");

    /// The k-th `eval time` line is the k-th answered request's (warmup included): the judged requests get
    /// 21.0 and 19.0, the warmup's 40.0 is not judged; with `source = "both"` the client (20.0) and the serve
    /// (median 20.0) agree and both hold the floor.
    #[test]
    fn rate_from_a_serve_log_line_is_the_serves_figure_per_request() {
        let ev = log_evidence(LLAMA_CPP_PYTHON_LOG);
        let r = find(&judge(&log_gate("server"), &ev), "rate").clone();
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
        assert_eq!(r.values, vec![Some(21.0), Some(19.0)]);
        assert_eq!(r.median, Some(20.0));
        assert!(
            r.message
                .contains("server-reported (serve.log /llama_perf_context_print"),
            "{}",
            r.message
        );
        let b = find(&judge(&log_gate("both"), &ev), "rate").clone();
        assert_eq!(b.outcome, Outcome::Pass, "{}", b.message);
        assert!(
            b.message
                .contains("server median 20.0 tok/s server-reported (serve.log"),
            "{}",
            b.message
        );
        assert!(
            b.message.contains("client and server 0% apart"),
            "{}",
            b.message
        );
    }

    /// A line missing (two `eval time` lines for three answered requests): no line is attributed, and the
    /// verdict says why; a `tok_s` that is no number gives that request none.
    #[test]
    fn rate_from_a_serve_log_line_refuses_to_guess_when_lines_and_requests_differ() {
        let cut: String = LLAMA_CPP_PYTHON_LOG
            .lines()
            .filter(|l| !l.contains("40.00 tokens per second"))
            .map(|l| format!("{l}\n"))
            .collect();
        let r = find(&judge(&log_gate("server"), &log_evidence(&cut)), "rate").clone();
        assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
        assert_eq!(r.values, vec![None, None]);
        assert!(
            r.message.contains("serve.log has 2 lines matching"),
            "{}",
            r.message
        );
        assert!(
            r.message
                .contains("for 3 answered requests: which line is whose cannot be told"),
            "{}",
            r.message
        );
        // Without the log source the same evidence has no serve figure at all (no llama.cpp timings).
        let plain = gate_text(&GATE.replace(
            "floor_tok_s = 10.0",
            "floor_tok_s = 10.0\nsource = \"server\"",
        ));
        let p = find(&judge(&plain, &log_evidence(LLAMA_CPP_PYTHON_LOG)), "rate").clone();
        assert!(p.message.contains("no llama.cpp timings"), "{}", p.message);
    }

    /// The key is checked: only with a serve source, and the regex must name `tok_s`.
    #[test]
    fn rate_server_log_is_refused_without_a_serve_source_or_a_tok_s_group() {
        let ctx = crate::spec::Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        let base = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.rate]\nfloor_tok_s = 10.0\n";
        let e = crate::spec::parse(
            std::path::Path::new("g.toml"),
            &format!("{base}server_log = 'eval (?P<tok_s>[0-9.]+) tok'\n"),
            &ctx,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("assert.rate.server_log") && e.contains("only with source"),
            "{e}"
        );
        let e = crate::spec::parse(
            std::path::Path::new("g.toml"),
            &format!("{base}source = \"server\"\nserver_log = 'eval ([0-9.]+) tok'\n"),
            &ctx,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("(?P<tok_s>...)"), "{e}");
    }

    /// Case 38: a coloured serve log is matched as a terminal shows it, and the verdict counts what it removed.
    #[test]
    fn route_reads_a_coloured_log_stripped_and_says_so() {
        let g = gate_text(&format!(
            "{}\n[assert.route]\nfast = 'Using attention backend: (?P<backend>\\w+)$'\nslow = 'falling back to CPU'\n",
            "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:1\"\nlog_file = \"/l\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]"
        ));
        let mut ev = evidence(Some(1), vec![request(0, &good(), None)]);
        ev.serve_log =
            Some("\u{1b}[32mINFO\u{1b}[0m Using attention backend: \u{1b}[1mNPU\u{1b}[0m\n".into());
        let r = find(&judge(&g, &ev), "route").clone();
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
        assert!(r.message.ends_with("; log_ansi_stripped: 4 escape sequences removed before matching (serve.log keeps the raw bytes)"), "{}", r.message);
        ev.serve_log = Some("INFO Using attention backend: NPU\n".into());
        let r = find(&judge(&g, &ev), "route").clone();
        assert!(!r.message.contains("log_ansi_stripped"), "{}", r.message);
    }

    /// `source = "both"`: client 20.0 tok/s and serve 21.0 tok/s (5 % apart) pass, both figures shown.
    #[test]
    fn rate_both_passes_when_client_and_serve_agree_and_hold_the_floor() {
        let g = both_gate("");
        let ev = evidence(
            Some(2),
            vec![
                request(0, &good_with_timings(21.0), None),
                request(1, &good_with_timings(21.0), None),
            ],
        );
        let v = judge(&g, &ev);
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
        assert_eq!(
            r.message,
            "rate PASS client median 20.0 tok/s (floor 10.0; each: 20.0, 20.0; n=2 of 2 planned); server median 21.0 tok/s server-reported (timings.predicted_per_second) (floor 10.0; each: 21.0, 21.0; n=2 of 2 planned); client and server 5% apart (agree within 20%)"
        );
        assert_eq!(r.median, Some(20.0));
        assert_eq!(r.values, vec![Some(20.0), Some(20.0)]);
    }

    /// Client 20.0 vs serve 30.0 (33 % apart) fails as `client_server_disagree` though both hold the floor;
    /// a wider `agree_pct` lets it pass.
    #[test]
    fn rate_both_fails_when_client_and_serve_disagree_beyond_agree_pct() {
        let ev = evidence(Some(1), vec![request(0, &good_with_timings(30.0), None)]);
        let v = judge(&both_gate(""), &ev);
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(
            r.message.ends_with("client_server_disagree: client and server 33% apart (more than 20%: a client-bound measurement, a buffering proxy or fake streaming)"),
            "{}",
            r.message
        );
        let v = judge(&both_gate("agree_pct = 40.0\n"), &ev);
        assert_eq!(find(&v, "rate").outcome, Outcome::Pass);
    }

    /// The floor must hold on both: a serve figure under the floor fails though the client's holds, and a
    /// reply without timings is a missing serve figure (fail, never pass on the client alone).
    #[test]
    fn rate_both_needs_the_floor_on_both_and_the_serve_figure_present() {
        let g = gate_text(&GATE.replace(
            "floor_tok_s = 10.0\n",
            "floor_tok_s = 19.0\nsource = \"both\"\nagree_pct = 50.0\n",
        ));
        let ev = evidence(Some(1), vec![request(0, &good_with_timings(15.0), None)]);
        let r = find(&judge(&g, &ev), "rate").clone();
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(
            r.message.starts_with("rate FAIL client median 20.0 tok/s"),
            "{}",
            r.message
        );
        assert!(
            r.message.contains("server median 15.0 tok/s"),
            "{}",
            r.message
        );
        let ev = evidence(Some(1), vec![request(0, &good(), None)]);
        let r = find(&judge(&g, &ev), "rate").clone();
        assert_eq!(r.outcome, Outcome::Fail);
        assert!(
            r.message.contains("no llama.cpp timings in the reply"),
            "{}",
            r.message
        );
    }

    /// A reply whose answer is text of content chunks 50 ms apart from 100 ms, finish `finish`, [DONE].
    fn reply_of_deltas(deltas: &[&str], finish: &str) -> Vec<TimedRead> {
        let mut r: Vec<TimedRead> = deltas
            .iter()
            .enumerate()
            .map(|(i, d)| {
                ev_line(
                    100.0 + 50.0 * i as f64,
                    &format!(r#"{{"choices":[{{"index":0,"delta":{d}}}]}}"#),
                )
            })
            .collect();
        let t = 100.0 + 50.0 * deltas.len() as f64;
        r.push(ev_line(
            t,
            &format!(
                r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{finish}"}}],"usage":{{"completion_tokens":{}}}}}"#,
                deltas.len()
            ),
        ));
        r.push(TimedRead {
            recv_ms: None,
            t_ms: t + 1.0,
            bytes: b"data: [DONE]\n\n".to_vec(),
        });
        r
    }

    fn tool_call_reply() -> Vec<TimedRead> {
        reply_of_deltas(
            &[
                r#"{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_capital","arguments":""}}]}"#,
                r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"country\":"}}]}"#,
                r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"France\"}"}}]}"#,
            ],
            "tool_calls",
        )
    }

    /// A tool-call reply has no content and is valid: `content` passes (never `content_empty`) and shows the
    /// call; `known_answer` matches the call's name and joined arguments.
    #[test]
    fn a_tool_call_reply_passes_content_and_known_answer_matches_the_call() {
        let g =
            gate_text(&GATE.replace("matches = \"Paris\"", "matches = 'get_capital\\(.*France'"));
        let ev = evidence(Some(1), vec![request(0, &tool_call_reply(), None)]);
        let v = judge(&g, &ev);
        let c = find(&v, "content");
        assert_eq!(c.outcome, Outcome::Pass, "{}", c.message);
        assert!(
            c.message
                .ends_with(r#"; tool calls: request 00: "get_capital({\"country\":\"France\"})""#),
            "{}",
            c.message
        );
        let k = find(&v, "known_answer");
        assert_eq!(k.outcome, Outcome::Pass, "{}", k.message);
        // The default gate asks for "Paris": the call does not say it, and the failure shows the call.
        let k = find(&judge(&gate(), &ev), "known_answer").clone();
        assert_eq!(k.outcome, Outcome::Fail);
        assert!(k.message.contains("get_capital("), "{}", k.message);
    }

    /// Reasoning markup in content is judged out of it: `<think>…</think>Paris.` passes `known_answer` on
    /// "Paris." and a reply that is all markup is empty content, all tokens in reasoning.
    #[test]
    fn think_markup_is_not_the_answer() {
        let ev = evidence(
            Some(1),
            vec![request(
                0,
                &reply_of_deltas(
                    &[
                        r#"{"content":"<think>France? Its capital is Paris"}"#,
                        r#"{"content":"</think>"}"#,
                        r#"{"content":"Lyon."}"#,
                    ],
                    "stop",
                ),
                None,
            )],
        );
        let k = find(&judge(&gate(), &ev), "known_answer").clone();
        assert_eq!(
            k.outcome,
            Outcome::Fail,
            "Paris is only in the thinking: {}",
            k.message
        );
        assert!(
            k.message.contains("\"Lyon.\" does not match"),
            "{}",
            k.message
        );
        let ev = evidence(
            Some(1),
            vec![request(
                0,
                &reply_of_deltas(
                    &[r#"{"content":"<think>Let me"}"#, r#"{"content":" see"}"#],
                    "length",
                ),
                None,
            )],
        );
        let c = find(&judge(&gate(), &ev), "content").clone();
        assert_eq!(c.outcome, Outcome::Fail);
        assert!(
            c.message.contains("content_empty_all_tokens_in_reasoning"),
            "{}",
            c.message
        );
    }

    /// With `chat_template_kwargs.enable_thinking = false`, a reply that still thinks fails `content`, saying
    /// so, whether the thinking came in the reasoning field or as markup; without the switch it passes.
    #[test]
    fn thinking_turned_off_but_still_thinking_fails_content() {
        let off = gate_text(&format!(
            "{GATE}[request.extra.chat_template_kwargs]\nenable_thinking = false\n"
        ));
        assert!(off.request.thinking_off() && !gate().request.thinking_off());
        let field = reply_of_deltas(
            &[r#"{"reasoning_content":"hmm"}"#, r#"{"content":"Paris."}"#],
            "stop",
        );
        let markup = reply_of_deltas(
            &[
                r#"{"content":"<think>hmm</think>"}"#,
                r#"{"content":"Paris."}"#,
            ],
            "stop",
        );
        for (reads, how) in [
            (&field, "in its reasoning field"),
            (&markup, "as reasoning markup in its content"),
        ] {
            let ev = evidence(Some(1), vec![request(0, reads, None)]);
            let c = find(&judge(&off, &ev), "content").clone();
            assert_eq!(c.outcome, Outcome::Fail, "{}", c.message);
            assert!(
                c.message.contains(&format!("request 00: thinking_not_off: the gate turns thinking off (chat_template_kwargs.enable_thinking = false) but the reply still thinks (3 chars {how})")),
                "{}",
                c.message
            );
            assert_eq!(find(&judge(&gate(), &ev), "content").outcome, Outcome::Pass);
        }
        let ev = evidence(Some(1), vec![request(0, &good(), None)]);
        assert_eq!(find(&judge(&off, &ev), "content").outcome, Outcome::Pass);
    }

    /// Masking is part of judging: a serve that echoes the gate's API key split across two SSE events (no
    /// file holds it whole) has it quoted by `known_answer`; `judge` masks it, with no call left to the caller.
    #[test]
    fn judge_masks_the_api_key_a_verdict_quotes() {
        const VAR: &str = "SERVEGATE_TEST_JUDGE_MASKS_KEY";
        const KEY: &str = "sk-judge-mask-0123456789abcdef";
        std::env::set_var(VAR, KEY);
        let text = GATE.replace(
            "[serve]\ncommand = [\"srv\", \"{port}\"]\n",
            &format!("[serve]\ncommand = [\"srv\", \"{{port}}\"]\napi_key_env = \"{VAR}\"\n"),
        );
        let ctx = crate::spec::Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        let g = crate::spec::parse(std::path::Path::new("g.toml"), &text, &ctx).unwrap();
        let (a, b) = KEY.split_at(10);
        let mut reads: Vec<TimedRead> = ["Your key is ", a, b]
            .iter()
            .enumerate()
            .map(|(i, w)| {
                ev_line(
                    100.0 + 50.0 * i as f64,
                    &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{w}"}}}}]}}"#),
                )
            })
            .collect();
        reads.extend(good().into_iter().skip(4));
        let ev = evidence(Some(1), vec![request(0, &reads, None)]);
        let unmasked = judge_unmasked(&g, &ev, &JudgeInputs::default());
        assert!(
            find(&unmasked, "known_answer").message.contains(KEY),
            "the verdict quotes the reply: {:?}",
            find(&unmasked, "known_answer").message
        );
        let v = judge(&g, &ev);
        let ka = find(&v, "known_answer");
        assert_eq!(ka.outcome, Outcome::Fail);
        assert!(!ka.message.contains(KEY), "{}", ka.message);
        assert!(v.iter().all(|x| !x.message.contains(KEY)));
    }

    #[test]
    fn requests_never_sent_fail_every_assertion_and_are_counted_in_n_of_planned() {
        let ev = evidence(
            Some(4),
            vec![request(0, &good(), None), request(1, &good(), None)],
        );
        let a = account(&ev);
        assert_eq!(
            (a.planned, a.sent, a.never_sent.clone()),
            (4, 2, vec![2, 3])
        );
        assert!(!a.whole());
        let v = judge(&gate(), &ev);
        assert!(v.iter().all(|x| !x.passed()), "{v:#?}");
        assert_eq!(
            find(&v, "rate").message,
            "rate FAIL 2 planned requests never sent: requests 02-03 (the run stopped before sending them) (floor 10.0 tok/s; each: 20.0, 20.0; n=2 of 4 planned)"
        );
        // One value per planned request in the JSON values: None for the two never sent.
        assert_eq!(
            find(&v, "rate").values,
            vec![Some(20.0), Some(20.0), None, None]
        );
        assert!(find(&v, "content")
            .message
            .ends_with("2 planned requests never sent: requests 02-03 (the run stopped before sending them) (n=2 of 4 planned)"));
        assert!(find(&v, "known_answer").message.contains("never sent"));
        // All four sent: everything passes, `n=4 of 4 planned`.
        let ev = evidence(Some(4), (0..4).map(|i| request(i, &good(), None)).collect());
        let v = judge(&gate(), &ev);
        assert!(v.iter().all(|x| x.passed()), "{v:#?}");
        assert_eq!(
            find(&v, "first_token").message,
            "first_token PASS median 100 ms (limit 1000; each: 100, 100, 100, 100; n=4 of 4 planned)"
        );
    }

    #[test]
    fn a_cut_reply_is_a_missing_value_with_its_reason_never_a_median() {
        // Without the rule the cut reply's two fast chunks (20 tok/s here, any rate in general) would count.
        let ev = evidence(
            Some(3),
            vec![
                request(0, &good(), None),
                request(1, &cut(), None),
                request(2, &good(), None),
            ],
        );
        let v = judge(&gate(), &ev);
        assert_eq!(
            find(&v, "rate").message,
            "rate FAIL 1 of 3 replies have no decode rate: request 01 (truncated_stream: no finish_reason, no [DONE]) (floor 10.0 tok/s; each: 20.0, -, 20.0; n=3 of 3 planned)"
        );
        assert_eq!(
            find(&v, "first_token").message,
            "first_token FAIL 1 of 3 replies have no first token: request 01 (truncated_stream: no finish_reason, no [DONE]) (limit 1000 ms; each: 100, -, 100; n=3 of 3 planned)"
        );
        assert!(find(&v, "known_answer")
            .message
            .starts_with("known_answer FAIL request 01: failed reply: truncated_stream"));
        let failed: Vec<(usize, String)> = account(&ev)
            .failed
            .iter()
            .map(|(i, f)| (*i, f.to_string()))
            .collect();
        assert_eq!(
            failed,
            vec![(
                1,
                "truncated_stream: no finish_reason, no [DONE]".to_string()
            )]
        );
    }

    #[test]
    fn a_transport_error_in_the_record_fails_the_request_even_with_a_complete_looking_reply() {
        let mut r = request(1, &good(), None);
        r.record.transport_error = Some("operation timed out".into());
        let ev = evidence(Some(2), vec![request(0, &good(), None), r]);
        assert_eq!(
            request_failure(&ev.requests[1]).as_deref(),
            Some("transport: operation timed out")
        );
        let v = judge(&gate(), &ev);
        assert!(find(&v, "rate")
            .message
            .contains("request 01 (transport: operation timed out)"));
        assert!(find(&v, "content")
            .message
            .contains("request 01: failed reply: transport: operation timed out"));
        assert!(!find(&v, "first_token").passed());
    }

    #[test]
    fn more_judged_requests_than_planned_is_not_a_pass() {
        let ev = evidence(
            Some(1),
            vec![request(0, &good(), None), request(1, &good(), None)],
        );
        let v = judge(&gate(), &ev);
        assert!(find(&v, "rate")
            .message
            .contains("the evidence holds 2 judged requests, more than the 1 planned"));
        assert!(v.iter().all(|x| !x.passed()));
    }

    #[test]
    fn older_evidence_without_a_plan_takes_the_recorded_requests_as_the_plan() {
        let ev = evidence(None, vec![request(0, &good(), None)]);
        let a = account(&ev);
        assert!(!a.plan_recorded);
        assert_eq!((a.planned, a.never_sent.len()), (1, 0));
        let v = judge(&gate(), &ev);
        assert!(find(&v, "rate").message.ends_with("n=1 of 1 planned)"));
    }

    #[test]
    fn a_serve_that_exited_during_the_run_fails_with_its_status_and_log_tail() {
        let mut ev = evidence(
            Some(20),
            vec![
                request(0, &good(), None),
                request(1, &good(), None),
                request(2, &cut(), None),
            ],
        );
        ev.run.serve.failure = Some(
            "server_exited_during_run (exit status 139, 0.4 s after ready): Segmentation fault"
                .into(),
        );
        ev.serve_log = Some("a\nb\nc\nd\ne\nf\nSegmentation fault\n".into());
        let v = judge(&gate(), &ev);
        let rate = &find(&v, "rate").message;
        assert!(
            rate.contains(
                "17 planned requests never sent: requests 03-19 (the serve failed during the run)"
            ),
            "{rate}"
        );
        assert!(rate.contains("n=3 of 20 planned"), "{rate}");
        // The last five non-empty log lines.
        assert!(rate.ends_with("[serve: server_exited_during_run (exit status 139, 0.4 s after ready): Segmentation fault; serve.log ends: \"c\\nd\\ne\\nf\\nSegmentation fault\"]"), "{rate}");
        assert!(v.iter().all(|x| !x.passed()));
    }

    /// The results JSON's bound and unit come from the verdict (`sinks::report::with_figures`), so every
    /// figure verdict carries the declared bound, even one failed before any value was read.
    #[test]
    fn figure_verdicts_carry_their_kind_and_declared_bound_on_every_path() {
        let mut ev = evidence(Some(4), vec![]);
        ev.run.status = RunStatus::Interrupted;
        let complete = evidence(Some(4), (0..4).map(|i| request(i, &good(), None)).collect());
        for ev in [ev, complete] {
            let v = judge(&gate(), &ev);
            let rate = find(&v, "rate");
            assert_eq!(rate.kind, AssertionKind::Rate);
            assert_eq!(
                rate.bound,
                Some(Bound {
                    value: 10.0,
                    unit: crate::vocab::Unit::TokPerS,
                    at_least: true
                })
            );
            let ft = find(&v, "first_token");
            assert_eq!(
                ft.bound.map(|b| (b.value, b.unit.name(), b.at_least)),
                Some((1000.0, "ms", false))
            );
            assert_eq!(find(&v, "content").bound, None);
            assert_eq!(find(&v, "known_answer").kind, AssertionKind::KnownAnswer);
        }
    }

    /// `good()` with its last three chunks 0.1 ms apart (each its own read): a decode window of 0.3 ms,
    /// under the 5 ms minimum, delivered by a client that read them all at once.
    fn short_window() -> Vec<TimedRead> {
        let mut r = good();
        for (i, t) in [(1, 100.1), (2, 100.2), (3, 100.3)] {
            r[i].t_ms = t;
        }
        r
    }

    /// A reply the client could not time (its decode window under the minimum) is not measured, never
    /// slow: the rate passes on the others, says n=5 of 6 measured and names the cause; with too few
    /// measured it is INDETERMINATE, never a pass or a fail; a failed reply still fails.
    #[test]
    fn an_unmeasurable_reply_is_not_a_slow_one() {
        let g = gate();
        let six = |bad: &[usize]| {
            let reqs = (0..6)
                .map(|i| {
                    let reads = if bad.contains(&i) {
                        short_window()
                    } else {
                        good()
                    };
                    request(i, &reads, None)
                })
                .collect();
            judge(&g, &evidence(Some(6), reqs))
        };
        let v = six(&[3]);
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
        assert_eq!(
            r.message,
            "rate PASS median 20.0 tok/s (floor 10.0; each: 20.0, 20.0, 20.0, -, 20.0, 20.0; n=5 of 6 measured; not measured: request 03 (decode window 0.3 ms under the 5 ms minimum))"
        );
        assert_eq!(r.values[3], None);
        assert!(r.message.len() < 300, "{}", r.message.len());
        // Four of six not measured: under half, so undecided.
        let v = six(&[0, 1, 2, 3]);
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
        assert!(
            r.message.starts_with("rate INDETERMINATE too few replies measured for a median (at least half the 6 planned;"),
            "{}",
            r.message
        );
        assert!(r.message.contains("n=2 of 6 measured; not measured: request 00 (decode window 0.3 ms under the 5 ms minimum); request 01"), "{}", r.message);
        assert!(r.message.contains("; and 1 more"), "{}", r.message);
        // Half measured decides.
        assert_eq!(find(&six(&[0, 1, 2]), "rate").outcome, Outcome::Pass);
        // A cut reply fails beside an unmeasured one.
        let mut reqs: Vec<RequestEvidence> = (0..5).map(|i| request(i, &good(), None)).collect();
        reqs.push(request(5, &short_window(), None));
        reqs[1] = request(1, &cut(), None);
        let v = judge(&g, &evidence(Some(6), reqs));
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
        assert!(
            r.message
                .contains("1 of 6 replies have no decode rate: request 01 (truncated_stream"),
            "{}",
            r.message
        );
        assert!(
            r.message
                .contains("not measured: request 05 (decode window"),
            "{}",
            r.message
        );
    }

    /// With `source = "both"`, a reply the client could not time but the serve did is judged on the serve's
    /// figure, and the line says so.
    #[test]
    fn rate_both_judges_an_untimeable_reply_on_the_serves_figure() {
        let mut short = short_window();
        short[4] = good_with_timings(21.0)[4].clone();
        let ev = evidence(
            Some(3),
            vec![
                request(0, &good_with_timings(21.0), None),
                request(1, &short, None),
                request(2, &good_with_timings(21.0), None),
            ],
        );
        let v = judge(&both_gate(""), &ev);
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
        assert!(
            r.message.starts_with("rate PASS client median 20.0 tok/s (floor 10.0; each: 20.0, 21.0, 20.0; n=3 of 3 planned; on the serve's figure (the client could not time it): request 01 (decode window 0.3 ms under the 5 ms minimum))"),
            "{}",
            r.message
        );
        // Client-only: the same reply is not measured.
        let v = judge(&gate(), &ev);
        assert!(find(&v, "rate")
            .message
            .contains("n=2 of 3 measured; not measured: request 01"));
    }

    /// A first token read late together with a later one (kernel-stamped reads, `recv_ms` set) has no
    /// measured TTFT: the first_token verdict judges the others and names the cause; the decode window of
    /// that reply starts at the read's stamp, so its rate stands.
    #[test]
    fn a_first_token_read_late_with_later_ones_has_no_measured_ttft() {
        let stamped = |late: bool| -> Vec<TimedRead> {
            let mut r = good();
            if late {
                // "Paris" and " is" queued while the client was stopped: one read, the later one's stamp.
                let first = r.remove(0);
                r[0].bytes = [first.bytes, r[0].bytes.clone()].concat();
            }
            for x in r.iter_mut() {
                x.recv_ms = Some(x.t_ms + if late { 40.0 } else { 0.1 });
            }
            r
        };
        let reqs = (0..4).map(|i| request(i, &stamped(i == 2), None)).collect();
        let v = judge(&gate(), &evidence(Some(4), reqs));
        let t = find(&v, "first_token");
        assert_eq!(t.outcome, Outcome::Pass, "{}", t.message);
        assert_eq!(
            t.message,
            "first_token PASS median 100 ms (limit 1000; each: 100, 100, -, 100; n=3 of 4 measured; not measured: request 02 (first token arrived with 1 more while the client was not reading (in 0.0-150.0 ms)))"
        );
        let r = find(&v, "rate");
        assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
        // (4 − 2) / (250 − 150) ms = 20 tok/s: the late read's two tokens count as arrived at its stamp.
        assert_eq!(r.values[2], Some(20.0), "{}", r.message);
    }

    /// An untimed prompt is asked for its answer only: known_answer judges it, rate and first_token never
    /// see it, and their counts say so.
    #[test]
    fn an_untimed_prompt_feeds_no_timing_verdict() {
        let text = GATE
            .replace(
                "prompts = [\"What is the capital of France?\"]\nrepeats = 4",
                "prompts = [\"What is the capital of France?\", \"Tell me a story.\"]\nrepeats = 2",
            )
            .replace(
                "[assert.known_answer]\nmatches = \"Paris\"\n",
                "[assert.known_answer]\nmatches = \"Paris\"\nprompt = \"What is the capital of France?\"\nuntimed = true\n",
            );
        let g = gate_text(&text);
        assert_eq!(g.request.untimed, ["What is the capital of France?"]);
        let reqs = (0..4)
            .map(|i| {
                let reads = if i % 2 == 0 { short_window() } else { good() };
                let mut r = request(i, &reads, None);
                if i % 2 == 1 {
                    r.record.prompt = "Tell me a story.".into();
                    r.record.prompt_index = 1;
                }
                r
            })
            .collect();
        let v = judge(&g, &evidence(Some(4), reqs));
        let r = find(&v, "rate");
        assert_eq!(
            r.message,
            "rate PASS median 20.0 tok/s (floor 10.0; each: 20.0, 20.0; n=2 of 2 planned; 2 untimed (answer only))"
        );
        assert_eq!(find(&v, "known_answer").outcome, Outcome::Pass);
    }

    /// `[assert.tpot]`, judge-table style: (case, gate limit, replies sent, planned, the verdict line).
    /// `good()` has TPOT (261 − 100) / (4 − 1) = 53.7 ms.
    #[test]
    fn tpot_table() {
        let one_chunk = || -> Vec<TimedRead> {
            let mut r = good();
            r.drain(1..4);
            r
        };
        type Replies = Vec<Vec<TimedRead>>;
        let cases: Vec<(&str, &str, Replies, usize, &str)> = vec![
            (
                "under the limit",
                "60",
                vec![good(), good(), good()],
                3,
                "tpot PASS median 53.7 ms (limit 60.0; each: 53.7, 53.7, 53.7; n=3 of 3 planned)",
            ),
            (
                "over the limit",
                "50",
                vec![good(), good(), good()],
                3,
                "tpot FAIL median 53.7 ms (limit 50.0; each: 53.7, 53.7, 53.7; n=3 of 3 planned)",
            ),
            (
                "a cut reply is a missing value, never left out of the median",
                "60",
                vec![good(), cut(), good()],
                3,
                "tpot FAIL 1 of 3 replies have no TPOT: request 01 (truncated_stream: no finish_reason, no [DONE]) (limit 60.0 ms; each: 53.7, -, 53.7; n=3 of 3 planned)",
            ),
            (
                "one token chunk has no TPOT: not measured (too few tokens to time), never a failure",
                "60",
                vec![good(), one_chunk()],
                2,
                "tpot PASS median 53.7 ms (limit 60.0; each: 53.7, -; n=1 of 2 measured; not measured: request 01 (one token chunk: no decode window))",
            ),
            (
                "requests never sent",
                "60",
                vec![good(), good()],
                4,
                "tpot FAIL 2 planned requests never sent: requests 02-03 (the run stopped before sending them) (limit 60.0 ms; each: 53.7, 53.7; n=2 of 4 planned)",
            ),
            (
                "no replies at all",
                "60",
                vec![],
                2,
                "tpot FAIL no replies at all: the run holds no judged request: 2 planned requests never sent: requests 00-01 (the run stopped before sending them) (n=0 of 2 planned)",
            ),
        ];
        for (case, limit, replies, planned, want) in cases {
            let toml = format!(
                "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{{port}}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\n[assert.tpot]\nlimit_ms = {limit}\n"
            );
            let ctx = crate::spec::Context {
                gate_dir: "/g".into(),
                cache: "/c".into(),
                home: None,
            };
            let g = crate::spec::parse(std::path::Path::new("g.toml"), &toml, &ctx).unwrap();
            let sent = replies.len();
            let ev = evidence(
                Some(planned),
                replies
                    .iter()
                    .enumerate()
                    .map(|(i, r)| request(i, r, None))
                    .collect(),
            );
            let v = judge(&g, &ev);
            assert_eq!(v.len(), 1, "{case}");
            let t = &v[0];
            assert_eq!(t.message, want, "{case}");
            assert_eq!(t.kind, AssertionKind::Tpot, "{case}");
            assert_eq!(t.passed(), want.starts_with("tpot PASS"), "{case}");
            let lim: f64 = limit.parse().unwrap();
            assert_eq!(
                t.bound,
                Some(Bound {
                    value: lim,
                    unit: crate::vocab::Unit::Ms,
                    at_least: false
                }),
                "{case}"
            );
            if sent > 0 {
                assert_eq!(
                    t.values.len(),
                    planned,
                    "{case}: one value per planned request"
                );
            }
        }
    }

    #[test]
    fn ranges_are_compact() {
        assert_eq!(ranges(&[3]), "request 03");
        assert_eq!(ranges(&[3, 4, 5, 9, 11, 12]), "requests 03-05, 09, 11-12");
    }

    /// What a serve says is outside text: its replies, error bodies, log lines and failure, each holding `::`,
    /// `%0A`, CR, LF, ESC and BEL (and the legacy `##[`), reach every verdict line escaped, each verdict one
    /// line that no CI runner reads as a workflow command.
    #[test]
    fn every_verdict_line_is_one_safe_line_whatever_the_serve_says() {
        const EVIL: &str =
            "\n::stop-commands::z\r::error::fake%0A::add-mask::k\u{1b}[31m\u{7}##[error]legacy";
        let quoted = serde_json::to_string(EVIL).unwrap();
        let reply = |t: f64| {
            vec![
                ev_line(
                    t,
                    &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":{quoted}}}}}]}}"#),
                ),
                ev_line(
                    t + 50.0,
                    &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":{quoted}}}}}]}}"#),
                ),
                ev_line(
                    t + 100.0,
                    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                ),
                TimedRead {
                    recv_ms: None,
                    t_ms: t + 101.0,
                    bytes: b"data: [DONE]\n\n".to_vec(),
                },
            ]
        };
        let error_body = TimedRead {
            recv_ms: None,
            t_ms: 5.0,
            bytes: format!(r#"{{"error":{{"message":{quoted},"code":500}}}}"#).into_bytes(),
        };
        let mut failed = request(2, &[error_body], None);
        failed.record.http_status = Some(500);
        let g = gate_text(&format!(
            "{GATE}[assert.route]\nfast = 'add-mask'\nslow = 'stop-commands'\n"
        ));
        let mut ev = evidence(
            Some(4),
            vec![
                request(0, &reply(100.0), None),
                request(1, &reply(100.0), Some(EVIL)),
                failed,
            ],
        );
        ev.serve_log = Some(format!("{EVIL}\n{EVIL}\n"));
        let v = judge(&g, &ev);
        assert_eq!(v.len(), 5, "{v:?}");
        for x in &v {
            let m = &x.message;
            assert!(!m.chars().any(crate::text::is_unsafe), "{m:?}");
            assert!(!m.contains("##["), "{m:?}");
            assert!(!m.trim_start().starts_with("::"), "{m:?}");
        }
        // The text is there, shown escaped, not dropped.
        let known = &find(&v, "known_answer").message;
        assert!(known.contains("::stop-commands::z"), "{known}");
        let route = &find(&v, "route").message;
        assert!(route.contains("::add-mask::k##\\[error]"), "{route}");
        // And a serve that failed during the run says so with its failure escaped.
        ev.run.serve.failure = Some(format!("server_exited_during_run: {EVIL}"));
        for x in judge(&g, &ev) {
            assert!(
                !x.message.chars().any(crate::text::is_unsafe),
                "{:?}",
                x.message
            );
        }
    }
}
