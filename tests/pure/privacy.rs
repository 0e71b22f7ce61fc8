//! What goes here: the scan of the committed records, evidence and baselines. A live `servegate run` under a
//! fake `$HOME` is tests/cli/privacy.rs.
//!
//! Privacy of published records and evidence (docs/evidence.md "Privacy"): what servegate
//! writes carries no absolute home or checkout path and no host name unless the gate opts in
//! (`[record] publish_host = true`).
//!
//! * the committed `data/records/` (records and `data/records/evidence/`) and `data/baselines/` (blessed run directories)
//!   are scanned for absolute home and checkout paths and for host names;
//! * a live `servegate run` (a synthetic serve, started from a script under a fake `$HOME`) writes `run.json`,
//!   `serve.log` and `setup.log` with `~` and checkout-relative paths and an empty `host.hostname`; with
//!   `publish_host = true` the host name is kept.

use crate::fixtures::privacy::{host_words, hostname};
use crate::fixtures::root;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            files(&e.path(), out);
        } else {
            out.push(e.path());
        }
    }
}

/// Absolute home or checkout paths in `text`: `/root/...`, `/home/<user>/...`, `/Users/<user>/...`, this
/// checkout and this `$HOME` (each at a path boundary).
fn private_paths(text: &str) -> Vec<String> {
    let mut pats = vec![
        r"/root(/|\b)".to_string(),
        r"/home/[^/\s]+".into(),
        r"/Users/[^/\s]+".into(),
    ];
    for d in [Some(root()), std::env::var_os("HOME").map(PathBuf::from)]
        .into_iter()
        .flatten()
        .filter(|d| d.parent().is_some())
    {
        pats.push(regex::escape(&d.display().to_string()));
    }
    let re = regex::Regex::new(&format!(
        r#"(^|[\s"'=(:,])(?:{})(?:/|[^\w.-]|$)"#,
        pats.join("|")
    ))
    .unwrap();
    re.find_iter(text).map(|m| m.as_str().to_string()).collect()
}

#[test]
fn committed_records_baselines_and_evidence_hold_no_home_or_checkout_path_and_no_host_name() {
    let mut all = Vec::new();
    files(&root().join("data/records"), &mut all);
    assert!(
        all.len() > 20,
        "data/records/ and its evidence: {}",
        all.len()
    );
    // The committed baselines (`servegate bless` copies run directories there) are evidence too.
    let before = all.len();
    files(&root().join("data/baselines"), &mut all);
    assert!(
        all.len() - before > 20,
        "data/baselines/: {}",
        all.len() - before
    );
    // The coverage page's inputs (matrix-gate run directories) are published evidence as well.
    let before = all.len();
    files(&root().join("data/coverage/runs"), &mut all);
    assert!(all.len() > before, "data/coverage/runs/ is empty");
    let host = hostname();
    for f in &all {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        let found = private_paths(&text);
        assert!(found.is_empty(), "{}: {found:?}", f.display());
        assert_eq!(
            host_words(&text, &host),
            0,
            "{}: host name {host:?}",
            f.display()
        );
        let name = f.file_name().unwrap().to_string_lossy();
        if name == "run.json" || name == "pair.json" {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["host"]["hostname"], "", "{}", f.display());
        }
    }
    // The scan itself finds what it must.
    assert_eq!(private_paths("model '/root/.cache/m.gguf'").len(), 1);
    assert_eq!(private_paths("\"/home/ann/x\"").len(), 1);
    assert!(private_paths("~/.cache/m.gguf gates/x.toml /rootfs").is_empty());
}
