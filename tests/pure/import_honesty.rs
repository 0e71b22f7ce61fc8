//! `servegate import`'s honesty, from a newcomer's trial: the plan is the judging gate's (a re-judge VOIDs
//! as the import did; extra requests VOID, said); the gate's warmups apply to a tool that does not mark them;
//! a request listed twice, a cancelled one, impossible or absurd timings and an empty file are refused or
//! counted as what they are, naming where; a lost imported point FAILs while the gate's other points are
//! "not imported".

use std::path::{Path, PathBuf};

use servegate::import::{self, ImportOptions, Tool};
use servegate::judge::Outcome;
use servegate::spec::load::Point;

use crate::fixtures::load::find;
use crate::import::{data, text};

const VLLM: &str = "vllm-bench-c2.json";
const AIPERF: &str = "aiperf-c2/profile_export.jsonl";
const PASSING: &str = "[assert.latency]\nttft_p50_ms = 500\n[assert.errors]\nmax_rate = 0.0\n";

/// A load gate at `points` with `load` lines (requests, warmups) and a passing TTFT bound, in `dir`.
fn gate(dir: &Path, load: &str) -> servegate::spec::GateSpec {
    crate::fixtures::load::gate(dir, load, PASSING)
}

/// The committed vLLM run (12 requests at c=2) imported under `g` into `dir/run`.
fn import_vllm(g: &servegate::spec::GateSpec, dir: &Path) -> PathBuf {
    let run = Tool::VllmBench.parse(&text(VLLM)).unwrap();
    let opts = ImportOptions {
        file: data(VLLM),
        version: Some("0.32.0".into()),
        ..Default::default()
    };
    let out = dir.join("run");
    let point = import::choose_point(g, &run, None).unwrap();
    import::write_evidence(g, Tool::VllmBench, &run, &opts, point, &out).unwrap();
    out
}

fn parse_err(tool: Tool, t: &str) -> String {
    match tool.parse(t) {
        Ok(r) => panic!("read {} requests from a bad file", r.requests.len()),
        Err(e) => e,
    }
}

#[test]
fn a_rejudge_takes_the_plan_from_the_gate_judging_it() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    std::fs::create_dir_all(&a).unwrap();
    let dir = import_vllm(&gate(&a, "concurrency = [2]\nrequests = 12"), &a);
    // Judged by a gate that plans 20: 8 are not in the file, VOID, as an import under it says.
    let b = tmp.path().join("b");
    std::fs::create_dir_all(&b).unwrap();
    let g20 = gate(&b, "concurrency = [2]\nrequests = 20");
    let v = find(
        &servegate::run::load::judge_dir(&g20, &dir),
        "[c=2]::ttft_p50",
    )
    .clone();
    assert_eq!(v.outcome, Outcome::Void, "{}", v.message);
    assert!(
        v.message
            .contains("8 of 20 planned requests are not in vllm-bench's file"),
        "{}",
        v.message
    );
}

#[test]
fn requests_beyond_the_gates_plan_void_the_point_said() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "concurrency = [2]\nrequests = 10");
    let dir = import_vllm(&g, tmp.path());
    for name in ["[c=2]::ttft_p50", "[c=2]::errors"] {
        let v = find(&servegate::run::load::judge_dir(&g, &dir), name).clone();
        assert_eq!(v.outcome, Outcome::Void, "{}", v.message);
        assert!(
            v.message
                .contains("holds 12 judged requests, 2 beyond the gate's plan of 10"),
            "{}",
            v.message
        );
    }
}

#[test]
fn the_gates_warmups_apply_to_a_tool_that_does_not_mark_them() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "concurrency = [2]\nrequests = 4\nwarmup_requests = 2",
    );
    let mut run = Tool::GuideLlm.parse(&text("guidellm-c2.json")).unwrap();
    let note = import::apply_gate_warmups(&g, Tool::GuideLlm, &mut run).unwrap();
    assert!(note.contains("first 2 requests by send time"), "{note}");
    assert_eq!(run.requests.iter().filter(|r| r.warmup).count(), 2);
    // vLLM sends its warmups apart and records none: nothing of its file is taken as a warmup.
    let mut v = Tool::VllmBench.parse(&text(VLLM)).unwrap();
    assert!(import::apply_gate_warmups(&g, Tool::VllmBench, &mut v).is_none());
    assert!(v.requests.iter().all(|r| !r.warmup));
}

#[test]
fn an_aiperf_record_listed_twice_is_refused_naming_both_lines() {
    let t = text(AIPERF);
    let first = t.lines().next().unwrap();
    let e = parse_err(Tool::AiPerf, &format!("{t}{first}\n"));
    let n = t.lines().count() + 1;
    assert!(
        e.starts_with(&format!("line {n}: metadata.x_request_id")) && e.contains("is line 1's too"),
        "{e}"
    );
}

#[test]
fn a_cancelled_aiperf_record_is_a_failure() {
    let t = text(AIPERF).replacen("\"was_cancelled\":false", "\"was_cancelled\":true", 1);
    let run = Tool::AiPerf.parse(&t).unwrap();
    let e = run.requests[0].error.as_deref().unwrap();
    assert!(e.contains("was_cancelled"), "{e}");
    assert!(run.requests[1..].iter().all(|r| r.error.is_none()));
}

#[test]
fn a_first_token_after_the_requests_end_is_refused_naming_the_path() {
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    v["ttfts"][3] = serde_json::json!(5.0);
    let e = parse_err(Tool::VllmBench, &v.to_string());
    assert!(
        e.starts_with("$.ttfts[3]: the last chunk at") && e.contains("after the request's end"),
        "{e}"
    );
    assert!(e.contains("$.latencies[3]"), "{e}");
    // Absurd: a TTFT of 1e300 s is refused, never printed as a 300-digit window.
    v["ttfts"][3] = serde_json::json!(1e300);
    let e = parse_err(Tool::VllmBench, &v.to_string());
    assert!(e.contains("over a day") && e.len() < 300, "{e}");
    // AIPerf: a TTFT of 1e6 ms in a 197 ms request.
    let t = text(AIPERF);
    let mut lines: Vec<serde_json::Value> = t
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["metrics"]["time_to_first_token"]["value"] = serde_json::json!(1e6);
    lines[0]["metrics"]["inter_chunk_latency"]["value"] = serde_json::json!([]);
    let bad: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let e = parse_err(Tool::AiPerf, &bad);
    assert!(
        e.starts_with("line 1: $.metrics.time_to_first_token") && e.contains("request_latency"),
        "{e}"
    );
}

#[test]
fn an_aiperf_unit_not_ms_gets_no_unrelated_hint() {
    let t = text(AIPERF).replacen(
        "\"time_to_first_token\":{\"value\":46.714490999999995,\"unit\":\"ms\"}",
        "\"time_to_first_token\":{\"value\":0.046714490999999995,\"unit\":\"s\"}",
        1,
    );
    let e = parse_err(Tool::AiPerf, &t);
    assert!(
        e.contains("expected \"ms\"") && !e.contains("streamed"),
        "{e}"
    );
}

#[test]
fn an_empty_file_is_said_empty() {
    for tool in Tool::ALL {
        for t in ["", "\n\n  \n"] {
            let e = parse_err(tool, t);
            assert!(e.starts_with("empty file"), "{}: {e}", tool.name());
        }
    }
}

#[test]
fn a_lost_imported_point_fails_and_the_others_are_not_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "concurrency = [2, 4]\nrequests = 12");
    let run = Tool::VllmBench.parse(&text(VLLM)).unwrap();
    let opts = ImportOptions {
        file: data(VLLM),
        ..Default::default()
    };
    let dir = tmp.path().join("run");
    import::write_evidence(
        &g,
        Tool::VllmBench,
        &run,
        &opts,
        Point::Concurrency(2),
        &dir,
    )
    .unwrap();
    let vs = servegate::run::load::judge_dir(&g, &dir);
    let c4 = find(&vs, "[c=4]::ttft_p50");
    assert_eq!(c4.outcome, Outcome::Indeterminate, "{}", c4.message);
    assert!(
        c4.message
            .contains("not imported: this run holds vllm-bench's run of point c=2 only"),
        "{}",
        c4.message
    );
    std::fs::remove_dir_all(dir.join(Point::Concurrency(2).dir())).unwrap();
    let vs = servegate::run::load::judge_dir(&g, &dir);
    let c2 = find(&vs, "[c=2]::ttft_p50");
    assert_eq!(c2.outcome, Outcome::Fail, "{}", c2.message);
    assert!(
        c2.message.contains("no evidence for this point"),
        "{}",
        c2.message
    );
    let c4 = find(&vs, "[c=4]::ttft_p50");
    assert_eq!(c4.outcome, Outcome::Indeterminate, "{}", c4.message);
}

#[test]
fn an_inference_perf_config_says_why_no_point_is_taken() {
    use import::inference_perf::config_point;
    let two = "load:\n  type: concurrent\n  stages:\n  - concurrency_level: 2\n  - concurrency_level: 4\n";
    assert!(config_point(two)
        .unwrap_err()
        .why()
        .contains("2 load stages"));
    assert!(config_point("not: yaml: [")
        .unwrap_err()
        .why()
        .contains("no load.stages"));
    let odd = "load:\n  type: sweep\n  stages:\n  - rate: 2\n";
    assert!(config_point(odd).unwrap_err().why().contains("\"sweep\""));
}

#[test]
fn a_bad_point_label_is_named_once() {
    let e = import::parse_point("c=0").unwrap_err();
    assert!(e.starts_with("\"c=0\": expected c=N"), "{e}");
}

#[test]
fn an_import_is_running_until_its_point_is_whole_and_says_its_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "concurrency = [2]\nrequests = 12");
    let run = Tool::VllmBench.parse(&text(VLLM)).unwrap();
    let opts = ImportOptions {
        file: data(VLLM),
        ..Default::default()
    };
    let dir = tmp.path().join("run");
    let status = |d: &Path| -> String {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.join("run.json")).unwrap()).unwrap();
        v["status"].as_str().unwrap().to_string()
    };
    let mut seen = Vec::new();
    let d = dir.clone();
    import::write_evidence_with(
        &g,
        Tool::VllmBench,
        &run,
        &opts,
        Point::Concurrency(2),
        &dir,
        &mut |done, all| seen.push((done, all, status(&d))),
    )
    .unwrap();
    // Killed while writing, the gate run says `running` (judged incomplete), never `complete`.
    assert_eq!(seen.len(), 12);
    assert!(
        seen.iter().all(|(_, all, s)| *all == 12 && s == "running"),
        "{seen:?}"
    );
    assert_eq!(seen.last().unwrap().0, 12);
    assert_eq!(status(&dir), "complete");
}

#[test]
fn a_guidellm_last_token_after_the_requests_end_is_refused() {
    let mut v: serde_json::Value = serde_json::from_str(&text("guidellm-c2.json")).unwrap();
    let t = &mut v["benchmarks"][0]["requests"]["successful"][1]["info"]["timings"];
    t["request_end"] = t["first_token_iteration"].clone();
    let e = parse_err(Tool::GuideLlm, &v.to_string());
    assert!(
        e.contains("successful[1].info.timings.last_token_iteration: the last chunk at")
            && e.contains("after the request's end"),
        "{e}"
    );
}

/// A GuideLLM report with a request listed twice: refused naming both entries (its `request_id`), and lists
/// holding more than the run's `request_totals` refused too (7 successful counted 6 passed `7 of 7` with
/// throughput 185.0 tok/s where the run made 158.6).
#[test]
fn a_guidellm_request_listed_twice_or_more_than_its_totals_is_refused() {
    let mut v: serde_json::Value = serde_json::from_str(&text("guidellm-c2.json")).unwrap();
    let list = v["benchmarks"][0]["requests"]["successful"]
        .as_array_mut()
        .unwrap();
    let copy = list[0].clone();
    list.push(copy.clone());
    let e = parse_err(Tool::GuideLlm, &v.to_string());
    assert!(
        e.starts_with("$.benchmarks[0].requests.successful[6].request_id")
            && e.contains(
                "is $.benchmarks[0].requests.successful[0]'s too: one request recorded twice"
            ),
        "{e}"
    );
    // In another list: named all the same.
    let mut w: serde_json::Value = serde_json::from_str(&text("guidellm-c2.json")).unwrap();
    w["benchmarks"][0]["requests"]["errored"] = serde_json::json!([copy.clone()]);
    let e = parse_err(Tool::GuideLlm, &w.to_string());
    assert!(
        e.starts_with("$.benchmarks[0].requests.errored[0].request_id")
            && e.contains("is $.benchmarks[0].requests.successful[0]'s too"),
        "{e}"
    );
    // Another id, the same request: more than request_totals counts.
    let list = v["benchmarks"][0]["requests"]["successful"]
        .as_array_mut()
        .unwrap();
    list[6]["request_id"] = serde_json::json!("another");
    let e = parse_err(Tool::GuideLlm, &v.to_string());
    assert!(
        e.contains("successful lists 7 requests but metrics.request_totals counts 6 successful: 1 more than the run made"),
        "{e}"
    );
}

/// k6: every xk6-llm sample appended again (identical times, tags and values) is a request recorded
/// twice, refused naming both lines (it imported 12 requests, doubling the throughput); a sample repeated
/// inside one request is refused too.
#[test]
fn a_k6_request_whose_samples_repeat_anothers_is_refused_naming_both_lines() {
    let good = text("k6-c2/k6-xk6-llm.json");
    let llm: Vec<&str> = good
        .lines()
        .filter(|l| l.contains(r#""type":"Point""#) && l.contains(r#""metric":"llm_"#))
        .collect();
    let doubled = format!("{good}{}\n", llm.join("\n"));
    let e = parse_err(Tool::K6, &doubled);
    let n = good.lines().count() + 1;
    assert!(
        e.starts_with(&format!("line {n}: the request's samples (time, tags and values) are line 4's too: one request recorded twice")),
        "{e}"
    );
    // The failed request's one llm_errors sample, repeated: the same.
    let err_line = llm.iter().find(|l| l.contains("llm_errors")).unwrap();
    let at = good.lines().position(|l| l == *err_line).unwrap() + 1;
    let e = parse_err(Tool::K6, &format!("{good}{err_line}\n"));
    assert!(e.contains(&format!("are line {at}'s too")), "{e}");
    // One request's llm_ttft twice.
    let ttft = llm
        .iter()
        .find(|l| l.contains(r#""metric":"llm_ttft""#))
        .unwrap();
    let e = parse_err(
        Tool::K6,
        &good.replacen(&format!("{ttft}\n"), &format!("{ttft}\n{ttft}\n"), 1),
    );
    assert!(
        e.contains("a second llm_ttft sample for the request of line 4"),
        "{e}"
    );
}

/// inference-perf and vLLM hold no request id: an entry whose perf_counter readings are another's is one
/// request recorded twice (and vLLM's lists may not outnumber its num_prompts).
#[test]
fn an_inference_perf_or_vllm_entry_repeated_is_refused_naming_both() {
    let mut v: serde_json::Value = serde_json::from_str(&text(
        "inference-perf-c2/per_request_lifecycle_metrics.json",
    ))
    .unwrap();
    let first = v[0].clone();
    v.as_array_mut().unwrap().push(first);
    let e = parse_err(Tool::InferencePerf, &v.to_string());
    assert!(
        e.starts_with("$[12]: start_time and end_time are $[0]'s too"),
        "{e}"
    );
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    for k in [
        "ttfts",
        "itls",
        "start_times",
        "output_lens",
        "input_lens",
        "errors",
        "generated_texts",
        "latencies",
    ] {
        if let Some(a) = v[k].as_array_mut() {
            let x = a[0].clone();
            a.push(x);
        }
    }
    let e = parse_err(Tool::VllmBench, &v.to_string());
    assert!(
        e.contains("$.ttfts has 13 entries but $.num_prompts is 12: 1 more than the run sent"),
        "{e}"
    );
    v["num_prompts"] = serde_json::json!(13);
    let e = parse_err(Tool::VllmBench, &v.to_string());
    assert!(
        e.starts_with("$.start_times[12], $.ttfts[12], $.itls[12] are entry 0's too"),
        "{e}"
    );
}
