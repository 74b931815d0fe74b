//! Names a weir graph accepts, made from Triton's.
//!
//! weir's graph names, graph input names and node ids start with a letter or `_` and hold only
//! letters, digits, `_` and `-` (`weir_engine::validate`: a `.` separates a node from its tensor
//! in a reference). Triton's model and tensor names are free-form (`gpu_0/data_0`,
//! `save_infer_model/scale_0.tmp_1`). Each Triton name is mapped to an identifier by replacing
//! every other character with `_` (and prefixing `_` when it would start with a digit or `-`),
//! made unique within the graph by a numeric suffix; graph *output* names and model tensor
//! names, which the engine takes as they are, keep Triton's spelling. A renamed graph input keeps
//! Triton's name as its client name (`client_name`), so clients send, and metadata shows, the
//! names of the configuration.

use std::collections::HashSet;

/// `text` as an identifier: other characters replaced by `_`, `_` prefixed when needed.
pub fn identifier(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        out.insert(0, '_');
    }
    out
}

/// Hands out identifiers unique within one graph (inputs and nodes share a namespace).
#[derive(Debug, Default)]
pub struct Names {
    used: HashSet<String>,
}

impl Names {
    /// An unused identifier made from `wanted`.
    pub fn take(&mut self, wanted: &str) -> String {
        let base = identifier(wanted);
        let mut name = base.clone();
        let mut n = 2;
        while self.used.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triton_names_become_unique_identifiers() {
        assert_eq!(identifier("gpu_0/data_0"), "gpu_0_data_0");
        assert_eq!(identifier("3d-model"), "_3d-model");
        assert_eq!(identifier("x.tmp_1"), "x_tmp_1");
        assert_eq!(identifier(""), "_");
        let mut names = Names::default();
        assert_eq!(names.take("a/b"), "a_b");
        assert_eq!(names.take("a.b"), "a_b_2");
        assert_eq!(names.take("a_b"), "a_b_3");
    }
}
