//! One coding group's parity rows and the subtraction decoder, over row-major `f32` values.
//!
//! Members of a group may differ in rows (a serving job holds up to a batch of them): row
//! position `i` of the parity query codes row `i` of every member, a member without row `i`
//! counting as zeros. The decoder is then a plain position-by-position subtraction, whatever the
//! members' sizes (ParM, §4.2).

use crate::Encoder;

/// The parity query of a group whose members hold `members[m]` (rows of `width` values,
/// row-major): `rows` parity rows, row `i` being the members' rows `i` coded by `encoder`. Call
/// [`Encoder::check`] first.
pub fn encode_rows(encoder: Encoder, members: &[&[f32]], rows: usize, width: usize) -> Vec<f32> {
    let zeros = vec![0f32; width];
    let mut parity = vec![0f32; rows * width];
    for (i, out_row) in parity.chunks_mut(width.max(1)).enumerate() {
        let group: Vec<&[f32]> = members
            .iter()
            .map(|v| v.get(i * width..(i + 1) * width).unwrap_or(&zeros))
            .collect();
        encoder.encode_into(&group, out_row);
    }
    parity
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
