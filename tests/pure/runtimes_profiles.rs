//! The engine profiles added for newcomers (issue 32) against the real serve where it runs here:
//! `transformers serve` 5.19.0 (from the vLLM venv, SmolLM2-135M float32), captured raw with curl into
//! tests/data/runtimes/transformers/ (`NAME.hdr` the response head, `NAME.body` the body; README there).
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
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/runtimes/transformers")
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
