use super::*;
use crate::analysis::reply::{Timings, TokenChunk, Usage};

#[test]
fn itl_p90_is_the_linear_percentile_of_one_replys_gaps() {
    // Gaps 10, 20, 30, 40 ms: h = 3 × 0.9 = 2.7, so 30 + 0.7 × 10 = 37 ms.
    let times = [100.0, 110.0, 130.0, 160.0, 200.0];
    let r = streamed(times.iter().map(|t| tc(*t, None)).collect(), Some(5), 201.0);
    let f = measure(&r);
    let p90 = metric_value(&f, Metric::ItlP90).unwrap();
    assert!((p90 - 37.0).abs() < 1e-9, "{p90}");
    // One token chunk: no gap, no p90 (never a 0).
    let r = streamed(vec![tc(100.0, None)], Some(1), 101.0);
    assert_eq!(metric_value(&measure(&r), Metric::ItlP90), None);
    // A failed reply has no gaps to rank.
    let mut r = streamed(times.iter().map(|t| tc(*t, None)).collect(), Some(5), 201.0);
    r.truncated = true;
    assert_eq!(metric_value(&measure(&r), Metric::ItlP90), None);
}

fn tc(t_ms: f64, tokens: Option<u64>) -> TokenChunk {
    TokenChunk {
        t_ms,
        // Four bytes, so that four tokens per chunk stay under the token ceiling.
        content: "word".into(),
        reasoning: String::new(),
        tool_call: false,
        tokens,
        after_ms: None,
    }
}

fn streamed(chunks: Vec<TokenChunk>, usage_n: Option<u64>, end_ms: f64) -> Reply {
    Reply {
        streamed: true,
        first_event_ms: chunks.first().map(|c| c.t_ms),
        end_ms: Some(end_ms),
        token_chunks: chunks,
        usage: usage_n.map(|n| Usage {
            completion_tokens: Some(n),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn decode_rate_excludes_first_token_and_prefill() {
    // 16 tokens, first at 8000 ms, last at 8600 ms: 15 / 0.6 s = 25 tok/s, not 16 / 8.6 s.
    let chunks = (0..16)
        .map(|i| tc(8000.0 + 40.0 * i as f64, None))
        .collect();
    let f = measure(&streamed(chunks, Some(16), 8607.0));
    assert!(close(f.decode_tok_s, 25.0), "{:?}", f.decode_tok_s);
    assert_eq!(f.ttft_ms, Some(8000.0));
    assert_eq!(f.e2e_ms, Some(8607.0));
    assert_eq!(f.completion_tokens_source, Some(TokenSource::Usage));
    assert_eq!(f.decode_note, None);
    assert!(close(f.tpot_ms, 607.0 / 15.0));
    assert_eq!(f.itl_ms.len(), 15);
    assert!(f.itl_ms.iter().all(|g| (*g - 40.0).abs() < 1e-9));
}

#[test]
fn four_tokens_per_chunk_with_per_chunk_counts_is_exact() {
    // 20 chunks of 4 tokens, 100 ms apart: the true rate is 4 / 0.1 s = 40 tok/s.
    let chunks = (0..20).map(|i| tc(100.0 * i as f64, Some(4))).collect();
    let f = measure(&streamed(chunks, Some(80), 1900.0));
    assert!(close(f.decode_tok_s, 40.0), "{:?}", f.decode_tok_s);
    assert!(f.multi_token);
    assert!(f.decode_note.unwrap().contains("per-chunk"));
}

#[test]
fn four_tokens_per_chunk_from_usage_only_is_exact_and_flagged() {
    let chunks = (0..20).map(|i| tc(100.0 * i as f64, None)).collect();
    let f = measure(&streamed(chunks, Some(80), 1900.0));
    // The naive (N − 1) / window would give 79 / 1.9 s = 41.6 tok/s (4 % fast).
    assert!(close(f.decode_tok_s, 40.0), "{:?}", f.decode_tok_s);
    assert!(f.multi_token);
    assert!(f.decode_note.unwrap().contains("N/chunks"));
}

#[test]
fn one_extra_token_is_not_multi_token() {
    // 12 chunks, usage 13 (an EOS without text): first chunk counts as one token.
    let chunks = (0..12).map(|i| tc(20.0 * i as f64, None)).collect();
    let f = measure(&streamed(chunks, Some(13), 300.0));
    assert!(!f.multi_token);
    assert!(close(f.decode_tok_s, 12.0 / 0.220));
}

#[test]
fn stream_flushed_at_once_has_no_decode_rate() {
    let chunks = (0..50).map(|_| tc(900.0, None)).collect();
    let f = measure(&streamed(chunks, Some(50), 900.0));
    assert_eq!(f.decode_tok_s, None);
    assert!(f.decode_note.unwrap().contains("no decode window"));
    assert_eq!(f.ttft_ms, Some(900.0));
    // No TPOT either: 0 ms per token would be the same fiction.
    assert_eq!(f.tpot_ms, None);
}

#[test]
fn token_chunks_batched_in_the_first_read_count_as_arrived_at_ttft() {
    // Chunks 1-2 in one read at 100 ms, then one per 20 ms: 3 further tokens over 60 ms.
    let chunks = vec![
        tc(100.0, None),
        tc(100.0, None),
        tc(120.0, None),
        tc(140.0, None),
        tc(160.0, None),
    ];
    let f = measure(&streamed(chunks, Some(5), 170.0));
    assert!(close(f.decode_tok_s, 50.0), "{:?}", f.decode_tok_s);
    assert!(f.decode_note.unwrap().contains("first read"));
}

#[test]
fn without_usage_the_chunk_count_is_an_estimate() {
    let chunks = (0..8).map(|i| tc(200.0 + 25.0 * i as f64, None)).collect();
    let f = measure(&streamed(chunks, None, 381.0));
    assert_eq!(f.completion_tokens, None);
    assert_eq!(f.completion_tokens_estimate, Some(8));
    assert_eq!(
        f.completion_tokens_source,
        Some(TokenSource::TokenChunkCountEstimate)
    );
    assert!(close(f.decode_tok_s, 40.0));
    assert!(f.decode_note.unwrap().starts_with("estimate"));
}

#[test]
fn timings_predicted_n_comes_before_per_chunk_and_count() {
    let mut r = streamed(vec![tc(0.0, Some(1)), tc(10.0, Some(1))], None, 20.0);
    r.timings = Some(Timings {
        predicted_n: Some(3),
        ..Default::default()
    });
    let f = measure(&r);
    assert_eq!(f.completion_tokens, Some(3));
    assert_eq!(f.completion_tokens_source, Some(TokenSource::Timings));
    r.timings = None;
    let f = measure(&r);
    assert_eq!(f.completion_tokens, Some(2));
    assert_eq!(f.completion_tokens_source, Some(TokenSource::PerChunk));
}

#[test]
fn prompt_cache_hit_means_no_prefill_rate() {
    let mut r = streamed(vec![tc(0.0, None)], Some(1), 1.0);
    r.timings = Some(Timings {
        cache_n: Some(511),
        prompt_n: Some(1),
        prompt_ms: Some(18.5),
        ..Default::default()
    });
    let f = measure(&r);
    assert_eq!(f.server_prefill_tok_s, None);
    assert!(
        f.warnings
            .iter()
            .any(|w| w.to_string().starts_with("prompt_cache_hit 511/512")),
        "{:?}",
        f.warnings
    );
    r.timings = Some(Timings {
        cache_n: Some(0),
        prompt_n: Some(512),
        prompt_ms: Some(410.0),
        ..Default::default()
    });
    let f = measure(&r);
    assert!(close(f.server_prefill_tok_s, 512.0 / 0.410));
    assert!(f.warnings.is_empty());
}

#[test]
fn cache_hit_is_seen_from_usage_when_cache_n_is_absent() {
    let mut r = streamed(vec![tc(0.0, None)], Some(1), 1.0);
    r.usage = Some(Usage {
        prompt_tokens: Some(32),
        completion_tokens: Some(1),
        total_tokens: None,
        ..Default::default()
    });
    r.timings = Some(Timings {
        prompt_n: Some(1),
        prompt_ms: Some(22.0),
        ..Default::default()
    });
    let f = measure(&r);
    assert_eq!(f.server_prefill_tok_s, None);
    assert!(
        f.warnings
            .iter()
            .any(|w| w.to_string().starts_with("prompt_cache_hit 31/32")),
        "{:?}",
        f.warnings
    );
}

#[test]
fn client_and_server_decode_more_than_20_percent_apart_warn() {
    let chunks = (0..16).map(|i| tc(40.0 * i as f64, None)).collect();
    let mut r = streamed(chunks, Some(16), 700.0);
    r.timings = Some(Timings {
        predicted_per_second: Some(25.0),
        ..Default::default()
    });
    assert!(measure(&r).warnings.is_empty());
    r.timings = Some(Timings {
        predicted_per_second: Some(35.0),
        ..Default::default()
    });
    let f = measure(&r);
    assert!(
        f.warnings
            .iter()
            .any(|w| w.to_string().starts_with("client_server_disagree")),
        "{:?}",
        f.warnings
    );
}

#[test]
fn role_only_first_event_is_not_ttft() {
    let mut r = streamed(vec![tc(214.0, None), tc(234.0, None)], Some(2), 240.0);
    r.first_event_ms = Some(5.0);
    let f = measure(&r);
    assert_eq!(f.first_event_ms, Some(5.0));
    assert_eq!(f.ttft_ms, Some(214.0));
}

/// Tool calls with `finish_reason: "stop"` warn `tool_calls_with_finish_stop`; with `tool_calls` they
/// do not, and neither does `stop` without calls.
#[test]
fn tool_calls_with_finish_stop_warn() {
    let call = crate::analysis::reply::ToolCall {
        index: 0,
        id: None,
        name: Some("f".into()),
        arguments: "{}".into(),
    };
    let warned = |finish: &str, calls: Vec<crate::analysis::reply::ToolCall>| {
        let mut r = streamed(vec![tc(0.0, None), tc(10.0, None)], Some(2), 20.0);
        r.finish_reason = Some(finish.into());
        r.tool_calls = calls;
        crate::vocab::has_note(&measure(&r).warnings, NoteKind::ToolCallsWithFinishStop)
    };
    assert!(warned("stop", vec![call.clone()]));
    assert!(!warned("tool_calls", vec![call]));
    assert!(!warned("stop", vec![]));
}

/// More reasoning tokens than completion tokens is implausible (they are a part of them).
#[test]
fn reasoning_tokens_above_completion_tokens_warn() {
    let mut r = streamed(vec![tc(0.0, None), tc(10.0, None)], Some(2), 20.0);
    r.usage.as_mut().unwrap().reasoning_tokens = Some(2);
    assert!(!crate::vocab::has_note(
        &measure(&r).warnings,
        NoteKind::ImplausibleReasoningTokens
    ));
    r.usage.as_mut().unwrap().reasoning_tokens = Some(3);
    let f = measure(&r);
    assert!(crate::vocab::has_note(
        &f.warnings,
        NoteKind::ImplausibleReasoningTokens
    ));
    assert_eq!(
        f.completion_tokens,
        Some(2),
        "the count stands; the breakdown is only flagged"
    );
}

#[test]
fn reasoning_first_gives_ttft_but_later_first_content() {
    let mut a = tc(100.0, None);
    a.content.clear();
    a.reasoning = "think".into();
    let f = measure(&streamed(vec![a, tc(150.0, None)], Some(2), 160.0));
    assert_eq!(f.ttft_ms, Some(100.0));
    assert_eq!(f.first_content_ms, Some(150.0));
}

#[test]
fn non_streamed_reply_has_e2e_but_no_ttft_or_decode() {
    let r = Reply {
        streamed: false,
        end_ms: Some(260.0),
        usage: Some(Usage {
            completion_tokens: Some(8),
            ..Default::default()
        }),
        ..Default::default()
    };
    let f = measure(&r);
    assert_eq!(f.e2e_ms, Some(260.0));
    assert_eq!(f.ttft_ms, None);
    assert_eq!(f.decode_tok_s, None);
    assert_eq!(f.tpot_ms, None);
    assert_eq!(f.completion_tokens, Some(8));
}

#[test]
fn non_streamed_body_with_usage_says_only_that_it_is_not_streamed() {
    let r = Reply {
        streamed: false,
        end_ms: Some(10.0),
        usage: Some(Usage {
            completion_tokens: Some(8),
            ..Default::default()
        }),
        ..Default::default()
    };
    let f = measure(&r);
    assert!(!f.multi_token);
    assert_eq!(
        f.decode_note.as_deref(),
        Some("not streamed: no per-token timing")
    );
}

#[test]
fn one_token_chunk_and_a_flushed_stream_say_why_there_is_no_window() {
    let f = measure(&streamed(vec![tc(100.0, None)], Some(1), 120.0));
    assert_eq!(f.decode_tok_s, None);
    assert_eq!(
        f.decode_note.as_deref(),
        Some("one token chunk: no decode window")
    );
    assert_eq!(f.tpot_ms, None, "N = 1 has no TPOT");
    let f = measure(&streamed(
        vec![tc(900.0, None), tc(900.0, None)],
        Some(2),
        900.0,
    ));
    assert!(f
        .decode_note
        .unwrap()
        .starts_with("no decode window: all 2 token chunks arrived at 900 ms"));
}

#[test]
fn no_tokens_after_the_first_arrival_means_no_rate() {
    // Two token chunks but the serve counts one token: nothing was decoded after the first arrival.
    let f = measure(&streamed(
        vec![tc(100.0, None), tc(150.0, None)],
        Some(1),
        160.0,
    ));
    assert_eq!(f.decode_tok_s, None);
    assert_eq!(
        f.decode_note.as_deref(),
        Some("no tokens after the first arrival (N = 1): no decode rate")
    );
    assert_eq!(f.tpot_ms, None);
}

#[test]
fn server_decode_rate_falls_back_to_predicted_n_over_predicted_ms() {
    let mut r = streamed(vec![tc(0.0, None)], Some(1), 1.0);
    let rate = |r: &mut Reply, t: Timings| {
        r.timings = Some(t);
        measure(r).server_decode_tok_s
    };
    let t = Timings {
        predicted_n: Some(8),
        predicted_ms: Some(400.0),
        ..Default::default()
    };
    assert!(close(rate(&mut r, t.clone()), 20.0));
    // A zero or missing predicted_per_second is not a rate: the fallback is used.
    assert!(close(
        rate(
            &mut r,
            Timings {
                predicted_per_second: Some(0.0),
                ..t.clone()
            }
        ),
        20.0
    ));
    assert!(close(
        rate(
            &mut r,
            Timings {
                predicted_per_second: Some(-3.0),
                ..t.clone()
            }
        ),
        20.0
    ));
    assert!(close(
        rate(
            &mut r,
            Timings {
                predicted_per_second: Some(31.5),
                ..t.clone()
            }
        ),
        31.5
    ));
    // Nothing to divide: no rate, never inf or NaN.
    assert_eq!(
        rate(
            &mut r,
            Timings {
                predicted_n: Some(0),
                ..t.clone()
            }
        ),
        None
    );
    assert_eq!(
        rate(
            &mut r,
            Timings {
                predicted_ms: Some(0.0),
                ..t.clone()
            }
        ),
        None
    );
    assert_eq!(
        rate(
            &mut r,
            Timings {
                predicted_ms: None,
                ..t
            }
        ),
        None
    );
}

#[test]
fn prefill_rate_needs_tokens_and_time_and_usage_equal_to_prompt_n_is_no_cache_hit() {
    let mut r = streamed(vec![tc(0.0, None)], Some(1), 1.0);
    r.usage = Some(Usage {
        prompt_tokens: Some(32),
        completion_tokens: Some(1),
        total_tokens: None,
        ..Default::default()
    });
    r.timings = Some(Timings {
        prompt_n: Some(32),
        prompt_ms: Some(64.0),
        ..Default::default()
    });
    let f = measure(&r);
    assert!(close(f.server_prefill_tok_s, 500.0));
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    r.timings = Some(Timings {
        prompt_n: Some(32),
        prompt_ms: Some(0.0),
        ..Default::default()
    });
    assert_eq!(measure(&r).server_prefill_tok_s, None);
    r.usage = None;
    r.timings = Some(Timings {
        prompt_n: Some(0),
        prompt_ms: Some(5.0),
        ..Default::default()
    });
    assert_eq!(measure(&r).server_prefill_tok_s, None);
}

#[test]
fn decode_rates_exactly_20_percent_apart_do_not_warn() {
    // Client: 2 tokens after the first over 1000 ms = 2.0 tok/s; server 2.5: |2.0 - 2.5| = 0.2 × 2.5.
    let mut r = streamed(
        vec![tc(0.0, None), tc(500.0, None), tc(1000.0, None)],
        Some(3),
        1001.0,
    );
    r.timings = Some(Timings {
        predicted_per_second: Some(2.5),
        ..Default::default()
    });
    let f = measure(&r);
    assert_eq!(f.decode_tok_s, Some(2.0));
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    r.timings = Some(Timings {
        predicted_per_second: Some(2.6),
        ..Default::default()
    });
    let f = measure(&r);
    assert_eq!(
        f.warnings,
        ["client_server_disagree: client 2.0 tok/s vs server 2.6 tok/s (23% apart)"]
    );
}

#[test]
fn forty_tokens_in_two_reads_3_ms_apart_have_no_decode_rate() {
    // A buffered proxy (token chunks arriving in one burst give no client decode rate): 20 token chunks per read, the two reads 3 ms apart. The
    // window rule and the burst rule each refuse it; spread the reads 300 ms apart and only the burst
    // rule is left to refuse it (20 of the 20 chunks after the first read share one arrival).
    let mk = |gap: f64| -> Vec<TokenChunk> {
        (0..40)
            .map(|i| tc(if i < 20 { 500.0 } else { 500.0 + gap }, None))
            .collect()
    };
    let f = measure(&streamed(mk(3.0), Some(40), 504.0));
    assert_eq!(f.decode_tok_s, None, "not 6,667 tok/s");
    assert!(
        f.decode_note
            .as_deref()
            .unwrap()
            .contains("under the 5 ms minimum"),
        "{:?}",
        f.decode_note
    );
    assert_eq!(f.tpot_ms, None);
    let f = measure(&streamed(mk(300.0), Some(40), 801.0));
    assert_eq!(f.decode_tok_s, None);
    assert!(
        f.decode_note.as_deref().unwrap().contains(
            "burst: 20 of the 20 token chunks after the first arrival came in one read at 800.0 ms"
        ),
        "{:?}",
        f.decode_note
    );
    assert_eq!(f.tpot_ms, None);
    // A first token, then everything else flushed at the end: a burst too.
    let mut chunks = vec![tc(100.0, None)];
    chunks.extend((0..39).map(|_| tc(900.0, None)));
    let f = measure(&streamed(chunks, Some(40), 901.0));
    assert_eq!(f.decode_tok_s, None);
    assert!(f.decode_note.unwrap().contains("burst: 39 of the 39"));
}

#[test]
fn two_or_three_events_in_one_read_are_a_late_read_not_a_burst() {
    // Case 11's shape: one token, then two in one read 40 ms later: (3 − 1) / 40 ms = 50 tok/s.
    let f = measure(&streamed(
        vec![tc(100.0, None), tc(140.0, None), tc(140.0, None)],
        Some(3),
        150.0,
    ));
    assert!(close(f.decode_tok_s, 50.0), "{:?}", f.decode_note);
    // Four of four in one read: a burst.
    let mut chunks = vec![tc(100.0, None)];
    chunks.extend((0..4).map(|_| tc(140.0, None)));
    let f = measure(&streamed(chunks, Some(5), 150.0));
    assert_eq!(f.decode_tok_s, None);
    assert!(f.decode_note.unwrap().contains("burst: 4 of the 4"));
}

#[test]
fn reads_carrying_at_most_half_the_tokens_keep_their_rate() {
    // A proxy flushing every 100 ms, 4 chunks a read after a 1-chunk first read: 4 of 16 is a quarter.
    let mut chunks = vec![tc(100.0, None)];
    for r in 1..=4 {
        chunks.extend((0..4).map(|_| tc(100.0 + 100.0 * r as f64, None)));
    }
    let f = measure(&streamed(chunks, Some(17), 501.0));
    assert!(close(f.decode_tok_s, 16.0 / 0.4), "{:?}", f.decode_note);
    // Two reads after the first, half each: at the bound, measured.
    let mut chunks = vec![tc(0.0, None)];
    chunks.extend((0..3).map(|_| tc(100.0, None)));
    chunks.extend((0..3).map(|_| tc(200.0, None)));
    let f = measure(&streamed(chunks, Some(7), 201.0));
    assert!(close(f.decode_tok_s, 30.0), "{:?}", f.decode_note);
}

#[test]
fn a_window_under_5_ms_has_no_rate_and_5_ms_has_one() {
    // 40 events written one by one from a buffer, 100 µs apart: 39 / 3.9 ms would read 10,000 tok/s.
    let mk = |gap: f64, k: usize| {
        (0..k)
            .map(|i| tc(50.0 + gap * i as f64, None))
            .collect::<Vec<_>>()
    };
    let f = measure(&streamed(mk(0.1, 40), Some(40), 60.0));
    assert_eq!(f.decode_tok_s, None);
    assert!(f.decode_note.unwrap().starts_with("decode window 3.9 ms"));
    assert_eq!(f.tpot_ms, None);
    let f = measure(&streamed(mk(1.25, 5), Some(5), 80.0));
    assert!(close(f.decode_tok_s, 800.0), "{:?}", f.decode_note);
    // One gap of a 98 tok/s serve (the seed run's two-token reply): measured.
    let f = measure(&streamed(mk(10.2, 2), Some(2), 80.0));
    assert!(close(f.decode_tok_s, 1000.0 / 10.2), "{:?}", f.decode_note);
}

#[test]
fn a_usage_count_the_stream_could_not_carry_is_flagged_and_not_used() {
    // 8 chunks of 4 bytes: at most 32 + 8 + 16 = 56 tokens. usage says 4000.
    let chunks: Vec<TokenChunk> = (0..8).map(|i| tc(100.0 + 25.0 * i as f64, None)).collect();
    let f = measure(&streamed(chunks.clone(), Some(4000), 290.0));
    assert!(
        f.warnings.iter().any(|w| w.to_string().starts_with(
            "implausible_completion_tokens: usage.completion_tokens 4000 is more than the stream could carry (at most 56"
        )),
        "{:?}",
        f.warnings
    );
    // Not used: N falls back to the chunk count, an estimate (7 / 0.175 s = 40 tok/s, not 22,851).
    assert_eq!(
        f.completion_tokens_source,
        Some(TokenSource::TokenChunkCountEstimate)
    );
    assert!(close(f.decode_tok_s, 40.0), "{:?}", f.decode_tok_s);
    // At the ceiling: used.
    let f = measure(&streamed(chunks, Some(56), 290.0));
    assert_eq!(f.completion_tokens, Some(56));
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    assert_eq!(
        token_ceiling(&streamed(vec![], None, 1.0)),
        TEXTLESS_TOKEN_ALLOWANCE
    );
}

#[test]
fn a_failed_reply_has_no_ttft_no_rate_and_no_tpot() {
    // Two fast chunks, then the connection closed: no finish_reason, no [DONE].
    let mut r = streamed(vec![tc(5.0, None), tc(40.0, None)], Some(2), 41.0);
    r.truncated = true;
    let f = measure(&r);
    assert_eq!(
        (f.ttft_ms, f.first_content_ms, f.decode_tok_s, f.tpot_ms),
        (None, None, None, None)
    );
    assert_eq!(
        f.failed.as_deref(),
        Some("truncated_stream: no finish_reason, no [DONE]")
    );
    assert_eq!(
        f.decode_note.as_deref(),
        Some("failed reply: truncated_stream: no finish_reason, no [DONE]")
    );
    // A serve error or a transport failure: the same.
    let mut r = streamed(vec![tc(5.0, None), tc(40.0, None)], Some(2), 41.0);
    r.error = Some(crate::analysis::reply::ServeError {
        kind: crate::vocab::FailureCode::Transport,
        message: "operation timed out".into(),
        http_status: None,
        error_type: None,
    });
    let f = measure(&r);
    assert_eq!((f.ttft_ms, f.decode_tok_s), (None, None));
    assert_eq!(f.failed.as_deref(), Some("transport: operation timed out"));
}

/// A token chunk at `t_ms` from a kernel-stamped read taken after the previous one returned at `after`.
fn stamped(t_ms: f64, after: f64) -> TokenChunk {
    TokenChunk {
        after_ms: Some(after),
        ..tc(t_ms, None)
    }
}

#[test]
fn a_first_token_read_late_with_later_ones_has_no_ttft_and_the_window_starts_at_the_stamp() {
    // The client stopped 150 ms: tokens 1-3 queued and came in one read stamped 160 ms (the last one's
    // arrival); then one token per read, 12 ms apart.
    let mut chunks: Vec<TokenChunk> = (0..3).map(|_| stamped(160.0, 0.0)).collect();
    chunks.extend(
        (1..=5).map(|i| stamped(160.0 + 12.0 * i as f64, 160.0 + 12.0 * (i - 1) as f64 + 0.1)),
    );
    let f = measure(&streamed(chunks.clone(), Some(8), 221.0));
    assert_eq!(f.ttft_ms, None, "an upper bound, not a measurement");
    assert_eq!(f.first_content_ms, None);
    assert_eq!(
        f.ttft_unmeasured.as_deref(),
        Some("first token arrived with 2 more while the client was not reading (in 0.0-160.0 ms)")
    );
    assert_eq!(f.tpot_ms, None, "TPOT needs a TTFT");
    // The decode window starts at the stamp, where all three had arrived: (8 − 3) / 60 ms.
    assert!(close(f.decode_tok_s, 5.0 / 0.060), "{:?}", f.decode_note);
    assert_eq!(f.decode_unmeasured, None);
    assert_eq!(
        unmeasured_cause(&f, Metric::Ttft),
        f.ttft_unmeasured.as_deref()
    );
    assert_eq!(unmeasured_cause(&f, Metric::DecodeRate), None);
    // The same read without recv_ms (older evidence, synthetic input): today's rule, TTFT at the read.
    let old: Vec<TokenChunk> = chunks
        .iter()
        .map(|c| TokenChunk {
            after_ms: None,
            ..c.clone()
        })
        .collect();
    let f = measure(&streamed(old, Some(8), 221.0));
    assert_eq!(f.ttft_ms, Some(160.0));
    assert_eq!(f.ttft_unmeasured, None);
    // A first token alone in its read: its own stamp, measured however late the read was.
    let mut alone = chunks.clone();
    alone[0].t_ms = 40.0;
    let f = measure(&streamed(alone, Some(8), 221.0));
    assert_eq!(f.ttft_ms, Some(40.0));
}

#[test]
fn tokens_that_arrived_within_the_tolerance_keep_their_ttft() {
    // Two token events in one read whose previous read returned 0.4 ms before its stamp: known.
    let mut chunks = vec![stamped(100.0, 99.6), stamped(100.0, 99.6)];
    chunks.extend((1..=4).map(|i| stamped(100.0 + 10.0 * i as f64, 100.0 + 10.0 * (i - 1) as f64)));
    let f = measure(&streamed(chunks.clone(), Some(6), 141.0));
    assert_eq!(f.ttft_ms, Some(100.0));
    // 0.6 ms: over the tolerance.
    chunks[0].after_ms = Some(99.4);
    chunks[1].after_ms = Some(99.4);
    let f = measure(&streamed(chunks, Some(6), 141.0));
    assert_eq!(f.ttft_ms, None);
    const { assert!(ARRIVAL_TOLERANCE_MS < MIN_DECODE_WINDOW_MS) };
}

#[test]
fn a_rate_missing_because_of_delivery_names_its_cause_shortly() {
    let mk = |gap: f64, k: usize| {
        (0..k)
            .map(|i| tc(50.0 + gap * i as f64, None))
            .collect::<Vec<_>>()
    };
    let f = measure(&streamed(mk(0.1, 4), Some(4), 60.0));
    assert_eq!(
        f.decode_unmeasured.as_deref(),
        Some("decode window 0.3 ms under the 5 ms minimum")
    );
    assert_eq!(
        unmeasured_cause(&f, Metric::DecodeRate),
        f.decode_unmeasured.as_deref()
    );
    assert_eq!(
        unmeasured_cause(&f, Metric::Tpot),
        f.decode_unmeasured.as_deref()
    );
    let mut chunks = vec![tc(100.0, None)];
    chunks.extend((0..7).map(|_| tc(190.0, None)));
    let f = measure(&streamed(chunks, Some(8), 191.0));
    assert_eq!(
        f.decode_unmeasured.as_deref(),
        Some("burst: 7 of 7 token chunks after the first in one read at 190.0 ms")
    );
    let f = measure(&streamed(vec![tc(100.0, None)], Some(1), 101.0));
    assert_eq!(
        f.decode_unmeasured.as_deref(),
        Some("one token chunk: no decode window")
    );
    // Not delivery: a failed reply, an unstreamed one, one with no tokens.
    let mut r = streamed(mk(0.1, 4), Some(4), 60.0);
    r.truncated = true;
    let f = measure(&r);
    assert_eq!(f.decode_unmeasured, None);
    assert_eq!(unmeasured_cause(&f, Metric::DecodeRate), None);
    assert_eq!(
        measure(&streamed(vec![], Some(0), 10.0)).decode_unmeasured,
        None
    );
}

#[test]
fn empty_reply_measures_nothing_and_does_not_panic() {
    let f = measure(&Reply {
        streamed: true,
        ..Default::default()
    });
    assert_eq!(f.ttft_ms, None);
    assert_eq!(f.completion_tokens_source, None);
    assert_eq!(f.decode_tok_s, None);
}
