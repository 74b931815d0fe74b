#!/usr/bin/env bash
# weir serve over HTTP (JSON and binary bodies) against the in-process path and bare ONNX Runtime,
# at client concurrency 1, 4 and 16, all in one process. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
exec ./target/release/weir bench http --repeats "${REPEATS:-3}" "$@"
