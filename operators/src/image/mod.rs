//! Image pre-processing ops: decode, resize, cast, transpose, computed column-wise on the worker;
//! the region finder and the window ops (crop, pad, slice) live in their own modules.
//!
//! Each function takes a whole column and computes every row on its own shape, so a column whose
//! rows are images of different sizes (what `decode_image` yields) works as a uniform one does.
//! Decoding reads the header first and refuses an image declaring more than `max_pixels` before a
//! pixel buffer is allocated; every size product is checked. A `draft` size decodes a JPEG at a
//! reduced DCT scale where one keeps it at least that size (Pillow's `Image.draft`). Semantics
//! are those documented on the spec types in `weir_engine::spec`. Resizing follows the half-pixel
//! convention of ONNX `Resize` (`coordinate_transformation_mode = half_pixel`, edges clamped), so
//! a model trained on such input sees the same values; the separable resampler is in
//! [`resample`]. Each op reads its input column in place and writes every row into one output
//! buffer, which becomes the output column's Arrow buffer without a copy.

pub mod crop_boxes;
pub mod preprocess;
pub mod regions;
mod resample;
pub mod window;

use std::io::Cursor;

use half::{bf16, f16};
use image::ImageFormat;
use weir_engine::batch::TensorColumn;
use weir_engine::spec::{ImageSize, Interpolation};
use weir_engine::tensor::{element_count, DType, TensorData};

use crate::column::shaped_like;

/// Row by row: the one encoded image each row holds, decoded to `u8 [height, width, 3]` RGB.
///
/// # Errors
/// A message naming the row when it does not hold exactly one element, is not a JPEG or PNG,
/// declares more than `max_pixels` pixels, or is corrupt.
pub fn decode(
    input: &TensorColumn,
    max_pixels: u64,
    draft: Option<ImageSize>,
) -> Result<TensorColumn, String> {
    let mut shapes = Vec::with_capacity(input.len());
    let mut data: Vec<u8> = Vec::new();
    for r in 0..input.len() {
        let row = input.row(r);
        let bytes = match &row.data {
            TensorData::Bytes(v) if v.len() == 1 => &v[0],
            _ => {
                return Err(format!(
                    "row {r}: expected one encoded image, got {} elements of {}",
                    row.data.len(),
                    row.dtype()
                ))
            }
        };
        let (shape, pixels) =
            decode_one(bytes, max_pixels, draft).map_err(|e| format!("row {r}: {e}"))?;
        // The first image's buffer becomes the column's (one image per batch is the usual case).
        if data.is_empty() {
            data = pixels;
        } else {
            data.extend_from_slice(&pixels);
        }
        shapes.push(shape);
    }
    TensorColumn::from_shapes("output", shapes, TensorData::U8(data)).map_err(|e| e.to_string())
}

/// A decoded picture: its `[height, width, 3]` shape and RGB bytes.
type Decoded = (Vec<usize>, Vec<u8>);

/// One JPEG or PNG decoded to RGB, its declared size checked before decoding; a JPEG at the
/// reduced scale `draft` asks for, where one keeps it at least that size.
fn decode_one(bytes: &[u8], max_pixels: u64, draft: Option<ImageSize>) -> Result<Decoded, String> {
    let format = image::guess_format(bytes).map_err(|_| "not a JPEG or PNG image".to_string())?;
    if !matches!(format, ImageFormat::Jpeg | ImageFormat::Png) {
        return Err(format!(
            "{format:?} images are not accepted; send JPEG or PNG"
        ));
    }
    if let (Some(draft), ImageFormat::Jpeg) = (draft, format) {
        if let Some(decoded) = decode_jpeg_draft(bytes, max_pixels, draft)? {
            return Ok(decoded);
        }
    }
    let reader = image::io::Reader::with_format(Cursor::new(bytes), format);
    let (width, height) = reader
        .into_dimensions()
        .map_err(|e| format!("unreadable {format:?} header: {e}"))?;
    let pixels = within_max_pixels(width, height, max_pixels)?;
    let mut reader = image::io::Reader::with_format(Cursor::new(bytes), format);
    let mut limits = image::io::Limits::default();
    limits.max_image_width = Some(width);
    limits.max_image_height = Some(height);
    limits.max_alloc = pixels.checked_mul(16);
    reader.limits(limits);
    let decoded = reader
        .decode()
        .map_err(|e| format!("corrupt {format:?} image: {e}"))?;
    let rgb = decoded.into_rgb8();
    let shape = vec![rgb.height() as usize, rgb.width() as usize, 3];
    Ok((shape, rgb.into_raw()))
}

/// The pixel count `width` × `height`, or why it is over `max_pixels`.
fn within_max_pixels(width: u32, height: u32, max_pixels: u64) -> Result<u64, String> {
    let pixels = u64::from(width) * u64::from(height);
    if pixels > max_pixels {
        return Err(format!(
            "image declares {width}x{height} = {pixels} pixels, more than max_pixels = {max_pixels}"
        ));
    }
    Ok(pixels)
}

/// The size to ask the JPEG decoder for under `draft`: the sides at the smallest of the DCT
/// scales 1/8, 1/4 and 1/2 at which both, rounded up as the decoder rounds them, are still at
/// least the draft's; `None` when only the whole picture is.
fn draft_scale(width: u32, height: u32, draft: ImageSize) -> Option<(u16, u16)> {
    let scaled = |side: u32, eighths: u64| (u64::from(side) * eighths).div_ceil(8);
    [1, 2, 4].into_iter().find_map(|eighths| {
        let (w, h) = (scaled(width, eighths), scaled(height, eighths));
        if w < draft.width as u64 || h < draft.height as u64 {
            return None;
        }
        // A JPEG's sides are 16-bit, so a reduced one is too.
        Some((u16::try_from(w).ok()?, u16::try_from(h).ok()?))
    })
}

/// A JPEG decoded at the reduced scale `draft` allows, by the decoder `image` uses (jpeg-decoder,
/// which scales in its inverse DCT), to RGB as a whole decode converts it; `None` when it is to be
/// decoded whole: no reduced scale keeps it at least `draft`'s size, or it is lossless (no DCT to
/// reduce), CMYK or 16-bit (left to `image`'s conversions).
fn decode_jpeg_draft(
    bytes: &[u8],
    max_pixels: u64,
    draft: ImageSize,
) -> Result<Option<Decoded>, String> {
    use jpeg_decoder::{CodingProcess, Decoder, PixelFormat};
    let mut decoder = Decoder::new(bytes);
    decoder
        .read_info()
        .map_err(|e| format!("unreadable Jpeg header: {e}"))?;
    let info = decoder
        .info()
        .ok_or_else(|| "unreadable Jpeg header".to_string())?;
    let (width, height) = (u32::from(info.width), u32::from(info.height));
    let pixels = within_max_pixels(width, height, max_pixels)?;
    let channels = match info.pixel_format {
        PixelFormat::RGB24 => 3,
        PixelFormat::L8 => 1,
        PixelFormat::L16 | PixelFormat::CMYK32 => return Ok(None),
    };
    if info.coding_process == CodingProcess::Lossless {
        return Ok(None);
    }
    let Some((w, h)) = draft_scale(width, height, draft) else {
        return Ok(None);
    };
    let (got_w, got_h) = decoder
        .scale(w, h)
        .map_err(|e| format!("corrupt Jpeg image: {e}"))?;
    let (got_w, got_h) = (usize::from(got_w), usize::from(got_h));
    // The decoder picks the smallest scale reaching the request on either side; on a picture a
    // few pixels wide that can be a smaller one than asked for, which would undercut the draft.
    if got_w < draft.width || got_h < draft.height {
        return Ok(None);
    }
    // Its output buffer, bounded as a whole decode's is (at most 4 bytes a pixel).
    decoder.set_max_decoding_buffer_size(
        usize::try_from(pixels.saturating_mul(4)).unwrap_or(usize::MAX),
    );
    let data = decoder
        .decode()
        .map_err(|e| format!("corrupt Jpeg image: {e}"))?;
    if Some(data.len())
        != got_w
            .checked_mul(got_h)
            .and_then(|n| n.checked_mul(channels))
    {
        return Err(format!(
            "corrupt Jpeg image: {} bytes decoded for {got_w}x{got_h}",
            data.len()
        ));
    }
    let rgb = if channels == 3 {
        data
    } else {
        data.iter().flat_map(|&v| [v, v, v]).collect()
    };
    Ok(Some((vec![got_h, got_w, 3], rgb)))
}

/// Row by row: each `[h, w, c]` image (u8 or f32) resized to `[height, width, c]`.
///
/// # Errors
/// A message when a row is not rank 3 or the dtype is neither u8 nor f32.
pub fn resize(
    input: &TensorColumn,
    height: usize,
    width: usize,
    interpolation: Interpolation,
) -> Result<TensorColumn, String> {
    let mut shapes = Vec::with_capacity(input.len());
    for r in 0..input.len() {
        let shape = input.row_shape(r);
        let [h, w, c] = shape[..] else {
            return Err(format!(
                "row {r}: shape {shape:?} is not [height, width, channels]"
            ));
        };
        if h == 0 || w == 0 {
            return Err(format!(
                "row {r}: an empty image ({h}x{w}) cannot be resized"
            ));
        }
        let out = vec![height, width, c];
        element_count(&out).ok_or_else(|| format!("row {r}: output size overflows"))?;
        shapes.push((out, [h, w, c]));
    }
    fn each<T: resample::Sample>(
        input: &TensorColumn,
        v: &[T],
        shapes: &[(Vec<usize>, [usize; 3])],
        interpolation: Interpolation,
    ) -> Vec<T> {
        let mut out = Vec::new();
        for (r, (to, from)) in shapes.iter().enumerate() {
            let view = resample::View::whole(&v[input.row_range(r)], *from);
            resample::resample(view, [to[0], to[1]], interpolation, &mut out);
        }
        out
    }
    let data = if let Some(v) = input.values::<u8>() {
        TensorData::U8(each(input, v, &shapes, interpolation))
    } else if let Some(v) = input.f32_values() {
        TensorData::F32(each(input, v, &shapes, interpolation))
    } else {
        return Err(format!("resize reads u8 or f32, got {}", input.dtype()));
    };
    let shapes = shapes.into_iter().map(|(to, _)| to).collect();
    TensorColumn::from_shapes("output", shapes, data).map_err(|e| e.to_string())
}

/// Every element converted to `to` (numbers as Rust's `as`; to bool, non-zero is true).
///
/// # Errors
/// A message when the column holds bytes or `to` is bytes.
pub fn cast(input: &TensorColumn, to: DType) -> Result<TensorColumn, String> {
    let data = input.data();
    let data = if data.dtype() == to {
        data
    } else {
        cast_data(&data, to)?
    };
    shaped_like(input, "output", data)
}

fn cast_data(data: &TensorData, to: DType) -> Result<TensorData, String> {
    macro_rules! convert {
        ($v:expr) => {
            match to {
                DType::Bool => TensorData::Bool($v.map(|x| x != 0.0).collect()),
                DType::U8 => TensorData::U8($v.map(|x| x as u8).collect()),
                DType::U16 => TensorData::U16($v.map(|x| x as u16).collect()),
                DType::U32 => TensorData::U32($v.map(|x| x as u32).collect()),
                DType::U64 => TensorData::U64($v.map(|x| x as u64).collect()),
                DType::I8 => TensorData::I8($v.map(|x| x as i8).collect()),
                DType::I16 => TensorData::I16($v.map(|x| x as i16).collect()),
                DType::I32 => TensorData::I32($v.map(|x| x as i32).collect()),
                DType::I64 => TensorData::I64($v.map(|x| x as i64).collect()),
                DType::F16 => TensorData::F16($v.map(f16::from_f64).collect()),
                DType::F32 => TensorData::F32($v.map(|x| x as f32).collect()),
                DType::F64 => TensorData::F64($v.collect()),
                DType::Bf16 => TensorData::Bf16($v.map(bf16::from_f64).collect()),
                DType::Bytes => return Err("cannot cast to bytes".into()),
            }
        };
    }
    // Integers wider than f64's mantissa go through i64/u64 directly so they stay exact. Pixels
    // to f32, the cast of every image pipeline, skip the f64 detour (it is exact either way).
    Ok(match (data, to) {
        (TensorData::U8(v), DType::F32) => {
            TensorData::F32(v.iter().map(|&x| f32::from(x)).collect())
        }
        (TensorData::I64(v), _) if !to.is_float() && to != DType::Bool => {
            convert_int(v.iter().map(|&x| i128::from(x)), to)
        }
        (TensorData::U64(v), _) if !to.is_float() && to != DType::Bool => {
            convert_int(v.iter().map(|&x| i128::from(x)), to)
        }
        _ => {
            let values = data
                .to_f64_lossy()
                .ok_or_else(|| format!("cannot cast {} to {to}", data.dtype()))?;
            convert!(values.into_iter())
        }
    })
}

/// Wide integers to an integer dtype, saturating as `as` does for floats.
fn convert_int(v: impl Iterator<Item = i128>, to: DType) -> TensorData {
    macro_rules! sat {
        ($t:ty, $variant:ident) => {
            TensorData::$variant(
                v.map(|x| x.clamp(i128::from(<$t>::MIN), i128::from(<$t>::MAX)) as $t)
                    .collect(),
            )
        };
    }
    match to {
        DType::U8 => sat!(u8, U8),
        DType::U16 => sat!(u16, U16),
        DType::U32 => sat!(u32, U32),
        DType::U64 => sat!(u64, U64),
        DType::I8 => sat!(i8, I8),
        DType::I16 => sat!(i16, I16),
        DType::I32 => sat!(i32, I32),
        _ => sat!(i64, I64),
    }
}

/// Row by row: dimensions permuted, output dimension `i` being input dimension `perm[i]`.
///
/// # Errors
/// A message when a row's rank is not `perm.len()`.
pub fn transpose(input: &TensorColumn, perm: &[usize]) -> Result<TensorColumn, String> {
    let mut shapes = Vec::with_capacity(input.len());
    let mut data = TensorData::empty(input.dtype());
    for r in 0..input.len() {
        let shape = input.row_shape(r);
        if shape.len() != perm.len() || perm.iter().any(|&a| a >= shape.len()) {
            return Err(format!(
                "row {r}: shape {shape:?} does not fit perm {perm:?}"
            ));
        }
        let src = input
            .data_range(input.row_range(r))
            .ok_or_else(|| format!("row {r} without its elements"))?;
        let out_shape: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
        let mut strides = vec![1usize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        let out_strides: Vec<usize> = perm.iter().map(|&a| strides[a]).collect();
        data.extend(permute(&src, &out_shape, &out_strides))
            .map_err(|e| e.to_string())?;
        shapes.push(out_shape);
    }
    TensorColumn::from_shapes("output", shapes, data).map_err(|e| e.to_string())
}

/// The elements of `src` in the order of an output of `out_shape` whose index steps by
/// `out_strides` in `src` along each dimension: the source offset is kept as the output index
/// advances, so each element costs a step, not a dot product.
fn permute(src: &TensorData, out_shape: &[usize], out_strides: &[usize]) -> TensorData {
    fn walk<T: Clone>(v: &[T], shape: &[usize], strides: &[usize]) -> Vec<T> {
        let mut out = Vec::with_capacity(v.len());
        if shape.contains(&0) {
            return out;
        }
        let mut index = vec![0usize; shape.len()];
        let mut offset = 0usize;
        for _ in 0..v.len() {
            out.push(v[offset].clone());
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                offset += strides[d];
                if index[d] < shape[d] {
                    break;
                }
                offset -= strides[d] * shape[d];
                index[d] = 0;
            }
        }
        out
    }
    macro_rules! each {
        ($($variant:ident),*) => {
            match src {
                $(TensorData::$variant(v) => TensorData::$variant(walk(v, out_shape, out_strides)),)*
            }
        };
    }
    each!(Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16, Bytes)
}

/// The elements of `src` at `order`, in that order.
pub(crate) fn gather(src: &TensorData, order: &[usize]) -> TensorData {
    macro_rules! pick {
        ($($variant:ident),*) => {
            match src {
                $(TensorData::$variant(v) => {
                    TensorData::$variant(order.iter().map(|&i| v[i].clone()).collect())
                })*
            }
        };
    }
    pick!(Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16, Bytes)
}

#[cfg(test)]
mod tests;
