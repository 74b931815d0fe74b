//! Pinning a model node's threads to cores: each session thread and each of its ONNX Runtime
//! intra-op threads on a core of its own (`executor.pin_cores_from`).
//!
//! Why: SERF's model (and the paper's `c·t ≤ F`) assumes a configuration `(c, t)` owns `c·t` cores,
//! one per thread, and left to the OS a session thread and its ONNX Runtime worker may share one CPU
//! (forced onto one, a 2-thread shufflenet call took 9.3 ms against 2.7–3.0 ms on two). The layout:
//! with cores `K` (the CPUs the process may use, from `first` on, wrapping), session thread `i` of a
//! configuration with `t` intra-op threads runs on `K[i·t]` and its `t − 1` workers on
//! `K[i·t + 1] … K[i·t + t − 1]`. For the configurations SERF considers (`c·t ≤ F`) no two threads
//! share a core; beyond that they wrap.
//!
//! What it does not fix (measured 2026-11-25, `benchmarks/README.md`, *serf phases*): on the 2-vCPU
//! VM, 2-thread calls switch between ≈ 3 and ≈ 6 ms for tens of seconds at a time with ONNX Runtime
//! alone, pinned or not (slow rounds of 300: pinned 29 / 3 / 79, unpinned 69 / 121 / 20); the host
//! decides that, and the benchmarks run unpinned.
//!
//! Off by default: two pinned nodes in one process would share the same cores while others idle,
//! so a graph with several heavy nodes gives each its own `pin_cores_from`.

use thiserror::Error;

/// Why threads cannot be pinned.
#[derive(Debug, Error)]
pub enum PinError {
    /// The process's CPU set could not be read.
    #[error("reading the CPUs this process may use: {0}")]
    CpuSet(std::io::Error),
    /// The first core is beyond the process's CPU set.
    #[error(
        "executor.pin_cores_from {first} is not below the {available} CPUs this process may use"
    )]
    FirstCore {
        /// The configured first core.
        first: usize,
        /// CPUs available.
        available: usize,
    },
    /// Setting the calling thread's affinity failed.
    #[error("pinning a session thread to CPU {cpu}: {source}")]
    Pin {
        /// The CPU id.
        cpu: usize,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not supported on this platform.
    #[error("pinning threads to cores is supported on Linux only")]
    Unsupported,
}

/// Where a node's threads run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorePins {
    /// CPU ids in use order: the process's CPUs from the first configured one on, then the rest.
    cpus: Vec<usize>,
}

impl CorePins {
    /// Pins on the CPUs this process may use, starting with its `first`-th (0-based index into
    /// that set, not a CPU id).
    ///
    /// # Errors
    /// [`PinError::CpuSet`], [`PinError::FirstCore`], or [`PinError::Unsupported`].
    pub fn from_first(first: usize) -> Result<CorePins, PinError> {
        let allowed = allowed_cpus()?;
        CorePins::over(&allowed, first)
    }

    /// Pins over the CPU ids `allowed`, starting with index `first`.
    ///
    /// # Errors
    /// [`PinError::FirstCore`] when `first` is not an index of `allowed`.
    pub fn over(allowed: &[usize], first: usize) -> Result<CorePins, PinError> {
        if first >= allowed.len() {
            return Err(PinError::FirstCore {
                first,
                available: allowed.len(),
            });
        }
        let mut cpus = allowed[first..].to_vec();
        cpus.extend_from_slice(&allowed[..first]);
        Ok(CorePins { cpus })
    }

    fn cpu(&self, slot: usize) -> usize {
        self.cpus[slot % self.cpus.len()]
    }

    /// The CPU of session thread `i` when it runs calls with `threads` intra-op threads.
    pub fn caller(&self, i: usize, threads: usize) -> usize {
        self.cpu(i * threads.max(1))
    }

    /// ONNX Runtime's `session.intra_op_thread_affinities` for session thread `i`'s session of
    /// `threads` intra-op threads: one entry per worker (`threads − 1`, the caller is not ORT's),
    /// `;`-separated, 1-based CPU ids. `None` for a one-thread session (no workers).
    pub fn workers(&self, i: usize, threads: usize) -> Option<String> {
        (threads > 1).then(|| {
            (1..threads)
                .map(|w| (self.cpu(i * threads + w) + 1).to_string())
                .collect::<Vec<_>>()
                .join(";")
        })
    }
}

/// Pins the calling thread to CPU `cpu`.
///
/// # Errors
/// [`PinError::Pin`] with the OS error, or [`PinError::Unsupported`].
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    // SAFETY: `set` is a plain bit set owned by this frame; CPU_ZERO/CPU_SET only write within it
    // (CPU_SET ignores ids beyond CPU_SETSIZE), and sched_setaffinity reads `size_of` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(PinError::Pin {
            cpu,
            source: std::io::Error::last_os_error(),
        })
    }
}

/// Pins the calling thread to CPU `cpu` (not on this platform).
///
/// # Errors
/// Always [`PinError::Unsupported`].
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpu: usize) -> Result<(), PinError> {
    Err(PinError::Unsupported)
}

/// The CPU ids this process may run on, ascending.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> Result<Vec<usize>, PinError> {
    // SAFETY: as in `pin_current_thread`; sched_getaffinity writes at most `size_of` bytes into
    // `set`, and CPU_ISSET reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(PinError::CpuSet(std::io::Error::last_os_error()));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> Result<Vec<usize>, PinError> {
    Err(PinError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_of_a_configuration_within_the_cores_gets_a_core_of_its_own() {
        let pins = CorePins::over(&[0, 1, 2, 3], 0).unwrap();
        // (1, 2): caller on CPU 0, its worker on CPU 1 (ORT's ids are 1-based).
        assert_eq!(pins.caller(0, 2), 0);
        assert_eq!(pins.workers(0, 2).as_deref(), Some("2"));
        // (2, 1): one session thread per CPU, no workers.
        assert_eq!((pins.caller(0, 1), pins.caller(1, 1)), (0, 1));
        assert_eq!(pins.workers(1, 1), None);
        // (2, 2) on 4 CPUs: threads on 0 and 2, workers on 1 and 3.
        assert_eq!(
            (pins.caller(1, 2), pins.workers(1, 2).as_deref()),
            (2, Some("4"))
        );
        // (1, 4): three workers.
        assert_eq!(pins.workers(0, 4).as_deref(), Some("2;3;4"));
    }

    #[test]
    fn the_first_core_shifts_the_layout_and_wraps_over_the_process_cpus() {
        let pins = CorePins::over(&[2, 5, 7], 1).unwrap();
        assert_eq!(pins.caller(0, 1), 5);
        assert_eq!(pins.caller(1, 1), 7);
        assert_eq!(pins.caller(2, 1), 2);
        assert_eq!(pins.workers(0, 3).as_deref(), Some("8;3"));
        assert!(matches!(
            CorePins::over(&[0, 1], 2),
            Err(PinError::FirstCore {
                first: 2,
                available: 2
            })
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_pinned_to_one_of_the_process_cpus_runs_there() {
        let pins = CorePins::from_first(0).unwrap();
        let cpu = pins.caller(1, 1);
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
            // SAFETY: sched_getcpu has no preconditions.
            assert_eq!(unsafe { libc::sched_getcpu() } as usize, cpu);
        })
        .join()
        .unwrap();
    }
}
