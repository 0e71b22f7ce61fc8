//! Bencher Metric Format (BMF) JSON: `{ benchmark: { measure: { value, lower_value, upper_value } } }`, as
//! <https://bencher.dev/docs/reference/bencher-metric-format> defines it (schema: <https://bencher.dev/bmf.json>,
//! committed as tests/data/schemas/bmf.json and checked by tests/cli/exports.rs).
//!
//! BMF has no unit field, so the unit is in the measure's slug: `decode_rate` in tok/s is `decode-rate-tok-s`.
//! Both directions and the bounds go in one file (Bencher learns a measure's direction from its threshold).
//! A decided figure (pass, fail) goes under its measure; any other state under a separate measure
//! `<measure>-<state>` (e.g. `rate-tok-s-indeterminate`), so a dashboard charting the measure never shows it;
//! and `<measure>-pass` is 1 for a pass and 0 for anything else, the verdict as a number a threshold can watch.

use serde_json::{json, Map, Value};

use super::Figure;

pub use crate::records::leaderboard::slug;

/// The measure slug of a figure's value: `<measure>-<unit>`, with `-<state>` for an undecided figure.
pub fn measure_slug(f: &Figure) -> String {
    let base = format!("{}-{}", slug(&f.measure), slug(&f.unit));
    if f.decided() {
        base
    } else {
        format!("{base}-{}", slug(&f.state))
    }
}

/// The BMF document, pretty-printed, benchmarks and measures in sorted order.
pub fn serialize(figures: &[Figure]) -> Vec<u8> {
    let mut doc: Map<String, Value> = Map::new();
    for f in figures {
        let bench = doc
            .entry(f.benchmark.clone())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("a benchmark is an object");
        let mut m = Map::new();
        m.insert("value".into(), json!(f.value));
        if let Some(lo) = f.lower {
            m.insert("lower_value".into(), json!(lo));
        }
        if let Some(hi) = f.upper {
            m.insert("upper_value".into(), json!(hi));
        }
        bench.insert(measure_slug(f), Value::Object(m));
        bench.insert(
            format!("{}-pass", slug(&f.measure)),
            json!({ "value": if f.state == "pass" { 1.0 } else { 0.0 } }),
        );
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(doc)).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}
