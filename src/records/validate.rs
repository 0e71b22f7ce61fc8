//! Validation of a record: structural ([`parse`]: unknown, missing and wrongly typed keys over the
//! `serde_json::Value`, each with its dotted field) and semantic ([`validate`]: one function per section of
//! the schema, in the order the problems are reported, the load-point rules last). Pure: no file is read.
//!
//! The statistic is the median as `stats::median` defines it (mean of the two middle values for an even
//! count); a stated value matches when it is within half a unit of its last stated decimal of the median
//! recomputed from the values (either direction of a tie is accepted).

use std::collections::BTreeMap;

use serde_json::Value;

use super::schema::{
    Hold, Instrument, KnownAnswer, Load, LoadPoint, Metric, Model, Notes, Pair, Problem, Record,
    RecordBound, RecordFootprint, Settings, Source, Unmeasured, KNOWN_ANSWER_RESULTS, METRICS,
    RECORD_SCHEMA, RECORD_SCHEMAS_READ, SOURCE_KINDS,
};
use crate::analysis::load::min_n_for;
use crate::analysis::stats;

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
pub(super) fn schema_keys(all: bool) -> Value {
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
        // `bound` is optional; when present its keys apply.
        bound: Some(RecordBound {
            kind: String::new(),
            value: 0.0,
            declared: String::new(),
        }),
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
        // `footprint` is optional; when present its four figures are required (nullable).
        footprint: Some(RecordFootprint::default()),
    };
    let mut v = serde_json::to_value(r).expect("a record serialises");
    if all {
        // `sources` is a map with free keys: known at the top, its entries typed (strings) only.
        v["sources"] = Value::String(String::new());
        // So is `footprint.unavailable`.
        v["footprint"]["unavailable"] = Value::String(String::new());
    }
    v
}

/// Every structural problem of a record value, each with its dotted field: unknown and missing keys at
/// every level, found by comparing the value's keys with the schema's ([`schema_keys`]: every key, and the
/// required ones), then wrong types, each named by its path as `serde_path_to_error` reports it.
pub(super) fn structural_problems(v: &Value) -> Vec<Problem> {
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
    // And `bound` (`/2` records whose gate declared one).
    out.retain(|p| p.field != "bound" || obj.contains_key("bound"));
    // And `footprint` (gate-run records written since records carry it).
    out.retain(|p| p.field != "footprint" || obj.contains_key("footprint"));
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
            "bound" => typed::<Option<RecordBound>>(val),
            "footprint" => typed::<Option<RecordFootprint>>(val),
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

/// True when `s` is a record id: lower-case letters, digits, `.`, `_`, `-`, starting with a letter or digit
/// (a file name in the records directory, never a path).
pub fn is_id(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

fn is_hex_lower(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why `id` is not a record id (`"x/y" is not an id: ...`), or None when it is one ([`is_id`]): what a
/// record's `id` is refused with, and `servegate run --record ID` before the serve starts.
pub fn id_problem(id: &str) -> Option<String> {
    (!is_id(id)).then(|| format!("{id:?} is not an id: lower-case letters, digits, '.', '_', '-', starting with a letter or digit"))
}

/// Semantic checks of a parsed record; `file_stem` is its file name without `.json` (the id must equal it).
pub fn validate(r: &Record, file_stem: &str) -> Vec<Problem> {
    let mut p = Vec::new();
    let mut bad = |field: &str, message: String| p.push(Problem::new(field, message));
    identity(r, file_stem, &mut bad);
    model_hash(r, &mut bad);
    metric(r, &mut bad);
    range_and_unmeasured(r, &mut bad);
    values(r, &mut bad);
    conditions(r, &mut bad);
    source(r, &mut bad);
    notes(r, &mut bad);
    pair(r, &mut bad);
    load_point(r, &mut bad);
    super::footprint::validate(r, &mut bad);
    p
}

/// The schema id, the id (equal to the file name), the date and the required texts.
fn identity(r: &Record, file_stem: &str, bad: &mut dyn FnMut(&str, String)) {
    if !RECORD_SCHEMAS_READ.contains(&r.schema.as_str()) {
        bad(
            "schema",
            format!(
                "{:?}, expected {RECORD_SCHEMA:?} (or a record written before it: {})",
                r.schema,
                RECORD_SCHEMAS_READ[..RECORD_SCHEMAS_READ.len() - 1].join(", ")
            ),
        );
    }
    if let Some(why) = id_problem(&r.id) {
        bad("id", why);
    }
    if r.id != file_stem {
        bad(
            "id",
            format!(
                "{:?} differs from the file name {:?} (a record is data/records/<id>.json)",
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
}

/// `model.sha256`: a full hash, or a declared prefix of a published record; what was hashed.
fn model_hash(r: &Record, bad: &mut dyn FnMut(&str, String)) {
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
}

/// The metric, its unit and statistic, the decimals, the figure and n.
fn metric(r: &Record, bad: &mut dyn FnMut(&str, String)) {
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
        && !(r.load_point.is_some() && STATISTICS.contains(&r.statistic.as_str()))
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
    bound(r, bad);
}

/// The bound: only in a `/2` record; floor or limit as the metric's direction says; a finite non-negative
/// value; where it is declared.
fn bound(r: &Record, bad: &mut dyn FnMut(&str, String)) {
    let Some(b) = &r.bound else { return };
    if r.schema != RECORD_SCHEMA {
        bad(
            "bound",
            format!(
                "present in a {:?} record: bound is {RECORD_SCHEMA:?}'s",
                r.schema
            ),
        );
    }
    if let Some(m) = crate::vocab::Metric::from_record_name(&r.metric.name) {
        let want = match m.info().better {
            crate::vocab::Better::Higher => "floor",
            _ => "limit",
        };
        if b.kind != want {
            bad(
                "bound.kind",
                format!(
                    "{:?}: a bound on {} is a {want} (its direction in the metric registry)",
                    b.kind, r.metric.name
                ),
            );
        }
    }
    if !b.value.is_finite() || b.value < 0.0 {
        bad(
            "bound.value",
            format!("{} is not a finite non-negative number", b.value),
        );
    }
    if b.declared.trim().is_empty() {
        bad(
            "bound.declared",
            "empty: say where the gate declares it".into(),
        );
    }
}

/// The range, and the unmeasured requests: each with its cause, once, and at most half of the judged.
fn range_and_unmeasured(r: &Record, bad: &mut dyn FnMut(&str, String)) {
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
}

/// The values: n of them, their median and range as stated; or null, saying why (published records only).
fn values(r: &Record, bad: &mut dyn FnMut(&str, String)) {
    let published = r.source.kind == "published";
    let d = r.decimals;
    let [lo, hi] = r.range;
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
                let median = percentile_of(&r.statistic, values)
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
}

/// The conditions of the measurement: the hold, the load averages, the known answer.
fn conditions(r: &Record, bad: &mut dyn FnMut(&str, String)) {
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
}

/// The source, and what a gate run must carry (every fact its evidence has).
fn source(r: &Record, bad: &mut dyn FnMut(&str, String)) {
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
}

/// What would make the figure wrong: a sentence, required.
fn notes(r: &Record, bad: &mut dyn FnMut(&str, String)) {
    // notes
    if let Some(why) = crate::spec::record::sentence_problem(&r.notes.what_would_make_it_wrong) {
        bad("notes.what_would_make_it_wrong", why);
    }
}

/// A pair record: the other figure, its range, the ratio at its decimals, the arms in order and their medians.
fn pair(r: &Record, bad: &mut dyn FnMut(&str, String)) {
    let d = r.decimals;
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
}

/// A float without trailing noise (`4.275`, `39.25`).
fn trim_float(x: f64) -> String {
    let s = format!("{x:.9}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// Statistics a load record may state besides `median`: percentiles (numpy linear) and `window` (an
/// aggregate over the point's measured window).
pub(crate) const STATISTICS: &[&str] = &["p90", "p95", "p99", "window"];

/// The percentile a statistic names (`median` 50, `p95` 95), computed from `values` with numpy's linear
/// method; `None` for `window` or an unknown statistic, or no values.
pub fn percentile_of(statistic: &str, values: &[f64]) -> Option<f64> {
    let q: f64 = match statistic {
        "median" => return stats::median(values),
        s => s.strip_prefix('p')?.parse().ok()?,
    };
    stats::percentile(values, q)
}

/// Checks of a record's `load_point` and the rules that hold only for load records (pure; empty for a
/// record without one): `window` statistics only for the two throughput metrics and back, `values` null
/// for `window` with `n` = `load_point.requests` and `value` recomputed from the window's figures at the
/// record's decimals, a finite positive window.
fn load_point(r: &Record, bad: &mut dyn FnMut(&str, String)) {
    let throughput = matches!(
        r.metric.name.as_str(),
        "output_throughput" | "request_throughput"
    );
    let Some(lp) = &r.load_point else {
        if throughput {
            bad(
                "load_point",
                format!("missing: {} is a load point's figure (statistic window over its measured window)", r.metric.name),
            );
        }
        return;
    };
    if !(lp.window_ms.is_finite() && lp.window_ms > 0.0) {
        bad(
            "load_point.window_ms",
            format!("{} is not a positive duration", lp.window_ms),
        );
        return;
    }
    if lp.concurrency.is_some() == lp.rate_rps.is_some() {
        bad(
            "load_point",
            "exactly one of concurrency (closed loop) and rate_rps (open loop) is set".into(),
        );
    }
    if throughput != (r.statistic == "window") {
        bad(
            "statistic",
            format!(
                "{:?} for {}: the throughput metrics are stated as `window`, and only they",
                r.statistic, r.metric.name
            ),
        );
        return;
    }
    if let Some(q) = r
        .statistic
        .strip_prefix('p')
        .and_then(|q| q.parse::<f64>().ok())
    {
        let need = min_n_for(q);
        if (r.n as usize) < need {
            bad(
                "statistic",
                format!(
                    "{} from n = {}: claiming p{q} needs at least {need} requests at the point (docs/load.md)",
                    r.statistic, r.n
                ),
            );
        }
    }
    if throughput {
        if r.values.is_some() {
            bad(
                "values",
                "a window statistic is one figure over the measured window: values must be null (values_unavailable says so)".into(),
            );
        }
        if r.n != lp.requests {
            bad(
                "n",
                format!(
                    "{} but load_point.requests is {}: n of a window statistic is the requests of the window",
                    r.n, lp.requests
                ),
            );
        }
        let exact = if r.metric.name == "output_throughput" {
            lp.output_tokens as f64 * 1000.0 / lp.window_ms
        } else {
            f64::from(lp.requests) * 1000.0 / lp.window_ms
        };
        let half = 0.5 * 10f64.powi(-(r.decimals.min(17) as i32)) + 1e-9;
        if (r.value - exact).abs() > half {
            bad(
                "value",
                format!(
                    "{} does not match {} over the window {} ms = {} (to {} decimals)",
                    r.fmt(r.value),
                    if r.metric.name == "output_throughput" {
                        format!("{} output tokens", lp.output_tokens)
                    } else {
                        format!("{} requests", lp.requests)
                    },
                    lp.window_ms,
                    r.fmt(exact),
                    r.decimals
                ),
            );
        }
    }
}
