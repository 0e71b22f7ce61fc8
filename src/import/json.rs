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
