//! The events of a gate run and the reporters that consume them. `servegate run`, `servegate judge` and the
//! harness behind `cargo test --test gates` emit the same [`Event`]s for the same gates; the [`Collector`]
//! builds the one results model ([`Results`]) from them, which every output format serializes, so a verdict
//! line, the results JSON, the JUnit XML, the Markdown summary and the exit code cannot disagree; the
//! [`Console`] prints the lines of `servegate run` and `servegate judge` from the same events. (The harness's
//! console is libtest's: one line per trial, then its gate report.)

use std::path::Path;

use crate::io::printer::Printer;
use crate::judge::outcome::RunOutcome;
use crate::sinks::report::{
    self, AssertionResult, FailureKind, GateResults, Producer, Results, TestOutcome,
};
use crate::spec::GateSpec;

/// One listed test of a gate: its assertion and the wall time charged to it, seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The assertion (`rate`, `route`, ...).
    pub assertion: String,
    /// Wall time charged to the test, seconds.
    pub duration_s: f64,
}

impl Listed {
    /// Every declared assertion of `spec`, the whole `run_s` charged to the first (what `servegate run` and
    /// `servegate judge` list).
    pub fn all(spec: &GateSpec, run_s: f64) -> Vec<Listed> {
        spec.trial_names()
            .iter()
            .enumerate()
            .map(|(i, a)| Listed {
                assertion: a.to_string(),
                duration_s: if i == 0 { run_s } else { 0.0 },
            })
            .collect()
    }

    /// Every verdict of `outcome`, in verdict order, the whole `run_s` charged to the first.
    pub fn verdicts(outcome: &RunOutcome, run_s: f64) -> Vec<Listed> {
        outcome
            .verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| Listed {
                assertion: v.assertion.clone(),
                duration_s: if i == 0 { run_s } else { 0.0 },
            })
            .collect()
    }
}

/// One step of a live gate run, as the runner reports it while it runs (secrets in its text already masked by
/// the runner). `Display` gives the progress line (`serve ready after 0.42 s (17 polls)`).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The run directory was created.
    EvidenceDir(std::path::PathBuf),
    /// The pair directory was created (a pair gate).
    PairEvidenceDir(std::path::PathBuf),
    /// The gate's `setup` command starts (its argv joined).
    Setup(String),
    /// The `setup` command failed: why.
    SetupFailed(String),
    /// The serve is being started.
    ServeStarting {
        /// The port given to it.
        port: u16,
        /// Its argv, joined with spaces.
        command: String,
    },
    /// The serve could not be started: why.
    ServeFailedToStart(String),
    /// The serve answered its ready path.
    ServeReady {
        /// ms from spawn to the first HTTP 200.
        ready_ms: f64,
        /// Ready-path polls made.
        polls: u64,
    },
    /// The serve never became ready: why.
    ServeNeverReady(String),
    /// A request was answered (or failed) and measured.
    RequestAnswered {
        /// Send order, 0-based (the `NN.*` evidence files).
        index: usize,
        /// A warmup request (recorded, never judged).
        warmup: bool,
        /// `HTTP 200`, or the transport error.
        status: String,
        /// Time to first token, ms.
        ttft_ms: Option<f64>,
        /// Decode rate, tok/s.
        decode_tok_s: Option<f64>,
        /// Completion tokens.
        completion_tokens: Option<u64>,
    },
    /// The serve died during the run: why.
    ServeDied(String),
    /// The serve was stopped: how it ended.
    ServeStopped(String),
    /// One arm of a pair gate starts: its directory name and runtime.
    ArmStarted {
        /// The arm's directory (`1-theirs`).
        arm: String,
        /// The runtime's description.
        runtime: String,
    },
    /// A step of one arm of a pair gate.
    Arm {
        /// The arm's directory.
        arm: String,
        /// The step.
        step: Box<Step>,
    },
    /// A wait over two seconds, still going: what is waited for, how long, what it saw
    /// (`waiting for readiness at URL: 12 s (last: connection refused; ...)`), first at 2 s then every 10 s
    /// ([`crate::io::progress::Pacer`]).
    Waiting(crate::io::progress::Waiting),
    /// Anything else worth a line (a run timeout, the model file's hash, processes the serve left behind).
    Note(String),
}

impl Step {
    /// The progress line of a wait ([`Step::Waiting`], also inside a pair's arm: `2-ours: waiting for ...`),
    /// None for any other step; with `terse`, None too for a wait not yet long enough for a terse reporter
    /// ([`crate::io::progress::Waiting::terse`]). Unescaped: it quotes outside text.
    pub(crate) fn waiting_line(&self, terse: bool) -> Option<String> {
        match self {
            Step::Waiting(w) if !terse || w.terse() => Some(w.to_string()),
            Step::Arm { arm, step } => step.waiting_line(terse).map(|l| format!("{arm}: {l}")),
            _ => None,
        }
    }

    /// The same step with `f` applied to every text it carries (the runner masks an API key with it).
    pub(crate) fn map_text(&self, f: &dyn Fn(&str) -> String) -> Step {
        match self {
            Step::EvidenceDir(p) => Step::EvidenceDir(p.clone()),
            Step::PairEvidenceDir(p) => Step::PairEvidenceDir(p.clone()),
            Step::Setup(s) => Step::Setup(f(s)),
            Step::SetupFailed(s) => Step::SetupFailed(f(s)),
            Step::ServeStarting { port, command } => Step::ServeStarting {
                port: *port,
                command: f(command),
            },
            Step::ServeFailedToStart(s) => Step::ServeFailedToStart(f(s)),
            Step::ServeReady { ready_ms, polls } => Step::ServeReady {
                ready_ms: *ready_ms,
                polls: *polls,
            },
            Step::ServeNeverReady(s) => Step::ServeNeverReady(f(s)),
            Step::RequestAnswered {
                index,
                warmup,
                status,
                ttft_ms,
                decode_tok_s,
                completion_tokens,
            } => Step::RequestAnswered {
                index: *index,
                warmup: *warmup,
                status: f(status),
                ttft_ms: *ttft_ms,
                decode_tok_s: *decode_tok_s,
                completion_tokens: *completion_tokens,
            },
            Step::ServeDied(s) => Step::ServeDied(f(s)),
            Step::ServeStopped(s) => Step::ServeStopped(f(s)),
            Step::ArmStarted { arm, runtime } => Step::ArmStarted {
                arm: arm.clone(),
                runtime: f(runtime),
            },
            Step::Arm { arm, step } => Step::Arm {
                arm: arm.clone(),
                step: Box::new(step.map_text(f)),
            },
            Step::Waiting(w) => Step::Waiting(crate::io::progress::Waiting {
                what: f(&w.what),
                detail: w.detail.as_deref().map(f),
                ..w.clone()
            }),
            Step::Note(s) => Step::Note(f(s)),
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = |x: Option<String>| x.unwrap_or_else(|| "-".into());
        match self {
            Step::EvidenceDir(p) => write!(f, "evidence: {}", p.display()),
            Step::PairEvidenceDir(p) => write!(f, "pair evidence: {}", p.display()),
            Step::Setup(s) => write!(f, "setup: {s}"),
            Step::SetupFailed(s) => write!(f, "setup failed: {s}"),
            Step::ServeStarting { port, command } => {
                write!(f, "starting serve on port {port}: {command}")
            }
            Step::ServeFailedToStart(s) => write!(f, "serve failed to start: {s}"),
            Step::ServeReady { ready_ms, polls } => write!(
                f,
                "serve ready after {:.2} s ({polls} polls)",
                ready_ms / 1000.0
            ),
            Step::ServeNeverReady(s) => write!(f, "serve never became ready: {s}"),
            Step::RequestAnswered {
                index,
                warmup,
                status,
                ttft_ms,
                decode_tok_s,
                completion_tokens,
            } => write!(
                f,
                "request {index:02}{}: {status} ttft {} decode {} tokens {}",
                if *warmup { " (warmup)" } else { "" },
                opt(ttft_ms.map(|t| format!("{t:.0} ms"))),
                opt(decode_tok_s.map(|t| format!("{t:.1} tok/s"))),
                opt(completion_tokens.map(|t| t.to_string())),
            ),
            Step::ServeDied(s) => write!(f, "serve died: {s}"),
            Step::ServeStopped(s) => write!(f, "serve stopped: {s}"),
            Step::ArmStarted { arm, runtime } => write!(f, "{arm}: {runtime}"),
            Step::Arm { arm, step } => write!(f, "{arm}: {step}"),
            Step::Waiting(w) => write!(f, "{w}"),
            Step::Note(s) => f.write_str(s),
        }
    }
}

/// What happened in a run, in order. Borrowed: an event lives as long as the reporters look at it.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A gate file whose spec does not parse (its one `<stem>::spec` test fails; nothing of it runs).
    SpecInvalid {
        /// The gate file as given.
        file: &'a Path,
        /// The error, as printed.
        error: &'a str,
        /// Wall time, seconds.
        duration_s: f64,
    },
    /// A gate starts: `on` is the evidence directory when recorded evidence is re-judged (`servegate judge`),
    /// None when the gate runs live.
    GateStarted {
        /// The gate.
        spec: &'a GateSpec,
        /// The gate file as the user named it.
        file: &'a Path,
        /// The run directory re-judged, for `servegate judge`.
        on: Option<&'a Path>,
    },
    /// A step of the runner (evidence dir, serve ready or failed, requests answered, serve stopped).
    Progress {
        /// The gate.
        spec: &'a GateSpec,
        /// The step.
        step: &'a Step,
    },
    /// A gate's `[requires]` are unmet: ignored, or failed under `SERVEGATE_STRICT=1`.
    GateUnmet {
        /// The gate.
        spec: &'a GateSpec,
        /// Why, one entry per unmet requirement.
        unmet: &'a [String],
        /// Unmet requirements fail.
        strict: bool,
        /// The tests listed.
        listed: &'a [Listed],
    },
    /// A gate ran (or its evidence was re-judged) and was judged: `outcome` holds the verdicts.
    GateJudged {
        /// The gate.
        spec: &'a GateSpec,
        /// Evidence and verdicts.
        outcome: &'a RunOutcome,
        /// The tests listed (every declared assertion, or the harness's selected trials).
        listed: &'a [Listed],
    },
    /// A gate's run could not write or read its evidence, or panicked (`panicked`: a servegate bug).
    GateError {
        /// The gate.
        spec: &'a GateSpec,
        /// The error or the panic message.
        error: &'a str,
        /// True for a panic of the run.
        panicked: bool,
        /// The tests listed.
        listed: &'a [Listed],
    },
    /// A gate refused to start: its `[hold] ticket` does not exist (and no `--allow-no-hold`). Its tests fail
    /// as a requirement unmet (exit 6), whatever `SERVEGATE_STRICT` says.
    GateRefused {
        /// The gate.
        spec: &'a GateSpec,
        /// Why, naming the ticket and the way out.
        why: &'a str,
        /// The tests listed.
        listed: &'a [Listed],
    },
    /// Tests of a gate listed but not run (e.g. ignored by the test arguments under `--bench`).
    GateNotRun {
        /// The gate.
        spec: &'a GateSpec,
        /// Why they did not run.
        why: &'a str,
        /// The tests listed.
        listed: &'a [Listed],
    },
}

/// Something that consumes the events of a run.
pub trait Reporter {
    /// Takes one event.
    fn event(&mut self, event: &Event<'_>);
}

/// Builds the results document from the events: one gate per gate event (a gate with no listed test is
/// dropped), one test per listed assertion.
#[derive(Debug, Clone)]
pub struct Collector {
    results: Results,
}

impl Collector {
    /// An empty document for `producer`, started now.
    pub fn new(producer: Producer, strict: bool) -> Collector {
        Collector {
            results: Results::begin(producer, strict),
        }
    }

    /// The document so far (not yet finished: see [`Results::finish`] and
    /// [`crate::sinks::outputs::Outputs::finish`]).
    pub fn into_results(self) -> Results {
        self.results
    }

    /// The document so far, to amend (start time, problems).
    pub(crate) fn results_mut(&mut self) -> &mut Results {
        &mut self.results
    }
}

fn tests(
    spec: &GateSpec,
    listed: &[Listed],
    outcome: TestOutcome,
    kind: Option<FailureKind>,
    message: &str,
) -> Vec<AssertionResult> {
    listed
        .iter()
        .map(|l| {
            AssertionResult::new(
                &spec.name,
                &l.assertion,
                outcome,
                kind,
                message,
                l.duration_s,
            )
            .at_line(spec.decl_line_of(&l.assertion))
        })
        .collect()
}

/// The result of one gate event, None for an event that is not a gate's result.
pub(crate) fn gate_results(event: &Event<'_>) -> Option<GateResults> {
    Some(match *event {
        Event::SpecInvalid {
            file,
            error,
            duration_s,
        } => GateResults::spec_invalid(file, error, duration_s),
        Event::GateStarted { .. } | Event::Progress { .. } => return None,
        Event::GateUnmet {
            spec,
            unmet,
            strict,
            listed,
        } => {
            let reason = format!("requires: {}", unmet.join("; "));
            let t = if strict {
                tests(
                    spec,
                    listed,
                    TestOutcome::Failed,
                    Some(FailureKind::RequirementUnmet),
                    &format!("{reason} (SERVEGATE_STRICT is set: unmet requirements fail)"),
                )
            } else {
                tests(spec, listed, TestOutcome::Skipped, None, &reason)
                    .into_iter()
                    .map(|t| t.with_skip_reason(report::unmet_reason(unmet)))
                    .collect()
            };
            GateResults::not_run(&spec.name, &spec.file, &spec.description, &reason, t)
        }
        Event::GateJudged {
            spec,
            outcome,
            listed,
        } => {
            let t = listed
                .iter()
                .map(
                    |l| match outcome.verdicts.iter().find(|v| v.assertion == l.assertion) {
                        Some(v) => report::assertion_from_verdict(spec, outcome, v, l.duration_s),
                        None => AssertionResult::new(
                            &spec.name,
                            &l.assertion,
                            TestOutcome::Failed,
                            Some(FailureKind::Assertion),
                            &format!("no verdict for {}", l.assertion),
                            l.duration_s,
                        )
                        .at_line(spec.decl_line_of(&l.assertion)),
                    },
                )
                .collect();
            GateResults::ran(spec, outcome, t)
        }
        Event::GateError {
            spec,
            error,
            panicked,
            listed,
        } => {
            let (kind, msg, reason) = if panicked {
                (
                    FailureKind::Panic,
                    format!("the gate run panicked: {error}"),
                    format!("the run panicked: {error}"),
                )
            } else {
                let m = format!("evidence error: {error}");
                (FailureKind::EvidenceError, m.clone(), m)
            };
            let t = tests(spec, listed, TestOutcome::Failed, Some(kind), &msg);
            GateResults::not_run(&spec.name, &spec.file, &spec.description, &reason, t)
        }
        Event::GateRefused { spec, why, listed } => {
            let t = tests(
                spec,
                listed,
                TestOutcome::Failed,
                Some(FailureKind::RequirementUnmet),
                why,
            );
            GateResults::not_run(&spec.name, &spec.file, &spec.description, why, t)
        }
        Event::GateNotRun { spec, why, listed } => {
            let t = tests(spec, listed, TestOutcome::Skipped, None, why)
                .into_iter()
                .map(|t| t.with_skip_reason(report::SKIP_NOT_RUN))
                .collect();
            GateResults::not_run(&spec.name, &spec.file, &spec.description, "not run", t)
        }
    })
}

impl Reporter for Collector {
    fn event(&mut self, event: &Event<'_>) {
        if let Some(g) = gate_results(event) {
            self.results.push(g);
        }
    }
}

/// The console of `servegate run` and `servegate judge`: `gate NAME (FILE)` (with ` on DIR` when re-judging),
/// one verdict line per assertion (at most 300 characters, [`crate::sinks::line::shown`]), `evidence: DIR`,
/// `IGNORED requires: ...`; progress lines on stderr (`[gate] line`) unless quiet; errors on stderr. Every
/// line goes through its [`Printer`] ([`crate::text::lines`]), and a progress line is
/// [`crate::text::shown`] whole: nothing a serve or a gate author wrote reaches the terminal or the CI log raw.
#[derive(Debug, Clone, Default)]
pub struct Console {
    /// No progress lines.
    pub quiet: bool,
    /// The current gate is re-judged evidence (no `evidence:` line: the directory is in the heading).
    rejudging: bool,
    /// Where the lines go (stdout and stderr, or buffers in a test).
    printer: Printer,
}

impl Console {
    /// A console on stdout and stderr, with or without progress lines.
    pub fn new(quiet: bool) -> Console {
        Console::to(quiet, Printer::std())
    }

    /// A console printing through `printer`.
    pub(crate) fn to(quiet: bool, printer: Printer) -> Console {
        Console {
            quiet,
            rejudging: false,
            printer,
        }
    }
}

impl Reporter for Console {
    fn event(&mut self, event: &Event<'_>) {
        let p = self.printer.clone();
        match *event {
            Event::SpecInvalid { error, .. } => p.errln(&format!("error: {error}")),
            Event::GateStarted { spec, file, on } => {
                self.rejudging = on.is_some();
                let pair = if on.is_some() && spec.pair.is_some() {
                    "pair "
                } else {
                    ""
                };
                match on {
                    Some(dir) => p.outln(&format!(
                        "{pair}gate {} ({}) on {}",
                        spec.name,
                        file.display(),
                        dir.display()
                    )),
                    None => p.outln(&format!("gate {} ({})", spec.name, file.display())),
                }
            }
            Event::Progress { spec, step } => {
                if !self.quiet {
                    // A step is one line by contract; what it quotes (a serve's error, a log line, a command
                    // line) is outside text.
                    p.errln(&format!(
                        "[{}] {}",
                        spec.name,
                        crate::text::shown(&step.to_string())
                    ));
                }
            }
            Event::GateUnmet { unmet, .. } => p.outln(&format!(
                "IGNORED requires: {}",
                crate::text::shown(&unmet.join("; "))
            )),
            Event::GateJudged { outcome, .. } => {
                for v in &outcome.verdicts {
                    // One line of at most 300 characters unless -v (the whole message is in the reports).
                    p.outln(&crate::sinks::line::shown(&v.message));
                }
                if !self.rejudging {
                    p.outln(&format!("evidence: {}", outcome.dir.display()));
                }
            }
            Event::GateError { error, .. } => p.errln(&format!("error: {error}")),
            Event::GateRefused { why, .. } => {
                p.outln(&format!("REFUSED {}", crate::text::shown(why)))
            }
            Event::GateNotRun { .. } => {}
        }
    }
}

/// Several reporters fed the same events, in order.
pub struct Fanout<'r>(pub Vec<&'r mut dyn Reporter>);

impl Reporter for Fanout<'_> {
    fn event(&mut self, event: &Event<'_>) {
        for r in self.0.iter_mut() {
            r.event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_print_the_runner_s_progress_lines() {
        let req = Step::RequestAnswered {
            index: 3,
            warmup: true,
            status: "HTTP 200".into(),
            ttft_ms: Some(41.6),
            decode_tok_s: Some(47.04),
            completion_tokens: None,
        };
        assert_eq!(
            req.to_string(),
            "request 03 (warmup): HTTP 200 ttft 42 ms decode 47.0 tok/s tokens -"
        );
        let ready = Step::ServeReady {
            ready_ms: 1234.0,
            polls: 17,
        };
        assert_eq!(ready.to_string(), "serve ready after 1.23 s (17 polls)");
        let arm = Step::Arm {
            arm: "1-theirs".into(),
            step: Box::new(Step::ServeStarting {
                port: 8080,
                command: "llama-server -m KEY".into(),
            }),
        };
        assert_eq!(
            arm.to_string(),
            "1-theirs: starting serve on port 8080: llama-server -m KEY"
        );
        let masked = arm.map_text(&|t| t.replace("KEY", "***"));
        assert_eq!(
            masked.to_string(),
            "1-theirs: starting serve on port 8080: llama-server -m ***"
        );
    }

    #[test]
    fn a_wait_is_a_progress_line_in_an_arm_too_and_its_texts_are_masked() {
        let w = Step::Waiting(crate::io::progress::Waiting::new(
            "setup: provision KEY",
            12,
            Some("last: fetched KEY"),
        ));
        assert_eq!(
            w.waiting_line(true).as_deref(),
            Some("setup: provision KEY: 12 s (last: fetched KEY)")
        );
        let arm = Step::Arm {
            arm: "2-ours".into(),
            step: Box::new(w.map_text(&|t| t.replace("KEY", "***"))),
        };
        assert_eq!(
            arm.waiting_line(true).as_deref(),
            Some("2-ours: setup: provision ***: 12 s (last: fetched ***)")
        );
        assert_eq!(arm.to_string(), arm.waiting_line(false).unwrap());
        assert_eq!(Step::Note("n".into()).waiting_line(false), None);
        // A request's wait of a few seconds is a generation: the terse harness skips it, `run` prints it.
        let request = |secs| {
            Step::Waiting(
                crate::io::progress::Waiting::new("waiting for request 03's reply", secs, None)
                    .terse_from(crate::io::progress::REQUEST_TERSE_S),
            )
        };
        assert_eq!(request(2).waiting_line(true), None);
        assert!(request(2).waiting_line(false).is_some());
        assert!(request(12).waiting_line(true).is_some());
    }

    #[test]
    fn the_collector_lists_what_each_event_says() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("g.toml");
        let text = "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\n[assert.rate]\nfloor_tok_s = 1.0\n[assert.content]\n";
        std::fs::write(&file, text).unwrap();
        let spec = crate::spec::load(&file).unwrap();
        let mut c = Collector::new(Producer::Run, true);
        let unmet = vec!["path /dev/x does not exist".to_string()];
        c.event(&Event::GateUnmet {
            spec: &spec,
            unmet: &unmet,
            strict: true,
            listed: &Listed::all(&spec, 0.0),
        });
        c.event(&Event::GateError {
            spec: &spec,
            error: "disk full",
            panicked: false,
            listed: &Listed::all(&spec, 2.0),
        });
        let mut r = c.into_results();
        r.finish(3.0);
        assert_eq!(r.gates.len(), 2);
        assert_eq!(r.gates[0].exit_code, crate::error::exit::REQUIREMENT_UNMET);
        assert_eq!(r.gates[1].exit_code, crate::error::exit::EVIDENCE_ERROR);
        assert_eq!(r.gates[1].assertions[0].duration_s, 2.0);
        assert_eq!(
            r.gates[1].assertions[1].message,
            "evidence error: disk full"
        );
        assert_eq!(r.exit_code, crate::error::exit::REQUIREMENT_UNMET);
        assert_eq!(r.counts.failed, 4);
    }

    #[test]
    fn the_console_prints_through_its_printer_guarded_and_quiet_drops_progress() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("g.toml");
        let text = "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\n[assert.rate]\nfloor_tok_s = 1.0\n";
        std::fs::write(&file, text).unwrap();
        let spec = crate::spec::load(&file).unwrap();
        let step = Step::ServeReady {
            ready_ms: 1234.0,
            polls: 17,
        };
        for quiet in [false, true] {
            let p = Printer::captured();
            let mut c = Console::to(quiet, p.clone());
            c.event(&Event::GateStarted {
                spec: &spec,
                file: &file,
                on: None,
            });
            c.event(&Event::Progress {
                spec: &spec,
                step: &step,
            });
            c.event(&Event::GateRefused {
                spec: &spec,
                why: "::error::no ticket\u{1b}[31m",
                listed: &Listed::all(&spec, 0.0),
            });
            c.event(&Event::GateError {
                spec: &spec,
                error: "disk full",
                panicked: false,
                listed: &Listed::all(&spec, 0.0),
            });
            assert_eq!(
                p.out_text(),
                format!(
                    "gate g ({})\nREFUSED \\::error::no ticket\\u{{1b}}[31m\n",
                    file.display()
                )
            );
            let progress = if quiet {
                ""
            } else {
                "[g] serve ready after 1.23 s (17 polls)\n"
            };
            assert_eq!(p.err_text(), format!("{progress}error: disk full\n"));
        }
    }
}
