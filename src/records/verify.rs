//! The one loader of what may be published: a records folder checked ([`super::store::check_dir`]) and
//! every record in it re-derived from its evidence ([`verify_dir`]); [`load_dir`] and [`load_file`] return
//! the records only when every one holds, else what was refused ([`Refused`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::kind::{rederive, rederive_with};
use super::schema::{Problem, Record};
use super::store::{check_dir, check_file, evidence_path, problem_lines, Checked};

/// [`check_dir`], then every record that passed it re-derived from its evidence ([`rederive`]): what
/// `servegate records check` runs. Linear in the records and the evidence bytes (each evidence directory is
/// loaded, digested and judged once per record that cites it).
pub fn verify_dir(dir: &Path) -> std::io::Result<Vec<Checked>> {
    let mut checked = check_dir(dir)?;
    let mut digests = BTreeMap::new();
    for c in checked.iter_mut() {
        let Some(r) = &c.record else { continue };
        if c.problems.is_empty() {
            let more = rederive_with(dir, r, &mut digests);
            c.problems.extend(more);
        } else if let Some(ev) = r
            .source
            .evidence
            .as_deref()
            .filter(|e| !e.trim().is_empty())
        {
            // An invalid record is not re-derived, but evidence it cites that does not exist is named too.
            let at = evidence_path(dir, ev);
            if r.source.kind == "gate_run" && !at.is_dir() {
                c.problems.push(Problem::new(
                    "source.evidence",
                    format!("{ev:?} does not exist (looked at {})", at.display()),
                ));
            }
        }
    }
    Ok(checked)
}

/// Why a record directory publishes nothing: the records `servegate records check` refuses in it (invalid,
/// or not what their evidence re-derives to), or the directory's read error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The record directory.
    pub dir: PathBuf,
    /// `FILE: FIELD: MESSAGE`, one per problem (as `records check` prints them), or the read error.
    pub lines: Vec<String>,
    /// The refused record files, in file order.
    pub files: Vec<PathBuf>,
    /// The record files the directory holds (0 when it could not be read).
    pub total: usize,
}

impl Refused {
    /// How many were refused, and which: `1 of 21 records in records refused by `servegate records check`
    /// (x.json)`; the read error when the directory could not be read.
    pub fn summary(&self) -> String {
        if self.files.is_empty() {
            return self.lines.join("; ");
        }
        let names: Vec<String> = self
            .files
            .iter()
            .map(|f| {
                f.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| f.display().to_string())
            })
            .collect();
        format!(
            "{} of {} record{} in {} refused by `servegate records check` ({})",
            self.files.len(),
            self.total,
            if self.total == 1 { "" } else { "s" },
            self.dir.display(),
            names.join(", ")
        )
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        f.write_str(&self.summary())
    }
}

/// The one loader of what may be published: every record of `dir`, when `servegate records check` accepts
/// them all ([`verify_dir`]: each valid, ids unique, pairs consistent, and every `gate_run` record re-derived
/// from its evidence); else what it refuses ([`Refused`]: every problem, how many records and which). The
/// leaderboard pages and every export load records through it, so a record whose figures its evidence
/// does not give (values doubled: 42.85 tok/s stated, 21.86 re-derived) is never rendered or exported.
pub fn load_dir(dir: &Path) -> Result<Vec<Record>, Refused> {
    let checked = verify_dir(dir).map_err(|e| Refused {
        dir: dir.to_path_buf(),
        lines: vec![format!("{}: cannot read directory: {e}", dir.display())],
        files: Vec::new(),
        total: 0,
    })?;
    let lines = problem_lines(&checked);
    if !lines.is_empty() {
        return Err(Refused {
            dir: dir.to_path_buf(),
            lines,
            files: checked
                .iter()
                .filter(|c| !c.problems.is_empty())
                .map(|c| c.file.clone())
                .collect(),
            total: checked.len(),
        });
    }
    Ok(checked.into_iter().filter_map(|c| c.record).collect())
}

/// One record file loaded as [`load_dir`] loads a directory: valid, and re-derived from its evidence
/// (relative evidence paths resolved from its directory, as `records check --dir` does).
pub(crate) fn load_file(file: &Path) -> Result<Record, Refused> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut c = check_file(file);
    if let (Some(r), true) = (&c.record, c.problems.is_empty()) {
        let more = rederive(dir, r);
        c.problems.extend(more);
    }
    match c.record {
        Some(r) if c.problems.is_empty() => Ok(r),
        _ => Err(Refused {
            dir: dir.to_path_buf(),
            lines: problem_lines(std::slice::from_ref(&c)),
            files: vec![c.file.clone()],
            total: 1,
        }),
    }
}
