//! Records: one JSON file per published measurement (`records/<id>.json`), provenance-strict. Owns the record
//! schema ([`Record`], documented field by field in docs/records.md), its validation ([`check_dir`]: every
//! problem with file and field), atomic writing ([`write_new`]) and building a record from a gate run's
//! evidence ([`from_run`]). It renders nothing (that is `leaderboard`) and starts nothing (that is `runner`).
//!
//! The statistic is the median as `stats::median` defines it (mean of the two middle values for an even
//! count); a stated value matches when it is within half a unit of its last stated decimal of the median
//! recomputed from the values (either direction of a tie is accepted).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::analysis::stats;
use crate::error::exit;

/// The schema id every record carries in `schema`.
pub const RECORD_SCHEMA: &str = "servegate.record/1";

/// Below this many values a record is valid but `indicative` wherever it is shown.
pub const INDICATIVE_BELOW_N: u32 = 3;

/// Metric names and the units each may be stated in.
pub const METRICS: &[(&str, &[&str])] = &[
    ("decode_rate", &["tok/s"]),
    ("first_token", &["s", "ms"]),
    ("prefill_rate", &["tok/s"]),
    ("e2e_latency", &["s", "ms"]),
    ("output_throughput", &["tok/s"]),
    ("request_throughput", &["req/s"]),
];

/// `source.kind` values.
pub const SOURCE_KINDS: &[&str] = &["gate_run", "published"];

/// `known_answer.result` values.
pub const KNOWN_ANSWER_RESULTS: &[&str] = &["pass", "fail", "not_checked", "not_published"];

/// A key that must be present but may be `null` ("not known / not published"): `Option<T>` without serde's
/// missing-means-None default.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

/// One measurement. Every key is required unless marked optional; a `nullable` key must be present and
/// may be `null`, meaning "not known / not published" (shown as such, never guessed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Always [`RECORD_SCHEMA`].
    pub schema: String,
    /// Unique id; equals the file name without `.json`. `[a-z0-9][a-z0-9._-]*`.
    pub id: String,
    /// Date of the measurement, `YYYY-MM-DD` (UTC for gate runs).
    pub date: String,
    /// The machine: host name and what it is.
    pub host: String,
    /// The model measured.
    pub model: Model,
    /// The device it ran on (`AMD XDNA 2 NPU (/dev/accel/accel0)`, `CPU, 2 threads`).
    pub device: String,
    /// The route or code path (`fused`, `per-op`, `cpu`).
    pub route: String,
    /// What was measured, and in which unit.
    pub metric: Metric,
    /// The statistic `value` is: only `median` (as `stats::median` defines it).
    pub statistic: String,
    /// The stated figure, in `metric.unit`, rounded to `decimals`.
    pub value: f64,
    /// Decimal places `value`, `range` and `pair.other_value` are stated to (the precision every check uses).
    pub decimals: u32,
    /// Number of measurements the statistic is over.
    pub n: u32,
    /// Every value, in measurement order (nullable only for published records whose per-value figures were
    /// never published; then `values_unavailable` says so).
    #[serde(deserialize_with = "nullable")]
    pub values: Option<Vec<f64>>,
    /// Optional: why `values` is null (e.g. "per-repeat values not published; only median and range").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_unavailable: Option<String>,
    /// Optional: the judged requests that did not fail but whose figure could not be measured because of
    /// how their reply was delivered (`analysis::measure::unmeasured_cause`: a decode window under the
    /// minimum, a burst, a first token read late with later ones), in send order, each with its cause. They
    /// are left out of `values` and `n` (not slow, not fast: no figure), as the verdicts leave them out; the
    /// record is over `n` measured of `n + unmeasured.len()` judged. Absent when every reply was measured
    /// (and in records written before replies could be unmeasured).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<Unmeasured>,
    /// `[min, max]` of the values.
    pub range: [f64; 2],
    /// How the engine was driven.
    pub settings: Settings,
    /// The device hold (exclusive ticket) the measurement ran under.
    pub hold: Hold,
    /// 1-minute load average at start and end.
    pub load: Load,
    /// The known-answer check of the same run.
    pub known_answer: KnownAnswer,
    /// How the value was measured.
    pub instrument: Instrument,
    /// Where the evidence is.
    pub source: Source,
    /// Optional: present for a pair (A-B-B-A) record: the other runtime's figure, the ratio and the arm order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<Pair>,
    /// Notes, including the required "what would make it wrong" sentence.
    pub notes: Notes,
    /// Optional: where each provenance fact came from, by dotted field (`model.sha256` → `run.json
    /// serve.model_file (hashed at serve start)`, `settings.engine_version` → `the serve (/props build_info)`
    /// or `the gate's [record] table`). Written by the builders for gate runs; absent in older records.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<String, String>,
    /// Optional: present for a load record (one sweep point of a load gate, docs/records.md "Load records"):
    /// the point and the figures of its measured window that the throughput statistics are computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_point: Option<LoadPoint>,
}

/// One entry of `unmeasured`: a judged request with no measured figure and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Unmeasured {
    /// Optional: the arm (pair records, numbered as `pair.json` numbers them) the request belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<u32>,
    /// The request's index in its run (`requests/NN`), warm-ups counted.
    pub request: u32,
    /// The cause, as the measure code states it (`decode window 0.3 ms under the 5 ms minimum`).
    pub cause: String,
}

/// `load_point`: the sweep point of a load gate a load record measured (`servegate.load/1` evidence,
/// `analysis::load`'s definitions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadPoint {
    /// The point as trial names show it: `c=4`, `r=8`.
    pub point: String,
    /// Nullable: closed-loop concurrency (requests in flight).
    #[serde(deserialize_with = "nullable")]
    pub concurrency: Option<u32>,
    /// Nullable: open-loop arrival rate, requests/s.
    #[serde(deserialize_with = "nullable")]
    pub rate_rps: Option<f64>,
    /// Succeeded judged requests of the point (a load record is written only when every planned one succeeded).
    pub requests: u32,
    /// Their completion tokens (usage), summed.
    pub output_tokens: u64,
    /// The measured window, ms: first judged send to last judged end (`analysis::load::window_ms`).
    pub window_ms: f64,
}

/// `model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Name of the model or model pack (`Qwen3-1.7B-NPU2`, `SmolLM2-135M-Instruct`).
    pub name: String,
    /// Nullable: path of the model file or container as loaded.
    #[serde(deserialize_with = "nullable")]
    pub file: Option<String>,
    /// Lower-case hex SHA-256 of the file or container: 64 digits (`sha256_form` `full`), or the published
    /// prefix (`sha256_form` `prefix`, 8-63 digits, published records only).
    pub sha256: String,
    /// `full` or `prefix`.
    pub sha256_form: String,
    /// What was hashed: `file` or `container`.
    pub sha256_of: String,
    /// Nullable: quantisation / weights description (`Q4NX q4_1 tiles`, `Q8_0 GGUF`).
    #[serde(deserialize_with = "nullable")]
    pub weights: Option<String>,
}

impl Model {
    /// The `model` of a record made from a run: the gate's `[record]` name and weights, the file as loaded
    /// (published without home or checkout paths: [`public_path`]) and its full sha256 of the file.
    pub(super) fn of_run(spec: &RunRecordSpec, file: &str, sha256: String) -> Model {
        Model {
            name: spec.model_name.clone(),
            file: Some(public_path(file)),
            sha256,
            sha256_form: "full".into(),
            sha256_of: "file".into(),
            weights: Some(spec.weights.clone()),
        }
    }
}

impl Source {
    /// The `source` of a record made from a gate run: its evidence directory, the gate file it ran, the
    /// evidence digest (sha256 over the run's files: `evidence::digest`) and why the record was forced, if it was.
    pub(super) fn gate_run(
        evidence: String,
        gate_file: &str,
        digest: String,
        forced: Option<String>,
    ) -> Source {
        Source {
            kind: "gate_run".into(),
            evidence: Some(evidence),
            gate: Some(gate_file.to_string()),
            published: None,
            evidence_sha256: Some(digest),
            unverifiable: None,
            forced,
        }
    }
}

/// `metric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// One of [`METRICS`]: `decode_rate`, `first_token`, `prefill_rate`, `e2e_latency`.
    pub name: String,
    /// Unit: `tok/s` for rates, `s` or `ms` for times.
    pub unit: String,
    /// Nullable: condition qualifying the metric (`warm`).
    #[serde(deserialize_with = "nullable")]
    pub condition: Option<String>,
}

/// `settings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Engine name (`1bit`, `llama.cpp server`).
    pub engine: String,
    /// Nullable: engine version or commit.
    #[serde(deserialize_with = "nullable")]
    pub engine_version: Option<String>,
    /// Nullable: sampling (`temperature 0`, `greedy`).
    #[serde(deserialize_with = "nullable")]
    pub sampling: Option<String>,
    /// Nullable: max_tokens of the requests.
    #[serde(deserialize_with = "nullable")]
    pub max_tokens: Option<u32>,
    /// Nullable: prompt tokens of the request(s).
    #[serde(deserialize_with = "nullable")]
    pub prompt_tokens: Option<u32>,
    /// Nullable: streamed requests.
    #[serde(deserialize_with = "nullable")]
    pub stream: Option<bool>,
    /// Nullable: kernel set or backend description.
    #[serde(deserialize_with = "nullable")]
    pub backend: Option<String>,
}

/// `hold`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hold {
    /// Nullable: the hold or ticket (`one exclusive NPU ticket`); null when none was taken or not published.
    #[serde(deserialize_with = "nullable")]
    pub ticket: Option<String>,
    /// Nullable: its duration, seconds.
    #[serde(deserialize_with = "nullable")]
    pub duration_s: Option<f64>,
}

/// `load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Nullable: 1-minute load average at the start.
    #[serde(deserialize_with = "nullable")]
    pub load1_start: Option<f64>,
    /// Nullable: 1-minute load average at the end.
    #[serde(deserialize_with = "nullable")]
    pub load1_end: Option<f64>,
}

/// `known_answer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownAnswer {
    /// Nullable: the known-answer prompt.
    #[serde(deserialize_with = "nullable")]
    pub prompt: Option<String>,
    /// Nullable: the expected answer (text or pattern).
    #[serde(deserialize_with = "nullable")]
    pub expected: Option<String>,
    /// One of [`KNOWN_ANSWER_RESULTS`].
    pub result: String,
    /// Nullable: what was seen (`three identical "Paris" answers`).
    #[serde(deserialize_with = "nullable")]
    pub detail: Option<String>,
}

/// `instrument`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Instrument {
    /// How the value was measured (tool, client or server side, what was timed).
    pub method: String,
    /// Nullable: the metric definition it follows (quoted, or a reference to docs/metrics.md).
    #[serde(deserialize_with = "nullable")]
    pub metric_definition: Option<String>,
}

/// `source`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// `gate_run` (written from servegate evidence) or `published` (imported from a publication).
    pub kind: String,
    /// Nullable: evidence directory or log.
    #[serde(deserialize_with = "nullable")]
    pub evidence: Option<String>,
    /// Nullable: the gate file or script that produced it.
    #[serde(deserialize_with = "nullable")]
    pub gate: Option<String>,
    /// Nullable: where it was published (required for `published`).
    #[serde(deserialize_with = "nullable")]
    pub published: Option<String>,
    /// Optional: the digest of the evidence directory ([`crate::evidence::digest::digest_dir`]) the record
    /// was built from; required for `gate_run` records, so a later edit to the evidence is caught.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_sha256: Option<String>,
    /// Optional: why the record cannot be re-derived (`not published: the evidence lives on the first user's
    /// machines`). Required when `evidence` is null; the page marks such a record unverifiable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unverifiable: Option<String>,
    /// Optional: set when `records add --force` wrote the record from a run that failed or was incomplete:
    /// why (the first failing verdict or the accounting). The page flags such a record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
}

/// `pair`: an A-B-B-A comparison with another runtime on the same model file and hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pair {
    /// The other runtime (`FastFlowLM 1.0.12`).
    pub other_engine: String,
    /// The other runtime's figure, same metric, unit, statistic and `decimals`.
    pub other_value: f64,
    /// n of the other runtime's figure.
    pub other_n: u32,
    /// Nullable: `[min, max]` of the other runtime's values.
    #[serde(deserialize_with = "nullable")]
    pub other_range: Option<[f64; 2]>,
    /// `other_value / value`, rounded to `ratio_decimals`.
    pub ratio: f64,
    /// Decimal places of `ratio`.
    pub ratio_decimals: u32,
    /// `published` (the publication states this ratio) or `computed` (derived from the two stated figures).
    pub ratio_source: String,
    /// Optional: how the ratio was obtained or what the publication said of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_note: Option<String>,
    /// Arms in the order they ran, each `this` (this record's engine) or `other`.
    pub arm_order: Vec<String>,
    /// Optional: each arm's median, same order as `arm_order`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm_medians: Option<Vec<f64>>,
}

/// `notes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notes {
    /// Required: one sentence on what would make this figure wrong (one ticket at load 3-4, one prompt, ...).
    pub what_would_make_it_wrong: String,
    /// Optional: other notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other: Vec<String>,
}

impl Record {
    /// n < 3: valid, but shown as `indicative` everywhere.
    pub fn indicative(&self) -> bool {
        self.n < INDICATIVE_BELOW_N
    }

    /// True when `model.sha256` is only a published prefix.
    pub fn sha256_prefix_only(&self) -> bool {
        self.model.sha256_form == "prefix"
    }

    /// The hash as shown: its first 16 hex digits, then ` (prefix only)` when only a prefix was published.
    pub fn sha256_display(&self) -> String {
        let short: String = self.model.sha256.chars().take(16).collect();
        if self.sha256_prefix_only() {
            format!("{short} (prefix only)")
        } else {
            short
        }
    }

    /// `n = 5 of 6 judged measured; not measured: request 03 (cause)` (the first three, and how many more),
    /// as `records check` and `records add` show a record with [`Record::unmeasured`] entries.
    pub fn unmeasured_line(&self) -> String {
        let shown = unmeasured_text(&self.unmeasured[..self.unmeasured.len().min(3)]);
        let more = match self.unmeasured.len() {
            k if k > 3 => format!("; and {} more", k - 3),
            _ => String::new(),
        };
        format!(
            "{} of {} judged measured; not measured: {shown}{more}",
            self.n,
            self.n as usize + self.unmeasured.len()
        )
    }

    /// True when higher values are better (rates).
    pub fn higher_is_better(&self) -> bool {
        self.metric.name.ends_with("_rate") || self.metric.name.ends_with("_throughput")
    }

    /// `value` formatted to `decimals`.
    pub fn fmt(&self, x: f64) -> String {
        format!("{x:.*}", self.decimals.min(17) as usize) // clamped: validation reports decimals > 9; a huge one must not panic here
    }
}

/// One validation problem: the dotted field (`model.sha256`, `values`, `(json)`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted field path; `(json)` for a syntax error, `(file)` for I/O.
    pub field: String,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl Problem {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Half a unit of the last of `decimals` decimal places, with slack for binary floating point.
fn half_unit(decimals: u32) -> f64 {
    0.5 * 10f64.powi(-(decimals.min(15) as i32)) * (1.0 + 1e-9) + 1e-12
}

fn within(stated: f64, exact: f64, decimals: u32) -> bool {
    (stated - exact).abs() <= half_unit(decimals)
}

/// Parses and structurally checks one record's text. `Err` holds every structural problem found (syntax,
/// unknown keys, missing keys, wrong types), each with its field.
pub fn parse(text: &str) -> Result<Record, Vec<Problem>> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| vec![Problem::new("(json)", format!("invalid JSON: {e}"))])?;
    match serde_json::from_value::<Record>(value.clone()) {
        Ok(r) => Ok(r),
        Err(e) => {
            let mut problems = structural_problems(&value);
            if problems.is_empty() {
                problems.push(Problem::new("(record)", e.to_string()));
            }
            Err(problems)
        }
    }
}

/// A record with every key present (every optional one set), serialised: the keys the schema knows at
/// every level, derived from the types themselves (no hand-kept key list).
fn schema_keys(all: bool) -> Value {
    let some = |x: &str| if all { Some(x.to_string()) } else { None };
    let r = Record {
        schema: String::new(),
        id: String::new(),
        date: String::new(),
        host: String::new(),
        model: Model {
            name: String::new(),
            file: None,
            sha256: String::new(),
            sha256_form: String::new(),
            sha256_of: String::new(),
            weights: None,
        },
        device: String::new(),
        route: String::new(),
        metric: Metric {
            name: String::new(),
            unit: String::new(),
            condition: None,
        },
        statistic: String::new(),
        value: 0.0,
        decimals: 0,
        n: 0,
        values: None,
        values_unavailable: some(""),
        unmeasured: if all {
            vec![Unmeasured {
                arm: Some(0),
                request: 0,
                cause: String::new(),
            }]
        } else {
            Vec::new()
        },
        range: [0.0, 0.0],
        settings: Settings {
            engine: String::new(),
            engine_version: None,
            sampling: None,
            max_tokens: None,
            prompt_tokens: None,
            stream: None,
            backend: None,
        },
        hold: Hold {
            ticket: None,
            duration_s: None,
        },
        load: Load {
            load1_start: None,
            load1_end: None,
        },
        known_answer: KnownAnswer {
            prompt: None,
            expected: None,
            result: String::new(),
            detail: None,
        },
        instrument: Instrument {
            method: String::new(),
            metric_definition: None,
        },
        source: Source {
            kind: String::new(),
            evidence: None,
            gate: None,
            published: None,
            evidence_sha256: some(""),
            unverifiable: some(""),
            forced: some(""),
        },
        // `pair` is optional, but when present its own required keys apply: always shown here.
        pair: Some(Pair {
            other_engine: String::new(),
            other_value: 0.0,
            other_n: 0,
            other_range: None,
            ratio: 0.0,
            ratio_decimals: 0,
            ratio_source: String::new(),
            ratio_note: some(""),
            arm_order: Vec::new(),
            arm_medians: if all { Some(Vec::new()) } else { None },
        }),
        notes: Notes {
            what_would_make_it_wrong: String::new(),
            other: if all { vec![String::new()] } else { Vec::new() },
        },
        sources: BTreeMap::new(),
        // `load_point` is optional; when present its keys apply.
        load_point: Some(LoadPoint {
            point: String::new(),
            concurrency: None,
            rate_rps: None,
            requests: 0,
            output_tokens: 0,
            window_ms: 0.0,
        }),
    };
    let mut v = serde_json::to_value(r).expect("a record serialises");
    if all {
        // `sources` is a map with free keys: known at the top, its entries typed (strings) only.
        v["sources"] = Value::String(String::new());
    }
    v
}

/// Every structural problem of a record value, each with its dotted field: unknown and missing keys at
/// every level, found by comparing the value's keys with the schema's ([`schema_keys`]: every key, and the
/// required ones), then wrong types, each named by its path as `serde_path_to_error` reports it.
fn structural_problems(v: &Value) -> Vec<Problem> {
    let Some(obj) = v.as_object() else {
        return vec![Problem::new("(record)", "must be a JSON object")];
    };
    let (known, required) = (schema_keys(true), schema_keys(false));
    let mut out = Vec::new();
    let mut broken_keys = std::collections::BTreeSet::new();
    fn walk(
        path: &str,
        v: &serde_json::Map<String, Value>,
        known: &Value,
        required: &Value,
        top: &str,
        out: &mut Vec<Problem>,
        broken: &mut std::collections::BTreeSet<String>,
    ) {
        let (Some(k), Some(r)) = (known.as_object(), required.as_object()) else {
            return;
        };
        let at = |key: &str| {
            if path.is_empty() {
                key.to_string()
            } else {
                format!("{path}.{key}")
            }
        };
        for (key, val) in v {
            let top = if path.is_empty() { key.as_str() } else { top };
            match k.get(key) {
                None => {
                    let names: Vec<&str> = k.keys().map(String::as_str).collect();
                    out.push(Problem::new(
                        at(key),
                        format!("unknown key (expected one of: {})", names.join(", ")),
                    ));
                    broken.insert(top.to_string());
                }
                Some(kk) if kk.is_object() => {
                    if let Some(obj) = val.as_object() {
                        let empty = Value::Object(Default::default());
                        walk(
                            &at(key),
                            obj,
                            kk,
                            r.get(key).unwrap_or(&empty),
                            top,
                            out,
                            broken,
                        );
                    }
                }
                Some(_) => {}
            }
        }
        for key in r.keys() {
            if !v.contains_key(key) {
                let msg = if path.is_empty() {
                    "missing (required)"
                } else {
                    "missing (required; use null where the key allows it and the fact is unknown)"
                };
                out.push(Problem::new(at(key), msg));
                broken.insert(if path.is_empty() {
                    key.clone()
                } else {
                    top.to_string()
                });
            }
        }
    }
    walk("", obj, &known, &required, "", &mut out, &mut broken_keys);
    // `pair` is optional at the top: its absence is no problem.
    out.retain(|p| p.field != "pair" || obj.contains_key("pair"));
    // So is `load_point` (load records only).
    out.retain(|p| p.field != "load_point" || obj.contains_key("load_point"));
    fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> Result<(), (String, String)> {
        serde_path_to_error::deserialize::<_, T>(v)
            .map(|_| ())
            .map_err(|e| (e.path().to_string(), e.inner().to_string()))
    }
    for (key, val) in obj {
        if broken_keys.contains(key) || !known.as_object().is_some_and(|k| k.contains_key(key)) {
            continue;
        }
        let res = match key.as_str() {
            "schema" | "id" | "date" | "host" | "device" | "route" | "statistic" => {
                typed::<String>(val)
            }
            "model" => typed::<Model>(val),
            "metric" => typed::<Metric>(val),
            "value" => typed::<f64>(val),
            "decimals" | "n" => typed::<u32>(val),
            "values" => typed::<Option<Vec<f64>>>(val),
            "values_unavailable" => typed::<Option<String>>(val),
            "unmeasured" => typed::<Vec<Unmeasured>>(val),
            "range" => typed::<[f64; 2]>(val),
            "settings" => typed::<Settings>(val),
            "hold" => typed::<Hold>(val),
            "load" => typed::<Load>(val),
            "known_answer" => typed::<KnownAnswer>(val),
            "instrument" => typed::<Instrument>(val),
            "source" => typed::<Source>(val),
            "pair" => typed::<Option<Pair>>(val),
            "load_point" => typed::<Option<LoadPoint>>(val),
            "notes" => typed::<Notes>(val),
            "sources" => typed::<BTreeMap<String, String>>(val),
            _ => Ok(()),
        };
        if let Err((path, msg)) = res {
            let field = if path == "." || path.is_empty() {
                key.clone()
            } else if path.starts_with('[') {
                format!("{key}{path}")
            } else {
                format!("{key}.{path}")
            };
            out.push(Problem::new(field, msg));
        }
    }
    out
}

fn is_calendar_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    if !b
        .iter()
        .enumerate()
        .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
    {
        return false;
    }
    let (Ok(y), Ok(m), Ok(d)) = (
        s[0..4].parse::<i32>(),
        s[5..7].parse::<u8>(),
        s[8..10].parse::<u8>(),
    ) else {
        return false;
    };
    let Ok(month) = time::Month::try_from(m) else {
        return false;
    };
    time::Date::from_calendar_date(y, month, d).is_ok()
}

fn is_id(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

fn is_hex_lower(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Semantic checks of a parsed record; `file_stem` is its file name without `.json` (the id must equal it).
pub fn validate(r: &Record, file_stem: &str) -> Vec<Problem> {
    let mut p = Vec::new();
    let mut bad = |field: &str, message: String| p.push(Problem::new(field, message));

    if r.schema != RECORD_SCHEMA {
        bad(
            "schema",
            format!("{:?}, expected {RECORD_SCHEMA:?}", r.schema),
        );
    }
    if !is_id(&r.id) {
        bad("id", format!("{:?} is not an id: lower-case letters, digits, '.', '_', '-', starting with a letter or digit", r.id));
    }
    if r.id != file_stem {
        bad(
            "id",
            format!(
                "{:?} differs from the file name {:?} (a record is records/<id>.json)",
                r.id,
                format!("{file_stem}.json")
            ),
        );
    }
    if !is_calendar_date(&r.date) {
        bad(
            "date",
            format!("{:?} is not a YYYY-MM-DD calendar date", r.date),
        );
    }
    for (field, text) in [
        ("host", &r.host),
        ("device", &r.device),
        ("route", &r.route),
        ("model.name", &r.model.name),
        ("settings.engine", &r.settings.engine),
        ("instrument.method", &r.instrument.method),
    ] {
        if text.trim().is_empty() {
            bad(field, "empty (required)".into());
        }
    }
    let published = r.source.kind == "published";

    // model.sha256
    match r.model.sha256_form.as_str() {
        "full" => {
            if !crate::io::hash::is_full_hex(&r.model.sha256) {
                bad(
                    "model.sha256",
                    format!(
                        "{:?} is not a sha256: 64 lower-case hex digits expected, got {} characters{}",
                        r.model.sha256,
                        r.model.sha256.chars().count(),
                        if published { " (a published prefix is declared with sha256_form \"prefix\")" } else { "" }
                    ),
                );
            }
        }
        "prefix" => {
            let len = r.model.sha256.len();
            if !published {
                bad("model.sha256_form", "\"prefix\" is allowed only for published records (source.kind \"published\"); a gate run hashes the whole file".into());
            }
            if !is_hex_lower(&r.model.sha256) || !(8..64).contains(&len) {
                bad(
                    "model.sha256",
                    format!(
                        "{:?}: a prefix is 8 to 63 lower-case hex digits",
                        r.model.sha256
                    ),
                );
            }
        }
        other => bad(
            "model.sha256_form",
            format!("{other:?} is not one of \"full\", \"prefix\""),
        ),
    }
    if !matches!(r.model.sha256_of.as_str(), "file" | "container") {
        bad(
            "model.sha256_of",
            format!(
                "{:?} is not one of \"file\", \"container\"",
                r.model.sha256_of
            ),
        );
    }

    // metric and unit
    match METRICS.iter().find(|(name, _)| *name == r.metric.name) {
        None => {
            let names: Vec<&str> = METRICS.iter().map(|(n, _)| *n).collect();
            bad(
                "metric.name",
                format!("{:?} is not one of {}", r.metric.name, names.join(", ")),
            );
        }
        Some((name, units)) => {
            if !units.contains(&r.metric.unit.as_str()) {
                bad(
                    "metric.unit",
                    format!(
                        "{:?} is not a unit of {name} (expected {})",
                        r.metric.unit,
                        units.join(" or ")
                    ),
                );
            }
        }
    }
    if r.statistic != "median"
        && !(r.load_point.is_some()
            && super::load_records::STATISTICS.contains(&r.statistic.as_str()))
    {
        bad(
            "statistic",
            format!("{:?}: only \"median\" is supported (a load record, with load_point, may also state p90, p95, p99 or window)", r.statistic),
        );
    }
    if r.decimals > 9 {
        bad("decimals", format!("{} is more than 9", r.decimals));
    }
    if let Some(pair) = r.pair.as_ref().filter(|p| p.ratio_decimals > 9) {
        bad(
            "pair.ratio_decimals",
            format!("{} is more than 9", pair.ratio_decimals),
        );
    }
    if !r.value.is_finite() || r.value < 0.0 {
        bad(
            "value",
            format!("{} is not a finite non-negative number", r.value),
        );
    }
    if r.n == 0 {
        bad("n", "0: a record is at least one measurement".into());
    }
    let d = r.decimals;
    let [lo, hi] = r.range;
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        bad("range", format!("[{lo}, {hi}] is not [min, max]"));
    }
    if !r.unmeasured.is_empty() {
        let judged = r.n as usize + r.unmeasured.len();
        if let Some((i, _)) = r
            .unmeasured
            .iter()
            .enumerate()
            .find(|(_, u)| u.cause.trim().is_empty())
        {
            bad(
                &format!("unmeasured[{i}].cause"),
                "empty: an unmeasured request states why it has no figure".into(),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some((i, u)) = r
            .unmeasured
            .iter()
            .enumerate()
            .find(|(_, u)| !seen.insert((u.arm, u.request)))
        {
            bad(
                &format!("unmeasured[{i}]"),
                format!("request {:02} is listed twice", u.request),
            );
        }
        if r.n == 0 || (r.n as f64) < crate::judge::MIN_MEASURED_SHARE * judged as f64 {
            bad(
                "unmeasured",
                format!(
                    "{} of {judged} judged replies measured: under half, no median stands for the run (its verdict is INDETERMINATE)",
                    r.n
                ),
            );
        }
        if r.values.is_none() {
            bad(
                "unmeasured",
                "set although values is null: the unmeasured are named beside the measured values"
                    .into(),
            );
        }
    }
    match &r.values {
        Some(values) => {
            if r.values_unavailable.is_some() {
                bad("values_unavailable", "set although values are given".into());
            }
            if values.len() != r.n as usize {
                bad(
                    "n",
                    format!("{} but values has {} entries", r.n, values.len()),
                );
            }
            if let Some((i, v)) = values
                .iter()
                .enumerate()
                .find(|(_, v)| !v.is_finite() || **v < 0.0)
            {
                bad(
                    "values",
                    format!("values[{i}] = {v}: every value must be a finite non-negative number"),
                );
            } else if !values.is_empty() {
                let median = super::load_records::percentile_of(&r.statistic, values)
                    .unwrap_or_else(|| stats::median(values).unwrap_or(f64::NAN));
                if !within(r.value, median, d) {
                    bad(
                        "value",
                        format!(
                            "{} does not match the {} recomputed from values, {} (to {d} decimals: {}; median of an even count is the mean of the two middle values; percentiles numpy's linear method)",
                            r.fmt(r.value),
                            r.statistic,
                            trim_float(median),
                            r.fmt(median)
                        ),
                    );
                }
                let (mn, mx) = (
                    stats::min(values).unwrap_or(f64::NAN),
                    stats::max(values).unwrap_or(f64::NAN),
                );
                if !within(lo, mn, d) || !within(hi, mx, d) {
                    bad(
                        "range",
                        format!(
                            "[{}, {}] does not match min and max of values, [{}, {}]",
                            r.fmt(lo),
                            r.fmt(hi),
                            trim_float(mn),
                            trim_float(mx)
                        ),
                    );
                }
            }
        }
        None => {
            match &r.values_unavailable {
                Some(why) if !why.trim().is_empty() => {}
                _ => bad(
                    "values",
                    "null needs values_unavailable saying why the per-value figures are missing"
                        .into(),
                ),
            }
            if !published && (r.statistic != "window" || r.load_point.is_none()) {
                bad(
                    "values",
                    "every value is required for a gate_run record".into(),
                );
            }
            if lo <= hi && (r.value < lo - half_unit(d) || r.value > hi + half_unit(d)) {
                bad(
                    "value",
                    format!(
                        "{} lies outside range [{}, {}]",
                        r.fmt(r.value),
                        r.fmt(lo),
                        r.fmt(hi)
                    ),
                );
            }
        }
    }

    // settings, hold, load
    if let Some(dur) = r.hold.duration_s {
        if !dur.is_finite() || dur < 0.0 {
            bad(
                "hold.duration_s",
                format!("{dur} is not a finite non-negative number of seconds"),
            );
        }
    }
    for (field, v) in [
        ("load.load1_start", r.load.load1_start),
        ("load.load1_end", r.load.load1_end),
    ] {
        if let Some(x) = v {
            if !x.is_finite() || x < 0.0 {
                bad(field, format!("{x} is not a load average"));
            }
        }
    }
    if !KNOWN_ANSWER_RESULTS.contains(&r.known_answer.result.as_str()) {
        bad(
            "known_answer.result",
            format!(
                "{:?} is not one of {}",
                r.known_answer.result,
                KNOWN_ANSWER_RESULTS.join(", ")
            ),
        );
    }

    // source and what gate runs must carry
    match r.source.kind.as_str() {
        "published" => {
            if r.source
                .published
                .as_deref()
                .map(str::trim)
                .unwrap_or("")
                .is_empty()
            {
                bad(
                    "source.published",
                    "required for a published record: where it was published".into(),
                );
            }
        }
        "gate_run" => {
            let given = |o: &Option<String>| o.as_deref().is_some_and(|t| !t.trim().is_empty());
            let required: [(&str, bool); 10] = [
                ("model.weights", given(&r.model.weights)),
                ("source.evidence", given(&r.source.evidence)),
                ("source.gate", given(&r.source.gate)),
                ("model.file", given(&r.model.file)),
                (
                    "source.evidence_sha256",
                    r.source
                        .evidence_sha256
                        .as_deref()
                        .is_some_and(crate::io::hash::is_full_hex),
                ),
                ("load.load1_start", r.load.load1_start.is_some()),
                ("load.load1_end", r.load.load1_end.is_some()),
                ("settings.engine_version", given(&r.settings.engine_version)),
                (
                    "instrument.metric_definition",
                    given(&r.instrument.metric_definition),
                ),
                (
                    "known_answer.result",
                    r.known_answer.result != "not_published",
                ),
            ];
            for (field, ok) in required {
                if !ok {
                    bad(
                        field,
                        "required (not null, not empty, not \"not_published\") for a gate_run record".into(),
                    );
                }
            }
        }
        other => bad(
            "source.kind",
            format!("{other:?} is not one of {}", SOURCE_KINDS.join(", ")),
        ),
    }

    if r.source.evidence.is_none()
        && r.source
            .unverifiable
            .as_deref()
            .map(str::trim)
            .unwrap_or("")
            .is_empty()
    {
        bad(
            "source.unverifiable",
            "required when source.evidence is null: why the record cannot be re-derived (\"not published: ...\")".into(),
        );
    }

    // notes
    let sentence = r.notes.what_would_make_it_wrong.trim();
    if sentence.split_whitespace().count() < 4 {
        bad(
            "notes.what_would_make_it_wrong",
            format!("{sentence:?}: required, a sentence saying what would make this figure wrong"),
        );
    }

    // pair
    if let Some(pair) = &r.pair {
        if pair.other_engine.trim().is_empty() {
            bad("pair.other_engine", "empty (required)".into());
        }
        if !pair.other_value.is_finite() || pair.other_value <= 0.0 {
            bad(
                "pair.other_value",
                format!("{} is not a finite positive number", pair.other_value),
            );
        }
        if pair.other_n == 0 {
            bad("pair.other_n", "0".into());
        }
        if let Some([olo, ohi]) = pair.other_range {
            if olo > ohi
                || pair.other_value < olo - half_unit(d)
                || pair.other_value > ohi + half_unit(d)
            {
                bad(
                    "pair.other_range",
                    format!(
                        "[{}, {}] is not a [min, max] containing other_value {}",
                        r.fmt(olo),
                        r.fmt(ohi),
                        r.fmt(pair.other_value)
                    ),
                );
            }
        }
        if r.value <= 0.0 {
            bad(
                "value",
                format!(
                    "{}: a pair record's figure must be positive for its ratio to be checked",
                    r.value
                ),
            );
        } else if pair.other_value.is_finite() {
            let exact = pair.other_value / r.value;
            // The stated inputs are themselves rounded to `decimals`: allow their rounding to carry into the ratio.
            let carried = exact * (half_unit(d) / r.value + half_unit(d) / pair.other_value);
            if (pair.ratio - exact).abs() > half_unit(pair.ratio_decimals) + carried {
                bad(
                    "pair.ratio",
                    format!(
                        "{} is not other_value / value = {} / {} = {:.*}",
                        pair.ratio,
                        r.fmt(pair.other_value),
                        r.fmt(r.value),
                        pair.ratio_decimals.min(17) as usize,
                        exact
                    ),
                );
            }
        }
        if !matches!(pair.ratio_source.as_str(), "published" | "computed") {
            bad(
                "pair.ratio_source",
                format!(
                    "{:?} is not one of \"published\", \"computed\"",
                    pair.ratio_source
                ),
            );
        }
        let arms_ok = pair.arm_order.len() >= 2
            && pair.arm_order.iter().all(|a| a == "this" || a == "other")
            && pair.arm_order.iter().any(|a| a == "this")
            && pair.arm_order.iter().any(|a| a == "other");
        if !arms_ok {
            bad("pair.arm_order", format!("{:?}: the arms in the order they ran, each \"this\" or \"other\", both present", pair.arm_order));
        }
        if let Some(medians) = &pair.arm_medians {
            if medians.len() != pair.arm_order.len() {
                bad(
                    "pair.arm_medians",
                    format!(
                        "{} entries for {} arms",
                        medians.len(),
                        pair.arm_order.len()
                    ),
                );
            } else {
                for (i, (arm, m)) in pair.arm_order.iter().zip(medians).enumerate() {
                    let range = if arm == "this" {
                        Some(r.range)
                    } else {
                        pair.other_range
                    };
                    if let Some([a, b]) = range {
                        if *m < a - half_unit(d) || *m > b + half_unit(d) {
                            bad("pair.arm_medians", format!("arm {} ({arm}) median {} lies outside that runtime's range [{}, {}]", i + 1, r.fmt(*m), r.fmt(a), r.fmt(b)));
                        }
                    }
                }
            }
        }
    }
    p.extend(super::load_records::validate(r));
    p
}

/// A float without trailing noise (`4.275`, `39.25`).
fn trim_float(x: f64) -> String {
    let s = format!("{x:.9}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// One record file's outcome.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The file.
    pub file: PathBuf,
    /// The record, when it parsed.
    pub record: Option<Record>,
    /// Every problem found.
    pub problems: Vec<Problem>,
}

/// Reads and checks one file (the id must equal its file stem).
pub fn check_file(file: &Path) -> Checked {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            return Checked {
                file: file.to_path_buf(),
                record: None,
                problems: vec![Problem::new("(file)", format!("cannot read: {e}"))],
            }
        }
    };
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    match parse(&text) {
        Ok(r) => {
            let problems = validate(&r, &stem);
            Checked {
                file: file.to_path_buf(),
                record: Some(r),
                problems,
            }
        }
        Err(problems) => Checked {
            file: file.to_path_buf(),
            record: None,
            problems,
        },
    }
}

/// The `*.json` files of `dir`, sorted by name.
pub fn record_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Checks every `*.json` record of `dir`, each on its own and then together (ids unique). Sorted by file.
pub fn check_dir(dir: &Path) -> std::io::Result<Vec<Checked>> {
    let mut checked: Vec<Checked> = record_files(dir)?.iter().map(|f| check_file(f)).collect();
    let mut by_id: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in checked.iter().enumerate() {
        if let Some(r) = &c.record {
            by_id.entry(r.id.clone()).or_default().push(i);
        }
    }
    cross_check_pairs(&mut checked);
    for (id, idx) in by_id {
        if idx.len() > 1 {
            let names: Vec<String> = idx
                .iter()
                .map(|&i| checked[i].file.display().to_string())
                .collect();
            for &i in &idx {
                checked[i].problems.push(Problem::new(
                    "id",
                    format!("{id:?} is not unique: used by {}", names.join(", ")),
                ));
            }
        }
    }
    Ok(checked)
}

/// Where a record's `source.evidence` is: the path as written when it exists (relative paths are relative
/// to the working directory, the repository root in CI), else relative to the parent of the record
/// directory (`records/../<path>`).
pub fn evidence_path(records_dir: &Path, evidence: &str) -> PathBuf {
    let p = PathBuf::from(evidence);
    if p.is_absolute() || p.exists() {
        return p;
    }
    match records_dir.parent() {
        Some(parent) if parent.join(&p).exists() => parent.join(&p),
        _ => p,
    }
}

/// The [`RunRecordSpec`] a record states about itself (what the evidence cannot tell), to rebuild it.
pub(super) fn spec_of(r: &Record, theirs: bool) -> RunRecordSpec {
    RunRecordSpec {
        publish_host: false,
        id: r.id.clone(),
        metric: r.metric.name.clone(),
        model_name: r.model.name.clone(),
        model_file: PathBuf::from(r.model.file.clone().unwrap_or_default()),
        weights: r.model.weights.clone().unwrap_or_default(),
        device: r.device.clone(),
        route: r.route.clone(),
        // A theirs record's engine is theirs' runtime (from the evidence); the builder takes ours' engine
        // from the spec, which a theirs record names as its other engine.
        engine: match &r.pair {
            Some(p) if theirs => p.other_engine.clone(),
            _ => r.settings.engine.clone(),
        },
        engine_version: r.settings.engine_version.clone(),
        backend: r.settings.backend.clone(),
        hold_ticket: r.hold.ticket.clone(),
        what_would_make_it_wrong: r.notes.what_would_make_it_wrong.clone(),
        notes: Vec::new(),
    }
}

/// Re-derives a `gate_run` record from its evidence and names the first stated figure or fact that differs
/// (empty when the record is what its evidence gives). The evidence is re-judged with the same judge as
/// `servegate judge` ([`crate::judge::judge`] / [`crate::judge::judge_pair`], through the record builders),
/// and every compared figure is compared exactly as stated, at the record's `decimals`: `values` one by one,
/// `value`, `n`, `range`, the pair's other figure, n and ratio, `model.sha256` and `model.file` (from
/// `serve.model_file` where the evidence has it), the evidence digest, `date`, `load`, `max_tokens`,
/// `stream`, `known_answer.result`, and for a theirs record its engine, version, device and route.
/// Published records (no evidence) give no problem here: `validate` requires their `unverifiable` reason.
pub fn rederive(records_dir: &Path, r: &Record) -> Vec<Problem> {
    rederive_with(records_dir, r, &mut BTreeMap::new())
}

/// [`rederive`], with the evidence digests already computed (by directory) kept in `digests`, so records
/// citing one run directory digest it once.
fn rederive_with(
    records_dir: &Path,
    r: &Record,
    digests: &mut BTreeMap<PathBuf, String>,
) -> Vec<Problem> {
    if r.source.kind != "gate_run" {
        return Vec::new();
    }
    let Some(evidence) = r
        .source
        .evidence
        .as_deref()
        .filter(|e| !e.trim().is_empty())
    else {
        return Vec::new(); // validate reports the missing evidence
    };
    let dir = evidence_path(records_dir, evidence);
    if !dir.is_dir() {
        return vec![Problem::new(
            "source.evidence",
            format!("{evidence:?} does not exist (looked at {}): a gate_run record is re-derived from its evidence", dir.display()),
        )];
    }
    if let Some(stated) = &r.source.evidence_sha256 {
        let digest = match digests.get(&dir) {
            Some(d) => Ok(d.clone()),
            None => crate::evidence::digest::digest_dir(&dir).inspect(|d| {
                digests.insert(dir.clone(), d.clone());
            }),
        };
        match digest {
            Ok(d) if &d == stated => {}
            Ok(d) => {
                return vec![Problem::new(
                    "source.evidence_sha256",
                    format!("{stated} but the evidence directory {} digests to {d}: the evidence was edited after the record was written", dir.display()),
                )]
            }
            Err(e) => return vec![Problem::new("source.evidence", format!("{}: {e}", dir.display()))],
        }
    }
    let gate = match crate::spec::load(&dir.join(crate::evidence::layout::GATE_FILE)) {
        Ok(g) => g,
        Err(e) => {
            return vec![Problem::new(
                "source.evidence",
                format!("its gate.toml: {e}"),
            )]
        }
    };
    if gate.load.is_some() {
        return super::load_records::rederive(&gate, &dir, r);
    }
    let built = if crate::evidence::is_pair_dir(&dir) {
        crate::analysis::load_pair(&dir).map(|pe| {
            // The record's side: the role of the arms it calls `this`.
            let role = r
                .pair
                .as_ref()
                .and_then(|p| p.arm_order.iter().position(|a| a == "this"))
                .and_then(|k| pe.summary.arms.get(k))
                .map(|a| a.role.clone())
                .unwrap_or_else(|| "ours".into());
            from_pair_run_as(&gate, &pe, &spec_of(r, role == "theirs"), &role)
        })
    } else {
        crate::analysis::load(&dir)
            .map(|ev| build_run(&gate, &ev, &spec_of(r, false), Some(r), false))
    };
    let want = match built {
        Err(e) => {
            return vec![Problem::new(
                "source.evidence",
                format!("cannot be loaded: {e}"),
            )]
        }
        Ok(Err(e)) => {
            return vec![Problem::new(
                "source.evidence",
                format!("gives no record: {e}"),
            )]
        }
        Ok(Ok(w)) => w,
    };
    match first_difference(r, &want) {
        Some((field, stated, derived)) => vec![Problem::new(
            field,
            format!(
                "states {stated} but the re-judged evidence {} gives {derived}",
                dir.display()
            ),
        )],
        None => Vec::new(),
    }
}

/// The first field where `r` (as stated) and `want` (re-derived) differ: (field, stated, derived), each
/// figure formatted at `r`'s decimals.
pub(super) fn first_difference(r: &Record, want: &Record) -> Option<(String, String, String)> {
    let f = |x: f64| r.fmt(x);
    let opt = |x: Option<f64>| x.map(f).unwrap_or_else(|| "null".into());
    let mut diffs: Vec<(String, String, String)> = Vec::new();
    let mut cmp = |field: String, a: String, b: String| {
        if a != b {
            diffs.push((field, a, b));
        }
    };
    let (rv, wv) = (
        r.values.clone().unwrap_or_default(),
        want.values.clone().unwrap_or_default(),
    );
    cmp("n".into(), r.n.to_string(), want.n.to_string());
    for (i, (a, b)) in rv.iter().zip(&wv).enumerate() {
        cmp(format!("values[{i}]"), f(*a), f(*b));
    }
    // The unmeasured replies (none in a record written before they were told apart) are the ones the
    // measure code leaves out of the re-judged evidence: the same requests, for the same causes.
    let none = |u: &[Unmeasured]| {
        if u.is_empty() {
            "none".to_string()
        } else {
            format!("[{}]", unmeasured_text(u))
        }
    };
    cmp(
        "unmeasured".into(),
        none(&r.unmeasured),
        none(&want.unmeasured),
    );
    cmp("value".into(), f(r.value), f(want.value));
    cmp("range[0]".into(), f(r.range[0]), f(want.range[0]));
    cmp("range[1]".into(), f(r.range[1]), f(want.range[1]));
    if let (Some(p), Some(q)) = (&r.pair, &want.pair) {
        cmp(
            "pair.other_value".into(),
            f(p.other_value),
            f(q.other_value),
        );
        cmp(
            "pair.other_n".into(),
            p.other_n.to_string(),
            q.other_n.to_string(),
        );
        cmp(
            "pair.ratio".into(),
            format!("{:.*}", p.ratio_decimals.min(9) as usize, p.ratio),
            format!("{:.*}", p.ratio_decimals.min(9) as usize, q.ratio),
        );
        cmp(
            "pair.other_engine".into(),
            p.other_engine.clone(),
            q.other_engine.clone(),
        );
    } else {
        cmp(
            "pair".into(),
            r.pair.is_some().to_string(),
            want.pair.is_some().to_string(),
        );
    }
    cmp(
        "model.sha256".into(),
        r.model.sha256.clone(),
        want.model.sha256.clone(),
    );
    // As published: a record written before paths were made public (`/root/...`) states the same file as
    // its re-derivation (`~/...`).
    cmp(
        "model.file".into(),
        format!("{:?}", r.model.file.as_deref().map(public_path)),
        format!("{:?}", want.model.file.as_deref().map(public_path)),
    );
    cmp(
        "source.evidence_sha256".into(),
        format!("{:?}", r.source.evidence_sha256),
        format!("{:?}", want.source.evidence_sha256),
    );
    cmp("date".into(), r.date.clone(), want.date.clone());
    cmp(
        "load.load1_start".into(),
        opt(r.load.load1_start),
        opt(want.load.load1_start),
    );
    cmp(
        "load.load1_end".into(),
        opt(r.load.load1_end),
        opt(want.load.load1_end),
    );
    cmp(
        "settings.max_tokens".into(),
        format!("{:?}", r.settings.max_tokens),
        format!("{:?}", want.settings.max_tokens),
    );
    cmp(
        "settings.stream".into(),
        format!("{:?}", r.settings.stream),
        format!("{:?}", want.settings.stream),
    );
    let forced = |x: &Record| match x.source.forced {
        Some(_) => "set (the run failed its verdicts)",
        None => "null (the run passed its verdicts)",
    };
    cmp(
        "source.forced".into(),
        forced(r).into(),
        forced(want).into(),
    );
    cmp(
        "known_answer.result".into(),
        r.known_answer.result.clone(),
        want.known_answer.result.clone(),
    );
    cmp(
        "settings.engine".into(),
        r.settings.engine.clone(),
        want.settings.engine.clone(),
    );
    if r.route == THEIRS_NOT_PUBLISHED || want.route == THEIRS_NOT_PUBLISHED {
        cmp(
            "settings.engine_version".into(),
            format!("{:?}", r.settings.engine_version),
            format!("{:?}", want.settings.engine_version),
        );
        cmp("device".into(), r.device.clone(), want.device.clone());
        cmp("route".into(), r.route.clone(), want.route.clone());
    }
    diffs.into_iter().next()
}

/// The two records of one pair run (same `source.evidence` and metric) checked against each other: each
/// record's `pair.other_value` and `other_n` must be the other record's `value` and `n`, and the two ratios
/// each other's inverse at their stated decimals. Problems go on the record whose copy differs.
fn cross_check_pairs(checked: &mut [Checked]) {
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, c) in checked.iter().enumerate() {
        if let Some(r) = &c.record {
            if let (Some(_), Some(ev)) = (&r.pair, &r.source.evidence) {
                groups
                    .entry((ev.clone(), r.metric.name.clone()))
                    .or_default()
                    .push(i);
            }
        }
    }
    for idx in groups.values().filter(|v| v.len() == 2) {
        let (a, b) = (idx[0], idx[1]);
        let ra = checked[a].record.clone().expect("grouped records parsed");
        let rb = checked[b].record.clone().expect("grouped records parsed");
        for (i, this, other) in [(a, &ra, &rb), (b, &rb, &ra)] {
            let p = this.pair.as_ref().expect("grouped records are pairs");
            if this.fmt(p.other_value) != other.fmt(other.value) || p.other_n != other.n {
                checked[i].problems.push(Problem::new(
                    "pair.other_value",
                    format!(
                        "{} (n = {}) but the other record of the same pair run, {}, states {} (n = {})",
                        this.fmt(p.other_value),
                        p.other_n,
                        other.id,
                        other.fmt(other.value),
                        other.n
                    ),
                ));
            }
        }
    }
}

/// [`check_dir`], then every record that passed it re-derived from its evidence ([`rederive`]): what
/// `servegate records check` runs. Linear in the records and the evidence bytes (each evidence directory is
/// loaded, digested and judged once per record that cites it).
pub fn verify_dir(dir: &Path) -> std::io::Result<Vec<Checked>> {
    let mut checked = check_dir(dir)?;
    let mut digests = BTreeMap::new();
    for c in checked.iter_mut() {
        let Some(r) = &c.record else { continue };
        if c.problems.is_empty() {
            let more = rederive_with(dir, r, &mut digests);
            c.problems.extend(more);
        } else if let Some(ev) = r
            .source
            .evidence
            .as_deref()
            .filter(|e| !e.trim().is_empty())
        {
            // An invalid record is not re-derived, but evidence it cites that does not exist is named too.
            let at = evidence_path(dir, ev);
            if r.source.kind == "gate_run" && !at.is_dir() {
                c.problems.push(Problem::new(
                    "source.evidence",
                    format!("{ev:?} does not exist (looked at {})", at.display()),
                ));
            }
        }
    }
    Ok(checked)
}

/// Why a record directory publishes nothing: the records `servegate records check` refuses in it (invalid,
/// or not what their evidence re-derives to), or the directory's read error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The record directory.
    pub dir: PathBuf,
    /// `FILE: FIELD: MESSAGE`, one per problem (as `records check` prints them), or the read error.
    pub lines: Vec<String>,
    /// The refused record files, in file order.
    pub files: Vec<PathBuf>,
    /// The record files the directory holds (0 when it could not be read).
    pub total: usize,
}

impl Refused {
    /// How many were refused, and which: `1 of 21 records in records refused by `servegate records check`
    /// (x.json)`; the read error when the directory could not be read.
    pub fn summary(&self) -> String {
        if self.files.is_empty() {
            return self.lines.join("; ");
        }
        let names: Vec<String> = self
            .files
            .iter()
            .map(|f| {
                f.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| f.display().to_string())
            })
            .collect();
        format!(
            "{} of {} record{} in {} refused by `servegate records check` ({})",
            self.files.len(),
            self.total,
            if self.total == 1 { "" } else { "s" },
            self.dir.display(),
            names.join(", ")
        )
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.lines {
            writeln!(f, "{l}")?;
        }
        f.write_str(&self.summary())
    }
}

/// The one loader of what may be published: every record of `dir`, when `servegate records check` accepts
/// them all ([`verify_dir`]: each valid, ids unique, pairs consistent, and every `gate_run` record re-derived
/// from its evidence); else what it refuses ([`Refused`]: every problem, how many records and which). The
/// leaderboard pages and every export load records through it, so a record whose figures its evidence
/// does not give (values doubled: 42.85 tok/s stated, 21.86 re-derived) is never rendered or exported.
pub fn load_dir(dir: &Path) -> Result<Vec<Record>, Refused> {
    let checked = verify_dir(dir).map_err(|e| Refused {
        dir: dir.to_path_buf(),
        lines: vec![format!("{}: cannot read directory: {e}", dir.display())],
        files: Vec::new(),
        total: 0,
    })?;
    let lines = problem_lines(&checked);
    if !lines.is_empty() {
        return Err(Refused {
            dir: dir.to_path_buf(),
            lines,
            files: checked
                .iter()
                .filter(|c| !c.problems.is_empty())
                .map(|c| c.file.clone())
                .collect(),
            total: checked.len(),
        });
    }
    Ok(checked.into_iter().filter_map(|c| c.record).collect())
}

/// One record file loaded as [`load_dir`] loads a directory: valid, and re-derived from its evidence
/// (relative evidence paths resolved from its directory, as `records check --dir` does).
pub fn load_file(file: &Path) -> Result<Record, Refused> {
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut c = check_file(file);
    if let (Some(r), true) = (&c.record, c.problems.is_empty()) {
        let more = rederive(dir, r);
        c.problems.extend(more);
    }
    match c.record {
        Some(r) if c.problems.is_empty() => Ok(r),
        _ => Err(Refused {
            dir: dir.to_path_buf(),
            lines: problem_lines(std::slice::from_ref(&c)),
            files: vec![c.file.clone()],
            total: 1,
        }),
    }
}

/// `FILE: FIELD: MESSAGE`, one per problem, [`terminal_safe`] (a record's text is outside text).
pub fn problem_lines(checked: &[Checked]) -> Vec<String> {
    checked
        .iter()
        .flat_map(|c| {
            c.problems
                .iter()
                .map(move |p| format!("{}: {}", c.file.display(), terminal_safe(&p.to_string())))
        })
        .collect()
}

/// `servegate records ...` arguments.
#[derive(Debug, clap::Args)]
pub struct RecordsArgs {
    /// What to do with the records.
    #[command(subcommand)]
    pub command: RecordsCmd,
}

/// `servegate records` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum RecordsCmd {
    /// Rewrite a run directory written before the privacy rule into its public form (no absolute home or
    /// checkout path, no host name) and update the records citing it with its new evidence digest
    /// (records::publish; docs/records.md).
    Publish {
        /// The run directory.
        #[arg(long)]
        run: PathBuf,
        /// The checkout the evidence was written in (its paths become relative); default the working directory.
        #[arg(long)]
        checkout: Option<PathBuf>,
        /// The record directory whose records cite the run.
        #[arg(long, default_value = "records")]
        dir: PathBuf,
    },
    /// Validate every record (schema, units, n = number of values, median and range recomputed, sha256, ids
    /// unique and equal to file names); print every problem as FILE: FIELD: MESSAGE. Exit 3 when one is invalid.
    Check {
        /// The record directory.
        #[arg(long, default_value = "records")]
        dir: PathBuf,
    },
    /// Write a record from a finished run directory (a pair run's directory gives a pair record): every judged
    /// value, the model file's sha256, the serve's version, load, known answer. Never overwrites a record.
    Add {
        /// The run directory (holds run.json, or pair.json for a pair gate) and its gate.toml.
        #[arg(long)]
        run: PathBuf,
        /// A TOML file of what the run cannot know about itself (record::RunRecordSpec: id, metric,
        /// model_name, model_file, weights, device, route, engine, what_would_make_it_wrong, ...).
        #[arg(long)]
        spec: PathBuf,
        /// Override the spec's id.
        #[arg(long)]
        id: Option<String>,
        /// Override the spec's metric (decode_rate or first_token).
        #[arg(long)]
        metric: Option<String>,
        /// For a pair run: whose record (`ours` or `theirs`); each names the other's figure.
        #[arg(long, default_value = "ours")]
        role: String,
        /// The record directory.
        #[arg(long, default_value = "records")]
        dir: PathBuf,
        /// Record a run whose verdicts failed anyway (single-runtime runs only): the record carries the
        /// failure in `source.forced` and the page flags it. Incomplete runs and failed requests are still
        /// refused.
        #[arg(long)]
        force: bool,
    },
}

/// Runs a `servegate records` subcommand; returns the exit code.
pub fn cli_records(args: &RecordsArgs) -> i32 {
    match &args.command {
        RecordsCmd::Check { dir } => cli_records_check(dir),
        RecordsCmd::Publish { run, checkout, dir } => {
            crate::records::publish::cli(run, checkout.as_deref(), dir)
        }
        RecordsCmd::Add {
            run,
            spec,
            id,
            metric,
            role,
            dir,
            force,
        } => {
            if role != "ours" && role != "theirs" {
                crate::errln!("error: --role is `ours` or `theirs`, got {role:?}");
                return exit::USAGE;
            }
            cli_records_add_with(
                run,
                spec,
                id.as_deref(),
                metric.as_deref(),
                role,
                dir,
                *force,
            )
        }
    }
}

/// `servegate records add --run DIR --spec FILE [--id ID] [--metric M] [--dir records]`: builds a record with
/// [`from_run`] (or [`from_pair_run`] for a pair run) from the run directory and its own gate.toml, and
/// writes it with [`write_new`]. Exit 0 written; 3 the spec, gate or record is invalid or the id is taken;
/// 5 the evidence cannot be read or does not hold what a record needs.
pub fn cli_records_add(
    run: &Path,
    spec_file: &Path,
    id: Option<&str>,
    metric: Option<&str>,
    dir: &Path,
) -> i32 {
    cli_records_add_as(run, spec_file, id, metric, "ours", dir)
}

/// [`cli_records_add`] for a pair run's `role` (`ours` or `theirs`).
pub fn cli_records_add_as(
    run: &Path,
    spec_file: &Path,
    id: Option<&str>,
    metric: Option<&str>,
    role: &str,
    dir: &Path,
) -> i32 {
    cli_records_add_with(run, spec_file, id, metric, role, dir, false)
}

/// [`cli_records_add_as`], with `force` ([`from_run_forced`]; refused for a pair run).
pub fn cli_records_add_with(
    run: &Path,
    spec_file: &Path,
    id: Option<&str>,
    metric: Option<&str>,
    role: &str,
    dir: &Path,
    force: bool,
) -> i32 {
    let mut spec: RunRecordSpec = match std::fs::read_to_string(spec_file)
        .map_err(|e| e.to_string())
        .and_then(|t| toml::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            crate::errln!("error: {}: {e}", spec_file.display());
            return exit::SPEC_INVALID;
        }
    };
    if let Some(id) = id {
        spec.id = id.to_string();
    }
    if let Some(m) = metric {
        spec.metric = m.to_string();
    }
    let gate = match crate::spec::load(&run.join(crate::evidence::layout::GATE_FILE)) {
        Ok(g) => g,
        Err(e) => {
            crate::errln!("error: {e}");
            return exit::SPEC_INVALID;
        }
    };
    if gate.load.is_some() {
        return super::load_records::cli_add(&gate, run, &spec, dir, force);
    }
    let built = if crate::evidence::is_pair_dir(run) {
        if force {
            crate::errln!("error: --force records single-runtime runs only; a pair record is written from a passing pair run");
            return exit::USAGE;
        }
        crate::analysis::load_pair(run).map(|pe| from_pair_run_as(&gate, &pe, &spec, role))
    } else if force {
        crate::analysis::load(run).map(|ev| from_run_forced(&gate, &ev, &spec))
    } else {
        crate::analysis::load(run).map(|ev| from_run(&gate, &ev, &spec))
    };
    let record = match built {
        Err(e) => {
            crate::errln!("error: {e}");
            return exit::EVIDENCE_ERROR;
        }
        Ok(Err(e)) => {
            crate::errln!("error: {e}");
            return match e {
                RecordError::Evidence(_) | RecordError::Io { .. } => exit::EVIDENCE_ERROR,
                RecordError::Invalid { .. } | RecordError::Exists { .. } => exit::SPEC_INVALID,
            };
        }
        Ok(Ok(r)) => r,
    };
    match write_new(dir, &record) {
        Ok(path) => {
            let mut flag = if record.indicative() {
                format!(", indicative (n = {})", record.n)
            } else {
                String::new()
            };
            if !record.unmeasured.is_empty() {
                flag.push_str(&format!(", {}", terminal_safe(&record.unmeasured_line())));
            }
            if let Some(why) = &record.source.forced {
                flag.push_str(&format!(", FORCED: {}", terminal_safe(why)));
            }
            crate::outln!(
                "wrote {} ({} {} {} {}, n = {}{flag}); now run `servegate leaderboard`",
                path.display(),
                terminal_safe(&record.model.name),
                record.metric.name,
                record.fmt(record.value),
                record.metric.unit,
                record.n
            );
            exit::PASS
        }
        Err(e) => {
            crate::errln!("error: {e}");
            match e {
                RecordError::Io { .. } | RecordError::Evidence(_) => exit::EVIDENCE_ERROR,
                _ => exit::SPEC_INVALID,
            }
        }
    }
}

/// `text` as it may be printed to a terminal: [`crate::text::shown`] (control and invisible characters shown
/// escaped, `\u{1b}`; no CI workflow command), so a record's text can never move the cursor, recolour or
/// rewrite a line.
pub fn terminal_safe(text: &str) -> String {
    crate::text::shown(text)
}

/// `servegate records check [--dir DIR]`: prints one line per record (`ok`, with `indicative (n = 2)` where
/// n < 3) and every problem as `FILE: FIELD: MESSAGE`. Exit 0 when all are valid, 3 (SPEC_INVALID) otherwise.
pub fn cli_records_check(dir: &Path) -> i32 {
    let checked = match verify_dir(dir) {
        Ok(c) => c,
        Err(e) => {
            crate::errln!("error: {}: cannot read directory: {e}", dir.display());
            return exit::SPEC_INVALID;
        }
    };
    let mut bad = 0;
    for c in &checked {
        if c.problems.is_empty() {
            let r = c.record.as_ref().expect("a record without problems parsed");
            let mut flags = Vec::new();
            if r.indicative() {
                flags.push(format!("indicative (n = {})", r.n));
            }
            if let Some(lp) = r.load_point.as_ref().filter(|_| r.statistic == "window") {
                flags.push(format!(
                    "load point {}: one figure over its {:.0} ms window",
                    lp.point, lp.window_ms
                ));
            } else if r.values.is_none() {
                flags.push("per-value figures not published".to_string());
            }
            if !r.unmeasured.is_empty() {
                flags.push(r.unmeasured_line());
            }
            if r.sha256_prefix_only() {
                flags.push("sha256 prefix only".to_string());
            }
            if let Some(why) = &r.source.unverifiable {
                flags.push(format!("unverifiable: {why}"));
            } else if r.source.kind == "gate_run" {
                flags.push("re-derived from its evidence".to_string());
            }
            if let Some(why) = &r.source.forced {
                flags.push(format!("FORCED: {why}"));
            }
            let flags = if flags.is_empty() {
                String::new()
            } else {
                terminal_safe(&format!("; {}", flags.join("; ")))
            };
            crate::outln!(
                "{}: ok ({} {} {} {}, n = {}{flags})",
                c.file.display(),
                terminal_safe(&r.model.name),
                terminal_safe(&r.metric.name),
                r.fmt(r.value),
                terminal_safe(&r.metric.unit),
                r.n
            );
        } else {
            bad += 1;
            for p in &c.problems {
                crate::errln!("{}: {}", c.file.display(), terminal_safe(&p.to_string()));
            }
        }
    }
    let problems: usize = checked.iter().map(|c| c.problems.len()).sum();
    crate::outln!(
        "records: {} checked in {}, {} invalid, {problems} problems",
        checked.len(),
        dir.display(),
        bad
    );
    if checked.is_empty() {
        crate::errln!(
            "records: no record (*.json) in {}: nothing was checked",
            dir.display()
        );
        exit::NOTHING_CHECKED
    } else if bad == 0 {
        exit::PASS
    } else {
        exit::SPEC_INVALID
    }
}

/// Serialises a record as written to disk: pretty JSON, two-space indent, trailing newline.
pub fn to_json(r: &Record) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("a record serialises");
    s.push('\n');
    s
}

/// Errors writing or building a record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The record is invalid: every problem.
    #[error("record {id} is invalid:\n{}", problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The record id.
        id: String,
        /// Every problem.
        problems: Vec<Problem>,
    },
    /// A record with this id exists: records are never overwritten.
    #[error("{}: exists; a record is never overwritten (choose a new id)", path.display())]
    Exists {
        /// The existing file.
        path: PathBuf,
    },
    /// The evidence does not hold what the record needs.
    #[error("{0}")]
    Evidence(String),
    /// I/O.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Validates `r` and writes it as `dir/<id>.json` atomically (temp file in `dir`, fsync, rename without
/// replacing): a killed writer leaves no half record, and an existing record is never overwritten.
pub fn write_new(dir: &Path, r: &Record) -> Result<PathBuf, RecordError> {
    let problems = validate(r, &r.id);
    if !problems.is_empty() {
        return Err(RecordError::Invalid {
            id: r.id.clone(),
            problems,
        });
    }
    let path = dir.join(format!("{}.json", r.id));
    crate::io::fs::write_new(&path, to_json(r).as_bytes()).map_err(|source| {
        if source.kind() == std::io::ErrorKind::AlreadyExists {
            RecordError::Exists { path: path.clone() }
        } else {
            RecordError::Io {
                path: path.clone(),
                source,
            }
        }
    })?;
    Ok(path)
}

pub use crate::spec::record::RunRecordSpec;

/// Unit, decimals and the definition quoted in records for a metric `from_run` can record.
fn run_metric(metric: &str) -> Result<(&'static str, u32, &'static str), RecordError> {
    use crate::vocab::Metric;
    let refuse = || {
        RecordError::Evidence(format!(
            "metric {metric:?}: a record from a run is decode_rate or first_token"
        ))
    };
    let m = Metric::from_record_name(metric).ok_or_else(refuse)?;
    let (unit, decimals) = (m.info().unit.name(), m.info().record_decimals);
    match m {
        Metric::DecodeRate => Ok((unit, decimals, "servegate measure::measure decode_tok_s (docs/metrics.md): (N − 1) / (t_last_token_chunk − t_first_token_chunk), client-side, first token excluded, per request")),
        Metric::Ttft => Ok((unit, decimals, "servegate measure::measure ttft_ms (docs/metrics.md): time from sending the request to the first token chunk (content, reasoning or tool call), client-side, per request")),
        Metric::FirstContent | Metric::Itl | Metric::ItlP90 | Metric::Tpot | Metric::E2e | Metric::ServerDecodeRate | Metric::ServerPrefillRate | Metric::PairRatio | Metric::OutputThroughput | Metric::RequestThroughput | Metric::Goodput | Metric::SloAttainment | Metric::PeakConcurrency | Metric::ScalingEfficiency => Err(refuse()),
    }
}

/// A run's judged values of one metric: the measured ones, the unmeasured ones with their causes, the
/// prompt-token counts seen.
struct JudgedValues {
    /// Every measured judged request's value, in send order.
    values: Vec<f64>,
    /// Every judged request not measured because of how its reply was delivered, in send order.
    unmeasured: Vec<Unmeasured>,
    prompt_tokens: std::collections::BTreeSet<u64>,
}

/// Every judged (non-warmup) request's value of `metric`, in send order, the ones that did not fail but
/// could not be measured (`measure::unmeasured_cause`, the verdicts' rule) listed apart with their cause,
/// and the prompt-token counts seen. Fails when a request has no value for another reason (a record
/// carries every value it can: a failed reply is no figure and no excuse), and when fewer than
/// `judge::MIN_MEASURED_SHARE` of the judged requests were measured (the verdicts' INDETERMINATE: the
/// median of the measured is not the run's).
fn judged_values(
    ev: &crate::analysis::Evidence,
    metric: &str,
) -> Result<JudgedValues, RecordError> {
    let acct = crate::judge::account(ev);
    if let Some(p) = acct.problems() {
        return Err(RecordError::Evidence(format!(
            "{}: not every planned request was answered ({}, {}): a record carries every planned value",
            ev.dir.display(),
            acct.n_of(acct.sent),
            p
        )));
    }
    let m = crate::vocab::Metric::from_record_name(metric);
    let mut out = JudgedValues {
        values: Vec::new(),
        unmeasured: Vec::new(),
        prompt_tokens: std::collections::BTreeSet::new(),
    };
    for req in ev.requests.iter().filter(|r| !r.record.warmup) {
        let fig = crate::analysis::measure::measure(&req.reply);
        let v = m.and_then(|m| crate::analysis::measure::metric_value(&fig, m));
        let cause = m.and_then(|m| crate::analysis::measure::unmeasured_cause(&fig, m));
        match (v, cause) {
            (Some(v), _) => out.values.push(v),
            (None, Some(c)) => out.unmeasured.push(Unmeasured {
                arm: None,
                request: req.record.index as u32,
                cause: c.to_string(),
            }),
            (None, None) => {
                return Err(RecordError::Evidence(format!(
                    "{}: request {:02} has no {metric} ({}): a record carries every value",
                    ev.dir.display(),
                    req.record.index,
                    fig.decode_note.unwrap_or_else(|| "no token chunks".into())
                )))
            }
        }
        if let Some(pt) = req.reply.usage.as_ref().and_then(|u| u.prompt_tokens) {
            out.prompt_tokens.insert(pt);
        }
    }
    let judged = out.values.len() + out.unmeasured.len();
    if judged == 0 {
        return Err(RecordError::Evidence(format!(
            "{}: no judged requests",
            ev.dir.display()
        )));
    }
    if out.values.is_empty()
        || (out.values.len() as f64) < crate::judge::MIN_MEASURED_SHARE * judged as f64
    {
        return Err(RecordError::Evidence(format!(
            "{}: {metric}: only {} of {judged} judged replies measured (at least half are needed for a median: the verdict is INDETERMINATE); not measured: {}: no record from an undecided run",
            ev.dir.display(),
            out.values.len(),
            unmeasured_text(&out.unmeasured)
        )));
    }
    Ok(out)
}

/// `request 03 (cause); arm 2 request 01 (cause)`: the unmeasured requests as a record's check and
/// refusals show them (causes are the measure code's words, never serve text).
pub fn unmeasured_text(u: &[Unmeasured]) -> String {
    u.iter()
        .map(|x| match x.arm {
            Some(a) => format!("arm {a} request {:02} ({})", x.request, x.cause),
            None => format!("request {:02} ({})", x.request, x.cause),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Refuses a run whose verdicts do not all pass, naming the first failing one: `--record` and the verdicts
/// never disagree about whether a run failed.
pub(super) fn refuse_failed_verdicts(
    dir: &std::path::Path,
    verdicts: &[crate::judge::Verdict],
) -> Result<(), RecordError> {
    match verdicts.iter().find(|v| !v.passed()) {
        None => Ok(()),
        Some(v) => {
            use crate::judge::Outcome;
            let failed = verdicts
                .iter()
                .filter(|v| v.outcome == Outcome::Fail)
                .count();
            let undecided = verdicts.iter().filter(|v| !v.passed()).count() - failed;
            Err(RecordError::Evidence(match verdicts.iter().find(|v| v.outcome == Outcome::Fail) {
                Some(f) => format!(
                    "{}: the run failed its verdicts ({failed} of {} failed; first: {}): no record from a failed run",
                    dir.display(),
                    verdicts.len(),
                    f.message
                ),
                None => format!(
                    "{}: the run's verdicts are undecided ({undecided} of {} INDETERMINATE, incomparable or not compared; first: {}): no record from an undecided run",
                    dir.display(),
                    verdicts.len(),
                    v.message
                ),
            }))
        }
    }
}

pub(super) fn round_to(x: f64, decimals: u32) -> f64 {
    let f = 10f64.powi(decimals as i32);
    (x * f).round() / f
}

/// Seconds since the epoch of an RFC 3339 UTC stamp as the runner writes it (`2026-11-29T18:06:32.123Z`).
fn utc_seconds(stamp: &str) -> Option<f64> {
    let (date, rest) = stamp.split_once('T')?;
    let time = rest.strip_suffix('Z')?;
    let month = time::Month::try_from(date.get(5..7)?.parse::<u8>().ok()?).ok()?;
    let day = time::Date::from_calendar_date(
        date.get(0..4)?.parse().ok()?,
        month,
        date.get(8..10)?.parse().ok()?,
    )
    .ok()?;
    let mut hms = time.split(':');
    let (h, m, sec): (f64, f64, f64) = (
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
        hms.next()?.parse().ok()?,
    );
    Some(day.to_julian_day() as f64 * 86400.0 + h * 3600.0 + m * 60.0 + sec)
}

/// The hold of a run: the gate's `[hold]` lock, held for the whole run (its duration: run start to end).
pub(super) fn run_hold(gate: &crate::spec::GateSpec, started: &str, ended: Option<&str>) -> Hold {
    match &gate.hold {
        None => Hold {
            ticket: None,
            duration_s: None,
        },
        Some(h) => Hold {
            ticket: Some({
                let mut parts = Vec::new();
                if let Some(l) = &h.lock {
                    parts.push(format!("exclusive lock {}", l.display()));
                }
                if !h.command.is_empty() {
                    parts.push(format!("hold wrapper `{}`", h.command.join(" ")));
                }
                if let Some(t) = &h.ticket {
                    parts.push(format!("ticket {}", t.display()));
                }
                format!("{} for the whole run (gate [hold])", parts.join(", "))
            }),
            duration_s: ended
                .and_then(utc_seconds)
                .zip(utc_seconds(started))
                .map(|(e, s)| round_to(e - s, 1)),
        },
    }
}

pub(super) fn prompt_tokens_setting(
    seen: &std::collections::BTreeSet<u64>,
    other: &mut Vec<String>,
) -> Option<u32> {
    if seen.len() > 1 {
        other.push(format!("prompt tokens differ between prompts: {seen:?}"));
    }
    if seen.len() == 1 {
        seen.first().map(|&t| t as u32)
    } else {
        None
    }
}

fn known_answer_of(
    gate: &crate::spec::GateSpec,
    verdicts: &[crate::judge::Verdict],
) -> KnownAnswer {
    let ka = verdicts
        .iter()
        .find(|v| v.kind == crate::vocab::AssertionKind::KnownAnswer);
    KnownAnswer {
        prompt: gate
            .assertions
            .known_answer
            .as_ref()
            .and_then(|k| k.prompt.clone())
            .or_else(|| match gate.request.prompts.as_slice() {
                [only] if ka.is_some() => Some(only.clone()),
                _ => None,
            }),
        expected: gate
            .assertions
            .known_answer
            .as_ref()
            .map(|k| k.matches.as_str().to_string()),
        result: match ka {
            Some(v) if v.passed() => "pass".into(),
            Some(_) => "fail".into(),
            None => "not_checked".into(),
        },
        detail: ka.map(|v| v.message.clone()),
    }
}

/// What the serve said its version is: `serve.package_version` (`xllamacpp 2026.10.11549`) where
/// `serve.version` names no build (`llama.cpp b0-unknown`), else `serve.version`.
pub(super) fn serve_words(serve: &crate::evidence::ServeRecord) -> Option<&str> {
    match (&serve.version, &serve.package_version) {
        (Some(v), Some(p)) if v.contains("b0-unknown") => Some(p.as_str()),
        (Some(v), _) => Some(v.as_str()),
        (None, p) => p.as_deref(),
    }
}

/// The engine version, from the evidence first: what the serve said (run.json `serve.version`, e.g.
/// `/props` build_info, `/openapi.json` info.version, `/version`: spec/detect.rs), unless it names no build
/// (`b0-unknown`); else the gate's `[record] engine_version`. When both exist and their version numbers
/// disagree (spec::detect::versions_agree), the notes say so in both words.
pub(super) fn engine_version(
    spec: &RunRecordSpec,
    serve_says: Option<&str>,
    notes: &mut Vec<String>,
    sources: &mut BTreeMap<String, String>,
) -> Option<String> {
    let serve_says = serve_says.filter(|s| !s.trim().is_empty());
    let informative = serve_says.filter(|s| !s.contains("b0-unknown"));
    if let (Some(v), Some(s)) = (&spec.engine_version, informative) {
        if !crate::spec::detect::versions_agree(v, s) {
            notes.push(format!(
                "engine_version: the gate's [record] says {v:?} but the serve reports {s:?}"
            ));
        }
    }
    let (v, from) = match (informative, &spec.engine_version) {
        (Some(s), _) => (
            Some(s.to_string()),
            "the serve (run.json serve.version; its source in serve.version_source)",
        ),
        (None, Some(v)) => (Some(v.clone()), "the gate's [record] table"),
        (None, None) => (
            serve_says.map(str::to_string),
            "the serve (run.json serve.version)",
        ),
    };
    if v.is_some() {
        sources.insert("settings.engine_version".into(), from.into());
    }
    v
}

/// The sources of the facts a `[record]` table gives (device, route, engine, backend) for `this` side.
pub(super) fn spec_sources(theirs: bool, backend: bool) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let table = "the gate's [record] table".to_string();
    if theirs {
        m.insert(
            "settings.engine".into(),
            "pair.json: theirs' runtime".into(),
        );
        m.insert(
            "settings.engine_version".into(),
            "theirs' serve (arm run.json serve.version)".into(),
        );
    } else {
        m.insert("settings.engine".into(), table.clone());
        m.insert("device".into(), table.clone());
        m.insert("route".into(), table.clone());
        if backend {
            m.insert("settings.backend".into(), table);
        }
    }
    m
}

pub(super) fn sampling_of(req: &crate::spec::RequestSpec) -> String {
    match req.temperature {
        Some(t) => format!("temperature {t}"),
        None => "serve default".into(),
    }
}

fn method_of(version: &str, gate: &crate::spec::GateSpec) -> String {
    let req = &gate.request;
    format!(
        "servegate {version} gate {}: {} prompt(s) × {} repeat(s), {} warmup round(s) not counted; client-side timed reads",
        gate.name,
        req.prompts.len(),
        req.repeats,
        req.warmup
    )
}

/// Builds a record from a gate run's evidence, with full provenance: every judged (non-warmup) request's
/// value as `measure` defines the metric, their median and range, the model file's streamed SHA-256, the
/// serve's version, load at start and end, the hold, the known-answer verdict. Fails (never guesses) when any
/// verdict of the run fails (the same judgement as `servegate run`/`judge`), a planned request was never
/// sent or failed ([`crate::judge::account`]), a judged request has no value, the run is incomplete or its
/// serve failed, or the model file cannot be hashed. Write it with [`write_new`].
pub fn from_run(
    gate: &crate::spec::GateSpec,
    ev: &crate::analysis::Evidence,
    spec: &RunRecordSpec,
) -> Result<Record, RecordError> {
    build_run(gate, ev, spec, None, false)
}

/// [`from_run`] for `records add --force`: a run whose verdicts failed is recorded anyway, and the record
/// says so in `source.forced` (the page flags it). Everything else [`from_run`] refuses is still refused: an
/// incomplete run, a failed serve, a request without a value (a record carries every planned value).
pub fn from_run_forced(
    gate: &crate::spec::GateSpec,
    ev: &crate::analysis::Evidence,
    spec: &RunRecordSpec,
) -> Result<Record, RecordError> {
    build_run(gate, ev, spec, None, true)
}

/// The evidence digest of `dir`, as a record carries it.
pub(super) fn evidence_digest(dir: &Path) -> Result<String, RecordError> {
    crate::evidence::digest::digest_dir(dir).map_err(|source| RecordError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// A path as a record publishes it: under the checkout (the working directory) relative to it
/// (`models/x.gguf`), else under the home directory with `~` (`~/.cache/servegate/models/x.gguf`), else as
/// given. A record carries no absolute home or checkout path. See [`public_path_in`].
pub fn public_path(path: &str) -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cwd = std::env::current_dir().ok();
    public_path_in(path, cwd.as_deref(), home.as_deref())
}

/// [`public_path`] with the checkout and home directory given (pure). A path already `~/...` or relative is
/// returned as given; the root directory as a home or checkout is ignored.
pub fn public_path_in(path: &str, checkout: Option<&Path>, home: Option<&Path>) -> String {
    let p = Path::new(path);
    if !p.is_absolute() {
        return path.to_string();
    }
    fn usable(d: Option<&Path>) -> Option<&Path> {
        d.filter(|d| d.is_absolute() && d.parent().is_some())
    }
    if let Some(rest) = usable(checkout).and_then(|c| p.strip_prefix(c).ok()) {
        if !rest.as_os_str().is_empty() {
            return rest.display().to_string();
        }
    }
    if let Some(rest) = usable(home).and_then(|h| p.strip_prefix(h).ok()) {
        return if rest.as_os_str().is_empty() {
            "~".into()
        } else {
            format!("~/{}", rest.display())
        };
    }
    path.to_string()
}

/// A record's `host`: what the machine is (`linux 6.8.0, 2 CPUs`), with its host name in front only when
/// the gate's `[record]` says `publish_host = true` (`box (linux 6.8.0, 2 CPUs)`).
pub fn public_host(h: &crate::evidence::HostInfo, publish_host: bool) -> String {
    if publish_host {
        format!("{} ({}, {} CPUs)", h.hostname, h.os, h.cpus)
    } else {
        format!("{}, {} CPUs", h.os, h.cpus)
    }
}

/// The model file and hash the serve was given, from the evidence (`run.json` `serve.model_file`, taken
/// when the serve started). `spec_file` (a `[record]` `model_file`) must name that same file: a record
/// cannot claim another file's hash. `recheck` (re-deriving an existing record from evidence written
/// before servegate hashed at serve start): that record's own model stands where the evidence has none.
pub(super) fn model_from_evidence(
    ev: &crate::analysis::Evidence,
    spec_file: &Path,
    recheck: Option<&Record>,
) -> Result<(String, String), RecordError> {
    match (&ev.run.serve.model_file, recheck) {
        (Some(m), _) => {
            let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
                (Ok(x), Ok(y)) => x == y,
                _ => a == b,
            };
            // The evidence writes the path as published (`~/...`, repo-relative): read it back as a file.
            let written = crate::evidence::public::expand_here(&m.path);
            if recheck.is_none() && !same(spec_file, &written) {
                return Err(RecordError::Evidence(format!(
                    "{}: model.file {:?} is not the file the serve was given ({:?}, sha256 {} taken at serve start): a record's model hash comes from the evidence, not from the [record] table",
                    ev.dir.display(),
                    spec_file.display().to_string(),
                    m.path,
                    &m.sha256[..16.min(m.sha256.len())]
                )));
            }
            Ok((m.path.clone(), m.sha256.clone()))
        }
        (None, Some(r)) => Ok((
            r.model.file.clone().unwrap_or_default(),
            r.model.sha256.clone(),
        )),
        (None, None) => Err(RecordError::Evidence(format!(
            "{}: run.json has no serve.model_file: the serve was given no model file servegate could hash at serve start, so no record can state a model hash",
            ev.dir.display()
        ))),
    }
}

fn build_run(
    gate: &crate::spec::GateSpec,
    ev: &crate::analysis::Evidence,
    spec: &RunRecordSpec,
    recheck: Option<&Record>,
    force: bool,
) -> Result<Record, RecordError> {
    use crate::evidence::RunStatus;
    let run = &ev.run;
    if run.status != RunStatus::Complete {
        return Err(RecordError::Evidence(format!(
            "{}: the run is incomplete (status running): no record from a killed run",
            ev.dir.display()
        )));
    }
    if let Some(f) = &run.serve.failure {
        return Err(RecordError::Evidence(format!(
            "{}: the serve failed: {f}",
            ev.dir.display()
        )));
    }
    let (unit, decimals, definition) = run_metric(&spec.metric)?;
    // The same judgement as the verdicts: a run that fails them writes no record.
    let verdicts = crate::judge::judge_with(gate, ev, &crate::judge::JudgeInputs::load(gate, ev));
    let forced = match refuse_failed_verdicts(&ev.dir, &verdicts) {
        Ok(()) => None,
        Err(e) if force || recheck.is_some_and(|r| r.source.forced.is_some()) => {
            Some(e.to_string())
        }
        Err(e) => return Err(e),
    };
    let JudgedValues {
        values,
        unmeasured,
        prompt_tokens,
    } = judged_values(ev, &spec.metric)?;
    let median = stats::median(&values).expect("non-empty");
    let (model_file, sha) = model_from_evidence(ev, &spec.model_file, recheck)?;
    let digest = evidence_digest(&ev.dir)?;
    let req = &gate.request;
    let mut other = spec.notes.clone();
    let prompt_tokens = prompt_tokens_setting(&prompt_tokens, &mut other);
    let mut sources = spec_sources(false, spec.backend.is_some());
    sources.insert(
        "model.sha256".into(),
        match &ev.run.serve.model_file {
            Some(m) => format!(
                "run.json serve.model_file (hashed at serve start; the file found from {})",
                m.source
            ),
            None => {
                "the record itself (evidence written before servegate hashed at serve start)".into()
            }
        },
    );
    let version = engine_version(spec, serve_words(&run.serve), &mut other, &mut sources);
    let record = Record {
        schema: RECORD_SCHEMA.into(),
        id: spec.id.clone(),
        date: run.started_utc.chars().take(10).collect(),
        host: public_host(&run.host, spec.publish_host),
        model: Model::of_run(spec, &model_file, sha),
        device: spec.device.clone(),
        route: spec.route.clone(),
        metric: Metric {
            name: spec.metric.clone(),
            unit: unit.into(),
            condition: Some("warm".into()).filter(|_| req.warmup > 0),
        },
        statistic: "median".into(),
        value: round_to(median, decimals),
        decimals,
        n: values.len() as u32,
        range: [
            stats::min(&values).expect("non-empty"),
            stats::max(&values).expect("non-empty"),
        ],
        values: Some(values),
        values_unavailable: None,
        unmeasured,
        settings: Settings {
            engine: spec.engine.clone(),
            engine_version: version,
            sampling: Some(sampling_of(req)),
            max_tokens: Some(req.max_tokens),
            prompt_tokens,
            stream: Some(req.stream),
            backend: spec.backend.clone(),
        },
        hold: Hold {
            ticket: spec.hold_ticket.clone(),
            duration_s: None,
        },
        load: Load {
            load1_start: run.load_avg_start.map(|l| l[0]),
            load1_end: run.load_avg_end.map(|l| l[0]),
        },
        known_answer: known_answer_of(gate, &verdicts),
        instrument: Instrument {
            method: method_of(&run.servegate_version, gate),
            metric_definition: Some(definition.into()),
        },
        source: Source::gate_run(ev.dir.display().to_string(), &run.gate_file, digest, forced),
        pair: None,
        notes: Notes {
            what_would_make_it_wrong: spec.what_would_make_it_wrong.clone(),
            other,
        },
        sources,
        load_point: None,
    };
    let record = Record {
        hold: if gate.hold.is_some() {
            run_hold(gate, &run.started_utc, run.ended_utc.as_deref())
        } else {
            record.hold.clone()
        },
        ..record
    };
    let problems = validate(&record, &record.id);
    if !problems.is_empty() {
        return Err(RecordError::Invalid {
            id: record.id,
            problems,
        });
    }
    Ok(record)
}

/// Device and route of a pair's theirs record: the gate's `[record]` describes ours' runtime only, and the
/// serve does not report them.
pub const THEIRS_NOT_PUBLISHED: &str =
    "not_published: the gate's [record] describes ours' runtime, and theirs' serve does not report it";

/// Builds a pair record from a pair run (`pair.json` and its arms): this record's figure is the median of
/// every judged value of the `ours` arms, the other figure the median of the `theirs` arms (both recomputed
/// from the repeats, not from arm medians), the ratio theirs / ours, the arm order and each arm's median;
/// the model hash is the one the runner streamed before the first arm (and found unchanged after the last).
/// `spec.model_file` is not hashed again. Fails when the pair is incomplete or void.
pub fn from_pair_run(
    gate: &crate::spec::GateSpec,
    pe: &crate::analysis::PairEvidence,
    spec: &RunRecordSpec,
) -> Result<Record, RecordError> {
    from_pair_run_as(gate, pe, spec, "ours")
}

/// [`from_pair_run`] from the side of `role` (`ours` or `theirs`): the record's value is that runtime's
/// median and `pair` names the other runtime's figure and the ratio other / this (so theirs / ours in the
/// ours record, its inverse in the theirs record; the note states theirs / ours in both). For `theirs`, the
/// engine is the theirs arm's `runtime` and the other engine is `spec.engine`.
pub fn from_pair_run_as(
    gate: &crate::spec::GateSpec,
    pe: &crate::analysis::PairEvidence,
    spec: &RunRecordSpec,
    role: &str,
) -> Result<Record, RecordError> {
    use crate::evidence::RunStatus;
    let s = &pe.summary;
    let dir = pe.dir.display();
    if s.status != RunStatus::Complete {
        return Err(RecordError::Evidence(format!(
            "{dir}: the pair run is incomplete (status running)"
        )));
    }
    if let Some(f) = &s.failure {
        return Err(RecordError::Evidence(format!(
            "{dir}: the pair is void: {f}"
        )));
    }
    let sha = match (&s.model_sha256, &s.model_sha256_after) {
        (Some(a), Some(b)) if a == b => a.clone(),
        (a, b) => {
            return Err(RecordError::Evidence(format!(
                "{dir}: model sha256 before {a:?} and after {b:?} the arms do not match"
            )))
        }
    };
    if s.arms.len() != pe.arms.len() || s.arms.is_empty() {
        return Err(RecordError::Evidence(format!(
            "{dir}: {} arms listed, {} loaded",
            s.arms.len(),
            pe.arms.len()
        )));
    }
    let (unit, decimals, definition) = run_metric(&spec.metric)?;
    let digest = evidence_digest(&pe.dir)?;
    // The same judgement as the verdicts: a pair run that fails them writes no record.
    let verdicts = crate::judge::judge_pair(gate, pe);
    refuse_failed_verdicts(&pe.dir, &verdicts)?;
    let (mut ours, mut theirs, mut arm_medians, mut arm_order) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut prompt_tokens = std::collections::BTreeSet::new();
    let mut theirs_runtime: Option<String> = None;
    let mut version = None;
    let mut this_unmeasured = Vec::new();
    for (arm, ev) in s.arms.iter().zip(&pe.arms) {
        if ev.run.status != RunStatus::Complete || ev.run.serve.failure.is_some() {
            return Err(RecordError::Evidence(format!(
                "{}: arm {} ({}) is incomplete or its serve failed",
                ev.dir.display(),
                arm.arm,
                arm.role
            )));
        }
        let JudgedValues {
            values,
            unmeasured,
            prompt_tokens: pt,
        } = judged_values(ev, &spec.metric)?;
        prompt_tokens.extend(pt);
        if arm.role == role {
            this_unmeasured.extend(unmeasured.into_iter().map(|u| Unmeasured {
                arm: Some(arm.arm as u32),
                ..u
            }));
        }
        arm_medians.push(round_to(
            stats::median(&values).expect("non-empty"),
            decimals,
        ));
        match arm.role.as_str() {
            "ours" => {
                ours.extend(values);
                if role == "ours" {
                    version = version.or_else(|| serve_words(&ev.run.serve).map(str::to_string));
                }
            }
            "theirs" => {
                theirs.extend(values);
                theirs_runtime = theirs_runtime.or_else(|| Some(arm.runtime.clone()));
                if role == "theirs" {
                    version = version.or_else(|| serve_words(&ev.run.serve).map(str::to_string));
                }
            }
            other => {
                return Err(RecordError::Evidence(format!(
                    "{dir}: arm {} has role {other:?}",
                    arm.arm
                )))
            }
        }
        arm_order.push(if arm.role == role {
            "this".to_string()
        } else {
            "other".to_string()
        });
    }
    if ours.is_empty() || theirs.is_empty() {
        return Err(RecordError::Evidence(format!(
            "{dir}: a pair record needs values from both runtimes"
        )));
    }
    let (m_ours, m_theirs) = (
        stats::median(&ours).expect("non-empty"),
        stats::median(&theirs).expect("non-empty"),
    );
    let theirs_engine = theirs_runtime.unwrap_or_else(|| "theirs".into());
    let (this, other_vals, m_this, m_other, this_engine, other_engine) = if role == "theirs" {
        (
            theirs,
            ours,
            m_theirs,
            m_ours,
            theirs_engine,
            spec.engine.clone(),
        )
    } else {
        (
            ours,
            theirs,
            m_ours,
            m_theirs,
            spec.engine.clone(),
            theirs_engine,
        )
    };
    let req = &gate.request;
    let mut other = spec.notes.clone();
    let prompt_tokens = prompt_tokens_setting(&prompt_tokens, &mut other);
    let mut sources = spec_sources(role == "theirs", spec.backend.is_some() && role != "theirs");
    sources.insert(
        "model.sha256".into(),
        "pair.json model_sha256 (hashed before the first arm, unchanged after the last)".into(),
    );
    if s.model_file_theirs != s.model_file_ours {
        other.push(format!(
            "the arms loaded different files: ours {}, theirs {} (model.sha256 is ours' file, the one theirs' copy was derived from: pair.json model_file_ours / model_file_theirs)",
            public_path(&s.model_file_ours),
            public_path(&s.model_file_theirs)
        ));
    }
    let mut ours_sources = BTreeMap::new();
    let version =
        if role == "theirs" {
            Some(version.clone().unwrap_or_else(|| {
                "not_published: theirs' serve did not report its version".into()
            }))
        } else {
            engine_version(spec, version.as_deref(), &mut other, &mut ours_sources)
        };
    sources.extend(ours_sources);
    let record = Record {
        schema: RECORD_SCHEMA.into(),
        id: spec.id.clone(),
        date: s.started_utc.chars().take(10).collect(),
        host: public_host(&s.host, spec.publish_host),
        // Which file this side's arms loaded (theirs may load a copy derived from ours' file).
        model: Model::of_run(
            spec,
            if role == "theirs" { &s.model_file_theirs } else { &s.model_file_ours },
            sha,
        ),
        device: if role == "theirs" { THEIRS_NOT_PUBLISHED.into() } else { spec.device.clone() },
        route: if role == "theirs" { THEIRS_NOT_PUBLISHED.into() } else { spec.route.clone() },
        metric: Metric { name: spec.metric.clone(), unit: unit.into(), condition: Some("warm".into()).filter(|_| req.warmup > 0) },
        statistic: "median".into(),
        value: round_to(m_this, decimals),
        decimals,
        n: this.len() as u32,
        range: [stats::min(&this).expect("non-empty"), stats::max(&this).expect("non-empty")],
        values: Some(this),
        values_unavailable: None,
        unmeasured: this_unmeasured,
        settings: Settings {
            engine: this_engine,
            // theirs' version is what theirs' serve reported, never ours' [record] version.
            engine_version: version,
            sampling: Some(sampling_of(req)),
            max_tokens: Some(req.max_tokens),
            prompt_tokens,
            stream: Some(req.stream),
            backend: if role == "theirs" { None } else { spec.backend.clone() },
        },
        hold: run_hold(gate, &s.started_utc, s.ended_utc.as_deref()),
        load: Load { load1_start: s.load_avg_start.map(|l| l[0]), load1_end: s.load_avg_end.map(|l| l[0]) },
        known_answer: known_answer_of(gate, &verdicts),
        instrument: Instrument {
            method: format!(
                "{}; A-B-B-A pair, arms {}; each figure is the median of every judged value of that runtime's arms",
                method_of(env!("CARGO_PKG_VERSION"), gate),
                s.order.join(", ")
            ),
            metric_definition: Some(definition.into()),
        },
        source: Source::gate_run(dir.to_string(), &s.gate_file, digest, None),
        pair: Some(Pair {
            other_engine,
            other_value: round_to(m_other, decimals),
            other_n: other_vals.len() as u32,
            other_range: Some([stats::min(&other_vals).expect("non-empty"), stats::max(&other_vals).expect("non-empty")]),
            ratio: round_to(m_other / m_this, 3),
            ratio_decimals: 3,
            ratio_source: "computed".into(),
            ratio_note: Some(format!("the other runtime's median / this one's (theirs / ours = {:.3}), each recomputed from every judged value", m_theirs / m_ours)),
            arm_order,
            arm_medians: Some(arm_medians),
        }),
        notes: Notes { what_would_make_it_wrong: spec.what_would_make_it_wrong.clone(), other },
        sources,
        load_point: None,
    };
    let problems = validate(&record, &record.id);
    if !problems.is_empty() {
        return Err(RecordError::Invalid {
            id: record.id,
            problems,
        });
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 15 kind 9: a record publishes no absolute home or checkout path, and no host name unless the
    /// gate opts in.
    #[test]
    fn published_paths_are_repo_relative_or_under_tilde_and_the_host_name_only_on_request() {
        let co = Some(Path::new("/home/ann/src/servegate"));
        let home = Some(Path::new("/home/ann"));
        let p = |s: &str| public_path_in(s, co, home);
        assert_eq!(p("/home/ann/src/servegate/models/x.gguf"), "models/x.gguf");
        assert_eq!(
            p("/home/ann/.cache/servegate/models/x.gguf"),
            "~/.cache/servegate/models/x.gguf"
        );
        assert_eq!(p("/home/ann"), "~");
        assert_eq!(
            p("/home/annie/x.gguf"),
            "/home/annie/x.gguf",
            "a prefix of a name is not a parent"
        );
        assert_eq!(p("/models/x.gguf"), "/models/x.gguf");
        assert_eq!(p("~/x.gguf"), "~/x.gguf");
        assert_eq!(p("models/x.gguf"), "models/x.gguf");
        // The root as a home (a container's HOME=/) would make every path `~/...`: ignored.
        assert_eq!(
            public_path_in("/models/x", None, Some(Path::new("/"))),
            "/models/x"
        );
        assert_eq!(
            public_path_in("/root/.cache/m", None, Some(Path::new("/root"))),
            "~/.cache/m"
        );
        let h = crate::evidence::HostInfo {
            hostname: "ann-laptop".into(),
            os: "linux 6.8.0".into(),
            cpus: 8,
            cpu_model: None,
        };
        assert_eq!(public_host(&h, false), "linux 6.8.0, 8 CPUs");
        assert_eq!(public_host(&h, true), "ann-laptop (linux 6.8.0, 8 CPUs)");
    }

    /// A valid gate-run record, for edits.
    fn good() -> Record {
        Record {
            schema: RECORD_SCHEMA.into(),
            id: "smol-decode".into(),
            date: "2026-11-29".into(),
            host: "ci (Linux, 2 CPUs)".into(),
            model: Model {
                name: "SmolLM2-135M-Instruct".into(),
                file: Some("/models/smol.gguf".into()),
                sha256: "a".repeat(64),
                sha256_form: "full".into(),
                sha256_of: "file".into(),
                weights: Some("Q8_0".into()),
            },
            device: "CPU".into(),
            route: "cpu".into(),
            metric: Metric {
                name: "decode_rate".into(),
                unit: "tok/s".into(),
                condition: None,
            },
            statistic: "median".into(),
            value: 4.28,
            decimals: 2,
            n: 2,
            values: Some(vec![4.25, 4.30]),
            values_unavailable: None,
            unmeasured: Vec::new(),
            range: [4.25, 4.30],
            settings: Settings {
                engine: "llama.cpp".into(),
                engine_version: Some("b1".into()),
                sampling: Some("temperature 0".into()),
                max_tokens: Some(64),
                prompt_tokens: None,
                stream: Some(true),
                backend: None,
            },
            hold: Hold {
                ticket: None,
                duration_s: None,
            },
            load: Load {
                load1_start: Some(1.0),
                load1_end: Some(1.2),
            },
            known_answer: KnownAnswer {
                prompt: None,
                expected: None,
                result: "not_checked".into(),
                detail: None,
            },
            instrument: Instrument {
                method: "servegate".into(),
                metric_definition: Some("docs/metrics.md".into()),
            },
            source: Source {
                kind: "gate_run".into(),
                evidence: Some("runs/x".into()),
                gate: Some("gates/x.toml".into()),
                published: None,
                evidence_sha256: Some("e".repeat(64)),
                unverifiable: None,
                forced: None,
            },
            pair: None,
            notes: Notes {
                what_would_make_it_wrong: "One run at low load, one prompt.".into(),
                other: vec![],
            },
            sources: BTreeMap::new(),
            load_point: None,
        }
    }

    fn fields(r: &Record) -> Vec<String> {
        validate(r, &r.id).into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn good_record_is_valid_and_round_trips() {
        let r = good();
        assert_eq!(validate(&r, "smol-decode"), vec![]);
        assert_eq!(parse(&to_json(&r)).unwrap(), r);
    }

    #[test]
    fn schema_keys_are_every_key_a_full_record_serialises() {
        let mut r = good();
        r.values_unavailable = Some("x".into());
        r.source.unverifiable = Some("x".into());
        r.source.forced = Some("x".into());
        r.notes.other = vec!["x".into()];
        r.sources.insert("x".into(), "y".into());
        r.unmeasured = vec![Unmeasured {
            arm: Some(1),
            request: 0,
            cause: "x".into(),
        }];
        r.pair = Some(Pair {
            other_engine: "o".into(),
            other_value: 1.0,
            other_n: 1,
            other_range: None,
            ratio: 1.0,
            ratio_decimals: 2,
            ratio_source: "published".into(),
            ratio_note: Some("x".into()),
            arm_order: vec![],
            arm_medians: Some(vec![]),
        });
        r.load_point = Some(LoadPoint {
            point: "c=4".into(),
            concurrency: Some(4),
            rate_rps: None,
            requests: 1,
            output_tokens: 1,
            window_ms: 1.0,
        });
        fn keys(v: &Value, path: &str, out: &mut Vec<String>) {
            if let Some(o) = v.as_object() {
                for (k, x) in o {
                    let p = format!("{path}.{k}");
                    keys(x, &p, out);
                    out.push(p);
                }
            }
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut full = serde_json::to_value(&r).unwrap();
        full["sources"] = Value::String(String::new()); // free keys: typed, not listed
        keys(&full, "", &mut a);
        keys(&schema_keys(true), "", &mut b);
        a.sort();
        b.sort();
        assert_eq!(a, b);
        // A structurally broken record names each problem's path.
        let mut v = serde_json::to_value(good()).unwrap();
        v["settings"]["max_tokens"] = "many".into();
        v["model"]["extra"] = 1.into();
        v["load"].as_object_mut().unwrap().remove("load1_end");
        let mut f: Vec<String> = structural_problems(&v)
            .into_iter()
            .map(|p| p.field)
            .collect();
        f.sort();
        assert_eq!(
            f,
            vec!["load.load1_end", "model.extra", "settings.max_tokens"]
        );
    }

    #[test]
    fn even_n_median_is_mean_of_middle_two_at_stated_precision() {
        // 4.25 and 4.30: median 4.275, stated 4.28 (and 4.27 is also a correct rounding of the tie).
        let mut r = good();
        assert!(fields(&r).is_empty());
        r.value = 4.27;
        assert!(fields(&r).is_empty());
        r.value = 4.29;
        assert_eq!(fields(&r), vec!["value"]);
    }

    #[test]
    fn n_must_equal_number_of_values() {
        let mut r = good();
        r.n = 3;
        assert_eq!(fields(&r), vec!["n"]);
    }

    #[test]
    fn range_must_be_min_and_max() {
        let mut r = good();
        r.range = [4.20, 4.30];
        assert_eq!(fields(&r), vec!["range"]);
    }

    #[test]
    fn missing_key_names_its_field() {
        let mut v = serde_json::to_value(good()).unwrap();
        v["model"].as_object_mut().unwrap().remove("sha256");
        v.as_object_mut().unwrap().remove("notes");
        let problems = parse(&v.to_string()).unwrap_err();
        let f: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert!(f.contains(&"model.sha256"), "{problems:?}");
        assert!(f.contains(&"notes"), "{problems:?}");
    }

    #[test]
    fn nullable_key_must_still_be_present() {
        let mut v = serde_json::to_value(good()).unwrap();
        v["model"].as_object_mut().unwrap().remove("file");
        let problems = parse(&v.to_string()).unwrap_err();
        assert_eq!(problems[0].field, "model.file");
    }

    #[test]
    fn unknown_keys_are_errors_at_every_level() {
        let mut v = serde_json::to_value(good()).unwrap();
        v["speed"] = serde_json::json!(1);
        v["settings"]["temprature"] = serde_json::json!(0);
        let problems = parse(&v.to_string()).unwrap_err();
        let f: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert!(
            f.contains(&"speed") && f.contains(&"settings.temprature"),
            "{problems:?}"
        );
    }

    #[test]
    fn sha256_is_64_hex_or_a_declared_published_prefix() {
        let mut r = good();
        r.model.sha256 = "b1c1fe9d6c4a6d0c".into();
        assert_eq!(fields(&r), vec!["model.sha256"]);
        r.model.sha256_form = "prefix".into();
        assert_eq!(
            fields(&r),
            vec!["model.sha256_form"],
            "a gate run may not carry a prefix"
        );
        r.source = Source {
            kind: "published".into(),
            evidence: None,
            gate: None,
            published: Some("seed-runs.md".into()),
            evidence_sha256: None,
            unverifiable: Some("not published: on the first user's machine".into()),
            forced: None,
        };
        assert!(fields(&r).is_empty());
        assert_eq!(r.sha256_display(), "b1c1fe9d6c4a6d0c (prefix only)");
    }

    #[test]
    fn values_may_be_unavailable_only_in_published_records_and_say_why() {
        let mut r = good();
        r.values = None;
        assert_eq!(fields(&r), vec!["values", "values"]);
        r.values_unavailable = Some("not published".into());
        r.source = Source {
            kind: "published".into(),
            evidence: None,
            gate: None,
            published: Some("seed-runs.md".into()),
            evidence_sha256: None,
            unverifiable: Some("not published: on the first user's machine".into()),
            forced: None,
        };
        assert!(fields(&r).is_empty());
        r.value = 4.5;
        assert_eq!(fields(&r), vec!["value"], "value outside the range");
    }

    #[test]
    fn pair_ratio_and_arms_are_checked() {
        let mut r = good();
        r.value = 39.25;
        r.values = Some(vec![39.20, 39.25, 39.25, 39.32]);
        r.n = 4;
        r.range = [39.20, 39.32];
        r.pair = Some(Pair {
            other_engine: "FastFlowLM 1.0.12".into(),
            other_value: 45.57,
            other_n: 6,
            other_range: Some([45.08, 45.93]),
            ratio: 1.16,
            ratio_decimals: 2,
            ratio_source: "published".into(),
            ratio_note: None,
            arm_order: vec!["other".into(), "this".into(), "this".into(), "other".into()],
            arm_medians: Some(vec![45.43, 39.28, 39.23, 45.91]),
        });
        assert!(fields(&r).is_empty(), "{:?}", validate(&r, &r.id));
        r.pair.as_mut().unwrap().ratio = 1.20;
        r.pair.as_mut().unwrap().arm_order = vec!["this".into(), "this".into()];
        assert_eq!(
            fields(&r),
            vec!["pair.ratio", "pair.arm_order", "pair.arm_medians"]
        );
    }

    #[test]
    fn n_below_three_is_valid_but_indicative() {
        let r = good();
        assert!(validate(&r, &r.id).is_empty());
        assert!(r.indicative());
    }

    #[test]
    fn id_must_equal_file_name() {
        let r = good();
        assert_eq!(
            validate(&r, "other")
                .into_iter()
                .map(|p| p.field)
                .collect::<Vec<_>>(),
            vec!["id"]
        );
    }

    #[test]
    fn what_would_make_it_wrong_is_required() {
        let mut r = good();
        r.notes.what_would_make_it_wrong = "n/a".into();
        assert_eq!(fields(&r), vec!["notes.what_would_make_it_wrong"]);
    }

    /// A complete run directory of a gate with one prompt, one warmup and three judged repeats: each reply
    /// streams four content tokens 10, 20, 30 ms apart after `ttft` ms (decode = 3 / span).
    fn synthetic_run(
        root: &Path,
        name: &str,
        gate: &crate::spec::GateSpec,
        warmup: bool,
        spans_ms: &[(f64, f64)],
    ) -> PathBuf {
        use crate::evidence::{
            EvidenceWriter, RequestRecord, ResponseMeta, RunStatus, RunSummary, ServeRecord,
        };
        use crate::io::reads::TimedRead;
        let w = EvidenceWriter::create(root, name, "20261129T120000Z").unwrap();
        w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())
            .unwrap();
        let mut requests = Vec::new();
        for (index, &(ttft, span)) in spans_ms.iter().enumerate() {
            let chunk = |text: &str| {
                format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
            };
            let mut reads = Vec::new();
            for (k, text) in ["Pa", "r", "is", "."].iter().enumerate() {
                reads.push(TimedRead {
                    recv_ms: None,
                    t_ms: ttft + span * k as f64 / 3.0,
                    bytes: chunk(text).into_bytes(),
                });
            }
            let end = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":4,\"total_tokens\":24}}\n\ndata: [DONE]\n\n";
            reads.push(TimedRead {
                recv_ms: None,
                t_ms: ttft + span + 1.0,
                bytes: end.as_bytes().to_vec(),
            });
            let meta = ResponseMeta {
                status: Some(200),
                ..Default::default()
            };
            w.write_request(index, &serde_json::json!({}), &meta, &reads)
                .unwrap();
            requests.push(RequestRecord {
                index,
                warmup: warmup && index == 0,
                prompt: gate.request.prompts[0].clone(),
                stream: true,
                http_status: Some(200),
                repeat: index as u32,
                body_bytes: reads.iter().map(|r| r.bytes.len() as u64).sum(),
                ..Default::default()
            });
        }
        let summary = RunSummary {
            schema: crate::evidence::RUN_SCHEMA.into(),
            status: RunStatus::Complete,
            gate: gate.name.clone(),
            gate_file: "gates/ref.toml".into(),
            started_utc: "2026-11-29T12:00:00Z".into(),
            ended_utc: Some("2026-11-29T12:00:09Z".into()),
            host: crate::evidence::HostInfo {
                hostname: "box".into(),
                os: "linux 6.1".into(),
                cpus: 2,
                cpu_model: None,
            },
            load_avg_start: Some([1.5, 1.0, 0.5]),
            load_avg_end: Some([1.75, 1.0, 0.5]),
            servegate_version: "0.1.0".into(),
            serve: ServeRecord {
                version: Some("llama.cpp b4321".into()),
                // As the runner does at serve start: the model file the serve was given (`root/model.gguf`
                // when the test made one).
                model_file: crate::evidence::hash_model(
                    &root.join("model.gguf").display().to_string(),
                    &[],
                ),
                ..Default::default()
            },
            planned: Some(requests.iter().filter(|r| !r.warmup).count()),
            planned_warmup: Some(requests.iter().filter(|r| r.warmup).count()),
            requests,
            notes: vec![],
        };
        w.write_summary(&summary).unwrap();
        w.dir().to_path_buf()
    }

    /// A reply that did not fail but could not be measured (its decode window 0.3 ms, under the 5 ms
    /// minimum) is left out of the record's values and named in `unmeasured` with its cause, as the verdict
    /// leaves it out; `records check` re-derives the same from the evidence and catches a record that drops
    /// the list. Under half measured (the verdict INDETERMINATE), no record.
    #[test]
    fn a_record_leaves_unmeasured_replies_out_and_names_them() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.gguf");
        std::fs::write(&model, b"weights").unwrap();
        let gate_file = tmp.path().join("ref.toml");
        let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\nrepeats = 4\nprompts = [\"What is the capital of France?\"]\n[assert.rate]\nfloor_tok_s = 10.0\n";
        std::fs::write(&gate_file, text).unwrap();
        let ctx = crate::spec::Context::for_file(&gate_file);
        let gate = crate::spec::parse(&gate_file, text, &ctx).unwrap();
        let spec = RunRecordSpec {
            publish_host: false,
            id: "ref-decode".into(),
            metric: "decode_rate".into(),
            model_name: "Tiny".into(),
            model_file: model.clone(),
            weights: "Q8_0".into(),
            device: "CPU".into(),
            route: "cpu".into(),
            engine: "llama.cpp server".into(),
            engine_version: None,
            backend: None,
            hold_ticket: None,
            what_would_make_it_wrong: "Four short synthetic replies.".into(),
            notes: vec![],
        };
        let dir = synthetic_run(
            tmp.path(),
            "ref",
            &gate,
            false,
            &[(100.0, 30.0), (120.0, 0.3), (110.0, 60.0), (105.0, 20.0)],
        );
        let ev = crate::analysis::load(&dir).unwrap();
        let r = from_run(&gate, &ev, &spec).unwrap();
        // 3 tokens over 30, 60, 20 ms: 100, 50, 150 tok/s; request 01 not measured.
        assert_eq!(r.n, 3);
        assert_eq!(r.values, Some(vec![100.0, 50.0, 150.0]));
        assert_eq!(r.value, 100.0);
        assert_eq!(r.unmeasured.len(), 1, "{:?}", r.unmeasured);
        assert_eq!((r.unmeasured[0].arm, r.unmeasured[0].request), (None, 1));
        assert!(
            r.unmeasured[0].cause.contains("under the 5 ms minimum"),
            "{}",
            r.unmeasured[0].cause
        );
        assert_eq!(validate(&r, &r.id), Vec::<Problem>::new());
        // Written and read back, the list survives; re-derived from the evidence, nothing differs.
        let back = parse(&to_json(&r)).unwrap();
        assert_eq!(back, r);
        assert_eq!(rederive(tmp.path(), &r), Vec::<Problem>::new());
        // A record that hides the unmeasured reply is caught by re-derivation, naming the field.
        let mut hidden = r.clone();
        hidden.unmeasured.clear();
        let p = rederive(tmp.path(), &hidden);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "unmeasured");
        assert!(p[0].message.contains("states none"), "{}", p[0].message);
        // One that claims more unmeasured than measured is invalid on its face.
        let mut half = r.clone();
        for i in 5..9 {
            half.unmeasured.push(Unmeasured {
                arm: None,
                request: i,
                cause: "decode window 0.3 ms under the 5 ms minimum".into(),
            });
        }
        assert!(validate(&half, &half.id)
            .iter()
            .any(|p| p.field == "unmeasured" && p.message.contains("under half")));
        // Old records (no `unmeasured` key) still read: every value measured.
        let mut old: Value = serde_json::from_str(&to_json(&r)).unwrap();
        old.as_object_mut().unwrap().remove("unmeasured");
        assert!(parse(&old.to_string()).unwrap().unmeasured.is_empty());

        // Three of four not measured: the verdict is INDETERMINATE, and there is no record.
        let dir = synthetic_run(
            &tmp.path().join("b"),
            "ref",
            &gate,
            false,
            &[(100.0, 0.3), (120.0, 0.3), (110.0, 60.0), (105.0, 0.2)],
        );
        let ev = crate::analysis::load(&dir).unwrap();
        match from_run(&gate, &ev, &spec) {
            Err(RecordError::Evidence(m)) => {
                assert!(m.contains("verdicts are undecided"), "{m}");
                assert!(m.contains("no record from an undecided run"), "{m}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Without a verdict on the figure (a decode_rate record of a gate asserting only TTFT, which
        // passes), the record refuses by the same half rule.
        let answer_only = crate::spec::parse(
            &gate_file,
            &text.replace(
                "[assert.rate]\nfloor_tok_s = 10.0\n",
                "[assert.first_token]\nlimit_ms = 100000\n",
            ),
            &ctx,
        )
        .unwrap();
        match from_run(&answer_only, &ev, &spec) {
            Err(RecordError::Evidence(m)) => {
                assert!(m.contains("only 1 of 4 judged replies measured"), "{m}");
                assert!(m.contains("request 00 (decode window"), "{m}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn from_run_uses_the_verdicts_judgement_and_counts_every_planned_request() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.gguf");
        std::fs::write(&model, b"weights").unwrap();
        let gate_file = tmp.path().join("ref.toml");
        let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\nrepeats = 3\nprompts = [\"What is the capital of France?\"]\n[assert.rate]\nfloor_tok_s = 10.0\n";
        std::fs::write(&gate_file, text).unwrap();
        let ctx = crate::spec::Context::for_file(&gate_file);
        let gate = crate::spec::parse(&gate_file, text, &ctx).unwrap();
        let dir = synthetic_run(
            tmp.path(),
            "ref",
            &gate,
            false,
            &[(100.0, 30.0), (120.0, 60.0), (110.0, 20.0)],
        );
        let ev = crate::analysis::load(&dir).unwrap();
        let spec = RunRecordSpec {
            publish_host: false,
            id: "ref-decode".into(),
            metric: "decode_rate".into(),
            model_name: "Tiny".into(),
            model_file: model.clone(),
            weights: "Q8_0".into(),
            device: "CPU".into(),
            route: "cpu".into(),
            engine: "llama.cpp server".into(),
            engine_version: None,
            backend: None,
            hold_ticket: None,
            what_would_make_it_wrong: "Three short synthetic replies.".into(),
            notes: vec![],
        };
        assert!(from_run(&gate, &ev, &spec).is_ok());
        let refused =
            |ev: &crate::analysis::Evidence, g: &crate::spec::GateSpec, want: &str| match from_run(
                g, ev, &spec,
            ) {
                Err(RecordError::Evidence(m)) => assert!(m.contains(want), "{m}"),
                other => panic!("expected a refusal naming {want:?}, got {other:?}"),
            };
        // Planned 20, sent 3: the verdicts fail (rate), and so does the record.
        let mut short = ev.clone();
        short.run.planned = Some(20);
        refused(
            &short,
            &gate,
            "17 planned requests never sent: requests 03-19",
        );
        // Reply 01 cut after two chunks (no finish_reason, no [DONE]): no figure, in records as in verdicts.
        let mut cut = ev.clone();
        let chunk = |t: f64, text: &str| crate::io::reads::TimedRead {
            recv_ms: None,
            t_ms: t,
            bytes: format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
            )
            .into_bytes(),
        };
        cut.requests[1].reply = crate::analysis::reply_of(
            &cut.requests[1].record,
            &[chunk(10.0, "Paris"), chunk(40.0, " is")],
        );
        refused(
            &cut,
            &gate,
            "request 01 (truncated_stream: no finish_reason, no [DONE])",
        );
        // A run that fails its floor writes no record either.
        let strict = crate::spec::parse(&gate_file, &text.replace("10.0", "1000.0"), &ctx).unwrap();
        refused(
            &ev,
            &strict,
            "the run failed its verdicts (1 of 1 failed; first: rate FAIL median 100.0 tok/s",
        );
    }

    #[test]
    fn from_run_records_every_judged_value_with_provenance() {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.gguf");
        std::fs::write(&model, b"weights").unwrap();
        let gate_file = tmp.path().join("ref.toml");
        let text = "[gate]\nname = \"ref\"\n[serve]\ncommand = [\"srv\", \"--port\", \"{port}\"]\n[request]\nmodel = \"m\"\nmax_tokens = 16\ntemperature = 0\nwarmup = 1\nrepeats = 3\nprompts = [\"What is the capital of France? Answer with one word.\"]\n[assert.known_answer]\nmatches = \"(?i)paris\"\n";
        std::fs::write(&gate_file, text).unwrap();
        let gate = crate::spec::parse(
            &gate_file,
            text,
            &crate::spec::Context::for_file(&gate_file),
        )
        .unwrap();
        // warmup, then decode 3/0.030 = 100, 3/0.060 = 50, 3/0.020 = 150 tok/s.
        let dir = synthetic_run(
            tmp.path(),
            "ref",
            &gate,
            true,
            &[(500.0, 10.0), (100.0, 30.0), (120.0, 60.0), (110.0, 20.0)],
        );
        let ev = crate::analysis::load(&dir).unwrap();
        let spec = RunRecordSpec {
            publish_host: false,
            id: "ref-decode".into(),
            metric: "decode_rate".into(),
            model_name: "Tiny".into(),
            model_file: model.clone(),
            weights: "Q8_0".into(),
            device: "CPU".into(),
            route: "cpu".into(),
            engine: "llama.cpp server".into(),
            engine_version: None,
            backend: None,
            hold_ticket: None,
            what_would_make_it_wrong:
                "Three replies of four tokens each: a longer reply could decode at another rate."
                    .into(),
            notes: vec![],
        };
        let mut killed = ev.clone();
        killed.run.status = crate::evidence::RunStatus::Running;
        assert!(
            matches!(from_run(&gate, &killed, &spec), Err(RecordError::Evidence(m)) if m.contains("incomplete")),
            "no record from a killed run"
        );
        let r = from_run(&gate, &ev, &spec).unwrap();
        let values = r.values.clone().unwrap();
        assert_eq!(values.len(), 3, "warmup excluded");
        for (got, want) in values.iter().zip([100.0, 50.0, 150.0]) {
            assert!((got - want).abs() < 1e-6, "{values:?}");
        }
        assert_eq!((r.value, r.n, r.range), (100.0, 3, [values[1], values[2]]));
        assert_eq!(r.model.sha256, crate::io::hash::sha256_bytes(b"weights"));
        assert_eq!(
            r.settings.engine_version.as_deref(),
            Some("llama.cpp b4321")
        );
        assert_eq!(
            (r.load.load1_start, r.load.load1_end),
            (Some(1.5), Some(1.75))
        );
        assert_eq!(r.known_answer.result, "pass");
        assert_eq!(r.settings.prompt_tokens, Some(20));
        assert_eq!(r.date, "2026-11-29");
        assert!(validate(&r, "ref-decode").is_empty());
        let ft = from_run(
            &gate,
            &ev,
            &RunRecordSpec {
                publish_host: false,
                id: "ref-first-token".into(),
                metric: "first_token".into(),
                ..spec.clone()
            },
        )
        .unwrap();
        assert_eq!(
            (
                ft.value,
                ft.metric.unit.as_str(),
                ft.metric.condition.as_deref()
            ),
            (110.0, "ms", Some("warm"))
        );
        // The command path: the same record from the run directory and a spec file.
        let spec_file = tmp.path().join("smol.toml");
        std::fs::write(&spec_file, format!("id = \"x\"\nmetric = \"first_token\"\nmodel_name = \"Tiny\"\nmodel_file = {:?}\nweights = \"Q8_0\"\ndevice = \"CPU\"\nroute = \"cpu\"\nengine = \"llama.cpp server\"\nwhat_would_make_it_wrong = \"Three replies of four tokens each: a longer reply could decode at another rate.\"\n", model.display().to_string())).unwrap();
        let cli_dir = tmp.path().join("cli-records");
        assert_eq!(
            cli_records_add(
                &dir,
                &spec_file,
                Some("ref-decode"),
                Some("decode_rate"),
                &cli_dir
            ),
            exit::PASS
        );
        assert_eq!(
            parse(&std::fs::read_to_string(cli_dir.join("ref-decode.json")).unwrap()).unwrap(),
            r
        );
        assert_eq!(
            cli_records_add(&dir, &spec_file, Some("ref-decode"), None, &cli_dir),
            exit::SPEC_INVALID,
            "never overwrites"
        );
        // Written atomically, then checked like any committed record.
        let records = tmp.path().join("records");
        write_new(&records, &r).unwrap();
        write_new(&records, &ft).unwrap();
        assert!(check_dir(&records)
            .unwrap()
            .iter()
            .all(|c| c.problems.is_empty()));
    }

    #[test]
    fn from_pair_run_states_both_figures_ratio_and_arm_order() {
        use crate::evidence::{ArmRecord, PairSummary, RunStatus};
        let tmp = tempfile::tempdir().unwrap();
        let gate_file = tmp.path().join("pair.toml");
        let text = "[gate]\nname = \"p\"\n[serve]\nready = \"/health\"\n[hold]\nlock = \"/tmp/npu.lock\"\n[pair.ours]\nruntime = \"srv, 1 thread\"\ncommand = [\"srv\", \"--model\", \"{model}\", \"--port\", \"{port}\"]\n[pair.theirs]\nruntime = \"srv, 2 threads\"\ncommand = [\"srv\", \"--model\", \"{model}\", \"--port\", \"{port}\", \"-t\", \"2\"]\n[request]\nmodel = \"/m.gguf\"\nmax_tokens = 16\ntemperature = 0\ntop_k = 1\nrepeats = 3\nprompts = [\"What is the capital of France? Answer with one word.\"]\n[assert.ratio]\nmetric = \"decode\"\nat_least = 0.1\n[assert.known_answer]\nmatches = \"(?i)paris\"\n";
        std::fs::write(&gate_file, text).unwrap();
        let gate = crate::spec::parse(
            &gate_file,
            text,
            &crate::spec::Context::for_file(&gate_file),
        )
        .unwrap();
        let pair_dir = tmp.path().join("pairrun");
        // decode rates: theirs 150, 100, 100 | ours 50, 50, 60 | ours 60, 30, 50 | theirs 150, 150, 300.
        let arms: [(&str, [(f64, f64); 3]); 4] = [
            ("theirs", [(90.0, 20.0), (90.0, 30.0), (90.0, 30.0)]),
            ("ours", [(100.0, 60.0), (100.0, 60.0), (100.0, 50.0)]),
            ("ours", [(100.0, 50.0), (100.0, 100.0), (100.0, 60.0)]),
            ("theirs", [(90.0, 20.0), (90.0, 20.0), (90.0, 10.0)]),
        ];
        let mut records = Vec::new();
        for (i, (role, spans)) in arms.iter().enumerate() {
            let name = crate::evidence::layout::arm_dir(i + 1, role);
            let d = synthetic_run(&pair_dir, &name, &gate, false, spans);
            records.push(ArmRecord {
                arm: i + 1,
                role: role.to_string(),
                runtime: if *role == "ours" {
                    "srv, 1 thread"
                } else {
                    "srv, 2 threads"
                }
                .into(),
                dir: d.strip_prefix(&pair_dir).unwrap().display().to_string(),
            });
        }
        let sha = "c".repeat(64);
        let summary = PairSummary {
            schema: crate::evidence::PAIR_SCHEMA.into(),
            status: RunStatus::Complete,
            gate: "p".into(),
            gate_file: "gates/pair.toml".into(),
            started_utc: "2026-11-29T12:00:00.000Z".into(),
            ended_utc: Some("2026-11-29T12:00:38.500Z".into()),
            host: crate::evidence::HostInfo {
                hostname: "box".into(),
                os: "linux".into(),
                cpus: 2,
                cpu_model: None,
            },
            load_avg_start: Some([4.34, 1.0, 1.0]),
            load_avg_end: Some([3.3, 1.0, 1.0]),
            order: arms.iter().map(|(r, _)| r.to_string()).collect(),
            model_file_ours: "/m.gguf".into(),
            model_file_theirs: "/m.gguf".into(),
            model_sha256: Some(sha.clone()),
            model_bytes: Some(7),
            model_sha256_after: Some(sha.clone()),
            failure: None,
            arms: records,
        };
        std::fs::write(
            pair_dir.join(crate::evidence::layout::PAIR_FILE),
            serde_json::to_string_pretty(&summary).unwrap(),
        )
        .unwrap();
        let pe = crate::analysis::load_pair(&pair_dir).unwrap();
        let spec = RunRecordSpec {
            publish_host: false,
            id: "p-decode".into(),
            metric: "decode_rate".into(),
            model_name: "Tiny".into(),
            model_file: "/m.gguf".into(),
            weights: "Q8_0".into(),
            device: "CPU".into(),
            route: "cpu".into(),
            engine: "srv, 1 thread".into(),
            engine_version: Some("srv 1".into()),
            backend: None,
            hold_ticket: None,
            what_would_make_it_wrong:
                "Three replies per arm of four tokens each on a shared machine.".into(),
            notes: vec![],
        };
        let r = from_pair_run(&gate, &pe, &spec).unwrap();
        let p = r.pair.as_ref().unwrap();
        // ours: 50 50 60 60 30 50 → median 50; theirs: 150 100 100 150 150 300 → median 150 (not the arm medians').
        assert_eq!(
            (r.value, r.n, p.other_value, p.other_n, p.ratio),
            (50.0, 6, 150.0, 6, 3.0)
        );
        assert_eq!(p.arm_order, ["other", "this", "this", "other"]);
        assert_eq!(
            p.arm_medians.as_deref(),
            Some(&[100.0, 50.0, 50.0, 150.0][..])
        );
        assert_eq!(p.other_engine, "srv, 2 threads");
        assert_eq!(r.model.sha256, sha);
        assert_eq!(r.hold.duration_s, Some(38.5));
        assert!(r.hold.ticket.as_deref().unwrap().contains("/tmp/npu.lock"));
        assert_eq!(
            (r.load.load1_start, r.load.load1_end),
            (Some(4.34), Some(3.3))
        );
        assert_eq!(r.known_answer.result, "pass");
        assert!(validate(&r, "p-decode").is_empty());
    }

    #[test]
    fn write_new_is_atomic_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let r = good();
        let path = write_new(dir.path(), &r).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), to_json(&r));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o644
            );
        }
        assert!(matches!(
            write_new(dir.path(), &r),
            Err(RecordError::Exists { .. })
        ));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp file left: {names:?}");
        let mut bad = good();
        bad.id = "bad".into();
        bad.n = 5;
        assert!(matches!(
            write_new(dir.path(), &bad),
            Err(RecordError::Invalid { .. })
        ));
        assert!(!dir.path().join("bad.json").exists());
    }
}
