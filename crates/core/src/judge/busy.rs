//! A busy runner is not a slow serve. A rate, TPOT or first-token FAIL on the median is set against the
//! wall time a busy runner took from the serve (`analysis::footprint::busy_runner`: other processes kept
//! at least half the time of the CPUs the serve may run on, and its threads waited on the run queue). Each
//! judged value gets its request's hold given back (the share of the request's time that the serve thread
//! waiting most in it spent runnable without a CPU, `/proc/PID/task/TID/schedstat`): a rate is divided by
//! (1 − hold), a time multiplied by it. When the median of those values would meet the bound, the shortfall
//! is the runner's: INDETERMINATE, naming the hold and that median; the values and median judged stay the
//! measured ones. A FAIL the hold cannot explain stays a FAIL, with the hold said (a median hold under
//! [`MIN_HOLD`] says nothing). A FAIL for missing values,
//! a failed serve or a client-server disagreement is never touched, and nothing here ever passes.
//!
//! Only the run-queue wait is given back: a serve slow for its own reasons (a slow route that burns CPU, a
//! lock, a device, the network) does not wait on the run queue for them, and a serve whose own threads
//! crowd its CPUs (more threads than cores) leaves the others' share under half and is judged as it is.

use crate::analysis::footprint::busy_runner;
use crate::analysis::stats;
use crate::analysis::Evidence;
use crate::judge::verdict::Verdict;
use crate::judge::Outcome;
use crate::spec::GateSpec;
use crate::vocab::NoteKind;

/// The median hold under which nothing is said: 10 % of a request's time, within the noise of a figure.
pub(super) const MIN_HOLD: f64 = 0.10;

/// `v` (a rate, tpot or first_token verdict of a single run) with the busy runner set against it, as the
/// module says.
pub(super) fn excuse(gate: &GateSpec, evidence: &Evidence, v: Verdict) -> Verdict {
    if v.outcome != Outcome::Fail
        || !v.values.iter().any(Option::is_some)
        || v.details.contains(NoteKind::ClientServerDisagree.name())
    {
        return v;
    }
    // The timed judged requests, in send order as the values are; one that failed fails the trial on its
    // own, whatever the runner did. A value the client could not measure (read late) is left out.
    let timed: Vec<_> = evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup && gate.request.timed(&r.record.prompt))
        .collect();
    if timed.len() != v.values.len() || timed.iter().any(|r| r.reply.failure().is_some()) {
        return v;
    }
    let (Some(median), Some(bound)) = (v.median, v.bound) else {
        return v;
    };
    let fails_on_median = if bound.at_least {
        median < bound.value
    } else {
        median > bound.value
    };
    if !fails_on_median {
        return v;
    }
    let Some(busy) = busy_runner(evidence) else {
        return v;
    };
    // Each value with its request's held share of the wall time given back (a rate over (1 − hold) of the
    // time, a time of (1 − hold) of itself).
    let indices: Vec<usize> = timed.iter().map(|r| r.record.index).collect();
    let back: Vec<f64> = v
        .values
        .iter()
        .zip(&indices)
        .filter_map(|(x, i)| x.map(|x| (x, i)))
        .map(|(x, i)| {
            let kept = 1.0 - busy.hold_of(*i);
            if !bound.at_least {
                x * kept
            } else if kept <= 0.0 {
                f64::INFINITY
            } else {
                x / kept
            }
        })
        .collect();
    let Some(given_back) = stats::median(&back) else {
        return v;
    };
    let held = stats::median(
        &v.values
            .iter()
            .zip(&indices)
            .filter(|(x, _)| x.is_some())
            .map(|(_, i)| busy.hold_of(*i))
            .collect::<Vec<_>>(),
    )
    .unwrap_or(busy.held_off);
    let meets = if bound.at_least {
        given_back >= bound.value
    } else {
        given_back <= bound.value
    };
    let d = bound.metric.info().decimals;
    let unit = bound.unit;
    let mut out = v.clone();
    if held < MIN_HOLD {
        return v; // a hold this small is in the noise of any figure: nothing to say either way
    }
    let side = if bound.at_least { "floor" } else { "limit" };
    if meets {
        // The cause and the conclusion first, in one clause: the terminal's verdict line keeps the head.
        let details = format!(
            "busy runner, not a slow serve: median {median:.d$} {unit} would be {given_back:.d$} with each request's wait for a CPU given back (its busiest serve thread waited {:.0} % of it, median), within the {side} {:.d$} (rerun on a quiet runner); {}; {}",
            held * 100.0,
            bound.value,
            busy.describe(),
            v.details,
        );
        out.set(Outcome::Indeterminate, details);
    } else {
        let details = format!(
            "{}; busy runner, yet the serve's own: even with each request's wait for a CPU given back (its busiest serve thread waited {:.0} % of it, median) the median would be {given_back:.d$} {unit}, beyond the {side} {:.d$}; {}",
            v.details,
            held * 100.0,
            bound.value,
            busy.describe()
        );
        out.set(Outcome::Fail, details);
    }
    out
}
