//! A line of life for a gate that runs long without one: `cargo test --test gates` prints a trial's result only
//! when its gate has run, so a gate of several minutes (an interleaved pair of 40 arms) sat silent for minutes
//! (issue 32: `reference-regression::content ...` for 2 min 51 s). Without `SERVEGATE_VERBOSE` (which prints
//! every step), the harness prints one line on stderr each time [`EVERY`] has passed since the gate started or
//! since its last such line, when the next step arrives: how long, which arm of how many, requests answered.
//! (A single wait that lasts, setup, readiness, a reply, says so itself: `Step::Waiting`, src/io/progress.rs.)
//! Pure: it is fed the runner's steps and the time of each.

use std::time::{Duration, Instant};

use crate::sinks::events::Step;

/// How often a long gate says it is alive (libtest says a test "has been running for over 60 seconds").
pub(crate) const EVERY: Duration = Duration::from_secs(30);

/// The state of one gate's heartbeat.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    gate: String,
    arms: Option<usize>,
    started: Instant,
    last: Instant,
    every: Duration,
    arm: usize,
    answered: u64,
}

impl Heartbeat {
    /// A heartbeat for gate `gate` started at `now`; `arms`: a pair gate's number of arms.
    pub(crate) fn new(gate: &str, arms: Option<usize>, now: Instant, every: Duration) -> Heartbeat {
        Heartbeat {
            gate: gate.to_string(),
            arms,
            started: now,
            last: now,
            every,
            arm: 0,
            answered: 0,
        }
    }

    /// Takes one step seen at `now`; returns the line to print when `every` has passed since the last one.
    pub(crate) fn step(&mut self, step: &Step, now: Instant) -> Option<String> {
        self.count(step);
        if now.duration_since(self.last) < self.every {
            return None;
        }
        self.last = now;
        let secs = now.duration_since(self.started).as_secs();
        let arm = match self.arms {
            Some(n) if self.arm > 0 => format!("arm {} of {n}, ", self.arm),
            _ => String::new(),
        };
        Some(format!(
            "servegate: {} still running after {secs} s ({arm}{} request{} answered; SERVEGATE_VERBOSE=1 shows each step)",
            self.gate,
            self.answered,
            if self.answered == 1 { "" } else { "s" }
        ))
    }

    fn count(&mut self, step: &Step) {
        match step {
            Step::RequestAnswered { .. } => self.answered += 1,
            Step::ArmStarted { .. } => self.arm += 1,
            Step::Arm { step, .. } => self.count(step),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered() -> Step {
        Step::RequestAnswered {
            index: 0,
            warmup: false,
            status: "HTTP 200".into(),
            ttft_ms: Some(10.0),
            decode_tok_s: Some(50.0),
            completion_tokens: Some(8),
        }
    }

    #[test]
    fn a_long_gate_says_it_is_alive_every_period_and_a_short_one_never() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut hb = Heartbeat::new("reference-smoke", None, t0, EVERY);
        assert_eq!(hb.step(&answered(), t0 + s(5)), None);
        assert_eq!(hb.step(&answered(), t0 + s(29)), None);
        assert_eq!(
            hb.step(&answered(), t0 + s(31)).as_deref(),
            Some("servegate: reference-smoke still running after 31 s (3 requests answered; SERVEGATE_VERBOSE=1 shows each step)")
        );
        // The next line comes a period after the last one, not after the start.
        assert_eq!(hb.step(&answered(), t0 + s(45)), None);
        assert!(hb
            .step(&answered(), t0 + s(62))
            .unwrap()
            .contains("after 62 s (5 requests"));
    }

    #[test]
    fn a_pair_gate_names_its_arm_of_how_many() {
        let t0 = Instant::now();
        let mut hb = Heartbeat::new("reference-regression", Some(40), t0, EVERY);
        for arm in 1..=3 {
            let name = format!("arm{arm}-ours");
            hb.step(
                &Step::ArmStarted {
                    arm: name.clone(),
                    runtime: "r".into(),
                },
                t0,
            );
            hb.step(
                &Step::Arm {
                    arm: name,
                    step: Box::new(answered()),
                },
                t0,
            );
        }
        let line = hb
            .step(&Step::Note("n".into()), t0 + Duration::from_secs(40))
            .unwrap();
        assert!(
            line.contains("(arm 3 of 40, 3 requests answered;"),
            "{line}"
        );
    }
}
