//! The pure edges: what one exchange with a serve is as values (timed reads, the response head, a load
//! request's send timing), hashing, host facts, the one atomic file write
//! and the one bounded reader of input files (`input`). The HTTP client, the serve's
//! process, signals and ports are `servegate::io`'s, which re-exports these beside them.

pub mod exchange;
pub mod fs;
pub mod hash;
pub mod host;
pub mod input;
pub mod reads;
