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
    /// and the reads carry it (an empty text as empty content: an empty reply, failed by the content
    /// check); false when the reads carry a placeholder per token (AIPerf records no text): the content of
    /// such replies is not judged (a placeholder is neither sane nor degenerate), and the errors verdict
    /// says so.
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

    /// The transport error an import writes for a request the tool marked failed (`NN.response.json`,
    /// `run.json`): `inference-perf recorded a failure: ServerDisconnectedError: Server disconnected`, the
    /// tool's own words after the colon. [`Imported::failure_kind`] reads the tool's class of it back.
    pub fn failure_text(tool: &str, words: &str) -> String {
        format!("{tool} recorded a failure: {words}")
    }

    /// The tool's own class of a failure [`Imported::failure_text`] wrote: the tool's words up to their first
    /// colon, when that is a name (at most 64 characters of letters, digits, `_`, `.`, `-`, and at most two
    /// words): inference-perf's `error_type` (`ServerDisconnectedError`), AIPerf's `error.type` and code
    /// (`RequestTimeout 408`), GuideLLM's status (`errored`). `None` for text that is no such failure or
    /// whose words start with no name (a traceback, a sentence): the failure code then stands alone.
    pub fn failure_kind<'a>(&self, text: &'a str) -> Option<&'a str> {
        let words = text.strip_prefix(&format!("{} recorded a failure: ", self.tool))?;
        let (kind, _) = words.split_once(':')?;
        let kind = kind.trim();
        let named = !kind.is_empty()
            && kind.chars().count() <= 64
            && kind.split_whitespace().count() <= 2
            && kind
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | ' '));
        named.then_some(kind)
    }

    /// Why metric `name` cannot be judged from this import, when its format lacks it.
    pub fn lacks(&self, name: &str) -> Option<&str> {
        self.lacks
            .iter()
            .find(|l| l.metric == name)
            .map(|l| l.why.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_failure_is_written_and_its_kind_read_back() {
        let imp = Imported {
            tool: "inference-perf".into(),
            ..Imported::default()
        };
        let t = Imported::failure_text(
            "inference-perf",
            "ServerDisconnectedError: Server disconnected",
        );
        assert_eq!(
            t,
            "inference-perf recorded a failure: ServerDisconnectedError: Server disconnected"
        );
        assert_eq!(imp.failure_kind(&t), Some("ServerDisconnectedError"));
        for (words, kind) in [
            ("RequestTimeout 408: timed out", Some("RequestTimeout 408")),
            ("errored: errored (no error text recorded)", Some("errored")),
            ("aiohttp.ClientError: x", Some("aiohttp.ClientError")),
            ("Traceback (most recent call last):\n  File", None),
            ("Server disconnected", None),
            ("the serve closed the connection early: x", None),
        ] {
            let t = Imported::failure_text("inference-perf", words);
            assert_eq!(imp.failure_kind(&t), kind, "{words}");
        }
        // Another tool's text, or a client's own transport error, has no tool kind.
        assert_eq!(imp.failure_kind("aiperf recorded a failure: X: y"), None);
        assert_eq!(imp.failure_kind("connection refused: x"), None);
    }
}
