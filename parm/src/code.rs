//! One coding group's parity rows and the subtraction decoder, over row-major `f32` values.
//!
//! Members of a group may differ in rows (a serving job holds up to a batch of them): row
//! position `i` of the parity query codes row `i` of every member, a member without row `i`
//! counting as zeros. The decoder is then a plain position-by-position subtraction, whatever the
//! members' sizes (ParM, §4.2).
//!
//! With `r > 1` parity models (ParM, §7) parity model `t` answers its own parity query
//! `P_t = Σ_i c_{t,i} X_i` and is trained towards `Σ_i c_{t,i} F(X_i)`, with the Vandermonde
//! coefficients `c_{t,i} = (i + 1)^t` ([`coefficients`]): parity model 0 is the plain sum of
//! the r = 1 code, parity model 1 the paper's `F(X_1) + 2F(X_2)`. The paper's §7 example feeds
//! both parity models the same `P = X_1 + X_2`; a function of that sum cannot tell `X_1` from
//! `X_2`, so it cannot learn the asymmetric target, hence one parity query per parity model
//! here. Every square submatrix of a Vandermonde matrix with positive, distinct nodes is
//! invertible (it is totally positive), so any `m ≤ r` missing predictions are decoded from any
//! `m` parity outputs together with the other predictions ([`decode_erasures`]).

use crate::Encoder;

/// The coefficients of parity model `t` over a group of `k`: member `i` weighted `(i + 1)^t`.
pub fn coefficients(t: usize, k: usize) -> Vec<f32> {
    (0..k)
        .map(|i| ((i + 1) as f64).powi(t as i32) as f32)
        .collect()
}

/// [`encode_rows`] for parity model `t`: the members weighted by [`coefficients`]`(t, k)`.
pub fn encode_rows_for(
    encoder: Encoder,
    t: usize,
    members: &[&[f32]],
    rows: usize,
    width: usize,
) -> Vec<f32> {
    let weights = coefficients(t, members.len());
    let zeros = vec![0f32; width];
    let mut parity = vec![0f32; rows * width];
    for (i, out_row) in parity.chunks_mut(width.max(1)).enumerate() {
        let group: Vec<&[f32]> = members
            .iter()
            .map(|v| v.get(i * width..(i + 1) * width).unwrap_or(&zeros))
            .collect();
        encoder.encode_weighted_into(&group, &weights, out_row);
    }
    parity
}

/// One member of a group being decoded: its position in the group and how many rows it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Position in the coding group (0-based).
    pub index: usize,
    /// Rows the member holds.
    pub rows: usize,
}

/// The missing members' outputs of a group of `k` (rows of `width` values): `known` are the
/// predictions in hand (slot, values), `parities` the parity outputs used (parity model index
/// `t`, values), `missing` the members to rebuild. Row position `p` is solved on its own: its
/// unknowns are the missing members holding row `p`, and as many of `parities` (in the order
/// given) as there are unknowns, minus the known members' weighted rows, give a square
/// Vandermonde system. `None` when fewer parity outputs than missing members are given, or one is
/// too short.
pub fn decode_erasures(
    k: usize,
    width: usize,
    known: &[(Slot, &[f32])],
    parities: &[(usize, &[f32])],
    missing: &[Slot],
) -> Option<Vec<Vec<f32>>> {
    if parities.len() < missing.len() {
        return None;
    }
    let coeff: Vec<Vec<f64>> = parities
        .iter()
        .map(|&(t, _)| coefficients(t, k).into_iter().map(f64::from).collect())
        .collect();
    let mut out: Vec<Vec<f32>> = missing.iter().map(|s| vec![0f32; s.rows * width]).collect();
    let rows = missing.iter().map(|s| s.rows).max().unwrap_or(0);
    for p in 0..rows {
        let unknown: Vec<usize> = (0..missing.len())
            .filter(|&u| missing[u].rows > p)
            .collect();
        let m = unknown.len();
        // The square system's matrix: parity rows 0..m, unknown columns.
        let a: Vec<Vec<f64>> = (0..m)
            .map(|e| {
                unknown
                    .iter()
                    .map(|&u| coeff[e][missing[u].index])
                    .collect()
            })
            .collect();
        let inverse = invert(a)?;
        let range = p * width..(p + 1) * width;
        // Residuals: each parity output less the known members' weighted rows.
        let mut residual = vec![vec![0f64; width]; m];
        for (e, res) in residual.iter_mut().enumerate() {
            let y = parities[e].1.get(range.clone())?;
            for (r, v) in res.iter_mut().zip(y) {
                *r = f64::from(*v);
            }
            for (slot, values) in known {
                let Some(row) = values.get(range.clone()) else {
                    continue; // a member without row p took no part in it
                };
                let c = coeff[e][slot.index];
                for (r, v) in res.iter_mut().zip(row) {
                    *r -= c * f64::from(*v);
                }
            }
        }
        for (x, &u) in unknown.iter().enumerate() {
            let target = &mut out[u][range.clone()];
            for (f, v) in target.iter_mut().enumerate() {
                *v = (0..m).map(|e| inverse[x][e] * residual[e][f]).sum::<f64>() as f32;
            }
        }
    }
    Some(out)
}

/// The inverse of a small square matrix by Gauss–Jordan elimination with partial pivoting;
/// `None` when it is singular.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut inv: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    for col in 0..n {
        let pivot = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        inv.swap(col, pivot);
        let d = a[col][col];
        for j in 0..n {
            a[col][j] /= d;
            inv[col][j] /= d;
        }
        for row in 0..n {
            if row != col {
                let f = a[row][col];
                for j in 0..n {
                    a[row][j] -= f * a[col][j];
                    inv[row][j] -= f * inv[col][j];
                }
            }
        }
    }
    Some(inv)
}

/// The parity query of a group whose members hold `members[m]` (rows of `width` values,
/// row-major): `rows` parity rows, row `i` being the members' rows `i` coded by `encoder`. Call
/// [`Encoder::check`] first.
pub fn encode_rows(encoder: Encoder, members: &[&[f32]], rows: usize, width: usize) -> Vec<f32> {
    encode_rows_for(encoder, 0, members, rows, width)
}

/// The missing member's first `len` values: the parity model's output minus every other member's
/// output, position by position. `None` when the parity output holds fewer than `len` values.
pub fn decode_subtract(parity: &[f32], others: &[&[f32]], len: usize) -> Option<Vec<f32>> {
    let mut values = parity.get(..len)?.to_vec();
    for o in others {
        for (v, x) in values.iter_mut().zip(o.iter()) {
            *v -= x;
        }
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_code_adds_each_row_position_and_pads_short_members_with_zeros() {
        let (a, b, c) = (
            [1.0, 2.0, 3.0, 4.0],
            [10.0, 20.0],
            [100.0, 200.0, 300.0, 400.0],
        );
        let p = encode_rows(Encoder::Sum, &[&a, &b, &c], 2, 2);
        assert_eq!(p, [111.0, 222.0, 303.0, 404.0]);
    }

    #[test]
    fn the_concat_code_tiles_two_halved_images_side_by_side() {
        let (a, b) = ([1.0, 3.0, 5.0, 7.0], [10.0, 30.0, 50.0, 70.0]);
        let p = encode_rows(Encoder::Concat, &[&a, &b], 1, 4);
        assert_eq!(p, [2.0, 20.0, 6.0, 60.0]);
    }

    #[test]
    fn subtraction_does_not_depend_on_the_order_of_the_others() {
        let parity = [10.0, 20.0];
        let (a, b) = ([1.0, 2.0], [3.0, 4.0]);
        let one = decode_subtract(&parity, &[&a, &b], 2).unwrap();
        assert_eq!(one, decode_subtract(&parity, &[&b, &a], 2).unwrap());
        assert_eq!(one, [6.0, 14.0]);
        assert_eq!(decode_subtract(&parity, &[&a], 3), None, "too short");
    }

    #[test]
    fn a_linear_model_is_rebuilt_exactly() {
        // F(x) = 2x and F_P = F: F_P(x1 + x2) − F(x2) = F(x1).
        let (x1, x2) = ([-1.0f32, 2.0, 3.0], [4.0f32, 5.0, 6.0]);
        let f = |x: &[f32]| x.iter().map(|v| 2.0 * v).collect::<Vec<_>>();
        let p = encode_rows(Encoder::Sum, &[&x1, &x2], 1, 3);
        let rebuilt = decode_subtract(&f(&p), &[&f(&x2)], 3).unwrap();
        assert_eq!(rebuilt, f(&x1));
    }

    #[test]
    fn two_parity_models_rebuild_any_two_missing_of_a_linear_model() {
        // F(x) = 3x (linear), F_P = F for both parity models: exact decoding.
        let f = |x: &[f32]| x.iter().map(|v| 3.0 * v).collect::<Vec<_>>();
        let xs: [&[f32]; 3] = [&[1.0, -2.0, 0.5, 4.0], &[2.0, 1.0], &[-3.0, 5.0, 7.0, 1.0]];
        let k = xs.len();
        let y: Vec<Vec<f32>> = (0..2)
            .map(|t| f(&encode_rows_for(Encoder::Sum, t, &xs, 2, 2)))
            .collect();
        for lost in [[0, 1], [0, 2], [1, 2]] {
            let slot = |i: usize| Slot {
                index: i,
                rows: xs[i].len() / 2,
            };
            let known_outputs: Vec<(Slot, Vec<f32>)> = (0..k)
                .filter(|i| !lost.contains(i))
                .map(|i| (slot(i), f(xs[i])))
                .collect();
            let known: Vec<(Slot, &[f32])> = known_outputs
                .iter()
                .map(|(s, v)| (*s, v.as_slice()))
                .collect();
            let parities = [(0, y[0].as_slice()), (1, y[1].as_slice())];
            let missing = [slot(lost[0]), slot(lost[1])];
            let got = decode_erasures(k, 2, &known, &parities, &missing).unwrap();
            for (g, &i) in got.iter().zip(&lost) {
                for (a, b) in g.iter().zip(f(xs[i])) {
                    assert!((a - b).abs() < 1e-4, "lost {lost:?}: member {i}: {g:?}");
                }
            }
        }
        // One missing, decoded from the second parity model alone.
        let known_outputs: Vec<Vec<f32>> = [0, 2].iter().map(|&i| f(xs[i])).collect();
        let known = [
            (Slot { index: 0, rows: 2 }, known_outputs[0].as_slice()),
            (Slot { index: 2, rows: 2 }, known_outputs[1].as_slice()),
        ];
        let got = decode_erasures(k, 2, &known, &[(1, &y[1])], &[Slot { index: 1, rows: 1 }]);
        assert_eq!(got.unwrap()[0].len(), 2);
        assert_eq!(
            decode_erasures(k, 2, &known, &[], &[Slot { index: 1, rows: 1 }]),
            None
        );
    }

    #[test]
    fn the_first_parity_model_is_the_plain_sum() {
        assert_eq!(coefficients(0, 3), [1.0, 1.0, 1.0]);
        assert_eq!(coefficients(1, 3), [1.0, 2.0, 3.0]);
        let (a, b) = ([1.0, 2.0], [10.0, 20.0]);
        assert_eq!(
            encode_rows_for(Encoder::Sum, 0, &[&a, &b], 1, 2),
            encode_rows(Encoder::Sum, &[&a, &b], 1, 2)
        );
        assert_eq!(
            encode_rows_for(Encoder::Sum, 1, &[&a, &b], 1, 2),
            [21.0, 42.0]
        );
    }

    #[test]
    fn encoders_check_their_group() {
        assert!(Encoder::Concat.check(3, 16).is_err());
        assert!(Encoder::Concat.check(2, 15).is_err());
        assert!(Encoder::Sum.check(1, 16).is_err());
        assert_eq!(Encoder::Concat.check(4, 16), Ok(()));
        assert_eq!(
            Encoder::Sum.check(1, 4).unwrap_err().to_string(),
            "k must be at least 2, not 1"
        );
    }
}
