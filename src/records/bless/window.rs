//! Blessing a baseline: a run directory copied as a new window of the gate's stored baseline, planned
//! ([`plan_baseline`]: the comparability key checked, the window named) and written ([`write_baseline`]).

use super::*;

/// What `bless --baseline` would write (or wrote).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BaselinePlan {
    /// The baseline directory (`<root>/<gate>[/<kind>]`).
    pub dir: PathBuf,
    /// The window's name inside it.
    pub window: String,
    /// The manifest after the window is added.
    pub manifest: Manifest,
    /// True when the baseline is new.
    pub created: bool,
    /// The ledger line.
    pub ledger: LedgerEntry,
    /// Where the ledger line goes ([`BaselineTarget::ledger_root`]).
    pub ledger_root: PathBuf,
    /// Said before the change ([`BaselineTarget::note`]).
    pub note: Option<String>,
}

/// What a `--kind` name must be, as its refusal states it.
pub(crate) const KIND_RULE: &str =
    "a --kind is a plain name: 1 to 64 ASCII letters, digits, '-' or '_', starting with a letter \
(no space, newline, dot or path separator), and not a window's name or stamp (YYYYMMDDTHHMMSSZ)";

/// Checks a `--kind` name against [`KIND_RULE`] (a subdirectory of `data/baselines/<gate>/`, beside the windows,
/// so it must not look like one). Errors: the name (escaped) and the rule.
pub(crate) fn check_kind(kind: &str) -> Result<(), String> {
    static STAMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[0-9]{8}T[0-9]{6}Z(-[0-9]+)?$").expect("a valid regex")
    });
    let shown = one_line(kind);
    if STAMP.is_match(kind) {
        return Err(format!(
            "--kind {shown} is a window stamp (a run directory's name): {KIND_RULE}"
        ));
    }
    let plain = (1..=64).contains(&kind.len())
        && kind.starts_with(|c: char| c.is_ascii_alphabetic())
        && kind
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !plain {
        return Err(format!("--kind \"{shown}\" is not plain: {KIND_RULE}"));
    }
    Ok(())
}

/// A run's identity: the lower-case hex sha256 of its `run.json` (a window is a whole copy of its run
/// directory, so the same run blessed twice has the same identity wherever it was copied from). Errors:
/// the file cannot be read (exit 5).
pub fn run_identity(dir: &Path) -> Result<String, BlessError> {
    let p = dir.join(layout::RUN_FILE);
    crate::io::hash::sha256_file(&p)
        .map(|(h, _)| h)
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, format!("{}: {e}", p.display())))
}

/// Plans `bless GATE --baseline RUN [--kind K]`: checks the kind ([`check_kind`]) and the run
/// ([`refusals`]; a run already a window of the baseline is refused, by [`run_identity`]), computes its key,
/// and checks it against an existing baseline's. Writes nothing.
pub(crate) fn plan_baseline(
    gate_file: &Path,
    run: &Path,
    kind: Option<&str>,
    root: &Path,
    utc: &str,
) -> Result<BaselinePlan, BlessError> {
    let target = baseline_target(spec::load(gate_file).ok().as_ref(), gate_file, kind, root);
    let gate = load_gate(gate_file)?;
    let RunToBless {
        gate: rg,
        ev,
        inputs,
    } = load_run(run)?;
    same_gate(&gate, &rg, run)?;
    if let Some(k) = kind {
        check_kind(k).map_err(|e| BlessError::new(exit::USAGE, e))?;
        let parent = root.join(&gate.name);
        if parent.join(baseline::MANIFEST_FILE).is_file() {
            let windows = baseline::load(&parent)
                .map(|b| b.manifest.windows)
                .unwrap_or_default();
            if windows.iter().any(|w| w == k) {
                return Err(BlessError::new(
                    exit::USAGE,
                    format!(
                        "--kind {k} names a window of {}: {KIND_RULE}",
                        parent.display()
                    ),
                ));
            }
        }
    }
    refused(run, refusals(&rg, &ev, &inputs, true))?;
    let key = key_of_evidence(&rg, &ev.run, ev.serve_log.as_deref());
    let dir = target.dir;
    let identity = run_identity(run)?;
    let base_name = run
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "window".into());
    let existing = if dir.join(baseline::MANIFEST_FILE).is_file() {
        Some(
            baseline::load(&dir)
                .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, e.to_string()))?,
        )
    } else {
        None
    };
    let created = existing.is_none();
    let mut manifest = match existing {
        Some(b) => {
            // One run is one window: the same run blessed again would count its requests twice (a
            // between-window spread of 0, a decided verdict where one window cannot decide).
            for (name, w) in b.manifest.windows.iter().zip(&b.window_dirs) {
                if run_identity(w).ok().as_deref() == Some(identity.as_str()) {
                    return Err(BlessError::new(
                        exit::ASSERTION_FAILED,
                        format!(
                            "refused to bless {}: it is already window {name} of {} (the same run.json, sha256 {}): one run is one window",
                            run.display(),
                            dir.display(),
                            &identity[..12.min(identity.len())]
                        ),
                    ));
                }
            }
            let mut d = differences(&b.key, &key, KeyUse::Window);
            // A window at another host load is another baseline (the judge's bound: the gate's
            // max_load_ratio), so that one baseline's windows are comparable among themselves.
            let max_ratio = gate
                .assertions
                .regression
                .as_ref()
                .map_or(spec::regression::DEFAULT_MAX_LOAD_RATIO, |r| {
                    r.max_load_ratio
                });
            d.extend(load_difference(
                b.load_per_cpu(),
                run_load_per_cpu(&ev.run),
                KeyUse::Speed,
                max_ratio,
            ));
            if !d.is_empty() {
                return Err(BlessError::new(
                    exit::INCOMPARABLE,
                    format!(
                        "refused to add {} to {}: the run is {} (bless it as another --kind)",
                        run.display(),
                        dir.display(),
                        describe(&d)
                    ),
                ));
            }
            b.manifest
        }
        None => Manifest {
            schema: BASELINE_SCHEMA.into(),
            gate: gate.name.clone(),
            kind: kind.unwrap_or("").to_string(),
            blessed_utc: utc.to_string(),
            key,
            windows: Vec::new(),
            sources: Vec::new(),
            notes: Vec::new(),
        },
    };
    let mut window = base_name.clone();
    let mut i = 2;
    while manifest.windows.contains(&window) || dir.join(&window).exists() {
        window = format!("{base_name}-{i}");
        i += 1;
    }
    manifest.windows.push(window.clone());
    manifest.sources.push(run.display().to_string());
    manifest.blessed_utc = utc.to_string();
    let values = rate_values(&rg, &ev);
    let ledger = LedgerEntry {
        utc: utc.to_string(),
        gate: gate.name.clone(),
        gate_file: gate_file.display().to_string(),
        action: "baseline".into(),
        run: run.display().to_string(),
        slow_run: None,
        n: values.len(),
        median: crate::analysis::stats::median(&values),
        rule: format!(
            "window {} of the baseline: every planned request answered, content/known-answer/route trials pass",
            manifest.windows.len()
        ),
        value: None,
        previous: None,
        window: Some(format!("{}/{window}", dir.display())),
    };
    Ok(BaselinePlan {
        dir,
        window,
        manifest,
        created,
        ledger,
        ledger_root: target.ledger_root,
        note: target.note,
    })
}

/// Copies the run directory `from` (files and subdirectories, no symlinks followed) to `to`, which must not
/// exist: into a temporary sibling first, renamed into place when whole.
fn copy_run_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
        std::fs::create_dir(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            let t = e.file_type()?;
            let dest = to.join(e.file_name());
            if t.is_dir() {
                copy_tree(&e.path(), &dest)?;
            } else if t.is_file() {
                std::fs::copy(e.path(), &dest)?;
            }
        }
        Ok(())
    }
    let parent = to.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".{}.partial",
        to.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    copy_tree(from, &tmp)?;
    std::fs::rename(&tmp, to)
}

/// Writes a planned baseline window: the run directory copied (whole, or not at all), then the manifest.
pub(crate) fn write_baseline(run: &Path, plan: &BaselinePlan) -> Result<(), BlessError> {
    let to = plan.dir.join(&plan.window);
    copy_run_dir(run, &to).map_err(|e| {
        BlessError::new(
            exit::EVIDENCE_ERROR,
            format!("copying to {}: {e}", to.display()),
        )
    })?;
    baseline::write_manifest(&plan.dir, &plan.manifest)
        .map_err(|e| BlessError::new(exit::EVIDENCE_ERROR, e.to_string()))
}

/// Where `bless GATE --baseline RUN [--kind K]` writes the window ([`baseline_target`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BaselineTarget {
    /// The baseline directory the window goes into.
    pub dir: PathBuf,
    /// The directory of the ledger and the lock: the baselines root (`--baselines-dir`) when `dir` is its
    /// `<gate>[/<kind>]`, else the directory holding `dir` (the ledger beside the baseline).
    pub ledger_root: PathBuf,
    /// Said before the change when the gate will not read `dir` (it names other baselines).
    pub note: Option<String>,
}

/// Where a baseline window of `gate` (its file `gate_file`) is written: where the gate reads it. The default
/// is `<root>/<gate>[/<kind>]`; when the gate's `[assert.regression]` names stored baselines
/// (`baseline = "..."` or `baselines = [...]`, each found as the judge finds it, [`baseline::resolve`]; one not
/// there yet: the path itself, relative to the current directory) and the default is none of them, the
/// window goes to the one baseline it names, or (several) to the one whose last component is `kind`.
/// Otherwise the default, with a note naming what the gate reads.
pub(crate) fn baseline_target(
    gate: Option<&GateSpec>,
    gate_file: &Path,
    kind: Option<&str>,
    root: &Path,
) -> BaselineTarget {
    let mut default = root.join(gate.map_or("gate", |g| g.name.as_str()));
    if let Some(k) = kind {
        default = default.join(k);
    }
    let plain = BaselineTarget {
        dir: default.clone(),
        ledger_root: root.to_path_buf(),
        note: None,
    };
    let declared: Vec<PathBuf> = match gate
        .and_then(|g| g.assertions.regression.as_ref())
        .map(|r| &r.baseline)
    {
        Some(spec::RegressionBaseline::Stored(dirs)) => dirs
            .iter()
            .map(|d| {
                baseline::resolve(gate_file, d).unwrap_or_else(|_| {
                    if d.is_absolute() {
                        d.clone()
                    } else {
                        std::env::current_dir().unwrap_or_default().join(d)
                    }
                })
            })
            .collect(),
        _ => return plain,
    };
    let place = |p: &Path| crate::io::fs::landing(p).unwrap_or_else(|| p.to_path_buf());
    if declared.iter().any(|d| place(d) == place(&default)) {
        return plain;
    }
    let chosen = match kind {
        Some(k) => declared
            .iter()
            .find(|d| d.file_name().is_some_and(|n| n == k)),
        None if declared.len() == 1 => declared.first(),
        None => None,
    };
    match chosen {
        Some(d) => BaselineTarget {
            dir: d.clone(),
            ledger_root: d
                .parent()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf),
            note: None,
        },
        None => BaselineTarget {
            note: Some(format!(
                "note: the gate's [assert.regression] reads {}, not {}: add it to the gate's baselines, \
                 or pass --kind with the last name of the one to add to",
                declared
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                default.display()
            )),
            ..plain
        },
    }
}
