//! Detection and version rules of the engines added for newcomers (issue 32): each engine by what only it
//! answers, from its own source or a capture (profile/engines.rs `sources`). Called by
//! [`super::detect::detect`] after llama.cpp's rule and before vLLM's. Pure.

use super::profile::Engine;
use super::says::{json_200, models_owned_by, Detection, ServeSays};

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
    if let Some(v) = json_200(&s.litellm_readiness)
        .filter(|v| v.get("db").is_some() || v.get("litellm_version").is_some())
    {
        litellm.push(format!("/health/readiness says {v}"));
    }
    let (title, paths) = openapi_paths(s);
    if title == "LiteLLM API" {
        litellm.push("/openapi.json title \"LiteLLM API\"".into());
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
/// - litellm: `/health/readiness` with `db` (captured on 1.108.7: `{"status":"healthy","db":"Not connected"}`)
///   or `litellm_version` (its source), or an `/openapi.json` titled `LiteLLM API`;
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

/// The version of a newcomer engine and where it came from: litellm `/health/readiness` `litellm_version`
/// (its source) else `/openapi.json` `info.version` (titled `LiteLLM API`, captured on 1.108.7),
/// SGLang `/get_server_info` `version`, TGI `/info` `version`, Ollama `/api/version`, Lemonade
/// `/api/v1/health` `version` (`litellm 1.108.7`, ...). None for engines with no version endpoint
/// (`transformers serve`, LM Studio, mistral.rs) and for FastFlowLM, whose `/api/version` is a constant
/// `1.0.0` in its source (the gate's `[record] engine_version` says the release).
pub fn version_more(engine: Engine, s: &ServeSays) -> Option<(String, String)> {
    if engine == Engine::Litellm {
        if let Some(v) = member(&s.litellm_readiness, "litellm_version") {
            return Some((
                format!("litellm {v}"),
                "/health/readiness litellm_version".into(),
            ));
        }
        let v = json_200(&s.openapi)
            .filter(|v| v.pointer("/info/title").and_then(|t| t.as_str()) == Some("LiteLLM API"))?;
        let ver = v.pointer("/info/version")?.as_str()?;
        return Some((
            format!("litellm {ver}"),
            "/openapi.json info.version".into(),
        ));
    }
    let (x, path, key) = match engine {
        Engine::Sglang => (&s.server_info, "/get_server_info", "version"),
        Engine::Tgi => (&s.info, "/info", "version"),
        Engine::Ollama => (&s.api_version, "/api/version", "version"),
        Engine::Lemonade => (&s.lemonade_health, "/api/v1/health", "version"),
        _ => return None,
    };
    let v = member(x, key)?;
    Some((format!("{} {v}", engine.name()), format!("{path} {key}")))
}
