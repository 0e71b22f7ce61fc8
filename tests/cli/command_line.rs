//! What goes here: the binary's own surface with no real serve: usage and help, spec errors, report paths it
//! refuses, `judge` of damaged or odd evidence, closed pipes, a setup stopped with the runner, a serve that
//! never becomes ready. With the real reference serve: tests/live/reference_serve.rs.

use crate::fixtures;
use crate::fixtures::reference::{pid_alive, reference_gate_text, write_gate};
use crate::fixtures::root;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn misspelt_key_names_file_line_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let gate = write_gate(
        tmp.path(),
        "typo.toml",
        &reference_gate_text().replace("floor_tok_s", "flor_tok_s"),
    );
    let line = std::fs::read_to_string(&gate)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("flor_tok_s"))
        .unwrap()
        + 1;
    for args in [vec!["check"], vec!["run"]] {
        let out = fixtures::servegate()
            .args(&args)
            .arg(&gate)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains(&format!("typo.toml:{line}:1")), "{stderr}");
        assert!(stderr.contains("flor_tok_s"), "{stderr}");
    }
}

#[test]
fn serve_that_never_becomes_ready_fails_every_assertion_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let text = r#"
[gate]
name = "dead"
[serve]
command = ["sh", "-c", "echo \"E couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {port}\" >&2; exit 1"]
ready_timeout_s = 300
[request]
model = "m"
max_tokens = 8
prompts = ["hi"]
[assert.rate]
floor_tok_s = 1.0
[assert.content]
"#;
    let gate = write_gate(tmp.path(), "dead.toml", text);
    let t = Instant::now();
    let out = fixtures::servegate()
        .args(["run", "--quiet", "--runs"])
        .arg(tmp.path().join("runs"))
        .arg(&gate)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    // The ready timeout (300 s) is far from this bound: at once and after the timeout stay apart however
    // busy the machine is.
    assert!(
        t.elapsed() < Duration::from_secs(120),
        "an exited serve is reported at once, not after the ready timeout"
    );
    for a in ["rate FAIL", "content FAIL"] {
        let l = stdout
            .lines()
            .find(|l| l.starts_with(a))
            .unwrap_or_else(|| panic!("{a} missing:\n{stdout}"));
        assert!(
            l.contains("never became ready") && l.contains("couldn't bind HTTP server socket"),
            "{l}"
        );
    }
}

#[test]
fn help_prints_usage_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec!["--help"],
        vec!["run", "--help"],
        vec!["judge", "--help"],
    ] {
        let out = fixtures::servegate()
            .args(&args)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "--help wrote files"
    );
}

/// A pair whose arms name different model files is refused before any serve starts.
#[test]
fn pair_with_two_different_model_files_is_refused_before_any_serve_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.gguf");
    let b = tmp.path().join("b.gguf");
    std::fs::write(&a, b"model A").unwrap();
    std::fs::write(&b, b"model B").unwrap();
    let marker = tmp.path().join("started");
    let text = format!(
        r#"
[gate]
name = "mismatch"
[pair]
[pair.ours]
command = ["sh", "-c", "touch {marker}; sleep 30", "{{model}}"]
[pair.theirs]
model_file = "{b}"
command = ["sh", "-c", "touch {marker}; sleep 30", "{b}"]
[serve]
[request]
model = "{a}"
max_tokens = 8
temperature = 0
top_k = 1
prompts = ["hi"]
[assert.ratio]
at_least = 0.5
"#,
        marker = marker.display(),
        a = a.display(),
        b = b.display()
    );
    let gate = write_gate(tmp.path(), "mismatch.toml", &text);
    let out = fixtures::servegate()
        .args(["run", "--quiet", "--runs"])
        .arg(tmp.path().join("runs"))
        .arg(&gate)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("ratio FAIL the pair is void: pair_model_mismatch: ours loads"),
        "{stdout}"
    );
    assert!(!marker.exists(), "a serve was started");
    // `servegate judge` of the voided pair says what `run` said: exit 3 (the spec pairs two model files, so
    // nothing about the serves was judged), in its RESULT line and its results JSON (one run path).
    let pair_dir = std::fs::read_dir(tmp.path().join("runs/mismatch"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("the pair directory");
    let results = tmp.path().join("judge.json");
    let judged = fixtures::servegate()
        .arg("judge")
        .arg(&pair_dir)
        .arg("--json")
        .arg(&results)
        .output()
        .unwrap();
    let jstdout = String::from_utf8_lossy(&judged.stdout);
    assert_eq!(judged.status.code(), Some(3), "{jstdout}");
    assert!(jstdout.contains("RESULT: ERROR"), "{jstdout}");
    assert!(
        stdout.contains("RESULT: ERROR"),
        "`run` and `judge` print the same RESULT: {stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert_eq!(v["exit_code"], 3, "{v}");
    assert_eq!(v["producer"], "judge", "{v}");
    assert_eq!(v["gates"][0]["failure_kind"], "spec_invalid", "{v}");
    // And the same file under two paths is one model file: accepted (the arms then run).
    let same = text
        .replace(
            &format!("model_file = \"{}\"", b.display()),
            &format!("model_file = \"{}\"", a.display()),
        )
        .replace(
            &format!("\"{}\"]", b.display()),
            &format!("\"{}\"]", a.display()),
        );
    let spec =
        servegate::spec::parse(&gate, &same, &servegate::spec::Context::for_file(&gate)).unwrap();
    let pair = spec.pair.unwrap();
    assert_eq!(pair.ours.model_file, pair.theirs.model_file);
    assert_eq!(pair.order, vec!["theirs", "ours", "ours", "theirs"]);
}

fn procs_with(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&c).contains(needle) && pid_alive(pid) {
                out.push(pid);
            }
        }
    }
    out
}

/// The setup step is stopped with the runner: SIGTERM of `servegate run` during setup leaves no setup process
/// (nor its children) behind.
#[test]
fn setup_does_not_outlive_a_stopped_runner() {
    let tmp = tempfile::tempdir().unwrap();
    let needle = format!("{}.4242", std::process::id() % 97 + 3);
    let text = format!(
        r#"
[gate]
name = "slow-setup"
[serve]
setup = ["sh", "-c", "sleep {needle} & sleep {needle}"]
command = ["sleep", "60"]
[request]
model = "m"
max_tokens = 8
prompts = ["hi"]
[assert.content]
"#
    );
    let gate = write_gate(tmp.path(), "slow-setup.toml", &text);
    let mut child = fixtures::servegate()
        .args(["run", "--quiet", "--runs"])
        .arg(tmp.path().join("runs"))
        .arg(&gate)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while procs_with(&needle).len() < 2 {
        assert!(Instant::now() < deadline, "setup never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !procs_with(&needle).is_empty() {
        assert!(
            Instant::now() < deadline,
            "setup processes outlived the runner: {:?}",
            procs_with(&needle)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_whose_every_gate_was_ignored_says_skip_not_pass() {
    let out = fixtures::servegate()
        .args(["run", "--quiet"])
        .arg(root().join("gates/npu-serve-smoke.toml"))
        .env_remove("SERVEGATE_STRICT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Nothing was checked: not green (exit 7), and the RESULT line says so.
    assert_eq!(
        out.status.code(),
        Some(servegate::error::exit::NOTHING_CHECKED),
        "{stdout}"
    );
    assert!(
        stdout.contains("RESULT: SKIP (every gate was ignored: nothing was checked)"),
        "{stdout}"
    );
}

#[test]
fn judge_of_a_missing_or_damaged_run_is_an_evidence_error() {
    let out = fixtures::servegate()
        .args(["judge", "/nonexistent/run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(5));
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("run");
    std::fs::create_dir(&copy).unwrap();
    let src = root().join("tests/data/runs/npu-rc-pass");
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    std::fs::remove_file(copy.join("05.reads.jsonl")).unwrap();
    let out = fixtures::servegate()
        .arg("judge")
        .arg(&copy)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("05.reads.jsonl") && stderr.contains("missing"),
        "{stderr}"
    );
}

/// `servegate judge` on recorded evidence whose request 04 a stalled client read all at once (its token
/// chunks 0.01 ms apart: a decode window under the 5 ms minimum): that reply is not measured, named with its
/// cause, and the rate is judged on the other two, never failed for it. A first token read late with
/// later ones (`recv_ms` set, one read holding two token events) has no measured TTFT, said so.
#[test]
fn servegate_judge_calls_a_reply_it_could_not_time_not_measured_never_slow() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, _) = run_copy(tmp.path());
    let restamp = |name: &str, f: &dyn Fn(usize, &mut serde_json::Value, Option<f64>)| {
        let path = run.join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let first_token = lines
            .iter()
            .position(|l| l["text"].as_str().unwrap_or("").contains("\"content\":\""))
            .unwrap();
        let t0 = lines[first_token]["t_ms"].as_f64();
        for (i, l) in lines.iter_mut().enumerate() {
            f(
                i.saturating_sub(first_token),
                l,
                t0.filter(|_| i >= first_token),
            );
        }
        let out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(&path, out.join("\n") + "\n").unwrap();
    };
    restamp("04.reads.jsonl", &|k, l, t0| {
        if let Some(t0) = t0 {
            l["t_ms"] = serde_json::json!(t0 + 0.01 * k as f64);
        }
    });
    let out = fixtures::servegate()
        .arg("judge")
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rate = stdout
        .lines()
        .find(|l| l.starts_with("rate "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(!rate.starts_with("rate FAIL"), "{rate}");
    assert!(
        rate.contains("n=2 of 3 measured; not measured: request 04 (decode window 0.")
            && rate.contains("ms under the 5 ms minimum)"),
        "{rate}"
    );
    assert!(rate.len() < 300, "{}: {rate}", rate.len());

    // Kernel-stamped reads (recv_ms) of request 05, its first two token events in one read taken late.
    let (run, _) = run_copy(&tmp.path().join("b"));
    let path = run.join("05.reads.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let i = lines
        .iter()
        .position(|l| l["text"].as_str().unwrap_or("").contains("\"content\":\""))
        .unwrap();
    let second = lines.remove(i + 1);
    let joined = format!(
        "{}{}",
        lines[i]["text"].as_str().unwrap(),
        second["text"].as_str().unwrap()
    );
    lines[i]["text"] = serde_json::json!(joined);
    lines[i]["t_ms"] = second["t_ms"].clone();
    for l in lines.iter_mut() {
        let t = l["t_ms"].as_f64().unwrap();
        l["recv_ms"] = serde_json::json!(t + 0.05);
    }
    let out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&path, out.join("\n") + "\n").unwrap();
    let out = fixtures::servegate()
        .arg("judge")
        .arg(&run)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ttft = stdout
        .lines()
        .find(|l| l.starts_with("first_token "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        ttft.contains("n=2 of 3 measured; not measured: request 05 (first token arrived with 1 more while the client was not reading (in "),
        "{ttft}"
    );
    assert!(!ttft.starts_with("first_token FAIL"), "{ttft}");
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{} inspect {}/tests/data/cases/case-01-usage-empty-choices.reads.jsonl | head -c 1 >/dev/null; echo done", fixtures::BIN, root().display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A copy of the recorded NPU run in `tmp/run`, and a snapshot of its files' bytes (to prove none was touched).
fn run_copy(tmp: &Path) -> (PathBuf, Vec<(PathBuf, Vec<u8>)>) {
    let copy = tmp.join("run");
    fixtures::copy_dir(&root().join("tests/data/runs/npu-rc-pass"), &copy);
    (copy.clone(), snapshot(&copy))
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

/// Runs the binary with `args` (and `env`), from `cwd`.
fn servegate(args: &[&std::ffi::OsStr], env: &[(&str, &Path)], cwd: &Path) -> std::process::Output {
    let mut cmd = fixtures::servegate();
    cmd.args(args).current_dir(cwd);
    for k in [
        "SERVEGATE_JSON",
        "SERVEGATE_JUNIT",
        "SERVEGATE_SUMMARY",
        "GITHUB_ACTIONS",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

/// Exit 2, a `refused` line naming `what`, and every file of the run and the gate unchanged.
fn assert_refused(out: &std::process::Output, what: &str, unchanged: &[(PathBuf, Vec<u8>)]) {
    let all = fixtures::text(out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("refused: it ")
            && all.contains(what)
            && all.contains("nothing was removed or written"),
        "{all}"
    );
    for (p, bytes) in unchanged {
        assert_eq!(
            std::fs::read(p).ok().as_ref(),
            Some(bytes),
            "{} was touched\n{all}",
            p.display()
        );
    }
}

/// `judge RUN --json RUN/run.json` and `--junit RUN/00.reads.jsonl` used to delete the evidence before reading
/// it: refused, every file of the run as it was.
#[test]
fn report_path_inside_the_run_judged_is_refused_before_anything_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, before) = run_copy(tmp.path());
    for (flag, file) in [
        ("--json", "run.json"),
        ("--junit", "00.reads.jsonl"),
        ("--summary", "gate.toml"),
        ("--json", "new-report.json"),
    ] {
        let out = servegate(
            &[
                os("judge"),
                run.as_os_str(),
                os(flag),
                run.join(file).as_os_str(),
            ],
            &[],
            tmp.path(),
        );
        assert_refused(&out, "the run directory being judged", &before);
        assert!(!run.join("new-report.json").exists());
    }
    // The same through the environment variables.
    let out = servegate(
        &[os("judge"), run.as_os_str()],
        &[("SERVEGATE_JUNIT", &run.join("run.json"))],
        tmp.path(),
    );
    assert_refused(&out, "the run directory being judged", &before);
    // A report outside the run is written as before.
    let ok = tmp.path().join("r.json");
    let out = servegate(
        &[os("judge"), run.as_os_str(), os("--json"), ok.as_os_str()],
        &[],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", fixtures::text(&out));
    assert!(ok.is_file());
    assert_eq!(snapshot(&run), before);
}

/// `judge RUN --gate g.toml --summary g.toml` deleted the gate: refused; so is a symlink to it, and a report
/// whose directory is a symlink into the run (the parent resolved when the file does not exist yet).
#[test]
fn report_path_that_is_the_gate_or_a_link_into_the_run_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, mut before) = run_copy(tmp.path());
    let gate = tmp.path().join("g.toml");
    std::fs::copy(run.join("gate.toml"), &gate).unwrap();
    before.push((gate.clone(), std::fs::read(&gate).unwrap()));
    let out = servegate(
        &[
            os("judge"),
            run.as_os_str(),
            os("--gate"),
            gate.as_os_str(),
            os("--summary"),
            gate.as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "the gate file", &before);
    let link = tmp.path().join("report.json");
    std::os::unix::fs::symlink(run.join("run.json"), &link).unwrap();
    let out = servegate(
        &[os("judge"), run.as_os_str(), os("--json"), link.as_os_str()],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "the run directory being judged", &before);
    let linked_dir = tmp.path().join("reports");
    std::os::unix::fs::symlink(&run, &linked_dir).unwrap();
    let out = servegate(
        &[
            os("judge"),
            run.as_os_str(),
            os("--junit"),
            linked_dir.join("junit.xml").as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "the run directory being judged", &before);
    assert!(!run.join("junit.xml").exists());
    // Two reports on one file would overwrite each other.
    let one = tmp.path().join("one.xml");
    let out = servegate(
        &[
            os("judge"),
            run.as_os_str(),
            os("--json"),
            one.as_os_str(),
            os("--junit"),
            one.as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", fixtures::text(&out));
    assert!(
        fixtures::text(&out).contains("names the same file"),
        "{}",
        fixtures::text(&out)
    );
}

/// `SERVEGATE_JSON=g.toml servegate run g.toml` deleted the gate before running it: refused, nothing run.
#[test]
fn report_path_that_is_the_gate_run_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let gate = tmp.path().join("g.toml");
    std::fs::copy(root().join("tests/data/runs/npu-rc-pass/gate.toml"), &gate).unwrap();
    let before = vec![(gate.clone(), std::fs::read(&gate).unwrap())];
    let runs = tmp.path().join("runs");
    let out = servegate(
        &[os("run"), os("--runs"), runs.as_os_str(), gate.as_os_str()],
        &[("SERVEGATE_JSON", &gate)],
        tmp.path(),
    );
    assert_refused(&out, "the gate file", &before);
    assert!(!runs.exists(), "nothing was run");
    // The relative spelling of the same file, from the gate's directory.
    let out = servegate(
        &[
            os("run"),
            os("--runs"),
            runs.as_os_str(),
            os("g.toml"),
            os("--summary"),
            os("./sub/../g.toml"),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "the gate file", &before);
}

/// `export --bmf RUN -o RUN/run.json` and `leaderboard --out RUN/run.json` overwrote the evidence; an export or
/// page over a record is refused the same way.
#[test]
fn export_and_leaderboard_output_over_an_input_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, before) = run_copy(tmp.path());
    let out = servegate(
        &[
            os("export"),
            os("--bmf"),
            run.as_os_str(),
            os("-o"),
            run.join("run.json").as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "a source of this export", &before);
    let records = tmp.path().join("records");
    fixtures::copy_dir(&root().join("data/records"), &records);
    let recs = snapshot(&records);
    let first = recs[0].0.clone();
    let out = servegate(
        &[
            os("export"),
            os("--bmf"),
            first.as_os_str(),
            os("-o"),
            first.as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "a source of this export", &recs);
    let out = servegate(
        &[
            os("leaderboard"),
            os("--records"),
            records.as_os_str(),
            os("--out"),
            run.join("run.json").as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "inside the run directory", &before);
    let out = servegate(
        &[
            os("leaderboard"),
            os("--records"),
            records.as_os_str(),
            os("--out"),
            first.as_os_str(),
        ],
        &[],
        tmp.path(),
    );
    assert_refused(&out, "the record directory", &recs);
}

/// `judge` allocated for run.json's `planned` (about 880 MB at 1e7): a plan past what any gate can plan is
/// refused as malformed evidence (exit 5) before anything is sized by it.
#[test]
fn judge_refuses_a_plan_no_gate_can_make() {
    let tmp = tempfile::tempdir().unwrap();
    let (run, _) = run_copy(tmp.path());
    let p = run.join("run.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    for (key, n) in [("planned", 100_000_000u64), ("planned_warmup", 10_000_000)] {
        let mut w = v.clone();
        w[key] = n.into();
        std::fs::write(&p, serde_json::to_vec(&w).unwrap()).unwrap();
        let out = servegate(&[os("judge"), run.as_os_str()], &[], tmp.path());
        let all = fixtures::text(&out);
        assert_eq!(out.status.code(), Some(5), "{all}");
        assert!(
            all.contains(&format!("`{key}` is {n}, more than any gate plans")),
            "{all}"
        );
    }
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    let out = servegate(&[os("judge"), run.as_os_str()], &[], tmp.path());
    assert_eq!(out.status.code(), Some(0), "{}", fixtures::text(&out));
}

/// `servegate run DIR` reads a gates directory as the harness does: every `*.toml` in it. None: exit 7
/// (nothing was checked) naming the directory, as README's exit-code table says (was: `cannot read gate: Is a
/// directory`, exit 3); a gate in it is read (here an invalid one: exit 3 naming its file).
#[test]
fn run_of_a_gates_directory_runs_its_gate_files_and_of_an_empty_one_exits_7() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("gates");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a gate").unwrap();
    let run = || {
        fixtures::servegate()
            .arg("run")
            .arg(&dir)
            .arg("--runs")
            .arg(tmp.path().join("runs"))
            .env_remove("SERVEGATE_JSON")
            .env_remove("SERVEGATE_JUNIT")
            .env_remove("SERVEGATE_SUMMARY")
            .output()
            .unwrap()
    };
    let o = run();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{err}");
    assert!(
        err.contains(&format!("no gate file (*.toml) in {}", dir.display())),
        "{err}"
    );
    std::fs::write(
        dir.join("broken.toml"),
        "name = \"broken\"\nnot toml at all\n",
    )
    .unwrap();
    let o = run();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(3), "{all}");
    assert!(all.contains("broken.toml"), "{all}");
    assert!(!all.contains("Is a directory"), "{all}");
}
