//! What goes here: `[load] driver = "locust"` on built input: the merge of the workers' records
//! (`servegate::evidence::locust`) and the spec's refusals. Locust itself against the synthetic serve is
//! tests/cli/load_locust.rs.

use servegate::evidence::locust::{merge, parse_worker_file, WorkerRecord};
use servegate::spec;

/// A worker record of request `index` on worker clock `w(t)` = master clock `t` − `skew_s`: its slot freed
/// at `freed`, its claim went out 0.1 ms later and came back 0.2 ms after that (the master granted it
/// halfway), sent 1 ms after the grant, the first read 50 ms after the send, ended 80 ms after it.
fn rec(node: &str, index: usize, freed: f64, skew_s: f64) -> serde_json::Value {
    let w = |t: f64| t - skew_s;
    let claim = freed + 0.0001;
    serde_json::json!({
        "node": node, "index": index, "freed": w(freed), "claim_sent": w(claim),
        "master_t": claim + 0.0001, "claim_recv": w(claim + 0.0002),
        "sent": w(claim + 0.0012), "head": w(claim + 0.0022), "end": w(claim + 0.0812),
        "status": 200, "headers": {"content-type": "text/event-stream"}, "error": null, "truncated": false,
        "reads": [
            {"t_ms": 50.0, "text": "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"},
            {"t_ms": 80.0, "hex": "646174613a205b444f4e455d0a0a"}
        ]
    })
}

fn file(lines: &[serde_json::Value]) -> Vec<WorkerRecord> {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    parse_worker_file(&text, "worker.jsonl").unwrap()
}

/// Two workers, the second's clock 1000 s behind the master's: the merge finds each offset from its
/// tightest claim handshake (within ± half its round trip), puts every request on the master's clock,
/// splits warmup from judged by the plan's index (judged indexes from 0, each phase timed from its first
/// intended send), and keeps the reads, the status and the HTTP times as the worker recorded them.
#[test]
fn the_merge_puts_every_worker_on_the_masters_clock() {
    let w0 = file(&[
        rec("a", 0, 10.0, 0.0),
        rec("a", 2, 10.3, 0.0),
        rec("a", 4, 10.5, 0.0),
    ]);
    let w1 = file(&[rec("b", 1, 10.1, 1000.0), rec("b", 3, 10.4, 1000.0)]);
    let m = merge(&[w0, w1], 1, 5).unwrap();
    assert_eq!(m.clocks.len(), 2);
    assert!(m.clocks[0].offset_ms.abs() < 1e-6, "{:?}", m.clocks[0]);
    assert!(
        (m.clocks[1].offset_ms - 1_000_000.0).abs() < 1e-3,
        "{:?}",
        m.clocks[1]
    );
    assert!((m.clocks[0].uncertainty_ms - 0.1).abs() < 1e-6);
    assert_eq!((m.clocks[0].requests, m.clocks[1].requests), (3, 2));

    assert_eq!(m.warmup.len(), 1);
    assert_eq!(m.warmup[0].timing.index, 0);
    assert_eq!(m.warmup[0].timing.intended_ms, 0.0);
    let idx: Vec<usize> = m.judged.iter().map(|x| x.timing.index).collect();
    assert_eq!(idx, vec![0, 1, 2, 3]);
    let workers: Vec<usize> = m.judged.iter().map(|x| x.worker).collect();
    assert_eq!(workers, vec![1, 0, 1, 0]);
    // Judged phase starts at request 1's intended send (master 10.1 s); request 3 (worker 1) was intended
    // at 10.4 s: 300 ms into the phase, whatever worker 1's own clock read.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    let t = &m.judged[2].timing;
    assert!(close(t.intended_ms, 300.0), "{t:?}");
    assert!(close(t.woke_ms, 300.3) && close(t.slot_ms, 300.3), "{t:?}");
    assert!(close(t.sent_ms, 301.3) && close(t.end_ms, 381.3), "{t:?}");
    assert!(close(t.lag_ms(), 0.3));
    let x = &m.judged[2].exchange;
    assert_eq!(x.response.status, Some(200));
    assert!(close(x.response.head_ms.unwrap(), 1.0) && close(x.response.end_ms.unwrap(), 80.0));
    assert_eq!(x.reads.len(), 2);
    assert_eq!(x.reads[1].bytes, b"data: [DONE]\n\n");
    assert_eq!(x.reads[0].t_ms, 50.0);
    assert_eq!(
        x.body_bytes,
        x.reads.iter().map(|r| r.bytes.len() as u64).sum::<u64>()
    );
}

/// A worker whose slot freed 50 ms before its grant came back: the lag is in the merged timing, where the
/// judge reads `max_lag_ms` from for servegate's own client too.
#[test]
fn a_workers_lag_is_the_merged_timings_lag() {
    let mut late = rec("a", 0, 10.0, 0.0);
    late["freed"] = serde_json::json!(10.0 - 0.05);
    let m = merge(&[file(&[late])], 0, 1).unwrap();
    assert!(
        (m.judged[0].timing.lag_ms() - 50.3).abs() < 1e-6,
        "{:?}",
        m.judged[0].timing
    );
}

/// What proves nothing is refused, saying what: a request recorded twice (by two workers), a request
/// outside the plan, a file holding two workers, times going backward within a request, a record missing
/// a field (never read as zero: the error names the line), a read that does not decode.
#[test]
fn the_merge_refuses_what_proves_nothing() {
    let err = |workers: &[Vec<WorkerRecord>]| merge(workers, 0, 3).unwrap_err();
    let e = err(&[
        file(&[rec("a", 0, 10.0, 0.0)]),
        file(&[rec("b", 0, 10.0, 0.0)]),
    ]);
    assert!(e.contains("request 0 is recorded twice"), "{e}");
    let e = err(&[file(&[rec("a", 3, 10.0, 0.0)])]);
    assert!(e.contains("outside the plan of 3"), "{e}");
    let e = err(&[file(&[rec("a", 0, 10.0, 0.0), rec("b", 1, 10.0, 0.0)])]);
    assert!(e.contains("two workers"), "{e}");
    let mut back = rec("a", 0, 10.0, 0.0);
    back["end"] = serde_json::json!(9.0);
    let e = err(&[file(&[back])]);
    assert!(e.contains("times go backward"), "{e}");
    let mut bad = rec("a", 0, 10.0, 0.0);
    bad["reads"] = serde_json::json!([{"t_ms": 1.0, "hex": "zz"}]);
    let e = err(&[file(&[bad])]);
    assert!(e.contains("request 0: read"), "{e}");

    let mut missing = rec("a", 0, 10.0, 0.0);
    missing.as_object_mut().unwrap().remove("freed");
    let text = format!("{}\n\n{missing}\n", rec("a", 1, 10.0, 0.0));
    let e = parse_worker_file(&text, "worker-0.jsonl").unwrap_err();
    assert!(
        e.starts_with("worker-0.jsonl:3:") && e.contains("freed"),
        "{e}"
    );
    let e = parse_worker_file("{\"node\": \"a\"", "w.jsonl").unwrap_err();
    assert!(e.starts_with("w.jsonl:1:"), "{e}");
}

fn parse(load: &str) -> Result<spec::GateSpec, String> {
    let text = format!(
        "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"a\"]\n[load]\n{load}\n[assert.errors]\nmax_rate = 0.0\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gate.toml");
    spec::parse(&file, &text, &spec::Context::for_file(&file)).map_err(|e| e.to_string())
}

/// `driver = "locust"` and its keys: defaults (one local worker, no remote, a loopback master), and the
/// refusals, each saying why: an open loop (Locust's users are closed loops), a `locust_*` key without the
/// driver, an unknown driver, zero workers, a master address that is not host:port.
#[test]
fn the_locust_driver_keys_and_refusals() {
    use servegate::spec::load::{Driver, LocustSpec};
    let g = parse("concurrency = 2\nrequests = 4\ndriver = \"locust\"").unwrap();
    // A Locust gate requires Locust provisioned (skipped, naming the script, where it is not).
    assert_eq!(g.requires.provisioned, vec!["locust".to_string()]);
    assert!(g.requires.provisioned_markers[0].ends_with("provisioned/locust"));
    assert_eq!(
        g.load.unwrap().spec.driver,
        Driver::Locust(LocustSpec {
            workers: 1,
            remote_workers: 0,
            master_bind: None
        })
    );
    let g = parse("concurrency = 2\nrequests = 4\ndriver = \"locust\"\nlocust_workers = 3\nlocust_remote_workers = 2\nlocust_master_bind = \"0.0.0.0:5557\"").unwrap();
    assert_eq!(
        g.load.unwrap().spec.driver,
        Driver::Locust(LocustSpec {
            workers: 3,
            remote_workers: 2,
            master_bind: Some("0.0.0.0:5557".into())
        })
    );
    assert_eq!(
        parse("concurrency = 2\nrequests = 4")
            .unwrap()
            .load
            .unwrap()
            .spec
            .driver,
        Driver::Servegate
    );
    let cases = [
        (
            "rate_rps = 2.0\nrequests = 4\ndriver = \"locust\"",
            "closed loops",
        ),
        (
            "concurrency = 2\nrequests = 4\nlocust_workers = 2",
            "is a key of `driver = \"locust\"`",
        ),
        (
            "concurrency = 2\nrequests = 4\ndriver = \"k6\"",
            "must be \"servegate\", \"locust\", \"vllm-bench\", \"aiperf\" or \"guidellm\"",
        ),
        (
            "concurrency = 2\nrequests = 4\ndriver = \"locust\"\nlocust_workers = 0",
            "at least one worker",
        ),
        (
            "concurrency = 2\nrequests = 4\ndriver = \"locust\"\nlocust_workers = 257",
            "between 0 and 256",
        ),
        (
            "concurrency = 2\nrequests = 4\ndriver = \"locust\"\nlocust_master_bind = \"5557\"",
            "must be host:port",
        ),
    ];
    for (load, want) in cases {
        let e = parse(load).unwrap_err();
        assert!(e.contains(want), "{load}: {e}");
    }
}
