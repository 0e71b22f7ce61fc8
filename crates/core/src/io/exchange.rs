//! What one chat-completion request produced, as both clients record it (`servegate::io::client` for a gate
//! without `[load]`, `servegate::io::load_client` for many requests in flight): the HTTP layer's status,
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

/// The timing of one request's send, ms from the start of the sweep point (one monotonic clock).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SendTiming {
    /// Send order, 0-based (warmup first).
    pub index: usize,
    /// When the schedule wanted it sent.
    pub intended_ms: f64,
    /// When the client woke to send it (lag = woke − intended: the client behind its own schedule).
    pub woke_ms: f64,
    /// When it got a concurrency slot (queue = slot − woke: waiting for the serve, counted in its latency).
    pub slot_ms: f64,
    /// When the request was sent: just before the write of its bytes began, after the connect (so a
    /// request's TTFT does not include its connect); the reads' `t_ms` count from here.
    pub sent_ms: f64,
    /// When the response ended (or failed), from the start.
    pub end_ms: f64,
    /// Which of the load client's runtimes carried it (`[load] client_cpus`); absent when the client ran
    /// one unpinned runtime (the default), and in evidence written before the key existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeTag>,
}

/// One of the load client's pinned runtimes (`[load] client_cpus`): its index (0-based, the order of the
/// CPUs it was given) and the CPU id it was pinned to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeTag {
    /// Runtime index, 0-based.
    pub index: usize,
    /// The CPU id it ran on (pinned with `sched_setaffinity`).
    pub cpu: usize,
}

impl SendTiming {
    /// The client behind its schedule, ms (>= 0).
    pub fn lag_ms(&self) -> f64 {
        (self.woke_ms - self.intended_ms).max(0.0)
    }
    /// Time waiting in the client's queue for a concurrency slot, ms (>= 0).
    pub fn queue_ms(&self) -> f64 {
        (self.slot_ms - self.woke_ms).max(0.0)
    }
}
