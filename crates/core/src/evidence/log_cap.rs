//! The cap on `serve.log` on disk: a serve that logs without end (a debug flag, a warning per token) must
//! not fill the disk of every run directory it lands in. When the run is over (the serve stopped) and the
//! log is longer than the cap, the first half of the cap and the last half are kept, cut at line ends, and
//! one marker line in between says how many bytes were dropped ([`MARK`]); `run.json`'s notes say it too.
//! `route` reads the marker: a route line in the dropped middle cannot be seen, so a `slow` pattern absent
//! from a capped log proves nothing (INDETERMINATE), and the verdict says the log was capped
//! (docs/evidence.md, "serve.log cap").
//!
//! Default [`DEFAULT_LOG_CAP_BYTES`] (32 MiB: 16 MiB of head, where the route and load lines are, and 16 MiB
//! of tail, where the stop and the last errors are), under the 64 MiB that judging reads
//! ([`super::SERVE_LOG_JUDGE_CAP`]), so a capped log is always judged whole. A gate sets its own with
//! `[serve] log_cap_bytes`. The cap applies once the serve has stopped: during the run the serve writes
//! to the file directly (its own file descriptor, line-interleaved), so the disk holds the whole log until
//! the run ends.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The default and the smallest cap, defined with the gate key (`[serve] log_cap_bytes`) they bound.
pub use crate::spec::{DEFAULT_LOG_CAP_BYTES, MIN_LOG_CAP_BYTES};

/// Starts the marker line written where bytes were dropped; the line reads
/// `<MARK> N bytes dropped (bytes A-B of the log as written; [serve] log_cap_bytes = C)`. NUL-delimited so
/// no serve line can be taken for it.
pub const MARK: &str = "\u{0}servegate: serve.log capped:\u{0}";

/// What capping dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Bytes dropped.
    pub bytes: u64,
    /// Byte offset (in the log as written) of the first byte dropped.
    pub from: u64,
    /// The log's size as written, bytes.
    pub total: u64,
}

impl Dropped {
    /// The marker line (without its newline), as written into the capped log.
    pub fn line(&self, cap: u64) -> String {
        format!(
            "{MARK} {} bytes dropped (bytes {}-{} of the log as written; [serve] log_cap_bytes = {cap})",
            self.bytes,
            self.from,
            self.from + self.bytes
        )
    }

    /// The note `run.json` carries.
    pub fn note(&self, cap: u64) -> String {
        format!(
            "serve.log capped at {cap} bytes ([serve] log_cap_bytes): {} of its {} bytes dropped (bytes {}-{}); route lines there cannot be seen",
            self.bytes,
            self.total,
            self.from,
            self.from + self.bytes
        )
    }
}

/// Caps the log at `path` to about `cap` bytes (see the module doc): None when it was within the cap (or
/// absent), else what was dropped. The file is replaced whole ([`crate::io::fs::write_atomic`]).
pub fn cap_file(path: &Path, cap: u64) -> std::io::Result<Option<Dropped>> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let total = f.metadata()?.len();
    if total <= cap {
        return Ok(None);
    }
    let mut out = Vec::new();
    let (_, dropped) = copy_capped(&mut f, 0, total, cap, &mut out)?;
    crate::io::fs::write_atomic(path, &out)?;
    Ok(dropped)
}

/// Copies bytes `from..end` of `src` into `out`, at most about `cap` of them: a stretch within the cap whole
/// (streamed); a longer one as its first half of the cap up to its last line end, [`Dropped::line`], and its
/// last half from its first line start, so neither side holds a cut line and the log a 13 GB serve writes is
/// never read whole (at most `cap` bytes are held). Offsets in [`Dropped`] are of `src` as written (`total` =
/// `end`). Returns the bytes of `src` written (marker excluded) and what was dropped. The one cap of
/// `serve.log`, for a started serve's log at the end of its run ([`cap_file`]) and a url serve's copy
/// ([`super::copy_log_since`]).
pub fn copy_capped(
    src: &mut std::fs::File,
    from: u64,
    end: u64,
    cap: u64,
    out: &mut impl std::io::Write,
) -> std::io::Result<(u64, Option<Dropped>)> {
    let cap = cap.max(2);
    src.seek(SeekFrom::Start(from))?;
    if end.saturating_sub(from) <= cap {
        let n = std::io::copy(&mut src.take(end.saturating_sub(from)), out)?;
        return Ok((n, None));
    }
    let half = cap / 2;
    let mut head = Vec::with_capacity(half as usize);
    src.take(half).read_to_end(&mut head)?;
    // Whole lines only: the head ends after its last newline, the tail starts at a line start.
    if let Some(i) = head.iter().rposition(|b| *b == b'\n') {
        head.truncate(i + 1);
    }
    let tail_at = end - half;
    src.seek(SeekFrom::Start(tail_at - 1))?;
    let mut tail = Vec::with_capacity(half as usize + 1);
    src.take(half + 1).read_to_end(&mut tail)?;
    // tail[0] is the byte before the tail: a newline there means the tail already starts a line.
    let skip = if tail.first() == Some(&b'\n') {
        1
    } else {
        tail.iter()
            .position(|b| *b == b'\n')
            .map(|i| i + 1)
            .unwrap_or(1)
    };
    let tail = &tail[skip.min(tail.len())..];
    let dropped = Dropped {
        bytes: end - from - head.len() as u64 - tail.len() as u64,
        from: from + head.len() as u64,
        total: end,
    };
    out.write_all(&head)?;
    if !head.is_empty() && !head.ends_with(b"\n") {
        out.write_all(b"\n")?;
    }
    out.write_all(dropped.line(cap).as_bytes())?;
    out.write_all(b"\n")?;
    out.write_all(tail)?;
    Ok((head.len() as u64 + tail.len() as u64, Some(dropped)))
}

/// Where a capped log's marker is: the 1-based line number of the marker line and the bytes it says were
/// dropped; None for a log that was not capped.
pub fn marker_in(log: &str) -> Option<(usize, u64)> {
    log.lines().enumerate().find_map(|(i, l)| {
        let rest = l.strip_prefix(MARK)?;
        let n = rest.split_whitespace().next()?.parse().ok()?;
        Some((i + 1, n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_over_the_cap_keeps_whole_lines_of_head_and_tail_and_says_what_was_dropped() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("serve.log");
        let mut text = String::from("route: fast kernel\n");
        for i in 0..20_000 {
            text.push_str(&format!("token {i:05} decoded\n"));
        }
        text.push_str("stopped\n");
        std::fs::write(&p, &text).unwrap();
        let cap = MIN_LOG_CAP_BYTES;
        let d = cap_file(&p, cap).unwrap().unwrap();
        let kept = std::fs::read_to_string(&p).unwrap();
        assert!(kept.len() as u64 <= cap + 200, "{}", kept.len());
        assert!(kept.starts_with("route: fast kernel\ntoken 00000 decoded\n"));
        assert!(kept.ends_with("token 19999 decoded\nstopped\n"));
        // Whole lines on both sides of the marker; the bytes add up.
        let (line, n) = marker_in(&kept).unwrap();
        assert_eq!(n, d.bytes);
        let lines: Vec<&str> = kept.lines().collect();
        assert!(lines[line - 2].ends_with(" decoded") && lines[line].ends_with(" decoded"));
        let marker_len = d.line(cap).len() as u64 + 1;
        assert_eq!(kept.len() as u64 - marker_len + d.bytes, text.len() as u64);
        assert_eq!(d.total, text.len() as u64);
        assert!(d
            .note(cap)
            .contains(&format!("{} of its {} bytes dropped", d.bytes, d.total)));
        // Within the cap (now): left alone; absent: nothing to do.
        assert_eq!(cap_file(&p, cap * 2).unwrap(), None);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), kept);
        assert_eq!(cap_file(&t.path().join("none"), cap).unwrap(), None);
        assert_eq!(marker_in("a\nb\n"), None);
    }

    /// A stretch whose halves fall on line starts loses no whole line to the cut; one line longer than the
    /// cap is kept cut (the marker on a line of its own); a stretch within the cap is copied as it is.
    #[test]
    fn copy_capped_cuts_at_line_ends_and_drops_no_whole_line_it_need_not() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("log");
        let copy = |text: &str, from: u64, cap: u64| {
            std::fs::write(&p, text).unwrap();
            let mut f = std::fs::File::open(&p).unwrap();
            let mut out = Vec::new();
            let (n, d) = copy_capped(&mut f, from, text.len() as u64, cap, &mut out).unwrap();
            (String::from_utf8(out).unwrap(), n, d)
        };
        // Ten-byte lines after a 6-byte prefix not copied: both halves (100 bytes) fall on line starts.
        let body: String = (0..100).map(|i| format!("line {i:04}\n")).collect();
        let (out, n, d) = copy(&format!("start\n{body}"), 6, 200);
        let d = d.unwrap();
        assert_eq!((n, d.bytes, d.from, d.total), (200, 800, 106, 1006));
        assert!(out.starts_with("line 0000\n") && out.ends_with("line 0090\nline 0091\nline 0092\nline 0093\nline 0094\nline 0095\nline 0096\nline 0097\nline 0098\nline 0099\n"), "{out}");
        assert_eq!(marker_in(&out).map(|m| m.1), Some(800));
        // One line longer than the cap.
        let long = "x".repeat(1000);
        let (out, _, d) = copy(&long, 0, 200);
        assert!(d.is_some() && out.starts_with(&"x".repeat(100)), "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with(MARK)).count(), 1);
        // Within the cap.
        let (out, n, d) = copy("a\nb\n", 0, 200);
        assert_eq!((out.as_str(), n, d), ("a\nb\n", 4, None));
    }
}
