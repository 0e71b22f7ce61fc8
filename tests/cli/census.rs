//! What goes here: `servegate census` as a program (the gap list, `--check`). The readers and rules in
//! process are tests/pure/census.rs.
//!
//! The census: family roots, the peer list shapes, the gap list, and `census --check` failing on a peer family
//! root with no registry row (pages/coverage.md "The census").

use crate::fixtures::root;
use crate::fixtures::servegate_in;

#[test]
fn census_prints_the_gap_list_from_the_committed_fixture() {
    let out = servegate_in(
        &[
            "census",
            "--peer",
            "tests/data/census/model_list.json",
            "--check",
        ],
        &root(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("| lfm2.5 | listed | lfm2.5 | `LFM2.5-1.2B-Thinking-NPU2`"),
        "{stdout}"
    );
    // smollm2 is settled by the committed matrix-gate evidence, with its link and state
    assert!(
        stdout.contains("| smollm2 | settled | smollm2 |")
            && stdout.contains("[smollm2-135m]/")
            && stdout.contains("data/coverage/runs/reference-matrix"),
        "{stdout}"
    );
    // no invented description: a listed row holds only the peer's own names and labels
    let gemma = stdout
        .lines()
        .find(|l| l.starts_with("| gemma3 |"))
        .unwrap();
    assert!(
        gemma.contains(
            "`Gemma3-270M-NPU2` (family=gemma3, parameter_size=270M, quantization_level=Q4_1)"
        ),
        "{gemma}"
    );
}

#[test]
fn census_check_fails_naming_a_family_the_registry_has_no_row_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut list: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/data/census/model_list.json")).unwrap(),
    )
    .unwrap();
    let mut granite = list["models"]["gemma3"]["1b"].clone();
    granite["name"] = "Granite-4.0-1B-NPU2".into();
    list["models"]["granite4.0"] = serde_json::json!({ "1b": granite });
    let peer = dir.path().join("model_list.json");
    std::fs::write(&peer, serde_json::to_string_pretty(&list).unwrap()).unwrap();
    let out = servegate_in(
        &["census", "--peer", peer.to_str().unwrap(), "--check"],
        &root(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("peer family root `granite4.0` (Granite-4.0-1B-NPU2) has no row"),
        "{stderr}"
    );
    // without --check it only reports
    let out = servegate_in(&["census", "--peer", peer.to_str().unwrap()], &root());
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| granite4.0 | listed | (none) |"));
}
