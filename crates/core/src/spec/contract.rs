//! `[contract]`: the serve's API contract (docs/contract.md). The checks the serve must pass (`expect`), those
//! it may lack (`may_lack`: an unsupported one is then no failure), a time limit per check, and one settings
//! table per check (`[contract.stop] stop = "5"`). Owns the raw shape, its validation, the validated model
//! ([`ContractSpec`]) and each check's requests ([`requests`]), which the runner sends and the judge reads
//! back by label: pure.

use serde::Deserialize;
use serde_json::{json, Value};
use toml::Spanned;

use super::{RequestSpec, SpecError, Validator, MAX_SECONDS};
use crate::vocab::ContractCheck;

/// Default time limit of one contract request, seconds (`[contract] timeout_s`): a hang fails its check
/// after this, never the others.
pub const DEFAULT_CHECK_TIMEOUT_S: f64 = 60.0;
/// Default `max_tokens` of the `max_tokens` check's long request (the count it must stop at exactly).
pub const DEFAULT_LENGTH_COUNT: u32 = 8;
/// Default `max_tokens` of the other checks' requests.
pub const DEFAULT_CHECK_MAX_TOKENS: u32 = 16;
/// Default stop string of the `stop` check (with [`STOP_PROMPT`]: the count reaches it early).
pub const DEFAULT_STOP: &str = "5";
/// The prompt of a reply that runs long (`max_tokens`, `stream_parity`, `usage`, `shape`), unless the check
/// sets `prompt`.
pub const LONG_PROMPT: &str = "Count from 1 to 200, one number per line, with nothing else.";
/// The prompt of the `stop` check, unless it sets `prompt`.
pub const STOP_PROMPT: &str = "Count from 1 to 10, separated by commas, with nothing else.";
/// The prompt of a reply that ends on its own, well under its `max_tokens` (the `max_tokens` check's
/// `short` request, the `errors` check's `after` request).
pub const SHORT_PROMPT: &str = "What is the capital of France? Answer in one word.";
/// `max_tokens` of the short request: room for a one-word answer to end with `"stop"`.
pub const SHORT_MAX_TOKENS: u32 = 32;
/// The model the `errors` check's `unknown_model` request names.
pub const UNKNOWN_MODEL: &str = "servegate-no-such-model";
/// The prompt of the `tools` check, unless it sets `prompt`.
pub const TOOL_PROMPT: &str = "What is the weather in Paris? Call the get_weather tool.";
/// The function the `tools` check declares and names in `tool_choice`.
pub const TOOL_NAME: &str = "get_weather";
/// The prompt of the `json_object` check, unless it sets `prompt` (one key: a small model under a JSON
/// grammar ends the object; asked for two, SmolLM2-135M ran on adding keys to max_tokens).
pub const JSON_OBJECT_PROMPT: &str =
    "Give the capital of France as a JSON object with the key city.";
/// The prompt of the `json_schema` check, unless it sets `prompt`.
pub const JSON_PROMPT: &str =
    "Give the capital of France and its population as a JSON object with the keys city and population.";
/// The prompt of the `seed` and `n` checks (sampled at [`SAMPLED_TEMPERATURE`]), unless they set `prompt`.
pub const SAMPLED_PROMPT: &str = "Write a short poem about a river.";
/// The temperature of the `seed` and `n` checks' requests: sampled, not greedy.
pub const SAMPLED_TEMPERATURE: f64 = 1.0;
/// The seed of the `seed` check's `first` and `second` requests (`other` sends the next one).
pub const SEED: u64 = 42;
/// `top_logprobs` of the `logprobs` check.
pub const TOP_LOGPROBS: u64 = 3;
/// The prompt of the `completions` check (a `/v1/completions` prompt), unless it sets `prompt`.
pub const COMPLETION_PROMPT: &str = "The capital of France is";
/// The input of the `embeddings` check, unless it sets `prompt`.
pub const EMBEDDING_INPUT: &str = "The capital of France is Paris.";
/// Default `max_tokens` of the `cancel` check's dropped request: long enough that finishing it would keep a
/// slot busy for seconds (512 tokens: about 10 s on the reference serve's one thread at 50 tok/s).
pub const DEFAULT_CANCEL_MAX_TOKENS: u32 = 512;
/// `max_tokens` of the `cancel` check's `baseline` and `after` requests: only their first token is judged.
pub const CANCEL_PROBE_MAX_TOKENS: u32 = 4;
/// The client drops the `cancel` check's `dropped` stream once it has read this many token chunks.
pub const CANCEL_DROP_AFTER: usize = 4;

/// The `tools` check's function parameters (a JSON Schema): one required string, `city`.
pub fn tool_parameters() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city, e.g. Paris"}},
        "required": ["city"]
    })
}

/// The `json_schema` check's schema: `city` a string and `population` an integer, both required, nothing
/// else.
pub fn json_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": false
    })
}

/// Where a contract request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    Chat,
    /// `POST /v1/completions` (the legacy text completions).
    Completions,
    /// `POST /v1/embeddings`.
    Embeddings,
    /// `GET /v1/models`.
    Models,
    /// `POST /v1/responses` (the Responses API).
    Responses,
}

impl Endpoint {
    /// The request path.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Models => "/v1/models",
            Endpoint::Responses => "/v1/responses",
        }
    }

    /// True for `GET` (no body sent), false for `POST`.
    pub fn is_get(self) -> bool {
        self == Endpoint::Models
    }
}

/// `[contract]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawContract {
    #[serde(default)]
    expect: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    may_lack: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    known_fail: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    shape: Option<RawCheck>,
    #[serde(default)]
    max_tokens: Option<RawCheck>,
    #[serde(default)]
    stop: Option<RawCheck>,
    #[serde(default)]
    usage: Option<RawCheck>,
    #[serde(default)]
    stream_parity: Option<RawCheck>,
    #[serde(default)]
    tools: Option<RawCheck>,
    #[serde(default)]
    json_object: Option<RawCheck>,
    #[serde(default)]
    json_schema: Option<RawCheck>,
    #[serde(default)]
    logprobs: Option<RawCheck>,
    #[serde(default)]
    seed: Option<RawCheck>,
    #[serde(default)]
    n: Option<RawCheck>,
    #[serde(default)]
    errors: Option<RawCheck>,
    #[serde(default)]
    completions: Option<RawCheck>,
    #[serde(default)]
    embeddings: Option<RawCheck>,
    #[serde(default)]
    models: Option<RawCheck>,
    #[serde(default)]
    cancel: Option<RawCheck>,
    #[serde(default)]
    responses: Option<RawCheck>,
}

impl RawContract {
    fn settings(&self, check: ContractCheck) -> Option<&RawCheck> {
        match check {
            ContractCheck::Shape => self.shape.as_ref(),
            ContractCheck::MaxTokens => self.max_tokens.as_ref(),
            ContractCheck::Stop => self.stop.as_ref(),
            ContractCheck::Usage => self.usage.as_ref(),
            ContractCheck::StreamParity => self.stream_parity.as_ref(),
            ContractCheck::Tools => self.tools.as_ref(),
            ContractCheck::JsonObject => self.json_object.as_ref(),
            ContractCheck::JsonSchema => self.json_schema.as_ref(),
            ContractCheck::Logprobs => self.logprobs.as_ref(),
            ContractCheck::Seed => self.seed.as_ref(),
            ContractCheck::N => self.n.as_ref(),
            ContractCheck::Errors => self.errors.as_ref(),
            ContractCheck::Completions => self.completions.as_ref(),
            ContractCheck::Embeddings => self.embeddings.as_ref(),
            ContractCheck::Models => self.models.as_ref(),
            ContractCheck::Cancel => self.cancel.as_ref(),
            ContractCheck::Responses => self.responses.as_ref(),
        }
    }
}

/// One check's settings table as written (`[contract.<check>]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    #[serde(default)]
    prompt: Option<Spanned<String>>,
    #[serde(default)]
    max_tokens: Option<Spanned<i64>>,
    #[serde(default)]
    timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    stop: Option<Spanned<String>>,
    #[serde(default)]
    log_line: Option<Spanned<String>>,
}

/// `[contract]`, validated: the checks in run order ([`ContractCheck::ALL`]'s).
#[derive(Debug, Clone, PartialEq)]
pub struct ContractSpec {
    /// Every check the gate runs, expected or allowed to be lacking, in [`ContractCheck::ALL`] order.
    pub checks: Vec<CheckSpec>,
}

impl ContractSpec {
    /// The trial names (`contract.shape`, ...), in run order.
    pub fn trial_names(&self) -> Vec<String> {
        self.checks.iter().map(|c| c.check.trial_name()).collect()
    }

    /// The check whose trial name is `name` (`contract.stop`), if the gate runs it.
    pub fn by_trial(&self, name: &str) -> Option<&CheckSpec> {
        self.checks.iter().find(|c| c.check.trial_name() == name)
    }
}

/// One check of `[contract]`, with its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckSpec {
    /// Which check.
    pub check: ContractCheck,
    /// In `expect` (unsupported fails) or in `may_lack` / `known_fail` (unsupported is its own state, no
    /// failure).
    pub expected: bool,
    /// In `known_fail`: the runtime fails it as measured (docs/contract.md); a failure is `KNOWN-FAIL` (the
    /// trial skipped with the reason), a pass fails (the list is stale).
    pub known_fail: bool,
    /// The 1-based line of its entry in `expect` or `may_lack` (annotations point there).
    pub line: usize,
    /// Time limit of each of its requests, seconds (its table's `timeout_s`, else `[contract] timeout_s`,
    /// else [`DEFAULT_CHECK_TIMEOUT_S`]).
    pub timeout_s: f64,
    /// The prompt of its main requests (its table's `prompt`, else the check's default prompt).
    pub prompt: String,
    /// `max_tokens` of its main requests (for `max_tokens`: the count it must stop at).
    pub max_tokens: u32,
    /// The stop string (`stop` only).
    pub stop: Option<String>,
    /// The serve's cancellation log line, a regex (`cancel` only: `[contract.cancel] log_line`, else the
    /// `[serve] engine` profile's, else None: the engine's detected profile may still name one).
    pub log_line: Option<String>,
}

/// One request of a check: its label (the file stem in `contract/<check>/`), where it goes, streamed or not,
/// its body.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRequest {
    /// The request's name within its check (`body`, `stream`, `no_messages`...).
    pub label: &'static str,
    /// Where it is sent.
    pub endpoint: Endpoint,
    /// Sent with `stream = true`.
    pub stream: bool,
    /// The JSON body, as sent (Null for a `GET`).
    pub body: Value,
    /// The client drops the stream (closes the connection) once it has read this many token chunks (the
    /// `cancel` check's `dropped` request); None: read to the end.
    pub drop_after: Option<usize>,
}

/// A chat body: the gate's model, system message and `extra`, greedy (temperature 0), with `stream` (and
/// `stream_options.include_usage` when streamed).
fn chat(req: &RequestSpec, prompt: &str, max_tokens: u32, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = &req.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    let mut body = serde_json::Map::new();
    body.insert("model".into(), req.served_model.clone().into());
    body.insert("messages".into(), messages.into());
    body.insert("max_tokens".into(), max_tokens.into());
    body.insert("temperature".into(), 0.into());
    body.insert("stream".into(), stream.into());
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    for (k, v) in &req.extra {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// `[request] extra` (with the profile's greedy fields) on a `/v1/completions` body, but for the keys of
/// chat's own shape (`logprobs` is a boolean in chat and a count in completions; tools, formats and
/// `stream_options` are chat's): the body's own keys win.
fn with_extra(req: &RequestSpec, mut body: serde_json::Map<String, Value>) -> Value {
    const CHAT_ONLY: [&str; 6] = [
        "logprobs",
        "top_logprobs",
        "stream_options",
        "response_format",
        "tools",
        "tool_choice",
    ];
    for (k, v) in &req.extra {
        if !CHAT_ONLY.contains(&k.as_str()) {
            body.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    Value::Object(body)
}

/// The requests of `check`, in send order. Pure: the runner sends them and the judge finds each by label.
pub fn requests(req: &RequestSpec, check: &CheckSpec) -> Vec<CheckRequest> {
    let (p, n) = (check.prompt.as_str(), check.max_tokens);
    let one = |label, stream, body| CheckRequest {
        label,
        endpoint: Endpoint::Chat,
        stream,
        body,
        drop_after: None,
    };
    match check.check {
        ContractCheck::Shape => {
            let mut bad = chat(req, p, n, false);
            bad.as_object_mut().map(|o| o.remove("messages"));
            vec![
                one("body", false, chat(req, p, n, false)),
                one("stream", true, chat(req, p, n, true)),
                one("error", false, bad),
            ]
        }
        ContractCheck::MaxTokens => vec![
            one("long", false, chat(req, p, n, false)),
            one(
                "short",
                false,
                chat(req, SHORT_PROMPT, SHORT_MAX_TOKENS, false),
            ),
        ],
        ContractCheck::Stop => {
            let stop = check.stop.clone().unwrap_or_else(|| DEFAULT_STOP.into());
            let with_stop = |stream| {
                let mut b = chat(req, p, n, stream);
                b["stop"] = json!([stop]);
                b
            };
            vec![
                one("body", false, with_stop(false)),
                one("stream", true, with_stop(true)),
            ]
        }
        ContractCheck::Usage | ContractCheck::StreamParity => vec![
            one("body", false, chat(req, p, n, false)),
            one("stream", true, chat(req, p, n, true)),
        ],
        ContractCheck::Tools => {
            let with_tools = |stream| {
                let mut b = chat(req, p, n, stream);
                b["tools"] = json!([{"type": "function", "function": {
                    "name": TOOL_NAME,
                    "description": "Get the current weather in a city",
                    "parameters": tool_parameters()
                }}]);
                b["tool_choice"] = json!({"type": "function", "function": {"name": TOOL_NAME}});
                b
            };
            vec![
                one("plain", false, chat(req, p, n, false)),
                one("named", false, with_tools(false)),
                one("stream", true, with_tools(true)),
            ]
        }
        ContractCheck::JsonObject | ContractCheck::JsonSchema => {
            let format = if check.check == ContractCheck::JsonObject {
                json!({"type": "json_object"})
            } else {
                json!({"type": "json_schema", "json_schema": {
                    "name": "capital", "strict": true, "schema": json_schema()
                }})
            };
            let mut body = chat(req, p, n, false);
            body["response_format"] = format;
            vec![
                one("plain", false, chat(req, p, n, false)),
                one("body", false, body),
            ]
        }
        ContractCheck::Logprobs => {
            let mut body = chat(req, p, n, false);
            body["logprobs"] = json!(true);
            body["top_logprobs"] = json!(TOP_LOGPROBS);
            vec![one("body", false, body)]
        }
        ContractCheck::Seed => {
            let seeded = |seed: u64| {
                let mut b = chat(req, p, n, false);
                b["temperature"] = json!(SAMPLED_TEMPERATURE);
                b["seed"] = json!(seed);
                b
            };
            vec![
                one("first", false, seeded(SEED)),
                one("second", false, seeded(SEED)),
                one("other", false, seeded(SEED + 1)),
            ]
        }
        ContractCheck::N => {
            let mut b = chat(req, p, n, false);
            b["temperature"] = json!(SAMPLED_TEMPERATURE);
            b["n"] = json!(2);
            vec![one("body", false, b)]
        }
        ContractCheck::Errors => error_requests(req),
        ContractCheck::Cancel => {
            let probe = chat(req, p, CANCEL_PROBE_MAX_TOKENS, true);
            vec![
                one("baseline", true, probe.clone()),
                CheckRequest {
                    drop_after: Some(CANCEL_DROP_AFTER),
                    ..one("dropped", true, chat(req, p, n, true))
                },
                one("after", true, probe),
            ]
        }
        ContractCheck::Responses => responses_requests(req, p, n),
        ContractCheck::Completions => completions_requests(req, p, n),
        ContractCheck::Embeddings => embeddings_requests(req, p),
        ContractCheck::Models => vec![CheckRequest {
            label: "list",
            endpoint: Endpoint::Models,
            stream: false,
            body: Value::Null,
            drop_after: None,
        }],
    }
}

/// The `errors` check's requests: four malformed ones (no messages, an unknown role, a negative
/// `max_tokens`, an unknown model), then a good one (the serve still answers after them).
fn error_requests(req: &RequestSpec) -> Vec<CheckRequest> {
    let one = |label, body| CheckRequest {
        label,
        endpoint: Endpoint::Chat,
        stream: false,
        body,
        drop_after: None,
    };
    let good = chat(req, SHORT_PROMPT, SHORT_MAX_TOKENS, false);
    let mut no_messages = good.clone();
    no_messages.as_object_mut().map(|o| o.remove("messages"));
    let mut bad_role = good.clone();
    bad_role["messages"] = json!([{"role": "wizard", "content": SHORT_PROMPT}]);
    let mut negative = good.clone();
    negative["max_tokens"] = json!(-5);
    let mut unknown = good.clone();
    unknown["model"] = json!(UNKNOWN_MODEL);
    vec![
        one("no_messages", no_messages),
        one("bad_role", bad_role),
        one("negative_max_tokens", negative),
        one("unknown_model", unknown),
        one("after", good),
    ]
}

/// The `completions` check's requests to `/v1/completions` (the legacy text endpoint): the prompt `p`
/// with `n` tokens, whole and streamed.
fn completions_requests(req: &RequestSpec, p: &str, n: u32) -> Vec<CheckRequest> {
    let body = |stream: bool| {
        let mut b = serde_json::Map::new();
        b.insert("model".into(), req.served_model.clone().into());
        b.insert("prompt".into(), p.into());
        b.insert("max_tokens".into(), n.into());
        b.insert("temperature".into(), 0.into());
        b.insert("stream".into(), stream.into());
        with_extra(req, b)
    };
    let at = |label, stream| CheckRequest {
        label,
        endpoint: Endpoint::Completions,
        stream,
        body: body(stream),
        drop_after: None,
    };
    vec![at("body", false), at("stream", true)]
}

/// The `responses` check's requests: `body` and `stream` to `/v1/responses` (the prompt `p` as `input`,
/// `max_output_tokens` `n`, greedy), then `chat`, the same prompt to the chat endpoint (the greedy text the
/// Responses API must give too).
fn responses_requests(req: &RequestSpec, p: &str, n: u32) -> Vec<CheckRequest> {
    let body = |stream: bool| {
        let mut b = serde_json::Map::new();
        b.insert("model".into(), req.served_model.clone().into());
        b.insert("input".into(), p.into());
        if let Some(s) = &req.system {
            b.insert("instructions".into(), s.clone().into());
        }
        b.insert("max_output_tokens".into(), n.into());
        b.insert("temperature".into(), 0.into());
        b.insert("stream".into(), stream.into());
        with_extra(req, b)
    };
    let at = |label, stream| CheckRequest {
        label,
        endpoint: Endpoint::Responses,
        stream,
        body: body(stream),
        drop_after: None,
    };
    vec![
        at("body", false),
        at("stream", true),
        CheckRequest {
            label: "chat",
            endpoint: Endpoint::Chat,
            stream: false,
            body: chat(req, p, n, false),
            drop_after: None,
        },
    ]
}

/// The `embeddings` check's requests to `/v1/embeddings`: the prompt `p` twice (the same vector) and a
/// batch of two inputs (two vectors, in order).
fn embeddings_requests(req: &RequestSpec, p: &str) -> Vec<CheckRequest> {
    let body = |input: Value| {
        let mut b = serde_json::Map::new();
        b.insert("model".into(), req.served_model.clone().into());
        b.insert("input".into(), input);
        Value::Object(b)
    };
    let at = |label, input| CheckRequest {
        label,
        endpoint: Endpoint::Embeddings,
        stream: false,
        body: body(input),
        drop_after: None,
    };
    vec![
        at("first", json!(p)),
        at("again", json!(p)),
        at("batch", json!([p, SHORT_PROMPT])),
    ]
}

/// The known check names, for messages: `shape, max_tokens, ...`.
pub fn known_checks() -> String {
    ContractCheck::ALL
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Validator<'_> {
    /// `[contract]`: every name in `expect` and `may_lack` a known check (else the entry's line, a
    /// did-you-mean and the known ones), none in both or twice, at least one check, settings tables only for
    /// checks the gate runs and only with the keys that check reads, time limits and counts that can be met.
    pub(super) fn contract(
        &self,
        raw: &RawContract,
        engine: Option<super::profile::Engine>,
    ) -> Result<ContractSpec, SpecError> {
        let default_timeout = match &raw.timeout_s {
            Some(t) => self.seconds(t, "contract.timeout_s")?,
            None => DEFAULT_CHECK_TIMEOUT_S,
        };
        let mut named: Vec<(ContractCheck, bool, usize)> = Vec::new();
        let mut known: Vec<ContractCheck> = Vec::new();
        for (key, list, expected) in [
            ("contract.expect", &raw.expect, true),
            ("contract.may_lack", &raw.may_lack, false),
            ("contract.known_fail", &raw.known_fail, false),
        ] {
            for entry in list.iter().flat_map(|l| l.get_ref()) {
                let name = entry.get_ref();
                let Some(check) = ContractCheck::from_name(name) else {
                    return Err(self.err(
                        entry.span(),
                        key,
                        format!(
                            "unknown contract check {name:?}{}; the known checks: {}",
                            suggestion(name),
                            known_checks()
                        ),
                    ));
                };
                if named.iter().any(|(c, _, _)| *c == check) {
                    return Err(self.err(
                        entry.span(),
                        key,
                        format!("the check `{name}` is named twice in [contract] expect / may_lack / known_fail: a check is expected, allowed to be lacking, or known to fail"),
                    ));
                }
                if key == "contract.known_fail" {
                    known.push(check);
                }
                let line = crate::error::line_col(self.text, entry.span().start).0;
                named.push((check, expected, line));
            }
        }
        if named.is_empty() {
            return Err(self.err(
                raw.expect.as_ref().map(|e| e.span()).unwrap_or(0..0),
                "contract",
                format!(
                    "[contract] runs no check: list some in `expect` (or `may_lack`); the known checks: {}",
                    known_checks()
                ),
            ));
        }
        for check in ContractCheck::ALL {
            if raw.settings(*check).is_some() && !named.iter().any(|(c, _, _)| c == check) {
                return Err(self.err(
                    0..0,
                    &format!("contract.{check}"),
                    format!("[contract.{check}] sets a check the gate does not run: add `{check}` to `expect` or `may_lack`, or drop the table"),
                ));
            }
        }
        let mut checks = Vec::new();
        for check in ContractCheck::ALL {
            let Some((_, expected, line)) = named.iter().find(|(c, _, _)| c == check) else {
                continue;
            };
            let mut spec = self.check(
                *check,
                *expected,
                *line,
                raw.settings(*check),
                default_timeout,
                engine,
            )?;
            spec.known_fail = known.contains(check);
            checks.push(spec);
        }
        Ok(ContractSpec { checks })
    }

    /// One check's settings, validated with its defaults.
    fn check(
        &self,
        check: ContractCheck,
        expected: bool,
        line: usize,
        raw: Option<&RawCheck>,
        default_timeout: f64,
        engine: Option<super::profile::Engine>,
    ) -> Result<CheckSpec, SpecError> {
        let empty = RawCheck::default();
        let raw = raw.unwrap_or(&empty);
        let key = |k: &str| format!("contract.{check}.{k}");
        let timeout_s = match &raw.timeout_s {
            Some(t) => self.seconds(t, &key("timeout_s"))?,
            None => default_timeout,
        };
        for (k, set, takes) in [
            (
                "prompt",
                raw.prompt.as_ref().map(|p| p.span()),
                takes_prompt(check),
            ),
            (
                "max_tokens",
                raw.max_tokens.as_ref().map(|p| p.span()),
                takes_max_tokens(check),
            ),
        ] {
            if let (Some(span), false) = (set, takes) {
                let why = match check {
                    ContractCheck::Errors => "sends fixed malformed requests",
                    ContractCheck::Models => "sends one GET /v1/models",
                    _ => "sends no max_tokens (an embedding has no length)",
                };
                return Err(self.err(
                    span,
                    &key(k),
                    format!("the `{check}` check {why}; it takes no `{k}`"),
                ));
            }
        }
        if let (Some(s), false) = (&raw.stop, check == ContractCheck::Stop) {
            return Err(self.err(s.span(), &key("stop"), "only [contract.stop] takes `stop`"));
        }
        if let (Some(s), false) = (&raw.log_line, check == ContractCheck::Cancel) {
            return Err(self.err(
                s.span(),
                &key("log_line"),
                "only [contract.cancel] takes `log_line`",
            ));
        }
        let log_line = match &raw.log_line {
            Some(l) => match regex::Regex::new(l.get_ref()) {
                Ok(_) if !l.get_ref().is_empty() => Some(l.get_ref().clone()),
                Ok(_) => {
                    return Err(self.err(l.span(), &key("log_line"), "must not be empty"));
                }
                Err(e) => {
                    return Err(self.err(
                        l.span(),
                        &key("log_line"),
                        format!("not a regex: {}", crate::error::OneLine(&e)),
                    ));
                }
            },
            None if check == ContractCheck::Cancel => engine
                .and_then(|e| e.profile().cancel_line)
                .map(str::to_string),
            None => None,
        };
        let stop = match &raw.stop {
            Some(s) if s.get_ref().is_empty() => {
                return Err(self.err(
                    s.span(),
                    &key("stop"),
                    "must not be empty (an empty stop string stops nothing)",
                ));
            }
            Some(s) => Some(s.get_ref().clone()),
            None if check == ContractCheck::Stop => Some(DEFAULT_STOP.into()),
            None => None,
        };
        let max_tokens = match &raw.max_tokens {
            Some(m) if (1..=4096).contains(m.get_ref()) => *m.get_ref() as u32,
            Some(m) => {
                return Err(self.err(
                    m.span(),
                    &key("max_tokens"),
                    format!(
                        "must be 1 to 4096 (keep contract requests short), got {}",
                        m.get_ref()
                    ),
                ))
            }
            None => default_max_tokens(check),
        };
        let prompt = match &raw.prompt {
            Some(p) if p.get_ref().trim().is_empty() => {
                return Err(self.err(p.span(), &key("prompt"), "must not be empty"));
            }
            Some(p) => p.get_ref().clone(),
            None => default_prompt(check).into(),
        };
        debug_assert!(timeout_s <= MAX_SECONDS);
        Ok(CheckSpec {
            check,
            expected,
            known_fail: false,
            line,
            timeout_s,
            prompt,
            max_tokens,
            stop,
            log_line,
        })
    }
}

/// Whether `[contract.<check>]` may set `prompt`: every check but `errors` and `models`.
fn takes_prompt(check: ContractCheck) -> bool {
    !matches!(check, ContractCheck::Errors | ContractCheck::Models)
}

/// Whether `[contract.<check>]` may set `max_tokens`: every check but `errors`, `models` and `embeddings`.
fn takes_max_tokens(check: ContractCheck) -> bool {
    takes_prompt(check) && check != ContractCheck::Embeddings
}

/// The check's default `max_tokens`: 8 for `max_tokens` (the count it stops at), 40 for `stop` (room to reach
/// it), 64 for `tools`, `json_object` and `json_schema` (room for a whole call or object), 8 for `logprobs`
/// and `n`, 16 for the others.
fn default_max_tokens(check: ContractCheck) -> u32 {
    match check {
        ContractCheck::MaxTokens => DEFAULT_LENGTH_COUNT,
        ContractCheck::Stop => 40,
        ContractCheck::Tools | ContractCheck::JsonObject | ContractCheck::JsonSchema => 64,
        ContractCheck::Logprobs | ContractCheck::N | ContractCheck::Completions => 8,
        ContractCheck::Cancel => DEFAULT_CANCEL_MAX_TOKENS,
        _ => DEFAULT_CHECK_MAX_TOKENS,
    }
}

/// The check's default prompt (the embeddings check's input).
fn default_prompt(check: ContractCheck) -> &'static str {
    match check {
        ContractCheck::Stop => STOP_PROMPT,
        ContractCheck::Errors | ContractCheck::Models => SHORT_PROMPT,
        ContractCheck::Tools => TOOL_PROMPT,
        ContractCheck::JsonObject => JSON_OBJECT_PROMPT,
        ContractCheck::JsonSchema => JSON_PROMPT,
        ContractCheck::Seed | ContractCheck::N => SAMPLED_PROMPT,
        ContractCheck::Completions => COMPLETION_PROMPT,
        ContractCheck::Responses => SHORT_PROMPT,
        ContractCheck::Embeddings => EMBEDDING_INPUT,
        _ => LONG_PROMPT,
    }
}

/// ` (did you mean "shape"?)` for a near miss of a known check name, else nothing.
fn suggestion(name: &str) -> String {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    ContractCheck::ALL
        .iter()
        .map(|c| {
            (
                strsim::normalized_damerau_levenshtein(&norm(name), c.name()),
                c.name(),
            )
        })
        .filter(|(score, _)| *score >= 0.6)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default()
}
