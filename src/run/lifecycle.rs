//! What every live run (a plain gate, a pair, each arm of a pair) does around its steps: the process's
//! preparation, the run registered with the signal handler while it lives, the hold, the first `run.json`,
//! the stop-signal checkpoints and the end of the run.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::EvidenceError;
use crate::evidence::{self, EvidenceWriter, RunStatus, RunSummary, ServeRecord};
use crate::sinks::events::Step;
use crate::spec::GateSpec;
use crate::vocab::{FailureCode, ServeFailure};

/// Where run directories go: `$SERVEGATE_RUNS`, default `target/servegate/runs` under the current directory.
pub fn runs_root() -> PathBuf {
    match std::env::var_os("SERVEGATE_RUNS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("target/servegate/runs"),
    }
}

/// Process-wide preparation of a live run: the stop-signal handlers and the child subreaper. Returns
/// notes for `run.json` about what could not be set up.
pub(super) fn prepare_process() -> Vec<String> {
    // A stop signal that came before this run (between two gates): nothing more starts.
    crate::io::signals::checkpoint();
    let mut notes = Vec::new();
    if let Err(e) = crate::io::signals::install() {
        notes.push(format!("signal handlers not installed: {e}"));
    }
    if let Err(e) = crate::io::signals::become_subreaper() {
        notes.push(format!(
            "not a child subreaper ({e}): a daemon the serve detaches is found by its tag only"
        ));
    }
    notes
}

/// A run registered with [`crate::io::signals::run_started`] for as long as it lives.
pub(super) struct ActiveRun(PathBuf);

impl ActiveRun {
    pub(super) fn new(run_json: PathBuf) -> ActiveRun {
        crate::io::signals::run_started(&run_json);
        ActiveRun(run_json)
    }
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        crate::io::signals::run_ended(&self.0);
    }
}

/// The end of a run (a plain gate or one arm of a pair): sets `ended_utc` and the final status and writes
/// `run.json` once. A stop signal that arrived: `interrupted`, and the process exits (see
/// [`super::runner::run`]). An evidence error during the run: `failed`, with the error in the notes, and
/// the error is returned. Else `complete`.
pub(super) fn finish_run(
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    result: Result<(), EvidenceError>,
) -> Result<(), EvidenceError> {
    summary.ended_utc = Some(evidence::now_utc());
    summary.load_avg_end = evidence::load_avg();
    interrupted_checkpoint(w, summary);
    // The serve has stopped: its log is capped on disk (evidence::log_cap), then it and the setup log take
    // the privacy rule before anything is judged.
    let result = result.and_then(|()| w.cap_serve_log()).and_then(|note| {
        summary.notes.extend(note);
        w.publish_logs()
    });
    match result {
        Err(e) => {
            summary.status = RunStatus::Failed;
            summary
                .notes
                .push(format!("evidence write failed: {e}; the run is not judged"));
            // Best effort: if even this write fails, run.json still says `running`, never `complete`.
            let _ = w.write_summary(summary);
            Err(e)
        }
        Ok(()) => {
            summary.status = RunStatus::Complete;
            w.write_summary(summary)
        }
    }
}

/// If a stop signal has arrived: writes `run.json` with `status: "interrupted"` and a note, prints the
/// interrupted line and exits the process (130/143/129). Else does nothing.
pub(super) fn interrupted_checkpoint(w: &EvidenceWriter, summary: &mut RunSummary) {
    if let Some(signo) = crate::io::signals::interrupted() {
        crate::io::signals::finalize_interrupted(signo, || {
            mark_interrupted(summary, signo);
            if summary.requests.is_empty() {
                summary.requests = evidence::read_progress(w.dir()).unwrap_or_default();
            }
            let _ = w.write_summary(summary);
        });
    }
}

/// Marks `summary` interrupted by `signo`: status, end time (when not set) and the note saying so.
pub(super) fn mark_interrupted(summary: &mut RunSummary, signo: i32) {
    summary.status = RunStatus::Interrupted;
    if summary.ended_utc.is_none() {
        summary.ended_utc = Some(evidence::now_utc());
    }
    summary.notes.push(format!(
        "interrupted by {}: the run was stopped before it finished; nothing is judged",
        crate::io::signals::signal_name(signo)
    ));
}

/// Takes the gate's `[hold]`, if it has one: Ok(None) without a hold, Err(`hold_timeout: ...`) when it could
/// not be had in `wait_s`, Err(`hold: ...`) when its lock file could not be used.
pub(super) fn take_hold(
    gate: &GateSpec,
    progress: &mut dyn FnMut(&Step),
) -> Result<Option<crate::io::hold::Hold>, ServeFailure> {
    match gate
        .hold
        .as_ref()
        .and_then(|h| h.lock.as_ref().map(|l| (h, l)))
    {
        None => Ok(None),
        Some((h, lock)) => crate::io::hold::take(
            lock,
            &gate.name,
            Duration::from_secs_f64(h.wait_s),
            &mut |w| progress(&Step::Waiting(w.clone())),
        )
        .map(Some)
        .map_err(|reason| {
            // io::hold writes `hold_timeout: ...` or `hold: cannot ...`.
            ServeFailure::parse(&reason)
                .filter(|f| {
                    matches!(
                        f.code,
                        FailureCode::HoldTimeout | FailureCode::HoldUnavailable
                    )
                })
                .unwrap_or_else(|| ServeFailure::new(FailureCode::HoldUnavailable, reason))
        }),
    }
}

/// The `run.json` of a run of `gate` that is starting: `running`, times, host and plan; no serve facts yet.
pub(super) fn new_summary(gate: &GateSpec) -> RunSummary {
    RunSummary {
        schema: evidence::RUN_SCHEMA.into(),
        status: RunStatus::Running,
        gate: gate.name.clone(),
        gate_file: gate.file.display().to_string(),
        started_utc: evidence::now_utc(),
        ended_utc: None,
        host: evidence::host_info(),
        load_avg_start: evidence::load_avg(),
        load_avg_end: None,
        servegate_version: env!("CARGO_PKG_VERSION").into(),
        serve: ServeRecord::default(),
        planned: Some(planned_judged(gate)),
        planned_warmup: Some(gate.request.warmup_requests as usize),
        requests: Vec::new(),
        notes: Vec::new(),
        imported: None,
    }
}

/// Judged (non-warmup) requests a run of `gate` plans: `repeats × prompts` (recorded as `run.json`
/// `planned`; judging counts every one of them).
pub fn planned_judged(gate: &GateSpec) -> usize {
    gate.request.repeats as usize * gate.request.prompts.len()
}

/// True when the gate opts in to its host name in evidence and records (`[record] publish_host = true`;
/// docs/evidence.md "Privacy").
pub(super) fn publishes_host(gate: &GateSpec) -> bool {
    gate.record
        .as_ref()
        .and_then(|t| t.get("publish_host"))
        .and_then(|v| v.as_bool())
        == Some(true)
}

/// A new evidence writer for a run of `gate` in `dir`-to-be: the gate's host publishing and log cap.
pub(super) fn writer(gate: &GateSpec, w: EvidenceWriter) -> EvidenceWriter {
    w.publish_host(publishes_host(gate))
        .log_cap(gate.serve.log_cap_bytes)
}
