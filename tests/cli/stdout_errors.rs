//! A stdout that cannot be written is never a panic and never lost in silence: `servegate CMD > /dev/full`
//! says `error: stdout: No space left on device (os error 28)` on stderr and exits 5 (output that cannot be
//! written, README's exit codes), an export included (it used to exit 0 with its output lost); a closed
//! pipe (`servegate check ... | head -1`) ends the process quietly, as it ends `cat` (SIGPIPE), never a panic.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::fixtures;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `servegate args` from the checkout's root with stdout on /dev/full: (exit code, stderr).
fn to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(fixtures::BIN)
        .args(args)
        .current_dir(root())
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_SUMMARY")
        .env_remove("GITHUB_ACTIONS")
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn says_stdout_cannot_be_written(args: &[&str]) {
    let (code, err) = to_dev_full(args);
    assert!(!err.contains("panicked"), "servegate {args:?}: {err}");
    assert_eq!(code, Some(5), "servegate {args:?}: {err}");
    assert!(
        err.contains("error: stdout: No space left on device (os error 28)"),
        "servegate {args:?}: {err}"
    );
}

#[test]
fn check_to_a_full_stdout_says_so_and_exits_5() {
    says_stdout_cannot_be_written(&["check", "gates/reference-smoke.toml"]);
}

#[test]
fn judge_to_a_full_stdout_says_so_and_exits_5() {
    says_stdout_cannot_be_written(&["judge", "tests/data/runs/npu-rc-pass"]);
}

#[test]
fn an_export_to_a_full_stdout_is_not_lost_in_silence() {
    says_stdout_cannot_be_written(&["export", "--bmf", "data/records"]);
    says_stdout_cannot_be_written(&["export", "--openmetrics", "data/records"]);
}

#[test]
fn man_and_completions_to_a_full_stdout_say_so_and_exit_5() {
    says_stdout_cannot_be_written(&["man"]);
    says_stdout_cannot_be_written(&["completions", "bash"]);
}

#[test]
fn help_and_version_to_a_full_stdout_say_so_and_exit_5() {
    says_stdout_cannot_be_written(&["--help"]);
    says_stdout_cannot_be_written(&["--version"]);
}

/// `| head -1` once the reader has gone: the process ends (by SIGPIPE, as `cat` does), no panic, no 101.
#[test]
fn a_closed_pipe_ends_check_quietly() {
    let mut child = Command::new(fixtures::BIN)
        .args([
            "check",
            "gates/reference-smoke.toml",
            "gates/reference-smoke.toml",
        ])
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(out.status.code(), Some(101), "{err}");
}

/// A stderr that cannot be written is never a panic (exit 101): the line is dropped and the command ends with
/// its own exit code; with stdout on /dev/full as well, the exit is still 5.
#[test]
fn a_full_stderr_is_never_a_panic() {
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let run = |args: &[&str], stdout: Stdio| {
        Command::new(fixtures::BIN)
            .args(args)
            .current_dir(root())
            .env_remove("GITHUB_ACTIONS")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(full())
            .status()
            .unwrap()
            .code()
    };
    // A gate that does not exist: its error goes to stderr only (exit 3, the spec's code).
    assert_eq!(run(&["check", "no-such-gate.toml"], Stdio::null()), Some(3));
    assert_eq!(
        run(&["check", "gates/reference-smoke.toml"], full().into()),
        Some(5)
    );
}
