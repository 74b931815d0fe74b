//! What the machine and a graph's executors did during a measurement: ONNX Runtime calls (count,
//! rows, time, from the executors' load counters) and the machine's busy and steal shares of CPU
//! time (Linux `/proc/stat`). Benchmarks print them beside their timings, so that a slow set-up can
//! be told apart: slower calls, a busier machine, or a hypervisor that took the cores.

use weir::RunningGraph;

/// What a measurement ran under: the executors' ONNX Runtime calls and the whole machine's CPU time,
/// so that a set-up that was slow because its calls were slow, or because a virtual machine's host
/// took the cores (steal), can be told from one that decided badly.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Conditions {
    /// ONNX Runtime calls made.
    pub calls: u64,
    /// Rows they served.
    pub rows: u64,
    /// Their total duration, seconds.
    pub call_seconds: f64,
    /// Share of the machine's CPU time that was busy (not idle or waiting), `None` off Linux.
    pub busy: Option<f64>,
    /// Share of the machine's CPU time the hypervisor gave to others (steal), `None` off Linux.
    pub steal: Option<f64>,
}

impl Conditions {
    /// Mean duration of a call, ms.
    pub fn ms_per_call(&self) -> f64 {
        if self.calls == 0 {
            f64::NAN
        } else {
            self.call_seconds * 1e3 / self.calls as f64
        }
    }

    /// Mean rows per call.
    pub fn rows_per_call(&self) -> f64 {
        if self.calls == 0 {
            f64::NAN
        } else {
            self.rows as f64 / self.calls as f64
        }
    }
}

/// The counters at the start of a measurement; [`Probe::finish`] turns them into [`Conditions`].
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    calls: (u64, u64, f64),
    cpu: Option<CpuTicks>,
}

impl Probe {
    /// Reads the counters of `graph`'s executors and of the machine now.
    pub fn start(graph: &RunningGraph) -> Probe {
        Probe {
            calls: executor_calls(graph),
            cpu: CpuTicks::read(),
        }
    }

    /// What happened since [`Probe::start`].
    pub fn finish(self, graph: &RunningGraph) -> Conditions {
        self.until(Probe::start(graph))
    }

    /// What happened between this probe and the `later` one (of the same graph).
    pub fn until(self, later: Probe) -> Conditions {
        let cpu = self.cpu.zip(later.cpu).and_then(|(a, b)| a.shares(b));
        let after = later.calls;
        Conditions {
            calls: after.0.saturating_sub(self.calls.0),
            rows: after.1.saturating_sub(self.calls.1),
            call_seconds: (after.2 - self.calls.2).max(0.0),
            busy: cpu.map(|c| c.0),
            steal: cpu.map(|c| c.1),
        }
    }
}

/// The machine's CPU time counters (`/proc/stat`'s `cpu` line, in clock ticks): busy, steal, total.
#[derive(Debug, Clone, Copy, PartialEq)]
struct CpuTicks {
    busy: u64,
    steal: u64,
    total: u64,
}

impl CpuTicks {
    /// The counters now; `None` where `/proc/stat` cannot be read (not Linux).
    fn read() -> Option<CpuTicks> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        parse_cpu_line(text.lines().next()?)
    }

    /// Busy and steal shares of the time between `self` and `later`.
    fn shares(self, later: CpuTicks) -> Option<(f64, f64)> {
        let total = later.total.checked_sub(self.total).filter(|t| *t > 0)? as f64;
        let busy = later.busy.saturating_sub(self.busy) as f64;
        let steal = later.steal.saturating_sub(self.steal) as f64;
        Some((busy / total, steal / total))
    }
}

/// Parses `cpu  user nice system idle iowait irq softirq steal …`: busy is everything but idle,
/// iowait and steal.
fn parse_cpu_line(line: &str) -> Option<CpuTicks> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let (idle, iowait, steal) = (at(3), at(4), at(7));
    // guest and guest_nice (8, 9) are already counted in user and nice.
    let total: u64 = v.iter().take(8).sum();
    Some(CpuTicks {
        busy: total - idle - iowait - steal,
        steal,
        total,
    })
}

/// The graph's executor calls so far: count, rows, seconds.
fn executor_calls(graph: &RunningGraph) -> (u64, u64, f64) {
    graph
        .executor_stats()
        .iter()
        .fold((0, 0, 0.0), |(c, r, s), (_, x)| {
            (c + x.runs, r + x.rows, s + x.busy.as_secs_f64())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_shares_come_from_the_proc_stat_cpu_line() {
        let a = parse_cpu_line("cpu  100 0 50 800 10 0 0 40 0 0").unwrap();
        assert_eq!((a.busy, a.steal, a.total), (150, 40, 1000));
        let b = parse_cpu_line("cpu  200 0 100 1500 10 0 0 190 5 0").unwrap();
        assert_eq!(a.shares(b), Some((0.15, 0.15)));
        assert_eq!(a.shares(a), None);
        assert_eq!(parse_cpu_line("cpu0 1 2 3"), None);
        assert_eq!(parse_cpu_line("cpu  1 x 3"), None);
        let c = Conditions {
            calls: 4,
            rows: 6,
            call_seconds: 0.02,
            ..Conditions::default()
        };
        assert_eq!((c.ms_per_call(), c.rows_per_call()), (5.0, 1.5));
        assert!(Conditions::default().ms_per_call().is_nan());
    }
}
