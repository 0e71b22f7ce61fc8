//! `[assert.route]`: several log lines (all must appear), a response header per reply, and a run whose replies
//! all failed never passing it (issue 32, friction 1: a gateway with a dead upstream said `route PASS`).

use super::*;
use crate::io::exchange::ResponseMeta;

const BASE: &str = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"What is the capital of France?\"]\nrepeats = 3\n[assert.content]\n";

const GATEWAY_LOG: &str = "proxy: routing model m to deployment primary\nbackend: system_info: n_threads = 1\nlistening\n";

fn route_gate(route: &str) -> GateSpec {
    gate_text(&format!("{BASE}[assert.route]\n{route}\n"))
}

/// A judged reply with response header `x-deployment: value` (None: no such header).
fn with_header(index: usize, reads: &[TimedRead], value: Option<&str>) -> RequestEvidence {
    let mut r = request(index, reads, None);
    let mut meta = ResponseMeta {
        status: Some(200),
        ..Default::default()
    };
    if let Some(v) = value {
        meta.headers.insert("x-deployment".into(), v.into());
    }
    r.response = Some(meta);
    r
}

/// An HTTP 500 reply with an OpenAI error body, as a gateway answers when its upstream is dead.
fn http_500(index: usize) -> RequestEvidence {
    let reads = vec![TimedRead {
        recv_ms: None,
        t_ms: 3.0,
        bytes:
            br#"{"error":{"message":"upstream connect error","type":"server_error","code":500}}"#
                .to_vec(),
    }];
    let mut record = RequestRecord {
        index,
        prompt: "What is the capital of France?".into(),
        stream: true,
        http_status: Some(500),
        ..Default::default()
    };
    record.body_bytes = reads[0].bytes.len() as u64;
    let reply = crate::analysis::reply_of(&record, &reads);
    RequestEvidence {
        record,
        response: None,
        reply,
    }
}

fn run(g: &GateSpec, requests: Vec<RequestEvidence>) -> Verdict {
    let mut ev = evidence(Some(3), requests);
    ev.serve_log = Some(GATEWAY_LOG.into());
    find(&judge(g, &ev), "route").clone()
}

fn three_good() -> Vec<RequestEvidence> {
    (0..3).map(|i| request(i, &good(), None)).collect()
}

#[test]
fn every_fast_line_of_a_list_must_appear() {
    let g = route_gate("fast = ['deployment primary', 'n_threads = 1']");
    let v = run(&g, three_good());
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert_eq!(v.message, "route PASS fast route: serve.log line 1 matches /deployment primary/: \"proxy: routing model m to deployment primary\"; line 2 matches /n_threads = 1/: \"backend: system_info: n_threads = 1\"");
    let g = route_gate("fast = ['deployment primary', 'n_threads = 4']");
    let v = run(&g, three_good());
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert_eq!(v.message, "route FAIL the serve log never says /n_threads = 4/ (3 lines searched; found: /deployment primary/ at line 1): the evidence of the route has to be there");
    // A single string still works, and a one-entry list is the same.
    for fast in ["fast = 'n_threads = 1'", "fast = ['n_threads = 1']"] {
        let v = run(&route_gate(fast), three_good());
        assert_eq!(v.outcome, Outcome::Pass, "{fast}: {}", v.message);
    }
}

/// The litellm trial: the backend's start-up line matched while every reply was HTTP 500. No reply took any
/// route: INDETERMINATE with the cause, never PASS.
#[test]
fn a_log_route_with_every_reply_an_http_500_is_not_a_pass() {
    let g = route_gate("fast = 'n_threads = 1'");
    let v = run(&g, (0..3).map(http_500).collect());
    assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
    assert!(
        v.message.starts_with(
            "route INDETERMINATE no judged reply succeeded (requests 00-02 failed, the first: "
        ),
        "{}",
        v.message
    );
    assert!(v.message.contains("500"), "{}", v.message);
    assert!(
        v.message
            .contains("(n=0 of 3 planned); the log alone: fast route: serve.log line 2"),
        "{}",
        v.message
    );
    // The slow line in the log is still a FAIL, replies or not.
    let g = route_gate("fast = 'n_threads = 1'\nslow = 'listening'");
    let v = run(&g, (0..3).map(http_500).collect());
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    // One good reply of three: the route is judged from the log as before.
    let g = route_gate("fast = 'n_threads = 1'");
    let v = run(
        &g,
        vec![http_500(0), request(1, &good(), None), http_500(2)],
    );
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
}

#[test]
fn the_route_header_is_matched_on_every_judged_reply() {
    let g = route_gate("header = 'X-Deployment'\nheader_fast = '^primary$'");
    let ok: Vec<_> = (0..3)
        .map(|i| with_header(i, &good(), Some("primary")))
        .collect();
    let v = run(&g, ok);
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert_eq!(v.message, "route PASS header x-deployment matches /^primary$/ on 3 of 3 judged replies: \"primary\" (n=3 of 3 planned)");
    // A gateway that fell back to another deployment for one reply, and one reply without the header.
    let v = run(
        &g,
        vec![
            with_header(0, &good(), Some("primary")),
            with_header(1, &good(), Some("fallback\u{1b}[31m")),
            with_header(2, &good(), None),
        ],
    );
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
    assert!(v.message.starts_with("route FAIL header x-deployment: 2 of 3 judged replies not on the fast route /^primary$/: request 01 \"fallback\\u{1b}[31m\", request 02 has no x-deployment header (n=3 of 3 planned)"), "{}", v.message);
    assert!(
        !v.message.contains('\u{1b}'),
        "a header's bytes reach no terminal raw: {}",
        v.message
    );
    // Every reply failed: nothing shows a route.
    let v = run(&g, (0..3).map(http_500).collect());
    assert_eq!(v.outcome, Outcome::Indeterminate, "{}", v.message);
    assert!(
        v.message
            .contains("header x-deployment: no judged reply succeeded"),
        "{}",
        v.message
    );
    // Failed replies are said, the good ones judged.
    let v = run(
        &g,
        vec![
            with_header(0, &good(), Some("primary")),
            http_500(1),
            with_header(2, &good(), Some("primary")),
        ],
    );
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        v.message
            .ends_with("(n=2 of 3 planned; 1 failed reply carries no route evidence)"),
        "{}",
        v.message
    );
}

#[test]
fn log_and_header_parts_both_hold() {
    let g = route_gate("fast = 'n_threads = 1'\nheader = 'x-deployment'\nheader_fast = 'primary'");
    let v = run(
        &g,
        (0..3)
            .map(|i| with_header(i, &good(), Some("primary")))
            .collect(),
    );
    assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
    assert!(
        v.message.contains("serve.log line 2") && v.message.contains("header x-deployment matches"),
        "{}",
        v.message
    );
    let v = run(
        &g,
        (0..3)
            .map(|i| with_header(i, &good(), Some("secondary")))
            .collect(),
    );
    assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
}

#[test]
fn route_keys_that_cannot_mean_something_are_refused() {
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    let parse = |route: &str| {
        crate::spec::parse(
            std::path::Path::new("g.toml"),
            &format!("{BASE}[assert.route]\n{route}\n"),
            &ctx,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
    };
    for (route, key, words) in [
        (
            "header = 'x-d'",
            "assert.route.header",
            "needs `header_fast`",
        ),
        (
            "header_fast = 'p'",
            "assert.route.header_fast",
            "needs `header`",
        ),
        (
            "header = 'x d'\nheader_fast = 'p'",
            "assert.route.header",
            "not an HTTP header name",
        ),
        (
            "slow = 'cpu'\nheader = 'x-d'\nheader_fast = 'p'",
            "assert.route.slow",
            "needs `fast`",
        ),
        ("fast = []", "assert.route.fast", "empty list"),
        (
            "fast = ['ok', '.*']",
            "assert.route.fast[1]",
            "matches the empty text",
        ),
        (
            "fast = 3",
            "assert.route.fast",
            "a string or a list of strings",
        ),
        ("", "assert.route", "names no route"),
    ] {
        let e = parse(route);
        assert!(e.contains(key) && e.contains(words), "{route:?}: {e}");
    }
    // A header-only route needs no serve log: a `url` serve without log_file is fine.
    let url = BASE.replace(
        "command = [\"srv\", \"{port}\"]",
        "url = \"http://127.0.0.1:1\"",
    );
    let g = crate::spec::parse(
        std::path::Path::new("g.toml"),
        &format!("{url}[assert.route]\nheader = 'x-d'\nheader_fast = 'p'\n"),
        &ctx,
    );
    assert!(g.is_ok(), "{:?}", g.err());
}
