//! Privacy of written evidence (no absolute path or host name in what is published): evidence and records are published (`data/records/evidence/`),
//! so what servegate writes carries no absolute home or checkout path and no host name unless the gate opts in.
//!
//! The rule ([`Public::text`]): every absolute path under the checkout (the working directory) is written
//! relative to it (`/work/repo/gates/x.toml` → `gates/x.toml`), every other path under the home directory
//! with `~` (`/root/.cache/servegate/m.gguf` → `~/.cache/servegate/m.gguf`), and the host name, as a whole
//! word, as `<host>`; `run.json` `host.hostname` is written empty. A prefix matches only at a path boundary
//! (`/rootfs` is not under `/root`). A gate opts in to its host name with `[record] publish_host = true`
//! (the key that also puts it in the gate's records). Applied by [`crate::evidence::EvidenceWriter`] to
//! `run.json` and `pair.json` as they are written and to `serve.log` and `setup.log` when the run ends
//! (before judging, so a re-judge of published evidence sees what the run's judge saw). [`expand`] reads a
//! written path back (`~` and repo-relative to absolute).

use std::path::{Path, PathBuf};

/// What to hide, and how: see the module doc.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Public {
    /// The checkout (working directory): paths under it are written relative to it.
    pub checkout: Option<String>,
    /// The home directory: paths under it are written `~/...`.
    pub home: Option<String>,
    /// The host name to hide (`None`: the gate publishes it).
    pub hostname: Option<String>,
}

/// A directory usable as a prefix: absolute, not the root, without a trailing `/`.
fn prefix(d: Option<&Path>) -> Option<String> {
    let d = d?;
    if !d.is_absolute() || d.parent().is_none() {
        return None;
    }
    let s = d.display().to_string();
    Some(s.trim_end_matches('/').to_string()).filter(|s| !s.is_empty())
}

/// True for a character that continues a path component or a word.
fn wordy(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

impl Public {
    /// The rule for these directories and host name (pure; see the module doc). A host name that is empty or
    /// `localhost` hides nothing.
    pub fn new(checkout: Option<&Path>, home: Option<&Path>, hostname: Option<&str>) -> Public {
        Public {
            checkout: prefix(checkout),
            home: prefix(home),
            hostname: hostname
                .map(str::trim)
                .filter(|h| !h.is_empty() && *h != "localhost")
                .map(String::from),
        }
    }

    /// The rule for this process: the working directory, `$HOME`, and this machine's host name unless
    /// `publish_host`.
    pub fn from_env(publish_host: bool) -> Public {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let cwd = std::env::current_dir().ok();
        let host = (!publish_host).then(|| crate::io::host::host_info().hostname);
        Public::new(cwd.as_deref(), home.as_deref(), host.as_deref())
    }

    /// `s` with the checkout's paths made relative, the home's written `~` and the host name `<host>`.
    /// A host name immediately followed by `":` (a JSON key) is kept.
    pub fn text(&self, s: &str) -> String {
        let mut out = s.to_string();
        if let Some(c) = &self.checkout {
            out = replace_path(&out, c, "");
        }
        if let Some(h) = &self.home {
            out = replace_path(&out, h, "~");
        }
        if let Some(host) = &self.hostname {
            out = replace_word(&out, host, "<host>");
        }
        out
    }

    /// True when [`Self::text`] would change `s`.
    pub fn reveals(&self, s: &str) -> bool {
        self.text(s) != s
    }
}

/// Every occurrence of the directory `dir` at a path boundary replaced: `dir/rest` by `to/rest` (by `rest`
/// when `to` is empty), `dir` alone by `to` (by `.` when `to` is empty).
fn replace_path(s: &str, dir: &str, to: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(dir) {
        let before = if i > 0 {
            rest[..i].chars().last()
        } else {
            out.chars().last()
        };
        let after = rest[i + dir.len()..].chars().next();
        let starts = !before.is_some_and(|c| wordy(c) || c == '/' || c == '~');
        let ends = !after.is_some_and(wordy);
        out.push_str(&rest[..i]);
        if starts && ends {
            match (after, to.is_empty()) {
                (Some('/'), true) => {
                    // `dir/x` → `x`: skip the slash too.
                    rest = &rest[i + dir.len() + 1..];
                    continue;
                }
                (_, true) => out.push('.'),
                (_, false) => out.push_str(to),
            }
        } else {
            out.push_str(dir);
        }
        rest = &rest[i + dir.len()..];
    }
    out.push_str(rest);
    out
}

/// Every whole-word occurrence of `word` replaced by `to`, except one followed by `":` (a JSON key).
fn replace_word(s: &str, word: &str, to: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(word) {
        let before = if i > 0 {
            rest[..i].chars().last()
        } else {
            out.chars().last()
        };
        let tail = &rest[i + word.len()..];
        let whole = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
            && !tail
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
        out.push_str(&rest[..i]);
        if whole && !tail.starts_with("\":") {
            out.push_str(to);
        } else {
            out.push_str(word);
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// A path as written by [`Public::text`] read back as a file path: `~` and `~/x` under `home`, a relative
/// path under `checkout`, an absolute one as it is.
pub fn expand(path: &str, checkout: Option<&Path>, home: Option<&Path>) -> PathBuf {
    if let (Some(rest), Some(h)) = (path.strip_prefix('~'), home) {
        if rest.is_empty() {
            return h.to_path_buf();
        }
        if let Some(r) = rest.strip_prefix('/') {
            return h.join(r);
        }
    }
    let p = Path::new(path);
    match checkout {
        Some(c) if p.is_relative() => c.join(p),
        _ => p.to_path_buf(),
    }
}

/// [`expand`] with this process's working directory and `$HOME`.
pub fn expand_here(path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cwd = std::env::current_dir().ok();
    expand(path, cwd.as_deref(), home.as_deref())
}

/// Rewrites the text file `path` in place by `public` (line by line, written whole: temp file and rename),
/// when it exists and reveals something. Invalid UTF-8 is kept as it was in lines that reveal nothing.
pub fn rewrite_file(path: &Path, public: &Public) -> std::io::Result<bool> {
    use std::io::{BufRead, Write};
    let file = match crate::io::input::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    // First pass: is there anything to hide?
    let mut any = false;
    for line in std::io::BufReader::new(&file).split(b'\n') {
        if public.reveals(&String::from_utf8_lossy(&line?)) {
            any = true;
            break;
        }
    }
    if !any {
        return Ok(false);
    }
    let mut src = std::io::BufReader::new(crate::io::input::open_regular(path)?);
    crate::io::fs::write_atomic_with(path, |f| {
        let mut w = std::io::BufWriter::new(f);
        let mut line = Vec::new();
        loop {
            line.clear();
            if src.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            // The line end is written as it came.
            let body_len = line.len() - usize::from(line.ends_with(b"\n"));
            let (body, end) = line.split_at(body_len);
            match std::str::from_utf8(body) {
                Ok(t) => w.write_all(public.text(t).as_bytes())?,
                Err(_) => {
                    let t = String::from_utf8_lossy(body);
                    if public.reveals(&t) {
                        w.write_all(public.text(&t).as_bytes())?;
                    } else {
                        w.write_all(body)?;
                    }
                }
            }
            w.write_all(end)?;
        }
        w.flush()
    })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> Public {
        Public::new(
            Some(Path::new("/work/main")),
            Some(Path::new("/root")),
            Some("vm"),
        )
    }

    #[test]
    fn checkout_paths_become_relative_home_paths_tilde_and_the_host_name_goes() {
        let p = p();
        assert_eq!(
            p.text("/work/main/gates/../scripts/reference-serve"),
            "gates/../scripts/reference-serve"
        );
        assert_eq!(
            p.text("loading '/root/.cache/servegate/m.gguf' on vm"),
            "loading '~/.cache/servegate/m.gguf' on <host>"
        );
        assert_eq!(p.text("cd /root && ls /work/main"), "cd ~ && ls .");
        // Only at a path boundary, and a JSON key named like the host stays.
        assert_eq!(
            p.text("/rootfs /x/root/y /work/mainline vmx \"vm\": 1"),
            "/rootfs /x/root/y /work/mainline vmx \"vm\": 1"
        );
        assert_eq!(p.text("\"hostname\": \"vm\","), "\"hostname\": \"<host>\",");
        assert!(!p.reveals("nothing here"));
    }

    #[test]
    fn a_checkout_under_home_is_relative_and_expand_reads_paths_back() {
        let p = Public::new(
            Some(Path::new("/home/u/sg")),
            Some(Path::new("/home/u")),
            None,
        );
        assert_eq!(
            p.text("/home/u/sg/gates/a.toml /home/u/m.gguf"),
            "gates/a.toml ~/m.gguf"
        );
        let (c, h) = (Some(Path::new("/home/u/sg")), Some(Path::new("/home/u")));
        assert_eq!(expand("~/m.gguf", c, h), PathBuf::from("/home/u/m.gguf"));
        assert_eq!(
            expand("gates/a.toml", c, h),
            PathBuf::from("/home/u/sg/gates/a.toml")
        );
        assert_eq!(expand("/abs", c, h), PathBuf::from("/abs"));
        // A root or relative directory hides nothing.
        let none = Public::new(
            Some(Path::new("/")),
            Some(Path::new("rel")),
            Some("localhost"),
        );
        assert!(!none.reveals("/root/x localhost"));
    }

    #[test]
    fn a_log_is_rewritten_in_place_only_when_it_reveals_something() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("serve.log");
        std::fs::write(&f, b"model /root/m.gguf\n\xff raw\nend\n").unwrap();
        assert!(rewrite_file(&f, &p()).unwrap());
        assert_eq!(
            std::fs::read(&f).unwrap(),
            b"model ~/m.gguf\n\xff raw\nend\n"
        );
        std::fs::write(&f, b"vm\r\nlast").unwrap();
        assert!(rewrite_file(&f, &p()).unwrap());
        assert_eq!(std::fs::read(&f).unwrap(), b"<host>\r\nlast");
        assert!(!rewrite_file(&f, &p()).unwrap());
        assert!(!rewrite_file(&t.path().join("missing"), &p()).unwrap());
    }
}
