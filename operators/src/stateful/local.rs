//! An unreplicated stateful node run in this process (`replication: none` on `replicas: [local]`,
//! the default): one thread owns the model and the current state version and runs batches in the
//! order they come, which is the order the node's operator numbered them.

use std::sync::Mutex;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Sender};
use tracing::warn;
use weir_engine::batch::TensorColumn;
use weir_hams::protocol::RunHeader;
use weir_hams::sequences::SequenceControls;

use super::proxy::StatefulNodeHandle;
use super::{RunDone, RunFailure, RunOutput, StatefulTransport};
use crate::stateful::step::StatefulModel;

type Work = (Vec<TensorColumn>, Option<SequenceControls>, RunDone);

/// Runs one stateful node's batches on a thread of this process.
pub struct LocalStatefulTransport {
    tx: Mutex<Option<Sender<Work>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for LocalStatefulTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalStatefulTransport").finish()
    }
}

impl LocalStatefulTransport {
    /// Starts the thread that owns `model`, from its initial state (zeros, or no sequences).
    pub fn start(node: &str, mut model: StatefulModel) -> LocalStatefulTransport {
        let (tx, rx) = unbounded::<Work>();
        let spawned = std::thread::Builder::new()
            .name(format!("stateful-{node}"))
            .spawn(move || {
                let mut state = std::sync::Arc::new(model.initial_state());
                while let Ok((inputs, controls, done)) = rx.recv() {
                    match model.step(&inputs, &state, controls.as_ref(), None) {
                        Ok(step) => {
                            state = step.next;
                            done(Ok(RunOutput {
                                columns: step.outputs,
                                refused: step.refused,
                            }));
                        }
                        Err(e) => done(Err(RunFailure::Failed(e.to_string()))),
                    }
                }
            });
        let thread = match spawned {
            Ok(t) => Some(t),
            Err(e) => {
                warn!(%node, error = %e, "No thread for the stateful node.");
                None
            }
        };
        LocalStatefulTransport {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(thread),
        }
    }
}

impl StatefulTransport for LocalStatefulTransport {
    fn run(
        &self,
        _node: &StatefulNodeHandle,
        _primary: &str,
        header: RunHeader,
        inputs: Vec<TensorColumn>,
        done: RunDone,
    ) {
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match tx {
            Some(tx) => {
                if let Err(crossbeam_channel::SendError((_, _, done))) =
                    tx.send((inputs, header.sequences, done))
                {
                    done(Err(RunFailure::Failed("the stateful node stopped".into())));
                }
            }
            None => done(Err(RunFailure::Failed("the stateful node stopped".into()))),
        }
    }
}

impl Drop for LocalStatefulTransport {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
