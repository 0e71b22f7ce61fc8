//! `[request]`: what is sent (the model, sampling, the prompts and which of them are timed, the extra body keys
//! the runner does not own) and how often.

use std::ops::Range;

use super::{
    AssertionKind, Assertions, RawRequest, RequestSpec, SpecError, Validator, MAX_REQUESTS,
    RESERVED_EXTRA,
};

impl Validator<'_> {
    /// `[request]`, validated, with the span of `untimed` (checked again once the assertions are known:
    /// [`Validator::timed_prompt_left`]). Defines `{model}` and `{served_model}` for the tables after it.
    pub(super) fn request(
        &mut self,
        r: RawRequest,
    ) -> Result<(RequestSpec, Range<usize>), SpecError> {
        let model = self.expand(&r.model, 0..0, "request.model", false)?;
        if model.trim().is_empty() {
            return Err(self.err(0..0, "request.model", "must not be empty"));
        }
        self.vars.insert("model".into(), model.clone());
        // `{served_model}`: the name the serve is asked to answer to (a matrix entry's `served_model`).
        let served = r.served_model.clone().unwrap_or_else(|| model.clone());
        self.vars.insert("served_model".into(), served);
        let max_tokens = *r.max_tokens.get_ref();
        if max_tokens < 1 || max_tokens > u32::MAX as i64 {
            return Err(self.err(
                r.max_tokens.span(),
                "request.max_tokens",
                format!("must be between 1 and {}, got {max_tokens}", u32::MAX),
            ));
        }
        if let Some(t) = r.temperature {
            if !t.is_finite() || t < 0.0 {
                return Err(self.err(
                    0..0,
                    "request.temperature",
                    format!("must be a finite number >= 0, got {t}"),
                ));
            }
        }
        if let Some(p) = r.top_p {
            if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
                return Err(self.err(
                    0..0,
                    "request.top_p",
                    format!("must be a number from 0 to 1 (nucleus sampling's probability mass), got {p}"),
                ));
            }
        }
        if *r.repeats.get_ref() < 1 {
            return Err(self.err(r.repeats.span(), "request.repeats", "must be >= 1"));
        }
        let n_prompts = r.prompts.get_ref().len() as u64;
        let warmup_requests = match &r.warmup_requests {
            Some(w) if r.warmup > 0 => {
                return Err(self.err(w.span(), "request.warmup_requests", "give `warmup` (rounds of every prompt) or `warmup_requests` (a count of requests), not both"));
            }
            Some(w) => self.count(w, "request.warmup_requests", 0, MAX_REQUESTS as i64)?,
            None => (u64::from(r.warmup) * n_prompts).min(MAX_REQUESTS + 1) as u32,
        };
        let total = u64::from(*r.repeats.get_ref()) * n_prompts + u64::from(warmup_requests);
        if total > MAX_REQUESTS {
            return Err(self.err(r.repeats.span(), "request.repeats", format!("the warmup requests and repeats x prompts must be at most {MAX_REQUESTS} requests, got {warmup_requests} + {} x {n_prompts}", r.repeats.get_ref())));
        }
        let timeout_s = self.seconds(&r.timeout_s, "request.timeout_s")?;
        let run_timeout_s = self.seconds(&r.run_timeout_s, "request.run_timeout_s")?;
        if r.prompts.get_ref().is_empty() {
            return Err(self.err(
                r.prompts.span(),
                "request.prompts",
                "a gate needs at least one prompt",
            ));
        }
        if r.prompts.get_ref().iter().any(|p| p.trim().is_empty()) {
            return Err(self.err(r.prompts.span(), "request.prompts", "a prompt is empty"));
        }
        let extra = match serde_json::to_value(&r.extra) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return Err(self.err(0..0, "request.extra", "must be a table")),
        };
        for reserved in RESERVED_EXTRA {
            if extra.contains_key(reserved) {
                return Err(self.err(
                    0..0,
                    &format!("request.extra.{reserved}"),
                    format!("`{reserved}` is set from the gate's [request] (or by the runner); an `extra` value would silently override it"),
                ));
            }
        }
        let mut untimed = Vec::new();
        let untimed_span = r.untimed.as_ref().map(|u| u.span()).unwrap_or(0..0);
        if let Some(u) = &r.untimed {
            for p in u.get_ref() {
                if !r.prompts.get_ref().contains(p) {
                    return Err(self.err(
                        u.span(),
                        "request.untimed",
                        format!(
                            "{p:?} is not one of [request] prompts (each must be one, exactly)"
                        ),
                    ));
                }
                if !untimed.contains(p) {
                    untimed.push(p.clone());
                }
            }
        }
        let request = RequestSpec {
            served_model: r.served_model.clone().unwrap_or_else(|| model.clone()),
            model,
            max_tokens: max_tokens as u32,
            temperature: r.temperature,
            top_k: r.top_k,
            top_p: r.top_p,
            stream: r.stream,
            warmup: r.warmup,
            warmup_requests,
            repeats: *r.repeats.get_ref(),
            timeout_s,
            run_timeout_s,
            system: r.system.clone(),
            extra,
            prompts: r.prompts.get_ref().clone(),
            untimed,
        };
        Ok((request, untimed_span))
    }

    /// At least one prompt stays timed when an assertion times replies.
    pub(super) fn timed_prompt_left(
        &self,
        request: &RequestSpec,
        assertions: &Assertions,
        untimed_span: Range<usize>,
    ) -> Result<(), SpecError> {
        if !request.untimed.is_empty() && request.prompts.iter().all(|p| !request.timed(p)) {
            let timed_kinds: Vec<String> = assertions
                .kinds()
                .into_iter()
                .filter(|k| {
                    (k.metric().is_some() && !k.footprint())
                        || matches!(
                            k,
                            AssertionKind::Regression
                                | AssertionKind::Ratio
                                | AssertionKind::FirstTokenRatio
                        )
                })
                .map(|k| k.to_string())
                .collect();
            if !timed_kinds.is_empty() {
                return Err(self.err(
                    untimed_span,
                    "request.untimed",
                    format!(
                        "every prompt is untimed, but [assert.{}] times replies",
                        timed_kinds.join("], [assert.")
                    ),
                ));
            }
        }
        Ok(())
    }
}
