//! Steady load with request ids for the fault scenarios, and the checker run after each:
//! closed-loop clients, each sending one request at a time and waiting for its answer; every
//! answer judged by the [`Workload`], counted by id (exactly once, or it is reported), and placed
//! on a timeline so that an experiment can say when answers stopped and when they came back.
//!
//! A stateless model's workload ([`Reference`]) cycles through a few inputs whose outputs were
//! computed beforehand by the caller (ONNX Runtime run directly); a stateful node's answers
//! depend on the order requests met its state, so its workload ([`Stateful`]) checks only their
//! shape, and its consistency is the HAMS journal's to prove.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use weir::{NamedTensor, RequestError, Response, RunningGraph, Tensor};

/// How long a client waits for one answer: far above any failover, so a request still
/// unanswered then is lost, and the load panics saying so.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// What the clients send and how an answer is judged.
pub trait Workload: Send + Sync + 'static {
    /// The inputs of request `id`.
    fn request(&self, id: u64) -> Vec<NamedTensor>;
    /// Whether `response` is a right answer to request `id`.
    fn right(&self, id: u64, response: &Response) -> bool;
}

/// Deterministic inputs of a `width`-wide `f32` input: input `i` of `n`.
pub fn inputs(n: usize, width: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            (0..width)
                .map(|j| ((i * width + j) % 13) as f32 / 13.0 - 0.5)
                .collect()
        })
        .collect()
}

/// A stateless model's workload: request `id` sends input `id mod n` as `input`, and its
/// `output` must equal the reference within `1e-5`.
pub struct Reference {
    /// The graph input's name.
    pub input: String,
    /// The graph output checked.
    pub output: String,
    /// The inputs, each of the same width.
    pub inputs: Vec<Vec<f32>>,
    /// The reference output of each input.
    pub outputs: Vec<Vec<f32>>,
}

fn named(name: &str, tensor: Tensor) -> NamedTensor {
    NamedTensor {
        name: name.into(),
        tensor,
    }
}

impl Workload for Reference {
    fn request(&self, id: u64) -> Vec<NamedTensor> {
        let x = &self.inputs[(id as usize) % self.inputs.len()];
        vec![named(&self.input, Tensor::f32(vec![x.len()], x.clone()))]
    }

    fn right(&self, id: u64, response: &Response) -> bool {
        let want = &self.outputs[(id as usize) % self.outputs.len()];
        let got = response.output(&self.output).and_then(Tensor::as_f32);
        got.is_some_and(|g| {
            g.len() == want.len() && g.iter().zip(want).all(|(a, b)| (a - b).abs() <= 1e-5)
        })
    }
}

/// A stateful node reading `x` of `features` values and answering `y`: a right answer has `y`
/// with finite values (the journal checks the values).
pub struct Stateful {
    /// The width of `x`.
    pub features: usize,
}

impl Workload for Stateful {
    fn request(&self, id: u64) -> Vec<NamedTensor> {
        let x = (0..self.features)
            .map(|k| ((id as usize * self.features + k) as f32 * 0.173).sin())
            .collect();
        vec![named("x", Tensor::f32(vec![self.features], x))]
    }

    fn right(&self, _id: u64, response: &Response) -> bool {
        let y = response.output("y").and_then(Tensor::as_f32);
        y.is_some_and(|y| !y.is_empty() && y.iter().all(|v| v.is_finite()))
    }
}

/// One answer on the timeline: when it came (since the load started) and what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// Since the load started.
    pub at: Duration,
    /// `None`: right; `Some("wrong")`, or the failure's class label.
    pub failure: Option<&'static str>,
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Requests sent.
    pub sent: u64,
    /// Answered right.
    pub right: u64,
    /// Answered with outputs that differ (request ids).
    pub wrong: Vec<u64>,
    /// Failed, by class, with the first message of each.
    pub failed: HashMap<&'static str, (u64, String)>,
    /// Answered more than once (request ids and counts).
    pub not_once: Vec<(u64, usize)>,
    /// Every answer, in arrival order.
    pub timeline: Vec<Answer>,
}

impl Outcome {
    /// Failures of a class that forbids a retry (anything but unavailable or overloaded).
    pub fn non_retryable(&self) -> Vec<(&'static str, u64, String)> {
        self.failed
            .iter()
            .filter(|(class, _)| !matches!(**class, "unavailable" | "overloaded"))
            .map(|(class, (n, m))| (*class, *n, m.clone()))
            .collect()
    }

    /// Requests that failed, all classes together.
    pub fn failures(&self) -> u64 {
        self.failed.values().map(|f| f.0).sum()
    }

    /// The longest time with no right answer between `from` and `to` (since the load started).
    pub fn longest_silence(&self, from: Duration, to: Duration) -> Duration {
        let mut last = from;
        let mut longest = Duration::ZERO;
        for a in &self.timeline {
            if a.failure.is_none() && a.at >= from && a.at <= to {
                longest = longest.max(a.at - last);
                last = a.at;
            }
        }
        longest.max(to.saturating_sub(last))
    }
}

/// Counts per request id, and what the clients saw so far.
#[derive(Default)]
struct Seen {
    counts: HashMap<u64, usize>,
    outcome: Outcome,
}

/// Closed-loop clients against a running graph until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<std::thread::JoinHandle<()>>,
    seen: Arc<Mutex<Seen>>,
    started: Instant,
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|p| p.into_inner())
}

impl Load {
    /// Starts `clients` clients on `graph`, client `c`'s `k`-th request with id `c * 10^6 + k`.
    pub fn start<W: Workload>(graph: &Arc<RunningGraph>, workload: &Arc<W>, clients: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let started = Instant::now();
        let clients = (0..clients)
            .map(|c| {
                let (graph, workload) = (Arc::clone(graph), Arc::clone(workload));
                let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
                std::thread::spawn(move || {
                    let mut k = 0u64;
                    while !stop.load(Ordering::Acquire) {
                        let id = c * 1_000_000 + k;
                        client_request(&graph, workload.as_ref(), &seen, id, started);
                        k += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            clients,
            seen,
            started,
        }
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        lock(&self.seen).outcome.timeline.len() as u64
    }

    /// Right answers so far.
    pub fn right(&self) -> u64 {
        lock(&self.seen).outcome.right
    }

    /// Time since the load started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Stops the clients (each finishes the request it waits for) and checks every id sent was
    /// answered exactly once.
    ///
    /// # Panics
    /// When a client panicked (a request never answered), or a request sent was not answered.
    pub fn finish(self) -> Outcome {
        self.stop.store(true, Ordering::Release);
        for c in self.clients {
            if let Err(e) = c.join() {
                std::panic::resume_unwind(e);
            }
        }
        // A reply sent twice would arrive now.
        std::thread::sleep(Duration::from_millis(300));
        let mut seen = std::mem::take(&mut *lock(&self.seen));
        let answered = seen.outcome.timeline.len() as u64;
        seen.outcome.not_once = seen.counts.into_iter().filter(|(_, n)| *n != 1).collect();
        assert_eq!(
            answered, seen.outcome.sent,
            "every request sent was answered"
        );
        seen.outcome
    }
}

/// Sends request `id` and waits for its answer, recording it.
fn client_request<W: Workload + ?Sized>(
    graph: &RunningGraph,
    workload: &W,
    seen: &Arc<Mutex<Seen>>,
    id: u64,
    started: Instant,
) {
    let (tx, rx) = mpsc::channel::<Result<Response, RequestError>>();
    let counts = Arc::clone(seen);
    let responder: weir::Responder = Box::new(move |r| {
        *lock(&counts).counts.entry(id).or_default() += 1;
        let _ = tx.send(r);
    });
    lock(seen).outcome.sent += 1;
    if let Err(e) = graph.runtime().submit(workload.request(id), responder) {
        record(seen, id, started, Err(e));
        return;
    }
    let reply = rx
        .recv_timeout(ANSWER_WITHIN)
        .unwrap_or_else(|_| panic!("request {id} never answered"));
    let reply = reply.map(|r| (workload.right(id, &r), r));
    record(seen, id, started, reply);
}

fn record(
    seen: &Mutex<Seen>,
    id: u64,
    started: Instant,
    reply: Result<(bool, Response), RequestError>,
) {
    let mut s = lock(seen);
    let failure = match reply {
        Ok((true, _)) => {
            s.outcome.right += 1;
            None
        }
        Ok((false, _)) => {
            s.outcome.wrong.push(id);
            Some("wrong")
        }
        Err(e) => {
            let label = e.class().label();
            let entry = s
                .outcome
                .failed
                .entry(label)
                .or_insert_with(|| (0, e.to_string()));
            entry.0 += 1;
            Some(label)
        }
    };
    s.outcome.timeline.push(Answer {
        at: started.elapsed(),
        failure,
    });
}
