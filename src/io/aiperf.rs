//! Runs AIPerf's `aiperf profile` for `[load] driver = "aiperf"` (docs/load.md, "Drivers"): one run of the
//! installed tool per sweep point, with the gate's schedule, in the point's `aiperf/` directory (the
//! prompts file, the tool's log and its artifact directory with `profile_export.jsonl` stay there as
//! evidence). Run through [`crate::io::tool::run_logged`]; reading its records into the point's evidence
//! is [`crate::import`]'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::io::tool::{ToolKit, ToolSchedule};
use crate::spec::load::Point;

/// AIPerf's `--artifact-dir`, under the point's [`KIT`] directory.
pub const ARTIFACTS: &str = "artifacts";
/// The per-request records AIPerf writes in its artifact directory.
pub const RECORDS_FILE: &str = "profile_export.jsonl";
/// The AIPerf release `scripts/provision-aiperf.sh` installs.
pub const AIPERF_VERSION: &str = "0.13.0";
/// AIPerf's run in a point's evidence: `aiperf/` with `prompts.jsonl` (the gate's prompts as its
/// `single_turn` custom dataset, `{"text": ...}` lines), `aiperf.log` (its stdout and stderr) and
/// [`ARTIFACTS`]; its Python `$SERVEGATE_AIPERF_PYTHON`, else `{cache}/venv-aiperf-<AIPERF_VERSION>`
/// (`scripts/provision-aiperf.sh`).
pub const KIT: ToolKit = ToolKit {
    what: "AIPerf",
    dir: "aiperf",
    prompts: "prompts.jsonl",
    log: "aiperf.log",
    package: "aiperf",
    version: AIPERF_VERSION,
    python_env: "SERVEGATE_AIPERF_PYTHON",
    provision: "scripts/provision-aiperf.sh",
};

/// The Python of the provisioned AIPerf, run as `python -m aiperf` (the venv's `aiperf` console script
/// names the temporary path the venv was built under): [`ToolKit::python`] of [`KIT`]. Err says how to
/// provision it.
pub fn aiperf_python() -> Result<PathBuf, String> {
    KIT.python()
}

/// One run of AIPerf: the sweep point's [`ToolSchedule`] alone, each field an argument: the point as
/// `--concurrency N` (closed loop) or `--request-rate R` with `--arrival-pattern poisson | constant`
/// (`constant`) and `max_concurrency` as its `--concurrency` cap (open loop); `requests` as
/// `--request-count`; `warmup` as `--warmup-request-count` (AIPerf records them as phase `warmup`); `seed`
/// as `--random-seed`; `ignore_eos` as `--extra-inputs '{"ignore_eos": true}'` (JSON, so the value is a
/// boolean); `max_tokens` as `--output-tokens-mean` (stddev 0: AIPerf takes one output length); `model`,
/// `tokenizer` and `base_url` as `--model`, `--tokenizer`, `--url`.
pub type AiPerfPlan = ToolSchedule;

/// AIPerf's arguments for `plan`, the prompts file `prompts`, the artifacts into `artifacts`: a streamed
/// chat endpoint, the gate's prompts as a `single_turn` custom dataset, no UI.
pub fn argv(plan: &AiPerfPlan, prompts: &Path, artifacts: &Path) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "profile".into(),
        "--model".into(),
        plan.model.clone(),
        "--url".into(),
        plan.base_url.clone(),
        "--endpoint-type".into(),
        "chat".into(),
        "--streaming".into(),
        "--tokenizer".into(),
        plan.tokenizer.display().to_string(),
        "--input-file".into(),
        prompts.display().to_string(),
        "--custom-dataset-type".into(),
        "single_turn".into(),
        "--output-tokens-mean".into(),
        plan.max_tokens.to_string(),
        "--output-tokens-stddev".into(),
        "0".into(),
        "--request-count".into(),
        plan.requests.to_string(),
        "--random-seed".into(),
        plan.seed.to_string(),
    ];
    if plan.warmup > 0 {
        a.extend(["--warmup-request-count".into(), plan.warmup.to_string()]);
    }
    match plan.point {
        Point::Concurrency(c) => a.extend(["--concurrency".into(), c.to_string()]),
        Point::Rate(r) => {
            a.extend([
                "--request-rate".into(),
                r.to_string(),
                "--arrival-pattern".into(),
                if plan.constant { "constant" } else { "poisson" }.into(),
            ]);
            if let Some(m) = plan.max_concurrency {
                a.extend(["--concurrency".into(), m.to_string()]);
            }
        }
    }
    if plan.ignore_eos {
        a.extend(["--extra-inputs".into(), r#"{"ignore_eos": true}"#.into()]);
    }
    a.extend([
        "--artifact-dir".into(),
        artifacts.display().to_string(),
        "--ui-type".into(),
        "none".into(),
    ]);
    a
}

/// The `single_turn` dataset of `prompts`: one `{"text": ...}` object per line.
pub fn prompts_jsonl(prompts: &[String]) -> String {
    prompts
        .iter()
        .map(|p| serde_json::json!({ "text": p }).to_string() + "\n")
        .collect()
}

/// Runs AIPerf for `plan` in the `aiperf` directory of `point_dir` ([`KIT`]) with the gate's `prompts` (text, `max_tokens`),
/// within `wall`; returns the records file and the command as run. A serve that needs an API key is
/// refused: AIPerf takes it on its command line (`--api-key`), where any process could read it. Err names
/// why nothing can be imported (as [`crate::io::vllm_bench::run`]).
pub fn run(
    plan: &AiPerfPlan,
    prompts: &[(String, u32)],
    point_dir: &Path,
    wall: Duration,
    api_key: Option<&str>,
) -> Result<(PathBuf, String), String> {
    if api_key.is_some() {
        return Err("the serve needs an API key, and servegate does not put one on AIPerf's command line (where any process could read it): use servegate's own client or vllm-bench".into());
    }
    let texts = KIT.one_output_length(prompts, plan.max_tokens)?;
    let python = aiperf_python()?;
    let dir = KIT.prepare_with_home(point_dir)?;
    let pf = ToolKit::write(&dir, KIT.prompts, prompts_jsonl(&texts).as_bytes())?;
    let artifacts = dir.join(ARTIFACTS);
    let args = argv(plan, &pf, &artifacts);
    let command = ToolKit::command_line(
        [python.display().to_string(), "-m".into(), "aiperf".into()]
            .into_iter()
            .chain(args.iter().cloned()),
    );
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "aiperf"]);
    // AIPerf 0.13.0 with HF_HUB_OFFLINE set refuses a local tokenizer path (the peers bench found it):
    // it is unset; an absolute path loads with no hub request. HOME: its caches stay in the evidence.
    cmd.args(&args)
        .current_dir(&dir)
        .env("HOME", dir.join("home"))
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("TRANSFORMERS_OFFLINE");
    let records = artifacts.join(RECORDS_FILE);
    KIT.run(cmd, &dir, wall, "aiperf profile", &records)?;
    Ok((records, command))
}
