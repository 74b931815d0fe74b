//! Resampling one HWC image (or a window of one) to another height and width, appended to an
//! output buffer: what `resize` does to each row and `crop_boxes` to each crop.
//!
//! Bilinear resampling is separable: each output row is a blend of two source rows, each of those
//! blended along x first. Each source row is blended along x once (the last two are kept, so an
//! upscale reuses them), and the vertical blend is a straight pass over two buffers the compiler
//! vectorises. Every output value is computed by the same f32 operations, in the same order, as
//! the direct formula `(a·(1-fx) + b·fx)·(1-fy) + (c·(1-fx) + d·fx)·fy`, so the result is the
//! direct formula's to the bit. Coordinates follow the half-pixel convention of ONNX `Resize`
//! (`coordinate_transformation_mode = half_pixel`, edges clamped). Nearest copies elements as they
//! are. A window is read in place through its row stride, so a crop is never copied out first.

use weir_engine::spec::Interpolation;

/// An image, or a window of one, read in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View<'a, T> {
    /// The elements from the window's first pixel on.
    pub data: &'a [T],
    /// Elements between the starts of consecutive rows.
    pub stride: usize,
    /// Rows.
    pub height: usize,
    /// Pixels per row.
    pub width: usize,
    /// Elements per pixel.
    pub channels: usize,
}

impl<'a, T> View<'a, T> {
    /// A whole image of `[height, width, channels]`, row-major.
    pub fn whole(data: &'a [T], [height, width, channels]: [usize; 3]) -> Self {
        View {
            data,
            stride: width * channels,
            height,
            width,
            channels,
        }
    }

    fn row(&self, y: usize) -> &'a [T] {
        let start = y * self.stride;
        &self.data[start..start + self.width * self.channels]
    }
}

/// What an element is as f32 and back: u8 (rounded and clamped back) and f32.
pub(crate) trait Sample: Copy {
    /// As f32.
    fn to_f32(self) -> f32;
    /// A blended value stored as this type.
    fn from_f32(v: f32) -> Self;
}

impl Sample for u8 {
    fn to_f32(self) -> f32 {
        f32::from(self)
    }
    fn from_f32(v: f32) -> Self {
        v.round().clamp(0.0, 255.0) as u8
    }
}

impl Sample for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
}

/// `src` resampled to `[out_h, out_w]`, appended to `out`. `src` has at least one pixel.
pub(crate) fn resample<T: Sample>(
    src: View<'_, T>,
    [out_h, out_w]: [usize; 2],
    interpolation: Interpolation,
    out: &mut Vec<T>,
) {
    let (h, w, c) = (src.height, src.width, src.channels);
    out.reserve(out_h * out_w * c);
    match interpolation {
        Interpolation::Nearest => {
            // The input pixel whose area [i, i + 1) holds the output pixel's centre.
            let xs: Vec<usize> = (0..out_w)
                .map(|ox| ((ox * w * 2 + w) / (out_w * 2)).min(w - 1))
                .collect();
            for oy in 0..out_h {
                let row = src.row(((oy * h * 2 + h) / (out_h * 2)).min(h - 1));
                for &x in &xs {
                    out.extend_from_slice(&row[x * c..(x + 1) * c]);
                }
            }
        }
        Interpolation::Bilinear => {
            let xs: Vec<(usize, usize, f32)> = (0..out_w)
                .map(|ox| neighbours(source(ox, w, out_w), w))
                .collect();
            // Source rows blended along x: (row index, values), the last two computed.
            let mut upper: (usize, Vec<f32>) = (usize::MAX, Vec::with_capacity(out_w * c));
            let mut lower: (usize, Vec<f32>) = (usize::MAX, Vec::with_capacity(out_w * c));
            let mut blended = vec![0.0f32; out_w * c];
            for oy in 0..out_h {
                let (y0, y1, fy) = neighbours(source(oy, h, out_h), h);
                if upper.0 != y0 {
                    if lower.0 == y0 {
                        std::mem::swap(&mut upper, &mut lower);
                    } else {
                        along_x(src.row(y0), c, &xs, &mut upper.1);
                        upper.0 = y0;
                    }
                }
                if lower.0 != y1 {
                    along_x(src.row(y1), c, &xs, &mut lower.1);
                    lower.0 = y1;
                }
                for ((o, &top), &bottom) in blended.iter_mut().zip(&upper.1).zip(&lower.1) {
                    *o = top * (1.0 - fy) + bottom * fy;
                }
                out.extend(blended.iter().map(|&v| T::from_f32(v)));
            }
        }
    }
}

/// One source row blended along x into `into`: output pixel `i` mixes pixels `xs[i].0` and
/// `xs[i].1` with weight `xs[i].2` on the second.
fn along_x<T: Sample>(row: &[T], c: usize, xs: &[(usize, usize, f32)], into: &mut Vec<f32>) {
    into.clear();
    for &(x0, x1, fx) in xs {
        let (a, b) = (&row[x0 * c..(x0 + 1) * c], &row[x1 * c..(x1 + 1) * c]);
        into.extend(
            a.iter()
                .zip(b)
                .map(|(&a, &b)| a.to_f32() * (1.0 - fx) + b.to_f32() * fx),
        );
    }
}

/// The source coordinate of output index `o` along an axis of `inn` → `out` samples (half-pixel).
fn source(o: usize, inn: usize, out: usize) -> f32 {
    (o as f32 + 0.5) * inn as f32 / out as f32 - 0.5
}

/// The two samples around coordinate `s` on an axis of `n` (clamped) and the weight of the second.
fn neighbours(s: f32, n: usize) -> (usize, usize, f32) {
    let s = s.clamp(0.0, (n - 1) as f32);
    let lo = s.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    (lo, hi, s - lo as f32)
}
