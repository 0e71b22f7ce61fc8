//! `servegate bless`: turn the evidence of a known-good run into what later runs are judged against, in the
//! open (docs/bless.md). Two things can be blessed:
//!
//! - **a baseline** (`bless GATE --baseline RUN_DIR [--kind NAME]`): the run directory is copied as a new
//!   window of `data/baselines/<gate>[/<kind>]/` (the [`crate::evidence::baseline`] layout), with the run's
//!   comparability key in `baseline.json`; a window is added to an existing baseline only when the keys match.
//! - **a floor** (`bless GATE --floor RUN_DIR [--slow RUN_DIR]`): `[assert.rate] floor_tok_s` derived from
//!   the evidence by a stated rule ([`derive_floor`]) instead of typed by hand.
//!
//! A run is refused when it is not good evidence ([`refusals`]): incomplete (`run.json` status), its serve
//! failed during it (`serve.failure`), one of its own verdicts fails when re-judged ([`judge_for_bless`]:
//! figure bounds and baseline comparisons set aside), fewer answered requests than the gate plans (and than
//! [`MIN_BASELINE_N`]), or, for a baseline, it is already one of the baseline's windows ([`run_identity`]).
//! A `--kind` is a plain name ([`check_kind`]).
//!
//! Nothing is written without `--accept`: without it the command prints what it would do (the gate file's
//! change as a unified diff, the baseline directory it would create). The gate file is edited in place
//! ([`edit_floor`], located with `toml_edit`): only the value's bytes and the provenance lines above its line
//! change, so comments, order, formatting, inline tables and line endings stay, and the result is re-parsed
//! before it is written. Every accepted change is planned again and written under one lock per baselines
//! root ([`lock`]) and appends one line to `data/baselines/LEDGER.jsonl`. Never in CI: with `CI` set the command
//! refuses unless `--force`.
//!
//! Layer: records (above judge; writes only through `io::fs`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::analysis;
use crate::analysis::regress;
use crate::error::exit;
use crate::evidence::baseline::{self, Manifest, BASELINE_SCHEMA};
use crate::evidence::comparability::{
    describe, differences, key_of_evidence, load_difference, run_load_per_cpu, KeyUse,
};
use crate::evidence::{layout, RunStatus};
use crate::judge::{self, Outcome};
use crate::spec::{self, GateSpec};
use crate::vocab::{AssertionKind, Metric};

mod floor;
mod limits;
#[cfg(test)]
mod tests;
mod window;

pub use floor::*;
pub use limits::*;
pub use window::*;

/// The fewest answered requests a baseline window may hold: 4 is the smallest n per side at which an exact
/// one-sided Mann-Whitney test can reach p < 0.05 (3 against 3 cannot: its smallest p is 1/20).
pub(crate) const MIN_BASELINE_N: usize = 4;
/// Default headroom of a floor derived from one run: 10 % below the lower confidence bound of the median (a
/// floor equal to today's measurement goes red at once).
pub const DEFAULT_HEADROOM_PCT: f64 = regress::FLOOR_HEADROOM_PCT;
/// Default confidence of the lower bound of the median.
pub const DEFAULT_CONFIDENCE: f64 = regress::FLOOR_CONFIDENCE;
/// The ledger of accepted changes, inside the baselines root.
pub const LEDGER_FILE: &str = "LEDGER.jsonl";
/// The first words of the provenance comment servegate writes above a derived floor ([`provenance`]). An
/// older provenance is recognised by its whole two-line shape ([`is_provenance`]), never by these words
/// alone: a person's comment that starts with them is kept.
pub(crate) const PROVENANCE_MARK: &str = "# servegate bless";

/// What `servegate bless` is asked (the binary's flags; a test's values).
#[derive(Debug, Clone)]
pub struct BlessArgs {
    /// The gate file (gates/NAME.toml).
    pub gate: PathBuf,
    /// Copy this run directory as a new window of the gate's stored baseline.
    pub baseline: Option<PathBuf>,
    /// With `baseline`: the machine kind (a subdirectory, e.g. `ci-2core`); none = data/baselines/<gate>/.
    pub kind: Option<String>,
    /// Derive [assert.rate] floor_tok_s from this run: the lower confidence bound of its median minus
    /// `headroom_pct` (or, with `slow`, the geometric mean of this fast-route run's median and the slow one's).
    pub floor: Option<PathBuf>,
    /// With `floor`: a run of the slow route; the floor is the geometric mean of the two medians.
    pub slow: Option<PathBuf>,
    /// Headroom below the lower bound, percent (one-run floors).
    pub headroom_pct: f64,
    /// Confidence of the lower bound of the median (one-run floors).
    pub confidence: f64,
    /// Derive the footprint limits the gate declares (`[assert.ready] limit_ms`, `[assert.memory]
    /// limit_mib`, `[assert.cpu] limit_ms_per_token`) from these runs ([`plan_limits`]); empty: none.
    pub limits: Vec<PathBuf>,
    /// Headroom above the largest value, percent (footprint limits).
    pub limit_headroom_pct: f64,
    /// Where baselines and the ledger live.
    pub baselines_dir: PathBuf,
    /// Write the change (without it, only show it).
    pub accept: bool,
    /// Write even when `CI` is set.
    pub force: bool,
}

/// A refusal or failure of `bless`, with the exit code it means.
#[derive(Debug, Clone, PartialEq)]
pub struct BlessError {
    /// What went wrong, in words (every reason when a run is refused).
    pub message: String,
    /// The process exit code ([`exit`]).
    pub code: i32,
}

impl BlessError {
    fn new(code: i32, message: impl Into<String>) -> BlessError {
        BlessError {
            message: message.into(),
            code,
        }
    }
}

impl std::fmt::Display for BlessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One line of `data/baselines/LEDGER.jsonl`: what was blessed, when, from which evidence, by which rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// UTC time of the change, RFC 3339.
    pub utc: String,
    /// `gate.name`.
    pub gate: String,
    /// The gate file as given.
    pub gate_file: String,
    /// `baseline` or `floor`.
    pub action: String,
    /// The run directory blessed (as given); for a two-run floor, the fast one.
    pub run: String,
    /// A two-run floor's slow run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_run: Option<String>,
    /// Values the rule used (answered requests).
    pub n: usize,
    /// Their median (tok/s for a floor; the decode-rate median of a baseline window).
    pub median: Option<f64>,
    /// The rule, in words.
    pub rule: String,
    /// The new value (a floor, tok/s), or None for a baseline window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The value it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<f64>,
    /// A baseline window: the baseline directory and the window's name in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

/// Refuses to write in CI: `CI` set to a true value ([`crate::error::env_flag`]) without `force`.
pub(crate) fn refuse_in_ci(ci: Option<String>, force: bool) -> Result<(), BlessError> {
    if crate::error::env_flag(ci) && !force {
        return Err(BlessError::new(
            exit::USAGE,
            "bless never writes in CI (CI is set): bless on a developer machine and commit the change, or pass --force",
        ));
    }
    Ok(())
}

/// Why a run is not good evidence to bless (empty: good). `route_must_pass` is false for a slow-route run
/// (whose route trial fails by design). Pure: re-judges `ev` with `gate` and `inputs` ([`judge_for_bless`];
/// `inputs` as `servegate judge` loads them for the run, [`crate::loaded::judge_inputs`]: without them a
/// `[contract]` check FAILs for want of the evidence the run has under `contract/`).
///
/// Refused: a run whose `run.json` status is not `complete`; a run whose serve failed during it
/// (`serve.failure` set: a crash after the last reply included); any of its own verdicts that FAILs or is
/// VOID (content, known-answer and route must PASS), judged with the figure bounds set aside (a floor, a TTFT
/// or TPOT limit: a loaded machine's slow figures are still evidence of that machine, and a floor is what
/// bless derives) and without the regression and drift trials (they compare with the stored baselines bless
/// renews); fewer answered requests than planned (or than [`MIN_BASELINE_N`]).
pub fn refusals(
    gate: &GateSpec,
    ev: &analysis::Evidence,
    inputs: &judge::JudgeInputs,
    route_must_pass: bool,
) -> Vec<String> {
    let mut why = Vec::new();
    if ev.run.status != RunStatus::Complete {
        why.push(format!(
            "the run is incomplete (run.json status {})",
            ev.run.status.name()
        ));
    }
    if let Some(f) = &ev.run.serve.failure {
        why.push(format!(
            "the serve failed during the run (serve.failure: {})",
            one_line(f)
        ));
    }
    for v in judge_for_bless(gate, ev, inputs) {
        if matches!(v.kind, AssertionKind::Regression | AssertionKind::Drift)
            || (!route_must_pass && v.kind == AssertionKind::Route)
        {
            continue;
        }
        let must_pass = matches!(
            v.kind,
            AssertionKind::Content | AssertionKind::KnownAnswer | AssertionKind::Route
        );
        let bad = if must_pass {
            v.outcome != Outcome::Pass
        } else {
            matches!(v.outcome, Outcome::Fail | Outcome::Void)
        };
        // A trial failing for the serve's failure says nothing the first reason does not.
        let for_the_crash =
            ev.run.serve.failure.is_some() && v.message.contains("the serve failed during the run");
        if bad && !for_the_crash {
            let figure = v.kind.metric().is_some();
            why.push(format!(
                "its {} trial does not pass{}: {}",
                v.assertion,
                if figure { " (its bound set aside)" } else { "" },
                capped(&one_line(&v.message), 300)
            ));
        }
    }
    let acc = judge::account(ev);
    let answered = acc.sent.saturating_sub(acc.failed.len());
    // The plan: run.json's, else (older evidence) the gate's prompts x repeats.
    let planned = acc
        .planned
        .max(gate.request.prompts.len() * gate.request.repeats as usize);
    if answered < planned.max(MIN_BASELINE_N) {
        why.push(format!(
            "{answered} answered request{} of {planned} planned; blessing needs every planned request answered and at least {MIN_BASELINE_N}",
            if answered == 1 { "" } else { "s" },
        ));
    }
    why
}

/// The run's own verdicts as bless judges them: `gate` with its figure bounds set aside (`[assert.rate]`
/// floor at the smallest positive tok/s, `[assert.first_token]` and `[assert.tpot]` limits unbounded), so a
/// figure trial that still FAILs does so for its evidence (a failed reply, a crashed serve, client and serve
/// clocks that disagree), never for a slow machine. `inputs`: as [`judge::judge_with`] takes them.
pub(crate) fn judge_for_bless(
    gate: &GateSpec,
    ev: &analysis::Evidence,
    inputs: &judge::JudgeInputs,
) -> Vec<judge::Verdict> {
    let mut g = gate.clone();
    if let Some(r) = g.assertions.rate.as_mut() {
        r.floor_tok_s = f64::MIN_POSITIVE;
    }
    if let Some(t) = g.assertions.first_token.as_mut() {
        t.limit_ms = f64::MAX;
    }
    if let Some(t) = g.assertions.tpot.as_mut() {
        t.limit_ms = f64::MAX;
    }
    // The serve's footprint limits too: a baseline is blessed for its evidence, not for a roomy machine.
    if let Some(r) = g.assertions.ready.as_mut() {
        r.limit_ms = f64::MAX;
    }
    if let Some(m) = g.assertions.memory.as_mut() {
        m.limit_mib = f64::MAX;
    }
    if let Some(c) = g.assertions.cpu.as_mut() {
        c.limit_ms_per_token = f64::MAX;
    }
    judge::judge_with(&g, ev, inputs)
}

/// `s` cut to at most `max` characters, `...` marking a cut.
fn capped(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(3)).collect();
    t.push_str("...");
    t
}

/// `s` on one line: control characters (a newline, ESC) shown as escapes, for a reason or a comment.
fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<char>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A run directory to bless: its own gate (`gate.toml` in it), its evidence ([`crate::loaded::load`]) and
/// the inputs judging it needs ([`crate::loaded::judge_inputs`]: the `[contract]` checks' evidence), as
/// `servegate judge` loads them.
fn load_run(dir: &Path) -> Result<RunToBless, BlessError> {
    let shown_dir = || crate::text::shown(&dir.display().to_string());
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BlessError::new(
                exit::EVIDENCE_ERROR,
                format!("run directory {} does not exist", shown_dir()),
            ));
        }
        Ok(m) if !m.is_dir() => {
            return Err(BlessError::new(
                exit::EVIDENCE_ERROR,
                format!(
                    "{} is not a directory: bless takes a run directory (it holds run.json)",
                    shown_dir()
                ),
            ));
        }
        _ => {}
    }
    if crate::evidence::is_pair_dir(dir) {
        return Err(BlessError::new(
            exit::USAGE,
            format!(
                "{} is a pair run: bless takes one serve's run directory",
                dir.display()
            ),
        ));
    }
    let g = load_gate(&dir.join(layout::GATE_FILE))?;
    if g.load.is_some() {
        return Err(BlessError::new(exit::USAGE, load_run_refusal(dir)));
    }
    let ev = crate::loaded::load(dir)
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, e.to_string()))?;
    let inputs = crate::loaded::judge_inputs(&g, &ev);
    Ok(RunToBless {
        gate: g,
        ev,
        inputs,
    })
}

/// Why a load run (its gate has `[load]`) is not blessed: a load gate judges its sweep points with
/// `[assert.latency]`, `[assert.throughput]`, `[assert.goodput]`, `[assert.errors]` and
/// `[assert.consistency]`, and takes no `[assert.regression]`, `[assert.rate]` or footprint limits, so there
/// is nothing of it to bless; its points are kept and compared over time as records (docs/records.md "Load
/// records").
pub(crate) fn load_run_refusal(dir: &Path) -> String {
    format!(
        "{} is a load run ([load] sweep points): load runs cannot be blessed (a load gate has no stored \
         baseline, rate floor or footprint limit to bless: [assert.regression] is a plain run's); keep its \
         points as records to compare over time: servegate records add --run {} --spec FILE (docs/records.md \
         \"Load records\")",
        dir.display(),
        dir.display()
    )
}

/// What [`load_run`] reads of a run directory.
struct RunToBless {
    /// The gate the run ran (its `gate.toml`).
    gate: GateSpec,
    /// The run's evidence, each reply parsed.
    ev: analysis::Evidence,
    /// What judging it needs besides the evidence (`[contract]` evidence, baselines).
    inputs: judge::JudgeInputs,
}

/// A plain gate file for bless. A matrix gate (`[[model]]` entries) is refused by name: bless does not edit
/// an entry's override yet (exit 3, saying what to do instead), rather than a parse error about `model`.
fn load_gate(file: &Path) -> Result<GateSpec, BlessError> {
    spec::load(file).map_err(|e| {
        let matrix = spec::matrix::load_all(file)
            .map(|all| all.len() > 1 || all.iter().any(|g| g.name.contains('[')))
            .unwrap_or(false);
        if matrix {
            BlessError::new(
                exit::SPEC_INVALID,
                format!(
                    "{} is a matrix gate ([[model]] entries): bless does not edit a matrix entry yet; set that \
                     entry's floor_tok_s (or the gate's baseline) by hand from `servegate judge` of the run",
                    file.display()
                ),
            )
        } else {
            BlessError::new(exit::SPEC_INVALID, e.to_string())
        }
    })
}

fn same_gate(gate: &GateSpec, run_gate: &GateSpec, dir: &Path) -> Result<(), BlessError> {
    if gate.name != run_gate.name {
        return Err(BlessError::new(
            exit::USAGE,
            format!(
                "{} is a run of gate `{}`, not `{}`",
                dir.display(),
                run_gate.name,
                gate.name
            ),
        ));
    }
    Ok(())
}

fn refused(dir: &Path, why: Vec<String>) -> Result<(), BlessError> {
    if why.is_empty() {
        return Ok(());
    }
    Err(BlessError::new(
        exit::ASSERTION_FAILED,
        format!("refused to bless {}: {}", dir.display(), why.join("; ")),
    ))
}

/// Appends `entry` to `<root>/LEDGER.jsonl` (the whole file rewritten through `io::fs::write_atomic`: a
/// reader never sees half a line). The caller holds [`lock`] (read, appended and written under it, no line
/// of a concurrent bless is lost).
pub(crate) fn append_ledger(root: &Path, entry: &LedgerEntry) -> Result<PathBuf, BlessError> {
    let path = root.join(LEDGER_FILE);
    let mut text = match crate::io::input::read_to_string(&path, crate::io::input::MAX_RECORD_BYTES)
    {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(BlessError::new(
                exit::EVIDENCE_ERROR,
                format!("{}: {e}", path.display()),
            ))
        }
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&serde_json::to_string(entry).unwrap_or_default());
    text.push('\n');
    std::fs::create_dir_all(root)
        .and_then(|_| crate::io::fs::write_atomic(&path, text.as_bytes()))
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{}: {e}", path.display())))?;
    Ok(path)
}

/// [`plan`] with this process's `CI` and the clock: what `servegate bless` runs.
pub fn plan_here(args: &BlessArgs, waiting: &mut dyn FnMut(&str)) -> Result<Planned, BlessError> {
    plan(
        args,
        std::env::var("CI").ok(),
        &crate::io::host::now_utc(),
        waiting,
    )
}

/// The lock file of a baselines root. Every accepted bless (a baseline window and its manifest, a floor's
/// gate file, the ledger line) is planned again and written holding an exclusive `flock` on it
/// ([`crate::io::hold::take`]), so concurrent blesses into one baseline or ledger serialise and each sees
/// what the others wrote.
pub(crate) const LOCK_FILE: &str = ".bless.lock";
/// How long an accepting bless waits for another to finish before it fails (exit 5), naming the holder.
pub(crate) const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Takes the bless lock of `root` ([`LOCK_FILE`]) for `gate`, waiting up to [`LOCK_WAIT`] (about every 10 s
/// `waiting` is given a line naming the holder; the binary prints it on stderr as `bless: LINE`). Released
/// when dropped, and by the kernel on any exit.
/// `plan_now` once, so a refusal never waits for the lock (nor makes its file); with `--accept`, again under
/// the lock ([`lock`]), from the files as the other writers left them. The plan and the lock held.
fn plan_locked<T>(
    args: &BlessArgs,
    root: &Path,
    gate: &dyn Fn() -> String,
    waiting: &mut dyn FnMut(&str),
    plan_now: impl Fn() -> Result<T, BlessError>,
) -> Result<(T, Option<crate::io::hold::Hold>), BlessError> {
    let plan = plan_now()?;
    if !args.accept {
        return Ok((plan, None));
    }
    let held = lock(root, &gate(), waiting)?;
    Ok((plan_now()?, Some(held)))
}

pub(crate) fn lock(
    root: &Path,
    gate: &str,
    waiting: &mut dyn FnMut(&str),
) -> Result<crate::io::hold::Hold, BlessError> {
    let path = root.join(LOCK_FILE);
    crate::io::hold::take(&path, &format!("bless {gate}"), LOCK_WAIT, &mut |l| {
        waiting(&l.to_string())
    })
    .map_err(|e| {
        BlessError::new(
            exit::EVIDENCE_ERROR,
            format!("bless: another bless is writing to {}: {e}", root.display()),
        )
    })
}

/// A planned bless ([`plan`]): the change, shown before anything is written ([`Planned::shown`]); when
/// accepting, the lock taken while planning is held until [`Planned::write`] is done.
pub struct Planned {
    change: Change,
    accept: bool,
    baselines_dir: PathBuf,
    _lock: Option<crate::io::hold::Hold>,
}

/// What a [`Planned`] bless changes.
enum Change {
    /// The gate file `gate` gets a derived floor.
    Floor { gate: PathBuf, plan: Box<FloorPlan> },
    /// The gate file `gate` gets derived footprint limits.
    Limits {
        gate: PathBuf,
        plan: Box<LimitsPlan>,
    },
    /// The run directory `run` becomes a baseline window.
    Baseline {
        run: PathBuf,
        plan: Box<BaselinePlan>,
    },
}

/// The line a bless that is not accepted ends with.
pub const NOT_WRITTEN: &str = "not written: pass --accept to apply";

impl Planned {
    /// The change as `servegate bless` shows it before writing: the gate file's unified diff and
    /// `floor: N tok/s (rule)`, or `baseline DIR: new, first window W (from RUN; N windows in all; key: K)`.
    /// Ends with a line break.
    pub fn shown(&self) -> String {
        match &self.change {
            Change::Floor { gate, plan } => format!(
                "{}floor: {} tok/s ({})\n",
                diff(&plan.old, &plan.new, &gate.display().to_string()),
                plan.derivation.floor,
                plan.derivation.rule
            ),
            Change::Limits { gate, plan } => {
                let mut s = diff(&plan.old, &plan.new, &gate.display().to_string());
                for d in &plan.derivations {
                    let info = d.metric.info();
                    s.push_str(&format!(
                        "limit [assert.{}] {}: {:.*} {} ({})\n",
                        d.table,
                        d.key,
                        info.decimals,
                        d.limit,
                        info.unit.name(),
                        d.rule
                    ));
                }
                s
            }
            Change::Baseline { run, plan } => format!(
                "{}baseline {}: {} window {} (from {}; {} window{} in all; key: {})\n",
                plan.note
                    .as_ref()
                    .map(|n| format!("{n}\n"))
                    .unwrap_or_default(),
                plan.dir.display(),
                if plan.created { "new, first" } else { "adds" },
                plan.window,
                run.display(),
                plan.manifest.windows.len(),
                if plan.manifest.windows.len() == 1 {
                    ""
                } else {
                    "s"
                },
                serde_json::to_string(&plan.manifest.key).unwrap_or_default()
            ),
        }
    }

    /// Whether the change is to be written (`--accept`).
    pub fn accepted(&self) -> bool {
        self.accept
    }

    /// Writes the change (the gate file, or the baseline window and its manifest) and appends its ledger
    /// line, still under the lock; returns `written: WHAT; ledger: PATH`.
    pub fn write(self) -> Result<String, BlessError> {
        match &self.change {
            Change::Floor { gate, plan } => {
                let path = gate.display().to_string();
                crate::io::fs::write_atomic(gate, plan.new.as_bytes())
                    .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{path}: {e}")))?;
                let l = append_ledger(&self.baselines_dir, &plan.ledger)?;
                Ok(format!("written: {path}; ledger: {}", l.display()))
            }
            Change::Limits { gate, plan } => {
                let path = gate.display().to_string();
                crate::io::fs::write_atomic(gate, plan.new.as_bytes())
                    .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{path}: {e}")))?;
                let mut l = PathBuf::new();
                for entry in &plan.ledger {
                    l = append_ledger(&self.baselines_dir, entry)?;
                }
                Ok(format!("written: {path}; ledger: {}", l.display()))
            }
            Change::Baseline { run, plan } => {
                write_baseline(run, plan)?;
                let l = append_ledger(&plan.ledger_root, &plan.ledger)?;
                Ok(format!(
                    "written: {}/{}; ledger: {}",
                    plan.dir.display(),
                    plan.window,
                    l.display()
                ))
            }
        }
    }
}

/// Plans `servegate bless` with the environment's `CI` and the clock passed in ([`plan_here`] passes this
/// process's): refuses to accept in CI without `force`, plans, and when accepting takes the lock
/// ([`lock`]; `waiting` hears about a holder) and plans again under it. Writes nothing.
pub(crate) fn plan(
    args: &BlessArgs,
    ci: Option<String>,
    utc: &str,
    waiting: &mut dyn FnMut(&str),
) -> Result<Planned, BlessError> {
    if args.accept {
        refuse_in_ci(ci, args.force)?;
    }
    let gate_name = || {
        spec::load(&args.gate)
            .map(|g| g.name)
            .unwrap_or_else(|_| args.gate.display().to_string())
    };
    let planned = |change: Change, held: Option<crate::io::hold::Hold>| Planned {
        change,
        accept: args.accept,
        baselines_dir: args.baselines_dir.clone(),
        _lock: held,
    };
    if let Some(run) = &args.floor {
        let plan_now = || {
            plan_floor(
                &args.gate,
                run,
                args.slow.as_deref(),
                args.confidence,
                args.headroom_pct,
                utc,
            )
        };
        // From the gate file as it is once the other writers are done.
        let (plan, held) = plan_locked(args, &args.baselines_dir, &gate_name, waiting, plan_now)?;
        let (gate, plan) = (args.gate.clone(), Box::new(plan));
        return Ok(planned(Change::Floor { gate, plan }, held));
    }
    if !args.limits.is_empty() {
        let plan_now = || plan_limits(&args.gate, &args.limits, args.limit_headroom_pct, utc);
        let (plan, held) = plan_locked(args, &args.baselines_dir, &gate_name, waiting, plan_now)?;
        let (gate, plan) = (args.gate.clone(), Box::new(plan));
        return Ok(planned(Change::Limits { gate, plan }, held));
    }
    if let Some(run) = &args.baseline {
        let plan_now = || {
            plan_baseline(
                &args.gate,
                run,
                args.kind.as_deref(),
                &args.baselines_dir,
                utc,
            )
        };
        // Locked where the ledger line goes: beside the baseline the gate reads.
        let root = baseline_target(
            spec::load(&args.gate).ok().as_ref(),
            &args.gate,
            args.kind.as_deref(),
            &args.baselines_dir,
        )
        .ledger_root;
        // From the manifest as the other writers left it.
        let (plan, held) = plan_locked(args, &root, &gate_name, waiting, plan_now)?;
        let (run, plan) = (run.clone(), Box::new(plan));
        return Ok(planned(Change::Baseline { run, plan }, held));
    }
    Err(BlessError::new(
        exit::USAGE,
        "bless needs --baseline, --floor or --limits",
    ))
}

/// `servegate bless` as one call ([`plan`], then [`Planned::write`] when accepting), with `CI` and the clock
/// passed in: the text the command prints on stdout.
pub fn run_cli(args: &BlessArgs, ci: Option<String>, utc: &str) -> Result<String, BlessError> {
    let planned = plan(args, ci, utc, &mut |_| {})?;
    let mut text = planned.shown();
    if planned.accepted() {
        text.push_str(&planned.write()?);
    } else {
        text.push_str(NOT_WRITTEN);
    }
    text.push('\n');
    Ok(text)
}
