//! The synthetic paced stream (`servegate replay --synthetic`): N tokens with a known first-token delay
//! and inter-token gap, K tokens per chunk, an optional role-only first chunk and usage chunk. Pure: builds
//! the [`Plan`] of one request and computes the true figures from the send times the serve logged.
//!
//! Schedule, in ms from the request's arrival (`ttft` = `--ttft-ms`, `itl` = `--itl-ms` or
//! 1000 / `--tok-s`, chunk j = 0, 1, ... holds tokens jK+1 ..= min(jK+K, N)):
//! * the response head at 0, with the role-only chunk when `--role-chunk` (a first event that is not a
//!   token, as vLLM sends it);
//! * token chunk j at `ttft + j·K·itl`: the first token chunk at exactly `ttft`, then one chunk every K
//!   inter-token gaps, so K tokens per chunk keeps the decode rate at 1000 / itl tok/s;
//! * right after the last token chunk: the finish chunk, the usage chunk (`--usage`: completion_tokens =
//!   N), `data: [DONE]`.
//!
//! `--timings` adds llama.cpp's `timings` (the true figures, [`timings_of`]) to the finish chunk; `--burst`
//! holds every token chunk and writes them all at once at the last one's due time (a buffering proxy).
//!
//! The true figures use servegate's definitions (crates/core/src/analysis/measure.rs) on the serve's own send times: TTFT = send
//! time of the first token chunk; decode rate = (N − tokens of the first chunk) / (last token chunk's send
//! time − first's).

use std::time::Duration;

use super::{Plan, Send, SendKind};

/// The synthetic stream's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    /// Completion tokens per reply (N >= 1).
    pub tokens: u32,
    /// First-token delay from the request's arrival, ms.
    pub ttft_ms: f64,
    /// Gap between consecutive tokens, ms (> 0).
    pub itl_ms: f64,
    /// Tokens per chunk (K >= 1).
    pub per_chunk: u32,
    /// Send a role-only first chunk with the head.
    pub role_chunk: bool,
    /// Send a usage chunk (`usage.completion_tokens = N`) before `[DONE]`.
    pub usage: bool,
    /// The model id in chunks and `/v1/models`.
    pub model: String,
    /// Put llama.cpp `timings` on the finish chunk, with the schedule's true figures: `prompt_n` 8,
    /// `prompt_ms` = `ttft_ms`, `predicted_n` = N, `predicted_ms` = N·itl, `predicted_per_second` = 1000 / itl.
    pub timings: bool,
    /// A buffering proxy: the token chunks are not sent on schedule but all in one write at the last token
    /// chunk's due time (the serve's clock, and its `timings`, still say the true rate).
    pub burst: bool,
    /// Slowdown under concurrency, percent per extra request in flight: a request that arrives while k
    /// requests (itself included) are in flight gets TTFT and inter-token gap scaled by
    /// `1 + slowdown_pct / 100 × (k − 1)` ([`SyntheticSpec::under_load`]); 0 = no slowdown.
    pub slowdown_pct: f64,
}

impl SyntheticSpec {
    /// The spec a request arriving with `k` requests in flight (itself included) is served by: TTFT and
    /// inter-token gap scaled by `1 + slowdown_pct / 100 × (k − 1)`. The scaled values are what the serve
    /// logs as the request's true schedule.
    pub(crate) fn under_load(&self, k: u64) -> SyntheticSpec {
        let f = 1.0 + self.slowdown_pct / 100.0 * (k.max(1) - 1) as f64;
        SyntheticSpec {
            ttft_ms: self.ttft_ms * f,
            itl_ms: self.itl_ms * f,
            ..self.clone()
        }
    }

    /// The decode rate the schedule imposes, tok/s.
    pub(crate) fn tok_s(&self) -> f64 {
        1000.0 / self.itl_ms
    }

    /// Checks the parameters; the error names the flag. Ranges: `--tokens` 1..=[`MAX_TOKENS`],
    /// `--ttft-ms` 0..=[`MAX_MS`], the inter-token gap [`MIN_ITL_MS`]..=[`MAX_MS`] (`--tok-s`
    /// 1000/[`MAX_MS`]..=1000/[`MIN_ITL_MS`]), `--per-chunk` 1..=`--tokens`, the whole reply at most
    /// [`MAX_MS`], a non-empty `--model` of at most 256 bytes.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.tokens == 0 || self.tokens > MAX_TOKENS {
            return Err(format!(
                "--tokens must be between 1 and {MAX_TOKENS}, got {}",
                self.tokens
            ));
        }
        if !(self.ttft_ms.is_finite() && (0.0..=MAX_MS).contains(&self.ttft_ms)) {
            return Err(format!(
                "--ttft-ms must be a number between 0 and {MAX_MS} (one hour), got {:?}",
                self.ttft_ms
            ));
        }
        if !(self.itl_ms.is_finite() && (MIN_ITL_MS..=MAX_MS).contains(&self.itl_ms)) {
            return Err(format!(
                "the inter-token gap must be between {MIN_ITL_MS} and {MAX_MS} ms (--itl-ms; or --tok-s between {:.6} and {}), got {:?} ms",
                1000.0 / MAX_MS,
                1000.0 / MIN_ITL_MS,
                self.itl_ms
            ));
        }
        if self.per_chunk == 0 || self.per_chunk > self.tokens {
            return Err(format!(
                "--per-chunk must be between 1 and --tokens ({}), got {}",
                self.tokens, self.per_chunk
            ));
        }
        let total = self.ttft_ms + f64::from(self.tokens) * self.itl_ms;
        if total > MAX_MS {
            return Err(format!(
                "one reply would take {total:.0} ms (--ttft-ms + --tokens x the inter-token gap); at most {MAX_MS} ms (one hour)"
            ));
        }
        if !(self.slowdown_pct.is_finite() && (0.0..=10_000.0).contains(&self.slowdown_pct)) {
            return Err(format!(
                "--slowdown-pct must be between 0 and 10000, got {:?}",
                self.slowdown_pct
            ));
        }
        if self.model.is_empty() || self.model.len() > 256 {
            return Err(format!(
                "--model must be 1 to 256 bytes, got {}",
                self.model.len()
            ));
        }
        Ok(())
    }
}

/// Most completion tokens one synthetic reply may have.
pub(crate) const MAX_TOKENS: u32 = 1_000_000;
/// Longest first-token delay, inter-token gap and whole reply, ms (one hour).
pub(crate) const MAX_MS: f64 = 3_600_000.0;
/// Shortest inter-token gap, ms (a decode rate of one million tokens per second).
pub(crate) const MIN_ITL_MS: f64 = 0.001;

/// The text of token `i` (1-based): ` t1`, ` t2`, ... (distinct, so the content is never degenerate).
pub(crate) fn token_text(i: u32) -> String {
    format!(" t{i}")
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1000.0)
}

fn event(v: serde_json::Value) -> Vec<u8> {
    format!(
        "data: {}\n\n",
        serde_json::to_string(&v).unwrap_or_default()
    )
    .into_bytes()
}

/// The plan of request `seq`: streamed (SSE, chunked) or one JSON body at the time of the last token.
pub fn plan(spec: &SyntheticSpec, seq: u64, stream: bool) -> Plan {
    let id = format!("chatcmpl-synthetic-{seq}");
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        event(serde_json::json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": spec.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        }))
    };
    let n = spec.tokens;
    let k = spec.per_chunk.max(1);
    let usage =
        serde_json::json!({"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n});
    if !stream {
        let text: String = (1..=n).map(token_text).collect();
        let body = serde_json::json!({
            "id": id, "object": "chat.completion", "created": 0, "model": spec.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage,
        });
        let at = ms(spec.ttft_ms + (n - 1) as f64 * spec.itl_ms);
        return Plan {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            chunked: false,
            head_at: at,
            sends: vec![Send {
                at,
                bytes: serde_json::to_vec(&body).unwrap_or_default(),
                tokens: n,
                kind: SendKind::Body,
            }],
            abort_at: None,
            label: format!("synthetic #{seq} (not streamed)"),
        };
    }
    let mut sends = Vec::new();
    if spec.role_chunk {
        sends.push(Send {
            at: Duration::ZERO,
            bytes: chunk(
                serde_json::json!({"role": "assistant", "content": ""}),
                None,
            ),
            tokens: 0,
            kind: SendKind::Role,
        });
    }
    let mut first = 1u32;
    let mut j = 0u32;
    let mut last_at = ms(spec.ttft_ms);
    while first <= n {
        let last = (first + k - 1).min(n);
        let text: String = (first..=last).map(token_text).collect();
        let at = ms(spec.ttft_ms + (j as f64) * (k as f64) * spec.itl_ms);
        sends.push(Send {
            at,
            bytes: chunk(serde_json::json!({"content": text}), None),
            tokens: last - first + 1,
            kind: SendKind::Token,
        });
        last_at = at;
        first = last + 1;
        j += 1;
    }
    if spec.burst {
        // One write of every token chunk at the last one's due time.
        let first_token = sends
            .iter()
            .position(|s| s.kind == SendKind::Token)
            .unwrap_or(0);
        let held: Vec<Send> = sends.drain(first_token..).collect();
        sends.push(Send {
            at: last_at,
            bytes: held.iter().flat_map(|s| s.bytes.iter().copied()).collect(),
            tokens: held.iter().map(|s| s.tokens).sum(),
            kind: SendKind::Token,
        });
    }
    let finish = if spec.timings {
        let mut v = serde_json::json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": spec.model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]
        });
        v["timings"] = timings_of(spec);
        event(v)
    } else {
        chunk(serde_json::json!({}), Some("stop"))
    };
    sends.push(Send {
        at: last_at,
        bytes: finish,
        tokens: 0,
        kind: SendKind::Finish,
    });
    if spec.usage {
        let u = event(
            serde_json::json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": spec.model, "choices": [], "usage": usage}),
        );
        sends.push(Send {
            at: last_at,
            bytes: u,
            tokens: 0,
            kind: SendKind::Usage,
        });
    }
    sends.push(Send {
        at: last_at,
        bytes: b"data: [DONE]\n\n".to_vec(),
        tokens: 0,
        kind: SendKind::Done,
    });
    Plan {
        status: 200,
        headers: vec![
            ("content-type".into(), "text/event-stream".into()),
            ("cache-control".into(), "no-cache".into()),
            (
                crate::judge::parity::TRUTH_HEADER.into(),
                truth_header(spec, last_at),
            ),
        ],
        chunked: true,
        head_at: Duration::ZERO,
        sends,
        abort_at: None,
        label: format!("synthetic #{seq}"),
    }
}

/// The value of [`crate::judge::parity::TRUTH_HEADER`] for a streamed reply of `spec` whose last token
/// chunk is due at `last_at`: the schedule's TTFT (the first token chunk's due time), TPOT ((last − first
/// token chunk) / (N − 1), left out for one token), the gap between token chunks (K × the inter-token gap,
/// left out for one chunk) and E2E (the last write's due time), ms from the request's arrival, 3 decimals:
/// `ttft_ms=40.000;tpot_ms=10.000;itl_ms=10.000;e2e_ms=110.000`. What a cross-tool parity verdict takes as
/// the truth both clients are held to (`judge::parity`).
pub fn truth_header(spec: &SyntheticSpec, last_at: Duration) -> String {
    let last = last_at.as_secs_f64() * 1000.0;
    let mut parts = vec![format!("ttft_ms={:.3}", spec.ttft_ms)];
    if spec.tokens > 1 {
        parts.push(format!(
            "tpot_ms={:.3}",
            (last - spec.ttft_ms) / f64::from(spec.tokens - 1)
        ));
    }
    if spec.tokens > spec.per_chunk.max(1) {
        parts.push(format!(
            "itl_ms={:.3}",
            f64::from(spec.per_chunk.max(1)) * spec.itl_ms
        ));
    }
    parts.push(format!("e2e_ms={last:.3}"));
    parts.join(";")
}

/// llama.cpp's `timings` object (server `/v1/chat/completions`, final chunk) for the schedule of `spec`: the
/// true figures, whatever the delivery (`burst`) did to the client's view.
pub(crate) fn timings_of(spec: &SyntheticSpec) -> serde_json::Value {
    let n = spec.tokens as f64;
    serde_json::json!({
        "prompt_n": 8,
        "prompt_ms": spec.ttft_ms,
        "prompt_per_token_ms": spec.ttft_ms / 8.0,
        "prompt_per_second": if spec.ttft_ms > 0.0 { 8000.0 / spec.ttft_ms } else { 0.0 },
        "predicted_n": spec.tokens,
        "predicted_ms": n * spec.itl_ms,
        "predicted_per_token_ms": spec.itl_ms,
        "predicted_per_second": spec.tok_s(),
    })
}

/// The true TTFT (ms) and decode rate (tok/s) of one streamed reply from its sends' `(tokens, sent_ms)`:
/// TTFT = the first token chunk's send time; rate = (N − first chunk's tokens) / (last − first) × 1000.
/// `None` where undefined (no token chunk; one token chunk).
pub fn true_figures(sent: &[(u32, f64)]) -> (Option<f64>, Option<f64>) {
    let tokens: Vec<&(u32, f64)> = sent.iter().filter(|(t, _)| *t > 0).collect();
    let Some(first) = tokens.first() else {
        return (None, None);
    };
    let last = tokens[tokens.len() - 1];
    let n: u32 = tokens.iter().map(|(t, _)| t).sum();
    let window = last.1 - first.1;
    let rate = if tokens.len() > 1 && window > 0.0 {
        Some((n - first.0) as f64 / window * 1000.0)
    } else {
        None
    };
    (Some(first.1), rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n: u32, k: u32) -> SyntheticSpec {
        SyntheticSpec {
            tokens: n,
            ttft_ms: 100.0,
            itl_ms: 10.0,
            per_chunk: k,
            role_chunk: true,
            usage: true,
            model: "synthetic".into(),
            slowdown_pct: 0.0,
            timings: false,
            burst: false,
        }
    }

    #[test]
    fn burst_sends_every_token_chunk_in_one_write_and_timings_keep_the_true_rate() {
        let mut s = spec(5, 1);
        s.burst = true;
        s.timings = true;
        let p = plan(&s, 0, true);
        let tokens: Vec<&Send> = p
            .sends
            .iter()
            .filter(|x| x.kind == SendKind::Token)
            .collect();
        assert_eq!(tokens.len(), 1, "one write");
        assert_eq!(tokens[0].tokens, 5);
        assert_eq!(at_ms(tokens[0]), 140.0, "at the last token's due time");
        let text = String::from_utf8(tokens[0].bytes.clone()).unwrap();
        assert_eq!(
            text.matches("data: ").count(),
            5,
            "five events in the write"
        );
        // The client sees no decode window; the serve's timings say the schedule's rate.
        let sent: Vec<(u32, f64)> = p.sends.iter().map(|x| (x.tokens, at_ms(x))).collect();
        assert_eq!(true_figures(&sent).1, None);
        let finish = p.sends.iter().find(|x| x.kind == SendKind::Finish).unwrap();
        let body = String::from_utf8(finish.bytes.clone()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(body.trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(v["timings"]["predicted_per_second"], 100.0);
        assert_eq!(v["timings"]["predicted_n"], 5);
        assert_eq!(v["timings"]["predicted_ms"], 50.0);
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        // Without burst the chunks keep their schedule.
        s.burst = false;
        let p = plan(&s, 0, true);
        assert_eq!(
            p.sends.iter().filter(|x| x.kind == SendKind::Token).count(),
            5
        );
    }

    fn at_ms(s: &Send) -> f64 {
        s.at.as_secs_f64() * 1000.0
    }

    #[test]
    fn first_token_chunk_is_at_ttft_and_chunks_keep_the_rate() {
        let p = plan(&spec(64, 4), 1, true);
        let toks: Vec<&Send> = p
            .sends
            .iter()
            .filter(|s| s.kind == SendKind::Token)
            .collect();
        assert_eq!(toks.len(), 16);
        assert!((at_ms(toks[0]) - 100.0).abs() < 1e-6);
        assert!((at_ms(toks[1]) - 140.0).abs() < 1e-6);
        let sent: Vec<(u32, f64)> = p.sends.iter().map(|s| (s.tokens, at_ms(s))).collect();
        let (ttft, rate) = true_figures(&sent);
        assert!((ttft.unwrap() - 100.0).abs() < 1e-6);
        assert!((rate.unwrap() - 100.0).abs() < 1e-6, "{rate:?}");
    }

    #[test]
    fn role_chunk_comes_first_with_the_head_and_usage_before_done() {
        let p = plan(&spec(3, 1), 7, true);
        let kinds: Vec<SendKind> = p.sends.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            vec![
                SendKind::Role,
                SendKind::Token,
                SendKind::Token,
                SendKind::Token,
                SendKind::Finish,
                SendKind::Usage,
                SendKind::Done
            ]
        );
        assert_eq!(p.sends[0].at, Duration::ZERO);
        let text =
            String::from_utf8(p.sends.iter().flat_map(|s| s.bytes.clone()).collect()).unwrap();
        assert!(
            text.contains("\"completion_tokens\":3")
                && text.contains(" t1")
                && text.ends_with("data: [DONE]\n\n"),
            "{text}"
        );
    }

    #[test]
    fn uneven_last_chunk_carries_the_remainder() {
        let p = plan(&spec(10, 4), 1, true);
        let counts: Vec<u32> = p
            .sends
            .iter()
            .filter(|s| s.kind == SendKind::Token)
            .map(|s| s.tokens)
            .collect();
        assert_eq!(counts, vec![4, 4, 2]);
    }

    #[test]
    fn one_token_has_a_ttft_and_no_rate() {
        assert_eq!(true_figures(&[(0, 0.0), (1, 50.0)]), (Some(50.0), None));
    }

    #[test]
    fn every_parameter_is_range_checked() {
        assert!(spec(64, 4).validate().is_ok());
        let bad = |f: &dyn Fn(&mut SyntheticSpec)| {
            let mut s = spec(64, 4);
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert!(bad(&|s| s.tokens = 0).contains("--tokens"));
        assert!(bad(&|s| s.tokens = MAX_TOKENS + 1).contains("--tokens"));
        assert!(bad(&|s| s.ttft_ms = f64::NAN).contains("--ttft-ms"));
        assert!(bad(&|s| s.ttft_ms = 1e300).contains("--ttft-ms"));
        assert!(bad(&|s| s.itl_ms = 1e303).contains("inter-token gap"));
        assert!(bad(&|s| s.itl_ms = 1e-300).contains("inter-token gap"));
        assert!(bad(&|s| s.per_chunk = 0).contains("--per-chunk"));
        assert!(bad(&|s| s.per_chunk = 65).contains("--per-chunk"));
        assert!(bad(&|s| s.itl_ms = 100_000.0).contains("one reply would take"));
        assert!(bad(&|s| s.model.clear()).contains("--model"));
    }
}
