//! The statistics of a regression verdict (docs/regression.md): exact rank distributions, distribution-free
//! confidence intervals of a shift, attainability, the between-window allowance of a stored baseline, and the
//! median's own interval. Pure: values in, numbers out; no randomness, no clock, no I/O.
//!
//! Definitions, each following a textbook one:
//! * **Mann-Whitney U** of samples `x` (n values) and `y` (m values): the number of pairs `(i, j)` with
//!   `y_j > x_i`. Under "no difference" (the n + m values exchangeable, continuous) every one of the
//!   `C(n+m, n)` rank arrangements is equally likely; the exact distribution of U is the coefficient list of
//!   the Gaussian binomial `[n+m choose n]_q` ([`mann_whitney_counts`]; Mann & Whitney 1947).
//! * **Wilcoxon signed-rank T+** of n paired differences: the sum of the ranks of |d_i| over the positive
//!   d_i; under "no difference" (each d_i symmetric about 0) every sign pattern is equally likely, so T+ is
//!   distributed as the coefficients of `∏ (1 + q^i)` over `2^n` ([`signed_rank_counts`]; Wilcoxon 1945).
//! * **Hodges-Lehmann shift** (two samples): the median of the n·m differences `y_j − x_i`; its
//!   confidence interval is the pair of order statistics `[D_(k), D_(nm+1−k)]` of those differences, with
//!   `k − 1` the largest U whose lower tail `P(U ≤ k − 1)` is at most `(1 − confidence) / 2` (Moses 1965;
//!   Hollander & Wolfe, *Nonparametric Statistical Methods*, §4.3). Paired: the median of the Walsh averages
//!   `(d_i + d_j) / 2, i ≤ j`, and the order statistics `[W_(k), W_(M+1−k)]`, `M = n(n+1)/2`, with `k` from
//!   the signed-rank distribution (Tukey 1949; Hollander & Wolfe §3.2).
//! * Both intervals are **equal-tailed at the stated confidence** (a 95 % interval leaves at most 2.5 % on
//!   each side), so each one-sided decision it supports (a regression, or no regression beyond δ) is wrong
//!   with probability at most `(1 − confidence) / 2` under the assumptions.
//! * **Ties**: the distributions assume no ties (continuous measurements: decode rates and latencies are
//!   floats from a clock). Tied values are kept as they are; the interval is closed (it includes its end
//!   points), and no tie correction is applied.
//! * **Exact only**: n and m up to [`MAX_EXACT_N`] per side (counts in u128); more is an error, never an
//!   approximation in disguise.
//!
//! Values are shifts of **log** values in the callers (a shift of logs is a ratio: `exp(shift)`).

/// The largest n per side (two samples) or number of blocks (paired) the exact distributions are computed
/// for. `C(120, 60) ≈ 9.7e34` fits a u128.
pub const MAX_EXACT_N: usize = 60;

/// Why a shift interval could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShiftError {
    /// A side has no value.
    #[error("no values on one side (n={n} vs {m})")]
    Empty {
        /// Baseline n (or blocks).
        n: usize,
        /// Candidate m (0 for paired).
        m: usize,
    },
    /// More values than the exact distribution is computed for.
    #[error("n={n} is above the {MAX_EXACT_N} the exact distributions are computed for")]
    TooMany {
        /// The n.
        n: usize,
    },
    /// The confidence is not in (0, 1).
    #[error("confidence {0} is not between 0 and 1")]
    BadConfidence(f64),
    /// The design cannot reach the confidence: even the most extreme arrangement is more likely than the
    /// tail allows. `smallest_tail` is that arrangement's probability (`1 / C(n+m, n)` or `1 / 2^n`).
    #[error("confidence {confidence} unattainable with {design}: the smallest one-sided p is {smallest_tail:.4}, above {tail:.4}")]
    Unattainable {
        /// `n=2 vs 2` or `3 blocks`.
        design: String,
        /// The confidence asked for.
        confidence: f64,
        /// `(1 − confidence) / 2`.
        tail: f64,
        /// The smallest one-sided p of the design.
        smallest_tail: f64,
    },
}

/// A shift (of log values in the callers) with its distribution-free confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShiftInterval {
    /// The Hodges-Lehmann estimate (median of the pairwise differences or Walsh averages).
    pub estimate: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// The order statistic used (1-based `k`: `lo = D_(k)`, `hi = D_(N+1−k)`).
    pub k: usize,
    /// N: the number of pairwise differences or Walsh averages.
    pub count: usize,
    /// The confidence actually reached, `1 − 2·P(U ≤ k − 1)` (at least the one asked for: the distribution
    /// is discrete).
    pub achieved: f64,
}

/// Exact null distribution of the Mann-Whitney U for samples of n and m: `counts[u]` arrangements (of
/// `C(n+m, n)`) give U = u, for u in `0..=n·m`. Computed as the Gaussian binomial `[n+m choose n]_q` =
/// `∏_{i=1..n} (1 − q^{m+i}) / (1 − q^i)`, each step exact in integers.
pub fn mann_whitney_counts(n: usize, m: usize) -> Vec<u128> {
    let top = n * m;
    let mut c: Vec<i128> = vec![0; top + 1];
    c[0] = 1;
    for i in 1..=n {
        // Multiply by (1 − q^{m+i}), high degrees first.
        let a = m + i;
        for d in (a..=top).rev() {
            c[d] -= c[d - a];
        }
        // Divide by (1 − q^i): the series 1 + q^i + q^2i + ..., a running sum (exact: the quotient is the
        // Gaussian binomial [m+i choose i]_q).
        for d in i..=top {
            c[d] += c[d - i];
        }
    }
    c.into_iter().map(|x| x.max(0) as u128).collect()
}

/// Exact null distribution of the Wilcoxon signed-rank statistic T+ for n differences: `counts[t]` sign
/// patterns (of `2^n`) give T+ = t, for t in `0..=n(n+1)/2`.
pub fn signed_rank_counts(n: usize) -> Vec<u128> {
    let top = n * (n + 1) / 2;
    let mut c: Vec<u128> = vec![0; top + 1];
    c[0] = 1;
    for i in 1..=n {
        for d in (i..=top).rev() {
            c[d] += c[d - i];
        }
    }
    c
}

/// The lower tail `P(S ≤ s)` of a distribution given as counts.
pub fn lower_tail(counts: &[u128], s: usize) -> f64 {
    let total: u128 = counts.iter().sum();
    let below: u128 = counts.iter().take(s + 1).sum();
    below as f64 / total as f64
}

/// The largest s with `P(S ≤ s) ≤ alpha` (the critical value of a one-sided test at level `alpha`: reject
/// when S ≤ s), or None when even `P(S ≤ 0)` is above alpha (the level is unattainable). Published tables
/// of critical values state this number.
pub fn critical_value(counts: &[u128], alpha: f64) -> Option<usize> {
    let total: u128 = counts.iter().sum();
    let mut below: u128 = 0;
    let mut crit = None;
    for (s, c) in counts.iter().enumerate() {
        below += c;
        if below as f64 / total as f64 <= alpha * (1.0 + 1e-12) {
            crit = Some(s);
        } else {
            break;
        }
    }
    crit
}

/// The smallest one-sided p-value an exact Mann-Whitney test of n against m can reach: `1 / C(n+m, n)`.
pub fn mann_whitney_min_p(n: usize, m: usize) -> f64 {
    lower_tail(&mann_whitney_counts(n, m), 0)
}

/// True when an n-against-m comparison can reach `confidence` with an equal-tailed interval (the smallest
/// one-sided p at most `(1 − confidence) / 2`). 95 %: 4 vs 4 yes (1/70), 3 vs 3 no (1/20), 3 vs 5 yes (1/56).
pub fn two_sample_attainable(n: usize, m: usize, confidence: f64) -> bool {
    n > 0 && m > 0 && mann_whitney_min_p(n, m) <= (1.0 - confidence) / 2.0 * (1.0 + 1e-12)
}

/// True when `blocks` paired blocks can reach `confidence` (`1 / 2^blocks ≤ (1 − confidence) / 2`). 95 %:
/// 6 blocks (1/64).
pub fn paired_attainable(blocks: usize, confidence: f64) -> bool {
    blocks > 0 && 0.5f64.powi(blocks as i32) <= (1.0 - confidence) / 2.0 * (1.0 + 1e-12)
}

/// The smallest n per side (n against n) that reaches `confidence` (95 %: 4).
pub fn per_side_needed(confidence: f64) -> usize {
    (1..=MAX_EXACT_N)
        .find(|n| two_sample_attainable(*n, *n, confidence))
        .unwrap_or(MAX_EXACT_N)
}

/// The smallest number of paired blocks that reaches `confidence` (95 %: 6): one definition, in the spec
/// (`spec::regression::blocks_needed`), which needs it for a gate's default `blocks` and may not import this
/// layer; re-exported here for the statistics' callers.
pub use crate::spec::regression::blocks_needed;

fn check_confidence(confidence: f64) -> Result<f64, ShiftError> {
    if confidence.is_finite() && confidence > 0.0 && confidence < 1.0 {
        Ok((1.0 - confidence) / 2.0)
    } else {
        Err(ShiftError::BadConfidence(confidence))
    }
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn interval_from(
    diffs: Vec<f64>,
    counts: &[u128],
    tail: f64,
    confidence: f64,
    design: String,
) -> Result<ShiftInterval, ShiftError> {
    let d = sorted(diffs);
    let Some(crit) = critical_value(counts, tail) else {
        return Err(ShiftError::Unattainable {
            design,
            confidence,
            tail,
            smallest_tail: lower_tail(counts, 0),
        });
    };
    let k = crit + 1;
    let count = d.len();
    Ok(ShiftInterval {
        estimate: median_sorted(&d),
        lo: d[k - 1],
        hi: d[count - k],
        k,
        count,
        achieved: 1.0 - 2.0 * lower_tail(counts, crit),
    })
}

/// The Hodges-Lehmann shift of `candidate` over `baseline` (median of all `candidate_j − baseline_i`) with
/// its exact equal-tailed interval at `confidence` (Moses). Non-finite values are an error of the caller
/// (filter first); they are dropped here.
pub fn shift_two_sample(
    baseline: &[f64],
    candidate: &[f64],
    confidence: f64,
) -> Result<ShiftInterval, ShiftError> {
    let tail = check_confidence(confidence)?;
    let x: Vec<f64> = baseline.iter().copied().filter(|v| v.is_finite()).collect();
    let y: Vec<f64> = candidate
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let (n, m) = (x.len(), y.len());
    if n == 0 || m == 0 {
        return Err(ShiftError::Empty { n, m });
    }
    if n.max(m) > MAX_EXACT_N {
        return Err(ShiftError::TooMany { n: n.max(m) });
    }
    let diffs: Vec<f64> = y
        .iter()
        .flat_map(|b| x.iter().map(move |a| b - a))
        .collect();
    interval_from(
        diffs,
        &mann_whitney_counts(n, m),
        tail,
        confidence,
        format!("n={n} vs {m}"),
    )
}

/// The Hodges-Lehmann shift of paired differences `d` (one per block: candidate minus baseline) — the
/// median of the Walsh averages — with its exact equal-tailed interval at `confidence` (signed-rank).
pub fn shift_paired(d: &[f64], confidence: f64) -> Result<ShiftInterval, ShiftError> {
    let tail = check_confidence(confidence)?;
    let d: Vec<f64> = d.iter().copied().filter(|v| v.is_finite()).collect();
    let n = d.len();
    if n == 0 {
        return Err(ShiftError::Empty { n, m: 0 });
    }
    if n > MAX_EXACT_N {
        return Err(ShiftError::TooMany { n });
    }
    let mut walsh = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((d[i] + d[j]) / 2.0);
        }
    }
    interval_from(
        walsh,
        &signed_rank_counts(n),
        tail,
        confidence,
        format!("{n} blocks"),
    )
}

/// The distribution-free equal-tailed interval of the median of `values` at `confidence`: the order
/// statistics `[x_(k), x_(n+1−k)]` with `k − 1` the largest j such that `P(Bin(n, ½) ≤ j) ≤ (1 − c)/2`
/// (the sign-test interval; Hollander & Wolfe §3.6). None when empty or unattainable (95 %: n ≥ 6).
pub fn median_interval(values: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let tail = check_confidence(confidence).ok()?;
    let v = sorted(values.iter().copied().filter(|x| x.is_finite()).collect());
    let n = v.len();
    let k = binomial_half_k(n, tail)?;
    Some((v[k - 1], v[n - k]))
}

/// The distribution-free **one-sided** lower confidence bound of the median at `confidence`: `x_(k)` with
/// `k − 1` the largest j such that `P(Bin(n, ½) ≤ j) ≤ 1 − confidence`. None when empty or unattainable
/// (95 %: n ≥ 5, where the bound is the smallest value). The floor hint of `[assert.rate]` and `servegate
/// bless --floor` use this bound.
pub fn median_lower_bound(values: &[f64], confidence: f64) -> Option<f64> {
    let v = sorted(values.iter().copied().filter(|x| x.is_finite()).collect());
    let k = median_lower_rank(v.len(), confidence)?;
    Some(v[k - 1])
}

/// The rank `k` (1-based, among `n` finite values sorted ascending) of the order statistic
/// [`median_lower_bound`] returns: the largest k with `P(Bin(n, ½) ≤ k − 1) ≤ 1 − confidence` (Conover,
/// *Practical Nonparametric Statistics*, Table A3). None when no order statistic reaches the confidence
/// (95 %: n ≤ 4) or n is above 120.
pub fn median_lower_rank(n: usize, confidence: f64) -> Option<usize> {
    if !(confidence.is_finite() && confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    binomial_half_k(n, 1.0 - confidence)
}

/// The confidence of the median's lower bound a derived floor starts from.
pub const FLOOR_CONFIDENCE: f64 = 0.95;
/// The headroom a derived floor leaves below that bound, percent (a floor equal to today's measurement goes
/// red at once).
pub const FLOOR_HEADROOM_PCT: f64 = 10.0;
/// A passing rate trial hints that its floor could be raised when the median's lower bound is more than this
/// share above the floor, percent.
pub const FLOOR_HINT_ABOVE_PCT: f64 = 25.0;

/// The floor derived from one run's per-request rates: the one-sided lower confidence bound of the median at
/// [`FLOOR_CONFIDENCE`] ([`median_lower_bound`]) less `headroom_pct` percent. None when the bound is
/// unattainable (fewer than 5 values at 95 %). `servegate bless --floor` and the rate verdict's hint use it.
pub fn derived_floor(values: &[f64], headroom_pct: f64) -> Option<f64> {
    median_lower_bound(values, FLOOR_CONFIDENCE).map(|lb| lb * (1.0 - headroom_pct / 100.0))
}

/// The floor a passing rate trial could have, when its median's lower bound is more than
/// [`FLOOR_HINT_ABOVE_PCT`] above `floor`: [`derived_floor`] with the default headroom. None otherwise.
pub fn floor_hint(values: &[f64], floor: f64) -> Option<f64> {
    let lb = median_lower_bound(values, FLOOR_CONFIDENCE)?;
    (lb > floor * (1.0 + FLOOR_HINT_ABOVE_PCT / 100.0))
        .then(|| derived_floor(values, FLOOR_HEADROOM_PCT))
        .flatten()
}

/// Largest k ≥ 1 with `P(Bin(n, ½) ≤ k − 1) ≤ alpha`, or None.
fn binomial_half_k(n: usize, alpha: f64) -> Option<usize> {
    if n == 0 || n > 120 {
        return None;
    }
    let mut counts = vec![0u128; n + 1];
    let mut c: u128 = 1;
    for (j, slot) in counts.iter_mut().enumerate() {
        *slot = c;
        c = c * (n - j) as u128 / (j + 1) as u128;
    }
    critical_value(&counts, alpha).map(|s| s + 1)
}

/// The between-window allowance of a stored baseline, on the log scale: the half-width of the prediction
/// interval of one new window's median from the baseline's window medians,
/// `t_{(1+c)/2, W−1} · s_w · √(1 + 1/W)`, with `s_w` the sample standard deviation (W − 1) of the W windows'
/// median logs. It is what a new window's level can differ from the baseline's by chance alone, however many
/// requests each window has. None for fewer than 2 windows (no spread can be measured from one).
pub fn window_allowance(window_median_logs: &[f64], confidence: f64) -> Option<f64> {
    let w = window_median_logs.len();
    if w < 2 || !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let mean = window_median_logs.iter().sum::<f64>() / w as f64;
    let var = window_median_logs
        .iter()
        .map(|x| (x - mean).powi(2))
        .sum::<f64>()
        / (w - 1) as f64;
    let t = student_t_quantile((1.0 + confidence) / 2.0, (w - 1) as f64);
    Some(t * var.sqrt() * (1.0 + 1.0 / w as f64).sqrt())
}

/// `interval` widened by an allowance `a` in quadrature on each side: `lo' = est − √((est − lo)² + a²)`,
/// `hi' = est + √((hi − est)² + a²)`. The request-level interval (within windows) and the window-level
/// allowance are treated as independent errors.
pub fn widen(interval: ShiftInterval, a: f64) -> ShiftInterval {
    let e = interval.estimate;
    ShiftInterval {
        lo: e - ((e - interval.lo).powi(2) + a * a).sqrt(),
        hi: e + ((interval.hi - e).powi(2) + a * a).sqrt(),
        ..interval
    }
}

/// The n that would likely decide an interval that straddles `threshold` (all on one scale, logs here):
/// the half-width facing the threshold shrinks as `1/√n` (the width of a rank interval of a location
/// shift does, for n large enough), while an allowance `a` that does not depend on n (a stored baseline's
/// between-window allowance) does not. With `h` the request part of the facing half-width and `g` the
/// distance from the estimate to the threshold, the n that makes `√(h²·n/n' + a²) < g` is
/// `n' = ⌈n · h² / (g² − a²)⌉`. None when `g ≤ a` (more requests cannot decide it: more baseline windows,
/// or a wider δ, can) or the estimate sits on the threshold.
pub fn n_to_decide(interval: &ShiftInterval, a: f64, threshold: f64, n: usize) -> Option<usize> {
    let e = interval.estimate;
    let g = (e - threshold).abs();
    let facing = if e > threshold {
        e - interval.lo
    } else {
        interval.hi - e
    };
    let h2 = (facing * facing - a * a).max(0.0);
    let room = g * g - a * a;
    if g == 0.0 || room <= 0.0 {
        return None;
    }
    let need = (n as f64 * h2 / room).ceil();
    if !need.is_finite() || need > 1e6 {
        return None;
    }
    Some((need as usize).max(n + 1))
}

/// The quantile (inverse CDF) of Student's t with `df` degrees of freedom at probability `p` in (0, 1), by
/// bisection on the CDF ([`student_t_cdf`]); accurate to 1e-9.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while student_t_cdf(hi, df) < p && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if student_t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    (lo + hi) / 2.0
}

/// The CDF of Student's t with `df` degrees of freedom: for t ≥ 0, `1 − ½·I_{df/(df+t²)}(df/2, ½)` with I
/// the regularised incomplete beta function ([`inc_beta`]).
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; relative error below 1e-13).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised incomplete beta function `I_x(a, b)` by its continued fraction (modified Lentz; Press
/// et al., *Numerical Recipes*, §6.4), using the symmetry `I_x(a,b) = 1 − I_{1−x}(b,a)` where it converges
/// faster.
pub fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - inc_beta(b, a, 1.0 - x);
    }
    let tiny = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < tiny {
        d = tiny;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..500 {
        let m = m as f64;
        let num = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        d = 1.0 + num * d;
        d = if d.abs() < tiny { tiny } else { d };
        c = 1.0 + num / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        f *= d * c;
        let num = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        d = 1.0 + num * d;
        d = if d.abs() < tiny { tiny } else { d };
        c = 1.0 + num / c;
        c = if c.abs() < tiny { tiny } else { c };
        d = 1.0 / d;
        let delta = d * c;
        f *= delta;
        if (delta - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f / a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binom(n: u128, k: u128) -> u128 {
        (0..k).fold(1u128, |acc, i| acc * (n - i) / (i + 1))
    }

    #[test]
    fn mann_whitney_counts_sum_to_the_arrangements_and_are_symmetric() {
        for (n, m) in [(1, 1), (2, 2), (3, 3), (3, 5), (4, 7), (10, 10), (60, 60)] {
            let c = mann_whitney_counts(n, m);
            assert_eq!(c.len(), n * m + 1);
            assert_eq!(
                c.iter().sum::<u128>(),
                binom((n + m) as u128, n as u128),
                "{n} {m}"
            );
            let rev: Vec<u128> = c.iter().rev().copied().collect();
            assert_eq!(c, rev, "symmetric about nm/2");
        }
        // By hand for 2 vs 2: the 6 arrangements give U = 0,1,2,2,3,4.
        assert_eq!(mann_whitney_counts(2, 2), vec![1, 1, 2, 1, 1]);
    }

    /// Critical values of the two-sided Mann-Whitney test at α = 0.05 (reject when U ≤ value), as printed in
    /// the standard tables (e.g. Zar, *Biostatistical Analysis*, Table B.11; Siegel & Castellan,
    /// *Nonparametric Statistics*, Table J; the equal-n row: –, 0, 2, 5, 8, 13, 17, 23 for n = 3..10, and
    /// 127 for n = 20). "–" is unattainable.
    #[test]
    fn two_sided_critical_values_match_the_published_mann_whitney_table() {
        let table: [(usize, usize, Option<usize>); 14] = [
            (3, 3, None),
            (4, 4, Some(0)),
            (5, 5, Some(2)),
            (6, 6, Some(5)),
            (7, 7, Some(8)),
            (8, 8, Some(13)),
            (9, 9, Some(17)),
            (10, 10, Some(23)),
            (20, 20, Some(127)),
            (3, 5, Some(0)),
            (3, 6, Some(1)),
            (4, 5, Some(1)),
            (4, 6, Some(2)),
            (5, 6, Some(3)),
        ];
        for (n, m, want) in table {
            assert_eq!(
                critical_value(&mann_whitney_counts(n, m), 0.025),
                want,
                "{n} vs {m}"
            );
        }
    }

    /// One-sided α = 0.05 critical values (same tables): 0, 1, 4, 7, 11, 15, 21, 27 for n = 3..10; 2 vs 2
    /// has none (its smallest p is 1/6).
    #[test]
    fn one_sided_critical_values_match_the_published_table() {
        let want = [
            (2, None),
            (3, Some(0)),
            (4, Some(1)),
            (5, Some(4)),
            (6, Some(7)),
            (7, Some(11)),
            (8, Some(15)),
            (9, Some(21)),
            (10, Some(27)),
        ];
        for (n, w) in want {
            assert_eq!(critical_value(&mann_whitney_counts(n, n), 0.05), w, "{n}");
        }
        assert!((mann_whitney_min_p(3, 3) - 0.05).abs() < 1e-15);
        assert!((mann_whitney_min_p(4, 4) - 1.0 / 70.0).abs() < 1e-15);
        assert!((mann_whitney_min_p(2, 2) - 1.0 / 6.0).abs() < 1e-15);
    }

    /// Wilcoxon signed-rank critical values (reject when T ≤ value), as printed in the standard tables
    /// (Wilcoxon, Katti & Wilcox 1970; Zar Table B.12): two-sided α = 0.05: –, 0, 2, 3, 5, 8, 10, 13, 17,
    /// 21, 25 for n = 5..15 and 52 for n = 20; one-sided α = 0.05: 0, 2, 3, 5, 8, 10 for n = 5..10 and 60
    /// for n = 20.
    #[test]
    fn signed_rank_critical_values_match_the_published_table() {
        let two = [
            (5, None),
            (6, Some(0)),
            (7, Some(2)),
            (8, Some(3)),
            (9, Some(5)),
            (10, Some(8)),
            (11, Some(10)),
            (12, Some(13)),
            (13, Some(17)),
            (14, Some(21)),
            (15, Some(25)),
            (20, Some(52)),
        ];
        for (n, w) in two {
            assert_eq!(critical_value(&signed_rank_counts(n), 0.025), w, "{n}");
        }
        let one = [
            (4, None),
            (5, Some(0)),
            (6, Some(2)),
            (7, Some(3)),
            (8, Some(5)),
            (9, Some(8)),
            (10, Some(10)),
            (20, Some(60)),
        ];
        for (n, w) in one {
            assert_eq!(critical_value(&signed_rank_counts(n), 0.05), w, "{n}");
        }
        assert_eq!(signed_rank_counts(3), vec![1, 1, 1, 2, 1, 1, 1]);
    }

    #[test]
    fn attainability_states_which_n_reaches_which_confidence() {
        assert!(!two_sample_attainable(2, 2, 0.95));
        assert!(!two_sample_attainable(3, 3, 0.95));
        assert!(!two_sample_attainable(3, 4, 0.95)); // 1/35 > 0.025
        assert!(two_sample_attainable(3, 5, 0.95)); // 1/56
        assert!(two_sample_attainable(4, 4, 0.95));
        assert!(two_sample_attainable(3, 3, 0.90)); // 1/20 = 0.05
        assert!(!two_sample_attainable(2, 2, 0.90));
        assert_eq!(per_side_needed(0.95), 4);
        assert_eq!(per_side_needed(0.90), 3);
        assert_eq!(per_side_needed(0.99), 5); // 1/252 <= 0.005 < 1/70
        assert_eq!(blocks_needed(0.95), 6);
        assert_eq!(blocks_needed(0.90), 5);
        assert_eq!(blocks_needed(0.99), 8);
        let e = shift_two_sample(&[1.0, 2.0], &[3.0, 4.0], 0.95).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("confidence 0.95 unattainable with n=2 vs 2"),
            "{e}"
        );
    }

    #[test]
    fn the_shift_interval_uses_the_order_statistics_of_the_critical_value() {
        // 6 vs 6 at 95 %: critical U 5, so k = 6: the 6th smallest and 6th largest of 36 differences.
        let x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
        let y: Vec<f64> = x.iter().map(|v| v * 10.0 + 100.0).collect();
        let s = shift_two_sample(&x, &y, 0.95).unwrap();
        assert_eq!((s.k, s.count), (6, 36));
        let mut d: Vec<f64> = y
            .iter()
            .flat_map(|b| x.iter().map(move |a| b - a))
            .collect();
        d.sort_by(f64::total_cmp);
        assert_eq!((s.lo, s.hi), (d[5], d[30]));
        assert_eq!(s.estimate, (d[17] + d[18]) / 2.0);
        // Achieved: 1 - 2 P(U <= 5) for 6 vs 6; counts of U = 0..5 are 1, 1, 2, 3, 5, 7: 19 of C(12, 6) = 924.
        assert!((s.achieved - (1.0 - 38.0 / 924.0)).abs() < 1e-12);
        // A pure shift: the estimate is the shift.
        let y2: Vec<f64> = x.iter().map(|v| v + 0.5).collect();
        assert_eq!(shift_two_sample(&x, &y2, 0.95).unwrap().estimate, 0.5);
    }

    #[test]
    fn the_paired_interval_uses_walsh_averages() {
        // 6 blocks at 95 %: critical T 0, k = 1: the smallest and largest Walsh averages = min and max d.
        let d = [-0.3, -0.2, -0.25, -0.1, -0.4, -0.22];
        let s = shift_paired(&d, 0.95).unwrap();
        assert_eq!((s.k, s.count), (1, 21));
        assert_eq!((s.lo, s.hi), (-0.4, -0.1));
        assert!((s.achieved - (1.0 - 2.0 / 64.0)).abs() < 1e-12);
        assert!(shift_paired(&d[..5], 0.95).is_err());
        // Walsh averages of [1, 2, 3]: 1, 1.5, 2, 2, 2.5, 3: median 2.
        assert_eq!(shift_paired(&[1.0, 2.0, 3.0], 0.5).unwrap().estimate, 2.0);
    }

    #[test]
    fn median_bounds_are_sign_test_order_statistics() {
        let v: Vec<f64> = (1..=6).map(f64::from).collect();
        // n = 6, 95 % two-sided: P(Bin <= 0) = 1/64 <= 0.025 < 7/64: k = 1.
        assert_eq!(median_interval(&v, 0.95), Some((1.0, 6.0)));
        assert_eq!(median_interval(&v[..5], 0.95), None);
        // n = 10, one-sided 95 %: P(Bin(10) <= 1) = 11/1024 <= 0.05 < 56/1024: k = 2.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(median_lower_bound(&v, 0.95), Some(2.0));
        assert_eq!(median_lower_bound(&v[..4], 0.95), None);
        assert_eq!(median_lower_bound(&v[..5], 0.95), Some(1.0));
    }

    #[test]
    fn a_floor_far_below_the_lower_bound_hints_the_derived_floor() {
        // The first user's run: 82-98 tok/s against a typed floor of 60. n = 6: the bound is the smallest
        // value, 82.0; 82.0 > 60 x 1.25 = 75, so the hint is 82.0 less 10 % = 73.8.
        let v = [82.0, 91.0, 98.0, 87.0, 95.0, 90.0];
        assert!((floor_hint(&v, 60.0).unwrap() - 73.8).abs() < 1e-9);
        assert_eq!(floor_hint(&v, 70.0), None); // 82 < 87.5
        assert_eq!(floor_hint(&v[..4], 10.0), None); // too few for a 95 % bound
        assert!((derived_floor(&v, 10.0).unwrap() - 73.8).abs() < 1e-9);
    }

    /// Student's t quantiles at 0.975 from any printed table: 12.706, 4.303, 3.182, 2.776, 2.228 (df 10),
    /// 2.042 (df 30).
    #[test]
    fn t_quantiles_match_the_printed_table() {
        for (df, want) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (3.0, 3.182),
            (4.0, 2.776),
            (10.0, 2.228),
            (30.0, 2.042),
        ] {
            let t = student_t_quantile(0.975, df);
            assert!((t - want).abs() < 5e-4, "df {df}: {t}");
        }
        assert!((student_t_quantile(0.95, 5.0) - 2.015).abs() < 5e-4);
        assert!((student_t_cdf(0.0, 3.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_window_allowance_is_a_prediction_interval_and_widening_keeps_the_estimate() {
        // Window median logs 0, 0.1, 0.2: sd 0.1; t(0.975, 2) = 4.303; sqrt(1 + 1/3).
        let a = window_allowance(&[0.0, 0.1, 0.2], 0.95).unwrap();
        assert!(
            (a - 4.3027 * 0.1 * (4.0f64 / 3.0).sqrt()).abs() < 1e-3,
            "{a}"
        );
        assert_eq!(window_allowance(&[0.3], 0.95), None);
        let s = ShiftInterval {
            estimate: 0.0,
            lo: -0.3,
            hi: 0.4,
            k: 1,
            count: 9,
            achieved: 0.95,
        };
        let w = widen(s, 0.4);
        assert!((w.lo + 0.5).abs() < 1e-12 && (w.hi - 0.4 * 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(w.estimate, 0.0);
    }

    #[test]
    fn the_n_to_decide_scales_the_facing_half_width_by_root_n() {
        let s = ShiftInterval {
            estimate: -0.10,
            lo: -0.20,
            hi: 0.0,
            k: 1,
            count: 36,
            achieved: 0.95,
        };
        // Threshold -0.05: the estimate is below it, the upper half-width 0.10 faces it, the gap is 0.05:
        // n' = 6 * 0.01 / 0.0025 = 24.
        assert_eq!(n_to_decide(&s, 0.0, -0.05, 6), Some(24));
        // An allowance as large as the gap: more requests cannot decide it.
        assert_eq!(n_to_decide(&s, 0.05, -0.05, 6), None);
        assert_eq!(n_to_decide(&s, 0.0, -0.10, 6), None);
    }
}
