//! servegate: a release gate for OpenAI-compatible LLM serves.
//!
//! The pure part (vocab, error, text, spec, evidence, analysis, judge, and the values of `io`) is the crate
//! `servegate-core` (crates/core), re-exported here at the same paths; this crate adds what touches the world:
//! the HTTP client, the serve's process, signals, records, pages, the runner and the harness.
//!
//! The folders are the layers, and imports only point down (`scripts/layers.py src` checks it):
//!
//! - `vocab` — the closed sets, typed: assertion kinds, roles, failure codes, notes, the metric registry.
//! - `error` — error types and the one exit-code mapping.
//! - `text` — the one escaping of outside text printed to a terminal or a CI log, and the print macros.
//! - `spec` — gate specs (gates/*.toml): parse and validate.
//! - `io` — the edges: HTTP client and timed reads, serve lifecycle, signals, ports, host hold, hashing.
//! - `evidence` — the run directory on disk: layout, write, load (raw).
//! - `analysis` — pure: SSE, replies, per-request figures, statistics, content checks, pair arithmetic.
//! - `judge` — spec + figures → verdicts; reads no file (the API key's variable only, to mask it in verdicts).
//! - `loaded` — evidence read from disk for judging: runs, pairs, baselines, the judge's inputs, load points.
//! - `records` — run records and the leaderboard.
//! - `coverage` — the coverage page from matrix-gate evidence, and the census of a peer's model list.
//! - `sinks` — the results model and its output formats.
//! - `run` — the runner and the libtest-mimic harness.
//! - `import` — another load tool's per-request output (vLLM's bench, AIPerf, GuideLLM) as load evidence.
//! - `replay`, `inspect` — replaying recorded streams, summarising evidence files.
//!
//! Data flows one way: spec → serve + client → evidence → analysis → judge → sinks. See docs/.

#![warn(missing_docs)]

pub use servegate_core::{analysis, error, evidence, judge, spec, text, vocab};

pub mod coverage;
/// `servegate import`: another load tool's per-request output as load evidence (docs/load.md).
pub mod import;
pub mod inspect;
pub mod io;
pub mod loaded;
pub mod records;
pub mod replay;
pub mod run;
pub mod sinks;
