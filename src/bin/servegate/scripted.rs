//! `servegate scripted-serve` (hidden): the flags of the fake serve servegate's own tests start; the library
//! plays the script (`servegate::replay::scripted`).

use std::path::PathBuf;

use servegate::error::exit;
use servegate::replay::scripted;

/// `servegate scripted-serve` arguments (a hidden subcommand: a fake serve for servegate's own tests).
#[derive(Debug, Clone, clap::Args)]
pub struct ScriptedArgs {
    /// The script: JSON, or TOML when the name ends in `.toml` (a `servegate::replay::scripted::Script`).
    #[arg(long, required_unless_present = "script_json")]
    pub script: Option<PathBuf>,
    /// The script as inline JSON (instead of --script).
    #[arg(long, conflicts_with = "script")]
    pub script_json: Option<String>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one; the script's `start.bind_port` overrides it).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// `NAME=VALUE`, for the script's `{var:NAME}` (repeatable): what a gate puts on the serve's command
    /// line (`--var model={model}`).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
}

/// `servegate scripted-serve`: loads the script and plays it. Returns the exit code when it stops on its
/// own (a bad script: 2; a failed bind); a scripted exit ends the process directly.
pub fn cli(args: &ScriptedArgs) -> i32 {
    let loaded = scripted::load(args.script.as_deref(), args.script_json.as_deref())
        .and_then(|s| Ok((s, scripted::var_pairs(&args.vars)?)));
    let (script, vars) = match loaded {
        Ok(s) => s,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let listen = scripted::Listen {
        host: args.host.clone(),
        port: args.port,
        vars,
    };
    scripted::serve(script, &listen)
}
