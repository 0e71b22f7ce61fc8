//! `[assert.route]`: regexes on the serve log telling the fast route from the slow one (one or several, all
//! of which must appear), and a response header naming each reply's route (a gateway's chosen deployment).

use super::{RawRoute, RouteAssert, RouteHeader, ServeMode, ServeSpec, SpecError, Validator};

/// True when `name` is an HTTP header name (RFC 9110 `token`: visible ASCII but separators).
fn header_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl Validator<'_> {
    /// `[assert.route]`: a log to read (a `url` serve needs `serve.log_file`) when it names log lines, a header
    /// and its regex together, and regexes that mean something.
    pub(super) fn route(
        &self,
        route: &RawRoute,
        serve: &ServeSpec,
    ) -> Result<RouteAssert, SpecError> {
        let header = match (&route.header, &route.header_fast) {
            (Some(name), Some(re)) => {
                if !header_name_ok(name.get_ref()) {
                    return Err(self.err(
                        name.span(),
                        "assert.route.header",
                        format!("{:?} is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)", name.get_ref()),
                    ));
                }
                Some(RouteHeader {
                    name: name.get_ref().to_ascii_lowercase(),
                    fast: self.regex(re, "assert.route.header_fast")?,
                })
            }
            (Some(name), None) => {
                return Err(self.err(name.span(), "assert.route.header", "`header` needs `header_fast`, the regex its value must match on every judged reply"));
            }
            (None, Some(re)) => {
                return Err(self.err(
                    re.span(),
                    "assert.route.header_fast",
                    "`header_fast` needs `header`, the response header it is matched on",
                ));
            }
            (None, None) => None,
        };
        let fast = match &route.fast {
            Some(f) => {
                let list = f.get_ref().to_vec();
                if list.is_empty() {
                    return Err(self.err(f.span(), "assert.route.fast", "an empty list names no route line: give at least one regex (or drop `fast` and use `header`)"));
                }
                let mut out = Vec::with_capacity(list.len());
                for (i, text) in list.iter().enumerate() {
                    let key = if list.len() == 1 {
                        "assert.route.fast".to_string()
                    } else {
                        format!("assert.route.fast[{i}]")
                    };
                    out.push(self.regex_at(f.span(), text, &key)?);
                }
                out
            }
            None => Vec::new(),
        };
        if fast.is_empty() {
            if let Some(s) = &route.slow {
                return Err(self.err(
                    s.span(),
                    "assert.route.slow",
                    "`slow` needs `fast`: a log that only lacks the slow line proves no route",
                ));
            }
            if header.is_none() {
                return Err(self.err(0..0, "assert.route", "[assert.route] names no route: set `fast` (serve-log regexes, all must appear) or `header` with `header_fast` (a response header matched on every reply)"));
            }
        }
        if !fast.is_empty() && matches!(serve.mode, ServeMode::Url(_)) && serve.log_file.is_none() {
            let span = route.fast.as_ref().map(|f| f.span()).unwrap_or(0..0);
            return Err(self.err(span, "assert.route", "a `url` serve has no log of its own in the evidence: set serve.log_file to the serve's log (or drop [assert.route] fast and use its `header`)"));
        }
        Ok(RouteAssert {
            fast,
            slow: match &route.slow {
                Some(s) => Some(self.regex(s, "assert.route.slow")?),
                None => None,
            },
            header,
        })
    }
}
