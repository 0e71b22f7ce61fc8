//! The run's serve: started from its command (a free port, the hold wrapper, the run tag, readiness), or
//! reached at its URL (readiness, pinned to the address that answered); and at the end stopped, with
//! whatever it detached.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::evidence::{EvidenceWriter, RunSummary};
use crate::io::{client, serve};
use crate::sinks::events::Step;
use crate::spec::GateSpec;
use crate::vocab::{FailureCode, ServeFailure};

use super::step::{serve_failure, Stop, Target};

/// Starts the serve from `argv` (`{host}`, `{port}` filled; `[serve] port = 0` takes a free port), every
/// process of it tagged `tag`, and waits until it is ready: `serve.mode`, `command`, `base_url`,
/// `model_file`, `pid`, `ready_ms` and the ready timeline recorded. Err: `no_free_port`, the serve's own
/// failure to start or to become ready (then stopped, `serve.stop` recorded), [`Stop::Interrupted`] when the
/// stop signal's teardown ended it, or an evidence error.
pub(super) fn start(
    gate: &GateSpec,
    target: &Target,
    argv: &[String],
    tag: &str,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<serve::Serve, Stop> {
    let spec = &gate.serve;
    let port = if spec.port == 0 {
        crate::io::port::free_port(&spec.host)
            .map_err(|e| ServeFailure::new(FailureCode::NoFreePort, e.to_string()))?
    } else {
        spec.port
    };
    let command: Vec<String> = argv
        .iter()
        .map(|a| fill_runtime(a, &spec.host, port))
        .collect();
    // `[hold] command`: the serve runs under the fleet's hold wrapper (the evidence shows the whole argv).
    let command = crate::io::hold::wrap(gate.hold.as_ref(), &command);
    let env: Vec<(String, String)> = spec
        .env
        .iter()
        .chain(target.env.iter())
        .map(|(k, v)| (k.clone(), fill_runtime(v, &spec.host, port)))
        .chain(std::iter::once((
            crate::io::signals::RUN_TAG_ENV.to_string(),
            tag.to_string(),
        )))
        .collect();
    summary.serve.mode = "command".into();
    summary.serve.command = command.clone();
    summary.serve.base_url = format!("http://{}:{port}", url_host(&spec.host));
    // A model of gigabytes takes seconds to hash: the wait says so (2 s, then every 10 s).
    summary.serve.model_file = super::send::paced(
        || crate::evidence::hash_model(&gate.request.model, &command),
        &mut |secs| {
            progress(&Step::Waiting(crate::io::progress::Waiting::new(
                "hashing the model file",
                secs,
                Some("its sha256 goes into run.json"),
            )))
        },
    );
    w.write_summary(summary)?;
    let sspec = serve::ServeSpec {
        command,
        env,
        cwd: None,
        host: spec.host.clone(),
        port,
        ready_path: spec.ready_path.clone(),
        fallback_ready: None,
        ready_timeout: Duration::from_secs_f64(spec.ready_timeout_s),
        poll_interval: Duration::from_millis(25),
        stop_grace: Duration::from_secs_f64(spec.stop_grace_s),
        log_path: w.path(crate::evidence::layout::SERVE_LOG),
    };
    progress(&Step::ServeStarting {
        port,
        command: summary.serve.command.join(" "),
    });
    let mut s = serve::Serve::start(sspec).map_err(|e| {
        progress(&Step::ServeFailedToStart(e.to_string()));
        serve_failure(&e)
    })?;
    summary.serve.pid = Some(s.pid());
    match s.wait_ready_with(&mut |w| progress(&Step::Waiting(w.clone()))) {
        Ok(info) => {
            summary.serve.ready_ms = Some(info.ready_ms);
            summary.serve.ready_window_ms = Some(info.ready_window_ms);
            summary.serve.ready_timeline = info.statuses.clone();
            progress(&Step::ServeReady {
                ready_ms: info.ready_ms,
                polls: info.polls as u64,
            });
        }
        Err(_) if crate::io::signals::interrupted().is_some() => {
            // The stop signal's teardown ended the serve: an interruption, not a serve
            // that failed (run() ends the run as interrupted).
            let stop = s.stop();
            summary.serve.stop = Some(describe_stop(&stop));
            return Err(Stop::Interrupted);
        }
        Err(e) => {
            progress(&Step::ServeNeverReady(e.to_string()));
            let stop = s.stop();
            summary.serve.stop = Some(describe_stop(&stop));
            return Err(Stop::Failed(serve_failure(&e)));
        }
    }
    // For a host that is a name, the address that answered readiness (requests go there).
    summary.serve.base_url = s.base_url();
    Ok(s)
}

/// Waits until the serve at `url` answers its ready path with 200 (`serve.mode` `url`, `ready_ms`; a
/// `[serve] log_file`'s start noted) and returns the base URL the requests go to: for a plain `http://`
/// name, pinned to the address that answered. Err: `ready_timeout` (the deadline, with the probes and
/// refusals counted and what to check; or a steady 404), `tls_refused` (an untrusted certificate, at once),
/// or [`Stop::Interrupted`]. While it waits: a [`Step::Waiting`] at 2 s, then every 10 s.
pub(super) fn reach_url(
    gate: &GateSpec,
    url: &str,
    http: &reqwest::blocking::Client,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<String, Stop> {
    let spec = &gate.serve;
    if let Some(log) = &spec.log_file {
        summary.serve.log_file = Some(crate::evidence::log_file_start(log));
    }
    summary.serve.mode = "url".into();
    summary.serve.base_url = url.to_string();
    let mut base_url = url.to_string();
    let t = Instant::now();
    let deadline = Duration::from_secs_f64(spec.ready_timeout_s);
    let by_name = name_http_url(url);
    let mut steady_404: Option<(Instant, u32)> = None;
    let mut pacer = crate::io::progress::Pacer::new(t);
    let (mut probes, mut refused) = (0u32, 0u32);
    // Nothing started it, so nothing may be on its way: a name that does not resolve fails at once, a port
    // that refuses every probe for URL_REFUSED_WINDOW then, unless the gate sets ready_timeout_s (a serve
    // starting elsewhere), which is then said at once.
    let unresolved = unresolved_host(url);
    if let Some(why) = &unresolved {
        if !spec.ready_timeout_set {
            return Err(Stop::Failed(ServeFailure::new(
                FailureCode::ReadyTimeout,
                format!("{url}: {why}: nothing to wait for, stopped at once; fix [serve] url (set [serve] ready_timeout_s to wait for a serve starting elsewhere)"),
            )));
        }
        progress(&Step::Note(waiting_for_url(url, why, spec.ready_timeout_s)));
    }
    let mut said_waiting = unresolved.is_some();
    // 50 ms between probes, backed off to 500 ms after 2 s (io::serve::probe_pause).
    let mut pause = Duration::ZERO;
    loop {
        if crate::io::signals::interrupted().is_some() {
            return Err(Stop::Interrupted); // run() ends the run as interrupted
        }
        let ready_url = format!("{url}{}", spec.ready_path);
        let probe_t = Duration::from_secs(5);
        let (outcome, answered) = by_name
            .as_ref()
            .and_then(|(host, port)| {
                let addrs = serve::probe_addrs(host, *port);
                serve::probe_each(http, &addrs, &spec.ready_path, probe_t)
            })
            .unwrap_or_else(|| (client::probe(http, &ready_url, probe_t), None));
        probes += 1;
        if matches!(outcome, client::Probe::Refused) {
            refused += 1;
        }
        let last = match outcome {
            client::Probe::Status(200, _) => {
                summary.serve.ready_ms = Some(t.elapsed().as_secs_f64() * 1000.0);
                if let Some(a) = answered {
                    // Pinned: every request goes to the address that answered readiness.
                    base_url = pinned_url(url, a);
                    summary.serve.base_url = base_url.clone();
                }
                return Ok(base_url);
            }
            client::Probe::Status(404, _) => {
                let (since, n) = steady_404.map_or((Instant::now(), 1), |(s, n)| (s, n + 1));
                steady_404 = Some((since, n));
                let span_ms = since.elapsed().as_secs_f64() * 1000.0;
                if serve::is_steady_404(n, span_ms) {
                    return Err(Stop::Failed(ServeFailure::new(
                        FailureCode::ReadyTimeout,
                        format!(
                            "{url}{} answered 404 on {n} probes over {:.1} s: the serve is up but has no such path; stopped waiting early. Set [serve] ready to a path it has (llama-cpp-python has no /health: ready = \"/v1/models\"; or [serve] engine, docs/runtimes.md)",
                            spec.ready_path, span_ms / 1000.0
                        ),
                    )));
                }
                "HTTP 404".to_string()
            }
            client::Probe::Status(status, _) => {
                steady_404 = None;
                format!("HTTP {status}")
            }
            // A certificate that is not trusted now will not be in a second: refuse at once.
            client::Probe::Untrusted(e) => {
                return Err(Stop::Failed(ServeFailure::new(
                    FailureCode::TlsRefused,
                    format!(
                        "{url} presented a certificate servegate does not trust (it trusts the webpki root set only, no self-signed certificates): {e}"
                    ),
                )));
            }
            other => {
                steady_404 = None;
                other.describe()
            }
        };
        if refused == probes && t.elapsed() >= URL_REFUSED_WINDOW {
            if !spec.ready_timeout_set {
                return Err(Stop::Failed(ServeFailure::new(
                    FailureCode::ReadyTimeout,
                    format!(
                        "{url}{} refused all {probes} probes over {:.1} s: nothing listens there (servegate does not start a url serve); start it, or fix [serve] url (set [serve] ready_timeout_s to wait for a serve starting elsewhere)",
                        spec.ready_path,
                        t.elapsed().as_secs_f64()
                    ),
                )));
            }
            if !said_waiting {
                said_waiting = true;
                let why = format!("nothing listens there yet ({probes} probes refused)");
                progress(&Step::Note(waiting_for_url(
                    url,
                    &why,
                    spec.ready_timeout_s,
                )));
            }
        }
        if let Some(secs) = pacer.due(Instant::now()) {
            progress(&Step::Waiting(crate::io::progress::Waiting::new(
                format!("waiting for readiness at {url}{}", spec.ready_path),
                secs,
                Some(&format!("last: {last}; {probes} probes, {refused} refused")),
            )));
        }
        if t.elapsed() >= deadline {
            return Err(Stop::Failed(ServeFailure::new(
                FailureCode::ReadyTimeout,
                format!(
                    "{url}{} not 200 within {} s{}",
                    spec.ready_path,
                    spec.ready_timeout_s,
                    url_advice(url, probes, refused).unwrap_or(format!(
                        " (last: {last}; {probes} probes, {refused} refused)"
                    ))
                ),
            )));
        }
        pause = serve::probe_pause(Duration::from_millis(50), pause, t.elapsed());
        std::thread::sleep(pause);
    }
}

/// How long a `url` serve's port may refuse every readiness probe before the run stops waiting (unless the
/// gate sets `ready_timeout_s`): servegate did not start it, so a refusal this long is a serve that is not
/// running or a wrong port, not one loading.
pub(crate) const URL_REFUSED_WINDOW: Duration = Duration::from_secs(3);

/// Why the host of `url` cannot be reached by name: `the host NAME does not resolve (OS error)`; None for an
/// address, a name that resolves, or a URL that cannot be read (the probe says why).
fn unresolved_host(url: &str) -> Option<String> {
    use std::net::ToSocketAddrs;
    let u = reqwest::Url::parse(url).ok()?;
    let host = u.host_str()?.trim_start_matches('[').trim_end_matches(']');
    let port = u.port_or_known_default()?;
    match (host, port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(_)) => None,
        Ok(None) => Some(format!("the host {host} resolves to no address")),
        Err(e) => Some(format!("the host {host} does not resolve ({e})")),
    }
}

/// The one line said at once when a gate that sets `ready_timeout_s` waits for a `url` serve that is not
/// there yet: what it waits for and why.
fn waiting_for_url(url: &str, why: &str, timeout_s: f64) -> String {
    format!(
        "waiting up to {timeout_s} s for the url serve at {url}: {why}; the gate sets [serve] ready_timeout_s, so a serve starting elsewhere is waited for (without it, this would stop at once)"
    )
}

/// What to say when a `--url` serve never answered and (nearly) every probe was refused: nothing listens at
/// the URL's port (`: nothing listens there (every one of 80 probes refused): is the serve running, on that
/// host and port? ...`). None otherwise (the last outcome says more). `probes`, `refused`: probes sent and
/// refused.
pub(crate) fn url_advice(url: &str, probes: u32, refused: u32) -> Option<String> {
    if probes == 0 || refused * 2 < probes {
        return None;
    }
    let how = if refused == probes {
        format!("every one of {probes} probes refused")
    } else {
        format!("{refused} of {probes} probes refused")
    };
    Some(format!(
        ": nothing listens there ({how}): is the serve running, on that host and port? (start it, or fix the gate's [serve] url, now {url})"
    ))
}

/// Stops the serve the run started (after [`serve::SETTLE`] when it answered requests and no stop signal
/// came) and what it detached from its group (by `tag`): `serve.stop`, the strays stopped and surviving.
/// A serve found exited on its own, or dead of a crash signal at the stop, fails the run
/// (`server_exited_during_run`, `server_crashed_at_stop`, with the log's tail) unless it already failed.
pub(super) fn stop(
    s: serve::Serve,
    tag: &str,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) {
    let grace = s.spec().stop_grace.min(Duration::from_secs(5));
    if !summary.requests.is_empty() && !crate::io::signals::shutting_down() {
        s.settle(serve::SETTLE);
    }
    let stop = s.stop_with(&mut |wt| progress(&Step::Waiting(wt.clone())));
    summary.serve.stop = Some(describe_stop(&stop));
    // The memory measured over the serve's life, beside the CPU window the requests marked (if any).
    if let Some(mut fp) = stop.footprint.clone() {
        match summary.serve.footprint.take() {
            Some(w) => {
                fp.cpu = w.cpu;
                fp.cpu_unavailable = w.cpu_unavailable;
            }
            None => {
                fp.cpu_unavailable = Some(
                    "no judged request was sent in order (the serve failed first, or a [load] gate's sweep points: not windowed)".into(),
                )
            }
        }
        summary.serve.footprint = Some(fp);
    }
    let exit = || stop.exit.clone().unwrap_or_else(|| "unknown exit".into());
    // A serve that exited on its own after the last check still exited during the run.
    let failure = if stop.already_exited
        && summary.serve.failure.is_none()
        && !summary.requests.is_empty()
        && !crate::io::signals::shutting_down()
    {
        Some(ServeFailure::new(
            FailureCode::ServerExitedDuringRun,
            format!("({}, before the runner stopped it)", exit()),
        ))
    } else if serve::stop_crashed(&stop)
        && summary.serve.failure.is_none()
        && !crate::io::signals::shutting_down()
    {
        // Answered everything, then crashed on the way down: a crashed serve, whatever it answered.
        Some(ServeFailure::new(
            FailureCode::ServerCrashedAtStop,
            format!("({} when stopped)", exit()),
        ))
    } else {
        None
    };
    if let Some(f) = failure {
        summary.serve.failure = Some(f.to_string());
        summary.serve.exit_log_tail = log_tail(&w.path(crate::evidence::layout::SERVE_LOG));
    }
    progress(&Step::ServeStopped(describe_stop(&stop)));
    // What the serve detached from its group (a daemon: double fork, setsid) goes too.
    let (stopped, survived) = crate::io::signals::stop_tagged(tag, grace);
    if !stopped.is_empty() {
        progress(&Step::Note(format!(
            "stopped {} process(es) the serve left outside its group: {}",
            stopped.len(),
            stopped.join(", ")
        )));
        summary.notes.push(format!(
            "the serve left {} process(es) running outside its process group after it stopped (a detached daemon); servegate stopped them: {}{}",
            stopped.len(),
            stopped.join(", "),
            if survived.is_empty() {
                String::new()
            } else {
                format!("; still alive after SIGKILL: {}", survived.join(", "))
            }
        ));
    }
    summary.serve.strays_stopped = stopped;
    summary.serve.strays_survived = survived;
    // serve.log is now at its end of file: the serve's stdout and stderr are the file itself (no pipe,
    // no writer thread of servegate's that could still hold lines), and every process that could write
    // to it, its group and what it detached, is gone (a survivor is in `strays_survived`). Only now is
    // anything judged from it (the route), so a line printed at the stop is never missed.
}

/// A `[serve] log_file` (a serve the run reached at its URL): what it gained during the run copied into the
/// run's `serve.log` (`serve.log_file.copied`; a note when it could not be).
pub(super) fn copy_log_file(gate: &GateSpec, w: &EvidenceWriter, summary: &mut RunSummary) {
    if let (Some(log), Some(start)) = (&gate.serve.log_file, summary.serve.log_file.as_mut()) {
        match crate::evidence::copy_log_since(
            log,
            start,
            &w.path(crate::evidence::layout::SERVE_LOG),
            gate.serve.log_cap_bytes,
        ) {
            Ok(what) => start.copied = Some(what),
            Err(e) => {
                start.copied = Some(format!("not copied: {e}"));
                summary
                    .notes
                    .push(format!("serve.log_file {}: {e}", log.display()));
            }
        }
    }
}

/// `s` with `{port}` and `{host}` filled in.
pub(super) fn fill_runtime(s: &str, host: &str, port: u16) -> String {
    s.replace("{port}", &port.to_string())
        .replace("{host}", host)
}

/// The last lines (up to 10, from the last 64 KiB) of a log file, lossy UTF-8; None when unreadable or empty.
fn log_tail(path: &Path) -> Option<String> {
    let text = serve::tail_file(path, usize::MAX);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    (!tail.is_empty()).then_some(tail)
}

/// `host` as a URL writes it (an IPv6 address in brackets).
fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// How the serve stopped, for `serve.stop` and the progress line: `exit status 0 after 120 ms`.
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

/// For a plain `http://` URL whose host is a name (`http://localhost:8080`): the host and port, so that
/// readiness tries every address the name resolves to ([`serve::probe_addrs`]) and pins the one that
/// answered. `None` for an address host, and for `https://` (its certificate names the host, so the name
/// must stay in the URL).
fn name_http_url(url: &str) -> Option<(String, u16)> {
    let u = reqwest::Url::parse(url).ok()?;
    if u.scheme() != "http" {
        return None;
    }
    let host = u.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    Some((bare.to_string(), u.port_or_known_default()?))
}

/// `url` with its host and port replaced by `addr` (`http://localhost:8080/x` with 127.0.0.1:8080 is
/// `http://127.0.0.1:8080/x`), without a trailing slash.
fn pinned_url(url: &str, addr: std::net::SocketAddr) -> String {
    let Ok(mut u) = reqwest::Url::parse(url) else {
        return url.to_string();
    };
    if u.set_ip_host(addr.ip()).is_err() || u.set_port(Some(addr.port())).is_err() {
        return url.to_string();
    }
    u.to_string().trim_end_matches('/').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_that_refuses_every_probe_is_named_as_nothing_listening() {
        let u = "http://127.0.0.1:9";
        let all = url_advice(u, 40, 40).unwrap();
        assert!(
            all.starts_with(
                ": nothing listens there (every one of 40 probes refused): is the serve running"
            ),
            "{all}"
        );
        assert!(url_advice(u, 40, 30)
            .unwrap()
            .contains("(30 of 40 probes refused)"));
        // A serve that answers (503, timeouts) is not "not running": the last outcome says more.
        assert_eq!(url_advice(u, 40, 3), None);
        assert_eq!(url_advice(u, 0, 0), None);
    }

    #[test]
    fn a_named_http_url_is_pinned_to_the_address_that_answered() {
        assert_eq!(
            name_http_url("http://localhost:8080"),
            Some(("localhost".into(), 8080))
        );
        assert_eq!(
            name_http_url("http://localhost"),
            Some(("localhost".into(), 80))
        );
        assert_eq!(name_http_url("http://127.0.0.1:8080"), None);
        assert_eq!(name_http_url("http://[::1]:8080"), None);
        assert_eq!(name_http_url("https://localhost:8443"), None);
        let v4: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let v6: std::net::SocketAddr = "[::1]:8080".parse().unwrap();
        assert_eq!(
            pinned_url("http://localhost:8080", v4),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            pinned_url("http://localhost:8080/base", v6),
            "http://[::1]:8080/base"
        );
    }
}
