//! Judging: a pure function of (gate spec, evidence) to verdicts, one per declared assertion. It reads no file,
//! starts nothing and keeps no clock, so any recorded run can be re-judged anywhere (`servegate judge`).
//!
//! Verdict messages show every value and n: `rate FAIL median 50.0 tok/s (floor 60.0; each: 53.3, 46.4,
//! 50.0; n=3)`. Medians, never means (`stats::median`). Nothing passes without evidence: a log that names no
//! route fails, a reply without timings fails the rate, no replies at all fail everything.

use serde::{Deserialize, Serialize};

use crate::evidence::{Evidence, RequestEvidence, RunStatus};
use crate::measure::{self, Figures, TokenSource};
use crate::spec::{GateSpec, RateSource};
use crate::stats;

/// The outcome of one assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The assertion holds on the evidence.
    Pass,
    /// It does not, or the evidence is missing.
    Fail,
}

/// One assertion's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The assertion's name (`route`, `rate`, `first_token`, `content`, `known_answer`).
    pub assertion: String,
    /// Pass or fail.
    pub outcome: Outcome,
    /// The verdict line: `<assertion> PASS|FAIL <details>`.
    pub message: String,
    /// The per-request values judged (tok/s for `rate`, ms for `first_token`), in send order; None where a
    /// request had no value.
    #[serde(default)]
    pub values: Vec<Option<f64>>,
    /// The statistic compared with the bound (the median), when there is one.
    #[serde(default)]
    pub median: Option<f64>,
}

impl Verdict {
    fn new(assertion: &str, outcome: Outcome, details: impl AsRef<str>) -> Verdict {
        let word = match outcome {
            Outcome::Pass => "PASS",
            Outcome::Fail => "FAIL",
        };
        Verdict {
            assertion: assertion.to_string(),
            outcome,
            message: format!("{assertion} {word} {}", details.as_ref()),
            values: Vec::new(),
            median: None,
        }
    }

    /// True when the outcome is Pass.
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }

    /// The message without its `<assertion> PASS|FAIL ` head (the part [`Verdict::new`] was given).
    pub fn details(&self) -> &str {
        let word = if self.passed() { "PASS" } else { "FAIL" };
        let head = format!("{} {word} ", self.assertion);
        self.message
            .strip_prefix(head.as_str())
            .unwrap_or(&self.message)
    }
}

/// A judged request: its evidence and figures.
struct Judged<'a> {
    ev: &'a RequestEvidence,
    fig: Figures,
}

/// Judges every declared assertion of `gate` on `evidence`, in the order of `Assertions::names`.
pub fn judge(gate: &GateSpec, evidence: &Evidence) -> Vec<Verdict> {
    let names = gate.assertions.names();
    // Whole-run failures: every assertion fails with the same reason.
    let run_failure = if evidence.run.status != RunStatus::Complete {
        Some(format!(
            "the evidence is incomplete (run.json status is `{}`: {})",
            evidence.run.status.name(),
            evidence.run.status.why_incomplete()
        ))
    } else if let (Some(f), true) = (&evidence.run.serve.failure, evidence.requests.is_empty()) {
        Some(format!("the serve never became ready: {f}"))
    } else {
        None
    };
    if let Some(reason) = run_failure {
        return names
            .iter()
            .map(|n| Verdict::new(n, Outcome::Fail, &reason))
            .collect();
    }
    let judged: Vec<Judged> = evidence
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .map(|ev| Judged {
            ev,
            fig: measure::measure(&ev.reply),
        })
        .collect();
    let during_run = evidence.run.serve.failure.as_deref();
    let mut out = Vec::new();
    for name in names {
        let mut v = match name {
            "route" => judge_route(gate, evidence),
            "rate" => judge_rate(gate, &judged),
            "first_token" => judge_first_token(gate, &judged),
            "content" => judge_content(&judged),
            "known_answer" => judge_known_answer(gate, &judged),
            _ => unreachable!("names() only returns known assertions"),
        };
        if v.outcome == Outcome::Fail && name != "route" {
            if let Some(f) = during_run {
                v.message.push_str(&format!(" [serve: {f}]"));
            }
        }
        out.push(v);
    }
    out
}

fn no_replies(name: &str) -> Verdict {
    Verdict::new(
        name,
        Outcome::Fail,
        "no replies at all: the run holds no judged request (n=0)",
    )
}

/// Formats values with `decimals` places, `-` for a missing one.
fn each(values: &[Option<f64>], decimals: usize) -> String {
    values
        .iter()
        .map(|v| {
            v.map(|x| format!("{x:.decimals$}"))
                .unwrap_or_else(|| "-".into())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn judge_route(gate: &GateSpec, evidence: &Evidence) -> Verdict {
    let route = gate.assertions.route.as_ref().expect("route declared");
    let Some(log) = &evidence.serve_log else {
        return Verdict::new("route", Outcome::Fail, "no serve log in the evidence: the route cannot be proven (for a `url` serve, set serve.log_file)");
    };
    let find = |re: &regex::Regex| -> Option<(usize, String)> {
        log.lines()
            .enumerate()
            .find(|(_, l)| re.is_match(l))
            .map(|(i, l)| (i + 1, l.trim().chars().take(160).collect()))
    };
    let fast = find(&route.fast);
    let slow = route
        .slow
        .as_ref()
        .and_then(|re| find(re).map(|hit| (re.as_str().to_string(), hit)));
    let lines = log.lines().count();
    match (fast, slow) {
        (Some((fl, ft)), None) => {
            let slow_note = route.slow.as_ref().map(|s| format!("; slow /{}/ absent", s.as_str())).unwrap_or_default();
            Verdict::new("route", Outcome::Pass, format!("fast route: serve.log line {fl} matches /{}/: {ft:?}{slow_note}", route.fast.as_str()))
        }
        (Some((fl, _)), Some((sre, (sl, st)))) => Verdict::new(
            "route",
            Outcome::Fail,
            format!("both routes named, which counts as the slow route: fast /{}/ at serve.log line {fl}, slow /{sre}/ at line {sl}: {st:?}", route.fast.as_str()),
        ),
        (None, Some((sre, (sl, st)))) => Verdict::new("route", Outcome::Fail, format!("slow route: serve.log line {sl} matches /{sre}/: {st:?}; fast /{}/ never appears", route.fast.as_str())),
        (None, None) => Verdict::new(
            "route",
            Outcome::Fail,
            format!("the serve log never says /{}/ ({lines} lines searched): the evidence of the route has to be there", route.fast.as_str()),
        ),
    }
}

/// Why a request has no value for a timing assertion.
fn why_missing(j: &Judged, what: &str) -> String {
    if let Some(e) = &j.ev.reply.error {
        return format!("{}: {}", e.kind, e.message);
    }
    if let Some(n) = &j.fig.decode_note {
        if what == "rate" {
            return n.clone();
        }
    }
    format!("no {what} in the reply")
}

fn judge_rate(gate: &GateSpec, judged: &[Judged]) -> Verdict {
    let rate = gate.assertions.rate.as_ref().expect("rate declared");
    if judged.is_empty() {
        return no_replies("rate");
    }
    let values: Vec<Option<f64>> = judged
        .iter()
        .map(|j| match rate.source {
            RateSource::Client => j.fig.decode_tok_s,
            RateSource::Server => j.fig.server_decode_tok_s,
        })
        .collect();
    let source = match rate.source {
        RateSource::Client => "",
        RateSource::Server => " server-reported (timings.predicted_per_second)",
    };
    let n = values.len();
    let mut notes = Vec::new();
    let estimates = judged
        .iter()
        .filter(|j| j.fig.completion_tokens_source == Some(TokenSource::TokenChunkCountEstimate))
        .count();
    if rate.source == RateSource::Client && estimates > 0 {
        notes.push(format!(
            "{estimates} of {n} estimated from the token-chunk count (the serve reported no usage)"
        ));
    }
    let multi = judged.iter().filter(|j| j.fig.multi_token).count();
    if rate.source == RateSource::Client && multi > 0 {
        notes.push(format!("{multi} of {n} had several tokens per chunk"));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    let missing: Vec<String> = judged
        .iter()
        .zip(&values)
        .filter(|(_, v)| v.is_none())
        .map(|(j, _)| {
            format!(
                "request {:02} ({})",
                j.ev.record.index,
                if rate.source == RateSource::Server {
                    "no llama.cpp timings in the reply".to_string()
                } else {
                    why_missing(j, "rate")
                }
            )
        })
        .collect();
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let median = stats::median(&present);
    let mut v = if !missing.is_empty() {
        Verdict::new(
            "rate",
            Outcome::Fail,
            format!(
                "{} of {n} replies have no{source} decode rate: {} (floor {:.1} tok/s; each: {}; n={n}){notes}",
                missing.len(),
                missing.join("; "),
                rate.floor_tok_s,
                each(&values, 1)
            ),
        )
    } else {
        let m = median.unwrap_or(f64::NAN);
        let outcome = if m >= rate.floor_tok_s {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        Verdict::new(
            "rate",
            outcome,
            format!(
                "median {m:.1} tok/s{source} (floor {:.1}; each: {}; n={n}){notes}",
                rate.floor_tok_s,
                each(&values, 1)
            ),
        )
    };
    v.values = values;
    v.median = median;
    v
}

fn judge_first_token(gate: &GateSpec, judged: &[Judged]) -> Verdict {
    let ft = gate
        .assertions
        .first_token
        .as_ref()
        .expect("first_token declared");
    if judged.is_empty() {
        return no_replies("first_token");
    }
    let values: Vec<Option<f64>> = judged.iter().map(|j| j.fig.ttft_ms).collect();
    let n = values.len();
    let missing: Vec<String> = judged
        .iter()
        .filter(|j| j.fig.ttft_ms.is_none())
        .map(|j| {
            format!(
                "request {:02} ({})",
                j.ev.record.index,
                why_missing(j, "token")
            )
        })
        .collect();
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let median = stats::median(&present);
    let mut v = if !missing.is_empty() {
        Verdict::new(
            "first_token",
            Outcome::Fail,
            format!(
                "{} of {n} replies have no first token: {} (limit {:.0} ms; each: {}; n={n})",
                missing.len(),
                missing.join("; "),
                ft.limit_ms,
                each(&values, 0)
            ),
        )
    } else {
        let m = median.unwrap_or(f64::NAN);
        let outcome = if m <= ft.limit_ms {
            Outcome::Pass
        } else {
            Outcome::Fail
        };
        Verdict::new(
            "first_token",
            outcome,
            format!(
                "median {m:.0} ms (limit {:.0}; each: {}; n={n})",
                ft.limit_ms,
                each(&values, 0)
            ),
        )
    };
    v.values = values;
    v.median = median;
    v
}

/// Why one reply fails the content check, or None when its content is sane.
pub fn content_problem(reply: &crate::reply::Reply, fig: &Figures) -> Option<String> {
    if let Some(f) = reply.failure() {
        let what = if reply.error.is_some() {
            "error reply"
        } else {
            "failed reply"
        };
        let partial = if reply.content.is_empty() {
            String::new()
        } else {
            // Cut: a hostile serve's partial content can be megabytes, and this goes into one verdict line.
            let n = reply.content.chars().count();
            let head: String = reply.content.chars().take(80).collect();
            if n > 80 {
                format!("; partial content {head:?}… ({n} chars)")
            } else {
                format!("; partial content {head:?}")
            }
        };
        return Some(format!("{what}: {f}{partial}"));
    }
    let finish = reply.finish_reason.as_deref().unwrap_or("none");
    if reply.content.trim().is_empty() {
        if let Some(why) = crate::content::reasoning_ate_budget(
            &reply.content,
            &reply.reasoning,
            fig.completion_tokens,
            reply.finish_reason.as_deref(),
        ) {
            return Some(format!("{why} (is thinking left on?)"));
        }
        if reply.content.is_empty() {
            return Some(format!("empty content (finish_reason={finish})"));
        }
        return Some(format!(
            "whitespace-only content {:?} (finish_reason={finish})",
            reply.content
        ));
    }
    if let Some(reason) = crate::content::degenerate(&reply.content) {
        let tail = if finish == "length" {
            " + ran to max_tokens – possible NaN logits"
        } else {
            ""
        };
        return Some(format!("{reason}{tail}"));
    }
    None
}

fn judge_content(judged: &[Judged]) -> Verdict {
    if judged.is_empty() {
        return no_replies("content");
    }
    let n = judged.len();
    let problems: Vec<String> = judged
        .iter()
        .filter_map(|j| {
            content_problem(&j.ev.reply, &j.fig)
                .map(|p| format!("request {:02}: {p}", j.ev.record.index))
        })
        .collect();
    if problems.is_empty() {
        let lens: Vec<String> = judged
            .iter()
            .map(|j| j.ev.reply.content.chars().count().to_string())
            .collect();
        Verdict::new(
            "content",
            Outcome::Pass,
            format!(
                "{n} of {n} replies have sane content (chars each: {}; n={n})",
                lens.join(", ")
            ),
        )
    } else {
        Verdict::new(
            "content",
            Outcome::Fail,
            format!(
                "{} of {n} replies fail: {} (n={n})",
                problems.len(),
                problems.join("; ")
            ),
        )
    }
}

fn judge_known_answer(gate: &GateSpec, judged: &[Judged]) -> Verdict {
    let ka = gate
        .assertions
        .known_answer
        .as_ref()
        .expect("known_answer declared");
    let selected: Vec<&Judged> = judged
        .iter()
        .filter(|j| ka.prompt.as_ref().is_none_or(|p| &j.ev.record.prompt == p))
        .collect();
    if selected.is_empty() {
        return no_replies("known_answer");
    }
    let n = selected.len();
    let short = |s: &str| -> String {
        let t: String = s.chars().take(80).collect();
        if s.chars().count() > 80 {
            format!("{t:?}…")
        } else {
            format!("{t:?}")
        }
    };
    let mut problems = Vec::new();
    for j in &selected {
        if let Some(e) = &j.ev.reply.error {
            problems.push(format!(
                "request {:02}: error reply: {}: {}",
                j.ev.record.index, e.kind, e.message
            ));
        } else if !ka.matches.is_match(&j.ev.reply.content) {
            problems.push(format!(
                "request {:02}: {} does not match /{}/",
                j.ev.record.index,
                short(&j.ev.reply.content),
                ka.matches.as_str()
            ));
        }
    }
    let mut distinct: Vec<&str> = Vec::new();
    for j in &selected {
        if !distinct.contains(&j.ev.reply.content.as_str()) {
            distinct.push(&j.ev.reply.content);
        }
    }
    if ka.identical && distinct.len() > 1 {
        problems.push(format!(
            "replies differ ({} distinct texts: {})",
            distinct.len(),
            distinct
                .iter()
                .map(|d| short(d))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if problems.is_empty() {
        let same = if ka.identical { ", identical" } else { "" };
        Verdict::new(
            "known_answer",
            Outcome::Pass,
            format!(
                "{n} of {n} replies match /{}/{same}: {} (n={n})",
                ka.matches.as_str(),
                short(distinct[0])
            ),
        )
    } else {
        Verdict::new(
            "known_answer",
            Outcome::Fail,
            format!("{} (n={n})", problems.join("; ")),
        )
    }
}

/// Judges a pair gate on a pair run: `ratio` (theirs / ours of the metric's medians, both numbers, the ratio
/// and the order in one line), `same_answers` (every reply of both runtimes to a prompt is the same text),
/// and `content` / `known_answer` over every arm. Pure, like [`judge`].
pub fn judge_pair(gate: &GateSpec, ev: &crate::evidence::PairEvidence) -> Vec<Verdict> {
    let names = gate.assertions.names();
    let s = &ev.summary;
    let whole = if s.status != RunStatus::Complete {
        Some(format!(
            "the evidence is incomplete (pair.json status is `{}`: {})",
            s.status.name(),
            s.status.why_incomplete()
        ))
    } else if let Some(f) = &s.failure {
        Some(format!("the pair is void: {f}"))
    } else if ev.arms.is_empty() {
        Some("no arm ran".to_string())
    } else {
        ev.summary.arms.iter().zip(&ev.arms).find_map(|(a, e)| {
            if e.run.status != RunStatus::Complete {
                Some(format!("arm {} ({}) evidence is incomplete", a.arm, a.role))
            } else {
                e.run
                    .serve
                    .failure
                    .as_ref()
                    .filter(|_| e.requests.is_empty())
                    .map(|f| format!("arm {} ({}) serve never became ready: {f}", a.arm, a.role))
            }
        })
    };
    if let Some(reason) = whole {
        return names
            .iter()
            .map(|n| Verdict::new(n, Outcome::Fail, &reason))
            .collect();
    }
    let mut out = Vec::new();
    for name in names {
        out.push(match name {
            "ratio" => judge_ratio(gate, ev),
            "same_answers" => judge_same_answers(gate, ev),
            "content" | "known_answer" => {
                let parts: Vec<(String, Verdict)> = ev
                    .summary
                    .arms
                    .iter()
                    .zip(&ev.arms)
                    .map(|(a, e)| {
                        let judged: Vec<Judged> = e
                            .requests
                            .iter()
                            .filter(|r| !r.record.warmup)
                            .map(|r| Judged {
                                ev: r,
                                fig: measure::measure(&r.reply),
                            })
                            .collect();
                        let v = if name == "content" {
                            judge_content(&judged)
                        } else {
                            judge_known_answer(gate, &judged)
                        };
                        (format!("arm {} {}", a.arm, a.role), v)
                    })
                    .collect();
                let ok = parts.iter().all(|(_, v)| v.passed());
                let detail: Vec<String> = parts
                    .iter()
                    .map(|(label, v)| format!("{label}: {}", v.details()))
                    .collect();
                Verdict::new(
                    name,
                    if ok { Outcome::Pass } else { Outcome::Fail },
                    detail.join(" | "),
                )
            }
            _ => Verdict::new(name, Outcome::Fail, "not judged in a pair gate"),
        });
    }
    out
}

fn judge_ratio(gate: &GateSpec, ev: &crate::evidence::PairEvidence) -> Verdict {
    let r = gate.assertions.ratio.as_ref().expect("ratio declared");
    let unit = match r.metric {
        crate::spec::PairMetric::Decode => crate::pair::DECODE,
        crate::spec::PairMetric::FirstToken => crate::pair::FIRST_TOKEN,
    };
    let mut arms = Vec::new();
    let mut missing = Vec::new();
    for (a, e) in ev.summary.arms.iter().zip(&ev.arms) {
        let mut values = Vec::new();
        for req in e.requests.iter().filter(|r| !r.record.warmup) {
            let fig = measure::measure(&req.reply);
            let v = match r.metric {
                crate::spec::PairMetric::Decode => fig.decode_tok_s,
                crate::spec::PairMetric::FirstToken => fig.ttft_ms,
            };
            match v {
                Some(v) => values.push(v),
                None => missing.push(format!(
                    "arm {} {} request {:02} ({})",
                    a.arm,
                    a.role,
                    req.record.index,
                    why_missing(
                        &Judged {
                            ev: req,
                            fig: fig.clone()
                        },
                        "rate"
                    )
                )),
            }
        }
        arms.push(crate::pair::ArmValues {
            role: a.role.clone(),
            values,
        });
    }
    if !missing.is_empty() {
        return Verdict::new(
            "ratio",
            Outcome::Fail,
            format!(
                "{} replies have no {} value: {}",
                missing.len(),
                unit.name,
                missing.join("; ")
            ),
        );
    }
    let f = match crate::pair::compute(&arms) {
        Ok(f) => f,
        Err(e) => return Verdict::new("ratio", Outcome::Fail, format!("{}: {e}", unit.name)),
    };
    let lo_ok = r.at_least.is_none_or(|lo| f.ratio >= lo);
    let hi_ok = r.at_most.is_none_or(|hi| f.ratio <= hi);
    let bounds = match (r.at_least, r.at_most) {
        (Some(lo), Some(hi)) => format!("bounds {lo}-{hi}x"),
        (Some(lo), None) => format!("at least {lo}x"),
        (None, Some(hi)) => format!("at most {hi}x"),
        (None, None) => String::new(),
    };
    let outcome = if lo_ok && hi_ok {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
    let mut v = Verdict::new(
        "ratio",
        outcome,
        format!(
            "{} ({bounds}); {}",
            crate::pair::line(&f, unit),
            crate::pair::arms_line(&f, unit)
        ),
    );
    v.values = f
        .theirs
        .values
        .iter()
        .chain(&f.ours.values)
        .map(|x| Some(*x))
        .collect();
    v.median = Some(f.ratio);
    v
}

fn judge_same_answers(gate: &GateSpec, ev: &crate::evidence::PairEvidence) -> Verdict {
    let sa = gate
        .assertions
        .same_answers
        .as_ref()
        .expect("same_answers declared");
    let mut problems = Vec::new();
    let mut n = 0;
    let mut prompts = 0;
    for p in &gate.request.prompts {
        if sa.prompt.as_ref().is_some_and(|x| x != p) {
            continue;
        }
        prompts += 1;
        let mut texts: Vec<(String, &str)> = Vec::new();
        for (a, e) in ev.summary.arms.iter().zip(&ev.arms) {
            for r in e
                .requests
                .iter()
                .filter(|r| !r.record.warmup && &r.record.prompt == p)
            {
                texts.push((
                    format!("arm {} {}", a.arm, a.role),
                    r.reply.content.as_str(),
                ));
            }
        }
        n += texts.len();
        let mut distinct: Vec<&str> = Vec::new();
        for (_, t) in &texts {
            if !distinct.contains(t) {
                distinct.push(t);
            }
        }
        if texts.is_empty() {
            problems.push(format!("no replies to {p:?}"));
        } else if distinct.len() > 1 {
            let shown: Vec<String> = distinct
                .iter()
                .map(|d| format!("{:?}", d.chars().take(60).collect::<String>()))
                .collect();
            problems.push(format!(
                "{} distinct replies to {:?}: {}",
                distinct.len(),
                p.chars().take(40).collect::<String>(),
                shown.join(", ")
            ));
        }
    }
    if problems.is_empty() {
        Verdict::new(
            "same_answers",
            Outcome::Pass,
            format!("both runtimes gave the same text to each of {prompts} prompts (n={n})"),
        )
    } else {
        Verdict::new(
            "same_answers",
            Outcome::Fail,
            format!("{} (n={n})", problems.join("; ")),
        )
    }
}
