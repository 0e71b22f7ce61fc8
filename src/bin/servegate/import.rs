//! `servegate import`: another load tool's per-request output written as a load gate's evidence
//! (`servegate::import`), then judged as `servegate judge` judges any run directory.

use std::path::PathBuf;

use clap::Args;

use servegate::error::exit;
use servegate::import::{self, ImportOptions, Tool};
use servegate::sinks::export::OutputArgs;
use servegate::sinks::outputs::Outputs;
use servegate::spec;
use servegate::text::shown;

/// `servegate import --from TOOL FILE --gate GATE.toml [--out DIR]`.
#[derive(Args)]
pub struct ImportArgs {
    /// The tool that wrote FILE: vllm-bench (`vllm bench serve --save-result --save-detailed` JSON), aiperf
    /// (`profile_export.jsonl`), guidellm (the benchmarks report JSON), inference-perf
    /// (`per_request_lifecycle_metrics.json`, with `config.yaml` beside it for the load point), k6 (`k6 run
    /// --out json=FILE` of a script using xk6-llm's client, `k6/x/llm`).
    #[arg(long, value_parser = ["vllm-bench", "aiperf", "guidellm", "inference-perf", "k6"])]
    from: String,
    /// The tool's per-request output file.
    file: PathBuf,
    /// The load gate whose assertions judge the run (its `[load]` must declare the run's point).
    #[arg(long)]
    gate: PathBuf,
    /// The run directory to write (must not exist); default $SERVEGATE_RUNS/<gate>/<UTC stamp>.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The point the run was: c=N (concurrency) or r=R (requests/s); default the one the file states, else
    /// the gate's only point. A run with more requests in flight than the point allows (its concurrency, or
    /// the gate's max_concurrency at a rate) is refused however its point is named.
    #[arg(long)]
    point: Option<String>,
    /// The tool's version, when its output does not state it (vLLM's, inference-perf's and k6's do not;
    /// AIPerf's profile_export_aiperf.json beside the JSONL and GuideLLM 0.8.1's report do). It must agree
    /// with a version the output states.
    #[arg(long)]
    tool_version: Option<String>,
    /// The command that made the file (kept in run.json `imported.command`), when the tool's output does not
    /// state it (AIPerf's does, in profile_export_aiperf.json beside the JSONL).
    #[arg(long)]
    tool_command: Option<String>,
    /// Print every verdict line whole. Also SERVEGATE_VERBOSE=1.
    #[arg(long, short)]
    verbose: bool,
    #[command(flatten)]
    outputs: crate::OutputFlags,
}

/// Runs `servegate import`: exit 2 on usage (a point the gate lacks, a run that was not its point's load
/// (`import::choose_point`), an existing --out), 3 on an invalid
/// gate, 5 on a file that cannot be read as the tool's per-request output (the error names the line or the
/// JSON path); otherwise `servegate judge`'s code on the directory written.
pub fn cli(a: &ImportArgs) -> i32 {
    servegate::sinks::line::show_full(
        a.verbose || servegate::error::env_flag(std::env::var("SERVEGATE_VERBOSE").ok()),
    );
    let Some(tool) = Tool::from_name(&a.from) else {
        errln!("error: --from {}: unknown tool", shown(&a.from));
        return exit::USAGE;
    };
    let gate = match spec::load(&a.gate) {
        Ok(g) => g,
        Err(e) => {
            errln!("error: {e}");
            return exit::SPEC_INVALID;
        }
    };
    let mut run = match import::read(tool, &a.file) {
        Ok(r) => r,
        Err(e) => {
            errln!(
                "error: {} (read as {}): {}",
                a.file.display(),
                tool.name(),
                shown(&e)
            );
            return exit::EVIDENCE_ERROR;
        }
    };
    // Why no point was taken from a file beside the tool's (inference-perf's config.yaml), said now.
    for n in run
        .notes
        .iter()
        .filter(|n| n.contains("no load point taken"))
    {
        outln!("note: {}", shown(n));
    }
    let warmups = import::apply_gate_warmups(&gate, tool, &mut run);
    run.notes.extend(warmups.clone());
    let asked = match a.point.as_deref().map(import::parse_point).transpose() {
        Ok(p) => p,
        Err(e) => {
            errln!("error: --point {}", shown(&e));
            return exit::USAGE;
        }
    };
    let point = match import::choose_point(&gate, &run, asked) {
        Ok(p) => p,
        Err(e) => {
            errln!("error: {}", shown(&e));
            return exit::USAGE;
        }
    };
    let dir = a
        .out
        .clone()
        .unwrap_or_else(|| import::default_dir(&gate, &servegate::run::runner::runs_root()));
    if dir.exists() {
        errln!(
            "error: {} exists: an import writes a fresh run directory",
            dir.display()
        );
        return exit::USAGE;
    }
    // A report path may not land on what this import reads or writes (the tool's file, the gate, the run
    // directory): checked before anything is written.
    let outputs = Outputs::from_args(&OutputArgs::from(&a.outputs), |k| std::env::var(k).ok());
    let mut inputs = servegate::evidence::guard::Inputs::new();
    inputs.file(&a.file, "the tool's output being imported");
    inputs.file(&a.gate, "the gate file");
    inputs.gate(&gate);
    inputs.dir(&dir, "the run directory the import writes");
    let refusals = outputs.refuse(&inputs);
    if !refusals.is_empty() {
        for r in refusals {
            errln!("error: {r}");
        }
        return exit::USAGE;
    }
    let opts = ImportOptions {
        file: a.file.clone(),
        version: a.tool_version.clone(),
        command: a.tool_command.clone(),
    };
    // A large file (10,000 requests or more) says how far the writing is, each tenth.
    let total = run.requests.len();
    let step = (total / 10).max(1);
    let mut progress = |done: usize, all: usize| {
        if total >= 10_000 && (done.is_multiple_of(step) || done == all) {
            errln!("import: {done} of {all} requests written");
        }
    };
    let written =
        match import::write_evidence_with(&gate, tool, &run, &opts, point, &dir, &mut progress) {
            Ok(w) => w,
            Err(e) => {
                errln!("error: {}", shown(&e));
                return exit::EVIDENCE_ERROR;
            }
        };
    // Warmups are recorded, never judged: the count says how many of each (an AIPerf file of warmups only
    // would otherwise read `imported 6 requests`, then `the file holds 0`).
    let phases = if written.warmups > 0 {
        format!(
            " ({}, {} judged)",
            servegate::text::counted(written.warmups, "warmup"),
            written.requests - written.warmups
        )
    } else {
        String::new()
    };
    outln!(
        "imported {}{phases} of {} {} as point {} of gate {} ({} judged planned): {}",
        servegate::text::counted(written.requests, "request"),
        tool.name(),
        a.file.display(),
        written.point.label(),
        shown(&gate.name),
        written.planned,
        written.dir.display()
    );
    for n in warmups.iter().chain(&written.notes) {
        outln!("note: {}", shown(n));
    }
    for e in outputs.clear() {
        errln!("error: {e}");
    }
    // Judged with the `--gate` file given (the same gate the run directory holds a copy of), so annotations
    // and reports point at the file the user edits, not the copy.
    crate::judge::cmd_judge(&written.dir, Some(a.gate.clone()), &outputs)
}
