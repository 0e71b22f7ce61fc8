//! Seeded simulation of the regression verdict's error rates (the false-alarm and miss rates a regression verdict must keep; docs/regression.md,
//! "What the simulation shows"). Deterministic on every machine: an own integer PRNG (splitmix64) and normal
//! deviates from the Irwin-Hall sum of 12 uniforms (arithmetic only); no clock, no thread.
//!
//! Noise model, on log values (a shift of logs is a ratio), from the reference serve on this shared 2-core
//! machine (measured: ten back-to-back runs of 6 requests had run medians 26.4..66.0 tok/s, CV 24 %):
//! * between windows: each window (a run) has its own level `b ~ N(0, 0.22²)` (sd of log run medians);
//! * within a window: each request `e ~ N(0, 0.10²)`, and one request in ten is a hiccup 30 % slower;
//! * interleaved blocks (A-B-B-A, one request per slot) share the block's level and a linear drift within the
//!   block (slope `N(0, 0.05²)` per slot), which both designs must survive.
//!
//! Verdicts go through the judge's own code (`judge::regression::judge_stored_values` /
//! `judge_block_values`), so this measures what a gate would say.

use servegate::analysis::baseline_values::Block;
use servegate::judge::regression::{judge_block_values, judge_stored_values};
use servegate::judge::Outcome;
use servegate::spec::{BaselineServe, RegressionAssert, RegressionBaseline};
use servegate::vocab::Metric;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Approximately N(0, 1): Irwin-Hall, 12 uniforms minus 6.
    fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
    }
}

const BETWEEN_SD: f64 = 0.22;
const WITHIN_SD: f64 = 0.10;
const HICCUP_SHARE: f64 = 0.10;
const HICCUP: f64 = 0.7; // a hiccup request runs at 0.7x
const DRIFT_SD: f64 = 0.05;
const MEAN_TOK_S: f64 = 45.0;
const TRIALS: usize = 2000;

fn request(rng: &mut Rng, level: f64) -> f64 {
    let hiccup = if rng.uniform() < HICCUP_SHARE {
        HICCUP
    } else {
        1.0
    };
    MEAN_TOK_S * (level + WITHIN_SD * rng.normal()).exp() * hiccup
}

fn window(rng: &mut Rng, n: usize, ratio: f64) -> Vec<f64> {
    let level = BETWEEN_SD * rng.normal();
    (0..n).map(|_| request(rng, level) * ratio).collect()
}

fn gate(drop_pct: f64, baseline: RegressionBaseline) -> RegressionAssert {
    RegressionAssert {
        on_incomparable: Default::default(),
        metric: Metric::DecodeRate,
        label: "decode".into(),
        baseline,
        max_drop_pct: drop_pct,
        confidence: 0.95,
        blocks: 6,
        max_load_ratio: servegate::spec::regression::DEFAULT_MAX_LOAD_RATIO,
    }
}

/// Rates of (pass, fail, indeterminate) over the trials.
fn rates(outcomes: &[Outcome]) -> (f64, f64, f64) {
    let share =
        |o: Outcome| outcomes.iter().filter(|x| **x == o).count() as f64 / outcomes.len() as f64;
    (
        share(Outcome::Pass),
        share(Outcome::Fail),
        share(Outcome::Indeterminate),
    )
}

fn stored_trials(seed: u64, windows: usize, n: usize, ratio: f64, drop_pct: f64) -> Vec<Outcome> {
    let mut rng = Rng(seed);
    let r = gate(drop_pct, RegressionBaseline::Stored(vec!["sim".into()]));
    (0..TRIALS)
        .map(|_| {
            let base: Vec<Vec<f64>> = (0..windows).map(|_| window(&mut rng, n, 1.0)).collect();
            let cand = window(&mut rng, n, ratio);
            judge_stored_values(&r, "sim", &base, &cand).outcome
        })
        .collect()
}

fn block(rng: &mut Rng, ratio: f64) -> Block {
    let level = BETWEEN_SD * rng.normal();
    let slope = DRIFT_SD * rng.normal();
    // A B B A: slots at -1.5, -0.5, 0.5, 1.5.
    let at = |rng: &mut Rng, slot: f64| request(rng, level + slope * slot);
    let a1 = at(rng, -1.5);
    let b1 = at(rng, -0.5) * ratio;
    let b2 = at(rng, 0.5) * ratio;
    let a2 = at(rng, 1.5);
    Block {
        baseline: vec![a1, a2],
        candidate: vec![b1, b2],
    }
}

fn interleaved_trials(seed: u64, blocks: usize, ratio: f64, drop_pct: f64) -> Vec<Outcome> {
    let mut rng = Rng(seed);
    let r = gate(
        drop_pct,
        RegressionBaseline::Serve(BaselineServe {
            command: vec!["baseline-serve".into()],
            ..Default::default()
        }),
    );
    (0..TRIALS)
        .map(|_| {
            let b: Vec<Block> = (0..blocks).map(|_| block(&mut rng, ratio)).collect();
            judge_block_values(&r, &b).outcome
        })
        .collect()
}

/// Interleaved, the gate's n: 10 blocks (40 requests), δ = 5 %, 95 %. No change: false alarms (FAIL) at most
/// 1 − confidence; a true 20 % drop: detected (FAIL) in at least 80 %.
#[test]
fn interleaved_blocks_keep_false_alarms_under_five_percent_and_catch_a_20_percent_drop() {
    let (p0, f0, i0) = rates(&interleaved_trials(16, 10, 1.0, 5.0));
    let (p20, f20, i20) = rates(&interleaved_trials(17, 10, 0.8, 5.0));
    let (p40, f40, _) = rates(&interleaved_trials(18, 6, 0.6, 5.0));
    eprintln!("interleaved 10 blocks, δ 5 %: no change pass {p0:.3} fail {f0:.3} indeterminate {i0:.3}; 20 % drop pass {p20:.3} fail {f20:.3} indeterminate {i20:.3}; 6 blocks 40 % drop pass {p40:.3} fail {f40:.3}");
    assert!(f0 <= 0.05, "false alarms {f0}");
    assert!(f20 >= 0.80, "detection of a 20 % drop {f20}");
    assert!(p20 <= 0.05, "a 20 % drop passed {p20}");
    assert!(f40 >= 0.80, "detection of a 40 % drop at 6 blocks {f40}");
}

/// Stored, 3 windows of 6 as the baseline, one window of 6 as the run, δ = 5 %: the between-window allowance
/// keeps false alarms at most 1 − confidence despite the window shifts; a 20 % drop is rarely decided (the
/// windows' spread is larger than the drop): the rates are stated, and a 20 % drop never passes.
#[test]
fn stored_baselines_keep_false_alarms_under_five_percent_with_window_shifts() {
    let (p0, f0, i0) = rates(&stored_trials(26, 3, 6, 1.0, 5.0));
    let (p20, f20, i20) = rates(&stored_trials(27, 3, 6, 0.8, 5.0));
    let (p5w, f5w, i5w) = rates(&stored_trials(28, 5, 6, 0.8, 5.0));
    eprintln!("stored 3 windows x 6, δ 5 %: no change pass {p0:.3} fail {f0:.3} indeterminate {i0:.3}; 20 % drop pass {p20:.3} fail {f20:.3} indeterminate {i20:.3}; 5 windows 20 % drop pass {p5w:.3} fail {f5w:.3} indeterminate {i5w:.3}");
    assert!(f0 <= 0.05, "false alarms {f0}");
    assert!(p20 <= 0.05, "a 20 % drop passed {p20}");
}

/// Without the allowance (windows treated as exchangeable) the same stored comparison raises false alarms
/// far above 5 %: the measured 8-30 %. This is why the allowance exists.
#[test]
fn treating_windows_as_exchangeable_would_raise_false_alarms() {
    let mut rng = Rng(36);
    let r = gate(5.0, RegressionBaseline::Stored(vec!["sim".into()]));
    let outcomes: Vec<Outcome> = (0..TRIALS)
        .map(|_| {
            // One window of 18 pooled as if exchangeable: the allowance sees a single window's level and the
            // judge refuses (INDETERMINATE), so compare the raw interval instead.
            let base = window(&mut rng, 18, 1.0);
            let cand = window(&mut rng, 6, 1.0);
            let bl: Vec<f64> = base.iter().map(|x| x.ln()).collect();
            let cl: Vec<f64> = cand.iter().map(|x| x.ln()).collect();
            let s = servegate::analysis::regress::shift_two_sample(&bl, &cl, 0.95).unwrap();
            if s.hi < r.log_threshold() {
                Outcome::Fail
            } else {
                Outcome::Pass
            }
        })
        .collect();
    let (_, f, _) = rates(&outcomes);
    eprintln!("stored without the allowance: false alarms {f:.3}");
    assert!(f > 0.10, "{f}");
}

#[test]
fn the_default_blocks_are_the_fewest_that_reach_the_confidence() {
    use servegate::analysis::regress::paired_attainable;
    for c in [0.8, 0.9, 0.95, 0.975, 0.99, 0.999] {
        let n = servegate::spec::regression::blocks_needed(c);
        assert!(paired_attainable(n, c), "confidence {c}: {n} blocks");
        assert!(
            !paired_attainable(n - 1, c),
            "confidence {c}: {} would do",
            n - 1
        );
    }
}
