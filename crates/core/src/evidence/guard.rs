//! What an output may not land on. Reports (`--json`, `--junit`, `--summary`, `SERVEGATE_JSON` ...), exports
//! (`export -o`) and pages (`leaderboard --out`) are removed or replaced before or after their command reads its
//! inputs, so an output path that is an input would destroy it: `judge RUN --json RUN/run.json` deleted the
//! evidence it was about to judge, `SERVEGATE_JSON=g.toml servegate run g.toml` the gate. Every such path is
//! checked here first, resolved as [`crate::io::fs::landing`] resolves it (canonicalised, symlinks followed, the
//! nearest existing parent when the file does not exist yet), and refused before anything is touched when it
//! lands on:
//!
//! - an input the command names: a gate file, a file it reads (a `[load] dataset`, a record, a results JSON);
//! - anything inside a directory it reads or writes (the run directory judged, a stored baseline, data/records/);
//! - anything inside a run directory (a directory holding `run.json` or `pair.json`): evidence is what a run
//!   saw, and a report written into it would replace or join it;
//! - another output of the same command (each would overwrite the other).

use std::path::{Path, PathBuf};

use crate::evidence::layout::{PAIR_FILE, RUN_FILE};
use crate::io::fs::landing;

/// One guarded input: shown as given, compared as resolved.
#[derive(Debug, Clone)]
struct Guarded {
    /// What it is, for the message ("the gate file", "the run directory being judged").
    what: String,
    /// The path as the command was given it.
    shown: PathBuf,
    /// The path resolved ([`landing`]); `None` for a device or FIFO (never an input to protect).
    resolved: Option<PathBuf>,
    /// A directory: everything inside it is guarded too.
    dir: bool,
}

/// The inputs of one command that no output may land on (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    guarded: Vec<Guarded>,
}

impl Inputs {
    /// No inputs yet (run directories are guarded whatever is added).
    pub fn new() -> Inputs {
        Inputs::default()
    }

    /// Guards the file at `path`, described as `what` ("the gate file").
    pub fn file(&mut self, path: &Path, what: impl Into<String>) -> &mut Inputs {
        self.add(path, what.into(), false)
    }

    /// Guards the directory at `path` and everything inside it, described as `what`.
    pub fn dir(&mut self, path: &Path, what: impl Into<String>) -> &mut Inputs {
        self.add(path, what.into(), true)
    }

    /// Guards `path` as a directory when it is one, else as a file.
    pub fn path(&mut self, path: &Path, what: impl Into<String>) -> &mut Inputs {
        let dir = path.is_dir();
        self.add(path, what.into(), dir)
    }

    /// Guards the files a gate reads besides itself: its `[load] dataset` and the stored baselines its
    /// `[assert.regression]` and `[assert.drift]` name (directories).
    pub fn gate(&mut self, g: &crate::spec::GateSpec) -> &mut Inputs {
        self.file(&g.file, "the gate file");
        if let Some(d) = g.load.as_ref().and_then(|l| l.spec.dataset.as_ref()) {
            self.file(d, "the gate's [load] dataset");
        }
        if let Some(r) = &g.assertions.regression {
            if let crate::spec::regression::RegressionBaseline::Stored(dirs) = &r.baseline {
                for d in dirs {
                    if let Ok(p) = crate::evidence::baseline::resolve(&g.file, d) {
                        self.dir(&p, "a stored baseline of the gate's [assert.regression]");
                    }
                }
            }
        }
        if let Some(d) = &g.assertions.drift {
            for b in &d.baselines {
                if let Ok(p) = crate::evidence::baseline::resolve(&g.file, Path::new(b)) {
                    self.dir(&p, "a stored baseline of the gate's [assert.drift]");
                }
            }
        }
        self
    }

    fn add(&mut self, path: &Path, what: String, dir: bool) -> &mut Inputs {
        self.guarded.push(Guarded {
            what,
            shown: path.to_path_buf(),
            resolved: landing(path),
            dir,
        });
        self
    }

    /// Why writing an output at `output` would destroy an input, as "it is the gate file g.toml" or "it is
    /// inside the run directory being judged RUN"; `None` when it lands on none (or is a device or FIFO).
    pub fn clash(&self, output: &Path) -> Option<String> {
        let out = landing(output)?;
        for g in &self.guarded {
            let Some(r) = &g.resolved else { continue };
            if out == *r || same_file(&out, r) {
                return Some(format!("it is {} {}", g.what, g.shown.display()));
            }
            if g.dir && out.starts_with(r) {
                return Some(format!("it is inside {} {}", g.what, g.shown.display()));
            }
        }
        // Any run directory, whichever command: evidence is never a report's place.
        out.ancestors()
            .skip(1)
            .find(|a| {
                is_evidence_summary(&a.join(RUN_FILE)) || is_evidence_summary(&a.join(PAIR_FILE))
            })
            .map(|a| format!("it is inside the run directory {} (evidence)", a.display()))
    }

    /// One refusal per output of `outputs` (each a label such as `--json` and its path) that lands on an
    /// input or on an earlier output of the list; empty when every one is safe to write. Each message names
    /// the output, where it resolves, and what it would destroy.
    pub fn refuse<'a>(&self, outputs: impl IntoIterator<Item = (String, &'a Path)>) -> Vec<String> {
        let mut seen: Vec<(String, PathBuf)> = Vec::new();
        let mut refusals = Vec::new();
        for (label, p) in outputs {
            let resolved = landing(p);
            let shown = match &resolved {
                Some(r) if r.as_path() != p => {
                    format!("{} (resolves to {})", p.display(), r.display())
                }
                _ => p.display().to_string(),
            };
            if let Some(why) = self.clash(p) {
                refusals.push(format!(
                    "{label} {shown}: refused: {why}, which this command reads; a report there would \
                     destroy it (nothing was removed or written: choose another path)"
                ));
            } else if let Some(r) = resolved {
                if let Some((other, _)) = seen.iter().find(|(_, q)| *q == r || same_file(q, &r)) {
                    refusals.push(format!(
                        "{label} {shown}: refused: {other} names the same file; each would overwrite the other \
                         (nothing was removed or written: choose another path)"
                    ));
                } else {
                    seen.push((label, r));
                }
            }
        }
        refusals
    }
}

/// True when `path` is a file that is (or may be) a run's or a pair's summary: anything but a readable JSON
/// object whose `schema` is another servegate document (a results JSON written as `--json x/run.json` makes
/// `x/` no run directory). Unreadable or unparseable counts as evidence (refusing is the safe side). Reads
/// the file as a stream, keeping only `schema`.
fn is_evidence_summary(path: &Path) -> bool {
    if !path.is_file() {
        return false;
    }
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<String>,
    }
    let Ok(f) = crate::io::input::open_regular(path) else {
        return true;
    };
    match serde_json::from_reader::<_, Head>(std::io::BufReader::new(f)) {
        // Another servegate document (a results JSON, a record): not a run's summary.
        Ok(Head {
            schema: Some(schema),
        }) if schema.starts_with("servegate.") => {
            schema.starts_with("servegate.run/") || schema.starts_with("servegate.pair/")
        }
        _ => true,
    }
}

/// True when `a` and `b` both exist and are the same file (a hard link, a bind mount).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    #[cfg(not(unix))]
    let _ = (a, b);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(root: &Path) -> PathBuf {
        let d = root.join("run");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(RUN_FILE), "{}").unwrap();
        std::fs::write(d.join("00.reads.jsonl"), "").unwrap();
        d
    }

    #[test]
    fn a_results_json_named_run_json_makes_no_run_directory() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(
            out.join(RUN_FILE),
            "{\"schema\": \"servegate.results/1\", \"gates\": []}",
        )
        .unwrap();
        let g = Inputs::new();
        assert_eq!(g.clash(&out.join("run.xml")), None);
        // A run's own summary (or one that cannot be read as another document) still guards its directory.
        std::fs::write(
            out.join(RUN_FILE),
            format!("{{\"schema\": \"{}\"}}", crate::evidence::RUN_SCHEMA),
        )
        .unwrap();
        assert!(g.clash(&out.join("run.xml")).is_some());
        std::fs::write(out.join(RUN_FILE), "not json").unwrap();
        assert!(g.clash(&out.join("run.xml")).is_some());
    }

    #[test]
    fn a_file_inside_a_run_directory_is_refused_existing_or_not() {
        let t = tempfile::tempdir().unwrap();
        let d = run_dir(t.path());
        let i = Inputs::new();
        for f in [RUN_FILE, "00.reads.jsonl", "new.json", "sub/new.json"] {
            let why = i.clash(&d.join(f)).expect(f);
            assert!(why.contains("inside the run directory"), "{why}");
        }
        assert_eq!(i.clash(&t.path().join("results.json")), None);
    }

    #[test]
    fn symlinks_and_dot_dots_are_followed() {
        let t = tempfile::tempdir().unwrap();
        let gate = t.path().join("g.toml");
        std::fs::write(&gate, "x").unwrap();
        let mut i = Inputs::new();
        i.file(&gate, "the gate file");
        let link = t.path().join("link.json");
        std::os::unix::fs::symlink(&gate, &link).unwrap();
        assert!(i.clash(&link).unwrap().contains("the gate file"));
        let dotted = t.path().join("nope/../g.toml");
        std::fs::create_dir_all(t.path().join("nope")).unwrap();
        assert!(i.clash(&dotted).is_some());
        let hard = t.path().join("hard.json");
        std::fs::hard_link(&gate, &hard).unwrap();
        assert!(i.clash(&hard).is_some(), "a hard link is the same file");
        assert_eq!(i.clash(Path::new("/dev/null")), None);
    }

    #[test]
    fn two_outputs_on_one_file_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("r.json");
        let r = Inputs::new().refuse([
            ("--json".to_string(), p.as_path()),
            ("--junit".to_string(), p.as_path()),
        ]);
        assert_eq!(r.len(), 1);
        assert!(
            r[0].starts_with("--junit") && r[0].contains("--json names the same file"),
            "{}",
            r[0]
        );
    }
}
