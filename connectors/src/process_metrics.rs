//! The process's own metrics under Prometheus's standard names, read from `/proc` at scrape time:
//! resident memory (`process_resident_memory_bytes`), CPU time (`process_cpu_seconds_total`),
//! open file descriptors (`process_open_fds`) and threads (`process_threads`), as every
//! Prometheus client library exports them, so the usual dashboards and alerts work unchanged.
//!
//! `/proc/self/stat` gives CPU ticks, threads and resident pages in one read (its second field,
//! the command name, is in parentheses and may hold spaces, so fields are counted from the last
//! `)`); `/proc/self/fd` is counted. Each read is capped. Where `/proc` is missing (not Linux) or
//! unreadable, the families are left out and the rest of `/metrics` is written as usual.

use std::fmt;
use std::io::Read;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::metrics::{
    counter, gauge, Collector, PROCESS_CPU_SECONDS_TOTAL, PROCESS_OPEN_FDS,
    PROCESS_RESIDENT_MEMORY_BYTES, PROCESS_THREADS,
};

use crate::http::metrics::{source, MetricsSource};

/// Bytes of `/proc/self/stat` read, at most (it is a few hundred).
const MAX_STAT_BYTES: u64 = 4096;
/// File descriptors counted, at most (far above any `ulimit -n` weir runs with).
const MAX_FDS_COUNTED: usize = 1 << 20;

/// What one scrape reads.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: u64,
    threads: u64,
}

/// A [`MetricsSource`] of the process's metrics.
pub fn process_source() -> MetricsSource {
    source(ProcessMetrics)
}

#[derive(Debug)]
struct ProcessMetrics;

impl Collector for ProcessMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        const NO_LABELS: [(&str, &str); 0] = [];
        if let Some(s) = read_stat() {
            gauge(
                &mut encoder,
                PROCESS_RESIDENT_MEMORY_BYTES,
                "Resident memory size in bytes.",
                [(NO_LABELS, s.resident_bytes)],
            )?;
            counter(
                &mut encoder,
                PROCESS_CPU_SECONDS_TOTAL,
                "Total user and system CPU time spent in seconds.",
                [(NO_LABELS, s.cpu_seconds)],
            )?;
            gauge(
                &mut encoder,
                PROCESS_THREADS,
                "Number of OS threads in the process.",
                [(NO_LABELS, s.threads)],
            )?;
        }
        if let Some(n) = open_fds() {
            gauge(
                &mut encoder,
                PROCESS_OPEN_FDS,
                "Number of open file descriptors.",
                [(NO_LABELS, n as u64)],
            )?;
        }
        Ok(())
    }
}

/// The system's clock ticks per second and page size.
fn ticks_and_page() -> Option<(f64, u64)> {
    // SAFETY: sysconf only reads configuration values.
    let (ticks, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (ticks > 0 && page > 0).then_some((ticks as f64, page as u64))
}

fn read_stat() -> Option<Sample> {
    let mut text = String::new();
    std::fs::File::open("/proc/self/stat")
        .ok()?
        .take(MAX_STAT_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    let (ticks, page) = ticks_and_page()?;
    parse_stat(&text, ticks, page)
}

/// Reads `/proc/<pid>/stat` text: utime and stime (fields 14 and 15, in ticks), num_threads (20)
/// and rss (24, in pages), counting fields from 1 as proc(5) does.
fn parse_stat(text: &str, ticks_per_second: f64, page_bytes: u64) -> Option<Sample> {
    let after_name = &text[text.rfind(')')? + 1..];
    // `after_name` starts at field 3 (the state).
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = field(14)?.checked_add(field(15)?)?;
    Some(Sample {
        cpu_seconds: ticks as f64 / ticks_per_second,
        resident_bytes: field(24)?.checked_mul(page_bytes)?,
        threads: field(20)?,
    })
}

fn open_fds() -> Option<usize> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory's own descriptor is counted, as Prometheus's clients count it.
    Some(entries.take(MAX_FDS_COUNTED).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_past_a_name_with_spaces_and_parentheses() {
        let text = "4242 (weir (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 \
                    12345 1000000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(text, 100.0, 4096).unwrap();
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.threads, 7);
        assert_eq!(s.resident_bytes, 300 * 4096);
        assert_eq!(parse_stat("garbage", 100.0, 4096), None);
    }

    #[test]
    fn this_process_shows_memory_threads_and_descriptors() {
        let mut out = String::new();
        process_source()(&mut out);
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        for name in [
            "process_resident_memory_bytes ",
            "process_cpu_seconds_total ",
            "process_threads ",
            "process_open_fds ",
        ] {
            let value: f64 = out
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name}: {out}"));
            assert!(value >= 0.0, "{name}{value}");
        }
        assert!(
            out.contains("# TYPE process_cpu_seconds_total counter\n"),
            "{out}"
        );
    }
}
