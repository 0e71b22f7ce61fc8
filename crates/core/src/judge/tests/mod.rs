//! Tests of judging: shared evidence builders, the route, masking and one-line verdicts here; the figure,
//! content and accounting tests beside.

mod accounting;
mod content;
mod figure;
mod footprint;
mod route;

use crate::analysis::{Evidence, RequestEvidence};
use crate::evidence::RunStatus;
use crate::evidence::{RequestRecord, RunSummary, ServeRecord, RUN_SCHEMA};
use crate::io::reads::TimedRead;
use crate::judge::verdict::*;
use crate::judge::*;
use crate::spec::GateSpec;

pub(super) const GATE: &str = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\nrepeats = 4\n[assert.rate]\nfloor_tok_s = 10.0\n[assert.first_token]\nlimit_ms = 1000\n[assert.content]\n[assert.known_answer]\nmatches = \"Paris\"\n";

pub(super) fn gate() -> GateSpec {
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    crate::spec::parse(std::path::Path::new("g.toml"), GATE, &ctx).unwrap()
}

/// [`crate::judge::judge`] with `g` planning what `ev`'s run.json states (its `repeats` set to `planned /
/// prompts`), as the gate a run was made with does: these tests judge other things than the plan, which
/// [`plan_mismatch_fails_every_assertion_naming_both_counts`] tests with the gate as given. Evidence without
/// a plan is judged with `g` as given.
pub(super) fn judge(g: &GateSpec, ev: &Evidence) -> Vec<Verdict> {
    let mut g = g.clone();
    let prompts = g.request.prompts.len();
    if let Some(p) = ev.run.planned.filter(|p| prompts > 0 && p % prompts == 0) {
        g.request.repeats = (p / prompts) as u32;
    }
    crate::judge::judge(&g, ev)
}

pub(super) fn ev_line(t: f64, json: &str) -> TimedRead {
    TimedRead {
        recv_ms: None,
        t_ms: t,
        bytes: format!("data: {json}\n\n").into_bytes(),
    }
}

/// A complete reply: "Paris is the capital." in 4 chunks 50 ms apart from 100 ms (20 tok/s), [DONE].
pub(super) fn good() -> Vec<TimedRead> {
    let mut r: Vec<TimedRead> = ["Paris", " is", " the", " capital."]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            ev_line(
                100.0 + 50.0 * i as f64,
                &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{w}"}}}}]}}"#),
            )
        })
        .collect();
    r.push(ev_line(
        260.0,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":4}}"#,
    ));
    r.push(TimedRead {
        recv_ms: None,
        t_ms: 261.0,
        bytes: b"data: [DONE]\n\n".to_vec(),
    });
    r
}

/// `good()` cut after its first two chunks: no finish_reason, no [DONE].
pub(super) fn cut() -> Vec<TimedRead> {
    good().into_iter().take(2).collect()
}

pub(super) fn request(
    index: usize,
    reads: &[TimedRead],
    transport: Option<&str>,
) -> RequestEvidence {
    let record = RequestRecord {
        index,
        prompt: "What is the capital of France?".into(),
        stream: true,
        http_status: Some(200),
        transport_error: transport.map(String::from),
        ..Default::default()
    };
    let reply = crate::analysis::reply_of(&record, reads);
    RequestEvidence {
        record,
        response: None,
        reply,
    }
}

pub(super) fn evidence(planned: Option<usize>, requests: Vec<RequestEvidence>) -> Evidence {
    Evidence {
        dir: "/runs/g/1".into(),
        run: RunSummary {
            schema: RUN_SCHEMA.into(),
            status: RunStatus::Complete,
            gate: "g".into(),
            gate_file: "g.toml".into(),
            started_utc: String::new(),
            ended_utc: None,
            host: Default::default(),
            load_avg_start: None,
            load_avg_end: None,
            servegate_version: String::new(),
            serve: ServeRecord::default(),
            planned,
            planned_warmup: planned.map(|_| 0),
            requests: Vec::new(),
            notes: Vec::new(),
            imported: None,
        },
        serve_log: Some("listening\n".into()),
        requests,
    }
}

pub(super) fn find<'a>(v: &'a [Verdict], name: &str) -> &'a Verdict {
    v.iter().find(|x| x.assertion == name).unwrap()
}

pub(super) fn gate_text(text: &str) -> GateSpec {
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    crate::spec::parse(std::path::Path::new("g.toml"), text, &ctx).unwrap()
}

/// `good()` whose finish chunk carries llama.cpp timings with `predicted_per_second = server`.
pub(super) fn good_with_timings(server: f64) -> Vec<TimedRead> {
    let mut r = good();
    r[4] = ev_line(
        260.0,
        &format!(
            r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],"usage":{{"completion_tokens":4}},"timings":{{"predicted_n":4,"predicted_ms":190.0,"predicted_per_second":{server}}}}}"#
        ),
    );
    r
}

pub(super) fn both_gate(extra: &str) -> GateSpec {
    gate_text(&GATE.replace(
        "floor_tok_s = 10.0\n",
        &format!("floor_tok_s = 10.0\nsource = \"both\"\n{extra}"),
    ))
}

/// `[assert.rate] server_log` with llama-cpp-python's log shape (tests/data/serve-clock): gate text.
pub(super) fn log_gate(source: &str) -> GateSpec {
    gate_text(&format!(
        "{}\n[assert.rate]\nfloor_tok_s = 10.0\nsource = \"{source}\"\nserver_log = '{}'\n",
        "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\nrepeats = 2\nwarmup = 1",
        r"llama_perf_context_print: +eval time = .*\(\s*[\d.]+ ms per token, +(?P<tok_s>[\d.]+) tokens per second\)"
    ))
}

/// One warmup and two judged requests, all answered, with the fixture log (eval 40.00, 21.00, 19.00 tok/s).
pub(super) fn log_evidence(log: &str) -> Evidence {
    let mut warm = request(0, &good(), None);
    warm.record.warmup = true;
    let mut ev = evidence(
        Some(2),
        vec![warm, request(1, &good(), None), request(2, &good(), None)],
    );
    ev.run.planned_warmup = Some(1);
    ev.serve_log = Some(log.to_string());
    ev
}

pub(super) const LLAMA_CPP_PYTHON_LOG: &str =
    include_str!("../../../../../tests/data/serve-clock/llama-cpp-python.log");

/// Case 38: a coloured serve log is matched as a terminal shows it, and the verdict counts what it removed.
#[test]
fn route_reads_a_coloured_log_stripped_and_says_so() {
    let g = gate_text(&format!(
        "{}\n[assert.route]\nfast = 'Using attention backend: (?P<backend>\\w+)$'\nslow = 'falling back to CPU'\n",
        "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:1\"\nlog_file = \"/l\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]"
    ));
    let mut ev = evidence(Some(1), vec![request(0, &good(), None)]);
    ev.serve_log =
        Some("\u{1b}[32mINFO\u{1b}[0m Using attention backend: \u{1b}[1mNPU\u{1b}[0m\n".into());
    let r = find(&judge(&g, &ev), "route").clone();
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert!(r.message.ends_with("; log_ansi_stripped: 4 escape sequences removed before matching (serve.log keeps the raw bytes)"), "{}", r.message);
    ev.serve_log = Some("INFO Using attention backend: NPU\n".into());
    let r = find(&judge(&g, &ev), "route").clone();
    assert!(!r.message.contains("log_ansi_stripped"), "{}", r.message);
}

/// Masking is part of judging: a serve that echoes the gate's API key split across two SSE events (no
/// file holds it whole) has it quoted by `known_answer`; `judge` masks it, with no call left to the caller.
#[test]
fn judge_masks_the_api_key_a_verdict_quotes() {
    const VAR: &str = "SERVEGATE_TEST_JUDGE_MASKS_KEY";
    const KEY: &str = "sk-judge-mask-0123456789abcdef";
    std::env::set_var(VAR, KEY);
    let text = GATE.replace(
        "[serve]\ncommand = [\"srv\", \"{port}\"]\n",
        &format!("[serve]\ncommand = [\"srv\", \"{{port}}\"]\napi_key_env = \"{VAR}\"\n"),
    );
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    let mut g = crate::spec::parse(std::path::Path::new("g.toml"), &text, &ctx).unwrap();
    g.request.repeats = 1; // the plan of the one-request evidence below
    let (a, b) = KEY.split_at(10);
    let mut reads: Vec<TimedRead> = ["Your key is ", a, b]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            ev_line(
                100.0 + 50.0 * i as f64,
                &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{w}"}}}}]}}"#),
            )
        })
        .collect();
    reads.extend(good().into_iter().skip(4));
    let ev = evidence(Some(1), vec![request(0, &reads, None)]);
    let unmasked = judge_unmasked(&g, &ev, &JudgeInputs::default());
    assert!(
        find(&unmasked, "known_answer").message.contains(KEY),
        "the verdict quotes the reply: {:?}",
        find(&unmasked, "known_answer").message
    );
    let v = judge(&g, &ev);
    let ka = find(&v, "known_answer");
    assert_eq!(ka.outcome, Outcome::Fail);
    assert!(!ka.message.contains(KEY), "{}", ka.message);
    assert!(v.iter().all(|x| !x.message.contains(KEY)));
}

/// What a serve says is outside text: its replies, error bodies, log lines and failure, each holding `::`,
/// `%0A`, CR, LF, ESC and BEL (and the legacy `##[`), reach every verdict line escaped, each verdict one
/// line that no CI runner reads as a workflow command.
#[test]
fn every_verdict_line_is_one_safe_line_whatever_the_serve_says() {
    const EVIL: &str =
        "\n::stop-commands::z\r::error::fake%0A::add-mask::k\u{1b}[31m\u{7}##[error]legacy";
    let quoted = serde_json::to_string(EVIL).unwrap();
    let reply = |t: f64| {
        vec![
            ev_line(
                t,
                &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":{quoted}}}}}]}}"#),
            ),
            ev_line(
                t + 50.0,
                &format!(r#"{{"choices":[{{"index":0,"delta":{{"content":{quoted}}}}}]}}"#),
            ),
            ev_line(
                t + 100.0,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            ),
            TimedRead {
                recv_ms: None,
                t_ms: t + 101.0,
                bytes: b"data: [DONE]\n\n".to_vec(),
            },
        ]
    };
    let error_body = TimedRead {
        recv_ms: None,
        t_ms: 5.0,
        bytes: format!(r#"{{"error":{{"message":{quoted},"code":500}}}}"#).into_bytes(),
    };
    let mut failed = request(2, &[error_body], None);
    failed.record.http_status = Some(500);
    let g = gate_text(&format!(
        "{GATE}[assert.route]\nfast = 'add-mask'\nslow = 'stop-commands'\n"
    ));
    let mut ev = evidence(
        Some(4),
        vec![
            request(0, &reply(100.0), None),
            request(1, &reply(100.0), Some(EVIL)),
            failed,
        ],
    );
    ev.serve_log = Some(format!("{EVIL}\n{EVIL}\n"));
    let v = judge(&g, &ev);
    assert_eq!(v.len(), 5, "{v:?}");
    for x in &v {
        let m = &x.message;
        assert!(!m.chars().any(crate::text::is_unsafe), "{m:?}");
        assert!(!m.contains("##["), "{m:?}");
        assert!(!m.trim_start().starts_with("::"), "{m:?}");
    }
    // The text is there, shown escaped, not dropped.
    let known = &find(&v, "known_answer").message;
    assert!(known.contains("::stop-commands::z"), "{known}");
    let route = &find(&v, "route").message;
    assert!(route.contains("::add-mask::k##\\[error]"), "{route}");
    // And a serve that failed during the run says so with its failure escaped.
    ev.run.serve.failure = Some(format!("server_exited_during_run: {EVIL}"));
    for x in judge(&g, &ev) {
        assert!(
            !x.message.chars().any(crate::text::is_unsafe),
            "{:?}",
            x.message
        );
    }
}
