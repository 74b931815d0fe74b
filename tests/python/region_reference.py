#!/usr/bin/env python3
"""numpy's answer for weir's region and window nodes: the reference tests/it/region_ops.rs
compares served outputs with.

    region_reference.py < request.json > reply.json

The request is {"op": OP, "params": {...}, "inputs": [TENSOR]} with TENSOR in the Open Inference
Protocol JSON form ({"name", "datatype", "shape", "data"} with flat row-major data); the reply is
{"outputs": [TENSOR, ...]} in the same form.

    regions  params threshold, min_score, expand, min_size, max_regions; FP32 [H, W] or [1, H, W]
             -> "boxes" FP32 [n, 4] (x1, y1, x2, y2 normalised), "scores" FP32 [n]
    crop     params top, left, height, width, center -> "output"
    pad      params shape (-1 keeps a dimension), value -> "output"
    slice    params axis, start, end (null: the end), step -> "output" (x[start:end:step])

The region finder is written independently of weir's: components come from a two-pass labelling
with a union-find over equivalent labels (weir uses a flood fill), and every statistic is taken
with numpy over the component's mask.
"""

import json
import sys

import numpy as np

DTYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP32": np.float32,
    "FP64": np.float64,
}
NAMES = {np.dtype(t): name for name, t in DTYPES.items()}


def read(tensor):
    dtype = DTYPES[tensor["datatype"]]
    return np.array(tensor["data"], dtype=dtype).reshape(tensor["shape"])


def write(name, array):
    array = np.ascontiguousarray(array)
    data = array.reshape(-1).tolist()
    return {"name": name, "datatype": NAMES[array.dtype], "shape": list(array.shape), "data": data}


def label(mask):
    """8-connected component labels of `mask` (0 = background), by two passes and union-find."""
    h, w = mask.shape
    labels = np.zeros((h, w), dtype=np.int64)
    parent = [0]

    def root(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for y in range(h):
        for x in range(w):
            if not mask[y, x]:
                continue
            near = []
            for dy, dx in ((-1, -1), (-1, 0), (-1, 1), (0, -1)):
                ny, nx = y + dy, x + dx
                if 0 <= ny and 0 <= nx < w and labels[ny, nx]:
                    near.append(root(labels[ny, nx]))
            if not near:
                parent.append(len(parent))
                labels[y, x] = len(parent) - 1
            else:
                low = min(near)
                labels[y, x] = low
                for n in near:
                    parent[n] = low
    flat = np.array([root(a) for a in range(len(parent))])
    return flat[labels]


def regions(p, threshold, min_score, expand, min_size, max_regions):
    if p.ndim == 3:
        p = p[0]
    h, w = p.shape
    labels = label(p.astype(np.float64) > threshold)
    found = []
    for lab in np.unique(labels):
        if lab == 0:
            continue
        ys, xs = np.nonzero(labels == lab)
        x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
        bw, bh = x1 - x0, y1 - y0
        score = p[ys, xs].astype(np.float64).mean()
        if min(bw, bh) < min_size or score < min_score:
            continue
        d = bw * bh * expand / (2.0 * (bw + bh))
        box = [
            np.clip(x0 - d, 0, w) / w,
            np.clip(y0 - d, 0, h) / h,
            np.clip(x1 + d, 0, w) / w,
            np.clip(y1 + d, 0, h) / h,
        ]
        found.append((-score, y0, x0, box, score))
    found.sort(key=lambda f: f[:3])
    found = found[:max_regions]
    boxes = np.array([f[3] for f in found], dtype=np.float32).reshape(-1, 4)
    scores = np.array([f[4] for f in found], dtype=np.float32)
    return [write("boxes", boxes), write("scores", scores)]


def crop(x, top, left, height, width, center):
    if center:
        top, left = (x.shape[0] - height) // 2, (x.shape[1] - width) // 2
    assert top >= 0 and left >= 0 and top + height <= x.shape[0] and left + width <= x.shape[1]
    return [write("output", x[top : top + height, left : left + width])]


def pad(x, shape, value):
    target = [n if t == -1 else t for n, t in zip(x.shape, shape)]
    widths = [(0, t - n) for n, t in zip(x.shape, target)]
    return [write("output", np.pad(x, widths, constant_values=np.array(value).astype(x.dtype)))]


def slice_(x, axis, start, end, step):
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, end, step)
    return [write("output", x[tuple(index)])]


OPS = {"regions": regions, "crop": crop, "pad": pad, "slice": slice_}


def main():
    request = json.load(sys.stdin)
    x = read(request["inputs"][0])
    outputs = OPS[request["op"]](x, **request["params"])
    json.dump({"outputs": outputs}, sys.stdout)


if __name__ == "__main__":
    main()
