//! `[assert.content]` (every reply sane) and `[assert.known_answer]` (every answer matches).

use crate::analysis::measure::Figures;
use crate::spec::GateSpec;
use crate::vocab::{AssertionKind, ContentProblem, FailureCode, NoteKind};

use super::accounting::{no_replies, request_failure, Accounting, Judged};
use super::figure::over_max_tokens_note;
use super::verdict::{Outcome, Verdict};

/// Why one reply fails the content check, or None when its content is sane.
pub fn content_problem(reply: &crate::analysis::reply::Reply, fig: &Figures) -> Option<String> {
    reply_problem(reply, fig).map(|(_, text)| text)
}

/// What kind of problem one reply has (the name `inspect` reports): its failure, or a content problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    /// The reply failed on its own terms ([`crate::analysis::reply::Reply::failure`]): its first code.
    Failed(FailureCode),
    /// Its content is not sane.
    Content(ContentProblem),
}

impl ProblemKind {
    /// The wire name: the failure code's or the content problem's.
    pub fn name(self) -> &'static str {
        match self {
            ProblemKind::Failed(c) => c.name(),
            ProblemKind::Content(c) => c.name(),
        }
    }
}

/// How a failed reply is called in a verdict: `error reply` when the serve reported an error, else `failed
/// reply` (cut, malformed, or a body that is no stream at all: it failed, it did not say so).
fn failed_words(reply: &crate::analysis::reply::Reply) -> &'static str {
    if reply
        .error
        .as_ref()
        .is_some_and(|e| e.kind != FailureCode::NotAnEventStream)
    {
        "error reply"
    } else {
        "failed reply"
    }
}

/// [`content_problem`] with its kind.
pub fn reply_problem(
    reply: &crate::analysis::reply::Reply,
    fig: &Figures,
) -> Option<(ProblemKind, String)> {
    if let Some(f) = reply.failure() {
        let what = failed_words(reply);
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
        return Some((
            ProblemKind::Failed(f.code()),
            format!("{what}: {f}{partial}"),
        ));
    }
    let finish =
        crate::analysis::reply::printable(reply.finish_reason.as_deref().unwrap_or("none"));
    // A tool-call reply is a valid reply with no content: the calls are the answer.
    if reply.content.trim().is_empty() && !reply.tool_calls.is_empty() {
        return None;
    }
    if reply.content.trim().is_empty() {
        if let Some(why) = crate::analysis::content::reasoning_ate_budget(
            &reply.content,
            &reply.reasoning,
            fig.completion_tokens,
            reply.finish_reason.as_deref(),
        ) {
            return Some((
                ProblemKind::Content(ContentProblem::ContentEmptyAllTokensInReasoning),
                format!("{why} (is thinking left on?)"),
            ));
        }
        if reply.content.is_empty() {
            return Some((
                ProblemKind::Content(ContentProblem::ContentEmpty),
                format!("empty content (finish_reason={finish})"),
            ));
        }
        return Some((
            ProblemKind::Content(ContentProblem::ContentWhitespaceOnly),
            format!(
                "whitespace-only content {:?} (finish_reason={finish})",
                reply.content
            ),
        ));
    }
    if let Some(reason) = crate::analysis::content::degenerate(&reply.content) {
        let tail = if finish == "length" {
            " + ran to max_tokens – possible NaN logits"
        } else {
            ""
        };
        return Some((
            ProblemKind::Content(ContentProblem::DegenerateOutput),
            format!("{reason}{tail}"),
        ));
    }
    if let Some(reason) = crate::analysis::content::control_characters(&reply.content) {
        return Some((
            ProblemKind::Content(ContentProblem::ControlCharacters),
            reason,
        ));
    }
    None
}

/// `thinking_not_off: ...` when a reply thinks (reasoning in its own field, or markup moved out of its
/// content: warning `reasoning_in_content`) though the gate turned thinking off.
pub(super) fn still_thinks(reply: &crate::analysis::reply::Reply) -> Option<String> {
    if reply.reasoning.trim().is_empty() {
        return None;
    }
    let how = if reply.has_note(NoteKind::ReasoningInContent) {
        "as reasoning markup in its content"
    } else {
        "in its reasoning field"
    };
    Some(format!(
        "{}: the gate turns thinking off (chat_template_kwargs.enable_thinking = false) but the reply still thinks ({} chars {how})",
        ContentProblem::ThinkingNotOff.name(),
        reply.reasoning.chars().count()
    ))
}

/// `[assert.content]`: every reply sane ([`content_problem`]): a tool-call reply with no content is sane and
/// its calls are shown; with thinking turned off, a reply that still thinks fails ([`still_thinks`]).
pub(super) fn judge_content(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
    if judged.is_empty() {
        return no_replies(AssertionKind::Content, acct);
    }
    let n = judged.len();
    let thinking_off = gate.request.thinking_off();
    let problems: Vec<String> = judged
        .iter()
        .filter_map(|j| {
            content_problem(&j.ev.reply, &j.fig)
                .or_else(|| request_failure(j.ev).map(|f| format!("failed reply: {f}")))
                .or_else(|| over_max_tokens_note(j))
                .or_else(|| thinking_off.then(|| still_thinks(&j.ev.reply)).flatten())
                .map(|p| format!("request {:02}: {p}", j.ev.record.index))
        })
        .collect();
    let unsent = acct.unsent();
    let sse_note = ignored_sse_fields_note(judged);
    if problems.is_empty() && unsent.is_none() {
        let lens: Vec<String> = judged
            .iter()
            .map(|j| j.ev.reply.content.chars().count().to_string())
            .collect();
        let calls: Vec<String> = judged
            .iter()
            .filter(|j| !j.ev.reply.tool_calls.is_empty())
            .map(|j| {
                format!(
                    "request {:02}: {}",
                    j.ev.record.index,
                    crate::analysis::reply::quoted(
                        &crate::analysis::content::tool_calls_text(&j.ev.reply.tool_calls),
                        80
                    )
                )
            })
            .collect();
        let calls = if calls.is_empty() {
            String::new()
        } else {
            format!("; tool calls: {}", calls.join("; "))
        };
        Verdict::new(
            AssertionKind::Content,
            Outcome::Pass,
            format!(
                "{n} of {n} replies have sane content (chars each: {}; {}){calls}{sse_note}",
                lens.join(", "),
                acct.n_of(n)
            ),
        )
    } else {
        let mut parts = Vec::new();
        if !problems.is_empty() {
            parts.push(format!(
                "{} of {n} replies fail: {}",
                problems.len(),
                problems.join("; ")
            ));
        }
        parts.extend(unsent);
        Verdict::new(
            AssertionKind::Content,
            Outcome::Fail,
            format!("{} ({}){sse_note}", parts.join("; "), acct.n_of(n)),
        )
    }
}

/// The note of `content` on replies whose stream had lines with a field SSE ignores (`foobar:xxx`, a line
/// with no colon: [`NoteKind::UnknownSseFields`]): empty when none did. Such lines lose nothing (the WHATWG
/// rules and every OpenAI SDK skip them), so they only warn; a line that looks meant to be `data`, `event`
/// or `error` fails the reply instead (`misnamed_field`).
pub(super) fn ignored_sse_fields_note(judged: &[Judged]) -> String {
    let with: Vec<&Judged> = judged
        .iter()
        .filter(|j| j.ev.reply.has_note(NoteKind::UnknownSseFields))
        .collect();
    let Some(first) = with.first() else {
        return String::new();
    };
    let detail = first
        .ev
        .reply
        .warnings
        .iter()
        .find(|n| n.kind == NoteKind::UnknownSseFields)
        .and_then(|n| n.detail.clone())
        .unwrap_or_default();
    let which: Vec<String> = with
        .iter()
        .take(5)
        .map(|j| format!("{:02}", j.ev.record.index))
        .collect();
    format!(
        "; note: {} of {} replies' streams had lines SSE ignores (request {}{}; first: {detail}): skipped as the SSE standard and the OpenAI SDKs skip them",
        with.len(),
        judged.len(),
        which.join(", "),
        if with.len() > 5 { ", ..." } else { "" }
    )
}

/// The text `known_answer` matches: the content, or for a tool-call reply with no content its calls as
/// `name(arguments)` joined by `; ` ([`crate::analysis::content::tool_calls_text`]).
pub(super) fn answer_text(reply: &crate::analysis::reply::Reply) -> String {
    if reply.content.trim().is_empty() && !reply.tool_calls.is_empty() {
        crate::analysis::content::tool_calls_text(&reply.tool_calls)
    } else {
        reply.content.clone()
    }
}

pub(super) fn judge_known_answer(gate: &GateSpec, judged: &[Judged], acct: &Accounting) -> Verdict {
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
        return no_replies(AssertionKind::KnownAnswer, acct);
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
        if let Some(f) = request_failure(j.ev) {
            let what = failed_words(&j.ev.reply);
            problems.push(format!("request {:02}: {what}: {f}", j.ev.record.index));
        } else if !ka.matches.is_match(&answer_text(&j.ev.reply)) {
            problems.push(format!(
                "request {:02}: {} does not match /{}/",
                j.ev.record.index,
                short(&answer_text(&j.ev.reply)),
                ka.matches.as_str()
            ));
        }
    }
    let answers: Vec<String> = selected.iter().map(|j| answer_text(&j.ev.reply)).collect();
    let mut distinct: Vec<&str> = Vec::new();
    for a in &answers {
        if !distinct.contains(&a.as_str()) {
            distinct.push(a);
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
    problems.extend(acct.unsent());
    let n_of = match &ka.prompt {
        None => acct.n_of(n),
        Some(p) => format!(
            "n={n} of {} planned",
            acct.planned_for(&gate.request.prompts, |x| x == p)
        ),
    };
    if problems.is_empty() {
        let same = if ka.identical { ", identical" } else { "" };
        Verdict::new(
            AssertionKind::KnownAnswer,
            Outcome::Pass,
            format!(
                "{n} of {n} replies match /{}/{same}: {} ({n_of})",
                ka.matches.as_str(),
                short(distinct[0]),
            ),
        )
    } else {
        Verdict::new(
            AssertionKind::KnownAnswer,
            Outcome::Fail,
            format!("{} ({n_of})", problems.join("; ")),
        )
    }
}
