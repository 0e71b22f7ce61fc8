//! One sweep point of a load gate driven by another load tool (`[load] driver = "vllm-bench" | "aiperf" |
//! "guidellm"`, docs/load.md "Drivers"): the installed tool runs the point's schedule against the serve the
//! runner started or reached ([`crate::io::vllm_bench`], [`crate::io::aiperf`], [`crate::io::guidellm`]),
//! and its per-request output is
//! written as the point's evidence by the same code as `servegate import` ([`crate::import::write_point`]),
//! so the same load assertions judge it and every verdict names the tool and its version. A tool that could
//! not run, exited non-zero or wrote no readable result leaves a point with no request and a
//! `load_client: <tool>: ...` note: every verdict of the point is VOID, naming why.

use std::time::Duration;

use crate::evidence::{self, EvidenceWriter, RunStatus, RunSummary};
use crate::import::{self, ImportOptions, Tool};
use crate::io::load_client::Target;
use crate::io::tool::ToolSchedule;
use crate::io::vllm_bench::{self, BenchPlan};
use crate::spec::load::{LoadGate, Point};
use crate::spec::GateSpec;

/// Extra wall time a bench run gets beyond the gate's `run_timeout_s` and one request's `timeout_s`:
/// Python importing vLLM and loading the tokenizer (tens of seconds on a busy runner).
pub const STARTUP_ALLOWANCE: Duration = Duration::from_secs(180);

/// The bench plan of `point` of `gate` against `target` ([`BenchPlan`]): the point's schedule
/// ([`ToolSchedule::of`], `requests` judged requests) and the gate's sampling keys.
pub fn plan(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    requests: usize,
    target: &Target,
) -> BenchPlan {
    BenchPlan {
        schedule: ToolSchedule::of(gate, load, point, requests, target),
        temperature: gate.request.temperature,
        top_p: gate.request.top_p,
        top_k: gate.request.top_k,
    }
}

/// Runs `point` with the gate's tool driver (vLLM's bench, AIPerf or GuideLLM) into `pw` and returns a one-line
/// account (as [`super::load::run_point`], which calls this). `prompts`: the gate's prompts (text,
/// `max_tokens`); `summary`: the point's run summary as it starts (the serve's facts, the plan). Err: why
/// the point holds nothing (the caller records it as a `load_client: <tool>: ...` note, and every verdict
/// is VOID).
pub fn run_point(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    prompts: &[(String, u32)],
    target: &Target,
    pw: &EvidenceWriter,
    summary: &RunSummary,
) -> Result<String, String> {
    // `duration_s` is refused with these drivers: `requests` is set.
    let n = load.spec.requests.unwrap_or(1) as usize;
    let wall = Duration::from_secs_f64(gate.request.run_timeout_s + gate.request.timeout_s)
        + STARTUP_ALLOWANCE;
    let key = target.api_key.as_deref();
    let (tool, out) = match &load.spec.driver {
        crate::spec::load::Driver::AiPerf => {
            let p = ToolSchedule::of(gate, load, point, n, target);
            let (records, command) = crate::io::aiperf::run(&p, prompts, pw.dir(), wall, key)?;
            (
                Tool::AiPerf,
                Output {
                    file: records,
                    version: None,
                    command,
                    warmups_first: 0,
                },
            )
        }
        crate::spec::load::Driver::GuideLlm => {
            let p = guidellm_plan(gate, load, point, n, target);
            let system = gate.request.system.as_deref();
            let (report, command) =
                crate::io::guidellm::run(&p, prompts, system, pw.dir(), wall, key)?;
            (
                Tool::GuideLlm,
                Output {
                    file: report,
                    version: None,
                    command,
                    warmups_first: p.schedule.warmup,
                },
            )
        }
        _ => {
            let p = plan(gate, load, point, n, target);
            let b = vllm_bench::run(&p, prompts, pw.dir(), wall, key)?;
            (
                Tool::VllmBench,
                Output {
                    file: b.result,
                    version: b.version,
                    command: b.command,
                    warmups_first: 0,
                },
            )
        }
    };
    let (judged, warmup, failed, version) = import_point(gate, tool, point, n, &out, summary, pw)?;
    Ok(format!(
        "load point {}: {judged} of {n} planned requests sent by {} {}, {failed} failed, {warmup} warmups recorded (evidence {})",
        point.label(),
        tool.name(),
        version.as_deref().unwrap_or("(version not stated)"),
        pw.dir().display()
    ))
}

/// The GuideLLM plan of `point` of `gate` against `target` ([`crate::io::guidellm::GuideLlmPlan`]): the
/// point's schedule ([`ToolSchedule::of`], `requests` judged requests), the gate's `timeout_s`, and the
/// body keys servegate's own load client sends (the gate's request body,
/// [`crate::io::client::request_body`]) less `model`, `messages`, `stream`, `stream_options` and
/// `max_tokens` (GuideLLM sets those itself; the gate's `max_tokens` is the schedule's, and so is
/// `ignore_eos`, which the scenario adds when asked, as `run::load` does).
pub fn guidellm_plan(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    requests: usize,
    target: &Target,
) -> crate::io::guidellm::GuideLlmPlan {
    let mut body = match crate::io::client::request_body(&gate.request, "") {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    for k in [
        "model",
        "messages",
        "stream",
        "stream_options",
        "max_tokens",
    ] {
        body.remove(k);
    }
    crate::io::guidellm::GuideLlmPlan {
        schedule: ToolSchedule::of(gate, load, point, requests, target),
        body,
        timeout_s: gate.request.timeout_s,
    }
}

/// What a tool run left: its per-request output file, the version its run stated (None: the file may
/// state it), the command as run, and how many of its first requests (by send time) were servegate's
/// warmups its output does not mark (GuideLLM's; 0 for the tools that mark them or send them apart).
struct Output {
    file: std::path::PathBuf,
    version: Option<String>,
    command: String,
    warmups_first: usize,
}

/// Reads the tool's output `out` and writes it as the point's evidence in `pw`, `summary` (the point's
/// summary with the serve's facts) carrying `imported`. Returns (judged requests, warmups, failed
/// requests, the version). Err: the output does not parse, or states another point than the one run.
fn import_point(
    gate: &GateSpec,
    tool: Tool,
    point: Point,
    planned: usize,
    out: &Output,
    summary: &RunSummary,
    pw: &EvidenceWriter,
) -> Result<(usize, usize, usize, Option<String>), String> {
    let mut run = import::read(tool, &out.file)
        .map_err(|e| format!("its output {} could not be read: {e}", out.file.display()))?;
    run.mark_first_as_warmups(out.warmups_first);
    if let Some(f) = run.point.filter(|f| *f != point) {
        return Err(format!(
            "its output states point {} but point {} was run",
            f.label(),
            point.label()
        ));
    }
    let opts = ImportOptions {
        file: out.file.clone(),
        version: out.version.clone(),
        command: Some(out.command.clone()),
    };
    let imported = import::provenance(tool, &run, &opts)?;
    let mut ps = summary.clone();
    let base = import::summary(gate, &imported, &run, &opts);
    ps.notes.extend(base.notes);
    let dir = out
        .file
        .parent()
        .and_then(|d| d.strip_prefix(pw.dir()).ok())
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    ps.notes.push(format!(
        "load point {}: driven by {} {} (timings by {}, not servegate's client); its files are in {dir}",
        point.label(),
        tool.name(),
        imported.version.as_deref().unwrap_or("(version not stated)"),
        tool.name(),
    ));
    // GuideLLM is given the system message (its dataset's `system` column) and the extra keys (its
    // `extras.body`); the other tools send one user message.
    if tool != Tool::GuideLlm && (gate.request.system.is_some() || !gate.request.extra.is_empty()) {
        ps.notes.push(format!(
            "{} sent one user message with its own sampling keys: the gate's [request] system message and extra body keys were not sent",
            tool.name()
        ));
    }
    ps.imported = Some(imported.clone());
    ps.status = RunStatus::Complete;
    ps.ended_utc = Some(evidence::now_utc());
    let judged = run.requests.iter().filter(|r| !r.warmup).count();
    let warmup = run.requests.len() - judged;
    let failed = run
        .requests
        .iter()
        .filter(|r| !r.warmup && r.error.is_some())
        .count();
    import::write_point(gate, tool, &run, &imported, point, planned, ps, pw)?;
    Ok((judged, warmup, failed, imported.version))
}
