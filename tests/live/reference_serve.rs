//! What goes here: `servegate run` of the real reference serve (llama.cpp's server via xllamacpp, provisioned
//! by the gate's own setup step): a raised floor fails only `rate`, re-judging passes; SIGKILL of the runner
//! leaves no serve.

use crate::fixtures;
use crate::fixtures::reference::{
    pid_alive, reference_gate_text, reference_gate_text_without_regression, write_gate,
};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn run_dir_from(stdout: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("evidence: "))
        .unwrap_or_else(|| panic!("no evidence line in:\n{stdout}"));
    PathBuf::from(line.trim_start_matches("evidence: "))
}

/// Raising the floor above what the serve does fails `rate` with every value, the other assertions still pass,
/// and re-judging that run with the original spec passes: judging is a pure function of (gate, evidence).
#[test]
fn raised_floor_fails_rate_with_every_value_and_rejudge_with_original_passes() {
    let _slot = fixtures::live::live_slot(
        "raised_floor_fails_rate_with_every_value_and_rejudge_with_original_passes",
    );
    let tmp = tempfile::tempdir().unwrap();
    // The run's speed against the blessed baselines is not what this test judges (a 3-request run on a busy
    // machine is honestly INDETERMINATE there).
    let text = reference_gate_text_without_regression()
        .replace("floor_tok_s = 10.5", "floor_tok_s = 100000.0")
        .replace("repeats = 3", "repeats = 1");
    assert!(text.contains("floor_tok_s = 100000.0") && text.contains("repeats = 1"));
    let gate = write_gate(tmp.path(), "high-floor.toml", &text);
    let out = fixtures::servegate()
        .env("SERVEGATE_VERBOSE", "1") // whole verdict lines: the test reads every value
        .args(["run", "--quiet", "--runs"])
        .arg(tmp.path().join("runs"))
        .arg(&gate)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rate = stdout.lines().find(|l| l.starts_with("rate ")).unwrap();
    // The reference gate judges both figures (`source = "both"`): the client's first, then the serve's.
    assert!(rate.starts_with("rate FAIL client median "), "{rate}");
    assert!(rate.contains("; server median "), "{rate}");
    assert!(
        rate.contains("(floor 100000.0; each: ") && rate.contains("; n=3 of 3 planned)"),
        "{rate}"
    );
    let each = rate
        .split("each: ")
        .nth(1)
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    assert_eq!(each.split(", ").count(), 3, "every value shown: {rate}");
    for a in [
        "route PASS",
        "first_token PASS",
        "content PASS",
        "known_answer PASS",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(a)),
            "{a} missing in:\n{stdout}"
        );
    }
    assert!(stdout.contains("RESULT: FAIL"));

    // The evidence holds everything the issue lists.
    let dir = run_dir_from(&stdout);
    for f in [
        "gate.toml",
        "serve.log",
        "run.json",
        "00.request.json",
        "00.reads.jsonl",
        "00.response.json",
        "02.reads.jsonl",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing in {}", dir.display());
    }
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "complete");
    assert!(run["load_avg_start"].is_array() && run["load_avg_end"].is_array());
    assert!(run["serve"]["ready_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(
        run["requests"].as_array().unwrap().len(),
        6,
        "3 warmup + 3 judged"
    );

    // Re-judge with the original floor: passes. With the run's own (raised) copy: fails again.
    let orig = write_gate(
        tmp.path(),
        "orig.toml",
        &reference_gate_text_without_regression().replace("repeats = 3", "repeats = 1"),
    );
    let out = fixtures::servegate()
        .arg("judge")
        .arg(&dir)
        .arg("--gate")
        .arg(&orig)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("rate PASS client median") && stdout.contains("RESULT: PASS"),
        "{stdout}"
    );
    let out = fixtures::servegate()
        .arg("judge")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// SIGKILL of the runner mid-run leaves no serve behind, and the evidence stays marked incomplete.
#[test]
fn runner_killed_with_sigkill_leaves_no_serve() {
    let _slot = fixtures::live::live_slot("runner_killed_with_sigkill_leaves_no_serve");
    let tmp = tempfile::tempdir().unwrap();
    let text = reference_gate_text().replace("repeats = 3", "repeats = 50");
    assert!(text.contains("repeats = 50"));
    let gate = write_gate(tmp.path(), "long.toml", &text);
    let runs = tmp.path().join("runs");
    let mut child = fixtures::servegate()
        .args(["run", "--quiet", "--runs"])
        .arg(&runs)
        .arg(&gate)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the serve is up and answering (run.json names its pid and a request was recorded).
    let deadline = Instant::now() + Duration::from_secs(120);
    let (run_json, pid) = loop {
        assert!(Instant::now() < deadline, "the serve never came up");
        let found = std::fs::read_dir(runs.join("reference-smoke"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path().join("run.json"));
        if let Some(p) = found {
            if let Ok(t) = std::fs::read_to_string(&p) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&t) {
                    // Requests are recorded in requests.jsonl as they end (run.json at the end).
                    let recorded = std::fs::read_to_string(p.with_file_name("requests.jsonl"))
                        .is_ok_and(|t| !t.is_empty());
                    if let (Some(pid), true) = (v["serve"]["pid"].as_u64(), recorded) {
                        break (p, pid as u32);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(pid_alive(pid), "serve {pid} should be running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(pid) {
        assert!(
            Instant::now() < deadline,
            "serve {pid} outlived the SIGKILLed runner"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run_json).unwrap()).unwrap();
    assert_eq!(
        v["status"], "running",
        "a killed run stays marked incomplete"
    );
    // Judging it says so instead of passing.
    let out = fixtures::servegate()
        .arg("judge")
        .arg(run_json.parent().unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("the evidence is incomplete"), "{stdout}");
}
