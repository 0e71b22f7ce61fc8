//! The blocks of an interleaved regression run (a live baseline serve, docs/regression.md): a gate whose `[assert.regression]` names a
//! `baseline_serve` runs as a pair (`spec::interleave::as_pair`: arm `theirs` = the baseline, `ours` = the
//! candidate) in A-B-B-A blocks of four arms. This module cuts a pair run's arms into those blocks and pools
//! each side's per-request values within a block, which is what the regression judge pairs (one log ratio per
//! block), so a drift of the machine's load that is linear within a block falls on both sides alike.
//!
//! Pure: takes the arms' values (as the pair judge collects them, [`crate::analysis::pair::ArmValues`]) and
//! returns values.

use crate::analysis::pair::ArmValues;
use crate::analysis::{measure, PairEvidence};
use crate::vocab::{Metric, Role};

/// Arms per block: baseline, candidate, candidate, baseline.
pub const ARMS_PER_BLOCK: usize = 4;

/// One block's values: the baseline's (`theirs` arms of the block, pooled in send order) and the
/// candidate's (`ours` arms).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlockValues {
    /// The baseline serve's values in this block (the metric's unit).
    pub baseline: Vec<f64>,
    /// The candidate's values in this block.
    pub candidate: Vec<f64>,
}

/// Cuts arms (in run order) into consecutive blocks of [`ARMS_PER_BLOCK`]. Errors: a number of arms that is
/// not a whole number of blocks, or a block without both a baseline and a candidate arm (the order is not
/// A-B-B-A).
pub fn blocks(arms: &[ArmValues]) -> Result<Vec<BlockValues>, String> {
    if arms.is_empty() || !arms.len().is_multiple_of(ARMS_PER_BLOCK) {
        return Err(format!(
            "{} arms are not whole A-B-B-A blocks of {ARMS_PER_BLOCK}",
            arms.len()
        ));
    }
    arms.chunks(ARMS_PER_BLOCK)
        .enumerate()
        .map(|(i, c)| {
            let mut b = BlockValues::default();
            for a in c {
                match Role::from_name(&a.role) {
                    Some(Role::Theirs) => b.baseline.extend(&a.values),
                    Some(Role::Ours) => b.candidate.extend(&a.values),
                    None => return Err(format!("block {}: arm role {:?}", i + 1, a.role)),
                }
            }
            let roles: Vec<&str> = c.iter().map(|a| a.role.as_str()).collect();
            if !roles.contains(&"theirs") || !roles.contains(&"ours") {
                return Err(format!(
                    "block {} ({}) lacks a baseline or a candidate arm",
                    i + 1,
                    roles.join(", ")
                ));
            }
            Ok(b)
        })
        .collect()
}

/// Each arm's per-request values of `metric` (judged requests that have the figure; warmup and failed
/// requests left out, as `judge::request_failure` and E's `analysis::baseline_values::run_values` do), in
/// run order, from a loaded pair run.
pub fn arm_values(ev: &PairEvidence, metric: Metric) -> Vec<ArmValues> {
    ev.summary
        .arms
        .iter()
        .zip(&ev.arms)
        .map(|(rec, arm)| ArmValues {
            role: rec.role.clone(),
            values: arm
                .requests
                .iter()
                .filter(|r| !r.record.warmup)
                .filter(|r| r.reply.failure().is_none() && r.record.transport_error.is_none())
                .filter_map(|r| measure::metric_value(&measure::measure(&r.reply), metric))
                .filter(|v| v.is_finite())
                .collect(),
        })
        .collect()
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

    #[test]
    fn abba_arms_pool_into_blocks_per_side() {
        let arms = [
            arm("theirs", &[10.0]),
            arm("ours", &[9.0]),
            arm("ours", &[8.0]),
            arm("theirs", &[11.0]),
            arm("theirs", &[20.0]),
            arm("ours", &[19.0]),
            arm("ours", &[18.0]),
            arm("theirs", &[21.0]),
        ];
        let b = blocks(&arms).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].baseline, [10.0, 11.0]);
        assert_eq!(b[0].candidate, [9.0, 8.0]);
        assert_eq!(b[1].baseline, [20.0, 21.0]);
        assert!(blocks(&arms[..6]).unwrap_err().contains("6 arms"));
        let one_sided = [
            arm("theirs", &[1.0]),
            arm("theirs", &[1.0]),
            arm("theirs", &[1.0]),
            arm("theirs", &[1.0]),
        ];
        assert!(blocks(&one_sided).unwrap_err().contains("lacks"));
    }
}
