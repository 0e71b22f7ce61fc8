//! Measurements: the one place each metric is defined. Pure: [`measure`] takes a [`Reply`] and returns
//! [`Figures`]. docs/metrics.md quotes these definitions.
//!
//! Times are ms since the request was sent (the reply's event times: arrival of the read that completed an
//! SSE event); rates are tokens per second. The definitions follow tests/data/cases/CASES.md, which follows:
//! * **TTFT** — vLLM `benchmark_serving` / AIPerf "time to first token", but stamped on the first *token
//!   chunk* (non-empty content, reasoning or tool call), never on a role-only or empty chunk.
//! * **Decode rate** — output tokens after the first arrival over the decode window, as AIPerf's "output
//!   token throughput per user" (the inverse of its inter-token latency, `(OSL − 1) / (latency − TTFT)`)
//!   but with the window ending at the last *token chunk*, not at the last response:
//!   `(N − n_first) / (t_last_token_chunk − t_first_token_chunk)`, where `n_first` is 1 in the usual case
//!   (see [`measure`] for multi-token chunks and batched reads). vLLM's serving benchmark has no
//!   per-request rate (its output throughput is all tokens over the whole benchmark).
//! * **ITL** — vLLM `benchmark_serving` `itl`: gaps between consecutive token chunks.
//! * **TPOT** — vLLM `benchmark_serving` `tpot` = AIPerf "inter token latency": `(e2e − ttft) / (N − 1)`.
//! * **Server figures** — llama.cpp `timings` as the serve computed them, reported separately.

use crate::analysis::reply::Reply;
use crate::vocab::{Metric, Note, NoteKind};

pub use crate::evidence::figures::{Figures, TokenSource};

/// Relative difference above which client and server decode rates are said to disagree (20 %).
pub const DECODE_MISMATCH_RATIO: f64 = 0.20;

/// Average tokens per token chunk from which, without per-chunk counts, a reply is taken as multi-token
/// (1.5). Below it the excess of N over the chunk count is taken as tokens that produced no text (EOS,
/// special tokens), and the first chunk counts as one token.
pub const MULTI_TOKEN_MIN_AVG: f64 = 1.5;

/// Shortest decode window (ms, first to last token-chunk arrival) a client decode rate is computed over:
/// 5 ms. Each end of the window is a read's arrival stamp, taken when a blocking read returns, which lags
/// the bytes by about 0.3-0.5 ms on an idle machine (docs/performance.md: TTFT error +0.3 to +0.4 ms at up
/// to 1,000 tok/s; more under load). The window must be at least ten times that stamp error, so that the
/// stamping alone moves the rate by at most 2 × 0.5 / 5 = 20 %; below it the figure is noise, and tokens
/// a buffer flushes in quick writes (each event its own read, microseconds apart) always fall under it.
/// One inter-token gap of a 100 tok/s serve (10 ms, the seed run's two-token reply) is still measured.
pub const MIN_DECODE_WINDOW_MS: f64 = 5.0;

/// Widest interval (ms) a token chunk's arrival may be known within for its time to count as measured: 0.5 ms.
///
/// A kernel receive stamp (`SO_TIMESTAMPNS`, a read's `t_ms` when it has `recv_ms`) is the arrival of the last
/// segment the read took; segments that queue while the client is not reading (descheduled, stopped, a
/// throttled container) are coalesced and all carry the last one's stamp. So the last token event of a read
/// arrived at the read's stamp, but an earlier token event of the same read arrived anywhere in
/// `(after_ms, t_ms]` ([`crate::analysis::reply::TokenChunk::after_ms`]: when the client's previous read
/// returned). Such a time is an upper bound, not a measurement, unless that interval is at most this
/// tolerance: 0.5 ms is the stamp error every figure was defined with (a blocking read's own stamp lagged
/// the bytes by 0.3-0.5 ms on an idle machine, docs/performance.md) and the error [`MIN_DECODE_WINDOW_MS`]
/// allows at each end of a window (2 × 0.5 ms of 5 ms, 20 %).
pub const ARRIVAL_TOLERANCE_MS: f64 = 0.5;

/// Why the arrival of token chunk `i` is not known ([`ARRIVAL_TOLERANCE_MS`]), or None when it is: it came
/// in one read with later token chunks (the same stamp), the read was kernel-stamped, and the interval its
/// bytes can have arrived in is wider than the tolerance. `what` names the chunk (`first token`).
fn arrival_unknown(
    tcs: &[crate::analysis::reply::TokenChunk],
    i: usize,
    what: &str,
) -> Option<String> {
    let c = tcs.get(i)?;
    let after = c.after_ms?;
    let later = tcs[i + 1..].iter().take_while(|t| t.t_ms == c.t_ms).count();
    (later > 0 && c.t_ms - after > ARRIVAL_TOLERANCE_MS).then(|| {
        format!(
            "{what} arrived with {later} more while the client was not reading (in {after:.1}-{:.1} ms)",
            c.t_ms
        )
    })
}

/// Largest share of the token chunks after the first arrival that one read (one arrival time) may carry
/// for a decode rate to be computed: one half. When more than half of the counted tokens share one
/// arrival stamp, the rate is set by when a buffer was flushed, not by how fast tokens were decoded (40
/// tokens in two reads 3 ms apart read 6,667 tok/s). A read holding fewer than [`MIN_BURST_CHUNKS`]
/// chunks is never a burst (a multi-token chunk is the serve's own framing, counted by its token count).
pub const MAX_BURST_SHARE: f64 = 0.5;

/// Fewest token chunks in one read for it to count as a burst: 4. A client that reads a moment late finds
/// two or three events waiting on a fast stream (tests/data/cases/CASES.md, case 11: two tokens in one read); a buffer
/// that holds the stream back releases many at once.
pub const MIN_BURST_CHUNKS: usize = 4;

/// Tokens a reply may have produced without any streamed text or chunk of their own: 16 (end-of-turn and
/// EOS tokens, a stop string the serve held back). See [`token_ceiling`].
pub const TEXTLESS_TOKEN_ALLOWANCE: u64 = 16;

/// The most completion tokens a reply's stream could have carried: every token either produced at least one
/// byte of streamed text (content, reasoning, tool-call name and arguments; a byte-fallback tokenizer
/// spends at most one token per byte) or was sent in a data chunk of its own, plus
/// [`TEXTLESS_TOKEN_ALLOWANCE`]. So `text bytes + data chunks + 16`. A serve-reported count above it
/// (usage, timings, per-chunk counts) is flagged `implausible_completion_tokens` and not used for a rate:
/// typical text is about four bytes a token, so an honest count sits far below this ceiling.
pub fn token_ceiling(reply: &Reply) -> u64 {
    let chunk_text: usize = reply
        .token_chunks
        .iter()
        .map(|t| t.content.len() + t.reasoning.len())
        .sum();
    let text = chunk_text.max(reply.content.len() + reply.reasoning.len());
    let tools: usize = reply
        .tool_calls
        .iter()
        .map(|t| t.arguments.len() + t.name.as_deref().map_or(0, str::len))
        .sum();
    let chunks = reply.chunks.max(reply.token_chunks.len());
    (text + tools + chunks) as u64 + TEXTLESS_TOKEN_ALLOWANCE
}

/// Tokens the token chunks carry: the per-chunk counts' sum when the serve gave them, else one a chunk.
fn carried_tokens(k: usize, per_chunk: Option<&[u64]>) -> u64 {
    per_chunk.map_or(k as u64, |pc| pc.iter().sum())
}

/// Where the decode window ends when N counts tokens that no text chunk carried: the event time of the
/// finish chunk, when it came after the last token chunk and N exceeds the tokens the token chunks carry
/// (vLLM's and llama.cpp's usage count the end-of-sequence token, which arrives with the finish chunk one
/// decode step after the last text chunk). `None` otherwise (the window ends at the last token chunk), and
/// for multi-token chunks without per-chunk counts (what the chunks carry is then itself an estimate).
fn eos_window_end(
    reply: &Reply,
    n: u64,
    per_chunk: Option<&[u64]>,
    estimated_share: Option<f64>,
) -> Option<f64> {
    let last = reply.token_chunks.last()?.t_ms;
    let finish = reply.finish_ms?;
    if estimated_share.is_some() || finish <= last {
        return None;
    }
    (n > carried_tokens(reply.token_chunks.len(), per_chunk)).then_some(finish)
}

/// Computes the figures of one reply.
///
/// * `ttft_ms` = event time of the first token chunk; `first_content_ms` = first chunk with non-empty
///   content; `first_event_ms` = first data event of any kind; `e2e_ms` = time of the last read.
///   A non-streamed body has no TTFT and no decode rate (only `e2e_ms`).
/// * **N**, the completion-token count, first available of: `usage.completion_tokens` (source `usage`);
///   llama.cpp `timings.predicted_n` (`timings`, the serve's own total); the sum of per-chunk counts
///   (`per_chunk`, reconstructed from running counters, can miss tokens on non-token chunks); the number of
///   token chunks (`token_chunk_count_estimate`: `completion_tokens` stays `None`, the count goes to
///   `completion_tokens_estimate`, and `decode_note` says so).
/// * **Decode rate** `decode_tok_s = (N − n_first) / (t_last − t_first) × 1000`, t = event times of the
///   first and last token chunks. `n_first` = tokens that had arrived at `t_first`: all token chunks with
///   that same event time (a read holding several events — those tokens were not decoded inside the
///   window), each counted by its per-chunk count when the serve gave them, else as `N / chunks` when the
///   reply is multi-token (average ≥ [`MULTI_TOKEN_MIN_AVG`] tokens per chunk: speculative decoding, batched
///   flushes), else 1. With one token per chunk and one chunk per read this is CASES.md's
///   `(N − 1) / (t_last − t_first)`; at 4 tokens per chunk it does not read ~5 % fast.
/// * **The end-of-sequence token**: when N exceeds the tokens the token chunks carry and the finish chunk
///   came after the last token chunk, t_last is the finish chunk's time (the count and the window describe
///   the same tokens; [`eos_window_end`]). Without it an 8-token vLLM reply read 17 % fast (measured against vLLM).
/// * No decode rate (`None`, with `decode_note`) when the reply is not streamed, has no token chunk, has a
///   zero decode window (one token chunk, or all token chunks in one read: a buffered / flushed-at-once
///   stream, where a rate would be thousands of tok/s of fiction), a window under
///   [`MIN_DECODE_WINDOW_MS`], a burst (one read after the first carrying at least [`MIN_BURST_CHUNKS`]
///   and more than [`MAX_BURST_SHARE`] of the token chunks after the first arrival), or N ≤ n_first.
///   TPOT goes with it in those cases.
/// * A count above [`token_ceiling`] (more tokens than the stream's text and chunks could carry) is not
///   used: warning `implausible_completion_tokens`, and N comes from the next source.
/// * A **failed reply** ([`Reply::failure`] is Some: a serve error, a transport timeout or cut connection,
///   no finish_reason and no `[DONE]`, ...) has no TTFT, no first content time, no decode rate and no TPOT:
///   `failed` holds the reason and `decode_note` says `failed reply: <reason>`. Its partial figures are not
///   figures of a reply.
/// * `itl_ms` = gaps between consecutive token chunks (0 for chunks of one read); `tpot_ms` =
///   `(e2e − ttft) / (N − 1)`, none when N ≤ 1 or when nothing arrived after the first token chunk
///   (`e2e ≤ ttft`: the whole reply in one read, where a TPOT of 0 ms would be the same fiction as an
///   unbounded decode rate).
/// * `server_decode_tok_s` = `timings.predicted_per_second` (else `predicted_n / predicted_ms × 1000`).
///   `server_prefill_tok_s` = `prompt_n / prompt_ms × 1000`, unless part of the prompt came from the
///   cache (`cache_n > 0`, or `usage.prompt_tokens > prompt_n` when `cache_n` is absent): then `None` and
///   warning `prompt_cache_hit cached/total`.
/// * Warning `client_server_disagree` when both decode rates exist and differ by more than
///   [`DECODE_MISMATCH_RATIO`] of the server's.
/// * `usage.completion_tokens_details.reasoning_tokens` is a breakdown of N, never added to it; more
///   reasoning tokens than completion tokens is warning `implausible_reasoning_tokens`.
/// * Warning `tool_calls_with_finish_stop` when the reply has tool calls and `finish_reason` is `stop`.
pub fn measure(reply: &Reply) -> Figures {
    let mut f = Figures {
        first_event_ms: reply.first_event_ms,
        e2e_ms: reply.end_ms,
        ..Default::default()
    };
    let k = reply.token_chunks.len();
    first_token_times(reply, &mut f);
    let count = token_count(reply, &mut f);
    let mut notes: Vec<String> = Vec::new();
    let estimated_share = multi_token_share(&mut f, &count, k, &mut notes);
    let failed = reply.failure();
    let measurable = decode_rate(
        reply,
        &mut f,
        &count,
        estimated_share,
        failed.as_ref(),
        &mut notes,
    );
    let n = count.n;
    if !notes.is_empty() {
        f.decode_note = Some(notes.join("; "));
    }

    // A failed reply's partial timings are not a reply's figures.
    if let Some(why) = failed {
        f.ttft_ms = None;
        f.first_content_ms = None;
        f.ttft_unmeasured = None;
        f.failed = Some(why.to_string());
    }

    // TPOT.
    if reply.streamed && measurable {
        if let (Some(e2e), Some(ttft), Some(n)) = (f.e2e_ms, f.ttft_ms, n) {
            if n > 1 && e2e > ttft {
                f.tpot_ms = Some((e2e - ttft) / (n - 1) as f64);
            }
        }
    }

    server_figures(reply, &mut f);
    usage_and_tool_warnings(reply, &mut f);
    f
}

/// TTFT, first content and the inter-token gaps of a streamed reply; a first token whose arrival is unknown
/// (its read also took later ones) has no TTFT, with the cause.
fn first_token_times(reply: &Reply, f: &mut Figures) {
    let tcs = &reply.token_chunks;
    if reply.streamed {
        f.ttft_ms = tcs.first().map(|t| t.t_ms);
        f.first_content_ms = tcs.iter().find(|t| !t.content.is_empty()).map(|t| t.t_ms);
        f.itl_ms = tcs.windows(2).map(|w| w[1].t_ms - w[0].t_ms).collect();
        // A first token whose read also took later ones while the client was not reading: its stamp is
        // the last one's arrival, an upper bound of the first's.
        if let Some(why) = arrival_unknown(tcs, 0, "first token") {
            f.ttft_ms = None;
            f.ttft_unmeasured = Some(why);
        }
        if let Some(i) = tcs.iter().position(|t| !t.content.is_empty()) {
            if let Some(why) = arrival_unknown(tcs, i, "first content") {
                f.first_content_ms = None;
                f.ttft_unmeasured.get_or_insert(why);
            }
        }
    }
}

/// N (completion tokens) and where it came from, and the per-chunk counts when the serve sent them whole;
/// a count the stream could not have carried is warned about and not used.
struct TokenCount {
    n: Option<u64>,
    source: Option<TokenSource>,
    per_chunk: Option<Vec<u64>>,
}

fn token_count(reply: &Reply, f: &mut Figures) -> TokenCount {
    let tcs = &reply.token_chunks;
    let k = tcs.len();
    // N and where it came from.
    let per_chunk: Option<Vec<u64>> = if k > 0 {
        tcs.iter().map(|t| t.tokens).collect()
    } else {
        None
    };
    let ceiling = token_ceiling(reply);
    let mut implausible = |what: &str, n: Option<u64>| -> Option<u64> {
        let n = n?;
        if n > ceiling {
            f.warnings.push(Note::new(NoteKind::ImplausibleCompletionTokens, format!(
                "{what} {n} is more than the stream could carry (at most {ceiling}: one token per byte of streamed text or per data chunk, + {TEXTLESS_TOKEN_ALLOWANCE}); not used"
            )));
            None
        } else {
            Some(n)
        }
    };
    let usage_n = implausible(
        "usage.completion_tokens",
        reply.usage.as_ref().and_then(|u| u.completion_tokens),
    );
    let timings_n = implausible(
        "timings.predicted_n",
        reply.timings.as_ref().and_then(|t| t.predicted_n),
    );
    let per_chunk = per_chunk.filter(|pc| {
        implausible("the per-chunk token counts' sum", Some(pc.iter().sum())).is_some()
    });
    let (n, source) = if let Some(n) = usage_n {
        (Some(n), Some(TokenSource::Usage))
    } else if let Some(n) = timings_n {
        (Some(n), Some(TokenSource::Timings))
    } else if let Some(pc) = &per_chunk {
        (Some(pc.iter().sum()), Some(TokenSource::PerChunk))
    } else if k > 0 {
        (Some(k as u64), Some(TokenSource::TokenChunkCountEstimate))
    } else {
        (None, None)
    };
    f.completion_tokens_source = source;
    if source == Some(TokenSource::TokenChunkCountEstimate) {
        f.completion_tokens_estimate = n;
    } else {
        f.completion_tokens = n;
    }
    TokenCount {
        n,
        source,
        per_chunk,
    }
}

/// Whether the reply's chunks carry several tokens each (noted), and the first chunk's estimated share of N
/// when there are no per-chunk counts.
fn multi_token_share(
    f: &mut Figures,
    count: &TokenCount,
    k: usize,
    notes: &mut Vec<String>,
) -> Option<f64> {
    let (per_chunk, n, source) = (&count.per_chunk, count.n, count.source);
    match (per_chunk, n) {
        (Some(pc), _) => {
            f.multi_token = pc.iter().any(|&c| c > 1);
            if f.multi_token {
                notes.push(format!("multi-token chunks: per-chunk token counts from the serve ({} tokens in {k} chunks)", pc.iter().sum::<u64>()));
            }
            None
        }
        (None, Some(n)) if source != Some(TokenSource::TokenChunkCountEstimate) && k > 0 => {
            let avg = n as f64 / k as f64;
            if avg >= MULTI_TOKEN_MIN_AVG {
                f.multi_token = true;
                notes.push(format!(
                    "multi-token chunks: {n} tokens in {k} token chunks, no per-chunk counts; first chunk's share estimated as N/chunks = {avg:.2}"
                ));
                Some(avg)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// The client decode rate (N after the first arrival over the decode window), or why it is not measurable
/// (a failed or unstreamed reply, no window, a window under the minimum, a burst); false when not measurable.
fn decode_rate(
    reply: &Reply,
    f: &mut Figures,
    count: &TokenCount,
    estimated_share: Option<f64>,
    failed: Option<&crate::vocab::Failures>,
    notes: &mut Vec<String>,
) -> bool {
    let tcs = &reply.token_chunks;
    let k = tcs.len();
    let (per_chunk, n, source) = (&count.per_chunk, count.n, count.source);
    let mut measurable = true;
    if let Some(why) = failed {
        notes.push(format!("failed reply: {why}"));
        measurable = false;
    } else if !reply.streamed {
        notes.push("not streamed: no per-token timing".into());
    } else if let (Some(first), Some(last), Some(n)) = (tcs.first(), tcs.last(), n) {
        let mut window_ms = last.t_ms - first.t_ms;
        // The end-of-sequence token: counted in N, decoded after the last text chunk, announced by the
        // finish chunk (no text) one decode step later. The window ends where the counted tokens end.
        if let Some(eos) = eos_window_end(reply, n, per_chunk.as_deref(), estimated_share) {
            notes.push(format!(
                "N = {n} counts {} token(s) after the last text chunk (end of sequence): the decode window ends at the finish chunk ({eos:.1} ms), not at the last text chunk ({:.1} ms)",
                n - carried_tokens(k, per_chunk.as_deref()),
                last.t_ms
            ));
            window_ms = eos - first.t_ms;
        }
        let group: Vec<_> = tcs.iter().filter(|t| t.t_ms == first.t_ms).collect();
        let after_first = k - group.len();
        // The largest read after the first: (chunks, arrival time).
        let mut burst = (0usize, 0.0f64);
        let mut i = group.len();
        while i < k {
            let t = tcs[i].t_ms;
            let j = i + tcs[i..].iter().take_while(|c| c.t_ms == t).count();
            if j - i > burst.0 {
                burst = (j - i, t);
            }
            i = j;
        }
        if window_ms.is_nan() || window_ms <= 0.0 {
            measurable = false;
            f.decode_unmeasured = Some(if k == 1 {
                "one token chunk: no decode window".to_string()
            } else {
                format!("all {k} token chunks in one read at {:.1} ms", first.t_ms)
            });
            if k == 1 {
                notes.push("one token chunk: no decode window".into());
            } else {
                notes.push(format!(
                    "no decode window: all {k} token chunks arrived at {} ms (stream flushed at once, e.g. a buffering proxy); decode rate not measurable",
                    first.t_ms
                ));
            }
        } else if window_ms < MIN_DECODE_WINDOW_MS {
            measurable = false;
            f.decode_unmeasured = Some(format!(
                "decode window {window_ms:.1} ms under the {MIN_DECODE_WINDOW_MS} ms minimum"
            ));
            notes.push(format!(
                "decode window {window_ms:.1} ms (first to last token chunk) is under the {MIN_DECODE_WINDOW_MS} ms minimum: decode rate not measurable (ask for more tokens)"
            ));
        } else if burst.0 >= MIN_BURST_CHUNKS
            && burst.0 as f64 > MAX_BURST_SHARE * after_first as f64
        {
            measurable = false;
            f.decode_unmeasured = Some(format!(
                "burst: {} of {after_first} token chunks after the first in one read at {:.1} ms",
                burst.0, burst.1
            ));
            notes.push(format!(
                "burst: {} of the {after_first} token chunks after the first arrival came in one read at {:.1} ms (a buffered or flushed stream): decode rate not measurable",
                burst.0, burst.1
            ));
        } else {
            let n_first: f64 = match (&per_chunk, estimated_share) {
                (Some(_), _) => group.iter().map(|t| t.tokens.unwrap_or(1) as f64).sum(),
                (None, Some(share)) => group.len() as f64 * share,
                (None, None) => group.len() as f64,
            };
            if group.len() > 1 {
                notes.push(format!(
                    "{} token chunks arrived in the first read; they count as arrived at TTFT",
                    group.len()
                ));
            }
            let after = n as f64 - n_first;
            if after > 0.0 {
                f.decode_tok_s = Some(after / window_ms * 1000.0);
                if source == Some(TokenSource::TokenChunkCountEstimate) {
                    notes.push(format!("estimate: N = {n} token chunks, not tokens (the serve reported no token count)"));
                }
            } else {
                f.decode_unmeasured = Some(format!("no tokens after the first arrival (N = {n})"));
                notes.push(format!(
                    "no tokens after the first arrival (N = {n}): no decode rate"
                ));
            }
        }
    } else {
        notes.push("no token chunks: no decode rate".into());
    }
    measurable
}

/// The serve's own figures from llama.cpp `timings`: decode rate, and prefill rate unless part of the prompt
/// came from the cache (warned).
fn server_figures(reply: &Reply, f: &mut Figures) {
    // Server figures (llama.cpp timings).
    if let Some(t) = &reply.timings {
        f.server_decode_tok_s = t
            .predicted_per_second
            .filter(|r| *r > 0.0 && r.is_finite())
            .or_else(|| match (t.predicted_n, t.predicted_ms) {
                (Some(pn), Some(ms)) if pn > 0 && ms > 0.0 => Some(pn as f64 / ms * 1000.0),
                _ => None,
            });
        let cached = t.cache_n.filter(|&c| c > 0).or_else(|| {
            if t.cache_n.is_some() {
                return None;
            }
            let pt = reply.usage.as_ref().and_then(|u| u.prompt_tokens)?;
            let pn = t.prompt_n?;
            pt.checked_sub(pn).filter(|&c| c > 0)
        });
        if let Some(c) = cached {
            let total = c + t.prompt_n.unwrap_or(0);
            f.warnings.push(Note::new(NoteKind::PromptCacheHit, format!(
                "{c}/{total}: prefill rate not measured (use cache_prompt: false or unique prompt prefixes)"
            )));
        } else if let (Some(pn), Some(ms)) = (t.prompt_n, t.prompt_ms) {
            if pn > 0 && ms > 0.0 {
                f.server_prefill_tok_s = Some(pn as f64 / ms * 1000.0);
            }
        }
    }
}

/// Warnings from `usage` and tool calls: more reasoning than completion tokens, tool calls finished by
/// `stop`, client and serve decode rates apart.
fn usage_and_tool_warnings(reply: &Reply, f: &mut Figures) {
    // reasoning_tokens is a part of completion_tokens (OpenAI's completion_tokens_details), never added.
    if let Some(u) = &reply.usage {
        if let (Some(r), Some(c)) = (u.reasoning_tokens, u.completion_tokens) {
            if r > c {
                f.warnings.push(Note::new(
                    NoteKind::ImplausibleReasoningTokens,
                    format!("usage says {r} reasoning tokens of {c} completion tokens (a part cannot exceed the whole)"),
                ));
            }
        }
    }
    if !reply.tool_calls.is_empty() && reply.finish_reason.as_deref() == Some("stop") {
        f.warnings.push(Note::new(
            NoteKind::ToolCallsWithFinishStop,
            format!(
                "{} tool call(s) but finish_reason \"stop\" (OpenAI sends \"tool_calls\"; a client that branches on it misses the calls)",
                reply.tool_calls.len()
            ),
        ));
    }
    if let (Some(c), Some(s)) = (f.decode_tok_s, f.server_decode_tok_s) {
        if (c - s).abs() > DECODE_MISMATCH_RATIO * s {
            f.warnings.push(Note::new(
                NoteKind::ClientServerDisagree,
                format!(
                    "client {c:.1} tok/s vs server {s:.1} tok/s ({:.0}% apart)",
                    (c - s).abs() / s * 100.0
                ),
            ));
        }
    }
}

/// One request's value of a registry metric (the unit is the registry's: ms or tok/s), or None when the
/// request has none or the metric is no single per-request number (ITL is a list of gaps; a pair ratio
/// belongs to a pair, not a request). ITL p90 is computed here from `itl_ms`: the 90th percentile of one
/// reply's gaps (`stats::percentile`, numpy linear), none for a failed reply or one under two token chunks.
pub fn metric_value(f: &Figures, m: Metric) -> Option<f64> {
    match m {
        Metric::Ttft => f.ttft_ms,
        Metric::FirstContent => f.first_content_ms,
        Metric::DecodeRate => f.decode_tok_s,
        Metric::Tpot => f.tpot_ms,
        Metric::E2e => f.e2e_ms,
        Metric::ServerDecodeRate => f.server_decode_tok_s,
        Metric::ServerPrefillRate => f.server_prefill_tok_s,
        // p90 of this reply's gaps (numpy linear, `stats::percentile`); a failed reply's partial gaps are
        // not a reply's figure (as its TTFT and TPOT are not).
        Metric::ItlP90 => match f.failed {
            Some(_) => None,
            None => crate::analysis::stats::percentile(&f.itl_ms, 90.0),
        },
        Metric::Itl | Metric::PairRatio => None,
        // Load-point aggregates (analysis::load), not one request's value.
        Metric::OutputThroughput
        | Metric::RequestThroughput
        | Metric::Goodput
        | Metric::SloAttainment
        | Metric::PeakConcurrency
        | Metric::ScalingEfficiency => None,
        // The serve's footprint: one value per run (run.json serve.ready_ms, serve.footprint).
        Metric::ReadyMs | Metric::ServeRssPeak | Metric::ServeCpuPerToken => None,
    }
}

/// Why a request that did not fail has no value of metric `m` because of how its reply was delivered
/// ([`Figures::decode_unmeasured`] for the decode rate and ITL p90, [`Figures::ttft_unmeasured`] for TTFT
/// and the first content time, either for TPOT), or None: it has a value, it failed, or it lacks one for
/// another reason. Judging counts such a request as not measured (its cause stated), never as slow.
pub fn unmeasured_cause(f: &Figures, m: Metric) -> Option<&str> {
    if f.failed.is_some() || metric_value(f, m).is_some() {
        return None;
    }
    match m {
        Metric::Ttft | Metric::FirstContent => f.ttft_unmeasured.as_deref(),
        Metric::DecodeRate | Metric::ItlP90 => f.decode_unmeasured.as_deref(),
        Metric::Tpot => f
            .ttft_unmeasured
            .as_deref()
            .or(f.decode_unmeasured.as_deref()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
