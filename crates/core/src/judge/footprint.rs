//! The serve's footprint (`ready`, `memory`, `cpu`): one value per run against the gate's limit, each from
//! `analysis::footprint` (`run.json` `serve.ready_ms` and `serve.footprint`, measured by the runner,
//! docs/metrics.md "The serve's footprint"). A figure the evidence does not hold (a `url` serve servegate
//! did not start, a kernel that gave nothing, older evidence) is INDETERMINATE with the reason, never read as
//! 0. Where the figure is known only within bounds (memory over several processes: the sampled lower bound
//! and the sum of high-water marks; CPU: the counters' tick per process), a limit inside those bounds is
//! INDETERMINATE.

use crate::analysis::footprint as fp;
use crate::analysis::Evidence;
use crate::evidence::footprint::Footprint;
use crate::spec::GateSpec;
use crate::text::shown;
use crate::vocab::{AssertionKind, Metric};

use super::verdict::{Outcome, Verdict};

/// The footprint trial `kind` (`ready`, `memory` or `cpu`; any other kind is not one: FAIL saying so).
pub(super) fn judge(kind: AssertionKind, gate: &GateSpec, evidence: &Evidence) -> Verdict {
    match kind {
        AssertionKind::Ready => judge_ready(gate, evidence),
        AssertionKind::Memory => judge_memory(gate, evidence),
        AssertionKind::Cpu => judge_cpu(gate, evidence),
        AssertionKind::Route
        | AssertionKind::Rate
        | AssertionKind::FirstToken
        | AssertionKind::Tpot
        | AssertionKind::Content
        | AssertionKind::KnownAnswer
        | AssertionKind::Ratio
        | AssertionKind::FirstTokenRatio
        | AssertionKind::SameAnswers
        | AssertionKind::Drift
        | AssertionKind::Load
        | AssertionKind::Regression
        | AssertionKind::Sample
        | AssertionKind::Contract => Verdict::new(kind, Outcome::Fail, "not a footprint assertion"),
    }
}

/// The figure's value formatted with its metric's decimals.
fn fmt(m: Metric, v: f64) -> String {
    let d = m.info().decimals;
    format!("{v:.d$}")
}

/// A verdict carrying its one value.
fn with_value(kind: AssertionKind, outcome: Outcome, details: String, value: f64) -> Verdict {
    let mut v = Verdict::new(kind, outcome, details);
    v.values = vec![Some(value)];
    v.median = Some(value);
    v
}

/// INDETERMINATE for want of the figure: `why` and `n=0 of 1`.
fn missing(kind: AssertionKind, why: String) -> Verdict {
    Verdict::new(kind, Outcome::Indeterminate, format!("{why} (n=0 of 1)"))
}

/// `[assert.ready]`: `run.json` `serve.ready_ms` at most the limit.
fn judge_ready(gate: &GateSpec, evidence: &Evidence) -> Verdict {
    let kind = AssertionKind::Ready;
    let m = Metric::ReadyMs;
    let ready = gate.assertions.ready.as_ref();
    let limit = ready.map_or(0.0, |r| r.limit_ms);
    // The model-load time the serve logged, beside the outside figure (only when the gate names a pattern).
    let logged = match ready.and_then(|r| r.load_log.as_ref()) {
        None => String::new(),
        Some(re) => match fp::model_load_ms(evidence, Some(re)) {
            Ok(v) => format!("; the serve logged model load {} ms", fmt(m, v)),
            Err(why) => format!("; {why}"),
        },
    };
    let ms = match fp::ready_ms(evidence) {
        Ok(ms) => ms,
        Err(why) => return missing(kind, format!("{why}{logged}")),
    };
    let outcome = if ms <= limit {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    let changes = evidence.run.serve.ready_timeline.len();
    with_value(
        kind,
        outcome,
        format!(
            "{} ms from spawn to the first 200 on the ready path (limit {}; {changes} readiness state change(s); n=1 of 1 start){logged}",
            fmt(m, ms),
            fmt(m, limit)
        ),
        ms,
    )
}

/// `pid 12 servegate (leader) 182.2` for each covered process.
fn processes(f: &Footprint) -> String {
    f.processes
        .iter()
        .map(|p| {
            format!(
                "pid {} {} ({}) {:.1}",
                p.pid,
                shown(&p.name),
                shown(&p.how),
                p.hwm_mib
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `[assert.memory]`: the peak resident memory at most the limit. With several processes the stated peak is
/// an upper bound and the largest sampled sum a lower one: PASS when the upper bound is within the limit,
/// FAIL when the lower bound is over it, INDETERMINATE between.
fn judge_memory(gate: &GateSpec, evidence: &Evidence) -> Verdict {
    let kind = AssertionKind::Memory;
    let m = Metric::ServeRssPeak;
    let limit = gate.assertions.memory.as_ref().map_or(0.0, |a| a.limit_mib);
    let peak = match fp::rss_peak_mib(evidence) {
        Ok(p) => p,
        Err(why) => return missing(kind, why),
    };
    let Ok(f) = fp::footprint(evidence, "peak memory") else {
        return missing(kind, "no peak memory".into());
    };
    let lower = f.rss_sampled_mib.unwrap_or(0.0).min(peak);
    let exact = f.processes.len() <= 1;
    let outcome = if peak <= limit {
        Outcome::Pass
    } else if exact || lower > limit {
        Outcome::Fail
    } else {
        Outcome::Indeterminate
    };
    let bound = if exact {
        "one process, its own high-water mark".to_string()
    } else {
        format!(
            "upper bound: the sum of {} processes' high-water marks; sampled lower bound {} MiB",
            f.processes.len(),
            fmt(m, lower)
        )
    };
    let between = if outcome == Outcome::Indeterminate {
        "; the limit lies between the bounds: the processes' peaks may or may not have coincided"
    } else {
        ""
    };
    with_value(
        kind,
        outcome,
        format!(
            "peak {} MiB (limit {}; {bound}{between}; processes: {}{}; {} samples every {} ms; n=1 of 1 run)",
            fmt(m, peak),
            fmt(m, limit),
            processes(f),
            f.attached
                .as_deref()
                .map(|a| format!(" ({}, a url serve)", shown(a)))
                .unwrap_or_default(),
            f.samples,
            f.sample_every_ms
        ),
        peak,
    )
}

/// `[assert.cpu]`: the serve's CPU over the judged window per completion token of the judged requests in
/// it, at most the limit. The counters tick per process (10 ms at 100 Hz), so the CPU is known within one
/// tick per process read: a limit inside that interval is INDETERMINATE.
fn judge_cpu(gate: &GateSpec, evidence: &Evidence) -> Verdict {
    let kind = AssertionKind::Cpu;
    let m = Metric::ServeCpuPerToken;
    let limit = gate
        .assertions
        .cpu
        .as_ref()
        .map_or(0.0, |c| c.limit_ms_per_token);
    let c = match fp::cpu_per_token(evidence) {
        Ok(c) => c,
        Err(why) => return missing(kind, why),
    };
    let outcome = if c.hi <= limit {
        Outcome::Pass
    } else if c.lo > limit {
        Outcome::Fail
    } else {
        Outcome::Indeterminate
    };
    let w = &c.window;
    let tick_ms = 1000.0 / w.clk_tck.max(1) as f64;
    let between = if outcome == Outcome::Indeterminate {
        format!(
            "; within the counters' resolution ({}-{} ms/token: one {tick_ms:.0} ms tick per process) the limit cannot be decided: more requests or max_tokens would",
            fmt(m, c.lo),
            fmt(m, c.hi)
        )
    } else {
        String::new()
    };
    let est = if c.estimated.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = c.estimated.iter().map(|i| format!("{i:02}")).collect();
        format!(
            "; token-chunk counts for request(s) {} (no usage from the serve)",
            list.join(", ")
        )
    };
    let cores = if w.wall_ms > 0.0 {
        w.cpu_ms / w.wall_ms
    } else {
        0.0
    };
    with_value(
        kind,
        outcome,
        format!(
            "{} ms/token (limit {}; {:.0} ms CPU over {} completion tokens of requests {:02}-{:02}; wall {:.0} ms, {cores:.2} cores busy; {} process(es){between}{est}; n={} judged requests)",
            fmt(m, c.per_token),
            fmt(m, limit),
            w.cpu_ms,
            c.tokens,
            w.first_index,
            w.last_index,
            w.wall_ms,
            w.pids_start.max(w.pids_end),
            c.requests
        ),
        c.per_token,
    )
}

/// `[assert.regression]` on a per-run footprint metric ([`Metric::per_run`]): this run's one value against
/// the stored baseline's windows, one value each. The windows' range is the between-run spread of the
/// baseline; the change is stated as an interval against both ends of it, and decided in three states: PASS
/// when even against the best window the value is within the allowed change δ (`max_drop_pct`: for a
/// lower-is-better figure, at most `1 + δ` times it), FAIL when even against the worst window it is beyond
/// δ, INDETERMINATE between (the baseline's own spread cannot tell). At least two windows are needed.
pub(super) fn judge_regression(
    r: &crate::spec::RegressionAssert,
    evidence: &Evidence,
    input: Option<&crate::analysis::baseline_values::BaselineValues>,
) -> Verdict {
    use crate::analysis::baseline_values::BaselineValues;
    let kind = AssertionKind::Regression;
    let m = r.metric;
    let unit = m.info().unit;
    if let Some(v) = super::regression::not_compared(r, input) {
        return v;
    }
    let Some(BaselineValues::Stored {
        dir,
        windows,
        load,
        release,
        ..
    }) = input
    else {
        return Verdict::new(
            kind,
            Outcome::Fail,
            format!(
                "{} is one value per run: it is compared with stored baseline windows only",
                r.label
            ),
        );
    };
    let cand = match fp::run_value(evidence, m) {
        Ok(v) => v,
        Err(why) => return missing(kind, why),
    };
    let base: Vec<f64> = windows
        .iter()
        .flatten()
        .copied()
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    let design = format!(
        "{})",
        super::regression::stored_design(&dir.display().to_string(), windows.len(), *load)
    );
    if base.len() < 2 {
        let mut v = Verdict::new(
            kind,
            Outcome::Indeterminate,
            format!(
                "{} {} {unit}: the baseline has {} window(s) with this figure, and its between-run spread needs at least 2 (bless more windows, from runs that measured the footprint); {design}",
                r.label,
                fmt(m, cand),
                base.len()
            ),
        );
        v.values = vec![Some(cand)];
        v.median = Some(cand);
        return v;
    }
    let lo = base.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = base.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let d = r.max_drop_pct / 100.0;
    let higher = m.info().better == crate::vocab::Better::Higher;
    // The change against each end of the baseline's spread, as a fraction (+ is more).
    let (vs_hi, vs_lo) = (cand / hi - 1.0, cand / lo - 1.0);
    let outcome = if higher {
        if cand >= hi * (1.0 - d) {
            Outcome::Pass
        } else if cand < lo * (1.0 - d) {
            Outcome::Fail
        } else {
            Outcome::Indeterminate
        }
    } else if cand <= lo * (1.0 + d) {
        Outcome::Pass
    } else if cand > hi * (1.0 + d) {
        Outcome::Fail
    } else {
        Outcome::Indeterminate
    };
    let allowed = if higher { "max drop" } else { "max rise" };
    let between = if outcome == Outcome::Indeterminate {
        "; within the baseline's own spread the change cannot be decided: bless windows from quieter runs, or a wider δ"
    } else {
        ""
    };
    let mut details = format!(
        "{} {} {unit} vs the baseline's {}-{} {unit} ({} % to {} %; {allowed} {} %{between}; n=1 run vs {} windows); {design}",
        r.label,
        fmt(m, cand),
        fmt(m, lo),
        fmt(m, hi),
        crate::text::signed(vs_hi * 100.0, 1),
        crate::text::signed(vs_lo * 100.0, 1),
        r.max_drop_pct,
        base.len()
    );
    if let Some(changed) = crate::evidence::comparability::describe_release(release) {
        details.push_str(&if outcome == Outcome::Fail {
            format!("; likely cause: {changed}")
        } else {
            format!("; {changed}")
        });
    }
    with_value(kind, outcome, details, cand)
}
