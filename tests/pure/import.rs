//! `servegate import`'s readers (src/import/) on the committed tool outputs (tests/data/import/README.md):
//! each reads its good file per request; a truncated, foreign or aggregates-only file is an error naming the
//! line or the JSON path; a field a record lacks is an error, never a zero. And the evidence an import
//! writes judges as a load run: the percentiles are the tool's values', every verdict names the tool.

use std::path::{Path, PathBuf};

use servegate::import::{self, ImportOptions, Tool, ToolRun};
use servegate::judge::Outcome;
use servegate::spec::load::Point;

use crate::fixtures::load::{find, numpy_linear};

/// A committed tool output under tests/data/import.
pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

/// [`data`]'s text.
pub(crate) fn text(name: &str) -> String {
    std::fs::read_to_string(data(name)).unwrap()
}

fn err(tool: Tool, text: &str) -> String {
    match tool.parse(text) {
        Ok(r) => panic!(
            "{} read {} requests from a bad file",
            tool.name(),
            r.requests.len()
        ),
        Err(e) => e,
    }
}

// ---- vLLM's bench -----------------------------------------------------------------------------------

const VLLM: &str = "vllm-bench-c2.json";

#[test]
fn vllm_bench_detailed_result_is_read_per_request() {
    let t = text(VLLM);
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    let run = Tool::VllmBench.parse(&t).unwrap();
    let n = v["ttfts"].as_array().unwrap().len();
    assert_eq!(run.requests.len(), n);
    assert_eq!(run.point, Some(Point::Concurrency(2)));
    assert_eq!(
        run.planned,
        Some(v["num_prompts"].as_u64().unwrap() as usize)
    );
    for (i, r) in run.requests.iter().enumerate() {
        // One arrival per timed chunk: the first at the TTFT, each next one ITL later (s -> ms).
        let itl = v["itls"][i].as_array().unwrap();
        assert_eq!(r.arrivals_ms.len(), 1 + itl.len());
        let ttft = v["ttfts"][i].as_f64().unwrap() * 1000.0;
        assert!((r.arrivals_ms[0] - ttft).abs() < 1e-9);
        assert_eq!(r.tokens, v["output_lens"][i].as_u64());
        assert_eq!(r.text.as_deref(), v["generated_texts"][i].as_str());
        assert!(r.error.is_none());
    }
}

/// A failed vLLM request keeps its time in flight: its end is its `latencies` entry, else its last timed
/// chunk (a stream cut midway), else none recorded (vLLM's latency 0 on an HTTP error): 0, counted at its
/// send only. So a run whose every request failed with its timings had its two in flight at once.
#[test]
fn vllm_bench_failed_requests_keep_their_end() {
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    v["errors"] = serde_json::json!(vec!["boom"; 12]);
    let all = Tool::VllmBench.parse(&v.to_string()).unwrap();
    assert!(all
        .requests
        .iter()
        .all(|r| r.error.as_deref() == Some("boom")));
    let lat0 = v["latencies"][0].as_f64().unwrap() * 1000.0;
    assert!((all.requests[0].end_ms - lat0).abs() < 1e-9);
    assert_eq!(import::peak_in_flight(&all), Some(2));
    // Request 1 cut after 3 chunks, with no latency; request 2 an HTTP error (no chunk, latency 0).
    v["latencies"][1] = serde_json::json!(0.0);
    v["itls"][1] = serde_json::json!([0.01, 0.02]);
    v["ttfts"][1] = serde_json::json!(0.05);
    v["latencies"][2] = serde_json::json!(0.0);
    v["ttfts"][2] = serde_json::json!(0.0);
    v["itls"][2] = serde_json::json!([]);
    let run = Tool::VllmBench.parse(&v.to_string()).unwrap();
    assert!((run.requests[1].end_ms - 80.0).abs() < 1e-9);
    assert_eq!(run.requests[2].end_ms, 0.0);
    assert!(run.requests.iter().all(|r| r.arrivals_ms.is_empty()));
    // An absurd end of a failed request is refused as a successful one's is.
    v["latencies"][3] = serde_json::json!(1e9);
    let e = err(Tool::VllmBench, &v.to_string());
    assert!(e.starts_with("$.latencies[3]: the request's end"), "{e}");
}

#[test]
fn vllm_bench_truncated_foreign_and_aggregate_files_are_refused() {
    let t = text(VLLM);
    let cut = &t[..t.len() / 2];
    assert!(err(Tool::VllmBench, cut).contains("truncated"));
    let foreign = err(Tool::VllmBench, &text("guidellm-report.json"));
    assert!(foreign.contains("not a vllm bench serve"), "{foreign}");
    let mut v: serde_json::Value = serde_json::from_str(&t).unwrap();
    for k in [
        "ttfts",
        "itls",
        "start_times",
        "generated_texts",
        "errors",
        "output_lens",
        "input_lens",
    ] {
        v.as_object_mut().unwrap().remove(k);
    }
    let agg = err(Tool::VllmBench, &v.to_string());
    assert!(
        agg.contains("aggregates only") && agg.contains("--save-detailed"),
        "{agg}"
    );
}

#[test]
fn vllm_bench_missing_field_is_an_error_never_a_zero() {
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    v.as_object_mut().unwrap().remove("output_lens");
    assert_eq!(
        err(Tool::VllmBench, &v.to_string()),
        "$.output_lens: missing"
    );
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    v["ttfts"][3] = serde_json::Value::Null;
    let e = err(Tool::VllmBench, &v.to_string());
    assert!(e.starts_with("$.ttfts[3]: not a number"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    v["itls"].as_array_mut().unwrap().pop();
    let e = err(Tool::VllmBench, &v.to_string());
    assert!(e.contains("$.itls has"), "{e}");
}

// ---- AIPerf -----------------------------------------------------------------------------------------

const AIPERF: &str = "aiperf-shaped-with-error.jsonl";
const AIPERF_REAL: &str = "aiperf-c2/profile_export.jsonl";

#[test]
fn aiperf_records_are_read_per_line() {
    let run = Tool::AiPerf.parse(&text(AIPERF)).unwrap();
    assert_eq!(run.requests.len(), 6);
    let ok: Vec<_> = run.requests.iter().filter(|r| r.error.is_none()).collect();
    assert_eq!(ok.len(), 5);
    // 8 chunks: the first at the TTFT, 7 gaps of inter_chunk_latency after it.
    assert_eq!(ok[0].arrivals_ms.len(), 8);
    assert_eq!(ok[0].arrivals_ms[0], 48.5);
    assert_eq!(ok[0].tokens, Some(8));
    assert!(
        ok.iter().all(|r| r.text.is_none()),
        "AIPerf records no text"
    );
    let failed = run.requests.iter().find(|r| r.error.is_some()).unwrap();
    assert_eq!(failed.status, Some(500));
    assert!(failed
        .error
        .as_deref()
        .unwrap()
        .contains("Internal Server Error"));
}

#[test]
fn aiperf_real_records_use_the_serves_token_count_and_the_aggregate_beside_them() {
    let run = import::read(Tool::AiPerf, &data(AIPERF_REAL)).unwrap();
    assert_eq!(run.requests.len(), 6);
    assert_eq!(run.version.as_deref(), Some("0.13.0"));
    assert!(run
        .command
        .as_deref()
        .unwrap()
        .starts_with("aiperf profile --model 'synthetic'"));
    let agg: serde_json::Value =
        serde_json::from_str(&text("aiperf-c2/profile_export_aiperf.json")).unwrap();
    for (r, line) in run.requests.iter().zip(text(AIPERF_REAL).lines()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let m = &v["metrics"];
        // The serve's count (16), not AIPerf's tokenizer's (39).
        assert_eq!(r.tokens, m["usage_completion_tokens"]["value"].as_u64());
        assert_ne!(r.tokens, m["output_sequence_length"]["value"].as_u64());
        // 16 chunks received, 15 gaps.
        assert_eq!(
            r.arrivals_ms.len(),
            1 + m["inter_chunk_latency"]["value"].as_array().unwrap().len()
        );
        assert_eq!(
            r.arrivals_ms[0],
            m["time_to_first_token"]["value"].as_f64().unwrap()
        );
    }
    // AIPerf's own TTFT p50 is numpy's over these records: the importer's values are AIPerf's.
    let ttfts: Vec<f64> = run.requests.iter().map(|r| r.arrivals_ms[0]).collect();
    let p50 = agg["time_to_first_token"]["p50"].as_f64().unwrap();
    assert!((numpy_linear(&ttfts, 50.0) - p50).abs() < 1e-9, "{p50}");
    // Its aggregate file is refused as the input, said why.
    let e = err(Tool::AiPerf, &text("aiperf-c2/profile_export_aiperf.json"));
    assert!(
        e.contains("aggregates") && e.contains("profile_export.jsonl"),
        "{e}"
    );
}

#[test]
fn aiperf_truncated_foreign_and_aggregate_files_name_the_line() {
    let t = text(AIPERF);
    let cut = &t[..t.len() - 40];
    let e = err(Tool::AiPerf, cut);
    assert!(e.starts_with("line 6: truncated"), "{e}");
    let mut lines: Vec<&str> = t.lines().collect();
    lines[2] = "{\"metadata\": {\"request_start_ns\": 1";
    let e = err(Tool::AiPerf, &(lines.join("\n") + "\n"));
    assert!(e.starts_with("line 3: not JSON"), "{e}");
    let e = err(Tool::AiPerf, &text("guidellm-report.json"));
    assert!(
        e.contains("not an AIPerf profile_export.jsonl record"),
        "{e}"
    );
    let e = err(
        Tool::AiPerf,
        "{\"time_to_first_token\": {\"avg\": 50.1, \"p99\": 52.0, \"unit\": \"ms\"}}",
    );
    assert!(
        e.contains("aggregates") && e.contains("profile_export.jsonl"),
        "{e}"
    );
}

#[test]
fn aiperf_missing_field_is_an_error_never_a_zero() {
    let t = text(AIPERF);
    let mut lines: Vec<serde_json::Value> = t
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let m = lines[1]["metrics"].as_object_mut().unwrap();
    m.remove("output_sequence_length");
    m.remove("output_token_count");
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let e = err(Tool::AiPerf, &body);
    assert!(
        e.starts_with("line 2: $.metrics.output_sequence_length: missing"),
        "{e}"
    );
    let mut lines: Vec<serde_json::Value> = t
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["metrics"]["time_to_first_token"]["unit"] = "sec".into();
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let e = err(Tool::AiPerf, &body);
    assert!(
        e.contains("line 1: $.metrics.time_to_first_token.unit is \"sec\""),
        "{e}"
    );
}

// ---- GuideLLM ---------------------------------------------------------------------------------------

const GUIDELLM: &str = "guidellm-report.json";

#[test]
fn guidellm_requests_are_read_with_first_and_last_token_times() {
    let run = Tool::GuideLlm.parse(&text(GUIDELLM)).unwrap();
    assert_eq!(run.requests.len(), 6);
    assert_eq!(run.point, Some(Point::Concurrency(2)));
    let r = &run.requests[0];
    assert_eq!(r.arrivals_ms.len(), 2, "first and last token only");
    assert!((r.arrivals_ms[0] - 50.0).abs() < 1e-3);
    assert!((r.arrivals_ms[1] - 120.0).abs() < 1e-3);
    assert_eq!(r.per_arrival, Some(vec![1, 7]));
    assert_eq!(run.lacks[0].0, "itl");
}

#[test]
fn guidellm_real_report_gives_guidellms_own_per_request_figures() {
    let t = text("guidellm-c2.json");
    let run = Tool::GuideLlm.parse(&t).unwrap();
    assert_eq!(run.version.as_deref(), Some("0.8.1"));
    assert_eq!(run.point, Some(Point::Concurrency(2)));
    let v: serde_json::Value = serde_json::from_str(&t).unwrap();
    let reqs = v["benchmarks"][0]["requests"]["successful"]
        .as_array()
        .unwrap();
    assert_eq!(run.requests.len(), reqs.len());
    for (r, q) in run.requests.iter().zip(reqs) {
        // GuideLLM's own computed fields per request, from the timings the importer read.
        let ttft = q["time_to_first_token_ms"].as_f64().unwrap();
        assert!(
            (r.arrivals_ms[0] - ttft).abs() < 1e-6,
            "{} vs {ttft}",
            r.arrivals_ms[0]
        );
        let n = q["output_tokens"].as_u64().unwrap();
        assert_eq!(r.tokens, Some(n));
        let itl = q["inter_token_latency_ms"].as_f64().unwrap();
        let mine = (r.arrivals_ms[1] - r.arrivals_ms[0]) / (n - 1) as f64;
        assert!((mine - itl).abs() < 1e-6, "{mine} vs {itl}");
        assert_eq!(r.text.as_deref(), q["output"].as_str());
    }
}

#[test]
fn guidellm_truncated_foreign_sampled_and_missing_fields_are_refused() {
    let t = text(GUIDELLM);
    assert!(err(Tool::GuideLlm, &t[..t.len() - 10]).contains("truncated"));
    let e = err(Tool::GuideLlm, &text(AIPERF));
    assert!(
        e.contains("not JSON") || e.contains("not a GuideLLM"),
        "{e}"
    );
    let mut v: serde_json::Value = serde_json::from_str(&t).unwrap();
    v["benchmarks"][0]["metrics"]["request_totals"]["successful"] = 60.into();
    let e = err(Tool::GuideLlm, &v.to_string());
    assert!(e.contains("a sample"), "{e}");
    let mut v: serde_json::Value = serde_json::from_str(&t).unwrap();
    let r = &mut v["benchmarks"][0]["requests"]["successful"][2];
    r["output_metrics"]
        .as_object_mut()
        .unwrap()
        .remove("total_tokens");
    r["info"]["timings"]["token_iterations"] = 0.into();
    let e = err(Tool::GuideLlm, &v.to_string());
    assert_eq!(
        e,
        "$.benchmarks[0].requests.successful[2].output_metrics.total_tokens: missing (and no token_iterations): a token count is never read as zero"
    );
    let mut v: serde_json::Value = serde_json::from_str(&t).unwrap();
    v["benchmarks"][0]["requests"]["successful"][1]["info"]["timings"]
        .as_object_mut()
        .unwrap()
        .remove("first_token_iteration");
    let e = err(Tool::GuideLlm, &v.to_string());
    assert_eq!(
        e,
        "$.benchmarks[0].requests.successful[1].info.timings.first_token_iteration: missing"
    );
}

// ---- the evidence an import writes, judged ----------------------------------------------------------

/// A load gate at concurrency 2 with `requests` judged and these assertions, in `dir`.
fn gate(dir: &Path, requests: usize, asserts: &str) -> servegate::spec::GateSpec {
    crate::fixtures::load::gate(
        dir,
        &format!("concurrency = [2]\nrequests = {requests}\nmax_lag_ms = 10"),
        asserts,
    )
}

fn imported(
    tool: Tool,
    file: &str,
    g: &servegate::spec::GateSpec,
    dir: &Path,
) -> (ToolRun, PathBuf) {
    let run = tool.parse(&text(file)).unwrap();
    let opts = ImportOptions {
        file: data(file),
        version: Some("9.9.9".into()),
        ..Default::default()
    };
    let out = dir.join("run");
    let point = import::choose_point(g, &run, None).unwrap();
    import::write_evidence(g, tool, &run, &opts, point, &out).unwrap();
    (run, out)
}

#[test]
fn an_aiperf_import_judges_the_tools_values_and_names_the_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        6,
        "[assert.latency]\nttft_p50_ms = 60\n[assert.errors]\nmax_rate = 0.0\n",
    );
    let (run, dir) = imported(Tool::AiPerf, AIPERF, &g, tmp.path());
    let vs = servegate::run::load::judge_dir(&g, &dir);
    let ttft = find(&vs, "[c=2]::ttft_p50");
    // The tool's TTFTs, the failed request counted above every value (docs/load.md).
    let mut vals: Vec<f64> = run
        .requests
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| r.arrivals_ms[0])
        .collect();
    let median_ok = numpy_linear(&vals, 50.0);
    vals.push(1e300);
    let p50 = numpy_linear(&vals, 50.0);
    assert_eq!(ttft.outcome, Outcome::Pass, "{}", ttft.message);
    assert!(
        (ttft.median.unwrap() - p50).abs() < 1e-6,
        "{} vs {p50}",
        ttft.message
    );
    assert!(
        ttft.message
            .contains(&format!("p50 of succeeded {median_ok:.1}")),
        "{}",
        ttft.message
    );
    assert!(
        ttft.message
            .ends_with("timings by aiperf 9.9.9, not servegate's client"),
        "{}",
        ttft.message
    );
    let errors = find(&vs, "[c=2]::errors");
    assert_eq!(errors.outcome, Outcome::Fail, "{}", errors.message);
    assert!(
        errors.message.contains("1 of 6 planned requests failed"),
        "{}",
        errors.message
    );
    // Placeholders are not judged as content: the 5 others succeeded.
    let rj: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(rj["imported"]["tool"], "aiperf");
    assert_eq!(rj["imported"]["text_recorded"], false);
}

#[test]
fn a_guidellm_import_refuses_itl_percentiles_and_judges_tpot() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        6,
        "[assert.latency]\nitl_p50_ms = 50\ntpot_p50_ms = 20\n",
    );
    let (_, dir) = imported(Tool::GuideLlm, GUIDELLM, &g, tmp.path());
    let vs = servegate::run::load::judge_dir(&g, &dir);
    let itl = find(&vs, "[c=2]::itl_p50");
    assert_eq!(itl.outcome, Outcome::Indeterminate, "{}", itl.message);
    assert!(
        itl.message
            .contains("refused: GuideLLM records the first and last token times"),
        "{}",
        itl.message
    );
    let tpot = find(&vs, "[c=2]::tpot_p50");
    // (request_end − request_start − TTFT) / (8 − 1): (120.8 − 50 − k) / 7 ms per request.
    assert_eq!(tpot.outcome, Outcome::Pass, "{}", tpot.message);
    assert!(tpot.message.contains("guidellm 9.9.9"), "{}", tpot.message);
}

#[test]
fn a_point_the_gate_does_not_declare_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let g = crate::fixtures::load::gate(
        tmp.path(),
        "concurrency = [4]\nrequests = 6",
        "[assert.errors]\nmax_rate = 0.0",
    );
    let run = Tool::GuideLlm.parse(&text(GUIDELLM)).unwrap();
    let e = import::choose_point(&g, &run, None).unwrap_err();
    assert!(e.contains("the run is point c=2"), "{e}");
    let e = import::choose_point(&g, &run, Some(Point::Concurrency(4))).unwrap_err();
    assert!(
        e.contains("--point c=4 but the file states point c=2"),
        "{e}"
    );
}

/// A file that states no load, filed under the gate's only point: its own peak in flight must be that
/// concurrency, or a c=2 run would be judged (and pass) as c=4 (found by a newcomer's trial).
#[test]
fn a_run_unlike_the_gates_only_point_is_refused_when_nothing_names_its_point() {
    let tmp = tempfile::tempdir().unwrap();
    let run = Tool::InferencePerf.parse(&text(IP)).unwrap();
    assert_eq!(import::peak_in_flight(&run), Some(2));
    for (c, ok) in [(4, false), (1, false), (2, true)] {
        let g = crate::fixtures::load::gate(
            tmp.path(),
            &format!("concurrency = [{c}]\nrequests = 12"),
            "[assert.errors]\nmax_rate = 0.0",
        );
        match import::choose_point(&g, &run, None) {
            Ok(p) => assert!(ok && p == Point::Concurrency(c), "c={c}: {p:?}"),
            Err(e) => assert!(
                !ok && e.contains(&format!(
                    "only point is c={c}, but the run had at most 2 request(s) in flight"
                )),
                "c={c}: {e}"
            ),
        }
        // Named with --point, the user's word stands when the run never had more in flight than it (a
        // lighter run's throughput is then INDETERMINATE when judged); a run over it is refused however
        // its point was named.
        match import::choose_point(&g, &run, Some(Point::Concurrency(c))) {
            Ok(p) => assert!(c >= 2 && p == Point::Concurrency(c), "c={c}: {p:?}"),
            Err(e) => assert!(
                c < 2 && e.starts_with(&format!("the run had 2 requests in flight at once, more than the concurrency {c} of point c={c} (named by --point) allows")),
                "c={c}: {e}"
            ),
        }
    }
}

/// The committed vLLM run (12 requests at c=2) with `f` applied, parsed.
fn vllm_run(f: impl FnOnce(&mut serde_json::Value)) -> ToolRun {
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    f(&mut v);
    Tool::VllmBench.parse(&v.to_string()).unwrap()
}

/// A run is never filed, nor passed, under a point it was not, whatever named the point (a newcomer's
/// trial: the peak was checked only when the gate's only point was taken, so a burst of 12 passed as c=2
/// named by the file or by --point). At a concurrency point, more in flight than it is refused; at a rate
/// point, a cap the file states must be the gate's, and the peak may not pass the gate's cap.
#[test]
fn a_run_over_its_points_load_is_refused_however_the_point_was_named() {
    let tmp = tempfile::tempdir().unwrap();
    let c2 = crate::fixtures::load::gate(
        tmp.path(),
        "concurrency = [2]\nrequests = 12",
        "[assert.errors]\nmax_rate = 0.0",
    );
    // Every request sent at once, max_concurrency 2 left in the file: 12 in flight.
    let burst = vllm_run(|v| {
        let t0 = v["start_times"][0].clone();
        v["start_times"] = serde_json::json!(vec![t0; 12]);
    });
    assert_eq!(import::peak_in_flight(&burst), Some(12));
    for (asked, how) in [
        (None, "stated by the file"),
        (
            Some(Point::Concurrency(2)),
            "named by --point and stated by the file",
        ),
    ] {
        let e = import::choose_point(&c2, &burst, asked).unwrap_err();
        assert!(
            e.starts_with(&format!("the run had 12 requests in flight at once, more than the concurrency 2 of point c=2 ({how}) allows")),
            "{e}"
        );
    }
    // The file states no load; --point names it.
    let mut unstated = burst.clone();
    unstated.point = None;
    let e = import::choose_point(&c2, &unstated, Some(Point::Concurrency(2))).unwrap_err();
    assert!(e.contains("point c=2 (named by --point) allows"), "{e}");
    // Sent in the reverse order of their ends: more than two overlap.
    let reversed = vllm_run(|v| {
        let mut s = v["start_times"].as_array().unwrap().clone();
        s.reverse();
        v["start_times"] = serde_json::json!(s);
    });
    assert!(import::peak_in_flight(&reversed).unwrap() > 2);
    assert!(import::choose_point(&c2, &reversed, None).is_err());
    // The run as it was: filed.
    let real = vllm_run(|_| {});
    assert_eq!(
        import::choose_point(&c2, &real, None),
        Ok(Point::Concurrency(2))
    );

    // A rate point: the file's cap is compared with the gate's, and the peak with the gate's cap.
    let rate = |cap: &str| {
        let d = tmp.path().join(format!("r{cap}"));
        std::fs::create_dir_all(&d).unwrap();
        crate::fixtures::load::gate(
            &d,
            &format!("rate_rps = [4.0]\nrequests = 12{cap}"),
            "[assert.errors]\nmax_rate = 0.0",
        )
    };
    let capped = vllm_run(|v| {
        v["request_rate"] = serde_json::json!(4);
    });
    assert_eq!(
        (capped.point, capped.max_concurrency),
        (Some(Point::Rate(4.0)), Some(2))
    );
    let e = import::choose_point(&rate("\nmax_concurrency = 8"), &capped, None).unwrap_err();
    assert!(
        e.starts_with("the file states max_concurrency 2 (its cap on requests in flight) but point r=4 (stated by the file) of gate `load-test` is capped at [load] max_concurrency = 8"),
        "{e}"
    );
    let e = import::choose_point(&rate(""), &capped, None).unwrap_err();
    assert!(e.contains("is uncapped (no [load] max_concurrency)"), "{e}");
    assert_eq!(
        import::choose_point(&rate("\nmax_concurrency = 2"), &capped, None),
        Ok(Point::Rate(4.0))
    );
    let uncapped = vllm_run(|v| {
        v["request_rate"] = serde_json::json!(4);
        v["max_concurrency"] = serde_json::Value::Null;
    });
    assert_eq!(uncapped.max_concurrency, None);
    let e = import::choose_point(&rate("\nmax_concurrency = 1"), &uncapped, None).unwrap_err();
    assert!(
        e.starts_with("the run had 2 requests in flight at once, more than the cap [load] max_concurrency = 1 of point r=4 (stated by the file) allows"),
        "{e}"
    );
    assert_eq!(
        import::choose_point(&rate("\nmax_concurrency = 2"), &uncapped, None),
        Ok(Point::Rate(4.0))
    );
    // GuideLLM's rate strategies state their cap the same way.
    let mut v: serde_json::Value = serde_json::from_str(&text(GUIDELLM)).unwrap();
    v["benchmarks"][0]["config"]["strategy"] =
        serde_json::json!({"type_": "poisson", "rate": 4.0, "max_concurrency": 2});
    let g = Tool::GuideLlm.parse(&v.to_string()).unwrap();
    assert_eq!(
        (g.point, g.max_concurrency),
        (Some(Point::Rate(4.0)), Some(2))
    );
    v["benchmarks"][0]["config"]["strategy"]["max_concurrency"] = serde_json::json!(0);
    let e = err(Tool::GuideLlm, &v.to_string());
    assert!(
        e.starts_with("$.benchmarks[0].config.strategy.max_concurrency: not a cap of 1 or more"),
        "{e}"
    );
}

#[test]
fn records_of_an_import_name_the_tool_in_their_method() {
    let tmp = tempfile::tempdir().unwrap();
    let g = crate::fixtures::load::gate(
        tmp.path(),
        "concurrency = [2]\nrequests = 12\nmax_lag_ms = 10",
        "[assert.latency]\nttft_p50_ms = 500\n[assert.errors]\nmax_rate = 0.0\n",
    );
    let (_, dir) = imported(Tool::VllmBench, VLLM, &g, tmp.path());
    let model = tmp.path().join("m.gguf");
    std::fs::write(&model, b"gguf").unwrap();
    let spec: servegate::records::record::RunRecordSpec = toml::from_str(&format!(
        "id = \"imp\"\nmetric = \"first_token\"\nmodel_name = \"m\"\nmodel_file = {:?}\nweights = \"w\"\ndevice = \"d\"\nroute = \"r\"\nengine = \"e\"\nwhat_would_make_it_wrong = \"a sentence of four words\"\n",
        model.display().to_string()
    ))
    .unwrap();
    // The tools hash no model file: no record can state a model hash, and none is built.
    let e = servegate::records::load_records::from_load_run(&g, &dir, &spec, None).unwrap_err();
    assert!(e.to_string().contains("no serve.model_file"), "{e}");
    // Nor the serve's version or the machine's load. Given them (as a run of servegate's own records them),
    // every record names whose timings it holds.
    for f in ["run.json", "c2/run.json"] {
        let p = dir.join(f);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        v["serve"]["model_file"] = serde_json::json!({
            "path": model.display().to_string(), "sha256": "a".repeat(64), "bytes": 1, "source": "request.model"
        });
        v["serve"]["version"] = "b1234".into();
        v["load_avg_start"] = serde_json::json!([1.0, 1.0, 1.0]);
        v["load_avg_end"] = serde_json::json!([1.0, 1.0, 1.0]);
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }
    let recs = servegate::records::load_records::from_load_run(&g, &dir, &spec, None).unwrap();
    assert!(!recs.is_empty());
    for r in &recs {
        assert!(
            r.instrument
                .method
                .contains("timings by vllm-bench 9.9.9, not servegate's client"),
            "{}: {}",
            r.id,
            r.instrument.method
        );
    }
}

#[test]
fn a_file_that_is_not_utf8_is_refused_naming_the_line() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("bin.jsonl");
    let mut bytes = text(AIPERF).into_bytes();
    let second = bytes.iter().position(|b| *b == b'\n').unwrap() + 5;
    bytes[second] = 0xff;
    std::fs::write(&f, bytes).unwrap();
    let e = import::read(Tool::AiPerf, &f).unwrap_err();
    assert!(e.starts_with("line 2: not UTF-8"), "{e}");
}

#[test]
fn a_tool_version_with_control_bytes_is_escaped_in_every_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), 6, "[assert.latency]\nttft_p50_ms = 500\n");
    let run = Tool::GuideLlm.parse(&text(GUIDELLM)).unwrap();
    let opts = ImportOptions {
        file: data(GUIDELLM),
        version: Some("0.8\u{1b}[31m\n::error::x".into()),
        ..Default::default()
    };
    let dir = tmp.path().join("run");
    import::write_evidence(&g, Tool::GuideLlm, &run, &opts, Point::Concurrency(2), &dir).unwrap();
    let vs = servegate::run::load::judge_dir(&g, &dir);
    assert!(!vs.is_empty());
    for v in &vs {
        assert!(
            !v.message.contains('\u{1b}') && !v.message.contains('\n'),
            "{:?}",
            v.message
        );
        assert!(
            v.message.contains("timings by guidellm 0.8"),
            "{}",
            v.message
        );
    }
}

// ---- inference-perf -----------------------------------------------------------------------------------

const IP: &str = "inference-perf-c2/per_request_lifecycle_metrics.json";

#[test]
fn inference_perf_entries_are_read_with_their_chunk_times_and_failures() {
    let run = Tool::InferencePerf.parse(&text(IP)).unwrap();
    assert_eq!(run.requests.len(), 12);
    let failed: Vec<&str> = run
        .requests
        .iter()
        .filter_map(|r| r.error.as_deref())
        .collect();
    // The real run against llama.cpp's server: two requests cut by the serve closing a kept-alive connection.
    assert_eq!(
        failed,
        [
            "ServerDisconnectedError: Server disconnected",
            "ServerDisconnectedError: Server disconnected"
        ]
    );
    let ok: Vec<_> = run.requests.iter().filter(|r| r.error.is_none()).collect();
    assert_eq!(ok.len(), 10);
    for r in &ok {
        // 16 content chunks timed for 16 tokens (the serve's usage count), in order, within the request.
        assert_eq!(r.arrivals_ms.len(), 16);
        assert_eq!(r.tokens, Some(16));
        assert!(r.arrivals_ms.windows(2).all(|w| w[0] <= w[1]));
        assert!(r.arrivals_ms[0] > 0.0 && *r.arrivals_ms.last().unwrap() <= r.end_ms);
        assert!(!r.text.as_deref().unwrap_or("").is_empty());
    }
    // The first entry's first chunk: chunk_times[0] - start_time, in ms.
    let first = &run.requests[0];
    assert!((first.arrivals_ms[0] - (78234.172732358 - 78233.064843532) * 1000.0).abs() < 1e-6);
    assert_eq!(first.text.as_deref().unwrap().chars().next(), Some('o'));
    assert!(run
        .notes
        .iter()
        .any(|n| n == "inference-perf model: smollm2"));
    // The load point, from config.yaml beside the file.
    let point = import::inference_perf::sibling_point(&data(IP));
    assert_eq!(point, Some(Point::Concurrency(2)));
}

#[test]
fn inference_perf_truncated_foreign_summary_and_missing_fields_are_refused() {
    let good = text(IP);
    let e = err(Tool::InferencePerf, &good[..good.len() / 2]);
    assert!(e.starts_with("truncated"), "{e}");
    let e = err(Tool::InferencePerf, &text(VLLM));
    assert!(
        e.contains("not inference-perf's per_request_lifecycle_metrics.json"),
        "{e}"
    );
    let e = err(
        Tool::InferencePerf,
        r#"{"load_summary": {}, "successes": {}, "failures": {}}"#,
    );
    assert!(
        e.contains("summary_lifecycle_metrics.json (aggregates)"),
        "{e}"
    );
    let e = err(Tool::InferencePerf, r#"[{"start": 1}]"#);
    assert!(
        e.contains("$[0]: not an inference-perf per-request entry"),
        "{e}"
    );
    let e = err(Tool::InferencePerf, "[]");
    assert!(e.contains("no request"), "{e}");
    // A success without its chunk times, or without any token count: an error naming the path, never 0.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v[0]["info"]["response_metrics"]
        .as_object_mut()
        .unwrap()
        .remove("chunk_times");
    let e = err(Tool::InferencePerf, &v.to_string());
    assert_eq!(e, "$[0].info.response_metrics.chunk_times: missing");
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let rm = v[0]["info"]["response_metrics"].as_object_mut().unwrap();
    rm.remove("server_usage");
    rm.remove("output_tokens");
    let e = err(Tool::InferencePerf, &v.to_string());
    assert_eq!(e, "$[0].info.response_metrics.output_tokens: missing");
    // A chunk before the request's send: one clock per run, said.
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v[0]["info"]["response_metrics"]["chunk_times"][0] = serde_json::json!(1.0);
    let e = err(Tool::InferencePerf, &v.to_string());
    assert!(e.contains("chunk_times[0]: 1 is before"), "{e}");
}

#[test]
fn inference_perf_config_gives_the_point_only_for_one_stage_of_a_known_type() {
    use import::inference_perf::point_of_config;
    let one = "api:\n  type: completion\nload:\n  type: concurrent\n  stages:\n  - num_requests: 12\n    concurrency_level: 4\n    rate: 12.0\nmetrics: null\n";
    assert_eq!(point_of_config(one), Some(Point::Concurrency(4)));
    let rate = "load:\n  type: constant\n  stages:\n  - rate: 2.5\n    duration: 10\n";
    assert_eq!(point_of_config(rate), Some(Point::Rate(2.5)));
    let two = "load:\n  type: poisson\n  stages:\n  - rate: 1.0\n    duration: 10\n  - rate: 2.0\n    duration: 10\n";
    assert_eq!(point_of_config(two), None, "a sweep names no one point");
    // `type:` of another top-level table is not the load's.
    let other = "api:\n  type: concurrent\nload:\n  type: trace_replay\n  stages:\n  - rate: 1.0\n";
    assert_eq!(point_of_config(other), None);
}

/// A GuideLLM run driven by servegate sends the point's warmups as its first requests and its report
/// does not mark them: the first N by send time are recorded as warmups (ties in the file's order), the
/// file's order kept, the rest judged; 0 marks none.
#[test]
fn the_first_requests_by_send_time_are_marked_as_warmups() {
    let mut run = import::read(Tool::GuideLlm, &data("guidellm-c2.json")).unwrap();
    let n = run.requests.len();
    assert!(n > 3, "{n}");
    assert!(run.requests.iter().all(|r| !r.warmup));
    let starts: Vec<f64> = run.requests.iter().map(|r| r.start_ms).collect();
    let mut sorted = starts.clone();
    sorted.sort_by(f64::total_cmp);
    run.mark_first_as_warmups(0);
    assert!(run.requests.iter().all(|r| !r.warmup));
    run.mark_first_as_warmups(2);
    let warm: Vec<f64> = run
        .requests
        .iter()
        .filter(|r| r.warmup)
        .map(|r| r.start_ms)
        .collect();
    assert_eq!(warm.len(), 2);
    assert!(warm.iter().all(|s| *s <= sorted[1]), "{warm:?} {sorted:?}");
    let after: Vec<f64> = run.requests.iter().map(|r| r.start_ms).collect();
    assert_eq!(after, starts, "the file's order is kept");
}

// ---- k6 with xk6-llm ----------------------------------------------------------------------------------

const K6: &str = "k6-c2/k6-xk6-llm.json";

/// k6's `--out json` of xk6-llm's samples (constructed to the format, tests/data/import/README.md): five
/// requests rebuilt from their samples (start = time − duration, arrivals at TTFT then each ITL), one
/// `llm_errors` sample a failed request, k6's own samples skipped.
#[test]
fn k6_xk6_llm_samples_are_regrouped_per_request() {
    let run = Tool::K6.parse(&text(K6)).unwrap();
    assert_eq!(run.requests.len(), 6);
    let failed: Vec<&str> = run
        .requests
        .iter()
        .filter_map(|r| r.error.as_deref())
        .collect();
    assert_eq!(
        failed,
        ["network: xk6-llm's error_type (its samples carry no message)"]
    );
    let ok: Vec<_> = run.requests.iter().filter(|r| r.error.is_none()).collect();
    assert_eq!(ok.len(), 5);
    // The first request to end is VU 1's first (i = 0): TTFT 40 ms, 15 gaps of 10 ms, end 190.75 ms.
    let first = ok[0];
    assert_eq!(first.arrivals_ms.len(), 16);
    assert!((first.arrivals_ms[0] - 40.0).abs() < 1e-9);
    assert!((first.arrivals_ms[15] - 190.0).abs() < 1e-6);
    assert!((first.end_ms - 190.75).abs() < 1e-9);
    assert_eq!(first.tokens, Some(16));
    assert_eq!(first.text, None);
    // Its start: 06:00:00.191250123 - 190.75 ms = 06:00:00.000500123, VU 1's start (0.5 ms in).
    let t0 = 1_796_623_200_000.0; // 2026-12-07T06:00:00Z in ms
    assert!(
        (first.start_ms - (t0 + 0.500123)).abs() < 1e-3,
        "{}",
        first.start_ms
    );
    // Requests are in the file's (end time) order, and every one's arrivals lie within it.
    for r in &ok {
        assert!(r.arrivals_ms.windows(2).all(|w| w[0] <= w[1]));
        assert!(*r.arrivals_ms.last().unwrap() <= r.end_ms);
    }
    assert!(run.notes.iter().any(|n| n == "k6 model tag: synthetic"));
    assert!(run
        .notes
        .iter()
        .any(|n| n.starts_with("k6: ") && n.contains("k6's own metrics")));
    assert_eq!((run.version.as_deref(), run.point), (None, None));
    // The run's shape gives its point where the file does not: at most two in flight.
    assert_eq!(import::peak_in_flight(&run), Some(2));
}

#[test]
fn k6_bad_foreign_summary_and_incomplete_files_are_refused_naming_the_line() {
    let good = text(K6);
    // Cut inside a line: the line named.
    let cut = &good[..good.len() - 20];
    let e = err(Tool::K6, cut);
    assert!(e.starts_with("line 140: truncated"), "{e}");
    // Another tool's file, k6's end-of-test summary, k6 without xk6-llm, nothing at all.
    let e = err(Tool::K6, &text(VLLM));
    assert!(
        e.starts_with("line 1: not k6's JSON-lines output")
            && e.contains("one JSON document (an object)"),
        "{e}"
    );
    let e = err(Tool::K6, &text(IP));
    assert!(e.starts_with("line 1: not k6's JSON-lines output"), "{e}");
    let e = err(
        Tool::K6,
        r#"{"root_group": {}, "metrics": {"http_req_duration": {"avg": 1}}}"#,
    );
    assert!(
        e.contains("end-of-test summary") && e.contains("aggregates"),
        "{e}"
    );
    let http_only = r#"{"metric":"http_req_duration","type":"Point","data":{"time":"2026-12-07T06:00:00Z","value":12.5,"tags":{}}}
{"metric":"http_req_waiting","type":"Point","data":{"time":"2026-12-07T06:00:00Z","value":10.0,"tags":{}}}
"#;
    let e = err(Tool::K6, http_only);
    assert!(
        e.contains("k6's own http_req_* metrics time a whole response"),
        "{e}"
    );
    let e = err(Tool::K6, "\n");
    assert!(e.starts_with("empty file"), "{e}");
    // A request's sample whose llm_requests was cut away: named, never read into another request.
    let lines: Vec<&str> = good.lines().collect();
    let first_req = lines
        .iter()
        .position(|l| l.contains(r#""metric":"llm_requests","type":"Point""#))
        .unwrap();
    let mut v = lines.clone();
    v.remove(first_req);
    let e = err(Tool::K6, &v.join("\n"));
    // (The line after it is llm_request_duration's `Metric` envelope, the one after that its sample.)
    assert!(
        e.starts_with(&format!(
            "line {}: a llm_request_duration sample",
            first_req + 2
        )),
        "{e}"
    );
    // A request without its duration, with a gap missing, or with a bad time: an error, never a zero.
    let without = |needle: &str, nth: usize| -> String {
        let mut seen = 0;
        let kept: Vec<&str> = lines
            .iter()
            .filter(|l| {
                if l.contains(needle) {
                    seen += 1;
                    seen != nth
                } else {
                    true
                }
            })
            .copied()
            .collect();
        kept.join("\n")
    };
    let e = err(
        Tool::K6,
        &without(r#""metric":"llm_request_duration","type":"Point""#, 1),
    );
    assert!(e.contains("has no llm_request_duration sample"), "{e}");
    let e = err(
        Tool::K6,
        &without(r#""metric":"llm_itl","type":"Point""#, 3),
    );
    assert!(
        e.contains("llm_chunks_per_request 16 but 14 llm_itl samples"),
        "{e}"
    );
    let e = err(
        Tool::K6,
        &good.replacen("2026-12-07T06:00:00.191250123Z", "yesterday", 1),
    );
    assert!(e.contains(r#""yesterday" is not an RFC 3339 time"#), "{e}");
    let e = err(
        Tool::K6,
        &good.replacen(r#""type":"Point""#, r#""type":"Sample""#, 1),
    );
    assert!(e.contains(r#"envelope type "Sample""#), "{e}");
}

/// A stream the script cut short (`llm_aborted`) is a failed request, not a short reply; a `stream: false`
/// call (tag `mode=unary`) is refused: xk6-llm times no token for it.
#[test]
fn k6_aborted_streams_fail_and_unary_calls_are_refused() {
    let good = text(K6);
    let first = good
        .lines()
        .find(|l| l.contains(r#""metric":"llm_requests","type":"Point""#))
        .unwrap();
    let aborted = first.replace(r#""metric":"llm_requests""#, r#""metric":"llm_aborted""#);
    let with_abort = good.replacen(&format!("{first}\n"), &format!("{first}\n{aborted}\n"), 1);
    let run = Tool::K6.parse(&with_abort).unwrap();
    assert_eq!(
        run.requests[0].error.as_deref(),
        Some("aborted: cut short by the script (xk6-llm's abort_after_ms or abort_after_tokens)")
    );
    let unary = good.replace(
        r#""scenario":"default"}"#,
        r#""scenario":"default","mode":"unary"}"#,
    );
    let e = err(Tool::K6, &unary);
    assert!(
        e.contains("a stream: false request (tag mode=unary)"),
        "{e}"
    );
}

/// A value from the file too large to be a time is printed in exponent form, as every reader prints it
/// (`import::shown_ms`), never as its 300 digits: k6's `llm_itl`, an inference-perf chunk time, a negative
/// AIPerf gap, a GuideLLM token time.
#[test]
fn a_huge_value_from_the_file_is_printed_in_exponent_form() {
    let short = |e: &str| {
        assert!(e.len() < 300 && !e.contains("0000000000"), "{e}");
    };
    let good = text(K6);
    let itl = r#""metric":"llm_itl","type":"Point","data":{"time":"2026-12-07T06:00:00.191250123Z","value":10.0"#;
    let e = err(
        Tool::K6,
        &good.replacen(itl, &itl.replace("10.0", "1e300"), 1),
    );
    assert!(
        e.starts_with("line 4 (llm_requests): a chunk at 1.000e300 ms"),
        "{e}"
    );
    short(&e);
    let dur = r#""metric":"llm_request_duration","type":"Point","data":{"time":"2026-12-07T06:00:00.191250123Z","value":190.75"#;
    assert!(good.contains(dur));
    let e = err(
        Tool::K6,
        &good.replacen(dur, &dur.replace("190.75", "1e300"), 1),
    );
    assert!(
        e.contains("llm_request_duration: the request's end at 1.000e300 ms"),
        "{e}"
    );
    short(&e);
    let e = err(
        Tool::K6,
        &good.replacen(itl, &itl.replace("10.0", "-1e300"), 1),
    );
    assert!(e.ends_with("llm_itl: negative (-1e300)"), "{e}");
    // inference-perf: a chunk time of 1e300 s, and one of -1e-300 s (not 300 zeros either).
    let mut v: serde_json::Value = serde_json::from_str(&text(IP)).unwrap();
    v[0]["info"]["response_metrics"]["chunk_times"][0] = serde_json::json!(1e300);
    let e = err(Tool::InferencePerf, &v.to_string());
    assert!(
        e.contains("is before the request's start or the chunk before (1e300)"),
        "{e}"
    );
    short(&e);
    v[0]["info"]["response_metrics"]["chunk_times"][0] = serde_json::json!(-1e-300);
    let e = err(Tool::InferencePerf, &v.to_string());
    assert!(e.ends_with("negative (-1e-300)"), "{e}");
    short(&e);
    // GuideLLM: a first token at 1e300 s.
    let mut v: serde_json::Value = serde_json::from_str(&text("guidellm-c2.json")).unwrap();
    v["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]["first_token_iteration"] =
        serde_json::json!(1e300);
    let e = err(Tool::GuideLlm, &v.to_string());
    assert!(e.contains("first_token_iteration 1e300"), "{e}");
    short(&e);
}

/// Another tool's pretty-printed (multi-line) JSON read as k6's or AIPerf's JSON lines is said to be not
/// that tool's output (another tool's file?), never `truncated` (it said `line 1: truncated: the line ends
/// inside a JSON value` for a first line `{`); a file cut in its last line is still `truncated`.
#[test]
fn a_multi_line_json_document_is_not_json_lines_not_truncated() {
    let v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    let pretty = serde_json::to_string_pretty(&v).unwrap();
    assert!(pretty.starts_with("{\n"));
    for tool in [Tool::K6, Tool::AiPerf] {
        let e = err(tool, &pretty);
        assert!(
            e.starts_with("line 1: not ")
                && e.contains("another tool's file?")
                && !e.contains("truncated"),
            "{}: {e}",
            tool.name()
        );
    }
    let e = err(Tool::K6, &pretty);
    assert!(e.contains("not k6's JSON-lines output"), "{e}");
    // Cut while written: the document does not parse whole, its first line `{` alone says what it is.
    let cut = &pretty[..pretty.len() / 2];
    let e = err(Tool::K6, cut);
    assert!(
        e.starts_with("line 1: not k6's JSON-lines output") && e.contains("\"{\" alone"),
        "{e}"
    );
    // A first line that opens a value the next lines go on with: not k6's, not truncated.
    let e = err(Tool::K6, "{\"benchmarks\": [\n  1,\n  2\n");
    assert!(
        e.starts_with("line 1: the line ends inside a JSON value and the file goes on: not k6's"),
        "{e}"
    );
    let e = err(
        Tool::AiPerf,
        "{\"metadata\": {\n\"a\": 1\n}, \"metrics\": {}}\n[1,\n",
    );
    assert!(
        e.starts_with(
            "line 1: the line ends inside a JSON value and the file goes on: not AIPerf's"
        ),
        "{e}"
    );
    let e = err(
        Tool::AiPerf,
        &serde_json::to_string_pretty(&serde_json::json!([1, 2])).unwrap(),
    );
    assert!(e.contains("one JSON document (an array)"), "{e}");
    // The real files cut in their last line: truncated, as before (blank lines after it too).
    let k6 = text(K6);
    let e = err(Tool::K6, &format!("{}\n\n", &k6[..k6.len() - 20]));
    assert!(e.starts_with("line 140: truncated"), "{e}");
    let ap = text(AIPERF_REAL);
    let e = err(Tool::AiPerf, &ap[..ap.len() - 20]);
    assert!(e.starts_with("line 6: truncated"), "{e}");
}

/// A rate that is not one (0, negative; GuideLLM and vLLM refuse them themselves) is a malformed file,
/// named by its path (exit 5), in every reader that takes a rate: never a point `r=-5` refused as one the
/// gate lacks (a newcomer's trial), nor no point at all. So is a GuideLLM `streams` under 1 and an
/// inference-perf `concurrency_level` that is not a count.
#[test]
fn a_rate_not_over_zero_is_a_format_error_naming_its_path() {
    for r in [
        serde_json::json!(-5),
        serde_json::json!(0),
        serde_json::json!(-0.5),
    ] {
        let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
        v["request_rate"] = r.clone();
        v["max_concurrency"] = serde_json::Value::Null;
        let e = err(Tool::VllmBench, &v.to_string());
        assert!(
            e.starts_with(&format!(
                "$.request_rate: {} is not a request rate",
                r.as_f64().unwrap()
            )),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&text(GUIDELLM)).unwrap();
        v["benchmarks"][0]["config"]["strategy"] =
            serde_json::json!({"type_": "constant", "rate": r});
        let e = err(Tool::GuideLlm, &v.to_string());
        assert!(
            e.starts_with("$.benchmarks[0].config.strategy.rate: ")
                && e.contains("is not a request rate"),
            "{e}"
        );
    }
    // vLLM's "inf" is no rate (a closed loop at max_concurrency); any other string is not a number.
    let mut v: serde_json::Value = serde_json::from_str(&text(VLLM)).unwrap();
    v["request_rate"] = serde_json::json!("fast");
    assert!(err(Tool::VllmBench, &v.to_string()).starts_with("$.request_rate: not a number"));
    let mut v: serde_json::Value = serde_json::from_str(&text(GUIDELLM)).unwrap();
    v["benchmarks"][0]["config"]["strategy"] =
        serde_json::json!({"type_": "concurrent", "streams": 0});
    let e = err(Tool::GuideLlm, &v.to_string());
    assert!(
        e.starts_with("$.benchmarks[0].config.strategy.streams: not a count of 1 or more"),
        "{e}"
    );

    use import::inference_perf::{config_point, NoPoint};
    let cfg = |kind: &str, key: &str, x: &str| {
        format!("load:\n  type: {kind}\n  stages:\n  - num_requests: 12\n    {key}: {x}\n  sweep: null\n")
    };
    for x in ["-5", "0", "nan", ".inf", "fast"] {
        match config_point(&cfg("constant", "rate", x)) {
            Err(NoPoint::Malformed(e)) => assert!(
                e.starts_with(&format!("load.stages[0].rate: {x:?} is not a request rate")),
                "{e}"
            ),
            other => panic!("rate {x}: {other:?}"),
        }
    }
    for x in ["0", "-2", "2.5"] {
        match config_point(&cfg("concurrent", "concurrency_level", x)) {
            Err(NoPoint::Malformed(e)) => {
                assert!(e.starts_with("load.stages[0].concurrency_level: "), "{e}")
            }
            other => panic!("concurrency_level {x}: {other:?}"),
        }
    }
    // A number the type does not use is not read (inference-perf writes a rate beside a concurrency), and
    // a null one is unstated, not malformed.
    assert_eq!(
        config_point(&format!(
            "{}    rate: -1\n",
            cfg("concurrent", "concurrency_level", "2")
        )),
        Ok(Point::Concurrency(2))
    );
    assert!(matches!(
        config_point(&cfg("poisson", "rate", "null")),
        Err(NoPoint::Unstated(_))
    ));
}
