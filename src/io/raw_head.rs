//! A response head read raw, to say what was wrong with it when the HTTP client refused it: the client's
//! error says only "invalid HTTP header parsed", which reads like no answer at all, while the serve did
//! answer (with a header name holding a space or a control byte, a value holding a control byte, a status
//! line that is not HTTP/1.x). The rules are RFC 9112's message syntax (section 4, status line; section 5,
//! field lines) with RFC 9110's token (section 5.6.2) for names and field-value characters (section 5.5).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Bytes of a response head read at most (a head past this is itself the problem).
pub const HEAD_CAP_BYTES: usize = 64 * 1024;

/// True for an RFC 9110 `tchar`: the characters of a token such as a field name.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A piece of the head quoted for a message: lossy UTF-8, at most 60 characters, escaped as Rust writes a
/// string (so control bytes never reach a terminal).
fn q(bytes: &[u8]) -> String {
    crate::analysis::reply::quoted(&String::from_utf8_lossy(bytes), 60)
}

/// What is wrong with a response head (`head`: the bytes from the status line up to and including the blank
/// line, or all that came), or `None` when it is well formed:
/// * `the status line "..." is not HTTP/1.x NNN` (RFC 9112 section 4);
/// * `header line N has an invalid name "X Bad" (a field name is a token: letters, digits and
///   !#$%&'*+-.^_`|~, RFC 9110 section 5.6.2)`;
/// * `header line N has no colon: "..."`, `header line N is folded (starts with a space or tab: obsolete
///   line folding, RFC 9112 section 5.2)`;
/// * `header line N ("name") has a control character in its value: "..."` (RFC 9110 section 5.5: no CTL but
///   HTAB);
/// * `the head never ends (no blank line in N bytes)`.
///
/// Lines are numbered from 1, the status line being line 1. Bytes are quoted escaped.
pub fn head_problem(head: &[u8]) -> Option<String> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n");
    let Some(end) = end.or_else(|| head.windows(2).position(|w| w == b"\n\n")) else {
        return Some(format!(
            "the head never ends (no blank line in {} bytes): {}",
            head.len(),
            q(head)
        ));
    };
    let text = &head[..end];
    let mut lines = text
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status = lines.next().unwrap_or_default();
    let ok_status = status.len() >= 12
        && (status.starts_with(b"HTTP/1.1 ") || status.starts_with(b"HTTP/1.0 "))
        && status[9..12].iter().all(u8::is_ascii_digit)
        && status.get(12).is_none_or(|&b| b == b' ');
    if !ok_status {
        return Some(format!("the status line {} is not HTTP/1.x NNN", q(status)));
    }
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            return Some(format!(
                "header line {n} is folded (starts with a space or tab: obsolete line folding, RFC 9112 section 5.2): {}",
                q(line)
            ));
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Some(format!("header line {n} has no colon: {}", q(line)));
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Some(format!(
                "header line {n} has an invalid name {} (a field name is a token: letters, digits and !#$%&'*+-.^_`|~, RFC 9110 section 5.6.2)",
                q(name)
            ));
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Some(format!(
                "header line {n} ({}) has a control character in its value: {} (RFC 9110 section 5.5)",
                q(name),
                q(value)
            ));
        }
    }
    None
}

/// GETs `path` of the `http://` serve at `base_url` over a plain socket and reads its response head (at most
/// [`HEAD_CAP_BYTES`], within `timeout` in all): [`head_problem`] of what came, or `None` when the head is
/// well formed, nothing came, or the URL is not `http://` (a TLS serve's head is the TLS client's).
pub fn diagnose(base_url: &str, path: &str, timeout: Duration) -> Option<String> {
    let url = reqwest::Url::parse(base_url).ok()?;
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    let deadline = Instant::now() + timeout;
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).ok()?;
    let target = format!("{}{path}", url.path().trim_end_matches('/'));
    let req = format!("GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() >= HEAD_CAP_BYTES {
            break;
        }
    }
    if head.is_empty() {
        return None;
    }
    head_problem(&head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_head_has_no_problem() {
        assert_eq!(
            head_problem(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-a: b\tc\r\n\r\nbody"),
            None
        );
        assert_eq!(head_problem(b"HTTP/1.0 404\r\n\r\n"), None);
    }

    #[test]
    fn each_kind_of_invalid_head_is_named_with_its_line_escaped() {
        let p = |h: &[u8]| head_problem(h).unwrap();
        assert_eq!(
            p(b"HTTP/1.1 200 OK\r\nserver: x\r\nX Bad\x1b[31m: 1\r\n\r\n"),
            "header line 3 has an invalid name \"X Bad\\u{1b}[31m\" (a field name is a token: letters, digits and !#$%&'*+-.^_`|~, RFC 9110 section 5.6.2)"
        );
        assert!(p(b"HTTP/1.1 200 OK\r\nx-a: b\x07c\r\n\r\n").starts_with(
            "header line 2 (\"x-a\") has a control character in its value: \" b\\u{7}c\""
        ));
        assert!(p(b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n").starts_with("header line 2 has no colon"));
        assert!(p(b"HTTP/1.1 200 OK\r\nx: a\r\n  folded\r\n\r\n")
            .starts_with("header line 3 is folded"));
        assert_eq!(
            p(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"),
            "the status line \"SSH-2.0-OpenSSH_9.6\" is not HTTP/1.x NNN"
        );
        assert!(p(b"HTTP/1.1 200 OK\r\nx: y")
            .starts_with("the head never ends (no blank line in 21 bytes)"));
    }
}
