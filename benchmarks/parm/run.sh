#!/usr/bin/env bash
# ParM tail latency: a replica whose host hiccups (SIGSTOP 100 ms every second), with and without
# parity coding, against the equal-resources baseline.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
WEIR_LOG=error ./target/release/weir bench parm --requests 800 "$@"
