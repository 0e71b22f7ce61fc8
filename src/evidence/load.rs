//! `load.json`: one load sweep point's schedule record (how it was driven, and when each request was meant
//! to go and went). Written by `run::load`, read by `judge::load`; the requests themselves are ordinary
//! `NN.*` files and `run.json` in the same directory.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EvidenceError;
use crate::io::load_client::SendTiming;

/// Schema of `load.json`.
pub const LOAD_SCHEMA: &str = "servegate.load/1";
/// File name of a point's schedule record.
pub const LOAD_FILE: &str = "load.json";

/// `load.json` of one sweep point: how it was driven and when each request was meant to go and went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRecord {
    /// Always [`LOAD_SCHEMA`].
    pub schema: String,
    /// `c=16`, `r=8`.
    pub point: String,
    /// `closed`, `poisson` or `constant`.
    pub arrival: String,
    /// Closed loop: requests in flight.
    pub concurrency: Option<u32>,
    /// Open loop: requests per second.
    pub rate_rps: Option<f64>,
    /// Open loop: the cap on requests in flight.
    pub max_concurrency: Option<u32>,
    /// Warmup requests (sent first, indexes 0..warmup, not judged).
    pub warmup: usize,
    /// Judged requests planned.
    pub planned: usize,
    /// Every request's send timing (warmup included), by index; warmup times count from the warmup's
    /// start, judged times from the judged phase's start.
    pub timings: Vec<SendTiming>,
}

/// Reads a point's `load.json`.
pub fn read_record(dir: &Path) -> Result<LoadRecord, EvidenceError> {
    let path = dir.join(LOAD_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| EvidenceError::io(&path, e))?;
    serde_json::from_str(&text).map_err(|e| EvidenceError::Malformed {
        path,
        reason: e.to_string(),
    })
}
