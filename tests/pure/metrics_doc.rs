//! docs/metrics.md quotes the definitions in the code's doc comments instead of restating them. Each
//! blockquote right after a `<!-- quoted from src/FILE -->` marker must appear word for word (whitespace
//! aside) in FILE's `///` / `//!` comments, so a changed definition fails here until the page follows it.

use crate::fixtures::root;

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The doc comments of a source file as one whitespace-normalised text.
fn doc_text(file: &str) -> String {
    let src = std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<&str> = src
        .lines()
        .map(str::trim_start)
        .filter_map(|l| l.strip_prefix("//!").or_else(|| l.strip_prefix("///")))
        .collect();
    squash(&lines.join("\n"))
}

/// (source file, quoted text) for every marked blockquote.
fn quotes(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = doc.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(file) = line
            .trim()
            .strip_prefix("<!-- quoted from ")
            .and_then(|r| r.strip_suffix(" -->"))
        else {
            continue;
        };
        let mut text = Vec::new();
        while let Some(q) = lines.peek().and_then(|l| l.strip_prefix('>')) {
            text.push(q.strip_prefix(' ').unwrap_or(q));
            lines.next();
        }
        assert!(
            !text.is_empty(),
            "marker for {file} is not followed by a blockquote"
        );
        out.push((file.to_string(), squash(&text.join("\n"))));
    }
    out
}

#[test]
fn every_quote_in_metrics_md_is_in_the_code() {
    let doc = std::fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let qs = quotes(&doc);
    assert!(qs.len() >= 8, "quotes found: {}", qs.len());
    for (file, text) in qs {
        let code = doc_text(&file);
        assert!(
            code.contains(&text),
            "docs/metrics.md quotes {file}, but its doc comments no longer say:\n{text}"
        );
    }
}

#[test]
fn a_changed_quote_is_caught() {
    let doc =
        "<!-- quoted from crates/core/src/analysis/measure.rs -->\n> * `ttft_ms` = event time of the LAST token chunk\n";
    let (file, text) = quotes(doc).pop().unwrap();
    assert!(!doc_text(&file).contains(&text));
}

/// The text between the registry markers of docs/metrics.md.
fn registry_block(doc: &str) -> &str {
    let start = "<!-- metric registry: generated from crates/core/src/vocab.rs (vocab::registry_table) -->\n";
    let end = "<!-- end of metric registry -->";
    let a = doc.find(start).expect("registry start marker") + start.len();
    let b = doc[a..].find(end).expect("registry end marker") + a;
    &doc[a..b]
}

#[test]
fn the_metric_table_in_metrics_md_is_the_registry() {
    let doc = std::fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let want = servegate::vocab::registry_table();
    assert_eq!(
        registry_block(&doc),
        want,
        "docs/metrics.md's metric table differs from vocab::registry_table(); paste this:\n{want}"
    );
}

#[test]
fn every_note_failure_and_content_problem_name_is_documented() {
    use servegate::vocab::{ContentProblem, FailureCode, NoteKind};
    let doc = std::fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let names = NoteKind::ALL
        .iter()
        .filter(|k| !matches!(k, NoteKind::Failed | NoteKind::Unrecognised))
        .map(|k| k.name())
        .chain(FailureCode::ALL.iter().map(|c| c.name()))
        .chain(ContentProblem::ALL.iter().map(|c| c.name()));
    for n in names {
        assert!(
            doc.contains(&format!("`{n}`")),
            "docs/metrics.md does not name `{n}`"
        );
    }
}
