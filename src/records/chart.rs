//! The leaderboard's drawing primitives and its value-over-time chart: page anchors ([`slug`]), a readable top
//! of an axis ([`nice_ceil`]), numbers as the SVG templates print them ([`px`], [`short_number`]), and the
//! chart of one group of records over time with its reference lines ([`chart_with`]). Pure; shared by the
//! pages (`leaderboard`) and the throughput-latency curves (`curves`).

use serde::Serialize;

use super::schema::Record;

#[derive(Debug, Serialize)]
pub(super) struct HLineCtx {
    y: String,
    label: String,
    stroke: &'static str,
    dash: &'static str,
}

#[derive(Debug, Serialize)]
pub(super) struct ChartCtx {
    width: u32,
    height: u32,
    left: String,
    right: String,
    top: String,
    bottom: String,
    y_max_label: String,
    y_mid: String,
    polyline: String,
    points: Vec<PointCtx>,
    others: Vec<PointCtx>,
    x_labels: Vec<LabelCtx>,
    pub(super) title: String,
    legend_this: String,
    legend_other: String,
    /// Horizontal reference lines (history charts: baseline and floor / limit).
    hlines: Vec<HLineCtx>,
}

#[derive(Debug, Serialize)]
pub(super) struct PointCtx {
    x: String,
    y: String,
    lo: String,
    hi: String,
    has_range: bool,
    hollow: bool,
    title: String,
}

#[derive(Debug, Serialize)]
pub(super) struct LabelCtx {
    x: String,
    text: String,
    anchor: &'static str,
}

/// A slug part: lower case ASCII letters and digits, every other run of characters one `-` (`tok/s` → `tok-s`).
/// The one slug rule of page anchors and dashboard measure names.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// The smallest of 1, 2, 2.5, 5 × 10^k at or above `x` (> 0): a readable top of the y axis.
pub(super) fn nice_ceil(x: f64) -> f64 {
    let p = 10f64.powf(x.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= x * (1.0 - 1e-12) {
            return m * p;
        }
    }
    10.0 * p
}

/// `x` with the fewest decimals (at most 6) that show it: `50`, `2.5`, `0.25`.
pub(super) fn short_number(x: f64) -> String {
    let s = format!("{x:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn day_number(date: &str) -> f64 {
    let parse = || -> Option<i32> {
        let m = time::Month::try_from(date.get(5..7)?.parse::<u8>().ok()?).ok()?;
        let d = time::Date::from_calendar_date(
            date.get(0..4)?.parse().ok()?,
            m,
            date.get(8..10)?.parse().ok()?,
        )
        .ok()?;
        Some(d.to_julian_day())
    };
    parse().unwrap_or(0) as f64
}

pub(super) fn px(x: f64) -> String {
    format!("{x:.1}")
}

/// A value-over-time chart of one group: x = date (records of one day side by side), y from 0 to the
/// largest figure; a filled dot per record (hollow when indicative), its range as a bar, pair partners as
/// grey squares.
pub(super) fn chart(group: &[&Record], model: &str, metric: &str, unit: &str) -> ChartCtx {
    chart_with(group, model, metric, unit, &[])
}

/// [`chart`] with horizontal reference lines `(label, value, stroke, dash)`, the y axis reaching them.
pub(super) fn chart_with(
    group: &[&Record],
    model: &str,
    metric: &str,
    unit: &str,
    lines: &[(String, f64, &'static str, &'static str)],
) -> ChartCtx {
    let (width, height) = (360u32, 150u32);
    let (left, right, top, bottom) = (52.0, width as f64 - 14.0, 12.0, height as f64 - 30.0);
    let mut by_time: Vec<&Record> = group.to_vec();
    by_time.sort_by(|a, b| a.date.cmp(&b.date).then_with(|| a.id.cmp(&b.id)));
    let days: Vec<f64> = by_time.iter().map(|r| day_number(&r.date)).collect();
    let mut y_top: f64 = 0.0;
    for r in &by_time {
        y_top = y_top.max(r.value).max(r.range[1]);
        if let Some(p) = &r.pair {
            y_top = y_top
                .max(p.other_value)
                .max(p.other_range.map(|o| o[1]).unwrap_or(0.0));
        }
    }
    for (_, v, _, _) in lines {
        y_top = y_top.max(*v);
    }
    if y_top <= 0.0 {
        y_top = 1.0;
    }
    let y_top = nice_ceil(y_top * 1.05);
    let y = |v: f64| bottom - (v / y_top) * (bottom - top);
    let xs = x_positions(&days, left, right);
    let (points, others) = dots(&by_time, &xs, &y, unit);
    let polyline = if points.len() > 1 {
        points
            .iter()
            .map(|p| format!("{},{}", p.x, p.y))
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        String::new()
    };
    let mut x_labels = Vec::new();
    if let (Some(first), Some(last)) = (by_time.first(), by_time.last()) {
        if first.date == last.date {
            x_labels.push(LabelCtx {
                x: px(xs[0]),
                text: first.date.clone(),
                anchor: "middle",
            });
        } else {
            x_labels.push(LabelCtx {
                x: px(xs[0]),
                text: first.date.clone(),
                anchor: "start",
            });
            x_labels.push(LabelCtx {
                x: px(xs[xs.len() - 1]),
                text: last.date.clone(),
                anchor: "end",
            });
        }
    }
    let (legend_this, legend_other) = legends(&by_time);
    let hlines = lines
        .iter()
        .map(|(label, v, stroke, dash)| HLineCtx {
            y: px(y(*v)),
            label: label.clone(),
            stroke,
            dash,
        })
        .collect();
    ChartCtx {
        hlines,
        legend_this,
        legend_other,
        width,
        height,
        left: px(left),
        right: px(right),
        top: px(top),
        bottom: px(bottom),
        y_max_label: short_number(y_top),
        y_mid: px((top + bottom) / 2.0),
        polyline,
        points,
        others,
        x_labels,
        title: format!("{model}: {metric} ({unit}) over time"),
    }
}

/// The x of each record's dot, by its day (`days`, in time order) between `left` and `right` with 14 px of
/// margin, records of one day side by side 9 px apart; one day alone is centred.
fn x_positions(days: &[f64], left: f64, right: f64) -> Vec<f64> {
    let (d0, d1) = (
        days.iter().copied().fold(f64::INFINITY, f64::min),
        days.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    );
    let mut xs = Vec::new();
    let mut same_day = 0;
    for (i, &d) in days.iter().enumerate() {
        same_day = if i > 0 && days[i - 1] == d {
            same_day + 1
        } else {
            0
        };
        let base = if d1 > d0 {
            left + 14.0 + (d - d0) / (d1 - d0) * (right - left - 28.0)
        } else {
            (left + right) / 2.0
        };
        xs.push(base + same_day as f64 * 9.0);
    }
    xs
}

/// The dots of `by_time` at `xs` (y by `y`): each record's figure with its range, and its pair partner's
/// as a grey square beside it; titled with date, id, figure and n.
fn dots(
    by_time: &[&Record],
    xs: &[f64],
    y: &dyn Fn(f64) -> f64,
    unit: &str,
) -> (Vec<PointCtx>, Vec<PointCtx>) {
    let mut points = Vec::new();
    let mut others = Vec::new();
    for (r, &x) in by_time.iter().zip(xs) {
        let mut title = format!(
            "{} {}: {} {unit}, n = {}",
            r.date,
            r.id,
            r.fmt(r.value),
            r.n
        );
        if r.indicative() {
            title.push_str(", indicative");
        }
        points.push(PointCtx {
            x: px(x),
            y: px(y(r.value)),
            lo: px(y(r.range[0])),
            hi: px(y(r.range[1])),
            has_range: r.range[1] > r.range[0],
            hollow: r.indicative(),
            title,
        });
        if let Some(p) = &r.pair {
            let (lo, hi) = p
                .other_range
                .map(|o| (o[0], o[1]))
                .unwrap_or((p.other_value, p.other_value));
            others.push(PointCtx {
                x: px(x + 5.0),
                y: px(y(p.other_value)),
                lo: px(y(lo)),
                hi: px(y(hi)),
                has_range: hi > lo,
                hollow: false,
                title: format!(
                    "{} {}: {} {} {unit}, n = {}",
                    r.date,
                    r.id,
                    p.other_engine,
                    r.fmt(p.other_value),
                    p.other_n
                ),
            });
        }
    }
    (points, others)
}

/// The legend of a chart with pair partners: this engine's name and the partner's (each when one, else
/// `this engine` / `pair partner`); empty without pairs.
fn legends(by_time: &[&Record]) -> (String, String) {
    let names = |f: &dyn Fn(&Record) -> Option<String>| {
        let mut v: Vec<String> = by_time
            .iter()
            .filter(|r| r.pair.is_some())
            .filter_map(|r| f(r))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let (this_names, other_names) = (
        names(&|r| Some(r.settings.engine.clone())),
        names(&|r| r.pair.as_ref().map(|p| p.other_engine.clone())),
    );
    let one = |v: Vec<String>, many: &str| {
        if v.len() == 1 {
            v[0].clone()
        } else {
            many.to_string()
        }
    };
    if other_names.is_empty() {
        (String::new(), String::new())
    } else {
        (
            one(this_names, "this engine"),
            one(other_names, "pair partner"),
        )
    }
}
