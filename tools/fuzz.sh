#!/usr/bin/env bash
# Fuzzes the model loader: builds tests/fuzz/fuzz_model.c with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer into build-fuzz/, writes the
# seed corpus (tests/fuzz/make_corpus.py), and runs the fuzzer for SECONDS
# (default 60). Fails on any crash, leak, timeout, out-of-memory or sanitizer
# report; what triggered it is left in build-fuzz/artifacts/ (never in the tree).
#
#   tools/fuzz.sh [SECONDS]
#
# The target needs no Vulkan device: it calls vkf_st_parse and
# vkf_model_check_bytes (the loader's dry run) and links only the parsing
# sources (tests/fuzz/device_stubs.c stands in for the device side).
# Environment: VKFORMER_FUZZ_DIR (default build-fuzz), FUZZ_CC (default clang-14),
# FUZZ_ARGS (extra libFuzzer arguments).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${VKFORMER_FUZZ_DIR:-$root/build-fuzz}
seconds=${1:-60}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]] || [ $# -gt 1 ]; then
    echo "usage: tools/fuzz.sh [SECONDS]   (a positive whole number; default 60)" >&2
    exit 2
fi
max_len=65536

# --- packages: clang with its sanitizer and libFuzzer runtimes (libclang-rt-14-dev
# is only a Recommends of clang-14), llvm-symbolizer for readable stacks (llvm-14),
# and the headers the library's sources include.
packages=(clang-14 libclang-rt-14-dev llvm-14 libc6-dev pkg-config libjansson-dev libvulkan-dev
          libvulkan-volk-dev python3)
"$root/tools/install_packages.sh" fuzz "${packages[@]}"

cc=${FUZZ_CC:-clang-14}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fuzz: $cc not found: install clang-14 (Debian 12) or set FUZZ_CC to a clang with libFuzzer" >&2
    exit 1
fi
rt_dir="$("$cc" -print-resource-dir)/lib/linux"
for rt in fuzzer asan ubsan_standalone; do
    if [ ! -f "$rt_dir/libclang_rt.$rt-$(uname -m).a" ]; then
        echo "fuzz: $cc has no $rt runtime ($rt_dir/libclang_rt.$rt-$(uname -m).a): install libclang-rt-14-dev" >&2
        exit 1
    fi
done
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)

# --- build: the parsing sources, instrumented; --gc-sections drops what the dry run
# cannot reach (everything that records GPU work), and -z start-stop-gc lets it,
# although libFuzzer's coverage tables refer to every function.
mkdir -p "$out"
fuzzer=$out/fuzz_model
sources=("$root/tests/fuzz/fuzz_model.c" "$root/tests/fuzz/device_stubs.c"
         "$root/src/model.c" "$root/src/families/vkformer_file.c" "$root/src/families/loader.c"
         "$root/src/families/languages.c" "$root/src/families/safetensors.c" "$root/src/arch/spec.c"
         "$root/src/arch/weights.c" "$root/src/decode/options.c" "$root/src/runtime/status.c")
jansson_cflags=$(pkg-config --cflags jansson 2>/dev/null || true)
jansson_libs=$(pkg-config --libs jansson 2>/dev/null || echo -ljansson)
# shellcheck disable=SC2086  # pkg-config output is a list of words
if ! "$cc" -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -ffunction-sections -fdata-sections -Wall -Wextra -Wno-missing-field-initializers \
        -I"$root/include" -I"$root/src" $jansson_cflags \
        "${sources[@]}" $jansson_libs -lm \
        -Wl,--gc-sections -Wl,-z,start-stop-gc -o "$fuzzer.tmp" 2> "$out/build.log"; then
    cat "$out/build.log" >&2
    if grep -q "undefined reference" "$out/build.log"; then
        echo "fuzz: link failed: the dry run (vkf_model_check_bytes) now reaches a function outside" \
             "model.c/safetensors.c/status.c; add it to tests/fuzz/device_stubs.c if the dry run never" \
             "calls it, else add its source to tools/fuzz.sh" >&2
    fi
    echo "fuzz: building $fuzzer failed" >&2
    exit 1
fi
grep -v "^$" "$out/build.log" >&2 || true   # warnings, if any
mv "$fuzzer.tmp" "$fuzzer"

# --- corpus: seeds written afresh each run; what the fuzzer finds goes to corpus/
seeds=$out/seeds corpus=$out/corpus artifacts=$out/artifacts
rm -rf "$seeds" "$artifacts"
mkdir -p "$corpus" "$artifacts"
/usr/bin/python3 "$root/tests/fuzz/make_corpus.py" "$seeds" --max-len "$max_len" >&2

# --- run
log=$out/fuzz.log
echo "fuzz: running $fuzzer for ${seconds}s (log: $log)" >&2
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
if [ -n "$symbolizer" ]; then export ASAN_SYMBOLIZER_PATH=$symbolizer; fi
status=0
# shellcheck disable=SC2086  # FUZZ_ARGS is a list of words
"$fuzzer" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -detect_leaks=1 -dict="$root/tests/fuzz/model.dict" \
    -artifact_prefix="$artifacts/" ${FUZZ_ARGS:-} "$corpus" "$seeds" > "$log" 2>&1 || status=$?

# libFuzzer exits non-zero on every finding; a sanitizer line in the log fails the
# run too, in case a report did not end the process.
reports='ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|deadly signal|^SUMMARY: |^fuzz_model: '
if [ "$status" != 0 ] || grep -Eq "$reports" "$log"; then
    echo "fuzz: FAILED (exit status $status); the end of $log:" >&2
    tail -n 60 "$log" >&2
    found=$(find "$artifacts" -type f | sort)
    if [ -n "$found" ]; then
        echo "fuzz: inputs that fail (reproduce with: $fuzzer FILE):" >&2
        while IFS= read -r f; do echo "  $f" >&2; done <<< "$found"
    fi
    exit 1
fi

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
corp=$(grep -o 'corp: [0-9]*/[0-9A-Za-z]*' "$log" | tail -n 1 | sed 's/corp: //')
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
echo "fuzz: ${execs:-?} executions in ${seconds}s (${rate:-?}/s), corpus ${corp%%/*} inputs (${corp#*/}), coverage ${cov:-?} edges, no crash, leak or sanitizer report"
