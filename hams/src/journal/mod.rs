//! The consistency journal and its checker: every role logs, per stateful node, epoch and version,
//! the values it produced, consumed, applied and released (by hash), and [`check`] reads every log
//! and reports what breaks the protocol's guarantees.
//!
//! Every role appends JSON lines to its own file (`WEIR_HAMS_JOURNAL=<dir>`: one file per process
//! and role); [`check`] reads them all and reports every violation of the rules below, each
//! violation message starting with the rule's name as written here:
//! - **exactly once**: no request id released twice;
//! - **no conflicting outputs** (HAMS's global consistency, §I and §IV-F): for every node and
//!   version, every applied (durable) state tuple carries the same row hashes, and every released
//!   reply's value at each stateful node it passed equals the value that node's *durable* version
//!   produced for it;
//! - **apply after dependencies** (HAMS §IV-C and §IV-D): when a backup applied a version, each
//!   of its dependencies was durable at that moment (the backup journals its durable view next to
//!   the apply);
//! - **release rule**: every dependency of a released reply was applied on some backup, by its
//!   own state tuple or within a whole-state transfer: a backup that applied the whole state of
//!   version `S` made at epoch `e` holds every version up to `S` that epoch's primary made, with
//!   the outputs the primary journaled for them (a primary ships its latest version whole again
//!   when its backup acknowledged nothing, and that copy covers the tuples lost before it);
//! - **the shipped state is the state made** (HAMS §IV-B): a backup applied, for a version and
//!   epoch, the very state (by hash) the primary made with that batch — the copy taken while the
//!   next batch computes is never torn;
//! - **at most once**: no backup applied the same version of the same epoch twice.
//!
//! Journals are read back bounded (`read`); `weir hams check JOURNAL…` runs the checker for an
//! operator.
//!
//! It also counts how many batches were answered before their state reached the backup (the
//! latency NSPB saves over stop-and-buffer): all of them under NSPB with a slow state link, none
//! under Remus.

mod read;

pub use read::{read_paths, Journals, ReadError, MAX_FILE_BYTES, MAX_LINE_BYTES};

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::protocol::Dep;
use crate::{Epoch, NodeId, Seq};

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A primary ran a batch (speculative until applied on a backup).
    Produced {
        /// Node.
        node: NodeId,
        /// Primary's epoch.
        epoch: Epoch,
        /// Version made.
        seq: Seq,
        /// Rows.
        request_ids: Vec<u64>,
        /// Row output hashes.
        row_hashes: Vec<u64>,
        /// Non-determinism choice used (the row-order permutation's seed), if perturbed.
        choice: Option<u64>,
        /// Hash of the state the batch made.
        #[serde(default)]
        state_hash: u64,
        /// Per row, the label of its first output (argmax), in `request_ids` order.
        #[serde(default)]
        row_labels: Vec<u32>,
        /// Per row, a hash of its first output rounded to 8 bits.
        #[serde(default)]
        row_coarse: Vec<u64>,
        /// When the primary answered the batch (µs since the Unix epoch).
        #[serde(default)]
        replied_at_us: u64,
    },
    /// A backup (or solo primary) applied a version.
    Applied {
        /// Node.
        node: NodeId,
        /// Epoch.
        epoch: Epoch,
        /// Version.
        seq: Seq,
        /// Its dependencies.
        deps: Vec<Dep>,
        /// The durable version of each dependency's node when it was applied.
        durable_then: Vec<Dep>,
        /// Rows of the batch.
        request_ids: Vec<u64>,
        /// Their output hashes.
        row_hashes: Vec<u64>,
        /// Whether it was a whole-state transfer.
        full: bool,
        /// Hash of the state applied (0 for a solo primary, which applies nothing).
        #[serde(default)]
        state_hash: u64,
        /// The member that applied it.
        #[serde(default)]
        member: String,
        /// When its state tuple reached the member (µs since the Unix epoch; 0 for solo).
        #[serde(default)]
        received_at_us: u64,
    },
    /// The frontend released a reply.
    Released {
        /// Request id.
        request_id: u64,
        /// Per stateful node passed: (node, version, the row's output hash there).
        passed: Vec<(NodeId, Seq, u64)>,
    },
    /// A role changed (promotion, demotion, re-protection).
    Role {
        /// Node.
        node: NodeId,
        /// Member.
        member: String,
        /// Epoch.
        epoch: Epoch,
        /// `primary`, `solo primary` or `backup`.
        role: String,
        /// Applied version at the change.
        applied: Seq,
    },
}

/// Appends events to one journal file (or nowhere).
#[derive(Debug, Default)]
pub struct Journal {
    file: Option<Mutex<std::io::BufWriter<std::fs::File>>>,
}

impl Journal {
    /// A journal writing `<dir>/<name>.jsonl` when `WEIR_HAMS_JOURNAL=<dir>` is set, else nothing.
    pub fn from_env(name: &str) -> Journal {
        match std::env::var_os("WEIR_HAMS_JOURNAL") {
            Some(dir) => Journal::at(&PathBuf::from(dir), name),
            None => Journal::default(),
        }
    }

    /// A journal writing `<dir>/<name>.jsonl` (nothing if the file cannot be created).
    pub fn at(dir: &Path, name: &str) -> Journal {
        let _ = std::fs::create_dir_all(dir);
        let path = dir.join(format!("{name}.jsonl"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok();
        Journal {
            file: file.map(|f| Mutex::new(std::io::BufWriter::new(f))),
        }
    }

    /// Whether events go anywhere.
    pub fn enabled(&self) -> bool {
        self.file.is_some()
    }

    /// Appends one event (flushed at once: a SIGKILL must not lose what was released).
    pub fn record(&self, event: &Event) {
        let Some(f) = &self.file else { return };
        let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
        if let Ok(line) = serde_json::to_string(event) {
            let _ = writeln!(f, "{line}");
            let _ = f.flush();
        }
    }
}

/// Microseconds since the Unix epoch now (journal timestamps; processes on one host share it).
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Reads every `*.jsonl` journal in `dir`; unreadable lines (a process killed mid-write) are
/// skipped.
pub fn read_dir(dir: &Path) -> std::io::Result<Vec<Event>> {
    let mut events = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let text = std::fs::read_to_string(&path)?;
            events.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
        }
    }
    Ok(events)
}

/// What the checker found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    /// Replies released.
    pub released: usize,
    /// Versions applied on backups.
    pub applied: usize,
    /// Batches produced by primaries (all epochs).
    pub produced: usize,
    /// Versions produced more than once (re-executed after a rollback).
    pub reexecuted: usize,
    /// Of those, versions whose re-execution produced different outputs (non-determinism seen).
    pub diverged: usize,
    /// What re-executions did to replies already released (see [`Divergence`]).
    pub divergence: Divergence,
    /// Applied states compared with the state their primary made (for "the shipped state is the
    /// state made").
    pub states_compared: usize,
    /// Batches whose reply and whose state's arrival at the backup were both timed.
    pub timed: usize,
    /// Of those, batches answered before their state reached the backup (no stop-and-buffer).
    pub replied_before_backup_received: usize,
    /// Every violation, for people.
    pub violations: Vec<String>,
}

/// Released rows whose version a node ran again (a checkpoint replay,
/// or a rollback) and how the last run of that version differs from what the client got. Under
/// NSPB released rows come from durable versions, which are never run again, so all stay zero
/// however much the re-executions diverge; under checkpoint-and-replay they count the outputs
/// the recovered system contradicts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Divergence {
    /// Released rows whose version was run again.
    pub rows: usize,
    /// Of those, rows whose output differs at all (bitwise).
    pub differ: usize,
    /// Rows whose output differs after rounding each value to 8 bits.
    pub differ_8bit: usize,
    /// Rows whose label (argmax) flipped.
    pub label_flips: usize,
}

/// One run of a row at a node: epoch, version, exact hash, label, 8-bit hash.
type RowRun = (Epoch, Seq, u64, u32, u64);

/// Counts [`Divergence`]: for each released request and each stateful node it passed, the run
/// that was released (the one whose hash the reply carries; without one, as under checkpoints
/// where replies leave at once, the first run) against the last run of the same version.
fn divergence(events: &[Event]) -> Divergence {
    // Per request id, per node, every run of its row.
    let mut runs: HashMap<u64, BTreeMap<NodeId, Vec<RowRun>>> = HashMap::new();
    for e in events {
        if let Event::Produced {
            node,
            epoch,
            seq,
            request_ids,
            row_hashes,
            row_labels,
            row_coarse,
            ..
        } = e
        {
            for (i, &id) in request_ids.iter().enumerate() {
                let hash = row_hashes.get(i).copied().unwrap_or(0);
                let label = row_labels.get(i).copied().unwrap_or(0);
                let coarse = row_coarse.get(i).copied().unwrap_or(0);
                runs.entry(id)
                    .or_default()
                    .entry(*node)
                    .or_default()
                    .push((*epoch, *seq, hash, label, coarse));
            }
        }
    }
    let mut d = Divergence::default();
    for e in events {
        let Event::Released { request_id, passed } = e else {
            continue;
        };
        let Some(nodes) = runs.get(request_id) else {
            continue;
        };
        for (node, rows) in nodes {
            let released = match passed.iter().find(|(n, _, _)| n == node) {
                // Several runs may have made the same output; the latest of them is the one
                // the reply names.
                Some(&(_, seq, hash)) => rows
                    .iter()
                    .filter(|r| r.1 == seq && r.2 == hash)
                    .max_by_key(|r| r.0),
                None => rows.iter().min_by_key(|r| r.0),
            };
            let Some(&released) = released else { continue };
            let Some(&last) = rows
                .iter()
                .filter(|r| r.1 == released.1)
                .max_by_key(|r| r.0)
            else {
                continue;
            };
            if last.0 == released.0 {
                continue;
            }
            d.rows += 1;
            d.differ += usize::from(last.2 != released.2);
            d.label_flips += usize::from(last.3 != released.3);
            d.differ_8bit += usize::from(last.4 != released.4);
        }
    }
    d
}

/// Checks the journal's events (see the module doc).
pub fn check(events: &[Event]) -> Report {
    let mut r = Report::default();
    let mut durable_rows: HashMap<(NodeId, Seq), HashMap<u64, u64>> = HashMap::new();
    let mut produced: BTreeMap<(NodeId, Seq), Vec<Vec<u64>>> = BTreeMap::new();
    let mut released: HashMap<u64, usize> = HashMap::new();
    let mut made: HashMap<(NodeId, Epoch, Seq), (u64, u64)> = HashMap::new();
    // Each version's rows as its primary made them, per epoch (the last run of it there).
    let mut made_rows: BTreeMap<(NodeId, Epoch, Seq), HashMap<u64, u64>> = BTreeMap::new();
    // Whole-state transfers applied: (node, epoch, version).
    let mut whole: Vec<(NodeId, Epoch, Seq)> = Vec::new();
    for e in events {
        match e {
            Event::Produced {
                node,
                epoch,
                seq,
                state_hash,
                replied_at_us,
                request_ids,
                row_hashes,
                ..
            } => {
                made.insert((*node, *epoch, *seq), (*state_hash, *replied_at_us));
                let rows = request_ids.iter().copied().zip(row_hashes.iter().copied());
                made_rows.insert((*node, *epoch, *seq), rows.collect());
            }
            Event::Applied {
                node,
                epoch,
                seq,
                full: true,
                ..
            } => whole.push((*node, *epoch, *seq)),
            _ => {}
        }
    }
    let mut applied_once: HashMap<(NodeId, Epoch, Seq, String), usize> = HashMap::new();
    for e in events {
        match e {
            Event::Produced {
                node,
                seq,
                row_hashes,
                ..
            } => {
                r.produced += 1;
                produced
                    .entry((*node, *seq))
                    .or_default()
                    .push(row_hashes.clone());
            }
            Event::Applied {
                node,
                seq,
                deps,
                durable_then,
                request_ids,
                row_hashes,
                full,
                epoch,
                state_hash,
                member,
                received_at_us,
            } => {
                if let Some(&(_, replied)) = made.get(&(*node, *epoch, *seq)) {
                    if replied > 0 && *received_at_us > 0 && !*full {
                        r.timed += 1;
                        if replied < *received_at_us {
                            r.replied_before_backup_received += 1;
                        }
                    }
                }
                r.applied += 1;
                let times = applied_once
                    .entry((*node, *epoch, *seq, member.clone()))
                    .or_default();
                *times += 1;
                if *times == 2 {
                    r.violations.push(format!(
                        "at most once: node {node} version {seq} of epoch {epoch} applied twice by {member}"
                    ));
                }
                if *state_hash != 0 && !*full {
                    if let Some(&(m, _)) = made.get(&(*node, *epoch, *seq)) {
                        r.states_compared += 1;
                        if m != *state_hash {
                            r.violations.push(format!("the shipped state is the state made: node {node} version {seq} of epoch {epoch}: the applied state is not the one its primary made"));
                        }
                    }
                }
                for &(n, s) in deps {
                    let then = durable_then
                        .iter()
                        .find(|(m, _)| *m == n)
                        .map_or(0, |d| d.1);
                    if s > 0 && then < s {
                        r.violations.push(format!("apply after dependencies: node {node} applied version {seq} needing node {n} at {s} while only {then} was durable"));
                    }
                }
                if *full {
                    continue;
                }
                let rows: HashMap<u64, u64> = request_ids
                    .iter()
                    .copied()
                    .zip(row_hashes.iter().copied())
                    .collect();
                make_durable(&mut durable_rows, (*node, *seq), rows, &mut r.violations);
            }
            Event::Released { request_id, .. } => {
                r.released += 1;
                *released.entry(*request_id).or_default() += 1;
            }
            Event::Role { .. } => {}
        }
    }
    for (node, epoch, seq) in whole {
        for (&(_, _, v), rows) in made_rows.range((node, epoch, 0)..=(node, epoch, seq)) {
            make_durable(
                &mut durable_rows,
                (node, v),
                rows.clone(),
                &mut r.violations,
            );
        }
    }
    for (id, n) in &released {
        if *n > 1 {
            r.violations
                .push(format!("exactly once: request {id} released {n} times"));
        }
    }
    for e in events {
        let Event::Released { request_id, passed } = e else {
            continue;
        };
        for &(node, seq, hash) in passed {
            match durable_rows.get(&(node, seq)) {
                None => r.violations.push(format!("release rule: request {request_id} released depending on node {node} version {seq}, which no backup applied")),
                Some(rows) => match rows.get(request_id) {
                    Some(&h) if h == hash => {}
                    Some(_) => r.violations.push(format!("no conflicting outputs: request {request_id}'s reply carries node {node} version {seq} output that differs from the durable one")),
                    None => r.violations.push(format!("no conflicting outputs: request {request_id} passed node {node} at version {seq}, but the durable version {seq} has no row for it")),
                },
            }
        }
    }
    for runs in produced.values() {
        if runs.len() > 1 {
            r.reexecuted += 1;
            if runs.iter().any(|h| h != &runs[0]) {
                r.diverged += 1;
            }
        }
    }
    r.divergence = divergence(events);
    r
}

/// Records `rows` as the outputs of version `key` (node, version) made durable, or reports a
/// conflict with the outputs it was made durable with before.
fn make_durable(
    durable_rows: &mut HashMap<(NodeId, Seq), HashMap<u64, u64>>,
    key: (NodeId, Seq),
    rows: HashMap<u64, u64>,
    violations: &mut Vec<String>,
) {
    match durable_rows.entry(key) {
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(rows);
        }
        std::collections::hash_map::Entry::Occupied(e) if *e.get() != rows => {
            let (node, seq) = key;
            violations.push(format!(
                "no conflicting outputs: node {node} version {seq} was made durable twice with different outputs"
            ));
        }
        std::collections::hash_map::Entry::Occupied(_) => {}
    }
}

#[cfg(test)]
mod tests;
