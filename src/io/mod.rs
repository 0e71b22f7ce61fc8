//! I/O at the edges: HTTP client, serve lifecycle, signals, ports, the host hold, hashing, host facts, the
//! one atomic file write, and the relay that keeps a closed stdout from failing writes.

pub mod client;
pub mod exchange;
pub(crate) mod fs;
pub mod hash;
pub mod hold;
pub(crate) mod host;
pub mod load_client;
pub mod port;
pub mod printer;
pub(crate) mod procfs;
pub mod reads;
pub mod serve;
pub mod signals;
pub mod stdout_relay;
