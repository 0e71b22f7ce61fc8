//! What goes here: replies over `max_tokens` judged in process. A request recorded twice, refused by
//! `servegate judge`, is tests/cli/over_limits.rs.
//!
//! Evidence that says more than the request allowed or than was sent, crafted from a real recorded run of
//! the reference serve (`data/baselines/reference-smoke-drift/w1`: SmolLM2-135M via llama.cpp, max_tokens 64,
//! six judged replies of 8, 64, 64, 8, 64, 64 completion tokens):
//! * a reply over the request's `max_tokens` is flagged `over_max_tokens`; `[assert.content]` fails it and
//!   `[assert.rate]` says so (docs/stream.md, "Replies over max_tokens");
//! * a request index recorded twice is refused by evidence reading with a message naming the file and the
//!   index (docs/evidence.md), never counted twice.

use std::path::Path;

use crate::fixtures::over_limits::copy_run;
use servegate::judge::Outcome;
use servegate::vocab::{AssertionKind, NoteKind};

/// Rewrites the run's copy of its gate with another `max_tokens` (what the request asked, as judged).
fn with_max_tokens(dir: &Path, m: u32) {
    let p = dir.join("gate.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains("max_tokens = 64\n"));
    std::fs::write(
        &p,
        text.replace("max_tokens = 64\n", &format!("max_tokens = {m}\n")),
    )
    .unwrap();
}

fn judge(dir: &Path) -> Vec<servegate::judge::Verdict> {
    let gate = servegate::spec::load(&dir.join("gate.toml")).unwrap();
    let ev = servegate::loaded::load(dir).unwrap();
    servegate::judge::judge(&gate, &ev)
}

fn verdict(vs: &[servegate::judge::Verdict], k: AssertionKind) -> &servegate::judge::Verdict {
    vs.iter().find(|v| v.kind == k).unwrap()
}

#[test]
fn replies_within_max_tokens_are_not_flagged() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    let vs = judge(&dir);
    let content = verdict(&vs, AssertionKind::Content);
    assert!(content.outcome == Outcome::Pass, "{content:?}");
    let rate = verdict(&vs, AssertionKind::Rate);
    assert!(!rate.message.contains("max_tokens"), "{}", rate.message);
}

#[test]
fn replies_over_max_tokens_fail_content_and_the_rate_says_so() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    with_max_tokens(&dir, 32);
    let vs = judge(&dir);
    let content = verdict(&vs, AssertionKind::Content);
    assert!(content.outcome == Outcome::Fail, "{content:?}");
    for r in ["04", "05", "07", "08"] {
        assert!(
            content
                .message
                .contains(&format!("request {r}: over_max_tokens: ")),
            "{}",
            content.message
        );
    }
    assert!(
        content.message.contains("4 of 6 replies fail"),
        "{}",
        content.message
    );
    assert!(
        content.message.contains("usage.completion_tokens 64")
            && content.message.contains("above max_tokens 32"),
        "{}",
        content.message
    );
    assert!(
        !content.message.contains("request 03"),
        "{}",
        content.message
    );
    let rate = verdict(&vs, AssertionKind::Rate);
    assert!(
        rate.message.contains("4 of 6 over max_tokens 32"),
        "{}",
        rate.message
    );
    // The finding is on the reply: the same function flags it for any caller.
    let ev = servegate::loaded::load(&dir).unwrap();
    let r = &ev.requests[4];
    let fig = servegate::analysis::measure::measure(&r.reply);
    let note = servegate::judge::max_tokens::over_max_tokens(&r.reply, &fig, 32).unwrap();
    assert_eq!(note.kind, NoteKind::OverMaxTokens);
}
