//! What the ready serve says about itself, and what the run makes of it: the engine (detected when the gate
//! names none, its profile's defaults applied), the serve's version, the models it lists and whether the
//! model the requests ask for is one of them.

use std::time::Duration;

use crate::evidence::{EvidenceWriter, RunSummary};
use crate::io::client;
use crate::sinks::events::Step;
use crate::spec::GateSpec;
use crate::vocab::{FailureCode, ServeFailure};

pub use crate::analysis::reply::model_served;

/// The run's identification step, once the serve answers at `base_url`: asks the serve about itself
/// ([`serve_says`], with the serve log so far), detects the engine when the gate names none (a note saying
/// so; `serve.detected`), and records the serve's version, package version and models. Returns the gate
/// with the detected engine's defaults applied, when that changed anything.
pub(super) fn identify(
    gate: &GateSpec,
    http: &reqwest::blocking::Client,
    base_url: &str,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Option<GateSpec> {
    let log_so_far =
        std::fs::read_to_string(w.path(crate::evidence::layout::SERVE_LOG)).unwrap_or_default();
    let says = serve_says(http, base_url, log_so_far);
    let mut detected_gate = None;
    let engine = match gate.serve.engine {
        Some(e) => Some(e),
        None => {
            let d = crate::spec::detect::detect(&says);
            let (g, applied) = match d.engine {
                Some(e) => apply_detected(gate, e),
                None => (None, Vec::new()),
            };
            progress(&Step::Note(format!(
                "engine detected: {} ({}){}",
                d.engine.map_or("none recognised", |e| e.name()),
                d.evidence.join("; "),
                if applied.is_empty() {
                    String::new()
                } else {
                    format!("; profile defaults applied: {}", applied.join(", "))
                }
            )));
            summary.serve.detected = Some(crate::evidence::DetectedEngine {
                engine: d.engine.map(|e| e.name().to_string()),
                evidence: d.evidence,
                applied,
            });
            detected_gate = g;
            d.engine
        }
    };
    let (version, version_source) = crate::spec::detect::serve_version(engine, &says).unzip();
    summary.serve.version = version;
    summary.serve.version_source = version_source;
    summary.serve.package_version =
        crate::spec::detect::package_version(engine, &says).map(|p| p.0);
    summary.serve.models = model_ids(&says);
    if models_empty(&says) {
        let note = "models_empty: /v1/models listed no model when the serve said ready (an empty `data` list): \
                    a serve that loads its model on the first request is not ready yet, and that request's TTFT \
                    holds the load (docs/metrics.md \"Ready is not ready\")"
            .to_string();
        progress(&Step::Note(note.clone()));
        summary.notes.push(note);
    }
    detected_gate
}

/// True when `/v1/models` answered 200 with an empty `data` list (the lazy serve: no model loaded yet).
fn models_empty(says: &crate::spec::detect::ServeSays) -> bool {
    let Some((200, body)) = &says.models else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("data")?.as_array().map(Vec::is_empty))
        .unwrap_or(false)
}

/// The models the serve lists (`serve.models`) against the gate: with `[serve] expect_model`, a list without
/// it is `wrong_server_answering`; without, a requested model the serve does not list is a note
/// (`model_not_listed: ...`, printed and kept in `run.json` notes), not a failure.
pub(super) fn check_models(
    gate: &GateSpec,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Option<ServeFailure> {
    if let Some(expect) = &gate.serve.expect_model {
        if !summary
            .serve
            .models
            .iter()
            .any(|m| m.contains(expect.as_str()))
        {
            return Some(ServeFailure::new(
                FailureCode::WrongServerAnswering,
                format!(
                    "/v1/models lists {:?}, expected a model containing {expect:?}",
                    summary.serve.models
                ),
            ));
        }
    } else if model_served(&gate.request.served_model, &summary.serve.models) == Some(false) {
        // A reply's `model` only echoes the request; /v1/models is what the serve says it serves. Without
        // `expect_model` a mismatch is worth a look but not a failure (llama.cpp answers any name).
        let note = format!(
            "model_not_listed: the requests ask for {:?}; /v1/models lists {:?} (set [serve] expect_model to make this a failure)",
            gate.request.served_model, summary.serve.models
        );
        progress(&Step::Note(note.clone()));
        summary.notes.push(note);
    }
    None
}

/// What the ready serve says about itself (spec/detect.rs `ServeSays`), best effort: `/props`, `/version`,
/// `/openapi.json` and `/v1/models` (with its `Server` header), and the endpoints only one engine answers
/// (`/health`, `/info`, `/api/version`, `/get_server_info`, `/api/v1/health`, `/api/v0/models`,
/// `/health/readiness`, `/api/npu/status`; all GETs that change nothing; not asked of a serve the first ones
/// already show to be llama.cpp), each with a 5 s timeout, and `log` (the serve's log so far).
pub(super) fn serve_says(
    http: &reqwest::blocking::Client,
    base_url: &str,
    log: String,
) -> crate::spec::detect::ServeSays {
    let t = Duration::from_secs(5);
    let get = |p: &str| client::get(http, base_url, p, t).ok();
    let (server_header, models) = match http.get(format!("{base_url}/v1/models")).timeout(t).send()
    {
        Ok(resp) => {
            let h = resp
                .headers()
                .get(reqwest::header::SERVER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let st = resp.status().as_u16();
            (h, resp.text().ok().map(|b| (st, b)))
        }
        Err(_) => (None, None),
    };
    let base = crate::spec::detect::ServeSays {
        server_header,
        props: get("/props"),
        version: get("/version"),
        openapi: get("/openapi.json"),
        models,
        log,
        ..Default::default()
    };
    // llama.cpp (the reference serve) is known from these alone: it is asked nothing more.
    if crate::spec::detect::detect(&base).engine == Some(crate::spec::profile::Engine::LlamaCpp) {
        return base;
    }
    crate::spec::detect::ServeSays {
        health: get("/health"),
        info: get("/info"),
        api_version: get("/api/version"),
        server_info: get("/get_server_info"),
        lemonade_health: get("/api/v1/health"),
        lmstudio_models: get("/api/v0/models"),
        litellm_readiness: get("/health/readiness"),
        npu_status: get("/api/npu/status"),
        ..base
    }
}

/// The model ids a `/v1/models` answer lists (empty when there was none).
pub(super) fn model_ids(says: &crate::spec::detect::ServeSays) -> Vec<String> {
    let Some((200, body)) = &says.models else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            Some(
                v.get("data")?
                    .as_array()?
                    .iter()
                    .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(String::from))
                    .collect(),
            )
        })
        .unwrap_or_default()
}

/// A gate without `[serve] engine` once `engine` is detected: its profile's clock unless the gate set
/// `clock`, and its greedy-parity fields (with `temperature = 0`) unless `[request.extra]` sets the key.
/// Returns the changed gate (None when nothing changed) and what applied (`clock metrics`,
/// `repeat_penalty 1`).
fn apply_detected(
    gate: &GateSpec,
    engine: crate::spec::profile::Engine,
) -> (Option<GateSpec>, Vec<String>) {
    let p = engine.profile();
    let mut g = gate.clone();
    let mut applied = Vec::new();
    if !g.serve.clock_set && g.serve.clock != p.clock {
        g.serve.clock = p.clock;
        applied.push(format!("clock {}", p.clock.name()));
    }
    if g.request.temperature == Some(0.0) {
        for (k, v) in p.greedy_fields {
            if !g.request.extra.contains_key(*k) {
                g.request.extra.insert(k.to_string(), serde_json::json!(v));
                applied.push(format!("{k} {v}"));
            }
        }
    }
    g.serve.engine = Some(engine);
    (Some(g), applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_asked_for_is_compared_with_what_the_serve_lists() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(model_served("smollm2", &l(&[])), None);
        assert_eq!(model_served("smollm2", &l(&["smollm2"])), Some(true));
        assert_eq!(
            model_served("SmolLM2", &l(&["other", "smollm2"])),
            Some(true)
        );
        assert_eq!(
            model_served("/home/u/models/Qwen3-0.6B", &l(&["Qwen3-0.6B"])),
            Some(true)
        );
        assert_eq!(model_served("qwen3", &l(&["llama-3-8b"])), Some(false));
        assert_eq!(model_served("", &l(&["llama-3-8b"])), Some(false));
    }
}
