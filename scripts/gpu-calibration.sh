#!/usr/bin/env bash
# Calibration of the cost model on a GPU: predicted against measured per-op
# forward/backward times of the real-size model families.
#
#   scripts/gpu-calibration.sh [--out DIR] [--models-dir DIR] [--models "resnet50 gpt2 ..."]
#                              [--target NAME] [--micro-batch N] [--repeat R] [--tf32]
#                              [--budget SECONDS] [--compare-only] [--cpu-smoke]
#
# 1. exports the real-size models (python/scripts/export_models.py --size real)
#    into --models-dir (default: a temporary directory; existing files are reused),
# 2. measures each on the GPU (python/scripts/measure_node_times.py --device cuda)
#    into DIR/<model>.times.json,
# 3. compares with the cost model (python/scripts/compare_cost_model.py) and
#    prints Markdown tables, also written to DIR/calibration.md.
# Models still waiting when --budget seconds have passed are skipped (default
# 420: it fits a 10-minute slot). The target is detected with nvidia-smi
# (H200 -> h200, H100 -> h100, ...), default h100.
#
# Step 3 needs a runnable pipe-opt (PIPE_OPT, or build/bin/pipe-opt). Without
# one the script stops after step 2; copy DIR back and run
#   scripts/gpu-calibration.sh --compare-only --out DIR
# where pipe-opt runs (it re-exports the models: the exports are deterministic).
# --cpu-smoke runs the whole chain on the CPU on the tiny committed fixtures
# (micro-batch 2, one run per op) to check the tooling, not the model.
# PYTHON selects the interpreter (default python3); it needs torch and onnx.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

PYTHON=${PYTHON:-python3}
# The scripts import the pipe_opt package from the checkout.
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
OUT=""
MODELS_DIR=""
MODELS="resnet50 gpt2 bert mobilenet_v2 densenet121 inception_v3 vgg16"
TARGET=""
MICRO_BATCH=8
REPEAT=5
PRECISION=fp32
BUDGET=420
COMPARE_ONLY=0
DEVICE=cuda

die() { echo "gpu-calibration: error: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --models-dir) MODELS_DIR=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --micro-batch) MICRO_BATCH=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --tf32) PRECISION=tf32; shift ;;
    --budget) BUDGET=$2; shift 2 ;;
    --compare-only) COMPARE_ONLY=1; shift ;;
    --cpu-smoke) DEVICE=cpu; MODELS_DIR=test/Fixtures/models; MICRO_BATCH=2; REPEAT=1; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

"$PYTHON" -c "import torch, onnx" 2>/dev/null ||
  die "'$PYTHON' cannot import torch and onnx (set PYTHON=...)"

if [ "$COMPARE_ONLY" = 0 ] && [ "$DEVICE" = cuda ]; then
  # A CUDA device is required for the measurement.
  if ! "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    gpus=$(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | head -3)
    die "no CUDA device visible to torch ($("$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'))${gpus:+; nvidia-smi: $gpus}. Run this on a GPU machine, or use --compare-only on existing measurements."
  fi
fi

# Target: the GPU's name, mapped to a built-in target.
gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
fi
if [ -z "$TARGET" ]; then
  case "$gpu_name" in
    *H200*) TARGET=h200 ;;
    *H100*PCIe*) TARGET=h100-pcie ;;
    *H100*) TARGET=h100 ;;
    *A100*40GB*) TARGET=a100-40gb ;;
    *A100*) TARGET=a100 ;;
    *L40S*) TARGET=l40s ;;
    *L4*) TARGET=l4 ;;
    *4090*) TARGET=rtx4090 ;;
    *V100*) TARGET=v100 ;;
    *) TARGET=h100 ;;
  esac
fi

[ -n "$OUT" ] || OUT=$(mktemp -d -t pipe-calibration.XXXXXX)
mkdir -p "$OUT" || die "cannot create $OUT"
if [ -z "$MODELS_DIR" ]; then
  MODELS_DIR=$(mktemp -d -t pipe-models.XXXXXX)
  trap 'rm -rf "$MODELS_DIR"' EXIT
fi
mkdir -p "$MODELS_DIR"

PIPE_OPT=${PIPE_OPT:-build/bin/pipe-opt}
can_compare=0
if [ -x "$PIPE_OPT" ] && "$PIPE_OPT" --version >/dev/null 2>&1; then
  can_compare=1
fi
[ "$COMPARE_ONLY" = 1 ] && [ "$can_compare" = 0 ] && die "pipe-opt '$PIPE_OPT' does not run (set PIPE_OPT)"

echo "gpu-calibration: device $DEVICE, GPU '${gpu_name:-none}', target $TARGET, $PRECISION, micro-batch $MICRO_BATCH, repeat $REPEAT, budget ${BUDGET} s"
echo "gpu-calibration: measurements in $OUT, models in $MODELS_DIR"

export_model() {  # name -> MODELS_DIR/name.onnx
  [ -f "$MODELS_DIR/$1.onnx" ] && return 0
  "$PYTHON" python/scripts/export_models.py --size real --only "$1" --out "$MODELS_DIR" \
    --threads "$(nproc)" > "$OUT/$1.export.log" 2>&1 ||
    { echo "gpu-calibration: export of $1 failed:"; tail -5 "$OUT/$1.export.log"; return 1; }
}

measured=""
skipped=""
failed=""
for model in $MODELS; do
  if [ "$COMPARE_ONLY" = 0 ] && [ "$(elapsed)" -ge "$BUDGET" ]; then
    skipped="$skipped $model"
    continue
  fi
  times="$OUT/$model.times.json"
  if [ "$COMPARE_ONLY" = 1 ]; then
    [ -f "$times" ] || continue
    export_model "$model" || { failed="$failed $model"; continue; }
    measured="$measured $model"
    continue
  fi
  echo "== $model ($(elapsed) s)"
  export_model "$model" || { failed="$failed $model"; continue; }
  flags=""
  [ "$PRECISION" = tf32 ] && flags="--tf32"
  if "$PYTHON" python/scripts/measure_node_times.py "$MODELS_DIR/$model.onnx" \
      --device "$DEVICE" --micro-batch-size "$MICRO_BATCH" --repeat "$REPEAT" $flags \
      --threads 4 --out "$times" 2> "$OUT/$model.measure.log"; then
    measured="$measured $model"
  else
    echo "gpu-calibration: measuring $model failed:"; tail -5 "$OUT/$model.measure.log"
    failed="$failed $model"
  fi
done

[ -n "$skipped" ] && echo "gpu-calibration: skipped (budget):$skipped"
[ -n "$failed" ] && echo "gpu-calibration: failed:$failed"
[ -n "$measured" ] || die "nothing measured"

if [ "$can_compare" = 0 ]; then
  echo "gpu-calibration: pipe-opt ('$PIPE_OPT') does not run here; profiles are in $OUT."
  extra=""
  [ "$PRECISION" = tf32 ] && extra=" --tf32"
  echo "Copy $OUT back and run: scripts/gpu-calibration.sh --compare-only --out DIR --target $TARGET --micro-batch $MICRO_BATCH --models \"${measured# }\"$extra"
  exit 0
fi

report="$OUT/calibration.md"
{
  echo "Target $TARGET, dtype $PRECISION, micro-batch $MICRO_BATCH, median of $REPEAT runs per op."
  echo
} > "$report"
summaries=()
for model in $measured; do
  "$PYTHON" python/scripts/compare_cost_model.py "$MODELS_DIR/$model.onnx" \
    --times "$OUT/$model.times.json" --target "$TARGET" --dtype "$PRECISION" \
    --micro-batch-size "$MICRO_BATCH" --pipe-opt "$PIPE_OPT" --markdown \
    --json "$OUT/$model.compare.json" >> "$report" &&
    summaries+=("$OUT/$model.compare.json") || failed="$failed $model(compare)"
done
[ ${#summaries[@]} -gt 0 ] &&
  "$PYTHON" python/scripts/compare_cost_model.py --summarize "${summaries[@]}" --markdown >> "$report"
cat "$report"
echo "gpu-calibration: report in $report ($(elapsed) s)"
[ -z "$failed" ]
