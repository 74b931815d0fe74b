//! Reading journals back, as hostile files: each file capped in size before it is read, each line
//! capped in length, and lines that are not events (a process killed mid-write, a stray file)
//! counted and skipped rather than trusted. An operator names files or folders (every `*.jsonl`
//! in a folder); the checker then runs over all of them at once, since the rules span roles.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::Event;

/// The largest journal file read (a journal of a long run is large, but not this large).
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// The longest line read as an event (a batch of many rows is a long line, not this long).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Why journals could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file or folder could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// A file is over [`MAX_FILE_BYTES`].
    #[error("{path}: {bytes} bytes, over the limit of {MAX_FILE_BYTES}")]
    TooLarge {
        /// The path.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
}

/// Events read from journals, and the lines skipped as not events.
#[derive(Debug, Default)]
pub struct Journals {
    /// Every event, file by file, in file order.
    pub events: Vec<Event>,
    /// Files read.
    pub files: usize,
    /// Lines that were not events (torn, too long, or foreign).
    pub skipped: usize,
}

/// Reads the journals at `paths`: files as given, folders as every `*.jsonl` in them (sorted).
///
/// # Errors
/// When a path cannot be read, or a file is over [`MAX_FILE_BYTES`].
pub fn read_paths(paths: &[PathBuf]) -> Result<Journals, ReadError> {
    let mut out = Journals::default();
    for path in paths {
        let io = |source| ReadError::Io {
            path: path.clone(),
            source,
        };
        if path.is_dir() {
            let mut files = Vec::new();
            for entry in std::fs::read_dir(path).map_err(io)? {
                let file = entry.map_err(io)?.path();
                if file.extension().is_some_and(|e| e == "jsonl") {
                    files.push(file);
                }
            }
            files.sort();
            for file in files {
                read_file(&file, &mut out)?;
            }
        } else {
            read_file(path, &mut out)?;
        }
    }
    Ok(out)
}

fn read_file(path: &Path, out: &mut Journals) -> Result<(), ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let bytes = file.metadata().map_err(io)?.len();
    if bytes > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        });
    }
    out.files += 1;
    let mut reader = BufReader::new(file.take(MAX_FILE_BYTES));
    let mut line = Vec::new();
    loop {
        line.clear();
        // At most one byte past the cap is kept: enough to know the line is too long.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(io)?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE_BYTES {
            out.skipped += 1;
            // Skip the rest of the over-long line.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let m = (&mut reader)
                    .take(1 << 20)
                    .read_until(b'\n', &mut rest)
                    .map_err(io)?;
                if m == 0 || rest.last() == Some(&b'\n') {
                    break;
                }
            }
            continue;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Event>(text) {
            Ok(e) => out.events.push(e),
            Err(_) => out.skipped += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_and_files_are_read_and_garbage_is_counted() {
        let dir = std::env::temp_dir().join(format!("weir-journal-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let event = Event::Released {
            request_id: 7,
            passed: vec![],
        };
        let line = serde_json::to_string(&event).unwrap();
        std::fs::write(dir.join("a.jsonl"), format!("{line}\n{{torn\n\n{line}")).unwrap();
        std::fs::write(dir.join("ignored.txt"), "not a journal").unwrap();
        let read = read_paths(std::slice::from_ref(&dir)).unwrap();
        assert_eq!((read.files, read.events.len(), read.skipped), (1, 2, 1));
        let missing = read_paths(&[dir.join("missing.jsonl")]);
        assert!(matches!(missing, Err(ReadError::Io { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
