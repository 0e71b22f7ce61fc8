//! A record's `footprint`: built from the run's `serve.ready_ms` and `serve.footprint` (each figure the
//! footprint trials judge), `null` with the reason where the evidence has none (never 0), re-derived by
//! `records check`, validated, and shown on the leaderboard as a figure or `– [k]` with its reason.

use std::path::Path;

use super::kind::rederive;
use super::record::*;
use super::record_tests::{good, synthetic_run, tiny_spec};
use crate::evidence::footprint::{CpuWindow, Footprint, FootprintProcess};

const GATE: &str = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\nrepeats = 3\nprompts = [\"What is the capital of France?\"]\n[assert.rate]\nfloor_tok_s = 10.0\n[assert.ready]\nlimit_ms = 5000\nload_log = 'load time = +(?P<ms>[0-9.]+) ms'\n";

/// A run of three judged replies (4 completion tokens each) whose `run.json` says what `serve` sets, and
/// its serve.log `log` (None: no log); the record built from it.
fn record_of(
    root: &Path,
    serve: impl Fn(&mut serde_json::Value),
    log: Option<&str>,
) -> (Record, crate::spec::GateSpec) {
    let model = root.join("model.gguf");
    std::fs::write(&model, b"weights").unwrap();
    let gate_file = root.join("ref.toml");
    std::fs::write(&gate_file, GATE).unwrap();
    let gate = crate::spec::parse(
        &gate_file,
        GATE,
        &crate::spec::Context::for_file(&gate_file),
    )
    .unwrap();
    let dir = synthetic_run(
        root,
        "ref",
        &gate,
        false,
        &[(100.0, 30.0), (120.0, 40.0), (110.0, 60.0)],
    );
    let run = dir.join("run.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    v["serve"]["mode"] = "command".into();
    serve(&mut v["serve"]);
    std::fs::write(&run, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    if let Some(log) = log {
        std::fs::write(dir.join(crate::evidence::layout::SERVE_LOG), log).unwrap();
    }
    let ev = crate::loaded::load(&dir).unwrap();
    let spec = tiny_spec(
        &model,
        "ref-decode",
        "decode_rate",
        "Three short synthetic replies.",
    );
    (from_run(&gate, &ev, &spec).unwrap(), gate)
}

fn measured() -> serde_json::Value {
    serde_json::to_value(Footprint {
        rss_peak_mib: Some(182.25),
        rss_bound: "exact: one process".into(),
        rss_sampled_mib: Some(180.0),
        leader_maxrss_mib: Some(182.25),
        processes: vec![FootprintProcess {
            pid: 7,
            name: "srv".into(),
            how: "leader".into(),
            hwm_mib: 182.25,
        }],
        samples: 10,
        sample_every_ms: 100,
        rss_unavailable: None,
        cpu: Some(CpuWindow {
            cpu_ms: 120.0,
            wall_ms: 400.0,
            first_index: 0,
            last_index: 2,
            pids_start: 1,
            pids_end: 1,
            clk_tck: 100,
            runqueue: None,
        }),
        cpu_unavailable: None,
        attached: None,
    })
    .unwrap()
}

#[test]
fn a_record_states_its_runs_footprint_and_records_check_re_derives_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (r, _) = record_of(
        tmp.path(),
        |s| {
            s["ready_ms"] = 1816.801443.into();
            s["footprint"] = measured();
        },
        Some("llama_perf_context_print:        load time =     412.50 ms\n"),
    );
    let f = r
        .footprint
        .clone()
        .expect("a gate-run record states its footprint");
    assert_eq!(f.ready_ms, Some(1816.8));
    assert_eq!(f.model_load_ms, Some(412.5));
    assert_eq!(f.rss_peak_mib, Some(182.3), "1 decimal: 182.25 rounds up");
    // 120 ms of CPU over 3 × 4 completion tokens.
    assert_eq!(f.cpu_ms_per_token, Some(10.0));
    assert!(f.unavailable.is_empty(), "{:?}", f.unavailable);
    assert_eq!(validate(&r, &r.id), Vec::<Problem>::new());
    assert_eq!(parse(&to_json(&r)).unwrap(), r);
    assert_eq!(rederive(tmp.path(), &r), Vec::<Problem>::new());
    // A figure the evidence does not give is caught, naming it and both values.
    let mut halved = r.clone();
    halved.footprint.as_mut().unwrap().rss_peak_mib = Some(91.1);
    let p = rederive(tmp.path(), &halved);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].field, "footprint.rss_peak_mib");
    assert!(
        p[0].message.contains("states 91.1") && p[0].message.contains("gives 182.3"),
        "{}",
        p[0].message
    );
    // A record written before records carried the footprint still re-derives (nothing stated, nothing
    // compared), and the page says why it shows none.
    let mut old = r.clone();
    old.footprint = None;
    assert_eq!(rederive(tmp.path(), &old), Vec::<Problem>::new());
    let page = super::leaderboard::render(&[r.clone(), old], "../records").unwrap();
    assert!(
        page.markdown
            .contains("| 1816.8 (model load 412.5 logged) | 182.3 | 10.000 |"),
        "{}",
        page.markdown
    );
    assert!(
        page.markdown.contains("| – [1] | – [1] | – [1] |")
            && page.markdown.contains(
                "1. not in the record: written before records carried the serve's footprint"
            ),
        "{}",
        page.markdown
    );
    assert!(page.html.contains("<th>peak memory (MiB)</th>"));
}

#[test]
fn a_run_without_a_footprint_states_null_and_why_never_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let (r, _) = record_of(tmp.path(), |s| s["ready_ms"] = 950.0.into(), None);
    let f = r.footprint.clone().unwrap();
    assert_eq!(f.ready_ms, Some(950.0));
    assert_eq!(
        (f.rss_peak_mib, f.cpu_ms_per_token, f.model_load_ms),
        (None, None, None)
    );
    assert!(
        f.unavailable["rss_peak_mib"].contains("run.json has no serve.footprint"),
        "{:?}",
        f.unavailable
    );
    assert!(f.unavailable["cpu_ms_per_token"].starts_with("no CPU per token"));
    assert!(f.unavailable["model_load_ms"].contains("no serve.log"));
    assert_eq!(validate(&r, &r.id), Vec::<Problem>::new());
    assert_eq!(rederive(tmp.path(), &r), Vec::<Problem>::new());
    // A 0 where the evidence has no figure is a difference, not a match.
    let mut zero = r.clone();
    let z = zero.footprint.as_mut().unwrap();
    z.rss_peak_mib = Some(0.0);
    z.unavailable.remove("rss_peak_mib");
    let p = rederive(tmp.path(), &zero);
    assert_eq!(p[0].field, "footprint.rss_peak_mib", "{p:?}");
    assert!(p[0].message.contains("gives null"), "{}", p[0].message);
    let page = super::leaderboard::render(std::slice::from_ref(&r), "../records").unwrap();
    assert!(
        page.markdown.contains("| 950.0 | – [1] | – [2] |"),
        "{}",
        page.markdown
    );
    assert!(!page.markdown.contains("| 0.0 |"));
}

#[test]
fn a_stated_footprint_is_validated() {
    let mut r = good();
    r.footprint = Some(RecordFootprint {
        ready_ms: Some(-1.0),
        rss_peak_mib: None,
        cpu_ms_per_token: Some(2.0),
        model_load_ms: None,
        unavailable: [
            ("cpu_ms_per_token".to_string(), "no window".to_string()),
            ("model_load_ms".to_string(), " ".to_string()),
            ("watts".to_string(), "x".to_string()),
        ]
        .into(),
    });
    let mut fields: Vec<String> = validate(&r, "smol-decode")
        .into_iter()
        .map(|p| p.field)
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        vec![
            "footprint.ready_ms",
            "footprint.rss_peak_mib",
            "footprint.unavailable.cpu_ms_per_token",
            "footprint.unavailable.model_load_ms",
            "footprint.unavailable.watts",
        ]
    );
    // Structurally: its four figures are required (null where unknown), its keys closed.
    let mut v: serde_json::Value = serde_json::from_str(&to_json(&good())).unwrap();
    v["footprint"] = serde_json::json!({"ready_ms": 1.0, "rss_peak_mib": null, "cpu_ms_per_token": null, "watts": 3});
    let problems = parse(&v.to_string()).unwrap_err();
    let f: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert!(
        f.contains(&"footprint.watts") && f.contains(&"footprint.model_load_ms"),
        "{f:?}"
    );
}
