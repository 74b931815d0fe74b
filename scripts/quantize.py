#!/usr/bin/env python3
"""Quantises an ONNX model's weights to int8 with ONNX Runtime's own tool
(onnxruntime.quantization.quantize_dynamic): `weir model register` runs it to make a model's
int8 variants ("INFaaS: Automated Model-less Inference Serving", §3.3: an automatic quantiser
as a variant generator).

Usage: quantize.py IN.onnx OUT.onnx
"""

import sys

from onnxruntime.quantization import QuantType, quantize_dynamic


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=QuantType.QInt8)


if __name__ == "__main__":
    main()
