//! The one scan of `/proc`: the pids of the processes this user can see. Linux only; empty elsewhere or when
//! `/proc` cannot be read.

/// The pids listed in `/proc` (numeric entries), in directory order.
pub(crate) fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
}

/// `/proc/PID/NAME` (`stat`, `environ`, `fd`, ...).
pub(crate) fn path(pid: u32, name: &str) -> std::path::PathBuf {
    std::path::Path::new("/proc")
        .join(pid.to_string())
        .join(name)
}

/// The fields of one `/proc/PID/stat` line a footprint reads (proc(5)); CPU times in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// State letter (`R`, `S`, `Z`, ...).
    pub(crate) state: char,
    /// Parent pid.
    pub(crate) ppid: u32,
    /// Process group id.
    pub(crate) pgrp: u32,
    /// utime + stime + cutime + cstime: its own CPU and that of the children it reaped, ticks.
    pub(crate) cpu_ticks: u64,
    /// Start time after boot, ticks: with the pid, the process's identity (a pid is reused).
    pub(crate) starttime: u64,
}

/// [`Stat`] from a `/proc/PID/stat` line, or None for a line that is not one. The command name (field 2) may
/// hold spaces and parentheses, so fields are counted after the last `)`.
pub(crate) fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state): field k is f[k - 3].
    let num = |k: usize| f.get(k - 3).and_then(|x| x.parse::<u64>().ok());
    let cpu_ticks = [14, 15, 16, 17]
        .iter()
        .try_fold(0u64, |acc, &k| Some(acc.saturating_add(num(k)?)))?;
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: u32::try_from(num(4)?).ok()?,
        pgrp: u32::try_from(num(5)?).ok()?,
        cpu_ticks,
        starttime: num(22)?,
    })
}

/// `/proc/PID/stat`, parsed; None when the process is gone or the line unreadable.
pub(crate) fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(path(pid, "stat")).ok()?)
}

/// `(VmHWM, VmRSS)` in KiB from the text of a `/proc/PID/status` (each None when absent: a zombie or a
/// kernel thread has neither).
pub(crate) fn parse_status_kib(status: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let v = l.strip_prefix(name)?.strip_prefix(':')?;
            v.split_whitespace().next()?.parse::<u64>().ok()
        })
    };
    (field("VmHWM"), field("VmRSS"))
}

/// `(VmHWM, VmRSS)` of `pid` in KiB ([`parse_status_kib`]); `(None, None)` when it cannot be read.
pub(crate) fn status_kib(pid: u32) -> (Option<u64>, Option<u64>) {
    std::fs::read_to_string(path(pid, "status"))
        .map(|s| parse_status_kib(&s))
        .unwrap_or((None, None))
}

/// `/proc/PID/comm` without its newline (empty when unreadable).
pub(crate) fn comm(pid: u32) -> String {
    std::fs::read_to_string(path(pid, "comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

/// Whether `/proc/PID/environ` holds `needle` (`NAME=value`) as one entry; false when unreadable (another
/// user's process).
pub(crate) fn environ_has(pid: u32, needle: &str) -> bool {
    std::fs::read(path(pid, "environ"))
        .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        .unwrap_or(false)
}

/// The kernel's clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of [`Stat::cpu_ticks`]; 100 when
/// it cannot be read.
pub(crate) fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// The run-queue wait of one task from the text of its `/proc/PID/task/TID/schedstat`: the second of its
/// three numbers (on-CPU time, time spent runnable but waiting for a CPU, timeslices; ns, since the task
/// started: Documentation/scheduler/sched-stats.rst), or None for text that is not one.
pub(crate) fn parse_schedstat_run_delay_ns(text: &str) -> Option<u64> {
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() != 3 {
        return None;
    }
    f[1].parse().ok()
}

/// `(tid, run-queue wait ns)` of every thread of `pid` that could be read ([`parse_schedstat_run_delay_ns`]);
/// empty when the process is gone or the kernel keeps no schedstats.
pub(crate) fn task_run_delays(pid: u32) -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir(path(pid, "task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let tid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(path(pid, &format!("task/{tid}/schedstat"))).ok()?;
        Some((tid, parse_schedstat_run_delay_ns(&text)?))
    })
    .collect()
}

/// The CPUs a process may run on, from the text of its `/proc/PID/status` (`Cpus_allowed_list: 0-3,6`),
/// or None when the line is absent or not a list.
pub(crate) fn parse_cpus_allowed(status: &str) -> Option<Vec<usize>> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// [`parse_cpus_allowed`] of `/proc/PID/status`.
pub(crate) fn cpus_allowed(pid: u32) -> Option<Vec<usize>> {
    parse_cpus_allowed(&std::fs::read_to_string(path(pid, "status")).ok()?)
}

/// `(busy, total)` clock ticks of the CPUs in `cpus` from the text of `/proc/stat` (proc(5): its `cpuN`
/// lines; busy = user + nice + system + irq + softirq + steal, total = busy + idle + iowait; guest time is
/// already in user). None when a CPU of the list has no line.
pub(crate) fn parse_cpu_ticks(proc_stat: &str, cpus: &[usize]) -> Option<(u64, u64)> {
    let mut busy = 0u64;
    let mut total = 0u64;
    for cpu in cpus {
        let name = format!("cpu{cpu}");
        let line = proc_stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().ok())
            .collect::<Option<Vec<u64>>>()?;
        if f.len() < 8 {
            return None;
        }
        let b = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
        busy += b;
        total += b + f[3] + f[4];
    }
    Some((busy, total))
}

/// [`parse_cpu_ticks`] of `/proc/stat`.
pub(crate) fn cpu_ticks(cpus: &[usize]) -> Option<(u64, u64)> {
    parse_cpu_ticks(&std::fs::read_to_string("/proc/stat").ok()?, cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_cpus_allowed_and_proc_stat_are_parsed_and_refused_when_foreign() {
        assert_eq!(parse_schedstat_run_delay_ns("123 456 7\n"), Some(456));
        assert_eq!(parse_schedstat_run_delay_ns("123 456"), None);
        assert_eq!(parse_schedstat_run_delay_ns("a b c"), None);
        let st = "Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-2,5\n";
        assert_eq!(parse_cpus_allowed(st), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpus_allowed("Cpus_allowed_list:\t3-1\n"), None);
        assert_eq!(parse_cpus_allowed("Name:\tx\n"), None);
        let stat =
            "cpu  10 0 5 100 1 0 0 0 0 0\ncpu0 4 1 2 50 1 1 1 1 0 0\ncpu1 6 0 3 50 0 0 0 0 0 0\n";
        // cpu0: busy 4+1+2+1+1+1 = 10, total 10 + 50 + 1; cpu1: busy 9, total 59.
        assert_eq!(parse_cpu_ticks(stat, &[0]), Some((10, 61)));
        assert_eq!(parse_cpu_ticks(stat, &[0, 1]), Some((19, 120)));
        assert_eq!(parse_cpu_ticks(stat, &[2]), None);
        if std::path::Path::new("/proc/self/task").exists() {
            let me = std::process::id();
            assert!(!task_run_delays(me).is_empty());
            let cpus = cpus_allowed(me).unwrap();
            let (busy, total) = cpu_ticks(&cpus).unwrap();
            assert!(busy <= total && total > 0);
        }
    }

    #[test]
    fn a_stat_line_with_a_hostile_name_is_parsed_after_the_last_parenthesis() {
        let line = "4242 (evil) S 1 2 (x)) R 7 4242 4242 0 -1 4194560 100 0 0 0 150 25 3 2 20 0 4 0 987654 1000000 200";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'R',
                ppid: 7,
                pgrp: 4242,
                cpu_ticks: 180,
                starttime: 987654
            }
        );
        assert_eq!(parse_stat("4242 (cut) S 1"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn status_fields_in_kib() {
        let st = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    5120 kB\nVmRSS:\t    4096 kB\n";
        assert_eq!(parse_status_kib(st), (Some(5120), Some(4096)));
        assert_eq!(parse_status_kib("Name:\tzombie\n"), (None, None));
        let (hwm, rss) = status_kib(std::process::id());
        if std::path::Path::new("/proc/self").exists() {
            assert!(hwm.unwrap() >= rss.unwrap() && rss.unwrap() > 0);
        }
        assert!(stat(std::process::id()).is_some_and(|s| s.starttime > 0));
    }

    #[test]
    fn lists_this_process() {
        if std::path::Path::new("/proc/self").exists() {
            assert!(pids().any(|p| p == std::process::id()));
        }
    }
}
