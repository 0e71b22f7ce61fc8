//! False passes: results that passed and must not (a reply the serve aborted, a serve that crashes when
//! stopped, a run judged with another gate, patterns that match nonsense, a records check of nothing).
//! Found still green or unclear by a fresh-clone trial, each now a test
//! through the `servegate` binary: a reply the serve aborted, a serve that crashes when stopped, a run re-judged
//! with another gate, patterns that match nonsense. The gates are below; their serve is the scripted serve
//! ([`odd_end`]: what the trial's stdlib `odd_end.py` did). No assertion depends on a timing.

use crate::fixtures;
use servegate::replay::scripted::{Crash, LogLine, Reply, Script, Term};
use std::path::Path;

/// The trial's serve that ends oddly (each gave RESULT: PASS, exit 0, from a clean clone): the model `m`,
/// every reply "Paris is the capital of France ." streamed one word per chunk (the first 20 ms after the
/// head, then 10 ms apart; no role chunk), ended by `finish` (`abort`, as vLLM ends an aborted request), a
/// usage chunk and `[DONE]`; a `req ...` line per request. With `segv_on_term`, SIGTERM makes it print
/// `caught SIGTERM; shutting down` and die of SIGSEGV.
fn odd_end(finish: &str, segv_on_term: bool) -> Script {
    let mut s = Script {
        models: vec!["m".into()],
        reply: Reply {
            stream: Some(true),
            tokens: fixtures::word_tokens("Paris is the capital of France ."),
            first_token_ms: 20.0,
            token_ms: 10.0,
            role_chunk: false,
            finish_reason: Some(finish.into()),
            ..Reply::default()
        },
        request_log: vec![LogLine::err("req \"{method} {path} HTTP/1.1\" {status} -")],
        ..Script::default()
    };
    if segv_on_term {
        s.term = Term::Crash {
            how: Crash::Signal(11),
            log: vec![LogLine::err("caught SIGTERM; shutting down")],
        };
    }
    s
}

const ABORT: &str = r#"[gate]
name = "abort"
description = "every reply ends with finish_reason abort: not one is the model's whole answer"
[serve]
command = SERVE
[request]
model = "m"
max_tokens = 8
prompts = ["What is the capital of France?"]
repeats = 3
[assert.rate]
floor_tok_s = 10.0
[assert.content]
[assert.known_answer]
prompt = "What is the capital of France?"
matches = "Paris"
"#;

const SEGV_AT_STOP: &str = r#"[gate]
name = "segv-at-stop"
description = "answers everything, then dies of SIGSEGV when stopped"
[serve]
command = SERVE
[request]
model = "m"
max_tokens = 8
prompts = ["What is the capital of France?"]
repeats = 3
[assert.rate]
floor_tok_s = 10.0
[assert.content]
"#;

fn servegate(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = fixtures::servegate()
        // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
        .env("SERVEGATE_VERBOSE", "1")
        .args(args)
        .current_dir(dir)
        .env("SERVEGATE_RUNS", dir.join("runs"))
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (f, gate, serve) in [
        ("abort.toml", ABORT, odd_end("abort", false)),
        ("segv-at-stop.toml", SEGV_AT_STOP, odd_end("stop", true)),
    ] {
        let text = gate.replace("SERVE", &fixtures::scripted_command(&serve));
        std::fs::write(tmp.path().join(f), text).unwrap();
    }
    tmp
}

fn line<'a>(out: &'a str, prefix: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{out}"))
}

/// vLLM ends an aborted request with `finish_reason: "abort"`; before, eight tokens and an abort passed rate,
/// content and known_answer. Such a reply is not the model's whole answer: it has no figures and fails content
/// and the known answer, naming the finish_reason.
#[test]
fn a_reply_the_serve_aborted_fails_every_assertion_naming_its_finish_reason() {
    let tmp = scratch();
    let (code, out, err) = servegate(tmp.path(), &["run", "abort.toml"]);
    assert_eq!(code, 1, "{out}\n{err}");
    for a in ["rate FAIL", "content FAIL", "known_answer FAIL"] {
        let l = line(&out, a);
        assert!(
            l.contains("abnormal_finish: finish_reason \"abort\""),
            "{l}"
        );
    }
    assert!(line(&out, "rate FAIL").contains("each: -, -, -; n=0 of 3 planned"));
    assert!(out.contains("RESULT: FAIL"), "{out}");
}

/// A serve that answered everything and then died of SIGSEGV on the runner's SIGTERM gave `RESULT: PASS`, the
/// crash only in a progress line. A crashed serve fails the gate, with its signal and log tail.
#[test]
fn a_serve_that_crashes_when_stopped_fails_the_gate() {
    let tmp = scratch();
    let (code, out, err) = servegate(tmp.path(), &["run", "segv-at-stop.toml"]);
    assert_eq!(code, 1, "{out}\n{err}");
    for a in ["rate FAIL", "content FAIL"] {
        let l = line(&out, a);
        assert!(
            l.contains("the serve crashed when it was stopped (server_crashed_at_stop (signal 11"),
            "{l}"
        );
        assert!(l.contains("caught SIGTERM"), "the log tail is quoted: {l}");
    }
    // The run's own record says so too, and a re-judge agrees.
    let runs = tmp.path().join("runs/segv-at-stop");
    let dir = std::fs::read_dir(&runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert!(run["serve"]["failure"]
        .as_str()
        .unwrap()
        .starts_with("server_crashed_at_stop"));
    let (code, out, _) = servegate(tmp.path(), &["judge", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
}

/// `servegate judge RUN --gate OTHER.toml` printed `gate d2 ... RESULT: PASS` for a run of another gate. A run
/// is judged with its own gate or an edited copy of it (same [gate] name); another gate is refused.
#[test]
fn judging_a_run_with_another_gate_is_refused() {
    let tmp = scratch();
    let (code, out, err) = servegate(tmp.path(), &["run", "abort.toml"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let dir = std::fs::read_dir(tmp.path().join("runs/abort"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (code, out, err) = servegate(
        tmp.path(),
        &[
            "judge",
            dir.to_str().unwrap(),
            "--gate",
            "segv-at-stop.toml",
        ],
    );
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("is gate `segv-at-stop`") && err.contains("a run of gate `abort`"),
        "{err}"
    );
    assert!(!out.contains("RESULT: PASS"), "{out}");
    // An edited copy that keeps the name is still judged (here: a known answer it cannot meet).
    let edited = std::fs::read_to_string(tmp.path().join("abort.toml")).unwrap();
    std::fs::write(
        tmp.path().join("edited.toml"),
        edited.replace(r#"matches = "Paris""#, r#"matches = "Lyon""#),
    )
    .unwrap();
    let (code, out, _) = servegate(
        tmp.path(),
        &["judge", dir.to_str().unwrap(), "--gate", "edited.toml"],
    );
    assert_eq!(code, 1, "{out}");
}

/// `fast = "."` and `fast = "\\b|x"` passed `check` and then matched line 1 of any log. A pattern that matches
/// nonsense lines matches almost anything, and is refused with its line and key, like one matching "".
#[test]
fn patterns_that_match_nonsense_are_refused_at_check() {
    let tmp = scratch();
    let base = "[gate]\nname = \"p\"\n[serve]\ncommand = [\"true\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\n";
    for (table, pat) in [
        ("[assert.route]\nfast = ", r#"".""#),
        ("[assert.route]\nfast = ", r#""\\b|x""#),
        ("[assert.route]\nfast = \"ok\"\nslow = ", r#""\\w""#),
        (
            "[assert.known_answer]\nprompt = \"hi\"\nmatches = ",
            r#""[a-z]""#,
        ),
    ] {
        let gate = format!("{base}{table}{pat}\n");
        std::fs::write(tmp.path().join("p.toml"), &gate).unwrap();
        let (code, out, err) = servegate(tmp.path(), &["check", "p.toml"]);
        assert_eq!(code, 3, "{pat}: {out}\n{err}");
        let last_line = gate.lines().count();
        assert!(
            err.contains(&format!("p.toml:{last_line}:")),
            "{pat}: {err}"
        );
        assert!(err.contains("nonsense lines"), "{pat}: {err}");
    }
    // A real pattern is fine.
    let gate = format!("{base}[assert.route]\nfast = \"system_info: n_threads = 1\"\n");
    std::fs::write(tmp.path().join("p.toml"), gate).unwrap();
    let (code, _, err) = servegate(tmp.path(), &["check", "p.toml"]);
    assert_eq!(code, 0, "{err}");
}

/// `servegate records check --dir` of a folder with no record said `0 checked ... 0 problems` and exited 0:
/// a check that checked nothing is not green (exit 7, as everywhere else).
#[test]
fn records_check_of_a_folder_without_records_checked_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, err) = servegate(
        tmp.path(),
        &["records", "check", "--dir", tmp.path().to_str().unwrap()],
    );
    assert_eq!(code, 7, "{out}\n{err}");
    assert!(err.contains("nothing was checked"), "{err}");
}

/// A gateway (litellm's proxy in the issue 32 trial) whose upstream is dead: it logs its backend's start-up
/// line, then answers every request with HTTP 500. `route` said PASS from the log alone; no reply took any
/// route, so it is INDETERMINATE with the cause, and the gate does not pass.
#[test]
fn a_gateway_whose_every_reply_is_an_http_500_never_passes_route() {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = odd_end("stop", false);
    s.start.log = vec![LogLine::err("backend: system_info: n_threads = 1")];
    s.reply = Reply {
        status: 500,
        body: Some(
            r#"{"error":{"message":"upstream connect error","type":"server_error"}}"#.into(),
        ),
        ..Reply::default()
    };
    let gate = format!(
        "[gate]\nname = \"dead-upstream\"\n[serve]\ncommand = {}\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\nrepeats = 3\n[assert.route]\nfast = [\"n_threads = 1\", \"backend:\"]\n",
        fixtures::scripted_command(&s)
    );
    std::fs::write(tmp.path().join("g.toml"), gate).unwrap();
    let (code, out, err) = servegate(tmp.path(), &["run", "g.toml"]);
    assert_ne!(code, 0, "{out}\n{err}");
    let l = line(&out, "route ");
    assert!(
        l.starts_with(
            "route INDETERMINATE no judged reply succeeded (requests 00-02 failed, the first: "
        ),
        "{l}"
    );
    assert!(l.contains("500") && l.contains("n=0 of 3 planned"), "{l}");
    assert!(!out.contains("RESULT: PASS"), "{out}");
}

/// Per-reply route evidence: a gateway names the deployment it chose in a response header. Every judged reply
/// must carry it matching `header_fast`; one that fell back to another deployment, or that lacks the header,
/// FAILs route with the count, and the header's bytes (an 8-bit CSI, which HTTP allows as obs-text) are escaped in the verdict line. Re-judging the run
/// reads the same headers from the evidence (`NN.response.json`).
#[test]
fn a_gateway_reply_on_another_deployment_fails_route_with_the_count() {
    let tmp = tempfile::tempdir().unwrap();
    let base = odd_end("stop", false);
    let with = |v: Option<&str>| Reply {
        headers: v
            .map(|v| vec![("X-Deployment".to_string(), v.to_string())])
            .unwrap_or_default(),
        ..base.reply.clone()
    };
    let gate = |name: &str, s: &Script| {
        format!(
            "[gate]\nname = \"{name}\"\n[serve]\ncommand = {}\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"hi\"]\nrepeats = 3\n[assert.route]\nheader = \"X-Deployment\"\nheader_fast = \"^primary$\"\n",
            fixtures::scripted_command(s)
        )
    };
    let mut good = base.clone();
    good.reply = with(Some("primary"));
    std::fs::write(tmp.path().join("good.toml"), gate("hdr-good", &good)).unwrap();
    let (code, out, err) = servegate(tmp.path(), &["run", "good.toml"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        line(&out, "route "),
        "route PASS header x-deployment matches /^primary$/ on 3 of 3 judged replies: \"primary\" (n=3 of 3 planned)"
    );
    let mut bad = base.clone();
    bad.replies = vec![
        with(Some("primary")),
        with(Some("fallback{byte:c2}{byte:9b}2J")),
        with(None),
    ];
    std::fs::write(tmp.path().join("bad.toml"), gate("hdr-bad", &bad)).unwrap();
    let (code, out, err) = servegate(tmp.path(), &["run", "bad.toml"]);
    assert_eq!(code, 1, "{out}\n{err}");
    let l = line(&out, "route ");
    assert!(
        l.starts_with("route FAIL header x-deployment: 2 of 3 judged replies not on the fast route /^primary$/: request 01 \"fallback\\u{9b}2J\", request 02 has no x-deployment header (n=3 of 3 planned)"),
        "{l}"
    );
    assert!(
        !out.contains('\u{9b}'),
        "a C1 control reaches no terminal raw: {out:?}"
    );
    let dir = std::fs::read_dir(tmp.path().join("runs/hdr-bad"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (code, again, _) = servegate(tmp.path(), &["judge", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "{again}");
    assert_eq!(line(&again, "route "), l);
}
