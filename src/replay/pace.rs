//! Pacing: waking up at a given instant to within tens of microseconds, and the shared monotonic clock
//! that lets another process (a benchmark) line its stamps up with the serve's.
//!
//! `sleep_until` sleeps to [`SPIN_US`] before the deadline and spins the rest: a plain sleep wakes
//! 50-100 µs late under Linux's default timer slack, which is 1 % of a 10 ms decode window. The spin is
//! bounded, so a serve pacing at 50 tok/s spins 1 % of a core; at 10,000 tok/s (100 µs between tokens) it
//! spins most of the time, as a serve producing tokens that fast would.

use std::time::{Duration, Instant};

/// How long before a deadline `sleep_until` stops sleeping and spins, in µs.
pub(crate) const SPIN_US: u64 = 200;

/// Lowers this thread's timer slack to 1 ns (Linux `PR_SET_TIMERSLACK`) so that sleeps end when asked;
/// threads spawned afterwards inherit it. Best effort: a refusal is ignored.
pub fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_TIMERSLACK, n) only changes this thread's timer slack.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
    }
}

/// Returns at `deadline` (or at once when it has passed): sleeps to [`SPIN_US`] before it, then spins.
pub(crate) fn sleep_until(deadline: Instant) {
    let spin = Duration::from_micros(SPIN_US);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > spin {
            std::thread::sleep(left - spin);
        } else {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
            return;
        }
    }
}

/// `CLOCK_MONOTONIC` in ns: the clock `std::time::Instant` reads on Linux, comparable across the
/// processes of one machine (the serve's timing log and a benchmark's own stamps).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `mono_ns` of an `Instant` taken in this process (`Instant::now()` and `mono_ns()` read the same clock).
pub(crate) fn mono_ns_of(t: Instant) -> u64 {
    let (now_i, now_ns) = (Instant::now(), mono_ns());
    if t <= now_i {
        now_ns.saturating_sub((now_i - t).as_nanos() as u64)
    } else {
        now_ns + (t - now_i).as_nanos() as u64
    }
}

/// Milliseconds from `from` to `to` (negative when `to` is earlier), fractional.
pub(crate) fn ms_between(from: Instant, to: Instant) -> f64 {
    if to >= from {
        (to - from).as_secs_f64() * 1000.0
    } else {
        -((from - to).as_secs_f64() * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_until_never_returns_early() {
        tighten_timer_slack();
        for us in [0u64, 50, 300, 2_000] {
            let deadline = Instant::now() + Duration::from_micros(us);
            sleep_until(deadline);
            assert!(Instant::now() >= deadline);
        }
    }

    #[test]
    fn mono_ns_matches_instant() {
        let t = Instant::now();
        let a = mono_ns_of(t);
        let b = mono_ns();
        assert!(b >= a && b - a < 50_000_000, "{a} {b}");
    }
}
