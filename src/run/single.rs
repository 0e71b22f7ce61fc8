//! One run of a plain gate, and the steps every run of a serve takes (a plain gate's, each arm of a pair's):
//! setup, the API key, the client, the serve started or reached, identified, the requests sent, the serve
//! stopped. Each step returns a typed [`Stop`]; the run records a failure once, as `serve.failure`.

use std::path::Path;
use std::time::Duration;

use crate::error::EvidenceError;
use crate::evidence::{self, EvidenceWriter, RunSummary};
use crate::io::{client, serve};
use crate::judge::outcome::RunOutcome;
use crate::sinks::events::Step;
use crate::spec::{GateSpec, ServeMode};
use crate::vocab::{FailureCode, ServeFailure};

use super::lifecycle::{self, ActiveRun};
use super::step::{Stop, Target};
use super::{detect, reach, send, setup};

/// Runs a plain gate live (see [`super::runner::run`]) and judges it.
pub(super) fn run_single(
    gate: &GateSpec,
    root: &Path,
    progress: &mut dyn FnMut(&Step),
) -> Result<RunOutcome, EvidenceError> {
    let notes = lifecycle::prepare_process();
    let w = lifecycle::writer(
        gate,
        EvidenceWriter::create(root, &gate.name, &evidence::stamp_utc())?,
    );
    let _active = ActiveRun::new(w.path(crate::evidence::layout::RUN_FILE));
    let mut summary = lifecycle::new_summary(gate);
    summary.notes.extend(notes);
    w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())?;
    w.write_summary(&summary)?;
    progress(&Step::EvidenceDir(w.dir().to_path_buf()));

    let hold = lifecycle::take_hold(gate, progress);
    let result = match &hold {
        Err(f) => {
            summary.serve.failure = Some(f.to_string());
            Ok(())
        }
        Ok(h) => {
            if let Some(h) = h {
                summary.notes.push(format!(
                    "hold {} taken after {:.0} ms",
                    gate.hold
                        .as_ref()
                        .and_then(|x| x.lock.as_ref())
                        .map(|l| l.display().to_string())
                        .unwrap_or_default(),
                    h.waited_ms
                ));
            }
            let target = Target {
                mode: &gate.serve.mode,
                env: &gate.serve.env,
                setup: true,
            };
            drive_target(gate, &target, &w, &mut summary, progress)
        }
    };
    lifecycle::finish_run(&w, &mut summary, result)?;

    drop(hold);
    let ev = crate::loaded::load(w.dir())?;
    let mut verdicts = crate::loaded::judge_run(gate, &ev);
    verdicts.extend(crate::run::load::judge_dir(gate, w.dir()));
    // A signal that arrived while judging: the run still ends interrupted, its verdicts never shown.
    lifecycle::interrupted_checkpoint(&w, &mut summary);
    // The outcome states what the evidence says (as written: the privacy rule applied), as a re-judge would.
    drop(summary);
    Ok(RunOutcome {
        dir: w.dir().to_path_buf(),
        summary: ev.run.clone(),
        verdicts,
        pair: None,
    })
}

/// [`drive_steps`], and with an API key: progress lines masked as printed, and afterwards (every return
/// path) the key masked in every file of the run directory and in the summary (`crate::judge::redact`).
pub(super) fn drive_target(
    gate: &GateSpec,
    target: &Target,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let Some(secret) = crate::judge::redact::secret_of(gate) else {
        return drive_target_inner(gate, target, w, summary, progress);
    };
    let mut masked =
        |step: &Step| progress(&step.map_text(&|t| crate::judge::redact::mask_str(t, &secret)));
    let result = drive_target_inner(gate, target, w, summary, &mut masked);
    let files = super::scrub::scrub_dir(w.dir(), &secret);
    crate::judge::redact::mask_summary(summary, &secret);
    if !files.is_empty() {
        let list: Vec<String> = files
            .iter()
            .map(|(p, n)| {
                format!(
                    "{} ({n})",
                    p.file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                        .unwrap_or_default()
                )
            })
            .collect();
        summary.notes.push(format!(
            "the API key (serve.api_key_env) echoed by the serve was masked in: {}",
            list.join(", ")
        ));
    }
    result
}

/// [`drive_steps`] with its [`Stop`] recorded: a failure as `serve.failure` (the run then ends `complete`
/// and is judged failed), an interruption as nothing (the caller's checkpoint ends the run), an evidence
/// error returned.
fn drive_target_inner(
    gate: &GateSpec,
    target: &Target,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    match drive_steps(gate, target, w, summary, progress) {
        Ok(()) | Err(Stop::Interrupted) => Ok(()),
        Err(Stop::Failed(f)) => {
            summary.serve.failure = Some(f.to_string());
            Ok(())
        }
        Err(Stop::Evidence(e)) => Err(e),
    }
}

/// The run's steps, in order. A failure once the serve answers (the wrong server, the run's deadline, a
/// serve that died) is recorded as it happens and the serve is still stopped.
fn drive_steps(
    gate: &GateSpec,
    target: &Target,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), Stop> {
    let spec = &gate.serve;
    // Every process the run starts carries this tag, so that whatever they leave behind is found.
    let tag = crate::io::signals::new_run_tag();
    // Setup (idempotent provisioning).
    if target.setup && !spec.setup.is_empty() {
        setup::step(spec, w, summary, progress)?;
    }
    let api_key = api_key(spec)?;
    // Every chat request goes through the sender (timed the way the load client times them); probes and
    // the other GETs share its reqwest client.
    let sender = client::Sender::new(
        Duration::from_secs_f64(gate.request.timeout_s),
        api_key.as_deref(),
    )
    .map_err(|e| ServeFailure::new(FailureCode::HttpClient, e.to_string()))?;
    let http = sender.http().clone();

    let (mut started, base_url) = match target.mode {
        ServeMode::Command(argv) => {
            let s = reach::start(gate, target, argv, &tag, w, summary, progress)?;
            let url = s.base_url();
            (Some(s), url)
        }
        ServeMode::Url(url) => (None, reach::reach_url(gate, url, &http, summary, progress)?),
    };

    // A `url` serve's footprint through the pid its `[serve] pid_file` names, from its readiness on.
    let attached = match (&started, &spec.pid_file) {
        (None, Some(f)) => Some(serve::Attached::start(f)),
        _ => None,
    };

    // The gate's samplers, from the serve's readiness to its stop (never stopping the run).
    let samplers =
        (!gate.samples.is_empty()).then(|| crate::io::sampler::Samplers::start(&gate.samples));

    // What the serve says about itself; without an engine, which engine it is (spec/detect.rs).
    let detected_gate = detect::identify(gate, &http, &base_url, w, summary, progress);
    let gate = detected_gate.as_ref().unwrap_or(gate);
    if let Some(f) = detect::check_models(gate, summary, progress) {
        summary.serve.failure = Some(f.to_string());
    }
    w.write_summary(summary)?;

    let sent = Sent {
        sender: &sender,
        base_url: &base_url,
        api_key: api_key.as_deref(),
    };
    send_requests(
        gate,
        w,
        summary,
        &sent,
        (started.as_mut(), attached.as_ref()),
        progress,
    )?;
    let dialect = crate::analysis::dialect::run_note_for(&summary.requests, gate.serve.engine);
    for note in cold_first_note(gate, summary).into_iter().chain(dialect) {
        progress(&Step::Note(note.clone()));
        summary.notes.push(note);
    }
    if let Some(s) = started {
        reach::stop(s, &tag, w, summary, progress);
    }
    if let Some(a) = attached {
        let mut fp = a.finish();
        // The memory over the run, beside the CPU window the requests marked (as a started serve's).
        if let Some(w) = summary.serve.footprint.take() {
            fp.cpu = w.cpu;
            if fp.cpu.is_none() && fp.cpu_unavailable.is_none() {
                fp.cpu_unavailable = w.cpu_unavailable;
            }
        } else if fp.cpu_unavailable.is_none() {
            fp.cpu_unavailable = Some(
                "no judged request was sent in order (the serve failed first, or a [load] gate's sweep points: not windowed)".into(),
            );
        }
        summary.serve.footprint = Some(fp);
    }
    if let Some(s) = samplers {
        summary.serve.samples = s.finish();
        for series in &summary.serve.samples {
            if series.failed > 0 {
                summary.notes.push(format!(
                    "sampler {}: {} of {} samples gave no value: {}",
                    series.name,
                    series.failed,
                    series.taken,
                    series.reasons.join("; ")
                ));
            }
        }
    }
    reach::copy_log_file(gate, w, summary);
    Ok(())
}

/// `cold_first_request: ...` when the run's first timed judged request was far slower to its first token
/// than the rest (`analysis::cold`, the rule the first_token verdict applies), else `cold_warmup_request:
/// ...` when the run's first request, a warmup, was far slower than the judged ones; from the figures
/// `run.json` keeps per request. None when the serve failed during the run (it exited, or a `url` serve
/// went away): a slow first reply then says nothing about its readiness.
fn cold_first_note(gate: &GateSpec, summary: &RunSummary) -> Option<String> {
    if summary.serve.failure.is_some() {
        return None;
    }
    let warmup = summary.requests.iter().filter(|r| r.warmup).count();
    let mut ttfts: Vec<(usize, Option<f64>)> = summary
        .requests
        .iter()
        .filter(|r| !r.warmup && gate.request.timed(&r.prompt))
        .map(|r| {
            let f = r.figures.as_ref();
            let ok = r.transport_error.is_none() && f.is_some_and(|f| f.failed.is_none());
            (r.index, f.and_then(|f| f.ttft_ms).filter(|_| ok))
        })
        .collect();
    ttfts.sort_by_key(|(i, _)| *i);
    if let Some(c) = crate::analysis::cold::cold_first(&ttfts) {
        return Some(c.note(warmup));
    }
    // The run's first request was a warmup: a cold one is still said (readiness did not mean ready), though
    // it judged nothing.
    let first = summary.requests.iter().min_by_key(|r| r.index)?;
    let f = first.figures.as_ref();
    let ok = first.transport_error.is_none() && f.is_some_and(|f| f.failed.is_none());
    if !first.warmup || !ok {
        return None;
    }
    let mut with_warmup = vec![(first.index, f.and_then(|f| f.ttft_ms))];
    with_warmup.extend(ttfts);
    crate::analysis::cold::cold_first(&with_warmup).map(|c| c.warmup_note())
}

/// The API key `[serve] api_key_env` names (None without one). Err: `api_key_missing` when the variable is
/// not set or empty, `api_key_unsafe` when the key cannot be masked safely (`judge::redact::check_key`).
fn api_key(spec: &crate::spec::ServeSpec) -> Result<Option<String>, ServeFailure> {
    let Some(var) = &spec.api_key_env else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(k) if !k.is_empty() => match crate::judge::redact::check_key(&k) {
            Ok(()) => Ok(Some(k)),
            Err(why) => Err(ServeFailure::new(
                FailureCode::ApiKeyUnsafe,
                format!("environment variable {var} (serve.api_key_env): {why}; the serve was not started"),
            )),
        },
        _ => Err(ServeFailure::new(
            FailureCode::ApiKeyMissing,
            format!("environment variable {var} (serve.api_key_env) is not set"),
        )),
    }
}

/// Where the requests go: the sender, the serve's base URL and the API key.
struct Sent<'a> {
    sender: &'a client::Sender,
    base_url: &'a str,
    api_key: Option<&'a str>,
}

/// The requests, unless the serve already failed: a load gate's sweep points ([`crate::run::load`]) or the
/// plain requests ([`send::send_all`]), then the `[contract]` checks' ([`super::contract::send_checks`]); with the serve's clock (`[serve] clock = "metrics"`), `/metrics` read
/// before and after and its deltas recorded (`serve.metrics`).
fn send_requests(
    gate: &GateSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    to: &Sent,
    (started, attached): (Option<&mut serve::Serve>, Option<&serve::Attached>),
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let http = to.sender.http();
    // The serve's own clock from its /metrics (vLLM, SGLang, TGI): read before and after the requests.
    let metrics_before = (summary.serve.failure.is_none()
        && gate.serve.clock == crate::spec::profile::ServeClock::Metrics)
        .then(|| {
            send::read_metrics(
                http,
                to.base_url,
                w,
                crate::evidence::layout::METRICS_BEFORE,
            )
        })
        .flatten();
    if summary.serve.failure.is_none() && gate.load.is_some() {
        summary.planned = Some(0);
        crate::run::load_sweep::send_points(gate, w, summary, to.base_url, to.api_key, progress)?;
    } else if summary.serve.failure.is_none() {
        send::send_all(
            gate,
            w,
            summary,
            to.sender,
            to.base_url,
            (started, attached),
            progress,
        )?;
    }
    if let Some(before) = metrics_before {
        if let Some(after) =
            send::read_metrics(http, to.base_url, w, crate::evidence::layout::METRICS_AFTER)
        {
            summary.serve.metrics = crate::evidence::serve_clock::deltas(&before, &after);
            summary.serve.counters = crate::evidence::serve_clock::counter_deltas(&before, &after);
            w.write_summary(summary)?;
        }
    }
    // The contract checks after the speed trials and their /metrics, so they never disturb a timed request
    // or the serve's clock.
    if summary.serve.failure.is_none() && gate.load.is_none() {
        super::contract::send_checks(gate, w, to.sender, to.base_url, progress)?;
    }
    Ok(())
}
