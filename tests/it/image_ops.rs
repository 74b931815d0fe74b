//! Image pre-processing served end to end: JPEG and PNG bytes in, decoded, resized, cast and
//! transposed in the dataflow, classified by squeezenet, and a corrupt image refused as an invalid
//! request naming its input, without stopping the graph; a JPEG decoded at a reduced DCT scale
//! (`draft`) through `weir serve`, hostile JPEGs refused by it over HTTP.

use std::io::Cursor;
use std::path::Path;
use std::sync::mpsc;

use image::{ImageOutputFormat, RgbImage};
use weir::{
    plan_spec, start, ErrorClass, GraphSpec, RequestError, Responder, RuntimeOptions, Tensor,
};

use crate::common::{model, named};
use crate::serve::Server;

fn encoded(w: u32, h: u32, format: ImageOutputFormat) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    });
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encodes");
    out.into_inner()
}

#[test]
fn jpeg_and_png_requests_reach_squeezenet_through_the_image_nodes() {
    let yaml = format!(
        "name: images
inputs:
  - {{name: picture, dtype: bytes, shape: [1]}}
nodes:
  - decode_image: {{id: decoded, input: picture}}
  - resize: {{id: resized, input: decoded, height: 224, width: 224, interpolation: bilinear}}
  - cast: {{id: floats, input: resized, to: f32}}
  - transpose: {{id: chw, input: floats, perm: [2, 0, 1]}}
  - model: {{id: squeezenet, path: {}, inputs: {{data_0: chw}}}}
outputs:
  - {{name: scores, from: squeezenet}}
",
        model("squeezenet_random.onnx").display()
    );
    let spec = GraphSpec::from_yaml(&yaml, "images.yaml").expect("parses");
    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let rt = running.runtime();
    let picture = |bytes: Vec<u8>| vec![named("picture", Tensor::bytes(vec![1], vec![bytes]))];
    for bytes in [
        encoded(320, 240, ImageOutputFormat::Jpeg(85)),
        encoded(100, 150, ImageOutputFormat::Png),
    ] {
        let response = rt.infer(picture(bytes)).expect("answered");
        let scores = response.output("scores").expect("scores");
        assert_eq!(scores.shape.iter().product::<usize>(), 1000);
    }
    let mut corrupt = encoded(64, 64, ImageOutputFormat::Jpeg(85));
    corrupt.truncate(corrupt.len() / 3);
    let err = rt.infer(picture(corrupt)).expect_err("refused");
    assert_eq!(err.class(), ErrorClass::InvalidRequest, "{err}");
    assert!(err.to_string().contains("node `decoded`"), "{err}");
    match err {
        RequestError::Invalid { field, .. } => assert_eq!(field, "inputs.picture"),
        other => panic!("expected an invalid request, got {other:?}"),
    }
    let again = rt.infer(picture(encoded(50, 50, ImageOutputFormat::Png)));
    assert!(
        again.is_ok(),
        "the graph keeps serving after a corrupt image"
    );

    // One batch holding a corrupt image between two good ones: only the corrupt one fails.
    let (tx, rx) = mpsc::channel();
    let bad = encoded(64, 64, ImageOutputFormat::Jpeg(85))[..40].to_vec();
    let rows = [
        encoded(30, 20, ImageOutputFormat::Png),
        bad,
        encoded(20, 30, ImageOutputFormat::Jpeg(90)),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, bytes)| {
        let tx = tx.clone();
        let responder: Responder = Box::new(move |outcome| {
            let _ = tx.send((i, outcome.map(|_| ()).map_err(|e| e.class())));
        });
        (picture(bytes), responder)
    })
    .collect();
    rt.submit_group(rows).expect("admitted");
    let mut outcomes: Vec<_> = (0..3).map(|_| rx.recv().expect("answered")).collect();
    outcomes.sort_by_key(|(i, _)| *i);
    assert_eq!(
        outcomes,
        vec![
            (0, Ok(())),
            (1, Err(ErrorClass::InvalidRequest)),
            (2, Ok(()))
        ]
    );
    running.shutdown();
}

/// Posts `image` to the `drafts` graph as its BYTES input in the binary extension.
fn post_picture(server: &Server, image: &[u8]) -> (u16, String) {
    server.post_bytes_element("/v2/models/drafts/infer", "picture", image)
}

/// The `pixels` output's shape in a JSON reply.
fn pixels_shape(body: &str) -> Vec<u64> {
    let reply: serde_json::Value = serde_json::from_str(body).expect("a JSON reply");
    reply["outputs"][0]["shape"]
        .as_array()
        .expect("a shape")
        .iter()
        .map(|d| d.as_u64().expect("a size"))
        .collect()
}

#[test]
fn weir_serve_decodes_a_drafted_jpeg_smaller_and_refuses_hostile_ones() {
    let graph = "name: drafts
inputs:
  - {name: picture, dtype: bytes, shape: [1]}
nodes:
  - decode_image: {id: decoded, input: picture, draft: {height: 32, width: 32}}
outputs:
  - {name: pixels, from: decoded}
"
    .to_string();
    let server = Server::start(&[graph], &[]);
    // 256 × 160 at 1/8 is 32 × 20, too low; at 1/4, 64 × 40.
    let (status, body) = post_picture(&server, &encoded(256, 160, ImageOutputFormat::Jpeg(90)));
    assert_eq!(status, 200, "{body}");
    assert_eq!(pixels_shape(&body), vec![40, 64, 3]);
    // A PNG is decoded whole.
    let (status, body) = post_picture(&server, &encoded(40, 30, ImageOutputFormat::Png));
    assert_eq!(status, 200, "{body}");
    assert_eq!(pixels_shape(&body), vec![30, 40, 3]);

    // Hostile: a baseline header declaring 60000 × 60000, and a JPEG cut short.
    let mut huge = encoded(64, 64, ImageOutputFormat::Jpeg(90));
    let sof = huge
        .windows(2)
        .position(|m| m == [0xFF, 0xC0])
        .expect("a baseline frame header");
    huge[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    let (status, body) = post_picture(&server, &huge);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("inputs.picture") && body.contains("max_pixels"),
        "{body}"
    );
    let mut cut = encoded(256, 160, ImageOutputFormat::Jpeg(90));
    cut.truncate(cut.len() / 3);
    let (status, body) = post_picture(&server, &cut);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("inputs.picture"), "{body}");

    // Still serving.
    let (status, body) = post_picture(&server, &encoded(256, 160, ImageOutputFormat::Jpeg(90)));
    assert_eq!(status, 200, "{body}");
    assert_eq!(pixels_shape(&body), vec![40, 64, 3]);
}
