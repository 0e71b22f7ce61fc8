//! Serve text quoted in messages: cut to a length and with control characters shown escaped.

/// Characters of serve text quoted in a message.
pub(crate) const SNIPPET_CHARS: usize = 200;

/// Malformed events described one by one in [`Reply::malformed_events`] (all are counted).
pub const DETAILS_KEPT: usize = 8;

/// Serve text for a message: at most `max` characters, quoted and escaped as a Rust string literal (`"a\"b"`,
/// `"\u{1b}[31m"`, `"\0"`, `"\u{feff}"`), so control bytes never reach a terminal; `…` after the closing quote
/// when cut.
pub fn quoted(s: &str, max: usize) -> String {
    let head: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        format!("{head:?}…")
    } else {
        format!("{head:?}")
    }
}

/// Serve text with control and invisible formatting characters escaped (`\u{1b}`, `\n`, `\u{202e}`) and
/// everything else as it is: for a message quoted in a verdict line.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let invisible = matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}');
        if c.is_control() || invisible {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The first 200 characters of a text, for messages.
pub(crate) fn snippet(s: &str) -> String {
    const MAX: usize = 200;
    let mut out: String = s.chars().take(MAX).collect();
    if s.chars().count() > MAX {
        out.push('…');
    }
    out
}
