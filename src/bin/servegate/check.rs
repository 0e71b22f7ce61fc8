//! `servegate check`: validates gate specs without running anything; prints each gate's assertions (and
//! what an engine profile or untimed prompts change).

use std::path::PathBuf;

use servegate::error::exit;
use servegate::spec;

/// `servegate check FILES`: exit 0 when every spec is valid, else 3 (each error printed).
pub fn cmd_check(files: &[PathBuf]) -> i32 {
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
                    outln!(
                        "{}: ok ({}; assertions: {})",
                        f.display(),
                        g.name,
                        g.trial_names().join(", ")
                    );
                    // A latency percentile the gate's `[load] requests` can never reach: every run of it
                    // would be INDETERMINATE, said now rather than after the run.
                    if let Some(l) = &g.load {
                        for w in servegate::judge::load::undecidable(l) {
                            outln!("  warning: {w}");
                        }
                    }
                    if let Some(w) = cwd_dependent_program(&g) {
                        outln!("  warning: {w}");
                    }
                    // A gate with an engine profile: what it inherited, after the gate's overrides.
                    if let Some(line) = spec::profile::effective(&g.serve, &g.request) {
                        outln!("  {line}");
                    }
                    // Prompts asked for their answer only: the timing verdicts never see them.
                    if !g.request.untimed.is_empty() {
                        let quoted: Vec<String> =
                            g.request.untimed.iter().map(|p| format!("{p:?}")).collect();
                        outln!(
                            "  untimed (answer only; no rate, first_token, tpot or regression value): {}",
                            quoted.join(", ")
                        );
                    }
                }
            }
            Err(e) => {
                errln!("error: {e}");
                code = exit::SPEC_INVALID;
            }
        }
    }
    code
}

/// A serve command whose program is a relative path with a `/`: the serve starts in the working directory
/// servegate runs in, so the gate runs only from the one it was written for (`spawn_failed` from any other).
/// The sentence, naming the word (escaped) and the fix: the word from `{gate_dir}` when it names a file from
/// the gate's directory or the checkout holding it (docs/getting-started.md).
fn cwd_dependent_program(g: &spec::GateSpec) -> Option<String> {
    let spec::ServeMode::Command(argv) = &g.serve.mode else {
        return None;
    };
    let program = argv.first()?;
    if !program.contains('/') || program.starts_with('/') {
        return None;
    }
    let gate_dir = spec::Context::for_file(&g.file).gate_dir;
    let word = program.trim_start_matches("./");
    let fix = if gate_dir.join(word).is_file() {
        format!("\"{{gate_dir}}/{word}\"")
    } else if gate_dir.join("..").join(word).is_file() {
        format!("\"{{gate_dir}}/../{word}\"")
    } else {
        "`{gate_dir}/...` (a file of the checkout holding `gates/`: `{gate_dir}/../PATH`)"
            .to_string()
    };
    Some(servegate::text::shown(&format!(
        "serve.command {program:?}: a relative path, found only from the working directory servegate runs in (the serve starts there, not in the gate's directory); write it as {fix} (docs/getting-started.md)"
    )))
}
