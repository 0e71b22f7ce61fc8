//! Timed network reads: the raw evidence of one HTTP response body.
//!
//! One [`TimedRead`] is one `read()` of the response body as the client saw it: the milliseconds since the
//! request was sent and the bytes. The on-disk form (`NN.reads.jsonl`) is the format of
//! `tests/data/cases/README.md`: one JSON object per line, `{"t_ms": <ms>, "text": "<utf-8>"}`, or
//! `{"t_ms": <ms>, "hex": "<hex bytes>"}` when the bytes are not valid UTF-8 on their own (a read that starts
//! or ends inside a multi-byte character). This module owns that codec and nothing else.

use serde::{Deserialize, Serialize};

/// One network read of a response body.
#[derive(Debug, Clone, PartialEq)]
pub struct TimedRead {
    /// Arrival time, milliseconds since the request was sent (fractional, monotonic clock): the kernel's
    /// receive time of the last segment the read took (`SO_TIMESTAMPNS`) where the client had it, else when
    /// the read returned.
    pub t_ms: f64,
    /// When the client's read returned, ms since the request was sent (the client's own clock), where the
    /// client recorded it apart from `t_ms` (a kernel-stamped read). `recv_ms − t_ms` is how late the client
    /// took the bytes; the bytes of read *i* arrived after read *i−1* returned and by `t_ms`, so a read
    /// holding several token events that the client took late says only that they all arrived in
    /// `(recv_ms[i−1], t_ms[i]]`. `None` in evidence recorded before stamping (there `t_ms` is the return
    /// time) and in synthetic inputs. On disk: `"recv_ms"` in `NN.reads.jsonl`, omitted when `None`.
    pub recv_ms: Option<f64>,
    /// The bytes of this read, after HTTP de-chunking.
    pub bytes: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadLine {
    t_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recv_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

/// Errors of the `.reads.jsonl` codec: the 1-based line and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ReadsError {
    /// 1-based line number in the `.reads.jsonl` text.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Encodes one read as one JSONL line (without the trailing newline).
pub fn encode_line(read: &TimedRead) -> String {
    let line = match std::str::from_utf8(&read.bytes) {
        Ok(s) => ReadLine {
            t_ms: read.t_ms,
            recv_ms: read.recv_ms,
            text: Some(s.to_string()),
            hex: None,
        },
        Err(_) => ReadLine {
            t_ms: read.t_ms,
            recv_ms: read.recv_ms,
            text: None,
            hex: Some(to_hex(&read.bytes)),
        },
    };
    serde_json::to_string(&line).expect("a ReadLine always serialises")
}

/// Encodes reads as `.reads.jsonl` text (one line per read, each ending in `\n`).
pub fn encode(reads: &[TimedRead]) -> String {
    let mut out = String::new();
    for r in reads {
        out.push_str(&encode_line(r));
        out.push('\n');
    }
    out
}

/// Decodes `.reads.jsonl` text. Blank lines are skipped. Errors name the line.
pub fn decode(text: &str) -> Result<Vec<TimedRead>, ReadsError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let line: ReadLine = serde_json::from_str(raw).map_err(|e| ReadsError {
            line: i + 1,
            reason: e.to_string(),
        })?;
        if !line.t_ms.is_finite() || line.t_ms < 0.0 {
            return Err(ReadsError {
                line: i + 1,
                reason: format!("t_ms must be a finite number >= 0, got {}", line.t_ms),
            });
        }
        let bytes = match (line.text, line.hex) {
            (Some(t), None) => t.into_bytes(),
            (None, Some(h)) => from_hex(&h).map_err(|reason| ReadsError {
                line: i + 1,
                reason,
            })?,
            _ => {
                return Err(ReadsError {
                    line: i + 1,
                    reason: "exactly one of \"text\" or \"hex\" is required".into(),
                })
            }
        };
        if let Some(r) = line.recv_ms {
            if !r.is_finite() || r < 0.0 {
                return Err(ReadsError {
                    line: i + 1,
                    reason: format!("recv_ms must be a finite number >= 0, got {r}"),
                });
            }
        }
        out.push(TimedRead {
            t_ms: line.t_ms,
            recv_ms: line.recv_ms,
            bytes,
        });
    }
    Ok(out)
}

/// All bytes at t = 0 as one read (how a bare `.sse` file is fed to the parser).
pub fn single_read(bytes: Vec<u8>) -> Vec<TimedRead> {
    vec![TimedRead {
        recv_ms: None,
        t_ms: 0.0,
        bytes,
    }]
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err("hex has an odd number of digits".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("not hex: {:?}", &s[i..i + 2]))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_utf8_character_round_trips_through_hex() {
        let e = "é".as_bytes();
        let reads = vec![
            TimedRead {
                recv_ms: None,
                t_ms: 1.5,
                bytes: vec![b'a', e[0]],
            },
            TimedRead {
                recv_ms: None,
                t_ms: 2.0,
                bytes: vec![e[1], b'b'],
            },
        ];
        let text = encode(&reads);
        assert!(text.contains("\"hex\":\"61c3\""), "{text}");
        assert_eq!(decode(&text).unwrap(), reads);
    }

    #[test]
    fn recv_ms_round_trips_and_is_omitted_when_absent() {
        let reads = vec![
            TimedRead {
                t_ms: 1.5,
                recv_ms: Some(151.5),
                bytes: b"a".to_vec(),
            },
            TimedRead {
                t_ms: 2.0,
                recv_ms: None,
                bytes: b"b".to_vec(),
            },
        ];
        let text = encode(&reads);
        assert_eq!(
            text,
            "{\"t_ms\":1.5,\"recv_ms\":151.5,\"text\":\"a\"}\n{\"t_ms\":2.0,\"text\":\"b\"}\n"
        );
        assert_eq!(decode(&text).unwrap(), reads);
        assert!(decode("{\"t_ms\":1,\"recv_ms\":-1,\"text\":\"a\"}")
            .unwrap_err()
            .reason
            .contains("recv_ms"));
    }

    #[test]
    fn bad_line_is_named() {
        let err = decode("{\"t_ms\":1,\"text\":\"a\"}\n{\"t_ms\":2}\n").unwrap_err();
        assert_eq!(err.line, 2);
    }
}
