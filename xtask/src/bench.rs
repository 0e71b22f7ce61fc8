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

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use servegate::error::exit;

/// Builds the `servegate` binary this benchmark drives (release, the profile whose figures matter), beside
/// this xtask binary in the workspace target directory.
pub fn build_servegate() -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--quiet",
        "--package",
        "servegate",
        "--bin",
        "servegate",
    ]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("cargo build of servegate failed ({s})")),
        Err(e) => Err(format!("cannot run cargo: {e}")),
    }
}

/// The `servegate` binary: `$SERVEGATE_BIN`, else the one beside this xtask binary (same target profile).
fn servegate_exe() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SERVEGATE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    Ok(me.with_file_name("servegate"))
}
use servegate::analysis::stats;
use servegate::replay::pace::mono_ns;

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
}

/// One fidelity case: the paced stream's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Label.
    pub name: &'static str,
    /// Decode rate, tok/s.
    pub tok_s: f64,
    /// Tokens per reply.
    pub tokens: u32,
    /// Tokens per chunk.
    pub per_chunk: u32,
    /// First-token delay, ms.
    pub ttft_ms: f64,
}

/// The fidelity cases. Token counts keep each reply under ~1.3 s and the 4-per-chunk case at 64 tokens,
/// where the usual (N − 1) / window formula reads 63/60 = +5 %.
pub const CASES: &[Case] = &[
    Case {
        name: "50 tok/s",
        tok_s: 50.0,
        tokens: 64,
        per_chunk: 1,
        ttft_ms: 100.0,
    },
    Case {
        name: "1,000 tok/s",
        tok_s: 1000.0,
        tokens: 256,
        per_chunk: 1,
        ttft_ms: 50.0,
    },
    Case {
        name: "10,000 tok/s",
        tok_s: 10_000.0,
        tokens: 1024,
        per_chunk: 1,
        ttft_ms: 50.0,
    },
    Case {
        name: "1,000 tok/s, 4 tokens per chunk",
        tok_s: 1000.0,
        tokens: 64,
        per_chunk: 4,
        ttft_ms: 50.0,
    },
];

/// Where bench-self writes its scratch files: `target/servegate/bench`.
pub fn workdir() -> PathBuf {
    PathBuf::from("target/servegate/bench")
}

/// CPUs online on this machine. Not `available_parallelism`: that is this thread's affinity, which
/// shrinks to one CPU once bench-self pins itself (`pin_self(1)`), and the serves it starts after that
/// would then stay on the client's CPU instead of being pinned to CPU 0.
pub fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Pins the calling thread (and what it spawns later) to `cpu`. False when refused.
fn pin_self(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Pins the child `cmd` starts to `cpu` (between fork and exec).
pub fn pin_command(cmd: &mut Command, cpu: usize) {
    // SAFETY: the closure runs between fork and exec and only makes the sched_setaffinity syscall.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

/// User + system CPU seconds of this process.
fn cpu_s_self() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// User + system CPU seconds of the calling thread.
pub fn cpu_s_thread() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// Waits for `child` with `wait4`: (exit code, CPU seconds of it and its reaped descendants, peak RSS in
/// MiB).
pub fn wait_rusage(child: &mut Child) -> (i32, f64, f64) {
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid, writing into values we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(child.id() as i32, &mut status, 0, &mut ru);
        ru
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (
        code,
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_maxrss as f64 / 1024.0,
    )
}

/// A synthetic serve child (pinned to CPU 0 when there are two CPUs), stopped on drop.
pub struct Synth {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: PathBuf,
    stopped: bool,
}

impl Synth {
    /// Starts `servegate replay --synthetic ARGS --timing-log LOG` and waits for its listening line.
    pub fn start(args: &[String], log: &Path) -> Result<Synth, String> {
        let _ = std::fs::remove_file(log);
        let exe = servegate_exe()?;
        let mut cmd = Command::new(exe);
        cmd.arg("replay")
            .arg("--synthetic")
            .args(args)
            .arg("--timing-log")
            .arg(log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if cpus() >= 2 {
            pin_command(&mut cmd, 0);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the synthetic serve: {e}"))?;
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut line = String::new();
        loop {
            line.clear();
            if out.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("the synthetic serve exited before listening".into());
            }
            if let Some(url) = line.trim().strip_prefix("replay: listening on ") {
                let url = url.to_string();
                std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
                return Ok(Synth {
                    child,
                    url,
                    log: log.to_path_buf(),
                    stopped: false,
                });
            }
        }
    }

    /// The timing log's request lines (those with a `request` number and `sends`).
    pub fn requests(&self) -> Vec<Value> {
        read_log(&self.log)
            .into_iter()
            .filter(|v| v.get("sends").is_some())
            .collect()
    }

    /// Waits until the log holds `n` request lines (they are written when a response ends).
    pub fn wait_requests(&self, n: usize) -> Vec<Value> {
        let t = Instant::now();
        loop {
            let v = self.requests();
            if v.len() >= n || t.elapsed() > Duration::from_secs(10) {
                return v;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Synth {
    /// Stops the serve (SIGTERM) and returns the CPU seconds it used in all (user + system, `wait4`).
    pub fn stop(&mut self) -> f64 {
        if self.stopped {
            return 0.0;
        }
        self.stopped = true;
        // SAFETY: kill(2) on our own child's pid, not yet waited for.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        wait_rusage(&mut self.child).1
    }
}

impl Drop for Synth {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// The JSON lines of a timing log (lines that do not parse are skipped).
pub fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn synth_args(c: &Case) -> Vec<String> {
    vec![
        "--tokens".into(),
        c.tokens.to_string(),
        "--ttft-ms".into(),
        c.ttft_ms.to_string(),
        "--tok-s".into(),
        c.tok_s.to_string(),
        "--per-chunk".into(),
        c.per_chunk.to_string(),
        "--role-chunk".into(),
        "--usage".into(),
    ]
}

fn med(v: &[f64]) -> Option<f64> {
    stats::median(v)
}

fn f(x: Option<f64>, decimals: usize) -> String {
    x.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

fn signed(x: Option<f64>, decimals: usize) -> String {
    x.map(|x| format!("{x:+.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// Errors of one client on one case: per request (measured − true).
#[derive(Debug, Default, Clone)]
struct Errors {
    ttft_ms: Vec<f64>,
    decode_pct: Vec<f64>,
    cpu_us_per_token: Option<f64>,
    /// Of which parsing the reads and measuring (`reply::parse_stream` + `measure::measure`), µs per token.
    parse_us_per_token: Option<f64>,
    note: Option<String>,
}

impl Errors {
    fn to_json(&self) -> Value {
        json!({
            "ttft_error_ms": {"median": med(&self.ttft_ms), "min": stats::min(&self.ttft_ms), "max": stats::max(&self.ttft_ms), "each": self.ttft_ms},
            "decode_error_pct": {"median": med(&self.decode_pct), "min": stats::min(&self.decode_pct), "max": stats::max(&self.decode_pct), "each": self.decode_pct},
            "cpu_us_per_token": self.cpu_us_per_token,
            "parse_us_per_token": self.parse_us_per_token,
            "note": self.note,
        })
    }
}

fn true_of(line: &Value) -> (Option<f64>, Option<f64>) {
    (
        line["true_ttft_ms"].as_f64(),
        line["true_decode_tok_s"].as_f64(),
    )
}

/// servegate's client on one case: one warmup request, then `n` measured.
fn fidelity_servegate(c: &Case, n: usize, synth: &Synth) -> Errors {
    let http = match servegate::io::client::Sender::new(Duration::from_secs(60), None) {
        Ok(h) => h,
        Err(e) => {
            return Errors {
                note: Some(e),
                ..Default::default()
            }
        }
    };
    let body = json!({"model": "synthetic", "messages": [{"role": "user", "content": "bench"}], "max_tokens": c.tokens, "stream": true, "stream_options": {"include_usage": true}});
    let before = synth.requests().len();
    let mut kept = Vec::new();
    let mut one = || {
        let ex = servegate::io::client::send(&http, &synth.url, &body);
        let reply = servegate::analysis::reply::parse_stream(&ex.reads, ex.response.status);
        let fig = servegate::analysis::measure::measure(&reply);
        kept.push(ex);
        fig
    };
    let _ = one();
    let cpu0 = cpu_s_self();
    let figs: Vec<servegate::analysis::measure::Figures> = (0..n).map(|_| one()).collect();
    let cpu = cpu_s_self() - cpu0;
    // The parsing share: the same reads parsed and measured again, on this thread alone.
    let p0 = cpu_s_thread();
    for ex in kept.iter().skip(1) {
        let reply = servegate::analysis::reply::parse_stream(&ex.reads, ex.response.status);
        std::hint::black_box(servegate::analysis::measure::measure(&reply));
    }
    let parse = cpu_s_thread() - p0;
    let lines = synth.wait_requests(before + 1 + n);
    let tokens = n as f64 * c.tokens as f64;
    let mut e = Errors {
        cpu_us_per_token: Some(cpu * 1e6 / tokens),
        parse_us_per_token: Some(parse * 1e6 / tokens),
        ..Default::default()
    };
    for (fig, line) in figs.iter().zip(lines.iter().skip(before + 1)) {
        let (tt, tr) = true_of(line);
        if let (Some(m), Some(t)) = (fig.ttft_ms, tt) {
            e.ttft_ms.push(m - t);
        }
        if let (Some(m), Some(t)) = (fig.decode_tok_s, tr) {
            e.decode_pct.push((m / t - 1.0) * 100.0);
        }
    }
    e
}

/// The minimal Python client: stdlib http.client, one persistent connection, a timestamp per read(),
/// TTFT at the first read holding content, decode (N − 1) / (t_last − t_first) with N from usage.
const MINIMAL_PY: &str = r#"
import http.client, json, sys, time
url, n, ntok = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host, port = url.split("//")[1].split(":")
conn = http.client.HTTPConnection(host, int(port))
body = json.dumps({"model": "synthetic", "messages": [{"role": "user", "content": "bench"}], "max_tokens": ntok,
                   "stream": True, "stream_options": {"include_usage": True}})
def one():
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    buf, times, usage = b"", [], None
    while True:
        data = r.read1(65536)
        if not data:
            break
        t = time.perf_counter()
        buf += data
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if not ev.startswith(b"data: ") or ev == b"data: [DONE]":
                continue
            d = json.loads(ev[6:])
            if d.get("usage"):
                usage = d["usage"]["completion_tokens"]
            for ch in d.get("choices", []):
                if ch.get("delta", {}).get("content"):
                    times.append(t)
    ttft = (times[0] - t0) * 1000
    rate = (usage - 1) / (times[-1] - times[0]) if len(times) > 1 else None
    return ttft, rate
one()
c0 = time.process_time()
out = [one() for _ in range(n)]
cpu = time.process_time() - c0
print(json.dumps({"ttft_ms": [o[0] for o in out], "decode_tok_s": [o[1] for o in out], "cpu_s": cpu}))
"#;

fn fidelity_minimal_py(c: &Case, n: usize, synth: &Synth) -> Errors {
    let script = workdir().join("minimal_client.py");
    if let Err(e) = std::fs::write(&script, MINIMAL_PY) {
        return Errors {
            note: Some(e.to_string()),
            ..Default::default()
        };
    }
    let before = synth.requests().len();
    let out = Command::new("python3")
        .arg(&script)
        .arg(&synth.url)
        .arg(n.to_string())
        .arg(c.tokens.to_string())
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return Errors {
                note: Some(format!(
                    "python3 failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                ..Default::default()
            }
        }
        Err(e) => {
            return Errors {
                note: Some(format!("python3: {e}")),
                ..Default::default()
            }
        }
    };
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let lines = synth.wait_requests(before + 1 + n);
    let mut e = Errors::default();
    let cpu = v["cpu_s"].as_f64().unwrap_or(f64::NAN);
    e.cpu_us_per_token = Some(cpu * 1e6 / (n as f64 * c.tokens as f64));
    for (i, line) in lines.iter().skip(before + 1).enumerate() {
        let (tt, tr) = true_of(line);
        if let (Some(m), Some(t)) = (v["ttft_ms"][i].as_f64(), tt) {
            e.ttft_ms.push(m - t);
        }
        if let (Some(m), Some(t)) = (v["decode_tok_s"][i].as_f64(), tr) {
            e.decode_pct.push((m / t - 1.0) * 100.0);
        }
    }
    e
}

/// Builds the llama-benchy environment: a venv with llama-benchy (pip), a word-level tokenizer for the
/// synthetic tokens (llama-benchy needs one and the hub is out of reach), and a local "book" for its
/// prompt corpus. Returns (llama-benchy path, tokenizer path, home dir for its cache, book URL).
fn llama_benchy_setup() -> Result<(PathBuf, PathBuf, PathBuf, String), String> {
    let dir = std::fs::canonicalize(workdir()).map_err(|e| e.to_string())?;
    let venv = dir.join("venv");
    let bin = venv.join("bin/llama-benchy");
    if !bin.exists() {
        eprintln!(
            "bench: installing llama-benchy into {} (pip) ...",
            venv.display()
        );
        let ok = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
            && Command::new(venv.join("bin/pip"))
                .args(["install", "-q", "llama-benchy==0.4.0"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
        if !ok || !bin.exists() {
            return Err("pip install llama-benchy==0.4.0 failed".into());
        }
    }
    let home = dir.join("llama-benchy-home");
    let tok = dir.join("tokenizer.json");
    let book_url = "http://127.0.0.1:9/servegate-bench-book.txt".to_string();
    // The tokenizer: one token per synthetic word, whitespace-split.
    let script = format!(
        r##"
import hashlib, os
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {{"[UNK]": 0}}
for i in range(1, 5001):
    vocab["t%d" % i] = i
tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tk.save({tok:?})
cache = os.path.join({home:?}, ".cache", "llama-benchy")
os.makedirs(cache, exist_ok=True)
with open(os.path.join(cache, hashlib.md5({book:?}.encode()).hexdigest() + ".txt"), "w") as f:
    f.write(" ".join("t%d" % (1 + i % 5000) for i in range(200000)))
"##,
        tok = tok.display().to_string(),
        home = home.display().to_string(),
        book = book_url
    );
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "tokenizer setup failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok((bin, tok, home, book_url))
}

/// llama-benchy on one case (`--runs n`): its JSON result has per-run `e2e_ttft` (ms) and
/// `tg_throughput` (tok/s) values, paired with the last `n` streamed requests of the timing log (before
/// them it sends non-streamed warmups and one streamed warmup run).
fn fidelity_llama_benchy(
    c: &Case,
    n: usize,
    synth: &Synth,
    env: &(PathBuf, PathBuf, PathBuf, String),
) -> Errors {
    let (bin, tok, home, book) = env;
    let result = workdir().join("llama-benchy.json");
    let _ = std::fs::remove_file(&result);
    let before = synth.requests().len();
    let cpu0 = children_cpu_s();
    let out = Command::new(bin)
        .env("HOME", home)
        .env("HF_HUB_OFFLINE", "1")
        .args([
            "--base-url",
            &format!("{}/v1", synth.url),
            "--model",
            "synthetic",
            "--tokenizer",
        ])
        .arg(tok)
        .args([
            "--pp",
            "32",
            "--tg",
            &c.tokens.to_string(),
            "--runs",
            &n.to_string(),
        ])
        .args([
            "--latency-mode",
            "none",
            "--skip-coherence",
            "--no-adapt-prompt",
            "--book-url",
            book,
            "--format",
            "json",
            "--save-result",
        ])
        .arg(&result)
        .output();
    let cpu = children_cpu_s() - cpu0;
    let mut e = Errors::default();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            e.note = Some(format!(
                "llama-benchy failed: {}",
                tail(
                    &String::from_utf8_lossy(&o.stdout),
                    &String::from_utf8_lossy(&o.stderr)
                )
            ));
            return e;
        }
        Err(err) => {
            e.note = Some(format!("llama-benchy: {err}"));
            return e;
        }
    }
    let lines = synth.wait_requests(before + n);
    let streamed: Vec<&Value> = lines
        .iter()
        .skip(before)
        .filter(|l| l["stream"].as_bool() == Some(true))
        .collect();
    let measured: Vec<&Value> = streamed.iter().rev().take(n).rev().copied().collect();
    let v: Value = std::fs::read_to_string(&result)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let (ttfts, rates) = llama_benchy_values(&v);
    for (i, line) in measured.iter().enumerate() {
        let (tt, tr) = true_of(line);
        if let (Some(m), Some(t)) = (ttfts.get(i), tt) {
            e.ttft_ms.push(m - t);
        }
        if let (Some(m), Some(t)) = (rates.get(i), tr) {
            e.decode_pct.push((m / t - 1.0) * 100.0);
        }
    }
    // Its whole process (start-up, corpus tokenisation, warmups included) per measured token: an upper
    // bound of its per-token cost.
    e.cpu_us_per_token = Some(cpu * 1e6 / (n as f64 * c.tokens as f64));
    e.note = Some("e2e_ttft and tg_throughput per run; CPU = the whole process per measured token (upper bound)".into());
    if ttfts.len() != n || rates.len() != n {
        e.note = Some(format!(
            "result not understood: {}",
            v.to_string().chars().take(300).collect::<String>()
        ));
    }
    e
}

fn tail(a: &str, b: &str) -> String {
    let all = format!("{a}\n{b}");
    let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(4)..].join(" | ")
}

fn children_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// Per-run `e2e_ttft` (ms) and `tg_throughput` (tok/s) values of llama-benchy 0.4.0's JSON result
/// (`benchmarks[0].e2e_ttft.values`, `benchmarks[0].tg_throughput.values`).
fn llama_benchy_values(v: &Value) -> (Vec<f64>, Vec<f64>) {
    let vals = |key: &str| -> Vec<f64> {
        v["benchmarks"][0][key]["values"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default()
    };
    (vals("e2e_ttft"), vals("tg_throughput"))
}

fn section_fidelity(args: &BenchArgs, report: &mut Vec<String>) -> Value {
    let n = args.requests.max(1);
    let lb = if args.peers {
        match llama_benchy_setup() {
            Ok(env) => Some(Ok(env)),
            Err(e) => Some(Err(e)),
        }
    } else {
        None
    };
    let mut cases = Vec::new();
    report.push(format!("## Timing fidelity (medians of {n} requests; error = measured − the serve's true figure)\n"));
    report.push("| stream | client | TTFT error ms (min..max) | decode-rate error % (min..max) | client CPU µs/token (of which parse + measure) |".into());
    report.push("|---|---|---|---|---|".into());
    for c in CASES {
        eprintln!("bench: fidelity {} ...", c.name);
        let log = workdir().join("timing-fidelity.jsonl");
        let synth = match Synth::start(&synth_args(c), &log) {
            Ok(s) => s,
            Err(e) => {
                report.push(format!("| {} | - | {e} | | |", c.name));
                continue;
            }
        };
        let mut clients: Vec<(&str, Errors)> =
            vec![("servegate", fidelity_servegate(c, n, &synth))];
        if args.peers {
            clients.push(("minimal Python (stdlib)", fidelity_minimal_py(c, n, &synth)));
            match &lb {
                Some(Ok(env)) => clients.push((
                    "llama-benchy 0.4.0",
                    fidelity_llama_benchy(c, n, &synth, env),
                )),
                Some(Err(e)) => clients.push((
                    "llama-benchy 0.4.0",
                    Errors {
                        note: Some(e.clone()),
                        ..Default::default()
                    },
                )),
                None => {}
            }
        }
        let mut cj = serde_json::Map::new();
        for (name, e) in &clients {
            let range = |v: &[f64], d: usize| {
                format!(
                    "{} ({}..{})",
                    signed(med(v), d),
                    signed(stats::min(v), d),
                    signed(stats::max(v), d)
                )
            };
            report.push(format!(
                "| {} | {name} | {} | {} | {} |{}",
                c.name,
                range(&e.ttft_ms, 2),
                range(&e.decode_pct, 3),
                match e.parse_us_per_token {
                    Some(p) => format!("{} ({p:.1})", f(e.cpu_us_per_token, 1)),
                    None => f(e.cpu_us_per_token, 1),
                },
                e.note
                    .as_ref()
                    .map(|n| format!(" <!-- {n} -->"))
                    .unwrap_or_default()
            ));
            cj.insert(name.to_string(), e.to_json());
        }
        cases.push(json!({"case": c.name, "tok_s": c.tok_s, "tokens": c.tokens, "per_chunk": c.per_chunk, "ttft_ms": c.ttft_ms, "clients": cj}));
    }
    report.push(String::new());
    Value::Array(cases)
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
    for rep in 0..7 {
        let Ok((t0, _, _, _, _)) = run_gate(&gate, &tmp.join("runs")) else {
            continue;
        };
        let lines = synth.wait_requests(rep + 1);
        if let Some(a) = lines.get(rep).and_then(|l| l["arrived_mono_ns"].as_u64()) {
            startup_ms.push((a as f64 - t0 as f64) / 1e6);
        }
    }
    report.push("## Startup: launching `servegate run` (url gate, serve up) to its first request arriving\n".into());
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
    let exe = match std::env::current_exe() {
        Ok(e) => e.display().to_string(),
        Err(e) => return json!({"error": e.to_string()}),
    };
    let mut after_ready = Vec::new();
    let mut after_first_200 = Vec::new();
    for rep in 0..7 {
        let Ok(port) = servegate::io::port::free_port("127.0.0.1") else {
            continue;
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
        let Ok(mut s) = servegate::io::serve::Serve::start(spec) else {
            continue;
        };
        let ok = s.wait_ready().is_ok();
        let t = mono_ns();
        let _ = s.stop();
        if !ok {
            continue;
        }
        if let Some(ev) = read_log(&log)
            .into_iter()
            .find(|v| v["event"] == "first_200_on_health")
        {
            if let (Some(first), Some(ready)) =
                (ev["mono_ns"].as_u64(), ev["ready_at_mono_ns"].as_u64())
            {
                after_ready.push((t as f64 - ready as f64) / 1e6);
                after_first_200.push((t as f64 - first as f64) / 1e6);
            }
        }
    }
    report.push(
        "## Readiness: the serve turns ready (`/health` 503 → 200) → `Serve::wait_ready` returns\n"
            .into(),
    );
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
    json!({"from_ready_ms": {"median": med(&after_ready), "each": after_ready}, "from_first_200_ms": {"median": med(&after_first_200), "each": after_first_200},
           "poll_interval_ms": servegate::io::serve::DEFAULT_POLL_INTERVAL_MS, "alive_recheck_ms": servegate::io::serve::ALIVE_RECHECK_MIN_MS})
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
    let mut url_rows = Vec::new();
    for rep in 0..5 {
        let Ok((t0, t1, code, cpu, rss)) = run_gate(&gate, &tmp.join("runs")) else {
            continue;
        };
        let lines = synth.wait_requests((rep + 1) * per_run);
        let serving: f64 = lines
            .iter()
            .skip(rep * per_run)
            .take(per_run)
            .filter_map(|l| {
                Some(
                    (l["end_mono_ns"].as_u64()? as f64 - l["arrived_mono_ns"].as_u64()? as f64)
                        / 1e6,
                )
            })
            .sum();
        let wall = (t1 - t0) as f64 / 1e6;
        url_rows.push((wall, serving, wall - serving, code, cpu, rss));
    }
    drop(synth);
    // The same gate with the serve started and stopped by the runner.
    let exe = std::env::current_exe()
        .map(|e| e.display().to_string())
        .unwrap_or_default();
    let log2 = tmp.join("timing-command.jsonl");
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
        format!("{:?}", log2.display().to_string()),
    ]);
    let cmd_gate_text = url_gate(
        "bench-overhead-command",
        "X",
        prompts,
        repeats,
        warmup,
        tokens,
    )
    .replace("url = \"X\"", &format!("command = [{}]", argv.join(", ")));
    let gate2 = tmp.join("overhead-command.toml");
    let mut cmd_rows = Vec::new();
    if write_gate(&gate2, &cmd_gate_text).is_ok() {
        let _ = std::fs::remove_file(&log2);
        for rep in 0..3 {
            let Ok((t0, t1, code, cpu, rss)) = run_gate(&gate2, &tmp.join("runs")) else {
                continue;
            };
            let lines: Vec<Value> = read_log(&log2)
                .into_iter()
                .filter(|v| v.get("sends").is_some())
                .collect();
            let serving: f64 = lines
                .iter()
                .skip(rep * per_run)
                .take(per_run)
                .filter_map(|l| {
                    Some(
                        (l["end_mono_ns"].as_u64()? as f64 - l["arrived_mono_ns"].as_u64()? as f64)
                            / 1e6,
                    )
                })
                .sum();
            let wall = (t1 - t0) as f64 / 1e6;
            cmd_rows.push((wall, serving, wall - serving, code, cpu, rss));
        }
    }
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
    for (name, rows) in [
        ("url (serve already up)", &url_rows),
        ("command (runner starts, polls, stops it)", &cmd_rows),
    ] {
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
        out.insert(name.to_string(), json!({"wall_ms": col(rows, 0), "serving_ms": col(rows, 1), "overhead_ms": col(rows, 2), "cpu_s": col(rows, 4), "peak_rss_mib": col(rows, 5), "exit_codes": rows.iter().map(|r| r.3).collect::<Vec<_>>()}));
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
    // A real record (the first in records/), cloned n times under new ids and models.
    let seed = servegate::records::record::record_files(Path::new("records"))
        .ok()
        .and_then(|files| files.first().cloned());
    let Some(seed) = seed else {
        return json!({"error": "no record in records/ to clone"});
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
    let pages = servegate::records::leaderboard::render(&records, "../records");
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
/// most a perfect client can see is 64 / 0.776 × 256 = 21,100 tok/s: above the 20,000 of issue 18 (at
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
struct LoadRun {
    requests: usize,
    tokens: u64,
    failed: usize,
    wall_s: f64,
    cpu_s: f64,
    /// Client TTFT − the serve's true TTFT, per request matched by the reply id, ms.
    ttft_err_ms: Vec<f64>,
    /// Client decode rate ÷ the serve's true decode rate − 1, per request, %.
    decode_err_pct: Vec<f64>,
}

impl LoadRun {
    fn us_per_token(&self) -> Option<f64> {
        (self.tokens > 0).then(|| self.cpu_s * 1e6 / self.tokens as f64)
    }
    fn tok_s(&self) -> f64 {
        self.tokens as f64 / self.wall_s
    }
    fn err_p(&self, p: f64) -> Option<f64> {
        stats::percentile(&self.ttft_err_ms, p)
    }
    fn to_json(&self) -> Value {
        json!({"requests": self.requests, "tokens": self.tokens, "failed": self.failed, "wall_s": self.wall_s,
               "aggregate_tok_s": self.tok_s(), "client_cpu_s": self.cpu_s, "us_cpu_per_token": self.us_per_token(),
               "ttft_error_ms": {"median": self.err_p(50.0), "p95": self.err_p(95.0), "n": self.ttft_err_ms.len(), "each": self.ttft_err_ms},
               "decode_error_pct": {"median": stats::percentile(&self.decode_err_pct, 50.0), "n": self.decode_err_pct.len(), "each": self.decode_err_pct}})
    }
}

/// Measures the exchanges of one client against the serve's truth: tokens and failures by the runner's
/// own parser and measure code, the TTFT error per request matched by the reply id.
fn judge_load(
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
fn section_load(report: &mut Vec<String>) -> Value {
    eprintln!("bench: load ...");
    let tmp = workdir().join("load");
    let _ = std::fs::create_dir_all(&tmp);
    let load_start = servegate::evidence::load_avg();
    let mut rows = Vec::new();
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
        let mut row = run.to_json();
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
        out.insert("fidelity".into(), section_fidelity(args, &mut report));
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
        out.insert("load".into(), section_load(&mut report));
    }
    if want("load") && args.peers {
        out.insert(
            "load_peers".into(),
            crate::bench_peers_load::section(&mut report),
        );
    }
    out.insert("machine_end".into(), machine());
    report.push(format!(
        "load average at the end: {:?}\n",
        servegate::evidence::load_avg()
    ));
    println!("{}", report.join("\n"));
    let json = serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default();
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&args.out, json) {
        Ok(()) => {
            eprintln!("bench: figures written to {}", args.out.display());
            exit::PASS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", args.out.display());
            exit::EVIDENCE_ERROR
        }
    }
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

    #[test]
    fn llama_benchy_per_run_values_are_read() {
        let v = json!({"benchmarks": [{"e2e_ttft": {"mean": 52.0, "values": [52.5, 51.5]}, "tg_throughput": {"values": [1050.0, 1049.0]}}]});
        assert_eq!(
            llama_benchy_values(&v),
            (vec![52.5, 51.5], vec![1050.0, 1049.0])
        );
    }
}
