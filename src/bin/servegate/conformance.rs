//! `servegate conformance`: the flags, the page's writing or checking, and the printing; the library renders
//! the table (`servegate::coverage::conformance`, docs/contract.md "Conformance").

use std::path::PathBuf;

use servegate::coverage::census;
use servegate::coverage::conformance::{columns, render};
use servegate::coverage::page::link_base;
use servegate::error::exit;

/// `servegate conformance`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConformanceArgs {
    /// The evidence root: run directories of `[contract]` gates (`<gate>/<stamp>/`), committed.
    #[arg(long, default_value = "data/coverage/contract")]
    pub runs: PathBuf,
    /// The Markdown page (the HTML page is the same path with .html).
    #[arg(long, default_value = "pages/conformance.md")]
    pub out: PathBuf,
    /// The registry (its `expire_days`).
    #[arg(long, default_value = "data/coverage/registry.toml")]
    pub registry: PathBuf,
    /// Write nothing: exit 1 when the committed pages differ from the evidence's.
    #[arg(long)]
    pub check: bool,
}

/// Runs `servegate conformance`: renders the pages (or checks them); exit 1 with `--check` when a page
/// differs (or there is no evidence), 2 bad input, 5 a write failed.
pub fn cli_conformance(args: &ConformanceArgs) -> i32 {
    let expire_days = match census::read_registry(&args.registry) {
        Ok(r) => r.expire_days,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let cols = columns(&args.runs);
    if cols.is_empty() {
        errln!(
            "error: no complete [contract] gate run under {} (<gate>/<stamp>/ run directories)",
            args.runs.display()
        );
        return exit::USAGE;
    }
    let base = link_base(&args.out, &args.runs);
    let page = match render(&cols, &args.runs, &base, expire_days) {
        Ok(p) => p,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let html_out = args.out.with_extension("html");
    if args.check {
        let mut code = exit::PASS;
        for (path, text) in [(&args.out, &page.markdown), (&html_out, &page.html)] {
            let old = std::fs::read_to_string(path).unwrap_or_default();
            if &old != text {
                errln!(
                    "{} differs from the page the evidence in {} gives; run `servegate conformance` and commit it",
                    path.display(),
                    args.runs.display()
                );
                for d in similar::TextDiff::from_lines(&old, text)
                    .unified_diff()
                    .header("committed", "from evidence")
                    .to_string()
                    .lines()
                    .take(40)
                {
                    errln!("{d}");
                }
                code = exit::ASSERTION_FAILED;
            }
        }
        if code == exit::PASS {
            outln!(
                "{}: up to date ({} runtimes)",
                args.out.display(),
                cols.len()
            );
        }
        return code;
    }
    for (path, text) in [(&args.out, &page.markdown), (&html_out, &page.html)] {
        if let Err(e) = servegate::sinks::report::write_atomic(path, text.as_bytes()) {
            errln!("error: {}: {e}", path.display());
            return exit::EVIDENCE_ERROR;
        }
    }
    outln!("wrote {} ({} runtimes)", args.out.display(), cols.len());
    exit::PASS
}
