//! The `live` tier: the real runtimes (the reference serve, llama.cpp's server via xllamacpp, provisioned by
//! its gate's setup step; llama-cpp-python and vLLM, each skipped with its provisioning command when absent).
//! Slow (minutes per test) and heavy (a model on the CPU): one at a time. Each test holds the live slot
//! (tests/fixtures/live.rs, a file lock in the temp directory) for its whole run, so `cargo test --test live`
//! runs them serially whatever its thread count, as `.config/nextest.toml` does under `cargo nextest run`, and
//! two checkouts' live tiers on one machine take turns. A new live test takes the slot first
//! (`let _slot = fixtures::live::live_slot("name");`), after its skip check.

#[path = "../fixtures/mod.rs"]
mod fixtures;

mod drift;
mod init;
mod reference_serve;
mod regression;
mod runtimes;
