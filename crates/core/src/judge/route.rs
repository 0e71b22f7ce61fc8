//! `[assert.route]`: the serve log names the fast route (and not the slow one), read with terminal escapes
//! stripped.

use crate::analysis::Evidence;
use crate::spec::{GateSpec, RouteAssert, RouteHeader};
use crate::text::strip_escapes_counted;
use crate::vocab::AssertionKind;

use super::accounting::{ranges, request_failure, Accounting};
use super::verdict::{Outcome, Verdict};

/// `[assert.route]`: the serve log's part (every `fast` line found, `slow` absent) and the per-reply header's
/// part, worst outcome first. A run where no judged reply succeeded never passes it: a log line shows how
/// the serve started, not that any reply took that route (a gateway with a dead upstream logs its start-up
/// and answers every request with HTTP 500); it is INDETERMINATE with the cause, unless a part FAILs.
pub(super) fn judge_route(gate: &GateSpec, evidence: &Evidence, acct: &Accounting) -> Verdict {
    let route = gate.assertions.route.as_ref().expect("route declared");
    let mut parts: Vec<(Outcome, String)> = Vec::new();
    if !route.fast.is_empty() {
        parts.push(judge_log(route, evidence));
    }
    if let Some(h) = &route.header {
        parts.push(judge_header(h, evidence, acct));
    }
    let outcome = if parts.iter().any(|(o, _)| *o == Outcome::Fail) {
        Outcome::Fail
    } else if parts.iter().any(|(o, _)| *o == Outcome::Indeterminate) {
        Outcome::Indeterminate
    } else {
        Outcome::Pass
    };
    let details: Vec<String> = parts.into_iter().map(|(_, d)| d).collect();
    let details = details.join("; ");
    let good = acct.sent.saturating_sub(acct.failed.len());
    if outcome == Outcome::Pass && good == 0 && route.header.is_none() {
        return Verdict::new(
            AssertionKind::Route,
            Outcome::Indeterminate,
            format!("{}; the log alone: {details}", no_good_reply(acct)),
        );
    }
    Verdict::new(AssertionKind::Route, outcome, details)
}

/// Why no reply shows a route: `0 of N planned replies succeeded (requests 00-02 failed: <first reason>)`.
fn no_good_reply(acct: &Accounting) -> String {
    let failed: Vec<usize> = acct.failed.iter().map(|(i, _)| *i).collect();
    let why = match acct.failed.first() {
        Some((_, f)) => format!(" ({} failed, the first: {f})", ranges(&failed)),
        None => acct.unsent().map(|u| format!(" ({u})")).unwrap_or_default(),
    };
    format!(
        "no judged reply succeeded{why}, so no reply shows the route it took ({})",
        acct.n_of(0)
    )
}

/// The header part: every judged reply that succeeded carries `header` with a value matching its regex.
/// Failed replies carry no route evidence (they fail content and the figures); with none left it is
/// INDETERMINATE.
fn judge_header(h: &RouteHeader, evidence: &Evidence, acct: &Accounting) -> (Outcome, String) {
    let re = h.fast.as_str();
    let name = &h.name;
    let mut matched: Vec<String> = Vec::new();
    let mut off: Vec<String> = Vec::new();
    let mut checked = 0;
    for ev in evidence.requests.iter().filter(|r| !r.record.warmup) {
        if request_failure(ev).is_some() {
            continue;
        }
        checked += 1;
        let i = ev.record.index;
        match ev.response.as_ref().and_then(|m| m.headers.get(name)) {
            Some(v) if h.fast.is_match(v) => {
                let v: String = v.chars().take(120).collect();
                if !matched.contains(&v) {
                    matched.push(v);
                }
            }
            Some(v) => {
                let v: String = v.chars().take(120).collect();
                off.push(format!("request {i:02} {v:?}"));
            }
            None => off.push(format!("request {i:02} has no {name} header")),
        }
    }
    let failed = acct.failed.len();
    let failed_note = if failed > 0 {
        format!(
            "; {failed} failed repl{} carr{} no route evidence",
            if failed == 1 { "y" } else { "ies" },
            if failed == 1 { "ies" } else { "y" }
        )
    } else {
        String::new()
    };
    if checked == 0 {
        return (
            Outcome::Indeterminate,
            format!("header {name}: {}", no_good_reply(acct)),
        );
    }
    if !off.is_empty() {
        let shown: Vec<&str> = off.iter().take(5).map(String::as_str).collect();
        let more = if off.len() > 5 {
            format!(", and {} more", off.len() - 5)
        } else {
            String::new()
        };
        return (
            Outcome::Fail,
            format!(
                "header {name}: {} of {checked} judged replies not on the fast route /{re}/: {}{more} ({}{failed_note})",
                off.len(),
                shown.join(", "),
                acct.n_of(checked)
            ),
        );
    }
    let values: Vec<String> = matched.iter().map(|v| format!("{v:?}")).collect();
    (
        Outcome::Pass,
        format!(
            "header {name} matches /{re}/ on {checked} of {checked} judged replies: {} ({}{failed_note})",
            values.join(", "),
            acct.n_of(checked)
        ),
    )
}

/// The log part: every `fast` regex found (each at its first line), `slow` absent.
fn judge_log(route: &RouteAssert, evidence: &Evidence) -> (Outcome, String) {
    let Some(raw_log) = &evidence.serve_log else {
        // A url serve's log_file that was set but could not be copied says why (run.json serve.log_file).
        let why = match evidence.run.serve.log_file.as_ref() {
            Some(l) => format!(
                "serve.log_file {} was set, and {}",
                crate::text::shown(&l.path),
                crate::text::shown(
                    l.copied
                        .as_deref()
                        .unwrap_or("not copied: the run ended before it was read")
                )
            ),
            None => "for a `url` serve, set serve.log_file".into(),
        };
        return (
            Outcome::Fail,
            format!("no serve log in the evidence: the route cannot be proven ({why})"),
        );
    };
    if let Some(at) = raw_log.find(crate::evidence::SERVE_LOG_CUT_MARK) {
        let rest = &raw_log[at + crate::evidence::SERVE_LOG_CUT_MARK.len()..];
        return (Outcome::Fail, format!("serve.log is larger than the {} MiB servegate reads to judge ({}): a slow-route line could be in the part not read", crate::evidence::SERVE_LOG_JUDGE_CAP >> 20, rest.trim()));
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
    let mut found: Vec<(&str, usize, String)> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for re in &route.fast {
        match find(re) {
            Some((l, t)) => found.push((re.as_str(), l, t)),
            None => missing.push(format!("/{}/", re.as_str())),
        }
    }
    let missing_s = missing.join(", ");
    let slow = route
        .slow
        .as_ref()
        .and_then(|re| find(re).map(|hit| (re.as_str().to_string(), hit)));
    let lines = log.lines().count();
    // `line 12 matches /a/: "..."; line 30 matches /b/: "..."`
    let found_s = found
        .iter()
        .map(|(re, l, t)| format!("line {l} matches /{re}/: {t:?}"))
        .collect::<Vec<_>>()
        .join("; ");
    let found_at = found
        .iter()
        .map(|(re, l, _)| format!("/{re}/ at line {l}"))
        .collect::<Vec<_>>()
        .join(", ");
    match slow {
        Some((sre, (sl, st))) if !found.is_empty() => (
            Outcome::Fail,
            format!("both routes named, which counts as the slow route: fast {} serve.log {}, slow /{sre}/ at line {sl}: {st:?}{ansi}",
                if found.len() == 1 { format!("/{}/ at", found[0].0) } else { "lines".into() },
                if found.len() == 1 { format!("line {}", found[0].1) } else { found_at.clone() }),
        ),
        Some((sre, (sl, st))) => (
            Outcome::Fail,
            format!("slow route: serve.log line {sl} matches /{sre}/: {st:?}; fast {missing_s} never appears{ansi}"),
        ),
        // A slow pattern absent from a capped log proves nothing: it could be in the dropped middle.
        None if missing.is_empty() && route.slow.is_some() && capped.is_some() => (
            Outcome::Indeterminate,
            format!("fast route: serve.log {found_s}; slow /{}/ absent from the lines kept, which cannot prove it absent{ansi}", route.slow.as_ref().map(|s| s.as_str()).unwrap_or_default()),
        ),
        None if missing.is_empty() => {
            let slow_note = route.slow.as_ref().map(|s| format!("; slow /{}/ absent", s.as_str())).unwrap_or_default();
            (Outcome::Pass, format!("fast route: serve.log {found_s}{slow_note}{ansi}"))
        }
        None => {
            let also = if found.is_empty() { String::new() } else { format!("; found: {found_at}") };
            if capped.is_some() {
                (Outcome::Indeterminate, format!("the serve log's lines kept never say {missing_s} ({lines} lines searched{also}){ansi}"))
            } else {
                (Outcome::Fail, format!("the serve log never says {missing_s} ({lines} lines searched{also}): the evidence of the route has to be there{ansi}"))
            }
        }
    }
}
