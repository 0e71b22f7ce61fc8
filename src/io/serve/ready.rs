//! Readiness: probe `http://host:port{ready_path}` until the first 200 ([`Serve::wait_ready`]), then watch
//! that the leader stays alive ([`Serve::check_alive`]); every resolved address of a host name is tried
//! ([`probe_addrs`], [`probe_each`]).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::io::client::{self, Probe};
use crate::io::port;
use crate::io::progress::{Pacer, Waiting};

use super::failure::{cause_line, ServeError};
use super::group::ExitInfo;
use super::{ms, round1, Serve, ALIVE_RECHECK_MIN_MS, ERROR_TAIL_LINES, PROBE_TIMEOUT_MS};
use crate::io::signals::pgid_of;

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
    /// How many ms before `ready_ms` the serve may have turned ready: from the send of the last probe that was
    /// not a 200 (the spawn, for a first probe that was) to the 200's reply. The probes back off from the
    /// poll interval to every [`super::BACKOFF_MAX_MS`] after [`super::BACKOFF_AFTER_MS`]
    /// ([`super::probe_pause`]), so for a serve that loads longer `ready_ms` is this precise (about 500 ms
    /// plus a probe's time), not the poll interval's.
    pub ready_window_ms: f64,
    /// Compact timeline: `(ms since spawn when the probe was sent, outcome)`, one entry each time the
    /// outcome changes, e.g. `[(3.1, "refused"), (412.0, "503"), (1460.2, "200")]`. Outcomes:
    /// `refused`, `timeout`, `reset`, `error`, or the HTTP status code.
    pub statuses: Vec<(f64, String)>,
    /// When the 200 came from [`ServeSpec::fallback_ready`](super::ServeSpec) because the ready path
    /// answered a 5xx other than 503 steadily: `(the ready path, its last status, the path that answered)`,
    /// e.g. `("/v1/models", "500 Internal Server Error", "/health")`. `None` otherwise (and not serialized).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fell_back: Option<(String, String, String)>,
    /// Pid holding the listening socket after the 200 (best effort, `/proc`).
    pub listener_pid: Option<u32>,
    /// Whether that pid is in the serve's process group. `Some(false)` is legitimate for a serve that
    /// forwards the port from elsewhere (a container runtime's proxy) but is worth a look otherwise.
    pub listener_in_group: Option<bool>,
    /// When `host` is a name (`localhost`): the resolved address that answered 200 (`127.0.0.1:8080`),
    /// which every later request uses ([`Serve::base_url`]). `None` for an address `host`.
    pub pinned: Option<String>,
}

/// A readiness path answering 404 for this long (and [`STEADY_404_POLLS`] probes) is missing, not loading:
/// no serve measured (llama.cpp, llama-cpp-python, vLLM) answers 404 while it loads (they refuse
/// connections or answer 503).
pub(crate) const STEADY_404_MS: f64 = 3000.0;
/// The fewest consecutive 404 probes that count as a steady 404.
pub(crate) const STEADY_404_POLLS: u32 = 5;

/// The least pause between probes, ms, while the ready path answers a 5xx other than 503 and a fallback path
/// is waiting ([`super::ServeSpec::fallback_ready`]): such a serve is up and erring, not loading, and each
/// probe may cost it a traceback. `transformers serve` 5.19.0 offline logs a traceback for each `/v1/models`
/// 500: at the 25 ms default, init's 3 s to call the 500 steady were 100 probes, 100 tracebacks and most of
/// the 7,865 lines of its serve.log (measured 2026-12-07, tests/live/init.rs), and the tracebacks'
/// `venv-vllm-cpu` paths became route candidates. At 500 ms the steady rule takes about 7 probes (10
/// `/v1/models` requests in all on a scripted serve, init's own questions included: tests/cli/init.rs).
pub(crate) const ERRING_POLL_MS: u64 = 500;

/// Whether `polls` consecutive 404s over `span_ms` are a steady 404 (see [`STEADY_404_MS`]).
pub fn is_steady_404(polls: u32, span_ms: f64) -> bool {
    polls >= STEADY_404_POLLS && span_ms >= STEADY_404_MS
}

impl Serve {
    /// Polls `http://host:port{ready_path}` every `poll_interval`, backing off after
    /// [`super::BACKOFF_AFTER_MS`] to every [`super::BACKOFF_MAX_MS`] ([`super::probe_pause`]; per-probe timeout up to
    /// [`PROBE_TIMEOUT_MS`], no proxy) until the first 200, and returns what it saw.
    ///
    /// `connection refused` and 503 mean not ready yet; other outcomes keep the wait going and are
    /// remembered for the timeout message. After the 200 the leader must still be alive about one poll
    /// later, else [`ServeError::ExitedAfterReady`]. If the leader exits while polling:
    /// [`ServeError::ExitedBeforeReady`] at once, with the log line that says why. No 200 within
    /// `ready_timeout` of spawn: [`ServeError::ReadyTimeout`] naming the last status. A second call
    /// after success returns the same info without probing.
    pub fn wait_ready(&mut self) -> Result<ReadyInfo, ServeError> {
        self.wait_ready_with(&mut |_| {})
    }

    /// [`Serve::wait_ready`], calling `on_wait` with a progress line (`waiting for readiness at URL: 12 s
    /// (last: connection refused; 230 probes, 230 refused)`) 2 s after the spawn and every 10 s after that
    /// while the serve is not ready ([`Pacer`]).
    pub fn wait_ready_with(
        &mut self,
        on_wait: &mut dyn FnMut(&Waiting),
    ) -> Result<ReadyInfo, ServeError> {
        if let Some((_, info)) = &self.ready {
            return Ok(info.clone());
        }
        let mut url = self.ready_url();
        let mut ready_path = self.spec.ready_path.clone();
        let probe_base = format!(
            "http://{}",
            port::host_port(&probe_host(&self.spec.host), self.spec.port)
        );
        let mut probe_url = format!("{probe_base}{ready_path}");
        let mut fell_back: Option<(String, String, String)> = None;
        // (ms since spawn of the first, count) of the current run of consecutive 5xx other than 503.
        let mut steady_5xx: Option<(f64, u32)> = None;
        let by_name = probe_host(&self.spec.host)
            .parse::<std::net::IpAddr>()
            .is_err();
        let deadline = self.spawned_at + self.spec.ready_timeout;
        let mut polls = 0u32;
        let mut refused = 0u32;
        let mut loading = 0u32;
        let mut statuses: Vec<(f64, String)> = Vec::new();
        let mut last_status = String::new();
        // (ms since spawn of the first, count) of the current run of consecutive 404s.
        let mut steady_404: Option<(f64, u32)> = None;
        let mut pacer = Pacer::new(self.spawned_at);
        // The last pause (backed off from the interval after BACKOFF_AFTER_MS), and when the last probe that
        // was not a 200 was sent (ms since spawn).
        let mut last_pause = Duration::ZERO;
        let mut not_ready_sent_ms = 0.0;
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
                probe_each(&self.probe, &addrs, &ready_path, timeout)
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
            // A last probe the deadline shortened (to as little as 50 ms) and that timed out says more
            // about a busy runner than about the serve: the last status it did answer stays the one named.
            let cut_by_deadline = matches!(outcome, Probe::Timeout)
                && timeout < Duration::from_millis(PROBE_TIMEOUT_MS)
                && !last_status.is_empty();
            if !cut_by_deadline {
                last_status = outcome.describe();
            }
            steady_404 = match (&outcome, steady_404) {
                (Probe::Status(404, _), Some((since, n))) => Some((since, n + 1)),
                (Probe::Status(404, _), None) => Some((sent_ms, 1)),
                _ => None,
            };
            steady_5xx = match (&outcome, steady_5xx) {
                (Probe::Status(c, _), run) if (500..600).contains(c) && *c != 503 => {
                    run.map(|(since, n)| (since, n + 1)).or(Some((sent_ms, 1)))
                }
                _ => None,
            };
            if let (Some((since, n)), Some(next), None) =
                (steady_5xx, &self.spec.fallback_ready, &fell_back)
            {
                if is_steady_404(n, sent_ms - since) && *next != ready_path {
                    fell_back = Some((ready_path.clone(), outcome.describe(), next.clone()));
                    ready_path = next.clone();
                    probe_url = format!("{probe_base}{ready_path}");
                    url = format!("{}{ready_path}", self.base_url());
                    statuses.push((round1(sent_ms), format!("then {next}")));
                    steady_5xx = None;
                }
            }
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
                    ready_window_ms: round1(ready_ms - not_ready_sent_ms),
                    polls,
                    refused_polls: refused,
                    loading_polls: loading,
                    statuses,
                    fell_back,
                    listener_pid,
                    listener_in_group,
                    pinned: answered.map(|a| a.to_string()),
                };
                self.pinned = answered;
                self.ready = Some((ready_at, info.clone()));
                return Ok(info);
            }
            let now = Instant::now();
            if let Some(secs) = pacer.due(now) {
                let counts = (polls, refused, loading);
                on_wait(&self.waiting(&url, secs, statuses.last(), counts));
            }
            if now >= deadline {
                return Err(ServeError::ReadyTimeout {
                    url,
                    timeout_s: self.spec.ready_timeout.as_secs_f64(),
                    last_status,
                    polls,
                    log_tail: self.log_tail(ERROR_TAIL_LINES),
                });
            }
            not_ready_sent_ms = sent_ms;
            let base = self.pause(steady_5xx.is_some() && fell_back.is_none());
            last_pause = super::probe_pause(base, last_pause, self.spawned_at.elapsed());
            if let Some(exit) = self.wait_exit(last_pause.min(deadline - now)) {
                return Err(self.exited_before_ready(&exit));
            }
        }
    }

    /// The pause before the next readiness probe: the spec's interval, or at least [`ERRING_POLL_MS`] while
    /// the ready path errs (`erring_before_fallback`: a 5xx other than 503, the fallback not yet taken) and
    /// the spec has a fallback to ask next.
    fn pause(&self, erring_before_fallback: bool) -> Duration {
        if erring_before_fallback && self.spec.fallback_ready.is_some() {
            self.spec
                .poll_interval
                .max(Duration::from_millis(ERRING_POLL_MS))
        } else {
            self.spec.poll_interval
        }
    }

    /// The progress line of a readiness wait at `secs`: the last outcome (`last`: its label), the probes
    /// sent, refused and answered 503 (`counts`), and the serve log's last line (what a loading serve does).
    fn waiting(
        &self,
        url: &str,
        secs: u64,
        last: Option<&(f64, String)>,
        (polls, refused, loading): (u32, u32, u32),
    ) -> Waiting {
        let tail = self.log_tail(5);
        let log = crate::io::progress::last_line(&tail)
            .map(|l| format!("; log: {l}"))
            .unwrap_or_default();
        let last = match last.map(|(_, l)| l.as_str()) {
            Some("refused") => "connection refused".to_string(),
            Some(code) if code.parse::<u16>().is_ok() => format!("HTTP {code}"),
            Some(other) => other.to_string(),
            None => "-".to_string(),
        };
        Waiting::new(
            format!("waiting for readiness at {url}"),
            secs,
            Some(&format!(
                "last: {last}; {polls} probes, {refused} refused, {loading} loading{log}"
            )),
        )
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

    pub(super) fn exited_before_ready(&self, exit: &ExitInfo) -> ServeError {
        let log_tail = self.log_tail(ERROR_TAIL_LINES);
        ServeError::ExitedBeforeReady {
            status: exit.status.clone(),
            ready_ms_elapsed: round1(ms(exit.at.saturating_duration_since(self.spawned_at))),
            cause_line: cause_line(&log_tail),
            log_tail,
        }
    }

    pub(super) fn exited_after_ready(&self, exit: &ExitInfo, ready_at: Instant) -> ServeError {
        let log_tail = self.log_tail(ERROR_TAIL_LINES);
        ServeError::ExitedAfterReady {
            status: exit.status.clone(),
            after_ready_s: exit.at.saturating_duration_since(ready_at).as_secs_f64(),
            cause_line: cause_line(&log_tail),
            log_tail,
        }
    }
}

/// Every address `host` resolves to for `port`, in the resolver's order (`localhost`: `::1` and
/// `127.0.0.1`, either first by the system's configuration), duplicates removed; empty when it does not
/// resolve.
pub(crate) fn probe_addrs(host: &str, port: u16) -> Vec<SocketAddr> {
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
pub(crate) fn probe_each(
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
