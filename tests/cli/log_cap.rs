//! What goes here: a `servegate run` (a synthetic serve) that caps its serve's log. The cap and the route
//! judged in process are tests/pure/log_cap.rs.
//!
//! `serve.log` capped on disk (`evidence::log_cap`, `[serve] log_cap_bytes`): a real recorded run of the
//! reference serve (`data/baselines/reference-smoke-drift/w1`, whose gate names a fast and a slow route) with its
//! log grown past the cap, capped as the runner caps it, then judged. The route says the log was capped, a
//! slow pattern absent from a capped log is INDETERMINATE (never a pass), and one the cap kept still fails.

use std::path::{Path, PathBuf};

use crate::fixtures;
use servegate::evidence::log_cap::marker_in;

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
    let o = fixtures::servegate()
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
