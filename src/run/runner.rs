//! The runner: one live run of a gate. Starts (or reaches) the serve, sends the requests, stops the serve and
//! writes the evidence; then judging reads the evidence back. The only module that sequences I/O; it measures
//! and judges nothing itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::analysis;
use crate::error::EvidenceError;
use crate::evidence::{self, EvidenceWriter, RequestRecord, RunStatus, RunSummary, ServeRecord};
use crate::io::client;
use crate::io::serve;
use crate::judge;
use crate::sinks::events::Step;
use crate::spec::{GateSpec, ServeMode};

/// Where run directories go: `$SERVEGATE_RUNS`, default `target/servegate/runs` under the current directory.
pub fn runs_root() -> PathBuf {
    match std::env::var_os("SERVEGATE_RUNS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("target/servegate/runs"),
    }
}

pub use crate::judge::outcome::RunOutcome;

/// Runs `gate` live, writing evidence under `root`, then judges it. `progress` receives each [`Step`]
/// (`serve ready after 1.2 s`), for a terminal.
///
/// Installs the stop-signal handlers ([`crate::io::signals::install`]) and makes the runner a child subreaper.
/// Once SIGINT, SIGTERM or SIGHUP has arrived, whatever the request loop saw, the run ends as
/// interrupted: `run.json` is written with `status: "interrupted"`, `INTERRUPTED: ...` is printed on stderr
/// and the process exits with 130, 143 or 129; nothing is judged and this function does not return.
///
/// Errors: an evidence write failed; `run.json` then says `failed` (when it can still be written), never
/// `complete`.
pub fn run(
    gate: &GateSpec,
    root: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<RunOutcome, EvidenceError> {
    if gate.pair.is_some() {
        return run_pair(gate, root, progress);
    }
    let notes = prepare_process();
    let w = EvidenceWriter::create(root, &gate.name, &evidence::stamp_utc())?
        .publish_host(publishes_host(gate))
        .log_cap(gate.serve.log_cap_bytes);
    let _active = ActiveRun::new(w.path(crate::evidence::layout::RUN_FILE));
    let mut summary = new_summary(gate);
    summary.notes.extend(notes);
    w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
    w.write_summary(&summary)?;
    progress(&Step::EvidenceDir(w.dir().to_path_buf()));

    let hold = take_hold(gate, progress);
    let result = match &hold {
        Err(reason) => {
            summary.serve.failure = Some(reason.clone());
            Ok(())
        }
        Ok(h) => {
            if let Some(h) = h {
                summary.notes.push(format!(
                    "hold {} taken after {:.0} ms",
                    gate.hold
                        .as_ref()
                        .and_then(|x| x.lock.as_ref())
                        .map(|l| l.display().to_string())
                        .unwrap_or_default(),
                    h.waited_ms
                ));
            }
            drive(gate, &w, &mut summary, progress)
        }
    };
    finish_run(&w, &mut summary, result)?;

    drop(hold);
    let ev = analysis::load(w.dir())?;
    let mut verdicts = judge::judge_with(gate, &ev, &judge::JudgeInputs::load(gate, &ev));
    verdicts.extend(crate::run::load::judge_dir(gate, w.dir()));
    // A signal that arrived while judging: the run still ends interrupted, its verdicts never shown.
    interrupted_checkpoint(&w, &mut summary);
    // The outcome states what the evidence says (as written: the privacy rule applied), as a re-judge would.
    drop(summary);
    Ok(RunOutcome {
        dir: w.dir().to_path_buf(),
        summary: ev.run.clone(),
        verdicts,
        pair: None,
    })
}

/// Process-wide preparation of a live run: the stop-signal handlers and the child subreaper. Returns
/// notes for `run.json` about what could not be set up.
fn prepare_process() -> Vec<String> {
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
struct ActiveRun(PathBuf);

impl ActiveRun {
    fn new(run_json: PathBuf) -> ActiveRun {
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
/// `run.json` once. A stop signal that arrived: `interrupted`, and the process exits (see [`run`]). An
/// evidence error during the run: `failed`, with the error in the notes, and the error is returned. Else
/// `complete`.
fn finish_run(
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
fn interrupted_checkpoint(w: &EvidenceWriter, summary: &mut RunSummary) {
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

fn mark_interrupted(summary: &mut RunSummary, signo: i32) {
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
/// not be had in `wait_s`.
fn take_hold(
    gate: &GateSpec,
    progress: &mut dyn FnMut(&Step),
) -> Result<Option<crate::io::hold::Hold>, String> {
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
            &mut |line: &str| progress(&Step::Note(line.to_string())),
        )
        .map(Some),
    }
}

fn new_summary(gate: &GateSpec) -> RunSummary {
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
        planned_warmup: Some(gate.request.warmup as usize * gate.request.prompts.len()),
        requests: Vec::new(),
        notes: Vec::new(),
    }
}

/// Judged (non-warmup) requests a run of `gate` plans: `repeats × prompts` (recorded as `run.json`
/// `planned`; judging counts every one of them).
pub fn planned_judged(gate: &GateSpec) -> usize {
    gate.request.repeats as usize * gate.request.prompts.len()
}

/// sha256 and size of the model file both arms load; refuses two different files before any serve starts.
fn pair_model(ours: &str, theirs: &str) -> Result<(String, u64), String> {
    let hash = |f: &str| {
        crate::io::hash::sha256_file(Path::new(f)).map_err(|e| format!("model file {f}: {e}"))
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
        return Err(format!(
            "pair_model_mismatch: ours loads {ours} (sha256 {}), theirs loads {theirs} (sha256 {}): a pair compares two runtimes on one model file",
            &a.0[..16],
            &b.0[..16]
        ));
    }
    Ok(a)
}

/// For an arm whose model is derived from another file (`derived_from`, e.g. vLLM's float32 copy of a
/// GGUF): checks that `model_file/servegate-provenance.json` names the source file's sha256, and returns the
/// note saying which file the arm loads and from what (`theirs loads DIR: float32, derived from FILE
/// (sha256 ...), derived digest ...`). Errors are `pair_model_mismatch: ...`.
fn derived_provenance(arm: &crate::spec::ArmSpec) -> Result<String, String> {
    let src = arm.derived_from.as_deref().unwrap_or(&arm.model_file);
    let prov_path = Path::new(&arm.model_file).join("servegate-provenance.json");
    let prov: serde_json::Value = std::fs::read_to_string(&prov_path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| {
            format!(
                "pair_model_mismatch: {} loads {}, said to be derived from {src}, but {}: {e}",
                arm.role,
                arm.model_file,
                prov_path.display()
            )
        })?;
    let (sha, _) = crate::io::hash::sha256_file(Path::new(src))
        .map_err(|e| format!("pair_model_mismatch: model file {src}: {e}"))?;
    let field = |k: &str| {
        prov.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("?")
            .to_string()
    };
    if field("source_sha256") != sha {
        return Err(format!(
            "pair_model_mismatch: {} loads {}, whose provenance names source sha256 {}, but {src} has sha256 {}",
            arm.role,
            arm.model_file,
            field("source_sha256"),
            sha
        ));
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

/// Runs a pair gate: the model file hashed once, then each arm in order (start its serve, send every request,
/// stop it) into `arm<N>-<role>/` run directories, the model file hashed again, and the pair judged.
fn run_pair(
    gate: &GateSpec,
    root: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<RunOutcome, EvidenceError> {
    let pair = gate.pair.as_ref().expect("pair gate");
    let process_notes = prepare_process();
    let w = EvidenceWriter::create(root, &gate.name, &evidence::stamp_utc())?
        .publish_host(publishes_host(gate))
        .log_cap(gate.serve.log_cap_bytes);
    let _active = ActiveRun::new(w.path(crate::evidence::layout::PAIR_FILE));
    w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
    let mut ps = evidence::PairSummary {
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
    };
    w.write_pair_summary(&ps)?;
    progress(&Step::PairEvidenceDir(w.dir().to_path_buf()));

    let hold = take_hold(gate, progress);
    if let Err(reason) = &hold {
        ps.failure = Some(reason.clone());
    }
    let mut setup_ok = hold.is_ok();
    if setup_ok && !gate.serve.setup.is_empty() {
        progress(&Step::Setup(gate.serve.setup.join(" ")));
        if let Err(reason) = run_setup(
            &gate.serve.setup,
            &gate.serve.env,
            &w.path(crate::evidence::layout::SETUP_LOG),
        ) {
            pair_checkpoint(&w, &mut ps, None);
            ps.failure = Some(format!("setup_failed: {reason}"));
            setup_ok = false;
        }
    }
    if setup_ok {
        let source =
            |a: &crate::spec::ArmSpec| a.derived_from.clone().unwrap_or(a.model_file.clone());
        let derived = [&pair.ours, &pair.theirs]
            .into_iter()
            .filter(|a| a.derived_from.is_some())
            .map(derived_provenance)
            .collect::<Result<Vec<String>, String>>();
        for note in derived.as_deref().unwrap_or_default() {
            progress(&Step::Note(note.clone()));
        }
        match derived.and_then(|_| pair_model(&source(&pair.ours), &source(&pair.theirs))) {
            Err(reason) => {
                progress(&Step::Note(reason.clone()));
                ps.failure = Some(reason);
            }
            Ok((sha, bytes)) => {
                progress(&Step::Note(format!(
                    "model file sha256 {sha} ({bytes} bytes)"
                )));
                ps.model_sha256 = Some(sha);
                ps.model_bytes = Some(bytes);
            }
        }
    }
    w.write_pair_summary(&ps)?;

    if ps.failure.is_none() {
        for (i, role) in pair.order.iter().enumerate() {
            let arm = pair.arm(role);
            let name = crate::evidence::layout::arm_dir(i + 1, role);
            progress(&Step::ArmStarted {
                arm: name.clone(),
                runtime: arm.runtime.clone(),
            });
            pair_checkpoint(&w, &mut ps, None);
            let aw = EvidenceWriter::create_exact(&w.path(&name))?
                .publish_host(publishes_host(gate))
                .log_cap(gate.serve.log_cap_bytes);
            let _arm_active = ActiveRun::new(aw.path(crate::evidence::layout::RUN_FILE));
            aw.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
            ps.arms.push(evidence::ArmRecord {
                arm: i + 1,
                role: role.clone(),
                runtime: arm.runtime.clone(),
                dir: name.clone(),
            });
            w.write_pair_summary(&ps)?;
            let mut summary = new_summary(gate);
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
            let result = drive_target(gate, &target, &aw, &mut summary, &mut arm_progress);
            pair_checkpoint(&w, &mut ps, Some((&aw, &mut summary)));
            if let Err(e) = finish_run(&aw, &mut summary, result) {
                ps.status = RunStatus::Failed;
                ps.ended_utc = Some(evidence::now_utc());
                ps.failure = Some(format!("evidence write failed in {name}: {e}"));
                let _ = w.write_pair_summary(&ps);
                return Err(e);
            }
        }
        if let Some(before) = &ps.model_sha256 {
            let ours_source = pair
                .ours
                .derived_from
                .as_ref()
                .unwrap_or(&pair.ours.model_file);
            match crate::io::hash::sha256_file(Path::new(ours_source)) {
                Ok((after, _)) => {
                    if &after != before {
                        ps.failure = Some(format!("model_changed_during_run: sha256 {} before the first arm, {} after the last", &before[..16], &after[..16]));
                    }
                    ps.model_sha256_after = Some(after);
                }
                Err(e) => {
                    ps.failure = Some(format!(
                        "model_changed_during_run: cannot re-read {}: {e}",
                        pair.ours.model_file
                    ))
                }
            }
        }
    }
    ps.ended_utc = Some(evidence::now_utc());
    ps.load_avg_end = evidence::load_avg();
    pair_checkpoint(&w, &mut ps, None);
    w.publish_logs()?;
    ps.status = RunStatus::Complete;
    w.write_pair_summary(&ps)?;
    drop(hold);

    let ev = analysis::load_pair(w.dir())?;
    let verdicts = judge::judge_pair(gate, &ev);
    pair_checkpoint(&w, &mut ps, None);
    drop(ps);
    let mut outcome = pair_outcome(gate, w.dir(), ev.summary.clone(), verdicts);
    outcome.summary.notes = process_notes;
    Ok(outcome)
}

/// The outcome of a judged pair run in `dir` (`pair.json` = `ps`): a summary of the whole pair (`serve.mode` =
/// `pair`, no requests; times, load and failure from `pair.json`). Used by the runner and `servegate judge`.
pub fn pair_outcome(
    gate: &GateSpec,
    dir: &Path,
    ps: evidence::PairSummary,
    verdicts: Vec<crate::judge::Verdict>,
) -> RunOutcome {
    let mut summary = new_summary(gate);
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
                mark_interrupted(summary, signo);
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

fn fill_runtime(s: &str, host: &str, port: u16) -> String {
    s.replace("{port}", &port.to_string())
        .replace("{host}", host)
}

/// How one run (a plain gate, or one arm of a pair) reaches its serve.
struct Target<'a> {
    mode: &'a ServeMode,
    env: &'a std::collections::BTreeMap<String, String>,
    setup: bool,
}

fn drive(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let target = Target {
        mode: &gate.serve.mode,
        env: &gate.serve.env,
        setup: true,
    };
    drive_target(gate, &target, w, summary, progress)
}

/// [`drive_target_inner`], and with an API key: progress lines masked as printed, and afterwards (every return
/// path) the key masked in every file of the run directory and in the summary (`crate::judge::redact`).
fn drive_target(
    gate: &GateSpec,
    target: &Target,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let Some(secret) = crate::judge::redact::secret_of(gate) else {
        return drive_target_inner(gate, target, w, summary, progress);
    };
    let mut masked =
        |step: &Step| progress(&step.map_text(&|t| crate::judge::redact::mask_str(t, &secret)));
    let result = drive_target_inner(gate, target, w, summary, &mut masked);
    let files = crate::judge::redact::scrub_dir(w.dir(), &secret);
    crate::judge::redact::mask_summary(summary, &secret);
    if !files.is_empty() {
        let list: Vec<String> = files
            .iter()
            .map(|(p, n)| {
                format!(
                    "{} ({n})",
                    p.file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or_default()
                )
            })
            .collect();
        summary.notes.push(format!(
            "the API key (serve.api_key_env) echoed by the serve was masked in: {}",
            list.join(", ")
        ));
    }
    result
}

fn drive_target_inner(
    gate: &GateSpec,
    target: &Target,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let spec = &gate.serve;
    // Every process the run starts carries this tag, so that whatever they leave behind is found.
    let tag = crate::io::signals::new_run_tag();
    // Setup (idempotent provisioning).
    if target.setup && !spec.setup.is_empty() {
        progress(&Step::Setup(spec.setup.join(" ")));
        let t = Instant::now();
        let setup_result = run_setup(
            &spec.setup,
            &spec.env,
            &w.path(crate::evidence::layout::SETUP_LOG),
        );
        if crate::io::signals::interrupted().is_some() {
            return Ok(());
        }
        match setup_result {
            Ok(status) => {
                summary.serve.setup =
                    Some(format!("{status} in {:.1} s", t.elapsed().as_secs_f64()))
            }
            Err(reason) => {
                summary.serve.setup = Some(reason.clone());
                summary.serve.failure = Some(format!("setup_failed: {reason}"));
                progress(&Step::SetupFailed(reason.to_string()));
                return Ok(());
            }
        }
    }

    let api_key = match &spec.api_key_env {
        None => None,
        Some(var) => {
            match std::env::var(var) {
                Ok(k) if !k.is_empty() => match crate::judge::redact::check_key(&k) {
                    Ok(()) => Some(k),
                    Err(why) => {
                        summary.serve.failure = Some(format!("api_key_unsafe: environment variable {var} (serve.api_key_env): {why}; the serve was not started"));
                        return Ok(());
                    }
                },
                _ => {
                    summary.serve.failure = Some(format!("api_key_missing: environment variable {var} (serve.api_key_env) is not set"));
                    return Ok(());
                }
            }
        }
    };
    // Every chat request goes through the sender (timed the way the load client times them); probes and
    // the other GETs share its reqwest client.
    let sender = match client::Sender::new(
        Duration::from_secs_f64(gate.request.timeout_s),
        api_key.as_deref(),
    ) {
        Ok(c) => c,
        Err(e) => {
            summary.serve.failure = Some(format!("http_client: {e}"));
            return Ok(());
        }
    };
    let http = sender.http().clone();

    let mut started: Option<serve::Serve> = None;
    let mut base_url;
    match target.mode {
        ServeMode::Command(argv) => {
            let port = if spec.port == 0 {
                match crate::io::port::free_port(&spec.host) {
                    Ok(p) => p,
                    Err(e) => {
                        summary.serve.failure = Some(format!("no_free_port: {e}"));
                        return Ok(());
                    }
                }
            } else {
                spec.port
            };
            let command: Vec<String> = argv
                .iter()
                .map(|a| fill_runtime(a, &spec.host, port))
                .collect();
            // `[hold] command`: the serve runs under the fleet's hold wrapper (the evidence shows the whole argv).
            let command = crate::io::hold::wrap(gate.hold.as_ref(), &command);
            let env: Vec<(String, String)> = spec
                .env
                .iter()
                .chain(target.env.iter())
                .map(|(k, v)| (k.clone(), fill_runtime(v, &spec.host, port)))
                .chain(std::iter::once((
                    crate::io::signals::RUN_TAG_ENV.to_string(),
                    tag.clone(),
                )))
                .collect();
            summary.serve.mode = "command".into();
            summary.serve.command = command.clone();
            summary.serve.base_url = format!("http://{}:{port}", url_host(&spec.host));
            summary.serve.model_file = crate::evidence::hash_model(&gate.request.model, &command);
            w.write_summary(summary)?;
            let sspec = serve::ServeSpec {
                command,
                env,
                cwd: None,
                host: spec.host.clone(),
                port,
                ready_path: spec.ready_path.clone(),
                ready_timeout: Duration::from_secs_f64(spec.ready_timeout_s),
                poll_interval: Duration::from_millis(25),
                stop_grace: Duration::from_secs_f64(spec.stop_grace_s),
                log_path: w.path(crate::evidence::layout::SERVE_LOG),
            };
            progress(&Step::ServeStarting {
                port,
                command: summary.serve.command.join(" "),
            });
            let mut s = match serve::Serve::start(sspec) {
                Ok(s) => s,
                Err(e) => {
                    summary.serve.failure = Some(e.to_string());
                    progress(&Step::ServeFailedToStart(e.to_string()));
                    return Ok(());
                }
            };
            summary.serve.pid = Some(s.pid());
            match s.wait_ready() {
                Ok(info) => {
                    summary.serve.ready_ms = Some(info.ready_ms);
                    summary.serve.ready_timeline = info.statuses.clone();
                    progress(&Step::ServeReady {
                        ready_ms: info.ready_ms,
                        polls: info.polls as u64,
                    });
                }
                Err(_) if crate::io::signals::interrupted().is_some() => {
                    // The stop signal's teardown ended the serve: an interruption, not a serve
                    // that failed (run() ends the run as interrupted).
                    let stop = s.stop();
                    summary.serve.stop = Some(describe_stop(&stop));
                    return Ok(());
                }
                Err(e) => {
                    summary.serve.failure = Some(e.to_string());
                    progress(&Step::ServeNeverReady(e.to_string()));
                    let stop = s.stop();
                    summary.serve.stop = Some(describe_stop(&stop));
                    return Ok(());
                }
            }
            base_url = s.base_url();
            // For a host that is a name, the address that answered readiness (requests go there).
            summary.serve.base_url = base_url.clone();
            started = Some(s);
        }
        ServeMode::Url(url) => {
            if let Some(log) = &spec.log_file {
                summary.serve.log_file = Some(crate::evidence::log_file_start(log));
            }
            summary.serve.mode = "url".into();
            summary.serve.base_url = url.clone();
            base_url = url.clone();
            let t = Instant::now();
            let deadline = Duration::from_secs_f64(spec.ready_timeout_s);
            let by_name = name_http_url(url);
            let mut steady_404: Option<(Instant, u32)> = None;
            loop {
                if crate::io::signals::interrupted().is_some() {
                    return Ok(()); // run() ends the run as interrupted
                }
                let ready_url = format!("{url}{}", spec.ready_path);
                let probe_t = Duration::from_secs(5);
                let (outcome, answered) = by_name
                    .as_ref()
                    .and_then(|(host, port)| {
                        let addrs = serve::probe_addrs(host, *port);
                        serve::probe_each(&http, &addrs, &spec.ready_path, probe_t)
                    })
                    .unwrap_or_else(|| (client::probe(&http, &ready_url, probe_t), None));
                let last = match outcome {
                    client::Probe::Status(200, _) => {
                        summary.serve.ready_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
                        if let Some(a) = answered {
                            // Pinned: every request goes to the address that answered readiness.
                            base_url = pinned_url(url, a);
                            summary.serve.base_url = base_url.clone();
                        }
                        break;
                    }
                    client::Probe::Status(404, _) => {
                        let (since, n) =
                            steady_404.map_or((Instant::now(), 1), |(s, n)| (s, n + 1));
                        steady_404 = Some((since, n));
                        let span_ms = since.elapsed().as_secs_f64() * 1000.0;
                        if serve::is_steady_404(n, span_ms) {
                            summary.serve.failure = Some(format!(
                                "ready_timeout: {url}{} answered 404 on {n} probes over {:.1} s: the serve is up but has no such path; stopped waiting early. Set [serve] ready to a path it has (llama-cpp-python has no /health: ready = \"/v1/models\"; or [serve] engine, docs/runtimes.md)",
                                spec.ready_path, span_ms / 1000.0
                            ));
                            return Ok(());
                        }
                        "HTTP 404".to_string()
                    }
                    client::Probe::Status(status, _) => {
                        steady_404 = None;
                        format!("HTTP {status}")
                    }
                    // A certificate that is not trusted now will not be in a second: refuse at once.
                    client::Probe::Untrusted(e) => {
                        summary.serve.failure = Some(format!(
                            "tls_refused: {url} presented a certificate servegate does not trust (it trusts the webpki root set only, no self-signed certificates): {e}"
                        ));
                        return Ok(());
                    }
                    other => {
                        steady_404 = None;
                        other.describe()
                    }
                };
                if t.elapsed() >= deadline {
                    summary.serve.failure = Some(format!(
                        "ready_timeout: {url}{} not 200 within {} s (last: {last})",
                        spec.ready_path, spec.ready_timeout_s
                    ));
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    // What the serve says about itself; without an engine, which engine it is (spec/detect.rs).
    let log_so_far =
        std::fs::read_to_string(w.path(crate::evidence::layout::SERVE_LOG)).unwrap_or_default();
    let says = serve_says(&http, &base_url, log_so_far);
    let detected_gate;
    let (gate, engine) = match spec.engine {
        Some(e) => (gate, Some(e)),
        None => {
            let d = crate::spec::detect::detect(&says);
            let (g, applied) = match d.engine {
                Some(e) => apply_detected(gate, e),
                None => (None, Vec::new()),
            };
            progress(&Step::Note(format!(
                "engine detected: {} ({}){}",
                d.engine.map_or("none recognised", |e| e.name()),
                d.evidence.join("; "),
                if applied.is_empty() {
                    String::new()
                } else {
                    format!("; profile defaults applied: {}", applied.join(", "))
                }
            )));
            summary.serve.detected = Some(crate::evidence::DetectedEngine {
                engine: d.engine.map(|e| e.name().to_string()),
                evidence: d.evidence,
                applied,
            });
            detected_gate = g;
            (detected_gate.as_ref().unwrap_or(gate), d.engine)
        }
    };
    let spec = &gate.serve;
    let (version, version_source) = crate::spec::detect::serve_version(engine, &says).unzip();
    summary.serve.version = version;
    summary.serve.version_source = version_source;
    summary.serve.package_version =
        crate::spec::detect::package_version(engine, &says).map(|p| p.0);
    summary.serve.models = model_ids(&says);
    if let Some(expect) = &spec.expect_model {
        if !summary
            .serve
            .models
            .iter()
            .any(|m| m.contains(expect.as_str()))
        {
            summary.serve.failure = Some(format!(
                "wrong_server_answering: /v1/models lists {:?}, expected a model containing {expect:?}",
                summary.serve.models
            ));
        }
    } else if model_served(&gate.request.served_model, &summary.serve.models) == Some(false) {
        // A reply's `model` only echoes the request; /v1/models is what the serve says it serves. Without
        // `expect_model` a mismatch is worth a look but not a failure (llama.cpp answers any name).
        let note = format!(
            "model_not_listed: the requests ask for {:?}; /v1/models lists {:?} (set [serve] expect_model to make this a failure)",
            gate.request.served_model, summary.serve.models
        );
        progress(&Step::Note(note.clone()));
        summary.notes.push(note);
    }
    w.write_summary(summary)?;

    // The serve's own clock from its histograms (vLLM): /metrics before and after the requests.
    let metrics_before = (summary.serve.failure.is_none()
        && spec.clock == crate::spec::profile::ServeClock::Metrics)
        .then(|| read_metrics(&http, &base_url, w, crate::evidence::layout::METRICS_BEFORE))
        .flatten();
    if summary.serve.failure.is_none() && gate.load.is_some() {
        summary.planned = Some(0);
        crate::run::load::send_points(gate, w, summary, &base_url, api_key.as_deref(), progress)?;
    } else if summary.serve.failure.is_none() {
        send_all(
            gate,
            w,
            summary,
            &sender,
            &base_url,
            started.as_mut(),
            progress,
        )?;
    }
    if let Some(before) = metrics_before {
        if let Some(after) =
            read_metrics(&http, &base_url, w, crate::evidence::layout::METRICS_AFTER)
        {
            summary.serve.metrics = crate::evidence::serve_clock::deltas(&before, &after);
            w.write_summary(summary)?;
        }
    }

    if let Some(s) = started {
        let grace = s.spec().stop_grace.min(Duration::from_secs(5));
        if !summary.requests.is_empty() && !crate::io::signals::shutting_down() {
            s.settle(serve::SETTLE);
        }
        let stop = s.stop();
        summary.serve.stop = Some(describe_stop(&stop));
        // A serve that exited on its own after the last check still exited during the run.
        if stop.already_exited
            && summary.serve.failure.is_none()
            && !summary.requests.is_empty()
            && !crate::io::signals::shutting_down()
        {
            summary.serve.failure = Some(format!(
                "server_exited_during_run ({}, before the runner stopped it)",
                stop.exit.clone().unwrap_or_else(|| "unknown exit".into())
            ));
            summary.serve.exit_log_tail = log_tail(&w.path(crate::evidence::layout::SERVE_LOG));
        } else if serve::stop_crashed(&stop)
            && summary.serve.failure.is_none()
            && !crate::io::signals::shutting_down()
        {
            // Answered everything, then crashed on the way down: a crashed serve, whatever it answered.
            summary.serve.failure = Some(format!(
                "server_crashed_at_stop ({} when stopped)",
                stop.exit.clone().unwrap_or_else(|| "unknown exit".into())
            ));
            summary.serve.exit_log_tail = log_tail(&w.path(crate::evidence::layout::SERVE_LOG));
        }
        progress(&Step::ServeStopped(describe_stop(&stop)));
        // What the serve detached from its group (a daemon: double fork, setsid) goes too.
        let (stopped, survived) = crate::io::signals::stop_tagged(&tag, grace);
        if !stopped.is_empty() {
            progress(&Step::Note(format!(
                "stopped {} process(es) the serve left outside its group: {}",
                stopped.len(),
                stopped.join(", ")
            )));
            summary.notes.push(format!(
                "the serve left {} process(es) running outside its process group after it stopped (a detached daemon); servegate stopped them: {}{}",
                stopped.len(),
                stopped.join(", "),
                if survived.is_empty() {
                    String::new()
                } else {
                    format!("; still alive after SIGKILL: {}", survived.join(", "))
                }
            ));
        }
        summary.serve.strays_stopped = stopped;
        summary.serve.strays_survived = survived;
        // serve.log is now at its end of file: the serve's stdout and stderr are the file itself (no pipe,
        // no writer thread of servegate's that could still hold lines), and every process that could write
        // to it, its group and what it detached, is gone (a survivor is in `strays_survived`). Only now is
        // anything judged from it (the route), so a line printed at the stop is never missed.
    }
    if let (Some(log), Some(start)) = (&spec.log_file, summary.serve.log_file.as_mut()) {
        match crate::evidence::copy_log_since(
            log,
            start,
            &w.path(crate::evidence::layout::SERVE_LOG),
        ) {
            Ok(what) => start.copied = Some(what),
            Err(e) => {
                start.copied = Some(format!("not copied: {e}"));
                summary
                    .notes
                    .push(format!("serve.log_file {}: {e}", log.display()));
            }
        }
    }
    Ok(())
}

fn send_all(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    sender: &client::Sender,
    base_url: &str,
    mut serve: Option<&mut serve::Serve>,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let req = &gate.request;
    let mut plan: Vec<(bool, u32, usize)> = Vec::new();
    for round in 0..req.warmup {
        for p in 0..req.prompts.len() {
            plan.push((true, round, p));
        }
    }
    for round in 0..req.repeats {
        for p in 0..req.prompts.len() {
            plan.push((false, round, p));
        }
    }
    let run_deadline = Instant::now() + Duration::from_secs_f64(req.run_timeout_s);
    let planned = plan.len();
    for (index, (warmup, repeat, prompt_index)) in plan.into_iter().enumerate() {
        if crate::io::signals::interrupted().is_some() {
            break; // the run ends interrupted (run() exits); nothing more is sent
        }
        let left = run_deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let reason = run_timeout_reason(req.run_timeout_s, index, planned);
            progress(&Step::Note(reason.clone()));
            summary.serve.failure = Some(reason);
            break;
        }
        let prompt = &req.prompts[prompt_index];
        let body = client::request_body(req, prompt);
        let sent_utc = evidence::now_utc();
        let ex = client::send_within(
            sender,
            base_url,
            &body,
            Some(Duration::from_secs_f64(req.timeout_s).min(left)),
        );
        w.write_request(index, &body, &ex.response, &ex.reads)?;
        let mut rec = RequestRecord {
            index,
            warmup,
            prompt_index,
            repeat,
            prompt: prompt.clone(),
            stream: req.stream,
            sent_utc,
            http_status: ex.response.status,
            transport_error: ex.response.transport_error.clone(),
            body_bytes: ex.body_bytes,
            body_truncated: ex.body_truncated,
            figures: None,
        };
        let reply = analysis::reply_of(&rec, &ex.reads);
        let fig = crate::analysis::measure::measure(&reply);
        progress(&Step::RequestAnswered {
            index,
            warmup,
            status: ex
                .response
                .status
                .map(|s| format!("HTTP {s}"))
                .unwrap_or_else(|| ex.response.transport_error.clone().unwrap_or_default()),
            ttft_ms: fig.ttft_ms,
            decode_tok_s: fig.decode_tok_s,
            completion_tokens: fig.completion_tokens,
        });
        // Cut or unreachable: the serve may have died mid-reply.
        let failed = rec.transport_error.is_some() || reply.truncated;
        rec.figures = Some(fig);
        w.append_request_record(&rec)?;
        summary.requests.push(rec);
        if crate::io::signals::interrupted().is_some() {
            break; // the stop signal's teardown ended the serve: not a serve that died
        }
        if let Some(s) = serve.as_deref_mut() {
            if let Err(e) = alive_after(s, failed) {
                summary.serve.failure = Some(e.to_string());
                summary.serve.exit_log_tail = e.log_tail().map(str::to_string);
                progress(&Step::ServeDied(e.to_string()));
                w.write_summary(summary)?;
                break;
            }
        }
    }
    Ok(())
}

/// How long a failed request waits for a serve that cut its reply by exiting to be seen exited: the
/// kernel closes a dying process's sockets before its parent can reap it, so the first check can race.
const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// [`serve::Serve::check_alive`]; after a failed request, checked again for up to [`EXIT_SETTLE`] so that a
/// serve that died mid-reply is seen dead now, not one request later.
fn alive_after(s: &mut serve::Serve, failed: bool) -> Result<(), serve::ServeError> {
    s.check_alive()?;
    if failed {
        let until = Instant::now() + EXIT_SETTLE;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(25));
            s.check_alive()?;
        }
    }
    Ok(())
}

/// The last lines (up to 10, from the last 64 KiB) of a log file, lossy UTF-8; None when unreadable or empty.
fn log_tail(path: &Path) -> Option<String> {
    let text = serve::tail_file(path, usize::MAX);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    (!tail.is_empty()).then_some(tail)
}

/// `run_timeout: ...` for a run that passed `[request] run_timeout_s` before request `index` of `planned`.
fn run_timeout_reason(run_timeout_s: f64, index: usize, planned: usize) -> String {
    format!(
        "run_timeout: the requests passed [request] run_timeout_s = {run_timeout_s} s; {index} of {planned} planned requests were sent"
    )
}

fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn describe_stop(stop: &serve::StopReport) -> String {
    let mut s = stop.exit.clone().unwrap_or_else(|| "unknown exit".into());
    if stop.already_exited {
        s.push_str(" (had already exited)");
    }
    if stop.escalated_to_kill {
        s.push_str(" (did not stop on SIGTERM: killed)");
    }
    s.push_str(&format!(" after {:.0} ms", stop.stop_ms));
    s
}

pub use crate::analysis::reply::model_served;

/// True when the gate opts in to its host name in evidence and records (`[record] publish_host = true`;
/// docs/evidence.md "Privacy").
fn publishes_host(gate: &GateSpec) -> bool {
    gate.record
        .as_ref()
        .and_then(|t| t.get("publish_host"))
        .and_then(|v| v.as_bool())
        == Some(true)
}

/// `GET /metrics` (best effort: `None` when it does not answer 200), its text kept in the run directory as
/// `name`.
fn read_metrics(
    http: &reqwest::blocking::Client,
    base_url: &str,
    w: &EvidenceWriter,
    name: &str,
) -> Option<String> {
    let (status, body) = client::get(http, base_url, "/metrics", Duration::from_secs(5)).ok()?;
    if status != 200 {
        return None;
    }
    crate::evidence::write_atomic(&w.path(name), body.as_bytes()).ok()?;
    Some(body)
}

/// For a plain `http://` URL whose host is a name (`http://localhost:8080`): the host and port, so that
/// readiness tries every address the name resolves to ([`serve::probe_addrs`]) and pins the one that
/// answered. `None` for an address host, and for `https://` (its certificate names the host, so the name
/// must stay in the URL).
fn name_http_url(url: &str) -> Option<(String, u16)> {
    let u = reqwest::Url::parse(url).ok()?;
    if u.scheme() != "http" {
        return None;
    }
    let host = u.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    Some((bare.to_string(), u.port_or_known_default()?))
}

/// `url` with its host and port replaced by `addr` (`http://localhost:8080/x` with 127.0.0.1:8080 is
/// `http://127.0.0.1:8080/x`), without a trailing slash.
fn pinned_url(url: &str, addr: std::net::SocketAddr) -> String {
    let Ok(mut u) = reqwest::Url::parse(url) else {
        return url.to_string();
    };
    if u.set_ip_host(addr.ip()).is_err() || u.set_port(Some(addr.port())).is_err() {
        return url.to_string();
    }
    u.to_string().trim_end_matches('/').to_string()
}

/// What the ready serve says about itself (spec/detect.rs `ServeSays`), best effort: `/props`, `/version`,
/// `/openapi.json` and `/v1/models` (with its `Server` header), each with a 5 s timeout, and `log` (the
/// serve's log so far).
fn serve_says(
    http: &reqwest::blocking::Client,
    base_url: &str,
    log: String,
) -> crate::spec::detect::ServeSays {
    let t = Duration::from_secs(5);
    let get = |p: &str| client::get(http, base_url, p, t).ok();
    let (server_header, models) = match http.get(format!("{base_url}/v1/models")).timeout(t).send()
    {
        Ok(resp) => {
            let h = resp
                .headers()
                .get(reqwest::header::SERVER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let st = resp.status().as_u16();
            (h, resp.text().ok().map(|b| (st, b)))
        }
        Err(_) => (None, None),
    };
    crate::spec::detect::ServeSays {
        server_header,
        props: get("/props"),
        version: get("/version"),
        openapi: get("/openapi.json"),
        models,
        log,
    }
}

/// The model ids a `/v1/models` answer lists (empty when there was none).
fn model_ids(says: &crate::spec::detect::ServeSays) -> Vec<String> {
    let Some((200, body)) = &says.models else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            Some(
                v.get("data")?
                    .as_array()?
                    .iter()
                    .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(String::from))
                    .collect(),
            )
        })
        .unwrap_or_default()
}

/// A gate without `[serve] engine` once `engine` is detected: its profile's clock unless the gate set
/// `clock`, and its greedy-parity fields (with `temperature = 0`) unless `[request.extra]` sets the key.
/// Returns the changed gate (None when nothing changed) and what applied (`clock metrics`,
/// `repeat_penalty 1`).
fn apply_detected(
    gate: &GateSpec,
    engine: crate::spec::profile::Engine,
) -> (Option<GateSpec>, Vec<String>) {
    let p = engine.profile();
    let mut g = gate.clone();
    let mut applied = Vec::new();
    if !g.serve.clock_set && g.serve.clock != p.clock {
        g.serve.clock = p.clock;
        applied.push(format!("clock {}", p.clock.name()));
    }
    if g.request.temperature == Some(0.0) {
        for (k, v) in p.greedy_fields {
            if !g.request.extra.contains_key(*k) {
                g.request.extra.insert(k.to_string(), serde_json::json!(v));
                applied.push(format!("{k} {v}"));
            }
        }
    }
    g.serve.engine = Some(engine);
    (Some(g), applied)
}

/// Runs the setup argv with `env`, its output going to `log`; Ok(status text) or Err(reason with the tail).
fn run_setup(
    argv: &[String],
    env: &std::collections::BTreeMap<String, String>,
    log: &Path,
) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .envs(env)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(0);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL the child if this thread dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", argv[0]))?;
    // Its whole process group goes if the runner is stopped by a signal (the serve's own mechanism), and
    // if the runner is killed outright (SIGKILL): the serve's watchdog, over the setup's group.
    let pgid = child.id();
    let watchdog = crate::io::serve::watch_group(pgid);
    if !crate::io::signals::register(pgid, Duration::from_secs(2)) {
        // A stop signal is being handled: the handler will not see this group; stop it here.
        crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
        let _ = child.wait();
        drop(watchdog);
        return Err("interrupted before the setup could run".into());
    }
    let deadline = Instant::now() + Duration::from_secs_f64(SETUP_TIMEOUT_S);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) if Instant::now() >= deadline => {
                crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
                let _ = child.wait();
                break Err(format!(
                    "{} did not finish within {SETUP_TIMEOUT_S} s; its process group was stopped",
                    argv.join(" ")
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => break Err(format!("waiting for {:?}: {e}", argv[0])),
        }
    };
    // Stragglers the setup left in its group (a backgrounded child) do not outlive it.
    crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(1));
    drop(watchdog); // the group is gone: the watchdog must not outlive it (pgid reuse)
    crate::io::signals::deregister(pgid);
    let status = status?;
    if status.success() {
        Ok(status.to_string())
    } else {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text
            .lines()
            .rev()
            .take(10)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(format!(
            "{} ({status}); last lines of setup.log:\n{}",
            argv.join(" "),
            tail.join("\n")
        ))
    }
}

/// Longest a gate's `setup` command may run, seconds (a first provisioning takes about 15 s here).
pub const SETUP_TIMEOUT_S: f64 = 1800.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_asked_for_is_compared_with_what_the_serve_lists() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(model_served("smollm2", &l(&[])), None);
        assert_eq!(model_served("smollm2", &l(&["smollm2"])), Some(true));
        assert_eq!(
            model_served("SmolLM2", &l(&["other", "smollm2"])),
            Some(true)
        );
        assert_eq!(
            model_served("/home/u/models/Qwen3-0.6B", &l(&["Qwen3-0.6B"])),
            Some(true)
        );
        assert_eq!(model_served("qwen3", &l(&["llama-3-8b"])), Some(false));
        assert_eq!(model_served("", &l(&["llama-3-8b"])), Some(false));
    }

    #[test]
    fn a_named_http_url_is_pinned_to_the_address_that_answered() {
        assert_eq!(
            name_http_url("http://localhost:8080"),
            Some(("localhost".into(), 8080))
        );
        assert_eq!(
            name_http_url("http://localhost"),
            Some(("localhost".into(), 80))
        );
        assert_eq!(name_http_url("http://127.0.0.1:8080"), None);
        assert_eq!(name_http_url("http://[::1]:8080"), None);
        assert_eq!(name_http_url("https://localhost:8443"), None);
        let v4: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: std::net::SocketAddr = "[::1]:8080".parse().unwrap();
        assert_eq!(
            pinned_url("http://localhost:8080", v4),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            pinned_url("http://localhost:8080/base", v6),
            "http://[::1]:8080/base"
        );
    }
}
