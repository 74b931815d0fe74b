"""Reference answers for weir's text nodes, from the libraries people use.

Reads one JSON request on stdin and writes one JSON reply on stdout. The request's "op" says
which:

  encode: {"tokenizer": path, "texts": [str]} -> {"ids": [[int]], "mask": [[int]]}
      the Hugging Face `tokenizers` package's Tokenizer.from_file(path).encode(text)
  decode: {"tokenizer": path, "ids": [[int]], "skip_special_tokens": bool} -> {"texts": [str]}
      the same package's Tokenizer.decode
  ctc: {"scores": [[[float]]], "labels": path, "blank": int} -> {"texts": [str], "confidences": [float]}
      greedy CTC decoding with numpy, each request's [T, C] scores on their own: argmax per
      step, repeats collapsed, blank dropped, mean of the kept steps' maxima (0 when none)
"""

import json
import sys

import numpy as np


def encode(req):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(req["tokenizer"])
    out = [tok.encode(t) for t in req["texts"]]
    return {"ids": [e.ids for e in out], "mask": [e.attention_mask for e in out]}


def decode(req):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(req["tokenizer"])
    skip = req["skip_special_tokens"]
    return {"texts": [tok.decode(ids, skip_special_tokens=skip) for ids in req["ids"]]}


def ctc(req):
    with open(req["labels"], encoding="utf-8") as f:
        names = f.read().split("\n")
    blank = req["blank"]
    texts, confidences = [], []
    for scores in req["scores"]:
        if len(scores) == 0:
            texts.append("")
            confidences.append(0.0)
            continue
        x = np.asarray(scores, dtype=np.float32)
        best = x.argmax(axis=1)
        top = x.max(axis=1)
        keep = np.ones(len(best), dtype=bool)
        keep[1:] = best[1:] != best[:-1]
        keep &= best != blank
        texts.append("".join(names[i] for i in best[keep]))
        confidences.append(float(top[keep].mean()) if keep.any() else 0.0)
    return {"texts": texts, "confidences": confidences}


def main():
    req = json.load(sys.stdin)
    reply = {"encode": encode, "decode": decode, "ctc": ctc}[req["op"]](req)
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
