//! Keeping the API key (`serve.api_key_env`) out of everything a run writes or prints.
//!
//! servegate itself never writes the key: it goes into one request header marked sensitive. But a serve may
//! echo it (in its log, a response header, the body), and the serve's log is written by the serve itself. So
//! after each run (each arm of a pair), on every exit path that returns, the runner masks every occurrence of
//! the exact key in every file of the run directory and in the run summary, and progress lines are masked as
//! they are printed. A mask keeps the length (`*` for each byte), so the timed reads keep their byte counts
//! and read boundaries; an occurrence split across two network reads is found in the concatenated body.
//!
//! Verdict messages are masked too ([`mask_verdicts`]): a key the serve splits across two SSE events is in no
//! file whole, but the parsed content that `known_answer` quotes joins it again.
//!
//! Known limits: a runner killed (SIGKILL) in the middle of a run masks nothing, so an echoed key can stay in the
//! files written before the kill (the run is marked incomplete); a key split across SSE events stays split (and
//! unmasked) in `NN.reads.jsonl`, and `servegate judge` masks it in its verdicts only when the variable is set.

use std::path::{Path, PathBuf};

use crate::reads::TimedRead;

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

/// Masks `secret` in every file under `dir` (recursively; `.reads.jsonl` files decoded so that a key split
/// across reads or inside a hex read is found), rewriting changed files atomically. Returns each changed file
/// with its count. Unreadable files are skipped.
pub fn scrub_dir(dir: &Path, secret: &str) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if meta.is_dir() {
            out.extend(scrub_dir(&p, secret));
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (new, n) = if name.ends_with(".reads.jsonl") {
            match std::str::from_utf8(&bytes)
                .ok()
                .and_then(|t| crate::reads::decode(t).ok())
            {
                Some(mut reads) => {
                    let n = mask_reads(&mut reads, secret.as_bytes());
                    (crate::reads::encode(&reads).into_bytes(), n)
                }
                None => mask_file_bytes(bytes, secret),
            }
        } else {
            mask_file_bytes(bytes, secret)
        };
        if n > 0 && crate::evidence::write_atomic(&p, &new).is_ok() {
            out.push((p, n));
        }
    }
    out
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
        .filter(|k| !k.is_empty())
}

/// Masks the gate's API key (when set) in verdict messages: a serve may echo the key split across SSE events,
/// where no file holds it whole but the parsed content (quoted by `known_answer`) does.
pub fn mask_verdicts(gate: &crate::spec::GateSpec, verdicts: &mut [crate::judge::Verdict]) {
    if let Some(k) = secret_of(gate) {
        for v in verdicts {
            v.message = mask_str(&v.message, &k);
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
    fn masks_keep_length_and_find_keys_split_across_reads() {
        let mut b = b"Bearer sk-123 and sk-123".to_vec();
        assert_eq!(mask_bytes(&mut b, b"sk-123"), 2);
        assert_eq!(b, b"Bearer ****** and ******");
        let mut reads = vec![
            TimedRead {
                t_ms: 1.0,
                bytes: b"xx sk-".to_vec(),
            },
            TimedRead {
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
