//! The runner: one live run of a gate. Starts (or reaches) the serve, sends the requests, stops the serve and
//! writes the evidence; then judging reads the evidence back. The only module that sequences I/O; it measures
//! and judges nothing itself.
//!
//! Its rooms: `single` (a plain gate's run and the steps of every run of a serve), `pair` (a pair gate's arms
//! around the one model file), `setup` (the gate's setup command), `reach` (the serve started, reached,
//! stopped), `detect` (what the serve says it is), `send` (the requests), `lifecycle` (what every run does
//! around its steps). This file is their public face.

use std::path::Path;

use crate::error::EvidenceError;
use crate::sinks::events::Step;
use crate::spec::GateSpec;

pub use super::detect::model_served;
pub use super::lifecycle::{planned_judged, runs_root};
pub use super::pair::pair_outcome;
pub use crate::judge::outcome::RunOutcome;

/// Runs `gate` live, writing evidence under `root`, then judges it. `progress` receives each [`Step`]
/// (`serve ready after 1.2 s`), for a terminal.
///
/// Installs the stop-signal handlers ([`crate::io::signals::install`]) and makes the runner a child subreaper.
/// Once SIGINT, SIGTERM or SIGHUP has arrived, whatever the request loop saw, the run ends as
/// interrupted: `run.json` is written with `status: "interrupted"`, `INTERRUPTED: ...` is printed on stderr
/// and the process exits with 130, 143 or 129; nothing is judged and this function does not return.
///
/// Errors: an evidence write failed; `run.json` then says `failed` (when it can still be written), never
/// `complete`.
pub fn run(
    gate: &GateSpec,
    root: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<RunOutcome, EvidenceError> {
    if gate.pair.is_some() {
        super::pair::run_pair(gate, root, progress)
    } else {
        super::single::run_single(gate, root, progress)
    }
}
