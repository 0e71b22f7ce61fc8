//! Aggregates of one load sweep point, from per-request samples (pure). Each definition is stated once
//! here and quoted by docs/metrics.md and docs/load.md:
//!
//! * **latency percentiles** of TTFT, ITL, TPOT and E2E: numpy's linear method ([`crate::analysis::stats`]).
//!   TTFT and E2E count from the request's *intended* send time (its measured value plus its queue time in
//!   the client, so a serve that makes requests wait is not excused by the client's queue: no coordinated
//!   omission); TPOT = (E2E − TTFT) / (N − 1) per request (vLLM's TPOT; AIPerf calls it ITL); ITL pools every
//!   inter-chunk gap of every reply (vLLM's ITL). Failed requests give no latency value.
//! * **measured window**: from the first judged request's send to the last judged request's end.
//! * **output tok/s**: completion tokens of the succeeded judged requests / the window (vLLM "Output token
//!   throughput", GuideLLM "output tokens/s").
//! * **requests/s**: succeeded judged requests / the window (vLLM "Request throughput").
//! * **goodput**: succeeded judged requests meeting every SLO given / the window, requests/s (vLLM
//!   `--goodput`, DistServe).
//! * **SLO attainment**: requests meeting every SLO / *planned* judged requests (a failed or unsent request
//!   misses), 0..=1 (DistServe). A request that succeeded but whose TTFT or TPOT could not be measured
//!   (`measure::unmeasured_cause`: a first token read late with later ones, a decode window under the
//!   minimum) while an SLO on that figure is given is not counted at all, neither met nor missed: it leaves
//!   the numerator and the planned count alike ([`unmeasured`], stated in the verdict's n). Goodput counts
//!   only the requests that met.
//! * **peak real concurrency**: the most request lifetimes [send, end] overlapping at one instant (a sweep
//!   over the start and end events; an end at the same instant as a start counts first), failed requests
//!   included; a lifetime whose end was not recorded (an imported failure) counts at its send only.
//! * **scaling efficiency** of a sweep point: output tok/s(c) / (c × output tok/s(1)), 1.0 = perfect
//!   scaling; a serve that serializes requests shows 1 / c.

use crate::analysis::stats;
use crate::io::exchange::SendTiming;

/// One judged request of a load point, as the aggregates see it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Send timing (ms from the point's start).
    pub timing: SendTiming,
    /// True when the reply succeeded on its own terms (no serve error, not cut, status 2xx).
    pub ok: bool,
    /// TTFT from the send, ms.
    pub ttft_ms: Option<f64>,
    /// E2E from the send, ms.
    pub e2e_ms: Option<f64>,
    /// TPOT, ms.
    pub tpot_ms: Option<f64>,
    /// Inter-chunk gaps, ms.
    pub itl_ms: Vec<f64>,
    /// Completion tokens (usage, else the estimate).
    pub tokens: Option<u64>,
    /// Why the reply has no TTFT though it succeeded (`measure::unmeasured_cause`), or None.
    pub ttft_unmeasured: Option<String>,
    /// Why the reply has no TPOT though it succeeded (`measure::unmeasured_cause`), or None.
    pub tpot_unmeasured: Option<String>,
}

impl Sample {
    /// TTFT from the intended send time: measured TTFT + queue time, ms.
    pub fn ttft_from_intended_ms(&self) -> Option<f64> {
        self.ttft_ms.map(|t| t + self.timing.queue_ms())
    }
    /// E2E from the intended send time, ms.
    pub fn e2e_from_intended_ms(&self) -> Option<f64> {
        self.e2e_ms.map(|t| t + self.timing.queue_ms())
    }
}

/// SLOs for goodput: a request meets them when it succeeded and every one given holds (`<=`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Slo {
    /// TTFT (from the intended send) at most, ms.
    pub ttft_ms: Option<f64>,
    /// TPOT at most, ms.
    pub tpot_ms: Option<f64>,
    /// E2E (from the intended send) at most, ms.
    pub e2e_ms: Option<f64>,
}

impl Slo {
    /// The cause when `s` cannot be judged against these SLOs: it succeeded, but a figure an SLO is given
    /// for could not be measured (`Sample::ttft_unmeasured`, `tpot_unmeasured`). Such a request neither
    /// meets nor misses.
    pub fn unmeasured<'s>(&self, s: &'s Sample) -> Option<&'s str> {
        if !s.ok {
            return None;
        }
        let ttft = s
            .ttft_unmeasured
            .as_deref()
            .filter(|_| self.ttft_ms.is_some() && s.ttft_ms.is_none());
        let tpot = s
            .tpot_unmeasured
            .as_deref()
            .filter(|_| self.tpot_ms.is_some() && s.tpot_ms.is_none());
        ttft.or(tpot)
    }

    /// True when `s` succeeded and meets every SLO given (a missing figure misses, and an unmeasured one,
    /// [`Slo::unmeasured`], does not meet: count those apart).
    pub fn met(&self, s: &Sample) -> bool {
        let ok = |bound: Option<f64>, v: Option<f64>| match bound {
            None => true,
            Some(b) => v.is_some_and(|v| v <= b),
        };
        s.ok && ok(self.ttft_ms, s.ttft_from_intended_ms())
            && ok(self.tpot_ms, s.tpot_ms)
            && ok(self.e2e_ms, s.e2e_from_intended_ms())
    }
}

/// The values of one latency metric over a point.
pub fn values(samples: &[Sample], metric: crate::spec::load::LatencyMetric) -> Vec<f64> {
    use crate::spec::load::LatencyMetric as M;
    match metric {
        M::Ttft => samples
            .iter()
            .filter(|s| s.ok)
            .filter_map(Sample::ttft_from_intended_ms)
            .collect(),
        M::E2e => samples
            .iter()
            .filter(|s| s.ok)
            .filter_map(Sample::e2e_from_intended_ms)
            .collect(),
        M::Tpot => samples
            .iter()
            .filter(|s| s.ok)
            .filter_map(|s| s.tpot_ms)
            .collect(),
        M::Itl => samples
            .iter()
            .filter(|s| s.ok)
            .flat_map(|s| s.itl_ms.iter().copied())
            .collect(),
    }
}

/// The fewest samples from which percentile `p` is claimed: the smallest n with (p/100)^n <= 0.05, i.e. at
/// least one sample above the true p-quantile with 95 % probability (p95: 59, p99: 299, p90: 29, p50: 5).
pub fn min_n_for(p: f64) -> usize {
    if p <= 0.0 {
        return 1;
    }
    if p >= 100.0 {
        return usize::MAX;
    }
    let q = p / 100.0;
    ((0.05f64).ln() / q.ln() - 1e-9).ceil().max(1.0) as usize
}

/// The measured window, ms: first judged send to last judged end. None without samples.
pub fn window_ms(samples: &[Sample]) -> Option<f64> {
    let first = samples.iter().map(|s| s.timing.sent_ms).reduce(f64::min)?;
    let last = samples.iter().map(|s| s.timing.end_ms).reduce(f64::max)?;
    (last > first).then_some(last - first)
}

/// Output tok/s over the measured window.
pub fn output_tok_s(samples: &[Sample]) -> Option<f64> {
    let w = window_ms(samples)?;
    let tokens: u64 = samples
        .iter()
        .filter(|s| s.ok)
        .filter_map(|s| s.tokens)
        .sum();
    Some(tokens as f64 * 1000.0 / w)
}

/// Succeeded requests/s over the measured window.
pub fn requests_per_s(samples: &[Sample]) -> Option<f64> {
    let w = window_ms(samples)?;
    Some(samples.iter().filter(|s| s.ok).count() as f64 * 1000.0 / w)
}

/// Requests meeting every SLO (the numerator of goodput and attainment).
pub fn good(samples: &[Sample], slo: &Slo) -> usize {
    samples.iter().filter(|s| slo.met(s)).count()
}

/// Requests that neither meet nor miss the SLOs: succeeded, but a figure an SLO is given for could not be
/// measured ([`Slo::unmeasured`]).
pub fn unmeasured(samples: &[Sample], slo: &Slo) -> usize {
    samples
        .iter()
        .filter(|s| slo.unmeasured(s).is_some())
        .count()
}

/// Goodput, requests/s: requests meeting every SLO / the window.
pub fn goodput_rps(samples: &[Sample], slo: &Slo) -> Option<f64> {
    let w = window_ms(samples)?;
    Some(good(samples, slo) as f64 * 1000.0 / w)
}

/// SLO attainment: requests meeting every SLO / (planned − the unmeasured, [`unmeasured`]) (none left:
/// None).
pub fn attainment(samples: &[Sample], slo: &Slo, planned: usize) -> Option<f64> {
    let counted = planned.saturating_sub(unmeasured(samples, slo));
    (counted > 0).then(|| good(samples, slo) as f64 / counted as f64)
}

/// Peak real concurrency: the most [sent, end] intervals open at one instant ([`peak_overlap`]). Failed
/// requests count as any other: a request that failed after 200 ms was in flight for those 200 ms.
pub fn peak_concurrency(samples: &[Sample]) -> usize {
    peak_overlap(samples.iter().map(|s| (s.timing.sent_ms, s.timing.end_ms)))
}

/// The requests among `samples` whose lifetime has no length: a failed request whose end was not recorded
/// (an imported vLLM failure: vLLM keeps no end for an HTTP error, so the import records the end at the
/// send). [`peak_concurrency`] counts each in flight at its send only, so with any of them the peak is a
/// lower bound.
pub fn endless_failures(samples: &[Sample]) -> usize {
    samples
        .iter()
        .filter(|s| !s.ok && s.timing.end_ms <= s.timing.sent_ms)
        .count()
}

/// The most of `intervals` (start, end; ms, any one clock) open at one instant: a sweep over the start and
/// end events. An end at the same instant as another's start counts first (back-to-back requests of one
/// slot do not overlap); an interval with no length (end at or before its start: an end not recorded) is
/// counted open at its start instant only, overlapping whatever is open then, never at no instant at all
/// (a request was in flight at least when it was sent).
pub fn peak_overlap(intervals: impl IntoIterator<Item = (f64, f64)>) -> usize {
    // (instant, order, delta): at one instant, the ends of intervals with a length, then the starts, then
    // the ends of intervals without one.
    let mut events: Vec<(f64, u8, i64)> = Vec::new();
    for (start, end) in intervals {
        events.push((start, 1, 1));
        if end > start {
            events.push((end, 0, -1));
        } else {
            events.push((start, 2, -1));
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut peak) = (0i64, 0i64);
    for (_, _, d) in events {
        cur += d;
        peak = peak.max(cur);
    }
    peak as usize
}

/// Scaling efficiency: tok/s at concurrency c / (c × tok/s at concurrency 1).
pub fn scaling_efficiency(tok_s_c: f64, c: u32, tok_s_1: f64) -> Option<f64> {
    (c > 0 && tok_s_1 > 0.0).then(|| tok_s_c / (f64::from(c) * tok_s_1))
}

/// The p99 of the send lag, ms (None without samples).
pub fn lag_p99_ms(samples: &[Sample]) -> Option<f64> {
    let v: Vec<f64> = samples.iter().map(|s| s.timing.lag_ms()).collect();
    stats::percentile(&v, 99.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::load::LatencyMetric;

    fn sample(sent: f64, end: f64, ttft: f64, tokens: u64) -> Sample {
        Sample {
            timing: SendTiming {
                intended_ms: sent,
                woke_ms: sent,
                slot_ms: sent,
                sent_ms: sent,
                end_ms: end,
                ..Default::default()
            },
            ok: true,
            ttft_ms: Some(ttft),
            e2e_ms: Some(end - sent),
            tpot_ms: Some((end - sent - ttft) / (tokens as f64 - 1.0)),
            itl_ms: vec![],
            tokens: Some(tokens),
            ..Default::default()
        }
    }

    #[test]
    fn min_n_matches_the_issue() {
        assert_eq!(min_n_for(95.0), 59);
        assert_eq!(min_n_for(99.0), 299);
        assert_eq!(min_n_for(90.0), 29);
        assert_eq!(min_n_for(50.0), 5);
    }

    #[test]
    fn throughput_goodput_attainment_by_hand() {
        // Two requests: [0, 1000] 11 tokens TTFT 100; [500, 1500] 11 tokens TTFT 300. Window 1500 ms.
        let s = vec![
            sample(0.0, 1000.0, 100.0, 11),
            sample(500.0, 1500.0, 300.0, 11),
        ];
        assert_eq!(window_ms(&s), Some(1500.0));
        assert!((output_tok_s(&s).unwrap() - 22.0 / 1.5).abs() < 1e-12);
        assert!((requests_per_s(&s).unwrap() - 2.0 / 1.5).abs() < 1e-12);
        let slo = Slo {
            ttft_ms: Some(200.0),
            ..Default::default()
        };
        assert_eq!(good(&s, &slo), 1);
        // Planned 4: one met, a failed/unsent one misses.
        assert_eq!(attainment(&s, &slo, 4), Some(0.25));
        assert!((goodput_rps(&s, &slo).unwrap() - 1.0 / 1.5).abs() < 1e-12);
        assert_eq!(peak_concurrency(&s), 2);
        // TPOT = (1000 − 100) / 10 = 90 and (1000 − 300) / 10 = 70.
        assert_eq!(values(&s, LatencyMetric::Tpot), vec![90.0, 70.0]);
    }

    #[test]
    fn a_reply_with_no_measured_ttft_neither_meets_nor_misses_the_slo() {
        let mut s = vec![
            sample(0.0, 500.0, 100.0, 10),
            sample(0.0, 500.0, 300.0, 10),
            sample(0.0, 1000.0, 100.0, 10),
            sample(0.0, 1000.0, 100.0, 10),
        ];
        // The third reply's first token was read late with later ones: no TTFT, not slow.
        s[2].ttft_ms = None;
        s[2].tpot_ms = None;
        s[2].ttft_unmeasured = Some("first token arrived with 1 more".into());
        let slo = Slo {
            ttft_ms: Some(200.0),
            ..Slo::default()
        };
        assert_eq!(good(&s, &slo), 2);
        assert_eq!(unmeasured(&s, &slo), 1);
        assert_eq!(
            slo.unmeasured(&s[2]),
            Some("first token arrived with 1 more")
        );
        // 2 met of the 3 counted (4 planned, 1 not measured), not 2 of 4.
        assert_eq!(attainment(&s, &slo, 4), Some(2.0 / 3.0));
        assert!((goodput_rps(&s, &slo).unwrap() - 2.0).abs() < 1e-12);
        // Without a TTFT SLO the reply is judged on the others (e2e 1000 ms meets 2000).
        let e2e = Slo {
            e2e_ms: Some(2000.0),
            ..Slo::default()
        };
        assert_eq!(unmeasured(&s, &e2e), 0);
        assert_eq!(good(&s, &e2e), 4);
        // A failed reply without a TTFT misses, whatever its cause field says.
        s[2].ok = false;
        assert_eq!(unmeasured(&s, &slo), 0);
        assert_eq!(attainment(&s, &slo, 4), Some(0.5));
        // Nothing measured: no attainment, never 0 (a miss) nor 1.
        let mut none = vec![s[2].clone()];
        none[0].ok = true;
        assert_eq!(attainment(&none, &slo, 1), None);
    }

    #[test]
    fn queue_time_counts_in_ttft_and_back_to_back_is_not_overlap() {
        let mut a = sample(0.0, 100.0, 10.0, 2);
        a.timing.slot_ms = 0.0;
        let mut b = sample(100.0, 200.0, 10.0, 2);
        b.timing.intended_ms = 40.0;
        b.timing.woke_ms = 40.0; // due at 40, waited for the slot until 100
        b.timing.slot_ms = 40.0;
        assert_eq!(b.ttft_from_intended_ms(), Some(10.0));
        b.timing.slot_ms = 100.0;
        assert_eq!(b.ttft_from_intended_ms(), Some(70.0));
        assert_eq!(peak_concurrency(&[a, b]), 1);
        // A lifetime with no length (a failure whose end was not recorded) is in flight at its send: it
        // overlaps what is open then, not what ended at that instant.
        assert_eq!(peak_overlap([(0.0, 100.0), (50.0, 50.0)]), 2);
        assert_eq!(peak_overlap([(0.0, 100.0), (100.0, 100.0)]), 1);
        assert_eq!(peak_overlap([(7.0, 7.0), (7.0, 0.0)]), 2);
        assert_eq!(peak_overlap([(7.0, 7.0)]), 1);
        assert_eq!(scaling_efficiency(40.0, 4, 10.0), Some(1.0));
        assert_eq!(scaling_efficiency(10.0, 4, 10.0), Some(0.25));
    }
}
