//! What the bench-self sections share: the `servegate` binary they drive, the synthetic serve child
//! ([`Synth`], `servegate replay --synthetic`), CPU pinning and CPU time (`getrusage`, `wait4`), the scratch
//! directory, and the report's number formats. Below `bench`, `bench_load`, `bench_floor` and
//! `bench_peers_load`; it imports none of them.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use servegate::analysis::stats;

/// Builds the `servegate` binary this benchmark drives (release, the profile whose figures matter), beside
/// this xtask binary in the workspace target directory. The nested cargo runs without the package
/// variables `cargo run` gave this process ([`is_package_var`]): ring's build script reruns when
/// `CARGO_PKG_NAME` or `CARGO_MANIFEST_DIR` change (`cargo:rerun-if-env-changed`), so inheriting xtask's
/// values rebuilt ring, rustls, reqwest and servegate on every bench-self after any other build (minutes
/// of CPU in this process's child, not in any client it measures), and the next plain build again.
pub fn build_servegate() -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(is_package_var) {
            cmd.env_remove(&k);
        }
    }
    cmd.args([
        "build",
        "--quiet",
        "--package",
        "servegate",
        "--bin",
        "servegate",
    ]);
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("cargo build of servegate failed ({s})")),
        Err(e) => Err(format!("cannot run cargo: {e}")),
    }
}

/// Whether `name` is one of the variables cargo sets for the package it runs or builds
/// (<https://doc.rust-lang.org/cargo/reference/environment-variables.html>, "Environment variables Cargo
/// sets for crates"): `CARGO_PKG_*`, `CARGO_MANIFEST_*`, `CARGO_CRATE_NAME`, `CARGO_BIN_NAME`,
/// `CARGO_PRIMARY_PACKAGE`. Not `CARGO` itself, `CARGO_HOME` or the user's `CARGO_BUILD_*` settings.
pub fn is_package_var(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_MANIFEST_")
        || matches!(
            name,
            "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE"
        )
}

/// The `servegate` binary: `$SERVEGATE_BIN`, else the one beside this xtask binary (same target profile).
pub fn servegate_exe() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("SERVEGATE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    Ok(me.with_file_name("servegate"))
}
/// Where bench-self writes its scratch files: `target/servegate/bench`.
pub fn workdir() -> PathBuf {
    PathBuf::from("target/servegate/bench")
}

/// CPUs online on this machine. Not `available_parallelism`: that is this thread's affinity, which
/// shrinks to one CPU once bench-self pins itself (`pin_self(1)`), and the serves it starts after that
/// would then stay on the client's CPU instead of being pinned to CPU 0.
pub fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).ok().filter(|&n| n > 0).unwrap_or(1)
}

/// Pins the calling thread (and what it spawns later) to `cpu`. False when refused.
pub fn pin_self(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Pins the child `cmd` starts to `cpu` (between fork and exec).
pub fn pin_command(cmd: &mut Command, cpu: usize) {
    // SAFETY: the closure runs between fork and exec and only makes the sched_setaffinity syscall.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            Ok(())
        });
    }
}

/// User + system CPU seconds of this process.
pub fn cpu_s_self() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// User + system CPU seconds of the calling thread.
pub fn cpu_s_thread() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// A `timeval` in seconds.
pub fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// Waits for `child` with `wait4`: (exit code, CPU seconds of it and its reaped descendants, peak RSS in
/// MiB).
pub fn wait_rusage(child: &mut Child) -> (i32, f64, f64) {
    let mut status = 0;
    // SAFETY: wait4 on our own child's pid, writing into values we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::wait4(child.id() as i32, &mut status, 0, &mut ru);
        ru
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (
        code,
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_maxrss as f64 / 1024.0,
    )
}

/// A synthetic serve child (pinned to CPU 0 when there are two CPUs), stopped on drop.
pub struct Synth {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: PathBuf,
    stopped: bool,
}

impl Synth {
    /// Starts `servegate replay --synthetic ARGS --timing-log LOG` and waits for its listening line.
    pub fn start(args: &[String], log: &Path) -> Result<Synth, String> {
        let _ = std::fs::remove_file(log);
        let exe = servegate_exe()?;
        let mut cmd = Command::new(exe);
        cmd.arg("replay")
            .arg("--synthetic")
            .args(args)
            .arg("--timing-log")
            .arg(log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if cpus() >= 2 {
            pin_command(&mut cmd, 0);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the synthetic serve: {e}"))?;
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut line = String::new();
        loop {
            line.clear();
            if out.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("the synthetic serve exited before listening".into());
            }
            if let Some(url) = line.trim().strip_prefix("replay: listening on ") {
                let url = url.to_string();
                std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
                return Ok(Synth {
                    child,
                    url,
                    log: log.to_path_buf(),
                    stopped: false,
                });
            }
        }
    }

    /// The timing log's request lines (those with a `request` number and `sends`).
    pub fn requests(&self) -> Vec<Value> {
        read_log(&self.log)
            .into_iter()
            .filter(|v| v.get("sends").is_some())
            .collect()
    }

    /// Waits until the log holds `n` request lines (they are written when a response ends).
    pub fn wait_requests(&self, n: usize) -> Vec<Value> {
        let t = Instant::now();
        loop {
            let v = self.requests();
            if v.len() >= n || t.elapsed() > Duration::from_secs(10) {
                return v;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Synth {
    /// Stops the serve (SIGTERM) and returns the CPU seconds it used in all (user + system, `wait4`).
    pub fn stop(&mut self) -> f64 {
        if self.stopped {
            return 0.0;
        }
        self.stopped = true;
        // SAFETY: kill(2) on our own child's pid, not yet waited for.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        wait_rusage(&mut self.child).1
    }
}

impl Drop for Synth {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// The JSON lines of a timing log (lines that do not parse are skipped).
pub fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The median of `v` (none when empty).
pub fn med(v: &[f64]) -> Option<f64> {
    stats::median(v)
}

/// `x` with `decimals` decimals, `-` when none.
pub fn f(x: Option<f64>, decimals: usize) -> String {
    x.map(|x| format!("{x:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// `x` with its sign and `decimals` decimals, `-` when none.
pub fn signed(x: Option<f64>, decimals: usize) -> String {
    x.map(|x| format!("{x:+.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_package_variables_are_dropped_from_the_nested_build() {
        for v in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_NAME",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            assert!(is_package_var(v), "{v}");
        }
        for v in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_BUILD_JOBS",
            "CARGO_TARGET_DIR",
            "PATH",
        ] {
            assert!(!is_package_var(v), "{v}");
        }
    }
}
