//! `servegate run`: every gate checked, then run in turn through the events the console and the collector
//! hear, the records of a passing run (`--record`), the reports and the one `RESULT:` line. The library runs
//! and judges (`servegate::run`, `servegate::judge`); this module sequences, prints and maps to the exit code.

use std::path::PathBuf;

use servegate::error::exit;
use servegate::run::runner;
use servegate::sinks::events::{Collector, Console, Event, Fanout, Listed, Reporter};
use servegate::sinks::outputs::Outputs;
use servegate::sinks::report::{Producer, Results};
use servegate::spec;

use crate::records;

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
                errln!("error: {e}");
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
                errln!("error: {e}");
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
                Ok(p) => outln!("record: {}", p.display()),
                Err(e) => {
                    errln!("error: {e}");
                    return exit::SPEC_INVALID;
                }
            },
            Ok(Err(e)) => {
                errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
            Err(e) => {
                errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        }
    }
    outln!("now run `servegate leaderboard` to render the page");
    exit::PASS
}

/// `servegate run`: every spec checked first, then each gate run in turn ([`run_gate`]), then the records
/// of a passing run (`--record`, [`record_run`]) and the reports with the one `RESULT:` line ([`finish_run`]).
pub fn cmd_run(
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
        Ok(Some(note)) => errln!("note: {note}"),
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
        errln!("no record written: the run did not pass");
    } else if nothing_checked || passed_run.is_none() {
        errln!("no record written: the gate was skipped (unmet [requires]); nothing was measured");
    } else if let Some(run) = passed_run {
        return write_records(gate_file, run, id, dir);
    }
    exit::PASS
}

/// Stamps `results` with `code`, writes the reports, then prints the one `RESULT:` line, which always agrees
/// with the returned exit code: `PASS` (0), `SKIP (why)` (7: nothing was checked), `ERROR (why)` (a report
/// could not be written: 5, or an invalid spec: 3), else `FAIL`.
pub fn finish_run(
    outputs: &Outputs,
    results: Results,
    started: std::time::Instant,
    code: i32,
    why: &str,
) -> i32 {
    servegate::io::signals::checkpoint();
    let (written, errors) = outputs.finish(
        results,
        started.elapsed().as_secs_f64(),
        code,
        &servegate::io::printer::Printer::std(),
    );
    for e in &errors {
        errln!("error: {e}");
    }
    servegate::io::signals::checkpoint();
    outln!("RESULT: {}", result_word(code, written, why));
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

/// The gate files of `servegate run`'s arguments: a file as given, a directory as every `*.toml` in it sorted by
/// name (as the harness reads a gates directory). A directory with none: Err exit 7 (NOTHING_CHECKED), naming
/// it; a directory that cannot be read: Err exit 3, as a gate file that cannot be read.
pub fn gate_files(args: Vec<PathBuf>) -> Result<Vec<PathBuf>, (i32, String)> {
    let mut files = Vec::new();
    for a in args {
        if !a.is_dir() {
            files.push(a);
            continue;
        }
        let shown = servegate::text::shown(&a.display().to_string());
        let found: Vec<PathBuf> = servegate::run::harness::toml_files_in(&a)
            .map_err(|e| {
                (
                    exit::SPEC_INVALID,
                    format!("{shown}: cannot read the gates directory: {e}"),
                )
            })?
            .into_iter()
            .filter(|p| p.is_file())
            .collect();
        if found.is_empty() {
            return Err((
                exit::NOTHING_CHECKED,
                format!("nothing was checked: no gate file (*.toml) in {shown}"),
            ));
        }
        files.extend(found);
    }
    Ok(files)
}
