//! `[assert.route]`: regexes on the serve log telling the fast route from the slow one.

use super::{RawRoute, RouteAssert, ServeMode, ServeSpec, SpecError, Validator};

impl Validator<'_> {
    /// `[assert.route]`: a log to read (a `url` serve needs `serve.log_file`) and regexes that mean something.
    pub(super) fn route(
        &self,
        route: &RawRoute,
        serve: &ServeSpec,
    ) -> Result<RouteAssert, SpecError> {
        if matches!(serve.mode, ServeMode::Url(_)) && serve.log_file.is_none() {
            return Err(self.err(route.fast.span(), "assert.route", "a `url` serve has no log of its own in the evidence: set serve.log_file to the serve's log (or drop [assert.route])"));
        }
        Ok(RouteAssert {
            fast: self.regex(&route.fast, "assert.route.fast")?,
            slow: match &route.slow {
                Some(s) => Some(self.regex(s, "assert.route.slow")?),
                None => None,
            },
        })
    }
}
