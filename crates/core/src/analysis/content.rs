//! Content checks that need no model: degenerate output (one character or one short piece repeated, as NaN
//! logits and broken kernels produce), a repeated token id in a server log, and a reply whose whole token
//! budget went to reasoning; reasoning markup (`<think>…</think>`) at the start of content; tool calls as
//! text. Pure functions on text; they say what they saw and leave the verdict to the
//! judge. An empty or whitespace-only reply is *not* degenerate here — it is empty, and the judge says so.

use regex::Regex;

/// Minimum non-whitespace characters before any degenerate rule applies (4).
pub const MIN_NON_SPACE: usize = 4;

/// Share of the non-whitespace characters one character must reach to be "one character repeated" (90 %).
pub const ONE_CHAR_SHARE: f64 = 0.90;

/// Longest piece, in characters, considered by the repeated-piece rule (32).
pub const MAX_PIECE_CHARS: usize = 32;

/// Minimum whole repetitions of the piece (4).
pub const MIN_REPEATS: usize = 4;

/// Share of the text the repeated run must cover (90 %; a short lead-in such as "Sure! " is allowed).
pub const RUN_SHARE: f64 = 0.90;

/// Says why a reply text is degenerate, or `None`.
///
/// Rules, in order (both need at least [`MIN_NON_SPACE`] non-whitespace characters):
/// 1. **One character repeated**: one character is ≥ [`ONE_CHAR_SHARE`] of the non-whitespace characters →
///    `degenerate_output: one character repeated ('/' ×8 of 8 non-space chars)`.
/// 2. **One short piece repeated**: with whitespace runs collapsed to one space and the ends trimmed, a
///    suffix covering ≥ [`RUN_SHARE`] of the text has a period of p ≤ [`MAX_PIECE_CHARS`] characters and
///    holds ≥ [`MIN_REPEATS`] whole copies of it ("abcabcabcabc", "the the the the the the") →
///    `degenerate_output: one piece repeated ("the " ×6, 23 of 23 chars)`. The smallest such period is
///    named. Ordinary sentences have no period this short over 90 % of their length, so
///    "The capital of France is Paris." is never flagged; a short lead-in before a loop is tolerated.
pub fn degenerate(text: &str) -> Option<String> {
    let non_space: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    let n = non_space.len();
    if n < MIN_NON_SPACE {
        return None;
    }
    // Rule 1: one character. Most frequent; ties go to the character seen first.
    let mut counts: std::collections::HashMap<char, (usize, usize)> =
        std::collections::HashMap::new();
    for (i, &c) in non_space.iter().enumerate() {
        counts.entry(c).or_insert((0, i)).0 += 1;
    }
    let best = counts
        .iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1)))
        .map(|(&c, &(k, _))| (c, k));
    if let Some((c, k)) = best {
        if k as f64 >= ONE_CHAR_SHARE * n as f64 {
            // Serve text in a verdict: a repeated BEL or ESC is shown escaped, never sent to the terminal.
            let c = crate::analysis::quote::printable(&c.to_string());
            return Some(format!(
                "degenerate_output: one character repeated ('{c}' ×{k} of {n} non-space chars)"
            ));
        }
    }
    // Rule 2: one short piece.
    let norm: Vec<char> = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .collect();
    let len = norm.len();
    for p in 1..=MAX_PIECE_CHARS.min(len / MIN_REPEATS) {
        // Longest suffix with period p: norm[i] == norm[i + p] for all i from `start` on.
        let mut start = len - p;
        while start > 0 && norm[start - 1] == norm[start - 1 + p] {
            start -= 1;
        }
        let run = len - start;
        let repeats = run / p;
        if repeats >= MIN_REPEATS && run as f64 >= RUN_SHARE * len as f64 {
            let piece: String = norm[start..start + p].iter().collect();
            // Shown rounded: "the the the" is three copies of "the " even though the last lacks its space.
            let shown = (run as f64 / p as f64).round() as usize;
            return Some(format!(
                "degenerate_output: one piece repeated ({piece:?} ×{shown}, {run} of {len} chars)"
            ));
        }
    }
    None
}

/// True for a control character a reply's text may not carry: every control character (C0, DEL, C1: Unicode
/// category Cc) except TAB, LF and CR, which text meant for a reader holds.
pub fn is_control_in_text(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// Says why a reply text carries control characters, or `None`: any [`is_control_in_text`] character, such
/// as ESC opening a terminal escape sequence (`\u{1b}[31m` colour, `\u{1b}]0;title\u{7}` window title, the
/// 8-bit CSI `\u{9b}`), BEL, NUL or backspace. A serve answering with them is not answering text: a terminal
/// would act on them (recolour, move the cursor, retitle), a reader sees noise, and the chat template,
/// detokenizer or a log sink has leaked into the answer. The reason counts the characters and the escape
/// sequences they open ([`crate::text::strip_escapes_counted`]'s count) and quotes, escaped, the text from the
/// first one:
/// `control_characters: 2 control characters, opening 2 terminal escape sequences (from char 0:
/// "\u{1b}[31mParis\u{1b}[0m")`.
pub fn control_characters(text: &str) -> Option<String> {
    let (first, _) = text
        .chars()
        .enumerate()
        .find(|(_, c)| is_control_in_text(*c))?;
    let n = text.chars().filter(|c| is_control_in_text(*c)).count();
    let sequences = crate::text::strip_escapes_counted(text).1;
    let plural = |k: usize, one: &str, many: &str| {
        if k == 1 {
            format!("{k} {one}")
        } else {
            format!("{k} {many}")
        }
    };
    let what = plural(n, "control character", "control characters");
    let seqs = match sequences {
        0 => String::new(),
        k => format!(
            ", opening {}",
            plural(k, "terminal escape sequence", "terminal escape sequences")
        ),
    };
    let from: String = text.chars().skip(first).collect();
    Some(format!(
        "control_characters: {what}{seqs} (from char {first}: {})",
        crate::analysis::quote::quoted(&from, 24)
    ))
}

/// The longest run of one identical capture among the matches of `pattern` in `log`, when that run is at
/// least `min_run` long: `Some((captured, run))`. Capture group 1 is used when the pattern has one, else the
/// whole match. For llama.cpp's verbose log, `next token:\s+(\d+) '` finds a sampler stuck on one token id
/// (NaN logits → the same id forever): `repeated_token_ids(log, &re, 4) == Some(("38".into(), 6))`.
/// On a tie the earliest run is returned.
pub fn repeated_token_ids(log: &str, pattern: &Regex, min_run: usize) -> Option<(String, usize)> {
    let mut best: Option<(String, usize)> = None;
    let mut cur: Option<(String, usize)> = None;
    for caps in pattern.captures_iter(log) {
        let Some(m) = caps.get(1).or_else(|| caps.get(0)) else {
            continue;
        };
        let id = m.as_str();
        cur = match cur {
            Some((prev, k)) if prev == id => Some((prev, k + 1)),
            _ => Some((id.to_string(), 1)),
        };
        if let Some((id, k)) = &cur {
            if best.as_ref().is_none_or(|(_, bk)| k > bk) {
                best = Some((id.clone(), *k));
            }
        }
    }
    best.filter(|(_, k)| *k >= min_run.max(1))
}

/// Says when the content is empty but reasoning is not: the token budget went to thinking. `None` when
/// the content has non-whitespace text or there was no reasoning.
///
/// `content_empty_all_tokens_in_reasoning: all 8 completion tokens went to reasoning_content;
/// finish_reason=length (max_tokens hit while thinking)`. `completion_tokens` is the count from the serve
/// (tokens), `None` when unknown.
pub fn reasoning_ate_budget(
    content: &str,
    reasoning: &str,
    completion_tokens: Option<u64>,
    finish_reason: Option<&str>,
) -> Option<String> {
    if !content.trim().is_empty() || reasoning.trim().is_empty() {
        return None;
    }
    let tokens = match completion_tokens {
        Some(n) => format!("all {n} completion tokens"),
        None => "all completion tokens".to_string(),
    };
    let finish = match finish_reason {
        Some("length") => "finish_reason=length (max_tokens hit while thinking)".to_string(),
        Some(f) => format!("finish_reason={}", crate::analysis::quote::printable(f)),
        None => "finish_reason=none".to_string(),
    };
    Some(format!(
        "content_empty_all_tokens_in_reasoning: {tokens} went to reasoning_content; {finish}"
    ))
}

/// Tag names taken as reasoning markup at the start of `content`: `<think>` (DeepSeek-R1, Qwen3, QwQ),
/// `<thinking>`, `<thought>`, `<reasoning>`. Matched case-insensitively.
pub const REASONING_TAGS: &[&str] = &["think", "thinking", "thought", "reasoning"];

/// Reasoning markup found at the start of a reply's content by [`reasoning_markup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningMarkup {
    /// The tag name as written (`think`).
    pub tag: String,
    /// The text inside the markup (between the tags, or before the closing tag), trimmed.
    pub reasoning: String,
    /// The content after the closing tag, leading whitespace removed ("" when the markup is never closed).
    pub rest: String,
    /// Whether the opening tag was in the content (false: only `</think>` was, the template having put
    /// `<think>` into the prompt, as DeepSeek-R1 and Qwen3 templates do).
    pub opened: bool,
    /// Whether the closing tag was found (false: the reply is all thinking, e.g. cut by max_tokens).
    pub closed: bool,
}

/// Reasoning markup at the start of `content`, or `None`. Three shapes, tags from [`REASONING_TAGS`]:
/// 1. `<think>…</think>answer` (after optional leading whitespace): reasoning between the tags, the rest
///    is the answer;
/// 2. `<think>…` never closed: all of it is reasoning, the answer is "" (`closed = false`);
/// 3. `…</think>answer` with no opening tag (the chat template opened it in the prompt): the text before
///    the closing tag is reasoning (`opened = false`).
///
/// A tag later in the text (`Use <think> tags like this`) is not markup: only the very start counts for
/// an opening tag, and a closing tag without an opening one counts only when no other tag of the list
/// opens before it.
pub fn reasoning_markup(content: &str) -> Option<ReasoningMarkup> {
    let body = content.trim_start();
    let lower = body.to_ascii_lowercase();
    for tag in REASONING_TAGS {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        if lower.starts_with(&open) {
            let inner_start = open.len();
            return Some(match lower[inner_start..].find(&close) {
                Some(k) => ReasoningMarkup {
                    tag: body[1..inner_start - 1].to_string(),
                    reasoning: body[inner_start..inner_start + k].trim().to_string(),
                    rest: body[inner_start + k + close.len()..]
                        .trim_start()
                        .to_string(),
                    opened: true,
                    closed: true,
                },
                None => ReasoningMarkup {
                    tag: body[1..inner_start - 1].to_string(),
                    reasoning: body[inner_start..].trim().to_string(),
                    rest: String::new(),
                    opened: true,
                    closed: false,
                },
            });
        }
    }
    for tag in REASONING_TAGS {
        let close = format!("</{tag}>");
        if let Some(k) = lower.find(&close) {
            if lower[..k].contains(&format!("<{tag}>")) {
                continue;
            }
            return Some(ReasoningMarkup {
                tag: tag.to_string(),
                reasoning: body[..k].trim().to_string(),
                rest: body[k + close.len()..].trim_start().to_string(),
                opened: false,
                closed: true,
            });
        }
    }
    None
}

/// Tool calls as one text for matching and showing: `name(arguments)` per call, joined by `; `
/// (`get_weather({"city":"Paris"})`). A call without a name shows `?`.
pub fn tool_calls_text(calls: &[crate::analysis::reply_types::ToolCall]) -> String {
    calls
        .iter()
        .map(|c| format!("{}({})", c.name.as_deref().unwrap_or("?"), c.arguments))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_slashes_are_one_character_repeated() {
        assert_eq!(
            degenerate("////////").as_deref(),
            Some("degenerate_output: one character repeated ('/' ×8 of 8 non-space chars)")
        );
    }

    #[test]
    fn ninety_percent_one_character_is_degenerate_eighty_is_not() {
        assert!(degenerate("GGGGGGGGGx").is_some()); // 9 of 10
        assert!(degenerate("GGGGGGGGxy").is_none()); // 8 of 10, and no short period
    }

    #[test]
    fn fewer_than_four_non_space_chars_are_never_degenerate() {
        assert!(degenerate("!!!").is_none());
        assert!(degenerate("  ! !  ! ").is_none());
        assert!(degenerate("").is_none());
        assert!(degenerate("   \n\t").is_none());
    }

    #[test]
    fn repeated_piece_is_degenerate() {
        let r = degenerate("abcabcabcabc").unwrap();
        assert!(r.contains("\"abc\" ×4"), "{r}");
        let r = degenerate("the the the the the the").unwrap();
        assert!(r.contains("\"the \" ×6"), "{r}");
        assert!(degenerate("Sure! the the the the the the the the the the the the").is_some());
        assert!(degenerate("I I I I I I I I").is_some());
    }

    #[test]
    fn normal_sentences_are_not_degenerate() {
        for s in [
            "The capital of France is Paris.",
            "Paris is the capital city of France.",
            "Hello!",
            "Yes, indeed",
            "def parse(x):\n    return x",
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
            "All done.",
            "OK.",
            "Okay, the user wants a short answer",
            "aaa bbb",
            "Mississippi",
            "No. No.",
        ] {
            assert_eq!(degenerate(s), None, "{s}");
        }
    }

    #[test]
    fn three_repeats_are_not_enough() {
        assert!(degenerate("abcabcabc").is_none());
    }

    #[test]
    fn three_whole_copies_over_ninety_percent_are_not_enough() {
        // Period 5 over 19 of 20 chars: 3 whole copies and 4 chars of a fourth. Four whole copies are.
        assert_eq!(degenerate("Zabcdeabcdeabcdeabcd"), None);
        assert_eq!(
            degenerate("abcdeabcdeabcdeabcde").as_deref(),
            Some("degenerate_output: one piece repeated (\"abcde\" ×4, 20 of 20 chars)")
        );
    }

    #[test]
    fn exactly_four_non_space_chars_are_enough() {
        // MIN_NON_SPACE is inclusive: 4 is checked, 3 is not.
        assert_eq!(
            degenerate("!!!!").as_deref(),
            Some("degenerate_output: one character repeated ('!' ×4 of 4 non-space chars)")
        );
        assert_eq!(degenerate("!!!"), None);
    }

    #[test]
    fn a_short_loop_after_a_real_sentence_is_not_degenerate() {
        // "ha ha ha ha" repeats a 3-char piece 4 times but covers a quarter of the text: under RUN_SHARE.
        assert_eq!(
            degenerate("The capital of France is Paris, and that is all. ha ha ha ha"),
            None
        );
        // The same loop with a short lead-in (under 10 % of the text) is degenerate.
        assert!(degenerate("Ok: ha ha ha ha ha ha ha ha ha ha ha ha").is_some());
    }

    #[test]
    fn equal_runs_of_token_ids_name_the_earliest() {
        let re = Regex::new(r"id=(\d+)").unwrap();
        assert_eq!(
            repeated_token_ids("id=7 id=7 id=9 id=9", &re, 2),
            Some(("7".to_string(), 2))
        );
        // min_run 0 is taken as 1.
        assert_eq!(
            repeated_token_ids("id=5", &re, 0),
            Some(("5".to_string(), 1))
        );
        // Without a capture group the whole match is the id.
        let whole = Regex::new(r"x\d").unwrap();
        assert_eq!(
            repeated_token_ids("x1 x1 x2", &whole, 2),
            Some(("x1".to_string(), 2))
        );
    }

    #[test]
    fn token_id_38_six_times_is_found() {
        let log = "a next token:    38 'G'\nb next token:    38 'G'\nnext token:    38 'G'\n\
                   next token:    38 'G'\nnext token:    38 'G'\nnext token:    38 'G'\n";
        let re = Regex::new(r"next token:\s+(\d+) '").unwrap();
        assert_eq!(repeated_token_ids(log, &re, 4), Some(("38".to_string(), 6)));
        assert_eq!(repeated_token_ids(log, &re, 7), None);
    }

    #[test]
    fn varied_token_ids_are_no_run() {
        let log = "next token: 1 'a'\nnext token: 2 'b'\nnext token: 2 'b'\nnext token: 3 'c'\n";
        let re = Regex::new(r"next token:\s+(\d+) '").unwrap();
        assert_eq!(repeated_token_ids(log, &re, 3), None);
        assert_eq!(repeated_token_ids(log, &re, 2), Some(("2".to_string(), 2)));
        assert_eq!(repeated_token_ids("", &re, 1), None);
    }

    #[test]
    fn serve_text_in_content_reasons_is_escaped() {
        assert_eq!(
            degenerate("\u{7}\u{7}\u{7}\u{7}\u{7}").as_deref(),
            Some("degenerate_output: one character repeated ('\\u{7}' ×5 of 5 non-space chars)")
        );
        let why = reasoning_ate_budget("", "x", None, Some("stop\u{1b}[2J")).unwrap();
        assert!(why.ends_with("finish_reason=stop\\u{1b}[2J"), "{why}");
    }

    #[test]
    fn ansi_colour_codes_and_other_control_bytes_are_control_characters() {
        assert_eq!(
            control_characters("\u{1b}[31mParis\u{1b}[0m").as_deref(),
            Some("control_characters: 2 control characters, opening 2 terminal escape sequences (from char 0: \"\\u{1b}[31mParis\\u{1b}[0m\")")
        );
        // A window title (OSC ... BEL), the 8-bit CSI, a bare BEL, NUL, backspace, DEL: each kind counts.
        let why = control_characters("Paris\u{1b}]0;pwned\u{7}").unwrap();
        assert!(why.starts_with("control_characters: 2 control characters, opening 1 terminal escape sequence (from char 5: "), "{why}");
        assert!(control_characters("Paris \u{9b}2J")
            .unwrap()
            .contains("opening 1 terminal"));
        for c in ['\u{7}', '\0', '\u{8}', '\u{7f}', '\u{85}'] {
            let why = control_characters(&format!("The capital is Paris{c}.")).unwrap();
            assert!(
                why.starts_with("control_characters: 1 control character (from char 20: \""),
                "{why}"
            );
            assert!(!why.contains(c), "shown escaped: {why:?}");
        }
    }

    #[test]
    fn tab_newline_and_carriage_return_are_text() {
        for s in [
            "Paris",
            "a\tb\r\nc\n",
            "def f():\n\treturn 1\r\n",
            "Ünïcode – “quotes” 😀",
            "",
        ] {
            assert_eq!(control_characters(s), None, "{s:?}");
        }
        // The escape written out as text is text.
        assert_eq!(control_characters("print(\"\\x1b[31m\")"), None);
    }

    #[test]
    fn reasoning_only_reply_names_the_budget() {
        assert_eq!(
            reasoning_ate_budget("", "Okay, the user", Some(8), Some("length")).as_deref(),
            Some("content_empty_all_tokens_in_reasoning: all 8 completion tokens went to reasoning_content; finish_reason=length (max_tokens hit while thinking)")
        );
        assert_eq!(
            reasoning_ate_budget("Paris", "thinking", Some(8), Some("stop")),
            None
        );
        assert_eq!(reasoning_ate_budget("", "", Some(8), Some("stop")), None);
    }
    /// Shape 1: `<think>…</think>answer`, after leading whitespace, any case of the tag.
    #[test]
    fn closed_think_markup_at_the_start_is_reasoning_and_the_rest_is_the_answer() {
        let m = reasoning_markup("\n<think>\nNeed 2+2.\n</think>\n\nThe answer is 4.").unwrap();
        assert_eq!(m.tag, "think");
        assert_eq!(m.reasoning, "Need 2+2.");
        assert_eq!(m.rest, "The answer is 4.");
        assert!(m.opened && m.closed);
        let m = reasoning_markup("<Thinking>hm</Thinking>Paris.").unwrap();
        assert_eq!(
            (m.tag.as_str(), m.reasoning.as_str(), m.rest.as_str()),
            ("Thinking", "hm", "Paris.")
        );
    }

    /// Shape 2: an opening tag never closed (max_tokens hit while thinking): all reasoning, no answer.
    #[test]
    fn unclosed_think_markup_is_all_reasoning() {
        let m = reasoning_markup("<think>Let me count the r's in strawberry").unwrap();
        assert_eq!(m.reasoning, "Let me count the r's in strawberry");
        assert_eq!(m.rest, "");
        assert!(m.opened && !m.closed);
    }

    /// Shape 3: only `</think>` (the template opened the tag in the prompt): the text before it is reasoning.
    #[test]
    fn closing_tag_without_opening_tag_ends_template_opened_reasoning() {
        let m = reasoning_markup("Okay, the user asks...\n</think>\n\nParis.").unwrap();
        assert_eq!(m.reasoning, "Okay, the user asks...");
        assert_eq!(m.rest, "Paris.");
        assert!(!m.opened && m.closed);
    }

    /// Tags that are not at the start are text: an answer that talks about tags, or a tag mid-sentence.
    #[test]
    fn tags_later_in_the_text_are_not_markup() {
        assert_eq!(reasoning_markup("The capital of France is Paris."), None);
        assert_eq!(
            reasoning_markup("Use <think> tags like <think>x</think>."),
            None
        );
        assert_eq!(reasoning_markup("I think, therefore I am."), None);
        assert_eq!(reasoning_markup(""), None);
    }

    #[test]
    fn tool_calls_are_shown_as_name_and_arguments() {
        use crate::analysis::reply_types::ToolCall;
        let calls = vec![
            ToolCall {
                index: 0,
                id: Some("call_1".into()),
                name: Some("get_weather".into()),
                arguments: r#"{"city":"Paris"}"#.into(),
            },
            ToolCall {
                index: 1,
                id: None,
                name: None,
                arguments: "{}".into(),
            },
        ];
        assert_eq!(
            tool_calls_text(&calls),
            r#"get_weather({"city":"Paris"}); ?({})"#
        );
        assert_eq!(tool_calls_text(&[]), "");
    }
}
