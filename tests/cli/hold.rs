//! The fleet's device ticket and hold wrapper: a gate with `[hold] ticket` whose file does not
//! exist refuses to start (exit 6, a message naming the gate, the ticket and the way out; no serve started,
//! every test failed as a requirement unmet); `--allow-no-hold` (or `SERVEGATE_ALLOW_NO_HOLD=1`) runs it; with
//! the ticket present it runs; `[hold] command` runs the serve under the wrapper (the evidence shows it).

use crate::fixtures;
use std::path::{Path, PathBuf};

/// A passing gate (the scripted serve answering Paris, [`fixtures::chat_script`]) with the given `[hold]`
/// table.
fn gate(dir: &Path, hold: &str) -> PathBuf {
    let text = format!(
        r#"[gate]
name = "held"
[serve]
command = {serve}
ready_timeout_s = 20
stop_grace_s = 2
[request]
model = "fake-chat"
max_tokens = 8
timeout_s = 20
prompts = ["What is the capital of France?"]
[hold]
{hold}
[assert.content]
[assert.known_answer]
matches = '(?i)paris'
"#,
        serve = fixtures::scripted_command(&fixtures::chat_script("Paris."))
    );
    let p = dir.join("held.toml");
    std::fs::write(&p, text).unwrap();
    p
}

fn run(gate: &Path, runs: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = fixtures::servegate();
    cmd.args(["run", "-q", "--runs"])
        .arg(runs)
        .arg(gate)
        .args(args);
    for k in [
        "SERVEGATE_ALLOW_NO_HOLD",
        "GITHUB_ACTIONS",
        "SERVEGATE_JUNIT",
        "SERVEGATE_JSON",
        "SERVEGATE_SUMMARY",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_ticket_refuses_the_gate_and_allow_no_hold_runs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let ticket = tmp.path().join("NPU-TOKEN");
    let g = gate(tmp.path(), &format!("ticket = \"{}\"", ticket.display()));
    let runs = tmp.path().join("runs");
    let json = tmp.path().join("r.json");

    let (code, stdout, stderr) = run(&g, &runs, &["--json", json.to_str().unwrap()], &[]);
    assert_eq!(code, 6, "{stdout}{stderr}");
    assert!(stdout.contains("REFUSED hold_refused: "), "{stdout}");
    assert!(
        stdout.contains(&format!("needs the device ticket {}", ticket.display())),
        "{stdout}"
    );
    assert!(stdout.contains("--allow-no-hold"), "{stdout}");
    assert!(stdout.contains("RESULT: FAIL"), "{stdout}");
    assert!(!runs.exists(), "nothing of the gate started");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["exit_code"], 6);
    for t in r["gates"][0]["assertions"].as_array().unwrap() {
        assert_eq!(t["outcome"], "failed");
        assert_eq!(t["failure_kind"], "requirement_unmet");
    }

    // --allow-no-hold: it runs (and passes), saying it ran without the ticket.
    let (code, stdout, stderr) = run(&g, &runs, &["--allow-no-hold"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("does not exist; running without it"),
        "{stderr}"
    );
    // The same through the environment (the harness's switch).
    let (code, _, stderr) = run(&g, &runs, &[], &[("SERVEGATE_ALLOW_NO_HOLD", "1")]);
    assert_eq!(code, 0, "{stderr}");
    // With the ticket there, no flag is needed.
    std::fs::write(&ticket, "held").unwrap();
    let (code, stdout, stderr) = run(&g, &runs, &[], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
}

#[test]
fn the_serve_runs_under_the_hold_wrapper() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "command = [\"env\", \"SERVEGATE_TEST_HELD=1\"]");
    let runs = tmp.path().join("runs");
    let (code, stdout, stderr) = run(&g, &runs, &[], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let dir = std::fs::read_dir(runs.join("held"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let argv: Vec<&str> = run["serve"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&argv[..2], ["env", "SERVEGATE_TEST_HELD=1"], "{argv:?}");
    assert!(
        argv[2].ends_with("servegate") && argv[3] == "scripted-serve",
        "{argv:?}"
    );
}

#[test]
fn a_hold_table_names_at_least_one_way_to_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "wait_s = 5");
    let out = fixtures::servegate().arg("check").arg(&g).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give `lock`"), "{err}");
}
