//! All of servegate's error types and the process exit codes, in one place (as cargo-nextest does), so CI can
//! tell "an assertion failed" from "the spec is invalid" from "the serve never became ready".

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Exit codes of the `servegate` binary. Stable: CI scripts may match on them.
pub mod exit {
    /// Every assertion passed (ignored gates do not count as failures unless `SERVEGATE_STRICT=1`).
    pub const PASS: i32 = 0;
    /// At least one assertion failed on evidence that was gathered.
    pub const ASSERTION_FAILED: i32 = 1;
    /// Bad command-line usage (clap's own code).
    pub const USAGE: i32 = 2;
    /// A gate spec (or another input file) is invalid: nothing was started.
    pub const SPEC_INVALID: i32 = 3;
    /// The serve never became ready (port in use, exited, timed out, setup failed): nothing was judged on it.
    pub const SERVE_NOT_READY: i32 = 4;
    /// Evidence could not be read or written (I/O, a malformed run directory), or stdout could not be written.
    pub const EVIDENCE_ERROR: i32 = 5;
    /// A required device, path or command is missing and `SERVEGATE_STRICT=1` is set.
    pub const REQUIREMENT_UNMET: i32 = 6;
    /// Nothing was checked: no gate file, a filter that selects no assertion, or every selected gate ignored
    /// (unmet `[requires]`). A job that checked nothing is not green.
    pub const NOTHING_CHECKED: i32 = 7;
    /// No assertion failed, but at least one is indeterminate: the evidence cannot decide (too few samples, a
    /// confidence the n cannot reach, an interval straddling the bound). Never a pass.
    pub const INDETERMINATE: i32 = 8;
    /// No assertion failed or was indeterminate, but a run was not comparable with its baseline and
    /// `SERVEGATE_STRICT=1` is set (without it, an incomparable trial is skipped with the reason).
    pub const INCOMPARABLE: i32 = 9;
    /// No assertion failed, but a run is void: the client fell behind its schedule. Never a pass.
    pub const VOID: i32 = 10;
    /// The harness behind `cargo test --test gates` only: a trial failed (libtest's own code, so `cargo test`
    /// reads it as it reads any failed test). The reports it writes carry the code above for the cause.
    pub const LIBTEST_FAILED: i32 = 101;

    /// Every exit code of `servegate run`, in order, with its few words: the one list. `servegate --help`
    /// prints it ([`summary`]); README's "Exit codes" paragraph and docs/ci.md's table are tested against it
    /// (`tests/pure/exit_codes_doc.rs`), so a code added here and not there fails a test.
    pub const CODES: &[(i32, &str)] = &[
        (PASS, "pass"),
        (ASSERTION_FAILED, "assertion failed"),
        (USAGE, "usage"),
        (SPEC_INVALID, "spec invalid"),
        (SERVE_NOT_READY, "serve never ready"),
        (EVIDENCE_ERROR, "evidence error"),
        (REQUIREMENT_UNMET, "requirement unmet (strict)"),
        (NOTHING_CHECKED, "nothing checked"),
        (INDETERMINATE, "indeterminate"),
        (INCOMPARABLE, "incomparable (strict)"),
        (VOID, "void"),
    ];

    /// [`CODES`] on one line, as `servegate --help` ends: `Exit codes: 0 pass, 1 assertion failed, ...,
    /// 10 void (docs/ci.md "Exit codes").`
    pub fn summary() -> String {
        let list: Vec<String> = CODES.iter().map(|(c, w)| format!("{c} {w}")).collect();
        format!(
            "Exit codes: {} (docs/ci.md \"Exit codes\").",
            list.join(", ")
        )
    }

    /// The order in which exit codes are worse than each other, for the worst of several gates: PASS, then
    /// INCOMPARABLE, INDETERMINATE and VOID (nothing failed, but nothing passed either), then ASSERTION_FAILED
    /// and the codes 3-7 in their numeric order. A run with one failed and one indeterminate gate exits 1.
    pub fn severity(code: i32) -> u8 {
        match code {
            PASS => 0,
            INCOMPARABLE => 1,
            INDETERMINATE => 2,
            VOID => 3,
            c if (1..=7).contains(&c) => 3 + c as u8,
            _ => 20,
        }
    }

    /// The worse of two exit codes by [`severity`].
    pub fn worse(a: i32, b: i32) -> i32 {
        if severity(b) > severity(a) {
            b
        } else {
            a
        }
    }
}

/// Why a test failed. Each kind maps to the `servegate` exit code CI can match on ([`FailureKind::exit_code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The assertion does not hold on evidence that was gathered (exit 1).
    Assertion,
    /// The trial panicked: a bug in servegate (exit 1).
    Panic,
    /// The gate spec is invalid; nothing was started (exit 3).
    SpecInvalid,
    /// The serve never became ready; nothing was judged on it (exit 4).
    ServeNotReady,
    /// Evidence could not be written or read (exit 5).
    EvidenceError,
    /// A `[requires]` entry is unmet and `SERVEGATE_STRICT=1` is set (exit 6).
    RequirementUnmet,
    /// The evidence cannot decide the assertion (exit 8).
    Indeterminate,
    /// The run is not comparable with its baseline and `SERVEGATE_STRICT=1` is set (exit 9).
    Incomparable,
    /// The client fell behind its schedule: the run is void (exit 10).
    Void,
}

impl FailureKind {
    /// The `servegate` exit code for this kind of failure.
    pub fn exit_code(self) -> i32 {
        exit_code(Some(self))
    }

    /// The snake_case name (as in the JSON and the JUnit `failure type`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Assertion => "assertion",
            FailureKind::Panic => "panic",
            FailureKind::SpecInvalid => "spec_invalid",
            FailureKind::ServeNotReady => "serve_not_ready",
            FailureKind::EvidenceError => "evidence_error",
            FailureKind::RequirementUnmet => "requirement_unmet",
            FailureKind::Indeterminate => "indeterminate",
            FailureKind::Incomparable => "incomparable",
            FailureKind::Void => "void",
        }
    }

    /// How severe the failure is, for picking the worst of several: see [`exit::severity`].
    pub fn severity(self) -> u8 {
        exit::severity(self.exit_code())
    }
}

/// The one mapping from how a gate, a run or a command ended to the process exit code ([`exit`]): `None`
/// (nothing failed) is [`exit::PASS`]; each [`FailureKind`] has its code. Every exit code servegate computes
/// from an outcome goes through here.
pub fn exit_code(failure: Option<FailureKind>) -> i32 {
    match failure {
        None => exit::PASS,
        Some(FailureKind::Assertion | FailureKind::Panic) => exit::ASSERTION_FAILED,
        Some(FailureKind::SpecInvalid) => exit::SPEC_INVALID,
        Some(FailureKind::ServeNotReady) => exit::SERVE_NOT_READY,
        Some(FailureKind::EvidenceError) => exit::EVIDENCE_ERROR,
        Some(FailureKind::RequirementUnmet) => exit::REQUIREMENT_UNMET,
        Some(FailureKind::Indeterminate) => exit::INDETERMINATE,
        Some(FailureKind::Incomparable) => exit::INCOMPARABLE,
        Some(FailureKind::Void) => exit::VOID,
    }
}

/// `git bisect run`'s exit codes (git-bisect(1)): 0 this commit is good, 1..=124 and 126..=127 it is bad,
/// 125 it cannot be tested (skip); anything above 127 aborts the bisection.
pub mod bisect {
    /// Good: every assertion passed.
    pub const GOOD: i32 = 0;
    /// Bad: an assertion failed on gathered evidence (a regression).
    pub const BAD: i32 = 1;
    /// Skip: this commit could not be judged.
    pub const SKIP: i32 = 125;
}

/// The one mapping from a servegate exit code ([`exit`]) to `git bisect run`'s contract ([`bisect`]): PASS is
/// good; ASSERTION_FAILED (and the harness's libtest failure) is bad; everything else, where nothing could be
/// judged either way (usage, invalid spec, serve never ready or setup failed, evidence error, unmet
/// requirement, nothing checked, indeterminate, incomparable, void), is skip. Never above 127.
pub fn bisect_code(code: i32) -> i32 {
    match code {
        exit::PASS => bisect::GOOD,
        exit::ASSERTION_FAILED | exit::LIBTEST_FAILED => bisect::BAD,
        _ => bisect::SKIP,
    }
}

/// The word for a [`bisect_code`]: `good`, `bad (a regression)` or `skip (not judged)`.
pub fn bisect_word(code: i32) -> &'static str {
    match code {
        bisect::GOOD => "good",
        bisect::BAD => "bad: an assertion failed",
        _ => "skip: this commit could not be judged",
    }
}

/// True when an environment flag's value is a true value (`1`, `true`, `yes`, anything but empty, `0`,
/// `false`, `no`, `off`, in any case).
pub fn env_flag(v: Option<String>) -> bool {
    v.is_some_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

/// True when `SERVEGATE_STRICT` is set to a true value (`1`, `true`, `yes`; not `0`, `false`, `no`, `off`):
/// unmet requirements and incomparable runs fail instead of being skipped.
pub fn strict() -> bool {
    env_flag(std::env::var("SERVEGATE_STRICT").ok())
}

/// How a whole run ended (`servegate run`, `servegate judge`, the harness), beyond the outcome of each gate:
/// the one place that turns it into the exit code of the process and of the reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// The worst (highest) exit code of the gates (each from [`exit_code`] of its failure kind).
    pub worst_gate: i32,
    /// Nothing was checked (every gate ignored, no gate file, a filter that selects nothing).
    pub nothing_checked: bool,
    /// A report (JUnit, JSON, summary) could not be written.
    pub report_unwritten: bool,
}

impl RunEnd {
    /// The exit code of `servegate run` and `servegate judge`, and the `exit_code` every report states: the
    /// worst gate's code, at least NOTHING_CHECKED when nothing was checked, at least EVIDENCE_ERROR when a
    /// report could not be written.
    pub fn exit_code(self) -> i32 {
        let mut code = self.worst_gate;
        if self.nothing_checked {
            code = exit::worse(code, exit::NOTHING_CHECKED);
        }
        if self.report_unwritten {
            code = exit::worse(code, exit::EVIDENCE_ERROR);
        }
        code
    }

    /// The exit code of the harness process: [`exit::LIBTEST_FAILED`] when a trial failed (libtest's
    /// convention), else NOTHING_CHECKED when nothing was checked, else EVIDENCE_ERROR when a report could
    /// not be written, else PASS.
    pub fn harness_exit_code(self, trial_failed: bool) -> i32 {
        if trial_failed {
            exit::LIBTEST_FAILED
        } else if self.nothing_checked {
            exit::NOTHING_CHECKED
        } else if self.report_unwritten {
            exit::EVIDENCE_ERROR
        } else {
            exit::PASS
        }
    }
}

/// An invalid gate spec. Display: `FILE:LINE:COL: KEY: MESSAGE` followed by the offending line.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("{}: cannot read gate: {source}", file.display())]
    Io {
        /// The gate file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The content is invalid at a place.
    #[error("{}", render_at(file, *line, *col, key, message, snippet))]
    At {
        /// The gate file.
        file: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// Dotted key (`assert.rate.floor_tok_s`), empty when toml names it in the message.
        key: String,
        /// What is wrong.
        message: String,
        /// The offending source line.
        snippet: String,
    },
}

fn render_at(
    file: &Path,
    line: usize,
    col: usize,
    key: &str,
    message: &str,
    snippet: &str,
) -> String {
    let key = if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    };
    let message = message.trim_end();
    if snippet.is_empty() {
        format!("{}:{line}:{col}: {key}{message}", file.display())
    } else {
        format!(
            "{}:{line}:{col}: {key}{message}\n  {line:>4} | {snippet}",
            file.display()
        )
    }
}

impl SpecError {
    /// An error at a byte span of `text`; an empty `0..0` span means "the file as a whole" (line 1).
    pub fn at(
        file: &Path,
        text: &str,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> SpecError {
        let (line, col) = line_col(text, span.start);
        let snippet = if span == (0..0) {
            String::new()
        } else {
            window(text.lines().nth(line - 1).unwrap_or(""), col)
        };
        // Never echo control bytes (ESC, BEL, NUL) from a hostile file to the terminal.
        let snippet: String = snippet
            .chars()
            .map(|c| {
                if c.is_control() && c != '\t' {
                    '\u{FFFD}'
                } else {
                    c
                }
            })
            .collect();
        SpecError::At {
            file: file.to_path_buf(),
            line,
            col,
            key: key.to_string(),
            message: message.into(),
            snippet,
        }
    }
}

/// At most 160 characters of `line` around column `col` (1-based), with `…` where cut: an error in a
/// megabyte-long line must not print the megabyte.
fn window(line: &str, col: usize) -> String {
    const W: usize = 160;
    let n = line.chars().count();
    if n <= W {
        return line.to_string();
    }
    let start = col.saturating_sub(1).saturating_sub(W / 2).min(n - W);
    let cut: String = line.chars().skip(start).take(W).collect();
    format!(
        "{}{cut}{}",
        if start > 0 { "…" } else { "" },
        if start + W < n { "…" } else { "" }
    )
}

/// Errors reading or writing an evidence directory.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// I/O on a named path.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file of the run directory is malformed.
    #[error("{}: {reason}", path.display())]
    Malformed {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl EvidenceError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> EvidenceError {
        EvidenceError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Any error of a gate run that is not an assertion's verdict.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// Evidence I/O.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
}

impl RunError {
    /// The exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Spec(_) => exit::SPEC_INVALID,
            RunError::Evidence(_) => exit::EVIDENCE_ERROR,
        }
    }
}

/// A short, single-line form of an error chain for verdict messages.
pub struct OneLine<'a>(pub &'a dyn std::error::Error);

impl fmt::Display for OneLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut src = self.0.source();
        while let Some(s) = src {
            write!(f, ": {s}")?;
            src = s.source();
        }
        Ok(())
    }
}

/// 1-based (line, column) of a byte offset in `text` (column in characters).
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let mut off = offset;
    while off > 0 && !text.is_char_boundary(off) {
        off -= 1;
    }
    let before = &text[..off];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bisect_codes_follow_git_bisect_run() {
        assert_eq!(bisect_code(exit::PASS), 0);
        assert_eq!(bisect_code(exit::ASSERTION_FAILED), 1);
        for c in [
            exit::USAGE,
            exit::SPEC_INVALID,
            exit::SERVE_NOT_READY,
            exit::EVIDENCE_ERROR,
            exit::REQUIREMENT_UNMET,
            exit::NOTHING_CHECKED,
            exit::INDETERMINATE,
            exit::INCOMPARABLE,
            exit::VOID,
        ] {
            assert_eq!(bisect_code(c), 125, "code {c}");
        }
        for c in -300..300 {
            assert!((0..=127).contains(&bisect_code(c)), "code {c}");
        }
    }

    #[test]
    fn a_run_end_never_reads_greener_than_its_worst_part() {
        let end = |worst_gate, nothing_checked, report_unwritten| RunEnd {
            worst_gate,
            nothing_checked,
            report_unwritten,
        };
        assert_eq!(end(exit::PASS, false, false).exit_code(), exit::PASS);
        assert_eq!(
            end(exit::PASS, true, false).exit_code(),
            exit::NOTHING_CHECKED
        );
        assert_eq!(
            end(exit::ASSERTION_FAILED, false, true).exit_code(),
            exit::EVIDENCE_ERROR
        );
        assert_eq!(
            end(exit::REQUIREMENT_UNMET, false, true).exit_code(),
            exit::REQUIREMENT_UNMET
        );
        assert_eq!(
            end(exit::SERVE_NOT_READY, false, false).exit_code(),
            exit::SERVE_NOT_READY
        );
        assert_eq!(
            end(exit::PASS, true, true).harness_exit_code(true),
            exit::LIBTEST_FAILED
        );
        assert_eq!(
            end(exit::PASS, true, true).harness_exit_code(false),
            exit::NOTHING_CHECKED
        );
        assert_eq!(
            end(exit::PASS, false, true).harness_exit_code(false),
            exit::EVIDENCE_ERROR
        );
        assert_eq!(
            end(exit::PASS, false, false).harness_exit_code(false),
            exit::PASS
        );
        assert_eq!(exit_code(Some(FailureKind::Panic)), exit::ASSERTION_FAILED);
        // Indeterminate is worse than a pass and better than a failure, never read as either.
        assert_eq!(
            end(exit::INDETERMINATE, false, false).exit_code(),
            exit::INDETERMINATE
        );
        assert_eq!(
            end(exit::INDETERMINATE, true, false).exit_code(),
            exit::NOTHING_CHECKED
        );
        assert_eq!(
            exit::worse(exit::INDETERMINATE, exit::ASSERTION_FAILED),
            exit::ASSERTION_FAILED
        );
        assert_eq!(
            exit::worse(exit::ASSERTION_FAILED, exit::VOID),
            exit::ASSERTION_FAILED
        );
        assert_eq!(
            exit::worse(exit::INCOMPARABLE, exit::INDETERMINATE),
            exit::INDETERMINATE
        );
        assert_eq!(
            exit::worse(exit::PASS, exit::INCOMPARABLE),
            exit::INCOMPARABLE
        );
    }
}
