#!/bin/sh
# vkformer bench attention and the attention variants on the command line, on
# one Vulkan driver:
#  - JSON lines with every key the docs promise, one per (variant, n), with
#    errors against dense that are exactly zero where the variant is dense under
#    its pattern (local with a window past n, bigbird whose blocks cover n,
#    lowrank with K >= n) and clearly not zero where it is not;
#  - a size past the device's binding limit is skipped with a note, not a crash;
#  - --plot writes a PNG (when gnuplot is installed), --model reports greedy
#    agreement, bad arguments give one line and exit 2;
#  - forward/generate/translate take every variant; --verbose says where lsh and
#    lowrank do not apply; a malformed variant is refused naming the problem.
#
# usage: test_bench_attention.sh /path/to/vkformer /path/to/icd.json /path/to/model.safetensors
set -u
if [ $# -ne 3 ]; then
    echo "usage: $0 VKFORMER ICD MODEL" >&2
    exit 2
fi
VKFORMER=$1
MODEL=$3
. "$(dirname "$0")/cli_lib.sh"
cli_setup test_bench_attention "$2"

# ------------------------------------------------------------------ JSON lines

V=dense-naive,dense,local:300,local:8,strided:8:16,bigbird:16:1:2,bigbird:64:1:1,tglobal:8:16,lsh:2:16,lowrank:200,lowrank:16
run 0 "$VKFORMER" bench attention --n 100,200 --variants "$V" --heads 2 --head-dim 16 --batch 2 --repeat 1 --json
cp "$TMP/out" "$TMP/bench.json"
cp "$TMP/err" "$TMP/bench.err"
if ! "$PYTHON" - "$TMP/bench.json" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
variants = "dense-naive,dense,local:300,local:8,strided:8:16,bigbird:16:1:2,bigbird:64:1:1,tglobal:8:16,lsh:2:16,lowrank:200,lowrank:16".split(",")
assert len(rows) == 2 * len(variants), f"{len(rows)} lines"
keys = {"variant", "n", "heads", "head_dim", "batch", "ms", "bytes", "max_abs_err", "cos_sim"}
by = {}
for r in rows:
    assert keys <= set(r), f"missing keys in {r}"
    assert (r["heads"], r["head_dim"], r["batch"]) == (2, 16, 2), r
    assert r["ms"] > 0 and r["bytes"] > 0, r
    by[(r["variant"], r["n"])] = r
for n in (100, 200):
    exact = ["dense", "dense-naive", "local:300", "lowrank:200"] + (["bigbird:64:1:1"] if n <= 192 else [])
    for v in exact:
        assert by[(v, n)]["max_abs_err"] < 1e-4 and by[(v, n)]["cos_sim"] > 0.99999, (v, n, by[(v, n)])
    for v in ["local:8", "strided:8:16", "bigbird:16:1:2", "tglobal:8:16", "lsh:2:16", "lowrank:16"]:
        assert by[(v, n)]["max_abs_err"] > 1e-2 and by[(v, n)]["cos_sim"] < 0.999, (v, n, by[(v, n)])
    # dense-naive holds the scores: more memory than dense; lsh and lowrank hold scratch
    assert by[("dense-naive", n)]["bytes"] > by[("dense", n)]["bytes"]
    assert by[("lsh:2:16", n)]["bytes"] > by[("dense", n)]["bytes"]
    # tglobal holds its global keys (the block means): more than dense, and closer to it than local:8 alone
    assert by[("tglobal:8:16", n)]["bytes"] > by[("dense", n)]["bytes"]
EOF
then
    fail "bench attention --json lines"
    cat "$TMP/bench.json" >&2
fi
# a progress line per case on stderr
progress=$(grep -c 'bench attention: \[' "$TMP/bench.err")
[ "$progress" -eq 22 ] || fail "expected 22 progress lines on stderr, got $progress"

# ------------------------------------------------------------------ past the device's limits

# n just past the length whose one-head n x n scores fill the device's largest
# binding: dense-naive is skipped with a note, local runs. No crash.
run 0 "$VKFORMER" info --json
big=$("$PYTHON" -c 'import json,sys,math; j=json.load(open(sys.argv[1])); print(math.isqrt(j["devices"][j["default"]]["max_storage_buffer_range"] // 4) + 1)' "$TMP/out")
run 0 "$VKFORMER" bench attention --n "$big" --variants dense-naive,local:4 --heads 1 --head-dim 4 --repeat 1 --json
if ! "$PYTHON" - "$TMP/out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 2, rows
naive, local = rows
assert local["ms"] > 0, local
assert naive["ms"] is None and "binding" in naive["skipped"], naive
EOF
then
    fail "bench attention past the binding limit"
    cat "$TMP/out" >&2
fi

# ------------------------------------------------------------------ F16 storage

run 0 "$VKFORMER" info --json
if "$PYTHON" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["devices"][j["default"]]["storage_16bit"] else 1)' "$TMP/out"; then
    run 0 "$VKFORMER" bench attention --n 64,100 --variants dense,local:8,lsh:1:8 --heads 2 --head-dim 16 --repeat 1 --precision f16 --json
    if ! "$PYTHON" - "$TMP/out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 6 and all(r["precision"] == "f16" for r in rows), rows
for r in rows:
    if r["variant"] == "dense":   # F16 storage against fp32 on the same rounded inputs: output rounding only
        assert 0 <= r["max_abs_err"] < 2e-3 and r["cos_sim"] > 0.99999, r
        assert r["bytes"] == (r["n"] * 3 * 32 + r["n"] * 32) * 2, r   # QKV and out as halves
    elif r["variant"] == "lsh:1:8":
        assert r["ms"] is None and "F16" in r["skipped"], r
EOF
    then
        fail "bench attention --precision f16"
        cat "$TMP/out" >&2
    fi
else
    run 1 "$VKFORMER" bench attention --n 64 --variants dense --precision f16
    grep -q "16-bit" "$TMP/err" || fail "--precision f16 without 16-bit storage: no message naming it"
fi

# ------------------------------------------------------------------ plot and model

if command -v gnuplot >/dev/null 2>&1; then
    run 0 "$VKFORMER" bench attention --n 32,64 --variants dense,local:4 --heads 1 --head-dim 8 --repeat 1 --plot "$TMP/p.png"
    if ! head -c 8 "$TMP/p.png" 2>/dev/null | od -An -tx1 | grep -q '89 50 4e 47'; then
        fail "--plot did not write a PNG"
    fi
else
    echo "gnuplot not installed: --plot not tested" >&2
fi
# --plot is checked before the run: an unwritable place is a usage error (2), a
# missing gnuplot an error (1), each one line and nothing on stdout; a gnuplot that
# fails (here one that exits at once, which used to kill vkformer with SIGPIPE) is
# one line and exit 1, never a signal.
PLOT_ARGS="--n 32 --variants dense --heads 1 --head-dim 8 --repeat 1"
# shellcheck disable=SC2086
run 2 "$VKFORMER" bench attention $PLOT_ARGS --plot "$TMP/no-such-folder/p.png"
[ "$(grep -c '' "$TMP/err")" -eq 1 ] && grep -q "no-such-folder" "$TMP/err" && [ ! -s "$TMP/out" ] ||
    fail "--plot into a missing folder: expected one line naming it: $(cat "$TMP/err")"
mkdir -p "$TMP/nobin" "$TMP/fakebin"
# shellcheck disable=SC2086
run 1 env PATH="$TMP/nobin" "$VKFORMER" bench attention $PLOT_ARGS --plot "$TMP/p2.png"
[ "$(grep -c '' "$TMP/err")" -eq 1 ] && grep -q "gnuplot" "$TMP/err" && [ ! -s "$TMP/out" ] ||
    fail "--plot without gnuplot: expected one line naming gnuplot before the run: $(cat "$TMP/err")"
printf '#!/bin/sh\nexit 3\n' >"$TMP/fakebin/gnuplot"
chmod +x "$TMP/fakebin/gnuplot"
for i in 1 2 3; do
    # shellcheck disable=SC2086
    run 1 env PATH="$TMP/fakebin" "$VKFORMER" bench attention $PLOT_ARGS --plot "$TMP/p3.png"
    [ "$(grep -c '^vkformer:' "$TMP/err")" -eq 1 ] && grep -q "gnuplot failed" "$TMP/err" ||
        fail "--plot with a failing gnuplot: expected one line naming gnuplot: $(cat "$TMP/err")"
done
run 0 "$VKFORMER" bench attention --n 16 --variants dense,local:0,lowrank:64 --heads 1 --head-dim 4 --repeat 1 --model "$MODEL" --json
if ! "$PYTHON" - "$TMP/out" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
agree = {r["variant"]: r["greedy_agreement"] for r in rows if "greedy_agreement" in r}
assert agree["dense"] == 1.0 and agree["lowrank:64"] == 1.0, agree   # lowrank K >= every length: dense
assert agree["local:0"] < 1.0, agree
EOF
then
    fail "bench attention --model greedy agreement"
    cat "$TMP/out" >&2
fi

# ------------------------------------------------------------------ bad arguments

for args in "--n 0" "--n 12,x" "--precision f8" "--variants bogus" "--variants lsh:0:4" "--heads 0" "--repeat" "--what" \
    "--plot -" "--repeat 1 --repeat 2" "extra" "--max-device-memory 0" "--heads +2" "--seed -1" \
    "--batch 99999999999999999999999" "--kernel tiled"; do
    # shellcheck disable=SC2086
    run 2 "$VKFORMER" bench attention $args
    [ "$(grep -c '' "$TMP/err")" -eq 1 ] || fail "bench attention $args: expected one line, got: $(cat "$TMP/err")"
    [ -s "$TMP/out" ] && fail "bench attention $args wrote to stdout"
done
run 0 "$VKFORMER" bench attention --help
grep -q "bench attention" "$TMP/out" && grep -q -- "--plot" "$TMP/out" || fail "bench attention --help: no usage text"

# ------------------------------------------------------------------ variants in model commands

SRC=5,6,7,8,9,10,11,12,13
for a in dense dense-naive local:2 strided:1:3 bigbird:2:1:1 lsh:2:4 lowrank:3; do
    run 0 "$VKFORMER" forward --model "$MODEL" --attention "$a" --src "$SRC" --tgt 1,5,6 --out "$TMP/l.npy"
    run 0 "$VKFORMER" generate --model "$MODEL" --attention "$a" --src "$SRC" --max-new 5
done
run 0 "$VKFORMER" generate --model "$MODEL" --cross-attention lowrank:4 --src "$SRC" --max-new 5
run 0 "$VKFORMER" generate --model "$MODEL" --attention lsh:2:4 --src "$SRC" --max-new 3 --verbose
grep -q "decode steps attend densely" "$TMP/err" || fail "--verbose does not say what lsh does in decode steps"
run 0 "$VKFORMER" generate --model "$MODEL" --attention lowrank:3 --src "$SRC" --max-new 3 --verbose
grep -q "stays dense" "$TMP/err" || fail "--verbose does not say what lowrank does in the decoder"
run 0 "$VKFORMER" generate --model "$MODEL" --attention lsh:2:4 --src "$SRC" --max-new 3
grep -q "info" "$TMP/err" && fail "info messages printed without --verbose"
# the seed matters for the seeded variants, and the same seed repeats
run 0 "$VKFORMER" forward --model "$MODEL" --attention lsh:1:2 --seed 1 --src "$SRC" --tgt 1,5,6 --out "$TMP/s1.npy"
run 0 "$VKFORMER" forward --model "$MODEL" --attention lsh:1:2 --seed 1 --src "$SRC" --tgt 1,5,6 --out "$TMP/s1b.npy"
run 0 "$VKFORMER" forward --model "$MODEL" --attention lsh:1:2 --seed 2 --src "$SRC" --tgt 1,5,6 --out "$TMP/s2.npy"
cmp -s "$TMP/s1.npy" "$TMP/s1b.npy" || fail "the same seed gave different logits"
cmp -s "$TMP/s1.npy" "$TMP/s2.npy" && fail "seeds 1 and 2 gave the same lsh logits"
# a variant the library cannot read is a usage error (exit 2), like any other bad value, before the model loads
for bad in sparse bigbird:0:1:1 bigbird:4:1:65 lsh:0:4 lsh:2:0 lowrank:0 local:x strided:4:0 "bigbird:4:1"; do
    run 2 "$VKFORMER" forward --model "$MODEL" --attention "$bad" --src "$SRC" --tgt 1,5 --out "$TMP/l.npy"
    [ "$(grep -c '' "$TMP/err")" -eq 1 ] && grep -q -- "--attention" "$TMP/err" ||
        fail "forward --attention $bad: expected one error line naming --attention: $(cat "$TMP/err")"
done
run 2 "$VKFORMER" generate --model "$MODEL" --attention sparse --src "$SRC"
[ "$(grep -c '' "$TMP/err")" -eq 1 ] && grep -q -- "sparse" "$TMP/err" || fail "generate --attention sparse: $(cat "$TMP/err")"
run 2 "$VKFORMER" forward --model "$MODEL" --cross-attention local:3 --src "$SRC" --tgt 1,5 --out "$TMP/l.npy"
grep -q "cross-attention" "$TMP/err" || fail "--cross-attention local:3: message does not name cross-attention"

cli_finish test_bench_attention
