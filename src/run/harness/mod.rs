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
//! `SERVEGATE_STRICT=1` (unmet `[requires]` fail instead of being ignored), `SERVEGATE_VERBOSE=1` (every step
//! on stderr, and the gate report's verdict lines whole instead of at most 300 characters; without it only the
//! waits over two seconds, `servegate: GATE waiting for ...: N s (...)`, and heartbeat.rs's line of life), `SERVEGATE_JUNIT=path` (JUnit XML), `SERVEGATE_JSON=path` (results JSON, docs/results-json.md),
//! `SERVEGATE_SUMMARY=path` (Markdown summary, e.g. `$GITHUB_STEP_SUMMARY`).
//!
//! Its rooms: this file (the configuration, a gate run once for its trials), `adapter` (the libtest-mimic
//! trials, their decisions and log, the report and results, the harness's `main`), `cache` (a gate's run
//! cached per nextest run) and `discovery` (the gate files).

mod adapter;
mod cache;
mod discovery;
mod heartbeat;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use crate::run::runner::{self, RunOutcome};
use crate::sinks::events::{Event, Reporter};
use crate::sinks::outputs::Outputs;
use crate::spec::GateSpec;

pub use adapter::*;
pub use discovery::toml_files_in;
pub(crate) use discovery::{discover_in, nothing_selected};

/// What happened to one gate.
#[derive(Debug, Clone)]
pub(crate) enum GateResult {
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
    /// Where the harness's own lines go (the gate report, the closing line, notes and errors; progress
    /// lines): stdout and stderr, or buffers in a test. libtest-mimic's own lines are its own.
    pub printer: crate::io::printer::Printer,
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
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Config {
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
            printer: crate::io::printer::Printer::std(),
        }
    }
}

/// A gate to be run at most once, shared by its trials.
pub(crate) struct LazyGate {
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
    pub(crate) fn new(spec: GateSpec, config: Arc<Config>) -> LazyGate {
        LazyGate {
            spec,
            config,
            result: OnceLock::new(),
        }
    }

    /// Runs the gate if it has not run yet (one gate at a time in the process; under nextest, once per nextest
    /// run) and returns its result. A panic of the run becomes [`GateResult::Panicked`], so no later trial
    /// reruns the gate.
    pub(crate) fn get(&self) -> &GateResult {
        if let Some(r) = self.result.get() {
            return r;
        }
        let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        self.result.get_or_init(|| {
            let allow = crate::io::hold::allow_no_hold(|k| std::env::var(k).ok());
            match crate::io::hold::check_ticket(&self.spec, allow) {
                Err(why) => return GateResult::Refused(why),
                Ok(Some(note)) => self.config.printer.errln(&format!("servegate: {note}")),
                Ok(None) => {}
            }
            let unmet = self.spec.requirements();
            if !unmet.is_empty() {
                return GateResult::Unmet(unmet);
            }
            match &self.config.nextest {
                Nextest::Cached { dir, .. } => cache::run_cached(&self.spec, &self.config, dir),
                _ => run_gate(&self.spec, &self.config),
            }
        })
    }

    /// The result if the gate has run.
    pub(crate) fn result(&self) -> Option<&GateResult> {
        self.result.get()
    }
}

/// Runs a gate live (panics caught).
fn run_gate(spec: &GateSpec, config: &Config) -> GateResult {
    // Progress on stderr under SERVEGATE_VERBOSE: the console reporter of `servegate run`, fed the same steps;
    // otherwise a line of life every 30 s of a long gate (heartbeat.rs), and the waits' progress lines.
    let mut console = crate::sinks::events::Console::to(!config.verbose, config.printer.clone());
    let arms = spec.pair.as_ref().map(|p| p.order.len());
    let mut beat = heartbeat::Heartbeat::new(
        &spec.name,
        arms,
        std::time::Instant::now(),
        heartbeat::EVERY,
    );
    let mut progress = |step: &crate::sinks::events::Step| {
        console.event(&Event::Progress { spec, step });
        if !config.verbose {
            if let Some(line) = beat.step(step, std::time::Instant::now()) {
                config.printer.errln(&format!("\n{line}"));
            }
            // A wait over two seconds says so even without SERVEGATE_VERBOSE (io/progress.rs paces it).
            if let Some(line) = step.waiting_line(true) {
                config.printer.errln(&format!(
                    "\nservegate: {} {}",
                    spec.name,
                    crate::text::shown(&line)
                ));
            }
        }
    };
    match catch_unwind(AssertUnwindSafe(|| {
        runner::run(spec, &config.runs, &mut progress)
    })) {
        Ok(Ok(o)) => GateResult::Ran(Box::new(o)),
        Ok(Err(e)) => GateResult::Error(e.to_string()),
        Err(p) => GateResult::Panicked(panic_message(&*p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::report::{FailureKind, TestOutcome};
    use libtest_mimic::Completion;
    use std::path::Path;
    use std::time::{Duration, Instant};

    /// The harness's own lines (not libtest-mimic's) go through its config's printer: a test reads them.
    #[test]
    fn the_harness_prints_its_own_lines_through_its_printer() {
        let tmp = tempfile::tempdir().unwrap();
        let config = |gates: PathBuf| {
            let mut c = Config::from_vars(|_| None);
            c.gates = gates;
            c.printer = crate::io::printer::Printer::captured();
            c
        };
        let c = config(tmp.path().to_path_buf());
        let p = c.printer.clone();
        let argv = vec!["gates".to_string(), "--test-threads=0".to_string()];
        assert_eq!(main_args(argv, c), crate::error::exit::USAGE);
        assert!(
            p.err_text()
                .starts_with("servegate: --test-threads=0 is not a number of threads"),
            "{}",
            p.err_text()
        );
        assert_eq!(p.out_text(), "");
        let c = config(tmp.path().join("no-such-dir"));
        let p = c.printer.clone();
        assert_eq!(
            main_args(vec!["gates".to_string()], c),
            crate::error::exit::SPEC_INVALID
        );
        assert!(p.err_text().starts_with("servegate: "), "{}", p.err_text());
    }

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
