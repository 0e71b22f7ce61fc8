//! The load section's two-runtime rows: the load client spread over two pinned runtimes
//! (`servegate::io::load_cores::run_pinned`, what `[load] client_cpus = 2` runs) on the same closed-loop
//! schedule as the one-runtime client and the floor client, against a fresh synthetic serve, in both CPU
//! orders ([`ORDERS`]: runtime 0 on CPU 1 and runtime 1 on CPU 0, which it shares with the serve, then
//! swapped): this machine has two cores, so what two runtimes buy is shown by their balance and their CPU
//! per token, not by aggregate throughput. After each order the floor client runs on two threads pinned
//! to the same CPUs ([`crate::bench_floor::run_threads`]) against a fresh serve of the same schedule: the
//! like-for-like floor for two runtimes (each thread pays its own wake-ups for half the streams), shown
//! beside the one-thread floor of the main table.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use servegate::evidence::load::RuntimeRecord;

use crate::bench_common::{cpus, f, Synth};
use crate::bench_load_case::{judge_load, LoadCase, LoadRun};

/// The two-runtime client's run on one case: the run (CPU = both runtimes' threads) and each runtime's
/// account (CPU, streams carried, its thread's CPU ms), with each runtime's wake-ups and timed reads
/// (where its CPU went: a wake-up costs more than a read).
pub struct TwoRuntimes {
    run: LoadRun,
    runtimes: Vec<RuntimeRecord>,
    wakeups: Vec<u64>,
    reads: Vec<u64>,
    /// The floor client on two threads pinned to the same CPUs, same schedule, fresh serve, run right
    /// after: one account per thread, in the runtimes' CPU order.
    floor: Result<Vec<crate::bench_floor::Floor>, String>,
}

/// The floor client on one thread per CPU of `on` against a fresh synthetic serve of `case` (its timing
/// log at `log`), the same schedule as the two runtimes.
fn floor_threads(
    case: &LoadCase,
    log: &Path,
    on: &[usize],
) -> Result<Vec<crate::bench_floor::Floor>, String> {
    let mut synth = Synth::start(&case.serve_args(), log)?;
    let target = servegate::io::load_client::Target::parse(&synth.url, None)?;
    let addr: std::net::SocketAddr = target
        .addr
        .parse()
        .map_err(|e| format!("{}: {e}", target.addr))?;
    let body = serde_json::to_vec(&case.body()).unwrap_or_default();
    let out = crate::bench_floor::run_threads(
        addr,
        &crate::bench_floor::wire(&target.host, &body),
        case.concurrency,
        case.requests,
        servegate::io::load_client::COALESCE,
        on,
    );
    let _ = synth.stop();
    out
}

/// The floor's CPU per token over all its threads, µs; None unless every request completed.
pub fn floor_us_per_token(case: &LoadCase, threads: &[crate::bench_floor::Floor]) -> Option<f64> {
    let completed: usize = threads.iter().map(|t| t.completed).sum();
    let failed: usize = threads.iter().map(|t| t.failed).sum();
    let cpu_s: f64 = threads.iter().map(|t| t.cpu_s).sum();
    (failed == 0 && completed == case.requests && completed > 0)
        .then(|| cpu_s * 1e6 / (completed as f64 * case.tokens as f64))
}

/// The CPUs the two runtimes are pinned to, in runtime order, in the two orders each case runs: runtime 0
/// on CPU 1 (the one-runtime client's) first, then swapped, so a difference between the runtimes' CPU
/// that follows the CPU (the serve's is 0) is told from one that follows the runtime (the dealing).
pub const ORDERS: [[usize; 2]; 2] = [[1, 0], [0, 1]];

/// Runs `case` on two runtimes pinned to `cpus` against a fresh synthetic serve (its timing log at
/// `log`); the run's figures are judged against the serve's truth as the one-runtime client's are.
pub fn two_runtimes(case: &LoadCase, log: &Path, on: &[usize; 2]) -> Result<TwoRuntimes, String> {
    use servegate::io::load_client::{Schedule, Target};
    if cpus() < 2 {
        return Err("two client runtimes need two CPUs".into());
    }
    let n = case.requests;
    let mut synth = Synth::start(&case.serve_args(), log)?;
    let target = Target::parse(&synth.url, None)?;
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|_| serde_json::to_vec(&case.body()).unwrap_or_default())
        .collect();
    let t0 = Instant::now();
    let out = servegate::io::load_cores::run_pinned(
        &target,
        bodies,
        &Schedule::Closed {
            concurrency: case.concurrency as u32,
        },
        None,
        Duration::from_secs(120),
        on,
    )?;
    let mut run = LoadRun {
        requests: n,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: out.runtimes.iter().map(|r| r.cpu_ms).sum::<f64>() / 1000.0,
        ..Default::default()
    };
    let lines = synth.wait_requests(n);
    let _ = synth.stop();
    let mut reads = vec![0u64; out.runtimes.len()];
    for x in &out.exchanges {
        if let Some(r) = x.timing.runtime.and_then(|t| reads.get_mut(t.index)) {
            *r += x.exchange.reads.len() as u64;
        }
    }
    let ex: Vec<servegate::io::client::Exchange> =
        out.exchanges.into_iter().map(|x| x.exchange).collect();
    judge_load(
        &ex,
        &crate::bench_load_case::synthetic_truth(&lines),
        &mut run,
    );
    let floor = floor_threads(case, &log.with_extension("floor.jsonl"), on);
    Ok(TwoRuntimes {
        run,
        runtimes: out.runtimes,
        wakeups: out.wakeups,
        reads,
        floor,
    })
}

/// How unevenly two shares split: (larger − smaller) / their mean, % (0: even; 20: 55 / 45).
pub fn imbalance_pct(a: f64, b: f64) -> Option<f64> {
    let mean = (a + b) / 2.0;
    (mean > 0.0).then(|| (a - b).abs() / mean * 100.0)
}

/// The report row of one case: the two runtimes' CPU per token against the one-thread floor's (the main
/// table's, `floor_us`) and against the two-thread floor's on the same CPUs (like for like), the one
/// runtime's against the one-thread floor, and each runtime's streams and CPU with their imbalance.
pub fn row(
    case: &LoadCase,
    two: &Result<TwoRuntimes, String>,
    one_us: Option<f64>,
    floor_us: Option<f64>,
) -> String {
    let c = case.concurrency;
    let t = match two {
        Ok(t) => t,
        Err(e) => return format!("| {c} | error: {e} |"),
    };
    let on = t
        .runtimes
        .iter()
        .map(|r| r.cpu.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let us = t.run.us_per_token();
    let over = |x: Option<f64>, fl: Option<f64>| match (x, fl) {
        (Some(x), Some(fl)) if fl > 0.0 => format!("{:.2}×", x / fl),
        _ => "-".into(),
    };
    let ratio = |x: Option<f64>| over(x, floor_us);
    let (floor2, floor2_wr) = match &t.floor {
        Ok(threads) => (
            floor_us_per_token(case, threads).map_or_else(
                || {
                    let failed: usize = threads.iter().map(|t| t.failed).sum();
                    format!("{failed} of {} failed", case.requests)
                },
                |x| format!("{x:.2}"),
            ),
            threads
                .iter()
                .map(|t| format!("{:.0} ms / {} / {}", t.cpu_s * 1e3, t.wakeups, t.reads))
                .collect::<Vec<_>>()
                .join("; "),
        ),
        Err(e) => (format!("error: {e}"), "-".into()),
    };
    let floor2_us = t
        .floor
        .as_ref()
        .ok()
        .and_then(|x| floor_us_per_token(case, x));
    let floor2_imb = match t.floor.as_deref() {
        Ok([a, b]) => imbalance_pct(a.cpu_s, b.cpu_s),
        _ => None,
    };
    let share = |r: &RuntimeRecord| {
        let w = t.wakeups.get(r.index).copied().unwrap_or(0);
        let reads = t.reads.get(r.index).copied().unwrap_or(0);
        format!("{} / {:.0} ms / {w} / {reads}", r.streams, r.cpu_ms)
    };
    let (a, b) = match t.runtimes.as_slice() {
        [a, b] => (a, b),
        _ => return format!("| {c} | error: not two runtimes |"),
    };
    format!(
        "| {c} | {on} | {} | {:.0} | {} | {} | {} | {floor2} | {} | {floor2_wr} | {} | {} | {} | {} | {} | {} | {} | {} |",
        t.run.tokens,
        t.run.tok_s(),
        f(us, 2),
        f(floor_us, 2),
        ratio(us),
        over(us, floor2_us),
        f(one_us, 2),
        ratio(one_us),
        share(a),
        share(b),
        f(imbalance_pct(a.streams as f64, b.streams as f64), 1),
        f(imbalance_pct(a.cpu_ms, b.cpu_ms), 1),
        f(floor2_imb, 1),
        t.run.failed,
    )
}

/// The two-runtime table under the load section's main one.
pub fn table(report: &mut Vec<String>, rows: Vec<String>) {
    if rows.is_empty() {
        return;
    }
    report.push("\n### Two client runtimes (`[load] client_cpus`; the serve on CPU 0), same schedules, after the one-runtime and floor clients, in both CPU orders\n".into());
    report.push("The one-thread floor is the main table's; the two-thread floor is the floor client on two threads pinned to the same CPUs as the runtimes, run right after them (the like-for-like floor: each thread pays its own wake-ups for half the streams).\n".into());
    report.push("| concurrency | CPUs of runtimes 0, 1 | tokens | aggregate tok/s | µs CPU per token (both runtimes) | one-thread floor µs | vs one-thread floor | two-thread floor µs | vs two-thread floor | two-thread floor per thread: CPU / wake-ups / reads | one runtime µs | one runtime vs one-thread floor | runtime 0 streams / CPU / wake-ups / reads | runtime 1 streams / CPU / wake-ups / reads | stream imbalance % | CPU imbalance % | two-thread floor CPU imbalance % | failed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    report.extend(rows);
}

/// The case's two-runtime figures as JSON (the run's, and each runtime's account).
pub fn to_json(two: &Result<TwoRuntimes, String>) -> Value {
    match two {
        Ok(t) => {
            let mut v = t.run.to_json();
            v["runtimes"] = serde_json::to_value(&t.runtimes).unwrap_or(Value::Null);
            v["wakeups"] = json!(t.wakeups);
            v["reads"] = json!(t.reads);
            v["floor_two_threads"] = match &t.floor {
                Ok(threads) => json!(threads
                    .iter()
                    .map(|fl| json!({"completed": fl.completed, "failed": fl.failed, "wall_s": fl.wall_s,
                                     "cpu_s": fl.cpu_s, "reads": fl.reads, "wakeups": fl.wakeups}))
                    .collect::<Vec<_>>()),
                Err(e) => json!({"error": e}),
            };
            v
        }
        Err(e) => json!({"error": e}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imbalance_is_the_gap_over_the_mean() {
        assert_eq!(imbalance_pct(55.0, 45.0), Some(20.0));
        assert_eq!(imbalance_pct(3.0, 3.0), Some(0.0));
        assert_eq!(imbalance_pct(0.0, 0.0), None);
    }
}
