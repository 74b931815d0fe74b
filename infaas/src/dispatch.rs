//! The seam between serving and the control plane.
//!
//! Serving (a task node, the HTTP and gRPC front ends, the offline runner) asks a [`Dispatcher`]
//! where a query goes and tells it what happened; the metadata store implements it. Serving never
//! reads the store's state directly, so the store's representation and the selection policy can
//! change without touching it.

use crate::query::{Choice, NoMatch, Query};
use crate::state::Event;
use crate::variant::Variant;

/// Picks a variant and worker per query and takes in the events that change the state.
pub trait Dispatcher: Send + Sync {
    /// The decision for `query` (paper §4.1 `getVariant`), or why nothing can serve it.
    fn select(&self, query: &Query) -> Result<Choice, NoMatch>;
    /// Records `event`; states derived from it are visible to later `select` calls.
    fn record(&self, event: Event);
    /// The variant named `name`, if registered.
    fn variant(&self, name: &str) -> Option<Variant>;
}
