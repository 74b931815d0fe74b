//! Where the repository and the set-up folder are, and temporary folders.

use std::path::{Path, PathBuf};

/// The repository root, where `.weir/` and the default output paths are.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the bench crate sits in the repository")
        .to_path_buf()
}

/// `.weir/` (or `$WEIR_HOME`), checked to hold what `scripts/setup.sh` makes.
pub fn weir_home() -> PathBuf {
    let home = std::env::var_os("WEIR_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".weir"));
    assert!(
        home.join("models").join("mlp_a.onnx").is_file(),
        "{} lacks the test models: run scripts/setup.sh first",
        home.display()
    );
    home
}

pub fn model(name: &str) -> PathBuf {
    weir_home().join("models").join(name)
}

/// A temporary folder removed when dropped.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh temporary folder named after `tag`, this process and the moment.
pub fn temp_dir(tag: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!(
        "weir-bench-it-{tag}-{}-{:?}",
        std::process::id(),
        std::time::Instant::now()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}
