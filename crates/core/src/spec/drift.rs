//! `[assert.drift]`: this run's greedy answers against a blessed baseline's, judged with the serve's own
//! logprobs (docs/drift.md), and the `rule` / `top_k` keys a pair gate's `[assert.same_answers]` shares with
//! it. Parsed and validated here; judged in `judge::drift`; compared in `analysis::drift`.

use serde::Deserialize;
use toml::Spanned;

use super::{RequestSpec, SpecError, Validator};

/// How two replies must agree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Token for token (or, without logprobs, byte for byte) the same.
    #[default]
    Exact,
    /// vLLM's `check_logprobs_close`: the same until the first divergence, where each side's token is among
    /// the other's top-k.
    LogprobsClose,
}

impl Rule {
    /// The wire name (`exact`, `logprobs_close`).
    pub fn name(self) -> &'static str {
        match self {
            Rule::Exact => "exact",
            Rule::LogprobsClose => "logprobs_close",
        }
    }
}

/// The default number of alternatives per position asked for and looked in (vLLM's model tests use 5).
pub const DEFAULT_TOP_K: u32 = 5;
/// The comparability key's field names (`evidence::comparability::ComparabilityKey::fields`, less `extra.*`),
/// which `may_differ` may name (tests/cli/drift.rs checks the two lists agree).
pub const KEY_FIELDS: [&str; 10] = [
    "model_sha256",
    "engine",
    "engine_version",
    "device",
    "cpu_model",
    "cpus",
    "max_tokens",
    "temperature",
    "prompts_sha256",
    "stream",
];
/// Most alternatives per position a gate may ask for (OpenAI's `top_logprobs` allows 0-20).
pub const MAX_TOP_K: u32 = 20;

/// One baseline path, or several (one per machine kind; the comparable one is used).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawBaselines {
    One(String),
    Many(Vec<String>),
}

/// The raw `[assert.drift]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDrift {
    baseline: Spanned<RawBaselines>,
    #[serde(default)]
    rule: Rule,
    #[serde(default)]
    top_k: Option<Spanned<i64>>,
    #[serde(default)]
    max_diverged: Option<Spanned<i64>>,
    #[serde(default)]
    may_differ: Vec<String>,
    #[serde(default)]
    on_incomparable: super::OnIncomparable,
}

/// `[assert.drift]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct DriftAssert {
    /// Baseline directories as written (placeholders expanded). A relative path is looked up from the gate
    /// file's directory and then each of its ancestors, the first that holds it (so the gate in `gates/` and
    /// its copy in a run directory under `target/` find the same `data/baselines/...`): the one path rule of
    /// stored baselines, `evidence::baseline::resolve`, as `[assert.regression]` uses.
    pub baselines: Vec<String>,
    /// The rule a prompt's replies must meet (default `exact`).
    pub rule: Rule,
    /// Alternatives per position asked for (`top_logprobs`) and looked in, 1-20 (default 5).
    pub top_k: u32,
    /// Prompts that may fail the rule (default 0).
    pub max_diverged: u32,
    /// Comparability-key fields that may differ from the baseline's without making the run incomparable, by
    /// their key name (`extra.flash_attention`, `engine_version`; a bare `flash_attention` means
    /// `extra.flash_attention`). For a gate that asks whether answers stay close *across* a setting (flash
    /// attention off against a baseline with it on); the verdict names each allowed difference.
    pub may_differ: Vec<String>,
    /// What a baseline that no longer applies does to the trial (`on_incomparable`: `fail`, the default, or
    /// `skip`; `spec::OnIncomparable`).
    pub on_incomparable: super::OnIncomparable,
}

impl Validator<'_> {
    pub(super) fn top_k(&self, v: &Option<Spanned<i64>>, key: &str) -> Result<u32, SpecError> {
        match v {
            None => Ok(DEFAULT_TOP_K),
            Some(k) => {
                let n = *k.get_ref();
                if !(1..=MAX_TOP_K as i64).contains(&n) {
                    return Err(self.err(
                        k.span(),
                        key,
                        format!("must be 1 to {MAX_TOP_K} (alternatives per token), got {n}"),
                    ));
                }
                Ok(n as u32)
            }
        }
    }

    /// Validates `[assert.drift]`: at least one baseline, top_k 1-20, max_diverged ≥ 0, and greedy decoding
    /// (`temperature = 0` stated: drift means something only between greedy replies).
    pub(super) fn drift(
        &self,
        raw: &RawDrift,
        request: &RequestSpec,
    ) -> Result<DriftAssert, SpecError> {
        let list = match raw.baseline.get_ref() {
            RawBaselines::One(s) => vec![s.clone()],
            RawBaselines::Many(v) => v.clone(),
        };
        if list.is_empty() || list.iter().any(|b| b.trim().is_empty()) {
            return Err(self.err(
                raw.baseline.span(),
                "assert.drift.baseline",
                "needs a baseline directory (e.g. \"data/baselines/<gate>\"), none empty",
            ));
        }
        let baselines = list
            .iter()
            .map(|b| self.expand(b, raw.baseline.span(), "assert.drift.baseline", false))
            .collect::<Result<Vec<_>, _>>()?;
        let max_diverged = match &raw.max_diverged {
            None => 0,
            Some(m) if *m.get_ref() >= 0 && *m.get_ref() <= u32::MAX as i64 => *m.get_ref() as u32,
            Some(m) => {
                return Err(self.err(
                    m.span(),
                    "assert.drift.max_diverged",
                    format!("must be a count of prompts ≥ 0, got {}", m.get_ref()),
                ))
            }
        };
        match request.temperature {
            Some(0.0) => {}
            other => {
                return Err(self.err(
                    0..0,
                    "request.temperature",
                    format!(
                        "{}, but [assert.drift] compares greedy answers: set temperature = 0",
                        match other {
                            Some(t) => format!("is {t}"),
                            None => "is not set (the serve's default samples)".into(),
                        }
                    ),
                ));
            }
        }
        let mut may_differ = Vec::new();
        for f in &raw.may_differ {
            let name = if KEY_FIELDS.contains(&f.as_str()) || f.starts_with("extra.") {
                f.clone()
            } else if !f.is_empty() && !f.contains('.') {
                format!("extra.{f}")
            } else {
                String::new()
            };
            if name.is_empty() || name == "extra." {
                return Err(self.err(
                    0..0,
                    "assert.drift.may_differ",
                    format!("{f:?} is not a comparability key field (model_sha256, engine, engine_version, device, max_tokens, temperature, prompts_sha256, stream, or a serve setting such as flash_attention)"),
                ));
            }
            may_differ.push(name);
        }
        Ok(DriftAssert {
            on_incomparable: raw.on_incomparable,
            may_differ,
            baselines,
            rule: raw.rule,
            top_k: self.top_k(&raw.top_k, "assert.drift.top_k")?,
            max_diverged,
        })
    }
}

/// The request as sent when answers are compared with logprobs: `"logprobs": true, "top_logprobs": k` added to
/// `extra` (unless the gate sets them itself), so every `NN.request.json` of the evidence shows it asked.
pub(super) fn ask_logprobs(mut request: RequestSpec, top_k: Option<u32>) -> RequestSpec {
    if let Some(k) = top_k {
        request
            .extra
            .entry("logprobs")
            .or_insert(serde_json::Value::Bool(true));
        request
            .extra
            .entry("top_logprobs")
            .or_insert(serde_json::Value::from(k));
    }
    request
}

#[cfg(test)]
mod tests {
    use crate::spec::{parse, Context};
    use std::path::Path;

    const GATE: &str = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\ntemperature = 0\nprompts = [\"p\"]\n[assert.drift]\nbaseline = \"baselines/g\"\n";

    fn parse_str(s: &str) -> Result<crate::spec::GateSpec, crate::spec::SpecError> {
        let ctx = Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        parse(Path::new("gates/g.toml"), s, &ctx)
    }

    #[test]
    fn drift_parses_with_defaults_and_asks_every_request_for_logprobs() {
        let g = parse_str(GATE).unwrap();
        let d = g.assertions.drift.as_ref().unwrap();
        assert_eq!(d.baselines, ["baselines/g"]);
        assert_eq!(
            (d.rule, d.top_k, d.max_diverged),
            (super::Rule::Exact, 5, 0)
        );
        assert_eq!(g.request.extra["logprobs"], serde_json::json!(true));
        assert_eq!(g.request.extra["top_logprobs"], serde_json::json!(5));
        let g = parse_str(&format!("{GATE}rule = \"logprobs_close\"\ntop_k = 3\nmay_differ = [\"flash_attention\", \"engine_version\"]\n")).unwrap();
        let d = g.assertions.drift.as_ref().unwrap();
        assert_eq!((d.rule, d.top_k), (super::Rule::LogprobsClose, 3));
        assert_eq!(d.may_differ, ["extra.flash_attention", "engine_version"]);
        assert_eq!(g.request.extra["top_logprobs"], serde_json::json!(3));
    }

    #[test]
    fn sampling_a_bad_top_k_and_a_bad_rule_are_refused_with_their_line() {
        for (text, key, what) in [
            (
                GATE.replace("temperature = 0", "temperature = 0.7"),
                "request.temperature",
                "is 0.7, but [assert.drift] compares greedy answers",
            ),
            (
                GATE.replace("temperature = 0\n", ""),
                "request.temperature",
                "is not set",
            ),
            (
                format!("{GATE}top_k = 0\n"),
                "assert.drift.top_k",
                "must be 1 to 20",
            ),
            (
                format!("{GATE}top_k = 21\n"),
                "assert.drift.top_k",
                "must be 1 to 20",
            ),
            (
                format!("{GATE}max_diverged = -1\n"),
                "assert.drift.max_diverged",
                "must be a count",
            ),
            (
                format!("{GATE}rule = \"close\"\n"),
                "rule",
                "unknown variant",
            ),
            (
                format!("{GATE}may_differ = [\"a.b\"]\n"),
                "assert.drift.may_differ",
                "not a comparability key field",
            ),
            (
                GATE.replace("baseline = \"baselines/g\"", "baseline = []"),
                "assert.drift.baseline",
                "needs a baseline",
            ),
        ] {
            let e = parse_str(&text).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(what), "{key}: {e}");
            assert!(e.contains("gates/g.toml:"), "{e}");
        }
    }
}
