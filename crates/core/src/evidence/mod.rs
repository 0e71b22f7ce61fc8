//! Evidence: the run directory, the only input of judging. Owns its layout, `run.json`'s schema, writing
//! (each file whole, via a temp file and rename) and loading. See docs/evidence.md.
//!
//! Layout of `target/servegate/runs/<gate>/<UTC timestamp>/`:
//! - `gate.toml`: a byte copy of the gate spec as run;
//! - `serve.log`: the serve's stdout and stderr (or a copy of `serve.log_file` for `url` serves);
//! - `NN.request.json`: the request body sent (NN = 00, 01, ... in send order, warmup first);
//! - `NN.reads.jsonl`: the response body as timed reads (`reads` module format);
//! - `NN.response.json`: HTTP status, headers, transport error;
//! - `requests.jsonl`: one [`RequestRecord`] per line, appended as each request ends (progress: O(1) per
//!   request; a killed run keeps it, the last line possibly torn);
//! - `run.json`: the [`RunSummary`]: written with `status: "running"` before the serve starts and rewritten
//!   once at the end with the final status (`complete`, `interrupted`, `failed`) and every request, so a
//!   killed run is visibly incomplete;
//! - `contract/<check>/`: the `[contract]` check's requests (`<label>.request.json`, `.response.json`,
//!   `.reads.jsonl`) and `check.json` (one [`contract::ContractRecord`] per request), [`contract`].

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EvidenceError;
/// Stored baselines: blessed run directories a regression or drift verdict compares with.
pub mod baseline;
/// The comparability key of a run: what must be equal between a run and its baseline.
pub mod comparability;
pub mod contract;
/// The digest of a run directory (records name their evidence by it).
pub mod digest;
pub(crate) mod figures;
/// `run.json` `serve.footprint`: the serve's peak memory and CPU over the judged requests.
pub mod footprint;
/// What an output (a report, an export, a page) may not land on: inputs and evidence.
pub mod guard;
/// `run.json` `imported`: another load tool's timings (servegate import).
pub mod imported;
pub mod layout;
/// `load.json` of a load sweep point.
pub mod load;
/// `[load] driver = "locust"`: the workers' per-request records and their merge.
pub mod locust;
/// The cap on `serve.log` on disk (head and tail kept, the bytes dropped said).
pub mod log_cap;
pub mod public;
pub mod serve_clock;

use crate::io::reads::{self, TimedRead};
pub use figures::{Figures, TokenSource};

/// The schema id written in `run.json`.
pub const RUN_SCHEMA: &str = "servegate.run/1";

/// Whether a run directory holds a finished run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The runner was still working (or was killed): the evidence is incomplete.
    Running,
    /// The runner finished (whatever the verdicts).
    Complete,
    /// A stop signal (SIGINT, SIGTERM, SIGHUP) ended the run: the evidence is incomplete, never judged
    /// as passed.
    Interrupted,
    /// An evidence write failed: the evidence is incomplete or unreliable, never judged as passed.
    Failed,
}

impl RunStatus {
    /// The status as written in `run.json` (`running`, `complete`, `interrupted`, `failed`).
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    /// Why a run with this status is not judged, for verdicts: `the runner was stopped before it finished`
    /// (running), `a stop signal ended the run` (interrupted), `an evidence write failed` (failed); empty for
    /// complete.
    pub fn why_incomplete(self) -> &'static str {
        match self {
            RunStatus::Running => "the runner was stopped before it finished",
            RunStatus::Interrupted => "a stop signal (SIGINT, SIGTERM, SIGHUP) ended the run",
            RunStatus::Failed => "an evidence write failed",
            RunStatus::Complete => "",
        }
    }
}

pub use crate::io::host::{host_info, load_avg, now_utc, stamp_utc, HostInfo};

/// What the runner saw of the serve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServeRecord {
    /// `command` or `url`.
    pub mode: String,
    /// The argv started (placeholders expanded), for `command` serves.
    pub command: Vec<String>,
    /// Base URL the requests went to.
    pub base_url: String,
    /// Process id of the started serve.
    pub pid: Option<u32>,
    /// Output of the setup command, when one ran: exit status.
    pub setup: Option<String>,
    /// ms from spawn to the first HTTP 200 on the ready path (model load time).
    pub ready_ms: Option<f64>,
    /// How many ms before `ready_ms` the serve may have turned ready (`ready_ms`'s precision): from the send
    /// of the last readiness probe that was not a 200 to the 200's reply. The probes come every 25 ms for
    /// 2 s after the spawn, then back off to every 500 ms (`io::serve::probe_pause`), so a serve that loads
    /// longer has a window of about 500 ms plus a probe's time. A started serve's only; absent in older
    /// evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_window_ms: Option<f64>,
    /// Readiness timeline: (ms since spawn, state) at each state change (`refused`, `503`, `200`).
    pub ready_timeline: Vec<(f64, String)>,
    /// Why the serve never became ready, or failed during the run (`port_in_use: ...`,
    /// `server_exited_during_run ...`). When set before any request, every assertion fails with it; when set
    /// after some, every assertion but `route` fails naming it (and `exit_log_tail`).
    pub failure: Option<String>,
    /// The serve's version where it says it: llama.cpp `/props` `build_info`, `system_fingerprint`.
    pub version: Option<String>,
    /// Where `version` came from (`/props build_info`, `/openapi.json info.version`, `/version`,
    /// `serve.log ...`: spec/detect.rs `serve_version`). Absent in older evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_source: Option<String>,
    /// The serve's package and version where `version` names no build (llama.cpp `b0-unknown`):
    /// `xllamacpp 2026.10.11549` from the reference serve's log (spec/detect.rs `package_version`). Records
    /// prefer it to a `b0-unknown` version; comparability keys stay on `version`. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_version: Option<String>,
    /// Without `[serve] engine` (or with `"auto"`): the engine detected after readiness, the evidence for it
    /// and the profile defaults that then applied (spec/detect.rs). Absent when the gate names its engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected: Option<DetectedEngine>,
    /// Model ids from `/v1/models`.
    pub models: Vec<String>,
    /// With `[serve] clock = "metrics"` (vLLM, SGLang, TGI): the serve's own histograms' deltas over the
    /// requests (`/metrics` read before the first request and after the last; both texts kept as
    /// `metrics.before.txt` / `metrics.after.txt`; the series: [`serve_clock::SERIES`]). Empty otherwise and
    /// in older evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<serve_clock::HistogramDelta>,
    /// With `[serve] clock = "metrics"`: the deltas of the serve's request counters over the same window
    /// (`vllm:request_success_total`, `sglang:num_requests_total`, `tgi_request_success`), to be set beside the
    /// requests the run sent. Empty otherwise and in older evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<serve_clock::CounterDelta>,
    /// How the serve was stopped (`exit status 0`, `signal 15`, `killed after grace`).
    pub stop: Option<String>,
    /// For a `url` serve with `serve.log_file`: where that log stood when the run began; only the bytes
    /// written after `offset` are copied into `serve.log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<LogFileStart>,
    /// The last lines of the serve's log when it exited during the run (`failure` then says
    /// `server_exited_during_run (<exit status>, ...)`); None otherwise and in older evidence.
    #[serde(default)]
    pub exit_log_tail: Option<String>,
    /// Processes the serve left behind outside its process group (a detached daemon), found after the
    /// stop and stopped: `pid 1234 (name)`. Absent in older evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strays_stopped: Vec<String>,
    /// Of those, the ones still alive after SIGKILL. Absent in older evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strays_survived: Vec<String>,
    /// The model file the serve was given and its sha256, taken when the serve started ([`hash_model`]);
    /// records copy it from here. Absent in older evidence and when the serve was given no model file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_file: Option<ModelFileHash>,
    /// The serve's footprint (peak memory over its processes, CPU over the judged requests), for a serve
    /// the runner started ([`footprint::Footprint`]). Absent for a `url` serve and in older evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint: Option<footprint::Footprint>,
    /// The `[[sample]]` samplers' series, in the gate's order ([`footprint::SampleSeries`]). Absent without
    /// samplers and in older evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<footprint::SampleSeries>,
}

/// `run.json` `serve.detected`: the engine recognised from what the serve said about itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DetectedEngine {
    /// The engine's gate name (`llama.cpp`, `llama-cpp-python`, `vllm`), or None when none was recognised.
    pub engine: Option<String>,
    /// What it was recognised by, one phrase per fact (`Server: llama.cpp header`).
    pub evidence: Vec<String>,
    /// The profile defaults that applied because the gate had not set them (`clock metrics`,
    /// `repeat_penalty 1.0`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
}

/// `run.json` `serve.model_file`: the model file the serve was given, hashed when the serve started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelFileHash {
    /// The path as the serve was given it (placeholders expanded).
    pub path: String,
    /// Lower-case hex SHA-256 of the whole file (64 digits), streamed.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// How the file was found: `request.model` (the gate's model names a file) or `serve.command` (the
    /// argument after `-m`/`--model` in the serve's argv).
    pub source: String,
}

/// The model file a serve is given, hashed now (call it as the serve starts): `request_model` when it names
/// an existing regular file, else the argument after `-m`, `--model` or `--model-path` in `command` when that
/// is one. None when neither names a file (a url serve, a model id); an unreadable file gives None too (the
/// record that needs the hash then refuses, naming the missing hash).
pub fn hash_model(request_model: &str, command: &[String]) -> Option<ModelFileHash> {
    let after_flag = command
        .windows(2)
        .find(|w| matches!(w[0].as_str(), "-m" | "--model" | "--model-path"))
        .map(|w| w[1].clone());
    [
        (Some(request_model.to_string()), "request.model"),
        (after_flag, "serve.command"),
    ]
    .into_iter()
    .filter_map(|(p, src)| p.map(|p| (p, src)))
    .find(|(p, _)| Path::new(p).is_file())
    .and_then(|(p, src)| {
        let (sha256, bytes) = crate::io::hash::sha256_file(Path::new(&p)).ok()?;
        Some(ModelFileHash {
            path: p,
            sha256,
            bytes,
            source: src.to_string(),
        })
    })
}

/// Where a `url` serve's `serve.log_file` stood when the run began (`run.json` `serve.log_file`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogFileStart {
    /// The log file, as the gate names it (placeholders expanded).
    pub path: String,
    /// Its length in bytes at the start of the run (0 when it did not exist yet).
    pub offset: u64,
    /// Its identity at the start (device and inode), None when it did not exist: a different identity at the
    /// end means the log was rotated, a shorter length that it was truncated.
    pub dev: Option<u64>,
    /// Inode, with `dev`.
    pub ino: Option<u64>,
    /// What the runner found at the end and copied (`copied 1234 bytes written during the run`,
    /// `rotated during the run: ...`).
    pub copied: Option<String>,
}

/// One request's record in `run.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Send order, 0-based; files are `NN.*` with NN = index, two digits.
    pub index: usize,
    /// Warmup requests are recorded but never judged.
    pub warmup: bool,
    /// Index into the gate's prompts.
    pub prompt_index: usize,
    /// Repeat number (0-based) among the judged rounds; warmup rounds count separately.
    pub repeat: u32,
    /// The prompt text.
    pub prompt: String,
    /// Streamed request.
    pub stream: bool,
    /// UTC time the request was sent (RFC 3339).
    pub sent_utc: String,
    /// HTTP status, when a response arrived.
    pub http_status: Option<u16>,
    /// Transport failure (connect refused, timeout, body read error), verbatim.
    pub transport_error: Option<String>,
    /// Bytes of body kept in the reads file.
    pub body_bytes: u64,
    /// True when the body exceeded the cap and the rest was dropped (and counted).
    pub body_truncated: bool,
    /// Figures at run time, for people reading run.json; judging recomputes them from the reads.
    pub figures: Option<Figures>,
    /// The reply's dialect notes by name at run time (`analysis::dialect::note_names`, as `servegate
    /// inspect` lists them: `no_done_marker`, `usage_on_finish_chunk`, ...); absent when none (and in older
    /// evidence).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Always [`RUN_SCHEMA`].
    pub schema: String,
    /// `running` until the runner finishes.
    pub status: RunStatus,
    /// `gate.name`.
    pub gate: String,
    /// The gate file as given.
    pub gate_file: String,
    /// UTC start, RFC 3339.
    pub started_utc: String,
    /// UTC end, RFC 3339.
    pub ended_utc: Option<String>,
    /// Host facts.
    pub host: HostInfo,
    /// `/proc/loadavg` 1, 5, 15 minute load averages at start.
    pub load_avg_start: Option<[f64; 3]>,
    /// The same at the end.
    pub load_avg_end: Option<[f64; 3]>,
    /// servegate's version.
    pub servegate_version: String,
    /// The serve.
    pub serve: ServeRecord,
    /// Judged (non-warmup) requests the run planned: `repeats × prompts` of the gate as run. Judging counts
    /// every planned request: one never sent is a missing value (`n=3 of 20 planned`). None in evidence
    /// written before servegate recorded it; judging then takes the judged requests recorded as the plan.
    #[serde(default)]
    pub planned: Option<usize>,
    /// Warmup requests the run planned (`warmup × prompts`), sent first; never judged.
    #[serde(default)]
    pub planned_warmup: Option<usize>,
    /// Every request sent, warmup included.
    pub requests: Vec<RequestRecord>,
    /// Free-form notes the runner adds (e.g. caps applied).
    #[serde(default)]
    pub notes: Vec<String>,
    /// An import's provenance (`servegate import`): whose timings these are, what the format lacks. None
    /// for a run servegate's own client made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<imported::Imported>,
}

/// Writes a run directory. Each file is written whole (temp + rename), so a file is either absent or complete.
/// Paths and the host name are written as [`public::Public`] says (this process's checkout and home; the host
/// name hidden unless [`EvidenceWriter::publish_host`]).
#[derive(Debug)]
pub struct EvidenceWriter {
    dir: PathBuf,
    public: public::Public,
    /// `serve.log`'s cap on disk, bytes ([`log_cap`]).
    log_cap: u64,
}

impl EvidenceWriter {
    /// Creates `<root>/<gate>/<UTC timestamp>[-N]/` and returns a writer for it.
    pub fn create(root: &Path, gate: &str, stamp: &str) -> Result<EvidenceWriter, EvidenceError> {
        let parent = root.join(gate);
        std::fs::create_dir_all(&parent).map_err(|e| EvidenceError::io(&parent, e))?;
        for n in 0..1000 {
            let name = if n == 0 {
                stamp.to_string()
            } else {
                format!("{stamp}-{n}")
            };
            let dir = parent.join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(EvidenceWriter {
                        dir,
                        public: public::Public::from_env(false),
                        log_cap: log_cap::DEFAULT_LOG_CAP_BYTES,
                    })
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(EvidenceError::io(&dir, e)),
            }
        }
        Err(EvidenceError::Malformed {
            path: parent,
            reason: "could not create a fresh run directory".into(),
        })
    }

    /// Creates exactly `dir` (which must not exist yet; its parent must) and returns a writer for it.
    pub fn create_exact(dir: &Path) -> Result<EvidenceWriter, EvidenceError> {
        std::fs::create_dir(dir).map_err(|e| EvidenceError::io(dir, e))?;
        Ok(EvidenceWriter {
            dir: dir.to_path_buf(),
            public: public::Public::from_env(false),
            log_cap: log_cap::DEFAULT_LOG_CAP_BYTES,
        })
    }

    /// The gate opted in to its host name (`[record] publish_host = true`): `run.json` and `pair.json` keep
    /// `host.hostname` and no text hides it.
    pub fn publish_host(mut self, publish: bool) -> EvidenceWriter {
        if publish {
            self.public.hostname = None;
        }
        self
    }

    /// The gate's `[serve] log_cap_bytes`: `serve.log`'s cap on disk ([`log_cap`]).
    pub fn log_cap(mut self, bytes: u64) -> EvidenceWriter {
        self.log_cap = bytes;
        self
    }

    /// Caps `serve.log` ([`log_cap::cap_file`]) when the serve has stopped: the note for `run.json` when
    /// bytes were dropped.
    pub fn cap_serve_log(&self) -> Result<Option<String>, EvidenceError> {
        let p = self.path(layout::SERVE_LOG);
        let d = log_cap::cap_file(&p, self.log_cap).map_err(|e| EvidenceError::io(&p, e))?;
        Ok(d.map(|d| d.note(self.log_cap)))
    }

    /// Rewrites `serve.log` and `setup.log` (when present) by the privacy rule ([`public::rewrite_file`]):
    /// called when the serve has stopped, before anything is judged.
    pub fn publish_logs(&self) -> Result<(), EvidenceError> {
        for name in [layout::SERVE_LOG, layout::SETUP_LOG] {
            let p = self.path(name);
            public::rewrite_file(&p, &self.public).map_err(|e| EvidenceError::io(&p, e))?;
        }
        Ok(())
    }

    /// Writes `pair.json`.
    pub fn write_pair_summary(&self, pair: &PairSummary) -> Result<(), EvidenceError> {
        let mut pair = pair.clone();
        if self.public.hostname.is_some() {
            pair.host.hostname = String::new();
        }
        let json = serde_json::to_string_pretty(&pair).map_err(|e| EvidenceError::Malformed {
            path: self.path(crate::evidence::layout::PAIR_FILE),
            reason: e.to_string(),
        })?;
        self.write(
            crate::evidence::layout::PAIR_FILE,
            self.public.text(&json).as_bytes(),
        )
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of a file in the run directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `name` atomically (temp file in the same directory, fsync, rename).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), EvidenceError> {
        write_atomic(&self.dir.join(name), bytes)
    }

    /// Writes `run.json`.
    /// Written by the privacy rule ([`public`]): no absolute home or checkout path, `host.hostname` empty
    /// unless the gate publishes it.
    pub fn write_summary(&self, run: &RunSummary) -> Result<(), EvidenceError> {
        let mut run = run.clone();
        if self.public.hostname.is_some() {
            run.host.hostname = String::new();
        }
        let json = serde_json::to_string_pretty(&run).map_err(|e| EvidenceError::Malformed {
            path: self.path(crate::evidence::layout::RUN_FILE),
            reason: e.to_string(),
        })?;
        self.write(
            crate::evidence::layout::RUN_FILE,
            self.public.text(&json).as_bytes(),
        )
    }

    /// Appends `rec` as one JSON line to `requests.jsonl` (open with `O_APPEND`, write, fdatasync): the
    /// run's progress, O(1) per request. `run.json` gets every record once, at the end.
    pub fn append_request_record(&self, rec: &RequestRecord) -> Result<(), EvidenceError> {
        let path = self.path(PROGRESS_FILE);
        let mut line = serde_json::to_vec(rec).map_err(|e| EvidenceError::Malformed {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        line.push(b'\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| EvidenceError::io(&path, e))?;
        f.write_all(&line)
            .map_err(|e| EvidenceError::io(&path, e))?;
        f.sync_data().map_err(|e| EvidenceError::io(&path, e))
    }

    /// Writes the three files of request `index`.
    pub fn write_request(
        &self,
        index: usize,
        body: &serde_json::Value,
        response: &ResponseMeta,
        reads: &[TimedRead],
    ) -> Result<(), EvidenceError> {
        let body = serde_json::to_vec_pretty(body).unwrap_or_default();
        self.write(&crate::evidence::layout::request_file(index), &body)?;
        let meta = serde_json::to_vec_pretty(response).unwrap_or_default();
        self.write(&crate::evidence::layout::response_file(index), &meta)?;
        self.write_reads(&crate::evidence::layout::reads_file(index), reads)
    }

    /// Writes one contract request (`contract/<check>/<label>.request.json`, `.response.json`,
    /// `.reads.jsonl`: [`contract::exchange_file`]), creating the check's directory.
    pub fn write_contract_exchange(
        &self,
        check: &str,
        label: &str,
        body: &serde_json::Value,
        response: &ResponseMeta,
        reads: &[TimedRead],
    ) -> Result<(), EvidenceError> {
        let dir = self.dir.join(contract::check_dir(check));
        std::fs::create_dir_all(&dir).map_err(|e| EvidenceError::io(&dir, e))?;
        let name = |suffix| contract::exchange_file(check, label, suffix);
        let body = serde_json::to_vec_pretty(body).unwrap_or_default();
        self.write(&name(crate::evidence::layout::REQUEST_SUFFIX), &body)?;
        let meta = serde_json::to_vec_pretty(response).unwrap_or_default();
        self.write(&name(crate::evidence::layout::RESPONSE_SUFFIX), &meta)?;
        self.write_reads(&name(crate::evidence::layout::READS_SUFFIX), reads)
    }

    /// Writes `reads` as `.reads.jsonl` to `name` atomically, one line at a time through a buffer: the
    /// encoded text is never held whole in memory (a 50 MB reply would otherwise cost its size again,
    /// twice over while the string grows).
    fn write_reads(&self, name: &str, reads: &[TimedRead]) -> Result<(), EvidenceError> {
        let path = self.dir.join(name);
        let mut tmp = tempfile::Builder::new()
            .prefix(crate::io::fs::TEMP_PREFIX)
            .tempfile_in(&self.dir)
            .map_err(|e| EvidenceError::io(&self.dir, e))?;
        {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, tmp.as_file_mut());
            for r in reads {
                out.write_all(reads::encode_line(r).as_bytes())
                    .and_then(|_| out.write_all(b"\n"))
                    .map_err(|e| EvidenceError::io(&path, e))?;
            }
            out.flush().map_err(|e| EvidenceError::io(&path, e))?;
        }
        tmp.as_file()
            .sync_all()
            .map_err(|e| EvidenceError::io(&path, e))?;
        tmp.persist(&path)
            .map_err(|e| EvidenceError::io(&path, e.error))?;
        Ok(())
    }
}

/// The progress file of a run directory: one [`RequestRecord`] a line, appended as requests end.
pub use layout::PROGRESS_FILE;

/// A run directory's file at `path` as text, read bounded ([`crate::io::input::read_to_string`],
/// [`crate::io::input::MAX_EVIDENCE_BYTES`]): None when it is absent (a file the evidence may lack); any
/// other failure (unreadable, not a regular file, over the limit, not UTF-8) an error naming it.
pub(crate) fn read_if_present(path: &Path) -> Result<Option<String>, EvidenceError> {
    match crate::io::input::read_to_string(path, crate::io::input::MAX_EVIDENCE_BYTES) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(EvidenceError::io(path, e)),
    }
}

/// The records of `requests.jsonl` in `dir` (empty when absent). A last line without its newline (the
/// runner was killed while appending) is dropped; any other unparsable line is an error.
pub fn read_progress(dir: &Path) -> Result<Vec<RequestRecord>, EvidenceError> {
    let path = dir.join(PROGRESS_FILE);
    let Some(text) = read_if_present(&path)? else {
        return Ok(Vec::new());
    };
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| EvidenceError::Malformed {
                path: path.clone(),
                reason: format!("line {}: {e}", i + 1),
            })
        })
        .collect()
}

/// Writes a file of the run directory atomically ([`crate::io::fs::write_atomic`]); errors name the file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EvidenceError> {
    crate::io::fs::write_atomic(path, bytes).map_err(|e| EvidenceError::io(path, e))
}

pub use crate::io::exchange::ResponseMeta;

/// One request of a loaded run: its record, its response meta, and its reads as loaded: raw
/// (`Vec<TimedRead>`, from [`load`]) or turned into what the layer above needs as they are read (from
/// [`load_with`]; `loaded::load` parses each into a `Reply`, so that a large reply's reads are never
/// held beside its parse).
#[derive(Debug, Clone)]
pub struct RequestEvidence<R = Vec<TimedRead>> {
    /// The record from run.json.
    pub record: RequestRecord,
    /// The response meta (`NN.response.json`), if present.
    pub response: Option<ResponseMeta>,
    /// What was made of `NN.reads.jsonl`: the raw reads, or (from `loaded::load`) the parsed reply with
    /// the transport error, if any.
    pub reply: R,
}

/// A loaded run directory.
#[derive(Debug, Clone)]
pub struct Evidence<R = Vec<TimedRead>> {
    /// The run directory.
    pub dir: PathBuf,
    /// run.json.
    pub run: RunSummary,
    /// serve.log, when present (lossy UTF-8).
    pub serve_log: Option<String>,
    /// Every request, in send order.
    pub requests: Vec<RequestEvidence<R>>,
}

/// Where `log` stands now: its length and identity (a missing file is offset 0, no identity).
pub fn log_file_start(log: &std::path::Path) -> LogFileStart {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(log).ok();
    LogFileStart {
        path: log.display().to_string(),
        offset: meta.as_ref().map(|m| m.len()).unwrap_or(0),
        dev: meta.as_ref().map(|m| m.dev()),
        ino: meta.as_ref().map(|m| m.ino()),
        copied: None,
    }
}

/// Copies into `to` (whole, via a temp file) only what was written to `log` since `start`: from its offset when
/// it is the same file and not shorter; the whole file when it was rotated (another file now) or truncated
/// (shorter), saying so. Streams: a large log is never held in memory. At most `cap` bytes are written
/// (`[serve] log_cap_bytes`): a longer stretch keeps its first and last halves with [`log_cap::MARK`]'s line
/// between them, cut at line ends, by the one cap a started serve's log gets ([`log_cap::copy_capped`]), so a log that grows without end
/// cannot fill the disk. A `log` that is not a regular file (a FIFO, whose open would block for good; a
/// device such as `/dev/zero`, endless; a directory) is refused before it is opened (`InvalidInput`).
pub fn copy_log_since(
    log: &std::path::Path,
    start: &LogFileStart,
    to: &std::path::Path,
    cap: u64,
) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt;
    let kind = std::fs::metadata(log)?.file_type();
    if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "not a regular file ({}): a serve's log is a file it appends to",
                if kind.is_dir() {
                    "a directory"
                } else if kind.is_symlink() {
                    "a symbolic link"
                } else {
                    "a FIFO, a socket or a device"
                }
            ),
        ));
    }
    let mut f = std::fs::File::open(log)?;
    let meta = f.metadata()?;
    let same = start.dev == Some(meta.dev()) && start.ino == Some(meta.ino());
    let (from, what) = if start.dev.is_none() {
        (
            0,
            "the file appeared during the run: copied whole".to_string(),
        )
    } else if !same {
        (0, format!("rotated during the run (another file now: dev {} inode {}, was dev {} inode {}): copied the new file whole; the old one's lines written during the run are not in the evidence", meta.dev(), meta.ino(), start.dev.unwrap_or(0), start.ino.unwrap_or(0)))
    } else if meta.len() < start.offset {
        (0, format!("truncated during the run ({} bytes, was {}): copied whole; lines written before the truncation are not in the evidence", meta.len(), start.offset))
    } else {
        (start.offset, String::new())
    };
    let dir = to.parent().unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(crate::io::fs::TEMP_PREFIX)
        .tempfile_in(dir)?;
    let (n, capped) = log_cap::copy_capped(&mut f, from, meta.len(), cap, &mut tmp)?;
    tmp.persist(to).map_err(|e| e.error)?;
    let capped = capped
        .map(|d| format!("; {}", d.note(cap)))
        .unwrap_or_default();
    Ok(if what.is_empty() {
        format!("copied {n} bytes written during the run (from offset {from}){capped}")
    } else {
        format!("{what} ({n} bytes){capped}")
    })
}

/// Most of `serve.log` read for judging, bytes (64 MiB): a 300 MB log is not read whole. A longer log is
/// read up to the cap and [`SERVE_LOG_CUT_MARK`] appended (with the size), and `route` fails on it: a slow-route
/// line could be in the part not read. The file itself stays whole in the evidence.
pub const SERVE_LOG_JUDGE_CAP: u64 = 64 << 20;

/// Appended to [`Evidence::serve_log`] when the log was longer than [`SERVE_LOG_JUDGE_CAP`].
pub const SERVE_LOG_CUT_MARK: &str = "\n\u{0}servegate: serve.log cut at the judging cap\u{0}";

/// `serve.log`, at most [`SERVE_LOG_JUDGE_CAP`] bytes of it (lossy UTF-8); None when absent.
fn read_serve_log(path: &Path) -> Result<Option<String>, EvidenceError> {
    use std::io::Read;
    let f = match crate::io::input::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(EvidenceError::io(path, e)),
    };
    let total = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    f.take(SERVE_LOG_JUDGE_CAP + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| EvidenceError::io(path, e))?;
    let cut = bytes.len() as u64 > SERVE_LOG_JUDGE_CAP;
    bytes.truncate(SERVE_LOG_JUDGE_CAP as usize);
    let mut log = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        log.push_str(SERVE_LOG_CUT_MARK);
        log.push_str(&format!(" {total} bytes on disk"));
    }
    Ok(Some(log))
}

/// Checks one request's timed reads against its record: the bytes kept add up to `body_bytes`, and every
/// read time is finite, >= 0 and not before the previous one. A reason when not.
pub fn check_reads(rec: &RequestRecord, reads: &[TimedRead]) -> Result<(), String> {
    let kept: u64 = reads.iter().map(|r| r.bytes.len() as u64).sum();
    if kept != rec.body_bytes {
        return Err(format!(
            "request {:02}: the reads hold {kept} bytes but run.json records body_bytes {}",
            rec.index, rec.body_bytes
        ));
    }
    let mut last = 0.0_f64;
    for (i, r) in reads.iter().enumerate() {
        if !r.t_ms.is_finite() || r.t_ms < 0.0 {
            return Err(format!(
                "read {i}: time {} ms is not a finite time >= 0",
                r.t_ms
            ));
        }
        if r.t_ms < last {
            return Err(format!(
                "read {i}: time {} ms is before the previous read's {last} ms (read times never decrease)",
                r.t_ms
            ));
        }
        last = r.t_ms;
    }
    Ok(())
}

/// Why a run's request records cannot be judged as they stand: the same request index recorded twice (each
/// index names one request and its `NN.*` files, so a second record would count that request's one reply
/// twice: a median of repeated values, `n=7 of 6 planned`). Evidence reading refuses it rather than keep
/// one record silently, so a re-judged run never counts differently from what was sent; None when every
/// index is recorded once.
pub fn duplicated_index(records: &[RequestRecord]) -> Option<String> {
    let mut first = std::collections::BTreeMap::new();
    for (pos, r) in records.iter().enumerate() {
        if let Some(prev) = first.insert(r.index, pos) {
            return Some(format!(
                "request {:02} is recorded twice (records {} and {}); each request index must be recorded \
                 once: the evidence was written twice or edited, and cannot be judged",
                r.index,
                prev + 1,
                pos + 1
            ));
        }
    }
    None
}

/// Reads a run directory's `run.json` as written (no schema check, requests of an unfinished run not
/// gathered: [`load`] does both). Errors: unreadable, or not a [`RunSummary`], naming the file.
pub fn read_run_summary(dir: &Path) -> Result<RunSummary, EvidenceError> {
    let run_path = dir.join(crate::evidence::layout::RUN_FILE);
    let text = crate::io::input::read_to_string(&run_path, crate::io::input::MAX_EVIDENCE_BYTES)
        .map_err(|e| EvidenceError::io(&run_path, e))?;
    serde_json::from_str(&text).map_err(|e| EvidenceError::Malformed {
        path: run_path,
        reason: e.to_string(),
    })
}

/// The most requests (judged, or warmup) a run.json may say it planned: a load point's limit
/// (`spec::load::MAX_REQUESTS`; a plain run plans at most `spec::MAX_REQUESTS`).
pub const MAX_PLANNED: usize = crate::spec::load::MAX_REQUESTS as usize;

/// Loads a run directory: run.json, serve.log (up to [`SERVE_LOG_JUDGE_CAP`]) and every request's reads,
/// parsed into replies. Errors: a reads file whose bytes disagree with its record's `body_bytes` or whose
/// times decrease is [`EvidenceError::Malformed`] naming the file.
pub fn load(dir: &Path) -> Result<Evidence, EvidenceError> {
    load_with(dir, |_, _, reads| reads)
}

/// Like [`load`], with each request's checked reads handed to `each` as soon as they are read (with the
/// request's record and its response head, `NN.response.json`, when there is one); what it returns is kept as [`RequestEvidence::reply`]. Does no parsing itself.
/// A run whose status is not `running` has the temp files a killed write left removed first
/// ([`crate::io::fs::remove_temps`]).
pub fn load_with<R>(
    dir: &Path,
    mut each: impl FnMut(&RequestRecord, Option<&ResponseMeta>, Vec<TimedRead>) -> R,
) -> Result<Evidence<R>, EvidenceError> {
    let run_path = dir.join(crate::evidence::layout::RUN_FILE);
    let mut run = read_run_summary(dir)?;
    // Temp files a write killed mid-way left (a second stop signal): never evidence (only the files run.json
    // names are read), and gone once the run no longer runs.
    if run.status != RunStatus::Running {
        crate::io::fs::remove_temps(dir);
    }
    // A run that did not finish has its requests only in the progress file.
    let mut records_path = run_path.clone();
    if run.status != RunStatus::Complete && run.requests.is_empty() {
        run.requests = read_progress(dir)?;
        records_path = dir.join(PROGRESS_FILE);
    }
    // What run.json claims sizes what judging allocates (one slot per planned request): a claim past what
    // any gate can plan is refused, so memory is bounded by the gates' own limits, not by a number in a file.
    for (key, n) in [
        ("planned", run.planned),
        ("planned_warmup", run.planned_warmup),
    ] {
        if let Some(n) = n.filter(|n| *n > MAX_PLANNED) {
            return Err(EvidenceError::Malformed {
                path: run_path,
                reason: format!(
                    "`{key}` is {n}, more than any gate plans (at most {MAX_PLANNED} requests)"
                ),
            });
        }
    }
    if let Some(reason) = duplicated_index(&run.requests) {
        return Err(EvidenceError::Malformed {
            path: records_path,
            reason,
        });
    }
    if run.schema != RUN_SCHEMA {
        return Err(EvidenceError::Malformed {
            path: run_path,
            reason: format!("schema {:?}, expected {RUN_SCHEMA:?}", run.schema),
        });
    }
    let log_path = dir.join(crate::evidence::layout::SERVE_LOG);
    let serve_log = read_serve_log(&log_path)?;
    let mut requests = Vec::new();
    for rec in &run.requests {
        let reads_path = dir.join(crate::evidence::layout::reads_file(rec.index));
        let reads = match crate::io::input::read_to_string(
            &reads_path,
            crate::io::input::MAX_EVIDENCE_BYTES,
        ) {
            Ok(t) => reads::decode(&t).map_err(|e| EvidenceError::Malformed {
                path: reads_path.clone(),
                reason: e.to_string(),
            })?,
            // A request that got no response has no reads; one that did must have them.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && rec.http_status.is_none() => {
                Vec::new()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(EvidenceError::Malformed {
                    path: reads_path.clone(),
                    reason: format!(
                        "missing: request {:02} got HTTP {} but its reads are not in the evidence",
                        rec.index,
                        rec.http_status.unwrap_or(0)
                    ),
                })
            }
            Err(e) => return Err(EvidenceError::io(&reads_path, e)),
        };
        check_reads(rec, &reads).map_err(|reason| EvidenceError::Malformed {
            path: reads_path.clone(),
            reason,
        })?;
        let meta_path = dir.join(crate::evidence::layout::response_file(rec.index));
        let response: Option<ResponseMeta> = match read_if_present(&meta_path)? {
            Some(t) => Some(
                serde_json::from_str(&t).map_err(|e| EvidenceError::Malformed {
                    path: meta_path.clone(),
                    reason: e.to_string(),
                })?,
            ),
            None => None,
        };
        let reply = each(rec, response.as_ref(), reads);
        requests.push(RequestEvidence {
            record: rec.clone(),
            response,
            reply,
        });
    }
    Ok(Evidence {
        dir: dir.to_path_buf(),
        run,
        serve_log,
        requests,
    })
}

/// The schema id written in `pair.json`.
pub const PAIR_SCHEMA: &str = "servegate.pair/1";

/// One arm of a pair run: where its run directory is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmRecord {
    /// 1-based position in the order.
    pub arm: usize,
    /// `ours` or `theirs`.
    pub role: String,
    /// The runtime's description from the gate.
    pub runtime: String,
    /// The arm's run directory, relative to the pair directory (`arm1-theirs`).
    pub dir: String,
}

/// `pair.json`: the top of a pair run directory, whose arms are ordinary run directories beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairSummary {
    /// Always [`PAIR_SCHEMA`].
    pub schema: String,
    /// `running` until the runner finishes all arms.
    pub status: RunStatus,
    /// `gate.name`.
    pub gate: String,
    /// The gate file as given.
    pub gate_file: String,
    /// UTC start, RFC 3339.
    pub started_utc: String,
    /// UTC end.
    pub ended_utc: Option<String>,
    /// Host facts.
    pub host: HostInfo,
    /// Load averages at start and end of the whole pair (one hold).
    pub load_avg_start: Option<[f64; 3]>,
    /// The same at the end.
    pub load_avg_end: Option<[f64; 3]>,
    /// Arm order (`theirs`, `ours`, `ours`, `theirs`).
    pub order: Vec<String>,
    /// The model file ours loads.
    pub model_file_ours: String,
    /// The model file theirs loads.
    pub model_file_theirs: String,
    /// sha256 of the model file (64 hex) before the first arm.
    pub model_sha256: Option<String>,
    /// Its size, bytes.
    pub model_bytes: Option<u64>,
    /// sha256 after the last arm (must equal `model_sha256`).
    pub model_sha256_after: Option<String>,
    /// Why the pair did not run or is void (`pair_model_mismatch: ...`, `model_changed_during_run: ...`).
    pub failure: Option<String>,
    /// The arms run, in order.
    pub arms: Vec<ArmRecord>,
}

/// A loaded pair run directory.
#[derive(Debug, Clone)]
pub struct PairEvidence<R = Vec<TimedRead>> {
    /// The pair directory.
    pub dir: PathBuf,
    /// pair.json.
    pub summary: PairSummary,
    /// Each arm's evidence, in order (parallel to `summary.arms`).
    pub arms: Vec<Evidence<R>>,
}

/// True when `dir` holds a pair run (`pair.json`).
pub fn is_pair_dir(dir: &Path) -> bool {
    dir.join(crate::evidence::layout::PAIR_FILE).is_file()
}

/// Reads a pair run directory's `pair.json` alone (its arms are not loaded: [`load_pair_with`] does).
/// Errors: unreadable, not the schema's shape, or another schema version, naming the file.
pub fn read_pair_summary(dir: &Path) -> Result<PairSummary, EvidenceError> {
    let p = dir.join(crate::evidence::layout::PAIR_FILE);
    let text = crate::io::input::read_to_string(&p, crate::io::input::MAX_EVIDENCE_BYTES)
        .map_err(|e| EvidenceError::io(&p, e))?;
    let summary: PairSummary =
        serde_json::from_str(&text).map_err(|e| EvidenceError::Malformed {
            path: p.clone(),
            reason: e.to_string(),
        })?;
    if summary.schema != PAIR_SCHEMA {
        return Err(EvidenceError::Malformed {
            path: p,
            reason: format!("schema {:?}, expected {PAIR_SCHEMA:?}", summary.schema),
        });
    }
    Ok(summary)
}

/// Loads a pair run directory and every arm's evidence.
pub fn load_pair(dir: &Path) -> Result<PairEvidence, EvidenceError> {
    load_pair_with(dir, |_, _, reads| reads)
}

/// Like [`load_pair`], each arm loaded with [`load_with`] and `each`.
pub fn load_pair_with<R>(
    dir: &Path,
    mut each: impl FnMut(&RequestRecord, Option<&ResponseMeta>, Vec<TimedRead>) -> R,
) -> Result<PairEvidence<R>, EvidenceError> {
    let p = dir.join(crate::evidence::layout::PAIR_FILE);
    let summary = read_pair_summary(dir)?;
    let mut arms = Vec::new();
    for a in &summary.arms {
        if a.dir.contains("..") || a.dir.starts_with('/') {
            return Err(EvidenceError::Malformed {
                path: p,
                reason: format!("arm dir {:?} must be a plain relative name", a.dir),
            });
        }
        arms.push(load_with(&dir.join(&a.dir), &mut each)?);
    }
    Ok(PairEvidence {
        dir: dir.to_path_buf(),
        summary,
        arms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(t_ms: f64, b: &str) -> TimedRead {
        TimedRead {
            t_ms,
            recv_ms: None,
            bytes: b.as_bytes().to_vec(),
        }
    }

    fn record(index: usize) -> RequestRecord {
        RequestRecord {
            index,
            prompt: "hi".into(),
            stream: true,
            sent_utc: "2026-12-01T00:00:00Z".into(),
            http_status: Some(200),
            ..Default::default()
        }
    }

    #[test]
    fn reads_must_add_up_to_body_bytes_and_never_go_back_in_time() {
        let rec = RequestRecord {
            body_bytes: 5,
            ..Default::default()
        };
        assert!(check_reads(&rec, &[read(1.0, "ab"), read(1.0, "cde")]).is_ok());
        let e = check_reads(&rec, &[read(1.0, "ab")]).unwrap_err();
        assert!(e.contains("2 bytes") && e.contains("body_bytes 5"), "{e}");
        let e = check_reads(&rec, &[read(2.0, "ab"), read(1.5, "cde")]).unwrap_err();
        assert!(e.contains("read 1") && e.contains("never decrease"), "{e}");
        let e = check_reads(&rec, &[read(f64::NAN, "abcde")]).unwrap_err();
        assert!(e.contains("finite"), "{e}");
        let e = check_reads(&rec, &[read(-1.0, "abcde")]).unwrap_err();
        assert!(e.contains("finite"), "{e}");
    }

    #[test]
    fn a_log_file_that_is_not_a_regular_file_is_refused_unopened_and_a_long_one_is_capped() {
        let tmp = tempfile::tempdir().unwrap();
        let to = tmp.path().join("copy.log");
        // A FIFO: opening it for reading would block until a writer came (a fresh-user trial's run hung
        // for 10 minutes there, deaf to SIGINT and SIGTERM); a device without end; a directory.
        let fifo = tmp.path().join("fifo.log");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for path in [
            fifo.as_path(),
            std::path::Path::new("/dev/zero"),
            tmp.path(),
        ] {
            let start = log_file_start(path);
            let e = copy_log_since(path, &start, &to, 1 << 20).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
            assert!(e.to_string().starts_with("not a regular file"), "{e}");
            assert!(!to.exists());
        }
        // 1,000 lines written during the run, a cap of 200 bytes: the first and last 100 bytes with the
        // cap's marker line between them, which route reads (log_cap::marker_in), and the note says it.
        let log = tmp.path().join("big.log");
        std::fs::write(&log, "start\n").unwrap();
        let start = log_file_start(&log);
        let body: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        std::fs::write(&log, format!("start\n{body}")).unwrap();
        let what = copy_log_since(&log, &start, &to, 200).unwrap();
        let copied = std::fs::read_to_string(&to).unwrap();
        assert!(copied.starts_with("line 0000\n"), "{copied}");
        assert!(copied.ends_with("line 0999\n"), "{copied}");
        assert!(
            copied.len() < 200 + 130,
            "the cap and its marker line: {}",
            copied.len()
        );
        let (_, dropped) = log_cap::marker_in(&copied).expect("the cap's marker");
        assert_eq!(dropped, body.len() as u64 - 200);
        assert!(what.contains("serve.log capped at 200 bytes"), "{what}");
    }

    #[test]
    fn a_url_serves_log_is_copied_from_where_it_stood() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join(crate::evidence::layout::SERVE_LOG);
        let to = tmp.path().join("copy.log");
        // Appended to: only the new bytes.
        std::fs::write(&log, "old line\n").unwrap();
        let start = log_file_start(&log);
        assert_eq!(start.offset, 9);
        std::fs::write(&log, "old line\nnew line\n").unwrap();
        let what = copy_log_since(&log, &start, &to, u64::MAX).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "new line\n");
        assert!(
            what.contains("written during the run (from offset 9)"),
            "{what}"
        );
        // Truncated: copied whole, said.
        std::fs::write(&log, "x\n").unwrap();
        let what = copy_log_since(&log, &start, &to, u64::MAX).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "x\n");
        assert!(what.contains("truncated during the run"), "{what}");
        // Rotated (another file at the path): copied whole, said.
        let start = log_file_start(&log);
        std::fs::rename(&log, tmp.path().join("serve.log.1")).unwrap();
        std::fs::write(&log, "fresh\n").unwrap();
        let what = copy_log_since(&log, &start, &to, u64::MAX).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "fresh\n");
        assert!(what.contains("rotated during the run"), "{what}");
        // Absent at the start: whatever appeared.
        let later = tmp.path().join("later.log");
        let start = log_file_start(&later);
        assert_eq!((start.offset, start.ino), (0, None));
        std::fs::write(&later, "a\n").unwrap();
        let what = copy_log_since(&later, &start, &to, u64::MAX).unwrap();
        assert!(what.contains("appeared during the run"), "{what}");
    }

    #[test]
    fn a_log_over_the_cap_is_read_up_to_it_and_marked() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(crate::evidence::layout::SERVE_LOG);
        assert_eq!(read_serve_log(&p).unwrap(), None);
        std::fs::write(&p, "one\ntwo\n").unwrap();
        assert_eq!(read_serve_log(&p).unwrap().as_deref(), Some("one\ntwo\n"));
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(SERVE_LOG_JUDGE_CAP + 1).unwrap();
        let log = read_serve_log(&p).unwrap().unwrap();
        assert!(log.starts_with("one\ntwo\n"));
        assert!(log.contains(SERVE_LOG_CUT_MARK));
        assert!(log.len() < SERVE_LOG_JUDGE_CAP as usize + 200);
    }

    #[test]
    fn progress_is_appended_one_line_a_request_and_a_torn_last_line_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let w = EvidenceWriter::create_exact(&tmp.path().join("run")).unwrap();
        assert!(read_progress(w.dir()).unwrap().is_empty());
        for i in 0..3 {
            w.append_request_record(&record(i)).unwrap();
        }
        let got = read_progress(w.dir()).unwrap();
        assert_eq!(got.iter().map(|r| r.index).collect::<Vec<_>>(), [0, 1, 2]);
        // A runner killed while appending leaves a line without its newline: dropped.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(w.path(PROGRESS_FILE))
            .unwrap();
        f.write_all(b"{\"index\": 3, \"warm").unwrap();
        assert_eq!(read_progress(w.dir()).unwrap().len(), 3);
        // A broken line inside the file is an error naming the line.
        std::fs::write(w.path(PROGRESS_FILE), "{}\n[1]\n").unwrap();
        let e = read_progress(w.dir()).unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
    }

    #[test]
    fn statuses_serialize_in_snake_case_and_old_run_json_loads() {
        for (s, text) in [
            (RunStatus::Running, "\"running\""),
            (RunStatus::Complete, "\"complete\""),
            (RunStatus::Interrupted, "\"interrupted\""),
            (RunStatus::Failed, "\"failed\""),
        ] {
            assert_eq!(serde_json::to_string(&s).unwrap(), text);
            assert_eq!(serde_json::from_str::<RunStatus>(text).unwrap(), s);
        }
        // A serve record from before the stray fields existed.
        let old = r#"{"mode":"command","command":[],"base_url":"","pid":null,"setup":null,"ready_ms":null,
            "ready_timeline":[],"failure":null,"version":null,"models":[],"stop":null}"#;
        let s: ServeRecord = serde_json::from_str(old).unwrap();
        assert!(s.strays_stopped.is_empty() && s.strays_survived.is_empty());
        // And none are written when there were none.
        assert!(!serde_json::to_string(&s).unwrap().contains("strays"));
    }

    #[test]
    fn an_unfinished_run_loads_its_requests_from_the_progress_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        let summary = RunSummary {
            schema: RUN_SCHEMA.into(),
            status: RunStatus::Interrupted,
            gate: "g".into(),
            gate_file: "g.toml".into(),
            started_utc: String::new(),
            ended_utc: None,
            host: HostInfo::default(),
            load_avg_start: None,
            load_avg_end: None,
            servegate_version: String::new(),
            serve: ServeRecord::default(),
            requests: Vec::new(),
            notes: Vec::new(),
            imported: None,
            planned: None,
            planned_warmup: None,
        };
        let w = EvidenceWriter {
            dir: dir.clone(),
            public: public::Public::default(),
            log_cap: log_cap::DEFAULT_LOG_CAP_BYTES,
        };
        w.write_summary(&summary).unwrap();
        let mut rec = record(0);
        rec.http_status = None; // no reads file needed
        w.append_request_record(&rec).unwrap();
        let ev = load(&dir).unwrap();
        assert_eq!(ev.run.requests.len(), 1);
        assert_eq!(ev.requests.len(), 1);
    }
}
