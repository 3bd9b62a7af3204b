#!/usr/bin/env bash
# Checks that pipe-opt is consumable by another compiler: installs the current
# build (cmake --install, no rebuild: run ninja first) into a temporary prefix,
# configures and builds examples/downstream against it with find_package(PipeOpt),
# runs downstream-opt's planning pipeline on a test of the repository and
# checks its output (FileCheck) and that it equals the installed pipe-opt's.
# Prints `install: ok` or `install: FAILED (...)` last and exits non-zero on failure.
#   scripts/test-install.sh
#   BUILD_DIR=build-asan JOBS=4 scripts/test-install.sh
#   PIPE_BUILD_LOCK=FILE scripts/test-install.sh                   # builds under flock FILE
#   KEEP=1 scripts/test-install.sh                                 # keep the prefix
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
LLVM_PREFIX=${LLVM_PREFIX:-/usr/lib/llvm-22}

work=$(mktemp -d "${TMPDIR:-/tmp}/pipe-install.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
  echo "install: files kept in $work"
else
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix

fail() {
  echo "install: FAILED ($1)"
  exit 1
}
# Builds share the machine: with PIPE_BUILD_LOCK set, each one holds that lock.
locked() {
  if [ -n "${PIPE_BUILD_LOCK:-}" ]; then
    flock "$PIPE_BUILD_LOCK" "$@"
  else
    "$@"
  fi
}
# Runs a step quietly, showing its log only when it fails.
step() {
  local name=$1
  shift
  if ! "$@" > "$work/$name.log" 2>&1; then
    tail -n 40 "$work/$name.log"
    fail "$name"
  fi
}

[ -f "$BUILD_DIR/cmake_install.cmake" ] || fail "$BUILD_DIR is not a configured build"

echo "== cmake --install $BUILD_DIR --prefix $prefix"
step install locked cmake --install "$BUILD_DIR" --prefix "$prefix"
for path in bin/pipe-opt bin/pipe-plan bin/pipe-run include/pipe_runtime.h \
            include/pipe/InitAll.h include/pipe/Dialect/NN/IR/NNOps.h \
            include/pipe/Dialect/NN/IR/NNOps.h.inc include/pipe/Dialect/Pipe/Transforms/Passes.h.inc \
            lib/libPipeInitAll.a lib/libPipePartitioner.a lib/libpiperun.so \
            lib/cmake/PipeOpt/PipeOptConfig.cmake lib/cmake/PipeOpt/PipeOptTargets.cmake; do
  [ -e "$prefix/$path" ] || fail "not installed: $path"
done
ls "$prefix"/include/partitioner/*.h > /dev/null 2>&1 || fail "no partitioner header installed"
# The installed tools find their shared libraries (libMLIR.so, libpiperun.so).
step installed-pipe-opt "$prefix/bin/pipe-opt" --version
step installed-pipe-plan "$prefix/bin/pipe-plan" --help
step installed-pipe-run "$prefix/bin/pipe-run" --help

echo "== examples/downstream against the install"
step configure locked cmake -S examples/downstream -B "$work/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix;$LLVM_PREFIX"
grep -q "PipeOpt from $prefix/" "$work/configure.log" || fail "PipeOpt was not found in $prefix"
step build locked ninja -C "$work/build" -j"$JOBS"

echo "== downstream-opt: the planning pipeline on test/Dialect/Pipe/pipe-partition.mlir"
input=test/Dialect/Pipe/pipe-partition.mlir
pipeline='builtin.module(pipe-plan-pipeline{stages=2 microbatches=4 target=h100 algo=balanced train=false})'
step downstream-opt "$work/build/downstream-opt" "$input" --pass-pipeline="$pipeline" \
  -o "$work/downstream.mlir"
# Four matmuls on two GPUs: two per stage, the activation sent forward and its
# gradient sent back.
cat > "$work/checks" <<'EOF'
CHECK: pipe.pipeline @main
CHECK: pipe.stage @stage0
CHECK-COUNT-2: nn.matmul
CHECK: pipe.send
CHECK: pipe.recv
CHECK: pipe.stage @stage1
CHECK: pipe.recv
CHECK-COUNT-2: nn.matmul
CHECK: pipe.send
EOF
step filecheck "$LLVM_PREFIX/bin/FileCheck" --input-file "$work/downstream.mlir" "$work/checks"
# The same registration as pipe-opt's: the installed pipe-opt prints the same module.
step pipe-opt "$prefix/bin/pipe-opt" "$input" --pass-pipeline="$pipeline" -o "$work/pipe-opt.mlir"
if ! cmp -s "$work/downstream.mlir" "$work/pipe-opt.mlir"; then
  diff "$work/pipe-opt.mlir" "$work/downstream.mlir" | head -n 20
  fail "downstream-opt and pipe-opt differ"
fi

echo "install: ok"
