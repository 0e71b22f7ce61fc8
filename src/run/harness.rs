//! The gate harness behind `cargo test --test gates`: discovers `gates/*.toml` (or `$SERVEGATE_GATES`), turns
//! each declared assertion into a libtest-mimic trial named `<gate>::<assertion>`, runs each gate once, lazily,
//! when its first selected trial runs (so `--list` and filters run nothing they do not select), and one gate
//! at a time (a device is exclusive).
//!
//! libtest-mimic reports only counts, so every trial records its own outcome (panics included) in a
//! [`TrialLog`]; after the trials the harness builds the results document ([`crate::sinks::report::Results`]: only
//! what ran or was ignored) and hands it to the reporters: the gate report on stdout, JUnit XML
//! (`SERVEGATE_JUNIT`), results JSON (`SERVEGATE_JSON`). The reporters touch no process.
//!
//! Under cargo-nextest every trial runs in its own process. With `NEXTEST_RUN_ID` set, a gate's run is
//! cached on disk for that nextest run (`<runs>/.servegate-nextest/<run id>/`, keyed by gate name and spec
//! hash, under a file lock), so the serve starts once per gate and the other trials of the gate read its
//! outcome from the cache; a second lock keeps to one serve at a time. Under nextest without a run id the harness refuses,
//! pointing to `cargo test --test gates`.
//!
//! Environment: `SERVEGATE_GATES` (a directory or one `.toml` file), `SERVEGATE_RUNS` (evidence root),
//! `SERVEGATE_STRICT=1` (unmet `[requires]` fail instead of being ignored), `SERVEGATE_VERBOSE=1` (progress
//! on stderr, and the gate report's verdict lines whole instead of at most 300 characters), `SERVEGATE_JUNIT=path` (JUnit XML), `SERVEGATE_JSON=path` (results JSON, docs/results-json.md),
//! `SERVEGATE_SUMMARY=path` (Markdown summary, e.g. `$GITHUB_STEP_SUMMARY`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};
use serde::{Deserialize, Serialize};

use crate::error::RunEnd;
use crate::run::runner::{self, RunOutcome};
use crate::sinks::events::{Collector, Event, Listed, Reporter};
use crate::sinks::outputs::Outputs;
use crate::sinks::report::{self, FailureKind, Producer, Results, TestOutcome};
use crate::spec::{self, GateSpec};

/// What happened to one gate.
#[derive(Debug, Clone)]
pub enum GateResult {
    /// It ran; verdicts inside.
    Ran(Box<RunOutcome>),
    /// `[requires]` unmet: the reasons.
    Unmet(Vec<String>),
    /// The run could not write or read its evidence.
    Error(String),
    /// The run panicked (a servegate bug): the panic message.
    Panicked(String),
    /// The gate refused to start: its `[hold] ticket` is missing (`SERVEGATE_ALLOW_NO_HOLD` unset): why.
    Refused(String),
}

/// How the harness runs under cargo-nextest (one process per trial).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nextest {
    /// Not under nextest: this process runs every selected trial.
    Off,
    /// Under nextest: each gate's run is cached in `dir` (one directory per nextest run id).
    Cached {
        /// `NEXTEST_RUN_ID`.
        run_id: String,
        /// `<runs>/.servegate-nextest/<run id>`.
        dir: PathBuf,
    },
    /// Under nextest without a run id: the serve would start once per trial, so the harness refuses.
    Refuse(String),
}

/// The harness's configuration, read from the environment by [`Config::from_env`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Gates directory or one gate file.
    pub gates: PathBuf,
    /// Evidence root.
    pub runs: PathBuf,
    /// Unmet requirements fail instead of being ignored.
    pub strict: bool,
    /// Progress lines on stderr, and the gate report's verdict lines whole (`SERVEGATE_VERBOSE`).
    pub verbose: bool,
    /// JUnit / JSON report paths.
    pub outputs: Outputs,
    /// Behaviour under cargo-nextest.
    pub nextest: Nextest,
    /// Notes to print on stderr before running (e.g. a report path ignored under nextest).
    pub notes: Vec<String>,
    /// Reports asked for that this process will not write (`SERVEGATE_JUNIT`/`SERVEGATE_JSON` under nextest):
    /// removed when a run starts all the same, so no older report is taken for this run's.
    pub unwritten: Outputs,
}

/// Directory under the evidence root holding the per-nextest-run gate caches.
pub const NEXTEST_CACHE_DIR: &str = ".servegate-nextest";

/// A boolean environment variable: unset, empty, `0`, `false`, `no` and `off` (any case) are false; anything
/// else (`1`, `true`, `yes`...) is true.
use crate::error::env_flag as flag;

fn nonempty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

impl Config {
    /// The configuration from the process environment.
    pub fn from_env() -> Config {
        Config::from_vars(|k| std::env::var(k).ok())
    }

    /// The configuration from `var` (an environment lookup).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Config {
        let gates = nonempty(var("SERVEGATE_GATES"))
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("gates"));
        let runs = nonempty(var("SERVEGATE_RUNS"))
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("target/servegate/runs"));
        let mut outputs = Outputs::from_vars(&var);
        let mut notes = Vec::new();
        if var("SERVEGATE_GATES").is_some_and(|g| g.is_empty()) {
            notes.push("SERVEGATE_GATES is set but empty: reading the default gates/".to_string());
        }
        let mut unwritten = Outputs::default();
        let under_nextest = flag(var("NEXTEST")) || nonempty(var("NEXTEST_RUN_ID")).is_some();
        let nextest = if !under_nextest {
            Nextest::Off
        } else {
            // Each nextest process sees one trial: no process could annotate or summarise the whole run.
            outputs.github = Default::default();
            if !outputs.is_empty() {
                let vars: Vec<&str> = crate::sinks::export::Format::ALL
                    .iter()
                    .map(|f| f.env_var())
                    .collect();
                notes.push(format!(
                    "{} are ignored under cargo-nextest (each test runs in its own process, \
                     so no process sees the whole run) and removed, so no older report passes for this run: use \
                     nextest's own JUnit ([profile.<name>.junit] in .config/nextest.toml) or run \
                     `cargo test --test gates`",
                    vars.join(" / ")
                ));
                unwritten = std::mem::take(&mut outputs);
            }
            match nonempty(var("NEXTEST_RUN_ID")) {
                Some(id) => {
                    let safe: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
                    Nextest::Cached { dir: runs.join(NEXTEST_CACHE_DIR).join(&safe), run_id: id }
                }
                None => Nextest::Refuse(
                    "servegate: the gate harness is running under cargo-nextest without NEXTEST_RUN_ID, so it cannot share \
                     one serve between the trials of a gate (nextest runs each trial in its own process and the serve \
                     would start once per assertion). Run the gates with `cargo test --test gates`, or use a \
                     cargo-nextest recent enough to set NEXTEST_RUN_ID."
                        .to_string(),
                ),
            }
        };
        Config {
            gates,
            runs,
            strict: flag(var("SERVEGATE_STRICT")),
            verbose: flag(var("SERVEGATE_VERBOSE")),
            outputs,
            nextest,
            notes,
            unwritten,
        }
    }
}

/// A gate to be run at most once, shared by its trials.
pub struct LazyGate {
    /// The spec.
    pub spec: GateSpec,
    config: Arc<Config>,
    result: OnceLock<GateResult>,
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub use crate::error::strict;

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

impl LazyGate {
    /// Wraps a spec.
    pub fn new(spec: GateSpec, config: Arc<Config>) -> LazyGate {
        LazyGate {
            spec,
            config,
            result: OnceLock::new(),
        }
    }

    /// Runs the gate if it has not run yet (one gate at a time in the process; under nextest, once per nextest
    /// run) and returns its result. A panic of the run becomes [`GateResult::Panicked`], so no later trial
    /// reruns the gate.
    pub fn get(&self) -> &GateResult {
        if let Some(r) = self.result.get() {
            return r;
        }
        let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        self.result.get_or_init(|| {
            let allow = crate::io::hold::allow_no_hold(|k| std::env::var(k).ok());
            match crate::io::hold::check_ticket(&self.spec, allow) {
                Err(why) => return GateResult::Refused(why),
                Ok(Some(note)) => crate::errln!("servegate: {note}"),
                Ok(None) => {}
            }
            let unmet = self.spec.requirements();
            if !unmet.is_empty() {
                return GateResult::Unmet(unmet);
            }
            match &self.config.nextest {
                Nextest::Cached { dir, .. } => run_cached(&self.spec, &self.config, dir),
                _ => run_gate(&self.spec, &self.config),
            }
        })
    }

    /// The result if the gate has run.
    pub fn result(&self) -> Option<&GateResult> {
        self.result.get()
    }
}

/// Runs a gate live (panics caught).
fn run_gate(spec: &GateSpec, config: &Config) -> GateResult {
    // Progress on stderr under SERVEGATE_VERBOSE: the console reporter of `servegate run`, fed the same steps.
    let mut console = crate::sinks::events::Console::new(!config.verbose);
    let mut progress = |step: &crate::sinks::events::Step| {
        console.event(&Event::Progress { spec, step });
    };
    match catch_unwind(AssertUnwindSafe(|| {
        runner::run(spec, &config.runs, &mut progress)
    })) {
        Ok(Ok(o)) => GateResult::Ran(Box::new(o)),
        Ok(Err(e)) => GateResult::Error(e.to_string()),
        Err(p) => GateResult::Panicked(panic_message(&*p)),
    }
}

/// A gate's run as cached for a nextest run.
#[derive(Debug, Serialize, Deserialize)]
struct CachedRun {
    gate: String,
    spec_sha256: String,
    #[serde(flatten)]
    result: CachedResult,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
#[allow(clippy::large_enum_variant)] // one short-lived value per gate, (de)serialized once
enum CachedResult {
    /// The outcome as the first process judged it (judging is pure, so re-judging would say the same).
    Ran {
        evidence_dir: PathBuf,
        summary: crate::evidence::RunSummary,
        verdicts: Vec<crate::judge::Verdict>,
        pair: Option<crate::evidence::PairSummary>,
    },
    Error {
        message: String,
    },
    Panicked {
        message: String,
    },
}

/// SHA-256 of a gate's file path and source: the cache key, so an edited gate is never served a stale run.
pub fn spec_sha256(spec: &GateSpec) -> String {
    let mut bytes = spec.file.display().to_string().into_bytes();
    bytes.push(0);
    bytes.extend_from_slice(spec.source.as_bytes());
    crate::io::hash::sha256_reader(bytes.as_slice())
        .map(|(h, _)| h)
        .unwrap_or_default()
}

fn open_lock(path: &Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    fs4::fs_std::FileExt::lock_exclusive(&f)?;
    Ok(f)
}

/// Removes per-run cache directories older than a week (best effort).
fn prune_stale(root: &Path, keep: &Path) {
    let week = Duration::from_secs(7 * 24 * 3600);
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p == keep {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > week);
        if old {
            let _ = std::fs::remove_dir_all(&p);
        }
    }
}

/// Runs `spec` once per nextest run: under the gate's lock, reuse the cached outcome or run the gate (under the
/// serve lock, one serve at a time) and cache its outcome.
fn run_cached(spec: &GateSpec, config: &Config, dir: &Path) -> GateResult {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        GateResult::Error(format!("nextest gate cache {}: {what}: {e}", dir.display()))
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return fail("cannot create", &e);
    }
    if let Some(root) = dir.parent() {
        prune_stale(root, dir);
    }
    let hash = spec_sha256(spec);
    let key = format!("{}-{}", spec.name, &hash[..16.min(hash.len())]);
    let _gate_lock = match open_lock(&dir.join(format!("{key}.lock"))) {
        Ok(f) => f,
        Err(e) => return fail("cannot lock", &e),
    };
    let cache = dir.join(format!("{key}.json"));
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Ok(c) = serde_json::from_str::<CachedRun>(&text) {
            return match c.result {
                CachedResult::Ran {
                    evidence_dir,
                    summary,
                    verdicts,
                    pair,
                } => GateResult::Ran(Box::new(RunOutcome {
                    dir: evidence_dir,
                    summary,
                    verdicts,
                    pair,
                })),
                CachedResult::Error { message } => GateResult::Error(message),
                CachedResult::Panicked { message } => GateResult::Panicked(message),
            };
        }
    }
    let _serve_lock = match open_lock(&dir.join("serve.lock")) {
        Ok(f) => f,
        Err(e) => return fail("cannot lock", &e),
    };
    let result = run_gate(spec, config);
    let cached = CachedResult::from_result(&result);
    let doc = CachedRun {
        gate: spec.name.clone(),
        spec_sha256: hash,
        result: cached,
    };
    let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    if let Err(e) = report::write_atomic(&cache, &bytes) {
        crate::errln!(
            "servegate: {}: cannot cache the gate run for the other nextest processes: {e}",
            cache.display()
        );
    }
    result
}

impl CachedResult {
    fn from_result(r: &GateResult) -> CachedResult {
        match r {
            GateResult::Ran(o) => {
                let dir = if o.dir.is_absolute() {
                    o.dir.clone()
                } else {
                    std::env::current_dir()
                        .map(|c| c.join(&o.dir))
                        .unwrap_or_else(|_| o.dir.clone())
                };
                CachedResult::Ran {
                    evidence_dir: dir,
                    summary: o.summary.clone(),
                    verdicts: o.verdicts.clone(),
                    pair: o.pair.clone(),
                }
            }
            GateResult::Error(m) => CachedResult::Error { message: m.clone() },
            GateResult::Panicked(m) => CachedResult::Panicked { message: m.clone() },
            GateResult::Refused(m) => CachedResult::Error { message: m.clone() },
            GateResult::Unmet(r) => CachedResult::Error {
                message: format!("unexpected: requirements unmet: {}", r.join("; ")),
            },
        }
    }
}

/// The gate files: `root` (a directory or a file), `*.toml` sorted by name.
pub fn discover_in(root: &Path) -> Result<Vec<PathBuf>, String> {
    if root.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    let entries = std::fs::read_dir(root).map_err(|e| {
        format!(
            "{}: {e} (set SERVEGATE_GATES to a gates directory)",
            root.display()
        )
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// The gate files: `$SERVEGATE_GATES` (a directory or a file) or `gates/`, `*.toml` sorted by name.
pub fn discover() -> Result<Vec<PathBuf>, String> {
    discover_in(&Config::from_env().gates)
}

/// What a trial decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Passed, failed or skipped.
    pub outcome: TestOutcome,
    /// Why it failed.
    pub failure_kind: Option<FailureKind>,
    /// The verdict line, or the failure or skip reason.
    pub message: String,
    /// Appended to the failure text libtest prints (the evidence directory).
    pub detail: Option<String>,
}

impl Decision {
    fn failed(kind: FailureKind, message: String) -> Decision {
        Decision {
            outcome: TestOutcome::Failed,
            failure_kind: Some(kind),
            message,
            detail: None,
        }
    }
}

/// The decision of trial `<gate>::<assertion>` from its gate's result (running the gate if needed).
pub fn decide(gate: &LazyGate, assertion: &str) -> Decision {
    match gate.get() {
        GateResult::Unmet(reasons) => {
            let reason = format!("requires: {}", reasons.join("; "));
            if matches!(gate.config.nextest, Nextest::Cached { .. }) && !gate.config.strict {
                // cargo-nextest reads a trial that ends "ignored" at run time as a pass (its exit status is 0):
                // a trial it runs anyway (`--run-ignored all|only`) whose requirement is unmet must fail.
                Decision::failed(
                    FailureKind::RequirementUnmet,
                    format!(
                        "{reason} (this trial is marked ignored for that reason; cargo-nextest ran it anyway \
                         (--run-ignored) and cannot show a skip at run time, so it fails: nothing was checked)"
                    ),
                )
            } else if gate.config.strict {
                Decision::failed(
                    FailureKind::RequirementUnmet,
                    format!("{reason} (SERVEGATE_STRICT is set: unmet requirements fail)"),
                )
            } else {
                Decision {
                    outcome: TestOutcome::Skipped,
                    failure_kind: None,
                    message: reason,
                    detail: None,
                }
            }
        }
        GateResult::Error(e) => {
            Decision::failed(FailureKind::EvidenceError, format!("evidence error: {e}"))
        }
        GateResult::Panicked(m) => {
            Decision::failed(FailureKind::Panic, format!("the gate run panicked: {m}"))
        }
        GateResult::Refused(m) => Decision::failed(FailureKind::RequirementUnmet, m.clone()),
        GateResult::Ran(o) => match o.verdicts.iter().find(|v| v.assertion == assertion) {
            // The test as the results list it (one mapping from a verdict to a test), plus the evidence
            // directory in libtest's failure text.
            Some(v) => {
                let t = report::assertion_from_verdict(&gate.spec, o, v, 0.0);
                Decision {
                    outcome: t.outcome,
                    failure_kind: t.failure_kind,
                    message: t.message,
                    detail: (t.outcome == TestOutcome::Failed || t.failure_kind.is_some())
                        .then(|| format!("evidence: {}", o.dir.display())),
                }
            }
            None => Decision::failed(
                FailureKind::Assertion,
                format!("no verdict for {assertion}"),
            ),
        },
    }
}

/// One trial's recorded outcome.
#[derive(Debug, Clone)]
pub struct TrialRecord {
    /// Index of the gate entry (see [`trials`]).
    pub entry: usize,
    /// The assertion (`spec` for an invalid spec).
    pub assertion: String,
    /// What the trial decided.
    pub decision: Decision,
    /// Wall time of the trial.
    pub duration: Duration,
    /// When the trial started (`None` for a trial recorded without running).
    pub started: Option<Instant>,
}

/// A gate's own wall time, in seconds: from the first of its trials' starts to the last of their ends. Under
/// `--test-threads=8` its trials wait on the one shared run side by side, so the sum of their times would
/// count that run once per trial (a 2.0 s gate shown as 6.1 s). Trials that did not run count by duration.
pub fn gate_wall_s(recs: &[&TrialRecord]) -> f64 {
    let ran: Vec<(Instant, Instant)> = recs
        .iter()
        .filter_map(|r| r.started.map(|s| (s, s + r.duration)))
        .collect();
    match (
        ran.iter().map(|(s, _)| *s).min(),
        ran.iter().map(|(_, e)| *e).max(),
    ) {
        (Some(first), Some(last)) => last.duration_since(first).as_secs_f64(),
        _ => recs.iter().map(|r| r.duration.as_secs_f64()).sum(),
    }
}

/// The outcomes of the trials that ran, as they ran (shared by the trial closures).
#[derive(Debug, Clone, Default)]
pub struct TrialLog(Arc<Mutex<Vec<TrialRecord>>>);

impl TrialLog {
    /// Records one trial.
    pub fn push(&self, r: TrialRecord) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    /// Every record so far.
    pub fn records(&self) -> Vec<TrialRecord> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Runs a trial body, catching a panic (recorded as a failure of kind `panic`), records the decision and its
/// wall time in `log`, and returns libtest's result.
pub fn run_trial(
    log: &TrialLog,
    entry: usize,
    assertion: &str,
    body: impl FnOnce() -> Decision,
) -> Result<Completion, Failed> {
    let t = Instant::now();
    let decision = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(d) => d,
        Err(p) => Decision::failed(
            FailureKind::Panic,
            format!("test panicked: {}", panic_message(&*p)),
        ),
    };
    crate::io::signals::checkpoint(); // an interrupted run reports nothing
    log.push(TrialRecord {
        entry,
        assertion: assertion.to_string(),
        decision: decision.clone(),
        duration: t.elapsed(),
        started: Some(t),
    });
    // Only a pass completes; a non-pass without a failure kind (skipped, not compared on a busy runner or
    // incomparable under `on_incomparable = "skip"` without SERVEGATE_STRICT, indeterminate under
    // `on_indeterminate = "pass"`) is ignored with its reason, so libtest never prints it as "ok".
    match decision.outcome {
        TestOutcome::Passed => Ok(Completion::Completed),
        TestOutcome::Skipped
        | TestOutcome::Incomparable
        | TestOutcome::NotCompared
        | TestOutcome::Indeterminate
            if decision.failure_kind.is_none() =>
        {
            Ok(Completion::ignored_with(crate::text::lines(
                &ignore_reason(&decision.message),
            )))
        }
        _ => {
            let mut text = crate::sinks::line::compact(&decision.message);
            if let Some(d) = decision.detail {
                text.push_str(&format!("\n  {d}"));
            }
            // libtest prints this text as it is, at the start of a line: guarded like every line servegate
            // prints (crate::text::lines).
            Err(crate::text::lines(&text).into())
        }
    }
}

/// The reason libtest shows for an ignored trial: the first time in this process, the reason (compacted to
/// one line); after that the same reason again is `as above` (`ignored (requires: as above)`), so 46 trials
/// ignored for one unmet requirement show it once. The full reason is in the gate report and the results.
fn ignore_reason(message: &str) -> String {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen.iter().any(|m| m == message) {
        return match message.split_once(": ") {
            Some((head, _)) if !head.contains(' ') => format!("{head}: as above"),
            _ => "as above".to_string(),
        };
    }
    seen.push(message.to_string());
    crate::sinks::line::compact(message)
}

/// A gate file's entry: a valid gate, or a spec that does not parse.
pub enum Entry {
    /// A valid gate.
    Gate(Arc<LazyGate>),
    /// An invalid spec: its file and the error.
    Invalid {
        /// The gate file.
        file: PathBuf,
        /// The error, as printed.
        error: String,
    },
}

/// The trials, their entries, and for each trial (in order) its entry index and assertion.
pub struct Plan {
    /// libtest-mimic trials.
    pub trials: Vec<Trial>,
    /// One entry per gate file.
    pub entries: Vec<Entry>,
    /// `(entry index, assertion)` of each trial, in trial order.
    pub index: Vec<(usize, String)>,
}

/// Builds the trials for the given gate files: `<gate>::<assertion>` per assertion, or `<file stem>::spec`
/// failing with the error for an invalid spec. Each trial records its outcome in `log`.
pub fn trials(files: &[PathBuf], config: &Arc<Config>, log: &TrialLog) -> Plan {
    let mut plan = Plan {
        trials: Vec::new(),
        entries: Vec::new(),
        index: Vec::new(),
    };
    let mut names: std::collections::BTreeMap<String, PathBuf> = std::collections::BTreeMap::new();
    // A matrix gate file (`[[model]]`) gives one gate per model (spec::matrix).
    let expanded = files
        .iter()
        .flat_map(|file| match spec::matrix::load_all(file) {
            Ok(gates) => gates
                .into_iter()
                .map(|g| match g.unreadable_input() {
                    Some(e) => (file, Err(e.to_string())),
                    None => (file, Ok(g)),
                })
                .collect::<Vec<_>>(),
            Err(e) => vec![(file, Err(e.to_string()))],
        });
    for (file, loaded) in expanded {
        let n = plan.entries.len();
        // Two gate files with one [gate] name would share trial names and an evidence directory: refuse the second.
        let loaded = loaded.and_then(|g| match names.get(&g.name) {
            Some(first) => Err(format!(
                "{}: gate.name {:?} is already the name of {}; gate names must be unique",
                file.display(),
                g.name,
                first.display()
            )),
            None => {
                names.insert(g.name.clone(), file.clone());
                Ok(g)
            }
        });
        match loaded {
            Err(e) => {
                let msg = e.to_string();
                let l = log.clone();
                let m = msg.clone();
                plan.trials.push(Trial::test(
                    format!("{}::spec", report::spec_stem(file)),
                    move || {
                        run_trial(&l, n, "spec", || {
                            Decision::failed(FailureKind::SpecInvalid, m)
                        })
                        .map(|_| ())
                    },
                ));
                plan.index.push((n, "spec".into()));
                plan.entries.push(Entry::Invalid {
                    file: file.clone(),
                    error: msg,
                });
            }
            Ok(spec) => {
                let gate = Arc::new(LazyGate::new(spec, Arc::clone(config)));
                // nextest reads a runtime "ignored" as a pass: under nextest, flag the trials of a gate whose
                // requirements are unmet as ignored when listing, so nextest skips them (not under strict).
                let flag = matches!(config.nextest, Nextest::Cached { .. })
                    && !config.strict
                    && !gate.spec.requirements().is_empty();
                for a in gate.spec.trial_names() {
                    let g = Arc::clone(&gate);
                    let l = log.clone();
                    let id = crate::spec::load::trial_id(&gate.spec.name, &a);
                    plan.index.push((n, a.clone()));
                    let trial =
                        Trial::ignorable_test(id, move || run_trial(&l, n, &a, || decide(&g, &a)));
                    plan.trials.push(trial.with_ignored_flag(flag));
                }
                plan.entries.push(Entry::Gate(gate));
            }
        }
    }
    plan
}

/// The report printed after the trials: every verdict line of every gate that ran (passes included, since a
/// passing figure is worth seeing), the evidence directory, and the reasons gates were ignored. One line each:
/// what a gate author or a serve wrote is [`crate::text::shown`].
pub fn report(entries: &[Entry]) -> String {
    report_marking(entries, &[])
}

/// Why a trial of a gate that ran was not run: the test arguments filtered it out (its verdict was still
/// judged with the gate's, and is shown in the report marked so, but it is never counted as passed).
pub const NOT_RUN_FILTERED: &str = "not run: filtered out by the test arguments";

/// [`report`], each verdict of a trial in `not_run` (`(entry index, assertion)`) marked `(not run: filtered
/// out by the test arguments)`.
pub fn report_marking(entries: &[Entry], not_run: &[(usize, String)]) -> String {
    use crate::text::shown as guarded;
    // Gates ignored for the same reason are one line, at the first of them: (line index, how, reason,
    // gate names, trials).
    let mut out: Vec<String> = Vec::new();
    let mut unmet: Vec<(usize, String, String, Vec<String>, usize)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let Entry::Gate(g) = e else { continue };
        let full = g.config.verbose;
        // One line of at most 300 characters unless SERVEGATE_VERBOSE (the whole text is in the results).
        let shown = |m: &str| {
            if full {
                m.to_string()
            } else {
                crate::sinks::line::compact(m)
            }
        };
        match g.result() {
            None => {}
            Some(GateResult::Unmet(r)) => {
                let how = if g.config.strict {
                    "failed: SERVEGATE_STRICT is set"
                } else if matches!(g.config.nextest, Nextest::Cached { .. }) {
                    "failed: run by cargo-nextest although ignored"
                } else {
                    "ignored"
                };
                let reason = guarded(&r.join("; "));
                let trials = g.spec.trial_names().len();
                match unmet.iter_mut().find(|u| u.1 == how && u.2 == reason) {
                    Some(u) => {
                        u.3.push(g.spec.name.clone());
                        u.4 += trials;
                    }
                    None => {
                        unmet.push((
                            out.len(),
                            how.to_string(),
                            reason,
                            vec![g.spec.name.clone()],
                            trials,
                        ));
                        out.push(String::new());
                    }
                }
            }
            Some(GateResult::Error(e)) => out.push(shown(&format!(
                "{}: evidence error: {}",
                g.spec.name,
                guarded(e)
            ))),
            Some(GateResult::Panicked(m)) => out.push(shown(&format!(
                "{}: the run panicked: {}",
                g.spec.name,
                guarded(m)
            ))),
            Some(GateResult::Refused(m)) => {
                out.push(shown(&format!("{}: refused: {}", g.spec.name, guarded(m))))
            }
            Some(GateResult::Ran(o)) => {
                out.push(format!("{}: evidence {}", g.spec.name, o.dir.display()));
                for v in &o.verdicts {
                    let skipped = not_run.iter().any(|(n, a)| *n == i && *a == v.assertion);
                    if skipped {
                        out.push(format!("  ({NOT_RUN_FILTERED}) {}", shown(&v.message)));
                    } else {
                        out.push(format!("  {}", shown(&v.message)));
                    }
                }
            }
        }
    }
    for (at, how, reason, names, trials) in unmet {
        out[at] = if names.len() == 1 {
            format!("{}: {how} (requires: {reason})", names[0])
        } else {
            // The names as fit in one line; the rest counted (every one is in the results JSON).
            let mut line = format!(
                "{} gates ({trials} trials) {how} (requires: {reason}): ",
                names.len()
            );
            for (k, n) in names.iter().enumerate() {
                let more = names.len() - k;
                if k > 0
                    && line.chars().count() + n.chars().count() + 2
                        > crate::sinks::line::VERDICT_LINE_CHARS.saturating_sub(12)
                {
                    line.push_str(&format!(" and {more} more"));
                    break;
                }
                if k > 0 {
                    line.push_str(", ");
                }
                line.push_str(n);
            }
            line
        };
    }
    let mut text = out.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    text
}

/// Builds the results document from the trial records, through the same events and [`Collector`] as
/// `servegate run` and `servegate judge`: one gate event per entry with a recorded trial, listing its recorded
/// trials (in declaration order) with their wall times. `started_utc` is when the harness started.
pub fn results(
    entries: &[Entry],
    records: &[TrialRecord],
    not_run: &[(usize, String)],
    strict: bool,
    started_utc: &str,
    duration_s: f64,
) -> Results {
    let mut collector = Collector::new(Producer::Harness, strict);
    collector.results_mut().started_utc = started_utc.to_string();
    for (i, entry) in entries.iter().enumerate() {
        let mut recs: Vec<&TrialRecord> = records.iter().filter(|r| r.entry == i).collect();
        if recs.is_empty() {
            continue;
        }
        let before = collector.results_mut().gates.len();
        let wall_s = gate_wall_s(&recs);
        match entry {
            Entry::Invalid { file, error } => collector.event(&Event::SpecInvalid {
                file,
                error,
                duration_s: recs.iter().map(|r| r.duration.as_secs_f64()).sum(),
            }),
            Entry::Gate(g) => {
                let names = g.spec.trial_names();
                recs.sort_by_key(|r| {
                    names
                        .iter()
                        .position(|n| *n == r.assertion)
                        .unwrap_or(usize::MAX)
                });
                let listed: Vec<Listed> = recs
                    .iter()
                    .map(|r| Listed {
                        assertion: r.assertion.clone(),
                        duration_s: r.duration.as_secs_f64(),
                    })
                    .collect();
                let spec = &g.spec;
                let listed = &listed;
                collector.event(&match g.result() {
                    Some(GateResult::Ran(o)) => Event::GateJudged {
                        spec,
                        outcome: o,
                        listed,
                    },
                    Some(GateResult::Unmet(unmet)) => Event::GateUnmet {
                        spec,
                        unmet,
                        // Under nextest a trial run although ignored fails (see [`decide`]).
                        strict: strict
                            || recs
                                .iter()
                                .any(|r| r.decision.outcome == TestOutcome::Failed),
                        listed,
                    },
                    Some(GateResult::Error(error)) => Event::GateError {
                        spec,
                        error,
                        panicked: false,
                        listed,
                    },
                    Some(GateResult::Panicked(error)) => Event::GateError {
                        spec,
                        error,
                        panicked: true,
                        listed,
                    },
                    Some(GateResult::Refused(why)) => Event::GateRefused { spec, why, listed },
                    None => Event::GateNotRun {
                        spec,
                        why: "not run: ignored by the test arguments",
                        listed,
                    },
                });
            }
        }
        // A gate's time is its own wall time, not the sum of its trials' (which overlap under threads).
        let gates = &mut collector.results_mut().gates;
        if gates.len() > before {
            if let Some(g) = gates.last_mut() {
                g.duration_s = wall_s;
                // Trials of a gate that ran, filtered out by the test arguments: not run, never passed (the
                // gate's run judged them all the same), so the gate is `partial`, not `passed`.
                if let Entry::Gate(lazy) = entry {
                    if matches!(lazy.result(), Some(GateResult::Ran(_))) {
                        g.not_run = lazy
                            .spec
                            .trial_names()
                            .into_iter()
                            .filter(|n| not_run.iter().any(|(e, a)| *e == i && a == n))
                            .collect();
                        if !g.not_run.is_empty() {
                            g.settle();
                        }
                    }
                }
            }
        }
    }
    let mut results = collector.into_results();
    results.finish(duration_s);
    results
}

/// Everything one harness run produced.
pub struct HarnessRun {
    /// libtest-mimic's counts.
    pub conclusion: Conclusion,
    /// The results document (None with `--list`: nothing ran).
    pub results: Option<Results>,
    /// The gate report (empty when no gate ran or was ignored).
    pub report: String,
    /// Reports that could not be written.
    pub write_errors: Vec<String>,
    /// Why the run checked nothing (no trial selected, or every selected trial skipped), when it did not.
    pub nothing_checked: Option<String>,
}

impl HarnessRun {
    /// The plain closing line: `gates: N passed, N failed, N skipped`, and the skips by reason when there are
    /// any (`(1 not compared: busy runner, 34 not provisioned, 5 no device)`: `Counts::skip_reasons`).
    pub fn closing_line(&self) -> String {
        let by_reason = self
            .results
            .as_ref()
            .map(|r| r.counts.skips_text())
            .filter(|t| !t.is_empty())
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        format!(
            "gates: {} passed, {} failed, {} skipped{by_reason}",
            self.conclusion.num_passed, self.conclusion.num_failed, self.conclusion.num_ignored
        )
    }
}

/// Runs the harness with `config` and libtest `args`: the trials (libtest-mimic prints their lines), then the
/// results document, written to the configured reports (not with `--list`). Prints nothing else.
pub fn run(config: Config, args: &Arguments, files: &[PathBuf]) -> HarnessRun {
    let t = Instant::now();
    let started_utc = crate::evidence::now_utc();
    let config = Arc::new(config);
    let log = TrialLog::default();
    let plan = trials(files, &config, &log);
    // Trials libtest lists but does not run (e.g. all tests under `--bench`): it counts them as ignored.
    for (trial, (entry, assertion)) in plan.trials.iter().zip(&plan.index) {
        if !args.list && !args.is_filtered_out(trial) && args.is_ignored(trial) {
            let decision = Decision {
                outcome: TestOutcome::Skipped,
                failure_kind: None,
                message: "not run: ignored by the test arguments".into(),
                detail: None,
            };
            log.push(TrialRecord {
                entry: *entry,
                assertion: assertion.clone(),
                decision,
                duration: Duration::ZERO,
                started: None,
            });
        }
    }
    let selected = plan
        .trials
        .iter()
        .filter(|t| !args.is_filtered_out(t))
        .count();
    let filtered: Vec<(usize, String)> = plan
        .trials
        .iter()
        .zip(&plan.index)
        .filter(|(t, _)| args.is_filtered_out(t))
        .map(|(_, i)| i.clone())
        .collect();
    // `--bench` (`cargo bench`) runs no gate: the gates are tests, so it is not a run that could check anything.
    if !args.list && !args.bench && selected == 0 {
        // Nothing would run: say why instead of libtest's "0 tests ... test result: ok".
        let why = nothing_selected(files, &config.gates, args, plan.trials.len());
        let mut results = Results::begin(Producer::Harness, config.strict);
        results.started_utc = started_utc;
        results.finish(t.elapsed().as_secs_f64());
        results.exit_code = RunEnd {
            worst_gate: results.exit_code,
            nothing_checked: true,
            report_unwritten: false,
        }
        .exit_code();
        results.problems.push(why.clone());
        let write_errors = config.outputs.write_all(&mut results);
        return HarnessRun {
            conclusion: Conclusion {
                num_filtered_out: plan.trials.len() as u64,
                num_passed: 0,
                num_failed: 0,
                num_ignored: 0,
                num_measured: 0,
            },
            results: Some(results),
            report: String::new(),
            write_errors,
            nothing_checked: Some(why),
        };
    }
    let conclusion = libtest_mimic::run(args, plan.trials);
    crate::io::signals::checkpoint();
    // The filtered-out trials of gates that ran all the same (another trial of theirs was selected): not run.
    let not_run: Vec<(usize, String)> = filtered
        .into_iter()
        .filter(|(entry, _)| {
            matches!(&plan.entries[*entry], Entry::Gate(g) if matches!(g.result(), Some(GateResult::Ran(_))))
        })
        .collect();
    let report = report_marking(&plan.entries, &not_run);
    if args.list {
        return HarnessRun {
            conclusion,
            results: None,
            report,
            write_errors: Vec::new(),
            nothing_checked: None,
        };
    }
    let mut results = results(
        &plan.entries,
        &log.records(),
        &not_run,
        config.strict,
        &started_utc,
        t.elapsed().as_secs_f64(),
    );
    let checked_nothing = !args.bench && conclusion.num_passed == 0 && conclusion.num_failed == 0;
    let nothing_checked = checked_nothing.then(|| {
        format!(
            "nothing was checked: every selected trial ({}) was skipped{}",
            conclusion.num_ignored,
            if config.strict {
                String::new()
            } else {
                " (unmet [requires]: see the gate report; on a machine that must run these gates, \
                 provision what they require, or set SERVEGATE_STRICT=1 to fail each one)"
                    .to_string()
            }
        )
    });
    if let Some(why) = &nothing_checked {
        results.exit_code = RunEnd {
            worst_gate: results.exit_code,
            nothing_checked: true,
            report_unwritten: false,
        }
        .exit_code();
        results.problems.push(why.clone());
    }
    let write_errors = config.outputs.write_all(&mut results);
    HarnessRun {
        conclusion,
        results: Some(results),
        report,
        write_errors,
        nothing_checked,
    }
}

/// Why no trial is selected: no gate file in the gates directory (naming gate files found only in its
/// subdirectories, which are not read), or a filter that matches none of the `total` trials.
pub fn nothing_selected(files: &[PathBuf], gates: &Path, args: &Arguments, total: usize) -> String {
    if files.is_empty() {
        let nested = nested_gate_files(gates);
        let mut why = format!(
            "nothing was checked: no gate file (*.toml) in {}",
            gates.display()
        );
        if !nested.is_empty() {
            let shown: Vec<String> = nested
                .iter()
                .take(5)
                .map(|p| p.display().to_string())
                .collect();
            why.push_str(&format!(
                "; gate files in its subdirectories are not read ({}{}): set SERVEGATE_GATES to the directory \
                 that holds them",
                shown.join(", "),
                if nested.len() > 5 { ", ..." } else { "" }
            ));
        } else {
            why.push_str(" (set SERVEGATE_GATES to a gates directory or one gate file)");
        }
        return why;
    }
    let mut what = Vec::new();
    if let Some(f) = &args.filter {
        what.push(format!(
            "{} `{f}`",
            if args.exact {
                "the exact name"
            } else {
                "the filter"
            }
        ));
    }
    if !args.skip.is_empty() {
        what.push(format!("--skip {}", args.skip.join(", ")));
    }
    if args.ignored {
        what.push("--ignored (no trial is marked ignored)".to_string());
    }
    format!(
        "nothing was checked: {} selects none of the {total} trials (`cargo test --test gates -- --list` \
         lists them)",
        if what.is_empty() {
            "the arguments".to_string()
        } else {
            what.join(" with ")
        }
    )
}

/// `*.toml` files one level below `dir` (gates put in a subdirectory by mistake), sorted.
fn nested_gate_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for d in subdirs {
        if let Ok(files) = discover_in(&d) {
            out.extend(files);
        }
    }
    out
}

/// The harness's signal set-up, done first by [`main`]: a stop signal (SIGINT, SIGTERM, SIGHUP), or the
/// death of the parent (`cargo` killed alone: [`crate::io::signals::watch_parent`] turns it into a SIGTERM),
/// ends the harness as interrupted at its next checkpoint: exit 130/143/129, `INTERRUPTED: ...` on
/// stderr, no `test result: ok`, no report written, the run's `run.json` `interrupted`.
pub fn prepare_signals() {
    let _ = crate::io::signals::install();
    crate::io::signals::defer_exit();
    crate::io::signals::watch_parent();
}

/// The refusals of the reports `config` asks for (written or only removed) that land on a gate file under
/// `config.gates`, on a file a gate reads, or inside a run directory (`evidence::guard`).
fn output_refusals(config: &Config) -> Vec<String> {
    let mut inputs = crate::evidence::guard::Inputs::new();
    for f in discover_in(&config.gates).unwrap_or_default() {
        inputs.file(&f, "a gate file");
        for g in crate::spec::matrix::load_all(&f).unwrap_or_default() {
            inputs.gate(&g);
        }
    }
    let mut refusals = config.outputs.refuse(&inputs);
    refusals.extend(config.unwritten.refuse(&inputs));
    refusals
}

/// Entry point of `tests/gates.rs`: [`program`] with the process's arguments and environment.
pub fn main() -> std::process::ExitCode {
    prepare_signals();
    let code = program(std::env::args().collect(), Config::from_env());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The harness program after [`prepare_signals`]: [`main_args`] with stdout behind
/// [`crate::io::stdout_relay`] when it is a pipe, so a reader that closes it early (`| head -3`) is no crash
/// and the reports are still written; then the interruption checkpoint. Returns the exit code.
pub fn program(argv: Vec<String>, config: Config) -> i32 {
    let relay = crate::io::stdout_relay::guard();
    let code = main_args(argv, config);
    crate::io::signals::checkpoint();
    if let Some(r) = relay {
        r.finish();
    }
    code
}

/// The harness program on `argv` (program name first) and `config`: removes the reports it will write (unless
/// it only lists), parses the libtest arguments (a usage error exits 2 after the reports are gone), then
/// [`main_code`].
pub fn main_args(argv: Vec<String>, config: Config) -> i32 {
    // Before anything can fail (even the arguments): the previous run's reports go, unless this only lists.
    if !argv.iter().skip(1).any(|a| a == "--list") {
        // A report that would land on a gate file, a file a gate reads or evidence: refused before anything
        // is removed.
        let refusals = output_refusals(&config);
        for r in &refusals {
            crate::errln!("servegate: error: {r}");
        }
        if !refusals.is_empty() {
            return crate::error::exit::USAGE;
        }
        for e in config
            .outputs
            .clear()
            .into_iter()
            .chain(config.unwritten.clear())
        {
            crate::errln!("servegate: {e}");
        }
    }
    match <Arguments as clap::Parser>::try_parse_from(&argv) {
        Ok(args) => main_code(args, config),
        Err(e) => {
            let _ = e.print();
            if e.use_stderr() {
                crate::error::exit::USAGE
            } else {
                crate::error::exit::PASS
            }
        }
    }
}

/// libtest's exit code when a test failed ([`crate::error::exit::LIBTEST_FAILED`]).
pub const LIBTEST_FAILED: i32 = crate::error::exit::LIBTEST_FAILED;

/// The harness as a program: runs the trials, prints the gate report, the reports written and the closing
/// line (`gates: N passed, N failed, N skipped`), writes the reports, and returns the exit code: 0, libtest's
/// 101 when a trial failed, 2 when refused under nextest or given `--test-threads=0`, 3 when the gates
/// directory cannot be read, 5 when a report could not be written, 7 when nothing was checked (no gate file,
/// a filter that selects no trial, every selected trial skipped). Gates run one at a time; unless `--test-threads` is given, trials run on one
/// thread so the report reads in order.
pub fn main_code(mut args: Arguments, config: Config) -> i32 {
    if args.test_threads == Some(0) {
        crate::errln!(
            "servegate: --test-threads=0 is not a number of threads (give 1 or more; gates run one at a time anyway)"
        );
        return crate::error::exit::USAGE;
    }
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    if let Nextest::Refuse(msg) = &config.nextest {
        if !args.list {
            crate::errln!("{msg}");
            return crate::error::exit::USAGE;
        }
    }
    let files = match discover_in(&config.gates) {
        Ok(f) => f,
        Err(e) => {
            crate::errln!("servegate: {e}");
            return crate::error::exit::SPEC_INVALID;
        }
    };
    if !args.list {
        for n in &config.notes {
            crate::errln!("servegate: {n}");
        }
    }
    let outputs = config.outputs.clone();
    let run = run(config, &args, &files);
    if !run.report.is_empty() && !args.list {
        crate::outln!("gate report:\n{}", run.report);
        if !outputs.is_empty() && run.write_errors.is_empty() {
            crate::outln!("reports: {}", outputs.describe());
        }
        crate::outln!("{}", run.closing_line());
    }
    for e in &run.write_errors {
        crate::errln!("servegate: {e}");
    }
    if let Some(why) = &run.nothing_checked {
        crate::errln!("servegate: {why}; this run is not green");
    }
    RunEnd {
        worst_gate: run
            .results
            .as_ref()
            .map(|r| r.gate_exit_code())
            .unwrap_or(crate::error::exit::PASS),
        nothing_checked: run.nothing_checked.is_some(),
        report_unwritten: !run.write_errors.is_empty(),
    }
    .harness_exit_code(run.conclusion.has_failed())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three trials of one gate waiting side by side on its 2 s run: the gate took 2 s, not 6.
    #[test]
    fn a_gate_s_time_is_the_span_of_its_trials_not_their_sum() {
        let t0 = Instant::now();
        let rec = |start_ms: u64, ms: u64| TrialRecord {
            entry: 0,
            assertion: "rate".into(),
            decision: Decision::failed(FailureKind::Panic, "x".into()),
            duration: Duration::from_millis(ms),
            started: Some(t0 + Duration::from_millis(start_ms)),
        };
        let recs = [rec(0, 2000), rec(10, 1990), rec(20, 2030)];
        let refs: Vec<&TrialRecord> = recs.iter().collect();
        assert!(
            (gate_wall_s(&refs) - 2.05).abs() < 1e-9,
            "{}",
            gate_wall_s(&refs)
        );
        let mut never = rec(0, 0);
        never.started = None;
        never.duration = Duration::from_millis(1500);
        assert!((gate_wall_s(&[&never]) - 1.5).abs() < 1e-9);
    }

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    use crate::sinks::export::Format;

    #[test]
    fn a_report_on_a_gate_file_is_refused_before_anything_is_removed() {
        let t = tempfile::tempdir().unwrap();
        let gate = t.path().join("g.toml");
        std::fs::write(&gate, "not even a valid gate").unwrap();
        let (g, j) = (t.path().display().to_string(), gate.display().to_string());
        let c = Config::from_vars(vars(&[("SERVEGATE_GATES", &g), ("SERVEGATE_JSON", &j)]));
        assert_eq!(
            main_args(vec!["gates".into()], c),
            crate::error::exit::USAGE
        );
        assert_eq!(
            std::fs::read_to_string(&gate).unwrap(),
            "not even a valid gate"
        );
    }

    #[test]
    fn nextest_with_a_run_id_caches_per_run() {
        let c = Config::from_vars(vars(&[
            ("NEXTEST", "1"),
            ("NEXTEST_RUN_ID", "3f1c-ab/..x"),
            ("SERVEGATE_RUNS", "/r"),
            ("SERVEGATE_JUNIT", "j.xml"),
        ]));
        assert_eq!(
            c.nextest,
            Nextest::Cached {
                run_id: "3f1c-ab/..x".into(),
                dir: PathBuf::from("/r/.servegate-nextest/3f1c-ab___x")
            }
        );
        assert!(c.outputs.is_empty(), "reports are ignored under nextest");
        assert_eq!(
            c.unwritten.get(Format::Junit),
            Some(Path::new("j.xml")),
            "and removed when a run starts"
        );
        assert_eq!(c.notes.len(), 1);
    }

    #[test]
    fn nextest_without_a_run_id_is_refused_with_the_way_out() {
        let c = Config::from_vars(vars(&[("NEXTEST", "1")]));
        match c.nextest {
            Nextest::Refuse(m) => assert!(m.contains("cargo test --test gates"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn plain_environment_reads_every_setting() {
        let c = Config::from_vars(vars(&[
            ("SERVEGATE_JUNIT", "out/j.xml"),
            ("SERVEGATE_JSON", "out/r.json"),
            ("SERVEGATE_STRICT", "1"),
            ("SERVEGATE_GATES", "g"),
        ]));
        assert_eq!(c.nextest, Nextest::Off);
        assert_eq!(c.outputs.get(Format::Junit), Some(Path::new("out/j.xml")));
        assert_eq!(c.outputs.get(Format::Json), Some(Path::new("out/r.json")));
        assert!(c.strict && !c.verbose);
        assert_eq!(c.gates, PathBuf::from("g"));
        assert_eq!(c.runs, PathBuf::from("target/servegate/runs"));
        let c = Config::from_vars(vars(&[("SERVEGATE_STRICT", "0")]));
        assert!(!c.strict && c.outputs.is_empty());
        for off in ["false", "No", "off", " 0 "] {
            assert!(
                !Config::from_vars(vars(&[("SERVEGATE_STRICT", off)])).strict,
                "{off}"
            );
        }
        for on in ["1", "true", "YES", "on"] {
            assert!(
                Config::from_vars(vars(&[("SERVEGATE_STRICT", on)])).strict,
                "{on}"
            );
        }
        let c = Config::from_vars(vars(&[("SERVEGATE_GATES", "")]));
        assert_eq!(c.gates, std::path::PathBuf::from("gates"));
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("SERVEGATE_GATES is set but empty")),
            "{:?}",
            c.notes
        );
    }

    #[test]
    fn a_panicking_trial_is_recorded_as_a_failure() {
        let log = TrialLog::default();
        let r = run_trial(&log, 3, "rate", || panic!("boom <&>"));
        let msg = r
            .err()
            .and_then(|f| f.message().map(String::from))
            .unwrap_or_default();
        assert!(msg.contains("test panicked: boom <&>"), "{msg}");
        let recs = log.records();
        assert_eq!(recs.len(), 1);
        assert_eq!((recs[0].entry, recs[0].assertion.as_str()), (3, "rate"));
        assert_eq!(recs[0].decision.outcome, TestOutcome::Failed);
        assert_eq!(recs[0].decision.failure_kind, Some(FailureKind::Panic));
    }

    #[test]
    fn skipped_and_failed_decisions_map_to_libtest() {
        let log = TrialLog::default();
        let skip = Decision {
            outcome: TestOutcome::Skipped,
            failure_kind: None,
            message: "requires: x".into(),
            detail: None,
        };
        assert!(
            matches!(run_trial(&log, 0, "a", || skip), Ok(Completion::Ignored { reason: Some(r) }) if r == "requires: x")
        );
        let fail = Decision {
            outcome: TestOutcome::Failed,
            failure_kind: Some(FailureKind::Assertion),
            message: "rate FAIL".into(),
            detail: Some("evidence: d".into()),
        };
        let m = run_trial(&log, 0, "b", || fail)
            .err()
            .and_then(|f| f.message().map(String::from))
            .unwrap_or_default();
        assert_eq!(m, "rate FAIL\n  evidence: d");
        assert_eq!(log.records().len(), 2);
    }
}
