//! Resampling one HWC image (or a window of one) to another height and width, appended to an
//! output buffer: what `resize` does to each row and `crop_boxes` to each crop.
//!
//! Bilinear resampling is separable: each output row is a blend of two source rows, each of those
//! blended along x first. Each source row is converted to f32 in one pass and blended along x once
//! (the last two are kept, so an upscale reuses them); the vertical blend and the rounding back to
//! u8 are one straight pass over two buffers, in operations the compiler vectorises (no `round`,
//! which is a libm call per element on x86-64's baseline). Every output value is computed by the
//! same f32 operations, in the same order, as the direct formula
//! `(a·(1-fx) + b·fx)·(1-fy) + (c·(1-fx) + d·fx)·fy`, and rounded as `round` does, so the result
//! is the direct formula's to the bit. Coordinates follow the half-pixel convention of ONNX
//! `Resize` (`coordinate_transformation_mode = half_pixel`, edges clamped). Nearest copies
//! elements as they are. A window is read in place through its row stride, so a crop is never
//! copied out first.

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
    /// A blended value stored as this type.
    fn from_f32(v: f32) -> Self;
    /// `row` as f32: itself, or converted into `scratch` in one pass (which vectorises, where
    /// converting each element as it is read does not).
    fn row_f32<'a>(row: &'a [Self], scratch: &'a mut Vec<f32>) -> &'a [f32];
}

impl Sample for u8 {
    /// `v.round().clamp(0.0, 255.0) as u8` to the bit (half away from zero, NaN to 0) in
    /// operations that vectorise: `round` is a call into libm per element on x86-64's baseline
    /// and a saturating `as` is a dozen scalar instructions. Adding 2^23 to a value in `[0, 255]`
    /// rounds it to the nearest integer, ties to even, into the sum's low mantissa bits; a tie
    /// that went down (`v` half above the integer) goes up instead. The other steps are exact.
    fn from_f32(v: f32) -> Self {
        const TWO_23: f32 = 8_388_608.0;
        // Not `clamp`, which keeps NaN: `max` maps it to 0, as the saturating cast does.
        #[allow(clippy::manual_clamp)]
        let v = v.max(0.0).min(255.0);
        let sum = v + TWO_23;
        let tie_went_down = v - (sum - TWO_23) == 0.5;
        (sum.to_bits() as u8) + u8::from(tie_went_down)
    }
    fn row_f32<'a>(row: &'a [u8], scratch: &'a mut Vec<f32>) -> &'a [f32] {
        scratch.clear();
        scratch.extend(row.iter().map(|&v| f32::from(v)));
        scratch
    }
}

impl Sample for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn row_f32<'a>(row: &'a [f32], _: &'a mut Vec<f32>) -> &'a [f32] {
        row
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
            let taps: Vec<Tap> = (0..out_w)
                .map(|ox| Tap::new(neighbours(source(ox, w, out_w), w), c))
                .collect();
            // Source rows blended along x: (row index, values), the last two computed.
            let mut upper: (usize, Vec<f32>) = (usize::MAX, Vec::with_capacity(out_w * c));
            let mut lower: (usize, Vec<f32>) = (usize::MAX, Vec::with_capacity(out_w * c));
            let mut scratch = Vec::with_capacity(w * c);
            for oy in 0..out_h {
                let (y0, y1, fy) = neighbours(source(oy, h, out_h), h);
                if upper.0 != y0 {
                    if lower.0 == y0 {
                        std::mem::swap(&mut upper, &mut lower);
                    } else {
                        along_x(
                            T::row_f32(src.row(y0), &mut scratch),
                            c,
                            &taps,
                            &mut upper.1,
                        );
                        upper.0 = y0;
                    }
                }
                if lower.0 != y1 {
                    along_x(
                        T::row_f32(src.row(y1), &mut scratch),
                        c,
                        &taps,
                        &mut lower.1,
                    );
                    lower.0 = y1;
                }
                let (w_top, w_bottom) = (1.0 - fy, fy);
                out.extend(
                    upper
                        .1
                        .iter()
                        .zip(&lower.1)
                        .map(|(&top, &bottom)| T::from_f32(top * w_top + bottom * w_bottom)),
                );
            }
        }
    }
}

/// Where one output pixel reads a source row: the first elements of its two neighbours and
/// their weights (`1 - fx` and `fx`, each computed once).
#[derive(Debug, Clone, Copy)]
struct Tap {
    first: usize,
    second: usize,
    w_first: f32,
    w_second: f32,
}

impl Tap {
    fn new((x0, x1, fx): (usize, usize, f32), c: usize) -> Tap {
        Tap {
            first: x0 * c,
            second: x1 * c,
            w_first: 1.0 - fx,
            w_second: fx,
        }
    }
}

/// One source row blended along x into `into`, one output pixel per tap. Three channels (the
/// common case) get a loop of their own, which the compiler unrolls.
fn along_x(row: &[f32], c: usize, taps: &[Tap], into: &mut Vec<f32>) {
    // Every row of a resample has the same length: the buffer is sized (and zeroed) once.
    if into.len() != taps.len() * c {
        into.clear();
        into.resize(taps.len() * c, 0.0);
    }
    if c == 3 {
        let pixel = |at: usize| -> &[f32; 3] {
            row[at..at + 3]
                .try_into()
                .unwrap_or_else(|_| unreachable!())
        };
        for (o, t) in into.chunks_exact_mut(3).zip(taps) {
            let (a, b) = (pixel(t.first), pixel(t.second));
            o[0] = a[0] * t.w_first + b[0] * t.w_second;
            o[1] = a[1] * t.w_first + b[1] * t.w_second;
            o[2] = a[2] * t.w_first + b[2] * t.w_second;
        }
    } else {
        for (o, t) in into.chunks_exact_mut(c).zip(taps) {
            let (a, b) = (&row[t.first..t.first + c], &row[t.second..t.second + c]);
            for ((v, &a), &b) in o.iter_mut().zip(a).zip(b) {
                *v = a * t.w_first + b * t.w_second;
            }
        }
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
