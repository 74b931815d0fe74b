//! ParM's codec, as in "Parity Models: Erasure-Coded Resilience for Prediction Serving Systems"
//! (Kosaian, Rashmi and Venkataraman, SOSP '19): `k` queries of a *coding group* are encoded into
//! one *parity query* of the same shape; a parity model `F_P` is trained so that
//! `F_P(P) ≈ Σ_i F(X_i)` (ParM, §4.3–4.4); when one prediction of the group is unavailable it is
//! rebuilt as `F_P(P) − Σ_{i≠j} F(X_j)` (ParM, §4.2).
//!
//! - [`encoder`]: the encoders (the feature-wise sum of §4.2 and the image concatenation of
//!   §5.2.3) over one row position.
//! - [`code`]: a group's parity rows from its members' rows, position by position, and the
//!   subtraction decoder; with r > 1 parity models (§7), the weighted codes and the decoder of any
//!   r missing predictions.
//!
//! The crate is pure arithmetic on `f32` slices: serving (weir's parity operator) and training
//! (`weir parity train`) both use it, so a parity model is always served with the code it was
//! trained on, and training needs neither ONNX Runtime nor the dataflow.

pub mod code;
pub mod encoder;

pub use code::{
    coefficients, decode_erasures, decode_subtract, encode_rows, encode_rows_for, Slot,
};
pub use encoder::{CodeError, Encoder};
