//! `[serve]` and `[hold]`: how the serve is started or reached (command or url, setup, host, readiness, engine
//! profile and clock, environment, log capture) and how the device is held for the whole run.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{
    default_ready, profile, valid_host, valid_url_authority, HoldSpec, RawHold, RawServe,
    RequestSpec, ServeMode, ServeSpec, SpecError, Validator,
};

/// The `[serve] engine` of a raw gate and its profile, or a file:line:key error (spec/profile/).
/// `"auto"` is the same as no engine: detected after readiness (spec/detect.rs).
fn engine_of(raw: Option<&str>) -> Result<Option<profile::Engine>, String> {
    raw.filter(|e| *e != "auto")
        .map(profile::Engine::parse)
        .transpose()
}

impl Validator<'_> {
    /// `[serve]`, validated (`paired`: the gate has a `[pair]`, whose arms hold the commands). The engine
    /// profile's greedy fields go into `request.extra` where the gate sets no such key; `hold` is read for the
    /// one setting a `url` serve cannot have.
    pub(super) fn serve(
        &self,
        s: RawServe,
        request: &mut RequestSpec,
        paired: bool,
        hold: Option<&RawHold>,
    ) -> Result<ServeSpec, SpecError> {
        if paired && (s.command.is_some() || s.url.is_some()) {
            return Err(self.err(0..0, "serve", "a pair gate's commands go in [pair.ours] and [pair.theirs]; [serve] holds only shared settings (no command or url)"));
        }
        let mode = self.serve_mode(&s, paired)?;
        let setup = s
            .setup
            .iter()
            .map(|a| self.expand(a, 0..0, "serve.setup", false))
            .collect::<Result<Vec<_>, _>>()?;
        if !setup.is_empty() {
            self.argv(&setup, 0..0, "serve.setup")?;
        }
        if !valid_host(&s.host) {
            return Err(self.err(
                0..0,
                "serve.host",
                format!("is not an IP address or a host name, got {:?}", s.host),
            ));
        }
        let engine =
            engine_of(s.engine.as_deref()).map_err(|e| self.err(0..0, "serve.engine", e))?;
        let prof = engine.map(profile::Engine::profile);
        let ready = s
            .ready
            .clone()
            .or_else(|| prof.as_ref().map(|p| p.ready_path.to_string()))
            .unwrap_or_else(default_ready);
        if !ready.starts_with('/') {
            return Err(self.err(
                0..0,
                "serve.ready",
                format!("must be a path starting with `/`, got {ready:?}"),
            ));
        }
        let clock = match &s.clock {
            Some(c) => {
                profile::ServeClock::parse(c).map_err(|e| self.err(0..0, "serve.clock", e))?
            }
            None => prof
                .as_ref()
                .map_or(profile::ServeClock::Timings, |p| p.clock),
        };
        // Greedy parity: the profile's fields, unless the gate's [request.extra] sets the same key.
        if let (Some(p), Some(t)) = (&prof, request.temperature) {
            if t == 0.0 {
                for (k, v) in p.greedy_fields {
                    request
                        .extra
                        .entry(k.to_string())
                        .or_insert_with(|| serde_json::json!(v));
                }
            }
        }
        let mut env = BTreeMap::new();
        for (k, v) in &s.env {
            // The operating system takes no NUL in an environment variable: refused here, not at the spawn.
            if k.contains('\0') {
                return Err(self.err(
                    0..0,
                    "serve.env",
                    format!("the name {k:?} holds a NUL byte: an environment variable's cannot"),
                ));
            }
            let value = self.expand(v, 0..0, &format!("serve.env.{k}"), true)?;
            if value.contains('\0') {
                return Err(self.err(
                    0..0,
                    "serve.env",
                    format!("{k:?}: the value holds a NUL byte: an environment variable's cannot"),
                ));
            }
            env.insert(k.clone(), value);
        }
        if matches!(mode, ServeMode::Url(_)) {
            self.url_serve_has_no_start_settings(hold)?;
        }
        let serve = ServeSpec {
            mode,
            setup,
            host: s.host.clone(),
            port: s.port,
            ready_path: ready,
            engine,
            clock,
            clock_set: s.clock.is_some(),
            ready_timeout_s: self.seconds(&s.ready_timeout_s, "serve.ready_timeout_s")?,
            // The default's span is empty (raw.rs `default_ready_timeout_s`); a written key has one.
            ready_timeout_set: !s.ready_timeout_s.span().is_empty(),
            stop_grace_s: self.seconds(&s.stop_grace_s, "serve.stop_grace_s")?,
            log_cap_bytes: self.log_cap_bytes(&s.log_cap_bytes)?,
            env,
            expect_model: s.expect_model.clone(),
            log_file: match &s.log_file {
                Some(f) => Some(PathBuf::from(self.expand(
                    f,
                    0..0,
                    "serve.log_file",
                    false,
                )?)),
                None => None,
            },
            pid_file: match &s.pid_file {
                Some(f) => Some(PathBuf::from(self.expand(
                    f,
                    0..0,
                    "serve.pid_file",
                    false,
                )?)),
                None => None,
            },
            api_key_env: s.api_key_env.clone(),
        };
        if let Some(f) = &serve.pid_file {
            if f.as_os_str().is_empty() {
                return Err(self.err(0..0, "serve.pid_file", "must not be empty"));
            }
            if matches!(serve.mode, ServeMode::Command(_)) {
                return Err(self.err(0..0, "serve.pid_file", "is for `url` serves only: the footprint of a serve the runner starts is its own process group's"));
            }
        }
        if let Some(f) = &serve.log_file {
            if f.as_os_str().is_empty() {
                return Err(self.err(0..0, "serve.log_file", "must not be empty"));
            }
            if matches!(serve.mode, ServeMode::Command(_)) {
                return Err(self.err(0..0, "serve.log_file", "is for `url` serves only: a serve the runner starts has its stdout and stderr recorded as serve.log"));
            }
        }
        if let Some(k) = &serve.api_key_env {
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(self.err(0..0, "serve.api_key_env", format!("must name an environment variable (A-Z 0-9 _), got {k:?}; never put the key itself in a gate")));
            }
        }
        Ok(serve)
    }

    /// The serve's `command` (started by the runner) or `url` (already running): one of them, or neither in a
    /// pair gate.
    fn serve_mode(&self, s: &RawServe, paired: bool) -> Result<ServeMode, SpecError> {
        Ok(match (&s.command, &s.url) {
            (Some(c), None) => {
                self.argv(c.get_ref(), c.span(), "serve.command")?;
                let argv = c
                    .get_ref()
                    .iter()
                    .map(|a| self.expand(a, c.span(), "serve.command", true))
                    .collect::<Result<Vec<_>, _>>()?;
                ServeMode::Command(argv)
            }
            (None, Some(u)) => {
                let url = self.expand(u.get_ref(), u.span(), "serve.url", false)?;
                let url = url.trim_end_matches('/').to_string();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(self.err(u.span(), "serve.url", format!("must start with http:// or https://, got {url:?}")));
                }
                if url_userinfo(&url) {
                    // Never echoed: the message, the source line and every report it reaches (JUnit, JSON).
                    let mut e = self.err(u.span(), "serve.url", "carries credentials (`user:password@`): servegate sends none that way, and would print them; give the key with `api_key_env` (an environment variable's name; docs/gate-format.md)");
                    if let SpecError::At { snippet, .. } = &mut e {
                        *snippet = redact_userinfo(snippet);
                    }
                    return Err(e);
                }
                if !valid_url_authority(&url) {
                    return Err(self.err(u.span(), "serve.url", format!("needs a valid host (an IP address or a host name) and an optional numeric port, got {url:?}")));
                }
                ServeMode::Url(url)
            }
            (Some(c), Some(_)) => {
                return Err(self.err(c.span(), "serve", "give either `command` (the runner starts the serve) or `url` (already running), not both"))
            }
            (None, None) if paired => ServeMode::Command(Vec::new()),
            (None, None) => return Err(self.err(0..0, "serve", "needs `command` (the runner starts the serve) or `url` (already running)")),
        })
    }

    /// Settings of a serve the runner starts: on a serve already running they would be ignored.
    fn url_serve_has_no_start_settings(&self, hold: Option<&RawHold>) -> Result<(), SpecError> {
        // Settings of a serve the runner starts: on a serve already running they would be ignored.
        for (key, why) in [
            ("serve.port", "the port is the url's"),
            ("serve.host", "the host is the url's"),
            (
                "serve.stop_grace_s",
                "the runner never stops a serve it did not start",
            ),
        ] {
            if self.written(key) {
                return Err(self.err(
                    0..0,
                    key,
                    format!("is for a serve the runner starts (`command`); a `url` serve is already running and {why}: drop it"),
                ));
            }
        }
        if let Some(c) = hold.and_then(|h| h.command.as_ref()) {
            return Err(self.err(
                c.span(),
                "hold.command",
                "wraps the serve the runner starts (`command`); a `url` serve is already running, so the wrapper would never run: hold the device with `lock` or `ticket`, or start the serve with `command`",
            ));
        }
        Ok(())
    }

    /// `[hold]`: a lock file, a hold wrapper and/or a ticket file, at least one.
    pub(super) fn hold(&self, h: &RawHold) -> Result<HoldSpec, SpecError> {
        let lock = match &h.lock {
            Some(l) if l.trim().is_empty() => {
                return Err(self.err(0..0, "hold.lock", "must name a lock file"))
            }
            Some(l) => Some(PathBuf::from(self.expand(l, 0..0, "hold.lock", false)?)),
            None => None,
        };
        let command = match &h.command {
            Some(c) => {
                self.argv(c.get_ref(), c.span(), "hold.command")?;
                c.get_ref()
                    .iter()
                    .map(|a| self.expand(a, c.span(), "hold.command", false))
                    .collect::<Result<Vec<_>, _>>()?
            }
            None => Vec::new(),
        };
        let ticket = match &h.ticket {
            Some(t) if t.get_ref().trim().is_empty() => {
                return Err(self.err(t.span(), "hold.ticket", "must name a ticket file"))
            }
            Some(t) => Some(PathBuf::from(self.expand(
                t.get_ref(),
                t.span(),
                "hold.ticket",
                false,
            )?)),
            None => None,
        };
        if lock.is_none() && command.is_empty() && ticket.is_none() {
            return Err(self.err(0..0, "hold", "give `lock` (a lock file), `command` (a hold wrapper the serve runs under) or `ticket` (a file that must exist)"));
        }
        Ok(HoldSpec {
            lock,
            wait_s: self.seconds(&h.wait_s, "hold.wait_s")?,
            command,
            ticket,
        })
    }
}

/// Whether `url`'s authority carries user information (`user:password@host`).
pub fn url_userinfo(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    rest.split(['/', '?', '#'])
        .next()
        .unwrap_or("")
        .contains('@')
}

/// `text` with the user information of every `scheme://user:password@host` in it shown `***@`.
pub fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'') || c.is_whitespace())
            .unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            out.push_str("***");
            rest = &rest[at..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod userinfo_tests {
    #[test]
    fn credentials_in_a_url_are_found_and_redacted() {
        assert!(super::url_userinfo("http://admin:s3cret@127.0.0.1:8080"));
        assert!(!super::url_userinfo("http://127.0.0.1:8080/a@b"));
        assert_eq!(
            super::redact_userinfo(r#"url = "http://admin:s3cretPW@127.0.0.1:8080/v1" # http://x"#),
            r#"url = "http://***@127.0.0.1:8080/v1" # http://x"#
        );
    }
}
