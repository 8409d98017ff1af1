#!/bin/sh
# The demo model through vkformer: every held-out example (never seen in
# training) translated in batches; exact-match accuracy must stay >= 95%.
# Usage: test_demo.sh VKFORMER MODEL HELDOUT.tsv
out=$("$1" translate --model "$2" --input "$3" --batch 100) || { echo "translate failed"; exit 1; }
summary=$(printf '%s\n' "$out" | tail -n 1)
echo "$summary"
lines=$(printf '%s\n' "$out" | grep -vc '^accuracy:')
[ "$lines" -eq "$(grep -c '' "$3")" ] || { echo "expected one output line per input, got $lines"; exit 1; }
percent=$(printf '%s' "$summary" | sed -n 's/^accuracy: [0-9]* of [0-9]* (\([0-9.]*\)%) exact matches$/\1/p')
[ -n "$percent" ] || { echo "no accuracy line"; exit 1; }
awk -v p="$percent" 'BEGIN { exit !(p >= 95.0) }' || { echo "accuracy $percent% is below 95%"; exit 1; }
