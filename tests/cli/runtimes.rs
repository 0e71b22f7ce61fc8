//! What goes here: the readiness rules against a scripted fake serve. The dialects on recorded captures:
//! tests/pure/runtimes.rs; the real serve: tests/live/runtimes.rs.
//!
//! The dialects of three real serves: llama.cpp's server, llama-cpp-python's server and vLLM on
//! CPU. Each difference is a test through the parser on a recorded capture of the real serve
//! (tests/data/runtimes/, made with tests/data/runtimes/capture.py; README there), and the readiness rules
//! against a scripted fake serve. Engine detection and the serve's version (spec/detect.rs) are tested on
//! the captures of each runtime's /props, /version, /openapi.json, /v1/models and Server header. The live gates are gates/reference-smoke-{lcp,vllm}.toml and
//! gates/reference-pair-vllm.toml (`cargo test --test gates`, skipped when not provisioned).

use std::time::{Duration, Instant};

use servegate::io::serve::{Serve, ServeError, ServeSpec};

// ---- readiness ------------------------------------------------------------------------------------------

#[test]
fn a_steady_404_on_the_ready_path_fails_fast_and_suggests_v1_models() {
    let dir = tempfile::tempdir().unwrap();
    let port = servegate::io::port::free_port("127.0.0.1").unwrap();
    let command = crate::fixtures::scripted_argv(
        &crate::fixtures::llama_script(),
        "127.0.0.1",
        &port.to_string(),
    );
    let mut spec = ServeSpec::new(command, port, dir.path().join("serve.log"));
    // llama-cpp-python has no /health: the scripted serve has no /no-such-path either.
    spec.ready_path = "/no-such-path".into();
    spec.ready_timeout = Duration::from_secs(120);
    let t0 = Instant::now();
    let mut serve = Serve::start(spec).unwrap();
    let err = serve.wait_ready().unwrap_err();
    let waited = t0.elapsed();
    let _ = serve.stop();
    assert!(matches!(err, ServeError::ReadyNotFound { .. }), "{err}");
    assert_eq!(err.kind(), "ready_timeout");
    let msg = err.to_string();
    assert!(
        msg.contains("answered 404") && msg.contains("ready = \"/v1/models\""),
        "{msg}"
    );
    // Protects "fails fast": far from the 120 s ready timeout (3 s of steady 404 after the fake binds).
    assert!(waited < Duration::from_secs(60), "waited {waited:?}");
    assert!(
        servegate::io::serve::is_steady_404(5, 3000.0)
            && !servegate::io::serve::is_steady_404(4, 9000.0)
            && !servegate::io::serve::is_steady_404(50, 2000.0)
    );
}

// ---- engine detection and the serve's version, from recorded captures (spec/detect.rs) ------------------
