//! Stacking sequences' state slices along a batch axis, and cutting a call's state back into them.
//!
//! One sequence's state tensor has shape `S` with `S[axis] = 1`; `k` sequences in one call make a
//! tensor of shape `S` with `k` on `axis`. Row-major, that tensor is `outer` blocks (the product
//! of the dimensions before `axis`), each holding the `k` sequences' `inner`-element runs (the
//! product of the dimensions after it) one after another: a gather and a scatter of runs, no
//! arithmetic.

/// The `(outer, inner)` run sizes of a one-sequence `shape` around `axis`.
fn runs(shape: &[usize], axis: usize) -> (usize, usize) {
    let outer = shape.iter().take(axis).product();
    let inner = shape.iter().skip(axis + 1).product();
    (outer, inner)
}

/// The shape of `k` sequences stacked along `axis` of one-sequence `shape`.
pub fn stacked_shape(shape: &[usize], axis: usize, k: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    if let Some(d) = s.get_mut(axis) {
        *d = k;
    }
    s
}

/// Stacks `slices` (each one sequence's values of `shape`) along `axis`, in order.
pub fn stack(slices: &[&[f32]], shape: &[usize], axis: usize) -> Vec<f32> {
    let (outer, inner) = runs(shape, axis);
    let mut out = Vec::with_capacity(outer * inner * slices.len());
    for o in 0..outer {
        for s in slices {
            if let Some(run) = s.get(o * inner..(o + 1) * inner) {
                out.extend_from_slice(run);
            }
        }
    }
    out
}

/// Cuts `values` (`k` sequences stacked along `axis` of one-sequence `shape`) back into `k`
/// slices; `None` when `values` does not hold exactly that many elements.
pub fn unstack(values: &[f32], shape: &[usize], axis: usize, k: usize) -> Option<Vec<Vec<f32>>> {
    let (outer, inner) = runs(shape, axis);
    let expected = outer.checked_mul(inner)?.checked_mul(k)?;
    if values.len() != expected {
        return None;
    }
    let mut slices = vec![Vec::with_capacity(outer * inner); k];
    for o in 0..outer {
        for (j, slice) in slices.iter_mut().enumerate() {
            let start = (o * k + j) * inner;
            slice.extend_from_slice(&values[start..start + inner]);
        }
    }
    Some(slices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn stacking_along_the_middle_axis_interleaves_runs() {
        // Shape [2, 1, 3]: two runs of three per sequence.
        let a: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let b: Vec<f32> = (10..16).map(|v| v as f32).collect();
        let stacked = stack(&[&a, &b], &[2, 1, 3], 1);
        assert_eq!(
            stacked,
            vec![0., 1., 2., 10., 11., 12., 3., 4., 5., 13., 14., 15.]
        );
        assert_eq!(stacked_shape(&[2, 1, 3], 1, 2), vec![2, 2, 3]);
        assert_eq!(unstack(&stacked, &[2, 1, 3], 1, 2), Some(vec![a, b]));
        assert_eq!(unstack(&stacked[1..], &[2, 1, 3], 1, 2), None);
    }

    proptest! {
        #[test]
        fn unstack_inverts_stack(
            dims in proptest::collection::vec(1usize..4, 1..4),
            axis_pick in 0usize..4,
            k in 1usize..5,
        ) {
            let axis = axis_pick % dims.len();
            let mut shape = dims.clone();
            shape[axis] = 1;
            let n: usize = shape.iter().product();
            let slices: Vec<Vec<f32>> = (0..k)
                .map(|j| (0..n).map(|i| (j * 1000 + i) as f32).collect())
                .collect();
            let refs: Vec<&[f32]> = slices.iter().map(Vec::as_slice).collect();
            let stacked = stack(&refs, &shape, axis);
            prop_assert_eq!(stacked.len(), n * k);
            prop_assert_eq!(unstack(&stacked, &shape, axis, k), Some(slices));
        }
    }
}
