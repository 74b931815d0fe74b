//! zenoh pub/sub: each sample on the `subscribe` key expression is a request document; its reply
//! document is published on the `publish` key expression. Runs until shutdown.
//!
//! Replies are published with blocking congestion control: zenoh's default for puts drops a sample
//! when a link's queue is full, which under load loses replies silently on a machine whose cores
//! the graph keeps busy; blocking holds the reply's task until the link drains, and
//! `max_in_flight` bounds how many wait.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tracing::warn;
use weir_engine::runtime::GraphRuntime;

use super::{
    answer_document, error_document, DocumentError, StreamError, StreamOptions, StreamReport,
};
use crate::zenoh_peer::peer_config;

/// The key expressions of a zenoh stream.
#[derive(Debug, Clone)]
pub struct Keys {
    /// Requests arrive here.
    pub subscribe: String,
    /// Replies go here.
    pub publish: String,
}

fn zerr(e: impl std::fmt::Display) -> StreamError {
    StreamError::Zenoh(e.to_string())
}

/// Runs a zenoh connector with its own peer session on `listen`/`connect`.
///
/// # Errors
/// When the session, subscriber or publisher cannot be set up.
pub async fn run_zenoh(
    runtime: Arc<GraphRuntime>,
    keys: Keys,
    listen: &[String],
    connect: &[String],
    options: StreamOptions,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<StreamReport, StreamError> {
    let config = peer_config(listen, connect).map_err(zerr)?;
    let session = zenoh::open(config).await.map_err(zerr)?;
    let subscriber = session
        .declare_subscriber(keys.subscribe.clone())
        .await
        .map_err(zerr)?;
    let publisher = Arc::new(
        session
            .declare_publisher(keys.publish.clone())
            .congestion_control(zenoh::qos::CongestionControl::Block)
            .await
            .map_err(zerr)?,
    );
    let slots = Arc::new(Semaphore::new(options.max_in_flight.max(1)));
    let mut tasks = JoinSet::new();
    let mut report = StreamReport::default();
    loop {
        let sample = tokio::select! {
            s = subscriber.recv_async() => s,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let Ok(sample) = sample else { break };
        report.requests += 1;
        let number = report.requests;
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let (runtime, publisher) = (Arc::clone(&runtime), Arc::clone(&publisher));
        let id = format!("sample-{number}");
        let size = sample.payload().len();
        // A sample over the document cap is answered without being copied or parsed, as an
        // over-long JSON line is.
        let document =
            (size <= options.max_line_bytes).then(|| sample.payload().to_bytes().into_owned());
        drop(sample);
        tasks.spawn(async move {
            let (reply, failed) = match document {
                Some(document) => {
                    answer_document(&super::Answerer::Graph(runtime), &document, id, options).await
                }
                None => {
                    let error = DocumentError::SampleTooLarge {
                        number,
                        size,
                        limit: options.max_line_bytes,
                    };
                    (error_document(&id, &error), true)
                }
            };
            if let Err(e) = publisher.put(reply).await {
                warn!(error = %e, "Could not publish a reply.");
            }
            drop(permit);
            failed
        });
        // Reap finished tasks as we go so the set stays small on a long stream.
        while let Some(done) = tasks.try_join_next() {
            if matches!(done, Ok(true)) {
                report.errors += 1;
            }
        }
    }
    while let Some(done) = tasks.join_next().await {
        if matches!(done, Ok(true)) {
            report.errors += 1;
        }
    }
    let _ = session.close().await;
    Ok(report)
}
