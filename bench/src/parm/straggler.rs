//! The straggler the ParM experiments inject into one replica's host, for real: a process frozen
//! with signals, or its network link slowed through a fault proxy.
//!
//! - [`Straggler::Freeze`]: the host hiccups — SIGSTOP for `freeze`, then SIGCONT, every
//!   `period`. Nothing it holds moves while frozen, and the pool sees it only through its
//!   outstanding jobs, so with least-outstanding routing it holds about one job per hiccup.
//! - [`Straggler::SlowLink`]: the host's link is congested for `slow` of every `period` — every
//!   byte to and from the executor is carried `delay` late (`weir_faults::proxy`), the way the
//!   paper's background network shuffles slow an instance ("Parity Models", §6.1). The replica
//!   keeps answering, slowly, so the router keeps giving it work: each job it takes in the window
//!   is late, as a query on the paper's slowed instance is.
//!
//! A [`StragglerRun`] applies one to a host until it is dropped, then leaves the host running
//! and its link clear.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir_faults::proxy::{Fault, FaultProxy};

/// What happens to the straggling host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Straggler {
    /// Frozen (SIGSTOP) for `freeze` every `period`.
    Freeze {
        /// How long each hiccup freezes the host.
        freeze: Duration,
        /// Time from one hiccup to the next.
        period: Duration,
    },
    /// Its link carries every byte `delay` late for `slow` of every `period`.
    SlowLink {
        /// Latency added each way while slow.
        delay: Duration,
        /// How long each slow spell lasts.
        slow: Duration,
        /// Time from one slow spell to the next.
        period: Duration,
    },
}

impl Straggler {
    /// Whether the host must be reached through a fault proxy.
    pub fn needs_proxy(&self) -> bool {
        matches!(self, Straggler::SlowLink { .. })
    }

    /// One line for the table's heading.
    pub fn describe(&self) -> String {
        match self {
            Straggler::Freeze { freeze, period } => format!(
                "the straggler's host frozen (SIGSTOP) {} ms every {} ms",
                freeze.as_millis(),
                period.as_millis()
            ),
            Straggler::SlowLink {
                delay,
                slow,
                period,
            } => format!(
                "the straggler's link {} ms slower each way for {} ms of every {} ms",
                delay.as_millis(),
                slow.as_millis(),
                period.as_millis()
            ),
        }
    }

    /// How long each spell lasts and the time from one to the next.
    fn timing(&self) -> (Duration, Duration) {
        match *self {
            Straggler::Freeze { freeze, period } => (freeze, period.max(freeze)),
            Straggler::SlowLink { slow, period, .. } => (slow, period.max(slow)),
        }
    }

    /// Starts it on the host `pid`, whose link (for [`Straggler::SlowLink`]) is `proxy`; the
    /// first spell begins one quiet stretch (`period − spell`) from now.
    pub(crate) fn start(&self, pid: u32, proxy: Option<Arc<FaultProxy>>) -> StragglerRun {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let kind = *self;
        let (spell, period) = self.timing();
        let thread = std::thread::spawn(move || {
            let apply = |on: bool| match kind {
                Straggler::Freeze { .. } => signal(pid, if on { "-STOP" } else { "-CONT" }),
                Straggler::SlowLink { delay, .. } => {
                    if let Some(p) = &proxy {
                        p.set(if on { Fault::Delay(delay) } else { Fault::Pass });
                    }
                }
            };
            while !flag.load(Ordering::Acquire) {
                std::thread::sleep(period.saturating_sub(spell));
                apply(true);
                std::thread::sleep(spell);
                apply(false);
            }
        });
        StragglerRun {
            stop,
            thread: Some(thread),
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status();
}

/// A straggler at work; dropping it ends the spell in progress and stops.
pub(crate) struct StragglerRun {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for StragglerRun {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
