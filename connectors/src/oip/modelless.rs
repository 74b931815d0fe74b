//! The seam for models that are not graphs: a model-less front end (INFaaS's tasks, served by
//! whichever variant a request's requirements pick) answers requests for the names it serves, in
//! the same protocol and with the same errors as a graph. The transports ask it for any model
//! name no graph has.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::{InferOutputs, InferRequest, OipError};

/// A request's answer, on its way.
pub type InferFuture<'a> =
    Pin<Box<dyn Future<Output = Result<InferOutputs, OipError>> + Send + 'a>>;

/// Answers requests for model names that are not graphs.
pub trait ModelLess: Send + Sync {
    /// Whether `name` is a model (a task, or one of its variants) this front end answers.
    fn serves(&self, name: &str) -> bool;
    /// Answers `request` for `name` within `timeout`.
    fn infer<'a>(
        &'a self,
        name: &'a str,
        request: InferRequest,
        timeout: Duration,
    ) -> InferFuture<'a>;
}
