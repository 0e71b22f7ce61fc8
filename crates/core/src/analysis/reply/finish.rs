//! The last step of a parse, shared by the stream and the body: reasoning markup moved out of the answer.

use crate::analysis::reply_types::*;
use crate::vocab::{Note, NoteKind};

/// Reasoning markup at the start of the content (`<think>…</think>`, [`crate::analysis::content::reasoning_markup`])
/// is reasoning, not the answer: moved to `reasoning` (after any reasoning the serve sent in its own field),
/// the content keeps the rest, and warning `reasoning_in_content` says what was moved. The token chunks keep
/// their text as it arrived (timing is about arrival, not meaning).
pub(super) fn move_reasoning_markup(r: &mut Reply) {
    let Some(m) = crate::analysis::content::reasoning_markup(&r.content) else {
        return;
    };
    let open = if m.opened {
        format!("<{}>", m.tag)
    } else {
        "(opened by the template)".to_string()
    };
    let close = if m.closed {
        format!("</{}>", m.tag)
    } else {
        "(never closed)".to_string()
    };
    r.warnings.push(Note::new(
        NoteKind::ReasoningInContent,
        format!(
            "{open}…{close} at the start of content: {} chars judged as reasoning, not content",
            m.reasoning.chars().count()
        ),
    ));
    if !r.reasoning.is_empty() && !m.reasoning.is_empty() {
        r.reasoning.push('\n');
    }
    r.reasoning.push_str(&m.reasoning);
    r.content = m.rest;
}
