#!/usr/bin/env python3
"""Writes the text_orientation task's model family and its validation set, for model-less
serving ("INFaaS: Automated Model-less Inference Serving", §3.3: one task served by several
architectures of different accuracy and cost). The task: is a cropped line of printed text
upright (class 0) or rotated 180 degrees (class 1)?

Every model has the signature of PaddleOCR's direction classifier (ch_ppocr_mobile_v2.0_cls,
unpacked by setup.sh from the rapidocr-onnxruntime wheel): input `x`[N,3,48,192] float, the
line image as PaddleOCR's cls preprocessing makes it (resized to height 48 keeping its aspect
ratio, at most 192 wide, (pixel/255 - 0.5)/0.5, then padded on the right with 0 to 192), and
output `save_infer_model/scale_0.tmp_1`[N,2], the two classes' probabilities:

  orientation_ppocr.onnx  the pretrained classifier itself, its input's height and width (dynamic
                        in the file) pinned to 48x192, weights untouched: the model repository
                        takes only fixed non-batch dimensions
  orientation_tiny.onnx   8x8 average pooling (6x24 cells), softmax regression: the cheap member
  orientation_conv.onnx   2x2 average pooling, 16 fixed seeded-random 5x5 filters (zero mean,
                        unit norm), ReLU, averaged over the line's width in bands of two rows,
                        then an MLP 160 -> 32 -> 2 trained on them: the middle member
  orientation_validation.jsonl  the held-out lines as the model repository's validation format:
                        {"inputs": {"x": [27648 floats]}, "label": k}, half of them rotated

The lines are drawn with Pillow's built-in font (scripts/setup.sh pins Pillow): one to five
common words or numbers, sizes 16 to 44 px, some bold (stroke 1), two thirds black on white and
the rest dark grey on light grey, cropped tight with a few pixels of margin; every other line is
rotated 180 degrees. 3,000 training lines and 200 held-out lines come from different seeds. The
trained members are fitted with seeded numpy SGD (make_digits_family.train), so re-running gives
the same files; each member's held-out accuracy (the PP-OCR classifier's too) is measured through
onnxruntime on the written file and printed. The validation file is about 38 MB.
Usage: make_orientation_family.py --pretrained PRETRAINED_DIR --out MODELS_DIR --data DATA_DIR
"""

import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_digits_family import train  # noqa: E402
from make_models import onnx_model, save  # noqa: E402

SEED_TRAIN_LINES = 8001
SEED_VALID_LINES = 8002
SEED_FILTERS = 8003
SEED_TINY = 8004
SEED_CONV = 8005
N_TRAIN = 3000
N_VALID = 200
H, W = 48, 192
INPUT = "x"
OUTPUT = "save_infer_model/scale_0.tmp_1"
PPOCR = "ch_ppocr_mobile_v2.0_cls_infer.onnx"
FILTERS, K = 16, 5

WORDS = """the of and to in is you that it he was for on are as with his they at be this have from
or one had by word but not what all were we when your can said there use an each which she do how
their if will up other about out many then them these so some her would make like him into time
has look two more write go see number no way could people my than first water been call who its
now find long down day did get come made may part open door price paid total room order ship
call thank good morning left right stop exit keep book page line street north south city""".split()


def line_text(rng):
    words = []
    for _ in range(int(rng.integers(1, 6))):
        r = rng.random()
        if r < 0.75:
            w = WORDS[int(rng.integers(len(WORDS)))]
        elif r < 0.95:
            w = str(int(rng.integers(0, 10000)))
        else:
            w = WORDS[int(rng.integers(len(WORDS)))].upper()
        words.append(w)
    text = " ".join(words)
    return text.capitalize() if rng.random() < 0.3 else text


FONTS = {}


def font(size):
    if size not in FONTS:
        FONTS[size] = ImageFont.load_default(size=size)
    return FONTS[size]


def render(rng, rotated):
    """One cropped text line (a grayscale Pillow image), rotated 180 degrees if `rotated`."""
    text = line_text(rng)
    size = int(rng.integers(16, 45))
    stroke = int(rng.random() < 0.25)
    # Mostly black on white (and short in the validation file); a third on grey paper or ink.
    ink, paper = (0, 255) if rng.random() < 0.67 else (int(rng.integers(0, 60)), int(rng.integers(215, 256)))
    f = font(size)
    x0, y0, x1, y1 = f.getbbox(text, stroke_width=stroke)
    left, top, right, bottom = (int(m) for m in rng.integers(1, max(2, size // 5), 4))
    image = Image.new("L", (x1 - x0 + left + right, y1 - y0 + top + bottom), paper)
    ImageDraw.Draw(image).text((left - x0, top - y0), text, fill=ink, font=f,
                               stroke_width=stroke, stroke_fill=ink)
    return image.rotate(180) if rotated else image


def preprocess(image):
    """PaddleOCR's cls resize: height 48, aspect kept, at most 192 wide. Returns the uint8
    pixels [48, 192] (0 right of the line) and the line's width."""
    w, h = image.size
    width = min(W, math.ceil(H * w / h))
    pixels = np.zeros((H, W), np.uint8)
    pixels[:, :width] = np.asarray(image.resize((width, H), Image.BILINEAR))
    return pixels, width


def lines(seed, n):
    """n lines, every other one rotated: uint8 pixels [n,48,192], widths [n], labels [n]."""
    rng = np.random.default_rng(seed)
    pixels, widths = np.zeros((n, H, W), np.uint8), np.zeros(n, np.int64)
    labels = np.arange(n) % 2
    for i in range(n):
        pixels[i], widths[i] = preprocess(render(rng, bool(labels[i])))
    return pixels, widths, labels


def normalised(pixels, widths):
    """One channel of the model's input: (pixel/255 - 0.5)/0.5, 0 right of each line."""
    x = (pixels.astype(np.float32) / 255.0 - 0.5) / 0.5
    x *= (np.arange(W)[None, None, :] < widths[:, None, None])
    return x


def pool(x, kh, kw):
    """kh x kw average pooling of [n, h, w], as ONNX's AveragePool with strides = kernel."""
    n, h, w = x.shape
    return x.reshape(n, h // kh, kh, w // kw, kw).mean(axis=(2, 4))


def conv_features(x, filters):
    """orientation_conv's fixed front: 2x2 pooling, valid 5x5 filters, ReLU, mean over the width
    and bands of two rows; [n, 16 * 10], in the order ONNX's Flatten gives."""
    p = pool(x, 2, 2)
    out = []
    for s in range(0, len(p), 256):
        win = np.lib.stride_tricks.sliding_window_view(p[s:s + 256], (K, K), axis=(1, 2))
        n, h, w = win.shape[:3]
        y = np.maximum(win.reshape(n * h * w, K * K) @ filters.reshape(FILTERS, K * K).T, 0)
        y = y.reshape(n, h, w, FILTERS).transpose(0, 3, 1, 2)
        out.append(y.reshape(n, FILTERS, h // 2, 2, w).mean(axis=(3, 4)).reshape(n, -1))
    return np.concatenate(out)


def fit(features, labels, widths, seed, epochs, lr):
    """Dense layers trained on the standardised features; the standardisation (mean, deviation of
    the training features) is folded into the first layer, so the model takes raw features."""
    mu, sd = features.mean(axis=0), features.std(axis=0) + 1e-3
    params = train(widths, (features - mu) / sd, labels, seed, epochs, lr=lr, batch=64, classes=2)
    w, b = params[0]
    params[0] = ((w / sd).astype(np.float32), (b - (w / sd) @ mu).astype(np.float32))
    return params


def io():
    x = helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["N", 3, H, W])
    y = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["N", 2])
    return [x], [y]


def head(params, prev, inits, nodes):
    """Gemm layers with ReLU between them and a softmax into the output."""
    for i, (w, b) in enumerate(params):
        inits += [numpy_helper.from_array(w.astype(np.float32), f"fc{i + 1}.weight"),
                  numpy_helper.from_array(b.astype(np.float32), f"fc{i + 1}.bias")]
        out = f"h{i + 1}"
        nodes.append(helper.make_node("Gemm", [prev, f"fc{i + 1}.weight", f"fc{i + 1}.bias"],
                                      [out], name=f"fc{i + 1}", transB=1))
        prev = out
        if i < len(params) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"a{i + 1}"], name=f"relu{i + 1}"))
            prev = f"a{i + 1}"
    nodes.append(helper.make_node("Softmax", [prev], [OUTPUT], name="softmax", axis=-1))


def per_channel(w, cells):
    """First-layer weights over one channel's cells -> over the 3 identical channels (/3 each)."""
    return np.concatenate([w.reshape(w.shape[0], cells) / 3.0] * 3, axis=1)


def tiny_model(params):
    (w, b), = params
    nodes = [helper.make_node("AveragePool", [INPUT], ["pooled"], name="pool",
                              kernel_shape=[8, 8], strides=[8, 8]),
             helper.make_node("Flatten", ["pooled"], ["cells"], name="flatten", axis=1)]
    inits = []
    head([(per_channel(w, 6 * 24), b)], "cells", inits, nodes)
    return onnx_model(nodes, "orientation_tiny", *io(), inits)


def conv_model(filters, params):
    nodes = [helper.make_node("AveragePool", [INPUT], ["pooled"], name="pool",
                              kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["pooled", "conv.weight"], ["conv"], name="conv",
                              kernel_shape=[K, K]),
             helper.make_node("Relu", ["conv"], ["conv_relu"], name="conv_relu"),
             helper.make_node("AveragePool", ["conv_relu"], ["bands"], name="bands",
                              kernel_shape=[2, 96 - K + 1], strides=[2, 96 - K + 1]),
             helper.make_node("Flatten", ["bands"], ["features"], name="flatten", axis=1)]
    weight = np.repeat(filters[:, None, :, :] / 3.0, 3, axis=1).astype(np.float32)
    inits = [numpy_helper.from_array(weight, "conv.weight")]
    head(params, "features", inits, nodes)
    return onnx_model(nodes, "orientation_conv", *io(), inits)


def ppocr_model(src):
    """The pretrained classifier with its input pinned to [N,3,48,192]; nothing else changes."""
    model = onnx.load(src)
    (x,) = [i for i in model.graph.input if i.name == INPUT]
    dims = x.type.tensor_type.shape.dim
    for d, n in zip(dims[2:], (H, W)):
        d.ClearField("dim_param")
        d.dim_value = n
    if [o.name for o in model.graph.output] != [OUTPUT]:
        sys.exit(f"{src}: expected the one output {OUTPUT}")
    return model


def accuracy(path, x, labels):
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    full = np.repeat(x[:, None], 3, axis=1)
    probs = np.concatenate([session.run(None, {INPUT: full[s:s + 64]})[0]
                            for s in range(0, len(full), 64)])
    return float((probs.argmax(axis=1) == labels).mean())


def write_validation(path, pixels, widths, labels):
    """Each value as the shortest text that reads back as the same float32."""
    level = (np.arange(256, dtype=np.float32) / np.float32(255.0) - np.float32(0.5)) / np.float32(0.5)
    text = [np.format_float_positional(v, unique=True, trim="-") for v in level]
    with open(path + ".tmp", "w") as f:
        for p, width, label in zip(pixels, widths, labels):
            rows = [",".join([text[v] for v in row[:width]] + ["0"] * (W - width)) for row in p]
            channel = ",".join(rows)
            f.write('{"inputs": {"x": [' + ",".join([channel] * 3) + f']}}, "label": {label}}}\n')
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pretrained", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", required=True)
    args = ap.parse_args()
    train_px, train_w, train_y = lines(SEED_TRAIN_LINES, N_TRAIN)
    valid_px, valid_w, valid_y = lines(SEED_VALID_LINES, N_VALID)
    train_x, valid_x = normalised(train_px, train_w), normalised(valid_px, valid_w)

    filters = np.random.default_rng(SEED_FILTERS).standard_normal((FILTERS, K, K))
    filters -= filters.mean(axis=(1, 2), keepdims=True)
    filters = (filters / np.sqrt((filters ** 2).sum(axis=(1, 2), keepdims=True))).astype(np.float32)
    members = [
        ("orientation_tiny", tiny_model(fit(pool(train_x, 8, 8).reshape(N_TRAIN, -1), train_y,
                                             (144, 2), SEED_TINY, 30, 0.05))),
        ("orientation_conv", conv_model(filters, fit(conv_features(train_x, filters), train_y,
                                                     (160, 32, 2), SEED_CONV, 20, 0.01))),
        ("orientation_ppocr", ppocr_model(os.path.join(args.pretrained, PPOCR))),
    ]
    for name, model in members:
        path = os.path.join(args.out, f"{name}.onnx")
        save(model, path)
        print(f"  {name}: held-out accuracy {accuracy(path, valid_x, valid_y):.4f}")
    os.makedirs(args.data, exist_ok=True)
    path = os.path.join(args.data, "orientation_validation.jsonl")
    write_validation(path, valid_px, valid_w, valid_y)
    print(f"  wrote {path} ({N_VALID} held-out lines, half rotated)")


if __name__ == "__main__":
    main()
