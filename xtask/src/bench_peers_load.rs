//! `cargo xtask bench-self --peers --only load [--streams C ...]`: the load section's concurrent schedules
//! (closed loop at concurrency 1, 16, 64 and 256 against `servegate replay --synthetic`, 64 tokens per
//! reply, first at 20 ms, 12 ms apart) driven by peer load generators from PyPI instead of servegate's load
//! client.
//!
//! The latency figures of AIPerf, GuideLLM and vLLM's bench come from the cross-tool parity gate mode
//! (`bench_peers_parity`: a parity gate per tool and concurrency, run by `servegate run`, its verdicts with
//! the serve's truth header as referee). What that mode does not do is here:
//! * each tool's CPU per streamed token (AIPerf, GuideLLM, llama-benchy): user + system time of the whole
//!   tool process tree run alone (`wait4` of the child, which includes its reaped children), start-up,
//!   dataset and tokenizer loading and reporting included, divided by the tokens the serve streamed to it
//!   (from its timing log). That is an upper bound of the per-token cost, stated as such in the report;
//! * llama-benchy's latency (servegate has no driver for it): its per-request values' percentiles (numpy's
//!   linear method, `stats::percentile`) minus the same percentile of the serve's true per-request values
//!   (its timing log) over the requests it measured ([`Peer::metric_names`]);
//! * servegate's own load client's CPU per token and its figures against the timing log, for the same rows.
//!
//! The peers are installed with pip into venvs under `target/servegate/bench/` on first use, and given a
//! local word-level tokenizer (one token per synthetic word ` tN`) since the Hugging Face hub is not
//! reachable here. A peer that does not install or cannot run offline is reported with its error.
//! The tool runs pinned to CPU 1 (as servegate's client), the serve to CPU 0.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use servegate::analysis::stats;

use crate::bench_common::{cpu_s_thread, cpus, pin_command, wait_rusage, workdir, Synth};
use crate::bench_load_case::{load_schedules, LoadCase};

/// The true per-request figures of the streamed, answered requests in a timing log, in arrival order:
/// TTFT = the first token chunk's send time from the request's arrival (ms); TPOT = (last token chunk's
/// send time − first's) / (N − 1), ms, N = the tokens sent (vLLM's TPOT, AIPerf's "ITL"); tokens = N.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Truth {
    /// Per request, ms.
    pub ttft_ms: Vec<f64>,
    /// Per request, ms (requests with N ≥ 2).
    pub tpot_ms: Vec<f64>,
    /// Tokens streamed, all requests of the log.
    pub tokens: u64,
}

/// The truth of the last `n` streamed requests (by arrival) of the timing log's request lines; warmups a
/// tool sends first are left out that way. `tokens` counts every streamed token of the log (the tool's
/// CPU covers its warmups too).
pub fn truth_of(lines: &[Value], n: usize) -> Truth {
    let mut streamed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["stream"].as_bool() == Some(true) && l["status"].as_u64() == Some(200))
        .collect();
    streamed.sort_by_key(|l| l["arrived_mono_ns"].as_u64().unwrap_or(0));
    let mut t = Truth::default();
    let token_sends = |l: &Value| -> Vec<(u64, f64)> {
        l["sends"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|s| s["kind"] == "token")
                    .filter_map(|s| Some((s["tokens"].as_u64()?, s["sent_ms"].as_f64()?)))
                    .collect()
            })
            .unwrap_or_default()
    };
    for l in &streamed {
        t.tokens += token_sends(l).iter().map(|x| x.0).sum::<u64>();
    }
    for l in streamed.iter().skip(streamed.len().saturating_sub(n)) {
        let sends = token_sends(l);
        let (Some(first), Some(last)) = (sends.first(), sends.last()) else {
            continue;
        };
        t.ttft_ms.push(first.1);
        let n_tok: u64 = sends.iter().map(|x| x.0).sum();
        if n_tok >= 2 {
            t.tpot_ms.push((last.1 - first.1) / (n_tok - 1) as f64);
        }
    }
    t
}

/// What one tool reported at one point, in ms, under servegate's names.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reported {
    /// TTFT p50, p95, p99 (the tool's own percentiles).
    pub ttft: [Option<f64>; 3],
    /// TPOT p50, p95, p99 (the tool's own percentiles of its per-request TPOT-like metric).
    pub tpot: [Option<f64>; 3],
    /// Requests the tool counted as succeeded / failed.
    pub ok: Option<u64>,
    /// Requests the tool counted as failed.
    pub failed: Option<u64>,
}

/// The peers, in order of preference (most widely used first).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Peer {
    /// NVIDIA AIPerf (GenAI-Perf's successor).
    AiPerf,
    /// GuideLLM (vLLM project).
    GuideLlm,
    /// llama-benchy.
    LlamaBenchy,
}

/// The three peers tried.
pub const PEERS: [Peer; 3] = [Peer::AiPerf, Peer::GuideLlm, Peer::LlamaBenchy];

impl Peer {
    /// Display name with the pinned version.
    pub fn name(self) -> &'static str {
        match self {
            Peer::AiPerf => "AIPerf 0.13.0",
            Peer::GuideLlm => "GuideLLM 0.8.1",
            Peer::LlamaBenchy => "llama-benchy 0.4.0",
        }
    }

    /// The pip requirement.
    fn requirement(self) -> &'static str {
        match self {
            Peer::AiPerf => "aiperf==0.13.0",
            Peer::GuideLlm => "guidellm==0.8.1",
            Peer::LlamaBenchy => "llama-benchy==0.4.0",
        }
    }

    /// The venv directory under the bench work directory (llama-benchy shares the fidelity section's).
    fn venv(self) -> &'static str {
        match self {
            Peer::AiPerf => "venv-aiperf",
            Peer::GuideLlm => "venv-guidellm",
            Peer::LlamaBenchy => "venv",
        }
    }

    /// The executable in the venv (GuideLLM's is its Python, run as `python -m guidellm`: its venv is
    /// `scripts/provision-guidellm.sh`'s, renamed into place, whose console scripts name the temporary path).
    fn exe(self) -> &'static str {
        match self {
            Peer::AiPerf => "bin/aiperf",
            Peer::GuideLlm => "bin/python",
            Peer::LlamaBenchy => "bin/llama-benchy",
        }
    }

    /// What the tool's figures in this section are, in servegate's terms (docs/metrics.md).
    pub fn metric_names(self) -> &'static str {
        match self {
            Peer::AiPerf | Peer::GuideLlm => "CPU per token only (the tool run alone); its latency figures are the parity gate mode's (`load_peers.parity_gate` in the JSON): its per-request records imported as by `servegate import`, under servegate's definitions",
            Peer::LlamaBenchy => "e2e_ttft = TTFT (request start → first token), per request; tg_req_throughput = tokens after the first ÷ (last token − first token) per request, so 1000 / it = TPOT; no percentiles of its own (computed here, numpy linear); --concurrency c sends batches of c and waits for the whole batch (not a closed loop)",
        }
    }
}

/// One peer's environment: the executable, the local tokenizer directory, and a home directory (its
/// caches; llama-benchy's prompt corpus).
struct Env {
    exe: PathBuf,
    tokenizer_dir: PathBuf,
    home: PathBuf,
}

/// llama-benchy's book URL: never fetched, the corpus is put in its cache under this URL's md5.
const LB_BOOK_URL: &str = "http://127.0.0.1:9/servegate-bench-book.txt";

/// Installs `peer` with pip into its venv under the bench work directory (first use), and writes the
/// local word-level tokenizer (tokenizer.json + tokenizer_config.json, loadable by transformers'
/// `AutoTokenizer.from_pretrained(DIR)` with no hub). The error says which step failed and its output.
fn setup(peer: Peer) -> Result<Env, String> {
    let dir = std::fs::canonicalize(workdir()).map_err(|e| e.to_string())?;
    let venv = if peer == Peer::GuideLlm {
        guidellm_venv()?
    } else {
        dir.join(peer.venv())
    };
    let exe = venv.join(peer.exe());
    if !exe.exists() {
        eprintln!(
            "bench: installing {} into {} (pip) ...",
            peer.requirement(),
            venv.display()
        );
        if !venv.join("bin/pip").exists() {
            let out = Command::new("python3")
                .arg("-m")
                .arg("venv")
                .arg(&venv)
                .output()
                .map_err(|e| format!("python3 -m venv: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "python3 -m venv failed: {}",
                    tail(
                        &String::from_utf8_lossy(&out.stdout),
                        &String::from_utf8_lossy(&out.stderr)
                    )
                ));
            }
        }
        let out = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", peer.requirement()])
            .output()
            .map_err(|e| format!("pip: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pip install -q {} failed: {}",
                peer.requirement(),
                tail(
                    &String::from_utf8_lossy(&out.stdout),
                    &String::from_utf8_lossy(&out.stderr)
                )
            ));
        }
        if !exe.exists() {
            return Err(format!(
                "pip installed {} but {} is missing",
                peer.requirement(),
                exe.display()
            ));
        }
    }
    let tokenizer_dir = dir.join("wordlevel-tokenizer");
    if !tokenizer_dir.join("tokenizer_config.json").exists() {
        write_tokenizer(&venv, &tokenizer_dir)?;
    }
    let home = dir.join(format!("home-{}", peer.venv()));
    std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
    if peer == Peer::LlamaBenchy {
        write_book(&venv, &home)?;
    }
    Ok(Env {
        exe,
        tokenizer_dir,
        home,
    })
}

/// GuideLLM's venv, provisioned by `scripts/provision-guidellm.sh` (run here when missing): GuideLLM
/// 0.8.1 needs torch, and its venv borrows torch from the provisioned vLLM venv by a `.pth` file (torch
/// from PyPI is the CUDA build, GBs). The error says why it could not be provisioned (no vLLM venv: run
/// scripts/provision-vllm.sh).
fn guidellm_venv() -> Result<PathBuf, String> {
    let kit = servegate::io::guidellm::KIT;
    if kit.python().is_err() {
        eprintln!("bench: provisioning GuideLLM ({}) ...", kit.provision);
        let out = Command::new("bash")
            .arg(kit.provision)
            .output()
            .map_err(|e| format!("{}: {e}", kit.provision))?;
        if !out.status.success() {
            return Err(format!(
                "{} failed: {}",
                kit.provision,
                tail(
                    &String::from_utf8_lossy(&out.stdout),
                    &String::from_utf8_lossy(&out.stderr)
                )
            ));
        }
    }
    let py = kit.python()?;
    // `{venv}/bin/python` -> `{venv}`.
    py.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{}: not a venv's python", py.display()))
}

/// The word-level tokenizer: ` t1` .. ` t5000` one token each (whitespace split), `[UNK]` for anything
/// else; saved with the `tokenizers` package of the peer's venv (every peer here depends on it).
fn write_tokenizer(venv: &Path, out: &Path) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| e.to_string())?;
    let script = format!(
        r###"
import json, os
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
vocab = {{"[UNK]": 0, "<s>": 1, "</s>": 2}}
for i in range(1, 5001):
    vocab["t%d" % i] = i + 2
tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tk.decoder = decoders.WordPiece(prefix="##")
out = {out:?}
tk.save(os.path.join(out, "tokenizer.json"))
json.dump({{"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "bos_token": "<s>", "eos_token": "</s>",
           "model_max_length": 1000000}}, open(os.path.join(out, "tokenizer_config.json"), "w"))
json.dump({{"model_type": "llama"}}, open(os.path.join(out, "config.json"), "w"))
"###,
        out = out.display().to_string()
    );
    run_python(venv, &script, "tokenizer setup")
}

/// Runs `script` with the venv's python; its output's tail in the error when it fails (`<what> failed: …`).
fn run_python(venv: &Path, script: &str, what: &str) -> Result<(), String> {
    let o = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!(
            "{what} failed: {}",
            tail(
                &String::from_utf8_lossy(&o.stdout),
                &String::from_utf8_lossy(&o.stderr)
            )
        ));
    }
    Ok(())
}

/// llama-benchy's prompt corpus, written to its cache (`~/.cache/llama-benchy/<md5 of the URL>.txt`) so
/// that it never downloads its default book: synthetic words the tokenizer knows.
fn write_book(venv: &Path, home: &Path) -> Result<(), String> {
    let script = format!(
        r##"
import hashlib, os
cache = os.path.join({home:?}, ".cache", "llama-benchy")
os.makedirs(cache, exist_ok=True)
with open(os.path.join(cache, hashlib.md5({book:?}.encode()).hexdigest() + ".txt"), "w") as f:
    f.write(" ".join("t%d" % (1 + i % 5000) for i in range(200000)))
"##,
        home = home.display().to_string(),
        book = LB_BOOK_URL
    );
    run_python(venv, &script, "llama-benchy corpus setup")
}

/// The prompts file for the tools that take one: `n` lines of a short user prompt of synthetic words.
fn prompts_file(dir: &Path, n: usize) -> Result<PathBuf, String> {
    let p = dir.join("prompts.jsonl");
    let text: String = (0..n)
        .map(|i| {
            let words: Vec<String> = (1..=32)
                .map(|k| format!("t{}", 1 + (i * 32 + k) % 5000))
                .collect();
            format!("{}\n", json!({"text": words.join(" ")}))
        })
        .collect();
    std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(p)
}

/// The command running `peer` at concurrency `c` for `n` requests against `url`, writing its results
/// under `out`.
fn command(
    peer: Peer,
    env: &Env,
    url: &str,
    case: &LoadCase,
    out: &Path,
) -> Result<Command, String> {
    let (c, n) = (case.concurrency, case.requests);
    let mut cmd = Command::new(&env.exe);
    cmd.env("HOME", &env.home)
        .env("NO_COLOR", "1")
        .current_dir(out);
    if peer != Peer::AiPerf {
        // AIPerf 0.13.0 with HF_HUB_OFFLINE set looks a tokenizer up in the hub cache only and refuses a
        // local path (HFValidationError); without it, an absolute path is loaded with no hub request.
        cmd.env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_OFFLINE", "1")
            .env("HF_DATASETS_OFFLINE", "1");
    }
    match peer {
        Peer::AiPerf => {
            let prompts = prompts_file(out, n)?;
            cmd.args(["profile", "--model", "synthetic", "--url", url])
                .args(["--endpoint-type", "chat", "--streaming"])
                .args(["--concurrency", &c.to_string()])
                .args(["--request-count", &n.to_string()])
                .arg("--tokenizer")
                .arg(&env.tokenizer_dir)
                .arg("--input-file")
                .arg(&prompts)
                .args(["--custom-dataset-type", "single_turn"])
                .args(["--output-tokens-mean", &case.tokens.to_string()])
                .arg("--artifact-dir")
                .arg(out.join("artifacts"))
                .args(["--ui-type", "none"]);
        }
        Peer::GuideLlm => {
            // GuideLLM 0.8 takes its settings as a scenario file (`run -c FILE`).
            let scenario = json!({"spec": {
                "backend": {"kind": "openai_http", "target": url, "model": "synthetic", "request_format": "/v1/chat/completions"},
                "profile": {"kind": "concurrent", "streams": [c]},
                "constraints": [{"kind": "max_requests", "count": n}],
                "tokenizer": {"kind": "huggingface_auto", "model": env.tokenizer_dir},
                "data": [{"kind": "synthetic_text", "prompt_tokens": 32, "output_tokens": case.tokens}],
                "outputs": [{"kind": "json", "path": out.join("guidellm.json")}],
            }});
            let file = out.join("guidellm-scenario.json");
            std::fs::write(&file, scenario.to_string())
                .map_err(|e| format!("{}: {e}", file.display()))?;
            cmd.args(["-m", "guidellm", "run", "-c"])
                .arg(&file)
                .arg("--disable-console-interactive");
        }
        Peer::LlamaBenchy => {
            // Batches of `c` concurrent requests (`--concurrency c`), `--runs` batches: n = runs × c.
            let runs = n.div_ceil(c.max(1));
            cmd.args([
                "--base-url",
                &format!("{url}/v1"),
                "--model",
                "synthetic",
                "--tokenizer",
            ])
            .arg(&env.tokenizer_dir)
            .args(["--pp", "32", "--tg", &case.tokens.to_string()])
            .args(["--concurrency", &c.to_string(), "--runs", &runs.to_string()])
            .args([
                "--latency-mode",
                "none",
                "--no-warmup",
                "--skip-coherence",
                "--no-adapt-prompt",
            ])
            .args([
                "--book-url",
                LB_BOOK_URL,
                "--format",
                "json",
                "--save-result",
            ])
            .arg(out.join("llama-benchy.json"));
        }
    }
    Ok(cmd)
}

/// Reads what `peer` reported from its output files under `out`: llama-benchy's figures; None for the
/// tools whose figures come from the parity gate mode (their run here is for its CPU).
fn reported(peer: Peer, out: &Path) -> Result<Option<Reported>, String> {
    match peer {
        Peer::AiPerf | Peer::GuideLlm => Ok(None),
        Peer::LlamaBenchy => {
            let v = read_json(&out.join("llama-benchy.json"))?;
            Ok(Some(llama_benchy_reported(&v)))
        }
    }
}

/// llama-benchy 0.4.0's JSON result has no percentiles: per request `benchmarks[0].e2e_ttft.values`
/// (ms, request start → first token) and `benchmarks[0].tg_req_throughput.values` (tok/s, tokens after
/// the first ÷ (last token − first token)). The percentiles here are numpy-linear over those values, and
/// TPOT = 1000 / that rate.
pub fn llama_benchy_reported(v: &Value) -> Reported {
    let vals = |key: &str| -> Vec<f64> {
        v["benchmarks"][0][key]["values"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default()
    };
    let ttft = vals("e2e_ttft");
    let tpot: Vec<f64> = vals("tg_req_throughput")
        .into_iter()
        .filter(|r| *r > 0.0)
        .map(|r| 1000.0 / r)
        .collect();
    let q = |v: &[f64]| [50.0, 95.0, 99.0].map(|p| stats::percentile(v, p));
    Reported {
        ttft: q(&ttft),
        tpot: q(&tpot),
        ok: Some(ttft.len() as u64),
        failed: None,
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let t = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&t).map_err(|e| format!("{}: {e}", path.display()))
}

/// One point's result for one tool.
#[derive(Debug, Default, Clone)]
struct Point {
    c: usize,
    n: usize,
    reported: Option<Reported>,
    truth: Truth,
    cpu_s: Option<f64>,
    wall_s: Option<f64>,
    note: Option<String>,
}

impl Point {
    /// Tool − truth at p50, p95, p99 for TTFT and TPOT.
    fn errors(&self) -> ([Option<f64>; 3], [Option<f64>; 3]) {
        let mut t = [None; 3];
        let mut d = [None; 3];
        if let Some(r) = &self.reported {
            for (i, q) in [50.0, 95.0, 99.0].iter().enumerate() {
                t[i] = r.ttft[i]
                    .zip(stats::percentile(&self.truth.ttft_ms, *q))
                    .map(|(a, b)| a - b);
                d[i] = r.tpot[i]
                    .zip(stats::percentile(&self.truth.tpot_ms, *q))
                    .map(|(a, b)| a - b);
            }
        }
        (t, d)
    }

    fn cpu_us_per_token(&self) -> Option<f64> {
        let tok = self.truth.tokens;
        self.cpu_s.filter(|_| tok > 0).map(|c| c * 1e6 / tok as f64)
    }

    fn to_json(&self) -> Value {
        let (te, de) = self.errors();
        let q = |v: &[f64]| json!({"p50": stats::percentile(v, 50.0), "p95": stats::percentile(v, 95.0), "p99": stats::percentile(v, 99.0)});
        json!({
            "concurrency": self.c, "requests": self.n,
            "reported": self.reported.as_ref().map(|r| json!({"ttft_ms": r.ttft, "tpot_ms": r.tpot, "ok": r.ok, "failed": r.failed})),
            "truth": {"ttft_ms": q(&self.truth.ttft_ms), "tpot_ms": q(&self.truth.tpot_ms), "requests": self.truth.ttft_ms.len(), "tokens_streamed": self.truth.tokens},
            "ttft_error_ms": {"p50": te[0], "p95": te[1], "p99": te[2]},
            "tpot_error_ms": {"p50": de[0], "p95": de[1], "p99": de[2]},
            "cpu_s_whole_process": self.cpu_s, "cpu_us_per_token_upper_bound": self.cpu_us_per_token(), "wall_s": self.wall_s,
            "note": self.note,
        })
    }
}

/// Runs `peer` at one point: a fresh synthetic serve, the tool as a pinned child, its report and the
/// serve's truth.
fn run_point(peer: Peer, env: &Env, case: &LoadCase, dir: &Path) -> Point {
    let (c, n) = (case.concurrency, case.requests);
    let mut pt = Point {
        c,
        n,
        ..Default::default()
    };
    let out = dir.join(format!("{}-c{c}", peer.venv()));
    let _ = std::fs::remove_dir_all(&out);
    // Absolute: the tool runs in this directory and is given paths in it.
    let out = match std::fs::create_dir_all(&out).and_then(|()| std::fs::canonicalize(&out)) {
        Ok(o) => o,
        Err(e) => {
            pt.note = Some(e.to_string());
            return pt;
        }
    };
    let log = out.join("timing.jsonl");
    let synth = match Synth::start(&case.serve_args(), &log) {
        Ok(s) => s,
        Err(e) => {
            pt.note = Some(e);
            return pt;
        }
    };
    let mut cmd = match command(peer, env, &synth.url, case, &out) {
        Ok(c) => c,
        Err(e) => {
            pt.note = Some(e);
            return pt;
        }
    };
    if cpus() >= 2 {
        pin_command(&mut cmd, 1);
    }
    let stdout = std::fs::File::create(out.join("stdout.log")).map(Stdio::from);
    let stderr = std::fs::File::create(out.join("stderr.log")).map(Stdio::from);
    cmd.stdin(Stdio::null())
        .stdout(stdout.unwrap_or_else(|_| Stdio::null()))
        .stderr(stderr.unwrap_or_else(|_| Stdio::null()));
    let t0 = std::time::Instant::now();
    let mut child = match cmd.spawn() {
        Ok(ch) => ch,
        Err(e) => {
            pt.note = Some(format!("{}: {e}", env.exe.display()));
            return pt;
        }
    };
    let (code, cpu, _rss) = wait_rusage(&mut child);
    pt.wall_s = Some(t0.elapsed().as_secs_f64());
    pt.cpu_s = Some(cpu);
    let lines = synth.requests();
    drop(synth);
    pt.truth = truth_of(&lines, n);
    if code != 0 {
        let so = std::fs::read_to_string(out.join("stdout.log")).unwrap_or_default();
        let se = std::fs::read_to_string(out.join("stderr.log")).unwrap_or_default();
        pt.note = Some(format!("exit {code}: {}", tail(&so, &se)));
    }
    match reported(peer, &out) {
        Ok(r) => pt.reported = r,
        Err(e) => {
            pt.note = Some(match pt.note.take() {
                Some(n) => format!("{n}; {e}"),
                None => e,
            })
        }
    }
    pt
}

/// The last four non-empty lines of a child's stdout and stderr, joined.
fn tail(a: &str, b: &str) -> String {
    let all = format!("{a}\n{b}");
    let lines: Vec<&str> = all.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(4)..].join(" | ")
}

/// servegate's load client (`io::load_client::run`, closed loop) at one point, on this thread (pinned to
/// CPU 1 by `bench-self`): its TTFT and TPOT per request (`analysis::measure`, the load gate's figures),
/// percentiles numpy-linear as the load gate computes them; CPU = this thread's (`RUSAGE_THREAD`), the
/// runtime's only thread.
fn run_servegate_point(case: &LoadCase, dir: &Path) -> Point {
    use servegate::io::load_client::{self, Schedule, Target};
    let (c, n) = (case.concurrency, case.requests);
    let mut pt = Point {
        c,
        n,
        ..Default::default()
    };
    let out = dir.join(format!("servegate-c{c}"));
    let _ = std::fs::create_dir_all(&out);
    let synth = match Synth::start(&case.serve_args(), &out.join("timing.jsonl")) {
        Ok(s) => s,
        Err(e) => {
            pt.note = Some(e);
            return pt;
        }
    };
    let target = match Target::parse(&synth.url, None) {
        Ok(t) => t,
        Err(e) => {
            pt.note = Some(e);
            return pt;
        }
    };
    let body = serde_json::to_vec(&case.body()).unwrap_or_default();
    let cpu0 = cpu_s_thread();
    let t0 = std::time::Instant::now();
    let res = load_client::run(
        &target,
        vec![body; n],
        &Schedule::Closed {
            concurrency: c as u32,
        },
        None,
        std::time::Duration::from_secs(120),
    );
    pt.wall_s = Some(t0.elapsed().as_secs_f64());
    pt.cpu_s = Some(cpu_s_thread() - cpu0);
    let exchanges = match res {
        Ok(x) => x,
        Err(e) => {
            pt.note = Some(e);
            return pt;
        }
    };
    let lines = synth.wait_requests(n);
    drop(synth);
    pt.truth = truth_of(&lines, n);
    let (mut ttft, mut tpot, mut ok, mut failed) = (Vec::new(), Vec::new(), 0u64, 0u64);
    for (i, x) in exchanges.iter().enumerate() {
        let rec = servegate::evidence::RequestRecord {
            index: i,
            stream: true,
            http_status: x.exchange.response.status,
            transport_error: x.exchange.response.transport_error.clone(),
            ..Default::default()
        };
        let reply = servegate::analysis::reply_of(&rec, &x.exchange.reads);
        let fig = servegate::analysis::measure::measure(&reply);
        if fig.failed.is_some() || rec.transport_error.is_some() {
            failed += 1;
            continue;
        }
        ok += 1;
        ttft.extend(fig.ttft_ms);
        tpot.extend(fig.tpot_ms);
    }
    let q = |v: &[f64]| [50.0, 95.0, 99.0].map(|p| stats::percentile(v, p));
    pt.reported = Some(Reported {
        ttft: q(&ttft),
        tpot: q(&tpot),
        ok: Some(ok),
        failed: Some(failed),
    });
    pt
}

fn f(x: Option<f64>, d: usize) -> String {
    x.map(|x| format!("{x:+.d$}")).unwrap_or_else(|| "-".into())
}

/// One table row: tool, concurrency, ok / failed, TTFT and TPOT errors at p50 / p95 / p99, CPU, wall.
/// `elsewhere`: the tool's latency figures are the parity gate table's (the columns say so).
fn row(tool: &str, pt: &Point, elsewhere: bool) -> String {
    let (te, de) = pt.errors();
    let n = |x: Option<u64>| x.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    let okf = pt
        .reported
        .as_ref()
        .map(|r| format!("{} / {}", n(r.ok), n(r.failed)))
        .unwrap_or_else(|| "-".into());
    let err = |e: [Option<f64>; 3], d: usize| {
        if elsewhere {
            "parity gate table".to_string()
        } else {
            format!("{} / {} / {}", f(e[0], d), f(e[1], d), f(e[2], d))
        }
    };
    format!(
        "| {tool} | {} | {okf} of {} | {} | {} | {} | {} |{}",
        pt.c,
        pt.n,
        err(te, 2),
        err(de, 3),
        pt.cpu_us_per_token()
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "-".into()),
        pt.wall_s
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "-".into()),
        pt.note
            .as_ref()
            .map(|n| format!(" <!-- {} -->", n.replace("--", "- -")))
            .unwrap_or_default()
    )
}

/// The section: every peer at every concurrency of `streams` (all when empty), a Markdown table into
/// `report` (CPU per token of each tool run alone; llama-benchy's and servegate's client's errors against
/// the timing log), then the parity gate table (`bench_peers_parity`); every figure as JSON.
pub fn section(streams: &[usize], report: &mut Vec<String>) -> Value {
    eprintln!("bench: load, side by side with peers ...");
    let dir = workdir().join("load-peers");
    let _ = std::fs::create_dir_all(&dir);
    let cases: Vec<LoadCase> = load_schedules()
        .into_iter()
        .filter(|c| streams.is_empty() || streams.contains(&c.concurrency))
        .collect();
    let Some(first) = cases.first().copied() else {
        return json!({"error": "no load schedule"});
    };
    report.push(format!("## Load: side by side with peers (closed loop, synthetic serve, {} tokens per reply, {:.3} tok/s per stream)\n", first.tokens, 1000.0 / first.itl_ms));
    report.push(format!(
        "load average at the start: {:?}\n",
        servegate::evidence::load_avg()
    ));
    report.push(
        "### Each tool run alone: CPU per token; llama-benchy's errors (no parity driver)\n".into(),
    );
    report.push("Error = the client's percentile (llama-benchy: numpy linear over its per-request values) − the same percentile (numpy linear) of the serve's true per-request values (its timing log) over the requests it measured; AIPerf's and GuideLLM's latency: the parity gate table below. CPU = the whole tool process tree (`wait4`), start-up included, per token streamed to it: an upper bound.\n".into());
    report.push("| tool | concurrency | requests ok / failed (tool) | TTFT error p50 / p95 / p99 ms | TPOT error p50 / p95 / p99 ms | µs CPU per token (peers: upper bound) | wall s |\n|---|---|---|---|---|---|---|".into());
    let mut tools = serde_json::Map::new();
    let mut pts = Vec::new();
    for case in &cases {
        eprintln!(
            "bench: servegate's load client at concurrency {} ...",
            case.concurrency
        );
        let pt = run_servegate_point(case, &dir);
        report.push(row("servegate (load client)", &pt, false));
        pts.push(pt.to_json());
    }
    tools.insert(
        "servegate (load client)".into(),
        json!({"metric_names": "ttft = TTFT from the send; tpot = (E2E − TTFT) / (N − 1) (docs/load.md); CPU = the client thread's (RUSAGE_THREAD), not an upper bound", "points": pts}),
    );
    for peer in PEERS {
        let env = match setup(peer) {
            Ok(e) => e,
            Err(e) => {
                report.push(format!(
                    "| {} | - | not run: {} | | | | |",
                    peer.name(),
                    e.replace('|', "/")
                ));
                tools.insert(peer.name().into(), json!({"error": e}));
                continue;
            }
        };
        let mut pts = Vec::new();
        for case in &cases {
            let c = case.concurrency;
            eprintln!("bench: {} at concurrency {c} ...", peer.name());
            let pt = run_point(peer, &env, case, &dir);
            report.push(row(peer.name(), &pt, peer != Peer::LlamaBenchy));
            pts.push(pt.to_json());
        }
        tools.insert(
            peer.name().into(),
            json!({"metric_names": peer.metric_names(), "points": pts}),
        );
    }
    report.push(String::new());
    tools.insert(
        "parity_gate".into(),
        crate::bench_peers_parity::section(&cases, &dir, report),
    );
    Value::Object(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(arrived: u64, sends: &[(&str, u64, f64)]) -> Value {
        let s: Vec<Value> = sends
            .iter()
            .map(|(k, t, ms)| json!({"kind": k, "tokens": t, "sent_ms": ms}))
            .collect();
        json!({"request": arrived, "stream": true, "status": 200, "arrived_mono_ns": arrived, "sends": s})
    }

    #[test]
    fn truth_takes_the_last_n_by_arrival_and_counts_every_token() {
        let lines = vec![
            line(
                30,
                &[
                    ("token", 1, 21.0),
                    ("token", 1, 31.0),
                    ("token", 1, 41.0),
                    ("done", 0, 41.0),
                ],
            ),
            line(10, &[("token", 1, 50.0), ("token", 1, 60.0)]),
            line(20, &[("token", 2, 25.0), ("token", 1, 45.0)]),
        ];
        let t = truth_of(&lines, 2);
        assert_eq!(t.ttft_ms, vec![25.0, 21.0]);
        assert_eq!(t.tpot_ms, vec![10.0, 10.0]);
        assert_eq!(t.tokens, 8);
    }

    #[test]
    fn llama_benchy_percentiles_come_from_its_per_request_values() {
        let v = json!({"benchmarks": [{"e2e_ttft": {"values": [30.0, 10.0, 20.0]}, "tg_req_throughput": {"values": [100.0, 50.0, 0.0]}}]});
        let r = llama_benchy_reported(&v);
        assert_eq!(r.ttft[0], Some(20.0));
        assert_eq!(r.ttft[1], Some(29.0), "numpy linear: 20 + 0.9 × 10");
        assert_eq!(r.tpot[0], Some(15.0), "1000 / rate, a zero rate left out");
        assert_eq!(r.ok, Some(3));
    }
}
