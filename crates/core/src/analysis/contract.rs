//! The `[contract]` checks' evidence, parsed as judging sees it ([`parse`]; `servegate::loaded::load_contract`
//! reads it): each request's reads as a [`Reply`] (the same parser as the speed trials') and its raw body
//! bytes kept, so a check can read every stream chunk and body as JSON itself (`judge::contract`). Pure.

use std::collections::BTreeMap;

use crate::analysis::reply::{reply_of, Reply};
use crate::evidence::contract::{ContractRecord, RawExchange};
use crate::evidence::RequestRecord;

/// One contract request as judged.
#[derive(Debug, Clone)]
pub struct ContractExchange {
    /// Its record (`check.json`).
    pub record: ContractRecord,
    /// The body sent.
    pub request: serde_json::Value,
    /// The response body, every read concatenated, as it came.
    pub body: Vec<u8>,
    /// The reply parsed from it (SSE for a streamed 2xx, a JSON body otherwise).
    pub reply: Reply,
}

/// Every contract check's requests of a run, by check name; a check the runner did not finish is absent.
#[derive(Debug, Clone, Default)]
pub struct ContractEvidence {
    /// Check name -> its requests in send order.
    pub checks: BTreeMap<String, Vec<ContractExchange>>,
    /// Check name -> the serve's log written while its requests ran (`contract/<check>/serve.log`; only the
    /// checks that keep one: `cancel`).
    pub logs: BTreeMap<String, String>,
    /// Check name -> the serve's `/metrics` before and after its requests (`contract/<check>/metrics.*.txt`;
    /// only `cancel` reads them, when the serve has them).
    pub metrics: BTreeMap<String, (String, String)>,
}

/// Each check's raw exchanges (as `crate::evidence::contract::load_raw` read them) with each reply parsed.
pub fn parse(raw: BTreeMap<String, Vec<RawExchange>>) -> ContractEvidence {
    let checks = raw
        .into_iter()
        .map(|(name, exchanges)| {
            let parsed = exchanges
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    let rec = RequestRecord {
                        index: i,
                        warmup: false,
                        prompt_index: 0,
                        repeat: 0,
                        prompt: String::new(),
                        stream: x.record.stream,
                        sent_utc: x.record.sent_utc.clone(),
                        http_status: x.record.http_status,
                        transport_error: x.record.transport_error.clone(),
                        body_bytes: x.record.body_bytes,
                        body_truncated: x.record.body_truncated,
                        figures: None,
                        notes: Vec::new(),
                    };
                    let reply = reply_of(&rec, &x.reads);
                    let body = x
                        .reads
                        .iter()
                        .flat_map(|r| r.bytes.iter().copied())
                        .collect();
                    ContractExchange {
                        record: x.record,
                        request: x.request,
                        body,
                        reply,
                    }
                })
                .collect();
            (name, parsed)
        })
        .collect();
    ContractEvidence {
        checks,
        logs: BTreeMap::new(),
        metrics: BTreeMap::new(),
    }
}
