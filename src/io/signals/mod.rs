//! The runner's side of "the serve never outlives the runner" (case 28a).
//!
//! This module owns a process-wide registry of the process groups of live serves, the handlers for
//! SIGINT, SIGTERM and SIGHUP that tear those groups down before the runner exits, and small helpers to
//! signal a group and list its live members. It starts no processes.
//!
//! How each exit path of the runner is covered:
//! - normal return, error, timeout: [`crate::io::serve::Serve::stop`] or its `Drop`;
//! - panic: unwinding runs `Drop` (with `panic = "abort"` nothing unwinds; the abort then counts as a
//!   kill of the runner, below);
//! - SIGINT / SIGTERM / SIGHUP: [`install`]'s handler ([`drive`]: the OS's signals as typed
//!   [`SignalEvent`]s, decided by [`Interruption`], so the logic is tested without a signal): records the signal at once ([`interrupted`]: from
//!   then on no run may end as `complete` nor any verdict be shown), SIGTERM to every registered group, up
//!   to [`SIGNAL_GRACE_MAX_MS`] of grace, SIGKILL, then exit with `128 + signo` (130, 143, 129). While a
//!   run is active ([`run_started`]) or a caller deferred the exit ([`defer_exit`]), the handler leaves
//!   the exit to that caller's next checkpoint (it writes `run.json` as `interrupted` and calls
//!   [`exit_interrupted`]) for up to [`FINALIZE_WAIT_MS`]; after that it marks the active runs'
//!   `run.json` `interrupted` itself and exits;
//! - a failed write to stdout (`/dev/full`, a closed pipe: SIGPIPE is ignored once [`install`]ed): the
//!   printer's `error: stdout: ...` line, then the stop a signal makes, under [`STDOUT_UNWRITABLE`]
//!   (`run.json` `interrupted`), exit 5;
//! - SIGKILL of the runner (or `std::process::exit` without stopping, or an abort): the serve's leader
//!   has `PR_SET_PDEATHSIG(SIGKILL)`, tied to the supervisor thread that spawned it, and a watchdog
//!   process (`sh`, one per serve) kills the whole group when the runner's end of a pipe closes. A
//!   process of the serve that leaves the group (`setsid`, double fork into a new group) escapes both;
//!   only a cgroup or pid namespace would catch it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod events;

pub use events::{
    drive, Ending, Interruption, NoSignals, NoopHandler, OsSignals, Reaction, ScriptedSignals,
    SignalEvent, SignalHandler, SignalSource,
};

/// Upper bound of the grace the signal handler gives the registered groups between SIGTERM and
/// SIGKILL, in ms (a serve's own `stop_grace` is used when shorter).
pub(crate) const SIGNAL_GRACE_MAX_MS: u64 = 5_000;

/// Registered serve process groups: pgid → grace between SIGTERM and SIGKILL.
struct Registry {
    groups: BTreeMap<u32, Duration>,
    shutting_down: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    groups: BTreeMap::new(),
    shutting_down: false,
});

static INSTALLED: Mutex<bool> = Mutex::new(false);

/// The first stop signal received (0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

/// `run.json` files of the runs in progress (the handler's fallback marks them `interrupted`).
static ACTIVE_RUNS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Callers that asked the handler to leave the exit to their checkpoints ([`defer_exit`]).
static DEFERRED: AtomicUsize = AtomicUsize::new(0);

/// Held by whoever ends the process because of a stop signal (a checkpoint or the handler's fallback),
/// so that exactly one of them writes the final `run.json` and exits.
static FINAL: Mutex<()> = Mutex::new(());

/// Longest a second stop signal waits for a checkpoint that is writing the final `run.json` before it
/// exits anyway, ms.
pub(crate) const FINAL_WRITE_WAIT_MS: u64 = 3_000;

/// Longest the handler waits, after tearing the serves down, for an active run to reach a checkpoint
/// and end itself as interrupted, in ms. After it, the handler marks the run itself and exits.
pub(crate) const FINALIZE_WAIT_MS: u64 = 10_000;

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The exit code of a runner ended by signal `signo`: `128 + signo` (130 for SIGINT, 143 for SIGTERM,
/// 129 for SIGHUP), as shells report it.
pub(crate) fn exit_code_for(signo: i32) -> i32 {
    if signo == STDOUT_UNWRITABLE {
        return crate::error::exit::EVIDENCE_ERROR;
    }
    128 + signo
}

/// Not a signal: the stop recorded when a write to stdout failed while serves may run
/// ([`stop_on_stdout_failure`]). It ends the run as a stop signal does (serves torn down, `run.json`
/// `interrupted`, nothing judged) and exits 5 (output could not be written), not `128 + n`.
pub(crate) const STDOUT_UNWRITABLE: i32 = 1_000;

/// The stop [`install`] registers for a failed write to stdout (`io::printer::stdout_failed`): the serves
/// torn down and the exit left to the run's next checkpoint, as for SIGTERM, under [`STDOUT_UNWRITABLE`].
fn stop_on_stdout_failure() {
    OsHandler.stop(STDOUT_UNWRITABLE);
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (idempotent: a second call does nothing), ignores
/// SIGPIPE and registers the stop for a failed write to stdout ([`STDOUT_UNWRITABLE`]).
///
/// A dedicated thread [`drive`]s the OS's signals ([`OsSignals`]) through [`Interruption`] into the OS
/// handler. On the first stop it records the signal ([`interrupted`]), and a teardown thread marks the
/// registry as shutting down (no new serve may register), sends SIGTERM to every registered process group,
/// waits until each group has no live member or the grace is over (the smallest of [`SIGNAL_GRACE_MAX_MS`]
/// and the longest registered `stop_grace`), sends SIGKILL to what is left, and exits the process with
/// [`exit_code_for`]`(signo)`. A second stop during that grace sends SIGKILL at once and exits with the
/// first signal's code; the parent's death after a stop is not a second one ([`Reaction::Ignore`]).
///
/// Call it once, early, from the runner's `main`. A library user that does not call it keeps its own
/// signal behaviour; the serve is then still killed on the runner's death by PDEATHSIG and the
/// watchdog (see the module doc).
///
/// Errors: the handlers could not be registered (the OS refused).
pub fn install() -> io::Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    let mut signals = OsSignals::stop_signals()?;
    std::thread::Builder::new()
        .name("servegate-signals".into())
        .spawn(move || {
            drive(&mut signals, &mut OsHandler);
        })?;
    // From here a serve may run: a closed stdout must not kill the runner by SIGPIPE (the run left
    // `running`), it is a failed write that stops the run like a signal ([`stop_on_stdout_failure`]).
    // SAFETY: setting a signal disposition; children get the default back (std resets SIGPIPE on spawn).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    crate::io::printer::on_stdout_failure(stop_on_stdout_failure);
    *installed = true;
    Ok(())
}

/// What the process does about a stop ([`install`]'s handler).
struct OsHandler;

impl SignalHandler for OsHandler {
    fn stop(&mut self, signo: i32) {
        // Recorded before anything else: from here on, whatever the request loop sees next (a reply cut by
        // the teardown, a serve that exited), the run is interrupted.
        note_interrupt(signo);
        // Teardown runs on its own thread so that a second signal (a second Ctrl-C) can cut the grace short.
        let spawned = std::thread::Builder::new()
            .name("servegate-teardown".into())
            .spawn(move || {
                terminate_registered();
                finish_after_signal(signo);
            });
        if spawned.is_err() {
            terminate_registered();
            finish_after_signal(signo);
        }
    }

    fn immediate(&mut self, first: i32) {
        for g in registered() {
            signal_group(g, libc::SIGKILL);
        }
        // A checkpoint that is writing the final run.json (holding FINAL) is about to exit: let it finish
        // (bounded) rather than exit under it, which would leave run.json `running` and race two exits.
        let deadline = Instant::now() + Duration::from_millis(FINAL_WRITE_WAIT_MS);
        let guard = loop {
            match FINAL.try_lock() {
                Ok(g) => break Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => {
                    if Instant::now() >= deadline {
                        break None;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        if guard.is_some() {
            mark_active_runs_interrupted(first);
        }
        remove_active_temps();
        Ending::of(first).exit()
    }
}

/// What the handler does once the serves are down: exit at once when no run is active and nobody deferred
/// the exit; else wait up to [`FINALIZE_WAIT_MS`] for a checkpoint to end the process, then mark the
/// active runs interrupted and exit.
fn finish_after_signal(signo: i32) {
    let deadline = Instant::now() + Duration::from_millis(FINALIZE_WAIT_MS);
    wait_until(deadline, || {
        DEFERRED.load(Ordering::SeqCst) == 0 && active_runs().is_empty()
    });
    let _g = FINAL.lock().unwrap_or_else(|e| e.into_inner());
    let ending = end_marking(&active_runs(), signo);
    remove_active_temps();
    ending.exit()
}

/// Removes the temp files of a write the exit cuts short (`io::fs::remove_temps`) from the directory of
/// each active run (its `run.json`'s): a process that exits does not run the temp files' `Drop`.
fn remove_active_temps() {
    for run_json in active_runs() {
        if let Some(dir) = run_json.parent() {
            crate::io::fs::remove_temps(dir);
        }
    }
}

/// The handler's fallback ending for a stop by `signo`: each run of `runs` (`run.json` paths) marked
/// interrupted ([`mark_runs_interrupted`]), and the [`Ending`] to exit with.
pub(crate) fn end_marking(runs: &[PathBuf], signo: i32) -> Ending {
    mark_runs_interrupted(runs, signo);
    Ending::of(signo)
}

fn mark_active_runs_interrupted(signo: i32) {
    mark_runs_interrupted(&active_runs(), signo);
}

/// Rewrites each `run.json` of `runs` with `"status": "interrupted"` and a note (best effort: a file that
/// cannot be read or written stays as it was, `running` at worst).
fn mark_runs_interrupted(runs: &[PathBuf], signo: i32) {
    for path in runs {
        let Ok(text) = fs::read_to_string(path) else {
            continue;
        };
        let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let Some(o) = v.as_object_mut() {
            o.insert("status".into(), "interrupted".into());
            let note = format!(
                "interrupted by {} (marked by the signal handler: the run did not reach a checkpoint within {} ms)",
                signal_name(signo),
                FINALIZE_WAIT_MS
            );
            match o.get_mut("notes").and_then(|n| n.as_array_mut()) {
                Some(a) => a.push(note.into()),
                None => {
                    o.insert("notes".into(), vec![serde_json::Value::from(note)].into());
                }
            }
        }
        if let Ok(bytes) = serde_json::to_vec_pretty(&v) {
            let _ = crate::io::fs::write_atomic(path, &bytes);
        }
    }
}

/// The stop signal received so far, if any: `Some(signo)` (SIGINT 2, SIGTERM 15, SIGHUP 1) once the
/// handler of [`install`] has seen one. A run that sees `Some` must end as interrupted: no `complete`
/// status, no verdict shown, exit with [`exit_code_for`] the signal.
pub(crate) fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Records `signo` as received (the first one wins). The handler calls it; tests may too.
pub(crate) fn note_interrupt(signo: i32) {
    let _ = INTERRUPTED.compare_exchange(0, signo, Ordering::SeqCst, Ordering::SeqCst);
}

/// `SIGINT`, `SIGTERM`, `SIGHUP`, or `signal N`.
pub fn signal_name(signo: i32) -> String {
    match signo {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        STDOUT_UNWRITABLE => "a stdout that could not be written".into(),
        n => format!("signal {n}"),
    }
}

/// The line printed when a run ends because of `signo`:
/// `INTERRUPTED: stopped by SIGTERM; nothing was judged (exit 143)`.
/// A stdout that failed may fail after the gate was judged: `no result is shown` then.
pub(crate) fn interrupted_line(signo: i32) -> String {
    format!(
        "INTERRUPTED: stopped by {}; {} (exit {})",
        signal_name(signo),
        if signo == STDOUT_UNWRITABLE {
            "no result is shown"
        } else {
            "nothing was judged"
        },
        exit_code_for(signo)
    )
}

/// Registers a run in progress by its `run.json` path: until [`run_ended`], a stop signal leaves the
/// exit to the run's checkpoints (for up to [`FINALIZE_WAIT_MS`]), and the handler's fallback marks this
/// file `interrupted`.
pub(crate) fn run_started(run_json: &Path) {
    active_runs_lock().push(run_json.to_path_buf());
}

/// Deregisters a run registered with [`run_started`] (no effect if absent).
pub(crate) fn run_ended(run_json: &Path) {
    let mut a = active_runs_lock();
    if let Some(i) = a.iter().position(|p| p == run_json) {
        a.remove(i);
    }
}

fn active_runs_lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    ACTIVE_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

fn active_runs() -> Vec<PathBuf> {
    active_runs_lock().clone()
}

/// Asks the handler to leave the exit to the caller's checkpoints ([`checkpoint`]) for up to
/// [`FINALIZE_WAIT_MS`] after a stop signal, so that a command that prints results (the CLI, the test
/// harness) never prints them after the signal. Lasts for the process.
pub fn defer_exit() {
    DEFERRED.fetch_add(1, Ordering::SeqCst);
}

/// A checkpoint: if a stop signal has arrived, prints [`interrupted_line`] on stderr and exits the process
/// with [`exit_code_for`] it; else returns. Call it before anything that would show a result.
pub fn checkpoint() {
    if let Some(signo) = interrupted() {
        let _g = FINAL.lock().unwrap_or_else(|e| e.into_inner());
        exit_interrupted(signo);
    }
}

/// Runs `finalize` (e.g. writing `run.json` as `interrupted`) and exits with [`exit_code_for`]`(signo)`,
/// holding the lock that keeps the handler's fallback from writing or exiting at the same time.
pub(crate) fn finalize_interrupted(signo: i32, finalize: impl FnOnce()) -> ! {
    let _g = FINAL.lock().unwrap_or_else(|e| e.into_inner());
    finalize();
    exit_interrupted(signo)
}

/// Prints [`interrupted_line`] on stderr and exits with [`exit_code_for`]`(signo)`, the active runs' temp
/// files removed first.
fn exit_interrupted(signo: i32) -> ! {
    remove_active_temps();
    Ending::of(signo).exit()
}

/// Interval at which [`watch_parent`] looks at the parent, ms.
pub(crate) const PARENT_POLL_MS: u64 = 100;

/// The parent pid [`watch_parent`] watches (0: not watching).
static WATCHED_PARENT: AtomicI32 = AtomicI32::new(0);

/// True when [`watch_parent`] is watching and the parent it saw is no longer this process's parent.
pub(crate) fn parent_gone() -> bool {
    let p = WATCHED_PARENT.load(Ordering::SeqCst);
    // SAFETY: getppid has no preconditions.
    p != 0 && unsafe { libc::getppid() } != p
}

/// Ends this process as interrupted by SIGTERM when its parent process dies (it is re-parented), so that a
/// harness whose `cargo` was killed alone (SIGTERM or SIGKILL to `cargo` only) ends at once, its serves
/// torn down by the handler before it exits, instead of running on and writing a report nobody asked for.
/// Two ways, the first that sees it: `PR_SET_PDEATHSIG(SIGUSR2)`, delivered the moment the parent dies,
/// read by [`install`]'s handler as [`SignalEvent::ParentDied`] (ending as a SIGTERM) only if `getppid()`
/// changed (PDEATHSIG also fires when the parent's spawning *thread* ends, which is not the parent dying);
/// and a thread that polls `getppid()` every [`PARENT_POLL_MS`] (a parent that died before the prctl) and
/// sends the same SIGUSR2. The two are one death ([`Interruption`]). Idempotent. Install the handlers
/// ([`install`]) first, or the signals kill the process outright.
pub(crate) fn watch_parent() {
    static STARTED: Mutex<bool> = Mutex::new(false);
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    if *started {
        return;
    }
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    WATCHED_PARENT.store(parent, Ordering::SeqCst);
    if installed() {
        // SAFETY: prctl(PR_SET_PDEATHSIG) with a signal number; affects only this process.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGUSR2 as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        // The parent may have died before the prctl: the poll below catches it within PARENT_POLL_MS.
    }
    let spawned = std::thread::Builder::new()
        .name("servegate-parent-watch".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(PARENT_POLL_MS));
            // SAFETY: getppid has no preconditions.
            if unsafe { libc::getppid() } != parent {
                // The parent-death signal, as PDEATHSIG sends it: the handler reads it as
                // [`SignalEvent::ParentDied`], once for both ways, and never as a second stop after a
                // Ctrl-C (which reaches the parent and this process together). Without the handler, a
                // plain SIGTERM.
                let signo = if installed() {
                    libc::SIGUSR2
                } else {
                    libc::SIGTERM
                };
                // SAFETY: kill(2) on our own pid.
                unsafe { libc::kill(libc::getpid(), signo) };
                return;
            }
        });
    *started = spawned.is_ok();
}

/// Whether [`install`] has run successfully in this process.
pub(crate) fn installed() -> bool {
    *INSTALLED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds process group `pgid` (a serve's leader pid) with its SIGTERM→SIGKILL `grace`.
///
/// Returns false, registering nothing, when a termination signal is being handled: the caller must then
/// kill the group itself.
pub(crate) fn register(pgid: u32, grace: Duration) -> bool {
    let mut r = registry();
    if r.shutting_down {
        return false;
    }
    r.groups.insert(pgid, grace);
    true
}

/// Removes process group `pgid` (no effect if absent).
pub(crate) fn deregister(pgid: u32) {
    registry().groups.remove(&pgid);
}

/// The registered process groups, ascending.
pub fn registered() -> Vec<u32> {
    registry().groups.keys().copied().collect()
}

/// Whether a termination signal is being handled (the process is about to exit).
pub(crate) fn shutting_down() -> bool {
    registry().shutting_down
}

/// Marks shutting down and tears down every registered group: SIGTERM, grace, SIGKILL. Returns the pids
/// still alive afterwards (normally none). Used by the signal handler; callable directly.
pub(crate) fn terminate_registered() -> Vec<u32> {
    let groups: Vec<(u32, Duration)> = {
        let mut r = registry();
        r.shutting_down = true;
        r.groups.iter().map(|(k, v)| (*k, *v)).collect()
    };
    let grace = groups
        .iter()
        .map(|(_, g)| *g)
        .max()
        .unwrap_or_default()
        .min(Duration::from_millis(SIGNAL_GRACE_MAX_MS));
    let pgids: Vec<u32> = groups.iter().map(|(p, _)| *p).collect();
    terminate_groups(&pgids, grace)
}

/// SIGTERM to each group in `pgids`, wait up to `grace` for all of them to have no live member, SIGKILL
/// to those that still do, wait up to 2 s more. Returns the pids still alive at the end.
pub(crate) fn terminate_groups(pgids: &[u32], grace: Duration) -> Vec<u32> {
    for &g in pgids {
        signal_group(g, libc::SIGTERM);
    }
    let all_gone = |pgids: &[u32]| pgids.iter().all(|&g| group_members(g).is_empty());
    if wait_until(Instant::now() + grace, || all_gone(pgids)) {
        return Vec::new();
    }
    for &g in pgids {
        signal_group(g, libc::SIGKILL);
    }
    wait_until(Instant::now() + Duration::from_secs(2), || all_gone(pgids));
    pgids.iter().flat_map(|&g| group_members(g)).collect()
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process the serve detaches
/// (double fork, `setsid`) is re-parented to the runner instead of init, so it stays a descendant the
/// runner can find, stop and reap. Idempotent. Errors: the kernel refused (not Linux, or too old).
pub(crate) fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) only sets a flag on this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Name of the environment variable the runner sets on every serve and setup it starts, with a value
/// unique to the run; every descendant inherits it unless it clears its environment.
pub(crate) const RUN_TAG_ENV: &str = "SERVEGATE_RUN_TAG";

/// A fresh tag value for [`RUN_TAG_ENV`]: `<runner pid>-<ns since the epoch>-<counter>`.
pub(crate) fn new_run_tag() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{}-{ns}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Live processes (not this one) whose environment holds `RUN_TAG_ENV=tag`, read from
/// `/proc/*/environ` (only processes of the same user are readable). Linux only.
pub(crate) fn tagged_processes(tag: &str) -> Vec<u32> {
    let needle = format!("{RUN_TAG_ENV}={tag}");
    let me = std::process::id();
    let mut out = Vec::new();
    for pid in super::procfs::pids() {
        if pid == me || process_dead(pid) {
            continue;
        }
        let Ok(env) = fs::read(super::procfs::path(pid, "environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

/// `pid N (comm)` for a report.
pub(crate) fn describe_pid(pid: u32) -> String {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    format!("pid {pid} ({})", comm.trim())
}

/// Stops every live process tagged `tag` ([`tagged_processes`]): SIGTERM, up to `grace`, SIGKILL, up to
/// 2 s more; reaps those that are this process's children (adopted as subreaper). Returns
/// `(stopped, survived)`, each as [`describe_pid`] lines; both empty when nothing was left.
pub(crate) fn stop_tagged(tag: &str, grace: Duration) -> (Vec<String>, Vec<String>) {
    let pids = tagged_processes(tag);
    if pids.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let stopped: Vec<String> = pids.iter().map(|&p| describe_pid(p)).collect();
    let signal_all = |signo: i32| {
        for &p in &pids {
            // SAFETY: kill(2) on a positive pid has no memory-safety preconditions.
            unsafe { libc::kill(p as i32, signo) };
        }
    };
    let reap = |pids: &[u32]| {
        for &p in pids {
            // SAFETY: waitpid on one pid with WNOHANG; fails harmlessly if it is not our child.
            unsafe { libc::waitpid(p as i32, std::ptr::null_mut(), libc::WNOHANG) };
        }
    };
    let all_dead = |pids: &[u32]| {
        reap(pids);
        pids.iter().all(|&p| process_dead(p))
    };
    signal_all(libc::SIGTERM);
    if !wait_until(Instant::now() + grace, || all_dead(&pids)) {
        signal_all(libc::SIGKILL);
        wait_until(Instant::now() + Duration::from_secs(2), || all_dead(&pids));
    }
    reap(&pids);
    let survived = pids
        .iter()
        .filter(|&&p| !process_dead(p))
        .map(|&p| describe_pid(p))
        .collect();
    (stopped, survived)
}

/// Polls `done` every 20 ms until it is true (returns true) or `deadline` passes (returns false).
fn wait_until(deadline: Instant, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Sends `signo` to every process of group `pgid` (`kill(-pgid, signo)`). Returns false if the group
/// has no process or the signal could not be sent. A `pgid` of 0 or 1 (which would mean "my group" or
/// "everyone") or one beyond `i32` is refused.
pub(crate) fn signal_group(pgid: u32, signo: i32) -> bool {
    if pgid <= 1 || pgid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill(2) with a negative pid has no memory-safety preconditions.
    unsafe { libc::kill(-(pgid as i32), signo) == 0 }
}

/// The live (not zombie) processes whose process group is `pgid`, read from `/proc/*/stat`. Linux only;
/// empty elsewhere or when `/proc` cannot be read.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for pid in super::procfs::pids() {
        let Ok(stat) = fs::read_to_string(super::procfs::path(pid, "stat")) else {
            continue;
        };
        if let Some((state, pgrp)) = parse_stat(&stat) {
            if pgrp == pgid && state != 'Z' && state != 'X' {
                out.push(pid);
            }
        }
    }
    out
}

/// Whether process `pid` is gone or a zombie (dead but not yet reaped), from `/proc/PID/stat`.
pub fn process_dead(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => matches!(parse_stat(&stat), Some(('Z' | 'X', _))),
        Err(_) => true,
    }
}

/// The process group of `pid`, from `/proc` (None when the process is gone or unreadable).
pub fn pgid_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|(_, g)| g)
}

/// `(state, pgrp)` from a `/proc/PID/stat` line. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after the last `)`.
pub(crate) fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        assert_eq!(exit_code_for(libc::SIGINT), 130);
        assert_eq!(exit_code_for(libc::SIGTERM), 143);
        assert_eq!(exit_code_for(libc::SIGHUP), 129);
    }

    #[test]
    fn register_and_deregister_are_idempotent() {
        let fake = 3_999_999_001;
        assert!(register(fake, Duration::from_secs(1)));
        assert!(register(fake, Duration::from_secs(1)));
        assert!(registered().contains(&fake));
        deregister(fake);
        deregister(fake);
        assert!(!registered().contains(&fake));
    }

    #[test]
    fn stat_parsing_survives_odd_command_names() {
        let s = "4242 (llama server) (x)) S 1 4242 4242 0 -1 4194560 0 0";
        assert_eq!(parse_stat(s), Some(('S', 4242)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (a) Z"), None);
    }

    #[test]
    fn dangerous_pgids_are_refused() {
        assert!(!signal_group(0, 0));
        assert!(!signal_group(1, 0));
        assert!(!signal_group(u32::MAX, 0));
    }

    #[test]
    fn own_process_is_alive_and_in_its_group() {
        assert!(!process_dead(std::process::id()));
        // SAFETY: getpgrp has no preconditions.
        let pgrp = unsafe { libc::getpgrp() } as u32;
        assert!(group_members(pgrp).contains(&std::process::id()));
        assert!(process_dead(u32::MAX - 7));
    }

    #[test]
    fn interrupted_line_names_the_signal_and_the_code() {
        assert_eq!(
            interrupted_line(libc::SIGTERM),
            "INTERRUPTED: stopped by SIGTERM; nothing was judged (exit 143)"
        );
        assert_eq!(signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(signal_name(99), "signal 99");
        assert_eq!(
            interrupted_line(STDOUT_UNWRITABLE),
            "INTERRUPTED: stopped by a stdout that could not be written; no result is shown (exit 5)"
        );
    }

    #[test]
    fn the_fallback_marks_an_active_run_interrupted_and_keeps_its_fields() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("run.json");
        fs::write(
            &path,
            r#"{"status": "running", "gate": "g", "notes": ["a"]}"#,
        )
        .unwrap();
        run_started(&path);
        mark_active_runs_interrupted(libc::SIGINT);
        run_ended(&path);
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["status"], "interrupted");
        assert_eq!(v["gate"], "g");
        assert_eq!(v["notes"][0], "a");
        assert!(v["notes"][1]
            .as_str()
            .unwrap()
            .contains("interrupted by SIGINT"));
        assert!(!active_runs().contains(&path));
    }

    #[test]
    fn tagged_processes_are_found_by_their_environment_and_stopped() {
        let tag = new_run_tag();
        assert_ne!(tag, new_run_tag());
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .env(RUN_TAG_ENV, &tag)
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(wait_until(Instant::now() + Duration::from_secs(10), || {
            tagged_processes(&tag) == vec![pid]
        }));
        assert!(tagged_processes(&new_run_tag()).is_empty());
        let (stopped, survived) = stop_tagged(&tag, Duration::from_secs(2));
        let _ = child.wait();
        assert_eq!(stopped.len(), 1, "{stopped:?}");
        assert!(
            stopped[0].starts_with(&format!("pid {pid} ")),
            "{stopped:?}"
        );
        assert!(survived.is_empty(), "{survived:?}");
        assert!(process_dead(pid));
    }
}
