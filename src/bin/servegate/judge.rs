//! `servegate judge`: re-judges a recorded run directory through the same events, reporters and
//! finalisation as `servegate run`; and the re-judging `servegate export` uses for a run directory.

use std::path::PathBuf;

use servegate::error::exit;
use servegate::run::runner;
use servegate::sinks::events::{Collector, Console, Event, Fanout, Listed, Reporter};
use servegate::sinks::outputs::Outputs;
use servegate::sinks::report::{Producer, Results};
use servegate::{evidence, judge, spec};

use crate::run::finish_run;

/// `servegate judge`: re-judges a run directory and reports it through the same events, reporters and
/// finalisation as `servegate run` (so the same evidence gives the same verdict lines, reports and exit code).
pub fn cmd_judge(dir: &std::path::Path, gate: Option<PathBuf>, outputs: &Outputs) -> i32 {
    let started = std::time::Instant::now();
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        errln!(
            "error: {} does not exist (a run directory holds run.json or pair.json)",
            servegate::text::shown(&dir.display().to_string())
        );
        return exit::EVIDENCE_ERROR;
    }
    let run_json = dir.join(servegate::evidence::layout::RUN_FILE);
    if !run_json.is_file() && !evidence::is_pair_dir(dir) {
        // A run.json that is there but no regular file (a link to a device, a FIFO): said as such.
        if let Err(e) = servegate::io::input::open_regular(&run_json) {
            if e.kind() != std::io::ErrorKind::NotFound {
                errln!("error: {}: {e}", run_json.display());
                return exit::EVIDENCE_ERROR;
            }
        }
        errln!(
            "error: {} is not a run directory (no run.json or pair.json)",
            dir.display()
        );
        return exit::EVIDENCE_ERROR;
    }
    // A load point or a pair arm holds a run.json but is judged only with its run: its gate's verdicts
    // (a sweep's bounds, a ratio) need the points or arms beside it.
    if let Some(part) = part_of_a_run(dir) {
        errln!("error: {part}");
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
                errln!(
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
                errln!(
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
            errln!("error: {e}");
            return code;
        }
    };
    if evidence::is_pair_dir(dir) && g.pair.is_none() {
        errln!(
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
                errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        };
        let verdicts = judge::judge_pair(&g, &ev);
        runner::pair_outcome(&g, dir, ev.summary, verdicts)
    } else {
        let ev = match servegate::loaded::load(dir) {
            Ok(ev) => ev,
            Err(e) => {
                errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        };
        let mut verdicts = servegate::loaded::judge_run(&g, &ev);
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

/// When `dir` is a part of a run rather than a run: a load sweep's point (its `load.json`, under a run
/// directory) or an arm of a pair run (its parent holds `pair.json`). Then the sentence naming the run to
/// judge instead: `DIR is point c=1 of the load run PARENT: judge PARENT`. None for a run directory.
fn part_of_a_run(dir: &std::path::Path) -> Option<String> {
    use servegate::evidence::layout::RUN_FILE;
    let parent = match dir.parent() {
        Some(p) if dir.file_name().is_some() && p.as_os_str().is_empty() => PathBuf::from("."),
        Some(p) if dir.file_name().is_some() => p.to_path_buf(),
        // `.` or `..`: the parent of where it leads.
        _ => dir.canonicalize().ok()?.parent()?.to_path_buf(),
    };
    let name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))?;
    let load_file = dir.join(servegate::evidence::load::LOAD_FILE);
    if load_file.is_file() && parent.join(RUN_FILE).is_file() {
        let point = servegate::evidence::load::read_record(dir)
            .map(|r| servegate::text::shown(&r.point))
            .unwrap_or(servegate::text::shown(&name));
        return Some(format!(
            "{} is point {point} of the load run {}, not a run of its own: judge {}",
            dir.display(),
            parent.display(),
            parent.display()
        ));
    }
    if evidence::is_pair_dir(&parent) {
        let arm = evidence::read_pair_summary(&parent).ok().and_then(|p| {
            p.arms
                .iter()
                .find(|a| a.dir == name)
                .map(|a| format!("arm {} ({})", a.arm, servegate::text::shown(&a.role)))
        });
        return Some(format!(
            "{} is {} of the pair run {}, not a run of its own: judge {}",
            dir.display(),
            arm.unwrap_or_else(|| "an arm".into()),
            parent.display(),
            parent.display()
        ));
    }
    None
}

/// `--gate` given as a pipe or a device (`/dev/stdin`, a `<(...)` file), whose bytes can be read once:
/// read once into `gate.toml` of a temporary directory (kept while the returned guard lives), as judging
/// reads the gate file more than once (the outputs' guard, [`cmd_judge`]). A regular file (or none) is returned as given. Errors: it cannot be
/// read or the copy written, in words naming it.
pub fn spooled(
    gate: Option<PathBuf>,
) -> Result<(Option<PathBuf>, Option<tempfile::TempDir>), String> {
    let Some(p) = gate else {
        return Ok((None, None));
    };
    if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
        return Ok((Some(p), None));
    }
    let bytes = servegate::io::input::read_piped(&p, spec::MAX_GATE_BYTES)
        .map_err(|e| format!("{}: {e}", p.display()))?;
    let dir = tempfile::tempdir().map_err(|e| format!("a copy of {}: {e}", p.display()))?;
    let copy = dir.path().join("gate.toml");
    std::fs::write(&copy, bytes).map_err(|e| format!("{}: {e}", copy.display()))?;
    Ok((Some(copy), Some(dir)))
}

/// The gate that judges run directory `dir`: `gate_file` itself, or for a matrix gate the entry the run
/// ran (run.json's `gate`, `<gate>[<model>]`). Errors: the gate file's (exit 3), or, when the entry cannot
/// be chosen because run.json is missing or unreadable, that file's (exit 5: evidence, not the spec).
fn gate_of_run(
    gate_file: &std::path::Path,
    dir: &std::path::Path,
) -> Result<spec::GateSpec, (i32, String)> {
    let run_json = dir.join(servegate::evidence::layout::RUN_FILE);
    let run_gate: Result<Option<String>, String> =
        servegate::io::input::read(&run_json, servegate::io::input::MAX_EVIDENCE_BYTES)
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
pub fn judged_results(dir: &std::path::Path) -> Result<Results, String> {
    let gate_file = dir.join(servegate::evidence::layout::GATE_FILE);
    let g = gate_of_run(&gate_file, dir).map_err(|(_, e)| e)?;
    let outcome = if evidence::is_pair_dir(dir) {
        let ev = servegate::loaded::load_pair(dir).map_err(|e| e.to_string())?;
        let verdicts = judge::judge_pair(&g, &ev);
        runner::pair_outcome(&g, dir, ev.summary, verdicts)
    } else {
        let ev = servegate::loaded::load(dir).map_err(|e| e.to_string())?;
        let verdicts = servegate::loaded::judge_run(&g, &ev);
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
