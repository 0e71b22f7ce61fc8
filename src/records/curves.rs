//! The throughput-latency curves of load records on the leaderboard: per model, runtime and run, one row and
//! one chart point per sweep point (x = output tok/s, y = TTFT or E2E). Pure rendering context for the
//! page templates.

use std::path::Path;

use super::chart::{nice_ceil, px, short_number, slug};
use super::schema::{LoadPoint, Record};

/// One throughput-latency curve on the leaderboard: the load records of one model, runtime and run, one row
/// (and one chart point) per sweep point.
#[derive(Debug, serde::Serialize)]
pub(crate) struct CurveCtx {
    model: String,
    engine: String,
    date: String,
    anchor: String,
    rows: Vec<CurveRowCtx>,
    charts: Vec<CurveChartCtx>,
}

#[derive(Debug, serde::Serialize)]
struct CurveRowCtx {
    point: String,
    tok_s: String,
    rps: String,
    ttft_p50: String,
    ttft_p95: String,
    e2e_p50: String,
    e2e_p95: String,
    n: String,
    flags: String,
    links: Vec<LinkCtx>,
}

#[derive(Debug, serde::Serialize)]
struct LinkCtx {
    id: String,
    label: String,
    link: String,
}

#[derive(Debug, serde::Serialize)]
struct CurveChartCtx {
    title: String,
    y_name: String,
    width: u32,
    height: u32,
    left: String,
    right: String,
    top: String,
    bottom: String,
    x_mid: String,
    y_mid: String,
    x_max_label: String,
    y_max_label: String,
    series: Vec<SeriesCtx>,
}

#[derive(Debug, serde::Serialize)]
struct SeriesCtx {
    name: String,
    stroke: &'static str,
    dash: &'static str,
    polyline: String,
    points: Vec<CurvePointCtx>,
}

#[derive(Debug, serde::Serialize)]
struct CurvePointCtx {
    x: String,
    y: String,
    label: String,
    hollow: bool,
    title: String,
}

/// The sort key of a point label: closed-loop points by concurrency, then open-loop points by rate.
fn point_key(lp: &LoadPoint) -> (u8, f64) {
    match (lp.concurrency, lp.rate_rps) {
        (Some(c), _) => (0, f64::from(c)),
        (None, Some(r)) => (1, r),
        _ => (2, 0.0),
    }
}

/// The throughput-latency curves of `load` (records with a `load_point`): grouped by model, engine and
/// evidence (one run), sorted by model, engine and date; per point the output tok/s and requests/s
/// records give x, the TTFT and E2E records (p50, and p95 where the point had the n to claim it) give y.
/// Charts: y = TTFT, and y = E2E, against x = output tok/s, one labelled dot per point (hollow when
/// indicative), a line through the points in concurrency order (a serve that serializes its requests shows
/// flat x and a rising y).
pub(crate) fn curves(load: &[&Record], records_link: &str) -> Vec<CurveCtx> {
    use std::collections::BTreeMap;
    let mut by_run: BTreeMap<(String, String, String, String), Vec<&Record>> = BTreeMap::new();
    for r in load {
        by_run
            .entry((
                r.model.name.clone(),
                r.settings.engine.clone(),
                r.date.clone(),
                r.source.evidence.clone().unwrap_or_default(),
            ))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((model, engine, date, evidence), recs) in by_run {
        // Points in order, each with its records by (metric, statistic).
        let mut points: Vec<(LoadPoint, PointRecords<'_>)> = Vec::new();
        for r in &recs {
            let lp = r.load_point.clone().expect("load records");
            let i = match points.iter().position(|(p, _)| p.point == lp.point) {
                Some(i) => i,
                None => {
                    points.push((lp, BTreeMap::new()));
                    points.len() - 1
                }
            };
            points[i]
                .1
                .insert((r.metric.name.clone(), r.statistic.clone()), r);
        }
        points.sort_by(|a, b| {
            let (x, y) = (point_key(&a.0), point_key(&b.0));
            x.0.cmp(&y.0).then(x.1.total_cmp(&y.1))
        });
        fn get<'a>(
            m: &BTreeMap<(String, String), &'a Record>,
            name: &str,
            stat: &str,
        ) -> Option<&'a Record> {
            m.get(&(name.to_string(), stat.to_string())).copied()
        }
        let cell = |r: Option<&Record>| {
            r.map(|r| format!("{} {}", r.fmt(r.value), r.metric.unit))
                .unwrap_or_else(|| "-".into())
        };
        let rows = points
            .iter()
            .map(|(lp, m)| {
                let mut flags: Vec<&str> = Vec::new();
                if m.values().any(|r| r.indicative()) {
                    flags.push("indicative");
                }
                if m.values().any(|r| r.source.forced.is_some()) {
                    flags.push("forced: the run failed");
                }
                if get(m, "first_token", "p95").is_none() {
                    flags.push("no p95 (n < 59)");
                }
                CurveRowCtx {
                    point: lp.point.clone(),
                    tok_s: cell(get(m, "output_throughput", "window")),
                    rps: cell(get(m, "request_throughput", "window")),
                    ttft_p50: cell(get(m, "first_token", "median")),
                    ttft_p95: cell(get(m, "first_token", "p95")),
                    e2e_p50: cell(get(m, "e2e_latency", "median")),
                    e2e_p95: cell(get(m, "e2e_latency", "p95")),
                    n: lp.requests.to_string(),
                    flags: flags.join(", "),
                    links: m
                        .values()
                        .map(|r| LinkCtx {
                            id: r.id.clone(),
                            label: match (r.metric.name.as_str(), r.statistic.as_str()) {
                                ("first_token", "median") => "TTFT p50".into(),
                                ("first_token", s) => format!("TTFT {s}"),
                                ("e2e_latency", "median") => "E2E p50".into(),
                                ("e2e_latency", s) => format!("E2E {s}"),
                                (_, _) => r.metric.unit.clone(),
                            },
                            link: format!("{records_link}/{}.json", r.id),
                        })
                        .collect(),
                }
            })
            .collect();
        let mut charts = Vec::new();
        for (metric, y_name) in [("first_token", "TTFT"), ("e2e_latency", "E2E")] {
            if let Some(c) = curve_chart(&points, metric, y_name, &model, &engine) {
                charts.push(c);
            }
        }
        out.push(CurveCtx {
            anchor: slug(&format!(
                "load {model} {engine} {}",
                Path::new(&evidence)
                    .file_name()
                    .map(|f| f.to_string_lossy().to_string())
                    .unwrap_or(date.clone())
            )),
            model,
            engine,
            date,
            rows,
            charts,
        });
    }
    out
}

/// One load point's records by (metric, statistic).
type PointRecords<'a> = std::collections::BTreeMap<(String, String), &'a Record>;

/// One series of a curve chart: its statistic, name, stroke and dash, and its points (x, y, the record, the
/// load point's name).
type Series<'a> = (
    &'a str,
    &'static str,
    &'static str,
    Vec<(f64, f64, &'a Record, String)>,
);

/// One chart of a curve: y = `metric` (p50 solid, p95 dashed where stated) against x = output tok/s.
fn curve_chart(
    points: &[(LoadPoint, PointRecords<'_>)],
    metric: &str,
    y_name: &str,
    model: &str,
    engine: &str,
) -> Option<CurveChartCtx> {
    let (width, height) = (400u32, 220u32);
    let (left, right, top, bottom) = (56.0, width as f64 - 20.0, 14.0, height as f64 - 34.0);
    let x_of = |m: &std::collections::BTreeMap<(String, String), &Record>| {
        m.get(&("output_throughput".to_string(), "window".to_string()))
            .map(|r| r.value)
    };
    let mut series_raw: Vec<Series<'_>> = Vec::new();
    for (stat, name, stroke, dash) in [("median", "p50", "#36c", ""), ("p95", "p95", "#c63", "4 3")]
    {
        let pts: Vec<(f64, f64, &Record, String)> = points
            .iter()
            .filter_map(|(lp, m)| {
                let x = x_of(m)?;
                let r = m.get(&(metric.to_string(), stat.to_string()))?;
                Some((x, r.value, *r, lp.point.clone()))
            })
            .collect();
        if !pts.is_empty() {
            series_raw.push((name, stroke, dash, pts));
        }
    }
    if series_raw.is_empty() {
        return None;
    }
    let unit = series_raw[0].3[0].2.metric.unit.clone();
    let x_max = nice_ceil(
        series_raw
            .iter()
            .flat_map(|s| s.3.iter().map(|p| p.0))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.1,
    );
    let y_max = nice_ceil(
        series_raw
            .iter()
            .flat_map(|s| s.3.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.1,
    );
    let sx = |x: f64| left + x / x_max * (right - left);
    let sy = |y: f64| bottom - y / y_max * (bottom - top);
    let series = series_raw
        .into_iter()
        .map(|(name, stroke, dash, pts)| {
            let points: Vec<CurvePointCtx> = pts
                .iter()
                .map(|(x, y, r, label)| CurvePointCtx {
                    x: px(sx(*x)),
                    y: px(sy(*y)),
                    label: label.clone(),
                    hollow: r.indicative(),
                    title: format!(
                        "{label}: {y_name} {name} {} {} at {} tok/s output, n = {} ({})",
                        r.fmt(*y),
                        r.metric.unit,
                        short_number(*x),
                        r.n,
                        r.id
                    ),
                })
                .collect();
            SeriesCtx {
                name: format!("{y_name} {name}"),
                stroke,
                dash,
                polyline: if points.len() > 1 {
                    points
                        .iter()
                        .map(|p| format!("{},{}", p.x, p.y))
                        .collect::<Vec<_>>()
                        .join(" ")
                } else {
                    String::new()
                },
                points,
            }
        })
        .collect();
    Some(CurveChartCtx {
        title: format!("{model} on {engine}: {y_name} ({unit}) against output throughput (tok/s), one point per load point"),
        y_name: format!("{y_name} ({unit})"),
        width,
        height,
        left: px(left),
        right: px(right),
        top: px(top),
        bottom: px(bottom),
        x_mid: px((left + right) / 2.0),
        y_mid: px((top + bottom) / 2.0),
        x_max_label: short_number(x_max),
        y_max_label: short_number(y_max),
        series,
    })
}
