//! Pure analysis of evidence: SSE framing, replies, per-request figures, statistics, content checks and pair
//! arithmetic. No I/O: the loaders that read a run or baseline directory from disk are `servegate::loaded`'s, which
//! parse each reply as it is read with [`parse_reads`].

pub mod baseline_values;
pub mod cold;
pub mod content;
pub mod contract;
pub mod dialect;
pub mod drift;
pub mod footprint;
pub mod interleave;
pub mod load;
pub mod logprobs;
pub mod measure;
pub mod pair;
#[cfg(test)]
mod profile_quirks;
pub mod quote;
pub mod regress;
pub mod reply;
pub mod reply_types;
pub mod sse;
pub mod stats;

use crate::io::reads::TimedRead;

pub use reply::{reply_of, reply_of_response};

/// A loaded run with each request's reads parsed into a [`reply::Reply`] (see [`reply_of`]).
pub type Evidence = crate::evidence::Evidence<reply::Reply>;
/// One request of an [`Evidence`]: record, response meta and parsed reply.
pub type RequestEvidence = crate::evidence::RequestEvidence<reply::Reply>;
/// A loaded pair run, each arm an [`Evidence`].
pub type PairEvidence = crate::evidence::PairEvidence<reply::Reply>;

/// A request's timed reads parsed into its [`reply::Reply`] with its response head
/// ([`reply::reply_of_response`]): the parser the loaders pass to `evidence::load_with`, so evidence is
/// parsed as judging sees it.
pub fn parse_reads(
    rec: &crate::evidence::RequestRecord,
    response: Option<&crate::io::exchange::ResponseMeta>,
    reads: Vec<TimedRead>,
) -> reply::Reply {
    reply::reply_of_response(rec, response, &reads)
}

/// A stored baseline with its windows' replies parsed, as `[assert.drift]` compares with them.
pub type LoadedBaseline = crate::evidence::baseline::LoadedBaseline<reply::Reply>;
/// A baseline a gate names: loaded, or why not (the text the verdict shows).
pub type BaselineSlot = Result<LoadedBaseline, String>;
