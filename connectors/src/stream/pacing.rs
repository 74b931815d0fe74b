//! Pacing a JSON-lines run: its counts ([`Progress`]) and the throttle that keeps offline work
//! out of online work's way (INFaaS §3.2 and §4.2: the
//! monitoring daemon pauses offline jobs while the worker's utilisation is above 40 %, and
//! resumes them when it falls).
//!
//! A [`Throttle`] is closed while any of its [`PauseSignal`]s gives a reason; a job waits at the
//! throttle before reading each request, so a paused job holds no request in flight beyond those
//! it had already started. The built-in signal is the machine's CPU utilisation
//! ([`CpuUtilisation`]), sampled from `/proc/stat` over a fixed window: every core's busy time
//! over its total, which counts online requests, offline ones and anything else the machine runs.
//! Offline work alone can push utilisation past the threshold; the job then pauses until the
//! window after shows it below, so offline work takes roughly the share the threshold leaves
//! rather than none. Until the first window has ended the signal pauses too ("measuring"): a job
//! submitted right after start waits one window rather than running unmeasured.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a paused job looks at the throttle again.
const RECHECK_EVERY: Duration = Duration::from_millis(100);

/// A reason to pause offline work, or none.
pub trait PauseSignal: Send + Sync {
    /// Why offline work should wait now, if it should.
    fn pause_reason(&self) -> Option<String>;
}

/// The machine's CPU utilisation over the last sampling window, kept fresh by a task.
pub struct CpuUtilisation {
    /// Busy fraction (0–1) as `f64` bits; `NaN` before the first window ends.
    busy: AtomicU64,
    /// `/proc/stat` can be read here (else the signal never pauses).
    available: AtomicBool,
    /// Above this busy fraction the signal pauses offline work.
    threshold: f64,
}

impl CpuUtilisation {
    /// Starts sampling `/proc/stat` every `window` on the current tokio runtime; the signal pauses
    /// work while the busy fraction is above `threshold`. Where `/proc/stat` cannot be read, the
    /// signal never pauses (and says so once in the log).
    pub fn spawn(window: Duration, threshold: f64) -> Arc<Self> {
        let me = Arc::new(CpuUtilisation {
            busy: AtomicU64::new(f64::NAN.to_bits()),
            available: AtomicBool::new(true),
            threshold,
        });
        let weak = Arc::downgrade(&me);
        tokio::spawn(async move {
            let mut last = match read_cpu_times() {
                Some(t) => t,
                None => {
                    tracing::warn!("Cannot read /proc/stat: offline work is not throttled by CPU.");
                    if let Some(me) = weak.upgrade() {
                        me.available.store(false, Ordering::Relaxed);
                    }
                    return;
                }
            };
            loop {
                tokio::time::sleep(window).await;
                let Some(me) = weak.upgrade() else { return };
                let Some(now) = read_cpu_times() else {
                    me.available.store(false, Ordering::Relaxed);
                    return;
                };
                if let Some(busy) = busy_fraction(last, now) {
                    me.busy.store(busy.to_bits(), Ordering::Relaxed);
                }
                last = now;
            }
        });
        me
    }

    /// The busy fraction of the last window, if one has ended.
    pub fn busy(&self) -> Option<f64> {
        let b = f64::from_bits(self.busy.load(Ordering::Relaxed));
        b.is_finite().then_some(b)
    }
}

impl PauseSignal for CpuUtilisation {
    fn pause_reason(&self) -> Option<String> {
        if !self.available.load(Ordering::Relaxed) {
            return None;
        }
        let Some(busy) = self.busy() else {
            return Some("measuring CPU utilisation".to_string());
        };
        (busy > self.threshold).then(|| {
            format!(
                "CPU utilisation {:.0}% is above {:.0}%",
                busy * 100.0,
                self.threshold * 100.0
            )
        })
    }
}

/// Total and idle jiffies of all cores, from the first line of `/proc/stat`.
fn read_cpu_times() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

/// `(total, idle)` of a `cpu  user nice system idle iowait irq softirq steal …` line; idle
/// counts `idle` and `iowait`.
fn parse_cpu_line(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let values: Vec<u64> = fields
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if values.len() < 4 {
        return None;
    }
    let total = values.iter().try_fold(0u64, |a, v| a.checked_add(*v))?;
    let idle = values[3].checked_add(values.get(4).copied().unwrap_or(0))?;
    Some((total, idle))
}

/// Busy fraction between two samples; `None` when no time passed (or the counters went back).
fn busy_fraction(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let total = after.0.checked_sub(before.0)?;
    let idle = after.1.checked_sub(before.1)?;
    if total == 0 || idle > total {
        return None;
    }
    Some((total - idle) as f64 / total as f64)
}

/// Open while no signal gives a reason to pause.
pub struct Throttle {
    signals: Vec<Arc<dyn PauseSignal>>,
}

impl Throttle {
    /// A throttle over `signals` (none: always open).
    pub fn new(signals: Vec<Arc<dyn PauseSignal>>) -> Self {
        Throttle { signals }
    }

    /// The first reason to pause, if any.
    pub fn pause_reason(&self) -> Option<String> {
        self.signals.iter().find_map(|s| s.pause_reason())
    }

    /// Returns once the throttle is open, or `stop` flips to true; `paused` is told each reason
    /// while waiting and `None` once open.
    pub async fn wait_open(
        &self,
        paused: &Mutex<Option<String>>,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            let reason = self.pause_reason();
            let open = reason.is_none();
            *paused.lock().unwrap_or_else(|p| p.into_inner()) = reason;
            if open || *stop.borrow() {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(RECHECK_EVERY) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        }
    }
}

/// A run's counts, updated as it runs.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests read from the input.
    pub read: AtomicU64,
    /// Requests answered (replies and error documents).
    pub answered: AtomicU64,
    /// Of those, error documents.
    pub errors: AtomicU64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lines_parse_and_busy_fractions_follow() {
        let a = parse_cpu_line("cpu  100 0 50 800 50 0 0 0 0 0").unwrap();
        assert_eq!(a, (1000, 850));
        let b = parse_cpu_line("cpu  400 0 50 1300 50 0 0 0 0 0").unwrap();
        assert_eq!(busy_fraction(a, b), Some(0.375));
        assert_eq!(busy_fraction(b, a), None);
        assert_eq!(busy_fraction(a, a), None);
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4"), None);
        assert_eq!(parse_cpu_line("cpu 1 x 3 4"), None);
        assert_eq!(parse_cpu_line("cpu 1 2"), None);
    }

    struct Fixed(Option<&'static str>);
    impl PauseSignal for Fixed {
        fn pause_reason(&self) -> Option<String> {
            self.0.map(str::to_string)
        }
    }

    #[test]
    fn the_throttle_is_closed_while_any_signal_pauses() {
        let open = Throttle::new(vec![Arc::new(Fixed(None))]);
        assert_eq!(open.pause_reason(), None);
        let closed = Throttle::new(vec![Arc::new(Fixed(None)), Arc::new(Fixed(Some("busy")))]);
        assert_eq!(closed.pause_reason().as_deref(), Some("busy"));
    }

    #[tokio::test]
    async fn a_closed_throttle_waits_until_stopped_and_reports_why() {
        let closed = Throttle::new(vec![Arc::new(Fixed(Some("busy")))]);
        let paused = Mutex::new(None);
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(true).unwrap();
        });
        closed.wait_open(&paused, &mut rx).await;
        stopper.await.unwrap();
        assert_eq!(paused.lock().unwrap().as_deref(), Some("busy"));
    }
}
