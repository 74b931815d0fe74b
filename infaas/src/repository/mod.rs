//! The model repository: registered models, the variants generated from them, and what
//! profiling and validation measured about each (paper §3.3, §3.5 (a)).
//!
//! On disk it is a folder laid out like Triton's model repository, one folder per registered
//! model:
//!
//! ```text
//! <repository>/
//!   digits_mlp/
//!     model.json            the model's metadata: task, signature, every variant (JSON)
//!     1/                    the version folder
//!       model.onnx          the registered file, as given
//!       fp32-b8.onnx        generated builds: the batch dimension fixed to 8, …
//!       int8.onnx           … the weights quantised to int8, …
//!       int8-b8.onnx        … both
//! ```
//!
//! Variants that differ only in how the session is built (intra-op threads, graph-optimisation
//! level) or where it runs (hardware type) share a file; each variant names its file relative to
//! the root, with the file's SHA-256, so an executor loads only the bytes that were profiled
//! ([`Repository::verify`]). Writes are atomic (a temporary file renamed over the old one), so a
//! reader sees a model before or after a registration, never half of one. Reads treat the folder
//! as hostile: metadata is size-capped and checked field by field ([`ModelEntry::check`]), names
//! are single safe path components ([`layout::check_name`]), and a variant's file is resolved only
//! inside the root.
//!
//! - [`generate`]: the variant grid, names, and the fixed-batch rewrite.
//! - [`layout`]: names, paths, atomic writes, digests.
//! - [`metadata`]: the metadata file and its checks.
//! - [`profile`]: measuring a variant (load, latency by batch, memory, throughput, accuracy).
//! - [`validation`]: the validation-set format and top-1 accuracy.

pub mod generate;
pub mod layout;
pub mod metadata;
pub mod profile;
pub mod validation;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use metadata::{ModelEntry, Signature, TensorSignature};

use crate::variant::Variant;
use layout::{check_name, relative_components, sha256_file, write_atomic, METADATA_FILE};
use metadata::MAX_METADATA_BYTES;

/// The most model folders a repository may hold.
pub const MAX_MODELS: usize = 4096;

/// Why the repository cannot be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// A file or folder could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A metadata file is not valid JSON of the expected shape.
    #[error("{file}: {reason}")]
    Json {
        /// The metadata file.
        file: String,
        /// serde_json's reason, with line and column.
        reason: String,
    },
    /// A metadata file's field holds a value that cannot be used.
    #[error("{file}: field `{field}` {reason}")]
    Field {
        /// The metadata file.
        file: String,
        /// The field's path (`variants[3].file`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A metadata file is larger than [`MAX_METADATA_BYTES`].
    #[error("{file} is larger than {limit} bytes")]
    TooLarge {
        /// The metadata file.
        file: String,
        /// The cap.
        limit: u64,
    },
    /// A name cannot be used as a path component.
    #[error("{what} `{name}` {why}")]
    Name {
        /// What the name is for (`model`, `task`).
        what: String,
        /// The name, shortened.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A variant's file does not hold the bytes its metadata names.
    #[error("{file}: sha256 is {actual}, the metadata of variant `{variant}` says {expected}")]
    Digest {
        /// The variant.
        variant: String,
        /// Its file.
        file: String,
        /// The digest in the metadata.
        expected: String,
        /// The file's digest.
        actual: String,
    },
    /// A variant's file resolves outside the repository.
    #[error("variant `{variant}`: file `{file}` is outside the repository")]
    Outside {
        /// The variant.
        variant: String,
        /// Its file as written.
        file: String,
    },
    /// Two models or the repository disagree (a model already registered, a task's
    /// signature differs, no such model).
    #[error("{0}")]
    Conflict(String),
    /// The repository holds more than [`MAX_MODELS`] model folders.
    #[error("{0} holds more than {MAX_MODELS} model folders")]
    TooManyModels(String),
}

/// A model repository read from disk.
#[derive(Debug, Clone)]
pub struct Repository {
    root: PathBuf,
    models: BTreeMap<String, ModelEntry>,
}

impl Repository {
    /// Reads the repository at `dir`, which must exist. Folders without a metadata file (a
    /// registration in progress) are skipped; any metadata file that fails its checks is an
    /// error naming it and the field.
    ///
    /// # Errors
    /// [`RepoError`] naming the file and field.
    pub fn open(dir: &Path) -> Result<Self, RepoError> {
        let io = |path: &Path, e| RepoError::Io {
            path: path.display().to_string(),
            source: e,
        };
        let root = dir.canonicalize().map_err(|e| io(dir, e))?;
        let mut models = BTreeMap::new();
        let mut folders = 0usize;
        for entry in fs::read_dir(&root).map_err(|e| io(&root, e))? {
            let entry = entry.map_err(|e| io(&root, e))?;
            let Some(folder) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if folder.starts_with('.') || !entry.path().is_dir() {
                continue;
            }
            folders += 1;
            if folders > MAX_MODELS {
                return Err(RepoError::TooManyModels(root.display().to_string()));
            }
            let meta = entry.path().join(METADATA_FILE);
            if !meta.exists() {
                continue;
            }
            let model = read_entry(&meta, &folder)?;
            models.insert(model.name.clone(), model);
        }
        Ok(Self { root, models })
    }

    /// Opens the repository at `dir`, creating the folder first if it does not exist.
    ///
    /// # Errors
    /// As [`Repository::open`], and when the folder cannot be created.
    pub fn open_or_create(dir: &Path) -> Result<Self, RepoError> {
        fs::create_dir_all(dir).map_err(|e| RepoError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        Self::open(dir)
    }

    /// The repository's root folder (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every registered model, by name.
    pub fn models(&self) -> impl Iterator<Item = &ModelEntry> {
        self.models.values()
    }

    /// The model named `name`.
    pub fn model(&self, name: &str) -> Option<&ModelEntry> {
        self.models.get(name)
    }

    /// Every variant of every model.
    pub fn variants(&self) -> impl Iterator<Item = &Variant> {
        self.models.values().flat_map(|m| m.variants.iter())
    }

    /// Every variant serving `task`.
    pub fn variants_of_task<'a>(&'a self, task: &'a str) -> impl Iterator<Item = &'a Variant> {
        self.models
            .values()
            .filter(move |m| m.task == task)
            .flat_map(|m| m.variants.iter())
    }

    /// The variant named `name`.
    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants().find(|v| v.name == name)
    }

    /// The signature every model of `task` shares, if one is registered.
    pub fn task_signature(&self, task: &str) -> Option<&Signature> {
        self.models
            .values()
            .find(|m| m.task == task)
            .map(|m| &m.signature)
    }

    /// The absolute path of `variant`'s file, checked to stay inside the repository (after
    /// following links).
    ///
    /// # Errors
    /// [`RepoError::Outside`] when it does not; [`RepoError::Io`] when it does not exist.
    pub fn file_path(&self, variant: &Variant) -> Result<PathBuf, RepoError> {
        let outside = || RepoError::Outside {
            variant: variant.name.clone(),
            file: variant.file.chars().take(120).collect(),
        };
        let parts = relative_components(&variant.file).ok_or_else(outside)?;
        let joined = parts.iter().fold(self.root.clone(), |p, c| p.join(c));
        let real = joined.canonicalize().map_err(|e| RepoError::Io {
            path: joined.display().to_string(),
            source: e,
        })?;
        if real.starts_with(&self.root) && real.is_file() {
            Ok(real)
        } else {
            Err(outside())
        }
    }

    /// The path of `variant`'s file after checking that its SHA-256 is the one recorded.
    ///
    /// # Errors
    /// [`RepoError::Digest`] when it differs; as [`Repository::file_path`].
    pub fn verify(&self, variant: &Variant) -> Result<PathBuf, RepoError> {
        let path = self.file_path(variant)?;
        let actual = sha256_file(&path)?;
        if actual == variant.sha256 {
            Ok(path)
        } else {
            Err(RepoError::Digest {
                variant: variant.name.clone(),
                file: path.display().to_string(),
                expected: variant.sha256.clone(),
                actual,
            })
        }
    }

    /// The folder of model `name` (checked), which need not exist yet.
    ///
    /// # Errors
    /// [`RepoError::Name`] when `name` is not a valid name.
    pub fn model_dir(&self, name: &str) -> Result<PathBuf, RepoError> {
        check_name("model", name)?;
        Ok(self.root.join(name))
    }

    /// Writes `entry`'s metadata (atomically) and adds it, replacing a model of that name.
    /// Its files must already be in its version folder.
    ///
    /// # Errors
    /// [`RepoError`] when the entry fails its checks, or a model of another task already uses
    /// its task with a different signature, or the file cannot be written.
    pub fn insert(&mut self, entry: ModelEntry) -> Result<(), RepoError> {
        let dir = self.model_dir(&entry.name)?;
        let file = dir.join(METADATA_FILE);
        entry.check(&file.display().to_string(), &entry.name)?;
        self.check_task(&entry.name, &entry.task, &entry.signature)?;
        let json = serde_json::to_vec_pretty(&entry).map_err(|e| RepoError::Json {
            file: file.display().to_string(),
            reason: e.to_string(),
        })?;
        write_atomic(&file, &json)?;
        self.models.insert(entry.name.clone(), entry);
        Ok(())
    }

    /// `Ok` when a model `name` of `task` with `signature` may join the repository: every
    /// other model of the task must have the same signature, the batch dimension aside.
    ///
    /// # Errors
    /// [`RepoError::Conflict`] naming the model it disagrees with and how.
    pub fn check_task(
        &self,
        name: &str,
        task: &str,
        signature: &Signature,
    ) -> Result<(), RepoError> {
        for other in self.models.values() {
            if other.name == name || other.task != task {
                continue;
            }
            if let Some(why) = other.signature.mismatch(signature) {
                return Err(RepoError::Conflict(format!(
                    "model `{name}` cannot serve task `{task}`: its signature differs from model `{}`'s: {why}",
                    other.name
                )));
            }
        }
        Ok(())
    }

    /// Deletes model `name` and its files: the metadata first, so a reader never sees
    /// variants whose files are gone.
    ///
    /// # Errors
    /// [`RepoError::Conflict`] when there is no such model; [`RepoError::Io`].
    pub fn remove(&mut self, name: &str) -> Result<ModelEntry, RepoError> {
        let dir = self.model_dir(name)?;
        let entry = self.models.remove(name).ok_or_else(|| {
            RepoError::Conflict(format!("no model `{name}` in {}", self.root.display()))
        })?;
        let io = |path: &Path, e| RepoError::Io {
            path: path.display().to_string(),
            source: e,
        };
        let meta = dir.join(METADATA_FILE);
        fs::remove_file(&meta).map_err(|e| io(&meta, e))?;
        fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
        Ok(entry)
    }
}

/// Reads and checks one metadata file.
fn read_entry(path: &Path, folder: &str) -> Result<ModelEntry, RepoError> {
    let file = path.display().to_string();
    let f = fs::File::open(path).map_err(|e| RepoError::Io {
        path: file.clone(),
        source: e,
    })?;
    let mut bytes = Vec::new();
    f.take(MAX_METADATA_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| RepoError::Io {
            path: file.clone(),
            source: e,
        })?;
    if bytes.len() as u64 > MAX_METADATA_BYTES {
        return Err(RepoError::TooLarge {
            file,
            limit: MAX_METADATA_BYTES,
        });
    }
    let entry: ModelEntry = serde_json::from_slice(&bytes).map_err(|e| RepoError::Json {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    entry.check(&file, folder)?;
    Ok(entry)
}
