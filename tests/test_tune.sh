#!/bin/sh
# vkformer tune --quick on one Vulkan driver, in a temporary cache directory
# (VKFORMER_CACHE_DIR; never the user's home): it writes the device's tune file;
# `info --json` then reports the tiles as coming from that file (VKFORMER_TUNE=0:
# built-in); `check` passes with the tuned tiles; a corrupt or foreign file is
# ignored with an info line (shown with --verbose) and the built-in tiles are used.
#
# usage: test_tune.sh /path/to/vkformer /path/to/icd.json
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 /path/to/vkformer /path/to/icd.json" >&2
    exit 2
fi
VKFORMER=$1
. "$(dirname "$0")/cli_lib.sh"
cli_setup test_tune "$2"
VKFORMER_CACHE_DIR=$TMP/cache
export VKFORMER_CACHE_DIR
unset VKFORMER_TUNE VKFORMER_PIPELINE_CACHE

# json_get FILE EXPR: prints EXPR evaluated on the JSON document j in FILE.
json_get() {
    "$PYTHON" -c 'import json, sys; j = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# Before tuning: built-in tiles, and the file name the tune file will have.
"$VKFORMER" info --json >"$TMP/info0.json" 2>"$TMP/err" || fail "info --json failed: $(cat "$TMP/err")"
[ "$(json_get "$TMP/info0.json" 'j["tuning"]["source"]')" = built-in ] || fail "tuning source is not built-in before tuning"
tune_file=$(json_get "$TMP/info0.json" 'j["tuning"]["file"]')
case $tune_file in
    "$VKFORMER_CACHE_DIR"/tune-*.json) ;;
    *) fail "tune file $tune_file is not in VKFORMER_CACHE_DIR" ;;
esac

# tune --quick writes it.
if ! "$VKFORMER" tune --quick --json >"$TMP/tune.json" 2>"$TMP/tune.err"; then
    fail "tune --quick failed"
    sed 's/^/    /' "$TMP/tune.err" >&2
fi
[ -f "$tune_file" ] || fail "tune --quick wrote no $tune_file"
[ "$(json_get "$TMP/tune.json" 'j["tune_file"]')" = "$tune_file" ] || fail "tune --json names another file"
[ "$(json_get "$tune_file" 'j["format"] + str(j["version"]) + str(j["quick"])')" = vkformer-tune1True ] ||
    fail "the tune file lacks format, version or quick"
[ "$(json_get "$tune_file" 'all(m["correct"] in (True, False) and m["ms"] > 0 for m in j["measurements"])')" = True ] ||
    fail "the tune file's measurements lack times or correctness"
grep -q 'GFLOP/s' "$TMP/tune.err" || fail "tune printed no measurements"

# A later run picks it up: the same tiles, and every op still matches the reference.
"$VKFORMER" info --json >"$TMP/info1.json" 2>"$TMP/err" || fail "info --json failed after tuning"
[ "$(json_get "$TMP/info1.json" 'j["tuning"]["source"]')" = file ] || fail "info --json does not report the tune file"
[ "$(json_get "$TMP/info1.json" 'j["tuning"]["matmul"]')" = "$(json_get "$TMP/tune.json" 'j["matmul"]')" ] ||
    fail "the matmul tiles in use differ from the tuned ones"
[ "$(json_get "$TMP/info1.json" 'j["tuning"]["attention"]')" = "$(json_get "$TMP/tune.json" 'j["attention"]')" ] ||
    fail "the attention tiles in use differ from the tuned ones"
"$VKFORMER" check >"$TMP/out" 2>"$TMP/err" || fail "check fails with the tuned tiles: $(tail -n 3 "$TMP/out" "$TMP/err")"
VKFORMER_TUNE=0 "$VKFORMER" info --json >"$TMP/info2.json" 2>"$TMP/err" || fail "info --json with VKFORMER_TUNE=0 failed"
[ "$(json_get "$TMP/info2.json" 'j["tuning"]["source"]')" = built-in ] || fail "VKFORMER_TUNE=0 did not turn the tune file off"

# Corrupt and foreign files: ignored with one info line; built-in tiles.
cp "$tune_file" "$TMP/good.json"
head -c 100 "$TMP/good.json" >"$tune_file"
"$VKFORMER" info --json --verbose >"$TMP/info3.json" 2>"$TMP/err" || fail "info --json with a corrupt tune file failed"
[ "$(json_get "$TMP/info3.json" 'j["tuning"]["source"]')" = built-in ] || fail "a corrupt tune file was used"
grep -q 'tune file .* ignored: not valid JSON' "$TMP/err" || fail "no message about the corrupt tune file: $(cat "$TMP/err")"
"$PYTHON" -c 'import json, sys; j = json.load(open(sys.argv[1])); j["device"]["driver_version"] += 1; json.dump(j, open(sys.argv[2], "w"))' \
    "$TMP/good.json" "$tune_file"
"$VKFORMER" info --json --verbose >"$TMP/info4.json" 2>"$TMP/err" || fail "info --json with a foreign tune file failed"
[ "$(json_get "$TMP/info4.json" 'j["tuning"]["source"]')" = built-in ] || fail "a tune file of another driver was used"
grep -q 'tune file .* ignored: written for another device or driver' "$TMP/err" ||
    fail "no message about the foreign tune file: $(cat "$TMP/err")"

cli_finish test_tune.sh
