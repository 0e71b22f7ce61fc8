//! The run's requests: a plain gate's in order through the one chat client, checking the serve after each;
//! and the serve's own `/metrics` before and after.

use std::time::{Duration, Instant};

use crate::analysis;
use crate::error::EvidenceError;
use crate::evidence::{self, EvidenceWriter, RequestRecord, RunSummary};
use crate::io::{client, serve};
use crate::sinks::events::Step;
use crate::spec::GateSpec;
use crate::vocab::{FailureCode, ServeFailure};

/// Sends the gate's requests in order (warmups first, then `repeats` rounds of the prompts) within
/// `[request] run_timeout_s`, each written to the evidence as it is answered; after each, a serve the run
/// started is checked alive. Stops early at a stop signal, at the run's deadline (`run_timeout`) and when the
/// serve died (its failure and log tail recorded).
pub(super) fn send_all(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    sender: &client::Sender,
    base_url: &str,
    mut serve: Option<&mut serve::Serve>,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let req = &gate.request;
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
            cpu_start = Some((index, serve.as_deref().and_then(|s| s.cpu_mark())));
        }
        let prompt = &req.prompts[prompt_index];
        let body = client::request_body(req, prompt);
        let sent_utc = evidence::now_utc();
        let ex = client::send_within(
            sender,
            base_url,
            &body,
            Some(Duration::from_secs_f64(req.timeout_s).min(left)),
        );
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
        let reply = analysis::reply_of(&rec, &ex.reads);
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
    }
    if let Some(s) = serve.as_deref() {
        summary.serve.footprint = Some(cpu_window(s, cpu_start, summary));
    }
    Ok(())
}

/// The serve's CPU window over the judged requests sent (`serve.footprint.cpu`; the memory is filled in at
/// the stop), or why there is none.
fn cpu_window(
    s: &serve::Serve,
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
            match s.cpu_mark() {
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
