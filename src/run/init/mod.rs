//! `servegate init`: a first gate for a serve someone already runs. Against a running serve (`--url URL
//! [--log FILE]`) or one it starts (`-- COMMAND...` with `{port}`), it asks the serve what it is
//! (`/health`, `/v1/models` and its `Server` header, `/props`, `/version`, `/openapi.json`: the runner's own
//! identification, `run/detect.rs`), names the engine by its profile, sends one short measured round through
//! the runner (a gate like the one it will write, with bounds that decide nothing, its evidence kept under the
//! runs root), and writes the gate: the serve block, the request (served model, max_tokens, the profile's
//! greedy fields), route candidates from the log ([`route_lines`]), a rate floor and a first-token limit by
//! bless's rule (`records::bless::derive_floor` / `derive_limit`), content, a known answer and the contract
//! checks that passed.
//!
//! Nothing is written unless everything needed was found: a URL that is not a serve, a serve that never
//! answers, replies that fail, a log that names no route (without `no_route`) end in an [`InitError`] listing
//! what was found and what could not be, and no file. The gate is re-read by the spec's own parser (the
//! served model name must come back byte for byte) before it is written atomically, never over an existing
//! file without `force`.

mod env;
mod render;
mod route_lines;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::exit;
use crate::io::{client, serve};
use crate::judge::{Outcome, Verdict};
use crate::sinks::events::Step;
use crate::spec::profile::Engine;
use crate::vocab::{AssertionKind, Metric};

use render::{Draft, ServeBlock};

/// init's default headroom, percent: bless's one-run rule (`bless --floor`, 10 % by default, for a floor blessed
/// on the machine it guards) with room for the machine's load to change between init and the gate's runs. On
/// this project's shared 2-core machine the reference serve read 27.6 tok/s (median) in init's round and
/// 15.5 in the run of the written gate two minutes later, as other builds started: a 10 % floor was red for
/// noise. 50 % still fails a fall-back route that is 2x slower or worse (the motivating one: 45x).
pub const DEFAULT_HEADROOM_PCT: f64 = 50.0;

/// The least a derived first-token limit leaves above the measured upper bound, ms: a busy machine's scheduling
/// adds tens to hundreds of ms to a first token whatever the serve (the reference serve's judged first tokens
/// ranged 62-704 ms within one run on this shared 2-core machine), so 1.5x a 40 ms measurement would be red
/// for noise.
pub const FIRST_TOKEN_SLACK_MS: f64 = 250.0;

/// init's default wait for a serve it starts to answer `/v1/models`, s. vLLM 0.32.0 on CPU (SmolLM2-135M
/// float32) answered after 215 s on this shared 2-core machine at load average 11 (2026-12-07) and after 6.5 min
/// at load 14-20 (docs/runtimes.md): the earlier 120 s made `servegate init -- vllm ...` fail before the model
/// was loaded.
pub const DEFAULT_READY_TIMEOUT_S: f64 = 600.0;

/// The `ready_timeout_s` a gate init writes for a serve it started, from the seconds that serve took to answer
/// in init's own run: five times that (the load of a shared machine changes between runs; vLLM took 215 s
/// here at load 11 and 6.5 min at load 14-20), rounded up to 10 s, and at least 120 s (the gate default).
pub fn written_ready_timeout_s(ready_s: f64) -> u32 {
    let t = (ready_s.max(0.0) * 5.0 / 10.0).ceil() * 10.0;
    t.clamp(120.0, 86_400.0) as u32
}

/// How init reaches the serve.
#[derive(Debug, Clone, PartialEq)]
pub enum InitTarget {
    /// A running serve at this base URL, with its log file when given.
    Url {
        /// `http://host:port`.
        url: String,
        /// The serve's log (what it prints), read for route lines.
        log: Option<PathBuf>,
    },
    /// A serve init starts: argv as a gate's `[serve] command` (placeholders, `{port}` required).
    Command(Vec<String>),
}

/// What `servegate init` is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct InitOptions {
    /// The serve.
    pub target: InitTarget,
    /// `[gate] name` (A-Z a-z 0-9 - _ .).
    pub name: String,
    /// The gate file to write.
    pub out: PathBuf,
    /// Replace `out` when it exists.
    pub force: bool,
    /// The served model name, when `/v1/models` lists none (or several).
    pub model: Option<String>,
    /// `max_tokens` of every timed request (1-4096).
    pub max_tokens: u32,
    /// Judged rounds of the three timed prompts (2-20; n = 3 x repeats, at least 6 for the bound).
    pub repeats: u32,
    /// Write the gate without `[assert.route]` when the log names nothing (said in the gate).
    pub no_route: bool,
    /// Headroom of the derived floor below the median's lower bound and of the first-token limit above its
    /// upper bound, percent (0-99; [`DEFAULT_HEADROOM_PCT`]).
    pub headroom_pct: f64,
    /// The evidence root of the measured round.
    pub runs: PathBuf,
    /// Seconds a started serve may take to answer `/v1/models`.
    pub ready_timeout_s: f64,
}

/// What init found, what it could not, and what it wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InitReport {
    /// Facts found, one phrase each (outside text already escaped).
    pub found: Vec<String>,
    /// What could not be found or made, one phrase each.
    pub missing: Vec<String>,
    /// The measured round's evidence directory.
    pub evidence: Option<PathBuf>,
    /// The gate file written.
    pub written: Option<PathBuf>,
    /// For a serve init started: ms from the spawn to its first 200 on `/v1/models`.
    pub ready_ms: Option<f64>,
}

/// Init stopped: the message, the exit code (`error::exit`), and the report so far (nothing written).
#[derive(Debug, Clone, PartialEq)]
pub struct InitError {
    /// Why, one line.
    pub message: String,
    /// The exit code: 2 usage (the file exists, a bad option), 3 the written gate would not read back, 4 no
    /// serve answered, 1 the serve answered but its replies or log cannot make a gate, 5 evidence I/O.
    pub code: i32,
    /// What was found and what was not.
    pub report: Box<InitReport>,
}

fn fail(report: &InitReport, code: i32, message: impl Into<String>) -> InitError {
    InitError {
        message: message.into(),
        code,
        report: Box::new(report.clone()),
    }
}

/// Runs init (module doc). `progress` receives one line per step (escaped).
pub fn init(o: &InitOptions, progress: &mut dyn FnMut(&str)) -> Result<InitReport, InitError> {
    let mut rep = InitReport::default();
    let out_of_range = if !(1..=4096).contains(&o.max_tokens) {
        Some(format!("--max-tokens {} must be 1-4096", o.max_tokens))
    } else if !(2..=20).contains(&o.repeats) {
        Some(format!("--repeats {} must be 2-20", o.repeats))
    } else if !(0.0..100.0).contains(&o.headroom_pct) {
        Some(format!(
            "--headroom-pct {} must be 0 to below 100",
            o.headroom_pct
        ))
    } else {
        None
    };
    if let Some(m) = out_of_range {
        return Err(fail(&rep, exit::USAGE, m));
    }
    if std::fs::symlink_metadata(&o.out).is_ok() && !o.force {
        return Err(fail(
            &rep,
            exit::USAGE,
            format!(
                "{} exists: not overwritten (pass --force to replace it)",
                crate::text::shown(&o.out.display().to_string())
            ),
        ));
    }
    let stamp = crate::evidence::stamp_utc();
    let own_dir = o
        .runs
        .join(format!("{}-init", o.name))
        .join(format!("serve-{stamp}"));
    // The serve: reached, or started here (and stopped when `started` drops, on every path).
    let (base_url, log_path, mut started) = match &o.target {
        InitTarget::Url { url, log } => {
            let url = url.trim_end_matches('/').to_string();
            if crate::spec::url_userinfo(&url) {
                // Never echoed (a gate refuses the same url: spec::serve), nor probed.
                return Err(fail(
                    &rep,
                    exit::USAGE,
                    format!(
                        "--url {}: carries credentials (`user:password@`): servegate sends none that way, and would print them; give the serve's key in an environment variable and name it in the gate's `api_key_env` (docs/gate-format.md)",
                        crate::text::shown(&crate::spec::redact_userinfo(&url))
                    ),
                ));
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(fail(
                    &rep,
                    exit::USAGE,
                    format!(
                        "--url {}: expected http://HOST:PORT",
                        crate::text::shown(&url)
                    ),
                ));
            }
            if let Some(l) = log {
                if !l.is_file() {
                    return Err(fail(
                        &rep,
                        exit::USAGE,
                        format!(
                            "--log {}: not a readable file",
                            crate::text::shown(&l.display().to_string())
                        ),
                    ));
                }
            }
            let log = log
                .as_ref()
                .map(|l| std::path::absolute(l).unwrap_or(l.clone()));
            (url, log, None)
        }
        InitTarget::Command(argv) => {
            let log = own_dir.join("serve.log");
            let s = start(o, argv, &log, &mut rep, progress)?;
            (s.base_url(), Some(log), Some(s))
        }
    };
    let result = measure_and_write(
        o,
        &base_url,
        log_path.as_deref(),
        &mut started,
        &mut rep,
        progress,
    );
    if let Some(s) = started.take() {
        let stop = s.stop_with(&mut |w| progress(&crate::text::shown(&w.to_string())));
        progress(&format!(
            "serve stopped ({}, {:.0} ms{})",
            stop.exit.as_deref().unwrap_or("exit not observed"),
            stop.stop_ms,
            if stop.escalated_to_kill {
                ", SIGKILL needed"
            } else {
                ""
            }
        ));
    }
    result.map(|()| rep)
}

/// Starts the serve of `argv` (placeholders as a gate's command: `{port}` a free port) with its output in
/// `log`, and waits until `/v1/models` answers 200.
fn start(
    o: &InitOptions,
    argv: &[String],
    log: &Path,
    rep: &mut InitReport,
    progress: &mut dyn FnMut(&str),
) -> Result<serve::Serve, InitError> {
    if !argv.iter().any(|a| a.contains("{port}")) {
        return Err(fail(
            rep,
            exit::USAGE,
            "the command must take the port as `{port}` (init picks a free one; the gate does the same)",
        ));
    }
    // The command as the gate will hold it, expanded by the spec's own rules.
    let words: Vec<String> = argv.iter().map(|a| render::toml_str(a)).collect();
    let probe_gate = format!(
        "[gate]\nname = \"init\"\n[serve]\ncommand = [{}]\n[request]\nmodel = \"init\"\nmax_tokens = 1\nprompts = [\"x\"]\n[assert.content]\n",
        words.join(", ")
    );
    let gate = crate::spec::parse(&o.out, &probe_gate, &crate::spec::Context::for_file(&o.out))
        .map_err(|e| fail(rep, exit::SPEC_INVALID, format!("the command: {e}")))?;
    let crate::spec::ServeMode::Command(expanded) = &gate.serve.mode else {
        return Err(fail(
            rep,
            exit::SPEC_INVALID,
            "the command did not read back as one",
        ));
    };
    let host = gate.serve.host.clone();
    let port = crate::io::port::free_port(&host)
        .map_err(|e| fail(rep, exit::SERVE_NOT_READY, format!("no free port: {e}")))?;
    let command: Vec<String> = expanded
        .iter()
        .map(|a| super::reach::fill_runtime(a, &host, port))
        .collect();
    progress(&format!(
        "starting the serve on port {port}: {}",
        crate::text::shown(&command.join(" "))
    ));
    let mut spec = serve::ServeSpec::new(command, port, log);
    spec.host = host;
    spec.ready_path = "/v1/models".into();
    // A serve that is up but answers /v1/models with a steady 500 (`transformers serve` offline) is asked
    // at /health instead; the probe then asks for --model when the list cannot be read.
    spec.fallback_ready = Some("/health".into());
    spec.ready_timeout = Duration::from_secs_f64(o.ready_timeout_s);
    let mut s = serve::Serve::start(spec).map_err(|e| {
        fail(
            rep,
            exit::SERVE_NOT_READY,
            format!(
                "the serve did not start: {}",
                crate::text::shown(&e.to_string())
            ),
        )
    })?;
    match s.wait_ready_with(&mut |w| progress(&crate::text::shown(&w.to_string()))) {
        Ok(info) => {
            rep.found.push(match &info.fell_back {
                None => format!(
                    "the serve answered /v1/models 200 {:.1} s after the spawn",
                    info.ready_ms / 1000.0
                ),
                Some((path, status, next)) => format!(
                    "the serve answered {path} with {} steadily, and {next} 200 {:.1} s after the spawn",
                    crate::text::shown(status),
                    info.ready_ms / 1000.0
                ),
            });
            rep.ready_ms = Some(info.ready_ms);
            Ok(s)
        }
        Err(e) => {
            let tail = s.log_tail(10);
            rep.missing.push(format!(
                "the serve never answered /v1/models with 200: {}",
                crate::text::shown(&e.to_string())
            ));
            // Still loading when the wait ended (not an exit, not a steady 404): say how to wait longer.
            let longer = if matches!(e, serve::ServeError::ReadyTimeout { .. }) {
                format!(
                    " (init waited {:.0} s, --ready-timeout-s: a serve still loading needs a longer wait)",
                    o.ready_timeout_s
                )
            } else {
                String::new()
            };
            Err(fail(
                rep,
                exit::SERVE_NOT_READY,
                format!(
                    "the serve never became ready{longer}; its log ends: {}",
                    crate::text::shown(tail.trim())
                ),
            ))
        }
    }
}

/// Probes the serve at `base_url`, runs the measured round, derives the bounds and writes the gate.
fn measure_and_write(
    o: &InitOptions,
    base_url: &str,
    log_path: Option<&Path>,
    started: &mut Option<serve::Serve>,
    rep: &mut InitReport,
    progress: &mut dyn FnMut(&str),
) -> Result<(), InitError> {
    // A serve that accepts and never answers takes each probe's 5 s: the wait says so (2 s, then every 10 s).
    let (mut draft, profile, log_now) = super::send::paced(
        || probe(o, base_url, log_path, rep),
        &mut |secs| {
            let w = crate::io::progress::Waiting::new(
                format!("probing {base_url}"),
                secs,
                Some("each of /health, /v1/models, /props, /version, /openapi.json has 5 s to answer"),
            );
            progress(&crate::text::shown(&w.to_string()))
        },
    )?;
    let outcome = measure(o, base_url, log_path, started, &draft, rep, progress)?;
    derive(o, &outcome, &mut draft, rep)?;
    route(
        o,
        log_path,
        &log_now,
        &outcome,
        profile.as_ref(),
        &mut draft,
        rep,
    )?;
    write(o, &mut draft, rep)
}

/// The error of a serve whose `/health` and `/v1/models` both gave no answer the client took: an answer with
/// an invalid response head says what was wrong with it ([`crate::io::raw_head::diagnose`]: the serve did
/// answer), anything else is "nothing answers".
fn unanswered(
    base_url: &str,
    health: &str,
    models: &str,
    t: Duration,
    rep: &mut InitReport,
) -> InitError {
    let invalid = [(health, "/health"), (models, "/v1/models")]
        .into_iter()
        .find(|(err, _)| err.starts_with(client::INVALID_RESPONSE))
        .map(|(err, path)| {
            let why = crate::io::raw_head::diagnose(base_url, path, t)
                .unwrap_or_else(|| crate::text::shown(err));
            format!("{path}: {why}")
        });
    if let Some(why) = invalid {
        rep.found.push(format!(
            "an answer at {} that is not valid HTTP ({why})",
            crate::text::shown(base_url)
        ));
        return fail(
            rep,
            exit::SERVE_NOT_READY,
            format!(
                "the serve at {} answered with an invalid response head, which no HTTP client accepts: {why}",
                crate::text::shown(base_url)
            ),
        );
    }
    rep.missing.push(format!(
        "an answer at {} (/health: {}; /v1/models: {})",
        crate::text::shown(base_url),
        crate::text::shown(health),
        crate::text::shown(models)
    ));
    fail(
        rep,
        exit::SERVE_NOT_READY,
        format!("nothing answers at {}", crate::text::shown(base_url)),
    )
}

/// What the serve says about itself (the runner's own questions, `/health` besides) as the draft of the gate
/// to write: its serve block, engine, ready path, model and greedy fields. Also returns the engine's profile
/// and the serve's log so far. Errors: nothing answers, no OpenAI model list, no one model name.
fn probe(
    o: &InitOptions,
    base_url: &str,
    log_path: Option<&Path>,
    rep: &mut InitReport,
) -> Result<(Draft, Option<crate::spec::profile::Profile>, String), InitError> {
    let http = client::probe_client().map_err(|e| fail(rep, exit::SERVE_NOT_READY, e))?;
    let t = Duration::from_secs(5);
    let health = client::get(&http, base_url, "/health", t);
    if let Err(e) = &health {
        // Nothing at /health: one more chance at /v1/models before the slower questions.
        if let Err(m) = client::get(&http, base_url, "/v1/models", t) {
            return Err(unanswered(base_url, e, &m, t, rep));
        }
    }
    let log_now = log_path
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned())
        .unwrap_or_default();
    let says = super::detect::serve_says(&http, base_url, log_now.clone());
    let status = |r: &Option<(u16, String)>| match r {
        Some((s, _)) => format!("{s}"),
        None => "no answer".to_string(),
    };
    let health_status = match &health {
        Ok((s, _)) => format!("{s}"),
        Err(e) => format!("no answer ({})", crate::text::shown(e)),
    };
    let answered = health.is_ok()
        || [&says.models, &says.props, &says.version, &says.openapi]
            .iter()
            .any(|r| r.is_some());
    if !answered {
        rep.missing.push(format!(
            "no answer at {} (/health: {health_status})",
            crate::text::shown(base_url)
        ));
        return Err(fail(
            rep,
            exit::SERVE_NOT_READY,
            format!("nothing answers at {}", crate::text::shown(base_url)),
        ));
    }
    rep.found.push(format!(
        "GET /health {health_status}, /v1/models {}, /props {}, /version {}, /openapi.json {}",
        status(&says.models),
        status(&says.props),
        status(&says.version),
        status(&says.openapi)
    ));
    if let Some(h) = &says.server_header {
        rep.found.push(format!("Server: {}", crate::text::shown(h)));
    }
    let models = super::detect::model_ids(&says);
    let models_ok = matches!(&says.models, Some((200, b)) if serde_json::from_str::<serde_json::Value>(b).ok().and_then(|v| v.get("data").map(|d| d.is_array())) == Some(true));
    // A serve that has the route but fails it (`transformers serve` offline answers 500: it scans the hub
    // cache; measured 5.19.0) still serves the model it is asked for by name: with --model, go on.
    let models_failed = matches!(&says.models, Some((s, _)) if *s >= 500);
    if models_ok {
        rep.found.push(format!(
            "/v1/models lists {}",
            crate::text::shown(&format!("{models:?}"))
        ));
    } else if models_failed && o.model.is_some() {
        rep.missing.push(format!(
            "a model list: /v1/models answered {} (transformers serve does offline); the model is --model's, and the gate cannot expect_model it",
            status(&says.models)
        ));
    } else {
        rep.missing.push(
            "/v1/models gave no OpenAI model list: this is not an OpenAI-compatible serve (or not its base URL)"
                .into(),
        );
        return Err(fail(
            rep,
            exit::SERVE_NOT_READY,
            format!(
                "{} does not answer as an OpenAI-compatible serve (/v1/models: {}){}",
                crate::text::shown(base_url),
                status(&says.models),
                if base_url.ends_with("/v1") {
                    "; give the base URL, without /v1"
                } else if models_failed {
                    "; a serve whose model list fails but which serves a model by name (transformers serve offline): pass --model NAME"
                } else {
                    ""
                }
            ),
        ));
    }
    let model = match (&o.model, models.as_slice()) {
        (Some(m), _) => m.clone(),
        (None, [one]) => one.clone(),
        (None, []) => {
            rep.missing.push(
                "a model name: /v1/models lists none (a serve that loads on the first request?)"
                    .into(),
            );
            return Err(fail(
                rep,
                exit::USAGE,
                "/v1/models lists no model: pass --model NAME",
            ));
        }
        (None, many) => {
            rep.missing
                .push(format!("one model name: /v1/models lists {}", many.len()));
            return Err(fail(
                rep,
                exit::USAGE,
                "/v1/models lists several models: pass --model NAME",
            ));
        }
    };
    if models_ok && !models.contains(&model) {
        // The gate is written without `expect_model`: said as a result (the run's `model_not_listed` note is a
        // progress line `-q` hides).
        rep.missing.push(format!(
            "{} in /v1/models: it lists {}; the gate is written without expect_model",
            crate::text::shown(&format!("{model:?}")),
            listed(&models)
        ));
    }
    let detection = crate::spec::detect::detect(&says);
    let engine: Option<Engine> = detection.engine;
    let ev_text = crate::text::shown(&detection.evidence.join("; "));
    match engine {
        Some(e) => rep.found.push(format!("engine {} ({ev_text})", e.name())),
        None => rep
            .missing
            .push(format!("a known engine ({ev_text}): generic defaults used")),
    }
    if let Some((v, src)) = crate::spec::detect::serve_version(engine, &says) {
        rep.found
            .push(format!("version {} (from {src})", crate::text::shown(&v)));
    }
    let profile = engine.map(Engine::profile);
    let health_ok = matches!(health, Ok((200, _)));
    let ready = match &profile {
        Some(p) if p.ready_path == "/health" && !health_ok => "/v1/models".to_string(),
        Some(p) => p.ready_path.to_string(),
        None if health_ok => "/health".to_string(),
        None => "/v1/models".to_string(),
    };
    let mut draft = draft_of(o, log_path, engine, &ready, &model, &models);
    draft.ready_s = rep.ready_ms.map(|ms| ms / 1000.0);
    Ok((draft, profile, log_now))
}

/// The draft of the gate to write from what the probe found: the serve block as the user gave it, the engine,
/// the ready path, the model (expected in `/v1/models` when it is listed there) and the profile's greedy fields.
fn draft_of(
    o: &InitOptions,
    log_path: Option<&Path>,
    engine: Option<Engine>,
    ready: &str,
    model: &str,
    models: &[String],
) -> Draft {
    let profile = engine.map(Engine::profile);
    let ready = ready.to_string();
    let model = model.to_string();
    let serve_block = match &o.target {
        InitTarget::Url { url, .. } => ServeBlock::Url {
            url: url.trim_end_matches('/').to_string(),
            log_file: log_path.map(|p| p.display().to_string()),
        },
        InitTarget::Command(argv) => ServeBlock::Command(argv.clone()),
    };
    // The started serve ran with init's environment: the variables that steer it go into the gate.
    let (env, env_secrets) = match &o.target {
        InitTarget::Command(_) => env::serve_env(std::env::vars()),
        InitTarget::Url { .. } => (Vec::new(), Vec::new()),
    };
    Draft {
        env,
        env_secrets,
        name: o.name.clone(),
        found: Vec::new(),
        serve: serve_block,
        engine: engine.map(Engine::name),
        ready,
        ready_s: None,
        expect_model: models.contains(&model).then(|| model.clone()),
        model: model.clone(),
        max_tokens: o.max_tokens,
        repeats: o.repeats,
        greedy: profile
            .as_ref()
            .map(|p| p.greedy_fields.to_vec())
            .unwrap_or_default(),
        route: Vec::new(),
        route_notes: Vec::new(),
        floor: None,
        first_token: None,
        known_answer: Ok(()),
        contract: Vec::new(),
        contract_notes: Vec::new(),
    }
}

/// The measured round: the runner, on the same serve, as a url gate (a started serve keeps running), with the
/// draft's request and bounds that decide nothing. Errors: the round failed, the serve died.
fn measure(
    o: &InitOptions,
    base_url: &str,
    log_path: Option<&Path>,
    started: &mut Option<serve::Serve>,
    draft: &Draft,
    rep: &mut InitReport,
    progress: &mut dyn FnMut(&str),
) -> Result<crate::judge::outcome::RunOutcome, InitError> {
    let model = &draft.model;
    let mut measuring = draft.clone();
    measuring.serve = ServeBlock::Url {
        url: base_url.to_string(),
        log_file: log_path.map(|p| p.display().to_string()),
    };
    let text = render::measuring_text(&measuring);
    let mgate_path = o.runs.join(format!("{}-init.toml", o.name));
    let mgate = crate::spec::parse(&mgate_path, &text, &crate::spec::Context::for_file(&o.out))
        .map_err(|e| {
            fail(
                rep,
                exit::SPEC_INVALID,
                format!("the measuring gate would not read: {e}"),
            )
        })?;
    progress(&format!(
        "measuring: {} requests of max_tokens {} to {} (1 warmup, {} timed, {} known-answer, then the contract checks {})",
        1 + (o.repeats as usize) * (render::TIMED_PROMPTS.len() + 1),
        o.max_tokens,
        crate::text::shown(model),
        o.repeats as usize * render::TIMED_PROMPTS.len(),
        o.repeats,
        render::CHEAP_CHECKS.join(", ")
    ));
    let mut on_step = |s: &Step| progress(&crate::text::shown(&s.to_string()));
    let outcome = super::runner::run(&mgate, &o.runs, &mut on_step)
        .map_err(|e| fail(rep, exit::EVIDENCE_ERROR, format!("evidence: {e}")))?;
    rep.evidence = Some(outcome.dir.clone());
    rep.found.push(format!(
        "measured round: evidence {}",
        crate::text::shown(&outcome.dir.display().to_string())
    ));
    if let Some(f) = &outcome.summary.serve.failure {
        rep.missing
            .push(format!("a whole measured round: {}", crate::text::shown(f)));
        return Err(fail(
            rep,
            exit::ASSERTION_FAILED,
            format!("the measured round failed: {}", crate::text::shown(f)),
        ));
    }
    if let Some(s) = started.as_mut() {
        if let Err(e) = s.check_alive() {
            return Err(fail(
                rep,
                exit::ASSERTION_FAILED,
                format!(
                    "the serve died during the measured round: {}",
                    crate::text::shown(&e.to_string())
                ),
            ));
        }
    }
    Ok(outcome)
}

/// The measured round's verdicts made the draft's bounds: the floor and the first-token limit by bless's rule,
/// the known answer, the contract checks that passed. Errors: replies that fail content, no floor.
fn derive(
    o: &InitOptions,
    outcome: &crate::judge::outcome::RunOutcome,
    draft: &mut Draft,
    rep: &mut InitReport,
) -> Result<(), InitError> {
    let verdict = |k: AssertionKind| outcome.verdicts.iter().find(|v| v.kind == k);
    if let Some(c) = verdict(AssertionKind::Content).filter(|v| v.outcome != Outcome::Pass) {
        rep.missing.push(format!("sane replies: {}", c.message));
        return Err(fail(
            rep,
            exit::ASSERTION_FAILED,
            format!("the serve's replies fail: {}", c.message),
        ));
    }
    let values = |k: AssertionKind| -> Vec<f64> {
        verdict(k)
            .map(|v| v.values.iter().flatten().copied().collect())
            .unwrap_or_default()
    };
    let load = crate::evidence::comparability::run_load_per_cpu(&outcome.summary)
        .map(|l| format!("{l:.1}"))
        .unwrap_or_else(|| "unknown".into());
    let at = format!(
        "at load {load} per CPU on {} CPUs, {} UTC, evidence {}",
        outcome.summary.host.cpus,
        outcome.summary.started_utc,
        outcome.dir.display()
    );
    let rates = values(AssertionKind::Rate);
    match crate::records::bless::derive_floor(
        &rates,
        None,
        crate::records::bless::DEFAULT_CONFIDENCE,
        o.headroom_pct,
    ) {
        Ok(d) => {
            rep.found.push(format!(
                "decode {:.1} tok/s median (n={}); floor {}",
                d.median, d.n, d.floor
            ));
            draft.floor = Some((
                d.floor,
                vec![
                    format!("measured {:.1} tok/s median (n={}) {at}", d.median, d.n),
                    format!(
                        "floor = lower bound - {} % (bless's one-run rule: {})",
                        o.headroom_pct, d.rule
                    ),
                    format!(
                        "The headroom is {} % where bless's default is {} %: the load of a shared machine changes between runs.",
                        o.headroom_pct,
                        crate::records::bless::DEFAULT_HEADROOM_PCT
                    ),
                    format!(
                        "Tighten: a floor from one run only says \"not slower than today\". Run the slow route too and take \
                         `servegate bless {} --floor FAST_RUN --slow SLOW_RUN` (the geometric mean; --accept writes it), \
                         docs/bless.md.",
                        o.out.display()
                    ),
                ],
            ));
        }
        Err(e) => {
            rep.missing.push(format!("a rate floor: {e}"));
            return Err(fail(
                rep,
                exit::ASSERTION_FAILED,
                format!(
                    "no rate floor from the measured round: {e}; run init again, or with more --repeats ({})",
                    verdict(AssertionKind::Rate)
                        .map(|v| v.message.as_str())
                        .unwrap_or("")
                ),
            ));
        }
    }
    first_token_limit(
        o,
        &values(AssertionKind::FirstToken),
        verdict(AssertionKind::FirstToken),
        &at,
        draft,
        rep,
    );
    draft.known_answer = match verdict(AssertionKind::KnownAnswer) {
        Some(v) if v.outcome == Outcome::Pass => {
            rep.found.push("the known answer (Paris)".into());
            Ok(())
        }
        Some(v) => {
            rep.missing.push(format!("a known answer: {}", v.message));
            Err(v.message.clone())
        }
        None => Err("no verdict".into()),
    };
    let mut lacking = Vec::new();
    for v in &outcome.verdicts {
        if let Some(check) = v.assertion.strip_prefix("contract.") {
            if v.outcome == Outcome::Pass {
                draft.contract.push(check.to_string());
            } else {
                lacking.push(v.message.clone());
            }
        }
    }
    if !draft.contract.is_empty() {
        rep.found.push(format!(
            "contract checks passed: {}",
            draft.contract.join(", ")
        ));
        draft.contract_notes.push(format!(
            "The contract checks that passed in the measured round (of {}; docs/contract.md lists the rest: tools, stop, cancel...).",
            render::CHEAP_CHECKS.join(", ")
        ));
    }
    for l in lacking {
        draft
            .contract_notes
            .push(format!("not expected, as measured: {l}"));
        rep.missing.push(format!("contract: {l}"));
    }

    Ok(())
}

/// Route candidates from the lines a run of the written gate will see (a command gate: the whole log; a url
/// gate: the lines written during the measured round). Errors: none found, without `no_route`.
fn route(
    o: &InitOptions,
    log_path: Option<&Path>,
    log_now: &str,
    outcome: &crate::judge::outcome::RunOutcome,
    profile: Option<&crate::spec::profile::Profile>,
    draft: &mut Draft,
    rep: &mut InitReport,
) -> Result<(), InitError> {
    let seen = match (&o.target, log_path) {
        (_, None) => None,
        // As a run's judge will read it: its serve.log is written public (home paths `~`, the checkout's
        // relative, no host name: crate::evidence::public), so a candidate from a raw line naming the
        // model's absolute path would never match in the gate's own run.
        (InitTarget::Command(_), Some(p)) => Some(
            crate::evidence::public::Public::from_env(false).text(&String::from_utf8_lossy(
                &std::fs::read(p).unwrap_or_default(),
            )),
        ),
        (InitTarget::Url { .. }, Some(_)) => Some(
            String::from_utf8_lossy(
                &std::fs::read(outcome.dir.join(crate::evidence::layout::SERVE_LOG))
                    .unwrap_or_default(),
            )
            .into_owned(),
        ),
    };
    match &seen {
        None => {
            rep.missing
                .push("the route: no log (pass --log FILE, the file the serve prints to)".into());
            draft.route_notes.push("No [assert.route]: init was given no log. The route is not proven until `log_file` and [assert.route] say it (docs/gate-format.md).".into());
        }
        Some(text) => {
            draft.route = route_lines::candidates(text, profile);
            if draft.route.is_empty() {
                let startup = route_lines::candidates(log_now, profile);
                let what = if matches!(o.target, InitTarget::Url { .. }) && !startup.is_empty() {
                    format!(
                        "the log names a route only at start-up (line {}: {}), which a url gate never reads (only the bytes written during its run): start the serve with init (-- COMMAND) or log per request",
                        startup[0].line_no,
                        crate::text::shown(&startup[0].line)
                    )
                } else {
                    format!(
                        "the log ({} lines) names no device, backend, threads or batching",
                        text.lines().count()
                    )
                };
                rep.missing.push(format!("the route: {what}"));
                draft
                    .route_notes
                    .push(format!("No [assert.route]: {what}."));
            } else {
                let known = |c: &route_lines::Candidate| c.why.ends_with("profile's route line");
                if !draft.route.iter().any(known) {
                    let startup = route_lines::candidates(log_now, profile);
                    if let Some(s) = startup.iter().find(|c| known(c)) {
                        draft.route_notes.push(format!(
                            "The log names the route at start-up (line {}: {:?}), but a url gate reads only the lines written during its run: start the serve with `servegate init -- COMMAND` (a command gate reads its whole log) to prove the route by that line.",
                            s.line_no, s.line
                        ));
                    }
                    draft.route_notes.push(
                        "The candidates below were picked by their words, not by an engine profile: make sure the line you keep names the route (device, backend, threads), not only that the serve worked."
                            .into(),
                    );
                }
                rep.found.push(format!(
                    "route candidates: {}",
                    draft
                        .route
                        .iter()
                        .map(|c| format!("line {} ({})", c.line_no, c.why))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    if let Some(note) = profile.and_then(route_lines::gateway_note) {
        rep.missing
            .push("the gateway's route per reply (a response header naming its deployment)".into());
        draft.route_notes.insert(0, note);
    }
    if draft.route.is_empty() && !o.no_route {
        return Err(fail(
            rep,
            exit::ASSERTION_FAILED,
            "no route evidence: a gate that cannot prove the route is not written (pass --no-route to write it without [assert.route])",
        ));
    }

    Ok(())
}

/// The gate: rendered, read back by the spec's parser (the served model byte for byte), written atomically
/// (never over a file without `force`).
fn write(o: &InitOptions, draft: &mut Draft, rep: &mut InitReport) -> Result<(), InitError> {
    let model = draft.model.clone();
    draft.found = rep.found.clone();
    let ctx = crate::spec::Context::for_file(&o.out);
    let gate_dir = std::path::absolute(&ctx.gate_dir).unwrap_or_else(|_| ctx.gate_dir.clone());
    // A program named by a path is written from `{gate_dir}`: the gate then starts its serve from any cwd.
    if let ServeBlock::Command(argv) = &mut draft.serve {
        if let Some(first) = argv.first_mut() {
            if let Some(program) = program_path(first) {
                *first = program;
            }
        }
    }
    let text = render::gate_text(draft, &render::Portable::new(&gate_dir, &ctx.cache));
    let gate = crate::spec::parse(&o.out, &text, &ctx).map_err(|e| {
        fail(
            rep,
            exit::SPEC_INVALID,
            format!("the gate init made would not read back (a bug; not written): {e}"),
        )
    })?;
    if gate.request.served_model != model {
        return Err(fail(
            rep,
            exit::SPEC_INVALID,
            format!(
                "the model name {} would not read back from the gate (it reads {}): not written",
                crate::text::shown(&format!("{model:?}")),
                crate::text::shown(&format!("{:?}", gate.request.served_model))
            ),
        ));
    }
    let written = if o.force {
        crate::io::fs::write_atomic(&o.out, text.as_bytes())
    } else {
        crate::io::fs::write_new(&o.out, text.as_bytes())
    };
    written.map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::AlreadyExists {
            exit::USAGE
        } else {
            exit::EVIDENCE_ERROR
        };
        fail(
            rep,
            code,
            // The command's error line adds "(nothing written)".
            format!("{}: {e}", crate::text::shown(&o.out.display().to_string())),
        )
    })?;
    rep.written = Some(o.out.clone());
    Ok(())
}

/// The model names a serve lists, escaped and bounded: the first five, each at most 64 characters, then how
/// many more.
fn listed(models: &[String]) -> String {
    const SHOWN: usize = 5;
    const CHARS: usize = 64;
    let names: Vec<String> = models
        .iter()
        .take(SHOWN)
        .map(|m| {
            let cut: String = m.chars().take(CHARS).collect();
            let more = if cut.len() < m.len() { "..." } else { "" };
            format!("{}{more}", crate::text::shown(&format!("{cut:?}")))
        })
        .collect();
    let rest = models.len().saturating_sub(SHOWN);
    let rest = if rest > 0 {
        format!(" and {rest} more")
    } else {
        String::new()
    };
    format!("[{}]{rest}", names.join(", "))
}

/// The serve's program `word` (a command's first word) as the gate must hold it to start from any working
/// directory: a path with a `/` naming a file (relative words resolved from the working directory init ran
/// in, the one the serve started from) is made absolute, its directory without symlinks, so that one under the
/// gate's directory or its checkout is written `{gate_dir}/...` (`render::Portable`); None for a word the
/// PATH finds, one holding a placeholder, or one naming no file (left as given).
fn program_path(word: &str) -> Option<String> {
    if !word.contains('/') || word.contains('{') {
        return None;
    }
    let path = Path::new(word);
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let file = std::fs::canonicalize(dir).ok()?.join(name);
    if !file.is_file() {
        return None;
    }
    Some(render::literal(file.to_str()?))
}

/// Why init wrote no first-token limit: `e` (too few values), and when the round timed fewer first tokens
/// than it had replies, its own verdict, which names each one not measured and why (a busy runner's client
/// too late to time it, say), so that the user knows to run init again.
fn no_limit(e: &str, first_token: Option<&Verdict>) -> String {
    match first_token {
        Some(v) if v.values.iter().any(Option::is_none) => {
            format!("a first-token limit: {e} ({})", v.message)
        }
        _ => format!("a first-token limit: {e}"),
    }
}

/// The first-token limit from the round's first tokens (`ttfts`, ms) with bless's rule mirrored, into
/// `draft`, or why there is none into `rep`.
fn first_token_limit(
    o: &InitOptions,
    ttfts: &[f64],
    first_token: Option<&Verdict>,
    at: &str,
    draft: &mut Draft,
    rep: &mut InitReport,
) {
    match crate::records::bless::derive_limit(
        ttfts,
        Metric::Ttft,
        crate::records::bless::DEFAULT_CONFIDENCE,
        o.headroom_pct,
    ) {
        Ok(d) => {
            // The upper bound itself (no headroom), for the slack floor.
            let ub = crate::records::bless::derive_limit(
                ttfts,
                Metric::Ttft,
                crate::records::bless::DEFAULT_CONFIDENCE,
                0.0,
            )
            .map_or(d.limit, |u| u.limit);
            let limit = d.limit.max(ub + FIRST_TOKEN_SLACK_MS);
            rep.found.push(format!(
                "first token {:.0} ms median (n={}); limit {limit}",
                d.median, d.n
            ));
            draft.first_token = Some((
                limit,
                vec![
                    format!("measured {:.0} ms median (n={}) {at}", d.median, d.n),
                    format!(
                        "limit = upper bound + {} %, at least {FIRST_TOKEN_SLACK_MS} ms above it (bless's rule mirrored: {})",
                        o.headroom_pct, d.rule
                    ),
                    "Tighten: the first token of a loaded machine varies most; set the limit your users need.".into(),
                ],
            ));
        }
        Err(e) => rep.missing.push(no_limit(&e, first_token)),
    }
}

#[cfg(test)]
mod tests {
    use super::written_ready_timeout_s;

    #[test]
    fn the_written_wait_is_five_times_the_measured_start_up_at_least_120_s() {
        assert_eq!(written_ready_timeout_s(1.5), 120);
        assert_eq!(written_ready_timeout_s(24.0), 120);
        assert_eq!(written_ready_timeout_s(24.1), 130);
        // vLLM on this machine at load 11: 215.1 s.
        assert_eq!(written_ready_timeout_s(215.1), 1080);
        assert_eq!(written_ready_timeout_s(-3.0), 120);
    }
}
