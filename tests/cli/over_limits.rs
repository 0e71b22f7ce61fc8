//! What goes here: a request recorded twice, refused by `servegate judge`. Replies over `max_tokens` judged in
//! process are tests/pure/over_limits.rs.
//!
//! Evidence that says more than the request allowed or than was sent, crafted from a real recorded run of
//! the reference serve (`data/baselines/reference-smoke-drift/w1`: SmolLM2-135M via llama.cpp, max_tokens 64,
//! six judged replies of 8, 64, 64, 8, 64, 64 completion tokens):
//! * a reply over the request's `max_tokens` is flagged `over_max_tokens`; `[assert.content]` fails it and
//!   `[assert.rate]` says so (docs/stream.md, "Replies over max_tokens");
//! * a request index recorded twice is refused by evidence reading with a message naming the file and the
//!   index (docs/evidence.md), never counted twice.

use crate::fixtures;
use crate::fixtures::over_limits::copy_run;

#[test]
fn a_request_recorded_twice_is_refused_naming_the_file_and_the_index() {
    let t = tempfile::tempdir().unwrap();
    let dir = copy_run(t.path());
    // run.json of a complete run.
    let run_path = dir.join("run.json");
    let original = std::fs::read_to_string(&run_path).unwrap();
    let mut run: serde_json::Value = serde_json::from_str(&original).unwrap();
    let reqs = run["requests"].as_array_mut().unwrap();
    let dup = reqs[3].clone();
    reqs.push(dup);
    std::fs::write(&run_path, serde_json::to_vec_pretty(&run).unwrap()).unwrap();
    let e = servegate::loaded::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("run.json") && e.contains("request 03 is recorded twice (records 4 and 10)"),
        "{e}"
    );

    // requests.jsonl of a run that did not finish (its records are only there).
    run["status"] = "interrupted".into();
    run["requests"] = serde_json::json!([]);
    std::fs::write(&run_path, serde_json::to_vec_pretty(&run).unwrap()).unwrap();
    let progress = dir.join("requests.jsonl");
    let lines = std::fs::read_to_string(&progress).unwrap();
    assert!(
        servegate::loaded::load(&dir).is_ok(),
        "the progress file as written loads"
    );
    let first = lines.lines().next().unwrap().to_string();
    std::fs::write(&progress, format!("{lines}{first}\n")).unwrap();
    let e = servegate::loaded::load(&dir).unwrap_err().to_string();
    assert!(
        e.contains("requests.jsonl") && e.contains("request 00 is recorded twice"),
        "{e}"
    );

    // Through the CLI: an evidence error (exit 5), the message on the console.
    let o = fixtures::servegate()
        .args(["judge", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(5), "{all}");
    assert!(all.contains("recorded twice"), "{all}");
}
