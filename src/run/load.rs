//! One live load run: every sweep point of a gate's `[load]` (sent one after the other by [`super::load_sweep`]),
//! against a serve that is already up (the runner starts and stops it around this, as for any gate). Each point writes its own run
//! directory under the gate's (`c16/`, `r8/`): the same `NN.request.json`, `NN.response.json`,
//! `NN.reads.jsonl` and `run.json` as a plain run (so `loaded::load` reads it and judging re-measures every
//! request from its timed reads), plus `load.json`, the client's schedule of every request
//! ([`LoadRecord`]). Judging is [`crate::judge::load`].

use std::time::Duration;

use crate::error::EvidenceError;
use crate::evidence::load::{ClientRecord, LoadRecord, LOAD_FILE, LOAD_SCHEMA};
use crate::evidence::{self, EvidenceWriter, RequestRecord, RunStatus, RunSummary};
use crate::io::client;
use crate::io::load_client::{self, LoadExchange, Schedule, Target};
use crate::spec::load::{Arrival, LoadGate, Point};
use crate::spec::GateSpec;
use crate::vocab::FailureCode;

/// One prompt of a load run: the text and its `max_tokens`.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPrompt {
    /// The user message.
    pub prompt: String,
    /// `max_tokens` for it.
    pub max_tokens: u32,
}

/// The prompts of a load gate: the dataset's lines (`{"prompt": "...", "max_tokens": N}`, `max_tokens`
/// optional) or the gate's prompts with `[request] max_tokens`. Errors name the file and line.
pub fn prompts(gate: &GateSpec, load: &LoadGate) -> Result<Vec<LoadPrompt>, String> {
    let Some(path) = &load.spec.dataset else {
        return Ok(gate
            .request
            .prompts
            .iter()
            .map(|p| LoadPrompt {
                prompt: p.clone(),
                max_tokens: gate.request.max_tokens,
            })
            .collect());
    };
    Ok(
        crate::spec::load::read_dataset(path, gate.request.max_tokens)?
            .into_iter()
            .map(|(prompt, max_tokens)| LoadPrompt { prompt, max_tokens })
            .collect(),
    )
}

/// The request body of one load request: the gate's body for the prompt, its `max_tokens`, and
/// `ignore_eos` when the gate asks.
pub(crate) fn body(gate: &GateSpec, load: &LoadGate, p: &LoadPrompt) -> serde_json::Value {
    let mut b = client::request_body(&gate.request, &p.prompt);
    b["max_tokens"] = p.max_tokens.into();
    if load.spec.ignore_eos {
        b["ignore_eos"] = true.into();
    }
    b
}

/// How many judged requests a point plans: `requests`, or for `duration_s` the open loop's schedule within
/// the duration (closed loop: as many as the duration allows, at most [`DURATION_CAP`]).
pub(super) fn planned(load: &LoadGate, point: Point) -> usize {
    match (load.spec.requests, load.spec.duration_s, point) {
        (Some(n), _, _) => n as usize,
        (None, Some(d), Point::Rate(r)) => ((d * r).ceil() as usize).max(1),
        _ => DURATION_CAP,
    }
}

/// Most requests a `duration_s` closed-loop point prepares.
pub(crate) const DURATION_CAP: usize = 20_000;

/// Runs one sweep point into `pw` and returns a one-line account.
pub fn run_point(
    gate: &GateSpec,
    load: &LoadGate,
    point: Point,
    prompts: &[LoadPrompt],
    target: &Target,
    pw: &EvidenceWriter,
    parent: &RunSummary,
) -> Result<String, EvidenceError> {
    if load.spec.driver.is_tool() {
        let n = load.spec.requests.unwrap_or(1) as usize;
        let mut summary = point_summary(gate, point, parent, n, 0);
        pw.write_summary(&summary)?;
        let pairs: Vec<(String, u32)> = prompts
            .iter()
            .map(|x| (x.prompt.clone(), x.max_tokens))
            .collect();
        return match super::load_tool::run_point(gate, load, point, &pairs, target, pw, &summary) {
            Ok(note) => Ok(note),
            Err(why) => {
                summary
                    .notes
                    .push(format!("load_client: {}: {why}", load.spec.driver.name()));
                finish_unsent(load, point, 0, n, summary, pw)
            }
        };
    }
    let warmup = load.spec.warmup_requests as usize;
    let n = planned(load, point);
    let timeout = Duration::from_secs_f64(gate.request.timeout_s);
    let deadline = Some(Duration::from_secs_f64(
        load.spec
            .duration_s
            .unwrap_or(gate.request.run_timeout_s)
            .min(gate.request.run_timeout_s),
    ));
    let pick = |i: usize| &prompts[i % prompts.len()];
    let cpus = client_cpus(load).map_err(|e| format!("load_client: {e}"));
    let (schedule, warm_schedule) = schedules(load, point, n);
    let mut summary = point_summary(gate, point, parent, n, warmup);
    pw.write_summary(&summary)?;

    let bodies_of = |range: std::ops::Range<usize>| -> Vec<serde_json::Value> {
        range.map(|i| body(gate, load, pick(i))).collect()
    };
    let mut timings = Vec::new();
    let record = |pw: &EvidenceWriter,
                  summary: &mut RunSummary,
                  index: usize,
                  warm: bool,
                  prompt_i: usize,
                  b: &serde_json::Value,
                  x: &LoadExchange|
     -> Result<(), EvidenceError> {
        pw.write_request(index, b, &x.exchange.response, &x.exchange.reads)?;
        let mut rec = RequestRecord {
            index,
            warmup: warm,
            prompt_index: prompt_i % prompts.len(),
            repeat: (prompt_i / prompts.len()) as u32,
            prompt: pick(prompt_i).prompt.clone(),
            stream: gate.request.stream,
            sent_utc: String::new(),
            http_status: x.exchange.response.status,
            transport_error: x.exchange.response.transport_error.clone(),
            body_bytes: x.exchange.body_bytes,
            body_truncated: x.exchange.body_truncated,
            figures: None,
            notes: Vec::new(),
        };
        let reply =
            crate::analysis::reply_of_response(&rec, Some(&x.exchange.response), &x.exchange.reads);
        let fig = crate::analysis::measure::measure(&reply);
        rec.notes = crate::analysis::dialect::note_names(&reply, &fig);
        rec.figures = Some(fig);
        summary.requests.push(rec);
        Ok(())
    };
    let started_utc = evidence::now_utc();
    let cpus = match cpus {
        Ok(c) => c,
        Err(e) => {
            // Nothing is sent on CPUs the runner may not use: the point records why.
            summary.notes.push(e);
            return finish_unsent(load, point, warmup, n, summary, pw);
        }
    };
    let wb = bodies_of(0..warmup);
    let jb = bodies_of(0..n);
    let Sent {
        warmup: warm_done,
        judged: done,
        driver,
        client,
    } = send(
        load,
        point,
        target,
        (&wb, &jb),
        (&warm_schedule, &schedule),
        deadline,
        timeout,
        cpus.as_deref(),
        pw,
        &mut summary,
    );
    for x in &warm_done {
        let i = x.timing.index;
        record(pw, &mut summary, i, true, i, &wb[i], x)?;
        timings.push(x.timing.clone());
    }
    for x in &done {
        let i = x.timing.index;
        let mut t = x.timing.clone();
        t.index = warmup + i;
        record(pw, &mut summary, warmup + i, false, i, &jb[i], x)?;
        timings.push(t);
    }
    for r in summary.requests.iter_mut() {
        r.sent_utc = started_utc.clone();
    }
    if load.spec.duration_s.is_some() {
        // A duration plans what it could send: the requests started within it.
        summary.planned = Some(done.len());
    }
    let mut rec = load_record(load, point, warmup, summary.planned.unwrap_or(n), timings);
    rec.client = client;
    rec.driver = driver;
    let json = serde_json::to_vec_pretty(&rec).unwrap_or_default();
    pw.write(LOAD_FILE, &json)?;
    summary.status = RunStatus::Complete;
    summary.ended_utc = Some(evidence::now_utc());
    pw.write_summary(&summary)?;
    let failed = summary
        .requests
        .iter()
        .filter(|r| !r.warmup)
        .filter(|r| {
            r.figures.as_ref().is_some_and(|f| f.failed.is_some()) || r.transport_error.is_some()
        })
        .count();
    Ok(format!(
        "load point {}: {} of {} planned requests sent, {failed} failed (evidence {})",
        point.label(),
        done.len(),
        summary.planned.unwrap_or(n),
        pw.dir().display()
    ))
}

/// The CPUs `[load] client_cpus` names, checked against the CPUs this runner may use; None when the key
/// is absent (one unpinned runtime). Errors name the CPU or count refused.
pub fn client_cpus(load: &LoadGate) -> Result<Option<Vec<usize>>, String> {
    let Some(c) = &load.spec.client_cpus else {
        return Ok(None);
    };
    let allowed = crate::io::load_cores::allowed_cpus()?;
    crate::io::load_cores::resolve(c, &allowed).map(Some)
}

/// Runs one phase of a point: on the one-runtime client when `cpus` is None, else spread over one pinned
/// runtime per CPU (the `client` block of `load.json` then accounts for each).
fn drive(
    target: &Target,
    wire: Vec<Vec<u8>>,
    schedule: &Schedule,
    deadline: Option<Duration>,
    timeout: Duration,
    cpus: Option<&[usize]>,
) -> Result<(Vec<LoadExchange>, Option<ClientRecord>), String> {
    match cpus {
        None => load_client::run(target, wire, schedule, deadline, timeout).map(|d| (d, None)),
        Some(cpus) => {
            let r =
                crate::io::load_cores::run_pinned(target, wire, schedule, deadline, timeout, cpus)?;
            Ok((
                r.exchanges,
                Some(ClientRecord {
                    runtimes: r.runtimes,
                }),
            ))
        }
    }
}

/// A point of `load` that sends nothing, written to `pw` with `notes` (the last one says why): `run.json`
/// complete with no request, `load.json` with no timings, `n` planned. Returns the account.
pub(super) fn unsent(
    gate: &GateSpec,
    load: &LoadGate,
    (point, n): (Point, usize),
    parent: &RunSummary,
    notes: Vec<String>,
    pw: &EvidenceWriter,
) -> Result<String, EvidenceError> {
    let mut summary = point_summary(gate, point, parent, n, 0);
    summary.notes.extend(notes);
    finish_unsent(load, point, 0, n, summary, pw)
}

/// Ends a point that sent nothing (its client could not start): `load.json` with no timings, `run.json`
/// complete with no request, so judging says every planned request is missing.
fn finish_unsent(
    load: &LoadGate,
    point: Point,
    warmup: usize,
    n: usize,
    mut summary: RunSummary,
    pw: &EvidenceWriter,
) -> Result<String, EvidenceError> {
    let rec = load_record(load, point, warmup, n, Vec::new());
    pw.write(
        LOAD_FILE,
        &serde_json::to_vec_pretty(&rec).unwrap_or_default(),
    )?;
    summary.status = RunStatus::Complete;
    summary.ended_utc = Some(evidence::now_utc());
    let why = summary.notes.last().cloned().unwrap_or_default();
    pw.write_summary(&summary)?;
    Ok(format!(
        "load point {}: 0 of {n} planned requests sent ({})",
        point.label(),
        why
    ))
}

/// What one point's driver sent: warmup and judged exchanges (judged indexes from 0), and who drove them
/// when not servegate's client.
struct Sent {
    warmup: Vec<LoadExchange>,
    judged: Vec<LoadExchange>,
    driver: Option<crate::evidence::locust::DriverRecord>,
    /// servegate's client on pinned runtimes (`[load] client_cpus`): each runtime's account.
    client: Option<ClientRecord>,
}

/// Sends a point's warmup bodies `bodies.0` then its judged bodies `bodies.1` with the gate's driver:
/// servegate's load client on `schedules` (warmup, judged), or Locust (one closed loop at the point's
/// concurrency, warmups first) into `pw`'s `locust/`. A driver that fails leaves a `load_client: ...` note in
/// `summary` and sends nothing more. `cpus`: servegate's client spread over these CPUs ([`drive`]).
#[allow(clippy::too_many_arguments)]
fn send(
    load: &LoadGate,
    point: Point,
    target: &Target,
    bodies: (&[serde_json::Value], &[serde_json::Value]),
    schedules: (&Schedule, &Schedule),
    deadline: Option<Duration>,
    timeout: Duration,
    cpus: Option<&[usize]>,
    pw: &EvidenceWriter,
    summary: &mut RunSummary,
) -> Sent {
    let (wb, jb) = bodies;
    let (warm_schedule, schedule) = schedules;
    let warmup = wb.len();
    let wire = |bs: &[serde_json::Value]| -> Vec<Vec<u8>> {
        bs.iter()
            .map(|b| serde_json::to_vec(b).unwrap_or_default())
            .collect()
    };
    let mut driver = None;
    let mut client = None;
    let (warm_done, done) = match &load.spec.driver {
        crate::spec::load::Driver::Locust(ls) => {
            let all: Vec<Vec<u8>> = wire(wb).into_iter().chain(wire(jb)).collect();
            let plan = crate::io::locust::LocustPlan {
                spec: ls,
                target,
                bodies: &all,
                warmup,
                concurrency: point.concurrency().unwrap_or(1),
                deadline,
                timeout,
            };
            match crate::io::locust::run(&plan, pw.dir()) {
                Ok(run) => {
                    summary.notes.extend(
                        run.notes
                            .iter()
                            .map(|n| format!("load_client: locust: {n}")),
                    );
                    driver = Some(crate::evidence::locust::DriverRecord {
                        name: "locust".into(),
                        version: run.version.clone(),
                        precision: crate::evidence::locust::TIMING_PRECISION.into(),
                        clocks: run.merge.clocks.clone(),
                    });
                    let wrap = |m: crate::evidence::locust::Merged| LoadExchange {
                        timing: m.timing,
                        exchange: m.exchange,
                    };
                    (
                        run.merge.warmup.into_iter().map(wrap).collect(),
                        run.merge.judged.into_iter().map(wrap).collect(),
                    )
                }
                Err(e) => {
                    summary.notes.push(format!("load_client: locust: {e}"));
                    (Vec::new(), Vec::new())
                }
            }
        }
        crate::spec::load::Driver::Servegate
        | crate::spec::load::Driver::VllmBench
        | crate::spec::load::Driver::AiPerf
        | crate::spec::load::Driver::GuideLlm => {
            let warm_done = if warmup > 0 {
                drive(target, wire(wb), warm_schedule, deadline, timeout, cpus)
                    .map(|d| d.0)
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            let done = match drive(target, wire(jb), schedule, deadline, timeout, cpus) {
                Ok((d, c)) => {
                    client = c;
                    d
                }
                Err(e) => {
                    summary.notes.push(format!("load_client: {e}"));
                    Vec::new()
                }
            };
            (warm_done, done)
        }
    };
    Sent {
        warmup: warm_done,
        judged: done,
        driver,
        client,
    }
}

/// A point's schedules: the judged requests' (closed at the concurrency, or open at the rate with
/// `[load] arrival` and `seed`) and the warmups' (closed, at most the rate's concurrency).
fn schedules(load: &LoadGate, point: Point, n: usize) -> (Schedule, Schedule) {
    match point {
        Point::Concurrency(c) => (
            Schedule::Closed { concurrency: c },
            Schedule::Closed { concurrency: c },
        ),
        Point::Rate(r) => (
            Schedule::Open {
                due_ms: load_client::open_schedule(
                    n,
                    r,
                    load.spec.arrival == Arrival::Poisson,
                    load.spec.seed,
                ),
                max_concurrency: load.spec.max_concurrency,
            },
            Schedule::Closed {
                concurrency: load
                    .spec
                    .max_concurrency
                    .unwrap_or(1)
                    .min(r.ceil() as u32)
                    .max(1),
            },
        ),
    }
}

/// A point's `run.json` as it starts: the gate's summary (its serve facts) with the point's plan and note.
fn point_summary(
    gate: &GateSpec,
    point: Point,
    parent: &RunSummary,
    n: usize,
    warmup: usize,
) -> RunSummary {
    let mut summary = parent.clone();
    summary.status = RunStatus::Running;
    summary.started_utc = evidence::now_utc();
    summary.ended_utc = None;
    summary.requests = Vec::new();
    summary.notes = vec![format!(
        "load point {} of gate {}",
        point.label(),
        gate.name
    )];
    summary.planned = Some(n);
    summary.planned_warmup = Some(warmup);
    summary
}

/// A point's `load.json`: its schedule and every request's timing.
fn load_record(
    load: &LoadGate,
    point: Point,
    warmup: usize,
    planned: usize,
    timings: Vec<crate::io::load_client::SendTiming>,
) -> LoadRecord {
    LoadRecord {
        schema: LOAD_SCHEMA.into(),
        point: point.label(),
        arrival: match load.spec.arrival {
            Arrival::Closed => "closed",
            Arrival::Poisson => "poisson",
            Arrival::Constant => "constant",
        }
        .into(),
        concurrency: point.concurrency(),
        rate_rps: point.rate_rps(),
        max_concurrency: load.spec.max_concurrency,
        warmup,
        planned,
        timings,
        client: None,
        driver: None,
    }
}

/// The labels of the points an import filed, from the gate run's `notes` (`load point c=2: imported from
/// FILE ...`, as `import::write_evidence` writes them).
fn imported_points(notes: &[String]) -> Vec<String> {
    notes
        .iter()
        .filter_map(|n| {
            let rest = n.strip_prefix("load point ")?;
            let (label, tail) = rest.split_once(": ")?;
            tail.starts_with("imported from ")
                .then(|| label.to_string())
        })
        .collect()
}

/// Loads every sweep point's evidence under a load gate's run directory `dir` (`c16/`, ...) and judges
/// them ([`crate::judge::load::judge_points`]). Empty for a gate without `[load]`. When the gate's own
/// `dir/run.json` says the run did not finish (a stop signal, a killed runner), every trial fails with that,
/// whatever the finished points hold: the same rule as a plain run's.
pub fn judge_dir(gate: &GateSpec, dir: &std::path::Path) -> Vec<crate::judge::Verdict> {
    let Some(load) = &gate.load else {
        return Vec::new();
    };
    let run = crate::evidence::read_run_summary(dir).ok();
    if let Some(run) = &run {
        if run.status != RunStatus::Complete {
            return crate::judge::load::fail_all(
                gate,
                &format!(
                    "the evidence is incomplete (run.json status is `{}`: {})",
                    run.status.name(),
                    run.status.why_incomplete()
                ),
            );
        }
        // Nothing was sent (the prompts could not be read, the client could not start): say why, not
        // only that the points have no evidence.
        if let Some(f) = run.serve.failure.as_deref().filter(|f| {
            matches!(
                FailureCode::of_recorded(f),
                Some(FailureCode::LoadClient | FailureCode::LoadDataset)
            )
        }) {
            return crate::judge::load::fail_all(gate, &format!("nothing was sent: {f}"));
        }
    }
    let points: Vec<crate::judge::load::PointEvidence> = load
        .spec
        .points
        .iter()
        .map(|p| crate::loaded::load_point(dir, *p))
        .collect();
    // No point has evidence and the run recorded why (the serve never became ready, exited, its setup
    // failed): that cause, not only "no evidence for this point".
    if points.iter().all(|p| p.loaded.is_err()) {
        if let Some(f) = run.as_ref().and_then(|r| r.serve.failure.as_deref()) {
            return crate::judge::load::fail_all(
                gate,
                &format!("nothing was sent: the serve failed before the load: {f}"),
            );
        }
    }
    // An import files one point: the gate's other points were not run here, said so (INDETERMINATE), not
    // failed for want of evidence.
    let imported = run.as_ref().and_then(|r| r.imported.as_ref());
    if let Some(imp) = imported {
        // The point the import filed (its note in run.json) is judged even when its directory is gone: the
        // evidence was lost, a FAIL, never "not imported".
        let filed = imported_points(run.as_ref().map_or(&[][..], |r| &r.notes[..]));
        let (here, absent): (Vec<_>, Vec<_>) = points
            .into_iter()
            .partition(|p| dir.join(p.point.dir()).exists() || filed.contains(&p.point.label()));
        let held: Vec<String> = here.iter().map(|p| p.point.label()).collect();
        let mut out = crate::judge::load::judge_points(gate, &here);
        for p in &here {
            out.extend(crate::judge::parity::not_compared(
                load,
                p.point,
                "not compared: an import holds one tool's run, not servegate's client's beside it",
            ));
        }
        for p in absent {
            out.extend(crate::judge::load::not_judged(
                gate,
                p.point,
                &if held.is_empty() {
                    format!(
                        "not imported: this run holds no point of {}'s (servegate import files one point per file); import that point's run to judge it",
                        crate::text::shown(&imp.tool)
                    )
                } else {
                    format!(
                        "not imported: this run holds {}'s run of point {} only (servegate import files one point per file); import that point's run to judge it",
                        crate::text::shown(&imp.tool),
                        held.join(", ")
                    )
                },
            ));
        }
        return out;
    }
    let mut out = crate::judge::load::judge_points(gate, &points);
    if !load.assertions.parity.is_empty() {
        for p in &points {
            let tool = crate::loaded::load_parity(dir, p.point);
            out.extend(crate::judge::parity::judge_parity(load, p, &tool));
        }
    }
    out
}
