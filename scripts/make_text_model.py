"""Builds weir's pretrained text model: a zero-shot topic classifier from WordLlama's token
embeddings (the `wordllama` PyPI wheel: a 32,000 × 256 float16 table and its Llama-2
`tokenizer.json`).

    make_text_model.py --wheel wordllama-<ver>.whl --out DIR

Writes into DIR:
  wordllama_tokenizer.json   the wheel's tokenizer, unchanged
  wordllama_topics.onnx      input_ids, attention_mask (int64 [N, seq]) -> scores (float [N, K])
  wordllama_topics.txt       the K topic names, one per line, in the order of `scores`

The model is WordLlama's sentence embedding (its `avg_pool`: the token vectors averaged over the
attention mask, a fully masked row dividing by 1) made unit length, then the cosine similarity
with each topic's embedding. A topic's embedding is computed here the same way from its
description, tokenized as weir's `tokenize` node does (special tokens added), so a graph
`tokenize -> model -> argmax -> labels` ranks the topics exactly as this script would. Masked
positions (padding) change nothing, so requests of different lengths can share a call padded with
mask 0. The table stays float16 in the file and is cast after the lookup, as WordLlama computes.
"""

import argparse
import json
import os
import struct
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

WEIGHTS = "wordllama/weights/l2_supercat_256.safetensors"
TOKENIZER = "wordllama/tokenizers/l2_supercat_tokenizer_config.json"

# Topic name, and the words its embedding is computed from.
TOPICS = [
    ("sports", "sports football soccer basketball tennis match team player goal"),
    ("weather", "weather rain snow storm sunny temperature forecast wind"),
    ("food", "food cooking recipe restaurant dinner meal delicious bread"),
    ("music", "music song band concert guitar album singer melody"),
    ("technology", "technology computer software internet smartphone programming code"),
    ("finance", "finance money bank stock market investment price economy"),
    ("health", "health doctor hospital medicine disease patient illness"),
    ("travel", "travel flight hotel vacation trip airport tourist beach"),
]


def read_table(blob):
    """The `embedding.weight` float16 matrix of a safetensors file's bytes."""
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    entry = header["embedding.weight"]
    assert entry["dtype"] == "F16", entry
    start, end = entry["data_offsets"]
    data = np.frombuffer(blob[8 + n + start : 8 + n + end], dtype="<f2")
    return data.reshape(entry["shape"])


def embed(table, tokenizer, text):
    """Unit-length mean of `text`'s token vectors (special tokens added, as `tokenize` does)."""
    ids = tokenizer.encode(text).ids
    v = table[ids].astype(np.float32).mean(axis=0)
    return v / np.linalg.norm(v)


def build(table, topics):
    """The ONNX graph: lookup, masked mean, unit length, cosine with each row of `topics`."""
    f = TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(topics.T.astype(np.float32).copy(), "topics"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis_last"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis_seq"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one"),
        numpy_helper.from_array(np.array(1e-12, dtype=np.float32), "tiny"),
    ]
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["tok16"], axis=0),
        helper.make_node("Cast", ["tok16"], ["tok"], to=f),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=f),
        helper.make_node("Unsqueeze", ["mask", "axis_last"], ["mask3"]),
        helper.make_node("Mul", ["tok", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis_seq"], ["total"], keepdims=0),
        helper.make_node("ReduceSum", ["mask", "axis_seq"], ["count"], keepdims=1),
        helper.make_node("Max", ["count", "one"], ["count1"]),
        helper.make_node("Div", ["total", "count1"], ["mean"]),
        helper.make_node("Mul", ["mean", "mean"], ["squares"]),
        helper.make_node("ReduceSum", ["squares", "axis_seq"], ["norm2"], keepdims=1),
        helper.make_node("Max", ["norm2", "tiny"], ["norm2_safe"]),
        helper.make_node("Sqrt", ["norm2_safe"], ["norm"]),
        helper.make_node("Div", ["mean", "norm"], ["unit"]),
        helper.make_node("MatMul", ["unit", "topics"], ["scores"]),
    ]
    graph = helper.make_graph(
        nodes,
        "wordllama_topics",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["N", "seq"]),
        ],
        [helper.make_tensor_value_info("scores", f, ["N", topics.shape[0]])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheel", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with zipfile.ZipFile(args.wheel) as z:
        table = read_table(z.read(WEIGHTS))
        tokenizer_bytes = z.read(TOKENIZER)
    tok_path = os.path.join(args.out, "wordllama_tokenizer.json")
    write(tok_path, tokenizer_bytes)
    tokenizer = Tokenizer.from_file(tok_path)
    topics = np.stack([embed(table, tokenizer, words) for _, words in TOPICS])
    model = build(np.ascontiguousarray(table), topics)
    write(os.path.join(args.out, "wordllama_topics.onnx"), model.SerializeToString())
    names = "".join(name + "\n" for name, _ in TOPICS)
    write(os.path.join(args.out, "wordllama_topics.txt"), names.encode())
    print(f"  wrote wordllama_topics.onnx ({len(TOPICS)} topics), its tokenizer and names")


if __name__ == "__main__":
    main()
