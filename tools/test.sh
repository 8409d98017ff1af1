#!/usr/bin/env bash
# The whole test suite: set up (packages, SwiftShader, build), then every test on
# both software Vulkan drivers (SwiftShader and lavapipe) with the validation
# layer on; any validation message fails a test. Extra arguments go to meson test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${VKFORMER_BUILD_DIR:-$root/build}
"$root/tools/setup.sh" --swiftshader

# Both drivers must be present: a suite on one driver only is not the suite.
# (The list is captured first: grep -q closing a pipe early would make meson
# die of SIGPIPE, which pipefail reports as a failure.)
registered=$(meson test -C "$build_dir" --list 2>/dev/null)
for suite in lavapipe swiftshader; do
    if ! grep -q "^vkformer:$suite / " <<<"$registered"; then
        echo "test: no tests registered for $suite (is its ICD installed?)" >&2
        exit 1
    fi
done

status=0
meson test -C "$build_dir" --print-errorlogs --num-processes "$(nproc)" "$@" || status=$?
# One plain closing line, counted from meson's log.
python3 - "$build_dir/meson-logs/testlog.json" <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"): passed += 1
        elif r == "SKIP": skipped += 1
        else: failed += 1
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
PY
exit $status
