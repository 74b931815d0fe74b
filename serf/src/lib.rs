//! SERF: queueing-model-driven choice of inter-/intra-request parallelism per model node.
//!
//! Implements the paper "SERF: Efficient Scheduling for Fast Deep Neural Network Serving via Judicious
//! Parallelism" (Yan, Ruwase, He, Smirni; §IV) as pure logic, with the paper's Eq. 12/13 erratum fixed
//! ([`model`] says how):
//!
//! - [`config`]: the configuration space `(c, C_inter, t)` with `c·t ≤ cores`;
//! - [`model`]: the M/D_interf/c latency model (Eqs. 2–13, corrected);
//! - [`baseline`]: the M/M/c, M/D/c and M/M_interf/c predictors of Fig. 9;
//! - [`idle`]: the slower first request after an idle gap, measured per thread count, and what it adds to a prediction;
//! - [`simulator`]: a discrete-event simulator of M/D_interf/c used to check the model;
//! - [`profile`]: the profiled service rates of one model node, their file format and profiling plan/cost;
//! - [`table`]: the configuration reference table and online evaluation over all configurations;
//! - [`estimator`]: the sliding-window arrival-rate estimator;
//! - [`online`]: service rates measured while serving, blended into the profile (online re-profiling);
//! - [`slow_state`]: the slowest level each tuple's calls ran at lately;
//! - [`scheduler`]: the switch decision with hysteresis, driven by the estimator and the blended profile.
//!
//! Nothing here measures ONNX Runtime, reads a clock or touches an executor: callers measure (through
//! [`profile::build_profile`]'s closure), pass timestamps, and apply the decided configuration.
//!
//! # Using it from weir
//!
//! ```
//! use std::time::Duration;
//! use weir_serf::config::Config;
//! use weir_serf::profile::{build_profile, profiling_cost, BuildOptions, Profile};
//! use weir_serf::scheduler::{Scheduler, SchedulerOptions};
//! use weir_serf::table::{Candidates, ConfigTable, TableOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 1. `weir profile`: measure every tuple (i concurrent requests × t intra-op threads, i·t ≤ cores).
//! //    The closure runs `tuple.concurrency` streams with `tuple.threads` ORT threads each, warms up, and
//! //    returns ≥ `samples` service times in seconds.
//! let mut profile = build_profile(2, &[1], BuildOptions::default(), |tuple, samples| {
//!     let alone = if tuple.threads == 2 { 0.0017 } else { 0.0032 };
//!     Ok::<_, std::io::Error>(vec![alone; samples])
//! })?;
//! profile.label = Some("squeezenet".into());
//! profile.wall_s = Some(0.2); // measured by the caller
//! let cost = profiling_cost(&profile, 10, 5000); // Table II: cost.ratio ≈ 5000
//! assert_eq!(cost.serf_experiments, 3);
//! # let dir = std::env::temp_dir().join(format!("weir-serf-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let path = dir.join("squeezenet.serf.json"); // next to the graph
//! profile.save(&path)?;
//!
//! // 2. Planning (`weir plan`, `parallelism: auto`): the table for display, the starting configuration.
//! let profile = Profile::load(&path)?;
//! let candidates = Candidates::from_profile(&profile);
//! let table = ConfigTable::build(&candidates, TableOptions::default())?;
//! let start = table.rows[0].best; // best at low load
//! assert_eq!(start, Config::new(1, 2));
//!
//! // 3. Serving: one scheduler per model node, fed the executor's arrivals with monotonic timestamps.
//! let mut sched = Scheduler::new(candidates, start, SchedulerOptions::default(), Duration::ZERO)?;
//! let mut now = Duration::ZERO;
//! for _ in 0..3000 {
//!     now += Duration::from_micros(1_700); // ≈ 590 requests/s: beyond (1, 2)'s capacity
//!     sched.record_arrival(now);
//!     if let Some(switch) = sched.poll(now) {
//!         // Apply: admission limit = switch.to.concurrency; new requests use the session with
//!         // switch.to.threads intra-op threads; in-flight ones keep theirs. Log and export it.
//!         assert_eq!(switch.to, Config::new(2, 1));
//!     }
//! }
//! assert_eq!(sched.current(), Config::new(2, 1));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

pub mod baseline;
pub mod config;
pub mod estimator;
pub mod idle;
pub mod model;
pub mod online;
pub mod profile;
pub mod scheduler;
pub mod simulator;
pub mod slow_state;
pub mod table;
