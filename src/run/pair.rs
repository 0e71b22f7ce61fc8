//! A pair gate's run: the model file hashed once, then each arm in order (start its serve, send every
//! request, stop it) into `arm<N>-<role>/` run directories, the model file hashed again, and the pair judged.

use std::path::Path;

use crate::error::EvidenceError;
use crate::evidence::{self, EvidenceWriter, RunStatus, RunSummary};
use crate::judge;
use crate::sinks::events::Step;
use crate::spec::{GateSpec, PairSpec, ServeMode};
use crate::vocab::{FailureCode, ServeFailure};

use super::lifecycle::{self, ActiveRun};
use super::single;
use super::step::Target;
use crate::judge::outcome::RunOutcome;

/// Runs a pair gate (see the module doc) and judges it. Errors as [`super::runner::run`]'s.
pub(super) fn run_pair(
    gate: &GateSpec,
    root: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<RunOutcome, EvidenceError> {
    let pair = gate.pair.as_ref().expect("pair gate");
    let process_notes = lifecycle::prepare_process();
    let w = lifecycle::writer(
        gate,
        EvidenceWriter::create(root, &gate.name, &evidence::stamp_utc())?,
    );
    let _active = ActiveRun::new(w.path(crate::evidence::layout::PAIR_FILE));
    w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
    let mut ps = new_pair_summary(gate, pair);
    w.write_pair_summary(&ps)?;
    progress(&Step::PairEvidenceDir(w.dir().to_path_buf()));

    let hold = lifecycle::take_hold(gate, progress);
    let prepared = match &hold {
        Err(f) => Err(f.clone()),
        Ok(_) => prepare(gate, pair, &w, &mut ps, progress),
    };
    match prepared {
        Ok((sha, bytes)) => {
            ps.model_sha256 = Some(sha);
            ps.model_bytes = Some(bytes);
        }
        Err(f) => ps.failure = Some(f.to_string()),
    }
    w.write_pair_summary(&ps)?;

    if ps.failure.is_none() {
        run_arms(gate, pair, &w, &mut ps, progress)?;
        if let Some(f) = model_after(pair, &mut ps) {
            ps.failure = Some(f.to_string());
        }
    }
    ps.ended_utc = Some(evidence::now_utc());
    ps.load_avg_end = evidence::load_avg();
    pair_checkpoint(&w, &mut ps, None);
    w.publish_logs()?;
    ps.status = RunStatus::Complete;
    w.write_pair_summary(&ps)?;
    drop(hold);

    let ev = crate::loaded::load_pair(w.dir())?;
    let verdicts = judge::judge_pair(gate, &ev);
    pair_checkpoint(&w, &mut ps, None);
    drop(ps);
    let mut outcome = pair_outcome(gate, w.dir(), ev.summary.clone(), verdicts);
    outcome.summary.notes = process_notes;
    Ok(outcome)
}

/// The first `pair.json` of a pair run: `running`, the order and both model files, nothing hashed yet.
fn new_pair_summary(gate: &GateSpec, pair: &PairSpec) -> evidence::PairSummary {
    evidence::PairSummary {
        schema: evidence::PAIR_SCHEMA.into(),
        status: RunStatus::Running,
        gate: gate.name.clone(),
        gate_file: gate.file.display().to_string(),
        started_utc: evidence::now_utc(),
        ended_utc: None,
        host: evidence::host_info(),
        load_avg_start: evidence::load_avg(),
        load_avg_end: None,
        order: pair.order.clone(),
        model_file_ours: pair.ours.model_file.clone(),
        model_file_theirs: pair.theirs.model_file.clone(),
        model_sha256: None,
        model_bytes: None,
        model_sha256_after: None,
        failure: None,
        arms: Vec::new(),
    }
}

/// Before any arm (the hold taken): the gate's setup, each derived model's provenance, and the one model
/// file both arms load, hashed. Returns its sha256 and size; Err(`setup_failed: ...`,
/// `pair_model_mismatch: ...`, `model_file_unreadable: ...`) voids the pair before any serve starts.
fn prepare(
    gate: &GateSpec,
    pair: &PairSpec,
    w: &EvidenceWriter,
    ps: &mut evidence::PairSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(String, u64), ServeFailure> {
    if !gate.serve.setup.is_empty() {
        progress(&Step::Setup(gate.serve.setup.join(" ")));
        if let Err(reason) = super::setup::run_setup(
            &gate.serve.setup,
            &gate.serve.env,
            &w.path(crate::evidence::layout::SETUP_LOG),
            &mut |wt| progress(&Step::Waiting(wt.clone())),
        ) {
            pair_checkpoint(w, ps, None);
            return Err(ServeFailure::new(FailureCode::SetupFailed, reason));
        }
    }
    let source = |a: &crate::spec::ArmSpec| a.derived_from.clone().unwrap_or(a.model_file.clone());
    let derived = [&pair.ours, &pair.theirs]
        .into_iter()
        .filter(|a| a.derived_from.is_some())
        .map(derived_provenance)
        .collect::<Result<Vec<String>, ServeFailure>>();
    for note in derived.as_deref().unwrap_or_default() {
        progress(&Step::Note(note.clone()));
    }
    // A model of gigabytes takes seconds to hash: the wait says so (2 s, then every 10 s).
    let hashed = derived.and_then(|_| {
        super::send::paced(
            || pair_model(&source(&pair.ours), &source(&pair.theirs)),
            &mut |secs| {
                progress(&Step::Waiting(crate::io::progress::Waiting::new(
                    "hashing the model file",
                    secs,
                    Some(&source(&pair.ours)),
                )))
            },
        )
    });
    match hashed {
        Err(f) => {
            progress(&Step::Note(f.to_string()));
            Err(f)
        }
        Ok((sha, bytes)) => {
            progress(&Step::Note(format!(
                "model file sha256 {sha} ({bytes} bytes)"
            )));
            Ok((sha, bytes))
        }
    }
}

/// Each arm in `pair.order`: its own run directory, `run.json` and serve ([`single::drive_target`]),
/// finished as a plain run is. An evidence error ends the pair `failed` and is returned.
fn run_arms(
    gate: &GateSpec,
    pair: &PairSpec,
    w: &EvidenceWriter,
    ps: &mut evidence::PairSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    for (i, role) in pair.order.iter().enumerate() {
        let arm = pair.arm(role);
        let name = crate::evidence::layout::arm_dir(i + 1, role);
        progress(&Step::ArmStarted {
            arm: name.clone(),
            runtime: arm.runtime.clone(),
        });
        pair_checkpoint(w, ps, None);
        let aw = lifecycle::writer(gate, EvidenceWriter::create_exact(&w.path(&name))?);
        let _arm_active = ActiveRun::new(aw.path(crate::evidence::layout::RUN_FILE));
        aw.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
        ps.arms.push(evidence::ArmRecord {
            arm: i + 1,
            role: role.clone(),
            runtime: arm.runtime.clone(),
            dir: name.clone(),
        });
        w.write_pair_summary(ps)?;
        let mut summary = lifecycle::new_summary(gate);
        summary.notes.push(format!(
            "arm {} of pair {} ({role}: {})",
            i + 1,
            gate.name,
            arm.runtime
        ));
        aw.write_summary(&summary)?;
        let mode = ServeMode::Command(arm.command.clone());
        let target = Target {
            mode: &mode,
            env: &arm.env,
            setup: false,
        };
        let mut arm_progress = |step: &Step| {
            progress(&Step::Arm {
                arm: name.clone(),
                step: Box::new(step.clone()),
            })
        };
        let result = single::drive_target(gate, &target, &aw, &mut summary, &mut arm_progress);
        pair_checkpoint(w, ps, Some((&aw, &mut summary)));
        if let Err(e) = lifecycle::finish_run(&aw, &mut summary, result) {
            ps.status = RunStatus::Failed;
            ps.ended_utc = Some(evidence::now_utc());
            ps.failure = Some(format!("evidence write failed in {name}: {e}"));
            let _ = w.write_pair_summary(ps);
            return Err(e);
        }
    }
    Ok(())
}

/// After the last arm: the model file hashed again (`model_sha256_after`); Some(`model_changed_during_run:
/// ...`) when it changed or cannot be read. Nothing when it was not hashed before.
fn model_after(pair: &PairSpec, ps: &mut evidence::PairSummary) -> Option<ServeFailure> {
    let before = ps.model_sha256.as_ref()?;
    let ours_source = pair
        .ours
        .derived_from
        .as_ref()
        .unwrap_or(&pair.ours.model_file);
    let changed = |detail: String| ServeFailure::new(FailureCode::ModelChangedDuringRun, detail);
    match crate::io::hash::sha256_file(Path::new(ours_source)) {
        Ok((after, _)) => {
            let f = (&after != before).then(|| {
                changed(format!(
                    "sha256 {} before the first arm, {} after the last",
                    &before[..16],
                    &after[..16]
                ))
            });
            ps.model_sha256_after = Some(after);
            f
        }
        Err(e) => Some(changed(format!(
            "cannot re-read {}: {e}",
            pair.ours.model_file
        ))),
    }
}

/// The outcome of a judged pair run in `dir` (`pair.json` = `ps`): a summary of the whole pair (`serve.mode` =
/// `pair`, no requests; times, load and failure from `pair.json`). Used by the runner and `servegate judge`.
pub fn pair_outcome(
    gate: &GateSpec,
    dir: &Path,
    ps: evidence::PairSummary,
    verdicts: Vec<crate::judge::Verdict>,
) -> RunOutcome {
    let mut summary = lifecycle::new_summary(gate);
    summary.status = RunStatus::Complete;
    summary.started_utc = ps.started_utc.clone();
    summary.ended_utc = ps.ended_utc.clone();
    summary.load_avg_start = ps.load_avg_start;
    summary.load_avg_end = ps.load_avg_end;
    summary.serve.mode = "pair".into();
    summary.serve.failure = ps.failure.clone();
    RunOutcome {
        dir: dir.to_path_buf(),
        summary,
        verdicts,
        pair: Some(ps),
    }
}

/// The pair's checkpoint: if a stop signal has arrived, marks the arm in progress (when given) and
/// `pair.json` `interrupted` and exits the process (130/143/129). Else does nothing.
fn pair_checkpoint(
    w: &EvidenceWriter,
    ps: &mut evidence::PairSummary,
    arm: Option<(&EvidenceWriter, &mut RunSummary)>,
) {
    if let Some(signo) = crate::io::signals::interrupted() {
        crate::io::signals::finalize_interrupted(signo, || {
            if let Some((aw, summary)) = arm {
                lifecycle::mark_interrupted(summary, signo);
                let _ = aw.write_summary(summary);
            }
            ps.status = RunStatus::Interrupted;
            ps.ended_utc = Some(evidence::now_utc());
            ps.failure.get_or_insert_with(|| {
                format!(
                    "interrupted by {}: the pair was stopped before it finished",
                    crate::io::signals::signal_name(signo)
                )
            });
            let _ = w.write_pair_summary(ps);
        });
    }
}

/// sha256 and size of the model file both arms load; refuses two different files before any serve starts
/// (`pair_model_mismatch`), and a file that cannot be read (`model_file_unreadable`).
fn pair_model(ours: &str, theirs: &str) -> Result<(String, u64), ServeFailure> {
    let hash = |f: &str| {
        crate::io::hash::sha256_file(Path::new(f)).map_err(|e| {
            ServeFailure::new(
                FailureCode::ModelFileUnreadable,
                format!("model file {f}: {e}"),
            )
        })
    };
    let same_path = match (std::fs::canonicalize(ours), std::fs::canonicalize(theirs)) {
        (Ok(a), Ok(b)) => a == b,
        _ => ours == theirs,
    };
    if same_path {
        return hash(ours);
    }
    let (a, b) = (hash(ours)?, hash(theirs)?);
    if a.0 != b.0 {
        return Err(ServeFailure::new(
            FailureCode::PairModelMismatch,
            format!(
                "ours loads {ours} (sha256 {}), theirs loads {theirs} (sha256 {}): a pair compares two runtimes on one model file",
                &a.0[..16],
                &b.0[..16]
            ),
        ));
    }
    Ok(a)
}

/// For an arm whose model is derived from another file (`derived_from`, e.g. vLLM's float32 copy of a
/// GGUF): checks that `model_file/servegate-provenance.json` names the source file's sha256, and returns the
/// note saying which file the arm loads and from what (`theirs loads DIR: float32, derived from FILE
/// (sha256 ...), derived digest ...`). Errors are `pair_model_mismatch: ...`.
fn derived_provenance(arm: &crate::spec::ArmSpec) -> Result<String, ServeFailure> {
    let mismatch = |detail: String| ServeFailure::new(FailureCode::PairModelMismatch, detail);
    let src = arm.derived_from.as_deref().unwrap_or(&arm.model_file);
    let prov_path = Path::new(&arm.model_file).join("servegate-provenance.json");
    let prov: serde_json::Value = std::fs::read_to_string(&prov_path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| {
            mismatch(format!(
                "{} loads {}, said to be derived from {src}, but {}: {e}",
                arm.role,
                arm.model_file,
                prov_path.display()
            ))
        })?;
    let (sha, _) = crate::io::hash::sha256_file(Path::new(src))
        .map_err(|e| mismatch(format!("model file {src}: {e}")))?;
    let field = |k: &str| {
        prov.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string()
    };
    if field("source_sha256") != sha {
        return Err(mismatch(format!(
            "{} loads {}, whose provenance names source sha256 {}, but {src} has sha256 {}",
            arm.role,
            arm.model_file,
            field("source_sha256"),
            sha
        )));
    }
    Ok(format!(
        "{} loads {}: {}, derived from {src} (sha256 {sha}) by transformers {}, derived digest {}",
        arm.role,
        arm.model_file,
        field("dtype"),
        field("transformers"),
        field("derived_digest")
    ))
}
