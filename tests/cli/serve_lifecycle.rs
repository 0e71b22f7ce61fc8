//! The serve's lifecycle against scripted fake serves (`servegate scripted-serve` playing a llama-server
//! look-alike, [`fixtures::llama_script`]): readiness through refusals and 503s (case 25), a port in use
//! (case 27), early and late exits and teardown on every exit path of the runner (case 28). Linux only;
//! needs sh (and python3 for the one test of a Python serve's buffered output).
//!
//! Timing bounds are generous on purpose (shared 2-core machine): each says what it protects.

use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use servegate::io::port;
use servegate::io::serve::{Serve, ServeError, ServeSpec};
use servegate::io::signals;
use servegate::replay::scripted::{ChildSpec, Script, Term};

use crate::fixtures;

const HELPER_ENV: &str = "SERVEGATE_LIFECYCLE_HELPER";

/// [`lifecycle_helper_runner`]'s name in this test binary (libtest names a test by its module path, the
/// crate left out: `serve_lifecycle::lifecycle_helper_runner`).
fn helper_test() -> String {
    fixtures::test_name(module_path!(), "lifecycle_helper_runner")
}

/// The llama-server look-alike with `f` applied: the serve of every test here. It outlives its parent (no
/// watchdog of its own): how the runner stops it is what these tests test.
fn fake(f: impl FnOnce(&mut Script)) -> Script {
    let mut s = fixtures::llama_script();
    s.outlive_parent = true;
    f(&mut s);
    s
}

/// A spec running the scripted serve playing `script` on `port`; 60 s ready timeout (a deadline that no
/// test expecting an early answer may come near).
fn fake_spec(dir: &Path, port: u16, script: Script) -> ServeSpec {
    let command = fixtures::scripted_argv(&script, "127.0.0.1", &port.to_string());
    let mut spec = ServeSpec::new(command, port, dir.join("serve.log"));
    spec.ready_timeout = Duration::from_secs(60);
    spec
}

fn free_port() -> u16 {
    port::free_port("127.0.0.1").expect("a free port")
}

/// Polls `f` every 20 ms for up to `timeout`; true as soon as it holds.
fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn count_matches(text: &str, pattern: &str) -> usize {
    let re = regex::Regex::new(pattern).unwrap();
    text.lines().filter(|l| re.is_match(l)).count()
}

fn read_pid(path: &Path, timeout: Duration) -> Option<u32> {
    let mut pid = None;
    eventually(timeout, || {
        pid = fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok());
        pid.is_some()
    });
    pid
}

// ---- case 25: readiness ---------------------------------------------------------------------------

#[test]
fn ready_only_after_the_first_200_with_load_time_and_503_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let spec = fake_spec(
        dir.path(),
        port,
        fake(|s| {
            s.start.listen_delay_ms = 300.0;
            s.health.ready_after_ms = 1000.0;
        }),
    );
    let mut serve = Serve::start(spec).unwrap();
    let info = serve.wait_ready().unwrap();

    // The fake refuses for 300 ms and loads for 1000 ms, both counted from its own start (after spawn).
    assert!(info.ready_ms >= 1300.0, "ready at {} ms", info.ready_ms);
    assert!(info.refused_polls >= 1, "{info:?}");
    assert!(info.loading_polls >= 1, "{info:?}");
    assert!(
        info.polls > info.refused_polls + info.loading_polls,
        "the 200 is a poll too"
    );
    let labels: Vec<&str> = info.statuses.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(labels.first(), Some(&"refused"), "{labels:?}");
    assert!(labels.contains(&"503"), "{labels:?}");
    assert_eq!(labels.last(), Some(&"200"), "{labels:?}");
    assert!(
        info.statuses.windows(2).all(|w| w[0].0 <= w[1].0),
        "{:?}",
        info.statuses
    );
    let first_503 = info.statuses.iter().find(|(_, l)| l == "503").unwrap().0;
    assert!(
        first_503 >= 300.0,
        "503 before the fake listened: {first_503} ms"
    );
    assert_eq!(info.listener_pid, Some(serve.pid()));
    assert_eq!(info.listener_in_group, Some(true));

    // A second call does not probe again.
    assert_eq!(serve.wait_ready().unwrap(), info);
    serve.check_alive().unwrap();

    // The log routes of case 25 (the fake writes llama-server's lines).
    let mut log = String::new();
    eventually(Duration::from_secs(60), || {
        log = serve.log_tail(1000);
        count_matches(&log, r"GET /health \S+ 200") >= 1
    });
    assert!(count_matches(&log, r"GET /health \S+ 503") >= 1, "{log}");
    assert_eq!(count_matches(&log, r"GET /health \S+ 200"), 1, "{log}");
    assert_eq!(
        count_matches(&log, r"server is listening on .* starting the main loop"),
        1,
        "{log}"
    );

    let report = serve.stop();
    assert_eq!(report.exit.as_deref(), Some("signal 15"), "{report:?}");
    assert!(
        !report.escalated_to_kill && !report.already_exited,
        "{report:?}"
    );
    assert!(
        report.reaped && report.pid_gone && report.port_closed,
        "{report:?}"
    );
    assert!(report.leftover_pids.is_empty(), "{report:?}");
}

/// How long the fake serve takes to listen on this machine now: a peer started and timed in the same test
/// (a start-up that took over 1.5 s at load 19 on 2 cores for a Python serve).
fn fake_listen_time(dir: &Path) -> Duration {
    let port = free_port();
    let mut spec = fake_spec(dir, port, fake(|s| s.health.never = true));
    spec.log_path = dir.join("peer.log");
    let t0 = Instant::now();
    let serve = Serve::start(spec).unwrap();
    assert!(
        eventually(Duration::from_secs(60), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        }),
        "the fake serve never listened"
    );
    let took = t0.elapsed();
    drop(serve.stop());
    took
}

#[test]
fn ready_timeout_names_the_last_status() {
    let dir = tempfile::tempdir().unwrap();
    // The timeout must outlast the fake's start-up, or the last status is "connection refused": 1.5 s past
    // three times a peer's start-up measured just before.
    let listen = fake_listen_time(dir.path());
    let timeout_ms = 1500 + 3 * listen.as_millis() as u64 / 100 * 100;
    let port = free_port();
    let mut spec = fake_spec(dir.path(), port, fake(|s| s.health.never = true));
    spec.ready_timeout = Duration::from_millis(timeout_ms);
    let t0 = Instant::now();
    let mut serve = Serve::start(spec).unwrap();
    let err = serve.wait_ready().unwrap_err();
    // It waited the whole timeout, and then gave up: the upper bound is a hang guard (timeout + one probe
    // of <= 1 s, with room for a busy machine), not a speed claim.
    assert!(
        t0.elapsed() >= Duration::from_millis(timeout_ms)
            && t0.elapsed() < Duration::from_millis(timeout_ms) + Duration::from_secs(30),
        "{:?} (timeout {timeout_ms} ms)",
        t0.elapsed()
    );
    match &err {
        ServeError::ReadyTimeout {
            last_status,
            polls,
            timeout_s,
            url,
            ..
        } => {
            // The fake's 503 and its body; a last probe that the deadline cut before the body (a busy
            // machine) leaves the bare status.
            assert!(last_status.starts_with("503"), "{last_status}");
            assert!(
                last_status.contains("Loading model") || last_status == "503",
                "{last_status}"
            );
            assert!(*polls >= 2);
            assert!(
                (*timeout_s - timeout_ms as f64 / 1000.0).abs() < 1e-9,
                "{timeout_s}"
            );
            assert_eq!(url, &format!("http://127.0.0.1:{port}/health"));
        }
        other => panic!("expected ReadyTimeout, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "ready_timeout: no 200 from http://127.0.0.1:{port}/health within {:.1} s (last: 503",
            timeout_ms as f64 / 1000.0
        )),
        "{msg}"
    );
    assert_eq!(err.kind(), "ready_timeout");
    // The serve is still running after a timeout; stopping it is the caller's move.
    serve.check_alive().unwrap();
    let report = serve.stop();
    assert!(report.pid_gone && report.port_closed, "{report:?}");
}

// ---- case 27: the port ----------------------------------------------------------------------------

#[test]
fn port_in_use_is_refused_before_spawning() {
    let dir = tempfile::tempdir().unwrap();
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let marker = dir.path().join("started");
    let mut spec = ServeSpec::new(
        vec![
            "sh".into(),
            "-c".into(),
            "touch \"$0\"; sleep 30".into(),
            marker.display().to_string(),
        ],
        port,
        dir.path().join("serve.log"),
    );
    spec.ready_timeout = Duration::from_secs(5);
    let me = std::process::id();
    // While another test of this process spawns a child, the child holds every descriptor of this process
    // (the holder's socket too) between its fork and its exec, and is then truly an owner of the port: the
    // refusal may name it. Such a window is brief: asked again, the refusal names this process.
    let mut named = Vec::new();
    let err = loop {
        let err = Serve::start(spec.clone()).unwrap_err();
        match &err {
            ServeError::PortInUse { addr, pid } => {
                assert_eq!(addr, &format!("127.0.0.1:{port}"));
                named.push(*pid);
                if *pid == Some(me) || named.len() == 5 {
                    break err;
                }
            }
            other => panic!("expected PortInUse, got {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        named.last(),
        Some(&Some(me)),
        "the owner of the port is this test process: named {named:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("port_in_use: 127.0.0.1:{port} (pid {me})")
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marker.exists(), "the serve must never have been started");
    assert!(
        !dir.path().join("serve.log").exists(),
        "nothing written before the refusal"
    );
    drop(holder);
}

#[test]
fn exit_before_ready_names_the_bind_failure_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // The fake is probed on `port` but binds `held`, which this test holds: a real bind failure.
    let held_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let held = held_listener.local_addr().unwrap().port();
    let port = free_port();
    let spec = fake_spec(
        dir.path(),
        port,
        fake(|s| {
            s.start.bind_port = Some(held);
            s.health.never = true;
        }),
    );
    let mut serve = Serve::start(spec).unwrap();
    let t0 = Instant::now();
    let err = serve.wait_ready().unwrap_err();
    // Well before the 60 s ready timeout: the exit is noticed while polling.
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    let expected_line =
        format!("E couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {held}");
    match &err {
        ServeError::ExitedBeforeReady {
            status,
            cause_line,
            log_tail,
            ready_ms_elapsed,
        } => {
            assert_eq!(status, "exit status 1");
            assert_eq!(cause_line.as_deref(), Some(expected_line.as_str()));
            assert!(log_tail.contains("load_model"), "{log_tail}");
            assert!(*ready_ms_elapsed > 0.0);
        }
        other => panic!("expected ExitedBeforeReady, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.starts_with("server_exited_before_ready (exit status 1, "),
        "{msg}"
    );
    assert!(msg.ends_with(&format!("): {expected_line}")), "{msg}");
    assert_eq!(err.kind(), "server_exited_before_ready");
    assert!(matches!(
        serve.check_alive(),
        Err(ServeError::ExitedBeforeReady { .. })
    ));

    let report = serve.stop();
    assert!(report.already_exited, "{report:?}");
    assert_eq!(report.exit.as_deref(), Some("exit status 1"));
    assert!(
        !report.escalated_to_kill && report.reaped && report.pid_gone,
        "{report:?}"
    );
    drop(held_listener);
}

#[test]
fn missing_program_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ServeSpec::new(
        vec![
            "/nonexistent/servegate-no-such-serve".into(),
            "--port".into(),
            "1".into(),
        ],
        free_port(),
        dir.path().join("serve.log"),
    );
    let err = Serve::start(spec).unwrap_err();
    assert_eq!(err.kind(), "spawn_failed", "{err}");
    assert!(
        err.to_string()
            .starts_with("spawn_failed: /nonexistent/servegate-no-such-serve --port 1: "),
        "{err}"
    );
}

// ---- case 28b: exits during the run ---------------------------------------------------------------

#[test]
fn exit_after_ready_is_reported_as_server_exited_during_run() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let spec = fake_spec(
        dir.path(),
        port,
        fake(|s| s.health.exit_after_ready_ms = Some(1500.0)),
    );
    let mut serve = Serve::start(spec).unwrap();
    serve.wait_ready().unwrap();
    serve.check_alive().unwrap();
    let mut err = None;
    assert!(eventually(Duration::from_secs(20), || {
        match serve.check_alive() {
            Ok(()) => false,
            Err(e) => {
                err = Some(e);
                true
            }
        }
    }));
    let err = err.unwrap();
    match &err {
        ServeError::ExitedAfterReady {
            status,
            after_ready_s,
            cause_line,
            log_tail,
        } => {
            assert_eq!(status, "exit status 0");
            assert!(
                *after_ready_s >= 1.0 && *after_ready_s < 20.0,
                "{after_ready_s}"
            );
            assert_eq!(cause_line.as_deref(), Some("[backend] stopping server..."));
            assert!(log_tail.contains("GET /health 127.0.0.1 200"), "{log_tail}");
        }
        other => panic!("expected ExitedAfterReady, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.starts_with("server_exited_during_run (exit status 0, "),
        "{msg}"
    );
    assert!(
        msg.contains(" s after ready): [backend] stopping server..."),
        "{msg}"
    );
    let report = serve.stop();
    assert!(
        report.already_exited && report.reaped && report.port_closed,
        "{report:?}"
    );
}

#[test]
fn exit_right_after_the_first_200_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let spec = fake_spec(
        dir.path(),
        port,
        fake(|s| s.health.exit_after_ready_ms = Some(0.0)),
    );
    let mut serve = Serve::start(spec).unwrap();
    // The fake exits about 1 ms after its first 200. Usually the alive re-check (one poll) catches it;
    // on a loaded machine the exit may land just after it, and then the very next check_alive must.
    match serve.wait_ready() {
        Err(ServeError::ExitedAfterReady { status, .. }) => assert_eq!(status, "exit status 0"),
        Err(other) => panic!("expected ExitedAfterReady, got {other}"),
        Ok(_) => {
            assert!(eventually(Duration::from_secs(10), || matches!(
                serve.check_alive(),
                Err(ServeError::ExitedAfterReady { .. })
            )));
        }
    }
}

// ---- case 28a: teardown ---------------------------------------------------------------------------

#[test]
fn sigterm_ignored_escalates_to_kill_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut spec = fake_spec(dir.path(), port, fake(|s| s.term = Term::Ignore));
    spec.stop_grace = Duration::from_secs(1);
    let mut serve = Serve::start(spec).unwrap();
    serve.wait_ready().unwrap();
    let pid = serve.pid();
    let report = serve.stop();
    assert!(report.escalated_to_kill, "{report:?}");
    assert_eq!(report.exit.as_deref(), Some("signal 9"));
    // Grace (1 s) + kill + reap + port check; 2 s of slack for a loaded machine.
    assert!(
        report.stop_ms >= 950.0 && report.stop_ms < 1000.0 + 2000.0,
        "{report:?}"
    );
    assert!(
        report.reaped && report.pid_gone && report.port_closed,
        "{report:?}"
    );
    assert!(signals::process_dead(pid));
    assert!(!signals::registered().contains(&pid));
}

#[test]
fn grandchild_is_stopped_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child_pid_file = dir.path().join("grandchild.pid");
    let spec = fake_spec(
        dir.path(),
        port,
        fake(|s| {
            s.child = Some(ChildSpec {
                ignore_term: false,
                pid_file: Some(child_pid_file.clone()),
            })
        }),
    );
    let mut serve = Serve::start(spec).unwrap();
    serve.wait_ready().unwrap();
    let grandchild = read_pid(&child_pid_file, Duration::from_secs(10)).expect("grandchild pid");
    assert!(!signals::process_dead(grandchild));
    let pgid = serve.pid();
    assert!(signals::group_members(pgid).contains(&grandchild));
    let report = serve.stop();
    assert!(!report.escalated_to_kill, "{report:?}");
    assert!(report.leftover_pids.is_empty(), "{report:?}");
    // Dead or a zombie waiting for init (the leader, its parent, is gone).
    assert!(eventually(
        Duration::from_secs(2),
        || signals::process_dead(grandchild)
    ));
    assert!(signals::group_members(pgid).is_empty());
}

#[test]
fn grandchild_ignoring_sigterm_is_killed_even_after_the_leader_exits() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child_pid_file = dir.path().join("grandchild.pid");
    let mut spec = fake_spec(
        dir.path(),
        port,
        fake(|s| {
            s.child = Some(ChildSpec {
                ignore_term: true,
                pid_file: Some(child_pid_file.clone()),
            })
        }),
    );
    spec.stop_grace = Duration::from_secs(1);
    let mut serve = Serve::start(spec).unwrap();
    serve.wait_ready().unwrap();
    let grandchild = read_pid(&child_pid_file, Duration::from_secs(10)).expect("grandchild pid");
    let report = serve.stop();
    assert_eq!(
        report.exit.as_deref(),
        Some("signal 15"),
        "the leader obeyed SIGTERM: {report:?}"
    );
    assert!(
        report.escalated_to_kill,
        "the grandchild did not: {report:?}"
    );
    assert!(report.leftover_pids.is_empty(), "{report:?}");
    assert!(eventually(
        Duration::from_secs(2),
        || signals::process_dead(grandchild)
    ));
}

#[test]
fn drop_stops_the_serve_and_deregisters_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut serve = Serve::start(fake_spec(dir.path(), port, fake(|_| {}))).unwrap();
    serve.wait_ready().unwrap();
    let pid = serve.pid();
    assert!(signals::registered().contains(&pid));
    drop(serve);
    assert!(signals::process_dead(pid));
    assert!(!signals::registered().contains(&pid));
    assert!(freed(port, pid), "port {port} still answers");
}

/// The stopped serve `dead`'s port `port` refuses connections, or is held by a process outside the
/// serve's group (another test or process may bind a freed port at once: not the stopped serve's doing; a
/// child of the serve still listening is in its group, the serve being its group's leader, and fails).
fn freed(port: u16, dead: u32) -> bool {
    port::refuses_connections("127.0.0.1", port, Duration::from_millis(500))
        || port::owner_pid(port)
            .and_then(signals::pgid_of)
            .is_some_and(|g| g != dead)
}

#[test]
fn panic_unwinding_stops_the_serve() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let spec = fake_spec(dir.path(), port, fake(|_| {}));
    let pid = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut serve = Serve::start(spec).unwrap();
        serve.wait_ready().unwrap();
        *pid.lock().unwrap() = Some(serve.pid());
        panic!("the check blew up mid-run");
    }));
    assert!(result.is_err());
    let pid = pid.lock().unwrap().expect("the serve had started");
    assert!(signals::process_dead(pid));
    assert!(freed(port, pid), "port {port} still answers");
}

// ---- case 28a: the runner dies --------------------------------------------------------------------

/// Not a test of its own: when HELPER_ENV is set, this is the "runner" that the tests below start
/// (this test binary, re-executed) and then kill. It starts a serve, reports its pid, and waits.
#[test]
fn lifecycle_helper_runner() {
    let Ok(cfg) = std::env::var(HELPER_ENV) else {
        return;
    };
    let cfg: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    let dir = PathBuf::from(cfg["dir"].as_str().unwrap());
    let port = cfg["port"].as_u64().unwrap() as u16;
    if cfg["mode"] == "stop_with_sigterm_ignored" {
        // A runner started with SIGTERM ignored (SIG_IGN is inherited across exec).
        // SAFETY: setting a signal disposition to SIG_IGN in this single-purpose helper process.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
        let mut spec = fake_spec(&dir, port, fake(|_| {}));
        spec.stop_grace = Duration::from_secs(5);
        let mut serve = Serve::start(spec).unwrap();
        serve.wait_ready().unwrap();
        let report = serve.stop();
        fs::write(
            dir.join("stop.json"),
            serde_json::to_string(&report).unwrap(),
        )
        .unwrap();
        return;
    }
    if cfg["install_signals"].as_bool().unwrap() {
        signals::install().unwrap();
        signals::install().unwrap(); // idempotent
    }
    let child_pid_file = dir.join("grandchild.pid");
    let mut spec = fake_spec(
        &dir,
        port,
        fake(|s| {
            s.child = Some(ChildSpec {
                ignore_term: false,
                pid_file: Some(child_pid_file.clone()),
            })
        }),
    );
    spec.stop_grace = Duration::from_secs(3);
    let mut serve = Serve::start(spec).unwrap();
    serve.wait_ready().unwrap();
    let tmp = dir.join("serve.pid.tmp");
    fs::write(&tmp, serve.pid().to_string()).unwrap();
    fs::rename(&tmp, dir.join("serve.pid")).unwrap();
    // Bounded, so an orphaned helper ends by itself (and stops its serve on the way out).
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serve_gets_default_sigterm_even_if_the_runner_ignores_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = serde_json::json!({
        "dir": dir.path().display().to_string(),
        "port": free_port(),
        "mode": "stop_with_sigterm_ignored",
    });
    let out = fixtures::reexec(&helper_test())
        .env(HELPER_ENV, cfg.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.path().join("stop.json")).unwrap()).unwrap();
    assert_eq!(report["exit"], "signal 15", "{report}");
    assert_eq!(report["escalated_to_kill"], false, "{report}");
}

/// A helper runner process; SIGKILLed and reaped on drop if still there.
struct Helper {
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Helper {
    fn start(install_signals: bool) -> (Helper, u32, u32) {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let cfg = serde_json::json!({
            "dir": dir.path().display().to_string(),
            "port": port,
            "install_signals": install_signals,
        });
        let out = fs::File::create(dir.path().join("helper.out")).unwrap();
        let child = fixtures::reexec(&helper_test())
            .env(HELPER_ENV, cfg.to_string())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut helper = Helper { child, dir };
        let pid_file = helper.dir.path().join("serve.pid");
        let mut serve_pid = None;
        let started = eventually(Duration::from_secs(60), || {
            serve_pid = fs::read_to_string(&pid_file)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            serve_pid.is_some() || matches!(helper.child.try_wait(), Ok(Some(_)))
        });
        let Some(serve_pid) = serve_pid.filter(|_| started) else {
            panic!("helper never reported its serve: {}", helper.output());
        };
        let grandchild = read_pid(
            &helper.dir.path().join("grandchild.pid"),
            Duration::from_secs(10),
        )
        .unwrap_or_else(|| panic!("no grandchild pid: {}", helper.output()));
        assert!(!signals::process_dead(serve_pid));
        assert!(!signals::process_dead(grandchild));
        (helper, serve_pid, grandchild)
    }

    fn output(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = fs::File::open(self.dir.path().join("helper.out")) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    fn signal_and_wait(&mut self, signo: i32) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, signo) }, 0);
        let mut status = None;
        // The helper's teardown grace is 3 s; the fake obeys SIGTERM at once.
        eventually(Duration::from_secs(20), || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        status.unwrap_or_else(|| panic!("helper did not exit on signal {signo}: {}", self.output()))
    }
}

#[test]
fn serve_dies_when_the_runner_is_sigkilled() {
    let (mut helper, serve_pid, grandchild) = Helper::start(false);
    let status = helper.signal_and_wait(libc::SIGKILL);
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    // PDEATHSIG kills the leader; the watchdog kills the rest of the group (the grandchild). The waits
    // end as soon as each is dead; they are long so that a busy machine's slow exit is not a leak.
    assert!(
        eventually(Duration::from_secs(30), || signals::process_dead(serve_pid)),
        "serve {serve_pid} outlived the SIGKILLed runner"
    );
    assert!(
        eventually(Duration::from_secs(30), || signals::process_dead(
            grandchild
        )),
        "grandchild {grandchild} outlived the SIGKILLed runner"
    );
}

fn runner_signal_case(signo: i32, expected_code: i32) {
    let (mut helper, serve_pid, grandchild) = Helper::start(true);
    let status = helper.signal_and_wait(signo);
    assert_eq!(status.code(), Some(expected_code), "{}", helper.output());
    assert!(
        eventually(Duration::from_secs(30), || signals::process_dead(serve_pid)),
        "serve {serve_pid} outlived the runner"
    );
    assert!(
        eventually(Duration::from_secs(30), || signals::process_dead(
            grandchild
        )),
        "grandchild {grandchild} outlived the runner"
    );
}

#[test]
fn serve_dies_and_runner_exits_143_on_sigterm() {
    runner_signal_case(libc::SIGTERM, 143);
}

#[test]
fn serve_dies_and_runner_exits_130_on_sigint() {
    runner_signal_case(libc::SIGINT, 130);
}

#[test]
fn serve_dies_and_runner_exits_129_on_sighup() {
    runner_signal_case(libc::SIGHUP, 129);
}

// ---- serve output that arrives late ---------------------------------------------

/// A Python serve started without `-u` prints a line to a stdout that is a file (block-buffered by
/// default) and is then stopped by SIGTERM, which ends Python without flushing: only the
/// `PYTHONUNBUFFERED=1` the runner puts in every serve's environment gets the line into `serve.log`.
#[test]
fn a_python_serve_killed_by_the_stop_still_has_its_last_line_in_the_log() {
    // The test's own environment may already carry it (CI shells often do): the serve must get it from
    // servegate. Removing it from this process (the cli tier's one binary) affects no other test: this
    // module's other serves start Python with `-u`, every serve servegate starts gets it from servegate,
    // and the Python a test starts itself (tests/cli/evidence.rs) logs to stderr, line-buffered anyway.
    std::env::remove_var("PYTHONUNBUFFERED");
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let script = format!(
        "import http.server\n\
         class H(http.server.BaseHTTPRequestHandler):\n\
         \x20   def do_GET(self):\n\
         \x20       self.send_response(200); self.end_headers(); self.wfile.write(b'ok')\n\
         \x20   def log_message(self, *a): pass\n\
         print('route: fused-late-line')\n\
         http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    );
    let spec = ServeSpec::new(
        vec!["python3".into(), "-c".into(), script],
        port,
        dir.path().join("serve.log"),
    );
    let mut serve = Serve::start(spec).unwrap();
    serve.wait_ready().unwrap();
    let report = serve.stop();
    assert!(report.pid_gone, "{report:?}");
    let log = fs::read_to_string(dir.path().join("serve.log")).unwrap();
    assert!(log.contains("route: fused-late-line"), "serve.log: {log:?}");
}

// ---- readiness: a host that is a name ---------------------------------------------------------

/// `host = "localhost"`: readiness tries the addresses the name resolves to, and the one that answered is
/// pinned: the base URL every request uses names that address, not the name.
#[test]
fn a_localhost_serve_is_pinned_to_the_address_that_answered() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut spec = fake_spec(dir.path(), port, fake(|_| {}));
    spec.host = "localhost".into();
    let mut serve = Serve::start(spec).unwrap();
    assert_eq!(serve.base_url(), format!("http://localhost:{port}"));
    let info = serve.wait_ready().unwrap();
    // The fake binds 127.0.0.1 only; whatever else localhost resolves to here, that is the one answering.
    assert_eq!(info.pinned, Some(format!("127.0.0.1:{port}")), "{info:?}");
    assert_eq!(serve.base_url(), format!("http://127.0.0.1:{port}"));
    serve.stop();
}
