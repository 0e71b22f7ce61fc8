//! The load section's schedules and how a client's run is judged against the synthetic serve's truth: the
//! cases ([`LoadCase`], [`load_schedules`]), the serve's truth per request ([`synthetic_truth`]) and one
//! client's figures on one point ([`LoadRun`], [`judge_load`]). Shared by the load section (`bench_load`),
//! its two-runtime rows (`bench_load_cores`) and the peers' load section (`bench_peers_load`).

use serde_json::{json, Value};

use servegate::analysis::stats;
/// One point of the load section: a closed loop of `concurrency` streams against the synthetic serve,
/// `requests` requests in all, each reply `tokens` tokens (one per chunk) after a `ttft_ms` first-token
/// delay and `itl_ms` between tokens. Shared with the peers' load section (same schedules, same truth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadCase {
    /// Requests in flight (closed loop).
    pub concurrency: usize,
    /// Requests sent in all (each stream sends requests / concurrency in turn).
    pub requests: usize,
    /// Completion tokens per reply.
    pub tokens: u32,
    /// The synthetic serve's first-token delay, ms.
    pub ttft_ms: f64,
    /// The synthetic serve's inter-token gap, ms.
    pub itl_ms: f64,
}

impl LoadCase {
    /// The aggregate decode rate the schedule asks for, tok/s: concurrency × 1000 / itl.
    pub fn asked_tok_s(&self) -> f64 {
        self.concurrency as f64 * 1000.0 / self.itl_ms
    }

    /// The `servegate replay --synthetic` arguments serving this case (with `--usage`; the caller adds
    /// `--timing-log`).
    pub fn serve_args(&self) -> Vec<String> {
        vec![
            "--tokens".into(),
            self.tokens.to_string(),
            "--ttft-ms".into(),
            self.ttft_ms.to_string(),
            "--itl-ms".into(),
            self.itl_ms.to_string(),
            "--usage".into(),
        ]
    }

    /// The chat-completion request body every request of the case sends (streamed, usage asked for).
    pub fn body(&self) -> Value {
        json!({"model": "synthetic", "messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": self.tokens, "stream_options": {"include_usage": true}})
    }
}

/// The load section's schedules: concurrency 1, 16, 64 and 256, every stream at 83.3 tok/s (12 ms per
/// token, 64 tokens, first token at 20 ms), 2 × concurrency requests (at least 8) per point. 256 streams ask
/// for 21,333 tok/s while decoding; with the first-token delay and N − 1 gaps a reply takes 776 ms, so the
/// most a perfect client can see is 64 / 0.776 × 256 = 21,100 tok/s: above the 20,000 tok/s target of docs/performance.md (at
/// 12.8 ms per token, the first runs' schedule, that ceiling was 19,824, under the target by construction).
pub fn load_schedules() -> Vec<LoadCase> {
    [1usize, 16, 64, 256]
        .into_iter()
        .map(|c| LoadCase {
            concurrency: c,
            requests: (2 * c).max(8),
            tokens: 64,
            ttft_ms: 20.0,
            itl_ms: 12.0,
        })
        .collect()
}

/// The synthetic serve's truth for one request, from its timing-log line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrueRequest {
    /// The true TTFT: the first token chunk's send time, ms from the request's arrival at the serve.
    pub ttft_ms: f64,
    /// When the request arrived at the serve (`CLOCK_MONOTONIC` ns).
    pub arrived_mono_ns: u64,
    /// Requests in flight at its arrival, itself included.
    pub in_flight: u64,
    /// The true decode rate, tok/s (from the serve's token send times), where it has one.
    pub decode_tok_s: Option<f64>,
}

/// The truth per request number (the `N` of the reply id `chatcmpl-synthetic-N`) from the synthetic
/// serve's timing-log lines; lines without a true TTFT (refusals, unstreamed replies) are left out.
pub fn synthetic_truth(lines: &[Value]) -> std::collections::BTreeMap<u64, TrueRequest> {
    lines
        .iter()
        .filter_map(|l| {
            Some((
                l["request"].as_u64()?,
                TrueRequest {
                    ttft_ms: l["true_ttft_ms"].as_f64()?,
                    arrived_mono_ns: l["arrived_mono_ns"].as_u64().unwrap_or(0),
                    in_flight: l["in_flight"].as_u64().unwrap_or(0),
                    decode_tok_s: l["true_decode_tok_s"].as_f64(),
                },
            ))
        })
        .collect()
}

/// The request number in a synthetic reply's text (the first `chatcmpl-synthetic-N` in it), which keys
/// [`synthetic_truth`].
pub fn reply_seq(text: &str) -> Option<u64> {
    text.split("chatcmpl-synthetic-")
        .nth(1)
        .and_then(|t| t.split(|ch: char| !ch.is_ascii_digit()).next())
        .and_then(|t| t.parse::<u64>().ok())
}

/// One client's figures on one load point.
#[derive(Debug, Default, Clone)]
pub(crate) struct LoadRun {
    pub(crate) requests: usize,
    pub(crate) tokens: u64,
    pub(crate) failed: usize,
    pub(crate) wall_s: f64,
    pub(crate) cpu_s: f64,
    /// Client TTFT − the serve's true TTFT, per request matched by the reply id, ms.
    pub(crate) ttft_err_ms: Vec<f64>,
    /// Client decode rate ÷ the serve's true decode rate − 1, per request, %.
    pub(crate) decode_err_pct: Vec<f64>,
    /// Times the client's thread(s) woke from waiting, where counted (the load client's own count).
    pub(crate) wakeups: Option<u64>,
    /// Timed reads the client kept (the load client's evidence), where counted.
    pub(crate) reads: Option<u64>,
}

impl LoadRun {
    pub(crate) fn us_per_token(&self) -> Option<f64> {
        (self.tokens > 0).then(|| self.cpu_s * 1e6 / self.tokens as f64)
    }
    pub(crate) fn tok_s(&self) -> f64 {
        self.tokens as f64 / self.wall_s
    }
    pub(crate) fn err_p(&self, p: f64) -> Option<f64> {
        stats::percentile(&self.ttft_err_ms, p)
    }
    pub(crate) fn to_json(&self) -> Value {
        json!({"requests": self.requests, "tokens": self.tokens, "failed": self.failed, "wall_s": self.wall_s,
               "aggregate_tok_s": self.tok_s(), "client_cpu_s": self.cpu_s, "us_cpu_per_token": self.us_per_token(),
               "wakeups": self.wakeups, "reads": self.reads,
               "ttft_error_ms": {"median": self.err_p(50.0), "p95": self.err_p(95.0), "n": self.ttft_err_ms.len(), "each": self.ttft_err_ms},
               "decode_error_pct": {"median": stats::percentile(&self.decode_err_pct, 50.0), "n": self.decode_err_pct.len(), "each": self.decode_err_pct}})
    }
}

/// Measures the exchanges of one client against the serve's truth: tokens and failures by the runner's
/// own parser and measure code, the TTFT error per request matched by the reply id.
pub(crate) fn judge_load(
    exchanges: &[servegate::io::client::Exchange],
    truth: &std::collections::BTreeMap<u64, TrueRequest>,
    run: &mut LoadRun,
) {
    for (i, ex) in exchanges.iter().enumerate() {
        let rec = servegate::evidence::RequestRecord {
            index: i,
            stream: true,
            http_status: ex.response.status,
            transport_error: ex.response.transport_error.clone(),
            ..Default::default()
        };
        let reply = servegate::analysis::reply_of(&rec, &ex.reads);
        let fig = servegate::analysis::measure::measure(&reply);
        if fig.failed.is_some() || rec.transport_error.is_some() {
            run.failed += 1;
            continue;
        }
        run.tokens += fig.completion_tokens.unwrap_or(0);
        let text: String = ex
            .reads
            .iter()
            .take(2)
            .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
            .collect();
        if let Some(tr) = reply_seq(&text).and_then(|seq| truth.get(&seq)) {
            if let Some(t) = fig.ttft_ms {
                run.ttft_err_ms.push(t - tr.ttft_ms);
            }
            if let (Some(m), Some(t)) = (fig.decode_tok_s, tr.decode_tok_s) {
                run.decode_err_pct.push((m / t - 1.0) * 100.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_truth_is_keyed_by_the_reply_id() {
        let lines = vec![
            json!({"request": 3, "true_ttft_ms": 20.5, "arrived_mono_ns": 7, "in_flight": 2, "sends": []}),
            json!({"request": 4, "status": 400, "error": "x"}),
        ];
        let t = synthetic_truth(&lines);
        assert_eq!(t.len(), 1);
        assert_eq!(t[&3].ttft_ms, 20.5);
        assert_eq!(t[&3].in_flight, 2);
        let text = r#"data: {"id":"chatcmpl-synthetic-3","object":"chat.completion.chunk"}"#;
        assert_eq!(
            reply_seq(text).and_then(|s| t.get(&s)).map(|x| x.ttft_ms),
            Some(20.5)
        );
        assert_eq!(reply_seq("no id"), None);
        let cases = load_schedules();
        assert_eq!(
            cases.iter().map(|c| c.concurrency).collect::<Vec<_>>(),
            vec![1, 16, 64, 256]
        );
        assert!(cases[3].asked_tok_s() > 20_000.0);
    }
}
