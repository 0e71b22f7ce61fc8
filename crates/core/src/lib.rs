//! servegate-core: the pure part of servegate, in a crate of its own so that "the judge is a pure function
//! of (gate, evidence)" is a fact the build checks: this crate depends on no HTTP client, async runtime,
//! process API or CLI parser (no tokio, reqwest, hyper, clap; no `std::process`; `.ci/run` checks both).
//! The `servegate` crate re-exports every module here at its old path (`servegate::judge`, ...).
//!
//! The folders are the layers, and imports only point down (`scripts/layers.py crates/core/src` checks it):
//!
//! - `vocab` — the closed sets, typed: assertion kinds, roles, failure codes, notes, the metric registry.
//! - `error` — error types and the one exit-code mapping.
//! - `text` — the one escaping of outside text printed to a terminal or a CI log.
//! - `spec` — gate specs (gates/*.toml): parse and validate.
//! - `io` — the values of an exchange (timed reads, response head, send timing), hashing, host facts, the
//!   one atomic file write. The sockets, the serve's process and the signals are the `servegate` crate's.
//! - `evidence` — the run directory on disk: layout, write, load (raw).
//! - `analysis` — pure: SSE, replies, per-request figures, statistics, content checks, pair arithmetic.
//! - `judge` — spec + figures → verdicts; reads no file (the API key's variable only, to mask it in verdicts).
//!
//! Data flows one way: spec → (serve + client, in `servegate`) → evidence → analysis → judge → sinks.

#![warn(missing_docs)]

pub mod analysis;
pub mod error;
pub mod evidence;
pub mod io;
pub mod judge;
pub mod spec;
pub mod text;
pub mod vocab;
