//! Training of the models weir serves: deployed classifiers (`weir train`: an MLP and a
//! LeNet-style CNN on the 8×8 digits, written as ONNX) and ParM parity models (`weir parity
//! train`: the deployed ONNX graph with fresh, trainable weights, fitted so that F_P(Σ X_i) ≈
//! Σ F(X_i); Kosaian et al., SOSP '19, §4.3–4.4), plus the degraded-mode accuracy of the
//! subtraction decoder; with r > 1 parity models (§7), parity model `t` is fitted to its own
//! weighted code and A_d is scored with r predictions of a group lost at once.
//!
//! Models are evaluated with candle-onnx on candle tensors, the initializers replaced by `Var`s
//! ([`OnnxModel`]), so whatever graph is deployed trains without a second definition of it.
//! Training is CPU-only and deterministic under [`Schedule::seed`].

pub mod architecture;
pub mod classifier;
pub mod data;
pub mod error;
pub mod model;
pub mod parity;
pub mod schedule;

pub use architecture::Architecture;
pub use classifier::{accuracy, fit_classifier, train_classifier, TrainOptions, TrainReport};
pub use data::{load_digits, DataOptions, Dataset, Split};
pub use error::TrainError;
pub use model::{Init, OnnxModel};
pub use parity::{
    degraded_accuracy, degraded_accuracy_lost, degraded_accuracy_spread, fit_parity,
    fit_parity_model, train_parity, DegradedAccuracy, Encoder, ParityOptions, ParityReport,
};
pub use schedule::{Progress, Schedule};
