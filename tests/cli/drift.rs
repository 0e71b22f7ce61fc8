//! What goes here: drift through `servegate run` and `servegate judge` with `servegate replay` of the
//! recording as the serve. In process: tests/pure/drift.rs; the real reference serve: tests/live/drift.rs.
//!
//! Answer drift (greedy output against a blessed baseline, judged with the serve's logprobs; docs/drift.md) end to end through `servegate run` of the reference gate's own
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
//! baseline with it on) are at the end, `#[ignore]`d with the reason; `cargo test --test pure --test cli --test live drift -- --ignored`
//! runs them (about a minute each, they need the provisioned reference serve).
//!
//! `bless_reference_drift_baseline` (also ignored) is how data/baselines/reference-smoke-drift was written: see
//! docs/drift.md.

use std::path::{Path, PathBuf};

use crate::fixtures;
use crate::fixtures::drift::{
    drift_line, edit_prompt, foreign_token_at, recorded, recorded_token, second_choice_at, setup,
    Setup,
};
use crate::fixtures::replay::set_command;
use crate::fixtures::BIN;
use serde_json::Value;

/// The recording's gate with its serve replaced by `servegate replay RUN --speed 20`, `request.model` a
/// stand-in file (its sha256 is the run's model key), and one assertion: drift against `baseline` by `rule`.
fn replay_gate(dir: &Path, run: &Path, model: &Path, baseline: &Path, rule: &str) -> PathBuf {
    let mut g: toml::Table = std::fs::read_to_string(recorded().join("gate.toml"))
        .unwrap()
        .parse()
        .unwrap();
    g.remove("requires");
    let serve = g["serve"].as_table_mut().unwrap();
    serve.remove("setup");
    let argv = [
        BIN,
        "replay",
        run.to_str().unwrap(),
        "--port",
        "{port}",
        "--speed",
        "20",
    ];
    set_command(serve, &argv);
    g["request"]
        .as_table_mut()
        .unwrap()
        .insert("model".into(), model.display().to_string().into());
    let mut drift = toml::Table::new();
    drift.insert("baseline".into(), baseline.display().to_string().into());
    drift.insert("rule".into(), rule.into());
    drift.insert("top_k".into(), 5.into());
    let mut a = toml::Table::new();
    a.insert("drift".into(), toml::Value::Table(drift));
    g.insert("assert".into(), toml::Value::Table(a));
    let path = dir.join("replay-drift.toml");
    std::fs::write(&path, toml::to_string(&g).unwrap()).unwrap();
    path
}

/// `servegate run` of the replay gate: (exit code, the drift verdict line).
fn run_drift(s: &Setup, rule: &str, model: Option<&Path>) -> (i32, String) {
    let gate = replay_gate(
        s.tmp.path(),
        &s.run,
        model.unwrap_or(&s.model),
        &s.baseline,
        rule,
    );
    let out = fixtures::servegate()
        // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
        .env("SERVEGATE_VERBOSE", "1")
        .args(["run", gate.to_str().unwrap()])
        .env("SERVEGATE_RUNS", s.tmp.path().join("runs"))
        .env_remove("SERVEGATE_STRICT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = drift_line(&stdout, &out.stderr);
    (out.status.code().unwrap_or(-1), line)
}

#[test]
fn the_baseline_replayed_is_identical() {
    let s = setup();
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    assert!(
        line.starts_with("drift PASS 0 of 3 prompts diverged; 3 identical; per prompt: 1 identical, 2 identical, 3 identical; rule logprobs_close, top 5; common prefix: top-1 agreement 100.0%"),
        "{line}"
    );
    assert!(
        line.contains("|Δ logprob| mean 0.000 max 0.000 nats"),
        "{line}"
    );
    assert!(line.ends_with("n=3 prompts (6 replies)"), "{line}");
    assert_eq!(code, 0, "{line}");
}

#[test]
fn the_second_choice_at_one_token_is_close_and_exact_fails_it_there() {
    let s = setup();
    // Prompt 2 ("Explain in three sentences why the sky is blue."), token 7.
    let ((base_tok, base_lp), (alt_tok, alt_lp)) = recorded_token(1, 7);
    second_choice_at(&s.run, 1, 7);
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    let at = format!(
        "prompt 2 at token 7: baseline {:?} {base_lp:.2}, this run {:?} {alt_lp:.2}, each in the other's top 5",
        base_tok, alt_tok
    );
    assert!(
        line.starts_with("drift PASS 0 of 3 prompts diverged; 2 identical; 1 close ("),
        "{line}"
    );
    assert!(line.contains(&at), "{at}\n{line}");
    assert_eq!(code, 0, "{line}");
    let (code, line) = run_drift(&s, "exact", None);
    assert!(
        line.starts_with(&format!("drift FAIL 1 of 3 prompts differ ({at}")),
        "{line}"
    );
    assert!(line.contains("; 2 identical; per prompt: 1 identical, 2 close at token 7, 3 identical; rule exact, top 5;"), "{line}");
    assert_eq!(code, 1, "{line}");
}

#[test]
fn a_token_outside_the_top_k_is_diverged_at_that_token() {
    let s = setup();
    let ((base_tok, base_lp), _) = recorded_token(1, 7);
    foreign_token_at(&s.run, 1, 7);
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    let at = format!(
        "drift FAIL 1 of 3 prompts diverged (prompt 2 at token 7: baseline {:?} {base_lp:.2}, this run \" Lyon\" -0.90, \" Lyon\" not in baseline's top 5",
        base_tok
    );
    assert!(line.starts_with(&at), "{at}\n{line}");
    assert!(
        line.contains(
            "; 2 identical; per prompt: 1 identical, 2 diverged at token 7, 3 identical;"
        ),
        "{line}"
    );
    assert_eq!(code, 1, "{line}");
}

/// Logprobs no distribution can give (vserve.py `--logprobs lie`: a chosen token's logprob above 0; a top list
/// leaving out a chosen token more likely than all of it) fail the reply as malformed: the drift verdict
/// fails at that prompt, never a PASS with KL 0.
#[test]
fn impossible_logprobs_fail_the_reply_never_a_drift_pass() {
    let s = setup();
    edit_prompt(&s.run, 1, &|i, c| {
        if i == 3 {
            c["logprobs"]["content"][0]["logprob"] = 0.5.into();
        }
    });
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    assert!(line.starts_with("drift FAIL 1 of 3 prompts diverged (prompt 2: this run's reply failed: impossible_logprobs: token 4 "), "{line}");
    assert!(line.contains("logprob 0.5 is above 0"), "{line}");
    assert_eq!(code, 1, "{line}");
    // The top list without the chosen token, each alternative raised to just under it: more than probability 1.
    let s = setup();
    edit_prompt(&s.run, 0, &|i, c| {
        if i != 2 {
            return;
        }
        let e = &mut c["logprobs"]["content"][0];
        let chosen = e["token"].clone();
        let lp = e["logprob"].as_f64().unwrap();
        let top: Vec<Value> = e["top_logprobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["token"] != chosen)
            .map(|a| {
                let mut a = a.clone();
                a["logprob"] = (lp - 0.05).into();
                a
            })
            .collect();
        e["top_logprobs"] = Value::Array(top);
    });
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    assert!(line.starts_with("drift FAIL 1 of 3 prompts diverged (prompt 1: this run's reply failed: impossible_logprobs: token 3 "), "{line}");
    assert!(line.contains("more than 1"), "{line}");
    assert_eq!(code, 1, "{line}");
}

#[test]
fn logprobs_missing_fall_back_to_exact_and_say_so() {
    let s = setup();
    for p in 0..3 {
        edit_prompt(&s.run, p, &|_, c| {
            c.as_object_mut().unwrap().remove("logprobs");
        });
    }
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    assert!(
        line.starts_with("drift PASS 0 of 3 prompts differ; 3 identical; per prompt: 1 identical, 2 identical, 3 identical; rule logprobs_close, top 5; logprobs missing (this run's reply carries no logprobs): fell back to rule exact on the text;"),
        "{line}"
    );
    assert_eq!(code, 0, "{line}");
    // A changed text is then found by exact, at its character, and fails.
    let s = setup();
    second_choice_at(&s.run, 1, 7);
    for p in 0..3 {
        edit_prompt(&s.run, p, &|_, c| {
            c.as_object_mut().unwrap().remove("logprobs");
        });
    }
    let (code, line) = run_drift(&s, "logprobs_close", None);
    eprintln!("{line}");
    assert!(
        line.starts_with("drift FAIL 1 of 3 prompts differ (prompt 2 at character "),
        "{line}"
    );
    assert!(
        line.contains("fell back to rule exact on the text"),
        "{line}"
    );
    assert_eq!(code, 1, "{line}");
}

#[test]
fn another_model_file_is_incomparable_never_a_pass() {
    let s = setup();
    let other = s.tmp.path().join("other.gguf");
    std::fs::write(&other, b"another model file\n").unwrap();
    let (_, line) = run_drift(&s, "logprobs_close", Some(&other));
    assert!(
        line.starts_with("drift INCOMPARABLE ")
            && line.contains("not comparable with its baseline: model_sha256 "),
        "{line}"
    );
    assert!(!line.contains("PASS"), "{line}");
}
