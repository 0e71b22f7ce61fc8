//! `[assert.route]`: the serve log names the fast route (and not the slow one), read with terminal escapes
//! stripped.

use crate::analysis::Evidence;
use crate::spec::GateSpec;
use crate::vocab::AssertionKind;

use super::verdict::{Outcome, Verdict};

pub(super) fn judge_route(gate: &GateSpec, evidence: &Evidence) -> Verdict {
    let route = gate.assertions.route.as_ref().expect("route declared");
    let Some(raw_log) = &evidence.serve_log else {
        return Verdict::new(AssertionKind::Route, Outcome::Fail, "no serve log in the evidence: the route cannot be proven (for a `url` serve, set serve.log_file)");
    };
    if let Some(at) = raw_log.find(crate::evidence::SERVE_LOG_CUT_MARK) {
        let rest = &raw_log[at + crate::evidence::SERVE_LOG_CUT_MARK.len()..];
        return Verdict::new(AssertionKind::Route, Outcome::Fail, format!("serve.log is larger than the {} MiB servegate reads to judge ({}): a slow-route line could be in the part not read", crate::evidence::SERVE_LOG_JUDGE_CAP >> 20, rest.trim()));
    }
    // Patterns match what a terminal would show: colour codes and other escapes cannot hide a line.
    let (log, stripped) = strip_escapes_counted(raw_log);
    let log = &log;
    // A log capped on disk (evidence::log_cap): what was dropped cannot be seen, and the verdict says so.
    let capped = crate::evidence::log_cap::marker_in(raw_log);
    let ansi = match capped {
        Some((line, n)) => format!("; serve.log was capped on disk: {n} bytes dropped at line {line} ([serve] log_cap_bytes), a route line there cannot be seen"),
        None => String::new(),
    };
    // Said in the verdict, so the evidence of the judgement shows the log was read stripped (case 38).
    let ansi = if stripped > 0 {
        format!("{ansi}; {}: {stripped} escape sequences removed before matching (serve.log keeps the raw bytes)", crate::vocab::NoteKind::LogAnsiStripped)
    } else {
        ansi
    };
    let find = |re: &regex::Regex| -> Option<(usize, String)> {
        log.lines()
            .enumerate()
            .find(|(_, l)| re.is_match(l))
            .map(|(i, l)| (i + 1, l.trim().chars().take(160).collect()))
    };
    let fast = find(&route.fast);
    let slow = route
        .slow
        .as_ref()
        .and_then(|re| find(re).map(|hit| (re.as_str().to_string(), hit)));
    let lines = log.lines().count();
    match (fast, slow) {
        // A slow pattern absent from a capped log proves nothing: it could be in the dropped middle.
        (Some((fl, ft)), None) if route.slow.is_some() && capped.is_some() => Verdict::new(
            AssertionKind::Route,
            Outcome::Indeterminate,
            format!("fast route: serve.log line {fl} matches /{}/: {ft:?}; slow /{}/ absent from the lines kept, which cannot prove it absent{ansi}", route.fast.as_str(), route.slow.as_ref().map(|s| s.as_str()).unwrap_or_default()),
        ),
        (None, None) if capped.is_some() => Verdict::new(
            AssertionKind::Route,
            Outcome::Indeterminate,
            format!("the serve log's lines kept never say /{}/ ({lines} lines searched){ansi}", route.fast.as_str()),
        ),
        (Some((fl, ft)), None) => {
            let slow_note = route.slow.as_ref().map(|s| format!("; slow /{}/ absent", s.as_str())).unwrap_or_default();
            Verdict::new(AssertionKind::Route, Outcome::Pass, format!("fast route: serve.log line {fl} matches /{}/: {ft:?}{slow_note}{ansi}", route.fast.as_str()))
        }
        (Some((fl, _)), Some((sre, (sl, st)))) => Verdict::new(
            AssertionKind::Route,
            Outcome::Fail,
            format!("both routes named, which counts as the slow route: fast /{}/ at serve.log line {fl}, slow /{sre}/ at line {sl}: {st:?}{ansi}", route.fast.as_str()),
        ),
        (None, Some((sre, (sl, st)))) => Verdict::new(AssertionKind::Route, Outcome::Fail, format!("slow route: serve.log line {sl} matches /{sre}/: {st:?}; fast /{}/ never appears{ansi}", route.fast.as_str())),
        (None, None) => Verdict::new(
            AssertionKind::Route,
            Outcome::Fail,
            format!("the serve log never says /{}/ ({lines} lines searched): the evidence of the route has to be there{ansi}", route.fast.as_str()),
        ),
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
