//! The conformance table (docs/contract.md "Conformance"): check × runtime, from the committed evidence of
//! `[contract]` gates, each cell the check's state judged again from that evidence by this build's judge
//! (`judge::contract::judge_check`: what the check found, before `expect` / `may_lack` decide whether it fails
//! the gate), linked to the check's evidence directory. Every state is a word (`PASS`, `FAIL`,
//! `INDETERMINATE`, `UNSUPPORTED`, `NOT RUN`, `EXPIRED`), never a glyph: a page shown without an emoji font
//! still says it.
//!
//! The evidence root holds run directories as `servegate run` writes them, `<root>/<gate>/<stamp>/` (the
//! gate's copy `gate.toml`, `run.json`, `contract/<check>/`); per gate the newest complete run is one column.
//! A column's runtime is the gate's `[record] engine`, else the engine the run detected, else the gate's
//! `[serve] engine`, else the gate's name. A column whose run is more than `expire_days` older than the
//! newest column's shows every cell `EXPIRED (was ...)`: counted back from the newest evidence, not from today, so the page is a pure function
//! of the evidence, as the coverage page's cells are.

use std::path::{Path, PathBuf};

use crate::judge::contract::{judge_check, CheckContext, CheckState};
use crate::vocab::ContractCheck;

/// One cell: the check's state on one runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// `PASS`, `FAIL`, `INDETERMINATE`, `UNSUPPORTED`, or `NOT RUN` (the gate does not run the check).
    pub word: &'static str,
    /// What the judge said (empty when not run).
    pub why: String,
    /// `expect` or `may_lack`: how the gate lists it (empty when not run).
    pub listed: &'static str,
}

/// One runtime's column: its newest complete contract run.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The runtime's name (`[record] engine`, else the detected engine, else the gate's name).
    pub runtime: String,
    /// The serve's version as the run found it (`xllamacpp 2026.10.11549`, `llama.cpp b0-unknown`), or "".
    pub version: String,
    /// The gate's name.
    pub gate: String,
    /// The run directory.
    pub run: PathBuf,
    /// The run's `started_utc`.
    pub started_utc: String,
    /// Every known check's cell, in [`ContractCheck::ALL`] order.
    pub cells: Vec<(ContractCheck, Cell)>,
}

/// The newest complete run of every `[contract]` gate under `root` (`<root>/<gate>/<stamp>/`), judged, in
/// gate order. A run that cannot be read, is not complete or runs no `[contract]` is passed over (the next
/// older one is tried).
pub fn columns(root: &Path) -> Vec<Column> {
    let mut gates: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    gates.sort();
    let mut out = Vec::new();
    for g in gates {
        let mut stamps: Vec<PathBuf> = std::fs::read_dir(&g)
            .map(|r| {
                r.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        stamps.sort();
        if let Some(c) = stamps.iter().rev().find_map(|s| column_of(s)) {
            out.push(c);
        }
    }
    out
}

fn column_of(dir: &Path) -> Option<Column> {
    let gate_file = dir.join(crate::evidence::layout::GATE_FILE);
    let spec = crate::spec::load(&gate_file).ok()?;
    let contract = spec.contract.as_ref()?;
    let ev = crate::loaded::load(dir).ok()?;
    if ev.run.status != crate::evidence::RunStatus::Complete {
        return None;
    }
    let evidence = crate::loaded::load_contract(dir).ok()?;
    let cells = ContractCheck::ALL
        .iter()
        .map(|check| {
            let cell = match (
                contract.checks.iter().find(|c| c.check == *check),
                evidence.checks.get(check.name()),
            ) {
                (Some(c), Some(xs)) => {
                    let ctx = CheckContext {
                        served_model: &spec.request.served_model,
                        engine: crate::judge::contract::engine_of(&spec, &ev),
                        log: evidence.logs.get(check.name()).map(String::as_str),
                        metrics: evidence
                            .metrics
                            .get(check.name())
                            .map(|(b, a)| (b.as_str(), a.as_str())),
                    };
                    let (word, why) = match judge_check(c, xs, &ctx) {
                        CheckState::Pass(d) => ("PASS", d),
                        CheckState::Fail(d) => ("FAIL", d),
                        CheckState::Indeterminate(d) => ("INDETERMINATE", d),
                        CheckState::Unsupported(d) => ("UNSUPPORTED", d),
                    };
                    Cell {
                        word,
                        why: crate::text::shown(&why),
                        listed: listed(c),
                    }
                }
                (Some(c), None) => Cell {
                    word: "FAIL",
                    why: "its requests were not sent to their end (no check.json under contract/)"
                        .into(),
                    listed: listed(c),
                },
                (None, _) => Cell {
                    word: "NOT RUN",
                    why: String::new(),
                    listed: "",
                },
            };
            (*check, cell)
        })
        .collect();
    let record = |k: &str| {
        spec.record
            .as_ref()
            .and_then(|t| t.get(k))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let runtime = record("engine")
        .or_else(|| {
            ev.run
                .serve
                .detected
                .as_ref()
                .and_then(|d| d.engine.clone())
        })
        .or_else(|| spec.serve.engine.map(|e| e.name().to_string()))
        .unwrap_or_else(|| spec.name.clone());
    let version = ev
        .run
        .serve
        .package_version
        .clone()
        .or_else(|| ev.run.serve.version.clone())
        .or_else(|| record("engine_version"))
        .unwrap_or_default();
    Some(Column {
        runtime,
        version,
        gate: spec.name.clone(),
        run: dir.to_path_buf(),
        started_utc: ev.run.started_utc.clone(),
        cells,
    })
}

/// How the gate lists a check: `expect`, `may_lack` or `known_fail`.
fn listed(c: &crate::spec::contract::CheckSpec) -> &'static str {
    match (c.expected, c.known_fail) {
        (true, _) => "expect",
        (false, true) => "known_fail",
        (false, false) => "may_lack",
    }
}

/// The rendered page: Markdown and HTML.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// `pages/conformance.md`.
    pub markdown: String,
    /// `pages/conformance.html`.
    pub html: String,
}

const MD_TEMPLATE: &str = include_str!("../../pages/templates/conformance.md");
const HTML_TEMPLATE: &str = include_str!("../../pages/templates/conformance.html");

/// Days from the Unix epoch of an RFC 3339 UTC stamp's date, or None.
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

/// Renders the page from `columns` (links relative to `link_base`, the evidence root `root` as seen from the
/// page's directory, e.g. `../data/coverage/contract`); a column more than `expire_days` older than the newest
/// shows its cells `EXPIRED`.
pub fn render(
    columns: &[Column],
    root: &Path,
    link_base: &str,
    expire_days: u32,
) -> Result<Page, String> {
    let newest = columns
        .iter()
        .map(|c| c.started_utc.clone())
        .max()
        .unwrap_or_default();
    let newest_day = day_of(&newest);
    let link_of = |c: &Column, check: ContractCheck| {
        let rel = c.run.strip_prefix(root).unwrap_or(&c.run);
        format!("{link_base}/{}/contract/{}/", rel.display(), check.name())
            .replace('[', "%5B")
            .replace(']', "%5D")
    };
    let expired: Vec<bool> = columns
        .iter()
        .map(|c| match (day_of(&c.started_utc), newest_day) {
            (Some(d), Some(n)) => n - d > expire_days as i64,
            _ => false,
        })
        .collect();
    let word_of = |cell: &Cell, expired: bool| {
        if expired && cell.word != "NOT RUN" {
            format!("EXPIRED (was {})", cell.word)
        } else {
            cell.word.to_string()
        }
    };
    let mut ctx_cols = Vec::new();
    for (c, exp) in columns.iter().zip(&expired) {
        let details: Vec<minijinja::Value> = c
            .cells
            .iter()
            .filter(|(_, cell)| cell.word != "NOT RUN")
            .map(|(check, cell)| {
                minijinja::context! {
                    check => check.name(), word => word_of(cell, *exp), listed => cell.listed,
                    why => cell.why.clone(), link => link_of(c, *check),
                }
            })
            .collect();
        ctx_cols.push(minijinja::context! {
            runtime => c.runtime.clone(), version => c.version.clone(), gate => c.gate.clone(),
            date => c.started_utc.get(..10).unwrap_or("").to_string(), expired => *exp, details,
        });
    }
    let mut rows = Vec::new();
    for (i, check) in ContractCheck::ALL.iter().enumerate() {
        let mut cells = Vec::new();
        for (c, exp) in columns.iter().zip(&expired) {
            let cell = &c.cells[i].1;
            let link = if cell.word == "NOT RUN" {
                String::new()
            } else {
                link_of(c, *check)
            };
            cells.push(minijinja::context! {
                word => word_of(cell, *exp), link, listed => cell.listed,
                state => cell.word.to_ascii_lowercase().replace(' ', "-"),
            });
        }
        rows.push(minijinja::context! { check => check.name(), cells });
    }
    let mut env = crate::records::leaderboard::page_environment();
    env.add_template("conformance.md", MD_TEMPLATE)
        .map_err(|e| e.to_string())?;
    env.add_template("conformance.html", HTML_TEMPLATE)
        .map_err(|e| e.to_string())?;
    let ctx = minijinja::context! {
        columns => ctx_cols, rows, expire_days,
        newest => newest.get(..10).unwrap_or("(no evidence)"),
    };
    let render = |name: &str| {
        env.get_template(name)
            .and_then(|t| t.render(&ctx))
            .map_err(|e| format!("templates/{name}: {e}"))
    };
    Ok(Page {
        markdown: render("conformance.md")?,
        html: render("conformance.html")?,
    })
}
