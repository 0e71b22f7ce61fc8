//! The gates harness's own output and reports, under what a CI or a shell does to it: a reader that closes
//! stdout early (`cargo test --test gates | head -3`) and trials filtered out by the test arguments
//! (`-- --skip b-fail::rate`). Each runs the harness program (`servegate::run::harness::program`, what
//! `tests/gates.rs` runs) in a re-executed copy of this test binary (`fixtures::harness`), on the synthetic gates of
//! tests/data/repro/harness/mixed (`a-pass` passes, `b-fail` fails its rate).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::root;
use crate::fixtures::{self, Entry};

/// A scratch directory with gates `a-pass` and `b-fail` (and their serve script) in `gates/`.
fn scratch() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let gates = tmp.path().join("gates");
    std::fs::create_dir_all(&gates).unwrap();
    let from = root().join("tests/data/repro/harness/mixed");
    for f in ["a-pass.toml", "b-fail.toml", "logserve.sh"] {
        std::fs::copy(from.join(f), gates.join(f)).unwrap();
    }
    tmp
}

/// The harness program (`fixtures::Entry::Program`) on `work`'s gates, its reports in `work`.
fn harness(work: &Path, args: &[&str]) -> Command {
    let mut c = fixtures::harness(Entry::Program, args);
    c.env("PATH", fixtures::path_env())
        .env("SERVEGATE_GATES", work.join("gates"))
        .env("SERVEGATE_RUNS", work.join("runs"))
        .env("SERVEGATE_JSON", work.join("results.json"))
        .env("SERVEGATE_JUNIT", work.join("junit.xml"))
        .env("SERVEGATE_SUMMARY", work.join("summary.md"));
    c
}

fn results(work: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(work.join("results.json"))
        .unwrap_or_else(|e| panic!("no results.json: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn gate<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| panic!("no gate {name}: {r}"))
}

/// `| head -3`: the reader closes stdout once the harness's trials have begun. The harness runs every trial,
/// writes its three reports whole, and ends with libtest's "a test failed" (b-fail), not a panic in its
/// printer.
#[test]
fn a_closed_stdout_is_not_a_crash_and_the_reports_are_written() {
    // a-pass passes only when the client timed its replies: on a busy machine a reply it was too late to
    // time makes it (rightly) INDETERMINATE, and the whole trial is run again (fixtures::timed_by_the_client).
    let attempt = || {
        let work = scratch();
        let err = std::fs::File::create(work.path().join("stderr")).unwrap();
        let mut child = harness(work.path(), &[])
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = Vec::new();
        // Up to the harness's own title ("running 5 tests"), then close, as `head` does after its lines.
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let title = line.starts_with("running 5 tests");
            seen.push(line);
            if title {
                break;
            }
        }
        drop(out);
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the harness did not end"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        (work, seen, status)
    };
    let (work, seen, status) = fixtures::timed_by_the_client(
        3,
        attempt,
        |(w, _, _)| gate(&results(w.path()), "a-pass")["status"] == "passed",
        |(w, _, _)| std::fs::read_to_string(w.path().join("results.json")).unwrap_or_default(),
    );
    let stderr = std::fs::read_to_string(work.path().join("stderr")).unwrap();
    assert!(
        seen.iter().any(|l| l.starts_with("running 5 tests")),
        "{seen:?}\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(status.code(), Some(101), "{stderr}");
    let r = results(work.path());
    assert_eq!(r["counts"]["tests"], 5, "{r}");
    assert_eq!(gate(&r, "a-pass")["status"], "passed", "{r}");
    assert_eq!(gate(&r, "b-fail")["status"], "failed", "{r}");
    let junit = std::fs::read_to_string(work.path().join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase").count(), 5, "{junit}");
    let summary = std::fs::read_to_string(work.path().join("summary.md")).unwrap();
    assert!(summary.contains("b-fail"), "{summary}");
}

/// `--skip b-fail::rate`: b-fail's content trial runs (so its gate runs, and judges its rate all the same);
/// its rate trial is `not_run` in the results, never listed as passed, and the gate is `partial`, not
/// `passed`. The gate report shows the rate verdict marked as not run.
#[test]
fn a_filtered_out_trial_is_not_run_never_passed() {
    // a-pass needs replies the client timed: on a busy runner it may be an honest INDETERMINATE, tried again.
    let (work, out) = fixtures::timed_by_the_client(
        3,
        || {
            let work = scratch();
            let out = harness(work.path(), &["--skip", "b-fail::rate"])
                .output()
                .unwrap();
            (work, out)
        },
        |(w, _)| gate(&results(w.path()), "a-pass")["status"] == "passed",
        |(_, o)| String::from_utf8_lossy(&o.stdout).into_owned(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r = results(work.path());
    let b = gate(&r, "b-fail");
    assert_eq!(b["status"], "partial", "{b}");
    assert_eq!(b["not_run"], serde_json::json!(["rate"]), "{b}");
    let names: Vec<&str> = b["assertions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["content"], "{b}");
    assert_eq!(gate(&r, "a-pass")["status"], "passed", "{r}");
    assert!(gate(&r, "a-pass").get("not_run").is_none(), "{r}");
    assert_eq!(r["counts"]["passed"], 4, "{r}");
    assert_eq!(r["counts"]["tests"], 4, "{r}");
    let line = stdout
        .lines()
        .find(|l| l.contains("rate FAIL"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.trim_start()
            .starts_with("(not run: filtered out by the test arguments) rate FAIL"),
        "{line}"
    );
    // A gate none of whose trials is selected is not in the results at all (nothing of it ran).
    let (work, out) = fixtures::timed_by_the_client(
        3,
        || {
            let work = scratch();
            let out = harness(work.path(), &["a-pass::"]).output().unwrap();
            (work, out)
        },
        |(_, o)| o.status.code() == Some(0),
        |(_, o)| String::from_utf8_lossy(&o.stdout).into_owned(),
    );
    assert_eq!(out.status.code(), Some(0));
    let r = results(work.path());
    assert_eq!(r["gates"].as_array().unwrap().len(), 1, "{r}");
}
