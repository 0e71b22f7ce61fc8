//! The output files of a run: each asked-for format ([`Format`]) serialized from the one results model by its
//! [`crate::sinks::export::Exporter`] and written atomically. This file knows no format.

use std::path::{Path, PathBuf};

use crate::error::RunEnd;
use crate::io::fs::write_atomic;
use crate::io::printer::Printer;
use crate::sinks::export::{Format, OutputArgs};
use crate::sinks::markdown;
use crate::sinks::report::Results;

/// Where to write the reports of a run (`--junit`, `--json`, `--summary`, or `SERVEGATE_JUNIT`,
/// `SERVEGATE_JSON`, `SERVEGATE_SUMMARY`): at most one path per [`Format`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    paths: Vec<(Format, PathBuf)>,
    /// GitHub Actions: annotations and the step summary (`--github`, `GITHUB_ACTIONS=true`; sinks/github.rs),
    /// published after the reports are written.
    pub github: crate::sinks::github::Github,
}

impl Outputs {
    /// The reports asked for by `args`, each defaulting to its environment variable looked up with `var`.
    pub fn from_args(args: &OutputArgs, var: impl Fn(&str) -> Option<String>) -> Outputs {
        let mut o = Outputs {
            github: crate::sinks::github::Github::from_vars(args.github, &var),
            ..Outputs::default()
        };
        for f in Format::ALL {
            if let Some(p) = args.path(f, &var) {
                o.set(f, p);
            }
        }
        o
    }

    /// The reports asked for by the environment alone (the harness), looked up with `var`.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Outputs {
        Outputs::from_args(&OutputArgs::default(), var)
    }

    /// Asks for `format` at `path` (replacing an earlier path for it).
    pub(crate) fn set(&mut self, format: Format, path: PathBuf) {
        self.paths.retain(|(f, _)| *f != format);
        self.paths.push((format, path));
        self.paths.sort_by_key(|(f, _)| *f);
    }

    /// The path asked for `format` (the harness's tests read the configuration with it).
    #[cfg(test)]
    pub(crate) fn get(&self, format: Format) -> Option<&Path> {
        self.paths
            .iter()
            .find(|(f, _)| *f == format)
            .map(|(_, p)| p.as_path())
    }

    /// Every asked-for report, in [`Format::ALL`] order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Format, &Path)> {
        self.paths.iter().map(|(f, p)| (*f, p.as_path()))
    }

    /// True when no report is asked for.
    pub(crate) fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// `junit PATH, json PATH, ...`: the reports, as the harness names them after a run.
    pub(crate) fn describe(&self) -> String {
        self.iter()
            .map(|(f, p)| format!("{} {}", f.name(), p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One refusal per report that would land on an input of `inputs` (a gate file, the evidence being read,
    /// a file inside a run directory) or on another report of this run (`evidence::guard`). Called before
    /// [`Outputs::clear`]: a refused command removes and writes nothing.
    pub fn refuse(&self, inputs: &crate::evidence::guard::Inputs) -> Vec<String> {
        inputs.refuse(self.iter().map(|(f, p)| {
            (
                format!("{} (--{} / {})", f.what(), f.name(), f.env_var()),
                p,
            )
        }))
    }

    /// Removes the reports a run is about to write, so a run that ends early (a bad spec, a usage error, a
    /// signal) never leaves the previous run's pass in place for a CI step that publishes them whatever
    /// happened. Returns one message per report that exists and could not be removed.
    pub fn clear(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for (_, p) in self.iter() {
            match crate::io::fs::clear_output(p) {
                Ok(()) => {}
                Err(_) if p.symlink_metadata().is_err() => {} // nothing there (or a parent is not a directory)
                Err(e) => errors.push(format!(
                    "{}: cannot remove the previous report before the run: {e}",
                    p.display()
                )),
            }
        }
        errors
    }

    /// Serializes and writes each asked-for report; returns one message per report that could not be written.
    pub(crate) fn write(&self, results: &Results) -> Vec<String> {
        let mut errors = Vec::new();
        for (f, p) in self.iter() {
            let bytes = match f {
                // The summary links the evidence artifact when SERVEGATE_ARTIFACT_URL names it.
                Format::Summary => Ok(markdown::serialize_with(
                    results,
                    markdown::BUDGET_BYTES,
                    self.github.artifact_url.as_deref(),
                )),
                _ => f.exporter().serialize(results),
            };
            match bytes {
                Ok(bytes) => {
                    if let Err(e) = write_atomic(p, &bytes) {
                        errors.push(format!("{}: cannot write {}: {e}", p.display(), f.what()));
                    }
                }
                Err(e) => errors.push(format!("{}: {e}", p.display())),
            }
        }
        errors
    }

    /// For `servegate run` and `servegate judge`: stamps the results with `exit_code`, writes the reports, and
    /// returns the exit code (EVIDENCE_ERROR if a report could not be written) and one message per report not
    /// written (the caller prints them on stderr). When one report could not be written, the others are
    /// written again saying so (their `exit_code` is then the process's, and the write error is in
    /// `problems`), so no report that was written says more than the process did.
    pub fn finish(
        &self,
        mut results: Results,
        duration_s: f64,
        exit_code: i32,
        printer: &Printer,
    ) -> (i32, Vec<String>) {
        results.finish(duration_s);
        results.exit_code = exit_code;
        let errors = self.write_all(&mut results, printer);
        (results.exit_code, errors)
    }

    /// Writes each asked-for report; when one could not be written, raises `results.exit_code` to at least
    /// EVIDENCE_ERROR, adds the errors to `results.problems` and writes the reports again saying so (so no
    /// report that was written says more than the process did). Returns one message per report not written.
    /// The GitHub annotations and a warning about the job summary go to `printer`.
    pub fn write_all(&self, results: &mut Results, printer: &Printer) -> Vec<String> {
        let errors = self.write(results);
        if !errors.is_empty() {
            results.exit_code = RunEnd {
                worst_gate: results.exit_code,
                nothing_checked: false,
                report_unwritten: true,
            }
            .exit_code();
            results.problems.extend(errors.iter().cloned());
            let _ = self.write(results);
        }
        // Annotations and the job summary say what the reports say (a summary not appended is said on stderr:
        // the reports themselves were written).
        for e in self.publish_github(results, printer) {
            printer.errln(&format!("warning: {e}"));
        }
        errors
    }

    /// GitHub Actions ([`Outputs::github`]): prints the annotations on `printer`'s stdout (escaped as workflow commands
    /// require, [`crate::sinks::github::annotations`]) and appends the step summary; returns one message per
    /// problem (the summary could not be appended), for stderr. Does nothing when not annotating.
    pub fn publish_github(&self, results: &Results, printer: &Printer) -> Vec<String> {
        if !self.github.annotate {
            return Vec::new();
        }
        let out = self.github.annotation_text(results);
        printer.out_raw(&out);
        let mut errors = Vec::new();
        if let Some(p) = &self.github.step_summary {
            if let Err(e) = append_step_summary(p, results, self.github.artifact_url.as_deref()) {
                errors.push(format!(
                    "{}: cannot append the job summary: {e}",
                    p.display()
                ));
            }
        }
        errors
    }
}

/// Appends the summary of `results` to the step summary file `path`, cut so that the file stays within
/// [`markdown::BUDGET_BYTES`] (1 MiB, what GitHub accepts for one step; what an earlier step of the same job
/// wrote counts). Appended, as GitHub's rule for the file says. One write of the whole text.
pub fn append_step_summary(
    path: &Path,
    results: &Results,
    artifact_url: Option<&str>,
) -> std::io::Result<()> {
    let used = std::fs::metadata(path)
        .map(|m| m.len() as usize)
        .unwrap_or(0);
    let budget = markdown::BUDGET_BYTES.saturating_sub(used);
    let bytes = markdown::serialize_with(results, budget, artifact_url);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    std::io::Write::write_all(&mut f, &bytes)?;
    std::io::Write::flush(&mut f)
}
