//! The runner's side of "the serve never outlives the runner" (case 28a).
//!
//! This module owns a process-wide registry of the process groups of live serves, the handlers for
//! SIGINT, SIGTERM and SIGHUP that tear those groups down before the runner exits, and small helpers to
//! signal a group and list its live members. It starts no processes.
//!
//! How each exit path of the runner is covered:
//! - normal return, error, timeout: [`crate::serve::Serve::stop`] or its `Drop`;
//! - panic: unwinding runs `Drop` (with `panic = "abort"` nothing unwinds; the abort then counts as a
//!   kill of the runner, below);
//! - SIGINT / SIGTERM / SIGHUP: [`install`]'s handler: SIGTERM to every registered group, up to
//!   [`SIGNAL_GRACE_MAX_MS`] of grace, SIGKILL, then exit with `128 + signo` (130, 143, 129);
//! - SIGKILL of the runner (or `std::process::exit` without stopping, or an abort): the serve's leader
//!   has `PR_SET_PDEATHSIG(SIGKILL)`, tied to the supervisor thread that spawned it, and a watchdog
//!   process (`sh`, one per serve) kills the whole group when the runner's end of a pipe closes. A
//!   process of the serve that leaves the group (`setsid`, double fork into a new group) escapes both;
//!   only a cgroup or pid namespace would catch it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Upper bound of the grace the signal handler gives the registered groups between SIGTERM and
/// SIGKILL, in ms (a serve's own `stop_grace` is used when shorter).
pub const SIGNAL_GRACE_MAX_MS: u64 = 5_000;

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

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The exit code of a runner ended by signal `signo`: `128 + signo` (130 for SIGINT, 143 for SIGTERM,
/// 129 for SIGHUP), as shells report it.
pub fn exit_code_for(signo: i32) -> i32 {
    128 + signo
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (idempotent: a second call does nothing).
///
/// On the first of those signals a dedicated thread marks the registry as shutting down (no new serve
/// may register), sends SIGTERM to every registered process group, waits until each group has no live
/// member or the grace is over (the smallest of [`SIGNAL_GRACE_MAX_MS`] and the longest registered
/// `stop_grace`), sends SIGKILL to what is left, and exits the process with [`exit_code_for`]`(signo)`.
/// A second signal during that grace sends SIGKILL at once and exits with the first signal's code.
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
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("servegate-signals".into())
        .spawn(move || {
            let mut first = None;
            for signo in signals.forever() {
                if first.is_none() {
                    // Teardown runs on its own thread so that a second signal (a second Ctrl-C)
                    // can cut the grace short.
                    first = Some(signo);
                    let spawned = std::thread::Builder::new()
                        .name("servegate-teardown".into())
                        .spawn(move || {
                            terminate_registered();
                            std::process::exit(exit_code_for(signo));
                        });
                    if spawned.is_err() {
                        terminate_registered();
                        std::process::exit(exit_code_for(signo));
                    }
                } else {
                    for g in registered() {
                        signal_group(g, libc::SIGKILL);
                    }
                    std::process::exit(exit_code_for(first.unwrap_or(signo)));
                }
            }
        })?;
    *installed = true;
    Ok(())
}

/// Whether [`install`] has run successfully in this process.
pub fn installed() -> bool {
    *INSTALLED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds process group `pgid` (a serve's leader pid) with its SIGTERM→SIGKILL `grace`.
///
/// Returns false, registering nothing, when a termination signal is being handled: the caller must then
/// kill the group itself.
pub fn register(pgid: u32, grace: Duration) -> bool {
    let mut r = registry();
    if r.shutting_down {
        return false;
    }
    r.groups.insert(pgid, grace);
    true
}

/// Removes process group `pgid` (no effect if absent).
pub fn deregister(pgid: u32) {
    registry().groups.remove(&pgid);
}

/// The registered process groups, ascending.
pub fn registered() -> Vec<u32> {
    registry().groups.keys().copied().collect()
}

/// Whether a termination signal is being handled (the process is about to exit).
pub fn shutting_down() -> bool {
    registry().shutting_down
}

/// Marks shutting down and tears down every registered group: SIGTERM, grace, SIGKILL. Returns the pids
/// still alive afterwards (normally none). Used by the signal handler; callable directly.
pub fn terminate_registered() -> Vec<u32> {
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
pub fn terminate_groups(pgids: &[u32], grace: Duration) -> Vec<u32> {
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
pub fn signal_group(pgid: u32, signo: i32) -> bool {
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
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
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
}
