//! Interruption, failed writes, costs and processes, end to end through the `servegate` binary:
//! a run stopped by SIGTERM or SIGINT ends as interrupted (exit 143/130, `run.json` `interrupted`, no
//! verdict, no `RESULT:` line, no report marked passed), in `servegate run` and in the gates harness; a
//! failed evidence write marks the run `failed`; progress is appended, not rewritten; a whole-run deadline;
//! `replay --synthetic` refuses out-of-range arguments; a setup's children and a serve's detached daemon
//! do not outlive the run; a stdout closed mid-run stops the run as a signal does (exit 5).
//!
//! Signals are sent at a point the evidence proves (request 0's record is in `requests.jsonl`, so request 1
//! is in flight; the serve's log says it is listening), never after a guessed sleep; every wait is bounded
//! and generous (a shared 2-core machine). Linux only.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::path_env;
use crate::fixtures::root;
use crate::fixtures::{self, Entry};

/// Polls `f` every 20 ms until true or `timeout`; returns whether it became true.
fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill(pid: u32, signo: i32) {
    // SAFETY: kill(2) on a pid this test started.
    unsafe { libc::kill(pid as i32, signo) };
}

fn alive(pid: u32) -> bool {
    !servegate::io::signals::process_dead(pid)
}

/// A gate on the synthetic serve: `repeats` requests of `tokens` tokens at `tok_s`.
fn synthetic_gate(
    dir: &Path,
    name: &str,
    tokens: u32,
    tok_s: f64,
    repeats: u32,
    extra: &str,
) -> PathBuf {
    let text = format!(
        r#"[gate]
name = "{name}"
[serve]
command = ["servegate", "replay", "--synthetic", "--tokens", "{tokens}", "--ttft-ms", "20", "--tok-s", "{tok_s}", "--port", "{{port}}"]
ready_timeout_s = 30
stop_grace_s = 2
[request]
model = "synthetic"
max_tokens = {tokens}
prompts = ["hi"]
repeats = {repeats}
timeout_s = 60
{extra}
[assert.rate]
floor_tok_s = 1.0
"#
    );
    let p = dir.join(format!("{name}.toml"));
    fs::write(&p, text).unwrap();
    p
}

/// A started `servegate run`, its output in files; killed and reaped on drop if still running.
struct Run {
    child: Child,
    dir: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Run {
    fn start(gate: &Path, work: &Path, extra: &[&str]) -> Run {
        let out = fs::File::create(work.join("stdout")).unwrap();
        let err = fs::File::create(work.join("stderr")).unwrap();
        let child = fixtures::servegate()
            .arg("run")
            .arg("--runs")
            .arg(work.join("runs"))
            .args(extra)
            .arg(gate)
            .env("PATH", path_env())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap();
        Run {
            child,
            dir: work.to_path_buf(),
        }
    }

    fn output(&self) -> String {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            fs::read_to_string(self.dir.join("stdout")).unwrap_or_default(),
            fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
        )
    }

    fn stdout(&self) -> String {
        fs::read_to_string(self.dir.join("stdout")).unwrap_or_default()
    }

    /// Waits (bounded) for the exit and returns the code.
    fn wait(&mut self, limit: Duration) -> Option<i32> {
        let mut st = None;
        let ok = eventually(limit, || {
            st = self.child.try_wait().unwrap();
            st.is_some()
        });
        assert!(
            ok,
            "servegate did not exit within {limit:?}: {}",
            self.output()
        );
        st.unwrap().code()
    }
}

/// The only run directory of `gate` under `runs`, once it exists.
fn run_dir(runs: &Path, gate: &str) -> Option<PathBuf> {
    fs::read_dir(runs.join(gate))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.is_dir())
}

/// Lines of `requests.jsonl` in the run directory (requests finished).
fn progress_lines(dir: &Path) -> usize {
    fs::read_to_string(dir.join("requests.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// Waits until `n` requests of `gate` are finished, returns its run directory.
fn wait_requests(run: &mut Run, runs: &Path, gate: &str, n: usize) -> PathBuf {
    let mut dir = None;
    let ok = eventually(Duration::from_secs(60), || {
        dir = run_dir(runs, gate);
        dir.as_deref().is_some_and(|d| progress_lines(d) >= n)
            || run.child.try_wait().ok().flatten().is_some()
    });
    assert!(ok, "request {n} never finished: {}", run.output());
    let dir = dir.unwrap_or_else(|| panic!("no run dir: {}", run.output()));
    assert!(
        progress_lines(&dir) >= n,
        "the run ended before request {n}: {}",
        run.output()
    );
    dir
}

/// What every interrupted run must show: the exit code, `run.json` `interrupted`, no verdict, no
/// `RESULT:` line, the interrupted line, and no report saying passed.
fn assert_interrupted(run: &mut Run, dir: &Path, code: i32, signal_name: &str) {
    let got = run.wait(Duration::from_secs(30));
    let out = run.output();
    assert_eq!(got, Some(code), "{out}");
    let stdout = run.stdout();
    assert!(!stdout.contains("RESULT:"), "{out}");
    assert!(!stdout.contains("PASS"), "{out}");
    assert!(
        out.contains(&format!("INTERRUPTED: stopped by {signal_name}")),
        "{out}"
    );
    let rj = run_json(dir);
    assert_eq!(rj["status"], "interrupted", "{rj:#}");
    assert!(
        rj["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains(&format!("interrupted by {signal_name}"))),
        "{rj:#}"
    );
    // A JSON report, if written at all, never says passed.
    if let Ok(t) = fs::read_to_string(run.dir.join("results.json")) {
        assert!(!t.contains("\"passed\""), "{t}");
    }
    // The serve is gone.
    if let Some(pid) = rj["serve"]["pid"].as_u64() {
        assert!(
            eventually(Duration::from_secs(10), || !alive(pid as u32)),
            "serve {pid} outlived the interrupted run"
        );
    }
}

fn signal_mid_request(signo: i32, code: i32, name: &str) {
    let work = tempfile::tempdir().unwrap();
    // 10 requests of about 0.5 s: request 1 is in flight when request 0's record appears.
    let gate = synthetic_gate(work.path(), "mid", 20, 40.0, 10, "");
    let json = work.path().join("results.json");
    let mut run = Run::start(&gate, work.path(), &["--json", json.to_str().unwrap()]);
    let dir = wait_requests(&mut run, &work.path().join("runs"), "mid", 1);
    kill(run.child.id(), signo);
    assert_interrupted(&mut run, &dir, code, name);
    // The record in run.json keeps what was done: fewer than the 10 planned.
    let n = run_json(&dir)["requests"].as_array().unwrap().len();
    assert!((1..10).contains(&n), "{n} requests recorded");
    // Re-judged, it fails, naming the status.
    let judged = fixtures::servegate()
        .arg("judge")
        .arg(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&judged.stdout);
    assert_eq!(judged.status.code(), Some(1), "{out}");
    assert!(out.contains("run.json status is `interrupted`"), "{out}");
    assert!(out.contains("RESULT: FAIL"), "{out}");
}

#[test]
fn sigterm_mid_request_ends_interrupted_with_143() {
    signal_mid_request(libc::SIGTERM, 143, "SIGTERM");
}

#[test]
fn sigint_mid_request_ends_interrupted_with_130() {
    signal_mid_request(libc::SIGINT, 130, "SIGINT");
}

/// The d3 race: whatever the request loop sees next (a reply cut by the teardown, a serve that exited, a
/// request that just completed), the run ends interrupted. Signals at several points of a request.
#[test]
fn signals_anywhere_in_a_request_never_give_a_pass() {
    let work = tempfile::tempdir().unwrap();
    let gate = synthetic_gate(work.path(), "anywhere", 10, 50.0, 20, "");
    for (i, offset_ms) in [0u64, 40, 90, 150, 230].into_iter().enumerate() {
        let w = work.path().join(format!("try{i}"));
        fs::create_dir(&w).unwrap();
        let mut run = Run::start(&gate, &w, &[]);
        let dir = wait_requests(&mut run, &w.join("runs"), "anywhere", 1);
        std::thread::sleep(Duration::from_millis(offset_ms));
        let (signo, code, name) = if i % 2 == 0 {
            (libc::SIGTERM, 143, "SIGTERM")
        } else {
            (libc::SIGINT, 130, "SIGINT")
        };
        kill(run.child.id(), signo);
        assert_interrupted(&mut run, &dir, code, name);
    }
}

/// Ctrl-C while the serve is still loading is an interruption (130), not `serve_not_ready` (exit 4).
#[test]
fn ctrl_c_while_the_serve_starts_is_interrupted_not_serve_not_ready() {
    let work = tempfile::tempdir().unwrap();
    let text = r#"[gate]
name = "loading"
[serve]
command = ["servegate", "replay", "--synthetic", "--tokens", "5", "--ttft-ms", "5", "--tok-s", "100", "--ready-after-ms", "60000", "--port", "{port}"]
ready_timeout_s = 120
[request]
model = "synthetic"
max_tokens = 5
prompts = ["hi"]
[assert.rate]
floor_tok_s = 1.0
"#;
    let gate = work.path().join("loading.toml");
    fs::write(&gate, text).unwrap();
    let mut run = Run::start(&gate, work.path(), &[]);
    let runs = work.path().join("runs");
    let mut dir = None;
    let listening = eventually(Duration::from_secs(60), || {
        dir = run_dir(&runs, "loading");
        dir.as_deref().is_some_and(|d| {
            fs::read_to_string(d.join("serve.log")).is_ok_and(|l| l.contains("listening"))
        })
    });
    assert!(listening, "the serve never started: {}", run.output());
    kill(run.child.id(), libc::SIGINT);
    let dir = dir.unwrap();
    assert_interrupted(&mut run, &dir, 130, "SIGINT");
    let out = run.output();
    assert!(!out.contains("serve_not_ready"), "{out}");
    assert!(!out.contains("never became ready"), "{out}");
}

// ---- the gates harness ------------------------------------------------------------------------------

fn harness_command(work: &Path) -> Command {
    harness_command_on(work, &root().join("tests/data/repro/signals/harness"))
}

/// The gates harness (`servegate::run::harness`, as `tests/gates.rs` runs it: its signal set-up, one trial
/// at a time, the interruption checkpoint) in a re-executed test binary (`fixtures::harness`) on `gates`.
fn harness_command_on(work: &Path, gates: &Path) -> Command {
    let mut c = fixtures::harness(Entry::Signals, &["--test-threads=1"]);
    c.env("PATH", path_env())
        .env("SERVEGATE_GATES", gates)
        .env("SERVEGATE_RUNS", work.join("runs"))
        .env("SERVEGATE_JSON", work.join("results.json"))
        .env("SERVEGATE_JUNIT", work.join("junit.xml"));
    c
}

fn assert_no_passed_report(work: &Path, out: &str) {
    assert!(!out.contains("test result: ok"), "{out}");
    if let Ok(t) = fs::read_to_string(work.join("results.json")) {
        assert!(
            !t.contains("\"passed\""),
            "results.json says passed: {t}\n{out}"
        );
    }
    if let Ok(t) = fs::read_to_string(work.join("junit.xml")) {
        assert!(
            !t.contains("<testcase") || t.contains("<failure") || t.contains("<skipped"),
            "junit: {t}"
        );
    }
}

fn harness_signal_case(signo: i32, code: i32, name: &str) {
    let work = tempfile::tempdir().unwrap();
    let out = fs::File::create(work.path().join("stdout")).unwrap();
    let err = fs::File::create(work.path().join("stderr")).unwrap();
    let child = harness_command(work.path())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    let mut run = Run {
        child,
        dir: work.path().to_path_buf(),
    };
    let dir = wait_requests(&mut run, &work.path().join("runs"), "short", 1);
    kill(run.child.id(), signo);
    let got = run.wait(Duration::from_secs(30));
    let all = run.output();
    assert_eq!(got, Some(code), "{all}");
    assert!(
        all.contains(&format!("INTERRUPTED: stopped by {name}")),
        "{all}"
    );
    assert_no_passed_report(work.path(), &all);
    assert_eq!(run_json(&dir)["status"], "interrupted");
}

#[test]
fn harness_sigterm_mid_request_prints_no_test_result_and_no_passed_report() {
    harness_signal_case(libc::SIGTERM, 143, "SIGTERM");
}

#[test]
fn harness_sigint_mid_request_is_interrupted() {
    harness_signal_case(libc::SIGINT, 130, "SIGINT");
}

/// `cargo` stopped alone (here: the harness's parent shell, which forwards nothing, given `signo`): the
/// harness notices its parent is gone (PR_SET_PDEATHSIG, or its poll of getppid), ends interrupted, and
/// writes no passed report instead of running to the end; and no serve outlives it: at the first moment the
/// harness is seen gone, its serve (its pid from the serve script's log) is gone too. No clock decides.
fn harness_whose_parent_dies(signo: i32) {
    let work = tempfile::tempdir().unwrap();
    let pid_file = work.path().join("harness.pid");
    let serve_log = work.path().join("serve-starts.log");
    let out = fs::File::create(work.path().join("stdout")).unwrap();
    let err = fs::File::create(work.path().join("stderr")).unwrap();
    let mut inner = harness_command(work.path());
    inner.env("SERVE_LOG", &serve_log);
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("\"$0\" --exact harness_child --nocapture --test-threads=1 & echo $! > \"$1\"; wait")
        .arg(inner.get_program())
        .arg(&pid_file);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let child = sh
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    let mut run = Run {
        child,
        dir: work.path().to_path_buf(),
    };
    let dir = wait_requests(&mut run, &work.path().join("runs"), "short", 1);
    let harness: u32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let serve: u32 = fs::read_to_string(&serve_log)
        .unwrap()
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no serve pid: {}", run.output()));
    assert!(alive(serve), "the serve is not running: {}", run.output());
    kill(run.child.id(), signo);
    let _ = run.child.wait();
    let mut serve_alive_after_harness = false;
    assert!(
        eventually(Duration::from_secs(30), || {
            let gone = !alive(harness);
            if gone {
                serve_alive_after_harness = alive(serve);
            }
            gone
        }),
        "the harness ran on after its parent died: {}",
        run.output()
    );
    assert!(
        !serve_alive_after_harness,
        "the serve (pid {serve}) outlived the harness: {}",
        run.output()
    );
    let all = run.output();
    assert!(all.contains("INTERRUPTED: stopped by SIGTERM"), "{all}");
    assert_no_passed_report(work.path(), &all);
    assert_eq!(run_json(&dir)["status"], "interrupted");
}

#[test]
fn harness_whose_parent_dies_ends_interrupted() {
    harness_whose_parent_dies(libc::SIGKILL);
}

/// `cargo` given SIGTERM (it forwards nothing to the test binary).
#[test]
fn harness_whose_parent_is_sigtermed_ends_interrupted_and_no_serve_outlives_it() {
    harness_whose_parent_dies(libc::SIGTERM);
}

// ---- a failed evidence write ---------------------------------------------------------------------

/// The serve makes `01.response.json` a directory in the run directory (found from its own stdout,
/// serve.log): writing request 1's evidence fails. The run is `failed`, exit 5, never `complete`.
#[test]
fn failed_evidence_write_marks_the_run_failed() {
    let work = tempfile::tempdir().unwrap();
    let text = r#"[gate]
name = "badwrite"
[serve]
command = ["sh", "-c", "d=$(dirname \"$(readlink /proc/$$/fd/1)\"); mkdir \"$d/01.response.json\"; exec servegate replay --synthetic --tokens 5 --ttft-ms 5 --tok-s 200 --port \"$0\"", "{port}"]
ready_timeout_s = 30
[request]
model = "synthetic"
max_tokens = 5
prompts = ["hi"]
repeats = 3
[assert.rate]
floor_tok_s = 1.0
"#;
    let gate = work.path().join("badwrite.toml");
    fs::write(&gate, text).unwrap();
    let mut run = Run::start(&gate, work.path(), &[]);
    let code = run.wait(Duration::from_secs(60));
    let out = run.output();
    assert_eq!(code, Some(5), "{out}");
    assert!(!run.stdout().contains("RESULT: PASS"), "{out}");
    let dir = run_dir(&work.path().join("runs"), "badwrite").unwrap();
    let rj = run_json(&dir);
    assert_eq!(rj["status"], "failed", "{rj:#}");
    assert!(
        rj["notes"].to_string().contains("evidence write failed"),
        "{rj:#}"
    );
}

// ---- a stdout that cannot be written ---------------------------------------------------------------

/// `servegate run GATE | head -1`: the reader goes while the serve runs. The next write to stdout (the
/// verdict) fails with EPIPE: no death by SIGPIPE that leaves the run behind, no panic, but
/// `error: stdout: Broken pipe ...`, the stop a signal makes (exit 5), a `run.json` not left `running`, and
/// the serve gone.
#[test]
fn a_closed_stdout_mid_run_stops_the_run_and_its_serve() {
    let work = tempfile::tempdir().unwrap();
    let gate = synthetic_gate(work.path(), "closed", 20, 40.0, 4, "");
    let err = fs::File::create(work.path().join("stderr")).unwrap();
    let mut child = fixtures::servegate()
        .arg("run")
        .arg("--runs")
        .arg(work.path().join("runs"))
        .arg(&gate)
        .env("PATH", path_env())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut run = Run {
        child,
        dir: work.path().to_path_buf(),
    };
    let dir = wait_requests(&mut run, &work.path().join("runs"), "closed", 1);
    drop(stdout);
    let code = run.wait(Duration::from_secs(60));
    let out = run.output();
    assert_eq!(code, Some(5), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(out.contains("error: stdout: Broken pipe"), "{out}");
    let rj = run_json(&dir);
    assert_ne!(rj["status"], "running", "{rj:#}");
    if let Some(pid) = rj["serve"]["pid"].as_u64() {
        assert!(
            eventually(Duration::from_secs(10), || !alive(pid as u32)),
            "serve {pid} outlived the run"
        );
    }
}

// ---- costs -----------------------------------------------------------------------------------------

/// Progress is appended (`requests.jsonl`), `run.json` is written at the start and the end only: while
/// the run goes, run.json holds no request; at the end it holds them all.
#[test]
fn progress_is_appended_and_run_json_written_at_the_ends() {
    let work = tempfile::tempdir().unwrap();
    let gate = synthetic_gate(work.path(), "progress", 10, 50.0, 4, "");
    let mut run = Run::start(&gate, work.path(), &[]);
    let dir = wait_requests(&mut run, &work.path().join("runs"), "progress", 2);
    let mid = run_json(&dir);
    assert_eq!(mid["status"], "running");
    assert_eq!(mid["requests"].as_array().unwrap().len(), 0, "{mid:#}");
    let code = run.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{}", run.output());
    let end = run_json(&dir);
    assert_eq!(end["status"], "complete");
    assert_eq!(end["requests"].as_array().unwrap().len(), 4);
    assert_eq!(progress_lines(&dir), 4);
    // The finished run judges the same from its evidence.
    let judged = fixtures::servegate()
        .arg("judge")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(judged.status.success(), "{judged:?}");
}

/// `[request] run_timeout_s`: past it no request is sent and the run records `run_timeout`.
#[test]
fn run_timeout_stops_sending_and_says_so() {
    let work = tempfile::tempdir().unwrap();
    // 10 requests of about 0.5 s against a 1.2 s deadline.
    let gate = synthetic_gate(work.path(), "deadline", 20, 40.0, 10, "run_timeout_s = 1.2");
    let mut run = Run::start(&gate, work.path(), &[]);
    let code = run.wait(Duration::from_secs(60));
    let out = run.output();
    let dir = run_dir(&work.path().join("runs"), "deadline").unwrap();
    let rj = run_json(&dir);
    let failure = rj["serve"]["failure"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(failure.starts_with("run_timeout:"), "{rj:#}\n{out}");
    let sent = rj["requests"].as_array().unwrap().len();
    assert!((1..10).contains(&sent), "{sent} sent: {out}");
    assert!(
        failure.contains(&format!("{sent} of 10 planned")),
        "{failure}"
    );
    assert_eq!(rj["status"], "complete");
    let _ = code; // the verdicts on a run with unsent requests are the judge's (request accounting)
}

#[test]
fn synthetic_replay_arguments_out_of_range_exit_2() {
    let cases: &[&[&str]] = &[
        &["--tokens", "20", "--ttft-ms", "5", "--tok-s", "1e-300"],
        &["--tokens", "20", "--ttft-ms", "5", "--tok-s", "inf"],
        &["--tokens", "20", "--ttft-ms", "5", "--itl-ms", "1e-300"],
        &["--tokens", "20", "--ttft-ms", "1e300", "--tok-s", "10"],
        &["--tokens", "20", "--ttft-ms", "nan", "--tok-s", "10"],
        &["--tokens", "0", "--ttft-ms", "5", "--tok-s", "10"],
        &["--tokens", "4000000000", "--ttft-ms", "5", "--tok-s", "10"],
        &["--tokens", "1000000", "--ttft-ms", "5", "--tok-s", "1"],
        &[
            "--tokens",
            "5",
            "--ttft-ms",
            "5",
            "--tok-s",
            "10",
            "--per-chunk",
            "0",
        ],
        &[
            "--tokens",
            "5",
            "--ttft-ms",
            "5",
            "--tok-s",
            "10",
            "--per-chunk",
            "6",
        ],
        &[
            "--tokens",
            "5",
            "--ttft-ms",
            "5",
            "--tok-s",
            "10",
            "--speed",
            "1e-300",
        ],
        &[
            "--tokens",
            "5",
            "--ttft-ms",
            "5",
            "--tok-s",
            "10",
            "--ready-after-ms",
            "1e300",
        ],
        &[
            "--tokens",
            "5",
            "--ttft-ms",
            "5",
            "--tok-s",
            "10",
            "--model",
            "",
        ],
    ];
    for args in cases {
        let out = fixtures::servegate()
            .args(["replay", "--synthetic", "--port", "0"])
            .args(*args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

// ---- processes --------------------------------------------------------------------------------------

/// SIGKILL of the runner while `setup` runs: the setup's child (a `sleep` in its group) goes too (the
/// serve's watchdog, over the setup's group).
#[test]
fn sigkill_during_setup_stops_the_setups_children() {
    let work = tempfile::tempdir().unwrap();
    let pid_file = work.path().join("setup-child.pid");
    let text = format!(
        r#"[gate]
name = "setupkill"
[serve]
setup = ["sh", "-c", "sleep 300 & echo $! > {pid}; wait"]
command = ["servegate", "replay", "--synthetic", "--tokens", "5", "--ttft-ms", "5", "--tok-s", "100", "--port", "{{port}}"]
[request]
model = "synthetic"
max_tokens = 5
prompts = ["hi"]
[assert.rate]
floor_tok_s = 1.0
"#,
        pid = pid_file.display()
    );
    let gate = work.path().join("setupkill.toml");
    fs::write(&gate, text).unwrap();
    let mut run = Run::start(&gate, work.path(), &["--quiet"]);
    let mut child = None;
    let ok = eventually(Duration::from_secs(30), || {
        child = fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        child.is_some()
    });
    assert!(ok, "setup never started: {}", run.output());
    let child = child.unwrap();
    assert!(alive(child));
    kill(run.child.id(), libc::SIGKILL);
    let _ = run.child.wait();
    let gone = eventually(Duration::from_secs(10), || !alive(child));
    if !gone {
        kill(child, libc::SIGKILL);
    }
    assert!(
        gone,
        "the setup's child {child} outlived the SIGKILLed runner"
    );
}

/// A serve that detaches a daemon (double fork into a new session, out of the serve's process group):
/// the runner (a child subreaper) stops it after the serve and reports it in run.json.
#[test]
fn detached_daemon_is_stopped_and_reported() {
    let work = tempfile::tempdir().unwrap();
    let pid_file = work.path().join("daemon.pid");
    let text = format!(
        r#"[gate]
name = "daemon"
[serve]
command = ["sh", "-c", "( setsid sh -c 'echo $$ > {pid}; exec sleep 300' > /dev/null 2>&1 & ); exec servegate replay --synthetic --tokens 5 --ttft-ms 5 --tok-s 200 --port \"$0\"", "{{port}}"]
ready_timeout_s = 30
[request]
model = "synthetic"
max_tokens = 5
prompts = ["hi"]
[assert.content]
"#,
        pid = pid_file.display()
    );
    let gate = work.path().join("daemon.toml");
    fs::write(&gate, text).unwrap();
    let mut run = Run::start(&gate, work.path(), &[]);
    let code = run.wait(Duration::from_secs(60));
    let out = run.output();
    let daemon: u32 = fs::read_to_string(&pid_file)
        .unwrap_or_else(|_| panic!("no daemon pid: {out}"))
        .trim()
        .parse()
        .unwrap();
    let gone = eventually(Duration::from_secs(30), || !alive(daemon));
    if !gone {
        kill(daemon, libc::SIGKILL);
    }
    assert!(gone, "daemon {daemon} outlived the run: {out}");
    assert_eq!(code, Some(0), "{out}");
    let dir = run_dir(&work.path().join("runs"), "daemon").unwrap();
    let rj = run_json(&dir);
    let strays = rj["serve"]["strays_stopped"].to_string();
    assert!(strays.contains(&format!("pid {daemon}")), "{rj:#}");
    assert!(rj["serve"].get("strays_survived").is_none(), "{rj:#}");
}

/// A pair gate stopped in its first arm: the arm's run.json and pair.json are `interrupted`, exit 143,
/// no verdict, no second arm.
#[test]
fn sigterm_in_a_pair_arm_ends_the_pair_interrupted() {
    let work = tempfile::tempdir().unwrap();
    fs::write(work.path().join("model.bin"), b"weights").unwrap();
    let arm = |rate: u32| {
        format!(
            r#"command = ["servegate", "replay", "--synthetic", "--tokens", "20", "--ttft-ms", "20", "--tok-s", "{rate}", "--model", "{{gate_dir}}/model.bin", "--port", "{{port}}"]"#
        )
    };
    let text = format!(
        r#"[gate]
name = "pairstop"
[serve]
ready_timeout_s = 30
[pair]
order = ["theirs", "ours"]
[pair.ours]
runtime = "ours"
{}
[pair.theirs]
runtime = "theirs"
{}
[request]
model = "{{gate_dir}}/model.bin"
served_model = "synthetic"
max_tokens = 20
temperature = 0
top_k = 1
prompts = ["hi"]
repeats = 8
[assert.ratio]
metric = "decode"
at_least = 0.1
"#,
        arm(40),
        arm(40)
    );
    let gate = work.path().join("pairstop.toml");
    fs::write(&gate, text).unwrap();
    let mut run = Run::start(&gate, work.path(), &[]);
    let runs = work.path().join("runs");
    let mut pair_dir = None;
    let ok = eventually(Duration::from_secs(60), || {
        pair_dir = run_dir(&runs, "pairstop");
        pair_dir
            .as_deref()
            .is_some_and(|d| progress_lines(&d.join("arm1-theirs")) >= 1)
            || run.child.try_wait().ok().flatten().is_some()
    });
    assert!(ok, "arm 1 never recorded a request: {}", run.output());
    let pair_dir = pair_dir.unwrap();
    kill(run.child.id(), libc::SIGTERM);
    assert_interrupted(&mut run, &pair_dir.join("arm1-theirs"), 143, "SIGTERM");
    let pj: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(pair_dir.join("pair.json")).unwrap()).unwrap();
    assert_eq!(pj["status"], "interrupted", "{pj:#}");
    assert!(!pair_dir.join("arm2-ours").exists());
}

/// The repro gate itself (`d3.toml`: 20 requests of about 2 s on the synthetic serve), SIGTERM while
/// request 1 is in flight: interrupted, never `RESULT: PASS` with 1 of 20 requests.
#[test]
fn d3_sigterm_mid_request_is_interrupted() {
    let work = tempfile::tempdir().unwrap();
    let gate = root().join("tests/data/repro/signals/d3.toml");
    let mut run = Run::start(&gate, work.path(), &[]);
    let dir = wait_requests(&mut run, &work.path().join("runs"), "d3", 1);
    kill(run.child.id(), libc::SIGTERM);
    assert_interrupted(&mut run, &dir, 143, "SIGTERM");
}

/// Ctrl-C while the harness's serve is still loading: exit 130, interrupted, never `serve_not_ready`.
#[test]
fn harness_ctrl_c_while_the_serve_starts_is_interrupted_not_serve_not_ready() {
    let work = tempfile::tempdir().unwrap();
    let gates = work.path().join("gates");
    fs::create_dir(&gates).unwrap();
    fs::write(
        gates.join("loading.toml"),
        r#"[gate]
name = "loading"
[serve]
command = ["servegate", "replay", "--synthetic", "--tokens", "5", "--ttft-ms", "5", "--tok-s", "100", "--ready-after-ms", "60000", "--port", "{port}"]
ready_timeout_s = 120
[request]
model = "synthetic"
max_tokens = 5
prompts = ["hi"]
[assert.rate]
floor_tok_s = 1.0
"#,
    )
    .unwrap();
    let out = fs::File::create(work.path().join("stdout")).unwrap();
    let err = fs::File::create(work.path().join("stderr")).unwrap();
    let child = harness_command_on(work.path(), &gates)
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap();
    let mut run = Run {
        child,
        dir: work.path().to_path_buf(),
    };
    let runs = work.path().join("runs");
    let mut dir = None;
    let listening = eventually(Duration::from_secs(60), || {
        dir = run_dir(&runs, "loading");
        dir.as_deref().is_some_and(|d| {
            fs::read_to_string(d.join("serve.log")).is_ok_and(|l| l.contains("listening"))
        })
    });
    assert!(listening, "the serve never started: {}", run.output());
    kill(run.child.id(), libc::SIGINT);
    let got = run.wait(Duration::from_secs(30));
    let all = run.output();
    assert_eq!(got, Some(130), "{all}");
    assert!(all.contains("INTERRUPTED: stopped by SIGINT"), "{all}");
    assert!(!all.contains("serve_not_ready"), "{all}");
    assert!(!all.contains("never became ready"), "{all}");
    assert_no_passed_report(work.path(), &all);
    assert_eq!(run_json(&dir.unwrap())["status"], "interrupted");
}
