//! The encoders: how the `k` rows at one position of a coding group become one parity row of the
//! same length. Each is a fixed, cheap function, so that encoding never delays dispatch and the
//! parity model, not the code, carries the learning.

/// How k queries become one parity query of the same shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoder {
    /// P = Σ_i X_i, feature-wise (ParM, §4.2).
    Sum,
    /// The k images downsampled and tiled into one (ParM, §5.2.3; k = 2: two H×(W/2) halves side
    /// by side; k = 4: four (H/2)×(W/2) quadrants, top-left, top-right, bottom-left,
    /// bottom-right). Rows must be square single-channel images with an even side, flattened
    /// row-major; downsampling averages pixel pairs (k = 2) or 2×2 blocks (k = 4).
    Concat,
}

/// Why an encoder cannot code a group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    /// A coding group needs at least two members.
    #[error("k must be at least 2, not {k}")]
    GroupTooSmall {
        /// The group size asked for.
        k: usize,
    },
    /// The concatenation encoder tiles 2 or 4 square images with an even side.
    #[error(
        "the concat encoder needs k = 2 or 4 and a square image with an even side \
         (k = {k}, {features} features)"
    )]
    NotTileable {
        /// The group size asked for.
        k: usize,
        /// Values per row.
        features: usize,
    },
}

impl Encoder {
    /// The name used in tables and on the command line (`sum`, `concat`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Concat => "concat",
        }
    }

    /// Checks that this encoder can code groups of `k` rows of `features` values.
    ///
    /// # Errors
    /// [`CodeError`] saying what does not fit.
    pub fn check(self, k: usize, features: usize) -> Result<(), CodeError> {
        if k < 2 {
            return Err(CodeError::GroupTooSmall { k });
        }
        if self == Self::Concat {
            let side = square_side(features);
            if !(k == 2 || k == 4) || side.is_none_or(|s| !s.is_multiple_of(2)) {
                return Err(CodeError::NotTileable { k, features });
            }
        }
        Ok(())
    }

    /// Encodes one coding group (`group.len()` = k rows of equal length) into `out`, which has
    /// one row's length: the first parity query, every member weighted 1. Call [`Self::check`]
    /// first.
    pub fn encode_into(self, group: &[&[f32]], out: &mut [f32]) {
        self.encode_weighted_into(group, &vec![1.0; group.len()], out);
    }

    /// Encodes one coding group with member `i` weighted by `weights[i]` (the parity model's
    /// coefficients, [`crate::code::coefficients`]): the weighted sum, or the tiles each scaled by
    /// their member's weight. Call [`Self::check`] first.
    pub fn encode_weighted_into(self, group: &[&[f32]], weights: &[f32], out: &mut [f32]) {
        let weight = |i: usize| weights.get(i).copied().unwrap_or(1.0);
        match self {
            Self::Sum => {
                out.fill(0.0);
                for (i, row) in group.iter().enumerate() {
                    let w = weight(i);
                    for (o, x) in out.iter_mut().zip(row.iter()) {
                        *o += w * x;
                    }
                }
            }
            Self::Concat => {
                let side = square_side(out.len()).unwrap_or(0);
                let half = side / 2;
                for r in 0..side {
                    for c in 0..side {
                        out[r * side + c] = if group.len() == 2 {
                            // left half from the first image, right half from the second
                            let img = group[c / half];
                            let (sr, sc) = (r, 2 * (c % half));
                            0.5 * weight(c / half) * (img[sr * side + sc] + img[sr * side + sc + 1])
                        } else {
                            let tile = (r / half) * 2 + c / half;
                            let img = group[tile];
                            let (sr, sc) = (2 * (r % half), 2 * (c % half));
                            0.25 * weight(tile)
                                * (img[sr * side + sc]
                                    + img[sr * side + sc + 1]
                                    + img[(sr + 1) * side + sc]
                                    + img[(sr + 1) * side + sc + 1])
                        };
                    }
                }
            }
        }
    }
}

fn square_side(features: usize) -> Option<usize> {
    let side = (features as f64).sqrt().round() as usize;
    (side * side == features).then_some(side)
}
