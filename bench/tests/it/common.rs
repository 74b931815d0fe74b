//! Where the repository and the set-up folder are.

use std::path::{Path, PathBuf};

/// The repository root, where `.weir/` and the default output paths are.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the bench crate sits in the repository")
        .to_path_buf()
}

/// The model `name` under the set-up folder ([`weir_bench::weir_home`], from the repository
/// root), checked to be there: `scripts/setup.sh` makes it.
pub fn model(name: &str) -> PathBuf {
    let path = repo()
        .join(weir_bench::weir_home())
        .join("models")
        .join(name);
    assert!(
        path.is_file(),
        "{} is missing: run scripts/setup.sh first",
        path.display()
    );
    path
}
