//! Build facts for `servegate --version`: the commit the binary was built from (`SERVEGATE_COMMIT`, the
//! 12-digit abbreviation of `git rev-parse HEAD`), or `unknown` when it was not built from a git checkout (a
//! crates.io package, a source tarball) or git is not installed. `SERVEGATE_BUILD_COMMIT` set at build time
//! overrides it (a packager who knows the commit). Reruns when HEAD moves, not on every edit: a working tree
//! with uncommitted changes still names its HEAD commit.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SERVEGATE_BUILD_COMMIT");
    // The package's directory as cargo sets it for this run of the script, not `env!` (the directory the script
    // was compiled in): two checkouts sharing one target directory (scripts/install-check.sh installs from a
    // clone with the workspace's target/) share this script's compiled binary, and a baked-in path named the
    // clone, deleted since, so the workspace's binary said `commit unknown`.
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .expect("cargo sets CARGO_MANIFEST_DIR for a build script");
    let here = manifest_dir.as_path();
    // Only this checkout's own repository: a crate unpacked inside some other repository is not its commit.
    let toplevel = git(&[
        "-C",
        &here.to_string_lossy(),
        "rev-parse",
        "--show-toplevel",
    ])
    .map(PathBuf::from)
    .and_then(|p| p.canonicalize().ok());
    let ours = toplevel.is_some_and(|t| here.canonicalize().is_ok_and(|h| h == t));
    // clap prints --version itself: only the characters a commit or tag name needs, at most 40.
    let commit = std::env::var("SERVEGATE_BUILD_COMMIT")
        .ok()
        .map(|c| {
            c.chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+'))
                .take(40)
                .collect::<String>()
        })
        .filter(|c| !c.is_empty())
        .or_else(|| {
            ours.then(|| {
                git(&[
                    "-C",
                    &here.to_string_lossy(),
                    "rev-parse",
                    "--short=12",
                    "HEAD",
                ])
            })
            .flatten()
        });
    if ours {
        // HEAD, the branch it names and packed-refs: what moves when a commit is made or checked out.
        let dir = |flag: &str| git(&["-C", &here.to_string_lossy(), "rev-parse", flag]);
        if let Some(git_dir) = dir("--absolute-git-dir") {
            println!("cargo:rerun-if-changed={git_dir}/HEAD");
        }
        if let (Some(common), Some(head_ref)) = (
            dir("--git-common-dir"),
            git(&["-C", &here.to_string_lossy(), "symbolic-ref", "-q", "HEAD"]),
        ) {
            let common = if Path::new(&common).is_absolute() {
                PathBuf::from(common)
            } else {
                here.join(common)
            };
            // Only files that exist: a missing one would rerun the script (and rebuild) every time.
            for f in [common.join(head_ref), common.join("packed-refs")] {
                if f.exists() {
                    println!("cargo:rerun-if-changed={}", f.display());
                }
            }
        }
    }
    println!(
        "cargo:rustc-env=SERVEGATE_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo:rerun-if-changed=build.rs");
}
