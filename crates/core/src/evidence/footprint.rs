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
    /// The busy-runner witness: the serve's threads' wait for a CPU over the window and how busy its CPUs
    /// were (`analysis::footprint::busy_runner` reads it). None in evidence written before servegate read
    /// them, or where the kernel gave no figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runqueue: Option<RunQueue>,
}

/// How long the serve's threads waited for a CPU while runnable over the CPU window, and how busy the CPUs
/// it may run on were with everything else: what tells a serve held off its CPU by a busy runner from a
/// slow serve. Sources: `/proc/PID/task/TID/schedstat` (the run-queue delay, ns; Linux
/// Documentation/scheduler/sched-stats.rst), `/proc/PID/status` `Cpus_allowed_list`, `/proc/stat` `cpuN`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunQueue {
    /// Run-queue wait summed over the serve's threads read at the end of the window (one born in it counted
    /// from its birth; one gone before the end is not seen: a lower bound), ms.
    pub wait_ms: f64,
    /// The largest one thread's run-queue wait over the window, ms: the thread held off its CPU the most
    /// (a serve's decode loop, when the runner is busy).
    pub wait_max_ms: f64,
    /// Threads read at the end.
    pub threads: usize,
    /// The CPUs the serve's leader may run on (its affinity), count.
    pub cpus: usize,
    /// Those CPUs' busy time over the window (user + nice + system + irq + softirq + steal), ms summed over
    /// them, the serve's own included.
    pub cpus_busy_ms: f64,
    /// Those CPUs' whole time over the window (busy + idle + iowait), ms summed over them.
    pub cpus_total_ms: f64,
    /// Each judged request's hold, in send order: the run-queue wait of the serve thread that waited most
    /// between its send and its end. Empty where not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestHold>,
}

/// One request's hold by the run queue ([`RunQueue::requests`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestHold {
    /// The request's send-order index.
    pub index: usize,
    /// The largest one serve thread's run-queue wait from just before its send to just after its end, ms.
    pub wait_max_ms: f64,
    /// That interval's wall time, ms.
    pub wall_ms: f64,
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
