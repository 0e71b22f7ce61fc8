//! `servegate judge` on the first user's two reconstructed runs (tests/data/runs/README.md) gives the
//! published verdicts: the release candidate passes; the per-op build fails route, rate and first token while
//! its content passes.

use crate::fixtures;

fn judge(dir: &str) -> (i32, String) {
    let out = fixtures::servegate()
        .arg("judge")
        .arg(format!(
            "{}/tests/data/runs/{dir}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn has(stdout: &str, line: &str) {
    assert!(
        stdout.lines().any(|l| l == line),
        "missing line {line:?} in:\n{stdout}"
    );
}

#[test]
fn release_candidate_run_passes_with_the_published_figures() {
    let (code, out) = judge("npu-rc-pass");
    assert_eq!(code, 0, "{out}");
    has(
        &out,
        "rate PASS median 84.4 tok/s (floor 60.0; each: 98.4, 84.4, 82.1; n=3 of 3 planned)",
    );
    has(
        &out,
        "first_token PASS median 277 ms (limit 600; each: 262, 277, 301; n=3 of 3 planned)",
    );
    has(&out, "route PASS fast route: serve.log line 5 matches /on the private route/: \"decode: on the private route dx\"; slow /per-op forward/ absent");
    assert!(out.lines().any(|l| l.starts_with("content PASS")));
    has(&out, "RESULT: PASS");
}

#[test]
fn per_op_run_fails_route_rate_and_first_token_with_content_ok() {
    let (code, out) = judge("npu-perop-fail");
    assert_eq!(code, 1, "{out}");
    has(
        &out,
        "rate FAIL median 1.9 tok/s (floor 60.0; each: 1.9, 2.1, 1.9; n=3 of 3 planned)",
    );
    has(
        &out,
        "first_token FAIL median 1063 ms (limit 600; each: 1040, 1063, 1101; n=3 of 3 planned)",
    );
    assert!(
        out.lines()
            .any(|l| l
                .starts_with("route FAIL slow route: serve.log line 4 matches /per-op forward/")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("content PASS 3 of 3")),
        "{out}"
    );
    has(&out, "RESULT: FAIL");
}

/// The A-B-B-A pair ticket (`tests/data/runs/flm-pair-*`, a pair run directory): `servegate judge` re-judges
/// it with the gate it carries; the published ticket passes both ratios, ours on the per-op route fails both
/// (exit 1) while its answers pass.
#[test]
fn the_pair_ticket_is_judged_from_its_directory() {
    let (code, out) = judge("flm-pair-pass");
    assert_eq!(code, 0, "{out}");
    assert!(out.lines().any(|l| l.starts_with(
        "ratio PASS decode: theirs 45.57 tok/s (45.08-45.93, n=6) / ours 39.25 tok/s (39.20-39.32, n=6) = 1.16x;"
    )), "{out}");
    assert!(out.lines().any(|l| l.starts_with(
        "first_token_ratio PASS first token: theirs 0.591 s (0.589-0.658, n=6) / ours 0.568 s (0.566-0.578, n=6) = 1.04x;"
    )), "{out}");
    has(&out, "RESULT: PASS");

    let (code, out) = judge("flm-pair-slowroute");
    assert_eq!(code, 1, "{out}");
    assert!(out.lines().any(|l| l.starts_with("ratio FAIL ")), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("first_token_ratio FAIL ")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("content PASS")), "{out}");
    has(&out, "RESULT: FAIL");
}

/// `--gate /dev/stdin` (a pipe, readable once) judges as the same gate given as a file: the gate is read
/// once, never "the file is empty" on a second read.
#[test]
fn a_gate_given_on_stdin_is_read_once() {
    use std::io::Write;
    let dir = format!("{}/tests/data/runs/npu-rc-pass", env!("CARGO_MANIFEST_DIR"));
    let gate = std::fs::read(format!("{dir}/gate.toml")).unwrap();
    let mut child = fixtures::servegate()
        .args(["judge", &dir, "--gate", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&gate).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("empty"), "{stderr}");
    has(&stdout, "RESULT: PASS");
}

/// `servegate judge` as a process on `dir` (optionally `--gate gate`): exit code, stdout, stderr; every
/// verdict line whole.
fn judge_dir(dir: &std::path::Path, gate: Option<&std::path::Path>) -> (i32, String, String) {
    let mut cmd = fixtures::servegate();
    cmd.env("SERVEGATE_VERBOSE", "1")
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .arg("judge")
        .arg(dir);
    if let Some(g) = gate {
        cmd.arg("--gate").arg(g);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A copy of the recorded reference-smoke run (`data/records/evidence`, 3 warmups then 2 x 3 judged).
fn recorded_smoke_run(to: &std::path::Path) -> std::path::PathBuf {
    let run = to.join("run");
    fixtures::copy_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/records/evidence/reference-smoke/20261129T185356Z"),
        &run,
    );
    run
}

/// The plan is the judging gate's, never run.json's: a recorded run cut to its warmups and one judged
/// request, with run.json saying `"planned": 1`, judged `rate PASS ... n=1 of 1 planned`, `RESULT: PASS`
/// (while `bless` refused it: `1 answered request of 9 planned`). Now every verdict FAILs naming run.json's
/// count and the gate's, and `n=K of N planned` states the gate's N; the untouched run judges as before.
#[test]
fn a_run_json_stating_another_plan_than_the_gate_never_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = recorded_smoke_run(tmp.path());
    let (code, out, err) = judge_dir(&run, None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("rate PASS ") && l.ends_with("n=6 of 6 planned)")),
        "{out}"
    );
    has(&out, "RESULT: PASS");

    let run_json = run.join("run.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&run_json).unwrap()).unwrap();
    v["requests"].as_array_mut().unwrap().truncate(4);
    v["planned"] = serde_json::json!(1);
    std::fs::write(&run_json, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let _ = std::fs::remove_file(run.join("requests.jsonl"));

    // The run's own gate (2 x 3 prompts), and the reference gate without its cpu/drift/regression trials
    // (3 x 3): each names both counts.
    let reference = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("gates/reference-smoke.toml"),
    )
    .unwrap();
    let mut kept = String::new();
    let mut skip = false;
    for l in reference.lines() {
        if l.starts_with('[') {
            skip = ["[assert.cpu", "[assert.drift", "[assert.regression"]
                .iter()
                .any(|s| l.starts_with(s));
        }
        if !skip {
            kept.push_str(l);
            kept.push('\n');
        }
    }
    let g = tmp.path().join("g.toml");
    std::fs::write(&g, kept).unwrap();
    for (gate, ours) in [(None, 6), (Some(g.as_path()), 9)] {
        let (code, out, err) = judge_dir(&run, gate);
        assert_eq!(code, 1, "{out}\n{err}");
        has(&out, "RESULT: FAIL");
        let verdicts: Vec<&str> = out
            .lines()
            .filter(|l| !l.starts_with("gate ") && !l.starts_with("RESULT"))
            .collect();
        assert!(verdicts.len() >= 5, "{out}");
        for l in verdicts {
            assert!(!l.contains(" PASS"), "{l}");
            assert!(
                l.contains("run.json says the run planned 1 judged request but the gate plans")
                    && l.contains(&format!("plans {ours} "))
                    && l.ends_with(&format!("(n=1 of {ours} planned)")),
                "{l}"
            );
        }
    }
}

/// A load sweep's point and a pair run's arm hold a run.json but are not runs of their own: judging one gave
/// `FAIL no evidence for this point: .../c1/c1/run.json` (exit 1) or `ratio FAIL not judged in a single gate`
/// (exit 1), or `cannot read gate` (exit 3). Now it names the run to judge, exit 5 (bad evidence input).
#[test]
fn a_load_point_or_a_pair_arm_names_the_run_to_judge() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let load = root.join("data/records/evidence/reference-load/20261201T140510Z");
    let pair = root.join("data/records/evidence/reference-pair/20261129T185623Z");
    let flm = root.join("tests/data/runs/flm-pair-pass");
    for (dir, parent, what) in [
        (load.join("c1"), &load, "point c=1 of the load run"),
        (
            pair.join("arm2-ours"),
            &pair,
            "arm 2 (ours) of the pair run",
        ),
        (
            flm.join("arm1-theirs"),
            &flm,
            "arm 1 (theirs) of the pair run",
        ),
    ] {
        let (code, out, err) = judge_dir(&dir, None);
        assert_eq!(code, 5, "{out}\n{err}");
        assert!(
            err.contains(&format!(
                "{} is {what} {}, not a run of its own: judge {}",
                dir.display(),
                parent.display(),
                parent.display()
            )),
            "{err}"
        );
        assert!(!out.contains("RESULT"), "{out}");
    }
}

/// `judge` of a path that does not exist says so (was: "is not a run directory"), exit 5.
#[test]
fn judge_of_a_missing_path_says_it_does_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-run");
    let o = crate::fixtures::servegate()
        .arg("judge")
        .arg(&missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(
        err.contains(&format!("{} does not exist", missing.display())),
        "{err}"
    );
}
