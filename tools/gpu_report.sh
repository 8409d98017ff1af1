#!/usr/bin/env bash
# The GPU report: every figure the GPU targets need, from one run on a machine with a
# GPU (made for the lent NVIDIA H100 of the device tool: root, no network).
#
#   tools/gpu_report.sh --fetch                  HERE (network): Debian 12's libvulkan1 and
#                                                vulkan-validationlayers .debs into .gl/
#   tools/gpu_report.sh [--small] OUTDIR PART... THERE: run the parts, results under OUTDIR
#
# PART (one or more, or comma-separated): info suite tune matmul attention model startup
# torch translate summary, or all (every part, in that order). Each part writes OUTDIR/PART/ (JSON,
# logs, commands.tsv with each command's exit code and seconds) and one summary line (in
# OUTDIR/PART/summary.txt, OUTDIR/parts.txt and on stdout). A failing command is logged
# and the part goes on; each part stops starting commands at its time budget (every
# command runs under `timeout`), so a part ends well inside 10 minutes. `summary` reads
# what the others wrote and writes OUTDIR/summary.md: the target ratios, met / not met /
# not measured; run it here on the merged OUTDIRs of several calls. The exit status is
# 0 whatever the commands gave (see the summary lines), 2 on a usage error.
#
# Vulkan: when the loader (libvulkan.so.1) or the validation layer is missing, the
# .debs in .gl/ are unpacked (as root: into /, then ldconfig; else into .gl/root with
# LD_LIBRARY_PATH and VK_LAYER_PATH). The driver: GPU_REPORT_ICD if set, else NVIDIA's
# ICD file where one exists, else what VK_DRIVER_FILES / VK_ICD_FILENAMES name (a dry run
# on lavapipe: VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json).
#
# Environment: GPU_REPORT_DEADLINE=S (seconds for this invocation: parts that would not
# fit are not started, and say so; e.g. 560 under the device tool's 600 s limit),
# GPU_REPORT_TUNE_FILE (see restore_tune_file), GPU_REPORT_SMALL=1 (= --small: tiny
# sizes, a dry run of a few minutes on lavapipe), GPU_REPORT_BUILD (the build folder; default build), TORCH_PYTHON (a Python
# with torch; default: the first of python3, /usr/bin/python3 that imports torch),
# VKFORMER_CACHE_DIR (pipeline cache and tune file; default .cache/gpu-report in the
# repository, so `tune` serves the later parts and the user's ~/.cache is untouched),
# GPU_REPORT_SUITE_FILTER (regex on test names; --small default: a few quick tests),
# GPU_REPORT_JOBS (suite tests at a time; 4), GPU_REPORT_UNPACK=0 (never unpack .gl/).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_REPORT_BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
small=${GPU_REPORT_SMALL:-0}
all_parts=(info suite tune matmul attention model startup torch translate summary)

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# ------------------------------------------------------------------ --fetch (here)

fetch() {
    # Minimal: libvulkan1 and vulkan-validationlayers depend only on libc6, libgcc-s1
    # and libstdc++6 (apt-cache depends), which any Debian or Ubuntu with Python has.
    local lists=/tmp/gpu-report-apt-lists
    mkdir -p "$root/.gl" "$lists/partial" || return 1
    local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
    apt-get "${o[@]}" -q update >&2 || return 1
    rm -f "$root"/.gl/libvulkan1_*.deb "$root"/.gl/vulkan-validationlayers_*.deb
    (cd "$root/.gl" && apt-get "${o[@]}" -q download libvulkan1 vulkan-validationlayers) >&2 || return 1
    ls -l "$root"/.gl/*.deb
}

# ------------------------------------------------------------------ Vulkan set-up (there)

have_loader() { ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '; }
have_layer() {
    local d
    for d in ${VK_LAYER_PATH:+${VK_LAYER_PATH//:/ }} ${VK_ADD_LAYER_PATH:+${VK_ADD_LAYER_PATH//:/ }} /usr/share/vulkan/explicit_layer.d \
             /usr/local/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d; do
        [ -f "$d/VkLayer_khronos_validation.json" ] && return 0
    done
    return 1
}

setup_vulkan() {
    local want=() f
    # root: refresh the linker cache first (the NVIDIA libraries the ICD names may be
    # installed but not yet in it)
    [ "$(id -u)" = 0 ] && ldconfig 2>/dev/null
    if [ "${GPU_REPORT_UNPACK:-1}" = 1 ]; then
        have_loader || want+=("$root"/.gl/libvulkan1_*.deb)
        have_layer || want+=("$root"/.gl/vulkan-validationlayers_*.deb)
    fi
    for f in "${want[@]}"; do
        if [ ! -f "$f" ]; then
            echo "gpu_report: $(basename "$f") is not in .gl/ (run tools/gpu_report.sh --fetch where there is network)" >&2
            continue
        fi
        if [ "$(id -u)" = 0 ]; then
            dpkg -x "$f" / && echo "gpu_report: unpacked $(basename "$f") into /" >&2
        else
            mkdir -p "$root/.gl/root" && dpkg -x "$f" "$root/.gl/root" &&
                echo "gpu_report: unpacked $(basename "$f") into .gl/root" >&2
        fi
    done
    if [ ${#want[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ]; then
            ldconfig
        elif [ -d "$root/.gl/root" ]; then
            export LD_LIBRARY_PATH="$root/.gl/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            export VK_LAYER_PATH="$root/.gl/root/usr/share/vulkan/explicit_layer.d${VK_LAYER_PATH:+:$VK_LAYER_PATH}"
        fi
    fi
    # The driver: explicit, else NVIDIA's, else what the environment names.
    local icd=${GPU_REPORT_ICD:-}
    if [ -z "$icd" ]; then
        for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
                 /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.x86_64.json \
                 /usr/local/share/vulkan/icd.d/nvidia_icd.json; do
            [ -f "$f" ] && { icd=$f; break; }
        done
    fi
    [ -z "$icd" ] && icd=${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}
    if [ -n "$icd" ]; then
        export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
    else
        echo "gpu_report: no ICD file found or named; the loader searches its default places" >&2
    fi
    ICD=$icd
}

# A tune file from an earlier call (GPU_REPORT_TUNE_FILE, default .gl/tunefile.json,
# e.g. OUTDIR/tune/tunefile.json of a machine since given back) goes where this
# device's tune file belongs, unless one is there already.
restore_tune_file() {
    local from=${GPU_REPORT_TUNE_FILE:-$root/.gl/tunefile.json} to
    [ -f "$from" ] && [ -x "$VK" ] || return 0
    to=$("$VK" info --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["tuning"]["file"])' 2>/dev/null)
    if [ -n "$to" ] && [ ! -f "$to" ]; then
        mkdir -p "$(dirname "$to")" && cp "$from" "$to" && echo "gpu_report: restored the tune file $to from $from" >&2
    fi
}

find_torch_python() {
    local p
    for p in ${TORCH_PYTHON:-} python3 /usr/bin/python3 python; do
        command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null && { echo "$p"; return 0; }
    done
    return 1
}

# ------------------------------------------------------------------ commands of a part

# part_begin NAME BUDGET_S: makes OUTDIR/NAME, resets the command table and the clock.
# The budget shrinks to what GPU_REPORT_DEADLINE (seconds for this whole invocation)
# leaves; with under 20 s left the part is not started (its summary line says so) and
# part_begin fails.
part_begin() {
    PART=$1
    PART_BUDGET=$2
    PART_DIR=$OUTDIR/$1
    PART_START=$SECONDS
    PART_RUN=0 PART_FAILED=() PART_ABSENT=()
    if [ -n "${GPU_REPORT_DEADLINE:-}" ] && [ "$1" != summary ]; then
        local left=$((GPU_REPORT_DEADLINE - SECONDS - 5))
        if [ "$left" -lt 20 ]; then
            echo "== $1: not started, GPU_REPORT_DEADLINE=${GPU_REPORT_DEADLINE}s is spent" >&2
            echo "$1: not run (GPU_REPORT_DEADLINE spent): run this part again" >>"$OUTDIR/parts.txt"
            echo "$1: not run (GPU_REPORT_DEADLINE spent): run this part again"
            return 1
        fi
        [ "$PART_BUDGET" -gt "$left" ] && PART_BUDGET=$left
    fi
    mkdir -p "$PART_DIR"
    : >"$PART_DIR/commands.tsv"
    echo "== $1 (budget ${PART_BUDGET}s) $(date -u +%H:%M:%S)" >&2
}

# run NAME TIMEOUT_S CMD...: stdout to PART_DIR/NAME.out, stderr to NAME.log, under
# `timeout` (at most what is left of the part's budget); exit code and seconds to
# commands.tsv. Never fails the script.
run() {
    local name=$1 limit=$2
    shift 2
    local left=$((PART_BUDGET - (SECONDS - PART_START)))
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        printf '%s\t%s\t%s\t%s\n' "$name" "not-run" 0 "$*" >>"$PART_DIR/commands.tsv"
        PART_FAILED+=("$name=not-run(budget)")
        echo "   $name: not run, the part's budget is spent" >&2
        return 0
    fi
    local t0=$SECONDS rc
    echo "   $name: $* (timeout ${limit}s)" >&2
    timeout -k 10 "$limit" "$@" >"$PART_DIR/$name.out" 2>"$PART_DIR/$name.log" </dev/null
    rc=$?
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" "$*" >>"$PART_DIR/commands.tsv"
    PART_RUN=$((PART_RUN + 1))
    if [ "$rc" -ne 0 ]; then
        PART_FAILED+=("$name=$rc")
        echo "   $name: exit $rc after $((SECONDS - t0))s; last lines of $PART/$name.log:" >&2
        tail -n 3 "$PART_DIR/$name.log" | sed 's/^/     /' >&2
    fi
    return 0
}

# absent TEXT: a case the issue asks for that today's tools cannot express.
absent() {
    PART_ABSENT+=("$1")
    printf '%s\t%s\t%s\t%s\n' "-" "absent" 0 "$1" >>"$PART_DIR/commands.tsv"
}

part_end() {
    local line="$PART: $PART_RUN commands, ${#PART_FAILED[@]} failed"
    [ ${#PART_FAILED[@]} -gt 0 ] && line+=" (${PART_FAILED[*]})"
    [ -n "${1:-}" ] && line+="; $1"
    [ ${#PART_ABSENT[@]} -gt 0 ] && line+="; absent: $(IFS=';'; echo "${PART_ABSENT[*]}")"
    line+="; $((SECONDS - PART_START))s"
    echo "$line" >"$PART_DIR/summary.txt"
    echo "$line" >>"$OUTDIR/parts.txt"
    echo "$line"
}


# ------------------------------------------------------------------ sizes

set_sizes() {
if [ "$small" = 1 ]; then
    MM_SIZES="128 256"; MM_TARGET=256
    PREFILL=32; DECODE=1                        # rows of the base shapes (batch x length)
    ATT_N=128,256,512; ATT_HEADS=2; ATT_REPEAT=1; ATT_AT=256; ATT_LARGE=512
    ATT_MATCH=(--n 128 --heads 2 --batch 1)     # bench_torch.py --small's attention
    MODEL_PRESET=small; MODEL_BATCHES="1 2"; MODEL_LEN=16; MODEL_REPEAT=2
    DECODE_SRC=8; DECODE_TGT=4; FORWARD_BATCH=2
    STARTUP_PRESET=small; STARTUP_REPEAT=1
    TORCH_ARGS=(--small)
else
    MM_SIZES="512 1024 2048 4096 8192"; MM_TARGET=4096
    PREFILL=4096; DECODE=8                      # base model, batch 8 x 512 tokens; a decode step of 8
    ATT_N=1024,4096,16384,65536; ATT_HEADS=8; ATT_REPEAT=3; ATT_AT=4096; ATT_LARGE=16384
    ATT_MATCH=(--n 4096 --heads 16 --batch 4)   # bench_torch.py's attention: (4, 16, 4096, 64)
    MODEL_PRESET=base; MODEL_BATCHES="1 8"; MODEL_LEN=512; MODEL_REPEAT=5
    DECODE_SRC=64; DECODE_TGT=64; FORWARD_BATCH=8
    STARTUP_PRESET=base; STARTUP_REPEAT=3
    TORCH_ARGS=()
fi
}

write_config() {
    cat >"$OUTDIR/config.json" <<EOF
{"small": $([ "$small" = 1 ] && echo true || echo false), "mm_target": $MM_TARGET,
 "att_at": $ATT_AT, "att_large": $ATT_LARGE, "model_preset": "$MODEL_PRESET",
 "forward_batch": $FORWARD_BATCH, "model_len": $MODEL_LEN, "decode_src": $DECODE_SRC, "decode_tgt": $DECODE_TGT,
 "startup_preset": "$STARTUP_PRESET"}
EOF
}

# ------------------------------------------------------------------ parts

part_info() {
    part_begin info 90 || return 0
    {
        echo "date: $(date -u +%FT%TZ)"
        echo "host: $(uname -srm)"
        echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
        echo "build: $build"
        echo "icd: ${ICD:-none}"
        echo "loader: $(ldconfig -p 2>/dev/null | grep -m1 'libvulkan\.so\.1 ' | sed 's/.*=> //')"
        echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
        echo "VK_LAYER_PATH: ${VK_LAYER_PATH:-}"
        echo "VKFORMER_CACHE_DIR: $VKFORMER_CACHE_DIR"
        echo "small: $small"
        command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
            --format=csv,noheader 2>&1 | sed 's/^/nvidia-smi: /'
    } >"$PART_DIR/env.txt"
    run info-json 60 "$VK" info --json
    mv -f "$PART_DIR/info-json.out" "$PART_DIR/info.json"
    run info-text 60 "$VK" info
    VKFORMER_VALIDATE=1 run check 70 "$VK" check
    local dev
    dev=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); d=j["devices"][j["default"]]
print(d["name"], "(" + d["type"] + ",", d["driver_name"], d["driver_info"] + ")")' "$PART_DIR/info.json" 2>/dev/null)
    part_end "device: ${dev:-unknown}"
}

part_suite() {
    part_begin suite 300 || return 0
    local filter=${GPU_REPORT_SUITE_FILTER:-}
    [ -z "$filter" ] && [ "$small" = 1 ] && filter='^(cli|device|errors|safetensors)(-|$)'
    local line
    line=$(python3 - "$build" "$root" "${ICD:-}" "$PART_DIR" "${TORCH_PY:-}" \
        "$((PART_BUDGET - 10))" "${GPU_REPORT_JOBS:-4}" "$filter" <<'PY'
# The meson tests of the build folder, run without meson (the GPU machine may lack it,
# and the folder was configured at another path): read meson-info/intro-tests.json,
# take the lavapipe suite (the swiftshader suite where lavapipe is absent) and the host
# suite, rewrite the configured source and build paths to this checkout's and the
# software ICD (as env or argument) to this machine's, and run each test with its
# env (VKFORMER_VALIDATE=1 among it) and its timeout.
import concurrent.futures, json, os, re, subprocess, sys, time
build, root, icd, out, torch_py, budget, jobs, filt = sys.argv[1:9]
budget, jobs, start = float(budget), int(jobs), time.time()
info = json.load(open(os.path.join(build, "meson-info", "meson-info.json")))
old_src, old_build = info["directories"]["source"], info["directories"]["build"]
tests = json.load(open(os.path.join(build, "meson-info", "intro-tests.json")))
suites = {s.split(":")[-1] for t in tests for s in t["suite"]}
driver = "lavapipe" if "lavapipe" in suites else "swiftshader" if "swiftshader" in suites else None
chosen = [t for t in tests if any(s.split(":")[-1] in (driver, "host") for s in t["suite"])]
old_icds = {t["env"][k] for t in chosen for k in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES") if k in t["env"]}
subst = {old_build: build, old_src: root}
if icd:
    subst.update({o: icd for o in old_icds})
pat = re.compile("|".join(re.escape(k) for k in sorted(subst, key=len, reverse=True)))
fix = lambda s: pat.sub(lambda m: subst[m.group(0)], s)
usr_py_torch = subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0 \
    if os.path.exists("/usr/bin/python3") else False

def validation_count(text):
    """Validation messages in a log: the message lines, or the totals a program reported."""
    lines = len(re.findall(r"validation: ", text))
    totals = sum(int(a) + int(b) for a, b in re.findall(r"validation layer reported (\d+) errors and (\d+) warnings", text))
    totals += sum(int(a) for a in re.findall(r"(\d+) validation messages in all", text))
    return max(lines, totals)

def run(t):
    name = t["name"].replace("-" + driver, "-gpu") if driver else t["name"]
    rec = {"name": name, "meson_name": t["name"], "rc": None, "secs": 0, "validation_lines": 0}
    if filt and not re.search(filt, t["name"]):
        rec["status"] = "filtered"
        return rec
    cmd = [fix(c) for c in t["cmd"]]
    if cmd[0] == "/usr/bin/python3" and torch_py and not usr_py_torch:
        cmd[0] = torch_py  # the test wants torch; /usr/bin/python3 here has none
    if not os.path.exists(cmd[0]) or not all(os.path.exists(c) for c in cmd[1:] if c.startswith(build + "/")):
        rec["status"] = "not built (run ninja -C BUILD, all targets, before carrying the build folder)"
        return rec
    left = budget - (time.time() - start)
    if left < 5:
        rec["status"] = "not run (budget)"
        return rec
    env = dict(os.environ)
    env.update({k: fix(v) for k, v in t["env"].items()})
    if icd:
        env["VK_ICD_FILENAMES"] = env["VK_DRIVER_FILES"] = icd
    limit = min(float(t["timeout"] or 300), left)
    log = os.path.join(out, name + ".log")
    t0 = time.time()
    with open(log, "wb") as f:
        f.write(("$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        try:
            rc = subprocess.run(cmd, env=env, cwd=fix(t["workdir"]) if t["workdir"] else build, stdin=subprocess.DEVNULL,
                                stdout=f, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    rec["secs"] = round(time.time() - t0, 1)
    rec["rc"] = rc
    rec["status"] = "ok" if rc == 0 else "skipped" if rc == 77 else "timeout" if rc == "timeout" else "fail"
    text = open(log, errors="replace").read()
    rec["validation_lines"] = validation_count(text)
    return rec

with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
    results = list(ex.map(run, chosen))
json.dump({"driver_suite": driver, "icd": icd, "filter": filt, "tests": results}, open(os.path.join(out, "results.json"), "w"), indent=1)
ran = [r for r in results if r["status"] in ("ok", "fail", "timeout", "skipped")]
bad = [f'{r["name"]}={r["rc"]}' for r in results if r["status"] in ("fail", "timeout")]
other = sorted({r["status"] for r in results if r["status"] not in ("ok", "fail", "timeout", "skipped", "filtered")})
for r in results:
    if r["status"] != "filtered":
        print(f'   {r["name"]:28s} {r["status"]:8s} rc={r["rc"]} {r["secs"]}s', file=sys.stderr)
print(f'{len(ran)} tests ran ({driver} suite on {icd or "the default driver"}), {len(bad)} failed'
      + (f' ({" ".join(bad)})' if bad else "")
      + f', {sum(r["validation_lines"] for r in results)} validation lines'
      + (f'; also: {", ".join(other)}' if other else "") + (f"; filter {filt}" if filt else ""))
PY
)
    [ $? -ne 0 ] && PART_FAILED+=("runner")
    PART_RUN=1
    part_end "${line:-the test runner failed (see above)}"
}

part_tune() {
    part_begin tune 150 || return 0
    local quick=()
    [ "$small" = 1 ] && quick=(--quick)
    run tune 120 "$VK" tune "${quick[@]}" --json
    if [ "$(tail -n1 "$PART_DIR/commands.tsv" | cut -f2)" = 124 ]; then
        run tune-quick 60 "$VK" tune --quick --json
    fi
    run info-json 30 "$VK" info --json
    local f
    f=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tuning"]["file"])' "$PART_DIR/info-json.out" 2>/dev/null)
    [ -n "$f" ] && [ -f "$f" ] && cp "$f" "$PART_DIR/tunefile.json"
    part_end "tuning source now: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tuning"]["source"])' \
        "$PART_DIR/info-json.out" 2>/dev/null || echo unknown)"
}

part_matmul() {
    part_begin matmul 200 || return 0
    # fp16 where this build's bench matmul has --dtype (being added); else said absent
    local dtypes=(f32) dt s m nk dt_args=()
    if "$VK" --help 2>&1 | grep -q -- '--dtype f32|f16'; then
        dtypes=(f32 f16)
    else
        absent "fp16 bench matmul (this build's bench matmul has no --dtype: f32 only)"
    fi
    for dt in "${dtypes[@]}"; do
        [ ${#dtypes[@]} -gt 1 ] && dt_args=(--dtype "$dt")
        for s in $MM_SIZES; do
            run "$dt-$s" 40 "$VK" bench matmul --size "$s" --repeat "$([ "$s" -ge 8192 ] && echo 5 || echo 10)" \
                "${dt_args[@]}" --json
        done
        # The base model's matmuls (C = A·Bᵀ, m x n x k): prefill rows (batch x length),
        # and one decode step's rows; QKV, attention out, cross K/V, FFN in/out, generator.
        for m in $PREFILL $DECODE; do
            for nk in 1536x512 512x512 1024x512 2048x512 512x2048 8000x512; do
                run "$dt-base-${m}x$nk" 30 "$VK" bench matmul --m "$m" --n "${nk%x*}" --k "${nk#*x}" --repeat 10 \
                    "${dt_args[@]}" --json
            done
        done
    done
    run tuning 30 "$VK" info --json
    part_end
}

part_attention() {
    part_begin attention 300 || return 0
    local plot=1 p
    command -v gnuplot >/dev/null 2>&1 || plot=0
    for p in f32 f16; do
        local plot_args=() limit=100
        [ $plot = 1 ] && plot_args=(--plot "$PART_DIR/sweep-$p.png")
        [ $p = f32 ] && limit=150
        run "sweep-$p" $limit "$VK" bench attention --n "$ATT_N" --heads "$ATT_HEADS" \
            --repeat "$ATT_REPEAT" --precision $p --json "${plot_args[@]}"
        # the shape of tools/bench_torch.py's attention, dense and dense-naive only
        run "match-torch-$p" 40 "$VK" bench attention "${ATT_MATCH[@]}" --variants dense,dense-naive \
            --repeat "$ATT_REPEAT" --precision $p --json
    done
    local note=""
    if [ $plot = 0 ]; then
        # no gnuplot: the same two panels with matplotlib, where the torch Python has it
        if [ -n "${TORCH_PY:-}" ] && "$TORCH_PY" - "$PART_DIR" <<'PY' 2>"$PART_DIR/plot.log"
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
d = sys.argv[1]
for p in ("f32", "f16"):
    rows = [json.loads(l) for l in open(os.path.join(d, f"sweep-{p}.out")) if l.startswith("{")]
    rows = [r for r in rows if r.get("ms") is not None]
    if not rows:
        continue
    fig, ax = plt.subplots(1, 2, figsize=(14, 5.6))
    for v in dict.fromkeys(r["variant"] for r in rows):
        rs = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["n"])
        ax[0].loglog([r["n"] for r in rs], [r["ms"] for r in rs], "o-", label=v)
        ax[1].loglog([r["n"] for r in rs], [r["bytes"] / 2**20 for r in rs], "o-", label=v)
    for a, y in zip(ax, ("GPU time (ms)", "device memory (MiB)")):
        a.set_xlabel("sequence length n"), a.set_ylabel(y), a.grid(True), a.legend()
    fig.suptitle(f"vkformer bench attention ({p}): batch {rows[0]['batch']}, {rows[0]['heads']} heads of {rows[0]['head_dim']}")
    fig.savefig(os.path.join(d, f"sweep-{p}.png"))
PY
        then note="plots by matplotlib (no gnuplot)"
        else note="no plot: neither gnuplot nor matplotlib"
        fi
    fi
    run tuning 30 "$VK" info --json
    part_end "$note"
}

part_model() {
    part_begin model 240 || return 0
    local b p
    for b in $MODEL_BATCHES; do
        for p in f32 f16 auto; do
            run "$MODEL_PRESET-b$b-$MODEL_LEN-$p" 60 "$VK" bench model --preset "$MODEL_PRESET" --batch "$b" \
                --src-len "$MODEL_LEN" --tgt-len "$MODEL_LEN" --precision $p --repeat "$MODEL_REPEAT" --json
        done
    done
    # the decode comparison's shape (bench_torch.py: batch 1, source 64, 64 new tokens)
    run "$MODEL_PRESET-b1-decode-f16" 40 "$VK" bench model --preset "$MODEL_PRESET" --batch 1 --src-len "$DECODE_SRC" \
        --tgt-len "$DECODE_TGT" --precision f16 --repeat "$MODEL_REPEAT" --json
    run tuning 30 "$VK" info --json
    part_end
}

part_startup() {
    part_begin startup 90 || return 0
    run "$STARTUP_PRESET" 85 "$VK" bench startup --preset "$STARTUP_PRESET" --repeat "$STARTUP_REPEAT" --json
    part_end
}

part_torch() {
    part_begin torch 180 || return 0
    if [ -z "${TORCH_PY:-}" ]; then
        absent "no Python with torch (set TORCH_PYTHON)"
        part_end
        return
    fi
    local dev
    dev=$("$TORCH_PY" -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")' 2>/dev/null || echo cpu)
    run bench-torch 175 "$TORCH_PY" "$root/tools/bench_torch.py" --device "$dev" "${TORCH_ARGS[@]}"
    absent "bench_torch.py has fixed cases (matmul 4096^3 fp32/fp16, attention 4x16x4096x64 fp16, base forward b8 512/512 fp16, decode b1 64+64): no matmul sweep, base shapes, attention sweep, batch 1 or start-up"
    part_end "torch device $dev ($TORCH_PY)"
}

# OPUS-MT en-de shapes (vocabulary 58101, 6+6 x 512), beam 4, batch 32, every source
# decoding --max-new steps: vkformer beside Hugging Face Transformers fp32 in one run
# (tools/bench_translate.py; the random-weight folder is written once by the torch
# Python, ~300 MB under VKFORMER_CACHE_DIR).
part_translate() {
    part_begin translate 420 || return 0
    if [ -z "${TORCH_PY:-}" ]; then
        absent "no Python with torch (set TORCH_PYTHON): the random OPUS-MT folder and Transformers need it"
        part_end
        return
    fi
    local shape=() folder=$VKFORMER_CACHE_DIR/opus-mt-en-de-shape
    [ "$small" = 1 ] && shape=(--small --batch 4 --src-len 8 --max-new 4 --repeat 1) folder=$VKFORMER_CACHE_DIR/marian-small
    run opus-b32-beam4 410 "$TORCH_PY" "$root/tools/bench_translate.py" --vkformer "$VK" --model "$folder" \
        "${shape[@]}" --json
    part_end "model $folder"
}

part_summary() {
    part_begin summary 30 || return 0
    python3 - "$OUTDIR" <<'PY' >"$OUTDIR/summary.md"
# OUTDIR/summary.md from the parts' JSON: the target ratios (met / not met / not
# measured), then the raw tables. The thresholds are the targets of the GPU and
# coopmat issues.
import glob, json, os, re, sys
out = sys.argv[1]
GOALS = {  # name: (threshold on the ratio, where it comes from)
    "matmul": (0.8, "GPU issue: fp32 4096^3 vs torch.matmul, TF32 off"),
    "matmul_f16": (0.7, "coopmat issue: fp16 4096^3 vs torch.matmul fp16"),
    "dense_vs_naive": (2.0, "GPU issue"),
    "dense_vs_sdpa": (0.6, "GPU and coopmat issues"),
    "sparse_vs_dense": (1.0, "GPU issue: faster than dense at 4096"),
    "sparse_vs_naive": (10.0, "GPU issue"),
    "forward": (1.0, "GPU issue: base, batch 8, 512/512 vs nn.Transformer fp16 eager"),
    "decode": (1.0, "GPU issue: per token <= PyTorch's loop"),
    "startup": (2.0, "GPU issue: warm <= 0.5x cold"),
}

def jlines(path):
    rows = []
    for p in sorted(glob.glob(os.path.join(out, path))):
        for line in open(p, errors="replace"):
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows

cfg = json.load(open(os.path.join(out, "config.json")))
rows = []

def target(what, vk, ref, ratio, goal_key, how):
    if ratio is None:
        rows.append((what, vk, ref, "—", "not measured"))
        return
    g, src = GOALS[goal_key]
    rows.append((what, vk, ref, f"{ratio:.3g}×", f"{'met' if ratio >= g else 'not met'} (≥ {g}×, {src})"))

fmt = lambda x, u="ms": "—" if x is None else f"{x:.4g} {u}".rstrip()

# fp32 matmul vs torch.matmul fp32, TF32 off
N = cfg["mm_target"]
mm = {(r.get("dtype", "f32"), r["m"], r["n"], r["k"]): r for r in jlines("matmul/*.out")
      if r.get("bench") == "matmul" or r.get("op") == "matmul"}  # "op": before docs/json.md
torch_rows = jlines("torch/*.out")
tb = {r["bench"]: r for r in torch_rows}
for dt, tname in (("f32", "matmul_fp32"), ("f16", "matmul_fp16")):
    vk = mm.get((dt, N, N, N), {}).get("gflops")
    tt = tb.get(tname, {})
    tg = tt["tflops"] * 1e3 if "tflops" in tt else None
    note = " (TF32 ON: not the target's baseline)" if tt.get("tf32") else ", TF32 off" if dt == "f32" else ""
    fp = "fp" + dt[1:]
    target(f"{fp} matmul {N}³ vs torch.matmul {fp}{note}", fmt(vk, "GFLOP/s"),
           fmt(tg, "GFLOP/s") if tg else tt.get("skipped", "—"), vk / tg if vk and tg else None,
           "matmul" if dt == "f32" else "matmul_f16", "")

# attention
att = {}
for r in jlines("attention/sweep-*.out"):
    if "variant" in r and "n" in r and r.get("record", "case") == "case":
        att[(r["variant"], r["n"], r.get("precision"))] = r.get("ms")
A, L = cfg["att_at"], cfg["att_large"]
d16, d32, nv = att.get(("dense", A, "f16")), att.get(("dense", A, "f32")), att.get(("dense-naive", A, "f32"))
target(f"fused dense fp16 vs dense-naive (f32: no f16 path) at n={A}", fmt(d16), fmt(nv),
       nv / d16 if nv and d16 else None, "dense_vs_naive", "")
target(f"fused dense fp32 vs dense-naive fp32 at n={A}", fmt(d32), fmt(nv),
       nv / d32 if nv and d32 else None, "dense_vs_naive", "")
match = {(r["variant"], r.get("precision")): r for r in jlines("attention/match-torch-*.out")
         if "variant" in r and r.get("record", "case") == "case"}
m16 = match.get(("dense", "f16"), {}).get("ms")
ta = tb.get("attention", {})
shape = f"batch {ta.get('batch', '?')}, {ta.get('heads', '?')} heads, n={ta.get('n', '?')}"
target(f"fused dense fp16 vs torch {ta.get('impl', 'SDPA').split(':')[0]} ({ta.get('dtype', '?')}), {shape}", fmt(m16),
       fmt(ta.get("ms")), ta["ms"] / m16 if m16 and ta.get("ms") else None, "dense_vs_sdpa", "")
sparse = sorted({v for (v, n, p) in att if v not in ("dense", "dense-naive")})
for v in sparse:
    vm = att.get((v, A, "f32"))
    target(f"{v} vs dense, fp32, n={A}", fmt(vm), fmt(d32), d32 / vm if vm and d32 else None, "sparse_vs_dense", "")
nvl = att.get(("dense-naive", L, "f32"))
for v in sparse:
    vm = att.get((v, L, "f32"))
    target(f"{v} vs dense-naive, fp32, n={L}", fmt(vm), fmt(nvl), nvl / vm if vm and nvl else None, "sparse_vs_naive", "")

# model forward and decode
models = {}
for p in glob.glob(os.path.join(out, "model/*.out")):
    for r in jlines(os.path.relpath(p, out)):
        if r.get("bench") == "model":
            models[os.path.basename(p)[:-4]] = r
pre, B, T = cfg["model_preset"], cfg["forward_batch"], cfg["model_len"]
tf = tb.get("transformer", {})
for p in ("f16", "auto", "f32"):
    r = models.get(f"{pre}-b{B}-{T}-{p}", {})
    target(f"{pre} forward, batch {B}, {T}/{T}, --precision {p}, vs nn.Transformer {tf.get('dtype', '?')} eager "
           "(torch: nn.Transformer only; vkformer: with embeddings and generator)",
           fmt(r.get("forward_ms")), fmt(tf.get("ms")),
           tf["ms"] / r["forward_ms"] if r.get("forward_ms") and tf.get("ms") else None, "forward", "")
dec = tb.get("decode", {})
r = models.get(f"{pre}-b1-decode-f16", {})
target(f"greedy decode per token, batch 1, {cfg['decode_src']}+{cfg['decode_tgt']} (vkformer: GPU ms of the step at "
       "the last position; torch: ms per token of its whole loop, no KV cache)", fmt(r.get("step_ms")),
       fmt(dec.get("ms_per_token")), dec["ms_per_token"] / r["step_ms"] if r.get("step_ms") and dec.get("ms_per_token") else None,
       "decode", "")

# start-up
st = next((r for r in jlines("startup/*.out") if r.get("bench") == "startup"), {})
cold, warm = st.get("cold", {}).get("total_ms"), st.get("warm", {}).get("total_ms")
target(f"warm start vs cold start ({cfg['startup_preset']}: cold/warm total ms)", fmt(warm), fmt(cold),
       cold / warm if cold and warm else None, "startup", "")

# validation messages: `check` (info part) and the suite, both with VKFORMER_VALIDATE=1
vcount, vsrc = 0, []
chk = os.path.join(out, "info", "check.log")
if os.path.exists(chk):
    text = open(chk, errors="replace").read()
    lines = len(re.findall(r"validation: ", text))
    totals = sum(int(a) + int(b) for a, b in re.findall(r"validation layer reported (\d+) errors and (\d+) warnings", text))
    vcount += max(lines, totals)
    vsrc.append("check")
res = os.path.join(out, "suite", "results.json")
if os.path.exists(res):
    tests = [t for t in json.load(open(res))["tests"] if t["status"] in ("ok", "fail", "timeout", "skipped")]
    vcount += sum(t["validation_lines"] for t in tests)
    vsrc.append(f"{len(tests)} suite tests")
if vsrc:
    rows.append(("validation messages (" + ", ".join(vsrc) + ")", str(vcount), "0", "—", "met" if vcount == 0 else "not met"))
else:
    rows.append(("validation messages", "—", "0", "—", "not measured"))

# ---- print
dev = "unknown"
try:
    j = json.load(open(os.path.join(out, "info", "info.json")))
    d = j["devices"][j["default"]]
    dev = f"{d['name']} ({d['type']}, {d['driver_name']} {d['driver_info']})"
except (OSError, ValueError, KeyError, IndexError):
    pass
print("# vkformer GPU report\n")
print(f"Device: {dev}." + (" **Small sizes (GPU_REPORT_SMALL): a dry run, not the targets' sizes.**" if cfg["small"] else ""))
if tb:
    t0 = next(iter(tb.values()))
    print(f"PyTorch: {t0.get('torch')} on {t0.get('device_name')} ({t0.get('timer')}).")
print("\n## Targets\n\nratio: how many times faster the measured case is than the baseline (baseline ms ÷ measured ms;"
      " for GFLOP/s, measured ÷ baseline). Thresholds marked \"assumed\" are placeholders: edit GOALS in tools/gpu_report.sh.\n")
print("| comparison | measured | baseline | ratio | verdict |\n|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
order = ["info", "suite", "tune", "matmul", "attention", "model", "startup", "torch"]
lines = [open(os.path.join(out, p, "summary.txt")).read().strip() for p in order
         if os.path.exists(os.path.join(out, p, "summary.txt"))]
missing = [p for p in order if not os.path.exists(os.path.join(out, p, "summary.txt"))]
print("\n## Parts\n")
for line in lines:
    print("- " + line)
if missing:
    print("- not run: " + ", ".join(missing))
tuning = []
for p in ("matmul", "attention", "model"):
    try:
        tuning.append(f"{p}: {json.load(open(os.path.join(out, p, 'tuning.out')))['tuning']['source']}")
    except (OSError, ValueError, KeyError, TypeError):
        pass
if tuning:
    print("- tile choice (file: from `vkformer tune`; built-in: not tuned) during " + ", ".join(tuning))
if mm:
    print("\n## bench matmul\n\n| dtype | m × n × k | kernel | ms | GFLOP/s | max rel err |\n|---|---|---|---|---|---|")
    for (dt, m, n, k), r in sorted(mm.items()):
        print(f"| {dt} | {m} × {n} × {k} | {r.get('kernel', '—')} | {r['ms']:.4g} | {r['gflops']:.4g} | {r.get('max_rel_err', '—')} |")
if att:
    ns = sorted({n for (_, n, _) in att})
    for p in ("f32", "f16"):
        vs = list(dict.fromkeys(v for (v, n, q) in att if q == p))
        if not vs:
            continue
        print(f"\n## bench attention ({p}, GPU ms; — skipped)\n\n| variant | " + " | ".join(f"n={n}" for n in ns) + " |")
        print("|---|" + "---|" * len(ns))
        for v in vs:
            print(f"| {v} | " + " | ".join(fmt(att.get((v, n, p)), "") for n in ns) + " |")
if models:
    print("\n## bench model\n\n| case | forward ms | encode ms | step ms | peak MiB |\n|---|---|---|---|---|")
    for k, r in sorted(models.items()):
        print(f"| {k} | {r['forward_ms']:.4g} | {r['encode_ms']:.4g} | {r['step_ms']:.4g} | {r['peak_bytes'] / 2**20:.1f} |")
translate = jlines("translate/*.out")
if translate:
    print("\n## tools/bench_translate.py (OPUS-MT en-de shapes; target tokens/s)\n\n| engine | device | batch | beams | "
          "steps | median ms | target tokens/s |\n|---|---|---|---|---|---|---|")
    for r in translate:
        print(f"| {r.get('engine')} | {r.get('device')} | {r.get('batch')} | {r.get('beams')} | {r.get('steps')} | "
              f"{fmt(r.get('median_ms'), '')} | {fmt(r.get('target_tokens_per_s'), '')} |")
    e = {r.get("engine"): r for r in translate}
    if "vkformer" in e and "transformers" in e:
        print(f"\nvkformer / Transformers: {e['vkformer']['target_tokens_per_s'] / e['transformers']['target_tokens_per_s']:.2f}x "
              "(CTranslate2 publishes 9.1x Transformers fp32 on one GPU)")
if torch_rows:
    print("\n## tools/bench_torch.py\n\n| bench | dtype | ms | note |\n|---|---|---|---|")
    for r in torch_rows:
        ms = r.get("ms", r.get("ms_per_token"))
        print(f"| {r['bench']} | {r.get('dtype', '—')} | {fmt(ms, '')} | {r.get('skipped', r.get('dtype_note', r.get('impl', '')))} |")
PY
    local rc=$?
    PART_RUN=1
    [ $rc -ne 0 ] && PART_FAILED+=("summary.py=$rc")
    part_end "wrote $OUTDIR/summary.md"
    [ $rc -eq 0 ] && sed -n '/^## Targets/,/^## Parts/p' "$OUTDIR/summary.md" | grep '^|'
}

# ------------------------------------------------------------------ main

args=()
for a in "$@"; do
    case $a in
        --fetch) fetch; exit $? ;;
        --small) small=1 ;;
        -h|--help) usage ;;
        *) args+=("$a") ;;
    esac
done
[ ${#args[@]} -ge 1 ] || usage
OUTDIR=${args[0]}
parts=()
for a in "${args[@]:1}"; do
    for p in ${a//,/ }; do
        if [ "$p" = all ]; then parts+=("${all_parts[@]}")
        elif [[ " ${all_parts[*]} " == *" $p "* ]]; then parts+=("$p")
        else echo "gpu_report: unknown part \"$p\" (known: ${all_parts[*]} all)" >&2; exit 2
        fi
    done
done
[ ${#parts[@]} -ge 1 ] || parts=("${all_parts[@]}")
set_sizes
VK=$build/vkformer

mkdir -p "$OUTDIR" || exit 1
OUTDIR=$(cd "$OUTDIR" && pwd)
[ "${parts[*]}" != summary ] || [ ! -f "$OUTDIR/config.json" ] && write_config
export VKFORMER_CACHE_DIR=${VKFORMER_CACHE_DIR:-$root/.cache/gpu-report}
mkdir -p "$VKFORMER_CACHE_DIR"
unset VKFORMER_VALIDATE   # on only where a part says so (info's check; the suite's tests set it)
ICD=""
TORCH_PY=$(find_torch_python) || TORCH_PY=""
if [ "${parts[*]}" != summary ]; then
    setup_vulkan
    if [ ! -x "$build/vkformer" ]; then
        echo "gpu_report: $build/vkformer is missing: build it (ninja -C build) and carry the build folder" >&2
    fi
    [[ " ${parts[*]} " == *" tune "* ]] || restore_tune_file
fi
for p in "${parts[@]}"; do
    "part_$p"
done
exit 0
