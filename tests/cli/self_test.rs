//! What goes here: `servegate self-test` as a program. The shapes judged in process are
//! tests/pure/self_test.rs.
//!
//! `servegate self-test` (the judge proves itself on any machine): the release binary judges its embedded judging table with no
//! serve and no device. The seed's shapes pass; every shape passes, one per kind of false pass docs/pass-is-proof.md lists; and the whole
//! self-test passes as a program (one line per shape, exit 0).

use crate::fixtures;
use servegate::run::selftest::{self, SHAPES};

fn self_test(args: &[&str]) -> (i32, String) {
    let out = fixtures::servegate()
        .arg("self-test")
        .args(args)
        .env("TMPDIR", std::env::temp_dir())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_seed_shapes_pass_one_line_each_and_exit_0() {
    let (code, out) = self_test(&["seed-"]);
    let seeds = SHAPES
        .iter()
        .filter(|(n, _)| n.starts_with("seed-"))
        .count();
    assert!(
        seeds >= 16,
        "the first user's self-test had 16 shapes: {seeds}"
    );
    let oks = out.lines().filter(|l| l.starts_with("ok   seed-")).count();
    assert_eq!(oks, seeds, "{out}");
    assert!(!out.lines().any(|l| l.starts_with("FAIL ")), "{out}");
    assert!(
        out.lines().any(|l| l
            == format!(
                "self-test: PASS ({seeds} of {seeds} shapes as expected; judged by servegate {})",
                env!("CARGO_PKG_VERSION")
            )),
        "{out}"
    );
    assert_eq!(code, 0, "{out}");
}

#[test]
fn the_whole_self_test_passes() {
    let (code, out) = self_test(&[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok   ")).count(),
        SHAPES.len(),
        "{out}"
    );
}

#[test]
fn a_shape_that_does_not_give_what_it_must_is_a_fail_line_and_exit_1() {
    // A broken judge is what the self-test is for: a shape whose expectation is wrong stands in for it here.
    let (_, text) = SHAPES
        .iter()
        .find(|(n, _)| *n == "seed-floor-edge-59-9")
        .unwrap();
    let flipped = text.replace("# expect: rate=FAIL", "# expect: rate=PASS");
    let shape = selftest::parse_shape(&flipped).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let got = selftest::judge_shape(&shape, dir.path()).unwrap();
    let err = selftest::compare(&shape.expect, &got).unwrap_err();
    assert!(err.starts_with("rate FAIL "), "{err}");
    // And through the binary: a filter that matches one passing shape exits 0, none exits 7 (nothing checked).
    let (code, out) = self_test(&["seed-floor-edge"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out.lines().next().unwrap(),
        "ok   seed-floor-edge-59-9: rate FAIL"
    );
    let (code, _) = self_test(&["no-such-shape"]);
    assert_eq!(code, servegate::error::exit::NOTHING_CHECKED);
}

#[test]
fn list_names_every_shape_and_judges_nothing() {
    let (code, out) = self_test(&["--list"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), SHAPES.len(), "{out}");
    assert!(!out.contains("ok   "), "{out}");
}
