//! Load records (issue 18, docs/records.md "Load records"): the figures of each sweep point of a load gate's
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

use super::record::{
    self, engine_version, evidence_digest, first_difference, model_from_evidence,
    prompt_tokens_setting, public_host, refuse_failed_verdicts, round_to, run_hold, sampling_of,
    serve_words, spec_of, spec_sources, Hold, Instrument, KnownAnswer, Load, LoadPoint, Metric,
    Model, Notes, Problem, Record, RecordError, RunRecordSpec, Settings, Source, Unmeasured,
    RECORD_SCHEMA,
};
use crate::analysis::load::{self as agg, min_n_for, Sample};
use crate::analysis::stats;
use crate::spec::load::{LatencyMetric, Point};
use crate::spec::GateSpec;
use crate::vocab::Metric as M;

/// Statistics a load record may state besides `median`: percentiles (numpy linear) and `window` (an
/// aggregate over the point's measured window).
pub const STATISTICS: &[&str] = &["p90", "p95", "p99", "window"];

/// The percentile a statistic names (`median` 50, `p95` 95), computed from `values` with numpy's linear
/// method; `None` for `window` or an unknown statistic, or no values.
pub fn percentile_of(statistic: &str, values: &[f64]) -> Option<f64> {
    let q: f64 = match statistic {
        "median" => return stats::median(values),
        s => s.strip_prefix('p')?.parse().ok()?,
    };
    stats::percentile(values, q)
}

/// The condition of a point: `at concurrency 4`, `at 8 requests/s`.
pub fn condition_of(point: &Point) -> String {
    match point {
        Point::Concurrency(c) => format!("at concurrency {c}"),
        Point::Rate(r) => format!(
            "at {} requests/s",
            Point::Rate(*r).label().trim_start_matches("r=")
        ),
    }
}

/// Checks of a record's `load_point` and the rules that hold only for load records (pure; empty for a
/// record without one): `window` statistics only for the two throughput metrics and back, `values` null
/// for `window` with `n` = `load_point.requests` and `value` recomputed from the window's figures at the
/// record's decimals, a finite positive window.
pub fn validate(r: &Record) -> Vec<Problem> {
    let mut p = Vec::new();
    let mut bad = |field: &str, message: String| {
        p.push(Problem {
            field: field.into(),
            message,
        })
    };
    let throughput = matches!(
        r.metric.name.as_str(),
        "output_throughput" | "request_throughput"
    );
    let Some(lp) = &r.load_point else {
        if throughput {
            bad(
                "load_point",
                format!("missing: {} is a load point's figure (statistic window over its measured window)", r.metric.name),
            );
        }
        return p;
    };
    if !(lp.window_ms.is_finite() && lp.window_ms > 0.0) {
        bad(
            "load_point.window_ms",
            format!("{} is not a positive duration", lp.window_ms),
        );
        return p;
    }
    if lp.concurrency.is_some() == lp.rate_rps.is_some() {
        bad(
            "load_point",
            "exactly one of concurrency (closed loop) and rate_rps (open loop) is set".into(),
        );
    }
    if throughput != (r.statistic == "window") {
        bad(
            "statistic",
            format!(
                "{:?} for {}: the throughput metrics are stated as `window`, and only they",
                r.statistic, r.metric.name
            ),
        );
        return p;
    }
    if let Some(q) = r
        .statistic
        .strip_prefix('p')
        .and_then(|q| q.parse::<f64>().ok())
    {
        let need = min_n_for(q);
        if (r.n as usize) < need {
            bad(
                "statistic",
                format!(
                    "{} from n = {}: claiming p{q} needs at least {need} requests at the point (docs/load.md)",
                    r.statistic, r.n
                ),
            );
        }
    }
    if throughput {
        if r.values.is_some() {
            bad(
                "values",
                "a window statistic is one figure over the measured window: values must be null (values_unavailable says so)".into(),
            );
        }
        if r.n != lp.requests {
            bad(
                "n",
                format!(
                    "{} but load_point.requests is {}: n of a window statistic is the requests of the window",
                    r.n, lp.requests
                ),
            );
        }
        let exact = if r.metric.name == "output_throughput" {
            lp.output_tokens as f64 * 1000.0 / lp.window_ms
        } else {
            f64::from(lp.requests) * 1000.0 / lp.window_ms
        };
        let half = 0.5 * 10f64.powi(-(r.decimals.min(17) as i32)) + 1e-9;
        if (r.value - exact).abs() > half {
            bad(
                "value",
                format!(
                    "{} does not match {} over the window {} ms = {} (to {} decimals)",
                    r.fmt(r.value),
                    if r.metric.name == "output_throughput" {
                        format!("{} output tokens", lp.output_tokens)
                    } else {
                        format!("{} requests", lp.requests)
                    },
                    lp.window_ms,
                    r.fmt(exact),
                    r.decimals
                ),
            );
        }
    }
    p
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
    use crate::evidence::RunStatus;
    let Some(load) = &gate.load else {
        return Err(RecordError::Evidence(format!(
            "{}: the gate has no [load]",
            root.display()
        )));
    };
    let ev = crate::analysis::load(root).map_err(|e| RecordError::Evidence(e.to_string()))?;
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
        pes.push(crate::judge::load::PointEvidence::load(root, *p));
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
    let (model_file, sha) = model_from_evidence(&ev, &spec.model_file, recheck)?;
    let digest = evidence_digest(root)?;
    let req = &gate.request;
    let mut other = spec.notes.clone();
    let mut seen = std::collections::BTreeSet::new();
    for p in &points {
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
    let base = Record {
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
        statistic: String::new(),
        value: 0.0,
        decimals: 0,
        n: 0,
        values: None,
        values_unavailable: None,
        unmeasured: Vec::new(),
        range: [0.0, 0.0],
        settings: Settings {
            engine: spec.engine.clone(),
            engine_version: version,
            sampling: Some(sampling_of(req)),
            max_tokens: Some(req.max_tokens),
            prompt_tokens,
            stream: Some(req.stream),
            backend: spec.backend.clone(),
        },
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
    };
    let mut out = Vec::new();
    for pd in &points {
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
        let method = format!(
            "servegate {} gate {}: load point {} ({}, {} judged requests, {} warmup not counted); client-side timed reads, latencies from each request's intended send (docs/load.md)",
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
                    record::unmeasured_text(&unmeasured)
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
                        method: method.clone(),
                        metric_definition: Some(format!(
                            "servegate analysis::load (docs/load.md, docs/metrics.md): {def}; p{q} by numpy's linear method over the point's judged requests"
                        )),
                    },
                    load_point: Some(lp.clone()),
                    ..base.clone()
                });
            }
        }
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
    }
    for r in &out {
        let problems = record::validate(r, &r.id);
        if !problems.is_empty() {
            return Err(RecordError::Invalid {
                id: r.id.clone(),
                problems,
            });
        }
    }
    Ok(out)
}

/// Re-derives load record `r` from the load run at `dir` (see [`record::rederive`]): the run's records are
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

/// `servegate records add --run DIR --spec FILE` for a load run: every record of [`from_load_run`], each
/// validated and written with [`record::write_new`] (none is written when one of them cannot be: all are
/// checked for existing ids first). Exit codes as `records add`.
pub(super) fn cli_add(
    gate: &GateSpec,
    run: &Path,
    spec: &RunRecordSpec,
    dir: &Path,
    force: bool,
) -> i32 {
    use crate::error::exit;
    if force {
        crate::errln!("error: --force records single-runtime runs only; load records are written from a passing load run");
        return exit::USAGE;
    }
    write_from_run(gate, run, spec, dir)
}

/// Writes the records of the load run `run` ([`from_load_run`]) into `dir`, none if any would overwrite an
/// existing one, printing each path. Returns the exit code (`records add --run` and `run --record` of a
/// load gate): 0, 3 (invalid or existing), 5 (the evidence).
pub fn write_from_run(gate: &GateSpec, run: &Path, spec: &RunRecordSpec, dir: &Path) -> i32 {
    use crate::error::exit;
    let records = match from_load_run(gate, run, spec, None) {
        Ok(r) => r,
        Err(e) => {
            crate::errln!("error: {e}");
            return match e {
                RecordError::Evidence(_) | RecordError::Io { .. } => exit::EVIDENCE_ERROR,
                RecordError::Invalid { .. } | RecordError::Exists { .. } => exit::SPEC_INVALID,
            };
        }
    };
    // Every record valid before any is written: a run's set of records lands whole or not at all.
    if let Some((r, problems)) = records
        .iter()
        .map(|r| (r, record::validate(r, &r.id)))
        .find(|(_, p)| !p.is_empty())
    {
        crate::errln!(
            "error: {}",
            RecordError::Invalid {
                id: r.id.clone(),
                problems
            }
        );
        crate::errln!("no record written");
        return exit::SPEC_INVALID;
    }
    if let Some(r) = records
        .iter()
        .find(|r| dir.join(format!("{}.json", r.id)).exists())
    {
        crate::errln!(
            "error: {}: exists; a record is never overwritten (choose a new id)",
            dir.join(format!("{}.json", r.id)).display()
        );
        return exit::SPEC_INVALID;
    }
    for r in &records {
        match record::write_new(dir, r) {
            Ok(path) => crate::outln!(
                "wrote {} ({} {}, {} {} {}, n = {}{}{})",
                path.display(),
                record::terminal_safe(&r.model.name),
                r.metric.name,
                r.metric.condition.as_deref().unwrap_or(""),
                r.fmt(r.value),
                r.metric.unit,
                r.n,
                if r.indicative() { ", indicative" } else { "" },
                if r.unmeasured.is_empty() {
                    String::new()
                } else {
                    format!(", {}", record::terminal_safe(&r.unmeasured_line()))
                }
            ),
            Err(e) => {
                crate::errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        }
    }
    crate::outln!("now run `servegate leaderboard`");
    exit::PASS
}

/// One throughput-latency curve on the leaderboard: the load records of one model, runtime and run, one row
/// (and one chart point) per sweep point.
#[derive(Debug, serde::Serialize)]
pub struct CurveCtx {
    model: String,
    engine: String,
    date: String,
    anchor: String,
    rows: Vec<CurveRowCtx>,
    charts: Vec<CurveChartCtx>,
}

#[derive(Debug, serde::Serialize)]
struct CurveRowCtx {
    point: String,
    tok_s: String,
    rps: String,
    ttft_p50: String,
    ttft_p95: String,
    e2e_p50: String,
    e2e_p95: String,
    n: String,
    flags: String,
    links: Vec<LinkCtx>,
}

#[derive(Debug, serde::Serialize)]
struct LinkCtx {
    id: String,
    label: String,
    link: String,
}

#[derive(Debug, serde::Serialize)]
struct CurveChartCtx {
    title: String,
    y_name: String,
    width: u32,
    height: u32,
    left: String,
    right: String,
    top: String,
    bottom: String,
    x_mid: String,
    y_mid: String,
    x_max_label: String,
    y_max_label: String,
    series: Vec<SeriesCtx>,
}

#[derive(Debug, serde::Serialize)]
struct SeriesCtx {
    name: String,
    stroke: &'static str,
    dash: &'static str,
    polyline: String,
    points: Vec<CurvePointCtx>,
}

#[derive(Debug, serde::Serialize)]
struct CurvePointCtx {
    x: String,
    y: String,
    label: String,
    hollow: bool,
    title: String,
}

/// The sort key of a point label: closed-loop points by concurrency, then open-loop points by rate.
fn point_key(lp: &LoadPoint) -> (u8, f64) {
    match (lp.concurrency, lp.rate_rps) {
        (Some(c), _) => (0, f64::from(c)),
        (None, Some(r)) => (1, r),
        _ => (2, 0.0),
    }
}

/// The throughput-latency curves of `load` (records with a `load_point`): grouped by model, engine and
/// evidence (one run), sorted by model, engine and date; per point the output tok/s and requests/s
/// records give x, the TTFT and E2E records (p50, and p95 where the point had the n to claim it) give y.
/// Charts: y = TTFT, and y = E2E, against x = output tok/s, one labelled dot per point (hollow when
/// indicative), a line through the points in concurrency order (a serve that serializes its requests shows
/// flat x and a rising y).
pub fn curves(load: &[&Record], records_link: &str) -> Vec<CurveCtx> {
    use std::collections::BTreeMap;
    let mut by_run: BTreeMap<(String, String, String, String), Vec<&Record>> = BTreeMap::new();
    for r in load {
        by_run
            .entry((
                r.model.name.clone(),
                r.settings.engine.clone(),
                r.date.clone(),
                r.source.evidence.clone().unwrap_or_default(),
            ))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((model, engine, date, evidence), recs) in by_run {
        // Points in order, each with its records by (metric, statistic).
        let mut points: Vec<(LoadPoint, PointRecords<'_>)> = Vec::new();
        for r in &recs {
            let lp = r.load_point.clone().expect("load records");
            let i = match points.iter().position(|(p, _)| p.point == lp.point) {
                Some(i) => i,
                None => {
                    points.push((lp, BTreeMap::new()));
                    points.len() - 1
                }
            };
            points[i]
                .1
                .insert((r.metric.name.clone(), r.statistic.clone()), r);
        }
        points.sort_by(|a, b| {
            let (x, y) = (point_key(&a.0), point_key(&b.0));
            x.0.cmp(&y.0).then(x.1.total_cmp(&y.1))
        });
        fn get<'a>(
            m: &BTreeMap<(String, String), &'a Record>,
            name: &str,
            stat: &str,
        ) -> Option<&'a Record> {
            m.get(&(name.to_string(), stat.to_string())).copied()
        }
        let cell = |r: Option<&Record>| {
            r.map(|r| format!("{} {}", r.fmt(r.value), r.metric.unit))
                .unwrap_or_else(|| "-".into())
        };
        let rows = points
            .iter()
            .map(|(lp, m)| {
                let mut flags: Vec<&str> = Vec::new();
                if m.values().any(|r| r.indicative()) {
                    flags.push("indicative");
                }
                if m.values().any(|r| r.source.forced.is_some()) {
                    flags.push("forced: the run failed");
                }
                if get(m, "first_token", "p95").is_none() {
                    flags.push("no p95 (n < 59)");
                }
                CurveRowCtx {
                    point: lp.point.clone(),
                    tok_s: cell(get(m, "output_throughput", "window")),
                    rps: cell(get(m, "request_throughput", "window")),
                    ttft_p50: cell(get(m, "first_token", "median")),
                    ttft_p95: cell(get(m, "first_token", "p95")),
                    e2e_p50: cell(get(m, "e2e_latency", "median")),
                    e2e_p95: cell(get(m, "e2e_latency", "p95")),
                    n: lp.requests.to_string(),
                    flags: flags.join(", "),
                    links: m
                        .values()
                        .map(|r| LinkCtx {
                            id: r.id.clone(),
                            label: match (r.metric.name.as_str(), r.statistic.as_str()) {
                                ("first_token", "median") => "TTFT p50".into(),
                                ("first_token", s) => format!("TTFT {s}"),
                                ("e2e_latency", "median") => "E2E p50".into(),
                                ("e2e_latency", s) => format!("E2E {s}"),
                                (_, _) => r.metric.unit.clone(),
                            },
                            link: format!("{records_link}/{}.json", r.id),
                        })
                        .collect(),
                }
            })
            .collect();
        let mut charts = Vec::new();
        for (metric, y_name) in [("first_token", "TTFT"), ("e2e_latency", "E2E")] {
            if let Some(c) = curve_chart(&points, metric, y_name, &model, &engine) {
                charts.push(c);
            }
        }
        out.push(CurveCtx {
            anchor: crate::records::leaderboard::slug(&format!(
                "load {model} {engine} {}",
                Path::new(&evidence)
                    .file_name()
                    .map(|f| f.to_string_lossy().to_string())
                    .unwrap_or(date.clone())
            )),
            model,
            engine,
            date,
            rows,
            charts,
        });
    }
    out
}

/// One load point's records by (metric, statistic).
type PointRecords<'a> = std::collections::BTreeMap<(String, String), &'a Record>;

/// One series of a curve chart: its statistic, name, stroke and dash, and its points (x, y, the record, the
/// load point's name).
type Series<'a> = (
    &'a str,
    &'static str,
    &'static str,
    Vec<(f64, f64, &'a Record, String)>,
);

/// One chart of a curve: y = `metric` (p50 solid, p95 dashed where stated) against x = output tok/s.
fn curve_chart(
    points: &[(LoadPoint, PointRecords<'_>)],
    metric: &str,
    y_name: &str,
    model: &str,
    engine: &str,
) -> Option<CurveChartCtx> {
    use crate::records::leaderboard::{nice_ceil, px, short_number};
    let (width, height) = (400u32, 220u32);
    let (left, right, top, bottom) = (56.0, width as f64 - 20.0, 14.0, height as f64 - 34.0);
    let x_of = |m: &std::collections::BTreeMap<(String, String), &Record>| {
        m.get(&("output_throughput".to_string(), "window".to_string()))
            .map(|r| r.value)
    };
    let mut series_raw: Vec<Series<'_>> = Vec::new();
    for (stat, name, stroke, dash) in [("median", "p50", "#36c", ""), ("p95", "p95", "#c63", "4 3")]
    {
        let pts: Vec<(f64, f64, &Record, String)> = points
            .iter()
            .filter_map(|(lp, m)| {
                let x = x_of(m)?;
                let r = m.get(&(metric.to_string(), stat.to_string()))?;
                Some((x, r.value, *r, lp.point.clone()))
            })
            .collect();
        if !pts.is_empty() {
            series_raw.push((name, stroke, dash, pts));
        }
    }
    if series_raw.is_empty() {
        return None;
    }
    let unit = series_raw[0].3[0].2.metric.unit.clone();
    let x_max = nice_ceil(
        series_raw
            .iter()
            .flat_map(|s| s.3.iter().map(|p| p.0))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.1,
    );
    let y_max = nice_ceil(
        series_raw
            .iter()
            .flat_map(|s| s.3.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.1,
    );
    let sx = |x: f64| left + x / x_max * (right - left);
    let sy = |y: f64| bottom - y / y_max * (bottom - top);
    let series = series_raw
        .into_iter()
        .map(|(name, stroke, dash, pts)| {
            let points: Vec<CurvePointCtx> = pts
                .iter()
                .map(|(x, y, r, label)| CurvePointCtx {
                    x: px(sx(*x)),
                    y: px(sy(*y)),
                    label: label.clone(),
                    hollow: r.indicative(),
                    title: format!(
                        "{label}: {y_name} {name} {} {} at {} tok/s output, n = {} ({})",
                        r.fmt(*y),
                        r.metric.unit,
                        short_number(*x),
                        r.n,
                        r.id
                    ),
                })
                .collect();
            SeriesCtx {
                name: format!("{y_name} {name}"),
                stroke,
                dash,
                polyline: if points.len() > 1 {
                    points
                        .iter()
                        .map(|p| format!("{},{}", p.x, p.y))
                        .collect::<Vec<_>>()
                        .join(" ")
                } else {
                    String::new()
                },
                points,
            }
        })
        .collect();
    Some(CurveChartCtx {
        title: format!("{model} on {engine}: {y_name} ({unit}) against output throughput (tok/s), one point per load point"),
        y_name: format!("{y_name} ({unit})"),
        width,
        height,
        left: px(left),
        right: px(right),
        top: px(top),
        bottom: px(bottom),
        x_mid: px((left + right) / 2.0),
        y_mid: px((top + bottom) / 2.0),
        x_max_label: short_number(x_max),
        y_max_label: short_number(y_max),
        series,
    })
}
