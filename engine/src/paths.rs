//! Files a graph names: the one place they are opened. A graph file is as hostile as a request, so
//! every path it names (models, parity models, profiles, stream inputs and outputs) goes through
//! these functions, which resolve symlinks, refuse anything but a regular file (`/dev/zero`, FIFOs
//! and devices would read forever or block), keep the path under an optional root, and read at
//! most a size cap (`Read::take(cap + 1)`, so a file that is larger, or grows while read, is an
//! error rather than an unbounded read).
//!
//! Outputs are opened with an explicit [`OutputMode`]: `create` writes only a new file (the open
//! is `O_EXCL`, so an existing file is never truncated by surprise), `append` and `overwrite` need
//! the user to say so. An output is never a symlink, and never a FIFO or device (stdout is `-`).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest model file read (a generous cap: the biggest zoo models are a few hundred MB).
pub const MAX_MODEL_BYTES: u64 = 4 << 30;
/// Largest YAML, JSON or profile file read.
pub const MAX_TEXT_BYTES: u64 = 64 << 20;

/// How a stream output treats a file that already exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Write a new file; an existing one is an error.
    #[default]
    Create,
    /// Add to the end of the file, creating it if needed.
    Append,
    /// Empty the file first, creating it if needed.
    Overwrite,
}

/// Where a graph's files may be and how large they may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRules {
    /// Every resolved path must be under this folder (canonical), if set.
    pub root: Option<PathBuf>,
    /// Largest model file, in bytes.
    pub max_model_bytes: u64,
}

impl Default for FileRules {
    fn default() -> Self {
        FileRules {
            root: None,
            max_model_bytes: MAX_MODEL_BYTES,
        }
    }
}

impl FileRules {
    /// Rules confining paths under `root`.
    ///
    /// # Errors
    /// When `root` cannot be resolved.
    pub fn under(root: &Path) -> Result<Self, FileError> {
        let root = std::fs::canonicalize(root).map_err(|e| FileError::io(root, e))?;
        Ok(FileRules {
            root: Some(root),
            ..FileRules::default()
        })
    }

    fn confine(&self, shown: &Path, resolved: &Path) -> Result<(), FileError> {
        match &self.root {
            Some(root) if !resolved.starts_with(root) => Err(FileError::OutsideRoot {
                path: shown.display().to_string(),
                root: root.display().to_string(),
            }),
            _ => Ok(()),
        }
    }
}

/// Why a file a graph names cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file does not exist.
    #[error("{path} does not exist")]
    Missing {
        /// The path as written.
        path: String,
    },
    /// Opening, reading or resolving failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path as written.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A device, FIFO, socket or folder.
    #[error("{path} is not a regular file")]
    NotRegular {
        /// The path as written.
        path: String,
    },
    /// An output that is a symbolic link.
    #[error("{path} is a symbolic link; name the file it points to")]
    Symlink {
        /// The path as written.
        path: String,
    },
    /// Over the size cap.
    #[error("{path} is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The path as written.
        path: String,
        /// The cap.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotText {
        /// The path as written.
        path: String,
    },
    /// Resolves outside the path root.
    #[error("{path} is outside the path root {root}")]
    OutsideRoot {
        /// The path as written.
        path: String,
        /// The root.
        root: String,
    },
    /// An output in mode `create` that already exists.
    #[error("{path} already exists; set `output_mode: overwrite` (or `append`) to write to it")]
    Exists {
        /// The path as written.
        path: String,
    },
}

impl FileError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        let path = path.display().to_string();
        if source.kind() == std::io::ErrorKind::NotFound {
            FileError::Missing { path }
        } else {
            FileError::Io { path, source }
        }
    }
}

/// Resolves `path` (symlinks followed) to an existing regular file under the rules' root.
///
/// # Errors
/// When it is missing, not a regular file, or outside the root.
pub fn resolve_input(path: &Path, rules: &FileRules) -> Result<PathBuf, FileError> {
    let resolved = std::fs::canonicalize(path).map_err(|e| FileError::io(path, e))?;
    rules.confine(path, &resolved)?;
    let meta = std::fs::metadata(&resolved).map_err(|e| FileError::io(path, e))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.display().to_string(),
        });
    }
    Ok(resolved)
}

/// Opens `path` for reading after [`resolve_input`], checking the opened file too.
///
/// # Errors
/// As [`resolve_input`], or when it cannot be opened.
pub fn open_input(path: &Path, rules: &FileRules) -> Result<File, FileError> {
    let resolved = resolve_input(path, rules)?;
    let file = File::open(&resolved).map_err(|e| FileError::io(path, e))?;
    let meta = file.metadata().map_err(|e| FileError::io(path, e))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.display().to_string(),
        });
    }
    Ok(file)
}

/// Reads the whole regular file at `path`, at most `limit` bytes.
///
/// # Errors
/// As [`open_input`], or [`FileError::TooLarge`] when it holds more than `limit` bytes.
pub fn read_capped(path: &Path, limit: u64, rules: &FileRules) -> Result<Vec<u8>, FileError> {
    let file = open_input(path, rules)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let too_large = || FileError::TooLarge {
        path: path.display().to_string(),
        limit,
    };
    if size > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(path, e))?;
    if u64::try_from(bytes.len()).map_or(true, |n| n > limit) {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Reads the regular text file at `path`, at most [`MAX_TEXT_BYTES`].
///
/// # Errors
/// As [`read_capped`], or [`FileError::NotText`].
pub fn read_text(path: &Path, rules: &FileRules) -> Result<String, FileError> {
    String::from_utf8(read_capped(path, MAX_TEXT_BYTES, rules)?).map_err(|_| FileError::NotText {
        path: path.display().to_string(),
    })
}

/// Checks that `path` may be written in `mode`: not a symlink, not a FIFO or device, not an
/// existing file under `create`, and in a folder under the rules' root.
///
/// # Errors
/// The first rule broken.
pub fn check_output(path: &Path, mode: OutputMode, rules: &FileRules) -> Result<(), FileError> {
    let shown = || path.display().to_string();
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => return Err(FileError::Symlink { path: shown() }),
        Ok(m) if !m.is_file() => return Err(FileError::NotRegular { path: shown() }),
        Ok(_) if mode == OutputMode::Create => return Err(FileError::Exists { path: shown() }),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(FileError::io(path, e)),
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let resolved = std::fs::canonicalize(folder).map_err(|e| FileError::io(folder, e))?;
    rules.confine(path, &resolved.join(path.file_name().unwrap_or_default()))
}

/// Opens `path` for writing in `mode` after [`check_output`]. The open itself refuses a symlink
/// (`O_NOFOLLOW`) and, under `create`, an existing file (`O_EXCL`); a file is emptied under
/// `overwrite` only once the opened handle is known to be a regular file.
///
/// # Errors
/// As [`check_output`], or when it cannot be opened.
pub fn open_output(path: &Path, mode: OutputMode, rules: &FileRules) -> Result<File, FileError> {
    check_output(path, mode, rules)?;
    let mut options = OpenOptions::new();
    options
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    match mode {
        OutputMode::Create => options.create_new(true),
        OutputMode::Append => options.append(true).create(true),
        OutputMode::Overwrite => options.create(true),
    };
    let file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => FileError::Exists {
            path: path.display().to_string(),
        },
        _ => FileError::io(path, e),
    })?;
    let meta = file.metadata().map_err(|e| FileError::io(path, e))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular {
            path: path.display().to_string(),
        });
    }
    if mode == OutputMode::Overwrite {
        file.set_len(0).map_err(|e| FileError::io(path, e))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weir-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn devices_are_not_regular_files() {
        let e = read_capped(Path::new("/dev/zero"), 10, &FileRules::default()).unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
        assert!(e.to_string().contains("/dev/zero is not a regular file"));
    }

    #[test]
    fn a_file_over_the_cap_is_an_error_and_one_at_it_is_read() {
        let dir = temp("cap");
        let f = dir.join("f");
        std::fs::write(&f, [7u8; 100]).unwrap();
        let rules = FileRules::default();
        assert_eq!(read_capped(&f, 100, &rules).unwrap().len(), 100);
        let e = read_capped(&f, 99, &rules).unwrap_err();
        assert!(matches!(e, FileError::TooLarge { limit: 99, .. }), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_symlink_out_of_the_root_is_refused() {
        let dir = temp("root");
        let inside = dir.join("inside");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(dir.join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(dir.join("secret"), inside.join("link")).unwrap();
        let rules = FileRules::under(&inside).unwrap();
        let e = read_text(&inside.join("link"), &rules).unwrap_err();
        assert!(matches!(e, FileError::OutsideRoot { .. }), "{e}");
        let e = read_text(&inside.join("../secret"), &rules).unwrap_err();
        assert!(matches!(e, FileError::OutsideRoot { .. }), "{e}");
        let e = check_output(&inside.join("../out"), OutputMode::Create, &rules).unwrap_err();
        assert!(matches!(e, FileError::OutsideRoot { .. }), "{e}");
        assert!(check_output(&inside.join("out"), OutputMode::Create, &rules).is_ok());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn outputs_truncate_only_when_told_and_never_through_a_symlink() {
        let dir = temp("out");
        let f = dir.join("f");
        std::fs::write(&f, "keep").unwrap();
        let rules = FileRules::default();
        let e = open_output(&f, OutputMode::Create, &rules).unwrap_err();
        assert!(e.to_string().contains("output_mode"), "{e}");
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep");
        std::os::unix::fs::symlink(&f, dir.join("link")).unwrap();
        for mode in [
            OutputMode::Create,
            OutputMode::Append,
            OutputMode::Overwrite,
        ] {
            let e = open_output(&dir.join("link"), mode, &rules).unwrap_err();
            assert!(matches!(e, FileError::Symlink { .. }), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep");
        drop(open_output(&f, OutputMode::Overwrite, &rules).unwrap());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "");
        let e = check_output(Path::new("/dev/null"), OutputMode::Append, &rules).unwrap_err();
        assert!(matches!(e, FileError::NotRegular { .. }), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
