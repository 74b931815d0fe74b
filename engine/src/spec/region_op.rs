//! Region and window nodes: find the regions of a detector's probability map, and cut fixed
//! windows out of tensors.
//!
//! `regions` is the post-processing of a segmentation-style text detector (the binarise, find
//! connected components, score and expand steps of "Real-time Scene Text Detection with
//! Differentiable Binarization", §3.5, in axis-aligned form): it turns an `f32` map of `[H, W]` or
//! `[1, H, W]` into `boxes` (`f32 [-1, 4]`, `x1, y1, x2, y2` as fractions of the map's width and
//! height, so they hold for the image the map was computed from at any scale) and `scores`
//! (`f32 [-1]`), best first. `crop`, `pad` and `slice` cut or extend a tensor to a window: they
//! move elements and never compute new ones, so they take every dtype but `bytes`. Their output is
//! named `output`. Each request is computed on its own shape; one whose shape cannot give the
//! window fails alone.

use serde::Deserialize;

use super::Spanned;

/// The most regions one `regions` node may report per request.
pub const MAX_REGIONS: usize = 1000;

/// The most elements the fixed dimensions of a `pad` target may hold together, and the most a
/// request's padded output may hold (a larger one fails that request).
pub const MAX_PAD_ELEMENTS: usize = 1 << 28;

/// The regions of a probability map, as boxes and scores.
///
/// Per request: pixels with `p > threshold` are foreground; each 8-connected component of them
/// is one candidate, its rectangle the pixels it spans (`x_min..=x_max` by `y_min..=y_max`, in
/// pixel-edge coordinates `x_min, y_min, x_max + 1, y_max + 1`) and its score the mean `p` over
/// its pixels. A candidate whose rectangle's shorter side is below `min_size` pixels, or whose
/// score is below `min_score`, is dropped. Each kept rectangle grows by
/// `d = area × expand / perimeter` on every side (`area = w × h`, `perimeter = 2 (w + h)`),
/// clamped to the map, and is normalised by the map's width and height. Regions come best score
/// first (ties: top to bottom, then left to right), at most `max_regions`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionsSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `f32 [H, W]` or `[1, H, W]` probability map.
    pub input: Spanned<String>,
    /// A pixel is foreground when its probability is above this, in `(0, 1]`.
    #[serde(default = "default_threshold")]
    pub threshold: Spanned<f64>,
    /// The least mean probability a region keeps, in `(0, 1]`.
    #[serde(default = "default_min_score")]
    pub min_score: Spanned<f64>,
    /// How much each rectangle grows (≥ 0; 0 keeps it as found).
    #[serde(default = "default_expand")]
    pub expand: Spanned<f64>,
    /// The least shorter side, in map pixels, a region keeps (≥ 1).
    #[serde(default = "default_min_size")]
    pub min_size: Spanned<usize>,
    /// The most regions per request, `1..=1000`.
    #[serde(default = "default_max_regions")]
    pub max_regions: Spanned<usize>,
}

fn default_threshold() -> Spanned<f64> {
    Spanned::unlocated(0.3)
}

fn default_min_score() -> Spanned<f64> {
    Spanned::unlocated(0.5)
}

fn default_expand() -> Spanned<f64> {
    Spanned::unlocated(1.5)
}

fn default_min_size() -> Spanned<usize> {
    Spanned::unlocated(3)
}

fn default_max_regions() -> Spanned<usize> {
    Spanned::unlocated(100)
}

/// A `height` × `width` window of a tensor whose first two dimensions are height and width (an
/// HWC image, or any tensor of rank ≥ 2); the other dimensions are kept whole.
///
/// The window starts at `top`, `left` (both 0 when not written), or is centred when `center` is
/// true (the start rounded down). A request too small for the window fails.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CropSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Any tensor of rank ≥ 2 but bytes.
    pub input: Spanned<String>,
    /// First row of the window.
    pub top: Option<Spanned<usize>>,
    /// First column of the window.
    pub left: Option<Spanned<usize>>,
    /// Rows in the window (≥ 1).
    pub height: Spanned<usize>,
    /// Columns in the window (≥ 1).
    pub width: Spanned<usize>,
    /// Centre the window instead of giving `top` and `left`.
    #[serde(default)]
    pub center: Spanned<bool>,
}

/// Extends each dimension to a fixed size at its end (bottom, right) with `value`.
///
/// `shape` has one entry per dimension of the input: a size ≥ 1, or `-1` to keep that
/// dimension as it comes. A request larger than the target along a dimension fails, as does one
/// whose padded output would hold more than [`MAX_PAD_ELEMENTS`] elements.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PadToSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Any tensor but bytes.
    pub input: Spanned<String>,
    /// The output's size per dimension (`-1` keeps the input's).
    pub shape: Spanned<Vec<i64>>,
    /// What the new elements hold; it must be a value of the input's dtype.
    #[serde(default)]
    pub value: Spanned<f64>,
}

/// Elements `start`, `start + step`, … before `end` along one axis, as numpy's `x[start:end:step]`
/// reads them: a negative `start`, `end` or `axis` counts from the back, and both bounds are
/// clamped to the dimension, so a slice past the end is shorter (or empty), never an error.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SliceSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Any tensor but bytes, of rank ≥ 1.
    pub input: Spanned<String>,
    /// The dimension sliced.
    #[serde(default)]
    pub axis: Spanned<i64>,
    /// First index (default 0).
    #[serde(default)]
    pub start: Spanned<i64>,
    /// Index after the last (default: the dimension's end).
    pub end: Option<Spanned<i64>>,
    /// Distance between kept indices (≥ 1).
    #[serde(default = "default_step")]
    pub step: Spanned<i64>,
}

fn default_step() -> Spanned<i64> {
    Spanned::unlocated(1)
}
