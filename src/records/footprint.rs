//! A record's `footprint` ([`RecordFootprint`]): the serve's start-up time, peak memory, CPU per token and
//! logged model-load time of the run the record cites, each from `analysis::footprint` (the definitions the
//! footprint trials judge, docs/metrics.md "The serve's footprint"), so `records check` re-derives them
//! from the same evidence as the record's figure ([`difference`]). A figure the evidence does not hold is
//! `null` with the reason in `unavailable`, never 0; the leaderboard shows it as `–` with that reason.

use super::schema::{round_to, Record, RecordFootprint};
use crate::analysis::footprint as fp;
use crate::analysis::{stats, Evidence};
use crate::spec::GateSpec;
use crate::vocab::Metric;

/// The figures of a record's footprint: its key, the registry metric whose record decimals it is stated to
/// (the logged model-load time takes `ready_ms`'s), and its title on the pages.
pub(crate) const FIGURES: [(&str, Metric, &str); 4] = [
    ("ready_ms", Metric::ReadyMs, "ready (ms)"),
    ("model_load_ms", Metric::ReadyMs, "model load, logged (ms)"),
    ("rss_peak_mib", Metric::ServeRssPeak, "peak memory (MiB)"),
    (
        "cpu_ms_per_token",
        Metric::ServeCpuPerToken,
        "CPU per token (ms)",
    ),
];

/// The value of figure `key` of `f` (None for an unknown key).
pub(crate) fn figure(f: &RecordFootprint, key: &str) -> Option<f64> {
    match key {
        "ready_ms" => f.ready_ms,
        "model_load_ms" => f.model_load_ms,
        "rss_peak_mib" => f.rss_peak_mib,
        "cpu_ms_per_token" => f.cpu_ms_per_token,
        _ => None,
    }
}

fn set(f: &mut RecordFootprint, key: &str, v: Option<f64>) {
    match key {
        "ready_ms" => f.ready_ms = v,
        "model_load_ms" => f.model_load_ms = v,
        "rss_peak_mib" => f.rss_peak_mib = v,
        "cpu_ms_per_token" => f.cpu_ms_per_token = v,
        _ => {}
    }
}

/// Figure `key` of one run, unrounded, or why it has none.
fn run_figure(gate: &GateSpec, ev: &Evidence, key: &str) -> Result<f64, String> {
    match key {
        "model_load_ms" => fp::model_load_ms(
            ev,
            gate.assertions
                .ready
                .as_ref()
                .and_then(|r| r.load_log.as_ref()),
        ),
        "ready_ms" => fp::run_value(ev, Metric::ReadyMs),
        "rss_peak_mib" => fp::run_value(ev, Metric::ServeRssPeak),
        "cpu_ms_per_token" => fp::run_value(ev, Metric::ServeCpuPerToken),
        other => Err(format!("{other} is not a footprint figure")),
    }
}

/// The footprint of one run (a single or load record's evidence), each figure at its record decimals.
pub(super) fn of_run(gate: &GateSpec, ev: &Evidence) -> RecordFootprint {
    of_arms(gate, &[(0, ev)])
}

/// The footprint of the runs `evs` (a pair record: the arms of its side, each a serve of its own): each
/// figure the median over the runs, at its record decimals; null when a run lacks it, with the first such
/// run's reason (`arm K: ...`, K as `pair.json` numbers the arm, when the runs are arms: K > 0).
pub(super) fn of_arms(gate: &GateSpec, evs: &[(u32, &Evidence)]) -> RecordFootprint {
    let mut out = RecordFootprint::default();
    for (key, metric, _) in FIGURES {
        let mut values = Vec::new();
        let mut why = None;
        for &(arm, ev) in evs {
            match run_figure(gate, ev, key) {
                Ok(v) => values.push(v),
                Err(e) => {
                    why = Some(if arm > 0 {
                        format!("arm {arm}: {e}")
                    } else {
                        e
                    });
                    break;
                }
            }
        }
        match (why, stats::median(&values)) {
            (None, Some(m)) => set(
                &mut out,
                key,
                Some(round_to(m, metric.info().record_decimals)),
            ),
            (why, _) => {
                out.unavailable.insert(
                    key.to_string(),
                    why.unwrap_or_else(|| "no run to read it from".into()),
                );
            }
        }
    }
    out
}

/// The first footprint figure where `r` (as stated) and `want` (re-derived) differ: (field, stated,
/// derived), each at its record decimals, `null` for none. A record that states no footprint (published, or
/// written before records carried it) is not compared; one that states it must state what the evidence gives.
pub(super) fn difference(r: &Record, want: &Record) -> Option<(String, String, String)> {
    let stated = r.footprint.as_ref()?;
    let empty = RecordFootprint::default();
    let derived = want.footprint.as_ref().unwrap_or(&empty);
    let show = |v: Option<f64>, m: Metric| match v {
        Some(v) => format!("{v:.*}", m.info().record_decimals as usize),
        None => "null".into(),
    };
    FIGURES.iter().find_map(|&(key, m, _)| {
        let (a, b) = (show(figure(stated, key), m), show(figure(derived, key), m));
        (a != b).then(|| (format!("footprint.{key}"), a, b))
    })
}

/// The checks of a stated footprint: every figure finite and non-negative; a `null` figure says why in
/// `unavailable`, a stated one does not; `unavailable` names only the four figures.
pub(super) fn validate(r: &Record, bad: &mut dyn FnMut(&str, String)) {
    let Some(f) = &r.footprint else { return };
    for (key, _, _) in FIGURES {
        match (figure(f, key), f.unavailable.get(key)) {
            (Some(v), _) if !v.is_finite() || v < 0.0 => {
                bad(&format!("footprint.{key}"), format!("{v} is not a finite non-negative figure"))
            }
            (Some(_), Some(_)) => bad(
                &format!("footprint.unavailable.{key}"),
                "states why the figure is unavailable, but the figure is stated".into(),
            ),
            (None, None) => bad(
                &format!("footprint.{key}"),
                "null without a reason in footprint.unavailable (a missing figure says why, never 0)".into(),
            ),
            (None, Some(why)) if why.trim().is_empty() => bad(
                &format!("footprint.unavailable.{key}"),
                "empty: a missing figure says why".into(),
            ),
            _ => {}
        }
    }
    for key in f.unavailable.keys() {
        if !FIGURES.iter().any(|(k, _, _)| k == key) {
            bad(
                &format!("footprint.unavailable.{key}"),
                "not a footprint figure (ready_ms, model_load_ms, rss_peak_mib, cpu_ms_per_token)"
                    .into(),
            );
        }
    }
}

/// One footprint cell of a page: the figure at its record decimals, or `–` and why (a record without a
/// footprint: published, or written before records carried it).
pub(crate) fn cell(r: &Record, key: &str) -> (String, Option<String>) {
    let Some((_, m, _)) = FIGURES.iter().find(|(k, _, _)| *k == key) else {
        return ("–".into(), Some(format!("{key} is not a footprint figure")));
    };
    let Some(f) = &r.footprint else {
        let why = if r.source.kind == "published" {
            "not published: an imported record states no footprint".to_string()
        } else {
            "not in the record: written before records carried the serve's footprint".to_string()
        };
        return ("–".into(), Some(why));
    };
    match figure(f, key) {
        Some(v) => (format!("{v:.*}", m.info().record_decimals as usize), None),
        None => (
            "–".into(),
            Some(
                f.unavailable
                    .get(key)
                    .cloned()
                    .unwrap_or_else(|| "no figure".into()),
            ),
        ),
    }
}
