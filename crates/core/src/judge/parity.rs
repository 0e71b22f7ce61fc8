//! Judging cross-tool parity (pure): each `[assert.parity]` bound of a load gate whose `[load] parity`
//! names a tool, per sweep point, from the point's two runs on the same schedule: servegate's own client
//! (`<point>/`) and the tool (`<point>/parity/`, its output imported as by `servegate import`). Named
//! `[c=2]::parity_ttft_p50` (docs/load.md "Cross-tool parity").
//!
//! In this order, for every bound of a point:
//! * **fail** when either run has no evidence;
//! * **indeterminate** when the tool was not provisioned (the parity run's `run.json` note
//!   [`UNAVAILABLE`], naming the provisioning script), when the tool's format lacks the metric (GuideLLM:
//!   no per-token times, so no ITL), or when either side measured fewer values than the percentile needs
//!   ([`min_n_for`]; both n of N planned stated);
//! * **void** when a side's load was not the load asked for: planned requests missing from either side
//!   (the tool exited early, servegate's client ran out of time), or servegate's client behind its
//!   schedule (send lag p99 over `max_lag_ms`);
//! * **pass** when |tool − servegate| is within the bound, **fail** when not: both figures, the difference,
//!   the bound, and the referee: the serve's own truth when it states one ([`TRUTH_HEADER`], which
//!   servegate's synthetic serve sends on every reply: the side closer to it is named), else that there is
//!   no referee (a real serve).
//!
//! Percentiles are numpy's linear ones over the succeeded requests' values on each side (failed requests
//! left out and counted). The tool's figures are marked as the tool's, its name and version from its
//! output's `imported` (escaped, as every verdict's details are).

use super::load::{samples, PointEvidence};
use super::verdict::{Outcome, Verdict};
use crate::analysis::load::{self as agg, min_n_for, Sample};
use crate::analysis::{stats, Evidence};
use crate::spec::load::{parity_name, LatencyMetric, LoadGate, ParityBound, ParityLimit};
use crate::vocab::AssertionKind;

/// The subdirectory of a sweep point's evidence that holds the parity tool's run (`parity` in `c2`: its
/// `run.json`, `load.json`, `NN.*` and the tool's own directory, `aiperf/` ...).
pub const PARITY_DIR: &str = "parity";

/// The start of the parity run's `run.json` note when the tool is not provisioned on this runner: the
/// parity is INDETERMINATE with the note (which names the provisioning script), never failed.
pub const UNAVAILABLE: &str = "parity_unavailable: ";

/// The response header in which servegate's synthetic serve states each reply's true schedule
/// (`ttft_ms=40.000;tpot_ms=10.000;itl_ms=10.000;e2e_ms=110.000`: the due time of the first token chunk,
/// TPOT and the gap between token chunks as scheduled, the due time of the last write; src/replay/synthetic.rs).
pub const TRUTH_HEADER: &str = "x-servegate-synthetic-truth";

/// One side of the comparison: who measured, its judged samples, the planned count and its evidence.
struct Side<'a> {
    who: String,
    samples: Vec<Sample>,
    planned: usize,
    ev: &'a Evidence,
}

impl<'a> Side<'a> {
    fn of(who: String, ev: &'a Evidence, rec: &crate::evidence::load::LoadRecord) -> Side<'a> {
        let samples = samples(ev, rec);
        Side {
            who,
            planned: rec.planned.max(samples.len()),
            samples,
            ev,
        }
    }

    /// Why this side's load was not the load asked for (planned requests missing), or None.
    fn missing(&self) -> Option<String> {
        let n = self.samples.len();
        (n < self.planned).then(|| {
            let why = self
                .ev
                .run
                .notes
                .iter()
                .find(|n| n.starts_with("load_client"))
                .map_or("the run deadline or a stop came first", |n| n.as_str());
            format!(
                "{} of {} planned requests of {} are missing ({why})",
                self.planned - n,
                self.planned,
                self.who
            )
        })
    }

    fn values(&self, metric: LatencyMetric) -> Vec<f64> {
        agg::values(&self.samples, metric)
    }

    fn failed(&self) -> usize {
        self.samples.iter().filter(|s| !s.ok).count()
    }
}

/// The parity tool's label from its run: `aiperf 0.13.0`, from `run.json` `imported` (else the gate's
/// `[load] parity` name, version not stated).
fn tool_label(load: &LoadGate, ev: Option<&Evidence>) -> String {
    match ev.and_then(|e| e.run.imported.as_ref()) {
        Some(imp) => format!(
            "{} {}",
            imp.tool,
            imp.version.as_deref().unwrap_or("(version not stated)")
        ),
        None => format!(
            "{} (version not stated)",
            load.spec.parity.as_ref().map_or("the tool", |d| d.name())
        ),
    }
}

/// INDETERMINATE parity verdicts of `point` with `reason` (a run that holds no parity run by design: an
/// import of one tool's output).
pub fn not_compared(
    load: &LoadGate,
    point: crate::spec::load::Point,
    reason: &str,
) -> Vec<Verdict> {
    load.assertions
        .parity
        .iter()
        .map(|b| {
            verdict(
                format!("[{}]::{}", point.label(), parity_name(b)),
                Outcome::Indeterminate,
                reason.into(),
            )
        })
        .collect()
}

fn verdict(name: String, outcome: Outcome, details: String) -> Verdict {
    Verdict::named(AssertionKind::Load, name, outcome, details)
}

/// The parity verdicts of one point, from servegate's client's evidence `own` and the tool's `tool` (the
/// same point; `servegate::loaded::load_parity`). Empty for a gate without `[assert.parity]`. Pure.
pub fn judge_parity(load: &LoadGate, own: &PointEvidence, tool: &PointEvidence) -> Vec<Verdict> {
    let bounds = &load.assertions.parity;
    let prefix = format!("[{}]::", own.point.label());
    let all = |outcome: Outcome, why: &str| -> Vec<Verdict> {
        bounds
            .iter()
            .map(|b| verdict(format!("{prefix}{}", parity_name(b)), outcome, why.into()))
            .collect()
    };
    let label = tool_label(load, tool.loaded.as_ref().ok().map(|x| &x.0));
    let (oev, orec) = match &own.loaded {
        Ok(x) => x,
        Err(e) => {
            return all(
                Outcome::Fail,
                &format!("no evidence of servegate's client for this point: {e}"),
            )
        }
    };
    let (tev, trec) = match &tool.loaded {
        Ok(x) => x,
        Err(e) => {
            return all(
                Outcome::Fail,
                &format!("no evidence of the parity run ({label}) for this point: {e}"),
            )
        }
    };
    if let Some(n) = tev.run.notes.iter().find(|n| n.starts_with(UNAVAILABLE)) {
        return all(
            Outcome::Indeterminate,
            &format!(
                "not compared: {}; servegate's client's run of the point is judged by its own assertions",
                &n[UNAVAILABLE.len()..]
            ),
        );
    }
    let ours = Side::of("servegate's client".into(), oev, orec);
    let theirs = Side::of(label, tev, trec);
    let lag = agg::lag_p99_ms(&ours.samples).filter(|l| *l > load.spec.max_lag_ms);
    let void = ours.missing().or_else(|| theirs.missing()).or_else(|| {
        lag.map(|l| format!("servegate's client fell behind its schedule: send lag p99 {l:.2} ms > max_lag_ms {}", load.spec.max_lag_ms))
    });
    if let Some(why) = void {
        return all(
            Outcome::Void,
            &format!(
                "{why}: the load was not the load asked for, so the two runs are not compared"
            ),
        );
    }
    bounds
        .iter()
        .map(|b| {
            let (outcome, details) = compare(b, &ours, &theirs);
            verdict(format!("{prefix}{}", parity_name(b)), outcome, details)
        })
        .collect()
}

/// One bound: the two percentiles, their difference against the bound, and the referee.
fn compare(b: &ParityBound, ours: &Side, theirs: &Side) -> (Outcome, String) {
    let m = b.metric.name();
    let p = b.p;
    if let Some(why) = theirs.ev.run.imported.as_ref().and_then(|i| i.lacks(m)) {
        return (
            Outcome::Indeterminate,
            format!("{m} p{p} not compared: {} lacks it: {why}", theirs.who),
        );
    }
    let (ov, tv) = (ours.values(b.metric), theirs.values(b.metric));
    let unit = if b.metric == LatencyMetric::Itl {
        "gaps"
    } else {
        "requests"
    };
    let n_of = |s: &Side, v: &[f64]| {
        let failed = s.failed();
        // ITL pools every gap of every reply: the n is of gaps, the plan of requests.
        let n = if b.metric == LatencyMetric::Itl {
            format!(
                "n={} gaps from {} of {} planned requests",
                v.len(),
                s.samples.len() - failed,
                s.planned
            )
        } else {
            format!("n={} of {} planned", v.len(), s.planned)
        };
        // Succeeded replies without this figure (a reply read late with later ones): counted, one cause named.
        let unmeasured: Vec<&String> = s
            .samples
            .iter()
            .filter(|x| x.ok)
            .filter_map(|x| match b.metric {
                LatencyMetric::Ttft => x.ttft_unmeasured.as_ref(),
                LatencyMetric::Tpot => x.tpot_unmeasured.as_ref(),
                _ => None,
            })
            .collect();
        let n = match unmeasured.first() {
            None => n,
            Some(c) => format!(
                "{n}, {} not measured, left out (first: {c})",
                unmeasured.len()
            ),
        };
        format!(
            "{} {n}{}",
            s.who,
            if failed > 0 {
                format!(", {failed} failed, left out")
            } else {
                String::new()
            }
        )
    };
    let ns = format!("{}; {}", n_of(ours, &ov), n_of(theirs, &tv));
    let need = min_n_for(f64::from(p));
    if ov.len() < need || tv.len() < need {
        return (
            Outcome::Indeterminate,
            format!("{m} p{p} not compared: claiming p{p} needs at least {need} {unit} on each side ({ns})"),
        );
    }
    let pct = |v: &[f64]| stats::percentile(v, f64::from(p)).unwrap_or(f64::NAN);
    let (o, t) = (pct(&ov), pct(&tv));
    let d = t - o;
    let allowed = b.limit.ms(o);
    let bound = match b.limit {
        ParityLimit::Ms(x) => format!("{x} ms"),
        ParityLimit::Pct(x) => format!("{x}% of servegate's client's figure, {allowed:.2} ms"),
    };
    let outcome = if d.abs() <= allowed {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    let who = &theirs.who;
    let verb = if outcome == Outcome::Pass {
        "within"
    } else {
        "beyond"
    };
    (
        outcome,
        format!(
            "{m} p{p}: {who} {t:.2} ms, servegate's client {o:.2} ms, difference {} ms ({verb} the bound of {bound}); {}; {who}'s figures are its own timings, not servegate's client's; numpy linear percentiles; {ns}",
            crate::text::signed(d, 2),
            referee(b, ours.ev, o, t, who),
        ),
    )
}

/// The referee of one bound: the serve's truth at percentile `b.p` over servegate's client's judged
/// replies that state it ([`TRUTH_HEADER`]) and which side (`o` servegate's, `t` the tool's) is closer, or
/// that the serve states none.
fn referee(b: &ParityBound, own: &Evidence, o: f64, t: f64, who: &str) -> String {
    let key = format!("{}_ms", b.metric.name());
    let truths: Vec<f64> = own
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .filter_map(|r| r.response.as_ref()?.headers.get(TRUTH_HEADER))
        .filter_map(|h| truth_of(h, &key))
        .collect();
    let Some(truth) = stats::percentile(&truths, f64::from(b.p)) else {
        return "no referee: the serve states no true timings (not servegate's synthetic serve), so which is right is not known".into();
    };
    let (eo, et) = (o - truth, t - truth);
    let closer = if (eo.abs() - et.abs()).abs() < 0.005 {
        "both are as close".to_string()
    } else if eo.abs() < et.abs() {
        "servegate's client is closer".to_string()
    } else {
        format!("{who} is closer")
    };
    format!(
        "referee: the serve's truth {truth:.2} ms ({TRUTH_HEADER}, {} replies): {closer} (servegate's client {} ms off, {who} {} ms off)",
        truths.len(),
        crate::text::signed(eo, 2),
        crate::text::signed(et, 2)
    )
}

/// The value of `key` (`ttft_ms`) in a [`TRUTH_HEADER`] value (`ttft_ms=40.000;tpot_ms=10.000;...`).
pub fn truth_of(header: &str, key: &str) -> Option<f64> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite())
}
