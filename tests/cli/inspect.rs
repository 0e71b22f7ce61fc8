//! `servegate inspect` from outside: the binary on every case input in tests/data/cases, its printed
//! `summary` compared with the case's `.expected.json`, key by key (the summary uses the expected files' key
//! names). This is the "checked from outside the test suite" path: it goes through the CLI, its file-type
//! detection (`.reads.jsonl`, `.sse`, `.http`, `.json`) and its JSON.
//!
//! Values compare exactly except computed floats (`decode_tok_s`, `timings_*_per_second`), which the case
//! files print rounded (50.0, 1248.78): those get half a unit of the last printed decimal. `warnings` and
//! `flags` are names that must appear among the summary's `notes` (a note may be the parser's or the
//! measurements'), as tests/pure/cases/mod.rs checks them.
//!
//! Beside those hand-checked values, the whole printed JSON of every case input is pinned by an insta snapshot
//! (tests/cli/snapshots/cli__inspect__<input file>.snap, one per input; the absolute `file` path redacted): a change to
//! any printed key or value shows as a reviewable diff (`cargo insta review`, or `INSTA_UPDATE=always cargo test
//! --test inspect` and `git diff`). A missing or changed snapshot fails the test, in CI and locally.

use std::path::{Path, PathBuf};

use crate::fixtures;
use crate::fixtures::cases::{data_dir, tolerance};
use serde_json::{Map, Value};

/// Cases judged outside the reply parser (identity, serve log, JUnit, spec): tests/cli/cases.rs and tests/pure/cases/outside_the_stream.rs
/// tests them (case 36's replies and case 38's logs through inspect too, case 27's listing as
/// `inspect --models` reads it).
fn elsewhere(p: &Path) -> bool {
    let n = p.file_name().unwrap_or_default().to_string_lossy();
    [
        "case-27-", "case-36-", "case-38-", "case-41-", "case-42-", "case-44-",
    ]
    .iter()
    .any(|c| n.starts_with(c))
}

fn inspect(path: &Path) -> Value {
    let (v, _) = fixtures::stream::inspect(path);
    for key in ["file", "input", "summary", "figures", "reply"] {
        assert!(
            v.get(key).is_some(),
            "{}: no `{key}` in the output",
            path.display()
        );
    }
    v
}

/// The inputs of one variant, the one whose times a test should use first: timed reads, else `.sse`,
/// `.http`, `.json` (as tests/pure/cases/mod.rs `load` picks), then the `.sse` twin of a `.reads.jsonl` if any.
fn inputs(case: &str, variant: &str) -> Vec<PathBuf> {
    let stem = if variant == "main" {
        case.to_string()
    } else {
        format!("{case}.{variant}")
    };
    ["reads.jsonl", "sse", "http", "json"]
        .iter()
        .map(|ext| data_dir().join(format!("{stem}.{ext}")))
        .filter(|p| p.is_file())
        .collect()
}

/// Keys whose values depend on the read times: checked only on the timed input.
const TIMED: &[&str] = &["ttft_ms", "decode_tok_s"];
/// Computed floats.
const FLOATS: &[&str] = &[
    "decode_tok_s",
    "timings_prompt_per_second",
    "timings_predicted_per_second",
];

fn check(at: &str, summary: &Map<String, Value>, want: &Map<String, Value>, timed: bool) -> usize {
    let mut checked = 0;
    // Newer case files (33) say `"completion_tokens_source": "chunks"` with the token-chunk count as
    // `completion_tokens`, and count a finish-only chunk among `empty_chunks`: servegate prints that count as
    // `completion_tokens_estimate` (N unknown) and `empty_chunks` without the finish chunk. Translate.
    let by_chunks = want.get("completion_tokens_source").and_then(Value::as_str) == Some("chunks");
    // The second set (cases 31-44, CASES.md) counts every chunk without a token as empty (role, finish-only
    // and usage-only chunks alike); it calls an error the serve sent inside a stream `stream_error`, which
    // servegate names by when it came (`error_in_stream`, `error_mid_stream`); and it gives a failed reply's
    // first token time as `ttft_ms` "(evidence)", which servegate prints as `first_token_ms` (no TTFT figure
    // for a failed reply). Translate.
    let second_set = at
        .strip_prefix("case-")
        .and_then(|c| c.get(..2))
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n >= 31);
    let mut want = want.clone();
    if want.get("fail_reason").and_then(Value::as_str) == Some("stream_error") {
        want.remove("fail_reason");
        let got = summary["fail_reason"].as_str().unwrap_or_default();
        assert!(
            matches!(got, "error_in_stream" | "error_mid_stream"),
            "{at} fail_reason: {got}"
        );
        checked += 1;
    }
    if want.get("ok") == Some(&Value::Bool(false)) {
        if let Some(t) = want.remove("ttft_ms") {
            if timed {
                assert_eq!(
                    summary["ttft_ms"],
                    Value::Null,
                    "{at}: a failed reply has no TTFT"
                );
                assert_eq!(
                    summary["first_token_ms"].as_f64(),
                    t.as_f64(),
                    "{at} ttft_ms (evidence)"
                );
                checked += 1;
            }
        }
    }
    if second_set && !by_chunks {
        if let Some(n) = want.remove("empty_chunks") {
            let chunks = summary["chunks"].as_u64().expect("chunks");
            let tokens = summary["token_chunks"].as_u64().expect("token_chunks");
            assert_eq!(Some(chunks - tokens), n.as_u64(), "{at} empty_chunks");
            checked += 1;
        }
    }
    if by_chunks {
        want.insert(
            "completion_tokens_source".into(),
            "token_chunk_count_estimate".into(),
        );
        if let Some(n) = want.remove("completion_tokens") {
            want.insert("completion_tokens_estimate".into(), n);
            want.insert("completion_tokens".into(), Value::Null);
        }
        if let Some(n) = want.remove("empty_chunks") {
            let chunks = summary["chunks"].as_u64().expect("chunks");
            let tokens = summary["token_chunks"].as_u64().expect("token_chunks");
            assert_eq!(
                Some(chunks - tokens),
                n.as_u64(),
                "{at} empty_chunks (chunks without a token)"
            );
            checked += 1;
        }
    }
    for (key, w) in &want {
        if key.starts_with('_') {
            continue;
        }
        if !timed && TIMED.contains(&key.as_str()) {
            continue;
        }
        let what = format!("{at} {key}");
        if key == "warnings" || key == "flags" {
            let notes: Vec<&str> = summary["notes"]
                .as_array()
                .expect("notes")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for name in w.as_array().expect("array of names") {
                let name = name.as_str().expect("name");
                assert!(
                    notes.contains(&name),
                    "{what}: {name} not in notes {notes:?}"
                );
            }
            checked += 1;
            continue;
        }
        let got = summary
            .get(key)
            .unwrap_or_else(|| panic!("{what}: the summary has no `{key}`"));
        match (w, got) {
            (Value::Number(w), Value::Number(g)) => {
                let (w, g) = (w.as_f64().unwrap(), g.as_f64().unwrap());
                if FLOATS.contains(&key.as_str()) {
                    assert!(
                        (g - w).abs() <= tolerance(w),
                        "{what}: expected {w} ± {}, got {g}",
                        tolerance(w)
                    );
                } else {
                    assert_eq!(g, w, "{what}");
                }
            }
            _ => assert_eq!(got, w, "{what}"),
        }
        checked += 1;
    }
    checked
}

#[test]
fn inspect_prints_every_expected_value_of_every_case() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("data dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".expected.json") && !elsewhere(p))
        .collect();
    files.sort();
    assert_eq!(files.len(), 18, "cases");
    let (mut variants, mut runs, mut values) = (0, 0, 0);
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let case = name.strip_suffix(".expected.json").unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        for (variant, want) in v["expected"].as_object().expect("expected object") {
            let ins = inputs(case, variant);
            assert!(!ins.is_empty(), "{case} [{variant}]: no input");
            for (i, input) in ins.iter().enumerate() {
                // The first input is the timed one when the case has reads; later ones (the .sse twin, all
                // bytes at t = 0) must agree on everything that is not a time.
                let timed = i == 0;
                let out = inspect(input);
                let at = format!(
                    "{} [{variant}]",
                    input.file_name().unwrap().to_string_lossy()
                );
                values += check(
                    &at,
                    out["summary"].as_object().expect("summary"),
                    want.as_object().expect("variant"),
                    timed,
                );
                runs += 1;
            }
            variants += 1;
        }
    }
    assert_eq!(variants, 30, "variants");
    assert!(runs >= 33, "inputs inspected: {runs}");
    assert!(values >= 120, "values checked: {values}");
}

#[test]
fn inspect_output_of_every_case_input_is_pinned_by_its_snapshot() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("data dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let n = p.to_string_lossy();
            [".reads.jsonl", ".sse", ".http", ".json"]
                .iter()
                .any(|ext| n.ends_with(ext))
                && !n.ends_with(".expected.json")
                && !elsewhere(p)
        })
        .collect();
    files.sort();
    assert!(files.len() >= 33, "case inputs: {}", files.len());
    let mut names = std::collections::BTreeSet::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let out = inspect(&file);
        insta::assert_json_snapshot!(name.clone(), out, {".file" => "[case file]"});
        names.insert(name);
    }
    // No snapshot outlives its input: a removed or renamed case file leaves no stale snapshot behind.
    let snapshots = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/snapshots");
    for e in std::fs::read_dir(snapshots).expect("tests/cli/snapshots") {
        let file = e.expect("entry").file_name().to_string_lossy().into_owned();
        if let Some(input) = file
            .strip_prefix("cli__inspect__")
            .and_then(|f| f.strip_suffix(".snap"))
        {
            assert!(
                names.contains(input),
                "{file}: no case input {input}; delete the snapshot"
            );
        }
    }
}

#[test]
fn inspect_of_a_timed_case_reads_like_the_case_text() {
    // case-04: the role-only chunk at 5 ms is the first event, not TTFT; the summary says both.
    let out = inspect(&data_dir().join("case-04-role-chunk-ttft.reads.jsonl"));
    let s = &out["summary"];
    assert_eq!(out["input"], "reads");
    assert_eq!(s["first_event_ms"], 5.0);
    assert_eq!(s["ttft_ms"], 214.0);
    assert_eq!(s["completion_tokens_source"], "usage");
    assert_eq!(s["decode_note"], Value::Null);
    assert_eq!(s["ok"], true);
    assert_eq!(s["fail_reason"], Value::Null);
    // The printed summary keeps a reading order: verdict, times, rate, tokens, text, stream shape, notes.
    let text = String::from_utf8(
        fixtures::servegate()
            .arg("inspect")
            .arg(data_dir().join("case-04-role-chunk-ttft.reads.jsonl"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let pos = |k: &str| {
        text.find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k} not printed"))
    };
    assert!(
        pos("summary") < pos("ok")
            && pos("ok") < pos("ttft_ms")
            && pos("ttft_ms") < pos("decode_tok_s")
    );
    assert!(
        pos("decode_tok_s") < pos("completion_tokens") && pos("completion_tokens") < pos("content")
    );
}

#[test]
fn inspect_of_an_sse_file_has_no_decode_rate_and_says_why() {
    let out = inspect(&data_dir().join("case-01-usage-empty-choices.sse"));
    let s = &out["summary"];
    assert_eq!(out["input"], "sse");
    assert_eq!(s["ttft_ms"], 0.0);
    assert_eq!(s["decode_tok_s"], Value::Null);
    assert!(
        s["decode_note"]
            .as_str()
            .unwrap()
            .contains("no decode window"),
        "{}",
        s["decode_note"]
    );
    assert_eq!(s["completion_tokens"], 12);
}

#[test]
fn inspect_of_an_error_case_names_the_error() {
    let out = inspect(&data_dir().join("case-14-http200-error-in-stream.d.http"));
    let s = &out["summary"];
    assert_eq!(out["input"], "http");
    assert_eq!(s["http_status"], 500);
    assert_eq!(s["fail_reason"], "context_exceeded");
    assert_eq!(s["error"]["kind"], "context_exceeded");
    assert!(
        s["fail_detail"]
            .as_str()
            .unwrap()
            .starts_with("error reply: context_exceeded"),
        "{}",
        s["fail_detail"]
    );
}

#[test]
fn inspect_of_a_missing_or_bad_file_exits_5() {
    let run = |p: &Path| {
        fixtures::servegate()
            .arg("inspect")
            .arg(p)
            .output()
            .unwrap()
    };
    let out = run(&data_dir().join("no-such-file.sse"));
    assert_eq!(out.status.code(), Some(5));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-file.sse"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.reads.jsonl");
    std::fs::write(&bad, "{\"t_ms\": 1}\nnot json\n").unwrap();
    let out = run(&bad);
    assert_eq!(out.status.code(), Some(5));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// inspect reports, it does not judge: a log whose --require matches nothing prints `"ok": false` with
/// `route_not_matched` and exits 0, as its --help and docs/metrics.md say.
#[test]
fn inspect_exits_0_on_a_reply_it_prints_with_ok_false_and_its_help_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("r.log");
    std::fs::write(&log, "loaded model\nserving\n").unwrap();
    let out = fixtures::servegate()
        .arg("inspect")
        .arg(&log)
        .args(["--require", "nomatch"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["ok"], Value::Bool(false), "{v}");
    assert_eq!(v["summary"]["fail_reason"], "route_not_matched", "{v}");
    assert_eq!(out.status.code(), Some(0));
    let help = fixtures::servegate()
        .args(["inspect", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("exit 0 whenever the JSON is printed, `\"ok\": false` included"),
        "{help}"
    );
}

/// `inspect` of `bytes` written to `name` in a temp dir: (exit code, stdout JSON or Null, stderr).
fn inspect_bytes_as(name: &str, bytes: &[u8]) -> (Option<i32>, Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    let out = fixtures::servegate()
        .arg("inspect")
        .arg(&p)
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const SANE_JSON: &str = r#"{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#;

const SANE_SSE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n\
    data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Paris is the capital.\"}}]}\n\n\
    data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
    data: [DONE]\n\n";

fn parse_errors(v: &Value) -> String {
    v["reply"]["parse_errors"].to_string()
}

/// A body shorter than its Content-Length, or a chunked body cut inside a chunk (or before its last chunk),
/// read as complete, sane replies: each is now truncated (not ok) and says why; a body longer than its
/// Content-Length is read as far as it says (as an HTTP client reads it) and the extra bytes are flagged.
#[test]
fn inspect_holds_an_http_body_to_its_content_length_and_chunking() {
    let head = |ct: &str, framing: &str| {
        format!("HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\n{framing}\r\n\r\n")
    };
    // The honest response is ok.
    let good = format!(
        "{}{SANE_JSON}",
        head(
            "application/json",
            &format!("Content-Length: {}", SANE_JSON.len())
        )
    );
    let (code, v, e) = inspect_bytes_as("r.http", good.as_bytes());
    assert_eq!(code, Some(0), "{e}");
    assert_eq!(v["summary"]["ok"], true, "{v}");
    // Content-Length says more than arrived: cut.
    let short = format!(
        "{}{SANE_JSON}",
        head(
            "application/json",
            &format!("Content-Length: {}", SANE_JSON.len() + 40)
        )
    );
    let (_, v, _) = inspect_bytes_as("r.http", short.as_bytes());
    assert_eq!(v["summary"]["ok"], false, "{v}");
    assert!(parse_errors(&v).contains("Content-Length"), "{v}");
    let sse_short = format!(
        "{}{SANE_SSE}",
        head(
            "text/event-stream",
            &format!("Content-Length: {}", SANE_SSE.len() + 10)
        )
    );
    let (_, v, _) = inspect_bytes_as("r.http", sse_short.as_bytes());
    assert_eq!(v["summary"]["ok"], false, "{v}");
    assert_eq!(v["summary"]["fail_reason"], "truncated_stream", "{v}");
    // Longer than its Content-Length: read as far as it says, the rest flagged.
    let long = format!(
        "{}{SANE_JSON}GARBAGE",
        head(
            "application/json",
            &format!("Content-Length: {}", SANE_JSON.len())
        )
    );
    let (_, v, _) = inspect_bytes_as("r.http", long.as_bytes());
    assert!(
        parse_errors(&v).contains("7 bytes after the Content-Length"),
        "{v}"
    );
    // Chunked, cut inside a chunk: not ok, said.
    let (a, b) = SANE_SSE.split_at(60);
    let whole = format!(
        "{}{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        head("text/event-stream", "Transfer-Encoding: chunked"),
        a.len(),
        b.len()
    );
    let (_, v, _) = inspect_bytes_as("r.http", whole.as_bytes());
    assert_eq!(v["summary"]["ok"], true, "{v}");
    let cut = format!(
        "{}{:x}\r\n{a}\r\n{:x}\r\n{}",
        head("text/event-stream", "Transfer-Encoding: chunked"),
        a.len(),
        b.len() + 50,
        b
    );
    let (_, v, _) = inspect_bytes_as("r.http", cut.as_bytes());
    assert_eq!(v["summary"]["ok"], false, "{v}");
    assert!(parse_errors(&v).contains("cut inside a chunk"), "{v}");
    // Chunked, every chunk whole but the last (zero) chunk missing.
    let no_last = format!(
        "{}{:x}\r\n{SANE_SSE}\r\n",
        head("text/event-stream", "Transfer-Encoding: chunked"),
        SANE_SSE.len()
    );
    let (_, v, _) = inspect_bytes_as("r.http", no_last.as_bytes());
    assert_eq!(v["summary"]["ok"], false, "{v}");
    assert!(
        parse_errors(&v).contains("without its last (zero-size) chunk"),
        "{v}"
    );
}

/// `inspect` read its input whole (a 1 GB single-line SSE file passed 2 GB resident): a file over
/// INSPECT_CAP_BYTES is refused before it is read, exit 5, naming the cap. (A sparse file: no disk used.)
#[test]
fn inspect_refuses_a_file_over_its_cap_before_reading_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("huge.sse");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(servegate::inspect::INSPECT_CAP_BYTES + 1)
        .unwrap();
    let out = fixtures::servegate()
        .arg("inspect")
        .arg(&p)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("over inspect's cap of 134217728 bytes"),
        "{stderr}"
    );
}
