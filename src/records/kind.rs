//! The record-kind dispatch: which builder makes, and re-derives, the records of a run directory. A load
//! gate's run gives load records (`load_records`, one per figure of every sweep point), a pair run's
//! directory a pair record (`build::from_pair_run_as`), any other run a single record (`build::from_run`).
//! [`rederive`] checks what every kind shares first (the evidence exists, its digest is the stated one, its
//! gate loads) and then hands the record to its kind's re-derivation.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::schema::{Problem, Record};
use super::store::evidence_path;
use crate::spec::GateSpec;

/// The kinds of run a record is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One serve's run (`run.json`): one record per metric.
    Single,
    /// A pair run (`pair.json` and its arms): a record from the side of ours or theirs.
    Pair,
    /// A load gate's sweep: the records of every point.
    Load,
}

impl Kind {
    /// The kind of the run at `dir`, whose gate is `gate`: a gate with `[load]` is a load run, a directory
    /// holding `pair.json` a pair run, any other a single run.
    pub fn of_run(gate: &GateSpec, dir: &Path) -> Kind {
        if gate.load.is_some() {
            Kind::Load
        } else if crate::evidence::is_pair_dir(dir) {
            Kind::Pair
        } else {
            Kind::Single
        }
    }
}

/// Re-derives a `gate_run` record from its evidence and names the first stated figure or fact that differs
/// (empty when the record is what its evidence gives). The evidence is re-judged with the same judge as
/// `servegate judge` ([`crate::judge::judge`] / [`crate::judge::judge_pair`], through the record builders),
/// and every compared figure is compared exactly as stated, at the record's `decimals`: `values` one by one,
/// `value`, `n`, `range`, the pair's other figure, n and ratio, `model.sha256` and `model.file` (from
/// `serve.model_file` where the evidence has it), the evidence digest, `date`, `load`, `max_tokens`,
/// `stream`, `known_answer.result`, and for a theirs record its engine, version, device and route.
/// Published records (no evidence) give no problem here: `validate` requires their `unverifiable` reason.
pub(crate) fn rederive(records_dir: &Path, r: &Record) -> Vec<Problem> {
    rederive_with(records_dir, r, &mut BTreeMap::new())
}

/// [`rederive`], with the evidence digests already computed (by directory) kept in `digests`, so records
/// citing one run directory digest it once.
pub(super) fn rederive_with(
    records_dir: &Path,
    r: &Record,
    digests: &mut BTreeMap<PathBuf, String>,
) -> Vec<Problem> {
    if r.source.kind != "gate_run" {
        return Vec::new();
    }
    let Some(evidence) = r
        .source
        .evidence
        .as_deref()
        .filter(|e| !e.trim().is_empty())
    else {
        return Vec::new(); // validate reports the missing evidence
    };
    let dir = evidence_path(records_dir, evidence);
    if !dir.is_dir() {
        return vec![Problem::new(
            "source.evidence",
            format!("{evidence:?} does not exist (looked at {}): a gate_run record is re-derived from its evidence", dir.display()),
        )];
    }
    if let Some(stated) = &r.source.evidence_sha256 {
        let digest = match digests.get(&dir) {
            Some(d) => Ok(d.clone()),
            None => crate::evidence::digest::digest_dir(&dir).inspect(|d| {
                digests.insert(dir.clone(), d.clone());
            }),
        };
        match digest {
            Ok(d) if &d == stated => {}
            Ok(d) => {
                return vec![Problem::new(
                    "source.evidence_sha256",
                    format!("{stated} but the evidence directory {} digests to {d}: the evidence was edited after the record was written", dir.display()),
                )]
            }
            Err(e) => return vec![Problem::new("source.evidence", format!("{}: {e}", dir.display()))],
        }
    }
    let gate = match crate::spec::load(&dir.join(crate::evidence::layout::GATE_FILE)) {
        Ok(g) => g,
        Err(e) => {
            return vec![Problem::new(
                "source.evidence",
                format!("its gate.toml: {e}"),
            )]
        }
    };
    match Kind::of_run(&gate, &dir) {
        Kind::Load => super::load_records::rederive(&gate, &dir, r),
        Kind::Pair => super::rederive::pair(&gate, &dir, r),
        Kind::Single => super::rederive::single(&gate, &dir, r),
    }
}
