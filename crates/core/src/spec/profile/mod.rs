//! Serve profiles: what one serve implementation ("engine") speaks, as defaults a gate inherits with
//! `[serve] engine = "llama.cpp" | "vllm" | "transformers" | ...` ([`Engine::ALL`]), and every one of which the
//! gate can override (`ready`, `clock`, `[request.extra]` fields).
//!
//! A profile is data, not behaviour: the readiness path, where the serve's own clock comes from, the
//! request fields that make greedy replies comparable across engines, the endpoints that tell the serve's
//! version, and the log lines that can prove a route. The facts behind each value are measured on the real
//! serves where they run here (scripts/provision-{reference,lcp,vllm}.sh; `transformers serve` from the vLLM
//! venv), and read from each engine's own source or docs otherwise ([`Profile::sources`], [`Tested`]); the
//! data is in `engines.rs` (docs/runtimes.md "Profiles"). Pure: no I/O.

mod engines;

use std::fmt;

/// A serve implementation servegate knows the dialect of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// llama.cpp's `llama-server` (or xllamacpp, which embeds it).
    LlamaCpp,
    /// llama-cpp-python's FastAPI server (`python -m llama_cpp.server`).
    LlamaCppPython,
    /// vLLM's OpenAI-compatible server (`python -m vllm.entrypoints.openai.api_server`).
    Vllm,
    /// Hugging Face `transformers serve` (FastAPI; loads models on demand).
    Transformers,
    /// The litellm proxy (`litellm --config ...`): a gateway; the route is its backend's.
    Litellm,
    /// SGLang's server (`python -m sglang.launch_server`).
    Sglang,
    /// Hugging Face text-generation-inference (TGI) `text-generation-launcher` / router.
    Tgi,
    /// Ollama's OpenAI-compatible endpoint (`ollama serve`, `/v1/chat/completions`).
    Ollama,
    /// LM Studio's server (`lms server start`).
    LmStudio,
    /// mistral.rs's server (`mistralrs serve`).
    MistralRs,
    /// Lemonade server (`lemonade-server serve`): a router in front of llama.cpp, FastFlowLM and others.
    Lemonade,
    /// FastFlowLM's `flm serve`: the AMD XDNA NPU serve (Ollama- and OpenAI-compatible).
    FastFlowLm,
}

/// Whether a profile's facts were measured on the real serve here, or read from its docs and source only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tested {
    /// Run on this project's machine: what ran and where the captures are.
    Live(&'static str),
    /// It cannot run here (the reason); every fact is from the [`Profile::sources`].
    DocumentedOnly(&'static str),
}

impl Tested {
    /// `tested live (...)` or `documented only (...)`, for `servegate check` and docs/runtimes.md.
    pub fn describe(self) -> String {
        match self {
            Tested::Live(what) => format!("tested live ({what})"),
            Tested::DocumentedOnly(why) => format!("documented only ({why})"),
        }
    }
}

/// Where the serve's own figures (the second witness of `[assert.rate] source = "both"`) come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeClock {
    /// The `timings` object of each reply's last chunk (llama.cpp).
    Timings,
    /// Prometheus series on `/metrics`, read before and after the run; their deltas (vLLM:
    /// `vllm:time_to_first_token_seconds`, `vllm:inter_token_latency_seconds`, `vllm:request_success_total`;
    /// SGLang's `sglang:` and TGI's `tgi_` equivalents: `evidence::serve_clock::SERIES`).
    Metrics,
    /// Only the serve's log (llama-cpp-python's `llama_perf_context_print: eval time` line): not parsed, so
    /// `source = "both"` has no serve figure to compare.
    Log,
    /// None known.
    None,
}

impl ServeClock {
    /// The gate's spelling: `timings`, `metrics`, `log`, `none`.
    pub fn name(self) -> &'static str {
        match self {
            ServeClock::Timings => "timings",
            ServeClock::Metrics => "metrics",
            ServeClock::Log => "log",
            ServeClock::None => "none",
        }
    }

    /// Parses [`ServeClock::name`]; errors name the accepted values.
    pub fn parse(s: &str) -> Result<Self, String> {
        [
            ServeClock::Timings,
            ServeClock::Metrics,
            ServeClock::Log,
            ServeClock::None,
        ]
        .into_iter()
        .find(|c| c.name() == s)
        .ok_or_else(|| format!("expected one of timings, metrics, log, none; got {s:?}"))
    }
}

/// The defaults of one engine. See [`Engine::profile`].
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The engine.
    pub engine: Engine,
    /// Readiness path polled until 200 (connection refused = still loading).
    pub ready_path: &'static str,
    /// Where the serve's own clock comes from.
    pub clock: ServeClock,
    /// Request fields sent with a greedy request (`temperature = 0`) so that replies are comparable across
    /// engines (e.g. llama-cpp-python's default `repeat_penalty` of 1.1 changes greedy text). A gate's own
    /// `[request.extra]` value for the same key wins.
    pub greedy_fields: &'static [(&'static str, f64)],
    /// Endpoints that tell the serve's version, tried in order (a JSON body; see `version_of`).
    pub version_paths: &'static [&'static str],
    /// Regex fragments of log lines that can prove a route or a compute path (for `[assert.route]`), most
    /// telling first: `servegate init` offers the lines they match in this order.
    pub route_lines: &'static [&'static str],
    /// Whether `/metrics` exists.
    pub has_metrics: bool,
    /// A regex of the log line the serve writes when a client drops a stream and it cancels the request
    /// (the `cancel` check, docs/contract.md), measured on the real serve; None: it logs none.
    pub cancel_line: Option<&'static str>,
    /// The Prometheus gauge on `/metrics` of the requests the serve is running, as (series name, a label
    /// pair the samples must carry, or ""): read after the `cancel` check, 0 shows the dropped request
    /// cancelled where no log line says so (vLLM: `vllm:num_requests_running`; its
    /// `vllm:request_success_total{finished_reason="abort"}` stays 0 for a client's disconnect, measured on
    /// 0.32.0). None: none known.
    pub cancel_gauge: Option<(&'static str, &'static str)>,
    /// The `[contract]` checks the engine does not offer, each with the word of its own docs or its
    /// measured answer (docs/contract.md "Engine profiles"): a check listed here is reported unsupported
    /// with this reason when its evidence shows the same (a clean refusal, a 404, a feature ignored).
    pub lacks: &'static [(crate::vocab::ContractCheck, &'static str)],
    /// The port the serve listens on when none is given (documented default; `None`: none or unknown).
    pub default_port: Option<u16>,
    /// How the serve counts tokens and whether (and where) a stream carries `usage`, in words.
    pub usage: &'static str,
    /// The dialect notes (docs/metrics.md, `servegate inspect`) a complete reply from this engine carries by
    /// design: a stream with exactly these is accepted, the run's `dialect:` note names them, and none of them
    /// is a cut stream (e.g. `transformers serve`: no `[DONE]`, usage on the finish chunk).
    pub dialect: &'static [crate::vocab::NoteKind],
    /// Known dialect quirks and traps, each one sentence with its evidence (the sources).
    pub quirks: &'static [&'static str],
    /// Response headers that name, per reply, where a gateway sent the request (litellm:
    /// `x-litellm-model-id`, `x-litellm-model-api-base`): per-request route evidence. Empty: none.
    pub route_headers: &'static [&'static str],
    /// A gateway (it forwards to a backend serve): its route is the backend's, read from the backend's log
    /// or [`Profile::route_headers`], never from the gateway's own start-up lines.
    pub gateway: bool,
    /// Measured here, or documented only.
    pub tested: Tested,
    /// Where each fact came from: source files at a commit, doc pages, or this repo's captures.
    pub sources: &'static [&'static str],
}

impl Engine {
    /// Every engine, in documentation order.
    pub const ALL: [Engine; 12] = [
        Engine::LlamaCpp,
        Engine::LlamaCppPython,
        Engine::Vllm,
        Engine::Transformers,
        Engine::Litellm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::Ollama,
        Engine::LmStudio,
        Engine::MistralRs,
        Engine::Lemonade,
        Engine::FastFlowLm,
    ];

    /// The gate's spelling: `llama.cpp`, `llama-cpp-python`, `vllm`, `transformers`, `litellm`, `sglang`,
    /// `tgi`, `ollama`, `lm-studio`, `mistral.rs`, `lemonade`, `fastflowlm`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::LlamaCpp => "llama.cpp",
            Engine::LlamaCppPython => "llama-cpp-python",
            Engine::Vllm => "vllm",
            Engine::Transformers => "transformers",
            Engine::Litellm => "litellm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::Ollama => "ollama",
            Engine::LmStudio => "lm-studio",
            Engine::MistralRs => "mistral.rs",
            Engine::Lemonade => "lemonade",
            Engine::FastFlowLm => "fastflowlm",
        }
    }

    /// Parses [`Engine::name`]; the error names the known engines.
    pub fn parse(s: &str) -> Result<Engine, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown engine {s:?}; known: {} (docs/runtimes.md says how to add one)",
                    Engine::ALL.map(Engine::name).join(", ")
                )
            })
    }

    /// The engine's defaults (engines.rs): measured on the real serve where it runs here, else from its
    /// docs and source ([`Profile::tested`], [`Profile::sources`]; docs/runtimes.md).
    pub fn profile(self) -> Profile {
        engines::profile(self)
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The serve's version from the body of one of [`Profile::version_paths`]: llama.cpp `/props`
/// `build_info` (`llama.cpp b11434-515e85511`), a `/version` `{"version": "0.32.0"}` (`vllm 0.32.0` when the
/// engine is known). `None` when the body says nothing of it.
pub fn version_of(engine: Option<Engine>, path: &str, body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let s = if path == "/props" {
        format!("llama.cpp {}", v.get("build_info")?.as_str()?)
    } else {
        let ver = v.get("version")?.as_str()?;
        match engine {
            Some(e) => format!("{} {ver}", e.name()),
            None => ver.to_string(),
        }
    };
    Some(s)
}

/// The effective serve settings of a gate with `[serve] engine` (the profile's defaults after the gate's
/// overrides), on one line for `servegate check`:
/// `engine vllm: ready /health, clock metrics, greedy fields {"min_p":0.0,"repetition_penalty":1.0}, version
/// from /version; tested live (...)`, with the dialect the engine speaks by design (`expected dialect
/// no_done_marker + usage_on_finish_chunk`) and, for a gateway, how to prove its route.
/// Without an engine (absent or `"auto"`), what will be detected after readiness and what the gate sets:
/// `engine auto: detected after readiness (spec/detect.rs: ...); set by the gate: ready /health, request.extra
/// {}; the detected profile sets the clock (timings when none is detected), ...`: a clock the gate does not
/// write is not listed as set by it (issue 32: `check` said `clock timings` of a gate that sets none).
pub fn effective(serve: &super::ServeSpec, request: &super::RequestSpec) -> Option<String> {
    let Some(engine) = serve.engine else {
        let greedy = request.temperature == Some(0.0);
        return Some(format!(
            "engine auto: detected after readiness (llama.cpp: Server header or /props; fastflowlm, litellm, tgi, \
             sglang, lemonade, mistral.rs, lm-studio, transformers, ollama: what only each answers; vllm: \
             /version or /v1/models owned_by; llama-cpp-python: /openapi.json title); set by the gate: ready {}, {}\
             request.extra {}; the detected profile sets {}{}and its version endpoints",
            serve.ready_path,
            if serve.clock_set {
                format!("clock {}, ", serve.clock.name())
            } else {
                String::new()
            },
            serde_json::Value::Object(request.extra.clone()),
            if serve.clock_set {
                String::new()
            } else {
                format!("the clock ({} when none is detected), ", serve.clock.name())
            },
            if greedy {
                "its greedy fields where request.extra has no such key, "
            } else {
                ""
            }
        ));
    };
    let p = engine.profile();
    let greedy: serde_json::Map<String, serde_json::Value> = p
        .greedy_fields
        .iter()
        .filter_map(|(k, _)| request.extra.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    let dialect: Vec<&str> = p.dialect.iter().map(|k| k.name()).collect();
    Some(format!(
        "engine {engine}: ready {}, clock {}, greedy fields {}, version from {}{}{}; {}",
        serve.ready_path,
        serve.clock.name(),
        serde_json::Value::Object(greedy),
        if p.version_paths.is_empty() {
            "the gate's [record] engine_version (no endpoint)".to_string()
        } else {
            p.version_paths.join(" or ")
        },
        if dialect.is_empty() {
            String::new()
        } else {
            format!(", expected dialect {}", dialect.join(" + "))
        },
        if p.gateway {
            format!(
                ", a gateway: prove the route per reply with [assert.route] header = {:?} and the backend's log",
                p.route_headers.first().copied().unwrap_or("")
            )
        } else {
            String::new()
        },
        p.tested.describe()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_by_their_gate_names_and_unknown_ones_are_named() {
        for e in Engine::ALL {
            assert_eq!(Engine::parse(e.name()), Ok(e));
        }
        let err = Engine::parse("exllamav2").unwrap_err();
        assert!(
            err.contains("\"exllamav2\"") && err.contains("fastflowlm"),
            "{err}"
        );
    }

    #[test]
    fn llama_cpp_python_is_probed_on_v1_models_and_sends_repeat_penalty_one() {
        let p = Engine::LlamaCppPython.profile();
        assert_eq!(p.ready_path, "/v1/models");
        assert!(p.greedy_fields.contains(&("repeat_penalty", 1.0)));
        assert!(!p.has_metrics);
        assert_eq!(Engine::Vllm.profile().clock, ServeClock::Metrics);
        assert_eq!(Engine::LlamaCpp.profile().clock, ServeClock::Timings);
    }

    #[test]
    fn versions_come_from_props_build_info_or_a_version_member() {
        assert_eq!(
            version_of(None, "/props", r#"{"build_info":"b11434-515e85511"}"#).as_deref(),
            Some("llama.cpp b11434-515e85511")
        );
        assert_eq!(
            version_of(Some(Engine::Vllm), "/version", r#"{"version":"0.32.0"}"#).as_deref(),
            Some("vllm 0.32.0")
        );
        assert_eq!(version_of(None, "/version", "not json"), None);
        assert_eq!(version_of(None, "/props", "{}"), None);
    }

    #[test]
    fn clock_names_round_trip_and_a_bad_one_is_refused() {
        for c in [
            ServeClock::Timings,
            ServeClock::Metrics,
            ServeClock::Log,
            ServeClock::None,
        ] {
            assert_eq!(ServeClock::parse(c.name()), Ok(c));
        }
        assert!(ServeClock::parse("prometheus").is_err());
    }
}
