//! The `fidelity` section of bench-self: servegate's client (the runner's path: `client::send`,
//! `reply::parse_stream`, `measure::measure`) against the paced stream of `servegate replay --synthetic` at
//! 50, 1,000 and 10,000 tok/s and at 4 tokens per chunk, and with `--peers` a minimal Python client and
//! llama-benchy (from PyPI, into a venv under `target/servegate/bench/`) on the same streams: the error of
//! each client's TTFT and decode rate per request against the serve's true figures, and its CPU per token.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use servegate::analysis::stats;

use crate::bench_common::{cpu_s_self, cpu_s_thread, f, med, signed, tv, workdir, Synth};

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

/// The `fidelity` section: every case of [`CASES`] against a fresh paced stream, `requests` requests per
/// client (at least one); with `peers`, the minimal Python client and llama-benchy beside servegate's.
pub fn section_fidelity(requests: usize, peers: bool, report: &mut Vec<String>) -> Value {
    let n = requests.max(1);
    let lb = if peers {
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
        if peers {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_benchy_per_run_values_are_read() {
        let v = json!({"benchmarks": [{"e2e_ttft": {"mean": 52.0, "values": [52.5, 51.5]}, "tg_throughput": {"values": [1050.0, 1049.0]}}]});
        assert_eq!(
            llama_benchy_values(&v),
            (vec![52.5, 51.5], vec![1050.0, 1049.0])
        );
    }
}
