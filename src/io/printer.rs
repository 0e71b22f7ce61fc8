//! The one writer of the lines servegate's reporters print (the run console, the harness's gate report,
//! the replay serve's own log lines): the process's stdout and stderr, or (in the library's unit tests) two
//! buffers a test reads back.
//! Every line goes through [`crate::text::lines`], so no line can be a CI workflow command or carry a raw
//! control byte. Library code that prints takes a [`Printer`]; the binary prints through its own macros.
//!
//! A write to stdout that fails is never a panic nor lost in silence ([`stdout_failed`]): one line on stderr,
//! `error: stdout: <the OS error>`, then exit 5 (output that cannot be written, README's exit codes), or, once
//! a serve may be running (the stop handlers are installed), the stop a signal makes: the serves torn down,
//! the run written as `interrupted`, exit 5.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
#[cfg(test)]
use std::sync::{Arc, Mutex};

/// Set by the first failed write or flush of stdout ([`stdout_failed`]).
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// What ends the process on a failed stdout once serves may be running ([`on_stdout_failure`]).
static STOP: OnceLock<fn()> = OnceLock::new();

/// Has `stop` end the process on a failed write to stdout instead of an immediate exit: the stop handlers
/// (`io::signals::install`) register their stop, which tears the serves down and leaves the exit to the
/// run's checkpoint (`run.json` written `interrupted`). The first registration wins.
pub(crate) fn on_stdout_failure(stop: fn()) {
    let _ = STOP.set(stop);
}

/// Whether a write or flush of stdout has failed in this process.
pub fn stdout_has_failed() -> bool {
    STDOUT_FAILED.load(Ordering::SeqCst)
}

/// A write or flush of stdout failed with `e`. The first time: `error: stdout: <e>` on stderr, then either
/// the registered stop ([`on_stdout_failure`]; it returns, the run ends at its next checkpoint) or the exit
/// with [`crate::error::exit::EVIDENCE_ERROR`] at once. Later failures (the output of a run being stopped)
/// are dropped. A closed pipe reaches here only where SIGPIPE is ignored (a command that may run a serve):
/// elsewhere SIGPIPE ends the process quietly, as it ends `cat`.
pub fn stdout_failed(e: &std::io::Error) {
    if STDOUT_FAILED.swap(true, Ordering::SeqCst) {
        return;
    }
    Printer::std().errln(&format!("error: stdout: {e}"));
    match STOP.get() {
        Some(stop) => stop(),
        None => std::process::exit(crate::error::exit::EVIDENCE_ERROR),
    }
}

/// Writes `bytes` to stdout as they are; a failure goes to [`stdout_failed`]. For output that is not text
/// lines (an export's JSON, a replayed stream's bytes); lines go through [`Printer`].
pub fn stdout_bytes(bytes: &[u8]) {
    if stdout_has_failed() {
        return;
    }
    let r = std::io::stdout().lock().write_all(bytes);
    if let Err(e) = r {
        stdout_failed(&e);
    }
}

/// Flushes stdout; a failure goes to [`stdout_failed`]. The binary calls it before it exits: what is still
/// buffered would else be lost without a word (the exit's own flush ignores errors).
pub fn flush_stdout() {
    if stdout_has_failed() {
        return;
    }
    let r = std::io::stdout().flush();
    if let Err(e) = r {
        stdout_failed(&e);
    }
}

/// Where a [`Printer`]'s two streams go.
#[derive(Debug, Clone)]
enum Streams {
    /// The process's stdout (checked: [`stdout_bytes`]) and stderr (a failed write dropped).
    Std,
    /// Two buffers (stdout, stderr), shared by the printer's clones (the library's unit tests read them).
    #[cfg(test)]
    Captured(Arc<Mutex<(Vec<u8>, Vec<u8>)>>),
}

/// The writer of servegate's printed lines ([`Printer::std`], or [`Printer::captured`] in tests). Cheap to
/// clone; the clones write to the same place.
#[derive(Debug, Clone)]
pub struct Printer {
    streams: Streams,
}

impl Default for Printer {
    fn default() -> Printer {
        Printer::std()
    }
}

/// Which stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum To {
    Out,
    Err,
}

impl Printer {
    /// Prints to the process's stdout and stderr.
    pub fn std() -> Printer {
        Printer {
            streams: Streams::Std,
        }
    }

    /// Prints into two buffers, read back with [`Printer::out_text`] and [`Printer::err_text`].
    #[cfg(test)]
    pub(crate) fn captured() -> Printer {
        Printer {
            streams: Streams::Captured(Arc::default()),
        }
    }

    /// `s` and a line break on stdout, through [`crate::text::lines`].
    pub fn outln(&self, s: &str) {
        self.write(To::Out, &format!("{}\n", crate::text::lines(s)));
    }

    /// `s` on stdout through [`crate::text::lines`], no line break added.
    pub fn out(&self, s: &str) {
        self.write(To::Out, &crate::text::lines(s));
    }

    /// `s` and a line break on stderr, through [`crate::text::lines`].
    pub fn errln(&self, s: &str) {
        self.write(To::Err, &format!("{}\n", crate::text::lines(s)));
    }

    /// `s` on stdout as it is, flushed: text already escaped by its own rules (GitHub workflow commands,
    /// `sinks::github`) or bytes that must pass unchanged.
    pub(crate) fn out_raw(&self, s: &str) {
        self.write(To::Out, s);
        self.flush();
    }

    /// Flushes stdout (the process's; a buffer needs none).
    #[cfg_attr(not(test), allow(irrefutable_let_patterns))] // `Captured` exists in the unit tests only
    pub(crate) fn flush(&self) {
        if let Streams::Std = self.streams {
            flush_stdout();
        }
    }

    fn write(&self, to: To, s: &str) {
        match &self.streams {
            Streams::Std => match to {
                // The unit tests keep `print!`: libtest captures only what its macros print.
                #[cfg(test)]
                To::Out => print!("{s}"),
                #[cfg(not(test))]
                To::Out => stdout_bytes(s.as_bytes()),
                #[cfg(test)]
                To::Err => eprint!("{s}"),
                // A stderr that cannot be written (a full disk, a closed pipe) has nowhere to be said: the line
                // is dropped and the command goes on to its own exit code, never a panic (`eprint!` panics).
                #[cfg(not(test))]
                To::Err => {
                    let _ = std::io::stderr().lock().write_all(s.as_bytes());
                }
            },
            #[cfg(test)]
            Streams::Captured(b) => {
                let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
                match to {
                    To::Out => b.0.extend_from_slice(s.as_bytes()),
                    To::Err => b.1.extend_from_slice(s.as_bytes()),
                }
            }
        }
    }

    /// What a captured printer wrote to stdout (empty for [`Printer::std`]).
    #[cfg(test)]
    pub(crate) fn out_text(&self) -> String {
        self.text(To::Out)
    }

    /// What a captured printer wrote to stderr (empty for [`Printer::std`]).
    #[cfg(test)]
    pub(crate) fn err_text(&self) -> String {
        self.text(To::Err)
    }

    #[cfg(test)]
    fn text(&self, to: To) -> String {
        match &self.streams {
            Streams::Std => String::new(),
            Streams::Captured(b) => {
                let b = b.lock().unwrap_or_else(|e| e.into_inner());
                String::from_utf8_lossy(if to == To::Out { &b.0 } else { &b.1 }).into_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_printer_keeps_each_stream_guarded_and_its_clones_share_it() {
        let p = Printer::captured();
        let q = p.clone();
        p.outln("gate x");
        q.out("::error::no\n");
        p.errln("warn\u{1b}[31m");
        p.out_raw("::warning file=g::raw\n");
        assert_eq!(
            p.out_text(),
            "gate x\n\\::error::no\n::warning file=g::raw\n"
        );
        assert_eq!(q.err_text(), "warn\\u{1b}[31m\n");
        assert_eq!(Printer::std().out_text(), "");
    }
}
