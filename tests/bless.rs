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
use std::process::Command;

use servegate::error::exit;
use servegate::evidence::baseline;
use servegate::records::bless::{self, BlessArgs, LedgerEntry};

const BIN: &str = env!("CARGO_BIN_EXE_servegate");
/// Relative to the crate root (the tests' working directory), so the provenance comment is stable.
const RUN: &str = "tests/data/replay/reference-smoke";
const UTC: &str = "2026-12-01T11:00:00Z";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A temp dir holding a copy of tests/data/bless/reference-smoke.toml (gates/reference-smoke.toml as of
/// 2026-12-01, frozen so that edits to the live gate do not move the snapshots).
fn gate_copy() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let g = t.path().join("reference-smoke.toml");
    std::fs::copy(root().join("tests/data/bless/reference-smoke.toml"), &g).unwrap();
    (t, g)
}

/// A copy of the recorded run in `dir/name`, for tests that spoil it.
fn run_copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(root().join(RUN)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

/// `run` with run.json's `started_utc` set to `utc`: another run of the same gate, machine and load (its own
/// identity), for tests that need several.
fn restamped(run: &Path, utc: &str) -> PathBuf {
    let p = run.join("run.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["started_utc"] = serde_json::json!(utc);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    run.to_path_buf()
}

fn args(gate: &Path, baselines: &Path) -> BlessArgs {
    BlessArgs {
        gate: gate.to_path_buf(),
        baseline: None,
        kind: None,
        floor: None,
        slow: None,
        headroom_pct: bless::DEFAULT_HEADROOM_PCT,
        confidence: bless::DEFAULT_CONFIDENCE,
        baselines_dir: baselines.to_path_buf(),
        accept: false,
        force: false,
    }
}

fn ledger(baselines: &Path) -> Vec<LedgerEntry> {
    std::fs::read_to_string(baselines.join(bless::LEDGER_FILE))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
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
        let ev = servegate::analysis::load(w).unwrap();
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
            .contains("the run is incomplete (run.json status Interrupted)"),
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
    let ev = servegate::analysis::load(&slow).unwrap();
    assert_eq!(bless::refusals(&rg, &ev, true), Vec::<String>::new());
    std::fs::write(
        &g,
        strict.replace(
            "floor_tok_s = 1000.0",
            "floor_tok_s = 1000.0\nsource = \"both\"\nagree_pct = 0.01",
        ),
    )
    .unwrap();
    let rg = servegate::spec::load(&g).unwrap();
    let why = bless::refusals(&rg, &ev, true);
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

#[test]
fn bless_never_writes_in_ci_unless_forced() {
    let (t, gate) = gate_copy();
    let before = std::fs::read_to_string(&gate).unwrap();
    let bl = t.path().join("baselines");
    let run = |extra: &[&str], ci: Option<&str>| {
        let mut c = Command::new(BIN);
        c.current_dir(root())
            .args(["bless"])
            .arg(&gate)
            .args(["--floor", RUN, "--baselines-dir"])
            .arg(&bl)
            .args(extra);
        match ci {
            Some(v) => c.env("CI", v),
            None => c.env_remove("CI"),
        };
        let o = c.output().unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&["--accept"], Some("true"));
    assert_eq!(code, exit::USAGE, "{err}");
    assert!(err.contains("never writes in CI"), "{err}");
    assert_eq!(std::fs::read_to_string(&gate).unwrap(), before);
    // Showing the diff is fine in CI.
    let (code, out, _) = run(&[], Some("true"));
    assert_eq!(code, 0);
    assert!(out.contains("+floor_tok_s = 16.6"), "{out}");
    assert!(out.contains("not written"), "{out}");
    let (code, out, err) = run(&["--accept", "--force"], Some("true"));
    assert_eq!(code, 0, "{out}{err}");
    assert_ne!(std::fs::read_to_string(&gate).unwrap(), before);
    assert_eq!(ledger(&bl).len(), 1);
}

/// The committed baselines of the reference gate (baselines/reference-smoke/, blessed from quiet runs, and
/// baselines/reference-smoke-loaded/, from runs at a load of 7-9 per CPU; docs/bless.md) are whole: every
/// window is a run directory that still passes what bless demands, all share the manifest's key, their
/// windows' host loads are comparable among themselves, and the ledger names each window.
#[test]
fn the_committed_reference_baseline_is_whole_and_good() {
    for name in ["reference-smoke", "reference-smoke-loaded"] {
        committed_reference_baseline_is_whole(&root().join("baselines").join(name));
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
        let ev = servegate::analysis::load(w).unwrap();
        let rg = servegate::spec::load(&w.join("gate.toml")).unwrap();
        assert_eq!(rg.name, gate.name);
        assert_eq!(
            bless::refusals(&rg, &ev, true),
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
    let ledger = ledger(&root().join("baselines"));
    for w in &b.manifest.windows {
        assert!(
            ledger.iter().any(|e| e.action == "baseline"
                && e.window.as_deref().is_some_and(|x| x.ends_with(w.as_str()))),
            "{w} not in the ledger"
        );
    }
}

/// A temp dir holding tests/data/repro/bless/bless-base.toml, its serve crashy.py (the one copy, in
/// tests/data/repro/records/) and a throw-away model.gguf.
fn repro_scratch() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for (dir, f) in [("records", "crashy.py"), ("bless", "bless-base.toml")] {
        std::fs::copy(
            root().join("tests/data/repro").join(dir).join(f),
            t.path().join(f),
        )
        .unwrap();
    }
    std::fs::write(t.path().join("model.gguf"), b"model\n").unwrap();
    t
}

struct Out {
    code: i32,
    all: String,
}

/// `servegate ARGS` in `dir`, with `SERVEGATE_RUNS` there and no CI or report variables.
fn sg(dir: &Path, args: &[&str]) -> Out {
    let o = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env("SERVEGATE_RUNS", dir.join("runs"))
        .env_remove("CI")
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .output()
        .unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        all: format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

/// The one run directory of gate `gate` under `dir/runs`.
fn only_run(dir: &Path, gate: &str) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs").join(gate))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.into_iter().next().unwrap()
}

/// bless-crashed-run.sh: the serve exits 139 right after its last reply. run.json says `complete` with
/// `serve.failure` set; neither a floor nor a baseline window is taken from it, and nothing is written.
#[test]
fn a_run_whose_serve_crashed_after_its_last_reply_is_not_blessed() {
    let t = repro_scratch();
    let base = std::fs::read_to_string(t.path().join("bless-base.toml")).unwrap();
    let gate = base
        .replace(r#"mode = "--cut""#, r#"mode = "--die-after""#)
        .replace(r#"k = "3""#, r#"k = "6""#);
    std::fs::write(t.path().join("g.toml"), &gate).unwrap();
    let run = sg(t.path(), &["run", "-q", "g.toml"]);
    assert_eq!(run.code, 1, "{}", run.all);
    let dir = only_run(t.path(), "cutg");
    let rj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(rj["status"], "complete", "{rj}");
    assert!(
        rj["serve"]["failure"]
            .as_str()
            .is_some_and(|f| f.contains("139")),
        "{rj}"
    );
    let d = dir.to_str().unwrap();
    for what in ["--floor", "--baseline"] {
        let o = sg(t.path(), &["bless", "g.toml", what, d, "--accept"]);
        assert_eq!(o.code, exit::ASSERTION_FAILED, "{what}: {}", o.all);
        assert!(
            o.all
                .contains("the serve failed during the run (serve.failure: "),
            "{what}: {}",
            o.all
        );
        // Its rate trial fails for the same cause: said once.
        assert_eq!(
            o.all.matches("the serve failed during the run").count(),
            1,
            "{}",
            o.all
        );
    }
    assert_eq!(
        std::fs::read_to_string(t.path().join("g.toml")).unwrap(),
        gate
    );
    assert!(!t.path().join("baselines").exists());
}

/// bless-inline-table.sh: `rate = { floor_tok_s = 5.0 }` under `[assert]`. The blessed gate still parses
/// (`servegate check`), the floor is the derived one, and a byte diff touches only the floor's line and the
/// two provenance lines above it; a CRLF copy stays CRLF, and a person's comment that starts like the
/// provenance is kept.
#[test]
fn blessing_a_floor_in_an_inline_table_keeps_the_gate_valid_and_its_bytes() {
    let t = repro_scratch();
    let base = std::fs::read_to_string(t.path().join("bless-base.toml")).unwrap();
    let mut gate = base.replace(r#"k = "3""#, r#"k = "99""#);
    gate.truncate(gate.find("[assert.rate]").unwrap());
    gate.push_str("[assert]\n# servegate bless: keep it above 4 (a note of mine)\nrate = { floor_tok_s = 5.0 }  # inline\n");
    let g = t.path().join("g.toml");
    std::fs::write(&g, &gate).unwrap();
    let crlf = t.path().join("crlf.toml");
    std::fs::write(&crlf, gate.replace('\n', "\r\n")).unwrap();
    assert_eq!(sg(t.path(), &["check", "g.toml"]).code, 0);
    let run = sg(t.path(), &["run", "-q", "g.toml"]);
    assert_eq!(run.code, 0, "{}", run.all);
    let dir = only_run(t.path(), "cutg");
    let d = dir.to_str().unwrap();
    for (file, eol) in [("g.toml", "\n"), ("crlf.toml", "\r\n")] {
        let path = t.path().join(file);
        let before = std::fs::read(&path).unwrap();
        let o = sg(t.path(), &["bless", file, "--floor", d, "--accept"]);
        assert_eq!(o.code, 0, "{file}: {}", o.all);
        let after = std::fs::read(&path).unwrap();
        let c = sg(t.path(), &["check", file]);
        assert_eq!(c.code, 0, "{file}: {}", c.all);
        let floor = servegate::spec::load(&path)
            .unwrap()
            .assertions
            .rate
            .unwrap()
            .floor_tok_s;
        let l = ledger(&t.path().join("baselines"));
        assert_eq!(l.last().unwrap().value, Some(floor));
        assert_eq!(l.last().unwrap().previous, Some(5.0));
        // Byte diff: the lines of the file before are all there, in order, but the floor's; the new lines
        // are the two provenance lines and the floor's line, with the file's line ending.
        let lines = |b: &[u8]| -> Vec<Vec<u8>> {
            b.split_inclusive(|c| *c == b'\n')
                .map(<[u8]>::to_vec)
                .collect()
        };
        let (old, new) = (lines(&before), lines(&after));
        let added: Vec<String> = new
            .iter()
            .filter(|l| !old.contains(l))
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        assert_eq!(added.len(), 3, "{file}: {added:?}");
        assert!(
            added[0].starts_with("# servegate bless 20")
                && added[1].starts_with("# servegate bless rule: "),
            "{added:?}"
        );
        assert_eq!(
            added[2],
            format!("rate = {{ floor_tok_s = {floor:.1} }}  # inline{eol}")
        );
        assert!(added
            .iter()
            .all(|l| l.ends_with(eol) && !l[..l.len() - eol.len()].contains('\r')));
        let kept: Vec<&Vec<u8>> = new.iter().filter(|l| old.contains(l)).collect();
        let old_kept: Vec<&Vec<u8>> = old.iter().filter(|l| !l.starts_with(b"rate = ")).collect();
        assert_eq!(kept, old_kept, "{file}");
        let text = String::from_utf8(after).unwrap();
        assert!(text.contains(&format!(
            "# servegate bless: keep it above 4 (a note of mine){eol}"
        )));
        // Blessed again: the provenance is replaced, the person's comment stays.
        let o = sg(t.path(), &["bless", file, "--floor", d, "--accept"]);
        assert_eq!(o.code, 0, "{}", o.all);
        let again = std::fs::read_to_string(&path).unwrap();
        assert_eq!(again.lines().count(), text.lines().count(), "{again}");
        assert_eq!(again.matches("# servegate bless 20").count(), 1, "{again}");
        assert!(again.contains("# servegate bless: keep it above 4 (a note of mine)"));
    }
}

/// bless-concurrent.sh: five `bless --baseline --accept` at once into one baseline, four distinct runs and a
/// copy of one of them. Every distinct run lands as a window in the manifest and as a ledger line (one lock
/// for the baseline and the ledger, each writer planning again under it); the copy is refused as already
/// blessed, whichever of the two came first.
#[test]
fn concurrent_blesses_into_one_baseline_all_land() {
    let t = tempfile::tempdir().unwrap();
    let runs = t.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let mut dirs: Vec<PathBuf> = (1..=4)
        .map(|i| {
            restamped(
                &run_copy(&runs, &format!("w{i}")),
                &format!("2026-11-29T19:0{i}:00Z"),
            )
        })
        .collect();
    dirs.push(restamped(
        &run_copy(&runs, "w1-copy"),
        "2026-11-29T19:01:00Z",
    ));
    let bl = t.path().join("baselines");
    let children: Vec<_> = dirs
        .iter()
        .map(|d| {
            Command::new(BIN)
                .current_dir(root())
                .args(["bless", "gates/reference-smoke.toml", "--baseline"])
                .arg(d)
                .args(["--kind", "race", "--accept", "--baselines-dir"])
                .arg(&bl)
                .env_remove("CI")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap()).collect();
    let text: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert_eq!(codes[1..4], [0, 0, 0], "{text:?}");
    // w1 and its copy: one landed, the other was refused as the same run.
    let mut pair = [codes[0], codes[4]];
    pair.sort();
    assert_eq!(pair, [0, exit::ASSERTION_FAILED], "{text:?}");
    assert!(
        text.iter().any(|t| t.contains("one run is one window")),
        "{text:?}"
    );
    let b = baseline::load(&bl.join("reference-smoke").join("race")).unwrap();
    let mut w = b.manifest.windows.clone();
    w.sort();
    assert_eq!(w.len(), 4, "{w:?}");
    assert!(
        w[1..] == ["w2", "w3", "w4"] && ["w1", "w1-copy"].contains(&w[0].as_str()),
        "{w:?}"
    );
    assert_eq!(b.manifest.sources.len(), 4);
    let dirs_on_disk = std::fs::read_dir(bl.join("reference-smoke").join("race"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(dirs_on_disk, 4);
    let l = ledger(&bl);
    assert_eq!(l.len(), 4, "{l:?}");
    let mut lw: Vec<String> = l
        .iter()
        .map(|e| {
            e.window
                .clone()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    lw.sort();
    assert_eq!(lw, w);
    // The lock's holder note is gone once every writer is done.
    assert!(!bl.join(".bless.lock.holder").exists());
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
