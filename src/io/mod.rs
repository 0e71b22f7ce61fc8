//! I/O at the edges: HTTP client, serve lifecycle, signals, ports, the host hold, hashing, host facts and
//! the one atomic file write.

pub mod client;
pub(crate) mod fs;
pub mod hash;
pub mod hold;
pub(crate) mod host;
pub mod load_client;
pub mod port;
pub(crate) mod procfs;
pub mod reads;
pub mod serve;
pub mod signals;
