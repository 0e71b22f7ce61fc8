//! `[assert.regression]`: this run's per-request values of a metric against a baseline's, in the three
//! honest states (docs/regression.md). Pure: the baseline's values come in as
//! [`crate::analysis::baseline_values::BaselineValues`], loaded by the caller
//! (`servegate::loaded::regression_input`).
//!
//! Order of the checks: a baseline that cannot be read FAILs; an incomparable one is INCOMPARABLE (the
//! differing fields of what the gate fixes or the machine named, with the bless command that renews it); a
//! baseline that applies at another host load only is NOT-COMPARED (busy runner); a missing candidate value FAILs (as every figure assertion); a confidence the n
//! cannot reach, or a stored baseline with one window, is INDETERMINATE before any test; then the interval of
//! the change (Hodges-Lehmann shift of log values, exact interval; widened by the between-window allowance
//! for a stored baseline) decides: PASS when it lies entirely on the good side of −δ, FAIL when entirely
//! beyond it (a regression, with its size), INDETERMINATE when it straddles (with the n that would likely
//! decide it).
//!
//! Verdict line: `regression FAIL decode median 57.1 vs baseline 84.4 tok/s (-32.3 %, 95 % CI -35.0..-29.1 %;
//! max drop 5 %; n=6 vs 6); stored baseline data/baselines/x (3 windows, between-window allowance ±4.1 %)`. The
//! percentage is the Hodges-Lehmann estimate of the ratio (the median of all candidate / baseline ratios),
//! the centre the interval is built around.
//!
//! A stored baseline's verdict states what the release changed (engine version, numerics settings of the
//! serve log: `the release changed engine_version 1.0.0 → 1.1.0`), as the likely cause of a FAIL; and a run
//! whose whole interval lies more than the margin above the baseline says `stale baseline`: the loss from
//! this run that the baseline could no longer catch, and the bless command that renews it.

use crate::analysis::baseline_values::{BaselineValues, Block};
use crate::analysis::regress::{self, ShiftInterval};
use crate::analysis::stats;
use crate::evidence::comparability::{describe, describe_release};
use crate::spec::RegressionAssert;
use crate::vocab::{AssertionKind, Better};

use super::accounting::{Accounting, Judged};
use super::figure::{cause_of, listed, timed, why_missing, FigureValues};
use super::verdict::{Outcome, Verdict};

/// A number without trailing zeros (`95`, `99.5`, `5`, `2.5`).
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A log ratio as a signed percent change, one decimal: `-32.3`.
fn pct(log_ratio: f64) -> String {
    crate::text::signed((log_ratio.exp() - 1.0) * 100.0, 1)
}

/// The verdict of `[assert.regression]` for a single-serve run.
pub(super) fn judge(
    gate: &crate::spec::GateSpec,
    r: &RegressionAssert,
    judged: &[Judged],
    acct: &Accounting,
    input: Option<&BaselineValues>,
) -> Verdict {
    let k = AssertionKind::Regression;
    let fv = FigureValues::of(
        timed(gate, judged),
        |j| crate::analysis::measure::metric_value(&j.fig, r.metric),
        |j| why_missing(j, r.metric.info().title, false),
        &cause_of(r.metric),
        None,
    )
    .planned_from(Some(gate), acct);
    let mut v = judge_values(r, &fv, acct, input);
    // Replies not measured (or untimed prompts) are stated after the verdict; they are no failure.
    if (!fv.unmeasured.is_empty() || fv.untimed > 0) && fv.failure_head("", acct).is_none() {
        let details = format!("{}; {}", v.details(), fv.n_text());
        v.set(v.outcome, details);
    }
    v.values = fv.planned_values();
    v.median = stats::median(&fv.present());
    debug_assert_eq!(v.kind, k);
    v
}

/// The verdict of a regression whose baseline cannot be compared with (none given, unreadable:
/// FAIL; incomparable: INCOMPARABLE; at another host load only: NOT-COMPARED), or None when there are
/// values to compare (stored windows or interleaved blocks). Shared by the per-request judgement and the
/// per-run footprint one (`judge::footprint`).
pub(super) fn not_compared(
    r: &RegressionAssert,
    input: Option<&BaselineValues>,
) -> Option<Verdict> {
    let k = AssertionKind::Regression;
    let input = match input {
        None => {
            return Some(Verdict::new(
                k,
                Outcome::Fail,
                format!(
                    "no {} baseline was given to the judge (nothing to compare with)",
                    r.baseline.design()
                ),
            ))
        }
        Some(i) => i,
    };
    Some(match input {
        BaselineValues::Unavailable(reason) => Verdict::new(k, Outcome::Fail, reason),
        BaselineValues::Incomparable { why, renew } => {
            let parts: Vec<String> = why
                .iter()
                .map(|(dir, diffs)| format!("{}: {}", dir.display(), describe(diffs)))
                .collect();
            Verdict::new(
                k,
                Outcome::Incomparable,
                format!(
                    "{}; the baseline no longer applies to what the gate fixes or to this machine, so nothing \
                     was compared: renew it with `{renew}` (or on_incomparable = \"skip\")",
                    parts.join(" | ")
                ),
            )
        }
        BaselineValues::NotCompared(busy) => {
            let parts: Vec<String> = busy
                .iter()
                .map(|(dir, d)| format!("{}: {d}", dir.display()))
                .collect();
            Verdict::new(
                k,
                Outcome::NotCompared,
                format!(
                    "busy runner: {}; not compared (a shared runner compares against an interleaved \
                     baseline_serve, which load does not disturb: docs/regression.md)",
                    parts.join(" | ")
                ),
            )
        }
        BaselineValues::Stored { .. } | BaselineValues::Interleaved(_) => return None,
    })
}

fn judge_values(
    r: &RegressionAssert,
    fv: &FigureValues,
    acct: &Accounting,
    input: Option<&BaselineValues>,
) -> Verdict {
    let k = AssertionKind::Regression;
    if let Some(v) = not_compared(r, input) {
        return v;
    }
    let Some(input) = input else {
        return Verdict::new(k, Outcome::Fail, "no baseline was given to the judge");
    };
    match input {
        // Judged by `not_compared` above.
        BaselineValues::Unavailable(_)
        | BaselineValues::Incomparable { .. }
        | BaselineValues::NotCompared(_) => {
            Verdict::new(k, Outcome::Fail, "the baseline was not compared")
        }
        BaselineValues::Stored {
            dir,
            windows,
            load,
            release,
            renew,
        } => {
            if let Some(head) = fv.failure_head(r.metric.info().title, acct) {
                return Verdict::new(
                    k,
                    Outcome::Fail,
                    format!("{head} ({})", acct.n_of(fv.measured())),
                );
            }
            let cand = fv.present();
            // Windows matched by position with this run's requests lose the positions this run did not
            // measure, so that the pairing still holds.
            let dropped: Vec<Vec<f64>>;
            let windows: &[Vec<f64>] = if fv.measured() < fv.values.len()
                && !windows.is_empty()
                && windows.iter().all(|w| w.len() == fv.values.len())
            {
                dropped = windows
                    .iter()
                    .map(|w| {
                        w.iter()
                            .zip(&fv.values)
                            .filter(|(_, c)| c.is_some())
                            .map(|(b, _)| *b)
                            .collect()
                    })
                    .collect();
                &dropped
            } else {
                windows
            };
            let base: Vec<f64> = windows.iter().flatten().copied().collect();
            let design = stored_design(&dir.display().to_string(), windows.len(), *load);
            let stale = Stale {
                renew,
                median: stats::median(&cand).unwrap_or(f64::NAN),
            };
            let mut v = judge_stored(r, &base, windows, &cand, design, Some(&stale));
            if let Some(changed) = describe_release(release) {
                let cause = if v.outcome == Outcome::Fail {
                    format!("likely cause: {changed}")
                } else {
                    changed
                };
                let details = format!("{}; {cause}", v.details());
                v.set(v.outcome, details);
            }
            v
        }
        BaselineValues::Interleaved(blocks) => judge_blocks(r, blocks),
    }
}

/// What the stale-baseline notice needs ([`stale_notice`]): the command that renews the baseline and this
/// run's median of the metric.
struct Stale<'a> {
    renew: &'a str,
    median: f64,
}

/// The `stale baseline` notice of a judged stored comparison, or None: when the whole interval `s` lies more
/// than the margin δ on the good side (for a higher-is-better metric above `ln(1 + δ)`, for a lower-is-better
/// one below `−ln(1 + δ)`), the baseline no longer bounds the serve: it states the loss from this run's
/// median that would still pass (`1 − (1 − δ) / ratio`, or the rise `(1 + δ) / ratio − 1`) and the command
/// that renews it.
fn stale_notice(r: &RegressionAssert, s: &ShiftInterval, st: &Stale) -> Option<String> {
    let d = r.max_drop_pct / 100.0;
    let higher = matches!(r.metric.info().better, Better::Higher);
    let far = if higher {
        s.lo > (1.0 + d).ln()
    } else {
        s.hi < -(1.0 + d).ln()
    };
    if !far {
        return None;
    }
    let ratio = s.estimate.exp();
    let info = r.metric.info();
    let dec = info.decimals;
    let (what, size) = if higher {
        ("loss", (1.0 - (1.0 - d) / ratio) * 100.0)
    } else {
        ("rise", ((1.0 + d) / ratio - 1.0) * 100.0)
    };
    Some(format!(
        "stale baseline: this run is {} % from it, beyond the {} % margin: a {what} of up to {size:.1} % from \
         this run's {:.dec$} {} would still pass; renew it: {}",
        pct(s.estimate),
        trim(r.max_drop_pct),
        st.median,
        info.unit,
        st.renew
    ))
}

/// The verdict of a stored-baseline comparison from values alone (per baseline window, and this run's),
/// with `dir` naming the baseline: the same checks and line as a gate's verdict without its failed-request
/// accounting. For simulations and tools; a gate's verdict comes from `judge::judge_with`.
pub fn judge_stored_values(
    r: &RegressionAssert,
    dir: &str,
    windows: &[Vec<f64>],
    candidate: &[f64],
) -> Verdict {
    let base: Vec<f64> = windows.iter().flatten().copied().collect();
    let design = stored_design(dir, windows.len(), None);
    judge_stored(r, &base, windows, candidate, design, None)
}

/// The start of a stored-baseline verdict's design note, its parenthesis left open for what follows:
/// `stored baseline DIR (4 windows, host load 0.4 per CPU at this run vs 0.3 at the baseline`.
pub(crate) fn stored_design(dir: &str, windows: usize, load: Option<(f64, f64)>) -> String {
    format!(
        "stored baseline {dir} ({windows} window{}{}",
        if windows == 1 { "" } else { "s" },
        load.map(|(run, base)| format!(
            ", host load {run:.1} per CPU at this run vs {base:.1} at the baseline"
        ))
        .unwrap_or_default()
    )
}

/// The verdict of an interleaved comparison from its blocks alone (see [`judge_stored_values`]).
pub fn judge_block_values(r: &RegressionAssert, blocks: &[Block]) -> Verdict {
    judge_blocks(r, blocks)
}

/// The verdict of `[assert.regression]` in a pair run (an interleaved baseline: `baseline_serve`, or a pair
/// gate's `theirs` arm): every arm's per-request values of the metric (a planned request without one FAILs,
/// naming the arm, as `ratio` does), cut into A-B-B-A blocks (`analysis::interleave::blocks`: theirs =
/// baseline, ours = candidate) and judged paired by block ([`judge_block_values`]).
pub(super) fn judge_pair_blocks(
    gate: &crate::spec::GateSpec,
    r: &RegressionAssert,
    ev: &crate::analysis::PairEvidence,
    accts: &[Accounting],
) -> Verdict {
    let k = AssertionKind::Regression;
    let planned: usize = accts.iter().map(|a| a.planned).sum();
    let mut arms = Vec::new();
    let mut missing = Vec::new();
    let mut all_values: Vec<Option<f64>> = Vec::new();
    let mut candidate = Vec::new();
    let mut unmeasured = Vec::new();
    for ((a, e), acct) in ev.summary.arms.iter().zip(&ev.arms).zip(accts) {
        let judged = super::accounting::judged_of(e);
        let fv = FigureValues::of(
            timed(gate, &judged),
            |j| crate::analysis::measure::metric_value(&j.fig, r.metric),
            |j| why_missing(j, r.metric.info().title, false),
            &cause_of(r.metric),
            None,
        )
        .planned_from(Some(gate), acct);
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
        if a.role == crate::vocab::Role::Ours.name() {
            candidate.extend(fv.present());
        }
        arms.push(crate::analysis::pair::ArmValues {
            role: a.role.clone(),
            values: fv.present(),
        });
    }
    let mut v = if !missing.is_empty() {
        Verdict::new(
            k,
            Outcome::Fail,
            format!(
                "{} of {planned} planned requests have no {} value: {} (n={} of {planned} planned)",
                all_values.iter().filter(|v| v.is_none()).count() - unmeasured.len(),
                r.metric.info().title,
                missing.join("; "),
                all_values.iter().filter(|v| v.is_some()).count(),
            ),
        )
    } else {
        match crate::analysis::interleave::blocks(&arms) {
            Ok(bs) => {
                let blocks: Vec<Block> = bs
                    .into_iter()
                    .map(|b| Block {
                        baseline: b.baseline,
                        candidate: b.candidate,
                    })
                    .collect();
                let mut v = judge_blocks(r, &blocks);
                if !unmeasured.is_empty() {
                    let details = format!(
                        "{}; n={} of {} measured; not measured: {}",
                        v.details(),
                        all_values.iter().flatten().count(),
                        all_values.len(),
                        listed(&unmeasured)
                    );
                    v.set(v.outcome, details);
                }
                v
            }
            Err(e) => Verdict::new(
                k,
                Outcome::Fail,
                format!("the pair's arms are not A-B-B-A blocks of baseline (theirs) and candidate (ours): {e}"),
            ),
        }
    };
    v.values = all_values;
    v.median = stats::median(&candidate);
    v
}

/// The interval of a pair's ratio (theirs / ours) from its paired blocks: adjacent arms of the two roles
/// form a block (theirs, ours, ours, theirs: arms 1-2 and 3-4), and within a block the j-th request of one
/// arm is paired with the j-th of the other (the same prompt and repeat): `ln(theirs_j) − ln(ours_j)`, judged
/// as paired differences at 95 % (signed-rank interval of their Walsh averages). Returns the three-state
/// outcome against the bounds and the text for the verdict line, e.g. `95 % CI of the ratio 1.15-1.17x from
/// 6 paired requests in 2 blocks`.
pub fn ratio_interval(
    arms: &[crate::analysis::pair::ArmValues],
    at_least: Option<f64>,
    at_most: Option<f64>,
) -> (Outcome, String) {
    let c = crate::spec::regression::DEFAULT_CONFIDENCE;
    let mut d = Vec::new();
    let mut blocks = 0;
    let mut i = 0;
    while i + 1 < arms.len() {
        let (a, b) = (&arms[i], &arms[i + 1]);
        if a.role == b.role {
            i += 1;
            continue;
        }
        let (theirs, ours) = if a.role == crate::vocab::Role::Theirs.name() {
            (a, b)
        } else {
            (b, a)
        };
        for (t, o) in theirs.values.iter().zip(&ours.values) {
            if *t > 0.0 && *o > 0.0 {
                d.push(t.ln() - o.ln());
            }
        }
        blocks += 1;
        i += 2;
    }
    let n = d.len();
    let what = format!(
        "{n} paired requests in {blocks} block{}",
        if blocks == 1 { "" } else { "s" }
    );
    if !regress::paired_attainable(n, c) {
        return (
            Outcome::Indeterminate,
            format!(
                "confidence {} unattainable with {what}: needs {} paired requests",
                trim(c),
                regress::blocks_needed(c)
            ),
        );
    }
    let s = match regress::shift_paired(&d, c) {
        Ok(s) => s,
        Err(e) => return (Outcome::Fail, e.to_string()),
    };
    let (lo, hi) = (s.lo.exp(), s.hi.exp());
    let inside = at_least.is_none_or(|b| lo >= b) && at_most.is_none_or(|b| hi <= b);
    let outside = at_least.is_some_and(|b| hi < b) || at_most.is_some_and(|b| lo > b);
    let outcome = if inside {
        Outcome::Pass
    } else if outside {
        Outcome::Fail
    } else {
        Outcome::Indeterminate
    };
    let mut text = format!(
        "{} % CI of the ratio {lo:.2}-{hi:.2}x from {what}",
        trim(c * 100.0)
    );
    if outcome == Outcome::Indeterminate {
        text.push_str(": the interval straddles a bound");
    }
    (outcome, text)
}

/// Head of the line: `decode median 57.1 vs baseline 84.4 tok/s`.
fn head(r: &RegressionAssert, cand: &[f64], base: &[f64]) -> String {
    let info = r.metric.info();
    let d = info.decimals;
    format!(
        "{} median {:.d$} vs baseline {:.d$} {}",
        r.label,
        stats::median(cand).unwrap_or(f64::NAN),
        stats::median(base).unwrap_or(f64::NAN),
        info.unit
    )
}

fn max_word(r: &RegressionAssert) -> &'static str {
    match r.metric.info().better {
        Better::Higher => "max drop",
        Better::Lower | Better::Bounded => "max rise",
    }
}

fn positive_logs(v: &[f64]) -> Result<Vec<f64>, f64> {
    v.iter()
        .map(|x| {
            if *x > 0.0 && x.is_finite() {
                Ok(x.ln())
            } else {
                Err(*x)
            }
        })
        .collect()
}

fn judge_stored(
    r: &RegressionAssert,
    base: &[f64],
    windows: &[Vec<f64>],
    cand: &[f64],
    design: String,
    stale: Option<&Stale>,
) -> Verdict {
    let k = AssertionKind::Regression;
    let c = r.confidence;
    let (n, m) = (base.len(), cand.len());
    let n_text = format!("n={m} vs {n}");
    let (Ok(bl), Ok(cl)) = (positive_logs(base), positive_logs(cand)) else {
        return Verdict::new(
            k,
            Outcome::Fail,
            format!(
                "{}: a value is not a number > 0, so no ratio can be formed ({n_text})",
                head(r, cand, base)
            ),
        );
    };
    let matched = m > 0 && !windows.is_empty() && windows.iter().all(|w| w.len() == m);
    if matched {
        return judge_matched(r, base, windows, cand, &cl, n_text, design, stale);
    }
    if !regress::two_sample_attainable(n, m, c) {
        return Verdict::new(
            k,
            Outcome::Indeterminate,
            format!(
                "{}: confidence {} unattainable with {n_text}: needs {} per side (the smallest one-sided p of {m} vs {n} is {:.3}, above {}); {design})",
                head(r, cand, base),
                trim(c),
                regress::per_side_needed(c),
                if n > 0 && m > 0 { regress::mann_whitney_min_p(n, m) } else { 1.0 },
                trim((1.0 - c) / 2.0)
            ),
        );
    }
    let medians: Vec<f64> = windows
        .iter()
        .filter_map(|w| stats::median(w))
        .filter(|x| *x > 0.0)
        .map(f64::ln)
        .collect();
    let Some(a) = regress::window_allowance(&medians, c) else {
        return Verdict::new(
            k,
            Outcome::Indeterminate,
            format!(
                "{}: the baseline has {} window with values: the between-window spread needs at least 2 (requests of one window are not exchangeable with another's; bless more windows); {design})",
                head(r, cand, base),
                medians.len()
            ),
        );
    };
    let s = match regress::shift_two_sample(&bl, &cl, c) {
        Ok(s) => regress::widen(s, a),
        Err(e) => return Verdict::new(k, Outcome::Fail, format!("{}: {e}", head(r, cand, base))),
    };
    let design = format!(
        "{design}, between-window allowance ±{:.1} %)",
        (a.exp() - 1.0) * 100.0
    );
    with_stale(
        decide(r, &s, a, m, head(r, cand, base), n_text, design, "per side"),
        r,
        &s,
        stale,
    )
}

/// `v` with the stale-baseline notice appended when one applies ([`stale_notice`]).
fn with_stale(
    mut v: Verdict,
    r: &RegressionAssert,
    s: &ShiftInterval,
    st: Option<&Stale>,
) -> Verdict {
    if let Some(notice) = st.and_then(|st| stale_notice(r, s, st)) {
        let details = format!("{}; {notice}", v.details());
        v.set(v.outcome, details);
    }
    v
}

/// A stored baseline whose every window has the candidate's count: the requests are matched by position
/// (the same prompt and repeat: the comparability key pins the prompts), each candidate value against the
/// median of its counterparts across the windows, and judged as paired differences (signed-rank interval),
/// widened by the between-window allowance. Pairing removes the prompts' own differences (a short answer
/// decodes at another rate than a long one), which the unpaired comparison counts as noise.
#[allow(clippy::too_many_arguments)]
fn judge_matched(
    r: &RegressionAssert,
    base: &[f64],
    windows: &[Vec<f64>],
    cand: &[f64],
    cl: &[f64],
    n_text: String,
    design: String,
    stale: Option<&Stale>,
) -> Verdict {
    let k = AssertionKind::Regression;
    let c = r.confidence;
    let m = cand.len();
    let mut wl = Vec::new();
    for w in windows {
        match positive_logs(w) {
            Ok(l) => wl.push(l),
            Err(_) => {
                return Verdict::new(
                    k,
                    Outcome::Fail,
                    format!(
                        "{}: a baseline value is not a number > 0 ({n_text})",
                        head(r, cand, base)
                    ),
                )
            }
        }
    }
    let design = format!("{design}, matched by prompt");
    if !regress::paired_attainable(m, c) {
        return Verdict::new(
            k,
            Outcome::Indeterminate,
            format!(
                "{}: confidence {} unattainable with {m} matched requests: needs {} (the smallest one-sided p of {m} is {:.3}, above {}) ({n_text}); {design})",
                head(r, cand, base),
                trim(c),
                regress::blocks_needed(c),
                0.5f64.powi(m as i32),
                trim((1.0 - c) / 2.0)
            ),
        );
    }
    let medians: Vec<f64> = wl.iter().filter_map(|w| stats::median(w)).collect();
    let Some(a) = regress::window_allowance(&medians, c) else {
        return Verdict::new(
            k,
            Outcome::Indeterminate,
            format!(
                "{}: the baseline has {} window: the between-window spread needs at least 2 (requests of one window are not exchangeable with another's; bless more windows) ({n_text}); {design})",
                head(r, cand, base),
                medians.len()
            ),
        );
    };
    let d: Vec<f64> = (0..m)
        .map(|i| {
            let at: Vec<f64> = wl.iter().map(|w| w[i]).collect();
            cl[i] - stats::median(&at).unwrap_or(f64::NAN)
        })
        .collect();
    let s = match regress::shift_paired(&d, c) {
        Ok(s) => regress::widen(s, a),
        Err(e) => return Verdict::new(k, Outcome::Fail, format!("{}: {e}", head(r, cand, base))),
    };
    let design = format!(
        "{design}, between-window allowance ±{:.1} %)",
        (a.exp() - 1.0) * 100.0
    );
    let v = decide(
        r,
        &s,
        a,
        m,
        head(r, cand, base),
        n_text,
        design,
        "matched requests",
    );
    with_stale(v, r, &s, stale)
}

fn judge_blocks(r: &RegressionAssert, blocks: &[Block]) -> Verdict {
    let k = AssertionKind::Regression;
    let c = r.confidence;
    let base: Vec<f64> = blocks.iter().flat_map(|b| b.baseline.clone()).collect();
    let cand: Vec<f64> = blocks.iter().flat_map(|b| b.candidate.clone()).collect();
    let nb = blocks.len();
    let n_text = format!("n={} vs {} in {nb} blocks", cand.len(), base.len());
    let mut d = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let (Ok(bl), Ok(cl)) = (positive_logs(&b.baseline), positive_logs(&b.candidate)) else {
            return Verdict::new(
                k,
                Outcome::Fail,
                format!(
                    "{}: block {} has a value that is not a number > 0 ({n_text})",
                    head(r, &cand, &base),
                    i + 1
                ),
            );
        };
        match (stats::median(&bl), stats::median(&cl)) {
            (Some(b0), Some(c0)) => d.push(c0 - b0),
            _ => {
                return Verdict::new(
                    k,
                    Outcome::Fail,
                    format!(
                        "{}: block {} has no value from the {} ({n_text})",
                        head(r, &cand, &base),
                        i + 1,
                        if bl.is_empty() {
                            "baseline serve"
                        } else {
                            "candidate"
                        }
                    ),
                )
            }
        }
    }
    let design = "interleaved baseline serve, A-B-B-A blocks, paired by block".to_string();
    if !regress::paired_attainable(nb, c) {
        return Verdict::new(
            k,
            Outcome::Indeterminate,
            format!(
                "{}: confidence {} unattainable with {nb} blocks: needs {} blocks (the smallest one-sided p of {nb} blocks is {:.3}, above {}) ({n_text}); {design}",
                head(r, &cand, &base),
                trim(c),
                regress::blocks_needed(c),
                0.5f64.powi(nb as i32),
                trim((1.0 - c) / 2.0)
            ),
        );
    }
    match regress::shift_paired(&d, c) {
        Ok(s) => decide(
            r,
            &s,
            0.0,
            nb,
            head(r, &cand, &base),
            n_text,
            design,
            "blocks",
        ),
        Err(e) => Verdict::new(k, Outcome::Fail, format!("{}: {e}", head(r, &cand, &base))),
    }
}

#[allow(clippy::too_many_arguments)]
fn decide(
    r: &RegressionAssert,
    s: &ShiftInterval,
    allowance: f64,
    n: usize,
    head: String,
    n_text: String,
    design: String,
    n_unit: &str,
) -> Verdict {
    let thr = r.log_threshold();
    let higher = matches!(r.metric.info().better, Better::Higher);
    let (good, bad) = if higher {
        (s.lo > thr, s.hi < thr)
    } else {
        (s.hi < thr, s.lo > thr)
    };
    let body = format!(
        "{head} ({} %, {} % CI {}..{} %; {} {} %; {n_text})",
        pct(s.estimate),
        trim(r.confidence * 100.0),
        pct(s.lo),
        pct(s.hi),
        max_word(r),
        trim(r.max_drop_pct)
    );
    let limit = format!("{} %", pct(thr));
    if good {
        Verdict::new(
            AssertionKind::Regression,
            Outcome::Pass,
            format!("{body}; no regression beyond {limit}; {design}"),
        )
    } else if bad {
        Verdict::new(
            AssertionKind::Regression,
            Outcome::Fail,
            format!(
                "{body}; a regression of {} % (the whole interval is beyond {limit}); {design}",
                pct(s.estimate).trim_start_matches(['+', '-'])
            ),
        )
    } else {
        let decide = match regress::n_to_decide(s, allowance, thr, n) {
            Some(n2) => format!("n≈{n2} {n_unit} would likely decide it"),
            None if allowance > 0.0 => "more requests cannot decide it: the between-window allowance alone reaches the limit (bless more windows, or a wider max drop)".to_string(),
            None => "the estimate sits on the limit: no n is likely to decide it".to_string(),
        };
        Verdict::new(
            AssertionKind::Regression,
            Outcome::Indeterminate,
            format!("{body}; the interval straddles {limit}: {decide}; {design}"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::RegressionBaseline;
    use crate::vocab::Metric;
    use std::path::PathBuf;

    fn assert_(drop: f64) -> RegressionAssert {
        RegressionAssert {
            on_incomparable: Default::default(),
            metric: Metric::DecodeRate,
            label: "decode".into(),
            baseline: RegressionBaseline::Stored(vec![PathBuf::from("b")]),
            max_drop_pct: drop,
            confidence: 0.95,
            blocks: 6,
            max_load_ratio: crate::spec::regression::DEFAULT_MAX_LOAD_RATIO,
        }
    }

    fn stored(r: &RegressionAssert, windows: &[&[f64]], cand: &[f64]) -> Verdict {
        let w: Vec<Vec<f64>> = windows.iter().map(|w| w.to_vec()).collect();
        let base: Vec<f64> = w.iter().flatten().copied().collect();
        judge_stored(
            r,
            &base,
            &w,
            cand,
            "stored baseline b (2 windows".into(),
            None,
        )
    }

    #[test]
    fn a_run_far_above_its_baseline_says_stale_baseline_with_the_loss_it_could_not_catch() {
        let w1 = [40.1, 40.6, 40.3, 40.9, 40.2, 40.5];
        let w2: Vec<f64> = w1.iter().map(|x| x * 1.01).collect();
        let w3: Vec<f64> = w1.iter().map(|x| x * 0.99).collect();
        let w: Vec<Vec<f64>> = vec![w1.to_vec(), w2, w3];
        let base: Vec<f64> = w.iter().flatten().copied().collect();
        let fast: Vec<f64> = w1.iter().map(|x| x * 1.93).collect();
        let st = Stale {
            renew: "servegate bless g.toml --baseline RUN",
            median: stats::median(&fast).unwrap(),
        };
        let r = assert_(50.0);
        let v = judge_stored(
            &r,
            &base,
            &w,
            &fast,
            "stored baseline b (3 windows".into(),
            Some(&st),
        );
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
        let notice = v
            .message
            .split("; stale baseline: ")
            .nth(1)
            .unwrap_or_else(|| panic!("{}", v.message));
        assert!(notice.starts_with("this run is +93."), "{notice}");
        assert!(
            notice.contains("beyond the 50 % margin: a loss of up to 74."),
            "{notice}"
        );
        assert!(
            notice.contains("% from this run's 78.0 tok/s would still pass"),
            "{notice}"
        );
        assert!(
            notice.ends_with("renew it: servegate bless g.toml --baseline RUN"),
            "{notice}"
        );
        // Within the margin above it (+20 % against 50 %): no notice.
        let up: Vec<f64> = w1.iter().map(|x| x * 1.2).collect();
        let v = judge_stored(
            &r,
            &base,
            &w,
            &up,
            "stored baseline b (3 windows".into(),
            Some(&st),
        );
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
        assert!(!v.message.contains("stale"), "{}", v.message);
        // A lower-is-better metric far below its baseline: the rise it could no longer catch.
        let mut lat = assert_(50.0);
        lat.metric = Metric::Ttft;
        let quick: Vec<f64> = w1.iter().map(|x| x / 2.0).collect();
        let st = Stale {
            renew: "R",
            median: stats::median(&quick).unwrap(),
        };
        let v = judge_stored(
            &lat,
            &base,
            &w,
            &quick,
            "stored baseline b (3 windows".into(),
            Some(&st),
        );
        assert!(
            v.message
                .contains("stale baseline: this run is -50.0 % from it"),
            "{}",
            v.message
        );
        assert!(
            v.message.contains("a rise of up to 200.0 %"),
            "{}",
            v.message
        );
    }

    #[test]
    fn the_issue_line_a_large_drop_fails_with_its_size() {
        let w1 = [84.0, 85.1, 83.9];
        let w2 = [84.6, 84.2, 85.0];
        let cand = [57.1, 57.3, 56.8, 57.2, 57.1, 56.9];
        let v = stored(&assert_(5.0), &[&w1, &w2], &cand);
        assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
        assert!(
            v.message
                .starts_with("regression FAIL decode median 57.1 vs baseline 84.4 tok/s (-32."),
            "{}",
            v.message
        );
        assert!(v.message.contains("95 % CI -3"), "{}", v.message);
        assert!(
            v.message
                .contains("; max drop 5 %; n=6 vs 6); a regression of 32."),
            "{}",
            v.message
        );
    }

    #[test]
    fn the_same_speed_passes_and_a_small_change_within_delta_passes() {
        let w1 = [84.0, 85.1, 83.9];
        let w2 = [84.6, 84.2, 85.0];
        let same = [84.1, 84.9, 84.3, 85.2, 83.8, 84.5];
        // Two windows: t(0.975, 1) = 12.7 makes the allowance wide (±8.1 % here): δ = 5 % cannot be decided,
        // δ = 10 % can.
        let v = stored(&assert_(5.0), &[&w1, &w2], &same);
        assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
        let v = stored(&assert_(10.0), &[&w1, &w2], &same);
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
        assert!(
            v.message.contains("no regression beyond -10.0 %"),
            "{}",
            v.message
        );
        let slower: Vec<f64> = same.iter().map(|x| x * 0.97).collect();
        let w3 = [84.3, 84.8, 84.0];
        let w = [&w1[..], &w2, &w3];
        let v = stored(&assert_(5.0), &w, &slower);
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    }

    #[test]
    fn matched_requests_see_a_small_change_through_the_prompts_own_spread() {
        // Three prompts decode at very different rates (short and long answers); the windows agree closely.
        let w1 = vec![20.8, 18.2, 10.4, 15.2, 21.4, 18.5];
        let w2: Vec<f64> = w1.iter().map(|x| x * 1.004).collect();
        let w3: Vec<f64> = w1.iter().map(|x| x * 0.997).collect();
        let slower: Vec<f64> = w1.iter().map(|x| x * 0.97).collect();
        let r = assert_(5.0);
        let v = judge_stored_values(&r, "b", &[w1.clone(), w2.clone(), w3.clone()], &slower);
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
        assert!(
            v.message.contains("(-3.0 %, 95 % CI -4.7..-1.3 %"),
            "{}",
            v.message
        );
        assert!(v.message.contains("matched by prompt"), "{}", v.message);
        let slow: Vec<f64> = w1.iter().map(|x| x * 0.7).collect();
        let v = judge_stored_values(&r, "b", &[w1.clone(), w2.clone(), w3.clone()], &slow);
        assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
        assert!(
            v.message.contains("a regression of 30.0 %"),
            "{}",
            v.message
        );
        // Unpaired, the same values cannot see 3 %: the prompts' spread swamps it.
        let v = judge_stored_values(&r, "b", &[w1.clone(), w2, w3], &slower[..5]);
        assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
    }

    #[test]
    fn the_seed_pairs_ratio_interval_from_six_paired_requests() {
        use crate::analysis::pair::ArmValues;
        let arm = |role: &str, v: &[f64]| ArmValues {
            role: role.into(),
            values: v.to_vec(),
        };
        // The first user's A-B-B-A pair (analysis::pair tests): 3 per arm, 2 blocks, 6 pairs.
        let arms = [
            arm("theirs", &[45.08, 45.43, 45.62]),
            arm("ours", &[39.22, 39.276, 39.278]),
            arm("ours", &[39.20, 39.226, 39.316]),
            arm("theirs", &[45.52, 45.91, 45.93]),
        ];
        let (o, text) = ratio_interval(&arms, Some(0.5), Some(2.0));
        assert_eq!(o, Outcome::Pass, "{text}");
        // 6 pairs at 95 %: k = 1, the smallest and largest pair ratio: 45.08/39.22 = 1.149, 45.93/39.316 = 1.168.
        assert_eq!(
            text,
            "95 % CI of the ratio 1.15-1.17x from 6 paired requests in 2 blocks"
        );
        let (o, _) = ratio_interval(&arms, Some(1.16), None);
        assert_eq!(o, Outcome::Indeterminate);
        let (o, _) = ratio_interval(&arms, Some(1.2), None);
        assert_eq!(o, Outcome::Fail);
        let (o, text) = ratio_interval(&arms[..2], Some(0.5), None);
        assert_eq!(o, Outcome::Indeterminate);
        assert!(
            text.contains("unattainable with 3 paired requests in 1 block"),
            "{text}"
        );
    }

    #[test]
    fn two_against_two_is_unattainable_before_any_test() {
        let v = stored(&assert_(5.0), &[&[84.0], &[85.0]], &[50.0, 51.0]);
        assert_eq!(v.outcome, Outcome::Indeterminate);
        assert!(
            v.message
                .contains("confidence 0.95 unattainable with n=2 vs 2: needs 4 per side"),
            "{}",
            v.message
        );
    }

    #[test]
    fn a_noisy_baseline_straddles_and_names_what_would_decide() {
        let v = stored(
            &assert_(5.0),
            &[&[60.0, 62.0, 61.0], &[80.0, 82.0, 81.0]],
            &[68.0, 69.0, 70.0, 67.0],
        );
        assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
        assert!(v.message.contains("straddles -5.0 %"), "{}", v.message);
        assert!(v.message.contains("bless more windows"), "{}", v.message);
    }

    #[test]
    fn blocks_decide_by_their_paired_ratio_and_need_six() {
        let mk = |f: f64, n: usize| -> Vec<Block> {
            (0..n)
                .map(|i| {
                    let load = 1.0 + 0.3 * (i as f64 % 3.0); // the machine's load moves both sides
                    Block {
                        baseline: vec![80.0 / load, 81.0 / load],
                        candidate: vec![80.0 * f / load, 80.5 * f / load],
                    }
                })
                .collect()
        };
        let r = RegressionAssert {
            on_incomparable: Default::default(),
            baseline: RegressionBaseline::Serve(crate::spec::BaselineServe {
                command: vec!["x".into()],
                ..Default::default()
            }),
            ..assert_(5.0)
        };
        assert_eq!(judge_blocks(&r, &mk(1.0, 6)).outcome, Outcome::Pass);
        let v = judge_blocks(&r, &mk(0.6, 6));
        assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
        assert!(v.message.contains("in 6 blocks"), "{}", v.message);
        let v = judge_blocks(&r, &mk(0.6, 5));
        assert_eq!(v.outcome, Outcome::Indeterminate);
        assert!(v.message.contains("needs 6 blocks"), "{}", v.message);
    }

    #[test]
    fn a_lower_is_better_metric_regresses_upwards() {
        let r = RegressionAssert {
            on_incomparable: Default::default(),
            metric: Metric::Ttft,
            label: "first_token".into(),
            ..assert_(5.0)
        };
        let v = stored(
            &r,
            &[&[100.0, 101.0, 99.0], &[100.5, 100.2, 99.5]],
            &[140.0, 141.0, 139.0, 140.5],
        );
        assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
        assert!(v.message.contains("max rise 5 %"), "{}", v.message);
        assert!(v.message.contains("(+40."), "{}", v.message);
    }
}
