//! The builder API gives the same graph value as the YAML file.

use std::path::Path;

use weir::{DType, ExecutorSpec, GraphSpec, ModelBuilder, WarmupData, WarmupSpec};

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

/// The image and fan-out nodes from the builder equal their YAML.
#[test]
fn builder_equals_a_fan_out_graph_in_yaml() {
    use weir::{CropBoxesBuilder, Interpolation};
    let yaml = "name: crops\n\
inputs:\n  - {name: image, dtype: bytes, shape: [1]}\n  - {name: boxes, dtype: f32, shape: [-1, 4]}\n  - {name: scores, dtype: f32, shape: [-1]}\n\
nodes:\n\
  - decode_image: {id: decoded, input: image}\n\
  - crop_boxes: {id: crops, image: decoded, boxes: boxes, scores: scores, coordinates: normalized, height: 32, width: 32, interpolation: bilinear, min_score: 0.5, iou_threshold: 0.4, max_boxes: 10}\n\
  - cast: {id: f, input: crops.image, to: f32}\n\
  - transpose: {id: chw, input: f, perm: [2, 0, 1]}\n\
  - resize: {id: small, input: crops.image, height: 8, width: 8, interpolation: nearest}\n\
  - gather: {id: all, inputs: {crops: chw, small: small, box: crops.box}}\n\
outputs:\n  - {name: crops, from: all.crops}\n  - {name: count, from: all.count}\n";
    let from_yaml = GraphSpec::from_yaml(yaml, "crops.yaml").expect("parses");
    let built = GraphSpec::builder("crops")
        .input("image", DType::Bytes, &[1])
        .input("boxes", DType::F32, &[-1, 4])
        .input("scores", DType::F32, &[-1])
        .decode_image("decoded", "image")
        .crop_boxes(
            CropBoxesBuilder::new(
                "crops",
                "decoded",
                "boxes",
                [32, 32],
                Interpolation::Bilinear,
            )
            .scores("scores", 0.5)
            .normalized()
            .suppress_above(0.4)
            .max_boxes(10),
        )
        .cast("f", "crops.image", DType::F32)
        .transpose("chw", "f", &[2, 0, 1])
        .resize("small", "crops.image", 8, 8, Interpolation::Nearest)
        .gather(
            "all",
            &[("crops", "chw"), ("small", "small"), ("box", "crops.box")],
        )
        .output("crops", "all.crops")
        .output("count", "all.count")
        .build();
    assert_eq!(built, from_yaml);
    let plan = weir::plan_spec(&built, Path::new(".")).expect("valid").plan;
    assert!(plan.describe().contains("gather the parts of `crops`"));
}

/// A `decode_image` with a draft size from the builder equals its YAML, and the plan says it.
#[test]
fn builder_equals_a_drafted_decode_in_yaml() {
    let yaml = "name: photos\n\
inputs:\n  - {name: image, dtype: bytes, shape: [1]}\n\
nodes:\n\
  - decode_image: {id: decoded, input: image, draft: {height: 224, width: 224}}\n\
outputs:\n  - {name: pixels, from: decoded}\n";
    let from_yaml = GraphSpec::from_yaml(yaml, "photos.yaml").expect("parses");
    let built = GraphSpec::builder("photos")
        .input("image", DType::Bytes, &[1])
        .decode_image_draft("decoded", "image", 224, 224)
        .output("pixels", "decoded")
        .build();
    assert_eq!(built, from_yaml);
    let plan = weir::plan_spec(&built, Path::new(".")).expect("valid").plan;
    assert!(
        plan.describe().contains("draft=224x224"),
        "{}",
        plan.describe()
    );
}

/// The region, window and decoding nodes from the builder equal their YAML.
#[test]
fn builder_equals_region_window_and_decoding_nodes_in_yaml() {
    let yaml = "name: ops\n\
inputs:\n  - {name: map, dtype: f32, shape: [-1, -1]}\n  - {name: image, dtype: u8, shape: [-1, -1, 3]}\n  - {name: scores, dtype: f32, shape: [-1, 10]}\n  - {name: ids, dtype: i64, shape: [-1]}\n\
nodes:\n\
  - regions: {id: r, input: map, threshold: 0.3, min_score: 0.6, expand: 1.6}\n\
  - crop: {id: c, input: image, top: 2, left: 4, height: 8, width: 8}\n\
  - crop: {id: cc, input: image, height: 8, width: 8, center: true}\n\
  - pad: {id: p, input: c, shape: [16, -1, 3], value: 0}\n\
  - slice: {id: s, input: image, axis: 1, start: 0, end: 4, step: 2}\n\
  - ctc_decode: {id: t, input: scores, labels: keys.txt, blank: 0}\n\
  - detokenize: {id: d, input: ids, tokenizer: tokenizer.json}\n\
outputs:\n  - {name: boxes, from: r.boxes}\n";
    let from_yaml = GraphSpec::from_yaml(yaml, "ops.yaml").expect("parses");
    let built = GraphSpec::builder("ops")
        .input("map", DType::F32, &[-1, -1])
        .input("image", DType::U8, &[-1, -1, 3])
        .input("scores", DType::F32, &[-1, 10])
        .input("ids", DType::I64, &[-1])
        .regions("r", "map", [0.3, 0.6, 1.6])
        .crop("c", "image", Some([2, 4]), [8, 8])
        .crop("cc", "image", None, [8, 8])
        .pad("p", "c", &[16, -1, 3], 0.0)
        .slice("s", "image", 1, [0, 2], Some(4))
        .ctc_decode("t", "scores", "keys.txt", 0)
        .detokenize("d", "ids", "tokenizer.json")
        .output("boxes", "r.boxes")
        .build();
    assert_eq!(built, from_yaml);
}

/// A model node's `warmup` from the builder equals its YAML, and both plan the same samples.
#[test]
fn builder_equals_a_warmed_model_node_in_yaml() {
    let model = crate::common::model("seq_pool.onnx");
    let yaml = format!(
        "name: w\ninputs:\n  - {{name: ids, dtype: i64, shape: [-1]}}\n  - {{name: mask, dtype: i64, shape: [-1]}}\nnodes:\n  - model: {{id: p, path: {}, inputs: {{input_ids: ids, attention_mask: mask}}, warmup: {{data: random, runs: 3, shape: {{input_ids: [7], attention_mask: [7]}}}}}}\noutputs:\n  - {{name: a, from: p.pooled}}\n",
        model.display()
    );
    let from_yaml = GraphSpec::from_yaml(&yaml, "w.yaml").expect("parses");
    let mut warmup = WarmupSpec::generated(WarmupData::Random, 3);
    warmup.shape.insert("input_ids".into(), vec![7].into());
    warmup.shape.insert("attention_mask".into(), vec![7].into());
    let built = GraphSpec::builder("w")
        .input("ids", DType::I64, &[-1])
        .input("mask", DType::I64, &[-1])
        .model(
            ModelBuilder::new("p", &model)
                .input("input_ids", "ids")
                .input("attention_mask", "mask")
                .warmup(warmup),
        )
        .output("a", "p.pooled")
        .build();
    let a = weir::plan_spec(&built, Path::new(".")).expect("valid").plan;
    let b = weir::plan_spec(&from_yaml, Path::new("."))
        .expect("valid")
        .plan;
    assert_eq!(built, from_yaml);
    assert_eq!(a, b);
    let weir_engine::plan::NodeKind::Model(m) = &a.nodes[0].node.kind else {
        panic!("a model node");
    };
    assert_eq!(
        (m.warmup.len(), m.warmup[0].runs, m.warmup[0].rows),
        (1, 3, 1)
    );
}
