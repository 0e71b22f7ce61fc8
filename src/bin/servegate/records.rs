//! `servegate records ...`: the commands over the records folder (check, add, publish) and the load records
//! `run --record` writes. The library builds, checks and writes records (`servegate::records`); this module
//! reads the arguments, prints, and maps the outcome to the exit code.

use std::path::{Path, PathBuf};

use servegate::error::exit;
use servegate::records::load_records::{self, WriteError};
use servegate::records::record::{
    from_pair_run_as, from_run, from_run_forced, terminal_safe, verify_dir, write_new, Kind,
    RecordError, RunRecordSpec,
};
use servegate::spec::GateSpec;

/// `servegate records ...` arguments.
#[derive(Debug, clap::Args)]
pub struct RecordsArgs {
    /// What to do with the records.
    #[command(subcommand)]
    pub command: RecordsCmd,
}

/// `servegate records` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RecordsCmd {
    /// Rewrite a run directory written before the privacy rule into its public form (no absolute home or
    /// checkout path, no host name) and update the records citing it with its new evidence digest
    /// (records::publish; docs/records.md).
    Publish {
        /// The run directory.
        #[arg(long)]
        run: PathBuf,
        /// The checkout the evidence was written in (its paths become relative); default the working directory.
        #[arg(long)]
        checkout: Option<PathBuf>,
        /// The record directory whose records cite the run.
        #[arg(long, default_value = "data/records")]
        dir: PathBuf,
    },
    /// Validate every record (schema, units, n = number of values, median and range recomputed, sha256, ids
    /// unique and equal to file names); print every problem as FILE: FIELD: MESSAGE. Exit 3 when one is invalid.
    Check {
        /// The record directory.
        #[arg(long, default_value = "data/records")]
        dir: PathBuf,
    },
    /// Write a record from a finished run directory (a pair run's directory gives a pair record): every judged
    /// value, the model file's sha256, the serve's version, load, known answer. Never overwrites a record.
    Add {
        /// The run directory (holds run.json, or pair.json for a pair gate) and its gate.toml.
        #[arg(long)]
        run: PathBuf,
        /// A TOML file of what the run cannot know about itself (record::RunRecordSpec: id, metric,
        /// model_name, model_file, weights, device, route, engine, what_would_make_it_wrong, ...).
        #[arg(long)]
        spec: PathBuf,
        /// Override the spec's id.
        #[arg(long)]
        id: Option<String>,
        /// Override the spec's metric (decode_rate or first_token).
        #[arg(long)]
        metric: Option<String>,
        /// For a pair run: whose record (`ours` or `theirs`); each names the other's figure.
        #[arg(long, default_value = "ours")]
        role: String,
        /// The record directory.
        #[arg(long, default_value = "data/records")]
        dir: PathBuf,
        /// Record a run whose verdicts failed anyway (single-runtime runs only): the record carries the
        /// failure in `source.forced` and the page flags it. Incomplete runs and failed requests are still
        /// refused.
        #[arg(long)]
        force: bool,
    },
}

/// Runs a `servegate records` subcommand; returns the exit code.
pub fn cli(args: &RecordsArgs) -> i32 {
    match &args.command {
        RecordsCmd::Check { dir } => cli_records_check(dir),
        RecordsCmd::Publish { run, checkout, dir } => cli_publish(run, checkout.as_deref(), dir),
        RecordsCmd::Add {
            run,
            spec,
            id,
            metric,
            role,
            dir,
            force,
        } => {
            if role != "ours" && role != "theirs" {
                errln!("error: --role is `ours` or `theirs`, got {role:?}");
                return exit::USAGE;
            }
            cli_records_add(
                run,
                spec,
                id.as_deref(),
                metric.as_deref(),
                role,
                dir,
                *force,
            )
        }
    }
}

/// `servegate records add --run DIR --spec FILE [--id ID] [--metric M] [--role R] [--dir records] [--force]`:
/// builds the records of the run directory by its kind (`Kind::of_run`: a load run's records, a pair
/// record from `role`'s side, else [`from_run`], [`from_run_forced`] with `force`, refused for pair and
/// load runs) with its own gate.toml, and writes them with [`write_new`]. Exit 0 written; 3 the spec, gate
/// or record is invalid or the id is taken; 5 the evidence cannot be read or does not hold what a record needs.
#[allow(clippy::too_many_arguments)]
fn cli_records_add(
    run: &Path,
    spec_file: &Path,
    id: Option<&str>,
    metric: Option<&str>,
    role: &str,
    dir: &Path,
    force: bool,
) -> i32 {
    let mut spec: RunRecordSpec = match servegate::io::input::read_to_string(
        spec_file,
        servegate::io::input::MAX_RECORD_BYTES,
    )
    .map_err(|e| e.to_string())
    .and_then(|t| toml::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            errln!("error: {}: {e}", spec_file.display());
            return exit::SPEC_INVALID;
        }
    };
    if let Some(id) = id {
        spec.id = id.to_string();
    }
    if let Some(m) = metric {
        spec.metric = m.to_string();
    }
    let gate = match servegate::spec::load(&run.join(servegate::evidence::layout::GATE_FILE)) {
        Ok(g) => g,
        Err(e) => {
            errln!("error: {e}");
            return exit::SPEC_INVALID;
        }
    };
    let built = match Kind::of_run(&gate, run) {
        Kind::Load => {
            if force {
                errln!("error: --force records single-runtime runs only; load records are written from a passing load run");
                return exit::USAGE;
            }
            return write_load_records(&gate, run, &spec, dir);
        }
        Kind::Pair => {
            if force {
                errln!("error: --force records single-runtime runs only; a pair record is written from a passing pair run");
                return exit::USAGE;
            }
            servegate::loaded::load_pair(run).map(|pe| from_pair_run_as(&gate, &pe, &spec, role))
        }
        Kind::Single if force => {
            servegate::loaded::load(run).map(|ev| from_run_forced(&gate, &ev, &spec))
        }
        Kind::Single => servegate::loaded::load(run).map(|ev| from_run(&gate, &ev, &spec)),
    };
    let record = match built {
        Err(e) => {
            errln!("error: {e}");
            return exit::EVIDENCE_ERROR;
        }
        Ok(Err(e)) => {
            errln!("error: {e}");
            return code_of(&e);
        }
        Ok(Ok(r)) => r,
    };
    match write_new(dir, &record) {
        Ok(path) => {
            let mut flag = if record.indicative() {
                format!(", indicative (n = {})", record.n)
            } else {
                String::new()
            };
            if !record.unmeasured.is_empty() {
                flag.push_str(&format!(", {}", terminal_safe(&record.unmeasured_line())));
            }
            if let Some(why) = &record.source.forced {
                flag.push_str(&format!(", FORCED: {}", terminal_safe(why)));
            }
            outln!(
                "wrote {} ({} {} {} {}, n = {}{flag}); now run `servegate leaderboard`",
                path.display(),
                terminal_safe(&record.model.name),
                record.metric.name,
                record.fmt(record.value),
                record.metric.unit,
                record.n
            );
            exit::PASS
        }
        Err(e) => {
            errln!("error: {e}");
            match e {
                RecordError::Io { .. } | RecordError::Evidence(_) => exit::EVIDENCE_ERROR,
                _ => exit::SPEC_INVALID,
            }
        }
    }
}
/// `servegate records check [--dir DIR]`: prints one line per record (`ok`, with `indicative (n = 2)` where
/// n < 3) and every problem as `FILE: FIELD: MESSAGE`. Exit 0 when all are valid, 3 (SPEC_INVALID) otherwise.
fn cli_records_check(dir: &Path) -> i32 {
    let checked = match verify_dir(dir) {
        Ok(c) => c,
        Err(e) => {
            errln!("error: {}: cannot read directory: {e}", dir.display());
            return exit::SPEC_INVALID;
        }
    };
    let mut bad = 0;
    for c in &checked {
        if c.problems.is_empty() {
            let r = c.record.as_ref().expect("a record without problems parsed");
            let mut flags = Vec::new();
            if r.indicative() {
                flags.push(format!("indicative (n = {})", r.n));
            }
            if let Some(lp) = r.load_point.as_ref().filter(|_| r.statistic == "window") {
                flags.push(format!(
                    "load point {}: one figure over its {:.0} ms window",
                    lp.point, lp.window_ms
                ));
            } else if r.values.is_none() {
                flags.push("per-value figures not published".to_string());
            }
            if !r.unmeasured.is_empty() {
                flags.push(r.unmeasured_line());
            }
            if r.sha256_prefix_only() {
                flags.push("sha256 prefix only".to_string());
            }
            if let Some(why) = &r.source.unverifiable {
                flags.push(format!("unverifiable: {why}"));
            } else if r.source.kind == "gate_run" {
                flags.push("re-derived from its evidence".to_string());
            }
            if let Some(why) = &r.source.forced {
                flags.push(format!("FORCED: {why}"));
            }
            let flags = if flags.is_empty() {
                String::new()
            } else {
                terminal_safe(&format!("; {}", flags.join("; ")))
            };
            outln!(
                "{}: ok ({} {} {} {}, n = {}{flags})",
                c.file.display(),
                terminal_safe(&r.model.name),
                terminal_safe(&r.metric.name),
                r.fmt(r.value),
                terminal_safe(&r.metric.unit),
                r.n
            );
        } else {
            bad += 1;
            for p in &c.problems {
                errln!("{}: {}", c.file.display(), terminal_safe(&p.to_string()));
            }
        }
    }
    let problems: usize = checked.iter().map(|c| c.problems.len()).sum();
    outln!(
        "records: {} checked in {}, {} invalid, {problems} problems",
        checked.len(),
        dir.display(),
        bad
    );
    if checked.is_empty() {
        errln!(
            "records: no record (*.json) in {}: nothing was checked",
            dir.display()
        );
        exit::NOTHING_CHECKED
    } else if bad == 0 {
        exit::PASS
    } else {
        exit::SPEC_INVALID
    }
}

/// The exit code of a record that could not be built or written: 5 when the evidence does not hold it or
/// cannot be read or written, 3 when the record is invalid or its id is taken.
fn code_of(e: &RecordError) -> i32 {
    match e {
        RecordError::Evidence(_) | RecordError::Io { .. } => exit::EVIDENCE_ERROR,
        RecordError::Invalid { .. } | RecordError::Exists { .. } => exit::SPEC_INVALID,
    }
}

/// Writes the records of the load run `run` ([`load_records::from_load_run`]) into `dir`, none if any would
/// overwrite an existing one, printing each path. Returns the exit code (`records add --run` and
/// `run --record` of a load gate): 0, 3 (invalid or existing), 5 (the evidence).
pub fn write_load_records(gate: &GateSpec, run: &Path, spec: &RunRecordSpec, dir: &Path) -> i32 {
    let records = match load_records::from_load_run(gate, run, spec, None) {
        Ok(r) => r,
        Err(e) => {
            errln!("error: {e}");
            return code_of(&e);
        }
    };
    let (written, failed) = match load_records::write_all(&records, dir) {
        Ok(w) => (w, None),
        Err(WriteError::Refused(e)) => {
            errln!("error: {e}");
            if matches!(e, RecordError::Invalid { .. }) {
                errln!("no record written");
            }
            return exit::SPEC_INVALID;
        }
        Err(WriteError::Write { written, error }) => (written, Some(error)),
    };
    for (path, r) in written.iter().zip(&records) {
        outln!(
            "wrote {} ({} {}, {} {} {}, n = {}{}{})",
            path.display(),
            terminal_safe(&r.model.name),
            r.metric.name,
            r.metric.condition.as_deref().unwrap_or(""),
            r.fmt(r.value),
            r.metric.unit,
            r.n,
            if r.indicative() { ", indicative" } else { "" },
            if r.unmeasured.is_empty() {
                String::new()
            } else {
                format!(", {}", terminal_safe(&r.unmeasured_line()))
            }
        );
    }
    if let Some(e) = failed {
        errln!("error: {e}");
        return exit::EVIDENCE_ERROR;
    }
    outln!("now run `servegate leaderboard`");
    exit::PASS
}

/// `servegate records publish --run DIR [--checkout PATH] [--dir records]`: prints what changed; exit 0, or 5
/// when a file cannot be read or written.
fn cli_publish(run: &Path, checkout: Option<&Path>, dir: &Path) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_default();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match servegate::records::publish::publish(run, checkout.unwrap_or(&cwd), home.as_deref(), dir)
    {
        Ok(p) => {
            for f in &p.files {
                outln!("rewritten: {}", run.join(f).display());
            }
            for r in &p.records {
                outln!(
                    "record: {} (evidence_sha256 {})",
                    r.display(),
                    p.digest_after
                );
            }
            outln!(
                "{}: {} file(s) rewritten, digest {} -> {}",
                run.display(),
                p.files.len(),
                &p.digest_before[..12],
                &p.digest_after[..12]
            );
            exit::PASS
        }
        Err(e) => {
            errln!("error: {e}");
            exit::EVIDENCE_ERROR
        }
    }
}
