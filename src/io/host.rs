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
    HostInfo {
        hostname,
        os: format!("{} {release}", std::env::consts::OS),
        cpus,
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
