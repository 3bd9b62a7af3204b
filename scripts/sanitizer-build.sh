# Sourced by scripts/fuzz.sh and scripts/sanitize.sh: configures the one
# sanitizer build both use, $SANITIZER_BUILD (default build-fuzz/): clang-22,
# -O1, ASan + UBSan (no recovery) and libFuzzer's coverage on every object of
# the project, with the harnesses of test/fuzz. Only the configuration is done
# here; each script builds the targets it needs.
SANITIZER_BUILD=${SANITIZER_BUILD:-${FUZZ_BUILD_DIR:-build-fuzz}}

configure_sanitizer_build() {
  if ! command -v clang++-22 > /dev/null; then
    echo "sanitizer build: clang++-22 is not installed (scripts/setup.sh --tests installs it)"
    return 1
  fi
  local sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link"
  mkdir -p "$SANITIZER_BUILD"
  [ -f "$SANITIZER_BUILD/build.ninja" ] && return 0
  cmake -G Ninja -S . -B "$SANITIZER_BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="$sanitizers -fno-omit-frame-pointer -gline-tables-only" \
    -DCMAKE_C_FLAGS="$sanitizers -fno-omit-frame-pointer -gline-tables-only" \
    -DPIPE_FUZZERS=ON > "$SANITIZER_BUILD/configure.log" 2>&1 ||
    { cat "$SANITIZER_BUILD/configure.log"; echo "sanitizer build: cmake failed"; return 1; }
}

# allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons the unused part of a slab
# when a slab is started from our instrumented code, and libMLIR (not instrumented)
# hands out memory from it without unpoisoning: every later use of that memory
# would be reported. Our own code has no manual poisoning to lose.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allow_user_poisoning=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
