//! The verdict model: an assertion's [`Outcome`] and its [`Verdict`] line.

use serde::{Deserialize, Serialize};

use crate::vocab::{AssertionKind, Bound};

/// The outcome of one assertion: the three honest states (pass, fail, indeterminate) and the three ways a run
/// can be unfit to judge (incomparable with its baseline, not compared because the runner was busy, void
/// because the client fell behind its schedule).
/// Only [`Outcome::Pass`] is a pass, in every output (docs/regression.md, "Three honest states").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The assertion holds on the evidence.
    Pass,
    /// It does not, or the evidence is missing.
    Fail,
    /// The evidence cannot decide: too few samples, a confidence the n cannot reach, an interval that
    /// straddles the bound. The details state the n that would likely decide it. Fails the trial by default
    /// (a gate's `on_indeterminate = "pass"` lets it through, still shown as INDETERMINATE).
    Indeterminate,
    /// The baseline no longer applies: what the gate fixes or the machine differs from the baseline's
    /// (model sha256, prompts, max_tokens, CPU model...). The trial fails (exit 9) with the differing fields
    /// and the bless command that renews it, unless the assertion says `on_incomparable = "skip"`.
    Incomparable,
    /// Not compared (busy runner): a baseline applies, but the runner's host load is outside every applicable
    /// baseline's. Its own state, never a pass and never counted with unprovisioned runtimes: the trial is
    /// skipped with the loads named, or fails under `SERVEGATE_STRICT=1`.
    NotCompared,
    /// The run is void: the client fell behind its schedule, so the figures do not describe the load that
    /// was asked for. Never a pass.
    Void,
    /// A `[contract]` check the serve does not offer (a clean 4xx "not supported" error), when the gate's
    /// `may_lack` lists it: its own state, never a pass; the trial is skipped with the reason. (An expected
    /// check that is unsupported is a [`Outcome::Fail`].)
    Unsupported,
    /// A `[contract]` check that fails as measured, when the gate's `known_fail` lists it: shown as a
    /// failure (`KNOWN-FAIL`), never a pass; the trial is skipped with the reason, so a gate can state what a
    /// runtime breaks without going red on it. (A check `known_fail` lists that passes is a
    /// [`Outcome::Fail`]: the list is stale.)
    KnownFail,
}

impl Outcome {
    /// The word of a verdict line: `PASS`, `FAIL`, `INDETERMINATE`, `INCOMPARABLE`, `NOT-COMPARED`, `VOID`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
            Outcome::Indeterminate => "INDETERMINATE",
            Outcome::Incomparable => "INCOMPARABLE",
            Outcome::NotCompared => "NOT-COMPARED",
            Outcome::Void => "VOID",
            Outcome::Unsupported => "UNSUPPORTED",
            Outcome::KnownFail => "KNOWN-FAIL",
        }
    }

    /// The snake_case name, as results JSON, JUnit properties and exports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Indeterminate => "indeterminate",
            Outcome::Incomparable => "incomparable",
            Outcome::NotCompared => "not_compared",
            Outcome::Void => "void",
            Outcome::Unsupported => "unsupported",
            Outcome::KnownFail => "known_fail",
        }
    }

    /// The outcome a verdict line's word names (the inverse of [`Outcome::word`]).
    pub fn from_word(word: &str) -> Option<Outcome> {
        [
            Outcome::Pass,
            Outcome::Fail,
            Outcome::Indeterminate,
            Outcome::Incomparable,
            Outcome::NotCompared,
            Outcome::Void,
            Outcome::Unsupported,
            Outcome::KnownFail,
        ]
        .into_iter()
        .find(|o| o.word() == word)
    }
}

/// One assertion's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The assertion's wire name (`kind.name()`: `route`, `rate`, `first_token`, ...), as results and trial
    /// names show it.
    pub assertion: String,
    /// The assertion's kind.
    pub kind: AssertionKind,
    /// Pass, fail, indeterminate, incomparable, not compared or void.
    pub outcome: Outcome,
    /// The verdict line: `<assertion> PASS|FAIL|INDETERMINATE|INCOMPARABLE|NOT-COMPARED|VOID|UNSUPPORTED
    /// <details>`. One
    /// line: the details are [`crate::text::shown`] (outside text escaped), so it is printed as it is.
    pub message: String,
    /// The per-request values judged (in the unit of the assertion's metric: tok/s for `rate`, ms for
    /// `first_token` and `tpot`), in send order, one per planned request; None where a request had no value
    /// (it failed, had no measurable figure, or was never sent).
    #[serde(default)]
    pub values: Vec<Option<f64>>,
    /// The statistic compared with the bound (the median), when there is one.
    #[serde(default)]
    pub median: Option<f64>,
    /// The bound a figure assertion compares the median with (value, unit, floor or limit); None for the
    /// assertions on text, logs and pairs.
    #[serde(default)]
    pub bound: Option<Bound>,
    /// The details of the message (what follows `<assertion> PASS|FAIL `), kept as data so nothing strips a
    /// head off the message.
    #[serde(skip)]
    pub(super) details: String,
}

impl Verdict {
    /// A verdict of `kind` with `outcome` and `details`, its message built from them ([`Verdict::set`]).
    pub(super) fn new(kind: AssertionKind, outcome: Outcome, details: impl AsRef<str>) -> Verdict {
        let mut v = Verdict {
            assertion: kind.name().to_string(),
            kind,
            outcome,
            message: String::new(),
            values: Vec::new(),
            median: None,
            bound: None,
            details: details.as_ref().to_string(),
        };
        v.set(outcome, details.as_ref().to_string());
        v
    }

    /// A verdict of `kind` named `name` (not the kind's wire name): a `[contract]` check's
    /// `contract.<check>`.
    pub(super) fn named(
        kind: AssertionKind,
        name: String,
        outcome: Outcome,
        details: impl AsRef<str>,
    ) -> Verdict {
        let mut v = Verdict::new(kind, outcome, "");
        v.assertion = name;
        v.set(outcome, details.as_ref().to_string());
        v
    }

    /// Sets the outcome and the details, and the message from them. The details pass through
    /// [`crate::text::shown`]: whatever a builder quotes (a serve's version, a log line, a reply, an error
    /// body), the verdict line is one line with no control byte and no CI workflow command in it.
    pub(super) fn set(&mut self, outcome: Outcome, details: String) {
        let word = outcome.word();
        let details = crate::text::shown(&details);
        self.outcome = outcome;
        self.message = format!("{} {word} {details}", self.assertion);
        self.details = details;
    }

    /// True when the outcome is Pass.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }

    /// The message without its `<assertion> PASS|FAIL ` head (the part [`Verdict::new`] was given).
    pub fn details(&self) -> &str {
        &self.details
    }
}
