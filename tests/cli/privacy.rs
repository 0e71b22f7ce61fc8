//! What goes here: a live `servegate run` (a synthetic serve) under a fake `$HOME`. The scan of the committed
//! files is tests/pure/privacy.rs.
//!
//! Privacy of published records and evidence (docs/evidence.md "Privacy"): what servegate
//! writes carries no absolute home or checkout path and no host name unless the gate opts in
//! (`[record] publish_host = true`).
//!
//! * the committed `data/records/` (records and `data/records/evidence/`) and `data/baselines/` (blessed run directories)
//!   are scanned for absolute home and checkout paths and for host names;
//! * a live `servegate run` (a synthetic serve, started from a script under a fake `$HOME`) writes `run.json`,
//!   `serve.log` and `setup.log` with `~` and checkout-relative paths and an empty `host.hostname`; with
//!   `publish_host = true` the host name is kept.

use crate::fixtures;
use crate::fixtures::privacy::{host_words, hostname};
use crate::fixtures::root;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn run_gate(home: &Path, publish_host: bool) -> PathBuf {
    // A serve script under $HOME that names its own path in the serve log, then becomes the synthetic serve.
    let script = home.join("serve.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"serve script $0 in {}\"\nexec {} \"$@\"\n",
            root().display(),
            root()
                .join("tests/data/repro/harness/mixed/logserve.sh")
                .display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let gates = home.join("gates");
    std::fs::create_dir_all(&gates).unwrap();
    let gate = gates.join("privacy.toml");
    let record = if publish_host {
        "[record]\nmodel_name = \"m\"\nweights = \"w\"\ndevice = \"d\"\nroute = \"r\"\nengine = \"e\"\nwhat_would_make_it_wrong = \"a test, nothing measured\"\npublish_host = true\n"
    } else {
        ""
    };
    std::fs::write(
        &gate,
        format!(
            "[gate]\nname = \"privacy\"\n[serve]\ncommand = [\"{}\", \"x\", \"--tokens\", \"8\", \"--ttft-ms\", \"20\", \"--tok-s\", \"200\", \"--port\", \"{{port}}\"]\nready_timeout_s = 20\n[request]\nmodel = \"synthetic\"\nmax_tokens = 8\nprompts = [\"hi\"]\n[assert.content]\n{record}",
            script.display()
        ),
    )
    .unwrap();
    let runs = home.join("runs");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_servegate"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = fixtures::servegate()
        .args(["run", "-q"])
        .arg(&gate)
        .current_dir(root())
        .env("HOME", home)
        .env("PATH", path)
        .env("SERVEGATE_RUNS", &runs)
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs.join("privacy"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1);
    dirs.pop().unwrap()
}

#[test]
fn a_live_run_writes_tilde_and_checkout_relative_paths_and_no_host_name_unless_the_gate_opts_in() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let dir = run_gate(&home, false);
    let run = std::fs::read_to_string(dir.join("run.json")).unwrap();
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&run).unwrap();
    assert_eq!(v["host"]["hostname"], "");
    assert_eq!(v["gate_file"], "~/gates/privacy.toml");
    assert_eq!(v["serve"]["command"][0], "~/serve.sh");
    assert!(
        log.contains(&"serve script ~/serve.sh in .".to_string()),
        "{log}"
    );
    for text in [&run, &log] {
        assert!(!text.contains(&home.display().to_string()), "{text}");
        assert!(!text.contains(&root().display().to_string()), "{text}");
    }
    assert_eq!(host_words(&run, &hostname()), 0);
    // `servegate judge` of the written evidence passes: what was judged is what is published.
    let judged = fixtures::servegate()
        .arg("judge")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(judged.status.code(), Some(0));

    // The gate opts in: the host name is kept (paths still public).
    let home2 = t.path().join("home2");
    std::fs::create_dir_all(&home2).unwrap();
    let dir = run_gate(&home2, true);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(v["host"]["hostname"].as_str(), Some(hostname().as_str()));
    assert_eq!(v["serve"]["command"][0], "~/serve.sh");
}
