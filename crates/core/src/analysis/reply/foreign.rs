//! A body that is not the protocol the request asked for, named for what it is: an HTML page (a proxy's or a
//! load balancer's error page, a login wall, a captive portal answering 200) or other text where an SSE
//! stream or a JSON document should be. Without this a 200 HTML page read as a stream is "cut" (no
//! finish_reason, no `[DONE]`), which sends a reader looking for a serve that died mid-reply.

use crate::analysis::quote::{printable, quoted};

/// Characters of the body quoted after what it is.
const HEAD_CHARS: usize = 80;

/// Bytes of the body searched for HTML markers and the `<title>` (a page's head is at its start).
const SNIFF_BYTES: usize = 64 * 1024;

/// The media type of a `Content-Type` value, lower-cased, without its parameters (`text/html; charset=utf-8`
/// → `text/html`; RFC 9110 section 8.3.1).
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// True when the body is an HTML page: its `Content-Type` is `text/html` or `application/xhtml+xml`, or,
/// without one, its text after leading whitespace (and a byte-order mark) begins with `<!doctype html`,
/// `<html`, `<head`, `<body` or `<title` (case-insensitive; an HTML comment first is skipped over by the
/// search for `<html` in the first 64 KiB).
pub fn is_html(body: &str, content_type: Option<&str>) -> bool {
    if let Some(ct) = content_type {
        let m = media_type(ct);
        if m == "text/html" || m == "application/xhtml+xml" {
            return true;
        }
    }
    let head = sniffed(body);
    let start = head.trim_start_matches('\u{feff}').trim_start();
    ["<!doctype html", "<html", "<head", "<body", "<title"]
        .iter()
        .any(|p| start.starts_with(p))
        || (start.starts_with("<!--") && head.contains("<html"))
}

/// The first [`SNIFF_BYTES`] of `body`, lower-cased (cut at a character boundary).
fn sniffed(body: &str) -> String {
    let mut end = body.len().min(SNIFF_BYTES);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    body[..end].to_ascii_lowercase()
}

/// The text of an HTML page's `<title>`, whitespace collapsed, escaped ([`printable`]), at most 80
/// characters; `None` when there is none in the first 64 KiB or it is empty.
pub fn html_title(body: &str) -> Option<String> {
    let lower = sniffed(body);
    let open = lower.find("<title")?;
    let text_start = open + lower[open..].find('>')? + 1;
    let text_end = text_start + lower[text_start..].find("</title")?;
    let title = body[text_start..text_end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if title.is_empty() {
        return None;
    }
    let cut: String = title.chars().take(HEAD_CHARS).collect();
    let more = if title.chars().count() > HEAD_CHARS {
        "…"
    } else {
        ""
    };
    Some(format!("{}{more}", printable(&cut)))
}

/// What a body is, in words, for a failure's detail: `an HTML page (title "502 Bad Gateway")`, `an HTML
/// page`, `an XML document`, `a text/plain body`, or `a body` when nothing names it.
pub fn what_body_is(body: &str, content_type: Option<&str>) -> String {
    if is_html(body, content_type) {
        return match html_title(body) {
            Some(t) => format!("an HTML page (title \"{t}\")"),
            None => "an HTML page".to_string(),
        };
    }
    if body.trim_start().starts_with("<?xml") {
        return "an XML document".to_string();
    }
    match content_type.map(media_type).filter(|m| !m.is_empty()) {
        Some(m) => format!("a {} body", printable(&m)),
        None => "a body".to_string(),
    }
}

/// The detail of a `not_an_event_stream` failure: a streamed request's 2xx reply whose body holds no SSE
/// event or comment and is not one JSON document. Its `Content-Type` (when known), what the body is
/// ([`what_body_is`]), its size and its start, escaped:
/// `Content-Type "text/html; charset=utf-8": an HTML page (title "502 Bad Gateway"), not an SSE stream (212
/// bytes, no event): "<!DOCTYPE html><html><head><title>502 Bad Gateway</title>…"…`. The failure's text
/// adds the status (`(HTTP 200)`).
pub fn not_an_event_stream(body: &[u8], content_type: Option<&str>) -> String {
    let text = String::from_utf8_lossy(body);
    let ct = match content_type {
        Some(c) => format!("Content-Type {}: ", quoted(c, HEAD_CHARS)),
        None => String::new(),
    };
    format!(
        "{ct}{}, not an SSE stream ({} bytes, no event): {}",
        what_body_is(&text, content_type),
        body.len(),
        quoted(text.trim_start(), HEAD_CHARS)
    )
}

/// True when some line of `text` is one an SSE reader acts on: a comment (`:` first) or a `data`, `event`,
/// `id`, `retry` or `error` field (the name before the first colon, or the whole line). Lines end at CRLF,
/// LF or CR, as in the WHATWG rules.
pub fn has_sse_line(text: &str) -> bool {
    text.split(['\r', '\n']).any(|line| {
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
        let field = line.split(':').next().unwrap_or("");
        line.starts_with(':') || matches!(field, "data" | "event" | "id" | "retry" | "error")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "<!DOCTYPE html>\n<html><head><title>\n  502 Bad\n Gateway </title></head>\
                        <body><h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>\n";

    #[test]
    fn an_html_page_is_known_by_its_type_or_its_first_tag_and_named_with_its_title() {
        assert!(is_html(PAGE, None));
        assert!(is_html("Bad gateway", Some("text/html; charset=UTF-8")));
        assert!(is_html("\u{feff}  <HTML><body>x</body></HTML>", None));
        assert!(is_html("<!-- proxy -->\n<html>", None));
        assert!(!is_html("data: {}\n\n", None));
        assert!(!is_html("<think>hm</think>", Some("text/event-stream")));
        assert_eq!(html_title(PAGE).as_deref(), Some("502 Bad Gateway"));
        assert_eq!(html_title("<html><title></title>"), None);
        assert_eq!(
            html_title("<title>a\u{1b}[31mb</title>").as_deref(),
            Some("a\\u{1b}[31mb")
        );
        assert_eq!(
            what_body_is(PAGE, None),
            "an HTML page (title \"502 Bad Gateway\")"
        );
        assert_eq!(
            what_body_is("<?xml version=\"1.0\"?><a/>", None),
            "an XML document"
        );
        assert_eq!(
            what_body_is("upstream busy", Some("Text/Plain; charset=utf-8")),
            "a text/plain body"
        );
        assert_eq!(what_body_is("upstream busy", None), "a body");
    }

    #[test]
    fn sse_lines_are_comments_and_the_known_fields() {
        assert!(has_sse_line("data: {}"));
        assert!(has_sse_line("<html>\r\n: ping\r\n"));
        assert!(has_sse_line("x\nevent\n"));
        assert!(has_sse_line("\u{feff}retry: 10"));
        assert!(!has_sse_line(PAGE));
        assert!(!has_sse_line("Bad gateway\nfoo: data: x"));
    }

    #[test]
    fn the_detail_says_the_content_type_what_the_body_is_and_how_it_begins() {
        let d = not_an_event_stream(PAGE.as_bytes(), Some("text/html"));
        assert!(
            d.starts_with(&format!("Content-Type \"text/html\": an HTML page (title \"502 Bad Gateway\"), not an SSE stream ({} bytes, no event): \"<!DOCTYPE html>\\n<html>", PAGE.len())),
            "{d}"
        );
        assert!(d.ends_with('…'), "cut: {d}");
        let d = not_an_event_stream(b"\x1b[2Jbusy", None);
        assert_eq!(
            d,
            "a body, not an SSE stream (8 bytes, no event): \"\\u{1b}[2Jbusy\""
        );
    }

    /// A 200 HTML page where a stream should be (a proxy's error page) is named for what it is, never a cut
    /// stream: `not_an_event_stream`, an HTML page with its title; the response head adds the Content-Type. The
    /// same page with a 502 is the serve's HTTP error, named an HTML page too; as a non-streamed body it is
    /// unparseable, said to be an HTML page.
    #[test]
    fn an_html_page_answering_a_stream_is_not_an_event_stream_nor_a_cut_one() {
        use crate::analysis::reply::{parse_body, parse_stream, reply_of_response};
        use crate::io::reads::TimedRead;
        use crate::vocab::FailureCode;
        let reads = |parts: &[(f64, &str)]| -> Vec<TimedRead> {
            parts
                .iter()
                .map(|(t, s)| TimedRead {
                    recv_ms: None,
                    t_ms: *t,
                    bytes: s.as_bytes().to_vec(),
                })
                .collect()
        };
        let one = |body: &str| parse_stream(&reads(&[(0.0, body)]), Some(200));
        const PAGE_502: &str = "<!DOCTYPE html>\n<html>\n<head><title>502 Bad Gateway</title></head>\n\
                            <body>\n<h1>502 Bad Gateway</h1>\n<hr><center>nginx</center>\n</body>\n</html>\n";
        let r = one(PAGE_502);
        assert!(!r.truncated, "{r:?}");
        let f = r.failure().unwrap();
        assert_eq!(f.code(), FailureCode::NotAnEventStream);
        assert_eq!(
            f.to_string(),
            format!(
                "not_an_event_stream: an HTML page (title \"502 Bad Gateway\"), not an SSE stream ({} bytes, no event): \"<!DOCTYPE html>\\n<html>\\n<head><title>502 Bad Gateway</title></head>\\n<body>\\n<h1>50\"… (HTTP 200)",
                PAGE_502.len()
            )
        );
        let rec = crate::evidence::RequestRecord {
            stream: true,
            http_status: Some(200),
            body_bytes: PAGE_502.len() as u64,
            ..Default::default()
        };
        let mut meta = crate::io::exchange::ResponseMeta::default();
        meta.headers
            .insert("content-type".into(), "text/html; charset=utf-8".into());
        let body = reads(&[(5.0, PAGE_502)]);
        let r = reply_of_response(&rec, Some(&meta), &body);
        let f = r.failure().unwrap().to_string();
        assert!(
            f.starts_with("not_an_event_stream: Content-Type \"text/html; charset=utf-8\": an HTML page (title \"502 Bad Gateway\"), not an SSE stream"),
            "{f}"
        );
        // Plain text with an HTML type is an HTML page by its type.
        let r = reply_of_response(&rec, Some(&meta), &reads(&[(5.0, "Bad gateway\n")]));
        assert!(
            r.failure().unwrap().to_string().contains(
                ": an HTML page, not an SSE stream (12 bytes, no event): \"Bad gateway\\n\" (HTTP 200)"
            ),
            "{:?}",
            r.failure()
        );
        // A 502 page: the serve's HTTP error, what it is said first.
        let r = parse_stream(&reads(&[(5.0, PAGE_502)]), Some(502));
        let f = r.failure().unwrap();
        assert_eq!(f.code(), FailureCode::HttpStatus);
        assert!(
            f.to_string().starts_with(
                "http_status: an HTML page (title \"502 Bad Gateway\"): <!DOCTYPE html>"
            ),
            "{f}"
        );
        // Not streamed: an unparseable body, an HTML page.
        let r = parse_body(PAGE_502.as_bytes(), Some(200), 5.0);
        let f = r.failure().unwrap();
        assert_eq!(f.code(), FailureCode::UnparseableBody);
        assert!(
            f.to_string().starts_with(
                "unparseable_body: body is an HTML page (title \"502 Bad Gateway\"), not JSON ("
            ),
            "{f}"
        );
        // A stream cut before its first event, and an empty body, are still cut streams.
        for cut in ["data: {\"choices\":[", "", "\n\n"] {
            let f = one(cut).failure().unwrap();
            assert_eq!(f.code(), FailureCode::TruncatedStream, "{cut:?}: {f}");
        }
    }
}
