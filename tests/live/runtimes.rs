//! What goes here: the real llama-cpp-python serve (skipped, passing, with `scripts/provision-lcp.sh` named,
//! when not provisioned). Recorded captures: tests/pure/runtimes.rs.
//!
//! The dialects of three real serves: llama.cpp's server, llama-cpp-python's server and vLLM on
//! CPU. Each difference is a test through the parser on a recorded capture of the real serve
//! (tests/data/runtimes/, made with tests/data/runtimes/capture.py; README there), and the readiness rules
//! against a scripted fake serve. Engine detection and the serve's version (spec/detect.rs) are tested on
//! the captures of each runtime's /props, /version, /openapi.json, /v1/models and Server header. The live gates are gates/reference-smoke-{lcp,vllm}.toml and
//! gates/reference-pair-vllm.toml (`cargo test --test gates`, skipped when not provisioned).

use std::path::PathBuf;
use std::time::Duration;

use servegate::analysis::measure::{measure, TokenSource};
use servegate::analysis::reply::parse_stream;
use servegate::io::serve::{Serve, ServeSpec};
use servegate::vocab::FailureCode;

// ---- engine detection and the serve's version, from recorded captures (spec/detect.rs) ------------------

use servegate::spec::detect::{detect, serve_version, ServeSays};
use servegate::spec::profile::Engine;

// ---- live: llama-cpp-python's dialect against the real serve (skipped when not provisioned) -------------

fn cache_dir() -> PathBuf {
    std::env::var_os("SERVEGATE_CACHE")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/servegate")
        })
}

/// The real llama-cpp-python 0.3.36 serve (ready in about 2-8 s): readiness without /health, detection and
/// version, 500 text/plain on bad JSON, an unknown model answered and echoed with no usage chunk. Skipped
/// (passing, with the reason on stderr) when scripts/provision-lcp.sh has not run.
#[test]
fn live_lcp_dialect_against_the_real_serve() {
    let cache = cache_dir();
    let python = cache.join("venv-lcp-0.3.36/bin/python");
    let model = cache.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !cache.join("provisioned/lcp").is_file() || !python.is_file() || !model.is_file() {
        eprintln!(
            "skipped: llama-cpp-python is not provisioned in {} (run scripts/provision-lcp.sh)",
            cache.display()
        );
        return;
    }
    let _slot = crate::fixtures::live::live_slot("live_lcp_dialect_against_the_real_serve");
    let dir = tempfile::tempdir().unwrap();
    let port = servegate::io::port::free_port("127.0.0.1").unwrap();
    let command: Vec<String> = [
        python.display().to_string(),
        "-m".into(),
        "llama_cpp.server".into(),
        "--model".into(),
        model.display().to_string(),
        "--model_alias".into(),
        "smollm2".into(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--n_ctx".into(),
        "2048".into(),
        "--n_threads".into(),
        "1".into(),
        "--n_threads_batch".into(),
        "1".into(),
    ]
    .into();
    let mut spec = ServeSpec::new(command, port, dir.path().join("serve.log"));
    spec.ready_path = "/v1/models".into();
    spec.ready_timeout = Duration::from_secs(180);
    let mut serve = Serve::start(spec).unwrap();
    let ready = serve.wait_ready();
    let base = format!("http://127.0.0.1:{port}");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ready.expect("ready on /v1/models");
        let sender = servegate::io::client::Sender::new(Duration::from_secs(120), None).unwrap();
        let http = sender.http();
        let t = Duration::from_secs(10);
        let get = |p: &str| servegate::io::client::get(http, &base, p, t).ok();
        // No /health: the profile's readiness path is the only one.
        assert_eq!(get("/health").map(|g| g.0), Some(404));
        // Detection and version from what it says about itself.
        let resp = http.get(format!("{base}/v1/models")).send().unwrap();
        let server = resp
            .headers()
            .get("server")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let models = Some((resp.status().as_u16(), resp.text().unwrap()));
        let says = ServeSays {
            server_header: server,
            props: get("/props"),
            version: get("/version"),
            openapi: get("/openapi.json"),
            models,
            log: String::new(),
            // The newcomers' endpoints, as the runner asks them: all 404 here, so none may fire.
            health: get("/health"),
            info: get("/info"),
            api_version: get("/api/version"),
            server_info: get("/get_server_info"),
            lemonade_health: get("/api/v1/health"),
            lmstudio_models: get("/api/v0/models"),
            litellm_readiness: get("/health/readiness"),
            npu_status: get("/api/npu/status"),
        };
        let d = detect(&says);
        assert_eq!(d.engine, Some(Engine::LlamaCppPython), "{:?}", d.evidence);
        assert_eq!(
            serve_version(d.engine, &says).map(|v| v.0).as_deref(),
            Some("llama-cpp-python 0.3.36")
        );
        // Bad JSON: 500 text/plain, a server error with the body quoted.
        let bad = http
            .post(format!("{base}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .unwrap();
        let status = bad.status().as_u16();
        let ctype = bad
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let bytes = bad.bytes().unwrap().to_vec();
        assert_eq!(
            (status, ctype.starts_with("text/plain")),
            (500, true),
            "{ctype}"
        );
        let r = servegate::analysis::reply::parse_body(&bytes, Some(status), 1.0);
        let f = r.failure().expect("a failed reply");
        assert!(
            matches!(f.code(), FailureCode::ServerError | FailureCode::HttpStatus),
            "{f}"
        );
        // An unknown model: answered and echoed, no usage chunk even when asked; /v1/models tells it apart.
        let body = serde_json::json!({
            "model": "no-such-model",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 12, "temperature": 0, "repeat_penalty": 1.0,
            "stream": true, "stream_options": {"include_usage": true}
        });
        let ex = servegate::io::client::send(&sender, &base, &body);
        let r = parse_stream(&ex.reads, ex.response.status);
        assert!(r.failure().is_none(), "{:?}", r.failure());
        assert_eq!(r.model.as_deref(), Some("no-such-model"));
        let f = measure(&r);
        assert_eq!(f.completion_tokens, None, "no usage chunk");
        assert_eq!(
            f.completion_tokens_source,
            Some(TokenSource::TokenChunkCountEstimate)
        );
        let listed = vec!["smollm2".to_string()];
        assert_eq!(
            servegate::run::runner::model_served("no-such-model", &listed),
            Some(false)
        );
    }));
    let _ = serve.stop();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
}
