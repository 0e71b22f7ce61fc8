//! `[[sample]]`: samplers the gate declares (a device's memory or power from its own tool, a sysfs file, a
//! `/metrics` gauge): each read every `every_ms` during the run by a command or a file, its number taken by a
//! regex, in the unit the gate names (docs/gate-format.md "Samplers"). The runner samples
//! (`servegate::io::sampler`) and stores the series in `run.json` `serve.samples`; a sampler that fails,
//! hangs or matches nothing gives no value with the reason and never stops the run.

use std::ops::Range;

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use super::{SpecError, Validator};

/// Fewest ms between two samples of one sampler (a command started more often would load the machine it
/// measures).
pub const MIN_EVERY_MS: u64 = 100;
/// Most ms between two samples (one hour).
pub const MAX_EVERY_MS: u64 = 3_600_000;
/// Longest `timeout_ms` (one minute): the run's end waits for a sample under way, so no sampler may hold it
/// longer.
pub const MAX_TIMEOUT_MS: u64 = 60_000;

/// `[[sample]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSample {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) path: Option<Spanned<String>>,
    pub(super) regex: Spanned<String>,
    pub(super) unit: Spanned<String>,
    pub(super) every_ms: Spanned<i64>,
    #[serde(default)]
    pub(super) timeout_ms: Option<Spanned<i64>>,
}

/// `[assert.sample.NAME]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSampleBound {
    #[serde(default)]
    pub(super) min: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) max: Option<Spanned<f64>>,
}

/// `[assert.sample.NAME]`: every value the sampler `name` gave within `min` and `max` (in its unit).
#[derive(Debug, Clone, PartialEq)]
pub struct SampleAssert {
    /// The sampler's name (a `[[sample]]` of the gate).
    pub name: String,
    /// Inclusive lower bound, if any.
    pub min: Option<f64>,
    /// Inclusive upper bound, if any.
    pub max: Option<f64>,
    /// The 1-based line of its first bound in the gate file.
    pub line: usize,
}

impl SampleAssert {
    /// Its trial name after the gate's: `sample.<name>`.
    pub fn trial_name(&self) -> String {
        format!("sample.{}", self.name)
    }
}

/// Where a sampler reads.
#[derive(Debug, Clone, PartialEq)]
pub enum SampleSource {
    /// A command (not through a shell; `{gate_dir}`, `{cache}`, `~` expanded): its stdout.
    Command(Vec<String>),
    /// A file (sysfs, procfs, a tool's status file): its contents.
    Path(std::path::PathBuf),
}

/// One validated `[[sample]]`.
#[derive(Debug, Clone)]
pub struct SampleSpec {
    /// Its name (`[a-z0-9_]`, unique in the gate): `serve.samples[].name`.
    pub name: String,
    /// What it reads.
    pub source: SampleSource,
    /// Takes the number: the named group `value`, else the first group, else the whole match.
    pub regex: Regex,
    /// The unit of the number, as the gate names it (`MiB`, `W`, `mW`, `°C`).
    pub unit: String,
    /// ms between samples, [`MIN_EVERY_MS`]..=[`MAX_EVERY_MS`].
    pub every_ms: u64,
    /// Longest wait for one command, ms (default: `every_ms`, at most 10 s); past it the command's process
    /// group is killed and the sample is a timeout.
    pub timeout_ms: u64,
}

impl Validator<'_> {
    /// `[[sample]]` entries: a unique name, exactly one of `command` and `path`, a regex that matches neither
    /// the empty text nor nonsense, a unit, `every_ms` and `timeout_ms` in range.
    pub(super) fn samples(&self, raw: &[RawSample]) -> Result<Vec<SampleSpec>, SpecError> {
        let mut out: Vec<SampleSpec> = Vec::new();
        for (i, s) in raw.iter().enumerate() {
            let key = format!("sample[{i}]");
            let name = s.name.get_ref();
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(self.err(
                    s.name.span(),
                    &format!("{key}.name"),
                    format!("{name:?}: a sampler's name is lower-case letters, digits and `_` (it names the series in run.json)"),
                ));
            }
            if out.iter().any(|o| &o.name == name) {
                return Err(self.err(
                    s.name.span(),
                    &format!("{key}.name"),
                    format!("{name:?} names two samplers"),
                ));
            }
            let source = match (&s.command, &s.path) {
                (Some(c), None) if !c.get_ref().is_empty() && !c.get_ref()[0].is_empty() => {
                    let argv = c
                        .get_ref()
                        .iter()
                        .map(|a| self.expand(a, c.span(), &format!("{key}.command"), false))
                        .collect::<Result<Vec<_>, _>>()?;
                    SampleSource::Command(argv)
                }
                (Some(c), None) => {
                    return Err(self.err(
                        c.span(),
                        &format!("{key}.command"),
                        "is empty: name the program and its arguments",
                    ))
                }
                (None, Some(p)) => SampleSource::Path(
                    self.expand(p.get_ref(), p.span(), &format!("{key}.path"), false)?
                        .into(),
                ),
                (Some(_), Some(p)) => {
                    return Err(self.err(
                        p.span(),
                        &format!("{key}.path"),
                        "give either command or path, not both",
                    ))
                }
                (None, None) => {
                    return Err(self.err(
                        s.name.span(),
                        &key,
                        "needs command = [\"prog\", ...] or path = \"/sys/...\" (what to read)",
                    ))
                }
            };
            let regex = self.regex(&s.regex, &format!("{key}.regex"))?;
            if s.unit.get_ref().trim().is_empty() {
                return Err(self.err(
                    s.unit.span(),
                    &format!("{key}.unit"),
                    "is empty: name the unit of the number (MiB, W, mW, °C...)",
                ));
            }
            let every_ms =
                self.ms_in_range(&s.every_ms, &format!("{key}.every_ms"), MAX_EVERY_MS)?;
            let timeout_ms = match &s.timeout_ms {
                Some(t) => self.ms_in_range(t, &format!("{key}.timeout_ms"), MAX_TIMEOUT_MS)?,
                None => every_ms.min(10_000),
            };
            out.push(SampleSpec {
                name: name.clone(),
                source,
                regex,
                unit: s.unit.get_ref().trim().to_string(),
                every_ms,
                timeout_ms,
            });
        }
        Ok(out)
    }

    /// `[assert.sample.NAME]` tables: each names a declared sampler and gives `min`, `max` or both (finite,
    /// `min <= max`). Not in a pair gate (each arm is its own serve and run).
    pub(super) fn sample_asserts(
        &self,
        raw: Option<&std::collections::BTreeMap<String, RawSampleBound>>,
        samples: &[SampleSpec],
        in_pair: bool,
    ) -> Result<Vec<SampleAssert>, SpecError> {
        let mut out = Vec::new();
        for (name, b) in raw.into_iter().flatten() {
            let key = format!("assert.sample.{name}");
            let span = b
                .min
                .as_ref()
                .or(b.max.as_ref())
                .map(|v| v.span())
                .unwrap_or(0..0);
            if in_pair {
                return Err(self.err(
                    span,
                    &key,
                    "a [pair] gate's arms are separate runs: assert a sampler in a plain gate",
                ));
            }
            if !samples.iter().any(|s| &s.name == name) {
                let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
                return Err(self.err(
                    span,
                    &key,
                    format!(
                        "names no [[sample]] of the gate (samplers: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            }
            let finite = |v: &Option<Spanned<f64>>, k: &str| -> Result<Option<f64>, SpecError> {
                match v {
                    Some(x) if !x.get_ref().is_finite() => Err(self.err(
                        x.span(),
                        &format!("{key}.{k}"),
                        format!("must be a finite number, got {}", x.get_ref()),
                    )),
                    Some(x) => Ok(Some(*x.get_ref())),
                    None => Ok(None),
                }
            };
            let (min, max) = (finite(&b.min, "min")?, finite(&b.max, "max")?);
            match (min, max) {
                (None, None) => {
                    return Err(self.err(span, &key, "declares no bound (min, max or both)"))
                }
                (Some(lo), Some(hi)) if lo > hi => {
                    return Err(self.err(
                        span,
                        &key,
                        format!("min {lo} is above max {hi}: no value could pass"),
                    ))
                }
                _ => {}
            }
            out.push(SampleAssert {
                name: name.clone(),
                min,
                max,
                line: self.text[..span.start.min(self.text.len())]
                    .matches('\n')
                    .count()
                    + 1,
            });
        }
        Ok(out)
    }

    fn ms_in_range(&self, v: &Spanned<i64>, key: &str, max: u64) -> Result<u64, SpecError> {
        let x = *v.get_ref();
        let span: Range<usize> = v.span();
        if !(MIN_EVERY_MS as i64..=max as i64).contains(&x) {
            return Err(self.err(
                span,
                key,
                format!("must be {MIN_EVERY_MS} to {max} ms, got {x}"),
            ));
        }
        Ok(x as u64)
    }
}
