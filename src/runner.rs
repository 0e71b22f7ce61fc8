//! The runner: one live run of a gate. Starts (or reaches) the serve, sends the requests, stops the serve and
//! writes the evidence; then judging reads the evidence back. The only module that sequences I/O; it measures
//! and judges nothing itself.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::client;
use crate::error::{exit, EvidenceError};
use crate::evidence::{self, EvidenceWriter, RequestRecord, RunStatus, RunSummary, ServeRecord};
use crate::judge::{self, Verdict};
use crate::serve;
use crate::spec::{GateSpec, ServeMode};

/// Where run directories go: `$SERVEGATE_RUNS`, default `target/servegate/runs` under the current directory.
pub fn runs_root() -> PathBuf {
    match std::env::var_os("SERVEGATE_RUNS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from("target/servegate/runs"),
    }
}

/// The result of a live run: where its evidence is and what the judge said.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run directory.
    pub dir: PathBuf,
    /// The summary as written.
    pub summary: RunSummary,
    /// One verdict per declared assertion.
    pub verdicts: Vec<Verdict>,
}

impl RunOutcome {
    /// Exit code for this run: PASS, ASSERTION_FAILED, or SERVE_NOT_READY when the serve never answered.
    pub fn exit_code(&self) -> i32 {
        if self.verdicts.iter().all(|v| v.passed()) {
            exit::PASS
        } else if self.summary.serve.failure.is_some() && self.summary.requests.is_empty() {
            exit::SERVE_NOT_READY
        } else {
            exit::ASSERTION_FAILED
        }
    }
}

/// Runs `gate` live, writing evidence under `root`, then judges it. `progress` receives one-line notes
/// (`serve ready after 1.2 s`), for a terminal.
pub fn run(gate: &GateSpec, root: &Path, progress: &mut dyn FnMut(&str)) -> Result<RunOutcome, EvidenceError> {
    let signals_note = crate::signals::install().err().map(|e| format!("signal handlers not installed: {e}"));
    let w = EvidenceWriter::create(root, &gate.name, &evidence::stamp_utc())?;
    w.write("gate.toml", gate.source.as_bytes())?;
    let mut summary = RunSummary {
        schema: evidence::RUN_SCHEMA.into(),
        status: RunStatus::Running,
        gate: gate.name.clone(),
        gate_file: gate.file.display().to_string(),
        started_utc: evidence::now_utc(),
        ended_utc: None,
        host: evidence::host_info(),
        load_avg_start: evidence::load_avg(),
        load_avg_end: None,
        servegate_version: env!("CARGO_PKG_VERSION").into(),
        serve: ServeRecord::default(),
        requests: Vec::new(),
        notes: signals_note.into_iter().collect(),
    };
    w.write_summary(&summary)?;
    progress(&format!("evidence: {}", w.dir().display()));

    let result = drive(gate, &w, &mut summary, progress);
    summary.ended_utc = Some(evidence::now_utc());
    summary.load_avg_end = evidence::load_avg();
    if let Err(e) = &result {
        summary.notes.push(format!("runner error: {e}"));
    }
    summary.status = RunStatus::Complete;
    w.write_summary(&summary)?;
    result?;

    let ev = evidence::load(w.dir())?;
    let verdicts = judge::judge(gate, &ev);
    Ok(RunOutcome { dir: w.dir().to_path_buf(), summary, verdicts })
}

fn fill_runtime(s: &str, host: &str, port: u16) -> String {
    s.replace("{port}", &port.to_string()).replace("{host}", host)
}

fn drive(gate: &GateSpec, w: &EvidenceWriter, summary: &mut RunSummary, progress: &mut dyn FnMut(&str)) -> Result<(), EvidenceError> {
    let spec = &gate.serve;
    // Setup (idempotent provisioning).
    if !spec.setup.is_empty() {
        progress(&format!("setup: {}", spec.setup.join(" ")));
        let t = Instant::now();
        match run_setup(&spec.setup, &spec.env, &w.path("setup.log")) {
            Ok(status) => summary.serve.setup = Some(format!("{status} in {:.1} s", t.elapsed().as_secs_f64())),
            Err(reason) => {
                summary.serve.setup = Some(reason.clone());
                summary.serve.failure = Some(format!("setup_failed: {reason}"));
                progress(&format!("setup failed: {reason}"));
                return Ok(());
            }
        }
    }

    let http = match client::http_client(Duration::from_secs_f64(gate.request.timeout_s), None) {
        Ok(c) => c,
        Err(e) => {
            summary.serve.failure = Some(format!("http_client: {e}"));
            return Ok(());
        }
    };

    let mut started: Option<serve::Serve> = None;
    let base_url;
    match &spec.mode {
        ServeMode::Command(argv) => {
            let port = if spec.port == 0 {
                match crate::port::free_port(&spec.host) {
                    Ok(p) => p,
                    Err(e) => {
                        summary.serve.failure = Some(format!("no_free_port: {e}"));
                        return Ok(());
                    }
                }
            } else {
                spec.port
            };
            let command: Vec<String> = argv.iter().map(|a| fill_runtime(a, &spec.host, port)).collect();
            let env: Vec<(String, String)> = spec.env.iter().map(|(k, v)| (k.clone(), fill_runtime(v, &spec.host, port))).collect();
            summary.serve.mode = "command".into();
            summary.serve.command = command.clone();
            summary.serve.base_url = format!("http://{}:{port}", url_host(&spec.host));
            w.write_summary(summary)?;
            let sspec = serve::ServeSpec {
                command,
                env,
                cwd: None,
                host: spec.host.clone(),
                port,
                ready_path: spec.ready_path.clone(),
                ready_timeout: Duration::from_secs_f64(spec.ready_timeout_s),
                poll_interval: Duration::from_millis(25),
                stop_grace: Duration::from_secs_f64(spec.stop_grace_s),
                log_path: w.path("serve.log"),
            };
            progress(&format!("starting serve on port {port}: {}", summary.serve.command.join(" ")));
            let mut s = match serve::Serve::start(sspec) {
                Ok(s) => s,
                Err(e) => {
                    summary.serve.failure = Some(e.to_string());
                    progress(&format!("serve failed to start: {e}"));
                    return Ok(());
                }
            };
            summary.serve.pid = Some(s.pid());
            match s.wait_ready() {
                Ok(info) => {
                    summary.serve.ready_ms = Some(info.ready_ms);
                    summary.serve.ready_timeline = info.statuses.clone();
                    progress(&format!("serve ready after {:.2} s ({} polls)", info.ready_ms / 1000.0, info.polls));
                }
                Err(e) => {
                    summary.serve.failure = Some(e.to_string());
                    progress(&format!("serve never became ready: {e}"));
                    let stop = s.stop();
                    summary.serve.stop = Some(describe_stop(&stop));
                    return Ok(());
                }
            }
            base_url = s.base_url();
            started = Some(s);
        }
        ServeMode::Url(url) => {
            summary.serve.mode = "url".into();
            summary.serve.base_url = url.clone();
            base_url = url.clone();
            let t = Instant::now();
            let deadline = Duration::from_secs_f64(spec.ready_timeout_s);
            loop {
                let last = match client::get(&http, url, &spec.ready_path, Duration::from_secs(5)) {
                    Ok((200, _)) => {
                        summary.serve.ready_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
                        break;
                    }
                    Ok((status, _)) => format!("HTTP {status}"),
                    Err(e) => e,
                };
                if t.elapsed() >= deadline {
                    summary.serve.failure = Some(format!("ready_timeout: {url}{} not 200 within {} s (last: {last})", spec.ready_path, spec.ready_timeout_s));
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    // What the serve says about itself.
    let (version, models) = serve_identity(&http, &base_url);
    summary.serve.version = version;
    summary.serve.models = models;
    if let Some(expect) = &spec.expect_model {
        if !summary.serve.models.iter().any(|m| m.contains(expect.as_str())) {
            summary.serve.failure = Some(format!(
                "wrong_server_answering: /v1/models lists {:?}, expected a model containing {expect:?}",
                summary.serve.models
            ));
        }
    }
    w.write_summary(summary)?;

    if summary.serve.failure.is_none() {
        send_all(gate, w, summary, &http, &base_url, started.as_mut(), progress)?;
    }

    if let Some(s) = started {
        let stop = s.stop();
        summary.serve.stop = Some(describe_stop(&stop));
        progress(&format!("serve stopped: {}", describe_stop(&stop)));
    }
    if let Some(log) = &spec.log_file {
        match std::fs::read(log) {
            Ok(bytes) => w.write("serve.log", &bytes)?,
            Err(e) => summary.notes.push(format!("serve.log_file {}: {e}", log.display())),
        }
    }
    Ok(())
}

fn send_all(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    http: &reqwest::blocking::Client,
    base_url: &str,
    mut serve: Option<&mut serve::Serve>,
    progress: &mut dyn FnMut(&str),
) -> Result<(), EvidenceError> {
    let req = &gate.request;
    let mut plan: Vec<(bool, u32, usize)> = Vec::new();
    for round in 0..req.warmup {
        for p in 0..req.prompts.len() {
            plan.push((true, round, p));
        }
    }
    for round in 0..req.repeats {
        for p in 0..req.prompts.len() {
            plan.push((false, round, p));
        }
    }
    for (index, (warmup, repeat, prompt_index)) in plan.into_iter().enumerate() {
        let prompt = &req.prompts[prompt_index];
        let body = client::request_body(req, prompt);
        let sent_utc = evidence::now_utc();
        let ex = client::send(http, base_url, &body);
        w.write_request(index, &body, &ex.response, &ex.reads)?;
        let mut rec = RequestRecord {
            index,
            warmup,
            prompt_index,
            repeat,
            prompt: prompt.clone(),
            stream: req.stream,
            sent_utc,
            http_status: ex.response.status,
            transport_error: ex.response.transport_error.clone(),
            body_bytes: ex.body_bytes,
            body_truncated: ex.body_truncated,
            figures: None,
        };
        let reply = evidence::reply_of(&rec, &ex.reads);
        let fig = crate::measure::measure(&reply);
        progress(&format!(
            "request {index:02}{}: {} ttft {} decode {} tokens {}",
            if warmup { " (warmup)" } else { "" },
            ex.response.status.map(|s| format!("HTTP {s}")).unwrap_or_else(|| ex.response.transport_error.clone().unwrap_or_default()),
            fig.ttft_ms.map(|t| format!("{t:.0} ms")).unwrap_or_else(|| "-".into()),
            fig.decode_tok_s.map(|t| format!("{t:.1} tok/s")).unwrap_or_else(|| "-".into()),
            fig.completion_tokens.map(|t| t.to_string()).unwrap_or_else(|| "-".into()),
        ));
        rec.figures = Some(fig);
        summary.requests.push(rec);
        w.write_summary(summary)?;
        if let Some(s) = serve.as_deref_mut() {
            if let Err(e) = s.check_alive() {
                summary.serve.failure = Some(e.to_string());
                progress(&format!("serve died: {e}"));
                break;
            }
        }
    }
    Ok(())
}

fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn describe_stop(stop: &serve::StopReport) -> String {
    let mut s = stop.exit.clone().unwrap_or_else(|| "unknown exit".into());
    if stop.already_exited {
        s.push_str(" (had already exited)");
    }
    if stop.escalated_to_kill {
        s.push_str(" (did not stop on SIGTERM: killed)");
    }
    s.push_str(&format!(" after {:.0} ms", stop.stop_ms));
    s
}

/// The serve's version and model ids, best effort: llama.cpp's `/props` `build_info`, `/v1/models` ids.
fn serve_identity(http: &reqwest::blocking::Client, base_url: &str) -> (Option<String>, Vec<String>) {
    let t = Duration::from_secs(5);
    let version = client::get(http, base_url, "/props", t).ok().filter(|(s, _)| *s == 200).and_then(|(_, body)| {
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v.get("build_info").and_then(|b| b.as_str()).map(|s| format!("llama.cpp {s}"))
    });
    let models = client::get(http, base_url, "/v1/models", t)
        .ok()
        .filter(|(s, _)| *s == 200)
        .and_then(|(_, body)| {
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            Some(v.get("data")?.as_array()?.iter().filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(String::from)).collect())
        })
        .unwrap_or_default();
    (version, models)
}

/// Runs the setup argv with `env`, its output going to `log`; Ok(status text) or Err(reason with the tail).
fn run_setup(argv: &[String], env: &std::collections::BTreeMap<String, String>, log: &Path) -> Result<String, String> {
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .envs(env)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot run {:?}: {e}", argv[0]))?;
    if status.success() {
        Ok(status.to_string())
    } else {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(10).collect::<Vec<_>>().into_iter().rev().collect();
        Err(format!("{} ({status}); last lines of setup.log:\n{}", argv.join(" "), tail.join("\n")))
    }
}
