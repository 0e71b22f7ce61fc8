//! The serve's footprint figures of one run, from its evidence (pure): `ready_ms`, `serve_rss_peak_mib` and
//! `serve_cpu_ms_per_token` (docs/metrics.md "The serve's footprint"), each one value per run or the reason
//! there is none. The footprint trials (`judge::footprint`) and a regression on these metrics (its run and
//! its baseline windows alike, `baseline_values::window_values`) read them here, so each is defined once.

use crate::analysis::{measure, Evidence};
use crate::evidence::footprint::{CpuWindow, Footprint};
use crate::text::shown;
use crate::vocab::Metric;

/// The CPU per token of a run's judged window, with what it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuPerToken {
    /// ms of CPU per completion token.
    pub per_token: f64,
    /// The window as recorded.
    pub window: CpuWindow,
    /// Completion tokens of the judged requests in the window.
    pub tokens: u64,
    /// Judged requests in the window.
    pub requests: usize,
    /// Send-order indices of the requests whose count is the token-chunk estimate (the serve gave no usage).
    pub estimated: Vec<usize>,
    /// The per-token value's bounds given the counters' resolution (one clock tick per process read).
    pub lo: f64,
    /// Upper bound, as `lo`.
    pub hi: f64,
}

/// Why a `url` serve has no footprint figure (`what` names it), or None for a serve servegate started.
pub fn not_started(ev: &Evidence, what: &str) -> Option<String> {
    (ev.run.serve.mode == "url").then(|| {
        format!(
            "no {what}: the serve was reached at its url ({}), not started by servegate, so its processes are not servegate's to measure",
            shown(&ev.run.serve.base_url)
        )
    })
}

/// The run's `serve.footprint`, or why there is none. A `url` serve has one only when the gate named its pid
/// (`[serve] pid_file`: the runner measured that pid's processes, `Footprint::attached` says which).
pub fn footprint<'e>(ev: &'e Evidence, what: &str) -> Result<&'e Footprint, String> {
    if let Some(why) = not_started(ev, what) {
        return match &ev.run.serve.footprint {
            Some(fp) if fp.attached.is_some() => Ok(fp),
            _ => Err(format!(
                "{why} (name its pid in [serve] pid_file for its peak memory and CPU per token)"
            )),
        };
    }
    ev.run.serve.footprint.as_ref().ok_or_else(|| {
        format!("no {what}: run.json has no serve.footprint (evidence written before servegate measured the serve's footprint, or the serve never started)")
    })
}

/// `serve.ready_ms`, or why there is none.
pub fn ready_ms(ev: &Evidence) -> Result<f64, String> {
    if let Some(why) = not_started(ev, "start-up time") {
        return Err(why);
    }
    ev.run.serve.ready_ms.ok_or_else(|| {
        "no start-up time: run.json has no serve.ready_ms (the serve never answered ready)".into()
    })
}

/// `serve.footprint.rss_peak_mib`, or why there is none.
pub fn rss_peak_mib(ev: &Evidence) -> Result<f64, String> {
    let fp = footprint(ev, "peak memory")?;
    fp.rss_peak_mib.ok_or_else(|| {
        format!(
            "no peak memory: {}",
            shown(
                fp.rss_unavailable
                    .as_deref()
                    .unwrap_or("the kernel gave no figure")
            )
        )
    })
}

/// The CPU per completion token of the judged requests in the recorded window, or why there is none (no
/// window, a failed request in it: the tokens its CPU bought are unknown, a request without a count, no
/// token at all).
pub fn cpu_per_token(ev: &Evidence) -> Result<CpuPerToken, String> {
    let fp = footprint(ev, "CPU per token")?;
    let Some(w) = &fp.cpu else {
        return Err(format!(
            "no CPU per token: {}",
            shown(
                fp.cpu_unavailable
                    .as_deref()
                    .unwrap_or("the kernel gave no figure")
            )
        ));
    };
    let mut tokens = 0u64;
    let mut estimated = Vec::new();
    let mut requests = 0;
    for r in ev
        .requests
        .iter()
        .filter(|r| !r.record.warmup && (w.first_index..=w.last_index).contains(&r.record.index))
    {
        requests += 1;
        let label = format!("request {:02}", r.record.index);
        if let Some(f) = r.reply.failure() {
            return Err(format!(
                "no CPU per token: {label} failed ({f}), so the tokens its CPU bought are unknown"
            ));
        }
        if let Some(e) = &r.record.transport_error {
            return Err(format!(
                "no CPU per token: {label} failed (transport: {}), so the tokens its CPU bought are unknown",
                shown(e)
            ));
        }
        let fig = measure::measure(&r.reply);
        match (fig.completion_tokens, fig.completion_tokens_estimate) {
            (Some(n), _) => tokens += n,
            (None, Some(n)) => {
                tokens += n;
                estimated.push(r.record.index);
            }
            (None, None) => {
                return Err(format!(
                    "no CPU per token: {label} has no completion token count"
                ))
            }
        }
    }
    if tokens == 0 {
        return Err(format!(
            "no CPU per token: the {} in the window carried no completion token",
            crate::text::counted(requests, "judged request")
        ));
    }
    let tick_ms = 1000.0 / w.clk_tck.max(1) as f64;
    let slack = w.pids_start.max(w.pids_end).max(1) as f64 * tick_ms;
    let t = tokens as f64;
    Ok(CpuPerToken {
        per_token: w.cpu_ms / t,
        window: w.clone(),
        tokens,
        requests,
        estimated,
        lo: (w.cpu_ms - slack).max(0.0) / t,
        hi: (w.cpu_ms + slack) / t,
    })
}

/// The model-load time the serve logged, ms: the first line of `serve.log` that `re` (the gate's
/// `[assert.ready] load_log`) matches, its named group `ms` as milliseconds or `s` as seconds (× 1000); terminal
/// escapes (`ESC [ ... letter`) are stripped from each line before matching. Or why there is none: no
/// pattern, a `url` serve without a log of its own, no `serve.log`, no matching line (the log cut on disk
/// said so), or a match whose group is not a non-negative number (its line named).
pub fn model_load_ms(ev: &Evidence, re: Option<&regex::Regex>) -> Result<f64, String> {
    let Some(re) = re else {
        return Err("no model-load time: the gate names no [assert.ready] load_log pattern".into());
    };
    let Some(log) = ev.serve_log.as_deref() else {
        return Err(format!(
            "no model-load time: no serve.log in the evidence to read /{}/ from",
            shown(re.as_str())
        ));
    };
    for (i, line) in log.lines().enumerate() {
        let line = strip_csi(line);
        let Some(c) = re.captures(&line) else {
            continue;
        };
        let (text, scale) = match (c.name("ms"), c.name("s")) {
            (Some(m), _) => (m.as_str(), 1.0),
            (None, Some(s)) => (s.as_str(), 1000.0),
            (None, None) => continue,
        };
        return match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
            _ => Err(format!(
                "no model-load time: serve.log line {} matches /{}/ but its time {} is not a number of {}",
                i + 1,
                shown(re.as_str()),
                shown(text),
                if scale == 1.0 { "ms" } else { "s" }
            )),
        };
    }
    let cut = if log.contains(crate::evidence::SERVE_LOG_CUT_MARK) {
        " (serve.log was cut on disk: the line may have been in the part dropped)"
    } else {
        ""
    };
    Err(format!(
        "no model-load time: no line of serve.log matches /{}/{cut}",
        shown(re.as_str())
    ))
}

/// `line` without its terminal control sequences (`ESC [ params letter`, a lone ESC dropped).
fn strip_csi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        }
    }
    out
}

/// The run's value of a per-run footprint metric ([`Metric::per_run`]), or why it has none (and for any other metric:
/// not a per-run figure).
pub fn run_value(ev: &Evidence, m: Metric) -> Result<f64, String> {
    match m {
        Metric::ReadyMs => ready_ms(ev),
        Metric::ServeRssPeak => rss_peak_mib(ev),
        Metric::ServeCpuPerToken => cpu_per_token(ev).map(|c| c.per_token),
        Metric::Ttft
        | Metric::FirstContent
        | Metric::DecodeRate
        | Metric::Itl
        | Metric::ItlP90
        | Metric::Tpot
        | Metric::E2e
        | Metric::ServerDecodeRate
        | Metric::ServerPrefillRate
        | Metric::PairRatio
        | Metric::OutputThroughput
        | Metric::RequestThroughput
        | Metric::Goodput
        | Metric::SloAttainment
        | Metric::PeakConcurrency
        | Metric::ScalingEfficiency => Err(format!("{m} is not a per-run figure")),
    }
}

/// Other processes' share of the serve's CPUs at or above which the runner counts as busy
/// ([`busy_runner`]): half their time. Below it the serve had at least half its CPUs to itself, and a wait
/// for a CPU is more likely its own threads contending (a release that starts more threads than cores: the
/// serve's fault, to be judged).
pub const BUSY_OTHERS_SHARE: f64 = 0.5;

/// A busy runner's hold on the serve over the CPU window ([`busy_runner`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BusyRunner {
    /// The share of the serve's CPUs' time spent on other processes (their busy time less the serve's own
    /// CPU, over their whole time), 0..1.
    pub others_share: f64,
    /// The share of the window's wall time that the serve's most-waiting thread spent runnable without a
    /// CPU (its run-queue wait over the wall time), 0..1: the wall time the serve lost to the runner, at
    /// least, on the path of that thread.
    pub held_off: f64,
    /// The CPUs the serve may run on.
    pub cpus: usize,
    /// That thread's run-queue wait, ms.
    pub wait_max_ms: f64,
    /// The window's wall time, ms.
    pub wall_ms: f64,
    /// Each judged request's hold, by send-order index: the share of its wall time (send to end) that the
    /// serve thread that waited most in it spent on the run queue, 0..1. Empty in evidence without them.
    pub holds: Vec<(usize, f64)>,
}

impl BusyRunner {
    /// The hold of the request with send-order `index`: its own when read, else the window's
    /// [`BusyRunner::held_off`] (a lower bound for a serve that keeps one thread busy, since the window
    /// counts its idle gaps).
    pub fn hold_of(&self, index: usize) -> f64 {
        self.holds
            .iter()
            .find(|(i, _)| *i == index)
            .map_or(self.held_off, |(_, h)| *h)
    }

    /// `other processes kept 93 % of the serve's 2 CPU(s) busy, and its most-waiting thread waited 68730 of
    /// 81560 ms (84 %) for a CPU (run-queue wait, /proc/PID/task/TID/schedstat)`: one clause, no `;`.
    pub fn describe(&self) -> String {
        format!(
            "other processes kept {:.0} % of the serve's {} CPU(s) busy, and its most-waiting thread waited {:.0} of {:.0} ms ({:.0} %) for a CPU (run-queue wait, /proc/PID/task/TID/schedstat)",
            self.others_share * 100.0,
            self.cpus,
            self.wait_max_ms,
            self.wall_ms,
            self.held_off * 100.0
        )
    }
}

/// Whether a busy runner held the serve off its CPUs over the CPU window, from `serve.footprint.cpu.runqueue`:
/// Some when other processes took at least [`BUSY_OTHERS_SHARE`] of the time of the CPUs the serve may run
/// on and one of the serve's threads waited for a CPU while runnable. None when the runner was not busy, the
/// serve was not started by servegate, or the evidence has no run-queue figures (older evidence). A serve
/// slow for any other reason (a slow route that burns CPU, a wait on a lock, a device or the network) does
/// not wait on the run queue for it: only the run-queue wait is ever set against a figure.
pub fn busy_runner(ev: &Evidence) -> Option<BusyRunner> {
    let w = ev.run.serve.footprint.as_ref()?.cpu.as_ref()?;
    let rq = w.runqueue.as_ref()?;
    if rq.cpus_total_ms <= 0.0 || w.wall_ms <= 0.0 {
        return None;
    }
    let others_share = ((rq.cpus_busy_ms - w.cpu_ms) / rq.cpus_total_ms).clamp(0.0, 1.0);
    let held_off = (rq.wait_max_ms / w.wall_ms).clamp(0.0, 1.0);
    (others_share >= BUSY_OTHERS_SHARE && held_off > 0.0).then_some(BusyRunner {
        others_share,
        held_off,
        cpus: rq.cpus,
        wait_max_ms: rq.wait_max_ms,
        wall_ms: w.wall_ms,
        holds: rq
            .requests
            .iter()
            .filter(|h| h.wall_ms > 0.0)
            .map(|h| (h.index, (h.wait_max_ms / h.wall_ms).clamp(0.0, 1.0)))
            .collect(),
    })
}
