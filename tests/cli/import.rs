//! `servegate import` end to end: a real `vllm bench serve --save-result --save-detailed` result
//! (tests/data/import/README.md) imported and judged by a load gate gives PASS, and FAIL with a bound under
//! the tool's values, every verdict naming the tool; `servegate judge` on the directory written gives the
//! same lines; a malformed file exits 5 naming where; a point the gate lacks exits 2.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::fixtures;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

/// A load gate at concurrency 2, 12 judged requests, with these assertions, written in `dir`.
fn gate(dir: &Path, asserts: &str) -> PathBuf {
    let text = format!(
        r#"[gate]
name = "import-vllm"
[serve]
url = "http://127.0.0.1:9"
[request]
model = "synthetic"
max_tokens = 16
prompts = ["a"]
[load]
concurrency = [2]
requests = 12
{asserts}
"#
    );
    let p = dir.join("gate.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Replaces `from` with `to` in the gate file `g`.
fn edit(g: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(g).unwrap();
    assert!(text.contains(from), "{from:?} not in {}", g.display());
    std::fs::write(g, text.replace(from, to)).unwrap();
}

/// The committed vLLM run (tests/data/import/vllm-bench-c2.json) changed by `f`, written as `dir/name`.
fn vllm_variant(dir: &Path, name: &str, f: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("vllm-bench-c2.json")).unwrap()).unwrap();
    f(&mut v);
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    p
}

/// The verdict line of `name` (`[c=2]::throughput`) in `stdout`.
fn line<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} not in\n{stdout}"))
}

fn import(args: &[&str]) -> (i32, String, String) {
    let out: Output = fixtures::servegate()
        .arg("import")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `servegate import --from TOOL FILE --gate GATE --out OUT` and `extra` arguments: exit code, stdout,
/// stderr.
fn import_to(
    tool: &str,
    file: &Path,
    gate: &Path,
    out: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec![
        "--from",
        tool,
        file.to_str().unwrap(),
        "--gate",
        gate.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    import(&args)
}

const PASSING: &str = "[assert.latency]\nttft_p50_ms = 500\ntpot_p50_ms = 100\ne2e_p50_ms = 5000\n[assert.throughput]\nfloor_tok_s = 1.0\n[assert.errors]\nmax_rate = 0.0\n";

#[test]
fn a_vllm_bench_run_imported_passes_its_gate_and_names_the_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    let out = tmp.path().join("run");
    let file = data("vllm-bench-c2.json");
    let (code, stdout, stderr) = import_to(
        "vllm-bench",
        &file,
        &g,
        &out,
        &[
            "--tool-version",
            "0.32.0",
            "--tool-command",
            "vllm bench serve ...",
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("imported 12 requests of vllm-bench"),
        "{stdout}"
    );
    let verdicts: Vec<&str> = stdout.lines().filter(|l| l.contains("[c=2]::")).collect();
    assert_eq!(verdicts.len(), 5, "{stdout}");
    for l in &verdicts {
        assert!(l.contains(" PASS "), "{l}");
        assert!(
            l.ends_with("timings by vllm-bench 0.32.0, not servegate's client"),
            "{l}"
        );
    }
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("c2/run.json")).unwrap()).unwrap();
    assert_eq!(run["imported"]["tool"], "vllm-bench");
    assert_eq!(run["imported"]["version"], "0.32.0");
    assert_eq!(run["imported"]["command"], "vllm bench serve ...");
    assert_eq!(run["imported"]["text_recorded"], true);
    // Re-judged later, the same verdict lines.
    let j = fixtures::servegate()
        .arg("judge")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(j.status.code(), Some(0));
    let again = String::from_utf8_lossy(&j.stdout);
    for l in &verdicts {
        assert!(again.lines().any(|x| x == *l), "{l} not in\n{again}");
    }
}

#[test]
fn a_bound_under_the_tools_values_fails_and_bad_input_exits_with_its_code() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "[assert.latency]\nttft_p50_ms = 0.001\n");
    let file = data("vllm-bench-c2.json");
    let out = tmp.path().join("run");
    let (code, stdout, _) = import_to("vllm-bench", &file, &g, &out, &[]);
    assert_eq!(code, 1, "{stdout}");
    let l = stdout
        .lines()
        .find(|l| l.contains("[c=2]::ttft_p50"))
        .unwrap();
    assert!(l.contains(" FAIL "), "{l}");
    assert!(
        l.ends_with("timings by vllm-bench (version not stated), not servegate's client"),
        "{l}"
    );

    // The same directory again: refused, nothing overwritten.
    let (code, _, stderr) = import_to("vllm-bench", &file, &g, &out, &[]);
    assert_eq!(code, 2, "{stderr}");

    // A truncated file: exit 5, where it breaks said.
    let t = std::fs::read_to_string(data("aiperf-shaped-with-error.jsonl")).unwrap();
    let bad = tmp.path().join("cut.jsonl");
    std::fs::write(
        &bad,
        format!(
            "{}\n{{\"metadata\": {{\"request_start_ns\": 1",
            t.trim_end()
        ),
    )
    .unwrap();
    let (code, _, stderr) = import(&[
        "--from",
        "aiperf",
        bad.to_str().unwrap(),
        "--gate",
        g.to_str().unwrap(),
    ]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("line 7: truncated"), "{stderr}");
    // A line with a raw control byte: not JSON, named, and the byte never reaches the terminal raw.
    let bad = tmp.path().join("esc.jsonl");
    std::fs::write(&bad, format!("{}\n{{\"x\u{1b}[31m\": 1}}\n", t.trim_end())).unwrap();
    let (code, _, stderr) = import(&[
        "--from",
        "aiperf",
        bad.to_str().unwrap(),
        "--gate",
        g.to_str().unwrap(),
    ]);
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains("line 7: not JSON"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");

    // A point the gate does not declare: exit 2.
    let (code, _, stderr) = import(&[
        "--from",
        "vllm-bench",
        file.to_str().unwrap(),
        "--gate",
        g.to_str().unwrap(),
        "--point",
        "c=8",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--point c=8 but the file states point c=2"),
        "{stderr}"
    );
}

#[test]
fn a_guidellm_run_refuses_itl_percentiles_and_the_verdict_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "[assert.latency]\nttft_p50_ms = 500\nitl_p50_ms = 50",
    );
    edit(&g, "requests = 12", "requests = 6");
    let file = data("guidellm-c2.json");
    let (code, stdout, stderr) = import_to("guidellm", &file, &g, &tmp.path().join("run"), &[]);
    // INDETERMINATE (exit 8): a refused percentile is neither a pass nor a fail.
    assert_eq!(code, 8, "{stdout}\n{stderr}");
    let itl = stdout
        .lines()
        .find(|l| l.contains("[c=2]::itl_p50"))
        .unwrap();
    assert!(
        itl.contains(
            "INDETERMINATE itl p50 refused: GuideLLM records the first and last token times"
        ),
        "{itl}"
    );
    let ttft = stdout
        .lines()
        .find(|l| l.contains("[c=2]::ttft_p50"))
        .unwrap();
    assert!(
        ttft.contains(" PASS ")
            && ttft.ends_with("timings by guidellm 0.8.1, not servegate's client"),
        "{ttft}"
    );
}

/// inference-perf 0.7.0's real run against the reference serve (tests/data/import/README.md): 12 requests
/// at concurrency 2, two cut by the serve. The load point comes from config.yaml beside the file; a gate
/// allowing no error FAILs naming the tool; one allowing 20 % PASSes; the text is judged (recorded).
#[test]
fn an_inference_perf_run_imported_is_judged_with_its_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let file = data("inference-perf-c2/per_request_lifecycle_metrics.json");
    let run = |asserts: &str, out: &str| {
        let dir = tmp.path().join(out);
        std::fs::create_dir_all(&dir).unwrap();
        let g = gate(&dir, asserts);
        let (code, stdout, stderr) = import_to(
            "inference-perf",
            &file,
            &g,
            &dir.join("run"),
            &["--tool-version", "0.7.0"],
        );
        (code, stdout, stderr, dir.join("run"))
    };
    let loose = "[assert.latency]\nttft_p50_ms = 60000\ntpot_p50_ms = 5000\n[assert.errors]\nmax_rate = 0.2\n";
    let (code, stdout, stderr, out) = run(loose, "loose");
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("imported 12 requests of inference-perf"),
        "{stdout}"
    );
    assert!(stdout.contains("as point c=2"), "{stdout}");
    let errors = stdout.lines().find(|l| l.contains("::errors ")).unwrap();
    assert!(
        errors.contains(" PASS 2 of 12 planned requests failed"),
        "{errors}"
    );
    // The tool's own class of its failures is the cause every verdict that counts them names, as the
    // causes of servegate's own client's failures are (the import files them under `transport`).
    assert!(
        errors.contains("; by cause: 2 ServerDisconnectedError (inference-perf's own names), rate"),
        "{errors}"
    );
    let ttft = stdout.lines().find(|l| l.contains("::ttft_p50 ")).unwrap();
    assert!(
        ttft.contains("2 failed, counted above every value, by cause: 2 ServerDisconnectedError (inference-perf's own names)"),
        "{ttft}"
    );
    assert!(
        errors.ends_with("timings by inference-perf 0.7.0, not servegate's client"),
        "{errors}"
    );
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("c2/run.json")).unwrap()).unwrap();
    assert_eq!(run_json["imported"]["tool"], "inference-perf");
    assert_eq!(run_json["imported"]["text_recorded"], true);
    let strict = "[assert.errors]\nmax_rate = 0.0\n";
    let (code, stdout, _, _) = run(strict, "strict");
    assert_eq!(code, 1, "{stdout}");
    let errors = stdout.lines().find(|l| l.contains("::errors ")).unwrap();
    assert!(errors.contains(" FAIL 2 of 12"), "{errors}");
}

/// One file is one point: imported under a gate of two points, the other point's trials are INDETERMINATE
/// "not imported" (exit 8), never failed for want of evidence (found by a newcomer's trial).
#[test]
fn the_gates_other_points_are_not_imported_not_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    edit(&g, "concurrency = [2]", "concurrency = [1, 2]");
    let out = tmp.path().join("run");
    let (code, stdout, stderr) = import_to(
        "vllm-bench",
        &data("vllm-bench-c2.json"),
        &g,
        &out,
        &["--tool-version", "0.32.0"],
    );
    assert_eq!(code, 8, "{stdout}\n{stderr}");
    let c1: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("[c=1]::"))
        .collect();
    assert_eq!(c1.len(), 5, "{stdout}");
    for l in c1 {
        assert!(
            l.contains(
                " INDETERMINATE not imported: this run holds vllm-bench's run of point c=2 only"
            ),
            "{l}"
        );
    }
    let c2: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("[c=2]::"))
        .collect();
    assert!(
        c2.len() == 5 && c2.iter().all(|l| l.contains(" PASS ")),
        "{stdout}"
    );
}

/// k6's `--out json` of xk6-llm's samples (constructed to the format, tests/data/import/README.md): 6
/// requests at concurrency 2, one failed. No point in the file: the gate's only point, which the run's peak
/// in flight agrees with; no version in the file: `--tool-version` names it in every verdict; no text: the
/// import says so.
#[test]
fn a_k6_xk6_llm_run_imported_is_judged_naming_the_tool() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "[assert.latency]\nttft_p50_ms = 100\ntpot_p50_ms = 20\n[assert.errors]\nmax_rate = 0.2\n",
    );
    edit(&g, "requests = 12", "requests = 6");
    let out = tmp.path().join("run");
    let (code, stdout, stderr) = import_to(
        "k6",
        &data("k6-c2/k6-xk6-llm.json"),
        &g,
        &out,
        &["--tool-version", "k6 1.1.0 + xk6-llm 0.3.0"],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("imported 6 requests of k6"), "{stdout}");
    let ttft = stdout.lines().find(|l| l.contains("::ttft_p50 ")).unwrap();
    assert!(ttft.contains(" PASS "), "{ttft}");
    assert!(
        ttft.ends_with("timings by k6 k6 1.1.0 + xk6-llm 0.3.0, not servegate's client"),
        "{ttft}"
    );
    let errors = stdout.lines().find(|l| l.contains("::errors ")).unwrap();
    assert!(
        errors.contains("1 of 6 planned requests failed"),
        "{errors}"
    );
    // xk6-llm's own class of the failure is the cause named.
    assert!(
        errors.contains("by cause: 1 network (k6's own names)"),
        "{errors}"
    );
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("c2/run.json")).unwrap()).unwrap();
    assert_eq!(run_json["imported"]["tool"], "k6");
    assert_eq!(run_json["imported"]["text_recorded"], false);
    // A TPOT bound under the run's 10 ms FAILs, naming the tool.
    let strict = tmp.path().join("strict");
    std::fs::create_dir_all(&strict).unwrap();
    let g2 = gate(&strict, "[assert.latency]\ntpot_p50_ms = 5\n");
    edit(&g2, "requests = 12", "requests = 6");
    let (code, stdout, _) = import_to(
        "k6",
        &data("k6-c2/k6-xk6-llm.json"),
        &g2,
        &strict.join("run"),
        &["--tool-version", "1.1.0"],
    );
    assert_eq!(code, 1, "{stdout}");
    let tpot = stdout.lines().find(|l| l.contains("::tpot_p50 ")).unwrap();
    assert!(tpot.contains(" FAIL "), "{tpot}");
}

/// Outside strings of an imported run (the tool's `model_id`, the tool version given) reach the Markdown
/// summary escaped as verdict lines are, and inert as Markdown: no raw ESC or U+202E, no `##vso[` or `##[`,
/// no HTML tag, no link.
#[test]
fn an_imported_runs_outside_strings_are_escaped_in_the_markdown_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    let hostile = "\u{1b}[31mRED\u{1b}[0m ::error::pwned ##vso[task.complete result=Succeeded] ##[error]x \u{202e}evil <script>alert(1)</script> [click](javascript:alert(1))";
    let text = std::fs::read_to_string(data("vllm-bench-c2.json"))
        .unwrap()
        .replace(
            "\"model_id\": \"synthetic\"",
            &format!("\"model_id\": {}", serde_json::to_string(hostile).unwrap()),
        );
    assert!(text.contains("pwned"));
    let file = tmp.path().join("bench.json");
    std::fs::write(&file, text).unwrap();
    let md = tmp.path().join("s.md");
    let (code, stdout, stderr) = import_to(
        "vllm-bench",
        &file,
        &g,
        &tmp.path().join("run"),
        &["--tool-version", hostile, "--summary", md.to_str().unwrap()],
    );
    assert!(code == 0 || code == 1, "{stdout}\n{stderr}");
    let s = std::fs::read_to_string(&md).unwrap();
    assert!(s.contains("pwned"), "the strings are shown, escaped: {s}");
    // A bracket escaped (`\[`, `\]`) forms no link: the text without them holds none.
    let unescaped = s.replace("\\[", "").replace("\\]", "");
    for raw in [
        "\u{1b}",
        "\u{202e}",
        "##vso[",
        "##[",
        "<script",
        "</script",
        "](javascript:",
        "[click",
    ] {
        assert!(!unescaped.contains(raw), "{raw:?} raw in the summary:\n{s}");
    }
    assert!(s.contains("##vso\\[task.complete"), "{s}");
    assert!(s.contains("&lt;script&gt;"), "{s}");
    assert!(s.contains("\\u{202e}evil"), "{s}");
}

/// The gate's `warmup_requests` apply to GuideLLM's report, which does not mark its warmups: its first 2
/// requests by send time are recorded, not judged, as the driver run of the same gate records them, and the
/// import says so (found by a newcomer's trial: imported, the driver's report was judged `n=22 of 22`).
#[test]
fn a_guidellm_import_takes_the_gates_warmups_from_its_first_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "[assert.errors]\nmax_rate = 0.0\n");
    edit(&g, "requests = 12", "requests = 4\nwarmup_requests = 2");
    let out = tmp.path().join("run");
    let (code, stdout, stderr) = import_to(
        "guidellm",
        &data("guidellm-c2.json"),
        &g,
        &out,
        &["--point", "c=2"],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("note: the gate's [load] warmup_requests: the first 2 requests by send time are recorded as warmups"),
        "{stdout}"
    );
    assert!(
        stdout.contains("0 of 4 planned requests failed"),
        "{stdout}"
    );
}

/// An import of the c=2 point under a gate of points [1, 2] with `[assert.consistency]`: there are no
/// concurrency-1 replies here, so consistency is INDETERMINATE naming why, never FAIL (docs/load.md: points
/// not imported are never failed for want of evidence).
#[test]
fn consistency_of_an_import_without_its_c1_point_is_indeterminate() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), "[assert.consistency]\nrule = \"exact\"");
    edit(&g, "requests = 12", "requests = 6");
    edit(&g, "concurrency = [2]", "concurrency = [1, 2]");
    let (code, stdout, stderr) = import_to(
        "guidellm",
        &data("guidellm-c2.json"),
        &g,
        &tmp.path().join("run"),
        &[],
    );
    assert_eq!(code, 8, "{stdout}\n{stderr}");
    let c = stdout
        .lines()
        .find(|l| l.contains("[c=2]::consistency"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        c.contains(" INDETERMINATE no replies at concurrency 1 to compare with: the c=1 point is not in this run"),
        "{c}"
    );
}

/// Load verdicts carry their assertion's line, bound, unit and metric into the GitHub annotations and the
/// results JSON, as single-request verdicts do; an import's annotations point at the `--gate` file given,
/// not the copy inside the run directory.
#[test]
fn load_verdicts_carry_their_line_bound_and_metric_and_annotate_the_gate_given() {
    let tmp = tempfile::tempdir().unwrap();
    // Line 13: ttft_p50_ms; line 14: [assert.throughput].
    let g = gate(
        tmp.path(),
        "[assert.latency]\nttft_p50_ms = 0.001\n[assert.throughput]\nfloor_tok_s = 1.0",
    );
    edit(&g, "requests = 12", "requests = 6");
    let json = tmp.path().join("results.json");
    let (code, stdout, stderr) = import_to(
        "guidellm",
        &data("guidellm-c2.json"),
        &g,
        &tmp.path().join("run"),
        &["--github", "--json", json.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let ann = stdout
        .lines()
        .find(|l| l.starts_with("::error ") && l.contains("ttft_p50"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        ann.contains(&format!("file={},line=13,", g.display())),
        "{ann}"
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let asserts = r["gates"][0]["assertions"].as_array().unwrap();
    let by = |n: &str| {
        asserts
            .iter()
            .find(|a| a["name"].as_str().unwrap().ends_with(n))
            .unwrap_or_else(|| panic!("{n}: {asserts:#?}"))
    };
    let ttft = by("ttft_p50");
    assert_eq!(ttft["line"], 13, "{ttft}");
    assert_eq!(ttft["bound"], 0.001, "{ttft}");
    assert_eq!(ttft["unit"], "ms", "{ttft}");
    assert_eq!(ttft["bound_kind"], "limit", "{ttft}");
    assert_eq!(ttft["metric"]["name"], "ttft", "{ttft}");
    assert!(ttft["median"].as_f64().unwrap() > 0.001, "{ttft}");
    let tp = by("throughput");
    assert_eq!(tp["line"], 14, "{tp}");
    assert_eq!(tp["bound"], 1.0, "{tp}");
    assert_eq!(tp["metric"]["name"], "output_throughput", "{tp}");
    assert_eq!(tp["unit"], "tok/s", "{tp}");
    // The exports state medians: a load trial's percentile is not exported as one.
    let out = fixtures::servegate()
        .args(["export", "--bmf", json.to_str().unwrap()])
        .output()
        .unwrap();
    let bmf = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{bmf}");
    assert_eq!(bmf.trim(), "{}", "a load trial exported as a median");
}

/// What is not a tool's file is refused at once, named, exit 5, nothing written: a device that never ends
/// (`/dev/zero`: it read until memory ran out), a FIFO with no writer (it waited for ever), a directory,
/// and a (sparse) file over the 4 GiB an import reads whole.
#[test]
fn a_device_a_fifo_a_directory_or_an_oversized_file_is_refused_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    let fifo = tmp.path().join("fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = tmp.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len((4u64 << 30) + 1)
        .unwrap();
    for (file, why) in [
        (
            PathBuf::from("/dev/zero"),
            "not a regular file (a character device)",
        ),
        (fifo, "not a regular file (a FIFO)"),
        (tmp.path().to_path_buf(), "not a regular file (a directory)"),
        (big, "4294967297 bytes, over the 4 GiB servegate reads"),
    ] {
        let out = tmp.path().join("run");
        let (code, stdout, stderr) = import_to("vllm-bench", &file, &g, &out, &[]);
        assert_eq!(code, 5, "{}: {stdout}\n{stderr}", file.display());
        assert!(stderr.contains(why), "{}: {stderr}", file.display());
        assert!(!out.exists(), "nothing written for {}", file.display());
    }
}

/// vLLM records each reply's text: one empty (`generated_texts[0] = ""`, 16 tokens) is an empty reply, a
/// content failure the errors verdict counts (it passed `0 of 12` with placeholder reads, its content never
/// judged). A file with no text at all: the errors verdict says content was not judged, never a bare PASS.
#[test]
fn an_empty_vllm_reply_fails_and_a_file_without_text_says_content_was_not_judged() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("vllm-bench-c2.json")).unwrap()).unwrap();
    assert!(v["output_lens"][0].as_u64().unwrap() > 0);
    v["generated_texts"][0] = serde_json::json!("");
    let file = tmp.path().join("vllm-empty.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let out = tmp.path().join("run");
    let (code, stdout, stderr) = import_to("vllm-bench", &file, &g, &out, &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let errors = stdout.lines().find(|l| l.contains("::errors ")).unwrap();
    assert!(errors.contains(" FAIL "), "{errors}");
    assert!(
        errors.contains(
            "1 of 12 planned requests failed (error, cut, or no sane content); by cause: 1 content"
        ),
        "{errors}"
    );
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("c2/run.json")).unwrap()).unwrap();
    assert_eq!(run_json["imported"]["text_recorded"], true);
    // Every reply's reads carry its text (the empty one's empty content), never a placeholder.
    for i in 0..12 {
        let reads = std::fs::read_to_string(out.join(format!("c2/{i:02}.reads.jsonl"))).unwrap();
        assert!(
            !reads.contains("\\u2591") && !reads.contains('\u{2591}'),
            "{i}: {reads}"
        );
    }

    // No text recorded at all: content not judged, said in the errors verdict.
    let none = tmp.path().join("none");
    std::fs::create_dir_all(&none).unwrap();
    let g2 = gate(&none, PASSING);
    v.as_object_mut().unwrap().remove("generated_texts");
    let file = none.join("vllm-textless.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let (code, stdout, stderr) = import_to("vllm-bench", &file, &g2, &none.join("run"), &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let errors = stdout.lines().find(|l| l.contains("::errors ")).unwrap();
    assert!(
        errors.contains("0 of 12 planned requests failed (error or cut; content not judged: vllm-bench's file holds no usable reply text, the reads carry placeholders)"),
        "{errors}"
    );
}

/// An AIPerf file whose records are all warmups: the first line says how many were warmups and how many
/// judged (it said `imported 6 requests`, then `the file holds 0`).
#[test]
fn an_aiperf_file_of_warmups_only_says_so_in_its_first_line() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    edit(&g, "requests = 12", "requests = 6");
    let text = std::fs::read_to_string(data("aiperf-c2/profile_export.jsonl")).unwrap();
    let warm = text.replace(
        "\"benchmark_phase\":\"profiling\"",
        "\"benchmark_phase\":\"warmup\"",
    );
    assert_ne!(warm, text);
    let file = tmp.path().join("profile_export.jsonl");
    std::fs::write(&file, warm).unwrap();
    let (_, stdout, stderr) = import_to(
        "aiperf",
        &file,
        &g,
        &tmp.path().join("run"),
        &["--tool-version", "0.13.0"],
    );
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("imported 6 requests (6 warmups, 0 judged) of aiperf"),
        "{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("and the file holds 0 (and 6 warmups, recorded, not judged)"),
        "{stdout}"
    );
}

/// Every request of a vLLM run failed, each with its send and its end (`latencies`): they were in flight
/// two at a time, so the throughput FAILs at peak 2, as servegate's own client and an AIPerf import do
/// (a newcomer's trial: it was INDETERMINATE "peak real concurrency 0 never reached the asked concurrency
/// 2 (its requests ended before the next were sent)", the failures counted as never in flight). vLLM's own
/// record of an HTTP error (no chunk, `latency` 0: no end kept) counts each at its send only: INDETERMINATE
/// saying the peak is a lower bound, never that the requests ended early.
#[test]
fn failed_requests_count_in_flight_and_a_run_that_all_failed_fails_its_throughput() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "[assert.throughput]\nfloor_tok_s = 1.0\nfloor_rps = 1.0\n",
    );
    let timed = vllm_variant(tmp.path(), "timed.json", |v| {
        v["errors"] = serde_json::json!(vec!["boom"; 12]);
    });
    let args =
        |file: &Path, out: &str| import_to("vllm-bench", file, &g, &tmp.path().join(out), &["-v"]);
    let (code, stdout, stderr) = args(&timed, "timed");
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let t = line(&stdout, "[c=2]::throughput");
    assert!(
        t.contains(" FAIL output 0.0 tok/s, 0.00 requests/s")
            && t.contains("peak real concurrency 2 "),
        "{t}"
    );

    let untimed = vllm_variant(tmp.path(), "untimed.json", |v| {
        v["errors"] = serde_json::json!(vec!["Internal Server Error"; 12]);
        v["ttfts"] = serde_json::json!(vec![0.0; 12]);
        v["latencies"] = serde_json::json!(vec![0.0; 12]);
        v["itls"] = serde_json::json!(vec![Vec::<f64>::new(); 12]);
        v["output_lens"] = serde_json::json!(vec![0; 12]);
    });
    let (code, stdout, stderr) = args(&untimed, "untimed");
    assert_eq!(code, 8, "{stdout}\n{stderr}");
    let t = line(&stdout, "[c=2]::throughput");
    assert!(
        t.contains(" INDETERMINATE peak real concurrency 1 never reached the asked concurrency 2 (12 failed requests have no end recorded, counted in flight at their send only: the peak is at least this)"),
        "{t}"
    );
}

/// A burst of 12 (every vLLM `start_times` the first) is refused as point c=2 whatever names it: the file
/// (`max_concurrency` 2 left in it) or `--point c=2` (a newcomer's trial: both were filed and passed as c=2
/// with peak real concurrency 12). Exit 2 as the refusal of the gate's only point, nothing written.
#[test]
fn a_burst_is_never_filed_as_c2_whatever_names_the_point() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    let stated = vllm_variant(tmp.path(), "stated.json", |v| {
        let t0 = v["start_times"][0].clone();
        v["start_times"] = serde_json::json!(vec![t0; 12]);
    });
    let unstated = vllm_variant(tmp.path(), "unstated.json", |v| {
        let t0 = v["start_times"][0].clone();
        v["start_times"] = serde_json::json!(vec![t0; 12]);
        v["max_concurrency"] = serde_json::Value::Null;
    });
    for (file, point, how) in [
        (&stated, None, "stated by the file"),
        (&unstated, Some("c=2"), "named by --point"),
    ] {
        let out = tmp.path().join("run");
        let mut args = vec![
            "--from",
            "vllm-bench",
            file.to_str().unwrap(),
            "--gate",
            g.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        if let Some(p) = point {
            args.extend(["--point", p]);
        }
        let (code, stdout, stderr) = import(&args);
        assert_eq!(code, 2, "{how}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("error: the run had 12 requests in flight at once, more than the concurrency 2 of point c=2 ({how}) allows")),
            "{stderr}"
        );
        assert!(!out.exists(), "{how}: nothing written");
    }
}

/// An imported rate point's `load.json` states the cap the file states (vLLM `max_concurrency` beside
/// `request_rate`), as a live open-loop point's does; it stated none.
#[test]
fn an_imported_rate_point_records_the_cap_its_file_states() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    edit(
        &g,
        "concurrency = [2]",
        "rate_rps = [4.0]\nmax_concurrency = 2",
    );
    let file = vllm_variant(tmp.path(), "rate.json", |v| {
        v["request_rate"] = serde_json::json!(4);
    });
    let out = tmp.path().join("run");
    let (code, stdout, stderr) = import_to("vllm-bench", &file, &g, &out, &[]);
    assert!(code == 0 || code == 1, "{stdout}\n{stderr}");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("r4").join("load.json")).unwrap()).unwrap();
    assert_eq!(rec["rate_rps"], serde_json::json!(4.0), "{rec}");
    assert_eq!(rec["max_concurrency"], serde_json::json!(2), "{rec}");
    assert_eq!(rec["arrival"], "imported", "{rec}");
}

/// A negative rate in a vLLM file is a format error naming its path (exit 5), as a negative
/// `max_concurrency` is (a newcomer's trial: it was exit 2, "the run is point r=-5 but gate ... declares
/// points c=2"); so is one in inference-perf's `config.yaml` beside its file (it was a note, and the gate's
/// only point taken).
#[test]
fn a_negative_rate_is_a_format_error_naming_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), PASSING);
    let neg = vllm_variant(tmp.path(), "neg.json", |v| {
        v["request_rate"] = serde_json::json!(-5);
        v["max_concurrency"] = serde_json::Value::Null;
    });
    let ip = tmp.path().join("ip");
    std::fs::create_dir_all(&ip).unwrap();
    let src = data("inference-perf-c2");
    std::fs::copy(
        src.join("per_request_lifecycle_metrics.json"),
        ip.join("per_request_lifecycle_metrics.json"),
    )
    .unwrap();
    let cfg = std::fs::read_to_string(src.join("config.yaml")).unwrap();
    let cfg = cfg
        .replace("  type: concurrent\n", "  type: constant\n")
        .replace("    rate: 12.0\n", "    rate: -5.0\n");
    assert!(cfg.contains("rate: -5.0") && cfg.contains("type: constant"));
    std::fs::write(ip.join("config.yaml"), cfg).unwrap();
    for (from, file, why) in [
        (
            "vllm-bench",
            neg,
            "$.request_rate: -5 is not a request rate (requests/s > 0)",
        ),
        (
            "inference-perf",
            ip.join("per_request_lifecycle_metrics.json"),
            "config.yaml beside the file: load.stages[0].rate: \"-5.0\" is not a request rate",
        ),
    ] {
        let out = tmp.path().join("run");
        let (code, stdout, stderr) = import_to(from, &file, &g, &out, &[]);
        assert_eq!(code, 5, "{from}: {stdout}\n{stderr}");
        assert!(stderr.contains(why), "{from}: {stderr}");
        assert!(!out.exists(), "{from}: nothing written");
    }
}
