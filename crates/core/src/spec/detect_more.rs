//! Detection and version rules of the engines added for newcomers (issue 32): each engine by what only it
//! answers, from its own source or a capture (profile/engines.rs `sources`). Called by
//! [`super::detect::detect`] after llama.cpp's rule and before vLLM's. Pure.

use super::detect::{json_200, models_owned_by, Detection, ServeSays};
use super::profile::Engine;

/// A JSON string member of a 200 JSON answer.
fn member(x: &Option<(u16, String)>, key: &str) -> Option<String> {
    json_200(x)?.get(key)?.as_str().map(str::to_string)
}

/// The paths of a FastAPI `/openapi.json` answer (empty when there is none) and its title.
fn openapi_paths(s: &ServeSays) -> (String, Vec<String>) {
    let Some(v) = json_200(&s.openapi) else {
        return (String::new(), Vec::new());
    };
    let title = v
        .pointer("/info/title")
        .and_then(|t| t.as_str())
        .unwrap_or("")
        .to_string();
    let paths = v
        .get("paths")
        .and_then(|p| p.as_object())
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    (title, paths)
}

fn owned_by_any(s: &ServeSays, who: &str) -> Option<String> {
    models_owned_by(s)
        .iter()
        .any(|o| o == who)
        .then(|| format!("/v1/models entries owned_by {who:?}"))
}

/// One rule per engine, in the order tried: the evidence phrases when it holds.
fn rules(s: &ServeSays) -> [(Engine, Vec<String>); 9] {
    let mut flm = Vec::new();
    if let Some(v) = json_200(&s.npu_status).filter(|v| v.get("npu_available").is_some()) {
        flm.push(format!(
            "/api/npu/status says npu_available {}",
            v["npu_available"]
        ));
    }
    let mut litellm = Vec::new();
    if let Some(v) = member(&s.litellm_readiness, "litellm_version") {
        litellm.push(format!("/health/readiness litellm_version {v:?}"));
    }
    let mut tgi = Vec::new();
    if let Some(r) = member(&s.info, "router").filter(|r| r.contains("text-generation")) {
        tgi.push(format!("/info router {r:?}"));
    }
    let mut sglang: Vec<String> = owned_by_any(s, "sglang").into_iter().collect();
    if json_200(&s.server_info)
        .is_some_and(|v| v.get("version").is_some() && v.get("model_path").is_some())
    {
        sglang.push("/get_server_info has model_path and version".into());
    }
    let mut lemonade: Vec<String> = owned_by_any(s, "lemonade").into_iter().collect();
    if json_200(&s.lemonade_health).is_some_and(|v| v.get("model_loaded").is_some()) {
        lemonade.push("/api/v1/health has model_loaded".into());
    }
    let mistral: Vec<String> = owned_by_any(s, "local")
        .filter(|_| matches!(&s.health, Some((200, b)) if b.trim() == "OK"))
        .map(|e| format!("{e} and /health says OK"))
        .into_iter()
        .collect();
    let mut lmstudio = Vec::new();
    if json_200(&s.lmstudio_models)
        .and_then(|v| v.get("data")?.as_array()?.first()?.get("state").cloned())
        .is_some()
    {
        lmstudio.push("/api/v0/models entries have a state (loaded / not-loaded)".into());
    }
    let (title, paths) = openapi_paths(s);
    let transformers: Vec<String> = (title == "FastAPI"
        && paths.iter().any(|p| p == "/load_model")
        && paths.iter().any(|p| p == "/v1/chat/completions"))
    .then(|| {
        "/openapi.json (title \"FastAPI\") lists /load_model and /v1/chat/completions".to_string()
    })
    .into_iter()
    .collect();
    let mut ollama: Vec<String> = owned_by_any(s, "library").into_iter().collect();
    if let Some(v) = member(&s.api_version, "version") {
        ollama.push(format!("/api/version says {{\"version\":{v:?}}}"));
    }
    [
        (Engine::FastFlowLm, flm),
        (Engine::Litellm, litellm),
        (Engine::Tgi, tgi),
        (Engine::Sglang, sglang),
        (Engine::Lemonade, lemonade),
        (Engine::MistralRs, mistral),
        (Engine::LmStudio, lmstudio),
        (Engine::Transformers, transformers),
        (Engine::Ollama, ollama),
    ]
}

/// The first newcomer engine whose rule holds, with its evidence; None when none does:
/// - FastFlowLM: `/api/npu/status` with `npu_available` (it shares Ollama's port and `/api/version`);
/// - litellm: `/health/readiness` with `litellm_version`;
/// - TGI: `/info` with `router` naming `text-generation` (`text-generation-router`);
/// - SGLang: `/v1/models` owned_by `sglang`, or `/get_server_info` with `model_path` and `version`;
/// - Lemonade: `/v1/models` owned_by `lemonade`, or `/api/v1/health` with `model_loaded`;
/// - mistral.rs: `/v1/models` owned_by `local` and `/health` answering `OK`;
/// - LM Studio: `/api/v0/models` entries with a `state`;
/// - `transformers serve`: `/openapi.json` titled `FastAPI` listing `/load_model` and `/v1/chat/completions`
///   (captured on 5.19.0);
/// - Ollama: `/v1/models` owned_by `library`, or an `/api/version` `{"version"}`.
pub fn detect_more(s: &ServeSays) -> Option<Detection> {
    rules(s)
        .into_iter()
        .find(|(_, ev)| !ev.is_empty())
        .map(|(engine, evidence)| Detection {
            engine: Some(engine),
            evidence,
        })
}

/// The version of a newcomer engine and where it came from: litellm `/health/readiness` `litellm_version`,
/// SGLang `/get_server_info` `version`, TGI `/info` `version`, Ollama `/api/version`, Lemonade
/// `/api/v1/health` `version` (`litellm 1.108.7`, ...). None for engines with no version endpoint
/// (`transformers serve`, LM Studio, mistral.rs) and for FastFlowLM, whose `/api/version` is a constant
/// `1.0.0` in its source (the gate's `[record] engine_version` says the release).
pub fn version_more(engine: Engine, s: &ServeSays) -> Option<(String, String)> {
    let (x, path, key) = match engine {
        Engine::Litellm => (&s.litellm_readiness, "/health/readiness", "litellm_version"),
        Engine::Sglang => (&s.server_info, "/get_server_info", "version"),
        Engine::Tgi => (&s.info, "/info", "version"),
        Engine::Ollama => (&s.api_version, "/api/version", "version"),
        Engine::Lemonade => (&s.lemonade_health, "/api/v1/health", "version"),
        _ => return None,
    };
    let v = member(x, key)?;
    Some((format!("{} {v}", engine.name()), format!("{path} {key}")))
}

#[cfg(test)]
mod tests {
    use super::super::detect::detect;
    use super::*;

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
                    server_info: ok(
                        r#"{"model_path":"qwen/qwen2.5-0.5b-instruct","version":"0.5.2"}"#,
                    ),
                    version: nf(),
                    ..d()
                },
            ),
            (
                Engine::Lemonade,
                ServeSays {
                    models: models("lemonade"),
                    lemonade_health: ok(
                        r#"{"status":"ok","version":"10.2.0","model_loaded":null}"#,
                    ),
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
}
