//! Runs GuideLLM's `guidellm run` for `[load] driver = "guidellm"` (docs/load.md, "Drivers"): one run of
//! the provisioned tool per sweep point, with the gate's schedule, in the point's `guidellm/` directory (the
//! prompts file, the scenario file, the tool's log and its benchmarks report stay there as evidence). Run
//! through [`ToolKit::run`]; reading its report into the point's evidence is [`crate::import`]'s
//! ([`crate::import::guidellm`]).
//!
//! GuideLLM 0.8.1 takes its settings as a scenario file (`guidellm run -c FILE`), the `BenchmarkArgs` of
//! vllm-project/guidellm `src/guidellm/schemas/benchmark/entrypoints.py`, read in the 0.8.1 wheel from
//! PyPI (guidellm-0.8.1-py3-none-any.whl): `backend` (`openai_http`: `target`, `model`, `request_format`,
//! `validate_backend`, `timeout`, `extras`; `src/guidellm/schemas/backends/openai_http.py`), `profile`
//! (`concurrent` with `streams`, `constant` / `poisson` with `rate` and `max_concurrency`;
//! `src/guidellm/schemas/benchmark/profiles/`), `constraints` (`max_requests` with `count`), `data`
//! (`json_file` with `path`; its columns mapped by name in `src/guidellm/data/preprocessors/mappers.py`:
//! `prompt`, `system`), `seed` (`static` with `value`), `outputs` (`json` with `path`). The chat request
//! GuideLLM builds from them (`src/guidellm/backends/openai/request_handlers.py`): `extras.body` merged
//! into the body before the messages are set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::io::tool::{ToolKit, ToolSchedule};
use crate::spec::load::Point;

/// The GuideLLM release `scripts/provision-guidellm.sh` installs (the peers bench's pin).
pub const GUIDELLM_VERSION: &str = "0.8.1";
/// GuideLLM's run in a point's evidence: `guidellm/` with `prompts.jsonl` (the gate's prompts as a JSON
/// lines dataset, `{"prompt": ...}` or `{"prompt": ..., "system": ...}`, one line per request in the
/// order servegate's own client would send them) and `guidellm.log` (its stdout and stderr); its Python
/// `$SERVEGATE_GUIDELLM_PYTHON`, else `{cache}/venv-guidellm-<GUIDELLM_VERSION>`
/// (`scripts/provision-guidellm.sh`: torch borrowed from the vLLM venv).
pub const KIT: ToolKit = ToolKit {
    what: "GuideLLM",
    dir: "guidellm",
    prompts: "prompts.jsonl",
    log: "guidellm.log",
    package: "guidellm",
    version: GUIDELLM_VERSION,
    python_env: "SERVEGATE_GUIDELLM_PYTHON",
    provision: "scripts/provision-guidellm.sh",
};
/// The scenario file servegate writes (`guidellm run -c`), in the point's `guidellm/`.
pub const SCENARIO_FILE: &str = "scenario.json";
/// GuideLLM's benchmarks report (its `json` output), in the point's `guidellm/`.
pub const REPORT_FILE: &str = "report.json";

/// The Python of the provisioned GuideLLM, run as `python -m guidellm` ([`ToolKit::python`] of [`KIT`]).
/// Err says how to provision it.
pub fn guidellm_python() -> Result<PathBuf, String> {
    KIT.python()
}

/// One run of GuideLLM: the sweep point's [`ToolSchedule`] and what only GuideLLM is given. The schedule
/// in the scenario: the point as profile `concurrent` with `streams` = N (closed loop) or `poisson` /
/// `constant` (`constant`) with `rate` = R and `max_concurrency` as the profile's cap (open loop);
/// `requests` with `warmup` as the `max_requests` constraint's `count`, the warmups being the dataset's
/// first lines, recorded as warmups on import (GuideLLM's own `warmup` is a measurement window of its own
/// making, not a count of requests sent first: its report lists the requests before the window beside the
/// others, and the window's boundary falls where a request in flight starts; so it is not used); `seed`
/// as `seed.value` (Poisson gaps); `max_tokens` and `ignore_eos` (when set) in `backend.extras.body` (the
/// dataset's lines must all ask `max_tokens`); `model` as `backend.model`; `tokenizer` as
/// `tokenizer.model` (it counts words of a file dataset, and loads the tokenizer only if it needs one);
/// `base_url` as `backend.target`.
#[derive(Debug, Clone, PartialEq)]
pub struct GuideLlmPlan {
    /// The point's schedule and the gate's request ([`ToolSchedule::of`]).
    pub schedule: ToolSchedule,
    /// The other body keys servegate's own client sends beside `model`, `messages`, `stream`,
    /// `max_tokens` and `ignore_eos`: the gate's `temperature` and its `[request] extra` keys. With the
    /// schedule's `max_tokens` (and `ignore_eos` when asked) they are GuideLLM's `backend.extras.body`,
    /// merged into every request it sends.
    pub body: serde_json::Map<String, Value>,
    /// One request's timeout, s (`[request] timeout_s`: `backend.timeout`).
    pub timeout_s: f64,
}

/// The scenario of `plan` (`{"spec": BenchmarkArgs}`, the shape `BenchmarkScenario` reads): the gate's prompts from `prompts` (one line per request), the report written
/// to `report`. The serve's readiness is not checked again (`validate_backend: false`: the runner waited
/// for it); streamed chat completions; only the JSON report is written, every request kept in it.
pub fn scenario(plan: &GuideLlmPlan, prompts: &Path, report: &Path) -> Value {
    let s = &plan.schedule;
    let mut profile = match s.point {
        Point::Concurrency(c) => json!({"kind": "concurrent", "streams": [c]}),
        Point::Rate(r) => json!({
            "kind": if s.constant { "constant" } else { "poisson" },
            "rate": [r],
        }),
    };
    if let (Point::Rate(_), Some(m)) = (s.point, s.max_concurrency) {
        profile["max_concurrency"] = m.into();
    }
    let mut body = plan.body.clone();
    body.insert("max_tokens".into(), s.max_tokens.into());
    if s.ignore_eos {
        body.insert("ignore_eos".into(), true.into());
    }
    json!({"spec": {
        "backend": {
            "kind": "openai_http",
            "target": s.base_url,
            "model": s.model,
            "request_format": "/v1/chat/completions",
            "stream": true,
            "validate_backend": false,
            "timeout": plan.timeout_s,
            "extras": {"body": body},
        },
        "profile": profile,
        "constraints": [{"kind": "max_requests", "count": s.requests + s.warmup}],
        "tokenizer": {"kind": "huggingface_auto", "model": s.tokenizer.display().to_string()},
        "data": [{"kind": "json_file", "path": prompts.display().to_string()}],
        "seed": {"kind": "static", "value": s.seed},
        "outputs": [{"kind": "json", "path": report.display().to_string()}],
    }})
}

/// GuideLLM's arguments after its Python: `-m guidellm run -c <scenario> --disable-console-interactive`
/// (its results table still printed into the log).
pub fn argv(scenario: &Path) -> Vec<String> {
    vec![
        "-m".into(),
        "guidellm".into(),
        "run".into(),
        "-c".into(),
        scenario.display().to_string(),
        "--disable-console-interactive".into(),
    ]
}

/// The dataset of `n` requests after `warmup` warmups: one JSON object per line, `{"prompt": ...}` (and
/// `"system"` when the gate sets a system message, which GuideLLM sends as a system message before the
/// prompt), prompt `i % len` for the i-th warmup and then for the i-th judged request, as servegate's
/// own client picks them. `prompts` is not empty (the gate's validation).
pub fn prompts_jsonl(prompts: &[String], system: Option<&str>, warmup: usize, n: usize) -> String {
    (0..warmup)
        .chain(0..n)
        .map(|i| {
            let mut row = json!({"prompt": prompts[i % prompts.len()]});
            if let Some(s) = system {
                row["system"] = s.into();
            }
            row.to_string() + "\n"
        })
        .collect()
}

/// Runs GuideLLM for `plan` in the `guidellm` directory of `point_dir` ([`KIT`]) with the gate's `prompts` (text,
/// `max_tokens`) and system message, within `wall`; returns the report and the command as run. Refused
/// before anything runs: a prompt asking another `max_tokens` than the plan's (GuideLLM would send a
/// per-line output length as `max_completion_tokens` with `ignore_eos` forced on, so servegate gives it
/// one `max_tokens` in the body instead), and a serve that needs an API key (GuideLLM takes it in its
/// scenario file or on its command line). Err names why nothing can be imported (as
/// [`crate::io::vllm_bench::run`]).
pub fn run(
    plan: &GuideLlmPlan,
    prompts: &[(String, u32)],
    system: Option<&str>,
    point_dir: &Path,
    wall: Duration,
    api_key: Option<&str>,
) -> Result<(PathBuf, String), String> {
    if api_key.is_some() {
        return Err("the serve needs an API key, and servegate does not write one into GuideLLM's scenario file or onto its command line (where it would stay in the evidence or be readable by any process): use servegate's own client or vllm-bench".into());
    }
    let s = &plan.schedule;
    let texts = KIT.one_output_length(prompts, s.max_tokens)?;
    let python = guidellm_python()?;
    let dir = KIT.prepare_with_home(point_dir)?;
    let rows = prompts_jsonl(&texts, system, s.warmup, s.requests);
    let pf = ToolKit::write(&dir, KIT.prompts, rows.as_bytes())?;
    let report = dir.join(REPORT_FILE);
    let sc = scenario(plan, &pf, &report);
    let sf = ToolKit::write(&dir, SCENARIO_FILE, (sc.to_string() + "\n").as_bytes())?;
    let args = argv(&sf);
    let command = ToolKit::command_line(
        std::iter::once(python.display().to_string()).chain(args.iter().cloned()),
    );
    let mut cmd = Command::new(&python);
    // HOME: its caches (the datasets library's) stay in the evidence; offline: nothing is fetched.
    cmd.args(&args)
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .env("HF_DATASETS_OFFLINE", "1");
    KIT.run(cmd, &dir, wall, "guidellm run", &report)?;
    Ok((report, command))
}
