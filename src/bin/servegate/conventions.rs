//! `servegate completions SHELL` and `servegate man`: shell completions (clap_complete) and a man page in roff
//! (clap_mangen), both generated from the clap definitions of this binary, so they name exactly the
//! subcommands and flags it has. Written to stdout through the one writer (`out!`).

use clap::CommandFactory;

/// `servegate completions SHELL`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, e.g. bash:
    /// `servegate completions bash > ~/.local/share/bash-completion/completions/servegate`.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Writes the completion script of `args.shell` to stdout; 0.
pub fn cli_completions(args: &CompletionsArgs) -> i32 {
    let mut cmd = super::Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "servegate", &mut buf);
    out!("{}", String::from_utf8_lossy(&buf));
    0
}

/// Writes the man page (section 1, roff) to stdout; 0, or 5 when it cannot be rendered.
pub fn cli_man() -> i32 {
    let cmd = super::Cli::command();
    let mut buf = Vec::new();
    match clap_mangen::Man::new(cmd).render(&mut buf) {
        Ok(()) => {
            out!("{}", String::from_utf8_lossy(&buf));
            0
        }
        Err(e) => {
            errln!("error: the man page could not be rendered: {e}");
            servegate::error::exit::EVIDENCE_ERROR
        }
    }
}

/// A clap value parser for a finite percent `x` with `0 <= x < max` (a headroom): a value outside is a usage
/// error (exit 2) naming the flag and its range before anything is read.
fn pct_below(s: &str, max: f64) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("not a number (a percent, 0 to below {max})"))?;
    if x.is_finite() && (0.0..max).contains(&x) {
        Ok(x)
    } else {
        Err(format!("must be a percent from 0 to below {max}"))
    }
}

/// `--headroom-pct` of bless's floor and init: 0 to below 100 ([`pct_below`]).
pub fn pct_below_100(s: &str) -> Result<f64, String> {
    pct_below(s, 100.0)
}

/// `--limit-headroom-pct` of bless's footprint limits: 0 to below 1000 ([`pct_below`]).
pub fn pct_below_1000(s: &str) -> Result<f64, String> {
    pct_below(s, 1000.0)
}

/// `--confidence` of bless's floor: a fraction strictly between 0 and 1 (0.95 = 95 %).
pub fn confidence(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| "not a number (a fraction strictly between 0 and 1, e.g. 0.95)".to_string())?;
    if x.is_finite() && x > 0.0 && x < 1.0 {
        Ok(x)
    } else {
        Err("must be a fraction strictly between 0 and 1 (e.g. 0.95 for 95 %)".to_string())
    }
}
