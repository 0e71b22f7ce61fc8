//! Every repository path named in the docs (`docs/*.md`, `README.md`, `data/README.md`, the generated pages
//! `pages/*.md` and their templates `pages/templates/*.md`) and in the comments of `src/`, `scripts/`,
//! `xtask/` and `tests/` (not its fixtures in `tests/data/`) exists, so a reader following one lands on a
//! file. Reads those files; starts nothing.
//!
//! A path is recognised by its shape: at least two segments joined by `/`, starting with a lower-case letter,
//! a digit, `.` or `_`, and ending in an extension (`crates/core/src/judge/mod.rs`) or in `/` (`tests/data/cases/`). It
//! exists if it does relative to the repository root, to the naming file's folder (a Markdown link such as
//! `../data/coverage/runs/...`), to `src/` (module paths such as `spec/detect.rs`), or for a file in `xtask/`, to
//! `xtask/`. Not checked: URLs, placeholders (`<gate>`, `{port}`, `*`, `...`, `NAME`, `NN`), paths a run or a
//! user writes (`target/...`, `~/...`, `$VAR/...`, absolute paths), and the names in [`NOT_OURS`].

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use crate::fixtures::root;
use regex::Regex;

static URL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z][A-Za-z0-9+.-]*://\S*").unwrap());
static WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9_.~<>{}\[\]*$@+%…-]*/[A-Za-z0-9_.~<>{}\[\]*/$@+%…-]*").unwrap()
});
static EXT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.[A-Za-z][A-Za-z0-9]{0,6}$").unwrap());

/// Named paths that are not this repository's files, each kind with why.
const NOT_OURS: &[&str] = &[
    // Other projects' files, named beside the project (openai-python, openai-node, the WHATWG eventsource
    // tests, vLLM, llama.cpp, AIPerf, hyperfine).
    "src/openai/_streaming.py",
    "src/core/streaming.ts",
    "src/internal/decoders/line.ts",
    "eventsource/resources/message.php",
    "eventsource/format-field-event-empty.htm",
    "vllm/benchmarks/lib/endpoint_request_func.py",
    "vllm/benchmarks/serve.py",
    "benchmarks/backend_request_func.py",
    "docs/metrics_reference.md",
    "tools/server/server.cpp",
    "tools/perplexity/README.md",
    "tests/models/utils.py",
    "src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd",
    "src/export/",
    // The load tools `servegate import` reads, their sources cited (src/import/).
    "docs/tutorials/working-with-profile-exports.md",
    "src/aiperf/common/models/record_models.py",
    "src/guidellm/benchmark/schemas/generative/benchmark.py",
    "src/guidellm/schemas/request_stats.py",
    "src/guidellm/schemas/info.py",
    "src/guidellm/scheduler/strategies.py",
    "src/guidellm/schemas/benchmark/entrypoints.py",
    "src/guidellm/schemas/backends/openai_http.py",
    "src/guidellm/schemas/benchmark/profiles/",
    "src/guidellm/data/preprocessors/mappers.py",
    "src/guidellm/backends/openai/request_handlers.py",
    "src/guidellm/backends/openai/http.py",
    "benchmarks/benchmark_serving.py",
    "inference_perf/reportgen/base.py",
    "internal/output/json/wrapper.go", // grafana/k6 (src/import/k6.rs)
    // The engines' own files each profile was read from (docs/runtimes.md "Profiles", spec/profile/engines.rs):
    // transformers, litellm, SGLang, TGI, Ollama, mistral.rs, Lemonade, FastFlowLM.
    "cli/serving/chat_completion.py",
    "docs/proxy/response_headers.md",
    "proxy/common_request_processing.py",
    "srt/entrypoints/http_server.py",
    "openai/protocol.py",
    "router/src/server.rs",
    "router/src/lib.rs",
    "launcher/src/main.rs",
    "backends/v3/src/backend.rs",
    "python/sglang/srt/metrics/collector.py",
    "server/routes.go",
    "openai/openai.go",
    "middleware/openai.go",
    "app/server/server_test.go",
    "mistralrs-server-core/src/handlers.rs",
    "mistralrs-core/src/pipeline/sampling.rs",
    "src/cpp/server/server.cpp",
    "docs/api/lemonade.md",
    "src/server/server.cpp",
    // Examples of a user's files, not files of this repository.
    "gates/my-load.toml",
    "gates/x.toml",
    "gates/edited.toml",
    "gates/my-serve-regression.toml",
    "gates/my-serve.toml", // docs/getting-started.md: the gate its `servegate init --name my-serve` writes
    ".github/workflows/gates.yml",
    ".config/nextest.toml",
    "site/board.md",
    "site/board.html",
    "models/x.gguf",
    "root/model.gguf",
    "x/run.json",
    "dir/run.json",
    "new/../g.toml",
    // Paths inside a run directory or the provisioning cache, relative to it.
    "arm1-theirs/serve.log",
    "model_file/servegate-provenance.json",
    "models/SmolLM2-135M-Instruct.Q4_1.f32-hf/servegate-provenance.json",
];

/// The files read and, per file, the lines searched: every line of a doc, the comments of code.
fn sources(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("data/README.md")];
    // The hand-written docs, the generated pages and their templates (a page's paths are its template's).
    for dir in ["docs", "pages", "pages/templates"] {
        let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}/: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        docs.sort();
        out.extend(docs);
    }
    for dir in ["src", "crates", "scripts", "xtask", "tests"] {
        walk(&root.join(dir), &mut out);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            // Not the fixtures (their files name the founding material's paths, described in data/README.md).
            if p.file_name().is_some_and(|n| n != "target") && !p.ends_with("tests/data") {
                walk(&p, out);
            }
        } else if p
            .extension()
            .is_some_and(|x| x == "rs" || x == "py" || x == "sh")
            // This file's own examples of what the recogniser sees are not references.
            && !p.ends_with("tests/pure/doc_paths.rs")
        {
            out.push(p);
        }
    }
}

/// The searched lines of `path` (1-based numbers): a doc whole; in Rust the text after `//` outside a
/// string; in Python and shell a line that is a `#` comment (not a `#!`), or the text after ` # `.
fn searched_lines(path: &Path, text: &str) -> Vec<(usize, String)> {
    let ext = path.extension().and_then(|x| x.to_str()).unwrap_or("");
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let comment = match ext {
                "md" => Some(l),
                "rs" => l
                    .match_indices("//")
                    .find(|(j, _)| l[..*j].matches('"').count() % 2 == 0)
                    .map(|(j, _)| &l[j + 2..]),
                _ => {
                    let t = l.trim_start();
                    if t.starts_with("#!") {
                        None
                    } else if let Some(c) = t.strip_prefix('#') {
                        Some(c)
                    } else {
                        l.find(" # ").map(|j| &l[j + 3..])
                    }
                }
            };
            comment.map(|c| (i + 1, c.to_string()))
        })
        .collect()
}

/// The path-shaped words of one line, URLs removed.
fn named_paths(line: &str) -> Vec<String> {
    let line = URL.replace_all(line, " ");
    let mut out = Vec::new();
    for m in WORD.find_iter(&line) {
        let w = m.as_str().replace("%5B", "[").replace("%5D", "]");
        let w = w
            .trim_start_matches('[')
            .trim_end_matches(['.', ',', ';', ':', ']']);
        let w = w.strip_prefix("./").unwrap_or(w);
        let segs: Vec<&str> = w.trim_end_matches('/').split('/').collect();
        let shaped = segs.len() >= 2
            && !segs.iter().any(|s| s.is_empty())
            && (w.ends_with('/') || EXT.is_match(w))
            && w.starts_with(|c: char| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_'
            });
        let placeholder = w.contains(['<', '>', '{', '}', '*', '$', '~', '@', '%', '…'])
            || segs.iter().any(|s| {
                let stem = s.split('.').next().unwrap_or(s);
                *s == "..."
                    || s.contains("NAME")
                    || s.contains("NN")
                    || ["DIR", "RUN", "ID", "N", "GATE", "STAMP"].contains(&stem)
            });
        // A domain's path (`github.com/owner/repo/file.rs` without its scheme) is a URL too.
        let domain = segs[0].contains('.')
            && [".com", ".org", ".io", ".dev", ".net", ".rs"]
                .iter()
                .any(|t| segs[0].ends_with(t))
            && segs.len() > 2;
        if shaped && !placeholder && !domain && !w.starts_with("target/") {
            out.push(w.to_string());
        }
    }
    out
}

fn exists(root: &Path, file: &Path, named: &str) -> bool {
    let dir = file.parent().unwrap_or(root);
    let mut bases = vec![
        root.to_path_buf(),
        dir.to_path_buf(),
        root.join("src"),
        root.join("crates/core/src"),
    ];
    if file.starts_with(root.join("xtask")) {
        bases.push(root.join("xtask"));
    }
    bases.iter().any(|b| b.join(named).exists())
}

#[test]
fn every_path_named_in_a_doc_or_a_comment_exists() {
    let root = root();
    let mut named = 0;
    let mut dangling = Vec::new();
    for file in sources(&root) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let rel = file.strip_prefix(&root).unwrap_or(&file).to_path_buf();
        for (n, line) in searched_lines(&file, &text) {
            for p in named_paths(&line) {
                if NOT_OURS.contains(&p.as_str()) {
                    continue;
                }
                // The founding material outside the checkout, described where it is named.
                if p.starts_with("../shared/") && rel == Path::new("data/README.md") {
                    continue;
                }
                named += 1;
                if !exists(&root, &file, &p) {
                    dangling.push(format!("{}:{n}: {p}", rel.display()));
                }
            }
        }
    }
    assert!(
        named > 500,
        "only {named} paths found: the recogniser broke"
    );
    assert!(
        dangling.is_empty(),
        "{} of {named} named paths do not exist (fix the reference, or add a name that is not this \
         repository's to NOT_OURS):\n{}",
        dangling.len(),
        dangling.join("\n")
    );
}

#[test]
fn the_recogniser_sees_paths_and_skips_the_rest() {
    assert_eq!(
        named_paths(
            "see `crates/core/src/judge/mod.rs`, tests/data/cases/ and [docs/ci.md](docs/ci.md)."
        ),
        [
            "crates/core/src/judge/mod.rs",
            "tests/data/cases/",
            "docs/ci.md",
            "docs/ci.md"
        ]
    );
    assert!(
        named_paths("https://github.com/a/b/blob/main/x.rs 50 tok/s and/or HTTP/1.1").is_empty()
    );
    assert!(named_paths(
        "runs/<gate>/<stamp>/run.json ~/.cache/x.gguf gates/NAME.toml target/a/b.json"
    )
    .is_empty());
    assert_eq!(
        named_paths("`../coverage/runs/a%5Bb%5D/x.json`"),
        ["../coverage/runs/a[b]/x.json"]
    );
    let rs = searched_lines(
        Path::new("a.rs"),
        "let u = \"http://x/y.rs\"; // see crates/core/src/io/fs.rs\nfn f() {}",
    );
    assert_eq!(rs, [(1, " see crates/core/src/io/fs.rs".to_string())]);
    let sh = searched_lines(Path::new("a.sh"), "#!/bin/sh\n# a/b.sh\necho x # c/d.sh\n");
    assert_eq!(sh, [(2, " a/b.sh".to_string()), (3, "c/d.sh".to_string())]);
}
