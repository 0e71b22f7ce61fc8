//! The records folder: reading and checking its files ([`check_file`], [`check_dir`]: every problem with
//! file and field, ids unique, pair records consistent), where a record's evidence is ([`evidence_path`]),
//! and writing a record atomically, never over another ([`write_new`]). Re-deriving from evidence is
//! `rederive`; the loader of what may be published is `verify`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::schema::{Problem, Record};
use super::validate::{parse, validate};

/// One record file's outcome.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The file.
    pub file: PathBuf,
    /// The record, when it parsed.
    pub record: Option<Record>,
    /// Every problem found.
    pub problems: Vec<Problem>,
}

/// Reads and checks one file (the id must equal its file stem).
pub(crate) fn check_file(file: &Path) -> Checked {
    let text = match crate::io::input::read_to_string(file, crate::io::input::MAX_RECORD_BYTES) {
        Ok(t) => t,
        Err(e) => {
            return Checked {
                file: file.to_path_buf(),
                record: None,
                problems: vec![Problem::new("(file)", format!("cannot read: {e}"))],
            }
        }
    };
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match parse(&text) {
        Ok(r) => {
            let problems = validate(&r, &stem);
            Checked {
                file: file.to_path_buf(),
                record: Some(r),
                problems,
            }
        }
        Err(problems) => Checked {
            file: file.to_path_buf(),
            record: None,
            problems,
        },
    }
}

/// The `*.json` files of `dir`, sorted by name.
pub fn record_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Checks every `*.json` record of `dir`, each on its own and then together (ids unique). Sorted by file.
pub fn check_dir(dir: &Path) -> std::io::Result<Vec<Checked>> {
    let mut checked: Vec<Checked> = record_files(dir)?.iter().map(|f| check_file(f)).collect();
    let mut by_id: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in checked.iter().enumerate() {
        if let Some(r) = &c.record {
            by_id.entry(r.id.clone()).or_default().push(i);
        }
    }
    cross_check_pairs(&mut checked);
    for (id, idx) in by_id {
        if idx.len() > 1 {
            let names: Vec<String> = idx
                .iter()
                .map(|&i| checked[i].file.display().to_string())
                .collect();
            for &i in &idx {
                checked[i].problems.push(Problem::new(
                    "id",
                    format!("{id:?} is not unique: used by {}", names.join(", ")),
                ));
            }
        }
    }
    Ok(checked)
}

/// Where a record's `source.evidence` is: the path as written when it exists (relative paths are relative
/// to the working directory, the repository root in CI), else relative to the parent of the record
/// directory (`data/records/../<path>`).
pub(crate) fn evidence_path(records_dir: &Path, evidence: &str) -> PathBuf {
    let p = PathBuf::from(evidence);
    if p.is_absolute() || p.exists() {
        return p;
    }
    match records_dir.parent() {
        Some(parent) if parent.join(&p).exists() => parent.join(&p),
        _ => p,
    }
}

/// The two records of one pair run (same `source.evidence` and metric) checked against each other: each
/// record's `pair.other_value` and `other_n` must be the other record's `value` and `n`, and the two ratios
/// each other's inverse at their stated decimals. Problems go on the record whose copy differs.
fn cross_check_pairs(checked: &mut [Checked]) {
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, c) in checked.iter().enumerate() {
        if let Some(r) = &c.record {
            if let (Some(_), Some(ev)) = (&r.pair, &r.source.evidence) {
                groups
                    .entry((ev.clone(), r.metric.name.clone()))
                    .or_default()
                    .push(i);
            }
        }
    }
    for idx in groups.values().filter(|v| v.len() == 2) {
        let (a, b) = (idx[0], idx[1]);
        let ra = checked[a].record.clone().expect("grouped records parsed");
        let rb = checked[b].record.clone().expect("grouped records parsed");
        for (i, this, other) in [(a, &ra, &rb), (b, &rb, &ra)] {
            let p = this.pair.as_ref().expect("grouped records are pairs");
            if this.fmt(p.other_value) != other.fmt(other.value) || p.other_n != other.n {
                checked[i].problems.push(Problem::new(
                    "pair.other_value",
                    format!(
                        "{} (n = {}) but the other record of the same pair run, {}, states {} (n = {})",
                        this.fmt(p.other_value),
                        p.other_n,
                        other.id,
                        other.fmt(other.value),
                        other.n
                    ),
                ));
            }
        }
    }
}

/// `FILE: FIELD: MESSAGE`, one per problem, [`terminal_safe`] (a record's text is outside text).
pub fn problem_lines(checked: &[Checked]) -> Vec<String> {
    checked
        .iter()
        .flat_map(|c| {
            c.problems
                .iter()
                .map(move |p| format!("{}: {}", c.file.display(), terminal_safe(&p.to_string())))
        })
        .collect()
}

/// `text` as it may be printed to a terminal: [`crate::text::shown`] (control and invisible characters shown
/// escaped, `\u{1b}`; no CI workflow command), so a record's text can never move the cursor, recolour or
/// rewrite a line.
pub fn terminal_safe(text: &str) -> String {
    crate::text::shown(text)
}

/// Serialises a record as written to disk: pretty JSON, two-space indent, trailing newline.
pub fn to_json(r: &Record) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("a record serialises");
    s.push('\n');
    s
}

/// Errors writing or building a record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The record is invalid: every problem.
    #[error("record {id} is invalid:\n{}", problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The record id.
        id: String,
        /// Every problem.
        problems: Vec<Problem>,
    },
    /// A record with this id exists: records are never overwritten.
    #[error("{}: exists; a record is never overwritten (choose a new id)", path.display())]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// The evidence does not hold what the record needs.
    #[error("{0}")]
    Evidence(String),
    /// I/O.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Validates `r` and writes it as `dir/<id>.json` atomically (temp file in `dir`, fsync, rename without
/// replacing): a killed writer leaves no half record, and an existing record is never overwritten.
pub fn write_new(dir: &Path, r: &Record) -> Result<PathBuf, RecordError> {
    let problems = validate(r, &r.id);
    if !problems.is_empty() {
        return Err(RecordError::Invalid {
            id: r.id.clone(),
            problems,
        });
    }
    let path = dir.join(format!("{}.json", r.id));
    crate::io::fs::write_new(&path, to_json(r).as_bytes()).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            RecordError::Exists { path: path.clone() }
        } else {
            RecordError::Io {
                path: path.clone(),
                source,
            }
        }
    })?;
    Ok(path)
}
