//! Host facts: the machine (`HostInfo`), its load average, and the UTC clock as servegate writes it.

use serde::{Deserialize, Serialize};

/// Host facts at the time of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// `uname -sr` equivalent (`Linux 6.1.0`).
    pub os: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// The CPU model (`/proc/cpuinfo` `model name`, e.g. `AMD EPYC 7B13`); None where unknown or in evidence
    /// written before servegate recorded it. Part of a run's comparability key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
}

/// The CPU model named by `/proc/cpuinfo` text (the first `model name` line), trimmed.
pub fn cpu_model_of(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|rest| rest.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|v| !v.is_empty())
}

/// `/proc/loadavg` as [1, 5, 15]-minute averages; None where unavailable.
pub fn load_avg() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// Host facts of this machine.
pub fn host_info() -> HostInfo {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| cpu_model_of(&t));
    HostInfo {
        hostname,
        os: format!("{} {release}", std::env::consts::OS),
        cpus,
        cpu_model,
    }
}

/// Current UTC time as RFC 3339 (`2026-11-29T18:06:32.123Z`).
pub fn now_utc() -> String {
    let now = time::OffsetDateTime::now_utc();
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Current UTC time as a directory-safe stamp (`20261129T180632Z`).
pub fn stamp_utc() -> String {
    let now = time::OffsetDateTime::now_utc();
    let f = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    now.format(&f).unwrap_or_else(|_| "run".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_is_the_first_model_name_line() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC  7B13 64-Core Processor\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpu_model_of(text).as_deref(),
            Some("AMD EPYC 7B13 64-Core Processor")
        );
        assert_eq!(cpu_model_of("processor : 0\n"), None);
        assert_eq!(cpu_model_of("model name\t:   \n"), None);
    }
}
