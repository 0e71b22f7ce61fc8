//! `[pair]` and its assertions `[assert.ratio]` and `[assert.same_answers]`: two runtimes on one model file, run in
//! arms; and a plain gate whose `[assert.regression]` names an interleaved `baseline_serve`, run as a pair too.

use std::collections::BTreeMap;

use toml::Spanned;

use super::{
    interleave, ArmSpec, Assertions, PairMetric, PairSpec, RatioAssert, RawArm, RawPair,
    RegressionBaseline, RequestSpec, Role, SameAnswersAssert, ServeMode, ServeSpec, SpecError,
    Validator,
};

impl Validator<'_> {
    /// `[assert.ratio]` and `[assert.first_token_ratio]` (`key`): bounds > 0, at least one, `at_least` not
    /// above `at_most`.
    pub(super) fn ratio(
        &self,
        metric: PairMetric,
        at_least: &Option<Spanned<f64>>,
        at_most: &Option<Spanned<f64>>,
        key: &str,
    ) -> Result<RatioAssert, SpecError> {
        let at_least = match at_least {
            Some(v) => Some(self.positive(v, &format!("{key}.at_least"), "ratio")?),
            None => None,
        };
        let at_most = match at_most {
            Some(v) => Some(self.positive(v, &format!("{key}.at_most"), "ratio")?),
            None => None,
        };
        if at_least.is_none() && at_most.is_none() {
            return Err(self.err(0..0, key, "needs at_least, at_most or both"));
        }
        if let (Some(lo), Some(hi)) = (at_least, at_most) {
            if lo > hi {
                return Err(self.err(0..0, key, format!("at_least {lo} is above at_most {hi}")));
            }
        }
        Ok(RatioAssert {
            metric,
            at_least,
            at_most,
        })
    }

    /// `[assert.ratio]` and `[assert.first_token_ratio]`, each validated ([`Self::ratio`]); the second is
    /// refused beside a first-token `[assert.ratio]` (the same comparison twice).
    pub(super) fn ratios(
        &self,
        ratio: Option<&super::raw::RawRatio>,
        first_token: Option<&super::raw::RawBounds>,
    ) -> Result<(Option<RatioAssert>, Option<RatioAssert>), SpecError> {
        let ratio = ratio
            .map(|r| self.ratio(r.metric, &r.at_least, &r.at_most, "assert.ratio"))
            .transpose()?;
        let first_token = first_token
            .map(|r| {
                self.ratio(
                    PairMetric::FirstToken,
                    &r.at_least,
                    &r.at_most,
                    "assert.first_token_ratio",
                )
            })
            .transpose()?;
        if first_token.is_some()
            && ratio
                .as_ref()
                .is_some_and(|r| r.metric == PairMetric::FirstToken)
        {
            return Err(self.err(0..0, "assert.first_token_ratio", "[assert.ratio] already compares first_token: give the decode ratio there (metric = \"decode\") or drop one"));
        }
        Ok((ratio, first_token))
    }

    /// `[assert.same_answers]`: `prompt` one of the request's, `top_k` in range.
    pub(super) fn same_answers(
        &self,
        sa: SameAnswersAssert,
        request: &RequestSpec,
    ) -> Result<SameAnswersAssert, SpecError> {
        if let Some(p) = &sa.prompt {
            if !request.prompts.contains(p) {
                return Err(self.err(
                    0..0,
                    "assert.same_answers.prompt",
                    "must be one of [request] prompts, exactly",
                ));
            }
        }
        if let Some(k) = sa.top_k {
            self.top_k(
                &Some(Spanned::new(0..0, k as i64)),
                "assert.same_answers.top_k",
            )?;
        }
        Ok(sa)
    }

    /// The pair of a gate: its `[pair]`, or the pair an interleaved `baseline_serve` makes of a plain gate (then
    /// `serve.mode` is left without a command: the arms hold them), or None.
    pub(super) fn pair(
        &self,
        raw: Option<&RawPair>,
        assertions: &Assertions,
        serve: &mut ServeSpec,
        request: &RequestSpec,
    ) -> Result<Option<PairSpec>, SpecError> {
        match raw {
            None => self.interleaved(assertions, serve, request),
            Some(p) => self.paired(p, assertions, request).map(Some),
        }
    }

    /// A gate without `[pair]`: no pair assertion; an interleaved baseline serve makes it a pair (theirs = the
    /// baseline serve, ours = this gate's serve).
    fn interleaved(
        &self,
        assertions: &Assertions,
        serve: &mut ServeSpec,
        request: &RequestSpec,
    ) -> Result<Option<PairSpec>, SpecError> {
        if assertions.ratio.is_some()
            || assertions.first_token_ratio.is_some()
            || assertions.same_answers.is_some()
        {
            return Err(self.err(
                0..0,
                if assertions.ratio.is_some() {
                    "assert.ratio"
                } else if assertions.first_token_ratio.is_some() {
                    "assert.first_token_ratio"
                } else {
                    "assert.same_answers"
                },
                "[assert.ratio], [assert.first_token_ratio] and [assert.same_answers] need a [pair] gate",
            ));
        }
        Ok(
            match assertions
                .regression
                .as_ref()
                .map(|r| (&r.baseline, r.blocks))
            {
                // An interleaved baseline serve: the gate runs as a pair (theirs = the baseline serve,
                // ours = this gate's serve) in A-B-B-A blocks (spec::interleave).
                Some((RegressionBaseline::Serve(b), blocks)) => {
                    let key = "assert.regression.baseline_serve";
                    if let Some(k) = assertions.kinds().into_iter().find(|k| !k.in_pair_gate()) {
                        return Err(self.err(0..0, &format!("assert.{k}"), "is not judged in a gate with an interleaved baseline_serve (it runs as a pair of two serves): judge it in a gate of its own"));
                    }
                    let ServeMode::Command(argv) = &serve.mode else {
                        return Err(self.err(0..0, key, "needs [serve] command (the runner starts both serves in turn), not url"));
                    };
                    let p = interleave::as_pair(argv, &serve.env, &request.model, b, blocks)
                        .map_err(|e| self.err(0..0, key, e))?;
                    serve.mode = ServeMode::Command(Vec::new());
                    Some(p)
                }
                _ => None,
            },
        )
    }

    /// A `[pair]` gate: only pair assertions, sampling pinned, two arms and their order.
    fn paired(
        &self,
        p: &RawPair,
        assertions: &Assertions,
        request: &RequestSpec,
    ) -> Result<PairSpec, SpecError> {
        if let Some(k) = assertions.kinds().into_iter().find(|k| !k.in_pair_gate()) {
            return Err(self.err(
                0..0,
                &format!("assert.{k}"),
                "is not judged in a pair gate (the arms are two runtimes): use [assert.ratio]",
            ));
        }
        if request.temperature.is_none() || request.top_k.is_none() {
            return Err(self.err(0..0, "request", "a pair gate must pin sampling explicitly: set temperature and top_k (runtimes have different defaults)"));
        }
        let ours = self.arm(Role::Ours.name(), &p.ours, request)?;
        let theirs = self.arm(Role::Theirs.name(), &p.theirs, request)?;
        let order = self.order(p.order.as_ref())?;
        // A regression pairs the arms by A-B-B-A block: whole blocks of four, each with both roles.
        if assertions.regression.is_some()
            && (order.len() % 4 != 0
                || order
                    .chunks(4)
                    .any(|b| !b.iter().any(|x| x == "ours") || !b.iter().any(|x| x == "theirs")))
        {
            return Err(self.err(0..0, "pair.order", format!("[assert.regression] pairs the arms by block: the order must be whole A-B-B-A blocks of four arms (theirs, ours, ours, theirs), got {} arms", order.len())));
        }
        Ok(PairSpec {
            ours,
            theirs,
            order,
        })
    }

    /// One arm (`[pair.ours]`, `[pair.theirs]`): a command that passes its model file, its environment.
    fn arm(&self, role: &str, a: &RawArm, request: &RequestSpec) -> Result<ArmSpec, SpecError> {
        let key = format!("pair.{role}");
        self.argv(
            a.command.get_ref(),
            a.command.span(),
            &format!("{key}.command"),
        )?;
        let command = a
            .command
            .get_ref()
            .iter()
            .map(|x| self.expand(x, a.command.span(), &format!("{key}.command"), true))
            .collect::<Result<Vec<_>, _>>()?;
        let model_file = match &a.model_file {
            Some(m) => self.expand(m.get_ref(), m.span(), &format!("{key}.model_file"), false)?,
            None => request.model.clone(),
        };
        if !command.iter().any(|x| x.contains(&model_file)) {
            return Err(self.err(a.command.span(), &format!("{key}.command"), format!("does not pass its model file {model_file:?} (set {key}.model_file to the file this command loads)")));
        }
        let mut env = BTreeMap::new();
        for (k, v) in &a.env {
            env.insert(
                k.clone(),
                self.expand(v, 0..0, &format!("{key}.env.{k}"), true)?,
            );
        }
        Ok(ArmSpec {
            role: role.into(),
            runtime: if a.runtime.is_empty() {
                role.into()
            } else {
                a.runtime.clone()
            },
            command,
            model_file,
            derived_from: match &a.derived_from {
                Some(d) => Some(self.expand(
                    d.get_ref(),
                    d.span(),
                    &format!("{key}.derived_from"),
                    false,
                )?),
                None => None,
            },
            env,
        })
    }

    /// `[pair] order`: arms named by role, both running; default theirs, ours, ours, theirs.
    fn order(&self, order: Option<&Spanned<Vec<String>>>) -> Result<Vec<String>, SpecError> {
        Ok(match order {
            Some(o) => {
                if let Some(bad) = o.get_ref().iter().find(|x| Role::from_name(x).is_none()) {
                    return Err(self.err(
                        o.span(),
                        "pair.order",
                        format!("arms are \"ours\" or \"theirs\", got {bad:?}"),
                    ));
                }
                if !o.get_ref().iter().any(|x| x == "ours")
                    || !o.get_ref().iter().any(|x| x == "theirs")
                {
                    return Err(self.err(
                        o.span(),
                        "pair.order",
                        "both \"ours\" and \"theirs\" must run",
                    ));
                }
                o.get_ref().clone()
            }
            None => vec![
                "theirs".into(),
                "ours".into(),
                "ours".into(),
                "theirs".into(),
            ],
        })
    }
}
