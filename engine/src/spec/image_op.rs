//! Image pre-processing nodes: turn the encoded picture a client sends into the tensor a vision
//! model reads.
//!
//! `decode_image` reads one JPEG or PNG per request (a BYTES tensor of shape `[]` or `[1]`) and
//! yields `u8` height × width × 3 (RGB), each request its own size. `resize` brings an HWC image to
//! a fixed height and width, `cast` converts the element type and `transpose` permutes dimensions
//! (HWC → CHW is `perm: [2, 0, 1]`). Every node's output is named `output`.

use serde::Deserialize;

use super::Spanned;
use crate::tensor::DType;

/// The largest image `decode_image` accepts by default: 4096 × 4096 pixels.
pub const DEFAULT_MAX_PIXELS: u64 = 16_777_216;

/// Decodes one JPEG or PNG per request into `u8 [height, width, 3]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeImageSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The BYTES tensor holding the encoded image.
    pub input: Spanned<String>,
    /// The most pixels (width × height, as the file's header declares them) an image may have; a
    /// larger one is refused before any pixel is decoded.
    #[serde(default = "default_max_pixels")]
    pub max_pixels: Spanned<u64>,
    /// A JPEG is decoded at the smallest of its DCT's reduced scales (1/8, 1/4, 1/2) at which it
    /// is still at least this size on both sides, as Pillow's `Image.draft` does: each 8 × 8 block
    /// of coefficients becomes 1 × 1, 2 × 2 or 4 × 4 pixels, so a `resize` after it reads a smaller
    /// picture and decoding skips most of the inverse DCT and colour conversion. The pixels are
    /// the block's average at that scale, not what a full decode then a resize gives, which is
    /// why it is asked for rather than implied. A PNG, a JPEG no larger than this, and a lossless,
    /// CMYK or 16-bit JPEG are decoded whole.
    #[serde(default)]
    pub draft: Option<Spanned<ImageSize>>,
}

/// A picture's height and width in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSize {
    /// Height (1 to 65,535).
    pub height: usize,
    /// Width (1 to 65,535).
    pub width: usize,
}

fn default_max_pixels() -> Spanned<u64> {
    Spanned::unlocated(DEFAULT_MAX_PIXELS)
}

/// How `resize` computes a pixel of the output from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// The input pixel whose area holds the output pixel's centre.
    Nearest,
    /// The four input pixels around the output pixel's centre, weighted by distance
    /// (half-pixel centres, edges clamped).
    Bilinear,
}

/// Resizes an HWC image (`u8` or `f32`) to `height` × `width`, keeping its channels.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResizeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `[height, width, channels]` image.
    pub input: Spanned<String>,
    /// Output height (≥ 1).
    pub height: Spanned<usize>,
    /// Output width (≥ 1).
    pub width: Spanned<usize>,
    /// How pixels are computed.
    pub interpolation: Spanned<Interpolation>,
}

/// Converts every element to `to` (as Rust's `as` converts numbers: floats to integers truncate
/// and saturate; to `bool`, non-zero is true).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CastSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Any numeric or boolean tensor.
    pub input: Spanned<String>,
    /// The element type of the output (not `bytes`).
    pub to: Spanned<DType>,
}

/// Permutes dimensions: output dimension `i` is input dimension `perm[i]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransposeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Any tensor of rank `perm.len()`.
    pub input: Spanned<String>,
    /// A permutation of `0..rank`.
    pub perm: Spanned<Vec<usize>>,
}
