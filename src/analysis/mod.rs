//! Pure analysis of evidence: SSE framing, replies, per-request figures, statistics, content checks and pair
//! arithmetic. No I/O.

pub mod content;
pub mod measure;
pub mod pair;
pub mod reply;
pub mod sse;
pub mod stats;
