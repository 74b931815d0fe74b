//! A coding group's columns: the parity jobs' inputs coded from the members' input columns, and
//! missing members' outputs decoded from the parity outputs and the others' (the `weir-parm`
//! codec applied column by column, for f32 tensors).

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

use super::Encoder;

/// Row-major f32 elements of `col` (parity coding is defined on f32 tensors).
fn f32s(col: &TensorColumn) -> Option<&[f32]> {
    col.f32_values()
}

/// The parity job's inputs from the k members' input columns: per column and row position i, the
/// members' rows i coded by `encoder` (a member without row i counts as zeros, so members may
/// differ in rows; `weir_parm::encode_rows`). `None` when a column is not f32 or its rows differ in shape.
pub fn encode_group(encoder: Encoder, members: &[&[TensorColumn]]) -> Option<Vec<TensorColumn>> {
    encode_group_for(encoder, 0, members)
}

/// [`encode_group`] for parity model `t`: the members weighted by its coefficients
/// (`weir_parm::encode_rows_for`).
pub fn encode_group_for(
    encoder: Encoder,
    t: usize,
    members: &[&[TensorColumn]],
) -> Option<Vec<TensorColumn>> {
    let rows = members
        .iter()
        .map(|m| m.first().map_or(0, TensorColumn::len))
        .max()?;
    let first = members.first()?;
    let mut out = Vec::with_capacity(first.len());
    for (c, col) in first.iter().enumerate() {
        let values: Vec<&[f32]> = members
            .iter()
            .map(|m| f32s(m.get(c)?))
            .collect::<Option<_>>()?;
        let shape = col.uniform_shape()?.to_vec();
        let parity = weir_parm::encode_rows_for(encoder, t, &values, rows, col.row_len()?);
        out.push(TensorColumn::from_data("parity", shape, rows, TensorData::F32(parity)).ok()?);
    }
    Some(out)
}

/// The subtraction decoder on columns: the missing member's first `rows` output rows as the parity
/// output minus every other member's outputs, position by position (`weir_parm::decode_subtract`).
/// `None` when a column is not f32 or its rows differ in shape.
pub fn decode_subtract(
    parity: &[TensorColumn],
    others: &[&[TensorColumn]],
    rows: usize,
) -> Option<Vec<TensorColumn>> {
    let mut out = Vec::with_capacity(parity.len());
    for (c, p) in parity.iter().enumerate() {
        let others: Vec<&[f32]> = others
            .iter()
            .map(|o| f32s(o.get(c)?))
            .collect::<Option<_>>()?;
        let values = weir_parm::decode_subtract(f32s(p)?, &others, rows * p.row_len()?)?;
        out.push(
            TensorColumn::from_data(
                "decoded",
                p.uniform_shape()?.to_vec(),
                rows,
                TensorData::F32(values),
            )
            .ok()?,
        );
    }
    Some(out)
}

/// The missing members' outputs of a group of `k`, column by column (`weir_parm::decode_erasures`):
/// `known` are `(position, rows, outputs)` of the members in hand, `parities` `(parity model
/// index, outputs)` of as many parity outputs as `missing` has members, `missing` the `(position,
/// rows)` to rebuild. `None` when a column is not f32 or its rows differ in shape.
pub fn decode_erasures(
    k: usize,
    known: &[(usize, usize, Vec<TensorColumn>)],
    parities: &[(usize, Vec<TensorColumn>)],
    missing: &[(usize, usize)],
) -> Option<Vec<Vec<TensorColumn>>> {
    let slot = |index, rows| weir_parm::Slot { index, rows };
    let missing_slots: Vec<weir_parm::Slot> = missing.iter().map(|&(i, r)| slot(i, r)).collect();
    let (_, first) = parities.first()?;
    let mut out: Vec<Vec<TensorColumn>> = vec![Vec::with_capacity(first.len()); missing.len()];
    for (c, p) in first.iter().enumerate() {
        let width = p.row_len()?;
        let shape = p.uniform_shape()?.to_vec();
        let known: Vec<(weir_parm::Slot, &[f32])> = known
            .iter()
            .map(|(i, rows, cols)| Some((slot(*i, *rows), f32s(cols.get(c)?)?)))
            .collect::<Option<_>>()?;
        let outputs: Vec<(usize, &[f32])> = parities
            .iter()
            .map(|(t, cols)| Some((*t, f32s(cols.get(c)?)?)))
            .collect::<Option<_>>()?;
        let decoded = weir_parm::decode_erasures(k, width, &known, &outputs, &missing_slots)?;
        for ((values, &(_, rows)), cols) in decoded.into_iter().zip(missing).zip(out.iter_mut()) {
            cols.push(
                TensorColumn::from_data("decoded", shape.clone(), rows, TensorData::F32(values))
                    .ok()?,
            );
        }
    }
    Some(out)
}
