//! The coverage page: rows (family, size, quantization) × columns (runtimes), one cell per matrix-gate entry's
//! newest run, judged again from its evidence ([`crate::judge::judge`]; the evidence is the authority, not a
//! stored verdict). pages/coverage.md states the cell states, the expiry and the regression rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::judge::Outcome;
use crate::spec::matrix;

/// The state of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CellState {
    /// VERIFIED: loads, answers right and meets its floors: every assertion passed.
    Verified,
    /// PARTIAL: loads (the serve became ready) but a speed or answer assertion did not pass.
    Partial,
    /// NOT-LOADING: does not load: the serve never became ready (or setup failed).
    NotLoading,
    /// UNKNOWN: never run, or the newest run is older than `expire_days` before the newest evidence on the
    /// page.
    Unknown,
}

impl CellState {
    /// The page's word for the state. A word, never a glyph alone: a browser without an emoji font (Debian's
    /// Chromium) drew the ✅ the page once showed as an empty box, and the page said no state at all.
    pub fn symbol(self) -> &'static str {
        match self {
            CellState::Verified => "VERIFIED",
            CellState::Partial => "PARTIAL",
            CellState::NotLoading => "NOT-LOADING",
            CellState::Unknown => "UNKNOWN",
        }
    }

    /// The HTML page's class for the state (its colour).
    pub(crate) fn class(self) -> &'static str {
        match self {
            CellState::Verified => "verified",
            CellState::Partial => "partial",
            CellState::NotLoading => "not-loading",
            CellState::Unknown => "unknown",
        }
    }

    /// Parses a state back (the page's machine-readable cell comments): its word, or the glyph a page
    /// written before the words showed (`✅`, `🟡`, `❌`, `?`), so a committed older page still reads.
    pub fn of_symbol(s: &str) -> Option<CellState> {
        let legacy = match s {
            "\u{2705}" => Some(CellState::Verified),
            "\u{1f7e1}" => Some(CellState::Partial),
            "\u{274c}" => Some(CellState::NotLoading),
            "?" => Some(CellState::Unknown),
            _ => None,
        };
        legacy.or_else(|| {
            [
                CellState::Verified,
                CellState::Partial,
                CellState::NotLoading,
                CellState::Unknown,
            ]
            .into_iter()
            .find(|c| c.symbol() == s)
        })
    }
}

/// One cell: a matrix-gate entry's newest run on one runtime.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cell {
    /// The matrix gate (`reference-matrix`).
    pub gate: String,
    /// The entry's name (`smollm2-135m`).
    pub model: String,
    /// The entry's `family` (architecture name).
    pub family: String,
    /// The entry's `size` (or empty).
    pub size: String,
    /// The entry's `quantization` (or empty).
    pub quantization: String,
    /// The runtime: the comparability key's engine (`[record] engine` or the serve profile), else the serve
    /// command's program name.
    pub runtime: String,
    /// The state the evidence gives (before expiry).
    pub state: CellState,
    /// Why not VERIFIED: the assertions that did not pass, or the serve's failure.
    pub why: String,
    /// The run directory judged.
    pub evidence: PathBuf,
    /// The run's `started_utc`.
    pub verified_utc: String,
    /// The serve's start-up time in the run, ms (`run.json` `serve.ready_ms`, `analysis::footprint::ready_ms`),
    /// or why there is none (the serve never answered ready, a `url` serve).
    pub ready_ms: Result<f64, String>,
    /// The serve's peak resident memory in the run, MiB (`serve.footprint.rss_peak_mib`,
    /// `analysis::footprint::rss_peak_mib`), or why there is none (evidence written before servegate measured
    /// it, the kernel gave none).
    pub rss_peak_mib: Result<f64, String>,
}

/// Every matrix-gate entry's newest complete run under `runs` (`runs/<gate>[<model>]/<stamp>/`), judged. Runs
/// that cannot be read or judged are left out (the cell stays `?`).
pub(crate) fn cells(runs: &Path) -> Vec<Cell> {
    cells_from(runs, None)
}

/// Like [`cells`], with the matrix-gate runs that the records in `records` cite as well: each
/// `data/records/*.json` whose `source.evidence` (a path relative to the records directory's parent, e.g.
/// `records/evidence/reference-matrix[smollm2-135m]/20261201T113758Z`) is a `<gate>[<model>]/<stamp>`
/// directory adds that run to its entry's candidates. Per entry the newest complete run wins, whichever root
/// it came from (stamps `YYYYMMDDTHHMMSSZ` order by time); the run is judged again from its evidence, never
/// from the record's stored verdict. A record that cannot be read, or cites no matrix run, adds nothing.
pub fn cells_from(runs: &Path, records: Option<&Path>) -> Vec<Cell> {
    let mut candidates: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    dirs.sort();
    for d in dirs {
        let Some(name) = d.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        if matrix::split_name(&name).is_none() {
            continue;
        }
        let stamps: Vec<PathBuf> = std::fs::read_dir(&d)
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        candidates.entry(name).or_default().extend(stamps);
    }
    if let Some(records) = records {
        for (name, dir) in record_runs(records) {
            candidates.entry(name).or_default().push(dir);
        }
    }
    let mut out = Vec::new();
    for (name, mut stamps) in candidates {
        let Some((gate, model)) = matrix::split_name(&name) else {
            continue;
        };
        stamps.sort_by(|a, b| a.file_name().cmp(&b.file_name()).then(a.cmp(b)));
        stamps.dedup();
        // The newest complete run (an interrupted or half-written one proves nothing).
        for stamp in stamps.iter().rev() {
            if let Some(c) = cell_of(stamp, &name, gate, model) {
                out.push(c);
                break;
            }
        }
    }
    out
}

/// The matrix-gate run directories that the records in `records` (`*.json`) cite as `source.evidence`, with
/// their `<gate>[<model>]` names. Paths are relative to `records`' parent (the checkout), as records write them.
pub(crate) fn record_runs(records: &Path) -> Vec<(String, PathBuf)> {
    let base = records.parent().unwrap_or(Path::new(""));
    let mut files: Vec<PathBuf> = std::fs::read_dir(records)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Some(v) = crate::io::input::read_to_string(&f, crate::io::input::MAX_RECORD_BYTES)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        let Some(ev) = v.pointer("/source/evidence").and_then(|e| e.as_str()) else {
            continue;
        };
        let dir = base.join(ev);
        let name = dir
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| matrix::split_name(n).is_some()) {
            if dir.is_dir() {
                out.push((name, dir));
            }
        }
    }
    out
}

fn cell_of(dir: &Path, name: &str, gate: &str, model: &str) -> Option<Cell> {
    let gate_file = dir.join(crate::evidence::layout::GATE_FILE);
    let text = crate::io::input::read_to_string(&gate_file, crate::spec::MAX_GATE_BYTES).ok()?;
    let entry = matrix::entry_for(&gate_file, &text, name)?;
    let spec = matrix::load_named(&gate_file, Some(name)).ok()?;
    let ev = crate::loaded::load(dir).ok()?;
    if ev.run.status != crate::evidence::RunStatus::Complete {
        return None;
    }
    let verdicts = crate::loaded::judge_run(&spec, &ev);
    let key = crate::evidence::comparability::key_of(&spec, &ev.run);
    let runtime = key.engine.clone().unwrap_or_else(|| {
        ev.run
            .serve
            .command
            .first()
            .and_then(|c| Path::new(c).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "unknown".into())
    });
    let (state, why) = if ev.run.serve.ready_ms.is_none() {
        let why = ev
            .run
            .serve
            .failure
            .clone()
            .unwrap_or_else(|| "the serve never became ready".into());
        (CellState::NotLoading, why)
    } else {
        let bad: Vec<String> = verdicts
            .iter()
            .filter(|v| v.outcome != Outcome::Pass)
            .map(|v| format!("{} {}", v.assertion, v.outcome.word()))
            .collect();
        if bad.is_empty() && !verdicts.is_empty() {
            (CellState::Verified, String::new())
        } else {
            (CellState::Partial, bad.join(", "))
        }
    };
    Some(Cell {
        ready_ms: crate::analysis::footprint::ready_ms(&ev),
        rss_peak_mib: crate::analysis::footprint::rss_peak_mib(&ev),
        gate: gate.to_string(),
        model: model.to_string(),
        family: entry.family,
        size: entry.size.unwrap_or_default(),
        quantization: entry.quantization.unwrap_or_default(),
        runtime,
        state,
        why,
        evidence: dir.to_path_buf(),
        verified_utc: ev.run.started_utc.clone(),
    })
}

/// Days from the Unix epoch of an RFC 3339 UTC stamp's date (`2026-12-01T...`), or None.
fn day_of(stamp: &str) -> Option<i64> {
    let mut it = stamp.get(..10)?.split('-');
    let (y, m, d) = (
        it.next()?.parse().ok()?,
        it.next()?.parse::<u8>().ok()?,
        it.next()?.parse().ok()?,
    );
    let date = time::Date::from_calendar_date(y, time::Month::try_from(m).ok()?, d).ok()?;
    Some(date.to_julian_day() as i64)
}

/// The last day (`YYYY-MM-DD`) on which newer evidence still leaves the cell shown: `verified_utc`'s date plus
/// `expire_days` (empty for an unreadable stamp).
pub fn expires(cell: &Cell, expire_days: u32) -> String {
    day_of(&cell.verified_utc)
        .and_then(|d| time::Date::from_julian_day((d + expire_days as i64) as i32).ok())
        .map(|d| format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day()))
        .unwrap_or_default()
}

/// The state a cell shows: its own, or `?` when its run is older than `expire_days` before `newest` (the newest
/// run on the page; so the page is a pure function of the evidence, and `--check` does not change with the
/// clock).
pub fn shown(cell: &Cell, newest: &str, expire_days: u32) -> CellState {
    match (day_of(&cell.verified_utc), day_of(newest)) {
        (Some(c), Some(n)) if n - c <= expire_days as i64 => cell.state,
        _ => CellState::Unknown,
    }
}

/// The rendered page and its cells' states (family|size|quantization|runtime -> symbol).
pub struct Page {
    /// pages/coverage.md.
    pub markdown: String,
    /// pages/coverage.html (the same table).
    pub html: String,
    /// The states shown, by cell key.
    pub states: BTreeMap<String, CellState>,
}

const MD_TEMPLATE: &str = include_str!("../../pages/templates/coverage.md");
const HTML_TEMPLATE: &str = include_str!("../../pages/templates/coverage.html");

/// Renders the page from `cells` (links relative to `link_base`, e.g. `../coverage/runs` for a page in docs/).
pub fn render(
    cells: &[Cell],
    runs: &Path,
    link_base: &str,
    expire_days: u32,
) -> Result<Page, String> {
    let newest = cells
        .iter()
        .map(|c| c.verified_utc.clone())
        .max()
        .unwrap_or_default();
    let columns: BTreeSet<String> = cells.iter().map(|c| c.runtime.clone()).collect();
    let columns: Vec<String> = columns.into_iter().collect();
    let mut rows: BTreeMap<(String, String, String), BTreeMap<String, &Cell>> = BTreeMap::new();
    for c in cells {
        rows.entry((c.family.clone(), c.size.clone(), c.quantization.clone()))
            .or_default()
            .insert(c.runtime.clone(), c);
    }
    let mut states = BTreeMap::new();
    let mut ctx_rows = Vec::new();
    let mut reasons = crate::records::leaderboard::FootnoteList::default();
    for ((family, size, quant), by_rt) in &rows {
        let mut ctx_cells = Vec::new();
        for rt in &columns {
            let key = format!("{family}|{size}|{quant}|{rt}");
            match by_rt.get(rt) {
                None => {
                    states.insert(key.clone(), CellState::Unknown);
                    ctx_cells.push(minijinja::context! { key, symbol => CellState::Unknown.symbol(), class => CellState::Unknown.class(), link => "", date => "", expires => "", why => "never run", model => "", footprint => "" });
                }
                Some(c) => {
                    let s = shown(c, &newest, expire_days);
                    states.insert(key.clone(), s);
                    // Under `runs`: relative to `link_base`; cited by a record: the checkout path, from the
                    // page's directory (`link_base` less the runs path).
                    let link = match c.evidence.strip_prefix(runs) {
                        Ok(rel) => format!("{link_base}/{}", rel.display()),
                        Err(_) => format!(
                            "{}{}",
                            link_base
                                .strip_suffix(&runs.display().to_string())
                                .unwrap_or(""),
                            c.evidence.display()
                        ),
                    };
                    let link = link.replace('[', "%5B").replace(']', "%5D");
                    let why = if s == CellState::Unknown && c.state != CellState::Unknown {
                        format!(
                            "expired (was {}; older than {expire_days} days)",
                            c.state.symbol()
                        )
                    } else {
                        c.why.clone()
                    };
                    ctx_cells.push(minijinja::context! {
                        key, symbol => s.symbol(), class => s.class(), link, date => c.verified_utc.get(..10).unwrap_or(""), why,
                        expires => if s == CellState::Unknown { String::new() } else { expires(c, expire_days) },
                        model => format!("{}[{}]", c.gate, c.model),
                        footprint => footprint_text(c, &mut reasons),
                    });
                }
            }
        }
        ctx_rows
            .push(minijinja::context! { family, size, quantization => quant, cells => ctx_cells });
    }
    let mut env = crate::records::leaderboard::page_environment();
    env.add_template("coverage.md", MD_TEMPLATE)
        .map_err(|e| e.to_string())?;
    env.add_template("coverage.html", HTML_TEMPLATE)
        .map_err(|e| e.to_string())?;
    let ctx = minijinja::context! {
        columns, rows => ctx_rows, expire_days, newest => newest.get(..10).unwrap_or("(no evidence)"),
        footprint_reasons => reasons.list,
    };
    let render = |name: &str| {
        env.get_template(name)
            .and_then(|t| t.render(&ctx))
            .map_err(|e| format!("pages/templates/{name}: {e}"))
    };
    let markdown = render("coverage.md")?;
    let html = render("coverage.html")?;
    Ok(Page {
        markdown,
        html,
        states,
    })
}

/// A cell's footprint as the page shows it: `ready 4.0 s, peak memory 182.3 MiB`, each figure the evidence
/// does not hold `–` with the number of its reason in `reasons` (`peak memory – [1]`), never 0. Reasons are
/// escaped for the page.
fn footprint_text(c: &Cell, reasons: &mut crate::records::leaderboard::FootnoteList) -> String {
    let mut part = |name: &str, v: &Result<f64, String>, show: &dyn Fn(f64) -> String| match v {
        Ok(x) => format!("{name} {}", show(*x)),
        Err(why) => format!("{name} – [{}]", reasons.number(&crate::text::page(why))),
    };
    let ready = part("ready", &c.ready_ms, &|ms| format!("{:.1} s", ms / 1000.0));
    let peak = part("peak memory", &c.rss_peak_mib, &|m| format!("{m:.1} MiB"));
    format!("{ready}, {peak}")
}

/// The cell states a committed page shows (its `<!-- cell KEY SYMBOL -->` lines).
pub fn states_of(page: &str) -> BTreeMap<String, CellState> {
    page.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("<!-- cell ")?
                .strip_suffix(" -->")
                .map(str::to_string)
        })
        .filter_map(|l| {
            let (key, sym) = l.rsplit_once(' ')?;
            Some((key.to_string(), CellState::of_symbol(sym)?))
        })
        .collect()
}

/// Coverage regressions: cells VERIFIED on the old page that the new page shows as PARTIAL or NOT-LOADING (an
/// expired UNKNOWN is not a regression: nothing was shown to be worse). Each as `KEY: VERIFIED -> PARTIAL`.
pub fn regressions(
    old: &BTreeMap<String, CellState>,
    new: &BTreeMap<String, CellState>,
) -> Vec<String> {
    old.iter()
        .filter(|(_, s)| **s == CellState::Verified)
        .filter_map(|(k, _)| match new.get(k) {
            Some(n @ (CellState::Partial | CellState::NotLoading)) => {
                Some(format!("{k}: VERIFIED -> {}", n.symbol()))
            }
            _ => None,
        })
        .collect()
}

/// The path from the page's directory to `runs` (both relative to the current directory), for links.
pub fn link_base(out: &Path, runs: &Path) -> String {
    let depth = out.parent().map(|p| p.components().count()).unwrap_or(0);
    format!("{}{}", "../".repeat(depth), runs.display())
}
