//! Judging: a function of (gate spec, evidence) to verdicts, one per declared assertion. Judging reads no
//! file, starts nothing and keeps no clock, so any recorded run can be re-judged anywhere (`servegate judge`).
//! The one thing it reads besides its arguments is the environment variable the gate names as its API key
//! (`serve.api_key_env`), to mask the key in verdict messages ([`redact::mask_verdicts`]); the verdicts are
//! the same with or without it but for that mask.
//! What it judges is loaded by the caller (`servegate::loaded`: the run, its baselines, a load run's points); the
//! runner masks the API key in the serve's own files after a run (`run::scrub`, each file by
//! [`redact::scrub_file`]).
//!
//! Verdict messages show every value and n of N planned: `rate FAIL median 50.0 tok/s (floor 60.0; each:
//! 53.3, 46.4, 50.0; n=3 of 3 planned)`. Medians, never means (`stats::median`). Nothing passes without
//! evidence: a log that names no route fails, a reply without timings fails the rate, no replies at all fail
//! everything, and every planned request is accounted for ([`account`]): one never sent, or sent and failed,
//! is a missing value that fails every figure assertion, never a median left to the others.

mod accounting;
mod busy;
mod content;
pub mod contract;
mod drift;
mod figure;
mod footprint;
pub mod load;
pub mod max_tokens;
pub mod outcome;
mod pair;
pub mod parity;
pub mod redact;
pub mod regression;
mod route;
mod sample;
pub mod serve_clock;
#[cfg(test)]
mod tests;
mod verdict;

pub use crate::text::{strip_escapes, strip_escapes_counted};
pub use accounting::{
    account, gate_planned, plan_mismatch, request_failure, Accounting, EXIT_LOG_LINES,
};
pub use content::{content_problem, reply_problem, ProblemKind};
pub use figure::{declared_bound, MIN_MEASURED_SHARE};
pub use pair::judge_pair;
pub use verdict::{Outcome, Verdict};

pub use outcome::RunOutcome;

use crate::analysis::Evidence;
use crate::evidence::RunStatus;
use crate::spec::GateSpec;
use crate::vocab::{AssertionKind, FailureCode};

use accounting::{fail_for_serve, judged_of, no_replies, Judged};
use content::{judge_content, judge_known_answer};
use figure::{cold_note, judge_first_token, judge_rate, judge_tpot, with_floor_hint};
use route::judge_route;

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

/// Judges every declared assertion of `gate` on `evidence`, in the order of `Assertions::names`.
///
/// Every planned request is accounted for ([`account`], once [`plan_mismatch`] has found the plan the
/// gate's, `repeats × prompts`):
/// a request never sent, or sent and failed ([`request_failure`]), is a missing value of every figure
/// assertion (shown as `-` with its reason) and a failure of `content` and `known_answer`; lines say
/// `n=K of N planned`, N the gate's. A run.json stating another plan fails every assertion
/// ([`plan_mismatch`]). A serve that failed during the run
/// fails every assertion but `route`, naming its exit and the end of its log.
///
/// Masking is part of judging: the gate's API key (its `serve.api_key_env`, when set) is masked in every
/// message ([`redact::mask_verdicts`]), so no caller can forget it; outcomes never depend on it.
pub fn judge(gate: &GateSpec, evidence: &Evidence) -> Vec<Verdict> {
    judge_with(gate, evidence, &JudgeInputs::default())
}

/// What judging needs besides the gate and the run's evidence, loaded by the caller (the judge reads no
/// file): the baseline values of `[assert.regression]` (`servegate::loaded::regression_input`) and the stored
/// baselines of `[assert.drift]` (each by `servegate::loaded::load_baseline`: the one path rule and loader,
/// `evidence::baseline`). The runner, the harness and `servegate judge` load them with
/// `servegate::loaded::judge_inputs`. Without them a declared regression or drift FAILs for want of a baseline.
#[derive(Debug, Clone, Default)]
pub struct JudgeInputs {
    /// The baseline side of `[assert.regression]`, when the gate declares one.
    pub regression: Option<crate::analysis::baseline_values::BaselineValues>,
    /// The stored baselines `[assert.drift]` names, in the gate's order.
    pub drift: Vec<crate::analysis::BaselineSlot>,
    /// The `[contract]` checks' evidence (`contract/` of the run directory), or why it could not be read;
    /// None when the gate has no `[contract]` (or the caller loaded none: every check then FAILs).
    pub contract: Option<Result<crate::analysis::contract::ContractEvidence, String>>,
}

/// [`judge`] with the inputs regression and drift need ([`JudgeInputs`]). Like [`judge`], it reads no file
/// (only the API key's variable, to mask it: module doc).
pub fn judge_with(gate: &GateSpec, evidence: &Evidence, inputs: &JudgeInputs) -> Vec<Verdict> {
    let mut verdicts = judge_unmasked(gate, evidence, inputs);
    for v in &mut verdicts {
        v.bound = declared_bound(gate, v.kind);
    }
    redact::mask_verdicts(gate, &mut verdicts);
    verdicts
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
    } else if let Some(why) = accounting::plan_mismatch(gate, evidence) {
        // The plan is the gate's: a run.json stating another never passes on the requests it holds.
        Some(why)
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
        let mut out: Vec<Verdict> = names
            .iter()
            .map(|n| Verdict::new(*n, Outcome::Fail, &reason))
            .collect();
        out.extend(contract::judge_contract(
            gate,
            evidence,
            inputs.contract.as_ref(),
            Some(&reason),
        ));
        out.extend(sample::judge_samples(gate, evidence, Some(&reason)));
        return out;
    }
    let mut judged = judged_of(evidence);
    with_serve_log(gate, evidence, &mut judged);
    for j in judged.iter_mut() {
        let over = max_tokens::over_max_tokens(&j.ev.reply, &j.fig, gate.request.max_tokens);
        j.fig.warnings.extend(over);
    }
    let acct = accounting::account(evidence);
    let mut out = Vec::new();
    for name in names {
        let v = match name {
            AssertionKind::Route => judge_route(gate, evidence, &acct),
            AssertionKind::Rate
            | AssertionKind::FirstToken
            | AssertionKind::Tpot
            | AssertionKind::Content
            | AssertionKind::KnownAnswer => {
                let v = judge_request_assertion(name, gate, &judged, &acct);
                match name {
                    AssertionKind::Rate | AssertionKind::FirstToken | AssertionKind::Tpot
                        if acct.serve_failure.is_none() =>
                    {
                        busy::excuse(gate, evidence, v)
                    }
                    _ => v,
                }
            }
            AssertionKind::Ready | AssertionKind::Memory | AssertionKind::Cpu => {
                let mut v = footprint::judge(name, gate, evidence);
                if let Some(f) = &acct.serve_failure {
                    fail_for_serve(&mut v, f, acct.serve_failure_code);
                }
                v
            }
            AssertionKind::Drift => {
                let mut v = drift::judge_drift(gate, evidence, &inputs.drift);
                if let Some(f) = &acct.serve_failure {
                    fail_for_serve(&mut v, f, acct.serve_failure_code);
                }
                v
            }
            // Pair assertions are judged by `judge_pair`; spec validation refuses them in a single gate.
            AssertionKind::Ratio | AssertionKind::FirstTokenRatio | AssertionKind::SameAnswers => {
                Verdict::new(
                    name,
                    Outcome::Fail,
                    "not judged in a single gate (it needs a [pair])",
                )
            }
            AssertionKind::Load => continue, // judged per sweep point by `load::judge_points`
            AssertionKind::Contract => continue, // judged per check below
            AssertionKind::Sample => continue, // judged per sampler below

            AssertionKind::Regression => {
                let r = gate
                    .assertions
                    .regression
                    .as_ref()
                    .expect("regression declared");
                let mut v = if r.metric.per_run() {
                    footprint::judge_regression(r, evidence, inputs.regression.as_ref())
                } else if judged.is_empty() {
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
    out.extend(contract::judge_contract(
        gate,
        evidence,
        inputs.contract.as_ref(),
        None,
    ));
    out.extend(sample::judge_samples(gate, evidence, None));
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
        | AssertionKind::Ready
        | AssertionKind::Memory
        | AssertionKind::Cpu
        | AssertionKind::Ratio
        | AssertionKind::FirstTokenRatio
        | AssertionKind::SameAnswers
        | AssertionKind::Drift
        | AssertionKind::Load
        | AssertionKind::Regression
        | AssertionKind::Sample
        | AssertionKind::Contract => {
            Verdict::new(name, Outcome::Fail, "not a per-request assertion")
        }
    };
    // A cold first request is said where its TTFT is judged (else beside the rate): the median hides it.
    let cold_here = match name {
        AssertionKind::FirstToken => true,
        AssertionKind::Rate => gate.assertions.first_token.is_none(),
        _ => false,
    };
    if let Some(note) = cold_here.then(|| cold_note(gate, judged, acct)).flatten() {
        let details = format!("{}; {note}", v.details());
        v.set(v.outcome, details);
    }
    if let Some(f) = &acct.serve_failure {
        fail_for_serve(&mut v, f, acct.serve_failure_code);
    }
    v
}
