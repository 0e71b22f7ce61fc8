//! Judging a load run (pure): per sweep point, `[assert.latency]` (one verdict per bound),
//! `[assert.throughput]`, `[assert.goodput]`, `[assert.errors]` and `[assert.consistency]` (the drift rules,
//! `analysis::drift::compare`, against the concurrency-1 reply to the same prompt), named
//! `[c=16]::ttft_p95`, `[c=16]::throughput`, ... (trials `gate[c=16]::ttft_p95`). The definitions are
//! `analysis::load`'s.
//!
//! Three honest states, in this order at each point:
//! * **void** when the client fell behind its schedule: the p99 of send lag over `[load] max_lag_ms`, or
//!   planned requests never sent, or no judged request sent at all (a `duration_s` point's "0 of 0"). The
//!   load was not the load asked for, so nothing measured under it passes;
//! * **fail** when the point has no evidence, no request of it succeeded (every one errored, was cut or had
//!   no sane content: a latency bound then fails, it is not "too few samples"), or the bound is missed;
//! * **indeterminate** when a percentile is claimed from too few samples: p95 needs 59, p99 299
//!   ([`min_n_for`]), and the verdict names the n needed; when a closed-loop point's peak real concurrency
//!   never reached its concurrency (throughput); when `[assert.consistency]` has no concurrency-1 replies.

use std::collections::BTreeMap;

use super::accounting::request_failure;
use super::content::content_problem;
use super::verdict::{Outcome, Verdict};
use crate::analysis::load::{self as agg, min_n_for, Sample, Slo};
use crate::analysis::{drift, measure, stats, Evidence};
use crate::evidence::load::LoadRecord;
use crate::spec::load::Point;
use crate::spec::GateSpec;
use crate::vocab::AssertionKind;

/// One sweep point's evidence as the runner or `servegate judge` loaded it (`servegate::loaded::load_point`; an
/// error: why it could not be).
#[derive(Debug)]
pub struct PointEvidence {
    /// The point.
    pub point: Point,
    /// Its run directory (parsed replies) and `load.json`, or why they could not be read.
    pub loaded: Result<(Evidence, LoadRecord), String>,
}

/// Every trial of a load gate FAILed with `reason` (the whole run's evidence proves nothing: run.json says
/// it did not finish), as a plain run's assertions fail on incomplete evidence.
pub fn fail_all(gate: &GateSpec, reason: &str) -> Vec<Verdict> {
    gate.load
        .as_ref()
        .map(|l| l.trial_names())
        .unwrap_or_default()
        .into_iter()
        .map(|n| verdict(n, Outcome::Fail, reason.to_string()))
        .collect()
}

/// INDETERMINATE verdicts for every trial of `point`, with `reason`: a point a run holds no evidence for by
/// design (an import files one point of the gate; the others were not run here), never a FAIL of the serve.
pub fn not_judged(gate: &GateSpec, point: Point, reason: &str) -> Vec<Verdict> {
    let prefix = format!("[{}]::", point.label());
    gate.load
        .as_ref()
        .map(|l| l.trial_names())
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .map(|n| verdict(n, Outcome::Indeterminate, reason.to_string()))
        .collect()
}

/// The latency and parity bounds of `load` no run can ever decide, each as a warning line for `servegate
/// check`: a TTFT, TPOT or E2E percentile whose [`min_n_for`] exceeds `[load] requests` (one value per
/// request, so every run is INDETERMINATE: p95 needs 59 requests), in `[assert.latency]` or
/// `[assert.parity]`; and an ITL bound where GuideLLM times the requests (`driver = "guidellm"` for
/// `[assert.latency]`, `parity = "guidellm"` for `[assert.parity]`): GuideLLM keeps each request's first
/// and last token times, not each token's (`import::guidellm`'s `lacks`). ITL otherwise pools every gap
/// (many per request) and a `duration_s` point sends what the duration allows: neither is known before a
/// run, so neither is warned.
pub fn undecidable(load: &crate::spec::load::LoadGate) -> Vec<String> {
    use crate::spec::load::{Driver, LatencyMetric};
    let mut out = Vec::new();
    let guidellm_itl = |table: &str, key: &str, role: &str| {
        format!(
            "[assert.{table}] {key} can never be decided: GuideLLM ({role}) records each request's first and last token times, not each token's (every run INDETERMINATE; judge TTFT, TPOT or E2E, or use another tool)"
        )
    };
    let bounds = load
        .assertions
        .latency
        .iter()
        .map(|b| ("latency", &b.key, b.metric, b.p))
        .chain(
            load.assertions
                .parity
                .iter()
                .map(|b| ("parity", &b.key, b.metric, b.p)),
        );
    for (table, key, metric, p) in bounds {
        if metric == LatencyMetric::Itl {
            if table == "latency" && load.spec.driver == Driver::GuideLlm {
                out.push(guidellm_itl(table, key, "driver = \"guidellm\""));
            } else if table == "parity" && load.spec.parity == Some(Driver::GuideLlm) {
                out.push(guidellm_itl(table, key, "parity = \"guidellm\""));
            }
            continue;
        }
        let Some(n) = load.spec.requests else {
            continue;
        };
        let need = min_n_for(f64::from(p));
        if need > n as usize {
            out.push(format!(
                "[assert.{table}] {key} can never be decided: p{p} needs at least {need} requests per point, [load] requests = {n} (every run INDETERMINATE; raise requests to {need} or lower the percentile)"
            ));
        }
    }
    out
}

/// A judged request of a point: sample plus reply (for consistency), prompt index and prompt.
struct Judged {
    sample: Sample,
    /// Why the request failed (its first failure code, or `content`), when it did.
    why: Option<&'static str>,
    /// The cause counted in the verdicts ([`cause_of`]): `why`, or the tool's own class of an imported
    /// failure (`ServerDisconnectedError`).
    cause: Option<String>,
    reply: crate::analysis::reply::Reply,
    prompt_index: usize,
    prompt: String,
    /// Why TTFT (`.0`) and TPOT (`.1`) were not measured although the reply succeeded
    /// (`measure::unmeasured_cause`): such a request is left out of those percentiles, counted, never failed.
    unmeasured: (Option<String>, Option<String>),
}

fn judged(ev: &Evidence, rec: &LoadRecord) -> Vec<Judged> {
    let timings: BTreeMap<usize, _> = rec.timings.iter().map(|t| (t.index, t)).collect();
    // An import whose tool recorded no reply text carries a placeholder per token: its content is not
    // judged (neither sane nor degenerate); the tool's own error field decides success.
    let text_judged = ev.run.imported.as_ref().is_none_or(|i| i.text_recorded);
    ev.requests
        .iter()
        .filter(|r| !r.record.warmup)
        .map(|r| {
            let fig = measure::measure(&r.reply);
            let failure = request_failure(r);
            let why = match &failure {
                Some(f) => Some(f.code().name()),
                None if text_judged => content_problem(&r.reply, &fig).map(|_| "content"),
                None => None,
            };
            let cause = why.map(|w| cause_of(ev.run.imported.as_ref(), failure.as_ref(), w));
            let ok = why.is_none();
            let unmeasured = (
                measure::unmeasured_cause(&fig, crate::vocab::Metric::Ttft).map(str::to_string),
                measure::unmeasured_cause(&fig, crate::vocab::Metric::Tpot).map(str::to_string),
            );
            Judged {
                why,
                cause,
                sample: Sample {
                    timing: timings
                        .get(&r.record.index)
                        .map(|t| (*t).clone())
                        .unwrap_or_default(),
                    ok,
                    ttft_ms: fig.ttft_ms,
                    e2e_ms: fig.e2e_ms,
                    tpot_ms: fig.tpot_ms,
                    itl_ms: fig.itl_ms.clone(),
                    tokens: fig.completion_tokens.or(fig.completion_tokens_estimate),
                    ttft_unmeasured: unmeasured.0.clone(),
                    tpot_unmeasured: unmeasured.1.clone(),
                },
                reply: r.reply.clone(),
                prompt_index: r.record.prompt_index,
                prompt: r.record.prompt.clone(),
                unmeasured,
            }
        })
        .collect()
}

/// What a failed request is counted as in a verdict's causes: its failure code's name (`transport`,
/// `http_status`, or `content`), or, for a request another tool marked failed (an import), the tool's own class
/// of the failure ([`crate::evidence::imported::Imported::failure_kind`]: inference-perf's
/// `ServerDisconnectedError`), which says more than the `transport` the import files it under.
fn cause_of(
    imported: Option<&crate::evidence::imported::Imported>,
    failure: Option<&crate::vocab::Failures>,
    why: &str,
) -> String {
    let tool_kind = imported.zip(failure).and_then(|(imp, f)| {
        f.parts()
            .iter()
            .find(|p| p.code == crate::vocab::FailureCode::Transport)
            .and_then(|p| imp.failure_kind(&p.detail))
    });
    match tool_kind {
        Some(k) => k.to_string(),
        None => why.to_string(),
    }
}

/// The failed requests of `js` counted by cause ([`cause_of`]), by name: `1 content, 2 transport`, or
/// `2 ServerDisconnectedError (inference-perf's own names)` when an import's tool named them. Empty when
/// none failed.
fn causes(js: &[Judged], imported: Option<&crate::evidence::imported::Imported>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for j in js.iter().filter(|j| !j.sample.ok) {
        *counts
            .entry(j.cause.as_deref().unwrap_or("content"))
            .or_default() += 1;
    }
    let list: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
    let named_by_tool = imported.filter(|_| {
        js.iter()
            .any(|j| !j.sample.ok && j.cause.as_deref() != j.why)
    });
    match named_by_tool {
        Some(imp) => format!("{} ({}'s own names)", list.join(", "), imp.tool),
        None => list.join(", "),
    }
}

/// The judged (non-warmup) requests of one point as load samples, in send order: timing from `load.json`,
/// figures re-measured from the timed reads, `ok` as the verdicts count it (no serve error, not cut, sane
/// content). What load records are built from (`records::load_records`).
pub fn samples(ev: &Evidence, rec: &LoadRecord) -> Vec<Sample> {
    judged(ev, rec).into_iter().map(|j| j.sample).collect()
}

fn verdict(name: String, outcome: Outcome, details: String) -> Verdict {
    let mut v = Verdict::new(AssertionKind::Load, outcome, &details);
    v.message = format!("{name} {} {}", outcome.word(), v.details());
    v.assertion = name;
    v
}

/// Judges every point of a load gate. Pure.
pub fn judge_points(gate: &GateSpec, points: &[PointEvidence]) -> Vec<Verdict> {
    let Some(load) = &gate.load else {
        return Vec::new();
    };
    // The concurrency-1 replies `[assert.consistency]` compares with, or why there are none (the c=1 point
    // not in this run, an import of another point, or its evidence unreadable): then consistency is
    // INDETERMINATE naming why, never failed for want of evidence.
    let baseline_replies: Result<BTreeMap<usize, crate::analysis::reply::Reply>, String> =
        match points.iter().find(|p| p.point == Point::Concurrency(1)) {
            None => Err("the c=1 point is not in this run (not imported, or not run here)".into()),
            Some(PointEvidence { loaded: Err(e), .. }) => {
                Err(format!("the c=1 point has no evidence ({e})"))
            }
            Some(PointEvidence {
                loaded: Ok((ev, rec)),
                ..
            }) => {
                let mut m = BTreeMap::new();
                for j in judged(ev, rec).into_iter().filter(|j| j.sample.ok) {
                    m.entry(j.prompt_index).or_insert(j.reply);
                }
                Ok(m)
            }
        };
    let all_names = load.trial_names();
    // Output tok/s at concurrency 1, for the scaling efficiency of the other points.
    let tok_s_1 = points
        .iter()
        .find(|p| p.point == Point::Concurrency(1))
        .and_then(|p| p.loaded.as_ref().ok())
        .and_then(|(ev, rec)| {
            let s: Vec<Sample> = judged(ev, rec).into_iter().map(|j| j.sample).collect();
            agg::output_tok_s(&s)
        });
    let mut out = Vec::new();
    for pe in points {
        let prefix = format!("[{}]::", pe.point.label());
        // `[assert.parity]` verdicts are judge::parity's, from the point's two runs.
        let mine: Vec<&String> = all_names
            .iter()
            .filter(|n| n.starts_with(&prefix) && !n[prefix.len()..].starts_with("parity_"))
            .collect();
        let (ev, rec) = match &pe.loaded {
            Ok(x) => x,
            Err(e) => {
                for n in mine {
                    out.push(verdict(
                        n.clone(),
                        Outcome::Fail,
                        format!("no evidence for this point: {e}"),
                    ));
                }
                continue;
            }
        };
        let first = out.len();
        judge_point(
            load,
            pe,
            ev,
            rec,
            tok_s_1,
            &baseline_replies,
            &prefix,
            mine,
            &mut out,
        );
        // Another driver's timings (Locust): every verdict of the point names it and its precision.
        if let Some(d) = &rec.driver {
            for v in &mut out[first..] {
                let details = format!("{}; {}", v.details(), d.by());
                v.set(v.outcome, details);
            }
        }
        // Another tool's timings: every verdict of the point says whose they are.
        if let Some(imp) = &ev.run.imported {
            for v in &mut out[first..] {
                let details = format!("{}; {}", v.details(), imp.by());
                v.set(v.outcome, details);
            }
        }
    }
    out
}

/// The verdicts of one point whose evidence loaded, appended to `out`.
#[allow(clippy::too_many_arguments)]
fn judge_point(
    load: &crate::spec::load::LoadGate,
    pe: &PointEvidence,
    ev: &Evidence,
    rec: &LoadRecord,
    tok_s_1: Option<f64>,
    baseline_replies: &Result<BTreeMap<usize, crate::analysis::reply::Reply>, String>,
    prefix: &str,
    mine: Vec<&String>,
    out: &mut Vec<Verdict>,
) {
    {
        let js = judged(ev, rec);
        let samples: Vec<Sample> = js.iter().map(|j| j.sample.clone()).collect();
        // An import's plan is the judging gate's `[load] requests` (as `servegate import` took it), so a
        // re-judge gives what the import gave; servegate's own run keeps the plan it recorded.
        let gate_plan = ev
            .run
            .imported
            .as_ref()
            .and(load.spec.requests)
            .map(|n| n as usize);
        let planned = gate_plan.unwrap_or(rec.planned).max(samples.len());
        let n_of = format!("n={} of {planned} planned", samples.len());
        let void = void_why(load, ev, &samples, planned, gate_plan, &n_of);
        if let Some(why) = void {
            for n in mine {
                out.push(verdict(n.clone(), Outcome::Void, why.clone()));
            }
            return;
        }
        let failed = samples.iter().filter(|s| !s.ok).count();
        // No request succeeded: there is nothing to take a percentile of, and that is the serve's doing
        // (every request errored, was cut or had no sane content), never "too few samples".
        let by_cause = causes(&js, ev.run.imported.as_ref());
        let none_succeeded = (failed == samples.len()).then(|| {
            format!("no request succeeded: {failed} of {planned} planned failed, by cause: {by_cause}; {n_of}")
        });
        out.extend(latency_verdicts(
            &load.assertions.latency,
            prefix,
            ev.run.imported.as_ref(),
            &samples,
            &js,
            (failed, by_cause.as_str(), planned),
            none_succeeded.as_deref(),
            &n_of,
            load.spec.duration_s,
        ));
        if let Some(t) = &load.assertions.throughput {
            out.push(throughput_verdict(
                t,
                prefix,
                (pe.point, load.spec.duration_s),
                &samples,
                tok_s_1,
                &n_of,
            ));
        }
        if let Some(g) = &load.assertions.goodput {
            out.push(goodput_verdict(g, prefix, &samples, planned, &n_of));
        }
        if let Some(max) = load.assertions.errors_max_rate {
            let name = format!("{prefix}errors");
            let rate = if planned == 0 {
                0.0
            } else {
                failed as f64 / planned as f64
            };
            let outcome = if rate <= max {
                Outcome::Pass
            } else {
                Outcome::Fail
            };
            // Each failure's cause, counted ([`causes`]), so a red says what failed: `; by cause: 2
            // transport`, or an import's tool's own class of its failures (`2 ServerDisconnectedError`).
            let by_cause = if by_cause.is_empty() {
                String::new()
            } else {
                format!("; by cause: {by_cause}")
            };
            // An import whose tool recorded no usable reply text: the content was not judged, said, never a
            // bare count that reads as if it had been.
            let what = match ev.run.imported.as_ref().filter(|i| !i.text_recorded) {
                Some(imp) => format!(
                    "error or cut; content not judged: {}'s file holds no usable reply text, the reads carry placeholders",
                    imp.tool
                ),
                None => "error, cut, or no sane content".to_string(),
            };
            out.push(verdict(name, outcome, format!(
                "{failed} of {planned} planned requests failed ({what}){by_cause}, rate {rate:.4} (max {max}) ({n_of})"
            )));
        }
        if let (Some(c), false) = (
            load.assertions.consistency,
            pe.point == Point::Concurrency(1),
        ) {
            let name = format!("{prefix}consistency");
            let base = match baseline_replies {
                Ok(b) => b,
                Err(why) => {
                    out.push(verdict(
                        name,
                        Outcome::Indeterminate,
                        format!("no replies at concurrency 1 to compare with: {why}; consistency is not judged without them ({n_of})"),
                    ));
                    return;
                }
            };
            let (outcome, details) = consistency(&pe.point.label(), base, &js, c);
            out.push(verdict(name, outcome, details));
        }
    }
}

/// Why a point's verdicts are all VOID, or None: the load applied was not the load asked for (requests
/// not sent or not in an import's file, more than the gate planned, none sent at all, or the client's send
/// lag p99 over `max_lag_ms`).
fn void_why(
    load: &crate::spec::load::LoadGate,
    ev: &Evidence,
    samples: &[Sample],
    planned: usize,
    gate_plan: Option<usize>,
    n_of: &str,
) -> Option<String> {
    let lag = agg::lag_p99_ms(samples);
    let extra = gate_plan.filter(|p| samples.len() > *p);
    if let (Some(p), Some(imp)) = (extra, &ev.run.imported) {
        Some(format!(
            "{}'s file holds {} judged requests, {} beyond the gate's plan of {p} ([load] requests): the load was not the load asked for (judge it with a gate that plans {}, or rerun the tool with {p})",
            imp.tool,
            samples.len(),
            samples.len() - p,
            samples.len()
        ))
    } else if samples.len() < planned {
        Some(match &ev.run.imported {
            Some(imp) => format!(
                "{} of {planned} planned requests are not in {}'s file (it holds {}; the plan is the gate's [load] requests): the load was not the load asked for",
                planned - samples.len(),
                imp.tool,
                samples.len()
            ),
            None => format!(
                "{} of {planned} planned requests were not sent ({}): the load was not the load asked for",
                planned - samples.len(),
                ev.run
                    .notes
                    .iter()
                    .find(|n| n.starts_with("load_client"))
                    .map_or("the run deadline or a stop came first", |n| n.as_str())
            ),
        })
    } else if samples.is_empty() {
        // Nothing sent and nothing planned (a `duration_s` point plans what it sent): no load was
        // applied, so nothing is measured under it: every assertion of the point is VOID, never a pass of
        // "0 of 0".
        Some(match load.spec.duration_s {
            Some(d) => format!(
                "no judged request was sent within duration_s = {d} s ({n_of}): no load was applied, nothing was measured; raise [load] duration_s"
            ),
            None => format!(
                "no judged request was sent ({n_of}): no load was applied, nothing was measured"
            ),
        })
    } else {
        lag.filter(|l| *l > load.spec.max_lag_ms).map(|l| format!(
            "the client fell behind its schedule: send lag p99 {l:.2} ms > max_lag_ms {} (the load was not the load asked for; nothing measured under it counts)",
            load.spec.max_lag_ms
        ))
    }
}

/// The latency bounds of one point: each percentile from the succeeded requests' values with every failed
/// request counted above every value (ITL: the gaps only), INDETERMINATE under the n the percentile needs.
#[allow(clippy::too_many_arguments)]
fn latency_verdicts(
    bounds: &[crate::spec::load::LatencyBound],
    prefix: &str,
    imported: Option<&crate::evidence::imported::Imported>,
    samples: &[Sample],
    js: &[Judged],
    (failed, by_cause, planned): (usize, &str, usize),
    none_succeeded: Option<&str>,
    n_of: &str,
    duration_s: Option<f64>,
) -> Vec<Verdict> {
    let mut out = Vec::new();
    for b in bounds {
        let name = format!("{prefix}{}", b.key.trim_end_matches("_ms"));
        if let Some(why) = none_succeeded {
            out.push(verdict(
                name,
                Outcome::Fail,
                format!("{} p{}: {why}", b.metric.name(), b.p),
            ));
            continue;
        }
        // Another tool's format that does not carry this figure per request: refused, never judged from a
        // reconstruction of it.
        if let Some(why) = imported.and_then(|i| i.lacks(b.metric.name())) {
            out.push(verdict(
                name,
                Outcome::Indeterminate,
                format!(
                    "{} p{} refused: {why}; a percentile is judged from per-request values only ({n_of})",
                    b.metric.name(),
                    b.p
                ),
            ));
            continue;
        }
        let vals = agg::values(samples, b.metric);
        // A failed request missed every latency bound: it counts above every value (never dropped, so a
        // serve that fails its slow requests does not look fast).
        let failed_here = if b.metric == crate::spec::load::LatencyMetric::Itl {
            0
        } else {
            failed
        };
        let n = vals.len() + failed_here;
        // Succeeded requests without this figure because of delivery: left out, counted, one cause named;
        // the n judged then stands in place of the point's (never "n=6 of 6" beside "1 not measured").
        let causes: Vec<&String> = js
            .iter()
            .filter(|j| j.sample.ok)
            .filter_map(|j| match b.metric {
                crate::spec::load::LatencyMetric::Ttft => j.unmeasured.0.as_ref(),
                crate::spec::load::LatencyMetric::Tpot => j.unmeasured.1.as_ref(),
                _ => None,
            })
            .collect();
        let n_of = match causes.as_slice() {
            [] => n_of.to_string(),
            [c] => format!("n={n} of {planned} planned; 1 not measured, left out: {c}"),
            [c, ..] => format!(
                "n={n} of {planned} planned; {} not measured, left out (first: {c})",
                causes.len()
            ),
        };
        let need = min_n_for(f64::from(b.p));
        let unit = "ms";
        if n < need {
            // Enough were planned but too few measured (a busy client too late to time them): more requests
            // is not the remedy, and the causes follow in `n_of`.
            // A `duration_s` point has no `requests` key: it sends what the duration allows.
            let remedy = if planned >= need && !causes.is_empty() {
                format!("{} of {planned} not measured", causes.len())
            } else if let Some(d) = duration_s {
                format!("{planned} sent within duration_s = {d} s: raise [load] duration_s, or lower the percentile")
            } else {
                format!("raise [load] requests to {need} or more")
            };
            out.push(verdict(
                name,
                Outcome::Indeterminate,
                format!(
                    "p{} from n={n} {}: claiming p{} needs at least {need} ({remedy}); {n_of}",
                    b.p,
                    if b.metric == crate::spec::load::LatencyMetric::Itl {
                        "gaps"
                    } else {
                        "requests"
                    },
                    b.p
                ),
            ));
            continue;
        }
        let mut all = vals.clone();
        all.extend(std::iter::repeat_n(1e300, failed_here));
        let p = stats::percentile(&all, f64::from(b.p)).unwrap_or(f64::INFINITY);
        let (outcome, shown) = if p >= 1e299 {
            (
                Outcome::Fail,
                format!("p{} falls among the {failed_here} failed requests", b.p),
            )
        } else if p <= b.limit_ms {
            (Outcome::Pass, format!("p{} {p:.1} {unit}", b.p))
        } else {
            (Outcome::Fail, format!("p{} {p:.1} {unit}", b.p))
        };
        // The p50 of the succeeded requests' values alone, labelled so (the judged percentile above counts the
        // failed above every value: the two differ when any failed).
        let p50 = stats::percentile(&vals, 50.0);
        let mut v = verdict(
            name,
            outcome,
            format!(
                "{} {shown} (limit {} {unit}; p50 of succeeded {}; numpy linear percentiles; {n_of}{})",
                b.metric.name(),
                b.limit_ms,
                p50.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into()),
                if failed_here > 0 {
                    format!(
                        "; {failed_here} failed, counted above every value, by cause: {by_cause}"
                    )
                } else {
                    String::new()
                }
            ),
        );
        // `median` carries the statistic compared with the bound: here the pNN judged (failed counted above
        // every value), as docs/results-json.md states.
        v.median = (p < 1e299).then_some(p);
        v.values = vals.iter().map(|x| Some(*x)).collect();
        v.bound = Some(crate::vocab::Bound::for_metric(
            b.metric.metric(),
            b.limit_ms,
        ));
        out.push(v);
    }
    out
}

/// The throughput of one point: output tok/s and requests/s over the measured window against their floors,
/// with the scaling efficiency against concurrency 1.
///
/// A closed-loop point whose peak real concurrency ([`agg::peak_concurrency`], failed requests counted)
/// never reached its concurrency is INDETERMINATE: its throughput is that of a lighter load, never passed
/// (nor failed) as the load asked; when failed requests without a recorded end ([`agg::endless_failures`])
/// make the peak a lower bound, the verdict says so rather than that the requests ended early.
fn throughput_verdict(
    t: &crate::spec::load::ThroughputAssert,
    prefix: &str,
    (point, duration_s): (Point, Option<f64>),
    samples: &[Sample],
    tok_s_1: Option<f64>,
    n_of: &str,
) -> Verdict {
    let name = format!("{prefix}throughput");
    let tok_s = agg::output_tok_s(samples);
    let rps = agg::requests_per_s(samples);
    let mut bad = Vec::new();
    if let Some(f) = t.floor_tok_s {
        if tok_s.is_none_or(|x| x < f) {
            bad.push(format!(
                "output {} tok/s under floor {f}",
                tok_s.map(|x| format!("{x:.1}")).unwrap_or("-".into())
            ));
        }
    }
    if let Some(f) = t.floor_rps {
        if rps.is_none_or(|x| x < f) {
            bad.push(format!(
                "{} requests/s under floor {f}",
                rps.map(|x| format!("{x:.2}")).unwrap_or("-".into())
            ));
        }
    }
    let scaling = match (point, tok_s, tok_s_1) {
        (Point::Concurrency(c), Some(t), Some(t1)) if c > 1 => agg::scaling_efficiency(t, c, t1)
            .map(|e| format!("; scaling efficiency {e:.2} of c=1"))
            .unwrap_or_default(),
        _ => String::new(),
    };
    let peak = agg::peak_concurrency(samples);
    let figure = throughput_figure(t, tok_s, rps);
    let details = format!(
        "output {} tok/s, {} requests/s over the measured window {} ms; peak real concurrency {peak}{scaling} ({n_of}){}",
        tok_s.map(|x| format!("{x:.1}")).unwrap_or("-".into()),
        rps.map(|x| format!("{x:.2}")).unwrap_or("-".into()),
        agg::window_ms(samples).map(|x| format!("{x:.0}")).unwrap_or("-".into()),
        if bad.is_empty() { String::new() } else { format!(": {}", bad.join("; ")) }
    );
    if let Point::Concurrency(c) = point {
        if peak < c as usize {
            let remedy = if samples.len() < c as usize {
                match duration_s {
                    Some(d) => format!(
                        "{} sent within duration_s = {d} s: raise [load] duration_s",
                        samples.len()
                    ),
                    None => format!("raise [load] requests to {c} or more"),
                }
            } else {
                match agg::endless_failures(samples) {
                    0 => "its requests ended before the next were sent".to_string(),
                    1 => "1 failed request has no end recorded, counted in flight at its send only: the peak is at least this".to_string(),
                    k => format!("{k} failed requests have no end recorded, counted in flight at their send only: the peak is at least this"),
                }
            };
            let mut v = verdict(
                name,
                Outcome::Indeterminate,
                format!("peak real concurrency {peak} never reached the asked concurrency {c} ({remedy}): the throughput of c={c} was not measured; {details}"),
            );
            (v.median, v.bound) = figure;
            return v;
        }
    }
    let mut v = verdict(
        name,
        if bad.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Fail
        },
        details,
    );
    (v.median, v.bound) = figure;
    v
}

/// The figure and floor a throughput verdict carries into results: output tok/s when `floor_tok_s` is given,
/// else requests/s.
fn throughput_figure(
    t: &crate::spec::load::ThroughputAssert,
    tok_s: Option<f64>,
    rps: Option<f64>,
) -> (Option<f64>, Option<crate::vocab::Bound>) {
    match (t.floor_tok_s, t.floor_rps) {
        (Some(f), _) => (
            tok_s,
            Some(crate::vocab::Bound::for_metric(
                crate::vocab::Metric::OutputThroughput,
                f,
            )),
        ),
        (None, Some(f)) => (
            rps,
            Some(crate::vocab::Bound::for_metric(
                crate::vocab::Metric::RequestThroughput,
                f,
            )),
        ),
        (None, None) => (None, None),
    }
}

/// The goodput of one point: the SLO attainment of the planned requests (those not measured counted apart,
/// with their causes) against `at_least`, INDETERMINATE when fewer than half were counted.
fn goodput_verdict(
    g: &crate::spec::load::GoodputAssert,
    prefix: &str,
    samples: &[Sample],
    planned: usize,
    n_of: &str,
) -> Verdict {
    let name = format!("{prefix}goodput");
    let slo = Slo {
        ttft_ms: g.ttft_ms,
        tpot_ms: g.tpot_ms,
        e2e_ms: g.e2e_ms,
    };
    let good = agg::good(samples, &slo);
    let unmeasured = agg::unmeasured(samples, &slo);
    let counted = planned.saturating_sub(unmeasured);
    let att = agg::attainment(samples, &slo, planned);
    let gp = agg::goodput_rps(samples, &slo);
    // Not measured: neither met nor missed (analysis::load::Slo::unmeasured), named with the cause.
    let not_measured = if unmeasured == 0 {
        String::new()
    } else {
        let causes: Vec<String> = samples
            .iter()
            .filter_map(|s| {
                slo.unmeasured(s)
                    .map(|c| format!("request {:02} ({c})", s.timing.index))
            })
            .collect();
        format!(
            "; {unmeasured} not measured, neither met nor missed: {}",
            causes.join("; ")
        )
    };
    let slos: Vec<String> = [("ttft", g.ttft_ms), ("tpot", g.tpot_ms), ("e2e", g.e2e_ms)]
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} <= {v} ms")))
        .collect();
    // Fewer than half the planned counted: the attainment of the counted is not the run's.
    let too_few = (counted as f64) < crate::judge::MIN_MEASURED_SHARE * planned as f64;
    let outcome = match att {
        Some(a) if !too_few && a >= g.at_least => Outcome::Pass,
        Some(_) if !too_few => Outcome::Fail,
        _ => Outcome::Indeterminate,
    };
    let of = if unmeasured == 0 {
        format!("{planned} planned")
    } else {
        format!("{counted} counted, {planned} planned")
    };
    // The n counted stands in place of the point's beside the ones not measured (never "n=6 of 6").
    let n_of = if unmeasured == 0 {
        n_of.to_string()
    } else {
        format!("n={counted} of {planned} planned")
    };
    let mut v = verdict(name, outcome, format!(
        "SLO attainment {} ({good} of {of} met {}; at least {}); goodput {} requests/s ({n_of}{not_measured})",
        att.map(|a| format!("{a:.4}")).unwrap_or("-".into()),
        slos.join(" and "),
        g.at_least,
        gp.map(|x| format!("{x:.2}")).unwrap_or("-".into())
    ));
    // `median` carries the SLO attainment (the statistic compared with `at_least`), not a median.
    v.median = att;
    v.bound = Some(crate::vocab::Bound::for_metric(
        crate::vocab::Metric::SloAttainment,
        g.at_least,
    ));
    v
}

/// `[assert.consistency]` at one point: every succeeded reply against the first succeeded concurrency-1 reply
/// to its prompt, by [`drift::compare`] (the drift issue's rules, docs/drift.md): identical passes; close
/// (parted at token k to a token within the other's top-k: float noise, e.g. a unified KV cache under
/// batching) passes under `logprobs_close` with the drift stated; diverged fails, naming prompt, position and
/// both tokens. Without logprobs on either side the comparison is `exact` on the text, and the verdict says so.
fn consistency(
    label: &str,
    base: &BTreeMap<usize, crate::analysis::reply::Reply>,
    js: &[Judged],
    c: crate::spec::load::ConsistencyAssert,
) -> (Outcome, String) {
    let mut compared = 0;
    let mut counts: BTreeMap<drift::State, usize> = BTreeMap::new();
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut fallbacks: Vec<String> = Vec::new();
    let mut fail = 0;
    for j in js.iter().filter(|j| j.sample.ok) {
        let Some(b) = base.get(&j.prompt_index) else {
            continue;
        };
        compared += 1;
        let cmp = drift::compare(b, &j.reply, c.rule, c.top_k as usize);
        *counts.entry(cmp.state).or_default() += 1;
        if let Some(f) = &cmp.fallback {
            if !fallbacks.contains(f) {
                fallbacks.push(f.clone());
            }
        }
        let short: String = j.prompt.chars().take(40).collect();
        let line = format!(
            "prompt {} ({short:?}) {} {}",
            j.prompt_index,
            cmp.state.word(),
            cmp.describe("c=1", label)
        );
        if !cmp.passes() {
            fail += 1;
            if !problems.contains(&line) {
                problems.push(line);
            }
        } else if cmp.state == drift::State::Close && !notes.contains(&line) {
            notes.push(line);
        }
    }
    // Nothing compared: no verdict on consistency (the failures themselves fail the errors and latency
    // verdicts of their point), never a FAIL for want of evidence.
    if compared == 0 {
        let ok = js.iter().filter(|j| j.sample.ok).count();
        let why = if ok == 0 {
            format!("no reply at {label} succeeded")
        } else if base.is_empty() {
            "no reply at c=1 succeeded".to_string()
        } else {
            format!("none of the {ok} succeeded replies at {label} has a succeeded c=1 reply to the same prompt")
        };
        return (Outcome::Indeterminate, format!("nothing to compare: {why}"));
    }
    let rule = if fallbacks.is_empty() {
        format!("rule {}, top {}", c.rule.name(), c.top_k)
    } else if c.rule == crate::spec::drift::Rule::Exact {
        // Exact compares token for token when both replies carry logprobs, byte for byte otherwise.
        format!(
            "rule exact, byte for byte on the text, not token for token (logprobs missing: {})",
            fallbacks.join("; ")
        )
    } else {
        format!(
            "rule exact on the text, not {} (logprobs missing: {})",
            c.rule.name(),
            fallbacks.join("; ")
        )
    };
    let tally = [
        drift::State::Identical,
        drift::State::Close,
        drift::State::Diverged,
    ]
    .iter()
    .filter_map(|s| counts.get(s).map(|n| format!("{n} {}", s.word())))
    .collect::<Vec<_>>()
    .join(", ");
    let list = |v: &mut Vec<String>| {
        let n = v.len();
        v.truncate(3);
        let more = if n > 3 {
            format!("; and {} more", n - 3)
        } else {
            String::new()
        };
        format!("{}{more}", v.join("; "))
    };
    if fail > 0 {
        (
            Outcome::Fail,
            format!(
                "{fail} of {compared} replies part from their prompt's concurrency-1 reply beyond the tolerance ({rule}): {}; {tally}",
                list(&mut problems)
            ),
        )
    } else if !notes.is_empty() {
        (
            Outcome::Pass,
            format!(
                "{compared} replies against their prompt's concurrency-1 reply ({rule}): {tally}; drift within tolerance (float noise between near-tied tokens): {}",
                list(&mut notes)
            ),
        )
    } else {
        (
            Outcome::Pass,
            format!(
                "{compared} replies against their prompt's concurrency-1 reply ({rule}): {tally}"
            ),
        )
    }
}
