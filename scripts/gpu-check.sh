#!/usr/bin/env bash
# The CUDA backend on a GPU, in one table (docs/runtime-cuda.md keeps it, dated):
#  - the kernel conformance suite with --backend cuda: native kernels, then
#    every kernel staged (PIPE_RUN_DEVICE_KERNELS=staged), against torch;
#  - mlp2 trained with --backend cuda against torch;
#  - the training-equality cases of scripts/gpu-cases.txt with --backend cuda
#    against float64 torch (1e-5), from pipe-opt outputs made beforehand;
#  - the step time of the real-size cases of scripts/gpu-bench.txt (random
#    parameters) beside PyTorch eager's on the same GPU, and each rank's
#    measured peak memory beside the plan's (a second table).
# Runs from the checkout on the GPU machine, over the bundle that
# scripts/gpu-bundle.sh made elsewhere and that was copied there. Writes the
# table (gpu-check.md) and the logs under $OUT when set, else /tmp/gpu-check.
#
#   scripts/gpu-check.sh [BUNDLE]      (default build-gpu/bundle)
#
# BACKEND=emulated runs the same checks on the emulated device: the script's
# own test on a machine without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=$(realpath "${1:-build-gpu/bundle}")
LOGS=${OUT:-/tmp/gpu-check}
mkdir -p "$LOGS"
PYTHON=${PYTHON:-python3}
BACKEND=${BACKEND:-cuda}
export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PIPE_RUNTIME_LIB="$BUNDLE/lib/libpiperun.so" PIPE_RUN="$BUNDLE/bin/pipe-run"
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# cuBLAS and cuDNN (loaded when a CUDA rank first multiplies or convolves): the
# toolkit's, or the ones torch's wheels bring.
library_dirs=$("$PYTHON" -c '
import glob, os, site
dirs = glob.glob("/usr/local/cuda/lib64")
for base in site.getsitepackages():
    dirs += glob.glob(os.path.join(base, "nvidia", "*", "lib"))
    dirs += glob.glob(os.path.join(base, "nvidia", "*", "*", "lib"))
print(":".join(d for d in dirs
               if glob.glob(os.path.join(d, "libcublas.so*")) or
               glob.glob(os.path.join(d, "libcudnn.so*"))))' 2>/dev/null)
[ -z "$library_dirs" ] || export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$library_dirs"

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
      head -1)
gpu=${gpu:-none (no nvidia-smi)}
table="| check | result | seconds | detail |"$'\n'"|---|---|---|---|"
failed=0

# check NAME COMMAND...: runs it, its log in $LOGS/NAME.log, one row.
check() {
  local name=$1 start end status result detail
  shift
  start=$(date +%s%N)
  "$@" > "$LOGS/$name.log" 2>&1
  status=$?
  end=$(date +%s%N)
  case $status in
    0) result=pass ;;
    # Skipped: the backend cannot be used here, which is a failure of this script.
    77) result="FAIL (skipped)"; failed=$((failed + 1)) ;;
    *) result=FAIL; failed=$((failed + 1)) ;;
  esac
  if [ "$result" != pass ]; then
    detail=$(grep -v '^\s*$' "$LOGS/$name.log" | tail -1)
  else
    detail=$(grep -E "cases, [0-9]+ failed|^losses:|^skipped|^pipe-run: gradients" "$LOGS/$name.log" |
             head -1)
  fi
  detail=$(echo "$detail" | tr '|' '/' | cut -c1-160)
  table+=$'\n'"| $name | $result | $(awk "BEGIN { printf \"%.1f\", ($end - $start) / 1e9 }") | $detail |"
  echo "$name: $result"
}

check "conformance-$BACKEND-native" "$PYTHON" runtime/test/conformance/run.py \
  --backend "$BACKEND" --markdown
PIPE_RUN_DEVICE_KERNELS=staged check "conformance-$BACKEND-staged" \
  "$PYTHON" runtime/test/conformance/run.py --backend "$BACKEND" --markdown
check "mlp2-$BACKEND-threads" "$PYTHON" runtime/test/check_mlp2.py --pipe-run "$PIPE_RUN" \
  --transport threads --backend "$BACKEND" --work "$LOGS/mlp2"
while read -r name model options; do
  case $name in ''|'#'*) continue ;; esac
  # shellcheck disable=SC2086
  check "train-$name" "$PYTHON" python/scripts/check_training.py "$model" $options \
    --backend "$BACKEND" --compiled "$BUNDLE/cases/$name"
done < scripts/gpu-cases.txt

# bench NAME FAMILY MICRO_BATCH_SIZE MICROBATCHES: pipe-run's median step (the
# steps after the first) and torch eager's on the same work, one row.
bench_table="| case | pipe-run step ms | torch eager step ms | ratio | peak memory measured / plan, per rank |"$'\n'"|---|---|---|---|---|"
TORCH_DEVICE=$([ "$BACKEND" = cuda ] && echo cuda || echo cpu)
BENCH_SIZE=${BENCH_SIZE:-real}
bench() {
  local name=$1 family=$2 batch=$3 microbatches=$4 ours torch ratio memory
  if ! "$PIPE_RUN" "$BUNDLE/bench/$name" --backend "$BACKEND" --random-params --steps 3 \
      > "$LOGS/bench-$name.log" 2>&1; then
    failed=$((failed + 1))
    bench_table+=$'\n'"| $name | FAIL: $(grep -v '^\s*$' "$LOGS/bench-$name.log" | tail -1 | tr '|' '/' | cut -c1-120) | | | |"
    echo "bench-$name: FAIL"
    return
  fi
  ours=$(sed -nE 's/^step ([2-9]|[1-9][0-9]+)\/[0-9]+: .*\(([0-9.]+) ms\)$/\2/p' "$LOGS/bench-$name.log" |
         sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  memory=$(awk '/^    total / { printf "%s%s", sep, $NF; sep = ", " }' "$LOGS/bench-$name.log")
  if "$PYTHON" python/scripts/bench_step.py --model "$family" --size "$BENCH_SIZE" \
      --micro-batch-size "$batch" --microbatches "$microbatches" --device "$TORCH_DEVICE" \
      --steps 2 > "$LOGS/bench-$name-torch.log" 2>&1; then
    torch=$(sed -nE 's/.*: step ([0-9.]+) ms.*/\1/p' "$LOGS/bench-$name-torch.log")
  else
    torch="FAIL"
    failed=$((failed + 1))
  fi
  ratio=$(awk -v a="$ours" -v b="$torch" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')
  bench_table+=$'\n'"| $name | $ours | $torch | $ratio | $memory |"
  echo "bench-$name: $ours ms against torch $torch ms"
}
while read -r name family stages batch microbatches; do
  case $name in ''|'#'*) continue ;; esac
  [ -d "$BUNDLE/bench/$name" ] || { echo "bench-$name: not in the bundle"; continue; }
  bench "$name" "$family" "$batch" "$microbatches"
done < scripts/gpu-bench.txt

{
  echo "backend $BACKEND; GPU: $gpu; $(date -u +%Y-%m-%d)"
  echo
  echo "$table"
  echo
  echo "Step time, $BENCH_SIZE models with random parameters (torch on $TORCH_DEVICE):"
  echo
  echo "$bench_table"
  echo
  echo "Worst relative error per kernel, native kernels (conformance-$BACKEND-native.log):"
  echo
  grep -E '^\|' "$LOGS/conformance-$BACKEND-native.log" || true
} | tee "$LOGS/gpu-check.md"
echo "$failed failed"
[ "$failed" = 0 ]
