//! What goes here: drift against the real reference serve (provisioned by its gate's setup step), the serve
//! started with other settings. Replayed: tests/cli/drift.rs; in process: tests/pure/drift.rs.
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

use crate::fixtures;
use crate::fixtures::drift::drift_line;
use crate::fixtures::root;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------------------
// Live, on the reference serve (provisioned by the gate's own setup, as `cargo test --test gates` does):
// about 30-60 s each on a shared 2-core machine.

/// gates/reference-smoke.toml with `args` added to its serve command and one assertion, drift against the
/// committed baseline by `rule`, with `may_differ`.
fn live_gate(dir: &Path, name: &str, args: &[&str], rule: &str, may_differ: &str) -> PathBuf {
    let gates = root().join("gates");
    let text = std::fs::read_to_string(gates.join("reference-smoke.toml"))
        .unwrap()
        .replace("{gate_dir}", gates.to_str().unwrap());
    let mut g: toml::Table = text.parse().unwrap();
    let cmd = g["serve"]["command"].as_array().unwrap().clone();
    let mut cmd: Vec<toml::Value> = cmd;
    cmd.extend(args.iter().map(|a| toml::Value::String(a.to_string())));
    g["serve"]
        .as_table_mut()
        .unwrap()
        .insert("command".into(), toml::Value::Array(cmd));
    let drift: toml::Table = format!(
        "baseline = {:?}\nrule = \"{rule}\"\ntop_k = 5\nmay_differ = [\"{may_differ}\"]\n",
        root()
            .join("data/baselines/reference-smoke-drift")
            .display()
            .to_string()
    )
    .parse()
    .unwrap();
    let mut a = toml::Table::new();
    a.insert("drift".into(), toml::Value::Table(drift));
    g.insert("assert".into(), toml::Value::Table(a));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml::to_string(&g).unwrap()).unwrap();
    path
}

/// (drift line, run dir) of `servegate run` (or, with `judge_dir`, `servegate judge DIR --gate`).
fn live(gate: &Path, runs: &Path, judge_dir: Option<&Path>) -> (String, PathBuf) {
    let mut c = fixtures::servegate();
    // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
    c.env("SERVEGATE_VERBOSE", "1");
    match judge_dir {
        None => c.args(["run", gate.to_str().unwrap()]),
        Some(d) => c.args([
            "judge",
            d.to_str().unwrap(),
            "--gate",
            gate.to_str().unwrap(),
        ]),
    };
    let out = c.env("SERVEGATE_RUNS", runs).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = drift_line(&stdout, &out.stderr);
    let dir = fixtures::evidence_dir(&stdout);
    (line, dir)
}

/// Flash attention off against the baseline (blessed with it on, `Flash Attention enabled` in its log):
/// measured here 1 prompt identical, 2 close (prompt 2 at token 35, prompt 3 at token 0: near-ties 0.04-0.05
/// nats apart), none diverged; `exact` fails the same evidence at each of those tokens. The setting is the
/// release's (the serve log names it): judged, and stated beside the verdict as what the release changed.
#[test]
fn live_flash_attention_off_is_close_never_diverged_and_exact_fails_it() {
    let _slot = fixtures::live::live_slot(
        "live_flash_attention_off_is_close_never_diverged_and_exact_fails_it",
    );
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let g = live_gate(
        tmp.path(),
        "fa-off",
        &["--flash-attn", "off"],
        "logprobs_close",
        "flash_attention",
    );
    let (line, dir) = live(&g, &runs, None);
    eprintln!("{line}");
    assert!(
        line.starts_with("drift PASS 0 of 3 prompts diverged; "),
        "{line}"
    );
    assert!(
        line.ends_with("; the release changed flash_attention enabled → disabled"),
        "{line}"
    );
    let close: Vec<String> = line
        .match_indices("prompt ")
        .filter_map(|(i, _)| {
            let rest = &line[i..];
            let end = rest.find(": baseline")?;
            Some(rest[..end].to_string())
        })
        .collect();
    assert!(
        !close.is_empty(),
        "flash attention off changed no token here: {line}"
    );
    let exact = live_gate(
        tmp.path(),
        "fa-off-exact",
        &["--flash-attn", "off"],
        "exact",
        "flash_attention",
    );
    let (eline, _) = live(&exact, &runs, Some(&dir));
    eprintln!("{eline}");
    assert!(
        eline.starts_with(&format!("drift FAIL {} of 3 prompts differ (", close.len())),
        "{eline}"
    );
    for at in &close {
        assert!(eline.contains(at.as_str()), "{at}\n{eline}");
    }
}

/// The K cache in f32 instead of f16 (flash attention on): measured here bitwise the same greedy replies (every
/// token id and logprob equal over 135 positions), so identical; the verdict still names the difference.
#[test]
fn live_kv_cache_type_f32_is_judged_as_what_it_is() {
    let _slot = fixtures::live::live_slot("live_kv_cache_type_f32_is_judged_as_what_it_is");
    let tmp = tempfile::tempdir().unwrap();
    let g = live_gate(
        tmp.path(),
        "ctk-f32",
        &["--cache-type-k", "f32"],
        "logprobs_close",
        "cache_type_k",
    );
    let (line, _) = live(&g, &tmp.path().join("runs"), None);
    eprintln!("{line}");
    assert!(
        line.starts_with("drift PASS 0 of 3 prompts diverged; "),
        "{line}"
    );
    assert!(
        line.ends_with("; the release changed cache_type_k f16 → f32"),
        "{line}"
    );
}
