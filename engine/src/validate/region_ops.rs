//! Region and window nodes (regions, crop, pad, slice): their settings and types.
//!
//! Rules: `regions` takes `threshold` and `min_score` in `(0, 1]`, `expand` ≥ 0, `min_size` ≥ 1 and
//! `max_regions` in `1..=1000`; it reads `f32 [H, W]` or `[1, H, W]` and yields `boxes`
//! `f32 [-1, 4]` and `scores` `f32 [-1]`. `crop` has `height`, `width` ≥ 1 and either `top`/`left`
//! or `center: true`, reads rank ≥ 2 and yields `[height, width, …rest]`; `pad` has one entry per
//! input dimension, each ≥ 1 or `-1`, a `value` of the input's dtype, and no fixed input dimension
//! larger than its target; `slice` has `step` ≥ 1 and an `axis` within the input's rank. None of
//! the three window ops reads bytes. Where a dimension is fixed the window is checked here; along
//! a free one, a request that cannot give it fails at run time, naming the node.

use std::fmt;

use super::{node_path, Port, TensorOp, Validator};
use crate::diagnostic::Location;
use crate::spec::{NodeSpec, MAX_PAD_ELEMENTS, MAX_REGIONS};
use crate::stateful::constant_data;
use crate::tensor::{DType, Dim, TensorType};

/// A checked `regions` node's settings (see [`crate::spec::RegionsSpec`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RegionsOp {
    /// Foreground is `p > threshold`.
    pub threshold: f64,
    /// The least mean probability kept.
    pub min_score: f64,
    /// How much each rectangle grows.
    pub expand: f64,
    /// The least shorter side kept, in map pixels.
    pub min_size: usize,
    /// The most regions per request.
    pub max_regions: usize,
}

/// A checked window op: what part of its input each output element comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowOp {
    /// A `height` × `width` window of the first two dimensions.
    Crop {
        /// First row (ignored when centred).
        top: usize,
        /// First column (ignored when centred).
        left: usize,
        /// Rows.
        height: usize,
        /// Columns.
        width: usize,
        /// Whether the window is centred.
        center: bool,
    },
    /// Each dimension extended at its end to its target (`None`: kept).
    Pad {
        /// Target per dimension.
        shape: Vec<Option<usize>>,
        /// What new elements hold.
        value: f64,
    },
    /// numpy's `x[start:end:step]` along `axis`.
    Slice {
        /// The dimension sliced (normalised to `0..rank`).
        axis: usize,
        /// First index (negative: from the back).
        start: i64,
        /// Index after the last (negative: from the back; `None`: the end).
        end: Option<i64>,
        /// Distance between kept indices (≥ 1).
        step: usize,
    },
}

impl WindowOp {
    /// Where a crop's window starts in an input of `height` × `width`, or `None` when the window
    /// does not fit.
    pub fn crop_origin(&self, height: usize, width: usize) -> Option<(usize, usize)> {
        let WindowOp::Crop {
            top,
            left,
            height: h,
            width: w,
            center,
        } = *self
        else {
            return None;
        };
        let (top, left) = if center {
            (height.checked_sub(h)? / 2, width.checked_sub(w)? / 2)
        } else {
            (top, left)
        };
        let fits = top.checked_add(h)? <= height && left.checked_add(w)? <= width;
        fits.then_some((top, left))
    }

    /// The first index and the count a slice takes of a dimension of `n`, numpy's way: negative
    /// bounds count from the back, both are clamped to `0..=n`.
    pub fn slice_range(start: i64, end: Option<i64>, step: usize, n: usize) -> (usize, usize) {
        let n_i = i64::try_from(n).unwrap_or(i64::MAX);
        let bound = |b: i64| {
            let b = if b < 0 { b.saturating_add(n_i) } else { b };
            b.clamp(0, n_i) as usize
        };
        let first = bound(start);
        let last = end.map_or(n, bound);
        let count = last.saturating_sub(first).div_ceil(step.max(1));
        (first, count)
    }
}

impl fmt::Display for RegionsOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "regions threshold={} min_score={} expand={} min_size={} max_regions={}",
            self.threshold, self.min_score, self.expand, self.min_size, self.max_regions
        )
    }
}

impl fmt::Display for WindowOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowOp::Crop {
                height,
                width,
                center: true,
                ..
            } => write!(f, "crop {height}x{width} centred"),
            WindowOp::Crop {
                top,
                left,
                height,
                width,
                ..
            } => write!(f, "crop {height}x{width} at top={top} left={left}"),
            WindowOp::Pad { shape, value } => {
                let dims: Vec<String> = shape
                    .iter()
                    .map(|d| d.map_or("-1".to_string(), |n| n.to_string()))
                    .collect();
                write!(f, "pad to [{}] with {value}", dims.join(", "))
            }
            WindowOp::Slice {
                axis,
                start,
                end,
                step,
            } => {
                let end = end.map_or(String::new(), |e| e.to_string());
                write!(f, "slice axis={axis} [{start}:{end}:{step}]")
            }
        }
    }
}

/// The `(0, 1]` check of `regions`' probability settings.
fn probability(v: f64) -> bool {
    v > 0.0 && v <= 1.0
}

impl Validator<'_, '_> {
    /// A region or window node's settings, before its input is known.
    pub(super) fn check_region_fields(&mut self, node: &NodeSpec) {
        let id = node.id().value.as_str();
        let refuse = |v: &mut Self, field: &str, at: Location, why: String| {
            v.error(node_path(id, field), at, format!("node `{id}`: {why}"));
        };
        match node {
            NodeSpec::Regions(r) => {
                for (field, v) in [("threshold", &r.threshold), ("min_score", &r.min_score)] {
                    if !probability(v.value) {
                        let why = format!("`{field}` must be in (0, 1], got {}", v.value);
                        refuse(self, field, v.location, why);
                    }
                }
                if !(r.expand.value >= 0.0 && r.expand.value.is_finite()) {
                    let why = format!("`expand` must be finite and ≥ 0, got {}", r.expand.value);
                    refuse(self, "expand", r.expand.location, why);
                }
                if r.min_size.value == 0 {
                    let why = "`min_size` must be at least 1".to_string();
                    refuse(self, "min_size", r.min_size.location, why);
                }
                if !(1..=MAX_REGIONS).contains(&r.max_regions.value) {
                    let why = format!(
                        "`max_regions` must be in 1..={MAX_REGIONS}, got {}",
                        r.max_regions.value
                    );
                    refuse(self, "max_regions", r.max_regions.location, why);
                }
            }
            NodeSpec::Crop(c) => {
                for (field, v) in [("height", &c.height), ("width", &c.width)] {
                    if v.value == 0 {
                        let why = format!("`{field}` must be at least 1");
                        refuse(self, field, v.location, why);
                    }
                }
                if c.center.value {
                    for (field, v) in [("top", &c.top), ("left", &c.left)] {
                        if let Some(v) = v {
                            let why = format!("`{field}` cannot be given with `center: true`");
                            refuse(self, field, v.location, why);
                        }
                    }
                }
            }
            NodeSpec::Pad(p) => {
                let bad = p.shape.iter().find(|&&d| d == 0 || d < -1);
                if p.shape.is_empty() || bad.is_some() {
                    let why = format!(
                        "`shape` {:?} needs one entry per dimension, each ≥ 1 or -1 (kept)",
                        p.shape.value
                    );
                    refuse(self, "shape", p.shape.location, why);
                } else {
                    let fixed = p
                        .shape
                        .iter()
                        .filter(|&&d| d > 0)
                        .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?));
                    if fixed.is_none_or(|n| n > MAX_PAD_ELEMENTS) {
                        let why = format!(
                            "`shape` {:?} holds more than {MAX_PAD_ELEMENTS} elements",
                            p.shape.value
                        );
                        refuse(self, "shape", p.shape.location, why);
                    }
                }
                if !p.value.is_finite() {
                    let why = format!("`value` must be finite, got {}", p.value.value);
                    refuse(self, "value", p.value.location, why);
                }
            }
            NodeSpec::Slice(s) if s.step.value < 1 => {
                let why = format!("`step` must be at least 1, got {}", s.step.value);
                refuse(self, "step", s.step.location, why);
            }
            _ => {}
        }
    }

    /// The region or window op `node` is and its outputs, from its resolved `ports` (at `locs`).
    pub(super) fn type_region_op(
        &mut self,
        node: &NodeSpec,
        ports: &[Port],
        locs: &[Location],
    ) -> Option<(TensorOp, Vec<(String, TensorType)>)> {
        let id = node.id().value.as_str();
        let p = &ports[0];
        let refuse = |v: &mut Self, needs: &str| {
            v.wrong_port(id, p, locs[0], needs);
            None
        };
        let shape = &p.ty.shape;
        if !matches!(node, NodeSpec::Regions(_)) && p.ty.dtype == DType::Bytes {
            return refuse(self, "a numeric or bool tensor");
        }
        let same_dtype = |shape: Vec<Dim>| TensorType {
            dtype: p.ty.dtype,
            shape,
        };
        let (op, ty) = match node {
            NodeSpec::Regions(r) => {
                let map = matches!(shape[..], [_, _] | [Dim::Fixed(1) | Dim::Dynamic, _, _]);
                if p.ty.dtype != DType::F32 || !map {
                    return refuse(self, "an f32 probability map of shape [H, W] or [1, H, W]");
                }
                let op = TensorOp::Regions(RegionsOp {
                    threshold: r.threshold.value,
                    min_score: r.min_score.value,
                    expand: r.expand.value,
                    min_size: r.min_size.value,
                    max_regions: r.max_regions.value,
                });
                let boxes = TensorType {
                    dtype: DType::F32,
                    shape: vec![Dim::Dynamic, Dim::Fixed(4)],
                };
                let scores = TensorType {
                    dtype: DType::F32,
                    shape: vec![Dim::Dynamic],
                };
                let outputs = vec![("boxes".to_string(), boxes), ("scores".to_string(), scores)];
                return Some((op, outputs));
            }
            NodeSpec::Crop(c) => {
                if shape.len() < 2 {
                    return refuse(self, "a tensor of rank ≥ 2 (height, width first)");
                }
                let op = WindowOp::Crop {
                    top: c.top.as_ref().map_or(0, |v| v.value),
                    left: c.left.as_ref().map_or(0, |v| v.value),
                    height: c.height.value,
                    width: c.width.value,
                    center: c.center.value,
                };
                // Along a free dimension any size may come: only the fixed ones are checked here.
                let size = |d: Dim, want: usize| match d {
                    Dim::Fixed(n) => n,
                    Dim::Dynamic => want,
                };
                let need_h = c
                    .top
                    .as_ref()
                    .map_or(0, |v| v.value)
                    .saturating_add(c.height.value);
                let need_w = c
                    .left
                    .as_ref()
                    .map_or(0, |v| v.value)
                    .saturating_add(c.width.value);
                let (h, w) = (size(shape[0], need_h), size(shape[1], need_w));
                if op.crop_origin(h, w).is_none() {
                    self.error(
                        node_path(id, "height"),
                        c.height.location,
                        format!(
                            "node `{id}`: the {}×{} window does not fit `{}` ({})",
                            c.height.value, c.width.value, p.column, p.ty
                        ),
                    );
                    return None;
                }
                let mut out = vec![Dim::Fixed(c.height.value), Dim::Fixed(c.width.value)];
                out.extend_from_slice(&shape[2..]);
                (op, same_dtype(out))
            }
            NodeSpec::Pad(pad) => {
                if shape.len() != pad.shape.len() {
                    return refuse(self, &format!("a tensor of rank {}", pad.shape.len()));
                }
                if let Err(why) = constant_data(p.ty.dtype, pad.value.value) {
                    self.error(
                        node_path(id, "value"),
                        pad.value.location,
                        format!("node `{id}`: `value` does not fit `{}`: {why}", p.column),
                    );
                    return None;
                }
                let target: Vec<Option<usize>> =
                    pad.shape.iter().map(|&d| usize::try_from(d).ok()).collect();
                let too_big = shape
                    .iter()
                    .zip(&target)
                    .any(|(d, t)| matches!((d, t), (Dim::Fixed(n), Some(t)) if n > t));
                if too_big {
                    self.error(
                        node_path(id, "shape"),
                        pad.shape.location,
                        format!(
                            "node `{id}`: `{}` ({}) is larger than the target {:?}",
                            p.column, p.ty, pad.shape.value
                        ),
                    );
                    return None;
                }
                let out = shape
                    .iter()
                    .zip(&target)
                    .map(|(&d, t)| t.map_or(d, Dim::Fixed))
                    .collect();
                let op = WindowOp::Pad {
                    shape: target,
                    value: pad.value.value,
                };
                (op, same_dtype(out))
            }
            NodeSpec::Slice(s) => {
                let rank = shape.len() as i64;
                let axis = if s.axis.value < 0 {
                    rank + s.axis.value
                } else {
                    s.axis.value
                };
                if !(0..rank).contains(&axis) {
                    self.error(
                        node_path(id, "axis"),
                        s.axis.location,
                        format!(
                            "node `{id}`: axis {} is out of range for `{}` ({})",
                            s.axis.value, p.column, p.ty
                        ),
                    );
                    return None;
                }
                let axis = axis as usize;
                let step = usize::try_from(s.step.value).unwrap_or(1);
                let end = s.end.as_ref().map(|v| v.value);
                let mut out = shape.clone();
                if let Dim::Fixed(n) = shape[axis] {
                    out[axis] = Dim::Fixed(WindowOp::slice_range(s.start.value, end, step, n).1);
                }
                let op = WindowOp::Slice {
                    axis,
                    start: s.start.value,
                    end,
                    step,
                };
                (op, same_dtype(out))
            }
            _ => return None,
        };
        Some((TensorOp::Window(op), vec![("output".to_string(), ty)]))
    }
}

#[cfg(test)]
mod tests {
    use super::WindowOp;

    /// numpy's `len(range(n)[start:end:step])` for the cases the spec names.
    #[test]
    fn slices_count_as_numpy_does() {
        let r = WindowOp::slice_range;
        assert_eq!(r(0, Some(10), 1, 5), (0, 5));
        assert_eq!(r(-3, None, 1, 5), (2, 3));
        assert_eq!(r(1, Some(-1), 2, 6), (1, 2));
        assert_eq!(r(4, Some(2), 1, 6), (4, 0));
        assert_eq!(r(-100, Some(100), 3, 7), (0, 3));
        assert_eq!(r(i64::MIN, Some(i64::MAX), 1, 3), (0, 3));
    }

    #[test]
    fn a_crop_fits_or_says_so() {
        let crop = |top, left, center| WindowOp::Crop {
            top,
            left,
            height: 2,
            width: 3,
            center,
        };
        assert_eq!(crop(1, 1, false).crop_origin(3, 4), Some((1, 1)));
        assert_eq!(crop(2, 0, false).crop_origin(3, 4), None);
        assert_eq!(crop(0, 0, true).crop_origin(5, 8), Some((1, 2)));
        assert_eq!(crop(0, 0, true).crop_origin(1, 8), None);
        assert_eq!(crop(usize::MAX, 0, false).crop_origin(3, 4), None);
    }
}
