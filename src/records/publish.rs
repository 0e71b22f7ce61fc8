//! `servegate records publish --run DIR`: rewrites a run directory written before the privacy rule
//! ([`crate::evidence::public`]: no absolute home or checkout path, no host name unless the gate opts in)
//! into its public form, and the records that cite it with the new evidence digest, so `records check`
//! still re-derives them.
//!
//! What it does, in order: reads the host names the evidence recorded (`host.hostname` of every `run.json` and
//! `pair.json`), rewrites every file under the directory by [`Public::text`] (the checkout given by `--checkout`,
//! default the working directory; `$HOME`; those host names) with `host.hostname` emptied, computes the new
//! digest ([`crate::evidence::digest::digest_dir`]) and replaces the old digest by the new one in every record
//! of `--dir` whose `source.evidence_sha256` was the old one. Each file is written whole (temp and rename).
//! Idempotent: a directory already public is left as it is.

use std::path::{Path, PathBuf};

use crate::evidence::public::{rewrite_file, Public};

/// Every file under `dir`, recursively (symlinks not followed; a killed write's temp files left out:
/// `io::fs::is_temp_name`), sorted.
fn files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let ft = e.file_type()?;
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() && !crate::io::fs::is_temp_name(&e.file_name().to_string_lossy())
            {
                out.push(e.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The host names recorded in the `run.json` and `pair.json` files of `files`.
fn recorded_hosts(files: &[PathBuf]) -> Vec<String> {
    let mut hosts = Vec::new();
    for f in files {
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        if name != crate::evidence::layout::RUN_FILE && name != crate::evidence::layout::PAIR_FILE {
            continue;
        }
        let Ok(text) = crate::io::input::read_to_string(f, crate::io::input::MAX_EVIDENCE_BYTES)
        else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let Some(h) = v["host"]["hostname"].as_str().filter(|h| !h.is_empty()) {
            if !hosts.iter().any(|x| x == h) {
                hosts.push(h.to_string());
            }
        }
    }
    hosts
}

/// What [`publish`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// Files rewritten (paths relative to the run directory).
    pub files: Vec<String>,
    /// The digest before and after.
    pub digest_before: String,
    /// The digest after.
    pub digest_after: String,
    /// Records whose `source.evidence_sha256` was updated.
    pub records: Vec<PathBuf>,
}

/// Rewrites `run` into its public form and updates the records in `records_dir` that cite it (module doc).
/// Errors: the first file that cannot be read or written, named.
pub fn publish(
    run: &Path,
    checkout: &Path,
    home: Option<&Path>,
    records_dir: &Path,
) -> Result<Published, String> {
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let before = crate::evidence::digest::digest_dir(run).map_err(|e| err(run, e))?;
    let all = files(run).map_err(|e| err(run, e))?;
    let hosts = recorded_hosts(&all);
    let mut out = Published {
        digest_before: before.clone(),
        ..Published::default()
    };
    let hostname_field = regex::Regex::new(r#""hostname": "[^"]*""#).expect("valid regex");
    for f in &all {
        let mut changed = false;
        for (i, public) in std::iter::once(None)
            .chain(hosts.iter().map(Some))
            .enumerate()
        {
            // The paths once, then each recorded host name.
            let rule = if i == 0 {
                Public::new(Some(checkout), home, None)
            } else {
                Public::new(None, None, public.map(String::as_str))
            };
            changed |= rewrite_file(f, &rule).map_err(|e| err(f, e))?;
        }
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        if name == crate::evidence::layout::RUN_FILE || name == crate::evidence::layout::PAIR_FILE {
            let text = crate::io::input::read_to_string(f, crate::io::input::MAX_EVIDENCE_BYTES)
                .map_err(|e| err(f, e))?;
            let blank = hostname_field.replace_all(&text, r#""hostname": """#);
            if blank != text {
                crate::io::fs::write_atomic(f, blank.as_bytes()).map_err(|e| err(f, e))?;
                changed = true;
            }
        }
        if changed {
            out.files
                .push(f.strip_prefix(run).unwrap_or(f).display().to_string());
        }
    }
    out.digest_after = crate::evidence::digest::digest_dir(run).map_err(|e| err(run, e))?;
    if out.digest_after != before {
        for r in files(records_dir).map_err(|e| err(records_dir, e))? {
            if r.extension().is_none_or(|e| e != "json")
                || r.starts_with(records_dir.join("evidence"))
            {
                continue;
            }
            let text = crate::io::input::read_to_string(&r, crate::io::input::MAX_RECORD_BYTES)
                .map_err(|e| err(&r, e))?;
            let cited = format!("\"evidence_sha256\": \"{before}\"");
            if text.contains(&cited) {
                let new = text.replace(
                    &cited,
                    &format!("\"evidence_sha256\": \"{}\"", out.digest_after),
                );
                crate::io::fs::write_atomic(&r, new.as_bytes()).map_err(|e| err(&r, e))?;
                out.records.push(r);
            }
        }
    }
    Ok(out)
}
