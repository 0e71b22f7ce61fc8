//! What goes here: drift judging in process on recorded evidence (a pair gate's arms, the comparability key's
//! fields) and the by-hand blessing of the committed drift baseline. Through `servegate run` against a
//! replayed serve: tests/cli/drift.rs; against the real reference serve: tests/live/drift.rs.
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

use crate::fixtures::drift::{
    bless, copy_dir, foreign_token_at, recorded, recorded_token, second_choice_at, setup,
};
use crate::fixtures::pair::pair_evidence;
use crate::fixtures::root;
use serde_json::Value;

/// Writes the committed reference baseline from a run of gates/reference-smoke.toml named by
/// `SERVEGATE_DRIFT_BLESS_FROM` (a run directory), and the test recording from the same run.
#[test]
#[ignore = "writes data/baselines/reference-smoke-drift from SERVEGATE_DRIFT_BLESS_FROM (a run dir); run by hand"]
fn bless_reference_drift_baseline() {
    let from = PathBuf::from(std::env::var("SERVEGATE_DRIFT_BLESS_FROM").expect("a run dir"));
    let m = bless(
        &root().join("data/baselines/reference-smoke-drift"),
        &from,
        None,
        vec![
            "blessed by tests/pure/drift.rs::bless_reference_drift_baseline: greedy replies of the reference serve with logprobs (top 5)".into(),
        ],
    );
    assert!(m.key.model_sha256.is_some());
    let rec = recorded();
    let _ = std::fs::remove_dir_all(&rec);
    copy_dir(&from, &rec);
    let _ = std::fs::remove_file(rec.join("setup.log"));
}

// `tmp` holds the directory; `model` and `baseline` are read by the cli tier's drift tests (tests/cli/drift.rs).
// ---------------------------------------------------------------------------------------------------------
// The same comparison between the arms of a pair gate: `[assert.same_answers] rule = "logprobs_close"`.

fn pair_gate(rule: &str) -> servegate::spec::GateSpec {
    let prompts: Vec<String> = servegate::spec::load(&recorded().join("gate.toml"))
        .unwrap()
        .request
        .prompts;
    let text = format!(
        r#"
[gate]
name = "pair-drift"
[serve]
ready = "/health"
[pair]
order = ["ours", "theirs"]
[pair.ours]
runtime = "ours"
command = ["serve", "--model", "{{model}}", "--port", "{{port}}"]
[pair.theirs]
runtime = "theirs"
command = ["serve", "--model", "{{model}}", "--port", "{{port}}", "--threads", "2"]
[request]
model = "/models/m.gguf"
max_tokens = 64
temperature = 0
top_k = 1
warmup = 1
repeats = 2
prompts = {}
[assert.same_answers]
rule = "{rule}"
"#,
        serde_json::to_string(&prompts).unwrap()
    );
    let ctx = servegate::spec::Context {
        gate_dir: PathBuf::from("/g"),
        cache: PathBuf::from("/c"),
        home: None,
    };
    servegate::spec::parse(Path::new("gates/pair-drift.toml"), &text, &ctx).unwrap()
}

fn pair_of(ours: &Path, theirs: &Path) -> servegate::analysis::PairEvidence {
    let arms = [("ours", ours), ("theirs", theirs)];
    pair_evidence(
        "pair-drift",
        arms.iter()
            .map(|(role, d)| (*role, role.to_string(), servegate::loaded::load(d).unwrap()))
            .collect(),
    )
}

#[test]
fn a_pair_gate_compares_its_arms_answers_with_the_same_rule() {
    let s = setup();
    second_choice_at(&s.run, 1, 7);
    let ev = pair_of(&recorded(), &s.run);
    let ((base_tok, base_lp), (alt_tok, alt_lp)) = recorded_token(1, 7);
    // logprobs_close: a near-tie flipped is close (passes, named); the gate asks every request for logprobs.
    let g = pair_gate("logprobs_close");
    assert_eq!(g.request.extra.get("logprobs"), Some(&Value::Bool(true)));
    assert_eq!(g.request.extra.get("top_logprobs"), Some(&Value::from(5)));
    let v = servegate::judge::judge_pair(&g, &ev);
    let sa = v.iter().find(|v| v.assertion == "same_answers").unwrap();
    let at = format!(
        "arm 2 theirs against arm 1 ours on \"Explain in three sentences why the sky i\": close at token 7: arm 1 ours {:?} {base_lp:.2}, arm 2 theirs {:?} {alt_lp:.2}, each in the other's top 5",
        base_tok, alt_tok
    );
    assert_eq!(
        sa.outcome,
        servegate::judge::Outcome::Pass,
        "{}",
        sa.message
    );
    assert!(sa.message.starts_with("same_answers PASS both runtimes' replies to each of 3 prompts are identical or close (rule logprobs_close, top 5); "), "{}", sa.message);
    assert!(sa.message.contains(&at), "{at}\n{}", sa.message);
    // exact (the default): plain text equality fails the same evidence.
    let v = servegate::judge::judge_pair(&pair_gate("exact"), &ev);
    let sa = v.iter().find(|v| v.assertion == "same_answers").unwrap();
    assert_eq!(
        sa.outcome,
        servegate::judge::Outcome::Fail,
        "{}",
        sa.message
    );
    // A token outside the top 5 fails logprobs_close, at that token.
    let s2 = setup();
    foreign_token_at(&s2.run, 1, 7);
    let v = servegate::judge::judge_pair(&g, &pair_of(&recorded(), &s2.run));
    let sa = v.iter().find(|v| v.assertion == "same_answers").unwrap();
    assert_eq!(
        sa.outcome,
        servegate::judge::Outcome::Fail,
        "{}",
        sa.message
    );
    assert!(
        sa.message.contains("diverged at token 7: arm 1 ours"),
        "{}",
        sa.message
    );
    assert!(
        sa.message.contains("\" Lyon\" not in arm 1 ours's top 5"),
        "{}",
        sa.message
    );
}

#[test]
fn may_differ_knows_every_field_of_the_comparability_key() {
    let fields: Vec<String> = servegate::evidence::comparability::ComparabilityKey::default()
        .fields()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(fields, servegate::spec::drift::KEY_FIELDS);
}
