//! The serve's footprint trials (`ready`, `memory`, `cpu`): each state from recorded figures, a missing
//! figure INDETERMINATE with its reason (never 0), a limit between the bounds INDETERMINATE.

use super::*;
use crate::evidence::footprint::{CpuWindow, Footprint, FootprintProcess};

fn fp_gate(asserts: &str) -> GateSpec {
    gate_text(&format!(
        "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{{port}}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\nrepeats = 4\n[assert.content]\n{asserts}"
    ))
}

fn proc(pid: u32, how: &str, mib: f64) -> FootprintProcess {
    FootprintProcess {
        pid,
        name: "srv".into(),
        how: how.into(),
        hwm_mib: mib,
    }
}

/// Four answered requests (4 completion tokens each, 16 in all), a serve started by servegate, ready after
/// 850 ms, one process of 300 MiB, 160 ms of CPU over requests 00-03 (10 ms/token).
fn ev() -> Evidence {
    let mut e = evidence(Some(4), (0..4).map(|i| request(i, &good(), None)).collect());
    e.run.serve.mode = "command".into();
    e.run.serve.ready_ms = Some(850.0);
    e.run.serve.footprint = Some(Footprint {
        rss_peak_mib: Some(300.0),
        rss_bound: "exact: one process, its own high-water mark".into(),
        rss_sampled_mib: Some(298.0),
        leader_maxrss_mib: Some(300.0),
        processes: vec![proc(10, "leader", 300.0)],
        samples: 30,
        sample_every_ms: 100,
        rss_unavailable: None,
        cpu: Some(CpuWindow {
            cpu_ms: 160.0,
            wall_ms: 400.0,
            first_index: 0,
            last_index: 3,
            pids_start: 1,
            pids_end: 1,
            clk_tck: 100,
            runqueue: None,
        }),
        cpu_unavailable: None,
        attached: None,
    });
    e
}

const ALL: &str = "[assert.ready]\nlimit_ms = 1000\n[assert.memory]\nlimit_mib = 400\n[assert.cpu]\nlimit_ms_per_token = 12\n";

#[test]
fn each_figure_passes_within_its_limit_with_its_value_and_n() {
    let v = judge(&fp_gate(ALL), &ev());
    let r = find(&v, "ready");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert_eq!(r.median, Some(850.0));
    assert!(
        r.message.contains("850 ms") && r.message.contains("n=1 of 1 start"),
        "{}",
        r.message
    );
    let b = r.bound.unwrap();
    assert_eq!((b.value, b.unit.name(), b.at_least), (1000.0, "ms", false));
    let m = find(&v, "memory");
    assert_eq!(m.outcome, Outcome::Pass, "{}", m.message);
    assert!(
        m.message
            .contains("peak 300.0 MiB (limit 400.0; one process"),
        "{}",
        m.message
    );
    assert!(
        m.message.contains("pid 10 srv (leader) 300.0"),
        "{}",
        m.message
    );
    assert_eq!(m.bound.unwrap().unit.name(), "MiB");
    let c = find(&v, "cpu");
    assert_eq!(c.outcome, Outcome::Pass, "{}", c.message);
    assert_eq!(c.median, Some(10.0));
    assert!(
        c.message.contains("10.00 ms/token (limit 12.00; 160 ms CPU over 16 completion tokens of requests 00-03; wall 400 ms, 0.40 cores busy"),
        "{}",
        c.message
    );
    assert!(c.message.contains("n=4 judged requests"), "{}", c.message);
}

#[test]
fn each_figure_over_its_limit_fails() {
    let g = fp_gate("[assert.ready]\nlimit_ms = 500\n[assert.memory]\nlimit_mib = 200\n[assert.cpu]\nlimit_ms_per_token = 5\n");
    let v = judge(&g, &ev());
    for name in ["ready", "memory", "cpu"] {
        let x = find(&v, name);
        assert_eq!(x.outcome, Outcome::Fail, "{}", x.message);
        assert!(x.median.is_some_and(|m| m > 0.0), "{}", x.message);
    }
}

#[test]
fn a_url_serve_or_older_evidence_is_indeterminate_never_zero() {
    let mut e = ev();
    e.run.serve.mode = "url".into();
    e.run.serve.base_url = "http://127.0.0.1:8080".into();
    let v = judge(&fp_gate(ALL), &e);
    for name in ["ready", "memory", "cpu"] {
        let x = find(&v, name);
        assert_eq!(x.outcome, Outcome::Indeterminate, "{}", x.message);
        assert!(
            x.message.contains("not started by servegate"),
            "{}",
            x.message
        );
        assert_eq!(x.median, None);
        assert!(x.values.is_empty());
    }
    let mut e = ev();
    e.run.serve.footprint = None;
    let v = judge(&fp_gate(ALL), &e);
    for name in ["memory", "cpu"] {
        let x = find(&v, name);
        assert_eq!(x.outcome, Outcome::Indeterminate, "{}", x.message);
        assert!(
            x.message.contains("run.json has no serve.footprint"),
            "{}",
            x.message
        );
    }
}

#[test]
fn a_figure_the_kernel_could_not_give_is_indeterminate_with_the_reason() {
    let mut e = ev();
    let fp = e.run.serve.footprint.as_mut().unwrap();
    fp.rss_peak_mib = None;
    fp.processes.clear();
    fp.rss_unavailable = Some("/proc is not readable on this host".into());
    fp.cpu = None;
    fp.cpu_unavailable = Some("no process of the serve could be read in /proc \u{1b}[31m".into());
    let v = judge(&fp_gate(ALL), &e);
    let m = find(&v, "memory");
    assert_eq!(m.outcome, Outcome::Indeterminate);
    assert!(
        m.message.contains("/proc is not readable on this host"),
        "{}",
        m.message
    );
    let c = find(&v, "cpu");
    assert_eq!(c.outcome, Outcome::Indeterminate);
    assert!(!c.message.contains('\u{1b}'), "escaped: {}", c.message);
}

#[test]
fn between_the_bounds_is_indeterminate() {
    // Two processes: upper bound 300 (sum of high-water marks), sampled lower bound 220; limit 250.
    let mut e = ev();
    let fp = e.run.serve.footprint.as_mut().unwrap();
    fp.processes = vec![proc(10, "leader", 200.0), proc(11, "group", 100.0)];
    fp.rss_sampled_mib = Some(220.0);
    let g = fp_gate("[assert.memory]\nlimit_mib = 250\n[assert.cpu]\nlimit_ms_per_token = 10.2\n");
    let v = judge(&g, &e);
    let m = find(&v, "memory");
    assert_eq!(m.outcome, Outcome::Indeterminate, "{}", m.message);
    assert!(
        m.message.contains("sampled lower bound 220.0 MiB"),
        "{}",
        m.message
    );
    // Under the lower bound: FAIL; over the upper: PASS.
    let v = judge(&fp_gate("[assert.memory]\nlimit_mib = 210\n"), &e);
    assert_eq!(find(&v, "memory").outcome, Outcome::Fail);
    // CPU 160 ms ± one 10 ms tick over 16 tokens: 9.38-10.62 ms/token, the limit 10.2 inside.
    let c = find(&judge(&g, &e), "cpu").clone();
    assert_eq!(c.outcome, Outcome::Indeterminate, "{}", c.message);
    assert!(c.message.contains("9.38-10.62 ms/token"), "{}", c.message);
}

#[test]
fn a_failed_request_in_the_window_or_a_failed_serve_is_said() {
    let mut e = ev();
    e.requests[2] = request(2, &cut(), None);
    let v = judge(&fp_gate(ALL), &e);
    let c = find(&v, "cpu");
    assert_eq!(c.outcome, Outcome::Indeterminate, "{}", c.message);
    assert!(c.message.contains("request 02 failed"), "{}", c.message);
    let mut e = ev();
    e.run.serve.failure =
        Some("server_exited_during_run (exit status 1, 0.4 s after ready)".into());
    let v = judge(&fp_gate(ALL), &e);
    for name in ["ready", "memory", "cpu"] {
        assert_eq!(find(&v, name).outcome, Outcome::Fail, "{name}");
    }
}

#[test]
fn the_footprint_assertions_parse_need_no_stream_and_bad_limits_point_at_their_line() {
    let g = fp_gate(ALL);
    assert_eq!(
        g.assertions.names(),
        vec!["ready", "memory", "cpu", "content"]
    );
    let text = format!("[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{{port}}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nstream = false\nprompts = [\"p\"]\n{ALL}");
    assert!(
        gate_text(&text).assertions.cpu.is_some(),
        "no streamed reply needed"
    );
    for (table, key, bad) in [
        ("ready", "limit_ms", "0"),
        ("memory", "limit_mib", "-1"),
        ("cpu", "limit_ms_per_token", "nan"),
    ] {
        let t = format!("[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{{port}}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.{table}]\n{key} = {bad}\n");
        let ctx = crate::spec::Context {
            gate_dir: "/g".into(),
            cache: "/c".into(),
            home: None,
        };
        let e = crate::spec::parse(std::path::Path::new("g.toml"), &t, &ctx)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("assert.{table}.{key}")), "{e}");
        assert!(e.contains("g.toml:10"), "line of the key: {e}");
        let t = t.replace(key, "limit");
        let e = crate::spec::parse(std::path::Path::new("g.toml"), &t, &ctx)
            .unwrap_err()
            .to_string();
        assert!(e.contains("limit"), "{e}");
    }
    // Not in a pair gate: each arm is its own serve.
    assert!(!AssertionKind::Memory.in_pair_gate());
}

fn stored(windows: &[f64]) -> crate::judge::JudgeInputs {
    crate::judge::JudgeInputs {
        regression: Some(crate::analysis::baseline_values::BaselineValues::Stored {
            dir: "data/baselines/b".into(),
            windows: windows.iter().map(|w| vec![*w]).collect(),
            load: Some((2.5, 2.4)),
            release: Vec::new(),
            renew: "servegate bless g.toml --baseline /runs/g/1".into(),
        }),
        ..Default::default()
    }
}

const MEM_REGRESSION: &str = "[assert.regression]\nmetric = \"serve_rss_peak_mib\"\nbaseline = \"data/baselines/b\"\nmax_drop_pct = 20\n";

#[test]
fn a_per_run_figure_regresses_against_the_baseline_windows_in_three_states() {
    let g = fp_gate(MEM_REGRESSION);
    // 300 MiB against windows of 240-250: +20.0 % to +25.0 %, the rise allowed 20 %: INDETERMINATE.
    let v = judge_with(&g, &ev(), &stored(&[240.0, 250.0, 245.0]));
    let r = find(&v, "regression");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    assert!(
        r.message.contains("serve_rss_peak_mib 300.0 MiB vs the baseline's 240.0-250.0 MiB (+20.0 % to +25.0 %; max rise 20 %"),
        "{}",
        r.message
    );
    assert!(r.message.contains("n=1 run vs 3 windows"), "{}", r.message);
    // 40 % more memory than every window: FAIL. Within 20 % of the smallest: PASS.
    let v = judge_with(&g, &ev(), &stored(&[210.0, 212.0, 211.0]));
    assert_eq!(find(&v, "regression").outcome, Outcome::Fail);
    let v = judge_with(&g, &ev(), &stored(&[290.0, 300.0, 305.0]));
    assert_eq!(find(&v, "regression").outcome, Outcome::Pass);
    assert_eq!(find(&v, "regression").median, Some(300.0));
    // One window cannot state a spread; a run without the figure says why.
    let v = judge_with(&g, &ev(), &stored(&[300.0]));
    let r = find(&v, "regression");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    assert!(r.message.contains("needs at least 2"), "{}", r.message);
    let mut e = ev();
    e.run.serve.footprint = None;
    let v = judge_with(&g, &e, &stored(&[290.0, 300.0]));
    let r = find(&v, "regression");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    assert!(r.message.contains("no serve.footprint"), "{}", r.message);
    // No baseline given: FAIL, as for any metric.
    assert_eq!(find(&judge(&g, &ev()), "regression").outcome, Outcome::Fail);
    // CPU per token the same way (10 ms/token here against 8-9).
    let g = fp_gate(&MEM_REGRESSION.replace("serve_rss_peak_mib", "serve_cpu_ms_per_token"));
    let v = judge_with(&g, &ev(), &stored(&[8.0, 9.0]));
    assert_eq!(
        find(&v, "regression").outcome,
        Outcome::Indeterminate,
        "{}",
        find(&v, "regression").message
    );
}

#[test]
fn a_per_run_figure_is_refused_for_an_interleaved_regression() {
    let t = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.content]\n[assert.regression]\nmetric = \"ready_ms\"\nbaseline_serve = { command = [\"old\", \"{port}\"] }\nmax_drop_pct = 20\n";
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    let e = crate::spec::parse(std::path::Path::new("g.toml"), t, &ctx)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("assert.regression.metric") && e.contains("one value per run"),
        "{e}"
    );
}

#[test]
fn a_sampler_is_judged_on_every_value_and_indeterminate_without_one() {
    use crate::evidence::footprint::SampleSeries;
    let g = fp_gate("[assert.sample.npu_mem]\nmax = 1000\n[assert.sample.power]\nmin = 1\n[[sample]]\nname = \"npu_mem\"\npath = \"/x\"\nregex = '(\\d+)'\nunit = \"MiB\"\nevery_ms = 100\n[[sample]]\nname = \"power\"\npath = \"/y\"\nregex = '(\\d+)'\nunit = \"W\"\nevery_ms = 100\n");
    assert_eq!(
        g.trial_names()
            .iter()
            .filter(|n| n.starts_with("sample."))
            .count(),
        2
    );
    assert_eq!(
        g.decl_line_of("sample.npu_mem"),
        12,
        "the line of its bound"
    );
    let mut e = ev();
    e.run.serve.samples = vec![
        SampleSeries {
            name: "npu_mem".into(),
            unit: "MiB".into(),
            every_ms: 100,
            values: vec![(0.0, 800.0), (100.0, 1200.0), (200.0, 900.0)],
            taken: 4,
            failed: 1,
            reasons: vec!["timed out after 100 ms (killed) (1)".into()],
        },
        SampleSeries {
            name: "power".into(),
            unit: "W".into(),
            every_ms: 100,
            taken: 3,
            failed: 3,
            reasons: vec!["cannot read /y: No such file (3)".into()],
            ..Default::default()
        },
    ];
    let v = judge(&g, &e);
    let m = find(&v, "sample.npu_mem");
    assert_eq!(m.outcome, Outcome::Fail, "{}", m.message);
    assert!(
        m.message
            .contains("1 of 3 values outside max 1000 MiB (range 800-1200 MiB, median 900 MiB"),
        "{}",
        m.message
    );
    assert!(
        m.message.contains("1 gave none: timed out"),
        "{}",
        m.message
    );
    assert_eq!(m.values.len(), 3);
    let p = find(&v, "sample.power");
    assert_eq!(p.outcome, Outcome::Indeterminate, "{}", p.message);
    assert!(
        p.message
            .contains("none of 3 samples gave one: cannot read /y"),
        "{}",
        p.message
    );
    // Within the bound: PASS.
    e.run.serve.samples[0].values.retain(|(_, x)| *x <= 1000.0);
    assert_eq!(
        find(&judge(&g, &e), "sample.npu_mem").outcome,
        Outcome::Pass
    );
    // A bound on a sampler the gate does not declare, or min above max, is refused at its line.
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    for (extra, why) in [
        ("[assert.sample.nope]\nmax = 1\n", "names no [[sample]]"),
        ("[assert.sample.npu_mem]\nmin = 5\nmax = 1\n[[sample]]\nname = \"npu_mem\"\npath = \"/x\"\nregex = '(\\d+)'\nunit = \"MiB\"\nevery_ms = 100\n", "no value could pass"),
        ("[assert.sample.npu_mem]\n[[sample]]\nname = \"npu_mem\"\npath = \"/x\"\nregex = '(\\d+)'\nunit = \"MiB\"\nevery_ms = 100\n", "declares no bound"),
    ] {
        let t = format!("[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{{port}}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.content]\n{extra}");
        let e = crate::spec::parse(std::path::Path::new("g.toml"), &t, &ctx).unwrap_err().to_string();
        assert!(e.contains(why) && e.contains("assert.sample."), "{e}");
    }
}

// ---- a busy runner is not a slow serve (judge/busy.rs) ---------------------------------------------------

/// [`ev`] with the run-queue witness: the serve's busiest thread waited `wait_max_ms` of the 400 ms window,
/// and its 2 CPUs were `busy_ms` of 800 ms busy (the serve's own 160 ms included).
fn busy_ev(wait_max_ms: f64, busy_ms: f64) -> Evidence {
    let mut e = ev();
    let w = e
        .run
        .serve
        .footprint
        .as_mut()
        .unwrap()
        .cpu
        .as_mut()
        .unwrap();
    w.runqueue = Some(crate::evidence::footprint::RunQueue {
        wait_ms: wait_max_ms + 10.0,
        wait_max_ms,
        threads: 3,
        cpus: 2,
        cpus_busy_ms: busy_ms,
        cpus_total_ms: 800.0,
        requests: Vec::new(),
    });
    e
}

/// The replies of [`ev`]: TTFT 100 ms and 20 tok/s each; a floor of 30 tok/s and a limit of 50 ms fail them.
const TIGHT: &str = "[assert.rate]\nfloor_tok_s = 30\n[assert.first_token]\nlimit_ms = 50\n";

#[test]
fn a_fail_a_busy_runner_explains_is_indeterminate_naming_the_hold_and_the_median_it_gave_back() {
    // Others took (780 − 160) / 800 = 77.5 % of the CPUs; the busiest thread waited 240 of 400 ms (60 %).
    let v = judge(&fp_gate(TIGHT), &busy_ev(240.0, 780.0));
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    assert!(
        r.message.starts_with("rate INDETERMINATE busy runner, not a slow serve: median 20.0 tok/s would be 50.0 with each request's wait for a CPU given back (its busiest serve thread waited 60 % of it, median), within the floor 30.0 (rerun on a quiet runner); other processes kept 78 % of the serve's 2 CPU(s) busy, and its most-waiting thread waited 240 of 400 ms (60 %)"),
        "{}",
        r.message
    );
    // The values and the median judged are the measured ones, never the given-back figure.
    assert_eq!(r.median, Some(20.0));
    let t = find(&v, "first_token");
    assert_eq!(t.outcome, Outcome::Indeterminate, "{}", t.message);
    assert!(
        t.message.contains("median 100 ms would be 40 with each request's wait for a CPU given back (its busiest serve thread waited 60 %")
            && t.message.contains("within the limit 50"),
        "{}",
        t.message
    );
    assert_eq!(t.median, Some(100.0));
}

#[test]
fn a_fail_the_hold_cannot_explain_stays_a_fail_and_says_so() {
    // 20 % held off: 20 / 0.8 = 25.0 tok/s, still under the floor of 30.
    let v = judge(&fp_gate(TIGHT), &busy_ev(80.0, 780.0));
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
    assert!(
        r.message.contains("busy runner, yet the serve's own: even with each request's wait for a CPU given back (its busiest serve thread waited 20 % of it, median) the median would be 25.0 tok/s, beyond the floor 30.0"),
        "{}",
        r.message
    );
}

#[test]
fn a_serve_contending_with_itself_or_older_evidence_fails_as_before() {
    let plain = judge(&fp_gate(TIGHT), &ev());
    let plain_rate = find(&plain, "rate").message.clone();
    assert!(plain_rate.starts_with("rate FAIL "), "{plain_rate}");
    assert!(!plain_rate.contains("busy runner"), "{plain_rate}");
    // The CPUs were busy, but with the serve's own threads: others took (400 − 160) / 800 = 30 %, under
    // half. A release that starts more threads than cores waits on its own run queue: its fault.
    let v = judge(&fp_gate(TIGHT), &busy_ev(240.0, 400.0));
    for name in ["rate", "first_token"] {
        let x = find(&v, name);
        assert_eq!(x.outcome, Outcome::Fail, "{}", x.message);
        assert!(!x.message.contains("busy runner"), "{}", x.message);
    }
    assert_eq!(find(&v, "rate").message, plain_rate);
    // A pass on a busy runner stays a pass, untouched.
    let v = judge(
        &fp_gate("[assert.rate]\nfloor_tok_s = 10\n"),
        &busy_ev(240.0, 780.0),
    );
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert!(!r.message.contains("busy runner"), "{}", r.message);
}

#[test]
fn each_request_gets_its_own_hold_back_when_the_evidence_has_it() {
    // A thread-per-request serve: over the window its busiest thread waited only 10 %, but each request's
    // own thread waited 75 % of that request (20 tok/s would be 80) for three requests and none for one.
    let mut e = busy_ev(40.0, 780.0);
    let rq = e
        .run
        .serve
        .footprint
        .as_mut()
        .unwrap()
        .cpu
        .as_mut()
        .unwrap()
        .runqueue
        .as_mut()
        .unwrap();
    rq.requests = (0..4)
        .map(|i| crate::evidence::footprint::RequestHold {
            index: i,
            wait_max_ms: if i == 2 { 0.0 } else { 75.0 },
            wall_ms: 100.0,
        })
        .collect();
    let v = judge(&fp_gate(TIGHT), &e);
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    // Given back: 80, 80, 20, 80: median 80.
    assert!(
        r.message.contains("median 20.0 tok/s would be 80.0 with each request's wait for a CPU given back (its busiest serve thread waited 75 % of it, median)"),
        "{}",
        r.message
    );
    // A hold the given-back median still fails with: one request held most of its time, three 15 %.
    for (i, h) in e
        .run
        .serve
        .footprint
        .as_mut()
        .unwrap()
        .cpu
        .as_mut()
        .unwrap()
        .runqueue
        .as_mut()
        .unwrap()
        .requests
        .iter_mut()
        .enumerate()
    {
        h.wait_max_ms = if i == 2 { 75.0 } else { 15.0 };
    }
    let r = find(&judge(&fp_gate(TIGHT), &e), "rate").clone();
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
    assert!(r.message.contains("yet the serve's own"), "{}", r.message);
    // A hold under 10 % (the noise of any figure) says nothing either way.
    let v = judge(&fp_gate(TIGHT), &busy_ev(20.0, 780.0));
    let r = find(&v, "rate");
    assert_eq!(r.outcome, Outcome::Fail, "{}", r.message);
    assert!(!r.message.contains("busy runner"), "{}", r.message);
}

#[test]
fn the_model_load_time_the_serve_logs_stands_beside_ready_ms_or_says_why_not() {
    // vLLM's line (s) and llama.cpp's (ms, coloured): the first matching line, its group scaled to ms.
    let vllm = "[assert.ready]\nlimit_ms = 1000\nload_log = 'Loading weights took (?P<s>[0-9.]+) seconds'\n";
    let mut e = ev();
    e.serve_log = Some(
        "INFO start\n(Worker pid=3) INFO Loading weights took 1.82 seconds\nLoading weights took 9 seconds\n"
            .into(),
    );
    let r = find(&judge(&fp_gate(vllm), &e), "ready").clone();
    assert_eq!(r.outcome, Outcome::Pass, "{}", r.message);
    assert_eq!(r.median, Some(850.0), "the judged figure stays ready_ms");
    assert!(
        r.message.contains("the serve logged model load 1820 ms"),
        "{}",
        r.message
    );
    let re = regex::Regex::new(r"load time = +(?P<ms>[0-9.]+) ms").unwrap();
    e.serve_log = Some(
        "\u{1b}[32mllama_perf_context_print:        load time =       0.49 ms\u{1b}[0m\n".into(),
    );
    assert_eq!(
        crate::analysis::footprint::model_load_ms(&e, Some(&re)),
        Ok(0.49)
    );
    // No matching line, no log, a non-number, no pattern: the reason, never 0.
    e.serve_log = Some("nothing here\n".into());
    let r = find(&judge(&fp_gate(vllm), &e), "ready").clone();
    assert!(
        r.message
            .contains("no model-load time: no line of serve.log matches"),
        "{}",
        r.message
    );
    e.serve_log = None;
    let why = crate::analysis::footprint::model_load_ms(&e, Some(&re)).unwrap_err();
    assert!(why.contains("no serve.log"), "{why}");
    let bad = regex::Regex::new(r"took (?P<s>\S+) seconds").unwrap();
    e.serve_log = Some("took 1.2.3 seconds\n".into());
    let why = crate::analysis::footprint::model_load_ms(&e, Some(&bad)).unwrap_err();
    assert!(
        why.contains("line 1") && why.contains("not a number"),
        "{why}"
    );
    let why = crate::analysis::footprint::model_load_ms(&e, None).unwrap_err();
    assert!(why.contains("names no [assert.ready] load_log"), "{why}");
    // Without the named group the gate is refused at its key.
    let t = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.ready]\nlimit_ms = 10\nload_log = 'took ([0-9.]+) seconds'\n";
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    let e = crate::spec::parse(std::path::Path::new("g.toml"), t, &ctx)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("assert.ready.load_log") && e.contains("g.toml:11"),
        "{e}"
    );
}

#[test]
fn a_url_serve_measured_through_its_pid_file_has_memory_and_cpu_but_no_start_up_time() {
    let mut e = ev();
    e.run.serve.mode = "url".into();
    e.run.serve.base_url = "http://127.0.0.1:8080".into();
    e.run.serve.footprint.as_mut().unwrap().attached =
        Some("pid 10 from [serve] pid_file /run/srv.pid".into());
    let v = judge(&fp_gate(ALL), &e);
    let m = find(&v, "memory");
    assert_eq!(m.outcome, Outcome::Pass, "{}", m.message);
    assert!(
        m.message
            .contains("(pid 10 from [serve] pid_file /run/srv.pid, a url serve)"),
        "{}",
        m.message
    );
    assert_eq!(find(&v, "cpu").median, Some(10.0));
    let r = find(&v, "ready");
    assert_eq!(r.outcome, Outcome::Indeterminate, "{}", r.message);
    // Without a pid file the trials say how to get the figures.
    e.run.serve.footprint = None;
    let m = find(&judge(&fp_gate(ALL), &e), "memory").clone();
    assert!(
        m.message.contains("name its pid in [serve] pid_file"),
        "{}",
        m.message
    );
    // pid_file is for url serves only, refused at its key for a started one.
    let t = "[gate]\nname = \"g\"\n[serve]\ncommand = [\"srv\", \"{port}\"]\npid_file = \"/run/x.pid\"\n[request]\nmodel = \"m\"\nmax_tokens = 8\nprompts = [\"p\"]\n[assert.content]\n";
    let ctx = crate::spec::Context {
        gate_dir: "/g".into(),
        cache: "/c".into(),
        home: None,
    };
    let err = crate::spec::parse(std::path::Path::new("g.toml"), t, &ctx)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("serve.pid_file") && err.contains("url"),
        "{err}"
    );
}
