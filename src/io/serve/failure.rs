//! What a failed serve says: [`ServeError`] (each message starts with its kind), the tail of the serve's log
//! ([`tail_file`]) and the log line naming the cause ([`cause_line`]).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::io::client::one_line;

/// Why a serve could not be started, did not become ready, or died. Each message starts with a stable
/// snake_case kind ([`ServeError::kind`]).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The spec cannot be used (empty command, port 0, bad host or path, zero poll interval).
    #[error("invalid_spec: {reason}")]
    InvalidSpec {
        /// What is wrong, naming the field.
        reason: String,
    },
    /// Something already holds `host:port`; nothing was spawned.
    #[error("port_in_use: {addr}{}", .pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    PortInUse {
        /// `host:port`.
        addr: String,
        /// The owning process, when `/proc` tells.
        pid: Option<u32>,
    },
    /// The log file could not be opened; nothing was spawned.
    #[error("log_open_failed: {}: {source}", .path.display())]
    LogOpen {
        /// The log path from the spec.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The command could not be started (not found, not executable, ...).
    #[error("spawn_failed: {command}: {source}")]
    Spawn {
        /// The command line, space-joined.
        command: String,
        /// The OS error.
        source: io::Error,
    },
    /// The serve exited while the readiness wait was still going on.
    #[error("server_exited_before_ready ({status}, {:.1} s after spawn){}", .ready_ms_elapsed / 1000.0, colon(.cause_line))]
    ExitedBeforeReady {
        /// `exit status N` or `signal N`.
        status: String,
        /// From spawn to the exit, in ms.
        ready_ms_elapsed: f64,
        /// The log line that most likely says why (e.g. `couldn't bind HTTP server socket ...`).
        cause_line: Option<String>,
        /// The last [`ERROR_TAIL_LINES`] lines of the log.
        log_tail: String,
    },
    /// No 200 on the readiness URL within `ready_timeout` (counted from spawn). The serve is still
    /// running; stop or drop it.
    #[error("ready_timeout: no 200 from {url} within {timeout_s:.1} s (last: {last_status}; {polls} polls)")]
    ReadyTimeout {
        /// The readiness URL.
        url: String,
        /// The deadline, in s.
        timeout_s: f64,
        /// The last probe's outcome, e.g. `503 {"error":{"code":503,"message":"Loading model",...}}`.
        last_status: String,
        /// Probes sent.
        polls: u32,
        /// The last [`ERROR_TAIL_LINES`] lines of the log.
        log_tail: String,
    },
    /// The readiness path answered 404 on every probe for [`STEADY_404_MS`] (at least
    /// [`STEADY_404_POLLS`] probes): the serve is up and has no such route, so waiting out `ready_timeout`
    /// would only delay the same answer. Its kind is `ready_timeout` (the serve never became ready).
    #[error("ready_timeout: {url} answered 404 on {polls} probes over {steady_s:.1} s: the serve is up but has no such path; stopped waiting early. Set [serve] ready to a path it has (llama-cpp-python has no /health: ready = \"/v1/models\"; or [serve] engine, docs/runtimes.md)")]
    ReadyNotFound {
        /// The readiness URL.
        url: String,
        /// Consecutive 404 probes.
        polls: u32,
        /// From the first of them to the last, in s.
        steady_s: f64,
        /// The last [`ERROR_TAIL_LINES`] lines of the log.
        log_tail: String,
    },
    /// The serve exited after it had been ready (or within one poll of its first 200).
    #[error("server_exited_during_run ({status}, {after_ready_s:.1} s after ready){}", colon(.cause_line))]
    ExitedAfterReady {
        /// `exit status N` or `signal N`.
        status: String,
        /// From readiness to the exit, in s.
        after_ready_s: f64,
        /// The log line that most likely says why.
        cause_line: Option<String>,
        /// The last [`ERROR_TAIL_LINES`] lines of the log.
        log_tail: String,
    },
    /// The readiness probe's HTTP client could not be built (TLS backend); nothing was spawned.
    #[error("probe_client_failed: {reason}")]
    ProbeClient {
        /// The client builder's error chain.
        reason: String,
    },
    /// The runner is handling a termination signal; the serve was not started (or was killed at once).
    #[error("shutting_down: the runner received a termination signal")]
    ShuttingDown,
}

fn colon(line: &Option<String>) -> String {
    line.as_ref().map(|l| format!(": {l}")).unwrap_or_default()
}

impl ServeError {
    /// The stable snake_case kind that starts the message, e.g. `port_in_use`, `ready_timeout`.
    pub fn kind(&self) -> &'static str {
        match self {
            ServeError::InvalidSpec { .. } => "invalid_spec",
            ServeError::PortInUse { .. } => "port_in_use",
            ServeError::LogOpen { .. } => "log_open_failed",
            ServeError::Spawn { .. } => "spawn_failed",
            ServeError::ExitedBeforeReady { .. } => "server_exited_before_ready",
            ServeError::ReadyTimeout { .. } | ServeError::ReadyNotFound { .. } => "ready_timeout",
            ServeError::ExitedAfterReady { .. } => "server_exited_during_run",
            ServeError::ProbeClient { .. } => "probe_client_failed",
            ServeError::ShuttingDown => "shutting_down",
        }
    }

    /// The serve's last log lines attached to the error, if any.
    pub(crate) fn log_tail(&self) -> Option<&str> {
        match self {
            ServeError::ExitedBeforeReady { log_tail, .. }
            | ServeError::ReadyTimeout { log_tail, .. }
            | ServeError::ReadyNotFound { log_tail, .. }
            | ServeError::ExitedAfterReady { log_tail, .. } => Some(log_tail),
            _ => None,
        }
    }
}

/// The last `lines` lines of the file at `path` (lossy UTF-8; reads at most the last 64 KiB, so a first
/// line may be partial). Empty when `lines` is 0 or the file cannot be read.
pub fn tail_file(path: &Path, lines: usize) -> String {
    const MAX_BYTES: u64 = 64 * 1024;
    if lines == 0 {
        return String::new();
    }
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(MAX_BYTES);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    if f.take(MAX_BYTES).read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Phrases that say why a serve died, in tiers of decreasing specificity: first the serve's own
/// report that it could not listen (llama.cpp's `couldn't bind HTTP server socket`), then the OS's
/// words for it, then generic failures. Within a tier the last matching line wins.
const CAUSE_TIERS: &[&[&str]] = &[
    &[
        "couldn't bind",
        "could not bind",
        "failed to bind",
        "bind failed",
        "unable to bind",
    ],
    &["address already in use", "eaddrinuse"],
    &[
        "error",
        "fatal",
        "failed",
        "panic",
        "exception",
        "abort",
        "out of memory",
        "segmentation fault",
        "killed",
        "cannot",
        "can't",
        "unable",
        "refused",
    ],
];

/// Lines that say only *that* a serve failed or is going away, or show where (tail noise: uvicorn's
/// `ERROR:    Application startup failed. Exiting.`, a Python traceback's frames and headers): a generic
/// failure word in one of them does not make it the cause while another failure line says more.
const TAIL_NOISE: &[&str] = &[
    "application startup failed",
    "waiting for application shutdown",
    "application shutdown complete",
    "shutting down",
    "exiting",
    "traceback (most recent call last)",
    "during handling of the above exception",
    "the above exception was the direct cause",
];

/// True for a tail-noise line ([`TAIL_NOISE`], a traceback frame `File "...", line N`, a `raise X(` source
/// line, a `^^^^` marker line). `lowered` is the trimmed line in lower case.
fn tail_noise(lowered: &str) -> bool {
    TAIL_NOISE.iter().any(|p| lowered.contains(p))
        || lowered.starts_with("file \"")
        || lowered.starts_with("raise ")
        || (!lowered.is_empty() && lowered.chars().all(|c| c == '^' || c == '~'))
}

/// The log line that most likely says why the serve died, case-insensitively: the last line naming a
/// failure to bind (`couldn't bind`, `failed to bind`, ...), else the last naming the OS's reason
/// (`address already in use`), else the last naming a generic failure (`error`, `fatal`, `panic`,
/// `refused`, ...) that is not tail noise ([`tail_noise`]: litellm's cause, `... no master key is set ...`,
/// not uvicorn's `Application startup failed. Exiting.` after it), else the last generic-failure line,
/// else the last non-empty line; collapsed to one line of at most 300 chars. `None` for an empty log.
pub fn cause_line(log_tail: &str) -> Option<String> {
    let lines: Vec<&str> = log_tail
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let lowered: Vec<String> = lines.iter().map(|l| l.to_lowercase()).collect();
    let last_of = |tier: &[&str], skip_noise: bool| {
        (0..lines.len())
            .rev()
            .find(|&i| {
                tier.iter().any(|p| lowered[i].contains(p))
                    && !(skip_noise && tail_noise(&lowered[i]))
            })
            .map(|i| lines[i])
    };
    let generic = CAUSE_TIERS[CAUSE_TIERS.len() - 1];
    let line = CAUSE_TIERS[..CAUSE_TIERS.len() - 1]
        .iter()
        .find_map(|tier| last_of(tier, false))
        .or_else(|| last_of(generic, true))
        .or_else(|| last_of(generic, false))
        .or(lines.last().copied())?;
    Some(one_line(line.as_bytes(), 300))
}
