//! The `[contract]` checks' evidence (docs/contract.md): under `contract/<check>/` of the run directory, each
//! request as `<label>.request.json` (the body sent), `<label>.response.json` (status, headers, transport
//! error) and `<label>.reads.jsonl` (the raw body as timed reads, every stream chunk as it came), and
//! `check.json` ([`CheckFile`]: one [`ContractRecord`] per request, written once the check's requests are
//! done). A check without `check.json` was not run to its end; the judge fails it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EvidenceError;
use crate::io::reads::{self, TimedRead};

/// The directory of all contract checks in a run directory.
pub const CONTRACT_DIR: &str = "contract";
/// A check's record file within its directory.
pub const CHECK_FILE: &str = "check.json";
/// A check's slice of the serve's log (`contract/<check>/serve.log`): what the serve wrote from just before
/// the check's first request to just after its last was answered (the `cancel` check's cancellation line).
pub const CHECK_LOG: &str = "serve.log";
/// The serve's `/metrics` read just before a check's first request and just after its last (the `cancel`
/// check: an aborted-request counter), when the serve answered it.
pub const CHECK_METRICS_BEFORE: &str = "metrics.before.txt";
/// See [`CHECK_METRICS_BEFORE`].
pub const CHECK_METRICS_AFTER: &str = "metrics.after.txt";
/// Schema of [`CheckFile`].
pub const CHECK_SCHEMA: &str = "servegate.contract-check/1";

/// `contract/<check>`.
pub fn check_dir(check: &str) -> String {
    format!("{CONTRACT_DIR}/{check}")
}

/// `contract/<check>/<label><suffix>` (suffix: `.request.json`, `.response.json`, `.reads.jsonl`).
pub fn exchange_file(check: &str, label: &str, suffix: &str) -> String {
    format!("{CONTRACT_DIR}/{check}/{label}{suffix}")
}

/// One contract request, as `check.json` records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContractRecord {
    /// The request's label within its check (`body`, `stream`, `no_messages`...): its files' stem.
    pub label: String,
    /// Where it was sent (`POST` to `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`; `GET
    /// /v1/models`); absent in older files: the chat endpoint.
    #[serde(default = "chat_path")]
    pub endpoint: String,
    /// Sent with `stream = true`.
    pub stream: bool,
    /// UTC time it was sent (RFC 3339).
    pub sent_utc: String,
    /// HTTP status, when a response head arrived.
    pub http_status: Option<u16>,
    /// Transport failure (connect refused, the check's time limit, a cut body), verbatim.
    pub transport_error: Option<String>,
    /// Bytes of body kept.
    pub body_bytes: u64,
    /// True when the body passed the cap ([`crate::io::exchange::BODY_CAP_BYTES`]) and the rest was dropped.
    pub body_truncated: bool,
    /// The time limit it was sent with, seconds.
    pub timeout_s: f64,
    /// The client dropped the stream (closed the connection) after reading this many token chunks (the
    /// `cancel` check's `dropped` request); absent: read to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_after: Option<usize>,
    /// ms from the send to the moment the client dropped the stream (with `dropped_after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_ms: Option<f64>,
}

fn chat_path() -> String {
    "/v1/chat/completions".into()
}

/// `contract/<check>/check.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckFile {
    /// Always [`CHECK_SCHEMA`].
    pub schema: String,
    /// The check's name.
    pub check: String,
    /// Its requests, in send order.
    pub exchanges: Vec<ContractRecord>,
}

/// One contract request read back: its record, the body sent, and the reads of its response.
#[derive(Debug, Clone)]
pub struct RawExchange {
    /// From `check.json`.
    pub record: ContractRecord,
    /// `<label>.request.json` (Null when absent).
    pub request: serde_json::Value,
    /// `<label>.reads.jsonl` (empty when the request got no response).
    pub reads: Vec<TimedRead>,
}

/// Each check's log slice (`contract/<check>/serve.log`, lossy UTF-8, at most 1 MiB of it) by check name.
pub fn load_logs(dir: &Path) -> BTreeMap<String, String> {
    load_named(dir, CHECK_LOG)
}

/// Each check's `/metrics` before and after (both present), by check name.
pub fn load_metrics(dir: &Path) -> BTreeMap<String, (String, String)> {
    let before = load_named(dir, CHECK_METRICS_BEFORE);
    let mut after = load_named(dir, CHECK_METRICS_AFTER);
    before
        .into_iter()
        .filter_map(|(k, b)| after.remove(&k).map(|a| (k, (b, a))))
        .collect()
}

/// The file `file` of each check's directory (lossy UTF-8, at most 1 MiB), by check name.
fn load_named(dir: &Path, file: &str) -> BTreeMap<String, String> {
    use std::io::Read;
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir.join(CONTRACT_DIR)) else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(f) = crate::io::input::open_regular(&e.path().join(file)) else {
            continue;
        };
        let mut bytes = Vec::new();
        if f.take(1 << 20).read_to_end(&mut bytes).is_ok() {
            out.insert(
                e.file_name().to_string_lossy().into_owned(),
                String::from_utf8_lossy(&bytes).into_owned(),
            );
        }
    }
    out
}

/// Every check's requests under `<dir>/contract/`, by check name (empty without the directory; a check
/// directory without `check.json` is left out). Errors: a `check.json` or reads file that cannot be read.
pub fn load_raw(dir: &Path) -> Result<BTreeMap<String, Vec<RawExchange>>, EvidenceError> {
    let root = dir.join(CONTRACT_DIR);
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(&root) else {
        return Ok(out);
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in names {
        let path = root.join(&name).join(CHECK_FILE);
        let Some(text) = super::read_if_present(&path)? else {
            continue;
        };
        let file: CheckFile =
            serde_json::from_str(&text).map_err(|e| EvidenceError::Malformed {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        let mut exchanges = Vec::new();
        for record in file.exchanges {
            let at = |suffix| dir.join(exchange_file(&name, &record.label, suffix));
            let request = crate::io::input::read(
                &at(crate::evidence::layout::REQUEST_SUFFIX),
                crate::io::input::MAX_EVIDENCE_BYTES,
            )
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null);
            let reads_path = at(crate::evidence::layout::READS_SUFFIX);
            let reads = match super::read_if_present(&reads_path)? {
                Some(t) => reads::decode(&t).map_err(|e| EvidenceError::Malformed {
                    path: reads_path.clone(),
                    reason: e.to_string(),
                })?,
                None => Vec::new(),
            };
            exchanges.push(RawExchange {
                record,
                request,
                reads,
            });
        }
        out.insert(name, exchanges);
    }
    Ok(out)
}
