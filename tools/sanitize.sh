#!/usr/bin/env bash
# Builds the library, the tool and the tests with AddressSanitizer +
# UndefinedBehaviorSanitizer (clang, into build-asan/) and runs the lavapipe and
# host suites with leak detection on. Fails on any test failure and on any
# sanitizer report, even one in a process whose failure a test expected (each
# report is also written to build-asan/sanitizer/, and checked after the run).
#
#   tools/sanitize.sh [MESON TEST ARGUMENTS...]
#
# Lavapipe, LLVM, the Vulkan loader and the validation layer are not built with
# sanitizers; they are dlopen'ed into the sanitized test processes, which is fine
# for ASan. Their own leaks are suppressed in tests/sanitizer/lsan.supp (each
# with its reason); the library's must be zero. Environment: VKFORMER_ASAN_DIR
# (default build-asan), SANITIZE_CC (default clang-14), SANITIZE_CXX (for the
# library's C++ shim over libsentencepiece; default clang++-14, the same clang).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${VKFORMER_ASAN_DIR:-$root/build-asan}
cc=${SANITIZE_CC:-clang-14}
cxx=${SANITIZE_CXX:-clang++-14}

# --- packages: the project's build and test dependencies (as tools/setup.sh
# --swiftshader, less SwiftShader: only lavapipe runs here), clang with its
# sanitizer runtimes (libclang-rt-14-dev is only a Recommends of clang-14) and
# llvm-symbolizer (llvm-14) for readable stacks.
packages=(clang-14 libclang-rt-14-dev llvm-14 libc6-dev pkg-config meson ninja-build glslc libvulkan-dev
          libvulkan-volk-dev libvulkan1 vulkan-validationlayers mesa-vulkan-drivers libjansson-dev python3
          libsentencepiece-dev libonig-dev libutf8proc-dev libsndfile1-dev libsoxr-dev libmp3lame-dev python3-torch python3-numpy python3-sentencepiece python3-soundfile
          libmicrohttpd-dev curl python3-requests python3-venv)
"$root/tools/install_packages.sh" sanitize "${packages[@]}"

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "sanitize: $cc not found: install clang-14 (Debian 12) or set SANITIZE_CC" >&2
    exit 1
fi
if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "sanitize: $cxx not found: install clang-14 (Debian 12) or set SANITIZE_CXX" >&2
    exit 1
fi
rt_dir="$("$cc" -print-resource-dir)/lib/linux"
for rt in asan ubsan_standalone; do
    if [ ! -f "$rt_dir/libclang_rt.$rt-$(uname -m).a" ]; then
        echo "sanitize: $cc has no $rt runtime ($rt_dir/libclang_rt.$rt-$(uname -m).a): install libclang-rt-14-dev" >&2
        exit 1
    fi
done
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)

# --- build. clang links its sanitizer runtimes statically into each executable,
# so the tool runs sanitized wherever it is started from (test scripts, Python)
# with no LD_PRELOAD; b_lundef=false lets libvkformer.so leave the runtime's
# symbols to the executable. gcc works too but its libubsan leaks 128 bytes at
# exit in every process. The C++ compiler is the same clang (one sanitizer
# runtime); CC and CXX stay exported for ninja's reconfigures. A build directory
# from before the C++ source (or with another C++ compiler) is set up again.
export CC=$cc CXX=$cxx
if [ -f "$build/build.ninja" ] &&
   ! grep -A1 '^rule cpp_COMPILER$' "$build/build.ninja" | grep -qF -e "command = $cxx " -e "ccache $cxx "; then
    echo "sanitize: $build has no $cxx as its C++ compiler: setting it up again" >&2
    rm -rf "$build"
fi
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" -Db_sanitize=address,undefined -Db_lundef=false \
        -Dbuildtype=debugoptimized -Dc_args=-fno-omit-frame-pointer -Dcpp_args=-fno-omit-frame-pointer \
        -Dswiftshader_icd= >&2
fi
ninja -C "$build" >&2

# dlclose that keeps the library loaded, preloaded into every test process: the
# Vulkan loader unloads the driver and the layer (and vkformer the loader) before
# the leak check at exit, which would leave their allocations with stacks of
# "<unknown module>" that no suppression can match, and report memory they still
# reach from their globals.
keep=$build/sanitizer-keep-loaded.so
if [ ! -f "$keep" ]; then
    printf 'int dlclose(void *handle) { (void)handle; return 0; }\n' > "$build/sanitizer-keep-loaded.c"
    "$cc" -shared -fPIC -O2 -o "$keep" "$build/sanitizer-keep-loaded.c"
fi

# --- run. Reports go to files as well as failing the process with exit code 23
# (not 1, which some tests expect from the tool on bad input).
logs=$build/sanitizer
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:exitcode=23:detect_stack_use_after_return=1:log_path=$logs/report"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizer/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=23:log_path=$logs/report"
if [ -n "$symbolizer" ]; then export ASAN_SYMBOLIZER_PATH=$symbolizer UBSAN_SYMBOLIZER_PATH=$symbolizer; fi
export LD_PRELOAD=$keep${LD_PRELOAD:+:$LD_PRELOAD}

# Captured first: grep -q closing a pipe early would kill meson with SIGPIPE.
registered=$(meson test -C "$build" --list 2>/dev/null)
for suite in lavapipe host; do
    if ! grep -q "^vkformer:$suite / " <<<"$registered"; then
        echo "sanitize: no tests registered for $suite (is mesa-vulkan-drivers installed?)" >&2
        exit 1
    fi
done

status=0
meson test -C "$build" --suite lavapipe --suite host --print-errorlogs --num-processes "$(nproc)" \
    --timeout-multiplier 3 "$@" || status=$?
unset LD_PRELOAD

reports=$(grep -lE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: " "$logs"/* 2>/dev/null || true)
if [ -n "$reports" ]; then
    for f in $reports; do
        echo "==== sanitizer report $f" >&2
        cat "$f" >&2
    done
    echo "sanitize: FAILED: $(echo "$reports" | wc -l) process(es) with sanitizer reports (above; kept in $logs)" >&2
    exit 1
fi
if [ "$status" != 0 ]; then
    echo "sanitize: FAILED: meson test exited $status (see $build/meson-logs/testlog.txt)" >&2
    exit "$status"
fi
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
counts = {}
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result")
        counts[r] = counts.get(r, 0) + 1
print("sanitize: %d tests passed under ASan+UBSan with leak detection, no sanitizer report"
      % (counts.get("OK", 0) + counts.get("EXPECTEDFAIL", 0)) +
      "".join(", %d %s" % (n, r.lower()) for r, n in sorted(counts.items()) if r not in ("OK", "EXPECTEDFAIL")))
PY
