//! Judging a pair gate on a pair run: `ratio`, `same_answers`, and the per-arm `content` / `known_answer`.

use crate::analysis::measure::{self};
use crate::evidence::RunStatus;
use crate::spec::GateSpec;
use crate::vocab::AssertionKind;

use super::accounting::*;
use super::content::*;
use super::figure::*;
use super::verdict::{Outcome, Verdict};
use super::{drift, redact, regression};

/// Judges a pair gate on a pair run: `ratio` (theirs / ours of the metric's medians, both numbers, the ratio
/// and the order in one line), `same_answers` (every reply of both runtimes to a prompt is the same text),
/// and `content` / `known_answer` over every arm. Like [`judge`], it reads no file (only the API key's
/// variable, to mask it). Every arm is accounted for as a run is ([`account`], the gate's plan; an arm whose run.json states
/// another fails every assertion, [`plan_mismatch`]): a request never sent or
/// failed in any arm is a missing value of `ratio` and fails
/// `same_answers`, and an arm whose serve failed during the run fails every assertion. Messages are masked
/// as [`judge`]'s are.
pub fn judge_pair(gate: &GateSpec, ev: &crate::analysis::PairEvidence) -> Vec<Verdict> {
    let mut verdicts = judge_pair_unmasked(gate, ev);
    redact::mask_verdicts(gate, &mut verdicts);
    verdicts
}

pub(super) fn judge_pair_unmasked(
    gate: &GateSpec,
    ev: &crate::analysis::PairEvidence,
) -> Vec<Verdict> {
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
            } else if let Some(why) = plan_mismatch(gate, e) {
                Some(format!("arm {} ({}): {why}", a.arm, a.role))
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
            AssertionKind::Ratio => {
                let r = gate.assertions.ratio.as_ref().expect("ratio declared");
                judge_ratio(gate, r, name, ev, &accts)
            }
            AssertionKind::FirstTokenRatio => {
                let r = gate
                    .assertions
                    .first_token_ratio
                    .as_ref()
                    .expect("first_token_ratio declared");
                judge_ratio(gate, r, name, ev, &accts)
            }
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
            | AssertionKind::Ready
            | AssertionKind::Memory
            | AssertionKind::Cpu
            | AssertionKind::Drift
            | AssertionKind::Load
            | AssertionKind::Sample
            | AssertionKind::Contract => {
                Verdict::new(name, Outcome::Fail, "not judged in a pair gate")
            }
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

/// A ratio assertion `r` (`[assert.ratio]` or `[assert.first_token_ratio]`, named `kind`) on a pair run.
pub(super) fn judge_ratio(
    gate: &GateSpec,
    r: &crate::spec::RatioAssert,
    kind: AssertionKind,
    ev: &crate::analysis::PairEvidence,
    accts: &[Accounting],
) -> Verdict {
    let unit = match r.metric {
        crate::spec::PairMetric::Decode => crate::analysis::pair::DECODE,
        crate::spec::PairMetric::FirstToken => crate::analysis::pair::FIRST_TOKEN,
    };
    let planned: usize = accts.iter().map(|a| a.planned).sum();
    let mut arms = Vec::new();
    let mut missing = Vec::new();
    let mut all_values: Vec<Option<f64>> = Vec::new();
    let mut sent = 0;
    // The replies that gave a value (a failed one, missing its value, is not counted in the n).
    let mut measured = 0;
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
        measured += fv.measured();
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
        format!("n={measured} of {planned} planned")
    } else {
        format!(
            "n={measured} of {sent} measured; not measured: {}",
            listed(&unmeasured)
        )
    };
    if !missing.is_empty() {
        let mut v = Verdict::new(
            kind,
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
        Err(e) => return Verdict::new(kind, Outcome::Fail, format!("{}: {e} ({n_of})", unit.name)),
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
        kind,
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

pub(super) fn judge_same_answers(
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
