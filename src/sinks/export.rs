//! The output formats of a results document, behind one interface (as hyperfine's `src/export/` does): each
//! format is one file of `sinks/` implementing [`Exporter`] (a pure `serialize(&Results) -> bytes`); writing is
//! separate ([`crate::sinks::outputs::Outputs::write_all`], one `write_atomic` per report). [`Format`] is the
//! one table of formats: its command-line flag ([`OutputArgs`], the binary's `--junit`/`--json`/`--summary`), its harness variable and its exporter. Adding a
//! format is one new file, a variant here, and a `mod` line (docs/architecture.md, "Recipe: add an
//! output format"); every `match` on [`Format`] below then fails to compile until it knows the new one.

use std::path::PathBuf;

/// The interface of a format, defined beside the model the formats read (so no format imports this file).
pub(crate) use crate::sinks::report::Exporter;

/// Every output format servegate writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// JUnit XML for CI test reporters (`--junit`, `SERVEGATE_JUNIT`; `sinks/junit.rs`).
    Junit,
    /// The results JSON, schema `servegate.results/2` (`--json`, `SERVEGATE_JSON`; `sinks/json.rs`).
    Json,
    /// A Markdown summary for `$GITHUB_STEP_SUMMARY` (`--summary`, `SERVEGATE_SUMMARY`; `sinks/markdown.rs`).
    Summary,
}

impl Format {
    /// Every format, in the order reports are named (`reports: junit ..., json ..., summary ...`).
    pub(crate) const ALL: [Format; 3] = [Format::Junit, Format::Json, Format::Summary];

    /// The short name (`junit`, `json`, `summary`): the command-line flag without `--`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Junit => "junit",
            Format::Json => "json",
            Format::Summary => "summary",
        }
    }

    /// The harness's environment variable for the report's path (also `servegate run`'s default).
    pub(crate) fn env_var(self) -> &'static str {
        match self {
            Format::Junit => "SERVEGATE_JUNIT",
            Format::Json => "SERVEGATE_JSON",
            Format::Summary => "SERVEGATE_SUMMARY",
        }
    }

    /// What the file is, for error messages (`cannot write the JUnit XML`).
    pub(crate) fn what(self) -> &'static str {
        match self {
            Format::Junit => "the JUnit XML",
            Format::Json => "the JSON results",
            Format::Summary => "the Markdown summary",
        }
    }

    /// The format's exporter.
    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            Format::Junit => &crate::sinks::junit::Junit,
            Format::Json => &crate::sinks::json::Json,
            Format::Summary => &crate::sinks::markdown::Markdown,
        }
    }

    /// The path given on the command line for this format, if any.
    fn arg(self, args: &OutputArgs) -> Option<&PathBuf> {
        match self {
            Format::Junit => args.junit.as_ref(),
            Format::Json => args.json.as_ref(),
            Format::Summary => args.summary.as_ref(),
        }
    }
}

/// The report paths asked for on the command line of `servegate run` and `servegate judge` (the binary's
/// flags); each defaults to its [`Format::env_var`].
#[derive(Debug, Clone, Default)]
pub struct OutputArgs {
    /// JUnit XML (`--junit`).
    pub junit: Option<PathBuf>,
    /// The results JSON (`--json`).
    pub json: Option<PathBuf>,
    /// The Markdown summary (`--summary`).
    pub summary: Option<PathBuf>,
    /// GitHub Actions annotations and the job summary (`--github`; on by itself when GITHUB_ACTIONS=true).
    pub github: bool,
}

impl OutputArgs {
    /// The path for `format`: the flag, else its environment variable looked up with `var` (empty = unset).
    pub(crate) fn path(
        &self,
        format: Format,
        var: impl Fn(&str) -> Option<String>,
    ) -> Option<PathBuf> {
        format.arg(self).cloned().or_else(|| {
            var(format.env_var())
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
    }
}
