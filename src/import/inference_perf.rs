//! inference-perf's per-request output, `per_request_lifecycle_metrics.json` (written with
//! `report.request_lifecycle.per_request: true`), as inference-perf 0.7.0 writes it
//! (`inference_perf/reportgen/base.py` `build_per_request_lifecycle_entry`, read in the installed package):
//! one JSON array, one entry per request, in completion order:
//!
//! * `start_time`, `end_time`: `time.perf_counter()` at the send and at the end, s (one clock per run);
//! * `info.response_metrics.chunk_times`: the arrival of each content chunk, s on the same clock
//!   (`output_token_times` is the same list after its tokenizer's correction; the raw arrivals are read);
//! * `info.response_metrics.output_tokens` (its tokenizer's count) and `server_usage.completion_tokens`
//!   (the serve's, read first when present);
//! * `info.response_metrics.response_chunks`: each chunk's JSON (with `per_request_fields.response_chunks`,
//!   on by default): the text is rebuilt from their `choices[0].text` or `choices[0].delta.content`;
//! * `error`: null, or `{error_type, error_msg}` (then `info.response_metrics` is null).
//!
//! The file states neither the tool's version nor the load: the version comes from `--tool-version`; the
//! load point from `config.yaml` beside the file ([`sibling_point`]; a rate or concurrency there that is not
//! one is a format error, [`NoPoint::Malformed`]), else `--point`.

use std::path::Path;

use super::json::{parse_doc, Node};
use super::{ToolRequest, ToolRun};
use crate::spec::load::Point;

/// Parses inference-perf's `per_request_lifecycle_metrics.json`. Errors name the JSON path.
pub fn parse(text: &str) -> Result<ToolRun, String> {
    let v = parse_doc(text)?;
    let root = Node::root(&v, "$");
    let entries = match v.as_array() {
        Some(_) => root.items()?,
        None => {
            return Err(format!(
                "$: not inference-perf's per_request_lifecycle_metrics.json (the file is {}, not an array of requests){}",
                super::json::kind(&v),
                if root.has("successes") || root.has("failures") || root.has("load_summary") {
                    ": this looks like its summary_lifecycle_metrics.json (aggregates); servegate judges percentiles from per-request values only: import per_request_lifecycle_metrics.json (report.request_lifecycle.per_request: true)"
                } else {
                    ""
                }
            ))
        }
    };
    if entries.is_empty() {
        return Err("$: an empty array: the run recorded no request".into());
    }
    let mut requests = Vec::with_capacity(entries.len());
    let mut models = std::collections::BTreeSet::new();
    // (start_time, end_time) -> the entry that holds them. The file has no request id, but both are
    // `time.perf_counter()` readings (ns resolution) of one clock: two requests never share both, so an
    // entry with another's is one request recorded twice, refused, never counted twice.
    let mut seen: std::collections::HashMap<(u64, u64), String> = std::collections::HashMap::new();
    for e in &entries {
        if !e.v.is_object() || !e.has("start_time") || !e.has("end_time") || !e.has("error") {
            return Err(format!(
                "{}: not an inference-perf per-request entry (needs start_time, end_time and error): another tool's file?",
                e.path
            ));
        }
        if let (Some(s), Some(t)) = (e.v["start_time"].as_f64(), e.v["end_time"].as_f64()) {
            if let Some(first) = seen.insert((s.to_bits(), t.to_bits()), e.path.clone()) {
                return Err(format!(
                    "{}: start_time and end_time are {first}'s too (time.perf_counter() readings, never shared by two requests): {}",
                    e.path,
                    super::recorded_twice(" (files joined, or an entry repeated?)")
                ));
            }
        }
        if let Some(m) = e
            .opt("request")
            .and_then(|r| r.v.as_str())
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
            .and_then(|r| r["model"].as_str().map(str::to_string))
        {
            models.insert(m);
        }
        requests.push(entry(e)?);
    }
    let mut notes = vec![
        "inference-perf: arrivals are its chunk_times (time.perf_counter() of each content chunk), not its tokenizer-corrected output_token_times".to_string(),
    ];
    for m in models {
        notes.push(format!("inference-perf model: {m}"));
    }
    Ok(ToolRun {
        version: None,
        command: None,
        point: None,
        max_concurrency: None,
        planned: None,
        requests,
        lacks: Vec::new(),
        notes,
        file_sha256: None,
    })
}

/// One entry: a failure (its `error`) or a success with its chunk arrivals.
fn entry(e: &Node) -> Result<ToolRequest, String> {
    let start_s = e.get("start_time")?.nonneg()?;
    let end_s = e.get("end_time")?.nonneg()?;
    if end_s < start_s {
        return Err(format!(
            "{}.end_time: before start_time ({} < {})",
            e.path,
            super::shown_num(end_s),
            super::shown_num(start_s)
        ));
    }
    let start_ms = start_s * 1000.0;
    if let Some(err) = e.opt("error") {
        let kind = err
            .opt("error_type")
            .and_then(|t| t.v.as_str().map(str::to_string));
        let msg = err
            .opt("error_msg")
            .and_then(|t| t.v.as_str().map(str::to_string));
        let error = match (kind, msg) {
            (Some(k), Some(m)) => format!("{k}: {m}"),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => format!("{}: an error without error_type or error_msg", err.path),
        };
        return Ok(ToolRequest {
            start_ms,
            end_ms: (end_s - start_s) * 1000.0,
            error: Some(error),
            ..Default::default()
        });
    }
    let rm = e.get("info")?.get("response_metrics")?;
    let chunks = rm.get("chunk_times")?.items()?;
    if chunks.is_empty() {
        return Err(format!(
            "{}.chunk_times: empty on a request without error: no chunk arrival to time",
            rm.path
        ));
    }
    let mut arrivals = Vec::with_capacity(chunks.len());
    let mut last = start_s;
    for c in &chunks {
        let t = c.nonneg()?;
        if t < last {
            return Err(format!(
                "{}: {} is before the request's start or the chunk before ({}): one clock per run",
                c.path,
                super::shown_num(t),
                super::shown_num(last)
            ));
        }
        last = t;
        arrivals.push((t - start_s) * 1000.0);
    }
    let tokens = match rm
        .opt("server_usage")
        .and_then(|u| u.opt("completion_tokens"))
    {
        Some(c) => c.u64()?,
        None => rm.get("output_tokens")?.u64()?,
    };
    let text = match rm.opt("response_chunks") {
        Some(cs) => Some(text_of(&cs.items()?)?),
        None => None,
    };
    super::check_times(
        &format!("{}.chunk_times", rm.path),
        &arrivals,
        (end_s - start_s) * 1000.0,
        &format!("{}.end_time", e.path),
    )?;
    Ok(ToolRequest {
        start_ms,
        warmup: false,
        arrivals_ms: arrivals,
        per_arrival: None,
        end_ms: (end_s.max(last) - start_s) * 1000.0,
        tokens: Some(tokens),
        text,
        error: None,
        status: None,
    })
}

/// The reply's text from its chunks (each a JSON string: `choices[0].text` for the completions API,
/// `choices[0].delta.content` for chat; chunks without either, such as the usage chunk, add nothing).
fn text_of(chunks: &[Node]) -> Result<String, String> {
    let mut text = String::new();
    for c in chunks {
        let raw = c.str()?;
        let v: serde_json::Value = serde_json::from_str(raw)
            .map_err(|err| format!("{}: a response chunk that is not JSON: {err}", c.path))?;
        let choice = &v["choices"][0];
        if let Some(t) = choice["text"]
            .as_str()
            .or_else(|| choice["delta"]["content"].as_str())
        {
            text.push_str(t);
        }
    }
    Ok(text)
}

/// The load point `config.yaml` beside `file` states (inference-perf writes the run's whole config there):
/// `load.type: concurrent` with one stage's `concurrency_level: N` is `c=N`; `constant` or `poisson` with
/// one stage's `rate: R` is `r=R`. None when the file is absent, names no one point or is malformed
/// ([`config_point`]). Read by its lines (the few keys above, at the indentation inference-perf writes), not
/// as general YAML.
pub fn sibling_point(file: &Path) -> Option<Point> {
    sibling_config(file)?.ok()
}

/// What `config.yaml` beside `file` says of the load point: None when there is no readable such file, else
/// the point, or why none is taken from it ([`config_point`]).
pub fn sibling_config(file: &Path) -> Option<Result<Point, NoPoint>> {
    let text = crate::io::input::read_to_string(
        &file.parent()?.join("config.yaml"),
        super::MAX_FILE_BYTES,
    )
    .ok()?;
    Some(config_point(&text))
}

/// [`sibling_point`] on the text of a `config.yaml`.
pub fn point_of_config(text: &str) -> Option<Point> {
    config_point(text).ok()
}

/// Why no load point is taken from a `config.yaml` ([`config_point`]).
#[derive(Debug, Clone, PartialEq)]
pub enum NoPoint {
    /// It names no one point (no `load:` stage, several stages, an unknown type, a stage without its
    /// number): a note says why, and `--point` names the point.
    Unstated(String),
    /// A number it states for the point is not one (a `rate` not a finite number over 0, a
    /// `concurrency_level` not a whole number of 1 or more; inference-perf refuses them itself): a format
    /// error naming the key (`load.stages[0].rate`), as a malformed field of the imported file is.
    Malformed(String),
}

impl NoPoint {
    /// Why, in words.
    pub fn why(&self) -> &str {
        match self {
            NoPoint::Unstated(w) | NoPoint::Malformed(w) => w,
        }
    }
}

/// The one load point a `config.yaml`'s `load:` states (`type: concurrent` with one stage's
/// `concurrency_level`, or `constant` / `poisson` with one stage's `rate`), or why none is taken
/// ([`NoPoint`]): no `load:` stage, several stages (a sweep), an unknown type, a stage without its number
/// (`null` or absent), or that number malformed.
pub fn config_point(text: &str) -> Result<Point, NoPoint> {
    let mut in_load = false;
    let mut kind = None;
    let mut stages = 0;
    // The last stage's raw values, each with its stage's index.
    let mut concurrency: Option<(usize, String)> = None;
    let mut rate: Option<(usize, String)> = None;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            in_load = line.trim_end() == "load:";
            continue;
        }
        if !in_load {
            continue;
        }
        let t = line.trim();
        if let Some(k) = line.strip_prefix("  type: ") {
            kind = Some(k.trim().to_string());
        }
        let t = match t.strip_prefix("- ") {
            Some(rest) if line.starts_with("  - ") => {
                stages += 1;
                rest
            }
            _ => t,
        };
        let at = stages.max(1) - 1;
        if let Some(c) = t.strip_prefix("concurrency_level: ") {
            concurrency = Some((at, c.trim().to_string()));
        } else if let Some(r) = t.strip_prefix("rate: ") {
            rate = Some((at, r.trim().to_string()));
        }
    }
    let unstated = |w: &str| NoPoint::Unstated(w.to_string());
    if stages == 0 {
        return Err(unstated(
            "it has no load.stages entry (or is not inference-perf's config)",
        ));
    }
    if stages > 1 {
        return Err(NoPoint::Unstated(format!(
            "it has {stages} load stages (a sweep; one file is judged as one point)"
        )));
    }
    let kind = kind.ok_or_else(|| unstated("it has no load.type"))?;
    let stated =
        |v: Option<(usize, String)>| v.filter(|(_, x)| !matches!(x.as_str(), "null" | "~" | ""));
    let shown = |x: &str| x.chars().take(40).collect::<String>();
    match kind.as_str() {
        "concurrent" => {
            let (i, c) = stated(concurrency)
                .ok_or_else(|| unstated("its stage has no concurrency_level"))?;
            c.parse::<u32>()
                .ok()
                .filter(|c| *c > 0)
                .map(Point::Concurrency)
                .ok_or_else(|| {
                    NoPoint::Malformed(format!(
                        "load.stages[{i}].concurrency_level: {:?} is not a concurrency (a whole number of 1 or more)",
                        shown(&c)
                    ))
                })
        }
        "constant" | "poisson" => {
            let (i, r) = stated(rate).ok_or_else(|| unstated("its stage has no rate"))?;
            r.parse::<f64>()
                .ok()
                .filter(|r| r.is_finite() && *r > 0.0)
                .map(Point::Rate)
                .ok_or_else(|| {
                    NoPoint::Malformed(format!(
                        "load.stages[{i}].rate: {:?} is not a request rate (a finite number of requests/s over 0)",
                        shown(&r)
                    ))
                })
        }
        k => Err(NoPoint::Unstated(format!(
            "its load.type {:?} is none of concurrent, constant, poisson",
            shown(k)
        ))),
    }
}
