//! Generates Rust types for Triton's `ModelConfig` schema (`proto/model_config.proto`, as Triton
//! publishes it) with prost, and writes the schema's file descriptor set beside them: the
//! descriptors are what the text-format parser and the JSON printer read `config.pbtxt` and the
//! effective configuration against, field by field.
//!
//! prost needs `protoc`. `scripts/setup.sh` unpacks one into `.weir/protoc/` and
//! `.cargo/config.toml` hands it over as `PROTOC`; without it the build stops here with a message
//! saying so, rather than with prost's own search failing somewhere else.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=proto/model_config.proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    let protoc = std::env::var_os("PROTOC").filter(|p| Path::new(p).is_file());
    if protoc.is_none() {
        eprintln!(
            "error: no protoc for weir-triton's ModelConfig types: PROTOC is unset or names no \
             file ({:?}). Run scripts/setup.sh first (it unpacks protoc into .weir/protoc/, which \
             .cargo/config.toml points PROTOC at), or set PROTOC to a protoc binary.",
            std::env::var_os("PROTOC")
        );
        std::process::exit(1);
    }
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("error: cargo did not set OUT_DIR for weir-triton's build script");
        std::process::exit(1);
    };
    let mut config = prost_build::Config::new();
    config
        // The schema's comments are reStructuredText for Triton's documentation; as rustdoc
        // they would be mis-rendered, and their indented blocks run as doc tests.
        .disable_comments(["."])
        .file_descriptor_set_path(out_dir.join("model_config.bin"));
    if let Err(e) = config.compile_protos(&["proto/model_config.proto"], &["proto"]) {
        eprintln!("error: generating the ModelConfig types from triton/proto: {e}");
        std::process::exit(1);
    }
}
