//! The reference regression, live: the interleaved reference regression gate with an f32 KV cache as the candidate
//! (tests/data/regression/f32-kv-candidate.toml, a fixture, not a gate) must FAIL and say the size. The
//! candidate decodes at 0.6-0.66x of the baseline on an AMD EPYC (docs/bisect.md) and 0.74x on an Intel Xeon, so its
//! `[assert.regression]` (paired by A-B-B-A block, max drop 15 % in the fixture) must FAIL with the size and an
//! interval entirely beyond the max drop, read from the line.
//! Runs the real reference serve (provisioned by the gate's setup step, as tests/cli/command_line.rs and tests/live/reference_serve.rs does); ten blocks,
//! about 7 minutes on the shared 2-core machine.

use crate::fixtures;
use std::path::PathBuf;

#[test]
fn an_f32_kv_candidate_fails_the_interleaved_regression_gate_with_its_size() {
    let _slot = fixtures::live::live_slot(
        "an_f32_kv_candidate_fails_the_interleaved_regression_gate_with_its_size",
    );
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let t = tempfile::tempdir().unwrap();
    let out = fixtures::servegate()
        .arg("run")
        .arg(repo.join("tests/data/regression/f32-kv-candidate.toml"))
        .arg("--runs")
        .arg(t.path())
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("regression "))
        .unwrap_or_else(|| panic!("no regression line:\n{stdout}"));
    assert!(line.starts_with("regression FAIL decode median "), "{line}");
    assert!(line.contains("paired by block"), "{line}");
    // The size: `(-38.2 %, 95 % CI -45.0..-30.1 %; max drop 15 %; ...)`: the estimate and the interval's upper
    // end both beyond the max drop.
    let after = line
        .split(" tok/s (")
        .nth(1)
        .unwrap_or_else(|| panic!("{line}"));
    let size: f64 = after
        .split(" %")
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no size in {line}"));
    let hi: f64 = after
        .split("CI ")
        .nth(1)
        .and_then(|s| s.split(" %").next())
        .and_then(|s| s.rsplit("..").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no interval in {line}"));
    let max_drop: f64 = after
        .split("max drop ")
        .nth(1)
        .and_then(|s| s.split(" %").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no max drop in {line}"));
    assert_eq!(max_drop, 15.0, "{line}");
    assert!(size < -max_drop && hi < -max_drop, "{line}");
    eprintln!("f32 KV candidate: {line}");
    // The candidate passes content and known answer: it is slower, not broken.
    assert!(stdout.contains("content PASS"), "{stdout}");
    assert!(stdout.contains("known_answer PASS"), "{stdout}");
}
