//! A judged run: where its evidence is, its summary and its verdicts, and the exit code they mean.

use std::path::PathBuf;

use crate::error::FailureKind;
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
    /// How this run failed, if it did: a pair on two different model files is `SpecInvalid`; a run whose
    /// serve never answered is `ServeNotReady`; any other failed verdict is `Assertion`; `None` when every
    /// verdict passed.
    ///
    /// A voided pair (`pair_model_mismatch`) is `SpecInvalid` (exit 3) for `servegate run`, `servegate judge`
    /// and the harness alike (`servegate judge` used to say 1): the gate's own configuration names two model
    /// files, nothing about either serve was measured or judged, and the fix is in the gate, not in the serve;
    /// exit 1 would tell CI a serve regressed. (The test is on the failure's wire name in `pair.json`; when
    /// the typed failure codes land, match the code instead.)
    pub fn failure_kind(&self) -> Option<FailureKind> {
        if let Some(p) = &self.pair {
            if p.failure
                .as_deref()
                .and_then(crate::vocab::FailureCode::of_recorded)
                == Some(crate::vocab::FailureCode::PairModelMismatch)
            {
                return Some(FailureKind::SpecInvalid);
            }
        }
        if self.verdicts.iter().all(|v| v.passed()) {
            None
        } else if self.summary.serve.failure.is_some() && self.summary.requests.is_empty() {
            // The load client could not start (a CPU the runner may not use) or its dataset could not be
            // read: the serve was ready, the gate's load is what failed (exit 1, not "never ready").
            let load_side = matches!(
                self.summary
                    .serve
                    .failure
                    .as_deref()
                    .and_then(crate::vocab::FailureCode::of_recorded),
                Some(
                    crate::vocab::FailureCode::LoadClient | crate::vocab::FailureCode::LoadDataset
                )
            );
            Some(if load_side {
                FailureKind::Assertion
            } else {
                FailureKind::ServeNotReady
            })
        } else {
            Some(FailureKind::Assertion)
        }
    }

    /// Exit code for this run ([`crate::error::exit_code`] of [`RunOutcome::failure_kind`]): PASS,
    /// ASSERTION_FAILED, SERVE_NOT_READY when the serve never answered, SPEC_INVALID for a model mismatch.
    pub fn exit_code(&self) -> i32 {
        crate::error::exit_code(self.failure_kind())
    }
}
