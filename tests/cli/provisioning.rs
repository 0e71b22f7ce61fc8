//! The provisioning scripts (`scripts/provision-*.sh`) on a cache that needs nothing downloaded: a run that
//! waited for another run's lock and then found everything in place exits 0. Commit 0a92b32 fixed the
//! opposite: the EXIT trap's cleanup ended on a false `[[ -n '' ]] && rm ...` (no temporary directory was
//! made), and under `set -e` that status was the script's, so such a run exited 1 after saying all was
//! provisioned (on a fresh machine .ci/run's llama-cpp-python provisioning, waiting for vLLM's, failed so).
//!
//! Each test plays the other run: it holds the script's lock, starts the script on a cache with nothing in
//! it (so the script takes the slow path and waits for the lock), lays out what a finished run leaves once
//! the script says it is waiting, then releases the lock. No network, no Python: the scripts only look at
//! the files (the stamps; a model's size; its sha256 only with `--verify`).

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::fixtures;

/// The value of `key=...` in the script `scripts/<script>` (its pins: versions, the model's name, size and
/// sha256), so the layout follows the script.
fn pin(script: &str, key: &str) -> String {
    let text = fs::read_to_string(fixtures::root().join("scripts").join(script)).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
        .unwrap_or_else(|| panic!("no {key}= in scripts/{script}"))
}

/// A venv as a provisioning script leaves it: `dir/bin/python` executable, `dir/.servegate-ok` = `stamp`.
fn venv(dir: &Path, stamp: &str) {
    fs::create_dir_all(dir.join("bin")).unwrap();
    let py = dir.join("bin/python");
    fs::write(&py, "#!/bin/sh\nexit 1\n").unwrap();
    fs::set_permissions(&py, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join(".servegate-ok"), format!("{stamp}\n")).unwrap();
}

/// Runs `scripts/<script>` with `SERVEGATE_CACHE` = `cache` while this test holds `cache/<lock>`; once the
/// script says it is waiting for it, `layout(cache)` puts in place what the other run would have, and the
/// lock is released. Returns the script's exit status and its stderr.
fn run_after_waiting(
    script: &str,
    cache: &Path,
    lock: &str,
    layout: impl FnOnce(&Path),
) -> (std::process::ExitStatus, String) {
    fs::create_dir_all(cache).unwrap();
    let held = File::create(cache.join(lock)).unwrap();
    held.lock().unwrap();
    let mut child = Command::new("bash")
        .arg(fixtures::root().join("scripts").join(script))
        .env("SERVEGATE_CACHE", cache)
        .env_remove("SERVEGATE_PYTHON")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            panic!("{script} ended without waiting for the lock: {said}");
        }
        said.push_str(&line);
        if line.contains("waiting for another provisioning run to finish") {
            break;
        }
    }
    layout(cache);
    held.unlock().unwrap();
    drop(held);
    err.read_to_string(&mut said).unwrap();
    (child.wait().unwrap(), said)
}

/// scripts/provision-reference.sh (the run .ci/run's others wait for): the venv and the model put in place
/// while it waited, it finds both and exits 0 (exit 1 before 0a92b32).
#[test]
fn provision_reference_that_waited_and_found_everything_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let s = "provision-reference.sh";
    let (status, said) = run_after_waiting(s, &cache, ".lock", |c| {
        let version = pin(s, "XLLAMACPP_VERSION");
        venv(
            &c.join(format!("venv-xllamacpp-{version}")),
            &format!("xllamacpp=={version}"),
        );
        let model = c.join("models").join(pin(s, "MODEL_NAME"));
        fs::create_dir_all(model.parent().unwrap()).unwrap();
        File::create(&model)
            .unwrap()
            .set_len(pin(s, "MODEL_SIZE").parse().unwrap())
            .unwrap();
        fs::write(
            model.with_extension("gguf.sha256"),
            format!("{}\n", pin(s, "MODEL_SHA256")),
        )
        .unwrap();
    });
    assert!(said.contains("venv already present"), "{said}");
    assert!(said.contains("model already present"), "{said}");
    assert!(status.success(), "{status}: {said}");
}

/// scripts/lib/provision-venv.sh (provision-aiperf.sh here; provision-locust, -guidellm and -vllm run the
/// same steps): the venv put in place while it waited, it writes its marker and exits 0.
#[test]
fn a_venv_provisioning_that_waited_and_found_the_venv_exits_0() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let s = "provision-aiperf.sh";
    let version = pin(s, "AIPERF_VERSION");
    let (status, said) = run_after_waiting(s, &cache, ".lock-aiperf", |c| {
        venv(
            &c.join(format!("venv-aiperf-{version}")),
            &format!("aiperf=={version}"),
        );
    });
    assert!(said.contains("python: "), "{said}");
    assert!(status.success(), "{status}: {said}");
    let mark = fs::read_to_string(cache.join("provisioned/aiperf")).unwrap();
    assert_eq!(
        mark.lines().next(),
        Some(format!("aiperf=={version}").as_str())
    );
}
