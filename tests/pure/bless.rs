//! What goes here: `bless` as a library on committed evidence (floors derived and written back, runs refused or
//! accepted as baseline windows), no process. The binary's part (CI refusal, concurrent blesses, the
//! release-conditions repros through `servegate run`) is tests/cli/bless.rs.
//!
//! `servegate bless`: a floor derived from recorded evidence round-trips the gate file (comments, order,
//! formatting, inline tables and line endings unchanged except the edited value and its provenance comment:
//! insta snapshots of the file before and after, byte diffs), a run is blessed as a baseline window only when
//! it is good evidence (its serve did not fail, its own verdicts hold, it is not already a window) and its
//! comparability key matches, concurrent blesses into one baseline all land (one lock), every accepted change
//! is one ledger line, and nothing is written in CI without --force. The recorded run is
//! tests/data/replay/reference-smoke (a real reference run, README there); the release-conditions repros
//! (tests/data/repro/bless/, README there) run their stdlib Python serve through `servegate run` (needs
//! python3). No timing decides anything.

use std::path::{Path, PathBuf};

use crate::fixtures::bless::{gate_copy, ledger, restamped, run_copy, RUN};
use crate::fixtures::root;
use servegate::error::exit;
use servegate::evidence::baseline;
use servegate::records::bless::{self, BlessArgs};
const UTC: &str = "2026-12-01T11:00:00Z";

fn args(gate: &Path, baselines: &Path) -> BlessArgs {
    BlessArgs {
        gate: gate.to_path_buf(),
        baseline: None,
        kind: None,
        floor: None,
        slow: None,
        headroom_pct: bless::DEFAULT_HEADROOM_PCT,
        confidence: bless::DEFAULT_CONFIDENCE,
        limits: Vec::new(),
        limit_headroom_pct: bless::DEFAULT_LIMIT_HEADROOM_PCT,
        baselines_dir: baselines.to_path_buf(),
        accept: false,
        force: false,
    }
}

#[test]
fn a_derived_floor_round_trips_the_gate_file_with_its_provenance() {
    let (t, gate) = gate_copy();
    let before = std::fs::read_to_string(&gate).unwrap();
    let plan = bless::plan_floor(&gate, Path::new(RUN), None, 0.95, 10.0, UTC).unwrap();
    // The recorded client rates are 42.1, 40.3, 33.1, 26.7, 22.2, 18.5 (median 29.9; the README's 49.9 and 30.2
    // predate the merged decode-rate measure): n = 6, the 95 % lower bound of the
    // median is the smallest (order statistic 1 of 6), minus 10 %.
    assert_eq!(plan.derivation.n, 6);
    assert_eq!(plan.ledger.previous, Some(15.0));
    let lowest = plan.derivation.floor / 0.9;
    assert!((18.0..19.0).contains(&lowest), "{plan:?}");
    insta::assert_snapshot!("reference_smoke_before", before);
    insta::assert_snapshot!("reference_smoke_after", plan.new);
    insta::assert_snapshot!(
        "reference_smoke_diff",
        bless::diff(&before, &plan.new, "gates/reference-smoke.toml")
    );
    // Everything but the value line and the two provenance lines is unchanged, in order.
    let changed: Vec<&str> = plan
        .new
        .lines()
        .filter(|l| !before.lines().any(|b| b == *l))
        .collect();
    assert_eq!(changed.len(), 3, "{changed:?}");
    assert!(changed[2].starts_with("floor_tok_s = 16.6"), "{changed:?}");
    let kept: Vec<&str> = plan.new.lines().filter(|l| !changed.contains(l)).collect();
    let old_kept: Vec<&str> = before
        .lines()
        .filter(|l| !l.starts_with("floor_tok_s"))
        .collect();
    assert_eq!(kept, old_kept);
    // The trailing comment of the value survives an edit (decor carried over), and a second bless replaces
    // the first provenance instead of stacking it.
    let with_trailing = plan
        .new
        .replace("floor_tok_s = 16.6", "floor_tok_s = 16.6 # hand note");
    let (again, prev) = bless::edit_floor(&with_trailing, 20.0, "# servegate bless again").unwrap();
    assert_eq!(prev, Some(16.6));
    assert!(
        again.contains("floor_tok_s = 20.0 # hand note\n"),
        "{again}"
    );
    assert_eq!(again.matches("# servegate bless").count(), 1, "{again}");

    // Not written without --accept; written with it, plus one ledger line.
    let bl = t.path().join("baselines");
    let mut a = args(&gate, &bl);
    a.floor = Some(RUN.into());
    bless::run_cli(&a, None, UTC).unwrap();
    assert_eq!(std::fs::read_to_string(&gate).unwrap(), before);
    assert!(ledger(&bl).is_empty());
    a.accept = true;
    bless::run_cli(&a, None, UTC).unwrap();
    assert_eq!(std::fs::read_to_string(&gate).unwrap(), plan.new);
    let l = ledger(&bl);
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].action, "floor");
    assert_eq!(l[0].value, Some(16.6));
    assert_eq!(l[0].run, RUN);
    // The edited gate is still a valid gate with the new floor.
    let g = servegate::spec::load(&gate).unwrap();
    assert_eq!(g.assertions.rate.unwrap().floor_tok_s, 16.6);
}

#[test]
fn a_slow_run_that_overlaps_the_fast_one_is_refused() {
    let (t, gate) = gate_copy();
    let bl = t.path().join("baselines");
    let mut a = args(&gate, &bl);
    a.floor = Some(RUN.into());
    a.slow = Some(RUN.into());
    let e = bless::run_cli(&a, None, UTC).unwrap_err();
    assert!(e.message.contains("overlap"), "{e}");
}

#[test]
fn a_good_run_becomes_baseline_windows_and_a_foreign_key_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let gate = root().join("gates/reference-smoke.toml");
    let bl = t.path().join("baselines");
    let mut a = args(&gate, &bl);
    a.baseline = Some(RUN.into());
    a.accept = true;
    bless::run_cli(&a, None, UTC).unwrap();
    // The same run again, by its path or as a copy: one run is one window.
    let same = t.path().join("copies");
    std::fs::create_dir_all(&same).unwrap();
    for again in [PathBuf::from(RUN), run_copy(&same, "reference-smoke")] {
        a.baseline = Some(again);
        let e = bless::run_cli(&a, None, UTC).unwrap_err();
        assert_eq!(e.code, exit::ASSERTION_FAILED, "{e}");
        assert!(
            e.message
                .contains("it is already window reference-smoke of")
                && e.message.contains("one run is one window"),
            "{e}"
        );
    }
    // Another run (the recorded one, started later) is a second window.
    let second = restamped(&run_copy(t.path(), "second"), "2026-11-29T19:00:00Z");
    a.baseline = Some(second.clone());
    bless::run_cli(&a, None, UTC).unwrap();
    let b = baseline::load(&bl.join("reference-smoke")).unwrap();
    assert_eq!(b.manifest.gate, "reference-smoke");
    assert_eq!(b.manifest.windows, vec!["reference-smoke", "second"]);
    assert_eq!(
        b.manifest.sources,
        vec![RUN.to_string(), second.display().to_string()]
    );
    assert_eq!(b.manifest.key.cpus.as_deref(), Some("2"));
    for w in &b.window_dirs {
        // A complete run directory that servegate judge reads like any evidence.
        let ev = servegate::loaded::load(w).unwrap();
        assert_eq!(ev.requests.len(), 9);
    }
    assert!(!std::fs::read_dir(bl.join("reference-smoke"))
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().contains("partial")));
    let l = ledger(&bl);
    assert_eq!(l.len(), 2);
    assert!(l.iter().all(|e| e.action == "baseline" && e.n == 6));

    // Another machine's run: not added to this baseline (named difference); fine as another kind.
    let other = run_copy(t.path(), "other-host");
    let p = other.join("run.json");
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    run["host"]["cpus"] = serde_json::json!(64);
    std::fs::write(&p, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    a.baseline = Some(other.clone());
    let e = bless::run_cli(&a, None, UTC).unwrap_err();
    assert_eq!(e.code, exit::INCOMPARABLE);
    assert!(e.message.contains("cpus"), "{e}");
    a.kind = Some("big-box".into());
    bless::run_cli(&a, None, UTC).unwrap();
    let big = baseline::load(&bl.join("reference-smoke").join("big-box")).unwrap();
    assert_eq!(big.manifest.kind, "big-box");
    assert_eq!(big.manifest.key.cpus.as_deref(), Some("64"));
}

#[test]
fn a_run_that_is_not_good_evidence_is_refused_with_every_reason() {
    let t = tempfile::tempdir().unwrap();
    let gate = root().join("gates/reference-smoke.toml");
    let bl = t.path().join("baselines");
    let mut a = args(&gate, &bl);
    a.accept = true;

    // Incomplete.
    let cut = run_copy(t.path(), "cut");
    let p = cut.join("run.json");
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    run["status"] = serde_json::json!("interrupted");
    std::fs::write(&p, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    a.baseline = Some(cut);
    let e = bless::run_cli(&a, None, UTC).unwrap_err();
    assert_eq!(e.code, exit::ASSERTION_FAILED, "{e}");
    assert!(
        e.message
            .contains("the run is incomplete (run.json status interrupted)"),
        "{e}"
    );

    // A known answer that no longer matches, and a judged request gone.
    let bad = run_copy(t.path(), "bad");
    let p = bad.join("run.json");
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    run["requests"].as_array_mut().unwrap().pop();
    std::fs::write(&p, serde_json::to_string_pretty(&run).unwrap()).unwrap();
    let g = bad.join("gate.toml");
    let text = std::fs::read_to_string(&g).unwrap();
    std::fs::write(&g, text.replace(r"(?i)\bparis\b", r"(?i)\blyon\b")).unwrap();
    for ext in ["reads.jsonl", "request.json", "response.json"] {
        std::fs::remove_file(bad.join(format!("08.{ext}"))).unwrap();
    }
    a.baseline = Some(bad.clone());
    let e = bless::run_cli(&a, None, UTC).unwrap_err();
    assert_eq!(e.code, exit::ASSERTION_FAILED, "{e}");
    for part in [
        "known_answer trial does not pass",
        "5 answered requests of 6 planned",
    ] {
        assert!(e.message.contains(part), "{part:?} missing from {e}");
    }
    a.baseline = None;
    a.floor = Some(bad);
    assert!(bless::run_cli(&a, None, UTC).is_err());
    assert!(!bl.exists(), "nothing written for a refused run");

    // Its own figure bounds do not refuse it (a floor and a TTFT limit this run misses: a slow machine is
    // still evidence, and the floor is what bless derives); a figure trial failing for its evidence does
    // (client and serve clocks 100x further apart than the gate allows).
    let slow = run_copy(t.path(), "slow");
    let g = slow.join("gate.toml");
    let text = std::fs::read_to_string(&g).unwrap();
    let strict = text
        .replace("floor_tok_s = 15.0", "floor_tok_s = 1000.0")
        .replace("limit_ms = 2000", "limit_ms = 1");
    std::fs::write(&g, &strict).unwrap();
    let rg = servegate::spec::load(&g).unwrap();
    let ev = servegate::loaded::load(&slow).unwrap();
    assert_eq!(
        bless::refusals(&rg, &ev, &servegate::loaded::judge_inputs(&rg, &ev), true),
        Vec::<String>::new()
    );
    std::fs::write(
        &g,
        strict.replace(
            "floor_tok_s = 1000.0",
            "floor_tok_s = 1000.0\nsource = \"both\"\nagree_pct = 0.01",
        ),
    )
    .unwrap();
    let rg = servegate::spec::load(&g).unwrap();
    let why = bless::refusals(&rg, &ev, &servegate::loaded::judge_inputs(&rg, &ev), true);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].starts_with("its rate trial does not pass (its bound set aside): rate FAIL"),
        "{why:?}"
    );

    // A run of another gate.
    a.floor = None;
    a.baseline = Some(root().join("tests/data/runs/npu-rc-pass"));
    let e = bless::run_cli(&a, None, UTC).unwrap_err();
    assert!(e.message.contains("not `reference-smoke`"), "{e}");
}

/// The committed baselines of the reference gate (data/baselines/reference-smoke/, blessed from quiet runs, and
/// data/baselines/reference-smoke-loaded/, from runs at a load of 7-9 per CPU; docs/bless.md) are whole: every
/// window is a run directory that still passes what bless demands, all share the manifest's key, their
/// windows' host loads are comparable among themselves, and the ledger names each window.
#[test]
fn the_committed_reference_baseline_is_whole_and_good() {
    for name in ["reference-smoke", "reference-smoke-loaded"] {
        committed_reference_baseline_is_whole(&root().join("data/baselines").join(name));
    }
}

fn committed_reference_baseline_is_whole(dir: &std::path::Path) {
    let b = baseline::load(dir).unwrap();
    let loads: Vec<f64> = b.window_loads.iter().flatten().copied().collect();
    assert_eq!(loads.len(), b.window_dirs.len(), "{}", dir.display());
    let mid = b.load_per_cpu().unwrap();
    for l in &loads {
        let r = servegate::evidence::comparability::load_ratio(*l, mid);
        assert!(
            r <= servegate::spec::regression::DEFAULT_MAX_LOAD_RATIO,
            "{}: window load {l} vs median {mid}",
            dir.display()
        );
    }
    assert_eq!(b.manifest.gate, "reference-smoke");
    assert!(b.window_dirs.len() >= 3, "{:?}", b.manifest.windows);
    let gate = servegate::spec::load(&root().join("gates/reference-smoke.toml")).unwrap();
    // One run is one window.
    let mut ids: Vec<String> = b
        .window_dirs
        .iter()
        .map(|w| bless::run_identity(w).unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), b.window_dirs.len(), "{}", dir.display());
    for w in &b.window_dirs {
        let ev = servegate::loaded::load(w).unwrap();
        let rg = servegate::spec::load(&w.join("gate.toml")).unwrap();
        assert_eq!(rg.name, gate.name);
        assert_eq!(
            bless::refusals(&rg, &ev, &servegate::loaded::judge_inputs(&rg, &ev), true),
            Vec::<String>::new(),
            "{}",
            w.display()
        );
        // The window's whole key (the numerics settings of its serve log included) is the baseline's, as
        // `baseline::load` re-derives it; the manifest's copy agrees (load refuses one that does not).
        let key = servegate::evidence::comparability::key_of_evidence(
            &rg,
            &ev.run,
            ev.serve_log.as_deref(),
        );
        assert_eq!(key, b.key, "{}", w.display());
        assert_eq!(bless::rate_values(&rg, &ev).len(), 6);
    }
    let ledger = ledger(&root().join("data/baselines"));
    for w in &b.manifest.windows {
        assert!(
            ledger.iter().any(|e| e.action == "baseline"
                && e.window.as_deref().is_some_and(|x| x.ends_with(w.as_str()))),
            "{w} not in the ledger"
        );
    }
}

/// A `--kind` is a plain name: one with a newline, a space, a path separator or a window's stamp is
/// refused with the rule, and nothing is written.
#[test]
fn a_kind_that_is_not_a_plain_name_is_refused_with_the_rule() {
    let t = tempfile::tempdir().unwrap();
    let gate = root().join("gates/reference-smoke.toml");
    let bl = t.path().join("baselines");
    let mut a = args(&gate, &bl);
    a.baseline = Some(RUN.into());
    a.accept = true;
    for k in [
        "ci\n2core",
        "ci 2core",
        "ci/2core",
        "..",
        "20261201T180000Z",
    ] {
        a.kind = Some(k.into());
        let e = bless::run_cli(&a, None, UTC).unwrap_err();
        assert_eq!(e.code, exit::USAGE, "{k:?}: {e}");
        assert!(e.message.contains("a --kind is a plain name"), "{e}");
        assert!(!e.message.contains('\n'), "{e}");
    }
    assert!(!bl.exists());
    // A kind named like one of the gate's windows would sit beside it: refused too.
    a.kind = None;
    bless::run_cli(&a, None, UTC).unwrap();
    a.kind = Some("reference-smoke".into());
    let e = bless::run_cli(&a, None, UTC).unwrap_err();
    assert!(e.message.contains("names a window of"), "{e}");
}

/// `run` with run.json's serve saying it was ready after `ready_ms`, peaked at `rss_mib` and spent `cpu_ms` of
/// CPU over its judged requests (03-08).
fn with_footprint(run: &Path, ready_ms: f64, rss_mib: f64, cpu_ms: f64) -> PathBuf {
    let p = run.join("run.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["serve"]["ready_ms"] = serde_json::json!(ready_ms);
    v["serve"]["footprint"] = serde_json::json!({
        "rss_peak_mib": rss_mib, "rss_bound": "exact: one process", "rss_sampled_mib": rss_mib,
        "leader_maxrss_mib": rss_mib, "processes": [{"pid": 9, "name": "llama-server", "how": "leader", "hwm_mib": rss_mib}],
        "samples": 10, "sample_every_ms": 100,
        "cpu": {"cpu_ms": cpu_ms, "wall_ms": 4000.0, "first_index": 3, "last_index": 8, "pids_start": 1, "pids_end": 1, "clk_tck": 100}
    });
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    run.to_path_buf()
}

/// `bless --limits`: each footprint limit the gate declares derived from every run given (the largest value
/// plus the headroom, rounded up), written in place with its provenance (a second bless replaces it), one
/// ledger line each; a run without the figure is refused naming the limit, the run and why, never read as 0.
#[test]
fn footprint_limits_are_derived_from_runs_written_with_provenance_and_a_missing_figure_is_refused()
{
    let (t, gate) = gate_copy();
    let text = std::fs::read_to_string(&gate).unwrap();
    let text = format!("{text}\n[assert.ready]\n# a hand note\nlimit_ms = 1\n\n[assert.memory]\nlimit_mib = 1 # trailing\n\n[assert.cpu]\nlimit_ms_per_token = 1\n");
    std::fs::write(&gate, &text).unwrap();
    let a = with_footprint(&run_copy(t.path(), "a"), 1667.7, 180.0, 600.0);
    let b = with_footprint(
        &restamped(&run_copy(t.path(), "b"), "2026-12-01T10:00:00Z"),
        2000.4,
        200.0,
        900.0,
    );
    let plan = bless::plan_limits(&gate, &[a.clone(), b.clone()], 25.0, UTC).unwrap();
    let d: Vec<(&str, f64)> = plan.derivations.iter().map(|d| (d.key, d.limit)).collect();
    // ready: 2000.4 × 1.25 = 2500.5, up to whole ms; memory 200 × 1.25; CPU per token: b's 900 ms over the
    // completion tokens of requests 03-08, × 1.25, up to 2 decimals.
    let ev = servegate::loaded::load(&b).unwrap();
    let per_token = servegate::analysis::footprint::cpu_per_token(&ev)
        .unwrap()
        .per_token;
    assert_eq!(
        d,
        [
            ("limit_ms", 2501.0),
            ("limit_mib", 250.0),
            (
                "limit_ms_per_token",
                (per_token * 1.25 * 100.0).ceil() / 100.0
            )
        ]
    );
    assert!(
        plan.new
            .contains("# a hand note\n# servegate bless 2026-12-01: limit 2501 ms from "),
        "{}",
        plan.new
    );
    assert!(
        plan.new.contains("limit_mib = 250.0 # trailing\n"),
        "{}",
        plan.new
    );
    assert!(
        plan.new.contains(
            "# servegate bless rule: largest of 2 runs 200.0 MiB plus 25 % headroom, rounded up\n"
        ),
        "{}",
        plan.new
    );
    assert_eq!(plan.ledger.len(), 3);
    assert_eq!(plan.ledger[1].previous, Some(1.0));
    // Accepted: written, one ledger line per limit; blessed again, the provenance is replaced, not stacked.
    let baselines = t.path().join("baselines");
    let mut args = args(&gate, &baselines);
    args.limits = vec![a.clone(), b.clone()];
    args.accept = true;
    let out = bless::run_cli(&args, None, UTC).unwrap();
    assert!(
        out.contains("limit [assert.cpu] limit_ms_per_token:"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&gate).unwrap(), plan.new);
    assert_eq!(ledger(&baselines).len(), 3);
    args.limits = vec![a.clone()];
    bless::run_cli(&args, None, UTC).unwrap();
    let again = std::fs::read_to_string(&gate).unwrap();
    assert_eq!(
        again.matches("# servegate bless rule: largest").count(),
        3,
        "{again}"
    );
    assert!(
        again.contains("limit_ms = 2085"),
        "1667.7 × 1.25 = 2084.6, up: {again}"
    );
    assert!(again.contains("# a hand note\n"), "{again}");
    // A run whose evidence has no footprint (written before servegate measured it) is refused, by name.
    let old = run_copy(t.path(), "old");
    let e = bless::plan_limits(&gate, &[a, old], 25.0, UTC).unwrap_err();
    assert_eq!(e.code, exit::ASSERTION_FAILED, "{e}");
    assert!(
        e.message.contains("[assert.memory] limit_mib: ")
            && e.message
                .contains("old: no peak memory: run.json has no serve.footprint"),
        "{e}"
    );
    assert!(
        !e.message.contains("[assert.ready]"),
        "the old run has a ready time: {e}"
    );
    // A gate without a footprint limit has none to derive.
    let (_t2, plain) = gate_copy();
    let e = bless::plan_limits(&plain, &[b], 25.0, UTC).unwrap_err();
    assert_eq!(e.code, exit::SPEC_INVALID, "{e}");
}
