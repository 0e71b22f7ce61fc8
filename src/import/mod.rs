//! `servegate import`: another load tool's per-request output made into servegate's load evidence, so a
//! gate's load assertions judge a run the team's own tool made (docs/load.md "Verdicts over another tool's
//! run"). One parser per format ([`vllm`], [`aiperf`], [`guidellm`], [`inference_perf`], [`k6`]) reads the file into a [`ToolRun`]
//! (per request: when it started, when each token chunk arrived, its token count, its text when recorded,
//! its error); [`write_evidence`] writes it as a load point's run directory (`NN.request.json`,
//! `NN.response.json`, `NN.reads.jsonl`, `run.json`, `load.json`) under a gate run directory, with
//! `run.json` `imported` naming the tool, its version, its command and what its format lacks. Judging is
//! then `servegate judge`'s (`run::load::judge_dir`): the same percentiles, the same three states, every
//! verdict ending `timings by <tool> <version>, not servegate's client`.
//!
//! The reads are a reconstruction, said so in `run.json`: one read per token chunk the tool timed, at the
//! tool's arrival time, carrying the reply's text split over the chunks (or one placeholder character per
//! token when the tool recorded no text), and a last read with the usage (`completion_tokens` = the tool's
//! count) and `[DONE]` at the tool's end of the request. A figure the format does not carry per request
//! (GuideLLM: each token's arrival) is listed in `imported.lacks`, and its percentiles are refused.

pub mod aiperf;
pub mod guidellm;
pub mod inference_perf;
mod json;
pub mod k6;
pub mod vllm;

use std::path::{Path, PathBuf};

use crate::evidence::imported::{Imported, Lack};
use crate::evidence::load::{LoadRecord, LOAD_FILE, LOAD_SCHEMA};
use crate::evidence::{self, EvidenceWriter, RequestRecord, RunStatus, RunSummary};
use crate::io::client::ResponseMeta;
use crate::io::exchange::SendTiming;
use crate::io::reads::TimedRead;
use crate::spec::load::Point;
use crate::spec::GateSpec;

/// The tools whose output servegate imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// vLLM's `vllm bench serve --save-result --save-detailed` JSON (vllm/benchmarks/serve.py).
    VllmBench,
    /// AIPerf's per-request `profile_export.jsonl` (aiperf MetricRecordInfo per line).
    AiPerf,
    /// GuideLLM's benchmarks report JSON (`--output-path ... .json`, per-request `requests`).
    GuideLlm,
    /// inference-perf's `per_request_lifecycle_metrics.json` (`report.request_lifecycle.per_request`).
    InferencePerf,
    /// k6's `--out json` of a script using xk6-llm's client (`k6/x/llm`): its per-request samples.
    K6,
}

impl Tool {
    /// Every tool, in `--from` order.
    pub const ALL: [Tool; 5] = [
        Tool::VllmBench,
        Tool::AiPerf,
        Tool::GuideLlm,
        Tool::InferencePerf,
        Tool::K6,
    ];

    /// The `--from` name: `vllm-bench`, `aiperf`, `guidellm`, `inference-perf`, `k6`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::VllmBench => "vllm-bench",
            Tool::AiPerf => "aiperf",
            Tool::GuideLlm => "guidellm",
            Tool::InferencePerf => "inference-perf",
            Tool::K6 => "k6",
        }
    }

    /// The tool named `s` (`--from`), or None.
    pub fn from_name(s: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Parses `text`, the tool's output file, into a [`ToolRun`]. Errors name the line (JSONL) or the JSON
    /// path, and say when the file is another tool's, aggregates only, or cut short.
    pub fn parse(self, text: &str) -> Result<ToolRun, String> {
        if text.trim().is_empty() {
            return Err(format!(
                "empty file{}: no {} output in it (the tool did not finish writing it?)",
                if text.is_empty() {
                    ""
                } else {
                    " (whitespace only)"
                },
                self.name()
            ));
        }
        match self {
            Tool::VllmBench => vllm::parse(text),
            Tool::AiPerf => aiperf::parse(text),
            Tool::GuideLlm => guidellm::parse(text),
            Tool::InferencePerf => inference_perf::parse(text),
            Tool::K6 => k6::parse(text),
        }
    }
}

/// The most bytes a tool's file may hold to be imported: 4 GiB. The file is read whole and parsed into
/// memory (several times its size for JSON), so a larger one is refused, said, before it is read, never
/// left to exhaust the runner's memory (a hostile or mistaken path: `/dev/zero`, a log).
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// Reads the tool's file at `path` whole: a regular file (never a FIFO, device or directory, which could
/// block or never end) of at most [`MAX_FILE_BYTES`], counted as read too (a file growing while read is
/// refused). Errors name the path and why.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    let p = path.display();
    crate::io::input::read(path, MAX_FILE_BYTES).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidInput => format!(
            "{p}: {e}: servegate imports the file a tool wrote; save the tool's output to a file and import that"
        ),
        std::io::ErrorKind::FileTooLarge => format!(
            "{p}: {e}; an import reads a tool's file whole: import one point's file at a time"
        ),
        _ => format!("{p}: {e}"),
    })
}

/// Reads `path` as `tool`'s output ([`Tool::parse`]); for AIPerf, the version and command from the
/// aggregate file beside it ([`aiperf::sibling`]); for inference-perf, the load point from `config.yaml`
/// beside it ([`inference_perf::sibling_config`]). Errors: the file cannot be read, is not UTF-8 (the line
/// named), the parser's, or a malformed rate or concurrency in inference-perf's `config.yaml` (the key
/// named).
pub fn read(tool: Tool, path: &Path) -> Result<ToolRun, String> {
    let bytes = read_file(path)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
        format!("line {line}: not UTF-8 (byte {at}): JSON is UTF-8; another tool's file, or a binary one?")
    })?;
    let mut run = tool.parse(text)?;
    run.file_sha256 = Some(crate::io::hash::sha256_bytes(&bytes));
    if tool == Tool::AiPerf {
        let (version, command) = aiperf::sibling(path);
        if version.is_some() || command.is_some() {
            run.notes.push(
                "aiperf: version and command from profile_export_aiperf.json beside the file"
                    .into(),
            );
        }
        run.version = run.version.or(version);
        run.command = run.command.or(command);
    }
    if tool == Tool::InferencePerf && run.point.is_none() {
        match inference_perf::sibling_config(path) {
            Some(Ok(p)) => {
                run.point = Some(p);
                run.notes.push(format!(
                    "inference-perf: load point {} from config.yaml beside the file",
                    p.label()
                ));
            }
            Some(Err(inference_perf::NoPoint::Malformed(why))) => {
                return Err(format!("config.yaml beside the file: {why}"))
            }
            Some(Err(inference_perf::NoPoint::Unstated(why))) => run.notes.push(format!(
                "inference-perf: no load point taken from config.yaml beside the file: {why}"
            )),
            None => {}
        }
    }
    Ok(run)
}

/// One request as another tool recorded it. Times are ms; `start_ms` counts from the tool's own clock's
/// origin (the importer takes the earliest start as 0), the others from this request's start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolRequest {
    /// When the tool sent it, ms on the tool's clock (vLLM `start_times` × 1000, AIPerf
    /// `request_start_ns` / 1e6, GuideLLM `request_start` × 1000).
    pub start_ms: f64,
    /// A warmup request (AIPerf `benchmark_phase` `warmup`): recorded, never judged.
    pub warmup: bool,
    /// Each token chunk's arrival, ms since the start, in order: the first is the TTFT. Empty for a failed
    /// request.
    pub arrivals_ms: Vec<f64>,
    /// Tokens each arrival carried, when the format says (GuideLLM: 1, then the rest at the last token);
    /// None: one per arrival, the remainder on the last.
    pub per_arrival: Option<Vec<u64>>,
    /// When the request ended, ms since its start (vLLM: the last token chunk; AIPerf `request_latency`;
    /// GuideLLM `request_end`); 0 for a failed request whose end the tool did not record (vLLM on an HTTP
    /// error: counted in flight at its start only).
    pub end_ms: f64,
    /// Output tokens as the tool counted them (vLLM `output_lens`, AIPerf `output_sequence_length`,
    /// GuideLLM `output_tokens`).
    pub tokens: Option<u64>,
    /// The reply's text, when the tool recorded it.
    pub text: Option<String>,
    /// Why the tool marked it failed (its own words), when it did.
    pub error: Option<String>,
    /// The HTTP status the tool recorded for a failure, when it did (AIPerf `error.code`).
    pub status: Option<u16>,
}

/// One tool run read from its file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolRun {
    /// The tool's version as the file states it (None: the file does not; `--tool-version` then says).
    pub version: Option<String>,
    /// The command that made the file, as the tool's output states it (AIPerf's `run_info.cli_command`),
    /// else None (`--tool-command` then says).
    pub command: Option<String>,
    /// The sweep point the file states (vLLM `max_concurrency` / `request_rate`, GuideLLM's strategy), if
    /// any.
    pub point: Option<Point>,
    /// The cap on requests in flight the file states for an open-loop run (vLLM `max_concurrency` beside a
    /// `request_rate`, GuideLLM's `constant` / `poisson` strategy's `max_concurrency`); None when it states
    /// none, and for a closed loop (its concurrency is its cap). [`choose_point`] compares it with the
    /// gate's `[load] max_concurrency`.
    pub max_concurrency: Option<u32>,
    /// Judged requests the tool planned, when the file states it (vLLM `num_prompts`).
    pub planned: Option<usize>,
    /// Every request recorded, in the file's order.
    pub requests: Vec<ToolRequest>,
    /// Figures the format does not carry per request, with why (metric wire name, reason).
    pub lacks: Vec<(String, String)>,
    /// Facts about the file worth a note in `run.json` (model, backend, ...), outside text.
    pub notes: Vec<String>,
    /// The sha256 (hex) of the bytes parsed, set by [`read`] (None from a parser alone): the provenance
    /// names the bytes judged, not a second read of a file that may have changed.
    pub file_sha256: Option<String>,
}

impl ToolRun {
    /// Marks the first `n` requests by send time (`start_ms`; ties in the file's order) as warmups: for a
    /// tool run whose first `n` requests were servegate's warmups and whose output does not say so
    /// (GuideLLM, given the warmups as its dataset's first lines: its own `warmup` is a measurement window,
    /// and its report lists the requests before the window beside the others). The file's order is kept.
    pub fn mark_first_as_warmups(&mut self, n: usize) {
        let mut order: Vec<usize> = (0..self.requests.len()).collect();
        order.sort_by(|&a, &b| {
            self.requests[a]
                .start_ms
                .total_cmp(&self.requests[b].start_ms)
        });
        for &i in order.iter().take(n) {
            self.requests[i].warmup = true;
        }
    }
}

impl Tool {
    /// True when the tool's output neither marks warmup requests nor leaves them out, so a run made for a
    /// gate with `[load] warmup_requests = N` holds them unmarked as its first N sends: GuideLLM (its
    /// `warmup` is a measurement window; its report lists the requests before it beside the others), k6 and
    /// inference-perf. AIPerf marks them (`benchmark_phase`); vLLM sends its `--num-warmups` apart and does
    /// not record them.
    pub fn warmups_unmarked(self) -> bool {
        matches!(self, Tool::GuideLlm | Tool::K6 | Tool::InferencePerf)
    }
}

/// Applies `gate`'s `[load] warmup_requests` to `run` read by `tool` when the tool does not mark warmups
/// ([`Tool::warmups_unmarked`]): its first N requests by send time are recorded as warmups, not judged
/// ([`ToolRun::mark_first_as_warmups`]), as the driver run of the same gate records them. Returns the note
/// saying so, None when nothing was marked.
pub fn apply_gate_warmups(gate: &GateSpec, tool: Tool, run: &mut ToolRun) -> Option<String> {
    let n = gate.load.as_ref()?.spec.warmup_requests as usize;
    if n == 0 || !tool.warmups_unmarked() || run.requests.iter().any(|r| r.warmup) {
        return None;
    }
    let n = n.min(run.requests.len());
    run.mark_first_as_warmups(n);
    Some(format!(
        "the gate's [load] warmup_requests: the first {n} requests by send time are recorded as warmups, not judged ({}'s output does not mark warmups)",
        tool.name()
    ))
}

/// The longest span servegate takes from another tool's file, ms: a day. A request's time to its first
/// token, its chunks, its end, or a send later than the run's first by more is refused as absurd (a unit
/// mistaken, a corrupted value), never judged or printed as a measured window.
pub const MAX_SPAN_MS: f64 = 86_400_000.0;

/// Slack for a chunk stamped after the request's end by the tool's own rounding, ms.
const END_SLACK_MS: f64 = 1.0;

/// Checks one request's times as read from a tool's file: every arrival and the end within
/// [`MAX_SPAN_MS`], the arrivals in order, and no chunk after the request's end (`end_ms`, read from the
/// field `end_field`, e.g. `$.latencies[3]`); `at` names where the request is (`$.ttfts[3]`, `line 4`).
pub(crate) fn check_times(
    at: &str,
    arrivals_ms: &[f64],
    end_ms: f64,
    end_field: &str,
) -> Result<(), String> {
    for (k, t) in arrivals_ms.iter().enumerate() {
        if !(0.0..=MAX_SPAN_MS).contains(t) {
            return Err(format!(
                "{at}: {} at {} is over a day after the send: an impossible time (a unit mistaken?)",
                if k == 0 { "the first token" } else { "a chunk" },
                shown_ms(*t)
            ));
        }
    }
    if !(0.0..=MAX_SPAN_MS).contains(&end_ms) {
        return Err(format!(
            "{end_field}: the request's end at {} is over a day after the send: an impossible time (a unit mistaken?)",
            shown_ms(end_ms)
        ));
    }
    if let Some(last) = arrivals_ms.last().filter(|l| **l > end_ms + END_SLACK_MS) {
        return Err(format!(
            "{at}: the {} at {} is after the request's end ({}, {end_field}): impossible timings",
            if arrivals_ms.len() == 1 {
                "first token"
            } else {
                "last chunk"
            },
            shown_ms(*last),
            shown_ms(end_ms)
        ));
    }
    Ok(())
}

/// Checks that no request of `run` was sent more than [`MAX_SPAN_MS`] after its first send (`at(i)` names
/// request `i` in the file).
pub(crate) fn check_starts(run: &ToolRun, at: impl Fn(usize) -> String) -> Result<(), String> {
    let first = run
        .requests
        .iter()
        .map(|r| r.start_ms)
        .fold(f64::INFINITY, f64::min);
    match run
        .requests
        .iter()
        .position(|r| r.start_ms - first > MAX_SPAN_MS)
    {
        Some(i) => Err(format!(
            "{}: sent {} after the run's first request: over a day, an impossible time (a unit mistaken?)",
            at(i),
            shown_ms(run.requests[i].start_ms - first)
        )),
        None => Ok(()),
    }
}

/// A request rate as a tool's file states it at `r`: a finite number of requests per second over 0. Any
/// other (0, negative: the tool itself refuses them, vLLM's `get_request` asserts a positive rate and
/// GuideLLM's strategies declare `rate: float = Field(gt=0)`) is a malformed file, an error naming the path,
/// never a point of its own (`r=-5`) nor no point at all.
pub(crate) fn rate_of(r: &json::Node) -> Result<f64, String> {
    let x = r.f64()?;
    if x > 0.0 {
        Ok(x)
    } else {
        Err(format!(
            "{}: {x} is not a request rate (requests/s > 0)",
            r.path
        ))
    }
}

/// `ms` for an error: `195.000 ms` up to a day, else in scientific notation (`1.000e303 ms`, never 300
/// digits). Every reader prints a time from the file through this (or [`shown_num`]).
pub(crate) fn shown_ms(ms: f64) -> String {
    if ms.abs() <= MAX_SPAN_MS {
        format!("{ms:.3} ms")
    } else {
        format!("{ms:.3e} ms")
    }
}

/// A number from the file for an error, in the file's own unit (s, a count): as written (`0.25`,
/// `1796532996.600991`) between 1e-4 and 1e16 in magnitude, else in scientific notation (`1e300`,
/// `-2.5e-300`: Rust's `{}` would print every digit of 1e300, or 300 zeros before 2.5e-300).
pub(crate) fn shown_num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() || (1e-4..1e16).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// The end of every "a request recorded twice" refusal (`hint`: how a file comes to hold one twice, in
/// parentheses, or ""): one sentence for every reader, which refuses rather than count one request twice.
pub(crate) fn recorded_twice(hint: &str) -> String {
    format!("one request recorded twice{hint}; refused, as counting it twice would judge a run that was not")
}

/// What the command line adds to a tool's file.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The file imported (as given).
    pub file: PathBuf,
    /// `--tool-version`: the tool's version when the file does not state it (it must agree when it does).
    pub version: Option<String>,
    /// `--tool-command`: the command that made the file.
    pub command: Option<String>,
}

/// Parses a point label: `c=4` (closed loop, concurrency 4) or `r=8` / `r=0.5` (open loop, requests/s).
pub fn parse_point(s: &str) -> Result<Point, String> {
    let bad = || format!("{s:?}: expected c=N (concurrency) or r=R (requests per second)");
    if let Some(c) = s.strip_prefix("c=") {
        return c
            .parse::<u32>()
            .ok()
            .filter(|c| *c > 0)
            .map(Point::Concurrency)
            .ok_or_else(bad);
    }
    if let Some(r) = s.strip_prefix("r=") {
        return r
            .parse::<f64>()
            .ok()
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(Point::Rate)
            .ok_or_else(bad);
    }
    Err(bad())
}

/// The most requests the run had in flight at once (each from its start to its end, an end within 1 ms of
/// another's start not counted as overlapping: the tools stamp the end after the last byte), failed
/// requests included; a request whose end the tool did not record (`end_ms` 0: a vLLM failure) counts at
/// its start only, so the peak is then a lower bound ([`crate::analysis::load::peak_overlap`]). None for a
/// run without requests.
pub fn peak_in_flight(run: &ToolRun) -> Option<usize> {
    let judged: Vec<(f64, f64)> = run
        .requests
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| (r.start_ms, r.start_ms + r.end_ms - 1.0))
        .collect();
    (!judged.is_empty()).then(|| crate::analysis::load::peak_overlap(judged))
}

/// The point of the gate the run is filed under: the one `--point` names, else the one the file states,
/// else the gate's only point. Whatever named it, the run's own shape must be that load
/// ([`check_shape`]): a concurrency point's run never had more requests in flight than it
/// ([`peak_in_flight`]), a rate point's run the gate's cap (`[load] max_concurrency`) and none over it.
/// Errors: `--point` and the file disagree, the gate has no such point, the gate has several and nothing
/// names one, or the run was not the load of the point named.
pub fn choose_point(gate: &GateSpec, run: &ToolRun, asked: Option<Point>) -> Result<Point, String> {
    let Some(load) = &gate.load else {
        return Err(format!(
            "gate `{}` has no [load] table: servegate import judges a load gate's assertions",
            gate.name
        ));
    };
    let labels: Vec<String> = load.spec.points.iter().map(|p| p.label()).collect();
    let (p, how) = match (asked, run.point) {
        (Some(a), Some(f)) if a != f => {
            return Err(format!(
                "--point {} but the file states point {}: a run is judged as the load it was",
                a.label(),
                f.label()
            ))
        }
        (Some(a), Some(_)) => (a, NamedBy::PointAndFile),
        (Some(a), None) => (a, NamedBy::Point),
        (None, Some(f)) => (f, NamedBy::File),
        (None, None) if load.spec.points.len() == 1 => (load.spec.points[0], NamedBy::OnlyPoint),
        (None, None) => {
            return Err(format!(
                "the file does not state its concurrency or rate and gate `{}` has points {}: name one with --point",
                gate.name,
                labels.join(", ")
            ))
        }
    };
    if !load.spec.points.contains(&p) {
        return Err(format!(
            "the run is point {} but gate `{}` declares points {} ([load] concurrency / rate_rps): judge it with a gate that declares it",
            p.label(),
            gate.name,
            labels.join(", ")
        ));
    }
    check_shape(gate, run, p, how)?;
    Ok(p)
}

/// What named the point a run is filed under ([`choose_point`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NamedBy {
    /// `--point`, and the file states the same point.
    PointAndFile,
    /// `--point`; the file states none.
    Point,
    /// The file; no `--point`.
    File,
    /// Nothing: the gate's only point, taken for want of anything naming one.
    OnlyPoint,
}

impl std::fmt::Display for NamedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NamedBy::PointAndFile => "named by --point and stated by the file",
            NamedBy::Point => "named by --point",
            NamedBy::File => "stated by the file",
            NamedBy::OnlyPoint => "the gate's only point",
        })
    }
}

/// Refuses a run filed under `p` (named as `how` says) that was not that load, so a run is never filed,
/// nor passed, under a load it was not: at a concurrency point c, a run with more than c requests in flight
/// at once ([`peak_in_flight`]: failed requests counted; one without a recorded end at its send only, so
/// the peak is a lower bound and never refuses a run wrongly); when the gate's only point was taken for
/// want of anything naming one, a run with fewer than c in flight though it sent c or more too. At a rate
/// point: a cap the file states (`ToolRun::max_concurrency`) that is not the gate's `[load]
/// max_concurrency`, or more requests in flight than the gate's cap.
fn check_shape(gate: &GateSpec, run: &ToolRun, p: Point, how: NamedBy) -> Result<(), String> {
    let Some(load) = &gate.load else {
        return Ok(());
    };
    let Some(peak) = peak_in_flight(run) else {
        return Ok(());
    };
    let refuse = |limit: String| {
        format!(
            "the run had {peak} requests in flight at once, more than {limit} of point {} ({how}) allows: it was not that load, never filed (nor passed) as it; import it under the point it was, with a gate that declares it",
            p.label()
        )
    };
    match p {
        Point::Concurrency(n) => {
            let judged = run.requests.iter().filter(|r| !r.warmup).count();
            let under = peak < n as usize && judged >= n as usize;
            if how == NamedBy::OnlyPoint && (peak > n as usize || under) {
                return Err(format!(
                    "the file does not state its load and gate `{}`'s only point is {}, but the run had at most {peak} request(s) in flight: it was not that load; name its point with --point (the gate must declare it)",
                    gate.name,
                    p.label()
                ));
            }
            if peak > n as usize {
                return Err(refuse(format!("the concurrency {n}")));
            }
        }
        Point::Rate(_) => {
            let cap = load.spec.max_concurrency;
            if let Some(f) = run.max_concurrency.filter(|f| Some(*f) != cap) {
                return Err(format!(
                    "the file states max_concurrency {f} (its cap on requests in flight) but point {} ({how}) of gate `{}` is {}: a run under another cap is another load, never filed (nor passed) as that one",
                    p.label(),
                    gate.name,
                    match cap {
                        Some(g) => format!("capped at [load] max_concurrency = {g}"),
                        None => "uncapped (no [load] max_concurrency)".into(),
                    }
                ));
            }
            if let Some(g) = cap.filter(|g| peak > *g as usize) {
                return Err(refuse(format!("the cap [load] max_concurrency = {g}")));
            }
        }
    }
    Ok(())
}

/// What an import wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// The gate run directory (holds `gate.toml`, `run.json` and the point's directory).
    pub dir: PathBuf,
    /// The point it was filed under.
    pub point: Point,
    /// Requests written (warmup included).
    pub requests: usize,
    /// Of them, warmups (recorded, not judged: AIPerf's `benchmark_phase` `warmup`, or the gate's
    /// `warmup_requests` applied).
    pub warmups: usize,
    /// Judged requests the point plans.
    pub planned: usize,
    /// Lines for the person importing (a plan that will VOID, a version not stated...).
    pub notes: Vec<String>,
}

/// Writes `run` (read from `opts.file` by `tool`) as the evidence of a run of `gate` at `point`: the gate
/// run directory `dir` (created; it must not exist) with `gate.toml`, `run.json` and the point's
/// directory. `run.json` of both carries `imported` ([`Imported`]). The plan is the gate's `[load]
/// requests` when it sets one (a tool run with fewer judged requests is then VOID when judged, as a run of
/// servegate's own that sent fewer, and one with more is VOID too: judging takes the plan from the judging
/// gate), else the tool's (`num_prompts`), else the requests recorded.
pub fn write_evidence(
    gate: &GateSpec,
    tool: Tool,
    run: &ToolRun,
    opts: &ImportOptions,
    point: Point,
    dir: &Path,
) -> Result<Written, String> {
    write_evidence_with(gate, tool, run, opts, point, dir, &mut |_, _| {})
}

/// [`write_evidence`], calling `progress(written, total)` after each request is written (`servegate import`
/// prints it for a large file). The gate run's `run.json` says `running` until the point is whole, then
/// `complete`: an import killed midway leaves a run judged incomplete, never a complete one.
pub fn write_evidence_with(
    gate: &GateSpec,
    tool: Tool,
    run: &ToolRun,
    opts: &ImportOptions,
    point: Point,
    dir: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Written, String> {
    let load = gate
        .load
        .as_ref()
        .ok_or_else(|| format!("gate `{}` has no [load] table", gate.name))?;
    let imported = provenance(tool, run, opts)?;
    let version = imported.version.clone();
    let mut order: Vec<&ToolRequest> = run.requests.iter().collect();
    // Warmup first (servegate's indexes), each phase in send order.
    order.sort_by(|a, b| {
        b.warmup
            .cmp(&a.warmup)
            .then(a.start_ms.total_cmp(&b.start_ms))
    });
    let warmup = order.iter().filter(|r| r.warmup).count();
    let judged = order.len() - warmup;
    let planned = match load.spec.requests {
        Some(n) => n as usize,
        None => run.planned.unwrap_or(judged).max(judged),
    };
    let mut notes = Vec::new();
    if judged < planned {
        notes.push(format!(
            "the point plans {planned} judged requests ({}) and the file holds {judged}{}: the point will be VOID (the load was not the load asked for)",
            if load.spec.requests.is_some() { "the gate's [load] requests" } else { "the tool's plan" },
            if warmup > 0 { format!(" (and {warmup} warmups, recorded, not judged)") } else { String::new() }
        ));
    }
    if judged > planned && load.spec.requests.is_some() {
        notes.push(format!(
            "the gate's [load] requests plans {planned} judged requests and the file holds {judged} ({} extra): the point will be VOID (the load was not the load asked for)",
            judged - planned
        ));
    }
    if version.is_none() {
        notes.push(format!(
            "the file does not state {}'s version: give it with --tool-version (the verdicts say `version not stated`)",
            tool.name()
        ));
    }

    let e = |e: crate::error::EvidenceError| e.to_string();
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|x| format!("{}: {x}", parent.display()))?;
    }
    let w = EvidenceWriter::create_exact(dir).map_err(e)?;
    w.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())
        .map_err(e)?;
    let mut top = summary(gate, &imported, run, opts);
    top.notes.push(format!(
        "load point {}: imported from {} (timings by {}, not servegate's client)",
        point.label(),
        opts.file.display(),
        tool.name()
    ));
    top.status = RunStatus::Running;
    top.ended_utc = None;
    w.write_summary(&top).map_err(e)?;

    let pw = EvidenceWriter::create_exact(&w.path(&point.dir())).map_err(e)?;
    pw.write(crate::evidence::layout::GATE_FILE, gate.source.as_bytes())
        .map_err(e)?;
    let ps = summary(gate, &imported, run, opts);
    write_point_with(
        gate, tool, run, &imported, point, planned, ps, &pw, progress,
    )?;
    top.status = RunStatus::Complete;
    top.ended_utc = Some(evidence::now_utc());
    w.write_summary(&top).map_err(e)?;
    Ok(Written {
        dir: dir.to_path_buf(),
        point,
        requests: order.len(),
        warmups: warmup,
        planned,
        notes,
    })
}

/// Writes `run` (read by `tool`, provenance `imported`) as the point `point`'s evidence in `pw`: every
/// request's reconstructed reads and records, `load.json` (warmups first, each phase in send order; the
/// plan `planned` judged requests), and `run.json` from `ps` (a summary carrying `imported`; this adds the
/// plan and the requests). Used by `servegate import` and by `[load] driver = "vllm-bench"`.
#[allow(clippy::too_many_arguments)]
pub fn write_point(
    gate: &GateSpec,
    tool: Tool,
    run: &ToolRun,
    imported: &Imported,
    point: Point,
    planned: usize,
    ps: RunSummary,
    pw: &EvidenceWriter,
) -> Result<(), String> {
    write_point_with(
        gate,
        tool,
        run,
        imported,
        point,
        planned,
        ps,
        pw,
        &mut |_, _| {},
    )
}

/// [`write_point`], calling `progress(written, total)` after each request.
#[allow(clippy::too_many_arguments)]
fn write_point_with(
    gate: &GateSpec,
    tool: Tool,
    run: &ToolRun,
    imported: &Imported,
    point: Point,
    planned: usize,
    mut ps: RunSummary,
    pw: &EvidenceWriter,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(), String> {
    let e = |e: crate::error::EvidenceError| e.to_string();
    let mut order: Vec<&ToolRequest> = run.requests.iter().collect();
    order.sort_by(|a, b| {
        b.warmup
            .cmp(&a.warmup)
            .then(a.start_ms.total_cmp(&b.start_ms))
    });
    let warmup = order.iter().filter(|r| r.warmup).count();
    ps.planned = Some(planned);
    ps.planned_warmup = Some(warmup);
    ps.notes.insert(
        0,
        format!("load point {} of gate {}", point.label(), gate.name),
    );
    let warm_origin = order
        .iter()
        .filter(|r| r.warmup)
        .map(|r| r.start_ms)
        .fold(f64::INFINITY, f64::min);
    let judged_origin = order
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| r.start_ms)
        .fold(f64::INFINITY, f64::min);
    let mut timings = Vec::new();
    for (index, r) in order.iter().enumerate() {
        let o = if r.warmup { warm_origin } else { judged_origin };
        let judged_i = if r.warmup { index } else { index - warmup };
        let (rec, timing) = write_request(
            pw,
            gate,
            tool,
            r,
            index,
            judged_i,
            o,
            imported.text_recorded,
        )?;
        ps.requests.push(rec);
        timings.push(timing);
        progress(index + 1, order.len());
    }
    let rec = LoadRecord {
        schema: LOAD_SCHEMA.into(),
        point: point.label(),
        arrival: match point {
            Point::Concurrency(_) => "closed",
            Point::Rate(_) => "imported",
        }
        .into(),
        concurrency: point.concurrency(),
        rate_rps: point.rate_rps(),
        // A rate point's cap as the file states it (choose_point refused any other than the gate's).
        max_concurrency: match point {
            Point::Rate(_) => run.max_concurrency,
            Point::Concurrency(_) => None,
        },
        warmup,
        planned,
        timings,
        client: None,
        driver: None,
    };
    pw.write(
        LOAD_FILE,
        &serde_json::to_vec_pretty(&rec).map_err(|x| x.to_string())?,
    )
    .map_err(e)?;
    pw.write_summary(&ps).map_err(e)?;
    Ok(())
}

/// The `imported` record of `run` read from `opts.file` by `tool`: the version the file states (or
/// `--tool-version`; the two must agree), the command, the file's sha256, whether the text is usable, what
/// the format lacks.
pub(crate) fn provenance(
    tool: Tool,
    run: &ToolRun,
    opts: &ImportOptions,
) -> Result<Imported, String> {
    let file_sha256 = match &run.file_sha256 {
        Some(h) => h.clone(),
        None => crate::io::hash::sha256_bytes(&read_file(&opts.file)?),
    };
    let version = match (&run.version, &opts.version) {
        (Some(f), Some(a)) if f != a => {
            return Err(format!(
                "--tool-version {a:?} but the file states version {f:?}"
            ))
        }
        (Some(f), _) => Some(f.clone()),
        (None, a) => a.clone(),
    };
    let command = run.command.clone().or_else(|| opts.command.clone());
    Ok(Imported {
        tool: tool.name().into(),
        version: version.clone(),
        command,
        file: opts.file.display().to_string(),
        file_sha256,
        text_recorded: text_usable(run),
        lacks: run
            .lacks
            .iter()
            .map(|(m, w)| Lack {
                metric: m.clone(),
                why: w.clone(),
            })
            .collect(),
    })
}
/// Writes request `index` (`judged_i` among its phase) of an import into the point's directory `pw`: its
/// reconstructed reads, its response head, a request body saying the tool's file does not hold it; returns
/// its `run.json` record (figures measured from the reads) and its send timing (ms from `origin`, its
/// phase's first send).
#[allow(clippy::too_many_arguments)]
fn write_request(
    pw: &EvidenceWriter,
    gate: &GateSpec,
    tool: Tool,
    r: &ToolRequest,
    index: usize,
    judged_i: usize,
    origin: f64,
    text_recorded: bool,
) -> Result<(RequestRecord, SendTiming), String> {
    let e = |e: crate::error::EvidenceError| e.to_string();
    let prompts = &gate.request.prompts;
    let sent = r.start_ms - origin;
    let reads = reads_of(r, text_recorded);
    let body_bytes: u64 = reads.iter().map(|x| x.bytes.len() as u64).sum();
    let meta = ResponseMeta {
        status: if r.error.is_some() {
            r.status
        } else {
            Some(200)
        },
        transport_error: r
            .error
            .as_ref()
            .map(|m| Imported::failure_text(tool.name(), m)),
        head_ms: r.arrivals_ms.first().copied(),
        end_ms: Some(r.end_ms),
        ..Default::default()
    };
    let body = serde_json::json!({
        "servegate_import": format!(
            "not recorded: {} sent this request; its body is not in the tool's file",
            tool.name()
        )
    });
    pw.write_request(index, &body, &meta, &reads).map_err(e)?;
    let mut rec = RequestRecord {
        index,
        warmup: r.warmup,
        prompt_index: if prompts.is_empty() {
            0
        } else {
            judged_i % prompts.len()
        },
        repeat: 0,
        prompt: String::new(),
        stream: true,
        sent_utc: String::new(),
        http_status: meta.status,
        transport_error: meta.transport_error.clone(),
        body_bytes,
        body_truncated: false,
        figures: None,
        notes: Vec::new(),
    };
    let reply = crate::analysis::reply_of(&rec, &reads);
    // No dialect notes: the reads are rebuilt from the tool's timings, not the serve's bytes.
    rec.figures = Some(crate::analysis::measure::measure(&reply));
    Ok((
        rec,
        SendTiming {
            index,
            intended_ms: sent,
            woke_ms: sent,
            slot_ms: sent,
            sent_ms: sent,
            end_ms: sent + r.end_ms,
            runtime: None,
        },
    ))
}

/// True when every succeeded request's text is recorded ([`text_unusable`] says why not).
fn text_usable(run: &ToolRun) -> bool {
    text_unusable(run).is_none()
}

/// Why the reads of `run` cannot carry the tool's text, or None when they can: every succeeded request's
/// text is recorded, and each non-empty one has at least one character per token chunk (so each chunk
/// carries a piece of the real text). An empty text is recorded all the same: the reply was empty (an
/// HTTP 200 with an empty answer is a failure, docs/load.md), and its reads carry empty content, so the
/// content check fails it, never a placeholder that hides it.
fn text_unusable(run: &ToolRun) -> Option<String> {
    let ok: Vec<&ToolRequest> = run.requests.iter().filter(|r| r.error.is_none()).collect();
    let missing = ok.iter().filter(|r| r.text.is_none()).count();
    if missing > 0 {
        return Some(if missing == ok.len() {
            "the tool recorded no text".to_string()
        } else {
            format!(
                "{missing} of {} succeeded replies have no recorded text",
                ok.len()
            )
        });
    }
    let short = ok
        .iter()
        .filter(|r| {
            r.text
                .as_ref()
                .is_some_and(|t| !t.is_empty() && t.chars().count() < r.arrivals_ms.len())
        })
        .count();
    (short > 0).then(|| {
        format!("{short} replies' recorded text has fewer characters than their timed chunks")
    })
}

/// A complete `run.json` of an import of `gate` (no requests yet), `imported` set.
pub(crate) fn summary(
    gate: &GateSpec,
    imp: &Imported,
    run: &ToolRun,
    opts: &ImportOptions,
) -> RunSummary {
    let mut notes = vec![format!(
        "imported by servegate import --from {} {}: the reads are reconstructed from the tool's per-request timings (one read per timed token chunk, at the tool's arrival time{}); the tool's schedule (intended send times, lag) is not recorded",
        imp.tool,
        opts.file.display(),
        match text_unusable(run) {
            None => ", carrying the tool's recorded text (an empty one: an empty reply, a content failure)"
                .to_string(),
            Some(why) => format!(
                ", carrying one placeholder character per token: {why}, so content is not judged"
            ),
        }
    )];
    notes.extend(run.notes.iter().cloned());
    RunSummary {
        schema: evidence::RUN_SCHEMA.into(),
        status: RunStatus::Complete,
        gate: gate.name.clone(),
        gate_file: gate.file.display().to_string(),
        started_utc: evidence::now_utc(),
        ended_utc: Some(evidence::now_utc()),
        host: evidence::HostInfo::default(),
        load_avg_start: None,
        load_avg_end: None,
        servegate_version: env!("CARGO_PKG_VERSION").into(),
        serve: evidence::ServeRecord {
            mode: "url".into(),
            ..Default::default()
        },
        planned: Some(0),
        planned_warmup: Some(0),
        requests: Vec::new(),
        notes,
        imported: Some(imp.clone()),
    }
}

/// The placeholder a token chunk carries when the tool recorded no text: one per token.
const PLACEHOLDER: &str = "\u{2591}";

/// The reconstructed reads of one request: one read per timed token chunk with its piece of the text (or
/// placeholders), then the usage and `[DONE]` at the request's end (in the last chunk's read when the end
/// is that chunk's arrival). None for a failed request.
fn reads_of(r: &ToolRequest, text_recorded: bool) -> Vec<TimedRead> {
    if r.error.is_some() || r.arrivals_ms.is_empty() {
        return Vec::new();
    }
    let k = r.arrivals_ms.len();
    let tokens = r.tokens.unwrap_or(k as u64);
    let per: Vec<u64> = match &r.per_arrival {
        Some(p) => p.clone(),
        None => {
            let mut v = vec![1u64; k];
            if tokens > k as u64 {
                v[k - 1] += tokens - k as u64;
            }
            v
        }
    };
    let pieces: Vec<String> = match (&r.text, text_recorded) {
        // The tool recorded an empty reply: empty content at the tool's times, failed by the content check.
        (Some(t), true) if t.is_empty() => vec![String::new(); k],
        (Some(t), true) => split_text(t, k),
        _ => per
            .iter()
            .map(|n| PLACEHOLDER.repeat((*n).max(1) as usize))
            .collect(),
    };
    let mut reads: Vec<TimedRead> = Vec::new();
    for (t, piece) in r.arrivals_ms.iter().zip(&pieces) {
        let ev = serde_json::json!({
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]
        });
        reads.push(TimedRead {
            t_ms: *t,
            recv_ms: None,
            bytes: format!("data: {ev}\n\n").into_bytes(),
        });
    }
    let usage = serde_json::json!({
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"completion_tokens": tokens}
    });
    let tail = format!("data: {usage}\n\ndata: [DONE]\n\n").into_bytes();
    let last_t = *r.arrivals_ms.last().unwrap_or(&0.0);
    if r.end_ms > last_t {
        reads.push(TimedRead {
            t_ms: r.end_ms,
            recv_ms: None,
            bytes: tail,
        });
    } else if let Some(last) = reads.last_mut() {
        last.bytes.extend(tail);
    }
    reads
}

/// `text` split into `k` non-empty pieces of nearly equal length in characters (the first pieces one
/// longer), in order; concatenated they are `text`. `text` has at least `k` characters.
fn split_text(text: &str, k: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let (q, rem) = (chars.len() / k, chars.len() % k);
    let mut out = Vec::with_capacity(k);
    let mut at = 0;
    for i in 0..k {
        let n = q + usize::from(i < rem);
        out.push(chars[at..at + n].iter().collect());
        at += n;
    }
    out
}

/// `<root>/<gate>/<UTC stamp>` for an import without `--out` (`root`: the runs root, `$SERVEGATE_RUNS`,
/// default `target/servegate/runs`: `run::runner::runs_root()`), a fresh name.
pub fn default_dir(gate: &GateSpec, root: &Path) -> PathBuf {
    let parent = root.join(&gate.name);
    let stamp = crate::io::host::stamp_utc();
    let mut dir = parent.join(&stamp);
    let mut n = 1;
    while dir.exists() {
        dir = parent.join(format!("{stamp}-{n}"));
        n += 1;
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_splits_into_nonempty_pieces_that_rejoin() {
        let p = split_text("héllo wörld", 4);
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|x| !x.is_empty()));
        assert_eq!(p.concat(), "héllo wörld");
    }

    #[test]
    fn a_point_label_parses_and_a_bad_one_is_refused() {
        assert_eq!(parse_point("c=4"), Ok(Point::Concurrency(4)));
        assert_eq!(parse_point("r=0.5"), Ok(Point::Rate(0.5)));
        assert!(parse_point("c=0").is_err());
        assert!(parse_point("4").is_err());
    }
}
