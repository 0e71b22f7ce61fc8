//! The results JSON (schema [`crate::sinks::report::RESULTS_SCHEMA`], docs/results-json.md): the results
//! document serialized as it is, pretty-printed, with a final newline.

use crate::sinks::report::{Exporter, Results};

/// The results JSON exporter.
pub(crate) struct Json;

impl Exporter for Json {
    fn serialize(&self, results: &Results) -> Result<Vec<u8>, String> {
        Ok(serialize(results))
    }
}

/// The JSON document, pretty-printed, with a final newline.
pub fn serialize(results: &Results) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(results)
        .expect("results serialize (no maps with non-string keys)");
    bytes.push(b'\n');
    bytes
}
