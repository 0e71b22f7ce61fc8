//! What goes here: load gates whose client runs on several CPUs (`[load] client_cpus`, docs/load.md "The
//! load client"), run by the binary against the synthetic serve it starts: the streams spread over the
//! pinned runtimes, every planned request merged into one point, each request's runtime named in
//! `load.json`; a CPU the runner may not use refused with its id. The spread and merge rules themselves are
//! unit tests of `src/io/load_cores.rs`.

use std::path::Path;

use crate::fixtures::{evidence_dir, path_env, text, Project};
use serde_json::Value;

/// A load gate on the synthetic serve (8 tokens at 400 tok/s after a 10 ms TTFT) with `load` as its
/// `[load]` table.
fn gate(load: &str) -> String {
    format!(
        r#"[gate]
name = "syn-cores"

[serve]
command = ["servegate", "replay", "--synthetic", "--tokens", "8", "--ttft-ms", "10", "--tok-s", "400", "--port", "{{port}}"]

[request]
model = "synthetic"
max_tokens = 8
prompts = ["a", "b", "c"]

[load]
{load}

[assert.errors]
max_rate = 0.0
"#
    )
}

fn run(p: &Project, name: &str, load: &str) -> std::process::Output {
    p.write(name, &gate(load));
    p.servegate()
        .args(["run", "-q", name])
        .env("PATH", path_env())
        .output()
        .unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks point `dir` of a run on two client runtimes: `planned` judged requests (after `warmup`) all
/// sent, merged into one record, each naming runtime 0 or 1 and that runtime's CPU; both runtimes carried
/// streams and spent CPU time; the client block's counts equal the timings'.
fn assert_two_runtimes(dir: &Path, warmup: usize, planned: usize, cpus: &[usize]) {
    let rec = json(&dir.join("load.json"));
    let run = json(&dir.join("run.json"));
    let runtimes = rec["client"]["runtimes"]
        .as_array()
        .expect("a client block");
    assert_eq!(runtimes.len(), 2, "{rec}");
    let timings = rec["timings"].as_array().unwrap();
    assert_eq!(timings.len(), warmup + planned, "{rec}");
    assert_eq!(run["requests"].as_array().unwrap().len(), warmup + planned);
    let mut carried = [0usize; 2];
    for t in timings {
        let r = &t["runtime"];
        let i = r["index"].as_u64().expect("each request names its runtime") as usize;
        assert!(i < 2, "{t}");
        assert_eq!(r["cpu"].as_u64().unwrap() as usize, cpus[i], "{t}");
        if t["index"].as_u64().unwrap() as usize >= warmup {
            carried[i] += 1;
        }
    }
    for (i, r) in runtimes.iter().enumerate() {
        assert_eq!(r["index"], i, "{r}");
        assert_eq!(r["cpu"].as_u64().unwrap() as usize, cpus[i], "{r}");
        assert_eq!(r["streams"].as_u64().unwrap() as usize, carried[i], "{r}");
        assert!(carried[i] > 0, "runtime {i} carried no stream: {rec}");
        assert!(r["cpu_ms"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(carried.iter().sum::<usize>(), planned);
}

/// Closed and open loops on two client runtimes: every planned request is sent and judged once, both
/// runtimes carry streams, and each request's record names its runtime and CPU. On a runner allowed one
/// CPU, the same gate is refused naming the count and the CPUs allowed.
#[test]
fn a_load_gate_on_two_client_runtimes_spreads_the_streams_and_merges_every_request() {
    let allowed = servegate::io::load_cores::allowed_cpus().unwrap();
    let p = Project::new();
    let o = run(
        &p,
        "closed.toml",
        "concurrency = 4\nrequests = 24\nwarmup_requests = 2\nmax_lag_ms = 1000\nclient_cpus = 2",
    );
    if allowed.len() < 2 {
        assert_ne!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains("load.client_cpus = 2"), "{}", text(&o));
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ev = evidence_dir(&String::from_utf8_lossy(&o.stdout));
    assert_two_runtimes(&ev.join("c4"), 2, 24, &allowed[..2]);

    // An open loop: one arrival process hands each request to the least loaded runtime.
    let cpus = [allowed[1], allowed[0]];
    let o = run(
        &p,
        "open.toml",
        &format!(
            "rate_rps = 100.0\narrival = \"constant\"\nmax_concurrency = 4\nrequests = 20\nmax_lag_ms = 1000\nclient_cpus = [{}, {}]",
            cpus[0], cpus[1]
        ),
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let ev = evidence_dir(&String::from_utf8_lossy(&o.stdout));
    let dir = ev.join("r100");
    assert_two_runtimes(&dir, 0, 20, &cpus);
    // One schedule: request i was due at 10 i ms whichever runtime carried it.
    let rec = json(&dir.join("load.json"));
    for (i, t) in rec["timings"].as_array().unwrap().iter().enumerate() {
        assert_eq!(t["intended_ms"].as_f64().unwrap(), 10.0 * i as f64, "{t}");
    }
}

/// A CPU outside the runner's allowed set is refused before anything is sent, naming the CPU; an empty
/// list is refused by the spec, naming the key.
#[test]
fn a_cpu_the_runner_may_not_use_is_refused_by_its_id() {
    let p = Project::new();
    let o = run(
        &p,
        "bad.toml",
        "concurrency = 2\nrequests = 4\nclient_cpus = [1023]",
    );
    let out = text(&o);
    // The serve was ready: the gate's load failed (exit 1), not "the serve never became ready" (4).
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("CPU 1023"), "{out}");
    assert!(out.contains("may not use"), "{out}");
    let o = run(
        &p,
        "empty.toml",
        "concurrency = 2\nrequests = 4\nclient_cpus = []",
    );
    let out = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("load.client_cpus"), "{out}");
    assert!(out.contains("empty"), "{out}");
}
