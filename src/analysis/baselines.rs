//! Loading the stored baselines a gate names (`[assert.drift] baseline = ...`) with their window run
//! directories parsed as evidence, so that judging stays pure: the caller (`servegate run`, `servegate judge`,
//! the harness) loads them here and hands them to `judge::judge_with`. Reads files (like [`super::load`]);
//! computes nothing.
//!
//! Where a relative baseline path is looked for: the gate file's directory, then each of its ancestors, the
//! first that holds it; then the current directory. So `baselines/reference-smoke-drift` named in `gates/reference-smoke.toml` is found at
//! the checkout's root, and the same gate copied into a run directory
//! (`target/servegate/runs/reference-smoke/<stamp>/gate.toml`) finds the same baseline when re-judged.

use std::path::{Path, PathBuf};

use crate::evidence::baseline::{self, Baseline};
use crate::spec::GateSpec;

/// One baseline as loaded: the directory, its manifest and each window's evidence (parsed replies).
#[derive(Debug, Clone)]
pub struct LoadedBaseline {
    /// The baseline directory and its manifest.
    pub baseline: Baseline,
    /// Each window's run directory loaded as [`super::Evidence`], oldest first.
    pub windows: Vec<super::Evidence>,
}

/// A baseline the gate names: loaded, or why not (the path as written and the error).
pub type BaselineSlot = Result<LoadedBaseline, String>;

/// The baselines a gate's assertions name, loaded, in the order written; none when the gate compares with no
/// baseline. Never fails as a whole: a baseline that cannot be read is an `Err` whose text the verdict shows.
pub fn load_for(gate: &GateSpec) -> Vec<BaselineSlot> {
    let Some(d) = &gate.assertions.drift else {
        return Vec::new();
    };
    d.baselines.iter().map(|b| load_one(gate, b)).collect()
}

/// Where `path` resolves for `gate` (see the module doc): absolute paths as they are; a relative one in the
/// gate file's directory or its nearest ancestor that holds it, else in the current directory. `Err` lists where it was looked for.
pub fn resolve(gate: &GateSpec, path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    let start = gate
        .file
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .unwrap_or(Path::new("."));
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    for dir in start.ancestors() {
        let c = dir.join(p);
        if c.is_dir() {
            return Ok(c);
        }
    }
    // A gate written outside the checkout (a copy in a temp dir) run from the checkout.
    let cwd = std::env::current_dir().ok();
    if let Some(c) = cwd.as_ref().map(|d| d.join(p)).filter(|c| c.is_dir()) {
        return Ok(c);
    }
    Err(format!(
        "baseline {path:?} not found in {} or any directory above it, nor in the current directory{}",
        start.display(),
        cwd.map(|d| format!(" ({})", d.display())).unwrap_or_default()
    ))
}

fn load_one(gate: &GateSpec, path: &str) -> BaselineSlot {
    let dir = resolve(gate, path)?;
    let baseline = baseline::load(&dir).map_err(|e| e.to_string())?;
    let windows = baseline
        .window_dirs
        .iter()
        .map(|w| super::load(w).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LoadedBaseline { baseline, windows })
}
