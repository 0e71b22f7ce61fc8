//! The run's result: green means something was checked, in this run; and one CLI story (`servegate run`,
//! `servegate judge` and the gates harness agree).
//!
//! Each repro of `tests/data/repro/harness/` (copied from the shared repros; README there) as a test of the
//! "must" column. The harness runs in a child process (this test binary re-run with `--exact harness_child`,
//! as tests/{pure,cli}/junit.rs does) through `harness::main_args`, the same entry point as `cargo test --test gates`, so
//! report clearing and argument parsing are exercised; the gates are synthetic serves (`logserve.sh` wraps
//! `servegate replay --synthetic`, found on PATH).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use servegate::error::exit;
use servegate::run::harness::LIBTEST_FAILED;

use crate::fixtures::{self, Entry, Out};

fn data(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/repro/harness")
        .join(p)
}

/// The harness (`harness::main_args`, as `cargo test --test gates`) in a child, on libtest `args`, with `env`
/// on top of a clean environment and the servegate binary first on PATH.
fn child(env: &[(&str, &Path)], args: &[&str]) -> Command {
    let mut cmd = fixtures::harness(Entry::Args, args);
    cmd.env("PATH", fixtures::path_env());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn harness(env: &[(&str, &Path)], args: &[&str]) -> Out {
    Out::of(&mut child(env, args))
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Reports and an evidence root in a temporary directory.
struct Setup {
    tmp: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn p(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }
    fn junit(&self) -> PathBuf {
        self.p("junit.xml")
    }
    fn json(&self) -> PathBuf {
        self.p("results.json")
    }
    fn runs(&self) -> PathBuf {
        self.p("runs")
    }
    fn serve_log(&self) -> PathBuf {
        self.p("serves.log")
    }
    /// Runs the harness on `gates` with both reports, this evidence root and SERVE_LOG.
    fn run(&self, gates: &Path, args: &[&str]) -> Out {
        let (j, r, runs, log) = (self.junit(), self.json(), self.runs(), self.serve_log());
        harness(
            &[
                ("SERVEGATE_GATES", gates),
                ("SERVEGATE_JUNIT", &j),
                ("SERVEGATE_JSON", &r),
                ("SERVEGATE_RUNS", &runs),
                ("SERVE_LOG", &log),
            ],
            args,
        )
    }
    /// Serves started so far (lines of SERVE_LOG).
    fn serves_started(&self) -> usize {
        std::fs::read_to_string(self.serve_log())
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

/// A run that checked nothing: exit 7, the reason on stderr, the results JSON and the JUnit say so (a failed
/// `servegate::run` testcase), and no "test result: ok" with exit 0.
fn assert_not_green(s: &Setup, out: &Out, why: &str) {
    assert_eq!(
        out.code,
        exit::NOTHING_CHECKED,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains("nothing was checked") && out.stderr.contains(why),
        "{}",
        out.stderr
    );
    let r = json(&s.json());
    assert_eq!(r["exit_code"], exit::NOTHING_CHECKED, "{r}");
    assert!(r["problems"][0].as_str().unwrap().contains(why), "{r}");
    let junit = std::fs::read_to_string(s.junit()).unwrap();
    assert!(
        junit.contains("<testcase name=\"servegate::run\"") && junit.contains("<failure"),
        "{junit}"
    );
}

#[test]
fn an_empty_gates_directory_is_not_green() {
    let s = Setup::new();
    let empty = s.p("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = s.run(&empty, &[]);
    assert_not_green(&s, &out, "no gate file (*.toml) in");
    assert!(!out.stdout.contains("test result: ok"), "{}", out.stdout);
}

#[test]
fn gates_only_in_a_subdirectory_are_named_and_not_green() {
    let s = Setup::new();
    let out = s.run(&data("nested"), &[]);
    assert_not_green(&s, &out, "sub/a-pass.toml");
    assert!(out.stderr.contains("set SERVEGATE_GATES"), "{}", out.stderr);
    assert_eq!(s.serves_started(), 0);
}

#[test]
fn a_filter_or_exact_name_that_matches_nothing_is_not_green_and_starts_nothing() {
    let s = Setup::new();
    let out = s.run(&data("mixed"), &["no-such-trial"]);
    assert_not_green(
        &s,
        &out,
        "the filter `no-such-trial` selects none of the 9 trials",
    );
    let out = s.run(&data("mixed"), &["--exact", "a-pass::rat"]);
    assert_not_green(&s, &out, "the exact name `a-pass::rat`");
    let out = s.run(&data("mixed"), &["--skip", "::"]);
    assert_not_green(&s, &out, "--skip ::");
    assert_eq!(s.serves_started(), 0);
}

#[test]
fn every_selected_trial_skipped_is_not_green_one_checked_trial_is() {
    let s = Setup::new();
    let out = s.run(&data("mixed"), &["--exact", "c-skip::rate"]);
    assert_not_green(&s, &out, "every selected trial (1) was skipped");
    assert!(
        out.stdout
            .contains("c-skip: ignored (requires: path /dev/no-such-accel does not exist)"),
        "{}",
        out.stdout
    );
    // A selection with a checked trial is green: something was checked.
    let out = s.run(&data("mixed"), &["a-pass::rate"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(json(&s.json())["problems"].is_null());
}

#[test]
fn a_reference_serve_that_cannot_be_provisioned_fails_with_the_reason() {
    let s = Setup::new();
    let out = s.run(&data("setup-fails"), &[]);
    assert_eq!(out.code, LIBTEST_FAILED, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("setup_failed")
            && out.stdout.contains("cannot reach the package index"),
        "{}",
        out.stdout
    );
    let r = json(&s.json());
    assert_eq!(r["counts"]["passed"], 0, "{r}");
    assert_eq!(r["counts"]["failed"], 2, "{r}");
    assert_ne!(r["exit_code"], 0);
    assert_eq!(s.serves_started(), 0, "no serve without its provisioning");
}

#[test]
fn under_nextest_a_trial_whose_requirement_is_unmet_is_skipped_or_fails_never_passes() {
    let s = Setup::new();
    let runs = s.runs();
    let id = Path::new("green-run-1");
    let one = Path::new("1");
    let env = [
        ("SERVEGATE_GATES", data("mixed")),
        ("SERVEGATE_RUNS", runs.clone()),
        ("NEXTEST", one.to_path_buf()),
        ("NEXTEST_RUN_ID", id.to_path_buf()),
    ];
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    // nextest lists the ignored trials with `--list --ignored`: the unmet gate's trial is among them, so a plain
    // `cargo nextest run` skips it.
    let listed = harness(&env, &["--list", "--ignored"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("c-skip::rate: test"),
        "{}",
        listed.stdout
    );
    assert!(!listed.stdout.contains("a-pass::rate"), "{}", listed.stdout);
    // `--run-ignored all|only` runs it anyway (`--exact NAME --ignored` / `--include-ignored`): it fails.
    for flag in ["--ignored", "--include-ignored"] {
        let out = harness(&env, &["--exact", "c-skip::rate", flag]);
        assert_eq!(
            out.code, LIBTEST_FAILED,
            "{flag}: {}\n{}",
            out.stdout, out.stderr
        );
        assert!(
            out.stdout.contains("test c-skip::rate ... FAILED")
                && out
                    .stdout
                    .contains("requires: path /dev/no-such-accel does not exist")
                && out.stdout.contains("cargo-nextest ran it anyway"),
            "{}",
            out.stdout
        );
    }
    // SERVEGATE_JSON is ignored under nextest (no process sees the whole run), but an older file there is removed
    // when a trial runs, so it cannot pass for this run.
    let old = s.json();
    std::fs::write(&old, "{\"exit_code\": 0}").unwrap();
    let mut with_json = env.clone();
    with_json.push(("SERVEGATE_JSON", old.as_path()));
    let out = harness(&with_json, &["--exact", "c-skip::rate", "--ignored"]);
    assert_eq!(out.code, LIBTEST_FAILED);
    assert!(
        !old.exists(),
        "an older results.json left in place under nextest"
    );
    // Without nextest, the same trial is ignored (libtest shows a skip), and a run of only that is not green.
    let plain = harness(
        &[
            ("SERVEGATE_GATES", &data("mixed")),
            ("SERVEGATE_RUNS", &runs),
        ],
        &["--exact", "c-skip::rate", "--include-ignored"],
    );
    assert!(
        plain.stdout.contains("test c-skip::rate ... ignored"),
        "{}",
        plain.stdout
    );
    assert_eq!(plain.code, exit::NOTHING_CHECKED);
}

#[test]
fn test_threads_zero_is_refused_with_a_message_not_a_hang() {
    let s = Setup::new();
    let t = Instant::now();
    let out = s.run(
        &data("mixed"),
        &["--test-threads=0", "--exact", "c-skip::rate"],
    );
    assert_eq!(out.code, exit::USAGE, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("--test-threads=0"), "{}", out.stderr);
    assert!(t.elapsed() < Duration::from_secs(60));
    assert!(!s.json().exists() && !s.junit().exists());
}

#[test]
fn list_runs_nothing_and_leaves_the_reports_alone() {
    let s = Setup::new();
    std::fs::write(s.json(), "previous").unwrap();
    let out = s.run(&data("mixed"), &["--list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("a-pass::rate: test"), "{}", out.stdout);
    assert_eq!(s.serves_started(), 0);
    assert_eq!(std::fs::read_to_string(s.json()).unwrap(), "previous");
    // Even an empty directory lists nothing and exits 0 (listing is not a run).
    let empty = s.p("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(s.run(&empty, &["--list"]).code, 0);
}

/// stale-reports.sh: after a passing run, every run that ends early leaves no report saying it passed.
#[test]
fn a_run_that_ends_early_never_leaves_the_previous_pass_in_place() {
    let s = Setup::new();
    let pass = || {
        // a-pass needs replies the client timed: on a busy runner it may be an honest INDETERMINATE.
        let out = fixtures::timed_by_the_client(
            3,
            || s.run(&data("mixed/a-pass.toml"), &[]),
            |o| o.code == 0,
            |o| o.stdout.clone(),
        );
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        assert_eq!(json(&s.json())["exit_code"], 0);
        assert!(s.junit().exists());
    };
    let gone = |what: &str| {
        assert!(!s.json().exists(), "{what}: results.json left in place");
        assert!(!s.junit().exists(), "{what}: junit.xml left in place");
    };
    // A mistyped SERVEGATE_GATES: exit 3.
    pass();
    let out = s.run(&s.p("no-such-dir"), &[]);
    assert_eq!(out.code, exit::SPEC_INVALID, "{}", out.stderr);
    gone("missing gates directory");
    // Two filters (libtest-mimic takes one): a usage error, exit 2.
    pass();
    let out = s.run(&data("mixed"), &["rate", "content"]);
    assert_eq!(out.code, exit::USAGE, "{}", out.stderr);
    gone("usage error");
    // An unknown flag.
    pass();
    assert_eq!(s.run(&data("mixed"), &["--no-such-flag"]).code, exit::USAGE);
    gone("unknown flag");
    // A signal mid-run: whatever the exit, no report says passed.
    pass();
    let (j, r, runs, log) = (s.junit(), s.json(), s.runs(), s.serve_log());
    let mut c = child(
        &[
            ("SERVEGATE_GATES", &data("sigterm")),
            ("SERVEGATE_JUNIT", &j),
            ("SERVEGATE_JSON", &r),
            ("SERVEGATE_RUNS", &runs),
            ("SERVE_LOG", &log),
        ],
        &[],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let t = Instant::now();
    // Mid-run: the `short` gate's evidence directory has its run.json (the serve is up or starting).
    let short = runs.join("short");
    while t.elapsed() < Duration::from_secs(60) {
        let started = std::fs::read_dir(&short)
            .map(|d| d.flatten().any(|e| e.path().join("run.json").exists()))
            .unwrap_or(false);
        if started {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!r.exists() && !j.exists(), "reports still there mid-run");
    std::thread::sleep(Duration::from_millis(700));
    unsafe {
        libc::kill(c.id() as i32, libc::SIGINT);
    }
    let status = c.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    if r.exists() {
        let v = json(&r);
        assert_ne!(
            v["exit_code"], 0,
            "a report written after SIGINT says passed: {v}"
        );
    }
    if j.exists() {
        let x = std::fs::read_to_string(&j).unwrap();
        assert!(x.contains("<failure") || x.contains("<error"), "{x}");
    }
}

// ---- one CLI story (`servegate run`) ----

fn servegate(args: &[&str], env: &[(&str, &Path)]) -> Out {
    let mut cmd = fixtures::servegate();
    cmd.args(args).env("PATH", fixtures::path_env());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Out::of(&mut cmd)
}

fn result_line(out: &Out) -> &str {
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("RESULT: "))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stdout);
    lines[0]
}

#[test]
fn servegate_run_honours_servegate_junit_and_servegate_json() {
    let s = Setup::new();
    let (j, r, runs) = (s.junit(), s.json(), s.runs());
    let gate = data("mixed/a-pass.toml");
    let out = servegate(
        &["run", "-q", gate.to_str().unwrap()],
        &[
            ("SERVEGATE_JUNIT", &j),
            ("SERVEGATE_JSON", &r),
            ("SERVEGATE_RUNS", &runs),
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(result_line(&out), "RESULT: PASS");
    let v = json(&r);
    assert_eq!(
        (v["producer"].as_str(), v["exit_code"].as_i64()),
        (Some("run"), Some(0))
    );
    assert!(std::fs::read_to_string(&j)
        .unwrap()
        .contains("a-pass::rate"));
    // --junit / --json win over the environment.
    let j2 = s.p("flag.xml");
    let out = servegate(
        &[
            "run",
            "-q",
            "--junit",
            j2.to_str().unwrap(),
            gate.to_str().unwrap(),
        ],
        &[("SERVEGATE_JUNIT", &j), ("SERVEGATE_RUNS", &runs)],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(j2.exists());
    assert!(std::fs::read_to_string(&j2)
        .unwrap()
        .contains("a-pass::rate"));
}

#[test]
fn servegate_run_reports_every_invalid_spec_before_running_any_gate() {
    let s = Setup::new();
    let (r, runs, log) = (s.json(), s.runs(), s.serve_log());
    std::fs::write(&r, "{\"exit_code\": 0}").unwrap();
    let bad2 = s.p("bad2.toml");
    std::fs::write(&bad2, "[gate]\nname = 3\n").unwrap();
    let out = servegate(
        &[
            "run",
            "-q",
            data("mixed/a-pass.toml").to_str().unwrap(),
            data("mixed/e-invalid.toml").to_str().unwrap(),
            bad2.to_str().unwrap(),
        ],
        &[
            ("SERVEGATE_JSON", &r),
            ("SERVEGATE_RUNS", &runs),
            ("SERVE_LOG", &log),
        ],
    );
    assert_eq!(
        out.code,
        exit::SPEC_INVALID,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains("e-invalid.toml:10:1") && out.stderr.contains("flor_tok_s"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("bad2.toml:2:"), "{}", out.stderr);
    assert!(
        result_line(&out).starts_with("RESULT: ERROR (2 of 3 gate specs are invalid"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("gate a-pass"),
        "a gate ran: {}",
        out.stdout
    );
    assert_eq!(s.serves_started(), 0);
    let v = json(&r);
    assert_eq!(v["exit_code"], exit::SPEC_INVALID);
    assert_eq!(v["gates"].as_array().unwrap().len(), 2, "{v}");
}

#[test]
fn servegate_run_result_line_and_exit_code_never_disagree() {
    let s = Setup::new();
    let runs = s.runs();
    let a_pass = data("mixed/a-pass.toml");
    // An unwritable --junit path: the gates passed, the report did not land: RESULT: ERROR, exit 5, and the
    // report that was written says so.
    let blocker = s.p("file");
    std::fs::write(&blocker, "").unwrap();
    let bad_junit = blocker.join("junit.xml");
    let r = s.json();
    let out = servegate(
        &[
            "run",
            "-q",
            "--junit",
            bad_junit.to_str().unwrap(),
            "--json",
            r.to_str().unwrap(),
            a_pass.to_str().unwrap(),
        ],
        &[("SERVEGATE_RUNS", &runs)],
    );
    assert_eq!(
        out.code,
        exit::EVIDENCE_ERROR,
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(
        result_line(&out),
        "RESULT: ERROR (a report could not be written; the gates said PASS)"
    );
    assert!(
        out.stderr.contains("cannot write the JUnit XML"),
        "{}",
        out.stderr
    );
    let v = json(&r);
    assert_eq!(v["exit_code"], exit::EVIDENCE_ERROR, "{v}");
    assert!(v["problems"][0].as_str().unwrap().contains("JUnit"), "{v}");
    // The RESULT line comes after the reports are written: nothing follows it on stdout.
    assert!(out.stdout.trim_end().ends_with(result_line(&out)));
    // Every gate ignored: SKIP and exit 7, never PASS with 0.
    let out = servegate(
        &["run", "-q", data("mixed/c-skip.toml").to_str().unwrap()],
        &[("SERVEGATE_RUNS", &runs)],
    );
    assert_eq!(out.code, exit::NOTHING_CHECKED);
    assert!(
        result_line(&out).starts_with("RESULT: SKIP"),
        "{}",
        out.stdout
    );
    // A failing gate: FAIL and 1.
    let out = servegate(
        &["run", "-q", data("mixed/b-fail.toml").to_str().unwrap()],
        &[("SERVEGATE_RUNS", &runs)],
    );
    assert_eq!(out.code, exit::ASSERTION_FAILED, "{}", out.stdout);
    assert_eq!(result_line(&out), "RESULT: FAIL");
}

#[test]
fn a_passing_run_whose_records_cannot_be_written_says_error_not_pass() {
    // `--record` writes from the passing run's evidence before the RESULT line; here the record cannot be
    // built (the synthetic serve has no model file to hash), so the line says ERROR and the exit is not 0.
    let s = Setup::new();
    let runs = s.runs();
    let gate = s.p("a.toml");
    let text = std::fs::read_to_string(data("mixed/a-pass.toml"))
        .unwrap()
        .replace("{gate_dir}", data("mixed").to_str().unwrap());
    std::fs::write(
        &gate,
        format!("{text}\n[record]\nmodel_name = \"m\"\nweights = \"w\"\ndevice = \"d\"\nroute = \"r\"\nengine = \"e\"\nengine_version = \"v\"\nbackend = \"b\"\nwhat_would_make_it_wrong = \"everything: a synthetic serve\"\n"),
    )
    .unwrap();
    let r = s.json();
    let recs = s.p("records");
    let out = servegate(
        &[
            "run",
            "-q",
            "--record",
            "rid",
            "--records-dir",
            recs.to_str().unwrap(),
            "--json",
            r.to_str().unwrap(),
            gate.to_str().unwrap(),
        ],
        &[("SERVEGATE_RUNS", &runs)],
    );
    assert!(
        out.stdout.contains("rate PASS"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert_ne!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        result_line(&out),
        "RESULT: ERROR (the gate passed but its records could not be written)"
    );
    assert!(out.stdout.trim_end().ends_with(result_line(&out)));
    assert_eq!(json(&r)["exit_code"], out.code);
}

// ---- one run path: `servegate run`, `servegate judge` and the harness feed the same events to one judge ----

/// The results JSON with what differs between two reports of the same evidence by nature redacted: who wrote
/// it (`producer`), when (`started_utc`, `ended_utc`: the document's and, harmlessly, the provenance's, which
/// come from the same run.json) and wall times (`duration_s`). Line by line on the bytes as written, so
/// everything else must be byte-identical.
fn redact_results(bytes: &[u8]) -> String {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            for key in [
                "\"producer\":",
                "\"started_utc\":",
                "\"ended_utc\":",
                "\"duration_s\":",
            ] {
                if t.starts_with(key) {
                    let indent = &l[..l.len() - t.len()];
                    let comma = if t.ends_with(',') { "," } else { "" };
                    return format!("{indent}{key} \"<redacted>\"{comma}");
                }
            }
            l.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The evidence directory of the first gate of a results JSON.
fn evidence_dir(results: &Path) -> PathBuf {
    PathBuf::from(
        json(results)["gates"][0]["provenance"]["evidence_dir"]
            .as_str()
            .unwrap(),
    )
}

/// `servegate judge DIR --gate GATE` with every report asked for; returns the output.
fn judge_with_reports(s: &Setup, dir: &Path, gate: &Path, tag: &str) -> Out {
    let (j, x, m) = (
        s.p(&format!("{tag}.judge.json")),
        s.p(&format!("{tag}.judge.xml")),
        s.p(&format!("{tag}.judge.md")),
    );
    let args: Vec<&str> = vec![
        "judge",
        dir.to_str().unwrap(),
        "--gate",
        gate.to_str().unwrap(),
        "--json",
        j.to_str().unwrap(),
        "--junit",
        x.to_str().unwrap(),
        "--summary",
        m.to_str().unwrap(),
    ];
    servegate(&args, &[])
}

/// Lines of `out` that are verdict lines of the gate's assertions.
fn verdict_lines(out: &Out) -> Vec<String> {
    out.stdout
        .lines()
        .filter(|l| {
            [
                "route ",
                "rate ",
                "first_token ",
                "content ",
                "known_answer ",
            ]
            .iter()
            .any(|a| l.trim_start().starts_with(a))
        })
        .map(|l| l.trim_start().to_string())
        .collect()
}

/// One gate (a failing one: rate floor too high, so the failure kind, the serve log tail and the exit code are
/// all exercised), run by the harness (`SERVEGATE_JSON`, `SERVEGATE_SUMMARY`) and by `servegate run --json
/// --summary`, and each run's evidence re-judged by `servegate judge --json --summary`: for the same evidence
/// the results JSON is byte-identical once producer, timestamps and wall times are redacted, the Markdown
/// summary is byte-identical as written, and the verdict lines and exit codes agree. The two live runs
/// measured different evidence, so between them only what does not depend on timing is compared (every
/// status, outcome, failure kind, bound, unit, count and exit code).
#[test]
fn run_harness_and_judge_give_the_same_results_for_the_same_evidence() {
    let s = Setup::new();
    let gate = data("mixed/b-fail.toml");
    // The harness.
    let (hj, hm, hruns) = (s.p("h.json"), s.p("h.md"), s.p("runs-h"));
    let h = harness(
        &[
            ("SERVEGATE_GATES", &gate),
            ("SERVEGATE_JSON", &hj),
            ("SERVEGATE_SUMMARY", &hm),
            ("SERVEGATE_RUNS", &hruns),
        ],
        &[],
    );
    assert_eq!(h.code, LIBTEST_FAILED, "{}\n{}", h.stdout, h.stderr);
    assert!(
        h.stdout.contains("reports: json ") && h.stdout.contains(", summary "),
        "{}",
        h.stdout
    );
    let hdir = evidence_dir(&hj);
    let hjudge = judge_with_reports(&s, &hdir, &gate, "h");
    assert_eq!(hjudge.code, exit::ASSERTION_FAILED, "{}", hjudge.stderr);
    assert_eq!(
        redact_results(&std::fs::read(&hj).unwrap()),
        redact_results(&std::fs::read(s.p("h.judge.json")).unwrap()),
        "the harness and `servegate judge` of its evidence disagree"
    );
    assert_eq!(
        std::fs::read_to_string(&hm).unwrap(),
        std::fs::read_to_string(s.p("h.judge.md")).unwrap()
    );
    // `servegate run`.
    let (rj, rm, rruns) = (s.p("r.json"), s.p("r.md"), s.p("runs-r"));
    let r = servegate(
        &[
            "run",
            "--quiet",
            "--runs",
            rruns.to_str().unwrap(),
            "--json",
            rj.to_str().unwrap(),
            "--summary",
            rm.to_str().unwrap(),
            gate.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(r.code, exit::ASSERTION_FAILED, "{}\n{}", r.stdout, r.stderr);
    let rdir = evidence_dir(&rj);
    let rjudge = judge_with_reports(&s, &rdir, &gate, "r");
    assert_eq!(rjudge.code, r.code, "{}", rjudge.stdout);
    assert_eq!(result_line(&rjudge), result_line(&r));
    assert_eq!(verdict_lines(&rjudge), verdict_lines(&r));
    assert_eq!(verdict_lines(&r).len(), 2, "{}", r.stdout);
    assert_eq!(
        redact_results(&std::fs::read(&rj).unwrap()),
        redact_results(&std::fs::read(s.p("r.judge.json")).unwrap()),
        "`servegate run` and `servegate judge` of its evidence disagree"
    );
    assert_eq!(
        std::fs::read_to_string(&rm).unwrap(),
        std::fs::read_to_string(s.p("r.judge.md")).unwrap()
    );
    // Run and harness: the same gate, two live runs; everything that does not depend on timing is equal.
    let shape = |p: &Path| {
        let v = json(p);
        let g = &v["gates"][0];
        let tests: Vec<serde_json::Value> = g["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                serde_json::json!([
                    a["name"],
                    a["test"],
                    a["outcome"],
                    a["failure_kind"],
                    a["bound"],
                    a["unit"],
                    a["values"].as_array().map(|x| x.len())
                ])
            })
            .collect();
        serde_json::json!([
            v["schema"],
            v["exit_code"],
            v["counts"],
            v["strict"],
            g["name"],
            g["file"],
            g["status"],
            g["failure_kind"],
            g["exit_code"],
            g["reason"],
            tests,
            g["requests"].as_array().map(|x| x.len()),
            g["serve_log_tail"].is_string()
        ])
    };
    assert_eq!(shape(&rj), shape(&hj));
    assert_eq!(json(&rj)["exit_code"], exit::ASSERTION_FAILED);
    // The summary shows the failure as FAIL, the evidence directory, and n of N.
    let md = std::fs::read_to_string(&rm).unwrap();
    assert!(md.starts_with("# servegate: FAIL (exit 1)\n"), "{md}");
    assert!(
        md.contains(&format!("Evidence: `{}`", rdir.display())),
        "{md}"
    );
    assert!(
        md.contains("| rate | FAIL | ") && md.contains(" tok/s | 1000.0 tok/s | 2 of 2 |"),
        "{md}"
    );
    assert!(md.contains("| content | PASS |"), "{md}");
}
