//! The client: sends OpenAI chat-completion requests and records the response body as timed reads, and
//! probes a readiness URL ([`probe`], used by [`crate::io::serve`] for a started serve and by the runner for
//! a `url` serve). One of the modules that touch sockets (with `serve` and `load_client`). It measures
//! nothing: it stamps each `read()` of the body with the milliseconds since the request was sent
//! (monotonic clock; for `http://` the kernel's receive time, see [`send_within`]) and hands the reads on.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::io::reads::TimedRead;
use crate::spec::RequestSpec;

/// What one request produced, shared with the load client ([`crate::io::exchange`]).
pub use crate::io::exchange::{Exchange, ResponseMeta, BODY_CAP_BYTES};

/// Builds the chat-completion body for one prompt: OpenAI field names, `stream_options.include_usage` when
/// streamed, `extra` merged last (it may override anything but `messages` and `stream`).
pub(crate) fn request_body(req: &RequestSpec, prompt: &str) -> serde_json::Value {
    let mut messages = Vec::new();
    if let Some(system) = &req.system {
        messages.push(serde_json::json!({"role": "system", "content": system}));
    }
    messages.push(serde_json::json!({"role": "user", "content": prompt}));
    let mut body = serde_json::Map::new();
    body.insert("model".into(), req.served_model.clone().into());
    body.insert("messages".into(), messages.into());
    body.insert("max_tokens".into(), req.max_tokens.into());
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), t.into());
    }
    body.insert("stream".into(), req.stream.into());
    if req.stream {
        body.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
    for (k, v) in &req.extra {
        body.insert(k.clone(), v.clone());
    }
    serde_json::Value::Object(body)
}

/// An HTTP client for one run: no proxy, no redirects (a redirect is a failure to look into, not to follow),
/// rustls for `https://`, no connection reuse (each request opens its own connection).
pub(crate) fn http_client(
    timeout: Duration,
    api_key: Option<&str>,
) -> Result<reqwest::blocking::Client, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(key) = api_key {
        let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| "the API key is not a valid header value".to_string())?;
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    reqwest::blocking::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        // Every request on a fresh connection: a pooled keep-alive connection the serve closed between two
        // requests fails the next one before a byte of it is answered ("connection closed before message
        // completed", seen on the reference pair gate), a failure of the client's, not the serve's; and every
        // request's TTFT then includes the same connect (on loopback, about 0.1 ms).
        .pool_max_idle_per_host(0)
        .timeout(timeout)
        .default_headers(headers)
        .user_agent(concat!("servegate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| crate::error::OneLine(&e).to_string())
}

/// The client every chat-completion request of a gate without `[load]` is sent with: to an `http://`
/// serve through the load client's path ([`crate::io::load_client::SingleClient`]: one request on a
/// current-thread runtime, each read stamped with the kernel's receive time, `recv_ms` filled), to an
/// `https://` serve through reqwest ([`send_reqwest`]: each read timed when it returned, `recv_ms` None).
/// Built once per run; holds the API key (sent as `Authorization: Bearer`, never recorded) and the
/// request timeout.
pub struct Sender {
    http: reqwest::blocking::Client,
    single: crate::io::load_client::SingleClient,
    api_key: Option<String>,
    timeout: Duration,
}

impl Sender {
    /// A sender whose requests end by `timeout` (the gate's `request.timeout_s`) and carry `api_key`.
    /// Errors: the key is not a valid header value, or the TLS backend or the runtime cannot start.
    pub fn new(timeout: Duration, api_key: Option<&str>) -> Result<Sender, String> {
        Ok(Sender {
            http: http_client(timeout, api_key)?,
            single: crate::io::load_client::SingleClient::new()?,
            api_key: api_key.map(str::to_string),
            timeout,
        })
    }

    /// The reqwest client the sender uses for `https://` (and that probes and other GETs may share).
    pub fn http(&self) -> &reqwest::blocking::Client {
        &self.http
    }
}

/// Sends `body` to `{base_url}/v1/chat/completions` and records the response as timed reads, the whole
/// request bounded by the sender's timeout. Never fails: a transport error is recorded in the exchange.
pub fn send(sender: &Sender, base_url: &str, body: &serde_json::Value) -> Exchange {
    send_within(sender, base_url, body, None)
}

/// As [`send`], and the whole request (connect, head and body) ends by `timeout` (else the sender's own)
/// after it began: a serve that trickles a byte now and then cannot hold the runner longer than that.
/// The body is kept up to [`BODY_CAP_BYTES`] (then `body_truncated`, and the connection is dropped).
///
/// **Timing**, `http://`: the request counts as sent just before the write of its bytes (after the
/// connect); each read's `t_ms` is the kernel's receive time of the last segment it took, and `recv_ms`
/// when the client's `recvmsg` returned, both ms from the send. So a client that was not scheduled (a busy
/// runner, a throttled container) does not move `t_ms`; `recv_ms − t_ms` says how late it read.
/// `https://`: [`send_reqwest`] (the request counts as sent when reqwest was handed it, each `t_ms` is
/// when the read returned, `recv_ms` is None).
///
/// Failures, in `transport_error`: `connect failed: ...`, `timeout: the body did not end within T s of the
/// request (request.timeout_s); N bytes kept`, `body read failed after N bytes: ...`, `request failed: ...`,
/// and a redirect status is `redirect refused: HTTP 302 to LOCATION; servegate follows no redirect ...`
/// (the body still read). Response headers: lower-case names, repeated ones joined with `, `.
pub(crate) fn send_within(
    sender: &Sender,
    base_url: &str,
    body: &serde_json::Value,
    timeout: Option<Duration>,
) -> Exchange {
    let timeout = timeout.unwrap_or(sender.timeout);
    if base_url.starts_with("http://") {
        match crate::io::load_client::Target::parse(base_url, sender.api_key.clone()) {
            Ok(target) => {
                let payload = serde_json::to_vec(body).unwrap_or_default();
                return sender.single.send(&target, &payload, timeout);
            }
            Err(e) => {
                return Exchange {
                    response: ResponseMeta {
                        transport_error: Some(format!("request failed: {e}")),
                        end_ms: Some(0.0),
                        ..Default::default()
                    },
                    reads: Vec::new(),
                    body_bytes: 0,
                    body_truncated: false,
                }
            }
        }
    }
    send_reqwest(&sender.http, base_url, body, Some(timeout))
}

/// What the body reader thread hands over: one read, the end of the body, or why reading failed.
enum BodyMsg {
    Read(TimedRead),
    End,
    Failed(String),
}

/// The reqwest path of [`send_within`], used for `https://` serves (and by bench-self, side by side with
/// the load client's path): the whole request (head and body) ends by `timeout` after it was sent (each
/// read alone is bounded by the client's timeout, so without a deadline a trickle would never end). Each
/// read is timed when the reader thread woke with it (`recv_ms` None). The body is read on a helper thread;
/// at the deadline or the [`BODY_CAP_BYTES`] cap the exchange returns with what was kept and the helper is
/// left to finish its current read (it ends at the next read, when the connection closes, or at the client's
/// timeout), dropping the response and so the connection. Memory held: the kept bytes plus at most
/// 8 reads in flight.
pub fn send_reqwest(
    client: &reqwest::blocking::Client,
    base_url: &str,
    body: &serde_json::Value,
    timeout: Option<Duration>,
) -> Exchange {
    let url = format!("{base_url}/v1/chat/completions");
    send_reqwest_to(client, &url, Some(body), timeout)
}

/// Sends a request to `{base_url}{path}`, within `timeout`, recorded as [`send_within`] records it: `POST`
/// of `body` to the chat endpoint through [`send_within`] itself, any other path by reqwest
/// ([`send_reqwest`]'s reads, timed when each returned), `GET` when `body` is None. For the `[contract]`
/// checks of the other endpoints (`/v1/completions`, `/v1/embeddings`, `/v1/models`), whose reads are
/// judged, never timed.
pub(crate) fn send_to(
    sender: &Sender,
    base_url: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    timeout: Duration,
) -> Exchange {
    match body {
        Some(b) if path == "/v1/chat/completions" => {
            send_within(sender, base_url, b, Some(timeout))
        }
        _ => send_reqwest_to(
            &sender.http,
            &format!("{base_url}{path}"),
            body,
            Some(timeout),
        ),
    }
}

/// [`send_reqwest`] to `url`: `POST` of `body`, or `GET` when it is None.
fn send_reqwest_to(
    client: &reqwest::blocking::Client,
    url: &str,
    body: Option<&serde_json::Value>,
    timeout: Option<Duration>,
) -> Exchange {
    let t0 = Instant::now();
    let deadline = timeout.map(|t| t0 + t);
    let ms = move |t: Instant| t.duration_since(t0).as_secs_f64() * 1000.0;
    let mut meta = ResponseMeta::default();
    let mut reads = Vec::new();
    let mut kept: u64 = 0;
    let mut truncated = false;
    // The head is bounded by the client's own timeout (the runner builds the client with the same one); the
    // deadline below then bounds the body. (A per-request reqwest timeout would race the deadline.)
    let request = match body {
        Some(b) => client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(b).unwrap_or_default()),
        None => client.get(url),
    };
    match request.send() {
        Err(e) => {
            meta.transport_error = Some(describe(&e));
            meta.end_ms = Some(ms(Instant::now()));
        }
        Ok(mut resp) => {
            meta.head_ms = Some(ms(Instant::now()));
            let status = resp.status();
            meta.status = Some(status.as_u16());
            for (name, value) in resp.headers() {
                let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
                meta.headers
                    .entry(name.as_str().to_string())
                    .and_modify(|e| {
                        e.push_str(", ");
                        e.push_str(&v)
                    })
                    .or_insert(v);
            }
            if status.is_redirection() {
                meta.transport_error = Some(crate::io::load_read::redirect_refused(
                    status.as_u16(),
                    meta.headers.get("location").map(String::as_str),
                ));
            }
            let (tx, rx) = std::sync::mpsc::sync_channel::<BodyMsg>(8);
            let reader = std::thread::Builder::new()
                .name("servegate-body".into())
                .spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let msg = match resp.read(&mut buf) {
                            Ok(0) => BodyMsg::End,
                            Ok(n) => BodyMsg::Read(TimedRead {
                                recv_ms: None,
                                t_ms: ms(Instant::now()),
                                bytes: buf[..n].to_vec(),
                            }),
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => BodyMsg::Failed(describe_io(&e)),
                        };
                        let last = !matches!(msg, BodyMsg::Read(_));
                        if tx.send(msg).is_err() || last {
                            break;
                        }
                    }
                });
            if let Err(e) = reader {
                meta.transport_error = Some(format!("cannot start the body reader thread: {e}"));
            } else {
                loop {
                    let msg = match deadline {
                        None => rx
                            .recv()
                            .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected),
                        Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
                    };
                    match msg {
                        Ok(BodyMsg::Read(r)) => {
                            let n = r.bytes.len();
                            let room = BODY_CAP_BYTES.saturating_sub(kept) as usize;
                            let take = n.min(room);
                            if take > 0 {
                                kept += take as u64;
                                let mut r = r;
                                r.bytes.truncate(take);
                                reads.push(r);
                            }
                            if take < n {
                                truncated = true;
                                break;
                            }
                        }
                        Ok(BodyMsg::End) => break,
                        Ok(BodyMsg::Failed(e)) => {
                            meta.transport_error
                                .get_or_insert(format!("body read failed after {kept} bytes: {e}"));
                            break;
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                            meta.transport_error.get_or_insert(format!(
                                "timeout: the body did not end within {:.1} s of the request (request.timeout_s); {kept} bytes kept",
                                timeout.unwrap_or_default().as_secs_f64()
                            ));
                            break;
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            }
            // Dropping the receiver makes the reader stop at its next read and drop the response.
            drop(rx);
            meta.end_ms = Some(ms(Instant::now()));
        }
    }
    Exchange {
        response: meta,
        reads,
        body_bytes: kept,
        body_truncated: truncated,
    }
}

/// The words [`get`]'s error starts with when a response came but the HTTP client refused it as invalid
/// HTTP (a header name with a space or a control byte, say): [`crate::io::raw_head::diagnose`] then says
/// what was wrong, since the serve did answer.
pub const INVALID_RESPONSE: &str = "invalid response";

/// True when `e` (or an error it wraps) is hyper's refusal of a response that is not valid HTTP/1.
fn is_invalid_response(e: &reqwest::Error) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = src {
        if x.downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_parse())
        {
            return true;
        }
        src = x.source();
    }
    false
}

fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timeout"
    } else if is_invalid_response(e) {
        INVALID_RESPONSE
    } else if e.is_connect() {
        "connect failed"
    } else if e.is_redirect() {
        "redirect refused"
    } else {
        "request failed"
    };
    format!("{kind}: {}", crate::error::OneLine(e))
}

fn describe_io(e: &std::io::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    if s.to_lowercase().contains("timed out") {
        format!("timeout: {s}")
    } else {
        s
    }
}

/// GET `{base_url}{path}` with a short timeout; returns (status, body) or an error string.
pub fn get(
    client: &reqwest::blocking::Client,
    base_url: &str,
    path: &str,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let resp = client
        .get(format!("{base_url}{path}"))
        .timeout(timeout)
        .send()
        .map_err(|e| describe(&e))?;
    let status = resp.status().as_u16();
    let mut body = String::new();
    resp.take(1024 * 1024)
        .read_to_string(&mut body)
        .map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// Body bytes kept from a readiness probe's reply for messages.
pub(crate) const PROBE_BODY_EXCERPT_BYTES: u64 = 512;
/// Characters of that body kept in [`Probe::Status`] (on one line).
pub(crate) const PROBE_BODY_EXCERPT_CHARS: usize = 200;

/// One readiness probe's outcome: a status with the start of its body, or why there was none.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Probe {
    /// The connection was refused: nothing listens yet.
    Refused,
    /// No reply within the probe's timeout.
    Timeout,
    /// The connection was closed or reset without a status line.
    Reset,
    /// The server's TLS certificate was not trusted (it will not be in a second either); the error chain.
    Untrusted(String),
    /// Any other transport failure; the error chain on one line.
    Error(String),
    /// Status code and a one-line body excerpt ([`PROBE_BODY_EXCERPT_CHARS`] at most).
    Status(u16, String),
}

impl Probe {
    /// A short label for the readiness timeline (`refused`, `timeout`, `reset`, `tls`, `error`, or the
    /// status code), as written to `run.json`'s `ready_timeline`.
    pub(crate) fn label(&self) -> String {
        match self {
            Probe::Refused => "refused".into(),
            Probe::Timeout => "timeout".into(),
            Probe::Reset => "reset".into(),
            Probe::Untrusted(_) => "tls".into(),
            Probe::Error(_) => "error".into(),
            Probe::Status(code, _) => code.to_string(),
        }
    }

    /// The outcome for a message (`connection refused`, `503 {"error":...}`, ...).
    pub(crate) fn describe(&self) -> String {
        match self {
            Probe::Refused => "connection refused".into(),
            Probe::Timeout => "timeout".into(),
            Probe::Reset => "connection closed without a reply".into(),
            Probe::Untrusted(e) => format!("untrusted certificate: {e}"),
            Probe::Error(e) => format!("error: {e}"),
            Probe::Status(code, body) if body.is_empty() => code.to_string(),
            Probe::Status(code, body) => format!("{code} {body}"),
        }
    }
}

/// A client for readiness probes: no proxy, no redirects (a 3xx is a status like any other), and no
/// connection kept between probes (each probe connects afresh, so a reply always comes from whoever holds
/// the port now). Errors: the TLS backend could not be initialised (the message).
pub(crate) fn probe_client() -> Result<reqwest::blocking::Client, String> {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .user_agent(concat!("servegate/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| crate::error::OneLine(&e).to_string())
}

/// One `GET url` with `client` (see [`probe_client`]), connect and reply within `timeout`; keeps up to
/// [`PROBE_BODY_EXCERPT_BYTES`] of the body (a body cut by the deadline keeps what arrived). Never fails:
/// the outcome says what happened.
pub(crate) fn probe(client: &reqwest::blocking::Client, url: &str, timeout: Duration) -> Probe {
    let t0 = Instant::now();
    let resp = match client.get(url).timeout(timeout).send() {
        Ok(r) => r,
        Err(e) => return classify(&e),
    };
    let status = resp.status().as_u16();
    let mut body = Vec::new();
    if !timeout.saturating_sub(t0.elapsed()).is_zero() {
        let _ = resp.take(PROBE_BODY_EXCERPT_BYTES).read_to_end(&mut body);
    }
    Probe::Status(status, one_line(&body, PROBE_BODY_EXCERPT_CHARS))
}

/// A failed probe's outcome, from the error's type and its source chain (never from its message text).
fn classify(e: &reqwest::Error) -> Probe {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = src {
        if x.downcast_ref::<rustls::Error>().is_some() {
            return Probe::Untrusted(crate::error::OneLine(e).to_string());
        }
        if let Some(io) = x.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Probe::Refused,
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    return Probe::Timeout
                }
                std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof => return Probe::Reset,
                _ => {}
            }
        }
        if let Some(h) = x.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return Probe::Reset;
            }
        }
        // An io::Error's `source()` skips the error it wraps (rustls' inside tokio-rustls' inside
        // hyper-util's): walk into the wrapped error itself.
        src = match x.downcast_ref::<std::io::Error>() {
            Some(io) => match io.get_ref() {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => x.source(),
            },
            None => x.source(),
        };
    }
    if e.is_timeout() {
        return Probe::Timeout;
    }
    Probe::Error(crate::error::OneLine(e).to_string())
}

/// Lossy UTF-8, whitespace runs collapsed to one space, cut to `max` chars with `…`.
pub(crate) fn one_line(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() > max {
        let cut: String = collapsed.chars().take(max).collect();
        format!("{cut}…")
    } else {
        collapsed
    }
}

/// Whether a data event carries a token: choice 0's `delta.content` (or `reasoning_content` / `reasoning`)
/// a non-empty string, or its `delta.tool_calls` present.
fn carries_token(data: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
        return false;
    };
    let d = &v["choices"][0]["delta"];
    ["content", "reasoning_content", "reasoning"]
        .iter()
        .any(|k| d[*k].as_str().is_some_and(|s| !s.is_empty()))
        || d.get("tool_calls").is_some_and(|t| !t.is_null())
}

/// A streamed `POST` of `body` to `{base_url}{path}` that the client **drops** (closes the connection
/// without reading further) once it has read `drop_after` token chunks: the `[contract]` `cancel` check's
/// `dropped` request. The whole request ends by `timeout`. Returns the exchange (the reads up to the drop;
/// `transport_error` only when the stream failed or ended before the drop) and, when it was dropped, ms from
/// the send to the drop. Reads are timed when each returned (`recv_ms` None).
pub(crate) fn send_dropping(
    sender: &Sender,
    base_url: &str,
    path: &str,
    body: &serde_json::Value,
    drop_after: usize,
    timeout: Duration,
) -> (Exchange, Option<f64>) {
    let t0 = Instant::now();
    let ms = |t: Instant| t.duration_since(t0).as_secs_f64() * 1000.0;
    let mut meta = ResponseMeta::default();
    let mut reads = Vec::new();
    let mut kept = 0u64;
    let mut dropped = None;
    let client = match http_client(timeout, sender.api_key.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            meta.transport_error = Some(format!("request failed: {e}"));
            meta.end_ms = Some(0.0);
            let ex = Exchange {
                response: meta,
                reads,
                body_bytes: 0,
                body_truncated: false,
            };
            return (ex, None);
        }
    };
    let sent = client
        .post(format!("{base_url}{path}"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
        .send();
    match sent {
        Err(e) => meta.transport_error = Some(describe(&e)),
        Ok(mut resp) => {
            meta.head_ms = Some(ms(Instant::now()));
            meta.status = Some(resp.status().as_u16());
            for (name, value) in resp.headers() {
                let v = String::from_utf8_lossy(value.as_bytes()).into_owned();
                meta.headers.insert(name.as_str().to_string(), v);
            }
            let mut framer = crate::analysis::sse::Framer::new();
            let mut tokens = 0usize;
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match resp.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let t = ms(Instant::now());
                        let room = BODY_CAP_BYTES.saturating_sub(kept) as usize;
                        let take = n.min(room);
                        kept += take as u64;
                        reads.push(TimedRead {
                            recv_ms: None,
                            t_ms: t,
                            bytes: buf[..take].to_vec(),
                        });
                        tokens += framer
                            .push(&buf[..take], t)
                            .iter()
                            .filter(|e| carries_token(&e.data))
                            .count();
                        if tokens >= drop_after || take < n {
                            // Dropping the response with its body unread closes the connection: the client
                            // has gone, as a user's closed tab or a killed SDK call.
                            drop(resp);
                            dropped = Some(ms(Instant::now()));
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        meta.transport_error = Some(format!(
                            "body read failed after {kept} bytes: {}",
                            describe_io(&e)
                        ));
                        break;
                    }
                }
            }
        }
    }
    meta.end_ms = Some(ms(Instant::now()));
    let ex = Exchange {
        response: meta,
        reads,
        body_bytes: kept,
        body_truncated: false,
    };
    (ex, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    /// A one-connection server on a free port that reads the request head, writes `reply` and closes.
    fn answer_once(reply: &'static [u8]) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = s.write_all(reply);
        });
        format!("http://127.0.0.1:{port}/health")
    }

    fn probe_once(reply: &'static [u8]) -> Probe {
        let client = probe_client().unwrap();
        probe(&client, &answer_once(reply), Duration::from_secs(30))
    }

    /// A kept-alive connection closed behind the client (a hostile-input kind): every request opens its own connection, even when the serve offers keep-alive, so no
    /// request can fail on a kept-alive connection the serve closed or restarted behind it (and no retry, whose
    /// timing would differ, can ever arise). Counted by the server's accepts, not timed.
    #[test]
    fn every_request_opens_a_fresh_connection_though_the_serve_keeps_alive() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                let Ok(mut s) = s else { return };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::spawn(move || loop {
                    // Each request on this connection: read its head and body, answer, keep the connection.
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        if s.read(&mut byte).unwrap_or(0) != 1 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let h = String::from_utf8_lossy(&head).to_ascii_lowercase();
                    let len: usize = h
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    let mut body = vec![0u8; len];
                    if s.read_exact(&mut body).is_err() {
                        return;
                    }
                    let reply = b"{\"choices\":[{\"index\":0,\"message\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}";
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: keep-alive\r\ncontent-length: {}\r\n\r\n",
                        reply.len()
                    );
                    let _ = s.write_all(reply);
                });
            }
        });
        let client = Sender::new(Duration::from_secs(30), None).unwrap();
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..3 {
            let ex = send(&client, &base, &serde_json::json!({"stream": false}));
            assert_eq!(ex.response.status, Some(200), "{:?}", ex.response);
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn a_503_keeps_its_status_and_a_one_line_body() {
        let p = probe_once(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 40\r\n\r\n{\"error\":\n  {\"message\":\"Loading model\"}}   ",
        );
        assert_eq!(
            p,
            Probe::Status(503, "{\"error\": {\"message\":\"Loading model\"}}".into())
        );
        assert_eq!(p.label(), "503");
    }

    #[test]
    fn a_redirect_is_a_status_not_followed() {
        let p = probe_once(
            b"HTTP/1.1 302 Found\r\nlocation: http://192.0.2.1:9/\r\ncontent-length: 0\r\n\r\n",
        );
        assert_eq!(p, Probe::Status(302, String::new()));
    }

    #[test]
    fn a_close_without_a_reply_is_a_reset() {
        assert_eq!(probe_once(b""), Probe::Reset);
    }

    #[test]
    fn a_reply_that_is_not_http_is_an_error_not_a_status() {
        let p = probe_once(b"SSH-2.0-OpenSSH_9.6\r\n");
        assert!(matches!(p, Probe::Error(_)), "{p:?}");
        assert_eq!(p.label(), "error");
    }

    #[test]
    fn a_closed_port_is_refused() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = probe_client().unwrap();
        let p = probe(
            &client,
            &format!("http://127.0.0.1:{port}/health"),
            Duration::from_secs(30),
        );
        assert_eq!(
            (p.label(), p.describe()),
            ("refused".into(), "connection refused".into())
        );
    }
}
