//! Tests of the accounting of every planned request.

use super::*;
// The plan-fitting judge of these tests, not the glob-imported one.
use super::judge;
use crate::judge::accounting::*;
use crate::judge::*;

#[test]
pub(super) fn requests_never_sent_fail_every_assertion_and_are_counted_in_n_of_planned() {
    let ev = evidence(
        Some(4),
        vec![request(0, &good(), None), request(1, &good(), None)],
    );
    let a = account(&ev);
    assert_eq!(
        (a.planned, a.sent, a.never_sent.clone()),
        (4, 2, vec![2, 3])
    );
    assert!(!a.whole());
    let v = judge(&gate(), &ev);
    assert!(v.iter().all(|x| !x.passed()), "{v:#?}");
    assert_eq!(
        find(&v, "rate").message,
        "rate FAIL 2 planned requests never sent: requests 02-03 (the run stopped before sending them) (floor 10.0 tok/s; each: 20.0, 20.0; n=2 of 4 planned)"
    );
    // One value per planned request in the JSON values: None for the two never sent.
    assert_eq!(
        find(&v, "rate").values,
        vec![Some(20.0), Some(20.0), None, None]
    );
    assert!(find(&v, "content")
        .message
        .ends_with("2 planned requests never sent: requests 02-03 (the run stopped before sending them) (n=2 of 4 planned)"));
    assert!(find(&v, "known_answer").message.contains("never sent"));
    // All four sent: everything passes, `n=4 of 4 planned`.
    let ev = evidence(Some(4), (0..4).map(|i| request(i, &good(), None)).collect());
    let v = judge(&gate(), &ev);
    assert!(v.iter().all(|x| x.passed()), "{v:#?}");
    assert_eq!(
        find(&v, "first_token").message,
        "first_token PASS median 100 ms (limit 1000; each: 100, 100, 100, 100; n=4 of 4 planned)"
    );
}

#[test]
pub(super) fn a_cut_reply_is_a_missing_value_with_its_reason_never_a_median() {
    // Without the rule the cut reply's two fast chunks (20 tok/s here, any rate in general) would count.
    let ev = evidence(
        Some(3),
        vec![
            request(0, &good(), None),
            request(1, &cut(), None),
            request(2, &good(), None),
        ],
    );
    let v = judge(&gate(), &ev);
    assert_eq!(
        find(&v, "rate").message,
        "rate FAIL 1 of 3 replies have no decode rate: request 01 (truncated_stream: no finish_reason, no [DONE]) (floor 10.0 tok/s; each: 20.0, -, 20.0; n=2 of 3 planned)"
    );
    assert_eq!(
        find(&v, "first_token").message,
        "first_token FAIL 1 of 3 replies have no first token: request 01 (truncated_stream: no finish_reason, no [DONE]) (limit 1000 ms; each: 100, -, 100; n=2 of 3 planned)"
    );
    assert!(find(&v, "known_answer")
        .message
        .starts_with("known_answer FAIL request 01: failed reply: truncated_stream"));
    let failed: Vec<(usize, String)> = account(&ev)
        .failed
        .iter()
        .map(|(i, f)| (*i, f.to_string()))
        .collect();
    assert_eq!(
        failed,
        vec![(
            1,
            "truncated_stream: no finish_reason, no [DONE]".to_string()
        )]
    );
}

#[test]
pub(super) fn a_transport_error_in_the_record_fails_the_request_even_with_a_complete_looking_reply()
{
    let mut r = request(1, &good(), None);
    r.record.transport_error = Some("operation timed out".into());
    let ev = evidence(Some(2), vec![request(0, &good(), None), r]);
    assert_eq!(
        request_failure(&ev.requests[1]).as_deref(),
        Some("transport: operation timed out")
    );
    let v = judge(&gate(), &ev);
    assert!(find(&v, "rate")
        .message
        .contains("request 01 (transport: operation timed out)"));
    assert!(find(&v, "content")
        .message
        .contains("request 01: failed reply: transport: operation timed out"));
    assert!(!find(&v, "first_token").passed());
}

#[test]
pub(super) fn more_judged_requests_than_planned_is_not_a_pass() {
    let ev = evidence(
        Some(1),
        vec![request(0, &good(), None), request(1, &good(), None)],
    );
    let v = judge(&gate(), &ev);
    assert!(find(&v, "rate")
        .message
        .contains("the evidence holds 2 judged requests, more than the 1 planned"));
    assert!(v.iter().all(|x| !x.passed()));
}

#[test]
pub(super) fn older_evidence_without_a_plan_takes_the_recorded_requests_as_the_plan() {
    let ev = evidence(None, vec![request(0, &good(), None)]);
    let a = account(&ev);
    assert!(!a.plan_recorded);
    assert_eq!((a.planned, a.never_sent.len()), (1, 0));
    let v = judge(&gate(), &ev);
    assert!(find(&v, "rate").message.ends_with("n=1 of 1 planned)"));
}

/// A run.json whose `planned` is not the judging gate's (edited, or a run of another gate) never passes:
/// every assertion FAILs naming both counts, `n=K of N planned` with the gate's N; before, its own count
/// was the plan (`"planned": 1` and one good reply: `rate PASS ... n=1 of 1 planned`).
#[test]
pub(super) fn plan_mismatch_fails_every_assertion_naming_both_counts() {
    let ev = evidence(Some(1), vec![request(0, &good(), None)]);
    let v = crate::judge::judge(&gate(), &ev);
    assert_eq!(v.len(), 4);
    for x in &v {
        assert_eq!(x.outcome, Outcome::Fail, "{}", x.message);
        assert!(
            x.message.contains(
                " FAIL run.json says the run planned 1 judged request but the gate plans 4 ([request] repeats 4 x 1 prompt)"
            ) && x.message.ends_with("(n=1 of 4 planned)"),
            "{}",
            x.message
        );
    }
    assert_eq!(gate_planned(&gate()), Some(4));
    assert!(plan_mismatch(&gate(), &evidence(Some(4), vec![])).is_none());
    // Evidence without a plan has none to disagree with.
    assert!(plan_mismatch(&gate(), &evidence(None, vec![])).is_none());
}

#[test]
pub(super) fn a_serve_that_exited_during_the_run_fails_with_its_status_and_log_tail() {
    let mut ev = evidence(
        Some(20),
        vec![
            request(0, &good(), None),
            request(1, &good(), None),
            request(2, &cut(), None),
        ],
    );
    ev.run.serve.failure = Some(
        "server_exited_during_run (exit status 139, 0.4 s after ready): Segmentation fault".into(),
    );
    ev.serve_log = Some("a\nb\nc\nd\ne\nf\nSegmentation fault\n".into());
    let v = judge(&gate(), &ev);
    let rate = &find(&v, "rate").message;
    assert!(
        rate.contains(
            "17 planned requests never sent: requests 03-19 (the serve failed during the run)"
        ),
        "{rate}"
    );
    assert!(rate.contains("n=2 of 20 planned"), "{rate}");
    // The last five non-empty log lines.
    assert!(rate.ends_with("[serve: server_exited_during_run (exit status 139, 0.4 s after ready): Segmentation fault; serve.log ends: \"c\\nd\\ne\\nf\\nSegmentation fault\"]"), "{rate}");
    assert!(v.iter().all(|x| !x.passed()));
}

#[test]
pub(super) fn ranges_are_compact() {
    assert_eq!(ranges(&[3]), "request 03");
    assert_eq!(ranges(&[3, 4, 5, 9, 11, 12]), "requests 03-05, 09, 11-12");
}

/// The n of a per-request figure counts only the replies that gave the value: 9 sent, 6 of them refused
/// (a serve gone mid-run), 3 measured, is `n=3 of 9 planned` for rate, first_token and tpot alike (it said
/// `n=9 of 9 planned` when the failed ones were counted as measured).
#[test]
pub(super) fn the_n_of_a_figure_counts_only_the_replies_that_gave_its_value() {
    let refused = |i| {
        request(
            i,
            &[],
            Some("connect failed: Connection refused (os error 111)"),
        )
    };
    let mut reqs: Vec<_> = (0..3).map(|i| request(i, &good(), None)).collect();
    reqs.extend((3..9).map(refused));
    let ev = evidence(Some(9), reqs);
    let text = GATE.to_string() + "[assert.tpot]\nlimit_ms = 1000\n";
    let v = judge(&gate_text(&text), &ev);
    for name in ["rate", "first_token", "tpot"] {
        let m = &find(&v, name).message;
        assert!(
            m.contains(&format!("{name} FAIL 6 of 9 replies have no ")),
            "{m}"
        );
        assert!(m.contains("; n=3 of 9 planned)"), "{m}");
        assert!(!m.contains("n=9"), "{m}");
    }
}

/// A verdict the replies alone leave undecided (a busy runner timed too few) is failed by the serve's
/// failure, and that failure leads its line, as it does for one that would have passed: it is why the
/// verdict fails (a crash at stop read `rate FAIL 2 replies ... [serve: ...]` without saying it crashed).
#[test]
fn an_undecided_verdict_failed_by_the_serve_says_what_the_serve_did_first() {
    let mut v = Verdict::new(
        AssertionKind::Rate,
        Outcome::Indeterminate,
        "2 of 3 replies untimed (burst in one read)",
    );
    fail_for_serve(
        &mut v,
        "server_crashed_at_stop (signal 11)",
        Some(FailureCode::ServerCrashedAtStop),
    );
    assert_eq!(v.outcome, Outcome::Fail);
    assert!(
        v.details().starts_with(
            "the serve crashed when it was stopped (server_crashed_at_stop (signal 11)); the replies alone: INDETERMINATE 2 of 3"
        ),
        "{}",
        v.details()
    );
}
