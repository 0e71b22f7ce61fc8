//! Figure assertions (`rate`, `first_token`, `tpot`): the median of one metric's per-request values against
//! the gate's floor or limit, every planned value accounted for.

use crate::analysis::measure::{self, TokenSource};
use crate::analysis::stats;
use crate::spec::{GateSpec, RateSource};
use crate::vocab::{AssertionKind, Bound, Metric, NoteKind};

use super::accounting::{no_replies, request_failure, Accounting, Judged};
use super::verdict::{Outcome, Verdict};

/// The bound the gate declares for a figure assertion (whatever the evidence held: a verdict failed for want
/// of evidence still carries it), or None for the assertions without one.
pub fn declared_bound(gate: &GateSpec, kind: AssertionKind) -> Option<Bound> {
    let a = &gate.assertions;
    match kind {
        AssertionKind::Rate => a.rate.as_ref().map(|r| {
            let metric = match r.source {
                RateSource::Client | RateSource::Both => Metric::DecodeRate,
                RateSource::Server => Metric::ServerDecodeRate,
            };
            Bound::for_metric(metric, r.floor_tok_s)
        }),
        AssertionKind::FirstToken => a
            .first_token
            .as_ref()
            .map(|f| Bound::for_metric(Metric::Ttft, f.limit_ms)),
        AssertionKind::Tpot => a
            .tpot
            .as_ref()
            .map(|t| Bound::for_metric(Metric::Tpot, t.limit_ms)),
        AssertionKind::Ready => a
            .ready
            .as_ref()
            .map(|r| Bound::for_metric(Metric::ReadyMs, r.limit_ms)),
        AssertionKind::Memory => a
            .memory
            .as_ref()
            .map(|m| Bound::for_metric(Metric::ServeRssPeak, m.limit_mib)),
        AssertionKind::Cpu => a
            .cpu
            .as_ref()
            .map(|c| Bound::for_metric(Metric::ServeCpuPerToken, c.limit_ms_per_token)),
        AssertionKind::Route
        | AssertionKind::Content
        | AssertionKind::KnownAnswer
        | AssertionKind::Ratio
        | AssertionKind::FirstTokenRatio
        | AssertionKind::SameAnswers
        | AssertionKind::Drift
        | AssertionKind::Load
        | AssertionKind::Regression
        | AssertionKind::Sample
        | AssertionKind::Contract => None,
    }
}

/// Why a request has no value for a timing assertion: its failure first, then the measurement's note.
/// `decode`: the value is a decode rate, whose measurement says why it is missing (`decode_note`).
pub(super) fn why_missing(j: &Judged, what: &str, decode: bool) -> String {
    if let Some(f) = request_failure(j.ev) {
        return f.to_string();
    }
    if let Some(n) = j.fig.decode_note.as_ref().filter(|_| decode) {
        return n.clone();
    }
    format!("no {what} in the reply")
}

/// Fewest measured replies, as a share of the planned timed ones, a figure assertion judges a median over:
/// one half. A reply not measured because of how it was delivered (its cause stated: a window under the
/// minimum, a burst, a first token read late with later ones) is not a slow reply, but it is no evidence
/// either: with fewer than half of the planned replies measured, the median of the measured is not the run's
/// median (the unmeasured could all lie on one side of it), and the verdict is INDETERMINATE, never a pass
/// and never a fail.
pub const MIN_MEASURED_SHARE: f64 = 0.5;

/// A figure a reply is judged on when the client's own figure is missing (the serve's, under `source = "both"`).
pub(super) type FallbackFigure<'a> = &'a dyn Fn(&Judged) -> Option<f64>;

/// Per-request values of a figure assertion: the sent timed judged requests' values (a failed request's is
/// None), the missing ones named with their reasons (they fail), the ones not measured because of delivery
/// (they do not), the ones judged on the serve's figure instead of the client's, and the plan.
pub(super) struct FigureValues {
    /// One per sent timed judged request, in send order.
    pub(super) values: Vec<Option<f64>>,
    /// `request 02 (reason)` for each sent request without a value that fails the assertion.
    pub(super) missing: Vec<String>,
    /// `request 03 (cause)` for each request not measured because of how its reply was delivered.
    pub(super) unmeasured: Vec<String>,
    /// `request 03 (cause)` for each request the client could not time, judged on the serve's figure.
    pub(super) on_serve: Vec<String>,
    /// Per entry of `values` (pushed with it, so always as long): true when it is the serve's figure standing
    /// in for the client's.
    pub(super) served: Vec<bool>,
    /// Planned timed judged requests.
    pub(super) planned: usize,
    /// Planned judged requests to untimed prompts (asked for their answer only).
    pub(super) untimed: usize,
    /// Planned timed requests never sent.
    pub(super) never_sent: usize,
}

/// The judged requests whose replies are timed (their prompt is not one of `[request] untimed`).
pub(super) fn timed<'b, 'a>(gate: &GateSpec, judged: &'b [Judged<'a>]) -> Vec<&'b Judged<'a>> {
    judged
        .iter()
        .filter(|j| gate.request.timed(&j.ev.record.prompt))
        .collect()
}

/// The request's cause for having no value because of delivery, when `value` is None: `cause(j)`.
pub(super) type Cause<'f> = &'f dyn Fn(&Judged) -> Option<String>;

impl FigureValues {
    /// Values of `judged` (the timed requests) by `value`; a request without one is not measured when
    /// `cause` names a delivery cause (then judged on `fallback`, the serve's figure, when it has one),
    /// else missing with `why`.
    pub(super) fn of<'x, 'a: 'x>(
        judged: impl IntoIterator<Item = &'x Judged<'a>>,
        value: impl Fn(&Judged) -> Option<f64>,
        why: impl Fn(&Judged) -> String,
        cause: Cause,
        fallback: Option<FallbackFigure<'_>>,
    ) -> FigureValues {
        let mut fv = FigureValues {
            values: Vec::new(),
            missing: Vec::new(),
            unmeasured: Vec::new(),
            on_serve: Vec::new(),
            served: Vec::new(),
            planned: 0,
            untimed: 0,
            never_sent: 0,
        };
        for j in judged {
            let failed = request_failure(j.ev).is_some();
            let mut v = if failed { None } else { value(j) };
            let mut served = false;
            if v.is_none() {
                let label = format!("request {:02}", j.ev.record.index);
                match cause(j).filter(|_| !failed) {
                    Some(c) => match fallback.and_then(|f| f(j)) {
                        Some(s) => {
                            v = Some(s);
                            served = true;
                            fv.on_serve.push(format!("{label} ({c})"));
                        }
                        None => fv.unmeasured.push(format!("{label} ({c})")),
                    },
                    None => fv.missing.push(format!("{label} ({})", why(j))),
                }
            }
            fv.values.push(v);
            fv.served.push(served);
        }
        fv.planned = fv.values.len();
        fv
    }

    /// Sets the plan from the run's accounting: every planned judged request, less those to untimed
    /// prompts (`gate` None: every prompt is timed).
    pub(super) fn planned_from(
        mut self,
        gate: Option<&GateSpec>,
        acct: &Accounting,
    ) -> FigureValues {
        let (planned, never_sent) = match gate {
            Some(g) if !g.request.untimed.is_empty() => {
                let prompts = &g.request.prompts;
                let timed_planned = acct.planned_for(prompts, |p| g.request.timed(p));
                let never = acct
                    .never_sent
                    .iter()
                    .filter(|i| {
                        let pos = i.saturating_sub(acct.warmup);
                        g.request.timed(&prompts[pos % prompts.len()])
                    })
                    .count();
                (timed_planned, never)
            }
            _ => (acct.planned, acct.never_sent.len()),
        };
        self.untimed = acct.planned.saturating_sub(planned);
        self.planned = planned;
        self.never_sent = never_sent;
        self
    }

    /// The values with a None for each planned timed request never sent: one per planned timed request.
    pub(super) fn planned_values(&self) -> Vec<Option<f64>> {
        let mut v = self.values.clone();
        v.extend((0..self.never_sent).map(|_| None));
        v
    }

    pub(super) fn present(&self) -> Vec<f64> {
        self.values.iter().flatten().copied().collect()
    }

    /// Values that count: present values; measured means judged on a figure (the client's or the serve's).
    pub(super) fn measured(&self) -> usize {
        self.values.iter().flatten().count()
    }

    /// True when too few planned timed replies were measured for a median ([`MIN_MEASURED_SHARE`]): the
    /// replies judged on the serve's figure do not count here, so that a client that could time almost
    /// nothing (a buffering proxy, fake streaming) is never passed on the serve's word alone.
    pub(super) fn too_few_measured(&self) -> bool {
        let m = self.own_measured();
        m == 0 || (m as f64) < MIN_MEASURED_SHARE * self.planned as f64
    }

    /// The values measured on the assertion's own figure: [`Self::measured`] less those judged on the serve's.
    pub(super) fn own_measured(&self) -> usize {
        self.measured() - self.on_serve.len()
    }

    /// `each: ` of the verdict: the values in send order (`-` none), a serve's figure standing in for the
    /// client's labelled `server 21.0`, so the client's line never shows the serve's values as its own.
    pub(super) fn each(&self, decimals: usize) -> String {
        self.values
            .iter()
            .zip(&self.served)
            .map(|(v, served)| match v {
                Some(x) if *served => format!("server {x:.decimals$}"),
                Some(x) => format!("{x:.decimals$}"),
                None => "-".into(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `n=K of N planned` (no sent reply left unmeasured for a delivery cause), or `n=K of M measured` when
    /// some were; K counts only the replies that gave a value of the assertion's own figure (a failed reply,
    /// missing its value, is not in it, nor one judged on the serve's figure); then the untimed prompts'
    /// count, the replies judged on the serve's figure and those not measured, with their causes (the first
    /// three, and how many more).
    pub(super) fn n_text(&self) -> String {
        let sent = self.values.len();
        let mut s = if self.unmeasured.is_empty() {
            format!("n={} of {} planned", self.own_measured(), self.planned)
        } else if sent == self.planned {
            format!("n={} of {sent} measured", self.own_measured())
        } else {
            format!(
                "n={} of {sent} measured, {} planned",
                self.own_measured(),
                self.planned
            )
        };
        if self.untimed > 0 {
            s.push_str(&format!("; {} untimed (answer only)", self.untimed));
        }
        if !self.on_serve.is_empty() {
            s.push_str(&format!(
                "; on the serve's figure (the client could not time it): {}",
                listed(&self.on_serve)
            ));
        }
        if !self.unmeasured.is_empty() {
            s.push_str(&format!("; not measured: {}", listed(&self.unmeasured)));
        }
        s
    }

    /// `K of N replies have no <what>: ...; M planned requests never sent: ...`, or None when every planned
    /// request has a value or is not measured for a delivery cause.
    pub(super) fn failure_head(&self, what: &str, acct: &Accounting) -> Option<String> {
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!(
                "{} of {} replies have no {what}: {}",
                self.missing.len(),
                self.values.len(),
                self.missing.join("; ")
            ));
        }
        parts.extend(acct.unsent());
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// The first three items and how many more: `a; b; c; and 4 more`.
pub(super) fn listed(items: &[String]) -> String {
    let mut s = items.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    if items.len() > 3 {
        s.push_str(&format!("; and {} more", items.len() - 3));
    }
    s
}

/// The delivery cause of a missing value of metric `m` ([`measure::unmeasured_cause`]).
pub(super) fn cause_of(m: Metric) -> impl Fn(&Judged) -> Option<String> {
    move |j: &Judged| measure::unmeasured_cause(&j.fig, m).map(str::to_string)
}

/// `[assert.rate]`: the median decode rate at least the floor. With `source = "both"` the client's and the
/// serve's figures are each judged against the floor ([`judge_rate_of`]) and their medians must agree within
/// `agree_pct` of the serve's: `client median 45.0 tok/s (...); server median 44.0 tok/s server-reported
/// (...); client and server 2% apart (agree within 20%)`. The verdict's values, median and bound are the
/// client's.
pub(super) fn judge_rate(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    let rate = gate.assertions.rate.as_ref().expect("rate declared");
    if judged.is_empty() {
        return no_replies(AssertionKind::Rate, acct);
    }
    if rate.source != RateSource::Both {
        return judge_rate_of(gate, rate.source, judged, acct);
    }
    let client = judge_rate_of(gate, RateSource::Client, judged, acct);
    let mut server = judge_rate_of(gate, RateSource::Server, judged, acct);
    // No per-reply timings, but the serve's inter-token-latency histogram (vLLM): its run figure.
    let mut histogram = false;
    if server.values.iter().all(Option::is_none) {
        if let Some(v) = crate::judge::serve_clock::rate_from_histograms(rate.floor_tok_s, acct) {
            server = v;
            histogram = true;
        }
    }
    // Agreement compares the client's own measurements with the serve's (the replies judged on the serve's
    // figure would agree by construction), like with like: per-reply medians with per-reply medians; against
    // a histogram's `1 / mean` ITL over every token, the client's own `1 / mean` over its replies' tokens
    // ([`pooled_rate`]), not its median (a skewed spread of replies parts a median from a mean).
    let own: Vec<(f64, f64)> = timed(gate, judged)
        .iter()
        .filter(|j| request_failure(j.ev).is_none())
        .filter_map(|j| {
            let n = j
                .fig
                .completion_tokens
                .or(j.fig.completion_tokens_estimate)
                .filter(|&n| n > 1)
                .map_or(1.0, |n| (n - 1) as f64);
            j.fig.decode_tok_s.map(|r| (r, n))
        })
        .collect();
    let client_figure = if histogram {
        pooled_rate(&own)
    } else {
        stats::median(&own.iter().map(|(r, _)| *r).collect::<Vec<_>>())
    };
    let agree = match (client_figure, server.median) {
        (Some(c), Some(s)) if s > 0.0 => {
            let apart = (c - s).abs() / s * 100.0;
            let ok = apart <= rate.agree_pct;
            let compared = if histogram {
                format!(
                    " (means: the client's 1 / mean gap over its replies' tokens {c:.2} tok/s, the serve's {s:.2})"
                )
            } else {
                String::new()
            };
            let text = if ok {
                format!(
                    "client and server {apart:.0}% apart{compared} (agree within {:.0}%)",
                    rate.agree_pct
                )
            } else {
                format!(
                    "{}: client and server {apart:.0}% apart{compared} (more than {:.0}%: a client-bound measurement, a buffering proxy or fake streaming)",
                    NoteKind::ClientServerDisagree.name(),
                    rate.agree_pct
                )
            };
            Some((ok, text))
        }
        _ => None,
    };
    // A fail on either side or a disagreement fails; else an undecided side (too few measured) leaves the
    // rate undecided; both decided and agreeing passes.
    let outcomes = [client.outcome, server.outcome];
    let outcome = if outcomes.contains(&Outcome::Fail) || agree.as_ref().is_some_and(|(ok, _)| !ok)
    {
        Outcome::Fail
    } else if outcomes.contains(&Outcome::Indeterminate) {
        Outcome::Indeterminate
    } else if agree.is_some() {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    // What failed it first: a console line shortened (src/sinks/line.rs) keeps its first part whole.
    let mut parts = vec![
        format!("client {}", client.details),
        format!("server {}", server.details),
    ];
    if server.outcome == Outcome::Fail && client.outcome != Outcome::Fail {
        parts.swap(0, 1);
    }
    match agree {
        Some((false, text)) if outcomes.iter().all(|o| *o != Outcome::Fail) => {
            parts.insert(0, text)
        }
        Some((_, text)) => parts.push(text),
        None => {}
    }
    let mut v = Verdict::new(AssertionKind::Rate, outcome, parts.join("; "));
    v.values = client.values;
    v.median = client.median;
    v.bound = client.bound;
    v
}

/// The rate of a run's replies pooled as a serve's histogram pools them: the total of their decode gaps
/// (tokens after the first, `weight`) over the total of their decode windows, `Σ w / Σ (w / rate)`, i.e.
/// `1 / mean` time per token over every reply's tokens. `own`: `(decode tok/s, tokens after the first)` per
/// reply (weight 1 when the count is unknown). None when empty or not positive.
pub(super) fn pooled_rate(own: &[(f64, f64)]) -> Option<f64> {
    let own = own.iter().filter(|(r, w)| *r > 0.0 && *w > 0.0);
    let tokens: f64 = own.clone().map(|(_, w)| w).sum();
    let secs: f64 = own.map(|(r, w)| w / r).sum();
    (tokens > 0.0 && secs > 0.0).then(|| tokens / secs)
}

/// A passing rate verdict whose median's 95 % lower bound is more than 25 % above the floor says so, with
/// the floor `servegate bless --floor` would derive (`analysis::regress::floor_hint`): `(floor could be 73.8:
/// servegate bless)`. Only with every planned value present; never changes the outcome.
pub(super) fn with_floor_hint(gate: &GateSpec, mut v: Verdict) -> Verdict {
    let Some(rate) = gate.assertions.rate.as_ref() else {
        return v;
    };
    if v.outcome != Outcome::Pass || v.values.iter().any(|x| x.is_none()) {
        return v;
    }
    let values: Vec<f64> = v.values.iter().flatten().copied().collect();
    if let Some(f) = crate::analysis::regress::floor_hint(&values, rate.floor_tok_s) {
        let details = format!("{} (floor could be {f:.1}: servegate bless)", v.details);
        v.set(Outcome::Pass, details);
    }
    v
}

/// The `over_max_tokens` finding of a judged reply as text (`over_max_tokens: 9 token chunks, above
/// max_tokens 8`), when [`max_tokens::over_max_tokens`] flagged it.
pub(super) fn over_max_tokens_note(j: &Judged) -> Option<String> {
    j.fig
        .warnings
        .iter()
        .find(|n| n.kind == NoteKind::OverMaxTokens)
        .map(|n| n.to_string())
}

/// One decode-rate figure (`Client` or `Server`) against the floor: the verdict of `[assert.rate]` with
/// that `source`.
pub(super) fn judge_rate_of(
    gate: &GateSpec,
    source: RateSource,
    judged: &[Judged],
    acct: &Accounting,
) -> Verdict {
    let rate = gate.assertions.rate.as_ref().expect("rate declared");
    let judged = timed(gate, judged);
    // The client side of `source = "both"`: a reply the client could not time but the serve did is judged
    // on the serve's figure, and the line says so.
    let serve_figure = |j: &Judged| j.fig.server_decode_tok_s;
    let fallback: Option<FallbackFigure<'_>> =
        (rate.source == RateSource::Both && source == RateSource::Client).then_some(&serve_figure);
    let client_cause = cause_of(Metric::DecodeRate);
    let no_cause = |_: &Judged| None;
    let fv = FigureValues::of(
        judged.iter().copied(),
        |j| match source {
            RateSource::Client | RateSource::Both => j.fig.decode_tok_s,
            RateSource::Server => j.fig.server_decode_tok_s,
        },
        |j| {
            if source == RateSource::Server && request_failure(j.ev).is_none() {
                j.serve_log_why
                    .clone()
                    .unwrap_or_else(|| "no llama.cpp timings in the reply".to_string())
            } else {
                why_missing(j, "rate", true)
            }
        },
        if source == RateSource::Server {
            &no_cause
        } else {
            &client_cause
        },
        fallback,
    )
    .planned_from(Some(gate), acct);
    let label = match (source, &rate.server_log) {
        (RateSource::Client | RateSource::Both, _) => String::new(),
        (RateSource::Server, None) => " server-reported (timings.predicted_per_second)".to_string(),
        (RateSource::Server, Some(re)) => format!(" server-reported (serve.log /{}/)", re.as_str()),
    };
    let n = fv.values.len();
    let mut notes = Vec::new();
    let implausible_tokens =
        |j: &Judged| crate::vocab::has_note(&j.fig.warnings, NoteKind::ImplausibleCompletionTokens);
    // Notes describe the replies that were measured: a failed reply has no figure to describe.
    let measured: Vec<&Judged> = judged
        .iter()
        .copied()
        .filter(|j| request_failure(j.ev).is_none())
        .collect();
    let estimates = measured
        .iter()
        .filter(|j| {
            j.fig.completion_tokens_source == Some(TokenSource::TokenChunkCountEstimate)
                && !implausible_tokens(j)
        })
        .count();
    if source == RateSource::Client && estimates > 0 {
        notes.push(format!(
            "{estimates} of {n} estimated from the token-chunk count (the serve reported no usage)"
        ));
    }
    let multi = measured.iter().filter(|j| j.fig.multi_token).count();
    if source == RateSource::Client && multi > 0 {
        notes.push(format!("{multi} of {n} had several tokens per chunk"));
    }
    let over: Vec<String> = measured
        .iter()
        .filter_map(|j| over_max_tokens_note(j))
        .collect();
    if !over.is_empty() {
        notes.push(format!(
            "{} of {n} over max_tokens {} ({}: the serve ignored the limit or miscounts; the rate times what was streamed)",
            over.len(),
            gate.request.max_tokens,
            over.join("; ")
        ));
    }
    let implausible = measured.iter().filter(|j| implausible_tokens(j)).count();
    if source == RateSource::Client && implausible > 0 {
        notes.push(format!(
            "{implausible} of {n} reported more completion tokens than the stream could carry (implausible_completion_tokens: not used; the next count stands in, the token-chunk count at worst)"
        ));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    let what = if label.is_empty() {
        "decode rate".to_string()
    } else {
        format!("{} decode rate", label.trim_start())
    };
    let metric = match source {
        RateSource::Client | RateSource::Both => Metric::DecodeRate,
        RateSource::Server => Metric::ServerDecodeRate,
    };
    judge_figure(
        FigureAssertion {
            kind: AssertionKind::Rate,
            metric,
            bound: Bound::for_metric(metric, rate.floor_tok_s),
            what: &what,
            label: &label,
            notes: &notes,
        },
        &fv,
        acct,
    )
}

/// A figure assertion: the median of one metric's per-request values against a floor or a limit.
pub(super) struct FigureAssertion<'a> {
    /// The assertion.
    pub(super) kind: AssertionKind,
    /// The metric judged: its unit and decimals come from the registry.
    pub(super) metric: Metric,
    /// Floor or limit.
    pub(super) bound: Bound,
    /// The noun in `K of N replies have no <what>`.
    pub(super) what: &'a str,
    /// Said after the unit of the median (`" server-reported (...)"`), or "".
    pub(super) label: &'a str,
    /// `; note; note` after the parenthesis, or "".
    pub(super) notes: &'a str,
}

/// Judges a figure assertion: fails naming every missing value (and the never-sent requests), else compares
/// the median with the bound. `median 47.0 tok/s (floor 15.0; each: ...; n=6 of 6 planned)`.
pub(super) fn judge_figure(fa: FigureAssertion, fv: &FigureValues, acct: &Accounting) -> Verdict {
    let info = fa.metric.info();
    let d = info.decimals;
    let unit = info.unit;
    let word = if fa.bound.at_least { "floor" } else { "limit" };
    let bound = fa.bound.value;
    let notes = fa.notes;
    let median = stats::median(&fv.present());
    let mut v = if let Some(head) = fv.failure_head(fa.what, acct) {
        Verdict::new(
            fa.kind,
            Outcome::Fail,
            format!(
                "{head} ({word} {bound:.d$} {unit}; each: {}; {}){notes}",
                fv.each(d),
                fv.n_text()
            ),
        )
    } else if fv.too_few_measured() {
        Verdict::new(
            fa.kind,
            Outcome::Indeterminate,
            format!(
                "too few replies measured for a median (at least half the {} planned; {word} {bound:.d$} {unit}; each: {}; {}){notes}",
                fv.planned,
                fv.each(d),
                fv.n_text()
            ),
        )
    } else {
        let m = median.unwrap_or(f64::NAN);
        let outcome = if fa.bound.holds(m) {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        Verdict::new(
            fa.kind,
            outcome,
            format!(
                "median {m:.d$} {unit}{} ({word} {bound:.d$}; each: {}; {}){notes}",
                fa.label,
                fv.each(d),
                fv.n_text()
            ),
        )
    };
    v.values = fv.planned_values();
    v.median = median;
    v.bound = Some(fa.bound);
    v
}

pub(super) fn judge_first_token(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    if judged.is_empty() {
        return no_replies(AssertionKind::FirstToken, acct);
    }
    let fv = FigureValues::of(
        timed(gate, judged),
        |j| j.fig.ttft_ms,
        |j| why_missing(j, "token", false),
        &cause_of(Metric::Ttft),
        None,
    )
    .planned_from(Some(gate), acct);
    judge_figure(
        FigureAssertion {
            kind: AssertionKind::FirstToken,
            metric: Metric::Ttft,
            bound: declared_bound(gate, AssertionKind::FirstToken).expect("first_token declared"),
            what: "first token",
            label: "",
            notes: "",
        },
        &fv,
        acct,
    )
}

/// `[assert.tpot]`: the median TPOT (ms) at most the limit; a reply without a TPOT (failed, one token
/// chunk, or the whole reply in one read) is a missing value and fails it, as for `first_token`.
pub(super) fn judge_tpot(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    if judged.is_empty() {
        return no_replies(AssertionKind::Tpot, acct);
    }
    let fv = FigureValues::of(
        timed(gate, judged),
        |j| measure::metric_value(&j.fig, Metric::Tpot),
        |j| why_missing(j, "TPOT", false),
        &cause_of(Metric::Tpot),
        None,
    )
    .planned_from(Some(gate), acct);
    judge_figure(
        FigureAssertion {
            kind: AssertionKind::Tpot,
            metric: Metric::Tpot,
            bound: declared_bound(gate, AssertionKind::Tpot).expect("tpot declared"),
            what: "TPOT",
            label: "",
            notes: "",
        },
        &fv,
        acct,
    )
}

/// The cold first request of the run ([`crate::analysis::cold::cold_first`] over the timed judged requests in
/// send order; a failed reply counts as unmeasured), as its note, or None; None when the serve failed during
/// the run (it exited, or a `url` serve went away: the note's "readiness did not mean ready" would blame
/// readiness for what the failure explains).
pub(super) fn cold_note(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Option<String> {
    if acct.serve_failure.is_some() {
        return None;
    }
    let mut ttfts: Vec<(usize, Option<f64>)> = timed(gate, judged)
        .into_iter()
        .map(|j| {
            let ok = super::accounting::request_failure(j.ev).is_none();
            (j.ev.record.index, j.fig.ttft_ms.filter(|_| ok))
        })
        .collect();
    ttfts.sort_by_key(|(i, _)| *i);
    crate::analysis::cold::cold_first(&ttfts).map(|c| c.note(acct.warmup))
}
