//! The gate's `setup` command (idempotent provisioning, before the serve starts): run in its own process
//! group with a deadline, its output in `setup.log`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::evidence::{EvidenceWriter, RunSummary};
use crate::io::progress::{last_line, Pacer, Waiting};
use crate::sinks::events::Step;
use crate::spec::ServeSpec;
use crate::vocab::{FailureCode, ServeFailure};

use super::step::Stop;

/// The run's setup step (a plain gate with `[serve] setup`): runs it, records `serve.setup` (its status and
/// time, or the reason it failed). Err([`Stop::Interrupted`]) when a stop signal came meanwhile,
/// Err(`setup_failed: ...`) when it failed.
pub(super) fn step(
    spec: &ServeSpec,
    w: &EvidenceWriter,
    summary: &mut RunSummary,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), Stop> {
    progress(&Step::Setup(spec.setup.join(" ")));
    let t = Instant::now();
    let setup_result = run_setup(
        &spec.setup,
        &spec.env,
        &w.path(crate::evidence::layout::SETUP_LOG),
        &mut |wt| progress(&Step::Waiting(wt.clone())),
    );
    if crate::io::signals::interrupted().is_some() {
        return Err(Stop::Interrupted);
    }
    match setup_result {
        Ok(status) => {
            summary.serve.setup = Some(format!("{status} in {:.1} s", t.elapsed().as_secs_f64()));
            Ok(())
        }
        Err(reason) => {
            summary.serve.setup = Some(reason.clone());
            progress(&Step::SetupFailed(reason.to_string()));
            Err(Stop::Failed(ServeFailure::new(
                FailureCode::SetupFailed,
                reason,
            )))
        }
    }
}

/// Runs the setup argv with `env`, its output going to `log`; Ok(status text) or Err(reason with the tail).
/// While it runs: `on_wait` with `setup: ARGV: 12 s (last: LOG LINE)` at 2 s, then every 10 s.
pub(super) fn run_setup(
    argv: &[String],
    env: &std::collections::BTreeMap<String, String>,
    log: &Path,
    on_wait: &mut dyn FnMut(&Waiting),
) -> Result<String, String> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).envs(env);
    crate::io::tool::logged_in_group(&mut cmd, log, 0)?;
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", argv[0]))?;
    // Its whole process group goes if the runner is stopped by a signal (the serve's own mechanism), and
    // if the runner is killed outright (SIGKILL): the serve's watchdog, over the setup's group.
    let pgid = child.id();
    let watchdog = crate::io::serve::watch_group(pgid);
    if !crate::io::signals::register(pgid, Duration::from_secs(2)) {
        // A stop signal is being handled: the handler will not see this group; stop it here.
        crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
        let _ = child.wait();
        drop(watchdog);
        return Err("interrupted before the setup could run".into());
    }
    let deadline = Instant::now() + Duration::from_secs_f64(SETUP_TIMEOUT_S);
    let mut pacer = Pacer::new(Instant::now());
    let what = format!("setup: {}", argv.join(" "));
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) if Instant::now() >= deadline => {
                crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(2));
                let _ = child.wait();
                break Err(format!(
                    "{} did not finish within {SETUP_TIMEOUT_S} s; its process group was stopped",
                    argv.join(" ")
                ));
            }
            Ok(None) => {
                if let Some(secs) = pacer.due(Instant::now()) {
                    // What the provisioning is doing now: its log's last line.
                    let tail = crate::io::serve::tail_file(log, 5);
                    let last = last_line(&tail).map(|l| format!("last: {l}"));
                    on_wait(&Waiting::new(what.as_str(), secs, last.as_deref()));
                }
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => break Err(format!("waiting for {:?}: {e}", argv[0])),
        }
    };
    // Stragglers the setup left in its group (a backgrounded child) do not outlive it.
    crate::io::signals::terminate_groups(&[pgid], Duration::from_secs(1));
    drop(watchdog); // the group is gone: the watchdog must not outlive it (pgid reuse)
    crate::io::signals::deregister(pgid);
    let status = status?;
    if status.success() {
        Ok(status.to_string())
    } else {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text
            .lines()
            .rev()
            .take(10)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(format!(
            "{} ({status}); last lines of setup.log:\n{}",
            argv.join(" "),
            tail.join("\n")
        ))
    }
}

/// Longest a gate's `setup` command may run, seconds (a first provisioning takes about 15 s here).
pub(crate) const SETUP_TIMEOUT_S: f64 = 1800.0;
