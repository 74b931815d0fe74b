//! The ParM experiments ("Parity Models: Erasure-Coded Resilience for Prediction Serving
//! Systems", §6): a straggling replica's tail against the paper's equal-resources baseline.
//!
//! - [`squeezenet`]: tail latency of a heavier model (the seeded squeezenet, its own parity
//!   model: same cost) with a hiccuping replica, and the encoder's and decoder's cost.
//! - [`decode`]: the digits MLP with its trained parity models — equal resources, ParM per decode
//!   rule and r = 2, with and without a straggler: tail gap, fraction reconstructed, accuracy of
//!   all answers.
//!
//! Both run their set-ups through [`setup`] (hosts, graph, warm-up, load, counters, the
//! answered-once check) with a [`Straggler`].

pub mod decode;
pub mod setup;
pub mod squeezenet;
pub mod straggler;

pub use straggler::Straggler;
