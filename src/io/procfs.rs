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

#[cfg(test)]
mod tests {
    #[test]
    fn lists_this_process() {
        if std::path::Path::new("/proc/self").exists() {
            assert!(super::pids().any(|p| p == std::process::id()));
        }
    }
}
