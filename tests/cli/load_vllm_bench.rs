//! What goes here: `[load] driver = "vllm-bench"`, `"aiperf"` and `"guidellm"` against the synthetic
//! serve: vLLM's real `vllm bench serve` (the provisioned vLLM runtime), AIPerf and GuideLLM run by
//! servegate with the gate's schedule, their output imported and judged, beside servegate's own client on
//! the same schedule; and how a tool's run that fails is said ([`servegate::io::tool::ToolKit::run`]). The
//! command lines built from a gate are tests/pure/vllm_bench.rs.
//!
//! Skipped, printing the provisioning command, when a tool is not provisioned (`scripts/provision-vllm.sh`,
//! `scripts/provision-aiperf.sh`, `scripts/provision-guidellm.sh`).

use crate::fixtures::load::{gate, spec_with, summary};
use servegate::evidence::EvidenceWriter;
use servegate::io::load_client::Target;
use servegate::judge::{Outcome, Verdict};
use servegate::spec::load::Point;

/// The bound within which vLLM's bench and servegate's client must agree on the TTFT median, ms. vLLM's
/// bench times in Python (`time.perf_counter()` when aiohttp hands over a chunk, under asyncio, its clock
/// started before the connection is made); servegate's are the kernel's receive times: on a busy 2-core
/// runner a Python read returns several ms late.
const TTFT_P50_AGREE_MS: f64 = 50.0;

/// Starts the synthetic serve (TTFT `ttft` ms, then a token every `itl` ms, `n` tokens) and returns its URL.
fn serve(ttft: f64, itl: f64, n: u32) -> String {
    crate::fixtures::load::synthetic_serve(spec_with(ttft, itl, n))
}

/// Runs point c=2 of `g` against `url` into `run/c2`, judges it, and returns the verdicts and the note.
fn run_point(
    g: &servegate::spec::GateSpec,
    url: &str,
    run: &std::path::Path,
) -> (Vec<Verdict>, String) {
    let load = g.load.clone().unwrap();
    let prompts = servegate::run::load::prompts(g, &load).unwrap();
    std::fs::create_dir_all(run).unwrap();
    let pw = EvidenceWriter::create_exact(&run.join("c2")).unwrap();
    let target = Target::parse(url, None).unwrap();
    let sum = summary(g, 12);
    let note = servegate::run::load::run_point(
        g,
        &load,
        Point::Concurrency(2),
        &prompts,
        &target,
        &pw,
        &sum,
    )
    .unwrap();
    (servegate::run::load::judge_dir(g, run), note)
}

/// [`run_point`] through servegate's own client into `run` (emptied first), run again, up to three times,
/// while its verdicts say the client was too late to time a reply (a busy runner:
/// fixtures::timed_by_the_client), so that the parity compares timed replies; the tools' own runs are
/// Python's and are never retried.
fn own_point(g: &servegate::spec::GateSpec, url: &str, run: &std::path::Path) -> Vec<Verdict> {
    let late = |vs: &Vec<Verdict>| {
        vs.iter()
            .map(|v| v.message.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    crate::fixtures::timed_by_the_client(
        3,
        || {
            let _ = std::fs::remove_dir_all(run);
            run_point(g, url, run).0
        },
        |vs| !late(vs).contains(crate::fixtures::CLIENT_LATE),
        late,
    )
}

/// The judged requests' TTFT median of the point `run/c2`, measured from its evidence.
fn ttft_p50(run: &std::path::Path) -> f64 {
    let ev = servegate::loaded::load(&run.join("c2")).unwrap();
    let mut t: Vec<f64> = ev
        .requests
        .iter()
        .filter(|r| !r.record.warmup)
        .filter_map(|r| servegate::analysis::measure::measure(&r.reply).ttft_ms)
        .collect();
    assert_eq!(t.len(), 12, "TTFTs measured of 12");
    t.sort_by(f64::total_cmp);
    (t[5] + t[6]) / 2.0
}

/// A `vllm-bench` gate (concurrency 2, 1 warmup + 12 judged, 8 tokens each) against the synthetic serve
/// (TTFT 40 ms, then a token every 10 ms: E2E 110 ms at the serve): vLLM's bench runs with the gate's
/// schedule, its result and log are kept in the point's evidence, and the gate passes what the serve meets
/// and fails what it does not, exactly as servegate's own client on the same schedule; every verdict names
/// the tool and its version. The two TTFT medians agree within [`TTFT_P50_AGREE_MS`] (the cross-tool
/// parity), and neither is under the serve's 40 ms.
#[test]
fn a_vllm_bench_gate_agrees_with_servegates_client_on_the_synthetic_serve() {
    if let Err(e) = servegate::io::vllm_bench::vllm_python() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let tok = servegate::io::vllm_bench::tokenizer("synthetic");
    if !tok.is_dir() {
        eprintln!(
            "SKIPPED: no tokenizer for vLLM's bench ({} is missing): run scripts/provision-vllm.sh",
            tok.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let url = serve(40.0, 10.0, 8);
    let asserts = "[assert.latency]\nttft_p50_ms = 2000\ne2e_p50_ms = 100\n[assert.throughput]\nfloor_rps = 0.5\n[assert.errors]\nmax_rate = 0.0";
    let common = "concurrency = 2\nrequests = 12\nwarmup_requests = 1\nmax_lag_ms = 1000";

    let vdir = tmp.path().join("vllm");
    std::fs::create_dir_all(&vdir).unwrap();
    let gv = gate(
        &vdir,
        &format!("{common}\ndriver = \"vllm-bench\""),
        asserts,
    );
    let (vv, note) = run_point(&gv, &url, &vdir.join("run"));
    eprintln!("{note}");
    assert!(
        note.contains("12 of 12 planned requests sent by vllm-bench 0.32.0, 0 failed"),
        "{note}"
    );
    let odir = tmp.path().join("own");
    std::fs::create_dir_all(&odir).unwrap();
    let go = gate(&odir, common, asserts);
    let vo = own_point(&go, &url, &odir.join("run"));

    let outcomes = |vs: &[Verdict]| -> Vec<(String, Outcome)> {
        vs.iter()
            .map(|v| (v.assertion.clone(), v.outcome))
            .collect()
    };
    assert_eq!(outcomes(&vv), outcomes(&vo), "vllm {vv:#?}\nown {vo:#?}");
    let want = [
        ("[c=2]::ttft_p50", Outcome::Pass),
        ("[c=2]::e2e_p50", Outcome::Fail),
        ("[c=2]::throughput", Outcome::Pass),
        ("[c=2]::errors", Outcome::Pass),
    ];
    assert_eq!(vv.len(), want.len(), "{vv:#?}");
    for (name, o) in want {
        let v = vv.iter().find(|v| v.assertion == name).unwrap();
        assert_eq!(v.outcome, o, "{}", v.message);
        assert!(
            v.message
                .contains("timings by vllm-bench 0.32.0, not servegate's client"),
            "{}",
            v.message
        );
    }
    eprintln!("{}", vv[0].message);
    assert!(vo.iter().all(|v| !v.message.contains("vllm-bench")));

    // The evidence: the tool's own files, the command it ran, every request imported.
    let pd = vdir.join("run/c2");
    for f in ["result.json", "vllm-bench.log", "prompts.jsonl"] {
        assert!(pd.join("vllm-bench").join(f).is_file(), "{f} missing");
    }
    let run = servegate::evidence::read_run_summary(&pd).unwrap();
    let imp = run.imported.expect("run.json names the tool");
    assert_eq!(imp.tool, "vllm-bench");
    assert_eq!(imp.version.as_deref(), Some("0.32.0"));
    let cmd = imp.command.unwrap();
    assert!(
        cmd.contains("--max-concurrency 2") && cmd.contains("--num-prompts 12"),
        "{cmd}"
    );
    let rec = servegate::evidence::load::read_record(&pd).unwrap();
    assert_eq!(rec.timings.len(), 12);

    let (pv, po) = (ttft_p50(&vdir.join("run")), ttft_p50(&odir.join("run")));
    eprintln!("TTFT p50: vllm-bench {pv:.2} ms, servegate's client {po:.2} ms (serve: 40 ms)");
    assert!(
        pv >= 39.0 && po >= 39.0,
        "a TTFT p50 under the serve's 40 ms: {pv} {po}"
    );
    assert!(
        (pv - po).abs() <= TTFT_P50_AGREE_MS,
        "vllm-bench {pv} vs own {po}"
    );
}

/// A bench that cannot run the point (here: the gate's model is a directory with no tokenizer in it, so
/// vLLM's bench exits non-zero loading it) sends nothing: every verdict of the point is VOID, naming the
/// tool, its exit and its log; the log stays in the evidence.
#[test]
fn a_bench_that_exits_non_zero_voids_the_point_naming_why() {
    if let Err(e) = servegate::io::vllm_bench::vllm_python() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let url = serve(5.0, 5.0, 2);
    let empty = tmp.path().join("no-tokenizer");
    std::fs::create_dir_all(&empty).unwrap();
    let text = format!(
        "[gate]\nname = \"g\"\n[serve]\nurl = \"http://127.0.0.1:9\"\n[request]\nmodel = {:?}\nserved_model = \"synthetic\"\nmax_tokens = 2\nprompts = [\"a\"]\n[load]\nconcurrency = 2\nrequests = 12\ndriver = \"vllm-bench\"\n[assert.errors]\nmax_rate = 0.0\n",
        empty.display().to_string()
    );
    let file = tmp.path().join("gate.toml");
    std::fs::write(&file, &text).unwrap();
    let g =
        servegate::spec::parse(&file, &text, &servegate::spec::Context::for_file(&file)).unwrap();
    let (vs, note) = run_point(&g, &url, &tmp.path().join("run"));
    eprintln!("{note}");
    assert!(note.contains("0 of 12 planned requests sent"), "{note}");
    assert_eq!(vs.len(), 1);
    for v in &vs {
        assert_eq!(v.outcome, Outcome::Void, "{}", v.message);
        assert!(
            v.message
                .contains("load_client: vllm-bench: vllm bench serve exited with")
                && v.message.contains("vllm-bench.log"),
            "{}",
            v.message
        );
    }
    assert!(tmp
        .path()
        .join("run/c2/vllm-bench/vllm-bench.log")
        .is_file());
}

/// An `aiperf` gate (the same schedule: concurrency 2, 1 warmup + 12 judged, against the same synthetic
/// serve): AIPerf runs with the gate's schedule, its records (warmup included, as phase `warmup`) are the
/// point's evidence, the verdicts are servegate's client's on the same schedule and name AIPerf and its
/// version, and the TTFT medians agree within [`TTFT_P50_AGREE_MS`].
#[test]
fn an_aiperf_gate_agrees_with_servegates_client_on_the_synthetic_serve() {
    if let Err(e) = servegate::io::aiperf::aiperf_python() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let tok = servegate::io::vllm_bench::tokenizer("synthetic");
    if !tok.is_dir() {
        eprintln!(
            "SKIPPED: no tokenizer for AIPerf ({} is missing): run scripts/provision-vllm.sh",
            tok.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let url = serve(40.0, 10.0, 8);
    let asserts = "[assert.latency]\nttft_p50_ms = 2000\ne2e_p50_ms = 100\n[assert.throughput]\nfloor_rps = 0.5\n[assert.errors]\nmax_rate = 0.0";
    let common = "concurrency = 2\nrequests = 12\nwarmup_requests = 1\nmax_lag_ms = 1000";
    let adir = tmp.path().join("aiperf");
    std::fs::create_dir_all(&adir).unwrap();
    let ga = gate(&adir, &format!("{common}\ndriver = \"aiperf\""), asserts);
    let (va, note) = run_point(&ga, &url, &adir.join("run"));
    eprintln!("{note}");
    assert!(
        note.contains("12 of 12 planned requests sent by aiperf 0.13.0, 0 failed"),
        "{note}"
    );
    let odir = tmp.path().join("own");
    std::fs::create_dir_all(&odir).unwrap();
    let vo = own_point(&gate(&odir, common, asserts), &url, &odir.join("run"));
    let outcomes = |vs: &[Verdict]| -> Vec<(String, Outcome)> {
        vs.iter()
            .map(|v| (v.assertion.clone(), v.outcome))
            .collect()
    };
    assert_eq!(outcomes(&va), outcomes(&vo), "aiperf {va:#?}\nown {vo:#?}");
    for v in &va {
        assert!(
            v.message
                .contains("timings by aiperf 0.13.0, not servegate's client"),
            "{}",
            v.message
        );
    }
    let pd = adir.join("run/c2");
    assert!(pd.join("aiperf/artifacts/profile_export.jsonl").is_file());
    assert!(pd.join("aiperf/aiperf.log").is_file());
    let imp = servegate::evidence::read_run_summary(&pd)
        .unwrap()
        .imported
        .unwrap();
    assert_eq!(imp.tool, "aiperf");
    let (pa, po) = (ttft_p50(&adir.join("run")), ttft_p50(&odir.join("run")));
    eprintln!("TTFT p50: aiperf {pa:.2} ms, servegate's client {po:.2} ms (serve: 40 ms)");
    assert!(
        pa >= 39.0,
        "an AIPerf TTFT p50 under the serve's 40 ms: {pa}"
    );
    assert!(
        (pa - po).abs() <= TTFT_P50_AGREE_MS,
        "aiperf {pa} vs own {po}"
    );
}

/// A `guidellm` gate (the same schedule: concurrency 2, 1 warmup + 12 judged, against the same synthetic
/// serve): GuideLLM runs with the gate's schedule (its `concurrent` profile, 13 requests, the first its
/// warmup, recorded as one), its report, scenario, dataset and log are the point's evidence, the verdicts are servegate's
/// client's on the same schedule and name GuideLLM and its version, and the TTFT medians agree within
/// [`TTFT_P50_AGREE_MS`].
#[test]
fn a_guidellm_gate_agrees_with_servegates_client_on_the_synthetic_serve() {
    if let Err(e) = servegate::io::guidellm::guidellm_python() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let url = serve(40.0, 10.0, 8);
    let asserts = "[assert.latency]\nttft_p50_ms = 2000\ne2e_p50_ms = 100\n[assert.throughput]\nfloor_rps = 0.5\n[assert.errors]\nmax_rate = 0.0";
    let common = "concurrency = 2\nrequests = 12\nwarmup_requests = 1\nmax_lag_ms = 1000";
    let gdir = tmp.path().join("guidellm");
    std::fs::create_dir_all(&gdir).unwrap();
    let gg = gate(&gdir, &format!("{common}\ndriver = \"guidellm\""), asserts);
    let (vg, note) = run_point(&gg, &url, &gdir.join("run"));
    eprintln!("{note}");
    assert!(
        note.contains("12 of 12 planned requests sent by guidellm 0.8.1, 0 failed"),
        "{note}"
    );
    let odir = tmp.path().join("own");
    std::fs::create_dir_all(&odir).unwrap();
    let vo = own_point(&gate(&odir, common, asserts), &url, &odir.join("run"));
    let outcomes = |vs: &[Verdict]| -> Vec<(String, Outcome)> {
        vs.iter()
            .map(|v| (v.assertion.clone(), v.outcome))
            .collect()
    };
    assert_eq!(
        outcomes(&vg),
        outcomes(&vo),
        "guidellm {vg:#?}\nown {vo:#?}"
    );
    let want = [
        ("[c=2]::ttft_p50", Outcome::Pass),
        ("[c=2]::e2e_p50", Outcome::Fail),
        ("[c=2]::throughput", Outcome::Pass),
        ("[c=2]::errors", Outcome::Pass),
    ];
    assert_eq!(vg.len(), want.len(), "{vg:#?}");
    for (name, o) in want {
        let v = vg.iter().find(|v| v.assertion == name).unwrap();
        assert_eq!(v.outcome, o, "{}", v.message);
        assert!(
            v.message
                .contains("timings by guidellm 0.8.1, not servegate's client"),
            "{}",
            v.message
        );
    }
    eprintln!("{}", vg[0].message);
    let pd = gdir.join("run/c2");
    for f in [
        "report.json",
        "scenario.json",
        "prompts.jsonl",
        "guidellm.log",
    ] {
        assert!(pd.join("guidellm").join(f).is_file(), "{f} missing");
    }
    let imp = servegate::evidence::read_run_summary(&pd)
        .unwrap()
        .imported
        .unwrap();
    assert_eq!(imp.tool, "guidellm");
    assert_eq!(imp.version.as_deref(), Some("0.8.1"));
    assert!(imp.command.unwrap().contains("-m guidellm run -c"));
    // Every request GuideLLM sent: the warmup (its first, marked on import) and the 12 judged ones.
    let rec = servegate::evidence::load::read_record(&pd).unwrap();
    assert_eq!(rec.timings.len(), 13);
    let ev = servegate::loaded::load(&pd).unwrap();
    assert_eq!(ev.requests.iter().filter(|r| r.record.warmup).count(), 1);
    let (pg, po) = (ttft_p50(&gdir.join("run")), ttft_p50(&odir.join("run")));
    eprintln!("TTFT p50: guidellm {pg:.2} ms, servegate's client {po:.2} ms (serve: 40 ms)");
    assert!(
        pg >= 39.0,
        "a GuideLLM TTFT p50 under the serve's 40 ms: {pg}"
    );
    assert!(
        (pg - po).abs() <= TTFT_P50_AGREE_MS,
        "guidellm {pg} vs own {po}"
    );
}

/// How a tool's run ends when it gives nothing to import, as every tool driver says it (the point is
/// then VOID with this text, [`servegate::run::load_tool`]): an exit status with the log's last lines
/// (escaped: a control character in the tool's output reaches no terminal raw), an exit 0 that wrote no
/// output file, a run past its wall time (stopped), a program that cannot start. The log stays.
#[test]
fn a_tool_run_that_gives_nothing_says_how_with_its_log() {
    use servegate::io::tool::ToolKit;
    use std::process::Command;
    use std::time::Duration;
    let kit = servegate::io::guidellm::KIT;
    let tmp = tempfile::tempdir().unwrap();
    let dir = kit.prepare(tmp.path()).unwrap();
    let out = dir.join("report.json");
    let sh = |script: &str| {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    let wall = Duration::from_secs(60);
    let e = kit
        .run(
            sh("echo one; printf 'two \\033[31mred\\n'; exit 3"),
            &dir,
            wall,
            "guidellm run",
            &out,
        )
        .unwrap_err();
    assert!(
        e.starts_with("guidellm run exited with exit status: 3"),
        "{e}"
    );
    assert!(
        e.contains("guidellm.log") && e.contains("last lines: one | two"),
        "{e}"
    );
    assert!(!e.contains('\x1b'), "raw escape in {e:?}");
    assert!(dir.join("guidellm.log").is_file());
    let e = kit
        .run(sh("echo done"), &dir, wall, "guidellm run", &out)
        .unwrap_err();
    assert!(
        e.starts_with("guidellm run exited 0 but wrote no report.json")
            && e.contains("last lines: done"),
        "{e}"
    );
    let e = kit
        .run(
            sh("echo waiting; exec sleep 60"),
            &dir,
            Duration::from_secs(1),
            "guidellm run",
            &out,
        )
        .unwrap_err();
    assert!(
        e.contains("did not finish within 1 s and was stopped"),
        "{e}"
    );
    let e = kit
        .run(
            Command::new(tmp.path().join("no-such-python")),
            &dir,
            wall,
            "guidellm run",
            &out,
        )
        .unwrap_err();
    assert!(
        e.contains("cannot run") && e.contains("no-such-python"),
        "{e}"
    );
    std::fs::write(&out, "{}").unwrap();
    assert_eq!(
        kit.run(sh("true"), &dir, wall, "guidellm run", &out),
        Ok(())
    );
    assert_eq!(
        ToolKit::command_line(["py".to_string(), "a b".to_string(), "it's".to_string()]),
        "py 'a b' 'it'\\''s'"
    );
}
