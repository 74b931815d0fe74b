//! One-to-many nodes: `crop_boxes` splits a request into parts, `gather` joins the parts back.
//!
//! `crop_boxes` reads an image and a detector's boxes and makes one *part* per kept box: a
//! sub-request of the same request, which every node after it treats as an ordinary row (model
//! nodes batch the parts of many requests together). Its outputs are per part: `image` (the box's
//! pixels resized to `height` × `width`), `box` (`f32 [4]`, the pixels cropped, `x1, y1, x2, y2`) and
//! `score` (`f32 []`). A `gather` closes the innermost fan-out its inputs are in: it waits for all
//! of a request's parts (their count travels with them; zero is a valid count) and gives one row
//! per request, each input stacked along a new first axis in part order, plus `count` (`i64 []`).
//! Between the two, tensors are *per part*: a node reads tensors of one level only, and a graph
//! output is never per part.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{Interpolation, Spanned};

/// The most parts `crop_boxes` may make of one request.
pub const MAX_PARTS: usize = 1024;

/// How `crop_boxes` reads box coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoxCoordinates {
    /// Pixels of the image being cropped.
    #[default]
    Pixels,
    /// Fractions of the image's width and height, in `[0, 1]`.
    Normalized,
}

/// Crops every kept box of a detector out of an image, each crop a part of the request.
///
/// Boxes are `x1, y1, x2, y2`. Kept: boxes whose score is at least `min_score`, after non-maximum
/// suppression at `iou_threshold` (when set), best score first, at most `max_boxes`. A box is
/// cropped from `floor(x1), floor(y1)` to `ceil(x2), ceil(y2)`, clamped to the image; one with no
/// pixels left, or a non-finite coordinate or score, is dropped.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CropBoxesSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `[height, width, channels]` image (u8 or f32).
    pub image: Spanned<String>,
    /// The boxes, `f32 [n, 4]`.
    pub boxes: Spanned<String>,
    /// Their scores, `f32 [n]`; without it every box scores 1.
    #[serde(default)]
    pub scores: Option<Spanned<String>>,
    /// How the boxes' coordinates are written.
    #[serde(default)]
    pub coordinates: Spanned<BoxCoordinates>,
    /// Height of every crop (≥ 1).
    pub height: Spanned<usize>,
    /// Width of every crop (≥ 1).
    pub width: Spanned<usize>,
    /// How a crop is resized.
    pub interpolation: Spanned<Interpolation>,
    /// Lowest score kept (default 0).
    #[serde(default)]
    pub min_score: Spanned<f32>,
    /// Non-maximum suppression: a box overlapping a better one by more than this intersection
    /// over union is dropped. In `(0, 1]`; none when absent.
    #[serde(default)]
    pub iou_threshold: Option<Spanned<f32>>,
    /// Most parts per request (1 ..= 1024).
    #[serde(default = "default_max_boxes")]
    pub max_boxes: Spanned<usize>,
}

fn default_max_boxes() -> Spanned<usize> {
    Spanned::unlocated(64)
}

/// Joins the parts of each request back into one row.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatherSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Output name → per-part tensor; each output is its parts stacked in part order.
    pub inputs: BTreeMap<String, Spanned<String>>,
}
