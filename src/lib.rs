//! servegate: a release gate for OpenAI-compatible LLM serves.
//!
//! Data flows one way: `spec` (gates/*.toml) → `serve` + `client` (processes, HTTP, timed reads) →
//! `evidence` (a run directory on disk) → `reply` + `measure` (pure: evidence → per-request figures) →
//! `judge` (pure: spec + figures → verdicts) → sinks (`harness` trials, CLI lines). See docs/.

pub mod bench;
pub mod client;
pub mod content;
pub mod error;
pub mod evidence;
pub mod harness;
pub mod hash;
pub mod hold;
pub mod inspect;
pub mod judge;
pub mod junit;
pub mod leaderboard;
pub mod measure;
pub mod pair;
pub mod port;
pub mod reads;
pub mod record;
pub mod redact;
pub mod replay;
pub mod reply;
pub mod report;
pub mod runner;
pub mod selftest;
pub mod serve;
pub mod signals;
pub mod spec;
pub mod sse;
pub mod stats;
