//! The serve's lifecycle: refuse a port in use, spawn the serve in its own process group with its output
//! in a log file, poll its readiness URL until the first 200, watch that it stays alive, and tear the
//! whole group down on every exit path (cases 25, 27, 28).
//!
//! This module owns the serve process and nothing after it: it does not send chat requests, judge
//! anything or write evidence other than the serve's own log. Linux only (process groups,
//! `PR_SET_PDEATHSIG`, `/proc`).
//!
//! Exit paths and what covers them are listed in [`crate::io::signals`]. In short: [`Serve::stop`] (or
//! `Drop`, which also runs on panic unwinding) sends SIGTERM to the process group, waits up to
//! `stop_grace`, sends SIGKILL, reaps the leader and checks that the port refuses connections; the
//! signal handlers of [`crate::io::signals::install`] do the same for SIGINT/SIGTERM/SIGHUP of the runner;
//! a SIGKILL of the runner is covered by `PR_SET_PDEATHSIG(SIGKILL)` on the leader plus a watchdog
//! process that kills the whole group when the runner's end of a pipe closes.
//!
//! Readiness: `connection refused` and `503` (llama.cpp's `Loading model`) mean "not ready yet"; other
//! statuses and errors keep the wait going but are remembered; the first `200` is ready, after which the
//! leader must still be alive about one poll later (a 200 from another server on the port while ours
//! died on `couldn't bind` must not count). `ready_ms` runs from spawn to that 200: load time is charged
//! to readiness, never to the first request.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::io::client::{self, one_line, Probe};
use crate::io::port;
use crate::io::signals;

/// Default interval between readiness probes, in ms.
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 25;
/// Default grace between SIGTERM and SIGKILL when stopping, in ms.
pub const DEFAULT_STOP_GRACE_MS: u64 = 5_000;
/// Default readiness deadline, counted from spawn, in s (weights can take minutes to load).
pub const DEFAULT_READY_TIMEOUT_S: u64 = 300;
/// Longest wait for one readiness probe (connect + reply), in ms; shorter near the deadline.
pub const PROBE_TIMEOUT_MS: u64 = 1_000;
/// Shortest wait after the first 200 for the leader to prove it is still alive, in ms (the poll
/// interval is used when longer).
pub const ALIVE_RECHECK_MIN_MS: u64 = 50;
/// How long to wait for the group to die after SIGKILL before giving up (reported), in ms.
pub const KILL_WAIT_MS: u64 = 5_000;
/// Log lines attached to errors (`log_tail` fields).
pub const ERROR_TAIL_LINES: usize = 20;

/// Shell text of the watchdog: it blocks reading a pipe whose write end only the runner holds; when the
/// runner dies (any way, SIGKILL included) the read sees EOF and the watchdog kills the serve's group.
const WATCHDOG_SCRIPT: &str =
    "while read -r _; do :; done; kill -s KILL -- \"-$1\" 2>/dev/null; exit 0";

/// Environment every serve is started with, before the gate's own `[serve.env]` (which may override it):
/// output that reaches the log as it is printed, not when a buffer fills or the process exits cleanly. A
/// Python serve (vLLM, SGLang, xllamacpp) killed by the stop signal loses a block-buffered stdout, so its
/// last lines (the route it took, the reason it failed) would never reach `serve.log`. Native serves have
/// no such switch: docs/ci.md advises `stdbuf -oL -eL` (glibc stdio) in the gate's command.
pub const LINE_BUFFERED_ENV: &[(&str, &str)] = &[("PYTHONUNBUFFERED", "1")];

/// How to start one serve and how long to wait for it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSpec {
    /// Program and arguments, e.g. `["llama-server", "-m", "model.gguf", "--port", "8080"]`. Not run
    /// through a shell. Must not be empty.
    pub command: Vec<String>,
    /// Extra environment variables, added to the runner's environment after [`LINE_BUFFERED_ENV`].
    pub env: Vec<(String, String)>,
    /// Working directory of the serve; the runner's when `None`.
    pub cwd: Option<PathBuf>,
    /// Host the serve listens on and readiness is probed at, e.g. `127.0.0.1`, `::1`, `localhost`.
    pub host: String,
    /// TCP port the serve listens on (1-65535); must be free before the spawn.
    pub port: u16,
    /// Readiness path, e.g. `/health`; must start with `/`.
    pub ready_path: String,
    /// Deadline for the first 200 on `ready_path`, counted from spawn.
    pub ready_timeout: Duration,
    /// Interval between readiness probes (default 25 ms); must be non-zero.
    pub poll_interval: Duration,
    /// Grace between SIGTERM and SIGKILL when stopping (default 5 s).
    pub stop_grace: Duration,
    /// File that receives the serve's stdout and stderr (appended, interleaved by line). Its parent
    /// directory is created if missing.
    pub log_path: PathBuf,
}

impl ServeSpec {
    /// A spec with the defaults: host `127.0.0.1`, ready path `/health`, ready timeout
    /// [`DEFAULT_READY_TIMEOUT_S`], poll interval [`DEFAULT_POLL_INTERVAL_MS`], stop grace
    /// [`DEFAULT_STOP_GRACE_MS`], no extra environment, the runner's working directory.
    pub fn new(command: Vec<String>, port: u16, log_path: impl Into<PathBuf>) -> ServeSpec {
        ServeSpec {
            command,
            env: Vec::new(),
            cwd: None,
            host: "127.0.0.1".to_string(),
            port,
            ready_path: "/health".to_string(),
            ready_timeout: Duration::from_secs(DEFAULT_READY_TIMEOUT_S),
            poll_interval: Duration::from_millis(DEFAULT_POLL_INTERVAL_MS),
            stop_grace: Duration::from_millis(DEFAULT_STOP_GRACE_MS),
            log_path: log_path.into(),
        }
    }
}

/// What the readiness wait saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadyInfo {
    /// From spawn to the reply of the first 200, in ms: the serve's load time.
    pub ready_ms: f64,
    /// Probes sent, the 200 included.
    pub polls: u32,
    /// Probes answered by `connection refused` (state "starting").
    pub refused_polls: u32,
    /// Probes answered by 503 (state "loading").
    pub loading_polls: u32,
    /// Compact timeline: `(ms since spawn when the probe was sent, outcome)`, one entry each time the
    /// outcome changes, e.g. `[(3.1, "refused"), (412.0, "503"), (1460.2, "200")]`. Outcomes:
    /// `refused`, `timeout`, `reset`, `error`, or the HTTP status code.
    pub statuses: Vec<(f64, String)>,
    /// Pid holding the listening socket after the 200 (best effort, `/proc`).
    pub listener_pid: Option<u32>,
    /// Whether that pid is in the serve's process group. `Some(false)` is legitimate for a serve that
    /// forwards the port from elsewhere (a container runtime's proxy) but is worth a look otherwise.
    pub listener_in_group: Option<bool>,
    /// When `host` is a name (`localhost`): the resolved address that answered 200 (`127.0.0.1:8080`),
    /// which every later request uses ([`Serve::base_url`]). `None` for an address `host`.
    pub pinned: Option<String>,
}

/// What stopping the serve did and found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StopReport {
    /// How the leader ended: `exit status 0`, `signal 15`, `signal 11 (core dumped)`; `None` if it could
    /// not be observed (did not die within the kill wait).
    pub exit: Option<String>,
    /// The signal that ended the leader, when a signal did (15 after a plain stop; 11 for a serve that crashed
    /// on the way down).
    pub signal: Option<i32>,
    /// Whether SIGKILL was needed (something in the group outlived SIGTERM + grace).
    pub escalated_to_kill: bool,
    /// From the stop call to the end of the checks, in ms.
    pub stop_ms: f64,
    /// Whether the leader had already exited before the stop.
    pub already_exited: bool,
    /// Whether the leader was reaped (no zombie left behind).
    pub reaped: bool,
    /// Whether the leader pid is gone from `/proc` afterwards.
    pub pid_gone: bool,
    /// Live processes still in the group afterwards (normally none).
    pub leftover_pids: Vec<u32>,
    /// Whether `host:port` refuses connections afterwards (checked for up to 1 s).
    pub port_closed: bool,
}

/// A readiness path answering 404 for this long (and [`STEADY_404_POLLS`] probes) is missing, not loading:
/// no serve measured (llama.cpp, llama-cpp-python, vLLM) answers 404 while it loads (they refuse
/// connections or answer 503).
pub const STEADY_404_MS: f64 = 3000.0;
/// The fewest consecutive 404 probes that count as a steady 404.
pub const STEADY_404_POLLS: u32 = 5;

/// Whether `polls` consecutive 404s over `span_ms` are a steady 404 (see [`STEADY_404_MS`]).
pub fn is_steady_404(polls: u32, span_ms: f64) -> bool {
    polls >= STEADY_404_POLLS && span_ms >= STEADY_404_MS
}

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
    pub fn log_tail(&self) -> Option<&str> {
        match self {
            ServeError::ExitedBeforeReady { log_tail, .. }
            | ServeError::ReadyTimeout { log_tail, .. }
            | ServeError::ReadyNotFound { log_tail, .. }
            | ServeError::ExitedAfterReady { log_tail, .. } => Some(log_tail),
            _ => None,
        }
    }
}

/// How the leader ended and when it was seen.
#[derive(Debug, Clone)]
struct ExitInfo {
    status: String,
    /// The signal that ended the leader, if a signal did.
    signal: Option<i32>,
    at: Instant,
}

#[derive(Debug, Default)]
struct SupState {
    exit: Option<ExitInfo>,
    reaped: bool,
}

/// State shared with the supervisor thread.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<SupState>,
    cond: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, SupState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The watchdog process and the runner's (only) write end of its pipe.
struct Watchdog {
    child: Child,
    _write_end: OwnedFd,
}

/// A watchdog over a process group that is not a serve (a gate's `setup` command): if the runner dies
/// in any way (SIGKILL included) while this value lives, the whole group gets SIGKILL. Dropping it stops
/// the watchdog (and leaves the group alone).
pub struct GroupWatchdog(Option<Watchdog>);

impl GroupWatchdog {
    /// Whether the watchdog process runs.
    pub fn active(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for GroupWatchdog {
    fn drop(&mut self) {
        if let Some(mut w) = self.0.take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
    }
}

/// Starts the serve's watchdog (see [`Serve::start`]) over process group `pgid`.
pub fn watch_group(pgid: u32) -> GroupWatchdog {
    GroupWatchdog(start_watchdog(pgid))
}

/// A running serve: its process group, log and readiness. Stop it with [`Serve::stop`]; dropping it
/// stops it too.
pub struct Serve {
    spec: ServeSpec,
    pid: u32,
    spawned_at: Instant,
    /// The readiness probe's client ([`client::probe_client`]).
    probe: reqwest::blocking::Client,
    shared: Arc<Shared>,
    reap_tx: Option<mpsc::Sender<()>>,
    watchdog: Option<Watchdog>,
    ready: Option<(Instant, ReadyInfo)>,
    /// The address that answered the readiness probe with 200, when `host` is a name (see [`probe_addrs`]).
    pinned: Option<SocketAddr>,
    stopped: Option<StopReport>,
}

impl std::fmt::Debug for Serve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serve")
            .field("pid", &self.pid)
            .field("base_url", &self.base_url())
            .field("ready", &self.ready.is_some())
            .field("stopped", &self.stopped.is_some())
            .finish()
    }
}

impl Serve {
    /// Starts the serve described by `spec`.
    ///
    /// In order: validates the spec; refuses a port in use ([`ServeError::PortInUse`], naming the owner
    /// when possible) before anything is spawned; opens the log (append); spawns the command from a
    /// dedicated supervisor thread that lives as long as the serve, in a new process group whose id is
    /// the leader's pid, with stdin null, stdout and stderr appended to the log, and
    /// `PR_SET_PDEATHSIG(SIGKILL)`; registers the group with [`crate::io::signals`]; starts the watchdog.
    /// Does not wait for readiness: call [`Serve::wait_ready`].
    pub fn start(spec: ServeSpec) -> Result<Serve, ServeError> {
        validate(&spec)?;
        if signals::shutting_down() {
            return Err(ServeError::ShuttingDown);
        }
        if port::port_in_use(&spec.host, spec.port) {
            return Err(ServeError::PortInUse {
                addr: port::host_port(&spec.host, spec.port),
                pid: port::owner_pid(spec.port),
            });
        }
        let probe = client::probe_client().map_err(|reason| ServeError::ProbeClient { reason })?;
        let (stdout, stderr) = open_log(&spec.log_path)?;
        let command_line = spec.command.join(" ");

        let mut cmd = Command::new(&spec.command[0]);
        cmd.args(&spec.command[1..])
            .envs(LINE_BUFFERED_ENV.iter().copied())
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        if let Some(dir) = &spec.cwd {
            cmd.current_dir(dir);
        }
        // SAFETY: getpid has no preconditions.
        let runner_pid = unsafe { libc::getpid() };
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions
        // (prctl, getppid, sigaction); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                let sig = libc::SIGKILL as libc::c_ulong;
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    sig,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The runner died between fork and prctl: the death signal was missed, do not run.
                if libc::getppid() != runner_pid {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                // A SIGTERM ignored by whoever started the runner (SIG_IGN survives exec) would turn
                // every stop into a SIGKILL: the serve starts with the default action.
                let mut default_action: libc::sigaction = std::mem::zeroed();
                default_action.sa_sigaction = libc::SIG_DFL;
                if libc::sigaction(libc::SIGTERM, &default_action, std::ptr::null_mut()) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }

        let shared = Arc::new(Shared::default());
        let (started_tx, started_rx) = mpsc::channel::<io::Result<(u32, Instant)>>();
        let (reap_tx, reap_rx) = mpsc::channel::<()>();
        let sup_shared = Arc::clone(&shared);
        let spawn_thread = std::thread::Builder::new()
            .name(format!("servegate-serve-{}", spec.port))
            .spawn(move || supervise(cmd, sup_shared, started_tx, reap_rx));
        if let Err(source) = spawn_thread {
            return Err(ServeError::Spawn {
                command: command_line,
                source,
            });
        }
        let (pid, spawned_at) = match started_rx.recv() {
            Ok(Ok(v)) => v,
            Ok(Err(source)) => {
                return Err(ServeError::Spawn {
                    command: command_line,
                    source,
                })
            }
            Err(_) => {
                return Err(ServeError::Spawn {
                    command: command_line,
                    source: io::Error::other("the supervisor thread ended before spawning"),
                })
            }
        };

        let mut serve = Serve {
            pid,
            spawned_at,
            probe,
            shared,
            reap_tx: Some(reap_tx),
            watchdog: None,
            ready: None,
            pinned: None,
            stopped: None,
            spec,
        };
        if !signals::register(pid, serve.spec.stop_grace) {
            serve.spec.stop_grace = Duration::ZERO;
            serve.stop_inner();
            return Err(ServeError::ShuttingDown);
        }
        serve.watchdog = start_watchdog(pid);
        Ok(serve)
    }

    /// Polls `http://host:port{ready_path}` every `poll_interval` (per-probe timeout up to
    /// [`PROBE_TIMEOUT_MS`], no proxy) until the first 200, and returns what it saw.
    ///
    /// `connection refused` and 503 mean not ready yet; other outcomes keep the wait going and are
    /// remembered for the timeout message. After the 200 the leader must still be alive about one poll
    /// later, else [`ServeError::ExitedAfterReady`]. If the leader exits while polling:
    /// [`ServeError::ExitedBeforeReady`] at once, with the log line that says why. No 200 within
    /// `ready_timeout` of spawn: [`ServeError::ReadyTimeout`] naming the last status. A second call
    /// after success returns the same info without probing.
    pub fn wait_ready(&mut self) -> Result<ReadyInfo, ServeError> {
        if let Some((_, info)) = &self.ready {
            return Ok(info.clone());
        }
        let url = self.ready_url();
        let probe_url = format!(
            "http://{}{}",
            port::host_port(&probe_host(&self.spec.host), self.spec.port),
            self.spec.ready_path
        );
        let by_name = probe_host(&self.spec.host)
            .parse::<std::net::IpAddr>()
            .is_err();
        let deadline = self.spawned_at + self.spec.ready_timeout;
        let mut polls = 0u32;
        let mut refused = 0u32;
        let mut loading = 0u32;
        let mut statuses: Vec<(f64, String)> = Vec::new();
        let mut last_status: String;
        // (ms since spawn of the first, count) of the current run of consecutive 404s.
        let mut steady_404: Option<(f64, u32)> = None;
        loop {
            if let Some(exit) = self.exit_info() {
                return Err(self.exited_before_ready(&exit));
            }
            let sent_ms = ms(self.spawned_at.elapsed());
            let remaining = deadline.saturating_duration_since(Instant::now());
            let timeout = remaining
                .min(Duration::from_millis(PROBE_TIMEOUT_MS))
                .max(Duration::from_millis(50));
            let (outcome, answered) = if by_name {
                let addrs = probe_addrs(&self.spec.host, self.spec.port);
                probe_each(&self.probe, &addrs, &self.spec.ready_path, timeout)
                    .unwrap_or_else(|| (client::probe(&self.probe, &probe_url, timeout), None))
            } else {
                (client::probe(&self.probe, &probe_url, timeout), None)
            };
            polls += 1;
            match outcome {
                Probe::Refused => refused += 1,
                Probe::Status(503, _) => loading += 1,
                _ => {}
            }
            let label = outcome.label();
            if statuses.last().map(|(_, l)| l != &label).unwrap_or(true) {
                statuses.push((round1(sent_ms), label));
            }
            last_status = outcome.describe();
            steady_404 = match (&outcome, steady_404) {
                (Probe::Status(404, _), Some((since, n))) => Some((since, n + 1)),
                (Probe::Status(404, _), None) => Some((sent_ms, 1)),
                _ => None,
            };
            if let Some((since, n)) = steady_404 {
                if is_steady_404(n, sent_ms - since) {
                    return Err(ServeError::ReadyNotFound {
                        url,
                        polls: n,
                        steady_s: (sent_ms - since) / 1000.0,
                        log_tail: self.log_tail(ERROR_TAIL_LINES),
                    });
                }
            }
            if let Probe::Status(200, _) = outcome {
                let ready_at = Instant::now();
                let ready_ms = ms(ready_at - self.spawned_at);
                let recheck = self
                    .spec
                    .poll_interval
                    .max(Duration::from_millis(ALIVE_RECHECK_MIN_MS));
                if let Some(exit) = self.wait_exit(recheck) {
                    return Err(self.exited_after_ready(&exit, ready_at));
                }
                let listener_pid = port::owner_pid(self.spec.port);
                let listener_in_group = listener_pid.and_then(pgid_of).map(|g| g == self.pid);
                let info = ReadyInfo {
                    ready_ms,
                    polls,
                    refused_polls: refused,
                    loading_polls: loading,
                    statuses,
                    listener_pid,
                    listener_in_group,
                    pinned: answered.map(|a| a.to_string()),
                };
                self.pinned = answered;
                self.ready = Some((ready_at, info.clone()));
                return Ok(info);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ServeError::ReadyTimeout {
                    url,
                    timeout_s: self.spec.ready_timeout.as_secs_f64(),
                    last_status,
                    polls,
                    log_tail: self.log_tail(ERROR_TAIL_LINES),
                });
            }
            if let Some(exit) = self.wait_exit(self.spec.poll_interval.min(deadline - now)) {
                return Err(self.exited_before_ready(&exit));
            }
        }
    }

    /// Ok while the leader is alive. Once it has exited: [`ServeError::ExitedAfterReady`]
    /// (`server_exited_during_run`, with the time since readiness and the log tail) if it had been
    /// ready, else [`ServeError::ExitedBeforeReady`]. Cheap (no I/O unless it exited): call it before
    /// and after each request.
    pub fn check_alive(&mut self) -> Result<(), ServeError> {
        let Some(exit) = self.exit_info() else {
            return Ok(());
        };
        match self.ready.as_ref().map(|(at, _)| *at) {
            Some(ready_at) => Err(self.exited_after_ready(&exit, ready_at)),
            None => Err(self.exited_before_ready(&exit)),
        }
    }

    /// The leader's pid, which is also the serve's process-group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `http://host:port` (IPv6 hosts in brackets), without a trailing slash; once ready, for a `host` that
    /// is a name, the address that answered (`http://127.0.0.1:8080` for `localhost`), so that every request
    /// goes where readiness was seen and not to whichever address the resolver lists first.
    pub fn base_url(&self) -> String {
        if let Some(a) = self.pinned {
            return format!("http://{a}");
        }
        format!(
            "http://{}",
            port::host_port(&self.spec.host, self.spec.port)
        )
    }

    /// The readiness URL: [`Serve::base_url`] followed by `ready_path`.
    pub fn ready_url(&self) -> String {
        format!("{}{}", self.base_url(), self.spec.ready_path)
    }

    /// Whether the watchdog process runs (it kills the group if the runner dies without stopping the
    /// serve, SIGKILL included). False only when `sh` could not be started.
    pub fn has_watchdog(&self) -> bool {
        self.watchdog.is_some()
    }

    /// The spec the serve was started with.
    pub fn spec(&self) -> &ServeSpec {
        &self.spec
    }

    /// What [`Serve::wait_ready`] saw, once it has succeeded.
    pub fn ready_info(&self) -> Option<&ReadyInfo> {
        self.ready.as_ref().map(|(_, i)| i)
    }

    /// How the leader ended (`exit status 0`, `signal 9`), or `None` while it runs.
    pub fn exit_status(&self) -> Option<String> {
        self.exit_info().map(|e| e.status)
    }

    /// The last `lines` lines of the serve's log (lossy UTF-8; reads at most the last 64 KiB). Empty if
    /// the log cannot be read.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_file(&self.spec.log_path, lines)
    }

    /// Waits up to `within` for the leader to exit on its own, without signalling it; true when it has. The
    /// runner gives a serve [`SETTLE`] after its last reply before stopping it, so a serve that crashes as
    /// it finishes (an exit right after the last chunk) is seen exiting during the run rather than raced by
    /// the SIGTERM.
    pub fn settle(&self, within: Duration) -> bool {
        self.wait_exit(within).is_some()
    }

    /// Stops the serve: SIGTERM to its process group, up to `stop_grace` for every member to exit,
    /// SIGKILL to what is left, reaps the leader (no zombie), deregisters the group, and checks that the
    /// pid is gone and the port refuses connections. Never fails; what it found is in the report.
    pub fn stop(mut self) -> StopReport {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> StopReport {
        if let Some(r) = &self.stopped {
            return r.clone();
        }
        let t0 = Instant::now();
        let pgid = self.pid;
        let already_exited = self.exit_info().is_some();
        let mut escalated = false;
        if !self.group_gone() {
            signals::signal_group(pgid, libc::SIGTERM);
            if !self.wait_group_gone(t0 + self.spec.stop_grace) {
                signals::signal_group(pgid, libc::SIGKILL);
                escalated = true;
                self.wait_group_gone(Instant::now() + Duration::from_millis(KILL_WAIT_MS));
            }
        }
        // The watchdog goes before the leader is reaped, so it can never act on a reused pgid.
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
        self.reap_tx = None; // the supervisor reaps when the channel closes
        let reaped = {
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut st = self.shared.lock();
            while !st.reaped && st.exit.is_some() {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                st = self
                    .shared
                    .cond
                    .wait_timeout(st, deadline - now)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            st.reaped
        };
        signals::deregister(pgid);
        let leftover_pids = signals::group_members(pgid);
        let port_closed = {
            let deadline = Instant::now() + Duration::from_secs(1);
            loop {
                if port::refuses_connections(
                    &self.spec.host,
                    self.spec.port,
                    Duration::from_millis(200),
                ) {
                    break true;
                }
                if Instant::now() >= deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let report = StopReport {
            exit: self.exit_status(),
            signal: self.exit_info().and_then(|e| e.signal),
            escalated_to_kill: escalated,
            stop_ms: ms(t0.elapsed()),
            already_exited,
            reaped,
            pid_gone: reaped && signals::process_dead(pgid),
            leftover_pids,
            port_closed,
        };
        self.stopped = Some(report.clone());
        report
    }

    /// Leader exited and no live process left in the group.
    fn group_gone(&self) -> bool {
        self.exit_info().is_some() && signals::group_members(self.pid).is_empty()
    }

    fn wait_group_gone(&self, deadline: Instant) -> bool {
        loop {
            if self.group_gone() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            // Wakes at once on the leader's exit; other members are re-read every 20 ms.
            self.wait_exit((deadline - now).min(Duration::from_millis(20)));
        }
    }

    fn exit_info(&self) -> Option<ExitInfo> {
        self.shared.lock().exit.clone()
    }

    /// Waits up to `timeout` for the leader to exit; returns its exit if it has.
    fn wait_exit(&self, timeout: Duration) -> Option<ExitInfo> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if let Some(e) = &st.exit {
                return Some(e.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn exited_before_ready(&self, exit: &ExitInfo) -> ServeError {
        let log_tail = self.log_tail(ERROR_TAIL_LINES);
        ServeError::ExitedBeforeReady {
            status: exit.status.clone(),
            ready_ms_elapsed: round1(ms(exit.at.saturating_duration_since(self.spawned_at))),
            cause_line: cause_line(&log_tail),
            log_tail,
        }
    }

    fn exited_after_ready(&self, exit: &ExitInfo, ready_at: Instant) -> ServeError {
        let log_tail = self.log_tail(ERROR_TAIL_LINES);
        ServeError::ExitedAfterReady {
            status: exit.status.clone(),
            after_ready_s: exit.at.saturating_duration_since(ready_at).as_secs_f64(),
            cause_line: cause_line(&log_tail),
            log_tail,
        }
    }
}

impl Drop for Serve {
    /// Stops the serve if [`Serve::stop`] was not called (normal drop, early return, panic unwinding).
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Checks the spec and resolves its host.
fn validate(spec: &ServeSpec) -> Result<Vec<SocketAddr>, ServeError> {
    let bad = |reason: String| Err(ServeError::InvalidSpec { reason });
    if spec.command.is_empty() || spec.command[0].is_empty() {
        return bad("command: empty".into());
    }
    if spec.port == 0 {
        return bad("port: 0 is not a port a serve can be probed at".into());
    }
    if !spec.ready_path.starts_with('/')
        || spec
            .ready_path
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return bad(format!(
            "ready_path: {:?} must start with '/' and hold no spaces or control characters",
            spec.ready_path
        ));
    }
    if spec.poll_interval.is_zero() {
        return bad("poll_interval: must be greater than 0".into());
    }
    match port::resolve(&spec.host, spec.port) {
        Ok(a) => Ok(a),
        Err(e) => bad(format!("host: {:?}: {e}", spec.host)),
    }
}

/// Opens the log for appending, twice (stdout and stderr share the open file description).
fn open_log(path: &Path) -> Result<(File, File), ServeError> {
    let err = |source| ServeError::LogOpen {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(err)?;
    }
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    let errf = out.try_clone().map_err(err)?;
    Ok((out, errf))
}

/// Body of the supervisor thread: spawns (so that PDEATHSIG is tied to a thread that outlives the
/// serve), reports the pid, waits for the leader's exit without reaping it (its pid, hence the pgid,
/// stays reserved until the group has been dealt with), then reaps when told or when the `Serve` is gone.
fn supervise(
    mut cmd: Command,
    shared: Arc<Shared>,
    started: mpsc::Sender<io::Result<(u32, Instant)>>,
    reap: mpsc::Receiver<()>,
) {
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    drop(cmd); // closes the parent's copies of the log file
    let pid = child.id();
    let _ = started.send(Ok((pid, Instant::now())));
    let (status, signal) = wait_exit_no_reap(pid);
    {
        let mut st = shared.lock();
        st.exit = Some(ExitInfo {
            status,
            signal,
            at: Instant::now(),
        });
        shared.cond.notify_all();
    }
    let _ = reap.recv(); // a message, or the sender dropped
    let _ = child.wait();
    let mut st = shared.lock();
    st.reaped = true;
    shared.cond.notify_all();
}

/// Blocks until child `pid` exits and describes how (and the signal that ended it, if one did), leaving it a
/// zombie (`waitid` with `WNOWAIT`).
fn wait_exit_no_reap(pid: u32) -> (String, Option<i32>) {
    loop {
        // SAFETY: siginfo_t is plain data; all-zero is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid succeeded for a child, so the SIGCHLD fields of `info` are filled.
            let status = unsafe { info.si_status() };
            let signal =
                matches!(info.si_code, libc::CLD_KILLED | libc::CLD_DUMPED).then_some(status);
            return (exit_description(info.si_code, status), signal);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return (format!("unknown exit (waitid: {e})"), None);
        }
    }
}

/// How long the runner lets a serve be after its last reply before it stops it ([`Serve::settle`]): 200 ms.
/// A healthy serve costs the run this much per stop; a serve that exits on its own within it (a crash as it
/// finishes its last reply) is seen exiting during the run.
pub const SETTLE: Duration = Duration::from_millis(200);

/// Whether a stop found the leader ended as a crash: by a crash signal ([`is_crash_signal`]), or with an exit
/// status of 128 + a crash signal (how a shell or wrapper reports a child that died of one, and what a
/// serve's own `_exit(139)` says: `exit status 139` for SIGSEGV). A serve that crashed right after its last
/// reply can be caught either side of the runner's SIGTERM; both ways it crashed.
pub fn stop_crashed(stop: &StopReport) -> bool {
    if stop.signal.is_some_and(is_crash_signal) {
        return true;
    }
    stop.exit
        .as_deref()
        .and_then(|e| e.strip_prefix("exit status "))
        .and_then(|c| c.trim().parse::<i32>().ok())
        .is_some_and(|c| c > 128 && is_crash_signal(c - 128))
}

/// True for the signals a process dies of when it crashes (not when it is asked to stop): SIGSEGV, SIGABRT,
/// SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP.
pub fn is_crash_signal(signal: i32) -> bool {
    [
        libc::SIGSEGV,
        libc::SIGABRT,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGSYS,
        libc::SIGTRAP,
    ]
    .contains(&signal)
}

/// `exit status N` / `signal N` / `signal N (core dumped)` from a SIGCHLD `si_code` and `si_status`.
fn exit_description(code: i32, status: i32) -> String {
    match code {
        libc::CLD_EXITED => format!("exit status {status}"),
        libc::CLD_KILLED => format!("signal {status}"),
        libc::CLD_DUMPED => format!("signal {status} (core dumped)"),
        other => format!("unknown exit (si_code {other}, status {status})"),
    }
}

/// Starts the watchdog for group `pgid`; `None` if it cannot be started (then only PDEATHSIG covers a
/// SIGKILL of the runner).
fn start_watchdog(pgid: u32) -> Option<Watchdog> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let child = Command::new("sh")
        .args([
            "-c",
            WATCHDOG_SCRIPT,
            "servegate-watchdog",
            &pgid.to_string(),
        ])
        .stdin(Stdio::from(read_end))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0) // not in the terminal's foreground group: a Ctrl-C must not kill it first
        .spawn()
        .ok()?;
    Some(Watchdog {
        child,
        _write_end: write_end,
    })
}

/// Every address `host` resolves to for `port`, in the resolver's order (`localhost`: `::1` and
/// `127.0.0.1`, either first by the system's configuration), duplicates removed; empty when it does not
/// resolve.
pub fn probe_addrs(host: &str, port: u16) -> Vec<SocketAddr> {
    use std::net::ToSocketAddrs;
    let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
    let mut out: Vec<SocketAddr> = Vec::new();
    for a in (bare, port).to_socket_addrs().into_iter().flatten() {
        if !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// One readiness probe of `path` at each of `addrs` in turn, stopping at the first that answers with an
/// HTTP status: that outcome and its address. When none does, the first address's outcome (the resolver's
/// preferred address) and no address. `None` when `addrs` is empty. Each probe has `timeout`.
pub fn probe_each(
    client: &reqwest::blocking::Client,
    addrs: &[SocketAddr],
    path: &str,
    timeout: Duration,
) -> Option<(Probe, Option<SocketAddr>)> {
    let mut first = None;
    for a in addrs {
        let outcome = client::probe(client, &format!("http://{a}{path}"), timeout);
        if let Probe::Status(..) = outcome {
            return Some((outcome, Some(*a)));
        }
        first.get_or_insert(outcome);
    }
    first.map(|o| (o, None))
}

/// The host a readiness probe connects to: `host` itself, or loopback for an unspecified address
/// (`0.0.0.0`, `::`), which a serve listens on but a client cannot connect to everywhere.
fn probe_host(host: &str) -> String {
    let bare = host.trim().trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => port::connect_target(SocketAddr::new(ip, 0))
            .ip()
            .to_string(),
        Err(_) => bare.to_string(),
    }
}

/// The process group of `pid`, from `/proc`.
fn pgid_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    signals::parse_stat(&stat).map(|(_, g)| g)
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_line_prefers_the_bind_failure() {
        let tail = "srv    load_model: loading model 'model-b.gguf'\nmain: model loaded\nE couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080\nmain: exiting due to HTTP server error (Address already in use)\n";
        assert_eq!(
            cause_line(tail).as_deref(),
            Some("E couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080")
        );
    }

    /// litellm 1.108.7 started with no master key (captured from `litellm --config ... --port ...` with
    /// LITELLM_MASTER_KEY unset; home and venv paths replaced): the cause is its refusal, not uvicorn's
    /// `Application startup failed. Exiting.` nor the traceback frames.
    #[test]
    fn cause_line_of_a_captured_litellm_start_is_its_refusal() {
        let log = include_str!("../../tests/data/serve-logs/litellm-1.108.7-no-master-key.log");
        assert!(log.contains("ERROR:    Application startup failed. Exiting."));
        let c = cause_line(log).unwrap();
        assert!(c.contains("no master key is set"), "{c}");
        assert!(!c.contains("Application startup failed"), "{c}");
        // The same from the last 10 lines a run keeps of the log (runner::log_tail), and from the log cut
        // right after uvicorn's line.
        let lines: Vec<&str> = log.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains("Application startup failed"))
            .unwrap();
        let upto = lines[..=at].join("\n");
        let c = cause_line(&upto).unwrap();
        assert!(
            c.contains(
                "UnsafeMasterKeyError: LiteLLM proxy refused to start: no master key is set"
            ),
            "{c}"
        );
        // Noise alone is still quoted.
        assert_eq!(
            cause_line("INFO: x\nERROR:    Application startup failed. Exiting.\n").as_deref(),
            Some("ERROR: Application startup failed. Exiting.")
        );
    }

    #[test]
    fn cause_line_falls_back_to_failures_then_last_line() {
        assert_eq!(
            cause_line("a\nerror: no model\nb\n").as_deref(),
            Some("error: no model")
        );
        assert_eq!(
            cause_line("x\nOSError: [Errno 98] Address already in use\nerror: y\n").as_deref(),
            Some("OSError: [Errno 98] Address already in use")
        );
        assert_eq!(
            cause_line("[backend] stopping server...\n\n").as_deref(),
            Some("[backend] stopping server...")
        );
        assert_eq!(cause_line(""), None);
        assert_eq!(cause_line("\n \n"), None);
    }

    #[test]
    fn exit_descriptions_are_stable() {
        assert_eq!(exit_description(libc::CLD_EXITED, 0), "exit status 0");
        assert_eq!(exit_description(libc::CLD_KILLED, 15), "signal 15");
        assert_eq!(
            exit_description(libc::CLD_DUMPED, 11),
            "signal 11 (core dumped)"
        );
    }

    #[test]
    fn error_messages_start_with_their_kind() {
        let e = ServeError::PortInUse {
            addr: "127.0.0.1:8080".into(),
            pid: Some(4242),
        };
        assert_eq!(e.to_string(), "port_in_use: 127.0.0.1:8080 (pid 4242)");
        let e = ServeError::PortInUse {
            addr: "127.0.0.1:8080".into(),
            pid: None,
        };
        assert_eq!(e.to_string(), "port_in_use: 127.0.0.1:8080");
        let e = ServeError::ExitedAfterReady {
            status: "exit status 0".into(),
            after_ready_s: 0.43,
            cause_line: None,
            log_tail: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "server_exited_during_run (exit status 0, 0.4 s after ready)"
        );
        let e = ServeError::ExitedBeforeReady {
            status: "exit status 1".into(),
            ready_ms_elapsed: 310.0,
            cause_line: Some("E couldn't bind HTTP server socket".into()),
            log_tail: String::new(),
        };
        assert_eq!(
            e.to_string(),
            "server_exited_before_ready (exit status 1, 0.3 s after spawn): E couldn't bind HTTP server socket"
        );
        for e in [
            e,
            ServeError::ShuttingDown,
            ServeError::InvalidSpec { reason: "x".into() },
        ] {
            assert!(e.to_string().starts_with(e.kind()), "{e}");
        }
    }

    /// A name resolving to two addresses, the first of which nobody listens on: the probe goes on to the
    /// second and says which answered. 127.0.0.2 is loopback on Linux too, but a listener bound to
    /// 127.0.0.1 refuses it.
    #[test]
    fn every_resolved_address_is_tried_and_the_one_that_answered_is_named() {
        use std::io::{Read as _, Write as _};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ =
                c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        });
        let addrs: Vec<SocketAddr> = vec![
            format!("127.0.0.2:{port}").parse().unwrap(),
            format!("127.0.0.1:{port}").parse().unwrap(),
        ];
        let client = client::probe_client().unwrap();
        let (outcome, at) =
            probe_each(&client, &addrs, "/health", Duration::from_secs(10)).unwrap();
        server.join().unwrap();
        assert_eq!(outcome, Probe::Status(200, "ok".into()));
        assert_eq!(at, Some(addrs[1]));
        // Nobody on either: the first address's outcome, no address.
        let (outcome, at) =
            probe_each(&client, &addrs, "/health", Duration::from_secs(10)).unwrap();
        assert_eq!((outcome, at), (Probe::Refused, None));
        assert!(probe_each(&client, &[], "/health", Duration::from_secs(1)).is_none());
        let local = probe_addrs("localhost", 8080);
        assert!(
            !local.is_empty()
                && local
                    .iter()
                    .all(|a| a.ip().is_loopback() && a.port() == 8080),
            "{local:?}"
        );
        assert_eq!(
            probe_addrs("[::1]", 9),
            vec!["[::1]:9".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn bad_specs_are_errors_not_panics() {
        let base = ServeSpec::new(vec!["true".into()], 8080, "/tmp/servegate-unused.log");
        let cases: Vec<ServeSpec> = vec![
            ServeSpec {
                command: vec![],
                ..base.clone()
            },
            ServeSpec {
                command: vec![String::new()],
                ..base.clone()
            },
            ServeSpec {
                port: 0,
                ..base.clone()
            },
            ServeSpec {
                ready_path: "health".into(),
                ..base.clone()
            },
            ServeSpec {
                ready_path: "/health\r\nX: y".into(),
                ..base.clone()
            },
            ServeSpec {
                poll_interval: Duration::ZERO,
                ..base.clone()
            },
            ServeSpec {
                host: String::new(),
                ..base.clone()
            },
        ];
        for spec in cases {
            match Serve::start(spec.clone()) {
                Err(ServeError::InvalidSpec { .. }) => {}
                other => panic!("{spec:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn tail_reads_last_lines_and_tolerates_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("serve.log");
        fs::write(&p, "one\ntwo\nthree\n").unwrap();
        assert_eq!(tail_file(&p, 2), "two\nthree");
        assert_eq!(tail_file(&p, 10), "one\ntwo\nthree");
        assert_eq!(tail_file(&p, 0), "");
        assert_eq!(tail_file(&dir.path().join("missing"), 3), "");
    }

    #[test]
    fn one_line_collapses_and_cuts() {
        assert_eq!(one_line(b"{\"a\":\n 1}", 100), "{\"a\": 1}");
        assert_eq!(one_line(b"abcdef", 3), "abc…");
    }
}
