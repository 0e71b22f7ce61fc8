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

#[cfg(test)]
mod tests {
    use super::*;

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
