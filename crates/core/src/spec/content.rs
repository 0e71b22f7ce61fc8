//! `[assert.known_answer]`: the known-answer prompt and its regex (`[assert.content]` has no keys to check).

use super::{KnownAnswerAssert, RawKnownAnswer, RequestSpec, SpecError, Validator};

impl Validator<'_> {
    /// `[assert.known_answer]`: `prompt` one of the request's; with `untimed = true` that prompt joins
    /// `request.untimed`.
    pub(super) fn known_answer(
        &self,
        ka: &RawKnownAnswer,
        request: &mut RequestSpec,
    ) -> Result<KnownAnswerAssert, SpecError> {
        let prompt = match &ka.prompt {
            Some(p) => {
                if !request.prompts.contains(p.get_ref()) {
                    return Err(self.err(
                        p.span(),
                        "assert.known_answer.prompt",
                        "must be one of [request] prompts, exactly",
                    ));
                }
                Some(p.get_ref().clone())
            }
            None => None,
        };
        if let Some(u) = ka.untimed.as_ref().filter(|u| *u.get_ref()) {
            let Some(p) = &prompt else {
                return Err(self.err(
                    u.span(),
                    "assert.known_answer.untimed",
                    "needs `prompt`: it marks the known-answer prompt untimed, and without one every prompt is the known-answer prompt",
                ));
            };
            if !request.untimed.contains(p) {
                request.untimed.push(p.clone());
            }
        }
        Ok(KnownAnswerAssert {
            matches: self.regex(&ka.matches, "assert.known_answer.matches")?,
            prompt,
            identical: ka.identical,
        })
    }
}
