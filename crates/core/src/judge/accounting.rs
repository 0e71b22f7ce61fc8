//! Accounting for every planned request of a run ([`Accounting`]), the judged requests ([`Judged`]) and the
//! verdicts a failed serve or an empty run gives.

use crate::analysis::measure::{self, Figures};
use crate::analysis::{Evidence, RequestEvidence};
use crate::spec::GateSpec;
use crate::vocab::{AssertionKind, Failure, FailureCode, Failures};

use super::verdict::{Outcome, Verdict};

/// A judged request: its evidence and figures.
pub(super) struct Judged<'a> {
    pub(super) ev: &'a RequestEvidence,
    pub(super) fig: Figures,
    /// With `[assert.rate] server_log`: why this request has no serve-log rate (its `server_decode_tok_s`
    /// then comes from the log, [`serve_clock`]), or None.
    pub(super) serve_log_why: Option<String>,
}

pub(super) fn judged_of(evidence: &Evidence) -> Vec<Judged<'_>> {
    evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .map(|ev| Judged {
            ev,
            fig: measure::measure(&ev.reply),
            serve_log_why: None,
        })
        .collect()
}

/// Why one sent request failed on its own terms, or None: [`crate::analysis::reply::Reply::failure`] (a serve
/// error, a cut or timed-out stream, no finish_reason and no `[DONE]`, ...), else the transport error the
/// client saw (`transport: <error>`). A failed request has no value for any figure assertion and fails
/// `content` and `known_answer`.
pub fn request_failure(ev: &RequestEvidence) -> Option<Failures> {
    ev.reply.failure().or_else(|| {
        let e = ev.record.transport_error.as_ref()?;
        Failures::new(vec![Failure {
            code: FailureCode::Transport,
            detail: e.clone(),
        }])
    })
}

/// Where each planned judged request of a run stands: every planned request is accounted for, as sent and
/// answered, sent and failed, or never sent. Pure, from the evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting {
    /// Judged (non-warmup) requests the run planned (`run.json` `planned`; in older evidence without it,
    /// the judged requests recorded).
    pub planned: usize,
    /// Judged requests in the evidence (sent).
    pub sent: usize,
    /// True when `run.json` recorded a plan (`planned` is then the judging gate's, or for [`account`] run.json's).
    pub plan_recorded: bool,
    /// Warmup requests planned (sent first; the judged plan starts at this index).
    pub warmup: usize,
    /// Send-order indices (warmup included, as the `NN.*` files) of planned judged requests never sent.
    pub never_sent: Vec<usize>,
    /// Sent judged requests that failed: (index, [`request_failure`]).
    pub failed: Vec<(usize, Failures)>,
    /// The serve failed during the run (exited, or was found dead): `run.json` `serve.failure`, with the last
    /// lines of its log when known (`serve.exit_log_tail`, else the end of `serve.log`).
    pub serve_failure: Option<String>,
    /// The code of `serve_failure`, when it names a known one.
    pub serve_failure_code: Option<FailureCode>,
    /// The serve's own histograms' deltas over the run (`run.json` `serve.metrics`: vLLM, SGLang, TGI);
    /// empty without.
    pub serve_metrics: Vec<crate::evidence::serve_clock::HistogramDelta>,
    /// The serve's request counters' deltas over the same window (`run.json` `serve.counters`); empty without.
    pub serve_counters: Vec<crate::evidence::serve_clock::CounterDelta>,
    /// Every request the run sent, warmup included (the files `NN.*`): what a serve's request counter over
    /// the run should not exceed.
    pub sent_all: usize,
}

/// What happened to the run, in words, for a serve failure of `code`: the serve failed, crashed when stopped,
/// or the run passed its deadline (`run_timeout_s`; the serve did not fail).
pub(super) fn serve_failure_phrase(code: Option<FailureCode>) -> &'static str {
    match code {
        Some(FailureCode::RunTimeout) => "the run passed its run_timeout_s",
        Some(FailureCode::ServerCrashedAtStop) => "the serve crashed when it was stopped",
        _ => "the serve failed during the run",
    }
}

/// Lines of the serve log quoted when the serve exited during the run.
pub const EXIT_LOG_LINES: usize = 5;

/// Judged (non-warmup) requests one run of `gate` plans: `repeats × prompts`, as the runner sends them
/// (`servegate run` records it as `run.json` `planned`). None for a load gate, whose points each plan their
/// own (`load.json`).
pub fn gate_planned(gate: &GateSpec) -> Option<usize> {
    gate.load
        .is_none()
        .then(|| gate.request.repeats as usize * gate.request.prompts.len())
}

/// Why `evidence` is not a run of `gate`'s plan, or None: its `run.json` `planned` states another number
/// of judged requests than `gate` plans ([`gate_planned`]): the file was edited, or the run is of another
/// gate. Judging takes the plan from the gate judging it, never from the evidence, so such a run fails
/// every assertion with this reason (`n=K of N planned`, N the gate's).
pub fn plan_mismatch(gate: &GateSpec, evidence: &Evidence) -> Option<String> {
    let ours = gate_planned(gate)?;
    let theirs = evidence.run.planned.filter(|p| *p != ours)?;
    let sent = evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .count();
    Some(format!(
        "run.json says the run planned {theirs} judged request{} but the gate plans {ours} ([request] repeats {} x {} prompt{}): the evidence was edited or is a run of another gate; judge a run with the gate it ran (n={sent} of {ours} planned)",
        if theirs == 1 { "" } else { "s" },
        gate.request.repeats,
        gate.request.prompts.len(),
        if gate.request.prompts.len() == 1 { "" } else { "s" },
    ))
}

/// Accounts for every planned request of a run (see [`Accounting`]), the plan taken from `run.json`. Judging
/// calls it once [`plan_mismatch`] has found none, so the plan is then the judging gate's too (a load
/// gate's top-level run keeps `run.json`'s; older evidence without a plan recorded takes its judged
/// requests as the plan).
pub fn account(evidence: &Evidence) -> Accounting {
    let run = &evidence.run;
    let judged: Vec<&RequestEvidence> = evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .collect();
    let sent = judged.len();
    let plan = run.planned;
    let planned = plan.unwrap_or(sent);
    let warm = run
        .planned_warmup
        .unwrap_or_else(|| evidence.requests.iter().filter(|r| r.record.warmup).count());
    // Older evidence (no plan recorded): the sent requests are the plan, none is missing.
    let never_sent: Vec<usize> = if plan.is_some() {
        (warm..warm + planned)
            .filter(|i| !judged.iter().any(|r| r.record.index == *i))
            .collect()
    } else {
        Vec::new()
    };
    let failed = judged
        .iter()
        .filter_map(|r| request_failure(r).map(|f| (r.record.index, f)))
        .collect();
    let serve_failure = match (&run.serve.failure, evidence.requests.is_empty()) {
        (Some(f), false) => {
            let tail = run.serve.exit_log_tail.clone().or_else(|| {
                matches!(
                    FailureCode::of_recorded(f),
                    Some(FailureCode::ServerExitedDuringRun | FailureCode::ServerExitedBeforeReady)
                )
                .then(|| {
                    let log = evidence.serve_log.as_deref()?;
                    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
                    Some(lines[lines.len().saturating_sub(EXIT_LOG_LINES)..].join("\n"))
                })
                .flatten()
            });
            Some(match tail.filter(|t| !t.trim().is_empty()) {
                Some(t) => {
                    let lines: Vec<&str> = t.lines().collect();
                    let last = lines[lines.len().saturating_sub(EXIT_LOG_LINES)..].join("\n");
                    let last: String = last.chars().take(400).collect();
                    format!("{f}; serve.log ends: {last:?}")
                }
                None => f.clone(),
            })
        }
        _ => None,
    };
    Accounting {
        planned,
        sent,
        plan_recorded: plan.is_some(),
        warmup: warm,
        never_sent,
        failed,
        serve_failure_code: serve_failure
            .as_ref()
            .and(run.serve.failure.as_deref())
            .and_then(FailureCode::of_recorded),
        serve_failure,
        serve_metrics: run.serve.metrics.clone(),
        serve_counters: run.serve.counters.clone(),
        sent_all: evidence.requests.len(),
    }
}

impl Accounting {
    /// `n=K of N planned`.
    pub fn n_of(&self, k: usize) -> String {
        format!("n={k} of {} planned", self.planned)
    }

    /// Planned judged requests whose prompt satisfies `keep`, the plan being `repeats` rounds of `prompts`
    /// in order (position `j` asks `prompts[j % prompts.len()]`).
    pub fn planned_for(&self, prompts: &[String], keep: impl Fn(&str) -> bool) -> usize {
        if prompts.is_empty() {
            return self.planned;
        }
        (0..self.planned)
            .filter(|j| keep(&prompts[j % prompts.len()]))
            .count()
    }

    /// True when every planned request was sent and answered without failing, no more were recorded than
    /// planned, and the serve did not fail during the run.
    pub fn whole(&self) -> bool {
        self.never_sent.is_empty()
            && self.failed.is_empty()
            && self.serve_failure.is_none()
            && self.sent <= self.planned
    }

    /// Why the plan was not carried out, or None: requests never sent, more judged requests than planned.
    pub fn unsent(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.never_sent.is_empty() {
            let why = if self.serve_failure.is_some() {
                serve_failure_phrase(self.serve_failure_code)
            } else {
                "the run stopped before sending them"
            };
            parts.push(format!(
                "{} planned request{} never sent: {} ({why})",
                self.never_sent.len(),
                if self.never_sent.len() == 1 { "" } else { "s" },
                ranges(&self.never_sent)
            ));
        }
        if self.sent > self.planned {
            parts.push(format!(
                "the evidence holds {} judged requests, more than the {} planned",
                self.sent, self.planned
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Everything that keeps the run from counting whole, in one line, or None when [`Accounting::whole`].
    pub fn problems(&self) -> Option<String> {
        let mut parts: Vec<String> = self
            .failed
            .iter()
            .map(|(i, f)| format!("request {i:02} failed ({f})"))
            .collect();
        parts.extend(self.unsent());
        if let Some(f) = &self.serve_failure {
            parts.push(format!("serve: {f}"));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// `request 03`, `requests 03-19`, `requests 03, 05-07`.
pub(super) fn ranges(idx: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && idx[j + 1] == idx[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            format!("{:02}", idx[i])
        } else {
            format!("{:02}-{:02}", idx[i], idx[j])
        });
        i = j + 1;
    }
    let word = if idx.len() == 1 {
        "request"
    } else {
        "requests"
    };
    format!("{word} {}", out.join(", "))
}

/// Fails `v` because the serve failed during the run: a failing verdict gets ` [serve: <failure>]`; one
/// that would have passed says so after the serve's failure, never as a pass.
pub(super) fn fail_for_serve(v: &mut Verdict, failure: &str, code: Option<FailureCode>) {
    let details = v.details().to_string();
    let details = if v.passed() {
        let what = serve_failure_phrase(code);
        format!("{what} ({failure}); the replies alone: {details}")
    } else if v.outcome != Outcome::Fail {
        // Undecided on the replies alone (too few timed on a busy runner, say): the serve's failure is what
        // fails it, so it leads.
        let what = serve_failure_phrase(code);
        format!(
            "{what} ({failure}); the replies alone: {} {details}",
            v.outcome.word()
        )
    } else {
        format!("{details} [serve: {failure}]")
    };
    v.set(Outcome::Fail, details);
}

pub(super) fn no_replies(name: AssertionKind, acct: &Accounting) -> Verdict {
    let unsent = acct.unsent().map(|u| format!(": {u}")).unwrap_or_default();
    Verdict::new(
        name,
        Outcome::Fail,
        format!(
            "no replies at all: the run holds no judged request{unsent} ({})",
            acct.n_of(0)
        ),
    )
}
