//! The device hold: an exclusive lock a gate (a pair: all of its arms) takes for its whole run, so two gates on
//! one device never overlap. An advisory `flock(2)` on the lock file (std's `File::try_lock`): the kernel
//! releases it on every exit path, SIGKILL included. Beside the lock, `<lock>.holder` names the holder (pid,
//! gate, since) for whoever waits.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// Takes the lock at `lock` for `gate`, waiting up to `wait` and calling `waiting` about every 10 s with a
/// line naming the holder. Errors: `hold_timeout: ...` naming the holder, or the I/O error.
pub fn take(
    lock: &Path,
    gate: &str,
    wait: Duration,
    waiting: &mut dyn FnMut(&str),
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
    let mut last_note: Option<Instant> = None;
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
        if last_note.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            waiting(&format!(
                "waiting for the hold {} (held by {who})",
                lock.display()
            ));
            last_note = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(100));
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
