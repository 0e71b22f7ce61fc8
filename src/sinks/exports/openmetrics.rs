//! OpenMetrics text (<https://github.com/OpenObservability/OpenMetrics/blob/main/specification/OpenMetrics.md>),
//! the format of GitLab's `metrics` reports. Four gauge families, each sample labelled with the benchmark, the
//! measure, the unit and the three-state verdict (`state="indeterminate"`: never read as a pass):
//! `servegate_figure` (the median), `servegate_figure_lower` / `servegate_figure_upper` (the range, where
//! known), `servegate_bound` (the gate's floor or limit). Ends with `# EOF`.

use super::Figure;

/// A label value escaped as OpenMetrics requires: `\` → `\\`, `"` → `\"`, newline → `\n`.
pub(crate) fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(f: &Figure) -> String {
    let mut l = vec![
        ("benchmark", f.benchmark.as_str()),
        ("measure", f.measure.as_str()),
        ("unit", f.unit.as_str()),
        ("state", f.state.as_str()),
    ];
    for k in ["model", "engine"] {
        if let Some(v) = f.context.get(k) {
            l.push((k, v.as_str()));
        }
    }
    let parts: Vec<String> = l
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// The whole exposition.
pub fn serialize(figures: &[Figure]) -> Vec<u8> {
    type Pick = fn(&Figure) -> Option<f64>;
    let families: [(&str, &str, Pick); 4] = [
        (
            "servegate_figure",
            "The stated figure (a median), unit in the unit label, verdict in the state label.",
            |f| Some(f.value),
        ),
        (
            "servegate_figure_lower",
            "The lowest value the figure is over.",
            |f| f.lower,
        ),
        (
            "servegate_figure_upper",
            "The highest value the figure is over.",
            |f| f.upper,
        ),
        (
            "servegate_bound",
            "The gate's bound: floor for a rate, limit for a time.",
            |f| f.bound,
        ),
    ];
    let mut out = String::new();
    for (name, help, pick) in families {
        let samples: Vec<String> = figures
            .iter()
            .filter_map(|f| pick(f).map(|v| format!("{name}{} {v}", labels(f))))
            .collect();
        if samples.is_empty() {
            continue;
        }
        out.push_str(&format!("# TYPE {name} gauge\n# HELP {name} {help}\n"));
        for s in samples {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out.into_bytes()
}
