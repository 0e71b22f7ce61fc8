//! Where things are in a gate's text: the line declaring an assertion (annotations, JUnit), the span of a dotted
//! key (errors point at it), the key or table at a byte offset (the TOML reader's own errors name their key).

use std::collections::BTreeMap;
use std::ops::Range;

use crate::vocab::AssertionKind;

/// [`line_of`] on the TOML text itself (for a gate file that did not parse into a [`GateSpec`]).
pub fn line_in(text: &str, assertion: &str) -> usize {
    // A load trial (`[c=16]::ttft_p95`): its bound's key or its `[assert.X]` header ([`load_line_in`]).
    if let Some(trial) = super::load::load_trial(assertion) {
        return load_line_in(text, trial).unwrap_or(1);
    }
    let Ok(doc) = text.parse::<toml_edit::ImDocument<String>>() else {
        return 1;
    };
    decl_line_in(doc.as_table(), text, assertion).unwrap_or(1)
}

/// [`super::GateSpec::decl_lines`]: the declaring line of each of `kinds` in `doc`, the parsed document of `text`.
pub(super) fn decl_lines(
    doc: &toml_edit::Table,
    text: &str,
    kinds: Vec<AssertionKind>,
) -> BTreeMap<AssertionKind, usize> {
    kinds
        .into_iter()
        .filter_map(|k| Some((k, decl_line_in(doc, text, k.name())?)))
        .collect()
}

/// [`super::GateSpec::decl_lines`] read from the text itself, for a gate parsed from other text than its source
/// (a matrix entry is parsed expanded; its lines are the file's).
pub(crate) fn decl_lines_in(
    text: &str,
    kinds: Vec<AssertionKind>,
) -> BTreeMap<AssertionKind, usize> {
    match text.parse::<toml_edit::ImDocument<String>>() {
        Ok(doc) => decl_lines(doc.as_table(), text, kinds),
        Err(_) => BTreeMap::new(),
    }
}

/// The line of `text` declaring a load trial's assertion, `trial` being the part after the point
/// (`ttft_p95`, `throughput`, `parity_ttft_p50`): a latency bound's key (`ttft_p95_ms = 800`, the bound a person
/// edits, as `rate`'s `floor_tok_s`), else the `[assert.X]` header (`[assert.parity]` for `parity_*`). None
/// when not found.
pub(super) fn load_line_in(text: &str, trial: &str) -> Option<usize> {
    let doc = text.parse::<toml_edit::ImDocument<String>>().ok()?;
    let table = match trial {
        "throughput" | "goodput" | "errors" | "consistency" => trial,
        t if t.starts_with("parity_") => "parity",
        t => {
            let key = format!("assert.latency.{t}_ms");
            return key_span(doc.as_table(), &key)
                .map(|r| line_at(text, r.start))
                .or_else(|| decl_line_in(doc.as_table(), text, "latency"));
        }
    };
    decl_line_in(doc.as_table(), text, table)
}

/// [`line_in`] on the parsed document `doc` of `text`: None when `assertion` is not found.
pub(super) fn decl_line_in(doc: &toml_edit::Table, text: &str, assertion: &str) -> Option<usize> {
    let line = |offset: usize| line_at(text, offset);
    if let Some(check) = assertion.strip_prefix("contract.") {
        // A `[contract]` check: its entry in `expect`, `may_lack` or `known_fail` (where `servegate check`
        // points too).
        let contract = doc.get("contract").and_then(|c| c.as_table_like())?;
        for list in ["expect", "may_lack", "known_fail"] {
            let Some(arr) = contract.get(list).and_then(|a| a.as_array()) else {
                continue;
            };
            if let Some(r) = arr
                .iter()
                .find(|v| v.as_str() == Some(check))
                .and_then(|v| v.span())
            {
                return Some(line(r.start));
            }
        }
        return None;
    }
    let keys: &[&str] = if assertion == "rate" {
        &["assert.rate.floor_tok_s", "assert.rate"]
    } else {
        &[]
    };
    for k in keys {
        if let Some(r) = key_span(doc, k) {
            return Some(line(r.start));
        }
    }
    let table = doc
        .get("assert")
        .and_then(|a| a.as_table_like())
        .and_then(|t| t.get_key_value(assertion));
    if let Some((k, item)) = table {
        if let Some(r) = item.as_table().and_then(|t| t.span()).or_else(|| k.span()) {
            return Some(line(r.start));
        }
    }
    None
}

/// The byte span of a dotted key (`serve.host`, `request.extra.max_tokens`) in a parsed document: the key
/// itself where written; where absent, the nearest enclosing table that is (its header or first key).
pub(super) fn key_span(table: &dyn toml_edit::TableLike, key: &str) -> Option<Range<usize>> {
    let (head, rest) = match key.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (key, None),
    };
    let (k, item) = table.get_key_value(head)?;
    let here = k.span().or_else(|| item.span()).or_else(|| {
        // An implicit table (`[assert.rate]` without `[assert]`): where its first key is.
        item.as_table_like()
            .and_then(|t| t.iter().next().map(|(name, _)| name.to_string()))
            .and_then(|first| key_span(item.as_table_like()?, &first))
    });
    match (rest, item.as_table_like()) {
        (Some(r), Some(t)) => key_span(t, r).or(here),
        _ => here,
    }
}

/// The dotted key whose key or value span holds `offset` (the deepest one), for toml's own errors.
pub(super) fn key_at(
    table: &dyn toml_edit::TableLike,
    prefix: &str,
    offset: usize,
) -> Option<String> {
    for (name, item) in table.iter() {
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(t) = item.as_table_like() {
            if let Some(found) = key_at(t, &path, offset) {
                return Some(found);
            }
        }
        let (k, _) = table.get_key_value(name)?;
        let within = |r: Option<Range<usize>>| {
            r.is_some_and(|r| r.start <= offset && offset < r.end.max(r.start + 1))
        };
        if item.as_table().is_none() && (within(k.span()) || within(item.span())) {
            return Some(path);
        }
    }
    None
}

/// The dotted path of the (deepest) table whose header holds `offset`, for toml's "missing field" errors.
pub(super) fn table_at(
    table: &dyn toml_edit::TableLike,
    prefix: &str,
    offset: usize,
) -> Option<String> {
    for (name, item) in table.iter() {
        let Some(t) = item.as_table_like() else {
            continue;
        };
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let Some(deeper) = table_at(t, &path, offset) {
            return Some(deeper);
        }
        let span = item
            .as_table()
            .and_then(|t| t.span())
            .or_else(|| item.span());
        if span.is_some_and(|r| r.start <= offset && offset < r.end.max(r.start + 1)) {
            return Some(path);
        }
    }
    None
}

/// The dotted key written on the line holding byte `offset` of `text` (`request.max_tokens` for
/// `max_tokens = 1` under `[request]`), read from the text itself: for an error the TOML reader finds before a
/// document exists (an integer past 64 bits). `None` when that line assigns no key.
pub(super) fn key_on_line(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let line = text[start..].lines().next().unwrap_or("");
    let (k, _) = line.split_once('=')?;
    let k = k.trim().trim_matches('"');
    if k.is_empty() || k.starts_with('[') || k.starts_with('#') {
        return None;
    }
    let table = text[..start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| {
            l.trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        });
    Some(match table {
        Some(t) if !t.is_empty() => format!("{t}.{k}"),
        _ => k.to_string(),
    })
}

/// The 1-based line of `text` holding byte `offset` (past the end: the last line).
fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}
