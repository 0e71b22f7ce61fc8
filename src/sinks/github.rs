//! GitHub Actions, natively: workflow-command annotations at the gate file and the line a person must edit,
//! and the Markdown summary appended to `$GITHUB_STEP_SUMMARY` (docs/ci.md).
//!
//! On when `--github` is given or `GITHUB_ACTIONS=true` (GitHub sets it in every job). Then, after the
//! reports are written, `servegate run`, `servegate judge` and the gate harness print one annotation per
//! test that did not pass and is not skipped:
//!
//! ```text
//! ::error file=gates/reference-smoke.toml,line=31,title=reference-smoke%3A%3Arate::rate FAIL median 5.0 tok/s ...
//! ```
//!
//! `error` for a test that fails the run (failed, void, indeterminate unless the gate lets it through),
//! `warning` for one that does not (indeterminate under `on_indeterminate = "pass"`, incomparable without
//! `SERVEGATE_STRICT`). The line is the one the results carry from the gate's parse
//! ([`crate::spec::GateSpec::decl_line`]): the `floor_tok_s` line for `rate`, the `[assert.X]` header otherwise. GitHub shows at most 10 errors and 10 warnings per step, so at most
//! [`MAX_PER_LEVEL`] of each are printed and one `::notice` counts the rest. Data and properties are escaped as
//! the workflow-command rules require ([`escape_data`], [`escape_property`]).
//!
//! The step summary is the `--summary` Markdown with a link to the evidence artifact (`SERVEGATE_ARTIFACT_URL`),
//! appended by [`crate::sinks::markdown::append_step_summary`] to [`Github::step_summary`] (this file only
//! says where; sinks/outputs.rs writes it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::sinks::report::{AssertionResult, Results, TestOutcome};

/// GitHub shows at most this many annotations of one level (error, warning) per step.
pub(crate) const MAX_PER_LEVEL: usize = 10;

/// The variable naming where the evidence of this run is published (e.g. the artifact's URL), linked from the
/// summary.
pub(crate) const ARTIFACT_URL_VAR: &str = "SERVEGATE_ARTIFACT_URL";

/// Where a run's GitHub outputs go: whether to annotate, the step summary file, the artifact link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Github {
    /// Print annotations (`--github`, or `GITHUB_ACTIONS=true`).
    pub annotate: bool,
    /// `$GITHUB_STEP_SUMMARY`, when annotating and set.
    pub step_summary: Option<PathBuf>,
    /// `$SERVEGATE_ARTIFACT_URL`: linked from the summaries.
    pub artifact_url: Option<String>,
    /// `$GITHUB_WORKSPACE`: stripped from absolute gate paths (annotations take paths relative to the checkout).
    pub workspace: Option<PathBuf>,
}

impl Github {
    /// The settings from `--github` (`flag`) and the environment, looked up with `var` (empty = unset).
    pub(crate) fn from_vars(flag: bool, var: impl Fn(&str) -> Option<String>) -> Github {
        let get = |k: &str| var(k).filter(|v| !v.is_empty());
        let annotate = flag || get("GITHUB_ACTIONS").is_some_and(|v| v == "true");
        Github {
            annotate,
            step_summary: get("GITHUB_STEP_SUMMARY")
                .filter(|_| annotate)
                .map(PathBuf::from),
            artifact_url: get(ARTIFACT_URL_VAR),
            workspace: get("GITHUB_WORKSPACE").map(PathBuf::from),
        }
    }

    /// The annotation lines of `results` ([`annotations`], paths relative to the workspace), each ended by a
    /// newline: what is printed on stdout after the reports are written. Empty when not annotating.
    pub(crate) fn annotation_text(&self, results: &Results) -> String {
        if !self.annotate {
            return String::new();
        }
        let mut out = String::new();
        for line in annotations(results, self.workspace.as_deref()) {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

/// Workflow-command data escaping: `%` → `%25`, CR → `%0D`, LF → `%0A`; any other control byte (ESC, BEL)
/// shown escaped ([`crate::text::page`]: `\u{1b}`), so an annotation line carries none raw.
pub(crate) fn escape_data(s: &str) -> String {
    crate::text::page(
        &s.replace('%', "%25")
            .replace('\r', "%0D")
            .replace('\n', "%0A"),
    )
}

/// Workflow-command property escaping: [`escape_data`], and `:` → `%3A`, `,` → `%2C`.
pub(crate) fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The annotation level of a test: `error` when it fails the run, `warning` when it did not pass but does not
/// fail it, None for a pass or a skip.
pub(crate) fn level(t: &AssertionResult) -> Option<&'static str> {
    match t.outcome {
        TestOutcome::Passed | TestOutcome::Skipped => None,
        TestOutcome::Failed => Some("error"),
        TestOutcome::Indeterminate
        | TestOutcome::Incomparable
        | TestOutcome::NotCompared
        | TestOutcome::Void => {
            if t.failure_kind.is_some() {
                Some("error")
            } else {
                Some("warning")
            }
        }
    }
}

/// The gate file as an annotation names it: relative to `workspace` when under it.
fn annotation_path(file: &str, workspace: Option<&Path>) -> String {
    let p = Path::new(file);
    match workspace.and_then(|w| p.strip_prefix(w).ok()) {
        Some(rel) => rel.display().to_string(),
        None => file.strip_prefix("./").unwrap_or(file).to_string(),
    }
}

/// The annotation lines of `results`, in test order: at most [`MAX_PER_LEVEL`] errors and as many warnings,
/// then one notice counting the rest. Each points at the line declaring its assertion, as the results carry
/// it ([`AssertionResult::gate_line`]: kept from the gate's parse, no file read).
pub(crate) fn annotations(results: &Results, workspace: Option<&Path>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &results.gates {
        for t in &g.assertions {
            let Some(level) = level(t) else { continue };
            let n = shown.entry(level).or_default();
            if *n >= MAX_PER_LEVEL {
                *left.entry(level).or_default() += 1;
                continue;
            }
            *n += 1;
            let line = t.gate_line();
            lines.push(format!(
                "::{level} file={},line={line},title={}::{}",
                escape_property(&annotation_path(&g.file, workspace)),
                escape_property(&t.test),
                escape_data(&t.message)
            ));
        }
    }
    if !left.is_empty() {
        let what: Vec<String> = left
            .iter()
            .map(|(level, n)| format!("{n} more {level}{}", if *n == 1 { "" } else { "s" }))
            .collect();
        lines.push(format!(
            "::notice title={}::{}",
            escape_property("servegate"),
            escape_data(&format!(
                "{} not annotated (GitHub shows at most {MAX_PER_LEVEL} of each per step): every verdict is in the \
                 job summary, the JUnit XML and the results JSON",
                what.join(" and ")
            ))
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::report::{FailureKind, GateResults, Producer};

    fn results(tests: Vec<AssertionResult>) -> Results {
        let mut r = Results::begin(Producer::Run, false);
        r.push(GateResults::not_run(
            "g",
            Path::new("/ws/gates/g.toml"),
            "",
            "why",
            tests,
        ));
        r.finish(1.0);
        r
    }

    fn t(
        name: &str,
        outcome: TestOutcome,
        kind: Option<FailureKind>,
        msg: &str,
    ) -> AssertionResult {
        AssertionResult::new("g", name, outcome, kind, msg, 0.0)
    }

    #[test]
    fn escaping_follows_the_workflow_command_rules() {
        assert_eq!(escape_data("50% a\r\nb: c,d"), "50%25 a%0D%0Ab: c,d");
        assert_eq!(escape_property("g::rate, x%"), "g%3A%3Arate%2C x%25");
        assert_eq!(
            escape_data("a\u{1b}[31m\u{7}%0A"),
            "a\\u{1b}[31m\\u{7}%250A"
        );
    }

    #[test]
    fn one_annotation_per_non_pass_capped_per_level_with_a_notice() {
        let mut tests = vec![
            t("route", TestOutcome::Passed, None, "route PASS"),
            t("known_answer", TestOutcome::Skipped, None, "requires: x"),
            t(
                "rate",
                TestOutcome::Failed,
                Some(FailureKind::Assertion),
                "rate FAIL median 5.0 tok/s\nsecond line",
            ),
            t(
                "ratio",
                TestOutcome::Indeterminate,
                None,
                "ratio INDETERMINATE n=2",
            ),
        ];
        for i in 0..12 {
            tests.push(t(
                &format!("e{i}"),
                TestOutcome::Void,
                Some(FailureKind::Void),
                "void",
            ));
        }
        for t in &mut tests {
            t.line = Some(if t.name == "rate" { 7 } else { 3 });
        }
        let r = results(tests);
        let lines = annotations(&r, Some(Path::new("/ws")));
        assert_eq!(
            lines[0],
            "::error file=gates/g.toml,line=7,title=g%3A%3Arate::rate FAIL median 5.0 tok/s%0Asecond line"
        );
        assert_eq!(
            lines[1],
            "::warning file=gates/g.toml,line=3,title=g%3A%3Aratio::ratio INDETERMINATE n=2"
        );
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("::error")).count(),
            10
        );
        assert_eq!(
            lines.iter().filter(|l| l.starts_with("::warning")).count(),
            1
        );
        let notice = lines.last().unwrap();
        assert!(
            notice.starts_with("::notice title=servegate::3 more errors not annotated"),
            "{notice}"
        );
        assert_eq!(lines.len(), 12);
        // Nothing to say about a passing run.
        let pass = results(vec![t("route", TestOutcome::Passed, None, "route PASS")]);
        assert!(annotations(&pass, None).is_empty());
    }

    #[test]
    fn on_only_with_the_flag_or_github_actions_true() {
        let none = |_: &str| None;
        assert!(!Github::from_vars(false, none).annotate);
        assert!(Github::from_vars(true, none).annotate);
        let gha = |k: &str| match k {
            "GITHUB_ACTIONS" => Some("true".to_string()),
            "GITHUB_STEP_SUMMARY" => Some("/s.md".to_string()),
            _ => None,
        };
        let g = Github::from_vars(false, gha);
        assert!(g.annotate);
        assert_eq!(g.step_summary.as_deref(), Some(Path::new("/s.md")));
        let other = |k: &str| (k == "GITHUB_ACTIONS").then(|| "false".to_string());
        assert!(!Github::from_vars(false, other).annotate);
    }
}
