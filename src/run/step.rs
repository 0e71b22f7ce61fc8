//! The types the run's steps share: how a run reaches its serve ([`Target`]) and why its steps ended early
//! ([`Stop`]), with a serve's own error as a typed failure.

use crate::error::EvidenceError;
use crate::io::serve;
use crate::spec::ServeMode;
use crate::vocab::{FailureCode, ServeFailure};

/// How one run (a plain gate, or one arm of a pair) reaches its serve.
pub(super) struct Target<'a> {
    /// Started from a command, or reached at a URL.
    pub(super) mode: &'a ServeMode,
    /// The arm's environment, over `[serve] env`.
    pub(super) env: &'a std::collections::BTreeMap<String, String>,
    /// Whether this run runs `[serve] setup` (a pair runs it once, before its arms).
    pub(super) setup: bool,
}

/// Why the run's steps ended before the last: a failure of the serve or the run (recorded as
/// `serve.failure`), a stop signal (the run ends interrupted), or an evidence write that failed.
pub(super) enum Stop {
    /// The serve or the run failed: nothing more is sent.
    Failed(ServeFailure),
    /// A stop signal arrived: the caller ends the run as interrupted.
    Interrupted,
    /// An evidence write failed: the run is not judged.
    Evidence(EvidenceError),
}

impl From<ServeFailure> for Stop {
    fn from(f: ServeFailure) -> Stop {
        Stop::Failed(f)
    }
}

impl From<EvidenceError> for Stop {
    fn from(e: EvidenceError) -> Stop {
        Stop::Evidence(e)
    }
}

/// The typed failure of a [`serve::ServeError`]: its message, whose kind ([`serve::ServeError::kind`]) is
/// a [`FailureCode`]. Kept verbatim.
pub(super) fn serve_failure(e: &serve::ServeError) -> ServeFailure {
    let text = e.to_string();
    ServeFailure::parse(&text).unwrap_or_else(|| ServeFailure::new(FailureCode::SpawnFailed, text))
}
