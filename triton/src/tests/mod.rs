//! Tests over whole repositories: folders made in a temporary directory, holding the set-up's
//! real ONNX models (`.weir/models/`, from `scripts/setup.sh`) or small ONNX files written here.

mod autocomplete;
mod ensembles;
mod graphs;
mod hostile;
mod onnx;

use std::path::{Path, PathBuf};

use crate::load::{load, LoadOptions, LoadedModel, Repository};
use crate::ModelError;

/// A model the set-up fetched: `$WEIR_HOME/models/<rel>`, or the workspace's
/// `.weir/models/<rel>`.
pub(crate) fn weir_model(rel: &str) -> PathBuf {
    let path = std::env::var_os("WEIR_HOME")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.weir"),
            PathBuf::from,
        )
        .join("models")
        .join(rel);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/setup.sh (or set WEIR_HOME)",
        path.display()
    );
    path
}

/// A repository folder, removed when dropped.
pub(crate) struct TempRepo {
    pub root: PathBuf,
}

impl TempRepo {
    pub fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("weir-triton-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        TempRepo { root }
    }

    /// Writes `bytes` at `rel` under the root, making folders.
    pub fn file(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// Model `name` with `config` (if any) and `model.onnx` copied from `onnx` into each version.
    pub fn model(&self, name: &str, config: Option<&str>, onnx: &Path, versions: &[u64]) {
        std::fs::create_dir_all(self.root.join(name)).unwrap();
        if let Some(text) = config {
            self.file(&format!("{name}/config.pbtxt"), text);
        }
        for v in versions {
            let dest = self.root.join(format!("{name}/{v}/model.onnx"));
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::copy(onnx, &dest).unwrap();
        }
    }

    /// Model `name` with `config` and the ONNX bytes `onnx` in version 1.
    pub fn model_bytes(&self, name: &str, config: Option<&str>, onnx: &[u8]) {
        if let Some(text) = config {
            self.file(&format!("{name}/config.pbtxt"), text);
        }
        self.file(&format!("{name}/1/model.onnx"), onnx);
    }

    pub fn load(&self) -> Repository {
        load(&self.root, &LoadOptions::default()).unwrap()
    }
}

impl Drop for TempRepo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The loaded model `name`, or a panic showing why it did not load.
pub(crate) fn loaded<'a>(repo: &'a Repository, name: &str) -> &'a LoadedModel {
    match &repo.models[name].outcome {
        Ok(m) => m,
        Err(e) => panic!("{name} did not load: {e}"),
    }
}

/// The error model `name` (or its only version) failed with.
pub(crate) fn failure<'a>(repo: &'a Repository, name: &str) -> &'a ModelError {
    match &repo.models[name].outcome {
        Err(e) => e,
        Ok(m) => match m.versions.values().find_map(|v| v.as_ref().err()) {
            Some(e) => e,
            None => panic!("{name} loaded"),
        },
    }
}
