//! Runs another load tool's command for a load gate's point (`[load] driver = "vllm-bench" | "aiperf"`):
//! in a process group of its own (stopped with the runner, like a serve; killed if the runner dies), its
//! stdout and stderr into one log file, waited for within a wall time or until the runner's stop signal.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` (its program and arguments set) with its output to `log`, in a process group of its own,
/// for at most `wall`. Ok when it exited 0; Err says how it ended otherwise (could not start, exited with a
/// status, overran `wall`, stopped by the runner's stop signal), with its log's last lines, escaped.
pub fn run_logged(mut cmd: Command, log: &Path, wall: Duration) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    cmd.env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(0);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL the child if this thread dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", crate::text::shown(&program)))?;
    let pgid = child.id();
    let watchdog = crate::io::serve::watch_group(pgid);
    if !crate::io::signals::register(pgid, Duration::from_secs(2)) {
        crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
        let _ = child.wait();
        return Err("interrupted before it could run".into());
    }
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if started.elapsed() >= wall => {
                break Err(format!(
                    "did not finish within {} s and was stopped",
                    wall.as_secs()
                ))
            }
            Ok(None) if crate::io::signals::interrupted().is_some() => {
                break Err("was stopped by the runner's stop signal".into())
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => break Err(format!("could not be waited for: {e}")),
        }
    };
    crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
    let _ = child.wait();
    drop(watchdog);
    crate::io::signals::deregister(pgid);
    let why = match status {
        Ok(s) if s.success() => return Ok(()),
        Ok(s) => format!("exited with {s}"),
        Err(e) => e,
    };
    Err(format!(
        "{why} (log {}; last lines: {})",
        log.display(),
        tail(&read_log(log), 3)
    ))
}

/// The log at `path` as text (invalid UTF-8 replaced; empty when unreadable).
pub fn read_log(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// The last `n` non-empty lines of `text`, joined by ` | `, escaped for a terminal.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(n);
    crate::text::shown(&lines[from..].join(" | "))
}

/// `s` quoted for a POSIX shell when it needs it (a command line recorded in the evidence).
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The Python of a provisioned tool: `$ENV` when set (Err when it names no file), else
/// `{cache}/<venv>/bin/python` (Err when missing). `provision`: the script that installs it; `what`: the
/// tool's name in the message (`Locust`); `with`: what the Python must have (`locust==2.47.0`).
pub fn provisioned_python(
    env: &str,
    venv: &str,
    provision: &str,
    what: &str,
    with: &str,
) -> Result<std::path::PathBuf, String> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        let p = std::path::PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "{env} names {}, which is not a file: run {provision} --print for the path",
                p.display()
            ))
        };
    }
    let cache = crate::spec::Context::for_file(Path::new(".")).cache;
    let py = cache.join(venv).join("bin/python");
    if py.is_file() {
        Ok(py)
    } else {
        Err(format!(
            "{what} is not provisioned ({} is missing): run {provision}, or set {env} to a Python with {with}",
            py.display()
        ))
    }
}
