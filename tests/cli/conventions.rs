//! `servegate --version` names the commit it was built from; `servegate completions SHELL` and `servegate
//! man` are generated from the clap definitions, so they name every subcommand `servegate --help` lists.

use std::process::Command;

use crate::fixtures;

fn stdout(args: &[&str]) -> String {
    let out = Command::new(fixtures::BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "servegate {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `servegate --help` lists (hidden ones are not listed), `help` aside.
fn subcommands() -> Vec<String> {
    let help = stdout(&["--help"]);
    let list: Vec<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect();
    assert!(
        list.len() >= 10 && list.iter().any(|c| c == "man"),
        "{help}"
    );
    list
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let v = stdout(&["--version"]);
    let v = v.trim();
    let rest = v
        .strip_prefix(concat!(
            "servegate ",
            env!("CARGO_PKG_VERSION"),
            " (commit "
        ))
        .unwrap_or_else(|| panic!("{v}"));
    let commit = rest.strip_suffix(')').unwrap_or_else(|| panic!("{v}"));
    // Built from this checkout: its HEAD (cargo rebuilds when HEAD moves); else the clean fallback.
    let head = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(h) if std::env::var("SERVEGATE_BUILD_COMMIT").is_err() => assert_eq!(commit, h, "{v}"),
        _ => assert!(
            commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
            "{v}"
        ),
    }
}

#[test]
fn completions_name_every_subcommand_and_bash_parses_them() {
    let subs = subcommands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        for s in &subs {
            assert!(script.contains(s.as_str()), "{shell} completions lack {s}");
        }
        // Flags of a subcommand too (fish writes `-l junit`).
        assert!(script.contains("junit"), "{shell}");
    }
    let script = stdout(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("servegate.bash");
    std::fs::write(&f, script).unwrap();
    if let Ok(st) = Command::new("bash").arg("-n").arg(&f).status() {
        assert!(st.success(), "bash -n refuses the completion script");
    }
    let bad = Command::new(fixtures::BIN)
        .args(["completions", "cmd.exe"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is bad usage");
}

#[test]
fn the_man_page_is_roff_naming_every_subcommand_and_the_version() {
    let man = stdout(&["man"]);
    assert!(
        man.contains(".TH servegate 1"),
        "{}",
        &man[..man.len().min(400)]
    );
    assert!(
        man.contains("(commit "),
        "the man page carries the version line"
    );
    // roff writes a hyphen `\-`.
    for s in subcommands() {
        assert!(
            man.contains(&s.replace('-', "\\-")),
            "the man page lacks {s}"
        );
    }
}
