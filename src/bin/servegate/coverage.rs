//! `servegate coverage` and `servegate census`: the flags, the pages' writing or checking, and the printing;
//! the library renders the coverage page and the gap list (`servegate::coverage`).

use std::path::PathBuf;

use servegate::coverage::census::{gaps, read_peer, read_registry, render, unrowed};
use servegate::coverage::page::{cells_from, link_base, regressions, states_of};
use servegate::coverage::{census, page};
use servegate::error::exit;

/// `servegate coverage`.
#[derive(Debug, Clone, clap::Args)]
pub struct CoverageArgs {
    /// The evidence root: run directories of matrix gates (`<gate>[<model>]/<stamp>/`), committed.
    #[arg(long, default_value = "data/coverage/runs")]
    pub runs: PathBuf,
    /// The Markdown page (the HTML page is the same path with .html).
    #[arg(long, default_value = "pages/coverage.md")]
    pub out: PathBuf,
    /// The records whose `source.evidence` is a matrix-gate run count as evidence too (pages/coverage.md);
    /// a missing directory counts as none.
    #[arg(long, default_value = "data/records")]
    pub records: PathBuf,
    /// The registry (its `expire_days`).
    #[arg(long, default_value = "data/coverage/registry.toml")]
    pub registry: PathBuf,
    /// Write nothing: exit 1 when the committed page differs from the evidence's page.
    #[arg(long)]
    pub check: bool,
}

/// Runs `servegate coverage`: renders the page (or checks it); exit 1 on a coverage regression (a VERIFIED cell
/// of the committed page now PARTIAL or NOT-LOADING) or, with `--check`, a page that differs; 2 bad input; 5 a write failed.
pub fn cli_coverage(args: &CoverageArgs) -> i32 {
    let expire_days = match census::read_registry(&args.registry) {
        Ok(r) => r.expire_days,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let base = link_base(&args.out, &args.runs);
    let cells = cells_from(&args.runs, Some(&args.records));
    let page = match page::render(&cells, &args.runs, &base, expire_days) {
        Ok(p) => p,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let old = std::fs::read_to_string(&args.out).unwrap_or_default();
    let html_out = args.out.with_extension("html");
    let old_html = std::fs::read_to_string(&html_out).unwrap_or_default();
    let mut code = exit::PASS;
    for r in regressions(&states_of(&old), &page.states) {
        errln!("coverage regression: {r}");
        code = exit::ASSERTION_FAILED;
    }
    if args.check {
        if old_html != page.html {
            errln!(
                "{} differs from the page the evidence gives; run `servegate coverage` and commit it",
                html_out.display()
            );
            code = exit::ASSERTION_FAILED;
        }
        if old != page.markdown {
            errln!(
                "{} differs from the page the evidence in {} gives; run `servegate coverage` and commit it",
                args.out.display(),
                args.runs.display()
            );
            for d in similar::TextDiff::from_lines(&old, &page.markdown)
                .unified_diff()
                .header("committed", "from evidence")
                .to_string()
                .lines()
                .take(60)
            {
                errln!("{d}");
            }
            code = exit::ASSERTION_FAILED;
        } else {
            outln!(
                "{}: up to date ({} cells)",
                args.out.display(),
                page.states.len()
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
    outln!("wrote {} ({} cells)", args.out.display(), page.states.len());
    code
}

/// `servegate census`.
#[derive(Debug, Clone, clap::Args)]
pub struct CensusArgs {
    /// The peer's model list: FastFlowLM model_list.json, Lemonade server_models.json, a plain list, or a
    /// directory.
    #[arg(long)]
    pub peer: PathBuf,
    /// Our registry.
    #[arg(long, default_value = "data/coverage/registry.toml")]
    pub registry: PathBuf,
    /// The evidence root whose matrix-gate runs settle rows (committed, as for `servegate coverage`).
    #[arg(long, default_value = "data/coverage/runs")]
    pub runs: PathBuf,
    /// Write the gap list here (Markdown) instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Fail (exit 1) naming every peer family root with no registry row.
    #[arg(long)]
    pub check: bool,
}

/// Runs `servegate census`: prints (or writes) the gap list; exit 0, 1 (`--check` found roots with no row),
/// 2 (bad input), 5 (the gap list could not be written).
pub fn cli_census(args: &CensusArgs) -> i32 {
    let peer = match read_peer(&args.peer) {
        Ok(p) => p,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let reg = match read_registry(&args.registry) {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let evidence = servegate::coverage::evidence_roots(&args.runs);
    let rows = gaps(&peer, &reg, &evidence);
    let text = render(&rows, &args.peer.display().to_string());
    match &args.out {
        Some(p) => {
            if let Err(e) = servegate::sinks::report::write_atomic(p, text.as_bytes()) {
                errln!("error: {}: {e}", p.display());
                return exit::EVIDENCE_ERROR;
            }
        }
        None => out!("{text}"),
    }
    let missing = unrowed(&rows);
    if args.check && !missing.is_empty() {
        for r in &missing {
            let names: Vec<&str> = r.peer.iter().map(|m| m.name.as_str()).collect();
            errln!(
                "census: peer family root `{}` ({}) has no row in {}",
                r.root,
                names.join(", "),
                args.registry.display()
            );
        }
        return exit::ASSERTION_FAILED;
    }
    exit::PASS
}
