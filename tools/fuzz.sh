#!/usr/bin/env bash
# Fuzzes the file readers with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer: the model loader (tests/fuzz/fuzz_model.c) and the
# tokenizer files (tests/fuzz/fuzz_tokenizer.c: Hugging Face tokenizer.json,
# byte-level BPE folders of BART and Whisper, and SentencePiece models). Builds both into build-fuzz/, writes their seed corpora
# (tests/fuzz/make_corpus.py, tests/fuzz/make_tokenizer_corpus.py) and runs each
# for half of SECONDS (default 60). Fails on any crash, leak, timeout,
# out-of-memory or sanitizer report; what triggered it is left in
# build-fuzz/artifacts/ (never in the tree).
#
#   tools/fuzz.sh [SECONDS]
#
# Neither target needs a Vulkan device. fuzz_model calls vkf_st_parse and
# vkf_model_check_bytes (the loader's dry run) and links only the parsing sources
# (tests/fuzz/device_stubs.c stands in for the device side); fuzz_tokenizer links
# the tokenizer sources with Debian's libsentencepiece, Oniguruma and utf8proc
# (not instrumented: a crash inside them still shows as a deadly signal).
# Environment: VKFORMER_FUZZ_DIR (default build-fuzz), FUZZ_CC (default clang-14),
# FUZZ_CXX (default clang++-14), FUZZ_ARGS (extra libFuzzer arguments).
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
# the headers and libraries the sources use, and Python's sentencepiece for the
# tokenizer seeds.
packages=(clang-14 libclang-rt-14-dev llvm-14 libc6-dev pkg-config libjansson-dev libvulkan-dev
          libvulkan-volk-dev libsentencepiece-dev libonig-dev libutf8proc-dev libsndfile1-dev libsoxr-dev python3 python3-sentencepiece)
"$root/tools/install_packages.sh" fuzz "${packages[@]}"

cc=${FUZZ_CC:-clang-14}
cxx=${FUZZ_CXX:-clang++-14}
for c in "$cc" "$cxx"; do
    if ! command -v "$c" >/dev/null 2>&1; then
        echo "fuzz: $c not found: install clang-14 (Debian 12) or set FUZZ_CC / FUZZ_CXX to a clang with libFuzzer" >&2
        exit 1
    fi
done
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
flags=(-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -ffunction-sections -fdata-sections -Wall -Wextra -Wno-missing-field-initializers
       -I"$root/include" -I"$root/src")
jansson_cflags=$(pkg-config --cflags jansson 2>/dev/null || true)
jansson_libs=$(pkg-config --libs jansson 2>/dev/null || echo -ljansson)
fuzzer=$out/fuzz_model
sources=("$root/tests/fuzz/fuzz_model.c" "$root/tests/fuzz/device_stubs.c"
         "$root/src/model.c" "$root/src/families/vkformer_file.c" "$root/src/families/loader.c"
         "$root/src/families/languages.c" "$root/src/families/safetensors.c" "$root/src/arch/spec.c"
         "$root/src/arch/weights.c" "$root/src/decode/options.c" "$root/src/runtime/status.c")
# shellcheck disable=SC2086  # pkg-config output is a list of words
if ! "$cc" -std=c11 -D_GNU_SOURCE "${flags[@]}" $jansson_cflags \
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

# the tokenizer target: its C sources, the SentencePiece shim in C++ (the same
# clang), linked with clang++ (libFuzzer and the C++ sanitizer runtimes)
tok_fuzzer=$out/fuzz_tokenizer
tok_libs=$(pkg-config --libs jansson sentencepiece oniguruma libutf8proc 2>/dev/null ||
           echo -ljansson -lsentencepiece -lonig -lutf8proc)
mkdir -p "$out/obj"
build_ok=1
{
    "$cxx" -std=c++17 -fvisibility-inlines-hidden "${flags[@]}" -c "$root/src/tokenizers/spm.cc" \
        -o "$out/obj/tokenizer_spm.o" || build_ok=0
    tok_objs=()
    for c in "$root"/tests/fuzz/fuzz_tokenizer.c "$root"/src/tokenizers/*.c "$root"/src/runtime/status.c; do
        c=${c#"$root"/}
        [ "$build_ok" = 1 ] || break
        # shellcheck disable=SC2086  # pkg-config output is a list of words
        "$cc" -std=c11 -D_GNU_SOURCE "${flags[@]}" $jansson_cflags -c "$root/$c" \
            -o "$out/obj/$(basename "$c" .c).o" || build_ok=0
        tok_objs+=("$out/obj/$(basename "$c" .c).o")
    done
    # shellcheck disable=SC2086  # pkg-config output is a list of words
    [ "$build_ok" = 1 ] && "$cxx" -fsanitize=fuzzer,address,undefined "${tok_objs[@]}" "$out/obj/tokenizer_spm.o" \
        $tok_libs -lm -lpthread -Wl,--gc-sections -o "$tok_fuzzer.tmp" || build_ok=0
} 2> "$out/build_tokenizer.log"
if [ "$build_ok" != 1 ]; then
    cat "$out/build_tokenizer.log" >&2
    echo "fuzz: building $tok_fuzzer failed" >&2
    exit 1
fi
grep -v "^$" "$out/build_tokenizer.log" >&2 || true
mv "$tok_fuzzer.tmp" "$tok_fuzzer"

# --- corpus: seeds written afresh each run; what the fuzzers find goes to corpus*/
artifacts=$out/artifacts
rm -rf "$out/seeds" "$out/seeds_tokenizer" "$artifacts"
mkdir -p "$out/corpus" "$out/corpus_tokenizer" "$artifacts"
/usr/bin/python3 "$root/tests/fuzz/make_corpus.py" "$out/seeds" --max-len "$max_len" >&2
/usr/bin/python3 "$root/tests/fuzz/make_tokenizer_corpus.py" "$out/seeds_tokenizer" --max-len "$max_len" >&2

# --- run: each target for half the time
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
if [ -n "$symbolizer" ]; then export ASAN_SYMBOLIZER_PATH=$symbolizer; fi
# libFuzzer exits non-zero on every finding; a sanitizer line in the log fails the
# run too, in case a report did not end the process.
reports='ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)|runtime error:|deadly signal|^SUMMARY: |^fuzz_(model|tokenizer): '
failed=0
summary=()
run_fuzzer() {   # NAME BINARY SECONDS DICT CORPUS SEEDS
    local name=$1 bin=$2 secs=$3 dict=$4 corpus=$5 seeds=$6 log=$out/fuzz_$1.log status=0
    echo "fuzz: running $bin for ${secs}s (log: $log)" >&2
    # shellcheck disable=SC2086  # FUZZ_ARGS is a list of words
    "$bin" -max_total_time="$secs" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -detect_leaks=1 -dict="$dict" \
        -artifact_prefix="$artifacts/$name-" ${FUZZ_ARGS:-} "$corpus" "$seeds" > "$log" 2>&1 || status=$?
    if [ "$status" != 0 ] || grep -Eq "$reports" "$log"; then
        echo "fuzz: $name FAILED (exit status $status); the end of $log:" >&2
        tail -n 60 "$log" >&2
        found=$(find "$artifacts" -type f -name "$name-*" | sort)
        if [ -n "$found" ]; then
            echo "fuzz: inputs that fail (reproduce with: $bin FILE):" >&2
            while IFS= read -r f; do echo "  $f" >&2; done <<< "$found"
        fi
        failed=1
        return
    fi
    local execs rate corp cov
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    corp=$(grep -o 'corp: [0-9]*/[0-9A-Za-z]*' "$log" | tail -n 1 | sed 's/corp: //')
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
    summary+=("fuzz: $name: ${execs:-?} executions in ${secs}s (${rate:-?}/s), corpus ${corp%%/*} inputs (${corp#*/}), coverage ${cov:-?} edges, no crash, leak or sanitizer report")
}
half=$(( (seconds + 1) / 2 ))
run_fuzzer model "$fuzzer" "$half" "$root/tests/fuzz/model.dict" "$out/corpus" "$out/seeds"
run_fuzzer tokenizer "$tok_fuzzer" "$(( seconds - half > 0 ? seconds - half : 1 ))" \
    "$root/tests/fuzz/tokenizer.dict" "$out/corpus_tokenizer" "$out/seeds_tokenizer"
if [ "$failed" != 0 ]; then
    exit 1
fi
printf '%s\n' "${summary[@]}"
