//! Progress lines on long waits (issue 32: a gate sat silent for minutes): every wait of servegate that can
//! last more than two seconds (the gate's `setup`, the serve's model load and readiness, a `--url` serve's
//! readiness, the device hold, `servegate init`'s waits) reports a [`Waiting`] when its [`Pacer`] says one is
//! due: the first [`FIRST`] after the wait began, then every [`EVERY`]. `servegate run` prints them on stderr
//! (silenced by `-q`), the gates harness too (`servegate: GATE waiting for ...: 12 s (...)`). Pure: the pacer is
//! fed instants, it never reads the clock itself.

use std::time::{Duration, Instant};

/// The first progress line of a wait comes this long after it began (a wait shorter than this says nothing).
pub const FIRST: Duration = Duration::from_secs(2);
/// Then one line every this long.
pub const EVERY: Duration = Duration::from_secs(10);

/// Longest detail shown on a progress line, characters (a setup's last log line can be long).
const DETAIL_MAX: usize = 240;

/// When a wait's next progress line is due: at [`FIRST`] after its start, then every [`EVERY`] (a line missed
/// while the waiter was blocked is not repeated: one line per call at most, the next on the schedule after it).
#[derive(Debug, Clone)]
pub struct Pacer {
    started: Instant,
    next: Duration,
    every: Duration,
}

impl Pacer {
    /// A pacer for a wait that began at `started`, on the default schedule ([`FIRST`], then [`EVERY`]).
    pub fn new(started: Instant) -> Pacer {
        Pacer::with(started, FIRST, EVERY)
    }

    /// A pacer for a wait that began at `started`: the first line after `first`, then every `every` (a zero
    /// `every` is taken as one second).
    pub fn with(started: Instant, first: Duration, every: Duration) -> Pacer {
        Pacer {
            started,
            next: first,
            every: every.max(Duration::from_secs(1)),
        }
    }

    /// Whether a line is due at `now`: Some(whole seconds since the start) when it is (and the next one is
    /// scheduled), None otherwise (an instant before the start counts as the start).
    pub fn due(&mut self, now: Instant) -> Option<u64> {
        let elapsed = now.saturating_duration_since(self.started);
        if elapsed < self.next {
            return None;
        }
        while self.next <= elapsed {
            self.next += self.every;
        }
        Some(elapsed.as_secs())
    }

    /// When the next line is due (a waiter may block until then).
    pub fn next_due(&self) -> Instant {
        self.started + self.next
    }

    /// When the wait began.
    pub fn started(&self) -> Instant {
        self.started
    }
}

/// One progress line of a wait: `waiting for readiness at http://127.0.0.1:8080/health: 12 s (last: connection
/// refused; 230 probes, 230 refused)`. Its texts may quote outside text (a URL, a log line): escape them where
/// printed (`crate::text::shown`).
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// What is waited for, from `waiting for` on (`waiting for readiness at URL`, `setup: ARGV`).
    pub what: String,
    /// Whole seconds since the wait began.
    pub elapsed_s: u64,
    /// What the wait has seen so far (the last probe's outcome, the setup log's last line), if anything.
    pub detail: Option<String>,
    /// A terse reporter (the gates harness without `SERVEGATE_VERBOSE`) prints the line only from this many
    /// seconds on: 0 for a stall worth a line at once (setup, readiness, the hold), [`REQUEST_TERSE_S`] for a
    /// request (a few seconds are a generation, and a gate sends many).
    pub terse_from_s: u64,
}

/// A request's wait reaches the gates harness's terse output from this many seconds on (the first line after
/// [`FIRST`], at 12 s).
pub const REQUEST_TERSE_S: u64 = 10;

impl Waiting {
    /// A line for `what` at `elapsed_s`, with `detail` cut to its first line and at most 240 characters
    /// (an empty detail is none).
    pub fn new(what: impl Into<String>, elapsed_s: u64, detail: Option<&str>) -> Waiting {
        Waiting {
            what: what.into(),
            elapsed_s,
            detail: detail.map(cut).filter(|d| !d.is_empty()),
            terse_from_s: 0,
        }
    }

    /// The same line, printed by a terse reporter only from `secs` on (see [`Waiting::terse_from_s`]).
    pub fn terse_from(mut self, secs: u64) -> Waiting {
        self.terse_from_s = secs;
        self
    }

    /// Whether a terse reporter prints it.
    pub fn terse(&self) -> bool {
        self.elapsed_s >= self.terse_from_s
    }
}

impl std::fmt::Display for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} s", self.what, self.elapsed_s)?;
        if let Some(d) = &self.detail {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

/// `s`'s first line, trimmed, at most [`DETAIL_MAX`] characters (`...` marks a cut).
fn cut(s: &str) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() <= DETAIL_MAX {
        return line.to_string();
    }
    let mut out: String = line.chars().take(DETAIL_MAX).collect();
    out.push_str("...");
    out
}

/// The last non-blank line of `text` (a log's tail), trimmed; None when it has none.
pub fn last_line(text: &str) -> Option<&str> {
    text.lines().rev().map(str::trim).find(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn a_wait_says_nothing_before_two_seconds_then_every_ten() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0);
        assert_eq!(p.due(t0), None);
        assert_eq!(p.due(t0 + Duration::from_millis(1999)), None);
        assert_eq!(p.due(t0 + s(2)), Some(2));
        assert_eq!(p.due(t0 + Duration::from_millis(2100)), None);
        assert_eq!(p.due(t0 + s(11)), None);
        assert_eq!(p.due(t0 + Duration::from_millis(12_400)), Some(12));
        assert_eq!(p.due(t0 + s(13)), None);
        assert_eq!(p.due(t0 + s(22)), Some(22));
        assert_eq!(p.next_due(), t0 + s(32));
    }

    #[test]
    fn a_blocked_waiter_gets_one_line_not_the_missed_ones() {
        let t0 = Instant::now();
        let mut p = Pacer::new(t0);
        // Blocked from 0 to 45 s (a probe that hung): one line at 45, the next on the schedule (52).
        assert_eq!(p.due(t0 + s(45)), Some(45));
        assert_eq!(p.due(t0 + s(46)), None);
        assert_eq!(p.due(t0 + s(51)), None);
        assert_eq!(p.due(t0 + s(52)), Some(52));
    }

    #[test]
    fn an_instant_before_the_start_is_the_start_and_a_zero_period_is_a_second() {
        let t0 = Instant::now() + s(5);
        let mut p = Pacer::with(t0, Duration::ZERO, Duration::ZERO);
        assert_eq!(p.due(t0 - s(3)), Some(0));
        assert_eq!(p.due(t0), None);
        assert_eq!(p.due(t0 + s(1)), Some(1));
        assert_eq!(p.started(), t0);
    }

    #[test]
    fn the_line_names_what_how_long_and_what_was_seen() {
        let w = Waiting::new(
            "waiting for readiness at http://127.0.0.1:8080/health",
            12,
            Some("last: connection refused; 40 probes, 40 refused"),
        );
        assert_eq!(
            w.to_string(),
            "waiting for readiness at http://127.0.0.1:8080/health: 12 s (last: connection refused; 40 probes, 40 refused)"
        );
        assert_eq!(
            Waiting::new("setup: x", 2, Some("  ")).to_string(),
            "setup: x: 2 s"
        );
        assert_eq!(Waiting::new("setup: x", 2, None).detail, None);
        assert!(Waiting::new("setup: x", 2, None).terse());
        let request = |secs| Waiting::new("waiting for request 03's reply", secs, None);
        assert!(!request(2).terse_from(REQUEST_TERSE_S).terse());
        assert!(request(12).terse_from(REQUEST_TERSE_S).terse());
    }

    #[test]
    fn a_detail_is_one_line_cut_to_its_budget() {
        let long = "x".repeat(500);
        let w = Waiting::new("w", 3, Some(&format!("{long}\nsecond line")));
        let d = w.detail.unwrap();
        assert_eq!(d.chars().count(), DETAIL_MAX + 3);
        assert!(d.ends_with("...") && !d.contains('\n'));
        assert_eq!(last_line("a\nb \n\n  \n"), Some("b"));
        assert_eq!(last_line("\n \n"), None);
        assert_eq!(last_line(""), None);
    }
}
