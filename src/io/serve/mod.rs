//! The serve's lifecycle: refuse a port in use, spawn the serve in its own process group with its output
//! in a log file, poll its readiness URL until the first 200, watch that it stays alive, and tear the
//! whole group down on every exit path (cases 25, 27, 28). One file per step: the spec and the spawn
//! ([`Serve::start`], here), the process group, its supervisor thread and watchdog (`group.rs`), readiness
//! (`ready.rs`), the stop (`stop.rs`), and what a failed serve says (`failure.rs`: [`ServeError`], the log's
//! tail and the line naming the cause).
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
use std::io;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::io::client;
use crate::io::port;
use crate::io::signals;

mod failure;
mod footprint;
mod group;
mod ready;
mod stop;

pub use failure::{cause_line, tail_file, ServeError};
pub(crate) use footprint::{max_wait_ms, Attached, CpuMark};
pub(crate) use group::watch_group;
use group::{start_watchdog, supervise, Shared, Watchdog};
pub use ready::is_steady_404;
pub(crate) use ready::{probe_addrs, probe_each, ReadyInfo};
pub(crate) use stop::{stop_crashed, StopReport, SETTLE};

/// Default interval between readiness probes, in ms.
pub const DEFAULT_POLL_INTERVAL_MS: u64 = 25;
/// How long from the spawn readiness is probed at the poll interval, in ms; after it the pause doubles at
/// each probe up to [`BACKOFF_MAX_MS`] ([`probe_pause`]). A serve that loads for minutes (vLLM on a CPU:
/// 600 s and more) was probed every 25 ms throughout: thousands of `GET /health` lines in its log.
pub const BACKOFF_AFTER_MS: u64 = 2_000;
/// The longest pause between readiness probes once backed off, in ms (a spec interval longer than this is
/// kept): the most `ready_ms` can then lag the serve's own readiness by, besides a probe's own time
/// (`ReadyInfo::ready_window_ms` says it for each run).
pub const BACKOFF_MAX_MS: u64 = 500;

/// The pause before the next readiness probe, `since_spawn` after the spawn, the last pause having been
/// `last`: `base` (the spec's interval, or what the probe's state asks) for the first [`BACKOFF_AFTER_MS`],
/// then twice the last pause, at most [`BACKOFF_MAX_MS`] (never under `base`). 25 ms for 2 s, then 50, 100,
/// 200, 400, 500, 500 ... Pure.
pub fn probe_pause(base: Duration, last: Duration, since_spawn: Duration) -> Duration {
    if since_spawn < Duration::from_millis(BACKOFF_AFTER_MS) {
        return base;
    }
    let cap = Duration::from_millis(BACKOFF_MAX_MS).max(base);
    (last.max(base) * 2).min(cap)
}

/// Default grace between SIGTERM and SIGKILL when stopping, in ms.
pub(crate) const DEFAULT_STOP_GRACE_MS: u64 = 5_000;
/// Default readiness deadline, counted from spawn, in s (weights can take minutes to load).
pub(crate) const DEFAULT_READY_TIMEOUT_S: u64 = 300;
/// Longest wait for one readiness probe (connect + reply), in ms; shorter near the deadline.
pub(crate) const PROBE_TIMEOUT_MS: u64 = 1_000;
/// Shortest wait after the first 200 for the leader to prove it is still alive, in ms (the poll
/// interval is used when longer).
pub const ALIVE_RECHECK_MIN_MS: u64 = 50;
/// How long to wait for the group to die after SIGKILL before giving up (reported), in ms.
pub(crate) const KILL_WAIT_MS: u64 = 5_000;
/// Log lines attached to errors (`log_tail` fields).
pub(crate) const ERROR_TAIL_LINES: usize = 20;

/// Environment every serve is started with, before the gate's own `[serve.env]` (which may override it):
/// output that reaches the log as it is printed, not when a buffer fills or the process exits cleanly. A
/// Python serve (vLLM, SGLang, xllamacpp) killed by the stop signal loses a block-buffered stdout, so its
/// last lines (the route it took, the reason it failed) would never reach `serve.log`. Native serves have
/// no such switch: docs/ci.md advises `stdbuf -oL -eL` (glibc stdio) in the gate's command.
pub(crate) const LINE_BUFFERED_ENV: &[(&str, &str)] = &[("PYTHONUNBUFFERED", "1")];

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
    /// Where readiness is asked next when `ready_path` answers a 5xx other than 503 steadily (for
    /// [`ready::STEADY_404_MS`] and [`ready::STEADY_404_POLLS`] probes, as a missing path is told apart):
    /// a serve that is up but whose `ready_path` is broken there, as `transformers serve` offline answers
    /// `/v1/models` with 500 for ever. `None` (a gate's serve, whose path the gate names): the wait goes
    /// on to its timeout. `servegate init` sets `/health`, since it does not know the engine yet. Until the
    /// fallback the erring path is probed at most every [`ready::ERRING_POLL_MS`] ms.
    pub fallback_ready: Option<String>,
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
            fallback_ready: None,
            ready_timeout: Duration::from_secs(DEFAULT_READY_TIMEOUT_S),
            poll_interval: Duration::from_millis(DEFAULT_POLL_INTERVAL_MS),
            stop_grace: Duration::from_millis(DEFAULT_STOP_GRACE_MS),
            log_path: log_path.into(),
        }
    }
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
    /// The `/proc` sampler of the serve's processes (memory during the whole run, CPU at the runner's marks).
    footprint: Option<footprint::Sampler>,
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
            footprint: None,
            spec,
        };
        if !signals::register(pid, serve.spec.stop_grace) {
            serve.spec.stop_grace = Duration::ZERO;
            serve.stop_inner(&mut |_| {});
            return Err(ServeError::ShuttingDown);
        }
        serve.watchdog = start_watchdog(pid);
        let tag = serve
            .spec
            .env
            .iter()
            .find(|(k, _)| k == signals::RUN_TAG_ENV)
            .map(|(_, v)| v.clone());
        serve.footprint = Some(footprint::Sampler::start(pid, tag));
        Ok(serve)
    }
}

impl Serve {
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
    pub(crate) fn ready_url(&self) -> String {
        format!("{}{}", self.base_url(), self.spec.ready_path)
    }

    /// The CPU of the serve's processes now (the runner marks the judged window with two), or None when none
    /// of them could be read in `/proc`.
    pub(crate) fn cpu_mark(&self) -> Option<CpuMark> {
        self.footprint.as_ref().and_then(|f| f.cpu_mark())
    }

    /// The run-queue wait of each thread of the serve's processes now, ns by tid (empty when not measured):
    /// read around each judged request for its hold ([`footprint::max_wait_ms`]).
    pub(crate) fn thread_waits(&self) -> std::collections::HashMap<u32, u64> {
        self.footprint
            .as_ref()
            .map(|f| f.thread_waits())
            .unwrap_or_default()
    }

    /// The spec the serve was started with.
    pub(crate) fn spec(&self) -> &ServeSpec {
        &self.spec
    }

    /// How the leader ended (`exit status 0`, `signal 9`), or `None` while it runs.
    pub(crate) fn exit_status(&self) -> Option<String> {
        self.exit_info().map(|e| e.status)
    }

    /// The last `lines` lines of the serve's log (lossy UTF-8; reads at most the last 64 KiB). Empty if
    /// the log cannot be read.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_file(&self.spec.log_path, lines)
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
    let bad_path =
        |p: &str| !p.starts_with('/') || p.chars().any(|c| c.is_whitespace() || c.is_control());
    for (field, path) in [
        ("ready_path", Some(&spec.ready_path)),
        ("fallback_ready", spec.fallback_ready.as_ref()),
    ] {
        if let Some(path) = path.filter(|p| bad_path(p)) {
            return bad(format!(
                "{field}: {path:?} must start with '/' and hold no spaces or control characters"
            ));
        }
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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::group::exit_description;
    use super::ready::*;

    /// Readiness probes: the interval for the first 2 s, then doubling to 500 ms and staying there; an
    /// interval already longer than 500 ms is kept; a state that asks a longer base (an erring path) is
    /// never shortened.
    #[test]
    fn readiness_probes_back_off_to_500_ms_after_2_s() {
        let ms = std::time::Duration::from_millis;
        let base = ms(25);
        assert_eq!(super::probe_pause(base, ms(25), ms(1_999)), ms(25));
        let mut last = ms(25);
        let mut seen = Vec::new();
        for _ in 0..7 {
            last = super::probe_pause(base, last, ms(2_000));
            seen.push(last.as_millis());
        }
        assert_eq!(seen, vec![50, 100, 200, 400, 500, 500, 500]);
        assert_eq!(super::probe_pause(ms(800), ms(800), ms(9_000)), ms(800));
        assert_eq!(super::probe_pause(ms(500), ms(50), ms(9_000)), ms(500));
    }
    use super::*;
    use crate::io::client::{one_line, Probe};

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
        let log = include_str!("../../../tests/data/serve-logs/litellm-1.108.7-no-master-key.log");
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
                fallback_ready: Some("health".into()),
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
