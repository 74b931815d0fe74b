//! The repository on disk: `<root>/<model>/config.pbtxt` (optional) and numbered version folders
//! `<root>/<model>/<n>/`, read as hostile input.
//!
//! Every folder under the root is a model, and one bad model never stops the others: the scan
//! returns one result per model. What it refuses is refused per model (or per version): a name
//! that cannot name a model (not UTF-8, `.`/`..`, control characters, longer than
//! [`Limits::max_name_bytes`]), a symbolic link that resolves outside the root, a folder with
//! more entries than [`Limits::max_entries`]. The configuration's size is checked before it is
//! read ([`crate::load()`] reads it with `weir_engine::paths::read_capped`).
//!
//! Version folders follow Triton (`model_lifecycle.cc`, `VersionsToLoad`): `warmup`,
//! `initial_state` and `configs` are not versions and are skipped quietly; a name with a leading
//! zero, or one that is not a decimal number, is ignored with a warning; entries that are files
//! are not version folders. weir is stricter than Triton's `std::stoll` in one way: a name must
//! be digits only (`3abc` is ignored, where Triton reads 3), so a folder's version is never a
//! guess. Hidden folders at the root (`.git`) are not models and are skipped with a warning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weir_engine::paths::FileError;

use crate::error::{LoadError, ModelError, RepositoryError};

/// Folder names inside a model folder that Triton reserves and never reads as versions.
const RESERVED: [&str; 3] = ["warmup", "initial_state", "configs"];

/// The configuration's file name.
pub const CONFIG_FILE: &str = "config.pbtxt";

/// Bounds on what a scan reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest `config.pbtxt`, in bytes (checked before reading).
    pub max_config_bytes: u64,
    /// Most entries read from the root and from each model folder.
    pub max_entries: usize,
    /// Longest model name, in bytes. Names become URL segments, metric label values and log
    /// fields; 128 bytes holds any name a person types.
    pub max_name_bytes: usize,
    /// Largest ONNX file, in bytes.
    pub max_model_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_config_bytes: 1 << 20,
            max_entries: 4096,
            max_name_bytes: 128,
            max_model_bytes: weir_engine::paths::MAX_MODEL_BYTES,
        }
    }
}

/// One model folder as found.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDir {
    /// The folder (canonical).
    pub dir: PathBuf,
    /// `config.pbtxt`, when the folder has one.
    pub config: Option<PathBuf>,
    /// Each numbered version folder (canonical), or why it cannot be used.
    pub versions: BTreeMap<u64, Result<PathBuf, String>>,
}

/// A scanned model: its folder, or why the folder cannot be a model, and what was skipped.
#[derive(Debug)]
pub struct Scanned {
    /// The folder's name.
    pub name: String,
    /// The folder, or the reason it is refused.
    pub outcome: Result<ModelDir, ModelError>,
    /// Entries skipped with a reason (a non-numeric version folder), to log as warnings.
    pub warnings: Vec<String>,
}

/// The scan of a repository.
#[derive(Debug)]
pub struct Scan {
    /// The root (canonical).
    pub root: PathBuf,
    /// Every model folder, by name.
    pub models: Vec<Scanned>,
    /// Root entries skipped with a reason, to log as warnings.
    pub warnings: Vec<String>,
}

/// Scans the repository at `root`.
///
/// # Errors
/// [`RepositoryError`] when the root cannot be listed or holds more than
/// [`Limits::max_entries`] entries; a bad model folder is an `Err` in its own [`Scanned`].
pub fn scan(root: &Path, limits: &Limits) -> Result<Scan, RepositoryError> {
    let shown = root.display().to_string();
    let root_err = |message: String| RepositoryError::Root {
        root: shown.clone(),
        message,
    };
    let canonical = std::fs::canonicalize(root).map_err(|e| root_err(e.to_string()))?;
    if !canonical.is_dir() {
        return Err(root_err("not a folder".into()));
    }
    let entries = std::fs::read_dir(&canonical).map_err(|e| root_err(e.to_string()))?;
    let mut models = Vec::new();
    let mut warnings = Vec::new();
    for (count, entry) in entries.enumerate() {
        if count >= limits.max_entries {
            return Err(RepositoryError::TooManyEntries {
                root: shown,
                limit: limits.max_entries,
            });
        }
        let entry = entry.map_err(|e| root_err(e.to_string()))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            warnings.push(format!(
                "{}: skipped: a model folder's name must be UTF-8",
                path.display()
            ));
            continue;
        };
        if name.starts_with('.') {
            warnings.push(format!(
                "{}: skipped: hidden folders are not models",
                path.display()
            ));
            continue;
        }
        // Follow a link to see whether it is a folder; files at the root are not models.
        let is_dir = std::fs::metadata(&path)
            .map(|m| m.is_dir())
            .unwrap_or(false);
        let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(false);
        if !is_dir && !is_link {
            continue;
        }
        let mut model_warnings = Vec::new();
        let outcome = check_name(&name, limits)
            .and_then(|()| model_dir(&canonical, &path, limits, &mut model_warnings))
            .map_err(|kind| ModelError::model(&name, kind));
        match outcome {
            Ok(Some(dir)) => models.push(Scanned {
                name,
                outcome: Ok(dir),
                warnings: model_warnings,
            }),
            // A link to a file: not a model folder.
            Ok(None) => {}
            Err(e) => models.push(Scanned {
                name,
                outcome: Err(e),
                warnings: model_warnings,
            }),
        }
    }
    models.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Scan {
        root: canonical,
        models,
        warnings,
    })
}

/// Whether `name` can name a model.
fn check_name(name: &str, limits: &Limits) -> Result<(), LoadError> {
    let reason = if name.is_empty() || name == "." || name == ".." {
        Some(format!("`{name}` is not a name"))
    } else if name.len() > limits.max_name_bytes {
        Some(format!(
            "{} bytes, more than the limit of {}",
            name.len(),
            limits.max_name_bytes
        ))
    } else if name.contains('/') || name.contains('\\') {
        Some("a name holds no path separator".into())
    } else if name.chars().any(char::is_control) {
        Some("a name holds no control characters".into())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(LoadError::Name { reason }),
        None => Ok(()),
    }
}

/// Resolves `path` (symlinks followed) and checks it is under `root`.
fn confined(root: &Path, path: &Path) -> Result<PathBuf, LoadError> {
    let resolved = std::fs::canonicalize(path).map_err(|e| {
        LoadError::File(FileError::Io {
            path: path.display().to_string(),
            source: e,
        })
    })?;
    if !resolved.starts_with(root) {
        return Err(LoadError::File(FileError::OutsideRoot {
            path: path.display().to_string(),
            root: root.display().to_string(),
        }));
    }
    Ok(resolved)
}

/// The model folder at `path`, or `None` when it resolves to a file.
fn model_dir(
    root: &Path,
    path: &Path,
    limits: &Limits,
    warnings: &mut Vec<String>,
) -> Result<Option<ModelDir>, LoadError> {
    let dir = confined(root, path)?;
    if !dir.is_dir() {
        return Ok(None);
    }
    let config_path = dir.join(CONFIG_FILE);
    let config = std::fs::symlink_metadata(&config_path)
        .is_ok()
        .then_some(config_path);
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        LoadError::File(FileError::Io {
            path: dir.display().to_string(),
            source: e,
        })
    })?;
    let mut versions = BTreeMap::new();
    for (count, entry) in entries.enumerate() {
        if count >= limits.max_entries {
            return Err(LoadError::TooManyEntries {
                limit: limits.max_entries,
            });
        }
        let Ok(entry) = entry else { continue };
        let sub = entry.path();
        // Files (config.pbtxt, labels) and links to files or nowhere are not versions; a link
        // to a folder is, and is refused below when it leaves the root.
        if !std::fs::metadata(&sub).map(|m| m.is_dir()).unwrap_or(false) {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            warnings.push(format!(
                "{}: ignored: a version folder's name must be a decimal number",
                sub.display()
            ));
            continue;
        };
        if RESERVED.contains(&name.as_str()) {
            continue;
        }
        let Some(version) = version_number(&name) else {
            let why = if name.len() > 1
                && name.starts_with('0')
                && name.bytes().all(|b| b.is_ascii_digit())
            {
                "its name has a leading zero"
            } else {
                "its name is not a decimal version number"
            };
            warnings.push(format!(
                "{}: ignored as a version folder: {why}",
                sub.display()
            ));
            continue;
        };
        let resolved = confined(root, &sub).map_err(|e| e.to_string());
        versions.insert(version, resolved);
    }
    Ok(Some(ModelDir {
        dir,
        config,
        versions,
    }))
}

/// The version a folder named `name` holds: decimal digits without a leading zero, at most
/// `i64::MAX` (Triton's versions are `int64`).
pub fn version_number(name: &str) -> Option<u64> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.len() > 1 && name.starts_with('0') {
        return None;
    }
    name.parse::<u64>()
        .ok()
        .filter(|&v| i64::try_from(v).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_are_plain_decimals() {
        assert_eq!(version_number("1"), Some(1));
        assert_eq!(version_number("0"), Some(0));
        assert_eq!(version_number("42"), Some(42));
        for bad in [
            "",
            "01",
            "-1",
            "+3",
            "3abc",
            "1.0",
            " 1",
            "99999999999999999999",
        ] {
            assert_eq!(version_number(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_are_bounded_and_plain() {
        let limits = Limits::default();
        assert!(check_name("resnet50_onnx", &limits).is_ok());
        assert!(check_name("model.v2-final", &limits).is_ok());
        for bad in ["", ".", "..", "a\u{7}b"] {
            assert!(check_name(bad, &limits).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(129), &limits).is_err());
    }
}
