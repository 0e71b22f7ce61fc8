//! `servegate init`: the flags, and the printing of what the library found, could not find, and wrote
//! (`servegate::run::init`).

use std::path::PathBuf;

use servegate::error::exit;
use servegate::run::init::{self, InitOptions, InitTarget};
use servegate::text::shown;

/// `servegate init`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("serve").required(true).args(["url", "command"])))]
pub struct InitCmd {
    /// A serve that is already running: its base URL (`http://127.0.0.1:8080`).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// With --url: the file the serve logs to, read for route lines (only its lines written during a run
    /// reach a url gate's route assertion).
    #[arg(long, value_name = "FILE", requires = "url")]
    pub log: Option<PathBuf>,
    /// The gate's name (A-Z a-z 0-9 - _ .).
    #[arg(long, default_value = "my-serve")]
    pub name: String,
    /// The gate file to write (default gates/NAME.toml).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Replace the gate file when it exists.
    #[arg(long)]
    pub force: bool,
    /// The served model name, when /v1/models lists none or several.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// max_tokens of each timed request, 1-4096.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_tokens: u32,
    /// Rounds of the three timed prompts in the measured round and the gate (n = 3 x repeats; the floor's
    /// bound needs 5 measured values, so 3 rounds leave room for replies a busy machine read in one burst), 2-20.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=20))]
    pub repeats: u32,
    /// Write the gate without [assert.route] when the log names no route (the gate says so).
    #[arg(long)]
    pub no_route: bool,
    /// Headroom of the floor below the measured median's lower bound (and of the first-token limit above its
    /// upper bound), percent, 0 to below 100: bless's one-run rule, with room for a shared machine's load to
    /// change.
    #[arg(long, default_value_t = init::DEFAULT_HEADROOM_PCT, value_parser = super::conventions::pct_below_100)]
    pub headroom_pct: f64,
    /// Evidence root of the measured round (default $SERVEGATE_RUNS or target/servegate/runs).
    #[arg(long, value_name = "DIR")]
    pub runs: Option<PathBuf>,
    /// Seconds a started serve may take to answer /v1/models (vLLM on CPU took 215 s on a busy 2-core machine).
    #[arg(long, default_value_t = init::DEFAULT_READY_TIMEOUT_S)]
    pub ready_timeout_s: f64,
    /// Print no progress lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// The serve to start, as a gate's [serve] command: `{port}` is a free port init picks (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `servegate init`: runs the library's init and prints what it found, what it could not, and the file.
pub fn cli(cmd: &InitCmd) -> i32 {
    let valid_name = !cmd.name.is_empty()
        && !cmd.name.starts_with(['.', '-'])
        && cmd
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid_name {
        errln!(
            "error: --name {}: use A-Z a-z 0-9 - _ . (not starting with . or -)",
            shown(&cmd.name)
        );
        return exit::USAGE;
    }
    if cmd.url.is_some() && !cmd.command.is_empty() {
        errln!("error: give either --url or a command after --, not both");
        return exit::USAGE;
    }
    let target = match &cmd.url {
        Some(url) => InitTarget::Url {
            url: url.clone(),
            log: cmd.log.clone(),
        },
        None => InitTarget::Command(cmd.command.clone()),
    };
    let opts = InitOptions {
        target,
        name: cmd.name.clone(),
        out: cmd
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("gates").join(format!("{}.toml", cmd.name))),
        force: cmd.force,
        model: cmd.model.clone(),
        max_tokens: cmd.max_tokens,
        repeats: cmd.repeats,
        no_route: cmd.no_route,
        headroom_pct: cmd.headroom_pct,
        runs: cmd
            .runs
            .clone()
            .unwrap_or_else(servegate::run::runner::runs_root),
        ready_timeout_s: cmd.ready_timeout_s,
    };
    let quiet = cmd.quiet;
    let result = init::init(&opts, &mut |l| {
        if !quiet {
            errln!("init: {l}");
        }
    });
    let report = match &result {
        Ok(r) => r,
        Err(e) => &e.report,
    };
    for f in &report.found {
        outln!("found: {}", shown(f));
    }
    for m in &report.missing {
        outln!("not found: {}", shown(m));
    }
    match result {
        Ok(r) => {
            let path = r.written.as_ref().unwrap_or(&opts.out);
            let p = shown(&path.display().to_string());
            outln!("wrote {p}");
            outln!("next: servegate check {p} && servegate run {p}  (docs/getting-started.md)");
            exit::PASS
        }
        Err(e) => {
            errln!("error: {} (nothing written)", shown(&e.message));
            e.code
        }
    }
}
