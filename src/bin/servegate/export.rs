//! `servegate export`: the flags, the reading of the sources, and the printing or writing of the file the
//! library serializes (`servegate::sinks::exports`).

use std::path::PathBuf;

use servegate::error::exit;
use servegate::sinks::exports::{figures_of, serialize, Kind};
use servegate::sinks::report::Results;

/// `servegate export`: dashboard files from records or from a run.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("format").required(true).args(["bmf", "gab_bigger", "gab_smaller", "openmetrics"])))]
pub struct ExportArgs {
    /// Sources: a records directory (default data/records/), record files, a results JSON (servegate.results/2, or
    /// /1 from older runs), or a run directory (re-judged with its own gate.toml).
    pub sources: Vec<PathBuf>,
    /// Bencher Metric Format JSON (`bencher run --adapter json --file FILE`).
    #[arg(long)]
    pub bmf: bool,
    /// github-action-benchmark `customBiggerIsBetter` JSON: the rates (tok/s).
    #[arg(long)]
    pub gab_bigger: bool,
    /// github-action-benchmark `customSmallerIsBetter` JSON: the times (ms, s).
    #[arg(long)]
    pub gab_smaller: bool,
    /// OpenMetrics text, e.g. for a GitLab `metrics` report.
    #[arg(long)]
    pub openmetrics: bool,
    /// Write here (atomically) instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl ExportArgs {
    /// The format asked for.
    pub fn kind(&self) -> Kind {
        if self.bmf {
            Kind::Bmf
        } else if self.gab_bigger {
            Kind::GabBigger
        } else if self.gab_smaller {
            Kind::GabSmaller
        } else {
            Kind::OpenMetrics
        }
    }
}

/// `servegate export` (the figures from `sinks::exports`, printed or written here); returns the exit code (0; 3 when `records check` refuses a record of a source, and
/// nothing is exported; 5 when a source cannot be read or the file written; 7 when a records directory holds no
/// record, as `records check`).
pub fn cli(
    args: &ExportArgs,
    judge_dir: &dyn Fn(&std::path::Path) -> Result<Results, String>,
) -> i32 {
    let sources = if args.sources.is_empty() {
        vec![PathBuf::from("data/records")]
    } else {
        args.sources.clone()
    };
    if let Some(out) = &args.output {
        // An export over one of its own sources (or over evidence) would destroy what it reads.
        let mut inputs = servegate::evidence::guard::Inputs::new();
        for s in &sources {
            inputs.path(s, "a source of this export");
        }
        let refusals = inputs.refuse([("-o".to_string(), out.as_path())]);
        for r in &refusals {
            errln!("error: {r}");
        }
        if !refusals.is_empty() {
            return exit::USAGE;
        }
    }
    let mut figures = Vec::new();
    for s in &sources {
        match figures_of(s, judge_dir) {
            Ok(f) if f.is_empty() && is_records_dir(s) => {
                // As `records check`: a directory of no record is nothing to do, not an empty export.
                errln!(
                    "export: no record (*.json) in {}: nothing exported",
                    servegate::text::shown(&s.display().to_string())
                );
                return exit::NOTHING_CHECKED;
            }
            Ok(f) => figures.extend(f),
            Err(e) => {
                for l in &e.detail {
                    errln!("{l}");
                }
                errln!("error: {}", e.message);
                return e.code;
            }
        }
    }
    let (bytes, notes) = serialize(args.kind(), &figures);
    for n in notes {
        errln!("note: {n}");
    }
    match &args.output {
        Some(p) => match servegate::sinks::report::write_atomic(p, &bytes) {
            Ok(()) => exit::PASS,
            Err(e) => {
                errln!("error: {}: cannot write the export: {e}", p.display());
                exit::EVIDENCE_ERROR
            }
        },
        None => {
            // On a terminal or a CI log a record's text holds no workflow command and no raw control byte:
            // JSON through `text::json` (the same values), OpenMetrics text through `text::lines`.
            let raw = String::from_utf8_lossy(&bytes);
            let text = match args.kind() {
                Kind::OpenMetrics => servegate::text::lines(&raw),
                _ => servegate::text::json(&raw),
            };
            // Checked and flushed: an export that cannot be written exits 5 saying so (`error: stdout: ...`).
            servegate::io::printer::stdout_bytes(text.as_bytes());
            servegate::io::printer::flush_stdout();
            exit::PASS
        }
    }
}

/// A source directory read as records (not a run directory or an A-B-B-A pair directory).
fn is_records_dir(s: &std::path::Path) -> bool {
    s.is_dir()
        && !s.join(servegate::evidence::layout::RUN_FILE).is_file()
        && !servegate::evidence::is_pair_dir(s)
}
