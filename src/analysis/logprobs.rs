//! Per-token logprobs as a serve reports them: the OpenAI chat shape `choices[i].logprobs.content[]`, which
//! llama.cpp's server also sends (one entry per token, with `id`, `token`, `bytes`, `logprob` and
//! `top_logprobs`). A streamed reply carries one entry per token chunk (llama.cpp leaves out the
//! end-of-sequence token's entry in a stream; the non-streamed body has it). Pure: JSON in, values out.
//!
//! Asked for by a gate with a drift assertion (`"logprobs": true, "top_logprobs": k` in each request body,
//! docs/drift.md); a serve that ignores the request sends none, and the drift assertion then falls back to the
//! `exact` rule, stated in its verdict.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One alternative at a position (`top_logprobs[j]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// Token id, when the serve gives it (llama.cpp does; OpenAI does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Token text as the serve gives it.
    pub token: String,
    /// Natural-log probability, nats (≤ 0).
    pub logprob: f64,
}

/// One generated token with its logprob and the serve's top-k alternatives at that position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// Token id, when the serve gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Token text.
    pub token: String,
    /// The token's UTF-8 bytes, when the serve gives them (a token may be part of a multi-byte character).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    /// Natural-log probability of the chosen token, nats.
    pub logprob: f64,
    /// The top alternatives at this position, most likely first as sent (may include the chosen token).
    #[serde(default)]
    pub top: Vec<TopLogprob>,
}

/// The `logprobs.content[]` entries of one choice object (a stream chunk's choice or a body's choice), in
/// order. Entries that are not objects or lack `token`/`logprob` are skipped (`None` only when the choice
/// carries no `logprobs.content` array at all).
pub fn of_choice(choice: &serde_json::Map<String, Value>) -> Option<Vec<TokenLogprob>> {
    let content = choice
        .get("logprobs")
        .and_then(Value::as_object)?
        .get("content")
        .and_then(Value::as_array)?;
    Some(content.iter().filter_map(entry).collect())
}

fn entry(v: &Value) -> Option<TokenLogprob> {
    let o = v.as_object()?;
    let token = o.get("token").and_then(Value::as_str)?.to_string();
    let logprob = o.get("logprob").and_then(Value::as_f64)?;
    let bytes = o.get("bytes").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|b| b.as_u64().filter(|&b| b < 256).map(|b| b as u8))
            .collect()
    });
    let top = o
        .get("top_logprobs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|t| {
                    let t = t.as_object()?;
                    Some(TopLogprob {
                        id: t.get("id").and_then(Value::as_i64),
                        token: t.get("token").and_then(Value::as_str)?.to_string(),
                        logprob: t.get("logprob").and_then(Value::as_f64)?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(TokenLogprob {
        id: o.get("id").and_then(Value::as_i64),
        token,
        bytes,
        logprob,
        top,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_llama_cpp_chunk_entry_is_read_whole() {
        // Verbatim shape of llama.cpp b11434's stream (top_logprobs = 2).
        let c: Value = serde_json::from_str(r#"{"finish_reason":null,"index":0,"delta":{"content":"The"},"logprobs":{"content":[{"id":504,"token":"The","bytes":[84,104,101],"logprob":-0.6198281645774841,"top_logprobs":[{"id":504,"token":"The","bytes":[84,104,101],"logprob":-0.6198281645774841},{"id":38634,"token":"Paris","bytes":[80,97,114,105,115],"logprob":-2.169114112854004}]}]}}"#).unwrap();
        let v = of_choice(c.as_object().unwrap()).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].id, Some(504));
        assert_eq!(v[0].token, "The");
        assert_eq!(v[0].bytes.as_deref(), Some(&b"The"[..]));
        assert_eq!(v[0].top[1].token, "Paris");
        assert_eq!(v[0].top[1].id, Some(38634));
        assert!((v[0].top[1].logprob + 2.169114112854004).abs() < 1e-12);
    }

    #[test]
    fn openai_entries_without_ids_and_choices_without_logprobs() {
        let c: Value = serde_json::from_str(
            r#"{"logprobs":{"content":[{"token":" Hi","logprob":-0.1,"top_logprobs":[]},{"bad":1}]}}"#,
        )
        .unwrap();
        let v = of_choice(c.as_object().unwrap()).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].id, None);
        assert!(v[0].top.is_empty());
        let none: Value = serde_json::from_str(r#"{"logprobs":null}"#).unwrap();
        assert_eq!(of_choice(none.as_object().unwrap()), None);
    }
}
