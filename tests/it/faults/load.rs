//! Steady load with request ids for the fault scenarios, and the checker run after each: closed
//! loop clients, each sending one request at a time from a small set of inputs whose reference
//! outputs ONNX Runtime computed directly; every reply checked against its reference and counted
//! by id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::{RunningGraph, Tensor};

use crate::common::{channel, direct_ort, model, named, Replies};

/// Distinct inputs the clients cycle through.
const INPUTS: usize = 16;

/// The MLP's inputs and ONNX Runtime's outputs for them.
pub(crate) struct Reference {
    inputs: Vec<Vec<f32>>,
    outputs: Vec<Vec<f32>>,
}

impl Reference {
    /// [`INPUTS`] inputs of the 64-wide MLP test model and their outputs.
    pub(crate) fn mlp() -> Reference {
        let inputs: Vec<Vec<f32>> = (0..INPUTS)
            .map(|i| {
                (0..64)
                    .map(|j| ((i * 64 + j) % 13) as f32 / 13.0 - 0.5)
                    .collect()
            })
            .collect();
        let outputs = inputs
            .iter()
            .map(|x| direct_ort(&model("mlp_a.onnx"), "x", &[1, 64], x))
            .collect();
        Reference { inputs, outputs }
    }
}

/// What the clients saw.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Requests sent.
    pub sent: u64,
    /// Answered with outputs equal to the reference.
    pub right: u64,
    /// Answered with outputs that differ (request ids).
    pub wrong: Vec<u64>,
    /// Failed, by class, with the first message of each.
    pub failed: HashMap<&'static str, (u64, String)>,
    /// Answered more than once, or never (request ids and counts).
    pub not_once: Vec<(u64, usize)>,
}

impl Outcome {
    /// Failures of a class that forbids a retry (anything but unavailable or overloaded).
    pub(crate) fn non_retryable(&self) -> Vec<(&'static str, u64, String)> {
        self.failed
            .iter()
            .filter(|(class, _)| !matches!(**class, "unavailable" | "overloaded"))
            .map(|(class, (n, m))| (*class, *n, m.clone()))
            .collect()
    }
}

/// Closed-loop clients against a running graph until stopped.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<std::thread::JoinHandle<()>>,
    replies: Replies,
    outcome: Arc<Mutex<Outcome>>,
}

impl Load {
    /// Starts `clients` clients on `graph`, client `c`'s `k`-th request with id `c * 10^6 + k`.
    pub(crate) fn start(
        graph: &Arc<RunningGraph>,
        reference: &Arc<Reference>,
        clients: u64,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let replies = Replies::default();
        let outcome = Arc::new(Mutex::new(Outcome::default()));
        let clients = (0..clients)
            .map(|c| {
                let (graph, reference) = (Arc::clone(graph), Arc::clone(reference));
                let (stop, replies, outcome) =
                    (Arc::clone(&stop), replies.clone(), Arc::clone(&outcome));
                std::thread::spawn(move || {
                    let mut k = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        let id = c * 1_000_000 + k;
                        let item = (id as usize) % INPUTS;
                        let (tx, rx) = channel();
                        let x = Tensor::f32(vec![64], reference.inputs[item].clone());
                        replies.submit(&graph, id, vec![named("x", x)], &tx);
                        outcome.lock().expect("lock").sent += 1;
                        // Far above any failover: a request still unanswered then is lost.
                        let (tag, reply) = rx
                            .recv_timeout(Duration::from_secs(120))
                            .unwrap_or_else(|_| panic!("request {id} never answered"));
                        let mut o = outcome.lock().expect("lock");
                        match reply {
                            Ok(r) => {
                                let got = r.output("probs").and_then(Tensor::as_f32);
                                let want = &reference.outputs[item];
                                let same = got.is_some_and(|g| {
                                    g.len() == want.len()
                                        && g.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-5)
                                });
                                if same {
                                    o.right += 1;
                                } else {
                                    o.wrong.push(tag);
                                }
                            }
                            Err(e) => {
                                let entry = o
                                    .failed
                                    .entry(e.class().label())
                                    .or_insert_with(|| (0, e.to_string()));
                                entry.0 += 1;
                            }
                        }
                        k += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            clients,
            replies,
            outcome,
        }
    }

    /// Requests answered so far.
    pub(crate) fn answered(&self) -> u64 {
        let o = self.outcome.lock().expect("lock");
        o.right + o.wrong.len() as u64 + o.failed.values().map(|f| f.0).sum::<u64>()
    }

    /// Stops the clients (each finishes the request it waits for) and checks every id sent was
    /// answered exactly once.
    pub(crate) fn finish(self) -> Outcome {
        self.stop.store(true, Ordering::Release);
        for c in self.clients {
            c.join().expect("a client panicked");
        }
        let mut outcome = Arc::try_unwrap(self.outcome)
            .map(|m| m.into_inner().expect("lock"))
            .unwrap_or_else(|_| panic!("clients still hold the outcome"));
        let counts = self.replies.counts();
        outcome.not_once = counts.into_iter().filter(|(_, n)| *n != 1).collect();
        assert_eq!(
            outcome.right
                + outcome.wrong.len() as u64
                + outcome.failed.values().map(|f| f.0).sum::<u64>(),
            outcome.sent,
            "every request sent was answered"
        );
        outcome
    }
}
