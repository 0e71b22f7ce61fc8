//! The gate files the harness reads: `$SERVEGATE_GATES` (a directory or one file) or `gates/`, and why none
//! is selected.

use std::path::{Path, PathBuf};

use libtest_mimic::Arguments;

/// The gate files: `root` (a directory or a file), `*.toml` sorted by name.
pub(crate) fn discover_in(root: &Path) -> Result<Vec<PathBuf>, String> {
    if root.is_file() {
        return Ok(vec![root.to_path_buf()]);
    }
    toml_files_in(root).map_err(|e| {
        format!(
            "{}: {e} (set SERVEGATE_GATES to a gates directory)",
            root.display()
        )
    })
}

/// The `*.toml` entries of the directory `dir` (one level, not its subdirectories), sorted by name: the
/// gate files of a gates directory, for the harness and for `servegate run DIR`.
pub fn toml_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Why no trial is selected: no gate file in the gates directory (naming gate files found only in its
/// subdirectories, which are not read), or a filter that matches none of the `total` trials.
pub(crate) fn nothing_selected(
    files: &[PathBuf],
    gates: &Path,
    args: &Arguments,
    total: usize,
) -> String {
    if files.is_empty() {
        let nested = nested_gate_files(gates);
        let mut why = format!(
            "nothing was checked: no gate file (*.toml) in {}",
            gates.display()
        );
        if !nested.is_empty() {
            let shown: Vec<String> = nested
                .iter()
                .take(5)
                .map(|p| p.display().to_string())
                .collect();
            why.push_str(&format!(
                "; gate files in its subdirectories are not read ({}{}): set SERVEGATE_GATES to the directory \
                 that holds them",
                shown.join(", "),
                if nested.len() > 5 { ", ..." } else { "" }
            ));
        } else {
            why.push_str(" (set SERVEGATE_GATES to a gates directory or one gate file)");
        }
        return why;
    }
    let mut what = Vec::new();
    if let Some(f) = &args.filter {
        what.push(format!(
            "{} `{f}`",
            if args.exact {
                "the exact name"
            } else {
                "the filter"
            }
        ));
    }
    if !args.skip.is_empty() {
        what.push(format!("--skip {}", args.skip.join(", ")));
    }
    if args.ignored {
        what.push("--ignored (no trial is marked ignored)".to_string());
    }
    format!(
        "nothing was checked: {} selects none of the {total} trials (`cargo test --test gates -- --list` \
         lists them)",
        if what.is_empty() {
            "the arguments".to_string()
        } else {
            what.join(" with ")
        }
    )
}

/// `*.toml` files one level below `dir` (gates put in a subdirectory by mistake), sorted.
fn nested_gate_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut subdirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    for d in subdirs {
        if let Ok(files) = discover_in(&d) {
            out.extend(files);
        }
    }
    out
}
