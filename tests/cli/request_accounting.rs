//! Request accounting, end to end through the `servegate` binary: every planned request is accounted
//! for, a failed reply never feeds a median, and a figure that cannot be measured is not reported. Each test
//! runs a repro gate (the founding material's reproductions, data/README.md, and kind 4 of
//! docs/pass-is-proof.md) on its misbehaving serve, the scripted serve (src/replay/scripted.rs: the
//! `Script` values below and fixtures::crashy, which play what the repros' Python serves did), in a temp
//! directory with `SERVEGATE_RUNS` there, and asserts the exit code, the FAIL lines and their `n=K of N
//! planned`. No assertion depends on a timing being short: the serves' pacing is far from every bound (5 ms
//! decode window, 1 s first-token limit...).

use crate::fixtures;
use crate::fixtures::crashy::{crashy, cut_gate, die_after, pair_crash_after_gate};
use servegate::replay::scripted::{Body, Crash, LogLine, Reply, Script};
use std::path::{Path, PathBuf};

/// A temp directory holding the gate `NAME.toml` (`text`, each `KEY` of `serves` replaced by a serve
/// command playing its script) and a throw-away `model.gguf`, which the record gates hash.
fn scratch(name: &str, text: &str, serves: &[(&str, Script)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mut gate = text.to_string();
    for (key, script) in serves {
        gate = gate.replace(key, &fixtures::scripted_command(script));
    }
    std::fs::write(tmp.path().join(format!("{name}.toml")), gate).unwrap();
    std::fs::write(tmp.path().join("model.gguf"), vec![7u8; 4096]).unwrap();
    tmp
}

/// A streamed reply as the stdlib repro serves wrote it: HTTP/1.0 with no length, so the body ends when
/// the connection closes (a cut there is a stream that ends early, not a transport error); no role chunk,
/// no usage chunk; `words` one per chunk.
fn close_delimited(words: &[&str]) -> Reply {
    Reply {
        stream: Some(true),
        framing: Some(Body::Close),
        tokens: words.iter().map(|w| w.to_string()).collect(),
        role_chunk: false,
        usage: false,
        ..Reply::default()
    }
}

const PARIS: [&str; 5] = ["Paris", " is", " the", " capital", "."];

/// d2's serve (crash3.py): every reply 5 words, each 80 ms after the one before (the first 80 ms after the
/// head; the repro's 20 ms slowed, a gap a busy machine does not close, so every reply before the crash is
/// measured); the third reply's process dies after two words, `Segmentation fault` to stderr, exit 139.
fn crash3() -> Script {
    let whole = Reply {
        first_token_ms: 80.0,
        token_ms: 80.0,
        ..close_delimited(&PARIS)
    };
    let dies = Reply {
        crash_after: Some(2),
        crash: Some(Crash::Code(139)),
        ..whole.clone()
    };
    Script {
        models: vec!["m".into()],
        replies: vec![whole.clone(), whole.clone(), dies],
        reply: whole,
        crash_log: vec![LogLine::err("Segmentation fault")],
        ..Script::default()
    }
}

/// d1's serve (cut_or_slow.py): odd requests send two words 10 ms apart and close the connection (no
/// finish_reason, no [DONE]); even ones a whole reply of 5 words, each 200 ms after the one before.
fn cut_or_slow() -> Script {
    let cut = Reply {
        token_ms: 10.0,
        finish_reason: None,
        done: false,
        ..close_delimited(&PARIS[..2])
    };
    let slow = Reply {
        first_token_ms: 200.0,
        token_ms: 200.0,
        ..close_delimited(&PARIS)
    };
    Script {
        models: vec!["m".into()],
        replies: vec![cut, slow],
        cycle: true,
        ..Script::default()
    }
}

/// Kind 4's buffering proxy (burst.py burst GAP): 40 word events ` w0`..` w39` flushed in two writes of
/// 20, `gap_ms` apart, the first about 50 ms after the head; usage 40 completion tokens.
fn burst(gap_ms: f64) -> Script {
    let words: Vec<String> = (0..40).map(|i| format!(" w{i}")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let token_ms = gap_ms / 20.0;
    Script {
        models: vec!["m".into()],
        reply: Reply {
            first_token_ms: 50.0,
            token_ms,
            per_write: 20,
            usage: true,
            ..close_delimited(&words)
        },
        ..Script::default()
    }
}

/// Kind 4's inflated count (burst.py inflate): 8 words 100 ms apart (10 tok/s, the first 50 ms after the
/// head; the repro's 20 ms slowed, a gap a busy machine does not close) whose usage says 4000 completion
/// tokens.
fn inflate() -> Script {
    Script {
        models: vec!["m".into()],
        reply: Reply {
            first_token_ms: 50.0,
            token_ms: 100.0,
            usage: true,
            completion_tokens: Some(4000),
            ..close_delimited(&[
                "Paris", " is", " the", " capital", " of", " France", ".", " Yes",
            ])
        },
        ..Script::default()
    }
}

const D2: &str = r#"[gate]
name = "d2"
[serve]
command = SERVE
[request]
model = "m"
max_tokens = 8
prompts = ["What is the capital of France?"]
repeats = 20
[assert.rate]
floor_tok_s = 10.0
[assert.first_token]
limit_ms = 1000
"#;

const DIE_AFTER_LAST: &str = r#"[gate]
name = "die-after-last"
description = "every planned reply answered, then the serve exits 139: a crash during the run still fails"

[serve]
command = SERVE
ready = "/health"

[request]
model = "m"
max_tokens = 8
prompts = ["What is the capital of France?"]
repeats = 3

[assert.rate]
floor_tok_s = 10.0

[assert.content]
"#;

const D1: &str = r#"[gate]
name = "d1"
[serve]
command = SERVE
[request]
model = "m"
max_tokens = 8
prompts = ["What is the capital of France?"]
repeats = 3
[assert.rate]
floor_tok_s = 10.0
[assert.first_token]
limit_ms = 150

[assert.content]
"#;

/// Kind 4's gates (burst, burst-300ms, inflate): NAME and FLOOR replaced.
const KIND4: &str = r#"[gate]
name = "NAME"
description = "kind 4 of docs/pass-is-proof.md: a figure that cannot be measured is not reported"
[serve]
command = SERVE
[request]
model = "m"
max_tokens = 64
prompts = ["What is the capital of France?"]
repeats = 3
[assert.rate]
floor_tok_s = FLOOR
"#;

fn kind4(name: &str, floor: &str) -> String {
    KIND4.replace("NAME", name).replace("FLOOR", floor)
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    /// The stdout line starting with `prefix`.
    fn line(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{}", self.stdout))
    }
}

fn servegate(dir: &Path, args: &[&str]) -> Out {
    let out = fixtures::servegate()
        // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
        .env("SERVEGATE_VERBOSE", "1")
        .args(args)
        .current_dir(dir)
        .env("SERVEGATE_RUNS", dir.join("runs"))
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn has_all(line: &str, parts: &[&str]) {
    for p in parts {
        assert!(line.contains(p), "{p:?} missing from:\n{line}");
    }
}

/// The only run directory of `gate` under `dir/runs`.
fn run_dir(dir: &Path, gate: &str) -> PathBuf {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs").join(gate))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.pop().unwrap()
}

fn run_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap()
}

/// d2: the serve answers two requests and exits 139 in the middle of the third of 20 planned. Before:
/// `rate PASS ... n=3`, exit 0. Now both figure assertions fail, naming the cut reply, the 17 requests never
/// sent, `n=2 of 20 planned` (the cut reply gives no value), the exit status and the log tail; run.json records the plan and the tail; a
/// re-judge of the evidence says the same.
#[test]
fn d2_a_serve_dying_on_request_3_of_20_fails_with_n_2_of_20_planned_and_its_exit() {
    let tmp = scratch("d2", D2, &[("SERVE", crash3())]);
    let out = servegate(tmp.path(), &["run", "-q", "d2.toml"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let serve = [
        "server_exited_during_run (exit status 139",
        "serve.log ends: \"Segmentation fault\"",
    ];
    for name in ["rate FAIL", "first_token FAIL"] {
        let l = out.line(name);
        has_all(
            l,
            &[
                "1 of 3 replies have no",
                "request 02 (truncated_stream: no finish_reason, no [DONE])",
                "17 planned requests never sent: requests 03-19 (the serve failed during the run)",
            ],
        );
        // The n of N: the two replies that gave a value (the cut one gives none), or, when a busy runner
        // held the client off while a reply arrived, that reply named as not measured (never silently dropped).
        assert!(
            l.contains("n=2 of 20 planned")
                || (l.contains(" of 3 measured, 20 planned; not measured: request 0")
                    && l.contains("while the client was not reading")),
            "the n of N missing from:\n{l}"
        );
        has_all(l, &serve);
    }
    assert!(out.stdout.lines().any(|l| l == "RESULT: FAIL"));
    let dir = run_dir(tmp.path(), "d2");
    let run = run_json(&dir);
    assert_eq!(run["planned"], 20);
    assert_eq!(run["planned_warmup"], 0);
    assert_eq!(run["requests"].as_array().unwrap().len(), 3);
    assert!(run["serve"]["failure"]
        .as_str()
        .unwrap()
        .contains("exit status 139"));
    assert!(run["serve"]["exit_log_tail"]
        .as_str()
        .unwrap()
        .contains("Segmentation fault"));
    // Judging is a pure function of the evidence: the same lines again.
    let again = servegate(tmp.path(), &["judge", dir.to_str().unwrap()]);
    assert_eq!(again.code, 1);
    assert_eq!(again.line("rate FAIL"), out.line("rate FAIL"));
}

/// A `url` serve (not started by the run) killed mid-run: crash3's serve, started here, dies in its third
/// reply with one warmup request before the judged ones. Before: every remaining request was sent (18
/// `connection refused` lines, nothing saying the serve went away) and the cold-warmup note blamed
/// readiness. Now the run says once that the serve went away (when, after which request), sends nothing
/// more, records it as `server_exited_during_run`, the rate fails with the requests never sent and the n
/// of the replies measured, and no cold note is printed.
#[test]
fn a_url_serve_that_goes_away_mid_run_is_said_once_and_nothing_more_is_sent() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let argv = fixtures::scripted_argv(&crash3(), "127.0.0.1", &port.to_string());
    let mut serve = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed().as_secs() < 30,
            "the scripted serve never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let gate = D2
        .replace(
            "command = SERVE",
            &format!("url = \"http://127.0.0.1:{port}\""),
        )
        .replace("repeats = 20", "repeats = 20\nwarmup_requests = 1")
        .replace("name = \"d2\"", "name = \"d2url\"");
    let tmp = scratch("d2url", &gate, &[]);
    let out = servegate(tmp.path(), &["run", "d2url.toml"]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let all = format!("{}\n{}", out.stdout, out.stderr);
    let gone: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("the url serve went away"))
        .collect();
    // Said once as the run goes, then in each verdict's serve failure.
    let said: Vec<&&str> = gone.iter().filter(|l| l.contains("serve died: ")).collect();
    assert_eq!(said.len(), 1, "{all}");
    has_all(
        said[0],
        &[
            "serve died: server_exited_during_run (the url serve went away: nothing listens at http://127.0.0.1:",
            "after request 01, the last it answered",
            "requests 02 to 03 failed",
            "4 of 21 planned requests were sent, the other 17 not",
        ],
    );
    // Of the request lines, one refusal (the request after the cut one), not one per request left.
    let refused = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("[d2url] request ") && l.contains("onnection refused"))
        .count();
    assert_eq!(refused, 1, "{all}");
    assert!(
        !all.contains("cold_"),
        "no cold note on a serve that went away:\n{all}"
    );
    let rate = out.line("rate FAIL");
    has_all(
        rate,
        &[
            "17 planned requests never sent: requests 04-20 (the serve failed during the run)",
            "n=1 of 20 planned",
            "server_exited_during_run (the url serve went away",
        ],
    );
    let run = run_json(&run_dir(tmp.path(), "d2url"));
    assert_eq!(run["requests"].as_array().unwrap().len(), 4);
    assert!(run["serve"]["failure"]
        .as_str()
        .unwrap()
        .starts_with("server_exited_during_run (the url serve went away"));
}

/// Every planned reply answered well, then the serve exits 139 (crashy --die-after 3 of 3: [`die_after`]): a serve that
/// exits during the run fails every assertion, quoting its exit status and log tail, though the replies
/// alone would pass; run.json keeps the tail. (Whether the runner sees the exit after the last request or
/// finds the serve already exited when it stops it, both are a crash during the run.)
#[test]
fn a_serve_exiting_after_its_last_reply_still_fails_the_gate_with_its_exit() {
    let tmp = scratch(
        "die-after-last",
        DIE_AFTER_LAST,
        &[("SERVE", die_after(crashy(12.5), 3))],
    );
    let out = servegate(tmp.path(), &["run", "-q", "die-after-last.toml"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    for name in ["rate FAIL", "content FAIL"] {
        has_all(
            out.line(name),
            &[
                " FAIL the serve failed during the run (server_exited_during_run (exit status 139",
                "Segmentation fault (after reply)",
                "the replies alone: ",
                "n=3 of 3 planned",
            ],
        );
    }
    let run = run_json(&run_dir(tmp.path(), "die-after-last"));
    assert!(run["serve"]["exit_log_tail"]
        .as_str()
        .unwrap()
        .contains("Segmentation fault (after reply)"));
}

/// d1: odd requests send two fast chunks and close the connection (no finish_reason, no [DONE]); even ones
/// answer fully at 5 tok/s with a 200 ms first token. Before: `rate PASS median 97.7` and `first_token PASS
/// median 5 ms` from the cut replies. Now the cut replies have no rate and no TTFT, shown as `-` with the
/// reason, and both assertions fail naming them.
#[test]
fn d1_cut_replies_have_no_rate_and_no_first_token() {
    let tmp = scratch("d1", D1, &[("SERVE", cut_or_slow())]);
    let out = servegate(tmp.path(), &["run", "-q", "d1.toml"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let cut = "request 00 (truncated_stream: no finish_reason, no [DONE]); request 02 (truncated_stream: no finish_reason, no [DONE])";
    has_all(
        out.line("rate FAIL"),
        &[
            "2 of 3 replies have no decode rate: ",
            cut,
            "(floor 10.0 tok/s; each: -, ",
            ", -; n=1 of 3 planned)",
        ],
    );
    let ft = out.line("first_token FAIL");
    has_all(
        ft,
        &[
            "2 of 3 replies have no first token: ",
            cut,
            "n=1 of 3 planned",
        ],
    );
    assert!(ft.contains("each: -, ") && ft.contains(", -; n=1"), "{ft}");
    has_all(
        out.line("content FAIL"),
        &[
            "request 00: failed reply: truncated_stream",
            "n=3 of 3 planned",
        ],
    );
}

/// The records repro cut.toml ([`cut`] 2 of crashy): reply 2 is cut after two chunks (a transport error) while the serve
/// stays up. Before: its 26-36 tok/s became one of the record's values. Now the reply has no figure: the rate
/// fails naming it, and `--record` writes nothing.
#[test]
fn cut_record_a_failed_reply_has_no_figure_and_writes_no_record() {
    let tmp = scratch("cut", &cut_gate(), &[]);
    let out = servegate(
        tmp.path(),
        &[
            "run",
            "-q",
            "cut.toml",
            "--record",
            "cut",
            "--records-dir",
            "recs",
        ],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    has_all(
        out.line("rate FAIL"),
        &[
            "1 of 3 replies have no decode rate: request 01 (transport: ",
            "n=2 of 3 planned",
        ],
    );
    assert!(
        out.line("rate FAIL").contains("each: ") && out.line("rate FAIL").contains(", -, "),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("no record written"), "{}", out.stderr);
    let written = std::fs::read_dir(tmp.path().join("recs"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(written, 0, "a failed run writes no record");
}

/// The records repro pair-crash-after.toml: both theirs arms exit 139 after their first reply of 3. Before: `ratio
/// PASS` on 2 of 6 theirs values, exit 0, JSON `passed`, then `--record` refused the same run. Now the pair
/// fails (every planned request of every arm accounted for), and the verdict, the results JSON and the
/// records agree.
#[test]
fn pair_crash_after_fails_the_ratio_and_json_and_records_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("model.gguf");
    std::fs::write(&model, vec![7u8; 4096]).unwrap();
    std::fs::write(
        tmp.path().join("pair-crash-after.toml"),
        pair_crash_after_gate(&model),
    )
    .unwrap();
    let out = servegate(
        tmp.path(),
        &[
            "run",
            "-q",
            "pair-crash-after.toml",
            "--record",
            "pca",
            "--records-dir",
            "recs",
            "--json",
            "results.json",
        ],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    // Each theirs arm misses requests 01 and 02: never sent when the runner saw the exit after reply 00, or
    // 01 refused (transport) and 02 never sent when the exit came a moment later: 4 at least; on a busy
    // runner a reply the client was too late to time (a burst in one read) has no decode value either.
    let ratio = out.line("ratio FAIL");
    let missing: usize = ratio
        .split(" of 12 planned requests have no decode value: ")
        .next()
        .and_then(|h| h.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of requests without a decode value: {ratio}"));
    assert!(missing >= 4, "{ratio}");
    has_all(
        ratio,
        &[
            "arm 1 theirs: ",
            "arm 4 theirs: ",
            "never sent: request",
            " of 12 planned)",
            "arm 1 theirs serve: server_exited_during_run (exit status 139",
            "Segmentation fault (after reply)",
        ],
    );
    assert!(out.stdout.lines().any(|l| l == "RESULT: FAIL"));
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("results.json")).unwrap())
            .unwrap();
    assert_eq!(results["exit_code"], 1);
    assert_eq!(results["gates"][0]["status"], "failed");
    assert!(out.stderr.contains("no record written"), "{}", out.stderr);
    let written = std::fs::read_dir(tmp.path().join("recs"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(written, 0);
}

/// Kind 4: 40 token events flushed in two writes 3 ms apart (a buffering proxy). Before: 6,667 tok/s, any
/// floor passed. Now: no decode rate (the window is under the 5 ms minimum; were the serve's 3 ms sleep
/// stretched past 5 ms by load, the burst rule refuses it instead). No reply is measured, so the rate is
/// INDETERMINATE (exit 8), saying why for each reply: never a pass, and never a false "slow".
#[test]
fn forty_tokens_in_two_reads_3_ms_apart_give_no_rate() {
    let tmp = scratch("burst", &kind4("burst", "30.0"), &[("SERVE", burst(3.0))]);
    let out = servegate(tmp.path(), &["run", "-q", "burst.toml"]);
    assert_eq!(out.code, 8, "{}\n{}", out.stdout, out.stderr);
    has_all(
        out.line("rate INDETERMINATE"),
        &[
            "too few replies measured for a median",
            "each: -, -, -; n=0 of 3 measured; not measured: request 00 (",
        ],
    );
    let line = out.line("rate INDETERMINATE");
    // A busy client may read the two flushes as one: "all 40 token chunks in one read", as honest.
    assert!(
        line.contains("under the 5 ms minimum")
            || line.contains("burst: 20 of 20")
            || line.contains("all 40 token chunks in one read"),
        "{line}"
    );
}

/// Kind 4: the same two flushes 300 ms apart: the window is long, but all 20 token chunks after the first
/// read share one arrival, so the rate would measure the flush, not the decode (20 / 0.3 s).
#[test]
fn a_flushed_burst_300_ms_later_gives_no_rate() {
    let tmp = scratch(
        "burst-300ms",
        &kind4("burst-300ms", "30.0"),
        &[("SERVE", burst(300.0))],
    );
    let out = servegate(tmp.path(), &["run", "-q", "burst-300ms.toml"]);
    assert_eq!(out.code, 8, "{}\n{}", out.stdout, out.stderr);
    has_all(
        out.line("rate INDETERMINATE"),
        &[
            "burst: 20 of 20 token chunks after the first in one read",
            "each: -, -, -; n=0 of 3 measured",
        ],
    );
}

/// Kind 4: 8 tokens at 10 tok/s whose usage says 4000 completion tokens (~5,700 tok/s if believed, passing
/// a 100 tok/s floor). The count is flagged and not used: the rate is the stream's ~10 tok/s, and fails.
#[test]
fn a_usage_count_the_stream_could_not_carry_is_not_used_for_the_rate() {
    let tmp = scratch(
        "inflate",
        &kind4("inflate", "100.0"),
        &[("SERVE", inflate())],
    );
    let out = servegate(tmp.path(), &["run", "-q", "inflate.toml"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let l = out.line("rate FAIL median ");
    has_all(
        l,
        &[
            "(floor 100.0; each: ",
            "n=3 of 3 planned",
            "3 of 3 reported more completion tokens than the stream could carry (implausible_completion_tokens: not used",
        ],
    );
    let median: f64 = l["rate FAIL median ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(median < 100.0, "{l}");
}
