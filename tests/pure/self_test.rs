//! What goes here: the embedded shapes judged in process. `servegate self-test` as a program is
//! tests/cli/self_test.rs.
//!
//! `servegate self-test` (the judge proves itself on any machine): the release binary judges its embedded judging table with no
//! serve and no device. The seed's shapes pass; every shape passes, one per kind of false pass docs/pass-is-proof.md lists; and the whole
//! self-test passes as a program (one line per shape, exit 0).

use servegate::run::selftest::{self, SHAPES};

#[test]
fn every_shape_passes_one_for_every_kind() {
    let results = selftest::run(None).unwrap();
    assert_eq!(results.len(), SHAPES.len());
    let bad: Vec<String> = results
        .iter()
        .filter(|r| !r.ok())
        .map(|r| r.line())
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // One shape for every kind of docs/pass-is-proof.md is in the table (the self-test itself is the last kind).
    for k in 1..=12 {
        assert!(
            results.iter().any(|r| r.kind == k.to_string()),
            "no shape of kind {k}"
        );
    }
}
