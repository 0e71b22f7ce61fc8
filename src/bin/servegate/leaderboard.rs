//! `servegate leaderboard`: renders the leaderboard pages from the records (`servegate::records::leaderboard`
//! renders; this module reads the arguments, writes or compares the pages, prints, and maps the outcome to
//! the exit code).

use std::path::{Path, PathBuf};

use servegate::error::exit;
use servegate::records::leaderboard::{
    html_path, relative_link, render, unified_diff, write_page, DEFAULT_OUT, DEFAULT_RECORDS,
};

/// `servegate leaderboard` arguments.
#[derive(Debug, clap::Args)]
pub struct LeaderboardArgs {
    /// Write nothing: render in memory and exit 1 with a diff when a committed page differs.
    #[arg(long)]
    pub check: bool,
    /// The Markdown page (the HTML page is the same path with .html).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_OUT)]
    pub out: PathBuf,
    /// The record directory.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_RECORDS)]
    pub records: PathBuf,
}

/// Runs `servegate leaderboard`; returns the exit code.
pub fn cli(args: &LeaderboardArgs) -> i32 {
    cli_leaderboard(&args.records, Some(&args.out), args.check)
}

/// `servegate leaderboard [--check] [--out PATH] [--records DIR]`: renders the Markdown page to `out`
/// (default pages/leaderboard.md) and the HTML page beside it (`.html`). With `check`, writes nothing:
/// renders in memory, prints a unified diff for each page that differs from the file, and exits 1
/// (ASSERTION_FAILED) when one does. Invalid records: every problem, exit 3 (SPEC_INVALID); no record in the
/// directory: nothing rendered, exit 7 (NOTHING_CHECKED, as `records check`); I/O or template errors: exit 5
/// (EVIDENCE_ERROR).
fn cli_leaderboard(records_dir: &Path, out: Option<&Path>, check: bool) -> i32 {
    let records = match servegate::records::record::load_dir(records_dir) {
        Ok(r) => r,
        Err(refused) => {
            // Each refused record's problems; a directory that could not be read is said once, in the summary.
            if !refused.files.is_empty() {
                for l in &refused.lines {
                    errln!("{l}");
                }
            }
            errln!(
                "error: {}: nothing rendered; a page shows only records that re-derive from their evidence \
                 (see `servegate records check`)",
                refused.summary()
            );
            return exit::SPEC_INVALID;
        }
    };
    if records.is_empty() {
        // As `records check`: a directory of no record is nothing to do, not a page of nothing.
        errln!(
            "leaderboard: no record (*.json) in {}: nothing rendered",
            servegate::text::shown(&records_dir.display().to_string())
        );
        return exit::NOTHING_CHECKED;
    }
    let md_path = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_OUT));
    let html = html_path(&md_path);
    let page_dir = match md_path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let pages = match render(&records, &relative_link(&page_dir, records_dir)) {
        Ok(p) => p,
        Err(e) => {
            errln!("error: rendering the leaderboard: {e:#}");
            return exit::EVIDENCE_ERROR;
        }
    };
    let targets = [(&md_path, &pages.markdown), (&html, &pages.html)];
    if !check {
        // A page over a record (or over evidence) would destroy what it is rendered from.
        let mut inputs = servegate::evidence::guard::Inputs::new();
        inputs.dir(records_dir, "the record directory");
        let refusals = inputs.refuse([
            ("--out".to_string(), md_path.as_path()),
            ("the HTML page of --out".to_string(), html.as_path()),
        ]);
        for r in &refusals {
            errln!("error: {r}");
        }
        if !refusals.is_empty() {
            return exit::USAGE;
        }
    }
    if check {
        let mut differ = false;
        for (path, text) in targets {
            let committed = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => {
                    errln!("error: {}: {e}", path.display());
                    return exit::EVIDENCE_ERROR;
                }
            };
            if committed == *text {
                outln!("{}: up to date ({} records)", path.display(), records.len());
            } else {
                differ = true;
                let shown = path.display().to_string();
                out!(
                    "{}",
                    unified_diff(
                        &shown,
                        &format!("{shown} (rendered from {})", records_dir.display()),
                        &committed,
                        text,
                        3
                    )
                );
                outln!("{}: differs from what the records render; run `servegate leaderboard` and commit the result", path.display());
            }
        }
        return if differ {
            exit::ASSERTION_FAILED
        } else {
            exit::PASS
        };
    }
    for (path, text) in targets {
        if let Err(e) = write_page(path, text) {
            errln!("error: {}: {e}", path.display());
            return exit::EVIDENCE_ERROR;
        }
        outln!("wrote {} ({} records)", path.display(), records.len());
    }
    exit::PASS
}
