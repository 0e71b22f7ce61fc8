//! `serve.log` capped on disk (`evidence::log_cap`, `[serve] log_cap_bytes`): a real recorded run of the
//! reference serve (`baselines/reference-smoke-drift/w1`, whose gate names a fast and a slow route) with its
//! log grown past the cap, capped as the runner caps it, then judged. The route says the log was capped, a
//! slow pattern absent from a capped log is INDETERMINATE (never a pass), and one the cap kept still fails.

use std::path::{Path, PathBuf};

use servegate::evidence::log_cap::{cap_file, marker_in, MIN_LOG_CAP_BYTES};
use servegate::judge::Outcome;
use servegate::vocab::AssertionKind;

const SLOW: &str = "threadpool init, n_threads = 4\n";

fn copy_run(to: &Path) -> PathBuf {
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("baselines/reference-smoke-drift/w1");
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
    let ev = servegate::analysis::load(dir).unwrap();
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

/// The runner caps the log of a live run: a serve (the synthetic replay behind `sh`) that prints its route
/// line and then ~300 KB of chatter, under `log_cap_bytes = 65536`. The evidence's serve.log is capped with
/// its marker, run.json's notes say how much was dropped, and the route (slow pattern absent from what was
/// kept) is INDETERMINATE.
#[test]
fn a_live_run_caps_its_serve_log_and_notes_the_bytes_dropped() {
    let t = tempfile::tempdir().unwrap();
    let gate = t.path().join("chatty.toml");
    std::fs::write(
        &gate,
        r#"[gate]
name = "chatty"
[serve]
command = ["sh", "-c", "echo 'on the private route'; i=0; while [ $i -lt 3000 ]; do echo \"chatter line $i: nothing to see here, nothing at all, padding padding padding\"; i=$((i+1)); done; exec servegate replay --synthetic --tokens 8 --ttft-ms 10 --tok-s 100 --port $0", "{port}"]
log_cap_bytes = 65536
[request]
model = "m"
max_tokens = 8
prompts = ["hi"]
[assert.route]
fast = "on the private route"
slow = "per-op forward"
"#,
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_servegate");
    let path = format!(
        "{}:{}",
        Path::new(bin).parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = std::process::Command::new(bin)
        .args(["run", gate.to_str().unwrap(), "--runs"])
        .arg(t.path().join("runs"))
        .env("PATH", path)
        .env("SERVEGATE_VERBOSE", "1") // whole verdict lines: the test reads the route verdict's notes
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let all = format!("{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("route INDETERMINATE"), "{all}");
    assert!(out.contains("serve.log was capped on disk"), "{all}");
    let dir = PathBuf::from(
        out.lines()
            .find_map(|l| l.strip_prefix("evidence: "))
            .unwrap(),
    );
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(log.len() as u64 <= 65536 + 200, "{}", log.len());
    assert!(log.starts_with("on the private route\n"), "{}", &log[..100]);
    let (_, dropped) = marker_in(&log).unwrap();
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    let notes = run["notes"].to_string();
    assert!(
        notes.contains(&format!("{dropped} of its"))
            && notes.contains("serve.log capped at 65536 bytes"),
        "{notes}"
    );
}
