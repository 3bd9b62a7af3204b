#!/usr/bin/env bash
# Prepares, on a machine with this project's build dependencies, what
# scripts/gpu-check.sh needs on a GPU machine that has the CUDA toolkit's
# driver, python3 with torch, numpy and onnx, and a C++ compiler, but not
# LLVM/MLIR, OpenBLAS or MPI:
#   BUNDLE/bin/pipe-run, BUNDLE/lib/libpiperun.so (CUDA backend, no MPI) and the
#   shared libraries it needs beyond the C and C++ runtimes (OpenBLAS and its
#   Fortran runtime), BUNDLE/include/pipe_runtime.h (pipe-run compiles the rank
#   programs against it), BUNDLE/cases/NAME: pipe-opt's output for each
#   case of scripts/gpu-cases.txt, and BUNDLE/bench/NAME: pipe-opt's rank
#   programs for each case of scripts/gpu-bench.txt (real-size models, run
#   with random parameters, so their weights stay here).
#
#   scripts/gpu-bundle.sh [BUNDLE]      (default build-gpu/bundle)
#
# BENCH_SIZE=tiny compiles the benchmark's cases on the tiny models (a check
# of the script itself on the emulated device).
#
# Needs pipe-opt (build/bin/pipe-opt or $PIPE_OPT) and the CUDA toolkit. The
# bundle is about 45 MB; copy it into the checkout on the GPU machine at the
# same place (build-gpu/ is ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${1:-build-gpu/bundle}
BUILD=build-gpu/runtime
mkdir -p build-gpu
JOBS=${JOBS:-2}

cmake -G Ninja -S runtime -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPIPE_RUNTIME_MPI=OFF \
  -DPIPE_RUNTIME_TESTS=OFF > "$BUILD.configure.log" 2>&1 ||
  { cat "$BUILD.configure.log"; exit 1; }
grep -q "CUDA backend" "$BUILD.configure.log" ||
  { echo "gpu-bundle: the CUDA toolkit was not found: no CUDA backend to bundle" >&2; exit 1; }
ninja -C "$BUILD" -j"$JOBS" pipe-run piperun

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/include" "$BUNDLE/cases"
cp "$BUILD/bin/pipe-run" "$BUNDLE/bin/"
cp "$BUILD/lib/libpiperun.so" "$BUNDLE/lib/"
cp runtime/include/pipe_runtime.h "$BUNDLE/include/"
for lib in $(ldd "$BUILD/lib/libpiperun.so" | awk '/openblas|gfortran|quadmath|gomp/ {print $3}'); do
  cp -L "$lib" "$BUNDLE/lib/"
done

export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
grep -v '^#' scripts/gpu-cases.txt | while read -r name model options; do
  [ -n "$name" ] || continue
  # shellcheck disable=SC2086
  /usr/bin/python3 python/scripts/check_training.py "$model" $options \
    --compile-only "$BUNDLE/cases/$name" > /dev/null
  echo "compiled $name"
done

# The benchmark: real-size ONNX exports (kept here, about 600 MB), pipe-opt's
# programs of them without the weights.
BENCH_SIZE=${BENCH_SIZE:-real}
MODELS=build-gpu/models-$BENCH_SIZE
PIPE_OPT=${PIPE_OPT:-build/bin/pipe-opt}
mkdir -p "$MODELS" "$BUNDLE/bench"
grep -v '^#' scripts/gpu-bench.txt | while read -r name family stages batch microbatches; do
  [ -n "$name" ] || continue
  [ -f "$MODELS/$family.onnx" ] ||
    /usr/bin/python3 python/scripts/export_models.py --size "$BENCH_SIZE" --out "$MODELS" \
      --only "$family" > /dev/null
  out="$BUNDLE/bench/$name"
  "$PIPE_OPT" "$MODELS/$family.onnx" --pipeline-stages="$stages" --micro-batch-size="$batch" \
    --microbatches="$microbatches" -o "$out" > "$out.log" 2>&1 ||
    { cat "$out.log"; exit 1; }
  # pipe-run needs program.json and the rank sources; the rest is for reading.
  find "$out" -type f ! -name 'program.json' ! -name 'rank*.cpp' ! -name 'report.txt' -delete
  echo "compiled $name ($family $BENCH_SIZE, $stages stage(s), $microbatches x $batch)"
done
du -sh "$BUNDLE"
