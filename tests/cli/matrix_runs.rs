//! A matrix gate's run directory (its gate.toml holds `[[model]]` entries) through the commands that read a
//! run directory: `judge` and `export` pick the run's own entry (run.json `gate`), a run.json that cannot be
//! read is an evidence error (exit 5) naming that file, not a spec error about the entry, and `bless`
//! refuses a matrix gate by name. Uses the committed coverage evidence (data/coverage/runs).

use crate::fixtures;
use crate::fixtures::{copy_dir, text};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A copy of one committed matrix run (llama.cpp, the second model), in `tmp`.
fn matrix_run(tmp: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/coverage/runs");
    let gate_dir = std::fs::read_dir(&root)
        .expect("data/coverage/runs")
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("reference-matrix[")
        })
        .min()
        .expect("a committed reference-matrix run");
    let run = std::fs::read_dir(&gate_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    let dest = tmp.join("run");
    copy_dir(&run, &dest);
    dest
}

fn run(args: &[&str], dir: &Path) -> Output {
    fixtures::servegate().args(args).arg(dir).output().unwrap()
}

#[test]
fn judge_and_export_read_a_matrix_run_by_its_own_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = matrix_run(tmp.path());
    let j = run(&["judge"], &dir);
    assert_eq!(j.status.code(), Some(0), "{}", text(&j));
    assert!(text(&j).contains("RESULT: PASS"), "{}", text(&j));
    let e = run(&["export", "--gab-bigger"], &dir);
    assert_eq!(e.status.code(), Some(0), "{}", text(&e));
    let v: serde_json::Value = serde_json::from_slice(&e.stdout).expect("export JSON");
    assert!(v.as_array().is_some_and(|a| !a.is_empty()), "{v}");
}

#[test]
fn an_unreadable_run_json_in_a_matrix_run_is_an_evidence_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = matrix_run(tmp.path());
    std::fs::write(dir.join("run.json"), "").unwrap();
    let j = run(&["judge"], &dir);
    assert_eq!(j.status.code(), Some(5), "{}", text(&j));
    assert!(text(&j).contains("run.json"), "{}", text(&j));
    assert!(!text(&j).contains("none of its entries"), "{}", text(&j));
}

#[test]
fn bless_refuses_a_matrix_gate_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = matrix_run(tmp.path());
    let gate = Path::new(env!("CARGO_MANIFEST_DIR")).join("gates/reference-matrix.toml");
    let o = fixtures::servegate()
        .arg("bless")
        .arg(&gate)
        .arg("--floor")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("is a matrix gate"), "{}", text(&o));
    assert!(!text(&o).contains("unknown field"), "{}", text(&o));
}
