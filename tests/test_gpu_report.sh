#!/bin/sh
# tools/gpu_report.sh: the one-call plan, first with a stub vkformer (no Vulkan, seconds),
# then, where a build folder and a driver are given, the dry run on that driver.
#
# Stub (a fake build folder whose meson test list was "configured" at other paths, a
# plan shrunk by GPU_REPORT_PLAN):
#  - usage errors exit 2; --plan's table adds up to its deadline and timeout_s;
#  - a failing command is recorded with its exit code and its part goes on (check
#    exits 5); a hanging command (bench attention --kernel scalar) is stopped at its
#    part's deadline and every later part still runs;
#  - suite: the runner rewrites the configured source/build paths and the software ICD
#    (argument and env) to this checkout's and GPU_REPORT_ICD, passes VKFORMER_VALIDATE,
#    runs the coopmat test of lavapipe-unstable on the plain binary, kills a test still
#    running at the budget, and records the one it did not reach;
#  - OUTDIR holds at most 8 files: strays are packed into extra.tar.gz;
#  - summary.md: the five targets "not measured", every part with its status;
#  - a deadline shorter than the plan runs the first parts and says why the rest did not;
#  - set-up: missing libraries' .debs are unpacked into GL/root, named by LD_LIBRARY_PATH.
# Dry run (args: the script, then a build folder; VK_DRIVER_FILES names the driver): the
# whole plan with --small, which must write at most 8 files, give every part a status,
# measure the fp32 matmul, and end inside its deadline.
#
# usage: test_gpu_report.sh [/path/to/tools/gpu_report.sh [BUILD]]
set -u
REPORT=${1:-$(dirname "$0")/../tools/gpu_report.sh}
BUILD=${2:-}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_gpu_report.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
PARTS="info suite matmul coopmat attention translate forward tune"
nfiles() { find "$1" -type f | wc -l; }
# rec FILE PY-EXPR: the records of results.jsonl for which the expression holds (r: the record)
rec() { python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if eval(sys.argv[2]): print(json.dumps(r))' "$1" "$2" 2>/dev/null; }

# ------------------------------------------------------------------ usage, --plan
"$REPORT" >/dev/null 2>&1
[ $? -eq 2 ] || fail "no OUTDIR: expected exit 2"
"$REPORT" "$TMP/u" nonsense >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown part: expected exit 2"
"$REPORT" --bogus "$TMP/u" >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown option: expected exit 2"
"$REPORT" --plan >"$TMP/plan" 2>&1 || fail "--plan exited $?"
python3 - "$TMP/plan" <<'EOF' || fail "--plan does not add up: $(cat "$TMP/plan")"
import re, sys
t = open(sys.argv[1]).read()
parts = re.findall(r"^(\w+) +(\d+)  ", t, re.M)
setup, total, reserve, deadline = map(int, re.search(r"deadline of the script: (\d+) \+ (\d+) \+ (\d+) = (\d+) s", t).groups())
dl, margin, timeout = map(int, re.search(r"timeout_s of the device call: (\d+) \+ (\d+) = (\d+) s", t).groups())
call, t2, allowance = map(int, re.search(r"start-up allowance: (\d+) - (\d+) = (\d+) s", t).groups())
names = [p for p, _ in parts]
assert names == "info suite matmul coopmat attention translate forward tune".split(), names
assert sum(int(s) for _, s in parts) == total and setup + total + reserve == deadline == dl
assert deadline + margin == timeout == t2 and call - timeout == allowance and call <= 420 and allowance >= 60
assert "timeout_s=%d" % timeout in t and 'carry=["build", ".gl"]' in t
EOF

# ------------------------------------------------------------------ the stub
B=$TMP/build
mkdir -p "$B/meson-info" "$B/tests"
cat >"$B/vkformer" <<'EOF'
#!/bin/sh
case "$*" in
  "info --json") echo '{"command":"info","default":0,"devices":[{"name":"Stub GPU","type":"discrete","driver_name":"stub","driver_info":"1","api_version":"1.3"}],"tuning":{"source":"built-in","file":"/nonexistent"},"device":"Stub GPU","driver":"stub 1","vkformer_version":"0.1.0"}' ;;
  check) echo "vkformer: a stub check failure" >&2; exit 5 ;;
  "bench matmul --size 256 --repeat 3 --json") echo '{"command":"bench matmul","bench":"matmul","m":256,"n":256,"k":256,"dtype":"f32","kernel":"stub","ms":0.1,"gflops":335.5,"device":"Stub GPU"}' ;;
  *"--kernel scalar"*) exec sleep 60 ;;
  *) exit 0 ;;
esac
EOF
cat >"$B/tests/probe.sh" <<'EOF'
#!/bin/sh
{ echo "args: $*"; echo "icd: ${VK_ICD_FILENAMES:-} ${VK_DRIVER_FILES:-}"; echo "validate: ${VKFORMER_VALIDATE:-}"; echo "ld: ${LD_LIBRARY_PATH:-}"; } >"$PROBE_OUT"
EOF
printf '#!/bin/sh\necho "coopmat: $*" >"$PROBE_OUT.coopmat"\n' >"$B/tests/coopmat.sh"
: >"$B/tests/vkformer-lavapipe-unstable"
chmod +x "$B/vkformer" "$B/tests/probe.sh" "$B/tests/coopmat.sh"
echo '{}' >"$TMP/new_icd.json"
cat >"$B/meson-info/meson-info.json" <<'EOF'
{"directories": {"source": "/old/src", "build": "/old/build", "info": "/old/build/meson-info"}}
EOF
cat >"$B/meson-info/intro-tests.json" <<EOF
[{"name": "ops-lavapipe", "cmd": ["/old/build/tests/probe.sh", "/old/src/models/x", "/old/lvp.json"],
  "env": {"VKFORMER_VALIDATE": "1", "VK_ICD_FILENAMES": "/old/lvp.json", "PROBE_OUT": "/old/build/probe.txt", "LD_LIBRARY_PATH": "/old/build/"},
  "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe"]},
 {"name": "ops-swiftshader", "cmd": ["/old/build/tests/probe.sh"], "env": {}, "workdir": null, "timeout": 30,
  "suite": ["vkformer:swiftshader"]},
 {"name": "parity-coopmat-lavapipe-unstable", "cmd": ["/old/build/tests/coopmat.sh", "/old/build/tests/vkformer-lavapipe-unstable", "--coopmat"],
  "env": {"PROBE_OUT": "/old/build/probe.txt"}, "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe-unstable"]},
 {"name": "attention-lavapipe", "cmd": ["/bin/sleep", "60"], "env": {}, "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe"]},
 {"name": "model-lavapipe", "cmd": ["/bin/true"], "env": {}, "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe"]},
 {"name": "other-lavapipe", "cmd": ["/bin/false"], "env": {}, "workdir": null, "timeout": 30, "suite": ["vkformer:lavapipe"]}]
EOF

O=$TMP/out
mkdir -p "$O/stray"
for i in 1 2 3 4 5 6 7 8 9; do echo "$i" >"$O/stray/f$i"; done
# suite: 1 job, budget 9 - 6 s (+ info's savings): ops and parity-coopmat, then attention
# (sleep 60) is killed at the budget and model is not reached. No torch: nothing is
# compared. Deadline 5 + 38 + 15 = 58 s; attention's hang costs its part alone.
t0=$(date +%s)
env GPU_REPORT_BUILD="$B" GPU_REPORT_ICD="$TMP/new_icd.json" GPU_REPORT_UNPACK=0 GPU_REPORT_SMALL=1 \
    GPU_REPORT_PLAN="info 3 suite 9 matmul 3 coopmat 3 attention 5 translate 5 forward 5 tune 5" \
    GPU_REPORT_SUITE_TESTS="ops parity-coopmat attention model" GPU_REPORT_SUITE_FILTER= GPU_REPORT_JOBS=1 \
    TORCH_PYTHON=none GPU_REPORT_WORK="$TMP/work" LD_LIBRARY_PATH=/set-up/lib \
    "$REPORT" "$O" >"$TMP/stdout" 2>"$TMP/stderr" || fail "gpu_report.sh exited $?"
wall=$(($(date +%s) - t0))
R=$O/results.jsonl
[ "$(nfiles "$O")" -le 8 ] || fail "$(nfiles "$O") files under OUTDIR: $(find "$O" -type f)"
tar -tzf "$O/extra.tar.gz" 2>/dev/null | grep -q 'stray/f9' || fail "the stray files are not in extra.tar.gz"
tar -tzf "$O/logs.tar.gz" 2>/dev/null | grep -q 'gpu-report/info/check.log' || fail "logs.tar.gz lacks info/check.log"
[ "$wall" -le 58 ] || fail "the stub run took ${wall}s, past its deadline of 58 s"
rec "$R" 'r.get("gr") == "command" and r["cmd"] == "check" and r["rc"] == 5 and "stub check failure" in r["last_error"]' |
    grep -q . || fail "check's exit code 5 and its error are not recorded"
[ "$(rec "$R" 'r.get("gr") == "result" and r["cmd"] == "f32-auto"' | wc -l)" = 1 ] || fail "the f32 matmul's JSON line is not recorded"
rec "$R" 'r.get("gr") == "command" and r["cmd"] == "fused-scalar" and r["status"] == "timeout"' | grep -q . ||
    fail "the hanging command is not recorded as a timeout"
for p in $PARTS; do
    rec "$R" "r.get('gr') == 'part' and r['part'] == '$p' and r['status'] == 'ran'" | grep -q . || fail "part $p did not run"
done
rec "$R" 'r.get("gr") == "report" and r.get("finished") and r["elapsed_s"] <= 58' | grep -q . ||
    fail "no finished report record inside the deadline"
P=$B/probe.txt
root=$(cd "$(dirname "$REPORT")/.." && pwd)
grep -qx "args: $root/models/x $TMP/new_icd.json" "$P" 2>/dev/null || fail "suite args not rewritten: $(cat "$P" 2>/dev/null)"
grep -qx "icd: $TMP/new_icd.json $TMP/new_icd.json" "$P" 2>/dev/null || fail "suite ICD env not rewritten: $(cat "$P" 2>/dev/null)"
grep -qx "validate: 1" "$P" 2>/dev/null || fail "suite test did not get VKFORMER_VALIDATE=1"
# the test's own LD_LIBRARY_PATH (the build folder) first, then the set-up's (.gl/root there)
grep -qx "ld: $B/:/set-up/lib" "$P" 2>/dev/null || fail "suite LD_LIBRARY_PATH not the test's then the set-up's: $(cat "$P" 2>/dev/null)"
grep -qx "coopmat: $B/vkformer --coopmat" "$P.coopmat" 2>/dev/null || fail "parity-coopmat not on the plain binary: $(cat "$P.coopmat" 2>/dev/null)"
python3 - "$O/suite.json" <<'EOF' || fail "suite.json: $(cat "$O/suite.json")"
import json, sys
s = {t["name"]: t["status"] for t in json.load(open(sys.argv[1]))["tests"]}
assert s == {"ops": "ok", "parity-coopmat": "ok", "attention": "killed (budget)", "model": "not reached (budget)",
             "other": "not selected"}, s
EOF
S=$O/summary.md
for t in "fp32 matmul 256³" "fp16 matmul 256³ through cooperative matrices" "fused attention fp16" "forward, batch" "translation,"; do
    grep -F "$t" "$S" | grep -q '| not measured |' || fail "summary.md: no \"not measured\" row for $t"
done
grep -q 'Device: Stub GPU' "$S" || fail "summary.md does not name the device"
grep -q '| suite | 9 | .* | ran: 3 of 4 selected tests ran' "$S" || fail "summary.md's suite part: $(grep '^| suite' "$S")"
grep -q '| killed (budget) | attention' "$S" || fail "summary.md does not name the killed test"

# a deadline shorter than the plan (30 - 15 s of reserve, a suite planned for 40 s):
# info runs, the suite's test hangs until the suite's deadline, most later parts say
# they were not started (with under a quarter of their plan left), the last one too
O2=$TMP/out2
env GPU_REPORT_BUILD="$B" GPU_REPORT_ICD="$TMP/new_icd.json" GPU_REPORT_UNPACK=0 GPU_REPORT_SMALL=1 \
    GPU_REPORT_DEADLINE=30 GPU_REPORT_PLAN="suite 40" TORCH_PYTHON=none GPU_REPORT_SUITE_TESTS="attention" \
    GPU_REPORT_SUITE_FILTER= GPU_REPORT_JOBS=1 GPU_REPORT_WORK="$TMP/work2" \
    "$REPORT" "$O2" >/dev/null 2>"$TMP/stderr2" || fail "short deadline: exited $?"
R=$O2/results.jsonl
rec "$R" 'r.get("gr") == "part" and r["part"] == "info" and r["status"] == "ran"' | grep -q . || fail "short deadline: info did not run"
n=$(rec "$R" 'r.get("gr") == "part" and r["status"].startswith("not started: the call")' | wc -l)
[ "$n" -ge 4 ] || fail "short deadline: $n of the 6 parts after the suite say they were not started"
n=$(rec "$R" 'r.get("gr") == "part"' | wc -l)
[ "$n" = 8 ] || fail "short deadline: $n of 8 parts have a status"
rec "$R" 'r.get("gr") == "report" and r.get("finished") and r["elapsed_s"] <= 30' | grep -q . ||
    fail "short deadline: the call did not end inside its 30 s"
grep -q '| tune | .* | not started: the call' "$O2/summary.md" || fail "short deadline: summary.md's tune row"

# set-up on a machine without the loader and libjansson (a fake ldconfig lists nothing, a
# fake ldd misses libjansson.so.4, and once that is there, what it needs: libfoo.so.1, then
# libbar.so.2 that no .deb holds): the .debs that hold them are unpacked into GL/root, not
# into /, the library no .deb holds is named, and the commands run with LD_LIBRARY_PATH there
if command -v dpkg-deb >/dev/null; then
    GL=$TMP/gl
    mkdir -p "$GL" "$TMP/fakebin"
    for p in libvulkan1:usr/lib/x86_64-linux-gnu/libvulkan.so.1 libjansson4:usr/lib/x86_64-linux-gnu/libjansson.so.4 \
             libfoo1:usr/lib/x86_64-linux-gnu/libfoo.so.1 \
             vulkan-validationlayers:usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json; do
        d=$TMP/pkg/${p%%:*}
        mkdir -p "$d/DEBIAN" "$d/$(dirname "${p#*:}")"
        : >"$d/${p#*:}"
        printf 'Package: %s\nVersion: 1\nArchitecture: amd64\nMaintainer: test\nDescription: fake\n' "${p%%:*}" >"$d/DEBIAN/control"
        dpkg-deb -b "$d" "$GL/${p%%:*}_1_amd64.deb" >/dev/null 2>&1 || fail "dpkg-deb failed for ${p%%:*}"
    done
    printf '#!/bin/sh\nexit 0\n' >"$TMP/fakebin/ldconfig"
    printf '#!/bin/sh\nd=%s/root/usr/lib/x86_64-linux-gnu\n[ -f $d/libjansson.so.4 ] || echo "\tlibjansson.so.4 => not found"\n[ -f $d/libjansson.so.4 ] && [ ! -f $d/libfoo.so.1 ] && echo "\tlibfoo.so.1 => not found"\n[ -f $d/libjansson.so.4 ] && echo "\tlibbar.so.2 => not found"\nexit 0\n' "$GL" >"$TMP/fakebin/ldd"
    chmod +x "$TMP/fakebin/ldconfig" "$TMP/fakebin/ldd"
    env PATH="$TMP/fakebin:$PATH" GPU_REPORT_GL="$GL" GPU_REPORT_BUILD="$B" GPU_REPORT_ICD="$TMP/new_icd.json" \
        GPU_REPORT_SMALL=1 TORCH_PYTHON=none VK_LAYER_PATH= GPU_REPORT_WORK="$TMP/work3" \
        "$REPORT" "$TMP/out3" info >/dev/null 2>"$TMP/stderr3" || fail "set-up run exited $?"
    [ -f "$GL/root/usr/lib/x86_64-linux-gnu/libvulkan.so.1" ] && [ -f "$GL/root/usr/lib/x86_64-linux-gnu/libjansson.so.4" ] ||
        fail "the loader and libjansson were not unpacked into GL/root: $(cat "$TMP/stderr3")"
    [ -f "$GL/root/usr/lib/x86_64-linux-gnu/libfoo.so.1" ] ||
        fail "libfoo (needed by what was unpacked) was not unpacked: $(cat "$TMP/stderr3")"
    grep -q 'needs libbar.so.2, which no .deb of .gl/ holds' "$TMP/stderr3" ||
        fail "the library no .deb holds is not named: $(cat "$TMP/stderr3")"
    tar -xzOf "$TMP/out3/logs.tar.gz" gpu-report/info/env.txt 2>/dev/null | grep -q "^LD_LIBRARY_PATH: $GL/root/usr/lib/x86_64-linux-gnu" ||
        fail "LD_LIBRARY_PATH does not name GL/root: $(tar -xzOf "$TMP/out3/logs.tar.gz" gpu-report/info/env.txt 2>/dev/null)"
fi

if [ "$failures" -ne 0 ]; then
    sed 's/^/    stderr: /' "$TMP/stderr" | tail -n 40 >&2
    sed "s/^/    stderr (short deadline): /" "$TMP/stderr2" | tail -n 40 >&2
    echo "test_gpu_report: $failures failures (stub)" >&2
    exit 1
fi
echo "test_gpu_report: stub checks passed (${wall}s)"

# ------------------------------------------------------------------ the dry run
if [ -z "$BUILD" ] || [ ! -x "$BUILD/vkformer" ] || [ -z "${VK_DRIVER_FILES:-}" ]; then
    echo "test_gpu_report: no build folder and driver given: the dry run is left out"
    exit 0
fi
D=$TMP/dry
t0=$(date +%s)
env GPU_REPORT_BUILD="$BUILD" GPU_REPORT_UNPACK=0 GPU_REPORT_WORK="$TMP/drywork" \
    "$REPORT" --small "$D" >"$TMP/dry.stdout" 2>"$TMP/dry.stderr" || fail "dry run exited $?"
wall=$(($(date +%s) - t0))
R=$D/results.jsonl
deadline=$("$REPORT" --plan | sed -n 's/^deadline of the script: .* = \([0-9]*\) s$/\1/p')
[ "$wall" -le "$deadline" ] || fail "the dry run took ${wall}s, past the plan's deadline of ${deadline}s"
[ "$(nfiles "$D")" -le 8 ] || fail "$(nfiles "$D") files under the dry run's OUTDIR"
for p in $PARTS; do
    rec "$R" "r.get('gr') == 'part' and r['part'] == '$p' and r['status']" | grep -q . || fail "dry run: part $p has no status"
done
rec "$R" 'r.get("gr") == "result" and r["cmd"] == "f32-auto" and r.get("gflops", 0) > 0' | grep -q . ||
    fail "dry run: no fp32 matmul figure"
rec "$R" 'r.get("gr") == "command" and r["cmd"] == "check" and r["rc"] == 0 and r["validation_lines"] == 0' | grep -q . ||
    fail "dry run: check with the validation layer did not pass"
grep -q '^## Targets' "$D/summary.md" 2>/dev/null || fail "dry run: summary.md has no targets"
if [ "$failures" -ne 0 ]; then
    sed 's/^/    stderr: /' "$TMP/dry.stderr" | tail -n 40 >&2
    echo "test_gpu_report: $failures failures (dry run)" >&2
    exit 1
fi
echo "test_gpu_report: dry run on $VK_DRIVER_FILES passed in ${wall}s (deadline ${deadline}s)"
grep '^| ' "$D/summary.md" | sed -n '1,8p'
