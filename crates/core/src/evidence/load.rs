//! `load.json`: one load sweep point's schedule record (how it was driven, and when each request was meant
//! to go and went). Written by `run::load`, read by `judge::load`; the requests themselves are ordinary
//! `NN.*` files and `run.json` in the same directory.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EvidenceError;
use crate::io::exchange::SendTiming;

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
    /// How the client ran when `[load] client_cpus` spread it over pinned runtimes (absent: one unpinned
    /// runtime, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientRecord>,
    /// Who drove the point when not servegate's own client (`[load] driver = "locust"`): its version, its
    /// workers' clock offsets and its timing precision, said in every verdict of the point. Absent for
    /// servegate's client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<crate::evidence::locust::DriverRecord>,
}

/// `load.json` `client`: the load client's pinned runtimes of the judged phase (`[load] client_cpus`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRecord {
    /// One entry per runtime, by index.
    pub runtimes: Vec<RuntimeRecord>,
}

/// One pinned runtime of the load client during the judged phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeRecord {
    /// Runtime index, 0-based (what a timing's `runtime.index` names).
    pub index: usize,
    /// The CPU id it was pinned to.
    pub cpu: usize,
    /// Requests it carried (sent and read).
    pub streams: usize,
    /// CPU time its thread used (`CLOCK_THREAD_CPUTIME_ID`), ms: user and system, from its start to its
    /// end.
    pub cpu_ms: f64,
}

/// Reads a point's `load.json`. Errors: unreadable, not the schema's shape, or another schema version
/// (`servegate.load/2` is refused, never read as version 1).
pub fn read_record(dir: &Path) -> Result<LoadRecord, EvidenceError> {
    let path = dir.join(LOAD_FILE);
    let text = crate::io::input::read_to_string(&path, crate::io::input::MAX_EVIDENCE_BYTES)
        .map_err(|e| EvidenceError::io(&path, e))?;
    let rec: LoadRecord = serde_json::from_str(&text).map_err(|e| EvidenceError::Malformed {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    if rec.schema != LOAD_SCHEMA {
        return Err(EvidenceError::Malformed {
            path,
            reason: format!("schema {:?}, expected {LOAD_SCHEMA:?}", rec.schema),
        });
    }
    Ok(rec)
}

/// Slack for float rounding when ordering a timing's stamps, ms (they come from one monotonic clock).
const ORDER_SLACK_MS: f64 = 1e-6;

/// Checks a point's `load.json` against the point it is stored as and against the point's own `run.json`
/// (`run`), so that a load point is held to a plain run's rules: the run finished (`status` complete); the
/// record is of this point (`point`, `concurrency` / `rate_rps`: a copy of `c1/` as `c2/` is refused), of
/// this plan (`warmup`, `planned` as run.json states them), with exactly one send timing per recorded
/// request and none for a request not recorded (a record keeping 2 of 6 timings would make the throughput
/// of 2 requests' span read as 6's), each timing finite and in order (intended, woke, slot, sent, end never
/// going backward; reads count from `sent`). `Err` says what disagrees.
pub fn check_record(
    rec: &LoadRecord,
    run: &crate::evidence::RunSummary,
    point: crate::spec::load::Point,
) -> Result<(), String> {
    use crate::spec::load::Point;
    if run.status != crate::evidence::RunStatus::Complete {
        return Err(format!(
            "the evidence is incomplete (run.json status is `{}`: {})",
            run.status.name(),
            run.status.why_incomplete()
        ));
    }
    let (c, r) = match point {
        Point::Concurrency(c) => (Some(c), None),
        Point::Rate(r) => (None, Some(r)),
    };
    if rec.point != point.label() || rec.concurrency != c || rec.rate_rps != r {
        return Err(format!(
            "{LOAD_FILE} is of point {:?} (concurrency {:?}, rate_rps {:?}) but is stored as point {}:              evidence of another point proves nothing about this one",
            rec.point,
            rec.concurrency,
            rec.rate_rps,
            point.label()
        ));
    }
    if run.planned_warmup.is_some_and(|w| w != rec.warmup)
        || run.planned.is_some_and(|p| p != rec.planned)
    {
        return Err(format!(
            "{LOAD_FILE} plans {} warmup and {} judged requests, run.json {:?} and {:?}",
            rec.warmup, rec.planned, run.planned_warmup, run.planned
        ));
    }
    let mut timed = std::collections::BTreeSet::new();
    for t in &rec.timings {
        if !timed.insert(t.index) {
            return Err(format!("{LOAD_FILE}: request {} is timed twice", t.index));
        }
        let stamps = [t.intended_ms, t.woke_ms, t.slot_ms, t.sent_ms, t.end_ms];
        if stamps.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(format!(
                "{LOAD_FILE}: request {}: a send time is negative or not a number ({stamps:?})",
                t.index
            ));
        }
        let ordered = [t.woke_ms, t.slot_ms, t.sent_ms, t.end_ms]
            .windows(2)
            .all(|w| w[1] >= w[0] - ORDER_SLACK_MS);
        if !ordered {
            return Err(format!(
                "{LOAD_FILE}: request {}: times go backward (woke {}, slot {}, sent {}, end {} ms):                  they come from one monotonic clock",
                t.index, t.woke_ms, t.slot_ms, t.sent_ms, t.end_ms
            ));
        }
    }
    check_runtimes(rec)?;
    let recorded: std::collections::BTreeSet<usize> =
        run.requests.iter().map(|q| q.index).collect();
    if recorded != timed {
        let untimed: Vec<String> = recorded.difference(&timed).map(|i| i.to_string()).collect();
        let unrecorded: Vec<String> = timed.difference(&recorded).map(|i| i.to_string()).collect();
        return Err(format!(
            "{LOAD_FILE} times {} requests, run.json records {}{}{}: every request sent has one send timing",
            timed.len(),
            recorded.len(),
            if untimed.is_empty() {
                String::new()
            } else {
                format!(" (untimed: {})", untimed.join(", "))
            },
            if unrecorded.is_empty() {
                String::new()
            } else {
                format!(" (timed but not recorded: {})", unrecorded.join(", "))
            },
        ));
    }
    if let Some(q) = run
        .requests
        .iter()
        .find(|q| q.warmup != (q.index < rec.warmup))
    {
        return Err(format!(
            "request {} is {} in run.json but {LOAD_FILE} has {} warmup requests first",
            q.index,
            if q.warmup { "warmup" } else { "judged" },
            rec.warmup
        ));
    }
    Ok(())
}

/// Each request's `runtime` (warmup included) names one of the `client` block's runtimes (index and
/// CPU), and each runtime's `streams` is the number of judged requests naming it; without a `client`
/// block no timing names a runtime.
fn check_runtimes(rec: &LoadRecord) -> Result<(), String> {
    let Some(client) = &rec.client else {
        if let Some(t) = rec.timings.iter().find(|t| t.runtime.is_some()) {
            return Err(format!(
                "{LOAD_FILE}: request {} names a client runtime but the record has no `client` block",
                t.index
            ));
        }
        return Ok(());
    };
    let mut carried = vec![0usize; client.runtimes.len()];
    for t in &rec.timings {
        let known = t.runtime.and_then(|r| {
            client
                .runtimes
                .iter()
                .position(|x| x.index == r.index && x.cpu == r.cpu)
        });
        match known {
            Some(i) if t.index >= rec.warmup => carried[i] += 1,
            Some(_) => {}
            None => {
                return Err(format!(
                    "{LOAD_FILE}: request {} names runtime {:?}, not one of the `client` block's",
                    t.index, t.runtime
                ))
            }
        }
    }
    for (r, n) in client.runtimes.iter().zip(&carried) {
        if r.streams != *n {
            return Err(format!(
                "{LOAD_FILE}: client runtime {} (CPU {}) says it carried {} requests, the timings name it {n} times",
                r.index, r.cpu, r.streams
            ));
        }
    }
    Ok(())
}
