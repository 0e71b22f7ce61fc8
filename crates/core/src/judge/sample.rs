//! `[assert.sample.NAME]`: every value a `[[sample]]` sampler gave during the run (`run.json`
//! `serve.samples`) within the gate's `min` / `max`, one verdict per asserted sampler named `sample.<name>`.
//! A sampler that gave no value is INDETERMINATE with its reasons (never a pass on nothing); a value
//! outside the bounds FAILs, naming how many and the extreme.

use crate::analysis::{stats, Evidence};
use crate::spec::sample::SampleAssert;
use crate::spec::GateSpec;
use crate::text::shown;
use crate::vocab::AssertionKind;

use super::verdict::{Outcome, Verdict};

/// `min 1 - max 2 unit`, `min 1 unit`, `max 2 unit`.
fn bounds(a: &SampleAssert, unit: &str) -> String {
    match (a.min, a.max) {
        (Some(lo), Some(hi)) => format!("bounds {lo}-{hi} {unit}"),
        (Some(lo), None) => format!("min {lo} {unit}"),
        (None, Some(hi)) => format!("max {hi} {unit}"),
        (None, None) => "no bound".into(),
    }
}

/// The verdicts of the gate's sampler assertions; with `run_failure` (nothing was judged: the serve never
/// became ready, the evidence is incomplete) each FAILs with it.
pub(super) fn judge_samples(
    gate: &GateSpec,
    evidence: &Evidence,
    run_failure: Option<&str>,
) -> Vec<Verdict> {
    gate.assertions
        .sample
        .iter()
        .map(|a| {
            let name = a.trial_name();
            let named = |o, d: String| Verdict::named(AssertionKind::Sample, name.clone(), o, d);
            if let Some(f) = run_failure {
                return named(Outcome::Fail, f.to_string());
            }
            let Some(s) = evidence.run.serve.samples.iter().find(|s| s.name == a.name) else {
                return named(
                    Outcome::Indeterminate,
                    format!("no series of sampler {} in run.json (serve.samples): it never ran (n=0)", a.name),
                );
            };
            let unit = shown(&s.unit);
            let values: Vec<f64> = s.values.iter().map(|(_, v)| *v).collect();
            if values.is_empty() {
                return named(
                    Outcome::Indeterminate,
                    format!(
                        "no value: none of {} samples gave one: {} ({}; n=0 of {})",
                        s.taken,
                        shown(&s.reasons.join("; ")),
                        bounds(a, &unit),
                        s.taken
                    ),
                );
            }
            let out: Vec<f64> = values
                .iter()
                .copied()
                .filter(|v| a.min.is_some_and(|lo| *v < lo) || a.max.is_some_and(|hi| *v > hi))
                .collect();
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let median = stats::median(&values).unwrap_or(lo);
            let failed = if s.failed > 0 {
                format!("; {} gave none: {}", s.failed, shown(&s.reasons.join("; ")))
            } else {
                String::new()
            };
            let (outcome, head) = if out.is_empty() {
                (Outcome::Pass, format!("{} values within", values.len()))
            } else {
                (
                    Outcome::Fail,
                    format!("{} of {} values outside", out.len(), values.len()),
                )
            };
            let mut v = named(
                outcome,
                format!(
                    "{head} {} (range {lo}-{hi} {unit}, median {median} {unit}; every {} ms{failed}; n={} of {} samples)",
                    bounds(a, &unit),
                    s.every_ms,
                    values.len(),
                    s.taken
                ),
            );
            v.values = values.into_iter().map(Some).collect();
            v.median = Some(median);
            v
        })
        .collect()
}
