#!/usr/bin/env bash
# weir's in-process path against bare ONNX Runtime, same process, same library and settings.
# Prints a Markdown table; copy it into benchmarks/README.md with the machine it ran on.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
exec ./target/release/weir bench overhead --repeats "${REPEATS:-5}" "$@"
