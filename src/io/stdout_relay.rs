//! A closed stdout is not a crash: when stdout is a pipe or a socket (`cargo test --test gates | head -3`),
//! the process's fd 1 is replaced by a pipe of its own and a relay thread copies it to the real stdout. When
//! the reader goes away the relay stops copying and drains the rest, so no write to fd 1 ever fails with
//! `EPIPE` (libtest-mimic's printer and `println!` panic on it; the run would end without its reports).
//!
//! A terminal or a file cannot be closed under the writer, so stdout is left as it is there (colours and
//! all). Starts a thread; touches fds 1 and its own pipe only.

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::sync::mpsc;
use std::time::Duration;

/// Longest [`StdoutRelay::finish`] waits for the relay to pass on what was written, ms (a child process that
/// inherited fd 1 may keep the pipe open; the relay is then left behind).
pub(crate) const FINISH_WAIT_MS: u64 = 2_000;

/// The relay of fd 1, from [`guard`]; call [`StdoutRelay::finish`] before the process exits.
pub(crate) struct StdoutRelay {
    done: mpsc::Receiver<()>,
}

/// Whether fd 1 is a pipe (FIFO) or a socket: the kinds of stdout a reader can close.
fn closable_stdout() -> bool {
    // SAFETY: fstat on fd 1 into a zeroed stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(1, &mut st) } != 0 {
        return false;
    }
    let fmt = st.st_mode & libc::S_IFMT;
    fmt == libc::S_IFIFO || fmt == libc::S_IFSOCK
}

/// Puts the relay in front of fd 1 when stdout is a pipe or a socket; None (stdout untouched) otherwise, or
/// when a pipe or thread cannot be had.
pub(crate) fn guard() -> Option<StdoutRelay> {
    if !closable_stdout() {
        return None;
    }
    let _ = std::io::stdout().flush();
    // SAFETY: plain fd calls; every fd made here is closed on each failure path.
    let rx = unsafe {
        let real = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if real < 0 {
            return None;
        }
        let mut fds: [RawFd; 2] = [0; 2];
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            libc::close(real);
            return None;
        }
        let (read_end, write_end) = (fds[0], fds[1]);
        let mut out = std::fs::File::from_raw_fd(real);
        let mut input = std::fs::File::from_raw_fd(read_end);
        let (tx, rx) = mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("servegate-stdout-relay".into())
            .spawn(move || {
                let mut buf = [0u8; 8192];
                let mut reader_gone = false;
                loop {
                    match input.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if !reader_gone && out.write_all(&buf[..n]).is_err() {
                                // EPIPE (the reader closed) or any other: drop the rest, keep draining.
                                reader_gone = true;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                let _ = out.flush();
                let _ = tx.send(());
            });
        if spawned.is_err() {
            libc::close(write_end);
            return None;
        }
        if libc::dup2(write_end, 1) < 0 {
            libc::close(write_end);
            return None;
        }
        libc::close(write_end);
        rx
    };
    Some(StdoutRelay { done: rx })
}

impl StdoutRelay {
    /// Flushes stdout, closes the relay's pipe (fd 1 becomes `/dev/null`) and waits up to
    /// [`FINISH_WAIT_MS`] for the relay to pass on what was written.
    pub(crate) fn finish(self) {
        let _ = std::io::stdout().flush();
        // SAFETY: open /dev/null and make it fd 1 (closing the pipe's write end), then close the spare fd.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if null >= 0 {
                libc::dup2(null, 1);
                libc::close(null);
            } else {
                libc::close(1);
            }
        }
        let _ = self
            .done
            .recv_timeout(Duration::from_millis(FINISH_WAIT_MS));
    }
}
