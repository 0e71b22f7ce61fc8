//! The comparability key of a run: what must be equal between a run and its baseline for a comparison of
//! their figures (a regression verdict) or their answers (a drift verdict) to mean anything. A run whose key
//! differs from its baseline's is **incomparable**: the baseline no longer applies, and the trial fails
//! naming the fields (docs/regression.md, "What the key holds").
//!
//! The key holds what the **gate** fixes (model file sha256, prompts, max_tokens, temperature, stream,
//! device and route) and the **machine** (CPU model and count). What the **release** changes, the engine and
//! its version and the numerics settings its serve log states (flash attention, KV cache type and layout:
//! [`numerics_of_log`]), is not in the key: it is the thing a release gate tests. It is compared
//! ([`release_changes`]) and stated beside the verdict as the likely cause of a change (`the release changed
//! engine_version 1.0.0 → 1.1.0, flash_attention enabled → disabled`).
//!
//! Pure: the key is computed from the gate as run (the `gate.toml` kept in the run directory) and `run.json`.
//! Which fields a comparison needs depends on what it compares ([`KeyUse`]): a speed comparison needs the same
//! machine kind; an answer comparison does not depend on the machine's speed.
//!
//! A speed comparison also compares the **host's load** ([`load_difference`]): a run and a baseline whose
//! load per CPU ([`load_per_cpu`]) is too far apart are incomparable, because on a shared machine the load
//! alone moves a CPU-bound serve's speed by more than a regression margin (docs/regression.md, "Host load").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::evidence::RunSummary;
use crate::spec::GateSpec;

/// The comparability key of one run. Every field is a string as the evidence states it, or None where the
/// evidence does not say (older evidence, a serve that does not report its version). Two runs are comparable
/// when every field that either of them states is equal ([`differences`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparabilityKey {
    /// SHA-256 of the model file the serve was given (`run.json` `serve.model_file.sha256`).
    pub model_sha256: Option<String>,
    /// The engine (`[record] engine`, or the serve profile's engine name).
    pub engine: Option<String>,
    /// The engine's version as the serve reported it (`run.json` `serve.version`), else `[record]
    /// engine_version`.
    pub engine_version: Option<String>,
    /// The device and route (`[record] device` and `route`, joined with ` / `).
    pub device: Option<String>,
    /// The host's CPU model (`/proc/cpuinfo` `model name`).
    pub cpu_model: Option<String>,
    /// The host's logical CPU count.
    pub cpus: Option<String>,
    /// `request.max_tokens`.
    pub max_tokens: Option<String>,
    /// `request.temperature` (absent = the serve's default).
    pub temperature: Option<String>,
    /// SHA-256 of the prompts (and the system prompt), in order, each followed by a NUL byte.
    pub prompts_sha256: Option<String>,
    /// `stream` or `plain`.
    pub stream: Option<String>,
    /// The serve settings that change numerics, read from its log ([`numerics_of_log`]: `flash_attention`,
    /// `kv_unified`, `cache_type_k`, `cache_type_v`), by name: release fields, compared and named
    /// ([`release_changes`]), never a difference that makes a run incomparable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
}

/// The fields of the key that the release under test changes, compared and named but never a reason for
/// incomparability (with every `extra.*` field: the numerics settings of the serve log).
pub const RELEASE_FIELDS: [&str; 2] = ["engine", "engine_version"];

/// True for a field a release changes ([`RELEASE_FIELDS`] and `extra.*`).
pub fn is_release_field(field: &str) -> bool {
    RELEASE_FIELDS.contains(&field) || field.starts_with("extra.")
}

/// What a comparison compares, which decides the fields it needs equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// Speed figures (decode rate, first token...): what the gate fixes and the machine (CPU model and count).
    Speed,
    /// Greedy answers (tokens, logprobs): what the gate fixes (answers do not depend on the machine's speed).
    Answers,
    /// The windows of one stored baseline: every field, the release's included (one baseline is one release
    /// on one machine; `servegate bless` and `evidence::baseline::load` hold its windows to it).
    Window,
}

/// One field that differs between a baseline's key and a run's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDiff {
    /// The field's name (`model_sha256`, `cpu_model`, `extra.flash_attention`...).
    pub field: String,
    /// The baseline's value (None: the baseline's evidence does not say).
    pub baseline: Option<String>,
    /// This run's value.
    pub run: Option<String>,
    /// The whole description, for a difference that is not two plain values (the host load's, which
    /// states both loads and the bound); None: `field baseline (baseline) vs run (this run)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl std::fmt::Display for KeyDiff {
    /// `model_sha256 b179c952… (baseline) vs 0d3e… (this run)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(t) = &self.text {
            return f.write_str(t);
        }
        write!(
            f,
            "{} {} (baseline) vs {} (this run)",
            self.field,
            show(&self.baseline),
            show(&self.run)
        )
    }
}

/// The key of a run: `gate` is the gate as run (parsed from the run directory's `gate.toml`), `run` its
/// `run.json`.
pub fn key_of(gate: &GateSpec, run: &RunSummary) -> ComparabilityKey {
    let record = |k: &str| {
        gate.record
            .as_ref()
            .and_then(|t| t.get(k))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let device = match (record("device"), record("route")) {
        (Some(d), Some(r)) => Some(format!("{d} / {r}")),
        (d, r) => d.or(r),
    };
    let mut prompts = Vec::new();
    if let Some(s) = &gate.request.system {
        prompts.extend_from_slice(b"system:");
        prompts.extend_from_slice(s.as_bytes());
        prompts.push(0);
    }
    for p in &gate.request.prompts {
        prompts.extend_from_slice(p.as_bytes());
        prompts.push(0);
    }
    ComparabilityKey {
        model_sha256: run.serve.model_file.as_ref().map(|m| m.sha256.clone()),
        engine: record("engine"),
        engine_version: run
            .serve
            .version
            .clone()
            .or_else(|| record("engine_version")),
        device,
        cpu_model: run.host.cpu_model.clone(),
        cpus: (run.host.cpus > 0).then(|| run.host.cpus.to_string()),
        max_tokens: Some(gate.request.max_tokens.to_string()),
        temperature: gate.request.temperature.map(|t| format!("{t}")),
        prompts_sha256: Some(crate::io::hash::sha256_bytes(&prompts)),
        stream: Some(
            if gate.request.stream {
                "stream"
            } else {
                "plain"
            }
            .to_string(),
        ),
        extra: BTreeMap::new(),
    }
}

/// [`key_of`] with the numerics settings of the run's serve log ([`numerics_of_log`]) in `extra`: the whole
/// key of a run, the release's fields included (`serve_log` is `serve.log`'s text, None when absent).
pub fn key_of_evidence(
    gate: &GateSpec,
    run: &RunSummary,
    serve_log: Option<&str>,
) -> ComparabilityKey {
    let mut key = key_of(gate, run);
    if let Some(log) = serve_log {
        key.extra.extend(numerics_of_log(log));
    }
    key
}

impl ComparabilityKey {
    /// The fields as (name, value) pairs, in a fixed order; `extra` fields are named `extra.<name>`.
    pub fn fields(&self) -> Vec<(String, Option<String>)> {
        let mut v = vec![
            ("model_sha256".to_string(), self.model_sha256.clone()),
            ("engine".into(), self.engine.clone()),
            ("engine_version".into(), self.engine_version.clone()),
            ("device".into(), self.device.clone()),
            ("cpu_model".into(), self.cpu_model.clone()),
            ("cpus".into(), self.cpus.clone()),
            ("max_tokens".into(), self.max_tokens.clone()),
            ("temperature".into(), self.temperature.clone()),
            ("prompts_sha256".into(), self.prompts_sha256.clone()),
            ("stream".into(), self.stream.clone()),
        ];
        for (k, val) in &self.extra {
            v.push((format!("extra.{k}"), Some(val.clone())));
        }
        v
    }
}

/// The fields that make `run` incomparable with `baseline` for `usage`, in the order of
/// [`ComparabilityKey::fields`]; empty when they are comparable. A field stated by one side and not by the
/// other differs (a baseline that names its model's sha256 cannot vouch for a run that does not). The
/// release's fields ([`is_release_field`]) count only for [`KeyUse::Window`], and there an `extra` field only
/// where the baseline states it.
pub fn differences(
    baseline: &ComparabilityKey,
    run: &ComparabilityKey,
    usage: KeyUse,
) -> Vec<KeyDiff> {
    let host_field = |f: &str| f == "cpu_model" || f == "cpus";
    let run_fields: BTreeMap<String, Option<String>> = run.fields().into_iter().collect();
    let mut names: Vec<String> = baseline.fields().into_iter().map(|(k, _)| k).collect();
    for (k, _) in run.fields() {
        if !names.contains(&k) {
            names.push(k);
        }
    }
    let base_fields: BTreeMap<String, Option<String>> = baseline.fields().into_iter().collect();
    names
        .into_iter()
        .filter(|f| !(usage == KeyUse::Answers && host_field(f)))
        .filter(|f| usage == KeyUse::Window || !is_release_field(f))
        .filter_map(|f| {
            let b = base_fields.get(&f).cloned().flatten();
            let r = run_fields.get(&f).cloned().flatten();
            // An extra field only this run states is not something the baseline keyed on.
            if f.starts_with("extra.") && b.is_none() {
                return None;
            }
            (b != r).then_some(KeyDiff {
                field: f,
                baseline: b,
                run: r,
                text: None,
            })
        })
        .collect()
}

/// What the release changed between `baseline` and `run`: the engine and its version where either side states
/// them, the numerics settings (`extra.*`) where both do, in the order of [`ComparabilityKey::fields`]. Never
/// a reason for incomparability: the verdict states them as the likely cause ([`describe_release`]).
pub fn release_changes(baseline: &ComparabilityKey, run: &ComparabilityKey) -> Vec<KeyDiff> {
    let run_fields: BTreeMap<String, Option<String>> = run.fields().into_iter().collect();
    let mut out = Vec::new();
    for (f, b) in baseline.fields() {
        if !is_release_field(&f) {
            continue;
        }
        let r = run_fields.get(&f).cloned().flatten();
        let both = b.is_some() && r.is_some();
        if b != r && (both || !f.starts_with("extra.")) {
            out.push(KeyDiff {
                field: f,
                baseline: b,
                run: r,
                text: None,
            });
        }
    }
    out
}

/// `the release changed engine_version 1.0.0 → 1.1.0, flash_attention enabled → disabled` (a numerics
/// setting named without its `extra.` prefix; a long value cut to 24 characters); None when nothing changed.
pub fn describe_release(changes: &[KeyDiff]) -> Option<String> {
    if changes.is_empty() {
        return None;
    }
    let parts: Vec<String> = changes
        .iter()
        .map(|d| {
            format!(
                "{} {} → {}",
                d.field.strip_prefix("extra.").unwrap_or(&d.field),
                show(&d.baseline),
                show(&d.run)
            )
        })
        .collect();
    Some(format!("the release changed {}", parts.join(", ")))
}

/// A key value as a verdict shows it: at most 24 characters (the first 12 and `…`), `(not stated)` for none.
fn show(v: &Option<String>) -> String {
    match v {
        Some(v) if v.chars().count() > 24 => format!("{}…", v.chars().take(12).collect::<String>()),
        Some(v) => v.clone(),
        None => "(not stated)".into(),
    }
}

/// The serve settings that change greedy numerics, read from its log (llama.cpp's lines, as build b11434
/// prints them at startup): `flash_attention` (`resolve_fused_ops: Flash Attention enabled|disabled`, else
/// `llama_context: flash_attn = on|off|auto`), `kv_unified` (`load_model: ... kv_unified = 'false'`, else
/// `llama_context: kv_unified = false`), `cache_type_k` / `cache_type_v` (`llama_kv_cache: ... K (f16): ...,
/// V (f16): ...`). The last occurrence wins (a restarted serve). Names absent from the log are left out.
/// The release's numerics ([`ComparabilityKey::extra`]): compared and named, for speed and answers alike
/// ([`release_changes`]); on the reference serve, flash attention and a unified KV cache under concurrency
/// change greedy output (docs/drift.md).
pub fn numerics_of_log(log: &str) -> BTreeMap<String, String> {
    use regex::Regex;
    use std::sync::OnceLock;
    static RES: OnceLock<Vec<(&'static str, Regex)>> = OnceLock::new();
    let res = RES.get_or_init(|| {
        [
            ("flash_attention", r"Flash Attention (enabled|disabled)"),
            (
                "flash_attention_param",
                r"llama_context: flash_attn\s*=\s*(\w+)",
            ),
            ("kv_unified", r"kv_unified = '(\w+)'"),
            ("kv_unified_param", r"llama_context: kv_unified\s*=\s*(\w+)"),
            ("cache_type_k", r"llama_kv_cache: .*\bK \((\w+)\)"),
            ("cache_type_v", r"llama_kv_cache: .*\bV \((\w+)\)"),
        ]
        .into_iter()
        .map(|(k, r)| (k, Regex::new(r).expect("valid regex")))
        .collect()
    });
    let mut found = BTreeMap::new();
    for line in log.lines() {
        for (k, re) in res {
            if let Some(c) = re.captures(line) {
                found.insert(k.to_string(), c[1].to_string());
            }
        }
    }
    // The resolved setting over the parameter (`auto` resolves to enabled or disabled).
    for (k, param) in [
        ("flash_attention", "flash_attention_param"),
        ("kv_unified", "kv_unified_param"),
    ] {
        if let Some(v) = found.remove(param) {
            found.entry(k.to_string()).or_insert(v);
        }
    }
    found
}

/// The host's load per CPU during a run: the larger of the 1-minute load averages at its start and end
/// (`/proc/loadavg`, `run.json` `load_avg_start` / `load_avg_end`), divided by its logical CPU count. The
/// larger because a load that rose or fell during the run was there for part of it. None when the evidence
/// lacks either load (evidence written before servegate recorded them) or the CPU count.
pub fn load_per_cpu(start: Option<[f64; 3]>, end: Option<[f64; 3]>, cpus: usize) -> Option<f64> {
    let (s, e) = (start?[0], end?[0]);
    (cpus > 0 && s.is_finite() && e.is_finite()).then(|| s.max(e) / cpus as f64)
}

/// [`load_per_cpu`] of a run's `run.json`.
pub fn run_load_per_cpu(run: &RunSummary) -> Option<f64> {
    load_per_cpu(run.load_avg_start, run.load_avg_end, run.host.cpus)
}

/// The load a speed comparison counts: the load per CPU, at least 1.0. Below one runnable task per CPU every
/// task has a core of its own, so an idle host is not faster than a merely busy one; above it a CPU-bound
/// thread gets about `1 / load` of a core (fair share), so its speed scales with the inverse of this figure.
pub fn effective_load(per_cpu: f64) -> f64 {
    per_cpu.max(1.0)
}

/// The host-load difference that makes a run incomparable with a baseline for `usage`, or None when they are
/// comparable: only a [`KeyUse::Speed`] comparison counts load; it differs when the larger
/// [`effective_load`] exceeds the smaller by more than `max_ratio` times (`[assert.regression]
/// max_load_ratio`). `baseline` and `run` are loads per CPU ([`load_per_cpu`]; the baseline's is the median
/// of its windows'); either one unknown (older evidence) is comparable, as before servegate compared load.
/// The text names both loads and the bound: `host load 7.9 per CPU at this run vs 0.5 at the baseline:
/// 7.9x apart (a load per CPU below 1 counts as 1), bound 1.5x (max_load_ratio)`.
pub fn load_difference(
    baseline: Option<f64>,
    run: Option<f64>,
    usage: KeyUse,
    max_ratio: f64,
) -> Option<KeyDiff> {
    if usage != KeyUse::Speed {
        return None;
    }
    let (b, r) = (baseline?, run?);
    let ratio = load_ratio(b, r);
    (ratio > max_ratio).then(|| KeyDiff {
        field: "host_load_per_cpu".into(),
        baseline: Some(format!("{b:.1}")),
        run: Some(format!("{r:.1}")),
        text: Some(format!(
            "host load {r:.1} per CPU at this run vs {b:.1} at the baseline: {ratio:.1}x apart (a load \
             per CPU below 1 counts as 1), bound {max_ratio}x (max_load_ratio)"
        )),
    })
}

/// The ratio of the larger [`effective_load`] of two loads per CPU to the smaller (≥ 1).
pub fn load_ratio(a: f64, b: f64) -> f64 {
    let (a, b) = (effective_load(a), effective_load(b));
    a.max(b) / a.min(b)
}

/// The verdict text of an incomparable run: `not comparable with its baseline: model_sha256 … (baseline) vs
/// … (this run); cpus 2 (baseline) vs 8 (this run)`.
pub fn describe(diffs: &[KeyDiff]) -> String {
    format!(
        "not comparable with its baseline: {}",
        diffs
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ComparabilityKey {
        ComparabilityKey {
            model_sha256: Some(
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53".into(),
            ),
            engine: Some("llama.cpp server (xllamacpp)".into()),
            engine_version: Some("b11434".into()),
            device: Some("CPU / cpu".into()),
            cpu_model: Some("AMD EPYC 7B13".into()),
            cpus: Some("2".into()),
            max_tokens: Some("64".into()),
            temperature: Some("0".into()),
            prompts_sha256: Some("ab".into()),
            stream: Some("stream".into()),
            extra: BTreeMap::new(),
        }
    }

    #[test]
    fn speed_compares_the_effective_host_load_and_answers_never_do() {
        // The larger of start and end, per CPU; either load missing: unknown.
        assert_eq!(
            load_per_cpu(Some([3.0, 0.0, 0.0]), Some([5.0, 9.0, 9.0]), 2),
            Some(2.5)
        );
        assert_eq!(load_per_cpu(None, Some([5.0, 0.0, 0.0]), 2), None);
        assert_eq!(
            load_per_cpu(Some([5.0, 0.0, 0.0]), Some([5.0, 0.0, 0.0]), 0),
            None
        );
        // Below 1 per CPU counts as 1: an idle and a half-busy host are the same host.
        assert!(load_difference(Some(0.1), Some(0.9), KeyUse::Speed, 1.5).is_none());
        assert!(load_difference(Some(0.5), Some(1.4), KeyUse::Speed, 1.5).is_none());
        assert!(load_difference(Some(0.5), Some(1.6), KeyUse::Speed, 1.5).is_some());
        let d = load_difference(Some(0.5), Some(7.9), KeyUse::Speed, 1.5).unwrap();
        assert_eq!(d.field, "host_load_per_cpu");
        assert_eq!(
            d.to_string(),
            "host load 7.9 per CPU at this run vs 0.5 at the baseline: 7.9x apart (a load per CPU below 1 counts as 1), bound 1.5x (max_load_ratio)"
        );
        // Symmetric: a quiet run against a loaded baseline is as incomparable.
        assert!(load_difference(Some(8.0), Some(1.0), KeyUse::Speed, 1.5).is_some());
        assert!(load_difference(Some(8.0), Some(6.0), KeyUse::Speed, 1.5).is_none());
        assert!(load_difference(Some(8.0), Some(1.0), KeyUse::Answers, 1.5).is_none());
        assert!(load_difference(None, Some(7.9), KeyUse::Speed, 1.5).is_none());
        assert!(load_difference(Some(7.9), None, KeyUse::Speed, 1.5).is_none());
    }

    #[test]
    fn equal_keys_are_comparable_and_each_differing_field_is_named() {
        assert!(differences(&key(), &key(), KeyUse::Speed).is_empty());
        let mut other = key();
        other.model_sha256 = Some("0".repeat(64));
        other.cpus = Some("8".into());
        let d = differences(&key(), &other, KeyUse::Speed);
        assert_eq!(
            d.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(),
            ["model_sha256", "cpus"]
        );
        let text = describe(&d);
        assert!(text.starts_with("not comparable with its baseline: model_sha256 b179c9523d0e… (baseline) vs 000000000000… (this run); cpus 2 (baseline) vs 8 (this run)"), "{text}");
    }

    #[test]
    fn answers_ignore_the_host_and_the_release_is_compared_and_named_never_incomparable() {
        let mut other = key();
        other.cpus = Some("8".into());
        other.cpu_model = Some("Intel".into());
        assert!(differences(&key(), &other, KeyUse::Answers).is_empty());
        assert_eq!(differences(&key(), &other, KeyUse::Speed).len(), 2);
        // What the release changed: the engine version and the numerics settings of its log.
        let mut base = key();
        base.extra
            .insert("flash_attention".into(), "enabled".into());
        base.extra.insert("cache_type_k".into(), "f16".into());
        let mut run = key();
        run.engine_version = Some("b11500".into());
        run.extra
            .insert("flash_attention".into(), "disabled".into());
        for usage in [KeyUse::Speed, KeyUse::Answers] {
            assert!(differences(&base, &run, usage).is_empty(), "{usage:?}");
        }
        let changes = release_changes(&base, &run);
        assert_eq!(
            changes.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(),
            ["engine_version", "extra.flash_attention"]
        );
        assert_eq!(
            describe_release(&changes).unwrap(),
            "the release changed engine_version b11434 → b11500, flash_attention enabled → disabled"
        );
        assert!(describe_release(&release_changes(&base, &base)).is_none());
        // One baseline's windows are one release: there the release's fields count.
        let d = differences(&base, &run, KeyUse::Window);
        assert_eq!(
            d.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(),
            [
                "engine_version",
                "extra.cache_type_k",
                "extra.flash_attention"
            ]
        );
    }

    #[test]
    fn the_numerics_settings_are_read_as_llama_cpp_b11434_logs_them() {
        // Lines of llama-server b11434's startup log (tests/data/compare/llama-server-b11434-startup.log).
        let log = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/data/compare/llama-server-b11434-startup.log"),
        )
        .unwrap();
        let n = numerics_of_log(&log);
        assert_eq!(
            n.get("flash_attention").map(String::as_str),
            Some("enabled")
        );
        assert_eq!(n.get("kv_unified").map(String::as_str), Some("false"));
        assert_eq!(n.get("cache_type_k").map(String::as_str), Some("f16"));
        assert_eq!(n.get("cache_type_v").map(String::as_str), Some("f16"));
        // `-fa off`: the parameter line says off and no fused-ops line resolves it.
        let off = log
            .lines()
            .filter(|l| !l.contains("resolve_fused_ops"))
            .map(|l| {
                l.replace(
                    "flash_attn            = auto",
                    "flash_attn            = off",
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            numerics_of_log(&off)
                .get("flash_attention")
                .map(String::as_str),
            Some("off")
        );
    }

    #[test]
    fn a_field_stated_on_one_side_only_differs() {
        let mut run = key();
        run.model_sha256 = None;
        let d = differences(&key(), &run, KeyUse::Speed);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].to_string().ends_with("(not stated) (this run)"),
            "{}",
            d[0]
        );
    }
}
