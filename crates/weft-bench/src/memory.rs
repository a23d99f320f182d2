//! Process memory from `/proc/self` (Linux): resident set size now and at its peak.

/// Current resident set size in bytes (`/proc/self/statm`, second field × page size).
pub(crate) fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .unwrap_or(0);
    pages * 4096
}

/// Peak resident set size in bytes (`VmHWM` of `/proc/self/status`, the same figure as
/// `getrusage(RUSAGE_SELF).ru_maxrss`).
pub(crate) fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .and_then(|kb| kb.parse::<u64>().ok())
                })
        })
        .map_or(0, |kb| kb * 1024)
}
