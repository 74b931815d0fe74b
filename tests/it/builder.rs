//! The builder API gives the same graph value as the YAML file.

use std::path::Path;

use weir::{DType, ExecutorSpec, GraphSpec, ModelBuilder};

use crate::common::repo;

#[test]
fn builder_equals_quickstart_yaml() {
    let path = repo().join("graphs/quickstart.yaml");
    let from_yaml = GraphSpec::from_file(&path).expect("parses");
    let built = GraphSpec::builder("quickstart")
        .description("squeezenet → top-5 classes with their scores")
        .input("image", DType::F32, &[3, 224, 224])
        .model(
            ModelBuilder::new("squeezenet", "../.weir/zoo/squeezenet.onnx")
                .input("data_0", "image")
                .executor(ExecutorSpec {
                    instances: 2,
                    intra_op_threads: 1,
                    ..ExecutorSpec::default()
                }),
        )
        .top_k("top5", "squeezenet", 5)
        .output("classes", "top5.indices")
        .output("scores", "top5.values")
        .build();
    assert_eq!(built, from_yaml);
    // And both plan identically.
    let dir = repo().join("graphs");
    let a = weir::plan_spec(&built, &dir).expect("valid").plan;
    let b = weir::plan_spec(&from_yaml, Path::new(&dir))
        .expect("valid")
        .plan;
    assert_eq!(a, b);
}
