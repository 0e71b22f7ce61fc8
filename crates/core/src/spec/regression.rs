//! `[assert.regression]`: this run's per-request values of a metric against a baseline's, judged with a
//! distribution-free interval of the change (docs/regression.md). This module parses and validates the table;
//! the statistics are `analysis::regress`, the verdict `judge::regression`.
//!
//! ```toml
//! [assert.regression]
//! metric = "decode"                         # any registry metric with per-request values (docs/metrics.md)
//! baseline = "data/baselines/reference-smoke"    # stored: a baseline directory (or baselines = [...], one per machine kind)
//! # baseline_serve = { command = [...] }    # interleaved: the last good release's serve, A-B-B-A blocks
//! # (in a [pair] gate no baseline key: the pair's `theirs` arm is the baseline, `ours` the candidate)
//! # blocks = 6                              # interleaved: A-B-B-A blocks to run (default: the fewest that
//! #                                         # reach the confidence, 6 at 0.95)
//! max_drop_pct = 5.0                        # δ: the most the metric may worsen, percent
//! confidence = 0.95                         # of the equal-tailed interval (default 0.95)
//! max_load_ratio = 1.5                      # stored: host loads per CPU further apart than this (each
//! #                                         # counted as at least 1) are not compared (default 1.5)
//! on_incomparable = "fail"                  # stored: a baseline that no longer applies fails (default)
//! #                                         # or "skip"s the trial (spec::OnIncomparable)
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use super::{SpecError, Validator};
use crate::vocab::{Better, Metric};

/// The default confidence of a regression interval.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// The default `max_load_ratio` of a stored-baseline regression: a run and a baseline whose effective host
/// loads per CPU (`evidence::comparability::effective_load`: the 1-minute load average per CPU, at least 1)
/// are more than 1.5x apart are incomparable. Measured on the shared 2-core VM (reference gate, one serve
/// thread, 2026-12-01; docs/regression.md "Host load"): 44 tok/s at 0.8 per CPU and 8-12 at 7-9, a trend of
/// about load^-0.7 (fair share of a core would be load^-1); so a 1.5x load alone moves speed by 25-33 %,
/// inside the reference gate's 50 % margin, while the quiet and the loaded reference baselines (0.84 and 8.1
/// per CPU, counted as 1 and 8.1) are 8x apart. Between 0.8 and 4.5 per CPU the load average did not predict speed at all (19-49
/// tok/s either way: the 1-minute average lags a build that starts mid-run), so a tighter bound would only make quiet
/// runs incomparable at random. A gate with a smaller `max_drop_pct` should set it lower, at most
/// `1 / (1 − max_drop_pct / 100)` (fair share).
pub const DEFAULT_MAX_LOAD_RATIO: f64 = 1.5;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRegression {
    metric: Spanned<String>,
    #[serde(default)]
    baseline: Option<Spanned<String>>,
    #[serde(default)]
    baselines: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    baseline_serve: Option<RawBaselineServe>,
    max_drop_pct: Spanned<f64>,
    #[serde(default)]
    confidence: Option<Spanned<f64>>,
    #[serde(default)]
    blocks: Option<Spanned<i64>>,
    #[serde(default)]
    max_load_ratio: Option<Spanned<f64>>,
    #[serde(default)]
    on_incomparable: Option<Spanned<super::OnIncomparable>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBaselineServe {
    command: Spanned<Vec<String>>,
    #[serde(default)]
    runtime: String,
    #[serde(default)]
    env: BTreeMap<String, String>,
}

/// The baseline serve of an interleaved regression (one definition: `spec::interleave`, which turns the gate
/// into a pair of it and the gate's own serve).
pub use super::interleave::BaselineServe;

/// Where the baseline values come from.
#[derive(Debug, Clone, PartialEq)]
pub enum RegressionBaseline {
    /// Stored baselines (`baseline = "..."` or `baselines = [...]`): directories of `evidence::baseline`
    /// (`baseline.json` + window run directories), placeholders expanded. A relative path is looked up by
    /// the one path rule of stored baselines, `evidence::baseline::resolve` (the gate file's directory and
    /// its ancestors, then the current directory). The first comparable one is used.
    Stored(Vec<PathBuf>),
    /// An interleaved live baseline (`baseline_serve = { command = [...] }`): the gate runs as a pair
    /// (`spec::interleave::as_pair`) whose `theirs` arm is this serve.
    Serve(BaselineServe),
    /// A pair gate's `theirs` arm (no baseline key in a `[pair]` gate): interleaved, the arms' order is the
    /// gate's `pair.order`.
    PairArm,
}

impl RegressionBaseline {
    /// `stored` or `interleaved`, as verdicts and docs name the design.
    pub fn design(&self) -> &'static str {
        match self {
            RegressionBaseline::Stored(_) => "stored",
            RegressionBaseline::Serve(_) | RegressionBaseline::PairArm => "interleaved",
        }
    }
}

/// `[assert.regression]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct RegressionAssert {
    /// The metric compared (a registry metric with per-request values, higher or lower is better).
    pub metric: Metric,
    /// The metric's name as the gate wrote it (`decode`), used in the verdict line.
    pub label: String,
    /// The baseline.
    pub baseline: RegressionBaseline,
    /// δ, percent (> 0, < 100): the most the metric may worsen. A higher-is-better metric may fall to
    /// `(1 − δ/100)` of the baseline; a lower-is-better one may rise to `(1 + δ/100)` of it.
    pub max_drop_pct: f64,
    /// Confidence of the equal-tailed interval, in (0, 1); default [`DEFAULT_CONFIDENCE`].
    pub confidence: f64,
    /// A-B-B-A blocks an interleaved baseline serve runs (`blocks`; default
    /// [`blocks_needed`]`(confidence)`); unused by a stored baseline or a pair gate (whose
    /// `pair.order` says it).
    pub blocks: usize,
    /// A stored baseline's host-load bound (`max_load_ratio`, ≥ 1; default [`DEFAULT_MAX_LOAD_RATIO`]): a
    /// run whose effective load per CPU and the baseline's are further apart than this ratio is
    /// incomparable (`evidence::comparability::load_difference`). Unused by an interleaved baseline, whose
    /// arms share the host's load.
    pub max_load_ratio: f64,
    /// What a stored baseline that no longer applies does to the trial (`on_incomparable`; default fail).
    pub on_incomparable: super::OnIncomparable,
}

impl RegressionAssert {
    /// The threshold on the log ratio candidate / baseline: `ln(1 − δ)` for a higher-is-better metric,
    /// `ln(1 + δ)` for a lower-is-better one.
    pub fn log_threshold(&self) -> f64 {
        let d = self.max_drop_pct / 100.0;
        match self.metric.info().better {
            Better::Higher => (1.0 - d).ln(),
            Better::Lower | Better::Bounded => (1.0 + d).ln(),
        }
    }
}

/// The metric a regression's `metric` names: a registry wire name (`decode_rate`, `ttft`, ...) or the short
/// names a pair's ratio uses (`decode`, `first_token`).
pub fn metric_named(name: &str) -> Option<Metric> {
    match name {
        "decode" => Some(Metric::DecodeRate),
        "first_token" => Some(Metric::Ttft),
        other => Metric::from_name(other),
    }
}

/// The fewest paired blocks whose exact signed-rank interval reaches `confidence`: the smallest n with
/// `1 / 2^n ≤ (1 − confidence) / 2` (95 %: 6; `analysis::regress::paired_attainable`). The one definition:
/// it lives here because the spec needs it for the default `blocks` and may not import the analysis layer;
/// `analysis::regress` re-exports it (tests/pure/regression_sim.rs checks it is the fewest attainable).
pub fn blocks_needed(confidence: f64) -> usize {
    (1..=64usize)
        .find(|n| 0.5f64.powi(*n as i32) <= (1.0 - confidence) / 2.0 * (1.0 + 1e-12))
        .unwrap_or(64)
}

/// True when a reply has one value of the metric (`analysis::measure::metric_value` gives it): not ITL (many
/// gaps per reply), a pair's ratio, nor a load aggregate (one per sweep point).
pub fn per_request(m: Metric) -> bool {
    match m {
        Metric::Ttft
        | Metric::FirstContent
        | Metric::DecodeRate
        | Metric::ItlP90
        | Metric::Tpot
        | Metric::E2e
        | Metric::ServerDecodeRate
        | Metric::ServerPrefillRate => true,
        // Many gaps per reply, a pair's ratio, or one figure per load sweep point.
        Metric::Itl
        | Metric::PairRatio
        | Metric::OutputThroughput
        | Metric::RequestThroughput
        | Metric::Goodput
        | Metric::SloAttainment
        | Metric::PeakConcurrency
        | Metric::ScalingEfficiency => false,
        // One value per run (the serve's footprint).
        Metric::ReadyMs | Metric::ServeRssPeak | Metric::ServeCpuPerToken => false,
    }
}

impl Validator<'_> {
    /// `in_pair`: the gate has a `[pair]` table (then no baseline key is given: the `theirs` arm is it).
    pub(super) fn regression(
        &self,
        r: RawRegression,
        in_pair: bool,
    ) -> Result<RegressionAssert, SpecError> {
        let key = "assert.regression";
        let name = r.metric.get_ref().clone();
        let metric = self.regression_metric(&r, &name)?;
        let drop = self.positive(&r.max_drop_pct, &format!("{key}.max_drop_pct"), "%")?;
        if drop >= 100.0 {
            return Err(self.err(
                r.max_drop_pct.span(),
                &format!("{key}.max_drop_pct"),
                format!("must be below 100 (a percent of the baseline), got {drop}"),
            ));
        }
        let confidence = self.confidence(&r)?;
        let given = [
            r.baseline.is_some(),
            r.baselines.is_some(),
            r.baseline_serve.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if in_pair && given != 0 {
            return Err(self.err(
                0..0,
                key,
                "in a [pair] gate the baseline is the `theirs` arm and the candidate `ours`: give no baseline, baselines or baseline_serve",
            ));
        }
        let blocks = self.blocks(&r, confidence)?;
        let max_load_ratio = self.max_load_ratio(&r, in_pair)?;
        let on_incomparable = self.on_incomparable(&r, in_pair)?;
        if in_pair && metric.per_run() {
            return Err(self.err(
                r.metric.span(),
                &format!("{key}.metric"),
                format!("{name} is one value per run (the serve's footprint): a [pair] gate's regression compares per-request values of its arms; compare it with stored baselines in a plain gate"),
            ));
        }
        if in_pair {
            return Ok(RegressionAssert {
                on_incomparable,
                metric,
                label: name,
                baseline: RegressionBaseline::PairArm,
                max_drop_pct: drop,
                confidence,
                blocks,
                max_load_ratio,
            });
        }
        if metric.per_run() && r.baseline_serve.is_some() {
            return Err(self.err(
                r.metric.span(),
                &format!("{key}.metric"),
                format!("{name} is one value per run (the serve's footprint): it is compared with stored baselines (baseline = \"DIR\" or baselines = [...]), one value per window; an interleaved baseline_serve has none"),
            ));
        }
        if given != 1 {
            return Err(self.err(
                0..0,
                key,
                "needs exactly one of baseline = \"DIR\", baselines = [\"DIR\", ...] (stored) or baseline_serve = { command = [...] } (interleaved)",
            ));
        }
        let baseline = self.baseline(r)?;
        Ok(RegressionAssert {
            on_incomparable,
            metric,
            label: name,
            baseline,
            max_drop_pct: drop,
            confidence,
            blocks,
            max_load_ratio,
        })
    }

    /// `metric`: one with per-request values and a direction (not a bounded figure).
    fn regression_metric(&self, r: &RawRegression, name: &str) -> Result<Metric, SpecError> {
        let key = "assert.regression";
        let usable =
            |m: Metric| (per_request(m) || m.per_run()) && m.info().better != Better::Bounded;
        Ok(match metric_named(name) {
            Some(m) if usable(m) => m,
            _ => {
                let known: Vec<&str> = Metric::ALL
                    .iter()
                    .filter(|m| usable(**m))
                    .map(|m| m.name())
                    .collect();
                return Err(self.err(
                    r.metric.span(),
                    &format!("{key}.metric"),
                    format!(
                        "{name:?} is not a metric with per-request or per-run values (one of: decode, first_token, {})",
                        known.join(", ")
                    ),
                ));
            }
        })
    }

    /// `confidence`: above 0.5 and below 1 (default [`DEFAULT_CONFIDENCE`]).
    fn confidence(&self, r: &RawRegression) -> Result<f64, SpecError> {
        let key = "assert.regression";
        Ok(match &r.confidence {
            None => DEFAULT_CONFIDENCE,
            Some(c) => {
                let x = *c.get_ref();
                if !(x.is_finite() && x > 0.5 && x < 1.0) {
                    return Err(self.err(
                        c.span(),
                        &format!("{key}.confidence"),
                        format!("must be above 0.5 and below 1 (e.g. 0.95), got {x}"),
                    ));
                }
                x
            }
        })
    }

    /// `blocks`: an interleaved baseline serve's A-B-B-A blocks, 1 to 64 and enough to decide at `confidence`
    /// (default the fewest that can).
    fn blocks(&self, r: &RawRegression, confidence: f64) -> Result<usize, SpecError> {
        let key = "assert.regression";
        Ok(match &r.blocks {
            None => blocks_needed(confidence),
            Some(b) => {
                let n = *b.get_ref();
                if r.baseline_serve.is_none() {
                    return Err(self.err(
                        b.span(),
                        &format!("{key}.blocks"),
                        "only an interleaved baseline_serve runs blocks (a pair gate's order is pair.order)",
                    ));
                }
                if !(1..=64).contains(&n) {
                    return Err(self.err(
                        b.span(),
                        &format!("{key}.blocks"),
                        format!("must be 1 to 64 A-B-B-A blocks, got {n}"),
                    ));
                }
                let fewest = blocks_needed(confidence);
                if (n as usize) < fewest {
                    return Err(self.err(
                        b.span(),
                        &format!("{key}.blocks"),
                        format!("{n} blocks can never decide at confidence {confidence}: the exact test needs at least {fewest} (fewer leave every verdict INDETERMINATE whatever the serves do)"),
                    ));
                }
                n as usize
            }
        })
    }

    /// `max_load_ratio`: a stored baseline's host-load bound, at least 1 (default [`DEFAULT_MAX_LOAD_RATIO`]).
    fn max_load_ratio(&self, r: &RawRegression, in_pair: bool) -> Result<f64, SpecError> {
        let key = "assert.regression";
        Ok(match &r.max_load_ratio {
            None => DEFAULT_MAX_LOAD_RATIO,
            Some(m) => {
                let x = *m.get_ref();
                if in_pair || r.baseline_serve.is_some() {
                    return Err(self.err(
                        m.span(),
                        &format!("{key}.max_load_ratio"),
                        "only a stored baseline compares host load (an interleaved baseline's arms share the host)",
                    ));
                }
                if !(x.is_finite() && x >= 1.0) {
                    return Err(self.err(
                        m.span(),
                        &format!("{key}.max_load_ratio"),
                        format!("must be a ratio of at least 1 (e.g. 1.5), got {x}"),
                    ));
                }
                x
            }
        })
    }

    /// `on_incomparable`: a stored baseline's (default `fail`).
    fn on_incomparable(
        &self,
        r: &RawRegression,
        in_pair: bool,
    ) -> Result<super::OnIncomparable, SpecError> {
        let key = "assert.regression";
        Ok(match &r.on_incomparable {
            None => super::OnIncomparable::Fail,
            Some(o) if in_pair || r.baseline_serve.is_some() => {
                return Err(self.err(
                    o.span(),
                    &format!("{key}.on_incomparable"),
                    "only a stored baseline can stop applying (an interleaved baseline serve runs beside this one)",
                ))
            }
            Some(o) => *o.get_ref(),
        })
    }

    /// The one baseline given: an interleaved `baseline_serve` (its command expanded) or stored directories.
    fn baseline(&self, r: RawRegression) -> Result<RegressionBaseline, SpecError> {
        let key = "assert.regression";
        Ok(if let Some(s) = r.baseline_serve {
            let k = format!("{key}.baseline_serve.command");
            self.argv(s.command.get_ref(), s.command.span(), &k)?;
            let mut command = Vec::new();
            for w in s.command.get_ref() {
                command.push(self.expand(w, s.command.span(), &k, true)?);
            }
            RegressionBaseline::Serve(BaselineServe {
                command,
                runtime: s.runtime,
                env: s.env,
            })
        } else {
            let (dirs, span, k) = match (&r.baseline, &r.baselines) {
                (Some(b), _) => (
                    vec![b.get_ref().clone()],
                    b.span(),
                    format!("{key}.baseline"),
                ),
                (None, Some(b)) => (b.get_ref().clone(), b.span(), format!("{key}.baselines")),
                (None, None) => unreachable!("one of the three is given"),
            };
            if dirs.is_empty() || dirs.iter().any(|d| d.trim().is_empty()) {
                return Err(self.err(span, &k, "must name baseline directories (not empty)"));
            }
            let mut out = Vec::new();
            for d in &dirs {
                out.push(PathBuf::from(self.expand(d, span.clone(), &k, false)?));
            }
            RegressionBaseline::Stored(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{parse, Context, GateSpec};
    use std::path::Path;

    const HEAD: &str = r#"
[gate]
name = "smoke"
[serve]
command = ["srv", "-m", "/m.gguf", "--port", "{port}"]
[request]
model = "/m.gguf"
max_tokens = 16
prompts = ["What is the capital of France?"]
"#;

    fn parse_with(table: &str) -> Result<GateSpec, crate::error::SpecError> {
        let ctx = Context {
            gate_dir: PathBuf::from("/g"),
            cache: PathBuf::from("/c"),
            home: None,
        };
        parse(
            Path::new("gates/t.toml"),
            &format!("{HEAD}[assert.regression]\n{table}"),
            &ctx,
        )
    }

    #[test]
    fn a_stored_and_an_interleaved_regression_parse_with_their_defaults() {
        let g = parse_with(
            "metric = \"decode\"\nbaseline = \"{gate_dir}/../baselines/smoke\"\nmax_drop_pct = 5.0\n",
        )
        .unwrap();
        let r = g.assertions.regression.unwrap();
        assert_eq!(r.metric, Metric::DecodeRate);
        assert_eq!(r.label, "decode");
        assert_eq!(r.confidence, DEFAULT_CONFIDENCE);
        assert_eq!(
            r.baseline,
            RegressionBaseline::Stored(vec![PathBuf::from("/g/../baselines/smoke")])
        );
        assert!((r.log_threshold() - 0.95f64.ln()).abs() < 1e-12);
        assert_eq!(r.max_load_ratio, DEFAULT_MAX_LOAD_RATIO);
        let g = parse_with(
            "metric = \"decode\"\nbaseline = \"b\"\nmax_drop_pct = 5.0\nmax_load_ratio = 1.05\n",
        )
        .unwrap();
        assert_eq!(g.assertions.regression.unwrap().max_load_ratio, 1.05);
        let g = parse_with(
            "metric = \"ttft\"\nbaseline_serve = { command = [\"old-srv\", \"-m\", \"/m.gguf\", \"--port\", \"{port}\"] }\nmax_drop_pct = 10.0\nconfidence = 0.99\n",
        )
        .unwrap();
        let r = g.assertions.regression.clone().unwrap();
        assert_eq!(r.baseline.design(), "interleaved");
        assert!((r.log_threshold() - 1.1f64.ln()).abs() < 1e-12);
        assert_eq!(g.assertions.names(), vec!["regression"]);
    }

    #[test]
    fn a_baseline_serve_runs_the_gate_as_a_pair_of_abba_blocks() {
        let ctx = Context {
            gate_dir: PathBuf::from("/g"),
            cache: PathBuf::from("/c"),
            home: None,
        };
        // The candidate's [serve] command must load the model file too.
        let text = format!("{}[assert.regression]\nmetric = \"decode\"\nbaseline_serve = {{ command = [\"old-srv\", \"-m\", \"/m.gguf\"] }}\nmax_drop_pct = 10.0\n", HEAD.replace("\"-m\", \"/m.gguf\", ", ""));
        let e = parse(Path::new("gates/t.toml"), &text, &ctx)
            .unwrap_err()
            .to_string();
        assert!(e.contains("assert.regression.baseline_serve"), "{e}");
        assert!(
            e.contains("serve.command does not pass the model file"),
            "{e}"
        );
        let head = HEAD;
        let text = format!("{head}[assert.regression]\nmetric = \"decode\"\nbaseline_serve = {{ command = [\"old-srv\", \"-m\", \"/m.gguf\", \"--port\", \"{{port}}\"], runtime = \"v1.0\" }}\nmax_drop_pct = 10.0\n");
        let g = parse(Path::new("gates/t.toml"), &text, &ctx).unwrap();
        let p = g.pair.as_ref().expect("runs as a pair");
        assert_eq!(p.order, crate::spec::interleave::abba_order(6));
        assert_eq!(p.theirs.command[0], "old-srv");
        assert_eq!(p.theirs.runtime, "v1.0");
        assert_eq!(p.ours.command[0], "srv");
        assert_eq!(g.serve.mode, crate::spec::ServeMode::Command(Vec::new()));
        assert_eq!(g.assertions.regression.as_ref().unwrap().blocks, 6);
        let g = parse(
            Path::new("gates/t.toml"),
            &text.replace("max_drop_pct", "blocks = 8\nmax_drop_pct"),
            &ctx,
        )
        .unwrap();
        assert_eq!(g.pair.unwrap().order.len(), 32);
        // Assertions on one serve's figures are not judged when the gate runs as a pair.
        let e = parse(
            Path::new("gates/t.toml"),
            &format!("{text}[assert.rate]\nfloor_tok_s = 5.0\n"),
            &ctx,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("assert.rate"), "{e}");
    }

    #[test]
    fn in_a_pair_gate_the_theirs_arm_is_the_baseline() {
        let ctx = Context {
            gate_dir: PathBuf::from("/g"),
            cache: PathBuf::from("/c"),
            home: None,
        };
        let pair = r#"
[gate]
name = "p"
[serve]
ready = "/health"
[pair.ours]
command = ["new", "-m", "/m.gguf", "--port", "{port}"]
[pair.theirs]
command = ["old", "-m", "/m.gguf", "--port", "{port}"]
[request]
model = "/m.gguf"
max_tokens = 16
temperature = 0
top_k = 1
prompts = ["Hi"]
[assert.regression]
metric = "decode"
max_drop_pct = 20.0
"#;
        let g = parse(Path::new("gates/p.toml"), pair, &ctx).unwrap();
        let e = parse(
            Path::new("gates/p.toml"),
            &pair.replace(
                "[pair.ours]",
                "[pair]\norder = [\"theirs\", \"ours\"]\n[pair.ours]",
            ),
            &ctx,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("pair.order") && e.contains("A-B-B-A"), "{e}");
        let r = g.assertions.regression.unwrap();
        assert_eq!(r.baseline, RegressionBaseline::PairArm);
        assert_eq!(r.baseline.design(), "interleaved");
        for extra in [
            "baseline = \"b\"\n",
            "baseline_serve = { command = [\"x\"] }\n",
        ] {
            let e = parse(Path::new("gates/p.toml"), &format!("{pair}{extra}"), &ctx)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("assert.regression") && e.contains("theirs"),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_regression_tables_name_the_key() {
        for (table, key) in [
            ("metric = \"itl\"\nbaseline = \"b\"\nmax_drop_pct = 5.0\n", "assert.regression.metric"),
            ("metric = \"speed\"\nbaseline = \"b\"\nmax_drop_pct = 5.0\n", "assert.regression.metric"),
            ("metric = \"decode\"\nbaseline = \"b\"\nmax_drop_pct = 100.0\n", "assert.regression.max_drop_pct"),
            ("metric = \"decode\"\nbaseline = \"b\"\nmax_drop_pct = 5.0\nconfidence = 1.0\n", "assert.regression.confidence"),
            ("metric = \"decode\"\nmax_drop_pct = 5.0\n", "assert.regression"),
            ("metric = \"decode\"\nbaseline = \"b\"\nbaseline_serve = { command = [\"x\"] }\nmax_drop_pct = 5.0\n", "assert.regression"),
            ("metric = \"decode\"\nbaselines = []\nmax_drop_pct = 5.0\n", "assert.regression.baselines"),
            ("metric = \"decode\"\nbaseline = \"b\"\nblocks = 6\nmax_drop_pct = 5.0\n", "assert.regression.blocks"),
            ("metric = \"decode\"\nbaseline_serve = { command = [] }\nmax_drop_pct = 5.0\n", "assert.regression.baseline_serve.command"),
            ("metric = \"decode\"\nbaseline = \"b\"\nmax_drop_pct = 5.0\nmax_load_ratio = 0.5\n", "assert.regression.max_load_ratio"),
            ("metric = \"decode\"\nbaseline = \"b\"\nmax_drop_pct = 5.0\nmax_load_ratio = \"x\"\n", "max_load_ratio"),
            ("metric = \"decode\"\nbaseline_serve = { command = [\"x\", \"-m\", \"/m.gguf\", \"--port\", \"{port}\"] }\nmax_drop_pct = 5.0\nmax_load_ratio = 2.0\n", "assert.regression.max_load_ratio"),
        ] {
            let e = parse_with(table).unwrap_err().to_string();
            assert!(e.contains(key), "{table}: {e}");
            assert!(e.contains("gates/t.toml:"), "{table}: {e}");
        }
    }
}
