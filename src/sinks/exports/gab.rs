//! github-action-benchmark's custom JSON (<https://github.com/benchmark-action/github-action-benchmark>, tools
//! `customBiggerIsBetter` and `customSmallerIsBetter`): an array of `{ name, unit, value, range?, extra? }`,
//! one direction per file. `range` is free text (`18.26 to 25.22`), `extra` the tooltip (the state, n, bound
//! and context).
//!
//! The action has no notion of a verdict: a figure that is not a pass or a fail (indeterminate, void,
//! incomparable, skipped) is left out, and a note on stderr says which, so it is never charted as a result.

use serde_json::{json, Value};

use super::Figure;

/// The array for one direction (`bigger`: the rates), and one note per figure left out.
pub fn serialize(figures: &[Figure], bigger: bool) -> (Vec<u8>, Vec<String>) {
    let mut out: Vec<Value> = Vec::new();
    let mut notes = Vec::new();
    for f in figures.iter().filter(|f| f.higher_is_better == bigger) {
        if !f.decided() {
            notes.push(format!(
                "{} left out: its state is {}, not a decided result (never charted as one)",
                f.name(),
                f.state
            ));
            continue;
        }
        let mut e = json!({
            "name": f.name(),
            "unit": f.unit,
            "value": f.value,
            "extra": f.extra(),
        });
        if let (Some(lo), Some(hi)) = (f.lower, f.upper) {
            e["range"] = json!(format!("{lo} to {hi}"));
        }
        out.push(e);
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Array(out)).unwrap_or_default();
    bytes.push(b'\n');
    (bytes, notes)
}
