//! A gate's run cached for one nextest run (every trial in its own process): `<runs>/.servegate-nextest/<run
//! id>/`, keyed by gate name and spec hash, under a file lock, so the serve starts once per gate.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::run::runner::RunOutcome;
use crate::sinks::report::{self};
use crate::spec::GateSpec;

use super::{run_gate, Config, GateResult};

/// A gate's run as cached for a nextest run.
#[derive(Debug, Serialize, Deserialize)]
struct CachedRun {
    gate: String,
    spec_sha256: String,
    #[serde(flatten)]
    result: CachedResult,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
#[allow(clippy::large_enum_variant)] // one short-lived value per gate, (de)serialized once
enum CachedResult {
    /// The outcome as the first process judged it (judging is pure, so re-judging would say the same).
    Ran {
        evidence_dir: PathBuf,
        summary: crate::evidence::RunSummary,
        verdicts: Vec<crate::judge::Verdict>,
        pair: Option<crate::evidence::PairSummary>,
    },
    Error {
        message: String,
    },
    Panicked {
        message: String,
    },
}

/// SHA-256 of a gate's file path and source: the cache key, so an edited gate is never served a stale run.
pub(crate) fn spec_sha256(spec: &GateSpec) -> String {
    let mut bytes = spec.file.display().to_string().into_bytes();
    bytes.push(0);
    bytes.extend_from_slice(spec.source.as_bytes());
    crate::io::hash::sha256_reader(bytes.as_slice())
        .map(|(h, _)| h)
        .unwrap_or_default()
}

fn open_lock(
    path: &Path,
    what: &str,
    on_wait: &mut dyn FnMut(&crate::io::progress::Waiting),
) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    // Another test process may hold it for a whole gate's run: the wait says so (2 s, then every 10 s).
    let mut pacer = crate::io::progress::Pacer::new(std::time::Instant::now());
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        if let Some(secs) = pacer.due(std::time::Instant::now()) {
            on_wait(&crate::io::progress::Waiting::new(
                what,
                secs,
                Some(&path.display().to_string()),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes per-run cache directories older than a week (best effort).
fn prune_stale(root: &Path, keep: &Path) {
    let week = Duration::from_secs(7 * 24 * 3600);
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p == keep {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > week);
        if old {
            let _ = std::fs::remove_dir_all(&p);
        }
    }
}

/// Runs `spec` once per nextest run: under the gate's lock, reuse the cached outcome or run the gate (under the
/// serve lock, one serve at a time) and cache its outcome.
pub(super) fn run_cached(spec: &GateSpec, config: &Config, dir: &Path) -> GateResult {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        GateResult::Error(format!("nextest gate cache {}: {what}: {e}", dir.display()))
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return fail("cannot create", &e);
    }
    if let Some(root) = dir.parent() {
        prune_stale(root, dir);
    }
    let hash = spec_sha256(spec);
    let key = format!("{}-{}", spec.name, &hash[..16.min(hash.len())]);
    let mut on_wait = |w: &crate::io::progress::Waiting| {
        config.printer.errln(&format!(
            "\nservegate: {} {}",
            spec.name,
            crate::text::shown(&w.to_string())
        ))
    };
    let _gate_lock = match open_lock(
        &dir.join(format!("{key}.lock")),
        "waiting for another test process running this gate (nextest)",
        &mut on_wait,
    ) {
        Ok(f) => f,
        Err(e) => return fail("cannot lock", &e),
    };
    let cache = dir.join(format!("{key}.json"));
    if let Ok(text) = std::fs::read_to_string(&cache) {
        if let Ok(c) = serde_json::from_str::<CachedRun>(&text) {
            return match c.result {
                CachedResult::Ran {
                    evidence_dir,
                    summary,
                    verdicts,
                    pair,
                } => GateResult::Ran(Box::new(RunOutcome {
                    dir: evidence_dir,
                    summary,
                    verdicts,
                    pair,
                })),
                CachedResult::Error { message } => GateResult::Error(message),
                CachedResult::Panicked { message } => GateResult::Panicked(message),
            };
        }
    }
    let _serve_lock = match open_lock(
        &dir.join("serve.lock"),
        "waiting for another test process's serve to stop (nextest: one serve at a time)",
        &mut on_wait,
    ) {
        Ok(f) => f,
        Err(e) => return fail("cannot lock", &e),
    };
    let result = run_gate(spec, config);
    let cached = CachedResult::from_result(&result);
    let doc = CachedRun {
        gate: spec.name.clone(),
        spec_sha256: hash,
        result: cached,
    };
    let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    if let Err(e) = report::write_atomic(&cache, &bytes) {
        config.printer.errln(&format!(
            "servegate: {}: cannot cache the gate run for the other nextest processes: {e}",
            cache.display()
        ));
    }
    result
}

impl CachedResult {
    fn from_result(r: &GateResult) -> CachedResult {
        match r {
            GateResult::Ran(o) => {
                let dir = if o.dir.is_absolute() {
                    o.dir.clone()
                } else {
                    std::env::current_dir()
                        .map(|c| c.join(&o.dir))
                        .unwrap_or_else(|_| o.dir.clone())
                };
                CachedResult::Ran {
                    evidence_dir: dir,
                    summary: o.summary.clone(),
                    verdicts: o.verdicts.clone(),
                    pair: o.pair.clone(),
                }
            }
            GateResult::Error(m) => CachedResult::Error { message: m.clone() },
            GateResult::Panicked(m) => CachedResult::Panicked { message: m.clone() },
            GateResult::Refused(m) => CachedResult::Error { message: m.clone() },
            GateResult::Unmet(r) => CachedResult::Error {
                message: format!("unexpected: requirements unmet: {}", r.join("; ")),
            },
        }
    }
}
