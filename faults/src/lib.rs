//! weir's fault harness: what the integration tests and `weir-bench faults` both need to break a
//! network on purpose and to check what clients saw through it.
//!
//! - [`netns`]: hosts in network namespaces of their own, joined to this one by veth pairs (one
//!   per host, or all on a bridge), and the faults a link can suffer while both ends keep running:
//!   cut, cut one way, flapped, throttled.
//! - [`proxy`]: a TCP proxy between two processes that delays, stalls and resets the streams it
//!   carries (what a link does that a namespace's link, with no `netem`, cannot);
//! - [`load`]: closed-loop clients with request ids, and the checker's counts: answered once,
//!   right, failed by class, on a timeline.
//!
//! A crate of its own because both the test binary and the benchmark binary drive the same
//! scenarios, and neither the server nor the library carries fault injection.

pub mod load;
pub mod netns;
pub mod proxy;
