//! `servegate`: run gates against a live serve, re-judge recorded evidence, check gate specs, inspect a reply.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use servegate::error::exit;
use servegate::run::runner;
use servegate::sinks::export::OutputArgs;
use servegate::sinks::outputs::Outputs;
use servegate::spec;

/// `println!` through the library's one writer ([`servegate::io::printer::Printer`], so through
/// `servegate::text::lines`): no line of it can be a CI workflow command or carry a raw control byte.
macro_rules! outln {
    () => { servegate::io::printer::Printer::std().outln("") };
    ($($t:tt)*) => { servegate::io::printer::Printer::std().outln(&::std::format!($($t)*)) };
}

/// `print!` through the library's one writer.
macro_rules! out {
    ($($t:tt)*) => { servegate::io::printer::Printer::std().out(&::std::format!($($t)*)) };
}

/// `eprintln!` through the library's one writer.
macro_rules! errln {
    () => { servegate::io::printer::Printer::std().errln("") };
    ($($t:tt)*) => { servegate::io::printer::Printer::std().errln(&::std::format!($($t)*)) };
}

mod bless;
mod check;
mod conformance;
mod conventions;
mod coverage;
mod export;
mod import;
mod init;
mod inspect;
mod judge;
mod leaderboard;
mod records;
mod replay;
mod run;
mod scripted;
mod selftest;

/// `servegate --version`: the package version and the commit it was built from (build.rs; `unknown` when
/// not built from a git checkout).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SERVEGATE_COMMIT"),
    ")"
);

/// A release gate for OpenAI-compatible LLM serves.
///
/// The help ends with the exit codes, from the one list (`servegate::error::exit::CODES`).
#[derive(Parser)]
#[command(name = "servegate", version = VERSION, about, long_about = None, after_help = servegate::error::exit::summary())]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run gates live: start (or reach) the serve, send the prompts, write evidence, print one verdict line per assertion.
    Run {
        /// Gate files (gates/NAME.toml), or gates directories: every `*.toml` in one, sorted by name (none: exit 7).
        #[arg(required = true)]
        gates: Vec<PathBuf>,
        /// Evidence root (default $SERVEGATE_RUNS or target/servegate/runs).
        #[arg(long)]
        runs: Option<PathBuf>,
        /// Print no progress lines.
        #[arg(long, short)]
        quiet: bool,
        /// Print every verdict line whole (by default a line is at most 300 characters: totals, the failing
        /// requests or arms by number, a repeated reason once with its count; the reports hold every detail).
        /// Also SERVEGATE_VERBOSE=1.
        #[arg(long, short)]
        verbose: bool,
        #[command(flatten)]
        outputs: OutputFlags,
        /// After a passing run, write records ID-decode-rate and ID-first-token to data/records/ (or --records-dir)
        /// from its evidence, with the gate's [record] table (docs/records.md); a pair gate also writes
        /// ID-theirs-decode-rate and ID-theirs-first-token, each naming the other's figure, the ratio and the
        /// order. A failed run writes none.
        #[arg(long, value_name = "ID")]
        record: Option<String>,
        /// Where --record writes.
        #[arg(long, value_name = "DIR", default_value = "data/records")]
        records_dir: PathBuf,
        /// Run a gate whose [hold] ticket file is missing (a lane that holds the device some other way); without
        /// it such a gate refuses to start (exit 6). Also SERVEGATE_ALLOW_NO_HOLD=1.
        #[arg(long)]
        allow_no_hold: bool,
        /// For `git bisect run`: exit 0 good, 1 a regression (an assertion failed), 125 skip (indeterminate,
        /// incomparable, void, serve never ready, invalid spec, nothing checked...); never above 127.
        /// Implies SERVEGATE_STRICT=1 so that an incomparable run is a skip, not a silent good (docs/bisect.md).
        #[arg(long)]
        bisect: bool,
    },
    /// Re-judge a recorded run directory, with its copied gate.toml or an edited gate (--gate).
    Judge {
        /// The run directory (holds run.json).
        run_dir: PathBuf,
        /// Judge with this gate spec instead of the run's own gate.toml (e.g. to try a new floor on an old run).
        #[arg(long)]
        gate: Option<PathBuf>,
        /// Print every verdict line whole (by default at most 300 characters each). Also SERVEGATE_VERBOSE=1.
        #[arg(long, short)]
        verbose: bool,
        #[command(flatten)]
        outputs: OutputFlags,
    },
    /// Judge another load tool's run: read its per-request output (vLLM's `vllm bench serve --save-result
    /// --save-detailed` JSON, AIPerf's profile_export.jsonl, GuideLLM's report JSON, inference-perf's
    /// per_request_lifecycle_metrics.json, k6's --out json of xk6-llm) into a run directory of
    /// the gate's load evidence, then judge it as `servegate judge` does; every verdict names the tool
    /// whose timings it stands on (docs/load.md "Verdicts over another tool's run").
    Import(import::ImportArgs),
    /// Write a first gate for a serve: probe it (--url URL [--log FILE], or start `-- COMMAND` with {port}),
    /// detect its engine, send one short measured round, and write a commented gate whose floor and
    /// first-token limit come from that round by bless's rule (docs/getting-started.md). Never overwrites
    /// without --force; writes nothing when it cannot make a gate that proves something.
    Init(init::InitCmd),
    /// Validate gate specs without running anything.
    Check {
        /// Gate files.
        #[arg(required = true)]
        gates: Vec<PathBuf>,
    },
    /// Parse one response (.reads.jsonl timed reads, .sse raw bytes at t=0, .http raw response, or a plain JSON
    /// body) and print a summary, the measurements and the parsed reply as JSON (docs/metrics.md). It reports, it
    /// does not judge: exit 0 whenever the JSON is printed, `"ok": false` included (read `ok` and `fail_reason`);
    /// 2 a bad --require/--forbid regex, 5 an unreadable file.
    Inspect {
        /// The response file (or a serve log, `*.log`, read as the route judge reads it).
        file: PathBuf,
        /// The model the request asked for: with --models, the reply fails `model_not_served` when the serve
        /// does not list it (a reply's `model` only echoes the request).
        #[arg(long)]
        model: Option<String>,
        /// The serve's `/v1/models` answer: its JSON body, or a `*.polls.jsonl` holding the poll.
        #[arg(long)]
        models: Option<PathBuf>,
        /// For a `*.log`: the route regex that must match a line (`[assert.route] fast`).
        #[arg(long)]
        require: Option<String>,
        /// For a `*.log`: the regex that must match no line (`[assert.route] slow`).
        #[arg(long)]
        forbid: Option<String>,
    },
    /// Serve a recorded run back with its original timing (or, with --synthetic, a paced stream whose true TTFT and
    /// decode rate are known): an OpenAI-compatible serve usable as a gate's [serve] command.
    Replay(replay::ReplayArgs),
    /// A scripted fake serve for servegate's own tests (src/replay/scripted.rs): hidden.
    #[command(hide = true)]
    ScriptedServe(scripted::ScriptedArgs),
    /// Records (data/records/*.json): `records check` validates them all and names every problem's file and field.
    Records(records::RecordsArgs),
    /// Dashboard files from records (default data/records/) or a run (results JSON or run directory): --bmf (Bencher),
    /// --gab-bigger / --gab-smaller (github-action-benchmark), --openmetrics (GitLab metrics); docs/ci.md.
    Export(export::ExportArgs),
    /// Render pages/leaderboard.md and pages/leaderboard.html from the records; --check compares instead of writing.
    Leaderboard(leaderboard::LeaderboardArgs),
    /// Bless a known-good run: copy it as a window of the gate's stored baseline (--baseline), or derive
    /// [assert.rate] floor_tok_s from its evidence (--floor [--slow]); shown as a diff, written with --accept,
    /// logged in data/baselines/LEDGER.jsonl; never in CI without --force (docs/bless.md).
    Bless(bless::BlessCmd),
    /// Render pages/coverage.md from the matrix-gate evidence in data/coverage/runs; --check compares instead of writing.
    Coverage(coverage::CoverageArgs),
    /// A peer runtime's model list against data/coverage/registry.toml by family root: the gap list; --check fails
    /// naming a peer family root with no row.
    Census(coverage::CensusArgs),
    /// Render pages/conformance.md (and .html): [contract] checks x runtimes from the contract-gate evidence in
    /// data/coverage/contract; --check compares instead of writing.
    Conformance(conformance::ConformanceArgs),
    /// Judge the embedded judging table (the seed's shapes and one per hazard kind) with this binary's own judge:
    /// no serve, no device; one line per shape, exit 0 when every shape gives what it must, else 1.
    SelfTest(selftest::SelfTestArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell), generated from these definitions.
    Completions(conventions::CompletionsArgs),
    /// Print the man page (roff, section 1), generated from these definitions: `servegate man > servegate.1`.
    Man,
}

/// The report flags of `servegate run` and `servegate judge` (flattened into their clap structs); each
/// defaults to its environment variable (`SERVEGATE_JUNIT`, `SERVEGATE_JSON`, `SERVEGATE_SUMMARY`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputFlags {
    /// Also write JUnit XML here: one testsuite per gate, one testcase per assertion (docs/ci.md). Default:
    /// $SERVEGATE_JUNIT. Removed when the run starts; written before the RESULT line.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,
    /// Also write the verdicts and measurements as JSON here (schema servegate.results/2, docs/results-json.md).
    /// Default: $SERVEGATE_JSON.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Also write a Markdown summary here (one table per gate, at most 1 MiB: GitHub's $GITHUB_STEP_SUMMARY
    /// cap; docs/ci.md). Default: $SERVEGATE_SUMMARY.
    #[arg(long, value_name = "PATH")]
    pub summary: Option<PathBuf>,
    /// GitHub Actions annotations (one per failed or indeterminate assertion, at the gate file and line) and
    /// the job summary appended to $GITHUB_STEP_SUMMARY (docs/ci.md). On by itself when GITHUB_ACTIONS=true.
    #[arg(long)]
    pub github: bool,
}

impl From<&OutputFlags> for OutputArgs {
    fn from(f: &OutputFlags) -> OutputArgs {
        OutputArgs {
            junit: f.junit.clone(),
            json: f.json.clone(),
            summary: f.summary.clone(),
            github: f.github,
        }
    }
}

fn main() -> ExitCode {
    // Like any Unix filter: `servegate check gates/*.toml | head -1` ends quietly (killed by SIGPIPE, as `cat`
    // is) instead of panicking on a closed pipe. Once a serve may run, the stop handlers ignore SIGPIPE
    // (`io::signals::install`): a closed stdout then stops the run as any failed write to stdout does
    // (`io::printer::stdout_failed`: the serve torn down, the run written `interrupted`, exit 5).
    // SAFETY: resetting a signal disposition at start, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help`, `--version`: on stdout, checked (clap's own exit ignores a failed write: exit 0, lost).
        Err(e) if !e.use_stderr() => {
            if let Err(err) = e.print() {
                servegate::io::printer::stdout_failed(&err);
            }
            return exit_code(e.exit_code());
        }
        Err(e) => e.exit(),
    };
    let code = match cli.command {
        Cmd::Run {
            gates,
            runs,
            quiet,
            verbose,
            outputs,
            record,
            records_dir,
            allow_no_hold,
            bisect,
        } => {
            servegate::sinks::line::show_full(
                verbose || servegate::error::env_flag(std::env::var("SERVEGATE_VERBOSE").ok()),
            );
            let gates = match run::gate_files(gates) {
                Ok(g) => g,
                Err((code, why)) => {
                    errln!("error: {why}");
                    return ExitCode::from(code as u8);
                }
            };
            // As the harness: --junit / --json / --summary, else SERVEGATE_JUNIT / SERVEGATE_JSON / SERVEGATE_SUMMARY.
            let outputs =
                Outputs::from_args(&OutputArgs::from(&outputs), |k| std::env::var(k).ok());
            // A report that would land on a gate, a file a gate reads or evidence is refused before anything
            // is removed.
            let mut inputs = servegate::evidence::guard::Inputs::new();
            for f in &gates {
                inputs.file(f, "the gate file");
                for g in spec::matrix::load_all(f).unwrap_or_default() {
                    inputs.gate(&g);
                }
            }
            if record.is_some() {
                inputs.dir(&records_dir, "the --records-dir the run writes");
            }
            if refused(&outputs.refuse(&inputs)) {
                return ExitCode::from(exit::USAGE as u8);
            }
            // The previous run's reports go first: a run that ends early never leaves them looking current.
            for e in outputs.clear() {
                errln!("error: {e}");
            }
            if let Some(code) = record
                .as_deref()
                .and_then(|id| record_refused(id, &gates, &records_dir))
            {
                return code;
            }
            let root = runs.clone().unwrap_or_else(runner::runs_root);
            let record = record.as_deref().map(|id| (id, records_dir.as_path()));
            let allow_no_hold =
                allow_no_hold || servegate::io::hold::allow_no_hold(|k| std::env::var(k).ok());
            if bisect {
                // Strict: an incomparable run or an unmet requirement is a skip (125), never a good (0).
                std::env::set_var("SERVEGATE_STRICT", "1");
                let code = run::cmd_run(&gates, Some(root), quiet, &outputs, record, allow_no_hold);
                let b = servegate::error::bisect_code(code);
                outln!("bisect: exit {b} ({})", servegate::error::bisect_word(b));
                return exit_code(b);
            }
            run::cmd_run(&gates, Some(root), quiet, &outputs, record, allow_no_hold)
        }
        Cmd::Judge {
            run_dir,
            gate,
            verbose,
            outputs,
        } => {
            servegate::sinks::line::show_full(
                verbose || servegate::error::env_flag(std::env::var("SERVEGATE_VERBOSE").ok()),
            );
            let outputs =
                Outputs::from_args(&OutputArgs::from(&outputs), |k| std::env::var(k).ok());
            let mut inputs = servegate::evidence::guard::Inputs::new();
            inputs.dir(&run_dir, "the run directory being judged");
            if let Some(g) = &gate {
                inputs.file(g, "the gate file");
            }
            // A pipe (`--gate /dev/stdin`) gives its bytes once: read once, judged from the copy.
            let (gate, _spool) = match judge::spooled(gate) {
                Ok(g) => g,
                Err(e) => {
                    errln!("error: {e}");
                    return ExitCode::from(exit::SPEC_INVALID as u8);
                }
            };
            let own = run_dir.join(servegate::evidence::layout::GATE_FILE);
            for f in gate.iter().chain(std::iter::once(&own)) {
                inputs.file(f, "the gate file");
                for g in spec::matrix::load_all(f).unwrap_or_default() {
                    inputs.gate(&g);
                }
            }
            if refused(&outputs.refuse(&inputs)) {
                return ExitCode::from(exit::USAGE as u8);
            }
            for e in outputs.clear() {
                errln!("error: {e}");
            }
            judge::cmd_judge(&run_dir, gate, &outputs)
        }
        Cmd::Check { gates } => check::cmd_check(&gates),
        Cmd::Import(args) => import::cli(&args),
        Cmd::Init(args) => init::cli(&args),
        Cmd::Inspect {
            file,
            model,
            models,
            require,
            forbid,
        } => inspect::cmd_inspect(&file, model, models, require, forbid),
        Cmd::Replay(args) => replay::cli(&args),
        Cmd::ScriptedServe(args) => scripted::cli(&args),
        Cmd::Records(args) => records::cli(&args),
        Cmd::Export(args) => export::cli(&args, &judge::judged_results),
        Cmd::Leaderboard(args) => leaderboard::cli(&args),
        Cmd::Coverage(args) => coverage::cli_coverage(&args),
        Cmd::Census(args) => coverage::cli_census(&args),
        Cmd::Conformance(args) => conformance::cli_conformance(&args),
        Cmd::SelfTest(args) => selftest::cli(&args),
        Cmd::Bless(args) => bless::cli(&args),
        Cmd::Completions(args) => conventions::cli_completions(&args),
        Cmd::Man => conventions::cli_man(),
    };
    exit_code(code)
}

/// `run --record ID`'s arguments checked before the serve starts, not after a whole run: one gate, an id the
/// records take, a records directory that can be one, a gate that has the record's spec. The exit code of
/// the refusal (its error said), or None.
fn record_refused(id: &str, gates: &[PathBuf], records_dir: &Path) -> Option<ExitCode> {
    if gates.len() != 1 {
        errln!("error: --record takes exactly one gate");
        return Some(ExitCode::from(exit::USAGE as u8));
    }
    if let Some(why) = servegate::records::record::id_problem(id) {
        errln!("error: --record {}", servegate::text::shown(&why));
        return Some(ExitCode::from(exit::USAGE as u8));
    }
    if let Some(why) = not_a_dir(records_dir) {
        errln!("error: --records-dir {}", servegate::text::shown(&why));
        return Some(ExitCode::from(exit::USAGE as u8));
    }
    if let Err(e) = spec::load(&gates[0])
        .map_err(|e| e.to_string())
        .and_then(|g| g.record_spec(id, "decode_rate").map(|_| ()))
    {
        errln!("error: {e}");
        return Some(ExitCode::from(exit::SPEC_INVALID as u8));
    }
    None
}

/// The process's exit code for a command that returned `code`, stdout flushed first and checked: what is
/// still buffered is written now (the exit's own flush ignores errors), and a stdout that could not be
/// written makes it 5 (`error: stdout: ...` said), never `code` with the output lost. A run's stop for it
/// (`io::signals`) ends at the checkpoint, as interrupted.
fn exit_code(code: i32) -> ExitCode {
    servegate::io::printer::flush_stdout();
    if servegate::io::printer::stdout_has_failed() {
        servegate::io::signals::checkpoint();
        return ExitCode::from(exit::EVIDENCE_ERROR as u8);
    }
    ExitCode::from(code as u8)
}

/// Prints each refusal of an output path (`error: ...`); true when there was one (the command then exits 2
/// having removed and written nothing).
fn refused(refusals: &[String]) -> bool {
    for r in refusals {
        errln!("error: {r}");
    }
    !refusals.is_empty()
}

/// Why `dir` cannot be the directory records are written to (it, or the nearest of its parents that exists,
/// is not a directory), or None: `run --record` says so before the serve starts.
fn not_a_dir(dir: &Path) -> Option<String> {
    let existing = dir
        .ancestors()
        .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())?;
    (!existing.is_dir()).then(|| {
        format!(
            "{}: {} is not a directory",
            dir.display(),
            existing.display()
        )
    })
}
