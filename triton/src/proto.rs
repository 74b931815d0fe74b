//! Triton's `ModelConfig` schema twice over: as prost types (`inference::ModelConfig` and the
//! messages it holds), which the rest of the crate reads and writes, and as descriptors, which
//! the text-format parser, the field policy and the JSON printer walk field by field.
//!
//! Both come from one file, `proto/model_config.proto` as Triton publishes it
//! (triton-inference-server/common, `protobuf/model_config.proto`), compiled by `build.rs`, so
//! the names a config file may use and the types that hold them cannot drift apart.

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

/// The generated types of package `inference` (Triton's `ModelConfig` and the messages it uses).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod inference {
    include!(concat!(env!("OUT_DIR"), "/inference.rs"));
}

/// The schema's file descriptor set, written by `build.rs`.
const DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/model_config.bin"));

/// Full name of the config message.
const MODEL_CONFIG: &str = "inference.ModelConfig";

/// The descriptor of `inference.ModelConfig`.
///
/// # Panics
/// Never in a built crate: the descriptor set is the one `build.rs` compiled from the schema this
/// crate's types come from, so it decodes and names `inference.ModelConfig` (the
/// `descriptor_set_holds_model_config` test holds this).
pub fn model_config_descriptor() -> MessageDescriptor {
    static DESCRIPTOR: OnceLock<MessageDescriptor> = OnceLock::new();
    DESCRIPTOR
        .get_or_init(|| {
            #[allow(clippy::expect_used)]
            let pool = DescriptorPool::decode(DESCRIPTOR_SET)
                .expect("build.rs wrote a valid descriptor set for model_config.proto");
            #[allow(clippy::expect_used)]
            pool.get_message_by_name(MODEL_CONFIG)
                .expect("model_config.proto defines inference.ModelConfig")
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_set_holds_model_config() {
        let d = model_config_descriptor();
        assert_eq!(d.full_name(), MODEL_CONFIG);
        assert!(d.get_field_by_name("max_batch_size").is_some());
    }
}
