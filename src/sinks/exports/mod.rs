//! Dashboard exports (`servegate export`): servegate's figures in the formats benchmark dashboards that already
//! exist read — Bencher's BMF JSON ([`bmf`]), github-action-benchmark's `customBiggerIsBetter` /
//! `customSmallerIsBetter` JSON ([`gab`]), and OpenMetrics text for GitLab metrics reports ([`openmetrics`]).
//! docs/ci.md shows each in a workflow.
//!
//! Every format is a pure `serialize(&[Figure]) -> bytes` over one flat model, [`Figure`]: a figure with its
//! unit, its bounds where the source has a range (the record's `range`, or the min and max of the judged
//! values), the gate's bound, and the three-state verdict ([`Figure::state`]). A figure that is not a `pass`
//! or a `fail` (indeterminate, void, incomparable, skipped) is never charted as a pass: BMF carries it under a
//! separate measure named for its state, the github-action-benchmark files leave it out (with a note on
//! stderr), OpenMetrics labels every sample with its state.
//!
//! Sources: records (`data/records/*.json`, [`from_records`]) and the results of a run ([`from_results`]: the
//! results JSON, or a run directory re-judged by the binary).

pub mod bmf;
pub mod gab;
pub mod openmetrics;

use std::collections::BTreeMap;
use std::path::Path;

use crate::records::record::Record;
use crate::sinks::report::Results;

/// One figure as the dashboards get it.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The benchmark: a record's id, or a gate's name.
    pub benchmark: String,
    /// What was measured: a record's `metric.name` (`decode_rate`), or the assertion (`rate`, `first_token`).
    pub measure: String,
    /// Unit of `value`, `lower`, `upper` and `bound` (`tok/s`, `ms`, `s`).
    pub unit: String,
    /// The stated figure: a median (records and gates state only medians).
    pub value: f64,
    /// The lowest value the figure is over, where known.
    pub lower: Option<f64>,
    /// The highest, where known.
    pub upper: Option<f64>,
    /// The gate's bound (`floor_tok_s`, `limit_ms`), for a figure from a run.
    pub bound: Option<f64>,
    /// Higher is better (rates); lower is better otherwise (times).
    pub higher_is_better: bool,
    /// `pass`, `fail`, `indeterminate`, `void`, `incomparable` or `skipped` ([`TestOutcome::state`]).
    pub state: String,
    /// Values present of values planned (`6 of 6`), where known.
    pub n: Option<(usize, usize)>,
    /// Context shown beside the figure (model, engine, device, date, evidence), in key order.
    pub context: BTreeMap<String, String>,
}

impl Figure {
    /// True for a `pass` or a `fail`: a figure that can be charted as what it is. Anything else is not a
    /// decided result and is never charted as one.
    pub fn decided(&self) -> bool {
        self.state == "pass" || self.state == "fail"
    }

    /// `benchmark::measure`, the name one-series formats use.
    pub fn name(&self) -> String {
        format!("{}::{}", self.benchmark, self.measure)
    }

    /// `n 6 of 6; state pass; bound 15 tok/s; model ...`: the context in one line.
    pub(crate) fn extra(&self) -> String {
        let mut parts = vec![format!("state {}", self.state)];
        if let Some((n, of)) = self.n {
            parts.push(format!("n={n} of {of}"));
        }
        if let (Some(lo), Some(hi)) = (self.lower, self.upper) {
            parts.push(format!("range {lo} to {hi} {}", self.unit));
        }
        if let Some(b) = self.bound {
            let what = if self.higher_is_better {
                "floor"
            } else {
                "limit"
            };
            parts.push(format!("{what} {b} {}", self.unit));
        }
        for (k, v) in &self.context {
            parts.push(format!("{k} {v}"));
        }
        parts.join("; ")
    }
}

/// The state of a record: `fail` when it was forced from a failing or incomplete run (`source.forced`) or
/// its known answer failed, `indeterminate` when it is indicative (n < 3), else `pass`.
pub fn record_state(r: &Record) -> &'static str {
    if r.source.forced.is_some() || r.known_answer.result == "fail" {
        "fail"
    } else if r.indicative() {
        "indeterminate"
    } else {
        "pass"
    }
}

/// The footprint figures a record states (`footprint`, docs/records.md), as exported: measure (the registry's
/// name: `ready_ms`, `serve_rss_peak_mib`, `serve_cpu_ms_per_token`; `model_load_ms` for the load time the serve
/// logged), unit and value. A figure the record states as `null` (the evidence had none) is left out, never
/// exported as 0.
pub fn footprint_figures(r: &Record) -> Vec<(&'static str, &'static str, f64)> {
    use crate::vocab::Metric;
    let Some(f) = &r.footprint else {
        return Vec::new();
    };
    let unit = |m: Metric| m.info().unit.name();
    [
        (Metric::ReadyMs.name(), unit(Metric::ReadyMs), f.ready_ms),
        ("model_load_ms", unit(Metric::ReadyMs), f.model_load_ms),
        (
            Metric::ServeRssPeak.name(),
            unit(Metric::ServeRssPeak),
            f.rss_peak_mib,
        ),
        (
            Metric::ServeCpuPerToken.name(),
            unit(Metric::ServeCpuPerToken),
            f.cpu_ms_per_token,
        ),
    ]
    .into_iter()
    .filter_map(|(m, u, v)| v.map(|v| (m, u, v)))
    .collect()
}

/// One figure per record (its pair's other figure too, as `<id>::<metric>_theirs`), then the serve's footprint
/// figures the record states ([`footprint_figures`]: lower is better, one value per run, the record's
/// state), in the given order.
pub fn from_records(records: &[Record]) -> Vec<Figure> {
    let mut out = Vec::new();
    for r in records {
        let mut context = BTreeMap::new();
        context.insert("model".to_string(), r.model.name.clone());
        context.insert("engine".to_string(), r.settings.engine.clone());
        if let Some(v) = &r.settings.engine_version {
            context.insert("engine_version".to_string(), v.clone());
        }
        context.insert("device".to_string(), r.device.clone());
        context.insert("date".to_string(), r.date.clone());
        context.insert("model_sha256".to_string(), r.sha256_display());
        let state = record_state(r).to_string();
        out.push(Figure {
            benchmark: r.id.clone(),
            measure: r.metric.name.clone(),
            unit: r.metric.unit.clone(),
            value: r.value,
            lower: Some(r.range[0]),
            upper: Some(r.range[1]),
            bound: None,
            higher_is_better: r.higher_is_better(),
            state: state.clone(),
            n: Some((r.n as usize, r.n as usize)),
            context: context.clone(),
        });
        if let Some(p) = &r.pair {
            let mut c = context.clone();
            c.insert("engine".to_string(), p.other_engine.clone());
            c.remove("engine_version");
            c.insert("ratio".to_string(), format!("{}", p.ratio));
            out.push(Figure {
                benchmark: r.id.clone(),
                measure: format!("{}_other", r.metric.name),
                unit: r.metric.unit.clone(),
                value: p.other_value,
                lower: p.other_range.map(|x| x[0]),
                upper: p.other_range.map(|x| x[1]),
                bound: None,
                higher_is_better: r.higher_is_better(),
                state,
                n: Some((p.other_n as usize, p.other_n as usize)),
                context: c,
            });
        }
        for (measure, unit, value) in footprint_figures(r) {
            let mut c = context.clone();
            c.insert(
                "of".to_string(),
                if r.pair.is_some() {
                    "the serve, median over this side's arms".to_string()
                } else {
                    "the serve in the record's run".to_string()
                },
            );
            out.push(Figure {
                benchmark: r.id.clone(),
                measure: measure.to_string(),
                unit: unit.to_string(),
                value,
                lower: None,
                upper: None,
                bound: None,
                higher_is_better: false,
                state: record_state(r).to_string(),
                n: None,
                context: c,
            });
        }
    }
    out
}

/// One figure per judged assertion with a statistic (`rate`, `first_token`, ...) of every gate in `results`.
pub fn from_results(results: &Results) -> Vec<Figure> {
    let mut out = Vec::new();
    for g in &results.gates {
        let mut context = BTreeMap::new();
        if let Some(p) = &g.provenance {
            context.insert("evidence".to_string(), p.evidence_dir.clone());
            context.insert("model".to_string(), p.model.clone());
            if let Some(v) = &p.serve_version {
                context.insert("engine_version".to_string(), v.clone());
            }
            if let Some(s) = &p.model_sha256 {
                context.insert("model_sha256".to_string(), s.clone());
            }
            context.insert("started_utc".to_string(), p.started_utc.clone());
        }
        for t in &g.assertions {
            // A load trial (`[c=16]::ttft_p95`) states a percentile or an SLO attainment in `median`
            // (docs/results-json.md), not the median a figure here is: left out, as before it carried one.
            if crate::spec::load::load_trial(&t.name).is_some() {
                continue;
            }
            let (Some(value), Some(unit)) = (t.median, t.unit.clone()) else {
                continue;
            };
            // Which way is better is the results' own `metric` (the registry's entry, written by the run;
            // `Results::from_json` fills it for a `/1` file); an assertion with no metric states no figure.
            let Some(metric) = t.metric else {
                continue;
            };
            let present: Vec<f64> = t.values.iter().flatten().copied().collect();
            let lower = present.iter().copied().reduce(f64::min);
            let upper = present.iter().copied().reduce(f64::max);
            out.push(Figure {
                benchmark: g.name.clone(),
                measure: t.name.clone(),
                higher_is_better: metric.higher_is_better(),
                unit,
                value,
                lower,
                upper,
                bound: t.bound,
                state: t.outcome.state().to_string(),
                n: (!t.values.is_empty()).then_some((present.len(), t.values.len())),
                context: context.clone(),
            });
        }
    }
    out
}

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bencher Metric Format JSON.
    Bmf,
    /// github-action-benchmark `customBiggerIsBetter`.
    GabBigger,
    /// github-action-benchmark `customSmallerIsBetter`.
    GabSmaller,
    /// OpenMetrics text (GitLab metrics reports).
    OpenMetrics,
}

/// The file's bytes for `kind`, and the notes for stderr (figures left out, and why).
pub fn serialize(kind: Kind, figures: &[Figure]) -> (Vec<u8>, Vec<String>) {
    match kind {
        Kind::Bmf => (bmf::serialize(figures), Vec::new()),
        Kind::GabBigger => gab::serialize(figures, true),
        Kind::GabSmaller => gab::serialize(figures, false),
        Kind::OpenMetrics => (openmetrics::serialize(figures), Vec::new()),
    }
}

/// Why a source gives no figures: the exit code (5 unreadable, 3 records refused) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceError {
    /// `exit::EVIDENCE_ERROR` for a source that cannot be read or judged, `exit::SPEC_INVALID` for records
    /// `records check` refuses.
    pub code: i32,
    /// What to print after `error: `.
    pub message: String,
    /// Lines printed before it (each refused record's problems, `FILE: FIELD: MESSAGE`).
    pub detail: Vec<String>,
}

impl From<String> for SourceError {
    fn from(message: String) -> SourceError {
        SourceError {
            code: crate::error::exit::EVIDENCE_ERROR,
            message,
            detail: Vec::new(),
        }
    }
}

fn refused(r: crate::records::record::Refused) -> SourceError {
    SourceError {
        code: if r.files.is_empty() {
            crate::error::exit::EVIDENCE_ERROR
        } else {
            crate::error::exit::SPEC_INVALID
        },
        message: format!(
            "{}: nothing exported; an export carries only records that re-derive from their evidence (see \
             `servegate records check`)",
            r.summary()
        ),
        detail: r.lines,
    }
}

/// The figures of one source path. `judge_dir` re-judges a run directory into results (the binary's `judge`).
/// Records (a record directory, or one record file) are loaded as the leaderboard loads them
/// ([`crate::records::record::load_dir`], [`crate::records::record::load_file`]): only when every one is
/// valid and re-derives from its evidence.
pub fn figures_of(
    path: &Path,
    judge_dir: &dyn Fn(&Path) -> Result<Results, String>,
) -> Result<Vec<Figure>, SourceError> {
    if path.is_dir() {
        if path.join(crate::evidence::layout::RUN_FILE).is_file()
            || crate::evidence::is_pair_dir(path)
        {
            return Ok(judge_dir(path).map(|r| from_results(&r))?);
        }
        let records = crate::records::record::load_dir(path).map_err(refused)?;
        return Ok(from_records(&records));
    }
    let text = crate::io::input::read_to_string(path, crate::io::input::MAX_RECORD_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(crate::sinks::report::RESULTS_SCHEMA | crate::sinks::report::RESULTS_SCHEMA_V1) => {
            let r = Results::from_json(v).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(from_results(&r))
        }
        Some(s) if s.starts_with("servegate.record/") => {
            let r = crate::records::record::load_file(path).map_err(refused)?;
            Ok(from_records(&[r]))
        }
        other => Err(format!(
            "{}: not a record, a results JSON or a run directory (schema {other:?})",
            path.display()
        )
        .into()),
    }
}
