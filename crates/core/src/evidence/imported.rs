//! `run.json` `imported`: the provenance of a load point whose timings another load tool measured
//! (`servegate import --from vllm-bench|aiperf|guidellm|inference-perf`, docs/load.md "Verdicts over another tool's run").
//! Judging reads it to say whose timings a verdict stands on, to leave out of the content check the text a
//! tool did not record, and to refuse the percentiles of a figure the tool's format does not carry.

use serde::{Deserialize, Serialize};

/// Whose timings an imported run holds, and what its format lacks. Present only in `run.json` of an import
/// (the gate's and each point's); a run servegate's own client made has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// The tool's name as `--from` takes it: `vllm-bench`, `aiperf`, `guidellm`.
    pub tool: String,
    /// The tool's version: as the file states it, else as `--tool-version` gave it; None when neither did
    /// (the verdicts then say `version not stated`).
    pub version: Option<String>,
    /// The command that made the file, as `--tool-command` gave it (none of the three formats records it).
    pub command: Option<String>,
    /// The file imported, as given on the command line.
    pub file: String,
    /// sha256 of that file (64 hex), so the evidence names exactly what it was built from.
    pub file_sha256: String,
    /// True when the tool recorded every judged reply's text (vLLM's `generated_texts`, GuideLLM's `output`)
    /// and the reads carry it; false when the reads carry a placeholder per token (AIPerf records no text):
    /// the content of such replies is not judged (a placeholder is neither sane nor degenerate).
    pub text_recorded: bool,
    /// The per-request figures the format does not carry, each with why: a percentile assertion on one is
    /// refused (INDETERMINATE with the reason), never judged from a reconstruction.
    #[serde(default)]
    pub lacks: Vec<Lack>,
}

/// One figure an imported format lacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lack {
    /// The load metric's wire name (`itl`, `ttft`, `tpot`, `e2e`).
    pub metric: String,
    /// Why the format does not carry it (`GuideLLM records the first and last token times per request, not
    /// each token's`).
    pub why: String,
}

impl Imported {
    /// `timings by vllm-bench 0.32.0, not servegate's client`: the words every verdict over an import ends
    /// with (outside text: escaped where the verdict is built).
    pub fn by(&self) -> String {
        format!(
            "timings by {} {}, not servegate's client",
            self.tool,
            self.version.as_deref().unwrap_or("(version not stated)")
        )
    }

    /// Why metric `name` cannot be judged from this import, when its format lacks it.
    pub fn lacks(&self, name: &str) -> Option<&str> {
        self.lacks
            .iter()
            .find(|l| l.metric == name)
            .map(|l| l.why.as_str())
    }
}
