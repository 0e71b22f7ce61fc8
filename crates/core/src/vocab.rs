//! The closed sets of servegate's domain, typed: assertion kinds, pair roles, failure codes, notes (warnings
//! and flags), and the one **metric registry** from which unit tables, verdict units, record metric names and
//! pair metrics derive. The bottom layer: it imports nothing of the crate.
//!
//! Each enum has a stable wire name (its serde name, and what evidence, results JSON and verdict lines show
//! today) and a `Display` giving it. Matches on these enums are exhaustive everywhere (no `_ =>` arm), so adding
//! a case makes the compiler point at every place that must learn it (docs/architecture.md, "Recipe: add an assertion kind").

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares a closed enum with its wire names, `ALL`, `name()`, `from_name()` and `Display`.
macro_rules! closed_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident { $($(#[$vm:meta])* $var:ident = $wire:literal,)+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $wire)] $var,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$var,)+];

            /// The stable wire name (serde name, and the text evidence, JSON and verdict lines use).
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$var => $wire,)+
                }
            }

            /// The wire name (as [`Self::name`]).
            pub const fn as_str(self) -> &'static str {
                self.name()
            }

            /// The value with this wire name, or None.
            pub fn from_name(s: &str) -> Option<$name> {
                match s {
                    $($wire => Some($name::$var),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.name() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.name() == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.name() == other.as_str()
            }
        }
    };
}

closed_enum! {
    /// An assertion a gate can declare (`[assert.<name>]`), in report order. The wire name is the gate key
    /// and the trial name (`reference-smoke::rate`).
    pub enum AssertionKind {
        /// `[assert.route]`: regexes on the serve log prove the fast code path.
        Route = "route",
        /// `[assert.rate]`: median decode rate at least a floor (tok/s).
        Rate = "rate",
        /// `[assert.first_token]`: median TTFT at most a limit (ms).
        FirstToken = "first_token",
        /// `[assert.tpot]`: median TPOT at most a limit (ms).
        Tpot = "tpot",
        /// `[assert.ready]`: the serve's start-up time (spawn to ready) at most a limit (ms).
        Ready = "ready",
        /// `[assert.memory]`: the serve's peak resident memory over its processes at most a limit (MiB).
        Memory = "memory",
        /// `[assert.cpu]`: the serve's CPU per completion token over the judged requests at most a limit
        /// (ms/token): a second route check where the fast route runs off the host CPU.
        Cpu = "cpu",
        /// `[assert.sample.NAME]`: every value of a `[[sample]]` sampler within `min` / `max`; named per
        /// sampler (`sample.<name>`), like the contract checks.
        Sample = "sample",
        /// `[assert.content]`: every reply has sane content.
        Content = "content",
        /// `[assert.known_answer]`: replies match a regex.
        KnownAnswer = "known_answer",
        /// `[assert.ratio]` (pair gates): theirs / ours of a metric's medians within bounds.
        Ratio = "ratio",
        /// `[assert.first_token_ratio]` (pair gates): theirs / ours of the TTFT medians within bounds, beside a
        /// decode `ratio` (a pair ticket states both).
        FirstTokenRatio = "first_token_ratio",
        /// `[assert.same_answers]` (pair gates): both runtimes give the same text to each prompt.
        SameAnswers = "same_answers",
        /// `[assert.drift]`: greedy answers against a blessed baseline's, judged with logprobs.
        Drift = "drift",
        /// A load gate's verdicts (`[assert.latency]`, `throughput`, `goodput`, `errors`, `consistency`,
        /// per sweep point: `spec::load`, `judge::load`); named per point, e.g. `[c=16]::ttft_p95`.
        Load = "load",
        /// `[assert.regression]`: a metric's change against a stored or interleaved baseline, with its
        /// interval (docs/regression.md).
        Regression = "regression",
        /// `[contract]`: the serve's API contract, one verdict per check (`contract.shape`, ...; docs/contract.md);
        /// named per check like the load verdicts.
        Contract = "contract",
    }
}

impl AssertionKind {
    /// True when it needs a streamed reply (token arrival times): the figure assertions on replies (not the
    /// serve's footprint).
    pub const fn needs_stream(self) -> bool {
        self.metric().is_some() && !self.footprint()
    }

    /// True for the assertions on the serve's footprint (`ready`, `memory`, `cpu`): one value per run, read
    /// from `run.json` `serve.ready_ms` and `serve.footprint`, not from the replies' timings.
    pub const fn footprint(self) -> bool {
        matches!(
            self,
            AssertionKind::Ready | AssertionKind::Memory | AssertionKind::Cpu
        )
    }

    /// True when a pair gate may declare it (the others judge one serve's figures or log).
    pub const fn in_pair_gate(self) -> bool {
        match self {
            AssertionKind::Content
            | AssertionKind::KnownAnswer
            | AssertionKind::Ratio
            | AssertionKind::FirstTokenRatio
            | AssertionKind::Regression
            | AssertionKind::SameAnswers => true,
            AssertionKind::Route
            | AssertionKind::Rate
            | AssertionKind::FirstToken
            | AssertionKind::Tpot
            | AssertionKind::Ready
            | AssertionKind::Memory
            | AssertionKind::Cpu
            | AssertionKind::Drift
            | AssertionKind::Load
            | AssertionKind::Sample
            | AssertionKind::Contract => false,
        }
    }

    /// The metric a figure assertion compares with its bound (median against floor or limit), or None for
    /// the assertions that judge text or logs. `ratio` compares a metric chosen in the gate: None here.
    pub const fn metric(self) -> Option<Metric> {
        match self {
            AssertionKind::Rate => Some(Metric::DecodeRate),
            AssertionKind::FirstToken => Some(Metric::Ttft),
            AssertionKind::Tpot => Some(Metric::Tpot),
            AssertionKind::Ready => Some(Metric::ReadyMs),
            AssertionKind::Memory => Some(Metric::ServeRssPeak),
            AssertionKind::Cpu => Some(Metric::ServeCpuPerToken),
            AssertionKind::Route
            | AssertionKind::Content
            | AssertionKind::KnownAnswer
            | AssertionKind::Ratio
            | AssertionKind::FirstTokenRatio
            | AssertionKind::SameAnswers
            | AssertionKind::Drift
            | AssertionKind::Load
            | AssertionKind::Regression
            | AssertionKind::Sample
            | AssertionKind::Contract => None,
        }
    }
}

closed_enum! {
    /// A check of the serve's API contract (`[contract] expect` / `may_lack`), in run and report order; its
    /// verdict and trial are `contract.<name>` (`reference-smoke::contract.shape`). Each rule: docs/contract.md.
    pub enum ContractCheck {
        /// Every body, stream chunk and error body has the OpenAI object's fields and types (JSON Schema).
        Shape = "shape",
        /// A long answer stops at exactly `max_tokens` with `finish_reason "length"`; a short one ends `"stop"`.
        MaxTokens = "max_tokens",
        /// A stop string is honoured: never in the text, `finish_reason "stop"`.
        Stop = "stop",
        /// Usage adds up (prompt + completion = total), matches the stream, and `include_usage` is honoured.
        Usage = "usage",
        /// Greedy streamed and non-streamed replies give the same text, finish_reason and usage.
        StreamParity = "stream_parity",
        /// A function named by `tool_choice` is called: `tool_calls` with an id, type `function`, its name and
        /// JSON arguments valid against its parameters, `finish_reason "tool_calls"`; streamed deltas reassemble
        /// to the same call.
        Tools = "tools",
        /// `response_format` `json_object`: the content parses as a JSON object.
        JsonObject = "json_object",
        /// `response_format` `json_schema`: the content parses and validates against the schema.
        JsonSchema = "json_schema",
        /// `logprobs` + `top_logprobs`: one entry per token, logprobs ≤ 0, k sorted alternatives, the chosen
        /// token consistent with its place among them.
        Logprobs = "logprobs",
        /// The same `seed` at temperature > 0 gives the same text (best effort in the reference: may-lack).
        Seed = "seed",
        /// `n = 2` gives two choices, indexed 0 and 1.
        N = "n",
        /// Malformed requests get a 4xx with the error shape, and the serve answers the next request.
        Errors = "errors",
        /// The client drops a stream mid-reply: the serve stays healthy and frees the slot (the next request's
        /// first token within a bound of an unloaded one; the engine's cancellation log line where it has one).
        Cancel = "cancel",
        /// The legacy `/v1/completions`: the text completion object, streamed and not, the same greedy text.
        Completions = "completions",
        /// `/v1/embeddings`: the embedding list object, one dimension, repeatable, a batch indexed in order.
        Embeddings = "embeddings",
        /// `/v1/responses` (the Responses API): the response object, its output text, streamed events
        /// (created, output_text deltas, completed) giving the same text.
        Responses = "responses",
        /// `GET /v1/models`: the model list object, listing the gate's served model.
        Models = "models",
    }
}

impl ContractCheck {
    /// The verdict's and trial's name: `contract.<name>`.
    pub fn trial_name(self) -> String {
        format!("contract.{}", self.name())
    }
}

closed_enum! {
    /// The role of an arm of a pair gate.
    pub enum Role {
        /// The runtime under test.
        Ours = "ours",
        /// The runtime compared against.
        Theirs = "theirs",
    }
}

closed_enum! {
    /// Why a request, a reply or a serve failed: the `name` of a `name: detail` failure text. Reply failures
    /// are [`FailureCode::is_reply`]; the others are the serve's or the run's (`run.json` `serve.failure`,
    /// `pair.json` `failure`).
    pub enum FailureCode {
        /// The request exceeds the model's context (any serve's wording).
        ContextExceeded = "context_exceeded",
        /// The serve rejected the request as invalid.
        ValidationError = "validation_error",
        /// The serve reported an error after at least one token chunk.
        ErrorMidStream = "error_mid_stream",
        /// An error body with a 2xx status.
        ServerError = "server_error",
        /// HTTP status ≥ 400 (the status is in `http_status`). Older evidence and results call it
        /// `http_error`; they still read as this code.
        #[serde(alias = "http_error")]
        HttpStatus = "http_status",
        /// An error event inside a stream before any token.
        ErrorInStream = "error_in_stream",
        /// The connection failed or timed out (the client's error).
        Transport = "transport",
        /// The stream ended without finish_reason and `[DONE]`, or inside an event.
        TruncatedStream = "truncated_stream",
        /// The JSON body was cut.
        TruncatedBody = "truncated_body",
        /// The body is not a chat-completion JSON document.
        UnparseableBody = "unparseable_body",
        /// A streamed request's 2xx reply is no SSE stream and no JSON document: an HTML page (a proxy's
        /// error page), other text; named for what it is, with its Content-Type.
        NotAnEventStream = "not_an_event_stream",
        /// A dispatched event could not be read as a chunk.
        MalformedEvent = "malformed_event",
        /// The response body passed the client's cap; only a prefix was kept.
        BodyCapped = "body_capped",
        /// A line that looked meant to carry `data:` but an SSE client ignores it.
        MisnamedField = "misnamed_field",
        /// Invalid UTF-8 in the stream.
        InvalidUtf8 = "invalid_utf8",
        /// The serve ended the reply as aborted, cancelled, errored or filtered (`finish_reason` `abort`,
        /// `error`, `cancelled`, `content_filter`, ...): what came is not the model's whole answer.
        AbnormalFinish = "abnormal_finish",
        /// The reply's logprobs cannot come from a probability distribution (a logprob above 0, or a position's
        /// tokens adding up to more than probability 1: [`crate::analysis::logprobs::impossible`]).
        ImpossibleLogprobs = "impossible_logprobs",
        /// The serve process exited while the run was under way.
        ServerExitedDuringRun = "server_exited_during_run",
        /// The serve died of a crash signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) when it was stopped.
        ServerCrashedAtStop = "server_crashed_at_stop",
        /// The serve process exited before it became ready.
        ServerExitedBeforeReady = "server_exited_before_ready",
        /// The serve's port was taken.
        PortInUse = "port_in_use",
        /// The serve command could not be started.
        SpawnFailed = "spawn_failed",
        /// Another server answered on the serve's port.
        WrongServerAnswering = "wrong_server_answering",
        /// The model the request asks for is not one the serve's `/v1/models` lists (a reply's `model` field
        /// only echoes the request, so it proves nothing): no figure from such a reply is published.
        ModelNotServed = "model_not_served",
        /// A pair's model file changed while the arms ran.
        ModelChangedDuringRun = "model_changed_during_run",
        /// The gate's `setup` step failed.
        SetupFailed = "setup_failed",
        /// The serve did not answer its ready path in time.
        ReadyTimeout = "ready_timeout",
        /// The run passed `[request] run_timeout_s`.
        RunTimeout = "run_timeout",
        /// The API key's environment variable is unsafe to use.
        ApiKeyUnsafe = "api_key_unsafe",
        /// A pair whose two arms load different model files.
        PairModelMismatch = "pair_model_mismatch",
        /// A pair's model file could not be read to hash it before the first arm (`model_file_unreadable:
        /// model file PATH: the OS error`); nothing was started.
        ModelFileUnreadable = "model_file_unreadable",
        /// The gate's `[hold]` was held by another run for all of `wait_s` (`hold_timeout: LOCK is held by
        /// ...`); nothing was started.
        HoldTimeout = "hold_timeout",
        /// The gate's `[hold]` lock file could not be created, opened or locked (`hold: cannot open ...`);
        /// nothing was started.
        HoldUnavailable = "hold",
        /// `[serve] api_key_env` names an environment variable that is not set (or empty); the serve was
        /// not started.
        ApiKeyMissing = "api_key_missing",
        /// The HTTP client for the requests could not be built (its TLS backend); the serve was not started.
        HttpClient = "http_client",
        /// `[serve] port = 0` and no free port could be had on the serve's host; the serve was not started.
        NoFreePort = "no_free_port",
        /// An `https://` serve presented a certificate servegate does not trust (webpki roots only); refused
        /// at the first probe.
        TlsRefused = "tls_refused",
        /// The serve spec the runner built cannot be used (empty command, bad host or ready path); nothing
        /// was spawned (`io::serve::ServeError::InvalidSpec`).
        InvalidSpec = "invalid_spec",
        /// The serve log could not be opened; nothing was spawned.
        LogOpenFailed = "log_open_failed",
        /// The readiness probe's HTTP client could not be built; nothing was spawned.
        ProbeClientFailed = "probe_client_failed",
        /// A stop signal was being handled when the serve was to start: it was not started (or was killed at
        /// once).
        ShuttingDown = "shutting_down",
        /// A load gate's prompts (`[load] dataset`) could not be read; nothing was sent.
        LoadDataset = "load_dataset",
        /// A load gate's client could not be built; nothing was sent.
        LoadClient = "load_client",
    }
}

impl FailureCode {
    /// The code of a failure as evidence records it (`run.json` `serve.failure`, `pair.json` `failure`: the
    /// wire form `code: detail` or `code (detail)`), or None when the text names no known code. This is the
    /// one reader of that wire form; code decides on the value it returns, never on the text.
    pub fn of_recorded(text: &str) -> Option<FailureCode> {
        let end = text.find([':', ' ', '(']).unwrap_or(text.len());
        FailureCode::from_recorded_name(&text[..end])
    }

    /// [`Self::from_name`], also reading the names older evidence used (`http_error`, now `http_status`).
    pub fn from_recorded_name(name: &str) -> Option<FailureCode> {
        match name {
            "http_error" => Some(FailureCode::HttpStatus),
            _ => FailureCode::from_name(name),
        }
    }

    /// True for the failures of one reply (`Reply::failure`, `judge::request_failure`).
    pub const fn is_reply(self) -> bool {
        match self {
            FailureCode::ContextExceeded
            | FailureCode::ValidationError
            | FailureCode::ErrorMidStream
            | FailureCode::ServerError
            | FailureCode::HttpStatus
            | FailureCode::ErrorInStream
            | FailureCode::Transport
            | FailureCode::TruncatedStream
            | FailureCode::TruncatedBody
            | FailureCode::UnparseableBody
            | FailureCode::NotAnEventStream
            | FailureCode::BodyCapped
            | FailureCode::MalformedEvent
            | FailureCode::MisnamedField
            | FailureCode::InvalidUtf8
            | FailureCode::AbnormalFinish
            | FailureCode::ImpossibleLogprobs => true,
            FailureCode::ServerExitedDuringRun
            | FailureCode::ServerCrashedAtStop
            | FailureCode::ServerExitedBeforeReady
            | FailureCode::PortInUse
            | FailureCode::SpawnFailed
            | FailureCode::WrongServerAnswering
            | FailureCode::ModelNotServed
            | FailureCode::ModelChangedDuringRun
            | FailureCode::SetupFailed
            | FailureCode::ReadyTimeout
            | FailureCode::RunTimeout
            | FailureCode::ApiKeyUnsafe
            | FailureCode::PairModelMismatch
            | FailureCode::ModelFileUnreadable
            | FailureCode::HoldTimeout
            | FailureCode::HoldUnavailable
            | FailureCode::ApiKeyMissing
            | FailureCode::HttpClient
            | FailureCode::NoFreePort
            | FailureCode::TlsRefused
            | FailureCode::InvalidSpec
            | FailureCode::LogOpenFailed
            | FailureCode::ProbeClientFailed
            | FailureCode::ShuttingDown
            | FailureCode::LoadDataset
            | FailureCode::LoadClient => false,
        }
    }
}

/// A failure: its code and what happened. `Display` gives the text verdicts quote: `code: detail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What kind of failure.
    pub code: FailureCode,
    /// The detail after `code: ` (serve text in it already escaped).
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

/// Why a serve or a run failed (`run.json` `serve.failure`, `pair.json` `failure`): its code and what happened.
/// The wire form is the text [`Display`](fmt::Display) gives, as evidence has always recorded it: `code:
/// detail`, or `code (detail ...)...` when the detail starts with `(` (`server_exited_during_run (exit status
/// 1, 2.0 s after ready): cause`), or the bare code when there is no detail. [`ServeFailure::parse`] reads it
/// back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeFailure {
    /// What kind of failure (never [`FailureCode::is_reply`]).
    pub code: FailureCode,
    /// What happened, after the code and its separator (serve text in it verbatim; the privacy rule and the
    /// escaping apply where it is written and printed).
    pub detail: String,
}

impl ServeFailure {
    /// A failure with this code and detail.
    pub fn new(code: FailureCode, detail: impl Into<String>) -> ServeFailure {
        ServeFailure {
            code,
            detail: detail.into(),
        }
    }

    /// Reads the wire form back: Some when `text` starts with a known code (older names as
    /// [`FailureCode::from_recorded_name`]) followed by `: `, ` (` or nothing; None otherwise (a failure text
    /// servegate did not write, or an interruption: `interrupted by SIGTERM: ...`).
    pub fn parse(text: &str) -> Option<ServeFailure> {
        let end = text.find([':', ' ', '(']).unwrap_or(text.len());
        let (name, rest) = text.split_at(end);
        let code = FailureCode::from_recorded_name(name)?;
        let detail = if rest.is_empty() {
            ""
        } else if let Some(d) = rest.strip_prefix(": ") {
            d
        } else if rest.starts_with(" (") {
            &rest[1..]
        } else {
            return None;
        };
        Some(ServeFailure::new(code, detail))
    }
}

impl fmt::Display for ServeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            f.write_str(self.code.name())
        } else if self.detail.starts_with('(') {
            write!(f, "{} {}", self.code, self.detail)
        } else {
            write!(f, "{}: {}", self.code, self.detail)
        }
    }
}

/// One reply's failures, first one first: `Reply::failure`. `Display` (and `Deref` to `str`) give today's
/// text, the parts joined with `; `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failures {
    parts: Vec<Failure>,
    text: String,
}

impl Failures {
    /// The failures of `parts` (first one first), or None when there is none.
    pub fn new(parts: Vec<Failure>) -> Option<Failures> {
        if parts.is_empty() {
            return None;
        }
        let text = parts
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        Some(Failures { parts, text })
    }

    /// The parts, first one first (never empty).
    pub fn parts(&self) -> &[Failure] {
        &self.parts
    }

    /// The first failure's code (the failure's name).
    pub fn code(&self) -> FailureCode {
        self.parts[0].code
    }

    /// True when any part has this code.
    pub fn has(&self, code: FailureCode) -> bool {
        self.parts.iter().any(|f| f.code == code)
    }
}

impl std::ops::Deref for Failures {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

closed_enum! {
    /// Why a reply's content is not sane (the judge's `content` check), as `servegate inspect` names it.
    pub enum ContentProblem {
        /// No content at all.
        ContentEmpty = "content_empty",
        /// Content of whitespace only.
        ContentWhitespaceOnly = "content_whitespace_only",
        /// Empty content because every completion token went to reasoning.
        ContentEmptyAllTokensInReasoning = "content_empty_all_tokens_in_reasoning",
        /// One character or piece repeated (a degenerate stream).
        DegenerateOutput = "degenerate_output",
        /// Control characters in the content (ESC opening a terminal escape sequence, BEL, NUL...; TAB, LF
        /// and CR aside): not text a reader can be shown.
        ControlCharacters = "control_characters",
        /// The gate turned thinking off (`chat_template_kwargs.enable_thinking = false`) and the reply still
        /// thinks (reasoning in its own field or as markup in content).
        ThinkingNotOff = "thinking_not_off",
    }
}

closed_enum! {
    /// The kind of a warning or flag on a reply or its figures. Wire form: see [`Note`].
    pub enum NoteKind {
        /// The serve reported no usage.
        UsageMissing = "usage_missing",
        /// `[DONE]` arrived but no chunk had a finish_reason.
        FinishReasonMissing = "finish_reason_missing",
        /// finish_reason seen, no `[DONE]`.
        NoDoneMarker = "no_done_marker",
        /// Bytes after `[DONE]`, not read.
        DataAfterDone = "data_after_done",
        /// EOF inside the `[DONE]` event, taken as `[DONE]`.
        UnterminatedLastEvent = "unterminated_last_event",
        /// Lines with a field SSE ignores.
        UnknownSseFields = "unknown_sse_fields",
        /// A body with no SSE event that is one JSON document.
        NotAnSseStream = "not_an_sse_stream",
        /// The body was capped when recorded.
        BodyCapped = "body_capped",
        /// A chunk carried more than one token.
        MultiTokenChunks = "multi_token_chunks",
        /// A leading byte-order mark was stripped.
        LeadingBomStripped = "leading_bom_stripped",
        /// finish_reason `length`.
        TruncatedByMaxTokens = "truncated_by_max_tokens",
        /// An error inside a 200 stream.
        ErrorInside200Stream = "error_inside_200_stream",
        /// An error body with a 2xx status.
        ErrorInside200Body = "error_inside_200_body",
        /// A reported completion-token count more than the stream could carry.
        ImplausibleCompletionTokens = "implausible_completion_tokens",
        /// More token chunks, or a reported completion-token count, than the request's `max_tokens` (detail:
        /// which counts, and the limit): the serve ignored the limit or miscounts (`judge::max_tokens`).
        OverMaxTokens = "over_max_tokens",
        /// llama.cpp served part of the prompt from its cache (detail `c/total: ...`).
        PromptCacheHit = "prompt_cache_hit",
        /// Client and serve decode rates far apart (the serve's own clock disagrees with the client's:
        /// a client-bound measurement, a buffering proxy, fake streaming). Was `client_server_decode_mismatch`.
        ClientServerDisagree = "client_server_disagree",
        /// Tool calls present but `finish_reason` is `stop` (OpenAI sends `tool_calls`): clients that
        /// branch on the finish reason miss the calls.
        ToolCallsWithFinishStop = "tool_calls_with_finish_stop",
        /// Reasoning markup (`<think>…</think>`) at the start of `content`: moved to reasoning, content
        /// judged without it (detail: the tag and its length).
        ReasoningInContent = "reasoning_in_content",
        /// `usage.completion_tokens_details.reasoning_tokens` above `completion_tokens` (it is a part of it).
        ImplausibleReasoningTokens = "implausible_reasoning_tokens",
        /// Named SSE events (`event: tool.progress`; any name but `message` and `error`) whose data is no chat
        /// chunk were skipped: not chunks, not parse errors, never the first event (detail: how many, which
        /// names). WHATWG: a browser's `onmessage` never sees them.
        NamedEventsIgnored = "named_events_ignored",
        /// The serve sent a raw `error:` line (no SSE field; llama.cpp before PR #16109): read as the serve's
        /// error, though a spec client drops the line.
        NonstandardSseErrorField = "nonstandard_sse_error_field",
        /// The serve sent an event named `error` (`event: error`): read as the serve's error.
        SseErrorEvent = "sse_error_event",
        /// The stream reads differently in the WHATWG spec (browsers) and the OpenAI SDKs (openai-python,
        /// openai-node); the reply is judged as the SDKs deliver it and the detail says where they differ.
        SseClientDivergence = "sse_client_divergence",
        /// The reply's `model` field is the model the request asked for, which the serve's `/v1/models` does
        /// not list: the field only echoes the request and is no proof of identity (case 36).
        ResponseModelEchoesRequest = "response_model_echoes_request",
        /// The stream's `usage` object came on the chunk carrying `finish_reason` (transformers serve), not on
        /// a chunk of its own with `choices: []` after it as the OpenAI API's `stream_options.include_usage`
        /// describes: a dialect fact, read the same (last usage wins), reported so serves can be compared.
        UsageOnFinishChunk = "usage_on_finish_chunk",
        /// Terminal escape sequences (ANSI colour) were removed from the serve log before the route regexes
        /// read it (detail: how many); the raw bytes stay in `serve.log` (case 38).
        LogAnsiStripped = "log_ansi_stripped",
        /// A reply failure repeated as a warning (`truncated_stream: ...`): its detail is the failure text
        /// after the name, and [`Note::failure`] its code.
        Failed = "failed",
        /// A note this version does not know (older or newer evidence): its whole text is its detail, kept
        /// as read so old files still load and show what they said.
        Unrecognised = "unrecognised",
    }
}

/// A warning or flag: its kind and an optional detail. Wire form (evidence, inspect output, results): the
/// string `name`, `name: detail`, or for [`NoteKind::PromptCacheHit`] `name detail`; a
/// [`NoteKind::Failed`] note is its failure's text (`truncated_stream: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// What kind of note.
    pub kind: NoteKind,
    /// The failure a [`NoteKind::Failed`] note repeats.
    pub failure: Option<FailureCode>,
    /// The text after the name and its separator, if any.
    pub detail: Option<String>,
}

impl Note {
    /// A note without detail.
    pub fn flag(kind: NoteKind) -> Note {
        Note {
            kind,
            failure: None,
            detail: None,
        }
    }

    /// A note with a detail.
    pub fn new(kind: NoteKind, detail: impl Into<String>) -> Note {
        Note {
            kind,
            failure: None,
            detail: Some(detail.into()),
        }
    }

    /// A reply's failures repeated as a note: named by the first, its detail the rest of their text.
    pub fn of_failures(f: &Failures) -> Note {
        let mut detail = f.parts[0].detail.clone();
        for p in &f.parts[1..] {
            detail.push_str(&format!("; {p}"));
        }
        Note {
            kind: NoteKind::Failed,
            failure: Some(f.code()),
            detail: Some(detail),
        }
    }

    /// Its name as shown: the kind's wire name, or a failed note's failure code.
    pub fn name(&self) -> &'static str {
        match (self.kind, self.failure) {
            (NoteKind::Failed, Some(c)) => c.name(),
            (k, _) => k.name(),
        }
    }

    /// Reads the wire form (see [`Note`]); a text naming no known note or failure is kept whole as an
    /// [`NoteKind::Unrecognised`] note (so older evidence loads).
    pub fn read(s: &str) -> Note {
        Note::parse(s).unwrap_or_else(|| Note {
            kind: NoteKind::Unrecognised,
            failure: None,
            detail: Some(s.to_string()),
        })
    }

    /// Reads the wire form (see [`Note`]); None when the name is no known note or failure.
    pub fn parse(s: &str) -> Option<Note> {
        let end = s.find([':', ' ']).unwrap_or(s.len());
        let (name, rest) = s.split_at(end);
        let detail = rest
            .strip_prefix(": ")
            .or_else(|| rest.strip_prefix(':'))
            .or_else(|| rest.strip_prefix(' '))
            .map(String::from);
        if let Some(kind) = NoteKind::from_name(name)
            .filter(|k| !matches!(k, NoteKind::Failed | NoteKind::Unrecognised))
        {
            return Some(Note {
                kind,
                failure: None,
                detail,
            });
        }
        FailureCode::from_recorded_name(name).map(|c| Note {
            kind: NoteKind::Failed,
            failure: Some(c),
            detail,
        })
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == NoteKind::Unrecognised {
            return f.write_str(self.detail.as_deref().unwrap_or(""));
        }
        f.write_str(self.name())?;
        match (&self.detail, self.kind) {
            (None, _) => Ok(()),
            (Some(d), NoteKind::PromptCacheHit) => write!(f, " {d}"),
            (Some(d), _) => write!(f, ": {d}"),
        }
    }
}

impl PartialEq<&str> for Note {
    /// Compares the wire text (tests state notes as text).
    fn eq(&self, other: &&str) -> bool {
        let text: String = self.to_string();
        text.as_str() == *other
    }
}

impl Serialize for Note {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Note {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Note, D::Error> {
        Ok(Note::read(&String::deserialize(d)?))
    }
}

/// True when any note in `notes` is of this kind.
pub fn has_note(notes: &[Note], kind: NoteKind) -> bool {
    notes.iter().any(|n| n.kind == kind)
}

closed_enum! {
    /// The unit a metric is stated in.
    pub enum Unit {
        /// Milliseconds.
        Ms = "ms",
        /// Tokens per second.
        TokPerS = "tok/s",
        /// A dimensionless ratio (theirs / ours).
        Ratio = "x",
        /// Requests per second (load runs).
        ReqPerS = "req/s",
        /// A share of requests, 0..=1 (load runs).
        Share = "share",
        /// A count of requests (load runs).
        Requests = "requests",
        /// Mebibytes (2^20 bytes): the serve's resident memory.
        MiB = "MiB",
        /// Milliseconds of CPU time per completion token.
        MsPerToken = "ms/token",
    }
}

closed_enum! {
    /// A metric servegate measures. The wire name is the canonical noun (docs/metrics.md).
    pub enum Metric {
        /// Time to first token.
        Ttft = "ttft",
        /// Time to first content (reasoning excluded).
        FirstContent = "first_content",
        /// Client-side decode rate.
        DecodeRate = "decode_rate",
        /// Inter-token latency (gaps between token chunks).
        Itl = "itl",
        /// One reply's 90th-percentile inter-token gap.
        ItlP90 = "itl_p90",
        /// Time per output token.
        Tpot = "tpot",
        /// End-to-end latency.
        E2e = "e2e_latency",
        /// llama.cpp's own decode rate.
        ServerDecodeRate = "server_decode_rate",
        /// llama.cpp's prefill rate.
        ServerPrefillRate = "server_prefill_rate",
        /// A pair gate's theirs / ours of a metric's medians.
        PairRatio = "pair_ratio",
        /// A load point's output tokens per second over its measured window.
        OutputThroughput = "output_throughput",
        /// A load point's succeeded requests per second over its measured window.
        RequestThroughput = "request_throughput",
        /// A load point's requests meeting every SLO per second.
        Goodput = "goodput",
        /// A load point's share of planned requests meeting every SLO.
        SloAttainment = "slo_attainment",
        /// A load point's most requests in flight at one instant.
        PeakConcurrency = "peak_concurrency",
        /// A sweep point's output throughput over c × that of concurrency 1.
        ScalingEfficiency = "scaling_efficiency",
        /// The serve's start-up: spawn to the first ready answer (`run.json` `serve.ready_ms`).
        ReadyMs = "ready_ms",
        /// The serve's peak resident memory over its process group (`run.json` `serve.footprint`).
        ServeRssPeak = "serve_rss_peak_mib",
        /// The serve group's CPU time over the judged requests per completion token (`serve.footprint.cpu`).
        ServeCpuPerToken = "serve_cpu_ms_per_token",
    }
}

closed_enum! {
    /// Which way a metric is better.
    pub enum Better {
        /// More is better (rates): a gate sets a floor.
        Higher = "higher",
        /// Less is better (latencies): a gate sets a limit.
        Lower = "lower",
        /// Neither: a gate bounds it on both sides (a pair's ratio).
        Bounded = "bounds",
    }
}

/// One metric's entry in the registry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricInfo {
    /// The metric.
    pub metric: Metric,
    /// Its canonical noun, as docs/metrics.md names it (`TTFT`, `decode rate`).
    pub title: &'static str,
    /// The unit of its values.
    pub unit: Unit,
    /// Decimals shown in verdict lines and figures tables.
    pub decimals: usize,
    /// Decimals of the values a record made from a run states (more than a verdict line shows).
    pub record_decimals: u32,
    /// Which way is better: higher (rates), lower (latencies), or within bounds (a pair's ratio).
    pub better: Better,
    /// The field of the per-request figures (`run.json` `figures`, inspect) holding it, or None.
    pub figure_field: Option<&'static str>,
    /// Its name in records (`metric` of a `servegate.record/2` record), or None when records cannot carry it.
    pub record_name: Option<&'static str>,
    /// One-line definition.
    pub definition: &'static str,
    /// The definition it follows.
    pub source: &'static str,
}

impl Metric {
    /// The registry entry of this metric.
    pub const fn info(self) -> MetricInfo {
        match self {
            Metric::Ttft => TTFT,
            Metric::FirstContent => FIRST_CONTENT,
            Metric::DecodeRate => DECODE_RATE,
            Metric::Itl => ITL,
            Metric::ItlP90 => ITL_P90,
            Metric::Tpot => TPOT,
            Metric::E2e => E2E,
            Metric::ServerDecodeRate => SERVER_DECODE_RATE,
            Metric::ServerPrefillRate => SERVER_PREFILL_RATE,
            Metric::PairRatio => PAIR_RATIO,
            Metric::OutputThroughput => OUTPUT_THROUGHPUT,
            Metric::RequestThroughput => REQUEST_THROUGHPUT,
            Metric::Goodput => GOODPUT,
            Metric::SloAttainment => SLO_ATTAINMENT,
            Metric::PeakConcurrency => PEAK_CONCURRENCY,
            Metric::ScalingEfficiency => SCALING_EFFICIENCY,
            Metric::ReadyMs => READY_MS,
            Metric::ServeRssPeak => SERVE_RSS_PEAK,
            Metric::ServeCpuPerToken => SERVE_CPU_PER_TOKEN,
        }
    }

    /// True for the serve's footprint figures, one value per run (`run.json` `serve.ready_ms`,
    /// `serve.footprint`), not per reply: `ready_ms`, `serve_rss_peak_mib`, `serve_cpu_ms_per_token`.
    pub const fn per_run(self) -> bool {
        matches!(
            self,
            Metric::ReadyMs | Metric::ServeRssPeak | Metric::ServeCpuPerToken
        )
    }

    /// The metric a record's `metric` names, or None.
    pub fn from_record_name(name: &str) -> Option<Metric> {
        Metric::ALL
            .iter()
            .copied()
            .find(|m| m.info().record_name == Some(name))
    }
}

// The registry's rows, one per metric ([`Metric::info`]).

const TTFT: MetricInfo = MetricInfo {
    metric: Metric::Ttft,
    title: "TTFT",
    unit: Unit::Ms,
    decimals: 0,
    record_decimals: 1,
    better: Better::Lower,
    figure_field: Some("ttft_ms"),
    record_name: Some("first_token"),
    definition:
        "time from sending the request to the first token chunk (content, reasoning or tool call)",
    source:
        "vLLM bench serve (ttft), AIPerf time to first token, MLPerf LoadGen first-token latency",
};

const FIRST_CONTENT: MetricInfo = MetricInfo {
    metric: Metric::FirstContent,
    title: "first content",
    unit: Unit::Ms,
    decimals: 0,
    record_decimals: 1,
    better: Better::Lower,
    figure_field: Some("first_content_ms"),
    record_name: None,
    definition: "time from sending the request to the first non-empty content (reasoning excluded)",
    source: "older vLLM backend_request_func (first delta.content)",
};

const DECODE_RATE: MetricInfo = MetricInfo {
        metric: Metric::DecodeRate,
        title: "decode rate",
        unit: Unit::TokPerS,
        decimals: 1,
        record_decimals: 2,
        better: Better::Higher,
        figure_field: Some("decode_tok_s"),
        record_name: Some("decode_rate"),
        definition: "(N − 1) / (t_last_token_chunk − t_first_token_chunk), first token excluded",
        source: "AIPerf output token throughput per user, llama.cpp predicted_per_second (servegate: first token excluded)",
};

const ITL: MetricInfo = MetricInfo {
    metric: Metric::Itl,
    title: "ITL",
    unit: Unit::Ms,
    decimals: 1,
    record_decimals: 2,
    better: Better::Lower,
    figure_field: Some("itl_ms"),
    record_name: None,
    definition: "gaps between consecutive token chunks",
    source: "vLLM bench serve (itl), AIPerf inter chunk latency",
};

const ITL_P90: MetricInfo = MetricInfo {
        metric: Metric::ItlP90,
        title: "ITL p90",
        unit: Unit::Ms,
        decimals: 1,
        record_decimals: 2,
        better: Better::Lower,
        figure_field: None,
        record_name: None,
        definition: "90th percentile (numpy linear) of one reply's gaps between consecutive token chunks; none under two token chunks",
        source: "vLLM bench serve (p90 of itl), AIPerf inter chunk latency p90",
};

const TPOT: MetricInfo = MetricInfo {
    metric: Metric::Tpot,
    title: "TPOT",
    unit: Unit::Ms,
    decimals: 1,
    record_decimals: 2,
    better: Better::Lower,
    figure_field: Some("tpot_ms"),
    record_name: None,
    definition: "(e2e − ttft) / (N − 1)",
    source: "vLLM bench serve (tpot), MLPerf LoadGen TPOT, AIPerf inter token latency",
};

const E2E: MetricInfo = MetricInfo {
    metric: Metric::E2e,
    title: "E2E latency",
    unit: Unit::Ms,
    decimals: 0,
    record_decimals: 1,
    better: Better::Lower,
    figure_field: Some("e2e_ms"),
    record_name: Some("e2e_latency"),
    definition: "time from sending the request to the last read of the response",
    source: "vLLM bench serve (latency), AIPerf request_latency",
};

const SERVER_DECODE_RATE: MetricInfo = MetricInfo {
    metric: Metric::ServerDecodeRate,
    title: "server decode rate",
    unit: Unit::TokPerS,
    decimals: 1,
    record_decimals: 2,
    better: Better::Higher,
    figure_field: Some("server_decode_tok_s"),
    record_name: None,
    definition: "the serve's own generation rate, timings.predicted_per_second",
    source: "llama.cpp server timings",
};

const SERVER_PREFILL_RATE: MetricInfo = MetricInfo {
    metric: Metric::ServerPrefillRate,
    title: "server prefill rate",
    unit: Unit::TokPerS,
    decimals: 1,
    record_decimals: 2,
    better: Better::Higher,
    figure_field: Some("server_prefill_tok_s"),
    record_name: Some("prefill_rate"),
    definition: "timings.prompt_n / timings.prompt_ms; none on a prompt-cache hit",
    source: "llama.cpp server timings",
};

const PAIR_RATIO: MetricInfo = MetricInfo {
    metric: Metric::PairRatio,
    title: "pair ratio",
    unit: Unit::Ratio,
    decimals: 2,
    record_decimals: 2,
    better: Better::Bounded,
    figure_field: None,
    record_name: None,
    definition: "theirs median / ours median of one metric, over ABBA-ordered arms",
    source: "servegate (docs/metrics.md)",
};

const OUTPUT_THROUGHPUT: MetricInfo = MetricInfo {
        metric: Metric::OutputThroughput,
        title: "output throughput",
        unit: Unit::TokPerS,
        decimals: 1,
        record_decimals: 2,
        better: Better::Higher,
        figure_field: None,
        record_name: Some("output_throughput"),
        definition: "completion tokens of the succeeded judged requests of a load point / its measured window (first judged send to last judged end)",
        source: "vLLM bench serve (output token throughput), GuideLLM output tokens/s, AIPerf output token throughput",
};

const REQUEST_THROUGHPUT: MetricInfo = MetricInfo {
    metric: Metric::RequestThroughput,
    title: "request throughput",
    unit: Unit::ReqPerS,
    decimals: 2,
    record_decimals: 3,
    better: Better::Higher,
    figure_field: None,
    record_name: Some("request_throughput"),
    definition: "succeeded judged requests of a load point / its measured window",
    source: "vLLM bench serve (request throughput), AIPerf request throughput",
};

const GOODPUT: MetricInfo = MetricInfo {
    metric: Metric::Goodput,
    title: "goodput",
    unit: Unit::ReqPerS,
    decimals: 2,
    record_decimals: 3,
    better: Better::Higher,
    figure_field: None,
    record_name: None,
    definition:
        "succeeded requests meeting every SLO given (TTFT, TPOT, E2E) / the measured window",
    source: "vLLM bench serve --goodput, DistServe (Zhong et al., OSDI 2024)",
};

const SLO_ATTAINMENT: MetricInfo = MetricInfo {
    metric: Metric::SloAttainment,
    title: "SLO attainment",
    unit: Unit::Share,
    decimals: 4,
    record_decimals: 4,
    better: Better::Higher,
    figure_field: None,
    record_name: None,
    definition: "requests meeting every SLO / planned judged requests (failed or unsent ones miss)",
    source: "DistServe (SLO attainment)",
};

const PEAK_CONCURRENCY: MetricInfo = MetricInfo {
        metric: Metric::PeakConcurrency,
        title: "peak real concurrency",
        unit: Unit::Requests,
        decimals: 0,
        record_decimals: 0,
        better: Better::Higher,
        figure_field: None,
        record_name: None,
        definition: "the most request lifetimes [send, end] open at one instant, failed requests included (a sweep over start and end events; a lifetime with no recorded end counts at its send)",
        source: "servegate (docs/load.md); GuideLLM reports concurrency per request",
};

const SCALING_EFFICIENCY: MetricInfo = MetricInfo {
        metric: Metric::ScalingEfficiency,
        title: "scaling efficiency",
        unit: Unit::Ratio,
        decimals: 2,
        record_decimals: 3,
        better: Better::Higher,
        figure_field: None,
        record_name: None,
        definition: "output throughput at concurrency c / (c × output throughput at concurrency 1); 1 / c for a serve that serializes requests",
        source: "servegate (docs/load.md), the usual parallel-efficiency ratio",
};

const READY_MS: MetricInfo = MetricInfo {
    metric: Metric::ReadyMs,
    title: "start-up time",
    unit: Unit::Ms,
    decimals: 0,
    record_decimals: 1,
    better: Better::Lower,
    figure_field: None,
    record_name: None,
    definition: "time from spawning the serve to the first HTTP 200 on its ready path (model load included); run.json serve.ready_ms, one value per run",
    source: "servegate (docs/metrics.md); the model-load time llama.cpp and vLLM log, measured from outside",
};

const SERVE_RSS_PEAK: MetricInfo = MetricInfo {
    metric: Metric::ServeRssPeak,
    title: "serve peak memory",
    unit: Unit::MiB,
    decimals: 1,
    record_decimals: 1,
    better: Better::Lower,
    figure_field: None,
    record_name: None,
    definition: "sum over the serve's processes (its group, its descendants, the run-tagged) of each one's resident high-water mark: VmHWM sampled from /proc, the leader's at least its wait4 ru_maxrss; an upper bound of the group's simultaneous peak, exact for one process; run.json serve.footprint",
    source: "Linux proc(5) VmHWM, getrusage(2) ru_maxrss (as GNU time's maximum resident set size)",
};

const SERVE_CPU_PER_TOKEN: MetricInfo = MetricInfo {
    metric: Metric::ServeCpuPerToken,
    title: "serve CPU per token",
    unit: Unit::MsPerToken,
    decimals: 2,
    record_decimals: 3,
    better: Better::Lower,
    figure_field: None,
    record_name: None,
    definition: "user + system CPU of the serve's processes (/proc/PID/stat utime+stime+cutime+cstime) from before the first judged request to after the last (warmup excluded) / the completion tokens of those requests; the window's wall time beside it",
    source: "Linux proc(5) stat; servegate (docs/metrics.md)",
};

/// A bound a figure assertion compares the median with: the metric it bounds, its value and unit, and whether
/// the median must be at least (a floor) or at most (a limit) the value. Built once, by [`Bound::for_metric`]:
/// unit and direction are the metric's registry entry, so no reader guesses them again.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// The metric bounded (its registry entry gives `unit` and the direction).
    pub metric: Metric,
    /// The bound's value, in `unit`.
    pub value: f64,
    /// Its unit.
    pub unit: Unit,
    /// True for a floor (median ≥ value), false for a limit (median ≤ value).
    pub at_least: bool,
}

closed_enum! {
    /// Which side a figure assertion's bound holds the median on.
    pub enum BoundKind {
        /// The median must be at least the bound (a higher-is-better metric).
        Floor = "floor",
        /// The median must be at most the bound (a lower-is-better metric).
        Limit = "limit",
    }
}

impl Bound {
    /// The bound a figure assertion on `metric` at `value` sets: a floor for a higher-is-better metric, a
    /// limit otherwise.
    pub const fn for_metric(metric: Metric, value: f64) -> Bound {
        let i = metric.info();
        Bound {
            metric,
            value,
            unit: i.unit,
            at_least: matches!(i.better, Better::Higher),
        }
    }

    /// A floor or a limit.
    pub const fn kind(&self) -> BoundKind {
        if self.at_least {
            BoundKind::Floor
        } else {
            BoundKind::Limit
        }
    }

    /// True when `median` satisfies the bound.
    pub fn holds(&self, median: f64) -> bool {
        if self.at_least {
            median >= self.value
        } else {
            median <= self.value
        }
    }
}

/// The registry as a markdown table (docs/metrics.md holds this table; `tests/pure/metrics_doc.rs` checks it).
pub fn registry_table() -> String {
    let mut out = String::from(
        "| metric (canonical noun) | wire name | unit | decimals | better | figure field | record name | definition | source |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in Metric::ALL {
        let i = m.info();
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            i.title,
            m.name(),
            i.unit,
            i.decimals,
            i.better,
            i.figure_field
                .map(|f| format!("`{f}`"))
                .unwrap_or_else(|| "-".into()),
            i.record_name
                .map(|f| format!("`{f}`"))
                .unwrap_or_else(|| "-".into()),
            i.definition,
            i.source
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_through_serde_and_from_name() {
        for k in AssertionKind::ALL {
            let j = serde_json::to_string(k).unwrap();
            assert_eq!(j, format!("\"{k}\""));
            assert_eq!(AssertionKind::from_name(k.name()), Some(*k));
        }
        for c in FailureCode::ALL {
            assert_eq!(FailureCode::from_name(&c.to_string()), Some(*c));
        }
        assert_eq!(AssertionKind::from_name("decode"), None);
        assert_eq!(
            FailureCode::of_recorded(
                "server_exited_during_run (exit status 139, 0.4 s after ready)"
            ),
            Some(FailureCode::ServerExitedDuringRun)
        );
        assert_eq!(
            FailureCode::of_recorded("pair_model_mismatch: ours loads a"),
            Some(FailureCode::PairModelMismatch)
        );
        assert_eq!(FailureCode::of_recorded("port_busy: 8080"), None);
        assert_eq!(Role::Theirs.to_string(), "theirs");
    }

    #[test]
    fn serve_failures_read_back_as_written() {
        for text in [
            "no_free_port: no free port on 127.0.0.1",
            "server_exited_during_run (exit status 1, 2.0 s after ready): bind failed",
            "server_exited_before_ready (signal 9, 0.1 s after spawn)",
            "hold: cannot open /x: denied",
            "hold_timeout: /x is held by pid 1 gate g; waited 5 s",
            "shutting_down",
        ] {
            let f = ServeFailure::parse(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(f.to_string(), text);
            assert!(!f.code.is_reply(), "{text}");
        }
        let f = ServeFailure::new(
            FailureCode::ApiKeyMissing,
            "environment variable K is not set",
        );
        assert_eq!(ServeFailure::parse(&f.to_string()), Some(f));
        assert_eq!(ServeFailure::parse("interrupted by SIGTERM: x"), None);
        assert_eq!(ServeFailure::parse("no_free_port:x"), None);
    }

    #[test]
    fn notes_keep_their_wire_text() {
        for s in [
            "usage_missing",
            "no_done_marker: finish_reason seen, the stream ended without data: [DONE]",
            "prompt_cache_hit 5/6: prefill rate not measured",
            "truncated_stream: no finish_reason, no [DONE]",
        ] {
            let n = Note::parse(s).unwrap();
            assert_eq!(n.to_string(), s);
            let j = serde_json::to_string(&n).unwrap();
            assert_eq!(serde_json::from_str::<Note>(&j).unwrap(), n);
        }
        let cache = Note::parse("prompt_cache_hit 5/6: x").unwrap();
        assert_eq!(
            (cache.kind, cache.detail.as_deref()),
            (NoteKind::PromptCacheHit, Some("5/6: x"))
        );
        let cut = Note::parse("truncated_stream: no [DONE]").unwrap();
        assert_eq!(
            (cut.kind, cut.failure),
            (NoteKind::Failed, Some(FailureCode::TruncatedStream))
        );
        assert!(Note::parse("nonsense: x").is_none());
        // Older evidence with a note this version does not know still loads, its text kept.
        let old: Note = serde_json::from_str("\"retired_warning: 3 things\"").unwrap();
        assert_eq!(old.kind, NoteKind::Unrecognised);
        assert_eq!(
            serde_json::to_string(&old).unwrap(),
            "\"retired_warning: 3 things\""
        );
    }

    #[test]
    fn failures_display_as_today() {
        let f = Failures::new(vec![
            Failure {
                code: FailureCode::TruncatedStream,
                detail: "no [DONE]".into(),
            },
            Failure {
                code: FailureCode::MalformedEvent,
                detail: "event 3".into(),
            },
        ])
        .unwrap();
        assert_eq!(
            f.to_string(),
            "truncated_stream: no [DONE]; malformed_event: event 3"
        );
        assert_eq!(f.code(), FailureCode::TruncatedStream);
        assert!(f.has(FailureCode::MalformedEvent));
        assert!(!f.has(FailureCode::Transport));
        assert_eq!(
            Note::of_failures(&f).to_string(),
            f.to_string(),
            "a failure repeated as a note keeps its text"
        );
        assert!(Failures::new(Vec::new()).is_none());
    }

    #[test]
    fn registry_units_and_bounds() {
        assert_eq!(AssertionKind::Rate.metric(), Some(Metric::DecodeRate));
        let floor = Bound::for_metric(Metric::DecodeRate, 15.0);
        assert!(floor.at_least && floor.holds(15.0) && !floor.holds(14.9));
        assert_eq!(floor.unit.to_string(), "tok/s");
        let limit = Bound::for_metric(Metric::Tpot, 40.0);
        assert!(!limit.at_least && limit.holds(40.0) && !limit.holds(40.1));
        assert_eq!(Metric::from_record_name("first_token"), Some(Metric::Ttft));
        assert_eq!(Metric::from_record_name("rate"), None);
        for m in Metric::ALL {
            assert_eq!(m.info().metric, *m);
        }
    }
}
