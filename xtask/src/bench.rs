//! `cargo xtask bench-self` (formerly `servegate bench-self`): servegate's own accuracy and overhead, measured against the synthetic paced
//! stream of `servegate replay --synthetic` (whose true TTFT and decode rate the serve logs), with the
//! results and the way to reproduce them in docs/performance.md. A benchmark, not a test: it asserts
//! nothing and prints figures.
//!
//! Sections (each can be chosen with `--only`):
//! * `fidelity`: servegate's client (the runner's path: `client::send`, `reply::parse_stream`,
//!   `measure::measure`) against the paced stream at 50, 1,000 and 10,000 tok/s and at 4 tokens per chunk;
//!   the error of its TTFT and decode rate per request against the serve's true figures (medians over
//!   `--requests`), and the client's CPU time per streamed token (`getrusage`, whole process: the client
//!   is all this process does then). The serve runs pinned to CPU 0, the client to CPU 1.
//! * `peers` (with `--peers`): on the same paced streams, a minimal Python client (stdlib `http.client`)
//!   and llama-benchy from PyPI (installed into a venv under `target/servegate/bench/`).
//! * `startup`: from launching `servegate run` on a `url` gate (serve already up) to its first request
//!   arriving at the serve (`CLOCK_MONOTONIC` in both processes).
//! * `readiness`: from the serve becoming ready (`/health` 503 → 200) to `Serve::wait_ready` returning,
//!   and from its first 200 to that.
//! * `overhead`: wall time of `servegate run` minus the time the serve spent answering, for a `url` gate
//!   and a `command` gate; peak RSS and CPU time of the `servegate run` process (`wait4`).
//! * `leaderboard`: checking (`record::load_dir`) and rendering (`leaderboard::render`) 10,000 records.
//! * `sha256`: `hash::sha256_file` of a 1 GiB file (just written, so read from the page cache).
//!
//! Here: the arguments, the startup, readiness, overhead, leaderboard and sha256 sections and the run of
//! them all. The fidelity section is in `bench_fidelity`, the load section in `bench_load` (the peers' in
//! `bench_peers_load`, the floor client in `bench_floor`), what they share in `bench_common`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

use servegate::analysis::stats;
use servegate::error::exit;
use servegate::replay::pace::mono_ns;

use crate::bench_common::{
    cpu_s_thread, cpus, f, med, pin_self, read_log, servegate_exe, wait_rusage, workdir, Synth,
};

/// `cargo xtask bench-self` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Write every figure as JSON here.
    #[arg(long, default_value = "target/servegate/bench/bench-self.json")]
    pub out: PathBuf,
    /// Requests per fidelity case (medians over them).
    #[arg(long, default_value_t = 9)]
    pub requests: usize,
    /// Also run the peer clients (a minimal Python client; llama-benchy, pip-installed into a venv).
    #[arg(long)]
    pub peers: bool,
    /// Only these sections: fidelity, startup, readiness, overhead, leaderboard, sha256, load (repeatable).
    #[arg(long)]
    pub only: Vec<String>,
    /// Size of the sha256 file in MiB.
    #[arg(long, default_value_t = 1024)]
    pub sha256_mib: u64,
    /// Records rendered and checked by the leaderboard section.
    #[arg(long, default_value_t = 10_000)]
    pub records: usize,
    /// Only these concurrencies in the load section and, with `--peers`, its peers (of 1, 16, 64, 256;
    /// repeatable; default all): a profile, a rerun of one point, a short peers run.
    #[arg(long)]
    pub streams: Vec<usize>,
}

fn write_gate(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn url_gate(
    name: &str,
    url: &str,
    prompts: usize,
    repeats: u32,
    warmup: u32,
    tokens: u32,
) -> String {
    let ps: Vec<String> = (0..prompts).map(|i| format!("\"prompt {i}\"")).collect();
    format!(
        "[gate]\nname = \"{name}\"\n[serve]\nurl = \"{url}\"\n[request]\nmodel = \"synthetic\"\nmax_tokens = {tokens}\nwarmup = {warmup}\nrepeats = {repeats}\nprompts = [{}]\n[assert.content]\n",
        ps.join(", ")
    )
}

/// Runs `servegate run GATE` as a child: (spawn mono ns, exit mono ns, exit code, CPU s, peak RSS MiB).
fn run_gate(gate: &Path, runs: &Path) -> Result<(u64, u64, i32, f64, f64), String> {
    let exe = servegate_exe()?;
    let t0 = mono_ns();
    let mut child = Command::new(exe)
        .arg("run")
        .arg(gate)
        .arg("--runs")
        .arg(runs)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let (code, cpu, rss) = wait_rusage(&mut child);
    Ok((t0, mono_ns(), code, cpu, rss))
}

fn section_startup(report: &mut Vec<String>) -> Value {
    eprintln!("bench: startup ...");
    let tmp = workdir().join("startup");
    let _ = std::fs::create_dir_all(&tmp);
    let log = tmp.join("timing.jsonl");
    let synth = match Synth::start(
        &[
            "--tokens".into(),
            "4".into(),
            "--ttft-ms".into(),
            "0".into(),
            "--itl-ms".into(),
            "1".into(),
            "--usage".into(),
        ],
        &log,
    ) {
        Ok(s) => s,
        Err(e) => return json!({"error": e}),
    };
    let gate = tmp.join("startup.toml");
    if let Err(e) = write_gate(&gate, &url_gate("bench-startup", &synth.url, 1, 1, 0, 4)) {
        return json!({"error": e});
    }
    let mut startup_ms = Vec::new();
    let mut missed = Vec::new();
    for rep in 0..7 {
        let before = synth.requests().len();
        let t0 = match run_gate(&gate, &tmp.join("runs")) {
            Ok((t0, ..)) => t0,
            Err(e) => {
                missed.push(format!("run {}: {e}", rep + 1));
                continue;
            }
        };
        let lines = synth.wait_requests(before + 1);
        match lines
            .get(before)
            .and_then(|l| l["arrived_mono_ns"].as_u64())
        {
            Some(a) => startup_ms.push((a as f64 - t0 as f64) / 1e6),
            None => missed.push(format!("run {}: no request reached the serve", rep + 1)),
        }
    }
    report.push("## Startup: launching `servegate run` (url gate, serve up) to its first request arriving\n".into());
    if startup_ms.is_empty() {
        let why = unmeasured_reason(&missed);
        report.push(format!("measured nothing (0 of 7 runs): {why}\n"));
        return json!({"unmeasured": why});
    }
    report.push(format!(
        "median {} ms (min {}, max {}; n={}; each: {})\n",
        f(med(&startup_ms), 1),
        f(stats::min(&startup_ms), 1),
        f(stats::max(&startup_ms), 1),
        startup_ms.len(),
        fmt_list(&startup_ms, 1)
    ));
    json!({"startup_ms": {"median": med(&startup_ms), "each": startup_ms}})
}

/// Why a section measured nothing: its misses joined (the first three and a count), or "no try was made".
fn unmeasured_reason(missed: &[String]) -> String {
    match missed.len() {
        0 => "no try was made".into(),
        n if n <= 3 => missed.join("; "),
        n => format!("{}; and {} more", missed[..3].join("; "), n - 3),
    }
}

/// The sections (and, one level down, the rows) of the bench's figures that measured nothing: a key
/// `unmeasured` or `error` in a section's JSON, as `section: reason` (`section / row: reason`).
pub(crate) fn unmeasured_sections(out: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut found = Vec::new();
    for (name, v) in out {
        let reason = |v: &Value| {
            v.get("unmeasured")
                .or_else(|| v.get("error"))
                .map(|r| r.as_str().map_or_else(|| r.to_string(), str::to_string))
        };
        if let Some(r) = reason(v) {
            found.push(format!("{name}: {r}"));
        } else if let Some(rows) = v.as_object() {
            for (row, rv) in rows {
                if let Some(r) = reason(rv) {
                    found.push(format!("{name} / {row}: {r}"));
                }
            }
        }
    }
    found
}

fn fmt_list(v: &[f64], d: usize) -> String {
    v.iter()
        .map(|x| format!("{x:.d$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn section_readiness(report: &mut Vec<String>) -> Value {
    eprintln!("bench: readiness ...");
    let tmp = workdir().join("readiness");
    let _ = std::fs::create_dir_all(&tmp);
    let exe = match servegate_exe() {
        Ok(e) => e.display().to_string(),
        Err(e) => return json!({"error": e}),
    };
    let mut after_ready = Vec::new();
    let mut after_first_200 = Vec::new();
    let mut missed = Vec::new();
    for rep in 0..7 {
        let port = match servegate::io::port::free_port("127.0.0.1") {
            Ok(p) => p,
            Err(e) => {
                missed.push(format!("try {}: no free port: {e}", rep + 1));
                continue;
            }
        };
        let log = tmp.join("timing.jsonl");
        let _ = std::fs::remove_file(&log);
        // Ready 300-360 ms after start: a different phase against the 25 ms poll each time.
        let ready_after = 300 + rep * 10;
        let command: Vec<String> = [
            exe.as_str(),
            "replay",
            "--synthetic",
            "--tokens",
            "2",
            "--ttft-ms",
            "0",
            "--itl-ms",
            "1",
            "--port",
            &port.to_string(),
            "--ready-after-ms",
            &ready_after.to_string(),
            "--timing-log",
            &log.display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let spec = servegate::io::serve::ServeSpec::new(
            command,
            port,
            tmp.join(servegate::evidence::layout::SERVE_LOG),
        );
        let mut s = match servegate::io::serve::Serve::start(spec) {
            Ok(s) => s,
            Err(e) => {
                missed.push(format!("try {}: the serve did not start: {e}", rep + 1));
                continue;
            }
        };
        let ready = s.wait_ready();
        let t = mono_ns();
        let _ = s.stop();
        if let Err(e) = ready {
            missed.push(format!("try {}: never ready: {e}", rep + 1));
            continue;
        }
        let stamps = read_log(&log)
            .into_iter()
            .find(|v| v["event"] == "first_200_on_health")
            .and_then(|ev| Some((ev["mono_ns"].as_u64()?, ev["ready_at_mono_ns"].as_u64()?)));
        match stamps {
            Some((first, ready)) => {
                after_ready.push((t as f64 - ready as f64) / 1e6);
                after_first_200.push((t as f64 - first as f64) / 1e6);
            }
            None => missed.push(format!(
                "try {}: no first_200_on_health event in {}",
                rep + 1,
                log.display()
            )),
        }
    }
    report.push(
        "## Readiness: the serve turns ready (`/health` 503 → 200) → `Serve::wait_ready` returns\n"
            .into(),
    );
    if after_ready.is_empty() {
        let why = unmeasured_reason(&missed);
        report.push(format!("measured nothing (0 of 7 tries): {why}\n"));
        return json!({"unmeasured": why});
    }
    report.push(format!(
        "from ready: median {} ms (min {}, max {}; n={}); from the serve's first 200: median {} ms (min {}, max {}). \
         The runner polls every {} ms and, after the first 200, checks for {} ms that the serve is still alive before it proceeds.\n",
        f(med(&after_ready), 1),
        f(stats::min(&after_ready), 1),
        f(stats::max(&after_ready), 1),
        after_ready.len(),
        f(med(&after_first_200), 1),
        f(stats::min(&after_first_200), 1),
        f(stats::max(&after_first_200), 1),
        servegate::io::serve::DEFAULT_POLL_INTERVAL_MS,
        servegate::io::serve::ALIVE_RECHECK_MIN_MS,
    ));
    json!({"not_measured": missed, "from_ready_ms": {"median": med(&after_ready), "each": after_ready}, "from_first_200_ms": {"median": med(&after_first_200), "each": after_first_200},
           "poll_interval_ms": servegate::io::serve::DEFAULT_POLL_INTERVAL_MS, "alive_recheck_ms": servegate::io::serve::ALIVE_RECHECK_MIN_MS})
}

/// The serve's answering time of one run: its `per_run` request lines from `from` on, the sum of arrival to
/// last byte per request, ms (`CLOCK_MONOTONIC` of the timing log). None when the log holds fewer than
/// `per_run` complete lines there (the serve never answered them: a run with nothing to subtract is not
/// measured, never `serving 0 ms`).
fn serving_ms(lines: &[Value], from: usize, per_run: usize) -> Option<f64> {
    let each: Vec<f64> = lines
        .iter()
        .skip(from)
        .take(per_run)
        .filter_map(|l| {
            Some((l["end_mono_ns"].as_u64()? as f64 - l["arrived_mono_ns"].as_u64()? as f64) / 1e6)
        })
        .collect();
    (each.len() == per_run).then(|| each.iter().sum())
}

/// A `command` gate's argv (TOML strings, quoted) starting the `servegate` binary ([`servegate_exe`]) as
/// the synthetic serve with `sargs`, on the runner's `{port}`, logging its timing to `log`.
fn synth_command(sargs: &[String], log: &Path) -> Vec<String> {
    let exe = servegate_exe()
        .map(|e| e.display().to_string())
        .unwrap_or_default();
    let mut argv = vec![
        format!("{exe:?}"),
        "\"replay\"".into(),
        "\"--synthetic\"".into(),
    ];
    argv.extend(sargs.iter().map(|a| format!("{a:?}")));
    argv.extend([
        "\"--port\"".to_string(),
        "\"{port}\"".into(),
        "\"--timing-log\"".into(),
        format!("{:?}", log.display().to_string()),
    ]);
    argv
}

/// One overhead row per run: wall ms, serving ms, overhead ms, exit code, CPU s, peak RSS MiB.
type OverheadRow = (f64, f64, f64, i32, f64, f64);

/// `runs` runs of `gate`, each a row, or why it measured nothing (the run not started, or the serve's log
/// short of `per_run` requests). `lines(n)`: the serve's request lines so far, waiting (if it can) until
/// there are `n`.
fn overhead_runs(
    gate: &Path,
    tmp: &Path,
    runs: usize,
    per_run: usize,
    lines: impl Fn(usize) -> Vec<Value>,
) -> (Vec<OverheadRow>, Vec<String>) {
    let mut rows = Vec::new();
    let mut missed = Vec::new();
    for rep in 0..runs {
        let before = lines(0).len();
        let (t0, t1, code, cpu, rss) = match run_gate(gate, &tmp.join("runs")) {
            Ok(r) => r,
            Err(e) => {
                missed.push(format!("run {}: {e}", rep + 1));
                continue;
            }
        };
        let after = lines(before + per_run);
        let Some(serving) = serving_ms(&after, before, per_run) else {
            missed.push(format!(
                "run {}: the serve logged {} of {per_run} requests (exit {code})",
                rep + 1,
                after.len().saturating_sub(before)
            ));
            continue;
        };
        let wall = (t1 - t0) as f64 / 1e6;
        rows.push((wall, serving, wall - serving, code, cpu, rss));
    }
    (rows, missed)
}

/// The overhead section's three runs of the `command` gate (`text`, written to `gate`; the serve it starts
/// logs to `log`), as [`overhead_runs`].
fn command_rows(
    gate: &Path,
    text: &str,
    log: &Path,
    tmp: &Path,
    per_run: usize,
) -> (Vec<OverheadRow>, Vec<String>) {
    if let Err(e) = write_gate(gate, text) {
        return (Vec::new(), vec![e]);
    }
    let _ = std::fs::remove_file(log);
    overhead_runs(gate, tmp, 3, per_run, |_| {
        read_log(log)
            .into_iter()
            .filter(|v| v.get("sends").is_some())
            .collect()
    })
}

fn section_overhead(report: &mut Vec<String>) -> Value {
    eprintln!("bench: overhead ...");
    let tmp = workdir().join("overhead");
    let _ = std::fs::create_dir_all(&tmp);
    let log = tmp.join("timing.jsonl");
    let (tokens, prompts, repeats, warmup) = (64u32, 3usize, 3u32, 1u32);
    let per_run = prompts * (repeats + warmup) as usize;
    let sargs: Vec<String> = [
        "--tokens",
        "64",
        "--ttft-ms",
        "20",
        "--tok-s",
        "1000",
        "--role-chunk",
        "--usage",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let synth = match Synth::start(&sargs, &log) {
        Ok(s) => s,
        Err(e) => return json!({"error": e}),
    };
    let gate = tmp.join("overhead-url.toml");
    if let Err(e) = write_gate(
        &gate,
        &url_gate(
            "bench-overhead",
            &synth.url,
            prompts,
            repeats,
            warmup,
            tokens,
        ),
    ) {
        return json!({"error": e});
    }
    let (url_rows, url_missed) = overhead_runs(&gate, &tmp, 5, per_run, |n| {
        if n == 0 {
            synth.requests()
        } else {
            synth.wait_requests(n)
        }
    });
    drop(synth);
    // The same gate with the serve started and stopped by the runner.
    let log2 = tmp.join("timing-command.jsonl");
    let cmd_gate_text = url_gate(
        "bench-overhead-command",
        "X",
        prompts,
        repeats,
        warmup,
        tokens,
    )
    .replace(
        "url = \"X\"",
        &format!("command = [{}]", synth_command(&sargs, &log2).join(", ")),
    );
    let gate2 = tmp.join("overhead-command.toml");
    let (cmd_rows, cmd_missed) = command_rows(&gate2, &cmd_gate_text, &log2, &tmp, per_run);
    let col = |rows: &[(f64, f64, f64, i32, f64, f64)], k: usize| -> Vec<f64> {
        rows.iter()
            .map(|r| match k {
                0 => r.0,
                1 => r.1,
                2 => r.2,
                4 => r.4,
                _ => r.5,
            })
            .collect()
    };
    report.push(format!("## Gate overhead: wall time of `servegate run` minus the serve's answering time ({per_run} requests of {tokens} tokens at 1,000 tok/s: 3 prompts, 1 warmup round + 3 repeats)\n"));
    report.push("| serve | runs | wall ms | serving ms | overhead ms | overhead per request ms | CPU ms (whole run) | CPU µs per token | peak RSS MiB |".into());
    report.push("|---|---|---|---|---|---|---|---|---|".into());
    let mut out = serde_json::Map::new();
    for (name, rows, missed) in [
        ("url (serve already up)", &url_rows, &url_missed),
        (
            "command (runner starts, polls, stops it)",
            &cmd_rows,
            &cmd_missed,
        ),
    ] {
        if rows.is_empty() {
            let why = unmeasured_reason(missed);
            report.push(format!(
                "| {name} | 0 | measured nothing: {why} | | | | | | |"
            ));
            out.insert(name.to_string(), json!({"unmeasured": why}));
            continue;
        }
        let oh = med(&col(rows, 2));
        let cpu = med(&col(rows, 4));
        report.push(format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rows.len(),
            f(med(&col(rows, 0)), 1),
            f(med(&col(rows, 1)), 1),
            f(oh, 1),
            f(oh.map(|o| o / per_run as f64), 2),
            f(cpu.map(|c| c * 1000.0), 1),
            f(cpu.map(|c| c * 1e6 / (per_run as f64 * tokens as f64)), 1),
            f(med(&col(rows, 5)), 1),
        ));
        out.insert(name.to_string(), json!({"wall_ms": col(rows, 0), "serving_ms": col(rows, 1), "overhead_ms": col(rows, 2), "cpu_s": col(rows, 4), "peak_rss_mib": col(rows, 5), "exit_codes": rows.iter().map(|r| r.3).collect::<Vec<_>>(), "not_measured": missed}));
    }
    // What the runner's evidence writes cost here: every file is written whole (temp file, fsync, rename),
    // four per request (request, response, reads, run.json).
    let probe = tmp.join("fsync-probe.json");
    let mut fsync_ms = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        if servegate::evidence::write_atomic(&probe, &[b'x'; 2048]).is_ok() {
            fsync_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    report.push(format!(
        "One atomic evidence write (2 KiB: temp file, fsync, rename) takes a median {} ms here (min {}, max {}); the runner makes four per request.\n",
        f(med(&fsync_ms), 2),
        f(stats::min(&fsync_ms), 2),
        f(stats::max(&fsync_ms), 2)
    ));
    out.insert(
        "atomic_write_ms".into(),
        json!({"median": med(&fsync_ms), "each": fsync_ms}),
    );
    report.push(String::new());
    Value::Object(out)
}

fn section_leaderboard(args: &BenchArgs, report: &mut Vec<String>) -> Value {
    eprintln!("bench: leaderboard ...");
    let n = args.records;
    let tmp = workdir().join("leaderboard-records");
    let _ = std::fs::remove_dir_all(&tmp);
    if let Err(e) = std::fs::create_dir_all(&tmp) {
        return json!({"error": e.to_string()});
    }
    // A real record (the first in data/records/), cloned n times under new ids and models.
    let seed = servegate::records::record::record_files(Path::new("data/records"))
        .ok()
        .and_then(|files| files.first().cloned());
    let Some(seed) = seed else {
        return json!({"error": "no record in data/records/ to clone"});
    };
    let base = match std::fs::read_to_string(&seed)
        .map_err(|e| e.to_string())
        .and_then(|t| servegate::records::record::parse(&t).map_err(|p| format!("{p:?}")))
    {
        Ok(r) => r,
        Err(e) => return json!({"error": e}),
    };
    for i in 0..n {
        let mut r = base.clone();
        r.id = format!("{}-{i:05}", base.id);
        r.model.name = format!("{}-{}", base.model.name, i % 500);
        if let Err(e) = std::fs::write(
            tmp.join(format!("{}.json", r.id)),
            servegate::records::record::to_json(&r),
        ) {
            return json!({"error": e.to_string()});
        }
    }
    let (t0, c0) = (Instant::now(), cpu_s_thread());
    let records = servegate::records::record::load_dir(&tmp);
    let check_s = t0.elapsed().as_secs_f64();
    let check_cpu = cpu_s_thread() - c0;
    let records = match records {
        Ok(r) => r,
        Err(refused) => {
            return json!({"error": refused.lines.into_iter().take(3).collect::<Vec<_>>()})
        }
    };
    let (t1, c1) = (Instant::now(), cpu_s_thread());
    let pages = servegate::records::leaderboard::render(&records, "../data/records");
    let render_s = t1.elapsed().as_secs_f64();
    let render_cpu = cpu_s_thread() - c1;
    let (md, html) = pages
        .map(|p| (p.markdown.len(), p.html.len()))
        .unwrap_or((0, 0));
    report.push(format!("## Leaderboard: {n} records\n"));
    report.push(format!(
        "read + parse + check (`record::load_dir`): {:.0} ms ({:.0} ms CPU); render (`leaderboard::render`, Markdown {:.1} MB + HTML {:.1} MB): {:.0} ms ({:.0} ms CPU); total {:.0} ms wall, {:.0} ms CPU\n",
        check_s * 1000.0,
        check_cpu * 1000.0,
        md as f64 / 1e6,
        html as f64 / 1e6,
        render_s * 1000.0,
        render_cpu * 1000.0,
        (check_s + render_s) * 1000.0,
        (check_cpu + render_cpu) * 1000.0
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    json!({"records": n, "check_ms": check_s * 1000.0, "render_ms": render_s * 1000.0, "total_ms": (check_s + render_s) * 1000.0,
           "check_cpu_ms": check_cpu * 1000.0, "render_cpu_ms": render_cpu * 1000.0, "markdown_bytes": md, "html_bytes": html})
}

fn section_sha256(args: &BenchArgs, report: &mut Vec<String>) -> Value {
    eprintln!("bench: sha256 of {} MiB ...", args.sha256_mib);
    let path = workdir().join("sha256-input.bin");
    let bytes = args.sha256_mib * 1024 * 1024;
    let write = || -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
        let mut block = vec![0u8; 1 << 20];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for chunk in block.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        for i in 0..args.sha256_mib {
            block[0..8].copy_from_slice(&i.to_le_bytes());
            f.write_all(&block)?;
        }
        f.flush()
    };
    if let Err(e) = write() {
        return json!({"error": e.to_string()});
    }
    let mut rates = Vec::new();
    let mut cpu_rates = Vec::new();
    for _ in 0..3 {
        let (t, c) = (Instant::now(), cpu_s_thread());
        match servegate::io::hash::sha256_file(&path) {
            Ok((_, n)) if n == bytes => {
                rates.push(n as f64 / t.elapsed().as_secs_f64() / 1e6);
                cpu_rates.push(n as f64 / (cpu_s_thread() - c) / 1e6);
            }
            Ok((_, n)) => return json!({"error": format!("hashed {n} bytes of {bytes}")}),
            Err(e) => return json!({"error": e.to_string()}),
        }
    }
    let _ = std::fs::remove_file(&path);
    report.push(format!(
        "## sha256 of a {} MiB file (page cache; `hash::sha256_file`)\n",
        args.sha256_mib
    ));
    report.push(format!(
        "median {} MB/s wall (each: {}); {} MB per CPU-second of the hashing thread (each: {}); MB = 10^6 bytes\n",
        f(med(&rates), 0),
        fmt_list(&rates, 0),
        f(med(&cpu_rates), 0),
        fmt_list(&cpu_rates, 0)
    ));
    json!({"mib": args.sha256_mib, "mb_per_s": {"median": med(&rates), "each": rates}, "mb_per_cpu_s": {"median": med(&cpu_rates), "each": cpu_rates}})
}

fn machine() -> Value {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    });
    let h = servegate::evidence::host_info();
    // SAFETY: sysconf has no preconditions. (Not available_parallelism: it shrinks once this thread is pinned.)
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    json!({"hostname": h.hostname, "os": h.os, "cpus": online, "cpu_model": cpu_model, "load_avg": servegate::evidence::load_avg(),
           "build": if cfg!(debug_assertions) { "debug" } else { "release" }, "servegate_version": env!("CARGO_PKG_VERSION")})
}

/// `servegate bench-self`: runs the sections, prints a Markdown report, writes the JSON to `--out`.
pub fn cli_bench_self(args: &BenchArgs) -> i32 {
    let want = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
    if let Err(e) = std::fs::create_dir_all(workdir()) {
        eprintln!("error: {}: {e}", workdir().display());
        return exit::EVIDENCE_ERROR;
    }
    if cfg!(debug_assertions) {
        eprintln!("bench: warning: a debug build; the figures that matter come from `cargo build --release`");
    }
    let machine_start = machine();
    let pinned = cpus() >= 2 && pin_self(1);
    let started = servegate::evidence::now_utc();
    let mut report = vec![
        format!("# servegate bench-self, {started}\n"),
        format!("machine: {machine_start}\n"),
    ];
    if pinned {
        report.push("The synthetic serve runs pinned to CPU 0; the clients (and `servegate run`) to CPU 1.\n".into());
    }
    let mut out = serde_json::Map::new();
    out.insert("started_utc".into(), json!(started));
    out.insert("machine_start".into(), machine_start);
    if want("fidelity") {
        out.insert(
            "fidelity".into(),
            crate::bench_fidelity::section_fidelity(args.requests, args.peers, &mut report),
        );
    }
    if want("startup") {
        out.insert("startup".into(), section_startup(&mut report));
    }
    if want("readiness") {
        out.insert("readiness".into(), section_readiness(&mut report));
    }
    if want("overhead") {
        out.insert("overhead".into(), section_overhead(&mut report));
    }
    if want("leaderboard") {
        out.insert("leaderboard".into(), section_leaderboard(args, &mut report));
    }
    if want("sha256") {
        out.insert("sha256".into(), section_sha256(args, &mut report));
    }
    if want("load") {
        out.insert(
            "load".into(),
            crate::bench_load::section_load(&args.streams, &mut report),
        );
    }
    if want("load") && args.peers {
        out.insert(
            "load_peers".into(),
            crate::bench_peers_load::section(&args.streams, &mut report),
        );
    }
    out.insert("machine_end".into(), machine());
    report.push(format!(
        "load average at the end of the bench (every section): {:?}\n",
        servegate::evidence::load_avg()
    ));
    // A section that measured nothing fails the bench, said why: a figure never prints unmeasured.
    let unmeasured = unmeasured_sections(&out);
    if !unmeasured.is_empty() {
        report.push("## Measured nothing (the bench fails)\n".into());
        report.extend(unmeasured.iter().map(|u| format!("- {u}")));
    }
    println!("{}", report.join("\n"));
    let json = serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default();
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&args.out, json) {
        Ok(()) => {
            eprintln!("bench: figures written to {}", args.out.display());
            if unmeasured.is_empty() {
                exit::PASS
            } else {
                for u in &unmeasured {
                    eprintln!("bench: FAILED: measured nothing: {u}");
                }
                exit::NOTHING_CHECKED
            }
        }
        Err(e) => {
            eprintln!("error: {}: {e}", args.out.display());
            exit::EVIDENCE_ERROR
        }
    }
}
