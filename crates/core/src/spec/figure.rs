//! The figure assertions of a plain gate: `[assert.rate]` (a decode-rate floor, from the client's clock, the
//! serve's or both), `[assert.first_token]` and `[assert.tpot]` (limits), and the streamed replies they need;
//! the serve's footprint: `[assert.ready]`, `[assert.memory]`, `[assert.cpu]` (limits, one value per run).

use super::{
    Assertions, CpuAssert, FirstTokenAssert, MemoryAssert, Metric, RateAssert, RateSource, RawCpu,
    RawFirstToken, RawMemory, RawRate, RawReady, RawTpot, ReadyAssert, RequestSpec, SpecError,
    TpotAssert, Validator, DEFAULT_AGREE_PCT,
};

impl Validator<'_> {
    /// `[assert.rate]`: a floor > 0; `agree_pct` only with `source = "both"`, `server_log` only with the serve's
    /// figure (a regex with a `tok_s` group).
    pub(super) fn rate(&self, rate: &RawRate) -> Result<RateAssert, SpecError> {
        Ok(RateAssert {
            floor_tok_s: self.positive(
                &rate.floor_tok_s,
                "assert.rate.floor_tok_s",
                Metric::DecodeRate.info().unit.name(),
            )?,
            source: rate.source,
            agree_pct: match &rate.agree_pct {
                None => DEFAULT_AGREE_PCT,
                Some(p) if rate.source != RateSource::Both => {
                    return Err(self.err(
                        p.span(),
                        "assert.rate.agree_pct",
                        "agree_pct applies only with source = \"both\" (the client and the serve's figure compared)",
                    ))
                }
                Some(p) => self.positive(p, "assert.rate.agree_pct", "%")?,
            },
            server_log: match &rate.server_log {
                None => None,
                Some(_) if rate.source == RateSource::Client => {
                    let p = rate.server_log.as_ref().expect("some");
                    return Err(self.err(
                        p.span(),
                        "assert.rate.server_log",
                        "server_log applies only with source = \"server\" or \"both\" (it is the serve's figure)",
                    ));
                }
                Some(p) => {
                    let re = self.regex(p, "assert.rate.server_log")?;
                    if !re.capture_names().flatten().any(|n| n == "tok_s") {
                        return Err(self.err(
                            p.span(),
                            "assert.rate.server_log",
                            "the regex needs a named group `(?P<tok_s>...)` holding the decode rate in tok/s",
                        ));
                    }
                    Some(re)
                }
            },
        })
    }

    /// `[assert.first_token]`: a limit > 0, ms.
    pub(super) fn first_token(&self, ft: &RawFirstToken) -> Result<FirstTokenAssert, SpecError> {
        Ok(FirstTokenAssert {
            limit_ms: self.positive(
                &ft.limit_ms,
                "assert.first_token.limit_ms",
                Metric::Ttft.info().unit.name(),
            )?,
        })
    }

    /// `[assert.tpot]`: a limit > 0, ms.
    pub(super) fn tpot(&self, t: &RawTpot) -> Result<TpotAssert, SpecError> {
        Ok(TpotAssert {
            limit_ms: self.positive(
                &t.limit_ms,
                "assert.tpot.limit_ms",
                Metric::Tpot.info().unit.name(),
            )?,
        })
    }

    /// `[assert.ready]`: a limit > 0, ms.
    pub(super) fn ready(&self, r: &RawReady) -> Result<ReadyAssert, SpecError> {
        let load_log = match &r.load_log {
            None => None,
            Some(p) => {
                let re = self.regex(p, "assert.ready.load_log")?;
                let mut names = re.capture_names().flatten();
                if !names.any(|n| n == "ms" || n == "s") {
                    return Err(self.err(
                        p.span(),
                        "assert.ready.load_log",
                        "the regex needs a named group `(?P<ms>...)` (milliseconds) or `(?P<s>...)` (seconds) holding the model-load time the serve logs",
                    ));
                }
                Some(re)
            }
        };
        Ok(ReadyAssert {
            limit_ms: self.positive(
                &r.limit_ms,
                "assert.ready.limit_ms",
                Metric::ReadyMs.info().unit.name(),
            )?,
            load_log,
        })
    }

    /// `[assert.memory]`: a limit > 0, MiB.
    pub(super) fn memory(&self, m: &RawMemory) -> Result<MemoryAssert, SpecError> {
        Ok(MemoryAssert {
            limit_mib: self.positive(
                &m.limit_mib,
                "assert.memory.limit_mib",
                Metric::ServeRssPeak.info().unit.name(),
            )?,
        })
    }

    /// `[assert.cpu]`: a limit > 0, ms per token.
    pub(super) fn cpu(&self, c: &RawCpu) -> Result<CpuAssert, SpecError> {
        Ok(CpuAssert {
            limit_ms_per_token: self.positive(
                &c.limit_ms_per_token,
                "assert.cpu.limit_ms_per_token",
                Metric::ServeCpuPerToken.info().unit.name(),
            )?,
        })
    }

    /// The assertions declared so far that read token arrival times need `[request] stream`.
    pub(super) fn streamed(
        &self,
        request: &RequestSpec,
        assertions: &Assertions,
    ) -> Result<(), SpecError> {
        if !request.stream {
            if let Some(k) = assertions.kinds().into_iter().find(|k| k.needs_stream()) {
                return Err(self.err(0..0, "request.stream", format!("is false, but [assert.{k}] needs a streamed reply: a whole body has no token arrival times")));
            }
        }
        Ok(())
    }
}
