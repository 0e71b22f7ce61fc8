//! Matrix gates: one gate file, the same assertions, many models (`[[model]]` entries).
//!
//! A gate file with `[[model]]` entries expands into one [`GateSpec`] per entry, named `<gate>[<model>]`, so
//! its trials are `<gate>[<model>]::<assertion>` and each model gets its own serve start, evidence directory
//! (`runs/<gate>[<model>]/<stamp>`) and results; a libtest filter (`cargo test --test gates -- '[smollm2'`)
//! selects models as it selects assertions. A file without `[[model]]` is one gate, as [`super::load`] reads it.
//!
//! Each entry (keys, all strings unless said):
//! - `name` (required, `[A-Za-z0-9_.-]+`, unique in the file): the model's name in trial names.
//! - `family` (required): the architecture name as the model's config names it (e.g. `LlamaForCausalLM`);
//!   the coverage page's row key with `size` and `quantization`.
//! - `size`, `quantization` (optional): shown in the coverage row (e.g. `135M`, `Q4_1`).
//! - `file`: replaces `[request] model` (so `{model}` in the serve command is this file). Unless
//!   `setup_provides = true` (the gate's `[serve] setup` provisions it), the file must exist before the run:
//!   a missing file makes the entry's trials ignored with the reason (`path ... does not exist`), like any
//!   unmet `[requires]`.
//! - `served_model`: replaces `[request] served_model` and `[serve] expect_model` (the gate must set the key
//!   it replaces, so that every line number of the file stays right in error messages).
//! - `max_tokens` (integer), `floor_tok_s` (`[assert.rate]`), `first_token_limit_ms` (`[assert.first_token]
//!   limit_ms`), `known_answer` (`[assert.known_answer] matches`), `model_name`, `weights` (`[record]`):
//!   per-entry overrides of the gate's values.
//!
//! Expansion is textual and keeps every line where it was: each override replaces the value's bytes, and the
//! `[[model]]` tables are blanked (newlines kept), then the text is validated by [`super::parse`] as any gate,
//! so an error names the file, line and key as usual (with the entry it was expanded for).

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::{Context, GateSpec};
use crate::error::SpecError;

/// One `[[model]]` entry, as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The model's name in trial names: `<gate>[<name>]::<assertion>`.
    pub name: String,
    /// The architecture name (e.g. `LlamaForCausalLM`).
    pub family: String,
    /// Parameter count as people say it (e.g. `135M`); free text.
    #[serde(default)]
    pub size: Option<String>,
    /// Weight format (e.g. `Q4_1`); free text.
    #[serde(default)]
    pub quantization: Option<String>,
    /// The model file (replaces `[request] model`; placeholders expand as there).
    #[serde(default)]
    pub file: Option<String>,
    /// True when the gate's setup provisions `file` (not checked before the run).
    #[serde(default)]
    pub setup_provides: bool,
    /// Replaces `[request] served_model` and `[serve] expect_model`.
    #[serde(default)]
    pub served_model: Option<String>,
    /// Replaces `[request] max_tokens`.
    #[serde(default)]
    pub max_tokens: Option<i64>,
    /// Replaces `[assert.rate] floor_tok_s`, tok/s.
    #[serde(default)]
    pub floor_tok_s: Option<f64>,
    /// Replaces `[assert.first_token] limit_ms`, ms.
    #[serde(default)]
    pub first_token_limit_ms: Option<f64>,
    /// Replaces `[assert.known_answer] matches` (a regex).
    #[serde(default)]
    pub known_answer: Option<String>,
    /// Replaces `[record] model_name` (what `servegate run --record` writes).
    #[serde(default)]
    pub model_name: Option<String>,
    /// Replaces `[record] weights`.
    #[serde(default)]
    pub weights: Option<String>,
}

#[derive(Deserialize)]
struct RawMatrix {
    #[serde(default)]
    model: Option<Vec<Spanned<toml::Table>>>,
}

/// The trial-name form of one matrix gate: `<gate>[<model>]`.
pub fn gate_name(gate: &str, model: &str) -> String {
    format!("{gate}[{model}]")
}

/// Splits `<gate>[<model>]` into its gate and model names; `None` for a plain gate name.
pub fn split_name(name: &str) -> Option<(&str, &str)> {
    let inner = name.strip_suffix(']')?;
    let (gate, model) = inner.split_once('[')?;
    Some((gate, model))
}

/// Reads a gate file: one [`GateSpec`] for a plain gate, one per `[[model]]` entry for a matrix gate.
pub fn load_all(file: &Path) -> Result<Vec<GateSpec>, SpecError> {
    let text = super::read_text(file)?;
    if entries_of(file, &text)?.is_empty() {
        return super::parse(file, &text, &Context::for_file(file)).map(|g| vec![g]);
    }
    parse_all(file, &text, &Context::for_file(file))
}

/// Reads a gate file for one run: a plain gate as [`super::load`] reads it; for a matrix gate, the expanded
/// gate named `name` (the run's `gate`, `<gate>[<model>]`), or an error naming the entries when `name` is none
/// of them.
pub fn load_named(file: &Path, name: Option<&str>) -> Result<GateSpec, SpecError> {
    let mut gates = load_all(file)?;
    if gates.len() == 1 && split_name(&gates[0].name).is_none() {
        return Ok(gates.remove(0));
    }
    let names: Vec<String> = gates.iter().map(|g| g.name.clone()).collect();
    match name.and_then(|n| gates.iter().position(|g| g.name == n)) {
        Some(i) => Ok(gates.swap_remove(i)),
        None => Err(SpecError::at(
            file,
            "",
            0..0,
            "model",
            format!(
                "a matrix gate: the run's gate {:?} is none of its entries ({})",
                name.unwrap_or(""),
                names.join(", ")
            ),
        )),
    }
}

/// The `[[model]]` entries of a gate text with their spans (empty for a plain gate). Errors name
/// `model[i].key` and its line.
pub fn entries(file: &Path, text: &str) -> Result<Vec<ModelEntry>, SpecError> {
    Ok(entries_of(file, text)?
        .into_iter()
        .map(|(e, _)| e)
        .collect())
}

fn entries_of(file: &Path, text: &str) -> Result<Vec<(ModelEntry, Range<usize>)>, SpecError> {
    // Only the `model` key is read here; the rest is validated by `super::parse`.
    let raw: RawMatrix = match toml::from_str(text) {
        Ok(r) => r,
        // Not TOML, or `model` not an array of tables: `super::parse` gives the error with its place.
        Err(_) => return Ok(Vec::new()),
    };
    let mut out = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for (i, t) in raw.model.unwrap_or_default().into_iter().enumerate() {
        let span = t.span();
        let entry: ModelEntry =
            toml::Value::Table(t.into_inner())
                .try_into()
                .map_err(|e: toml::de::Error| {
                    SpecError::at(
                        file,
                        text,
                        span.clone(),
                        &format!("model[{i}]"),
                        e.message(),
                    )
                })?;
        let valid = !entry.name.is_empty()
            && !entry.name.starts_with(['.', '-'])
            && entry
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !valid {
            return Err(SpecError::at(
                file,
                text,
                span,
                &format!("model[{i}].name"),
                format!("must be non-empty, start with a letter, digit or `_`, and use only A-Z a-z 0-9 - _ . (got {:?})", entry.name),
            ));
        }
        if !names.insert(entry.name.clone()) {
            return Err(SpecError::at(
                file,
                text,
                span,
                &format!("model[{i}].name"),
                format!("{:?} names two [[model]] entries; names must be unique (they name trials and evidence)", entry.name),
            ));
        }
        if entry.family.trim().is_empty() {
            return Err(SpecError::at(
                file,
                text,
                span,
                &format!("model[{i}].family"),
                "must name the architecture (e.g. LlamaForCausalLM)",
            ));
        }
        out.push((entry, span));
    }
    Ok(out)
}

/// Expands a matrix gate text into one validated [`GateSpec`] per `[[model]]` entry (see the module doc).
/// A text without entries gives the one gate [`super::parse`] gives.
pub fn parse_all(file: &Path, text: &str, ctx: &Context) -> Result<Vec<GateSpec>, SpecError> {
    let entries = entries_of(file, text)?;
    if entries.is_empty() {
        return super::parse(file, text, ctx).map(|g| vec![g]);
    }
    let doc = toml_edit::ImDocument::parse(text)
        .map_err(|e| SpecError::at(file, text, e.span().unwrap_or(0..0), "", e.message()))?;
    // The [[model]] tables: blanked from each header to the next table header (or the end).
    let mut headers = Vec::new();
    collect_headers(doc.as_table(), &mut headers);
    headers.sort_unstable();
    let blank: Vec<Range<usize>> = doc
        .get("model")
        .and_then(|m| m.as_array_of_tables())
        .into_iter()
        .flat_map(|a| a.iter())
        .filter_map(|t| t.span())
        .map(|s| {
            let end = headers
                .iter()
                .copied()
                .find(|&h| h > s.start)
                .unwrap_or(text.len());
            s.start..end
        })
        .collect();
    let mut out = Vec::new();
    for (i, (entry, span)) in entries.iter().enumerate() {
        let key = format!("model[{i}]");
        let mut edits: Vec<(Range<usize>, String)> = blank
            .iter()
            .map(|r| (r.clone(), blanked(&text[r.clone()])))
            .collect();
        let mut set = |path: &[&str], what: &str, value: toml::Value| -> Result<(), SpecError> {
            match value_span(&doc, path) {
                Some(r) => {
                    edits.push((r, value.to_string()));
                    Ok(())
                }
                None => Err(SpecError::at(
                    file,
                    text,
                    span.clone(),
                    &format!("{key}.{what}"),
                    format!(
                        "overrides `{}`, which the gate does not set: set it in the gate (the default for every entry)",
                        path.join(".")
                    ),
                )),
            }
        };
        if let Some(f) = &entry.file {
            set(
                &["request", "model"],
                "file",
                toml::Value::String(f.clone()),
            )?;
        }
        if let Some(s) = &entry.served_model {
            set(
                &["request", "served_model"],
                "served_model",
                toml::Value::String(s.clone()),
            )?;
            if value_span(&doc, &["serve", "expect_model"]).is_some() {
                set(
                    &["serve", "expect_model"],
                    "served_model",
                    toml::Value::String(s.clone()),
                )?;
            }
        }
        if let Some(m) = entry.max_tokens {
            set(
                &["request", "max_tokens"],
                "max_tokens",
                toml::Value::Integer(m),
            )?;
        }
        if let Some(f) = entry.floor_tok_s {
            set(
                &["assert", "rate", "floor_tok_s"],
                "floor_tok_s",
                toml::Value::Float(f),
            )?;
        }
        if let Some(l) = entry.first_token_limit_ms {
            set(
                &["assert", "first_token", "limit_ms"],
                "first_token_limit_ms",
                toml::Value::Float(l),
            )?;
        }
        if let Some(k) = &entry.known_answer {
            set(
                &["assert", "known_answer", "matches"],
                "known_answer",
                toml::Value::String(k.clone()),
            )?;
        }
        if let Some(n) = &entry.model_name {
            set(
                &["record", "model_name"],
                "model_name",
                toml::Value::String(n.clone()),
            )?;
        }
        if let Some(w) = &entry.weights {
            set(
                &["record", "weights"],
                "weights",
                toml::Value::String(w.clone()),
            )?;
        }
        let expanded = apply(text, edits);
        let mut gate = super::parse(file, &expanded, ctx).map_err(|e| match e {
            SpecError::At {
                file,
                line,
                col,
                key,
                message,
                snippet,
            } => SpecError::At {
                file,
                line,
                col,
                key,
                message: format!(
                    "{message} (in the gate as expanded for [[model]] {:?})",
                    entry.name
                ),
                snippet,
            },
            other => other,
        })?;
        gate.name = gate_name(&gate.name, &entry.name);
        gate.source = text.to_string();
        // The declaring lines are the file's, not the expanded text's.
        gate.decl_lines = super::decl_lines_in(&gate.source, gate.assertions.kinds());
        if entry.file.is_some() && !entry.setup_provides {
            gate.requires.paths.push(gate.request.model.clone());
        }
        out.push(gate);
    }
    Ok(out)
}

/// The entry a matrix gate's expanded name refers to: `(gate, entry)` for `<gate>[<model>]`, read from the gate
/// text (e.g. the `gate.toml` copied into a run directory).
pub fn entry_for(file: &Path, text: &str, name: &str) -> Option<ModelEntry> {
    let (_, model) = split_name(name)?;
    entries(file, text)
        .ok()?
        .into_iter()
        .find(|e| e.name == model)
}

fn collect_headers(t: &toml_edit::Table, out: &mut Vec<usize>) {
    for (_, item) in t.iter() {
        match item {
            toml_edit::Item::Table(sub) => {
                if let Some(s) = sub.span() {
                    out.push(s.start);
                }
                collect_headers(sub, out);
            }
            toml_edit::Item::ArrayOfTables(a) => {
                for sub in a.iter() {
                    if let Some(s) = sub.span() {
                        out.push(s.start);
                    }
                    collect_headers(sub, out);
                }
            }
            _ => {}
        }
    }
}

fn value_span(doc: &toml_edit::ImDocument<&str>, path: &[&str]) -> Option<Range<usize>> {
    let mut item = doc.as_item();
    for p in path {
        item = item.get(p)?;
    }
    item.as_value()?.span()
}

/// Spaces for every character but newlines (line numbers stay).
fn blanked(s: &str) -> String {
    s.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

fn apply(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| std::cmp::Reverse(r.start));
    let mut out = text.to_string();
    for (r, with) in edits {
        out.replace_range(r, &with);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const GATE: &str = r#"[gate]
name = "mx"

[serve]
command = ["serve", "--model", "{model}", "--port", "{port}"]
expect_model = "m"

[request]
model = "/nonexistent/default.gguf"
served_model = "m"
max_tokens = 32
prompts = ["What is the capital of France?"]

[assert.rate]
floor_tok_s = 10.0

[assert.first_token]
limit_ms = 2000

[assert.known_answer]
prompt = "What is the capital of France?"
matches = "Paris"

[[model]]
name = "a"
family = "LlamaForCausalLM"
file = "/nonexistent/a.gguf"
floor_tok_s = 20.5

[[model]]
name = "b"
family = "Qwen3ForCausalLM"
size = "0.6B"
served_model = "qwen"
max_tokens = 16
first_token_limit_ms = 500
known_answer = "(?i)paris"
"#;

    fn ctx() -> Context {
        Context {
            gate_dir: PathBuf::from("/g"),
            cache: PathBuf::from("/c"),
            home: None,
        }
    }

    #[test]
    fn one_gate_per_model_with_its_overrides() {
        let gates = parse_all(Path::new("mx.toml"), GATE, &ctx()).unwrap();
        let names: Vec<&str> = gates.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["mx[a]", "mx[b]"]);
        let (a, b) = (&gates[0], &gates[1]);
        assert_eq!(a.request.model, "/nonexistent/a.gguf");
        assert_eq!(a.assertions.rate.as_ref().unwrap().floor_tok_s, 20.5);
        assert!(
            matches!(&a.serve.mode, super::super::ServeMode::Command(c) if c.contains(&"/nonexistent/a.gguf".to_string()))
        );
        // a missing model file is an unmet requirement (the trials are ignored with the reason)
        assert!(
            a.requirements()
                .iter()
                .any(|r| r.contains("/nonexistent/a.gguf")),
            "{:?}",
            a.requirements()
        );
        assert_eq!(b.request.model, "/nonexistent/default.gguf");
        assert!(b.requirements().is_empty());
        assert_eq!(b.request.served_model, "qwen");
        assert_eq!(b.serve.expect_model.as_deref(), Some("qwen"));
        assert_eq!(b.request.max_tokens, 16);
        assert_eq!(b.assertions.first_token.as_ref().unwrap().limit_ms, 500.0);
        assert_eq!(
            b.assertions.known_answer.as_ref().unwrap().matches.as_str(),
            "(?i)paris"
        );
        assert_eq!(b.assertions.rate.as_ref().unwrap().floor_tok_s, 10.0);
        assert_eq!(
            entry_for(Path::new("mx.toml"), GATE, "mx[b]")
                .unwrap()
                .size
                .as_deref(),
            Some("0.6B")
        );
        assert_eq!(split_name("mx[b]"), Some(("mx", "b")));
        assert_eq!(split_name("mx"), None);
    }

    #[test]
    fn errors_keep_their_line_and_name_the_entry() {
        // An error after a blanked [[model]] table still points at its own line.
        let text = GATE.replace(
            "[assert.first_token]\nlimit_ms = 2000",
            "[assert.first_token]\nlimit_ms = -1",
        ) + "\n";
        let e = parse_all(Path::new("mx.toml"), &text, &ctx())
            .unwrap_err()
            .to_string();
        let line = text.lines().position(|l| l == "limit_ms = -1").unwrap() + 1;
        assert!(e.contains(&format!(":{line}:")), "{e}");
        // Moving the [[model]] tables first keeps later lines right too.
        let (head, models) = text.split_at(text.find("[[model]]").unwrap());
        let first = format!("{models}\n{head}");
        let e = parse_all(Path::new("mx.toml"), &first, &ctx())
            .unwrap_err()
            .to_string();
        let line = first.lines().position(|l| l == "limit_ms = -1").unwrap() + 1;
        assert!(
            e.contains(&format!(":{line}:")) && e.contains("[[model]] \"a\""),
            "{e}"
        );
    }

    #[test]
    fn bad_entries_are_refused_naming_the_key() {
        let dup = GATE.replace("name = \"b\"", "name = \"a\"");
        let e = parse_all(Path::new("mx.toml"), &dup, &ctx())
            .unwrap_err()
            .to_string();
        assert!(e.contains("model[1].name") && e.contains("unique"), "{e}");
        let unknown = GATE.replace("size = \"0.6B\"", "sise = \"0.6B\"");
        let e = parse_all(Path::new("mx.toml"), &unknown, &ctx())
            .unwrap_err()
            .to_string();
        assert!(e.contains("sise"), "{e}");
        let no_key = GATE.replace("served_model = \"m\"\n", "");
        let e = parse_all(Path::new("mx.toml"), &no_key, &ctx())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("model[1].served_model") && e.contains("request.served_model"),
            "{e}"
        );
        let bad_name = GATE.replace("name = \"b\"", "name = \"b/c\"");
        let e = parse_all(Path::new("mx.toml"), &bad_name, &ctx())
            .unwrap_err()
            .to_string();
        assert!(e.contains("model[1].name"), "{e}");
    }

    #[test]
    fn a_plain_gate_is_one_gate() {
        let plain = &GATE[..GATE.find("[[model]]").unwrap()];
        let gates = parse_all(Path::new("mx.toml"), plain, &ctx()).unwrap();
        assert_eq!(gates.len(), 1);
        assert_eq!(gates[0].name, "mx");
    }
}
