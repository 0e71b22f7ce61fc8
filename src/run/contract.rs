//! The `[contract]` checks' requests (docs/contract.md), sent after the speed trials: each check's
//! requests ([`crate::spec::contract::requests`]) in order, each within the check's time limit, each written
//! to `contract/<check>/` as it is answered, then the check's `check.json`. A hang, garbage or a cut stream
//! ends that request at its limit and is the check's evidence; the next check is sent all the same. It
//! judges nothing.

use std::time::Duration;

use crate::error::EvidenceError;
use crate::evidence::contract::{CheckFile, ContractRecord, CHECK_FILE, CHECK_SCHEMA};
use crate::evidence::{self, EvidenceWriter};
use crate::io::client;
use crate::sinks::events::Step;
use crate::spec::GateSpec;

/// Sends every check of the gate's `[contract]` (none without one) to `base_url`, stopping early only at a
/// stop signal.
pub(super) fn send_checks(
    gate: &GateSpec,
    w: &EvidenceWriter,
    sender: &client::Sender,
    base_url: &str,
    progress: &mut dyn FnMut(&Step),
) -> Result<(), EvidenceError> {
    let Some(contract) = &gate.contract else {
        return Ok(());
    };
    let serve_log = w.path(crate::evidence::layout::SERVE_LOG);
    for check in &contract.checks {
        let name = check.check.name();
        let mut exchanges = Vec::new();
        // The cancel check keeps the serve's log written while it ran (its cancellation line).
        let cancel = check.check == crate::vocab::ContractCheck::Cancel;
        let log_start =
            (cancel && serve_log.is_file()).then(|| evidence::log_file_start(&serve_log));
        let metrics_at =
            |file: &str| format!("{}/{file}", crate::evidence::contract::check_dir(name));
        if cancel {
            let dir = w.path(&crate::evidence::contract::check_dir(name));
            std::fs::create_dir_all(&dir).map_err(|e| EvidenceError::io(&dir, e))?;
            super::send::read_metrics(
                sender.http(),
                base_url,
                w,
                &metrics_at(crate::evidence::contract::CHECK_METRICS_BEFORE),
            );
        }
        for req in crate::spec::contract::requests(&gate.request, check) {
            if crate::io::signals::interrupted().is_some() {
                return Ok(());
            }
            let sent_utc = evidence::now_utc();
            let limit = Duration::from_secs_f64(check.timeout_s);
            let (ex, dropped_ms) = match req.drop_after {
                Some(k) => client::send_dropping(
                    sender,
                    base_url,
                    req.endpoint.path(),
                    &req.body,
                    k,
                    limit,
                ),
                None => {
                    let ex = client::send_to(
                        sender,
                        base_url,
                        req.endpoint.path(),
                        (!req.endpoint.is_get()).then_some(&req.body),
                        limit,
                    );
                    (ex, None)
                }
            };
            w.write_contract_exchange(name, req.label, &req.body, &ex.response, &ex.reads)?;
            exchanges.push(ContractRecord {
                label: req.label.to_string(),
                endpoint: req.endpoint.path().to_string(),
                stream: req.stream,
                sent_utc,
                http_status: ex.response.status,
                transport_error: ex.response.transport_error.clone(),
                body_bytes: ex.body_bytes,
                body_truncated: ex.body_truncated,
                timeout_s: check.timeout_s,
                dropped_after: dropped_ms.and(req.drop_after),
                dropped_ms,
            });
        }
        if cancel {
            // A serve's log line or counter can trail its reply by a moment (a log thread, a stats step).
            std::thread::sleep(Duration::from_secs_f64(
                crate::judge::contract::cancel::LOG_WAIT_MS / 1000.0,
            ));
            super::send::read_metrics(
                sender.http(),
                base_url,
                w,
                &metrics_at(crate::evidence::contract::CHECK_METRICS_AFTER),
            );
        }
        if let Some(start) = &log_start {
            let to = w.path(&format!(
                "{}/{}",
                crate::evidence::contract::check_dir(name),
                crate::evidence::contract::CHECK_LOG
            ));
            let _ = evidence::copy_log_since(&serve_log, start, &to, gate.serve.log_cap_bytes);
        }
        let file = CheckFile {
            schema: CHECK_SCHEMA.into(),
            check: name.into(),
            exchanges,
        };
        let json = serde_json::to_vec_pretty(&file).unwrap_or_default();
        w.write(
            &format!(
                "{}/{CHECK_FILE}",
                crate::evidence::contract::check_dir(name)
            ),
            &json,
        )?;
        progress(&Step::Note(format!(
            "contract {name}: {} sent (evidence contract/{name}/)",
            crate::text::counted(file.exchanges.len(), "request")
        )));
    }
    Ok(())
}
