//! Evidence read from disk for judging: a run, a pair run, the stored baselines a gate names, the inputs of
//! `[assert.regression]` and `[assert.drift]`, a load run's sweep points. Each request's reads are parsed as
//! they are read ([`analysis::parse_reads`]), so the analysis and the judge below take loaded values and read
//! no file. The runner, the harness, records, coverage and `servegate judge` all load through here.

use std::path::Path;

use crate::analysis::baseline_values::{self, BaselineValues};
use crate::analysis::{self, BaselineSlot, Evidence, PairEvidence};
use crate::error::EvidenceError;
use crate::evidence::baseline;
use crate::judge::load::PointEvidence;
use crate::judge::JudgeInputs;
use crate::spec::load::Point;
use crate::spec::{GateSpec, RegressionBaseline};

/// Loads a run directory ([`crate::evidence::load_with`]) and parses each request's reads as they are read,
/// as judging sees them. Errors: those of [`crate::evidence::load`].
pub fn load(dir: &Path) -> Result<Evidence, EvidenceError> {
    crate::evidence::load_with(dir, analysis::parse_reads)
}

/// Loads a pair run directory, each arm as [`load`] does.
pub fn load_pair(dir: &Path) -> Result<PairEvidence, EvidenceError> {
    crate::evidence::load_pair_with(dir, analysis::parse_reads)
}

/// Loads the baseline `path` that the gate file `gate_file` names, by the one path rule and loader of
/// stored baselines (`evidence::baseline::load_named_with`), each window's replies parsed as [`load`] does.
pub fn load_baseline(gate_file: &Path, path: &Path) -> BaselineSlot {
    baseline::load_named_with(gate_file, path, analysis::parse_reads)
}

/// Loads every input `gate` needs for `evidence` besides the evidence itself ([`JudgeInputs`]): the baseline
/// side of `[assert.regression]` ([`regression_input`]) and the stored baselines `[assert.drift]` names
/// ([`load_baseline`]), in the gate's order, and the `[contract]` checks' evidence ([`load_contract`]).
pub fn judge_inputs(gate: &GateSpec, evidence: &Evidence) -> JudgeInputs {
    JudgeInputs {
        regression: regression_input(gate, evidence),
        drift: (gate
            .assertions
            .drift
            .as_ref()
            .map(|d| &d.baselines[..])
            .unwrap_or(&[]))
        .iter()
        .map(|b| load_baseline(&gate.file, Path::new(b)))
        .collect(),
        contract: gate
            .contract
            .as_ref()
            .map(|_| load_contract(&evidence.dir).map_err(|e| e.to_string())),
    }
}

/// `gate`'s verdicts on a run read from disk (`evidence`, by [`load`]): [`crate::judge::judge_with`] fed the
/// inputs [`judge_inputs`] loads (regression and drift baselines, the `[contract]` checks' evidence under
/// `<dir>/contract/`). The one way a run directory is (re-)judged: `servegate run`, `judge`, `export`, the
/// records, coverage and the self-test all judge through here, and `bless` loads the same inputs
/// ([`judge_inputs`]) for its own judging; [`crate::judge::judge`] alone gives no inputs, so a gate's
/// `[contract]` checks would FAIL for want of evidence the run has.
pub fn judge_run(gate: &GateSpec, evidence: &Evidence) -> Vec<crate::judge::Verdict> {
    crate::judge::judge_with(gate, evidence, &judge_inputs(gate, evidence))
}

/// Loads the `[contract]` checks' evidence under `<dir>/contract/`
/// ([`crate::evidence::contract::load_raw`]), each reply parsed ([`analysis::contract::parse`]).
pub(crate) fn load_contract(
    dir: &Path,
) -> Result<analysis::contract::ContractEvidence, EvidenceError> {
    let mut ev = crate::evidence::contract::load_raw(dir).map(analysis::contract::parse)?;
    ev.logs = crate::evidence::contract::load_logs(dir);
    ev.metrics = crate::evidence::contract::load_metrics(dir);
    Ok(ev)
}

/// The baseline side of the gate's `[assert.regression]` for this run (`gate` as run, `run` its evidence), or
/// None when the gate declares no regression. Reads the stored baselines' directories
/// (`evidence::baseline::load_named`), chooses one ([`baseline_values::choose_stored`]) and reads its windows
/// ([`load`]); an interleaved baseline's blocks come from the runner: with none given here it is
/// [`BaselineValues::Unavailable`].
pub(crate) fn regression_input(gate: &GateSpec, run: &Evidence) -> Option<BaselineValues> {
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

fn stored(
    dirs: &[std::path::PathBuf],
    gate: &GateSpec,
    run: &Evidence,
    metric: crate::vocab::Metric,
    max_load_ratio: f64,
) -> BaselineValues {
    let mut loaded = Vec::new();
    for d in dirs {
        match baseline::load_named(&gate.file, d) {
            Ok(b) => loaded.push(b),
            Err(e) => {
                return BaselineValues::Unavailable(format!(
                    "baseline {} cannot be read: {e} (`servegate bless {} --baseline RUN_DIR --accept` writes it there)",
                    d.display(),
                    gate.file.display()
                ))
            }
        }
    }
    let chosen = match baseline_values::choose_stored(gate, run, &loaded, max_load_ratio) {
        Ok(b) => b,
        Err(v) => return v,
    };
    let mut windows = Vec::new();
    for w in &chosen.window_dirs {
        match load(w) {
            Ok(ev) => windows.push(baseline_values::window_values(gate, &ev, metric)),
            Err(e) => {
                return BaselineValues::Unavailable(format!(
                    "baseline window {} cannot be read: {e}",
                    w.display()
                ))
            }
        }
    }
    baseline_values::stored_values(gate, run, chosen, windows)
}

/// Loads point `point` of the load run under `root` (its directory `root/<point dir>`): the replies
/// ([`load`]) and `load.json`, checked against each other and the point
/// ([`crate::evidence::load::check_record`]); what does not hold is `loaded`'s error, so the point's trials
/// fail with it. The one loader of `servegate judge`, the runner and load records.
pub fn load_point(root: &Path, point: Point) -> PointEvidence {
    load_point_dir(&root.join(point.dir()), point)
}

/// The cross-tool parity run of `point` under the load run directory `root` (`<point>/parity/`, written by
/// `run::load_parity`), loaded and checked as [`load_point`] loads servegate's client's run.
pub fn load_parity(root: &Path, point: Point) -> PointEvidence {
    load_point_dir(
        &root
            .join(point.dir())
            .join(crate::judge::parity::PARITY_DIR),
        point,
    )
}

/// The run of `point` in the directory `pd` ([`load_point`]).
fn load_point_dir(pd: &Path, point: Point) -> PointEvidence {
    let pd = pd.to_path_buf();
    let loaded = load(&pd)
        .map_err(|e| e.to_string())
        .and_then(|ev| {
            crate::evidence::load::read_record(&pd)
                .map(|r| (ev, r))
                .map_err(|e| e.to_string())
        })
        .and_then(|(ev, r)| {
            crate::evidence::load::check_record(&r, &ev.run, point)
                .map(|()| (ev, r))
                .map_err(|e| format!("{}: {e}", pd.display()))
        });
    PointEvidence { point, loaded }
}
