//! Stop signals as typed events: a [`SignalSource`] delivers [`SignalEvent`]s (the OS's, none, or a
//! script's), [`Interruption`] decides what each one means (the first stops, a second ends at once, a
//! parent's death counts once and never as a second stop), and [`drive`] hands the decisions to a
//! [`SignalHandler`] (the OS one tears the serves down and exits; a test's records). So the interruption
//! logic runs in a unit test with no process, no signal and no sleep.

use std::collections::VecDeque;

/// A stop signal as the handler hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalEvent {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP (the terminal went away).
    Hangup,
    /// The parent process died (`cargo` killed alone): `PR_SET_PDEATHSIG(SIGUSR2)` or the poll of
    /// `getppid()` ([`super::watch_parent`]). Ends the process as a SIGTERM would.
    ParentDied,
}

impl SignalEvent {
    /// The signal number the event ends the process as (a parent's death: SIGTERM), whose
    /// [`super::exit_code_for`] is the exit code (130, 143, 129).
    pub fn signo(self) -> i32 {
        match self {
            SignalEvent::Interrupt => libc::SIGINT,
            SignalEvent::Terminate | SignalEvent::ParentDied => libc::SIGTERM,
            SignalEvent::Hangup => libc::SIGHUP,
        }
    }

    /// The event of an OS signal: SIGINT, SIGTERM, SIGHUP; SIGUSR2 (the parent-death signal) is
    /// [`SignalEvent::ParentDied`] only when `parent_gone` (PDEATHSIG also fires when the parent's spawning
    /// *thread* ends, and a stray SIGUSR2 is not a death). Anything else: none.
    pub fn of_signo(signo: i32, parent_gone: impl FnOnce() -> bool) -> Option<SignalEvent> {
        match signo {
            libc::SIGINT => Some(SignalEvent::Interrupt),
            libc::SIGTERM => Some(SignalEvent::Terminate),
            libc::SIGHUP => Some(SignalEvent::Hangup),
            libc::SIGUSR2 if parent_gone() => Some(SignalEvent::ParentDied),
            _ => None,
        }
    }
}

/// Where stop signals come from: the next one, blocking; `None` when no more will come.
pub trait SignalSource {
    /// The next event; `None`: the source has ended.
    fn next_event(&mut self) -> Option<SignalEvent>;
}

/// The OS's signals: SIGINT, SIGTERM, SIGHUP and the parent-death SIGUSR2, read on the thread that calls
/// [`SignalSource::next_event`] (`signal_hook`'s self-pipe: nothing runs in the signal handler itself).
pub struct OsSignals {
    signals: signal_hook::iterator::Signals,
}

impl OsSignals {
    /// Takes over SIGINT, SIGTERM, SIGHUP and SIGUSR2 for this process (their default actions no longer
    /// run). Errors: the OS refused the handlers.
    pub fn stop_signals() -> std::io::Result<OsSignals> {
        OsSignals::of(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR2])
    }

    /// Takes over exactly `signos` (e.g. SIGINT and SIGTERM for the replay serve).
    pub fn of(signos: &[i32]) -> std::io::Result<OsSignals> {
        Ok(OsSignals {
            signals: signal_hook::iterator::Signals::new(signos)?,
        })
    }
}

impl SignalSource for OsSignals {
    fn next_event(&mut self) -> Option<SignalEvent> {
        loop {
            let signo = self.signals.forever().next()?;
            if let Some(e) = SignalEvent::of_signo(signo, super::parent_gone) {
                return Some(e);
            }
        }
    }
}

/// No signals at all (a test's handler, as nextest's no-op one): the source ends at once.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSignals;

impl SignalSource for NoSignals {
    fn next_event(&mut self) -> Option<SignalEvent> {
        None
    }
}

/// Signals a test scripts: these events in order, then the end.
#[derive(Debug, Clone, Default)]
pub struct ScriptedSignals(pub VecDeque<SignalEvent>);

impl ScriptedSignals {
    /// The events `events`, in order.
    pub fn new(events: impl IntoIterator<Item = SignalEvent>) -> ScriptedSignals {
        ScriptedSignals(events.into_iter().collect())
    }
}

impl SignalSource for ScriptedSignals {
    fn next_event(&mut self) -> Option<SignalEvent> {
        self.0.pop_front()
    }
}

/// What an event means, as [`Interruption::on`] decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// Nothing: a parent's death seen a second time (its two ways both fire), or one after the first stop
    /// (Ctrl-C reaches `cargo` and the harness together; `cargo` dying then is no second request to stop).
    Ignore,
    /// The first stop, ending the process as `signo`: recorded at once (no run may end `complete`), the
    /// serves torn down with their grace, then the end at the next checkpoint (or the fallback).
    Stop {
        /// The signal the process ends as.
        signo: i32,
    },
    /// A second stop during the ending: the serves killed and the process ended at once, with the first
    /// stop's code.
    Immediate {
        /// The first stop's signal.
        first: i32,
    },
}

/// The interruption state of a process: which stop came first, whether a parent's death was seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interruption {
    first: Option<i32>,
    parent_death_seen: bool,
}

impl Interruption {
    /// The first stop's signal, if one came.
    pub fn first(&self) -> Option<i32> {
        self.first
    }

    /// What `event` means now, and the state after it.
    pub fn on(&mut self, event: SignalEvent) -> Reaction {
        if event == SignalEvent::ParentDied {
            // Counted once (PDEATHSIG and the poll both see the one death), and never as a second stop.
            if std::mem::replace(&mut self.parent_death_seen, true) || self.first.is_some() {
                return Reaction::Ignore;
            }
        }
        match self.first {
            None => {
                self.first = Some(event.signo());
                Reaction::Stop {
                    signo: event.signo(),
                }
            }
            Some(first) => Reaction::Immediate { first },
        }
    }
}

/// What is done about a stop ([`drive`] calls it).
pub trait SignalHandler {
    /// The first stop ([`Reaction::Stop`]).
    fn stop(&mut self, signo: i32);
    /// A second stop ([`Reaction::Immediate`]).
    fn immediate(&mut self, first: i32);
}

/// Does nothing about any stop (a test that drives a source and only reads the state).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopHandler;

impl SignalHandler for NoopHandler {
    fn stop(&mut self, _: i32) {}
    fn immediate(&mut self, _: i32) {}
}

/// Receives every event of `source` until it ends, decides each with one [`Interruption`] and hands the
/// decision to `handler`. Returns the state at the end (the OS source never ends; its handler exits the
/// process).
pub fn drive(source: &mut dyn SignalSource, handler: &mut dyn SignalHandler) -> Interruption {
    let mut state = Interruption::default();
    while let Some(event) = source.next_event() {
        match state.on(event) {
            Reaction::Ignore => {}
            Reaction::Stop { signo } => handler.stop(signo),
            Reaction::Immediate { first } => handler.immediate(first),
        }
    }
    state
}

/// How the process ends because of a stop: the line for stderr and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// [`super::interrupted_line`]: `INTERRUPTED: stopped by SIGINT; nothing was judged (exit 130)`.
    pub line: String,
    /// [`super::exit_code_for`] the signal: 130, 143, 129.
    pub code: i32,
}

impl Ending {
    /// The ending of a process stopped by `signo`.
    pub fn of(signo: i32) -> Ending {
        Ending {
            line: super::interrupted_line(signo),
            code: super::exit_code_for(signo),
        }
    }

    /// Prints the line on stderr and exits with the code.
    pub fn exit(self) -> ! {
        crate::io::printer::Printer::std().errln(&self.line);
        std::process::exit(self.code)
    }
}

#[cfg(test)]
mod tests {
    use super::SignalEvent::*;
    use super::*;

    /// What a handler was asked, in order, and the endings it would have exited with, having marked the
    /// runs it was given interrupted (as the OS handler's fallback does with the active runs).
    #[derive(Default)]
    struct Recorder {
        runs: Vec<std::path::PathBuf>,
        asked: Vec<Reaction>,
        endings: Vec<Ending>,
    }

    impl SignalHandler for Recorder {
        fn stop(&mut self, signo: i32) {
            self.asked.push(Reaction::Stop { signo });
            self.endings
                .push(super::super::end_marking(&self.runs, signo));
        }
        fn immediate(&mut self, first: i32) {
            self.asked.push(Reaction::Immediate { first });
            self.endings.push(Ending::of(first));
        }
    }

    fn driven(events: &[SignalEvent]) -> (Interruption, Vec<Reaction>) {
        let mut r = Recorder::default();
        let state = drive(&mut ScriptedSignals::new(events.iter().copied()), &mut r);
        (state, r.asked)
    }

    #[test]
    fn the_first_stop_ends_cleanly_marking_the_evidence_interrupted_with_130_or_143() {
        for (event, code, name) in [
            (Interrupt, 130, "SIGINT"),
            (Terminate, 143, "SIGTERM"),
            (Hangup, 129, "SIGHUP"),
            (ParentDied, 143, "SIGTERM"),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let run_json = tmp.path().join("run.json");
            std::fs::write(&run_json, r#"{"status": "running", "gate": "g"}"#).unwrap();
            let mut r = Recorder {
                runs: vec![run_json.clone()],
                ..Recorder::default()
            };
            let state = drive(&mut ScriptedSignals::new([event]), &mut r);
            assert_eq!(state.first(), Some(event.signo()));
            assert_eq!(
                r.asked,
                vec![Reaction::Stop {
                    signo: event.signo()
                }]
            );
            assert_eq!(r.endings[0].code, code);
            assert_eq!(
                r.endings[0].line,
                format!("INTERRUPTED: stopped by {name}; nothing was judged (exit {code})")
            );
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
            assert_eq!(v["status"], "interrupted", "{event:?}");
            assert_eq!(v["gate"], "g");
        }
    }

    #[test]
    fn a_second_stop_ends_at_once_with_the_first_stop_s_code() {
        let (state, asked) = driven(&[Terminate, Interrupt]);
        assert_eq!(
            asked,
            vec![
                Reaction::Stop {
                    signo: libc::SIGTERM
                },
                Reaction::Immediate {
                    first: libc::SIGTERM
                }
            ]
        );
        assert_eq!(state.first(), Some(libc::SIGTERM));
        assert_eq!(Ending::of(libc::SIGTERM).code, 143);
        // Ctrl-C twice: the second one cuts the teardown short, still 130.
        let (_, asked) = driven(&[Interrupt, Interrupt]);
        assert_eq!(
            asked[1],
            Reaction::Immediate {
                first: libc::SIGINT
            }
        );
        // A parent's death first, then Ctrl-C: that is a second request to stop.
        let (_, asked) = driven(&[ParentDied, Interrupt]);
        assert_eq!(
            asked,
            vec![
                Reaction::Stop {
                    signo: libc::SIGTERM
                },
                Reaction::Immediate {
                    first: libc::SIGTERM
                }
            ]
        );
    }

    #[test]
    fn the_parent_s_death_after_ctrl_c_is_not_a_second_signal() {
        // Ctrl-C reaches `cargo` and the harness together; `cargo` then dies and the harness gets its
        // parent-death signal: the teardown keeps its grace.
        let (state, asked) = driven(&[Interrupt, ParentDied]);
        assert_eq!(
            asked,
            vec![Reaction::Stop {
                signo: libc::SIGINT
            }]
        );
        assert_eq!(state.first(), Some(libc::SIGINT));
        // Its two ways (PDEATHSIG and the poll) are one death.
        let (_, asked) = driven(&[ParentDied, ParentDied]);
        assert_eq!(
            asked,
            vec![Reaction::Stop {
                signo: libc::SIGTERM
            }]
        );
    }

    #[test]
    fn the_no_op_source_and_handler_do_nothing() {
        let mut r = Recorder::default();
        assert_eq!(drive(&mut NoSignals, &mut r), Interruption::default());
        assert!(r.asked.is_empty());
        let state = drive(&mut ScriptedSignals::new([Hangup]), &mut NoopHandler);
        assert_eq!(state.first(), Some(libc::SIGHUP));
    }

    #[test]
    fn a_parent_death_signal_is_one_only_when_the_parent_is_gone() {
        assert_eq!(SignalEvent::of_signo(libc::SIGUSR2, || false), None);
        assert_eq!(
            SignalEvent::of_signo(libc::SIGUSR2, || true),
            Some(ParentDied)
        );
        assert_eq!(
            SignalEvent::of_signo(libc::SIGINT, || false),
            Some(Interrupt)
        );
        assert_eq!(SignalEvent::of_signo(libc::SIGUSR1, || true), None);
    }
}
