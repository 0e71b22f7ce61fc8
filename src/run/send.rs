//! The run's requests: a plain gate's in order through the one chat client, checking the serve after each;
//! and the serve's own `/metrics` before and after.

use std::time::{Duration, Instant};

use crate::analysis;
use crate::error::EvidenceError;
use crate::evidence::footprint::RequestHold;
use crate::evidence::{self, EvidenceWriter, RequestRecord, RunSummary};
use crate::io::{client, serve};
use crate::sinks::events::Step;
use crate::spec::GateSpec;
use crate::vocab::{FailureCode, ServeFailure};

/// Sends the gate's requests in order (warmups first, then `repeats` rounds of the prompts) within
/// `[request] run_timeout_s`, each written to the evidence as it is answered; after each, a serve the run
/// started is checked alive. Stops early at a stop signal, at the run's deadline (`run_timeout`) and when the
/// serve died (its failure and log tail recorded). The serve's CPU is marked before the first judged request
/// and after the last: the serve the run started, else a `url` serve's through its `[serve] pid_file`.
pub(super) fn send_all(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    sender: &client::Sender,
    base_url: &str,
    serves: (Option<&mut serve::Serve>, Option<&serve::Attached>),
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    // One thread sends every request (its read buffers reused from one to the next, as on this thread before),
    // so this one can say how long a reply has been awaited.
    std::thread::scope(|scope| {
        let (jobs, job_rx) = std::sync::mpsc::channel::<(serde_json::Value, Duration)>();
        let (done_tx, done) = std::sync::mpsc::channel::<client::Exchange>();
        scope.spawn(move || {
            for (body, timeout) in job_rx {
                let ex = client::send_within(sender, base_url, &body, Some(timeout));
                if done_tx.send(ex).is_err() {
                    break;
                }
            }
        });
        let courier = Courier { jobs, done };
        send_each(gate, w, summary, &courier, base_url, serves, progress)
        // `courier` drops here: the sending thread's queue closes and the scope joins it.
    })
}

/// The sending thread of [`send_all`]: a request in, its exchange out.
struct Courier {
    jobs: std::sync::mpsc::Sender<(serde_json::Value, Duration)>,
    done: std::sync::mpsc::Receiver<client::Exchange>,
}

impl Courier {
    /// Sends `body` (ending by `timeout`) on the sending thread and waits for its exchange, blocked, saying
    /// `WHAT: 12 s (times out at N s)` at 2 s and every 10 s after (a long generation, a serve that loads its
    /// model on the first request). A reply under 2 s prints nothing; the request's timing is the client's own
    /// (stamped inside the send), not this thread's.
    fn send(
        &self,
        body: &serde_json::Value,
        timeout: Duration,
        what: &str,
        progress: &mut dyn FnMut(&Step),
    ) -> client::Exchange {
        let failed = |why: &str| client::Exchange {
            response: client::ResponseMeta {
                transport_error: Some(format!("request failed: {why}")),
                end_ms: Some(0.0),
                ..Default::default()
            },
            reads: Vec::new(),
            body_bytes: 0,
            body_truncated: false,
        };
        if self.jobs.send((body.clone(), timeout)).is_err() {
            return failed("the sending thread has ended");
        }
        let mut pacer = crate::io::progress::Pacer::new(Instant::now());
        loop {
            let wait = pacer.next_due().saturating_duration_since(Instant::now());
            match self.done.recv_timeout(wait) {
                Ok(ex) => return ex,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(secs) = pacer.due(Instant::now()) {
                        progress(&Step::Waiting(
                            crate::io::progress::Waiting::new(
                                what,
                                secs,
                                Some(&format!("times out at {:.0} s", timeout.as_secs_f64())),
                            )
                            .terse_from(crate::io::progress::REQUEST_TERSE_S),
                        ));
                    }
                }
                // It panicked (the scope's end re-raises the panic).
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return failed("the sending thread ended without a reply")
                }
            }
        }
    }
}

/// [`send_all`]'s loop, each request through `courier`.
fn send_each(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    courier: &Courier,
    base_url: &str,
    (mut serve, attached): (Option<&mut serve::Serve>, Option<&serve::Attached>),
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let req = &gate.request;
    // A `url` serve the run did not start: watched through its port after each failed request.
    let mut gone = (serve.is_none()).then(|| UrlWatch::new(base_url));
    let mut plan: Vec<(bool, u32, usize)> = Vec::new();
    let n = req.prompts.len();
    for i in 0..req.warmup_requests as usize {
        plan.push((true, (i / n) as u32, i % n));
    }
    for round in 0..req.repeats {
        for p in 0..req.prompts.len() {
            plan.push((false, round, p));
        }
    }
    let run_deadline = Instant::now() + Duration::from_secs_f64(req.run_timeout_s);
    let planned = plan.len();
    // The serve's CPU over the judged requests: marked before the first judged send and after the last end.
    let mut cpu_start: Option<(usize, Option<serve::CpuMark>)> = None;
    // Each judged request's hold by the run queue (the busy-runner witness, `serve.footprint.cpu.runqueue`).
    let mut holds: Vec<RequestHold> = Vec::new();
    for (index, (warmup, repeat, prompt_index)) in plan.into_iter().enumerate() {
        if crate::io::signals::interrupted().is_some() {
            break; // the run ends interrupted (run() exits); nothing more is sent
        }
        let left = run_deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let f = run_timeout(req.run_timeout_s, index, planned);
            progress(&Step::Note(f.to_string()));
            summary.serve.failure = Some(f.to_string());
            break;
        }
        if !warmup && cpu_start.is_none() {
            cpu_start = Some((index, cpu_mark(serve.as_deref(), attached)));
        }
        let prompt = &req.prompts[prompt_index];
        let body = client::request_body(req, prompt);
        let sent_utc = evidence::now_utc();
        let hold_start =
            (!warmup).then(|| (thread_waits(serve.as_deref(), attached), Instant::now()));
        let timeout = Duration::from_secs_f64(req.timeout_s).min(left);
        let what = format!(
            "waiting for request {index:02}{}'s reply",
            if warmup { " (warmup)" } else { "" }
        );
        let ex = courier.send(&body, timeout, &what, progress);
        if let Some((before, t0)) = hold_start.filter(|(b, _)| !b.is_empty()) {
            let after = thread_waits(serve.as_deref(), attached);
            holds.push(RequestHold {
                index,
                wait_max_ms: serve::max_wait_ms(&before, &after),
                wall_ms: (t0.elapsed().as_secs_f64() * 1000.0 * 10.0).round() / 10.0,
            });
        }
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
            notes: Vec::new(),
        };
        let reply = analysis::reply_of_response(&rec, Some(&ex.response), &ex.reads);
        let fig = crate::analysis::measure::measure(&reply);
        progress(&Step::RequestAnswered {
            index,
            warmup,
            status: ex
                .response
                .status
                .map(|s| format!("HTTP {s}"))
                .unwrap_or_else(|| ex.response.transport_error.clone().unwrap_or_default()),
            ttft_ms: fig.ttft_ms,
            decode_tok_s: fig.decode_tok_s,
            completion_tokens: fig.completion_tokens,
        });
        // Cut or unreachable: the serve may have died mid-reply.
        let failed = rec.transport_error.is_some() || reply.truncated;
        rec.notes = analysis::dialect::note_names(&reply, &fig);
        rec.figures = Some(fig);
        w.append_request_record(&rec)?;
        summary.requests.push(rec);
        if crate::io::signals::interrupted().is_some() {
            break; // the stop signal's teardown ended the serve: not a serve that died
        }
        if let Some(s) = serve.as_deref_mut() {
            if let Err(e) = alive_after(s, failed) {
                summary.serve.failure = Some(super::step::serve_failure(&e).to_string());
                summary.serve.exit_log_tail = e.log_tail().map(str::to_string);
                progress(&Step::ServeDied(e.to_string()));
                w.write_summary(summary)?;
                break;
            }
        }
        if let Some(f) = gone.as_mut().and_then(|g| g.after(index, failed, planned)) {
            summary.serve.failure = Some(f.to_string());
            progress(&Step::ServeDied(f.to_string()));
            w.write_summary(summary)?;
            break;
        }
    }
    if serve.is_some() || attached.is_some() {
        let end = cpu_mark(serve.as_deref(), attached);
        let mut fp = cpu_window(end, cpu_start, summary);
        if let Some(rq) = fp.cpu.as_mut().and_then(|c| c.runqueue.as_mut()) {
            rq.requests = holds;
        }
        summary.serve.footprint = Some(fp);
    }
    Ok(())
}

/// Runs `work` on a thread of its own while this one waits for it, blocked, calling `on_wait` with the whole
/// seconds since the start when a progress line is due ([`crate::io::progress::Pacer`]: 2 s, then every
/// 10 s); returns what `work` returned (a panic of `work` goes on here).
pub(super) fn paced<T: Send>(work: impl FnOnce() -> T + Send, on_wait: &mut dyn FnMut(u64)) -> T {
    let mut pacer = crate::io::progress::Pacer::new(Instant::now());
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let worker = scope.spawn(move || {
            let out = work();
            let _ = tx.send(());
            out
        });
        loop {
            let wait = pacer.next_due().saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(secs) = pacer.due(Instant::now()) {
                        on_wait(secs);
                    }
                }
                // Done, or the worker ended without saying so (it panicked): join says which.
                _ => break,
            }
        }
        match worker.join() {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// The CPU of the serve now: the one the run started, else the `url` serve's its pid file names.
fn cpu_mark(
    serve: Option<&serve::Serve>,
    attached: Option<&serve::Attached>,
) -> Option<serve::CpuMark> {
    match serve {
        Some(s) => s.cpu_mark(),
        None => attached.and_then(|a| a.cpu_mark()),
    }
}

/// The run-queue wait of each of the serve's threads now (the one the run started, else the `url` serve's
/// its pid file names), ns by tid; empty when neither is measured.
fn thread_waits(
    serve: Option<&serve::Serve>,
    attached: Option<&serve::Attached>,
) -> std::collections::HashMap<u32, u64> {
    match serve {
        Some(s) => s.thread_waits(),
        None => attached.map(|a| a.thread_waits()).unwrap_or_default(),
    }
}

/// The serve's CPU window over the judged requests sent (`serve.footprint.cpu`; the memory is filled in at
/// the stop), or why there is none.
fn cpu_window(
    end: Option<serve::CpuMark>,
    start: Option<(usize, Option<serve::CpuMark>)>,
    summary: &RunSummary,
) -> evidence::footprint::Footprint {
    let mut fp = evidence::footprint::Footprint::default();
    let last = summary
        .requests
        .iter()
        .rfind(|r| !r.warmup)
        .map(|r| r.index);
    match (start, last) {
        (Some((first, Some(a))), Some(last)) => {
            match end {
                Some(b) => fp.cpu = Some(a.window(&b, first, last)),
                None => fp.cpu_unavailable = Some(
                    "no process of the serve could be read in /proc after the last judged request"
                        .into(),
                ),
            }
        }
        (Some((_, None)), Some(_)) => {
            fp.cpu_unavailable = Some(
                "no process of the serve could be read in /proc before the first judged request"
                    .into(),
            )
        }
        _ => fp.cpu_unavailable = Some("no judged request was sent".into()),
    }
    fp
}

/// How long a failed request waits for a serve that cut its reply by exiting to be seen exited: the
/// kernel closes a dying process's sockets before its parent can reap it, so the first check can race.
const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// [`serve::Serve::check_alive`]; after a failed request, checked again for up to [`EXIT_SETTLE`] so that a
/// serve that died mid-reply is seen dead now, not one request later.
fn alive_after(s: &mut serve::Serve, failed: bool) -> Result<(), serve::ServeError> {
    s.check_alive()?;
    if failed {
        let until = Instant::now() + EXIT_SETTLE;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(25));
            s.check_alive()?;
        }
    }
    Ok(())
}

/// Consecutive failed requests, each followed by a refused connection to the serve's port, after which a
/// `url` serve counts as gone (fewer when the last planned request is the one that failed).
pub(crate) const URL_GONE_AFTER: usize = 2;

/// A `url` serve watched for going away during the run (the runner did not start it, so there is no process
/// to see exit): after each failed request (a transport error or a cut reply), is anything still listening
/// at its port? [`URL_GONE_AFTER`] failed requests in a row with the port refusing connections after each
/// mean it went away: the run stops sending and says so once, in the words of a started serve's exit
/// (`server_exited_during_run (...)`).
struct UrlWatch {
    base_url: String,
    started: Instant,
    refused_in_a_row: usize,
    first_refused: Option<usize>,
    last_answered: Option<usize>,
}

impl UrlWatch {
    fn new(base_url: &str) -> UrlWatch {
        UrlWatch {
            base_url: base_url.to_string(),
            started: Instant::now(),
            refused_in_a_row: 0,
            first_refused: None,
            last_answered: None,
        }
    }

    /// After request `index` of `planned` (`failed`: it failed): the serve's failure when it went away.
    fn after(&mut self, index: usize, failed: bool, planned: usize) -> Option<ServeFailure> {
        if !failed {
            self.last_answered = Some(index);
            self.refused_in_a_row = 0;
            self.first_refused = None;
            return None;
        }
        if !nothing_listens(&self.base_url) {
            self.refused_in_a_row = 0;
            self.first_refused = None;
            return None;
        }
        self.refused_in_a_row += 1;
        self.first_refused.get_or_insert(index);
        let last = index + 1 == planned;
        if self.refused_in_a_row < URL_GONE_AFTER && !last {
            return None;
        }
        Some(url_gone(
            &self.base_url,
            &GoneAt {
                secs: self.started.elapsed().as_secs_f64(),
                utc: evidence::now_utc()
                    .split('.')
                    .next()
                    .map(|s| s.trim_end_matches('Z').to_string() + "Z")
                    .unwrap_or_default(),
                last_answered: self.last_answered,
                first_failed: self.first_refused.unwrap_or(index),
                sent: index + 1,
                planned,
            },
        ))
    }
}

/// When and after which request a `url` serve was found gone ([`url_gone`]).
pub(crate) struct GoneAt {
    /// Seconds from the first request sent to the finding.
    pub(crate) secs: f64,
    /// The finding's UTC time (RFC 3339).
    pub(crate) utc: String,
    /// The last request it answered (send-order index), if any.
    pub(crate) last_answered: Option<usize>,
    /// The first of the failed requests in a row.
    pub(crate) first_failed: usize,
    /// Requests sent (warmups included), and planned.
    pub(crate) sent: usize,
    pub(crate) planned: usize,
}

/// `server_exited_during_run (the url serve went away: nothing listens at URL any more ...)`: the failure of
/// a `url` serve found gone, in a started serve's words, saying when, after which request, and how many of
/// the planned requests were sent (the rest are not).
pub(crate) fn url_gone(base_url: &str, at: &GoneAt) -> ServeFailure {
    let answered = match at.last_answered {
        Some(i) => format!("after request {i:02}, the last it answered"),
        None => "before it answered any request".to_string(),
    };
    let last = at.sent.saturating_sub(1);
    let failed = if at.first_failed >= last {
        format!("request {last:02} failed and its port refused connections after it")
    } else {
        format!(
            "requests {:02} to {last:02} failed and its port refused connections after each",
            at.first_failed
        )
    };
    ServeFailure::new(
        FailureCode::ServerExitedDuringRun,
        format!(
            "(the url serve went away: nothing listens at {base_url} any more, {:.1} s into the requests at {}, {answered}; {failed}; {} of {} planned requests were sent, the other {} not)",
            at.secs,
            at.utc,
            at.sent,
            at.planned,
            at.planned - at.sent,
        ),
    )
}

/// True when every address of `base_url`'s host refuses a TCP connection to its port now (within 1 s each):
/// nothing listens there. False when one accepts, times out or the URL cannot be read.
fn nothing_listens(base_url: &str) -> bool {
    use std::net::ToSocketAddrs;
    let Ok(u) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let (Some(host), Some(port)) = (u.host_str(), u.port_or_known_default()) else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    let addrs: Vec<_> = addrs.collect();
    !addrs.is_empty()
        && addrs.iter().all(|a| {
            matches!(
                std::net::TcpStream::connect_timeout(a, Duration::from_secs(1)),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
            )
        })
}

/// `run_timeout: ...` for a run that passed `[request] run_timeout_s` before request `index` of `planned`.
fn run_timeout(run_timeout_s: f64, index: usize, planned: usize) -> ServeFailure {
    ServeFailure::new(
        FailureCode::RunTimeout,
        format!(
        "the requests passed [request] run_timeout_s = {run_timeout_s} s; {index} of {planned} planned requests were sent"
        ),
    )
}

/// `GET /metrics` (best effort: `None` when it does not answer 200), its text kept in the run directory as
/// `name`.
pub(super) fn read_metrics(
    http: &reqwest::blocking::Client,
    base_url: &str,
    w: &EvidenceWriter,
    name: &str,
) -> Option<String> {
    let (status, body) = client::get(http, base_url, "/metrics", Duration::from_secs(5)).ok()?;
    if status != 200 {
        return None;
    }
    crate::evidence::write_atomic(&w.path(name), body.as_bytes()).ok()?;
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A url serve gone: its failure in a started serve's words (server_exited_during_run), saying when,
    /// after which request, which failed, and how many of the planned were sent.
    #[test]
    fn a_url_serve_gone_is_said_in_a_started_serve_s_words() {
        let at = |first_failed, sent| GoneAt {
            secs: 12.34,
            utc: "2026-12-07T06:00:00Z".into(),
            last_answered: Some(4),
            first_failed,
            sent,
            planned: 21,
        };
        let f = url_gone("http://127.0.0.1:8080", &at(5, 7)).to_string();
        assert_eq!(f, "server_exited_during_run (the url serve went away: nothing listens at http://127.0.0.1:8080 any more, 12.3 s into the requests at 2026-12-07T06:00:00Z, after request 04, the last it answered; requests 05 to 06 failed and its port refused connections after each; 7 of 21 planned requests were sent, the other 14 not)");
        assert_eq!(
            FailureCode::of_recorded(&f),
            Some(FailureCode::ServerExitedDuringRun)
        );
        let one = url_gone("http://127.0.0.1:8080", &at(20, 21)).to_string();
        assert!(one.contains("; request 20 failed and its port refused connections after it; 21 of 21 planned requests were sent, the other 0 not)"), "{one}");
    }
}
