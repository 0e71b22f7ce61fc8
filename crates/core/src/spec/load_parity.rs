//! `[load] parity` and `[assert.parity]`: cross-tool parity as a gate mode (docs/load.md "Cross-tool
//! parity"). Every sweep point runs twice on the same closed-form schedule: once through servegate's own
//! load client, once through the named tool (`"vllm-bench"`, `"aiperf"` or `"guidellm"`, the same runs as
//! `[load] driver`), and each `[assert.parity]` bound says how far the tool's percentile may lie from
//! servegate's client's (ms, or percent of servegate's figure):
//!
//! ```toml
//! [load]
//! concurrency = 2
//! requests = 12
//! parity = "aiperf"
//!
//! [assert.parity]          # |tool − servegate| at most: <metric>_p<NN>_ms in ms, _pct in % of servegate's
//! ttft_p50_ms = 5
//! tpot_p50_pct = 10
//! ```
//!
//! Verdicts `[c=2]::parity_ttft_p50`, judged by `judge::parity`.

use toml::Spanned;

use super::load::{Driver, LatencyMetric, LoadSpec, ParityBound, ParityLimit, RawLatency};
use super::load_driver::RawDriver;
use crate::error::SpecError;

impl super::Validator<'_> {
    /// `[load] parity`: the tool that runs each point beside servegate's own client, or None. Refused: a
    /// name that is not `vllm-bench`, `aiperf` or `guidellm`; `parity` with a `driver` other than
    /// servegate's client (parity compares servegate's client with the tool); what the tool cannot run
    /// (`duration_s`, vLLM's bench with constant arrivals: [`Self::tool_driver`]).
    pub(super) fn load_parity(
        &self,
        raw: Option<&Spanned<String>>,
        driver: &Driver,
        rd: &RawDriver<'_>,
    ) -> Result<Option<Driver>, SpecError> {
        let Some(p) = raw else {
            return Ok(None);
        };
        let name = p.get_ref().as_str();
        if !matches!(name, "vllm-bench" | "aiperf" | "guidellm") {
            return Err(self.err(
                p.span(),
                "load.parity",
                format!("must be \"vllm-bench\", \"aiperf\" or \"guidellm\" (the tool run beside servegate's client), got {name:?}"),
            ));
        }
        if *driver != Driver::Servegate {
            return Err(self.err(
                p.span(),
                "load.parity",
                format!(
                    "compares servegate's own client with {name:?} on the same schedule: leave `driver` out (it is {:?})",
                    driver.name()
                ),
            ));
        }
        self.tool_driver(name, rd, "parity").map(Some)
    }

    /// `[assert.parity]`: at least one bound, `<metric>_p<NN>_ms = ms` (at most that many ms apart) or
    /// `<metric>_p<NN>_pct = percent` (at most that percent of servegate's client's figure apart), metric
    /// ttft, itl, tpot or e2e, NN 50, 90, 95 or 99, a finite number >= 0; one bound per percentile; only
    /// with `[load] parity`, and `[load] parity` only with it. Empty when neither is given.
    pub(super) fn parity_bounds(
        &self,
        raw: Option<RawLatency>,
        spec: &LoadSpec,
    ) -> Result<Vec<ParityBound>, SpecError> {
        let Some(raw) = raw else {
            if spec.parity.is_some() {
                return Err(self.err(0..0, "load.parity", "runs every point through the tool as well: give [assert.parity] with the bounds the two may differ by (e.g. ttft_p50_ms = 5, tpot_p50_pct = 10)"));
            }
            return Ok(Vec::new());
        };
        if spec.parity.is_none() {
            return Err(self.err(0..0, "assert.parity", "compares servegate's client with another tool: name the tool in [load] parity = \"vllm-bench\", \"aiperf\" or \"guidellm\""));
        }
        if raw.is_empty() {
            return Err(self.err(0..0, "assert.parity", "declares no bound (keys like ttft_p50_ms = 5 or tpot_p50_pct = 10: how far the tool's percentile may lie from servegate's client's, in ms or percent of servegate's)"));
        }
        let mut bounds: Vec<ParityBound> = Vec::new();
        for (key, v) in raw {
            let full = format!("assert.parity.{key}");
            let (stem, pct) = match (key.strip_suffix("_ms"), key.strip_suffix("_pct")) {
                (Some(k), _) => (Some(k), false),
                (_, Some(k)) => (Some(k), true),
                _ => (None, false),
            };
            let parsed = stem
                .and_then(|k| k.rsplit_once("_p"))
                .and_then(|(m, p)| Some((LatencyMetric::from_name(m)?, p.parse::<u32>().ok()?)))
                .filter(|(_, p)| matches!(p, 50 | 90 | 95 | 99));
            let Some((metric, p)) = parsed else {
                return Err(self.err(v.span(), &full, format!("unknown parity bound `{key}`: keys are <metric>_p<NN>_ms (ms apart) or <metric>_p<NN>_pct (percent of servegate's figure) with metric ttft, itl, tpot or e2e and NN 50, 90, 95 or 99 (e.g. ttft_p50_ms)")));
            };
            let x = *v.get_ref();
            if !x.is_finite() || x < 0.0 {
                let unit = if pct {
                    "percent of servegate's client's figure"
                } else {
                    "ms"
                };
                return Err(self.err(
                    v.span(),
                    &full,
                    format!("must be a finite number >= 0 ({unit} the two figures may differ by), got {x}"),
                ));
            }
            if let Some(other) = bounds.iter().find(|b| b.metric == metric && b.p == p) {
                return Err(self.err(
                    v.span(),
                    &full,
                    format!(
                        "bounds {} p{p} again (`{}` does): give one bound per percentile",
                        metric.name(),
                        other.key
                    ),
                ));
            }
            bounds.push(ParityBound {
                key,
                metric,
                p,
                limit: if pct {
                    ParityLimit::Pct(x)
                } else {
                    ParityLimit::Ms(x)
                },
            });
        }
        Ok(bounds)
    }
}
