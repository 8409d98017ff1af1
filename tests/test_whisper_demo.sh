#!/bin/sh
# The Whisper demo folder (models/whisper-numbers) through vkformer: it loads, and on each
# committed held-out clip the teacher-forced argmax of `vkformer forward --audio` equals the
# one tests/whisper_ref.py computed when tools/train_whisper_demo.py trained the model
# (DIR/expected.tsv: file, target ids, expected argmax, transcript). Further arguments go to
# forward. Usage: test_whisper_demo.sh VKFORMER MODEL_DIR DIR [FORWARD_ARGS...]
vkformer=$1 model=$2 dir=$3
shift 3
n=0
while IFS="$(printf '\t')" read -r file tgt want text; do
    case $file in '#'*|'') continue ;; esac
    out=$("$vkformer" forward --model "$model" --audio "$dir/$file" --tgt "$tgt" --json "$@") ||
        { echo "$file: forward failed"; exit 1; }
    got=$(printf '%s\n' "$out" | sed -n 's/.*"argmax":\[\([0-9,]*\)\].*/\1/p')
    [ -n "$got" ] || { echo "$file: no argmax in: $out"; exit 1; }
    if [ "$got" != "$want" ]; then
        echo "$file (\"$text\"): argmax $got, expected $want"
        exit 1
    fi
    echo "$file (\"$text\"): argmax $got as expected"
    n=$((n + 1))
done < "$dir/expected.tsv"
[ "$n" -ge 3 ] || { echo "expected.tsv holds $n clips, expected at least 3"; exit 1; }
