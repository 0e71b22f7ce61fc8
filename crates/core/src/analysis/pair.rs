//! Paired comparisons: the arithmetic of two runtimes measured in arms (default order theirs, ours, ours,
//! theirs) on one model file. Pure: per-request values in, medians, ranges, per-arm spreads and the ratio out.
//!
//! Definitions (tests/data/seed-runs.md, the first user's A-B-B-A pair):
//! - a runtime's figure is the **median of all its per-request values across all of its arms**, recomputed
//!   from the requests, never a median of arm medians (`stats::median`: mean of the two middle values for
//!   even n);
//! - its range is min-max of those values;
//! - an arm's spread is max/min of that arm's values (1.000 = no spread);
//! - the first request of an arm is shown separately when it differs from the median of the arm's other
//!   requests by more than [`FIRST_OUTLIER_SHARE`];
//! - the ratio is theirs / ours (for decode, > 1 means theirs is faster; for first token, > 1 means theirs is
//!   slower).

use crate::vocab::{Metric, Role};
use serde::{Deserialize, Serialize};

use crate::analysis::stats;

/// The first request of an arm is an outlier when it is more than 5 % away from the median of the rest.
pub const FIRST_OUTLIER_SHARE: f64 = 0.05;

/// One arm's per-request values, in send order.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmValues {
    /// `ours` or `theirs`.
    pub role: String,
    /// Per judged request, in send order (tok/s or ms, one unit for all arms).
    pub values: Vec<f64>,
}

/// One arm, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmSummary {
    /// 1-based position in the order.
    pub arm: usize,
    /// `ours` or `theirs`.
    pub role: String,
    /// Median of the arm's values.
    pub median: f64,
    /// Max / min of the arm's values.
    pub spread: f64,
    /// n of the arm.
    pub n: usize,
    /// The first request's value when it is an outlier (see module doc).
    pub first_outlier: Option<f64>,
}

/// One runtime over all of its arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeSummary {
    /// `ours` or `theirs`.
    pub role: String,
    /// Median of all per-request values of all its arms.
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Every value, arms in order.
    pub values: Vec<f64>,
}

impl RuntimeSummary {
    /// n.
    pub fn n(&self) -> usize {
        self.values.len()
    }
}

/// The pair's figures for one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairFigures {
    /// Arms in order.
    pub arms: Vec<ArmSummary>,
    /// Ours over all arms.
    pub ours: RuntimeSummary,
    /// Theirs over all arms.
    pub theirs: RuntimeSummary,
    /// theirs.median / ours.median.
    pub ratio: f64,
}

/// Why the figures cannot be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PairError {
    /// A runtime has no values.
    #[error("{0} has no values")]
    NoValues(String),
    /// A value is not finite or not > 0.
    #[error("{role} arm {arm} has a value that is not a finite number > 0: {value}")]
    BadValue {
        /// Role.
        role: String,
        /// 1-based arm.
        arm: usize,
        /// The value.
        value: f64,
    },
}

fn summarise(role: &str, arms: &[ArmValues]) -> Result<RuntimeSummary, PairError> {
    let values: Vec<f64> = arms
        .iter()
        .filter(|a| a.role == role)
        .flat_map(|a| a.values.iter().copied())
        .collect();
    let (Some(median), Some(min), Some(max)) = (
        stats::median(&values),
        stats::min(&values),
        stats::max(&values),
    ) else {
        return Err(PairError::NoValues(role.into()));
    };
    Ok(RuntimeSummary {
        role: role.into(),
        median,
        min,
        max,
        values,
    })
}

/// Computes the pair's figures from per-arm values (every value finite and > 0).
pub fn compute(arms: &[ArmValues]) -> Result<PairFigures, PairError> {
    let mut out = Vec::new();
    for (i, a) in arms.iter().enumerate() {
        if let Some(v) = a.values.iter().find(|v| !v.is_finite() || **v <= 0.0) {
            return Err(PairError::BadValue {
                role: a.role.clone(),
                arm: i + 1,
                value: *v,
            });
        }
        if a.values.is_empty() {
            continue;
        }
        let median = stats::median(&a.values).unwrap_or(f64::NAN);
        let spread = stats::spread(&a.values).unwrap_or(f64::NAN);
        let first_outlier = if a.values.len() >= 3 {
            let rest = stats::median(&a.values[1..]).unwrap_or(f64::NAN);
            let first = a.values[0];
            ((first - rest).abs() > FIRST_OUTLIER_SHARE * rest).then_some(first)
        } else {
            None
        };
        out.push(ArmSummary {
            arm: i + 1,
            role: a.role.clone(),
            median,
            spread,
            n: a.values.len(),
            first_outlier,
        });
    }
    let ours = summarise(Role::Ours.name(), arms)?;
    let theirs = summarise(Role::Theirs.name(), arms)?;
    let ratio = theirs.median / ours.median;
    Ok(PairFigures {
        arms: out,
        ours,
        theirs,
        ratio,
    })
}

/// How a metric is printed in a pair line.
#[derive(Debug, Clone, Copy)]
pub struct Unit {
    /// Name in the line (`decode`, `first token`).
    pub name: &'static str,
    /// Unit suffix (`tok/s`, `s`).
    pub unit: &'static str,
    /// Multiply the stored value by this for display (1 for tok/s; 0.001 to show ms as s).
    pub scale: f64,
    /// Decimals.
    pub decimals: usize,
}

/// Decode rate: tok/s, two decimals.
pub const DECODE: Unit = Unit {
    name: "decode",
    unit: Metric::DecodeRate.info().unit.name(),
    scale: 1.0,
    decimals: 2,
};
/// First token: values in ms shown as seconds, three decimals.
pub const FIRST_TOKEN: Unit = Unit {
    name: "first token",
    unit: "s",
    scale: 0.001,
    decimals: 3,
};

/// The pair's one line: both numbers, the ratio and the order, e.g.
/// `decode: theirs 45.57 tok/s (45.08-45.93, n=6) / ours 39.25 tok/s (39.20-39.32, n=6) = 1.16x; order theirs, ours, ours, theirs`.
pub fn line(f: &PairFigures, u: Unit) -> String {
    let d = u.decimals;
    let fmt = |r: &RuntimeSummary| {
        format!(
            "{} {:.d$} {} ({:.d$}-{:.d$}, n={})",
            r.role,
            r.median * u.scale,
            u.unit,
            r.min * u.scale,
            r.max * u.scale,
            r.n()
        )
    };
    let order: Vec<&str> = f.arms.iter().map(|a| a.role.as_str()).collect();
    format!(
        "{}: {} / {} = {:.2}x; order {}",
        u.name,
        fmt(&f.theirs),
        fmt(&f.ours),
        f.ratio,
        order.join(", ")
    )
}

/// The per-arm table as one line: `arms: 1 theirs 45.43 (spread 1.012, first 0.658 s), 2 ours ...`.
pub fn arms_line(f: &PairFigures, u: Unit) -> String {
    let d = u.decimals;
    let arms: Vec<String> = f
        .arms
        .iter()
        .map(|a| {
            let first = a
                .first_outlier
                .map(|x| format!(", first request {:.d$} {} shown apart", x * u.scale, u.unit))
                .unwrap_or_default();
            format!(
                "{} {} {:.d$} {} (spread {:.3}, n={}{first})",
                a.arm,
                a.role,
                a.median * u.scale,
                u.unit,
                a.spread,
                a.n
            )
        })
        .collect();
    format!("arms: {}", arms.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(role: &str, v: &[f64]) -> ArmValues {
        ArmValues {
            role: role.into(),
            values: v.to_vec(),
        }
    }

    /// Per-request decode values chosen to agree with the published arm table (tests/data/seed-runs.md) at its
    /// rounding: arm medians 45.43 / 39.28 / 39.23 / 45.91, spreads 1.012 / 1.001 / 1.003 / 1.009; runtime
    /// medians of six 45.57 (45.08-45.93) and 39.25 (39.20-39.32); ratio 1.16. Every published figure can be
    /// met at once, but only just: ours' median of six is the mean of arm 3's middle value and arm 2's
    /// middle value, so both must sit below the midpoints of their published roundings (39.226 and 39.276
    /// give 39.251; 39.23 and 39.28 exactly would give 39.255, which prints as 39.26 or 39.25 by the last bit).
    fn seed_decode() -> Vec<ArmValues> {
        vec![
            arm("theirs", &[45.08, 45.43, 45.62]),
            arm("ours", &[39.22, 39.276, 39.278]),
            arm("ours", &[39.20, 39.226, 39.316]),
            arm("theirs", &[45.52, 45.91, 45.93]),
        ]
    }

    #[test]
    fn seed_pair_decode_medians_of_six_ranges_spreads_and_ratio() {
        let f = compute(&seed_decode()).unwrap();
        let r2 = |x: f64| format!("{x:.2}");
        let r3 = |x: f64| format!("{x:.3}");
        // Per arm, at the published rounding.
        let arms: Vec<(String, String, String)> = f
            .arms
            .iter()
            .map(|a| (a.role.clone(), r2(a.median), r3(a.spread)))
            .collect();
        assert_eq!(
            arms,
            vec![
                ("theirs".into(), "45.43".into(), "1.012".into()),
                ("ours".into(), "39.28".into(), "1.001".into()),
                ("ours".into(), "39.23".into(), "1.003".into()),
                ("theirs".into(), "45.91".into(), "1.009".into()),
            ]
        );
        // Medians of six from the per-request values (worked by hand: theirs sorted 45.08 45.43 45.52 45.62
        // 45.91 45.93 -> (45.52 + 45.62) / 2 = 45.57; ours sorted 39.20 39.22 39.226 39.276 39.278 39.316 ->
        // (39.226 + 39.276) / 2 = 39.251).
        assert!((f.theirs.median - 45.57).abs() < 1e-9);
        assert!((f.ours.median - 39.251).abs() < 1e-9);
        assert_eq!((f.theirs.min, f.theirs.max), (45.08, 45.93));
        assert_eq!((f.ours.min, f.ours.max), (39.20, 39.316));
        // Not the median of the arm medians: that would be (39.276 + 39.226) / 2 = 39.251 here by
        // construction, so check theirs, where it differs: (45.43 + 45.91) / 2 = 45.67 != 45.57.
        assert!((f.theirs.median - (45.43 + 45.91) / 2.0).abs() > 0.05);
        assert_eq!(format!("{:.2}", f.ratio), "1.16");
        assert_eq!(
            line(&f, DECODE),
            "decode: theirs 45.57 tok/s (45.08-45.93, n=6) / ours 39.25 tok/s (39.20-39.32, n=6) = 1.16x; order theirs, ours, ours, theirs"
        );
    }

    #[test]
    fn seed_pair_first_token_with_the_slow_first_requests_shown_apart() {
        // ms; published: ours 0.568 s (0.566-0.578), theirs 0.591 s, arm medians 0.591 / 0.567 / 0.573 / 0.591,
        // the first request of each of their arms slower (0.658 and 0.653 s).
        let arms = vec![
            arm("theirs", &[658.0, 591.0, 589.0]),
            arm("ours", &[566.0, 567.0, 569.0]),
            arm("ours", &[567.0, 573.0, 578.0]),
            arm("theirs", &[653.0, 591.0, 590.0]),
        ];
        let f = compute(&arms).unwrap();
        assert_eq!(
            line(&f, FIRST_TOKEN),
            "first token: theirs 0.591 s (0.589-0.658, n=6) / ours 0.568 s (0.566-0.578, n=6) = 1.04x; order theirs, ours, ours, theirs"
        );
        let firsts: Vec<Option<f64>> = f.arms.iter().map(|a| a.first_outlier).collect();
        assert_eq!(firsts, vec![Some(658.0), None, None, Some(653.0)]);
        let medians: Vec<f64> = f.arms.iter().map(|a| a.median).collect();
        assert_eq!(medians, vec![591.0, 567.0, 573.0, 591.0]);
        assert!(arms_line(&f, FIRST_TOKEN)
            .contains("1 theirs 0.591 s (spread 1.117, n=3, first request 0.658 s shown apart)"));
    }

    #[test]
    fn a_runtime_without_values_is_an_error_not_a_nan() {
        let e = compute(&[arm("theirs", &[1.0]), arm("ours", &[])]).unwrap_err();
        assert_eq!(e, PairError::NoValues("ours".into()));
        let e = compute(&[arm("theirs", &[1.0, f64::NAN]), arm("ours", &[1.0])]).unwrap_err();
        assert!(matches!(e, PairError::BadValue { arm: 1, .. }));
    }
}
