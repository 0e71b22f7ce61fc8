//! One sweep point of a load gate driven by another load tool (`[load] driver = "vllm-bench"`,
//! docs/load.md "Drivers"): the installed tool runs the point's schedule against the serve the runner
//! started or reached ([`crate::io::vllm_bench`]), and its per-request output is written as the point's
//! evidence by the same code as `servegate import` ([`crate::import::write_point`]), so the same load
//! assertions judge it and every verdict names the tool and its version. A tool that could not run, exited
//! non-zero or wrote no readable result leaves a point with no request and a `load_client: vllm-bench: ...`
//! note: every verdict of the point is VOID, naming why.

use std::time::Duration;

use crate::evidence::{self, EvidenceWriter, RunStatus, RunSummary};
use crate::import::{self, ImportOptions, Tool};
use crate::io::load_client::Target;
use crate::io::vllm_bench::{self, BenchPlan};
use crate::spec::load::{LoadGate, Point};
use crate::spec::GateSpec;

/// Extra wall time a bench run gets beyond the gate's `run_timeout_s` and one request's `timeout_s`:
/// Python importing vLLM and loading the tokenizer (tens of seconds on a busy runner).
pub const STARTUP_ALLOWANCE: Duration = Duration::from_secs(180);

/// The bench plan of `point` of `gate` against `target`: the gate's schedule and request
/// ([`BenchPlan`]). `requests`: the point's judged requests.
pub fn plan(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    requests: usize,
    target: &Target,
) -> BenchPlan {
    BenchPlan {
        point,
        requests,
        warmup: load.spec.warmup_requests as usize,
        max_concurrency: load.spec.max_concurrency,
        seed: load.spec.seed,
        ignore_eos: load.spec.ignore_eos,
        model: gate.request.served_model.clone(),
        tokenizer: vllm_bench::tokenizer(&gate.request.model),
        base_url: format!("http://{}{}", target.addr, target.prefix),
        temperature: gate.request.temperature,
        top_p: gate.request.top_p,
        top_k: gate.request.top_k,
    }
}

/// Runs `point` with vLLM's bench into `pw` and returns a one-line account (as
/// [`super::load::run_point`], which calls this). `prompts`: the gate's prompts (text, `max_tokens`);
/// `summary`: the point's run summary as it starts (the serve's facts, the plan). Err: why the point holds
/// nothing (the caller records it as a `load_client: vllm-bench: ...` note, and every verdict is VOID).
pub fn run_point(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    prompts: &[(String, u32)],
    target: &Target,
    pw: &EvidenceWriter,
    summary: &RunSummary,
) -> Result<String, String> {
    // `duration_s` is refused with this driver: `requests` is set.
    let n = load.spec.requests.unwrap_or(1) as usize;
    let warmup = load.spec.warmup_requests as usize;
    let p = plan(gate, load, point, n, target);
    let wall = Duration::from_secs_f64(gate.request.run_timeout_s + gate.request.timeout_s)
        + STARTUP_ALLOWANCE;
    let b = vllm_bench::run(&p, prompts, pw.dir(), wall, target.api_key.as_deref())?;
    let (judged, failed) = import_point(gate, point, n, &b, summary, pw)?;
    Ok(format!(
        "load point {}: {judged} of {n} planned requests sent by vllm-bench {}, {failed} failed, {warmup} warmups not recorded by the tool (evidence {})",
        point.label(),
        b.version.as_deref().unwrap_or("(version not stated)"),
        pw.dir().display()
    ))
}

/// Reads the bench's result `b` and writes it as the point's evidence in `pw`, `summary` (the point's
/// summary with the serve's facts) carrying `imported`. Returns (judged requests, failed requests). Err:
/// the result does not parse, or states another point than the one run.
fn import_point(
    gate: &GateSpec,
    point: Point,
    planned: usize,
    b: &vllm_bench::BenchRun,
    summary: &RunSummary,
    pw: &EvidenceWriter,
) -> Result<(usize, usize), String> {
    let tool = Tool::VllmBench;
    let run = import::read(tool, &b.result)
        .map_err(|e| format!("its result {} could not be read: {e}", b.result.display()))?;
    if let Some(f) = run.point.filter(|f| *f != point) {
        return Err(format!(
            "its result states point {} but point {} was run",
            f.label(),
            point.label()
        ));
    }
    let opts = ImportOptions {
        file: b.result.clone(),
        version: b.version.clone(),
        command: Some(b.command.clone()),
    };
    let imported = import::provenance(tool, &run, &opts)?;
    let mut ps = summary.clone();
    let base = import::summary(gate, &imported, &run, &opts);
    ps.notes.extend(base.notes);
    ps.notes.push(format!(
        "load point {}: driven by vllm-bench {} (timings by vllm-bench, not servegate's client); its log is {}/{}",
        point.label(),
        imported.version.as_deref().unwrap_or("(version not stated)"),
        vllm_bench::TOOL_DIR,
        vllm_bench::LOG_FILE
    ));
    ps.imported = Some(imported.clone());
    ps.status = RunStatus::Complete;
    ps.ended_utc = Some(evidence::now_utc());
    let judged = run.requests.iter().filter(|r| !r.warmup).count();
    let failed = run.requests.iter().filter(|r| r.error.is_some()).count();
    import::write_point(gate, tool, &run, &imported, point, planned, ps, pw)?;
    Ok((judged, failed))
}
