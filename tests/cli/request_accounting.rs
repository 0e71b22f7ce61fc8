//! Request accounting, end to end through the `servegate` binary: every planned request is accounted
//! for, a failed reply never feeds a median, and a figure that cannot be measured is not reported. Each test
//! runs a copy of a repro gate and its misbehaving serve (tests/data/repro/accounting/, copied from the
//! founding material's reproductions: data/README.md) in a temp directory, with `SERVEGATE_RUNS` there, and asserts the exit code, the FAIL
//! lines and their `n=K of N planned`. No assertion depends on a timing being short: the serves' pacing is
//! far from every bound (5 ms decode window, 1 s first-token limit...). Needs python3.

use crate::fixtures;
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/repro/accounting")
}

/// A temp directory holding copies of `files` from tests/data/repro/accounting/ (and a throw-away
/// `model.gguf`, which the record gates hash).
fn scratch(files: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for f in files {
        std::fs::copy(data().join(f), tmp.path().join(f)).unwrap();
    }
    std::fs::write(tmp.path().join("model.gguf"), vec![7u8; 4096]).unwrap();
    tmp
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
/// sent, `n=3 of 20 planned`, the exit status and the log tail; run.json records the plan and the tail; a
/// re-judge of the evidence says the same.
#[test]
fn d2_a_serve_dying_on_request_3_of_20_fails_with_n_3_of_20_planned_and_its_exit() {
    let tmp = scratch(&["d2.toml", "crash3.py"]);
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
                "n=3 of 20 planned",
            ],
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

/// Every planned reply answered well, then the serve exits 139 (crashy.py --die-after 3 of 3): a serve that
/// exits during the run fails every assertion, quoting its exit status and log tail, though the replies
/// alone would pass; run.json keeps the tail. (Whether the runner sees the exit after the last request or
/// finds the serve already exited when it stops it, both are a crash during the run.)
#[test]
fn a_serve_exiting_after_its_last_reply_still_fails_the_gate_with_its_exit() {
    let tmp = scratch(&["die-after-last.toml", "crashy.py"]);
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
    let tmp = scratch(&["d1.toml", "cut_or_slow.py"]);
    let out = servegate(tmp.path(), &["run", "-q", "d1.toml"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let cut = "request 00 (truncated_stream: no finish_reason, no [DONE]); request 02 (truncated_stream: no finish_reason, no [DONE])";
    has_all(
        out.line("rate FAIL"),
        &[
            "2 of 3 replies have no decode rate: ",
            cut,
            "(floor 10.0 tok/s; each: -, ",
            ", -; n=3 of 3 planned)",
        ],
    );
    let ft = out.line("first_token FAIL");
    has_all(
        ft,
        &[
            "2 of 3 replies have no first token: ",
            cut,
            "n=3 of 3 planned",
        ],
    );
    assert!(ft.contains("each: -, ") && ft.contains(", -; n=3"), "{ft}");
    has_all(
        out.line("content FAIL"),
        &[
            "request 00: failed reply: truncated_stream",
            "n=3 of 3 planned",
        ],
    );
}

/// tests/data/repro/records/cut.toml (crashy.py --cut 2): reply 2 is cut after two chunks (a transport error) while the serve
/// stays up. Before: its 26-36 tok/s became one of the record's values. Now the reply has no figure: the rate
/// fails naming it, and `--record` writes nothing.
#[test]
fn cut_record_a_failed_reply_has_no_figure_and_writes_no_record() {
    let tmp = scratch(&["cut.toml", "crashy.py"]);
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
            "n=3 of 3 planned",
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

/// tests/data/repro/records/pair-crash-after.toml: both theirs arms exit 139 after their first reply of 3. Before: `ratio
/// PASS` on 2 of 6 theirs values, exit 0, JSON `passed`, then `--record` refused the same run. Now the pair
/// fails (every planned request of every arm accounted for), and the verdict, the results JSON and the
/// records agree.
#[test]
fn pair_crash_after_fails_the_ratio_and_json_and_records_agree() {
    let tmp = scratch(&["pair-crash-after.toml", "crashy.py"]);
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
    has_all(
        out.line("ratio FAIL"),
        &[
            // Each theirs arm misses requests 01 and 02: never sent when the runner saw the exit after
            // reply 00, or 01 refused (transport) and 02 never sent when the exit came a moment later.
            "4 of 12 planned requests have no decode value: ",
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
    let tmp = scratch(&["burst.toml", "burst.py"]);
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
    assert!(
        line.contains("under the 5 ms minimum") || line.contains("burst: 20 of 20"),
        "{line}"
    );
}

/// Kind 4: the same two flushes 300 ms apart: the window is long, but all 20 token chunks after the first
/// read share one arrival, so the rate would measure the flush, not the decode (20 / 0.3 s).
#[test]
fn a_flushed_burst_300_ms_later_gives_no_rate() {
    let tmp = scratch(&["burst-300ms.toml", "burst.py"]);
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

/// Kind 4: 8 tokens at 50 tok/s whose usage says 4000 completion tokens (~28,000 tok/s if believed, passing
/// a 100 tok/s floor). The count is flagged and not used: the rate is the stream's ~50 tok/s, and fails.
#[test]
fn a_usage_count_the_stream_could_not_carry_is_not_used_for_the_rate() {
    let tmp = scratch(&["inflate.toml", "burst.py"]);
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
