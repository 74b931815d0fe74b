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
//! What it does not fix: on a machine whose two cores a 2-thread call fills, such calls switch
//! between ≈ 3 and ≈ 6 ms for tens of seconds at a time with ONNX Runtime alone, pinned or not
//! (slow rounds of 300: pinned 29 / 3 / 79, unpinned 69 / 121 / 20; `benchmarks/serf/README.md`,
//! *serf phases*); the host decides that, and the benchmarks run unpinned.
//!
//! Off by default: two pinned nodes in one process would share the same cores while others idle,
//! so a graph with several heavy nodes gives each its own `pin_cores_from`.
//!
//! Pinning places the node's threads; it does not keep the rest of the process off the node's
//! cores, and while a one-thread slot idles between calls the OS may put a dataflow, I/O or load
//! generator thread there. [`reserve_for_node`] does that too: it narrows every thread the process
//! has (and so every thread they start, which inherit it) to the CPUs outside the node's, and
//! [`CorePins::from_first`] keeps numbering from the whole set. `weir bench serf --cores N
//! --pin-cores-from F` reserves this way on a host with cores to spare.

use std::sync::OnceLock;

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
    /// Reserving the node's cores would leave the rest of the process none.
    #[error(
        "reserving {cores} CPUs for the node leaves none of the {available} this process may use for its other threads"
    )]
    NothingLeft {
        /// CPUs asked for the node.
        cores: usize,
        /// CPUs available.
        available: usize,
    },
    /// Narrowing one of the process's threads to the CPUs outside the node's failed.
    #[error("keeping thread {tid} off the node's CPUs: {source}")]
    Reserve {
        /// The thread id.
        tid: i64,
        /// The OS error.
        source: std::io::Error,
    },
    /// Not supported on this platform.
    #[error("pinning threads to cores is supported on Linux only")]
    Unsupported,
}

/// The CPUs the process could use before [`reserve_for_node`] narrowed its threads: the set
/// [`CorePins::from_first`] numbers from, whichever thread asks.
static PROCESS_CPUS: OnceLock<Vec<usize>> = OnceLock::new();

/// The CPUs this process may use: as before any reservation, else the calling thread's set.
fn process_cpus() -> Result<Vec<usize>, PinError> {
    match PROCESS_CPUS.get() {
        Some(all) => Ok(all.clone()),
        None => allowed_cpus(),
    }
}

/// How many CPUs the process could use before [`reserve_for_node`] narrowed its threads (`None`:
/// nothing reserved).
pub fn cpus_before_reservation() -> Option<usize> {
    PROCESS_CPUS.get().map(Vec::len)
}

/// Keeps the node pinned from index `first` on its `cores` CPUs alone: every thread the process
/// has now is narrowed to the other CPUs, and threads started later inherit that from their
/// creator; the node's own threads then pin themselves onto the kept CPUs as usual. Call it before
/// the node's sessions start. Returns the CPU ids kept for the node. `cores` 0 reserves nothing.
/// One node per process: a second call narrows the threads anew, off its own node's CPUs only.
///
/// # Errors
/// [`PinError::FirstCore`], [`PinError::NothingLeft`] when the node would take every CPU,
/// [`PinError::Reserve`] when a thread cannot be narrowed, [`PinError::CpuSet`], or
/// [`PinError::Unsupported`].
pub fn reserve_for_node(first: usize, cores: usize) -> Result<Vec<usize>, PinError> {
    let all = process_cpus()?;
    let pins = CorePins::over(&all, first)?;
    if cores == 0 {
        return Ok(Vec::new());
    }
    if cores >= all.len() {
        return Err(PinError::NothingLeft {
            cores,
            available: all.len(),
        });
    }
    let kept: Vec<usize> = (0..cores).map(|slot| pins.cpu(slot)).collect();
    let rest: Vec<usize> = all.iter().copied().filter(|c| !kept.contains(c)).collect();
    let _ = PROCESS_CPUS.set(all);
    narrow_every_thread(&rest)?;
    Ok(kept)
}

/// Where a node's threads run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorePins {
    /// CPU ids in use order: the process's CPUs from the first configured one on, then the rest.
    cpus: Vec<usize>,
}

impl CorePins {
    /// Pins on the CPUs this process may use, starting with its `first`-th (0-based index into
    /// that set, not a CPU id); after [`reserve_for_node`], the set as it was before.
    ///
    /// # Errors
    /// [`PinError::CpuSet`], [`PinError::FirstCore`], or [`PinError::Unsupported`].
    pub fn from_first(first: usize) -> Result<CorePins, PinError> {
        CorePins::over(&process_cpus()?, first)
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
    set_affinity(0, &[cpu]).map_err(|source| PinError::Pin { cpu, source })
}

/// Sets thread `tid`'s CPUs (0: the calling thread).
#[cfg(target_os = "linux")]
fn set_affinity(tid: libc::pid_t, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: `set` is a plain bit set owned by this frame; CPU_ZERO/CPU_SET only write within it
    // (CPU_SET ignores ids beyond CPU_SETSIZE), and sched_setaffinity reads `size_of` bytes of it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Narrows every thread of this process (`/proc/self/task`) to `cpus`; a thread that ended
/// meanwhile is skipped.
#[cfg(target_os = "linux")]
fn narrow_every_thread(cpus: &[usize]) -> Result<(), PinError> {
    let tasks = std::fs::read_dir("/proc/self/task").map_err(PinError::CpuSet)?;
    for task in tasks {
        let task = task.map_err(PinError::CpuSet)?;
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        match set_affinity(tid, cpus) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(source) => {
                return Err(PinError::Reserve {
                    tid: i64::from(tid),
                    source,
                })
            }
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn narrow_every_thread(_cpus: &[usize]) -> Result<(), PinError> {
    Err(PinError::Unsupported)
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

    /// Set in the child process [`reserving_the_node_cores_keeps_every_other_thread_off_them`]
    /// starts: narrowing every thread would change the test harness's other tests.
    const RESERVE_CHILD: &str = "WEIR_PINNING_RESERVE_CHILD";

    #[cfg(target_os = "linux")]
    #[test]
    fn reserving_the_node_cores_keeps_every_other_thread_off_them() {
        if std::env::var_os(RESERVE_CHILD).is_none() {
            let exe = std::env::current_exe().unwrap();
            let out = std::process::Command::new(exe)
                .args([
                    "--exact",
                    "model::pinning::tests::reserving_the_node_cores_keeps_every_other_thread_off_them",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(RESERVE_CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{text}");
            assert!(text.contains("1 passed"), "{text}");
            return;
        }
        let all = allowed_cpus().unwrap();
        if all.len() < 2 {
            eprintln!("one CPU: nothing to reserve here");
            return;
        }
        // A thread that exists before the reservation, and checks itself after it.
        let (ready, wait) = std::sync::mpsc::channel::<()>();
        let earlier = std::thread::spawn(move || {
            wait.recv().unwrap();
            allowed_cpus().unwrap()
        });
        let kept = reserve_for_node(1, 1).unwrap();
        assert_eq!(kept, vec![all[1]]);
        let rest: Vec<usize> = all.iter().copied().filter(|&c| c != all[1]).collect();
        assert_eq!(allowed_cpus().unwrap(), rest, "the calling thread");
        ready.send(()).unwrap();
        assert_eq!(earlier.join().unwrap(), rest, "a thread started before");
        let later = std::thread::spawn(allowed_cpus).join().unwrap().unwrap();
        assert_eq!(later, rest, "a thread started after inherits it");
        // The node still numbers from the whole set, and its thread may run on the kept CPU.
        let pins = CorePins::from_first(1).unwrap();
        assert_eq!(pins.caller(0, 1), all[1]);
        let node_cpu = all[1];
        std::thread::spawn(move || {
            pin_current_thread(node_cpu).unwrap();
            // SAFETY: sched_getcpu has no preconditions.
            assert_eq!(unsafe { libc::sched_getcpu() } as usize, node_cpu);
        })
        .join()
        .unwrap();
        assert!(matches!(
            reserve_for_node(0, all.len()),
            Err(PinError::NothingLeft { .. })
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
