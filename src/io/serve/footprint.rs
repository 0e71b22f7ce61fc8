//! The serve's footprint, measured from outside with the kernel's own counters: which processes are the
//! serve's (its process group, the descendants of its leader, and the processes carrying the run's tag in
//! their environment: a daemon that detached), their resident high-water marks sampled from `/proc` during
//! the whole run, and their CPU time at the two ends of the judged window. The leader's `wait4` `ru_maxrss`
//! is added at its reap (`group.rs`). Values only: `run.json` `serve.footprint` (`evidence::footprint`)
//! holds them and the judge bounds them.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::evidence::footprint::{CpuWindow, Footprint, FootprintProcess, RunQueue, MIB};
use crate::io::procfs;

/// Interval between two `/proc` samples of the serve's memory: 100 ms. The high-water marks are the
/// kernel's (no peak is missed between samples); the interval bounds how short-lived a process may be and
/// still be seen, and the resolution of the sampled lower bound.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Deepest parent chain followed to find a descendant of the leader.
const MAX_DEPTH: usize = 64;

/// One process the footprint covers, as last read.
#[derive(Debug, Clone)]
struct Covered {
    pid: u32,
    name: String,
    how: &'static str,
    hwm_kib: u64,
}

#[derive(Debug, Default)]
struct State {
    /// By (pid, starttime), in the order first seen.
    covered: Vec<((u32, u64), Covered)>,
    /// Processes outside the serve already checked for the run's tag, by (pid, starttime).
    not_tagged: HashSet<(u32, u64)>,
    samples: u64,
    /// Largest sum of VmRSS at one sample, KiB.
    rss_sampled_kib: Option<u64>,
    /// Why `/proc` gave nothing, when it did not.
    unavailable: Option<String>,
}

/// A process of the serve found by one scan.
struct Found {
    pid: u32,
    stat: procfs::Stat,
    how: &'static str,
}

/// The CPU of the serve's processes at one instant ([`Sampler::cpu_mark`]).
#[derive(Debug, Clone)]
pub(crate) struct CpuMark {
    /// Sum of utime + stime + cutime + cstime over the live processes, clock ticks.
    pub(crate) ticks: u64,
    /// Processes read.
    pub(crate) pids: usize,
    /// When it was read.
    pub(crate) at: Instant,
    /// Run-queue wait of each thread of the serve's processes, ns, by tid.
    pub(crate) waits: HashMap<u32, u64>,
    /// The CPUs the leader may run on, and their `(busy, total)` ticks now; None when unreadable.
    pub(crate) cpus: Option<(usize, (u64, u64))>,
}

impl CpuMark {
    /// The CPU window from `self` to `end` over the requests `first_index..=last_index` (send order).
    pub(crate) fn window(&self, end: &CpuMark, first_index: usize, last_index: usize) -> CpuWindow {
        let tck = procfs::clk_tck();
        let ticks_ms = |t: u64| t as f64 * 1000.0 / tck as f64;
        CpuWindow {
            cpu_ms: ticks_ms(end.ticks.saturating_sub(self.ticks)),
            wall_ms: round1(end.at.saturating_duration_since(self.at).as_secs_f64() * 1000.0),
            first_index,
            last_index,
            pids_start: self.pids,
            pids_end: end.pids,
            clk_tck: tck,
            runqueue: self.runqueue(end, ticks_ms),
        }
    }

    /// The run-queue witness from `self` to `end`: the threads read at the end (one born in between counted
    /// from 0, its birth; one gone by the end is not seen, so the waits are lower bounds), and the CPUs'
    /// ticks when both ends read them with the same CPU count.
    fn runqueue(&self, end: &CpuMark, ticks_ms: impl Fn(u64) -> f64) -> Option<RunQueue> {
        let waits: Vec<u64> = end
            .waits
            .iter()
            .map(|(tid, b)| b.saturating_sub(self.waits.get(tid).copied().unwrap_or(0)))
            .collect();
        let ((n, (b0, t0)), (n1, (b1, t1))) = (self.cpus?, end.cpus?);
        if waits.is_empty() || n != n1 {
            return None;
        }
        let ns_ms = |ns: u64| round1(ns as f64 / 1e6);
        Some(RunQueue {
            requests: Vec::new(),
            wait_ms: ns_ms(waits.iter().sum()),
            wait_max_ms: ns_ms(waits.iter().copied().max().unwrap_or(0)),
            threads: waits.len(),
            cpus: n,
            cpus_busy_ms: ticks_ms(b1.saturating_sub(b0)),
            cpus_total_ms: ticks_ms(t1.saturating_sub(t0)),
        })
    }
}

/// The largest one thread's run-queue wait between two [`Sampler::thread_waits`] reads, ms; 0 when no thread
/// was read at the end. A thread first seen at the end was born in between, its whole wait counted (a
/// thread's count starts at 0); one gone by the end is not seen: a lower bound.
pub(crate) fn max_wait_ms(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> f64 {
    let ns = after
        .iter()
        .map(|(tid, b)| b.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .max()
        .unwrap_or(0);
    round1(ns as f64 / 1e6)
}

/// The sampler of one serve: a thread that reads `/proc` every [`SAMPLE_EVERY`] until stopped.
pub(crate) struct Sampler {
    leader: u32,
    tag: Option<String>,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling the serve whose leader is `leader` (also its process-group id); `tag` is the run's
    /// tag (`RUN_TAG_ENV=tag` in a process's environment), when the serve carries one. The first sample is
    /// taken before this returns.
    pub(crate) fn start(leader: u32, tag: Option<String>) -> Sampler {
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut s = Sampler {
            leader,
            tag,
            state,
            stop,
            thread: None,
        };
        s.sample();
        let (state, stop, tag) = (Arc::clone(&s.state), Arc::clone(&s.stop), s.tag.clone());
        s.thread = std::thread::Builder::new()
            .name(format!("servegate-footprint-{leader}"))
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(SAMPLE_EVERY);
                    sample_into(&state, leader, tag.as_deref());
                }
            })
            .ok();
        s
    }

    /// Takes one sample now.
    pub(crate) fn sample(&self) {
        sample_into(&self.state, self.leader, self.tag.as_deref());
    }

    /// The serve's CPU now (its processes' counters summed), or None when no process of it could be read.
    pub(crate) fn cpu_mark(&self) -> Option<CpuMark> {
        let found = {
            let mut st = lock(&self.state);
            scan(&mut st, self.leader, self.tag.as_deref())
        };
        if found.is_empty() {
            return None;
        }
        let waits = found
            .iter()
            .flat_map(|f| procfs::task_run_delays(f.pid))
            .collect();
        let cpus = procfs::cpus_allowed(self.leader)
            .and_then(|c| procfs::cpu_ticks(&c).map(|t| (c.len(), t)));
        Some(CpuMark {
            ticks: found.iter().map(|f| f.stat.cpu_ticks).sum(),
            pids: found.len(),
            at: Instant::now(),
            waits,
            cpus,
        })
    }

    /// The run-queue wait of each thread of the processes found so far (no `/proc` scan: cheap enough to
    /// read around every request), ns by tid.
    pub(crate) fn thread_waits(&self) -> HashMap<u32, u64> {
        let pids: Vec<u32> = lock(&self.state).covered.iter().map(|(k, _)| k.0).collect();
        pids.into_iter().flat_map(procfs::task_run_delays).collect()
    }

    /// Stops the thread after a last sample.
    pub(crate) fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.sample();
    }

    /// The memory footprint so far; `leader_maxrss_kib` is the leader's `wait4` `ru_maxrss` when it was
    /// reaped. The CPU window is the runner's (`cpu` None here).
    pub(crate) fn footprint(&self, leader_maxrss_kib: Option<u64>) -> Footprint {
        let st = lock(&self.state);
        // A process whose memory was never read (it exited between the scan and the read: a fork about to
        // exec, a subshell) holds nothing the figures could state.
        let covered: Vec<&Covered> = st
            .covered
            .iter()
            .map(|(_, c)| c)
            .filter(|c| c.hwm_kib > 0 || (c.pid == self.leader && leader_maxrss_kib > Some(0)))
            .collect();
        let mut processes: Vec<FootprintProcess> = covered
            .iter()
            .map(|c| {
                let mut kib = c.hwm_kib;
                if c.pid == self.leader {
                    kib = kib.max(leader_maxrss_kib.unwrap_or(0));
                }
                FootprintProcess {
                    pid: c.pid,
                    name: c.name.clone(),
                    how: c.how.to_string(),
                    hwm_mib: round1(kib as f64 * 1024.0 / MIB),
                }
            })
            .collect();
        if processes.is_empty() {
            if let Some(k) = leader_maxrss_kib.filter(|k| *k > 0) {
                processes.push(FootprintProcess {
                    pid: self.leader,
                    name: String::new(),
                    how: "leader".into(),
                    hwm_mib: round1(k as f64 * 1024.0 / MIB),
                });
            }
        }
        let total_kib: Option<u64> = (!processes.is_empty()).then(|| {
            covered
                .iter()
                .map(|c| {
                    if c.pid == self.leader {
                        c.hwm_kib.max(leader_maxrss_kib.unwrap_or(0))
                    } else {
                        c.hwm_kib
                    }
                })
                .sum::<u64>()
                .max(leader_maxrss_kib.unwrap_or(0))
        });
        // Never a 0 that reads as a figure.
        let total_kib = total_kib.filter(|k| *k > 0);
        let rss_bound = match processes.len() {
            0 => String::new(),
            1 => "exact: one process, its own high-water mark".to_string(),
            n => format!(
                "upper bound: the sum of {n} processes' own high-water marks (their peaks need not coincide); the sampled lower bound is rss_sampled_mib"
            ),
        };
        Footprint {
            rss_peak_mib: total_kib.map(|k| round1(k as f64 * 1024.0 / MIB)),
            rss_bound,
            rss_sampled_mib: st.rss_sampled_kib.map(|k| round1(k as f64 * 1024.0 / MIB)),
            leader_maxrss_mib: leader_maxrss_kib.map(|k| round1(k as f64 * 1024.0 / MIB)),
            processes,
            samples: st.samples,
            sample_every_ms: SAMPLE_EVERY.as_millis() as u64,
            rss_unavailable: if total_kib.is_none() {
                Some(st.unavailable.clone().unwrap_or_else(|| {
                    "no process of the serve could be read in /proc and the leader was not reaped by the runner".into()
                }))
            } else {
                None
            },
            cpu: None,
            cpu_unavailable: None,
            attached: None,
        }
    }
}

/// The footprint of a serve servegate did not start (a `url` serve), through the pid its `[serve] pid_file`
/// names: that process, its group (when it leads one) and its descendants, sampled as a started serve's are
/// (no `wait4` at the end: it is not servegate's child, and it is never stopped).
pub(crate) struct Attached {
    sampler: Option<Sampler>,
    /// `pid N from [serve] pid_file PATH`, or why no pid was read.
    what: String,
}

impl Attached {
    /// Reads the pid in `pid_file` (one decimal number, surrounding white space ignored) and starts sampling
    /// it; when the file cannot be read, holds no pid, or names a process that is not running, nothing is
    /// sampled and [`Attached::finish`] says why.
    pub(crate) fn start(pid_file: &std::path::Path) -> Attached {
        let at = format!("[serve] pid_file {}", pid_file.display());
        let pid = std::fs::read_to_string(pid_file)
            .map_err(|e| format!("{at} could not be read ({e})"))
            .and_then(|t| {
                let t = t.trim();
                t.parse::<u32>().ok().filter(|p| *p > 1).ok_or_else(|| {
                    format!(
                        "{at} holds no pid ({:?})",
                        t.chars().take(40).collect::<String>()
                    )
                })
            })
            .and_then(|p| match procfs::stat(p) {
                Some(_) => Ok(p),
                None => Err(format!(
                    "{at} names pid {p}, which is not running (or not readable in /proc)"
                )),
            });
        match pid {
            Ok(p) => Attached {
                sampler: Some(Sampler::start(p, None)),
                what: format!("pid {p} from {at}"),
            },
            Err(why) => Attached {
                sampler: None,
                what: why,
            },
        }
    }

    /// The serve's CPU now ([`Sampler::cpu_mark`]), None when nothing is sampled.
    pub(crate) fn cpu_mark(&self) -> Option<CpuMark> {
        self.sampler.as_ref().and_then(|s| s.cpu_mark())
    }

    /// Its threads' run-queue waits now ([`Sampler::thread_waits`]), empty when nothing is sampled.
    pub(crate) fn thread_waits(&self) -> HashMap<u32, u64> {
        self.sampler
            .as_ref()
            .map(|s| s.thread_waits())
            .unwrap_or_default()
    }

    /// Stops sampling: the memory footprint over the run, [`Footprint::attached`] saying which pid (or, with
    /// no figure, why).
    pub(crate) fn finish(mut self) -> Footprint {
        match self.sampler.as_mut() {
            Some(s) => {
                s.finish();
                Footprint {
                    attached: Some(self.what),
                    ..s.footprint(None)
                }
            }
            None => Footprint {
                rss_unavailable: Some(self.what.clone()),
                cpu_unavailable: Some(self.what.clone()),
                attached: Some(self.what),
                ..Footprint::default()
            },
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// One sample: the serve's processes, their high-water marks and the sum of their resident sizes.
fn sample_into(state: &Mutex<State>, leader: u32, tag: Option<&str>) {
    let mut st = lock(state);
    let found = scan(&mut st, leader, tag);
    st.samples += 1;
    if found.is_empty() {
        if st.covered.is_empty() && !std::path::Path::new("/proc/self/stat").exists() {
            st.unavailable = Some("/proc is not readable on this host".into());
        }
        return;
    }
    let mut rss_sum = 0u64;
    let mut any_rss = false;
    for f in found {
        if matches!(f.stat.state, 'Z' | 'X') {
            continue; // a zombie holds no memory; its high-water mark was read while it lived
        }
        let (hwm, rss) = procfs::status_kib(f.pid);
        if let Some(r) = rss {
            rss_sum += r;
            any_rss = true;
        }
        let key = (f.pid, f.stat.starttime);
        let hwm = hwm.or(rss).unwrap_or(0);
        match st.covered.iter_mut().find(|(k, _)| *k == key) {
            Some((_, c)) => {
                c.hwm_kib = c.hwm_kib.max(hwm);
                // An exec keeps the pid and changes the name (a wrapper script exec'ing the serve).
                let name = procfs::comm(f.pid);
                if !name.is_empty() {
                    c.name = name;
                }
            }
            None => {
                let name = procfs::comm(f.pid);
                st.covered.push((
                    key,
                    Covered {
                        pid: f.pid,
                        name,
                        how: f.how,
                        hwm_kib: hwm,
                    },
                ));
            }
        }
    }
    if any_rss {
        st.rss_sampled_kib = Some(st.rss_sampled_kib.unwrap_or(0).max(rss_sum));
    }
}

/// The serve's processes now (zombies included: their CPU counts until they are reaped): the leader's
/// group, the leader's descendants by parent chain, and the processes carrying the run's tag (checked once
/// per process, by pid and start time).
fn scan(st: &mut State, leader: u32, tag: Option<&str>) -> Vec<Found> {
    let all: Vec<(u32, procfs::Stat)> = procfs::pids()
        .filter_map(|p| procfs::stat(p).map(|s| (p, s)))
        .collect();
    let parent: HashMap<u32, u32> = all.iter().map(|(p, s)| (*p, s.ppid)).collect();
    let descends = |mut p: u32| {
        for _ in 0..MAX_DEPTH {
            match parent.get(&p) {
                Some(&pp) if pp == leader => return true,
                Some(&pp) if pp > 1 => p = pp,
                _ => return false,
            }
        }
        false
    };
    let needle = tag.map(|t| format!("{}={t}", crate::io::signals::RUN_TAG_ENV));
    let me = std::process::id();
    let mut out = Vec::new();
    for (pid, stat) in all {
        if pid == me {
            continue;
        }
        let key = (pid, stat.starttime);
        let known = st
            .covered
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.how);
        let how = if pid == leader {
            Some("leader")
        } else if stat.pgrp == leader {
            Some("group")
        } else if descends(pid) {
            Some("descendant")
        } else if known.is_some() {
            known
        } else if st.not_tagged.contains(&key) {
            None
        } else if needle
            .as_deref()
            .is_some_and(|n| procfs::environ_has(pid, n))
        {
            Some("tagged")
        } else {
            st.not_tagged.insert(key);
            None
        };
        if let Some(how) = how {
            out.push(Found { pid, stat, how });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that allocates and touches 64 MiB is read at 64 MiB or more (its own high-water mark), and its
    /// CPU is counted; the runner (this test) is never counted as the serve.
    #[test]
    fn a_child_group_that_allocates_is_read_by_its_high_water_mark() {
        use std::os::unix::process::CommandExt;
        if !std::path::Path::new("/proc/self/status").exists() {
            return;
        }
        // python3 is on every runner servegate's tests use; skip quietly where it is not.
        let Ok(mut child) = std::process::Command::new("python3")
            .args([
                "-c",
                "b = b'\\x01' * (64 * 1024 * 1024)\nimport time\nx = 0\nt = time.time()\nwhile time.time() - t < 0.3: x += 1\nprint('ready', flush=True)\ntime.sleep(30)",
            ])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
        else {
            return;
        };
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).unwrap();
        let mut s = Sampler::start(child.id(), None);
        let mark = s.cpu_mark().unwrap();
        assert_eq!(mark.pids, 1);
        // The 0.3 s spin: at least 0.1 s of CPU whatever the load (a busy runner slows it, never shortens it).
        assert!(mark.ticks * 1000 / procfs::clk_tck() >= 100, "{mark:?}");
        s.finish();
        let fp = s.footprint(None);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(fp.processes.len(), 1, "{fp:?}");
        assert_eq!(fp.processes[0].how, "leader");
        let peak = fp.rss_peak_mib.unwrap();
        // 64 MiB of touched buffer plus the interpreter (~10 MiB); well under 200 MiB.
        assert!((64.0..200.0).contains(&peak), "{fp:?}");
        assert!(fp.rss_sampled_mib.unwrap() <= peak, "{fp:?}");
        assert!(fp.rss_bound.starts_with("exact"), "{fp:?}");
        assert!(fp.samples >= 2);
    }
}
