//! The second run of a sweep point for cross-tool parity (`[load] parity = "vllm-bench" | "aiperf" |
//! "guidellm"`, docs/load.md "Cross-tool parity"): after servegate's own client has run the point into
//! `<point>/`, the named tool runs the same schedule into `<point>/parity/` through the same code as
//! `[load] driver = "<tool>"` ([`super::load::run_point`] with the tool as the driver: its command line,
//! its run, its output imported as by `servegate import`). Judging the two side by side is
//! [`crate::judge::parity`].
//!
//! A tool that is not provisioned here runs nothing: the parity run's `run.json` holds the
//! [`crate::judge::parity::UNAVAILABLE`] note naming the provisioning script, and the parity verdicts are
//! INDETERMINATE (servegate's client's own verdicts stand). A tool that ran and failed VOIDs them, naming
//! how (its log's last lines, escaped).

use crate::error::EvidenceError;
use crate::evidence::EvidenceWriter;
use crate::evidence::RunSummary;
use crate::io::load_client::Target;
use crate::judge::parity::{PARITY_DIR, UNAVAILABLE};
use crate::spec::load::{Driver, LoadGate, Point};
use crate::spec::GateSpec;

use super::load::LoadPrompt;

/// The tool's Python on this runner, or why not (each message names its provisioning script).
fn provisioned(tool: &Driver) -> Result<(), String> {
    match tool {
        Driver::VllmBench => crate::io::vllm_bench::vllm_python().map(|_| ()),
        Driver::AiPerf => crate::io::aiperf::aiperf_python().map(|_| ()),
        Driver::GuideLlm => crate::io::guidellm::guidellm_python().map(|_| ()),
        other => Err(format!("{} is not a parity tool", other.name())),
    }
}

/// Runs `point` through the gate's `[load] parity` tool into `pw`'s [`PARITY_DIR`] (`pw`: the point's
/// directory, where servegate's client ran it), with `prompts`, against `target`; `parent`: the gate's run
/// summary (the serve's facts). Returns a one-line account; None for a gate without parity.
pub fn run_point(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    prompts: &[LoadPrompt],
    target: &Target,
    pw: &EvidenceWriter,
    parent: &RunSummary,
) -> Result<Option<String>, EvidenceError> {
    let Some(tool) = &load.spec.parity else {
        return Ok(None);
    };
    // A stop during servegate's client's run: the tool's run is not started (the run is judged as
    // interrupted, every trial failing with it).
    if crate::io::signals::interrupted().is_some() {
        return Ok(None);
    }
    let tw = EvidenceWriter::create_exact(&pw.path(PARITY_DIR))?;
    let mut as_tool = load.clone();
    as_tool.spec.driver = tool.clone();
    as_tool.spec.parity = None;
    let said = format!(
        "parity run of load point {}: {} on the schedule servegate's client ran in the directory above",
        point.label(),
        tool.name()
    );
    if let Err(e) = provisioned(tool) {
        // Nothing runs: the note says why (judged INDETERMINATE, naming the script).
        let n = load.spec.requests.unwrap_or(1) as usize;
        let notes = vec![said, format!("{UNAVAILABLE}{e}")];
        let note = super::load::unsent(gate, &as_tool, (point, n), parent, notes, &tw)?;
        return Ok(Some(format!("parity: {note}")));
    }
    let note = super::load::run_point(gate, &as_tool, point, prompts, target, &tw, parent)?;
    Ok(Some(format!("parity: {note}")))
}
