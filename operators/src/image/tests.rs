//! The image ops against references: the image crate's own decode of the same bytes, resizing
//! computed here from its definition, casts and transposes written out by hand.

use image::{ImageOutputFormat, RgbImage};

use weir_engine::tensor::Tensor;

use super::*;

/// A small picture with every pixel different, so a misplaced pixel shows.
fn picture(w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x * 40) as u8, (y * 30) as u8, (x + y * w) as u8])
    })
}

fn encoded(img: &RgbImage, format: ImageOutputFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn bytes_column(images: Vec<Vec<u8>>) -> TensorColumn {
    let rows = images.len();
    TensorColumn::from_data("x", vec![1], rows, TensorData::Bytes(images)).unwrap()
}

#[test]
fn png_decodes_to_its_pixels_and_jpeg_as_the_image_crate_decodes_it() {
    let png_img = picture(5, 3);
    let jpeg_img = picture(8, 6);
    let png = encoded(&png_img, ImageOutputFormat::Png);
    let jpeg = encoded(&jpeg_img, ImageOutputFormat::Jpeg(90));
    let out = decode(&bytes_column(vec![png, jpeg.clone()]), 1 << 20, None).unwrap();
    assert_eq!(out.row_shape(0), vec![3, 5, 3]);
    assert_eq!(out.row_shape(1), vec![6, 8, 3]);
    assert_eq!(
        out.row(0).values::<u8>().unwrap(),
        png_img.as_raw().as_slice()
    );
    let reference = image::load_from_memory(&jpeg).unwrap().into_rgb8();
    assert_eq!(
        out.row(1).values::<u8>().unwrap(),
        reference.as_raw().as_slice()
    );
}

#[test]
fn corrupt_and_foreign_bytes_are_refused() {
    let mut jpeg = encoded(&picture(16, 16), ImageOutputFormat::Jpeg(90));
    jpeg.truncate(jpeg.len() / 2);
    let e = decode(&bytes_column(vec![jpeg]), 1 << 20, None).unwrap_err();
    assert!(e.contains("row 0") && e.contains("Jpeg"), "{e}");
    let e = decode(&bytes_column(vec![b"hello".to_vec()]), 1 << 20, None).unwrap_err();
    assert!(e.contains("not a JPEG or PNG"), "{e}");
}

/// CRC-32 (ISO 3309, as PNG chunks use), bit by bit.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_png_declaring_too_many_pixels_is_refused_before_decoding() {
    let mut png = encoded(&picture(2, 2), ImageOutputFormat::Png);
    // IHDR: length at 8, type at 12, width at 16, height at 20, CRC over type + data at 29.
    png[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    png[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    let crc = crc32(&png[12..29]);
    png[29..33].copy_from_slice(&crc.to_be_bytes());
    let e = decode(&bytes_column(vec![png]), 16_777_216, None).unwrap_err();
    assert!(
        e.contains("100000x100000") && e.contains("max_pixels"),
        "{e}"
    );
}

/// A smooth picture (two gradients and a soft diagonal), as camera pictures mostly are at the
/// scale of an 8 × 8 block, so a reduced DCT scale stays close to a box average of it.
fn smooth(w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([
            (x * 255 / w) as u8,
            (y * 255 / h) as u8,
            ((x + y) * 255 / (w + h)) as u8,
        ])
    })
}

fn draft(height: usize, width: usize) -> Option<ImageSize> {
    Some(ImageSize { height, width })
}

#[test]
fn a_jpeg_draft_decodes_at_the_smallest_dct_scale_still_as_large_on_both_sides() {
    let jpeg = encoded(&smooth(200, 120), ImageOutputFormat::Jpeg(95));
    // [height, width] of the draft → the picture's sides at 1/8 (25 × 15), 1/4 (50 × 30), 1/2
    // (100 × 60) or whole: the first scale at which both are at least the draft's.
    for (want, shape) in [
        ((10, 20), [15, 25, 3]),
        ((15, 25), [15, 25, 3]),
        ((16, 25), [30, 50, 3]),
        ((40, 40), [60, 100, 3]),
        ((60, 100), [60, 100, 3]),
        ((61, 100), [120, 200, 3]),
        ((500, 500), [120, 200, 3]),
    ] {
        let out = decode(
            &bytes_column(vec![jpeg.clone()]),
            1 << 20,
            draft(want.0, want.1),
        );
        assert_eq!(out.unwrap().row_shape(0), shape.to_vec(), "draft {want:?}");
    }
}

#[test]
fn a_halved_jpeg_is_close_to_the_whole_decode_averaged_over_each_two_by_two() {
    let jpeg = encoded(&smooth(256, 160), ImageOutputFormat::Jpeg(95));
    let whole = image::load_from_memory(&jpeg).unwrap().into_rgb8();
    let out = decode(&bytes_column(vec![jpeg]), 1 << 20, draft(80, 128)).unwrap();
    assert_eq!(out.row_shape(0), vec![80, 128, 3]);
    let half = out.row(0).values::<u8>().unwrap().to_vec();
    let mut total = 0.0f64;
    for y in 0..80u32 {
        for x in 0..128u32 {
            for c in 0..3 {
                let sum: u32 = [(0, 0), (1, 0), (0, 1), (1, 1)]
                    .iter()
                    .map(|(dx, dy)| u32::from(whole.get_pixel(2 * x + dx, 2 * y + dy)[c]))
                    .sum();
                let box_average = f64::from(sum) / 4.0;
                let i = ((y * 128 + x) * 3) as usize + c;
                total += (f64::from(half[i]) - box_average).abs();
            }
        }
    }
    let mean = total / f64::from(80 * 128 * 3);
    // The scaled inverse DCT keeps each block's low frequencies: on a smooth picture it is
    // within about a level of the box average (the whole decode's own JPEG error is larger).
    assert!(mean < 1.5, "mean absolute difference {mean}");
}

#[test]
fn a_draft_leaves_png_and_a_jpeg_no_larger_than_it_decoded_whole_to_the_bit() {
    let png = encoded(&smooth(64, 48), ImageOutputFormat::Png);
    let jpeg = encoded(&smooth(64, 48), ImageOutputFormat::Jpeg(90));
    let png_only = decode(&bytes_column(vec![png.clone()]), 1 << 20, draft(8, 8));
    assert_eq!(png_only.unwrap().row_shape(0), vec![48, 64, 3]);
    let column = bytes_column(vec![png, jpeg]);
    let whole = decode(&column, 1 << 20, None).unwrap();
    let drafted = decode(&column, 1 << 20, draft(48, 64)).unwrap();
    assert_eq!(drafted.row_shape(1), vec![48, 64, 3]);
    for r in 0..2 {
        assert_eq!(
            whole.row(r).values::<u8>(),
            drafted.row(r).values::<u8>(),
            "row {r}"
        );
    }
}

#[test]
fn a_draft_is_never_undercut_on_a_picture_a_few_pixels_across() {
    // 1 pixel wide: at 1/8 and 1/4 the width is still 1, so the decoder, which takes the first
    // scale reaching the request on either side, would pick 1/8 for a request of 1/4's size.
    for (w, h, want) in [
        (1, 100, (20, 1)),
        (100, 1, (1, 20)),
        (3, 40, (9, 1)),
        (9, 9, (2, 2)),
    ] {
        let jpeg = encoded(&smooth(w, h), ImageOutputFormat::Jpeg(90));
        let out = decode(&bytes_column(vec![jpeg]), 1 << 20, draft(want.0, want.1)).unwrap();
        let shape = out.row_shape(0);
        assert!(
            shape[0] >= want.0
                && shape[1] >= want.1
                && shape[0] <= h as usize
                && shape[1] <= w as usize,
            "{w}x{h} with draft {want:?}: {shape:?}"
        );
    }
}

#[test]
fn a_grayscale_jpeg_drafts_to_rgb() {
    let gray = image::GrayImage::from_fn(64, 64, |x, y| image::Luma([((x + y) * 2) as u8]));
    let mut jpeg = Cursor::new(Vec::new());
    gray.write_to(&mut jpeg, ImageOutputFormat::Jpeg(90))
        .unwrap();
    let out = decode(
        &bytes_column(vec![jpeg.into_inner()]),
        1 << 20,
        draft(16, 16),
    )
    .unwrap();
    assert_eq!(out.row_shape(0), vec![16, 16, 3]);
    let row = out.row(0);
    let v = row.values::<u8>().unwrap();
    assert!(v.chunks(3).all(|p| p[0] == p[1] && p[1] == p[2]));
}

#[test]
fn a_drafted_jpeg_declaring_too_many_pixels_is_refused_before_decoding() {
    let mut jpeg = encoded(&smooth(16, 16), ImageOutputFormat::Jpeg(90));
    // The baseline frame header (FF C0): length, precision, then height and width, 16-bit each.
    let sof = jpeg.windows(2).position(|m| m == [0xFF, 0xC0]).unwrap();
    jpeg[sof + 5..sof + 7].copy_from_slice(&60_000u16.to_be_bytes());
    jpeg[sof + 7..sof + 9].copy_from_slice(&60_000u16.to_be_bytes());
    let e = decode(&bytes_column(vec![jpeg]), 16_777_216, draft(224, 224)).unwrap_err();
    assert!(e.contains("60000x60000") && e.contains("max_pixels"), "{e}");
}

fn image_column(shape: [usize; 3], data: TensorData) -> TensorColumn {
    TensorColumn::from_data("x", shape.to_vec(), 1, data).unwrap()
}

#[test]
fn nearest_picks_the_pixel_holding_each_centre() {
    // 4 wide → 2 wide: centres at 1 and 3 fall in pixels 1 and 3; 2 high → 3 high: centres at
    // 1/3, 1, 5/3 fall in rows 0, 1, 1.
    let v: Vec<u8> = (0..8).collect();
    let out = resize(
        &image_column([2, 4, 1], TensorData::U8(v)),
        3,
        2,
        Interpolation::Nearest,
    )
    .unwrap();
    assert_eq!(out.uniform_shape(), Some(&[3, 2, 1][..]));
    assert_eq!(out.values::<u8>().unwrap(), &[1, 3, 5, 7, 5, 7]);
}

#[test]
fn bilinear_follows_the_half_pixel_formula() {
    let (h, w, oh, ow) = (3usize, 4usize, 5usize, 2usize);
    let v: Vec<f32> = (0..h * w * 2).map(|i| (i * i % 17) as f32).collect();
    let out = resize(
        &image_column([h, w, 2], TensorData::F32(v.clone())),
        oh,
        ow,
        Interpolation::Bilinear,
    )
    .unwrap();
    let got = out.f32_values().unwrap();
    let clamp = |s: f32, n: usize| s.max(0.0).min((n - 1) as f32);
    for oy in 0..oh {
        for ox in 0..ow {
            for k in 0..2 {
                let sy = clamp((oy as f32 + 0.5) * h as f32 / oh as f32 - 0.5, h);
                let sx = clamp((ox as f32 + 0.5) * w as f32 / ow as f32 - 0.5, w);
                let (y0, x0) = (sy.floor() as usize, sx.floor() as usize);
                let (y1, x1) = ((y0 + 1).min(h - 1), (x0 + 1).min(w - 1));
                let p = |y: usize, x: usize| v[(y * w + x) * 2 + k];
                let (fy, fx) = (sy - y0 as f32, sx - x0 as f32);
                let want = p(y0, x0) * (1.0 - fy) * (1.0 - fx)
                    + p(y0, x1) * (1.0 - fy) * fx
                    + p(y1, x0) * fy * (1.0 - fx)
                    + p(y1, x1) * fy * fx;
                let g = got[(oy * ow + ox) * 2 + k];
                assert!((g - want).abs() < 1e-4, "({oy}, {ox}, {k}): {g} vs {want}");
            }
        }
    }
}

#[test]
fn resize_keeps_each_row_of_its_own_size_apart() {
    let rows = [
        Tensor::new(vec![1, 1, 3], vec![10u8, 20, 30]),
        Tensor::new(vec![2, 2, 3], (0..12u8).collect::<Vec<_>>()),
    ];
    let refs: Vec<&Tensor> = rows.iter().collect();
    let col = TensorColumn::from_rows("x", DType::U8, &refs).unwrap();
    let out = resize(&col, 2, 2, Interpolation::Bilinear).unwrap();
    assert_eq!(out.uniform_shape(), Some(&[2, 2, 3][..]));
    let v = out.values::<u8>().unwrap();
    assert_eq!(&v[..12], &[10, 20, 30, 10, 20, 30, 10, 20, 30, 10, 20, 30]);
    assert_eq!(&v[12..], &(0..12u8).collect::<Vec<_>>()[..]);
}

#[test]
fn cast_converts_as_rust_does() {
    let col = TensorColumn::from_data(
        "x",
        vec![4],
        1,
        TensorData::F32(vec![-1.5, 0.0, 2.7, 300.0]),
    )
    .unwrap();
    assert_eq!(
        cast(&col, DType::U8).unwrap().values::<u8>().unwrap(),
        &[0, 0, 2, 255]
    );
    assert_eq!(
        cast(&col, DType::I64).unwrap().i64_values().unwrap(),
        &[-1, 0, 2, 300]
    );
    let flags = cast(&col, DType::Bool).unwrap().data();
    assert_eq!(flags, TensorData::Bool(vec![true, false, true, true]));
    let big =
        TensorColumn::from_data("x", vec![2], 1, TensorData::I64(vec![i64::MAX, -3])).unwrap();
    assert_eq!(
        cast(&big, DType::U64).unwrap().values::<u64>().unwrap(),
        &[i64::MAX as u64, 0]
    );
    let bytes = cast(
        &TensorColumn::from_data("x", vec![2], 1, TensorData::U8(vec![7, 255])).unwrap(),
        DType::F32,
    )
    .unwrap();
    assert_eq!(bytes.f32_values().unwrap(), &[7.0, 255.0]);
    let e = cast(&bytes_column(vec![vec![1]]), DType::F32).unwrap_err();
    assert!(e.contains("cannot cast"), "{e}");
}

#[test]
fn transpose_hwc_to_chw() {
    // [h=2, w=3, c=2]: element (y, x, k) = 100y + 10x + k.
    let mut v = Vec::new();
    for y in 0..2 {
        for x in 0..3 {
            for k in 0..2 {
                v.push(100 * y + 10 * x + k);
            }
        }
    }
    let col = TensorColumn::from_data("x", vec![2, 3, 2], 1, TensorData::I32(v)).unwrap();
    let out = transpose(&col, &[2, 0, 1]).unwrap();
    assert_eq!(out.uniform_shape(), Some(&[2, 2, 3][..]));
    assert_eq!(
        out.values::<i32>().unwrap(),
        &[0, 10, 20, 100, 110, 120, 1, 11, 21, 101, 111, 121]
    );
}

/// The bilinear formula computed per output element, as the resampler's reference: the same f32
/// operations in the same order, so the separable resampler must match it to the bit.
fn direct_bilinear(v: &[f32], [h, w, c]: [usize; 3], [oh, ow]: [usize; 2]) -> Vec<f32> {
    let near = |o: usize, inn: usize, out: usize| {
        let s = ((o as f32 + 0.5) * inn as f32 / out as f32 - 0.5).clamp(0.0, (inn - 1) as f32);
        let lo = s.floor() as usize;
        (lo, (lo + 1).min(inn - 1), s - lo as f32)
    };
    let at = |y: usize, x: usize, k: usize| v[(y * w + x) * c + k];
    let mut out = Vec::new();
    for oy in 0..oh {
        let (y0, y1, fy) = near(oy, h, oh);
        for ox in 0..ow {
            let (x0, x1, fx) = near(ox, w, ow);
            for k in 0..c {
                let top = at(y0, x0, k) * (1.0 - fx) + at(y0, x1, k) * fx;
                let bottom = at(y1, x0, k) * (1.0 - fx) + at(y1, x1, k) * fx;
                out.push(top * (1.0 - fy) + bottom * fy);
            }
        }
    }
    out
}

#[test]
fn separable_bilinear_is_the_direct_formula_to_the_bit_up_and_down() {
    for (h, w, oh, ow) in [
        (37, 53, 640, 640),
        (640, 1280, 48, 192),
        (5, 3, 5, 3),
        (1, 9, 4, 2),
    ] {
        let v: Vec<u8> = (0..h * w * 3).map(|i| (i * 7919 % 251) as u8).collect();
        let f: Vec<f32> = v.iter().map(|&x| f32::from(x)).collect();
        let want = direct_bilinear(&f, [h, w, 3], [oh, ow]);
        let got = resize(
            &image_column([h, w, 3], TensorData::F32(f)),
            oh,
            ow,
            Interpolation::Bilinear,
        )
        .unwrap();
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(got.f32_values().unwrap()),
            bits(&want),
            "{h}x{w} -> {oh}x{ow}"
        );
        let got = resize(
            &image_column([h, w, 3], TensorData::U8(v)),
            oh,
            ow,
            Interpolation::Bilinear,
        )
        .unwrap();
        let rounded: Vec<u8> = want
            .iter()
            .map(|x| x.round().clamp(0.0, 255.0) as u8)
            .collect();
        assert_eq!(
            got.values::<u8>().unwrap(),
            &rounded[..],
            "{h}x{w} -> {oh}x{ow} u8"
        );
    }
}

#[test]
fn u8_rounding_is_round_then_clamp_to_the_bit() {
    use super::resample::Sample;
    let reference = |v: f32| v.round().clamp(0.0, 255.0) as u8;
    // Every multiple of 2^-12 from -2 to 258, each half-integer's two neighbours, and the
    // values at the edges of f32.
    let grid = (-2 * 4096..=258 * 4096).map(|i| i as f32 / 4096.0);
    let halves = (-2..=258).flat_map(|k| {
        let half = k as f32 + 0.5;
        [half.next_down(), half, half.next_up()]
    });
    let edges = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::MAX,
        f32::MIN,
    ];
    for v in grid.chain(halves).chain(edges) {
        assert_eq!(<u8 as Sample>::from_f32(v), reference(v), "{v:e}");
    }
}
