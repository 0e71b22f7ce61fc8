//! What goes here: records and pages in process (the broken corpus listed, the rendered pages' snapshots,
//! table escaping, seed imports). `servegate records check` and `leaderboard` as programs are
//! tests/cli/records.rs.
//!
//! Records and the leaderboard end to end: `servegate records check` on the committed records and on the
//! broken-record corpus (tests/data/records/broken/<case>/), the rendered pages pinned by insta snapshots
//! (tests/data/records/snapshot/ → tests/snapshots/records__leaderboard_{md,html}.snap; after an intended
//! change, `cargo insta review` or `INSTA_UPDATE=always cargo test --test pure --test cli records` and review the diff; a
//! missing or changed snapshot fails the test), and `leaderboard --check`.

use crate::fixtures::records::BROKEN;
use crate::fixtures::{data, root};
use servegate::records::leaderboard;
use servegate::records::record;

#[test]
fn every_broken_case_is_listed() {
    let mut on_disk: Vec<String> = std::fs::read_dir(data("records/broken"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = BROKEN.iter().map(|(c, _, _)| c.to_string()).collect();
    listed.sort();
    listed.dedup();
    assert_eq!(on_disk, listed);
}

/// The snapshot records, schema-checked (`record::check_dir`) but not re-derived: they are fixtures for the
/// renderer and cite evidence that is not kept (`leaderboard` itself loads through `record::load_dir`, which
/// would refuse them).
fn snapshot_records() -> Vec<record::Record> {
    let checked = record::check_dir(&data("records/snapshot")).unwrap();
    assert!(
        checked.iter().all(|c| c.problems.is_empty()),
        "snapshot records are valid: {:?}",
        record::problem_lines(&checked)
    );
    checked.into_iter().filter_map(|c| c.record).collect()
}

#[test]
fn snapshot_pins_the_rendered_pages() {
    let records = snapshot_records();
    let pages = leaderboard::render(&records, "../data/records").unwrap();
    insta::assert_snapshot!("leaderboard_md", pages.markdown);
    insta::assert_snapshot!("leaderboard_html", pages.html);
    // Rendering does not depend on the order records are given in.
    let mut reversed = records.clone();
    reversed.reverse();
    assert_eq!(
        leaderboard::render(&reversed, "../data/records").unwrap(),
        pages
    );
}

/// Splits a Markdown table row on unescaped `|`.
fn cells(line: &str) -> usize {
    let mut n = 0;
    let mut prev = ' ';
    for c in line.chars() {
        if c == '|' && prev != '\\' {
            n += 1;
        }
        prev = c;
    }
    n
}

#[test]
fn pipes_and_line_breaks_in_notes_do_not_break_the_table() {
    let records = snapshot_records();
    let md = leaderboard::render(&records, "../data/records")
        .unwrap()
        .markdown;
    assert!(
        md.contains("A note with a \\| pipe<br>and a line break \\| must stay in its cell."),
        "{md}"
    );
    // Every line of every table has as many cell separators as its header.
    let mut header = None;
    for line in md.lines() {
        if !line.starts_with('|') {
            header = None;
            continue;
        }
        let h = *header.get_or_insert(cells(line));
        assert_eq!(cells(line), h, "row breaks the table: {line}");
    }
    let html = leaderboard::render(&records, "../data/records")
        .unwrap()
        .html;
    assert!(html.contains("A note with a | pipe\nand a line break | must stay in its cell."));
}

#[test]
fn indicative_pair_and_prefix_rows_say_so() {
    let records = snapshot_records();
    let md = leaderboard::render(&records, "../data/records")
        .unwrap()
        .markdown;
    let row = |id: &str| {
        md.lines()
            .find(|l| l.contains(&format!("[{id}]")))
            .unwrap_or_else(|| panic!("no row {id}"))
            .to_string()
    };
    assert!(row("tiny-decode-c").contains("| **indicative** |"));
    assert!(!row("tiny-decode-b").contains("indicative"));
    let pair = row("npu-pair-decode");
    assert!(pair.contains("| 39.25 vs 45.57 (Rival 2.0); ratio other / this = 1.16; arms other → this → this → other |"), "{pair}");
    assert!(
        pair.contains("`b1c1fe9d6c4a6d0c` (prefix only)") && pair.contains("values not published"),
        "{pair}"
    );
}

#[test]
fn seed_records_are_imported_as_published() {
    let records = record::load_dir(&root().join("data/records")).unwrap();
    let get = |id: &str| {
        records
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{id}"))
    };
    let r = get("lfm25-12b-perop-first-token-20261111");
    assert_eq!(
        (r.value, r.n, r.values.clone()),
        (0.929, 2, Some(vec![1.094, 0.763]))
    );
    assert!(r.indicative() && r.sha256_prefix_only());
    assert_eq!(r.model.sha256, "b341d42021e617a5");
    let pair = get("qwen3-17b-fused-decode-flm-pair-20261111");
    let p = pair.pair.as_ref().unwrap();
    assert_eq!(
        (pair.value, pair.range, p.other_value, p.ratio),
        (39.25, [39.20, 39.32], 45.57, 1.16)
    );
    assert_eq!(p.arm_order, ["other", "this", "this", "other"]);
    assert!(pair.values.is_none() && pair.values_unavailable.is_some());
    let seven = records
        .iter()
        .filter(|r| r.source.kind == "published")
        .count();
    assert_eq!(seven, 7);
}
