//! The gate harness behind `cargo test --test gates`: discovers `gates/*.toml` (or `$SERVEGATE_GATES`), turns
//! each declared assertion into a libtest-mimic trial named `<gate>::<assertion>`, runs each gate once, lazily,
//! when its first selected trial runs (so `--list` and filters run nothing they do not select), and one gate
//! at a time (a device is exclusive).
//!
//! Environment: `SERVEGATE_GATES` (a directory or one `.toml` file), `SERVEGATE_RUNS` (evidence root),
//! `SERVEGATE_STRICT=1` (unmet `[requires]` fail instead of being ignored), `SERVEGATE_VERBOSE=1` (progress
//! on stderr).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::runner::{self, RunOutcome};
use crate::spec::{self, GateSpec};

/// What happened to one gate.
#[derive(Debug, Clone)]
pub enum GateResult {
    /// It ran; verdicts inside.
    Ran(RunOutcome),
    /// `[requires]` unmet: the reasons.
    Unmet(Vec<String>),
    /// The run could not write or read its evidence.
    Error(String),
}

/// A gate to be run at most once, shared by its trials.
pub struct LazyGate {
    /// The spec.
    pub spec: GateSpec,
    result: OnceLock<GateResult>,
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// True when `SERVEGATE_STRICT` is set to something other than empty or `0`.
pub fn strict() -> bool {
    std::env::var("SERVEGATE_STRICT").map(|v| !v.is_empty() && v != "0").unwrap_or(false)
}

impl LazyGate {
    /// Wraps a spec.
    pub fn new(spec: GateSpec) -> LazyGate {
        LazyGate { spec, result: OnceLock::new() }
    }

    /// Runs the gate if it has not run yet (one gate at a time in the process) and returns its result.
    pub fn get(&self) -> &GateResult {
        if let Some(r) = self.result.get() {
            return r;
        }
        let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        self.result.get_or_init(|| {
            let unmet = self.spec.requirements();
            if !unmet.is_empty() {
                return GateResult::Unmet(unmet);
            }
            let verbose = std::env::var_os("SERVEGATE_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0");
            let name = self.spec.name.clone();
            let mut progress = |line: &str| {
                if verbose {
                    eprintln!("[{name}] {line}");
                }
            };
            match runner::run(&self.spec, &runner::runs_root(), &mut progress) {
                Ok(o) => GateResult::Ran(o),
                Err(e) => GateResult::Error(e.to_string()),
            }
        })
    }

    /// The result if the gate has run.
    pub fn result(&self) -> Option<&GateResult> {
        self.result.get()
    }
}

/// The gate files: `$SERVEGATE_GATES` (a directory or a file) or `gates/`, `*.toml` sorted by name.
pub fn discover() -> Result<Vec<PathBuf>, String> {
    let root = std::env::var_os("SERVEGATE_GATES").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("gates"));
    if root.is_file() {
        return Ok(vec![root]);
    }
    let entries = std::fs::read_dir(&root).map_err(|e| format!("{}: {e} (set SERVEGATE_GATES to a gates directory)", root.display()))?;
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    Ok(files)
}

/// The outcome of one trial, from its gate's result.
pub fn trial_outcome(gate: &LazyGate, assertion: &str) -> Result<Completion, Failed> {
    match gate.get() {
        GateResult::Unmet(reasons) => {
            let reason = format!("requires: {}", reasons.join("; "));
            if strict() {
                Err(format!("{reason} (SERVEGATE_STRICT is set: unmet requirements fail)").into())
            } else {
                Ok(Completion::ignored_with(reason))
            }
        }
        GateResult::Error(e) => Err(format!("evidence error: {e}").into()),
        GateResult::Ran(o) => match o.verdicts.iter().find(|v| v.assertion == assertion) {
            Some(v) if v.passed() => Ok(Completion::Completed),
            Some(v) => Err(format!("{}\n  evidence: {}", v.message, o.dir.display()).into()),
            None => Err(format!("no verdict for {assertion}").into()),
        },
    }
}

/// Builds the trials for the given gate files: `<gate>::<assertion>` per assertion, or `<file stem>::spec`
/// failing with the error for an invalid spec.
pub fn trials(files: &[PathBuf]) -> (Vec<Trial>, Vec<Arc<LazyGate>>) {
    let mut trials = Vec::new();
    let mut gates = Vec::new();
    for file in files {
        match spec::load(file) {
            Err(e) => {
                let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "gate".into());
                let msg = e.to_string();
                trials.push(Trial::test(format!("{stem}::spec"), move || Err(msg.into())));
            }
            Ok(spec) => {
                let gate = Arc::new(LazyGate::new(spec));
                for a in gate.spec.assertions.names() {
                    let g = Arc::clone(&gate);
                    trials.push(Trial::ignorable_test(format!("{}::{a}", gate.spec.name), move || trial_outcome(&g, a)));
                }
                gates.push(gate);
            }
        }
    }
    (trials, gates)
}

/// The report printed after the trials: every verdict line of every gate that ran (passes included, since a
/// passing figure is worth seeing), the evidence directory, and the reasons gates were ignored.
pub fn report(gates: &[Arc<LazyGate>]) -> String {
    let mut out = String::new();
    for g in gates {
        match g.result() {
            None => {}
            Some(GateResult::Unmet(r)) => out.push_str(&format!("{}: ignored (requires: {})\n", g.spec.name, r.join("; "))),
            Some(GateResult::Error(e)) => out.push_str(&format!("{}: evidence error: {e}\n", g.spec.name)),
            Some(GateResult::Ran(o)) => {
                out.push_str(&format!("{}: evidence {}\n", g.spec.name, o.dir.display()));
                for v in &o.verdicts {
                    out.push_str(&format!("  {}\n", v.message));
                }
            }
        }
    }
    out
}

/// Entry point of `tests/gates.rs`. Gates run one at a time; unless `--test-threads` is given, trials run on
/// one thread so the report reads in order.
pub fn main() -> std::process::ExitCode {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let files = match discover() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("servegate: {e}");
            return std::process::ExitCode::from(crate::error::exit::SPEC_INVALID as u8);
        }
    };
    let (trials, gates) = trials(&files);
    let conclusion = libtest_mimic::run(&args, trials);
    let report = report(&gates);
    if !report.is_empty() && !args.list {
        println!("gate report:\n{report}");
        println!(
            "gates: {} passed, {} failed, {} skipped",
            conclusion.num_passed, conclusion.num_failed, conclusion.num_ignored
        );
    }
    conclusion.exit_code()
}

/// Relative display of a path when under the current directory.
pub fn short_path(p: &Path) -> String {
    std::env::current_dir().ok().and_then(|c| p.strip_prefix(c).ok().map(|r| r.display().to_string())).unwrap_or_else(|| p.display().to_string())
}
