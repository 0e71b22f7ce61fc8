//! The `cancel` check's rule (docs/contract.md): the client drops a stream mid-reply, and the serve stays
//! healthy and frees the slot. Three streamed requests of the same prompt: `baseline` (a few tokens, the
//! unloaded first token), `dropped` (a long reply the client closes after a few token chunks) and `after`
//! (sent at once after the drop). The slot was freed when `after`'s first token comes within
//! [`bound_ms`] of `baseline`'s while the rest of the dropped reply, at its own pace, would have taken longer;
//! it stayed busy when `after` waited for at least half of that rest. The engine's cancellation log line
//! (the gate's `log_line`, else its profile's), when one is known and the serve's log is in the evidence,
//! must be there. Pure.

use crate::analysis::contract::ContractExchange;
use crate::analysis::quote::quoted;
use crate::spec::contract::CheckSpec;

use super::{answered, find, whole, CheckContext, CheckState};

type Judged = Result<CheckState, CheckState>;

/// `after`'s first token may come this many times `baseline`'s ...
pub const BOUND_FACTOR: f64 = 3.0;
/// ... plus this many ms (a first token of 20 ms on a busy runner may take 100) and still show a free slot.
pub const BOUND_SLACK_MS: f64 = 250.0;

/// ms the runner waits after `after` before it reads the serve's log and `/metrics` (src/run/contract.rs).
pub const LOG_WAIT_MS: f64 = 300.0;

/// The bound on `after`'s first token, ms, from `baseline`'s: `3 × baseline + 250 ms`.
pub fn bound_ms(baseline_ms: f64) -> f64 {
    BOUND_FACTOR * baseline_ms + BOUND_SLACK_MS
}

/// The first token chunk's time, ms from the send, or a failure naming the request.
fn first_token(x: &ContractExchange) -> Result<f64, CheckState> {
    if !x.reply.streamed {
        return Err(CheckState::Fail(format!(
            "`{}` (stream = true) was not answered as an SSE stream",
            x.record.label
        )));
    }
    x.reply.token_chunks.first().map(|t| t.t_ms).ok_or_else(|| {
        CheckState::Fail(format!(
            "`{}` streamed no token: no first token to time",
            x.record.label
        ))
    })
}

/// `cancel`: see the module doc.
pub(super) fn cancel(c: &CheckSpec, xs: &[ContractExchange], ctx: &CheckContext) -> Judged {
    let baseline = find(xs, "baseline")?;
    answered(baseline)?;
    let base_ms = first_token(baseline)?;
    let dropped = find(xs, "dropped")?;
    let (read, rest_ms) = dropped_rest(dropped)?;
    let after = find(xs, "after")?;
    if let Some(e) = &after.record.transport_error {
        return Ok(CheckState::Fail(format!(
            "the serve did not answer `after`, the request sent once the client dropped a stream: {e}"
        )));
    }
    whole(after).map_err(|e| {
        CheckState::Fail(format!(
            "after the client dropped a stream, the next reply was not whole: {e}"
        ))
    })?;
    let status = after.record.http_status.unwrap_or(0);
    if !(200..300).contains(&status) || after.reply.error.is_some() {
        return Ok(CheckState::Fail(format!(
            "after the client dropped a stream, `after` got HTTP {status}{}",
            after
                .reply
                .error
                .as_ref()
                .map(|e| format!(": {}", quoted(&e.message, 120)))
                .unwrap_or_default()
        )));
    }
    let after_ms = first_token(after)?;
    let bound = bound_ms(base_ms);
    let timing = format!(
        "`after`'s first token {after_ms:.0} ms (bound {bound:.0} ms = {BOUND_FACTOR} × `baseline`'s {base_ms:.0} ms + {BOUND_SLACK_MS:.0}); the dropped reply's rest ({read}) {rest_ms:.0} ms at its own pace"
    );
    // From the drop to the /metrics read: `after`'s whole reply (sent at once after the drop), and the
    // runner's wait for a trailing log line or stats step.
    let elapsed_ms = after.reply.end_ms.unwrap_or(after_ms) + LOG_WAIT_MS;
    let log = log_word(c, ctx, rest_ms, elapsed_ms);
    if after_ms >= base_ms + rest_ms / 2.0 && after_ms > bound {
        return Ok(CheckState::Fail(format!(
            "the slot stayed busy after the client dropped the stream: {timing}{}",
            log.as_ref()
                .map(|l| format!("; {}", l.text))
                .unwrap_or_default()
        )));
    }
    match &log {
        Some(LogWord { found: false, text }) => {
            return Ok(CheckState::Fail(format!("{text}; {timing}")));
        }
        Some(LogWord { found: true, text }) if after_ms > bound || rest_ms <= bound => {
            return Ok(CheckState::Pass(format!("{text}; {timing}")));
        }
        _ => {}
    }
    if after_ms > bound {
        return Ok(CheckState::Indeterminate(format!(
            "{timing}: over the bound, yet under half the rest: a busy machine or a serve that freed the slot late cannot be told apart"
        )));
    }
    if rest_ms <= bound {
        return Ok(CheckState::Indeterminate(format!(
            "{timing}: the rest would end within the bound anyway, so a serve that kept generating cannot be told apart (raise [contract.cancel] max_tokens)"
        )));
    }
    Ok(CheckState::Pass(format!(
        "the slot was freed: {timing}{}",
        log.map(|l| format!("; {}", l.text)).unwrap_or_else(|| {
            "; no cancellation line or counter checked (none known for this serve, or none in the evidence)".into()
        })
    )))
}

/// What the dropped stream shows: how many token chunks were read, and how long the rest of the reply
/// (`max_tokens` minus the tokens read) would take at the stream's median gap between token chunks. A
/// failure when it was not dropped as planned; INDETERMINATE when the reply ended on its own first.
fn dropped_rest(x: &ContractExchange) -> Result<(String, f64), CheckState> {
    let label = &x.record.label;
    let status = x.record.http_status.unwrap_or(0);
    if x.record.dropped_after.is_none() || !(200..300).contains(&status) {
        if let Some(e) = &x.record.transport_error {
            return Err(CheckState::Fail(format!(
                "`{label}`: the stream ended before the client could drop it: {e}"
            )));
        }
        answered(x)?;
    }
    if let Some(m) = x.reply.malformed_events.first() {
        return Err(CheckState::Fail(format!(
            "`{label}`: a malformed event: {m}"
        )));
    }
    let chunks = &x.reply.token_chunks;
    if let Some(f) = &x.reply.finish_reason {
        return Err(CheckState::Indeterminate(format!(
            "`{label}` ended on its own (finish_reason {}) after {} token chunks, before the client dropped it: nothing was cancelled (a prompt that runs longer, or a larger max_tokens)",
            quoted(f, 20),
            chunks.len()
        )));
    }
    if x.record.dropped_after.is_none() {
        return Err(CheckState::Fail(format!(
            "`{label}` was not dropped by the client and did not end"
        )));
    }
    let gaps: Vec<f64> = chunks.windows(2).map(|w| w[1].t_ms - w[0].t_ms).collect();
    let gap = crate::analysis::stats::median(&gaps).ok_or_else(|| {
        CheckState::Fail(format!(
            "`{label}`: {} token chunk(s) before the drop: no pace to time the rest by",
            chunks.len()
        ))
    })?;
    let read: u64 = chunks.iter().map(|t| t.tokens.unwrap_or(1)).sum();
    let max = x.request["max_tokens"].as_u64().unwrap_or(read);
    let rest = max.saturating_sub(read);
    Ok((
        format!("{rest} of max_tokens {max} at {gap:.1} ms per token chunk"),
        rest as f64 * gap,
    ))
}

/// Whether the serve's log shows its cancellation.
struct LogWord {
    found: bool,
    text: String,
}

/// What the serve's own witnesses say of the drop: its cancellation line ([`line_word`]), else its
/// running-requests gauge ([`gauge_word`]); None when neither is known or in the evidence.
fn log_word(c: &CheckSpec, ctx: &CheckContext, rest_ms: f64, elapsed_ms: f64) -> Option<LogWord> {
    line_word(c, ctx).or_else(|| gauge_word(ctx, rest_ms, elapsed_ms))
}

/// The sum of the samples of the Prometheus series (a counter or a gauge) `name` that carry the label pair `label` (`key="v"`)
/// in the exposition `text`; None when there is none.
pub fn counter(text: &str, name: &str, label: &str) -> Option<f64> {
    let mut sum = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (labels, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once('}') {
                Some((l, v)) => (l, v),
                None => continue,
            },
            None if rest.starts_with(' ') => ("", rest),
            None => continue,
        };
        if !label.is_empty() && !labels.split(',').any(|p| p.trim() == label) {
            continue;
        }
        if let Some(v) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            *sum.get_or_insert(0.0) += v;
        }
    }
    sum
}

/// The engine profile's running-requests gauge read after the check: once `after` is answered only the
/// dropped request could still run, and its rest (`rest_ms`) outlasts the time since the drop
/// (`elapsed_ms`, `after`'s reply and the wait before the read) by far, so 0 shows it cancelled and more
/// shows it going on. None when the profile names no gauge, the evidence holds no `/metrics` with it, or the
/// rest is too short for the reading to tell (under twice the time since the drop).
fn gauge_word(ctx: &CheckContext, rest_ms: f64, elapsed_ms: f64) -> Option<LogWord> {
    let (name, label) = ctx.engine.and_then(|e| e.profile().cancel_gauge)?;
    let (_, after) = ctx.metrics?;
    let running = counter(after, name, label)?;
    if rest_ms < 2.0 * elapsed_ms {
        return None;
    }
    let series = quoted(name, 60);
    Some(if running == 0.0 {
        LogWord {
            found: true,
            text: format!(
                "the serve runs no request after the check (/metrics {series} 0, {elapsed_ms:.0} ms after the drop, {rest_ms:.0} ms before the dropped reply's end): it was cancelled"
            ),
        }
    } else {
        LogWord {
            found: false,
            text: format!(
                "the serve still runs {} after the check (/metrics {series}, contract/cancel/metrics.after.txt, {elapsed_ms:.0} ms after the drop): the dropped reply went on",
                crate::text::counted(running as usize, "request")
            ),
        }
    })
}

/// The cancellation line's verdict: None when no line is known (no `log_line`, no profile's) or the
/// evidence keeps no serve log (a serve reached by `url`).
fn line_word(c: &CheckSpec, ctx: &CheckContext) -> Option<LogWord> {
    let pattern = c
        .log_line
        .as_deref()
        .or_else(|| ctx.engine.and_then(|e| e.profile().cancel_line))?;
    let log = ctx.log?;
    let re = regex::Regex::new(pattern).ok()?;
    Some(match log.lines().find(|l| re.is_match(l)) {
        Some(l) => LogWord {
            found: true,
            text: format!("the serve logged its cancellation: {}", quoted(l.trim(), 100)),
        },
        None => LogWord {
            found: false,
            text: format!(
                "the serve's log while the check ran (contract/cancel/serve.log) has no cancellation line /{}/: the drop went unnoticed",
                quoted(pattern, 80)
            ),
        },
    })
}
