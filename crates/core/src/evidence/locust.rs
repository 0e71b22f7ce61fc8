//! `[load] driver = "locust"`: the per-request records Locust's workers write with servegate's locustfile
//! (`scripts/locust/servegate_locustfile.py`, one `worker-<k>.jsonl` per worker), and their merge into the
//! same send timings and timed reads servegate's own client records (docs/load.md, "Drivers"). Pure: text
//! in, records out; `servegate::io::locust` runs Locust and reads the files.
//!
//! Every time in a record is the worker's own `time.perf_counter()` (seconds; CLOCK_MONOTONIC on Linux).
//! Each request's claim to the master is also a clock handshake: the worker stamps the claim's send
//! (`claim_sent`) and the grant's arrival (`claim_recv`), the master stamps the grant (`master_t`), so
//! `master_t − (claim_sent + claim_recv) / 2` is the worker's offset to the master within ± half the round
//! trip (NTP's estimate). The merge puts every worker on the master's clock with its tightest handshake.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::io::exchange::{Exchange, ResponseMeta, SendTiming};

/// The Locust release servegate's locustfile is written and tested against (`scripts/provision-locust.sh`).
pub const LOCUST_VERSION: &str = "2.47.0";
/// Schema of the plan servegate hands the Locust master (`locust-plan.json` in the point's directory).
pub const PLAN_SCHEMA: &str = "servegate.locust-plan/1";
/// What a Locust-driven verdict says of its timing precision.
pub const TIMING_PRECISION: &str = "timing precision Python's: time.perf_counter() when each recv() returned, not the kernel's receive time";

/// Workers that never joined the Locust master, as its log (`master.log`) says: `Some((joined, expected))`
/// when the master gave up waiting for them, `joined` from its last `Waiting for workers to be ready, J of E
/// connected` line ((0, 0) when it logged none). Locust 2.47.0's words
/// (<https://github.com/locustio/locust/blob/2.47.0/locust/main.py>, `start_automatic_run`: it logs the wait
/// once a second, then `Gave up waiting for workers to connect` at `--expect-workers-max-wait`, and exits 1
/// having sent nothing). `None` when the log says no such thing.
pub fn workers_not_joined(master_log: &str) -> Option<(usize, usize)> {
    if !master_log.contains("Gave up waiting for workers to connect") {
        return None;
    }
    const WAIT: &str = "Waiting for workers to be ready, ";
    let last = master_log.lines().rev().find_map(|l| {
        let rest = &l[l.find(WAIT)? + WAIT.len()..];
        let (j, rest) = rest.split_once(" of ")?;
        let e = rest.split_whitespace().next()?;
        Some((j.trim().parse().ok()?, e.parse().ok()?))
    });
    Some(last.unwrap_or((0, 0)))
}

/// The note a point carries when its Locust workers never joined ([`workers_not_joined`]): how many of how
/// many joined, how many were started here and how many are remote (started by hand on their hosts), and
/// the wait: `Locust workers never joined: 1 of 2 connected within the master's 120 s wait (1 started
/// here, 1 remote: a remote worker joins when started on its host with the command in docs/load.md); the
/// master gave up and sent nothing`. `expected` 0 (a log without a wait line) reads as `local + remote`.
pub fn workers_not_joined_note(
    (joined, expected): (usize, usize),
    local: usize,
    remote: usize,
    wait_s: u64,
) -> String {
    let expected = if expected == 0 {
        local + remote
    } else {
        expected
    };
    let remote = if remote == 0 {
        String::new()
    } else {
        format!(
            ", {remote} remote: a remote worker joins when started on its host with the command in docs/load.md"
        )
    };
    format!(
        "Locust workers never joined: {joined} of {expected} connected within the master's {wait_s} s wait ({local} started here{remote}); the master gave up and sent nothing"
    )
}

/// One request as a worker recorded it (one line of `worker-<k>.jsonl`). Times: the worker's
/// `perf_counter()` seconds; `reads[].t_ms`: ms from `sent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// The worker's Locust node id (hostname_uuid), as the master saw it.
    pub node: String,
    /// The request's index in the plan (warmup first), as the master granted it.
    pub index: usize,
    /// When the user's slot freed: its previous request ended, or the user started (the intended send).
    pub freed: f64,
    /// When the user sent its claim for this request to the master.
    pub claim_sent: f64,
    /// The master's own clock when it granted the claim (master's `perf_counter()` seconds).
    pub master_t: f64,
    /// When the grant arrived (the slot's wake-up: lag = claim_recv − freed).
    pub claim_recv: f64,
    /// Just before the request's bytes were written, after the connect; null when the connect failed.
    pub sent: Option<f64>,
    /// When the response head was complete; null when none came.
    pub head: Option<f64>,
    /// When the response ended or failed.
    pub end: f64,
    /// HTTP status; null when no head came.
    pub status: Option<u16>,
    /// Response headers, lower-case names, repeats joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// Transport failure (`ExceptionType: message`), or null.
    pub error: Option<String>,
    /// True when the body passed 64 MiB and was cut there.
    pub truncated: bool,
    /// The de-chunked body's reads, each `{"t_ms": ms from sent, "text": ...}` or `{"t_ms", "hex"}` (the
    /// `NN.reads.jsonl` line format).
    pub reads: Vec<serde_json::Value>,
}

/// Parses one worker file (`file` names it in errors): one JSON record per non-blank line, every field
/// present (a missing field is an error naming the line, never a zero).
pub fn parse_worker_file(text: &str, file: &str) -> Result<Vec<WorkerRecord>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let rec: WorkerRecord = serde_json::from_str(line)
            .map_err(|e| format!("{file}:{}: not a worker record: {e}", i + 1))?;
        out.push(rec);
    }
    Ok(out)
}

/// One worker's clock against the master's, from its tightest claim handshake.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The worker's number (`worker-<k>.jsonl`).
    pub worker: usize,
    /// Its Locust node id.
    pub node: String,
    /// Master clock − worker clock, ms.
    pub offset_ms: f64,
    /// ± this, ms: half the round trip of the handshake used.
    pub uncertainty_ms: f64,
    /// Requests the worker recorded (each one handshake).
    pub requests: usize,
}

/// Who drove a load point other than servegate's own client (`load.json` `driver`; absent for servegate's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverRecord {
    /// `locust`.
    pub name: String,
    /// The driver's version as its run stated it.
    pub version: Option<String>,
    /// What its timings are worth ([`TIMING_PRECISION`]).
    pub precision: String,
    /// Each worker's clock offset to the master, and its share of the requests.
    pub clocks: Vec<ClockOffset>,
}

impl DriverRecord {
    /// `driver locust 2.47.0 (timing precision Python's: ...); 2 workers, clock offsets to the master:
    /// worker 0 -0.050 ± 0.351 ms over 13 requests, worker 1 ...`: the words every verdict of a
    /// Locust-driven point ends with, the driver and its precision first (a shortened verdict line keeps
    /// them). Outside text: escaped where the verdict is printed.
    pub fn by(&self) -> String {
        let clocks: Vec<String> = self
            .clocks
            .iter()
            .map(|c| {
                format!(
                    "worker {} {:+.3} ± {:.3} ms over {} requests",
                    c.worker, c.offset_ms, c.uncertainty_ms, c.requests
                )
            })
            .collect();
        let n = self.clocks.len();
        let workers = match n {
            0 => "no worker recorded a request".to_string(),
            _ => format!(
                "{n} worker{} recorded, clock offsets to the master: {}",
                if n == 1 { "" } else { "s" },
                clocks.join(", ")
            ),
        };
        format!(
            "driver {} {} ({}); {workers}",
            self.name,
            self.version.as_deref().unwrap_or("(version not stated)"),
            self.precision,
        )
    }
}

/// One merged request: its send timing (ms from its phase's start on the master's clock; warmup indexes
/// 0.., judged indexes 0.. within the judged phase) and what the serve sent.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The worker that sent it.
    pub worker: usize,
    /// Send timing.
    pub timing: SendTiming,
    /// Status, headers, timed reads.
    pub exchange: Exchange,
}

/// The merge of every worker's records: warmup and judged requests in index order, and the clocks.
#[derive(Debug, Clone)]
pub struct Merge {
    /// Warmup requests (plan indexes below `warmup`), timed from the first warmup's intended send.
    pub warmup: Vec<Merged>,
    /// Judged requests, indexes from 0, timed from the first judged request's intended send.
    pub judged: Vec<Merged>,
    /// One per worker that recorded anything, in worker order.
    pub clocks: Vec<ClockOffset>,
}

/// The clock offset of one worker's records (None when it has none): the handshake with the shortest
/// round trip.
pub fn clock_offset(worker: usize, recs: &[WorkerRecord]) -> Option<ClockOffset> {
    let best = recs
        .iter()
        .filter(|r| r.claim_recv >= r.claim_sent)
        .min_by(|a, b| (a.claim_recv - a.claim_sent).total_cmp(&(b.claim_recv - b.claim_sent)))?;
    Some(ClockOffset {
        worker,
        node: best.node.clone(),
        offset_ms: (best.master_t - (best.claim_sent + best.claim_recv) / 2.0) * 1000.0,
        uncertainty_ms: (best.claim_recv - best.claim_sent) / 2.0 * 1000.0,
        requests: recs.len(),
    })
}

/// Merges the workers' records (`workers[k]`: `worker-<k>.jsonl`) of a plan of `total` requests, `warmup`
/// of them warmups. Errors: a request outside the plan, a request recorded twice (by one worker or two), a file holding two nodes' records, a time
/// that is not a finite number or that goes backward within a request (freed, claim, send, end come from
/// one clock), a read that does not decode.
pub fn merge(workers: &[Vec<WorkerRecord>], warmup: usize, total: usize) -> Result<Merge, String> {
    let mut seen = BTreeSet::new();
    let mut clocks = Vec::new();
    let mut all: Vec<(usize, f64, &WorkerRecord)> = Vec::new();
    for (k, recs) in workers.iter().enumerate() {
        let Some(clock) = clock_offset(k, recs) else {
            if recs.is_empty() {
                continue;
            }
            return Err(format!(
                "worker-{k}.jsonl: no claim handshake goes forward in time"
            ));
        };
        for r in recs {
            check(k, r)?;
            if r.node != clock.node {
                return Err(format!(
                    "worker-{k}.jsonl holds records of two workers ({:?} and {:?})",
                    clock.node, r.node
                ));
            }
            if r.index >= total {
                return Err(format!(
                    "worker-{k}.jsonl: request {} is outside the plan of {total} requests",
                    r.index
                ));
            }
            if !seen.insert(r.index) {
                return Err(format!(
                    "request {} is recorded twice (worker-{k}.jsonl and another)",
                    r.index
                ));
            }
            all.push((k, clock.offset_ms / 1000.0, r));
        }
        clocks.push(clock);
    }
    let base = |judged: bool| {
        all.iter()
            .filter(|(_, _, r)| (r.index >= warmup) == judged)
            .map(|(_, off, r)| r.freed + off)
            .fold(f64::INFINITY, f64::min)
    };
    let (warm_base, judged_base) = (base(false), base(true));
    let mut warm = Vec::new();
    let mut judged = Vec::new();
    all.sort_by_key(|(_, _, r)| r.index);
    for (k, off, r) in all {
        let is_judged = r.index >= warmup;
        let b = if is_judged { judged_base } else { warm_base };
        let ms = |t: f64| ((t + off - b) * 1000.0).max(0.0);
        let sent = r.sent.unwrap_or(r.end);
        let timing = SendTiming {
            index: if is_judged { r.index - warmup } else { r.index },
            intended_ms: ms(r.freed),
            woke_ms: ms(r.claim_recv),
            slot_ms: ms(r.claim_recv),
            sent_ms: ms(sent),
            end_ms: ms(r.end),
            runtime: None,
        };
        let m = Merged {
            worker: k,
            timing,
            exchange: exchange(k, r, sent)?,
        };
        if is_judged {
            judged.push(m);
        } else {
            warm.push(m);
        }
    }
    Ok(Merge {
        warmup: warm,
        judged,
        clocks,
    })
}

fn check(k: usize, r: &WorkerRecord) -> Result<(), String> {
    let times = [
        Some(r.freed),
        Some(r.claim_sent),
        Some(r.master_t),
        Some(r.claim_recv),
        r.sent,
        r.head,
        Some(r.end),
    ];
    if times.iter().flatten().any(|t| !t.is_finite()) {
        return Err(format!(
            "worker-{k}.jsonl: request {}: a time is not a finite number",
            r.index
        ));
    }
    let chain: Vec<f64> = [
        Some(r.freed),
        Some(r.claim_sent),
        Some(r.claim_recv),
        r.sent,
        Some(r.end),
    ]
    .into_iter()
    .flatten()
    .collect();
    if chain.windows(2).any(|w| w[1] < w[0]) {
        return Err(format!(
            "worker-{k}.jsonl: request {}: times go backward (freed {}, claim {} to {}, sent {:?}, end {}): they come from one clock",
            r.index, r.freed, r.claim_sent, r.claim_recv, r.sent, r.end
        ));
    }
    Ok(())
}

/// The request's [`Exchange`]: reads decoded with the `NN.reads.jsonl` codec, HTTP times from `sent`.
fn exchange(k: usize, r: &WorkerRecord, sent: f64) -> Result<Exchange, String> {
    let mut text = String::new();
    for v in &r.reads {
        text.push_str(&v.to_string());
        text.push('\n');
    }
    let reads = crate::io::reads::decode(&text)
        .map_err(|e| format!("worker-{k}.jsonl: request {}: read {e}", r.index))?;
    let body_bytes = reads.iter().map(|x| x.bytes.len() as u64).sum();
    Ok(Exchange {
        response: ResponseMeta {
            status: r.status,
            headers: r.headers.clone(),
            transport_error: r.error.clone(),
            head_ms: r.head.map(|h| (h - sent) * 1000.0),
            end_ms: Some((r.end - sent) * 1000.0),
        },
        reads,
        body_bytes,
        body_truncated: r.truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_that_never_joined_are_counted_from_the_masters_log() {
        let log = "[2026-12-06 10:00:00,001] h/INFO/locust.main: Starting Locust 2.47.0\n\
                   [2026-12-06 10:00:00,002] h/INFO/root: Waiting for workers to be ready, 0 of 2 connected\n\
                   [2026-12-06 10:00:01,002] h/INFO/locust.runners: h_ab (index 0) reported as ready. 1 workers connected.\n\
                   [2026-12-06 10:00:01,003] h/INFO/root: Waiting for workers to be ready, 1 of 2 connected\n\
                   [2026-12-06 10:02:00,004] h/ERROR/locust.main: Gave up waiting for workers to connect\n";
        assert_eq!(workers_not_joined(log), Some((1, 2)));
        assert_eq!(
            workers_not_joined_note((1, 2), 1, 1, 120),
            "Locust workers never joined: 1 of 2 connected within the master's 120 s wait (1 started here, 1 remote: a remote worker joins when started on its host with the command in docs/load.md); the master gave up and sent nothing"
        );
        assert_eq!(
            workers_not_joined_note((0, 0), 2, 0, 120),
            "Locust workers never joined: 0 of 2 connected within the master's 120 s wait (2 started here); the master gave up and sent nothing"
        );
        // A master that ran: no such note.
        assert_eq!(
            workers_not_joined(
                "Waiting for workers to be ready, 1 of 2 connected\nAll users spawned\n"
            ),
            None
        );
        assert_eq!(
            workers_not_joined("x/ERROR/locust.main: Gave up waiting for workers to connect\n"),
            Some((0, 0))
        );
    }
}
