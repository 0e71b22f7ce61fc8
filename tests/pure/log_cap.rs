//! What goes here: the cap and the route judged on a copied recorded run, in process. A live `servegate run`
//! that caps its serve's log is tests/cli/log_cap.rs.
//!
//! `serve.log` capped on disk (`evidence::log_cap`, `[serve] log_cap_bytes`): a real recorded run of the
//! reference serve (`data/baselines/reference-smoke-drift/w1`, whose gate names a fast and a slow route) with its
//! log grown past the cap, capped as the runner caps it, then judged. The route says the log was capped, a
//! slow pattern absent from a capped log is INDETERMINATE (never a pass), and one the cap kept still fails.

use std::path::{Path, PathBuf};

use servegate::evidence::log_cap::{cap_file, marker_in, MIN_LOG_CAP_BYTES};
use servegate::judge::Outcome;
use servegate::vocab::AssertionKind;

const SLOW: &str = "threadpool init, n_threads = 4\n";

fn copy_run(to: &Path) -> PathBuf {
    let from =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/baselines/reference-smoke-drift/w1");
    let dir = to.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
    }
    dir
}

/// The recorded log, then `middle`, 300 KB of chatter around it, then `end`; capped at 64 KiB.
fn grown_and_capped(dir: &Path, middle: &str, end: &str) -> u64 {
    let p = dir.join("serve.log");
    let mut log = std::fs::read_to_string(&p).unwrap();
    let fast_at = log.find("system_info: n_threads = 1").unwrap();
    assert!(
        fast_at < 30_000,
        "the fast route line is in the head the cap keeps: byte {fast_at}"
    );
    for i in 0..5000 {
        log.push_str(&format!(
            "srv  log_server: request {i:05}: GET /health 200\n"
        ));
    }
    log.push_str(middle);
    for i in 0..5000 {
        log.push_str(&format!(
            "srv  log_server: request {i:05}: GET /metrics 200\n"
        ));
    }
    log.push_str(end);
    std::fs::write(&p, &log).unwrap();
    let d = cap_file(&p, MIN_LOG_CAP_BYTES)
        .unwrap()
        .expect("over the cap");
    assert!(std::fs::metadata(&p).unwrap().len() <= MIN_LOG_CAP_BYTES + 200);
    d.bytes
}

fn route(dir: &Path) -> servegate::judge::Verdict {
    let gate = servegate::spec::load(&dir.join("gate.toml")).unwrap();
    let ev = servegate::loaded::load(dir).unwrap();
    servegate::judge::judge(&gate, &ev)
        .into_iter()
        .find(|v| v.kind == AssertionKind::Route)
        .unwrap()
}

#[test]
fn the_recorded_log_uncapped_passes_its_route() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let v = route(&dir);
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(!v.message.contains("capped"), "{}", v.message);
}

#[test]
fn a_slow_line_in_the_dropped_middle_cannot_be_seen_so_the_route_is_indeterminate_never_pass() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let dropped = grown_and_capped(&dir, SLOW, "");
    let kept = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        !kept.contains(SLOW.trim()),
        "the slow line was in the dropped middle"
    );
    assert_eq!(marker_in(&kept).unwrap().1, dropped);
    let v = route(&dir);
    assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
    assert!(
        v.message.contains("cannot prove it absent"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains(&format!(
            "serve.log was capped on disk: {dropped} bytes dropped"
        )),
        "{}",
        v.message
    );
}

#[test]
fn a_slow_line_the_cap_kept_still_fails_the_route_and_says_the_log_was_capped() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    grown_and_capped(&dir, "", SLOW);
    let v = route(&dir);
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(v.message.contains("n_threads = 4"), "{}", v.message);
    assert!(
        v.message.contains("serve.log was capped on disk"),
        "{}",
        v.message
    );
}

#[test]
fn log_cap_bytes_is_read_from_the_gate_and_a_tiny_cap_is_refused_with_its_key() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let p = dir.join("gate.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let gate = servegate::spec::load(&p).unwrap();
    assert_eq!(
        gate.serve.log_cap_bytes,
        servegate::spec::DEFAULT_LOG_CAP_BYTES
    );
    let with = |v: &str| text.replacen("[serve]\n", &format!("[serve]\nlog_cap_bytes = {v}\n"), 1);
    std::fs::write(&p, with("1048576")).unwrap();
    assert_eq!(
        servegate::spec::load(&p).unwrap().serve.log_cap_bytes,
        1 << 20
    );
    std::fs::write(&p, with("1000")).unwrap();
    let e = servegate::spec::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("serve.log_cap_bytes") && e.contains("at least 65536"),
        "{e}"
    );
}
