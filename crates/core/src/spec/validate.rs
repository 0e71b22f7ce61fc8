//! The validator: from a gate's raw shapes ([`super::raw`]) to its model ([`GateSpec`]), with every check that can
//! be made before anything starts. Its helpers (errors at a key's line, placeholders, regexes that mean something,
//! durations) are here with [`Validator::build`], which calls each table's validation in turn (one file per table:
//! serve.rs, request.rs, route.rs, figure.rs, content.rs, pair.rs, regression.rs, drift.rs, load.rs). The first
//! error found is the one reported, so the order of the checks is part of the messages.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use regex::Regex;
use toml::Spanned;

use super::{
    decl_lines, did_you_mean, drift, key_span, load, Assertions, Context, GateSpec, LoadGate,
    PairSpec, RawGate, RawGateMeta, Requires, SpecError, DEFAULT_LOG_CAP_BYTES, MAX_SECONDS,
    MIN_LOG_CAP_BYTES, NONSENSE_LINES,
};

pub(super) struct Validator<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
    pub(super) ctx: &'a Context,
    pub(super) vars: BTreeMap<String, String>,
    /// `[requires] env`: the variables the gate asks to be set. An `{env:NAME}` placeholder whose variable is
    /// one of these and is unset expands to nothing (the gate is then skipped by its unmet requirement, said
    /// by name); any other unset `{env:NAME}` is a spec error.
    pub(super) required_env: Vec<String>,
    pub(super) doc: Option<toml_edit::ImDocument<&'a str>>,
}

impl Validator<'_> {
    /// True when the gate's text writes `key` (dotted), as opposed to taking its default.
    pub(super) fn written(&self, key: &str) -> bool {
        let Some(doc) = self.doc.as_ref() else {
            return false;
        };
        let mut item: Option<&dyn toml_edit::TableLike> = Some(doc.as_table());
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let Some(t) = item else { return false };
            let Some(v) = t.get(part) else { return false };
            if i + 1 == parts.len() {
                return true;
            }
            item = v.as_table_like();
        }
        false
    }

    /// An error at `span`; an unknown span (`0..0`: a default, or a value read without one) is looked up by
    /// `key` in the document, so every error names a line.
    pub(super) fn err(&self, span: Range<usize>, key: &str, msg: impl Into<String>) -> SpecError {
        let span = if span == (0..0) && !key.is_empty() {
            // The key, else its nearest written parent, else the file's last line (where a missing table
            // would go).
            let mut k = key;
            loop {
                if let Some(found) = self.doc.as_ref().and_then(|d| key_span(d.as_table(), k)) {
                    break found;
                }
                match k.rsplit_once('.') {
                    Some((parent, _)) => k = parent,
                    None => {
                        let end = self.text.trim_end().len();
                        let at = self.text[..end].rfind('\n').map(|i| i + 1).unwrap_or(0);
                        break at..end.max(at + 1);
                    }
                }
            }
        } else {
            span
        };
        SpecError::at(self.file, self.text, span, key, msg)
    }

    /// `argv` must name a program: its first word is not empty (`command = [""]` starts nothing).
    pub(super) fn argv(
        &self,
        argv: &[String],
        span: Range<usize>,
        key: &str,
    ) -> Result<(), SpecError> {
        match argv.first() {
            None => Err(self.err(span, key, "must not be empty")),
            Some(p) if p.trim().is_empty() => {
                Err(self.err(span, key, "its first word (the program) is empty"))
            }
            _ => match argv.iter().position(|a| a.contains('\0')) {
                // The operating system takes no NUL in an argument: refused here, not at the spawn.
                Some(i) => Err(self.err(
                    span,
                    key,
                    format!(
                        "word {} holds a NUL byte (\\u0000): a program's arguments cannot",
                        i + 1
                    ),
                )),
                None => Ok(()),
            },
        }
    }

    pub(super) fn expand_tilde(&self, s: &str) -> String {
        if s == "~" || s.starts_with("~/") {
            if let Some(home) = &self.ctx.home {
                return format!("{}{}", home.display(), &s[1..]);
            }
        }
        s.to_string()
    }

    /// Expands `{name}` placeholders (and `~` at the start). `{port}` and `{host}` are left for the runner
    /// when `keep_runtime` is set. `{{` and `}}` are literal braces.
    pub(super) fn expand(
        &self,
        s: &str,
        span: Range<usize>,
        key: &str,
        keep_runtime: bool,
    ) -> Result<String, SpecError> {
        let s = self.expand_tilde(s);
        let mut out = String::new();
        let mut rest = s.as_str();
        while let Some(i) = rest.find(['{', '}']) {
            out.push_str(&rest[..i]);
            let c = rest.as_bytes()[i];
            if rest[i + 1..].starts_with(c as char) {
                out.push(c as char);
                rest = &rest[i + 2..];
                continue;
            }
            if c == b'}' {
                return Err(self.err(
                    span,
                    key,
                    format!("unmatched `}}` in {s:?} (write `}}}}` for a literal brace)"),
                ));
            }
            let Some(end) = rest[i..].find('}') else {
                return Err(self.err(span, key, format!("unclosed `{{` in {s:?}")));
            };
            let name = &rest[i + 1..i + end];
            let value = match name {
                "port" | "host" if keep_runtime => Some(format!("{{{name}}}")),
                "gate_dir" => Some(self.ctx.gate_dir.display().to_string()),
                "cache" => Some(self.ctx.cache.display().to_string()),
                _ => match name.strip_prefix("env:") {
                    Some(var) => Some(self.env_placeholder(var, span.clone(), key)?),
                    None => self.vars.get(name).cloned(),
                },
            };
            let Some(value) = value else {
                let mut known: Vec<String> =
                    vec!["gate_dir".into(), "cache".into(), "env:NAME".into()];
                if keep_runtime {
                    known.extend(["port".into(), "host".into()]);
                }
                known.extend(self.vars.keys().cloned());
                return Err(self.err(
                    span,
                    key,
                    format!(
                        "placeholder `{{{name}}}` is not defined (defined here: {})",
                        known.join(", ")
                    ),
                ));
            };
            out.push_str(&value);
            rest = &rest[i + end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The value of `{env:NAME}`: the environment variable NAME of the process reading the gate (a gate kept
    /// outside a checkout names its tools by `{env:NPU_TOOLS}/bin/...`). Unset: nothing when `[requires] env`
    /// names it (the gate is skipped, the requirement said), a spec error otherwise; not UTF-8: a spec error.
    fn env_placeholder(
        &self,
        var: &str,
        span: Range<usize>,
        key: &str,
    ) -> Result<String, SpecError> {
        if var.is_empty() || var.contains('=') {
            return Err(self.err(
                span,
                key,
                format!("placeholder `{{env:{var}}}` names no environment variable"),
            ));
        }
        match std::env::var(var) {
            Ok(v) => Ok(v),
            Err(std::env::VarError::NotPresent) if self.required_env.iter().any(|e| e == var) => {
                Ok(String::new())
            }
            Err(std::env::VarError::NotPresent) => Err(self.err(
                span,
                key,
                format!("placeholder `{{env:{var}}}`: the environment variable {var} is not set (name it in `[requires] env` to skip the gate when it is not)"),
            )),
            Err(std::env::VarError::NotUnicode(_)) => Err(self.err(
                span,
                key,
                format!("placeholder `{{env:{var}}}`: the environment variable {var} is not UTF-8"),
            )),
        }
    }

    /// A regex that can mean something: valid, not matching the empty text (`""`, `.*`, `x?` match every
    /// line, so a route or known answer judged with them proves nothing), and not matching two or more of
    /// [`NONSENSE_LINES`] (`.`, `\w`, `\b|x` match nearly every real line too).
    pub(super) fn regex(&self, s: &Spanned<String>, key: &str) -> Result<Regex, SpecError> {
        self.regex_at(s.span(), s.get_ref(), key)
    }

    /// [`Validator::regex`] of `text` declared at `span` (one entry of a list, whose span is the list's).
    pub(super) fn regex_at(
        &self,
        span: Range<usize>,
        text: &str,
        key: &str,
    ) -> Result<Regex, SpecError> {
        let re = Regex::new(text)
            .map_err(|e| self.err(span.clone(), key, format!("invalid regex: {e}")))?;
        if re.is_match("") {
            return Err(self.err(
                span,
                key,
                format!(
                    "the regex {text:?} matches the empty text, so it matches anything: it would prove nothing"
                ),
            ));
        }
        let hits = NONSENSE_LINES.iter().filter(|l| re.is_match(l)).count();
        if hits >= 2 {
            return Err(self.err(
                span,
                key,
                format!(
                    "the regex {text:?} matches {hits} of {} nonsense lines ({:?}), so it matches almost any log \
                     line or reply: it would prove nothing",
                    NONSENSE_LINES.len(),
                    NONSENSE_LINES
                ),
            ));
        }
        Ok(re)
    }

    pub(super) fn positive(
        &self,
        v: &Spanned<f64>,
        key: &str,
        unit: &str,
    ) -> Result<f64, SpecError> {
        let x = *v.get_ref();
        if !x.is_finite() || x <= 0.0 {
            return Err(self.err(
                v.span(),
                key,
                format!("must be a finite number > 0 ({unit}), got {x}"),
            ));
        }
        Ok(x)
    }

    /// `[serve] log_cap_bytes`: at least [`MIN_LOG_CAP_BYTES`]; default [`DEFAULT_LOG_CAP_BYTES`].
    pub(super) fn log_cap_bytes(&self, v: &Option<Spanned<i64>>) -> Result<u64, SpecError> {
        match v {
            None => Ok(DEFAULT_LOG_CAP_BYTES),
            Some(b) if *b.get_ref() >= MIN_LOG_CAP_BYTES as i64 => Ok(*b.get_ref() as u64),
            Some(b) => Err(self.err(
                b.span(),
                "serve.log_cap_bytes",
                format!(
                    "must be at least {MIN_LOG_CAP_BYTES} bytes (64 KiB), got {}",
                    b.get_ref()
                ),
            )),
        }
    }

    /// A duration in seconds: finite, > 0 and at most [`MAX_SECONDS`] (larger values overflow the clock's
    /// arithmetic: the runner would panic instead of waiting).
    pub(super) fn seconds(&self, v: &Spanned<f64>, key: &str) -> Result<f64, SpecError> {
        let x = self.positive(v, key, "seconds")?;
        if x > MAX_SECONDS {
            return Err(self.err(
                v.span(),
                key,
                format!("must be at most {MAX_SECONDS} seconds (about 11 days), got {x:e}"),
            ));
        }
        Ok(x)
    }

    /// The gate from its raw shape, table by table in this order (the first error is the one reported).
    pub(super) fn build(mut self, raw: RawGate) -> Result<GateSpec, SpecError> {
        let name = self.gate_name(&raw.gate)?;
        self.define_vars(&raw.vars)?;
        let (mut request, untimed_span) = self.request(raw.request)?;
        let mut serve = self.serve(
            raw.serve,
            &mut request,
            raw.pair.is_some(),
            raw.hold.as_ref(),
        )?;
        let hold = raw.hold.as_ref().map(|h| self.hold(h)).transpose()?;

        // [assert.*]
        let mut a = raw.assertions;
        let load_asserts = load::RawLoadAsserts {
            latency: a.latency.take(),
            throughput: a.throughput.take(),
            goodput: a.goodput.take(),
            errors: a.errors.take(),
            consistency: a.consistency.take(),
            parity: a.parity.take(),
        };
        let load = self.load_gate(raw.load, load_asserts, request.stream, request.max_tokens)?;
        // Field by field in this order (a struct literal's fields are evaluated as written).
        let mut assertions = Assertions {
            route: a.route.map(|r| self.route(&r, &serve)).transpose()?,
            rate: a.rate.map(|r| self.rate(&r)).transpose()?,
            first_token: a.first_token.map(|f| self.first_token(&f)).transpose()?,
            tpot: a.tpot.map(|t| self.tpot(&t)).transpose()?,
            ready: a.ready.map(|r| self.ready(&r)).transpose()?,
            memory: a.memory.map(|m| self.memory(&m)).transpose()?,
            cpu: a.cpu.map(|c| self.cpu(&c)).transpose()?,
            ..Default::default()
        };
        self.streamed(&request, &assertions)?;
        assertions.content = a.content;
        assertions.known_answer = a
            .known_answer
            .map(|k| self.known_answer(&k, &mut request))
            .transpose()?;
        (assertions.ratio, assertions.first_token_ratio) =
            self.ratios(a.ratio.as_ref(), a.first_token_ratio.as_ref())?;
        if let Some(r) = a.regression {
            assertions.regression = Some(self.regression(r, raw.pair.is_some())?);
        }
        assertions.same_answers = a
            .same_answers
            .map(|sa| self.same_answers(sa, &request))
            .transpose()?;
        if let Some(d) = &a.drift {
            assertions.drift = Some(self.drift(d, &request)?);
        }
        self.timed_prompt_left(&request, &assertions, untimed_span)?;
        let pair = self.pair(raw.pair.as_ref(), &assertions, &mut serve, &request)?;
        self.gate_kind(
            load.as_ref(),
            pair.as_ref(),
            &assertions,
            raw.contract.is_some(),
        )?;
        let mut requires = self.requires(&raw.requires)?;
        // A load gate driven by another tool needs it: an implied `[requires] provisioned` (`locust`,
        // `vllm` for vLLM's bench, `aiperf`), so a machine without it skips the gate naming the
        // provisioning script instead of failing it.
        if let Some(name) = load.as_ref().and_then(|l| l.spec.driver.provisioned()) {
            if !requires.provisioned.iter().any(|n| n == name) {
                requires.provisioned.push(name.into());
                requires
                    .provisioned_markers
                    .push(self.ctx.cache.join("provisioned").join(name));
            }
        }
        let contract = raw
            .contract
            .as_ref()
            .map(|c| self.contract(c, serve.engine))
            .transpose()?;
        if contract.is_some() && (pair.is_some() || load.is_some()) {
            return Err(self.err(
                0..0,
                "contract",
                "[contract] checks one serve of a plain gate; a pair or load gate cannot declare it",
            ));
        }

        let samples = self.samples(&raw.sample)?;
        assertions.sample = self.sample_asserts(a.sample.as_ref(), &samples, pair.is_some())?;

        // Answers compared with logprobs: ask for them in every request.
        let logprobs_k = match (&assertions.drift, &assertions.same_answers) {
            (Some(d), _) => Some(d.top_k),
            (None, Some(sa)) if sa.rule == drift::Rule::LogprobsClose => Some(sa.top_k()),
            _ => load
                .as_ref()
                .and_then(|l| l.assertions.consistency)
                .filter(|c| c.rule == drift::Rule::LogprobsClose)
                .map(|c| c.top_k),
        };
        let request = drift::ask_logprobs(request, logprobs_k);
        let decl_lines = match &self.doc {
            Some(d) => decl_lines(d.as_table(), self.text, assertions.kinds()),
            None => BTreeMap::new(),
        };
        Ok(GateSpec {
            name,
            description: raw.gate.description,
            file: self.file.to_path_buf(),
            source: self.text.to_string(),
            requires,
            serve,
            request,
            assertions,
            pair,
            hold,
            record: raw.record,
            on_indeterminate: raw.gate.on_indeterminate,
            load,
            contract,
            samples,
            decl_lines,
        })
        .and_then(|g: GateSpec| match g.record_spec("check", "decode_rate") {
            Ok(_) => Ok(g),
            Err(e) if g.record.is_some() => {
                // `unknown field `x``: at the key `record.x`; otherwise at the [record] table.
                if let Some(why) = e.strip_prefix(super::model::SENTENCE_KEY) {
                    let why = why.trim_start_matches(": ");
                    return Err(self.err(0..0, super::model::SENTENCE_KEY, why));
                }
                let key = e
                    .split_once("unknown field `")
                    .and_then(|(_, rest)| rest.split('`').next())
                    .map(|f| format!("record.{f}"))
                    .unwrap_or_else(|| "record".into());
                Err(self.err(0..0, &key, did_you_mean(&e)))
            }
            Err(_) => Ok(g),
        })
    }

    /// `[gate] name`: it names trials and the evidence directory.
    fn gate_name(&self, gate: &RawGateMeta) -> Result<String, SpecError> {
        let name = gate.name.get_ref().clone();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(self.err(
                gate.name.span(),
                "gate.name",
                format!("must be non-empty and use only A-Z a-z 0-9 - _ . (got {name:?})"),
            ));
        }
        // The name is a directory of the evidence root: `.`/`..` (or any leading dot) would write elsewhere
        // or hide it.
        if name.starts_with('.') || name.starts_with('-') {
            return Err(self.err(
                gate.name.span(),
                "gate.name",
                format!("must start with a letter, a digit or `_` (it names the evidence directory), got {name:?}"),
            ));
        }
        Ok(name)
    }

    /// `[vars]`: expanded in file order; a var may use `{gate_dir}`, `{cache}` and the vars above it.
    fn define_vars(&mut self, raw: &BTreeMap<String, Spanned<String>>) -> Result<(), SpecError> {
        let mut vars: Vec<(&String, &Spanned<String>)> = raw.iter().collect();
        vars.sort_by_key(|(_, v)| v.span().start);
        for (k, v) in vars {
            if matches!(
                k.as_str(),
                "port" | "host" | "gate_dir" | "cache" | "model" | "served_model"
            ) {
                return Err(self.err(
                    v.span(),
                    &format!("vars.{k}"),
                    format!("`{k}` is a built-in placeholder and cannot be redefined"),
                ));
            }
            let expanded = self.expand(v.get_ref(), v.span(), &format!("vars.{k}"), false)?;
            self.vars.insert(k.clone(), expanded);
        }
        Ok(())
    }

    /// What kind of gate it is, once: a pair gate or a load gate (not both), with at least one assertion, and a
    /// load gate with none of the per-request ones.
    fn gate_kind(
        &self,
        load: Option<&LoadGate>,
        pair: Option<&PairSpec>,
        assertions: &Assertions,
        contract: bool,
    ) -> Result<(), SpecError> {
        if load.is_some() && pair.is_some() {
            return Err(self.err(0..0, "load", "a pair gate cannot also be a load gate"));
        }
        if assertions.names().is_empty() && load.is_none() && !contract {
            return Err(self.err(0..0, "assert", "the gate declares no assertion ([assert.route], [assert.rate], [assert.first_token], [assert.tpot], [assert.ready], [assert.memory], [assert.cpu], [assert.content], [assert.known_answer], [contract])"));
        }

        if load.is_some() {
            // A load gate judges its sweep points; the per-request assertions would judge the gate's own
            // run directory, which holds no request: they could never pass.
            if let Some(k) = assertions.kinds().first() {
                return Err(self.err(
                    0..0,
                    &format!("assert.{}", k.name()),
                    format!("[assert.{}] judges a plain run's requests; a [load] gate's requests are its sweep points', judged by [assert.latency], [assert.throughput], [assert.goodput], [assert.errors] and [assert.consistency]: it could never pass here", k.name()),
                ));
            }
        }
        Ok(())
    }

    /// `[requires]`: entries that can be met (no empty one, no `=` in a variable's name, runtime names that
    /// name a marker), placeholders (`{cache}`, `{gate_dir}`, `{env:NAME}`, `[vars]`) and `~` expanded in paths,
    /// and each runtime's marker under `{cache}`.
    fn requires(&self, requires: &Requires) -> Result<Requires, SpecError> {
        if let Some(e) = requires.env.iter().find(|e| e.contains('=')) {
            return Err(self.err(
                0..0,
                "requires.env",
                format!("{e:?} names no environment variable (a name holds no `=`; `requires.env` asks that a variable be set, not its value): it could never be met"),
            ));
        }
        for (list, entries) in [
            ("paths", &requires.paths),
            ("commands", &requires.commands),
            ("env", &requires.env),
            ("provisioned", &requires.provisioned),
        ] {
            if entries.iter().any(|e| e.trim().is_empty()) {
                return Err(self.err(
                    0..0,
                    &format!("requires.{list}"),
                    "an entry is empty (it would be met or unmet by accident)",
                ));
            }
        }
        let valid = Requires {
            paths: requires
                .paths
                .iter()
                .map(|p| self.expand(p, 0..0, "requires.paths", false))
                .collect::<Result<_, _>>()?,
            commands: requires.commands.clone(),
            env: requires.env.clone(),
            provisioned: requires.provisioned.clone(),
            provisioned_markers: requires
                .provisioned
                .iter()
                .map(|n| self.ctx.cache.join("provisioned").join(n))
                .collect(),
        };
        if let Some(bad) = requires.provisioned.iter().find(|n| {
            !n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        }) {
            return Err(self.err(
                0..0,
                "requires.provisioned",
                format!("{bad:?} is not a runtime name (letters, digits, '-', '_': the marker {{cache}}/provisioned/NAME)"),
            ));
        }
        Ok(valid)
    }
}

/// True when an `http(s)://` URL's authority is `host` or `host:port` with a valid host ([`valid_host`]) and a
/// port of 1 to 65535 (no user info).
pub(super) fn valid_url_authority(url: &str) -> bool {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return false;
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (format!("[{h}]"), p.strip_prefix(':')),
            None => return false,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    valid_host(&host) && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

/// True for a host servegate can listen on or connect to: an IPv4 or IPv6 address (brackets allowed) or a
/// DNS name (labels of A-Z a-z 0-9 and inner `-`, 1 to 63 characters each, 253 at most in all).
pub fn valid_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.parse::<std::net::IpAddr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}
