//! Region and window nodes served end to end and compared with numpy
//! (`tests/python/region_reference.py`, an independent implementation): `regions` on synthetic
//! probability maps and on the real PP-OCRv4 detector's map of a rendered text image; `crop`,
//! `pad` and `slice` on requests of different shapes in one batch, for several dtypes; and a
//! request that cannot give a window refused alone, as an invalid request naming the node.

use std::path::Path;
use std::sync::mpsc;

use serde_json::{json, Value};
use weir::{
    plan_spec, start, ErrorClass, GraphSpec, RequestError, Responder, Response, RunningGraph,
    RuntimeOptions, Tensor, TensorData,
};

use crate::common::{assert_close, model, named};
use crate::reference::{outputs_from_json, python, request_json};

/// Starts the graph `yaml` in this process.
fn run(yaml: &str) -> RunningGraph {
    let spec = GraphSpec::from_yaml(yaml, "region_ops.yaml").expect("parses");
    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    start(graph.plan, RuntimeOptions::default()).expect("starts")
}

/// Submits every request as one group (so they can share a batch and its ragged columns) and
/// returns the outcomes in request order.
fn group(
    running: &RunningGraph,
    input: &str,
    rows: &[Tensor],
) -> Vec<Result<Response, RequestError>> {
    let (tx, rx) = mpsc::channel();
    let requests = rows
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let tx = tx.clone();
            let responder: Responder = Box::new(move |outcome| {
                let _ = tx.send((i, outcome));
            });
            (vec![named(input, t.clone())], responder)
        })
        .collect();
    running.runtime().submit_group(requests).expect("admitted");
    let mut outcomes: Vec<_> = (0..rows.len())
        .map(|_| rx.recv().expect("answered"))
        .collect();
    outcomes.sort_by_key(|(i, _)| *i);
    outcomes.into_iter().map(|(_, o)| o).collect()
}

/// numpy's outputs for `op` with `params` on tensor `x`.
fn numpy(op: &str, params: Value, x: &Tensor) -> Vec<(String, Tensor)> {
    let mut request = request_json(&[("x", x)]);
    request["op"] = json!(op);
    request["params"] = params;
    let (code, out, err) = python("region_reference.py", &[], &request);
    assert_eq!(code, 0, "region_reference.py failed: {err}");
    outputs_from_json(&serde_json::from_str(&out).expect("a JSON reply"))
}

fn output<'a>(response: &'a Response, name: &str) -> &'a Tensor {
    response
        .output(name)
        .unwrap_or_else(|| panic!("no output `{name}`"))
}

/// `got` (weir's boxes and scores) equals numpy's `want`: shapes exactly, boxes within 1e-6 of
/// the map's size, scores within 1e-5 (the two sum a component's probabilities in other orders).
fn assert_regions(got: &Response, want: &[(String, Tensor)], what: &str) {
    for (name, tol) in [("boxes", 1e-6), ("scores", 1e-5)] {
        let want = &want
            .iter()
            .find(|(n, _)| n == name)
            .expect("numpy's output")
            .1;
        let got = output(got, name);
        assert_eq!(got.shape, want.shape, "{what}: {name} shape");
        let (got, want) = (got.as_f32().expect("f32"), want.as_f32().expect("f32"));
        assert_close(got, want, tol, &format!("{what}: {name}"));
    }
}

const REGIONS: &str = "threshold: 0.3, min_score: 0.5, expand: 1.5, min_size: 2, max_regions: 3";

fn regions_params() -> Value {
    json!({"threshold": 0.3, "min_score": 0.5, "expand": 1.5, "min_size": 2, "max_regions": 3})
}

/// An `h` × `w` map, 0.05 everywhere but the pixels `on` gives a probability for.
fn map(h: usize, w: usize, on: impl Fn(usize, usize) -> Option<f32>) -> Tensor {
    let mut data = Vec::with_capacity(h * w);
    for y in 0..h {
        for x in 0..w {
            data.push(on(y, x).unwrap_or(0.05));
        }
    }
    Tensor::f32(vec![h, w], data)
}

#[test]
fn regions_match_numpy_on_synthetic_maps() {
    let yaml = format!(
        "name: regions
inputs:
  - {{name: map, dtype: f32, shape: [-1, -1]}}
nodes:
  - regions: {{id: found, input: map, {REGIONS}}}
outputs:
  - {{name: boxes, from: found.boxes}}
  - {{name: scores, from: found.scores}}
"
    );
    let running = run(&yaml);
    let described = running.runtime().plan().describe();
    let line = "regions threshold=0.3 min_score=0.5 expand=1.5 min_size=2 max_regions=3";
    assert!(described.contains(line), "{described}");
    let maps = [
        // Two rectangles of different scores, one faint (dropped), one thin line (below min_size).
        map(20, 30, |y, x| match (y, x) {
            (2..=6, 3..=12) => Some(0.9),
            (10..=17, 15..=27) => Some(0.6 + (x as f32) * 0.01),
            (14..=18, 1..=8) => Some(0.35),
            (0, 20..=29) => Some(0.95),
            _ => None,
        }),
        // An L-shape: one component whose rectangle covers pixels it does not hold.
        map(16, 16, |y, x| {
            (x == 2 && (2..14).contains(&y) || y == 13 && (2..12).contains(&x)).then_some(0.8)
        }),
        // Blocks touching only at corners join; more components than max_regions, ties in score.
        map(12, 18, |y, x| {
            let block =
                |y0: usize, x0: usize| (y0..y0 + 3).contains(&y) && (x0..x0 + 3).contains(&x);
            (block(0, 0)
                || block(3, 3)
                || block(0, 10)
                || block(6, 10)
                || block(9, 0)
                || block(8, 14))
            .then_some(0.7)
        }),
        // Nothing above the threshold: zero regions.
        map(8, 9, |_, _| Some(0.2)),
        // Everything on: one region, the whole map.
        map(5, 7, |y, x| Some(0.4 + (y * 7 + x) as f32 * 0.01)),
    ];
    let outcomes = group(&running, "map", &maps);
    for (i, (m, outcome)) in maps.iter().zip(outcomes).enumerate() {
        let got = outcome.unwrap_or_else(|e| panic!("map {i}: {e}"));
        let want = numpy("regions", regions_params(), m);
        assert_regions(&got, &want, &format!("map {i}"));
    }
    // The maps are what they claim: regions kept, ties ordered, the empty map empty.
    let counts: Vec<usize> = maps
        .iter()
        .map(|m| numpy("regions", regions_params(), m)[1].1.shape[0])
        .collect();
    assert_eq!(counts, vec![2, 1, 3, 0, 1]);
    running.shutdown();
}

/// Five-by-seven glyphs for the rendered text, row by row (`#` is ink).
fn glyph(c: char) -> &'static str {
    match c {
        'T' => "#####..#....#....#....#....#....#..",
        'E' => "######....#....####.#....#....#####",
        'X' => "#...##...#.#.#...#...#.#.#...##...#",
        'W' => "#...##...##...##.#.##.#.###.###...#",
        'I' => "#####..#....#....#....#....#..#####",
        'R' => "####.#...##...#####.#.#..#..#.#...#",
        _ => "                                   ",
    }
}

/// A white page with `lines` of black text at `scale` pixels per glyph dot, as the detector
/// reads it (`[3, h, w]`, ImageNet-normalised).
fn rendered(h: usize, w: usize, lines: &[(usize, usize, &str)], scale: usize) -> Tensor {
    let mut ink = vec![false; h * w];
    for &(top, left, text) in lines {
        for (k, c) in text.chars().enumerate() {
            let dots = glyph(c).chars().enumerate().filter(|&(_, d)| d == '#');
            for (dot, _) in dots {
                let (gy, gx) = (dot / 5, dot % 5);
                for dy in 0..scale {
                    for dx in 0..scale {
                        let (y, x) = (top + gy * scale + dy, left + (k * 7 + gx) * scale + dx);
                        if y < h && x < w {
                            ink[y * w + x] = true;
                        }
                    }
                }
            }
        }
    }
    let (mean, std) = ([0.485f32, 0.456, 0.406], [0.229f32, 0.224, 0.225]);
    let mut data = Vec::with_capacity(3 * h * w);
    for c in 0..3 {
        data.extend(
            ink.iter()
                .map(|&i| ((if i { 0.0 } else { 1.0 }) - mean[c]) / std[c]),
        );
    }
    Tensor::f32(vec![3, h, w], data)
}

#[test]
fn regions_of_the_pp_ocr_detector_match_numpy_on_rendered_text() {
    let yaml = format!(
        "name: ocr_regions
inputs:
  - {{name: image, dtype: f32, shape: [3, -1, -1]}}
nodes:
  - model: {{id: detector, path: {}, inputs: {{x: image}}}}
  - regions: {{id: text, input: detector.sigmoid_0.tmp_0}}
outputs:
  - {{name: probability, from: detector.sigmoid_0.tmp_0}}
  - {{name: boxes, from: text.boxes}}
  - {{name: scores, from: text.scores}}
",
        model("pretrained/ch_PP-OCRv4_det_infer.onnx").display()
    );
    let running = run(&yaml);
    let pages = [
        rendered(96, 320, &[(12, 16, "TEXT WEIR"), (56, 40, "WIRE TIE")], 3),
        rendered(64, 224, &[(20, 24, "EXIT")], 4),
    ];
    let defaults = json!({"threshold": 0.3, "min_score": 0.5, "expand": 1.5, "min_size": 3,
                          "max_regions": 100});
    for (i, page) in pages.iter().enumerate() {
        let got = running.runtime().infer(vec![named("image", page.clone())]);
        let got = got.unwrap_or_else(|e| panic!("page {i}: {e}"));
        let want = numpy("regions", defaults.clone(), output(&got, "probability"));
        assert_regions(&got, &want, &format!("page {i}"));
        let found = output(&got, "scores").shape[0];
        assert!(found >= 1, "page {i}: the detector finds the rendered text");
        // Every box lies inside the page, as fractions of it.
        let boxes = output(&got, "boxes").as_f32().expect("f32");
        assert!(boxes.iter().all(|v| (0.0..=1.0).contains(v)), "{boxes:?}");
    }
    running.shutdown();
}

/// A `shape` tensor of `dtype` counting up from 1 (booleans alternate), distinct per element.
fn counting(dtype: &str, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    let data = match dtype {
        "u8" => TensorData::U8((0..n).map(|i| (i % 251 + 1) as u8).collect()),
        "i32" => TensorData::I32((0..n).map(|i| i as i32 * 7 - 100).collect()),
        "i64" => TensorData::I64((0..n).map(|i| (i as i64 - 50) << 40).collect()),
        "f32" => TensorData::F32((0..n).map(|i| i as f32 * 0.25 - 3.0).collect()),
        "bool" => TensorData::Bool((0..n).map(|i| i % 3 == 0).collect()),
        other => panic!("no test data for {other}"),
    };
    Tensor::new(shape.to_vec(), data)
}

#[test]
fn crop_pad_and_slice_match_numpy_for_several_dtypes() {
    for dtype in ["u8", "i32", "i64", "f32", "bool"] {
        let running = run(&format!(
            "name: windows
inputs:
  - {{name: x, dtype: {dtype}, shape: [-1, -1, 2]}}
nodes:
  - crop: {{id: corner, input: x, top: 1, left: 2, height: 3, width: 4}}
  - crop: {{id: middle, input: x, center: true, height: 2, width: 3}}
  - pad: {{id: padded, input: x, shape: [8, -1, 3], value: 1}}
  - slice: {{id: every_other, input: x, axis: 1, start: -5, end: 7, step: 2}}
  - slice: {{id: rows, input: x, axis: 0, start: 1}}
outputs:
  - {{name: corner, from: corner}}
  - {{name: middle, from: middle}}
  - {{name: padded, from: padded}}
  - {{name: every_other, from: every_other}}
  - {{name: rows, from: rows}}
"
        ));
        if dtype == "u8" {
            // How `weir validate` shows each node.
            let described = running.runtime().plan().describe();
            for line in [
                "crop 3x4 at top=1 left=2",
                "crop 2x3 centred",
                "pad to [8, -1, 3] with 1",
                "slice axis=1 [-5:7:2]",
                "slice axis=0 [1::1]",
            ] {
                assert!(described.contains(line), "`{line}` in:\n{described}");
            }
        }
        let rows: Vec<Tensor> = [[5, 7, 2], [6, 9, 2], [8, 6, 2], [4, 11, 2]]
            .iter()
            .map(|s| counting(dtype, s))
            .collect();
        let cases = [
            (
                "corner",
                "crop",
                json!({"top": 1, "left": 2, "height": 3, "width": 4, "center": false}),
            ),
            (
                "middle",
                "crop",
                json!({"top": 0, "left": 0, "height": 2, "width": 3, "center": true}),
            ),
            ("padded", "pad", json!({"shape": [8, -1, 3], "value": 1})),
            (
                "every_other",
                "slice",
                json!({"axis": 1, "start": -5, "end": 7, "step": 2}),
            ),
            (
                "rows",
                "slice",
                json!({"axis": 0, "start": 1, "end": null, "step": 1}),
            ),
        ];
        for (r, outcome) in group(&running, "x", &rows).into_iter().enumerate() {
            let got = outcome.unwrap_or_else(|e| panic!("{dtype} row {r}: {e}"));
            for (name, op, params) in &cases {
                let want = numpy(op, params.clone(), &rows[r]);
                assert_eq!(output(&got, name), &want[0].1, "{dtype} row {r}: {name}");
            }
        }
        running.shutdown();
    }
}

#[test]
fn a_request_that_cannot_give_its_window_fails_alone() {
    let running = run("name: windows
inputs:
  - {name: x, dtype: u8, shape: [-1, -1]}
nodes:
  - crop: {id: window, input: x, height: 4, width: 4, center: true}
  - pad: {id: padded, input: x, shape: [6, 6], value: 0}
outputs:
  - {name: window, from: window}
  - {name: padded, from: padded}
");
    let rows: Vec<Tensor> = [[5, 5], [3, 6], [6, 6], [7, 4]]
        .iter()
        .map(|s| counting("u8", s))
        .collect();
    let outcomes = group(&running, "x", &rows);
    let classes: Vec<_> = outcomes
        .iter()
        .map(|o| o.as_ref().map(|_| ()).map_err(RequestError::class))
        .collect();
    let invalid = Err(ErrorClass::InvalidRequest);
    assert_eq!(classes, vec![Ok(()), invalid, Ok(()), invalid]);
    let named_node = |i: usize, node: &str| match &outcomes[i] {
        Err(RequestError::Invalid { field, message }) => {
            assert_eq!(field, "inputs.x");
            assert!(message.contains(&format!("node `{node}`")), "{message}");
        }
        other => panic!("request {i}: expected an invalid request, got {other:?}"),
    };
    named_node(1, "window");
    named_node(3, "padded");
    running.shutdown();
}
