//! `servegate replay`: an OpenAI-compatible serve that plays recorded evidence back with its original
//! timing, or (`--synthetic`) a paced stream whose true TTFT and decode rate are known. It is the serve a
//! reviewer without the device re-runs a gate against, the serve a gate author develops against, and the
//! timing reference servegate's own accuracy is measured against (docs/performance.md).
//!
//! Owns the replay serve: loading a run directory as a [`Recording`], matching requests to recorded
//! responses, the schedule of each response (a [`Plan`]) and writing it on time. It judges nothing and
//! writes no evidence; the runner that talks to it does.
//!
//! * **Matching**: by the request's prompt (the last user message's content) and order of arrival: the
//!   k-th request with prompt P gets the k-th recorded response for P, warmup requests included, in the
//!   recorded send order. An unmatched request gets a 404 JSON error naming the prompt.
//! * **Timing**: each recorded read is written (and flushed, `TCP_NODELAY`) at its recorded `t_ms`,
//!   divided by `--speed`, from the moment the request arrived; the response head at the recorded
//!   `head_ms`. Streams are sent `Transfer-Encoding: chunked`, one chunk per recorded read. A recorded
//!   transport error is replayed as a connection closed mid-body at the recorded `end_ms`.
//! * **Log**: the recorded `serve.log` is written to stdout first, line for line, so a gate's `route`
//!   assertion finds what the original serve said on the same lines; then the serve's own lines, each
//!   starting `replay:` and holding no directory or prompt text (except the 404 line naming the prompt).
//! * **Endpoints**: `GET /health` (200; 503 until `--ready-after-ms`), `GET /v1/models` (the recorded
//!   model ids and `replay`), `POST /v1/chat/completions` (streamed or not).
//! * **Timing log** (`--timing-log FILE`, JSON lines): per request the arrival (`CLOCK_MONOTONIC` ns) and
//!   the due and actual send time of every write; for synthetic replies the true TTFT and decode rate.
//!
//! Exits 0 on SIGTERM or SIGINT. Exit codes otherwise: 2 bad usage or cannot listen, 5 the run directory
//! cannot be read.

mod event_loop;
mod http;
pub mod pace;
pub mod scripted;
pub mod synthetic;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::EvidenceError;
use crate::evidence::{ResponseMeta, RunSummary, RUN_SCHEMA};
use crate::io::printer::Printer;
use crate::io::reads::{self, TimedRead};

pub use synthetic::SyntheticSpec;

/// One recorded request and its response, as the replay serves it back.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request's index in the run (`NN` of its files).
    pub index: usize,
    /// The prompt it was matched by: the last user message of `NN.request.json` (else run.json's prompt).
    pub prompt: String,
    /// The body's `model`, when present.
    pub model: Option<String>,
    /// HTTP status; `None` when no response arrived (a transport error before the head).
    pub status: Option<u16>,
    /// Recorded response headers (lower-case names).
    pub headers: BTreeMap<String, String>,
    /// ms from send to the response head.
    pub head_ms: Option<f64>,
    /// ms from send to the end of the body (or the failure).
    pub end_ms: Option<f64>,
    /// The body as timed reads.
    pub reads: Vec<TimedRead>,
    /// The recorded transport error.
    pub transport_error: Option<String>,
}

/// A run directory loaded for replay.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The run directory.
    pub dir: PathBuf,
    /// `serve.log`, when present.
    pub serve_log: Option<String>,
    /// Every request, in send order.
    pub items: Vec<Recorded>,
}

/// The prompt a request is matched by: the content of the last `user` message (a string, or the text
/// parts of a content array joined), else a completions-style `prompt` string.
pub(crate) fn prompt_of(body: &serde_json::Value) -> Option<String> {
    if let Some(messages) = body.get("messages").and_then(|m| m.as_array()) {
        let user = messages
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(|r| r.as_str()) == Some("user"))?;
        return match user.get("content")? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect(),
            ),
            _ => None,
        };
    }
    body.get("prompt")
        .and_then(|p| p.as_str())
        .map(String::from)
}

impl Recording {
    /// Loads `dir`: run.json (the request list), serve.log, and each request's `NN.request.json`,
    /// `NN.response.json` and `NN.reads.jsonl`. A missing reads file is an empty body; a malformed one is
    /// an error naming the file and line.
    pub fn load(dir: &Path) -> Result<Recording, EvidenceError> {
        let run_path = dir.join(crate::evidence::layout::RUN_FILE);
        let text =
            crate::io::input::read_to_string(&run_path, crate::io::input::MAX_EVIDENCE_BYTES)
                .map_err(|e| EvidenceError::io(&run_path, e))?;
        // A file of the run read whole, bounded (`crate::io::input`); None when absent.
        let read = |path: &Path| match crate::io::input::read(
            path,
            crate::io::input::MAX_EVIDENCE_BYTES,
        ) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(EvidenceError::io(path, e)),
        };
        let malformed = |path: &Path, reason: String| EvidenceError::Malformed {
            path: path.to_path_buf(),
            reason,
        };
        let run: RunSummary =
            serde_json::from_str(&text).map_err(|e| malformed(&run_path, e.to_string()))?;
        if run.schema != RUN_SCHEMA {
            return Err(malformed(
                &run_path,
                format!("schema {:?}, expected {RUN_SCHEMA:?}", run.schema),
            ));
        }
        let serve_log = read(&dir.join(crate::evidence::layout::SERVE_LOG))?
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let mut items = Vec::new();
        for rec in &run.requests {
            let req_path = dir.join(crate::evidence::layout::request_file(rec.index));
            let body: Option<serde_json::Value> = match read(&req_path)? {
                Some(t) => Some(
                    serde_json::from_slice(&t).map_err(|e| malformed(&req_path, e.to_string()))?,
                ),
                None => None,
            };
            let prompt = body
                .as_ref()
                .and_then(prompt_of)
                .unwrap_or_else(|| rec.prompt.clone());
            let model = body
                .as_ref()
                .and_then(|b| b.get("model"))
                .and_then(|m| m.as_str())
                .map(String::from);
            let meta_path = dir.join(crate::evidence::layout::response_file(rec.index));
            let meta: ResponseMeta = match read(&meta_path)? {
                Some(t) => {
                    serde_json::from_slice(&t).map_err(|e| malformed(&meta_path, e.to_string()))?
                }
                None => ResponseMeta {
                    status: rec.http_status,
                    transport_error: rec.transport_error.clone(),
                    ..Default::default()
                },
            };
            let reads_path = dir.join(crate::evidence::layout::reads_file(rec.index));
            let reads = match read(&reads_path)? {
                Some(t) => std::str::from_utf8(&t)
                    .map_err(|e| e.to_string())
                    .and_then(|t| reads::decode(t).map_err(|e| e.to_string()))
                    .map_err(|e| malformed(&reads_path, e))?,
                None => Vec::new(),
            };
            items.push(Recorded {
                index: rec.index,
                prompt,
                model,
                status: meta.status.or(rec.http_status),
                headers: meta.headers,
                head_ms: meta.head_ms,
                end_ms: meta.end_ms,
                reads,
                transport_error: meta.transport_error.or_else(|| rec.transport_error.clone()),
            });
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            serve_log,
            items,
        })
    }

    /// The recorded model ids (from the request bodies), first seen first.
    pub(crate) fn models(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in self.items.iter().filter_map(|r| r.model.clone()) {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }

    /// Indexes into `items` of the responses recorded for `prompt`, in send order.
    pub(crate) fn for_prompt(&self, prompt: &str) -> Vec<usize> {
        self.items
            .iter()
            .enumerate()
            .filter(|(_, r)| r.prompt == prompt)
            .map(|(i, _)| i)
            .collect()
    }
}

/// Which recorded response answers the k-th request for a prompt (k counted per prompt from 0).
#[derive(Debug, Default)]
pub struct Matcher {
    served: Mutex<HashMap<String, usize>>,
}

impl Matcher {
    /// The item index for the next request with `prompt`, counting it as served; `Err` with the reason
    /// (for the 404) when there is none. With `cycle`, the k-th request past the end starts over.
    pub(crate) fn next(&self, rec: &Recording, prompt: &str, cycle: bool) -> Result<usize, String> {
        let candidates = rec.for_prompt(prompt);
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let k = served.entry(prompt.to_string()).or_insert(0);
        if candidates.is_empty() {
            let known: Vec<String> = {
                let mut v: Vec<String> = Vec::new();
                for r in &rec.items {
                    if !v.contains(&r.prompt) {
                        v.push(r.prompt.clone());
                    }
                }
                v.iter().map(|p| format!("{p:?}")).collect()
            };
            return Err(format!(
                "servegate replay: no recorded response for the prompt {prompt:?} in {} (recorded prompts: {})",
                rec.dir.display(),
                known.join(", ")
            ));
        }
        let i = if *k < candidates.len() {
            candidates[*k]
        } else if cycle {
            candidates[*k % candidates.len()]
        } else {
            return Err(format!(
                "servegate replay: all {} recorded responses for the prompt {prompt:?} have been served (this is request {} for it; --cycle starts over)",
                candidates.len(),
                *k + 1
            ));
        };
        *k += 1;
        Ok(i)
    }
}

/// What one write of a response carries (for the timing log and the true figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendKind {
    /// A recorded read, written back.
    Recorded,
    /// Synthetic: the role-only chunk.
    Role,
    /// Synthetic: a chunk of tokens.
    Token,
    /// Synthetic: the finish-reason chunk.
    Finish,
    /// Synthetic: the usage chunk.
    Usage,
    /// Synthetic: `data: [DONE]`.
    Done,
    /// A whole non-streamed body.
    Body,
}

impl SendKind {
    fn name(self) -> &'static str {
        match self {
            SendKind::Recorded => "recorded",
            SendKind::Role => "role",
            SendKind::Token => "token",
            SendKind::Finish => "finish",
            SendKind::Usage => "usage",
            SendKind::Done => "done",
            SendKind::Body => "body",
        }
    }
}

/// One write of a response body, due `at` after the request arrived.
#[derive(Debug, Clone)]
pub struct Send {
    /// Due time from the request's arrival.
    pub at: Duration,
    /// Body bytes (framed as one chunk when chunked).
    pub bytes: Vec<u8>,
    /// Completion tokens in it (synthetic token chunks; 0 otherwise).
    pub tokens: u32,
    /// What it is.
    pub kind: SendKind,
}

/// The schedule of one response.
#[derive(Debug, Clone)]
pub struct Plan {
    /// HTTP status; 0 = send no response at all (close at `abort_at`).
    pub status: u16,
    /// Response headers (framing and `connection` are added).
    pub headers: Vec<(String, String)>,
    /// `Transfer-Encoding: chunked` (else `Content-Length`).
    pub chunked: bool,
    /// Due time of the head from the request's arrival.
    pub head_at: Duration,
    /// The body writes, in order, due times non-decreasing.
    pub sends: Vec<Send>,
    /// Close the connection mid-body at this time (a replayed transport error) instead of ending the body.
    pub abort_at: Option<Duration>,
    /// For logs: `recorded 03`, `synthetic #4`.
    pub label: String,
}

fn scaled(ms: f64, speed: f64) -> Duration {
    Duration::from_secs_f64((ms / speed).max(0.0) / 1000.0)
}

/// The plan that plays recorded response `r` back at `speed`.
pub(crate) fn recorded_plan(r: &Recorded, speed: f64) -> Plan {
    let label = format!("recorded {:02}", r.index);
    let first_read = r.reads.first().map(|x| x.t_ms);
    let last_read = r.reads.last().map(|x| x.t_ms).unwrap_or(0.0);
    let abort_at = r
        .transport_error
        .as_ref()
        .map(|_| scaled(r.end_ms.unwrap_or(last_read).max(last_read), speed));
    let Some(status) = r.status else {
        return Plan {
            status: 0,
            headers: Vec::new(),
            chunked: false,
            head_at: Duration::ZERO,
            sends: Vec::new(),
            abort_at: abort_at.or(Some(Duration::ZERO)),
            label,
        };
    };
    let content_type = r
        .headers
        .get("content-type")
        .cloned()
        .unwrap_or_else(|| "application/json".into());
    let chunked = r.transport_error.is_some()
        || content_type.contains("event-stream")
        || r.headers
            .get("transfer-encoding")
            .map(|t| t.contains("chunked"))
            .unwrap_or(false);
    let head_ms = match (r.head_ms, first_read) {
        (Some(h), Some(f)) => h.min(f),
        (Some(h), None) => h,
        (None, Some(f)) => f,
        (None, None) => r.end_ms.unwrap_or(0.0),
    };
    let mut headers = vec![("content-type".to_string(), content_type)];
    headers.push(("x-servegate-replay".into(), format!("{:02}", r.index)));
    let sends = r
        .reads
        .iter()
        .map(|x| Send {
            at: scaled(x.t_ms, speed),
            bytes: x.bytes.clone(),
            tokens: 0,
            kind: SendKind::Recorded,
        })
        .collect();
    Plan {
        status,
        headers,
        chunked,
        head_at: scaled(head_ms, speed),
        sends,
        abort_at,
        label,
    }
}

/// What was sent of one response: the send time of each write (ms from arrival, taken just before the
/// write), and whether the connection must close.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sent {
    /// Head send time, ms from arrival (`None` when no head was sent).
    pub head_ms: Option<f64>,
    /// Per send of the plan: ms from arrival, taken just before its write (`None` if never written).
    pub sends_ms: Vec<Option<f64>>,
    /// The response ended (last byte written), ms from arrival.
    pub end_ms: f64,
    /// The connection must close (abort, write failure, no response).
    pub closed: bool,
    /// A write failed (the client went away), verbatim.
    pub write_error: Option<String>,
}

/// Writes `plan` to `stream` on time, from `t0` (the request's arrival). `close` adds `connection: close`.
pub(crate) fn execute(stream: &mut TcpStream, plan: &Plan, t0: Instant, close: bool) -> Sent {
    let ms = |t: Instant| pace::ms_between(t0, t);
    let mut sent = Sent {
        sends_ms: vec![None; plan.sends.len()],
        ..Default::default()
    };
    if plan.status == 0 {
        pace::sleep_until(t0 + plan.abort_at.unwrap_or_default());
        let _ = stream.shutdown(Shutdown::Both);
        sent.end_ms = ms(Instant::now());
        sent.closed = true;
        return sent;
    }
    let framing = if plan.chunked {
        http::Framing::Chunked
    } else {
        http::Framing::Length(plan.sends.iter().map(|s| s.bytes.len()).sum())
    };
    let close_after = close || plan.abort_at.is_some();
    let frame = |out: &mut Vec<u8>, s: &Send| {
        if plan.chunked {
            http::push_chunk(out, &s.bytes)
        } else {
            out.extend_from_slice(&s.bytes)
        }
    };
    let n = plan.sends.len();
    let ends_body = |i: usize| plan.chunked && plan.abort_at.is_none() && i + 1 == n;
    // The head, with the first write when that is due no later (they leave together, as from a real serve).
    let mut buf = http::head(plan.status, &plan.headers, framing, close_after);
    let mut next = 0;
    if n > 0 && plan.sends[0].at <= plan.head_at {
        frame(&mut buf, &plan.sends[0]);
        if ends_body(0) {
            buf.extend_from_slice(http::LAST_CHUNK);
        }
        next = 1;
    } else if n == 0 && plan.chunked && plan.abort_at.is_none() {
        buf.extend_from_slice(http::LAST_CHUNK);
    }
    pace::sleep_until(t0 + plan.head_at);
    let t = Instant::now();
    sent.head_ms = Some(ms(t));
    if next == 1 {
        sent.sends_ms[0] = Some(ms(t));
    }
    if let Err(e) = stream.write_all(&buf) {
        sent.write_error = Some(e.to_string());
        sent.closed = true;
        sent.end_ms = ms(Instant::now());
        return sent;
    }
    for i in next..n {
        let s = &plan.sends[i];
        let mut out = Vec::with_capacity(s.bytes.len() + 16);
        frame(&mut out, s);
        if ends_body(i) {
            out.extend_from_slice(http::LAST_CHUNK);
        }
        pace::sleep_until(t0 + s.at);
        sent.sends_ms[i] = Some(ms(Instant::now()));
        if let Err(e) = stream.write_all(&out) {
            sent.write_error = Some(e.to_string());
            sent.closed = true;
            break;
        }
    }
    if let Some(abort) = plan.abort_at {
        if sent.write_error.is_none() {
            pace::sleep_until(t0 + abort);
        }
        let _ = stream.shutdown(Shutdown::Both);
        sent.closed = true;
    }
    sent.end_ms = ms(Instant::now());
    sent.closed |= close_after;
    sent
}

/// What the serve answers from.
#[derive(Debug)]
pub enum Source {
    /// A recorded run.
    Recording {
        /// The run.
        rec: Recording,
        /// Served counts per prompt.
        matcher: Matcher,
        /// Start over when a prompt's recorded responses are used up.
        cycle: bool,
    },
    /// The synthetic paced stream.
    Synthetic(SyntheticSpec),
}

/// The serve's state, shared by the connection threads.
#[derive(Debug)]
pub struct App {
    /// Recording or synthetic.
    pub source: Source,
    /// Time scale of recorded times.
    pub speed: f64,
    /// /health answers 200 from this instant on.
    pub ready_at: Instant,
    timing: Option<Mutex<std::fs::File>>,
    seq: AtomicU64,
    first_ready: AtomicBool,
    in_flight: AtomicU64,
    /// Where the serve's own log lines go (stderr).
    printer: Printer,
}

impl App {
    /// A serve answering from `source`.
    pub fn new(
        source: Source,
        speed: f64,
        ready_after: Duration,
        timing_log: Option<std::fs::File>,
    ) -> App {
        App {
            source,
            speed,
            ready_at: Instant::now() + ready_after,
            timing: timing_log.map(Mutex::new),
            seq: AtomicU64::new(0),
            first_ready: AtomicBool::new(false),
            in_flight: AtomicU64::new(0),
            printer: Printer::std(),
        }
    }

    /// Where the serve's log lines go.
    pub(crate) fn printer(&self) -> &Printer {
        &self.printer
    }

    fn log_timing(&self, v: serde_json::Value) {
        if let Some(f) = &self.timing {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{}", serde_json::to_string(&v).unwrap_or_default());
            let _ = f.flush();
        }
    }

    fn models(&self) -> Vec<String> {
        let mut ids = match &self.source {
            Source::Recording { rec, .. } => rec.models(),
            Source::Synthetic(s) => vec![s.model.clone()],
        };
        if !ids.iter().any(|m| m == "replay") {
            ids.push("replay".into());
        }
        ids
    }

    /// Answers one request on `stream` (blocking, on the calling thread); returns false when the
    /// connection must close.
    pub(crate) fn respond(&self, req: &http::Request, stream: &mut TcpStream) -> bool {
        match self.answer(req) {
            Answer::Now { bytes, keep_open } => stream.write_all(&bytes).is_ok() && keep_open,
            Answer::Paced(chat) => {
                let _leave = InFlight(&self.in_flight);
                let sent = execute(stream, &chat.plan, req.arrived, req.close);
                self.chat_done(&chat, req, &sent);
                !sent.closed
            }
        }
    }

    /// What to answer `req` with: bytes to write at once (health, models, errors, refusals), or a chat
    /// reply's [`Plan`] to write on time. A [`Answer::Paced`] reply counts as in flight until
    /// [`App::chat_done`] is called for it.
    pub(crate) fn answer(&self, req: &http::Request) -> Answer {
        let route = req.path.trim_end_matches('/');
        let simple = |status: u16, body: serde_json::Value| Answer::Now {
            bytes: http::json_response(status, &body, req.close),
            keep_open: !req.close,
        };
        match (req.method.as_str(), route) {
            ("GET", "/health") | ("GET", "/v1/health") => {
                let now = Instant::now();
                if now < self.ready_at {
                    return simple(503, serde_json::json!({"status": "loading model"}));
                }
                if !self.first_ready.swap(true, Ordering::SeqCst) {
                    self.log_timing(serde_json::json!({"event": "first_200_on_health", "mono_ns": pace::mono_ns_of(now), "ready_at_mono_ns": pace::mono_ns_of(self.ready_at)}));
                }
                simple(200, serde_json::json!({"status": "ok"}))
            }
            ("GET", "/v1/models") | ("GET", "/models") => {
                let data: Vec<serde_json::Value> = self.models().into_iter().map(|id| serde_json::json!({"id": id, "object": "model", "owned_by": "servegate-replay"})).collect();
                simple(200, serde_json::json!({"object": "list", "data": data}))
            }
            ("POST", "/v1/chat/completions") | ("POST", "/chat/completions") => self.chat(req),
            (
                _,
                "/health"
                | "/v1/health"
                | "/v1/models"
                | "/models"
                | "/v1/chat/completions"
                | "/chat/completions",
            ) => simple(
                405,
                http::error_body(
                    405,
                    "method_not_allowed",
                    &format!("{} is not allowed on {}", req.method, req.path),
                ),
            ),
            _ => simple(
                404,
                http::error_body(
                    404,
                    "not_found",
                    &format!("servegate replay has no route {} {}", req.method, req.path),
                ),
            ),
        }
    }

    fn chat(&self, req: &http::Request) -> Answer {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let refuse = |status: u16, kind: &str, msg: String| {
            self.printer
                .errln(&format!("replay: #{seq} {status}: {msg}"));
            self.log_timing(serde_json::json!({"request": seq, "status": status, "error": msg, "arrived_mono_ns": pace::mono_ns_of(req.arrived)}));
            Answer::Now {
                bytes: http::json_response(
                    status,
                    &http::error_body(status, kind, &msg),
                    req.close,
                ),
                keep_open: !req.close,
            }
        };
        let body: serde_json::Value = match serde_json::from_slice(&req.body) {
            Ok(v) => v,
            Err(e) => {
                return refuse(
                    400,
                    "invalid_request_error",
                    format!("the request body is not JSON: {e}"),
                )
            }
        };
        let Some(prompt) = prompt_of(&body) else {
            return refuse(
                400,
                "invalid_request_error",
                "the request has no user message to match a recorded response by".into(),
            );
        };
        let stream_flag = body
            .get("stream")
            .and_then(|s| s.as_bool())
            .unwrap_or(false);
        // Requests in flight at this one's arrival, itself included (the synthetic slowdown's k).
        let in_flight = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let plan = match &self.source {
            Source::Synthetic(spec) => {
                synthetic::plan(&spec.under_load(in_flight), seq, stream_flag)
            }
            Source::Recording {
                rec,
                matcher,
                cycle,
            } => match matcher.next(rec, &prompt, *cycle) {
                Ok(i) => recorded_plan(&rec.items[i], self.speed),
                Err(msg) => {
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                    return refuse(404, "not_found_error", msg);
                }
            },
        };
        Answer::Paced(Chat {
            seq,
            plan,
            stream: stream_flag,
            in_flight,
        })
    }

    /// Logs a paced chat reply once written (`sent`): one timing-log line (every write's due and actual
    /// send time; for a synthetic stream the true TTFT and decode rate) and one stderr line. The caller
    /// leaves the in-flight count afterwards.
    pub(crate) fn chat_done(&self, chat: &Chat, req: &http::Request, sent: &Sent) {
        let (seq, plan, stream_flag) = (chat.seq, &chat.plan, chat.stream);
        let end = Instant::now();
        let mut sends = Vec::with_capacity(plan.sends.len());
        let mut token_sends = Vec::new();
        for (s, t) in plan.sends.iter().zip(&sent.sends_ms) {
            sends.push(serde_json::json!({"kind": s.kind.name(), "tokens": s.tokens, "due_ms": s.at.as_secs_f64() * 1000.0, "sent_ms": t}));
            if let Some(t) = t {
                token_sends.push((s.tokens, *t));
            }
        }
        let mut line = serde_json::json!({
            "request": seq,
            "source": plan.label,
            "status": plan.status,
            "stream": stream_flag,
            "arrived_mono_ns": pace::mono_ns_of(req.arrived),
            "end_mono_ns": pace::mono_ns_of(end),
            "head_ms": sent.head_ms,
            "end_ms": sent.end_ms,
            "write_error": sent.write_error,
            "sends": sends,
            "in_flight": chat.in_flight,
        });
        if matches!(self.source, Source::Synthetic(_)) && stream_flag {
            let (ttft, rate) = synthetic::true_figures(&token_sends);
            line["true_ttft_ms"] = serde_json::json!(ttft);
            line["true_decode_tok_s"] = serde_json::json!(rate);
        }
        self.log_timing(line);
        self.printer.errln(&format!(
            "replay: #{seq} {} -> {} ({} writes, {:.1} ms{})",
            plan.label,
            if plan.status == 0 {
                "no response".to_string()
            } else {
                format!("HTTP {}", plan.status)
            },
            plan.sends.len(),
            sent.end_ms,
            sent.write_error
                .as_deref()
                .map(|e| format!("; write failed: {e}"))
                .unwrap_or_default()
        ));
    }

    /// Leaves the in-flight count a paced reply entered (the event loop's path; the blocking path uses a
    /// guard).
    pub(crate) fn leave(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A chat reply to write on time: its request number, plan, whether streamed, and requests in flight at
/// its arrival (itself included).
#[derive(Debug)]
pub(crate) struct Chat {
    pub(crate) seq: u64,
    pub(crate) plan: Plan,
    pub(crate) stream: bool,
    pub(crate) in_flight: u64,
}

/// What [`App::answer`] says to do with a request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Write these bytes now; close after unless `keep_open`.
    Now { bytes: Vec<u8>, keep_open: bool },
    /// Write this reply on its schedule, then log it ([`App::chat_done`]).
    Paced(Chat),
}

/// Leaves the in-flight count when a chat request is done (however it ends).
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one connection: requests in order until the client closes or asks to.
fn handle(app: &App, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(600)));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    loop {
        match http::read_request(&mut reader, &mut writer) {
            Ok(req) => {
                if !app.respond(&req, &mut writer) {
                    let _ = writer.shutdown(Shutdown::Write);
                    return;
                }
            }
            Err(http::ReadError::Closed) => return,
            Err(http::ReadError::Refused(status, msg)) => {
                app.printer
                    .errln(&format!("replay: refused a request: {status} {msg}"));
                let _ = writer.write_all(&http::json_response(
                    status,
                    &http::error_body(status, "invalid_request_error", &msg),
                    true,
                ));
                let _ = writer.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

/// Accepts connections forever. A synthetic serve runs every connection on one thread
/// ([`event_loop::serve`]: hundreds of concurrent streams from one core, each write still stamped just
/// before it is made); a recording gets one thread per connection.
pub fn serve(listener: TcpListener, app: Arc<App>) -> std::io::Result<()> {
    if matches!(app.source, Source::Synthetic(_)) {
        return event_loop::serve(listener, app);
    }
    loop {
        let (stream, _) = listener.accept()?;
        let app = Arc::clone(&app);
        std::thread::Builder::new()
            .name("replay-conn".into())
            .spawn(move || handle(&app, stream))?;
    }
}

/// `http://HOST:PORT` of `addr` (an IPv6 host in brackets).
pub fn url_of(addr: &std::net::SocketAddr) -> String {
    match addr {
        std::net::SocketAddr::V4(a) => format!("http://{}:{}", a.ip(), a.port()),
        std::net::SocketAddr::V6(a) => format!("http://[{}]:{}", a.ip(), a.port()),
    }
}

/// Slowest `--speed` (recorded times divided by it: 1000x slower).
pub(crate) const MIN_SPEED: f64 = 0.001;
/// Fastest `--speed`.
pub(crate) const MAX_SPEED: f64 = 1000.0;

/// `--speed` in range ([`MIN_SPEED`]..=[`MAX_SPEED`]); the error is the usage message.
pub fn check_speed(speed: f64) -> Result<(), String> {
    if speed.is_finite() && (MIN_SPEED..=MAX_SPEED).contains(&speed) {
        return Ok(());
    }
    Err(format!(
        "--speed must be a number between {MIN_SPEED} and {MAX_SPEED}, got {speed:?}"
    ))
}

/// `--ready-after-ms` in range (0 to one hour); the error is the usage message.
pub fn check_ready_after(ms: f64) -> Result<(), String> {
    if ms.is_finite() && (0.0..=synthetic::MAX_MS).contains(&ms) {
        return Ok(());
    }
    Err(format!(
        "--ready-after-ms must be between 0 and {} (one hour), got {ms:?}",
        synthetic::MAX_MS
    ))
}

/// The synthetic stream's flags as given (`--tokens`, `--ttft-ms`, `--itl-ms` or `--tok-s`, ...), before
/// they are checked into a [`SyntheticSpec`] ([`SyntheticFlags::spec`]).
#[derive(Debug, Clone, Default)]
pub struct SyntheticFlags {
    /// Completion tokens per reply.
    pub tokens: Option<u32>,
    /// ms from the request's arrival to the first token chunk.
    pub ttft_ms: Option<f64>,
    /// ms between consecutive tokens.
    pub itl_ms: Option<f64>,
    /// Decode rate in tokens per second (instead of `itl_ms`).
    pub tok_s: Option<f64>,
    /// Tokens per chunk.
    pub per_chunk: u32,
    /// A role-only first chunk.
    pub role_chunk: bool,
    /// A usage chunk before [DONE].
    pub usage: bool,
    /// The model id.
    pub model: String,
    /// llama.cpp-style `timings` on the finish chunk.
    pub timings: bool,
    /// A buffering proxy: every token chunk in one write at the end.
    pub burst: bool,
    /// Slowdown under concurrency, percent per extra request in flight.
    pub slowdown_pct: f64,
}

impl SyntheticFlags {
    /// The spec the flags give; the error is the usage message.
    pub fn spec(&self) -> Result<SyntheticSpec, String> {
        let tokens = self.tokens.ok_or("--synthetic needs --tokens N")?;
        let ttft_ms = self.ttft_ms.ok_or("--synthetic needs --ttft-ms X")?;
        let itl_ms = match (self.itl_ms, self.tok_s) {
            (Some(g), None) => g,
            (None, Some(r))
                if r.is_finite()
                    && (1000.0 / synthetic::MAX_MS..=1000.0 / synthetic::MIN_ITL_MS)
                        .contains(&r) =>
            {
                1000.0 / r
            }
            (None, Some(r)) => {
                return Err(format!(
                    "--tok-s must be a number between {:.6} and {}, got {r:?}",
                    1000.0 / synthetic::MAX_MS,
                    1000.0 / synthetic::MIN_ITL_MS
                ))
            }
            _ => return Err("--synthetic needs --itl-ms G or --tok-s R".into()),
        };
        let spec = SyntheticSpec {
            tokens,
            ttft_ms,
            itl_ms,
            per_chunk: self.per_chunk,
            role_chunk: self.role_chunk,
            usage: self.usage,
            model: self.model.clone(),
            timings: self.timings,
            burst: self.burst,
            slowdown_pct: self.slowdown_pct,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// What the replay serve prints on stdout before it listens: the recorded `serve.log`, line for line and
/// byte for byte (so route assertions see the original lines where they were; a last line without a line
/// break gets one), then its own line: `replay: N recorded responses, speed S`, or the synthetic stream's
/// figures. The serve's own lines hold no user-controlled text (the directory, prompts): a route regex must
/// not find in them what the original serve never said.
pub fn opening(source: &Source, speed: f64) -> Vec<u8> {
    let mut out = Vec::new();
    match source {
        Source::Recording { rec, .. } => {
            if let Some(log) = &rec.serve_log {
                out.extend_from_slice(log.as_bytes());
                if !log.is_empty() && !log.ends_with('\n') {
                    out.push(b'\n');
                }
            }
            let _ = writeln!(
                out,
                "replay: {} recorded responses, speed {}",
                rec.items.len(),
                speed
            );
        }
        Source::Synthetic(s) => {
            let _ = writeln!(
                out,
                "replay: synthetic stream: {} tokens, first token at {} ms, {} ms between tokens ({:.1} tok/s), {} per chunk{}{}{}{}",
                s.tokens,
                s.ttft_ms,
                s.itl_ms,
                s.tok_s(),
                s.per_chunk,
                if s.role_chunk { ", role chunk" } else { "" },
                if s.usage { ", usage chunk" } else { "" },
                if s.timings { ", llama.cpp timings" } else { "" },
                if s.burst { ", burst: all token chunks in one write at the end" } else { "" }
            );
        }
    }
    out
}

/// The `listening` line of the timing log, for the serve at `addr`.
pub fn log_listening(app: &App, addr: &std::net::SocketAddr) {
    app.log_timing(
        serde_json::json!({"event": "listening", "url": url_of(addr), "mono_ns": pace::mono_ns()}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(prompts: &[&str]) -> Recording {
        let items = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| Recorded {
                index: i,
                prompt: p.to_string(),
                model: Some("m".into()),
                status: Some(200),
                headers: BTreeMap::new(),
                head_ms: None,
                end_ms: None,
                reads: Vec::new(),
                transport_error: None,
            })
            .collect();
        Recording {
            dir: PathBuf::from("runs/x"),
            serve_log: None,
            items,
        }
    }

    #[test]
    fn kth_request_for_a_prompt_gets_the_kth_recorded_response() {
        let r = rec(&["a", "b", "a", "b"]);
        let m = Matcher::default();
        assert_eq!(m.next(&r, "b", false), Ok(1));
        assert_eq!(m.next(&r, "a", false), Ok(0));
        assert_eq!(m.next(&r, "a", false), Ok(2));
        assert_eq!(m.next(&r, "b", false), Ok(3));
        let err = m.next(&r, "a", false).unwrap_err();
        assert!(
            err.contains("all 2 recorded responses") && err.contains("\"a\""),
            "{err}"
        );
    }

    #[test]
    fn cycle_starts_a_prompt_over() {
        let r = rec(&["a", "a"]);
        let m = Matcher::default();
        let got: Vec<usize> = (0..5).map(|_| m.next(&r, "a", true).unwrap()).collect();
        assert_eq!(got, vec![0, 1, 0, 1, 0]);
    }

    #[test]
    fn unknown_prompt_is_named_with_the_recorded_ones() {
        let err = Matcher::default()
            .next(&rec(&["a"]), "zzz", false)
            .unwrap_err();
        assert!(
            err.contains("\"zzz\"") && err.contains("recorded prompts: \"a\""),
            "{err}"
        );
    }

    #[test]
    fn prompt_is_the_last_user_message_string_or_text_parts() {
        let b = serde_json::json!({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "one"}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "two"}]});
        assert_eq!(prompt_of(&b).as_deref(), Some("two"));
        let b = serde_json::json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]});
        assert_eq!(prompt_of(&b).as_deref(), Some("ab"));
        assert_eq!(
            prompt_of(&serde_json::json!({"messages": [{"role": "system", "content": "s"}]})),
            None
        );
    }

    #[test]
    fn recorded_plan_scales_times_and_streams_chunked() {
        let mut r = rec(&["a"]).items.remove(0);
        r.headers
            .insert("content-type".into(), "text/event-stream".into());
        r.head_ms = Some(100.0);
        r.reads = vec![
            TimedRead {
                recv_ms: None,
                t_ms: 100.0,
                bytes: b"data: 1\n\n".to_vec(),
            },
            TimedRead {
                recv_ms: None,
                t_ms: 300.0,
                bytes: b"data: 2\n\n".to_vec(),
            },
        ];
        let p = recorded_plan(&r, 2.0);
        assert!(p.chunked);
        assert_eq!(p.head_at, Duration::from_millis(50));
        assert_eq!(p.sends[1].at, Duration::from_millis(150));
        assert_eq!(p.abort_at, None);
    }

    #[test]
    fn recorded_transport_error_closes_mid_body_at_the_recorded_end() {
        let mut r = rec(&["a"]).items.remove(0);
        r.reads = vec![TimedRead {
            recv_ms: None,
            t_ms: 10.0,
            bytes: b"{".to_vec(),
        }];
        r.transport_error = Some("body read failed after 1 bytes: reset".into());
        r.end_ms = Some(40.0);
        let p = recorded_plan(&r, 1.0);
        assert!(p.chunked);
        assert_eq!(p.abort_at, Some(Duration::from_millis(40)));
        r.status = None;
        assert_eq!(recorded_plan(&r, 1.0).status, 0);
    }
}
