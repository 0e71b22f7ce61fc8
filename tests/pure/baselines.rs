//! Every committed baseline (`data/baselines/`) is readable by the one path rule and loader of stored baselines
//! (`evidence::baseline::resolve` / `load_named_with`), from the gate that names it and from that gate's copy
//! in a run directory (re-judging), for `[assert.regression]` and `[assert.drift]` alike.

use std::path::{Path, PathBuf};

use servegate::spec::RegressionBaseline;

fn named_baselines() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("gates").unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let Ok(gates) = servegate::spec::matrix::load_all(&path) else {
            continue;
        };
        for g in gates {
            if let Some(r) = &g.assertions.regression {
                if let RegressionBaseline::Stored(dirs) = &r.baseline {
                    out.extend(dirs.iter().map(|d| (g.file.clone(), d.clone())));
                }
            }
            if let Some(d) = &g.assertions.drift {
                out.extend(
                    d.baselines
                        .iter()
                        .map(|b| (g.file.clone(), PathBuf::from(b))),
                );
            }
        }
    }
    out
}

#[test]
fn every_committed_baseline_a_gate_names_loads_from_the_gate_and_from_its_run_dir_copy() {
    let named = named_baselines();
    assert!(
        named.len() >= 2,
        "the reference gates name stored baselines: {named:?}"
    );
    let mut dirs_seen = std::collections::BTreeSet::new();
    for (gate, path) in &named {
        let copy = Path::new("target/servegate/runs/x/20261201T000000Z/gate.toml");
        for g in [gate.as_path(), copy] {
            let b = servegate::loaded::load_baseline(g, path)
                .unwrap_or_else(|e| panic!("{} named by {}: {e}", path.display(), g.display()));
            assert!(!b.windows.is_empty());
            assert!(b.windows.iter().all(|w| !w.requests.is_empty()));
            dirs_seen.insert(b.baseline.dir.canonicalize().unwrap());
        }
    }
    // Every committed baseline directory (one with a baseline.json) is one a gate names.
    for e in std::fs::read_dir("data/baselines").unwrap() {
        let d = e.unwrap().path();
        if d.join("baseline.json").is_file() {
            assert!(
                dirs_seen.contains(&d.canonicalize().unwrap()),
                "{} is named by no gate",
                d.display()
            );
        }
    }
}
