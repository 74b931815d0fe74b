//! Where a measurement's time went, per kind of thread of this process: CPU time and voluntary
//! context switches (each one a thread that went to sleep waiting for another: a hand-off) read
//! from Linux's `/proc/self/task/*/{stat,schedstat,status}` before and after, grouped by thread
//! name
//! (`timely:work-0` → `timely`, `ort-encoder-0` → `ort-encoder`). Divided by the requests
//! answered, they say how many hand-offs and how much CPU each request cost on each kind of
//! thread, repeatably, where wall-clock throughput on a shared machine moves by tens of per cent.

use std::collections::BTreeMap;

/// Totals of one group of threads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadTotals {
    /// CPU time (user + system), seconds.
    pub cpu_seconds: f64,
    /// Voluntary context switches.
    pub voluntary: f64,
}

/// Per thread group, the totals of its threads alive at the time of reading.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSample(BTreeMap<String, ThreadTotals>);

impl ThreadSample {
    /// This process's threads now (empty off Linux).
    pub fn read() -> ThreadSample {
        let mut groups: BTreeMap<String, ThreadTotals> = BTreeMap::new();
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return ThreadSample(groups);
        };
        for task in dir.flatten() {
            let path = task.path();
            let (Ok(stat), Ok(schedstat), Ok(status)) = (
                std::fs::read_to_string(path.join("stat")),
                std::fs::read_to_string(path.join("schedstat")),
                std::fs::read_to_string(path.join("status")),
            ) else {
                continue;
            };
            let Some(name) = parse_name(&stat) else {
                continue;
            };
            // `schedstat`: nanoseconds on the CPU, nanoseconds waiting for one, timeslices.
            let on_cpu_ns: u64 = schedstat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let voluntary = status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
            let g = groups.entry(group_of(&name)).or_default();
            g.cpu_seconds += on_cpu_ns as f64 * 1e-9;
            g.voluntary += voluntary as f64;
        }
        if let Some(ticks) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| process_ticks(&s))
        {
            groups.insert(
                ALL.to_string(),
                ThreadTotals {
                    cpu_seconds: ticks as f64 / TICKS_PER_SECOND,
                    voluntary: 0.0,
                },
            );
        }
        ThreadSample(groups)
    }

    /// Per group, what happened between `self` and `later`, divided by `requests` (threads that
    /// ended in between are not counted; ones started in between count from zero).
    pub fn per_request(
        &self,
        later: &ThreadSample,
        requests: usize,
    ) -> BTreeMap<String, ThreadTotals> {
        let n = requests.max(1) as f64;
        later
            .0
            .iter()
            .map(|(name, after)| {
                let before = self.0.get(name).copied().unwrap_or_default();
                (
                    name.clone(),
                    ThreadTotals {
                        cpu_seconds: (after.cpu_seconds - before.cpu_seconds).max(0.0) / n,
                        voluntary: (after.voluntary - before.voluntary).max(0.0) / n,
                    },
                )
            })
            .filter(|(_, t)| t.cpu_seconds > 0.0 || t.voluntary > 0.0)
            .collect()
    }
}

/// The group holding the whole process's CPU time, ended threads (closed-loop clients) included,
/// in clock ticks (10 ms each), so only long measurements resolve it.
pub const ALL: &str = "(whole process)";

/// Clock ticks per second (`USER_HZ`: 100 on every Linux this runs on).
const TICKS_PER_SECOND: f64 = 100.0;

/// The process's CPU ticks (utime + stime, the 14th and 15th fields of `/proc/self/stat`,
/// counting threads that ended).
fn process_ticks(stat: &str) -> Option<u64> {
    let rest: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    // rest[0] is field 3 (the state), so field k is rest[k - 3].
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A thread's name from its `stat` line, `pid (name) state ...` (the name may hold parentheses).
fn parse_name(stat: &str) -> Option<String> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    Some(stat.get(open + 1..close)?.to_string())
}

/// The group a thread belongs to: its name without a trailing index (`-3`, `:3`, digits).
fn group_of(name: &str) -> String {
    let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let trimmed = trimmed.trim_end_matches(['-', ':', '_']);
    if trimmed.is_empty() {
        name.to_string()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_the_name_and_names_group_without_their_index() {
        let line = "42 (ort-enc (x)-0) S 1 2 3 4 5 6 7 8 9 10 17 5 0 0 20 0";
        assert_eq!(parse_name(line), Some("ort-enc (x)-0".to_string()));
        assert_eq!(process_ticks(line), Some(22));
        assert_eq!(group_of("ort-encoder-0"), "ort-encoder");
        assert_eq!(group_of("timely:work-12"), "timely:work");
        assert_eq!(group_of("weir-bench"), "weir-bench");
        assert_eq!(group_of("42"), "42");
    }

    #[test]
    fn reading_this_process_finds_this_thread() {
        let sample = ThreadSample::read();
        if cfg!(target_os = "linux") {
            assert!(!sample.0.is_empty());
            assert_eq!(
                sample
                    .per_request(&sample, 1)
                    .values()
                    .map(|t| t.voluntary)
                    .sum::<f64>(),
                0.0
            );
        }
    }
}
