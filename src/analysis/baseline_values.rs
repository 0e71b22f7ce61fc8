//! The baseline values a regression verdict compares with, and the ONE place they are loaded: the runner,
//! the test harness and `servegate judge` all call [`regression_input`] and hand its result to
//! `judge::judge_with`, which stays pure.
//!
//! * A **stored** baseline (`baseline = "DIR"` / `baselines = [...]`): each directory is read with
//!   `evidence::baseline::load_named` (the one path rule of stored baselines, `evidence::baseline::resolve`:
//!   the gate file's directory and its ancestors, then the current directory); one whose comparability key equals this run's (for speed: the host
//!   counts) and whose host load per CPU is within `max_load_ratio` of this run's is chosen, the nearest in
//!   load (`evidence::baseline::choose`), and each of its windows is read with
//!   [`crate::analysis::load`] like any evidence: the per-request values of the metric of its judged
//!   (non-warmup) requests, failed requests left out.
//! * An **interleaved** baseline (`baseline_serve`, or a pair gate's `theirs` arm): the gate runs as a pair
//!   (`spec::interleave::as_pair`) and the pair judge fills [`Block`]s from the pair's evidence
//!   (`judge::regression::judge_pair_blocks`: `analysis::interleave::blocks` of the arms' values); [`regression_input`] is for
//!   single-serve evidence and has none.

use std::path::PathBuf;

use crate::analysis::{measure, Evidence, RequestEvidence};
use crate::evidence::baseline;
use crate::evidence::comparability::{
    key_of_evidence, release_changes, run_load_per_cpu, KeyDiff, KeyUse,
};
use crate::spec::{GateSpec, RegressionBaseline};
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

/// The baseline side of the gate's `[assert.regression]` for this run (`gate` as run, `run` its evidence), or
/// None when the gate declares no regression. Reads the stored baselines' directories; an interleaved
/// baseline's blocks come from the runner: with none given here it is [`BaselineValues::Unavailable`].
pub fn regression_input(gate: &GateSpec, run: &Evidence) -> Option<BaselineValues> {
    let r = gate.assertions.regression.as_ref()?;
    Some(match &r.baseline {
        RegressionBaseline::Serve(_) | RegressionBaseline::PairArm => BaselineValues::Unavailable(
            "the interleaved baseline serve's blocks are not in this evidence (servegate run records them; \
             a run without them cannot be judged against a baseline serve)"
                .into(),
        ),
        RegressionBaseline::Stored(dirs) => stored(dirs, gate, run, r.metric, r.max_load_ratio),
    })
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

fn stored(
    dirs: &[PathBuf],
    gate: &GateSpec,
    run: &Evidence,
    metric: Metric,
    max_load_ratio: f64,
) -> BaselineValues {
    let mut loaded = Vec::new();
    for d in dirs {
        match baseline::load_named(&gate.file, d) {
            Ok(b) => loaded.push(b),
            Err(e) => {
                return BaselineValues::Unavailable(format!(
                    "baseline {} cannot be read: {e} (servegate bless GATE --baseline RUN_DIR writes one)",
                    d.display()
                ))
            }
        }
    }
    let key = key_of_evidence(gate, &run.run, run.serve_log.as_deref());
    let run_load = run_load_per_cpu(&run.run);
    let check = baseline::LoadCheck {
        run_per_cpu: run_load,
        max_ratio: max_load_ratio,
    };
    let chosen = match baseline::choose(&loaded, &key, KeyUse::Speed, Some(check)) {
        Ok(b) => b,
        Err(why) if !why.busy.is_empty() => return BaselineValues::NotCompared(why.busy),
        Err(why) => {
            return BaselineValues::Incomparable {
                why: why.incomparable,
                renew: renew_command(run),
            }
        }
    };
    let mut windows = Vec::new();
    for w in &chosen.window_dirs {
        match crate::analysis::load(w) {
            // The gate's untimed prompts feed no value, in a baseline window as in this run.
            Ok(ev) => windows.push(
                ev.requests
                    .iter()
                    .filter(|r| !r.record.warmup && gate.request.timed(&r.record.prompt))
                    .filter_map(|r| value_of(r, metric))
                    .collect(),
            ),
            Err(e) => {
                return BaselineValues::Unavailable(format!(
                    "baseline window {} cannot be read: {e}",
                    w.display()
                ))
            }
        }
    }
    BaselineValues::Stored {
        dir: chosen.dir.clone(),
        windows,
        load: run_load.zip(chosen.load_per_cpu()),
        release: release_changes(&chosen.key, &key),
        renew: renew_command(run),
    }
}
