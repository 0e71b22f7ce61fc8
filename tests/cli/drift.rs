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
//! `bless_reference_drift_baseline` (also ignored) is how baselines/reference-smoke-drift was written: see
//! docs/drift.md.

use std::path::{Path, PathBuf};

use crate::fixtures;
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
    serve.insert(
        "command".into(),
        toml::Value::Array(
            argv.iter()
                .map(|a| toml::Value::String(a.to_string()))
                .collect(),
        ),
    );
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
    let line = stdout
        .lines()
        .find(|l| l.starts_with("drift "))
        .unwrap_or_else(|| {
            panic!(
                "no drift line:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_string();
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
