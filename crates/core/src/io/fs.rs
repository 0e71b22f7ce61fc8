//! The one output writer: every file servegate writes whole (run.json, reports, JSON, JUnit, leaderboard
//! pages, records, the signal-time status) goes through [`write_atomic`] or [`write_atomic_with`], so a reader
//! never sees a half-written file and an output never destroys what it replaces:
//!
//! - a regular file (or a new path) is written to a temp file in its directory and renamed over it; an
//!   existing file keeps its permission bits (a new one is `rw-r--r--`);
//! - a symlink is followed: its final target is replaced atomically the same way, and the link stays;
//! - a character device or FIFO (`/dev/null`, `/dev/stdout`, a pipe) is written through, never replaced;
//! - anything else (a directory, a block device, a socket) is refused with an error naming the path.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How the name of every temp file servegate writes begins (the atomic writes here, a reply's reads and a
/// `url` serve's log copy in the evidence): a temp file is renamed into place when whole, or removed; only a
/// process killed mid-write (SIGKILL, a second stop signal) leaves one, which [`is_temp_name`] knows and
/// [`remove_temps`] removes.
pub const TEMP_PREFIX: &str = ".servegate-";

/// True for the name of a temp file a killed write may leave: [`TEMP_PREFIX`], or the tempfile crate's
/// default (`.tmp` and 6 letters or digits, `tempfile::Builder` at 3.x), which older versions' evidence
/// writes used. Never a name of the evidence (`run.json`, `NN.*`, `serve.log`...).
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
        || name
            .strip_prefix(".tmp")
            .is_some_and(|rest| rest.len() == 6 && rest.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Removes the temp files ([`is_temp_name`]) in `dir` and its subdirectories (a pair's arms, a load sweep's
/// points, contract checks), best effort; symlinks are not followed. Returns the paths removed.
pub fn remove_temps(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file()
                && is_temp_name(&e.file_name().to_string_lossy())
                && std::fs::remove_file(e.path()).is_ok()
            {
                removed.push(e.path());
            }
        }
    }
    removed
}

/// Writes `bytes` to `path` as the module doc describes (atomic for regular files, written through for
/// character devices and FIFOs). The directory is created when missing.
///
/// Errors: the `std::io::Error` of the step that failed; on error a regular `path` is untouched and the
/// temp file is removed. A directory, block device or socket at `path` gives `InvalidInput`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// What `path` is, for writing: where to write and how.
enum Target {
    /// Replace this regular file (or create it), keeping `mode` when it existed.
    Replace(PathBuf, Option<u32>),
    /// Write through (a character device or FIFO).
    Through(PathBuf),
}

/// Follows symlinks (to their final target, relative links resolved against the link's directory) and
/// classifies what is there.
fn target(path: &Path) -> std::io::Result<Target> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Target::Replace(p, None))
            }
            Err(e) => return Err(e),
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let link = std::fs::read_link(&p)?;
            p = match p.parent() {
                Some(dir) if link.is_relative() => dir.join(link),
                _ => link,
            };
            continue;
        }
        if ft.is_file() {
            return Ok(Target::Replace(p, Some(mode_of(&meta))));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if ft.is_char_device() || ft.is_fifo() {
                return Ok(Target::Through(p));
            }
        }
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file, symlink, character device or FIFO: refusing to replace it",
                p.display()
            ),
        ));
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{}: too many levels of symbolic links", path.display()),
    ))
}

#[cfg(unix)]
fn mode_of(meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(_: &std::fs::Metadata) -> u32 {
    0o644
}

/// Like [`write_atomic`], with the content streamed by `fill` (for files too large to hold whole). `fill`
/// gets the open temp file (or, for a device or FIFO, the opened target); its error aborts the write.
pub fn write_atomic_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let (real, mode) = match target(path)? {
        Target::Through(p) => {
            let mut f = std::fs::OpenOptions::new().write(true).open(&p)?;
            let out = fill(&mut f)?;
            f.flush()?;
            return Ok(out);
        }
        Target::Replace(p, mode) => (p, mode),
    };
    let dir = match real.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(&dir)?;
    match mode {
        Some(m) => set_mode(tmp.as_file(), m)?,
        None => readable(tmp.as_file())?,
    }
    let out = fill(tmp.as_file_mut())?;
    tmp.as_file_mut().flush()?;
    tmp.as_file().sync_all()?;
    tmp.persist(&real).map_err(|e| e.error)?;
    Ok(out)
}

/// Where writing `path` with [`write_atomic`] would land, as an absolute path with every symlink followed:
/// the final target of a link chain, canonicalised when it exists, else its nearest existing ancestor
/// canonicalised with the rest appended (a report not written yet resolves to where it would be created).
/// `None` for a character device or FIFO (`/dev/null`, a pipe): written through, it replaces no file.
pub fn landing(path: &Path) -> Option<PathBuf> {
    match target(path) {
        Ok(Target::Through(_)) => None,
        Ok(Target::Replace(p, _)) => Some(absolute(&p)),
        Err(_) => Some(absolute(path)),
    }
}

/// `p` canonicalised, or (when it does not exist) its nearest existing ancestor canonicalised with the
/// missing components appended.
fn absolute(p: &Path) -> PathBuf {
    use std::path::Component;
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let comps: Vec<Component> = p.components().collect();
    for k in (0..comps.len()).rev() {
        let prefix: PathBuf = comps[..k].iter().collect();
        let base = if prefix.as_os_str().is_empty() {
            Path::new(".")
        } else {
            prefix.as_path()
        };
        if let Ok(mut c) = base.canonicalize() {
            // The missing directories will be created as plain directories (`create_dir_all`), so `..` among
            // them is lexical: `new/../g.toml` lands on `g.toml`.
            for comp in &comps[k..] {
                match comp {
                    Component::ParentDir => {
                        c.pop();
                    }
                    Component::CurDir => {}
                    other => c.push(other.as_os_str()),
                }
            }
            return c;
        }
    }
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Removes the output at `path` before a run writes it anew (so a run that ends early leaves no stale
/// report), without destroying what is not servegate's to remove: a regular file is removed; a symlink is
/// followed and its final target removed when that is a regular file (the link stays, and the next
/// [`write_atomic`] recreates the target through it); a character device or FIFO (`/dev/null`) is left
/// alone. Nothing there is not an error.
///
/// Errors: the `std::io::Error` of the removal; `InvalidInput` for a directory, block device or socket.
pub fn clear_output(path: &Path) -> std::io::Result<()> {
    match target(path)? {
        Target::Through(_) | Target::Replace(_, None) => Ok(()),
        Target::Replace(p, Some(_)) => match std::fs::remove_file(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
    }
}

/// Writes `bytes` to a new regular file at `path`, atomically (temp file in the directory, synced, renamed
/// without replacing, `rw-r--r--`): for files that are never overwritten (records). The directory is
/// created when missing.
///
/// Errors: `AlreadyExists` when `path` exists (anything: file, link, device); otherwise the
/// `std::io::Error` of the step that failed, with no temp file left.
pub fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} exists", path.display()),
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(&dir)?;
    readable(tmp.as_file())?;
    tmp.as_file_mut().write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist_noclobber(path).map_err(|e| e.error)?;
    Ok(())
}

fn set_mode(f: &File, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = (f, mode);
    Ok(())
}

/// Makes a file `rw-r--r--` (tempfile creates its files `rw-------`), so the file it becomes is readable
/// like any other written file.
pub fn readable(f: &File) -> std::io::Result<()> {
    set_mode(f, 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The temp names a killed write may leave are known (this crate's prefix, tempfile's default), and no
    /// evidence name is taken for one; `remove_temps` removes them in subfolders too, nothing else.
    #[test]
    fn temp_files_are_known_by_name_and_removed_alone() {
        for t in [".servegate-AbC123", ".tmpAb12Cd", ".servegate-x"] {
            assert!(is_temp_name(t), "{t}");
        }
        for n in [
            "run.json",
            "00.reads.jsonl",
            "serve.log",
            ".tmp",
            ".tmpfile.json",
            "tmpAb12Cd",
        ] {
            assert!(!is_temp_name(n), "{n}");
        }
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("arm1")).unwrap();
        for f in [
            "run.json",
            ".tmpAb12Cd",
            "arm1/.servegate-QwErTy",
            "arm1/00.reads.jsonl",
        ] {
            std::fs::write(tmp.path().join(f), b"x").unwrap();
        }
        let mut removed = remove_temps(tmp.path());
        removed.sort();
        assert_eq!(
            removed,
            vec![
                tmp.path().join(".tmpAb12Cd"),
                tmp.path().join("arm1/.servegate-QwErTy")
            ]
        );
        assert!(tmp.path().join("run.json").exists());
        assert!(tmp.path().join("arm1/00.reads.jsonl").exists());
    }

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

    #[cfg(unix)]
    #[test]
    fn an_existing_file_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("out.txt");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&p, b"new").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        let fresh = tmp.path().join("fresh.txt");
        write_atomic(&fresh, b"x").unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_is_followed_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        let target = tmp.path().join("real/page.md");
        std::fs::write(&target, b"old").unwrap();
        let link = tmp.path().join("page.md");
        std::os::unix::fs::symlink("real/page.md", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    /// A named pipe at `path` (mkfifo(3), mode 0600): no process is started in this crate, tests included.
    #[cfg(unix)]
    fn mkfifo(path: &std::path::Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(
            rc,
            0,
            "mkfifo {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_written_through_and_a_directory_refused() {
        use std::os::unix::fs::FileTypeExt;
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("pipe");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(&fifo).unwrap())
        };
        write_atomic(&fifo, b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        let err = write_atomic(tmp.path(), b"x").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("refusing"), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn clearing_removes_files_and_link_targets_but_never_a_fifo() {
        use std::os::unix::fs::FileTypeExt;
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("report.json");
        std::fs::write(&f, b"old").unwrap();
        clear_output(&f).unwrap();
        assert!(!f.exists());
        clear_output(&f).unwrap(); // nothing there: fine
        let target = tmp.path().join("real.xml");
        std::fs::write(&target, b"old").unwrap();
        let link = tmp.path().join("junit.xml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        clear_output(&link).unwrap();
        assert!(!target.exists());
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        write_atomic(&link, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let fifo = tmp.path().join("pipe");
        mkfifo(&fifo);
        clear_output(&fifo).unwrap();
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
    }
}
