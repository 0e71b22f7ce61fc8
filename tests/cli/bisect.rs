//! `servegate run --bisect` (finding the commit that regressed): the exit code follows `git bisect run`'s contract, 0 good, 1 a
//! regression (a failed assertion), 125 skip (nothing could be judged), never above 127. The serve is the
//! recorded reference run replayed (`servegate replay tests/data/replay/reference-smoke --speed 4`), so no
//! model is needed; the floors are far from the recorded figures (1 tok/s passes, 1e6 tok/s fails), so no
//! timing decides a verdict.

use crate::fixtures;
use crate::fixtures::replay::set_command;
use crate::fixtures::BIN;
use std::path::{Path, PathBuf};

fn run_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/replay/reference-smoke")
}

/// The recorded run's own gate, its serve replaced by the replay, with `floor_tok_s = floor`; `command`
/// overrides the serve command.
fn gate(dir: &Path, floor: f64, command: Option<&[&str]>) -> PathBuf {
    let mut g: toml::Table = std::fs::read_to_string(run_dir().join("gate.toml"))
        .unwrap()
        .parse()
        .unwrap();
    g.remove("requires");
    let run = run_dir();
    let replay = [
        BIN,
        "replay",
        run.to_str().unwrap(),
        "--port",
        "{port}",
        "--speed",
        "4",
    ];
    let command = command.unwrap_or(&replay);
    let serve = g["serve"].as_table_mut().unwrap();
    serve.remove("setup");
    set_command(serve, command);
    serve.insert("ready_timeout_s".into(), toml::Value::Integer(10));
    let asserts = g["assert"].as_table_mut().unwrap();
    asserts.remove("first_token");
    let rate = asserts["rate"].as_table_mut().unwrap();
    rate.insert("floor_tok_s".into(), toml::Value::Float(floor));
    let path = dir.join("bisect-gate.toml");
    std::fs::write(&path, toml::to_string(&g).unwrap()).unwrap();
    path
}

fn bisect(dir: &Path, gate: &Path) -> (i32, String) {
    let out = fixtures::servegate()
        .arg("run")
        .arg(gate)
        .arg("--bisect")
        .arg("--runs")
        .arg(dir.join("runs"))
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .env_remove("SERVEGATE_STRICT")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_passing_gate_is_good_under_bisect() {
    let t = tempfile::tempdir().unwrap();
    let (code, out) = bisect(t.path(), &gate(t.path(), 1.0, None));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("bisect: exit 0 (good)"), "{out}");
}

#[test]
fn a_failed_assertion_is_bad_under_bisect() {
    let t = tempfile::tempdir().unwrap();
    let (code, out) = bisect(t.path(), &gate(t.path(), 1.0e6, None));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("rate FAIL"), "{out}");
    assert!(out.contains("bisect: exit 1 (bad"), "{out}");
}

#[test]
fn a_serve_that_never_becomes_ready_or_an_invalid_spec_is_a_skip() {
    let t = tempfile::tempdir().unwrap();
    let (code, out) = bisect(t.path(), &gate(t.path(), 1.0, Some(&["false"])));
    assert_eq!(code, 125, "{out}");
    assert!(out.contains("bisect: exit 125 (skip"), "{out}");
    let bad = t.path().join("bad.toml");
    std::fs::write(&bad, "[gate]\nname = \"x\"\nnot_a_key = 1\n").unwrap();
    let (code, out) = bisect(t.path(), &bad);
    assert_eq!(code, 125, "{out}");
}
