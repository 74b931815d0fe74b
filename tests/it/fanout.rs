//! One-to-many through the real runtime: `crop_boxes` splits each request into a part per kept
//! box, a model node batches the parts of many requests, `gather` joins them back. Requests with
//! zero, one and many parts are answered once each with their parts in order; a part that fails
//! fails its request once and no other; a replica SIGKILLed while parts are in flight loses none.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir::{load_graph, start, RequestError, RuntimeOptions, Tensor, TensorData};

use crate::common::{
    channel, named, node_stats, run_python_script, signal, temp_dir, two_workers, Replies,
};
use crate::distributed::{loopback, Executor};

/// An ONNX model summing each `f32 [2, 2, 1]` crop: `x [N, 2, 2, 1]` → `y [N]`.
pub(crate) fn sum_model(dir: &Path) -> PathBuf {
    let path = dir.join("crop_sum.onnx");
    let script = "import sys, onnx\n\
from onnx import helper, TensorProto\n\
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 2, 2, 1])\n\
y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N'])\n\
axes = helper.make_tensor('axes', TensorProto.INT64, [3], [1, 2, 3])\n\
node = helper.make_node('ReduceSum', ['x', 'axes'], ['y'], keepdims=0)\n\
g = helper.make_graph([node], 'crop_sum', [x], [y], [axes])\n\
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])\n\
m.ir_version = 8\n\
onnx.save(m, sys.argv[1])\n";
    run_python_script(script, &[&path], "writing the crop-sum model");
    path
}

/// The test graph: crops of 2×2 pixels → f32 → the sum model (node `m`, on `replicas`) → i64 →
/// a name from `names` labels → gathered with the boxes.
pub(crate) fn graph_yaml(
    model: &Path,
    labels: usize,
    replicas: Option<(&[&Executor], &[&str])>,
) -> String {
    let mut yaml = "name: fanout\n\
inputs:\n  - {name: image, dtype: u8, shape: [-1, -1, 1]}\n  - {name: boxes, dtype: f32, shape: [-1, 4]}\n  - {name: scores, dtype: f32, shape: [-1]}\n"
        .to_string();
    let mut placement = String::new();
    if let Some((executors, names)) = replicas {
        yaml.push_str("executors:\n");
        for e in executors {
            yaml.push_str(&format!(
                "  - {{name: {}, endpoint: \"{}\"}}\n",
                e.name(),
                e.endpoint()
            ));
        }
        placement = format!(
            ", executor: {{timeout_ms: 2000}}, replicas: [{}]",
            names.join(", ")
        );
    }
    yaml.push_str(&format!(
        "nodes:\n\
  - crop_boxes: {{id: crops, image: image, boxes: boxes, scores: scores, height: 2, width: 2, interpolation: nearest, min_score: 0.5, max_boxes: 8}}\n\
  - cast: {{id: f, input: crops.image, to: f32}}\n\
  - model: {{id: m, path: {:?}, inputs: {{x: f}}, batching: {{max_size: 16, max_delay_us: 2000}}{placement}}}\n\
  - cast: {{id: idx, input: m.y, to: i64}}\n\
  - labels: {{id: name, input: idx, labels: names_{labels}.txt}}\n\
  - gather: {{id: all, inputs: {{sum: m.y, name: name.labels, box: crops.box, score: crops.score}}}}\n\
outputs:\n  - {{name: sums, from: all.sum}}\n  - {{name: names, from: all.name}}\n  - {{name: boxes, from: all.box}}\n  - {{name: scores, from: all.score}}\n  - {{name: count, from: all.count}}\n",
        model.file_name().and_then(|f| f.to_str()).unwrap_or("crop_sum.onnx")
    ));
    yaml
}

/// Writes the graph and a labels file of `labels` names (`n0`, `n1`, ...) into `dir`.
pub(crate) fn write_graph(dir: &Path, yaml: &str, labels: usize) -> PathBuf {
    let names: Vec<String> = (0..labels).map(|i| format!("n{i}")).collect();
    std::fs::write(
        dir.join(format!("names_{labels}.txt")),
        names.join("\n") + "\n",
    )
    .expect("labels");
    let path = dir.join("fanout.yaml");
    std::fs::write(&path, yaml).expect("graph");
    path
}

/// One request: a 6×8 one-channel image and `boxes` 2×2 boxes with scores, all seeded by `i`.
struct Case {
    image: Vec<u8>,
    boxes: Vec<[f32; 4]>,
    scores: Vec<f32>,
}

impl Case {
    fn new(i: u64, boxes: usize) -> Case {
        let mut state = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let image = (0..48).map(|_| next(256) as u8).collect();
        let boxes: Vec<[f32; 4]> = (0..boxes)
            .map(|_| {
                let (x, y) = (next(7) as f32, next(5) as f32);
                [x, y, x + 2.0, y + 2.0]
            })
            .collect();
        // Distinct scores, so the expected order is unambiguous; about a third below 0.5.
        let mut scores: Vec<f32> = (0..boxes.len())
            .map(|k| (next(1000) as f32 + k as f32 * 1e-3) / 1000.0)
            .collect();
        scores.dedup();
        Case {
            image,
            boxes,
            scores,
        }
    }

    fn inputs(&self) -> Vec<weir::NamedTensor> {
        let n = self.boxes.len();
        vec![
            named(
                "image",
                Tensor {
                    shape: vec![6, 8, 1],
                    data: TensorData::U8(self.image.clone()),
                },
            ),
            named(
                "boxes",
                Tensor::f32(vec![n, 4], self.boxes.iter().flatten().copied().collect()),
            ),
            named("scores", Tensor::f32(vec![n], self.scores.clone())),
        ]
    }

    /// The kept boxes, best score first, with each crop's pixel sum.
    fn expected(&self) -> Vec<([f32; 4], f32, f32)> {
        let mut kept: Vec<(usize, f32)> = self
            .scores
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, s)| s >= 0.5)
            .collect();
        kept.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        kept.truncate(8);
        kept.into_iter()
            .map(|(k, s)| {
                let [x, y, ..] = self.boxes[k].map(|v| v as usize);
                let sum: u32 = [(y, x), (y, x + 1), (y + 1, x), (y + 1, x + 1)]
                    .iter()
                    .map(|&(r, c)| u32::from(self.image[r * 8 + c]))
                    .sum();
                (self.boxes[k], s, sum as f32)
            })
            .collect()
    }
}

fn texts(t: &Tensor) -> Vec<String> {
    match &t.data {
        TensorData::Bytes(v) => v
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect(),
        other => panic!("expected BYTES, got {:?}", other.dtype()),
    }
}

/// Checks `reply` against `case`'s expectation.
fn check(tag: u64, case: &Case, reply: &weir::Response) {
    let want = case.expected();
    let n = want.len();
    let out = |name: &str| {
        reply
            .output(name)
            .unwrap_or_else(|| panic!("request {tag}: output {name}"))
    };
    assert_eq!(
        out("count").as_i64(),
        Some(&[n as i64][..]),
        "request {tag}"
    );
    assert_eq!(out("sums").shape, vec![n], "request {tag}");
    assert_eq!(out("boxes").shape, vec![n, 4], "request {tag}");
    let sums = out("sums").as_f32().expect("f32");
    let boxes = out("boxes").as_f32().expect("f32");
    let scores = out("scores").as_f32().expect("f32");
    let names = texts(out("names"));
    for (k, (b, s, sum)) in want.iter().enumerate() {
        assert_eq!(&boxes[k * 4..k * 4 + 4], b, "request {tag} part {k} box");
        assert_eq!(scores[k], *s, "request {tag} part {k} score");
        assert_eq!(sums[k], *sum, "request {tag} part {k} sum");
        assert_eq!(names[k], format!("n{sum}"), "request {tag} part {k} name");
    }
}

#[test]
fn zero_one_and_many_parts_are_answered_once_in_part_order() {
    let dir = temp_dir("fanout");
    let model = sum_model(&dir.0);
    let path = write_graph(&dir.0, &graph_yaml(&model, 1024, None), 1024);
    let graph = load_graph(&path).expect("valid");
    let running = start(graph.plan, two_workers()).expect("starts");
    let cases: Vec<Case> = (0..60u64).map(|i| Case::new(i, (i % 7) as usize)).collect();
    assert!(
        cases.iter().any(|c| c.expected().is_empty()),
        "a request with no part"
    );
    assert!(
        cases.iter().any(|c| c.expected().len() == 1),
        "a request with one part"
    );
    assert!(
        cases.iter().any(|c| c.expected().len() >= 3),
        "a request with many parts"
    );
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (i, c) in cases.iter().enumerate() {
        replies.submit(&running, i as u64, c.inputs(), &tx);
    }
    drop(tx);
    for (tag, reply) in rx.iter() {
        let reply = reply.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        check(tag, &cases[tag as usize], &reply);
    }
    let counts = replies.counts();
    assert_eq!(counts.len(), cases.len(), "every request answered");
    assert!(counts.values().all(|&c| c == 1), "none twice: {counts:?}");
    // Parts are ordinary rows for the model node: those of different requests share calls.
    let parts: usize = cases.iter().map(|c| c.expected().len()).sum();
    let stats = node_stats(&running, "m");
    assert_eq!(stats.rows, parts as u64, "each part inferred once");
    assert!(stats.runs < parts as u64, "parts batched: {stats:?}");
    running.shutdown();
}

#[test]
fn a_failing_part_fails_its_request_once_and_no_other() {
    let dir = temp_dir("fanout-fail");
    let model = sum_model(&dir.0);
    // 400 names: a crop summing to 400 or more has no name, which fails that part.
    let path = write_graph(&dir.0, &graph_yaml(&model, 400, None), 400);
    let graph = load_graph(&path).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let cases: Vec<Case> = (0..60u64).map(|i| Case::new(i, (i % 7) as usize)).collect();
    let fails = |c: &Case| c.expected().iter().any(|&(_, _, sum)| sum >= 400.0);
    assert!(cases.iter().any(fails) && !cases.iter().all(fails));
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (i, c) in cases.iter().enumerate() {
        replies.submit(&running, i as u64, c.inputs(), &tx);
    }
    drop(tx);
    for (tag, reply) in rx.iter() {
        let case = &cases[tag as usize];
        match reply {
            Ok(reply) => {
                assert!(!fails(case), "request {tag} should have failed");
                check(tag, case, &reply);
            }
            Err(e) => {
                assert!(fails(case), "request {tag} failed: {e}");
                assert!(
                    matches!(&e, RequestError::Node { node, .. } if node == "name"),
                    "request {tag}: {e:?}"
                );
            }
        }
    }
    let counts = replies.counts();
    assert_eq!(counts.len(), cases.len(), "every request answered");
    assert!(counts.values().all(|&c| c == 1), "none twice: {counts:?}");
    running.shutdown();
}

#[test]
fn a_replica_sigkilled_during_a_fan_out_loses_no_part() {
    let dir = temp_dir("fanout-kill");
    let model = sum_model(&dir.0);
    let model_arg = model.display().to_string();
    let mut executors: Vec<Executor> = (0..2)
        .map(|i| Executor::serving(&format!("e{i}"), &loopback(), &model_arg))
        .collect();
    let refs: Vec<&Executor> = executors.iter().collect();
    let yaml = graph_yaml(&model, 1024, Some((&refs, &["e0", "e1"])));
    let path = write_graph(&dir.0, &yaml, 1024);
    let graph = load_graph(&path).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let pool = running
        .replica_pools()
        .into_iter()
        .next()
        .expect("the model node has a replica pool")
        .1;
    let total = 240u64;
    let cases: Vec<Case> = (0..total)
        .map(|i| Case::new(i, 3 + (i % 5) as usize))
        .collect();
    let replies = Replies::default();
    let (tx, rx) = channel();
    // Freeze one replica a quarter of the way in (it can no longer answer), send the rest, and
    // SIGKILL it once it has been sent parts after the freeze or a frozen call timed out: the
    // kill then provably lands on parts in flight.
    for i in 0..total / 4 {
        replies.submit(&running, i, cases[i as usize].inputs(), &tx);
    }
    let states = pool.replica_states();
    let victim = states.iter().position(|s| s.2 > 0).unwrap_or(0);
    signal(executors[victim].pid(), "-STOP");
    let (dispatched, redispatched) = (states[victim].3, pool.stats().redispatched);
    for i in total / 4..total {
        replies.submit(&running, i, cases[i as usize].inputs(), &tx);
    }
    drop(tx);
    let mut killed = false;
    let mut answered = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered < total {
        assert!(
            Instant::now() < deadline,
            "only {answered} of {total} answered"
        );
        if let Ok((tag, reply)) = rx.recv_timeout(Duration::from_millis(20)) {
            let reply = reply.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
            check(tag, &cases[tag as usize], &reply);
            answered += 1;
        }
        if !killed
            && (pool.replica_states()[victim].3 > dispatched
                || pool.stats().redispatched > redispatched)
        {
            executors[victim].sigkill();
            killed = true;
        }
    }
    assert!(
        killed,
        "every request answered before the frozen replica held a part"
    );
    let counts = replies.counts();
    assert_eq!(counts.len() as u64, total, "every request answered");
    assert!(counts.values().all(|&c| c == 1), "none twice");
    assert!(
        pool.stats().redispatched >= 1,
        "the dead replica's parts moved"
    );
    running.shutdown();
}

/// An affine model on `f32 [N, 2, 2, 1]` crops, `y = flatten(x)·W + b` (`y f32 [N, 3]`), and its
/// ParM parity model for k = 2 (the same weights, the bias twice: exactly decodable by
/// subtraction), written into `dir`.
fn affine_crop_models(dir: &Path) -> (PathBuf, PathBuf) {
    let script = r#"import sys, onnx, numpy as np
from onnx import helper, TensorProto, numpy_helper
w = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 8.0
b = np.array([0.5, -1.0, 2.0], dtype=np.float32)
def save(path, bias):
    x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 2, 2, 1])
    y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])
    shape = np.array([-1, 4], dtype=np.int64)
    init = [numpy_helper.from_array(w, 'w'), numpy_helper.from_array(bias, 'b'),
            numpy_helper.from_array(shape, 'shape')]
    nodes = [helper.make_node('Reshape', ['x', 'shape'], ['flat']),
             helper.make_node('MatMul', ['flat', 'w'], ['xw']),
             helper.make_node('Add', ['xw', 'b'], ['y'])]
    g = helper.make_graph(nodes, 'affine_crop', [x], [y], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.save(m, path)
save(sys.argv[1], b)
save(sys.argv[2], 2 * b)
"#;
    let (model, parity) = (
        dir.join("affine_crop.onnx"),
        dir.join("affine_crop_parity.onnx"),
    );
    run_python_script(script, &[&model, &parity], "writing the affine crop models");
    (model, parity)
}

/// `y = flatten(crop)·W + b` as the test's models compute it, for a 2×2 crop at `(x, y)`.
fn affine(case: &Case, [x, y, ..]: [f32; 4]) -> [f32; 3] {
    let (x, y) = (x as usize, y as usize);
    let pixels = [(y, x), (y, x + 1), (y + 1, x), (y + 1, x + 1)]
        .map(|(r, c)| f32::from(case.image[r * 8 + c]));
    let bias = [0.5, -1.0, 2.0];
    std::array::from_fn(|j| {
        let w = |i: usize| ((i * 3 + j) as f32 - 5.0) / 8.0;
        pixels
            .iter()
            .enumerate()
            .map(|(i, p)| p * w(i))
            .sum::<f32>()
            + bias[j]
    })
}

#[test]
fn parts_on_a_frozen_replica_are_reconstructed_by_parity_and_answered_once() {
    let dir = temp_dir("fanout-parm");
    let (model, _parity) = affine_crop_models(&dir.0);
    let endpoint = loopback();
    let executor = Executor::serving("slow", &endpoint, &model.display().to_string());
    let yaml = format!(
        "name: fanout_parm\n\
inputs:\n  - {{name: image, dtype: u8, shape: [-1, -1, 1]}}\n  - {{name: boxes, dtype: f32, shape: [-1, 4]}}\n  - {{name: scores, dtype: f32, shape: [-1]}}\n\
executors:\n  - {{name: slow, endpoint: \"{endpoint}\"}}\n\
nodes:\n\
  - crop_boxes: {{id: crops, image: image, boxes: boxes, scores: scores, height: 2, width: 2, interpolation: nearest, min_score: 0.5}}\n\
  - cast: {{id: f, input: crops.image, to: f32}}\n\
  - model:\n      id: m\n      path: affine_crop.onnx\n      inputs: {{x: f}}\n      replicas: [local, slow]\n      executor: {{timeout_ms: 60000}}\n      resilience: {{parity: {{k: 2, parity_model: affine_crop_parity.onnx}}}}\n\
  - gather: {{id: all, inputs: {{y: m.y, reconstructed: m.reconstructed, box: crops.box}}}}\n\
outputs:\n  - {{name: y, from: all.y}}\n  - {{name: reconstructed, from: all.reconstructed}}\n  - {{name: boxes, from: all.box}}\n"
    );
    let path = dir.0.join("fanout_parm.yaml");
    std::fs::write(&path, yaml).expect("graph");
    let graph = load_graph(&path).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    signal(executor.pid(), "-STOP");
    let cases: Vec<Case> = (0..40u64)
        .map(|i| Case::new(i, 1 + (i % 5) as usize))
        .collect();
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (i, c) in cases.iter().enumerate() {
        replies.submit(&running, i as u64, c.inputs(), &tx);
    }
    drop(tx);
    let mut reconstructed = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..cases.len() {
        let (tag, reply) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("every request answered while a replica is frozen");
        let reply = reply.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let case = &cases[tag as usize];
        let want = case.expected();
        let y = reply.output("y").and_then(Tensor::as_f32).expect("y");
        assert_eq!(y.len(), want.len() * 3, "request {tag}: one y per part");
        for (k, (b, _, _)) in want.iter().enumerate() {
            let expected = affine(case, *b);
            for j in 0..3 {
                let (g, w) = (y[k * 3 + j], expected[j]);
                assert!(
                    (g - w).abs() <= 1e-3 * w.abs().max(1.0),
                    "request {tag} part {k}: {g} vs {w}"
                );
            }
        }
        let flags = reply
            .output("reconstructed")
            .and_then(Tensor::as_i64)
            .expect("flags");
        reconstructed += flags.iter().sum::<i64>();
    }
    assert!(
        reconstructed >= 1,
        "parts of the frozen replica were reconstructed"
    );
    let counts = replies.counts();
    assert_eq!(counts.len(), cases.len(), "every request answered");
    assert!(counts.values().all(|&c| c == 1), "none twice");
    signal(executor.pid(), "-CONT");
    running.shutdown();
}

/// A model giving, for each `f32 [2, 2, 1]` crop, the boxes of its top-left and bottom-right
/// pixels: `x [N, 2, 2, 1]` → `boxes f32 [N, 2, 4]` (a constant, broadcast over `N`).
fn corner_boxes_model(dir: &Path) -> PathBuf {
    let path = dir.join("corners.onnx");
    let script = r#"import sys, onnx, numpy as np
from onnx import helper, TensorProto, numpy_helper
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 2, 2, 1])
y = helper.make_tensor_value_info('boxes', TensorProto.FLOAT, ['N', 2, 4])
corners = np.array([[0, 0, 1, 1], [1, 1, 2, 2]], dtype=np.float32)
init = [numpy_helper.from_array(corners, 'corners'),
        numpy_helper.from_array(np.array([1, 2, 3], dtype=np.int64), 'axes'),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), 'zero')]
nodes = [helper.make_node('ReduceSum', ['x', 'axes'], ['s'], keepdims=1),
         helper.make_node('Reshape', ['s', 'shape'], ['s3']),
         helper.make_node('Mul', ['s3', 'zero'], ['z']),
         helper.make_node('Add', ['z', 'corners'], ['boxes'])]
init.append(numpy_helper.from_array(np.array([-1, 1, 1], dtype=np.int64), 'shape'))
g = helper.make_graph(nodes, 'corners', [x], [y], init)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
"#;
    run_python_script(script, &[&path], "writing the corners model");
    path
}

#[test]
fn a_fan_out_inside_a_fan_out_gathers_back_level_by_level() {
    let dir = temp_dir("fanout-nested");
    corner_boxes_model(&dir.0);
    let yaml = "name: nested\n\
inputs:\n  - {name: image, dtype: u8, shape: [-1, -1, 1]}\n  - {name: boxes, dtype: f32, shape: [-1, 4]}\n  - {name: scores, dtype: f32, shape: [-1]}\n\
nodes:\n\
  - crop_boxes: {id: crops, image: image, boxes: boxes, scores: scores, height: 2, width: 2, interpolation: nearest, min_score: 0.5}\n\
  - cast: {id: f, input: crops.image, to: f32}\n\
  - model: {id: corners, path: corners.onnx, inputs: {x: f}, batching: {max_size: 8, max_delay_us: 1000}}\n\
  - crop_boxes: {id: pixels, image: crops.image, boxes: corners.boxes, height: 1, width: 1, interpolation: nearest}\n\
  - gather: {id: per_crop, inputs: {px: pixels.image}}\n\
  - gather: {id: per_image, inputs: {px: per_crop.px, n: per_crop.count}}\n\
outputs:\n  - {name: px, from: per_image.px}\n  - {name: inner, from: per_image.n}\n  - {name: outer, from: per_image.count}\n";
    let path = dir.0.join("nested.yaml");
    std::fs::write(&path, yaml).expect("graph");
    let graph = load_graph(&path).expect("valid");
    let running = start(graph.plan, two_workers()).expect("starts");
    let cases: Vec<Case> = (0..30u64).map(|i| Case::new(i, (i % 5) as usize)).collect();
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (i, c) in cases.iter().enumerate() {
        replies.submit(&running, i as u64, c.inputs(), &tx);
    }
    drop(tx);
    for (tag, reply) in rx.iter() {
        let reply = reply.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let case = &cases[tag as usize];
        let want = case.expected();
        let n = want.len();
        assert_eq!(
            reply.output("outer").and_then(Tensor::as_i64),
            Some(&[n as i64][..])
        );
        let inner = reply.output("inner").expect("inner");
        assert_eq!(inner.shape, vec![n], "request {tag}");
        assert_eq!(
            inner.as_i64().expect("i64"),
            &vec![2; n][..],
            "request {tag}"
        );
        let px = reply.output("px").expect("px");
        // With no part, a free dimension of the part type (here the inner count) is 0.
        let inner_dim = if n == 0 { 0 } else { 2 };
        assert_eq!(px.shape, vec![n, inner_dim, 1, 1, 1], "request {tag}");
        let expected: Vec<u8> = want
            .iter()
            .flat_map(|(b, _, _)| {
                let [x, y, ..] = b.map(|v| v as usize);
                [case.image[y * 8 + x], case.image[(y + 1) * 8 + x + 1]]
            })
            .collect();
        assert_eq!(px.data, TensorData::U8(expected), "request {tag}");
    }
    let counts = replies.counts();
    assert_eq!(counts.len(), cases.len(), "every request answered");
    assert!(counts.values().all(|&c| c == 1), "none twice");
    running.shutdown();
}
