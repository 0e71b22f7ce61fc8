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

/// How far above 0 a logprob may read and still count as 0 (float rounding of a certain token), nats.
pub const LOGPROB_ABOVE_ZERO_TOLERANCE: f64 = 1e-4;

/// How far above 1 the probability mass at one position may add up (float rounding of a softmax).
pub const MASS_TOLERANCE: f64 = 1e-3;

/// Why one position's logprobs cannot come from any probability distribution, or None when they can:
/// a logprob above 0 (a probability above 1: the chosen token's or an alternative's, beyond
/// [`LOGPROB_ABOVE_ZERO_TOLERANCE`]), or the chosen token and its distinct alternatives adding up to more than
/// probability 1 (beyond [`MASS_TOLERANCE`]; e.g. a top list that leaves out a chosen token more likely than
/// all of it). Distinct by token id, else bytes, else text; a token listed twice counts once, at its highest
/// logprob, so the check never over-counts.
pub fn impossible_at(t: &TokenLogprob) -> Option<String> {
    if t.logprob > LOGPROB_ABOVE_ZERO_TOLERANCE {
        return Some(format!(
            "the chosen token's logprob {} is above 0 (a probability above 1)",
            t.logprob
        ));
    }
    if let Some(a) = t
        .top
        .iter()
        .find(|a| a.logprob > LOGPROB_ABOVE_ZERO_TOLERANCE)
    {
        return Some(format!(
            "top_logprobs entry {:?} has logprob {} above 0 (a probability above 1)",
            crate::analysis::quote::printable(&a.token),
            a.logprob
        ));
    }
    let key = |id: Option<i64>, bytes: Option<&Vec<u8>>, token: &str| -> String {
        match (id, bytes) {
            (Some(i), _) => format!("id {i}"),
            (None, Some(b)) => format!("bytes {b:?}"),
            (None, None) => format!("text {token}"),
        }
    };
    let mut best: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    let mut add = |k: String, lp: f64| {
        let e = best.entry(k).or_insert(f64::NEG_INFINITY);
        *e = e.max(lp);
    };
    add(key(t.id, t.bytes.as_ref(), &t.token), t.logprob);
    for a in &t.top {
        // An alternative carries no bytes here: matched to the chosen token by id, else by text.
        let k = match (a.id, t.id) {
            (Some(i), _) => format!("id {i}"),
            (None, _) if a.token == t.token => key(t.id, t.bytes.as_ref(), &t.token),
            (None, _) => format!("text {}", a.token),
        };
        add(k, a.logprob);
    }
    let mass: f64 = best.values().map(|lp| lp.exp()).sum();
    (mass > 1.0 + MASS_TOLERANCE).then(|| {
        format!(
            "the chosen token and its {} alternatives add up to probability {mass:.3}, more than 1",
            best.len() - 1
        )
    })
}

/// The first impossible position of a reply's logprobs ([`impossible_at`]), described with its index (from
/// 1), its token and how many positions are impossible in all; None when every position is possible.
pub fn impossible(entries: &[TokenLogprob]) -> Option<String> {
    let bad: Vec<(usize, String)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, t)| impossible_at(t).map(|w| (i, w)))
        .collect();
    let (i, why) = bad.first()?;
    let more = if bad.len() > 1 {
        format!(" ({} of {} positions impossible)", bad.len(), entries.len())
    } else {
        String::new()
    };
    Some(format!(
        "token {} ({:?}): {why}{more}",
        i + 1,
        crate::analysis::quote::printable(&entries[*i].token)
    ))
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

    fn tok(token: &str, lp: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            id: None,
            token: token.into(),
            bytes: None,
            logprob: lp,
            top: top
                .iter()
                .map(|(t, l)| TopLogprob {
                    id: None,
                    token: (*t).into(),
                    logprob: *l,
                })
                .collect(),
        }
    }

    #[test]
    fn a_logprob_above_zero_or_a_mass_above_one_is_impossible() {
        // Possible: a certain token (0, and float noise just above it), a proper top list with the chosen token.
        assert_eq!(impossible_at(&tok(" Paris", 0.0, &[(" Paris", 0.0)])), None);
        assert_eq!(impossible_at(&tok(" Paris", 3e-7, &[])), None);
        let ok = tok(
            " Paris",
            -0.2,
            &[(" Paris", -0.2), (" Lyon", -2.5), (" the", -4.0)],
        );
        assert_eq!(impossible_at(&ok), None);
        // A chosen token not in the top list, less likely than all of it: possible (sampling).
        assert_eq!(
            impossible_at(&tok(" x", -6.0, &[(" a", -0.2), (" b", -2.0)])),
            None
        );
        // The chosen token's logprob above 0.
        let w = impossible_at(&tok(" Paris", 0.5, &[])).unwrap();
        assert!(w.contains("logprob 0.5 is above 0"), "{w}");
        // An alternative above 0.
        let w = impossible_at(&tok(" Paris", -0.1, &[(" Lyon", 0.2)])).unwrap();
        assert!(w.contains("\" Lyon\" has logprob 0.2 above 0"), "{w}");
        // vserve.py --logprobs lie: the top list leaves out the chosen token, which is more likely than all of it.
        let lie = tok(" Paris", -0.1, &[(" alt0", -1.1), (" alt1", -2.1)]);
        let w = impossible_at(&lie).unwrap();
        assert!(w.contains("add up to probability 1.36"), "{w}");
        // Listed twice counts once.
        assert_eq!(
            impossible_at(&tok(" a", -0.1, &[(" a", -0.1), (" a", -0.1)])),
            None
        );
        let all = [ok.clone(), lie.clone(), lie];
        let w = impossible(&all).unwrap();
        assert!(w.starts_with("token 2 (\" Paris\"): "), "{w}");
        assert!(w.ends_with("(2 of 3 positions impossible)"), "{w}");
        assert_eq!(impossible(&[ok]), None);
        assert_eq!(impossible(&[]), None);
    }
}
