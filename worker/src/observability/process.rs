//! The process metrics every Prometheus client library exports (`process_*`,
//! the names Prometheus' own documentation and dashboards use), read from
//! `/proc/self` when `/metrics` is scraped: always current, no thread to
//! keep them so, and fractional CPU seconds (the `metrics` crate's counters
//! are integers). Linux only: elsewhere, or when a file cannot be read,
//! the metric is left out rather than shown wrong.

use std::fmt::Write as _;

/// Clock ticks per second of the times in `/proc/<pid>/stat`: the kernel
/// reports them in `USER_HZ`, which is 100 on every architecture Linux
/// exposes to user space (`sysconf(_SC_CLK_TCK)`, which this crate cannot
/// call without `unsafe`).
const TICKS_PER_SECOND: f64 = 100.0;

/// Name, kind and help of every process family (tests and docs read it).
pub const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
    ),
    (
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
    ),
    (
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
    ),
    (
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
    ),
    (
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
    ),
    (
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    ),
    (
        "process_threads",
        "gauge",
        "Number of OS threads in the process.",
    ),
];

/// The process metrics in the Prometheus text format, each family that
/// could be read.
pub fn render() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| Stat::parse(&s));
    let boot_time = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| boot_time(&s));
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| resident_bytes(&s));
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|entries| entries.count() as f64);
    let max_fds = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| max_open_files(&s));
    let values: [(&str, Option<f64>); 7] = [
        (
            "process_cpu_seconds_total",
            stat.as_ref()
                .map(|s| (s.utime + s.stime) / TICKS_PER_SECOND),
        ),
        ("process_resident_memory_bytes", rss),
        (
            "process_virtual_memory_bytes",
            stat.as_ref().map(|s| s.vsize),
        ),
        ("process_open_fds", open_fds),
        ("process_max_fds", max_fds),
        (
            "process_start_time_seconds",
            stat.as_ref()
                .zip(boot_time)
                .map(|(s, boot)| boot + s.start_ticks / TICKS_PER_SECOND),
        ),
        ("process_threads", stat.as_ref().map(|s| s.threads)),
    ];
    let mut out = String::new();
    for (name, value) in values {
        let (Some(value), Some((_, kind, help))) =
            (value, FAMILIES.iter().find(|(n, _, _)| *n == name))
        else {
            continue;
        };
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n\n"
        );
    }
    out
}

/// What `/proc/self/stat` tells.
#[derive(Debug, PartialEq)]
struct Stat {
    utime: f64,
    stime: f64,
    threads: f64,
    start_ticks: f64,
    vsize: f64,
}

impl Stat {
    /// Fields by their number in proc(5); the second, the command name in
    /// parentheses, may itself hold spaces and parentheses, so counting
    /// starts after the last `)`.
    fn parse(text: &str) -> Option<Stat> {
        let after_name = &text[text.rfind(')')? + 1..];
        // Field 3 (state) is the first after the name.
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse().ok() };
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            threads: field(20)?,
            start_ticks: field(22)?,
            vsize: field(23)?,
        })
    }
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
fn boot_time(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// `VmRSS` of `/proc/self/status`, in bytes.
fn resident_bytes(text: &str) -> Option<f64> {
    let kib: f64 = text
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024.0)
}

/// The soft limit of "Max open files" in `/proc/self/limits`.
fn max_open_files(text: &str) -> Option<f64> {
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?;
    let soft = line.split_whitespace().next()?;
    if soft == "unlimited" {
        return None;
    }
    soft.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_is_read_past_a_command_name_with_spaces() {
        let line = "4242 (tokio (rt) x) S 1 4242 4242 0 -1 4194560 2280 0 0 0 \
                    150 25 0 0 20 0 9 0 123456 987654321 3000 18446744073709551615";
        let stat = Stat::parse(line).unwrap();
        assert_eq!(
            stat,
            Stat {
                utime: 150.0,
                stime: 25.0,
                threads: 9.0,
                start_ticks: 123_456.0,
                vsize: 987_654_321.0,
            }
        );
        assert_eq!(Stat::parse("42 (cut"), None);
    }

    #[test]
    fn status_limits_and_boot_time_are_read() {
        assert_eq!(
            resident_bytes("Name:\tx\nVmRSS:\t   2048 kB\n"),
            Some(2_097_152.0)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(max_open_files(limits), Some(1024.0));
        assert_eq!(boot_time("cpu 1 2 3\nbtime 1700000000\n"), Some(1.7e9));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_described_in_the_text_format() {
        let text = render();
        for (name, kind, _) in FAMILIES {
            assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{text}");
        }
        let value = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {text}"))
        };
        assert!(value("process_resident_memory_bytes") > 0.0);
        assert!(value("process_open_fds") >= 1.0);
        assert!(value("process_start_time_seconds") > 1.5e9);
    }
}
