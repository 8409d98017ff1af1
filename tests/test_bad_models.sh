#!/bin/sh
# Model files that break the format each fail `vkformer generate` with exit 1 and
# one stderr line naming the tensor or key; the valid one generates.
# Usage: test_bad_models.sh VKFORMER DIR (DIR written by gen_bad_models.py).
vkformer=$1
dir=$2
# stderr goes to a folder of this run's own: the drivers' runs share $dir
errs=$(mktemp -d "${TMPDIR:-/tmp}/vkf-bad-models.XXXXXX") || exit 1
trap 'rm -rf "$errs"' EXIT
failures=0
passed=0
while read -r name expectation substring; do
    file=$dir/$name.safetensors
    out=$("$vkformer" generate --model "$file" --src 3,4,5 --max-new 4 2>"$errs/$name.err")
    code=$?
    err=$(grep -v "WARNING: UNSUPPORTED" "$errs/$name.err")
    lines=$(printf '%s' "$err" | grep -c '')
    if [ "$expectation" = ok ]; then
        if [ $code -ne 0 ] || [ -z "$out" ]; then
            echo "FAIL $name: expected success, got exit $code: $err"; failures=$((failures + 1)); continue
        fi
    else
        if [ $code -ne 1 ]; then
            echo "FAIL $name: expected exit 1, got $code ($err)"; failures=$((failures + 1)); continue
        fi
        if [ "$lines" -ne 1 ]; then
            echo "FAIL $name: expected one stderr line, got $lines: $err"; failures=$((failures + 1)); continue
        fi
        case $err in
            *"$substring"*) ;;
            *) echo "FAIL $name: message does not name \"$substring\": $err"; failures=$((failures + 1)); continue ;;
        esac
    fi
    passed=$((passed + 1))
done < "$dir/expect.txt"
echo "test_bad_models: $passed passed, $failures failed"
[ $failures -eq 0 ]
