//! What the binary prints for the user, pinned by insta snapshots (tests/cli/snapshots/cli__output_snapshots__*.snap):
//!
//! * `servegate check gates/NAME.toml`: one snapshot per gate in gates/ (stdout, stderr, exit code);
//! * `servegate judge RUN_DIR`: the verdict lines of every recorded run directory under tests/data/ (the
//!   reconstructed NPU runs and the recorded reference run), one snapshot per run, exit code included.
//!
//! These inputs are committed evidence and gates, so the output is a pure function of them: nothing is
//! redacted. A missing or changed snapshot fails the test, in CI (`CI=true`) and locally; after an
//! intended change, `cargo insta review` (or `INSTA_UPDATE=always cargo test --test cli output_snapshots`) and review
//! the diff as carefully as code. A new gate or recorded run needs its snapshot committed with it.

use crate::fixtures;
use crate::fixtures::root;
use std::path::{Path, PathBuf};

/// Runs `servegate ARGS` from the checkout root (so printed paths are the relative paths given) and returns
/// what the user sees: the exit code, then stdout, then stderr when not empty.
fn shown(args: &[&str]) -> String {
    let out = fixtures::servegate()
        .args(args)
        .current_dir(root())
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_STRICT")
        .env_remove("SERVEGATE_VERBOSE")
        .output()
        .expect("run servegate");
    let mut s = format!(
        "$ servegate {}\nexit {:?}\n--- stdout\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout)
    );
    if !out.stderr.is_empty() {
        s.push_str("--- stderr\n");
        s.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    s
}

/// The names (relative to the checkout) of the entries of `dir` that `keep` accepts, sorted.
fn entries(dir: &str, keep: impl Fn(&Path) -> bool) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("entry").path())
        .filter(|p| keep(p))
        .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    v
}

fn stem(rel: &str) -> String {
    let name = Path::new(rel).file_name().unwrap().to_string_lossy();
    name.strip_suffix(".toml").unwrap_or(&name).to_string()
}

#[test]
fn check_of_every_gate_is_pinned_by_its_snapshot() {
    let gates = entries("gates", |p| {
        p.extension().is_some_and(|e| e == "toml") && p.is_file()
    });
    assert!(gates.len() >= 3, "gates: {gates:?}");
    for gate in gates {
        let text = shown(&["check", &gate]);
        assert!(text.contains("exit Some(0)"), "{text}");
        insta::assert_snapshot!(format!("check_{}", stem(&gate)), text);
    }
}

#[test]
fn judge_of_every_recorded_run_is_pinned_by_its_snapshot() {
    let is_run = |p: &Path| p.join("run.json").is_file();
    let runs: Vec<String> = entries("tests/data/runs", is_run)
        .into_iter()
        .chain(entries("tests/data/replay", is_run))
        .collect();
    assert!(runs.len() >= 3, "recorded runs: {runs:?}");
    for run in runs {
        let text = shown(&["judge", &run]);
        insta::assert_snapshot!(format!("judge_{}", stem(&run)), text);
    }
}

/// The snapshots cover every input: a snapshot whose gate or run is gone is reported, not left behind.
#[test]
fn no_snapshot_outlives_its_input() {
    let dir: PathBuf = root().join("tests/cli/snapshots");
    for e in std::fs::read_dir(&dir).expect("tests/cli/snapshots") {
        let name = e.expect("entry").file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("cli__output_snapshots__") else {
            continue;
        };
        let Some(rest) = rest.strip_suffix(".snap") else {
            continue;
        };
        let exists = if let Some(gate) = rest.strip_prefix("check_") {
            root().join("gates").join(format!("{gate}.toml")).is_file()
        } else if let Some(run) = rest.strip_prefix("judge_") {
            ["tests/data/runs", "tests/data/replay"]
                .iter()
                .any(|d| root().join(d).join(run).join("run.json").is_file())
        } else {
            false
        };
        assert!(
            exists,
            "{name}: its gate or run is gone; delete the snapshot"
        );
    }
}
