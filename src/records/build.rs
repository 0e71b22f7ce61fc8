//! Building records from runs: a single run's evidence ([`from_run`], [`from_run_forced`]) and a pair run's
//! ([`from_pair_run_as`]), and the steps every builder shares (the judged values, the
//! refusal of a failed run, the engine version, the hold, what a record publishes of paths and host).
//! Load runs are built by `load_records`.

use std::collections::BTreeMap;
use std::path::Path;

pub(super) use super::schema::round_to;
use super::schema::{
    unmeasured_text, Hold, Instrument, KnownAnswer, Load, Metric, Model, Notes, Pair, Record,
    RecordBound, Settings, Source, Unmeasured, RECORD_SCHEMA,
};
use super::store::RecordError;
use super::validate::validate;
use crate::analysis::stats;

pub use crate::spec::record::RunRecordSpec;

/// The bound `gate` declares on the record metric `metric` (`decode_rate`: `[assert.rate] floor_tok_s`;
/// `first_token`: `[assert.first_token] limit_ms`), in the record's `unit`, with the line declaring it
/// ([`crate::spec::GateSpec::decl_line`], kept from the parse); floor or limit from the metric's direction
/// in the registry. None when the gate declares no bound on the metric (or the units do not convert).
pub(super) fn bound_of(
    gate: &crate::spec::GateSpec,
    metric: &str,
    unit: &str,
) -> Option<RecordBound> {
    use crate::vocab::{AssertionKind, Better, BoundKind};
    let (kind, key, value, native) = match metric {
        "decode_rate" => {
            let a = gate.assertions.rate.as_ref()?;
            (AssertionKind::Rate, "floor_tok_s", a.floor_tok_s, "tok/s")
        }
        "first_token" => {
            let a = gate.assertions.first_token.as_ref()?;
            (AssertionKind::FirstToken, "limit_ms", a.limit_ms, "ms")
        }
        _ => return None,
    };
    let value = match (native, unit) {
        (a, b) if a == b => value,
        ("ms", "s") => value / 1000.0,
        _ => return None,
    };
    let better = crate::vocab::Metric::from_record_name(metric)?
        .info()
        .better;
    let bound_kind = if better == Better::Higher {
        BoundKind::Floor
    } else {
        BoundKind::Limit
    };
    let line = gate
        .decl_line(kind)
        .map(|n| format!(", gate.toml line {n}"))
        .unwrap_or_default();
    Some(RecordBound {
        kind: bound_kind.name().into(),
        value,
        declared: format!("[assert.{}] {key}{line}", kind.name()),
    })
}

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
        Metric::FirstContent | Metric::Itl | Metric::ItlP90 | Metric::Tpot | Metric::E2e | Metric::ServerDecodeRate | Metric::ServerPrefillRate | Metric::PairRatio | Metric::OutputThroughput | Metric::RequestThroughput | Metric::Goodput | Metric::SloAttainment | Metric::PeakConcurrency | Metric::ScalingEfficiency | Metric::ReadyMs | Metric::ServeRssPeak | Metric::ServeCpuPerToken => Err(refuse()),
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

/// A record's settings: the engine and its version as the run stated them, the sampling, `max_tokens` and
/// streaming of the judged request `req`, its prompt tokens, and the backend where the gate names one.
pub(super) fn settings_of(
    engine: String,
    engine_version: Option<String>,
    req: &crate::spec::RequestSpec,
    prompt_tokens: Option<u32>,
    backend: Option<String>,
) -> Settings {
    Settings {
        engine,
        engine_version,
        sampling: Some(sampling_of(req)),
        max_tokens: Some(req.max_tokens),
        prompt_tokens,
        stream: Some(req.stream),
        backend,
    }
}

pub(super) fn sampling_of(req: &crate::spec::RequestSpec) -> String {
    match req.temperature {
        Some(t) => format!("temperature {t}"),
        None => "serve default".into(),
    }
}

fn method_of(version: &str, gate: &crate::spec::GateSpec) -> String {
    let req = &gate.request;
    let warmup = if req.warmup == 0 && req.warmup_requests > 0 {
        format!("{} warmup request(s)", req.warmup_requests)
    } else {
        format!("{} warmup round(s)", req.warmup)
    };
    format!(
        "servegate {version} gate {}: {} prompt(s) × {} repeat(s), {warmup} not counted; client-side timed reads",
        gate.name,
        req.prompts.len(),
        req.repeats,
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

/// A path as a record publishes it, by the one privacy rule of written evidence
/// ([`crate::evidence::public::Public::text`], with this process's working directory as the checkout and
/// `$HOME`): under the checkout relative to it (`models/x.gguf`), else under the home directory with `~`
/// (`~/.cache/servegate/models/x.gguf`), else as given. A record carries no absolute home or checkout path.
/// See [`public_path_in`].
pub(crate) fn public_path(path: &str) -> String {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let cwd = std::env::current_dir().ok();
    public_path_in(path, cwd.as_deref(), home.as_deref())
}

/// [`public_path`] with the checkout and home directory given (pure): `path` as
/// [`crate::evidence::public::Public`] writes it (no host name: a record's host is [`public_host`]). A path
/// already `~/...` or relative is returned as given; the root directory as a home or checkout is ignored.
/// Where the rule once kept here differed, evidence::public's is the stricter and is the one kept: the
/// checkout itself is written `.` (this rule wrote it `~/...` under the home, or whole), and every
/// occurrence of the checkout or home at a path boundary is rewritten, not only a leading one.
pub(crate) fn public_path_in(path: &str, checkout: Option<&Path>, home: Option<&Path>) -> String {
    if !Path::new(path).is_absolute() {
        return path.to_string();
    }
    crate::evidence::public::Public::new(checkout, home, None).text(path)
}

/// A record's `host`: what the machine is (`linux 6.8.0, 2 CPUs`), with its host name in front only when
/// the gate's `[record]` says `publish_host = true` (`box (linux 6.8.0, 2 CPUs)`).
pub(crate) fn public_host(h: &crate::evidence::HostInfo, publish_host: bool) -> String {
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

pub(super) fn build_run(
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
    let verdicts = crate::loaded::judge_run(gate, ev);
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
            condition: Some("warm".into()).filter(|_| req.warmup_requests > 0),
        },
        bound: bound_of(gate, &spec.metric, unit),
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
        settings: settings_of(
            spec.engine.clone(),
            version,
            req,
            prompt_tokens,
            spec.backend.clone(),
        ),
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
        footprint: Some(super::footprint::of_run(gate, ev)),
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
pub(crate) const THEIRS_NOT_PUBLISHED: &str =
    "not_published: the gate's [record] describes ours' runtime, and theirs' serve does not report it";

/// Builds a pair record from a pair run (as `ours`, the record the gate describes) (`pair.json` and its arms): this record's figure is the median of
/// every judged value of the `ours` arms, the other figure the median of the `theirs` arms (both recomputed
/// from the repeats, not from arm medians), the ratio theirs / ours, the arm order and each arm's median;
/// the model hash is the one the runner streamed before the first arm (and found unchanged after the last).
/// `spec.model_file` is not hashed again. Fails when the pair is incomplete or void.
///
/// From the side of `role` (`ours` or `theirs`): the record's value is that runtime's
/// median and `pair` names the other runtime's figure and the ratio other / this (so theirs / ours in the
/// ours record, its inverse in the theirs record; the note states theirs / ours in both). For `theirs`, the
/// engine is the theirs arm's `runtime` and the other engine is `spec.engine`.
pub fn from_pair_run_as(
    gate: &crate::spec::GateSpec,
    pe: &crate::analysis::PairEvidence,
    spec: &RunRecordSpec,
    role: &str,
) -> Result<Record, RecordError> {
    let s = &pe.summary;
    let dir = pe.dir.display();
    let sha = complete_pair(pe)?;
    let (unit, decimals, definition) = run_metric(&spec.metric)?;
    let digest = evidence_digest(&pe.dir)?;
    // The serve footprint of this side's arms (each arm a serve of its own).
    let side: Vec<(u32, &crate::analysis::Evidence)> = s
        .arms
        .iter()
        .zip(&pe.arms)
        .filter(|(a, _)| a.role == role)
        .map(|(a, ev)| (a.arm as u32, ev))
        .collect();
    // The same judgement as the verdicts: a pair run that fails them writes no record.
    let verdicts = crate::judge::judge_pair(gate, pe);
    refuse_failed_verdicts(&pe.dir, &verdicts)?;
    let PairValues {
        ours,
        theirs,
        arm_medians,
        arm_order,
        prompt_tokens,
        theirs_runtime,
        version,
        this_unmeasured,
    } = pair_values(pe, &spec.metric, role, decimals)?;
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
        metric: Metric { name: spec.metric.clone(), unit: unit.into(), condition: Some("warm".into()).filter(|_| req.warmup_requests > 0) },
        bound: bound_of(gate, &spec.metric, unit),
        statistic: "median".into(),
        value: round_to(m_this, decimals),
        decimals,
        n: this.len() as u32,
        range: [stats::min(&this).expect("non-empty"), stats::max(&this).expect("non-empty")],
        values: Some(this),
        values_unavailable: None,
        unmeasured: this_unmeasured,
        // theirs' version is what theirs' serve reported, never ours' [record] version.
        settings: settings_of(
            this_engine,
            version,
            req,
            prompt_tokens,
            if role == "theirs" { None } else { spec.backend.clone() },
        ),
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
        footprint: Some(super::footprint::of_arms(gate, &side)),
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

/// The model hash of the pair run `pe`, when the pair is complete, not void, every arm listed is loaded, and
/// the hash the runner streamed before the first arm is the one it found after the last.
fn complete_pair(pe: &crate::analysis::PairEvidence) -> Result<String, RecordError> {
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
    Ok(sha)
}

/// Every judged value of a pair run's arms, by runtime, with what the record of `role`'s side takes from
/// the arms: each arm's median (at `decimals`) and side in run order, the prompt-token counts seen, theirs'
/// runtime, the version `role`'s serve reported, and `role`'s unmeasured requests (with their arm).
struct PairValues {
    ours: Vec<f64>,
    theirs: Vec<f64>,
    arm_medians: Vec<f64>,
    arm_order: Vec<String>,
    prompt_tokens: std::collections::BTreeSet<u64>,
    theirs_runtime: Option<String>,
    version: Option<String>,
    this_unmeasured: Vec<Unmeasured>,
}

/// [`PairValues`] of the pair run `pe` for `metric` from `role`'s side. Fails when an arm is incomplete or
/// its serve failed, an arm's judged values fail [`judged_values`], an arm has another role than ours or
/// theirs, or one runtime has no values.
fn pair_values(
    pe: &crate::analysis::PairEvidence,
    metric: &str,
    role: &str,
    decimals: u32,
) -> Result<PairValues, RecordError> {
    use crate::evidence::RunStatus;
    let s = &pe.summary;
    let dir = pe.dir.display();
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
        } = judged_values(ev, metric)?;
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
    Ok(PairValues {
        ours,
        theirs,
        arm_medians,
        arm_order,
        prompt_tokens,
        theirs_runtime,
        version,
        this_unmeasured,
    })
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
