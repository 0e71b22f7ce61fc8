//! What one chat-completion request produced, as both clients record it ([`crate::io::client`] for a gate
//! without `[load]`, [`crate::io::load_client`] for many requests in flight): the HTTP layer's status,
//! headers and timings, and the body as timed reads, kept up to [`BODY_CAP_BYTES`]. Data only: the two
//! clients sit above it, so neither imports the other for its shapes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::io::reads::TimedRead;

/// `NN.response.json`: what the HTTP layer said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseMeta {
    /// HTTP status.
    pub status: Option<u16>,
    /// Response headers (lower-case names; repeated headers joined with `, `).
    pub headers: BTreeMap<String, String>,
    /// Transport failure, verbatim.
    pub transport_error: Option<String>,
    /// ms from send to the response head.
    pub head_ms: Option<f64>,
    /// ms from send to the end of the body (or the failure).
    pub end_ms: Option<f64>,
}

/// Bytes of one response body kept in the evidence; the rest is read no further and the request is marked
/// `body_truncated` (a hostile or broken serve must not exhaust memory). 64 MiB.
pub const BODY_CAP_BYTES: u64 = 64 * 1024 * 1024;

/// What one request produced.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Status, headers, timings of the HTTP layer, transport error.
    pub response: ResponseMeta,
    /// The body as timed reads.
    pub reads: Vec<TimedRead>,
    /// Bytes kept.
    pub body_bytes: u64,
    /// True when the cap was hit.
    pub body_truncated: bool,
}
