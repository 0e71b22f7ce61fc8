//! Tests of the figure assertions (`rate`, `first_token`, `tpot`).

use super::*;
// The plan-fitting judge of these tests, not the glob-imported one.
use super::judge;
use crate::analysis::RequestEvidence;
use crate::evidence::RunStatus;
use crate::io::reads::TimedRead;
use crate::judge::verdict::*;
use crate::vocab::{AssertionKind, Bound};

/// The k-th `eval time` line is the k-th answered request's (warmup included): the judged requests get
/// 21.0 and 19.0, the warmup's 40.0 is not judged; with `source = "both"` the client (20.0) and the serve
/// (median 20.0) agree and both hold the floor.
#[test]
pub(super) fn rate_from_a_serve_log_line_is_the_serves_figure_per_request() {
    let ev = log_evidence(LLAMA_CPP_PYTHON_LOG);
    let r = find(&judge(&log_gate("server"), &ev), "rate").clone();
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert_eq!(r.values, vec![Some(21.0), Some(19.0)]);
    assert_eq!(r.median, Some(20.0));
    assert!(
        r.message
            .contains("server-reported (serve.log /llama_perf_context_print"),
        "{}",
        r.message
    );
    let b = find(&judge(&log_gate("both"), &ev), "rate").clone();
    assert_eq!(b.outcome, Outcome::Pass, "{}", b.message);
    assert!(
        b.message
            .contains("server median 20.0 tok/s server-reported (serve.log"),
        "{}",
        b.message
    );
    assert!(
        b.message.contains("client and server 0% apart"),
        "{}",
        b.message
    );
}

/// A line missing (two `eval time` lines for three answered requests): no line is attributed, and the
/// verdict says why; a `tok_s` that is no number gives that request none.
#[test]
pub(super) fn rate_from_a_serve_log_line_refuses_to_guess_when_lines_and_requests_differ() {
    let cut: String = LLAMA_CPP_PYTHON_LOG
        .lines()
        .filter(|l| !l.contains("40.00 tokens per second"))
        .map(|l| format!("{l}\n"))
        .collect();
    let r = find(&judge(&log_gate("server"), &log_evidence(&cut)), "rate").clone();
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
    assert_eq!(r.values, vec![None, None]);
    assert!(
        r.message.contains("serve.log has 2 lines matching"),
        "{}",
        r.message
    );
    assert!(
        r.message
            .contains("for 3 answered requests: which line is whose cannot be told"),
        "{}",
        r.message
    );
    // Without the log source the same evidence has no serve figure at all (no llama.cpp timings).
    let plain = gate_text(&GATE.replace(
        "floor_tok_s = 10.0",
        "floor_tok_s = 10.0\nsource = \"server\"",
    ));
    let p = find(&judge(&plain, &log_evidence(LLAMA_CPP_PYTHON_LOG)), "rate").clone();
    assert!(p.message.contains("no llama.cpp timings"), "{}", p.message);
}

/// The key is checked: only with a serve source, and the regex must name `tok_s`.
#[test]
pub(super) fn rate_server_log_is_refused_without_a_serve_source_or_a_tok_s_group() {
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    let base = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.rate]\nfloor_tok_s = 10.0\n";
    let e = crate::spec::parse(
        std::path::Path::new("g.toml"),
        &format!("{base}server_log = 'eval (?P<tok_s>[0-9.]+) tok'\n"),
        &ctx,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("assert.rate.server_log") && e.contains("only with source"),
        "{e}"
    );
    let e = crate::spec::parse(
        std::path::Path::new("g.toml"),
        &format!("{base}source = \"server\"\nserver_log = 'eval ([0-9.]+) tok'\n"),
        &ctx,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("(?P<tok_s>...)"), "{e}");
}

/// `source = "both"`: client 20.0 tok/s and serve 21.0 tok/s (5 % apart) pass, both figures shown.
#[test]
pub(super) fn rate_both_passes_when_client_and_serve_agree_and_hold_the_floor() {
    let g = both_gate("");
    let ev = evidence(
        Some(2),
        vec![
            request(0, &good_with_timings(21.0), None),
            request(1, &good_with_timings(21.0), None),
        ],
    );
    let v = judge(&g, &ev);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert_eq!(
        r.message,
        "rate PASS client median 20.0 tok/s (floor 10.0; each: 20.0, 20.0; n=2 of 2 planned); server median 21.0 tok/s server-reported (timings.predicted_per_second) (floor 10.0; each: 21.0, 21.0; n=2 of 2 planned); client and server 5% apart (agree within 20%)"
    );
    assert_eq!(r.median, Some(20.0));
    assert_eq!(r.values, vec![Some(20.0), Some(20.0)]);
}

/// Client 20.0 vs serve 30.0 (33 % apart) fails as `client_server_disagree` though both hold the floor;
/// a wider `agree_pct` lets it pass.
#[test]
pub(super) fn rate_both_fails_when_client_and_serve_disagree_beyond_agree_pct() {
    let ev = evidence(Some(1), vec![request(0, &good_with_timings(30.0), None)]);
    let v = judge(&both_gate(""), &ev);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Fail);
    assert!(
        // The cause first, so a shortened console line still shows it.
        r.message.starts_with("rate FAIL client_server_disagree: client and server 33% apart (more than 20%: a client-bound measurement, a buffering proxy or fake streaming); client median"),
        "{}",
        r.message
    );
    let v = judge(&both_gate("agree_pct = 40.0\n"), &ev);
    assert_eq!(find(&v, "rate").outcome, Outcome::Pass);
}

/// The floor must hold on both: a serve figure under the floor fails though the client's holds, and a
/// reply without timings is a missing serve figure (fail, never pass on the client alone).
#[test]
pub(super) fn rate_both_needs_the_floor_on_both_and_the_serve_figure_present() {
    let g = gate_text(&GATE.replace(
        "floor_tok_s = 10.0\n",
        "floor_tok_s = 19.0\nsource = \"both\"\nagree_pct = 50.0\n",
    ));
    let ev = evidence(Some(1), vec![request(0, &good_with_timings(15.0), None)]);
    let r = find(&judge(&g, &ev), "rate").clone();
    assert_eq!(r.outcome, Outcome::Fail);
    // The side under the floor first (what failed it), then the one that holds.
    assert!(
        r.message.starts_with("rate FAIL server median 15.0 tok/s"),
        "{}",
        r.message
    );
    assert!(
        r.message.contains("; client median 20.0 tok/s"),
        "{}",
        r.message
    );
    let ev = evidence(Some(1), vec![request(0, &good(), None)]);
    let r = find(&judge(&g, &ev), "rate").clone();
    assert_eq!(r.outcome, Outcome::Fail);
    assert!(
        r.message.contains("no llama.cpp timings in the reply"),
        "{}",
        r.message
    );
}

/// The results JSON's bound and unit come from the verdict (`sinks::report::with_figures`), so every
/// figure verdict carries the declared bound, even one failed before any value was read.
#[test]
pub(super) fn figure_verdicts_carry_their_kind_and_declared_bound_on_every_path() {
    let mut ev = evidence(Some(4), vec![]);
    ev.run.status = RunStatus::Interrupted;
    let complete = evidence(Some(4), (0..4).map(|i| request(i, &good(), None)).collect());
    for ev in [ev, complete] {
        let v = judge(&gate(), &ev);
        let rate = find(&v, "rate");
        assert_eq!(rate.kind, AssertionKind::Rate);
        assert_eq!(
            rate.bound,
            Some(Bound {
                metric: crate::vocab::Metric::DecodeRate,
                value: 10.0,
                unit: crate::vocab::Unit::TokPerS,
                at_least: true
            })
        );
        let ft = find(&v, "first_token");
        assert_eq!(
            ft.bound.map(|b| (b.value, b.unit.name(), b.at_least)),
            Some((1000.0, "ms", false))
        );
        assert_eq!(find(&v, "content").bound, None);
        assert_eq!(find(&v, "known_answer").kind, AssertionKind::KnownAnswer);
    }
}

/// `good()` with its last three chunks 0.1 ms apart (each its own read): a decode window of 0.3 ms,
/// under the 5 ms minimum, delivered by a client that read them all at once.
pub(super) fn short_window() -> Vec<TimedRead> {
    let mut r = good();
    for (i, t) in [(1, 100.1), (2, 100.2), (3, 100.3)] {
        r[i].t_ms = t;
    }
    r
}

/// A reply the client could not time (its decode window under the minimum) is not measured, never
/// slow: the rate passes on the others, says n=5 of 6 measured and names the cause; with too few
/// measured it is INDETERMINATE, never a pass or a fail; a failed reply still fails.
#[test]
pub(super) fn an_unmeasurable_reply_is_not_a_slow_one() {
    let g = gate();
    let six = |bad: &[usize]| {
        let reqs = (0..6)
            .map(|i| {
                let reads = if bad.contains(&i) {
                    short_window()
                } else {
                    good()
                };
                request(i, &reads, None)
            })
            .collect();
        judge(&g, &evidence(Some(6), reqs))
    };
    let v = six(&[3]);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert_eq!(
        r.message,
        "rate PASS median 20.0 tok/s (floor 10.0; each: 20.0, 20.0, 20.0, -, 20.0, 20.0; n=5 of 6 measured; not measured: request 03 (decode window 0.3 ms under the 5 ms minimum))"
    );
    assert_eq!(r.values[3], None);
    assert!(r.message.len() < 300, "{}", r.message.len());
    // Four of six not measured: under half, so undecided.
    let v = six(&[0, 1, 2, 3]);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    assert!(
        r.message.starts_with("rate INDETERMINATE too few replies measured for a median (at least half the 6 planned;"),
        "{}",
        r.message
    );
    assert!(r.message.contains("n=2 of 6 measured; not measured: request 00 (decode window 0.3 ms under the 5 ms minimum); request 01"), "{}", r.message);
    assert!(r.message.contains("; and 1 more"), "{}", r.message);
    // Half measured decides.
    assert_eq!(find(&six(&[0, 1, 2]), "rate").outcome, Outcome::Pass);
    // A cut reply fails beside an unmeasured one.
    let mut reqs: Vec<RequestEvidence> = (0..5).map(|i| request(i, &good(), None)).collect();
    reqs.push(request(5, &short_window(), None));
    reqs[1] = request(1, &cut(), None);
    let v = judge(&g, &evidence(Some(6), reqs));
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
    assert!(
        r.message
            .contains("1 of 6 replies have no decode rate: request 01 (truncated_stream"),
        "{}",
        r.message
    );
    assert!(
        r.message
            .contains("not measured: request 05 (decode window"),
        "{}",
        r.message
    );
}

/// With `source = "both"`, a reply the client could not time but the serve did is judged on the serve's
/// figure, and the line says so.
#[test]
pub(super) fn rate_both_judges_an_untimeable_reply_on_the_serves_figure() {
    let mut short = short_window();
    short[4] = good_with_timings(21.0)[4].clone();
    let ev = evidence(
        Some(3),
        vec![
            request(0, &good_with_timings(21.0), None),
            request(1, &short, None),
            request(2, &good_with_timings(21.0), None),
        ],
    );
    let v = judge(&both_gate(""), &ev);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert!(
        r.message.starts_with("rate PASS client median 20.0 tok/s (floor 10.0; each: 20.0, server 21.0, 20.0; n=2 of 3 planned; on the serve's figure (the client could not time it): request 01 (decode window 0.3 ms under the 5 ms minimum))"),
        "{}",
        r.message
    );
    // A buffering proxy: the client timed none; the client's line shows no serve figure as its own and
    // counts none as measured by the client.
    let proxied = evidence(Some(3), (0..3).map(|i| request(i, &short, None)).collect());
    let v = judge(&both_gate(""), &proxied);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    assert!(
        r.message.starts_with("rate INDETERMINATE client too few replies measured for a median (at least half the 3 planned; floor 10.0 tok/s; each: server 21.0, server 21.0, server 21.0; n=0 of 3 planned; on the serve's figure"),
        "{}",
        r.message
    );
    // Client-only: the same reply is not measured.
    let v = judge(&gate(), &ev);
    assert!(find(&v, "rate")
        .message
        .contains("n=2 of 3 measured; not measured: request 01"));
}

/// A first token read late together with a later one (kernel-stamped reads, `recv_ms` set) has no
/// measured TTFT: the first_token verdict judges the others and names the cause; the decode window of
/// that reply starts at the read's stamp, so its rate stands.
#[test]
pub(super) fn a_first_token_read_late_with_later_ones_has_no_measured_ttft() {
    let stamped = |late: bool| -> Vec<TimedRead> {
        let mut r = good();
        if late {
            // "Paris" and " is" queued while the client was stopped: one read, the later one's stamp.
            let first = r.remove(0);
            r[0].bytes = [first.bytes, r[0].bytes.clone()].concat();
        }
        for x in r.iter_mut() {
            x.recv_ms = Some(x.t_ms + if late { 40.0 } else { 0.1 });
        }
        r
    };
    let reqs = (0..4).map(|i| request(i, &stamped(i == 2), None)).collect();
    let v = judge(&gate(), &evidence(Some(4), reqs));
    let t = find(&v, "first_token");
    assert_eq!(t.outcome, Outcome::Pass, "{}", t.message);
    assert_eq!(
        t.message,
        "first_token PASS median 100 ms (limit 1000; each: 100, 100, -, 100; n=3 of 4 measured; not measured: request 02 (first token arrived with 1 more while the client was not reading (in 0.0-150.0 ms)))"
    );
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    // (4 − 2) / (250 − 150) ms = 20 tok/s: the late read's two tokens count as arrived at its stamp.
    assert_eq!(r.values[2], Some(20.0), "{}", r.message);
}

/// An untimed prompt is asked for its answer only: known_answer judges it, rate and first_token never
/// see it, and their counts say so.
#[test]
pub(super) fn an_untimed_prompt_feeds_no_timing_verdict() {
    let text = GATE
        .replace(
            "prompts = [\"What is the capital of France?\"]\nrepeats = 4",
            "prompts = [\"What is the capital of France?\", \"Tell me a story.\"]\nrepeats = 2",
        )
        .replace(
            "[assert.known_answer]\nmatches = \"Paris\"\n",
            "[assert.known_answer]\nmatches = \"Paris\"\nprompt = \"What is the capital of France?\"\nuntimed = true\n",
        );
    let g = gate_text(&text);
    assert_eq!(g.request.untimed, ["What is the capital of France?"]);
    let reqs = (0..4)
        .map(|i| {
            let reads = if i % 2 == 0 { short_window() } else { good() };
            let mut r = request(i, &reads, None);
            if i % 2 == 1 {
                r.record.prompt = "Tell me a story.".into();
                r.record.prompt_index = 1;
            }
            r
        })
        .collect();
    let v = judge(&g, &evidence(Some(4), reqs));
    let r = find(&v, "rate");
    assert_eq!(
        r.message,
        "rate PASS median 20.0 tok/s (floor 10.0; each: 20.0, 20.0; n=2 of 2 planned; 2 untimed (answer only))"
    );
    assert_eq!(find(&v, "known_answer").outcome, Outcome::Pass);
}

/// `[assert.tpot]`, judge-table style: (case, gate limit, replies sent, planned, the verdict line).
/// `good()` has TPOT (261 − 100) / (4 − 1) = 53.7 ms.
#[test]
pub(super) fn tpot_table() {
    let one_chunk = || -> Vec<TimedRead> {
        let mut r = good();
        r.drain(1..4);
        r
    };
    type Replies = Vec<Vec<TimedRead>>;
    let cases: Vec<(&str, &str, Replies, usize, &str)> = vec![
        (
            "under the limit",
            "60",
            vec![good(), good(), good()],
            3,
            "tpot PASS median 53.7 ms (limit 60.0; each: 53.7, 53.7, 53.7; n=3 of 3 planned)",
        ),
        (
            "over the limit",
            "50",
            vec![good(), good(), good()],
            3,
            "tpot FAIL median 53.7 ms (limit 50.0; each: 53.7, 53.7, 53.7; n=3 of 3 planned)",
        ),
        (
            "a cut reply is a missing value, never left out of the median",
            "60",
            vec![good(), cut(), good()],
            3,
            "tpot FAIL 1 of 3 replies have no TPOT: request 01 (truncated_stream: no finish_reason, no [DONE]) (limit 60.0 ms; each: 53.7, -, 53.7; n=2 of 3 planned)",
        ),
        (
            "one token chunk has no TPOT: not measured (too few tokens to time), never a failure",
            "60",
            vec![good(), one_chunk()],
            2,
            "tpot PASS median 53.7 ms (limit 60.0; each: 53.7, -; n=1 of 2 measured; not measured: request 01 (one token chunk: no decode window))",
        ),
        (
            "requests never sent",
            "60",
            vec![good(), good()],
            4,
            "tpot FAIL 2 planned requests never sent: requests 02-03 (the run stopped before sending them) (limit 60.0 ms; each: 53.7, 53.7; n=2 of 4 planned)",
        ),
        (
            "no replies at all",
            "60",
            vec![],
            2,
            "tpot FAIL no replies at all: the run holds no judged request: 2 planned requests never sent: requests 00-01 (the run stopped before sending them) (n=0 of 2 planned)",
        ),
    ];
    for (case, limit, replies, planned, want) in cases {
        let toml = format!(
            "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{{port}}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\n[assert.tpot]\nlimit_ms = {limit}\n"
        );
        let ctx = crate::spec::Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        let g = crate::spec::parse(std::path::Path::new("g.toml"), &toml, &ctx).unwrap();
        let sent = replies.len();
        let ev = evidence(
            Some(planned),
            replies
                .iter()
                .enumerate()
                .map(|(i, r)| request(i, r, None))
                .collect(),
        );
        let v = judge(&g, &ev);
        assert_eq!(v.len(), 1, "{case}");
        let t = &v[0];
        assert_eq!(t.message, want, "{case}");
        assert_eq!(t.kind, AssertionKind::Tpot, "{case}");
        assert_eq!(t.passed(), want.starts_with("tpot PASS"), "{case}");
        let lim: f64 = limit.parse().unwrap();
        assert_eq!(
            t.bound,
            Some(Bound {
                metric: crate::vocab::Metric::Tpot,
                value: lim,
                unit: crate::vocab::Unit::Ms,
                at_least: false
            }),
            "{case}"
        );
        if sent > 0 {
            assert_eq!(
                t.values.len(),
                planned,
                "{case}: one value per planned request"
            );
        }
    }
}

/// `good()` with every read `by` ms later: its TTFT `100 + by` ms.
fn late(by: f64) -> Vec<TimedRead> {
    good()
        .into_iter()
        .map(|mut r| {
            r.t_ms += by;
            r
        })
        .collect()
}

/// "Ready is not ready": the first judged reply's TTFT (1900 ms) over 5x the others' (100 ms) is said on the
/// first_token line (the median, 100, passes), on rate's when the gate has no first_token; a cold request
/// later in the run, or one with two others only, is not.
#[test]
fn a_cold_first_request_is_noted_where_its_ttft_is_judged() {
    let g = gate(); // rate, first_token (1000 ms), content, known_answer; 4 planned
    let reqs = |first: f64, at: usize| -> Vec<RequestEvidence> {
        (0..4)
            .map(|i| request(i, &late(if i == at { first } else { 0.0 }), None))
            .collect()
    };
    let v = judge(&g, &evidence(Some(4), reqs(1800.0, 0)));
    let ft = find(&v, "first_token");
    assert_eq!(ft.outcome, Outcome::Pass, "{}", ft.message);
    assert!(
        ft.message.contains("; cold_first_request: request 00's TTFT 1900 ms is 19.0x the median of the other 3 (100 ms;"),
        "{}",
        ft.message
    );
    assert!(!find(&v, "rate").message.contains("cold_first_request"));
    // Later in the run: a slow request, not a cold start.
    let v = judge(&g, &evidence(Some(4), reqs(1800.0, 2)));
    assert!(!find(&v, "first_token")
        .message
        .contains("cold_first_request"));
    // Without [assert.first_token], beside the rate.
    let no_ft = gate_text(&GATE.replace("[assert.first_token]\nlimit_ms = 1000\n", ""));
    let v = judge(&no_ft, &evidence(Some(4), reqs(1800.0, 0)));
    assert!(
        find(&v, "rate")
            .message
            .contains("; cold_first_request: request 00"),
        "{}",
        find(&v, "rate").message
    );
    // Two others are too few to call it.
    let three: Vec<RequestEvidence> = reqs(1800.0, 0).into_iter().take(3).collect();
    let v = judge(&g, &evidence(Some(3), three));
    assert!(!find(&v, "first_token")
        .message
        .contains("cold_first_request"));
}
