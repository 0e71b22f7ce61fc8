//! The scripted serve as a process (`servegate scripted-serve`, src/replay/scripted.rs; the fake serve of
//! this tier): a script in, its bytes on the wire, its log lines and its scripted exit out. What each
//! reply renders to is unit-tested in src/replay/scripted/tests.rs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use servegate::replay::scripted::{Crash, CrashAfter, LogLine, Reply, Script};

use crate::fixtures;

/// One request on a new connection (`Connection: close`), retried until the serve listens (20 s); the
/// whole response as text.
fn exchange(port: u16, method: &str, path: &str, body: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("the scripted serve never listened on {port}: {e}"),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_script_is_served_on_the_wire_and_its_crash_is_the_process_exit() {
    let port = servegate::io::port::free_port("127.0.0.1").unwrap();
    let mut script = Script {
        version: Some("b4242".into()),
        replies: vec![Reply {
            cut_after: Some(2),
            ..Reply::default()
        }],
        crash_after_requests: Some(CrashAfter {
            requests: 2,
            how: Crash::Code(7),
        }),
        request_log: vec![LogLine::out("route: {method} {path} -> {status}")],
        ..Script::default()
    };
    script.start.listening_log = vec![LogLine::err("listening on {host}:{port}")];
    script.health.ready_after_ms = 200.0;
    let argv = fixtures::scripted_argv(&script, "127.0.0.1", &port.to_string());
    let t0 = Instant::now();
    let mut child = fixtures::servegate()
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut health = exchange(port, "GET", "/health", "");
    while health.starts_with("HTTP/1.1 503") {
        std::thread::sleep(Duration::from_millis(20));
        health = exchange(port, "GET", "/health", "");
    }
    assert!(health.starts_with("HTTP/1.1 200 OK\r\n"), "{health}");
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert!(exchange(port, "GET", "/version", "").ends_with(r#"{"version":"b4242"}"#));
    assert!(exchange(port, "GET", "/nowhere", "").starts_with("HTTP/1.1 404"));
    // Reply 1: the role chunk and one token, then the connection closes (no [DONE], no last chunk).
    let cut = exchange(port, "POST", "/v1/chat/completions", r#"{"stream": true}"#);
    assert!(cut.contains("transfer-encoding: chunked"), "{cut}");
    assert_eq!(cut.matches("data: ").count(), 2, "{cut}");
    assert!(
        !cut.contains("[DONE]") && !cut.ends_with("0\r\n\r\n"),
        "{cut}"
    );
    // Reply 2: the default, whole; then the process exits 7.
    let whole = exchange(port, "POST", "/v1/chat/completions", r#"{"stream": true}"#);
    assert!(
        whole.contains(r#""content":"Paris""#) && whole.contains("data: [DONE]"),
        "{whole}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the serve did not exit after its 2nd reply"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = fixtures::text(&child.wait_with_output().unwrap());
    assert_eq!(status.code(), Some(7), "{out}");
    assert!(
        out.contains("route: POST /v1/chat/completions -> 200"),
        "{out}"
    );
    assert!(out.contains("route: GET /nowhere -> 404"), "{out}");
    assert!(
        out.contains(&format!("listening on 127.0.0.1:{port}")),
        "{out}"
    );
}

#[test]
fn a_bad_script_is_exit_2_naming_the_field() {
    let o = fixtures::Out::of(fixtures::servegate().args([
        "scripted-serve",
        "--script-json",
        r#"{"reply": {"tokenz": []}}"#,
    ]));
    assert_eq!(o.code, 2, "{}", o.all());
    assert!(o.stderr.contains("tokenz"), "{}", o.all());
    // A `--var` without `=` likewise, before anything listens.
    let o = fixtures::Out::of(fixtures::servegate().args([
        "scripted-serve",
        "--script-json",
        "{}",
        "--var",
        "model",
    ]));
    assert_eq!(o.code, 2, "{}", o.all());
    assert!(
        o.stderr.contains("--var \"model\": expected NAME=VALUE"),
        "{}",
        o.all()
    );
}

/// Waits (20 s at most) for `child` to exit; its status and output as text.
fn finish(child: std::process::Child, what: &str) -> (std::process::ExitStatus, String) {
    let mut child = child;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the serve did not exit {what}");
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, fixtures::text(&child.wait_with_output().unwrap()))
}

/// `crash_log` is printed right before a scripted crash (here a reply's, mid-stream), and `term = crash`
/// prints its lines and dies of its signal on SIGTERM: a serve's last words, and a serve that crashes when
/// stopped.
#[test]
fn crash_log_comes_before_a_scripted_crash_and_term_crash_dies_of_its_signal() {
    use servegate::replay::scripted::Term;
    use std::os::unix::process::ExitStatusExt;
    let start = |script: &Script| {
        let port = servegate::io::port::free_port("127.0.0.1").unwrap();
        let argv = fixtures::scripted_argv(script, "127.0.0.1", &port.to_string());
        let child = fixtures::servegate()
            .args(&argv[1..])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        (port, child)
    };
    let mut dies = Script {
        replies: vec![Reply {
            crash_after: Some(2),
            crash: Some(Crash::Code(139)),
            ..Reply::default()
        }],
        crash_log: vec![LogLine::err("Segmentation fault in reply {chat}")],
        ..Script::default()
    };
    dies.request_log = vec![LogLine::err("served {path}")];
    let (port, child) = start(&dies);
    let cut = exchange(port, "POST", "/v1/chat/completions", r#"{"stream": true}"#);
    assert_eq!(cut.matches("data: ").count(), 2, "{cut}");
    let (status, out) = finish(child, "after its crash");
    assert_eq!(status.code(), Some(139), "{out}");
    assert!(out.ends_with("Segmentation fault in reply 1\n"), "{out}");
    assert!(!out.contains("served /v1/chat"), "{out}");
    let stops = Script {
        term: Term::Crash {
            how: Crash::Signal(libc::SIGSEGV),
            log: vec![LogLine::err("caught SIGTERM; shutting down")],
        },
        ..Script::default()
    };
    let (port, child) = start(&stops);
    assert!(exchange(port, "GET", "/health", "").starts_with("HTTP/1.1 200"));
    // SAFETY: signalling our own child, which is alive (it just answered).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let (status, out) = finish(child, "on SIGTERM");
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{out}");
    assert!(out.contains("caught SIGTERM; shutting down\n"), "{out}");
}
