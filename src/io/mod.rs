//! I/O at the edges: HTTP client, progress lines on long waits (`progress`), serve lifecycle, signals, ports, the host hold, hashing, host facts, the
//! one atomic file write, the one bounded reader of input files (`input`), and the relay that keeps a closed stdout from failing writes.

pub use servegate_core::io::hash;
pub(crate) use servegate_core::io::host;
pub use servegate_core::io::input;
pub use servegate_core::io::reads;
pub(crate) use servegate_core::io::{exchange, fs};

pub mod aiperf;
pub mod client;
pub mod guidellm;
pub mod hold;
pub mod load_client;
pub mod load_cores;
pub(crate) mod load_loop;
pub(crate) mod load_read;
pub mod locust;
pub mod port;
pub mod printer;
mod procfs;
pub mod progress;
pub mod raw_head;
pub(crate) mod sampler;
pub mod serve;
pub mod signals;
pub(crate) mod stdout_relay;
pub mod tool;
pub mod vllm_bench;
