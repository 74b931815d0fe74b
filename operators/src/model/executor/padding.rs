//! Padded batching: rows whose inputs differ only along the padded axes share one call.
//!
//! Each input is padded with the node's value to the longest row of the call along its padded
//! axes (the plan resolved the dimension's name to axes, [`weir_engine::plan::PadPlan`]); after the
//! call, every output axis of the same name is cut back to each row's own length, and outputs
//! without it are returned whole. A row's own length is the size its inputs give the dimension;
//! a row whose inputs disagree on it (or whose rows differ along another axis) is never padded:
//! it runs alone, as it would without padding.
//!
//! Only calls whose rows differ pay for this: rows of one shape take the zero-copy path
//! (`batching.rs`), so the fixed-shape path is unchanged. Copies go through [`window_into`], which
//! moves the overlap of two shapes (the corner both cover) and fills the rest: padding is a
//! window onto a larger shape, cutting back one onto a smaller shape.

use half::{bf16, f16};
use weir_engine::batch::TensorColumn;
use weir_engine::plan::PadPlan;
use weir_engine::spec::PadWhen;
use weir_engine::tensor::{element_count, DType, TensorData};

use super::Job;

/// One padded call's inputs: per input, its per-row shape and every row's padded elements; and
/// each row's own length along the padded dimension.
pub(super) struct PaddedCall {
    pub(super) inputs: Vec<(Vec<usize>, TensorData)>,
    pub(super) lengths: Vec<usize>,
}

/// A node's padding, aligned with its executor's inputs and outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Padding {
    /// The value padded positions hold, before the cast to each input's type.
    pub value: f64,
    /// Per input (in the executor's input order), its padded axes in a request's shape.
    pub inputs: Vec<Vec<usize>>,
    /// Per output (in the executor's output order), the axes cut back to each row's length.
    pub outputs: Vec<Vec<usize>>,
    /// Whether a batch of mixed lengths is one padded call always, or only when predicted
    /// cheaper than calls of nearer lengths (`call_cost.rs`).
    pub when: PadWhen,
}

impl Padding {
    /// `plan`'s axes for an executor with these `inputs` and `outputs` (by name).
    pub fn resolve(plan: &PadPlan, inputs: &[String], outputs: &[(String, DType)]) -> Self {
        Padding {
            value: plan.value,
            inputs: inputs
                .iter()
                .map(|n| PadPlan::axes(&plan.inputs, n).to_vec())
                .collect(),
            outputs: outputs
                .iter()
                .map(|(n, _)| PadPlan::axes(&plan.outputs, n).to_vec())
                .collect(),
            when: plan.when,
        }
    }

    /// What rows of `job` must share with another job's to join its call: per input, its
    /// rows' shape with the padded axes left out. `None` when the job's own rows differ outside
    /// them, or a row's inputs disagree on the padded length (the job then runs alone).
    pub(super) fn call_key(&self, job: &Job) -> Option<Vec<Vec<usize>>> {
        if job.rows() == 0 {
            return None;
        }
        let mut key: Vec<Vec<usize>> = Vec::with_capacity(job.inputs.len());
        for (column, axes) in job.inputs.iter().zip(&self.inputs) {
            let mut shape = column.row_shape(0);
            for &a in axes {
                *shape.get_mut(a)? = 0;
            }
            key.push(shape);
        }
        for row in 0..job.rows() {
            self.row_length(job, row)?;
            for ((column, axes), want) in job.inputs.iter().zip(&self.inputs).zip(&key) {
                let mut shape = column.row_shape(row);
                for &a in axes {
                    *shape.get_mut(a)? = 0;
                }
                if &shape != want {
                    return None;
                }
            }
        }
        Some(key)
    }

    /// Row `row` of `job`'s own length along the padded dimension (`None` when its inputs
    /// disagree, or none has the dimension).
    pub(super) fn row_length(&self, job: &Job, row: usize) -> Option<usize> {
        let mut length = None;
        for (column, axes) in job.inputs.iter().zip(&self.inputs) {
            let shape = column.row_shape(row);
            for &a in axes {
                let n = *shape.get(a)?;
                match length {
                    None => length = Some(n),
                    Some(l) if l != n => return None,
                    Some(_) => {}
                }
            }
        }
        length
    }

    /// The inputs of one call over every row of `jobs` (which share a [`Padding::call_key`]).
    ///
    /// # Errors
    /// When the padded call would hold more elements than memory can address.
    pub(super) fn pad_inputs(&self, jobs: &[Job]) -> Result<PaddedCall, String> {
        let mut lengths = Vec::new();
        for job in jobs {
            for row in 0..job.rows() {
                lengths.push(self.row_length(job, row).unwrap_or(0));
            }
        }
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for (i, axes) in self.inputs.iter().enumerate() {
            let Some(first) = jobs.first().map(|j| &j.inputs[i]) else {
                return Err("no rows to pad".into());
            };
            let mut target = first.row_shape(0);
            for j in jobs {
                for row in 0..j.rows() {
                    let shape = j.inputs[i].row_shape(row);
                    for &a in axes {
                        if let (Some(t), Some(&n)) = (target.get_mut(a), shape.get(a)) {
                            *t = (*t).max(n);
                        }
                    }
                }
            }
            let per_row = element_count(&target).ok_or("the padded shape overflows")?;
            per_row
                .checked_mul(lengths.len())
                .ok_or("the padded call holds too many elements")?;
            let mut data = TensorData::empty(first.dtype());
            for j in jobs {
                let column = &j.inputs[i];
                for row in 0..j.rows() {
                    let elements = row_elements(column, row)?;
                    let shape = column.row_shape(row);
                    if shape == target {
                        data.extend(elements).map_err(|e| e.to_string())?;
                    } else {
                        let all = 0..elements.len();
                        window_into(&mut data, (&elements, all), &shape, &target, self.value)?;
                    }
                }
            }
            inputs.push((target, data));
        }
        Ok(PaddedCall { inputs, lengths })
    }

    /// Cuts output `output` of a padded call (per-row shape `shape`, rows back to back in `data`)
    /// back to each row's own length, as one column per job of `jobs`.
    ///
    /// # Errors
    /// When the output does not hold a row per row of the call.
    pub(super) fn cut_output(
        &self,
        (name, output): (&str, usize),
        (shape, data): (&[usize], &TensorData),
        jobs: &[Job],
        lengths: &[usize],
    ) -> Result<Vec<TensorColumn>, String> {
        let per_row = element_count(shape).ok_or("the output shape overflows")?;
        let axes = &self.outputs[output];
        let mut columns = Vec::with_capacity(jobs.len());
        let mut row = 0usize;
        for job in jobs {
            let mut shapes = Vec::with_capacity(job.rows());
            let mut elements = TensorData::empty(data.dtype());
            for _ in 0..job.rows() {
                let start = row.checked_mul(per_row).ok_or("output rows overflow")?;
                if start + per_row > data.len() {
                    return Err(format!("output `{name}` has fewer rows than the call"));
                }
                let mut own = shape.to_vec();
                for &a in axes {
                    if let Some(d) = own.get_mut(a) {
                        *d = (*d).min(lengths[row]);
                    }
                }
                window_into(
                    &mut elements,
                    (data, start..start + per_row),
                    shape,
                    &own,
                    0.0,
                )?;
                shapes.push(own);
                row += 1;
            }
            columns.push(
                TensorColumn::from_shapes(name, shapes, elements).map_err(|e| e.to_string())?,
            );
        }
        Ok(columns)
    }
}

/// Row `row` of `column`, copied out.
fn row_elements(column: &TensorColumn, row: usize) -> Result<TensorData, String> {
    column
        .data_range(column.row_range(row))
        .ok_or_else(|| "a row without its elements".to_string())
}

/// Appends elements `range` of `src`, a tensor of shape `from`, seen through a window of shape
/// `to` (the same rank) to `out`: the elements both shapes cover keep their positions, the rest
/// hold `fill` cast to the element type (false or true for BOOL by `fill != 0`, the empty string
/// for BYTES). Straight from `src` into `out`, no copy in between.
///
/// # Errors
/// When `out` and `src` differ in element type, or `range` is outside `src`.
fn window_into(
    out: &mut TensorData,
    (src, range): (&TensorData, std::ops::Range<usize>),
    from: &[usize],
    to: &[usize],
    fill: f64,
) -> Result<(), String> {
    if range.end > src.len() || range.start > range.end {
        return Err("a row outside its tensor".into());
    }
    macro_rules! arms {
        ($($variant:ident => $fill:expr),*) => {
            match (out, src) {
                $((TensorData::$variant(o), TensorData::$variant(s)) => {
                    if from == to {
                        o.extend_from_slice(&s[range]);
                    } else {
                        window_of(o, &s[range], from, to, $fill);
                    }
                    Ok(())
                })*
                (o, s) => Err(format!("{:?} elements into {:?}", s.dtype(), o.dtype())),
            }
        };
    }
    arms!(
        Bool => fill != 0.0, U8 => fill as u8, U16 => fill as u16, U32 => fill as u32,
        U64 => fill as u64, I8 => fill as i8, I16 => fill as i16, I32 => fill as i32,
        I64 => fill as i64, F16 => f16::from_f64(fill), F32 => fill as f32, F64 => fill,
        Bf16 => bf16::from_f64(fill), Bytes => Vec::new()
    )
}

/// [`window_into`] on one element type, appending to `out`. `src` holds exactly the elements of
/// `from`.
fn window_of<T: Clone>(out: &mut Vec<T>, src: &[T], from: &[usize], to: &[usize], fill: T) {
    let base = out.len();
    let total: usize = to.iter().product();
    out.resize(base + total, fill);
    let out = &mut out[base..];
    let rank = from.len().min(to.len());
    if rank == 0 {
        for (o, s) in out.iter_mut().zip(src) {
            *o = s.clone();
        }
        return;
    }
    let common: Vec<usize> = from.iter().zip(to).map(|(a, b)| *a.min(b)).collect();
    if common.contains(&0) {
        return;
    }
    let strides = |shape: &[usize]| {
        let mut s = vec![1usize; rank];
        for a in (0..rank - 1).rev() {
            s[a] = s[a + 1] * shape[a + 1];
        }
        s
    };
    let (from_strides, to_strides) = (strides(from), strides(to));
    let run = common[rank - 1];
    let lines: usize = common[..rank - 1].iter().product();
    let mut index = vec![0usize; rank - 1];
    for _ in 0..lines {
        let at = |strides: &[usize]| index.iter().zip(strides).map(|(i, s)| i * s).sum::<usize>();
        let (s, d) = (at(&from_strides), at(&to_strides));
        out[d..d + run].clone_from_slice(&src[s..s + run]);
        for a in (0..rank - 1).rev() {
            index[a] += 1;
            if index[a] < common[a] {
                break;
            }
            index[a] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(data: &TensorData, from: &[usize], to: &[usize], fill: f64) -> TensorData {
        let mut out = TensorData::empty(data.dtype());
        window_into(&mut out, (data, 0..data.len()), from, to, fill).unwrap();
        out
    }

    #[test]
    fn a_window_pads_and_cuts_back_to_the_same_elements() {
        // [[1, 2], [3, 4]] padded to 3 × 3, then cut back.
        let x = TensorData::I64(vec![1, 2, 3, 4]);
        let padded = window(&x, &[2, 2], &[3, 3], 9.0);
        assert_eq!(padded, TensorData::I64(vec![1, 2, 9, 3, 4, 9, 9, 9, 9]));
        assert_eq!(window(&padded, &[3, 3], &[2, 2], 0.0), x);
        // Along the middle axis of three, and a scalar.
        let y = TensorData::F32(vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            window(&y, &[2, 1, 2], &[2, 2, 2], 0.0),
            TensorData::F32(vec![1.0, 2.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0])
        );
        let s = TensorData::Bool(vec![true]);
        assert_eq!(window(&s, &[], &[], 0.0), s);
        let b = TensorData::Bytes(vec![b"a".to_vec()]);
        assert_eq!(
            window(&b, &[1], &[2], 0.0),
            TensorData::Bytes(vec![b"a".to_vec(), Vec::new()])
        );
    }

    fn job(columns: Vec<TensorColumn>) -> Job {
        Job {
            inputs: columns,
            enqueued_at: std::time::Instant::now(),
            deadline: None,
            trace: None,
            done: Box::new(|_| {}),
        }
    }

    fn ids(len: usize) -> TensorColumn {
        TensorColumn::from_data("x", vec![len], 1, TensorData::I64(vec![1; len])).unwrap()
    }

    fn padding() -> Padding {
        Padding {
            value: 0.0,
            inputs: vec![vec![0], vec![0]],
            outputs: vec![vec![0], vec![]],
            when: PadWhen::Cheaper,
        }
    }

    #[test]
    fn rows_of_other_lengths_share_a_key_and_disagreeing_inputs_have_none() {
        let p = padding();
        let a = job(vec![ids(3), ids(3)]);
        let b = job(vec![ids(5), ids(5)]);
        assert_eq!(p.call_key(&a), Some(vec![vec![0], vec![0]]));
        assert_eq!(p.call_key(&a), p.call_key(&b));
        assert_eq!(p.call_key(&job(vec![ids(3), ids(4)])), None);
    }

    #[test]
    fn a_padded_call_cuts_each_row_back_to_its_own_length() {
        let p = padding();
        let jobs = vec![job(vec![ids(2), ids(2)]), job(vec![ids(4), ids(4)])];
        let PaddedCall { inputs, lengths } = p.pad_inputs(&jobs).unwrap();
        assert_eq!(lengths, vec![2, 4]);
        assert_eq!(inputs[0].0, vec![4]);
        assert_eq!(inputs[0].1, TensorData::I64(vec![1, 1, 0, 0, 1, 1, 1, 1]));
        // An output with the padded axis is cut back; one without is kept whole.
        let out = TensorData::F32((0..8).map(|i| i as f32).collect());
        let cut = p
            .cut_output(("tokens", 0), (&[4], &out), &jobs, &lengths)
            .unwrap();
        assert_eq!(cut[0].uniform_shape(), Some(&[2][..]));
        assert_eq!(cut[0].f32_values().unwrap(), &[0.0, 1.0]);
        assert_eq!(cut[1].f32_values().unwrap(), &[4.0, 5.0, 6.0, 7.0]);
        let whole = p
            .cut_output(("pooled", 1), (&[4], &out), &jobs, &lengths)
            .unwrap();
        assert_eq!(whole[0].uniform_shape(), Some(&[4][..]));
    }
}
