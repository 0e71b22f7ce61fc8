//! What goes here: the census's readers and rules in process (family roots, peer list shapes, a bad
//! registry). `servegate census` as a program is tests/cli/census.rs.
//!
//! The census: family roots, the peer list shapes, the gap list, and `census --check` failing on a peer family
//! root with no registry row (pages/coverage.md "The census").

use crate::fixtures::root;
use servegate::coverage::census::{self, family_root, parse_peer};

#[test]
fn family_roots_follow_the_documented_rule() {
    for (name, want) in [
        ("Gemma3-1B", "gemma3"),
        ("LFM2.5-1.2B-Thinking", "lfm2.5"),
        ("Llama-3.2-1B-NPU2", "llama3.2"),
        ("Qwen3-4B-Thinking-2507-NPU2", "qwen3"),
        ("qwen3-tk", "qwen3"),
        ("gpt-oss-20b", "gpt-oss"),
        ("Deepseek-R1-Distill-Llama-8B-NPU2", "deepseek-r1"),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "smollm2"),
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2"),
        ("Phi-4-mini-instruct", "phi4"),
        ("Mixtral-8x7B-Instruct", "mixtral"),
        ("Qwen3-30B-A3B", "qwen3"),
        ("gemma3:1b", "gemma3"),
        ("medgemma", "medgemma"),
    ] {
        assert_eq!(family_root(name), want, "{name}");
    }
    // idempotent: a root is its own root
    for r in ["gemma3", "lfm2.5", "llama3.2", "gpt-oss", "deepseek-r1"] {
        assert_eq!(family_root(r), r);
    }
}

#[test]
fn reads_fastflowlm_lemonade_plain_and_directory_lists() {
    let ffl = census::read_peer(&root().join("tests/data/census/model_list.json")).unwrap();
    assert_eq!(ffl.len(), 9);
    let lfm = ffl.iter().find(|m| m.name.starts_with("LFM2.5")).unwrap();
    assert_eq!(lfm.root(), "lfm2.5");
    assert!(
        lfm.labels.contains(&"parameter_size=1.2B".to_string()),
        "{:?}",
        lfm.labels
    );
    let lemonade = r#"{"Qwen2.5-0.5B-Instruct-CPU": {"checkpoint": "amd/Qwen2.5-0.5B-Instruct-quantized_int4-float16-cpu-onnx", "recipe": "oga-cpu", "suggested": true, "labels": ["llm"]},
                      "Gemma-3-4b-it-GGUF": {"checkpoint": "ggml-org/gemma-3-4b-it-GGUF:Q4_K_M", "recipe": "llamacpp", "labels": ["vision"]}}"#;
    let l = parse_peer(lemonade).unwrap();
    let roots: Vec<String> = l.iter().map(|m| m.root()).collect();
    assert_eq!(roots, ["gemma3", "qwen2.5"]); // `Gemma-3-4b-it-GGUF`: the version glues
    assert!(l[0].labels.iter().any(|x| x == "recipe=llamacpp"));
    let plain = parse_peer("# peer kernels\nGemma3-1B\nLFM2.5-1.2B-Thinking  # new\n\n").unwrap();
    assert_eq!(
        plain.iter().map(|m| m.root()).collect::<Vec<_>>(),
        ["gemma3", "lfm2.5"]
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("Qwen3-0.6B-NPU2")).unwrap();
    std::fs::write(dir.path().join("whisper-v3-turbo"), "").unwrap();
    let d = census::read_peer(dir.path()).unwrap();
    assert_eq!(
        d.iter().map(|m| m.root()).collect::<Vec<_>>(),
        ["qwen3", "whisper-v3"]
    );
    assert!(parse_peer(r#"{"x": {"nothing": 1}}"#)
        .unwrap_err()
        .contains("x"));
}

#[test]
fn a_bad_registry_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let reg = dir.path().join("registry.toml");
    std::fs::write(
        &reg,
        "[[family]]\nroot = \"Gemma3-1B\"\nstatus = \"served\"\n",
    )
    .unwrap();
    let e = census::read_registry(&reg).unwrap_err();
    assert!(e.contains("gemma3"), "{e}");
    std::fs::write(&reg, "[[family]]\nroot = \"gemma3\"\nstatus = \"maybe\"\n").unwrap();
    assert!(census::read_registry(&reg).unwrap_err().contains("status"));
    std::fs::write(&reg, "[[family]]\nroot = \"gemma3\"\nstatus = \"served\"\n[[family]]\nroot = \"qwen3\"\naliases = [\"gemma3\"]\nstatus = \"listed\"\n").unwrap();
    assert!(census::read_registry(&reg)
        .unwrap_err()
        .contains("two rows"));
}
