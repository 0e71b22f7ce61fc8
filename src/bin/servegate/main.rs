//! `servegate`: run gates against a live serve, re-judge recorded evidence, check gate specs, inspect a reply.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use servegate::error::exit;
use servegate::run::runner;
use servegate::sinks::events::{Collector, Console, Event, Fanout, Listed, Reporter};
use servegate::sinks::export::OutputArgs;
use servegate::sinks::outputs::Outputs;
use servegate::sinks::report::{Producer, Results};
use servegate::{evidence, judge, spec};

mod bless;
mod leaderboard;
mod records;

/// A release gate for OpenAI-compatible LLM serves.
///
/// Exit codes: 0 every assertion passed; 1 an assertion failed; 2 bad usage; 3 a gate spec is invalid;
/// 4 the serve never became ready; 5 evidence could not be read or written; 6 a requirement is unmet under
/// SERVEGATE_STRICT=1; 7 nothing was checked (every gate ignored).
#[derive(Parser)]
#[command(name = "servegate", version, about, long_about = None, after_help = "Exit codes: 0 pass, 1 assertion failed, 2 usage, 3 spec invalid, 4 serve never ready, 5 evidence error, 6 requirement unmet (strict), 7 nothing checked.")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run gates live: start (or reach) the serve, send the prompts, write evidence, print one verdict line per assertion.
    Run {
        /// Gate files (gates/NAME.toml).
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
        outputs: OutputArgs,
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
        outputs: OutputArgs,
    },
    /// Validate gate specs without running anything.
    Check {
        /// Gate files.
        #[arg(required = true)]
        gates: Vec<PathBuf>,
    },
    /// Parse one response (.reads.jsonl timed reads, .sse raw bytes at t=0, .http raw response, or a plain JSON
    /// body) and print a summary, the measurements and the parsed reply as JSON (docs/metrics.md).
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
    Replay(servegate::replay::ReplayArgs),
    /// A scripted fake serve for servegate's own tests (src/replay/scripted.rs): hidden.
    #[command(hide = true)]
    ScriptedServe(servegate::replay::scripted::ScriptedArgs),
    /// Records (data/records/*.json): `records check` validates them all and names every problem's file and field.
    Records(records::RecordsArgs),
    /// Dashboard files from records (default data/records/) or a run (results JSON or run directory): --bmf (Bencher),
    /// --gab-bigger / --gab-smaller (github-action-benchmark), --openmetrics (GitLab metrics); docs/ci.md.
    Export(servegate::sinks::exports::ExportArgs),
    /// Render pages/leaderboard.md and pages/leaderboard.html from the records; --check compares instead of writing.
    Leaderboard(leaderboard::LeaderboardArgs),
    /// Bless a known-good run: copy it as a window of the gate's stored baseline (--baseline), or derive
    /// [assert.rate] floor_tok_s from its evidence (--floor [--slow]); shown as a diff, written with --accept,
    /// logged in data/baselines/LEDGER.jsonl; never in CI without --force (docs/bless.md).
    Bless(servegate::records::bless::BlessArgs),
    /// Render pages/coverage.md from the matrix-gate evidence in data/coverage/runs; --check compares instead of writing.
    Coverage(servegate::coverage::page::CoverageArgs),
    /// A peer runtime's model list against data/coverage/registry.toml by family root: the gap list; --check fails
    /// naming a peer family root with no row.
    Census(servegate::coverage::census::CensusArgs),
    /// Judge the embedded judging table (the seed's shapes and one per hazard kind) with this binary's own judge:
    /// no serve, no device; one line per shape, exit 0 when every shape gives what it must, else 1.
    SelfTest(servegate::run::selftest::SelfTestArgs),
}

fn main() -> ExitCode {
    // Like any Unix filter: `servegate check gates/*.toml | head -1` ends quietly instead of panicking on a
    // closed pipe.
    // SAFETY: resetting a signal disposition at start, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
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
            // As the harness: --junit / --json / --summary, else SERVEGATE_JUNIT / SERVEGATE_JSON / SERVEGATE_SUMMARY.
            let outputs = Outputs::from_args(&outputs, |k| std::env::var(k).ok());
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
                servegate::errln!("error: {e}");
            }
            if let Some(id) = &record {
                if gates.len() != 1 {
                    servegate::errln!("error: --record takes exactly one gate");
                    return ExitCode::from(exit::USAGE as u8);
                }
                if let Err(e) = spec::load(&gates[0])
                    .map_err(|e| e.to_string())
                    .and_then(|g| g.record_spec(id, "decode_rate").map(|_| ()))
                {
                    servegate::errln!("error: {e}");
                    return ExitCode::from(exit::SPEC_INVALID as u8);
                }
            }
            let root = runs.clone().unwrap_or_else(runner::runs_root);
            let record = record.as_deref().map(|id| (id, records_dir.as_path()));
            let allow_no_hold =
                allow_no_hold || servegate::io::hold::allow_no_hold(|k| std::env::var(k).ok());
            if bisect {
                // Strict: an incomparable run or an unmet requirement is a skip (125), never a good (0).
                std::env::set_var("SERVEGATE_STRICT", "1");
                let code = cmd_run(&gates, Some(root), quiet, &outputs, record, allow_no_hold);
                let b = servegate::error::bisect_code(code);
                servegate::outln!("bisect: exit {b} ({})", servegate::error::bisect_word(b));
                return ExitCode::from(b as u8);
            }
            cmd_run(&gates, Some(root), quiet, &outputs, record, allow_no_hold)
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
            let outputs = Outputs::from_args(&outputs, |k| std::env::var(k).ok());
            let mut inputs = servegate::evidence::guard::Inputs::new();
            inputs.dir(&run_dir, "the run directory being judged");
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
                servegate::errln!("error: {e}");
            }
            cmd_judge(&run_dir, gate, &outputs)
        }
        Cmd::Check { gates } => cmd_check(&gates),
        Cmd::Inspect {
            file,
            model,
            models,
            require,
            forbid,
        } => cmd_inspect(&file, model, models, require, forbid),
        Cmd::Replay(args) => servegate::replay::cli_replay(&args),
        Cmd::ScriptedServe(args) => servegate::replay::scripted::cli_scripted(&args),
        Cmd::Records(args) => records::cli(&args),
        Cmd::Export(args) => cmd_export(&args, &judged_results),
        Cmd::Leaderboard(args) => leaderboard::cli(&args),
        Cmd::Coverage(args) => servegate::coverage::page::cli(&args),
        Cmd::Census(args) => servegate::coverage::census::cli(&args),
        Cmd::SelfTest(args) => servegate::run::selftest::cli(&args),
        Cmd::Bless(args) => bless::cli(&args),
    };
    ExitCode::from(code as u8)
}

/// Prints each refusal of an output path (`error: ...`); true when there was one (the command then exits 2
/// having removed and written nothing).
fn refused(refusals: &[String]) -> bool {
    for r in refusals {
        servegate::errln!("error: {r}");
    }
    !refusals.is_empty()
}

/// Writes ID-decode-rate and ID-first-token from `run`: the run directory this command just wrote (never
/// another run of the gate).
fn write_records(
    gate_file: &std::path::Path,
    run: &std::path::Path,
    id: &str,
    dir: &std::path::Path,
) -> i32 {
    let Ok(g) = spec::load(gate_file) else {
        return exit::SPEC_INVALID;
    };
    let run = run.to_path_buf();
    if g.load.is_some() {
        // A load run: the records of every sweep point (TTFT and E2E percentiles, output tok/s, requests/s).
        let rs = match g.record_spec(id, "load") {
            Ok(s) => s,
            Err(e) => {
                servegate::errln!("error: {e}");
                return exit::SPEC_INVALID;
            }
        };
        return records::write_load_records(&g, &run, &rs, dir);
    }
    let pair = servegate::evidence::is_pair_dir(&run);
    let roles: &[&str] = if pair { &["ours", "theirs"] } else { &["ours"] };
    for (role, (metric, suffix)) in roles.iter().flat_map(|r| {
        [
            (r, ("decode_rate", "decode-rate")),
            (r, ("first_token", "first-token")),
        ]
    }) {
        let rid = if *role == "theirs" {
            format!("{id}-theirs-{suffix}")
        } else {
            format!("{id}-{suffix}")
        };
        let rs = match g.record_spec(&rid, metric) {
            Ok(s) => s,
            Err(e) => {
                servegate::errln!("error: {e}");
                return exit::SPEC_INVALID;
            }
        };
        let built = if pair {
            servegate::loaded::load_pair(&run)
                .map(|pe| servegate::records::record::from_pair_run_as(&g, &pe, &rs, role))
        } else {
            servegate::loaded::load(&run)
                .map(|ev| servegate::records::record::from_run(&g, &ev, &rs))
        };
        match built {
            Ok(Ok(r)) => match servegate::records::record::write_new(dir, &r) {
                Ok(p) => servegate::outln!("record: {}", p.display()),
                Err(e) => {
                    servegate::errln!("error: {e}");
                    return exit::SPEC_INVALID;
                }
            },
            Ok(Err(e)) => {
                servegate::errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
            Err(e) => {
                servegate::errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        }
    }
    servegate::outln!("now run `servegate leaderboard` to render the page");
    exit::PASS
}

/// `servegate export` (the figures from `sinks::exports`, printed or written here); returns the exit code (0; 3 when `records check` refuses a record of a source, and
/// nothing is exported; 5 when a source cannot be read or the file written).
fn cmd_export(
    args: &servegate::sinks::exports::ExportArgs,
    judge_dir: &dyn Fn(&std::path::Path) -> Result<Results, String>,
) -> i32 {
    use servegate::sinks::exports::{figures_of, serialize, Kind};
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
            servegate::errln!("error: {r}");
        }
        if !refusals.is_empty() {
            return exit::USAGE;
        }
    }
    let mut figures = Vec::new();
    for s in &sources {
        match figures_of(s, judge_dir) {
            Ok(f) => figures.extend(f),
            Err(e) => {
                for l in &e.detail {
                    servegate::errln!("{l}");
                }
                servegate::errln!("error: {}", e.message);
                return e.code;
            }
        }
    }
    let (bytes, notes) = serialize(args.kind(), &figures);
    for n in notes {
        servegate::errln!("note: {n}");
    }
    match &args.output {
        Some(p) => match servegate::sinks::report::write_atomic(p, &bytes) {
            Ok(()) => exit::PASS,
            Err(e) => {
                servegate::errln!("error: {}: cannot write the export: {e}", p.display());
                exit::EVIDENCE_ERROR
            }
        },
        None => {
            // On a terminal or a CI log a record's text holds no workflow command and no raw control byte:
            // JSON through `text::json` (the same values), OpenMetrics text through `text::lines`.
            use std::io::Write;
            let raw = String::from_utf8_lossy(&bytes);
            let text = match args.kind() {
                Kind::OpenMetrics => servegate::text::lines(&raw),
                _ => servegate::text::json(&raw),
            };
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            exit::PASS
        }
    }
}

/// `servegate run`: every spec checked first, then each gate run in turn ([`run_gate`]), then the records
/// of a passing run (`--record`, [`record_run`]) and the reports with the one `RESULT:` line ([`finish_run`]).
fn cmd_run(
    files: &[PathBuf],
    runs: Option<PathBuf>,
    quiet: bool,
    outputs: &Outputs,
    record: Option<(&str, &std::path::Path)>,
    allow_no_hold: bool,
) -> i32 {
    let started = std::time::Instant::now();
    let strict = servegate::run::harness::strict();
    let mut console = Console::new(quiet);
    let mut collector = Collector::new(Producer::Run, strict);
    let specs = match load_specs(files, &mut console, &mut collector) {
        Ok(specs) => specs,
        Err(invalid) => {
            let why = format!(
                "{invalid} of {} gate spec{} invalid: no gate was run",
                files.len(),
                if files.len() == 1 { " is" } else { "s are" }
            );
            return finish_run(
                outputs,
                collector.into_results(),
                started,
                exit::SPEC_INVALID,
                &why,
            );
        }
    };
    let root = runs.unwrap_or_else(runner::runs_root);
    // A stop signal from here on ends the command as interrupted at the next checkpoint: no verdict,
    // RESULT line or report is printed or written after it.
    let _ = servegate::io::signals::install();
    servegate::io::signals::defer_exit();
    let mut skipped = 0usize;
    // --record: the run directory this command wrote, when that run passed.
    let mut passed_run: Option<PathBuf> = None;
    for g in &specs {
        let mut out = Fanout(vec![&mut console, &mut collector]);
        match run_gate(g, &root, &mut out, strict, allow_no_hold) {
            GateRan::Skipped => skipped += 1,
            GateRan::Passed(dir) => passed_run = Some(dir),
            GateRan::Other => {}
        }
    }
    let mut results = collector.into_results();
    // The exit code is the results' (the worst of the gates'): the one the reports say.
    let worst = results.gate_exit_code();
    let nothing_checked = worst == exit::PASS && skipped == specs.len();
    let end = servegate::error::RunEnd {
        worst_gate: worst,
        nothing_checked,
        report_unwritten: false,
    };
    // --record: written from a passing run's evidence before the RESULT line, so that line says whether they were.
    if let Some((id, dir)) = record {
        let code = record_run(
            &files[0],
            worst,
            nothing_checked,
            passed_run.as_deref(),
            id,
            dir,
        );
        if code != exit::PASS {
            results
                .problems
                .push("the gate passed but its records could not be written".to_string());
            return finish_run(
                outputs,
                results,
                started,
                code,
                "the gate passed but its records could not be written",
            );
        }
    }
    if nothing_checked {
        results
            .problems
            .push("nothing was checked: every gate was ignored (unmet [requires])".to_string());
        return finish_run(
            outputs,
            results,
            started,
            end.exit_code(),
            "every gate was ignored: nothing was checked",
        );
    }
    finish_run(outputs, results, started, end.exit_code(), "")
}

/// Every gate of `files` (a matrix file gives several), each checked before any gate runs; every invalid
/// one is reported (a `SpecInvalid` event) and counted: `Err(count)` when any is.
fn load_specs(
    files: &[PathBuf],
    console: &mut Console,
    collector: &mut Collector,
) -> Result<Vec<spec::GateSpec>, usize> {
    let mut specs = Vec::new();
    let mut invalid = 0usize;
    for f in files {
        match spec::matrix::load_all(f).and_then(|s| {
            match s.iter().find_map(|g| g.unreadable_input()) {
                Some(e) => Err(e),
                None => Ok(s),
            }
        }) {
            Ok(s) => specs.extend(s),
            Err(e) => {
                let error = e.to_string();
                Fanout(vec![&mut *console, &mut *collector]).event(&Event::SpecInvalid {
                    file: f,
                    error: &error,
                    duration_s: 0.0,
                });
                invalid += 1;
            }
        }
    }
    if invalid > 0 {
        Err(invalid)
    } else {
        Ok(specs)
    }
}

/// How one gate of `servegate run` ended, as the command counts it.
enum GateRan {
    /// Ignored for unmet `[requires]` (not under SERVEGATE_STRICT): nothing was checked.
    Skipped,
    /// Ran and passed: its run directory (for `--record`).
    Passed(PathBuf),
    /// Refused, failed, or could not run.
    Other,
}

/// Runs gate `g` under `root`, saying each step to `out`: refused without its device ticket (`[hold]
/// ticket`, unless `allow_no_hold`), ignored (or failed, when `strict`) for unmet requirements, else run and
/// judged.
fn run_gate(
    g: &spec::GateSpec,
    root: &std::path::Path,
    out: &mut Fanout<'_>,
    strict: bool,
    allow_no_hold: bool,
) -> GateRan {
    out.event(&Event::GateStarted {
        spec: g,
        file: &g.file,
        on: None,
    });
    // `[hold] ticket`: without the device ticket the gate refuses to start (unless --allow-no-hold).
    match servegate::io::hold::check_ticket(g, allow_no_hold) {
        Err(why) => {
            out.event(&Event::GateRefused {
                spec: g,
                why: &why,
                listed: &Listed::all(g, 0.0),
            });
            return GateRan::Other;
        }
        Ok(Some(note)) => servegate::errln!("note: {note}"),
        Ok(None) => {}
    }
    let unmet = g.requirements();
    if !unmet.is_empty() {
        out.event(&Event::GateUnmet {
            spec: g,
            unmet: &unmet,
            strict,
            listed: &Listed::all(g, 0.0),
        });
        return if strict {
            GateRan::Other
        } else {
            GateRan::Skipped
        };
    }
    let t = std::time::Instant::now();
    let ran = runner::run(g, root, &mut |step| {
        out.event(&Event::Progress { spec: g, step })
    });
    servegate::io::signals::checkpoint();
    let run_s = t.elapsed().as_secs_f64();
    match ran {
        Ok(o) => {
            let passed = (o.exit_code() == exit::PASS).then(|| o.dir.clone());
            out.event(&Event::GateJudged {
                spec: g,
                outcome: &o,
                listed: &Listed::verdicts(&o, run_s),
            });
            passed.map_or(GateRan::Other, GateRan::Passed)
        }
        Err(e) => {
            out.event(&Event::GateError {
                spec: g,
                error: &e.to_string(),
                panicked: false,
                listed: &Listed::all(g, run_s),
            });
            GateRan::Other
        }
    }
}

/// `--record ID DIR`: the records of the passing run `passed_run` of `gate_file`, written before the RESULT
/// line; a run that did not pass (`worst`) or checked nothing writes none, saying why on stderr. The exit
/// code of the writing (PASS when nothing was to be written).
fn record_run(
    gate_file: &std::path::Path,
    worst: i32,
    nothing_checked: bool,
    passed_run: Option<&std::path::Path>,
    id: &str,
    dir: &std::path::Path,
) -> i32 {
    if worst != exit::PASS {
        servegate::errln!("no record written: the run did not pass");
    } else if nothing_checked || passed_run.is_none() {
        servegate::errln!(
            "no record written: the gate was skipped (unmet [requires]); nothing was measured"
        );
    } else if let Some(run) = passed_run {
        return write_records(gate_file, run, id, dir);
    }
    exit::PASS
}

/// Stamps `results` with `code`, writes the reports, then prints the one `RESULT:` line, which always agrees
/// with the returned exit code: `PASS` (0), `SKIP (why)` (7: nothing was checked), `ERROR (why)` (a report
/// could not be written: 5, or an invalid spec: 3), else `FAIL`.
fn finish_run(
    outputs: &Outputs,
    results: Results,
    started: std::time::Instant,
    code: i32,
    why: &str,
) -> i32 {
    servegate::io::signals::checkpoint();
    let (written, errors) = outputs.finish(results, started.elapsed().as_secs_f64(), code);
    for e in &errors {
        servegate::errln!("error: {e}");
    }
    servegate::io::signals::checkpoint();
    servegate::outln!("RESULT: {}", result_word(code, written, why));
    written
}

/// The word of the `RESULT:` line for exit code `code` (as planned) and `written` (after writing the reports).
fn result_word(code: i32, written: i32, why: &str) -> String {
    let paren = |w: &str, why: &str| {
        if why.is_empty() {
            w.to_string()
        } else {
            format!("{w} ({why})")
        }
    };
    if written != code {
        // Only a report write changes the code; the verdicts' own result is said too.
        let was = result_word(code, code, why);
        return format!("ERROR (a report could not be written; the gates said {was})");
    }
    match code {
        exit::PASS => "PASS".to_string(),
        exit::NOTHING_CHECKED => paren("SKIP", why),
        exit::SPEC_INVALID | exit::EVIDENCE_ERROR => paren("ERROR", why),
        exit::INDETERMINATE => paren("INDETERMINATE", why),
        exit::INCOMPARABLE => paren("INCOMPARABLE", why),
        exit::VOID => paren("VOID", why),
        _ => paren("FAIL", why),
    }
}

/// `servegate judge`: re-judges a run directory and reports it through the same events, reporters and
/// finalisation as `servegate run` (so the same evidence gives the same verdict lines, reports and exit code).
fn cmd_judge(dir: &std::path::Path, gate: Option<PathBuf>, outputs: &Outputs) -> i32 {
    let started = std::time::Instant::now();
    if !dir.join(servegate::evidence::layout::RUN_FILE).is_file() && !evidence::is_pair_dir(dir) {
        servegate::errln!(
            "error: {} is not a run directory (no run.json or pair.json)",
            dir.display()
        );
        return exit::EVIDENCE_ERROR;
    }
    if let Some(edited) = &gate {
        // Judging an old run with an edited gate is for trying new bounds; a gate that asks for other requests
        // than the run sent judges evidence it did not ask for: say so.
        if let (Ok(new), Ok(old)) = (
            spec::load(edited),
            spec::load(&dir.join(servegate::evidence::layout::GATE_FILE)),
        ) {
            // Another gate altogether (another name) is not an edit of this run's gate: its verdict would read
            // as that gate passing on evidence it never asked for.
            if new.name != old.name {
                servegate::errln!(
                    "error: {} is gate `{}`, but {} is a run of gate `{}`: judge a run with its own gate, or an \
                     edited copy that keeps its [gate] name",
                    edited.display(),
                    new.name,
                    dir.display(),
                    old.name
                );
                return exit::USAGE;
            }
            let (n, o) = (&new.request, &old.request);
            let mut diffs = Vec::new();
            if n.prompts != o.prompts {
                diffs.push("prompts");
            }
            if n.max_tokens != o.max_tokens {
                diffs.push("max_tokens");
            }
            if n.repeats != o.repeats || n.warmup != o.warmup {
                diffs.push("repeats/warmup");
            }
            if n.temperature != o.temperature
                || n.top_k != o.top_k
                || n.top_p != o.top_p
                || n.extra != o.extra
                || n.stream != o.stream
            {
                diffs.push("sampling/body");
            }
            if !diffs.is_empty() {
                servegate::errln!(
                    "note: {} asks for other requests than the run sent ({}); the verdicts judge what the run's own gate.toml asked for",
                    edited.display(),
                    diffs.join(", ")
                );
            }
        }
    }
    let gate_file = gate.unwrap_or_else(|| dir.join(servegate::evidence::layout::GATE_FILE));
    let g = match gate_of_run(&gate_file, dir) {
        Ok(g) => g,
        Err((code, e)) => {
            servegate::errln!("error: {e}");
            return code;
        }
    };
    if evidence::is_pair_dir(dir) && g.pair.is_none() {
        servegate::errln!(
            "error: {} is a pair run but {} is not a pair gate",
            dir.display(),
            gate_file.display()
        );
        return exit::SPEC_INVALID;
    }
    let outcome = if evidence::is_pair_dir(dir) {
        let ev = match servegate::loaded::load_pair(dir) {
            Ok(ev) => ev,
            Err(e) => {
                servegate::errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        };
        let verdicts = judge::judge_pair(&g, &ev);
        runner::pair_outcome(&g, dir, ev.summary, verdicts)
    } else {
        let ev = match servegate::loaded::load(dir) {
            Ok(ev) => ev,
            Err(e) => {
                servegate::errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        };
        let mut verdicts = judge::judge_with(&g, &ev, &servegate::loaded::judge_inputs(&g, &ev));
        verdicts.extend(servegate::run::load::judge_dir(&g, dir));
        runner::RunOutcome {
            dir: dir.to_path_buf(),
            summary: ev.run,
            verdicts,
            pair: None,
        }
    };
    let mut console = Console::new(true);
    let mut collector = Collector::new(Producer::Judge, servegate::run::harness::strict());
    let mut out = Fanout(vec![&mut console, &mut collector]);
    out.event(&Event::GateStarted {
        spec: &g,
        file: &gate_file,
        on: Some(dir),
    });
    out.event(&Event::GateJudged {
        spec: &g,
        outcome: &outcome,
        listed: &Listed::verdicts(&outcome, started.elapsed().as_secs_f64()),
    });
    let results = collector.into_results();
    let code = servegate::error::RunEnd {
        worst_gate: results.gate_exit_code(),
        nothing_checked: false,
        report_unwritten: false,
    }
    .exit_code();
    finish_run(outputs, results, started, code, "")
}

/// The gate that judges run directory `dir`: `gate_file` itself, or for a matrix gate the entry the run
/// ran (run.json's `gate`, `<gate>[<model>]`). Errors: the gate file's (exit 3), or, when the entry cannot
/// be chosen because run.json is missing or unreadable, that file's (exit 5: evidence, not the spec).
fn gate_of_run(
    gate_file: &std::path::Path,
    dir: &std::path::Path,
) -> Result<spec::GateSpec, (i32, String)> {
    let run_json = dir.join(servegate::evidence::layout::RUN_FILE);
    let run_gate: Result<Option<String>, String> = std::fs::read(&run_json)
        .map_err(|e| format!("{}: {e}", run_json.display()))
        .and_then(|b| {
            serde_json::from_slice::<serde_json::Value>(&b)
                .map_err(|e| format!("{}: {e}", run_json.display()))
        })
        .map(|v| v.get("gate").and_then(|g| g.as_str()).map(str::to_string));
    match spec::matrix::load_named(gate_file, run_gate.as_ref().ok().and_then(|g| g.as_deref())) {
        Ok(g) => Ok(g),
        Err(e) => match run_gate {
            Err(why) if spec::matrix::load_all(gate_file).is_ok() => {
                Err((exit::EVIDENCE_ERROR, why))
            }
            _ => Err((exit::SPEC_INVALID, e.to_string())),
        },
    }
}

/// A run directory re-judged with its own gate.toml, as results (for `servegate export`).
fn judged_results(dir: &std::path::Path) -> Result<Results, String> {
    let gate_file = dir.join(servegate::evidence::layout::GATE_FILE);
    let g = gate_of_run(&gate_file, dir).map_err(|(_, e)| e)?;
    let outcome = if evidence::is_pair_dir(dir) {
        let ev = servegate::loaded::load_pair(dir).map_err(|e| e.to_string())?;
        let verdicts = judge::judge_pair(&g, &ev);
        runner::pair_outcome(&g, dir, ev.summary, verdicts)
    } else {
        let ev = servegate::loaded::load(dir).map_err(|e| e.to_string())?;
        let verdicts = judge::judge(&g, &ev);
        runner::RunOutcome {
            dir: dir.to_path_buf(),
            summary: ev.run,
            verdicts,
            pair: None,
        }
    };
    let mut collector = Collector::new(Producer::Judge, servegate::run::harness::strict());
    collector.event(&Event::GateJudged {
        spec: &g,
        outcome: &outcome,
        listed: &Listed::verdicts(&outcome, 0.0),
    });
    let mut results = collector.into_results();
    results.finish(0.0);
    Ok(results)
}

fn cmd_check(files: &[PathBuf]) -> i32 {
    let mut code = exit::PASS;
    for f in files {
        match spec::matrix::load_all(f).and_then(|s| {
            match s.iter().find_map(|g| g.unreadable_input()) {
                Some(e) => Err(e),
                None => Ok(s),
            }
        }) {
            Ok(gates) => {
                for g in gates {
                    servegate::outln!(
                        "{}: ok ({}; assertions: {})",
                        f.display(),
                        g.name,
                        g.trial_names().join(", ")
                    );
                    // A gate with an engine profile: what it inherited, after the gate's overrides.
                    if let Some(line) = spec::profile::effective(&g.serve, &g.request) {
                        servegate::outln!("  {line}");
                    }
                    // Prompts asked for their answer only: the timing verdicts never see them.
                    if !g.request.untimed.is_empty() {
                        let quoted: Vec<String> =
                            g.request.untimed.iter().map(|p| format!("{p:?}")).collect();
                        servegate::outln!(
                            "  untimed (answer only; no rate, first_token, tpot or regression value): {}",
                            quoted.join(", ")
                        );
                    }
                }
            }
            Err(e) => {
                servegate::errln!("error: {e}");
                code = exit::SPEC_INVALID;
            }
        }
    }
    code
}

fn cmd_inspect(
    file: &std::path::Path,
    model: Option<String>,
    models: Option<PathBuf>,
    require: Option<String>,
    forbid: Option<String>,
) -> i32 {
    use servegate::inspect;
    let fail = |e: String| {
        servegate::errln!("error: {e}");
        exit::EVIDENCE_ERROR
    };
    if file.extension().is_some_and(|e| e == "log") {
        let re = |p: Option<String>, flag: &str| match p.map(|p| regex::Regex::new(&p)) {
            Some(Err(e)) => Err(format!("--{flag}: {e}")),
            Some(Ok(r)) => Ok(Some(r)),
            None => Ok(None),
        };
        let (require, forbid) = match (re(require, "require"), re(forbid, "forbid")) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                servegate::errln!("error: {e}");
                return exit::USAGE;
            }
        };
        let bytes = match std::fs::read(file) {
            Ok(b) => b,
            Err(e) => return fail(format!("{}: {e}", file.display())),
        };
        let out = inspect::inspect_log(
            &file.display().to_string(),
            &bytes,
            require.as_ref(),
            forbid.as_ref(),
        );
        servegate::outln!(
            "{}",
            servegate::text::json(&serde_json::to_string_pretty(&out).unwrap_or_default())
        );
        return exit::PASS;
    }
    let served_models = match &models {
        None => None,
        Some(p) => match std::fs::read(p)
            .map_err(|e| e.to_string())
            .and_then(|b| inspect::served_models_of(&p.display().to_string(), &b))
        {
            Ok(ids) => Some(ids),
            Err(e) => return fail(format!("{}: {e}", p.display())),
        },
    };
    let identity = inspect::Identity {
        requested_model: model,
        served_models,
    };
    match inspect::inspect_file(file).map(|mut out| {
        inspect::apply_identity(&mut out.summary, &identity);
        out
    }) {
        Ok(out) => {
            servegate::outln!(
                "{}",
                servegate::text::json(&serde_json::to_string_pretty(&out).unwrap_or_default())
            );
            exit::PASS
        }
        Err(e) => {
            servegate::errln!("error: {e}");
            exit::EVIDENCE_ERROR
        }
    }
}
