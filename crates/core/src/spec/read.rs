//! Reading a gate: the file (bounded, UTF-8), the TOML (the reader's errors in words, at their key), then the
//! [`Validator`].

use std::collections::BTreeMap;
use std::path::Path;

use super::{
    key_at, key_on_line, key_span, table_at, Context, GateSpec, RawGate, SpecError, Validator,
    MAX_GATE_BYTES,
};

/// Reads and validates a gate file. Errors name the file, line, column and key; a file over
/// [`MAX_GATE_BYTES`] is refused without being read whole.
pub fn load(file: &Path) -> Result<GateSpec, SpecError> {
    let text = read_text(file)?;
    parse(file, &text, &Context::for_file(file))
}

/// Reads a gate file's text: at most [`MAX_GATE_BYTES`] (a larger file is refused), valid UTF-8 (else an error at
/// the first invalid byte's line and column). The one reader of gate files ([`load`], `matrix::load_all`).
pub fn read_text(file: &Path) -> Result<String, SpecError> {
    use std::io::Read;
    let io = |e| SpecError::Io {
        file: file.to_path_buf(),
        source: e,
    };
    // Never blocks on a FIFO, never reads a device: a gate is a regular file (`crate::io::input`).
    let f = crate::io::input::open_regular(file).map_err(io)?;
    let mut bytes = Vec::new();
    f.take(MAX_GATE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_GATE_BYTES {
        return Err(SpecError::at(
            file,
            "",
            0..0,
            "",
            format!(
                "the file is over {} MiB: a gate is a few KiB of TOML (is this the right file?)",
                MAX_GATE_BYTES >> 20
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        SpecError::at(
            file,
            &String::from_utf8_lossy(e.as_bytes()),
            at..at + 1,
            "",
            "the file is not valid UTF-8",
        )
    })
}

/// Parses and validates gate TOML text (`file` is used for messages and `{gate_dir}`).
pub fn parse(file: &Path, text: &str, ctx: &Context) -> Result<GateSpec, SpecError> {
    if text.trim().is_empty() {
        return Err(SpecError::at(
            file,
            text,
            0..0,
            "",
            "the file is empty; a gate needs [gate], [serve] and [request]",
        ));
    }
    let doc = toml_edit::ImDocument::parse(text).ok();
    let raw: RawGate = toml::from_str(text).map_err(|e| {
        let mut span = e.span().unwrap_or(0..0);
        let missing = e
            .message()
            .strip_prefix("missing field `")
            .and_then(|m| m.split('`').next())
            .map(str::to_string);
        let whole = span == (0..0) || (span.start == 0 && span.end >= text.trim_end().len());
        let table = doc
            .as_ref()
            .filter(|_| !whole)
            .and_then(|d| table_at(d.as_table(), "", span.start));
        let key = match (&missing, table) {
            // A required key absent from a table: the table's path and the key, at the table's header.
            (Some(field), Some(t)) => format!("{t}.{field}"),
            // A required table absent from the file: at the file's last line (where it would go).
            (Some(field), None) => {
                let end = text.trim_end().len();
                let at = text[..end].rfind('\n').map(|i| i + 1).unwrap_or(0);
                span = at..end.max(at + 1);
                field.clone()
            }
            (None, _) => doc
                .as_ref()
                .and_then(|d| key_at(d.as_table(), "", span.start))
                .or_else(|| key_on_line(text, span.start))
                .unwrap_or_default(),
        };
        let span = if span == (0..0) && !key.is_empty() {
            doc.as_ref()
                .and_then(|d| key_span(d.as_table(), &key))
                .unwrap_or(span)
        } else {
            span
        };
        let message = match e.message() {
            // The TOML reader's words for an integer past 64 bits: say the rule.
            m if m.contains("number too large to fit in target type") => format!(
                "integer too large: TOML integers stop at {}; this key's range is in docs/gate-format.md (\"Ranges\")",
                i64::MAX
            ),
            // A sweep key's own type in words, not serde's internal enum's name.
            m if m.contains("untagged enum OneOrMany") => {
                if key.ends_with("route.fast") {
                    "must be a string or a list of strings (regexes, all of which must appear)".to_string()
                } else if key.ends_with("client_cpus") {
                    "must be a whole number (the first N CPUs the runner may use) or a list of CPU ids ([0, 2])".to_string()
                } else if key.ends_with("concurrency") {
                    "must be a whole number or a list of whole numbers (a sweep: [1, 4, 16])".to_string()
                } else {
                    "must be a number or a list of numbers (a sweep: [0.5, 2, 8])".to_string()
                }
            }
            // Not TOML at all (the reader stopped on the syntax): said in words, on one line.
            m if doc.is_none() => syntax_message(text, span.start, &key, m),
            // An unknown table under [assert.]: the nearest known assertions, however far.
            m if line_at(text, span.start).trim_start().starts_with("[assert.") => {
                unknown_assertion(m)
            }
            m => did_you_mean(&plain_types(m)),
        };
        SpecError::at(file, text, span, &key, message)
    })?;
    let v = Validator {
        file,
        text,
        ctx,
        vars: BTreeMap::new(),
        required_env: raw.requires.env.clone(),
        doc,
    };
    v.build(raw)
}

/// serde's `unknown field `flor_tok_s`, expected one of `floor_tok_s`, `source`` (or `expected `x``) with
/// `; did you mean `floor_tok_s`?` appended when one expected key is close to the unknown one (normalized
/// Damerau-Levenshtein similarity >= 0.7, or the same key up to case, `-`/`_`, order of the letters). Any
/// other message is returned unchanged.
pub fn did_you_mean(message: &str) -> String {
    let Some((_, rest)) = message.split_once("unknown field `") else {
        return message.to_string();
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return message.to_string();
    };
    let candidates: Vec<&str> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| !c.is_empty())
        .collect();
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let best = candidates
        .iter()
        .map(|c| {
            let score = if norm(c) == norm(unknown) {
                1.0
            } else {
                strsim::normalized_damerau_levenshtein(&norm(unknown), &norm(c))
            };
            (score, *c)
        })
        .filter(|(score, _)| *score >= 0.7)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((_, c)) => format!("{message}; did you mean `{c}`?"),
        None => message.to_string(),
    }
}

/// The text of the line holding byte `at` of `text` (empty past its end).
fn line_at(text: &str, at: usize) -> &str {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = text[at..].find('\n').map(|i| at + i).unwrap_or(text.len());
    &text[start..end]
}

/// The most characters of a line (and of the reader's words) a syntax error quotes ([`syntax_message`]).
const SYNTAX_QUOTE_CHARS: usize = 80;

/// A TOML syntax error in words, one line: after `key =` with no value where the reader stopped (`repeats = =
/// 1`: `` `repeats = = 1` is not valid TOML: a value must follow `repeats =` (a number, a "string", true or
/// false, a [list] or an {inline table}); the TOML reader says: invalid string, expected `"`, `'` ``), else
/// `not valid TOML: ` and the reader's words. `key` is the key the error is at (may be empty); `message` the
/// reader's (several lines).
fn syntax_message(text: &str, at: usize, key: &str, message: &str) -> String {
    let said = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    let line = line_at(text, at);
    let start = text[..at.min(text.len())]
        .rfind('\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let col = at.saturating_sub(start);
    let name = key.rsplit('.').next().unwrap_or(key);
    // The line quoted up to SYNTAX_QUOTE_CHARS (a hostile one may be megabytes; the error shows it anyway).
    let cut = |s: &str| match s.char_indices().nth(SYNTAX_QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    };
    let said = cut(&said);
    match line.find('=') {
        Some(eq) if col > eq && !name.is_empty() && line[..eq].trim().ends_with(name) => format!(
            "`{}` is not valid TOML: a value must follow `{} =` (a number, a \"string\", true or false, a [list] or an {{inline table}}); the TOML reader says: {said}",
            cut(line.trim()),
            cut(line[..eq].trim())
        ),
        _ => format!("not valid TOML: {said}"),
    }
}

/// serde's `unknown field `telepathy`, expected one of `route`, ...` for a table under `[assert.]`: `unknown
/// assertion [assert.telepathy]` with a did-you-mean ([`did_you_mean`]) when one is close, else the three
/// nearest known assertions (normalized Damerau-Levenshtein), then every known one (docs/gate-format.md).
fn unknown_assertion(message: &str) -> String {
    let (Some(unknown), Some(known)) = (
        message
            .split_once("unknown field `")
            .and_then(|(_, r)| r.split('`').next()),
        message.split_once("expected one of ").map(|(_, r)| r),
    ) else {
        return did_you_mean(message);
    };
    let names: Vec<&str> = known.split('`').skip(1).step_by(2).collect();
    let close = did_you_mean(message);
    let hint = match close.strip_prefix(message) {
        Some(h) if !h.is_empty() => h.trim_start_matches("; ").to_string(),
        _ => {
            let mut by: Vec<(f64, &str)> = names
                .iter()
                .map(|n| (strsim::normalized_damerau_levenshtein(unknown, n), *n))
                .collect();
            by.sort_by(|a, b| b.0.total_cmp(&a.0));
            let nearest: Vec<String> = by.iter().take(3).map(|(_, n)| format!("`{n}`")).collect();
            format!("the nearest known: {}", nearest.join(", "))
        }
    };
    format!("unknown assertion [assert.{unknown}]; {hint}; every known one: {known}")
}

/// serde's type names in a toml message (`expected f64`) in words (`expected a number`).
pub(super) fn plain_types(message: &str) -> String {
    let mut m = message.to_string();
    for (from, to) in [
        ("expected f64", "expected a number"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number >= 0"),
        ("expected i64", "expected a whole number"),
        ("expected a sequence", "expected a list of strings"),
        ("floating point", "number"),
        ("expected a boolean", "expected true or false"),
    ] {
        m = m.replace(from, to);
    }
    m
}
