//! The baseline values a regression verdict compares with (pure). They are loaded in ONE place: the runner,
//! the test harness and `servegate judge` all call `servegate::loaded::regression_input` (which reads the
//! directories and calls [`choose_stored`], [`window_values`] and [`stored_values`]) and hand its result to
//! `judge::judge_with`, which stays pure.
//!
//! * A **stored** baseline (`baseline = "DIR"` / `baselines = [...]`): each directory is read with
//!   `evidence::baseline::load_named` (the one path rule of stored baselines, `evidence::baseline::resolve`:
//!   the gate file's directory and its ancestors, then the current directory); one whose comparability key equals this run's (for speed: the host
//!   counts) and whose host load per CPU is within `max_load_ratio` of this run's is chosen, the nearest in
//!   load (`evidence::baseline::choose`), and each of its windows is read with
//!   `servegate::loaded::load` like any evidence: the per-request values of the metric of its judged
//!   (non-warmup) requests, failed requests left out.
//! * An **interleaved** baseline (`baseline_serve`, or a pair gate's `theirs` arm): the gate runs as a pair
//!   (`spec::interleave::as_pair`) and the pair judge fills [`Block`]s from the pair's evidence
//!   (`judge::regression::judge_pair_blocks`: `analysis::interleave::blocks` of the arms' values);
//!   `servegate::loaded::regression_input` is for single-serve evidence and has none.

use std::path::PathBuf;

use crate::analysis::{measure, Evidence, RequestEvidence};
use crate::evidence::baseline;
use crate::evidence::comparability::{
    key_of_evidence, release_changes, run_load_per_cpu, KeyDiff, KeyUse,
};
use crate::spec::GateSpec;
use crate::vocab::Metric;

/// One block of an interleaved run: the per-request values of the metric from the baseline serve and from
/// this run's serve in that block (A-B-B-A: both arms of the block pooled per side), in send order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// The baseline serve's values in this block (unit of the metric: tok/s, ms).
    pub baseline: Vec<f64>,
    /// This run's (the candidate's) values in this block.
    pub candidate: Vec<f64>,
}

/// The baseline side of a regression verdict, as loaded for the judge.
#[derive(Debug, Clone, PartialEq)]
pub enum BaselineValues {
    /// A comparable stored baseline: its directory and, per window (oldest first), the window's
    /// per-request values of the metric.
    Stored {
        /// The baseline directory used.
        dir: PathBuf,
        /// One list of values per window.
        windows: Vec<Vec<f64>>,
        /// The host loads per CPU compared, (this run's, the baseline's), where both are stated: the
        /// verdict line shows them.
        load: Option<(f64, f64)>,
        /// What the release changed from the baseline's run to this one
        /// (`comparability::release_changes`: engine version, numerics settings of the serve log): the
        /// verdict states them as the likely cause of a change.
        release: Vec<KeyDiff>,
        /// The command that renews the baseline from this run ([`renew_command`]), for the stale-baseline
        /// notice.
        renew: String,
    },
    /// No stored baseline applies: for each one, the fields of what the gate fixes or the machine that
    /// differ (the verdict is INCOMPARABLE, naming them and `renew`; it fails unless the assertion says
    /// `on_incomparable = "skip"`).
    Incomparable {
        /// Each baseline and its differing fields.
        why: Vec<(PathBuf, Vec<KeyDiff>)>,
        /// The command that renews the baseline from this run ([`renew_command`]).
        renew: String,
    },
    /// A baseline applies, but the runner's host load is outside every applicable baseline's: each with the
    /// load difference (the verdict is NOT-COMPARED, busy runner: its own state, never a pass).
    NotCompared(Vec<(PathBuf, KeyDiff)>),
    /// Interleaved blocks, filled by the runner (A-B-B-A order, same prompts).
    Interleaved(Vec<Block>),
    /// No baseline could be read (a missing directory, a malformed manifest, a window that does not load,
    /// an interleaved run whose blocks were not recorded): the verdict FAILs with this reason.
    Unavailable(String),
}

/// The per-request values of `metric` of a run's judged requests (warmup excluded), in send order; a failed
/// request (a reply failure or a transport error) or one without the figure has none and is left out.
pub fn run_values(ev: &Evidence, metric: Metric) -> Vec<f64> {
    ev.requests
        .iter()
        .filter(|r| !r.record.warmup)
        .filter_map(|r| value_of(r, metric))
        .collect()
}

fn value_of(r: &RequestEvidence, metric: Metric) -> Option<f64> {
    if r.reply.failure().is_some() || r.record.transport_error.is_some() {
        return None;
    }
    measure::metric_value(&measure::measure(&r.reply), metric).filter(|v| v.is_finite())
}

/// `servegate bless <gate file> --baseline <run dir>`: the command that renews a stored baseline from this
/// run (the gate file as `run.json` names it).
pub fn renew_command(run: &Evidence) -> String {
    format!(
        "servegate bless {} --baseline {}",
        run.run.gate_file,
        run.dir.display()
    )
}

/// The stored baseline a regression compares with, among `loaded` (the baselines the gate names, read by the
/// caller: `servegate::loaded::regression_input`): the one whose comparability key equals this run's (for speed)
/// and whose host load per CPU is within `max_load_ratio` of this run's, the nearest in load
/// (`evidence::baseline::choose`). `Err` is the verdict's input when none applies
/// ([`BaselineValues::NotCompared`] for a busy runner, else [`BaselineValues::Incomparable`]).
pub fn choose_stored<'a>(
    gate: &GateSpec,
    run: &Evidence,
    loaded: &'a [baseline::Baseline],
    max_load_ratio: f64,
) -> Result<&'a baseline::Baseline, BaselineValues> {
    let key = key_of_evidence(gate, &run.run, run.serve_log.as_deref());
    let check = baseline::LoadCheck {
        run_per_cpu: run_load_per_cpu(&run.run),
        max_ratio: max_load_ratio,
    };
    match baseline::choose(loaded, &key, KeyUse::Speed, Some(check)) {
        Ok(b) => Ok(b),
        Err(why) if !why.busy.is_empty() => Err(BaselineValues::NotCompared(why.busy)),
        Err(why) => Err(BaselineValues::Incomparable {
            why: why.incomparable,
            renew: renew_command(run),
        }),
    }
}

/// The values of `metric` one baseline window `window` gives: its judged (non-warmup) requests' values, the
/// gate's untimed prompts left out (in a baseline window as in this run), failed requests left out.
///
/// A per-run metric (the serve's footprint, [`Metric::per_run`]) gives the window's one value
/// (`analysis::footprint::run_value`), or none when the window has no such figure.
pub fn window_values(gate: &GateSpec, window: &Evidence, metric: Metric) -> Vec<f64> {
    if metric.per_run() {
        return crate::analysis::footprint::run_value(window, metric)
            .ok()
            .filter(|v| v.is_finite())
            .into_iter()
            .collect();
    }
    window
        .requests
        .iter()
        .filter(|r| !r.record.warmup && gate.request.timed(&r.record.prompt))
        .filter_map(|r| value_of(r, metric))
        .collect()
}

/// The [`BaselineValues::Stored`] of the `chosen` baseline ([`choose_stored`]) for this run, with its
/// windows' values ([`window_values`], oldest first).
pub fn stored_values(
    gate: &GateSpec,
    run: &Evidence,
    chosen: &baseline::Baseline,
    windows: Vec<Vec<f64>>,
) -> BaselineValues {
    let key = key_of_evidence(gate, &run.run, run.serve_log.as_deref());
    BaselineValues::Stored {
        dir: chosen.dir.clone(),
        windows,
        load: run_load_per_cpu(&run.run).zip(chosen.load_per_cpu()),
        release: release_changes(&chosen.key, &key),
        renew: renew_command(run),
    }
}
