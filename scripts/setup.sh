#!/usr/bin/env bash
# Installs what is missing on Debian 12 (apt-get), then configures and builds
# pipe-opt in build/. Safe to run again: it installs and rebuilds only what
# changed.
#   scripts/setup.sh            # what building and running needs (pybind11 included: CMake
#                               # also builds the Python bindings, pipe_opt._native)
#   scripts/setup.sh --tests    # also what the tests need (ONNX's node tests, torch,
#                               # torchvision, pytest and pytest-xdist, clang and its sanitizer/libFuzzer
#                               # runtimes)
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}

packages=(
  cmake ninja-build g++ lld
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libbenchmark-dev coinor-libcbc-dev nlohmann-json3-dev
  libopenblas-dev libopenmpi-dev openmpi-bin
  python3-onnx python3-numpy
  python3-dev pybind11-dev python3-pybind11
)
if [ "${1:-}" = "--tests" ]; then
  packages+=(libonnx-testdata python3-torch python3-torchvision python3-pytest python3-pytest-xdist clang-22 libclang-rt-22-dev)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" -j"$JOBS"
