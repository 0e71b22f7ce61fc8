//! The census: a peer runtime's model list against our registry (`data/coverage/registry.toml`), by family root.
//!
//! Input shapes read ([`read_peer`]): FastFlowLM's `model_list.json` (`models.<tag>.<size>` objects with
//! `name` and `details.family`), Lemonade's `server_models.json` (an object of model names, each with
//! `checkpoint`, `recipe`, `labels`), a JSON array of names, a plain text list (one name a line, `#` comments),
//! or a directory (its entry names). Every peer name is reduced to a family root by [`family_root`]; the gap
//! list says, per root: `listed` (the peer ships it, we have a registry row that is not settled by evidence, or
//! none), `ours-only` (a registry row the peer does not list), `settled` (a registry row whose family gate
//! evidence has run). Nothing is described that the inputs do not say: a row shows the peer's own names and
//! labels for it, never a description made up from the name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Words that end a family root when they appear as a name's token (sizes, variants, formats, dates).
const QUALIFIERS: &[&str] = &[
    "it", "instruct", "chat", "base", "thinking", "tk", "think", "distill", "preview", "turbo",
    "mini", "small", "medium", "large", "tiny", "nano", "gguf", "onnx", "awq", "gptq", "hybrid",
    "cpu", "gpu", "npu", "vl", "vision", "coder", "math", "med",
];

/// The family root of a model name (the rule pages/coverage.md states, with its tests in `tests/pure/census.rs`):
/// 1. take the last path component (`org/Model` -> `Model`) and lowercase it;
/// 2. split it into tokens at `-`, `_`, `:`, `/`, space;
/// 3. keep tokens up to (not including) the first that is a size (`1b`, `0.6b`, `270m`, `8x7b`, `a3b`), a
///    4-digit date or revision (`2507`, `0528`), a quantization (`q4_1` -> `q4`, `bf16`, `fp16`, `int4`,
///    `uint4`), an NPU build tag (`npu2`) or a qualifier word (`instruct`, `it`, `thinking`, ... [`QUALIFIERS`]);
/// 4. join what is kept: a token of digits and dots glues to the one before (`llama`, `3.2` -> `llama3.2`),
///    any other token joins with `-` (`gpt`, `oss` -> `gpt-oss`).
///
/// `Gemma3-1B` -> `gemma3` (not `gemma31b`), `LFM2.5-1.2B-Thinking` -> `lfm2.5`, `Llama-3.2-1B-NPU2` ->
/// `llama3.2`, `Qwen3-4B-Instruct-2507` -> `qwen3`, `gpt-oss-20b` -> `gpt-oss`. An empty result (a name that
/// starts with a size) gives the lowercased first token.
pub fn family_root(name: &str) -> String {
    let last = name.trim().rsplit('/').next().unwrap_or("").to_lowercase();
    let tokens: Vec<&str> = last
        .split(['-', '_', ':', ' '])
        .filter(|t| !t.is_empty())
        .collect();
    let mut root = String::new();
    for t in &tokens {
        if ends_root(t) {
            break;
        }
        let version = t.chars().all(|c| c.is_ascii_digit() || c == '.');
        if root.is_empty() || version {
            root.push_str(t);
        } else {
            root.push('-');
            root.push_str(t);
        }
    }
    if root.is_empty() {
        tokens.first().map(|t| t.to_string()).unwrap_or_default()
    } else {
        root
    }
}

fn ends_root(t: &str) -> bool {
    let size = regex_is(
        t,
        r"^(?:\d+x)?\d+(?:\.\d+)?[bmk]$|^a\d+(?:\.\d+)?b$|^e\d+b$",
    );
    let date = t.len() == 4 && t.chars().all(|c| c.is_ascii_digit());
    let quant = regex_is(
        t,
        r"^(?:q\d.*|iq\d.*|bf16|fp16|f16|f32|fp8|int[48]|uint[48]|w\d+a\d+|npu\d*)$",
    );
    size || date || quant || QUALIFIERS.contains(&t)
}

fn regex_is(t: &str, re: &str) -> bool {
    regex::Regex::new(re)
        .map(|r| r.is_match(t))
        .unwrap_or(false)
}

/// One model of a peer's list, as the peer names it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PeerModel {
    /// The peer's name for it (FastFlowLM `name`, Lemonade key, the line or entry name).
    pub name: String,
    /// The peer's own family or tag (FastFlowLM `models.<tag>`), when it gives one.
    pub tag: Option<String>,
    /// The peer's labels (Lemonade `labels`, FastFlowLM `details.parameter_size`/`quantization_level`), verbatim.
    pub labels: Vec<String>,
}

impl PeerModel {
    /// The family root this model counts under: the peer's tag when it gives one, else the name's root.
    pub fn root(&self) -> String {
        family_root(self.tag.as_deref().unwrap_or(&self.name))
    }
}

/// Reads a peer list (the shapes in the module doc). Errors name the file.
pub fn read_peer(path: &Path) -> Result<Vec<PeerModel>, String> {
    if path.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        return Ok(names.into_iter().map(plain).collect());
    }
    let text = crate::io::input::read_to_string(path, crate::io::input::MAX_RECORD_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    parse_peer(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn plain(name: String) -> PeerModel {
    PeerModel {
        name,
        tag: None,
        labels: Vec::new(),
    }
}

/// Parses a peer list's text: JSON (FastFlowLM, Lemonade, an array of names) or one name a line.
pub fn parse_peer(text: &str) -> Result<Vec<PeerModel>, String> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return Ok(text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(|l| plain(l.to_string()))
            .collect());
    }
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let str_of = |v: &serde_json::Value| v.as_str().map(str::to_string);
    if let Some(arr) = v.as_array() {
        return arr
            .iter()
            .map(|x| {
                str_of(x)
                    .map(plain)
                    .ok_or_else(|| format!("a list of names holds {x}"))
            })
            .collect();
    }
    let obj = v.as_object().ok_or("neither an object nor a list")?;
    // FastFlowLM: {"models": {"<tag>": {"<size>": {"name": ..., "details": {...}}}}}
    if let Some(models) = obj.get("models").and_then(|m| m.as_object()) {
        let mut out = Vec::new();
        for (tag, sizes) in models {
            let sizes = sizes
                .as_object()
                .ok_or_else(|| format!("models.{tag}: not an object of sizes"))?;
            for (size, m) in sizes {
                let name = m
                    .get("name")
                    .and_then(str_of)
                    .ok_or_else(|| format!("models.{tag}.{size}.name: missing"))?;
                let details = m.get("details");
                let mut labels = Vec::new();
                for k in ["family", "parameter_size", "quantization_level"] {
                    if let Some(x) = details.and_then(|d| d.get(k)).and_then(str_of) {
                        labels.push(format!("{k}={x}"));
                    }
                }
                out.push(PeerModel {
                    name,
                    tag: Some(tag.clone()),
                    labels,
                });
            }
        }
        return Ok(out);
    }
    // Lemonade: {"<name>": {"checkpoint": ..., "recipe": ..., "labels": [...]}}
    let mut out = Vec::new();
    for (name, m) in obj {
        let Some(m) = m.as_object() else {
            return Err(format!(
                "{name}: not an object (expected Lemonade's server_models.json shape)"
            ));
        };
        if !m.contains_key("checkpoint") && !m.contains_key("recipe") {
            return Err(format!(
                "{name}: no `checkpoint` or `recipe` (expected FastFlowLM's `models` or Lemonade's server_models.json)"
            ));
        }
        let mut labels: Vec<String> = m
            .get("labels")
            .and_then(|l| l.as_array())
            .map(|l| l.iter().filter_map(str_of).collect())
            .unwrap_or_default();
        if let Some(r) = m.get("recipe").and_then(str_of) {
            labels.push(format!("recipe={r}"));
        }
        if let Some(c) = m.get("checkpoint").and_then(str_of) {
            labels.push(format!("checkpoint={c}"));
        }
        out.push(PeerModel {
            name: name.clone(),
            tag: None,
            labels,
        });
    }
    Ok(out)
}

/// `data/coverage/registry.toml`: the families we keep a row for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// Days after which a coverage cell's evidence no longer counts (shown `?`), counted back from the newest
    /// evidence on the page. Default 90.
    #[serde(default = "default_expire_days")]
    pub expire_days: u32,
    /// One row per family root.
    #[serde(default, rename = "family")]
    pub families: Vec<Family>,
}

fn default_expire_days() -> u32 {
    90
}

/// One registry row.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    /// The family root ([`family_root`] of its names).
    pub root: String,
    /// Architecture names (as a model's config names them, e.g. `LlamaForCausalLM`).
    #[serde(default)]
    pub architectures: Vec<String>,
    /// Other roots that count as this row (e.g. `smollm` for `smollm2`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// `served` (we serve it) or `listed` (a peer ships it; nothing settled yet).
    pub status: String,
    /// Where the row came from or what settles it; free text, never a description made up from a name.
    #[serde(default)]
    pub note: Option<String>,
}

impl Family {
    fn matches(&self, root: &str) -> bool {
        self.root == root || self.aliases.iter().any(|a| a == root)
    }
}

/// Reads and validates the registry (each root once; status `served` or `listed`). Errors name file and key.
pub fn read_registry(path: &Path) -> Result<Registry, String> {
    let text = crate::io::input::read_to_string(path, crate::io::input::MAX_RECORD_BYTES)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let reg: Registry = toml::from_str(&text).map_err(|e| {
        let (line, _) = crate::error::line_col(&text, e.span().map(|s| s.start).unwrap_or(0));
        format!("{}:{line}: {}", path.display(), e.message())
    })?;
    let mut seen = BTreeSet::new();
    for f in &reg.families {
        if f.root != family_root(&f.root) {
            return Err(format!(
                "{}: family {:?}: root is not a family root (the rule gives {:?})",
                path.display(),
                f.root,
                family_root(&f.root)
            ));
        }
        if !matches!(f.status.as_str(), "served" | "listed") {
            return Err(format!(
                "{}: family {:?}: status must be `served` or `listed`, got {:?}",
                path.display(),
                f.root,
                f.status
            ));
        }
        for r in std::iter::once(&f.root).chain(&f.aliases) {
            if !seen.insert(r.clone()) {
                return Err(format!(
                    "{}: root or alias {r:?} is in two rows",
                    path.display()
                ));
            }
        }
    }
    Ok(reg)
}

/// A family root that gate evidence has run for (from the matrix gates' runs: [`super::evidence_roots`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Settled {
    /// The run directory.
    pub evidence: PathBuf,
    /// The cell state the evidence gives (`VERIFIED`, `PARTIAL`, `NOT-LOADING`).
    pub state: String,
    /// The run's start (UTC).
    pub verified_utc: String,
}

/// One row of the gap list.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GapRow {
    /// The family root.
    pub root: String,
    /// `listed`, `ours-only` or `settled`.
    pub status: String,
    /// The registry row's root when the peer root matched one (by root or alias).
    pub registry_row: Option<String>,
    /// The peer's models under this root, verbatim (name and labels): the peer's evidence for the row.
    pub peer: Vec<PeerModel>,
    /// The gate evidence that settles it.
    pub settled: Option<Settled>,
}

/// The gap list: every peer root (`listed` unless settled), then every registry row the peer does not list
/// (`ours-only`, or `settled` when evidence exists), sorted by root within each group.
pub fn gaps(
    peer: &[PeerModel],
    reg: &Registry,
    evidence: &BTreeMap<String, Settled>,
) -> Vec<GapRow> {
    let mut by_root: BTreeMap<String, Vec<PeerModel>> = BTreeMap::new();
    for m in peer {
        by_root.entry(m.root()).or_default().push(m.clone());
    }
    let settled_of = |f: &Family| {
        std::iter::once(&f.root)
            .chain(&f.aliases)
            .find_map(|r| evidence.get(r).cloned())
    };
    let mut rows = Vec::new();
    let mut matched = BTreeSet::new();
    for (root, models) in by_root {
        let row = reg.families.iter().find(|f| f.matches(&root));
        let settled = row
            .and_then(settled_of)
            .or_else(|| evidence.get(&root).cloned());
        if let Some(f) = row {
            matched.insert(f.root.clone());
        }
        rows.push(GapRow {
            status: if settled.is_some() {
                "settled"
            } else {
                "listed"
            }
            .into(),
            registry_row: row.map(|f| f.root.clone()),
            root,
            peer: models,
            settled,
        });
    }
    for f in &reg.families {
        if matched.contains(&f.root) {
            continue;
        }
        let settled = settled_of(f);
        rows.push(GapRow {
            root: f.root.clone(),
            status: if settled.is_some() {
                "settled"
            } else {
                "ours-only"
            }
            .into(),
            registry_row: Some(f.root.clone()),
            peer: Vec::new(),
            settled,
        });
    }
    rows
}

/// The peer roots with no registry row (what `census --check` fails on), sorted.
pub fn unrowed(rows: &[GapRow]) -> Vec<&GapRow> {
    rows.iter()
        .filter(|r| r.registry_row.is_none() && !r.peer.is_empty())
        .collect()
}

/// The gap list as Markdown: one table, the peer's words only.
pub fn render(rows: &[GapRow], peer_file: &str) -> String {
    let mut out = format!(
        "# Census: {peer_file} against data/coverage/registry.toml\n\n| family root | status | registry row | peer's names (labels) | evidence |\n|---|---|---|---|---|\n"
    );
    for r in rows {
        let peer: Vec<String> = r
            .peer
            .iter()
            .map(|m| {
                if m.labels.is_empty() {
                    format!("`{}`", m.name)
                } else {
                    format!("`{}` ({})", m.name, m.labels.join(", "))
                }
            })
            .collect();
        let ev = r
            .settled
            .as_ref()
            .map(|s| format!("{} {} ({})", s.state, s.evidence.display(), s.verified_utc))
            .unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.root,
            r.status,
            r.registry_row.as_deref().unwrap_or("(none)"),
            if peer.is_empty() {
                "(not in the peer's list)".into()
            } else {
                peer.join("; ")
            },
            ev
        ));
    }
    let n = |s: &str| rows.iter().filter(|r| r.status == s).count();
    out.push_str(&format!(
        "\n{} roots: {} listed, {} settled, {} ours-only; {} peer roots with no registry row\n",
        rows.len(),
        n("listed"),
        n("settled"),
        n("ours-only"),
        unrowed(rows).len()
    ));
    out
}
