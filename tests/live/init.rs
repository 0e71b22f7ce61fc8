//! What goes here: `servegate init` on the real reference serve (llama.cpp's server via xllamacpp, started by
//! init itself), then `servegate check` and `servegate run` of the gate it wrote: PASS on the same serve.
//! Skipped (passing, with the reason on stderr) when scripts/provision-reference.sh has not run.

use std::path::PathBuf;

use crate::fixtures;

fn cache_dir() -> PathBuf {
    std::env::var_os("SERVEGATE_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/servegate")
        })
}

#[test]
fn init_on_the_reference_serve_writes_a_gate_that_runs_pass() {
    let cache = cache_dir();
    let venv = cache.join("venv-xllamacpp-2026.10.11549/.servegate-ok");
    let model = cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !venv.is_file() || !model.is_file() {
        eprintln!(
            "skipped: the reference serve is not provisioned in {} (run scripts/provision-reference.sh)",
            cache.display()
        );
        return;
    }
    let _slot =
        fixtures::live::live_slot("init_on_the_reference_serve_writes_a_gate_that_runs_pass");
    let p = fixtures::Project::new();
    let serve = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/reference-serve");
    let model = model.display().to_string();
    let serve = serve.display().to_string();
    let t0 = std::time::Instant::now();
    let out = fixtures::Out::of(p.servegate().args([
        "init",
        "--name",
        "ref-init",
        "--",
        &serve,
        "--model",
        &model,
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
    assert_eq!(out.code, 0, "{}", out.all());
    let init_s = t0.elapsed().as_secs_f64();
    let path = p.path().join("gates/ref-init.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    for want in [
        "engine = \"llama.cpp\"",
        "expect_model = \"smollm2\"",
        "system_info: n_threads = 1",
        "floor_tok_s = ",
        "[assert.known_answer]",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let check = fixtures::Out::of(p.servegate().args(["check", "gates/ref-init.toml"]));
    assert_eq!(check.code, 0, "{}", check.all());
    let run = fixtures::Out::of(p.servegate().args(["run", "gates/ref-init.toml"]));
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
        "init {init_s:.1} s, init to a passing run {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
