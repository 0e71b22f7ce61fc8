//! What a ready serve said about itself ([`ServeSays`], filled by the runner) and what detection made of it
//! ([`Detection`]), with the JSON helpers the detection rules share (spec/detect.rs, spec/detect_more.rs).
//! Pure.

use super::profile::Engine;

/// What a ready serve said about itself: each endpoint's HTTP status and body (`None` = not asked, or no
/// answer), the `Server` header of its `/v1/models` answer, and its log so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServeSays {
    /// `Server` header of the `/v1/models` answer (llama.cpp: `llama.cpp`; uvicorn serves: `uvicorn`).
    pub server_header: Option<String>,
    /// `GET /props`: llama.cpp's properties (`build_info`, `default_generation_settings`).
    pub props: Option<(u16, String)>,
    /// `GET /version`: vLLM's `{"version": "0.32.0"}` (404 on llama.cpp and llama-cpp-python).
    pub version: Option<(u16, String)>,
    /// `GET /openapi.json`: FastAPI's schema; llama-cpp-python's `info` is
    /// `{"title": "🦙 llama.cpp Python API", "version": "0.3.36"}` (its package version).
    pub openapi: Option<(u16, String)>,
    /// `GET /v1/models`: vLLM's entries say `owned_by: "vllm"`.
    pub models: Option<(u16, String)>,
    /// The serve's log so far (servegate's reference serve prints `engine xllamacpp VERSION`).
    pub log: String,
    /// `GET /health`: `transformers serve` says `{"status":"ok"}`, mistral.rs the text `OK`.
    pub health: Option<(u16, String)>,
    /// `GET /info`: TGI's `{"model_id", "router": "text-generation-router", "version", ...}`.
    pub info: Option<(u16, String)>,
    /// `GET /api/version`: Ollama's (and FastFlowLM's) `{"version": ...}`.
    pub api_version: Option<(u16, String)>,
    /// `GET /get_server_info`: SGLang's server arguments with `version`.
    pub server_info: Option<(u16, String)>,
    /// `GET /api/v1/health`: Lemonade's `{"status": "ok", "version", "model_loaded"}`.
    pub lemonade_health: Option<(u16, String)>,
    /// `GET /api/v0/models`: LM Studio's model list with `state` (`loaded` / `not-loaded`) per entry.
    pub lmstudio_models: Option<(u16, String)>,
    /// `GET /health/readiness`: the litellm proxy's `{"status": "healthy", "litellm_version", ...}`.
    pub litellm_readiness: Option<(u16, String)>,
    /// `GET /api/npu/status`: FastFlowLM's `{"npu_available", "active_requests", "message"}`.
    pub npu_status: Option<(u16, String)>,
}

/// The outcome of [`detect`]: the engine (None = none recognised) and the evidence, one phrase per fact
/// (`Server: llama.cpp header`, `/version says {"version":"0.32.0"}`), for run.json and `servegate check`.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// The engine recognised, if any.
    pub engine: Option<Engine>,
    /// What it was recognised by (or, when none was, what was seen).
    pub evidence: Vec<String>,
}

pub(crate) fn json_200(x: &Option<(u16, String)>) -> Option<serde_json::Value> {
    match x {
        Some((200, body)) => serde_json::from_str(body).ok(),
        _ => None,
    }
}

pub(crate) fn models_owned_by(s: &ServeSays) -> Vec<String> {
    json_200(&s.models)
        .and_then(|v| {
            Some(
                v.get("data")?
                    .as_array()?
                    .iter()
                    .filter_map(|m| m.get("owned_by")?.as_str().map(str::to_string))
                    .collect(),
            )
        })
        .unwrap_or_default()
}
