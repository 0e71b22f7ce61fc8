//! The libtest-mimic adapter: each declared assertion a trial (`<gate>::<assertion>`), its decision and its
//! record in the [`TrialLog`], the gate report and the results document, and the harness's `main`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Completion, Conclusion, Failed, Trial};

use crate::error::RunEnd;
use crate::sinks::events::{Collector, Event, Listed, Reporter};
use crate::sinks::report::{self, FailureKind, Producer, Results, TestOutcome};
use crate::spec::{self};

use super::*;

/// What a trial decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decision {
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
    pub(super) fn failed(kind: FailureKind, message: String) -> Decision {
        Decision {
            outcome: TestOutcome::Failed,
            failure_kind: Some(kind),
            message,
            detail: None,
        }
    }
}

/// The decision of trial `<gate>::<assertion>` from its gate's result (running the gate if needed).
pub(crate) fn decide(gate: &LazyGate, assertion: &str) -> Decision {
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
pub(crate) struct TrialRecord {
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
pub(crate) fn gate_wall_s(recs: &[&TrialRecord]) -> f64 {
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
pub(crate) struct TrialLog(Arc<Mutex<Vec<TrialRecord>>>);

impl TrialLog {
    /// Records one trial.
    pub(crate) fn push(&self, r: TrialRecord) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    /// Every record so far.
    pub(crate) fn records(&self) -> Vec<TrialRecord> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Runs a trial body, catching a panic (recorded as a failure of kind `panic`), records the decision and its
/// wall time in `log`, and returns libtest's result.
pub(crate) fn run_trial(
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
pub(crate) enum Entry {
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
pub(crate) struct Plan {
    /// libtest-mimic trials.
    pub trials: Vec<Trial>,
    /// One entry per gate file.
    pub entries: Vec<Entry>,
    /// `(entry index, assertion)` of each trial, in trial order.
    pub index: Vec<(usize, String)>,
}

/// Builds the trials for the given gate files: `<gate>::<assertion>` per assertion, or `<file stem>::spec`
/// failing with the error for an invalid spec. Each trial records its outcome in `log`.
pub(crate) fn trials(files: &[PathBuf], config: &Arc<Config>, log: &TrialLog) -> Plan {
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

/// Why a trial of a gate that ran was not run: the test arguments filtered it out (its verdict was still
/// judged with the gate's, and is shown in the report marked so, but it is never counted as passed).
pub(crate) const NOT_RUN_FILTERED: &str = "not run: filtered out by the test arguments";

/// The report printed after the trials: every verdict line of every gate that ran (passes included, since a
/// passing figure is worth seeing), the evidence directory, and the reasons gates were ignored. One line each:
/// what a gate author or a serve wrote is [`crate::text::shown`]. Each verdict of a trial in `not_run`
/// (`(entry index, assertion)`) is marked `(not run: filtered out by the test arguments)`.
pub(crate) fn report_marking(entries: &[Entry], not_run: &[(usize, String)]) -> String {
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
pub(crate) fn results(
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
pub(crate) struct HarnessRun {
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
    pub(crate) fn closing_line(&self) -> String {
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
pub(crate) fn run(config: Config, args: &Arguments, files: &[PathBuf]) -> HarnessRun {
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
        let write_errors = config.outputs.write_all(&mut results, &config.printer);
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
    let write_errors = config.outputs.write_all(&mut results, &config.printer);
    HarnessRun {
        conclusion,
        results: Some(results),
        report,
        write_errors,
        nothing_checked,
    }
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
    let p = config.printer.clone();
    // Before anything can fail (even the arguments): the previous run's reports go, unless this only lists.
    if !argv.iter().skip(1).any(|a| a == "--list") {
        // A report that would land on a gate file, a file a gate reads or evidence: refused before anything
        // is removed.
        let refusals = output_refusals(&config);
        for r in &refusals {
            p.errln(&format!("servegate: error: {r}"));
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
            p.errln(&format!("servegate: {e}"));
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
    let p = config.printer.clone();
    if args.test_threads == Some(0) {
        p.errln(
            "servegate: --test-threads=0 is not a number of threads (give 1 or more; gates run one at a time anyway)",
        );
        return crate::error::exit::USAGE;
    }
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    if let Nextest::Refuse(msg) = &config.nextest {
        if !args.list {
            p.errln(msg);
            return crate::error::exit::USAGE;
        }
    }
    let files = match discover_in(&config.gates) {
        Ok(f) => f,
        Err(e) => {
            p.errln(&format!("servegate: {e}"));
            return crate::error::exit::SPEC_INVALID;
        }
    };
    if !args.list {
        for n in &config.notes {
            p.errln(&format!("servegate: {n}"));
        }
    }
    let outputs = config.outputs.clone();
    let run = run(config, &args, &files);
    if !run.report.is_empty() && !args.list {
        p.outln(&format!("gate report:\n{}", run.report));
        if !outputs.is_empty() && run.write_errors.is_empty() {
            p.outln(&format!("reports: {}", outputs.describe()));
        }
        p.outln(&run.closing_line());
    }
    for e in &run.write_errors {
        p.errln(&format!("servegate: {e}"));
    }
    if let Some(why) = &run.nothing_checked {
        p.errln(&format!("servegate: {why}; this run is not green"));
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
