//! `[contract]` judged (docs/contract.md): one verdict per check, `contract.<check>`, decided only from that
//! check's requests in the evidence (`contract/<check>/`, [`ContractEvidence`]). Pure.
//!
//! A check has three states plus **unsupported**: PASS, FAIL, INDETERMINATE (the evidence cannot decide: the
//! model ended on its own before the count a check needed), and UNSUPPORTED (the serve answered the check's
//! request with a clean 4xx whose error says it does not support it; never a timeout, never garbage). An
//! unsupported check FAILs when the gate's `expect` lists it, and is its own state (the trial skipped) when
//! `may_lack` does. A check never passes on a reply it could not read whole: a transport error (the check's
//! time limit, a refused connection), a cut stream, a capped body, a malformed event or a body that is not
//! JSON fails it with the reason ([`whole`]).

pub mod cancel;
mod checks;
mod endpoints;
mod features;
pub mod schema;
#[cfg(test)]
mod tests;

use crate::analysis::contract::{ContractEvidence, ContractExchange};
use crate::analysis::Evidence;
use crate::spec::contract::CheckSpec;
use crate::spec::profile::Engine;
use crate::spec::GateSpec;
use crate::vocab::{AssertionKind, ContractCheck};

use super::{Outcome, Verdict};

/// What one check found, before `expect` / `may_lack` decide what an unsupported one means.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckState {
    /// The rule holds on every request.
    Pass(String),
    /// It does not, with the reason.
    Fail(String),
    /// The evidence cannot decide, with what would.
    Indeterminate(String),
    /// The serve said it does not support it (a clean 4xx error), quoted.
    Unsupported(String),
}

/// The verdicts of `gate`'s `[contract]` (none without one), in its checks' order. `contract` is the loaded
/// contract evidence (or why it could not be read); `run_failure` a whole-run failure every verdict takes.
pub fn judge_contract(
    gate: &GateSpec,
    evidence: &Evidence,
    contract: Option<&Result<ContractEvidence, String>>,
    run_failure: Option<&str>,
) -> Vec<Verdict> {
    let Some(spec) = &gate.contract else {
        return Vec::new();
    };
    spec.checks
        .iter()
        .map(|c| {
            let state = match (run_failure, contract) {
                (Some(why), _) => CheckState::Fail(why.to_string()),
                (None, None) => {
                    CheckState::Fail("no contract evidence was given to the judge".into())
                }
                (None, Some(Err(e))) => {
                    CheckState::Fail(format!("the contract evidence could not be read: {e}"))
                }
                (None, Some(Ok(ev))) => match ev.checks.get(c.check.name()) {
                    Some(xs) => judge_check(
                        c,
                        xs,
                        &CheckContext {
                            served_model: &gate.request.served_model,
                            engine: engine_of(gate, evidence),
                            log: ev.logs.get(c.check.name()).map(String::as_str),
                            metrics: ev
                                .metrics
                                .get(c.check.name())
                                .map(|(b, a)| (b.as_str(), a.as_str())),
                        },
                    ),
                    None => CheckState::Fail(not_sent(evidence)),
                },
            };
            verdict_of(c, state)
        })
        .collect()
}

/// The engine whose profile speaks for the serve: the gate's `[serve] engine`, else the one the run
/// detected after readiness (`run.json` `serve.detected`).
pub fn engine_of(gate: &GateSpec, evidence: &Evidence) -> Option<Engine> {
    gate.serve.engine.or_else(|| {
        evidence
            .run
            .serve
            .detected
            .as_ref()
            .and_then(|d| d.engine.as_deref())
            .and_then(|e| Engine::parse(e).ok())
    })
}

/// What a check is judged with besides its requests.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckContext<'a> {
    /// The gate's `[request] served_model` (the id `models` must list).
    pub served_model: &'a str,
    /// The engine whose profile speaks for the serve ([`engine_of`]): its cancellation log line, and the
    /// checks it states the engine lacks.
    pub engine: Option<Engine>,
    /// The serve's log while the check ran (`contract/<check>/serve.log`), when kept.
    pub log: Option<&'a str>,
    /// The serve's `/metrics` before and after the check's requests, when it has them.
    pub metrics: Option<(&'a str, &'a str)>,
}

/// Why a check has no evidence: its requests were never sent (the serve failed first) or not finished.
fn not_sent(evidence: &Evidence) -> String {
    match &evidence.run.serve.failure {
        Some(f) => format!("its requests were not sent (contract/ holds none of them): {f}"),
        None => "its requests were not sent to their end (no check.json under contract/)".into(),
    }
}

/// The verdict of one check's state: unsupported fails an expected check.
pub fn verdict_of(c: &CheckSpec, state: CheckState) -> Verdict {
    let (outcome, details) = match state {
        CheckState::Pass(d) if c.known_fail => (
            Outcome::Fail,
            format!("passes, and [contract] known_fail lists it: move it to expect ({d})"),
        ),
        CheckState::Fail(d) if c.known_fail => (
            Outcome::KnownFail,
            format!("fails as [contract] known_fail states: {d}"),
        ),
        CheckState::Pass(d) => (Outcome::Pass, d),
        CheckState::Fail(d) => (Outcome::Fail, d),
        CheckState::Indeterminate(d) => (Outcome::Indeterminate, d),
        CheckState::Unsupported(d) if c.expected => (
            Outcome::Fail,
            format!("unsupported, and [contract] expect lists it: {d}"),
        ),
        CheckState::Unsupported(d) => (
            Outcome::Unsupported,
            format!("unsupported ([contract] may_lack lists it): {d}"),
        ),
    };
    Verdict::named(
        AssertionKind::Contract,
        c.check.trial_name(),
        outcome,
        details,
    )
}

/// One check's state from its requests and `ctx`. A FAIL of a check the engine's profile states it lacks
/// ([`crate::spec::profile::Profile::lacks`]) is UNSUPPORTED, with the profile's word and what the evidence
/// showed, when every reply was read whole: the profile's word never covers a timeout, a cut stream or a
/// dead serve.
pub fn judge_check(c: &CheckSpec, xs: &[ContractExchange], ctx: &CheckContext) -> CheckState {
    let state = judge_rule(c, xs, ctx);
    let CheckState::Fail(why) = &state else {
        return state;
    };
    let Some(engine) = ctx.engine else {
        return state;
    };
    let Some((_, word)) = engine.profile().lacks.iter().find(|(k, _)| *k == c.check) else {
        return state;
    };
    let clean = xs
        .iter()
        .all(|x| x.record.dropped_after.is_some() || whole(x).is_ok());
    if !clean {
        return state;
    }
    CheckState::Unsupported(format!("the {engine} profile: {word}; the evidence: {why}"))
}

/// The check's own rule on its requests.
fn judge_rule(c: &CheckSpec, xs: &[ContractExchange], ctx: &CheckContext) -> CheckState {
    let served_model = ctx.served_model;
    let result = match c.check {
        ContractCheck::Shape => checks::shape(xs),
        ContractCheck::MaxTokens => checks::max_tokens(c, xs),
        ContractCheck::Stop => checks::stop(c, xs),
        ContractCheck::Usage => checks::usage(xs),
        ContractCheck::StreamParity => checks::stream_parity(xs),
        ContractCheck::Tools => features::tools(xs),
        ContractCheck::JsonObject => features::json_format(c, xs, false),
        ContractCheck::JsonSchema => features::json_format(c, xs, true),
        ContractCheck::Logprobs => features::logprobs(xs),
        ContractCheck::Seed => features::seed(xs),
        ContractCheck::N => features::n(xs),
        ContractCheck::Errors => checks::errors(xs),
        ContractCheck::Completions => endpoints::completions(xs),
        ContractCheck::Embeddings => endpoints::embeddings(xs),
        ContractCheck::Models => endpoints::models(xs, served_model),
        ContractCheck::Cancel => cancel::cancel(c, xs, ctx),
        ContractCheck::Responses => endpoints::responses(xs),
    };
    match result {
        Ok(s) | Err(s) => s,
    }
}

/// The request labelled `label`, or a failure naming it.
fn find<'a>(xs: &'a [ContractExchange], label: &str) -> Result<&'a ContractExchange, CheckState> {
    xs.iter()
        .find(|x| x.record.label == label)
        .ok_or_else(|| CheckState::Fail(format!("request `{label}` is not in the evidence")))
}

/// Ok when the reply was read whole: no transport error (the check's time limit, a refused or cut
/// connection), no capped body, no cut stream, no malformed event or misnamed field, and a body (not a
/// 2xx stream) that is one JSON document. Else the reason, naming the request.
pub fn whole(x: &ContractExchange) -> Result<(), String> {
    let label = &x.record.label;
    let r = &x.reply;
    if let Some(e) = &x.record.transport_error {
        return Err(format!("`{label}`: no whole reply: {e}"));
    }
    if x.record.body_truncated {
        return Err(format!(
            "`{label}`: the body passed the cap and was not read whole"
        ));
    }
    if r.streamed {
        if let Some(e) = r
            .error
            .as_ref()
            .filter(|e| e.kind == crate::vocab::FailureCode::NotAnEventStream)
        {
            return Err(format!(
                "`{label}`: {}: {}",
                e.kind.name(),
                crate::analysis::quote::printable(&e.message)
            ));
        }
        if r.truncated {
            return Err(format!(
                "`{label}`: a cut stream (no finish_reason and [DONE], or an unfinished last event)"
            ));
        }
        if let Some(m) = r.malformed_events.first() {
            return Err(format!("`{label}`: a malformed event: {m}"));
        }
        if let Some(m) = r.misnamed_fields.first() {
            return Err(format!("`{label}`: a misnamed field: {m}"));
        }
        if let Some(u) = &r.invalid_utf8 {
            return Err(format!("`{label}`: invalid UTF-8: {u}"));
        }
        return Ok(());
    }
    match serde_json::from_slice::<serde_json::Value>(&x.body) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "`{label}`: the body is not one JSON document ({e}): {}",
            crate::analysis::quote::quoted(&String::from_utf8_lossy(&x.body), 80)
        )),
    }
}

/// The body as JSON (Null when it is not: [`whole`] said so first).
fn body_json(x: &ContractExchange) -> serde_json::Value {
    serde_json::from_slice(&x.body).unwrap_or(serde_json::Value::Null)
}

/// The serve's "not supported" answer: a 4xx, or a 501 Not Implemented ("the server does not support the
/// functionality required to fulfill the request", RFC 9110 section 15.6.2: llama.cpp's answer to
/// `/v1/embeddings` without `--embeddings`), whose body has the error shape and whose message says it does
/// not support what was asked (`not supported`, `does not support`, `unsupported`, `not implemented`). Any
/// other 5xx is a failure, never this.
pub fn unsupported(x: &ContractExchange) -> Option<String> {
    let status = x.record.http_status?;
    if !((400..500).contains(&status) || status == 501) || whole(x).is_err() {
        return None;
    }
    let body = body_json(x);
    schema::violation(&schema::error(), &body)
        .is_none()
        .then_some(())?;
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    let lower = msg.to_ascii_lowercase();
    [
        "not supported",
        "does not support",
        "unsupported",
        "not implemented",
    ]
    .iter()
    .any(|w| lower.contains(w))
    .then(|| {
        format!(
            "HTTP {status}: {}",
            crate::analysis::quote::quoted(msg, 120)
        )
    })
}

/// Ok when `x` is a whole 2xx reply with no error in it; else the check's state: unsupported for a clean
/// "not supported" 4xx, a failure for anything else.
fn answered(x: &ContractExchange) -> Result<(), CheckState> {
    answered_with(x, Lack::default())
}

/// What else than a "not supported" message counts as the serve's clean word that it lacks what a request
/// asked ([`answered_with`]).
#[derive(Debug, Clone, Copy, Default)]
struct Lack<'a> {
    /// A clean 4xx error object naming this request parameter (its `param`, or the message quoting it as
    /// `'n'`, `"n"` or `` `n` ``): the serve refuses the parameter's value (llama.cpp: `Field 'n': Value
    /// must be between 1 <= value <= 1, but got 2`).
    param: Option<&'a str>,
    /// A 404 or 405 (any body): the serve has no such route (an endpoint check's request).
    route: bool,
}

/// [`answered`], where `lack` widens what is unsupported.
fn answered_with(x: &ContractExchange, lack: Lack) -> Result<(), CheckState> {
    whole(x).map_err(CheckState::Fail)?;
    let label = &x.record.label;
    let status = x.record.http_status.unwrap_or(0);
    if !(200..300).contains(&status) {
        if let Some(u) = unsupported(x) {
            return Err(CheckState::Unsupported(format!("`{label}`: {u}")));
        }
        let body = body_json(x);
        let msg = x
            .reply
            .error
            .as_ref()
            .map(|e| e.message.as_str())
            .unwrap_or("");
        let shaped = schema::violation(&schema::error(), &body).is_none();
        if lack.route && (status == 404 || status == 405) {
            return Err(CheckState::Unsupported(format!(
                "`{label}`: HTTP {status} at {}: the serve has no such route: {}",
                x.record.endpoint,
                crate::analysis::quote::quoted(&String::from_utf8_lossy(&x.body), 120)
            )));
        }
        if let (Some(p), true, true) = (lack.param, (400..500).contains(&status), shaped) {
            let named = body["error"]["param"].as_str() == Some(p)
                || [format!("'{p}'"), format!("\"{p}\""), format!("`{p}`")]
                    .iter()
                    .any(|q| msg.contains(q.as_str()));
            if named {
                return Err(CheckState::Unsupported(format!(
                    "`{label}`: HTTP {status} refusing `{p}`: {}",
                    crate::analysis::quote::quoted(msg, 120)
                )));
            }
        }
        return Err(CheckState::Fail(format!(
            "`{label}`: HTTP {status}: {}",
            crate::analysis::quote::quoted(msg, 120)
        )));
    }
    if let Some(e) = &x.reply.error {
        return Err(CheckState::Fail(format!(
            "`{label}`: an error inside the 200 reply: {}",
            crate::analysis::quote::quoted(&e.message, 120)
        )));
    }
    Ok(())
}

/// The data events of a streamed body before `[DONE]`, each parsed as JSON (Null where it is not).
fn stream_events(x: &ContractExchange) -> Vec<serde_json::Value> {
    let mut framer = crate::analysis::sse::Framer::new();
    let mut out = Vec::new();
    for e in framer.push(&x.body, 0.0) {
        if e.event.as_deref().is_some_and(|n| n != "message") {
            continue;
        }
        if e.data.starts_with("[DONE]") {
            break;
        }
        out.push(serde_json::from_str(&e.data).unwrap_or(serde_json::Value::Null));
    }
    out
}
