//! What goes here: files servegate reads that are not regular files or are absurdly large, refused at once
//! with the path, the kind or the limit named, under the command's exit code (`servegate::io::input`): a run
//! directory's file linked to `/dev/zero` (judging grew to 16 GB), a FIFO in its place or as a gate (the
//! open waited for a writer for ever), a sparse 4 GB `run.json` (read whole), `export --bmf /dev/zero`.
//!
//! Each child runs with its address space capped and a deadline: a regression fails (killed, named) instead
//! of exhausting the machine's memory or hanging the suite.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::fixtures;

/// The address space a child may take (a judge of a small run needs well under it).
const CHILD_MEMORY: u64 = 4 << 30;
/// How long a child may take before it counts as hung (a refusal takes milliseconds; this is a guard).
const CHILD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// `servegate ARGS`, its memory capped ([`CHILD_MEMORY`]) and killed at [`CHILD_DEADLINE`] (a panic naming
/// the args): its exit code and stderr.
fn bounded(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = fixtures::servegate();
    cmd.args(args)
        .stdout(Stdio::null())
        .stderr(err.reopen().unwrap());
    // SAFETY: setrlimit only, async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: CHILD_MEMORY,
                rlim_max: CHILD_MEMORY,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > CHILD_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("servegate {args:?} did not end in {CHILD_DEADLINE:?}: hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (
        status.code(),
        std::fs::read_to_string(err.path()).unwrap_or_default(),
    )
}

/// A copy of a recorded run (`tests/data/runs/npu-rc-pass`) under `to`.
fn copy_run(to: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/runs/npu-rc-pass");
    let dir = to.join("run");
    fixtures::copy_dir(&from, &dir);
    dir
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn judge(dir: &Path) -> (Option<i32>, String) {
    bounded(&["judge".as_ref(), dir.as_os_str()])
}

/// `servegate judge` of a copied recorded run whose `file` is a link to `/dev/zero`: exit code, stderr.
fn judge_with_dev_zero_as(file: &str) -> (Option<i32>, String) {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let path = dir.join(file);
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    judge(&dir)
}

/// A reads file linked to `/dev/zero` was read until the OOM killer came (16 GB): refused unread, exit 5
/// (evidence), the file and its kind named.
#[test]
fn judge_refuses_a_reads_file_linked_to_dev_zero() {
    let (code, stderr) = judge_with_dev_zero_as("05.reads.jsonl");
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("05.reads.jsonl: not a regular file (a character device)"),
        "{stderr}"
    );
}

/// run.json linked to `/dev/zero`: refused, exit 5, named as a device (not "no run.json").
#[test]
fn judge_refuses_a_run_json_linked_to_dev_zero() {
    let (code, stderr) = judge_with_dev_zero_as("run.json");
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("run.json: not a regular file (a character device)"),
        "{stderr}"
    );
}

/// serve.log linked to `/dev/zero`: refused, exit 5, named (it was read up to the judging cap from a device).
#[test]
fn judge_refuses_a_serve_log_linked_to_dev_zero() {
    let (code, stderr) = judge_with_dev_zero_as("serve.log");
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("serve.log: not a regular file (a character device)"),
        "{stderr}"
    );
}

/// A FIFO in place of a reads file: its open waited for a writer for ever; now refused at once, exit 5.
#[test]
fn judge_refuses_a_fifo_reads_file_without_waiting() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let reads = dir.join("05.reads.jsonl");
    std::fs::remove_file(&reads).unwrap();
    mkfifo(&reads);
    let (code, stderr) = judge(&dir);
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("05.reads.jsonl: not a regular file (a FIFO)"),
        "{stderr}"
    );
}

/// A 4 GiB (sparse: no disk) run.json was read whole (4.2 GB resident) before its parse failed: refused from
/// its size, exit 5, the limit named.
#[test]
fn judge_refuses_a_run_json_over_the_limit_before_reading_it() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let run = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("run.json"))
        .unwrap();
    run.set_len(4 << 30).unwrap();
    let (code, stderr) = judge(&dir);
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("run.json: 4294967296 bytes, over the 1 GiB servegate reads"),
        "{stderr}"
    );
}

/// `check` (and `run`) on a FIFO gate waited for a writer for ever: refused, exit 3 (an unreadable gate).
#[test]
fn check_and_run_refuse_a_fifo_gate_without_waiting() {
    let t = tempfile::tempdir().unwrap();
    let gate = t.path().join("g.toml");
    mkfifo(&gate);
    for cmd in ["check", "run"] {
        let (code, stderr) = bounded(&[cmd.as_ref(), gate.as_os_str()]);
        assert_eq!(code, Some(3), "{cmd}: {stderr}");
        assert!(
            stderr.contains("g.toml: cannot read gate: not a regular file (a FIFO)"),
            "{cmd}: {stderr}"
        );
    }
}

/// `export --bmf /dev/zero` grew to 12.7 GB; a FIFO waited for ever: both refused, exit 5, named.
#[test]
fn export_refuses_a_device_or_a_fifo_source() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("results.json");
    mkfifo(&fifo);
    for (src, kind) in [
        (PathBuf::from("/dev/zero"), "a character device"),
        (fifo, "a FIFO"),
    ] {
        let (code, stderr) = bounded(&["export".as_ref(), "--bmf".as_ref(), src.as_os_str()]);
        assert_eq!(code, Some(5), "{}: {stderr}", src.display());
        assert!(
            stderr.contains(&format!("not a regular file ({kind})")),
            "{stderr}"
        );
    }
}
