//! "Ready is not ready": a first judged request far slower to its first token than the rest, which the
//! median hides. The likely cause is a serve that said ready before it was (it loads the model on the first
//! request, or fills a cold cache), so the run says it (`cold_first_request: ...` in `run.json` notes and on
//! the first_token verdict line) instead of passing it silently. Pure.

use super::stats::median;

/// How many times the median of the other judged TTFTs the first one must exceed to be flagged.
pub const COLD_FACTOR: f64 = 5.0;
/// The fewest other measured TTFTs the rule needs (fewer: the median of the others means too little).
pub const COLD_MIN_OTHERS: usize = 3;

/// A first judged request [`COLD_FACTOR`] times slower to its first token than the median of the others.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdFirst {
    /// Its send-order index (as the `NN.*` files).
    pub index: usize,
    /// Its TTFT, ms.
    pub ttft_ms: f64,
    /// The median TTFT of the other measured judged requests, ms.
    pub others_median_ms: f64,
    /// How many others were measured.
    pub others: usize,
}

impl ColdFirst {
    /// The note, `cold_first_request: request 00's TTFT 1828 ms is 12.4x the median of the other 5 (148 ms):
    /// ...`, with the likely cause when no warmup request was sent before it (`warmup`: warmup requests
    /// sent), and how to keep it out of the judged run.
    pub fn note(&self, warmup: usize) -> String {
        let cause = if warmup == 0 {
            "the first request the serve answered: it likely loaded the model or filled a cold cache on it, so \
             its readiness did not mean ready"
                .to_string()
        } else {
            format!(
                "after {}: a cold path the warmup did not reach, or a stall on the serve",
                crate::text::counted(warmup, "warmup request")
            )
        };
        format!(
            "cold_first_request: request {:02}'s TTFT {:.0} ms is {:.1}x the median of the other {} ({:.0} ms; rule: over {COLD_FACTOR}x with at least {COLD_MIN_OTHERS} others): {cause}; the median keeps it out of the verdict, [request] warmup_requests = 1 or a readiness request that is a real completion keeps it out of the run (docs/metrics.md \"Ready is not ready\")",
            self.index,
            self.ttft_ms,
            self.ttft_ms / self.others_median_ms,
            self.others,
            self.others_median_ms,
        )
    }
}

impl ColdFirst {
    /// The note for a cold warmup request (the run's first, sent before the judged ones, against their
    /// median): `cold_warmup_request: request 00's TTFT 11900 ms is 80.4x ...: readiness did not mean ready;
    /// the warmup kept it out of the judged figures`.
    pub fn warmup_note(&self) -> String {
        format!(
            "cold_warmup_request: request {:02}'s TTFT {:.0} ms is {:.1}x the median of the {} judged ({:.0} ms): the serve said ready before it was (a model loaded or a cache filled on its first request); the warmup kept it out of the judged figures",
            self.index,
            self.ttft_ms,
            self.ttft_ms / self.others_median_ms,
            self.others,
            self.others_median_ms,
        )
    }
}

/// The first judged request when it is cold: `ttfts` are the judged requests in send order, (index, TTFT
/// ms or None when not measured). The first must be measured, at least [`COLD_MIN_OTHERS`] others measured,
/// and its TTFT over [`COLD_FACTOR`] times their median.
pub fn cold_first(ttfts: &[(usize, Option<f64>)]) -> Option<ColdFirst> {
    let (&(index, first), rest) = ttfts.split_first()?;
    let first = first?;
    let others: Vec<f64> = rest.iter().filter_map(|(_, t)| *t).collect();
    if others.len() < COLD_MIN_OTHERS {
        return None;
    }
    let m = median(&others)?;
    (m > 0.0 && first > COLD_FACTOR * m).then_some(ColdFirst {
        index,
        ttft_ms: first,
        others_median_ms: m,
        others: others.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[Option<f64>]) -> Vec<(usize, Option<f64>)> {
        v.iter().copied().enumerate().collect()
    }

    /// The transformers serve trial: 1,828 ms against 125-168 ms for the rest.
    #[test]
    fn a_first_request_loading_the_model_is_flagged() {
        let c = cold_first(&t(&[Some(1828.0), Some(125.0), Some(148.0), Some(168.0)])).unwrap();
        assert_eq!((c.index, c.others), (0, 3));
        assert_eq!(c.others_median_ms, 148.0);
        let n = c.note(0);
        assert!(n.starts_with("cold_first_request: request 00's TTFT 1828 ms is 12.4x the median of the other 3 (148 ms;"), "{n}");
        assert!(n.contains("likely loaded the model"), "{n}");
        assert!(c.note(2).contains("after 2 warmup requests"));
        assert!(c.warmup_note().starts_with("cold_warmup_request: request 00's TTFT 1828 ms is 12.4x the median of the 3 judged (148 ms)"));
    }

    #[test]
    fn the_rule_needs_five_times_and_three_others() {
        // 5x exactly is not over it.
        assert_eq!(
            cold_first(&t(&[Some(500.0), Some(100.0), Some(100.0), Some(100.0)])),
            None
        );
        assert!(cold_first(&t(&[Some(501.0), Some(100.0), Some(100.0), Some(100.0)])).is_some());
        // Two others are too few; an unmeasured other does not count; an unmeasured first is never flagged.
        assert_eq!(
            cold_first(&t(&[Some(5000.0), Some(100.0), Some(100.0)])),
            None
        );
        assert_eq!(
            cold_first(&t(&[Some(5000.0), Some(100.0), None, Some(100.0)])),
            None
        );
        assert_eq!(
            cold_first(&t(&[None, Some(100.0), Some(100.0), Some(100.0)])),
            None
        );
        // A slow request later in the run is not the first one's cold start.
        assert_eq!(
            cold_first(&t(&[Some(100.0), Some(5000.0), Some(100.0), Some(100.0)])),
            None
        );
        assert_eq!(cold_first(&[]), None);
    }
}
