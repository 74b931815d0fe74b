//! The table of a per-sequence node's sequences, and what one batch does to it.
//!
//! A table is one state version. [`SequenceTable::plan`] reads a batch's row controls against the
//! table and decides, in row order and as if the rows ran one after another: which sequences time
//! out first (idle since `idle_timeout_ms` on the batch's clock), which rows are refused (an
//! unknown sequence without `start`, or a new sequence with every slot taken), and which call
//! ("wave") each other row runs in. Wave `k` holds the `k`-th row of every sequence in the batch,
//! so one call never steps a sequence twice and a sequence's rows run in arrival order, while the
//! rows of different sequences share calls. The decision reads nothing but the table and the
//! controls, so the primary and any replay make the same one.
//!
//! Entries are behind `Arc`s: a version that changes a few sequences shares the rest with the
//! version before (the primary keeps several versions for rollback), and a batch's
//! [`SequenceDelta`] names only the sequences it changed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use weir_hams::sequences::{RowRefusal, SequenceControls, SequenceLayout, SequenceRefusal};

/// One sequence's state.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Per state tensor, this sequence's values (the tensor's one-sequence shape, row-major).
    pub state: Vec<Vec<f32>>,
    /// When it was last stepped, on the graph's clock (ms).
    pub last_used_ms: u64,
}

/// The sequences a per-sequence node holds, by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SequenceTable {
    entries: BTreeMap<String, Arc<Entry>>,
}

/// What a batch changed: sequences dropped, and sequences set to a new entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SequenceDelta {
    /// Dropped (ended or timed out).
    pub removed: Vec<String>,
    /// Created or stepped.
    pub set: Vec<(String, Arc<Entry>)>,
}

/// One row to run: its index in the batch, its sequence, and whether it starts from the initial
/// state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowStep {
    /// The row.
    pub row: usize,
    /// Its sequence.
    pub id: String,
    /// It starts the sequence (from the initial state, whatever the table held).
    pub fresh: bool,
    /// The sequence ends after it.
    pub end: bool,
}

/// How a batch runs: see the module doc.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchPlan {
    /// Sequences timed out before the batch's rows.
    pub expired: Vec<String>,
    /// The calls, in order; each steps distinct sequences, rows in arrival order.
    pub waves: Vec<Vec<RowStep>>,
    /// Rows not run.
    pub refused: Vec<RowRefusal>,
}

impl SequenceTable {
    /// The sequences held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no sequence is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sequence `id`'s entry.
    pub fn get(&self, id: &str) -> Option<&Arc<Entry>> {
        self.entries.get(id)
    }

    /// Every sequence, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Arc<Entry>)> {
        self.entries.iter()
    }

    /// Sets sequence `id`.
    pub fn insert(&mut self, id: String, entry: Arc<Entry>) {
        self.entries.insert(id, entry);
    }

    /// Drops sequence `id`.
    pub fn remove(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// Decides how `controls` run against this table under `layout` (see the module doc).
    pub fn plan(&self, layout: &SequenceLayout, controls: &SequenceControls) -> BatchPlan {
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                controls.now_ms.saturating_sub(e.last_used_ms) >= layout.idle_timeout_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        let gone: HashSet<&str> = expired.iter().map(String::as_str).collect();
        let mut live: HashSet<&str> = self
            .entries
            .keys()
            .map(String::as_str)
            .filter(|id| !gone.contains(id))
            .collect();
        let mut steps_of: HashMap<&str, usize> = HashMap::new();
        let mut plan = BatchPlan {
            expired: expired.clone(),
            ..BatchPlan::default()
        };
        for (row, c) in controls.rows.iter().enumerate() {
            let id = c.id.as_str();
            let refusal = if live.contains(id) {
                None
            } else if !c.start {
                Some(SequenceRefusal::Unknown)
            } else if live.len() >= layout.max_sequences {
                Some(SequenceRefusal::Full {
                    limit: layout.max_sequences,
                })
            } else {
                None
            };
            if let Some(reason) = refusal {
                plan.refused.push(RowRefusal {
                    row: row as u32,
                    reason,
                });
                continue;
            }
            live.insert(id);
            let wave = steps_of.entry(id).or_insert(0);
            if plan.waves.len() <= *wave {
                plan.waves.push(Vec::new());
            }
            plan.waves[*wave].push(RowStep {
                row,
                id: c.id.clone(),
                fresh: c.start,
                end: c.end,
            });
            *wave += 1;
            if c.end {
                live.remove(id);
            }
        }
        plan
    }

    /// What changed from this table to `next` among the sequences `touched`.
    pub fn delta_to(&self, next: &SequenceTable, touched: &BTreeSet<String>) -> SequenceDelta {
        let mut delta = SequenceDelta::default();
        for id in touched {
            match next.entries.get(id) {
                Some(e) => {
                    if self.entries.get(id) != Some(e) {
                        delta.set.push((id.clone(), Arc::clone(e)));
                    }
                }
                None => {
                    if self.entries.contains_key(id) {
                        delta.removed.push(id.clone());
                    }
                }
            }
        }
        delta
    }

    /// This table with `delta` applied.
    pub fn with_delta(&self, delta: &SequenceDelta) -> SequenceTable {
        let mut next = self.clone();
        for id in &delta.removed {
            next.entries.remove(id);
        }
        for (id, e) in &delta.set {
            next.entries.insert(id.clone(), Arc::clone(e));
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_hams::sequences::RowControl;

    fn layout(max: usize) -> SequenceLayout {
        SequenceLayout {
            batch_axis: 0,
            initial: Vec::new(),
            idle_timeout_ms: 100,
            max_sequences: max,
        }
    }

    fn row(id: &str, start: bool, end: bool) -> RowControl {
        RowControl {
            id: id.into(),
            start,
            end,
        }
    }

    fn controls(now_ms: u64, rows: Vec<RowControl>) -> SequenceControls {
        SequenceControls { now_ms, rows }
    }

    fn table(ids: &[(&str, u64)]) -> SequenceTable {
        let mut t = SequenceTable::default();
        for (id, at) in ids {
            t.insert(
                id.to_string(),
                Arc::new(Entry {
                    state: vec![vec![0.0]],
                    last_used_ms: *at,
                }),
            );
        }
        t
    }

    fn rows_of(plan: &BatchPlan) -> Vec<Vec<(usize, &str)>> {
        plan.waves
            .iter()
            .map(|w| w.iter().map(|s| (s.row, s.id.as_str())).collect())
            .collect()
    }

    #[test]
    fn rows_of_different_sequences_share_a_call_and_one_sequence_steps_in_order() {
        let t = table(&[("a", 0), ("b", 0)]);
        let plan = t.plan(
            &layout(8),
            &controls(
                10,
                vec![
                    row("a", false, false),
                    row("b", false, false),
                    row("a", false, false),
                    row("c", true, false),
                ],
            ),
        );
        assert_eq!(
            rows_of(&plan),
            vec![vec![(0, "a"), (1, "b"), (3, "c")], vec![(2, "a")]]
        );
        assert!(plan.refused.is_empty() && plan.expired.is_empty());
        assert!(plan.waves[0][2].fresh);
    }

    #[test]
    fn unknown_sequences_and_starts_past_the_bound_are_refused() {
        let t = table(&[("a", 0)]);
        let plan = t.plan(
            &layout(2),
            &controls(
                10,
                vec![
                    row("x", false, false),
                    row("b", true, false),
                    row("c", true, false),
                    row("a", true, true),
                    row("c", true, false),
                    row("a", false, false),
                ],
            ),
        );
        assert_eq!(
            plan.refused,
            vec![
                RowRefusal {
                    row: 0,
                    reason: SequenceRefusal::Unknown
                },
                RowRefusal {
                    row: 2,
                    reason: SequenceRefusal::Full { limit: 2 }
                },
                RowRefusal {
                    row: 5,
                    reason: SequenceRefusal::Unknown
                },
            ],
            "a's end frees its slot for c; a row after the end is unknown"
        );
        assert_eq!(rows_of(&plan), vec![vec![(1, "b"), (3, "a"), (4, "c")]]);
    }

    #[test]
    fn idle_sequences_time_out_before_the_rows_and_free_their_slots() {
        let t = table(&[("old", 0), ("new", 50)]);
        let plan = t.plan(
            &layout(2),
            &controls(100, vec![row("old", false, false), row("c", true, false)]),
        );
        assert_eq!(plan.expired, vec!["old".to_string()]);
        assert_eq!(plan.refused.len(), 1);
        assert_eq!(plan.refused[0].row, 0);
        assert_eq!(rows_of(&plan), vec![vec![(1, "c")]]);
    }

    #[test]
    fn a_delta_carries_exactly_what_changed() {
        let before = table(&[("a", 0), ("b", 0), ("c", 0)]);
        let mut after = before.clone();
        after.remove("a");
        after.insert(
            "b".into(),
            Arc::new(Entry {
                state: vec![vec![1.0]],
                last_used_ms: 5,
            }),
        );
        after.insert(
            "d".into(),
            Arc::new(Entry {
                state: vec![vec![2.0]],
                last_used_ms: 5,
            }),
        );
        let touched: BTreeSet<String> = ["a", "b", "d", "zz"].map(String::from).into();
        let delta = before.delta_to(&after, &touched);
        assert_eq!(delta.removed, vec!["a".to_string()]);
        assert_eq!(delta.set.len(), 2);
        assert_eq!(before.with_delta(&delta), after);
    }
}
