//! `ModelStreamInfer`: requests on one bidirectional stream, each answered once, in the order
//! answers complete, the reply carrying the request's id (a failed request's reply carries its
//! `error_message` and, in `infer_response`, its model and id).
//!
//! Backpressure, not buffering: a stream has at most `stream_in_flight` requests running, and
//! the next request is read off the stream only when one of them is answered and its reply handed
//! to the outgoing channel (bounded by the same number). A client that sends faster than the
//! graph answers, or reads replies slower, is held back by HTTP/2 flow control rather than by a
//! queue growing in the server.
//!
//! Each request's byte-budget permit (`admit.rs`) is taken as the request is read and dropped
//! once its reply is queued, so what a stream holds in the budget follows what it has in flight.
//!
//! At shutdown (the phase turns to draining) a stream reads no further requests, answers the ones
//! in flight, and then ends with status OK. A malformed frame ends the stream with its status
//! after the requests in flight are answered.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};
use tracing::debug;

use super::admit::Held;
use super::proto::{ModelInferRequest, ModelInferResponse, ModelStreamInferResponse};
use super::shared::{Phase, Shared};

type Reply = Result<ModelStreamInferResponse, Status>;

/// Starts serving one stream, whose requests' permits are in `held`; returns its replies.
pub(super) fn stream_infer(
    shared: Arc<Shared>,
    inbound: Streaming<ModelInferRequest>,
    held: Held,
) -> ReceiverStream<Reply> {
    let (tx, rx) = mpsc::channel(shared.config.stream_in_flight);
    tokio::spawn(run(shared, inbound, held, tx));
    ReceiverStream::new(rx)
}

/// One request of the stream, answered.
async fn answer(shared: Arc<Shared>, request: ModelInferRequest) -> ModelStreamInferResponse {
    let model_name = request.model_name.clone();
    let id = request.id.clone();
    match shared.infer(request).await {
        Ok(reply) => ModelStreamInferResponse {
            error_message: String::new(),
            infer_response: Some(reply),
        },
        Err(failure) => ModelStreamInferResponse {
            error_message: failure.status.message().to_string(),
            infer_response: Some(ModelInferResponse {
                model_name,
                model_version: "1".into(),
                id,
                ..Default::default()
            }),
        },
    }
}

/// Completes once the server drains (or is gone).
async fn draining(phase: &mut watch::Receiver<Phase>) {
    let _ = phase.wait_for(|p| *p == Phase::Draining).await;
}

async fn run(
    shared: Arc<Shared>,
    mut inbound: Streaming<ModelInferRequest>,
    held: Held,
    tx: mpsc::Sender<Reply>,
) {
    let limit = shared.config.stream_in_flight.max(1);
    let mut phase = shared.phase.subscribe();
    let mut running = JoinSet::new();
    let mut reading = true;
    let mut ended_by: Option<Status> = None;
    loop {
        if !reading && running.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some(done) = running.join_next(), if !running.is_empty() => {
                let (reply, permit) = done.unwrap_or_else(|e| (ModelStreamInferResponse {
                    error_message: format!("the request's task failed: {e}"),
                    infer_response: None,
                }, None));
                let sent = tx.send(Ok(reply)).await;
                drop(permit);
                if sent.is_err() {
                    // The client is gone: dropping the set cancels what is still running.
                    return;
                }
            }
            () = draining(&mut phase), if reading => {
                debug!(in_flight = running.len(), "Draining a stream: answering what is in flight.");
                reading = false;
            }
            next = inbound.message(), if reading && running.len() < limit => match next {
                Ok(Some(request)) => {
                    let permit = held.next();
                    let shared = Arc::clone(&shared);
                    running.spawn(async move { (answer(shared, request).await, permit) });
                }
                Ok(None) => reading = false,
                Err(status) => {
                    debug!(error = %status, "A stream's inbound half failed.");
                    ended_by = Some(status);
                    reading = false;
                }
            },
        }
    }
    if let Some(status) = ended_by {
        let _ = tx.send(Err(status)).await;
    }
}
