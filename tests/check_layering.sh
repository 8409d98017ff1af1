#!/bin/sh
# The library's layers call only down (issue 16): for every object of the static
# library, each symbol it leaves undefined that another object of the library
# defines must be defined in the same layer or one below it. A layer is a folder
# of src/ (objects are named src_<folder>_<file>.o by meson); bottom up:
#   runtime    src/runtime: context, device, memory, pipelines, command lists, tile choices;
#   ops        src/ops: one host function per kernel;
#   attention  src/attention: the attention kernels, built on the ops, their
#              switch, and the public call over every variant;
#   audio      src/audio: sound files and log-mel features (host);
#   arch       src/arch: the encoder-decoder graph built from a spec;
#   tokenizers src/tokenizers: SentencePiece, byte-level BPE, tokenizer.json in
#              Hugging Face's stages, vocabularies;
#   families   src/families: model files and folders, one file per family, the
#              registry, generation defaults;
#   decode     src/decode: generation (option checks, plans, greedy, beam, sampling);
#   model      src/model.c (the public model object), src/tune.c and src/transcribe.c;
#   pool       src/pool: one model on several devices (a replica and a thread each);
#   serve      src/serve: the server's scheduler (requests batched at step boundaries).
# Inside a layer, the files' calls form no circle (a file that both calls and is
# called back by another of its layer fails, naming both).
# An object in no layer (a source file outside these folders) fails too: add it
# to LAYERS below ("prefix_*" takes every file of a folder).
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
runtime: runtime_*
ops: ops_*
attention: attention_*
audio: audio_*
arch: arch_*
tokenizers: tokenizers_*
families: families_*
decode: decode_*
model: model tune transcribe
pool: pool_*
serve: serve_*
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
        for (i = 2; i <= NF; i++) {
            if ($i ~ /\*$/) { p = $i; sub(/\*$/, "", p); prefix_of[p] = layers }
            else layer_of[$i] = layers
        }
        next
    }
    {
        stem = $3; sub(/\.[^.]*$/, "", stem)
        if (!(stem in layer_of)) for (p in prefix_of) if (index(stem, p) == 1) layer_of[stem] = prefix_of[p]
    }
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
        # Inside a layer, files call each other without a circle: peel off files
        # that call no file still left (Kahn); what remains lies on a circle.
        for (i = 1; i <= n; i++) {
            split(uses[i], u, " ")
            sym = u[1]; stem = u[3]
            if (!(sym in def) || !(stem in layer_of)) continue
            to = defstem[sym]
            if (to == stem || !(to in layer_of) || layer_of[to] != layer_of[stem]) continue
            if (!((stem, to) in edge)) { edge[stem, to] = sym; out[stem]++; files[stem] = 1; files[to] = 1 }
        }
        do {
            removed = 0
            for (f in files) if (!(f in gone) && out[f] + 0 == 0) {
                gone[f] = 1; removed = 1
                for (key in edge) { split(key, e, SUBSEP); if (e[2] == f && !(e[1] in gone)) out[e[1]]-- }
            }
        } while (removed)
        for (key in edge) {
            split(key, e, SUBSEP)
            if (!(e[1] in gone) && !(e[2] in gone)) {
                printf "check_layering: %s and %s are on a circle in layer %s (%s calls %s)\n", e[1], e[2],
                       layer_name[layer_of[e[1]]], e[1], edge[key]
                bad++
            }
        }
        if (bad) { printf "check_layering: %d problem(s); a layer may call only its own or lower layers, without circles\n", bad; exit 1 }
        printf "check_layering: %d objects, every call goes down or stays in its layer, no circle inside a layer\n", count
    }
' - "$TMP/symbols"
