//! A minimal HTTP/1.1 server side for `servegate replay`: reads one request at a time from a connection
//! (the head parsed by `httparse`, then a `Content-Length` body) and frames responses (`Content-Length` or
//! `Transfer-Encoding: chunked`). Owns the wire format only: what to answer is the caller's.
//!
//! Deliberately small: no chunked *request* bodies (refused with 411, clearly), no pipelining guarantees
//! beyond reading requests in order, no TLS. Requests to a replay serve are few and come from one client.

use std::io::{self, BufRead, Read, Write};
use std::time::Instant;

/// Longest request head (request line and headers) accepted: 64 KiB.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest request body accepted: 16 MiB.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// One parsed request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path without the query string (`/v1/chat/completions`).
    pub path: String,
    /// Headers in order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (empty when none).
    pub body: Vec<u8>,
    /// When the first bytes of this request were available to the server (monotonic).
    pub arrived: Instant,
    /// The client asked to close the connection after this request (or spoke HTTP/1.0 without keep-alive).
    pub close: bool,
}

impl Request {
    /// The first header named `name` (lower-case).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read: the status to answer with and the reason, or a plain close.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection (or it failed) between requests: nothing to answer.
    Closed,
    /// A malformed or refused request: answer with this status and message, then close.
    Refused(u16, String),
}

fn refused(status: u16, msg: impl Into<String>) -> ReadError {
    ReadError::Refused(status, msg.into())
}

/// Reads one request from `r`. Blocks until the first byte arrives (the `arrived` stamp is taken then),
/// then reads the head and a `Content-Length` body. A body with `Transfer-Encoding` is refused (411).
/// `Expect: 100-continue` is answered on `w` before the body is read.
pub(crate) fn read_request<R: BufRead, W: Write>(
    r: &mut R,
    w: &mut W,
) -> Result<Request, ReadError> {
    // Wait for the first byte: that is when the request arrived.
    loop {
        match r.fill_buf() {
            Ok([]) => return Err(ReadError::Closed),
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Closed),
        }
    }
    let arrived = Instant::now();
    let mut head = Vec::with_capacity(512);
    loop {
        let mut line = Vec::new();
        let n = r
            .by_ref()
            .take((MAX_HEAD_BYTES + 1 - head.len()) as u64)
            .read_until(b'\n', &mut line)
            .map_err(|_| ReadError::Closed)?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        head.extend_from_slice(&line);
        if head.len() > MAX_HEAD_BYTES {
            return Err(refused(
                431,
                format!("request head longer than {MAX_HEAD_BYTES} bytes"),
            ));
        }
        if !line.ends_with(b"\n") {
            return Err(ReadError::Closed);
        }
        if line == b"\r\n" || line == b"\n" {
            if head.len() == line.len() {
                // Tolerate empty lines before a request line (RFC 9112 section 2.2).
                head.clear();
                continue;
            }
            break;
        }
    }
    let (method, target, version, headers) = parse_head(&head)?;
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let connection = get("connection")
        .map(|v| v.to_ascii_lowercase())
        .unwrap_or_default();
    let close = if version == 0 {
        !connection.contains("keep-alive")
    } else {
        connection.contains("close")
    };
    if let Some(te) = get("transfer-encoding") {
        return Err(refused(
            411,
            format!("request bodies with Transfer-Encoding ({te}) are not supported by servegate replay: send the body with Content-Length"),
        ));
    }
    let length = match get("content-length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| refused(400, format!("bad Content-Length {v:?}")))?,
    };
    if length > MAX_BODY_BYTES {
        return Err(refused(
            413,
            format!("request body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit"),
        ));
    }
    if length > 0
        && get("expect")
            .map(|v| v.eq_ignore_ascii_case("100-continue"))
            .unwrap_or(false)
    {
        let _ = w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body).map_err(|_| ReadError::Closed)?;
    let path = target.split('?').next().unwrap_or(&target).to_string();
    Ok(Request {
        method,
        path,
        headers,
        body,
        arrived,
        close,
    })
}

/// Most header lines accepted in one request head; more is refused with 431.
pub(crate) const MAX_HEADERS: usize = 128;

/// A parsed head: method, request target, minor HTTP version (`0` or `1`), headers (names lower-cased,
/// values trimmed).
type Head = (String, String, u8, Vec<(String, String)>);

/// Parses a complete request head (request line, headers, the empty line) with `httparse`; a malformed
/// head is refused with 400, a protocol other than HTTP/1.x with 505, more than [`MAX_HEADERS`] headers
/// with 431, a head that is not UTF-8 with 400.
fn parse_head(head: &[u8]) -> Result<Head, ReadError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(refused(400, "incomplete request head"));
        }
        Err(httparse::Error::Version) => {
            let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
            return Err(refused(
                505,
                format!(
                    "unsupported protocol in {:?}: HTTP/1.x only",
                    String::from_utf8_lossy(line).trim_end()
                ),
            ));
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refused(
                431,
                format!("more than {MAX_HEADERS} header lines"),
            ));
        }
        Err(e) => return Err(refused(400, format!("malformed request head: {e}"))),
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(refused(400, "incomplete request line"));
    };
    let mut headers = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let value = std::str::from_utf8(h.value)
            .map_err(|_| refused(400, format!("header {:?} is not UTF-8", h.name)))?;
        headers.push((h.name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok((method.to_string(), target.to_string(), version, headers))
}

/// The reason phrase of a status code (the common ones; others get an empty phrase, which HTTP allows).
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// How a response body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `Content-Length: n`.
    Length(usize),
    /// `Transfer-Encoding: chunked`: each write is one chunk, then the `0` chunk.
    Chunked,
}

/// The response head: status line, `headers` (name, value), the framing header, `Connection`.
pub(crate) fn head(
    status: u16,
    headers: &[(String, String)],
    framing: Framing,
    close: bool,
) -> Vec<u8> {
    let mut s = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (n, v) in headers {
        s.push_str(n);
        s.push_str(": ");
        s.push_str(v);
        s.push_str("\r\n");
    }
    match framing {
        Framing::Length(n) => s.push_str(&format!("content-length: {n}\r\n")),
        Framing::Chunked => s.push_str("transfer-encoding: chunked\r\n"),
    }
    s.push_str(if close {
        "connection: close\r\n"
    } else {
        "connection: keep-alive\r\n"
    });
    s.push_str("\r\n");
    s.into_bytes()
}

/// Appends `data` to `out` as one chunk (`<hex len>\r\n<data>\r\n`); nothing for empty data (an empty
/// chunk would end the body).
pub(crate) fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk of a chunked body.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// A complete JSON response (status, `content-type: application/json`, Content-Length).
pub(crate) fn json_response(status: u16, body: &serde_json::Value, close: bool) -> Vec<u8> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut out = head(
        status,
        &[("content-type".into(), "application/json".into())],
        Framing::Length(bytes.len()),
        close,
    );
    out.extend_from_slice(&bytes);
    out
}

/// The OpenAI-style error body: `{"error": {"message", "type", "code"}}`.
pub(crate) fn error_body(status: u16, kind: &str, message: &str) -> serde_json::Value {
    serde_json::json!({"error": {"message": message, "type": kind, "code": status}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &[u8]) -> (Result<Request, ReadError>, Vec<u8>) {
        let mut r = io::BufReader::new(raw);
        let mut w = Vec::new();
        (read_request(&mut r, &mut w), w)
    }

    #[test]
    fn content_length_body_is_read_and_path_loses_its_query() {
        let (req, _) = parse(
            b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}",
        );
        let req = req.unwrap();
        assert_eq!(
            (
                req.method.as_str(),
                req.path.as_str(),
                req.body.as_slice(),
                req.close
            ),
            ("POST", "/v1/chat/completions", &b"{}"[..], false)
        );
    }

    #[test]
    fn chunked_request_body_is_refused_with_411_naming_content_length() {
        let (req, _) = parse(b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
        match req {
            Err(ReadError::Refused(411, msg)) => assert!(msg.contains("Content-Length"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn connection_close_and_http10_close_the_connection() {
        assert!(
            parse(b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
                .0
                .unwrap()
                .close
        );
        assert!(parse(b"GET /health HTTP/1.0\r\n\r\n").0.unwrap().close);
        assert!(
            !parse(b"GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                .0
                .unwrap()
                .close
        );
    }

    #[test]
    fn expect_continue_is_answered_before_the_body() {
        let (req, w) =
            parse(b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\na");
        assert_eq!(req.unwrap().body, b"a");
        assert_eq!(w, b"HTTP/1.1 100 Continue\r\n\r\n");
    }

    fn refused_status(raw: &[u8]) -> u16 {
        match parse(raw).0 {
            Err(ReadError::Refused(status, _)) => status,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_heads_are_refused_with_the_status_that_says_why() {
        assert_eq!(refused_status(b"GET /health HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(refused_status(b"GET /health\r\n\r\n"), 400);
        assert_eq!(
            refused_status(b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n"),
            400
        );
        assert_eq!(
            refused_status(b"GET /health HTTP/1.1\r\nX: \xff\r\n\r\n"),
            400
        );
        let many: Vec<u8> = [
            &b"GET / HTTP/1.1\r\n"[..],
            &b"x: y\r\n".repeat(MAX_HEADERS + 1),
            b"\r\n",
        ]
        .concat();
        assert_eq!(refused_status(&many), 431);
        assert_eq!(
            refused_status(
                &[
                    &b"GET / HTTP/1.1\r\nx: "[..],
                    &[b'y'; MAX_HEAD_BYTES],
                    b"\r\n\r\n"
                ]
                .concat()
            ),
            431
        );
    }

    #[test]
    fn leading_empty_lines_and_bare_newlines_are_tolerated_and_names_lower_cased() {
        let req = parse(b"\r\n\r\nGET /a?b HTTP/1.1\nX-Thing:  v \n\n")
            .0
            .unwrap();
        assert_eq!(
            (req.path.as_str(), req.header("x-thing")),
            ("/a", Some("v"))
        );
    }

    #[test]
    fn eof_between_requests_is_a_plain_close() {
        assert!(matches!(parse(b"").0, Err(ReadError::Closed)));
    }

    #[test]
    fn chunks_are_framed_in_hex_and_empty_data_adds_nothing() {
        let mut out = Vec::new();
        push_chunk(&mut out, &[b'x'; 26]);
        push_chunk(&mut out, b"");
        assert_eq!(out, [&b"1a\r\n"[..], &[b'x'; 26], b"\r\n"].concat());
    }
}
