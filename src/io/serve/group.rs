//! The serve's process group: the supervisor thread that spawns the leader and waits for its exit without
//! reaping it, the watchdog process that kills the group when the runner dies, and how an exit is worded.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::io::signals;

use super::Serve;

/// Shell text of the watchdog: it blocks reading a pipe whose write end only the runner holds; when the
/// runner dies (any way, SIGKILL included) the read sees EOF and the watchdog kills the serve's group.
const WATCHDOG_SCRIPT: &str =
    "while read -r _; do :; done; kill -s KILL -- \"-$1\" 2>/dev/null; exit 0";

/// How the leader ended and when it was seen.
#[derive(Debug, Clone)]
pub(super) struct ExitInfo {
    pub(super) status: String,
    /// The signal that ended the leader, if a signal did.
    pub(super) signal: Option<i32>,
    pub(super) at: Instant,
}

#[derive(Debug, Default)]
pub(super) struct SupState {
    pub(super) exit: Option<ExitInfo>,
    pub(super) reaped: bool,
    /// The leader's `ru_maxrss` from `wait4` at its reap, KiB (Linux's unit): the kernel's high-water mark of
    /// the leader and of the descendants it reaped. None until reaped, or when `wait4` failed.
    pub(super) maxrss_kib: Option<u64>,
}

/// State shared with the supervisor thread.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) state: Mutex<SupState>,
    pub(super) cond: Condvar,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, SupState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The watchdog process and the runner's (only) write end of its pipe.
pub(super) struct Watchdog {
    pub(super) child: Child,
    pub(super) _write_end: OwnedFd,
}

/// A watchdog over a process group that is not a serve (a gate's `setup` command): if the runner dies
/// in any way (SIGKILL included) while this value lives, the whole group gets SIGKILL. Dropping it stops
/// the watchdog (and leaves the group alone).
pub(crate) struct GroupWatchdog(Option<Watchdog>);

impl Drop for GroupWatchdog {
    fn drop(&mut self) {
        if let Some(mut w) = self.0.take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
    }
}

/// Starts the serve's watchdog (see [`Serve::start`]) over process group `pgid`.
pub(crate) fn watch_group(pgid: u32) -> GroupWatchdog {
    GroupWatchdog(start_watchdog(pgid))
}

impl Serve {
    /// Leader exited and no live process left in the group.
    pub(super) fn group_gone(&self) -> bool {
        self.exit_info().is_some() && signals::group_members(self.pid).is_empty()
    }

    pub(super) fn wait_group_gone(&self, deadline: Instant) -> bool {
        loop {
            if self.group_gone() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            // Wakes at once on the leader's exit; other members are re-read every 20 ms.
            self.wait_exit((deadline - now).min(Duration::from_millis(20)));
        }
    }

    pub(super) fn exit_info(&self) -> Option<ExitInfo> {
        self.shared.lock().exit.clone()
    }

    /// Waits up to `timeout` for the leader to exit; returns its exit if it has.
    pub(super) fn wait_exit(&self, timeout: Duration) -> Option<ExitInfo> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if let Some(e) = &st.exit {
                return Some(e.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

/// Body of the supervisor thread: spawns (so that PDEATHSIG is tied to a thread that outlives the
/// serve), reports the pid, waits for the leader's exit without reaping it (its pid, hence the pgid,
/// stays reserved until the group has been dealt with), then reaps when told or when the `Serve` is gone.
pub(super) fn supervise(
    mut cmd: Command,
    shared: Arc<Shared>,
    started: mpsc::Sender<io::Result<(u32, Instant)>>,
    reap: mpsc::Receiver<()>,
) {
    // The clock starts before the spawn: a serve that dies at once (a bind failure) can exit before
    // `spawn` returns to a preempted thread, and its time to exit must not read as 0.
    let spawned_at = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(e));
            return;
        }
    };
    drop(cmd); // closes the parent's copies of the log file
    let pid = child.id();
    let _ = started.send(Ok((pid, spawned_at)));
    let (status, signal) = wait_exit_no_reap(pid);
    {
        let mut st = shared.lock();
        st.exit = Some(ExitInfo {
            status,
            signal,
            at: Instant::now(),
        });
        shared.cond.notify_all();
    }
    let _ = reap.recv(); // a message, or the sender dropped
    let maxrss_kib = reap_with_rusage(pid);
    if maxrss_kib.is_none() {
        let _ = child.wait();
    }
    drop(child);
    let mut st = shared.lock();
    st.reaped = true;
    st.maxrss_kib = maxrss_kib;
    shared.cond.notify_all();
}

/// Reaps child `pid` with `wait4`, returning its `ru_maxrss` (KiB on Linux); None when `wait4` failed (the
/// caller then reaps it another way).
fn reap_with_rusage(pid: u32) -> Option<u64> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is plain data; all-zero is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `status` and `usage` are valid, writable values of the types wait4 fills.
        let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if rc == pid as libc::pid_t {
            return u64::try_from(usage.ru_maxrss).ok();
        }
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

/// Blocks until child `pid` exits and describes how (and the signal that ended it, if one did), leaving it a
/// zombie (`waitid` with `WNOWAIT`).
pub(super) fn wait_exit_no_reap(pid: u32) -> (String, Option<i32>) {
    loop {
        // SAFETY: siginfo_t is plain data; all-zero is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid succeeded for a child, so the SIGCHLD fields of `info` are filled.
            let status = unsafe { info.si_status() };
            let signal =
                matches!(info.si_code, libc::CLD_KILLED | libc::CLD_DUMPED).then_some(status);
            return (exit_description(info.si_code, status), signal);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return (format!("unknown exit (waitid: {e})"), None);
        }
    }
}

/// True for the signals a process dies of when it crashes (not when it is asked to stop): SIGSEGV, SIGABRT,
/// SIGBUS, SIGFPE, SIGILL, SIGSYS, SIGTRAP.
pub(crate) fn is_crash_signal(signal: i32) -> bool {
    [
        libc::SIGSEGV,
        libc::SIGABRT,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGSYS,
        libc::SIGTRAP,
    ]
    .contains(&signal)
}

/// `exit status N` / `signal N` / `signal N (core dumped)` from a SIGCHLD `si_code` and `si_status`.
pub(super) fn exit_description(code: i32, status: i32) -> String {
    match code {
        libc::CLD_EXITED => format!("exit status {status}"),
        libc::CLD_KILLED => format!("signal {status}"),
        libc::CLD_DUMPED => format!("signal {status} (core dumped)"),
        other => format!("unknown exit (si_code {other}, status {status})"),
    }
}

/// Starts the watchdog for group `pgid`; `None` if it cannot be started (then only PDEATHSIG covers a
/// SIGKILL of the runner).
pub(super) fn start_watchdog(pgid: u32) -> Option<Watchdog> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let child = Command::new("sh")
        .args([
            "-c",
            WATCHDOG_SCRIPT,
            "servegate-watchdog",
            &pgid.to_string(),
        ])
        .stdin(Stdio::from(read_end))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0) // not in the terminal's foreground group: a Ctrl-C must not kill it first
        .spawn()
        .ok()?;
    Some(Watchdog {
        child,
        _write_end: write_end,
    })
}
