//! `[load] driver`: who sends a load gate's requests. `"servegate"` (the default): servegate's own load
//! client. `"locust"`: Locust's distributed mode, a master and `locust_workers` workers on this host (plus
//! `locust_remote_workers` that join from other hosts) running servegate's locustfile, whose per-request
//! records are merged into the same evidence and judged by the same assertions (docs/load.md, "Drivers").
//! `"vllm-bench"`: vLLM's installed `vllm bench serve`, run with the gate's schedule, its
//! `--save-result --save-detailed` JSON imported as the point's evidence (the same reader as `servegate
//! import --from vllm-bench`); `"aiperf"` and `"guidellm"` likewise with AIPerf and GuideLLM.

use toml::Spanned;

use crate::error::SpecError;

/// Who sends a load gate's requests.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Driver {
    /// servegate's own load client (kernel receive timestamps, one thread).
    #[default]
    Servegate,
    /// Locust's distributed mode with servegate's locustfile.
    Locust(LocustSpec),
    /// vLLM's `vllm bench serve` (the provisioned vLLM runtime), its per-request JSON imported.
    VllmBench,
    /// AIPerf's `aiperf profile` (`scripts/provision-aiperf.sh`), its `profile_export.jsonl` imported.
    AiPerf,
    /// GuideLLM's `guidellm run` (`scripts/provision-guidellm.sh`), its benchmarks report imported.
    GuideLlm,
}

impl Driver {
    /// The wire name: `servegate`, `locust`, `vllm-bench`, `aiperf` or `guidellm`.
    pub fn name(&self) -> &'static str {
        match self {
            Driver::Servegate => "servegate",
            Driver::Locust(_) => "locust",
            Driver::VllmBench => "vllm-bench",
            Driver::AiPerf => "aiperf",
            Driver::GuideLlm => "guidellm",
        }
    }

    /// True for a driver that is another load tool run whole per point and imported
    /// (`vllm-bench`, `aiperf`, `guidellm`): its schedule is the tool's own, so keys it cannot honour are
    /// refused.
    pub fn is_tool(&self) -> bool {
        matches!(self, Driver::VllmBench | Driver::AiPerf | Driver::GuideLlm)
    }

    /// The runtime a tool driver implies in `[requires] provisioned` (`vllm`: vLLM's bench comes with
    /// the vLLM runtime; `aiperf`; `guidellm`; `locust`), or None for servegate's own client.
    pub fn provisioned(&self) -> Option<&'static str> {
        match self {
            Driver::Servegate => None,
            Driver::Locust(_) => Some("locust"),
            Driver::VllmBench => Some("vllm"),
            Driver::AiPerf => Some("aiperf"),
            Driver::GuideLlm => Some("guidellm"),
        }
    }
}

/// `[load] driver = "locust"` and its keys.
#[derive(Debug, Clone, PartialEq)]
pub struct LocustSpec {
    /// Workers servegate starts on this host (`locust_workers`, default 1, 0..=[`MAX_LOCUST_WORKERS`]; with
    /// the remote ones at least 1).
    pub workers: u32,
    /// Workers the master waits for from other hosts (`locust_remote_workers`, default 0): started by hand
    /// with `locust -f servegate_locustfile.py --worker --master-host H --master-port P`.
    pub remote_workers: u32,
    /// `host:port` the master binds (`locust_master_bind`); None: 127.0.0.1 on a free port. Remote workers
    /// need an address they can reach (`0.0.0.0:5557`).
    pub master_bind: Option<String>,
}

/// Most workers of one Locust run (local or remote).
pub const MAX_LOCUST_WORKERS: i64 = 256;

/// The raw `[load]` keys of the driver.
#[derive(Debug, Clone, Default)]
pub(super) struct RawDriver<'a> {
    pub driver: Option<&'a Spanned<String>>,
    pub workers: Option<&'a Spanned<i64>>,
    pub remote_workers: Option<&'a Spanned<i64>>,
    pub master_bind: Option<&'a Spanned<String>>,
    pub open_loop: Option<std::ops::Range<usize>>,
    /// The span of `duration_s`, when set.
    pub duration: Option<std::ops::Range<usize>>,
    /// The span of `arrival`, when it is `"constant"`.
    pub constant: Option<std::ops::Range<usize>>,
    /// The span of `client_cpus`, when set.
    pub client_cpus: Option<std::ops::Range<usize>>,
}

impl super::Validator<'_> {
    /// Validates the driver keys of `[load]`. Refused: an unknown driver; a `locust_*` key without
    /// `driver = "locust"`; an open loop (`rate_rps`) with Locust; with `vllm-bench`, what the tool cannot
    /// run ([`Self::tool_driver`]).
    pub(super) fn load_driver(&self, raw: RawDriver<'_>) -> Result<Driver, SpecError> {
        let name = raw
            .driver
            .map(|d| d.get_ref().as_str())
            .unwrap_or("servegate");
        match name {
            "servegate" | "vllm-bench" | "aiperf" | "guidellm" => {
                let stray = [
                    raw.workers.map(|w| (w.span(), "load.locust_workers")),
                    raw.remote_workers
                        .map(|w| (w.span(), "load.locust_remote_workers")),
                    raw.master_bind
                        .map(|w| (w.span(), "load.locust_master_bind")),
                ];
                if let Some((span, key)) = stray.into_iter().flatten().next() {
                    return Err(self.err(span, key, "is a key of `driver = \"locust\"`"));
                }
                if name != "servegate" {
                    return self.tool_driver(name, &raw, "driver");
                }
                Ok(Driver::Servegate)
            }
            "locust" => {
                if let Some(span) = raw.open_loop {
                    return Err(self.err(span, "load.rate_rps", "an open loop cannot be driven by Locust: its users are closed loops (a user sends when its previous request ended, and `constant_throughput` paces each user after its own replies), so an arrival process independent of the replies, and the send lag measured against it, would not be the gate's schedule; use `concurrency` with Locust, or servegate's own client (no `driver`) for `rate_rps`"));
                }
                let workers = match raw.workers {
                    None => 1,
                    Some(w) => self.count(w, "load.locust_workers", 0, MAX_LOCUST_WORKERS)?,
                };
                let remote_workers = match raw.remote_workers {
                    None => 0,
                    Some(w) => {
                        self.count(w, "load.locust_remote_workers", 0, MAX_LOCUST_WORKERS)?
                    }
                };
                if workers + remote_workers == 0 {
                    let span = raw.workers.map(|w| w.span()).unwrap_or(0..0);
                    return Err(self.err(span, "load.locust_workers", "Locust needs at least one worker: `locust_workers` (on this host) plus `locust_remote_workers` is 0"));
                }
                let master_bind = match raw.master_bind {
                    None => None,
                    Some(b) => {
                        let s = b.get_ref();
                        let ok = s.rsplit_once(':').is_some_and(|(h, p)| {
                            !h.is_empty()
                                && p.parse::<u16>().is_ok_and(|p| p > 0)
                                && !h.chars().any(|c| c.is_whitespace() || c.is_control())
                        });
                        if !ok {
                            return Err(self.err(b.span(), "load.locust_master_bind", format!("must be host:port (port 1-65535), e.g. \"0.0.0.0:5557\", got {s:?}")));
                        }
                        Some(s.clone())
                    }
                };
                Ok(Driver::Locust(LocustSpec {
                    workers,
                    remote_workers,
                    master_bind,
                }))
            }
            other => Err(self.err(
                raw.driver.map(|d| d.span()).unwrap_or(0..0),
                "load.driver",
                format!("must be \"servegate\", \"locust\", \"vllm-bench\", \"aiperf\" or \"guidellm\", got {other:?}"),
            )),
        }
    }

    /// `driver = "vllm-bench"`, `"aiperf"` or `"guidellm"` (`name`): refused where servegate cannot run
    /// the gate's schedule through the tool: a `duration_s` (servegate runs the tool with a request count:
    /// vLLM's `--num-prompts`, AIPerf's `--request-count`, GuideLLM's `max_requests` constraint),
    /// `arrival = "constant"` with vLLM's bench (its open loop is a gamma process, Poisson at burstiness 1;
    /// AIPerf and GuideLLM have a constant mode), `client_cpus` (the tool sends, not servegate's client).
    /// `key`: the key that names the tool (`driver`, or `parity` for a second run beside servegate's
    /// client), as the refusals quote it.
    pub(super) fn tool_driver(
        &self,
        name: &str,
        raw: &RawDriver<'_>,
        key: &str,
    ) -> Result<Driver, SpecError> {
        let (tool, driver) = match name {
            "aiperf" => ("AIPerf", Driver::AiPerf),
            "guidellm" => ("GuideLLM", Driver::GuideLlm),
            _ => ("vllm bench serve", Driver::VllmBench),
        };
        if let Some(span) = raw.duration.clone() {
            return Err(self.err(span, "load.duration_s", format!("servegate runs {tool} with a number of requests, not a duration: give `requests = N` with {key} = {name:?}")));
        }
        if let (Some(span), "vllm-bench") = (raw.constant.clone(), name) {
            return Err(self.err(span, "load.arrival", format!("vllm bench serve's open loop draws gaps from a gamma process (`--burstiness`, 1 = Poisson) and has no constant gaps: use `arrival = \"poisson\"` with {key} = \"vllm-bench\", or servegate's own client")));
        }
        // With `parity` servegate's client runs too, and may be spread over CPUs.
        if let (Some(span), "driver") = (raw.client_cpus.clone(), key) {
            return Err(self.err(
                span,
                "load.client_cpus",
                format!(
                    "spreads servegate's own client over CPUs; with {key} = {name:?} {tool} sends"
                ),
            ));
        }
        Ok(driver)
    }
}
