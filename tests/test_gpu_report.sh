#!/bin/sh
# tools/gpu_report.sh without a GPU and without Vulkan: a stub vkformer in a fake
# build folder whose meson test list was "configured" at other paths.
#  - usage errors exit 2 (no OUTDIR, an unknown part);
#  - a failing command is logged with its exit code and the part goes on (check exits
#    5 here; every matmul case still runs), and the part's summary line says so;
#  - suite: the runner rewrites the configured source/build paths and the software
#    ICD (as argument and as env) to this checkout's and GPU_REPORT_ICD, and passes
#    VKFORMER_VALIDATE; a filtered test does not run;
#  - summary: summary.md has the target table, the measured matmul ratio and "not
#    measured" where a part did not run.
#
# usage: test_gpu_report.sh [/path/to/tools/gpu_report.sh]
set -u
REPORT=${1:-$(dirname "$0")/../tools/gpu_report.sh}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_gpu_report.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

B=$TMP/build
mkdir -p "$B/meson-info" "$B/tests"
cat >"$B/vkformer" <<'EOF'
#!/bin/sh
case "$*" in
  "info --json") echo '{"command":"info","default":0,"devices":[{"name":"Stub GPU","type":"discrete","driver_name":"stub","driver_info":"1"}],"tuning":{"source":"built-in","file":"/nonexistent"},"device":"Stub GPU","driver":"stub 1","vkformer_version":"0.1.0"}' ;;
  check) echo "vkformer: a stub check failure" >&2; exit 5 ;;
  "bench matmul --size 256 "*) echo '{"command":"bench matmul","bench":"matmul","m":256,"n":256,"k":256,"dtype":"f32","ms":0.1,"gflops":335.5,"device":"Stub GPU","driver":"stub 1","vkformer_version":"0.1.0"}' ;;
  *) exit 0 ;;
esac
EOF
cat >"$B/tests/probe.sh" <<'EOF'
#!/bin/sh
{ echo "args: $*"; echo "icd: ${VK_ICD_FILENAMES:-} ${VK_DRIVER_FILES:-}"; echo "validate: ${VKFORMER_VALIDATE:-}"; } >"$PROBE_OUT"
EOF
chmod +x "$B/vkformer" "$B/tests/probe.sh"
echo '{}' >"$TMP/new_icd.json"
cat >"$B/meson-info/meson-info.json" <<'EOF'
{"directories": {"source": "/old/src", "build": "/old/build", "info": "/old/build/meson-info"}}
EOF
cat >"$B/meson-info/intro-tests.json" <<EOF
[{"name": "probe-lavapipe", "cmd": ["/old/build/tests/probe.sh", "/old/src/models/x", "/old/lvp.json"],
  "env": {"VKFORMER_VALIDATE": "1", "VK_ICD_FILENAMES": "/old/lvp.json", "PROBE_OUT": "/old/build/probe.txt"},
  "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe"]},
 {"name": "probe-swiftshader", "cmd": ["/old/build/tests/probe.sh"], "env": {}, "workdir": null, "timeout": 30,
  "suite": ["vkformer:swiftshader"]},
 {"name": "other-lavapipe", "cmd": ["/bin/false"], "env": {}, "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe"]}]
EOF

export GPU_REPORT_BUILD="$B" GPU_REPORT_ICD="$TMP/new_icd.json" GPU_REPORT_UNPACK=0 GPU_REPORT_SMALL=1
export GPU_REPORT_SUITE_FILTER='^probe' VKFORMER_CACHE_DIR="$TMP/cache"

"$REPORT" >/dev/null 2>&1
[ $? -eq 2 ] || fail "no OUTDIR: expected exit 2"
"$REPORT" "$TMP/out" nonsense >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown part: expected exit 2"

"$REPORT" "$TMP/out" info,suite matmul summary >"$TMP/stdout" 2>"$TMP/stderr" || fail "gpu_report.sh exited $?"
O=$TMP/out
grep -q "^check	5	" "$O/info/commands.tsv" 2>/dev/null || fail "check's exit code 5 is not in info/commands.tsv"
grep -q "^info: 3 commands, 1 failed (check=5)" "$O/info/summary.txt" 2>/dev/null ||
    fail "info summary: $(cat "$O/info/summary.txt" 2>/dev/null)"
n=$(grep -c '^f32-[^	]*	0	' "$O/matmul/commands.tsv" 2>/dev/null)
[ "$n" = 14 ] || fail "expected 14 bench matmul commands (2 sizes, 12 base shapes) with exit 0, got $n"
grep -q "absent: fp16 bench matmul" "$O/matmul/summary.txt" 2>/dev/null || fail "matmul summary does not name fp16 as absent"

P=$B/probe.txt
root=$(cd "$(dirname "$REPORT")/.." && pwd)
grep -qx "args: $root/models/x $TMP/new_icd.json" "$P" 2>/dev/null || fail "suite args not rewritten: $(cat "$P" 2>/dev/null)"
grep -qx "icd: $TMP/new_icd.json $TMP/new_icd.json" "$P" 2>/dev/null || fail "suite ICD env not rewritten: $(cat "$P" 2>/dev/null)"
grep -qx "validate: 1" "$P" 2>/dev/null || fail "suite test did not get VKFORMER_VALIDATE=1"
grep -q "1 tests ran (lavapipe suite" "$O/suite/summary.txt" 2>/dev/null || fail "suite summary: $(cat "$O/suite/summary.txt" 2>/dev/null)"
[ -f "$O/suite/other-gpu.log" ] && fail "a filtered test ran"

S=$O/summary.md
grep -q '^| fp32 matmul 256³ vs torch.matmul fp32, TF32 off | 335.5 GFLOP/s | — | — | not measured |' "$S" 2>/dev/null ||
    fail "summary.md lacks the matmul row: $(grep matmul "$S" 2>/dev/null | head -n 2)"
grep -q '^| validation messages (check, 1 suite tests) | 0 | 0 | — | met |' "$S" 2>/dev/null ||
    fail "summary.md lacks the validation row"
grep -q 'Device: Stub GPU' "$S" 2>/dev/null || fail "summary.md does not name the device"

if [ "$failures" -ne 0 ]; then
    sed 's/^/    stderr: /' "$TMP/stderr" | tail -n 30 >&2
    echo "test_gpu_report: $failures failures" >&2
    exit 1
fi
echo "test_gpu_report: all checks passed"
