//! Evidence: route evidence that cannot be hidden, evidence that cannot be corrupted.
//! The repro gates `d4.toml` and `d6.toml` (tests/data/repro/spec/, from the shared repro set) run against the
//! binary's own synthetic replay serve (`servegate replay --synthetic`, found on PATH as the gates expect).

use crate::fixtures;
use crate::fixtures::path_env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

struct Out {
    code: Option<i32>,
    stdout: String,
    all: String,
}

impl Out {
    /// The route verdict's line.
    fn route(&self) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with("route "))
            .unwrap_or_else(|| panic!("no route line in:\n{}", self.all))
    }

    fn run_dir(&self) -> PathBuf {
        let line = self
            .stdout
            .lines()
            .find(|l| l.starts_with("evidence: "))
            .unwrap_or_else(|| panic!("no evidence line in:\n{}", self.all));
        PathBuf::from(line.trim_start_matches("evidence: "))
    }
}

fn servegate(args: &[&str], env: &[(&str, &str)], remove: &[&str]) -> Out {
    let mut c = fixtures::servegate();
    // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
    c.env("SERVEGATE_VERBOSE", "1");
    c.args(args).env("PATH", path_env());
    for (k, v) in env {
        c.env(k, v);
    }
    for k in remove {
        c.env_remove(k);
    }
    let o = c.stdin(Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
    Out {
        code: o.status.code(),
        stdout,
        all,
    }
}

fn run(gate: &Path, runs: &Path, env: &[(&str, &str)]) -> Out {
    servegate(
        &["run", gate.to_str().unwrap()],
        &[env, &[("SERVEGATE_RUNS", runs.to_str().unwrap())]].concat(),
        &[],
    )
}

fn judge(dir: &Path) -> Out {
    servegate(&["judge", dir.to_str().unwrap()], &[], &["D6_KEY"])
}

fn d4() -> PathBuf {
    data().join("repro/spec/d4.toml")
}

fn d6() -> PathBuf {
    data().join("repro/spec/d6.toml")
}

/// d4: the serve prints its slow-route line wrapped in colour codes. The route fails on it, and the raw log
/// (escapes and all) stays in the evidence.
#[test]
fn d4_coloured_slow_route_line_fails_the_route() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(&d4(), tmp.path(), &[]);
    assert_eq!(out.code, Some(1), "{}", out.all);
    let route = out.route();
    assert!(route.starts_with("route FAIL"), "{route}");
    assert!(route.contains("per-op forward"), "{route}");
    assert!(!route.contains("absent"), "{route}");
    let raw = std::fs::read(out.run_dir().join("serve.log")).unwrap();
    assert!(
        raw.windows(5).any(|w| w == b"\x1b[33m"),
        "the raw log keeps its escapes"
    );
    // Re-judging the evidence gives the same verdict.
    let again = judge(&out.run_dir());
    assert_eq!(again.code, Some(1), "{}", again.all);
    assert!(again.all.contains("route FAIL"), "{}", again.all);
}

/// d6 with a key too short to mask (`null`, `true`, `e`, 7 bytes): refused with a clear message before the serve
/// starts; servegate's own files are intact and the run is judgeable (same verdict) afterwards.
#[test]
fn d6_short_api_keys_are_refused_and_the_evidence_stays_judgeable() {
    let tmp = tempfile::tempdir().unwrap();
    let gate_text = std::fs::read_to_string(d6()).unwrap();
    for key in ["null", "true", "e", "1234567"] {
        let out = run(&d6(), tmp.path(), &[("D6_KEY", key)]);
        assert_ne!(out.code, Some(0), "{}", out.all);
        assert!(out.all.contains("api_key_unsafe"), "{}", out.all);
        assert!(out.all.contains("at least 8"), "{}", out.all);
        assert!(!out.all.contains("RESULT: PASS"), "{}", out.all);
        let dir = out.run_dir();
        let run_json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(run_json["gate"], "d6");
        assert_eq!(
            std::fs::read_to_string(dir.join("gate.toml")).unwrap(),
            gate_text,
            "gate.toml is a byte copy"
        );
        let again = judge(&dir);
        assert_eq!(
            again.code, out.code,
            "judgeable (no evidence error), with the run's verdict: {}",
            again.all
        );
        assert_ne!(again.code, Some(5), "{}", again.all);
        assert!(again.all.contains("api_key_unsafe"), "{}", again.all);
    }
}

/// d6 with a long key whose bytes also occur in servegate's own files (the serve's argv in run.json and the
/// gate copy): those files are never rewritten, the run passes and re-judges to the same verdict.
#[test]
fn d6_key_found_in_servegate_files_leaves_them_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(&d6(), tmp.path(), &[("D6_KEY", "--synthetic")]);
    assert_eq!(out.code, Some(0), "{}", out.all);
    let dir = out.run_dir();
    let run_json = std::fs::read_to_string(dir.join("run.json")).unwrap();
    assert!(run_json.contains("--synthetic"), "{run_json}");
    assert!(std::fs::read_to_string(dir.join("gate.toml"))
        .unwrap()
        .contains("--synthetic"));
    let req = std::fs::read_to_string(dir.join("00.request.json")).unwrap();
    assert!(!req.contains("***"), "{req}");
    let again = judge(&dir);
    assert_eq!(again.code, Some(0), "{}", again.all);
}

/// A reads file edited so that a read's time goes backwards, or whose bytes disagree with `body_bytes`:
/// `judge` refuses it as an evidence error (exit 5) naming the file.
#[test]
fn judge_rejects_reads_that_go_back_in_time_or_disagree_with_body_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(&d6(), tmp.path(), &[("D6_KEY", "a-long-enough-key")]);
    assert_eq!(out.code, Some(0), "{}", out.all);
    let dir = out.run_dir();
    let reads_path = dir.join("00.reads.jsonl");
    let original = std::fs::read_to_string(&reads_path).unwrap();
    let mut reads = servegate::io::reads::decode(&original).unwrap();
    assert!(reads.len() >= 2, "{original}");

    // Times decreasing.
    let n = reads.len();
    reads[n - 1].t_ms = reads[0].t_ms - 1.0;
    std::fs::write(&reads_path, servegate::io::reads::encode(&reads)).unwrap();
    let bad = judge(&dir);
    assert_eq!(bad.code, Some(5), "{}", bad.all);
    assert!(bad.all.contains("00.reads.jsonl"), "{}", bad.all);
    assert!(bad.all.contains("never decrease"), "{}", bad.all);

    // Bytes added that run.json does not account for.
    let mut reads = servegate::io::reads::decode(&original).unwrap();
    reads[0].bytes.extend_from_slice(b"data: {}\n\n");
    std::fs::write(&reads_path, servegate::io::reads::encode(&reads)).unwrap();
    let bad = judge(&dir);
    assert_eq!(bad.code, Some(5), "{}", bad.all);
    assert!(bad.all.contains("00.reads.jsonl"), "{}", bad.all);
    assert!(bad.all.contains("body_bytes"), "{}", bad.all);

    std::fs::write(&reads_path, &original).unwrap();
    assert_eq!(judge(&dir).code, Some(0));
}

/// A serve.log longer than the judging cap (64 MiB) is not read whole, and the route cannot pass on a part.
#[test]
fn serve_log_over_the_judging_cap_fails_the_route_without_reading_it_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(&d4(), tmp.path(), &[]);
    let dir = out.run_dir();
    let log = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("serve.log"))
        .unwrap();
    log.set_len(servegate::evidence::SERVE_LOG_JUDGE_CAP + 10)
        .unwrap();
    let again = judge(&dir);
    assert_eq!(again.code, Some(1), "{}", again.all);
    assert!(
        again.all.contains("larger than the 64 MiB"),
        "{}",
        again.all
    );
}

/// The scripted llama.cpp look-alike on a free port, its stderr to `stderr`, listening: the port and the child.
fn llama_serve(stderr: Stdio) -> (u16, std::process::Child) {
    let port = free_port();
    let argv = crate::fixtures::scripted_argv(
        &crate::fixtures::llama_script(),
        "127.0.0.1",
        &port.to_string(),
    );
    let serve = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "fake serve never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (port, serve)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `url` serve with a `log_file` holding an old fast-route line: only what the serve wrote during the run is
/// copied (from the offset recorded in run.json), so last month's line proves nothing and the route fails.
#[test]
fn url_log_file_counts_only_what_was_written_during_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let log_path = tmp.path().join("serve.log");
    std::fs::write(&log_path, "2026-10-01 fast kernel selected (last month)\n").unwrap();
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(&log_path)
        .unwrap();
    let (port, mut serve) = llama_serve(log.into());
    let start_len = std::fs::metadata(&log_path).unwrap().len();
    let gate = tmp.path().join("urllog.toml");
    std::fs::write(
        &gate,
        format!(
            r#"[gate]
name = "urllog"
[serve]
url = "http://127.0.0.1:{port}"
log_file = "{}"
ready_timeout_s = 20
[request]
model = "fake-model"
max_tokens = 8
timeout_s = 10
prompts = ["hi"]
[assert.route]
fast = "fast kernel selected"
"#,
            log_path.display()
        ),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let out = run(&gate, &runs, &[]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(out.code, Some(1), "{}", out.all);
    let route = out.route();
    assert!(route.starts_with("route FAIL"), "{route}");
    let dir = out.run_dir();
    let copied = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(!copied.contains("last month"), "{copied}");
    assert!(
        copied.contains("GET /health"),
        "the lines of this run are there: {copied}"
    );
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let lf = &run_json["serve"]["log_file"];
    assert!(
        lf["offset"].as_u64().unwrap() >= start_len,
        "offset recorded: {lf}"
    );
    assert!(lf["ino"].as_u64().is_some(), "{lf}");
    assert!(
        lf["copied"]
            .as_str()
            .unwrap()
            .contains("written during the run"),
        "{lf}"
    );
}

/// The escape stripping route patterns see: CSI (colours, cursor moves), OSC (titles, hyperlinks), other
/// escapes and C1 forms are gone; lines are kept.
#[test]
fn route_patterns_see_the_log_without_escapes() {
    use servegate::judge::strip_escapes;
    assert_eq!(
        strip_escapes("\x1b[33mper-op\x1b[0m forward"),
        "per-op forward"
    );
    assert_eq!(strip_escapes("per\x1b[1;31;48;5;200m-op"), "per-op");
    assert_eq!(
        strip_escapes("\x1b]0;title\x07a\x1b]8;;http://x\x1b\\b\x1b]8;;\x1b\\c"),
        "abc"
    );
    assert_eq!(strip_escapes("a\x1b(Bb\x1bMc\u{9b}31md"), "abcd");
    assert_eq!(strip_escapes("x\r\ny\x07\n\tz"), "x\ny\n\tz");
    assert_eq!(strip_escapes("line 1\nline 2").lines().count(), 2);
}

/// `[request] warmup_requests = 1`: one warmup request (the first prompt), then the judged rounds; the evidence
/// says which request was the warmup and how many were planned, and the accounting counts only the judged.
#[test]
fn warmup_requests_sends_that_many_warmups_first_and_judges_the_rest() {
    let p = fixtures::Project::new();
    let gate = p.write(
        "warm.toml",
        &format!(
            r#"[gate]
name = "warm"
[serve]
command = {serve}
ready_timeout_s = 20
stop_grace_s = 2
[request]
model = "fake-chat"
max_tokens = 8
timeout_s = 20
warmup_requests = 1
repeats = 2
prompts = ["What is the capital of France?", "Name a river.", "Say hi."]
[assert.content]
"#,
            serve = fixtures::scripted_command(&fixtures::chat_script("Paris is the capital."))
        ),
    );
    let out = p
        .servegate()
        .args(["run", "--runs"])
        .arg(p.runs())
        .arg(&gate)
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .output()
        .unwrap();
    let text = fixtures::text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("n=6 of 6 planned"), "{text}");
    let dir = fixtures::evidence_dir(&String::from_utf8_lossy(&out.stdout));
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["planned_warmup"], 1, "{run}");
    let requests = run["requests"].as_array().unwrap();
    let shape: Vec<(bool, u64)> = requests
        .iter()
        .map(|r| {
            (
                r["warmup"].as_bool().unwrap(),
                r["prompt_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            (true, 0),
            (false, 0),
            (false, 1),
            (false, 2),
            (false, 0),
            (false, 1),
            (false, 2)
        ]
    );
}

/// A `url` serve's `log_file` that is not a regular file: a FIFO (whose open blocks until a writer comes:
/// a fresh-user trial's run hung there for 10 minutes, deaf to SIGINT and SIGTERM) and `/dev/zero` (which
/// filled 13 GB of disk in 20 s) are refused unopened; the run ends, and route's FAIL says the log was
/// set and why it was not copied, where it said "set serve.log_file".
#[test]
fn a_log_file_that_is_a_fifo_or_a_device_is_refused_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.log");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (port, mut serve) = llama_serve(Stdio::null());
    for (name, log) in [
        ("fifo", fifo.display().to_string()),
        ("zero", "/dev/zero".into()),
    ] {
        let gate = tmp.path().join(format!("{name}.toml"));
        std::fs::write(
            &gate,
            format!(
                "[gate]\nname = \"{name}\"\n[serve]\nurl = \"http://127.0.0.1:{port}\"\nlog_file = \"{log}\"\nready_timeout_s = 20\n[request]\nmodel = \"fake-model\"\nmax_tokens = 8\ntimeout_s = 10\nprompts = [\"hi\"]\n[assert.route]\nfast = \"fast kernel selected\"\n"
            ),
        )
        .unwrap();
        let t = Instant::now();
        let out = run(&gate, &tmp.path().join("runs"), &[]);
        assert!(t.elapsed() < Duration::from_secs(120), "{}", out.all);
        assert_eq!(out.code, Some(1), "{}", out.all);
        let route = out.route();
        assert!(
            route.starts_with("route FAIL")
                && route.contains(&format!(
                    "serve.log_file {log} was set, and not copied: not a regular file"
                )),
            "{route}"
        );
    }
    let _ = serve.kill();
    let _ = serve.wait();
}

/// A write killed mid-way (a second stop signal during a reply's reads or a log copy) leaves a temp file in
/// the run directory (`.servegate-XXXXXX`, or `.tmpXXXXXX` from older versions). Judging the run again gives
/// the same verdict, never reads them as evidence, and removes them, in the arms' and points' folders too;
/// a record's digest does not count them (`io::fs::is_temp_name`).
#[test]
fn temp_files_a_killed_write_left_are_not_evidence_and_judge_removes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(&d4(), tmp.path(), &[]);
    assert_eq!(out.code, Some(1), "{}", out.all);
    let dir = out.run_dir();
    let before = servegate::evidence::digest::digest_dir(&dir).unwrap();
    std::fs::create_dir_all(dir.join("c1")).unwrap();
    let left = [
        dir.join(".tmpAb12Cd"),
        dir.join(".servegate-x1y2z3"),
        dir.join("c1/.servegate-q9w8e7"),
    ];
    for f in &left {
        std::fs::write(f, b"{\"half\": ").unwrap();
    }
    // A folder holding only temp files adds nothing to the digest (files are what it counts).
    assert_eq!(
        servegate::evidence::digest::digest_dir(&dir).unwrap(),
        before,
        "a temp file changed the digest"
    );
    let again = judge(&dir);
    assert_eq!(again.code, Some(1), "{}", again.all);
    assert_eq!(
        again.route(),
        out.route(),
        "the same verdict with the temp files there"
    );
    for f in &left {
        assert!(!f.exists(), "{} left behind", f.display());
    }
    assert!(dir.join("run.json").exists() && dir.join("serve.log").exists());
}
