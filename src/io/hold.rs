//! The device hold: an exclusive lock a gate (a pair: all of its arms) takes for its whole run, so two gates on
//! one device never overlap. An advisory `flock(2)` on the lock file (std's `File::try_lock`): the kernel
//! releases it on every exit path, SIGKILL included. Beside the lock, `<lock>.holder` names the holder (pid,
//! gate, since) for whoever waits.
//!
//! A fleet's device may instead (or also) be held by an external wrapper the serve runs under (`[hold] command`,
//! [`wrap`]) or by a ticket file that must exist before the gate starts (`[hold] ticket`, [`check_ticket`]):
//! without it the gate refuses to start, unless the lane holds the device some other way (`--allow-no-hold`,
//! `SERVEGATE_ALLOW_NO_HOLD=1`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::io::progress::{Pacer, Waiting};

/// A held lock; released when dropped (and by the kernel if the process dies).
#[derive(Debug)]
pub struct Hold {
    file: File,
    holder: PathBuf,
    /// ms spent waiting for the lock.
    pub waited_ms: f64,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.holder);
        let _ = self.file.unlock();
    }
}

/// The holder file beside a lock: `<lock>.holder`.
pub fn holder_path(lock: &Path) -> PathBuf {
    let mut s = lock.as_os_str().to_owned();
    s.push(".holder");
    PathBuf::from(s)
}

/// Takes the lock at `lock` for `gate`, waiting up to `wait` and calling `waiting` at once when it is held,
/// then every 10 s, with a progress line naming the holder (`waiting for the hold LOCK: 10 s (held by pid N
/// gate G since T)`). Errors: `hold_timeout: ...` naming the holder, or the I/O error.
pub fn take(
    lock: &Path,
    gate: &str,
    wait: Duration,
    waiting: &mut dyn FnMut(&Waiting),
) -> Result<Hold, String> {
    if let Some(dir) = lock.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("hold: cannot create {}: {e}", dir.display()))?;
        }
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(lock)
        .map_err(|e| format!("hold: cannot open {}: {e}", lock.display()))?;
    let holder = holder_path(lock);
    let t0 = Instant::now();
    // Who holds it is worth a line at once (a waiter may wait long); then the usual pace.
    let mut pacer = Pacer::with(t0, Duration::ZERO, crate::io::progress::EVERY);
    loop {
        match file.try_lock() {
            Ok(()) => {
                let text = format!(
                    "pid {} gate {} since {}\n",
                    std::process::id(),
                    gate,
                    crate::io::host::now_utc()
                );
                let _ =
                    std::fs::File::create(&holder).and_then(|mut f| f.write_all(text.as_bytes()));
                return Ok(Hold {
                    file,
                    holder,
                    waited_ms: t0.elapsed().as_secs_f64() * 1000.0,
                });
            }
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(format!("hold: cannot lock {}: {e}", lock.display()))
            }
        }
        let who = std::fs::read_to_string(&holder)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "an unnamed holder".into());
        if t0.elapsed() >= wait {
            return Err(format!(
                "hold_timeout: {} is held by {who}; waited {:.0} s",
                lock.display(),
                wait.as_secs_f64()
            ));
        }
        if let Some(secs) = pacer.due(Instant::now()) {
            waiting(&Waiting::new(
                format!("waiting for the hold {}", lock.display()),
                secs,
                Some(&format!("held by {who}")),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The harness's switch for a lane that holds the device some other way: `SERVEGATE_ALLOW_NO_HOLD=1` (as
/// `servegate run --allow-no-hold`).
pub(crate) const ALLOW_NO_HOLD_VAR: &str = "SERVEGATE_ALLOW_NO_HOLD";

/// True when `SERVEGATE_ALLOW_NO_HOLD` (looked up with `var`) is set to anything but empty, `0` or `false`.
pub fn allow_no_hold(var: impl Fn(&str) -> Option<String>) -> bool {
    var(ALLOW_NO_HOLD_VAR).is_some_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

/// The gate's `[hold] ticket` check, before anything of the gate starts. `Ok(None)`: no ticket asked for, or
/// it exists; `Ok(Some(note))`: it is missing but `allow` (`--allow-no-hold`) lets the gate run, the note says
/// so; `Err(message)`: it is missing, the gate refuses to start (the message names the gate, the file and the
/// way out).
pub fn check_ticket(gate: &crate::spec::GateSpec, allow: bool) -> Result<Option<String>, String> {
    let Some(ticket) = gate.hold.as_ref().and_then(|h| h.ticket.as_ref()) else {
        return Ok(None);
    };
    if ticket.exists() {
        return Ok(None);
    }
    if allow {
        return Ok(Some(format!(
            "hold: the device ticket {} does not exist; running without it (--allow-no-hold / {ALLOW_NO_HOLD_VAR})",
            ticket.display()
        )));
    }
    Err(format!(
        "hold_refused: {}: gate {} needs the device ticket {} ([hold] ticket) and it does not exist: the gate \
         refuses to start (take the ticket first; --allow-no-hold or {ALLOW_NO_HOLD_VAR}=1 for a lane that holds \
         the device some other way)",
        gate.file.display(),
        gate.name,
        ticket.display()
    ))
}

/// The argv the runner starts for a serve: `[hold] command` (the hold wrapper, e.g. `npu-hold --`) followed by
/// the serve's own argv; the serve's argv unchanged without a wrapper.
pub(crate) fn wrap(hold: Option<&crate::spec::HoldSpec>, argv: &[String]) -> Vec<String> {
    match hold {
        Some(h) if !h.command.is_empty() => h.command.iter().chain(argv).cloned().collect(),
        _ => argv.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_waits_names_the_holder_and_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("npu.lock");
        let first = take(&lock, "gate-a", Duration::from_secs(1), &mut |_| {}).unwrap();
        let mut notes = Vec::new();
        let err = take(&lock, "gate-b", Duration::from_millis(300), &mut |l| {
            notes.push(l.to_string())
        })
        .unwrap_err();
        assert!(err.starts_with("hold_timeout: "), "{err}");
        assert!(
            err.contains(&format!("pid {} gate gate-a", std::process::id())),
            "{err}"
        );
        assert!(notes[0].contains("gate gate-a"), "{notes:?}");
        drop(first);
        assert!(!holder_path(&lock).exists());
        let again = take(&lock, "gate-b", Duration::from_secs(1), &mut |_| {}).unwrap();
        assert!(again.waited_ms < 1000.0);
    }
}
