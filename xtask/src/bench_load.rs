//! The `load` section of bench-self: servegate's load client (`servegate::io::load_client`) against the
//! synthetic serve in a closed loop at concurrency 1, 16, 64 and 256, beside the floor client
//! (`bench_floor`) on the same schedules; the schedules and the serve's truth per request are shared with
//! the peers' load section (`bench_peers_load`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use servegate::analysis::stats;

use crate::bench_common::{cpu_s_self, cpu_s_thread, f, signed, workdir, Synth};

/// One point of the load section: a closed loop of `concurrency` streams against the synthetic serve,
/// `requests` requests in all, each reply `tokens` tokens (one per chunk) after a `ttft_ms` first-token
/// delay and `itl_ms` between tokens. Shared with the peers' load section (same schedules, same truth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadCase {
    /// Requests in flight (closed loop).
    pub concurrency: usize,
    /// Requests sent in all (each stream sends requests / concurrency in turn).
    pub requests: usize,
    /// Completion tokens per reply.
    pub tokens: u32,
    /// The synthetic serve's first-token delay, ms.
    pub ttft_ms: f64,
    /// The synthetic serve's inter-token gap, ms.
    pub itl_ms: f64,
}

impl LoadCase {
    /// The aggregate decode rate the schedule asks for, tok/s: concurrency × 1000 / itl.
    pub fn asked_tok_s(&self) -> f64 {
        self.concurrency as f64 * 1000.0 / self.itl_ms
    }

    /// The `servegate replay --synthetic` arguments serving this case (with `--usage`; the caller adds
    /// `--timing-log`).
    pub fn serve_args(&self) -> Vec<String> {
        vec![
            "--tokens".into(),
            self.tokens.to_string(),
            "--ttft-ms".into(),
            self.ttft_ms.to_string(),
            "--itl-ms".into(),
            self.itl_ms.to_string(),
            "--usage".into(),
        ]
    }

    /// The chat-completion request body every request of the case sends (streamed, usage asked for).
    pub fn body(&self) -> Value {
        json!({"model": "synthetic", "messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": self.tokens, "stream_options": {"include_usage": true}})
    }
}

/// The load section's schedules: concurrency 1, 16, 64 and 256, every stream at 83.3 tok/s (12 ms per
/// token, 64 tokens, first token at 20 ms), 2 × concurrency requests (at least 8) per point. 256 streams ask
/// for 21,333 tok/s while decoding; with the first-token delay and N − 1 gaps a reply takes 776 ms, so the
/// most a perfect client can see is 64 / 0.776 × 256 = 21,100 tok/s: above the 20,000 tok/s target of docs/performance.md (at
/// 12.8 ms per token, the first runs' schedule, that ceiling was 19,824, under the target by construction).
pub fn load_schedules() -> Vec<LoadCase> {
    [1usize, 16, 64, 256]
        .into_iter()
        .map(|c| LoadCase {
            concurrency: c,
            requests: (2 * c).max(8),
            tokens: 64,
            ttft_ms: 20.0,
            itl_ms: 12.0,
        })
        .collect()
}

/// The synthetic serve's truth for one request, from its timing-log line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrueRequest {
    /// The true TTFT: the first token chunk's send time, ms from the request's arrival at the serve.
    pub ttft_ms: f64,
    /// When the request arrived at the serve (`CLOCK_MONOTONIC` ns).
    pub arrived_mono_ns: u64,
    /// Requests in flight at its arrival, itself included.
    pub in_flight: u64,
    /// The true decode rate, tok/s (from the serve's token send times), where it has one.
    pub decode_tok_s: Option<f64>,
}

/// The truth per request number (the `N` of the reply id `chatcmpl-synthetic-N`) from the synthetic
/// serve's timing-log lines; lines without a true TTFT (refusals, unstreamed replies) are left out.
pub fn synthetic_truth(lines: &[Value]) -> std::collections::BTreeMap<u64, TrueRequest> {
    lines
        .iter()
        .filter_map(|l| {
            Some((
                l["request"].as_u64()?,
                TrueRequest {
                    ttft_ms: l["true_ttft_ms"].as_f64()?,
                    arrived_mono_ns: l["arrived_mono_ns"].as_u64().unwrap_or(0),
                    in_flight: l["in_flight"].as_u64().unwrap_or(0),
                    decode_tok_s: l["true_decode_tok_s"].as_f64(),
                },
            ))
        })
        .collect()
}

/// The request number in a synthetic reply's text (the first `chatcmpl-synthetic-N` in it), which keys
/// [`synthetic_truth`].
pub fn reply_seq(text: &str) -> Option<u64> {
    text.split("chatcmpl-synthetic-")
        .nth(1)
        .and_then(|t| t.split(|ch: char| !ch.is_ascii_digit()).next())
        .and_then(|t| t.parse::<u64>().ok())
}

/// One client's figures on one load point.
#[derive(Debug, Default, Clone)]
pub(crate) struct LoadRun {
    pub(crate) requests: usize,
    pub(crate) tokens: u64,
    pub(crate) failed: usize,
    pub(crate) wall_s: f64,
    pub(crate) cpu_s: f64,
    /// Client TTFT − the serve's true TTFT, per request matched by the reply id, ms.
    pub(crate) ttft_err_ms: Vec<f64>,
    /// Client decode rate ÷ the serve's true decode rate − 1, per request, %.
    pub(crate) decode_err_pct: Vec<f64>,
}

impl LoadRun {
    pub(crate) fn us_per_token(&self) -> Option<f64> {
        (self.tokens > 0).then(|| self.cpu_s * 1e6 / self.tokens as f64)
    }
    pub(crate) fn tok_s(&self) -> f64 {
        self.tokens as f64 / self.wall_s
    }
    pub(crate) fn err_p(&self, p: f64) -> Option<f64> {
        stats::percentile(&self.ttft_err_ms, p)
    }
    pub(crate) fn to_json(&self) -> Value {
        json!({"requests": self.requests, "tokens": self.tokens, "failed": self.failed, "wall_s": self.wall_s,
               "aggregate_tok_s": self.tok_s(), "client_cpu_s": self.cpu_s, "us_cpu_per_token": self.us_per_token(),
               "ttft_error_ms": {"median": self.err_p(50.0), "p95": self.err_p(95.0), "n": self.ttft_err_ms.len(), "each": self.ttft_err_ms},
               "decode_error_pct": {"median": stats::percentile(&self.decode_err_pct, 50.0), "n": self.decode_err_pct.len(), "each": self.decode_err_pct}})
    }
}

/// Measures the exchanges of one client against the serve's truth: tokens and failures by the runner's
/// own parser and measure code, the TTFT error per request matched by the reply id.
pub(crate) fn judge_load(
    exchanges: &[servegate::io::client::Exchange],
    truth: &std::collections::BTreeMap<u64, TrueRequest>,
    run: &mut LoadRun,
) {
    for (i, ex) in exchanges.iter().enumerate() {
        let rec = servegate::evidence::RequestRecord {
            index: i,
            stream: true,
            http_status: ex.response.status,
            transport_error: ex.response.transport_error.clone(),
            ..Default::default()
        };
        let reply = servegate::analysis::reply_of(&rec, &ex.reads);
        let fig = servegate::analysis::measure::measure(&reply);
        if fig.failed.is_some() || rec.transport_error.is_some() {
            run.failed += 1;
            continue;
        }
        run.tokens += fig.completion_tokens.unwrap_or(0);
        let text: String = ex
            .reads
            .iter()
            .take(2)
            .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
            .collect();
        if let Some(tr) = reply_seq(&text).and_then(|seq| truth.get(&seq)) {
            if let Some(t) = fig.ttft_ms {
                run.ttft_err_ms.push(t - tr.ttft_ms);
            }
            if let (Some(m), Some(t)) = (fig.decode_tok_s, tr.decode_tok_s) {
                run.decode_err_pct.push((m / t - 1.0) * 100.0);
            }
        }
    }
}

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
    let out = load_client::run(
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
/// runtime runs on this thread alone, pinned to CPU 1; the serve is another process, pinned to CPU 0, its
/// CPU from `wait4`), the aggregate tok/s reached, and the client's TTFT minus the serve's true TTFT
/// (median and p95, per request, matched by the reply id). At concurrency 1 the two single-request clients
/// ([`SideBySide`]: reqwest's, and the load client's path every `http://` gate request takes) run the same
/// schedule against the same serve first, one after the other.
pub fn section_load(report: &mut Vec<String>) -> Value {
    eprintln!("bench: load ...");
    let tmp = workdir().join("load");
    let _ = std::fs::create_dir_all(&tmp);
    let load_start = servegate::evidence::load_avg();
    let mut rows = Vec::new();
    let mut two_rows = Vec::new();
    let mut side = None;
    report.push("## Load client: CPU per streamed token (closed loop, synthetic serve, 64 tokens per reply, first at 20 ms, 12 ms apart)\n".into());
    report.push(format!("load average at the start: {load_start:?}\n"));
    report.push("| concurrency | requests | tokens | wall s | asked tok/s | aggregate tok/s | client CPU s | µs CPU per token | floor µs CPU per token | serve CPU s | TTFT error median ms | TTFT error p95 ms | failed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    for case in load_schedules() {
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
        report.push(format!(
            "| {c} | {} | {} | {:.2} | {:.0} | {:.0} | {:.3} | {} | {floor_us} | {serve_cpu:.3} | {} | {} | {} |",
            run.requests,
            run.tokens,
            run.wall_s,
            case.asked_tok_s(),
            run.tok_s(),
            run.cpu_s,
            f(run.us_per_token(), 2),
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
            let two = crate::bench_load_cores::two_runtimes(
                &case,
                &tmp.join(format!("timing-two-c{c}.jsonl")),
            );
            two_rows.push(crate::bench_load_cores::row(
                &case,
                &two,
                run.us_per_token(),
                floor_us_n,
            ));
            crate::bench_load_cores::to_json(&two)
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
    report.push(format!("\nload average at the end: {load_end:?}\n"));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_truth_is_keyed_by_the_reply_id() {
        let lines = vec![
            json!({"request": 3, "true_ttft_ms": 20.5, "arrived_mono_ns": 7, "in_flight": 2, "sends": []}),
            json!({"request": 4, "status": 400, "error": "x"}),
        ];
        let t = synthetic_truth(&lines);
        assert_eq!(t.len(), 1);
        assert_eq!(t[&3].ttft_ms, 20.5);
        assert_eq!(t[&3].in_flight, 2);
        let text = r#"data: {"id":"chatcmpl-synthetic-3","object":"chat.completion.chunk"}"#;
        assert_eq!(
            reply_seq(text).and_then(|s| t.get(&s)).map(|x| x.ttft_ms),
            Some(20.5)
        );
        assert_eq!(reply_seq("no id"), None);
        let cases = load_schedules();
        assert_eq!(
            cases.iter().map(|c| c.concurrency).collect::<Vec<_>>(),
            vec![1, 16, 64, 256]
        );
        assert!(cases[3].asked_tok_s() > 20_000.0);
    }
}
