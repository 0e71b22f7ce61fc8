//! What goes here: `servegate coverage` as a program on copies of the committed evidence. The page's rules
//! in process are tests/pure/coverage.rs.
//!
//! The coverage page: generated from the committed matrix-gate evidence, checked, and a VERIFIED cell that turns
//! worse fails (pages/coverage.md).

use std::path::PathBuf;

use crate::fixtures::copy_dir;
use crate::fixtures::root;
use crate::fixtures::servegate_in;
use servegate::coverage::page::{self};

#[test]
fn the_committed_page_matches_the_committed_evidence_and_every_check_mark_links_it() {
    let out = servegate_in(&["coverage", "--check"], &root());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(root().join("pages/coverage.md")).unwrap();
    let html = std::fs::read_to_string(root().join("pages/coverage.html")).unwrap();
    // minijinja escapes `/` in HTML as `&#x2f;` (read back as `/` by any browser)
    let html = html.replace("&#x2f;", "/");
    assert!(
        html.contains("<a href=\"../data/coverage/runs/reference-matrix%5Bsmollm2-135m%5D/"),
        "{html}"
    );
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| LlamaForCausalLM | 135M | Q4_1 |"))
        .collect();
    assert_eq!(rows.len(), 1, "{md}");
    for l in md
        .lines()
        .filter(|l| l.contains("[VERIFIED ") && l.starts_with('|'))
    {
        let link = l
            .split("](")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .expect("a VERIFIED cell links its evidence");
        let path = root()
            .join("pages")
            .join(link.replace("%5B", "[").replace("%5D", "]"));
        assert!(path.join("run.json").is_file(), "{l}: {}", path.display());
    }
}

#[test]
fn a_check_mark_that_turns_worse_is_a_coverage_regression() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // One entry's runs (every stamp: the newest is the cell), on the llama.cpp column.
    let name = "reference-matrix[smollm2-135m]";
    copy_dir(
        &root().join("data/coverage/runs").join(name),
        &runs.join(name),
    );
    let stamps: Vec<PathBuf> = std::fs::read_dir(runs.join(name))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let originals: Vec<String> = stamps
        .iter()
        .map(|s| std::fs::read_to_string(s.join("gate.toml")).unwrap())
        .collect();
    let with = |floor: &str| {
        for (stamp, original) in stamps.iter().zip(&originals) {
            // the first entry is smollm2-135m, which sets neither key itself
            let t = original.replacen(
                "setup_provides = true",
                &format!(
                    "setup_provides = true\nfloor_tok_s = {floor}\nfirst_token_limit_ms = 1e9"
                ),
                1,
            );
            std::fs::write(stamp.join("gate.toml"), t).unwrap();
        }
    };
    let out_page = dir.path().join("pages/coverage.md");
    std::fs::create_dir_all(out_page.parent().unwrap()).unwrap();
    let args = |check: bool| {
        let mut a = vec![
            "coverage".to_string(),
            "--runs".into(),
            runs.display().to_string(),
            "--out".into(),
            out_page.display().to_string(),
        ];
        if check {
            a.push("--check".into());
        }
        a
    };
    let run = |check: bool| {
        let a = args(check);
        servegate_in(&a.iter().map(String::as_str).collect::<Vec<_>>(), &root())
    };
    // A floor any reply meets: the evidence gives VERIFIED.
    with("0.001");
    let out = run(false);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page_text = std::fs::read_to_string(&out_page).unwrap();
    assert!(page_text.contains("Q4_1 | [VERIFIED "), "{page_text}");
    assert_eq!(run(true).status.code(), Some(0));
    // The same evidence judged against a floor no reply meets: PARTIAL, a regression of a VERIFIED cell.
    with("1000000");
    let out = run(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("coverage regression: LlamaForCausalLM|135M|Q4_1|")
            && stderr.contains("VERIFIED -> PARTIAL"),
        "{stderr}"
    );
    let out = run(false);
    assert_eq!(out.status.code(), Some(1));
    assert!(std::fs::read_to_string(&out_page)
        .unwrap()
        .contains("(rate FAIL)"));
}

#[test]
fn a_matrix_entry_whose_model_file_is_missing_is_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("mx.toml");
    std::fs::write(
        &gate,
        "[gate]\nname = \"mx\"\n[serve]\ncommand = [\"true\", \"{model}\", \"{port}\"]\n[request]\n\
         model = \"/nonexistent/default.gguf\"\nmax_tokens = 8\nprompts = [\"hi\"]\n[assert.content]\n\
         [[model]]\nname = \"gone\"\nfamily = \"LlamaForCausalLM\"\nfile = \"/nonexistent/gone.gguf\"\n",
    )
    .unwrap();
    let out = servegate_in(&["run", gate.to_str().unwrap()], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // nothing was checked (exit 7), and the entry's gate says why
    assert_eq!(out.status.code(), Some(7), "{stdout}");
    assert!(
        stdout.contains("gate mx[gone]")
            && stdout.contains("path /nonexistent/gone.gguf does not exist"),
        "{stdout}"
    );
    let check = servegate_in(&["check", gate.to_str().unwrap()], dir.path());
    assert!(String::from_utf8_lossy(&check.stdout).contains("ok (mx[gone]; assertions: content)"));
}

#[test]
fn a_record_citing_a_matrix_run_is_evidence_for_its_cell() {
    // A checkout-like directory: no data/coverage/runs, one record whose evidence is a matrix-gate run.
    let dir = tempfile::tempdir().unwrap();
    let name = "reference-matrix[smollm2-135m]";
    let mut stamps: Vec<PathBuf> = std::fs::read_dir(root().join("data/coverage/runs").join(name))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    stamps.sort();
    let stamp = stamps[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // As records write it: relative to the records directory's parent (data/).
    let rel = format!("records/evidence/{name}/{stamp}");
    copy_dir(&stamps[0], &dir.path().join("data").join(&rel));
    let records = dir.path().join("data/records");
    std::fs::write(
        records.join("r.json"),
        format!("{{\"source\": {{\"kind\": \"gate_run\", \"evidence\": \"{rel}\"}}}}"),
    )
    .unwrap();
    // a record of a plain gate, and a file that is not a record, add nothing
    std::fs::write(
        records.join("plain.json"),
        "{\"source\": {\"evidence\": \"records/evidence/reference-smoke/x\"}}",
    )
    .unwrap();
    std::fs::write(records.join("junk.json"), "not json").unwrap();
    let runs = dir.path().join("data/coverage/runs");
    assert!(page::cells_from(&runs, None).is_empty());
    let cells = page::cells_from(&runs, Some(&records));
    assert_eq!(cells.len(), 1, "{cells:?}");
    assert_eq!(cells[0].model, "smollm2-135m");
    assert_eq!(cells[0].evidence, dir.path().join("data").join(&rel));
    // The CLI's defaults read data/records/ too, and the cell links the record's evidence from pages/.
    std::fs::create_dir_all(dir.path().join("data/coverage")).unwrap();
    std::fs::copy(
        root().join("data/coverage/registry.toml"),
        dir.path().join("data/coverage/registry.toml"),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("pages")).unwrap();
    let out = servegate_in(&["coverage"], dir.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(dir.path().join("pages/coverage.md")).unwrap();
    let link = format!("](../data/records/evidence/reference-matrix%5Bsmollm2-135m%5D/{stamp})");
    assert!(md.contains(&link), "{md}");
    assert!(md.contains("| LlamaForCausalLM | 135M | Q4_1 |"), "{md}");
}
