//! A scripted fake serve for servegate's own tests: a [`Script`] value says what the serve does (when it
//! listens, what it logs, when `/health` says ready, and per chat request the status, headers, delays,
//! tokens, bursts, cuts, stalls and crashes), and `servegate scripted-serve --script FILE --port N` (a
//! hidden subcommand) plays it. It replaces the Python fake serves of the cli test tier: the test writes the
//! script as a value, the gate's `[serve] command` starts the binary under test.
//!
//! Owns the script's shape, its rendering into bytes on the wire ([`render_reply`], pure, unit-tested) and
//! the serve loop ([`serve`]). Framing is [`super::http`]'s. It judges nothing.
//!
//! * **Units**: every `*_ms` is milliseconds (fractions allowed), from the moment named in its doc.
//! * **Templates**: log lines, reply tokens, header values and route bodies expand `{host}`, `{port}`,
//!   `{n}` (the request's number, from 1, counted over all requests), `{chat}` (the chat request's number,
//!   from 1), `{method}`, `{path}`, `{status}` and `{header:NAME}` (the request's header NAME, lower-case,
//!   empty when absent), `{var:NAME}` (the value of `--var NAME=VALUE`, empty when not given: what a gate
//!   puts on the serve's command line, `{model}` say). A raw [`Reply::body`] and [`Inject::raw`] are written
//!   as given; [`Reply::noise`] is bytes that are not UTF-8 at all.
//! * **Raw bytes**: in log lines and header values, `{byte:XX}` (two hex digits) is that one byte, raw: how
//!   a script says bytes that are not UTF-8 there ([`raw_bytes`]).
//! * **Output**: the serve's log lines are written raw, byte for byte, to stdout or stderr: they are the
//!   test's scripted text (ANSI codes and hostile bytes included), which is what a fake serve is for.
//! * **Lifetime**: the serve exits when its parent goes away (a watchdog polls the parent pid every
//!   100 ms; [`Script::outlive_parent`] turns it off), on SIGTERM as [`Script::term`] says, and when a scripted crash fires. It never panics on
//!   input: a bad script is exit 2 with the reason.
//!
//! Exit codes: 2 bad usage, bad script or cannot listen (or [`Start::bind_fail_exit`]); otherwise as
//! scripted.

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::http;

/// What the scripted serve does, from start to exit. Every field has a default (`{}` is a ready serve
/// answering every chat request with [`Reply::default`]); unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Script {
    /// Start-up: log lines, the delay before listening, a failing bind.
    pub start: Start,
    /// `GET /health` (and `/v1/health`): when it says ready.
    pub health: Health,
    /// The model ids `GET /v1/models` lists (default `["fake"]`); the first is the `model` of replies.
    pub models: Vec<String>,
    /// `GET /version` answers `{"version": V}` when set (404 otherwise).
    pub version: Option<String>,
    /// `GET /props` answers this JSON when set (404 otherwise).
    pub props: Option<serde_json::Value>,
    /// `GET /metrics` answers this text (Prometheus exposition) when set (404 otherwise).
    pub metrics: Option<String>,
    /// Canned responses for any method and path, matched before the built-in routes.
    pub routes: Vec<Route>,
    /// Chat replies by the chat request's index (0-based, in order of arrival; `POST /v1/completions`,
    /// `/v1/embeddings` and `/v1/responses` count as chat requests and take theirs from here too); past the
    /// end, `reply`.
    pub replies: Vec<Reply>,
    /// With `replies` non-empty: request k gets `replies[k % len]` (never `reply`).
    pub cycle: bool,
    /// The chat reply of every request `replies` does not cover.
    pub reply: Reply,
    /// Log lines printed for every request (any route), after it is answered.
    pub request_log: Vec<LogLine>,
    /// The process ends after this many chat replies have been written whole.
    pub crash_after_requests: Option<CrashAfter>,
    /// Printed right before a scripted crash ends the process (`crash_after_requests`, or a reply's
    /// `crash_after`), templated with the request's variables: a crashing engine's last words
    /// (`Segmentation fault`), which a runner quotes from the log's tail.
    pub crash_log: Vec<LogLine>,
    /// What SIGTERM does.
    pub term: Term,
    /// Write the serve's pid here (atomically: a temp file, then a rename) before listening.
    pub pid_file: Option<PathBuf>,
    /// Append `start PID T` when listening and `stop PID T` on SIGTERM (T = Unix time, seconds with 6
    /// decimals) to this file.
    pub times_file: Option<PathBuf>,
    /// Spawn a child process (a grandchild of the runner) that sleeps 300 s, before listening.
    pub child: Option<ChildSpec>,
    /// Do not exit when the parent goes away (no watchdog): for tests of the runner's own teardown, where
    /// the serve's watchdog would do the runner's job.
    pub outlive_parent: bool,
    /// Serve chat requests one at a time, as a serve with one slot: a request waits until the reply before
    /// it has been played to its end (or to the client's drop, unless [`Reply::on_drop`] says otherwise).
    pub one_slot: bool,
    /// What the serve costs: memory it holds, CPU it burns per chat request (the footprint tests' truth).
    pub cost: Cost,
}

/// What the scripted serve costs, known exactly, so that a footprint test compares servegate's figures with
/// the truth: resident memory held from start to exit (its own and a forked child's, in its process group)
/// and CPU burnt per chat request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cost {
    /// MiB allocated and every byte written (so every page is resident) before listening, held until exit.
    pub alloc_mib: u64,
    /// MiB held the same way by a child forked at start (same process group; it dies with the serve: the
    /// group's SIGTERM, or its parent's death).
    pub child_alloc_mib: u64,
    /// CPU ms burnt per chat request before its reply's head, in a busy loop timed on the thread's own CPU
    /// clock (`CLOCK_THREAD_CPUTIME_ID`): a busy machine stretches its wall time, never its CPU. The reply's
    /// schedule (head, first token, tokens) starts when the burn ends, as decode follows prefill.
    pub cpu_ms_per_chat: f64,
    /// The burn runs on one long-lived worker thread (as a serve's decode loop does), the connection's
    /// thread waiting for it, instead of on the connection's thread.
    pub burn_on_worker: bool,
}

impl Default for Script {
    fn default() -> Script {
        Script {
            start: Start::default(),
            health: Health::default(),
            models: vec!["fake".into()],
            version: None,
            props: None,
            metrics: None,
            routes: Vec::new(),
            replies: Vec::new(),
            cycle: false,
            reply: Reply::default(),
            request_log: Vec::new(),
            crash_after_requests: None,
            crash_log: Vec::new(),
            term: Term::Default,
            pid_file: None,
            times_file: None,
            child: None,
            outlive_parent: false,
            one_slot: false,
            cost: Cost::default(),
        }
    }
}

/// Start-up behaviour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Start {
    /// Printed first, before the listen delay.
    pub log: Vec<LogLine>,
    /// ms from start to binding the port: connections are refused meanwhile.
    pub listen_delay_ms: f64,
    /// Bind this port instead of `--port` (a test holds it to make the bind fail for real).
    pub bind_port: Option<u16>,
    /// Printed when the bind fails (then the process exits with `bind_fail_exit`).
    pub bind_fail_log: Vec<LogLine>,
    /// Exit code when the bind fails (default 1, as llama-server).
    pub bind_fail_exit: Option<i32>,
    /// Printed once bound.
    pub listening_log: Vec<LogLine>,
}

/// Readiness: `/health` answers 503 (llama.cpp's `Loading model` body) until ready, then 200
/// `{"status":"ok"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Health {
    /// ms from binding to ready.
    pub ready_after_ms: f64,
    /// Never ready: `/health` answers 503 forever (and `ready_log` is never printed).
    pub never: bool,
    /// Printed the moment the serve becomes ready.
    pub ready_log: Vec<LogLine>,
    /// ms after the first 200 on `/health`: print `exit_log` and exit with `exit_code` (0 = at once, right
    /// after that 200 is written).
    pub exit_after_ready_ms: Option<f64>,
    /// The exit code of `exit_after_ready_ms` (default 0).
    pub exit_code: i32,
    /// Printed before that exit.
    pub exit_log: Vec<LogLine>,
}

/// Where a log line goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum To {
    /// Standard error (llama-server's server lines).
    #[default]
    Stderr,
    /// Standard output (llama-server's `main:` lines).
    Stdout,
}

/// One log line (a newline is added), templated (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogLine {
    /// stdout or stderr (default stderr).
    #[serde(default)]
    pub to: To,
    /// The text.
    pub text: String,
}

impl LogLine {
    /// A line to stderr.
    pub fn err(text: impl Into<String>) -> LogLine {
        LogLine {
            to: To::Stderr,
            text: text.into(),
        }
    }
    /// A line to stdout.
    pub fn out(text: impl Into<String>) -> LogLine {
        LogLine {
            to: To::Stdout,
            text: text.into(),
        }
    }
}

/// A canned response for `method path`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The method (`GET`, `POST`...); any when absent.
    #[serde(default)]
    pub method: Option<String>,
    /// The path, without the query string, exactly.
    pub path: String,
    /// HTTP status (default 200).
    #[serde(default = "ok")]
    pub status: u16,
    /// Response headers (default `content-type: application/json`).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body, templated.
    #[serde(default)]
    pub body: String,
    /// ms from the request's arrival to the response.
    #[serde(default)]
    pub delay_ms: f64,
}

fn ok() -> u16 {
    200
}

/// How the process ends when a scripted crash fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Crash {
    /// `exit(code)`.
    Code(i32),
    /// Killed by this signal number (its default action restored first: 9 SIGKILL, 11 SIGSEGV, 6 SIGABRT).
    Signal(i32),
}

/// A process-level crash after a number of chat replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrashAfter {
    /// After this many chat replies were written whole (counted over all connections).
    pub requests: u64,
    /// How the process ends.
    pub how: Crash,
}

/// What SIGTERM does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Term {
    /// The default action: the process dies by SIGTERM (after the `stop` stamp when `times_file` is set).
    #[default]
    Default,
    /// Ignored: only SIGKILL ends the serve.
    Ignore,
    /// Print these lines, then exit with this code.
    Exit {
        /// The exit code.
        code: i32,
        /// Printed first.
        #[serde(default)]
        log: Vec<LogLine>,
    },
    /// Print these lines, then end as `how` says: a serve that dies (of SIGSEGV, say) when asked to stop.
    Crash {
        /// How the process ends (a signal's default action, or an exit code).
        how: Crash,
        /// Printed first.
        #[serde(default)]
        log: Vec<LogLine>,
    },
}

/// A child process of the serve (a grandchild of the runner): `sleep 300`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildSpec {
    /// The child ignores SIGTERM too.
    #[serde(default)]
    pub ignore_term: bool,
    /// Its pid is written here (atomically).
    #[serde(default)]
    pub pid_file: Option<PathBuf>,
}

/// How a response body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Body {
    /// `Transfer-Encoding: chunked`, one chunk per write (a stream's default).
    Chunked,
    /// `Content-Length` (a non-streamed reply's default; a stream is then buffered whole unless
    /// `content_length` declares a length).
    Length,
    /// Neither: `connection: close`, the body ends when the connection closes (Python's http.server).
    Close,
}

/// Raw bytes written as one more event before event `at` of a stream (0 = before the first; past the
/// last = after `[DONE]`): a malformed chunk, an unknown field, a comment, a bare line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inject {
    /// The event index it comes before (events: the role chunk, each token, the finish chunk, usage, DONE).
    pub at: usize,
    /// The bytes (as UTF-8 text), verbatim: include `data: ` and `\n\n` yourself.
    pub raw: String,
}

/// After the last scripted event: keep writing `bytes` every `every_ms`, until the client goes away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forever {
    /// What each write holds (as UTF-8 text).
    pub bytes: String,
    /// Written this many times per write (to make big blocks from a short string; default 1).
    #[serde(default = "one")]
    pub repeat: usize,
    /// ms between writes (0: as fast as the socket takes them).
    #[serde(default)]
    pub every_ms: f64,
}

fn one() -> usize {
    1
}

/// A write cut in two (see [`Reply::split`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Split {
    /// The text (templated) the cut falls in the middle of (of its bytes).
    pub at: String,
    /// ms between the two halves.
    #[serde(default)]
    pub delay_ms: f64,
}

/// One chat reply (`POST /v1/chat/completions`): by default a streamed (or not, as the request asks)
/// llama.cpp-style answer "Paris." with usage.
///
/// A stream's events, in order: the role chunk (`role_chunk`), one chunk per token, the finish chunk
/// (`finish_reason`), the usage chunk (`usage`: `choices: []`, `usage` and the `timings` object), `data:
/// [DONE]` (`done`), with [`Inject`]s between them. The head (with the role chunk) is written at
/// `head_delay_ms`, the first token `first_token_ms` later, each next token `token_ms` after the one before
/// it; the finish, usage and DONE events go in one write right after the last token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Reply {
    /// HTTP status. Not 200: the body is `body`, else an OpenAI error body naming the status.
    pub status: u16,
    /// Extra response headers, templated (`content-type` replaces the default one).
    pub headers: Vec<(String, String)>,
    /// ms from the request's arrival to the response head (with a non-streamed reply: to the whole reply).
    pub head_delay_ms: f64,
    /// ms from the head to the first token.
    pub first_token_ms: f64,
    /// ms between consecutive tokens.
    pub token_ms: f64,
    /// Stream (SSE) or not; absent: as the request's `stream` says.
    pub stream: Option<bool>,
    /// Body framing; absent: chunked for a stream, length otherwise.
    pub framing: Option<Body>,
    /// Declared `Content-Length` regardless of the bytes sent (a body that claims more than comes).
    pub content_length: Option<u64>,
    /// The content pieces, one per chunk (templated).
    pub tokens: Vec<String>,
    /// Send a role-only first chunk with the head.
    pub role_chunk: bool,
    /// Chunks per write (a burst): tokens are grouped, each group written at its last token's time;
    /// 0 = every token in one write.
    pub per_write: usize,
    /// The finish chunk's `finish_reason`; absent: no finish chunk.
    pub finish_reason: Option<String>,
    /// Send a usage chunk (with `stream_options.include_usage` or not: llama.cpp always does).
    pub usage: bool,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// `usage.completion_tokens` (default: the number of tokens; set it to lie).
    pub completion_tokens: Option<u64>,
    /// llama.cpp's `timings` object (`prompt_n`, `prompt_ms`, `predicted_n`, `predicted_ms`,
    /// `predicted_per_second`...), verbatim, on the usage chunk (or the finish chunk without usage, or the
    /// non-streamed body).
    pub timings: Option<serde_json::Value>,
    /// End with `data: [DONE]`.
    pub done: bool,
    /// The `model` of the chunks; absent: the script's first model.
    pub model: Option<String>,
    /// Raw events between the scripted ones.
    pub inject: Vec<Inject>,
    /// The whole body, verbatim (replaces every event; framing as `framing` says).
    pub body: Option<String>,
    /// Close the connection after this many events (no last chunk): a cut stream.
    pub cut_after: Option<usize>,
    /// Stop writing after this many events and hold the connection open until the client leaves.
    pub stall_after: Option<usize>,
    /// Crash the process after this many events (`crash`).
    pub crash_after: Option<usize>,
    /// How `crash_after` ends the process (default: killed by SIGKILL).
    pub crash: Option<Crash>,
    /// After the scripted events: write forever (a trickle, an endless line, a huge body).
    pub forever: Option<Forever>,
    /// Refuse with 401 (an OpenAI authentication error) unless `Authorization: Bearer KEY`.
    pub expect_bearer: Option<String>,
    /// As `expect_bearer`, KEY read from this file (whitespace trimmed) when the request arrives (a missing
    /// file expects an empty key): the test's secret stays off the serve's command line.
    pub expect_bearer_file: Option<PathBuf>,
    /// The body is this many pseudo-random bytes (not UTF-8, not SSE; a fixed seed, the same bytes every
    /// time) in place of every event; framing as `framing` says.
    pub noise: Option<usize>,
    /// The first write holding this text goes out in two writes, cut in the middle of the text: a read
    /// that ends inside it (a key split over two reads).
    pub split: Option<Split>,
    /// Printed when the request arrives, templated.
    pub log: Vec<LogLine>,
    /// Tool calls the reply makes (the chat completion message's `tool_calls`; `content` null when there
    /// are some). Streamed: the first delta of each call carries its id, type and name, then one delta per
    /// piece of its arguments.
    pub tool_calls: Vec<ToolCall>,
    /// Render the legacy completion object (`object "text_completion"`, `choices[].text`) in place of
    /// the chat one, streamed and not: a `/v1/completions` reply.
    pub text_completion: bool,
    /// What the serve does when the client drops the reply (a write fails: the peer closed); absent: it
    /// stops the reply there and frees the slot.
    pub on_drop: Option<OnDrop>,
    /// Printed when the serve notices the client dropped the reply (its cancellation line), templated.
    pub drop_log: Vec<LogLine>,
}

/// What a scripted serve does when a client drops its reply mid-stream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum OnDrop {
    /// Keep "generating": the reply's steps are played to their end on their timing, writing nothing, the
    /// slot held all along (a serve that does not cancel a request whose client left).
    Finish,
    /// The process ends as said (a serve that dies when a client disconnects).
    Crash(Crash),
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// `id` (none: left out, as a broken serve might).
    #[serde(default)]
    pub id: Option<String>,
    /// `function.name`.
    pub name: String,
    /// `function.arguments`, as pieces (joined in a non-streamed body; one delta each streamed).
    pub arguments: Vec<String>,
}

impl Default for Reply {
    fn default() -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            head_delay_ms: 0.0,
            first_token_ms: 0.0,
            token_ms: 0.0,
            stream: None,
            framing: None,
            content_length: None,
            tokens: vec!["Paris".into(), ".".into()],
            role_chunk: true,
            per_write: 1,
            finish_reason: Some("stop".into()),
            usage: true,
            prompt_tokens: 9,
            completion_tokens: None,
            timings: None,
            done: true,
            model: None,
            inject: Vec::new(),
            body: None,
            cut_after: None,
            stall_after: None,
            crash_after: None,
            crash: None,
            forever: None,
            expect_bearer: None,
            expect_bearer_file: None,
            noise: None,
            split: None,
            log: Vec::new(),
            tool_calls: Vec::new(),
            text_completion: false,
            on_drop: None,
            drop_log: Vec::new(),
        }
    }
}

impl Script {
    /// Parses a script: JSON, or TOML when `path` ends in `.toml`.
    pub(crate) fn parse(text: &str, path: &Path) -> Result<Script, String> {
        if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            toml::from_str(text).map_err(|e| e.to_string())
        } else {
            serde_json::from_str(text).map_err(|e| e.to_string())
        }
    }

    /// The script as JSON (the file `--script` reads).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The reply of chat request `k` (0-based).
    pub(crate) fn reply_for(&self, k: usize) -> &Reply {
        if self.replies.is_empty() {
            &self.reply
        } else if self.cycle {
            &self.replies[k % self.replies.len()]
        } else {
            self.replies.get(k).unwrap_or(&self.reply)
        }
    }

    /// Why the script cannot be played, if it cannot (negative or non-finite delays, a status outside
    /// 100-999).
    pub(crate) fn validate(&self) -> Result<(), String> {
        let ms_ok = |what: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "{what} must be a finite number of ms >= 0, got {v}"
                ))
            }
        };
        ms_ok("start.listen_delay_ms", self.start.listen_delay_ms)?;
        ms_ok("health.ready_after_ms", self.health.ready_after_ms)?;
        ms_ok("cost.cpu_ms_per_chat", self.cost.cpu_ms_per_chat)?;
        for (what, mib) in [
            ("cost.alloc_mib", self.cost.alloc_mib),
            ("cost.child_alloc_mib", self.cost.child_alloc_mib),
        ] {
            if mib > 16_384 {
                return Err(format!("{what} must be at most 16384 MiB, got {mib}"));
            }
        }
        if let Some(v) = self.health.exit_after_ready_ms {
            ms_ok("health.exit_after_ready_ms", v)?;
        }
        for r in &self.routes {
            ms_ok("routes[].delay_ms", r.delay_ms)?;
            if !(100..=999).contains(&r.status) {
                return Err(format!(
                    "route {}: status {} is not 100-999",
                    r.path, r.status
                ));
            }
        }
        for r in self.replies.iter().chain(std::iter::once(&self.reply)) {
            ms_ok("head_delay_ms", r.head_delay_ms)?;
            ms_ok("first_token_ms", r.first_token_ms)?;
            ms_ok("token_ms", r.token_ms)?;
            if let Some(f) = &r.forever {
                ms_ok("forever.every_ms", f.every_ms)?;
            }
            if !(100..=999).contains(&r.status) {
                return Err(format!("reply status {} is not 100-999", r.status));
            }
        }
        Ok(())
    }
}

/// What a request's templates expand from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Vars {
    /// `{host}`.
    pub host: String,
    /// `{port}`.
    pub port: u16,
    /// `{n}`: the request's number from 1.
    pub n: u64,
    /// `{chat}`: the chat request's number from 1 (0 outside chat).
    pub chat: u64,
    /// `{method}`.
    pub method: String,
    /// `{path}`.
    pub path: String,
    /// `{status}`.
    pub status: u16,
    /// The request's headers (lower-case names), for `{header:NAME}`.
    pub headers: Vec<(String, String)>,
    /// The serve's `--var NAME=VALUE` pairs, for `{var:NAME}`.
    pub vars: Vec<(String, String)>,
}

impl Vars {
    /// `text` with every placeholder of the module doc expanded; anything else left as is.
    pub(crate) fn expand(&self, text: &str) -> String {
        if !text.contains('{') {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            let Some(j) = tail.find('}') else {
                out.push_str(tail);
                return out;
            };
            let name = &tail[1..j];
            let value = match name {
                "host" => Some(self.host.clone()),
                "port" => Some(self.port.to_string()),
                "n" => Some(self.n.to_string()),
                "chat" => Some(self.chat.to_string()),
                "method" => Some(self.method.clone()),
                "path" => Some(self.path.clone()),
                "status" => Some(self.status.to_string()),
                _ => {
                    let find = |list: &[(String, String)], n: &str| {
                        list.iter()
                            .find(|(k, _)| k == n)
                            .map(|(_, v)| v.clone())
                            .unwrap_or_default()
                    };
                    if let Some(h) = name.strip_prefix("header:") {
                        Some(find(&self.headers, &h.to_ascii_lowercase()))
                    } else {
                        name.strip_prefix("var:").map(|v| find(&self.vars, v))
                    }
                }
            };
            match value {
                Some(v) => {
                    out.push_str(&v);
                    rest = &tail[j + 1..];
                }
                None => {
                    out.push('{');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// One step of a response on the wire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// Write these bytes (framed already) at this many ms from the request's arrival.
    Write(f64, Vec<u8>),
    /// The response is whole: keep the connection for the next request (or close, as the framing needs).
    End,
    /// Close the connection now.
    Close,
    /// Write nothing more and hold the connection until the client goes away.
    Stall,
    /// End the process.
    Crash(Crash),
    /// Write these bytes (framed already) every this many ms, until the client goes away.
    Forever(f64, Vec<u8>),
}

/// The steps of one scripted reply: `stream` is what the request asked (when the reply does not say),
/// `model` the script's model, `vars` the request's templates. Pure: the bytes on the wire and their
/// times, then how the response ends.
pub(crate) fn render_reply(reply: &Reply, stream: bool, model: &str, vars: &Vars) -> Vec<Step> {
    let stream = reply.stream.unwrap_or(stream);
    let framing = reply
        .framing
        .unwrap_or(if stream { Body::Chunked } else { Body::Length });
    let model = reply.model.as_deref().unwrap_or(model);
    let tokens: Vec<String> = reply.tokens.iter().map(|t| vars.expand(t)).collect();
    let mut headers: Vec<(String, String)> = Vec::new();
    let content_type = if reply.body.is_some() || reply.status != 200 || !stream {
        "application/json"
    } else {
        "text/event-stream"
    };
    if !reply
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("content-type".into(), content_type.into()));
    }
    for (n, v) in &reply.headers {
        headers.push((n.clone(), vars.expand(v)));
    }
    // The writes: (due ms, body bytes, events in it).
    let mut writes: Vec<(f64, Vec<u8>, usize)> = Vec::new();
    if let Some(n) = reply.noise {
        writes.push((reply.head_delay_ms, noise(n), 1));
    } else if let Some(body) = &reply.body {
        writes.push((reply.head_delay_ms, body.as_bytes().to_vec(), 1));
    } else if reply.status != 200 {
        let err = http::error_body(reply.status, "server_error", http::reason(reply.status));
        writes.push((
            reply.head_delay_ms,
            serde_json::to_vec(&err).unwrap_or_default(),
            1,
        ));
    } else if !stream {
        let body = completion_body(reply, model, &tokens);
        writes.push((
            reply.head_delay_ms,
            serde_json::to_vec(&body).unwrap_or_default(),
            1,
        ));
    } else {
        writes = stream_writes(reply, model, &tokens);
    }
    // Cut, stall or crash after N events: truncate the writes there.
    let stop = [
        reply.cut_after.map(|n| (n, Step::Close)),
        reply.stall_after.map(|n| (n, Step::Stall)),
        reply.crash_after.map(|n| {
            (
                n,
                Step::Crash(reply.crash.unwrap_or(Crash::Signal(libc::SIGKILL))),
            )
        }),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|(n, _)| *n);
    let mut terminal = None;
    if let Some((n, step)) = stop {
        truncate_events(&mut writes, n);
        terminal = Some(step);
    }
    let head_at = reply.head_delay_ms;
    let body_len: usize = writes.iter().map(|(_, b, _)| b.len()).sum();
    let head = raw_bytes(&wire_head(
        reply.status,
        &headers,
        framing,
        reply.content_length,
        body_len,
    ));
    let mut steps = Vec::new();
    match framing {
        Body::Length
            if reply.content_length.is_none() && terminal.is_none() && reply.forever.is_none() =>
        {
            // Buffered whole: one write at the last write's time (a non-streamed reply is one write anyway).
            let at = writes
                .last()
                .map(|(t, _, _)| *t)
                .unwrap_or(head_at)
                .max(head_at);
            let mut bytes = head;
            for (_, b, _) in &writes {
                bytes.extend_from_slice(b);
            }
            steps.push(Step::Write(at, bytes));
        }
        _ => {
            let chunked = framing == Body::Chunked;
            let mut first = head;
            let mut rest = writes.into_iter().peekable();
            // The first write leaves with the head when it is due no later.
            if let Some((t, _, _)) = rest.peek() {
                if *t <= head_at {
                    if let Some((_, b, _)) = rest.next() {
                        frame(&mut first, &b, chunked);
                    }
                }
            }
            steps.push(Step::Write(head_at, first));
            for (t, b, _) in rest {
                let mut out = Vec::new();
                frame(&mut out, &b, chunked);
                steps.push(Step::Write(t.max(head_at), out));
            }
            if terminal.is_none() {
                if let Some(f) = &reply.forever {
                    let mut out = Vec::new();
                    frame(
                        &mut out,
                        f.bytes.repeat(f.repeat.max(1)).as_bytes(),
                        chunked,
                    );
                    terminal = Some(Step::Forever(f.every_ms, out));
                } else if chunked {
                    steps.push(Step::Write(
                        last_at(&steps, head_at),
                        http::LAST_CHUNK.to_vec(),
                    ));
                }
            }
        }
    }
    steps.push(terminal.unwrap_or(if framing == Body::Close {
        Step::Close
    } else {
        Step::End
    }));
    if let Some(split) = &reply.split {
        split_write(
            &mut steps,
            vars.expand(&split.at).as_bytes(),
            split.delay_ms,
        );
    }
    steps
}

/// Cuts the first write holding `at` in two, in the middle of `at`, the second half `delay_ms` later (the
/// writes after it as much later).
fn split_write(steps: &mut Vec<Step>, at: &[u8], delay_ms: f64) {
    if at.is_empty() {
        return;
    }
    let hit = steps.iter().enumerate().find_map(|(i, s)| match s {
        Step::Write(t, b) => b
            .windows(at.len())
            .position(|w| w == at)
            .map(|p| (i, *t, p + at.len() / 2)),
        _ => None,
    });
    let Some((i, t, cut)) = hit else {
        return;
    };
    if let Step::Write(_, b) = &mut steps[i] {
        let tail = b.split_off(cut);
        steps.insert(i + 1, Step::Write(t + delay_ms, tail));
    }
    for s in steps.iter_mut().skip(i + 2) {
        if let Step::Write(t2, _) = s {
            *t2 = t2.max(t + delay_ms);
        }
    }
}

/// `text` with every `{byte:XX}` (two hex digits) replaced by that one raw byte; anything else unchanged.
pub(crate) fn raw_bytes(text: &[u8]) -> Vec<u8> {
    const TAG: &[u8] = b"{byte:";
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(TAG) && text.get(i + TAG.len() + 2) == Some(&b'}') {
            let hex = &text[i + TAG.len()..i + TAG.len() + 2];
            if let Some(b) = std::str::from_utf8(hex)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += TAG.len() + 3;
                continue;
            }
        }
        out.push(text[i]);
        i += 1;
    }
    out
}

/// `n` pseudo-random bytes (xorshift64*, a fixed seed): not UTF-8, the same every time.
pub(crate) fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(n);
    out
}

fn last_at(steps: &[Step], or: f64) -> f64 {
    steps
        .iter()
        .rev()
        .find_map(|s| match s {
            Step::Write(t, _) => Some(*t),
            _ => None,
        })
        .unwrap_or(or)
}

fn frame(out: &mut Vec<u8>, data: &[u8], chunked: bool) {
    if chunked {
        http::push_chunk(out, data)
    } else {
        out.extend_from_slice(data)
    }
}

/// Keeps the first `n` events of `writes` (a write holding more is cut at an event boundary: events
/// are whole `data:` blocks, so the cut is at the n-th `\n\n`).
fn truncate_events(writes: &mut Vec<(f64, Vec<u8>, usize)>, n: usize) {
    let mut left = n;
    let mut keep = 0;
    for w in writes.iter_mut() {
        if left == 0 {
            break;
        }
        if w.2 <= left {
            left -= w.2;
            keep += 1;
            continue;
        }
        // Cut inside this write after `left` events.
        let mut end = 0;
        for _ in 0..left {
            match w.1[end..].windows(2).position(|p| p == b"\n\n") {
                Some(p) => end += p + 2,
                None => end = w.1.len(),
            }
        }
        w.1.truncate(end);
        w.2 = left;
        keep += 1;
        left = 0;
    }
    writes.truncate(keep);
}

fn sse(v: &serde_json::Value) -> Vec<u8> {
    let mut out = b"data: ".to_vec();
    out.extend_from_slice(&serde_json::to_vec(v).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    out
}

fn chunk(model: &str, choices: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 1700000000, "model": model, "choices": choices})
}

/// A chat chunk, or with [`Reply::text_completion`] the completion object of a stream (each choice's
/// `delta.content` as its `text`, a choice without one `""`; the role-only and tool-call deltas have no
/// place there and are left out by the caller).
fn chunk_for(reply: &Reply, model: &str, choices: serde_json::Value) -> serde_json::Value {
    if !reply.text_completion {
        return chunk(model, choices);
    }
    let choices: Vec<serde_json::Value> = choices
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            serde_json::json!({"index": c["index"], "text": c["delta"]["content"].as_str().unwrap_or(""), "logprobs": null, "finish_reason": c["finish_reason"]})
        })
        .collect();
    serde_json::json!({"id": "cmpl-scripted", "object": "text_completion", "created": 1700000000, "model": model, "choices": choices})
}

/// The chat message's `tool_calls` of a non-streamed body.
fn tool_calls_json(reply: &Reply) -> serde_json::Value {
    reply
        .tool_calls
        .iter()
        .map(|t| {
            let mut c = serde_json::json!({"type": "function", "function": {"name": t.name, "arguments": t.arguments.concat()}});
            if let Some(id) = &t.id {
                c["id"] = id.clone().into();
            }
            c
        })
        .collect()
}

fn usage_of(reply: &Reply, tokens: &[String]) -> serde_json::Value {
    let completion = reply.completion_tokens.unwrap_or(tokens.len() as u64);
    serde_json::json!({"prompt_tokens": reply.prompt_tokens, "completion_tokens": completion, "total_tokens": reply.prompt_tokens + completion})
}

/// A stream's writes: (due ms from arrival, bytes, events in it).
fn stream_writes(reply: &Reply, model: &str, tokens: &[String]) -> Vec<(f64, Vec<u8>, usize)> {
    // Every event with its due time.
    let mut events: Vec<(f64, Vec<u8>)> = Vec::new();
    let head = reply.head_delay_ms;
    if reply.role_chunk && !reply.text_completion {
        events.push((
            head,
            sse(&chunk(
                model,
                serde_json::json!([{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]),
            )),
        ));
    }
    let per = if reply.per_write == 0 {
        tokens.len().max(1)
    } else {
        reply.per_write
    };
    let mut t = head + reply.first_token_ms;
    let mut token_events: Vec<(f64, Vec<u8>)> = Vec::new();
    for (i, tok) in tokens.iter().enumerate() {
        if i > 0 {
            t += reply.token_ms;
        }
        token_events.push((
            t,
            sse(&chunk_for(
                reply,
                model,
                serde_json::json!([{"index": 0, "delta": {"content": tok}, "finish_reason": null}]),
            )),
        ));
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        let mut first = serde_json::json!({"index": i, "type": "function", "function": {"name": call.name, "arguments": ""}});
        if let Some(id) = &call.id {
            first["id"] = id.clone().into();
        }
        let pieces = std::iter::once(first).chain(
            call.arguments
                .iter()
                .map(|a| serde_json::json!({"index": i, "function": {"arguments": a}})),
        );
        for piece in pieces {
            if !token_events.is_empty() {
                t += reply.token_ms;
            }
            token_events.push((
                t,
                sse(&chunk(
                    model,
                    serde_json::json!([{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": null}]),
                )),
            ));
        }
    }
    let last = token_events.last().map(|(t, _)| *t).unwrap_or(head);
    // Groups of `per` tokens, each at its last token's time.
    let mut token_groups: Vec<usize> = Vec::new();
    for (g, group) in token_events.chunks(per).enumerate() {
        let at = group.last().map(|(t, _)| *t).unwrap_or(last);
        for (_, b) in group {
            events.push((at, b.clone()));
            token_groups.push(g);
        }
    }
    let mut trailer: Vec<serde_json::Value> = Vec::new();
    if let Some(f) = &reply.finish_reason {
        let mut c = chunk_for(
            reply,
            model,
            serde_json::json!([{"index": 0, "delta": {}, "finish_reason": f}]),
        );
        if !reply.usage {
            if let Some(tm) = &reply.timings {
                c["timings"] = tm.clone();
            }
        }
        trailer.push(c);
    }
    if reply.usage {
        let mut c = chunk_for(reply, model, serde_json::json!([]));
        c["usage"] = usage_of(reply, tokens);
        if let Some(tm) = &reply.timings {
            c["timings"] = tm.clone();
        }
        trailer.push(c);
    }
    let n_trailer_start = events.len();
    for c in &trailer {
        events.push((last, sse(c)));
    }
    if reply.done {
        events.push((last, b"data: [DONE]\n\n".to_vec()));
    }
    // Injected raw events, before event `at`.
    let mut with_inject: Vec<(f64, Vec<u8>, Option<usize>)> = Vec::new();
    let group_of = |i: usize| -> Option<usize> {
        let first_token = usize::from(reply.role_chunk);
        if i >= first_token && i < n_trailer_start {
            token_groups.get(i - first_token).map(|g| g + 1)
        } else if i >= n_trailer_start {
            Some(usize::MAX)
        } else {
            Some(0)
        }
    };
    for (i, (t, b)) in events.iter().enumerate() {
        for inj in reply.inject.iter().filter(|x| x.at == i) {
            with_inject.push((*t, inj.raw.as_bytes().to_vec(), None));
        }
        with_inject.push((*t, b.clone(), group_of(i)));
    }
    for inj in reply.inject.iter().filter(|x| x.at >= events.len()) {
        with_inject.push((last, inj.raw.as_bytes().to_vec(), None));
    }
    // One write per event, except token groups (a burst) and the trailer, which go together.
    let mut writes: Vec<(f64, Vec<u8>, usize)> = Vec::new();
    let mut prev_group: Option<usize> = None;
    for (t, b, g) in with_inject {
        let joins = matches!((g, prev_group), (Some(a), Some(p)) if a == p && a != 0);
        match writes.last_mut() {
            Some(w) if joins => {
                w.1.extend_from_slice(&b);
                w.2 += 1;
            }
            _ => writes.push((t, b, 1)),
        }
        prev_group = g;
    }
    writes
}

/// A non-streamed chat completion body.
fn completion_body(reply: &Reply, model: &str, tokens: &[String]) -> serde_json::Value {
    let mut body = if reply.text_completion {
        serde_json::json!({
            "id": "cmpl-scripted", "object": "text_completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "text": tokens.concat(), "logprobs": null, "finish_reason": reply.finish_reason}],
        })
    } else {
        serde_json::json!({
            "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": tokens.concat()}, "finish_reason": reply.finish_reason}],
        })
    };
    if !reply.tool_calls.is_empty() && !reply.text_completion {
        body["choices"][0]["message"]["tool_calls"] = tool_calls_json(reply);
        if tokens.is_empty() {
            body["choices"][0]["message"]["content"] = serde_json::Value::Null;
        }
    }
    if reply.usage {
        body["usage"] = usage_of(reply, tokens);
    }
    if let Some(tm) = &reply.timings {
        body["timings"] = tm.clone();
    }
    body
}

/// A response head with the framing header (`content_length` overrides the byte count).
fn wire_head(
    status: u16,
    headers: &[(String, String)],
    framing: Body,
    content_length: Option<u64>,
    body_len: usize,
) -> Vec<u8> {
    match framing {
        Body::Chunked => http::head(status, headers, http::Framing::Chunked, false),
        Body::Length => {
            let mut h = headers.to_vec();
            h.push((
                "content-length".into(),
                content_length.unwrap_or(body_len as u64).to_string(),
            ));
            head_only(status, &h, "keep-alive")
        }
        Body::Close => head_only(status, headers, "close"),
    }
}

fn head_only(status: u16, headers: &[(String, String)], connection: &str) -> Vec<u8> {
    let mut s = format!("HTTP/1.1 {status} {}\r\n", http::reason(status));
    for (n, v) in headers {
        s.push_str(&format!("{n}: {v}\r\n"));
    }
    s.push_str(&format!("connection: {connection}\r\n\r\n"));
    s.into_bytes()
}

/// A complete JSON or text response written at once.
fn simple(status: u16, content_type: &str, body: &[u8], close: bool) -> Vec<u8> {
    let mut out = http::head(
        status,
        &[("content-type".into(), content_type.into())],
        http::Framing::Length(body.len()),
        close,
    );
    out.extend_from_slice(body);
    out
}

fn not_found() -> Vec<u8> {
    serde_json::to_vec(
        &serde_json::json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}),
    )
    .unwrap_or_default()
}

mod serve;

pub use serve::{load, serve, var_pairs, Listen};

#[cfg(test)]
mod tests;
