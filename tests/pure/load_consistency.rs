//! `[assert.consistency]` of a load gate judged with the drift issue's rules (docs/load.md, docs/drift.md):
//! crafted evidence of two sweep points (c=1 and c=4) whose replies carry (or lack) logprobs, judged through
//! `run::load::judge_dir` exactly as `servegate judge` does.

use std::path::Path;

use crate::fixtures::load::{ok_meta, summary};
use servegate::evidence::load::{LoadRecord, LOAD_FILE, LOAD_SCHEMA};
use servegate::evidence::{EvidenceWriter, RequestRecord};
use servegate::io::load_client::SendTiming;
use servegate::io::reads::TimedRead;
use servegate::judge::{Outcome, Verdict};
use servegate::spec::{self, load::Point, GateSpec};

const PROMPTS: [&str; 2] = ["What is the capital of France?", "Name a colour."];

fn gate(dir: &Path, consistency: &str) -> GateSpec {
    let text = format!(
        r#"
[gate]
name = "consistency-test"
[serve]
url = "http://127.0.0.1:9"
[request]
model = "m"
max_tokens = 8
temperature = 0
prompts = ["{}", "{}"]
[load]
concurrency = [1, 4]
requests = 4
[assert.consistency]
{consistency}
"#,
        PROMPTS[0], PROMPTS[1]
    );
    let file = dir.join("gate.toml");
    std::fs::write(&file, &text).unwrap();
    spec::parse(&file, &text, &spec::Context::for_file(&file)).unwrap()
}

/// One position of a reply: the chosen token (id, text, logprob) and the top alternatives.
#[derive(Clone)]
struct Tok {
    id: i64,
    text: &'static str,
    lp: f64,
    top: Vec<(i64, &'static str, f64)>,
}

fn tok(id: i64, text: &'static str, lp: f64, top: &[(i64, &'static str, f64)]) -> Tok {
    Tok {
        id,
        text,
        lp,
        top: top.to_vec(),
    }
}

/// A reply of eight tokens, each the clear favourite (second choice far behind).
fn base_reply(prompt: usize) -> Vec<Tok> {
    let words: [&'static str; 8] = if prompt == 0 {
        [
            "The", " capital", " of", " France", " is", " Paris", " indeed", ".",
        ]
    } else {
        ["Blue", " is", " a", " colour", " of", " the", " sky", "."]
    };
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let id = 100 * (prompt as i64 + 1) + i as i64;
            tok(
                id,
                w,
                -0.05,
                &[(id, w, -0.05), (9000 + i as i64, " x", -4.0)],
            )
        })
        .collect()
}

/// The SSE reads of a reply; `logprobs` false leaves the `logprobs` object out of every chunk.
fn reads(toks: &[Tok], logprobs: bool) -> Vec<TimedRead> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let mut choice = serde_json::json!({"index": 0, "delta": {"content": t.text}});
        if logprobs {
            let top: Vec<serde_json::Value> = t
                .top
                .iter()
                .map(|(id, s, lp)| serde_json::json!({"id": id, "token": s, "logprob": lp}))
                .collect();
            choice["logprobs"] = serde_json::json!({"content": [
                {"id": t.id, "token": t.text, "logprob": t.lp, "top_logprobs": top}
            ]});
        }
        let chunk =
            serde_json::json!({"id": "c", "object": "chat.completion.chunk", "choices": [choice]});
        out.push(TimedRead {
            recv_ms: None,
            t_ms: 20.0 + 10.0 * i as f64,
            bytes: format!("data: {chunk}\n\n").into_bytes(),
        });
    }
    let fin = serde_json::json!({"id": "c", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": toks.len(), "total_tokens": 9 + toks.len()}});
    out.push(TimedRead {
        recv_ms: None,
        t_ms: 20.0 + 10.0 * toks.len() as f64,
        bytes: format!("data: {fin}\n\ndata: [DONE]\n\n").into_bytes(),
    });
    out
}

/// Writes point `point` with `replies[i]` as request i (prompt i % 2).
fn write_point(root: &Path, g: &GateSpec, point: Point, replies: &[(Vec<Tok>, bool)]) {
    let w = EvidenceWriter::create_exact(&root.join(point.dir())).unwrap();
    let mut s = summary(g, replies.len());
    let mut timings = Vec::new();
    for (i, (toks, lp)) in replies.iter().enumerate() {
        let rs = reads(toks, *lp);
        let e2e = rs.last().unwrap().t_ms;
        let start = 200.0 * i as f64;
        timings.push(SendTiming {
            index: i,
            intended_ms: start,
            woke_ms: start,
            slot_ms: start,
            sent_ms: start,
            end_ms: start + e2e,
            runtime: None,
        });
        let meta = ok_meta(e2e);
        w.write_request(i, &serde_json::json!({"messages": []}), &meta, &rs)
            .unwrap();
        s.requests.push(RequestRecord {
            index: i,
            prompt_index: i % 2,
            prompt: PROMPTS[i % 2].into(),
            stream: true,
            http_status: Some(200),
            body_bytes: rs.iter().map(|r| r.bytes.len() as u64).sum(),
            ..Default::default()
        });
    }
    w.write_summary(&s).unwrap();
    let rec = LoadRecord {
        schema: LOAD_SCHEMA.into(),
        point: point.label(),
        arrival: "closed".into(),
        concurrency: point_c(point),
        rate_rps: None,
        max_concurrency: None,
        warmup: 0,
        planned: replies.len(),
        timings,
        client: None,
        driver: None,
    };
    w.write(LOAD_FILE, &serde_json::to_vec(&rec).unwrap())
        .unwrap();
}

fn point_c(p: Point) -> Option<u32> {
    match p {
        Point::Concurrency(c) => Some(c),
        _ => None,
    }
}

/// Judges c=1 (the base replies, with logprobs) against c=4 (`at4`, four requests: prompts 0, 1, 0, 1) and
/// returns the consistency verdict.
fn judge(consistency: &str, at4: Vec<(Vec<Tok>, bool)>) -> Verdict {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), consistency);
    let base: Vec<(Vec<Tok>, bool)> = (0..4).map(|i| (base_reply(i % 2), true)).collect();
    write_point(tmp.path(), &g, Point::Concurrency(1), &base);
    write_point(tmp.path(), &g, Point::Concurrency(4), &at4);
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0].assertion, "[c=4]::consistency");
    vs[0].clone()
}

fn same_at4() -> Vec<(Vec<Tok>, bool)> {
    (0..4).map(|i| (base_reply(i % 2), true)).collect()
}

/// Prompt 0's reply parted at token 5: " Paris" replaced by `t`, the rest of the reply after it changed too.
fn parted(t: Tok) -> Vec<Tok> {
    let mut r = base_reply(0);
    r[5] = t;
    r[6] = tok(777, " again", -0.3, &[(777, " again", -0.3)]);
    r
}

#[test]
fn a_gate_with_consistency_asks_for_logprobs_unless_its_rule_is_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "");
    assert_eq!(g.request.extra["logprobs"], serde_json::json!(true));
    assert_eq!(g.request.extra["top_logprobs"], serde_json::json!(5));
    let g = gate(tmp.path(), "top_k = 3");
    assert_eq!(g.request.extra["top_logprobs"], serde_json::json!(3));
    let g = gate(tmp.path(), "rule = \"exact\"");
    assert!(!g.request.extra.contains_key("logprobs"));
    let text = std::fs::read_to_string(tmp.path().join("gate.toml"))
        .unwrap()
        .replace("rule = \"exact\"", "top_k = 0");
    let e = spec::parse(
        &tmp.path().join("gate.toml"),
        &text,
        &spec::Context::for_file(&tmp.path().join("gate.toml")),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("assert.consistency.top_k"), "{e}");
}

#[test]
fn identical_replies_pass() {
    let v = judge("", same_at4());
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(v.message.contains("4 identical"), "{}", v.message);
    assert!(
        v.message.contains("rule logprobs_close, top 5"),
        "{}",
        v.message
    );
}

#[test]
fn a_noise_level_parting_passes_with_the_drift_stated() {
    // At token 5 the c=4 reply takes " Lyon" (-0.72), the c=1 reply's second choice; " Paris" is c=4's second
    // choice: each side's token within the other's top 5, a near-tie (float noise under batching).
    let mut base0 = base_reply(0);
    // A near tie: " Paris" chosen at -0.70, " Lyon" at -0.72 (the chosen logprob as its top entry, so the
    // position adds up to at most probability 1).
    base0[5].lp = -0.70;
    base0[5].top = vec![(105, " Paris", -0.70), (205, " Lyon", -0.72)];
    let noisy = parted(tok(
        205,
        " Lyon",
        -0.69,
        &[(205, " Lyon", -0.69), (105, " Paris", -0.71)],
    ));
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "");
    let base: Vec<(Vec<Tok>, bool)> = vec![
        (base0.clone(), true),
        (base_reply(1), true),
        (base0, true),
        (base_reply(1), true),
    ];
    write_point(tmp.path(), &g, Point::Concurrency(1), &base);
    let at4 = vec![
        (noisy, true),
        (base_reply(1), true),
        (base_reply(0), true),
        (base_reply(1), true),
    ];
    write_point(tmp.path(), &g, Point::Concurrency(4), &at4);
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    let v = &vs[0];
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(v.message.contains("3 identical, 1 close"), "{}", v.message);
    assert!(
        v.message.contains("drift within tolerance"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("prompt 0") && v.message.contains("at token 5"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("\" Paris\"") && v.message.contains("\" Lyon\""),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("each in the other's top 5"),
        "{}",
        v.message
    );
}

#[test]
fn a_real_divergence_fails_naming_prompt_position_and_both_tokens() {
    // At token 5 the c=4 reply takes " Berlin", in neither top list: a broken batch, not noise.
    let broken = parted(tok(
        666,
        " Berlin",
        -0.1,
        &[(666, " Berlin", -0.1), (667, " Rome", -3.0)],
    ));
    let mut at4 = same_at4();
    at4[2] = (broken, true);
    let v = judge("", at4);
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(v.message.contains("1 of 4 replies part"), "{}", v.message);
    assert!(v.message.contains("prompt 0"), "{}", v.message);
    assert!(v.message.contains("diverged at token 5"), "{}", v.message);
    assert!(
        v.message.contains("c=1 \" Paris\"") && v.message.contains("c=4 \" Berlin\""),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("\" Berlin\" not in c=1's top 5"),
        "{}",
        v.message
    );
}

#[test]
fn without_logprobs_the_exact_rule_applies_and_says_so() {
    // Same text, no logprobs at c=4: exact on the text, identical, stated.
    let at4: Vec<(Vec<Tok>, bool)> = (0..4).map(|i| (base_reply(i % 2), false)).collect();
    let v = judge("", at4);
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        v.message
            .contains("rule exact on the text, not logprobs_close (logprobs missing: this run's reply carries no logprobs)"),
        "{}",
        v.message
    );
    // A near-tie parting without logprobs cannot be told from a real one: exact fails it, at the character.
    let mut at4: Vec<(Vec<Tok>, bool)> = (0..4).map(|i| (base_reply(i % 2), false)).collect();
    at4[0] = (
        parted(tok(205, " Lyon", -0.69, &[(205, " Lyon", -0.69)])),
        false,
    );
    let v = judge("", at4);
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(
        v.message.contains("rule exact on the text"),
        "{}",
        v.message
    );
    assert!(v.message.contains("at character 25"), "{}", v.message);
}

#[test]
fn the_exact_rule_fails_a_noise_level_parting() {
    let mut base0 = base_reply(0);
    // A near tie: " Paris" chosen at -0.70, " Lyon" at -0.72 (the chosen logprob as its top entry, so the
    // position adds up to at most probability 1).
    base0[5].lp = -0.70;
    base0[5].top = vec![(105, " Paris", -0.70), (205, " Lyon", -0.72)];
    let noisy = parted(tok(
        205,
        " Lyon",
        -0.69,
        &[(205, " Lyon", -0.69), (105, " Paris", -0.71)],
    ));
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "rule = \"exact\"");
    let base: Vec<(Vec<Tok>, bool)> = (0..4)
        .map(|i| {
            (
                if i % 2 == 0 {
                    base0.clone()
                } else {
                    base_reply(1)
                },
                true,
            )
        })
        .collect();
    write_point(tmp.path(), &g, Point::Concurrency(1), &base);
    let mut at4 = same_at4();
    at4[0] = (noisy, true);
    write_point(tmp.path(), &g, Point::Concurrency(4), &at4);
    let v = &servegate::run::load::judge_dir(&g, tmp.path())[0];
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(v.message.contains("rule exact, top 5"), "{}", v.message);
    assert!(v.message.contains("close at token 5"), "{}", v.message);
}

/// `rule = "exact"` without logprobs compares byte for byte on the text, and says so without contradicting
/// itself (a trial saw `rule exact on the text, not exact`).
#[test]
fn the_exact_rule_without_logprobs_says_byte_for_byte() {
    let at4: Vec<(Vec<Tok>, bool)> = (0..4).map(|i| (base_reply(i % 2), false)).collect();
    let v = judge("rule = \"exact\"", at4);
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        v.message.contains(
            "rule exact, byte for byte on the text, not token for token (logprobs missing: this run's reply carries no logprobs)"
        ),
        "{}",
        v.message
    );
    assert!(!v.message.contains("not exact"), "{}", v.message);
}
