//! The `[record]` table of a gate, typed: what a record written from the gate's runs cannot learn from the
//! evidence. `records` builds records from it; the gate parser validates it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Why `sentence` (a record's `what_would_make_it_wrong`) is not the sentence a record requires (fewer than
/// four words), or None when it is one: a record is refused with it, and a gate's `[record]` table too, so
/// that `check` says so before a run rather than the record after it.
pub fn sentence_problem(sentence: &str) -> Option<String> {
    let sentence = sentence.trim();
    (sentence.split_whitespace().count() < 4).then(|| {
        format!("{sentence:?}: required, a sentence saying what would make this figure wrong")
    })
}

/// What a gate run cannot tell about itself, for `records::record::from_run`: usable as a `[record]` table in a gate or
/// a small JSON/TOML file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecordSpec {
    /// Record id (the file will be `<id>.json`).
    pub id: String,
    /// `decode_rate` or `first_token`.
    pub metric: String,
    /// Model name (`SmolLM2-135M-Instruct`).
    pub model_name: String,
    /// The model file to hash (streamed).
    pub model_file: PathBuf,
    /// Quantisation / weights (`Q8_0 GGUF`).
    pub weights: String,
    /// Device (`CPU (2 cores shared), 1 thread`).
    pub device: String,
    /// Route (`cpu`).
    pub route: String,
    /// Engine name (`llama.cpp server (xllamacpp)`).
    pub engine: String,
    /// Engine version; when absent, what the serve says (llama.cpp `/props` `build_info`). When both are given
    /// and differ, the record notes the serve's words.
    #[serde(default)]
    pub engine_version: Option<String>,
    /// Kernel set / backend description.
    #[serde(default)]
    pub backend: Option<String>,
    /// The device hold, if one was taken.
    #[serde(default)]
    pub hold_ticket: Option<String>,
    /// The required sentence.
    pub what_would_make_it_wrong: String,
    /// Other notes.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Whether the record's `host` names the machine's host name; by default it does not (`linux 6.8,
    /// 2 CPUs`: what the machine is, not what it is called). Records are published.
    #[serde(default)]
    pub publish_host: bool,
}
