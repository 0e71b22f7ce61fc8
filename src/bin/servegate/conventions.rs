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
