//! The coding tag: which coding group a job belongs to and where, as a `coding_group` batch
//! column of three i64 per row — the group id, the job's position in the group, and (on the job
//! that fills the group) whether the group's parity queries went out (1) or it could not be
//! coded (0).
//!
//! The encoder sends each job's tag to the decoder as a batch of its own (the job's request ids,
//! lineage and parameters, and this column), beside the untagged job it sends to the deployed
//! model operator. A column on the job itself would not survive the model's hop (its output
//! batch keeps the request ids and lineage, and replaces the tensors), and the model's errors
//! carry only request ids; so the decoder keeps each job's tag and finds a prediction's job by
//! the first row's request id and lineage key, an error's by its request id. Parity queries
//! carry their group in the request id: row `i` of group `g`'s query is `g << 32 | i` (they never
//! reach the egress), so the parity model operator's outputs and errors name their group.

use weir_engine::batch::{Batch, BatchError, TensorColumn};
use weir_engine::tensor::TensorData;

/// The tag column's name.
pub const CODING_GROUP: &str = "coding_group";

/// A job's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// Its coding group (numbered per worker, wrapping at 2^32).
    pub group: u32,
    /// Its position in the group, `0..k`.
    pub position: usize,
    /// On the job that fills the group: whether the group's parity queries went out.
    pub coded: bool,
}

impl Tag {
    /// The tag batch of job `job`: its rows' ids, lineage and parameters, and the tag column.
    ///
    /// # Errors
    /// Only if the column does not fit the rows, which a tag of the job's own rows never causes.
    pub fn batch(&self, job: &Batch) -> Result<Batch, BatchError> {
        let rows = job.num_rows();
        let values = [
            i64::from(self.group),
            self.position as i64,
            i64::from(self.coded),
        ];
        let column = TensorColumn::from_data(
            CODING_GROUP,
            vec![3],
            rows,
            TensorData::I64(values.repeat(rows)),
        )?;
        job.derive(job.lineage().clone(), vec![(CODING_GROUP.into(), column)])
    }

    /// The tag of a tag batch, if it has one.
    pub fn of(batch: &Batch) -> Option<Tag> {
        let v = batch.tensor(CODING_GROUP)?.i64_values()?;
        let (group, position, coded) = (v.first()?, v.get(1)?, v.get(2)?);
        Some(Tag {
            group: u32::try_from(*group).ok()?,
            position: usize::try_from(*position).ok()?,
            coded: *coded != 0,
        })
    }
}

/// The request id of row `row` of group `group`'s parity query.
pub fn parity_row_id(group: u32, row: usize) -> u64 {
    (u64::from(group) << 32) | (row as u64 & 0xFFFF_FFFF)
}

/// The group and row of a parity query's request id.
pub fn parity_row_of(id: u64) -> (u32, usize) {
    ((id >> 32) as u32, (id & 0xFFFF_FFFF) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::lineage::from_clients;

    #[test]
    fn a_tag_survives_its_batch_and_parity_ids_name_their_group_and_row() {
        let ids = arrow_array::UInt64Array::from(vec![4, 9]);
        let job = Batch::new(ids, from_clients(&[4, 9], 0), vec![]).unwrap();
        let tag = Tag {
            group: 7,
            position: 1,
            coded: true,
        };
        let batch = tag.batch(&job).unwrap();
        assert_eq!(batch.request_ids(), [4, 9]);
        assert_eq!(Tag::of(&batch), Some(tag));
        assert_eq!(parity_row_of(parity_row_id(u32::MAX, 3)), (u32::MAX, 3));
    }
}
