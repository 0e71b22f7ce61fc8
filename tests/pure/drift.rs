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
//! `bless_reference_drift_baseline` (also ignored) is how baselines/reference-smoke-drift was written: see
//! docs/drift.md.

use std::path::{Path, PathBuf};

use serde_json::Value;
use servegate::evidence::baseline::{self, Manifest, BASELINE_SCHEMA};

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
/// answers key (`analysis::drift::answers_key` of the run's own gate), `model_sha256` replaced when given:
/// in the window's `run.json` too, since a baseline's key is re-derived from its windows' evidence and a
/// manifest that disagrees with them is refused.
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
    if let Some(sha) = model_sha256 {
        let p = w.join("run.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["serve"]["model_file"]["sha256"] = sha.into();
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }
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
            "blessed by tests/pure/drift.rs::bless_reference_drift_baseline: greedy replies of the reference serve with logprobs (top 5)".into(),
        ],
    );
    assert!(m.key.model_sha256.is_some());
    let rec = recorded();
    let _ = std::fs::remove_dir_all(&rec);
    copy_dir(&from, &rec);
    let _ = std::fs::remove_file(rec.join("setup.log"));
}

/// One SSE event of a recorded reply with the arrival time of the read that completed it.
type Event = (f64, String);

fn read_events(file: &Path) -> Vec<Event> {
    let mut events = Vec::new();
    let mut buf = String::new();
    for line in std::fs::read_to_string(file).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let t = v["t_ms"].as_f64().unwrap();
        buf.push_str(v["text"].as_str().expect("a text read"));
        while let Some(i) = buf.find("\n\n") {
            events.push((t, buf[..i + 2].to_string()));
            buf.drain(..i + 2);
        }
    }
    if !buf.is_empty() {
        events.last_mut().unwrap().1.push_str(&buf);
    }
    events
}

fn write_events(file: &Path, events: &[Event]) {
    let mut out = String::new();
    for (t, text) in events {
        out.push_str(&serde_json::json!({"t_ms": t, "text": text}).to_string());
        out.push('\n');
    }
    std::fs::write(file, out).unwrap();
}

/// Rewrites every event's chunk JSON of the replies to prompt `prompt` (0-based) in the run dir `run`:
/// `f(token_index, choice)` for each chunk whose choice carries a logprobs entry (token_index counts them).
fn edit_prompt(run: &Path, prompt: usize, f: &dyn Fn(usize, &mut Value)) {
    let mut summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    for r in summary["requests"].as_array_mut().unwrap() {
        if r["prompt_index"].as_u64() != Some(prompt as u64) {
            continue;
        }
        let file = run.join(format!("{:02}.reads.jsonl", r["index"].as_u64().unwrap()));
        let mut events = read_events(&file);
        let mut tok = 0;
        for (_, text) in events.iter_mut() {
            let Some(data) = text.strip_prefix("data: ") else {
                continue;
            };
            let Ok(mut v) = serde_json::from_str::<Value>(data.trim_end()) else {
                continue;
            };
            let Some(choice) = v["choices"].get_mut(0) else {
                continue;
            };
            if choice.get("logprobs").is_none() {
                continue;
            }
            f(tok, choice);
            tok += 1;
            *text = format!("data: {}\n\n", v);
        }
        write_events(&file, &events);
        // run.json records each body's size: keep it true to the edited reads.
        r["body_bytes"] = events.iter().map(|(_, t)| t.len()).sum::<usize>().into();
    }
    std::fs::write(
        run.join("run.json"),
        serde_json::to_string_pretty(&summary).unwrap(),
    )
    .unwrap();
}

/// Replaces token `at` of prompt `prompt`'s replies by its second choice (the next most likely token at that
/// position): what a near-tie flipped by float noise looks like.
fn second_choice_at(run: &Path, prompt: usize, at: usize) {
    edit_prompt(run, prompt, &|i, c| {
        if i != at {
            return;
        }
        let alt = c["logprobs"]["content"][0]["top_logprobs"][1].clone();
        c["delta"]["content"] = alt["token"].clone();
        let e = &mut c["logprobs"]["content"][0];
        for k in ["id", "token", "bytes", "logprob"] {
            e[k] = alt[k].clone();
        }
    });
}

/// Replaces token `at` of prompt `prompt`'s replies by " Lyon" (id 99999, logprob -0.9), a token outside the
/// baseline's top 5 there; this run's top list is " Lyon" then the baseline's first four, 1 nat lower.
fn foreign_token_at(run: &Path, prompt: usize, at: usize) {
    edit_prompt(run, prompt, &|i, c| {
        if i != at {
            return;
        }
        c["delta"]["content"] = " Lyon".into();
        let lyon = serde_json::json!({"id": 99999, "token": " Lyon", "bytes": [32, 76, 121, 111, 110], "logprob": -0.9});
        let e = &mut c["logprobs"]["content"][0];
        let mut top = vec![lyon.clone()];
        // The baseline's first four, 1 nat less likely each, so that the position still adds up to at most
        // probability 1 (else the reply is impossible, not diverged).
        top.extend(e["top_logprobs"].as_array().unwrap()[..4].iter().map(|a| {
            let mut a = a.clone();
            a["logprob"] = (a["logprob"].as_f64().unwrap() - 1.0).into();
            a
        }));
        for k in ["id", "token", "bytes", "logprob"] {
            e[k] = lyon[k].clone();
        }
        e["top_logprobs"] = Value::Array(top);
    });
}

/// The token text and logprob the recording has at token `at` of prompt `prompt`'s first reply, and its
/// second choice.
fn recorded_token(prompt: usize, at: usize) -> ((String, f64), (String, f64)) {
    let out = std::cell::RefCell::new(None);
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&recorded(), tmp.path());
    edit_prompt(tmp.path(), prompt, &|i, c| {
        if i == at && out.borrow().is_none() {
            let e = &c["logprobs"]["content"][0];
            let alt = &e["top_logprobs"][1];
            *out.borrow_mut() = Some((
                (
                    e["token"].as_str().unwrap().to_string(),
                    e["logprob"].as_f64().unwrap(),
                ),
                (
                    alt["token"].as_str().unwrap().to_string(),
                    alt["logprob"].as_f64().unwrap(),
                ),
            ));
        }
    });
    out.into_inner().unwrap()
}

// `tmp` holds the directory; `model` and `baseline` are read by the cli tier's drift tests (tests/cli/drift.rs).
#[allow(dead_code)]
struct Setup {
    tmp: tempfile::TempDir,
    run: PathBuf,
    model: PathBuf,
    baseline: PathBuf,
}

/// A temp dir with a copy of the recording (`run`, to edit), a stand-in model file and a baseline blessed
/// from the unedited recording with the stand-in's sha256 as its model key.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    copy_dir(&recorded(), &run);
    let model = tmp.path().join("model.gguf");
    std::fs::write(
        &model,
        b"stand-in model file for tests/{pure,cli,live}/drift.rs\n",
    )
    .unwrap();
    let sha = servegate::io::hash::sha256_bytes(&std::fs::read(&model).unwrap());
    let baseline = tmp.path().join("baseline");
    // The replay serve reports no engine version of its own, so the replayed run's key falls back to the
    // gate's `[record] engine_version`: the baseline's window states that version too, so the verdict names
    // no release change (a release field is compared and named, never keyed on).
    let gate = servegate::spec::load(&recorded().join("gate.toml")).unwrap();
    let version = gate.record.as_ref().unwrap()["engine_version"]
        .as_str()
        .unwrap()
        .to_string();
    let source = tmp.path().join("recorded");
    copy_dir(&recorded(), &source);
    let p = source.join("run.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["serve"]["version"] = version.into();
    std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    bless(&baseline, &source, Some(&sha), Vec::new());
    Setup {
        tmp,
        run,
        model,
        baseline,
    }
}

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
    use servegate::evidence::{ArmRecord, PairSummary, RunStatus, PAIR_SCHEMA};
    let arms = [("ours", ours), ("theirs", theirs)];
    servegate::analysis::PairEvidence {
        dir: PathBuf::from("/runs/pair"),
        summary: PairSummary {
            schema: PAIR_SCHEMA.into(),
            status: RunStatus::Complete,
            gate: "pair-drift".into(),
            gate_file: "gates/pair-drift.toml".into(),
            started_utc: String::new(),
            ended_utc: None,
            host: Default::default(),
            load_avg_start: None,
            load_avg_end: None,
            order: arms.iter().map(|(r, _)| r.to_string()).collect(),
            model_file_ours: "/models/m.gguf".into(),
            model_file_theirs: "/models/m.gguf".into(),
            model_sha256: None,
            model_bytes: None,
            model_sha256_after: None,
            failure: None,
            arms: arms
                .iter()
                .enumerate()
                .map(|(i, (role, _))| ArmRecord {
                    arm: i + 1,
                    role: role.to_string(),
                    runtime: role.to_string(),
                    dir: format!("arm{}-{role}", i + 1),
                })
                .collect(),
        },
        arms: arms
            .iter()
            .map(|(_, d)| servegate::analysis::load(d).unwrap())
            .collect(),
    }
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
