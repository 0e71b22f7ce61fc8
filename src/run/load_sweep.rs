//! Sending a load gate's sweep: every point of its `[load]`, one after the other, against a serve that is
//! already up ([`send_points`], called by the runner), each point by [`super::load::run_point`] (servegate's
//! client or the gate's tool driver) and, with `[load] parity`, a second time by the tool
//! ([`super::load_parity::run_point`]).

use crate::error::EvidenceError;
use crate::evidence::{EvidenceWriter, RunSummary};
use crate::io::load_client::Target;
use crate::sinks::events::Step;
use crate::spec::GateSpec;
use crate::vocab::{FailureCode, ServeFailure};

use super::load::{client_cpus, planned, prompts, run_point};

/// Runs every sweep point of `gate` against `base_url`, each into `<w>/<point dir>/`. `parent` is the
/// gate's run summary (serve facts copied into each point's `run.json`). A failure to build the prompts is
/// recorded as the serve's failure (`load_dataset: ...`) and nothing is sent.
pub(crate) fn send_points(
    gate: &GateSpec,
    w: &EvidenceWriter,
    parent: &mut RunSummary,
    base_url: &str,
    api_key: Option<&str>,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let Some(load) = &gate.load else {
        return Ok(());
    };
    let prompts = match prompts(gate, load) {
        Ok(p) => p,
        Err(e) => {
            parent.serve.failure =
                Some(ServeFailure::new(FailureCode::LoadDataset, e.to_string()).to_string());
            return Ok(());
        }
    };
    let driver_ready = match &load.spec.driver {
        crate::spec::load::Driver::Locust(_) => crate::io::locust::locust_python().map(|_| ()),
        crate::spec::load::Driver::VllmBench => crate::io::vllm_bench::vllm_python().map(|_| ()),
        crate::spec::load::Driver::AiPerf => crate::io::aiperf::aiperf_python().map(|_| ()),
        crate::spec::load::Driver::GuideLlm => crate::io::guidellm::guidellm_python().map(|_| ()),
        crate::spec::load::Driver::Servegate => Ok(()),
    };
    if let Err(e) = driver_ready {
        parent.serve.failure = Some(ServeFailure::new(FailureCode::LoadClient, e).to_string());
        return Ok(());
    }
    let target = match Target::parse(base_url, api_key.map(str::to_string)) {
        Ok(t) => t,
        Err(e) => {
            parent.serve.failure =
                Some(ServeFailure::new(FailureCode::LoadClient, e.to_string()).to_string());
            return Ok(());
        }
    };
    if let Err(e) = client_cpus(load) {
        parent.serve.failure = Some(ServeFailure::new(FailureCode::LoadClient, e).to_string());
        return Ok(());
    }
    for point in &load.spec.points {
        if crate::io::signals::interrupted().is_some() {
            break;
        }
        progress(&Step::Note(format!("load point {}", point.label())));
        let pw = EvidenceWriter::create_exact(&w.path(&point.dir()))?;
        pw.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
        // A point runs for its duration: its wait says so (2 s, then every 10 s).
        let what = format!("waiting for load point {}", point.label());
        let n_planned = planned(load, *point);
        // The point, then (with `[load] parity`) the tool's run of it: one note each.
        let notes = super::send::paced(
            || -> Result<Vec<String>, EvidenceError> {
                let own = run_point(gate, load, *point, &prompts, &target, &pw, parent)?;
                let tool = super::load_parity::run_point(
                    gate, load, *point, &prompts, &target, &pw, parent,
                )?;
                Ok(std::iter::once(own).chain(tool).collect())
            },
            &mut |secs| {
                progress(&Step::Waiting(crate::io::progress::Waiting::new(
                    what.as_str(),
                    secs,
                    Some(&format!("{n_planned} requests planned")),
                )))
            },
        )?;
        for note in notes {
            progress(&Step::Note(note.clone()));
            parent.notes.push(note);
        }
    }
    Ok(())
}
