//! The leaderboard: renders `pages/leaderboard.md` and `pages/leaderboard.html` from the records with the
//! minijinja templates in `pages/templates/` (compiled in), and checks that committed pages are what the records
//! render. Rendering is pure ([`render`]: records → page text; deterministic: no clock, no environment, sorted
//! input); only the binary's `servegate leaderboard` reads and writes files (atomically, [`write_page`]). It validates nothing itself: it
//! renders only records `record::load_dir` accepted (the one loader of what may be published: every record
//! valid and re-derived from its evidence, else nothing rendered and the refused ones named). Every text of
//! the page's context passes [`crate::text::page`], so a record's control bytes (ESC, BEL) are shown escaped
//! in both pages, never written raw.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::chart::{chart, chart_with, nice_ceil, px, short_number, ChartCtx};
use crate::records::record::{self, Record};

pub use super::chart::slug;

/// The Markdown page template (`pages/templates/leaderboard.md`).
pub(crate) const MD_TEMPLATE: &str = include_str!("../../pages/templates/leaderboard.md");
/// The HTML page template (`pages/templates/leaderboard.html`).
pub(crate) const HTML_TEMPLATE: &str = include_str!("../../pages/templates/leaderboard.html");

/// Default record directory.
pub const DEFAULT_RECORDS: &str = "data/records";
/// Default Markdown page; the HTML page is the same path with `.html`.
pub const DEFAULT_OUT: &str = "pages/leaderboard.md";

/// Both rendered pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pages {
    /// `leaderboard.md`.
    pub markdown: String,
    /// `leaderboard.html`.
    pub html: String,
}

#[derive(Debug, Serialize)]
struct PageCtx {
    records: usize,
    indicative: usize,
    groups: Vec<GroupCtx>,
    compare: Vec<CompareCtx>,
    history: Vec<HistoryCtx>,
    /// Throughput-latency curves of load records (`super::load_records`), one per model, runtime and run.
    curves: Vec<super::curves::CurveCtx>,
    /// Why a footprint cell shows `–`, numbered as the cells cite them (`– [1]`).
    footprint_reasons: Vec<String>,
}

/// One footprint cell of a row (ready time, peak memory, CPU per token: `super::footprint::cell`): the
/// figure, or `–` with the number of its reason in [`PageCtx::footprint_reasons`] and the reason itself (the
/// HTML cell's tooltip).
#[derive(Debug, Serialize)]
struct FootprintCtx {
    text: String,
    note: usize,
    why: String,
}

/// One comparison chart at the top of the page: one metric (decode rate, or first token in ms), one row per
/// model and engine (the newest record of each), a pair record's two engines as adjacent ours-vs-theirs
/// bars with the ratio.
#[derive(Debug, Serialize)]
struct CompareCtx {
    title: String,
    unit: String,
    better: &'static str,
    width: u32,
    height: u32,
    left: String,
    right: String,
    axis_y: String,
    max_label: String,
    bars: Vec<BarCtx>,
}

#[derive(Debug, Serialize)]
struct BarCtx {
    y: String,
    text_y: String,
    width: String,
    label: String,
    value: String,
    value_x: String,
    fill: &'static str,
    title: String,
    ratio: String,
}

/// The history of one gate's figure across releases (records of the gate over time) with its baseline (the
/// first record) and the gate's bound drawn as lines.
#[derive(Debug, Serialize)]
struct HistoryCtx {
    gate: String,
    metric: String,
    unit: String,
    engine: String,
    anchor: String,
    chart: ChartCtx,
}

#[derive(Debug, Serialize)]
struct GroupCtx {
    model: String,
    metric: String,
    unit: String,
    anchor: String,
    better: &'static str,
    rows: Vec<RowCtx>,
    chart: ChartCtx,
}

#[derive(Debug, Serialize)]
struct RowCtx {
    id: String,
    date: String,
    value: String,
    pair: bool,
    n: u32,
    range: String,
    indicative: bool,
    values_unpublished: bool,
    flags: Vec<FlagCtx>,
    engine: String,
    route: String,
    sha256: String,
    sha256_prefix_only: bool,
    load: String,
    note: String,
    link: String,
    /// Ready time (with the serve's logged model load beside it, when the record states one), peak memory,
    /// CPU per token.
    footprint: Vec<FootprintCtx>,
}

/// The distinct reasons of a page's `–` cells (the leaderboard's and the coverage page's footprint figures),
/// numbered in the order first met: a cell shows `– [k]` and the page lists each reason once.
#[derive(Debug, Default)]
pub(crate) struct FootnoteList {
    seen: std::collections::BTreeMap<String, usize>,
    /// The reasons in number order.
    pub(crate) list: Vec<String>,
}

impl FootnoteList {
    /// The number of `why` (1-based), added when new.
    pub(crate) fn number(&mut self, why: &str) -> usize {
        if let Some(&k) = self.seen.get(why) {
            return k;
        }
        self.list.push(why.to_string());
        self.seen.insert(why.to_string(), self.list.len());
        self.list.len()
    }
}

/// The three footprint cells of `r`'s row, each `–` reason numbered in `reasons`.
fn footprint_cells(r: &Record, reasons: &mut FootnoteList) -> Vec<FootprintCtx> {
    ["ready_ms", "rss_peak_mib", "cpu_ms_per_token"]
        .into_iter()
        .map(|key| {
            let (mut text, why) = super::footprint::cell(r, key);
            if key == "ready_ms" && why.is_none() {
                if let (load, None) = super::footprint::cell(r, "model_load_ms") {
                    text = format!("{text} (model load {load} logged)");
                }
            }
            match why {
                None => FootprintCtx {
                    text,
                    note: 0,
                    why: String::new(),
                },
                Some(w) => FootprintCtx {
                    text,
                    note: reasons.number(&w),
                    why: w,
                },
            }
        })
        .collect()
}

/// One flag of a row: its text, and whether it is a warning (bold on the page).
#[derive(Debug, Serialize)]
struct FlagCtx {
    text: String,
    strong: bool,
}

/// The flags of a record's row, in the order the page lists them (each explained in the page's legend).
fn flags(r: &Record) -> Vec<FlagCtx> {
    let mut f = Vec::new();
    let mut push = |text: &str, strong: bool| {
        f.push(FlagCtx {
            text: text.to_string(),
            strong,
        })
    };
    if r.source.forced.is_some() {
        push("forced: the run failed", true);
    }
    if r.known_answer.result == "fail" {
        push("known answer failed", true);
    }
    if r.source.evidence.is_none() {
        push("unverifiable", true);
    }
    if r.indicative() {
        push("indicative", true);
    }
    if r.values.is_none() {
        push("values not published", false);
    }
    f
}

/// The metric as a heading: `decode rate`, `first token, warm`.
fn metric_label(r: &Record) -> String {
    let base = r.metric.name.replace('_', " ");
    match &r.metric.condition {
        Some(c) => format!("{base}, {c}"),
        None => base,
    }
}

fn metric_order(name: &str) -> usize {
    record::METRICS
        .iter()
        .position(|(n, _)| *n == name)
        .unwrap_or(usize::MAX)
}

fn engine_cell(r: &Record) -> String {
    match &r.settings.engine_version {
        Some(v) => format!("{} {v}", r.settings.engine),
        None => format!("{} (version not published)", r.settings.engine),
    }
}

fn value_cell(r: &Record) -> String {
    let this = r.fmt(r.value);
    match &r.pair {
        None => this,
        Some(p) => {
            let how = if p.ratio_source == "computed" {
                " (computed from the two figures, not published)"
            } else {
                ""
            };
            format!(
                "{this} vs {} ({}); ratio other / this = {:.*}{how}; arms {}",
                r.fmt(p.other_value),
                p.other_engine,
                p.ratio_decimals as usize,
                p.ratio,
                p.arm_order.join(" → ")
            )
        }
    }
}

fn load_cell(r: &Record) -> String {
    let f = |x: Option<f64>| {
        x.map(|v| format!("{v:.2}"))
            .unwrap_or_else(|| "not published".into())
    };
    if r.load.load1_start.is_none() && r.load.load1_end.is_none() {
        return "not published".into();
    }
    format!("{} → {}", f(r.load.load1_start), f(r.load.load1_end))
}

/// Orders rows: indicative (n < 3) records after the others; within each, best first (rates: highest;
/// times: lowest), then newest, then by id.
fn row_order(a: &Record, b: &Record) -> std::cmp::Ordering {
    let by_value = if a.higher_is_better() {
        b.value.total_cmp(&a.value)
    } else {
        a.value.total_cmp(&b.value)
    };
    a.indicative()
        .cmp(&b.indicative())
        .then(by_value)
        .then_with(|| b.date.cmp(&a.date))
        .then_with(|| a.id.cmp(&b.id))
}

/// The comparison charts: decode rate (tok/s) and first token (ms), one bar per model and engine (the
/// newest record of each; indicative ones drawn pale and labelled), pairs as ours-vs-theirs bars with the
/// ratio other / ours.
fn compare(records: &[&Record]) -> Vec<CompareCtx> {
    let mut out = Vec::new();
    for (metric, unit, title) in [
        ("decode_rate", "tok/s", "Decode rate by model and engine"),
        ("first_token", "ms", "First token by model and engine"),
    ] {
        // The newest record per (model, engine, device, route): a chart a reader takes in at a glance.
        let mut newest: std::collections::BTreeMap<(String, String, String, String), &Record> =
            std::collections::BTreeMap::new();
        for r in records
            .iter()
            .filter(|r| r.metric.name == metric && r.source.forced.is_none())
        {
            let k = (
                r.model.name.clone(),
                r.settings.engine.clone(),
                r.device.clone(),
                r.route.clone(),
            );
            let e = newest.entry(k).or_insert(r);
            if (r.date.as_str(), r.id.as_str()) > (e.date.as_str(), e.id.as_str()) {
                *e = r;
            }
        }
        let conv = |r: &Record, v: f64| -> f64 {
            if unit == "ms" && r.metric.unit == "s" {
                v * 1000.0
            } else {
                v
            }
        };
        // Rows: (label, value, fill, title, ratio text).
        let mut rows: Vec<(String, f64, &'static str, String, String)> = Vec::new();
        // A pair is recorded from both sides (ours, and theirs naming ours as the other): drawn once, from the
        // side whose id sorts first without `theirs`.
        let mut pairs_drawn: std::collections::BTreeSet<(String, String, String)> =
            Default::default();
        let mut sides: Vec<&&Record> = newest.values().collect();
        sides.sort_by_key(|r| (r.id.contains("theirs"), r.id.clone()));
        for r in sides {
            if let Some(p) = &r.pair {
                let (a, b) = if r.settings.engine <= p.other_engine {
                    (r.settings.engine.clone(), p.other_engine.clone())
                } else {
                    (p.other_engine.clone(), r.settings.engine.clone())
                };
                if !pairs_drawn.insert((r.model.name.clone(), a, b)) {
                    continue;
                }
            }
            let v = conv(r, r.value);
            let ind = if r.indicative() {
                ", indicative (n < 3)"
            } else {
                ""
            };
            let label = short_label(&format!("{} · {}", r.model.name, r.settings.engine));
            let fill = if r.indicative() { "#9bb7e0" } else { "#36c" };
            let title = format!(
                "{label}: {} {unit}, n = {}{ind} ({})",
                short_number(round3(v)),
                r.n,
                r.id
            );
            match &r.pair {
                None => rows.push((label, v, fill, title, String::new())),
                Some(p) => {
                    rows.push((format!("{label} (ours)"), v, fill, title, String::new()));
                    let ov = conv(r, p.other_value);
                    let olabel = short_label(&format!("{} · {}", r.model.name, p.other_engine));
                    let olabel = format!("{olabel} (theirs)");
                    rows.push((
                        olabel.clone(),
                        ov,
                        "#999",
                        format!(
                            "{olabel}: {} {unit}, n = {} ({})",
                            short_number(round3(ov)),
                            p.other_n,
                            r.id
                        ),
                        format!("theirs / ours = {:.*}", p.ratio_decimals as usize, p.ratio),
                    ));
                }
            }
        }
        if rows.is_empty() {
            continue;
        }
        let (left, right_pad, bar_h, gap, top) = (330.0, 170.0, 14.0, 6.0, 8.0);
        let width = 900u32;
        let right = width as f64 - right_pad;
        let max = nice_ceil(rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-9) * 1.05);
        let bars: Vec<BarCtx> = rows
            .into_iter()
            .enumerate()
            .map(|(i, (label, v, fill, title, ratio))| {
                let y = top + i as f64 * (bar_h + gap);
                let w = (v / max * (right - left)).max(1.0);
                BarCtx {
                    y: px(y),
                    text_y: px(y + bar_h - 3.0),
                    width: px(w),
                    label,
                    value: format!("{} {unit}", short_number(round3(v))),
                    value_x: px(left + w + 4.0),
                    fill,
                    title,
                    ratio,
                }
            })
            .collect();
        let axis_y = top + bars.len() as f64 * (bar_h + gap);
        out.push(CompareCtx {
            title: title.to_string(),
            unit: unit.to_string(),
            better: if unit == "tok/s" {
                "longer is better"
            } else {
                "shorter is better"
            },
            width,
            height: (axis_y + 22.0) as u32,
            left: px(left),
            right: px(right),
            axis_y: px(axis_y),
            max_label: short_number(max),
            bars,
        });
    }
    out
}

/// A bar label of at most 46 characters (`…` where cut; the full text is in the bar's tooltip).
fn short_label(s: &str) -> String {
    if s.chars().count() <= 46 {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(45).collect();
        t.push('…');
        t
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Per gate (records with a `source.gate`), metric and engine: its figure over the releases recorded, the
/// first record as the baseline and the gate's floor (rates) or limit (times) drawn in.
fn history(records: &[&Record]) -> Vec<HistoryCtx> {
    let mut groups: std::collections::BTreeMap<
        (String, usize, String, String, String),
        Vec<&Record>,
    > = std::collections::BTreeMap::new();
    for r in records {
        let Some(gate) = &r.source.gate else { continue };
        groups
            .entry((
                gate.clone(),
                metric_order(&r.metric.name),
                r.metric.name.clone(),
                r.metric.unit.clone(),
                r.settings.engine.clone(),
            ))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((gate, _, _, unit, engine), mut members) in groups {
        members.sort_by(|a, b| a.date.cmp(&b.date).then_with(|| a.id.cmp(&b.id)));
        let first = members[0];
        let mut lines = vec![(
            format!("baseline {} ({})", first.fmt(first.value), first.date),
            first.value,
            "#2a7",
            "2 3",
        )];
        // The bound of the newest run's gate (the gate as it stands for the latest release), as its
        // record states it (`bound`, in the record's unit).
        let newest = members[members.len() - 1];
        if let Some(b) = &newest.bound {
            lines.push((
                format!("{} {}", b.kind, short_number(b.value)),
                b.value,
                "#c33",
                "5 3",
            ));
        }
        let label = metric_label(first);
        let gate_name = Path::new(&gate)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| gate.clone());
        let mut c = chart_with(&members, &gate_name, &label, &unit, &lines);
        c.title = format!("{gate_name}: {label} ({unit}) across releases, {engine}");
        out.push(HistoryCtx {
            anchor: slug(&format!("history {gate_name} {label} {engine}")),
            gate,
            metric: label,
            unit,
            engine,
            chart: c,
        });
    }
    out
}

/// Renders both pages from `records` (any order). `records_link` is the path from the pages' directory to
/// the record directory (`../records`), used in each row's link.
/// Each history chart draws the bound its newest record states ([`Record::bound`]): no gate file is read.
pub fn render(records: &[Record], records_link: &str) -> Result<Pages, minijinja::Error> {
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by(|a, b| {
        (
            a.model.name.as_str(),
            metric_order(&a.metric.name),
            &a.metric.name,
            &a.metric.condition,
            &a.metric.unit,
        )
            .cmp(&(
                b.model.name.as_str(),
                metric_order(&b.metric.name),
                &b.metric.name,
                &b.metric.condition,
                &b.metric.unit,
            ))
            .then_with(|| row_order(a, b))
    });
    // Load records (one sweep point each) are drawn as throughput-latency curves, not as time series.
    let (load, sorted): (Vec<&Record>, Vec<&Record>) =
        sorted.into_iter().partition(|r| r.load_point.is_some());
    let mut groups: Vec<GroupCtx> = Vec::new();
    let mut reasons = FootnoteList::default();
    let mut i = 0;
    while i < sorted.len() {
        let key = |r: &Record| {
            (
                r.model.name.clone(),
                r.metric.name.clone(),
                r.metric.condition.clone(),
                r.metric.unit.clone(),
            )
        };
        let k = key(sorted[i]);
        let mut j = i;
        while j < sorted.len() && key(sorted[j]) == k {
            j += 1;
        }
        let members = &sorted[i..j];
        let first = members[0];
        let metric = metric_label(first);
        let rows = members
            .iter()
            .map(|r| RowCtx {
                id: r.id.clone(),
                date: r.date.clone(),
                value: value_cell(r),
                pair: r.pair.is_some(),
                n: r.n,
                range: format!("{}–{}", r.fmt(r.range[0]), r.fmt(r.range[1])),
                indicative: r.indicative(),
                values_unpublished: r.values.is_none(),
                flags: flags(r),
                engine: engine_cell(r),
                route: r.route.clone(),
                sha256: r.model.sha256.chars().take(16).collect(),
                sha256_prefix_only: r.sha256_prefix_only(),
                load: load_cell(r),
                note: r.notes.what_would_make_it_wrong.clone(),
                link: format!("{records_link}/{}.json", r.id),
                footprint: footprint_cells(r, &mut reasons),
            })
            .collect();
        groups.push(GroupCtx {
            anchor: slug(&format!("{} {}", first.model.name, metric)),
            better: if first.higher_is_better() {
                "highest first"
            } else {
                "lowest first"
            },
            chart: chart(members, &first.model.name, &metric, &first.metric.unit),
            model: first.model.name.clone(),
            metric,
            unit: first.metric.unit.clone(),
            rows,
        });
        i = j;
    }
    let ctx = PageCtx {
        records: records.len(),
        indicative: records.iter().filter(|r| r.indicative()).count(),
        groups,
        compare: compare(&sorted),
        history: history(&sorted),
        curves: super::curves::curves(&load, records_link),
        footprint_reasons: reasons.list,
    };
    let env = environment()?;
    // Every text a record brings (model name, engine, route, notes, flags, ids) with its control bytes shown
    // escaped: the templates see no raw ESC or BEL (line breaks stay: the `md` filter and HTML handle them).
    let mut ctx = serde_json::to_value(&ctx).map_err(|e| {
        minijinja::Error::new(minijinja::ErrorKind::BadSerialization, e.to_string())
    })?;
    crate::text::map_strings(&mut ctx, &crate::text::page);
    let value = minijinja::Value::from_serialize(&ctx);
    Ok(Pages {
        markdown: env.get_template("leaderboard.md")?.render(&value)?,
        html: env.get_template("leaderboard.html")?.render(&value)?,
    })
}

/// Escapes text for a Markdown table cell: `|` → `\|`, a line break → `<br>`, `<` → `&lt;` (so the only
/// HTML in a cell is the `<br>` this adds).
pub(crate) fn md_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push_str("<br>");
            }
            '\n' => out.push_str("<br>"),
            c => out.push(c),
        }
    }
    out
}

fn environment() -> Result<minijinja::Environment<'static>, minijinja::Error> {
    let mut env = page_environment();
    env.add_filter("md", |s: String| md_cell(&s));
    env.add_template("leaderboard.md", MD_TEMPLATE)?;
    env.add_template("leaderboard.html", HTML_TEMPLATE)?;
    Ok(env)
}

/// The template environment every generated page uses (the leaderboard, the coverage page): newline kept,
/// blocks trimmed, undefined values an error, HTML auto-escaped in `.html` templates only.
pub(crate) fn page_environment() -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    env.set_keep_trailing_newline(true);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".html") {
            minijinja::AutoEscape::Html
        } else {
            minijinja::AutoEscape::None
        }
    });
    env
}

/// `path` made absolute against the current directory and normalised lexically (`.` dropped, `..` applied).
fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c.as_os_str()),
        }
    }
    out
}

/// The relative link (with `/`) from directory `from` to `to`: `docs` → `records` gives `../records`.
pub fn relative_link(from: &Path, to: &Path) -> String {
    let (from, to) = (absolute(from), absolute(to));
    let (f, t): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The HTML page beside a Markdown page: same path, `.html`.
pub fn html_path(md: &Path) -> PathBuf {
    md.with_extension("html")
}

/// At most this many lines of each side's differing middle (after the common head and tail are set aside)
/// go into [`unified_diff`]; the rest is summarised. Keeps `leaderboard --check` linear in the page size.
pub(crate) const DIFF_MAX_LINES: usize = 2000;

/// At most this many lines of diff are printed.
pub(crate) const DIFF_MAX_OUTPUT_LINES: usize = 400;

/// A unified line diff of `old` (the file `old_name`) and `new`, `context` lines around changes (the
/// `similar` crate's Myers diff); empty when equal. Bounded: the common head and tail are skipped in linear
/// time, at most [`DIFF_MAX_LINES`] lines of each differing middle are diffed (a longer middle is cut and a
/// final line says how many lines were left out), and at most [`DIFF_MAX_OUTPUT_LINES`] lines are returned.
/// Line numbers in the hunk headers are those of the whole files.
pub fn unified_diff(
    old_name: &str,
    new_name: &str,
    old: &str,
    new: &str,
    context: usize,
) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let pre = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suf = a[pre..]
        .iter()
        .rev()
        .zip(b[pre..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    // The window diffed: the differing middle (capped) with `context` lines of each common end.
    let head = pre.saturating_sub(context);
    let a_mid = (a.len() - suf - pre).min(DIFF_MAX_LINES);
    let b_mid = (b.len() - suf - pre).min(DIFF_MAX_LINES);
    let cut = a_mid < a.len() - suf - pre || b_mid < b.len() - suf - pre;
    let tail = if cut { 0 } else { suf.min(context) };
    let a_win: String = a[head..pre + a_mid + tail].concat();
    let b_win: String = b[head..pre + b_mid + tail].concat();
    let diff = similar::TextDiff::configure()
        .algorithm(similar::Algorithm::Myers)
        .diff_lines(a_win.as_str(), b_win.as_str());
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    for hunk in diff.unified_diff().context_radius(context).iter_hunks() {
        // Hunk header with whole-file line numbers.
        let ops = hunk.ops();
        let (Some(first), Some(last)) = (ops.first(), ops.last()) else {
            continue;
        };
        let (ar, br) = (
            first.old_range().start..last.old_range().end,
            first.new_range().start..last.new_range().end,
        );
        let start = |r: &std::ops::Range<usize>| {
            if r.is_empty() {
                head + r.start
            } else {
                head + r.start + 1
            }
        };
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            start(&ar),
            ar.len(),
            start(&br),
            br.len()
        ));
        for change in hunk.iter_changes() {
            out.push(match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            });
            let line = change.value();
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    let mut lines: Vec<&str> = out.split_inclusive('\n').collect();
    let mut note = String::new();
    if lines.len() > DIFF_MAX_OUTPUT_LINES {
        note = format!(
            "... diff cut after {DIFF_MAX_OUTPUT_LINES} of {} lines\n",
            lines.len()
        );
        lines.truncate(DIFF_MAX_OUTPUT_LINES);
    }
    if cut {
        note.push_str(&format!(
            "... only the first {DIFF_MAX_LINES} differing lines of each side were compared ({} and {} differ)\n",
            a.len() - suf - pre,
            b.len() - suf - pre
        ));
    }
    let mut text = lines.concat();
    text.push_str(&note);
    text
}

/// Writes a rendered page to `path` atomically (temp file beside it, then rename): a reader never sees a
/// half-written page.
pub fn write_page(path: &Path, text: &str) -> std::io::Result<()> {
    crate::io::fs::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_cells_escape_pipes_and_line_breaks() {
        assert_eq!(md_cell("a | b"), "a \\| b");
        assert_eq!(
            md_cell("one\ntwo\r\nthree\rfour"),
            "one<br>two<br>three<br>four"
        );
        assert_eq!(md_cell("<br> is text"), "&lt;br> is text");
    }

    #[test]
    fn relative_link_from_pages_to_records() {
        assert_eq!(
            relative_link(Path::new("pages"), Path::new("data/records")),
            "../data/records"
        );
        assert_eq!(
            relative_link(Path::new("."), Path::new("records")),
            "records"
        );
        assert_eq!(
            relative_link(Path::new("a/b"), Path::new("a/c/d")),
            "../c/d"
        );
    }

    #[test]
    fn diff_shows_changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nX\n6\n7\n8\n9\n";
        let d = unified_diff("a", "b", old, new, 2);
        assert_eq!(d, "--- a\n+++ b\n@@ -3,5 +3,5 @@\n 3\n 4\n-5\n+X\n 6\n 7\n");
        assert_eq!(unified_diff("a", "b", old, old, 3), "");
    }

    #[test]
    fn diff_handles_insertions_deletions_and_missing_newline() {
        let d = unified_diff("a", "b", "", "x\n", 3);
        assert_eq!(d, "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n");
        let d = unified_diff("a", "b", "x\ny", "x\n", 3);
        assert!(d.contains("-y\n\\ No newline at end of file\n"), "{d}");
    }

    #[test]
    fn diff_of_a_huge_page_is_capped_and_names_the_first_change() {
        // Every line differs (a CRLF page against an LF one): the diff stays bounded.
        let old: String = (0..50_000).map(|i| format!("line {i}\r\n")).collect();
        let new: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
        let d = unified_diff("a", "b", &old, &new, 3);
        assert!(
            d.lines().count() <= DIFF_MAX_OUTPUT_LINES + 2,
            "{}",
            d.lines().count()
        );
        assert!(d.contains("-line 0\r\n"), "{}", &d[..200]);
        assert!(
            d.contains("only the first 2000 differing lines"),
            "{}",
            &d[d.len() - 200..]
        );
    }

    #[test]
    fn y_axis_tops_are_round_numbers() {
        assert_eq!(nice_ceil(55.0), 100.0);
        assert_eq!(nice_ceil(45.0), 50.0);
        assert_eq!(nice_ceil(0.62), 1.0);
        assert_eq!(nice_ceil(0.24), 0.25);
        assert_eq!(nice_ceil(4.6), 5.0);
        assert_eq!(nice_ceil(20.0), 20.0);
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(50.0), "50");
    }

    #[test]
    fn empty_record_set_renders() {
        let p = render(&[], "../records").unwrap();
        assert!(p.markdown.contains("0 records"));
        assert!(p.html.contains("0 records"));
    }
}
