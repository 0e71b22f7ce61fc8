//! Stored baselines: recorded evidence of known-good runs of a gate, kept in the repository so that a
//! regression or drift verdict can be re-judged anywhere (docs/regression.md).
//!
//! Layout of one baseline (one machine kind of one gate), e.g. `data/baselines/reference-smoke/`:
//!
//! ```text
//! data/baselines/<gate>[/<kind>]/
//!   baseline.json          the manifest (schema servegate.baseline/1): gate, kind, blessed_utc, key, windows
//!   <window>/              one blessed run directory per window (run.json, gate.toml, serve.log, NN.*)
//! ```
//!
//! A baseline keeps several **windows** (runs at different times) so that a comparison can widen its interval
//! by the between-window spread: requests of one window are not exchangeable with requests of another on a
//! shared machine. Every window's run directory is a complete run directory (`servegate judge` reads it).
//! A gate may name several baselines (one per machine kind); the comparable one is used ([`choose`]).
//!
//! The manifest's key is never trusted: [`load`] re-derives each window's key from the window's own
//! `gate.toml`, `run.json` and `serve.log` and refuses a baseline whose manifest states another key (a
//! corrupted manifest, every key field null), a window whose run did not complete (interrupted, failed,
//! still running), a window of another gate, or windows whose keys differ among themselves (another
//! max_tokens, another release).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EvidenceError;
use crate::evidence::comparability::{
    describe, differences, key_of_evidence, load_difference, load_ratio, run_load_per_cpu,
    ComparabilityKey, KeyDiff, KeyUse,
};

/// The schema id of `baseline.json`.
pub const BASELINE_SCHEMA: &str = "servegate.baseline/1";
/// The manifest's file name inside a baseline directory.
pub const MANIFEST_FILE: &str = "baseline.json";

/// `baseline.json`: what a baseline is and where its windows are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`BASELINE_SCHEMA`].
    pub schema: String,
    /// `gate.name` of the gate it is a baseline of.
    pub gate: String,
    /// The machine kind it was blessed on (free text, e.g. `2-core shared CI`); empty when not named.
    #[serde(default)]
    pub kind: String,
    /// UTC time of blessing, RFC 3339.
    pub blessed_utc: String,
    /// The comparability key every window shares (the key of the first window; blessing refuses windows
    /// whose keys differ).
    pub key: ComparabilityKey,
    /// The window directories, relative to the baseline directory, oldest first.
    pub windows: Vec<String>,
    /// Where each window came from (the run directory blessed, as given), same order as `windows`.
    #[serde(default)]
    pub sources: Vec<String>,
    /// Free-form notes (who blessed it and why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A baseline directory read back: its manifest and the absolute paths of its window run directories.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    /// The baseline directory.
    pub dir: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// Each window's run directory (`dir` joined with the manifest's `windows`), oldest first.
    pub window_dirs: Vec<PathBuf>,
    /// Each window's host load per CPU (`comparability::load_per_cpu` of its `run.json`), same order; None
    /// where the window's evidence does not state it.
    pub window_loads: Vec<Option<f64>>,
    /// The baseline's comparability key as its windows' own evidence gives it (`comparability::key_of_evidence`
    /// of the first window's `gate.toml`, `run.json` and `serve.log`; every window's is the same, [`load`]
    /// refuses one that is not): what a comparison uses, never the manifest's copy.
    pub key: ComparabilityKey,
}

impl Baseline {
    /// The baseline's host load per CPU: the median of its windows' loads that are stated; None when no
    /// window states one (older evidence: a speed comparison then does not compare load).
    pub fn load_per_cpu(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.window_loads.iter().flatten().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        Some(if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        })
    }
}

/// One window's own evidence, checked: its key ([`key_of_evidence`] of its `gate.toml`, `run.json` and
/// `serve.log`) and its host load per CPU. `Err`: why the window is refused (its run.json or gate.toml
/// unreadable, its run not complete, another gate's run).
fn window_facts(
    dir: &Path,
    name: &str,
    gate: &str,
) -> Result<(ComparabilityKey, Option<f64>), String> {
    let run = crate::evidence::read_run_summary(dir)
        .map_err(|e| format!("window {name:?}: its run.json cannot be read: {e}"))?;
    if run.status != crate::evidence::RunStatus::Complete {
        return Err(format!(
            "window {name:?} is not a complete run (run.json status {:?}: an interrupted or failed run proves \
             nothing)",
            run.status
        ));
    }
    if run.gate != gate {
        return Err(format!(
            "window {name:?} is a run of gate {:?}, not of {gate:?}",
            run.gate
        ));
    }
    let spec = crate::spec::load(&dir.join(crate::evidence::layout::GATE_FILE))
        .map_err(|e| format!("window {name:?}: its gate.toml cannot be read: {e}"))?;
    let log = crate::io::input::read(
        &dir.join(crate::evidence::layout::SERVE_LOG),
        crate::io::input::MAX_EVIDENCE_BYTES,
    )
    .ok()
    .map(|b| String::from_utf8_lossy(&b).into_owned());
    Ok((
        key_of_evidence(&spec, &run, log.as_deref()),
        run_load_per_cpu(&run),
    ))
}

/// The fields where the manifest's key disagrees with the key its windows give (a field the manifest states
/// that differs, or one it leaves unstated that the windows state; a numerics setting only where the manifest
/// states it).
fn manifest_disagrees(manifest: &ComparabilityKey, derived: &ComparabilityKey) -> Vec<KeyDiff> {
    let mut d = differences(manifest, derived, KeyUse::Window);
    let stated: std::collections::BTreeMap<String, Option<String>> =
        derived.fields().into_iter().collect();
    for (f, v) in manifest.fields() {
        if f.starts_with("extra.") && v.is_some() && stated.get(&f).is_none_or(|x| x.is_none()) {
            d.retain(|x| x.field != f);
        }
    }
    d
}

/// Reads the baseline at `dir` (its `baseline.json`) and checks it against its windows' own evidence.
/// Errors: no manifest, a manifest that does not parse or names another schema, a window directory that is
/// missing or escapes `dir`, a window refused by its evidence (its run not complete, another gate's run,
/// a key that differs from the first window's: another max_tokens, prompts, model file, release), and a
/// manifest whose key is not the windows' (every field named).
pub fn load(dir: &Path) -> Result<Baseline, EvidenceError> {
    let path = dir.join(MANIFEST_FILE);
    let bad = |m: String| EvidenceError::Malformed {
        path: path.clone(),
        reason: m,
    };
    let text = crate::io::input::read_to_string(&path, crate::io::input::MAX_EVIDENCE_BYTES)
        .map_err(|e| EvidenceError::Io {
            path: path.clone(),
            source: e,
        })?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a baseline manifest: {e}")))?;
    if manifest.schema != BASELINE_SCHEMA {
        return Err(bad(format!(
            "schema {:?}, expected {BASELINE_SCHEMA:?}",
            manifest.schema
        )));
    }
    if manifest.windows.is_empty() {
        return Err(bad("the baseline has no window".into()));
    }
    let mut window_dirs = Vec::new();
    for w in &manifest.windows {
        let rel = Path::new(w);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(bad(format!(
                "window {w:?} is not a directory inside the baseline"
            )));
        }
        let d = dir.join(rel);
        if !d.join(crate::evidence::layout::RUN_FILE).is_file() {
            return Err(bad(format!(
                "window {w:?} is not a run directory (no {})",
                crate::evidence::layout::RUN_FILE
            )));
        }
        window_dirs.push(d);
    }
    let mut window_loads = Vec::new();
    let mut key: Option<ComparabilityKey> = None;
    for (w, d) in manifest.windows.iter().zip(&window_dirs) {
        let (k, l) = window_facts(d, w, &manifest.gate).map_err(bad)?;
        window_loads.push(l);
        match &key {
            None => key = Some(k),
            Some(first) => {
                let diff = differences(first, &k, KeyUse::Window);
                if !diff.is_empty() {
                    return Err(bad(format!(
                        "window {w:?} does not belong with window {:?}: {}",
                        manifest.windows[0],
                        describe(&diff).replace("not comparable with its baseline: ", "")
                    )));
                }
            }
        }
    }
    let key = key.expect("one window at least");
    let diff = manifest_disagrees(&manifest.key, &key);
    if !diff.is_empty() {
        return Err(bad(format!(
            "the manifest's key is not its windows' (a corrupted or hand-edited manifest; the key is \
             re-derived from the windows' run.json and gate.toml): {}",
            diff.iter()
                .map(|d| format!(
                    "{} {} (manifest) vs {} (windows)",
                    d.field,
                    d.baseline.as_deref().unwrap_or("(not stated)"),
                    d.run.as_deref().unwrap_or("(not stated)")
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    Ok(Baseline {
        dir: dir.to_path_buf(),
        manifest,
        window_dirs,
        window_loads,
        key,
    })
}

/// Where a baseline path a gate names resolves: THE one path rule of stored baselines, for
/// `[assert.regression]` and `[assert.drift]` alike (`{gate_dir}` and `~` are already expanded by the spec).
///
/// An absolute path is taken as it is. A relative one is looked up in the gate file's directory, then in
/// each of its ancestors, the first that holds it as a directory; then in the current directory. So
/// `data/baselines/reference-smoke` named in `gates/reference-smoke.toml` is found at the checkout's root whether
/// servegate runs from the root, from elsewhere in the checkout, or re-judges the gate's copy in a run
/// directory (`target/servegate/runs/<gate>/<stamp>/gate.toml`). `Err` says every place it was looked for.
pub fn resolve(gate_file: &Path, path: &Path) -> Result<PathBuf, String> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    let start = match gate_file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    if let Some(c) = start.ancestors().map(|d| d.join(path)).find(|c| c.is_dir()) {
        return Ok(c);
    }
    // A gate written outside the checkout (a copy in a temp dir) run from the checkout.
    let cwd = std::env::current_dir().ok();
    if let Some(c) = cwd.as_ref().map(|d| d.join(path)).filter(|c| c.is_dir()) {
        return Ok(c);
    }
    Err(format!(
        "baseline {:?} not found in {} or any directory above it, nor in the current directory{}",
        path.display().to_string(),
        start.display(),
        cwd.map(|d| format!(" ({})", d.display()))
            .unwrap_or_default()
    ))
}

/// THE loader of a baseline a gate names: [`resolve`]s `path` for the gate file `gate_file`, then reads its
/// manifest ([`load`]). `Err` is the text a verdict shows (not found, or why the manifest is refused).
pub fn load_named(gate_file: &Path, path: &Path) -> Result<Baseline, String> {
    let dir = resolve(gate_file, path)?;
    load(&dir).map_err(|e| e.to_string())
}

/// A baseline with every window's run directory read back as evidence, each request parsed by `parse`
/// (the analysis layer passes its reply parser: `loaded::load_baseline`).
#[derive(Debug, Clone)]
pub struct LoadedBaseline<R = Vec<crate::io::reads::TimedRead>> {
    /// The baseline directory and its manifest.
    pub baseline: Baseline,
    /// Each window's run directory loaded as evidence, oldest first.
    pub windows: Vec<crate::evidence::Evidence<R>>,
}

/// [`load_named`], then each window read with [`crate::evidence::load_with`] (`parse` as given). `Err` names
/// the baseline or the window that could not be read.
pub fn load_named_with<R>(
    gate_file: &Path,
    path: &Path,
    parse: impl Fn(
            &crate::evidence::RequestRecord,
            Option<&crate::io::exchange::ResponseMeta>,
            Vec<crate::io::reads::TimedRead>,
        ) -> R
        + Copy,
) -> Result<LoadedBaseline<R>, String> {
    let baseline = load_named(gate_file, path)?;
    let windows = baseline
        .window_dirs
        .iter()
        .map(|w| crate::evidence::load_with(w, parse).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LoadedBaseline { baseline, windows })
}

/// Writes `manifest` into `dir` whole (temp file + rename).
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), EvidenceError> {
    let path = dir.join(MANIFEST_FILE);
    let mut bytes = serde_json::to_vec_pretty(manifest).map_err(|e| EvidenceError::Malformed {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    bytes.push(b'\n');
    crate::io::fs::write_atomic(&path, &bytes).map_err(|e| EvidenceError::Io { path, source: e })
}

/// A speed comparison's host-load check ([`choose`]): this run's load per CPU
/// (`comparability::load_per_cpu`, None when its evidence does not state it) and the largest ratio of
/// effective loads still comparable (`[assert.regression] max_load_ratio`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadCheck {
    /// This run's host load per CPU.
    pub run_per_cpu: Option<f64>,
    /// The bound (`comparability::load_difference`).
    pub max_ratio: f64,
}

/// Why no baseline of a list was chosen ([`choose`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NotChosen {
    /// Baselines whose key applies to the run but whose host load is too far from its: each with the load
    /// difference. Not empty: the runner is busy (or quieter than every baseline), the run is **not
    /// compared**, and no baseline was found not to apply.
    pub busy: Vec<(PathBuf, KeyDiff)>,
    /// Baselines whose key differs from the run's (what the gate fixes or the machine): each with the
    /// differing fields. The baseline no longer applies.
    pub incomparable: Vec<(PathBuf, Vec<KeyDiff>)>,
}

/// Which of several baselines a run is compared with: one whose key ([`Baseline::key`]) has no difference
/// from the run's key for `usage` and, for a [`KeyUse::Speed`] comparison with a `load` check, whose host
/// load ([`Baseline::load_per_cpu`]) is within the bound of the run's (`comparability::load_difference`). Of
/// several such, the one nearest the run's load (the first on a tie, and the first when loads are unknown):
/// so a list of a quiet and a loaded baseline compares a quiet run with the quiet one and a loaded run with
/// the loaded one. `Err` says, for each baseline, why it was not chosen: its load alone ([`NotChosen::busy`])
/// or its key ([`NotChosen::incomparable`]); either way the run is never a pass.
pub fn choose<'a>(
    baselines: &'a [Baseline],
    run: &ComparabilityKey,
    usage: KeyUse,
    load: Option<LoadCheck>,
) -> Result<&'a Baseline, NotChosen> {
    let mut why = NotChosen::default();
    let mut best: Option<(&Baseline, f64)> = None;
    for b in baselines {
        let d = differences(&b.key, run, usage);
        if !d.is_empty() {
            why.incomparable.push((b.dir.clone(), d));
            continue;
        }
        let bl = b.load_per_cpu();
        if let Some(l) = load.and_then(|c| load_difference(bl, c.run_per_cpu, usage, c.max_ratio)) {
            why.busy.push((b.dir.clone(), l));
            continue;
        }
        let distance = match (bl, load.and_then(|c| c.run_per_cpu)) {
            (Some(bl), Some(rl)) if usage == KeyUse::Speed => load_ratio(bl, rl),
            _ => 1.0,
        };
        if best.is_none_or(|(_, bd)| distance < bd) {
            best = Some((b, distance));
        }
    }
    best.map(|(b, _)| b).ok_or(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first window of the committed quiet reference baseline: a real run directory.
    fn real_window() -> PathBuf {
        let b = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/baselines/reference-smoke");
        let m: Manifest =
            serde_json::from_str(&std::fs::read_to_string(b.join(MANIFEST_FILE)).unwrap()).unwrap();
        b.join(&m.windows[0])
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy_dir(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// A copy of the real window at `dir/name`, and the key its evidence gives.
    fn window(dir: &Path, name: &str) -> ComparabilityKey {
        copy_dir(&real_window(), &dir.join(name));
        window_facts(&dir.join(name), name, "reference-smoke")
            .unwrap()
            .0
    }

    fn manifest(windows: &[&str]) -> Manifest {
        Manifest {
            schema: BASELINE_SCHEMA.into(),
            gate: "reference-smoke".into(),
            kind: "test".into(),
            blessed_utc: "2026-12-01T00:00:00Z".into(),
            key: ComparabilityKey::default(),
            windows: windows.iter().map(|w| w.to_string()).collect(),
            sources: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn keyed(windows: &[&str], key: &ComparabilityKey) -> Manifest {
        Manifest {
            key: key.clone(),
            ..manifest(windows)
        }
    }

    /// Rewrites `dir/run.json` (or `gate.toml` when `gate`) with `edit`.
    fn edit_run(dir: &Path, edit: impl Fn(&mut serde_json::Value)) {
        let p = dir.join(crate::evidence::layout::RUN_FILE);
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }

    #[test]
    fn a_baseline_is_refused_when_its_manifest_or_a_window_is_not_what_its_evidence_says() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let key = window(dir, "w1");
        window(dir, "w2");
        write_manifest(dir, &keyed(&["w1", "w2"], &key)).unwrap();
        let b = load(dir).unwrap();
        assert_eq!(b.key, key);
        // The key is the windows': the numerics settings of the serve log included.
        assert_eq!(
            b.key.extra.get("flash_attention").map(String::as_str),
            Some("enabled")
        );
        // A corrupted manifest: every key field null.
        write_manifest(dir, &manifest(&["w1", "w2"])).unwrap();
        let e = load(dir).unwrap_err().to_string();
        assert!(
            e.contains("the manifest's key is not its windows'")
                && e.contains("model_sha256 (not stated) (manifest) vs b179c9523d0e")
                && e.contains("max_tokens (not stated) (manifest) vs 64 (windows)"),
            "{e}"
        );
        // A hand-edited one: another max_tokens.
        let mut other = key.clone();
        other.max_tokens = Some("8".into());
        write_manifest(dir, &keyed(&["w1", "w2"], &other)).unwrap();
        let e = load(dir).unwrap_err().to_string();
        assert!(e.contains("max_tokens 8 (manifest) vs 64 (windows)"), "{e}");
        write_manifest(dir, &keyed(&["w1", "w2"], &key)).unwrap();
        // An interrupted window.
        edit_run(&dir.join("w2"), |v| v["status"] = "interrupted".into());
        let e = load(dir).unwrap_err().to_string();
        assert!(
            e.contains("window \"w2\" is not a complete run (run.json status Interrupted"),
            "{e}"
        );
        edit_run(&dir.join("w2"), |v| v["status"] = "complete".into());
        load(dir).unwrap();
        // Another gate's window.
        edit_run(&dir.join("w2"), |v| v["gate"] = "other-gate".into());
        let e = load(dir).unwrap_err().to_string();
        assert!(
            e.contains("window \"w2\" is a run of gate \"other-gate\", not of \"reference-smoke\""),
            "{e}"
        );
        edit_run(&dir.join("w2"), |v| v["gate"] = "reference-smoke".into());
        // Another max_tokens' window: its own gate.toml says so.
        let g = dir.join("w2").join(crate::evidence::layout::GATE_FILE);
        let text = std::fs::read_to_string(&g).unwrap();
        assert!(text.contains("max_tokens = 64"), "{text}");
        std::fs::write(&g, text.replace("max_tokens = 64", "max_tokens = 32")).unwrap();
        let e = load(dir).unwrap_err().to_string();
        assert!(
            e.contains("window \"w2\" does not belong with window \"w1\": max_tokens 64 (baseline) vs 32 (this run)"),
            "{e}"
        );
        std::fs::write(&g, &text).unwrap();
        // Another release in one baseline: refused too (a baseline is one release).
        edit_run(&dir.join("w2"), |v| {
            v["serve"]["version"] = "llama.cpp b9999".into()
        });
        let e = load(dir).unwrap_err().to_string();
        assert!(e.contains("engine_version"), "{e}");
    }

    #[test]
    fn a_manifest_round_trips_and_its_windows_must_be_run_dirs_inside_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let key = window(dir, "w1");
        write_manifest(dir, &keyed(&["w1"], &key)).unwrap();
        let b = load(dir).unwrap();
        assert_eq!(b.manifest, keyed(&["w1"], &key));
        assert_eq!(b.window_dirs, vec![dir.join("w1")]);
        for bad in [&["w2"][..], &["../w1"], &["/etc"], &[]] {
            write_manifest(dir, &keyed(bad, &key)).unwrap();
            let e = load(dir).unwrap_err().to_string();
            assert!(e.contains("baseline.json"), "{e}");
        }
        assert!(load(&dir.join("nowhere")).is_err());
    }

    #[test]
    fn a_relative_baseline_is_found_from_the_gate_dir_upwards_and_absent_names_where_it_looked() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().canonicalize().unwrap();
        let bl = root.join("baselines").join("g");
        let key = window(&bl, "w1");
        write_manifest(&bl, &keyed(&["w1"], &key)).unwrap();
        let deep = root.join("target/servegate/runs/g/20261201T000000Z");
        std::fs::create_dir_all(&deep).unwrap();
        for gate in [root.join("gates/g.toml"), deep.join("gate.toml")] {
            std::fs::create_dir_all(gate.parent().unwrap()).unwrap();
            assert_eq!(
                resolve(&gate, Path::new("baselines/g")).unwrap(),
                bl,
                "{gate:?}"
            );
            assert_eq!(load_named(&gate, Path::new("baselines/g")).unwrap().dir, bl);
        }
        // Nearest first: a baselines/g beside the gate wins over the one at the root.
        let near = root.join("gates/baselines/g");
        std::fs::create_dir_all(&near).unwrap();
        assert_eq!(
            resolve(&root.join("gates/g.toml"), Path::new("baselines/g")).unwrap(),
            near
        );
        // Absolute paths are as written.
        assert_eq!(resolve(&root.join("gates/g.toml"), &bl).unwrap(), bl);
        let e =
            load_named(&root.join("gates/g.toml"), Path::new("baselines/none-such")).unwrap_err();
        assert!(
            e.contains("baselines/none-such") && e.contains("not found") && e.contains("gates"),
            "{e}"
        );
        // Found but not a baseline: the manifest error, naming the file.
        let e = load_named(&root.join("gates/g.toml"), Path::new("baselines/g")).unwrap_err();
        assert!(e.contains("baseline.json"), "{e}");
    }

    #[test]
    fn the_first_comparable_baseline_is_chosen_else_every_difference_is_named() {
        let b = |cpus: &str, dir: &str| Baseline {
            dir: PathBuf::from(dir),
            manifest: manifest(&["w"]),
            window_dirs: Vec::new(),
            window_loads: Vec::new(),
            key: ComparabilityKey {
                cpus: Some(cpus.into()),
                ..ComparabilityKey::default()
            },
        };
        let set = [b("8", "eight"), b("2", "two")];
        let run = ComparabilityKey {
            cpus: Some("2".into()),
            ..ComparabilityKey::default()
        };
        assert_eq!(
            choose(&set, &run, KeyUse::Speed, None).unwrap().dir,
            PathBuf::from("two")
        );
        let odd = ComparabilityKey {
            cpus: Some("4".into()),
            ..ComparabilityKey::default()
        };
        let why = choose(&set, &odd, KeyUse::Speed, None).unwrap_err();
        assert!(why.busy.is_empty());
        assert_eq!(why.incomparable.len(), 2);
        assert_eq!(why.incomparable[0].1[0].field, "cpus");
        // Another engine version is never a reason: it is what a release gate compares.
        let release = ComparabilityKey {
            cpus: Some("2".into()),
            engine_version: Some("1.1.0".into()),
            ..ComparabilityKey::default()
        };
        assert_eq!(
            choose(&set, &release, KeyUse::Speed, None).unwrap().dir,
            PathBuf::from("two")
        );
        // A baseline that applies at another load only: busy, not incomparable.
        let mut loaded = b("2", "two");
        loaded.window_loads = vec![Some(0.5)];
        let set = [b("8", "eight"), loaded];
        let check = LoadCheck {
            run_per_cpu: Some(4.0),
            max_ratio: 1.5,
        };
        let why = choose(&set, &run, KeyUse::Speed, Some(check)).unwrap_err();
        assert_eq!(why.busy.len(), 1);
        assert_eq!(why.busy[0].0, PathBuf::from("two"));
        assert_eq!(why.incomparable.len(), 1);
    }
}
