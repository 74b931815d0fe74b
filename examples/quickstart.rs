//! The quickstart graph built with the Rust builder API instead of YAML, served in-process.
//!
//! Run after `scripts/setup.sh`: `cargo run --release --example quickstart`.

use std::path::Path;

use anyhow::{anyhow, Result};
use weir::{DType, ExecutorSpec, GraphSpec, ModelBuilder, NamedTensor, RuntimeOptions, Tensor};

fn main() -> Result<()> {
    let spec = GraphSpec::builder("quickstart")
        .input("image", DType::F32, &[3, 224, 224])
        .model(
            ModelBuilder::new("squeezenet", ".weir/zoo/squeezenet.onnx")
                .input("data_0", "image")
                .executor(ExecutorSpec {
                    instances: 2,
                    ..ExecutorSpec::default()
                }),
        )
        .top_k("top5", "squeezenet", 5)
        .output("classes", "top5.indices")
        .output("scores", "top5.values")
        .build();
    let graph = weir::plan_spec(&spec, Path::new(".")).map_err(|d| anyhow!("{d}"))?;
    print!("{}", graph.plan.describe());
    let running = weir::start(graph.plan, RuntimeOptions::default())?;
    let image = Tensor::f32(
        vec![3, 224, 224],
        (0..3 * 224 * 224)
            .map(|i| (i % 255) as f32 / 255.0)
            .collect(),
    );
    let reply = running.runtime().infer(vec![NamedTensor {
        name: "image".into(),
        tensor: image,
    }])?;
    println!(
        "classes {:?}",
        reply.output("classes").and_then(Tensor::as_i64)
    );
    println!(
        "scores  {:?}",
        reply.output("scores").and_then(Tensor::as_f32)
    );
    println!("lineage {:?}", reply.lineage);
    running.shutdown();
    Ok(())
}
