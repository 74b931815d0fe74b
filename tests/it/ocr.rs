//! The OCR service graph (`graphs/ocr.yaml`) end to end through `weir serve`: the rendered text
//! pages of `scripts/make_text_images.py` posted as PNG bytes in the Open Inference Protocol's
//! binary extension, the lines read compared with the pages' truth and with the same pipeline in
//! Python (`bench/python/ocr_pipeline.py`), and bad images refused without stopping the server.
//!
//! The reading rule. The recogniser sees each line stretched to 48×320 (the graph keeps no aspect
//! ratio), so a short line is widened up to three times, and PP-OCRv4's recogniser then sometimes
//! reads one character wrongly (`o` as `0`) or drops a space. So: every image yields exactly its
//! number of lines, every line is read within one character edit of its truth (after trimming),
//! and at least [`EXACT_SHARE`] of all lines are read exactly. The Python pipeline resizes with
//! Pillow (antialiased) where weir resizes without, so the two see slightly different pixels: the
//! same number of lines per image, and at least [`EXACT_SHARE`] of the lines with the same text.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common::{repo, weir_home};
use crate::serve::Server;

const INFER: &str = "/v2/models/ocr/infer";

/// Share of lines that must be read exactly (and the same in Python).
const EXACT_SHARE: f64 = 0.9;

/// `graphs/ocr.yaml` with its file paths made absolute (the server reads a copy elsewhere).
fn graph() -> String {
    let text = std::fs::read_to_string(repo().join("graphs/ocr.yaml")).expect("the graph file");
    text.replace("../.weir", &weir_home().display().to_string())
        .replace(
            "labels: ocr_angles.txt",
            &format!("labels: {}", repo().join("graphs/ocr_angles.txt").display()),
        )
}

fn images() -> PathBuf {
    weir_home().join("data/text_images")
}

/// The pages' truth: file name, width, height, lines, and each line's drawn box.
struct Page {
    name: String,
    size: [f32; 2],
    lines: Vec<String>,
    boxes: Vec<[f32; 4]>,
}

fn pages() -> Vec<Page> {
    let text = std::fs::read_to_string(images().join("truth.json")).expect("truth.json");
    let truth: Value = serde_json::from_str(&text).expect("truth is JSON");
    let mut pages: Vec<Page> = truth
        .as_object()
        .expect("an object")
        .iter()
        .map(|(name, page)| Page {
            name: name.clone(),
            size: [page["width"].as_f64(), page["height"].as_f64()]
                .map(|v| v.expect("a size") as f32),
            lines: page["lines"]
                .as_array()
                .expect("lines")
                .iter()
                .map(|l| l.as_str().expect("a line").to_string())
                .collect(),
            boxes: page["boxes"]
                .as_array()
                .expect("boxes")
                .iter()
                .map(|b| {
                    let v: Vec<f32> = b
                        .as_array()
                        .expect("a box")
                        .iter()
                        .map(|x| x.as_f64().expect("a coordinate") as f32)
                        .collect();
                    [v[0], v[1], v[2], v[3]]
                })
                .collect(),
        })
        .collect();
    pages.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(pages.len() >= 10, "expected the rendered pages");
    pages
}

/// One line read: text, confidence, orientation and pixel box.
#[derive(Debug)]
struct Line {
    text: String,
    confidence: f32,
    angle: String,
    bounds: [f32; 4],
}

/// Posts `image` as the graph's BYTES input in the binary extension; returns the status and body.
fn post_image(server: &Server, image: &[u8]) -> (u16, String) {
    server.post_bytes_element(INFER, "image", image)
}

/// The reply's output `name`: its shape and data.
fn output<'a>(reply: &'a Value, name: &str) -> (Vec<u64>, &'a Vec<Value>) {
    let o = reply["outputs"]
        .as_array()
        .expect("outputs")
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no output `{name}` in {reply}"));
    let shape = o["shape"]
        .as_array()
        .expect("a shape")
        .iter()
        .map(|d| d.as_u64().expect("a size"))
        .collect();
    (shape, o["data"].as_array().expect("data"))
}

/// The lines of a served reply, checking the outputs agree on their count.
fn lines_of(reply: &Value) -> Vec<Line> {
    let (count_shape, count) = output(reply, "lines");
    assert!(
        count_shape.is_empty(),
        "`lines` is a scalar: {count_shape:?}"
    );
    let n = count[0].as_u64().expect("a count") as usize;
    let (text_shape, text) = output(reply, "text");
    let (_, confidence) = output(reply, "confidence");
    let (_, angle) = output(reply, "angle");
    let (box_shape, bounds) = output(reply, "box");
    assert_eq!(text_shape, vec![n as u64], "one text per line");
    assert_eq!(box_shape, vec![n as u64, 4], "one box per line");
    assert_eq!((confidence.len(), angle.len()), (n, n));
    let f = |v: &Value| v.as_f64().expect("a number") as f32;
    (0..n)
        .map(|i| Line {
            text: text[i].as_str().expect("UTF-8 text").to_string(),
            confidence: f(&confidence[i]),
            angle: angle[i].as_str().expect("an angle").to_string(),
            bounds: [0, 1, 2, 3].map(|k| f(&bounds[4 * i + k])),
        })
        .collect()
}

/// Edit distance (insertions, deletions, substitutions) between two strings, by characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// For each truth line, the read line closest to it (by edits of the trimmed text).
fn closest<'a>(page: &Page, read: &'a [Line]) -> Vec<(usize, &'a Line)> {
    page.lines
        .iter()
        .map(|want| {
            read.iter()
                .map(|l| (edits(l.text.trim(), want), l))
                .min_by_key(|(e, _)| *e)
                .unwrap_or_else(|| panic!("{}: nothing read", page.name))
        })
        .collect()
}

/// The Python pipeline's lines of every page, by file name.
fn python_lines(pages: &[Page]) -> Value {
    let out = Command::new(weir_home().join("venv/bin/python"))
        .arg(repo().join("bench/python/ocr_pipeline.py"))
        .args(pages.iter().map(|p| images().join(&p.name)))
        .output()
        .expect("the venv's python runs");
    assert!(
        out.status.success(),
        "ocr_pipeline.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("its output is JSON")
}

#[test]
fn the_ocr_graph_reads_every_rendered_page_as_python_does() {
    let server = Server::start(&[graph()], &[]);
    let pages = pages();
    let python = python_lines(&pages);
    let (mut total, mut exact, mut same_as_python) = (0usize, 0usize, 0usize);
    for page in &pages {
        let png = std::fs::read(images().join(&page.name)).expect("the page");
        let (status, body) = post_image(&server, &png);
        assert_eq!(status, 200, "{}: {body}", page.name);
        let reply: Value = serde_json::from_str(&body).expect("a JSON reply");
        let read = lines_of(&reply);
        let texts: Vec<&str> = read.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(
            read.len(),
            page.lines.len(),
            "{}: read {texts:?}",
            page.name
        );
        for line in &read {
            let [x1, y1, x2, y2] = line.bounds;
            assert!(
                0.0 <= x1
                    && x1 < x2
                    && x2 <= page.size[0]
                    && 0.0 <= y1
                    && y1 < y2
                    && y2 <= page.size[1],
                "{}: box {:?} outside the {:?} image",
                page.name,
                line.bounds,
                page.size
            );
            assert!(line.angle == "0" || line.angle == "180", "{line:?}");
            assert!(line.confidence > 0.5 && line.confidence <= 1.0, "{line:?}");
        }
        for (i, (distance, line)) in closest(page, &read).into_iter().enumerate() {
            let want = &page.lines[i];
            assert!(distance <= 1, "{}: `{want}` read as {texts:?}", page.name);
            exact += usize::from(distance == 0);
            total += 1;
            // The line's box holds the centre of where it was drawn.
            let [x1, y1, x2, y2] = page.boxes[i];
            let (cx, cy) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
            let b = line.bounds;
            assert!(
                b[0] <= cx && cx <= b[2] && b[1] <= cy && cy <= b[3],
                "{}: `{want}` drawn around ({cx}, {cy}), read in {b:?}",
                page.name
            );
        }
        let key = images().join(&page.name).display().to_string();
        let theirs: Vec<&str> = python[&key]
            .as_array()
            .expect("Python's lines")
            .iter()
            .map(|l| l["text"].as_str().expect("text"))
            .collect();
        assert_eq!(
            theirs.len(),
            read.len(),
            "{}: Python read {theirs:?}, weir {texts:?}",
            page.name
        );
        same_as_python += texts
            .iter()
            .filter(|t| theirs.iter().any(|p| p.trim() == t.trim()))
            .count();
    }
    let need = (EXACT_SHARE * total as f64).ceil() as usize;
    assert!(exact >= need, "{exact} of {total} lines read exactly");
    assert!(
        same_as_python >= need,
        "{same_as_python} of {total} lines read as Python reads them"
    );
}

/// `png` with its header declaring `width` × `height` (the IHDR chunk's CRC recomputed).
fn declaring(png: &[u8], width: u32, height: u32) -> Vec<u8> {
    let mut out = png.to_vec();
    // Signature (8), chunk length (4), "IHDR" (4), then width and height, big-endian.
    out[16..20].copy_from_slice(&width.to_be_bytes());
    out[20..24].copy_from_slice(&height.to_be_bytes());
    let mut crc = flate2::Crc::new();
    crc.update(&out[12..29]);
    out[29..33].copy_from_slice(&crc.sum().to_be_bytes());
    out
}

#[test]
fn corrupt_and_oversized_images_are_refused_and_the_server_keeps_reading() {
    let server = Server::start(&[graph()], &[]);
    let png = std::fs::read(images().join("text_00.png")).expect("a page");
    let mut corrupt = png.clone();
    corrupt.truncate(png.len() / 2);
    let (status, body) = post_image(&server, &corrupt);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("inputs.image") && body.contains("corrupt"),
        "{body}"
    );
    let (status, body) = post_image(&server, &declaring(&png, 40_000, 40_000));
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("inputs.image") && body.contains("max_pixels"),
        "{body}"
    );
    let (status, body) = post_image(&server, &png);
    assert_eq!(status, 200, "{body}");
    let read = lines_of(&serde_json::from_str(&body).expect("a JSON reply"));
    assert_eq!(read.len(), 1, "{read:?}");
    assert_eq!(read[0].text.trim(), "hello world");
}
