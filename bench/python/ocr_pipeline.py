#!/usr/bin/env python3
"""graphs/ocr.yaml's pipeline written the way a Python team would: Pillow, numpy, onnxruntime.

The reference the OCR benchmark (`weir-bench pipeline`) and test (tests/it/ocr.rs) compare
`weir serve` with. Same models, same steps, same settings as the graph:

1. Pillow decodes the PNG or JPEG (RGB) and resizes it to 640x640 (BILINEAR); numpy
   normalises it to (x - 127.5) / 127.5, channels first.
2. The PP-OCRv4 detector gives a per-pixel text probability; its DB post-processing is the
   `regions` node's: bitmap p > 0.3, 8-connected components, each component's axis-aligned
   rectangle, scored by the mean probability over the component's pixels; rectangles whose
   shorter side is under 3 or whose score is under 0.5 dropped; each kept one grown by
   d = area * 1.6 / perimeter on every side, clamped; best score first (ties top-to-bottom,
   left-to-right), at most 64; as fractions of the map's size.
3. Each box, scaled to the full-resolution image and rounded outwards, is cut out and
   resized (BILINEAR) to 48x320 for the recogniser and 48x192 for the orientation
   classifier; all the lines of one image go through each model as one batch.
4. Greedy CTC decoding with the key file: per step the best class, repeats collapsed,
   blank (class 0) dropped; the confidence is the mean best score of the kept steps.

Connected components are labelled on runs (a row's maximal stretches of set pixels) with a
union-find over touching runs of adjacent rows: numpy finds the runs, Python only loops
over them, which is how one does it without scipy or OpenCV.

Library: `Pipeline(models_dir, keys, angles).ocr(png_bytes)` -> a list of lines, each a
dict with text, confidence, angle and box (pixels: x1, y1, x2, y2).

Command line:
  ocr_pipeline.py FILE...                        prints each file's lines as JSON
  ocr_pipeline.py --bench DIR --clients C --seconds S
      C threads each call `ocr` in a loop over DIR's PNG files for S seconds (the ONNX
      Runtime sessions shared, one intra-op thread each); prints one JSON object with the
      images per second, the p50 and p99 latency per image in milliseconds and the process's
      CPU time per image in milliseconds (user + system over the measurement, all threads).
  ocr_pipeline.py --models-alone DIR --clients C --seconds S
      The physical limit of both pipelines: the three models alone, run back to back on each
      page's own inputs (made once beforehand by this pipeline: the detector's 640x640 input,
      the recogniser's and classifier's batches of that page's lines), by C threads over the
      same shared sessions; prints the same JSON object.
"""

import argparse
import io
import json
import os
import resource
import sys
import threading
import time

import numpy as np
import onnxruntime as ort
from PIL import Image

DET_SIZE = 640
REC_SHAPE = (48, 320)
CLS_SHAPE = (48, 192)
THRESHOLD = 0.3
MIN_SCORE = 0.5
EXPAND = 1.6
MIN_SIZE = 3
MAX_REGIONS = 64

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def normalise_chw(pixels):
    """u8 HWC (or NHWC) pixels -> f32 (x - 127.5) / 127.5, channels first."""
    x = (pixels.astype(np.float32) - 127.5) / 127.5
    return np.ascontiguousarray(np.moveaxis(x, -1, -3))


def runs_of(bitmap):
    """Each row's maximal runs of set pixels: arrays row, start, end (exclusive), row-major."""
    padded = np.zeros((bitmap.shape[0], bitmap.shape[1] + 2), dtype=np.int8)
    padded[:, 1:-1] = bitmap
    step = np.diff(padded, axis=1)
    rows, starts = np.nonzero(step == 1)
    _, ends = np.nonzero(step == -1)
    return rows, starts, ends


def find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def regions(prob):
    """DB post-processing of a [H, W] probability map: (boxes as fractions, scores)."""
    height, width = prob.shape
    rows, starts, ends = runs_of(prob > THRESHOLD)
    n = len(rows)
    if n == 0:
        return [], []
    sums = np.concatenate([np.zeros((height, 1), np.float64), np.cumsum(prob, axis=1, dtype=np.float64)], axis=1)
    run_sums = sums[rows, ends] - sums[rows, starts]
    rows, starts, ends = rows.tolist(), starts.tolist(), ends.tolist()
    parent = list(range(n))
    # Runs of one row are contiguous in row-major order: index where each row's runs begin.
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(r, i)
    for i in range(n):
        j = first.get(rows[i] + 1)
        if j is None:
            continue
        while j < n and rows[j] == rows[i] + 1 and starts[j] <= ends[i]:
            # 8-connected: the runs touch or meet at a corner.
            if ends[j] >= starts[i]:
                a, b = find(parent, i), find(parent, j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            j += 1
    comps = {}
    for i in range(n):
        root = find(parent, i)
        c = comps.get(root)
        if c is None:
            comps[root] = [starts[i], rows[i], ends[i], rows[i] + 1, ends[i] - starts[i], run_sums[i]]
        else:
            c[0] = min(c[0], starts[i])
            c[1] = min(c[1], rows[i])
            c[2] = max(c[2], ends[i])
            c[3] = max(c[3], rows[i] + 1)
            c[4] += ends[i] - starts[i]
            c[5] += run_sums[i]
    found = []
    for x1, y1, x2, y2, pixels, total in comps.values():
        w, h = x2 - x1, y2 - y1
        score = total / pixels
        if min(w, h) < MIN_SIZE or score < MIN_SCORE:
            continue
        d = w * h * EXPAND / (2 * (w + h)) if EXPAND > 0 else 0.0
        box = (max(x1 - d, 0.0), max(y1 - d, 0.0), min(x2 + d, width), min(y2 + d, height))
        found.append((-score, y1, x1, box, score))
    found.sort(key=lambda f: f[:3])
    found = found[:MAX_REGIONS]
    boxes = [[b[0] / width, b[1] / height, b[2] / width, b[3] / height] for _, _, _, b, _ in found]
    return boxes, [f[4] for f in found]


def ctc_greedy(scores, keys):
    """One line's [T, C] class scores -> (text, confidence)."""
    best = scores.argmax(axis=1)
    top = scores.max(axis=1)
    keep = np.ones(len(best), dtype=bool)
    keep[1:] = best[1:] != best[:-1]
    keep &= best != 0
    text = "".join(keys[i] for i in best[keep])
    confidence = float(top[keep].mean()) if keep.any() else 0.0
    return text, confidence


class Pipeline:
    """The OCR pipeline over shared ONNX Runtime sessions (thread-safe: `run` is)."""

    def __init__(self, models_dir, keys_path, angles_path, intra_op_threads=1):
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1

        def session(name):
            return ort.InferenceSession(
                os.path.join(models_dir, name), options, providers=["CPUExecutionProvider"]
            )

        self.det = session("ch_PP-OCRv4_det_infer.onnx")
        self.rec = session("ch_PP-OCRv4_rec_infer.onnx")
        self.cls = session("ch_ppocr_mobile_v2.0_cls_infer.onnx")
        with open(keys_path, encoding="utf-8") as f:
            self.keys = f.read().split("\n")[:-1]
        with open(angles_path, encoding="utf-8") as f:
            self.angles = f.read().split()

    def model_inputs(self, image_bytes):
        """The three models' inputs for one image, as `ocr` makes them: (detector's, the
        recogniser's batch, the classifier's batch); the last two None without a line."""
        image = Image.open(io.BytesIO(image_bytes)).convert("RGB")
        det_in = normalise_chw(np.asarray(image.resize((DET_SIZE, DET_SIZE), Image.BILINEAR)))[None]
        prob = self.det.run(None, {"x": det_in})[0][0, 0]
        crops = [image.crop(b) for b in self.pixel_boxes(prob, image.size)]
        if not crops:
            return det_in, None, None
        rec_in = np.stack([np.asarray(c.resize(REC_SHAPE[::-1], Image.BILINEAR)) for c in crops])
        cls_in = np.stack([np.asarray(c.resize(CLS_SHAPE[::-1], Image.BILINEAR)) for c in crops])
        return det_in, normalise_chw(rec_in), normalise_chw(cls_in)

    @staticmethod
    def pixel_boxes(prob, size):
        """The detector's regions as whole-pixel boxes of an image of `size` (width, height)."""
        width, height = size
        boxes, _ = regions(prob)
        pixel_boxes = []
        for x1, y1, x2, y2 in boxes:
            b = (
                min(max(int(np.floor(x1 * width)), 0), width),
                min(max(int(np.floor(y1 * height)), 0), height),
                min(max(int(np.ceil(x2 * width)), 0), width),
                min(max(int(np.ceil(y2 * height)), 0), height),
            )
            if b[2] > b[0] and b[3] > b[1]:
                pixel_boxes.append(b)
        return pixel_boxes

    def ocr(self, image_bytes):
        """Every text line of one encoded image, best score first."""
        image = Image.open(io.BytesIO(image_bytes)).convert("RGB")
        width, height = image.size
        small = np.asarray(image.resize((DET_SIZE, DET_SIZE), Image.BILINEAR))
        prob = self.det.run(None, {"x": normalise_chw(small)[None]})[0][0, 0]
        pixel_boxes = self.pixel_boxes(prob, (width, height))
        if not pixel_boxes:
            return []
        crops = [image.crop(b) for b in pixel_boxes]
        rec_in = np.stack([np.asarray(c.resize(REC_SHAPE[::-1], Image.BILINEAR)) for c in crops])
        cls_in = np.stack([np.asarray(c.resize(CLS_SHAPE[::-1], Image.BILINEAR)) for c in crops])
        rec_out = self.rec.run(None, {"x": normalise_chw(rec_in)})[0]
        cls_out = self.cls.run(None, {"x": normalise_chw(cls_in)})[0]
        lines = []
        for i, b in enumerate(pixel_boxes):
            text, confidence = ctc_greedy(rec_out[i], self.keys)
            angle = self.angles[int(cls_out[i].argmax())]
            lines.append({"text": text, "confidence": confidence, "angle": angle, "box": list(b)})
        return lines


def default_pipeline(intra_op_threads=1):
    home = os.environ.get("WEIR_HOME", os.path.join(REPO, ".weir"))
    pretrained = os.path.join(home, "models", "pretrained")
    return Pipeline(
        pretrained,
        os.path.join(pretrained, "ppocr_keys.txt"),
        os.path.join(REPO, "graphs", "ocr_angles.txt"),
        intra_op_threads,
    )


def pages(directory):
    images = [
        open(os.path.join(directory, name), "rb").read()
        for name in sorted(os.listdir(directory))
        if name.endswith(".png")
    ]
    if not images:
        sys.exit(f"no PNG files in {directory}")
    return images


def models_alone(pipeline, directory):
    """Per page, a call running the three models back to back on that page's own inputs."""
    calls = []
    for image in pages(directory):
        inputs = pipeline.model_inputs(image)

        def call(inputs=inputs):
            det_in, rec_in, cls_in = inputs
            pipeline.det.run(None, {"x": det_in})
            if rec_in is not None:
                pipeline.rec.run(None, {"x": rec_in})
                pipeline.cls.run(None, {"x": cls_in})

        calls.append(call)
    return calls


def bench(pipeline, directory, clients, seconds, only_models=False):
    """`clients` threads calling `ocr` (or, `only_models`, the models alone) in a closed loop
    for `seconds`: throughput, latency and CPU time per image."""
    if only_models:
        work = models_alone(pipeline, directory)
    else:
        work = [lambda image=image: pipeline.ocr(image) for image in pages(directory)]
    for call in work:  # warm every session and size once
        call()
    images = work
    latencies = [[] for _ in range(clients)]
    stop = time.perf_counter() + seconds
    errors = []

    def client(k):
        i = k
        try:
            while time.perf_counter() < stop:
                t = time.perf_counter()
                images[i % len(images)]()
                latencies[k].append(time.perf_counter() - t)
                i += 1
        except Exception as e:  # reported, not swallowed: the run is then invalid
            errors.append(repr(e))

    started = time.perf_counter()
    cpu = time.process_time()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    if errors:
        sys.exit(f"OCR failed: {errors[0]}")
    all_ms = np.array(sorted(x for l in latencies for x in l)) * 1e3
    return {
        "clients": clients,
        "images": int(len(all_ms)),
        "seconds": elapsed,
        "throughput": len(all_ms) / elapsed,
        "p50_ms": float(np.quantile(all_ms, 0.5)),
        "p99_ms": float(np.quantile(all_ms, 0.99)),
        "cpu_ms_per_image": cpu * 1e3 / max(len(all_ms), 1),
        "minor_faults_per_image": faults / max(len(all_ms), 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--bench", metavar="DIR")
    parser.add_argument("--models-alone", metavar="DIR")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    pipeline = default_pipeline()
    if args.bench or args.models_alone:
        only_models = args.models_alone is not None
        directory = args.models_alone if only_models else args.bench
        print(json.dumps(bench(pipeline, directory, max(args.clients, 1), args.seconds, only_models)))
        return
    out = {}
    for name in args.files:
        with open(name, "rb") as f:
            out[name] = pipeline.ocr(f.read())
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
