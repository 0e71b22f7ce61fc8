//! The output files of a run: each asked-for format serialized from the one results model and written
//! atomically.

use std::path::PathBuf;

use crate::error::exit;
use crate::io::fs::write_atomic;
use crate::sinks::report::{serialize_json, Results};

/// Where to write the reports of a run (`--junit`, `--json`, or `SERVEGATE_JUNIT`, `SERVEGATE_JSON`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outputs {
    /// JUnit XML path.
    pub junit: Option<PathBuf>,
    /// Results JSON path.
    pub json: Option<PathBuf>,
}

impl Outputs {
    /// True when no report is asked for.
    pub fn is_empty(&self) -> bool {
        self.junit.is_none() && self.json.is_none()
    }

    /// Serializes and writes each asked-for report; returns one message per report that could not be written.
    pub fn write(&self, results: &Results) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(p) = &self.json {
            if let Err(e) = write_atomic(p, &serialize_json(results)) {
                errors.push(format!(
                    "{}: cannot write the JSON results: {e}",
                    p.display()
                ));
            }
        }
        if let Some(p) = &self.junit {
            match crate::sinks::junit::serialize(results) {
                Ok(bytes) => {
                    if let Err(e) = write_atomic(p, &bytes) {
                        errors.push(format!("{}: cannot write the JUnit XML: {e}", p.display()));
                    }
                }
                Err(e) => errors.push(format!(
                    "{}: cannot serialize the JUnit XML: {e}",
                    p.display()
                )),
            }
        }
        errors
    }

    /// For `servegate run`: stamps the results with `exit_code`, writes the reports, and returns the exit code
    /// (EVIDENCE_ERROR if a report could not be written, after printing why on stderr). When one report could
    /// not be written, the other is written again saying so (its `exit_code` is then the process's, and the
    /// write error is in `problems`), so no report that was written says more than the process did.
    pub fn finish(&self, mut results: Results, duration_s: f64, exit_code: i32) -> i32 {
        results.finish(duration_s);
        results.exit_code = exit_code;
        let errors = self.write_all(&mut results);
        for e in &errors {
            eprintln!("error: {e}");
        }
        results.exit_code
    }

    /// Writes each asked-for report; when one could not be written, raises `results.exit_code` to at least
    /// EVIDENCE_ERROR, adds the errors to `results.problems` and writes the reports again saying so (so no
    /// report that was written says more than the process did). Returns one message per report not written.
    pub fn write_all(&self, results: &mut Results) -> Vec<String> {
        let errors = self.write(results);
        if !errors.is_empty() {
            results.exit_code = results.exit_code.max(exit::EVIDENCE_ERROR);
            results.problems.extend(errors.iter().cloned());
            let _ = self.write(results);
        }
        errors
    }
}
