//! Why model-less serving could not start or change its workers.

use weir_connectors::zenoh_peer::SessionError;

/// Errors starting the model-less front end, following an executor or starting the autoscaler.
#[derive(Debug, thiserror::Error)]
pub enum ModelLessError {
    /// The model repository could not be read.
    #[error("model repository {dir}: {source}")]
    Repository {
        /// The repository's folder.
        dir: String,
        /// Why.
        source: weir_infaas::repository::RepoError,
    },
    /// The metadata store's dataflow could not start.
    #[error("starting the metadata store: {0}")]
    Store(#[from] weir_infaas::store::StoreError),
    /// The zenoh session to the executors could not open.
    #[error("opening the zenoh session to the executors: {0}")]
    Session(SessionError),
    /// An executor's events could not be subscribed to.
    #[error("following executor {executor}: {source}")]
    Follow {
        /// The executor's name.
        executor: String,
        /// Why.
        source: SessionError,
    },
    /// An executor was named to follow, but this front end reaches none.
    #[error("this front end reaches no executors (no --executor, no --zenoh-listen)")]
    NoExecutors,
    /// The autoscale file could not be read or is invalid.
    #[error("{path}: {reason}")]
    AutoscaleFile {
        /// The file.
        path: String,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// The autoscaler's thread could not start.
    #[error("starting the autoscaler: {0}")]
    Autoscaler(std::io::Error),
}
