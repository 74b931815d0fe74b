#!/usr/bin/env bash
# Remote executor over zenoh against in-process (squeezenet), and SIGKILL → re-dispatch time.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
cargo build --release --quiet
WEIR_LOG=error ./target/release/weir bench remote --requests 300 --repeats 3 --kills 5 "$@"
