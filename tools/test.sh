#!/usr/bin/env bash
# The whole test suite: set up (packages, SwiftShader, Mesa lavapipe and drm-shim
# from Debian unstable, build), then every test on the three software Vulkan drivers
# (SwiftShader, Debian 12's lavapipe, and unstable's lavapipe, which has
# cooperative matrix) with the validation layer on, and the virtual GPUs' pipeline
# builds (suite vgpu: RADV and NVK over drm-shim); any validation message fails
# a test. If unstable's lavapipe could not be fetched (the archive moved), its
# tests are reported as skipped and one loud line says so. Extra arguments go to
# meson test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${VKFORMER_BUILD_DIR:-$root/build}
"$root/tools/setup.sh" --swiftshader

# Both drivers must be present: a suite on one driver only is not the suite.
# (The list is captured first: grep -q closing a pipe early would make meson
# die of SIGPIPE, which pipefail reports as a failure.)
registered=$(meson test -C "$build_dir" --list 2>/dev/null)
for suite in lavapipe swiftshader lavapipe-unstable; do
    if ! grep -q "^vkformer:$suite / " <<<"$registered"; then
        echo "test: no tests registered for $suite (is its ICD installed?)" >&2
        exit 1
    fi
done

unstable=$(meson introspect --buildoptions "$build_dir" |
           python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "lavapipe_unstable"))')
if [ -z "$unstable" ]; then
    echo "test: WARNING: Mesa lavapipe from Debian unstable is missing (see tools/fetch_newer.sh lavapipe): its tests, and every cooperative-matrix test, are reported as SKIPPED" >&2
fi
drm_shim=$(meson introspect --buildoptions "$build_dir" |
           python3 -c 'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "drm_shim"), ""))')
if [ -z "$drm_shim" ]; then
    echo "test: WARNING: Mesa drm-shim from Debian unstable is missing (see tools/fetch_newer.sh drm-shim): the virtual-GPU test (suite vgpu) is reported as SKIPPED" >&2
fi

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
