//! Summary statistics over repeated measurements: median, percentile, min, max, spread. Small and plain on
//! purpose (no statistics crate for fifty lines). Definitions:
//! * values that are NaN or infinite are ignored (a missing figure is `None` upstream, never NaN);
//! * every function returns `None` for an empty input (after ignoring non-finite values);
//! * **median** of an even count is the mean of the two middle values;
//! * **percentile** is linear interpolation between closest ranks — numpy's default (`method="linear"`,
//!   Hyndman & Fan type 7): for sorted `x[0..n]` and `p` in [0, 100], `h = (n − 1)·p/100`,
//!   result `x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])`. So p50 equals the median.
//!
//! Units are the inputs' units (ms, tok/s, ...).

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Median; the mean of the two middle values for an even count. `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let v = sorted(values);
    let n = v.len();
    if n == 0 {
        return None;
    }
    if n % 2 == 1 {
        v.get(n / 2).copied()
    } else {
        Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0)
    }
}

/// Percentile `p` (0–100, clamped) by linear interpolation between closest ranks (numpy's default).
/// `None` when empty or `p` is NaN.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if p.is_nan() {
        return None;
    }
    let v = sorted(values);
    let n = v.len();
    if n == 0 {
        return None;
    }
    let h = (n - 1) as f64 * p.clamp(0.0, 100.0) / 100.0;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let (a, b) = (*v.get(lo)?, *v.get(hi)?);
    Some(a + (h - lo as f64) * (b - a))
}

/// Arithmetic mean. `None` when empty.
pub fn mean(values: &[f64]) -> Option<f64> {
    let v = sorted(values);
    if v.is_empty() {
        return None;
    }
    Some(v.iter().sum::<f64>() / v.len() as f64)
}

/// Smallest value. `None` when empty.
pub fn min(values: &[f64]) -> Option<f64> {
    sorted(values).first().copied()
}

/// Largest value. `None` when empty.
pub fn max(values: &[f64]) -> Option<f64> {
    sorted(values).last().copied()
}

/// Spread `max / min` (a ratio, unitless; 1.0 = all equal). `None` when empty or when min ≤ 0 (a ratio
/// over zero or a sign change means nothing).
pub fn spread(values: &[f64]) -> Option<f64> {
    let (lo, hi) = (min(values)?, max(values)?);
    if lo > 0.0 {
        Some(hi / lo)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_resists_one_bad_run_where_mean_does_not() {
        let runs = [70.0, 70.0, 1.9];
        assert_eq!(median(&runs), Some(70.0));
        let m = mean(&runs).unwrap();
        assert!((m - 47.3).abs() < 0.001, "{m}");
    }

    #[test]
    fn median_of_even_count_is_mean_of_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn percentile_interpolates_like_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        // numpy.percentile([1,2,3,4], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4]
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 25.0), Some(1.75));
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&v, f64::NAN), None);
    }

    #[test]
    fn p50_equals_median() {
        let v = [3.0, 9.0, 1.0, 4.0, 10.0, 2.0];
        assert_eq!(percentile(&v, 50.0), median(&v));
    }

    #[test]
    fn min_max_spread() {
        let v = [50.0, 25.0, 100.0];
        assert_eq!(min(&v), Some(25.0));
        assert_eq!(max(&v), Some(100.0));
        assert_eq!(spread(&v), Some(4.0));
        assert_eq!(spread(&[0.0, 1.0]), None);
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn non_finite_values_are_ignored() {
        assert_eq!(median(&[f64::NAN, 1.0, 3.0, f64::INFINITY]), Some(2.0));
        assert_eq!(max(&[f64::NAN]), None);
    }
}
