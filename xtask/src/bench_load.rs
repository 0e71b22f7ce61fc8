//! The `load` section of bench-self: servegate's load client (`servegate::io::load_client`) against the
//! synthetic serve in a closed loop at concurrency 1, 16, 64 and 256, beside the floor client
//! (`bench_floor`) on the same schedules; the schedules and the serve's truth per request are shared with
//! the peers' load section (`bench_peers_load`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use servegate::analysis::stats;

use crate::bench_common::{cpu_s_self, cpu_s_thread, f, signed, workdir, Synth};
use crate::bench_load_case::{judge_load, load_schedules, synthetic_truth, LoadCase, LoadRun};

/// The two single-request clients side by side at concurrency 1 (same serve, same schedule, one request at
/// a time): the reqwest path (`client::send_reqwest`, what every gate request used before and `https://`
/// still uses) and the one every `http://` gate request now takes (`client::send`: the load client's path,
/// kernel-stamped reads). CPU is the whole process's for both (reqwest reads on its own threads).
#[derive(Debug, Clone)]
struct SideBySide {
    blocking: LoadRun,
    single: LoadRun,
}

/// `n` requests of `body`, one at a time, through `send`; its run judged against the serve's log lines
/// after the first `before` (and one warmup request, not judged). Returns the run and the lines seen.
fn single_run(
    synth: &Synth,
    n: usize,
    before: usize,
    send: &dyn Fn() -> servegate::io::client::Exchange,
) -> (LoadRun, usize) {
    let _ = send(); // warm
    let cpu0 = cpu_s_self();
    let t0 = Instant::now();
    let ex: Vec<servegate::io::client::Exchange> = (0..n).map(|_| send()).collect();
    let mut run = LoadRun {
        requests: n,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: cpu_s_self() - cpu0,
        ..Default::default()
    };
    let lines = synth.wait_requests(before + n + 1);
    judge_load(&ex, &synthetic_truth(&lines), &mut run);
    (run, lines.len())
}

/// The load client on `case` against a fresh synthetic serve: its run and the serve's CPU seconds; with
/// `side_by_side`, first the two single-request clients on the same schedule ([`SideBySide`]).
fn load_point(
    case: &LoadCase,
    log: &Path,
    side_by_side: bool,
) -> Result<(LoadRun, Option<SideBySide>, f64), String> {
    use servegate::io::load_client::{self, Schedule, Target};
    let n = case.requests;
    let mut synth = Synth::start(&case.serve_args(), log)?;
    let body = case.body();
    let target = Target::parse(&synth.url, None)?;
    let mut side = None;
    let mut before = 0;
    if side_by_side {
        let sender = servegate::io::client::Sender::new(Duration::from_secs(120), None)?;
        let url = synth.url.clone();
        let (blocking, seen) = single_run(&synth, n, before, &|| {
            servegate::io::client::send_reqwest(sender.http(), &url, &body, None)
        });
        before = seen;
        let (single, seen) = single_run(&synth, n, before, &|| {
            servegate::io::client::send(&sender, &url, &body)
        });
        before = seen;
        side = Some(SideBySide { blocking, single });
    }
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|_| serde_json::to_vec(&body).unwrap_or_default())
        .collect();
    let cpu0 = cpu_s_thread();
    let t0 = Instant::now();
    let (out, wakeups) = load_client::run_counted(
        &target,
        bodies,
        &Schedule::Closed {
            concurrency: case.concurrency as u32,
        },
        None,
        Duration::from_secs(120),
    )?;
    let mut run = LoadRun {
        requests: n,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: cpu_s_thread() - cpu0,
        wakeups: Some(wakeups),
        reads: Some(out.iter().map(|x| x.exchange.reads.len() as u64).sum()),
        ..Default::default()
    };
    let lines = synth.wait_requests(before + n);
    let serve_cpu = synth.stop();
    let ex: Vec<servegate::io::client::Exchange> = out.into_iter().map(|x| x.exchange).collect();
    judge_load(&ex, &synthetic_truth(&lines), &mut run);
    Ok((run, side, serve_cpu))
}

/// The floor client (`bench_floor`) on `case` against a fresh synthetic serve of the same schedule.
fn floor_point(case: &LoadCase, log: &Path) -> Result<crate::bench_floor::Floor, String> {
    let synth = Synth::start(&case.serve_args(), log)?;
    let target = servegate::io::load_client::Target::parse(&synth.url, None)?;
    let addr: std::net::SocketAddr = target
        .addr
        .parse()
        .map_err(|e| format!("{}: {e}", target.addr))?;
    let body = serde_json::to_vec(&case.body()).unwrap_or_default();
    crate::bench_floor::run(
        addr,
        &crate::bench_floor::wire(&target.host, &body),
        case.concurrency,
        case.requests,
        servegate::io::load_client::COALESCE,
    )
}

/// The load client (`servegate::io::load_client`) against the synthetic serve in a closed loop at each of
/// [`load_schedules`]. Per point: the client thread's CPU per streamed token (getrusage RUSAGE_THREAD: the
/// client's event loop runs on this thread alone, pinned to CPU 1; the serve is another process, pinned to CPU 0, its
/// CPU from `wait4`), the aggregate tok/s reached, and the client's TTFT minus the serve's true TTFT
/// (median and p95, per request, matched by the reply id). At concurrency 1 the two single-request clients
/// ([`SideBySide`]: reqwest's, and the load client's path every `http://` gate request takes) run the same
/// schedule against the same serve first, one after the other. `streams`: only these concurrencies (empty:
/// all).
pub fn section_load(streams: &[usize], report: &mut Vec<String>) -> Value {
    eprintln!("bench: load ...");
    let tmp = workdir().join("load");
    let _ = std::fs::create_dir_all(&tmp);
    let load_start = servegate::evidence::load_avg();
    let mut rows = Vec::new();
    let mut two_rows = Vec::new();
    let mut side = None;
    report.push("## Load client: CPU per streamed token (closed loop, synthetic serve, 64 tokens per reply, first at 20 ms, 12 ms apart)\n".into());
    report.push(format!("load average at the start: {load_start:?}\n"));
    report.push("| concurrency | requests | tokens | wall s | asked tok/s | aggregate tok/s | client CPU s | µs CPU per token | floor µs CPU per token | client wake-ups / reads | floor wake-ups / reads | serve CPU s | TTFT error median ms | TTFT error p95 ms | failed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    let cases = load_schedules()
        .into_iter()
        .filter(|c| streams.is_empty() || streams.contains(&c.concurrency));
    for case in cases {
        let c = case.concurrency;
        let log = tmp.join(format!("timing-c{c}.jsonl"));
        let (run, pair, serve_cpu) = match load_point(&case, &log, c == 1) {
            Ok(x) => x,
            Err(e) => {
                report.push(format!("| {c} | error: {e} |"));
                rows.push(json!({"concurrency": c, "error": e}));
                continue;
            }
        };
        let floor = floor_point(&case, &tmp.join(format!("timing-floor-c{c}.jsonl")));
        let floor_us = match &floor {
            Ok(fl) if fl.failed == 0 && fl.completed == case.requests => f(
                Some(fl.cpu_s * 1e6 / (fl.completed as f64 * case.tokens as f64)),
                2,
            ),
            Ok(fl) => format!("{} of {} failed", fl.failed, case.requests),
            Err(e) => format!("error: {e}"),
        };
        let floor_wr = match &floor {
            Ok(fl) => format!("{} / {}", fl.wakeups, fl.reads),
            Err(_) => "-".into(),
        };
        report.push(format!(
            "| {c} | {} | {} | {:.2} | {:.0} | {:.0} | {:.3} | {} | {floor_us} | {} / {} | {floor_wr} | {serve_cpu:.3} | {} | {} | {} |",
            run.requests,
            run.tokens,
            run.wall_s,
            case.asked_tok_s(),
            run.tok_s(),
            run.cpu_s,
            f(run.us_per_token(), 2),
            run.wakeups.unwrap_or(0),
            run.reads.unwrap_or(0),
            f(run.err_p(50.0), 3),
            f(run.err_p(95.0), 3),
            run.failed
        ));
        if let Some(b) = &pair {
            side = Some((b.clone(), run.clone()));
        }
        let floor_us_n = floor
            .as_ref()
            .ok()
            .filter(|fl| fl.failed == 0 && fl.completed == case.requests)
            .map(|fl| fl.cpu_s * 1e6 / (fl.completed as f64 * case.tokens as f64));
        let two = (c >= 16).then(|| {
            let orders = crate::bench_load_cores::ORDERS.iter().map(|cpus| {
                let two = crate::bench_load_cores::two_runtimes(
                    &case,
                    &tmp.join(format!("timing-two-c{c}-cpu{}.jsonl", cpus[0])),
                    cpus,
                );
                two_rows.push(crate::bench_load_cores::row(
                    &case,
                    &two,
                    run.us_per_token(),
                    floor_us_n,
                ));
                crate::bench_load_cores::to_json(&two)
            });
            Value::Array(orders.collect())
        });
        let mut row = run.to_json();
        row["two_runtimes"] = two.unwrap_or(Value::Null);
        row["concurrency"] = json!(c);
        row["asked_tok_s"] = json!(case.asked_tok_s());
        row["serve_cpu_s"] = json!(serve_cpu);
        row["floor"] = match &floor {
            Ok(fl) => {
                json!({"completed": fl.completed, "failed": fl.failed, "wall_s": fl.wall_s, "cpu_s": fl.cpu_s,
                             "reads": fl.reads, "wakeups": fl.wakeups, "tokens": fl.completed as u64 * case.tokens as u64})
            }
            Err(e) => json!({"error": e}),
        };
        row["blocking_client"] = pair
            .as_ref()
            .map(|b| b.blocking.to_json())
            .unwrap_or(Value::Null);
        row["single_client"] = pair
            .as_ref()
            .map(|b| b.single.to_json())
            .unwrap_or(Value::Null);
        rows.push(row);
    }
    crate::bench_load_cores::table(report, two_rows);
    let load_end = servegate::evidence::load_avg();
    report.push(format!(
        "\nload average at the end of the load section: {load_end:?}\n"
    ));
    if let Some((b, l)) = side {
        report.push(
            "### Concurrency 1, side by side (same serve, same schedule, in this order)\n".into(),
        );
        report.push("| client | requests | TTFT error median ms | TTFT error p95 ms | decode error median % | CPU µs per token | failed |\n|---|---|---|---|---|---|---|".into());
        for (name, r) in [
            ("blocking (`client::send_reqwest`, reqwest, reads timed on wake-up; whole-process CPU)", &b.blocking),
            ("single (`client::send`, the load client's path, kernel-stamped; whole-process CPU)", &b.single),
            ("load client at c=1 (`load_client::run`, coalescing; its thread's CPU)", &l),
        ] {
            report.push(format!(
                "| {name} | {} | {} | {} | {} | {} | {} |",
                r.requests,
                f(r.err_p(50.0), 3),
                f(r.err_p(95.0), 3),
                signed(stats::percentile(&r.decode_err_pct, 50.0), 2),
                f(r.us_per_token(), 2),
                r.failed
            ));
        }
    }
    report.push(String::new());
    json!({"points": rows, "load_avg_start": load_start, "load_avg_end": load_end})
}
