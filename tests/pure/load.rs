//! What goes here: load judging on built evidence (known schedules, the three honest states, spec errors).
//! The load client against the synthetic serve (sockets) is tests/cli/load.rs.
//!
//! Load gates (docs/load.md): judging against a known schedule (exact), the three honest states, and the
//! load client against the synthetic serve at concurrency 16.

use std::path::Path;

use crate::fixtures::load::{find, gate, numpy_linear, ok_meta, spec_with, summary};
use servegate::evidence::load::{LoadRecord, LOAD_FILE, LOAD_SCHEMA};
use servegate::evidence::{EvidenceWriter, RequestRecord, RunStatus};
use servegate::io::load_client::SendTiming;
use servegate::io::reads::TimedRead;
use servegate::judge::{Outcome, Verdict};
use servegate::replay::{synthetic, SyntheticSpec};
use servegate::spec::{self, load::Point, GateSpec};

/// Writes point `dir` of a run whose every request i was served exactly on the synthetic schedule
/// `specs[i]` (the reads carry the serve's send times, no network), in a closed loop at `c`: each slot's
/// next request is sent the instant its previous one ended, plus `lag(i)` ms of client lag.
fn write_point(
    root: &Path,
    g: &GateSpec,
    point: Point,
    c: usize,
    specs: &[SyntheticSpec],
    lag: impl Fn(usize) -> f64,
) {
    write_point_cut(root, g, point, c, specs, lag, |_| false)
}

/// [`write_point`], with request i's body cut after its first half of sends when `cut(i)` (no finish, no
/// `[DONE]`: a truncated reply).
fn write_point_cut(
    root: &Path,
    g: &GateSpec,
    point: Point,
    c: usize,
    specs: &[SyntheticSpec],
    lag: impl Fn(usize) -> f64,
    cut: impl Fn(usize) -> bool,
) {
    let w = EvidenceWriter::create_exact(&root.join(point.dir())).unwrap();
    let mut s = summary(g, specs.len());
    let mut slot_free = vec![0.0f64; c];
    let mut timings = Vec::new();
    for (i, sp) in specs.iter().enumerate() {
        let plan = synthetic::plan(sp, i as u64 + 1, true);
        let keep = if cut(i) {
            plan.sends.len() / 2
        } else {
            plan.sends.len()
        };
        let reads: Vec<TimedRead> = plan.sends[..keep]
            .iter()
            .map(|x| TimedRead {
                recv_ms: None,
                t_ms: x.at.as_secs_f64() * 1000.0,
                bytes: x.bytes.clone(),
            })
            .collect();
        let e2e = reads.last().unwrap().t_ms;
        let slot = i % c;
        let intended = slot_free[slot];
        let woke = intended + lag(i);
        timings.push(SendTiming {
            index: i,
            intended_ms: intended,
            woke_ms: woke,
            slot_ms: woke,
            sent_ms: woke,
            end_ms: woke + e2e,
            runtime: None,
        });
        slot_free[slot] = woke + e2e;
        let meta = ok_meta(e2e);
        w.write_request(i, &serde_json::json!({"messages": []}), &meta, &reads)
            .unwrap();
        s.requests.push(RequestRecord {
            index: i,
            prompt_index: i % 3,
            prompt: ["a", "b", "c"][i % 3].into(),
            stream: true,
            http_status: Some(200),
            body_bytes: reads.iter().map(|r| r.bytes.len() as u64).sum(),
            ..Default::default()
        });
    }
    w.write_summary(&s).unwrap();
    let rec = LoadRecord {
        schema: LOAD_SCHEMA.into(),
        point: point.label(),
        arrival: "closed".into(),
        concurrency: Some(c as u32),
        rate_rps: None,
        max_concurrency: None,
        warmup: 0,
        planned: specs.len(),
        timings,
        client: None,
        driver: None,
    };
    w.write(LOAD_FILE, &serde_json::to_vec(&rec).unwrap())
        .unwrap();
}

/// The number after `key` in a verdict message (`p95 123.4 ms` -> 123.4).
fn number_after(msg: &str, key: &str) -> f64 {
    let rest = &msg[msg
        .find(key)
        .unwrap_or_else(|| panic!("{key} not in {msg}"))
        + key.len()..];
    rest.trim_start()
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Asserts that verdict `v`'s message says `text` (the message shown when it does not).
fn says(v: &Verdict, text: &str) {
    assert!(v.message.contains(text), "{text:?} not in: {}", v.message);
}

/// Asserts that verdict `v`'s message does not say `text` (the message shown when it does).
fn says_not(v: &Verdict, text: &str) {
    assert!(!v.message.contains(text), "{text:?} in: {}", v.message);
}

/// Point `point` of a gate (in a new directory) with `load` as its `[load]` and `asserts`, written from
/// `specs` at concurrency `c` with `lag` as [`write_point`] does, and judged: the directory (the gate's and
/// its evidence's, kept while the test runs), the gate and its verdicts.
fn judged_point(
    load: &str,
    asserts: &str,
    point: Point,
    c: usize,
    specs: &[SyntheticSpec],
    lag: impl Fn(usize) -> f64,
) -> (tempfile::TempDir, GateSpec, Vec<Verdict>) {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(tmp.path(), load, asserts);
    write_point(tmp.path(), &g, point, c, specs, lag);
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    (tmp, g, vs)
}

#[test]
fn percentiles_goodput_and_attainment_equal_the_known_schedule_at_concurrency_16() {
    // Request i: TTFT 100 + (37 i mod 101) ms (every value 100..=200, in a scrambled order), 8 tokens 5 ms
    // apart, except every 7th request decodes at 7 ms per token (so the TPOT SLO of 6 ms excludes it).
    let specs: Vec<SyntheticSpec> = (0..320)
        .map(|i| {
            let itl = if i % 7 == 0 { 7.0 } else { 5.0 };
            spec_with(100.0 + ((37 * i) % 101) as f64, itl, 8)
        })
        .collect();
    let (tmp, _g, vs) = judged_point(
        "concurrency = 16\nrequests = 320",
        "[assert.latency]\nttft_p50_ms = 1000\nttft_p95_ms = 1000\nttft_p99_ms = 1000\ne2e_p99_ms = 1000\ntpot_p50_ms = 100\n\
         [assert.goodput]\nttft_ms = 150\ntpot_ms = 6\nat_least = 0.4\n[assert.errors]\nmax_rate = 0.0",
        Point::Concurrency(16),
        16,
        &specs,
        |_| 0.0,
    );

    // The truth, from the schedule alone.
    let ttft: Vec<f64> = specs.iter().map(|s| s.ttft_ms).collect();
    let e2e: Vec<f64> = specs.iter().map(|s| s.ttft_ms + 7.0 * s.itl_ms).collect();
    let good = specs
        .iter()
        .filter(|s| s.ttft_ms <= 150.0 && s.itl_ms <= 6.0)
        .count();
    // Exact up to the nanosecond rounding of the serve's Duration schedule (1e-6 ms).
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    for (name, p, truth) in [
        ("[c=16]::ttft_p50", 50.0, &ttft),
        ("[c=16]::ttft_p95", 95.0, &ttft),
        ("[c=16]::ttft_p99", 99.0, &ttft),
        ("[c=16]::e2e_p99", 99.0, &e2e),
    ] {
        let v = find(&vs, name);
        assert_eq!(v.outcome, Outcome::Pass, "{}", v.message);
        let want = numpy_linear(truth, p);
        assert!(
            close(v.median.unwrap(), want),
            "{name}: {} vs {want}",
            v.message
        );
    }
    let tpot = find(&vs, "[c=16]::tpot_p50");
    assert!(close(tpot.median.unwrap(), 5.0), "{}", tpot.message);
    let gp = find(&vs, "[c=16]::goodput");
    assert_eq!(gp.outcome, Outcome::Pass, "{}", gp.message);
    let want_att = good as f64 / 320.0;
    assert!(
        close(gp.median.unwrap(), want_att),
        "{} vs {want_att}",
        gp.message
    );
    says(gp, &format!("{good} of 320 planned met"));
    // Goodput = good / window: the window is the first send (0) to the last end of the schedule (each of
    // the 16 slots sends its requests back to back); the message shows it to 2 decimals.
    let mut slot_end = [0.0f64; 16];
    for (i, e) in e2e.iter().enumerate() {
        slot_end[i % 16] += e;
    }
    let window_s = slot_end.iter().copied().fold(0.0, f64::max) / 1000.0;
    let shown = number_after(&gp.message, "; goodput ");
    assert!(
        (shown - good as f64 / window_s).abs() <= 0.005,
        "{shown} vs {}",
        good as f64 / window_s
    );
    let errs = find(&vs, "[c=16]::errors");
    assert_eq!(errs.outcome, Outcome::Pass, "{}", errs.message);

    // A limit under the true p95 fails, with the same value.
    let g2 = gate(
        tmp.path(),
        "concurrency = 16\nrequests = 320",
        "[assert.latency]\nttft_p95_ms = 150",
    );
    let v2 = servegate::run::load::judge_dir(&g2, tmp.path());
    let p95 = find(&v2, "[c=16]::ttft_p95");
    assert_eq!(p95.outcome, Outcome::Fail, "{}", p95.message);
    assert!(close(p95.median.unwrap(), numpy_linear(&ttft, 95.0)));
}

#[test]
fn a_percentile_from_too_few_requests_is_indeterminate_with_the_n_needed() {
    let specs: Vec<SyntheticSpec> = (0..58).map(|_| spec_with(50.0, 2.0, 4)).collect();
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 4\nrequests = 58",
        "[assert.latency]\nttft_p50_ms = 1000\nttft_p95_ms = 1000\nttft_p99_ms = 1000",
        Point::Concurrency(4),
        4,
        &specs,
        |_| 0.0,
    );
    assert_eq!(find(&vs, "[c=4]::ttft_p50").outcome, Outcome::Pass);
    let p95 = find(&vs, "[c=4]::ttft_p95");
    assert_eq!(p95.outcome, Outcome::Indeterminate, "{}", p95.message);
    says(p95, "at least 59");
    let p99 = find(&vs, "[c=4]::ttft_p99");
    assert_eq!(p99.outcome, Outcome::Indeterminate);
    says(p99, "at least 299");
    assert!(!p95.passed() && !p99.passed());
}

/// Every request cut mid-stream: there is no successful request to take a percentile of. Each latency
/// bound FAILs (ITL too, which counts gaps of succeeded replies only and would otherwise say "too few
/// samples"), so `on_indeterminate = "pass"` cannot turn a run with no good reply into a pass.
#[test]
fn a_point_where_no_request_succeeded_fails_every_latency_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "concurrency = 4\nrequests = 20",
        "[assert.latency]\nttft_p50_ms = 1000\nitl_p95_ms = 1000\ne2e_p99_ms = 1000",
    );
    let specs: Vec<SyntheticSpec> = (0..20).map(|_| spec_with(50.0, 2.0, 8)).collect();
    write_point_cut(
        tmp.path(),
        &g,
        Point::Concurrency(4),
        4,
        &specs,
        |_| 0.0,
        |_| true,
    );
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert_eq!(vs.len(), 3, "{vs:#?}");
    for v in &vs {
        assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
        says(v, "no request succeeded: 20 of 20 planned failed");
        says_not(v, "raise [load] requests");
    }
    // One request good: the ITL p95 has gaps to count but too few, so it is indeterminate again (not a
    // fail), while the request percentiles count the 19 failed ones above every value.
    let tmp2 = tempfile::tempdir().unwrap();
    write_point_cut(
        tmp2.path(),
        &g,
        Point::Concurrency(4),
        4,
        &specs,
        |_| 0.0,
        |i| i != 0,
    );
    let vs2 = servegate::run::load::judge_dir(&g, tmp2.path());
    let itl = find(&vs2, "[c=4]::itl_p95");
    assert_eq!(itl.outcome, Outcome::Indeterminate, "{}", itl.message);
    assert_eq!(find(&vs2, "[c=4]::ttft_p50").outcome, Outcome::Fail);
}

/// A latency verdict states the n it judged: with one reply not measured (one token chunk: no TPOT) it
/// says `n=5 of 6 planned; 1 not measured, left out: <cause>`, never `n=6 of 6 planned` beside it; a failed
/// request is counted above every value and named by cause.
#[test]
fn a_latency_verdict_states_the_n_judged_and_names_the_not_measured_and_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "concurrency = 2\nrequests = 6",
        "[assert.latency]\ntpot_p50_ms = 1000\n",
    );
    let specs: Vec<SyntheticSpec> = (0..6)
        .map(|i| spec_with(50.0, 2.0, if i == 5 { 1 } else { 8 }))
        .collect();
    write_point_cut(
        tmp.path(),
        &g,
        Point::Concurrency(2),
        2,
        &specs,
        |_| 0.0,
        |i| i == 4,
    );
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    let tpot = find(&vs, "[c=2]::tpot_p50");
    assert_eq!(tpot.outcome, Outcome::Pass, "{}", tpot.message);
    says(
        tpot,
        "n=5 of 6 planned; 1 not measured, left out: one token chunk",
    );
    says_not(tpot, "n=6 of 6");
    says(
        tpot,
        "; 1 failed, counted above every value, by cause: 1 truncated_stream",
    );
    // Two p50s on one line: the judged one (failed counted above every value) and the succeeded ones'
    // alone, labelled so.
    says(tpot, "; p50 of succeeded ");
    // The results carry the bound, its metric and the judged statistic.
    let b = tpot.bound.expect("a latency verdict carries its bound");
    assert_eq!((b.value, b.metric.name()), (1000.0, "tpot"));
    assert!(tpot.median.is_some());
}

/// Enough requests planned, too few measured (three of six replies give no TPOT): INDETERMINATE, naming
/// how many were not measured and why, never "raise [load] requests", which would not help.
#[test]
fn too_few_measured_of_enough_planned_names_the_not_measured_not_more_requests() {
    let specs: Vec<SyntheticSpec> = (0..6)
        .map(|i| spec_with(50.0, 2.0, if i % 2 == 0 { 1 } else { 8 }))
        .collect();
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 2\nrequests = 6",
        "[assert.latency]\ntpot_p50_ms = 1000\n",
        Point::Concurrency(2),
        2,
        &specs,
        |_| 0.0,
    );
    let tpot = find(&vs, "[c=2]::tpot_p50");
    assert_eq!(tpot.outcome, Outcome::Indeterminate, "{}", tpot.message);
    says(tpot, "needs at least 5 (3 of 6 not measured)");
    says_not(tpot, "raise [load] requests");
    says(
        tpot,
        "n=3 of 6 planned; 3 not measured, left out (first: one token chunk",
    );
}

#[test]
fn a_client_behind_its_schedule_makes_the_point_void_never_a_pass() {
    let specs: Vec<SyntheticSpec> = (0..100).map(|_| spec_with(50.0, 2.0, 4)).collect();
    // Every 10th request sent 40 ms after its slot freed: lag p99 40 ms > 5 ms.
    let (_tmp, g, vs) = judged_point(
        "concurrency = 4\nrequests = 100\nmax_lag_ms = 5",
        "[assert.latency]\nttft_p50_ms = 1000\n[assert.throughput]\nfloor_rps = 0.001",
        Point::Concurrency(4),
        4,
        &specs,
        |i| {
            if i % 10 == 0 {
                40.0
            } else {
                0.0
            }
        },
    );
    for v in &vs {
        assert_eq!(v.outcome, Outcome::Void, "{}", v.message);
        says(v, "fell behind its schedule");
    }
    assert_eq!(vs.len(), 2);
    // The same run without the lag passes.
    let tmp2 = tempfile::tempdir().unwrap();
    write_point(tmp2.path(), &g, Point::Concurrency(4), 4, &specs, |_| 0.0);
    let vs2 = servegate::run::load::judge_dir(&g, tmp2.path());
    assert!(vs2.iter().all(|v| v.outcome == Outcome::Pass), "{vs2:#?}");
}

#[test]
fn a_point_without_evidence_fails_and_trials_are_named_per_point() {
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "concurrency = [1, 4]\nrequests = 10",
        "[assert.latency]\nttft_p50_ms = 100\n[assert.consistency]\n[assert.errors]",
    );
    assert_eq!(
        g.trial_names(),
        vec![
            "[c=1]::ttft_p50",
            "[c=1]::errors",
            "[c=4]::ttft_p50",
            "[c=4]::errors",
            "[c=4]::consistency"
        ]
    );
    assert_eq!(
        spec::load::trial_id("load-test", "[c=4]::ttft_p50"),
        "load-test[c=4]::ttft_p50"
    );
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert_eq!(vs.len(), 5);
    assert!(vs.iter().all(|v| v.outcome == Outcome::Fail), "{vs:#?}");
}

#[test]
fn load_spec_errors_name_the_key() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("g.toml");
    for (load, asserts, key) in [
        (
            "concurrency = 0\nrequests = 5",
            "[assert.errors]",
            "load.concurrency",
        ),
        ("concurrency = 4", "[assert.errors]", "load"),
        (
            "rate_rps = 2.0\narrival = \"burst\"\nrequests = 5",
            "[assert.errors]",
            "load.arrival",
        ),
        (
            "concurrency = 4\nrequests = 5",
            "[assert.latency]\nttft_p97_ms = 5",
            "assert.latency.ttft_p97_ms",
        ),
        (
            "concurrency = 4\nrequests = 5",
            "[assert.goodput]\nttft_ms = 5\nat_least = 1.5",
            "assert.goodput.at_least",
        ),
        (
            "concurrency = 4\nrequests = 5",
            "[assert.consistency]",
            "assert.consistency",
        ),
        (
            "concurrency = 4\nrequests = 5\nclient_cpus = []",
            "[assert.errors]",
            "load.client_cpus",
        ),
        (
            "concurrency = 4\nrequests = 5\nclient_cpus = 0",
            "[assert.errors]",
            "load.client_cpus",
        ),
        (
            "concurrency = 4\nrequests = 5\nclient_cpus = [1, 1]",
            "[assert.errors]",
            "CPU 1 is listed twice",
        ),
        (
            "concurrency = 4\nrequests = 5\nclient_cpus = [0, -3]",
            "[assert.errors]",
            "CPU id -3",
        ),
        (
            "concurrency = 4\nrequests = 5\nclient_cpus = 2\ndriver = \"locust\"",
            "[assert.errors]",
            "load.client_cpus",
        ),
        // The value as written, never `0e0`.
        ("rate_rps = 0.0\nrequests = 5", "[assert.errors]", "got 0.0"),
    ] {
        let text = format!(
            "[gate]\nname = \"x\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"a\"]\n[load]\n{load}\n{asserts}\n"
        );
        let e = spec::parse(&file, &text, &spec::Context::for_file(&file))
            .expect_err(&format!("accepted: {load} / {asserts}"))
            .to_string();
        assert!(e.contains(key), "{key}: {e}");
        assert!(e.contains("g.toml:"), "{e}");
    }
    let text = "[gate]\nname = \"x\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"a\"]\n[assert.latency]\nttft_p95_ms = 5\n";
    let e = spec::parse(&file, text, &spec::Context::for_file(&file)).unwrap_err();
    assert!(e.to_string().contains("needs a [load] table"), "{e}");
}

/// Edits point `dir`'s load.json (as JSON) with `edit`.
fn edit_load_json(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let p = dir.join(LOAD_FILE);
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// A load gate (c=4, 6 requests, a throughput floor the run passes) and a passing point written under `root`.
fn passing_point(root: &Path) -> GateSpec {
    let g = gate(
        root,
        "concurrency = 4\nrequests = 6",
        "[assert.latency]\nttft_p50_ms = 1000\n[assert.throughput]\nfloor_rps = 1\n[assert.errors]",
    );
    let specs: Vec<SyntheticSpec> = (0..6).map(|_| spec_with(50.0, 2.0, 4)).collect();
    write_point(root, &g, Point::Concurrency(4), 4, &specs, |_| 0.0);
    let vs = servegate::run::load::judge_dir(&g, root);
    assert!(vs.iter().all(|v| v.outcome == Outcome::Pass), "{vs:#?}");
    g
}

fn assert_all_fail(vs: &[Verdict], n: usize, why: &str) {
    assert_eq!(vs.len(), n, "{vs:#?}");
    for v in vs {
        assert_eq!(v.outcome, Outcome::Fail, "{}", v.message);
        says(v, why);
    }
}

/// A load run stopped by SIGINT (its run.json `interrupted`) is judged FAIL whatever its finished points
/// hold, as a plain run on incomplete evidence; so is a point whose own run.json never completed.
#[test]
fn an_interrupted_load_run_fails_every_trial() {
    let tmp = tempfile::tempdir().unwrap();
    let g = passing_point(tmp.path());
    let mut parent = summary(&g, 0);
    parent.status = RunStatus::Interrupted;
    std::fs::write(
        tmp.path().join("run.json"),
        serde_json::to_vec(&parent).unwrap(),
    )
    .unwrap();
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert_all_fail(&vs, 3, "run.json status is `interrupted`");
    parent.status = RunStatus::Complete;
    std::fs::write(
        tmp.path().join("run.json"),
        serde_json::to_vec(&parent).unwrap(),
    )
    .unwrap();
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert!(vs.iter().all(|v| v.outcome == Outcome::Pass), "{vs:#?}");
    // The point's own run.json still `running` (the runner killed mid-point).
    let pj = tmp.path().join("c4/run.json");
    let mut point: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&pj).unwrap()).unwrap();
    point["status"] = "running".into();
    std::fs::write(&pj, serde_json::to_vec(&point).unwrap()).unwrap();
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert_all_fail(&vs, 3, "run.json status is `running`");
}

/// `load.json` is checked against its point and run.json: another point's evidence (c1/ copied as c2/), a
/// record keeping 2 of 6 timings (the throughput of 2 requests' span read as 6's), another schema version and
/// times going backward each fail the point's trials, naming what disagrees.
#[test]
fn a_load_json_that_disagrees_with_its_point_or_run_fails_the_point() {
    // c1/ copied as c2/.
    let tmp = tempfile::tempdir().unwrap();
    let g = gate(
        tmp.path(),
        "concurrency = [1, 2]\nrequests = 6",
        "[assert.latency]\nttft_p50_ms = 1000\n[assert.errors]",
    );
    let specs: Vec<SyntheticSpec> = (0..6).map(|_| spec_with(50.0, 2.0, 4)).collect();
    write_point(tmp.path(), &g, Point::Concurrency(1), 1, &specs, |_| 0.0);
    copy_dir_flat(&tmp.path().join("c1"), &tmp.path().join("c2"));
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert_eq!(find(&vs, "[c=1]::ttft_p50").outcome, Outcome::Pass);
    let c2: Vec<Verdict> = vs
        .iter()
        .filter(|v| v.assertion.starts_with("[c=2]"))
        .cloned()
        .collect();
    assert_all_fail(&c2, 2, "is of point \"c=1\"");
    says(&c2[0], "stored as point c=2");

    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: [(&str, Edit); 5] = [
        (
            "times 2 requests, run.json records 6 (untimed: 2, 3, 4, 5)",
            Box::new(|v| v["timings"].as_array_mut().unwrap().truncate(2)),
        ),
        (
            "schema \"servegate.load/2\", expected \"servegate.load/1\"",
            Box::new(|v| v["schema"] = "servegate.load/2".into()),
        ),
        (
            "times go backward",
            Box::new(|v| {
                let t = &mut v["timings"][3];
                t["sent_ms"] = (t["end_ms"].as_f64().unwrap() + 5.0).into();
            }),
        ),
        (
            "request 2 is timed twice",
            Box::new(|v| v["timings"][3]["index"] = 2.into()),
        ),
        (
            "plans 0 warmup and 60 judged requests",
            Box::new(|v| v["planned"] = 60.into()),
        ),
    ];
    for (why, edit) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let g = passing_point(tmp.path());
        edit_load_json(&tmp.path().join("c4"), edit);
        let vs = servegate::run::load::judge_dir(&g, tmp.path());
        assert_all_fail(&vs, 3, why);
    }
}

/// `[load] client_cpus` reads as a count or a list; absent, the client runs one unpinned runtime.
#[test]
fn client_cpus_is_a_count_or_a_list_of_cpu_ids() {
    use servegate::spec::load::ClientCpus;
    let tmp = tempfile::tempdir().unwrap();
    for (line, want) in [
        ("", None),
        ("client_cpus = 2", Some(ClientCpus::Count(2))),
        ("client_cpus = [1, 0]", Some(ClientCpus::List(vec![1, 0]))),
    ] {
        let g = gate(
            tmp.path(),
            &format!("concurrency = 4\nrequests = 6\n{line}"),
            "[assert.errors]",
        );
        assert_eq!(g.load.unwrap().spec.client_cpus, want, "{line}");
    }
}

/// A `load.json` whose requests name the client's runtimes is held to its `client` block: every request
/// names a runtime of the block (index and CPU), each runtime's `streams` counts the requests naming it,
/// and no request names a runtime when there is no block. A consistent record judges as before.
#[test]
fn request_runtimes_must_agree_with_the_client_block() {
    let tag = |v: &mut serde_json::Value, streams: [usize; 2]| {
        for (i, t) in v["timings"].as_array_mut().unwrap().iter_mut().enumerate() {
            t["runtime"] = serde_json::json!({"index": i % 2, "cpu": 5 * (i % 2)});
        }
        v["client"] = serde_json::json!({"runtimes": [
            {"index": 0, "cpu": 0, "streams": streams[0], "cpu_ms": 1.5},
            {"index": 1, "cpu": 5, "streams": streams[1], "cpu_ms": 2.5},
        ]});
    };
    let tmp = tempfile::tempdir().unwrap();
    let g = passing_point(tmp.path());
    edit_load_json(&tmp.path().join("c4"), |v| tag(v, [3, 3]));
    let vs = servegate::run::load::judge_dir(&g, tmp.path());
    assert!(vs.iter().all(|v| v.outcome == Outcome::Pass), "{vs:#?}");

    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: [(&str, Edit); 3] = [
        (
            "request 0 names a client runtime but the record has no `client` block",
            Box::new(|v| v["timings"][0]["runtime"] = serde_json::json!({"index": 0, "cpu": 0})),
        ),
        (
            "client runtime 0 (CPU 0) says it carried 4 requests, the timings name it 3 times",
            Box::new(move |v| tag(v, [4, 2])),
        ),
        (
            "request 1 names runtime",
            Box::new(move |v| {
                tag(v, [3, 3]);
                v["timings"][1]["runtime"]["cpu"] = 7.into();
            }),
        ),
    ];
    for (why, edit) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let g = passing_point(tmp.path());
        edit_load_json(&tmp.path().join("c4"), edit);
        let vs = servegate::run::load::judge_dir(&g, tmp.path());
        assert_all_fail(&vs, 3, why);
    }
}

fn copy_dir_flat(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A point that sent no judged request (a `duration_s` point whose warmups took the duration: "0 of 0
/// planned") proved nothing: every assertion of it is VOID naming why, never `errors PASS 0 of 0`.
#[test]
fn a_point_that_sent_nothing_is_void_never_a_pass() {
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 2\nduration_s = 5",
        "[assert.errors]\nmax_rate = 0.0\n[assert.throughput]\nfloor_rps = 0.001\n[assert.goodput]\nttft_ms = 1000\nat_least = 0.5\n[assert.latency]\nttft_p50_ms = 1000",
        Point::Concurrency(2),
        2,
        &[],
        |_| 0.0,
    );
    assert_eq!(vs.len(), 4, "{vs:#?}");
    for v in &vs {
        assert_eq!(v.outcome, Outcome::Void, "{}", v.message);
        says(
            v,
            "no judged request was sent within duration_s = 5 s (n=0 of 0 planned)",
        );
        says(v, "raise [load] duration_s");
    }
}

/// A c=2 point that sent one request never had two in flight: its throughput is not that of c=2, so it is
/// INDETERMINATE naming the peak reached, never a PASS; the same point with both slots busy passes.
#[test]
fn throughput_under_the_asked_concurrency_is_never_passed_as_that_load() {
    let one = [spec_with(50.0, 2.0, 4)];
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 2\nrequests = 1",
        "[assert.throughput]\nfloor_rps = 0.001",
        Point::Concurrency(2),
        2,
        &one,
        |_| 0.0,
    );
    let t = find(&vs, "[c=2]::throughput");
    assert_eq!(t.outcome, Outcome::Indeterminate, "{}", t.message);
    says(
        t,
        "peak real concurrency 1 never reached the asked concurrency 2 (raise [load] requests to 2 or more)",
    );
    // With duration_s the remedy is the duration.
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 2\nduration_s = 5",
        "[assert.throughput]\nfloor_rps = 0.001",
        Point::Concurrency(2),
        2,
        &one,
        |_| 0.0,
    );
    says(find(&vs, "[c=2]::throughput"), "raise [load] duration_s");
    let two = [spec_with(50.0, 2.0, 4), spec_with(50.0, 2.0, 4)];
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 2\nrequests = 2",
        "[assert.throughput]\nfloor_rps = 0.001",
        Point::Concurrency(2),
        2,
        &two,
        |_| 0.0,
    );
    let t = find(&vs, "[c=2]::throughput");
    assert_eq!(t.outcome, Outcome::Pass, "{}", t.message);
}

/// A `duration_s` point has no `requests` key: too few requests for a percentile names the duration (or a
/// lower percentile) as the remedy, never `raise [load] requests`.
#[test]
fn too_few_for_a_percentile_under_duration_s_names_the_duration() {
    let specs: Vec<SyntheticSpec> = (0..20).map(|_| spec_with(50.0, 2.0, 4)).collect();
    let (_tmp, _g, vs) = judged_point(
        "concurrency = 2\nduration_s = 5",
        "[assert.latency]\nttft_p95_ms = 1000",
        Point::Concurrency(2),
        2,
        &specs,
        |_| 0.0,
    );
    let p95 = find(&vs, "[c=2]::ttft_p95");
    assert_eq!(p95.outcome, Outcome::Indeterminate, "{}", p95.message);
    says(
        p95,
        "needs at least 59 (20 sent within duration_s = 5 s: raise [load] duration_s, or lower the percentile)",
    );
    says_not(p95, "raise [load] requests");
}

/// `[assert.consistency]` without concurrency-1 replies (that point's evidence is missing) is INDETERMINATE
/// naming why, never FAIL for want of evidence; the c=1 point's own trials fail for their missing evidence.
#[test]
fn consistency_without_concurrency_1_evidence_is_indeterminate_naming_why() {
    let specs: Vec<SyntheticSpec> = (0..3).map(|_| spec_with(50.0, 2.0, 4)).collect();
    let (_tmp, _g, vs) = judged_point(
        "concurrency = [1, 2]\nrequests = 3",
        "[assert.errors]\nmax_rate = 0.0\n[assert.consistency]\nrule = \"exact\"",
        Point::Concurrency(2),
        2,
        &specs,
        |_| 0.0,
    );
    let c = find(&vs, "[c=2]::consistency");
    assert_eq!(c.outcome, Outcome::Indeterminate, "{}", c.message);
    says(
        c,
        "no replies at concurrency 1 to compare with: the c=1 point has no evidence",
    );
    assert_eq!(find(&vs, "[c=1]::errors").outcome, Outcome::Fail);
    assert_eq!(find(&vs, "[c=2]::errors").outcome, Outcome::Pass);
}
