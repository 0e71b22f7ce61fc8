//! `run.json` `serve.footprint`: what the runner measured of the serve's processes (the kernel's own
//! counters, read by `servegate::io::serve`): peak resident memory over the serve's processes and the CPU
//! they spent over the judged requests. Values only; the judge divides and bounds them
//! (`judge::footprint`), so a recorded run is re-judged with no process in sight. docs/metrics.md defines
//! each figure; absent in older evidence and for a `url` serve (not started by servegate).

use serde::{Deserialize, Serialize};

/// Bytes in one MiB (2^20).
pub const MIB: f64 = 1_048_576.0;

/// `run.json` `serve.footprint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Footprint {
    /// The stated peak resident memory, MiB: the sum over [`Footprint::processes`] of each one's own
    /// high-water mark ([`FootprintProcess::hwm_mib`]). An upper bound of the processes' simultaneous peak
    /// (their peaks need not coincide), exact for a serve of one process. None when no process could be
    /// read (then [`Footprint::rss_unavailable`] says why).
    pub rss_peak_mib: Option<f64>,
    /// Which bound `rss_peak_mib` states, in words (`upper bound: ...`, `exact: one process`).
    pub rss_bound: String,
    /// The largest sum of the processes' current resident sizes (`VmRSS`) seen at one sample, MiB: a lower
    /// bound of the peak (the true peak may fall between samples).
    pub rss_sampled_mib: Option<f64>,
    /// The leader's `ru_maxrss` as `wait4` gave it when the leader was reaped, MiB (the kernel's high-water
    /// mark of the leader and of the descendants it reaped); None when it was not reaped by the runner.
    pub leader_maxrss_mib: Option<f64>,
    /// Every process the figures cover, in the order first seen.
    pub processes: Vec<FootprintProcess>,
    /// `/proc` samples taken during the run.
    pub samples: u64,
    /// The interval between samples, ms.
    pub sample_every_ms: u64,
    /// Why there is no memory figure (`/proc` could not be read, ...), or None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_unavailable: Option<String>,
    /// The serve's CPU over the judged requests, or None (then [`Footprint::cpu_unavailable`] says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuWindow>,
    /// Why there is no CPU window, or None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_unavailable: Option<String>,
    /// For a `url` serve (not started by servegate) measured through its `[serve] pid_file`: which pid, from
    /// which file (`pid 4242 from [serve] pid_file /run/serve.pid`), or why none was measured (then the
    /// figures are absent and `rss_unavailable` / `cpu_unavailable` say the same). None for a serve servegate
    /// started; outside text (the file's content) escaped wherever printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<String>,
}

/// One process a footprint covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FootprintProcess {
    /// Its pid.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`, at most 15 bytes; outside text, escaped wherever printed).
    pub name: String,
    /// How it belongs to the serve: `leader`, `group` (in the leader's process group), `descendant` (a
    /// child of a covered process outside the group) or `tagged` (carries the run's tag in its environment,
    /// a detached daemon).
    pub how: String,
    /// Its resident high-water mark, MiB: the last `VmHWM` read (for the leader, at least its `ru_maxrss`).
    pub hwm_mib: f64,
}

/// The serve's CPU time over the judged window: from just before the first judged request was sent to just
/// after the last one ended (warmup requests before it, contract checks after it, excluded).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuWindow {
    /// User + system CPU of the covered processes over the window, ms: at each end, the sum over the live
    /// processes of `/proc/PID/stat` utime + stime + cutime + cstime (children reaped by a covered process
    /// included), the end's minus the start's.
    pub cpu_ms: f64,
    /// The window's wall time, ms (cpu_ms / wall_ms = cores busy on average).
    pub wall_ms: f64,
    /// Send-order index of the first request in the window.
    pub first_index: usize,
    /// Send-order index of the last request in the window.
    pub last_index: usize,
    /// Processes read at the start.
    pub pids_start: usize,
    /// Processes read at the end.
    pub pids_end: usize,
    /// The kernel's clock ticks per second the counters are in (`sysconf(_SC_CLK_TCK)`, usually 100: a
    /// resolution of 10 ms per process).
    pub clk_tck: u64,
}

/// `run.json` `serve.samples[]`: one `[[sample]]` sampler's series over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleSeries {
    /// The sampler's name (`[[sample]] name`).
    pub name: String,
    /// The unit its values are in, as the gate names it.
    pub unit: String,
    /// ms between samples.
    pub every_ms: u64,
    /// `(ms since the sampler started, value)` of each sample that gave a number, in order.
    pub values: Vec<(f64, f64)>,
    /// Samples attempted.
    pub taken: u64,
    /// Samples that gave no value (`taken − values`).
    pub failed: u64,
    /// Why samples gave no value, each distinct reason once with its count (`timed out after 2000 ms (3)`),
    /// at most 8; outside text, escaped wherever printed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}
