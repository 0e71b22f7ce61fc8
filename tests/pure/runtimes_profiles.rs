//! The engine profiles added for newcomers (issue 32) against the real serve where it runs here:
//! `transformers serve` 5.19.0 (from the vLLM venv, SmolLM2-135M float32) and the litellm 1.108.7 proxy in
//! front of the reference serve, captured raw with curl into tests/data/runtimes/{transformers,litellm}/
//! (`NAME.hdr` the response head, `NAME.body` the body; README there).
//! Detection from what it said about itself, its stream's dialect through the parser, and the request field
//! it refuses. The other engines' profiles are tested on constructed probes in crates/core
//! (spec/detect_tests.rs, analysis/profile_quirks.rs).

use std::path::{Path, PathBuf};

use servegate::analysis::reply::parse_stream;
use servegate::io::reads::TimedRead;
use servegate::spec::detect::{detect, serve_version, ServeSays};
use servegate::spec::profile::Engine;
use servegate::vocab::NoteKind;

fn data(name: &str) -> PathBuf {
    let (dir, name) = name.split_once(':').unwrap_or(("transformers", name));
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/runtimes")
        .join(dir)
        .join(name)
}

/// A captured endpoint as the runner reads it: (status from the `HTTP/1.1 NNN` line, body).
fn endpoint(name: &str) -> Option<(u16, String)> {
    let head = std::fs::read_to_string(data(&format!("{name}.hdr"))).unwrap();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        status,
        std::fs::read_to_string(data(&format!("{name}.body"))).unwrap(),
    ))
}

fn header(name: &str, key: &str) -> Option<String> {
    std::fs::read_to_string(data(&format!("{name}.hdr")))
        .unwrap()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(key).then(|| v.trim().to_string())
        })
}

fn says() -> ServeSays {
    ServeSays {
        server_header: header("v1_models", "server"),
        models: endpoint("v1_models"),
        version: endpoint("version"),
        openapi: endpoint("openapi.json"),
        health: endpoint("health"),
        log: std::fs::read_to_string(data("serve.log")).unwrap(),
        ..Default::default()
    }
}

#[test]
fn transformers_serve_is_detected_by_its_openapi_paths_and_names_no_version() {
    let s = says();
    assert_eq!(s.server_header.as_deref(), Some("uvicorn"));
    assert_eq!(s.version.as_ref().map(|v| v.0), Some(404));
    assert_eq!(
        s.models.as_ref().map(|v| v.0),
        Some(500),
        "offline, /v1/models fails"
    );
    let d = detect(&s);
    assert_eq!(d.engine, Some(Engine::Transformers), "{:?}", d.evidence);
    assert!(d.evidence[0].contains("/load_model"), "{:?}", d.evidence);
    assert_eq!(serve_version(d.engine, &s), None);
    // Its readiness path is the one that answered 200 before any model was loaded.
    let p = Engine::Transformers.profile();
    assert_eq!(p.ready_path, "/health");
    assert_eq!(
        endpoint("health").unwrap(),
        (200, r#"{"status":"ok"}"#.into())
    );
    // Its log names the batching mode per request: the profile's route line matches it.
    let re = regex::Regex::new(p.route_lines[0]).unwrap();
    assert!(re.is_match(&s.log), "{}", s.log);
}

#[test]
fn transformers_serves_stream_without_done_is_complete_and_noted_not_cut() {
    let body = std::fs::read(data("stream.body")).unwrap();
    let r = parse_stream(
        &[TimedRead {
            recv_ms: None,
            t_ms: 0.0,
            bytes: body,
        }],
        Some(200),
    );
    assert!(!r.truncated && !r.done_seen);
    assert_eq!(r.failure(), None);
    assert_eq!(r.content, "The capital of France is Paris.");
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
    assert_eq!(r.usage.as_ref().and_then(|u| u.completion_tokens), Some(8));
    for k in Engine::Transformers.profile().dialect {
        assert!(
            r.has_note(*k),
            "{k:?} missing: {:?} {:?}",
            r.warnings,
            r.flags
        );
    }
    assert!(r.has_note(NoteKind::NoDoneMarker) && r.has_note(NoteKind::UsageOnFinishChunk));
}

#[test]
fn transformers_serve_refuses_a_non_openai_field_so_its_profile_sends_none() {
    let refused = std::fs::read_to_string(data("extra_field.body")).unwrap();
    assert!(
        refused.contains("Unexpected fields in the request") && refused.contains("repeat_penalty"),
        "{refused}"
    );
    let fields: Vec<&str> = Engine::Transformers
        .profile()
        .greedy_fields
        .iter()
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(fields, ["frequency_penalty"]);
}

// ---- the litellm proxy 1.108.7 in front of the reference serve (tests/data/runtimes/litellm/) ----------

fn parse(name: &str) -> servegate::analysis::reply::Reply {
    let (status, _) = endpoint(name).unwrap();
    let body = std::fs::read(data(&format!("{name}.body"))).unwrap();
    parse_stream(
        &[TimedRead {
            recv_ms: None,
            t_ms: 0.0,
            bytes: body,
        }],
        Some(status),
    )
}

#[test]
fn litellm_is_detected_without_its_key_by_its_readiness_and_openapi_and_versioned_by_openapi() {
    // What the runner asks, without the master key: /v1/models answers 500, not 401.
    let s = ServeSays {
        server_header: header("litellm:v1_models", "server"),
        models: endpoint("litellm:v1_models"),
        openapi: endpoint("litellm:openapi.json"),
        litellm_readiness: endpoint("litellm:health_readiness"),
        ..Default::default()
    };
    assert_eq!(s.models.as_ref().map(|m| m.0), Some(500));
    let d = detect(&s);
    assert_eq!(d.engine, Some(Engine::Litellm), "{:?}", d.evidence);
    let all = d.evidence.join("; ");
    assert!(
        all.contains(r#"/health/readiness says {"db":"Not connected","status":"healthy"}"#)
            && all.contains("LiteLLM API"),
        "{all}"
    );
    assert_eq!(
        serve_version(d.engine, &s),
        Some((
            "litellm 1.108.7".to_string(),
            "/openapi.json info.version".to_string()
        ))
    );
    // With the key its models are owned_by "openai": no rule may take that for another engine.
    let keyed = ServeSays {
        models: endpoint("litellm:v1_models_key"),
        ..Default::default()
    };
    assert_eq!(detect(&keyed).engine, None);
}

#[test]
fn litellm_names_each_replys_deployment_and_backend_and_its_stream_is_complete() {
    let p = Engine::Litellm.profile();
    for h in p.route_headers {
        assert!(header("litellm:stream", h).is_some(), "{h} missing");
    }
    assert_eq!(
        header("litellm:stream", "x-litellm-model-api-base").as_deref(),
        Some("http://127.0.0.1:18240/v1")
    );
    // The backend's Server header comes back prefixed, and litellm's version as a header.
    assert_eq!(
        header("litellm:stream", "llm_provider-server").as_deref(),
        Some("llama.cpp")
    );
    assert_eq!(
        header("litellm:stream", "x-litellm-version").as_deref(),
        Some("1.108.7")
    );
    let r = parse("litellm:stream");
    assert!(!r.truncated && r.done_seen && r.failure().is_none());
    assert_eq!(r.usage.as_ref().and_then(|u| u.completion_tokens), Some(8));
    assert!(!r.has_note(NoteKind::UsageOnFinishChunk) && !r.has_note(NoteKind::NoDoneMarker));
}

#[test]
fn litellm_says_ready_with_a_dead_upstream_whose_requests_then_fail() {
    // issue 32: readiness is the gateway's, not the backend's.
    assert_eq!(
        endpoint("litellm:dead_readiness").unwrap(),
        (
            200,
            r#"{"status":"healthy","db":"Not connected"}"#.to_string()
        )
    );
    let r = parse("litellm:dead_stream");
    let f = r
        .failure()
        .expect("a 500 from a dead upstream is a failed reply");
    assert!(
        format!("{f:?}").contains("500") || r.http_status == Some(500),
        "{f:?}"
    );
    // And no route header names a deployment on that reply: per-reply route evidence is absent.
    assert!(header("litellm:dead_stream", "x-litellm-model-id").is_none());
}
