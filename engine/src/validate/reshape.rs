//! The `reshape` op: its settings, its type, and the one rule that turns a row's element count
//! into the row's new shape, shared by validation (for inputs of fixed shape) and the operator
//! (for every row), so the two cannot disagree.
//!
//! Rules: every size is 0 or more but for at most one `-1`, which takes what the row's element
//! count leaves; a `-1` beside a zero-sized dimension is refused (any count would fit). When the
//! input's shape is fixed, the count is checked here and the `-1` settled; otherwise each row is
//! checked when it arrives, and one that does not fit fails naming the row.

use std::fmt;

use super::{node_path, Port, Validator};
use crate::spec::ReshapeSpec;
use crate::tensor::{element_count, Dim, ShapeDisplay, TensorType};

/// A checked `reshape`: the new per-request shape, `None` where the size is taken from the row.
#[derive(Debug, Clone, PartialEq)]
pub struct ReshapeOp {
    /// The sizes; at most one is `None`.
    pub shape: Vec<Option<usize>>,
}

impl ReshapeOp {
    /// The shape a row of `elements` elements takes.
    ///
    /// # Errors
    /// A message when the count does not fit the shape.
    pub fn row_shape(&self, elements: usize) -> Result<Vec<usize>, String> {
        let known: Vec<usize> = self.shape.iter().flatten().copied().collect();
        let product = element_count(&known).ok_or_else(|| format!("{self} overflows"))?;
        let free = self.shape.iter().position(Option::is_none);
        let inferred = match free {
            None if product == elements => None,
            Some(_) if product > 0 && elements.is_multiple_of(product) => Some(elements / product),
            _ => return Err(format!("{elements} elements do not fit shape {self}")),
        };
        Ok(self
            .shape
            .iter()
            .map(|d| d.or(inferred).unwrap_or_default())
            .collect())
    }
}

impl fmt::Display for ReshapeOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes: Vec<String> = self
            .shape
            .iter()
            .map(|d| d.map_or_else(|| "-1".to_string(), |n| n.to_string()))
            .collect();
        write!(f, "[{}]", sizes.join(", "))
    }
}

impl Validator<'_, '_> {
    /// The sizes of `reshape` node `r` as an op, or `None` after an error.
    fn reshape_op(&mut self, r: &ReshapeSpec) -> Option<ReshapeOp> {
        let id = r.id.value.as_str();
        let bad = |what: String| (node_path(id, "shape"), format!("node `{id}`: {what}"));
        let sizes = &r.shape.value;
        let problem = if let Some(d) = sizes.iter().find(|&&d| d < -1) {
            Some(bad(format!("size {d} is below -1")))
        } else if sizes.iter().filter(|&&d| d == -1).count() > 1 {
            Some(bad("at most one size may be -1".into()))
        } else if sizes.contains(&-1) && sizes.contains(&0) {
            Some(bad(
                "a -1 beside a size of 0 could be anything; write every size".into(),
            ))
        } else {
            None
        };
        if let Some((path, message)) = problem {
            self.error(path, r.shape.location, message);
            return None;
        }
        let shape = sizes.iter().map(|&d| usize::try_from(d).ok()).collect();
        Some(ReshapeOp { shape })
    }

    /// Types `reshape` node `r` reading port `p`: the op, settled against the port's element
    /// count where that is fixed, and its output.
    pub(super) fn type_reshape(
        &mut self,
        r: &ReshapeSpec,
        p: &Port,
    ) -> Option<(ReshapeOp, TensorType)> {
        let id = r.id.value.as_str();
        let op = self.reshape_op(r)?;
        let shape = match p.ty.element_count() {
            Some(n) => match op.row_shape(n) {
                Ok(s) => s.into_iter().map(Dim::Fixed).collect(),
                Err(_) => {
                    self.error(
                        node_path(id, "shape"),
                        r.shape.location,
                        format!(
                            "node `{id}`: `{}` has shape {} ({n} elements), which shape {op} cannot hold",
                            p.column,
                            ShapeDisplay(&p.ty.shape)
                        ),
                    );
                    return None;
                }
            },
            None => op
                .shape
                .iter()
                .map(|d| d.map_or(Dim::Dynamic, Dim::Fixed))
                .collect(),
        };
        let ty = TensorType {
            dtype: p.ty.dtype,
            shape,
        };
        Some((op, ty))
    }
}

#[cfg(test)]
mod tests {
    use super::ReshapeOp;

    fn op(sizes: &[Option<usize>]) -> ReshapeOp {
        ReshapeOp {
            shape: sizes.to_vec(),
        }
    }

    #[test]
    fn a_row_takes_the_shape_and_the_free_size_is_inferred() {
        assert_eq!(op(&[Some(2), Some(6)]).row_shape(12), Ok(vec![2, 6]));
        assert_eq!(op(&[None, Some(4)]).row_shape(12), Ok(vec![3, 4]));
        assert_eq!(op(&[]).row_shape(1), Ok(vec![]));
        assert_eq!(op(&[Some(0), Some(3)]).row_shape(0), Ok(vec![0, 3]));
    }

    #[test]
    fn a_count_the_shape_cannot_hold_names_both() {
        let e = op(&[None, Some(5)]).row_shape(12).unwrap_err();
        assert!(e.contains("12 elements") && e.contains("[-1, 5]"), "{e}");
        assert!(op(&[]).row_shape(2).is_err());
        assert!(op(&[Some(2), Some(2)]).row_shape(5).is_err());
    }
}
