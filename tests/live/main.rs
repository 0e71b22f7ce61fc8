//! The `live` tier: the real runtimes (the reference serve, llama.cpp's server via xllamacpp, provisioned by
//! its gate's setup step; llama-cpp-python and vLLM, each skipped with its provisioning command when absent).
//! Slow (minutes per test) and heavy (a model on the CPU): run one at a time (`.config/nextest.toml` makes it
//! serial under `cargo nextest run`; `cargo test --test live -- --test-threads=1`).

#[path = "../fixtures/mod.rs"]
mod fixtures;

mod drift;
mod reference_serve;
mod regression;
mod runtimes;
