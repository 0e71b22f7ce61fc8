//! Blessing the serve's footprint limits: `[assert.ready] limit_ms`, `[assert.memory] limit_mib` and
//! `[assert.cpu] limit_ms_per_token` derived from runs by a stated rule ([`derive_footprint_limit`]: the largest value
//! over the runs plus a headroom, rounded up), each edited in place with its provenance above it
//! ([`super::floor::edit_value`]), planned as one change ([`plan_limits`]). The figures are the footprint
//! trials' own (`analysis::footprint::run_value`): one value per run, so a limit comes from every run given,
//! and a run without the figure (a `url` serve, evidence written before servegate measured it) is refused
//! with its reason, never read as 0.

use super::*;
use crate::analysis::footprint;

/// Default headroom of a derived footprint limit: 25 % above the largest value blessed. A start-up time, a
/// peak memory and a CPU share move with the machine's load between runs (the reference serve's CPU per
/// token moved 2 % across four runs whose wall time moved 2.6x; its start-up far more): a limit equal to
/// today's worst goes red at the next busy run.
pub const DEFAULT_LIMIT_HEADROOM_PCT: f64 = 25.0;

/// The footprint limits a gate may declare: trial, gate table, key, metric.
const LIMITS: [(AssertionKind, &str, &str, Metric); 3] = [
    (AssertionKind::Ready, "ready", "limit_ms", Metric::ReadyMs),
    (
        AssertionKind::Memory,
        "memory",
        "limit_mib",
        Metric::ServeRssPeak,
    ),
    (
        AssertionKind::Cpu,
        "cpu",
        "limit_ms_per_token",
        Metric::ServeCpuPerToken,
    ),
];

/// A footprint limit derived from evidence, with what its provenance comment states.
#[derive(Debug, Clone, PartialEq)]
pub struct FootprintLimit {
    /// `[assert.TABLE]`: `ready`, `memory` or `cpu`.
    pub table: &'static str,
    /// Its key: `limit_ms`, `limit_mib`, `limit_ms_per_token`.
    pub key: &'static str,
    /// The metric (its unit and decimals).
    pub metric: Metric,
    /// The limit, in the metric's unit, rounded up to its decimals.
    pub limit: f64,
    /// Each run's value, in the order the runs were given.
    pub values: Vec<f64>,
    /// The rule, in words, with its numbers.
    pub rule: String,
}

fn ceil_to(x: f64, decimals: usize) -> f64 {
    let p = 10f64.powi(decimals as i32);
    (x * p).ceil() / p
}

/// Derives a footprint limit from one value per run: the largest value plus `headroom_pct` percent, rounded
/// up to the metric's decimals (at least one unit of the last decimal: a limit is > 0). Errors: no value, a
/// value that is not a finite non-negative number, a headroom outside 0..1000.
pub(crate) fn derive_footprint_limit(
    metric: Metric,
    values: &[f64],
    headroom_pct: f64,
) -> Result<(f64, String), String> {
    if !(0.0..1000.0).contains(&headroom_pct) {
        return Err(format!("headroom {headroom_pct} % is not in 0..1000"));
    }
    if let Some(bad) = values.iter().find(|v| !v.is_finite() || **v < 0.0) {
        return Err(format!("{bad} is not a figure"));
    }
    let max = values
        .iter()
        .copied()
        .reduce(f64::max)
        .ok_or("no run gave the figure")?;
    let info = metric.info();
    let d = info.decimals;
    let unit = info.unit.name();
    let limit = ceil_to(max * (1.0 + headroom_pct / 100.0), d).max(10f64.powi(-(d as i32)));
    let runs = values.len();
    let rule = format!(
        "largest of {runs} run{} {max:.d$} {unit} plus {headroom_pct} % headroom, rounded up",
        if runs == 1 { "" } else { "s" }
    );
    Ok((limit, rule))
}

/// True when `first` and `second` are a provenance comment servegate wrote above a derived limit
/// ([`limit_provenance`]); any other comment is a person's and is kept.
pub(crate) fn is_limit_provenance(first: &str, second: &str) -> bool {
    static FIRST: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^# servegate bless [0-9]{4}-[0-9]{2}-[0-9]{2}: limit [0-9]+(\.[0-9]+)? \S+ from .+ \(values .+\)$",
        )
        .expect("a valid regex")
    });
    static SECOND: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^# servegate bless rule: largest of [0-9]+ runs? [0-9.]+ \S+ plus [0-9.]+ % headroom, rounded up$",
        )
        .expect("a valid regex")
    });
    super::floor::comment_pair_matches(&FIRST, &SECOND, first, second)
}

/// The provenance comment of a derived limit: `# servegate bless DATE: limit L UNIT from RUNS (values ...)`
/// and `# servegate bless rule: ...`, each on one line whatever the paths hold.
pub(crate) fn limit_provenance(d: &FootprintLimit, runs: &[String], utc: &str) -> String {
    let info = d.metric.info();
    let (dec, unit) = (info.decimals, info.unit.name());
    let date = utc.get(..10).unwrap_or(utc);
    let runs: Vec<String> = runs.iter().map(|r| one_line(r)).collect();
    let values: Vec<String> = d.values.iter().map(|v| format!("{v:.dec$}")).collect();
    format!(
        "{PROVENANCE_MARK} {date}: limit {:.dec$} {unit} from {} (values {} {unit})\n{PROVENANCE_MARK} rule: {}",
        d.limit,
        runs.join(", "),
        values.join(", "),
        d.rule
    )
}

/// What `bless --limits` would write (or wrote).
#[derive(Debug, Clone, PartialEq)]
pub struct LimitsPlan {
    /// The gate file's text now.
    pub old: String,
    /// Its text with the new limits.
    pub new: String,
    /// One derivation per footprint limit the gate declares, in the order ready, memory, cpu.
    pub derivations: Vec<FootprintLimit>,
    /// One ledger line per limit.
    pub ledger: Vec<LedgerEntry>,
}

/// Plans `bless GATE --limits RUN [--limits RUN ...]`: checks every run (as a floor's run is checked:
/// [`refusals`], the footprint limits set aside), reads each footprint figure the gate declares a limit on
/// from every run, derives each limit ([`derive_footprint_limit`]) and edits the text. Writes nothing. Refused: a gate
/// with no footprint limit (exit 3), no run (exit 2), a run that is not good evidence or lacks a figure
/// (exit 1, each run and reason named).
pub fn plan_limits(
    gate_file: &Path,
    runs: &[PathBuf],
    headroom_pct: f64,
    utc: &str,
) -> Result<LimitsPlan, BlessError> {
    let gate = load_gate(gate_file)?;
    let declared: Vec<_> = LIMITS
        .iter()
        .filter(|(k, _, _, _)| gate.assertions.declares(*k))
        .collect();
    if declared.is_empty() {
        return Err(BlessError::new(
            exit::SPEC_INVALID,
            format!(
                "{} declares no [assert.ready], [assert.memory] or [assert.cpu]: no limit to derive",
                gate_file.display()
            ),
        ));
    }
    if runs.is_empty() {
        return Err(BlessError::new(exit::USAGE, "bless --limits needs a run"));
    }
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); declared.len()];
    let mut missing = Vec::new();
    for run in runs {
        let RunToBless {
            gate: rg,
            ev,
            inputs,
        } = load_run(run)?;
        same_gate(&gate, &rg, run)?;
        refused(run, refusals(&rg, &ev, &inputs, true))?;
        for (i, (_, table, key, metric)) in declared.iter().enumerate() {
            match footprint::run_value(&ev, *metric) {
                Ok(v) => values[i].push(v),
                Err(why) => missing.push(format!(
                    "[assert.{table}] {key}: {}: {}",
                    run.display(),
                    one_line(&why)
                )),
            }
        }
    }
    if !missing.is_empty() {
        return Err(BlessError::new(
            exit::ASSERTION_FAILED,
            format!("no limit derived: {}", missing.join("; ")),
        ));
    }
    let old =
        crate::io::input::read_to_string(gate_file, crate::spec::MAX_GATE_BYTES).map_err(|e| {
            BlessError::new(exit::SPEC_INVALID, format!("{}: {e}", gate_file.display()))
        })?;
    let run_names: Vec<String> = runs.iter().map(|r| r.display().to_string()).collect();
    let mut new = old.clone();
    let (mut derivations, mut ledger) = (Vec::new(), Vec::new());
    for ((_, table, key, metric), vals) in declared.iter().zip(values) {
        let (limit, rule) = derive_footprint_limit(*metric, &vals, headroom_pct).map_err(|e| {
            BlessError::new(
                exit::ASSERTION_FAILED,
                format!("no limit derived for [assert.{table}] {key}: {e}"),
            )
        })?;
        let d = FootprintLimit {
            table,
            key,
            metric: *metric,
            limit,
            values: vals,
            rule,
        };
        let prov = limit_provenance(&d, &run_names, utc);
        let (edited, previous) = edit_value(
            &new,
            (table, key, "limit"),
            limit,
            &prov,
            is_limit_provenance,
        )
        .map_err(|e| {
            BlessError::new(exit::SPEC_INVALID, format!("{}: {e}", gate_file.display()))
        })?;
        new = edited;
        ledger.push(LedgerEntry {
            utc: utc.to_string(),
            gate: gate.name.clone(),
            gate_file: gate_file.display().to_string(),
            action: format!("limit {table}.{key}"),
            run: run_names.join(", "),
            slow_run: None,
            n: d.values.len(),
            median: crate::analysis::stats::median(&d.values),
            rule: d.rule.clone(),
            value: Some(limit),
            previous,
            window: None,
        });
        derivations.push(d);
    }
    // The edited file is still this gate with the new limits, or nothing is written.
    let reread =
        spec::parse(gate_file, &new, &spec::Context::for_file(gate_file)).map_err(|e| {
            BlessError::new(
                exit::SPEC_INVALID,
                format!(
                    "{}: the edited gate would not load ({e}): not written",
                    gate_file.display()
                ),
            )
        })?;
    let a = &reread.assertions;
    for d in &derivations {
        let back = match d.table {
            "ready" => a.ready.as_ref().map(|r| r.limit_ms),
            "memory" => a.memory.as_ref().map(|m| m.limit_mib),
            _ => a.cpu.as_ref().map(|c| c.limit_ms_per_token),
        };
        if back != Some(d.limit) || reread.name != gate.name {
            return Err(BlessError::new(
                exit::SPEC_INVALID,
                format!(
                    "{}: the edited gate does not read back [assert.{}] {} = {}: not written",
                    gate_file.display(),
                    d.table,
                    d.key,
                    d.limit
                ),
            ));
        }
    }
    Ok(LimitsPlan {
        old,
        new,
        derivations,
        ledger,
    })
}
