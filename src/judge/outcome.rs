//! A judged run: where its evidence is, its summary and its verdicts, and the exit code they mean.

use std::path::PathBuf;

use crate::error::exit;
use crate::evidence::{self, RunSummary};
use crate::judge::Verdict;

/// The result of a live run: where its evidence is and what the judge said.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run directory.
    pub dir: PathBuf,
    /// The summary as written. For a pair: a summary of the whole pair (`serve.mode` = `pair`, no requests;
    /// each arm's own run.json is in its arm directory).
    pub summary: RunSummary,
    /// One verdict per declared assertion.
    pub verdicts: Vec<Verdict>,
    /// `pair.json` of a pair run.
    pub pair: Option<evidence::PairSummary>,
}

impl RunOutcome {
    /// Exit code for this run: PASS, ASSERTION_FAILED, or SERVE_NOT_READY when the serve never answered.
    pub fn exit_code(&self) -> i32 {
        if let Some(p) = &self.pair {
            if p.failure
                .as_deref()
                .is_some_and(|f| f.starts_with("pair_model_mismatch"))
            {
                return exit::SPEC_INVALID;
            }
        }
        if self.verdicts.iter().all(|v| v.passed()) {
            exit::PASS
        } else if self.summary.serve.failure.is_some() && self.summary.requests.is_empty() {
            exit::SERVE_NOT_READY
        } else {
            exit::ASSERTION_FAILED
        }
    }
}

