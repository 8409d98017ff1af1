#!/bin/sh
# The demo model through vkformer: every held-out example (never seen in
# training) translated in batches; exact-match accuracy must stay >= MIN_PERCENT
# (default 95%). Further arguments go to translate (e.g. --precision int8).
# Usage: test_demo.sh VKFORMER MODEL HELDOUT.tsv [MIN_PERCENT [TRANSLATE_ARGS...]]
vkformer=$1 model=$2 tsv=$3
min=${4:-95.0}
[ $# -ge 4 ] && shift 4 || shift $#
out=$("$vkformer" translate --model "$model" --input "$tsv" --batch 100 "$@") || { echo "translate failed"; exit 1; }
summary=$(printf '%s\n' "$out" | tail -n 1)
echo "$summary${*:+ (translate $*)}"
lines=$(printf '%s\n' "$out" | grep -vc '^accuracy:')
[ "$lines" -eq "$(grep -c '' "$tsv")" ] || { echo "expected one output line per input, got $lines"; exit 1; }
percent=$(printf '%s' "$summary" | sed -n 's/^accuracy: [0-9]* of [0-9]* (\([0-9.]*\)%) exact matches$/\1/p')
[ -n "$percent" ] || { echo "no accuracy line"; exit 1; }
awk -v p="$percent" -v m="$min" 'BEGIN { exit !(p >= m) }' || { echo "accuracy $percent% is below $min%"; exit 1; }
