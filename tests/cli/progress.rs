//! Issue 32, friction 2: progress lines with the elapsed time on every wait over two seconds, on stderr, silenced
//! by `-q` (src/io/progress.rs paces them: the first at 2 s, then every 10 s). Through the `servegate` binary and
//! the gates harness, on a scripted serve slow to be ready, a `--url` serve that is not there, a slow `setup`,
//! a long request, a load point, a serve slow to stop, `servegate init`'s wait, and under nextest a trial
//! waiting for another process's serve. Timings are only ever asserted as "at least one line": a busy runner makes waits longer, never
//! shorter.

use std::path::Path;
use std::process::Output;

use servegate::replay::scripted::{LogLine, Script};

use crate::fixtures::{self, Entry};

/// A scripted serve that loads for `ready_after_ms` once it listens (`/health` 503 meanwhile), its log saying so.
fn slow_script(ready_after_ms: f64) -> Script {
    let mut s = fixtures::chat_script("Paris is the capital .");
    s.start.listening_log = vec![LogLine::err("load_tensors: loading model tensors")];
    s.health.ready_after_ms = ready_after_ms;
    s
}

fn gate(name: &str, serve: &str) -> String {
    format!(
        "[gate]\nname = \"{name}\"\n[serve]\n{serve}\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\nrepeats = 1\n[assert.content]\n"
    )
}

fn run(dir: &Path, file: &str, extra: &[&str]) -> Output {
    fixtures::servegate()
        .arg("run")
        .arg(file)
        .args(extra)
        .current_dir(dir)
        .env("SERVEGATE_RUNS", dir.join("runs"))
        .output()
        .unwrap()
}

fn texts(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_serve_slow_to_be_ready_says_how_long_it_has_waited_and_q_silences_it() {
    let tmp = tempfile::tempdir().unwrap();
    let command = format!(
        "command = {}",
        fixtures::scripted_command(&slow_script(3500.0))
    );
    std::fs::write(tmp.path().join("slow.toml"), gate("slow", &command)).unwrap();

    let out = run(tmp.path(), "slow.toml", &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("waiting for readiness at http://"))
        .unwrap_or_else(|| panic!("no progress line on stderr:\n{stderr}"));
    // `[slow] waiting for readiness at http://127.0.0.1:PORT/health: 2 s (last: HTTP 503 ...; N probes, ...)`
    assert!(
        line.starts_with("[slow] waiting for readiness at "),
        "{line}"
    );
    assert!(line.contains("/health: "), "{line}");
    let secs: u64 = line
        .split("/health: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no elapsed seconds: {line}"));
    assert!(secs >= 2, "{line}");
    assert!(line.contains(" s (last: HTTP 503; "), "{line}");
    assert!(line.contains(" loading; "), "{line}");
    assert!(
        line.contains("log: load_tensors: loading model tensors"),
        "{line}"
    );
    // Nothing of it on stdout (the verdicts' stream).
    assert!(!stdout.contains("waiting for"), "{stdout}");

    let out = run(tmp.path(), "slow.toml", &["-q"]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        !stderr.contains("waiting for"),
        "-q printed progress:\n{stderr}"
    );
    assert!(!stdout.contains("waiting for"), "{stdout}");
}

#[test]
fn a_url_serve_that_never_answers_is_counted_refused_and_the_timeout_says_what_to_check() {
    let tmp = tempfile::tempdir().unwrap();
    // A port nothing listens on (taken free, then released).
    let port = servegate::io::port::free_port("127.0.0.1").unwrap();
    let serve = format!("url = \"http://127.0.0.1:{port}\"\nready_timeout_s = 4");
    std::fs::write(tmp.path().join("absent.toml"), gate("absent", &serve)).unwrap();
    let out = run(tmp.path(), "absent.toml", &[]);
    let (stdout, stderr) = texts(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let all = format!("{stdout}\n{stderr}");
    let progress = stderr
        .lines()
        .find(|l| {
            l.contains(&format!(
                "waiting for readiness at http://127.0.0.1:{port}/health: "
            ))
        })
        .unwrap_or_else(|| panic!("no progress line:\n{stderr}"));
    assert!(progress.contains("last: connection refused"), "{progress}");
    assert!(progress.contains(" refused)"), "{progress}");
    assert!(
        all.contains(&format!(
            "http://127.0.0.1:{port}/health not 200 within 4 s: nothing listens there (every one of "
        )) && all.contains("probes refused): is the serve running"),
        "{all}"
    );
    // The gate sets ready_timeout_s, so the wait is kept (a serve starting elsewhere), and said at once.
    assert!(
        all.contains(&format!("waiting up to 4 s for the url serve at http://127.0.0.1:{port}: nothing listens there yet (")
        ) && all.contains("the gate sets [serve] ready_timeout_s, so a serve starting elsewhere is waited for"),
        "{all}"
    );
}

/// A `url` serve servegate does not start, and a gate that does not ask to wait (no `ready_timeout_s`): a
/// port that refuses every probe fails after a short window naming what does not listen, not after the
/// default 120 s; a host name that does not resolve fails at once, naming it.
#[test]
fn a_url_serve_that_is_not_there_fails_early_unless_the_gate_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let port = servegate::io::port::free_port("127.0.0.1").unwrap();
    let serve = format!("url = \"http://127.0.0.1:{port}\"");
    std::fs::write(tmp.path().join("absent.toml"), gate("absent", &serve)).unwrap();
    // Shortened as a console shows it (not -v): the remedy survives the shortening.
    let out = run(tmp.path(), "absent.toml", &["-q"]);
    let (stdout, stderr) = texts(&out);
    let all = format!("{stdout}\n{stderr}");
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!("http://127.0.0.1:{port}/health refused all "))
            && all.contains(
                " s: nothing listens there (servegate does not start a url serve); start it"
            ),
        "{all}"
    );
    assert!(!all.contains("within 120 s"), "{all}");
    assert!(
        all.contains("; start it, or fix [serve] url (set [serve] ready_timeout_s to wait for a serve starting elsewhere)"),
        "{all}"
    );

    let typo = "url = \"http://no-such-serve.invalid:8080\"";
    std::fs::write(tmp.path().join("typo.toml"), gate("typo", typo)).unwrap();
    let out = run(tmp.path(), "typo.toml", &["-v"]);
    let (stdout, stderr) = texts(&out);
    let all = format!("{stdout}\n{stderr}");
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(
            "http://no-such-serve.invalid:8080: the host no-such-serve.invalid does not resolve ("
        ) && all.contains(
            "nothing to wait for, stopped at once; fix [serve] url (set [serve] ready_timeout_s"
        ),
        "{all}"
    );
}

#[test]
fn a_slow_setup_shows_its_log_s_last_line() {
    let tmp = tempfile::tempdir().unwrap();
    let serve = format!(
        "command = {}\nsetup = [\"sh\", \"-c\", \"echo fetching model weights; sleep 3\"]",
        fixtures::scripted_command(&slow_script(0.0))
    );
    std::fs::write(tmp.path().join("setup.toml"), gate("setup", &serve)).unwrap();
    let out = run(tmp.path(), "setup.toml", &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[setup] setup: sh -c echo fetching model weights; sleep 3: "))
        .unwrap_or_else(|| panic!("no setup progress line:\n{stderr}"));
    assert!(
        line.ends_with(" s (last: fetching model weights)"),
        "{line}"
    );
}

#[test]
fn the_gates_harness_prints_a_wait_without_servegate_verbose() {
    let work = tempfile::tempdir().unwrap();
    let gates = work.path().join("gates");
    std::fs::create_dir_all(&gates).unwrap();
    let command = format!(
        "command = {}",
        fixtures::scripted_command(&slow_script(3500.0))
    );
    std::fs::write(gates.join("slow.toml"), gate("slow", &command)).unwrap();
    let out = fixtures::harness(Entry::Code, &[])
        .env("PATH", fixtures::path_env())
        .env("SERVEGATE_GATES", &gates)
        .env("SERVEGATE_RUNS", work.path().join("runs"))
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("servegate: slow waiting for readiness at http://"))
        .unwrap_or_else(|| panic!("no progress line from the harness:\n{stderr}"));
    assert!(
        line.contains("/health: ") && line.contains(" s (last: "),
        "{line}"
    );
    // Only the waits: the other steps stay behind SERVEGATE_VERBOSE.
    assert!(!stderr.contains("starting serve on port"), "{stderr}");
}

#[test]
fn a_long_request_says_how_long_its_reply_has_been_awaited() {
    let tmp = tempfile::tempdir().unwrap();
    let mut script = slow_script(0.0);
    // The first token 3 s after the head (a serve that loads its model on the first request).
    script.reply.first_token_ms = 3000.0;
    let command = format!("command = {}", fixtures::scripted_command(&script));
    std::fs::write(tmp.path().join("long.toml"), gate("long", &command)).unwrap();
    let out = run(tmp.path(), "long.toml", &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[long] waiting for request 00's reply: "))
        .unwrap_or_else(|| panic!("no progress line for the long request:\n{stderr}"));
    assert!(line.contains(" s (times out at "), "{line}");
    // The request is measured as before: answered, its first token about 3 s late.
    assert!(stderr.contains("[long] request 00: HTTP 200"), "{stderr}");
    let out = run(tmp.path(), "long.toml", &["-q"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("waiting for"));
}

#[test]
fn init_says_how_long_it_has_waited_for_the_serve_it_started_and_q_silences_it() {
    let p = fixtures::Project::new();
    let mut script = fixtures::chat_script("Paris is the capital .");
    // Refuses connections for 6 s; init gives up at 3.5 s, after its first progress line (at 2 s).
    script.start.listen_delay_ms = 6000.0;
    script.start.log = vec![LogLine::err("loading the weights")];
    let mut argv = fixtures::scripted_argv(&script, "{host}", "{port}");
    let last = argv.len() - 1;
    argv[last] = argv[last].replace('{', "{{").replace('}', "}}");
    let run_init = |quiet: bool| {
        let mut cmd = p.servegate();
        cmd.args(["init", "--name", "slow", "--ready-timeout-s", "3.5"]);
        if quiet {
            cmd.arg("-q");
        }
        cmd.arg("--").args(&argv);
        fixtures::Out::of(&mut cmd)
    };
    let out = run_init(false);
    assert_ne!(out.code, 0, "{}", out.all());
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("init: waiting for readiness at http://"))
        .unwrap_or_else(|| panic!("no progress line:\n{}", out.all()));
    assert!(
        line.contains("/v1/models: ") && line.contains(" s (last: connection refused; "),
        "{line}"
    );
    assert!(line.contains("log: loading the weights"), "{line}");
    let out = run_init(true);
    assert_ne!(out.code, 0, "{}", out.all());
    assert!(!out.stderr.contains("waiting for"), "{}", out.all());
}

#[test]
fn under_nextest_a_trial_waiting_for_another_process_s_serve_says_so() {
    use std::io::BufRead;
    let work = tempfile::tempdir().unwrap();
    let gates = work.path().join("gates");
    std::fs::create_dir_all(&gates).unwrap();
    let command = format!(
        "command = {}",
        fixtures::scripted_command(&slow_script(0.0))
    );
    std::fs::write(gates.join("fast.toml"), gate("fast", &command)).unwrap();
    let runs = work.path().join("runs");
    // Another nextest process of the same run holds the one-serve-at-a-time lock.
    let cache = runs
        .join(servegate::run::harness::NEXTEST_CACHE_DIR)
        .join("run-x");
    std::fs::create_dir_all(&cache).unwrap();
    let lock = std::fs::File::create(cache.join("serve.lock")).unwrap();
    lock.lock().unwrap();
    let mut child = fixtures::harness(Entry::Code, &["--exact", "fast::content"])
        .env("PATH", fixtures::path_env())
        .env("SERVEGATE_GATES", &gates)
        .env("SERVEGATE_RUNS", &runs)
        .env("NEXTEST", "1")
        .env("NEXTEST_RUN_ID", "run-x")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    // Held until the waiter has said so (however slow the machine), then released.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    let said = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l)
                if l.starts_with(
                    "servegate: fast waiting for another test process's serve to stop",
                ) =>
            {
                break l
            }
            Ok(l) => seen.push(l),
            Err(_) => panic!("no waiting line within 60 s:\n{}", seen.join("\n")),
        }
    };
    assert!(said.contains(" s ("), "{said}");
    drop(lock);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}\n{}", seen.join("\n"));
}

#[test]
fn a_serve_slow_to_stop_says_how_long_it_has_been_given() {
    let tmp = tempfile::tempdir().unwrap();
    let mut script = slow_script(0.0);
    // Ignores SIGTERM: only the SIGKILL after the 3 s grace ends it.
    script.term = servegate::replay::scripted::Term::Ignore;
    let command = format!(
        "command = {}\nstop_grace_s = 3",
        fixtures::scripted_command(&script)
    );
    std::fs::write(tmp.path().join("stubborn.toml"), gate("stubborn", &command)).unwrap();
    let out = run(tmp.path(), "stubborn.toml", &[]);
    let (stdout, stderr) = texts(&out);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[stubborn] waiting for the serve to stop: "))
        .unwrap_or_else(|| panic!("no progress line for the stop:\n{stdout}\n{stderr}"));
    assert!(
        line.ends_with(" s (SIGTERM sent; SIGKILL at 3 s)"),
        "{line}"
    );
    assert!(stderr.contains("SIGKILL"), "{stderr}");
}

#[test]
fn a_load_point_says_how_long_it_has_run() {
    let tmp = tempfile::tempdir().unwrap();
    let mut script = slow_script(0.0);
    // Two requests one after the other, each 1.5 s to its first token: the point runs 3 s and more.
    script.reply.first_token_ms = 1500.0;
    let text = format!(
        "[gate]\nname = \"sweep\"\n[serve]\ncommand = {}\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\n[load]\nconcurrency = [1]\nrequests = 2\nwarmup_requests = 0\nmax_lag_ms = 1000\n[assert.errors]\nmax_rate = 0.0\n",
        fixtures::scripted_command(&script)
    );
    std::fs::write(tmp.path().join("sweep.toml"), text).unwrap();
    let out = run(tmp.path(), "sweep.toml", &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("[sweep] waiting for load point "))
        .unwrap_or_else(|| panic!("no progress line for the load point:\n{stderr}"));
    assert!(line.ends_with(" s (2 requests planned)"), "{line}");
}

#[test]
fn init_probing_a_url_that_accepts_and_never_answers_says_so() {
    // Accepts every connection and never answers (each probe of init then takes its 5 s).
    let url = fixtures::silent_http();
    let p = fixtures::Project::new();
    let out = fixtures::Out::of(
        p.servegate()
            .args(["init", "--name", "hole", "--url", &url]),
    );
    assert_ne!(out.code, 0, "{}", out.all());
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with(&format!("init: probing {url}: ")))
        .unwrap_or_else(|| panic!("no progress line:\n{}", out.all()));
    assert!(line.contains(" s (each of /health, /v1/models"), "{line}");
    assert!(out.all().contains("nothing answers at"), "{}", out.all());
}

/// A serve that loads for 6 s (503 until then): readiness is probed every 25 ms for 2 s, then backed off to
/// every 500 ms, so its log holds about 90 `GET /health` lines, not the 240 a steady 25 ms gives; run.json
/// states `serve.ready_window_ms`, how many ms before `ready_ms` the serve may have turned ready.
#[test]
fn readiness_probes_back_off_and_the_evidence_says_ready_ms_precision() {
    let tmp = tempfile::tempdir().unwrap();
    let mut script = slow_script(6000.0);
    script.request_log = vec![LogLine::err("req {method} {path} {status}")];
    let command = format!("command = {}", fixtures::scripted_command(&script));
    std::fs::write(tmp.path().join("loads.toml"), gate("loads", &command)).unwrap();
    let out = run(tmp.path(), "loads.toml", &["-q"]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let dir = fixtures::evidence_dir(&stdout);
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let probes = log.lines().filter(|l| l.contains("GET /health")).count();
    // 2 s at 25 ms is at most 80, then 50+100+200+400 ms and 500 ms steps over the other 4 s: about 90
    // (a busy machine sends fewer, never more).
    assert!((10..=130).contains(&probes), "{probes} probes:\n{log}");
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let window = run["serve"]["ready_window_ms"].as_f64().unwrap();
    let ready = run["serve"]["ready_ms"].as_f64().unwrap();
    assert!(window > 0.0 && window <= ready, "{window} of {ready}");
}
