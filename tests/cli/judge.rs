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
