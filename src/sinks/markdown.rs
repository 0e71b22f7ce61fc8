//! A Markdown summary of the results document, for `$GITHUB_STEP_SUMMARY` (`--summary PATH`,
//! `SERVEGATE_SUMMARY`): a heading with the result and exit code, the run's problems, then per gate its
//! status, the path of its evidence directory, and one table (assertion, state, figure, bound, n of N,
//! verdict). States: `PASS`, `FAIL` (the assertion does not hold on gathered evidence), `SKIP` (ignored:
//! unmet `[requires]`) and `indeterminate` (it fails, but nothing was judged: the serve never became ready,
//! the spec is invalid, the evidence could not be written, a requirement is unmet under strict, or the run
//! panicked). No non-pass is ever shown as `PASS`.
//!
//! The summary never exceeds [`BUDGET_BYTES`] (1 MiB, GitHub's cap for one step summary): a summary that
//! would is cut at a line boundary and ends with a note saying so and where the full results are.

use crate::error::exit;
use crate::sinks::report::{
    AssertionResult, Exporter, FailureKind, GateStatus, Results, TestOutcome,
};

/// The most bytes a summary has: 1 MiB, the size GitHub accepts for one `$GITHUB_STEP_SUMMARY`.
pub const BUDGET_BYTES: usize = 1024 * 1024;

/// At most this many characters of a verdict line in a table cell (the full line is in the JSON and JUnit).
pub(crate) const VERDICT_CHARS: usize = 400;

/// The Markdown summary exporter.
pub(crate) struct Markdown;

impl Exporter for Markdown {
    fn serialize(&self, results: &Results) -> Result<Vec<u8>, String> {
        Ok(serialize(results, BUDGET_BYTES))
    }
}

/// The state word of one test.
pub(crate) fn state(t: &AssertionResult) -> &'static str {
    match (t.outcome, t.failure_kind) {
        (TestOutcome::Passed, _) => "PASS",
        (TestOutcome::Skipped, _) => "SKIP",
        (TestOutcome::Indeterminate, _) => "INDETERMINATE",
        (TestOutcome::Incomparable, _) => "INCOMPARABLE",
        (TestOutcome::NotCompared, _) => "NOT COMPARED",
        (TestOutcome::Void, _) => "VOID",
        (TestOutcome::Failed, None | Some(FailureKind::Assertion)) => "FAIL",
        // Nothing was judged: the serve never became ready, the spec or the evidence is unusable.
        (TestOutcome::Failed, Some(_)) => "ERROR",
    }
}

/// Outside text made safe for one table cell or line of the summary (a verdict, a note, a model name, a
/// tool's version, a gate name): no line breaks; Markdown's own syntax inert (`|` shown `\|`, `[` and `]`
/// shown `\[` `\]` so no link or image forms, `<` and `>` as `&lt;` `&gt;` so no HTML tag or autolink
/// does); then escaped as a terminal line is ([`servegate_core::text::shown`]: control and invisible
/// characters such as ESC or U+202E as `\u{..}`, `##[` and `##vso[` never raw, a leading `::` shown `\::`);
/// at most `max` characters (`…` where cut).
fn cell(s: &str, max: usize) -> String {
    let mut md = String::with_capacity(s.len() + 8);
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '|' => md.push_str("\\|"),
            '[' | ']' if prev != '\\' => {
                md.push('\\');
                md.push(c);
            }
            '<' => md.push_str("&lt;"),
            '>' => md.push_str("&gt;"),
            '\n' | '\r' => md.push(' '),
            c => md.push(c),
        }
        prev = c;
    }
    let shown = crate::text::shown(&md);
    let mut out: String = shown.chars().take(max).collect();
    if shown.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// Outside text inside a code span (`` `...` ``): escaped as [`crate::text::shown`] does, its backticks
/// shown `'` (a backtick would end the span early).
fn code(s: &str, max: usize) -> String {
    crate::text::shown(&s.replace(['\n', '\r'], " ").replace('`', "'"))
        .chars()
        .take(max)
        .collect()
}

fn number(x: Option<f64>, unit: Option<&str>) -> String {
    match (x, unit) {
        (Some(x), Some(u)) => format!("{x:.1} {u}"),
        (Some(x), None) => format!("{x:.1}"),
        (None, _) => "—".to_string(),
    }
}

/// `n of N`: values present of values planned, or `—` for an assertion without per-request values.
fn n_of(t: &AssertionResult) -> String {
    if t.values.is_empty() {
        "—".to_string()
    } else {
        let n = t.values.iter().filter(|v| v.is_some()).count();
        format!("{n} of {}", t.values.len())
    }
}

/// The whole summary, never longer than `budget` bytes (see [`BUDGET_BYTES`]).
pub(crate) fn serialize(results: &Results, budget: usize) -> Vec<u8> {
    serialize_with(results, budget, None)
}

/// [`serialize`], with a link to the published evidence (`artifact_url`, from `SERVEGATE_ARTIFACT_URL`: e.g.
/// the run's artifact page) under the heading and beside each gate's evidence directory.
pub(crate) fn serialize_with(
    results: &Results,
    budget: usize,
    artifact_url: Option<&str>,
) -> Vec<u8> {
    let link = artifact_url.map(|u| cell(u, 1000).replace(['(', ')', ' '], ""));
    let word = match results.exit_code {
        exit::PASS => "PASS",
        exit::NOTHING_CHECKED => "SKIP (nothing was checked)",
        exit::ASSERTION_FAILED => "FAIL",
        exit::INDETERMINATE => "INDETERMINATE",
        exit::INCOMPARABLE => "INCOMPARABLE",
        exit::VOID => "VOID",
        _ => "ERROR",
    };
    let c = &results.counts;
    let mut count_line = format!(
        "{} tests: {} passed, {} failed, {} skipped",
        c.tests, c.passed, c.failed, c.skipped
    );
    for (n, what) in [
        (c.indeterminate, "indeterminate"),
        (c.incomparable, "incomparable"),
        (c.not_compared, "not compared (busy runner)"),
        (c.void, "void"),
    ] {
        if n > 0 {
            count_line.push_str(&format!(", {n} {what}"));
        }
    }
    if !c.skip_reasons.is_empty() {
        count_line.push_str(&format!("; not checked: {}", c.skips_text()));
    }
    count_line.push('.');
    let mut lines = vec![
        format!("# servegate: {word} (exit {})", results.exit_code),
        String::new(),
        count_line,
        String::new(),
    ];
    if let Some(u) = &link {
        lines.push(format!("Evidence artifact: [{u}]({u})"));
        lines.push(String::new());
    }
    for p in &results.problems {
        lines.push(format!("- **problem:** {}", cell(p, VERDICT_CHARS)));
    }
    if !results.problems.is_empty() {
        lines.push(String::new());
    }
    for g in &results.gates {
        let status = match g.status {
            GateStatus::Passed => "passed",
            GateStatus::Failed => "failed",
            GateStatus::Ignored => "ignored",
            GateStatus::Indeterminate => "indeterminate",
            GateStatus::Partial => "partial: some tests not run",
        };
        lines.push(format!("## {} ({status})", cell(&g.name, 200)));
        lines.push(String::new());
        if let Some(p) = &g.provenance {
            let artifact = link
                .as_ref()
                .map(|u| format!(" (in the [evidence artifact]({u}))"))
                .unwrap_or_default();
            lines.push(format!(
                "Evidence: `{}`{artifact}",
                code(&p.evidence_dir, 1000)
            ));
            lines.push(String::new());
        }
        if let Some(r) = &g.reason {
            lines.push(format!("Reason: {}", cell(r, VERDICT_CHARS)));
            lines.push(String::new());
        }
        lines.push("| assertion | state | figure | bound | n of N | verdict |".into());
        lines.push("|---|---|---|---|---|---|".into());
        for t in &g.assertions {
            lines.push(format!(
                "| {} | {} | {} | {} | {} | {} |",
                cell(&t.name, 100),
                state(t),
                number(t.median, t.unit.as_deref()),
                number(t.bound, t.unit.as_deref()),
                n_of(t),
                cell(&t.message, VERDICT_CHARS)
            ));
        }
        lines.push(String::new());
        // The run's notes: the serve's dialect with counts, a cold first request, an empty model list.
        let notes = g
            .provenance
            .as_ref()
            .map(|p| p.notes.as_slice())
            .unwrap_or_default();
        for n in notes {
            lines.push(format!("- note: {}", cell(n, VERDICT_CHARS)));
        }
        if !notes.is_empty() {
            lines.push(String::new());
        }
    }
    fit(&lines, budget)
}

/// The lines joined with `\n`, cut at a line boundary so that with the truncation note they fit in `budget`.
fn fit(lines: &[String], budget: usize) -> Vec<u8> {
    let whole: usize = lines.iter().map(|l| l.len() + 1).sum();
    let mut out = String::new();
    if whole <= budget {
        for l in lines {
            out.push_str(l);
            out.push('\n');
        }
        return out.into_bytes();
    }
    let is_row = |l: &str| l.starts_with("| ") && !l.starts_with("| assertion | state |");
    let rows = lines.iter().filter(|l| is_row(l)).count();
    // The note's length with the widest count it can say, so the cut never has to move after counting.
    let note = |left: usize| {
        format!(
            "\n**Summary truncated** at {budget} bytes (GitHub's step-summary cap): {left} of {rows} assertion \
             rows left out; the full results are in the results JSON (`--json`, `SERVEGATE_JSON`) and the JUnit \
             XML.\n"
        )
    };
    let room = budget.saturating_sub(note(rows).len());
    let mut kept = 0usize;
    for l in lines {
        if out.len() + l.len() + 1 > room {
            break;
        }
        kept += usize::from(is_row(l));
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&note(rows - kept));
    let mut bytes = out.into_bytes();
    bytes.truncate(budget); // only when the budget is smaller than the note itself
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::report::{GateResults, Producer};
    use std::path::Path;

    fn results(tests: Vec<AssertionResult>) -> Results {
        let mut r = Results::begin(Producer::Run, false);
        r.push(GateResults::not_run(
            "g",
            Path::new("gates/g.toml"),
            "",
            "why",
            tests,
        ));
        r.finish(1.0);
        r
    }

    #[test]
    fn every_state_is_shown_and_no_non_pass_reads_as_pass() {
        let mut rate = AssertionResult::new(
            "g",
            "rate",
            TestOutcome::Failed,
            None,
            "rate FAIL median 5.0 tok/s | x",
            0.0,
        );
        rate.median = Some(5.0);
        rate.bound = Some(15.0);
        rate.unit = Some("tok/s".into());
        rate.values = vec![Some(5.0), None, Some(4.0)];
        let tests = vec![
            AssertionResult::new("g", "route", TestOutcome::Passed, None, "route PASS", 0.0),
            rate,
            AssertionResult::new(
                "g",
                "content",
                TestOutcome::Failed,
                Some(FailureKind::ServeNotReady),
                "content FAIL\nno serve",
                0.0,
            ),
            AssertionResult::new(
                "g",
                "known_answer",
                TestOutcome::Skipped,
                None,
                "requires: x",
                0.0,
            ),
        ];
        let md = String::from_utf8(serialize(&results(tests), BUDGET_BYTES)).unwrap();
        assert!(md.starts_with("# servegate: ERROR (exit 4)\n"), "{md}");
        assert!(
            md.contains("| route | PASS | — | — | — | route PASS |"),
            "{md}"
        );
        assert!(
            md.contains("| rate | FAIL | 5.0 tok/s | 15.0 tok/s | 2 of 3 | rate FAIL median 5.0 tok/s \\| x |"),
            "{md}"
        );
        assert!(
            md.contains("| content | ERROR | — | — | — | content FAIL no serve |"),
            "{md}"
        );
        assert!(md.contains("| known_answer | SKIP |"), "{md}");
        assert_eq!(md.matches("| PASS |").count(), 1, "{md}");
    }

    #[test]
    fn a_summary_over_the_budget_is_cut_with_a_note_and_never_exceeds_it() {
        let tests: Vec<AssertionResult> = (0..5000)
            .map(|i| {
                AssertionResult::new(
                    "g",
                    &format!("a{i}"),
                    TestOutcome::Failed,
                    None,
                    &"x".repeat(300),
                    0.0,
                )
            })
            .collect();
        let r = results(tests);
        let whole = serialize(&r, usize::MAX);
        assert!(
            whole.len() > BUDGET_BYTES,
            "the case must exceed the budget"
        );
        let cut = serialize(&r, BUDGET_BYTES);
        assert!(cut.len() <= BUDGET_BYTES, "{}", cut.len());
        let text = String::from_utf8(cut).unwrap();
        assert!(
            text.contains("**Summary truncated** at 1048576 bytes"),
            "{}",
            &text[text.len() - 300..]
        );
        assert!(whole.starts_with(
            text.split("\n**Summary truncated**")
                .next()
                .unwrap()
                .as_bytes()
        ));
        for budget in [0, 10, 200, 5000] {
            assert!(serialize(&r, budget).len() <= budget);
        }
        // Within the budget: nothing cut, no note.
        let small = results(vec![AssertionResult::new(
            "g",
            "rate",
            TestOutcome::Passed,
            None,
            "rate PASS",
            0.0,
        )]);
        assert!(!String::from_utf8(serialize(&small, BUDGET_BYTES))
            .unwrap()
            .contains("truncated"));
    }
}
