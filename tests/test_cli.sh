#!/bin/sh
# The vkformer command-line tool on one Vulkan driver: info (text and JSON),
# check, bench matmul (JSON lines), device choice, the exit codes and one-line
# messages of every failure (no device, no loader, usage errors), and that the
# binary does not link libvulkan (it loads it at run time).
#
# usage: test_cli.sh /path/to/vkformer /path/to/icd.json
# Exits 1 after printing every mismatch, 0 when all checks pass.

set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 /path/to/vkformer /path/to/icd.json" >&2
    exit 2
fi
VKFORMER=$1
ICD=$2
. "$(dirname "$0")/cli_lib.sh"
cli_setup test_cli "$ICD"

# Lines of filtered stderr / stdout of the last run (a last line without a newline counts).
stderr_lines() { grep -c '' "$TMP/err"; }
stdout_lines() { grep -c '' "$TMP/out"; }

# expect_one_error_line [SUBSTRING]: the last run wrote exactly one line to stderr,
# nothing to stdout, and the line contains SUBSTRING (case-insensitive).
expect_one_error_line() {
    n=$(stderr_lines)
    if [ "$n" -ne 1 ]; then
        fail "'$label' wrote $n lines to stderr, expected exactly 1:"
        sed 's/^/    stderr: /' "$TMP/err" >&2
    elif [ $# -ge 1 ] && ! grep -qi -- "$1" "$TMP/err"; then
        fail "'$label': the error line does not mention '$1': $(cat "$TMP/err")"
    fi
    if [ "$(stdout_lines)" -ne 0 ]; then
        fail "'$label' wrote to stdout on failure: $(head -n 3 "$TMP/out")"
    fi
}

# ------------------------------------------------------------------ info --json

run 0 "$VKFORMER" info --json
cp "$TMP/out" "$TMP/info.json"
if ! "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
devices = d["devices"]
assert isinstance(devices, list) and devices, "no devices"
default = d["default"]
assert isinstance(default, int) and not isinstance(default, bool), "default is not an index"
assert 0 <= default < len(devices), "default %r is not a device index" % default
def uint(v, minimum=0):
    return isinstance(v, int) and not isinstance(v, bool) and v >= minimum
for i, dev in enumerate(devices):
    where = "devices[%d]" % i
    assert isinstance(dev["name"], str) and dev["name"], where + ": empty name"
    assert dev["index"] == i, where + ": index %r" % dev["index"]
    assert dev["default"] is (i == default), where + ": default flag disagrees with the default index"
    assert uint(dev["subgroup_size"], 1), where + ": subgroup_size"
    assert uint(dev["max_shared_memory"], 1), where + ": max_shared_memory"
    assert uint(dev["max_workgroup_invocations"], 64), where + ": max_workgroup_invocations"
    for key in ("storage_16bit", "float16", "int8", "cooperative_matrix", "subgroup_shuffle"):
        assert isinstance(dev[key], bool), where + ": " + key + " is not a boolean"
    assert uint(dev["max_storage_buffer_range"], 1), where + ": max_storage_buffer_range"
    assert uint(dev["max_memory_allocation_size"]), where + ": max_memory_allocation_size"
    heaps = dev["heaps"]
    assert isinstance(heaps, list) and heaps, where + ": no heaps"
    for h in heaps:
        assert uint(h["size"], 1) and isinstance(h["device_local"], bool), where + ": heap %r" % h
print(devices[default]["name"])
' <"$TMP/info.json" >"$TMP/name" 2>"$TMP/py.err"; then
    fail "'vkformer info --json' is not the expected JSON: $(tail -n 1 "$TMP/py.err")"
    sed 's/^/    stdout: /' "$TMP/info.json" | head -n 5 >&2
fi
NAME=$(cat "$TMP/name")

# Cooperative matrix: each device's reported shapes are well-formed, and
# --no-coopmat (like VKFORMER_COOPMAT=0) leaves the chosen device without coopmat.
if ! "$PYTHON" -c '
import json, sys
d = json.load(sys.stdin)
assert isinstance(d["coopmat_in_use"], bool) and isinstance(d["coopmat2_in_use"], bool), "coopmat_in_use"
assert d["coopmat_in_use"] or not d["coopmat2_in_use"], "NV2 in use without KHR"
types = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "other"}
for dev in d["devices"]:
    for s in dev["coopmat_shapes"]:
        assert s["m"] > 0 and s["n"] > 0 and s["k"] > 0 and {s["a"], s["b"], s["c"], s["result"]} <= types, s
    assert dev["cooperative_matrix"] or not dev["coopmat_shapes"], "shapes without the extension"
    if dev["cooperative_matrix2"]:
        assert all(g > 0 for g in dev["coopmat2_granularity"]) and dev["coopmat2_max_dimension"] > 0
' <"$TMP/info.json" 2>"$TMP/py.err"; then
    fail "'vkformer info --json' coopmat keys: $(tail -n 1 "$TMP/py.err")"
fi
for off in "--no-coopmat" "VKFORMER_COOPMAT=0"; do
    if [ "$off" = --no-coopmat ]; then run 0 "$VKFORMER" info --json --no-coopmat
    else run 0 env VKFORMER_COOPMAT=0 "$VKFORMER" info --json; fi
    if ! "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); assert d["coopmat_in_use"] is False and d["coopmat2_in_use"] is False' \
            <"$TMP/out" 2>/dev/null; then
        fail "'$off': info --json still reports coopmat in use"
    fi
done
run 0 "$VKFORMER" info --no-coopmat
grep -q "runs cooperative-matrix kernels: no" "$TMP/out" || fail "'info --no-coopmat' does not say coopmat is off"
if [ -z "$NAME" ]; then
    fail "no device name from 'vkformer info --json'; the remaining checks use a placeholder"
    NAME="(unknown device)"
fi

# ------------------------------------------------------------------ info (text)

run 0 "$VKFORMER" info
grep -qF -- "$NAME" "$TMP/out" || fail "'vkformer info' does not print the device name '$NAME'"
grep -F -- "$NAME" "$TMP/out" | grep -qF '[default]' ||
    fail "'vkformer info' does not mark '$NAME' as the default device"

run 0 "$VKFORMER" info --device 0
grep -qF -- "$NAME" "$TMP/out" || fail "'vkformer info --device 0' does not print the device name '$NAME'"
run 0 "$VKFORMER" info --json --device 0
"$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); assert d["default"] == 0' <"$TMP/out" 2>/dev/null ||
    fail "'vkformer info --json --device 0' does not report device 0 as the one chosen"

# A case-insensitive substring of the name chooses the same device.
WORD=$(printf '%s\n' "$NAME" | awk '{ print toupper($1) }')
run 0 "$VKFORMER" info --device "$WORD"
grep -qF -- "$NAME" "$TMP/out" || fail "'vkformer info --device $WORD' does not print '$NAME'"

run 0 "$VKFORMER" --version
grep -q '^vkformer 0\.1\.0$' "$TMP/out" || fail "'vkformer --version' printed '$(cat "$TMP/out")'"

# ------------------------------------------------------------------ check

run 0 "$VKFORMER" check
grep -q 'all ops match' "$TMP/out" || fail "'vkformer check' does not say that all ops match: $(tail -n 1 "$TMP/out")"
if grep -q 'WRONG' "$TMP/out"; then fail "'vkformer check' reports a wrong op"; fi

# ------------------------------------------------------------------ bench

# check_bench_json "M N K;M N K;...": one JSON line per case, in order.
check_bench_json() {
    if ! "$PYTHON" -c '
import json, math, sys
cases = [tuple(int(v) for v in c.split()) for c in sys.argv[1].split(";")]
name = sys.argv[2]
lines = [l for l in sys.stdin.read().splitlines() if l.strip()]
assert len(lines) == len(cases), "%d lines for %d cases" % (len(lines), len(cases))
for line, (m, n, k) in zip(lines, cases):
    r = json.loads(line)
    for key in ("command", "bench", "m", "n", "k", "dtype", "ms", "gflops", "device", "driver", "vkformer_version"):
        assert key in r, "no key %s in %s" % (key, line)
    assert r["command"] == "bench matmul" and r["bench"] == "matmul", line
    assert (r["m"], r["n"], r["k"]) == (m, n, k), "sizes %r, expected %r" % ((r["m"], r["n"], r["k"]), (m, n, k))
    assert r["dtype"] == "f32", line
    assert isinstance(r["ms"], (int, float)) and math.isfinite(r["ms"]) and r["ms"] > 0, "ms %r" % r["ms"]
    assert isinstance(r["gflops"], (int, float)) and math.isfinite(r["gflops"]) and r["gflops"] > 0, line
    assert r["device"] == name, "device %r, expected %r" % (r["device"], name)
' "$1" "$NAME" <"$TMP/out" 2>"$TMP/py.err"; then
        fail "'$label' output: $(tail -n 1 "$TMP/py.err")"
        sed 's/^/    stdout: /' "$TMP/out" | head -n 5 >&2
    fi
}

run 0 "$VKFORMER" bench matmul --m 64 --n 48 --k 40 --repeat 3 --json
check_bench_json "64 48 40"
run 0 "$VKFORMER" bench matmul --size 17,33 --repeat 2 --json
check_bench_json "17 17 17;33 33 33"

# ------------------------------------------------------------------ failures

run 4 "$VKFORMER" info --device no-such-device
expect_one_error_line "no-such-device"
run 4 env VKFORMER_DEVICE=no-such-device "$VKFORMER" info
expect_one_error_line "no-such-device"
run 4 "$VKFORMER" check --device 99
expect_one_error_line
run 4 env VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json "$VKFORMER" info
expect_one_error_line
run 3 env VKFORMER_VULKAN_LOADER=/nonexistent/libvulkan.so.1 "$VKFORMER" info
expect_one_error_line "loader"
run 3 env VKFORMER_VULKAN_LOADER=/nonexistent/libvulkan.so.1 "$VKFORMER" bench matmul --size 8
expect_one_error_line "loader"

run 2 "$VKFORMER" frobnicate
grep -q 'frobnicate' "$TMP/err" || fail "'$label' does not name the unknown command"
run 2 "$VKFORMER" info --frobnicate
grep -q -- '--frobnicate' "$TMP/err" || fail "'$label' does not name the unknown option"
run 2 "$VKFORMER"
run 2 "$VKFORMER" info --device
run 2 "$VKFORMER" bench matmul
run 2 "$VKFORMER" bench matmul --m 0 --n 1 --k 1
run 2 "$VKFORMER" bench matmul --m 8 --n 8
run 2 "$VKFORMER" bench matmul --m -3 --n 8 --k 8
run 2 "$VKFORMER" bench matmul --size 8,0
run 2 "$VKFORMER" bench matmul --size 8 --repeat 0
run 2 "$VKFORMER" bench softmax --size 8
run 2 "$VKFORMER" bench model
run 2 "$VKFORMER" bench model --preset huge
run 2 "$VKFORMER" forward --src 1,2 --tgt 1
run 2 "$VKFORMER" generate --model x.safetensors --src 1,two

# ------------------------------------------------------------------ strict arguments

# Every command rejects what it does not take: exit 2 and exactly one stderr line
# naming the option, word or value (and nothing on stdout).
DEMO=$(dirname "$0")/../models/demo.safetensors
# usage_error SUBSTRING ARGS...: vkformer ARGS exits 2 with one line naming SUBSTRING.
usage_error() {
    needle=$1
    shift
    run 2 "$VKFORMER" "$@"
    expect_one_error_line "$needle"
}
usage_error '"two"' translate --model "$DEMO" forty two          # never "forty" alone
usage_error '"two"' tokenize --model "$DEMO" forty two
usage_error --json generate --model "$DEMO" --src 5,6 --json --json     # given twice (--json itself: test_json.py)
usage_error --json translate --model "$DEMO" --json --json "forty two"
usage_error "both write to stdout" forward --model "$DEMO" --src 5 --tgt 1 --out - --json
usage_error --json check --json
usage_error --input info --input x
usage_error --input check --input x
usage_error --input tune --input x
usage_error --input forward --model "$DEMO" --src 5 --tgt 1 --out "$TMP/x.npy" --input x
usage_error --input bench model --preset small --input x
usage_error --src translate --model "$DEMO" --src 5 "forty two"
usage_error --decode generate --model "$DEMO" --src 5 --decode
usage_error --quick bench matmul --size 8 --quick
usage_error --preset bench translate --model "$DEMO" --preset small
usage_error --raw-ids translate --model "$DEMO" --raw-ids one
usage_error --batch translate --model "$DEMO" --batch 4 "forty two"   # --batch is for --input
usage_error extra check extra
usage_error extra info extra
usage_error extra generate --model "$DEMO" --src 5 extra
usage_error extra forward --model "$DEMO" --src 5 --tgt 1 --out "$TMP/x.npy" extra
usage_error extra bench matmul --size 8 extra
usage_error extra tune extra
usage_error foo bench foo
grep -q attention "$TMP/err" || fail "'bench foo' does not list the attention benchmark: $(cat "$TMP/err")"
usage_error benchmark bench
usage_error --json --json info
usage_error sparse generate --model "$DEMO" --src 5 --attention sparse
usage_error sparse forward --model "$DEMO" --src 5 --tgt 1 --out "$TMP/x.npy" --attention sparse
usage_error local:3 generate --model "$DEMO" --src 5 --cross-attention local:3
usage_error f8 generate --model "$DEMO" --src 5 --precision f8
usage_error "given twice" forward --model "$DEMO" --src 5 --src 6 --tgt 1 --out "$TMP/x.npy"
usage_error "given twice" generate --model "$DEMO" --src 5 --max-new 3 --max-new 4
usage_error "--out - both" tune --out - --json
usage_error "not both" generate --model "$DEMO" --src 5 --input -
usage_error "not both" translate --model "$DEMO" --input - -
# Numbers: no zero where zero makes no sense, no signs, no junk, no overflow.
usage_error --max-new generate --model "$DEMO" --src 5 --max-new 0
usage_error --max-new translate --model "$DEMO" --max-new 0 "forty two"
usage_error --max-new generate --model "$DEMO" --src 5 --max-new -1
usage_error --max-new generate --model "$DEMO" --src 5 --max-new +3
usage_error --max-new generate --model "$DEMO" --src 5 --max-new 3x
usage_error --max-new generate --model "$DEMO" --src 5 --max-new 99999999999999999999999
usage_error --batch translate --model "$DEMO" --input - --batch 0
usage_error --batch translate --model "$DEMO" --input - --batch 5000
usage_error --batch bench model --preset small --batch 0
usage_error --src-len bench model --preset small --src-len 0
usage_error --repeat bench matmul --size 8 --repeat 0
usage_error --repeat bench startup --preset small --repeat 0
usage_error --repeat bench translate --model "$DEMO" --repeat 0
usage_error --batch bench translate --model "$DEMO" --batch 0
usage_error --m bench matmul --m 99999999999 --n 8 --k 8
usage_error --size bench matmul --size 8,
usage_error --seed generate --model "$DEMO" --src 5 --seed x
usage_error --temperature generate --model "$DEMO" --src 5 --temperature abc
usage_error --temperature generate --model "$DEMO" --src 5 --temperature inf
usage_error --length-penalty generate --model "$DEMO" --src 5 --beam 2 --length-penalty nan
usage_error --max-device-memory info --max-device-memory 0
usage_error --max-new generate --model "$DEMO" --src 5 --max-new

# --help: every command's own usage text on stdout, exit 0.
for cmd in info check forward generate translate tokenize tune "bench matmul" "bench model" "bench attention" \
    "bench startup" "bench translate"; do
    # shellcheck disable=SC2086
    run 0 "$VKFORMER" $cmd --help
    grep -q "vkformer $cmd" "$TMP/out" || fail "'$cmd --help' does not name the command: $(head -n 2 "$TMP/out")"
    [ "$(stdout_lines)" -ge 3 ] || fail "'$cmd --help' printed less than 3 lines"
    [ -s "$TMP/err" ] && fail "'$cmd --help' wrote to stderr: $(cat "$TMP/err")"
    case $cmd in bench\ attention) ;; *)
        grep -q -- "--device" "$TMP/out" || fail "'$cmd --help' does not list --device" ;;
    esac
done
run 0 "$VKFORMER" bench --help
grep -q attention "$TMP/out" || fail "'bench --help' does not list the attention benchmark"
run 0 "$VKFORMER" --help
for cmd in info check forward generate translate tokenize tune "bench matmul" "bench model" "bench attention" \
    "bench startup" "bench translate"; do
    grep -q -- " $cmd" "$TMP/out" || fail "'vkformer --help' does not mention '$cmd'"
done
run 0 "$VKFORMER" generate --model "$DEMO" --help --src 5  # --help wins, nothing runs

# ------------------------------------------------------------------ - means stdin or stdout

# forward --out -: the .npy on stdout, the same bytes as the file.
run 0 "$VKFORMER" forward --model "$DEMO" --src 5,6,7 --tgt 1,5 --out "$TMP/f.npy"
run 0 "$VKFORMER" forward --model "$DEMO" --src 5,6,7 --tgt 1,5 --out -
cmp -s "$TMP/out" "$TMP/f.npy" || fail "'forward --out -' wrote other bytes than --out FILE"
[ -e ./- ] && fail "'forward --out -' wrote a file named -"
# generate: --input - and a lone - read the id lists from stdin
printf '5,6,7\n8,9\n' >"$TMP/ids"
run 0 "$VKFORMER" generate --model "$DEMO" --src 5,6,7 --src 8,9 --max-new 8
cp "$TMP/out" "$TMP/gen.want"
run 0 sh -c '"$1" generate --model "$2" --input - --max-new 8 <"$3"' sh "$VKFORMER" "$DEMO" "$TMP/ids"
cmp -s "$TMP/out" "$TMP/gen.want" || fail "'generate --input -' differs from --src"
run 0 sh -c '"$1" generate --model "$2" - --max-new 8 <"$3"' sh "$VKFORMER" "$DEMO" "$TMP/ids"
cmp -s "$TMP/out" "$TMP/gen.want" || fail "'generate -' differs from --src"
# translate and tokenize: text on stdin
printf 'forty two\nseven\n' >"$TMP/text"
run 0 "$VKFORMER" translate --model "$DEMO" --input "$TMP/text"
cp "$TMP/out" "$TMP/tr.want"
[ "$(cat "$TMP/tr.want")" = "$(printf '42\n7')" ] || fail "translate --input FILE gave $(cat "$TMP/tr.want")"
run 0 sh -c '"$1" translate --model "$2" --input - <"$3"' sh "$VKFORMER" "$DEMO" "$TMP/text"
cmp -s "$TMP/out" "$TMP/tr.want" || fail "'translate --input -' differs from --input FILE"
run 0 sh -c '"$1" translate --model "$2" - --batch 1 <"$3"' sh "$VKFORMER" "$DEMO" "$TMP/text"
cmp -s "$TMP/out" "$TMP/tr.want" || fail "'translate -' differs from --input FILE"
run 0 "$VKFORMER" tokenize --model "$DEMO" "forty two"
cp "$TMP/out" "$TMP/tok.want"
run 0 sh -c 'echo "forty two" | "$1" tokenize --model "$2" -' sh "$VKFORMER" "$DEMO"
cmp -s "$TMP/out" "$TMP/tok.want" || fail "'tokenize -' differs from tokenize TEXT"
run 0 sh -c 'echo "forty two" | "$1" tokenize --model "$2" --input -' sh "$VKFORMER" "$DEMO"
cmp -s "$TMP/out" "$TMP/tok.want" || fail "'tokenize --input -' differs from tokenize TEXT"
# tune --out -: the tune file on stdout, the summary on stderr, no file named -
run 0 env VKFORMER_CACHE_DIR="$TMP/cache" "$VKFORMER" tune --quick --out -
"$PYTHON" -c 'import json, sys; j = json.load(sys.stdin); assert j["format"] == "vkformer-tune", j' <"$TMP/out" 2>/dev/null ||
    fail "'tune --out -' did not write the tune file to stdout: $(head -c 200 "$TMP/out")"
grep -q "wrote the tune file to stdout" "$TMP/err" || fail "'tune --out -' does not say where the file went"
[ -e ./- ] && fail "'tune --out -' wrote a file named -"
[ -d "$TMP/cache" ] && [ -n "$(ls "$TMP/cache" 2>/dev/null | grep tune-)" ] && fail "'tune --out -' wrote the device's tune file"

# ------------------------------------------------------------------ bench model

# A small random-weight model end to end: forward timing, decode step, memory.
run 0 "$VKFORMER" bench model --preset small --batch 2 --src-len 5 --tgt-len 4 --repeat 1 --json
"$PYTHON" - "$TMP/out" <<'PY' || fail "bench model --json output is wrong: $(cat "$TMP/out")"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 1, lines
r = json.loads(lines[0])
assert r["bench"] == "model" and r["preset"] == "small" and r["batch"] == 2, r
assert r["src_len"] == 5 and r["tgt_len"] == 4, r
assert r["forward_ms"] > 0 and r["encode_ms"] > 0 and r["step_ms"] > 0 and r["peak_bytes"] > 0, r
assert r["forward_ops"]["matmul"]["dispatches"] > 0 and r["step_ops"]["attention_decode"]["dispatches"] > 0, r
PY

# ------------------------------------------------------------------ precision auto

# auto is F32 activations on CPU drivers; VKFORMER_AUTO_PRECISION=f16 makes it
# choose as on a GPU: F16 where the device has 16-bit storage, and F32 again for a
# variant without F16 kernels (lsh).
fwd() { # fwd OUT.npy [env...] -- [options...]
    out=$1
    shift
    run 0 env "$@" "$VKFORMER" forward --model "$DEMO" --src 5,6,7,8,9 --tgt 1,5,6 --out "$out" $opts
}
run 0 "$VKFORMER" info --json
if "$PYTHON" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["devices"][j["default"]]["storage_16bit"] else 1)' "$TMP/out"; then
    has16=1
else
    has16=
fi
opts=""
fwd "$TMP/auto.npy" VKFORMER_AUTO_PRECISION=
fwd "$TMP/auto32.npy" VKFORMER_AUTO_PRECISION=f32
fwd "$TMP/auto16.npy" VKFORMER_AUTO_PRECISION=f16
opts="--precision f32"
fwd "$TMP/f32.npy" VKFORMER_AUTO_PRECISION=f16
if [ -n "$has16" ]; then
    opts="--precision f16"
    fwd "$TMP/f16.npy" VKFORMER_AUTO_PRECISION=
    cmp -s "$TMP/auto16.npy" "$TMP/f16.npy" || fail "auto chosen as f16 differs from --precision f16"
    cmp -s "$TMP/auto16.npy" "$TMP/auto.npy" && fail "auto chosen as f16 gave the F32 logits"
else
    cmp -s "$TMP/auto16.npy" "$TMP/auto.npy" || fail "auto chosen as f16 without 16-bit storage differs from auto"
fi
cmp -s "$TMP/auto.npy" "$TMP/auto32.npy" || fail "auto on a CPU driver differs from auto chosen as f32"
opts="--attention lsh:2:4"
fwd "$TMP/lsh_auto16.npy" VKFORMER_AUTO_PRECISION=f16
opts="--attention lsh:2:4 --precision f32"
fwd "$TMP/lsh_f32.npy" VKFORMER_AUTO_PRECISION=
cmp -s "$TMP/lsh_auto16.npy" "$TMP/lsh_f32.npy" || fail "lsh with auto chosen as f16 is not the F32 model"
opts="--attention lsh:2:4 --precision f16"
[ -n "$has16" ] && { run 1 "$VKFORMER" forward --model "$DEMO" --src 5,6,7 --tgt 1 --out "$TMP/x.npy" $opts;
    grep -q "no F16 form" "$TMP/err" || fail "lsh with --precision f16: no message naming it"; }

# ------------------------------------------------------------------ linking

# Vulkan is loaded at run time, so the tool starts (and reports exit code 3) on
# machines without a loader.
# VKFORMER_BINARY: the binary itself where $VKFORMER is a script that starts it
# through another driver's runner (tests/run_with.sh.in).
BINARY=${VKFORMER_BINARY:-$VKFORMER}
if command -v ldd >/dev/null 2>&1; then
    if ! ldd "$BINARY" >"$TMP/ldd" 2>&1; then
        fail "ldd $BINARY failed: $(cat "$TMP/ldd")"
    elif grep -qi 'libvulkan' "$TMP/ldd"; then
        fail "$BINARY links libvulkan: $(grep -i libvulkan "$TMP/ldd")"
    fi
else
    fail "ldd is not available to check the binary's libraries"
fi

cli_finish "test_cli ($NAME)"
