//! The stop: SIGTERM to the serve's process group, SIGKILL after the grace, the leader reaped and the port
//! checked ([`Serve::stop`], also run by `Drop`), and how a stop tells a crash ([`stop_crashed`]).

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::io::progress::{Pacer, Waiting};
use crate::io::{port, signals};

use super::group::is_crash_signal;
use super::{ms, Serve, KILL_WAIT_MS};

/// What stopping the serve did and found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StopReport {
    /// How the leader ended: `exit status 0`, `signal 15`, `signal 11 (core dumped)`; `None` if it could
    /// not be observed (did not die within the kill wait).
    pub exit: Option<String>,
    /// The signal that ended the leader, when a signal did (15 after a plain stop; 11 for a serve that crashed
    /// on the way down).
    pub signal: Option<i32>,
    /// Whether SIGKILL was needed (something in the group outlived SIGTERM + grace).
    pub escalated_to_kill: bool,
    /// From the stop call to the end of the checks, in ms.
    pub stop_ms: f64,
    /// Whether the leader had already exited before the stop.
    pub already_exited: bool,
    /// Whether the leader was reaped (no zombie left behind).
    pub reaped: bool,
    /// Whether the leader pid is gone from `/proc` afterwards.
    pub pid_gone: bool,
    /// Live processes still in the group afterwards (normally none).
    pub leftover_pids: Vec<u32>,
    /// Whether `host:port` refuses connections afterwards (checked for up to 1 s).
    pub port_closed: bool,
    /// The serve's memory footprint over its life (sampled until the stop signal, the leader's `wait4`
    /// `ru_maxrss` added at its reap); the CPU window is the runner's to fill.
    pub footprint: Option<crate::evidence::footprint::Footprint>,
}

/// How long the runner lets a serve be after its last reply before it stops it ([`Serve::settle`]): 200 ms.
/// A healthy serve costs the run this much per stop; a serve that exits on its own within it (a crash as it
/// finishes its last reply) is seen exiting during the run.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// Whether a stop found the leader ended as a crash: by a crash signal ([`is_crash_signal`]), or with an exit
/// status of 128 + a crash signal (how a shell or wrapper reports a child that died of one, and what a
/// serve's own `_exit(139)` says: `exit status 139` for SIGSEGV). A serve that crashed right after its last
/// reply can be caught either side of the runner's SIGTERM; both ways it crashed.
pub(crate) fn stop_crashed(stop: &StopReport) -> bool {
    if stop.signal.is_some_and(is_crash_signal) {
        return true;
    }
    stop.exit
        .as_deref()
        .and_then(|e| e.strip_prefix("exit status "))
        .and_then(|c| c.trim().parse::<i32>().ok())
        .is_some_and(|c| c > 128 && is_crash_signal(c - 128))
}

impl Serve {
    /// Waits up to `within` for the leader to exit on its own, without signalling it; true when it has. The
    /// runner gives a serve [`SETTLE`] after its last reply before stopping it, so a serve that crashes as
    /// it finishes (an exit right after the last chunk) is seen exiting during the run rather than raced by
    /// the SIGTERM.
    pub(crate) fn settle(&self, within: Duration) -> bool {
        self.wait_exit(within).is_some()
    }

    /// Stops the serve: SIGTERM to its process group, up to `stop_grace` for every member to exit,
    /// SIGKILL to what is left, reaps the leader (no zombie), deregisters the group, and checks that the
    /// pid is gone and the port refuses connections. Never fails; what it found is in the report.
    pub fn stop(mut self) -> StopReport {
        self.stop_inner(&mut |_| {})
    }

    /// [`Serve::stop`], calling `on_wait` while the serve takes its grace to exit: `waiting for the serve to
    /// stop: 2 s (SIGTERM sent; SIGKILL at 30 s)`, at 2 s and every 10 s after ([`Pacer`]).
    pub fn stop_with(mut self, on_wait: &mut dyn FnMut(&Waiting)) -> StopReport {
        self.stop_inner(on_wait)
    }

    /// Waits until the group is gone or its grace (from `t0`, the SIGTERM) is over, saying so on the way;
    /// true when it is gone.
    fn wait_gone_paced(&self, t0: Instant, on_wait: &mut dyn FnMut(&Waiting)) -> bool {
        let end = t0 + self.spec.stop_grace;
        let mut pacer = Pacer::new(t0);
        loop {
            if self.wait_group_gone(pacer.next_due().min(end)) {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            if let Some(secs) = pacer.due(now) {
                on_wait(&Waiting::new(
                    "waiting for the serve to stop",
                    secs,
                    Some(&format!(
                        "SIGTERM sent; SIGKILL at {:.0} s",
                        self.spec.stop_grace.as_secs_f64()
                    )),
                ));
            }
        }
    }

    pub(super) fn stop_inner(&mut self, on_wait: &mut dyn FnMut(&Waiting)) -> StopReport {
        if let Some(r) = &self.stopped {
            return r.clone();
        }
        let t0 = Instant::now();
        let pgid = self.pid;
        let already_exited = self.exit_info().is_some();
        let mut escalated = false;
        // The last sample before the stop signal: what the serve held while it served.
        if let Some(f) = self.footprint.as_mut() {
            f.finish();
        }
        if !self.group_gone() {
            signals::signal_group(pgid, libc::SIGTERM);
            if !self.wait_gone_paced(t0, on_wait) {
                signals::signal_group(pgid, libc::SIGKILL);
                escalated = true;
                self.wait_group_gone(Instant::now() + Duration::from_millis(KILL_WAIT_MS));
            }
        }
        // The watchdog goes before the leader is reaped, so it can never act on a reused pgid.
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
        self.reap_tx = None; // the supervisor reaps when the channel closes
        let reaped = {
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut st = self.shared.lock();
            while !st.reaped && st.exit.is_some() {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                st = self
                    .shared
                    .cond
                    .wait_timeout(st, deadline - now)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            (st.reaped, st.maxrss_kib)
        };
        let (reaped, maxrss_kib) = reaped;
        signals::deregister(pgid);
        let leftover_pids = signals::group_members(pgid);
        let port_closed = {
            let deadline = Instant::now() + Duration::from_secs(1);
            loop {
                if port::refuses_connections(
                    &self.spec.host,
                    self.spec.port,
                    Duration::from_millis(200),
                ) {
                    break true;
                }
                if Instant::now() >= deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let report = StopReport {
            exit: self.exit_status(),
            signal: self.exit_info().and_then(|e| e.signal),
            escalated_to_kill: escalated,
            stop_ms: ms(t0.elapsed()),
            already_exited,
            reaped,
            pid_gone: reaped && signals::process_dead(pgid),
            leftover_pids,
            port_closed,
            footprint: self.footprint.as_ref().map(|f| f.footprint(maxrss_kib)),
        };
        self.stopped = Some(report.clone());
        report
    }
}

impl Drop for Serve {
    /// Stops the serve if [`Serve::stop`] was not called (normal drop, early return, panic unwinding).
    fn drop(&mut self) {
        self.stop_inner(&mut |_| {});
    }
}
