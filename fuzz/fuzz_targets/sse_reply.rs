//! The stream parser: SSE framing (crates/core/src/analysis/sse.rs) and the reply parser (crates/core/src/analysis/reply/) on arbitrary bytes split
//! into reads at fuzzer-chosen points. Checks, beyond "never panics":
//! - framing does not depend on where the reads are split (the same events, the same incomplete tail);
//! - `parse_stream` and `parse_body` return (no panic, no hang) on the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use servegate_core::io::reads::TimedRead;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses how many split points; the next bytes choose them; the rest is the body.
    let Some((&k, rest)) = data.split_first() else { return };
    let k = (k % 8) as usize;
    if rest.len() < k {
        return;
    }
    let (cuts, body) = rest.split_at(k);
    let mut points: Vec<usize> = cuts.iter().map(|&c| if body.is_empty() { 0 } else { c as usize % (body.len() + 1) }).collect();
    points.sort_unstable();
    let mut reads = Vec::new();
    let mut at = 0;
    for (i, p) in points.iter().copied().chain(std::iter::once(body.len())).enumerate() {
        reads.push(TimedRead { recv_ms: None, t_ms: i as f64, bytes: body[at..p].to_vec() });
        at = p;
    }

    let split = servegate_core::analysis::sse::frame_all(reads.iter().map(|r| (r.bytes.as_slice(), 0.0)));
    let whole = servegate_core::analysis::sse::frame_all(std::iter::once((body, 0.0)));
    assert_eq!(split.0, whole.0, "events depend on the read split");
    assert_eq!(split.1, whole.1, "the incomplete tail depends on the read split");

    for status in [Some(200), Some(500), None] {
        let r = servegate_core::analysis::reply::parse_stream(&reads, status);
        let _ = r.failure();
        let _ = servegate_core::analysis::measure::measure(&r);
    }
    let b = servegate_core::analysis::reply::parse_body(body, Some(200), 1.0);
    let _ = b.failure();
    let _ = servegate_core::analysis::measure::measure(&b);
});
