//! `crop_boxes`: a detector's boxes, filtered and suppressed, each cropped out of the image and
//! resized — the per-request half of a fan-out (the dataflow's split makes each crop a part).
//!
//! Per request the op returns `image [n, height, width, c]`, `box f32 [n, 4]` and `score f32 [n]`,
//! `n` being the boxes kept; the split cuts them along that first axis. Boxes are made pixel
//! boxes first (normalised ones scaled by the image's size), rounded outwards to whole pixels and
//! clamped to the image; a box with a non-finite coordinate or score, or no pixel left, is dropped
//! before suppression. Non-maximum suppression is the greedy one of object detectors: best score
//! first (ties to the earlier box), a box is dropped when its intersection over union with a kept
//! one exceeds the threshold. Each crop is resized as it is read, in place in the image (no
//! copy of the image or the crop), and the output is bounded by `max_boxes × height × width × c`.

use weir_engine::batch::TensorColumn;
use weir_engine::spec::BoxCoordinates;
use weir_engine::tensor::{element_count, Tensor, TensorData};
use weir_engine::validate::CropBoxesOp;

use super::resample::{resample, View};

/// A kept box: its pixel bounds (`x1, y1, x2, y2`, whole pixels) and score.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Kept {
    bounds: [usize; 4],
    score: f32,
}

/// Applies `op` to `inputs` (image, boxes, and scores when the op has them).
///
/// # Errors
/// A message naming the row when its boxes are not `[n, 4]`, its scores not `[n]`, or its image
/// not `[height, width, channels]`.
pub fn apply(op: &CropBoxesOp, inputs: &[&TensorColumn]) -> Result<Vec<TensorColumn>, String> {
    let [image, boxes, rest @ ..] = inputs else {
        return Err("crop_boxes reads an image and boxes".into());
    };
    let scores = rest.first();
    let rows = image.len();
    let (mut kept_boxes, mut kept_scores) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    let mut crop_shapes = Vec::with_capacity(rows);
    // Every crop of every row, back to back: the image column's one buffer.
    let mut crops = Crops::new(image);
    for r in 0..rows {
        let shape = image.row_shape(r);
        let [h, w, c] = shape[..] else {
            return Err(format!(
                "row {r}: image shape {shape:?} is not [height, width, channels]"
            ));
        };
        let kept = select(op, boxes, scores.copied(), r, [h, w])?;
        let n = kept.len();
        let out_shape = [n, op.height, op.width, c];
        element_count(&out_shape).ok_or_else(|| format!("row {r}: crops overflow"))?;
        let range = image.row_range(r);
        for k in &kept {
            crops.cut(range.clone(), [w, c], k.bounds, op)?;
        }
        crop_shapes.push(out_shape.to_vec());
        kept_boxes.push(Tensor::new(
            vec![n, 4],
            kept.iter()
                .flat_map(|k| k.bounds.map(|v| v as f32))
                .collect::<Vec<f32>>(),
        ));
        kept_scores.push(Tensor::new(
            vec![n],
            kept.iter().map(|k| k.score).collect::<Vec<f32>>(),
        ));
    }
    let column = |name: &str, rows: &[Tensor]| {
        let refs: Vec<&Tensor> = rows.iter().collect();
        let dtype = rows.first().map_or(image.dtype(), Tensor::dtype);
        TensorColumn::from_rows(name, dtype, &refs).map_err(|e| e.to_string())
    };
    Ok(vec![
        TensorColumn::from_shapes("image", crop_shapes, crops.data).map_err(|e| e.to_string())?,
        column("box", &kept_boxes)?,
        column("score", &kept_scores)?,
    ])
}

/// Row `r`'s boxes that survive the score filter and suppression, best first, at most
/// `max_boxes`, as whole-pixel bounds inside an image of `[h, w]`.
fn select(
    op: &CropBoxesOp,
    boxes: &TensorColumn,
    scores: Option<&TensorColumn>,
    r: usize,
    [h, w]: [usize; 2],
) -> Result<Vec<Kept>, String> {
    let b = boxes.row(r);
    let TensorData::F32(coords) = &b.data else {
        return Err(format!("row {r}: boxes are {}, not f32", b.dtype()));
    };
    let [m, 4] = b.shape[..] else {
        return Err(format!(
            "row {r}: boxes have shape {:?}, not [n, 4]",
            b.shape
        ));
    };
    let score_values: Vec<f32> = match scores {
        None => vec![1.0; m],
        Some(col) => {
            let s = col.row(r);
            match (&s.data, &s.shape[..]) {
                (TensorData::F32(v), [n]) if *n == m => v.clone(),
                _ => {
                    return Err(format!(
                        "row {r}: {m} boxes but scores of shape {:?}",
                        s.shape
                    ))
                }
            }
        }
    };
    let (sx, sy) = match op.coordinates {
        BoxCoordinates::Pixels => (1.0, 1.0),
        BoxCoordinates::Normalized => (w as f32, h as f32),
    };
    let mut candidates: Vec<(usize, Kept)> = Vec::new();
    for (i, (quad, &score)) in coords.chunks_exact(4).zip(&score_values).enumerate() {
        if !score.is_finite() || score < op.min_score || !quad.iter().all(|v| v.is_finite()) {
            continue;
        }
        let lo = |v: f32, scale: f32, max: usize| ((v * scale).floor().max(0.0) as usize).min(max);
        let hi = |v: f32, scale: f32, max: usize| ((v * scale).ceil().max(0.0) as usize).min(max);
        let bounds = [
            lo(quad[0], sx, w),
            lo(quad[1], sy, h),
            hi(quad[2], sx, w),
            hi(quad[3], sy, h),
        ];
        if bounds[2] > bounds[0] && bounds[3] > bounds[1] {
            candidates.push((i, Kept { bounds, score }));
        }
    }
    // Best score first; equal scores keep the detector's order.
    candidates.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(&b.0)));
    let mut kept: Vec<Kept> = Vec::new();
    for (_, c) in candidates {
        if kept.len() == op.max_boxes {
            break;
        }
        let suppressed = op
            .iou_threshold
            .is_some_and(|t| kept.iter().any(|k| iou(k.bounds, c.bounds) > t));
        if !suppressed {
            kept.push(c);
        }
    }
    Ok(kept)
}

/// Intersection over union of two pixel boxes.
fn iou(a: [usize; 4], b: [usize; 4]) -> f32 {
    let area = |q: [usize; 4]| ((q[2] - q[0]) * (q[3] - q[1])) as f64;
    let iw = a[2].min(b[2]).saturating_sub(a[0].max(b[0]));
    let ih = a[3].min(b[3]).saturating_sub(a[1].max(b[1]));
    let inter = (iw * ih) as f64;
    let union = area(a) + area(b) - inter;
    if union <= 0.0 {
        0.0
    } else {
        (inter / union) as f32
    }
}

/// The pixels of `bounds` (inside the image, non-empty) of an HWC image `[_, w, c]`.
/// The crops of an image column, resized as they are cut, read in place from the column.
struct Crops<'a> {
    image: &'a TensorColumn,
    data: TensorData,
}

impl<'a> Crops<'a> {
    fn new(image: &'a TensorColumn) -> Self {
        Crops {
            image,
            data: TensorData::empty(image.dtype()),
        }
    }

    /// The crop `[x1, y1, x2, y2]` of the image at `range` (of `[_, w, c]`), resized to the op's
    /// size, appended.
    fn cut(
        &mut self,
        range: std::ops::Range<usize>,
        [w, c]: [usize; 2],
        [x1, y1, x2, y2]: [usize; 4],
        op: &CropBoxesOp,
    ) -> Result<(), String> {
        fn view<T>(v: &[T], [w, c]: [usize; 2], [x1, y1, x2, y2]: [usize; 4]) -> View<'_, T> {
            View {
                data: &v[(y1 * w + x1) * c..],
                stride: w * c,
                height: y2 - y1,
                width: x2 - x1,
                channels: c,
            }
        }
        let out = [op.height, op.width];
        let b = [x1, y1, x2, y2];
        match (
            &mut self.data,
            self.image.values::<u8>(),
            self.image.f32_values(),
        ) {
            (TensorData::U8(d), Some(v), _) => {
                resample(view(&v[range], [w, c], b), out, op.interpolation, d)
            }
            (TensorData::F32(d), _, Some(v)) => {
                resample(view(&v[range], [w, c], b), out, op.interpolation, d)
            }
            _ => {
                return Err(format!(
                    "resize reads u8 or f32, got {}",
                    self.image.dtype()
                ))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::spec::Interpolation;
    use weir_engine::tensor::DType;

    fn op(iou_threshold: Option<f32>, max_boxes: usize) -> CropBoxesOp {
        CropBoxesOp {
            scored: true,
            client_boxes: false,
            coordinates: BoxCoordinates::Pixels,
            height: 2,
            width: 2,
            interpolation: Interpolation::Nearest,
            min_score: 0.5,
            iou_threshold,
            max_boxes,
        }
    }

    /// A 4×6 one-channel image whose pixel (y, x) is 10·y + x.
    fn image() -> TensorColumn {
        let data: Vec<u8> = (0..4u8)
            .flat_map(|y| (0..6u8).map(move |x| 10 * y + x))
            .collect();
        TensorColumn::from_rows("img", DType::U8, &[&Tensor::new(vec![4, 6, 1], data)]).unwrap()
    }

    fn boxes(rows: &[[f32; 4]], scores: &[f32]) -> (TensorColumn, TensorColumn) {
        let flat: Vec<f32> = rows.iter().flatten().copied().collect();
        let b = Tensor::new(vec![rows.len(), 4], flat);
        let s = Tensor::new(vec![scores.len()], scores.to_vec());
        (
            TensorColumn::from_rows("b", DType::F32, &[&b]).unwrap(),
            TensorColumn::from_rows("s", DType::F32, &[&s]).unwrap(),
        )
    }

    #[test]
    fn crops_the_kept_boxes_best_first_and_suppresses_overlaps() {
        let img = image();
        // Box 0 (score 0.6) and box 2 (0.9) overlap fully; box 1 is below min_score; box 3 is
        // NaN; box 4 lies outside the image.
        let (b, s) = boxes(
            &[
                [0.0, 0.0, 2.0, 2.0],
                [2.0, 2.0, 4.0, 4.0],
                [0.0, 0.0, 2.0, 2.0],
                [f32::NAN, 0.0, 1.0, 1.0],
                [7.0, 0.0, 9.0, 2.0],
                [4.0, 2.0, 6.0, 4.0],
            ],
            &[0.6, 0.4, 0.9, 0.9, 0.9, 0.7],
        );
        let out = apply(&op(Some(0.5), 8), &[&img, &b, &s]).unwrap();
        let crops = out[0].row(0);
        assert_eq!(crops.shape, vec![2, 2, 2, 1]);
        assert_eq!(
            crops.data,
            TensorData::U8(vec![0, 1, 10, 11, 24, 25, 34, 35])
        );
        assert_eq!(
            out[1].row(0).data,
            TensorData::F32(vec![0.0, 0.0, 2.0, 2.0, 4.0, 2.0, 6.0, 4.0])
        );
        assert_eq!(out[2].row(0).data, TensorData::F32(vec![0.9, 0.7]));
        // Without suppression both copies of the box are kept, still at most max_boxes.
        let out = apply(&op(None, 2), &[&img, &b, &s]).unwrap();
        assert_eq!(out[2].row(0).data, TensorData::F32(vec![0.9, 0.7]));
        let out = apply(&op(None, 8), &[&img, &b, &s]).unwrap();
        assert_eq!(out[2].row(0).data, TensorData::F32(vec![0.9, 0.7, 0.6]));
    }

    #[test]
    fn no_box_kept_is_zero_parts_and_bad_shapes_are_refused() {
        let img = image();
        let (b, s) = boxes(&[[0.0, 0.0, 2.0, 2.0]], &[0.1]);
        let out = apply(&op(None, 8), &[&img, &b, &s]).unwrap();
        assert_eq!(out[0].row(0).shape, vec![0, 2, 2, 1]);
        assert_eq!(out[1].row(0).shape, vec![0, 4]);
        let (_, wrong) = boxes(&[], &[0.1, 0.2]);
        let e = apply(&op(None, 8), &[&img, &b, &wrong]).unwrap_err();
        assert!(e.contains("1 boxes but scores of shape [2]"), "{e}");
    }

    #[test]
    fn normalised_boxes_scale_by_the_image_and_round_outwards() {
        let img = image();
        let mut o = op(None, 8);
        o.coordinates = BoxCoordinates::Normalized;
        let (b, s) = boxes(&[[0.1, 0.3, 0.4, 0.9]], &[1.0]);
        let out = apply(&o, &[&img, &b, &s]).unwrap();
        // x: 0.6 → 0, 2.4 → 3; y: 1.2 → 1, 3.6 → 4.
        assert_eq!(
            out[1].row(0).data,
            TensorData::F32(vec![0.0, 1.0, 3.0, 4.0])
        );
    }
}
