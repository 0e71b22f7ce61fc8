//! A speed comparison compares the host's load (docs/regression.md, "Host load"), end to end through
//! `servegate judge` on crafted evidence: the five real windows of data/baselines/reference-smoke-loaded/ (runs of
//! the reference gate on the shared 2-core VM) copied into temporary baselines with the 1-minute load
//! averages of their `run.json` rewritten, and a candidate run directory (a copy of one window, its gate
//! given an `[assert.regression]` against them) at a chosen load. Nothing here is timed: the verdicts are
//! functions of the evidence.
//!
//! * same load: judged (the verdict line names both loads);
//! * loads apart past `max_load_ratio`: NOT-COMPARED (busy runner) naming both loads (exit 0 as a skipped
//!   check, 9 under SERVEGATE_STRICT=1; JUnit and the Markdown summary say why), never PASS nor FAIL. This was
//!   INCOMPARABLE-as-skip; it is its own state now, since INCOMPARABLE (the baseline no longer applies) fails;
//! * a load missing on either side (older evidence): judged as before servegate compared load;
//! * a list of a quiet and a loaded baseline: the one at the run's load is chosen;
//! * drift (answers) ignores load.

use std::path::{Path, PathBuf};

use crate::fixtures;
use crate::fixtures::copy_dir;
use crate::fixtures::root;
use servegate::evidence::baseline::{write_manifest, Manifest, BASELINE_SCHEMA};
use servegate::evidence::comparability::key_of;

/// The real windows the crafted evidence is made from.
fn real_windows() -> Vec<PathBuf> {
    let b =
        servegate::evidence::baseline::load(&root().join("data/baselines/reference-smoke-loaded"))
            .unwrap();
    b.window_dirs
}

/// Rewrites `dir`'s run.json so that its load per CPU is `per_cpu` (at the end; the start a little lower),
/// or removes both loads (None: evidence written before servegate recorded them).
fn set_load(dir: &Path, per_cpu: Option<f64>) {
    let path = dir.join("run.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cpus = v["host"]["cpus"].as_u64().unwrap() as f64;
    assert_eq!(cpus, 2.0, "the windows are from the 2-core VM");
    match per_cpu {
        Some(l) => {
            v["load_avg_start"] = serde_json::json!([l * cpus * 0.9, 1.0, 1.0]);
            v["load_avg_end"] = serde_json::json!([l * cpus, 1.0, 1.0]);
        }
        None => {
            v.as_object_mut().unwrap().remove("load_avg_start");
            v.as_object_mut().unwrap().remove("load_avg_end");
        }
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// A baseline at `dir` of the five real windows, each at load per CPU `per_cpu` (None: not stated).
fn baseline(dir: &Path, per_cpu: Option<f64>) {
    let mut names = Vec::new();
    for (i, w) in real_windows().iter().enumerate() {
        let name = format!("w{}", i + 1);
        copy_dir(w, &dir.join(&name));
        set_load(&dir.join(&name), per_cpu);
        names.push(name);
    }
    let first = dir.join("w1");
    let g = servegate::spec::load(&first.join("gate.toml")).unwrap();
    let ev = servegate::loaded::load(&first).unwrap();
    write_manifest(
        dir,
        &Manifest {
            schema: BASELINE_SCHEMA.into(),
            gate: g.name.clone(),
            kind: String::new(),
            blessed_utc: "2026-12-01T00:00:00Z".into(),
            key: key_of(&g, &ev.run),
            windows: names,
            sources: Vec::new(),
            notes: Vec::new(),
        },
    )
    .unwrap();
}

/// A candidate run directory at `dir`: a copy of the first real window at load `per_cpu`, its gate judging
/// only `[assert.regression]` (decode, max drop 40 %) against `baselines` in that order, with `extra`
/// regression keys.
fn candidate(dir: &Path, per_cpu: Option<f64>, baselines: &[&Path], extra: &str) -> PathBuf {
    copy_dir(&real_windows()[0], dir);
    set_load(dir, per_cpu);
    let path = dir.join("gate.toml");
    let mut g: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let list = baselines
        .iter()
        .map(|b| format!("{:?}", b.to_str().unwrap()))
        .collect::<Vec<_>>()
        .join(", ");
    let table: toml::Table =
        format!("metric = \"decode\"\nbaselines = [{list}]\nmax_drop_pct = 40.0\n{extra}")
            .parse()
            .unwrap();
    let mut asserts = toml::Table::new();
    asserts.insert("regression".into(), toml::Value::Table(table));
    g.insert("assert".into(), toml::Value::Table(asserts));
    std::fs::write(&path, toml::to_string(&g).unwrap()).unwrap();
    dir.to_path_buf()
}

struct Judged {
    code: i32,
    line: String,
    stdout: String,
}

/// `servegate judge RUN` (strict or not, with `[junit, summary]` report paths when given): its exit code, its
/// stdout and its `regression ` verdict line.
fn judge(run: &Path, strict: bool, extra_args: &[&Path]) -> Judged {
    judge_verdict(run, strict, extra_args, "regression ")
}

/// [`judge`], keeping the verdict line that starts with `prefix`.
fn judge_verdict(run: &Path, strict: bool, extra_args: &[&Path], prefix: &str) -> Judged {
    let mut c = fixtures::servegate();
    // Verdict lines whole (the console shortens them to 300 characters; details are asserted).
    c.env("SERVEGATE_VERBOSE", "1");
    c.arg("judge").arg(run);
    if let [junit, summary] = extra_args {
        c.arg("--junit").arg(junit).arg("--summary").arg(summary);
    }
    c.env_remove("SERVEGATE_JUNIT")
        .env_remove("SERVEGATE_JSON")
        .env_remove("SERVEGATE_SUMMARY")
        .env_remove("GITHUB_ACTIONS");
    if strict {
        c.env("SERVEGATE_STRICT", "1");
    } else {
        c.env_remove("SERVEGATE_STRICT");
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| {
            panic!(
                "no {prefix}line: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_string();
    Judged {
        code: out.status.code().unwrap_or(-1),
        line,
        stdout,
    }
}

#[test]
fn the_same_load_is_judged_and_the_line_shows_both_loads() {
    let t = tempfile::tempdir().unwrap();
    let quiet = t.path().join("baselines/quiet");
    baseline(&quiet, Some(0.5));
    let run = candidate(&t.path().join("run"), Some(0.8), &[&quiet], "");
    let j = judge(&run, false, &[]);
    // The candidate is one of the baseline's own windows: no regression.
    assert!(
        j.line.starts_with("regression PASS decode median "),
        "{}",
        j.line
    );
    assert!(
        j.line
            .contains("(5 windows, host load 0.8 per CPU at this run vs 0.5 at the baseline, "),
        "{}",
        j.line
    );
    assert_eq!(j.code, 0, "{}", j.stdout);
}

#[test]
fn loads_apart_past_the_bound_are_not_compared_naming_both_never_pass_or_fail() {
    let t = tempfile::tempdir().unwrap();
    let quiet = t.path().join("baselines/quiet");
    baseline(&quiet, Some(0.5));
    let run = candidate(&t.path().join("run"), Some(7.9), &[&quiet], "");
    let (junit, summary) = (t.path().join("junit.xml"), t.path().join("summary.md"));
    let j = judge(&run, false, &[&junit, &summary]);
    let why = "host load 7.9 per CPU at this run vs 0.5 at the baseline: 7.9x apart (a load per CPU below 1 counts as 1), bound 1.5x (max_load_ratio)";
    assert!(
        j.line.starts_with("regression NOT-COMPARED busy runner: "),
        "{}",
        j.line
    );
    assert!(j.line.contains(why), "{}", j.line);
    assert!(j.line.contains("baselines/quiet"), "{}", j.line);
    // Skipped with its reason (docs/ci.md), not a pass: the JUnit case and the summary say why.
    assert_eq!(j.code, 0, "{}", j.stdout);
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(
        x.contains("host load 7.9 per CPU at this run vs 0.5 at the baseline"),
        "{x}"
    );
    assert!(
        x.contains("<skipped message=\"[not compared: busy runner] "),
        "{x}"
    );
    let m = std::fs::read_to_string(&summary).unwrap();
    assert!(m.contains("NOT COMPARED"), "{m}");
    assert!(m.contains("host load 7.9 per CPU"), "{m}");
    let j = judge(&run, true, &[]);
    assert_eq!(j.code, 9, "SERVEGATE_STRICT=1: {}", j.stdout);

    // The other way round (a quiet run against a loaded baseline), and a bound a gate widened.
    let loaded = t.path().join("baselines/loaded");
    baseline(&loaded, Some(8.0));
    let run = candidate(&t.path().join("run2"), Some(0.6), &[&loaded], "");
    let j = judge(&run, false, &[]);
    assert!(j.line.starts_with("regression NOT-COMPARED "), "{}", j.line);
    assert!(
        j.line
            .contains("host load 0.6 per CPU at this run vs 8.0 at the baseline: 8.0x apart"),
        "{}",
        j.line
    );
    let run = candidate(
        &t.path().join("run3"),
        Some(0.6),
        &[&loaded],
        "max_load_ratio = 10.0\n",
    );
    let j = judge(&run, false, &[]);
    assert!(
        !j.line.starts_with("regression NOT-COMPARED "),
        "{}",
        j.line
    );
}

#[test]
fn a_load_missing_on_either_side_is_judged_as_before() {
    let t = tempfile::tempdir().unwrap();
    let old = t.path().join("baselines/old");
    baseline(&old, None);
    let run = candidate(&t.path().join("run"), Some(7.9), &[&old], "");
    let j = judge(&run, false, &[]);
    assert!(j.line.starts_with("regression PASS "), "{}", j.line);
    assert!(!j.line.contains("host load"), "{}", j.line);
    let quiet = t.path().join("baselines/quiet");
    baseline(&quiet, Some(0.5));
    let run = candidate(&t.path().join("run2"), None, &[&quiet], "");
    let j = judge(&run, false, &[]);
    assert!(j.line.starts_with("regression PASS "), "{}", j.line);
}

#[test]
fn a_list_of_a_quiet_and_a_loaded_baseline_picks_the_one_at_the_runs_load() {
    let t = tempfile::tempdir().unwrap();
    let quiet = t.path().join("baselines/quiet");
    let loaded = t.path().join("baselines/loaded");
    baseline(&quiet, Some(0.5));
    baseline(&loaded, Some(8.0));
    for (name, load, chosen) in [
        ("q", 0.7, &quiet),
        ("l", 7.5, &loaded),
        ("l2", 9.0, &loaded),
    ] {
        let run = candidate(&t.path().join(name), Some(load), &[&quiet, &loaded], "");
        let j = judge(&run, false, &[]);
        assert!(j.line.starts_with("regression PASS "), "{}", j.line);
        assert!(
            j.line
                .contains(&format!("stored baseline {} (", chosen.display())),
            "{load}: {}",
            j.line
        );
    }
    // Between the two: compared with neither (busy runner), both named.
    let run = candidate(&t.path().join("mid"), Some(3.0), &[&quiet, &loaded], "");
    let j = judge(&run, false, &[]);
    assert!(j.line.starts_with("regression NOT-COMPARED "), "{}", j.line);
    assert!(
        j.line
            .contains("host load 3.0 per CPU at this run vs 0.5 at the baseline")
            && j.line
                .contains("host load 3.0 per CPU at this run vs 8.0 at the baseline"),
        "{}",
        j.line
    );
}

#[test]
fn drift_compares_answers_whatever_the_load() {
    let t = tempfile::tempdir().unwrap();
    let src = root().join("data/baselines/reference-smoke-drift");
    let b = servegate::evidence::baseline::load(&src).unwrap();
    let base = t.path().join("baselines/drift");
    copy_dir(&src, &base);
    for w in &b.manifest.windows {
        set_load(&base.join(w), Some(0.5));
    }
    let run = t.path().join("run");
    copy_dir(&b.window_dirs[0], &run);
    set_load(&run, Some(9.0));
    let path = run.join("gate.toml");
    let mut g: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let drift = g["assert"]["drift"].clone();
    let mut drift = drift.as_table().unwrap().clone();
    drift.insert(
        "baseline".into(),
        toml::Value::String(base.to_str().unwrap().into()),
    );
    let mut asserts = toml::Table::new();
    asserts.insert("drift".into(), toml::Value::Table(drift));
    g.insert("assert".into(), toml::Value::Table(asserts));
    std::fs::write(&path, toml::to_string(&g).unwrap()).unwrap();
    let line = judge_verdict(&run, false, &[], "drift ").line;
    assert!(line.starts_with("drift PASS "), "{line}");
    assert!(!line.contains("host load"), "{line}");
}

#[test]
fn bless_adds_a_window_at_the_baselines_load_and_refuses_one_at_another() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("baselines");
    let gate = root().join("gates/reference-smoke.toml");
    let bless = |run: &Path| {
        fixtures::servegate()
            .env("SERVEGATE_VERBOSE", "1")
            .arg("bless")
            .arg(&gate)
            .arg("--baseline")
            .arg(run)
            .arg("--baselines-dir")
            .arg(&dir)
            .arg("--accept")
            .env_remove("CI")
            .output()
            .unwrap()
    };
    let windows = real_windows();
    for (i, load) in [(0, 0.8), (1, 1.2), (2, 8.0)] {
        let run = t.path().join(format!("run{i}"));
        copy_dir(&windows[i], &run);
        set_load(&run, Some(load));
        let out = bless(&run);
        let err = String::from_utf8_lossy(&out.stderr);
        if load < 2.0 {
            assert_eq!(out.status.code(), Some(0), "{err}");
        } else {
            assert_eq!(out.status.code(), Some(9), "{err}");
            assert!(
                err.contains(
                    "host load 8.0 per CPU at this run vs 1.0 at the baseline: 8.0x apart"
                ),
                "{err}"
            );
        }
    }
    let b = servegate::evidence::baseline::load(&dir.join("reference-smoke")).unwrap();
    assert_eq!(b.window_dirs.len(), 2);
}
