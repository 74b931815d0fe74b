//! The wire form of a sequence table and of a batch's delta: what a primary ships its backup.
//!
//! Little-endian throughout. An entry is `[u16 id length][id, UTF-8][u64 last used, ms][f32 × the
//! state's elements]`, the elements of every state tensor of one sequence in `state:` order; a
//! table is `[u32 count][entries, in id order]`; a delta is `[u32 count][u16 length, id]…` of the
//! sequences removed, then a table of those set. The encoding of a table is canonical (the id
//! order is the table's), so its hash is a version's identity in the journal.
//!
//! Decoding reads bytes from the network: every count is checked against `max_sequences` and
//! against the bytes left before anything is allocated, ids against
//! [`MAX_SEQUENCE_ID_BYTES`], and the payload must be consumed exactly.

use std::sync::Arc;

use weir_hams::sequences::MAX_SEQUENCE_ID_BYTES;

use super::table::{Entry, SequenceDelta, SequenceTable};

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sequence state payload: {0}")]
pub struct CodecError(String);

fn bad(message: impl Into<String>) -> CodecError {
    CodecError(message.into())
}

fn put_entry(out: &mut Vec<u8>, id: &str, e: &Entry) {
    // Ids are capped at MAX_SEQUENCE_ID_BYTES (< u16::MAX) where they enter.
    out.extend_from_slice(&(id.len() as u16).to_le_bytes());
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&e.last_used_ms.to_le_bytes());
    for tensor in &e.state {
        for v in tensor {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

fn put_entries<'a>(
    out: &mut Vec<u8>,
    count: usize,
    entries: impl Iterator<Item = (&'a String, &'a Arc<Entry>)>,
) {
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for (id, e) in entries {
        put_entry(out, id, e);
    }
}

/// A table's bytes.
pub fn encode_table(table: &SequenceTable) -> Vec<u8> {
    let mut out = Vec::new();
    put_entries(&mut out, table.len(), table.iter());
    out
}

/// A delta's bytes.
pub fn encode_delta(delta: &SequenceDelta) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(delta.removed.len() as u32).to_le_bytes());
    for id in &delta.removed {
        out.extend_from_slice(&(id.len() as u16).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    put_entries(
        &mut out,
        delta.set.len(),
        delta.set.iter().map(|(id, e)| (id, e)),
    );
    out
}

/// Reads entries off a payload: `sizes` are the state tensors' one-sequence element counts.
struct Reader<'a> {
    bytes: &'a [u8],
    sizes: &'a [usize],
    max_sequences: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if n > self.bytes.len() {
            return Err(bad(format!("{n} bytes needed, {} left", self.bytes.len())));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u16(&mut self) -> Result<u16, CodecError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, CodecError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, CodecError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A count of items of at least `min_bytes` each, checked against the bound and the bytes left.
    fn count(&mut self, min_bytes: usize, what: &str) -> Result<usize, CodecError> {
        let n = self.u32()? as usize;
        if n > self.max_sequences {
            return Err(bad(format!(
                "{n} {what}, more than the node's {} sequences",
                self.max_sequences
            )));
        }
        if n.checked_mul(min_bytes)
            .is_none_or(|need| need > self.bytes.len())
        {
            return Err(bad(format!(
                "{n} {what} do not fit the {} bytes left",
                self.bytes.len()
            )));
        }
        Ok(n)
    }

    fn id(&mut self) -> Result<String, CodecError> {
        let len = self.u16()? as usize;
        if len == 0 || len > MAX_SEQUENCE_ID_BYTES {
            return Err(bad(format!("a sequence id of {len} bytes")));
        }
        let raw = self.take(len)?;
        String::from_utf8(raw.to_vec()).map_err(|_| bad("a sequence id that is not UTF-8"))
    }

    fn state_bytes(&self) -> Result<usize, CodecError> {
        self.sizes
            .iter()
            .try_fold(0usize, |t, n| t.checked_add(n.checked_mul(4)?))
            .ok_or_else(|| bad("the state's size overflows"))
    }

    fn entries(&mut self) -> Result<Vec<(String, Arc<Entry>)>, CodecError> {
        let min_entry = self
            .state_bytes()?
            .checked_add(2 + 1 + 8)
            .ok_or_else(|| bad("the state's size overflows"))?;
        let n = self.count(min_entry, "entries")?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let id = self.id()?;
            let last_used_ms = self.u64()?;
            let mut state = Vec::with_capacity(self.sizes.len());
            for &size in self.sizes {
                let raw = self.take(size * 4)?;
                state.push(
                    raw.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                );
            }
            out.push((
                id,
                Arc::new(Entry {
                    state,
                    last_used_ms,
                }),
            ));
        }
        Ok(out)
    }

    fn finish(&self) -> Result<(), CodecError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(bad(format!("{} bytes left over", self.bytes.len())))
        }
    }
}

/// Reads a table of sequences whose state tensors hold `sizes` elements each, at most
/// `max_sequences` of them.
///
/// # Errors
/// When the payload is not such a table.
pub fn decode_table(
    bytes: &[u8],
    sizes: &[usize],
    max_sequences: usize,
) -> Result<SequenceTable, CodecError> {
    let mut r = Reader {
        bytes,
        sizes,
        max_sequences,
    };
    let mut table = SequenceTable::default();
    for (id, e) in r.entries()? {
        if table.get(&id).is_some() {
            return Err(bad(format!("sequence `{id}` twice")));
        }
        table.insert(id, e);
    }
    r.finish()?;
    Ok(table)
}

/// Reads a delta (see [`decode_table`] for the arguments).
///
/// # Errors
/// When the payload is not such a delta.
pub fn decode_delta(
    bytes: &[u8],
    sizes: &[usize],
    max_sequences: usize,
) -> Result<SequenceDelta, CodecError> {
    let mut r = Reader {
        bytes,
        sizes,
        max_sequences,
    };
    let removed_count = r.count(3, "removed ids")?;
    let mut removed = Vec::with_capacity(removed_count);
    for _ in 0..removed_count {
        removed.push(r.id()?);
    }
    let set = r.entries()?;
    r.finish()?;
    Ok(SequenceDelta { removed, set })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: f32, at: u64) -> Arc<Entry> {
        Arc::new(Entry {
            state: vec![vec![v, v + 1.0], vec![v * 2.0]],
            last_used_ms: at,
        })
    }

    #[test]
    fn tables_and_deltas_round_trip() {
        let mut t = SequenceTable::default();
        t.insert("b".into(), entry(1.0, 7));
        t.insert("a".into(), entry(-3.5, 9));
        let bytes = encode_table(&t);
        assert_eq!(decode_table(&bytes, &[2, 1], 4), Ok(t));
        let d = SequenceDelta {
            removed: vec!["x".into(), "yy".into()],
            set: vec![("z".into(), entry(0.5, 1))],
        };
        assert_eq!(decode_delta(&encode_delta(&d), &[2, 1], 4), Ok(d));
    }

    #[test]
    fn hostile_payloads_are_refused_before_allocating() {
        let mut t = SequenceTable::default();
        t.insert("a".into(), entry(1.0, 7));
        t.insert("b".into(), entry(1.0, 7));
        let bytes = encode_table(&t);
        assert!(decode_table(&bytes, &[2, 1], 1).is_err(), "over the bound");
        assert!(decode_table(&bytes[..bytes.len() - 1], &[2, 1], 4).is_err());
        let mut long = bytes.clone();
        long.push(0);
        assert!(decode_table(&long, &[2, 1], 4).is_err(), "trailing bytes");
        let huge = u32::MAX.to_le_bytes();
        assert!(decode_table(&huge, &[2, 1], usize::MAX).is_err());
        assert!(decode_table(&bytes, &[usize::MAX, 1], 4).is_err());
        let mut dup = SequenceTable::default();
        dup.insert("a".into(), entry(1.0, 7));
        let one = encode_table(&dup);
        let mut twice = 2u32.to_le_bytes().to_vec();
        twice.extend_from_slice(&one[4..]);
        twice.extend_from_slice(&one[4..]);
        assert!(decode_table(&twice, &[2, 1], 4).is_err(), "an id twice");
        let mut bad_id = 1u32.to_le_bytes().to_vec();
        bad_id.extend_from_slice(&0u16.to_le_bytes());
        assert!(decode_delta(&bad_id, &[2, 1], 4).is_err(), "an empty id");
    }
}
