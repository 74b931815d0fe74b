//! Causal lineage: the `lineage` column every batch carries, one list of entries per request.
//!
//! Each hop appends, for every predecessor the row came from, an entry `(pred_node, pred_seq, node,
//! seq)`: "this row left `pred_node` in its batch `pred_seq` and was processed by `node` in its batch
//! `seq`" (HAMS, Algorithm 1). The ingress writes the first entry, with `pred_node` = [`CLIENT`]
//! and `pred_seq` = the request id. Node ids are the plan's lineage ids (`0` is the ingress); `seq`
//! numbers are unique per node within a process.
//!
//! A fan-out node (`crop_boxes`) splits one request's row into parts: each part is a row of its own,
//! still under the request's id, whose lineage gains a *part entry* `(PART, index << 32 | count,
//! node, seq)` pointing back at the fan-out node and the batch its parent left in. A row is named by
//! its [`RowKey`]: the request id and the `(node, index)` of every part entry, so joins inside a
//! fan-out keep a request's parts apart and a `gather` knows each part's place and how many to wait
//! for. The gather's row is whole again, so its part entries become *gathered-part* entries
//! `(GATHERED, index << 32 | count, node, seq)`: no longer part of the row's key, they still say
//! which hops after them a part took (the trace spans read them).
//!
//! The column is an Arrow `List<Struct<pred_node: u32, pred_seq: u64, node: u32, seq: u64>>`. This
//! module builds it column-wise (offsets plus four child vectors), so a hop costs one pass over the
//! entries, not one allocation per row.

use std::sync::Arc;

use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, ListArray, PrimitiveArray, StructArray, UInt32Array,
    UInt64Array,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields};

/// `pred_node` of the first entry of every request: the client that sent it.
pub const CLIENT: u32 = u32::MAX;

/// Lineage id of the ingress, the first hop of every request.
pub const INGRESS: u32 = 0;

/// `pred_node` of a part entry: the row is part `pred_seq >> 32` of `pred_seq & 0xFFFF_FFFF` parts
/// that fan-out node `node` made of its request in batch `seq`.
pub const PART: u32 = u32::MAX - 1;

/// `pred_node` of a gathered-part entry: a [`PART`] entry of a fan-out whose gather has joined
/// the parts again. It marks the hops after it as that part's, and is no longer in the row's key.
pub const GATHERED: u32 = u32::MAX - 2;

/// The identity of a row: its request and, inside fan-outs, which part of it (outermost first).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    /// The request id.
    pub request: u64,
    /// Per enclosing fan-out, outermost first: its node and this row's part index.
    pub parts: Vec<(u32, u32)>,
}

impl RowKey {
    /// The key of the row this part was split from, and this part's index, if `self` is a part
    /// of fan-out node `node` (its innermost part entry).
    pub fn parent_at(&self, node: u32) -> Option<(RowKey, u32)> {
        let (&(last, index), outer) = self.parts.split_last()?;
        (last == node).then(|| {
            (
                RowKey {
                    request: self.request,
                    parts: outer.to_vec(),
                },
                index,
            )
        })
    }
}

/// One hop of a request through the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LineageEntry {
    /// The node the row came from.
    pub pred_node: u32,
    /// The batch sequence number at `pred_node` that carried the row.
    pub pred_seq: u64,
    /// The node that processed the row.
    pub node: u32,
    /// The batch sequence number at `node`.
    pub seq: u64,
}

impl LineageEntry {
    /// The entry marking a row as part `index` of the `count` parts fan-out node `node` made of
    /// its request in batch `seq`.
    pub fn part(node: u32, seq: u64, index: u32, count: u32) -> Self {
        LineageEntry {
            pred_node: PART,
            pred_seq: (u64::from(index) << 32) | u64::from(count),
            node,
            seq,
        }
    }

    /// `(node, index, count)` when this is a part entry.
    pub fn as_part(&self) -> Option<(u32, u32, u32)> {
        (self.pred_node == PART).then(|| self.part_fields())
    }

    /// This part entry as its gather leaves it (see [`GATHERED`]); other entries unchanged.
    pub fn gathered(self) -> Self {
        if self.pred_node == PART {
            LineageEntry {
                pred_node: GATHERED,
                ..self
            }
        } else {
            self
        }
    }

    /// `(node, index, count)` when this is a part entry or a gathered-part entry: the hop after
    /// it is part `index` of the `count` parts fan-out node `node` made.
    pub fn as_any_part(&self) -> Option<(u32, u32, u32)> {
        matches!(self.pred_node, PART | GATHERED).then(|| self.part_fields())
    }

    fn part_fields(&self) -> (u32, u32, u32) {
        (
            self.node,
            (self.pred_seq >> 32) as u32,
            self.pred_seq as u32,
        )
    }
}

fn entry_fields() -> Fields {
    Fields::from(vec![
        Field::new("pred_node", DataType::UInt32, false),
        Field::new("pred_seq", DataType::UInt64, false),
        Field::new("node", DataType::UInt32, false),
        Field::new("seq", DataType::UInt64, false),
    ])
}

fn item_field() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Struct(entry_fields()), false))
}

/// The Arrow type of the lineage column.
pub fn lineage_data_type() -> DataType {
    DataType::List(item_field())
}

/// Accumulates lineage rows and builds the column in one go.
#[derive(Debug, Default)]
pub struct LineageBuilder {
    offsets: Vec<i32>,
    pred_node: Vec<u32>,
    pred_seq: Vec<u64>,
    node: Vec<u32>,
    seq: Vec<u64>,
}

impl LineageBuilder {
    /// A builder with room for `rows` rows of about `entries_per_row` entries.
    pub fn with_capacity(rows: usize, entries_per_row: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        let n = rows * entries_per_row;
        LineageBuilder {
            offsets,
            pred_node: Vec::with_capacity(n),
            pred_seq: Vec::with_capacity(n),
            node: Vec::with_capacity(n),
            seq: Vec::with_capacity(n),
        }
    }

    /// Adds one entry to the current row.
    pub fn push_entry(&mut self, e: LineageEntry) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.pred_node.push(e.pred_node);
        self.pred_seq.push(e.pred_seq);
        self.node.push(e.node);
        self.seq.push(e.seq);
    }

    /// Closes the current row.
    pub fn finish_row(&mut self) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.offsets.push(self.node.len() as i32);
    }

    /// Builds the column.
    pub fn finish(self) -> ListArray {
        let mut offsets = self.offsets;
        if offsets.is_empty() {
            offsets.push(0);
        }
        let children: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(self.pred_node)),
            Arc::new(UInt64Array::from(self.pred_seq)),
            Arc::new(UInt32Array::from(self.node)),
            Arc::new(UInt64Array::from(self.seq)),
        ];
        let entries = StructArray::new(entry_fields(), children, None);
        ListArray::new(
            item_field(),
            OffsetBuffer::new(offsets.into()),
            Arc::new(entries),
            None,
        )
    }
}

/// The lineage the ingress writes for requests `ids`: one row each, holding the single entry
/// `(CLIENT, id, INGRESS, seq)`, `seq` being the number of the ingress batch that admits them.
pub fn from_clients(ids: &[u64], seq: u64) -> ListArray {
    let mut lineage = LineageBuilder::with_capacity(ids.len(), 1);
    for &id in ids {
        lineage.push_entry(LineageEntry {
            pred_node: CLIENT,
            pred_seq: id,
            node: INGRESS,
            seq,
        });
        lineage.finish_row();
    }
    lineage.finish()
}

/// Read access to one lineage column.
#[derive(Debug, Clone, Copy)]
pub struct LineageView<'a> {
    list: &'a ListArray,
    pred_node: &'a [u32],
    pred_seq: &'a [u64],
    node: &'a [u32],
    seq: &'a [u64],
}

impl<'a> LineageView<'a> {
    /// A view of `list`, which must have been built by [`LineageBuilder`] (the only way weir builds one).
    ///
    /// # Panics
    /// If `list` does not have the lineage type; every batch weir creates does (an invariant of
    /// [`crate::batch::Batch`]).
    pub fn new(list: &'a ListArray) -> Self {
        let entries = list
            .values()
            .as_any()
            .downcast_ref::<StructArray>()
            .expect("lineage column holds structs");
        LineageView {
            list,
            pred_node: field::<UInt32Type>(entries, 0, "lineage node field is u32"),
            pred_seq: field::<UInt64Type>(entries, 1, "lineage seq field is u64"),
            node: field::<UInt32Type>(entries, 2, "lineage node field is u32"),
            seq: field::<UInt64Type>(entries, 3, "lineage seq field is u64"),
        }
    }

    /// The entries of row `row`, oldest first.
    pub fn row(&self, row: usize) -> impl Iterator<Item = LineageEntry> + 'a {
        let offsets = self.list.value_offsets();
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        let v = *self;
        (start..end).map(move |i| LineageEntry {
            pred_node: v.pred_node[i],
            pred_seq: v.pred_seq[i],
            node: v.node[i],
            seq: v.seq[i],
        })
    }

    /// The key of row `row` of request `request`: its part entries, in order.
    pub fn row_key(&self, row: usize, request: u64) -> RowKey {
        RowKey {
            request,
            parts: self
                .row(row)
                .filter_map(|e| e.as_part().map(|(node, index, _)| (node, index)))
                .collect(),
        }
    }

    /// The `seq` of the newest entry of `row` processed by `node`, if the row passed through it.
    pub fn last_seq_at(&self, row: usize, node: u32) -> Option<u64> {
        self.row(row)
            .filter(|e| e.node == node)
            .last()
            .map(|e| e.seq)
    }
}

/// Field `i` of the lineage entries, whose type the lineage column fixes (`expected` says which).
fn field<'a, T: ArrowPrimitiveType>(
    entries: &'a StructArray,
    i: usize,
    expected: &str,
) -> &'a [T::Native] {
    entries
        .column(i)
        .as_any()
        .downcast_ref::<PrimitiveArray<T>>()
        .expect(expected)
        .values()
}

/// Appends a hop at `node` (batch `seq`) to every row, one entry per predecessor in `preds`.
pub fn append_hop(list: &ListArray, preds: &[u32], node: u32, seq: u64) -> ListArray {
    let view = LineageView::new(list);
    let rows = list.len();
    let mut out = LineageBuilder::with_capacity(rows, 4);
    for row in 0..rows {
        for e in view.row(row) {
            out.push_entry(e);
        }
        for &p in preds {
            out.push_entry(LineageEntry {
                pred_node: p,
                pred_seq: view.last_seq_at(row, p).unwrap_or(0),
                node,
                seq,
            });
        }
        out.finish_row();
    }
    out.finish()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One lineage entry, for tests here and of the trace spans read off lineage.
    pub(crate) fn entry(pred_node: u32, pred_seq: u64, node: u32, seq: u64) -> LineageEntry {
        LineageEntry {
            pred_node,
            pred_seq,
            node,
            seq,
        }
    }

    #[test]
    fn builds_and_reads_rows() {
        let mut b = LineageBuilder::with_capacity(2, 1);
        b.push_entry(entry(CLIENT, 7, INGRESS, 1));
        b.finish_row();
        b.push_entry(entry(CLIENT, 8, INGRESS, 1));
        b.finish_row();
        let list = b.finish();
        assert_eq!(list.len(), 2);
        let v = LineageView::new(&list);
        assert_eq!(
            v.row(1).collect::<Vec<_>>(),
            vec![entry(CLIENT, 8, INGRESS, 1)]
        );
    }

    #[test]
    fn append_hop_links_each_predecessor_by_its_seq() {
        let mut b = LineageBuilder::default();
        b.push_entry(entry(CLIENT, 1, INGRESS, 10));
        b.push_entry(entry(INGRESS, 10, 1, 3));
        b.push_entry(entry(INGRESS, 10, 2, 5));
        b.finish_row();
        let list = append_hop(&b.finish(), &[1, 2], 3, 9);
        let v = LineageView::new(&list);
        let row: Vec<_> = v.row(0).collect();
        assert_eq!(row.len(), 5);
        assert_eq!(row[3], entry(1, 3, 3, 9));
        assert_eq!(row[4], entry(2, 5, 3, 9));
    }

    #[test]
    fn part_entries_name_the_row_and_its_parent() {
        let mut b = LineageBuilder::default();
        b.push_entry(entry(CLIENT, 9, INGRESS, 0));
        b.push_entry(LineageEntry::part(3, 4, 2, 5));
        b.push_entry(entry(3, 4, 5, 6));
        b.push_entry(LineageEntry::part(5, 6, 0, 1));
        b.finish_row();
        let list = b.finish();
        let v = LineageView::new(&list);
        let key = v.row_key(0, 9);
        assert_eq!(key.parts, vec![(3, 2), (5, 0)]);
        let (parent, index) = key.parent_at(5).unwrap();
        assert_eq!((parent.parts.clone(), index), (vec![(3, 2)], 0));
        assert_eq!(
            key.parent_at(3),
            None,
            "only the innermost fan-out closes first"
        );
        assert_eq!(parent.parent_at(3).unwrap().0.parts, vec![]);
        assert_eq!(LineageEntry::part(3, 4, 2, 5).as_part(), Some((3, 2, 5)));
    }

    #[test]
    fn a_gathered_part_entry_leaves_the_key_but_still_names_its_part() {
        let gathered = LineageEntry::part(3, 4, 2, 5).gathered();
        assert_eq!(gathered.as_part(), None);
        assert_eq!(gathered.as_any_part(), Some((3, 2, 5)));
        assert_eq!(entry(1, 2, 3, 4).gathered(), entry(1, 2, 3, 4));
        let mut b = LineageBuilder::default();
        b.push_entry(entry(CLIENT, 9, INGRESS, 0));
        b.push_entry(gathered);
        b.push_entry(entry(3, 4, 5, 6));
        b.finish_row();
        let list = b.finish();
        assert_eq!(LineageView::new(&list).row_key(0, 9).parts, vec![]);
    }

    #[test]
    fn sliced_lists_read_their_own_rows() {
        let mut b = LineageBuilder::default();
        for id in 0..4 {
            b.push_entry(entry(CLIENT, id, INGRESS, 0));
            b.finish_row();
        }
        let list = b.finish().slice(2, 2);
        let v = LineageView::new(&list);
        assert_eq!(v.row(0).next().map(|e| e.pred_seq), Some(2));
        let appended = append_hop(&list, &[INGRESS], 1, 4);
        assert_eq!(appended.len(), 2);
    }
}
