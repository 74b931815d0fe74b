//! `--model-control-mode poll`: the repositories read again every interval. A model is known by
//! a fingerprint of its folder (every file's path, size and modification time, to a bounded
//! depth and count); one whose fingerprint changed is reloaded, a new one loaded, one whose
//! folder is gone unloaded — the same loads and unloads the API makes.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::UNIX_EPOCH;

use weir_triton::LoadOptions;

use super::{read, Repositories};

/// Files looked at per model folder; a folder with more is fingerprinted by its first ones.
const MAX_FILES: usize = 10_000;
/// Folder depth looked into (model/version/file and one more).
const MAX_DEPTH: usize = 4;

/// A fingerprint of the files under `dir`, or `None` when it cannot be read.
pub(super) fn fingerprint(dir: &Path) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    let mut seen = 0usize;
    walk(dir, Path::new(""), 0, &mut hasher, &mut seen).ok()?;
    Some(hasher.finish())
}

fn walk(
    dir: &Path,
    rel: &Path,
    depth: usize,
    hasher: &mut DefaultHasher,
    seen: &mut usize,
) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in names {
        if *seen >= MAX_FILES {
            return Ok(());
        }
        *seen += 1;
        let path = dir.join(&name);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let rel = rel.join(&name);
        rel.hash(hasher);
        if meta.is_dir() {
            if depth + 1 < MAX_DEPTH {
                walk(&path, &rel, depth + 1, hasher, seen)?;
            }
        } else {
            meta.len().hash(hasher);
            meta.modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .hash(hasher);
        }
    }
    Ok(())
}

/// The poller's thread; dropping it stops the thread.
pub(in crate::cli::serve) struct Poller {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Poller {
    /// Reads `repositories` again every poll interval until dropped.
    pub(in crate::cli::serve) fn start(repositories: Arc<Repositories>) -> std::io::Result<Poller> {
        let (stop, stopped) = channel::<()>();
        let interval = repositories.settings.poll_interval;
        let thread = std::thread::Builder::new()
            .name("weir-repository-poll".into())
            .spawn(move || loop {
                match stopped.recv_timeout(interval) {
                    Err(RecvTimeoutError::Timeout) => once(&repositories),
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            })?;
        Ok(Poller {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One reading of the repositories: what changed is loaded, reloaded or unloaded.
fn once(repositories: &Repositories) {
    let _op = repositories.ops();
    let mut present = std::collections::BTreeSet::new();
    for root in &repositories.settings.roots {
        let limits = weir_triton::repository::Limits::default();
        let Ok(scan) = weir_triton::repository::scan(root, &limits) else {
            continue;
        };
        let mut changed = Vec::new();
        for model in scan.models {
            if !present.insert(model.name.clone())
                || repositories.settings.reserved.contains(&model.name)
            {
                continue;
            }
            let now = fingerprint(&root.join(&model.name));
            let before = repositories
                .entries()
                .get(&model.name)
                .and_then(|e| e.fingerprint);
            if now != before {
                changed.push(model.name);
            }
        }
        if changed.is_empty() {
            continue;
        }
        let Ok(repo) = read(root, &LoadOptions::default()) else {
            continue;
        };
        for name in changed {
            tracing::info!(model = %name, "Its files changed: loading it again.");
            if let Err(e) = repositories.start_model(&repo, &name) {
                eprintln!("{}: not serving `{name}`: {e}", root.display());
            }
        }
    }
    let gone: Vec<String> = repositories
        .entries()
        .iter()
        .filter(|(name, e)| !present.contains(*name) && !e.graphs.is_empty())
        .map(|(name, _)| name.clone())
        .collect();
    for name in gone {
        tracing::info!(model = %name, "Its folder is gone: unloading it.");
        repositories.stop_model(&name);
    }
}
