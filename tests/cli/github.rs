//! What goes here: `servegate run` and the gates harness under `GITHUB_ACTIONS=true` (annotations, the step
//! summary and its cap). The annotation's line in process is tests/pure/github.rs.
//!
//! GitHub Actions surfaces, end to end (annotations on the TOML line, the job summary): `servegate run` on a failing gate with `GITHUB_ACTIONS=true`
//! annotates the gate file at the line that declares each failed assertion (the `floor_tok_s` line for a rate
//! failure, the `[assert.X]` header otherwise) and appends the Markdown summary to `$GITHUB_STEP_SUMMARY`
//! with the artifact link; without it nothing is annotated. And the step summary of a run with 1,000 failing
//! trials stays under GitHub's 1 MiB cap (what an earlier step wrote counts) and says how many rows were left
//! out. The gate's serve is `servegate scripted-serve` playing tests/data/github/serves/london-50.toml
//! (found on PATH: each run puts the binary's directory first).

use std::path::Path;

use crate::fixtures::{self, Entry};

use crate::fixtures::root;
use servegate::sinks::markdown::BUDGET_BYTES;
use servegate::sinks::outputs::append_step_summary;
use servegate::sinks::report::{AssertionResult, GateResults, Producer, Results, TestOutcome};

const GATE: &str = "tests/data/github/rate-fail.toml";

/// The 1-based line of the first line of `text` that starts with `prefix`, found here independently of the
/// spec's own span lookup.
fn line_starting(text: &str, prefix: &str) -> usize {
    text.lines()
        .position(|l| l.trim_start().starts_with(prefix))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no line starting {prefix:?}"))
}

fn run(env: &[(&str, &Path)], extra: &[(&str, &str)], tmp: &Path) -> (i32, String) {
    let mut cmd = fixtures::servegate();
    cmd.current_dir(root())
        .env("PATH", fixtures::path_env())
        .args(["run", "-q", "--runs"])
        .arg(tmp.join("runs"))
        .arg(GATE);
    for (k, v) in env {
        cmd.env(k, v);
    }
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn a_failing_gate_under_github_actions_is_annotated_at_its_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("step-summary.md");
    std::fs::write(&summary, "## an earlier step\n\n").unwrap();
    let junit = tmp.path().join("junit.xml");
    let (code, stdout) = run(
        &[
            ("GITHUB_STEP_SUMMARY", &summary),
            ("SERVEGATE_JUNIT", &junit),
        ],
        &[
            ("GITHUB_ACTIONS", "true"),
            (
                "SERVEGATE_ARTIFACT_URL",
                "https://example.invalid/runs/7/artifacts/9",
            ),
        ],
        tmp.path(),
    );
    assert_eq!(code, 1, "{stdout}");
    let text = std::fs::read_to_string(root().join(GATE)).unwrap();
    let floor = line_starting(&text, "floor_tok_s");
    let known = line_starting(&text, "[assert.known_answer]");
    let errors: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("::error "))
        .collect();
    assert_eq!(errors.len(), 2, "{stdout}");
    assert!(
        errors[0].starts_with(&format!(
            "::error file={GATE},line={floor},title=gh-rate-fail%3A%3Arate::rate FAIL median 50.0 tok/s"
        )),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with(&format!(
            "::error file={GATE},line={known},title=gh-rate-fail%3A%3Aknown_answer::known_answer FAIL"
        )),
        "{}",
        errors[1]
    );
    // The passing assertion is not annotated; the annotations come before the RESULT line.
    assert!(!stdout.contains("content%3A"), "{stdout}");
    assert!(stdout.find("::error").unwrap() < stdout.find("RESULT: FAIL").unwrap());
    // The job summary is appended, with the artifact link.
    let s = std::fs::read_to_string(&summary).unwrap();
    assert!(
        s.starts_with("## an earlier step\n\n# servegate: FAIL (exit 1)\n"),
        "{s}"
    );
    assert!(
        s.contains("Evidence artifact: [https://example.invalid/runs/7/artifacts/9]"),
        "{s}"
    );
    assert!(
        s.contains("| rate | FAIL | 50.0 tok/s | 1000.0 tok/s | 1 of 1 |"),
        "{s}"
    );
    // JUnit: every testcase carries the gate file and line, the evidence, the model hash, the engine version
    // and its state.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let cases: Vec<&str> = xml.split("<testcase ").skip(1).collect();
    assert_eq!(cases.len(), 3, "{xml}");
    let content = line_starting(&text, "[assert.content]");
    for (case, (line, state)) in
        cases
            .iter()
            .zip([(floor, "fail"), (content, "pass"), (known, "fail")])
    {
        let prop = |k: &str| {
            let key = format!("<property name=\"{k}\" value=\"");
            let at = case.find(&key).unwrap_or_else(|| panic!("no {k}: {case}"));
            let rest = &case[at + key.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        };
        assert_eq!(prop("gate_file"), GATE);
        assert_eq!(prop("gate_line"), line.to_string(), "{case}");
        assert_eq!(prop("state"), state);
        assert!(
            prop("evidence_dir").contains("runs/gh-rate-fail/"),
            "{case}"
        );
        assert!(!prop("model_sha256").is_empty() && !prop("engine_version").is_empty());
    }
}

#[test]
fn without_github_actions_nothing_is_annotated() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("step-summary.md");
    let (code, stdout) = run(
        &[("GITHUB_STEP_SUMMARY", &summary)],
        &[("GITHUB_ACTIONS", "false")],
        tmp.path(),
    );
    assert_eq!(code, 1, "{stdout}");
    assert!(!stdout.contains("::error"), "{stdout}");
    assert!(!summary.exists(), "no step summary outside GitHub Actions");
}

fn thousand_failing_trials() -> Results {
    let mut r = Results::begin(Producer::Harness, false);
    let tests = (0..1000)
        .map(|i| {
            let mut t = AssertionResult::new(
                "big",
                &format!("rate{i:04}"),
                TestOutcome::Failed,
                None,
                &format!(
                    "rate FAIL median {:.1} tok/s (floor 15.0; each: {}; n=20 of 20 planned)",
                    5.0 + i as f64 / 1000.0,
                    vec!["5.0"; 20].join(", ")
                ),
                0.0,
            );
            t.median = Some(5.0);
            t.bound = Some(15.0);
            t.unit = Some("tok/s".into());
            t.values = vec![Some(5.0); 20];
            t
        })
        .collect();
    r.push(GateResults::not_run(
        "big",
        Path::new("gates/big.toml"),
        "",
        "a run of 1,000 failing trials",
        tests,
    ));
    r.finish(1.0);
    r
}

#[test]
fn the_summary_of_1000_failing_trials_stays_under_the_cap_and_says_how_many_were_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("step-summary.md");
    // An earlier step of the job already wrote 900 KiB: GitHub's 1 MiB cap is for the step's whole file.
    let earlier = "x".repeat(899) + "\n";
    std::fs::write(&summary, earlier.repeat(900 * 1024 / 900)).unwrap();
    let before = std::fs::metadata(&summary).unwrap().len() as usize;
    append_step_summary(&summary, &thousand_failing_trials(), None).unwrap();
    let after = std::fs::read(&summary).unwrap();
    assert!(after.len() <= BUDGET_BYTES, "{} bytes", after.len());
    let ours = String::from_utf8(after[before..].to_vec()).unwrap();
    let rows = ours.lines().filter(|l| l.starts_with("| rate")).count();
    assert!(rows > 0 && rows < 1000, "{rows} rows kept");
    let note = format!("{} of 1000 assertion rows left out", 1000 - rows);
    assert!(
        ours.contains("**Summary truncated**"),
        "{}",
        &ours[ours.len() - 400..]
    );
    assert!(ours.contains(&note), "{}", &ours[ours.len() - 400..]);

    // On an empty step summary the same run fits whole: nothing left out, no note.
    let fresh = tmp.path().join("fresh.md");
    append_step_summary(&fresh, &thousand_failing_trials(), None).unwrap();
    let whole = std::fs::read_to_string(&fresh).unwrap();
    assert!(whole.len() <= BUDGET_BYTES);
    assert_eq!(
        whole.lines().filter(|l| l.starts_with("| rate")).count(),
        1000
    );
    assert!(!whole.contains("truncated"));
}

#[test]
fn the_gate_harness_annotates_and_summarises_too() {
    let tmp = tempfile::tempdir().unwrap();
    let summary = tmp.path().join("step-summary.md");
    let out = fixtures::harness(Entry::Code, &[])
        .current_dir(root())
        .env("PATH", fixtures::path_env())
        .env("SERVEGATE_GATES", GATE)
        .env("SERVEGATE_RUNS", tmp.path().join("runs"))
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(101), "{stdout}");
    let text = std::fs::read_to_string(root().join(GATE)).unwrap();
    let floor = line_starting(&text, "floor_tok_s");
    assert!(
        stdout.contains(&format!(
            "\n::error file={GATE},line={floor},title=gh-rate-fail%3A%3Arate::rate FAIL"
        )),
        "{stdout}"
    );
    assert_eq!(stdout.matches("\n::error ").count(), 2, "{stdout}");
    let s = std::fs::read_to_string(&summary).unwrap();
    assert!(s.starts_with("# servegate: FAIL (exit 1)\n"), "{s}");
}
