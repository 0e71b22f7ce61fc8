//! What goes here: the coverage page's rules in process (stale cells). `servegate coverage` as a program
//! (the committed page, a cell turning worse, records as evidence) is tests/cli/coverage.rs.
//!
//! The coverage page: generated from the committed matrix-gate evidence, checked, and a VERIFIED cell that turns
//! worse fails (pages/coverage.md).

use std::path::{Path, PathBuf};

use servegate::coverage::page::{self, Cell, CellState};

fn cell(date: &str, state: CellState) -> Cell {
    Cell {
        gate: "g".into(),
        model: "m".into(),
        family: "F".into(),
        size: "1B".into(),
        quantization: "Q4".into(),
        runtime: "rt".into(),
        state,
        why: String::new(),
        evidence: PathBuf::from("/runs/g[m]/x"),
        verified_utc: format!("{date}T00:00:00Z"),
        ready_ms: Ok(4001.9),
        rss_peak_mib: Err("no peak memory: run.json has no serve.footprint".into()),
    }
}

#[test]
fn stale_cells_expire_to_unknown_counted_back_from_the_newest_evidence() {
    let c = cell("2026-01-01", CellState::Verified);
    assert_eq!(
        page::shown(&c, "2026-03-31T00:00:00Z", 90),
        CellState::Verified
    );
    assert_eq!(
        page::shown(&c, "2026-04-02T00:00:00Z", 90),
        CellState::Unknown
    );
    assert_eq!(page::expires(&c, 90), "2026-04-01");
    let p = page::render(
        &[
            c.clone(),
            Cell {
                runtime: "rt2".into(),
                verified_utc: "2026-06-01T00:00:00Z".into(),
                ..c.clone()
            },
        ],
        Path::new("/runs"),
        "../runs",
        90,
    )
    .unwrap();
    assert_eq!(p.states.get("F|1B|Q4|rt"), Some(&CellState::Unknown));
    assert_eq!(p.states.get("F|1B|Q4|rt2"), Some(&CellState::Verified));
    assert!(
        p.markdown
            .contains("expired (was VERIFIED; older than 90 days)"),
        "{}",
        p.markdown
    );
    // the page's own comments read back, and an expiry is not a regression; NOT-LOADING is
    let states = page::states_of(&p.markdown);
    assert_eq!(states, p.states);
    let mut worse = states.clone();
    worse.insert("F|1B|Q4|rt2".into(), CellState::NotLoading);
    assert_eq!(
        page::regressions(&states, &worse),
        ["F|1B|Q4|rt2: VERIFIED -> NOT-LOADING"]
    );
    let mut old = states.clone();
    old.insert("F|1B|Q4|rt".into(), CellState::Verified);
    assert!(page::regressions(&old, &states).is_empty());
}

#[test]
fn states_are_words_and_a_page_written_with_glyphs_still_reads() {
    for s in [
        CellState::Verified,
        CellState::Partial,
        CellState::NotLoading,
        CellState::Unknown,
    ] {
        assert!(
            s.symbol()
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '-'),
            "{s:?}: {}",
            s.symbol()
        );
        assert_eq!(CellState::of_symbol(s.symbol()), Some(s));
    }
    let old = "<!-- cell F|1B|Q4|rt \u{2705} -->\n<!-- cell F|1B|Q4|rt2 \u{1f7e1} -->\n<!-- cell F|2B|Q4|rt ? -->\n";
    let states = page::states_of(old);
    assert_eq!(states.get("F|1B|Q4|rt"), Some(&CellState::Verified));
    assert_eq!(states.get("F|1B|Q4|rt2"), Some(&CellState::Partial));
    assert_eq!(states.get("F|2B|Q4|rt"), Some(&CellState::Unknown));
}

/// Each cell ends with its run's start-up time and peak memory; a figure the evidence does not hold is
/// `– [k]` with reason k listed once under the table (escaped), never 0. Reasons are numbered in column order
/// (`remote` sorts first).
#[test]
fn cells_show_ready_time_and_peak_memory_or_why_not() {
    let a = cell("2026-12-01", CellState::Verified);
    let big = Cell {
        runtime: "vllm".into(),
        ready_ms: Ok(462_051.9),
        rss_peak_mib: Ok(2841.25),
        ..a.clone()
    };
    let url = Cell {
        runtime: "remote".into(),
        ready_ms: Err("no start-up time: the serve was reached at its url (\u{1b}[31mx), not started by servegate".into()),
        ..a.clone()
    };
    let p = page::render(&[a, big, url], Path::new("/runs"), "../runs", 90).unwrap();
    for text in [&p.markdown, &p.html] {
        assert!(text.contains("ready 4.0 s, peak memory – [2]"), "{text}");
        assert!(
            text.contains("ready 462.1 s, peak memory 2841.2 MiB"),
            "{text}"
        );
        assert!(text.contains("ready – [1], peak memory – [2]"), "{text}");
        assert!(!text.contains("peak memory 0"), "{text}");
        assert!(!text.contains('\u{1b}'), "outside text escaped");
    }
    assert!(
        p.markdown
            .contains("1. no start-up time: the serve was reached at its url (\\u{1b}[31mx), not started by servegate\n2. no peak memory: run.json has no serve.footprint\n"),
        "{}",
        p.markdown
    );
    assert!(p
        .html
        .contains("<li>no peak memory: run.json has no serve.footprint</li>"));
}
