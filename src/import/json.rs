//! Reading another tool's JSON by path: every field read names where it is (`$.ttfts[4]`, or `line 3:
//! metrics.time_to_first_token.value` for a JSONL record), and a missing field is an error, never a zero.

use serde_json::Value;

/// A JSON value and the path it was reached by (`$.benchmarks[0].requests`).
pub(crate) struct Node<'a> {
    pub(crate) v: &'a Value,
    pub(crate) path: String,
}

impl<'a> Node<'a> {
    /// The root of a document, named `root` (`$`, or `line 3: $`).
    pub(crate) fn root(v: &'a Value, root: &str) -> Node<'a> {
        Node {
            v,
            path: root.to_string(),
        }
    }

    /// Child `key`, or an error naming its path when it is absent or null.
    pub(crate) fn get(&self, key: &str) -> Result<Node<'a>, String> {
        self.opt(key)
            .ok_or_else(|| format!("{}.{key}: missing", self.path))
    }

    /// Child `key`, None when absent or null.
    pub(crate) fn opt(&self, key: &str) -> Option<Node<'a>> {
        match self.v.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(Node {
                v,
                path: format!("{}.{key}", self.path),
            }),
        }
    }

    /// True when child `key` is present (null included).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.v.get(key).is_some()
    }

    /// The elements of an array, each with its path.
    pub(crate) fn items(&self) -> Result<Vec<Node<'a>>, String> {
        let a = self
            .v
            .as_array()
            .ok_or_else(|| format!("{}: not an array ({})", self.path, kind(self.v)))?;
        Ok(a.iter()
            .enumerate()
            .map(|(i, v)| Node {
                v,
                path: format!("{}[{i}]", self.path),
            })
            .collect())
    }

    /// A finite number.
    pub(crate) fn f64(&self) -> Result<f64, String> {
        self.v
            .as_f64()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("{}: not a number ({})", self.path, kind(self.v)))
    }

    /// A finite number >= 0.
    pub(crate) fn nonneg(&self) -> Result<f64, String> {
        let x = self.f64()?;
        if x < 0.0 {
            return Err(format!("{}: negative ({})", self.path, super::shown_num(x)));
        }
        Ok(x)
    }

    /// A whole number >= 0.
    pub(crate) fn u64(&self) -> Result<u64, String> {
        self.v
            .as_u64()
            .ok_or_else(|| format!("{}: not a whole number >= 0 ({})", self.path, kind(self.v)))
    }

    /// A string.
    pub(crate) fn str(&self) -> Result<&'a str, String> {
        self.v
            .as_str()
            .ok_or_else(|| format!("{}: not a string ({})", self.path, kind(self.v)))
    }
}

/// What a JSON value is, for an error (`a string`, `null`...), never its content (it may be megabytes).
pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses a whole JSON document, or says where it breaks (line and column; `truncated` when the text ends
/// inside it).
pub(crate) fn parse_doc(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| {
        if e.is_eof() {
            format!(
                "truncated: the JSON ends inside a value at line {} column {} (a file cut while written?)",
                e.line(),
                e.column()
            )
        } else {
            format!(
                "not JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            )
        }
    })
}

/// The non-blank lines of JSON-lines `text`, one at a time (a 200 MB file is not split into a list first):
/// (1-based line number, the line, the text after it; None after the last line, which has no newline after
/// it: a value cut there was cut with the file).
pub(crate) fn lines(text: &str) -> impl Iterator<Item = (usize, &str, Option<&str>)> {
    let mut offset = 0;
    text.split('\n').enumerate().filter_map(move |(i, line)| {
        offset += line.len() + 1;
        (!line.trim().is_empty()).then(|| (i + 1, line, text.get(offset..)))
    })
}

/// True when `rest` (the text after a line, as [`lines`] gives it) holds nothing but blanks: a value cut in
/// that line is cut at the file's end (truncated), not a multi-line document going on. Scans only up to the
/// next non-blank character.
pub(crate) fn only_blanks(rest: Option<&str>) -> bool {
    rest.is_none_or(|r| r.trim_start().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_skip_blanks_number_from_one_and_give_the_rest() {
        let got: Vec<_> = lines("a\n\n  \nb\nc").collect();
        assert_eq!(
            got,
            vec![
                (1, "a", Some("\n  \nb\nc")),
                (4, "b", Some("c")),
                (5, "c", None)
            ]
        );
        // A newline at the end: the last line has an (empty) rest.
        assert_eq!(lines("a\n").collect::<Vec<_>>(), vec![(1, "a", Some(""))]);
        assert!(only_blanks(None) && only_blanks(Some(" \n\t\n")));
        assert!(!only_blanks(Some("\n\n}")));
    }
}
