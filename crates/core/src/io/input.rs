//! The one bounded reader of input files: every file servegate reads whole (a gate, a run directory's
//! files, a baseline, a record, an export's source, a tool's file to import) goes through [`read`] (or
//! [`read_to_string`], [`read_piped`], [`open_regular`]), so a path that is not a regular file, or one of
//! an absurd size, is refused with an error naming why, never read until memory runs out or waited on for
//! ever:
//!
//! - the path is opened `O_NONBLOCK`: opening a FIFO nobody writes would otherwise wait for a writer;
//! - what is open must be a regular file (a symlink is followed): a device (`/dev/zero` never ends), a FIFO,
//!   a socket or a directory is refused (`InvalidInput`) before a byte is read;
//! - a file over the caller's limit is refused (`FileTooLarge`) from its size before it is read, and a file
//!   growing while read is refused one byte past the limit.
//!
//! Errors are `std::io::Error`s whose message says the kind or the size and the limit; the caller names
//! the path, as it does for any other I/O error. `NotFound` and the like pass through unchanged.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// The most bytes of one file of a run directory read whole for judging (`run.json`, `NN.reads.jsonl`,
/// `NN.response.json`, `requests.jsonl`, a load point's files, a stored baseline): 1 GiB. A run keeps at
/// most 64 MiB of a body, a few times that in a reads file's encoding, so no recorded file comes near it;
/// a larger one (a link to a device, a sparse file) is refused before it is read.
pub const MAX_EVIDENCE_BYTES: u64 = 1 << 30;

/// The most bytes of a record, a records spec or an export's source (a results JSON, a record) read whole:
/// 256 MiB. A record or a results file is KiB to a few MiB of JSON.
pub const MAX_RECORD_BYTES: u64 = 256 << 20;

/// `limit` in words: whole GiB or MiB when it is one, else bytes.
pub fn limit_words(limit: u64) -> String {
    if limit >= 1 << 30 && limit.is_multiple_of(1 << 30) {
        format!("{} GiB", limit >> 30)
    } else if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{limit} bytes")
    }
}

/// What a file type is, in words, for an error refusing it.
fn kind_words(ft: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading without blocking (`O_NONBLOCK`: a FIFO's open never waits for a writer).
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// The error refusing a file of type `ft`.
fn not_regular(ft: std::fs::FileType) -> Error {
    Error::new(
        ErrorKind::InvalidInput,
        format!(
            "not a regular file ({}): servegate reads only regular files here",
            kind_words(ft)
        ),
    )
}

/// The error refusing `size` (words: a number, or "more than N") over `limit`.
fn too_large(size: String, limit: u64) -> Error {
    Error::new(
        ErrorKind::FileTooLarge,
        format!(
            "{size} bytes, over the {} servegate reads of such a file (refused unread: is it the right file?)",
            limit_words(limit)
        ),
    )
}

/// Opens `path` for reading when it is a regular file (a symlink followed), without ever blocking on the
/// open: a FIFO, socket, device or directory is refused (`InvalidInput`, the kind named). For callers that
/// stream the file with their own bound.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    open_regular_sized(path).map(|(f, _)| f)
}

/// [`open_regular`] and the file's size, bytes (from the one `fstat` that checked its type).
fn open_regular_sized(path: &Path) -> std::io::Result<(File, u64)> {
    let f = open_nonblocking(path)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(not_regular(meta.file_type()));
    }
    Ok((f, meta.len()))
}

/// Reads at most `limit` bytes of `f` (whose size on disk is `len`): more is `FileTooLarge`.
fn read_bounded(f: File, len: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    if len > limit {
        return Err(too_large(len.to_string(), limit));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(format!("more than {limit}"), limit));
    }
    Ok(bytes)
}

/// Reads the regular file at `path` whole, at most `limit` bytes (the module doc: anything else is
/// refused before it is read).
pub fn read(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let (f, len) = open_regular_sized(path)?;
    read_bounded(f, len, limit)
}

/// [`read`] as UTF-8 text (`InvalidData` when it is not, as `std::fs::read_to_string`).
pub fn read_to_string(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read(path, limit)?).map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("not valid UTF-8 (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// Like [`read`], for the inputs that may be given as a pipe (`--gate /dev/stdin`, a `<(...)` file): a
/// regular file or a FIFO, read to its end, at most `limit` bytes. The open never blocks; a FIFO is then
/// read blocking, so a pipe with a writer is read whole, and one nobody has open for writing reads as
/// empty (at once, never a hang). A device, socket or directory is refused.
pub fn read_piped(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileTypeExt;
    use std::os::unix::io::AsRawFd;
    let f = open_nonblocking(path)?;
    let meta = f.metadata()?;
    let ft = meta.file_type();
    if ft.is_file() {
        return read_bounded(f, meta.len(), limit);
    }
    if !ft.is_fifo() {
        return Err(not_regular(ft));
    }
    // SAFETY: fcntl on a descriptor `f` owns; clearing O_NONBLOCK so reads wait for the writer's bytes.
    unsafe {
        let fd = f.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(Error::last_os_error());
        }
    }
    read_bounded(f, 0, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_and_a_larger_one_refused_unread() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"hello").unwrap();
        assert_eq!(read(&p, 5).unwrap(), b"hello");
        assert_eq!(read_to_string(&p, 5).unwrap(), "hello");
        let e = read(&p, 4).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("5 bytes, over the 4 bytes"), "{e}");
        // sparse: no disk, refused from its size
        let big = d.path().join("big");
        File::create(&big).unwrap().set_len(4 << 30).unwrap();
        let e = read(&big, MAX_EVIDENCE_BYTES).unwrap_err();
        assert!(e.to_string().contains("over the 1 GiB"), "{e}");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let e = read(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        assert!(e.to_string().contains("a character device"), "{e}");
        assert!(read(d.path(), 1)
            .unwrap_err()
            .to_string()
            .contains("a directory"));
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read(&fifo, 1).unwrap_err().to_string().contains("a FIFO"));
        // a FIFO nobody writes reads as empty through read_piped, at once
        assert_eq!(read_piped(&fifo, 1).unwrap(), b"");
        assert!(read_piped(Path::new("/dev/zero"), 1).is_err());
    }
}
