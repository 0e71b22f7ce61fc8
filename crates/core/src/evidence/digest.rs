//! The digest of a run directory: one SHA-256 over every file under it, so a record can name the exact
//! evidence it was built from and a later edit to any file (a reply, `run.json`, `gate.toml`) is caught.
//!
//! Definition: the files under the directory (recursively, symlinks not followed, other entries and the temp
//! files a killed write may leave skipped: `io::fs::is_temp_name`),
//! sorted by their `/`-separated relative path; for each one the line `<path>\0<bytes>\0<sha256 hex>\n`;
//! the digest is the lower-case hex SHA-256 of those lines concatenated. Linear in the bytes hashed.

use std::path::{Path, PathBuf};

/// The digest of `dir` as the module doc defines it (64 lower-case hex digits).
///
/// Errors: the `std::io::Error` of the first directory or file that cannot be read; `NotFound` when `dir`
/// does not exist.
pub fn digest_dir(dir: &Path) -> std::io::Result<String> {
    let mut files = Vec::new();
    collect(dir, PathBuf::new(), &mut files)?;
    files.sort();
    let mut lines = String::new();
    for rel in &files {
        let (sha, bytes) = crate::io::hash::sha256_file(&dir.join(rel))?;
        let name: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        lines.push_str(&format!("{}\0{bytes}\0{sha}\n", name.join("/")));
    }
    Ok(crate::io::hash::sha256_bytes(lines.as_bytes()))
}

fn collect(root: &Path, rel: PathBuf, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(&rel))? {
        let entry = entry?;
        let ft = entry.file_type()?;
        let r = rel.join(entry.file_name());
        if ft.is_dir() {
            collect(root, r, out)?;
        } else if ft.is_file() && !crate::io::fs::is_temp_name(&entry.file_name().to_string_lossy())
        {
            out.push(r);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_edit_changes_the_digest_and_order_does_not() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("arm1")).unwrap();
        std::fs::write(t.path().join("run.json"), b"{}").unwrap();
        std::fs::write(t.path().join("arm1/00.reads.jsonl"), b"a").unwrap();
        let d1 = digest_dir(t.path()).unwrap();
        assert_eq!(d1, digest_dir(t.path()).unwrap());
        assert!(crate::io::hash::is_full_hex(&d1));
        std::fs::write(t.path().join("arm1/00.reads.jsonl"), b"b").unwrap();
        assert_ne!(d1, digest_dir(t.path()).unwrap());
        std::fs::write(t.path().join("arm1/00.reads.jsonl"), b"a").unwrap();
        assert_eq!(d1, digest_dir(t.path()).unwrap());
        std::fs::write(t.path().join("extra"), b"").unwrap();
        assert_ne!(d1, digest_dir(t.path()).unwrap());
        assert!(digest_dir(&t.path().join("missing")).is_err());
    }
}
