//! Load records (docs/records.md "Load records"): the figures of each sweep point of a load gate's
//! run as records, each a metric with its condition, and re-derived from the run's evidence by
//! `servegate records check` like every other `gate_run` record.
//!
//! Per point (`c=4`, `r=8`), from its evidence directory (`c4/`: replies, timed reads, `load.json`):
//! * `first_token` and `e2e_latency`, ms, statistic `median` (p50), condition `p50 at concurrency 4`: every
//!   judged request's TTFT / E2E counted from its **intended** send (docs/load.md: no coordinated omission);
//!   and statistic `p95` / `p99` (numpy's linear method, `stats::percentile`) only when the point has the n the
//!   load judge asks for a claim of that percentile (`analysis::load::min_n_for`: 59 and 299), never from fewer;
//! * `output_throughput` (tok/s) and `request_throughput` (req/s), statistic `window`, condition
//!   `at concurrency 4`: completion tokens (succeeded requests) over the measured window, first judged send to
//!   last judged end. These are one figure per point, not a statistic of per-request values: `values` is
//!   null (saying why), `n` is the requests of the window, and the checker recomputes `value` from
//!   `load_point.output_tokens` (or `requests`) and `load_point.window_ms`.
//!
//! A record is written only from a run whose load verdicts all passed and whose every planned request of
//! every point succeeded (a record carries every value). Every record of one run cites the run's root
//! directory (`source.evidence`, its digest over every point) and names its point in `load_point`.

use std::path::Path;

use super::build::{
    engine_version, evidence_digest, model_from_evidence, prompt_tokens_setting, public_host,
    refuse_failed_verdicts, round_to, run_hold, serve_words, settings_of, spec_sources,
    RunRecordSpec,
};
use super::rederive::{first_difference, spec_of};
use super::schema::{
    unmeasured_text, Hold, Instrument, KnownAnswer, Load, LoadPoint, Metric, Model, Notes, Problem,
    Record, Source, Unmeasured, RECORD_SCHEMA,
};
use super::store::{write_new, RecordError};
pub use super::validate::percentile_of;
use super::validate::validate;
use crate::analysis::load::{self as agg, min_n_for, Sample};
use crate::analysis::stats;
use crate::spec::load::{LatencyMetric, Point};
use crate::spec::GateSpec;
use crate::vocab::Metric as M;

/// The condition of a point: `at concurrency 4`, `at 8 requests/s`.
pub(crate) fn condition_of(point: &Point) -> String {
    match point {
        Point::Concurrency(c) => format!("at concurrency {c}"),
        Point::Rate(r) => format!(
            "at {} requests/s",
            Point::Rate(*r).label().trim_start_matches("r=")
        ),
    }
}

/// One point's evidence, loaded.
struct PointData {
    point: Point,
    samples: Vec<Sample>,
    prompt_tokens: std::collections::BTreeSet<u64>,
}

/// The records of every point of a load run rooted at `root` (its `run.json` has the serve, each point
/// its subdirectory), in point order and within a point: TTFT p50 [p95, p99], E2E p50 [p95, p99], output
/// tok/s, requests/s. Ids `<spec.id>-<point dir>-<figure>` (`...-c4-ttft-p50`). `recheck`: re-deriving that
/// existing record (its model hash stands where the evidence has none; its forced flag is kept). Fails,
/// never guesses: an incomplete run, a failed serve, a failed load verdict, a point without evidence, a
/// failed or unsent request, a request without a TTFT, E2E or token count.
pub fn from_load_run(
    gate: &GateSpec,
    root: &Path,
    spec: &RunRecordSpec,
    recheck: Option<&Record>,
) -> Result<Vec<Record>, RecordError> {
    let Some(load) = &gate.load else {
        return Err(RecordError::Evidence(format!(
            "{}: the gate has no [load]",
            root.display()
        )));
    };
    let ev = crate::loaded::load(root).map_err(|e| RecordError::Evidence(e.to_string()))?;
    let (points, forced) = judged_points(gate, load, root, &ev, recheck)?;
    let base = base_record(gate, root, &ev, spec, &points, recheck, forced)?;
    let mut out = Vec::new();
    for pd in &points {
        point_records(gate, &ev.run, load, spec, pd, &base, &mut out)?;
    }
    for r in &out {
        let problems = validate(r, &r.id);
        if !problems.is_empty() {
            return Err(RecordError::Invalid {
                id: r.id.clone(),
                problems,
            });
        }
    }
    Ok(out)
}

/// The points of the load run at `root` (its `run.json` in `ev`), each judged as `servegate judge` judges
/// it, and why the run is recorded although its verdicts failed (only when re-deriving a forced record,
/// `recheck`). Fails on an incomplete run, a failed serve, failed verdicts, a point without evidence, and a
/// point where a planned request was not sent, failed, or has no TTFT (nor its cause), E2E or token count.
fn judged_points(
    gate: &GateSpec,
    load: &crate::spec::load::LoadGate,
    root: &Path,
    ev: &crate::analysis::Evidence,
    recheck: Option<&Record>,
) -> Result<(Vec<PointData>, Option<String>), RecordError> {
    use crate::evidence::RunStatus;
    let run = &ev.run;
    if run.status != RunStatus::Complete {
        return Err(RecordError::Evidence(format!(
            "{}: the run is incomplete (status running): no record from a killed run",
            root.display()
        )));
    }
    if let Some(f) = &run.serve.failure {
        return Err(RecordError::Evidence(format!(
            "{}: the serve failed: {f}",
            root.display()
        )));
    }
    // Every point, loaded once; judged exactly as `servegate judge` does (run::load::judge_dir).
    let mut pes = Vec::new();
    for p in &load.spec.points {
        pes.push(crate::loaded::load_point(root, *p));
    }
    let verdicts = crate::judge::load::judge_points(gate, &pes);
    let forced = match refuse_failed_verdicts(root, &verdicts) {
        Ok(()) => None,
        Err(e) if recheck.is_some_and(|r| r.source.forced.is_some()) => Some(e.to_string()),
        Err(e) => return Err(e),
    };
    let mut points = Vec::new();
    for pe in &pes {
        let (pev, rec) = pe
            .loaded
            .as_ref()
            .map_err(|e| RecordError::Evidence(format!("point {}: {e}", pe.point.label())))?;
        let samples = crate::judge::load::samples(pev, rec);
        let planned = rec.planned.max(samples.len());
        // A reply whose TTFT could not be measured (its cause stated) is no failure: its TTFT is left out
        // of the TTFT records and named in their `unmeasured`, as the verdicts leave it out.
        let bad = samples.iter().position(|s| {
            !s.ok
                || (s.ttft_ms.is_none() && s.ttft_unmeasured.is_none())
                || s.e2e_ms.is_none()
                || s.tokens.is_none()
        });
        if samples.len() < planned || bad.is_some() || samples.is_empty() {
            return Err(RecordError::Evidence(format!(
                "{}: point {}: {} of {planned} planned requests sent{}: a load record carries every planned request's figures",
                pev.dir.display(),
                pe.point.label(),
                samples.len(),
                bad.map(|i| format!(", judged request {i} failed or has no TTFT, E2E or token count")).unwrap_or_default()
            )));
        }
        let prompt_tokens = pev
            .requests
            .iter()
            .filter(|r| !r.record.warmup)
            .filter_map(|r| r.reply.usage.as_ref().and_then(|u| u.prompt_tokens))
            .collect();
        points.push(PointData {
            point: pe.point,
            samples,
            prompt_tokens,
        });
    }
    Ok((points, forced))
}

/// What every record of the load run shares (id, metric, statistic and figures left for each point): the
/// model and its hash from the evidence, the host, settings, hold, load averages and sources.
fn base_record(
    gate: &GateSpec,
    root: &Path,
    ev: &crate::analysis::Evidence,
    spec: &RunRecordSpec,
    points: &[PointData],
    recheck: Option<&Record>,
    forced: Option<String>,
) -> Result<Record, RecordError> {
    let run = &ev.run;
    let (model_file, sha) = model_from_evidence(ev, &spec.model_file, recheck)?;
    let digest = evidence_digest(root)?;
    let req = &gate.request;
    let mut other = spec.notes.clone();
    let mut seen = std::collections::BTreeSet::new();
    for p in points {
        seen.extend(p.prompt_tokens.iter().copied());
    }
    let prompt_tokens = prompt_tokens_setting(&seen, &mut other);
    let mut sources = spec_sources(false, spec.backend.is_some());
    if let Some(m) = &run.serve.model_file {
        sources.insert(
            "model.sha256".into(),
            format!(
                "run.json serve.model_file (hashed at serve start; the file found from {})",
                m.source
            ),
        );
    }
    let version = engine_version(spec, serve_words(&run.serve), &mut other, &mut sources);
    let hold = if gate.hold.is_some() {
        run_hold(gate, &run.started_utc, run.ended_utc.as_deref())
    } else {
        Hold {
            ticket: spec.hold_ticket.clone(),
            duration_s: None,
        }
    };
    Ok(Record {
        schema: RECORD_SCHEMA.into(),
        id: String::new(),
        date: run.started_utc.chars().take(10).collect(),
        host: public_host(&run.host, spec.publish_host),
        model: Model::of_run(spec, &model_file, sha),
        device: spec.device.clone(),
        route: spec.route.clone(),
        metric: Metric {
            name: String::new(),
            unit: String::new(),
            condition: None,
        },
        bound: None,
        statistic: String::new(),
        value: 0.0,
        decimals: 0,
        n: 0,
        values: None,
        values_unavailable: None,
        unmeasured: Vec::new(),
        range: [0.0, 0.0],
        settings: settings_of(
            spec.engine.clone(),
            version,
            req,
            prompt_tokens,
            spec.backend.clone(),
        ),
        hold,
        load: Load {
            load1_start: run.load_avg_start.map(|l| l[0]),
            load1_end: run.load_avg_end.map(|l| l[0]),
        },
        known_answer: KnownAnswer {
            prompt: None,
            expected: None,
            result: "not_checked".into(),
            detail: Some("a load gate judges latency, throughput, errors and consistency, not a known answer".into()),
        },
        instrument: Instrument {
            method: String::new(),
            metric_definition: None,
        },
        source: Source::gate_run(root.display().to_string(), &run.gate_file, digest, forced),
        pair: None,
        notes: Notes {
            what_would_make_it_wrong: spec.what_would_make_it_wrong.clone(),
            other,
        },
        sources,
        load_point: None,
        footprint: Some(super::footprint::of_run(gate, ev)),
    })
}

/// The records of one point `pd` of the load run (`run`), from `base`, pushed onto `out`: the latency
/// percentiles, then the two throughputs of its window.
fn point_records(
    gate: &GateSpec,
    run: &crate::evidence::RunSummary,
    load: &crate::spec::load::LoadGate,
    spec: &RunRecordSpec,
    pd: &PointData,
    base: &Record,
    out: &mut Vec<Record>,
) -> Result<(), RecordError> {
    let s = &pd.samples;
    let window = agg::window_ms(s).ok_or_else(|| {
        RecordError::Evidence(format!(
            "point {}: no measured window (first send not before last end)",
            pd.point.label()
        ))
    })?;
    let lp = LoadPoint {
        point: pd.point.label(),
        concurrency: match pd.point {
            Point::Concurrency(c) => Some(c),
            Point::Rate(_) => None,
        },
        rate_rps: match pd.point {
            Point::Rate(r) => Some(r),
            Point::Concurrency(_) => None,
        },
        requests: s.len() as u32,
        output_tokens: s.iter().filter_map(|x| x.tokens).sum(),
        window_ms: window,
    };
    let cond = condition_of(&pd.point);
    // Another tool's timings (servegate import): the record names the tool, its version and file, never
    // passes them as servegate's client's.
    let whose = match &run.imported {
        Some(imp) => format!(
            "{} (imported by servegate import from {}, sha256 {}: reads reconstructed from the tool's per-request timings)",
            imp.by(),
            imp.file,
            imp.file_sha256
        ),
        None => "client-side timed reads".to_string(),
    };
    let method = format!(
        "servegate {} gate {}: load point {} ({}, {} judged requests, {} warmup not counted); {whose}, latencies from each request's intended send (docs/load.md)",
        run.servegate_version,
        gate.name,
        lp.point,
        match pd.point {
            Point::Concurrency(c) => format!("closed loop, {c} in flight"),
            Point::Rate(_) => "open loop".to_string(),
        },
        s.len(),
        load.spec.warmup_requests
    );
    let id = |fig: &str| format!("{}-{}-{fig}", spec.id, pd.point.dir().replace('.', "_"));
    latency_records(pd, &lp, &cond, &method, &id, base, out)?;
    for (metric, slug, figure) in [
        (M::OutputThroughput, "output-tok-s", agg::output_tok_s(s)),
        (M::RequestThroughput, "req-s", agg::requests_per_s(s)),
    ] {
        let info = metric.info();
        let name = metric.name();
        let v = round_to(figure.expect("a window exists"), info.record_decimals);
        out.push(Record {
            id: id(slug),
            metric: Metric {
                name: name.into(),
                unit: info.unit.name().into(),
                condition: Some(cond.clone()),
            },
            bound: None,
            statistic: "window".into(),
            value: v,
            decimals: info.record_decimals,
            n: lp.requests,
            values: None,
            values_unavailable: Some(format!(
                "one figure over the point's measured window, not a statistic of per-request values: {} / window_ms (load_point)",
                if metric == M::OutputThroughput { "output_tokens" } else { "requests" }
            )),
            range: [v, v],
            instrument: Instrument {
                method: method.clone(),
                metric_definition: Some(format!(
                    "servegate analysis::load (docs/metrics.md, {name}): {}",
                    info.definition
                )),
            },
            load_point: Some(lp.clone()),
            ..base.clone()
        });
    }
    Ok(())
}

/// TTFT and E2E of the point `pd` (its load point `lp`, condition `cond`, method): p50, and p95 and p99 only
/// where the point has the n to claim them, each with every value and (TTFT) the unmeasured with causes.
/// Fails when fewer than half of the judged replies were measured.
fn latency_records(
    pd: &PointData,
    lp: &LoadPoint,
    cond: &str,
    method: &str,
    id: &dyn Fn(&str) -> String,
    base: &Record,
    out: &mut Vec<Record>,
) -> Result<(), RecordError> {
    let s = &pd.samples;
    for (lm, metric, slug, def) in [
        (LatencyMetric::Ttft, M::Ttft, "ttft", "time from the request's intended send to the first token chunk (TTFT from the send plus the client's queue time), per request"),
        (LatencyMetric::E2e, M::E2e, "e2e", "time from the request's intended send to the reply's last byte, per request"),
    ] {
        let values = agg::values(s, lm);
        let unmeasured: Vec<Unmeasured> = match lm {
            LatencyMetric::Ttft => s
                .iter()
                .filter(|x| x.ttft_ms.is_none())
                .filter_map(|x| {
                    x.ttft_unmeasured.as_ref().map(|c| Unmeasured {
                        arm: None,
                        request: x.timing.index as u32,
                        cause: c.clone(),
                    })
                })
                .collect(),
            _ => Vec::new(),
        };
        if !unmeasured.is_empty()
            && (values.is_empty()
                || (values.len() as f64)
                    < crate::judge::MIN_MEASURED_SHARE * s.len() as f64)
        {
            return Err(RecordError::Evidence(format!(
                "point {}: {slug}: only {} of {} judged replies measured (at least half are needed for a percentile: undecided); not measured: {}: no record from an undecided run",
                pd.point.label(),
                values.len(),
                s.len(),
                unmeasured_text(&unmeasured)
            )));
        }
        let info = metric.info();
        for (q, stat) in [(50u32, "median"), (95, "p95"), (99, "p99")] {
            if values.len() < min_n_for(f64::from(q)) {
                continue; // a p95 from fewer than 59 requests is not claimed (docs/load.md)
            }
            let v = percentile_of(stat, &values).expect("non-empty");
            let decimals = info.record_decimals;
            out.push(Record {
                id: id(&format!("{slug}-p{q}")),
                metric: Metric {
                    name: info.record_name.expect("ttft and e2e have record names").into(),
                    unit: info.unit.name().into(),
                    condition: Some(format!("p{q} {cond}")),
                },
                bound: None,
                statistic: stat.into(),
                value: round_to(v, decimals),
                decimals,
                n: values.len() as u32,
                range: [
                    stats::min(&values).expect("non-empty"),
                    stats::max(&values).expect("non-empty"),
                ],
                values: Some(values.clone()),
                unmeasured: unmeasured.clone(),
                instrument: Instrument {
                    method: method.to_string(),
                    metric_definition: Some(format!(
                        "servegate analysis::load (docs/load.md, docs/metrics.md): {def}; p{q} by numpy's linear method over the point's judged requests"
                    )),
                },
                load_point: Some(lp.clone()),
                ..base.clone()
            });
        }
    }
    Ok(())
}

/// Re-derives load record `r` from the load run at `dir` (see [`super::kind::rederive`]): the run's records are
/// rebuilt and the one for `r`'s point, metric and statistic compared field by field, its `load_point` too.
pub(super) fn rederive(gate: &GateSpec, dir: &Path, r: &Record) -> Vec<Problem> {
    let problem = |field: &str, message: String| {
        vec![Problem {
            field: field.into(),
            message,
        }]
    };
    let Some(lp) = &r.load_point else {
        return problem(
            "load_point",
            format!(
                "missing: the evidence {} is a load run, whose records name their point",
                dir.display()
            ),
        );
    };
    let built = match from_load_run(gate, dir, &spec_of(r, false), Some(r)) {
        Ok(b) => b,
        Err(e) => return problem("source.evidence", format!("gives no record: {e}")),
    };
    let Some(want) = built.iter().find(|w| {
        w.load_point.as_ref().map(|p| &p.point) == Some(&lp.point)
            && w.metric.name == r.metric.name
            && w.statistic == r.statistic
    }) else {
        return problem(
            "load_point.point",
            format!(
                "{}: the re-judged evidence {} gives no {} {} record at that point",
                lp.point,
                dir.display(),
                r.metric.name,
                r.statistic
            ),
        );
    };
    if let Some((field, stated, derived)) = first_difference(r, want) {
        return problem(
            &field,
            format!(
                "states {stated} but the re-judged evidence {} gives {derived}",
                dir.display()
            ),
        );
    }
    let wp = want.load_point.as_ref().expect("built with a load point");
    let pairs = [
        (
            "load_point.requests",
            lp.requests.to_string(),
            wp.requests.to_string(),
        ),
        (
            "load_point.output_tokens",
            lp.output_tokens.to_string(),
            wp.output_tokens.to_string(),
        ),
        (
            "load_point.window_ms",
            format!("{:.3}", lp.window_ms),
            format!("{:.3}", wp.window_ms),
        ),
        (
            "metric.condition",
            format!("{:?}", r.metric.condition),
            format!("{:?}", want.metric.condition),
        ),
    ];
    for (field, a, b) in pairs {
        if a != b {
            return problem(
                field,
                format!(
                    "states {a} but the re-judged evidence {} gives {b}",
                    dir.display()
                ),
            );
        }
    }
    Vec::new()
}

/// Writes the load records `records` (of one run: [`from_load_run`]) into `dir`, all or none: every record
/// is validated and every id checked free before the first is written ([`write_new`]). The paths written,
/// in order; else the first record that is invalid or exists (none written), or the write that failed
/// (the ones before it written).
pub fn write_all(records: &[Record], dir: &Path) -> Result<Vec<std::path::PathBuf>, WriteError> {
    // Every record valid before any is written: a run's set of records lands whole or not at all.
    if let Some((r, problems)) = records
        .iter()
        .map(|r| (r, validate(r, &r.id)))
        .find(|(_, p)| !p.is_empty())
    {
        return Err(WriteError::Refused(RecordError::Invalid {
            id: r.id.clone(),
            problems,
        }));
    }
    if let Some(r) = records
        .iter()
        .find(|r| dir.join(format!("{}.json", r.id)).exists())
    {
        return Err(WriteError::Refused(RecordError::Exists {
            path: dir.join(format!("{}.json", r.id)),
        }));
    }
    let mut written = Vec::new();
    for r in records {
        match write_new(dir, r) {
            Ok(path) => written.push(path),
            Err(e) => return Err(WriteError::Write { written, error: e }),
        }
    }
    Ok(written)
}

/// Why [`write_all`] did not write every record.
#[derive(Debug)]
pub enum WriteError {
    /// Nothing was written: this record is invalid, or its id is taken.
    Refused(RecordError),
    /// Writing failed: the records before it were written (`written`).
    Write {
        /// The paths written before the failure.
        written: Vec<std::path::PathBuf>,
        /// The failure.
        error: RecordError,
    },
}
