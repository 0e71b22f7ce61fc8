//! Keeping the API key (`serve.api_key_env`) out of everything a run writes or prints.
//!
//! servegate itself never writes the key: it goes into one request header marked sensitive. But a serve may
//! echo it (in its log, a response header, the body), and the serve's log is written by the serve itself. So
//! after each run (each arm of a pair), on every exit path that returns, the runner masks the exact key where
//! the *serve's* bytes are kept (`run::scrub::scrub_dir`, each file by [`scrub_file`]): `serve.log` and
//! `setup.log` (bytes), `NN.response.json`
//! (inside its string values only: header values, the transport error) and `NN.reads.jsonl` (inside the
//! decoded body bytes, re-encoded: the file's structure and each read's time and length are kept). servegate's
//! own structured files (`run.json`, `gate.toml`, `NN.request.json`, pair files) are never rewritten: a mask
//! there could replace JSON syntax or the gate itself and make the run unjudgeable. In `run.json` only the
//! strings that quote the serve (its failure, stop, version, models, notes, transport errors) are masked
//! before it is written ([`mask_summary`]). Progress lines are masked as they are printed. A mask keeps the
//! length (`*` for each byte), so the timed reads keep their byte counts and read boundaries; an occurrence
//! split across two network reads is found in the concatenated body.
//!
//! A key must be safe to mask ([`check_key`]): at least [`MIN_KEY_BYTES`] bytes, no whitespace or control
//! characters, and not part of the words an OpenAI-style reply is made of. A short key (`null`, `true`, `e`)
//! occurs by chance in the serve's own JSON and SSE framing; masking it would rewrite `"content"` into
//! `"cont*nt"` and the run could never be judged. Such a key is refused before anything starts.
//!
//! Verdict messages are masked too ([`mask_verdicts`]): a key the serve splits across two SSE events is in no
//! file whole, but the parsed content that `known_answer` quotes joins it again.
//!
//! Known limits: a runner killed (SIGKILL) in the middle of a run masks nothing, so an echoed key can stay in the
//! files written before the kill (the run is marked incomplete); a key split across SSE events stays split (and
//! unmasked) in `NN.reads.jsonl`, and `servegate judge` masks it in its verdicts only when the variable is set.

use crate::io::reads::TimedRead;

/// The byte a secret's bytes are replaced with.
pub const MASK: u8 = b'*';

/// Masks every occurrence of `secret` in `bytes` in place (same length); returns how many.
pub fn mask_bytes(bytes: &mut [u8], secret: &[u8]) -> usize {
    if secret.is_empty() || bytes.len() < secret.len() {
        return 0;
    }
    let mut n = 0;
    let mut i = 0;
    while i + secret.len() <= bytes.len() {
        if &bytes[i..i + secret.len()] == secret {
            bytes[i..i + secret.len()].fill(MASK);
            n += 1;
            i += secret.len();
        } else {
            i += 1;
        }
    }
    n
}

/// `s` with every occurrence of `secret` (and of its JSON-escaped form) masked.
pub fn mask_str(s: &str, secret: &str) -> String {
    if secret.is_empty() || !(s.contains(secret) || s.contains(&json_escaped(secret))) {
        return s.to_string();
    }
    let mask = "*".repeat(secret.len());
    s.replace(secret, &mask)
        .replace(&json_escaped(secret), &mask)
}

fn json_escaped(secret: &str) -> String {
    let q = serde_json::to_string(secret).unwrap_or_default();
    q.trim_matches('"').to_string()
}

/// Masks `secret` in a body given as reads, also where it spans reads; lengths and times unchanged.
pub fn mask_reads(reads: &mut [TimedRead], secret: &[u8]) -> usize {
    let mut body: Vec<u8> = reads
        .iter()
        .map(|r| r.bytes.as_slice())
        .collect::<Vec<&[u8]>>()
        .concat();
    let n = mask_bytes(&mut body, secret);
    if n > 0 {
        let mut at = 0;
        for r in reads.iter_mut() {
            let len = r.bytes.len();
            r.bytes.copy_from_slice(&body[at..at + len]);
            at += len;
        }
    }
    n
}

/// Shortest API key servegate masks, bytes. Shorter keys are refused ([`check_key`]): they occur by chance in
/// the serve's JSON and SSE text, so masking them corrupts the evidence (and a key that short protects nothing).
pub const MIN_KEY_BYTES: usize = 8;

/// Words of an OpenAI-style reply (JSON keys and values, SSE framing, common headers). A key found inside one
/// of them would be masked in the serve's framing, not only where the serve echoed it.
const PROTOCOL_WORDS: &[&str] = &[
    "chat.completion.chunk",
    "completion_tokens",
    "completion_tokens_details",
    "prompt_tokens",
    "prompt_tokens_details",
    "total_tokens",
    "finish_reason",
    "system_fingerprint",
    "include_usage",
    "stream_options",
    "reasoning_content",
    "predicted_per_second",
    "predicted_per_token_ms",
    "prompt_per_second",
    "prompt_per_token_ms",
    "predicted_ms",
    "predicted_n",
    "cache_n",
    "assistant",
    "content",
    "choices",
    "created",
    "logprobs",
    "message",
    "timings",
    "tool_calls",
    "function",
    "arguments",
    "[DONE]",
    "data: ",
    "Bearer ",
    "application/json",
    "text/event-stream",
    "keep-alive",
    "content-type",
    "transfer-encoding",
    "chunked",
];

/// Whether `key` can be masked without corrupting the serve's bytes: at least [`MIN_KEY_BYTES`] bytes, no
/// whitespace or control characters, not inside a protocol word. The reason when not (never quoting the key).
pub fn check_key(key: &str) -> Result<(), String> {
    if key.len() < MIN_KEY_BYTES {
        return Err(format!("the key is {} byte{}; servegate needs at least {MIN_KEY_BYTES} to mask it safely (a shorter one occurs by chance in the serve's replies, and masking it there would corrupt the evidence)", key.len(), if key.len() == 1 { "" } else { "s" }));
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the key contains whitespace or control characters".into());
    }
    if let Some(w) = PROTOCOL_WORDS
        .iter()
        .find(|w| w.to_ascii_lowercase().contains(&key.to_ascii_lowercase()))
    {
        return Err(format!("the key is part of the word {w:?} of the serve's replies; masking it would corrupt the evidence"));
    }
    Ok(())
}

/// Masks `secret` in string values of a JSON value (never in keys, numbers, `null` or `true`/`false`).
pub fn mask_json_strings(v: &mut serde_json::Value, secret: &str) -> usize {
    match v {
        serde_json::Value::String(s) => {
            let n = s.matches(secret).count();
            if n > 0 {
                *s = s.replace(secret, &"*".repeat(secret.len()));
            }
            n
        }
        serde_json::Value::Array(a) => a.iter_mut().map(|x| mask_json_strings(x, secret)).sum(),
        serde_json::Value::Object(o) => o.values_mut().map(|x| mask_json_strings(x, secret)).sum(),
        _ => 0,
    }
}

/// Masks `secret` in the strings of `run.json` that quote the serve: its failure, stop, version, models,
/// the notes and each request's transport error. Nothing else of the summary changes.
pub fn mask_summary(summary: &mut crate::evidence::RunSummary, secret: &str) {
    let m = |s: &mut String| *s = mask_str(s, secret);
    let serve = &mut summary.serve;
    for s in [
        &mut serve.failure,
        &mut serve.stop,
        &mut serve.version,
        &mut serve.exit_log_tail,
    ]
    .into_iter()
    .flatten()
    {
        m(s);
    }
    serve.models.iter_mut().for_each(m);
    summary.notes.iter_mut().for_each(m);
    for r in &mut summary.requests {
        if let Some(e) = &mut r.transport_error {
            m(e);
        }
    }
}

/// Masks `secret` in one file the serve's own bytes are kept in, given its name and bytes (pure: the walk over
/// the run directory and the rewrite are `run::scrub::scrub_dir`'s): `serve.log` and `setup.log` as bytes,
/// `NN.reads.jsonl` in the decoded body (None if it does not decode), `NN.response.json` in its string values
/// (None if it is not JSON). Any other name is None: servegate's own files are never touched. Returns the new
/// bytes and the count of occurrences masked (0: nothing to rewrite).
pub fn scrub_file(name: &str, bytes: Vec<u8>, secret: &str) -> Option<(Vec<u8>, usize)> {
    if name.ends_with(crate::evidence::layout::READS_SUFFIX) {
        let mut reads = std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| crate::io::reads::decode(t).ok())?;
        let n = mask_reads(&mut reads, secret.as_bytes());
        Some((crate::io::reads::encode(&reads).into_bytes(), n))
    } else if name.ends_with(crate::evidence::layout::RESPONSE_SUFFIX) {
        let mut v = serde_json::from_slice::<serde_json::Value>(&bytes).ok()?;
        let n = mask_json_strings(&mut v, secret);
        Some((serde_json::to_vec_pretty(&v).unwrap_or(bytes), n))
    } else if name == crate::evidence::layout::SERVE_LOG
        || name == crate::evidence::layout::SETUP_LOG
    {
        Some(mask_file_bytes(bytes, secret))
    } else {
        None
    }
}

fn mask_file_bytes(mut bytes: Vec<u8>, secret: &str) -> (Vec<u8>, usize) {
    let mut n = mask_bytes(&mut bytes, secret.as_bytes());
    let escaped = json_escaped(secret);
    if escaped != secret {
        n += mask_bytes(&mut bytes, escaped.as_bytes());
    }
    (bytes, n)
}

/// The gate's API key (the value of its `serve.api_key_env`), when the gate names one and it is set.
pub fn secret_of(gate: &crate::spec::GateSpec) -> Option<String> {
    gate.serve
        .api_key_env
        .as_ref()
        .and_then(|v| std::env::var(v).ok())
        .filter(|k| check_key(k).is_ok())
}

/// Masks the gate's API key (when set) in verdict messages: a serve may echo the key split across SSE events,
/// where no file holds it whole but the parsed content (quoted by `known_answer`) does.
pub fn mask_verdicts(gate: &crate::spec::GateSpec, verdicts: &mut [crate::judge::Verdict]) {
    if let Some(k) = secret_of(gate) {
        for v in verdicts {
            v.message = mask_str(&v.message, &k);
            v.details = mask_str(&v.details, &k);
        }
    }
}

/// Masks `secret` in a serialisable value (through its JSON form); the value unchanged when it holds none.
pub fn mask_value<T: serde::Serialize + serde::de::DeserializeOwned>(
    value: &mut T,
    secret: &str,
) -> bool {
    let Ok(json) = serde_json::to_string(value) else {
        return false;
    };
    let masked = mask_str(&json, secret);
    if masked == json {
        return false;
    }
    match serde_json::from_str(&masked) {
        Ok(v) => {
            *value = v;
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_or_protocol_keys_are_refused() {
        for bad in [
            "",
            "e",
            "null",
            "true",
            "1234567",
            "sk 12345678",
            "finish_reason",
            "ASSISTANT",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        let why = check_key("null").unwrap_err();
        assert!(why.contains("at least 8") && !why.contains("null"), "{why}");
        assert!(check_key("sk-live-0123456789").is_ok());
        assert!(check_key("sk-wrong").is_ok());
    }

    #[test]
    fn json_masking_touches_string_values_only() {
        let mut v = serde_json::json!({"secret-key": "x secret-key y", "n": null, "a": ["secret-key"], "t": true});
        assert_eq!(mask_json_strings(&mut v, "secret-key"), 2);
        assert_eq!(
            v,
            serde_json::json!({"secret-key": "x ********** y", "n": null, "a": ["**********"], "t": true})
        );
    }

    #[test]
    fn masks_keep_length_and_find_keys_split_across_reads() {
        let mut b = b"Bearer sk-123 and sk-123".to_vec();
        assert_eq!(mask_bytes(&mut b, b"sk-123"), 2);
        assert_eq!(b, b"Bearer ****** and ******");
        let mut reads = vec![
            TimedRead {
                recv_ms: None,
                t_ms: 1.0,
                bytes: b"xx sk-".to_vec(),
            },
            TimedRead {
                recv_ms: None,
                t_ms: 2.0,
                bytes: b"123 yy".to_vec(),
            },
        ];
        assert_eq!(mask_reads(&mut reads, b"sk-123"), 1);
        assert_eq!(reads[0].bytes, b"xx ***");
        assert_eq!(reads[1].bytes, b"*** yy");
        assert_eq!(reads[1].t_ms, 2.0);
        assert_eq!(mask_str("a \"k\\\"ey\" b", "k\"ey"), "a \"****\" b");
        assert_eq!(mask_str("nothing here", "k"), "nothing here");
    }
}
