//! The gate spec: `gates/NAME.toml`, parsed, validated and expanded. Owns the TOML schema and every check that
//! can be made before anything starts. Pure apart from [`load`] reading the file and [`GateSpec::requirements`]
//! looking at the file system and `PATH`.
//!
//! The fully commented reference is `docs/gate-format.md`. Unknown keys are errors; every error names the file,
//! the line and column, and the key (toml's own spans).
//!
//! The rooms: `read.rs` reads the file and the TOML; `raw.rs` holds the tables' shapes as written; `validate.rs`
//! is the validator, whose [`Validator::build`] calls one validation per table (`serve.rs` for `[serve]` and
//! `[hold]`, `request.rs`, `route.rs`, `figure.rs` for rate/first_token/tpot, `content.rs` for known_answer,
//! `pair.rs` for `[pair]`/ratio/same_answers, `regression.rs`, `drift.rs`, `load.rs`, `contract.rs`); `model.rs` holds the
//! validated types ([`GateSpec`]); `lines.rs` finds keys and declaring lines in the text.

use crate::error::SpecError;
use crate::vocab::{AssertionKind, Metric, Role};

mod content;
mod figure;
mod lines;
mod model;
mod pair;
mod raw;
mod read;
mod request;
mod route;
mod serve;
mod validate;

pub mod contract;
pub mod detect;
pub mod detect_more;
#[cfg(test)]
mod detect_tests;
pub mod drift;
pub mod interleave;
pub mod load;
mod load_driver;
pub mod matrix;
pub mod profile;
pub mod record;
pub mod regression;
pub mod sample;
pub mod says;

pub use crate::error::line_col;
pub(crate) use lines::decl_lines_in;
pub use lines::line_in;
use lines::{decl_lines, key_at, key_on_line, key_span, table_at};
use load::LoadGate;
pub use model::{
    command_exists, line_of, ArmSpec, Assertions, ContentAssert, Context, CpuAssert,
    FirstTokenAssert, GateSpec, HoldSpec, KnownAnswerAssert, MemoryAssert, OnIncomparable,
    OnIndeterminate, PairMetric, PairSpec, RateAssert, RateSource, RatioAssert, ReadyAssert,
    RequestSpec, Requires, RouteAssert, RouteHeader, SameAnswersAssert, ServeMode, ServeSpec,
    TpotAssert, DEFAULT_AGREE_PCT,
};
use raw::{
    default_ready, RawArm, RawFirstToken, RawGate, RawGateMeta, RawHold, RawKnownAnswer, RawPair,
    RawRate, RawRequest, RawRoute, RawServe, RawTpot,
};
use raw::{RawCpu, RawMemory, RawReady};
pub use read::{did_you_mean, load, parse, read_text};
pub use record::RunRecordSpec;
pub use regression::{BaselineServe, RegressionAssert, RegressionBaseline};
pub use serve::{redact_userinfo, url_userinfo};
pub use validate::valid_host;
use validate::valid_url_authority;
use validate::Validator;

/// Default `[serve] log_cap_bytes`: `serve.log`'s cap on disk, bytes (32 MiB: 16 MiB of head and 16 of
/// tail kept; under the 64 MiB judging reads). See `evidence::log_cap`.
pub const DEFAULT_LOG_CAP_BYTES: u64 = 32 << 20;
/// Smallest `[serve] log_cap_bytes` a gate may set, bytes (64 KiB: room for a startup banner and the last
/// lines).
pub const MIN_LOG_CAP_BYTES: u64 = 64 << 10;

/// Largest duration a gate may give in seconds (`timeout_s`, `ready_timeout_s`, `stop_grace_s`, `wait_s`).
pub const MAX_SECONDS: f64 = 1_000_000.0;
/// Lines no route or answer pattern should match: a pattern that matches two or more of them (`.`, `\w`,
/// `\b|x`, `[a-z]`) matches nearly any log line or reply, so it is refused like one that matches the empty
/// text.
pub const NONSENSE_LINES: [&str; 4] = ["qzxv", "wjkp 4821", "~#~", "ÆØÅ ĳ"];

/// Most requests one gate may send (warmup + repeats rounds of all prompts).
pub const MAX_REQUESTS: u64 = 100_000;
/// Largest gate file read, bytes (1 MiB). A gate is a few hundred bytes to a few KiB; a bigger file is a
/// mistake (a log or a model given as the gate) and is refused before it is read whole.
pub const MAX_GATE_BYTES: u64 = 1 << 20;
/// Keys `[request] extra` may not set: the gate's own `[request]` fields (or the runner) set them, and an
/// `extra` value would silently override what the gate says it asks (`extra.max_tokens` over `max_tokens`).
pub const RESERVED_EXTRA: [&str; 10] = [
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_k",
    "top_p",
    "stream",
    "stream_options",
    "n",
];

/// Default whole-run deadline of `[request] run_timeout_s`, seconds (one hour).
pub const DEFAULT_RUN_TIMEOUT_S: f64 = 3600.0;

#[cfg(test)]
mod tests;
