//! The interleaved baseline serve of a regression gate, expressed as a pair (on a shared machine the load drifts
//! between windows, so the baseline runs beside the candidate in blocks and the drift cancels; docs/regression.md):
//! `[assert.regression] baseline_serve = { command = [...] }` names the last good release's serve; the runner
//! then runs the gate as a pair whose arm `theirs` is the **baseline** and `ours` the **candidate** (the gate's
//! own `[serve] command`), in A-B-B-A blocks with the same prompts ([`abba_order`]). Nothing new runs: the
//! pair machinery (`run/runner.rs` pair path: one model file hashed before and after, each arm starting its
//! serve, sending every request and stopping it) writes a pair directory, and the regression judge reads the
//! blocks from it (`analysis::pair`).
//!
//! Pure: takes the validated pieces (argv already expanded) and returns a [`PairSpec`]. The spec parser calls
//! [`as_pair`] when the key is present (spec/regression.rs parses `[assert.regression]`; this module is the
//! bridge).

use std::collections::BTreeMap;

use crate::spec::{ArmSpec, PairSpec};
use crate::vocab::Role;

/// `baseline_serve` of `[assert.regression]`, validated: the baseline's serve argv (placeholders expanded
/// except `{host}` / `{port}`, as `[pair.*] command`), what it is, its extra environment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BaselineServe {
    /// The serve argv.
    pub command: Vec<String>,
    /// What runtime it is (for people and records); empty = `baseline`.
    pub runtime: String,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
}

/// The arm order of `blocks` A-B-B-A blocks, baseline first: `theirs, ours, ours, theirs` repeated. One block
/// cancels a linear drift of the machine's speed within it; the regression judge pairs arms by block.
pub fn abba_order(blocks: usize) -> Vec<String> {
    let one = [Role::Theirs, Role::Ours, Role::Ours, Role::Theirs];
    (0..blocks.max(1))
        .flat_map(|_| one.iter().map(|r| r.name().to_string()))
        .collect()
}

/// The pair a regression gate with a baseline serve runs as: `ours` = the candidate (`candidate_command`, the
/// gate's `[serve] command`, with `candidate_env`), `theirs` = the baseline, both on `model_file`, in
/// `blocks` A-B-B-A blocks. Errors (for the parser to place at the key): an empty baseline command, or one
/// that does not pass the model file (both arms must load the same file, which the runner hashes).
pub fn as_pair(
    candidate_command: &[String],
    candidate_env: &BTreeMap<String, String>,
    model_file: &str,
    baseline: &BaselineServe,
    blocks: usize,
) -> Result<PairSpec, String> {
    if baseline.command.is_empty() || baseline.command[0].trim().is_empty() {
        return Err("baseline_serve.command is empty".into());
    }
    for (what, argv) in [
        ("baseline_serve.command", &baseline.command[..]),
        ("serve.command", candidate_command),
    ] {
        if !argv.iter().any(|a| a.contains(model_file)) {
            return Err(format!(
                "{what} does not pass the model file {model_file:?}: both serves must load the same file"
            ));
        }
    }
    Ok(PairSpec {
        ours: ArmSpec {
            role: Role::Ours.name().into(),
            runtime: "candidate".into(),
            command: candidate_command.to_vec(),
            model_file: model_file.into(),
            env: candidate_env.clone(),
            derived_from: None,
        },
        theirs: ArmSpec {
            role: Role::Theirs.name().into(),
            runtime: if baseline.runtime.is_empty() {
                "baseline".into()
            } else {
                baseline.runtime.clone()
            },
            command: baseline.command.clone(),
            model_file: model_file.into(),
            env: baseline.env.clone(),
            derived_from: None,
        },
        order: abba_order(blocks),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_baseline_serve_becomes_the_theirs_arm_of_abba_blocks() {
        assert_eq!(abba_order(1), ["theirs", "ours", "ours", "theirs"]);
        assert_eq!(abba_order(2).len(), 8);
        assert_eq!(abba_order(0), abba_order(1));
        let base = BaselineServe {
            command: argv(&["old-serve", "--model", "/m.gguf", "--port", "{port}"]),
            ..BaselineServe::default()
        };
        let cand = argv(&["new-serve", "-m", "/m.gguf", "--port", "{port}"]);
        let p = as_pair(&cand, &BTreeMap::new(), "/m.gguf", &base, 2).unwrap();
        assert_eq!(p.theirs.command[0], "old-serve");
        assert_eq!(p.theirs.runtime, "baseline");
        assert_eq!(p.ours.command[0], "new-serve");
        assert_eq!(p.ours.runtime, "candidate");
        assert_eq!(p.order, abba_order(2));
        assert_eq!(p.arm("theirs").command, base.command);
    }

    #[test]
    fn a_baseline_serve_on_another_model_file_or_empty_is_refused() {
        let cand = argv(&["new-serve", "-m", "/m.gguf"]);
        let other = BaselineServe {
            command: argv(&["old-serve", "-m", "/other.gguf"]),
            ..BaselineServe::default()
        };
        let e = as_pair(&cand, &BTreeMap::new(), "/m.gguf", &other, 1).unwrap_err();
        assert!(e.contains("baseline_serve.command"), "{e}");
        let e = as_pair(
            &cand,
            &BTreeMap::new(),
            "/m.gguf",
            &BaselineServe::default(),
            1,
        )
        .unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }
}
