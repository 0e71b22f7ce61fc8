//! A reply's dialect notes (how its serve speaks the stream: no `data: [DONE]`, usage on the finish chunk,
//! several tokens per chunk, ...) by name, as `servegate inspect` lists them, and a run's count of each over
//! its judged replies: what `run.json` keeps per request (`requests[].notes`) and in its notes
//! (`dialect: ...`), and what the results and the Markdown summary show. Pure.

use super::reply::Reply;
use crate::evidence::{Figures, RequestRecord};
use crate::vocab::NoteKind;

/// The names of a reply's notes: its warnings, its figures' warnings and its flags, plus `multi_token` when
/// a chunk carried several tokens; sorted, each once (`servegate inspect`'s `notes`).
pub fn note_names(reply: &Reply, figures: &Figures) -> Vec<String> {
    let mut notes: Vec<String> = reply
        .warnings
        .iter()
        .chain(&figures.warnings)
        .chain(&reply.flags)
        .map(|n| n.name().to_string())
        .collect();
    if figures.multi_token {
        notes.push("multi_token".into());
    }
    notes.sort();
    notes.dedup();
    notes
}

/// Each dialect note over the judged (non-warmup) requests of `records`, with how many replies had it, by
/// name; failures repeated as notes are left out (the verdicts name them). With the count of judged replies.
pub fn counts(records: &[RequestRecord]) -> (Vec<(String, usize)>, usize) {
    let judged: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    let mut out: Vec<(String, usize)> = Vec::new();
    for r in &judged {
        for n in &r.notes {
            if NoteKind::from_name(n).is_none() && n != "multi_token" {
                continue; // a failure code repeated as a note
            }
            match out.iter_mut().find(|(name, _)| name == n) {
                Some((_, k)) => *k += 1,
                None => out.push((n.clone(), 1)),
            }
        }
    }
    out.sort();
    (out, judged.len())
}

/// `dialect: no_done_marker (3 of 3 judged replies), usage_on_finish_chunk (3 of 3 judged replies)`, or None
/// when no judged reply had a note.
pub fn run_note(records: &[RequestRecord]) -> Option<String> {
    let (c, n) = counts(records);
    (!c.is_empty()).then(|| {
        let parts: Vec<String> = c
            .iter()
            .map(|(name, k)| format!("{name} ({k} of {n} judged replies)"))
            .collect();
        format!("dialect: {}", parts.join(", "))
    })
}

/// [`run_note`] for a run on a known engine: when its profile (spec/profile/engines.rs `dialect`) expects
/// notes the replies carry, a clause names them, so a reader comparing serves sees the dialect is the
/// engine's by design, not a fault: `dialect: no_done_marker (3 of 3 judged replies), usage_on_finish_chunk
/// (3 of 3 judged replies); expected of the transformers profile: no_done_marker, usage_on_finish_chunk`.
pub fn run_note_for(
    records: &[RequestRecord],
    engine: Option<crate::spec::profile::Engine>,
) -> Option<String> {
    let note = run_note(records)?;
    let Some(e) = engine else {
        return Some(note);
    };
    let (seen, _) = counts(records);
    let expected: Vec<&str> = e
        .profile()
        .dialect
        .iter()
        .map(|k| k.name())
        .filter(|k| seen.iter().any(|(n, _)| n == k))
        .collect();
    if expected.is_empty() {
        return Some(note);
    }
    Some(format!(
        "{note}; expected of the {} profile: {}",
        e.name(),
        expected.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(index: usize, warmup: bool, notes: &[&str]) -> RequestRecord {
        RequestRecord {
            index,
            warmup,
            notes: notes.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn judged_replies_notes_are_counted_by_name_and_failures_left_out() {
        let recs = [
            rec(0, true, &["no_done_marker"]),
            rec(1, false, &["no_done_marker", "usage_on_finish_chunk"]),
            rec(2, false, &["no_done_marker", "truncated_stream"]),
            rec(3, false, &["multi_token"]),
        ];
        assert_eq!(
            run_note(&recs).unwrap(),
            "dialect: multi_token (1 of 3 judged replies), no_done_marker (2 of 3 judged replies), usage_on_finish_chunk (1 of 3 judged replies)"
        );
        assert_eq!(run_note(&[rec(0, false, &[])]), None);
    }

    #[test]
    fn the_engines_expected_dialect_is_named_and_other_engines_notes_are_left_plain() {
        use crate::spec::profile::Engine;
        let recs = [
            rec(0, false, &["no_done_marker", "usage_on_finish_chunk"]),
            rec(1, false, &["no_done_marker", "usage_on_finish_chunk"]),
        ];
        let plain = run_note(&recs).unwrap();
        assert_eq!(
            run_note_for(&recs, Some(Engine::Transformers)).unwrap(),
            format!("{plain}; expected of the transformers profile: no_done_marker, usage_on_finish_chunk")
        );
        // mistral.rs expects only usage on the finish chunk: a missing [DONE] is not excused by its profile.
        assert_eq!(
            run_note_for(&recs, Some(Engine::MistralRs)).unwrap(),
            format!("{plain}; expected of the mistral.rs profile: usage_on_finish_chunk")
        );
        assert_eq!(run_note_for(&recs, Some(Engine::Vllm)).unwrap(), plain);
        assert_eq!(run_note_for(&recs, None).unwrap(), plain);
        assert_eq!(
            run_note_for(&[rec(0, false, &[])], Some(Engine::Transformers)),
            None
        );
    }
}
