//! A verdict line as a terminal or a CI log shows it: one line of at most [`VERDICT_LINE_CHARS`] characters
//! that keeps the totals at its start and the `n=K of N planned` at its end, names the failing requests or
//! arms by number, and says a repeated reason once with its count. The full message stays in the results
//! JSON, the Markdown summary and `-v` (`servegate run -v`, `SERVEGATE_VERBOSE=1` for the harness). Pure.
//!
//! The shapes it folds (as `judge` writes them):
//! * per-request items joined by `; `: `request 03: failed reply: transport: ...` or
//!   `arm 2 ours request 01 (one token chunk: no decode window)`: items with the same reason become one,
//!   `request 00-02: failed reply: ... (3 times)`, the rarer reasons first;
//! * a pair gate's per-arm parts joined by ` | `: `arm 1 theirs: 2 of 2 replies match (...)`: parts with the
//!   same text (their trailing parenthesised detail set aside) become one, `arms 1-4, 6: 2 of 2 replies
//!   match`; parts that say `fail` first.
//!
//! What is still too long is cut at an item boundary with `… N more (full: results JSON, -v)`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

/// Longest verdict line shown on a console, in characters.
pub(crate) const VERDICT_LINE_CHARS: usize = 300;

static FULL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Shows every verdict line whole from now on ([`shown`]): `servegate run -v`, `servegate judge -v`.
pub fn show_full(full: bool) {
    FULL.store(full, std::sync::atomic::Ordering::SeqCst);
}

/// A verdict message as the console shows it: whole after [`show_full`]`(true)`, else [`compact`].
pub(crate) fn shown(msg: &str) -> String {
    if FULL.load(std::sync::atomic::Ordering::SeqCst) {
        msg.to_string()
    } else {
        compact(msg)
    }
}

/// `msg` as one console line of at most [`VERDICT_LINE_CHARS`] characters ([`compact_to`]).
pub(crate) fn compact(msg: &str) -> String {
    compact_to(msg, VERDICT_LINE_CHARS)
}

/// `msg` as one line of at most `max` characters (about: a word is never cut when a boundary is near):
/// unchanged when it fits; else repeated reasons folded, then cut at an item boundary, the trailing
/// `(... n=K of N planned ...)` kept.
pub(crate) fn compact_to(msg: &str, max: usize) -> String {
    let msg = msg.replace(['\n', '\r'], " ");
    if chars(&msg) <= max {
        return msg;
    }
    let arms = msg.contains(" | ") && any_arm_re().is_match(&msg);
    // A pair line's trailing detail is its last arm's, not the line's.
    let (body, tail) = if arms {
        (msg.as_str(), "")
    } else {
        split_tail(&msg)
    };
    let (folded, sep) = if arms {
        (fold_arms(body), " | ")
    } else {
        (fold_items(body), "; ")
    };
    let line = format!("{folded}{tail}");
    if chars(&line) <= max {
        return line;
    }
    // Long quotes (a log line, a reply) are the first to give way.
    let folded = shorten_quotes(&folded, QUOTE_CHARS);
    let line = format!("{folded}{tail}");
    if chars(&line) <= max {
        return line;
    }
    cut(&folded, sep, tail, max)
}

/// Characters a quoted text keeps when a line is too long ([`shorten_quotes`]).
pub(crate) const QUOTE_CHARS: usize = 60;

/// Every `"..."` of more than `keep` characters (escaped quotes inside honoured) cut to its first `keep`
/// characters and `…`.
fn shorten_quotes(s: &str, keep: usize) -> String {
    let mut out = String::with_capacity(s.len());
    let mut inside: Option<String> = None;
    let mut escaped = false;
    for c in s.chars() {
        match inside.as_mut() {
            None => {
                out.push(c);
                if c == '"' {
                    inside = Some(String::new());
                }
            }
            Some(q) => {
                if c == '"' && !escaped {
                    if q.chars().count() > keep {
                        let head: String = q.chars().take(keep).collect();
                        out.push_str(&head);
                        out.push('…');
                    } else {
                        out.push_str(q);
                    }
                    out.push('"');
                    inside = None;
                } else {
                    escaped = c == '\\' && !escaped;
                    q.push(c);
                }
            }
        }
    }
    if let Some(q) = inside {
        out.push_str(&q);
    }
    out
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// The trailing parenthesised group when it states the n (`(n=6 of 6 planned)`,
/// `(limit 1000; each: ...; n=2 of 2 planned)`): (the rest, the group with its leading space).
fn split_tail(msg: &str) -> (&str, &str) {
    if !msg.ends_with(')') {
        return (msg, "");
    }
    let mut depth = 0i32;
    for (i, c) in msg.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    let group = &msg[i..];
                    if group.contains(" planned") || group.contains("n=") {
                        let start = msg[..i].trim_end().len();
                        return (&msg[..start], &msg[start..]);
                    }
                    return (msg, "");
                }
            }
            _ => {}
        }
    }
    (msg, "")
}

fn subject_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(r"^((?:arm \d+ (?:ours|theirs) )?(?:request|prompt) )(\d+)(: | \()")
            .expect("regex")
    })
}

fn any_arm_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?:^| )arm \d+ (?:ours|theirs): ").expect("regex"))
}

fn arm_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^arm (\d+) (ours|theirs): ").expect("regex"))
}

/// `1, 2, 3, 5` as `1-3, 5` (numbers as given, in order of appearance, ranges over consecutive ones).
fn ranges(nums: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < nums.len() {
        let mut j = i;
        while j + 1 < nums.len() {
            match (nums[j].parse::<u64>(), nums[j + 1].parse::<u64>()) {
                (Ok(a), Ok(b)) if b == a + 1 => j += 1,
                _ => break,
            }
        }
        if j >= i + 2 {
            out.push(format!("{}-{}", nums[i], nums[j]));
        } else {
            out.extend(nums[i..=j].iter().cloned());
        }
        i = j + 1;
    }
    out.join(", ")
}

/// Per-request items joined by `; ` with the same reason folded into one.
fn fold_items(body: &str) -> String {
    // Where the first item starts: at the start, or after ": " or "; ".
    let mut start = None;
    for (i, _) in body.char_indices() {
        let at_boundary = i == 0 || body[..i].ends_with(": ") || body[..i].ends_with("; ");
        if at_boundary && subject_re().is_match(&body[i..]) {
            start = Some(i);
            break;
        }
    }
    let Some(start) = start else {
        return body.to_string();
    };
    let (header, rest) = body.split_at(start);
    // Items: a token that starts with a subject opens one; any other token continues the current one.
    let mut items: Vec<String> = Vec::new();
    for tok in rest.split("; ") {
        if subject_re().is_match(tok) || items.is_empty() {
            items.push(tok.to_string());
        } else if let Some(last) = items.last_mut() {
            last.push_str("; ");
            last.push_str(tok);
        }
    }
    // Group by (subject prefix, separator + reason), in order of first appearance.
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut loose: Vec<(usize, String)> = Vec::new();
    for it in &items {
        match subject_re().captures(it) {
            Some(c) => {
                let prefix = c[1].to_string();
                let num = c[2].to_string();
                let reason = it[c.get(3).map_or(it.len(), |m| m.start())..].to_string();
                let key = (prefix, reason);
                if !groups.contains_key(&key) {
                    order.push(key.clone());
                }
                groups.entry(key).or_default().push(num);
            }
            None => loose.push((order.len(), it.clone())),
        }
    }
    // The rarer reasons first (a reason said once for many requests is the bulk; a lone one is news), in order
    // of first appearance among equals; text between items stays before the item it preceded.
    let mut ranked: Vec<usize> = (0..order.len()).collect();
    ranked.sort_by_key(|&gi| groups[&order[gi]].len());
    let mut parts: Vec<String> = Vec::new();
    for gi in ranked {
        let key = &order[gi];
        for (_, l) in loose.iter().filter(|(at, _)| *at == gi) {
            parts.push(l.clone());
        }
        let nums = &groups[key];
        let (prefix, reason) = key;
        if nums.len() == 1 {
            parts.push(format!("{prefix}{}{reason}", nums[0]));
        } else {
            parts.push(format!(
                "{prefix}{}{reason} ({} times)",
                ranges(nums),
                nums.len()
            ));
        }
    }
    for (_, l) in loose.iter().filter(|(at, _)| *at >= order.len()) {
        parts.push(l.clone());
    }
    format!("{header}{}", parts.join("; "))
}

/// A pair gate's per-arm parts joined by ` | ` with the same text folded into one, failing ones first.
fn fold_arms(body: &str) -> String {
    let first = body
        .match_indices("arm ")
        .map(|(i, _)| i)
        .find(|&i| arm_re().is_match(&body[i..]))
        .unwrap_or(0);
    let (header, rest) = body.split_at(first);
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut loose: Vec<String> = Vec::new();
    for part in rest.split(" | ") {
        match arm_re().captures(part) {
            Some(c) => {
                let text = part[c.get(0).map_or(0, |m| m.end())..].to_string();
                let (text, _) = split_tail(&text);
                let text = text.to_string();
                if !groups.contains_key(&text) {
                    order.push(text.clone());
                }
                groups.entry(text).or_default().push(c[1].to_string());
            }
            None => loose.push(part.to_string()),
        }
    }
    let failing = |t: &str| t.to_lowercase().contains("fail");
    order.sort_by_key(|t| !failing(t));
    let mut parts: Vec<String> = order
        .iter()
        .map(|t| {
            let arms = &groups[t];
            if arms.len() == 1 {
                format!("arm {}: {t}", arms[0])
            } else {
                format!("arms {}: {t}", ranges(arms))
            }
        })
        .collect();
    parts.extend(loose);
    format!("{header}{}", parts.join(" | "))
}

/// A piece of a verdict that is advice ([`is_advice`]): a verb of what to do and the gate key or command
/// to do it with (`raise [load] requests to 20 or more`, `set [serve] ready_timeout_s to wait ...`, `fix
/// the gate's [serve] url`, `[request] warmup_requests = 1 ... keeps it out`), or the command that does it
/// (`floor could be 52.1: servegate bless`).
fn advice_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r"\b(?i:raise|lower|set|fix|start|add|increase)\b.{0,80}?(\[[a-z_][a-z_.{}]*\]|\b[a-z_]+ = |servegate [a-z])|: servegate (?:bless|init|check)\b",
        )
        .expect("regex")
    })
}

/// True when `piece` says what to do about the verdict ([`advice_re`]): such a piece is never what a
/// shortened line drops ([`cut`]).
fn is_advice(piece: &str) -> bool {
    advice_re().is_match(piece)
}

/// `folded` cut at the last `sep` boundary that leaves room for `… N more (full: results JSON, -v)` and
/// `tail`; `tail` itself shortened when it alone is too long. Advice ([`is_advice`]: what to raise, set or
/// fix) is kept whole after what fits of the rest: the list of values gives way, not the remedy.
fn cut(folded: &str, sep: &str, tail: &str, max: usize) -> String {
    let tail: String = if chars(tail) > max / 3 {
        let keep: String = tail.chars().take(max / 3 - 2).collect();
        format!("{keep}…)")
    } else {
        tail.to_string()
    };
    let all: Vec<&str> = folded.split(sep).collect();
    // The first piece (the verdict's head) stays first; advice after it is set aside and kept.
    let advice: String = all
        .iter()
        .skip(1)
        .filter(|p| is_advice(p))
        .map(|p| format!("{sep}{p}"))
        .collect();
    let pieces: Vec<&str> = all
        .iter()
        .enumerate()
        .filter(|(i, p)| *i == 0 || !is_advice(p))
        .map(|(_, p)| *p)
        .collect();
    let note = |n: usize| format!("{sep}… {n} more (full: results JSON, -v)");
    let mut kept = String::new();
    for (i, p) in pieces.iter().enumerate() {
        let next = if i == 0 {
            p.to_string()
        } else {
            format!("{kept}{sep}{p}")
        };
        let rest = pieces.len() - i - 1;
        let room = chars(&next)
            + chars(&advice)
            + chars(&tail)
            + if rest > 0 { chars(&note(rest)) } else { 0 };
        if room > max {
            if i == 0 {
                // The first piece alone is too long: cut it at a character boundary.
                let budget = max
                    .saturating_sub(chars(&advice) + chars(&tail) + chars(&note(pieces.len())) + 1);
                let head: String = p.chars().take(budget).collect();
                let more = match pieces.len() - 1 {
                    0 => String::new(),
                    n => note(n),
                };
                return format!("{head}…{advice}{more}{tail}");
            }
            return format!("{kept}{advice}{}{tail}", note(pieces.len() - i));
        }
        kept = next;
    }
    format!("{kept}{advice}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shortened line keeps its advice whole (what to raise, set or fix) and drops values instead: the
    /// url serve that is not there (its remedy after a long first part) and a list of requests with the
    /// remedy last; a piece without advice is not kept for its words alone (`[DONE]` is no gate key).
    #[test]
    fn a_shortened_line_keeps_the_remedy_and_drops_values() {
        let url = "http://127.0.0.1:39309";
        let m = format!(
            "content FAIL the serve never became ready: ready_timeout: {url}/health refused all 60 probes over 3.0 s: nothing listens there (servegate does not start a url serve); start it, or fix [serve] url (set [serve] ready_timeout_s to wait for a serve starting elsewhere); serve.log ends: {}",
            "x".repeat(200)
        );
        let c = compact(&m);
        assert!(
            c.contains("; start it, or fix [serve] url (set [serve] ready_timeout_s to wait for a serve starting elsewhere); … 1 more"),
            "{c}"
        );
        let items: Vec<String> = (0..12)
            .map(|i| {
                format!(
                    "request {i:02} (transport: connect failed {})",
                    "y".repeat(i)
                )
            })
            .collect();
        let m = format!(
            "first_token INDETERMINATE 12 of 12 not measured: {}; raise [request] repeats to 20 or more (limit 100 ms; each: -; n=0 of 12 planned)",
            items.join("; ")
        );
        let c = compact(&m);
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{c}");
        assert!(
            c.contains("; raise [request] repeats to 20 or more; … ")
                && c.ends_with(
                    " more (full: results JSON, -v) (limit 100 ms; each: -; n=0 of 12 planned)"
                ),
            "{c}"
        );
        assert!(!is_advice(
            "request 02 (truncated_stream: no finish_reason, no [DONE])"
        ));
        assert!(is_advice("raise [load] requests to 20 or more"));
        // A rate's floor hint after a long list of values: the values give way.
        let each: Vec<String> = (0..60).map(|i| format!("{}.{i}", 40 + i)).collect();
        let m = format!(
            "rate PASS median 52.5 tok/s (floor 10.5; each: {}; n=60 of 60 planned) (floor could be 52.1: servegate bless)",
            each.join(", ")
        );
        let c = compact(&m);
        assert!(c.contains("(floor could be 52.1: servegate bless)"), "{c}");
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{c}");
    }

    #[test]
    fn a_short_line_is_left_as_it_is() {
        let m = "rate PASS median 43.8 tok/s (floor 1.0; each: 43.8; n=1 of 1 planned)";
        assert_eq!(compact(m), m);
    }

    #[test]
    fn a_dead_upstream_s_repeated_error_is_said_once_with_its_count() {
        let err = format!(
            "transport: error sending request for url (http://127.0.0.1:4000/v1/chat/completions): client error (Connect): tcp connect error: Connection refused (os error 111){}",
            " x".repeat(40)
        );
        let items: Vec<String> = (0..6)
            .map(|i| format!("request {i:02}: failed reply: {err}"))
            .collect();
        let m = format!(
            "content FAIL 6 of 6 replies fail: {} (n=6 of 6 planned)",
            items.join("; ")
        );
        assert!(m.len() > 1200);
        let c = compact(&m);
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{} {c}", chars(&c));
        assert!(
            c.starts_with("content FAIL 6 of 6 replies fail: request 00-05: failed reply: transport: error sending request"),
            "{c}"
        );
        assert!(c.ends_with(" (n=6 of 6 planned)"), "{c}");
        // Fits once folded: the reason is whole, with its count.
        let short = m.replace(&" x".repeat(40), "");
        let c = compact(&short);
        assert!(
            c.ends_with("(os error 111) (6 times) (n=6 of 6 planned)"),
            "{c}"
        );
        assert_eq!(c.matches("Connection refused").count(), 1, "{c}");
    }

    #[test]
    fn different_reasons_keep_their_requests_by_number() {
        let mut items: Vec<String> = (0..20)
            .map(|i| {
                format!(
                    "arm {} ours request {:02} (no decode rate in the reply)",
                    i % 4 + 1,
                    i
                )
            })
            .collect();
        items.push("arm 3 ours request 21 (decode window 0.3 ms under the 5 ms minimum)".into());
        let m = format!(
            "rate FAIL 21 of 120 planned requests have no decode rate value: {} (n=120 of 120 planned)",
            items.join("; ")
        );
        let c = compact(&m);
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{c}");
        assert!(c.starts_with("rate FAIL 21 of 120 planned"), "{c}");
        assert!(
            c.contains("arm 3 ours request 21 (decode window 0.3 ms"),
            "{c}"
        );
        assert!(
            c.contains(
                "arm 1 ours request 00, 04, 08, 12, 16 (no decode rate in the reply) (5 times)"
            ),
            "{c}"
        );
        assert!(c.ends_with("(n=120 of 120 planned)"), "{c}");
    }

    #[test]
    fn forty_arms_fold_to_their_distinct_texts_failing_first() {
        let parts: Vec<String> = (1..=40)
            .map(|a| {
                let side = if a % 4 == 1 || a % 4 == 0 { "theirs" } else { "ours" };
                if a == 17 {
                    format!("arm {a} {side}: 1 of 3 replies fail to match \"Paris\": request 02 \"Lyon\" (n=3 of 3 planned)")
                } else {
                    format!("arm {a} {side}: 3 of 3 replies match \"Paris\" (each: \"Paris\", \"Paris\", \"Paris\"; n=3 of 3 planned)")
                }
            })
            .collect();
        let m = format!("known_answer FAIL {}", parts.join(" | "));
        assert!(m.len() > 3000, "{}", m.len());
        let c = compact(&m);
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{c}");
        assert_eq!(
            c,
            "known_answer FAIL arm 17: 1 of 3 replies fail to match \"Paris\": request 02 \"Lyon\" | arms 1-16, 18-40: 3 of 3 replies match \"Paris\""
        );
    }

    #[test]
    fn what_cannot_fold_is_cut_at_an_item_with_the_rest_counted() {
        let items: Vec<String> = (0..40)
            .map(|i| format!("request {i:02}: reason number {i} that differs from every other one"))
            .collect();
        let m = format!(
            "content FAIL 40 of 40 replies fail: {} (n=40 of 40 planned)",
            items.join("; ")
        );
        let c = compact(&m);
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{c}");
        assert!(
            c.starts_with("content FAIL 40 of 40 replies fail: request 00: reason number 0"),
            "{c}"
        );
        assert!(
            c.contains("more (full: results JSON, -v) (n=40 of 40 planned)"),
            "{c}"
        );
        let shown = c.matches("request ").count();
        assert!(c.contains(&format!("… {} more", 40 - shown)), "{c}");
        // One endless word is cut too.
        let c = compact(&"x".repeat(5000));
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{}", chars(&c));
    }

    #[test]
    fn a_long_quote_gives_way_before_an_item_is_dropped() {
        let m = format!(
            "route PASS fast route: serve.log line 9 matches /x/: \"{}\"; slow /threadpool init/ absent",
            "0.00.001.135 I cmn  common_param: system_info: n_threads = 1 | CPU : SSE3 = 1 ".repeat(4)
        );
        let c = compact(&m);
        assert!(chars(&c) <= VERDICT_LINE_CHARS, "{c}");
        assert!(c.ends_with("…\"; slow /threadpool init/ absent"), "{c}");
        assert_eq!(shorten_quotes(r#"a "x\"yz" b"#, 2), r#"a "x\…" b"#);
    }

    #[test]
    fn ranges_fold_consecutive_numbers_only() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            ranges(&n(&["00", "01", "02", "04", "05", "07"])),
            "00-02, 04, 05, 07"
        );
        assert_eq!(ranges(&n(&["3"])), "3");
    }
}
