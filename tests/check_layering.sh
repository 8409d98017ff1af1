#!/bin/sh
# The library's layers call only down (issue 16): for every object of the static
# library, each symbol it leaves undefined that another object of the library
# defines must be defined in the same layer or one below it. The layers, bottom up:
#   runtime    status, device, memory, pipeline, pipeline_cache, record, tuning,
#              volk_build: context, memory, pipelines, command lists, tile choices;
#   ops        ops: one host function per kernel;
#   attention  attention, attention_lsh, attention_op: the attention kernels, built
#              on the ops, and the public call over every variant;
#   model      model, generate, hf_marian, safetensors, tokenizer_spm, tune.
# An object in no layer (a new source file) fails too: add it to LAYERS below.
# Prints each call that goes up (caller, symbol, where it is defined) and exits 1.
#
# usage: check_layering.sh path/to/libvkformer.a
set -u
LIB=${1:?usage: check_layering.sh path/to/libvkformer.a}
NM=${NM:-nm}
AR=${AR:-ar}
case "$LIB" in /*) ;; *) LIB=$PWD/$LIB ;; esac
[ -f "$LIB" ] || { echo "check_layering: no such library: $LIB" >&2; exit 2; }

LAYERS='
runtime: status device memory pipeline pipeline_cache record tuning volk_build
ops: ops
attention: attention attention_lsh attention_op
model: model generate hf_marian safetensors tokenizer_spm tune
'

TMP=$(mktemp -d "${TMPDIR:-/tmp}/check_layering.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
(cd "$TMP" && "$AR" x "$LIB") || { echo "check_layering: $AR x $LIB failed" >&2; exit 2; }

# One line per symbol: "D symbol file" (defined, global) or "U symbol file", where
# file is the source's name (meson names the members src_device.c.o and the like).
: >"$TMP/symbols"
count=0
for o in "$TMP"/*.o; do
    [ -f "$o" ] || continue
    member=${o##*/}
    src=${member#src_}
    src=${src%.o}
    "$NM" -g --defined-only "$o" | awk -v f="$src" 'NF >= 3 { print "D", $3, f }' >>"$TMP/symbols" ||
        { echo "check_layering: $NM failed on $member" >&2; exit 2; }
    "$NM" -u "$o" | awk -v f="$src" 'NF >= 2 { print "U", $2, f }' >>"$TMP/symbols"
    count=$((count + 1))
done
[ "$count" -gt 0 ] || { echo "check_layering: no objects in $LIB" >&2; exit 2; }

printf '%s\n' "$LAYERS" | awk -v count="$count" '
    # the layer table: "name: file file ..." (file without its .c / .cc)
    FNR == NR {
        if (NF < 2) next
        name = $1; sub(/:$/, "", name)
        layers++; layer_name[layers] = name
        for (i = 2; i <= NF; i++) layer_of[$i] = layers
        next
    }
    { stem = $3; sub(/\.[^.]*$/, "", stem) }
    !(stem in layer_of) && !(stem in unknown) {
        unknown[stem] = 1
        printf "check_layering: %s is in no layer (add it to LAYERS in tests/check_layering.sh)\n", $3
        bad++
    }
    $1 == "D" { if (!($2 in def)) def[$2] = $3; defstem[$2] = stem; next }
    $1 == "U" { uses[++n] = $2 " " $3 " " stem }
    END {
        for (i = 1; i <= n; i++) {
            split(uses[i], u, " ")
            sym = u[1]; file = u[2]; stem = u[3]
            if (!(sym in def) || !(stem in layer_of) || !(defstem[sym] in layer_of)) continue
            from = layer_of[stem]; to = layer_of[defstem[sym]]
            if (to > from) {
                printf "check_layering: %s (%s) calls %s, defined in %s (%s, above it)\n", file, layer_name[from], sym,
                       def[sym], layer_name[to]
                bad++
            }
        }
        if (bad) { printf "check_layering: %d problem(s); a layer may call only its own or lower layers\n", bad; exit 1 }
        printf "check_layering: %d objects, every call goes down or stays in its layer\n", count
    }
' - "$TMP/symbols"
