//! Pure analysis of evidence: SSE framing, replies, per-request figures, statistics, content checks and pair
//! arithmetic. No I/O in the submodules; the loaders here ([`load`], [`load_pair`], [`load_baseline`]) read a
//! run or baseline directory from disk (through [`crate::evidence`]) and parse each reply as it is read.

pub mod baseline_values;
pub mod content;
pub mod contract;
pub mod drift;
pub mod interleave;
pub mod load;
pub mod logprobs;
pub mod measure;
pub mod pair;
pub mod quote;
pub mod regress;
pub mod reply;
pub mod reply_types;
pub mod sse;
pub mod stats;

use std::path::Path;

use crate::error::EvidenceError;
use crate::io::reads::TimedRead;

pub use reply::reply_of;

/// A loaded run with each request's reads parsed into a [`reply::Reply`] (see [`reply_of`]).
pub type Evidence = crate::evidence::Evidence<reply::Reply>;
/// One request of an [`Evidence`]: record, response meta and parsed reply.
pub type RequestEvidence = crate::evidence::RequestEvidence<reply::Reply>;
/// A loaded pair run, each arm an [`Evidence`].
pub type PairEvidence = crate::evidence::PairEvidence<reply::Reply>;

fn parse(rec: &crate::evidence::RequestRecord, reads: Vec<TimedRead>) -> reply::Reply {
    reply_of(rec, &reads)
}

/// Loads a run directory ([`crate::evidence::load_with`]) and parses each request's reads as they are read,
/// as judging sees them. Errors: those of [`crate::evidence::load`].
pub fn load(dir: &Path) -> Result<Evidence, EvidenceError> {
    crate::evidence::load_with(dir, parse)
}

/// Loads a pair run directory, each arm as [`load`] does.
pub fn load_pair(dir: &Path) -> Result<PairEvidence, EvidenceError> {
    crate::evidence::load_pair_with(dir, parse)
}

/// A stored baseline with its windows' replies parsed, as `[assert.drift]` compares with them.
pub type LoadedBaseline = crate::evidence::baseline::LoadedBaseline<reply::Reply>;
/// A baseline a gate names: loaded, or why not (the text the verdict shows).
pub type BaselineSlot = Result<LoadedBaseline, String>;

/// Loads the baseline `path` that the gate file `gate_file` names, by the one path rule and loader of
/// stored baselines (`evidence::baseline::load_named_with`), each window's replies parsed as [`load`] does.
pub fn load_baseline(gate_file: &Path, path: &Path) -> BaselineSlot {
    crate::evidence::baseline::load_named_with(gate_file, path, parse)
}
