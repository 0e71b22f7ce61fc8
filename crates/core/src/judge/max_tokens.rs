//! A reply longer than the request allowed: more token chunks, or a reported completion-token count
//! (`usage.completion_tokens`, llama.cpp `timings.predicted_n`, the per-chunk counts' sum) above the
//! request's `max_tokens` (docs/stream.md, "Replies over max_tokens"). Pure: the gate's `max_tokens` and the
//! reply in, a finding out.
//!
//! Every token chunk carries at least one token (a chunk with no token is an empty chunk, not a token
//! chunk: `analysis::reply`), so more token chunks than `max_tokens` means the serve streamed more than it
//! was asked to, whatever it reports; a reported count above `max_tokens` means the serve says so itself (or
//! its count is false). Either way the reply is not the one the request defines:
//! * `[assert.content]` **fails** it (`over_max_tokens: ...`): a serve that ignores `max_tokens` runs away
//!   (cost, latency, a stuck slot), and content judged on a reply the request forbade proves nothing;
//! * `[assert.rate]` **notes** it (`K of N over max_tokens`): the decode rate is still the timing of what was
//!   streamed, but its N may count tokens the request never allowed, so the verdict says so.

use crate::analysis::measure::Figures;
use crate::analysis::reply::Reply;
use crate::vocab::{Note, NoteKind};

/// The `over_max_tokens` finding of one reply, or None when it kept within `max_tokens`. The detail names
/// what exceeded: `12 token chunks, usage.completion_tokens 12, above max_tokens 8`.
pub fn over_max_tokens(reply: &Reply, fig: &Figures, max_tokens: u32) -> Option<Note> {
    let m = u64::from(max_tokens);
    let chunks = reply.token_chunks.len() as u64;
    let per_chunk: Option<u64> = if reply.token_chunks.is_empty() {
        None
    } else {
        reply.token_chunks.iter().map(|t| t.tokens).sum()
    };
    let mut over = Vec::new();
    if chunks > m {
        over.push(format!("{chunks} token chunks"));
    }
    for (what, n) in [
        ("usage.completion_tokens", fig.completion_tokens),
        (
            "timings.predicted_n",
            reply.timings.as_ref().and_then(|t| t.predicted_n),
        ),
        ("the per-chunk token counts' sum", per_chunk),
    ] {
        if let Some(n) = n.filter(|n| *n > m) {
            over.push(format!("{what} {n}"));
        }
    }
    (!over.is_empty()).then(|| {
        Note::new(
            NoteKind::OverMaxTokens,
            format!("{}, above max_tokens {max_tokens}", over.join(", ")),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::reply::TokenChunk;

    fn reply(chunks: usize) -> Reply {
        Reply {
            streamed: true,
            token_chunks: (0..chunks)
                .map(|i| TokenChunk {
                    t_ms: 10.0 * i as f64,
                    content: "x".into(),
                    reasoning: String::new(),
                    tool_call: false,
                    tokens: None,
                    after_ms: None,
                })
                .collect(),
            ..Reply::default()
        }
    }

    #[test]
    fn more_token_chunks_than_max_tokens_is_flagged_naming_the_counts() {
        let r = reply(9);
        let n = over_max_tokens(&r, &Figures::default(), 8).unwrap();
        assert_eq!(n.kind, NoteKind::OverMaxTokens);
        assert_eq!(
            n.detail.as_deref(),
            Some("9 token chunks, above max_tokens 8")
        );
        assert!(over_max_tokens(&r, &Figures::default(), 9).is_none());
    }

    #[test]
    fn a_reported_count_above_max_tokens_is_flagged_even_when_the_chunks_fit() {
        let r = reply(8);
        let fig = Figures {
            completion_tokens: Some(12),
            ..Figures::default()
        };
        let n = over_max_tokens(&r, &fig, 8).unwrap();
        assert_eq!(
            n.detail.as_deref(),
            Some("usage.completion_tokens 12, above max_tokens 8")
        );
        let fig = Figures {
            completion_tokens: Some(8),
            ..Figures::default()
        };
        assert!(over_max_tokens(&r, &fig, 8).is_none());
    }
}
