//! Names and places in a model repository: which names are allowed, where a model's files go,
//! how a file is written so a reader never sees half of it, and how a file's digest is taken.
//!
//! Every name that becomes a path component (model, task, hardware type, variant) is checked
//! here, once, against one rule: 1–64 characters of ASCII letters, digits, `_`, `-` and `.`, not
//! starting with `.` — so no separator, no `..`, nothing hidden, nothing a shell or a URL
//! mangles. A relative file name read back from metadata is checked component by component the
//! same way before it is joined to the root.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::RepoError;

/// The longest model, task, hardware or variant name.
pub const MAX_NAME_LEN: usize = 64;
/// The metadata file in each model's folder.
pub const METADATA_FILE: &str = "model.json";
/// The version folder that holds a model's ONNX files (one version per registered model).
pub const VERSION_DIR: &str = "1";
/// The registered ONNX file's name inside the version folder.
pub const REGISTERED_FILE: &str = "model.onnx";

/// Why a name cannot be used, or `None` when it can.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return Some("is longer than 64 characters");
    }
    if name.starts_with('.') {
        return Some("starts with `.`");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Some("holds a character other than ASCII letters, digits, `_`, `-` and `.`");
    }
    None
}

/// `Ok` when `name` may be a model, task, hardware or variant name; `what` names the field in
/// the error (`model`, `--task`).
pub fn check_name(what: &str, name: &str) -> Result<(), RepoError> {
    match name_problem(name) {
        None => Ok(()),
        Some(why) => Err(RepoError::Name {
            what: what.to_string(),
            name: name.chars().take(80).collect(),
            why,
        }),
    }
}

/// A relative path read from metadata (`digits_mlp/1/model.onnx`), split into checked
/// components; `None` when it is absolute, empty, or any component is not a valid name.
pub fn relative_components(file: &str) -> Option<Vec<&str>> {
    if file.is_empty() || file.len() > 4 * MAX_NAME_LEN {
        return None;
    }
    let parts: Vec<&str> = file.split('/').collect();
    parts
        .iter()
        .all(|p| name_problem(p).is_none())
        .then_some(parts)
}

/// The repository-relative name of file `file` in `model`'s version folder.
pub fn model_file(model: &str, file: &str) -> String {
    format!("{model}/{VERSION_DIR}/{file}")
}

/// Writes `bytes` to `path` through a temporary file in the same folder, synced and then renamed
/// over `path`: a reader sees the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RepoError> {
    let io = |e: std::io::Error| RepoError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let dir = path.parent().ok_or_else(|| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "no parent folder",
        ))
    })?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut f = File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io(e)
    })
}

/// SHA-256 of the file at `path`, lowercase hex, read in bounded chunks.
pub fn sha256_file(path: &Path) -> Result<String, RepoError> {
    let mut f = File::open(path).map_err(|e| RepoError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(|e| RepoError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `s` looks like a SHA-256 digest: 64 lowercase hex digits.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_safe_components() {
        for ok in ["digits_mlp", "digits", "a.fp32-all-t1-b8-local", "x-1"] {
            assert_eq!(name_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "é",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
        assert!(check_name("model", "../x")
            .unwrap_err()
            .to_string()
            .contains("model"));
    }

    #[test]
    fn relative_files_stay_inside() {
        assert_eq!(
            relative_components("m/1/model.onnx"),
            Some(vec!["m", "1", "model.onnx"])
        );
        for bad in ["", "/etc/passwd", "m/../x", "m//x", "../x", "m/1/"] {
            assert_eq!(relative_components(bad), None, "{bad}");
        }
    }

    #[test]
    fn atomic_write_replaces_and_digests_match() {
        let dir = std::env::temp_dir().join(format!("weir-layout-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(sha256_file(&p).unwrap(), sha256_bytes(b"two"));
        assert!(is_sha256(&sha256_bytes(b"two")));
        assert!(!is_sha256("ABC"));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "no temp file left");
        fs::remove_dir_all(&dir).unwrap();
    }
}
