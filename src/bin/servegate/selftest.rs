//! `servegate self-test`: the flags and the printing; the library judges the embedded shapes
//! (`servegate::run::selftest`).

use servegate::error::exit;
use servegate::run::selftest;

/// `servegate self-test` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct SelfTestArgs {
    /// Run only the shapes whose name contains this (e.g. `seed`, `kind2`).
    pub filter: Option<String>,
    /// List the shapes (name, kind, what it is, what it must give) and judge nothing.
    #[arg(long)]
    pub list: bool,
    /// Also print every verdict line of every shape.
    #[arg(long, short)]
    pub verbose: bool,
}

/// The `self-test` subcommand: one line per shape, a summary, exit 0 when every shape gave what it must, 1
/// when one did not, 5 when the temporary directory could not be written, 7 when the filter selects no shape.
pub fn cli(args: &SelfTestArgs) -> i32 {
    if args.list {
        for (name, text) in selftest::SHAPES {
            match selftest::parse_shape(text) {
                Ok(s) => outln!("{name} (kind {}): {} -> {}", s.kind, s.about, s.expect),
                Err(e) => outln!("{name}: invalid bundle: {e}"),
            }
        }
        return exit::PASS;
    }
    let results = match selftest::run(args.filter.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            errln!("error: self-test: cannot write the shapes to a temporary directory: {e}");
            return exit::EVIDENCE_ERROR;
        }
    };
    if results.is_empty() {
        errln!(
            "error: self-test: no shape matches {:?} (`servegate self-test --list` lists them)",
            args.filter.as_deref().unwrap_or("")
        );
        return exit::NOTHING_CHECKED;
    }
    for r in &results {
        outln!("{}", r.line());
        if args.verbose {
            for d in &r.detail {
                outln!("       {d}");
            }
        }
    }
    let bad: Vec<&str> = results
        .iter()
        .filter(|r| !r.ok())
        .map(|r| r.name.as_str())
        .collect();
    let n = results.len();
    if bad.is_empty() {
        outln!(
            "self-test: PASS ({n} of {n} shapes as expected; judged by servegate {})",
            env!("CARGO_PKG_VERSION")
        );
        exit::PASS
    } else {
        outln!(
            "self-test: FAIL ({} of {n} shapes as expected; not: {})",
            n - bad.len(),
            bad.join(", ")
        );
        exit::ASSERTION_FAILED
    }
}
