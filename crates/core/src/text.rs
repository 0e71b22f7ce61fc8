//! Text from outside servegate, made safe for a terminal and a CI log: the one escaping of what a serve
//! (versions, model names, log lines, replies, error bodies), a gate author (command lines, paths, `requires`)
//! or a record says, before servegate prints it.
//!
//! Two hazards, one rule each:
//! - **Control bytes** (CR, LF, ESC, BEL, NUL, DEL, the C1 set such as the 8-bit CSI `\u{9b}`) and the
//!   invisible formatting characters (zero-width, bidi overrides, BOM, the Unicode line and paragraph
//!   separators) never reach a terminal raw: they are shown escaped the way Rust writes them (`\n`, `\r`,
//!   `\t`, `\0`, `\u{1b}`, `\u{7}`, `\u{202e}`), so outside text cannot move the cursor, recolour, retitle the
//!   terminal or start a line of its own.
//! - **CI workflow commands**: GitHub's runner reads a line whose text, after leading whitespace, begins with
//!   `::` as a workflow command (`::error::`, `::add-mask::`, `::stop-commands::`), and the legacy form
//!   `##[command]` anywhere in a line; Azure Pipelines' agent reads `##vso[area.action ...]` (a logging
//!   command: set a variable, complete the task as succeeded) and `##[` anywhere in a line
//!   (learn.microsoft.com/azure/devops/pipelines/scripts/logging-commands). A line servegate prints never
//!   begins with `::` (a leading `::` is shown `\::`) and never holds `##[` (shown `##\[`) or `##vso[`
//!   (shown `##vso\[`), unless servegate wrote it as a workflow command (`sinks::github`, whose data is
//!   escaped by that module's own rules).
//!
//! Where each function applies:
//! - [`shown`]: one piece of outside text formatted into a line (or a whole line that is one line by
//!   contract: a verdict line, a progress line). `judge::Verdict` passes every verdict's details through it,
//!   so every verdict line (console, gate report, annotations, JUnit, JSON) is one safe line.
//! - [`lines`]: the guard at the one place a line is written: servegate's own multi-line text (the gate
//!   report, a diff) keeps its line breaks and tabs; everything else as [`shown`]. The library's one writer,
//!   `servegate::io::printer::Printer`, and the binary's `outln!` / `errln!` / `out!` macros print through it:
//!   new print paths use them in place of `println!`/`eprintln!`/`print!`.
//! - [`json`]: JSON printed to a terminal (`inspect`, `export` to stdout): the characters JSON leaves raw
//!   (DEL, C1, the invisible ones) and `##[` written as `\uXXXX` escapes, so the JSON stays valid and equal.
//! - [`strip_escapes`]: the other way, for matching rather than showing: outside text (a serve's log) with its
//!   escape sequences and control characters removed, so a route regex reads the words; its count says how
//!   many sequences there were (the route verdict's note, and `content`'s `control_characters`).
//! - [`page`]: text of a generated page (leaderboard Markdown and HTML): control characters other than line
//!   breaks and tabs shown escaped.

/// `n` and the noun, plural unless `n` is 1: `counted(1, "request")` is `1 request`, `counted(3, "request")`
/// is `3 requests` (a regular English plural: the noun with `s`). For servegate's own words, never outside
/// text.
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `x` with its sign and `decimals` places (`{:+.N}`), a value that rounds to zero shown `+0.00`, never
/// `-0.00` (a sign on nothing reads as a direction). `signed(-0.001, 2)` is `+0.00`, `signed(-1.5, 1)` is
/// `-1.5`. For servegate's own figures.
pub fn signed(x: f64, decimals: usize) -> String {
    let s = format!("{x:+.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        format!("+{}", &s[1..])
    } else {
        s
    }
}

/// True for a character outside text may not carry to a terminal raw: every control character (C0
/// including TAB, CR and LF, DEL, C1) and the invisible formatting characters (zero-width space and joiners,
/// LRM/RLM, the bidi embeddings and overrides and isolates, BOM, the line and paragraph separators).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{FEFF}'
        )
}

/// Pushes the visible form of `c`: `\n`, `\r`, `\t`, `\0`, else `\u{hex}`.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\0' => out.push_str("\\0"),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// One line of text with every unsafe character escaped except those `keep` allows, `##[` shown `##\[`, and a
/// leading `::` (after whitespace) shown `\::`.
fn guard_line(line: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(line.len() + 2);
    // The whitespace a CI runner trims before it looks for `::`: what stays whitespace once printed (an
    // escaped TAB or LF is no longer whitespace).
    let body = line.trim_start_matches(|c: char| c.is_whitespace() && (!is_unsafe(c) || keep(c)));
    out.push_str(&line[..line.len() - body.len()]);
    if body.starts_with("::") {
        out.push('\\');
    }
    let mut rest = body;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("##[") {
            out.push_str("##\\[");
            rest = &rest[3..];
            continue;
        }
        if rest.starts_with(AZURE) {
            out.push_str("##vso\\[");
            rest = &rest[AZURE.len()..];
            continue;
        }
        if is_unsafe(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Outside text as one printable line: every control and invisible character escaped (`a\nb` for a line
/// break, `\u{1b}[31m` for an escape sequence), `##[` shown `##\[`, and a leading `::` shown `\::`. Idempotent
/// (`shown(&shown(s)) == shown(s)`); text with none of these comes back unchanged.
pub fn shown(s: &str) -> String {
    if !needs_guard(s, |_| false) {
        return s.to_string();
    }
    guard_line(s, |_| false)
}

/// Azure Pipelines' logging command prefix, read anywhere in a line.
const AZURE: &str = "##vso[";

fn needs_guard(s: &str, keep: impl Fn(char) -> bool) -> bool {
    s.chars().any(|c| is_unsafe(c) && !keep(c))
        || s.contains("##[")
        || s.contains(AZURE)
        || s.trim_start().starts_with("::")
}

/// Text servegate prints, guarded line by line: its own line breaks (`\n`) and tabs stay; every other
/// control or invisible character is escaped, `##[` is shown `##\[` and a line beginning (after whitespace)
/// with `::` is shown `\::`, as [`shown`] does. What `servegate::io::printer::Printer` prints.
pub fn lines(s: &str) -> String {
    let keep = |c: char| c == '\t';
    if !s.split('\n').any(|l| needs_guard(l, keep)) {
        return s.to_string();
    }
    s.split('\n')
        .map(|l| guard_line(l, keep))
        .collect::<Vec<_>>()
        .join("\n")
}

/// JSON text (as serde_json writes it) made safe to print, still valid JSON with the same value: the
/// characters serde_json leaves raw inside strings (DEL, the C1 controls, the invisible formatting
/// characters) become `\uXXXX` escapes, and the second `#` of a `##[` or `##vso[` becomes `\u0023`. JSON's own syntax never holds
/// these, so only string contents change, and only in how they are written.
pub fn json(s: &str) -> String {
    if !s.chars().any(|c| is_unsafe(c) && c != '\n' && c != '\t')
        && !s.contains("##[")
        && !s.contains(AZURE)
    {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("##[") {
            out.push_str("#\\u0023[");
            rest = &rest[3..];
            continue;
        }
        if rest.starts_with(AZURE) {
            out.push_str("#\\u0023vso[");
            rest = &rest[AZURE.len()..];
            continue;
        }
        if is_unsafe(c) && c != '\n' && c != '\t' {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Text for a generated page (Markdown or HTML): every control and invisible character escaped as [`shown`]
/// does, except line breaks and tabs, which the page's own escaping handles (a Markdown cell turns a line break
/// into `<br>`; HTML reads it as a space).
pub fn page(s: &str) -> String {
    let keep = |c: char| matches!(c, '\n' | '\r' | '\t');
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Every string inside `v` (keys included) passed through `f`: a serialised value made safe as a whole.
pub fn map_strings(v: &mut serde_json::Value, f: &dyn Fn(&str) -> String) {
    match v {
        serde_json::Value::String(s) => {
            let t = f(s);
            if t != *s {
                *s = t;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| map_strings(x, f)),
        serde_json::Value::Object(o) => {
            let old = std::mem::take(o);
            for (k, mut x) in old {
                map_strings(&mut x, f);
                o.insert(f(&k), x);
            }
        }
        _ => {}
    }
}

/// `text` without terminal escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \\`, DCS/SOS/PM/APC
/// strings, two-byte `ESC x`, and their 8-bit C1 forms) and without other control characters except tab and
/// newline, so `\x1b[33mper-op\x1b[0m forward` reads `per-op forward`. Line breaks are kept (line numbers hold).
pub fn strip_escapes(text: &str) -> String {
    strip_escapes_counted(text).0
}

/// [`strip_escapes`] and how many escape sequences it removed (each `ESC ...` or 8-bit C1 sequence counts
/// once; other control characters removed are not counted): the `log_ansi_stripped` count (case 38).
pub fn strip_escapes_counted(text: &str) -> (String, usize) {
    let mut sequences = 0;
    let mut out = String::with_capacity(text.len());
    let mut it = text.chars().peekable();
    // Skips a string sequence's body up to BEL, ST (`ESC \\`) or the 8-bit ST.
    fn skip_string(it: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        while let Some(c) = it.next() {
            match c {
                '\u{7}' | '\u{9c}' | '\n' => return,
                '\u{1b}' => {
                    if it.peek() == Some(&'\\') {
                        it.next();
                    }
                    return;
                }
                _ => {}
            }
        }
    }
    fn skip_csi(it: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        while let Some(&c) = it.peek() {
            if ('\u{20}'..='\u{3f}').contains(&c) {
                it.next();
            } else {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    it.next();
                }
                return;
            }
        }
    }
    while let Some(c) = it.next() {
        if matches!(
            c,
            '\u{1b}' | '\u{9b}' | '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}'
        ) {
            sequences += 1;
        }
        match c {
            '\u{1b}' => match it.next() {
                Some('[') => skip_csi(&mut it),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut it),
                Some(c2) if ('\u{20}'..='\u{2f}').contains(&c2) => {
                    // nF: intermediates, then one final byte.
                    while it.peek().is_some_and(|c| ('\u{20}'..='\u{2f}').contains(c)) {
                        it.next();
                    }
                    it.next();
                }
                Some('\n') => out.push('\n'),
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut it),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    (out, sequences)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_zero_carries_no_minus() {
        assert_eq!(signed(-0.001, 2), "+0.00");
        assert_eq!(signed(-0.0, 1), "+0.0");
        assert_eq!(signed(0.004, 2), "+0.00");
        assert_eq!(signed(-0.006, 2), "-0.01");
        assert_eq!(signed(-1.5, 1), "-1.5");
        assert_eq!(signed(2.25, 2), "+2.25");
        assert_eq!(signed(-3.0, 0), "-3");
        assert_eq!(signed(-0.4, 0), "+0");
    }

    #[test]
    fn a_count_of_one_is_singular() {
        assert_eq!(counted(1, "request"), "1 request");
        assert_eq!(counted(0, "request"), "0 requests");
        assert_eq!(counted(12, "request"), "12 requests");
    }

    /// Each hostile field of the escaping tests: `::`, `%0A`, CR, LF, ESC, BEL (and the legacy `##[`).
    const HOSTILE: &str =
        "\n::stop-commands::z\r::error::x%0A::add-mask::y\u{1b}[31m\u{7}##[error]w";

    #[test]
    fn outside_text_is_one_line_with_no_command_and_no_control_byte() {
        let s = shown(HOSTILE);
        assert_eq!(
            s,
            "\\n::stop-commands::z\\r::error::x%0A::add-mask::y\\u{1b}[31m\\u{7}##\\[error]w"
        );
        assert!(!s.chars().any(is_unsafe));
        assert!(!s.contains("##["));
        assert_eq!(shown("::error::fake"), "\\::error::fake");
        assert_eq!(shown("  ::error::fake"), "  \\::error::fake");
        assert_eq!(shown("\t::x"), "\\t::x");
        assert_eq!(
            shown("a\u{202E}b\u{9b}c\u{7f}"),
            "a\\u{202e}b\\u{9b}c\\u{7f}"
        );
        // Idempotent, and plain text is untouched.
        assert_eq!(shown(&s), s);
        assert_eq!(shown(&shown("::x")), "\\::x");
        for plain in [
            "rate PASS median 5.0 tok/s",
            "Qwen2.5 中文 ::1 std::io",
            "50% off",
        ] {
            assert_eq!(shown(plain), plain);
        }
    }

    #[test]
    fn azure_pipelines_logging_commands_are_broken_anywhere_in_a_line() {
        // A fresh-user trial: a serve replying this reached stdout raw in a known_answer FAIL line.
        let reply = "##vso[task.complete result=Succeeded;]ok";
        let s = shown(&format!("known_answer FAIL request 00: {reply:?}"));
        assert!(!s.contains("##vso["), "{s}");
        assert!(s.contains("##vso\\[task.complete"), "{s}");
        assert_eq!(shown(&s), s);
        assert_eq!(
            lines("a\nx ##vso[task.setvariable variable=v]1"),
            "a\nx ##vso\\[task.setvariable variable=v]1"
        );
        let v = serde_json::json!({ "content": reply });
        let safe = json(&serde_json::to_string(&v).unwrap());
        assert!(!safe.contains("##vso["), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
    }

    #[test]
    fn printed_lines_keep_servegate_s_breaks_and_guard_each_line() {
        let text = format!("gate report:\n  {HOSTILE}\n::warning::x\n\tok");
        let out = lines(&text);
        for l in out.lines() {
            assert!(!l.trim_start().starts_with("::"), "{l:?}");
            assert!(!l.contains("##["), "{l:?}");
            assert!(!l.chars().any(|c| is_unsafe(c) && c != '\t'), "{l:?}");
        }
        assert_eq!(out.lines().count(), 5, "{out}");
        assert_eq!(lines("a\n\tb\n"), "a\n\tb\n");
        assert_eq!(lines(&out), out);
    }

    #[test]
    fn json_stays_valid_and_equal() {
        let v =
            serde_json::json!({ "content": "x\u{7f}\u{9b}31m\u{202e}##[error]y\n::z", "##[k": 1 });
        let raw = serde_json::to_string_pretty(&v).unwrap();
        assert!(raw.contains('\u{9b}') && raw.contains("##["));
        let safe = json(&raw);
        assert!(!safe.chars().any(|c| is_unsafe(c) && c != '\n'), "{safe}");
        assert!(!safe.contains("##["), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, v);
        assert_eq!(lines(&safe), safe);
    }

    #[test]
    fn pages_keep_line_breaks_and_show_the_rest() {
        assert_eq!(
            page("a\u{1b}[2Jb\u{7}\nc\r\n\t"),
            "a\\u{1b}[2Jb\\u{7}\nc\r\n\t"
        );
        let mut v = serde_json::json!({"a\u{7}": ["x\u{1b}", 1.5, {"b": "ok"}]});
        map_strings(&mut v, &page);
        assert_eq!(
            v,
            serde_json::json!({"a\\u{7}": ["x\\u{1b}", 1.5, {"b": "ok"}]})
        );
    }
}
