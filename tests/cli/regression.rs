//! `[assert.regression]` end to end against a stored baseline, through the real runner path (`servegate run`,
//! which loads the baseline with `loaded::regression_input` and judges with
//! `judge::judge_with`), with `servegate replay` of the real recorded reference run in tests/data/replay/ as the
//! serve:
//! * the baseline is four windows, each a replay of the recording at its own speed (a quiet machine: the replay
//!   reproduces the recorded decode windows to a few ms), blessed into a temporary `baselines/` directory
//!   with its comparability key (`evidence::baseline::write_manifest`);
//! * the recording replayed at the same speed PASSes; slowed by 30 % (`--speed 0.7`) FAILs with the size;
//!   3 % slower (`--speed 0.97`) with δ = 5 % PASSes; one request against one per window (2 vs 2) says the
//!   confidence is unattainable.
//!
//! The four windows run side by side, then the three candidates side by side, with no warmup round (see the
//! test): 44-45 s measured at load 4-5 on the shared 2-core machine, against 145-181 s one run after another
//! with a warmup each, with the same assertions (the intervals stayed within ±1 % of the speed asked).
//!
//! The gate keeps the two long prompts of the recording (64-token replies, decode windows of 1.3-3.5 s): the
//! 8-token "Paris" reply's window is ~140 ms, where the replay's wake-up jitter under load (up to ~18 ms,
//! tests/cli/replay.rs) would be several percent of the rate, the size of the change this test resolves. Timing
//! decides only how far inside its band a figure lands: the bands (−30 %, −3 % against δ = 5 %) are wide
//! against the replay's jitter on these windows (below 1 %).

use std::path::{Path, PathBuf};

use crate::fixtures;
use crate::fixtures::copy_dir;
use crate::fixtures::replay::set_command;
use crate::fixtures::BIN;
use servegate::evidence::baseline::{write_manifest, Manifest, BASELINE_SCHEMA};
use servegate::evidence::comparability::key_of;

fn recording() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/replay/reference-smoke")
}

const LONG_PROMPTS: [&str; 2] = [
    "Explain in three sentences why the sky is blue.",
    "Write a short poem about a river.",
];

/// The recording's gate with its serve replaced by `servegate replay --cycle --speed S`, the two long
/// prompts (`prompts`), `warmup` rounds and `repeats`, only `[assert.content]`, and `[assert.regression]`
/// against `baseline` when given.
fn gate(
    dir: &Path,
    name: &str,
    speed: f64,
    prompts: &[&str],
    warmup: i64,
    repeats: i64,
    baseline: Option<(&Path, f64)>,
) -> PathBuf {
    let original = std::fs::read_to_string(recording().join("gate.toml")).unwrap();
    let mut g: toml::Table = original.parse().unwrap();
    g.remove("requires");
    g.remove("record");
    let serve = g["serve"].as_table_mut().unwrap();
    serve.remove("setup");
    let rec = recording();
    let command = [
        BIN,
        "replay",
        rec.to_str().unwrap(),
        "--port",
        "{port}",
        "--cycle",
        "--speed",
        &speed.to_string(),
    ];
    set_command(serve, &command);
    let request = g["request"].as_table_mut().unwrap();
    request.insert(
        "prompts".into(),
        toml::Value::Array(
            prompts
                .iter()
                .map(|p| toml::Value::String(p.to_string()))
                .collect(),
        ),
    );
    request.insert("warmup".into(), toml::Value::Integer(warmup));
    request.insert("repeats".into(), toml::Value::Integer(repeats));
    let mut asserts = toml::Table::new();
    asserts.insert("content".into(), toml::Value::Table(toml::Table::new()));
    if let Some((b, drop)) = baseline {
        let mut r = toml::Table::new();
        r.insert("metric".into(), toml::Value::String("decode".into()));
        r.insert(
            "baseline".into(),
            toml::Value::String(b.to_str().unwrap().into()),
        );
        r.insert("max_drop_pct".into(), toml::Value::Float(drop));
        // The windows and the candidate run minutes apart on a shared machine whose load moves: this test is
        // about the interval, not the host-load rule (tests/cli/regression_load.rs), so loads never part them.
        r.insert("max_load_ratio".into(), toml::Value::Float(1000.0));
        asserts.insert("regression".into(), toml::Value::Table(r));
    }
    g.insert("assert".into(), toml::Value::Table(asserts));
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml::to_string(&g).unwrap()).unwrap();
    path
}

struct Run {
    code: i32,
    stdout: String,
    evidence: PathBuf,
}

fn run(gate: &Path, runs: &Path) -> Run {
    let out = fixtures::servegate()
        // Verdict lines whole (the console shortens them to 300 characters; the details are asserted here).
        .env("SERVEGATE_VERBOSE", "1")
        .arg("run")
        .arg(gate)
        .arg("--runs")
        .arg(runs)
        .arg("--quiet")
        .env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .env_remove("SERVEGATE_STRICT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let evidence = fixtures::evidence_dir(&stdout);
    assert!(
        evidence.is_dir(),
        "no evidence: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout,
        evidence,
    }
}

/// Blesses `windows` (run directories) into `dir` as a baseline, keyed as the first window.
fn bless(dir: &Path, windows: &[&Path]) {
    let first = windows[0];
    let g = servegate::spec::load(&first.join("gate.toml")).unwrap();
    let ev = servegate::loaded::load(first).unwrap();
    let mut names = Vec::new();
    for (i, w) in windows.iter().enumerate() {
        let name = format!("w{}", i + 1);
        copy_dir(w, &dir.join(&name));
        names.push(name);
    }
    write_manifest(
        dir,
        &Manifest {
            schema: BASELINE_SCHEMA.into(),
            gate: g.name.clone(),
            kind: "test: replay of the recorded reference run".into(),
            blessed_utc: "2026-12-01T00:00:00Z".into(),
            key: key_of(&g, &ev.run),
            windows: names,
            sources: windows.iter().map(|w| w.display().to_string()).collect(),
            notes: Vec::new(),
        },
    )
    .unwrap();
}

fn regression_line(r: &Run) -> String {
    r.stdout
        .lines()
        .find(|l| l.starts_with("regression "))
        .unwrap_or_else(|| panic!("no regression line: {}", r.stdout))
        .to_string()
}

/// Runs each gate of `gates` side by side (each its own `servegate run` and replay serve), in `runs`.
///
/// The replay paces every write against an absolute schedule from the request's arrival and spends its time
/// asleep: runs side by side do not slow each other beyond the wake-up jitter the bands allow for, and the
/// test takes the time of its slowest run instead of their sum.
fn runs_side_by_side(gates: &[&Path], runs: &Path) -> Vec<Run> {
    std::thread::scope(|s| {
        let handles: Vec<_> = gates.iter().map(|g| s.spawn(|| run(g, runs))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// No warmup round: the replay has nothing to warm, and the recording holds three replies per prompt (its
/// warmup round and two repeats), so three repeats with `--cycle` measure the same three recorded replies
/// with or without a warmup (one round, a quarter of each run, saved).
#[test]
fn replayed_baseline_same_speed_passes_slower_by_30_percent_fails_with_its_size_3_percent_passes() {
    let t = tempfile::tempdir().unwrap();
    let runs = t.path().join("runs");
    let window_gate = gate(t.path(), "window", 1.0, &LONG_PROMPTS, 0, 3, None);
    // The four windows side by side, blessed; then the three candidates side by side.
    let blessed = |name: &str| {
        let windows = runs_side_by_side(&[window_gate.as_path(); 4], &runs);
        for w in &windows {
            assert_eq!(w.code, 0, "{}", w.stdout);
        }
        let base = t.path().join("baselines").join(name);
        let evidence: Vec<&Path> = windows.iter().map(|w| w.evidence.as_path()).collect();
        bless(&base, &evidence);
        base
    };
    // The same speed must PASS and 30 % slower FAIL; on a machine so busy that the replay's jitter makes
    // the baseline's between-window allowance as wide as the margin (measured: ±19.2 % at 8 load per CPU,
    // the whole cli tier at eight threads beside it), either can be an honest INDETERMINATE. Then the whole
    // scenario runs once more from fresh windows; still INDETERMINATE on a machine over 2 load per CPU is
    // printed and the test ends there (never a wrong-direction verdict, which fails at once); on a quieter
    // machine it fails.
    let mut base = blessed("reference-smoke");
    let mut attempt = 1;
    let (same, slow, little) = loop {
        let against = Some((base.as_path(), 5.0));
        let name = |n: &str| format!("{n}-{attempt}");
        let same_gate = gate(t.path(), &name("same"), 1.0, &LONG_PROMPTS, 0, 3, against);
        let slow_gate = gate(t.path(), &name("slow"), 0.7, &LONG_PROMPTS, 0, 3, against);
        let little_gate = gate(
            t.path(),
            &name("little"),
            0.97,
            &LONG_PROMPTS,
            0,
            3,
            against,
        );
        let mut c = runs_side_by_side(&[same_gate.as_path(), &slow_gate, &little_gate], &runs);
        let (little, slow, same) = (c.pop().unwrap(), c.pop().unwrap(), c.pop().unwrap());
        for (name, r) in [("same", &same), ("slow", &slow), ("little", &little)] {
            eprintln!("{name}: {}", regression_line(r)); // the margins, for a failure's report
        }
        let noisy = [&same, &slow]
            .iter()
            .any(|r| regression_line(r).starts_with("regression INDETERMINATE "));
        if !noisy {
            break (same, slow, little);
        }
        let load = crate::fixtures::load_per_cpu();
        if attempt == 2 {
            assert!(
                load > crate::fixtures::BUSY_PER_CPU,
                "INDETERMINATE twice on a machine not busy (load {load:.1} per CPU)"
            );
            eprintln!("NOT ASSERTED: the regression verdicts stayed INDETERMINATE at load {load:.1} per CPU (the baseline's own spread as wide as the margin)");
            return;
        }
        attempt += 1;
        base = blessed(&format!("reference-smoke-{attempt}"));
    };
    let line = regression_line(&same);
    assert!(line.starts_with("regression PASS decode median "), "{line}");
    assert!(
        line.contains("; max drop 5 %; n=6 vs 24); no regression beyond -5.0 %"),
        "{line}"
    );
    assert!(line.contains("matched by prompt"), "{line}");
    assert_eq!(same.code, 0, "{}", same.stdout);

    let line = regression_line(&slow);
    assert!(line.starts_with("regression FAIL decode median "), "{line}");
    let size: f64 = line
        .split("a regression of ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no size: {line}"));
    assert!((28.0..=32.0).contains(&size), "{line}");
    assert_eq!(slow.code, 1, "{}", slow.stdout);

    // 3 % slower against δ = 5 %: the interval must clear -5 %, a margin of 2 % that the replay's jitter
    // under a heavy load (load average 12-14 seen here) can eat into, through the candidate's spread or the
    // baseline's between-window allowance (±2.3 % once, with the whole cli tier and two busy loops beside
    // it: "the between-window allowance alone reaches the limit"); so an INDETERMINATE is run once more,
    // from four fresh windows, blessed, then the candidate alone. Never a FAIL: that would be a wrong verdict,
    // not jitter. Still INDETERMINATE after the retry (seen at load 10 on 2 cores: allowance ±2.6 %, "the
    // between-window allowance alone reaches the limit") is the honest verdict of a machine that noisy, so
    // it is accepted with its reason; either way the size must be read right (-2 to -4 %). PASS at the
    // same margin is asserted by `same`, FAIL by `slow`.
    let mut line = regression_line(&little);
    if line.starts_with("regression INDETERMINATE ") {
        eprintln!("retrying once, from fresh windows: {line}");
        let base = blessed("reference-smoke-again");
        let again = gate(
            t.path(),
            "little-again",
            0.97,
            &LONG_PROMPTS,
            0,
            3,
            Some((base.as_path(), 5.0)),
        );
        line = regression_line(&run(&again, &runs));
    }
    assert!(
        line.starts_with("regression PASS decode median ")
            || (line.starts_with("regression INDETERMINATE decode median ")
                && line.contains("the interval straddles -5.0 %")),
        "{line}"
    );
    let change: f64 = line
        .split(" tok/s (")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no change: {line}"));
    assert!((-4.0..=-2.0).contains(&change), "{line}");
}

#[test]
fn two_against_two_says_the_confidence_is_unattainable() {
    let t = tempfile::tempdir().unwrap();
    let runs = t.path().join("runs");
    let one = &LONG_PROMPTS[..1];
    let window_gate = gate(t.path(), "window", 4.0, one, 0, 1, None);
    let w1 = run(&window_gate, &runs);
    let w2 = run(&window_gate, &runs);
    let base = t.path().join("baselines/two");
    bless(&base, &[&w1.evidence, &w2.evidence]);
    let cand = run(
        &gate(t.path(), "cand", 4.0, one, 0, 2, Some((&base, 5.0))),
        &runs,
    );
    let line = regression_line(&cand);
    assert!(
        line.contains("confidence 0.95 unattainable with n=2 vs 2: needs 4 per side"),
        "{line}"
    );
    assert!(line.starts_with("regression INDETERMINATE "), "{line}");
    assert_ne!(
        cand.code, 0,
        "indeterminate fails by default: {}",
        cand.stdout
    );
}
