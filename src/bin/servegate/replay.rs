//! `servegate replay`: the flags, the start-up (checks, the source loaded, the listener bound, the opening
//! lines printed, the stop signals) and the exit code; the library serves (`servegate::replay`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use servegate::error::exit;
use servegate::io::signals::{signal_name, OsSignals, SignalSource};
use servegate::replay::{self, pace, App, Matcher, Recording, Source, SyntheticFlags};

/// `servegate replay` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The run directory to serve back (holds run.json; e.g. target/servegate/runs/GATE/STAMP). Not with --synthetic.
    #[arg(required_unless_present = "synthetic", conflicts_with = "synthetic")]
    pub run_dir: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on; 0 picks a free one. The address is printed: `replay: listening on http://127.0.0.1:PORT`.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Time scale: every recorded time is divided by this (2 = twice as fast, so decode rates read 2x and TTFTs half).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// When every recorded response for a prompt has been served, start again from its first (default: 404).
    #[arg(long)]
    pub cycle: bool,
    /// Answer 503 on /health until this many ms after start (a model loading).
    #[arg(long, default_value_t = 0.0)]
    pub ready_after_ms: f64,
    /// Append JSON lines with the arrival of every request and the send time of every write to FILE.
    #[arg(long)]
    pub timing_log: Option<PathBuf>,
    /// Serve a synthetic paced stream instead of a recording (--tokens, --ttft-ms, --itl-ms or --tok-s).
    #[arg(long)]
    pub synthetic: bool,
    /// Synthetic: completion tokens per reply.
    #[arg(long, requires = "synthetic")]
    pub tokens: Option<u32>,
    /// Synthetic: ms from the request's arrival to the first token chunk.
    #[arg(long, requires = "synthetic")]
    pub ttft_ms: Option<f64>,
    /// Synthetic: ms between consecutive tokens.
    #[arg(long, requires = "synthetic", conflicts_with = "tok_s")]
    pub itl_ms: Option<f64>,
    /// Synthetic: decode rate in tokens per second (instead of --itl-ms).
    #[arg(long, requires = "synthetic")]
    pub tok_s: Option<f64>,
    /// Synthetic: tokens per chunk.
    #[arg(long, default_value_t = 1)]
    pub per_chunk: u32,
    /// Synthetic: send a role-only first chunk with the response head (a first event that is not a token).
    #[arg(long)]
    pub role_chunk: bool,
    /// Synthetic: send a usage chunk (completion_tokens = N) before [DONE].
    #[arg(long)]
    pub usage: bool,
    /// Synthetic: the model id in the chunks and /v1/models.
    #[arg(long, default_value = "synthetic")]
    pub model: String,
    /// Synthetic: llama.cpp-style `timings` on the finish chunk, stating the schedule's true figures
    /// (`predicted_per_second` = the decode rate, `prompt_ms` = the first-token delay).
    #[arg(long)]
    pub timings: bool,
    /// Synthetic: a buffering proxy: every token chunk is held and all are flushed in one write after the
    /// last token's due time (the `timings`, if sent, still state the true decode rate).
    #[arg(long)]
    pub burst: bool,
    /// Synthetic: slowdown under concurrency, percent per extra request in flight at a request's arrival
    /// (TTFT and inter-token gap scaled by 1 + pct/100 × (in flight − 1)); the timing log records each
    /// request's `in_flight` and true schedule.
    #[arg(long, default_value_t = 0.0, requires = "synthetic")]
    pub slowdown_pct: f64,
}

impl ReplayArgs {
    /// The synthetic stream's flags.
    fn synthetic_flags(&self) -> SyntheticFlags {
        SyntheticFlags {
            tokens: self.tokens,
            ttft_ms: self.ttft_ms,
            itl_ms: self.itl_ms,
            tok_s: self.tok_s,
            per_chunk: self.per_chunk,
            role_chunk: self.role_chunk,
            usage: self.usage,
            model: self.model.clone(),
            timings: self.timings,
            burst: self.burst,
            slowdown_pct: self.slowdown_pct,
        }
    }
}

/// `servegate replay`: loads the run (or the synthetic spec), prints the recorded serve.log, listens,
/// prints `replay: listening on URL`, and serves until SIGTERM or SIGINT (exit 0).
pub fn cli(args: &ReplayArgs) -> i32 {
    if let Err(e) =
        replay::check_speed(args.speed).and_then(|_| replay::check_ready_after(args.ready_after_ms))
    {
        errln!("error: {e}");
        return exit::USAGE;
    }
    pace::tighten_timer_slack();
    let source = if args.synthetic {
        match args.synthetic_flags().spec() {
            Ok(s) => Source::Synthetic(s),
            Err(e) => {
                errln!("error: {e}");
                return exit::USAGE;
            }
        }
    } else {
        let dir = args.run_dir.clone().unwrap_or_default();
        match Recording::load(&dir) {
            Ok(rec) => Source::Recording {
                rec,
                matcher: Matcher::default(),
                cycle: args.cycle,
            },
            Err(e) => {
                errln!("error: {e}");
                return exit::EVIDENCE_ERROR;
            }
        }
    };
    let timing = match &args.timing_log {
        None => None,
        Some(p) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
        {
            Ok(f) => Some(f),
            Err(e) => {
                errln!("error: --timing-log {}: {e}", p.display());
                return exit::USAGE;
            }
        },
    };
    // Exit cleanly on SIGTERM / SIGINT: nothing is buffered that matters (every write is flushed).
    match OsSignals::of(&[libc::SIGTERM, libc::SIGINT]) {
        Ok(mut signals) => {
            let _ = std::thread::Builder::new()
                .name("replay-signals".into())
                .spawn(move || {
                    if let Some(e) = signals.next_event() {
                        errln!("replay: stopping on {}", signal_name(e.signo()));
                        std::process::exit(exit::PASS);
                    }
                });
        }
        Err(e) => errln!("replay: signal handlers not installed: {e}"),
    }
    // The recorded log first, line for line, so route assertions see the original lines where they were.
    servegate::io::printer::stdout_bytes(&replay::opening(&source, args.speed));
    let listener = match TcpListener::bind((args.host.as_str(), args.port)) {
        Ok(l) => l,
        Err(e) => {
            errln!("error: cannot listen on {}:{}: {e}", args.host, args.port);
            return exit::USAGE;
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            errln!("error: {e}");
            return exit::USAGE;
        }
    };
    let app = Arc::new(App::new(
        source,
        args.speed,
        Duration::from_secs_f64(args.ready_after_ms / 1000.0),
        timing,
    ));
    replay::log_listening(&app, &addr);
    servegate::io::printer::stdout_bytes(
        format!("replay: listening on {}\n", replay::url_of(&addr)).as_bytes(),
    );
    servegate::io::printer::flush_stdout();
    match replay::serve(listener, app) {
        Ok(()) => exit::PASS,
        Err(e) => {
            errln!("error: accept failed: {e}");
            exit::USAGE
        }
    }
}
