//! The seam for models that are not graphs: a model-less front end (INFaaS's tasks, served by
//! whichever variant a request's requirements pick) answers requests for the names it serves, in
//! the same protocol and with the same errors as a graph. The transports ask it for any model
//! name no graph has.
//!
//! A task's variants share one signature, so a task also answers what a client reads before it
//! infers — metadata, configuration, statistics — as a model of version 1 ([`ModelLessModel`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{InferOutputs, InferRequest, OipError};
use crate::models::config::Signature;
use crate::models::InferStats;

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
    /// What `name` shows as a model, if this front end serves it.
    fn describe(&self, name: &str) -> Option<ModelLessModel>;
    /// Every name [`ModelLess::describe`] answers for, for the statistics of all models.
    fn names(&self) -> Vec<String>;
}

/// A model-less name as a model of version 1: its signature (metadata, configuration) and its
/// request counts (statistics), which its front end records as it answers.
#[derive(Debug, Clone)]
pub struct ModelLessModel {
    /// Its inputs, outputs and the rows a request may carry.
    pub signature: Signature,
    /// Its requests, answered and failed.
    pub stats: Arc<InferStats>,
}

/// The version a model-less name is served as.
pub const MODELLESS_VERSION: u64 = 1;
