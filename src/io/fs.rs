//! The one atomic file write: every file servegate writes whole (run.json, reports, leaderboard pages,
//! records, the signal-time status) goes through [`write_atomic`] or [`write_atomic_with`], so a reader
//! never sees a half-written file.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temp file in the same directory (the directory is created when
/// missing), written, synced, made `rw-r--r--` like any other written file, then renamed over `path`.
///
/// Errors: the `std::io::Error` of the step that failed; on error `path` is untouched and the temp file is
/// removed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Like [`write_atomic`], with the content streamed by `fill` into the temp file (for files too large to
/// hold whole). `fill` gets the open temp file; its error aborts the write.
pub fn write_atomic_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".servegate-")
        .tempfile_in(dir)?;
    readable(tmp.as_file())?;
    let out = fill(tmp.as_file_mut())?;
    tmp.as_file_mut().flush()?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(out)
}

/// Makes a file `rw-r--r--` (tempfile creates its files `rw-------`), so the file it becomes is readable
/// like any other written file.
pub fn readable(f: &File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    #[cfg(not(unix))]
    let _ = f;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_creates_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/out.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temp file left behind");
    }

    #[test]
    fn a_failed_fill_leaves_the_old_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("out.txt");
        write_atomic(&p, b"old").unwrap();
        let r = write_atomic_with(&p, |f| {
            f.write_all(b"half")?;
            Err::<(), _>(std::io::Error::other("boom"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
    }
}
