//! The record schema: [`Record`] and its parts, field by field as docs/records.md documents them, the
//! schema's closed vocabularies ([`METRICS`], [`SOURCE_KINDS`], [`KNOWN_ANSWER_RESULTS`]) and [`Problem`],
//! what every check of a record reports. Types only: validation is `validate`, building from runs `build`.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// The schema id every record written now carries in `schema`: `/2` added [`Record::bound`].
pub(crate) const RECORD_SCHEMA: &str = "servegate.record/2";

/// The schema ids a record may carry and still be read: `/1` (written before records carried their gate's
/// bound; it has no `bound`) and [`RECORD_SCHEMA`].
pub(crate) const RECORD_SCHEMAS_READ: &[&str] = &["servegate.record/1", RECORD_SCHEMA];

/// Below this many values a record is valid but `indicative` wherever it is shown.
pub(crate) const INDICATIVE_BELOW_N: u32 = 3;

/// Metric names and the units each may be stated in.
pub(crate) const METRICS: &[(&str, &[&str])] = &[
    ("decode_rate", &["tok/s"]),
    ("first_token", &["s", "ms"]),
    ("prefill_rate", &["tok/s"]),
    ("e2e_latency", &["s", "ms"]),
    ("output_throughput", &["tok/s"]),
    ("request_throughput", &["req/s"]),
];

/// `source.kind` values.
pub(crate) const SOURCE_KINDS: &[&str] = &["gate_run", "published"];

/// `known_answer.result` values.
pub(crate) const KNOWN_ANSWER_RESULTS: &[&str] = &["pass", "fail", "not_checked", "not_published"];

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
    /// Optional (`servegate.record/2`): the bound the run's gate declared on this metric (a rate's
    /// `[assert.rate] floor_tok_s`, a first token's `[assert.first_token] limit_ms`), as the run was judged
    /// against it, in `metric.unit`. The leaderboard draws it from here; no page reads a gate file. Absent
    /// when the gate declared none on the metric, for published records and in `/1` records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<RecordBound>,
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
    /// Optional: the serve's footprint in the run the record was made from (start-up time, peak memory, CPU
    /// per token: docs/metrics.md "The serve's footprint"), re-derived from the same evidence as the figure.
    /// Written by the builders for every gate run record; absent in published records and in records written
    /// before records carried it (the leaderboard then says so, never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint: Option<RecordFootprint>,
}

/// `footprint`: the serve's footprint figures of the run a record cites, each `null` when the evidence has
/// none, with the reason in `unavailable` (`analysis::footprint`'s words). For a pair record, the median over
/// the arms of this record's side (each arm a serve of its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordFootprint {
    /// Nullable: start-up time, ms (spawn to the first ready answer, `run.json` `serve.ready_ms`), at the
    /// registry's record decimals (1).
    #[serde(deserialize_with = "nullable")]
    pub ready_ms: Option<f64>,
    /// Nullable: the serve's peak resident memory, MiB (`serve.footprint.rss_peak_mib`: the sum of each
    /// covered process's high-water mark), at 1 decimal.
    #[serde(deserialize_with = "nullable")]
    pub rss_peak_mib: Option<f64>,
    /// Nullable: the serve's user + system CPU per completion token over the judged window, ms/token, at 3
    /// decimals.
    #[serde(deserialize_with = "nullable")]
    pub cpu_ms_per_token: Option<f64>,
    /// Nullable: the model-load time the serve itself logged, ms (the gate's `[assert.ready] load_log`
    /// pattern over `serve.log`: `run.json` `serve.model_load_ms`), at 1 decimal.
    #[serde(deserialize_with = "nullable")]
    pub model_load_ms: Option<f64>,
    /// Optional: why each `null` figure is null, by its key (`rss_peak_mib` → `no peak memory: run.json has
    /// no serve.footprint (evidence written before ...)`); outside text escaped wherever printed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable: BTreeMap<String, String>,
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

/// `bound`: a gate's floor or limit on a record's metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordBound {
    /// `floor` (the median must be at least `value`: a higher-is-better metric) or `limit` (at most
    /// `value`: a lower-is-better one), as [`crate::vocab::BoundKind`] names them; the metric's direction
    /// in the registry ([`crate::vocab::MetricInfo::better`]) decides which.
    pub kind: String,
    /// The bound, in the record's `metric.unit` (a `limit_ms` of 2000 is `2` for a record in `s`).
    pub value: f64,
    /// Where the gate declares it: the assertion's key and its line in the gate file copied into the
    /// evidence (`[assert.rate] floor_tok_s, gate.toml line 43`).
    pub declared: String,
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
    pub(crate) fn sha256_display(&self) -> String {
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

    /// True when higher values are better (rates, throughputs): the metric's direction in the registry
    /// ([`crate::vocab::Metric::from_record_name`]; every name of [`METRICS`] is there).
    pub(crate) fn higher_is_better(&self) -> bool {
        crate::vocab::Metric::from_record_name(&self.metric.name)
            .is_some_and(|m| m.info().better == crate::vocab::Better::Higher)
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
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Problem {
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

/// `request 03 (cause); arm 2 request 01 (cause)`: the unmeasured requests as a record's check and
/// refusals show them (causes are the measure code's words, never serve text).
pub(crate) fn unmeasured_text(u: &[Unmeasured]) -> String {
    u.iter()
        .map(|x| match x.arm {
            Some(a) => format!("arm {a} request {:02} ({})", x.request, x.cause),
            None => format!("request {:02} ({})", x.request, x.cause),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `x` rounded half away from zero to `decimals` decimal places: the decimals a record states a value to
/// (the registry's `record_decimals`).
pub(crate) fn round_to(x: f64, decimals: u32) -> f64 {
    let f = 10f64.powi(decimals as i32);
    (x * f).round() / f
}
