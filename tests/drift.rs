//! Answer drift (issue 17, docs/drift.md) end to end through `servegate run` of the reference gate's own
//! `gate.toml` with its serve replaced by `servegate replay` of recorded evidence (tests/data/drift/run: a
//! real run of gates/reference-smoke.toml with `"logprobs": true, "top_logprobs": 5`), judged against a
//! baseline blessed from the same recording:
//! * the recording replayed is identical;
//! * one token replaced by the baseline's second choice is close (passes, the position and both tokens
//!   named), and `rule = "exact"` fails it at that token;
//! * one token replaced by a token outside the baseline's top 5 is diverged (fails at that token);
//! * a serve that sends no logprobs falls back to `exact` on the text, and the verdict says so;
//! * another model file (sha256) is incomparable, never a pass.
//!
//! No timing decides anything here: the drift verdict is a function of the tokens alone. The replay runs at
//! 20x speed only to be quick. Live tests against the reference serve (flash attention off against a
//! baseline with it on) are at the end, `#[ignore]`d with the reason; `cargo test --test drift -- --ignored`
//! runs them (about a minute each, they need the provisioned reference serve).
//!
//! `bless_reference_drift_baseline` (also ignored) is how baselines/reference-smoke-drift was written: see
//! docs/drift.md.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use servegate::evidence::baseline::{self, Manifest, BASELINE_SCHEMA};

const BIN: &str = env!("CARGO_BIN_EXE_servegate");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn recorded() -> PathBuf {
    root().join("tests/data/drift/run")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Writes a baseline at `dir` whose one window `w1` is a copy of the run directory `run`, its key the run's
/// answers key (`analysis::drift::answers_key` of the run's own gate), `model_sha256` replaced when given.
fn bless(dir: &Path, run: &Path, model_sha256: Option<&str>, notes: Vec<String>) -> Manifest {
    let gate = servegate::spec::load(&run.join("gate.toml")).unwrap();
    let ev = servegate::analysis::load(run).unwrap();
    let mut key = servegate::analysis::drift::answers_key(&gate, &ev);
    if let Some(s) = model_sha256 {
        key.model_sha256 = Some(s.to_string());
    }
    std::fs::create_dir_all(dir).unwrap();
    let w = dir.join("w1");
    let _ = std::fs::remove_dir_all(&w);
    copy_dir(run, &w);
    let _ = std::fs::remove_file(w.join("setup.log"));
    let m = Manifest {
        schema: BASELINE_SCHEMA.into(),
        gate: gate.name.clone(),
        kind: "2-core shared CPU (AMD EPYC), 1 thread".into(),
        blessed_utc: ev.run.ended_utc.clone().unwrap_or_default(),
        key,
        windows: vec!["w1".into()],
        sources: vec![run.display().to_string()],
        notes,
    };
    baseline::write_manifest(dir, &m).unwrap();
    m
}

/// Writes the committed reference baseline from a run of gates/reference-smoke.toml named by
/// `SERVEGATE_DRIFT_BLESS_FROM` (a run directory), and the test recording from the same run.
#[test]
#[ignore = "writes baselines/reference-smoke-drift from SERVEGATE_DRIFT_BLESS_FROM (a run dir); run by hand"]
fn bless_reference_drift_baseline() {
    let from = PathBuf::from(std::env::var("SERVEGATE_DRIFT_BLESS_FROM").expect("a run dir"));
    let m = bless(
        &root().join("baselines/reference-smoke-drift"),
        &from,
        None,
        vec![
            "blessed by tests/drift.rs::bless_reference_drift_baseline: greedy replies of the reference serve with logprobs (top 5)".into(),
        ],
    );
    assert!(m.key.model_sha256.is_some());
    let rec = recorded();
    let _ = std::fs::remove_dir_all(&rec);
    copy_dir(&from, &rec);
    let _ = std::fs::remove_file(rec.join("setup.log"));
}
