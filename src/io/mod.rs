//! I/O at the edges: HTTP client, serve lifecycle, signals, ports, the host hold, hashing, host facts, the
//! one atomic file write, and the relay that keeps a closed stdout from failing writes.

pub use servegate_core::io::{exchange, fs, hash, host, reads};

pub mod client;
pub mod hold;
pub mod load_client;
pub mod port;
pub mod printer;
pub(crate) mod procfs;
pub mod serve;
pub mod signals;
pub mod stdout_relay;
