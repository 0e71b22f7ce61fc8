//! What goes here: `servegate records check` and `servegate leaderboard` as programs. Records and pages in
//! process (and the pages' snapshots) are tests/pure/records.rs.
//!
//! Records and the leaderboard end to end: `servegate records check` on the committed records and on the
//! broken-record corpus (tests/data/records/broken/<case>/), the rendered pages pinned by insta snapshots
//! (tests/data/records/snapshot/ → tests/snapshots/records__leaderboard_{md,html}.snap; after an intended
//! change, `cargo insta review` or `INSTA_UPDATE=always cargo test --test pure --test cli records` and review the diff; a
//! missing or changed snapshot fails the test), and `leaderboard --check`.

use std::path::Path;

use crate::fixtures::records::BROKEN;
use crate::fixtures::servegate_in;
use crate::fixtures::text;
use crate::fixtures::{data, root};
use servegate::records::record;

#[test]
fn committed_records_pass_check() {
    let o = servegate_in(&["records", "check"], &root());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("0 invalid"), "{out}");
    // n < 3 is flagged wherever a record is shown, including here.
    assert!(
        out.contains("lfm2-12b-perop-decode-20261111.json: ok")
            && out.contains("indicative (n = 2)"),
        "{out}"
    );
}

#[test]
fn each_broken_record_fails_naming_file_and_field() {
    let mut failures = Vec::new();
    for (case, file, expected) in BROKEN {
        let dir = data("records/broken").join(case);
        let o = servegate_in(
            &["records", "check", "--dir", dir.to_str().unwrap()],
            &root(),
        );
        let out = text(&o);
        let line = format!("{}: {expected}", dir.join(file).display());
        if o.status.code() != Some(servegate::error::exit::SPEC_INVALID) || !out.contains(&line) {
            failures.push(format!(
                "case {case}: expected exit 3 and a line starting {line:?}; got exit {:?}:\n{out}",
                o.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn committed_page_is_what_the_committed_records_render() {
    let o = servegate_in(&["leaderboard", "--check"], &root());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// A copy of the committed records and pages in a temp dir, so tests can edit them.
fn copy_of_committed() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("data/records")).unwrap();
    std::fs::create_dir_all(tmp.path().join("pages")).unwrap();
    for f in record::record_files(&root().join("data/records")).unwrap() {
        std::fs::copy(
            &f,
            tmp.path().join("data/records").join(f.file_name().unwrap()),
        )
        .unwrap();
    }
    for page in ["pages/leaderboard.md", "pages/leaderboard.html"] {
        std::fs::copy(root().join(page), tmp.path().join(page)).unwrap();
    }
    // The evidence too: the page draws each gate's floor from the gate.toml in its records' evidence.
    copy_tree(
        &root().join("data/records/evidence"),
        &tmp.path().join("data/records/evidence"),
    );
    tmp
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn editing_one_character_of_the_committed_page_fails_check_with_a_diff() {
    for page in ["pages/leaderboard.md", "pages/leaderboard.html"] {
        let tmp = copy_of_committed();
        let o = servegate_in(&["leaderboard", "--check"], tmp.path());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let path = tmp.path().join(page);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes.iter().position(|&b| b == b'L').expect("an L to edit");
        bytes[at] = b'l';
        std::fs::write(&path, &bytes).unwrap();
        let o = servegate_in(&["leaderboard", "--check"], tmp.path());
        let out = text(&o);
        assert_eq!(
            o.status.code(),
            Some(servegate::error::exit::ASSERTION_FAILED),
            "{page}: {out}"
        );
        assert!(
            out.contains(&format!(
                "--- {page}\n+++ {page} (rendered from data/records)\n@@ "
            )),
            "{page}: {out}"
        );
        assert!(out.contains(&format!("{page}: differs")), "{out}");
        // --check wrote nothing: the edited page is still edited.
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
    }
}

#[test]
fn a_record_edit_makes_check_fail_until_the_page_is_rendered() {
    let tmp = copy_of_committed();
    let f = tmp
        .path()
        .join("data/records/lfm25-12b-thinking-perop-decode-20261111.json");
    let edited = std::fs::read_to_string(&f)
        .unwrap()
        .replace("\"load1_end\": 13.0", "\"load1_end\": 12.0");
    std::fs::write(&f, edited).unwrap();
    assert_eq!(
        servegate_in(&["leaderboard", "--check"], tmp.path())
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        servegate_in(&["leaderboard"], tmp.path()).status.code(),
        Some(0)
    );
    assert_eq!(
        servegate_in(&["leaderboard", "--check"], tmp.path())
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn help_prints_usage_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["leaderboard", "--help"][..],
        &["records", "check", "--help"][..],
        &["records", "--help"][..],
    ] {
        let o = servegate_in(args, tmp.path());
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage"));
    }
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "--help wrote something"
    );
}

#[test]
fn out_writes_both_pages_elsewhere_with_working_links() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("site/board.md");
    let o = servegate_in(&["leaderboard", "--out", out.to_str().unwrap()], &root());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(tmp.path().join("site/board.html").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o644,
            "pages are readable like other files"
        );
    }
    // The link from the page's directory reaches the record file.
    let link = md.split("](").nth(1).unwrap().split(')').next().unwrap();
    assert!(out.parent().unwrap().join(link).is_file(), "{link}");
    // The committed page was not touched and --check with the same --out passes.
    let o = servegate_in(
        &["leaderboard", "--check", "--out", out.to_str().unwrap()],
        &root(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn leaderboard_refuses_invalid_records() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = data("records/broken/median-mismatch");
    let out = tmp.path().join("page.md");
    let o = servegate_in(
        &[
            "leaderboard",
            "--records",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &root(),
    );
    assert_eq!(
        o.status.code(),
        Some(servegate::error::exit::SPEC_INVALID),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("median-mismatch.json: value:"));
    assert!(!out.exists());
}

/// A directory of no record is nothing to do for all three readers of records alike: `records check`,
/// `leaderboard` and `export` exit 7 (NOTHING_CHECKED) naming the directory, and write nothing.
#[test]
fn an_empty_records_directory_is_nothing_to_do_for_check_leaderboard_and_export() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("records");
    std::fs::create_dir(&dir).unwrap();
    let d = dir.to_str().unwrap();
    let out = tmp.path().join("pages/leaderboard.md");
    let o = tmp.path().join("export.json");
    for args in [
        vec!["records", "check", "--dir", d],
        vec![
            "leaderboard",
            "--records",
            d,
            "--out",
            out.to_str().unwrap(),
        ],
        vec!["export", "--bmf", d],
        vec!["export", "--openmetrics", d, "-o", o.to_str().unwrap()],
    ] {
        let r = servegate_in(&args, tmp.path());
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(
            r.status.code(),
            Some(servegate::error::exit::NOTHING_CHECKED),
            "{args:?}: {err}"
        );
        assert!(
            err.contains(&format!("no record (*.json) in {d}")),
            "{args:?}: {err}"
        );
        assert!(
            !String::from_utf8_lossy(&r.stdout).contains("{}"),
            "{args:?}"
        );
    }
    assert!(!out.exists() && !o.exists());
}

/// `leaderboard --records` of a directory that does not exist says so once (it printed the read error
/// twice: as the refused line and again in the summary), exit 3 as any refused records directory.
#[test]
fn a_missing_records_directory_is_said_once() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-records");
    let r = servegate_in(
        &["leaderboard", "--records", missing.to_str().unwrap()],
        tmp.path(),
    );
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(3), "{err}");
    assert_eq!(err.matches("cannot read directory").count(), 1, "{err}");
    assert!(err.contains("nothing rendered"), "{err}");
}
