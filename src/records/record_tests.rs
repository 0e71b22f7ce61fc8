//! Unit tests of the record concepts through the façade (`record`): the privacy rule, validation, building
//! from synthetic runs, re-derivation, the atomic write.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::build::{public_host, public_path_in};
use super::kind::rederive;
use super::record::*;
use super::validate::{schema_keys, structural_problems};

/// The privacy of published records: a record publishes no absolute home or checkout path, and no host
/// name unless the gate opts in.
#[test]
fn published_paths_are_repo_relative_or_under_tilde_and_the_host_name_only_on_request() {
    let co = Some(Path::new("/home/ann/src/servegate"));
    let home = Some(Path::new("/home/ann"));
    let p = |s: &str| public_path_in(s, co, home);
    assert_eq!(p("/home/ann/src/servegate/models/x.gguf"), "models/x.gguf");
    assert_eq!(
        p("/home/ann/.cache/servegate/models/x.gguf"),
        "~/.cache/servegate/models/x.gguf"
    );
    assert_eq!(p("/home/ann"), "~");
    assert_eq!(
        p("/home/annie/x.gguf"),
        "/home/annie/x.gguf",
        "a prefix of a name is not a parent"
    );
    assert_eq!(p("/models/x.gguf"), "/models/x.gguf");
    assert_eq!(p("~/x.gguf"), "~/x.gguf");
    assert_eq!(p("models/x.gguf"), "models/x.gguf");
    // The root as a home (a container's HOME=/) would make every path `~/...`: ignored.
    assert_eq!(
        public_path_in("/models/x", None, Some(Path::new("/"))),
        "/models/x"
    );
    assert_eq!(
        public_path_in("/root/.cache/m", None, Some(Path::new("/root"))),
        "~/.cache/m"
    );
    let h = crate::evidence::HostInfo {
        hostname: "ann-laptop".into(),
        os: "linux 6.8.0".into(),
        cpus: 8,
        cpu_model: None,
    };
    assert_eq!(public_host(&h, false), "linux 6.8.0, 8 CPUs");
    assert_eq!(public_host(&h, true), "ann-laptop (linux 6.8.0, 8 CPUs)");
}

/// A valid gate-run record, for edits.
pub(super) fn good() -> Record {
    Record {
        schema: RECORD_SCHEMA.into(),
        id: "smol-decode".into(),
        date: "2026-11-29".into(),
        host: "ci (Linux, 2 CPUs)".into(),
        model: Model {
            name: "SmolLM2-135M-Instruct".into(),
            file: Some("/models/smol.gguf".into()),
            sha256: "a".repeat(64),
            sha256_form: "full".into(),
            sha256_of: "file".into(),
            weights: Some("Q8_0".into()),
        },
        device: "CPU".into(),
        route: "cpu".into(),
        metric: Metric {
            name: "decode_rate".into(),
            unit: "tok/s".into(),
            condition: None,
        },
        bound: None,
        statistic: "median".into(),
        value: 4.28,
        decimals: 2,
        n: 2,
        values: Some(vec![4.25, 4.30]),
        values_unavailable: None,
        unmeasured: Vec::new(),
        range: [4.25, 4.30],
        settings: Settings {
            engine: "llama.cpp".into(),
            engine_version: Some("b1".into()),
            sampling: Some("temperature 0".into()),
            max_tokens: Some(64),
            prompt_tokens: None,
            stream: Some(true),
            backend: None,
        },
        hold: Hold {
            ticket: None,
            duration_s: None,
        },
        load: Load {
            load1_start: Some(1.0),
            load1_end: Some(1.2),
        },
        known_answer: KnownAnswer {
            prompt: None,
            expected: None,
            result: "not_checked".into(),
            detail: None,
        },
        instrument: Instrument {
            method: "servegate".into(),
            metric_definition: Some("docs/metrics.md".into()),
        },
        source: Source {
            kind: "gate_run".into(),
            evidence: Some("runs/x".into()),
            gate: Some("gates/x.toml".into()),
            published: None,
            evidence_sha256: Some("e".repeat(64)),
            unverifiable: None,
            forced: None,
        },
        pair: None,
        notes: Notes {
            what_would_make_it_wrong: "One run at low load, one prompt.".into(),
            other: vec![],
        },
        sources: BTreeMap::new(),
        load_point: None,
        footprint: None,
    }
}

fn fields(r: &Record) -> Vec<String> {
    validate(r, &r.id).into_iter().map(|p| p.field).collect()
}

#[test]
fn good_record_is_valid_and_round_trips() {
    let r = good();
    assert_eq!(validate(&r, "smol-decode"), vec![]);
    assert_eq!(parse(&to_json(&r)).unwrap(), r);
}

#[test]
fn schema_keys_are_every_key_a_full_record_serialises() {
    let mut r = good();
    r.values_unavailable = Some("x".into());
    r.source.unverifiable = Some("x".into());
    r.source.forced = Some("x".into());
    r.notes.other = vec!["x".into()];
    r.sources.insert("x".into(), "y".into());
    r.unmeasured = vec![Unmeasured {
        arm: Some(1),
        request: 0,
        cause: "x".into(),
    }];
    r.pair = Some(Pair {
        other_engine: "o".into(),
        other_value: 1.0,
        other_n: 1,
        other_range: None,
        ratio: 1.0,
        ratio_decimals: 2,
        ratio_source: "published".into(),
        ratio_note: Some("x".into()),
        arm_order: vec![],
        arm_medians: Some(vec![]),
    });
    r.load_point = Some(LoadPoint {
        point: "c=4".into(),
        concurrency: Some(4),
        rate_rps: None,
        requests: 1,
        output_tokens: 1,
        window_ms: 1.0,
    });
    r.bound = Some(RecordBound {
        kind: "floor".into(),
        value: 1.0,
        declared: "x".into(),
    });
    r.footprint = Some(RecordFootprint {
        unavailable: [("x".to_string(), "y".to_string())].into(),
        ..Default::default()
    });
    fn keys(v: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(o) = v.as_object() {
            for (k, x) in o {
                let p = format!("{path}.{k}");
                keys(x, &p, out);
                out.push(p);
            }
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut full = serde_json::to_value(&r).unwrap();
    full["sources"] = Value::String(String::new()); // free keys: typed, not listed
    full["footprint"]["unavailable"] = Value::String(String::new());
    keys(&full, "", &mut a);
    keys(&schema_keys(true), "", &mut b);
    a.sort();
    b.sort();
    assert_eq!(a, b);
    // A structurally broken record names each problem's path.
    let mut v = serde_json::to_value(good()).unwrap();
    v["settings"]["max_tokens"] = "many".into();
    v["model"]["extra"] = 1.into();
    v["load"].as_object_mut().unwrap().remove("load1_end");
    let mut f: Vec<String> = structural_problems(&v)
        .into_iter()
        .map(|p| p.field)
        .collect();
    f.sort();
    assert_eq!(
        f,
        vec!["load.load1_end", "model.extra", "settings.max_tokens"]
    );
}

#[test]
fn even_n_median_is_mean_of_middle_two_at_stated_precision() {
    // 4.25 and 4.30: median 4.275, stated 4.28 (and 4.27 is also a correct rounding of the tie).
    let mut r = good();
    assert!(fields(&r).is_empty());
    r.value = 4.27;
    assert!(fields(&r).is_empty());
    r.value = 4.29;
    assert_eq!(fields(&r), vec!["value"]);
}

#[test]
fn n_must_equal_number_of_values() {
    let mut r = good();
    r.n = 3;
    assert_eq!(fields(&r), vec!["n"]);
}

#[test]
fn range_must_be_min_and_max() {
    let mut r = good();
    r.range = [4.20, 4.30];
    assert_eq!(fields(&r), vec!["range"]);
}

#[test]
fn missing_key_names_its_field() {
    let mut v = serde_json::to_value(good()).unwrap();
    v["model"].as_object_mut().unwrap().remove("sha256");
    v.as_object_mut().unwrap().remove("notes");
    let problems = parse(&v.to_string()).unwrap_err();
    let f: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert!(f.contains(&"model.sha256"), "{problems:?}");
    assert!(f.contains(&"notes"), "{problems:?}");
}

#[test]
fn nullable_key_must_still_be_present() {
    let mut v = serde_json::to_value(good()).unwrap();
    v["model"].as_object_mut().unwrap().remove("file");
    let problems = parse(&v.to_string()).unwrap_err();
    assert_eq!(problems[0].field, "model.file");
}

#[test]
fn unknown_keys_are_errors_at_every_level() {
    let mut v = serde_json::to_value(good()).unwrap();
    v["speed"] = serde_json::json!(1);
    v["settings"]["temprature"] = serde_json::json!(0);
    let problems = parse(&v.to_string()).unwrap_err();
    let f: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert!(
        f.contains(&"speed") && f.contains(&"settings.temprature"),
        "{problems:?}"
    );
}

#[test]
fn sha256_is_64_hex_or_a_declared_published_prefix() {
    let mut r = good();
    r.model.sha256 = "b1c1fe9d6c4a6d0c".into();
    assert_eq!(fields(&r), vec!["model.sha256"]);
    r.model.sha256_form = "prefix".into();
    assert_eq!(
        fields(&r),
        vec!["model.sha256_form"],
        "a gate run may not carry a prefix"
    );
    r.source = Source {
        kind: "published".into(),
        evidence: None,
        gate: None,
        published: Some("seed-runs.md".into()),
        evidence_sha256: None,
        unverifiable: Some("not published: on the first user's machine".into()),
        forced: None,
    };
    assert!(fields(&r).is_empty());
    assert_eq!(r.sha256_display(), "b1c1fe9d6c4a6d0c (prefix only)");
}

#[test]
fn values_may_be_unavailable_only_in_published_records_and_say_why() {
    let mut r = good();
    r.values = None;
    assert_eq!(fields(&r), vec!["values", "values"]);
    r.values_unavailable = Some("not published".into());
    r.source = Source {
        kind: "published".into(),
        evidence: None,
        gate: None,
        published: Some("seed-runs.md".into()),
        evidence_sha256: None,
        unverifiable: Some("not published: on the first user's machine".into()),
        forced: None,
    };
    assert!(fields(&r).is_empty());
    r.value = 4.5;
    assert_eq!(fields(&r), vec!["value"], "value outside the range");
}

#[test]
fn pair_ratio_and_arms_are_checked() {
    let mut r = good();
    r.value = 39.25;
    r.values = Some(vec![39.20, 39.25, 39.25, 39.32]);
    r.n = 4;
    r.range = [39.20, 39.32];
    r.pair = Some(Pair {
        other_engine: "FastFlowLM 1.0.12".into(),
        other_value: 45.57,
        other_n: 6,
        other_range: Some([45.08, 45.93]),
        ratio: 1.16,
        ratio_decimals: 2,
        ratio_source: "published".into(),
        ratio_note: None,
        arm_order: vec!["other".into(), "this".into(), "this".into(), "other".into()],
        arm_medians: Some(vec![45.43, 39.28, 39.23, 45.91]),
    });
    assert!(fields(&r).is_empty(), "{:?}", validate(&r, &r.id));
    r.pair.as_mut().unwrap().ratio = 1.20;
    r.pair.as_mut().unwrap().arm_order = vec!["this".into(), "this".into()];
    assert_eq!(
        fields(&r),
        vec!["pair.ratio", "pair.arm_order", "pair.arm_medians"]
    );
}

#[test]
fn n_below_three_is_valid_but_indicative() {
    let r = good();
    assert!(validate(&r, &r.id).is_empty());
    assert!(r.indicative());
}

#[test]
fn id_must_equal_file_name() {
    let r = good();
    assert_eq!(
        validate(&r, "other")
            .into_iter()
            .map(|p| p.field)
            .collect::<Vec<_>>(),
        vec!["id"]
    );
}

#[test]
fn what_would_make_it_wrong_is_required() {
    let mut r = good();
    r.notes.what_would_make_it_wrong = "n/a".into();
    assert_eq!(fields(&r), vec!["notes.what_would_make_it_wrong"]);
}

/// The `[record]` of the synthetic runs below: model Tiny (`model`, Q8_0) on one CPU through the llama.cpp
/// server, recording `metric` as `id`.
pub(super) fn tiny_spec(
    model: &Path,
    id: &str,
    metric: &str,
    what_would_make_it_wrong: &str,
) -> RunRecordSpec {
    RunRecordSpec {
        publish_host: false,
        id: id.into(),
        metric: metric.into(),
        model_name: "Tiny".into(),
        model_file: model.to_path_buf(),
        weights: "Q8_0".into(),
        device: "CPU".into(),
        route: "cpu".into(),
        engine: "llama.cpp server".into(),
        engine_version: None,
        backend: None,
        hold_ticket: None,
        what_would_make_it_wrong: what_would_make_it_wrong.into(),
        notes: vec![],
    }
}

/// A complete run directory of a gate with one prompt, one warmup and three judged repeats: each reply
/// streams four content tokens 10, 20, 30 ms apart after `ttft` ms (decode = 3 / span).
pub(super) fn synthetic_run(
    root: &Path,
    name: &str,
    gate: &crate::spec::GateSpec,
    warmup: bool,
    spans_ms: &[(f64, f64)],
) -> PathBuf {
    use crate::evidence::{
        EvidenceWriter, RequestRecord, ResponseMeta, RunStatus, RunSummary, ServeRecord,
    };
    use crate::io::reads::TimedRead;
    let w = EvidenceWriter::create(root, name, "20261129T120000Z").unwrap();
    w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())
        .unwrap();
    let mut requests = Vec::new();
    for (index, &(ttft, span)) in spans_ms.iter().enumerate() {
        let chunk = |text: &str| {
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
            )
        };
        let mut reads = Vec::new();
        for (k, text) in ["Pa", "r", "is", "."].iter().enumerate() {
            reads.push(TimedRead {
                recv_ms: None,
                t_ms: ttft + span * k as f64 / 3.0,
                bytes: chunk(text).into_bytes(),
            });
        }
        let end = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":4,\"total_tokens\":24}}\n\ndata: [DONE]\n\n";
        reads.push(TimedRead {
            recv_ms: None,
            t_ms: ttft + span + 1.0,
            bytes: end.as_bytes().to_vec(),
        });
        let meta = ResponseMeta {
            status: Some(200),
            ..Default::default()
        };
        w.write_request(index, &serde_json::json!({}), &meta, &reads)
            .unwrap();
        requests.push(RequestRecord {
            index,
            warmup: warmup && index == 0,
            prompt: gate.request.prompts[0].clone(),
            stream: true,
            http_status: Some(200),
            repeat: index as u32,
            body_bytes: reads.iter().map(|r| r.bytes.len() as u64).sum(),
            ..Default::default()
        });
    }
    let summary = RunSummary {
        schema: crate::evidence::RUN_SCHEMA.into(),
        status: RunStatus::Complete,
        gate: gate.name.clone(),
        gate_file: "gates/ref.toml".into(),
        started_utc: "2026-11-29T12:00:00Z".into(),
        ended_utc: Some("2026-11-29T12:00:09Z".into()),
        host: crate::evidence::HostInfo {
            hostname: "box".into(),
            os: "linux 6.1".into(),
            cpus: 2,
            cpu_model: None,
        },
        load_avg_start: Some([1.5, 1.0, 0.5]),
        load_avg_end: Some([1.75, 1.0, 0.5]),
        servegate_version: "0.1.0".into(),
        serve: ServeRecord {
            version: Some("llama.cpp b4321".into()),
            // As the runner does at serve start: the model file the serve was given (`root/model.gguf`
            // when the test made one).
            model_file: crate::evidence::hash_model(
                &root.join("model.gguf").display().to_string(),
                &[],
            ),
            ..Default::default()
        },
        planned: Some(requests.iter().filter(|r| !r.warmup).count()),
        planned_warmup: Some(requests.iter().filter(|r| r.warmup).count()),
        requests,
        notes: vec![],
        imported: None,
    };
    w.write_summary(&summary).unwrap();
    w.dir().to_path_buf()
}

/// A reply that did not fail but could not be measured (its decode window 0.3 ms, under the 5 ms
/// minimum) is left out of the record's values and named in `unmeasured` with its cause, as the verdict
/// leaves it out; `records check` re-derives the same from the evidence and catches a record that drops
/// the list. Under half measured (the verdict INDETERMINATE), no record.
#[test]
fn a_record_leaves_unmeasured_replies_out_and_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model.gguf");
    std::fs::write(&model, b"weights").unwrap();
    let gate_file = tmp.path().join("ref.toml");
    let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\nrepeats = 4\nprompts = [\"What is the capital of France?\"]\n[assert.rate]\nfloor_tok_s = 10.0\n";
    std::fs::write(&gate_file, text).unwrap();
    let ctx = crate::spec::Context::for_file(&gate_file);
    let gate = crate::spec::parse(&gate_file, text, &ctx).unwrap();
    let spec = tiny_spec(
        &model,
        "ref-decode",
        "decode_rate",
        "Four short synthetic replies.",
    );
    let dir = synthetic_run(
        tmp.path(),
        "ref",
        &gate,
        false,
        &[(100.0, 30.0), (120.0, 0.3), (110.0, 60.0), (105.0, 20.0)],
    );
    let ev = crate::loaded::load(&dir).unwrap();
    let r = from_run(&gate, &ev, &spec).unwrap();
    // 3 tokens over 30, 60, 20 ms: 100, 50, 150 tok/s; request 01 not measured.
    assert_eq!(r.n, 3);
    assert_eq!(r.values, Some(vec![100.0, 50.0, 150.0]));
    assert_eq!(r.value, 100.0);
    assert_eq!(r.unmeasured.len(), 1, "{:?}", r.unmeasured);
    assert_eq!((r.unmeasured[0].arm, r.unmeasured[0].request), (None, 1));
    assert!(
        r.unmeasured[0].cause.contains("under the 5 ms minimum"),
        "{}",
        r.unmeasured[0].cause
    );
    assert_eq!(validate(&r, &r.id), Vec::<Problem>::new());
    // Written and read back, the list survives; re-derived from the evidence, nothing differs.
    let back = parse(&to_json(&r)).unwrap();
    assert_eq!(back, r);
    assert_eq!(rederive(tmp.path(), &r), Vec::<Problem>::new());
    // A record that hides the unmeasured reply is caught by re-derivation, naming the field.
    let mut hidden = r.clone();
    hidden.unmeasured.clear();
    let p = rederive(tmp.path(), &hidden);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].field, "unmeasured");
    assert!(p[0].message.contains("states none"), "{}", p[0].message);
    // One that claims more unmeasured than measured is invalid on its face.
    let mut half = r.clone();
    for i in 5..9 {
        half.unmeasured.push(Unmeasured {
            arm: None,
            request: i,
            cause: "decode window 0.3 ms under the 5 ms minimum".into(),
        });
    }
    assert!(validate(&half, &half.id)
        .iter()
        .any(|p| p.field == "unmeasured" && p.message.contains("under half")));
    // Old records (no `unmeasured` key) still read: every value measured.
    let mut old: Value = serde_json::from_str(&to_json(&r)).unwrap();
    old.as_object_mut().unwrap().remove("unmeasured");
    assert!(parse(&old.to_string()).unwrap().unmeasured.is_empty());

    // Three of four not measured: the verdict is INDETERMINATE, and there is no record.
    let dir = synthetic_run(
        &tmp.path().join("b"),
        "ref",
        &gate,
        false,
        &[(100.0, 0.3), (120.0, 0.3), (110.0, 60.0), (105.0, 0.2)],
    );
    let ev = crate::loaded::load(&dir).unwrap();
    match from_run(&gate, &ev, &spec) {
        Err(RecordError::Evidence(m)) => {
            assert!(m.contains("verdicts are undecided"), "{m}");
            assert!(m.contains("no record from an undecided run"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Without a verdict on the figure (a decode_rate record of a gate asserting only TTFT, which
    // passes), the record refuses by the same half rule.
    let answer_only = crate::spec::parse(
        &gate_file,
        &text.replace(
            "[assert.rate]\nfloor_tok_s = 10.0\n",
            "[assert.first_token]\nlimit_ms = 100000\n",
        ),
        &ctx,
    )
    .unwrap();
    match from_run(&answer_only, &ev, &spec) {
        Err(RecordError::Evidence(m)) => {
            assert!(m.contains("only 1 of 4 judged replies measured"), "{m}");
            assert!(m.contains("request 00 (decode window"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn from_run_uses_the_verdicts_judgement_and_counts_every_planned_request() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model.gguf");
    std::fs::write(&model, b"weights").unwrap();
    let gate_file = tmp.path().join("ref.toml");
    let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\nrepeats = 3\nprompts = [\"What is the capital of France?\"]\n[assert.rate]\nfloor_tok_s = 10.0\n";
    std::fs::write(&gate_file, text).unwrap();
    let ctx = crate::spec::Context::for_file(&gate_file);
    let gate = crate::spec::parse(&gate_file, text, &ctx).unwrap();
    let dir = synthetic_run(
        tmp.path(),
        "ref",
        &gate,
        false,
        &[(100.0, 30.0), (120.0, 60.0), (110.0, 20.0)],
    );
    let ev = crate::loaded::load(&dir).unwrap();
    let spec = tiny_spec(
        &model,
        "ref-decode",
        "decode_rate",
        "Three short synthetic replies.",
    );
    assert!(from_run(&gate, &ev, &spec).is_ok());
    let refused =
        |ev: &crate::analysis::Evidence, g: &crate::spec::GateSpec, want: &str| match from_run(
            g, ev, &spec,
        ) {
            Err(RecordError::Evidence(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("expected a refusal naming {want:?}, got {other:?}"),
        };
    // Planned 20, sent 3: the verdicts fail (rate), and so does the record.
    let mut short = ev.clone();
    short.run.planned = Some(20);
    let mut twenty = gate.clone();
    twenty.request.repeats = 20;
    refused(
        &short,
        &twenty,
        "17 planned requests never sent: requests 03-19",
    );
    // A run.json planning other than the gate does: the verdicts fail naming both, and so does the record.
    refused(
        &short,
        &gate,
        "run.json says the run planned 20 judged requests but the gate plans 3",
    );
    // Reply 01 cut after two chunks (no finish_reason, no [DONE]): no figure, in records as in verdicts.
    let mut cut = ev.clone();
    let chunk = |t: f64, text: &str| crate::io::reads::TimedRead {
        recv_ms: None,
        t_ms: t,
        bytes: format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
        )
        .into_bytes(),
    };
    cut.requests[1].reply = crate::analysis::reply_of(
        &cut.requests[1].record,
        &[chunk(10.0, "Paris"), chunk(40.0, " is")],
    );
    refused(
        &cut,
        &gate,
        "request 01 (truncated_stream: no finish_reason, no [DONE])",
    );
    // A run that fails its floor writes no record either.
    let strict = crate::spec::parse(&gate_file, &text.replace("10.0", "1000.0"), &ctx).unwrap();
    refused(
        &ev,
        &strict,
        "the run failed its verdicts (1 of 1 failed; first: rate FAIL median 100.0 tok/s",
    );
}

#[test]
fn from_run_records_every_judged_value_with_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model.gguf");
    std::fs::write(&model, b"weights").unwrap();
    let gate_file = tmp.path().join("ref.toml");
    let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\ntemperature = 0\nwarmup = 1\nrepeats = 3\nprompts = [\"What is the capital of France? Answer with one word.\"]\n[assert.known_answer]\nmatches = \"(?i)paris\"\n";
    std::fs::write(&gate_file, text).unwrap();
    let gate = crate::spec::parse(
        &gate_file,
        text,
        &crate::spec::Context::for_file(&gate_file),
    )
    .unwrap();
    // warmup, then decode 3/0.030 = 100, 3/0.060 = 50, 3/0.020 = 150 tok/s.
    let dir = synthetic_run(
        tmp.path(),
        "ref",
        &gate,
        true,
        &[(500.0, 10.0), (100.0, 30.0), (120.0, 60.0), (110.0, 20.0)],
    );
    let ev = crate::loaded::load(&dir).unwrap();
    let spec = RunRecordSpec {
        publish_host: false,
        id: "ref-decode".into(),
        metric: "decode_rate".into(),
        model_name: "Tiny".into(),
        model_file: model.clone(),
        weights: "Q8_0".into(),
        device: "CPU".into(),
        route: "cpu".into(),
        engine: "llama.cpp server".into(),
        engine_version: None,
        backend: None,
        hold_ticket: None,
        what_would_make_it_wrong:
            "Three replies of four tokens each: a longer reply could decode at another rate.".into(),
        notes: vec![],
    };
    let mut killed = ev.clone();
    killed.run.status = crate::evidence::RunStatus::Running;
    assert!(
        matches!(from_run(&gate, &killed, &spec), Err(RecordError::Evidence(m)) if m.contains("incomplete")),
        "no record from a killed run"
    );
    let r = from_run(&gate, &ev, &spec).unwrap();
    let values = r.values.clone().unwrap();
    assert_eq!(values.len(), 3, "warmup excluded");
    for (got, want) in values.iter().zip([100.0, 50.0, 150.0]) {
        assert!((got - want).abs() < 1e-6, "{values:?}");
    }
    assert_eq!((r.value, r.n, r.range), (100.0, 3, [values[1], values[2]]));
    assert_eq!(r.model.sha256, crate::io::hash::sha256_bytes(b"weights"));
    assert_eq!(
        r.settings.engine_version.as_deref(),
        Some("llama.cpp b4321")
    );
    assert_eq!(
        (r.load.load1_start, r.load.load1_end),
        (Some(1.5), Some(1.75))
    );
    assert_eq!(r.known_answer.result, "pass");
    assert_eq!(r.settings.prompt_tokens, Some(20));
    assert_eq!(r.date, "2026-11-29");
    assert!(validate(&r, "ref-decode").is_empty());
    let ft = from_run(
        &gate,
        &ev,
        &RunRecordSpec {
            publish_host: false,
            id: "ref-first-token".into(),
            metric: "first_token".into(),
            ..spec.clone()
        },
    )
    .unwrap();
    assert_eq!(
        (
            ft.value,
            ft.metric.unit.as_str(),
            ft.metric.condition.as_deref()
        ),
        (110.0, "ms", Some("warm"))
    );
    // The command path: the same record from the run directory and a spec file.
    let spec_file = tmp.path().join("smol.toml");
    std::fs::write(&spec_file, format!("id = \"x\"\nmetric = \"first_token\"\nmodel_name = \"Tiny\"\nmodel_file = {:?}\nweights = \"Q8_0\"\ndevice = \"CPU\"\nroute = \"cpu\"\nengine = \"llama.cpp server\"\nwhat_would_make_it_wrong = \"Three replies of four tokens each: a longer reply could decode at another rate.\"\n", model.display().to_string())).unwrap();
    let cli_dir = tmp.path().join("cli-records");
    // The path `records add` takes (the binary's): the spec file read, its id and metric overridden, the
    // run's kind from its own gate.toml, the record built and written, never over another.
    let add = |id: &str, metric: Option<&str>| -> Result<PathBuf, RecordError> {
        let mut spec: RunRecordSpec =
            toml::from_str(&std::fs::read_to_string(&spec_file).unwrap()).unwrap();
        spec.id = id.to_string();
        if let Some(m) = metric {
            spec.metric = m.to_string();
        }
        let gate = crate::spec::load(&dir.join(crate::evidence::layout::GATE_FILE)).unwrap();
        assert_eq!(Kind::of_run(&gate, &dir), Kind::Single);
        let r = from_run(&gate, &crate::loaded::load(&dir).unwrap(), &spec)?;
        write_new(&cli_dir, &r)
    };
    add("ref-decode", Some("decode_rate")).unwrap();
    assert_eq!(
        parse(&std::fs::read_to_string(cli_dir.join("ref-decode.json")).unwrap()).unwrap(),
        r
    );
    assert!(
        matches!(add("ref-decode", None), Err(RecordError::Exists { .. })),
        "never overwrites"
    );
    // Written atomically, then checked like any committed record.
    let records = tmp.path().join("records");
    write_new(&records, &r).unwrap();
    write_new(&records, &ft).unwrap();
    assert!(check_dir(&records)
        .unwrap()
        .iter()
        .all(|c| c.problems.is_empty()));
}

#[test]
fn from_pair_run_states_both_figures_ratio_and_arm_order() {
    use crate::evidence::{ArmRecord, PairSummary, RunStatus};
    let tmp = tempfile::tempdir().unwrap();
    let gate_file = tmp.path().join("pair.toml");
    let text = "[gate]\nname = \"p\"\n[serve]\nready = \"/health\"\n[hold]\nlock = \"/tmp/npu.lock\"\n[pair.ours]\nruntime = \"srv, 1 thread\"\ncommand = [\"srv\", \"--model\", \"{model}\", \"--port\", \"{port}\"]\n[pair.theirs]\nruntime = \"srv, 2 threads\"\ncommand = [\"srv\", \"--model\", \"{model}\", \"--port\", \"{port}\", \"-t\", \"2\"]\n[request]\nmodel = \"/m.gguf\"\nmax_tokens = 16\ntemperature = 0\ntop_k = 1\nrepeats = 3\nprompts = [\"What is the capital of France? Answer with one word.\"]\n[assert.ratio]\nmetric = \"decode\"\nat_least = 0.1\n[assert.known_answer]\nmatches = \"(?i)paris\"\n";
    std::fs::write(&gate_file, text).unwrap();
    let gate = crate::spec::parse(
        &gate_file,
        text,
        &crate::spec::Context::for_file(&gate_file),
    )
    .unwrap();
    let pair_dir = tmp.path().join("pairrun");
    // decode rates: theirs 150, 100, 100 | ours 50, 50, 60 | ours 60, 30, 50 | theirs 150, 150, 300.
    let arms: [(&str, [(f64, f64); 3]); 4] = [
        ("theirs", [(90.0, 20.0), (90.0, 30.0), (90.0, 30.0)]),
        ("ours", [(100.0, 60.0), (100.0, 60.0), (100.0, 50.0)]),
        ("ours", [(100.0, 50.0), (100.0, 100.0), (100.0, 60.0)]),
        ("theirs", [(90.0, 20.0), (90.0, 20.0), (90.0, 10.0)]),
    ];
    let mut records = Vec::new();
    for (i, (role, spans)) in arms.iter().enumerate() {
        let name = crate::evidence::layout::arm_dir(i + 1, role);
        let d = synthetic_run(&pair_dir, &name, &gate, false, spans);
        records.push(ArmRecord {
            arm: i + 1,
            role: role.to_string(),
            runtime: if *role == "ours" {
                "srv, 1 thread"
            } else {
                "srv, 2 threads"
            }
            .into(),
            dir: d.strip_prefix(&pair_dir).unwrap().display().to_string(),
        });
    }
    let sha = "c".repeat(64);
    let summary = PairSummary {
        schema: crate::evidence::PAIR_SCHEMA.into(),
        status: RunStatus::Complete,
        gate: "p".into(),
        gate_file: "gates/pair.toml".into(),
        started_utc: "2026-11-29T12:00:00.000Z".into(),
        ended_utc: Some("2026-11-29T12:00:38.500Z".into()),
        host: crate::evidence::HostInfo {
            hostname: "box".into(),
            os: "linux".into(),
            cpus: 2,
            cpu_model: None,
        },
        load_avg_start: Some([4.34, 1.0, 1.0]),
        load_avg_end: Some([3.3, 1.0, 1.0]),
        order: arms.iter().map(|(r, _)| r.to_string()).collect(),
        model_file_ours: "/m.gguf".into(),
        model_file_theirs: "/m.gguf".into(),
        model_sha256: Some(sha.clone()),
        model_bytes: Some(7),
        model_sha256_after: Some(sha.clone()),
        failure: None,
        arms: records,
    };
    std::fs::write(
        pair_dir.join(crate::evidence::layout::PAIR_FILE),
        serde_json::to_string_pretty(&summary).unwrap(),
    )
    .unwrap();
    let pe = crate::loaded::load_pair(&pair_dir).unwrap();
    let spec = RunRecordSpec {
        publish_host: false,
        id: "p-decode".into(),
        metric: "decode_rate".into(),
        model_name: "Tiny".into(),
        model_file: "/m.gguf".into(),
        weights: "Q8_0".into(),
        device: "CPU".into(),
        route: "cpu".into(),
        engine: "srv, 1 thread".into(),
        engine_version: Some("srv 1".into()),
        backend: None,
        hold_ticket: None,
        what_would_make_it_wrong: "Three replies per arm of four tokens each on a shared machine."
            .into(),
        notes: vec![],
    };
    let r = from_pair_run_as(&gate, &pe, &spec, "ours").unwrap();
    let p = r.pair.as_ref().unwrap();
    // ours: 50 50 60 60 30 50 → median 50; theirs: 150 100 100 150 150 300 → median 150 (not the arm medians').
    assert_eq!(
        (r.value, r.n, p.other_value, p.other_n, p.ratio),
        (50.0, 6, 150.0, 6, 3.0)
    );
    assert_eq!(p.arm_order, ["other", "this", "this", "other"]);
    assert_eq!(
        p.arm_medians.as_deref(),
        Some(&[100.0, 50.0, 50.0, 150.0][..])
    );
    assert_eq!(p.other_engine, "srv, 2 threads");
    assert_eq!(r.model.sha256, sha);
    assert_eq!(r.hold.duration_s, Some(38.5));
    assert!(r.hold.ticket.as_deref().unwrap().contains("/tmp/npu.lock"));
    assert_eq!(
        (r.load.load1_start, r.load.load1_end),
        (Some(4.34), Some(3.3))
    );
    assert_eq!(r.known_answer.result, "pass");
    assert!(validate(&r, "p-decode").is_empty());
}

#[test]
fn write_new_is_atomic_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let r = good();
    let path = write_new(dir.path(), &r).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), to_json(&r));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
    }
    assert!(matches!(
        write_new(dir.path(), &r),
        Err(RecordError::Exists { .. })
    ));
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temp file left: {names:?}");
    let mut bad = good();
    bad.id = "bad".into();
    bad.n = 5;
    assert!(matches!(
        write_new(dir.path(), &bad),
        Err(RecordError::Invalid { .. })
    ));
    assert!(!dir.path().join("bad.json").exists());
}

/// A record built from a run states the bound its gate declared on the metric (`servegate.record/2`
/// `bound`: floor or limit from the metric registry's direction, in the record's unit, with the declaring
/// line kept from the parse), so the leaderboard draws it without reading the gate; `records check`
/// re-derives it and names a record whose bound differs; a `/1` record still reads without one, and a
/// `/1` record that states one is refused.
#[test]
fn a_record_states_its_gates_bound_and_records_check_re_derives_it() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model.gguf");
    std::fs::write(&model, b"weights").unwrap();
    let gate_file = tmp.path().join("ref.toml");
    let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\nrepeats = 3\nprompts = [\"What is the capital of France?\"]\n[assert.rate]\nfloor_tok_s = 10.0\n[assert.first_token]\nlimit_ms = 2500\n";
    std::fs::write(&gate_file, text).unwrap();
    let ctx = crate::spec::Context::for_file(&gate_file);
    let gate = crate::spec::parse(&gate_file, text, &ctx).unwrap();
    let spec =
        |id: &str, metric: &str| tiny_spec(&model, id, metric, "Three short synthetic replies.");
    let dir = synthetic_run(
        tmp.path(),
        "ref",
        &gate,
        false,
        &[(100.0, 30.0), (120.0, 40.0), (110.0, 60.0)],
    );
    let ev = crate::loaded::load(&dir).unwrap();
    let rate = from_run(&gate, &ev, &spec("ref-decode", "decode_rate")).unwrap();
    assert_eq!(rate.schema, RECORD_SCHEMA);
    assert_eq!(
        rate.bound,
        Some(RecordBound {
            kind: "floor".into(),
            value: 10.0,
            declared: "[assert.rate] floor_tok_s, gate.toml line 11".into(),
        })
    );
    let ttft = from_run(&gate, &ev, &spec("ref-ttft", "first_token")).unwrap();
    let b = ttft
        .bound
        .clone()
        .expect("the gate declares a first-token limit");
    assert_eq!((b.kind.as_str(), b.value), ("limit", 2500.0));
    assert_eq!(
        b.declared,
        "[assert.first_token] limit_ms, gate.toml line 12"
    );
    for r in [&rate, &ttft] {
        assert_eq!(validate(r, &r.id), Vec::<Problem>::new());
        assert_eq!(parse(&to_json(r)).unwrap(), *r);
        assert_eq!(rederive(tmp.path(), r), Vec::<Problem>::new());
    }
    // A record whose bound is not its gate's is caught, naming the field and both bounds.
    let mut lowered = rate.clone();
    lowered.bound.as_mut().unwrap().value = 5.0;
    let p = rederive(tmp.path(), &lowered);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].field, "bound");
    assert!(
        p[0].message.contains("floor 5") && p[0].message.contains("floor 10"),
        "{}",
        p[0].message
    );
    // A floor on a lower-is-better metric is refused on its face.
    let mut wrong = ttft.clone();
    wrong.bound.as_mut().unwrap().kind = "floor".into();
    assert!(validate(&wrong, &wrong.id)
        .iter()
        .any(|p| p.field == "bound.kind"));
    // A `/1` record (written before records carried the bound) still reads and re-derives; one that
    // states a bound is refused.
    let mut old: Value = serde_json::from_str(&to_json(&rate)).unwrap();
    old["schema"] = Value::String("servegate.record/1".into());
    let with_bound = parse(&old.to_string()).unwrap();
    assert!(validate(&with_bound, &with_bound.id)
        .iter()
        .any(|p| p.field == "bound"));
    old.as_object_mut().unwrap().remove("bound");
    let v1 = parse(&old.to_string()).unwrap();
    assert_eq!(v1.bound, None);
    assert_eq!(validate(&v1, &v1.id), Vec::<Problem>::new());
    assert_eq!(rederive(tmp.path(), &v1), Vec::<Problem>::new());
    // An unknown schema id is refused, naming the ids read.
    let mut other = rate.clone();
    other.schema = "servegate.record/9".into();
    let p = validate(&other, &other.id);
    assert!(
        p.iter()
            .any(|p| p.field == "schema" && p.message.contains("servegate.record/1")),
        "{p:?}"
    );
}
