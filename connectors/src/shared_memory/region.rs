//! One registered region: a POSIX shared memory object opened by its key, and the byte range of
//! it the client registered.
//!
//! The object is read and written through its file descriptor (`pread`, `pwrite`), never mapped.
//! A client keeps the object and may shrink it after registering it: a mapping would then fault
//! (SIGBUS) in the server on the next read, where a read through the descriptor comes up short and
//! is refused naming the region. The size is checked again before every write, so a write never
//! grows a shrunk object either.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::SharedMemoryError;
use crate::echo::quote;

/// Longest key: POSIX's `NAME_MAX` for the name after the leading `/`.
const KEY_MAX_BYTES: usize = 255;

/// Where `shm_open` keeps its objects on Linux: a key `/name` is the file `/dev/shm/name`.
pub(super) const SHM_DIR: &str = "/dev/shm";

/// A region as registered.
#[derive(Debug)]
pub(super) struct Region {
    pub key: String,
    pub offset: u64,
    pub byte_size: u64,
    file: File,
}

/// The file of a key, when the key is a POSIX shared memory name: a leading `/`, then 1 to 255
/// bytes with no other `/` and no NUL, not `.` or `..`.
fn key_path(dir: &Path, key: &str) -> Result<PathBuf, SharedMemoryError> {
    let bad = |why: &str| SharedMemoryError::Key {
        key: quote(key).into_owned(),
        why: why.to_string(),
    };
    let name = key
        .strip_prefix('/')
        .ok_or_else(|| bad("a shared memory key starts with `/`"))?;
    if name.is_empty() || name.len() > KEY_MAX_BYTES {
        return Err(bad(
            "a shared memory key names 1 to 255 bytes after its `/`",
        ));
    }
    if name.contains(['/', '\0']) || name == "." || name == ".." {
        return Err(bad(
            "a shared memory key has no other `/`, no NUL and is not `.` or `..`",
        ));
    }
    Ok(dir.join(name))
}

impl Region {
    /// Opens `key` under `dir` for reading and writing (not following a symbolic link) and checks
    /// that `offset + byte_size` lies within the object.
    pub(super) fn open(
        dir: &Path,
        key: &str,
        offset: u64,
        byte_size: u64,
    ) -> Result<Region, SharedMemoryError> {
        let path = key_path(dir, key)?;
        let shown = || quote(key).into_owned();
        // Not following a link keeps a key on objects under the directory; O_NONBLOCK keeps a
        // FIFO planted there from holding the open (it is refused below, as not a file).
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| SharedMemoryError::Open {
                key: shown(),
                why: match e.kind() {
                    io::ErrorKind::NotFound => "no such shared memory object".into(),
                    io::ErrorKind::PermissionDenied => "permission denied".into(),
                    _ if e.raw_os_error() == Some(libc::ELOOP) => {
                        "a symbolic link, not a shared memory object".into()
                    }
                    _ => e.to_string(),
                },
            })?;
        let meta = file.metadata().map_err(|e| SharedMemoryError::Open {
            key: shown(),
            why: e.to_string(),
        })?;
        if !meta.is_file() {
            return Err(SharedMemoryError::Open {
                key: shown(),
                why: "not a shared memory object".into(),
            });
        }
        let end = offset.checked_add(byte_size);
        if end.is_none_or(|end| end > meta.len()) {
            return Err(SharedMemoryError::Range {
                field: "offset".into(),
                why: format!(
                    "offset {offset} and byte_size {byte_size} pass the end of the object's {} bytes",
                    meta.len()
                ),
            });
        }
        Ok(Region {
            key: key.to_string(),
            offset,
            byte_size,
            file,
        })
    }

    /// Where `len` bytes at `offset` into the region lie in the object, when they lie within the
    /// region.
    fn span(&self, offset: u64, len: u64, name: &str) -> Result<u64, SharedMemoryError> {
        let end = offset.checked_add(len);
        if end.is_none_or(|end| end > self.byte_size) {
            return Err(SharedMemoryError::Range {
                field: "shared_memory_offset".into(),
                why: format!(
                    "offset {offset} and {len} bytes pass the end of region `{}`'s {} bytes",
                    quote(name),
                    self.byte_size
                ),
            });
        }
        // offset + len ≤ byte_size and self.offset + byte_size fit when registered.
        Ok(self.offset + offset)
    }

    /// `len` bytes at `offset` into the region (the caller bounds `len`).
    pub(super) fn read(
        &self,
        offset: u64,
        len: usize,
        name: &str,
    ) -> Result<Vec<u8>, SharedMemoryError> {
        let at = self.span(offset, len as u64, name)?;
        let mut bytes = vec![0u8; len];
        self.file
            .read_exact_at(&mut bytes, at)
            .map_err(|e| self.failed(name, e))?;
        Ok(bytes)
    }

    /// Writes `bytes` at `offset` into the region, if the object still holds that range.
    pub(super) fn write(
        &self,
        offset: u64,
        bytes: &[u8],
        name: &str,
    ) -> Result<(), SharedMemoryError> {
        let at = self.span(offset, bytes.len() as u64, name)?;
        let len = self
            .file
            .metadata()
            .map_err(|e| self.failed(name, e))?
            .len();
        if at + bytes.len() as u64 > len {
            return Err(self.failed(name, io::ErrorKind::UnexpectedEof.into()));
        }
        self.file
            .write_all_at(bytes, at)
            .map_err(|e| self.failed(name, e))
    }

    fn failed(&self, name: &str, e: io::Error) -> SharedMemoryError {
        SharedMemoryError::Io {
            region: quote(name).into_owned(),
            why: if e.kind() == io::ErrorKind::UnexpectedEof {
                "the shared memory object no longer holds the registered range".into()
            } else {
                e.to_string()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_posix_shared_memory_names() {
        let dir = Path::new(SHM_DIR);
        assert_eq!(key_path(dir, "/in0").unwrap(), dir.join("in0"));
        for bad in [
            "in0",
            "/",
            "/a/b",
            "/..",
            "/.",
            "/a\0b",
            &format!("/{}", "k".repeat(256)),
        ] {
            assert!(
                matches!(key_path(dir, bad), Err(SharedMemoryError::Key { .. })),
                "{bad:?}"
            );
        }
        assert!(key_path(dir, &format!("/{}", "k".repeat(255))).is_ok());
    }
}
