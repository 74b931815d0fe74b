//! `regions`: a detector's probability map turned into scored, axis-aligned boxes.
//!
//! This is the post-processing of "Real-time Scene Text Detection with Differentiable
//! Binarization" (§3.5) without the polygon step: binarise, take 8-connected components, score
//! each by its mean probability, drop the small and the faint, and grow the rest by
//! `area × expand / perimeter` (the paper's unclip offset, applied to the rectangle). Components
//! are found by an explicit-stack flood fill, so memory is one visited flag and at most one stack
//! entry per pixel of the map, whatever its shape, and no input can exhaust the call stack.
//! Semantics are documented on [`weir_engine::spec::RegionsSpec`].

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;
use weir_engine::validate::RegionsOp;

/// One kept region: its box, normalised (`x1, y1, x2, y2`), and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Region {
    /// `x1, y1, x2, y2` as fractions of the map's width and height.
    pub bbox: [f32; 4],
    /// Mean probability over the region's pixels.
    pub score: f32,
}

/// A connected component as found: its pixel rectangle (inclusive) and mean probability.
struct Component {
    x0: usize,
    y0: usize,
    x1: usize,
    y1: usize,
    score: f64,
}

/// Row by row: each `[H, W]` or `[1, H, W]` map's regions, as `boxes` (`[n, 4]`) and `scores`
/// (`[n]`), `n` of the row's own.
///
/// # Errors
/// A message naming the row when it is not an f32 map of one of those shapes.
pub fn apply(op: &RegionsOp, input: &TensorColumn) -> Result<Vec<TensorColumn>, String> {
    let values = input
        .f32_values()
        .ok_or_else(|| format!("regions reads f32, got {}", input.dtype()))?;
    let mut box_shapes = Vec::with_capacity(input.len());
    let mut score_shapes = Vec::with_capacity(input.len());
    let mut boxes = Vec::new();
    let mut scores = Vec::new();
    for r in 0..input.len() {
        let shape = input.row_shape(r);
        let (h, w) = match shape[..] {
            [h, w] | [1, h, w] => (h, w),
            _ => {
                return Err(format!(
                    "row {r}: shape {shape:?} is not [H, W] or [1, H, W]"
                ))
            }
        };
        let found = find(op, &values[input.row_range(r)], h, w);
        box_shapes.push(vec![found.len(), 4]);
        score_shapes.push(vec![found.len()]);
        for region in found {
            boxes.extend_from_slice(&region.bbox);
            scores.push(region.score);
        }
    }
    let boxes = TensorColumn::from_shapes("boxes", box_shapes, TensorData::F32(boxes));
    let scores = TensorColumn::from_shapes("scores", score_shapes, TensorData::F32(scores));
    Ok(vec![
        boxes.map_err(|e| e.to_string())?,
        scores.map_err(|e| e.to_string())?,
    ])
}

/// The regions of one `h` × `w` map (`map.len() == h * w`), best first, at most `max_regions`.
pub fn find(op: &RegionsOp, map: &[f32], h: usize, w: usize) -> Vec<Region> {
    if map.len() != h.saturating_mul(w) || h == 0 || w == 0 {
        return Vec::new();
    }
    let mut kept: Vec<Component> = components(map, w, op.threshold)
        .filter(|c| {
            let side = (c.x1 - c.x0 + 1).min(c.y1 - c.y0 + 1);
            side >= op.min_size && c.score >= op.min_score
        })
        .collect();
    // Best first; equal scores top to bottom, then left to right.
    kept.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.y0.cmp(&b.y0))
            .then(a.x0.cmp(&b.x0))
    });
    kept.truncate(op.max_regions);
    kept.iter()
        .map(|c| Region {
            bbox: expanded(c, op.expand, w, h),
            score: c.score as f32,
        })
        .collect()
}

/// Component `c`'s rectangle (pixel edges) grown by `area × expand / perimeter` on every side,
/// clamped to the `w` × `h` map and normalised by it.
fn expanded(c: &Component, expand: f64, w: usize, h: usize) -> [f32; 4] {
    let (cw, ch) = ((c.x1 - c.x0 + 1) as f64, (c.y1 - c.y0 + 1) as f64);
    let d = cw * ch * expand / (2.0 * (cw + ch));
    let (wf, hf) = (w as f64, h as f64);
    let x1 = (c.x0 as f64 - d).clamp(0.0, wf) / wf;
    let y1 = (c.y0 as f64 - d).clamp(0.0, hf) / hf;
    let x2 = ((c.x1 + 1) as f64 + d).clamp(0.0, wf) / wf;
    let y2 = ((c.y1 + 1) as f64 + d).clamp(0.0, hf) / hf;
    [x1 as f32, y1 as f32, x2 as f32, y2 as f32]
}

/// The 8-connected components of `p > threshold` in a map `w` wide, in the order of their first
/// pixel (row-major).
fn components(map: &[f32], w: usize, threshold: f64) -> impl Iterator<Item = Component> + '_ {
    let h = map.len() / w;
    let on = move |i: usize| f64::from(map[i]) > threshold;
    let mut seen = vec![false; map.len()];
    let mut stack = Vec::new();
    (0..map.len()).filter_map(move |start| {
        if seen[start] || !on(start) {
            return None;
        }
        seen[start] = true;
        stack.push(start);
        let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
        let (mut sum, mut count) = (0f64, 0usize);
        while let Some(i) = stack.pop() {
            let (y, x) = (i / w, i % w);
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            sum += f64::from(map[i]);
            count += 1;
            for ny in y.saturating_sub(1)..=(y + 1).min(h - 1) {
                for nx in x.saturating_sub(1)..=(x + 1).min(w - 1) {
                    let n = ny * w + nx;
                    if !seen[n] && on(n) {
                        seen[n] = true;
                        stack.push(n);
                    }
                }
            }
        }
        Some(Component {
            x0,
            y0,
            x1,
            y1,
            score: sum / count as f64,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(min_size: usize, expand: f64) -> RegionsOp {
        RegionsOp {
            threshold: 0.3,
            min_score: 0.5,
            expand,
            min_size,
            max_regions: 10,
        }
    }

    #[test]
    fn a_block_becomes_one_box_at_its_pixel_edges() {
        let (h, w) = (4, 5);
        let mut map = vec![0.0f32; h * w];
        for y in 1..3 {
            for x in 1..4 {
                map[y * w + x] = 0.8;
            }
        }
        let found = find(&op(1, 0.0), &map, h, w);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].bbox, [0.2, 0.25, 0.8, 0.75]);
        assert!((found[0].score - 0.8).abs() < 1e-6);
    }

    #[test]
    fn diagonal_neighbours_join_and_small_ones_drop() {
        // Two pixels touching at a corner form one 2×2 component; a lone pixel is below min_size 2.
        let (h, w) = (4, 4);
        let mut map = vec![0.0f32; h * w];
        map[0] = 0.9;
        map[w + 1] = 0.9;
        map[3 * w + 3] = 0.9;
        let found = find(&op(2, 0.0), &map, h, w);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].bbox, [0.0, 0.0, 0.5, 0.5]);
    }

    #[test]
    fn an_empty_or_mis_sized_map_has_no_regions() {
        assert!(find(&op(1, 1.5), &[0.0; 6], 2, 3).is_empty());
        assert!(find(&op(1, 1.5), &[1.0; 5], 2, 3).is_empty());
        assert!(find(&op(1, 1.5), &[], 0, 0).is_empty());
    }
}
