//! Readers of one chunk's fields: choice 0, strings, numbers, usage, timings, tool-call pieces.

use serde_json::{Map, Value};

use crate::analysis::reply_types::*;

/// Choice 0: the element whose `index` is 0, else the first element without an `index`.
pub(super) fn first_choice(arr: &[Value]) -> Option<&Map<String, Value>> {
    arr.iter()
        .filter_map(Value::as_object)
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or_else(|| {
            arr.iter()
                .filter_map(Value::as_object)
                .find(|c| c.get("index").is_none_or(Value::is_null))
        })
}

pub(super) fn str_of(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

/// `reasoning_content`, or `reasoning` when that is absent or empty (never both: some serves send the same
/// text under both names).
pub(super) fn reasoning_of(m: &Map<String, Value>) -> &str {
    match str_of(m.get("reasoning_content")) {
        Some(s) if !s.is_empty() => s,
        _ => str_of(m.get("reasoning")).unwrap_or(""),
    }
}

/// `finish_reason` with `""` and non-strings normalised to none.
pub(super) fn finish_of(choice: &Map<String, Value>) -> Option<String> {
    str_of(choice.get("finish_reason"))
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

pub(super) fn u64_of(v: Option<&Value>) -> Option<u64> {
    let v = v?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

pub(super) fn f64_of(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|f| f.is_finite())
}

pub(super) fn usage_of(v: &Value) -> Option<Usage> {
    let o = v.as_object()?;
    Some(Usage {
        prompt_tokens: u64_of(o.get("prompt_tokens")),
        completion_tokens: u64_of(o.get("completion_tokens")),
        total_tokens: u64_of(o.get("total_tokens")),
        reasoning_tokens: o
            .get("completion_tokens_details")
            .and_then(|d| u64_of(d.get("reasoning_tokens"))),
    })
}

pub(super) fn timings_of(v: &Value) -> Option<Timings> {
    let o = v.as_object()?;
    Some(Timings {
        cache_n: u64_of(o.get("cache_n")),
        prompt_n: u64_of(o.get("prompt_n")),
        prompt_ms: f64_of(o.get("prompt_ms")),
        prompt_per_second: f64_of(o.get("prompt_per_second")),
        predicted_n: u64_of(o.get("predicted_n")),
        predicted_ms: f64_of(o.get("predicted_ms")),
        predicted_per_second: f64_of(o.get("predicted_per_second")),
    })
}

pub(super) fn merge_tool_calls(acc: &mut Vec<ToolCall>, pieces: &[Value]) {
    for (pos, p) in pieces.iter().enumerate() {
        let Some(p) = p.as_object() else { continue };
        let index = u64_of(p.get("index")).unwrap_or(pos as u64);
        let i = match acc.iter().position(|t| t.index == index) {
            Some(i) => i,
            None => {
                acc.push(ToolCall {
                    index,
                    ..Default::default()
                });
                acc.len() - 1
            }
        };
        let Some(tc) = acc.get_mut(i) else { continue };
        if let Some(id) = str_of(p.get("id")).filter(|s| !s.is_empty()) {
            tc.id = Some(id.to_string());
        }
        if let Some(f) = p.get("function").and_then(Value::as_object) {
            if let Some(n) = str_of(f.get("name")).filter(|s| !s.is_empty()) {
                tc.name = Some(n.to_string());
            }
            match f.get("arguments") {
                Some(Value::String(a)) => tc.arguments.push_str(a),
                Some(Value::Null) | None => {}
                Some(other) => tc.arguments.push_str(&other.to_string()),
            }
        }
    }
}
