//! Detection of the newcomer engines (spec/detect_more.rs) through [`detect`]'s rule order, on a probe per
//! engine constructed from its source (spec/profile/engines.rs `sources`).

use super::detect::detect;
use super::detect_more::version_more;
use super::profile::Engine;
use super::says::ServeSays;

fn ok(b: &str) -> Option<(u16, String)> {
    Some((200, b.to_string()))
}
fn nf() -> Option<(u16, String)> {
    Some((404, "Not Found".to_string()))
}
fn models(owner: &str) -> Option<(u16, String)> {
    ok(&format!(
        r#"{{"object":"list","data":[{{"id":"m","object":"model","owned_by":"{owner}"}}]}}"#
    ))
}

/// The probe of each engine, constructed from its source (profile/engines.rs `sources`).
fn probes() -> Vec<(Engine, ServeSays)> {
    let d = ServeSays::default;
    vec![
        (
            Engine::FastFlowLm,
            ServeSays {
                api_version: ok(r#"{"version":"1.0.0"}"#),
                npu_status: ok(
                    r#"{"npu_available":true,"active_requests":0,"message":"NPU is available"}"#,
                ),
                ..d()
            },
        ),
        (
            Engine::Litellm,
            ServeSays {
                server_header: Some("uvicorn".into()),
                models: models("openai"),
                litellm_readiness: ok(
                    r#"{"status":"healthy","db":"Not connected","cache":null,"litellm_version":"1.108.7"}"#,
                ),
                ..d()
            },
        ),
        (
            Engine::Tgi,
            ServeSays {
                models: models("HuggingFaceTB/SmolLM2-135M-Instruct"),
                info: ok(
                    r#"{"model_id":"HuggingFaceTB/SmolLM2-135M-Instruct","router":"text-generation-router","version":"3.3.6","max_total_tokens":4096}"#,
                ),
                ..d()
            },
        ),
        (
            Engine::Sglang,
            ServeSays {
                models: models("sglang"),
                server_info: ok(r#"{"model_path":"qwen/qwen2.5-0.5b-instruct","version":"0.5.2"}"#),
                version: nf(),
                ..d()
            },
        ),
        (
            Engine::Lemonade,
            ServeSays {
                models: models("lemonade"),
                lemonade_health: ok(r#"{"status":"ok","version":"10.2.0","model_loaded":null}"#),
                ..d()
            },
        ),
        (
            Engine::MistralRs,
            ServeSays {
                models: models("local"),
                health: ok("OK"),
                ..d()
            },
        ),
        (
            Engine::LmStudio,
            ServeSays {
                lmstudio_models: ok(
                    r#"{"object":"list","data":[{"id":"qwen2-vl-7b-instruct","object":"model","type":"vlm","state":"not-loaded"}]}"#,
                ),
                ..d()
            },
        ),
        (
            Engine::Ollama,
            ServeSays {
                models: models("library"),
                api_version: ok(r#"{"version":"0.12.3"}"#),
                ..d()
            },
        ),
    ]
}

#[test]
fn each_engine_is_detected_by_its_own_probe_and_by_no_other() {
    for (want, s) in probes() {
        let d = detect(&s);
        assert_eq!(d.engine, Some(want), "{want}: {:?}", d.evidence);
        assert!(!d.evidence.is_empty());
    }
}

#[test]
fn fastflowlm_on_ollamas_port_is_told_from_ollama_by_its_npu_status() {
    let flm = &probes()[0].1;
    let mut no_npu = flm.clone();
    no_npu.npu_status = nf();
    assert_eq!(detect(flm).engine, Some(Engine::FastFlowLm));
    // Without /api/npu/status, /api/version alone reads as Ollama: the rule needs the NPU endpoint.
    assert_eq!(detect(&no_npu).engine, Some(Engine::Ollama));
    // And its constant /api/version is not taken as its release.
    assert_eq!(version_more(Engine::FastFlowLm, flm), None);
}

#[test]
fn versions_come_from_each_engines_own_endpoint() {
    let p = probes();
    let v = |i: usize| version_more(p[i].0, &p[i].1).map(|v| v.0);
    assert_eq!(v(1).as_deref(), Some("litellm 1.108.7"));
    assert_eq!(v(2).as_deref(), Some("tgi 3.3.6"));
    assert_eq!(v(3).as_deref(), Some("sglang 0.5.2"));
    assert_eq!(v(4).as_deref(), Some("lemonade 10.2.0"));
    assert_eq!(v(5), None, "mistral.rs has no version endpoint");
    assert_eq!(v(7).as_deref(), Some("ollama 0.12.3"));
    let (_, from) = version_more(Engine::Litellm, &p[1].1).unwrap();
    assert_eq!(from, "/health/readiness litellm_version");
}

#[test]
fn owned_by_local_without_an_ok_health_is_not_mistral_rs() {
    let s = ServeSays {
        models: models("local"),
        health: ok(r#"{"status":"ok"}"#),
        ..Default::default()
    };
    assert_eq!(detect(&s).engine, None);
}
