//! The per-request figures as `run.json` records them (computed by `analysis::measure`, which re-exports
//! these types): a raw evidence schema type, so that evidence does not import the analysis above it.

use serde::{Deserialize, Serialize};

/// Where a completion-token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// `usage.completion_tokens` from the serve.
    Usage,
    /// Per-chunk counts from the serve (llama.cpp `timings_per_token`, vLLM continuous usage).
    PerChunk,
    /// llama.cpp `timings.predicted_n`.
    Timings,
    /// The number of token chunks: an estimate, chunks are not tokens.
    TokenChunkCountEstimate,
}

/// Per-request figures. Times in ms since the request was sent; rates in tok/s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// TTFT: event time of the first token chunk (content, reasoning or tool call).
    pub ttft_ms: Option<f64>,
    /// Time to the first non-empty *content* (excludes reasoning).
    pub first_content_ms: Option<f64>,
    /// Time to the first data event of any kind (e.g. a role-only chunk). Not TTFT.
    pub first_event_ms: Option<f64>,
    /// E2E latency: time of the last read.
    pub e2e_ms: Option<f64>,
    /// Completion tokens as reported (None when the serve did not say; never 0 for "missing").
    pub completion_tokens: Option<u64>,
    /// Token-chunk count when the serve did not report tokens.
    pub completion_tokens_estimate: Option<u64>,
    /// Where the token count N used for the decode rate came from.
    pub completion_tokens_source: Option<TokenSource>,
    /// Decode rate, tok/s, first token excluded: (N - 1) / (t_last_token_chunk - t_first_token_chunk).
    pub decode_tok_s: Option<f64>,
    /// Why decode_tok_s is missing, or how it was obtained when not plain (e.g. "estimate from chunk count").
    pub decode_note: Option<String>,
    /// True when chunks carried more than one token.
    pub multi_token: bool,
    /// Inter-chunk gaps between consecutive token chunks, ms.
    pub itl_ms: Vec<f64>,
    /// TPOT: (e2e - ttft) / (N - 1), ms; none when N ≤ 1 or e2e ≤ ttft.
    pub tpot_ms: Option<f64>,
    /// llama.cpp's own decode rate, `timings.predicted_per_second`, tok/s. A separate, labelled figure.
    pub server_decode_tok_s: Option<f64>,
    /// llama.cpp prefill rate prompt_n / prompt_ms, tok/s; None on a prompt-cache hit.
    pub server_prefill_tok_s: Option<f64>,
    /// Warnings from measuring (e.g. `client_server_disagree`, `prompt_cache_hit 511/512`,
    /// `implausible_completion_tokens`).
    pub warnings: Vec<crate::vocab::Note>,
    /// Why the reply failed on its own terms (`Reply::failure` in `analysis::reply`: a serve error, a transport failure, a cut
    /// stream...). A failed reply has no TTFT, no first content time, no decode rate and no TPOT.
    #[serde(default)]
    pub failed: Option<String>,
    /// Why the decode rate (and TPOT) is missing although the reply did not fail: how it was delivered,
    /// not how fast the serve was (`decode window 0.3 ms under the 5 ms minimum`, a burst, every token
    /// chunk in one read, one token chunk, no tokens after the first arrival). Judging counts such a reply
    /// as not measured (INDETERMINATE for that reply), never as a slow one. None when the rate was measured
    /// or is missing for another reason (a failed or unstreamed reply, no token chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_unmeasured: Option<String>,
    /// Why `ttft_ms` (and TPOT), or `first_content_ms`, is missing although the reply did not fail: the
    /// first token (or first content) arrived in one read with later tokens while the client was not reading, so the read's kernel stamp is only an upper
    /// bound of its arrival (`analysis::measure::ARRIVAL_TOLERANCE_MS`). None when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_unmeasured: Option<String>,
}
