#!/usr/bin/env bash
# The GPU report: the figures that matter most, from ONE call of the device tool (a lent
# NVIDIA H100/H200: root, no network, 15 minutes of device time in all, at most 8 files
# back), planned to fit 420 s of device time, the machine's start included.
#
#   tools/gpu_report.sh --plan                   the planned seconds per part, the deadline,
#                                                the start-up allowance, the device-tool call
#   tools/gpu_report.sh --fetch                  HERE (network): the .debs the GPU machine
#                                                lacks into .gl/ (Vulkan loader, validation
#                                                layer, libjansson4, libsentencepiece0)
#   tools/gpu_report.sh --prepare                HERE: --fetch where .gl/ lacks a .deb, then
#                                                checks that build/ is complete and what
#                                                travels fits 64 MiB; writes .gl/commit
#   tools/gpu_report.sh [--small] OUTDIR [PART...]
#                                                THERE: the parts (default: all, in plan
#                                                order), at most 8 files under OUTDIR
#   tools/gpu_report.sh --summary OUTDIR [MORE...]
#                                                HERE: OUTDIR/summary.md again from the files
#                                                that came back (several calls' merged)
#
# PART: info suite sweep matmul coopmat attention translate forward shaders rerun tune
# (see PLAN below), or all. Issue 36's order: the suite with the tests of the new
# kernels first (cooperative-matrix matmul with warp tiles and split-K, FlashAttention-2
# and flash decoding: every test whose name matches GPU_REPORT_SUITE_FIRST, found in the
# build's test list, so tests added later are taken too), then the sweep of the kernels'
# tile space (`vkformer tune`, every candidate timed and checked, into its own file, so
# the later parts still run the built-in choice) beside the built-in rule's picks at the
# same shapes (`bench matmul` with no tune file: the untuned choice must be within 20 %
# of tune's best), the benchmarks against PyTorch, `bench shaders` for each preset on
# NVIDIA's driver (registers, code size), the re-run of what the H100 left open (two
# test_lsh failures, test_reliability's context re-creation after device loss), and
# last the 4096^3 matmuls with the sweep's winners. To keep 420 s: the plain `info`,
# fp32 `--kernel tiled` and `tune --quick` left the plan (the sweep's full tune
# replaces it); lsh and reliability left the suite for their own part; every part is a
# few seconds shorter than before (the H100 used less than its plan in most parts).
# Every part has a planned number of seconds; its deadline is that plus what the
# parts before it saved, less nothing that later parts were promised: so a part that
# hangs costs itself, never a later part or the report. Every command runs under
# `timeout` (its own limit, at most what is left of its part). After every part OUTDIR
# is packed again, so a call stopped from outside still brings back every part done:
#   OUTDIR/summary.md      issue 36's targets met / not met / not measured, the untuned
#                          choice against tune's best (met / not met), the suite (new
#                          kernels first), the re-run of the H100's failures, `bench
#                          shaders` per preset, the parts, the failed commands, every
#                          measured figure
#   OUTDIR/results.jsonl   every record: each command's JSON lines tagged "gr": "result"
#                          with its part and name (the sweep's every candidate as
#                          "bench": "tune-candidate", each test as "bench": "test"), each
#                          command ("gr": "command": exit code, seconds, validation lines,
#                          last error line), each part ("gr": "part") and the call
#                          ("gr": "report")
#   OUTDIR/suite.json      each selected test: ok, fail, timeout, killed (budget), not
#                          reached (budget), not built, filtered, not selected; "first"
#                          marks the new kernels' tests
#   OUTDIR/logs.tar.gz     every command's stdout and stderr, compressed
#   OUTDIR/tunefile.json   the sweep's tune file (every candidate's time; restore it with
#                          GPU_REPORT_TUNE_FILE in a later call's tune part)
# The script checks that OUTDIR holds at most 8 files (anything else is packed into
# OUTDIR/extra.tar.gz). Exit status 0 whatever the commands gave; 2 on a usage error.
#
# Vulkan and libraries: where the loader, the validation layer, libjansson.so.4 or
# libsentencepiece.so.0 are missing, the matching .deb of .gl/ is unpacked into .gl/root
# (never into /), with LD_LIBRARY_PATH and VK_LAYER_PATH pointing there. The driver:
# GPU_REPORT_ICD if set, else NVIDIA's ICD file where one exists, else what
# VK_DRIVER_FILES / VK_ICD_FILENAMES name (the dry run: VK_DRIVER_FILES=
# /usr/share/vulkan/icd.d/lvp_icd.x86_64.json tools/gpu_report.sh --small /tmp/gr).
#
# Environment: GPU_REPORT_DEADLINE=S (seconds for this call; default the plan's total),
# GPU_REPORT_PLAN="PART S ..." (other planned seconds for those parts), GPU_REPORT_SMALL=1
# (= --small: tiny sizes, a dry run on lavapipe), GPU_REPORT_BUILD (default build),
# GPU_REPORT_WORK (the working folder, kept; default a new /tmp/gpu-report.*, removed at
# the end), TORCH_PYTHON (a Python with torch, or none; default the first of python3,
# /usr/bin/python3 that has it), GPU_REPORT_TRANSFORMERS_PYTHON (a command running
# Python with transformers, where TORCH_PYTHON has none), GPU_REPORT_SUITE_TESTS (test names, most important first),
# GPU_REPORT_SUITE_FIRST (regex: the tests of the new kernels, run before those; '' none),
# GPU_REPORT_SUITE_FILTER (regex on those names; --small default: seven quick tests),
# GPU_REPORT_JOBS (tests at a time; 8, --small 2), GPU_REPORT_RERUN_TESTS (the rerun part's
# tests; default "lsh reliability", --small "lsh"), GPU_REPORT_UNPACK=0 (never unpack),
# GPU_REPORT_GL (the folder of .debs; default .gl), GPU_REPORT_TUNE_FILE (a tune file of
# an earlier call: the tune part uses it instead of the sweep's), VKFORMER_CACHE_DIR (default
# WORK/cache: no tune file, so every part before `tune` runs the built-in choice).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_REPORT_BUILD:-$root/build}
case $build in /*) ;; *) build=$root/$build ;; esac
small=${GPU_REPORT_SMALL:-0}

# ------------------------------------------------------------------ the plan
# One device call: at most CALL_S of device time, the machine's start (a minute or more),
# the transfers and the give-back included. Parts in order of what matters most.
PLAN='
info        12  vkformer info --json, check with the validation layer, nvidia-smi
suite       70  the tests of the new kernels first, then the others that matter on a GPU, layer on
sweep       35  vkformer tune (every tile candidate) into its own file; the rule picks at its sizes
matmul      14  fp32 4096^3 (built-in choice) vs torch.matmul fp32, TF32 off; --kernel subgroup
coopmat     22  fp16 4096^3 through coopmat (KHR) and coopmat2 (NV) vs torch.matmul fp16; built-in
attention   20  fused fp16 attention, n 4096, batch 4 x 16 heads of 64, vs SDPA
translate   45  OPUS-MT shapes, batch 32, beam 4, vs Transformers fp32 and fp16 (CUDA)
forward     20  base forward, batch 8, 512/512, f16, vs nn.Transformer fp16 eager
shaders     18  vkformer bench shaders --json per preset (base nllb flan-t5-base whisper-small)
rerun       15  test_lsh and test_reliability (device loss, then a new context) again
tune        10  the 4096^3 matmuls again with the winners of the sweep
'
SETUP_S=5     # .gl/ unpacked, the driver found (before the first part)
RESERVE_S=15  # OUTDIR packed after every part (about 1 s each) and at the end
MARGIN_S=15   # between the script's deadline and the device call's timeout_s
CALL_S=420    # the device time one call may cost (of the session's 900 s)

PLAN_PARTS=() PLAN_SECS=()
while read -r p s _; do
    [ -n "$p" ] && PLAN_PARTS+=("$p") PLAN_SECS+=("$s")
done <<<"$PLAN"
# GPU_REPORT_PLAN="PART S PART S ...": other planned seconds for the parts it names
read -r -a plan_words <<<"${GPU_REPORT_PLAN:-}"
for ((w = 0; w < ${#plan_words[@]}; w += 2)); do
    if [[ " ${PLAN_PARTS[*]} " != *" ${plan_words[$w]} "* ]] || ! [[ ${plan_words[$((w + 1))]:-} =~ ^[0-9]+$ ]]; then
        echo "gpu_report: GPU_REPORT_PLAN takes PART SECONDS pairs, not \"$GPU_REPORT_PLAN\"" >&2
        exit 2
    fi
    for i in "${!PLAN_PARTS[@]}"; do [ "${PLAN_PARTS[$i]}" = "${plan_words[$w]}" ] && PLAN_SECS[$i]=${plan_words[$((w + 1))]}; done
done
plan_of() { local i; for i in "${!PLAN_PARTS[@]}"; do [ "${PLAN_PARTS[$i]}" = "$1" ] && echo "${PLAN_SECS[$i]}"; done; }
PLAN_SUM=0
for s in "${PLAN_SECS[@]}"; do PLAN_SUM=$((PLAN_SUM + s)); done
PLAN_DEADLINE=$((SETUP_S + PLAN_SUM + RESERVE_S))   # the script's own deadline
TIMEOUT_S=$((PLAN_DEADLINE + MARGIN_S))             # the device call's timeout_s
START_ALLOWANCE=$((CALL_S - TIMEOUT_S))             # start, transfers, give-back

print_plan() {
    echo "part        planned s  what"
    local i
    for i in "${!PLAN_PARTS[@]}"; do
        printf '%-11s %9s  %s\n' "${PLAN_PARTS[$i]}" "${PLAN_SECS[$i]}" \
            "$(sed -n "s/^${PLAN_PARTS[$i]} *[0-9]* *//p" <<<"$PLAN")"
    done
    printf '%-11s %9s  %s\n' "(setup)" "$SETUP_S" ".gl/ unpacked, the driver found" \
        "(reserve)" "$RESERVE_S" "OUTDIR packed after each part and at the end"
    echo "deadline of the script: $SETUP_S + $PLAN_SUM + $RESERVE_S = ${PLAN_DEADLINE} s"
    echo "timeout_s of the device call: $PLAN_DEADLINE + $MARGIN_S = ${TIMEOUT_S} s"
    echo "start-up allowance: $CALL_S - $TIMEOUT_S = ${START_ALLOWANCE} s (machine start, transfers, give-back)"
    echo "device call (after tools/gpu_report.sh --prepare here):"
    echo "  run(command='tools/gpu_report.sh \"\$OUT\"', carry=[\"build\", \".gl\"], timeout_s=$TIMEOUT_S)"
    echo "  then give_back(), unless one rerun follows at once (same timeout_s: 2 x $TIMEOUT_S + start fits 900 s)"
}

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

# ------------------------------------------------------------------ --fetch, --prepare (here)

GL_PACKAGES=(libvulkan1 vulkan-validationlayers libjansson4 libsentencepiece0 libutf8proc2 libsndfile1 libsoxr0
             libflac12 libmp3lame0 libmpg123-0 libogg0 libopus0 libvorbis0a libvorbisenc2 libonig5 libgomp1
             libglvnd0 libglx0 libgl1 libegl1 libopengl0 libgles2 libx11-6 libxext6 libxcb1 libxau6 libxdmcp6 libbsd0 libmd0)

fetch() {
    # Debian 12's packages; they depend only on libc6, libgcc-s1 and libstdc++6
    # (apt-cache depends), which any Debian or Ubuntu with Python has.
    local lists=/tmp/gpu-report-apt-lists p
    mkdir -p "$root/.gl" "$lists/partial" || return 1
    local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 "-oDir::State::Lists=$lists")
    apt-get "${o[@]}" -q update >&2 || return 1
    for p in "${GL_PACKAGES[@]}"; do rm -f "$root/.gl/${p}"_*.deb; done
    (cd "$root/.gl" && apt-get "${o[@]}" -q download "${GL_PACKAGES[@]}") >&2 || return 1
    # Debian unstable's validation layer in .gl/newer/: Debian 12's (1.3.239) predates
    # VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 and reports every coopmat
    # structure and SPIR-V capability as an error (device call 5, 2026-11-26). It needs
    # glibc 2.38; the machine falls back to Debian 12's where its glibc is older.
    local st=/tmp/gpu-report-apt-unstable mirror
    mirror=$(sed -n 's#^URIs: *\(\S*/debian\)/\?$#\1#p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    mkdir -p "$st/lists/partial" "$st/parts" "$st/prefs" "$root/.gl/newer" || return 1
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main" >"$st/sources.list"
    local u=(-o Dir::State="$st" -o Dir::State::Lists="$st/lists" -o Dir::State::status=/dev/null
             -o Dir::Etc::SourceList="$st/sources.list" -o Dir::Etc::SourceParts="$st/parts"
             -o Dir::Etc::PreferencesParts="$st/prefs" -o APT::Architecture=amd64 -o APT::Architectures=amd64
             -o APT::Sandbox::User=root)
    apt-get "${u[@]}" -qq update >&2 || return 1
    rm -f "$root"/.gl/newer/*.deb
    (cd "$root/.gl/newer" && apt-get "${u[@]}" -q download vulkan-validationlayers) >&2 || return 1
    ls -l "$root"/.gl/*.deb "$root"/.gl/newer/*.deb
}

prepare() {
    local p missing=0 bad=0
    for p in "${GL_PACKAGES[@]}"; do ls "$root/.gl/${p}"_*.deb >/dev/null 2>&1 || missing=1; done
    ls "$root"/.gl/newer/vulkan-validationlayers_*.deb >/dev/null 2>&1 || missing=1
    if [ $missing = 1 ]; then fetch || { echo "gpu_report: --fetch failed" >&2; bad=1; }; fi
    if [ ! -x "$build/vkformer" ] || [ ! -f "$build/meson-info/intro-tests.json" ]; then
        echo "gpu_report: $build is not a configured, built build folder (meson setup build && ninja -C build)" >&2
        bad=1
    elif command -v ninja >/dev/null && ninja -C "$build" -n 2>/dev/null | grep -q '^\['; then
        echo "gpu_report: $build is out of date: run ninja -C $build (every target: the suite runs the tests)" >&2
        bad=1
    fi
    rm -rf "$root/.gl/root" "$root/.gl/newer-root"   # unpacked on the GPU machine, never carried
    # the malformed-tokenizer cases (hftok-bad, a host test the report does not run) hold sparse
    # files of 300 MB each: they would not travel (ninja makes them again here when needed)
    rm -rf "$build/tests/bad_tokenizers"
    { git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown
      git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo "(with uncommitted changes)"; } |
        tr '\n' ' ' >"$root/.gl/commit"
    local tree carried
    tree=$(git -C "$root" ls-files -z --cached --others --exclude-standard 2>/dev/null |
        (cd "$root" && du -cb --files0-from=- 2>/dev/null) | tail -n1 | cut -f1)
    carried=$(du -cb "$build" "$root/.gl" 2>/dev/null | tail -n1 | cut -f1)
    echo "travels: tree $((${tree:-0} / 1048576)) MiB + build and .gl $((carried / 1048576)) MiB (limit 64 MiB)"
    [ $((${tree:-0} + carried)) -lt $((64 * 1048576)) ] || { echo "gpu_report: over 64 MiB" >&2; bad=1; }
    print_plan
    return $bad
}

# ------------------------------------------------------------------ set-up (there)

have_loader() { ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 ' || [ -f "$GLROOT/usr/lib/x86_64-linux-gnu/libvulkan.so.1" ]; }
have_layer() {
    local d
    for d in ${VK_LAYER_PATH:+${VK_LAYER_PATH//:/ }} ${VK_ADD_LAYER_PATH:+${VK_ADD_LAYER_PATH//:/ }} /usr/share/vulkan/explicit_layer.d \
             /usr/local/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d; do
        [ -f "$d/VkLayer_khronos_validation.json" ] && return 0
    done
    return 1
}

unpack_deb() {   # unpack_deb FILE DIR (dpkg -x, else ar + tar)
    if command -v dpkg >/dev/null; then dpkg -x "$1" "$2"; return; fi
    local t; t=$(mktemp -d) && (cd "$t" && ar x "$1" && tar -xf data.tar.* -C "$2"); local rc=$?; rm -rf "$t"; return $rc
}

deb_files() {   # deb_files FILE: the paths a .deb holds (dpkg -c, else ar + tar)
    if command -v dpkg >/dev/null; then dpkg -c "$1" | awk '{for (i = 1; i <= NF; i++) if ($i == "->") {print $(i - 1); next}; print $NF}'; return; fi
    local t; t=$(mktemp -d) && (cd "$t" && ar x "$1" && tar -tf data.tar.*); rm -rf "$t"
}

icd_library() {   # icd_library JSON: the driver library an ICD file names, as the loader finds it
    local lib d
    [ -f "${1:-}" ] || return 0
    lib=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ICD"]["library_path"])' "$1" 2>/dev/null) || return 0
    case $lib in
        /*) echo "$lib"; return ;;
        */*) echo "$(dirname "$1")/$lib"; return ;;
    esac
    for d in ${LD_LIBRARY_PATH//:/ } /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /lib/x86_64-linux-gnu; do
        [ -e "$d/$lib" ] && { echo "$d/$lib"; return; }
    done
    ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}'
}

missing_libs() {   # the libraries that vkformer, the library, the tests and the driver cannot find
    local f
    for f in "$build/vkformer" "$build"/libvkformer.so "$build"/tests/test_* ${ICD_LIB:+"$ICD_LIB"}; do
        [ -f "$f" ] && ldd "$f" 2>/dev/null | awk '/not found/ {print $1}'
    done | sort -u
}

newer_layer() {   # .gl/newer's validation layer, where this machine's glibc runs it
    local f d lib
    f=$(ls "$GL"/newer/vulkan-validationlayers_*.deb 2>/dev/null | head -n1)
    [ -n "$f" ] || return 0
    d=$GL/newer-root
    mkdir -p "$d" && unpack_deb "$f" "$d" || return 0
    lib=$d/usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so
    if [ ! -f "$lib" ] || ldd "$lib" 2>&1 | grep -q 'not found'; then
        echo "gpu_report: $(basename "$f") does not run here ($(ldd "$lib" 2>&1 | grep -m1 'not found' | sed 's/^\s*//')); Debian 12's layer instead" >&2
        return 0
    fi
    sed -i "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$lib\"#" "$d/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json"
    export VK_LAYER_PATH="$d/usr/share/vulkan/explicit_layer.d"
    echo "gpu_report: validation layer from $(basename "$f")" >&2
}

setup() {
    local want=() f lib p round done_debs=" "
    [ "$(id -u)" = 0 ] && ldconfig 2>/dev/null   # the NVIDIA libraries may not be in the cache yet
    # On the lent NVIDIA machine (root, NVIDIA's folder, no loader) the Vulkan loader and the
    # GL dispatch libraries go into / as the device tool's notes prescribe: with them only on
    # LD_LIBRARY_PATH, NVIDIA's ICD answered no vkCreateInstance (device call 4, 2026-11-26).
    # That machine is thrown away after the session; elsewhere nothing is written to /.
    if [ "${GPU_REPORT_SYSTEM_GL:-1}" = 1 ] && [ "$(id -u)" = 0 ] && [ -d /usr/local/nvidia ] &&
       ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '; then
        for p in libvulkan1 libglvnd0 libegl1 libopengl0 libgl1 libglx0 libgles2; do
            f=$(ls "$GL/${p}"_*.deb 2>/dev/null | head -n1)
            [ -n "$f" ] && dpkg -x "$f" / && echo "gpu_report: unpacked $(basename "$f") into / (NVIDIA machine)" >&2
        done
        ldconfig 2>/dev/null
    fi
    for f in /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json /usr/share/glvnd/egl_vendor.d/10_nvidia.json; do
        [ -f "$f" ] && { export __EGL_VENDOR_LIBRARY_FILENAMES=$f; break; }
    done
    use_glroot() {
        if [ -d "$GLROOT/usr/lib/x86_64-linux-gnu" ] && [[ ":${LD_LIBRARY_PATH:-}:" != *":$GLROOT/usr/lib/x86_64-linux-gnu:"* ]]; then
            export LD_LIBRARY_PATH="$GLROOT/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        fi
    }
    unpack_one() {   # unpack_one FILE (once)
        [[ "$done_debs" == *" $1 "* ]] && return 1
        done_debs+="$1 "
        mkdir -p "$GLROOT" && unpack_deb "$1" "$GLROOT" && echo "gpu_report: unpacked $(basename "$1") into $GLROOT" >&2
    }
    # The driver: explicit, else NVIDIA's, else what the environment names.
    local icd=${GPU_REPORT_ICD:-}
    if [ -z "$icd" ]; then
        for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
                 /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.x86_64.json \
                 /usr/local/share/vulkan/icd.d/nvidia_icd.json; do
            [ -f "$f" ] && { icd=$f; break; }
        done
    fi
    [ -z "$icd" ] && icd=$(find /usr/local/nvidia /etc/vulkan /usr/share/vulkan -maxdepth 4 -name 'nvidia_icd*.json' 2>/dev/null | head -n1)
    [ -z "$icd" ] && icd=${VK_DRIVER_FILES:-${VK_ICD_FILENAMES:-}}
    if [ -n "$icd" ]; then
        export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
    else
        echo "gpu_report: no ICD file found or named; the loader searches its default places" >&2
    fi
    ICD=$icd
    ICD_LIB=$(icd_library "$icd")
    if [ "${GPU_REPORT_UNPACK:-1}" = 1 ]; then
        have_loader || want+=(libvulkan1)
        newer_layer
        have_layer || want+=(vulkan-validationlayers)
        for p in "${want[@]}"; do
            f=$(ls "$GL/${p}"_*.deb 2>/dev/null | head -n1)
            if [ -z "$f" ]; then
                echo "gpu_report: .gl/ has no ${p}_*.deb (run tools/gpu_report.sh --prepare where there is network)" >&2
            else
                unpack_one "$f"
            fi
        done
        use_glroot
        # Shared libraries the build needs and the machine lacks: the .deb of .gl/ that holds
        # each, unpacked, then again for what those need, until nothing new is found.
        local index; index=$(mktemp)
        for f in "$GL"/*.deb; do [ -f "$f" ] && deb_files "$f" | sed "s|^|$f |"; done >"$index" 2>/dev/null
        for round in 1 2 3 4 5 6; do
            local new=0
            for lib in $(missing_libs); do
                f=$(awk -v l="/$lib" 'substr($2, length($2) - length(l) + 1) == l {print $1; exit}' "$index")
                if [ -z "$f" ]; then
                    echo "gpu_report: the build needs $lib, which no .deb of .gl/ holds" >&2
                elif unpack_one "$f"; then
                    new=1
                fi
            done
            use_glroot
            [ $new = 1 ] || break
        done
        rm -f "$index"
    fi
    use_glroot
    if [ -f "$GLROOT/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json" ]; then
        export VK_LAYER_PATH="$GLROOT/usr/share/vulkan/explicit_layer.d${VK_LAYER_PATH:+:$VK_LAYER_PATH}"
    fi
}

find_torch_python() {   # without importing torch (seconds there): find_spec; TORCH_PYTHON=none: none
    local p
    [ "${TORCH_PYTHON:-}" = none ] && return 1
    for p in ${TORCH_PYTHON:-} python3 /usr/bin/python3; do
        command -v "$p" >/dev/null 2>&1 &&
            "$p" -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null &&
            { command -v "$p"; return 0; }
    done
    return 1
}

# ------------------------------------------------------------------ commands and parts

py() { python3 "$WORK/report.py" "$@"; }

# run_cmd NAME LIMIT_S CMD...: stdout to WORK/PART/NAME.out, stderr to NAME.log, under
# `timeout` (at most what is left of the part); its records go to WORK/records.jsonl.
run_cmd() {
    local name=$1 limit=$2
    shift 2
    local left=$((PART_END - SECONDS))
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 3 ]; then
        echo "   $name: not run, the part's deadline is spent" >&2
        py tag "$WORK" "$PART" "$name" not-run 0 0 "$@"
        LAST_RC=not-run
        return 0
    fi
    local t0=$SECONDS rc
    echo "   $name: $* (timeout ${limit}s)" >&2
    timeout -k 3 "$limit" "$@" >"$PART_DIR/$name.out" 2>"$PART_DIR/$name.log" </dev/null
    rc=$?
    LAST_RC=$rc
    py tag "$WORK" "$PART" "$name" "$rc" "$((SECONDS - t0))" "$limit" "$@"
    if [ "$rc" -ne 0 ]; then
        echo "   $name: exit $rc after $((SECONDS - t0))s: $(grep -v '^\s*$' "$PART_DIR/$name.log" | tail -n1 | cut -c1-200)" >&2
    fi
    return 0
}

note() { PART_NOTES+=("$1"); }

# run_part NAME: its deadline is where the plan ends it (set-up plus the planned seconds
# of the selected parts up to this one, plus the packing so far, which the reserve pays),
# and at the latest the call's deadline less what is left of the reserve. So a part gets
# its plan plus what the parts before it saved, a later part never gets less than its
# plan, and a deadline shorter than the plan drops the last parts, not the first.
run_part() {
    local p=$1 end=$SETUP_S i
    for i in "${parts[@]}"; do
        end=$((end + $(plan_of "$i")))
        [ "$i" = "$p" ] && break
    done
    local packed=$(((PACK_MS + 999) / 1000))
    [ "$packed" -gt $((RESERVE_S - 3)) ] && packed=$((RESERVE_S - 3))   # 3 s kept for the last pack
    end=$((end + packed))
    [ "$end" -gt $((DEADLINE - RESERVE_S + packed)) ] && end=$((DEADLINE - RESERVE_S + packed))
    local budget=$((end - SECONDS))
    PART=$p PART_DIR=$WORK/$p PART_NOTES=()
    mkdir -p "$PART_DIR"
    local need=$(($(plan_of "$p") / 4))   # under a quarter of its plan, a part would only time out
    [ "$need" -lt 3 ] && need=3
    if [ "$budget" -lt "$need" ]; then
        echo "== $p: not started, the call's deadline (${DEADLINE}s) leaves ${budget}s of its planned $(plan_of "$p")s" >&2
        py event "$WORK" gr=part part="$p" planned_s="$(plan_of "$p")" budget_s="$budget" secs=0 \
            status="not started: the call's deadline (${DEADLINE} s) left ${budget} s of its planned $(plan_of "$p") s"
        return
    fi
    PART_START=$SECONDS PART_END=$((SECONDS + budget))
    echo "== $p (planned $(plan_of "$p")s, deadline in ${budget}s, at ${SECONDS}s of ${DEADLINE}s)" >&2
    "part_$p"
    local n=${#PART_NOTES[@]}
    py event "$WORK" gr=part part="$p" planned_s="$(plan_of "$p")" budget_s="$budget" secs=$((SECONDS - PART_START)) \
        status=ran note="$( ((n)) && IFS=';' && echo "${PART_NOTES[*]}")"
    pack
}

now_us() { local t=${EPOCHREALTIME:-}; t=${t/[.,]/}; echo "${t:-$(($(date +%s%N) / 1000))}"; }

pack() {   # OUTDIR again from WORK; its time is counted in PACK_MS (the reserve pays it)
    local t0
    t0=$(now_us)
    py pack "$WORK" "$OUTDIR" "$SECONDS" "${1:-0}" >&2
    PACK_MS=$((PACK_MS + ($(now_us) - t0) / 1000))
}

# ------------------------------------------------------------------ sizes

set_sizes() {
if [ "$small" = 1 ]; then
    MM=256 MM_REPEAT=3
    ATT=(--n 128 --heads 2 --batch 1 --head-dim 64 --repeat 2)       # bench_torch.py --small's
    TRANSLATE=(--small --batch 4 --beam 4 --src-len 8 --max-new 4 --repeat 1) TRANSLATE_MODEL=marian-small
    FORWARD=(--preset small --batch 2 --src-len 16 --tgt-len 16 --repeat 2)
    TORCH_ARGS=(--small)
    TUNE_ARGS=(--quick)                                               # 256^3, few candidates
    SHADERS=(--batch 2 --tgt-len 16 --beam 2)   # Whisper keeps its 1500 frames (8 of them pass lavapipe's 128 MiB)
    RERUN_DEFAULT="lsh"   # test_reliability takes minutes on lavapipe; the stub test covers its summary
    SUITE_FILTER_DEFAULT='^(errors|device|attention-api|cache|model|generate|attention-decode)$' JOBS_DEFAULT=2
else
    MM=4096 MM_REPEAT=10
    ATT=(--n 4096 --heads 16 --batch 4 --head-dim 64 --repeat 5)      # bench_torch.py's (4, 16, 4096, 64)
    TRANSLATE=(--batch 32 --beam 4 --src-len 32 --max-new 64 --repeat 3) TRANSLATE_MODEL=opus-mt-en-de-shape
    FORWARD=(--preset base --batch 8 --src-len 512 --tgt-len 512 --repeat 5)   # bench_torch.py's transformer
    TORCH_ARGS=()
    TUNE_ARGS=()                                                      # every candidate, 512^3 and 1024^3
    SHADERS=()                                                        # bench shaders' defaults (batch 8, 128/128, beam 4)
    RERUN_DEFAULT="lsh reliability"
    SUITE_FILTER_DEFAULT='' JOBS_DEFAULT=8
fi
}

# The tests that matter most on a GPU, most important first (names without the driver):
# kernels against the reference, the model paths, decoding, int8, the coopmat paths
# (parity-coopmat: the lavapipe-unstable test, run on the plain binary), errors. lsh and
# reliability run in their own part (rerun).
# coopmat2-wg leads: matmul_coopmat2_wg (NV2 at workgroup scope) runs on no driver of
# the project's own, so its first run against the reference is here; it becomes a
# default kernel only after it has passed (docs/performance.md).
SUITE_TESTS_DEFAULT="coopmat2-wg ops attention attention-decode model generate beam int8 parity-coopmat errors device attention-api"
SUITE_TESTS_DEFAULT+=" cli parity demo demo-int8 bench-attention threads cache json tune attention-parity marian"
SUITE_TESTS_DEFAULT+=" bad-models python"
# The tests of issue 36's kernels (KHR coopmat matmul with warp tiles and split-K,
# FlashAttention-2 on coopmat, flash decoding), run first: matched against every test
# name of the build, so a test added for them later is taken without editing this list.
# ops and attention hold the matmul and fused-attention cases, attention-decode the
# split-K decode form; the *-split-form tests run models with it.
SUITE_FIRST_DEFAULT='coopmat|splitk|split-k|split-form|flash|matmul|^ops$|^attention$|^attention-decode$'
SHADER_PRESETS="base nllb flan-t5-base whisper-small"

torch_cmd() {   # torch_cmd NAME LIMIT BENCH...: tools/bench_torch.py --only BENCH...
    local name=$1 limit=$2
    shift 2
    if [ -z "$TORCH_PY" ]; then note "$name absent: no Python with torch (set TORCH_PYTHON)"; return; fi
    run_cmd "$name" "$limit" env PYTHONUNBUFFERED=1 "$TORCH_PY" "$root/tools/bench_torch.py" "${TORCH_ARGS[@]}" \
        --only "$(IFS=,; echo "$*")"
}

part_info() {
    {
        echo "date: $(date -u +%FT%TZ)"
        echo "host: $(uname -srm)"
        echo "build: $build"
        echo "icd: ${ICD:-none}"
        echo "loader: $(ldconfig -p 2>/dev/null | grep -m1 'libvulkan\.so\.1 ' | sed 's/.*=> //')"
        echo "LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
        echo "VK_LAYER_PATH: ${VK_LAYER_PATH:-}"
        echo "torch python: ${TORCH_PY:-none}"
        ldd "$build/vkformer" 2>&1 | sed 's/^/ldd: /'
        echo "driver library: ${ICD_LIB:-not found}"
        echo "__EGL_VENDOR_LIBRARY_FILENAMES: ${__EGL_VENDOR_LIBRARY_FILENAMES:-}"
        ls /usr/local/nvidia/lib64 2>/dev/null | tr '\n' ' ' | sed 's/^/nvidia lib64: /'; echo
        ls -l /dev/nvidia* /dev/dri 2>&1 | sed 's/^/dev: /'
        [ -n "${ICD_LIB:-}" ] && ldd "$ICD_LIB" 2>&1 | sed 's/^/ldd driver: /'
        [ -f "${ICD:-}" ] && sed 's/^/icd file: /' "$ICD"
    } >"$PART_DIR/env.txt"
    run_cmd info-json 15 "$VK" info --json
    [ "${LAST_RC:-0}" = 0 ] || run_cmd loader-debug 10 env VK_LOADER_DEBUG=all "$VK" info
    run_cmd check 30 env VKFORMER_VALIDATE=1 "$VK" check
    if command -v nvidia-smi >/dev/null; then
        run_cmd nvidia-smi 10 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm \
            --format=csv
    else
        note "no nvidia-smi"
    fi
}

part_suite() {
    local left=$((PART_END - SECONDS))
    run_cmd runner "$left" python3 "$WORK/report.py" suite "$build" "$root" "${ICD:-}" "$PART_DIR" "${TORCH_PY:-}" \
        "$((left - 6))" "${GPU_REPORT_JOBS:-$JOBS_DEFAULT}" "${GPU_REPORT_SUITE_FILTER-$SUITE_FILTER_DEFAULT}" \
        "${GPU_REPORT_SUITE_TESTS:-$SUITE_TESTS_DEFAULT}" "${GPU_REPORT_SUITE_FIRST-$SUITE_FIRST_DEFAULT}"
    note "$(tail -n1 "$PART_DIR/runner.out" 2>/dev/null)"
}

# The tile space of the kernels and the built-in rule's picks. `vkformer tune` times and
# checks every candidate (the library's lists: the scalar families, the KHR and NV2
# cooperative-matrix warp tiles, the fused attention tiles) at its own sizes and writes
# them all to a file of its own (--out), never the cache's, so the parts after this one
# still run the built-in choice. Then the rule's picks at the sizes tune used, F32 and
# F16 (A, B, C F16, as tune's F16 race), through `bench matmul` with no tune file. The
# summary compares each with tune's best correct candidate at that dtype and size.
part_sweep() {
    local f=$PART_DIR/tune.json sizes left=$((PART_END - SECONDS)) keep=12   # keep: for the rule's picks
    [ $((left / 3)) -lt $keep ] && keep=$((left / 3))
    run_cmd tune $((left - keep)) "$VK" tune "${TUNE_ARGS[@]}" --out "$f" --json
    if [ -f "$f" ]; then
        cp "$f" "$WORK/tunefile.json"
        run_cmd candidates 5 python3 "$WORK/report.py" candidates "$f"
        sizes=$(python3 "$WORK/report.py" sizes "$f" 2>/dev/null)
    else
        note "tune wrote no file: no candidate was timed"
    fi
    [ -n "${sizes:-}" ] || sizes=$([ "$small" = 1 ] && echo 256 || echo 512,1024)
    run_cmd f32-rule 10 "$VK" bench matmul --size "$sizes" --repeat 5 --json
    run_cmd f16-rule 10 "$VK" bench matmul --size "$sizes" --repeat 5 --dtype f16 --json
}

# In each part the torch baseline (seconds, predictable) runs first: a vkformer command
# that hangs then costs its own figure, not the baseline too.
part_matmul() {
    torch_cmd torch 20 matmul_fp32
    run_cmd f32-auto 30 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --json
    # the fastest other fp32 family on the H100 (tiled was slower there), where time is left
    run_cmd f32-subgroup 15 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --kernel subgroup --json
}

part_coopmat() {
    torch_cmd torch 20 matmul_fp16
    run_cmd f16-coopmat 20 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --dtype f16 --kernel coopmat --json
    run_cmd f16-coopmat2 20 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --dtype f16 --kernel coopmat2 --json
    run_cmd f16-auto 15 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --dtype f16 --json
}

part_attention() {
    torch_cmd torch 20 attention
    run_cmd fused-auto 30 "$VK" bench attention "${ATT[@]}" --variants dense --precision f16 --json
    run_cmd fused-scalar 20 "$VK" bench attention "${ATT[@]}" --variants dense --precision f16 --kernel scalar --json
}

# OPUS-MT en-de shapes (vocabulary 58101, 6+6 x 512): the random-weight folder (~300 MB,
# a few seconds) is written into WORK/models by the torch Python; vkformer's line first.
part_translate() {
    if [ -z "$TORCH_PY" ]; then note "absent: no Python with torch (the folder and Transformers need it)"; return; fi
    local tp=()
    [ -n "${GPU_REPORT_TRANSFORMERS_PYTHON:-}" ] && tp=(--transformers-python "$GPU_REPORT_TRANSFORMERS_PYTHON")
    run_cmd opus 300 env PYTHONUNBUFFERED=1 "$TORCH_PY" "$root/tools/bench_translate.py" --vkformer "$VK" \
        --model "$WORK/models/$TRANSLATE_MODEL" "${TRANSLATE[@]}" --transformers-dtype fp32,fp16 "${tp[@]}" --json
    grep -q '"engine": "transformers"' "$PART_DIR/opus.out" 2>/dev/null ||
        note "no Transformers line: $(grep -m1 'not importable' "$PART_DIR/opus.log" 2>/dev/null | cut -c1-120)"
}

part_forward() {
    torch_cmd torch 20 transformer
    run_cmd base-f16 60 "$VK" bench model "${FORWARD[@]}" --precision f16 --json
}

# `bench shaders` on the device's own driver (NVIDIA's: registers and code size through
# VK_KHR_pipeline_executable_properties) for every preset: the pipelines the built-in
# rules pick at each model's real shapes, built, never run. Each preset may use what is
# left of the part less 4 s for each preset after it, so one that hangs leaves the others
# a few seconds each.
part_shaders() {
    local p n left limit
    read -r -a presets <<<"$SHADER_PRESETS"
    n=${#presets[@]}
    for p in "${presets[@]}"; do
        n=$((n - 1)) left=$((PART_END - SECONDS))
        limit=$((left - 4 * n))
        [ "$limit" -lt 3 ] && limit=3
        run_cmd "shaders-$p" "$limit" "$VK" bench shaders --preset "$p" "${SHADERS[@]}" --json
    done
}

# What the H100 left open (docs/performance.md, "First light"): two test_lsh failures and
# test_reliability's context creation after its device-loss cases returning
# VK_ERROR_INCOMPATIBLE_DRIVER, both seen only with Debian 12's validation layer. Run
# again through the suite's runner (validation layer on; Debian unstable's layer where
# the machine runs it), both at once; the summary quotes their failing lines and how far
# test_reliability got ("device loss: done").
part_rerun() {
    local left=$((PART_END - SECONDS))
    run_cmd runner "$left" python3 "$WORK/report.py" suite "$build" "$root" "${ICD:-}" "$PART_DIR" "${TORCH_PY:-}" \
        "$((left - 6))" 2 "" "${GPU_REPORT_RERUN_TESTS:-$RERUN_DEFAULT}" ""
    note "$(tail -n1 "$PART_DIR/runner.out" 2>/dev/null)"
}

# The 4096^3 matmuls again with the sweep's winners: its tune file (or GPU_REPORT_TUNE_FILE,
# an earlier call's) copied to where the library reads the device's tune file.
part_tune() {
    local from=${GPU_REPORT_TUNE_FILE:-$WORK/sweep/tune.json} to
    if [ ! -f "$from" ]; then
        note "no tune file (the sweep wrote none, and GPU_REPORT_TUNE_FILE names none): nothing to compare"
        return
    fi
    to=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tuning"]["file"])' "$WORK/info/info-json.out" 2>/dev/null)
    if [ -z "$to" ] || ! mkdir -p "$(dirname "$to")" || ! cp "$from" "$to"; then
        note "the device's tune file path is unknown (info --json gave none): nothing to compare"
        return
    fi
    [ "$from" = "$WORK/sweep/tune.json" ] || { cp "$from" "$WORK/tunefile.json"; note "tune file restored from $from"; }
    run_cmd f32-tuned 20 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --json
    run_cmd f16-tuned 20 "$VK" bench matmul --size $MM --repeat $MM_REPEAT --dtype f16 --json
}

# ------------------------------------------------------------------ the helper (Python)

write_helper() {
cat >"$1" <<'PY'
"""tools/gpu_report.sh's helper: tag, event, suite, pack, summary (see the script)."""
import concurrent.futures, glob, io, json, os, re, signal, subprocess, sys, tarfile, threading, time

MAX_FILES = 8
# a test's lines that say what failed (the harness's CHECK lines, wrong results, Vulkan errors)
FAIL_LINE = re.compile(r"\.c:\d+: |FAIL|WRONG|[Ww]rong|mismatch|VK_ERROR_|validation: |did not|does not")
OUT_FILES = ("summary.md", "results.jsonl", "suite.json", "logs.tar.gz", "tunefile.json")

def validation_count(text):
    """Validation messages in a log: the message lines, or the totals a program reported."""
    lines = len(re.findall(r"validation: ", text))
    totals = sum(int(a) + int(b) for a, b in re.findall(r"validation layer reported (\d+) errors and (\d+) warnings", text))
    totals += sum(int(a) for a in re.findall(r"(\d+) validation messages in all", text))
    return max(lines, totals)

def value(v):
    try:
        return json.loads(v)
    except ValueError:
        return v

def append(work, recs):
    with open(os.path.join(work, "records.jsonl"), "a") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")

def cmd_tag(work, part, name, rc, secs, limit, *argv):
    d = os.path.join(work, part)
    rec = {"gr": "command", "part": part, "cmd": name, "rc": value(rc), "secs": value(secs), "limit": value(limit),
           "argv": " ".join(argv)}
    rec["status"] = ("not run (part deadline)" if rc == "not-run" else "ok" if rc == "0" else
                     "timeout" if rc in ("124", "137") else "failed")
    recs = []
    try:
        text = open(os.path.join(d, name + ".log"), errors="replace").read()
    except OSError:
        text = ""
    rec["validation_lines"] = validation_count(text)
    if rc != "0":
        lines = [l.strip() for l in text.splitlines() if l.strip()]
        rec["last_error"] = lines[-1][:300] if lines else ""
    try:
        for line in open(os.path.join(d, name + ".out"), errors="replace"):
            if line.startswith("{"):
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if isinstance(r, dict):
                    r.update(gr="result", part=part, cmd=name)
                    recs.append(r)
    except OSError:
        pass
    rec["results"] = len(recs)
    append(work, recs + [rec])

def cmd_event(work, *kv):
    append(work, [{k: value(v) if k not in ("note", "status", "part") else v
                   for k, v in (a.split("=", 1) for a in kv)}])

# ------------------------------------------------------------------ suite

def cmd_suite(build, root, icd, out, torch_py, budget, jobs, filt, order, first=""):
    """The meson tests of the build folder, run without meson (the GPU machine may lack
    it, and the folder was configured at another path): the lavapipe suite's tests (the
    swiftshader suite's where lavapipe is absent) whose names match the regex `first`
    (the new kernels' tests, in `order`'s order, then by name), then those named in
    `order`, most important first, `jobs` at a time, with the configured source and build paths rewritten to this
    checkout's and the software ICD (argument or env) to `icd`; each with its env
    (VKFORMER_VALIDATE=1 among it) and at most its timeout and what is left of `budget`.
    A test still running when the budget ends is killed; one not started is "not reached"."""
    budget, jobs, start = float(budget), int(jobs), time.time()
    info = json.load(open(os.path.join(build, "meson-info", "meson-info.json")))
    old_src, old_build = info["directories"]["source"], info["directories"]["build"]
    tests = json.load(open(os.path.join(build, "meson-info", "intro-tests.json")))
    suite_of = lambda t: {s.split(":")[-1] for s in t["suite"]}
    suites = set().union(*(suite_of(t) for t in tests)) if tests else set()
    driver = "lavapipe" if "lavapipe" in suites else "swiftshader" if "swiftshader" in suites else None
    base = lambda t, d: t["name"][:-len(d) - 1] if t["name"].endswith("-" + d) else t["name"]
    by_name = {base(t, driver): t for t in tests if driver in suite_of(t)}
    # tests of lavapipe-unstable (coopmat on a CPU driver) that the main driver lacks, when
    # they run the plain CLI through its wrapper (not the unstable runner)
    extra_sub = {}
    for t in tests:
        if "lavapipe-unstable" in suite_of(t) and base(t, "lavapipe-unstable") not in by_name:
            wrapper = os.path.join(old_build, "tests", "vkformer-lavapipe-unstable")
            if wrapper in t["cmd"][1:]:
                by_name[base(t, "lavapipe-unstable")] = t
                extra_sub[t["name"]] = {wrapper: os.path.join(old_build, "vkformer")}
    old_icds = {t["env"][k] for t in tests for k in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES") if k in t["env"]}
    subst = {old_build: build, old_src: root}
    if icd:
        subst.update({o: icd for o in old_icds})
    pat = re.compile("|".join(re.escape(k) for k in sorted(subst, key=len, reverse=True)))
    fix = lambda s: pat.sub(lambda m: subst[m.group(0)], s)
    usr_py_torch = os.path.exists("/usr/bin/python3") and subprocess.run(
        ["/usr/bin/python3", "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)"],
        capture_output=True).returncode == 0
    wanted = order.split()
    order_ix = {n: i for i, n in enumerate(wanted)}
    firsts = sorted((n for n in by_name if first and re.search(first, n)), key=lambda n: (order_ix.get(n, len(wanted)), n))
    wanted = firsts + [n for n in wanted if n not in firsts]
    results, live, lock, stop = {}, {}, threading.Lock(), threading.Event()
    for n in wanted:
        if n not in by_name:
            results[n] = {"name": n, "status": "not in this build", "rc": None, "secs": 0, "validation_lines": 0}
    for n in sorted(by_name):
        if n not in wanted:
            results[n] = {"name": n, "meson_name": by_name[n]["name"], "status": "not selected", "rc": None, "secs": 0,
                          "validation_lines": 0}
    chosen = [n for n in wanted if n in by_name]

    def run(n):
        t = by_name[n]
        rec = {"name": n, "meson_name": t["name"], "rc": None, "secs": 0, "validation_lines": 0, "first": n in firsts}
        if filt and not re.search(filt, n):
            rec["status"] = "filtered"
            return rec
        cmd = [fix(extra_sub.get(t["name"], {}).get(c, c)) for c in t["cmd"]]
        if cmd[0] == "/usr/bin/python3" and torch_py and not usr_py_torch:
            cmd[0] = torch_py  # the test wants torch; /usr/bin/python3 here has none
        if not os.path.exists(cmd[0]) or not all(os.path.exists(c) for c in cmd[1:] if c.startswith(build + "/")):
            rec["status"] = "not built (run ninja -C BUILD, every target, before carrying the build folder)"
            return rec
        left = budget - (time.time() - start)
        if left < 3 or stop.is_set():
            rec["status"] = "not reached (budget)"
            return rec
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "2")   # torch references, tests side by side
        env.update({k: fix(v) for k, v in t["env"].items()})
        for k in ("LD_LIBRARY_PATH",):   # the test's own (the build folder) first, then the set-up's (.gl/root)
            if os.environ.get(k) and k in t["env"]:
                env[k] = fix(t["env"][k]).rstrip(":") + ":" + os.environ[k]
        if icd:
            env["VK_ICD_FILENAMES"] = env["VK_DRIVER_FILES"] = icd
        own = float(t["timeout"] or 300)
        limit = min(own, left)
        log = os.path.join(out, n + ".log")
        t0 = time.time()
        with open(log, "wb") as f:
            f.write(("$ " + " ".join(cmd) + "\n").encode())
            f.flush()
            p = subprocess.Popen(cmd, env=env, cwd=fix(t["workdir"]) if t["workdir"] else build,
                                 stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            with lock:
                live[n] = p
            try:
                rc = p.wait(timeout=limit)
                status = "ok" if rc == 0 else "skipped" if rc == 77 else "fail"
            except subprocess.TimeoutExpired:
                kill(p)
                rc, status = None, "timeout" if limit == own else "killed (budget)"
            with lock:
                live.pop(n, None)
        if stop.is_set() and status == "fail":
            status = "killed (budget)"
        text = open(log, errors="replace").read()
        rec.update(rc=rc, status=status, secs=round(time.time() - t0, 1), validation_lines=validation_count(text))
        # how far it got (test_reliability: "device loss: done at 12.3 s"), and what failed
        stages = re.findall(r"^([A-Za-z][\w ,-]*): done at", text, re.M)
        if stages:
            rec["last_stage"] = stages[-1]
        if status != "ok":
            rec["fail_lines"] = [l.strip()[:240] for l in text.splitlines() if FAIL_LINE.search(l)][:8]
        # what a test left out on this device (the H100's test_ops: "... matmul_subgroup not tested")
        skipped_parts = [l.strip()[:240] for l in text.splitlines() if "not tested" in l]
        if skipped_parts:
            rec["not_tested"] = skipped_parts[:6]
        return rec

    def kill(p):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except OSError:
                return
            try:
                p.wait(timeout=3)
                return
            except subprocess.TimeoutExpired:
                pass

    def write(done):
        res = list(results.values())
        for n in chosen:
            res.append(done.get(n) or {"name": n, "meson_name": by_name[n]["name"], "status": "not reached (budget)",
                                       "rc": None, "secs": 0, "validation_lines": 0})
        order_ix = {n: i for i, n in enumerate(wanted)}
        for r in res:
            r.setdefault("first", r["name"] in firsts)
        res.sort(key=lambda r: (order_ix.get(r["name"], len(wanted)), r["name"]))
        json.dump({"driver_suite": driver, "icd": icd, "filter": filt, "first": first, "jobs": jobs, "budget_s": budget,
                   "secs": round(time.time() - start, 1), "tests": res}, open(os.path.join(out, "suite.json"), "w"),
                  indent=1)
        return res

    done = {}

    def on_term(signum, frame):   # stopped from outside: kill what runs, keep what is known
        stop.set()
        with lock:
            for p in list(live.values()):
                kill(p)
        write(done)
        sys.exit(1)
    signal.signal(signal.SIGTERM, on_term)

    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
        futures = {ex.submit(run, n): n for n in chosen}
        for fu in concurrent.futures.as_completed(futures):
            done[futures[fu]] = fu.result()
            r = done[futures[fu]]
            if r["status"] not in ("filtered",):
                print(f'   {r["name"]:20s} {r["status"]:18s} rc={r["rc"]} {r["secs"]}s', file=sys.stderr, flush=True)
    res = write(done)
    for r in res:   # one record per test in results.jsonl too (the rerun part's have no suite.json)
        if r["status"] not in ("not selected", "filtered"):
            print(json.dumps(dict(r, bench="test")))
    count = lambda *s: [r for r in res if r["status"] in s]
    ran, bad = count("ok", "fail", "timeout", "skipped", "killed (budget)"), count("fail", "timeout")
    print(f'{len(ran)} of {len(chosen)} selected tests ran ({driver} suite on {icd or "the default driver"}), '
          f'{len(count("ok"))} ok, {len(bad)} failed' + (f' ({" ".join(r["name"] for r in bad)})' if bad else "") +
          f', {len(count("killed (budget)"))} killed at the budget, {len(count("not reached (budget)"))} not reached'
          f', {sum(r["validation_lines"] for r in res)} validation lines' + (f"; filter {filt}" if filt else ""))

# ------------------------------------------------------------------ the sweep

def cmd_candidates(path):
    """Every candidate a tune file holds (its "measurements"), one JSON line each, in
    the order they were timed (each race's first: its baseline, the built-in choice)."""
    t = json.load(open(path))
    for i, m in enumerate(t.get("measurements", [])):
        print(json.dumps(dict(m, bench="tune-candidate", i=i)))
    print(json.dumps({"bench": "tune-winners", "matmul": t.get("matmul"), "matmul_coopmat": t.get("matmul_coopmat"),
                      "attention": t.get("attention"), "quick": t.get("quick")}))

def cmd_sizes(path):
    """The matmul sizes a tune file timed, as bench matmul's --size takes them."""
    sizes = sorted({m["size"] for m in json.load(open(path)).get("measurements", [])
                    if m.get("op") == "matmul" and isinstance(m.get("size"), int)})
    print(",".join(map(str, sizes)))

# ------------------------------------------------------------------ summary

def load(paths):
    recs = []
    for p in paths:
        try:
            for line in open(p, errors="replace"):
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
        except OSError:
            pass
    return recs

GOALS = [  # key, threshold (ratio), what: issue 36's four, and fp32 from before it (issue 36 names none)
    ("fp16", 0.5, "fp16 GEMM 4096^3 >= 0.5x cuBLAS (torch.matmul fp16)"),
    ("attention", 0.3, "fused attention >= 0.3x SDPA"),
    ("forward", 0.5, "base forward >= 0.5x PyTorch fp16 eager"),
    ("translate", 6.0, "OPUS-MT translation, beam 4, batch 32 >= 6x Transformers fp32 on the same GPU"),
    ("fp32", 0.8, "fp32 GEMM >= 0.8x cuBLAS (torch.matmul fp32, TF32 off): the earlier target, issue 36 names none"),
    ("rule", 0.8, "the untuned (built-in) choice within 20 % of tune's best: >= 0.8x its speed, every shape swept"),
]

def summary(recs, suite, files_note=""):
    o = io.StringIO()
    w = lambda *a: print(*a, file=o)
    reports = [r for r in recs if r.get("gr") == "report"]
    rep = {}
    for r in reports:
        rep.update(r)
    # merged calls: every part any of them ran, in plan order
    ran = {p for r in reports for p in r.get("parts", [])}
    rep["parts"] = [p for p in rep.get("plan", {}) if p in ran] + sorted(ran - set(rep.get("plan", {})))
    small = bool(rep.get("small"))

    def res(part, cmd, **kw):
        rows = [r for r in recs if r.get("gr") == "result" and r.get("part") == part and r.get("cmd") == cmd
                and all(r.get(k) == v for k, v in kw.items())]
        return rows[-1] if rows else {}

    def allres(part, cmd, **kw):
        return [r for r in recs if r.get("gr") == "result" and r.get("part") == part and r.get("cmd") == cmd
                and all(r.get(k) == v for k, v in kw.items())]

    def cand_label(c):   # a tune candidate: its kernel and tiles
        if c.get("op") == "attention":
            return (f"{'lanes' if c.get('lanes') else 'fused'} wg {c.get('workgroup')}, bq {c.get('bq')}, bk {c.get('bk')}, "
                    f"td {c.get('td')}, tq {c.get('tq')}")
        return f"{c.get('kernel')} wg {c.get('workgroup')}, {c.get('bm')}×{c.get('bn')}, bk {c.get('bk')}, {c.get('tm')}×{c.get('tn')}"

    def cmdrec(part, cmd):
        rows = [r for r in recs if r.get("gr") == "command" and r.get("part") == part and r.get("cmd") == cmd]
        return rows[-1] if rows else {}

    def why(part, cmd):
        c = cmdrec(part, cmd)
        if not c:
            p = [r for r in recs if r.get("gr") == "part" and r.get("part") == part]
            return "not run" + (f" ({p[-1].get('status')}{': ' + p[-1]['note'] if p[-1].get('note') else ''})" if p else
                                " (the part was not reached)")
        if c.get("status") == "ok":
            p = [r for r in recs if r.get("gr") == "part" and r.get("part") == part and r.get("note")]
            return "no record" + (f" ({p[-1]['note'][:150]})" if p else "")
        return f'{c.get("status")} (exit {c.get("rc")}): {c.get("last_error", "")[:100]}'

    fmt = lambda x, u="": "—" if x is None else (f"{x:.4g} {u}".rstrip())
    rows = []

    def target(key, what, vk, vk_s, base, base_s, ratio):
        g = next(x for x in GOALS if x[0] == key)
        verdict = ("not measured" if ratio is None else "dry run (small sizes)" if small else
                   "met" if ratio >= g[1] else "not met")
        rows.append((what, vk_s, base_s, "—" if ratio is None else f"{ratio:.3g}×", f"≥ {g[1]}×", verdict))

    # fp16: the best of the built-in choice and the two cooperative-matrix families
    n = res("matmul", "f32-auto", bench="matmul").get("m", rep.get("mm"))
    fp16_cmds = ("f16-auto", "f16-coopmat", "f16-coopmat2")
    cands = [(c, res("coopmat", c, bench="matmul")) for c in fp16_cmds]
    cands = [(c, r) for c, r in cands if r.get("gflops")]
    best = max(cands, key=lambda cr: cr[1]["gflops"])[1] if cands else {}
    t = res("coopmat", "torch", bench="matmul_fp16")
    tg = t["tflops"] * 1e3 if "tflops" in t else None
    target("fp16", f"fp16 matmul {n}³, the best of the built-in choice, coopmat and coopmat2 (best: "
           f"{best.get('kernel', '—')}{', built-in' if best and best.get('source') != 'forced' else ''}) vs torch.matmul fp16",
           best.get("gflops"), fmt(best.get("gflops"), "GFLOP/s") if best else
           "; ".join(f"{c}: {why('coopmat', c)}" for c in fp16_cmds),
           tg, fmt(tg, "GFLOP/s") if tg else (t.get("skipped") or why("coopmat", "torch")),
           best["gflops"] / tg if best and tg else None)
    # attention
    v, t = res("attention", "fused-auto", bench="attention"), res("attention", "torch", bench="attention")
    shape = f"batch {v.get('batch', t.get('batch', '?'))}, {v.get('heads', t.get('heads', '?'))} heads of " \
            f"{v.get('head_dim', '?')}, n {v.get('n', t.get('n', '?'))}"
    target("attention", f"fused attention fp16 ({v.get('kernel', '?')}), {shape}, vs {t.get('impl', 'SDPA').split(':')[0]} "
           f"{t.get('dtype', '')}", v.get("ms"), fmt(v.get("ms"), "ms") if v.get("ms") is not None else why("attention", "fused-auto"),
           t.get("ms"), fmt(t.get("ms"), "ms") if t.get("ms") else why("attention", "torch"),
           t["ms"] / v["ms"] if v.get("ms") and t.get("ms") else None)
    # forward
    v, t = res("forward", "base-f16", bench="model"), res("forward", "torch", bench="transformer")
    target("forward", f"{v.get('preset', 'base')} forward, batch {v.get('batch', '?')}, {v.get('src_len', '?')}/"
           f"{v.get('tgt_len', '?')}, f16, vs nn.Transformer {t.get('dtype', '')} eager (torch without embeddings "
           "and generator)", v.get("forward_ms"), fmt(v.get("forward_ms"), "ms") if v else why("forward", "base-f16"),
           t.get("ms"), fmt(t.get("ms"), "ms") if t.get("ms") else why("forward", "torch"),
           t["ms"] / v["forward_ms"] if v.get("forward_ms") and t.get("ms") else None)
    # translation
    v = res("translate", "opus", engine="vkformer")
    t32, t16 = res("translate", "opus", engine="transformers", dtype="fp32"), res("translate", "opus", engine="transformers", dtype="fp16")
    tps = lambda r: r.get("target_tokens_per_s")
    target("translate", f"OPUS-MT en-de shapes translation, batch {v.get('batch', '?')}, beam {v.get('beams', '?')}, {v.get('steps', '?')} "
           f"steps, target tokens/s, vs Transformers fp32" + (f" on {t32['device']}" if t32 else ""), tps(v),
           fmt(tps(v), "tok/s") if v else why("translate", "opus"), tps(t32),
           fmt(tps(t32), "tok/s") if t32 else why("translate", "opus"),
           tps(v) / tps(t32) if tps(v) and tps(t32) else None)
    # fp32
    v, t = res("matmul", "f32-auto", bench="matmul"), res("matmul", "torch", bench="matmul_fp32")
    tg = t["tflops"] * 1e3 if "tflops" in t else None
    tf = " (TF32 was ON: not the target's baseline)" if t.get("tf32") else ""
    target("fp32", f"fp32 matmul {n}³, vkformer {v.get('kernel', 'auto')} vs torch.matmul fp32{tf}",
           v.get("gflops"), fmt(v.get("gflops"), "GFLOP/s") if v else why("matmul", "f32-auto"),
           tg, fmt(tg, "GFLOP/s") if tg else (t.get("skipped") or why("matmul", "torch")),
           v["gflops"] / tg if v.get("gflops") and tg and not t.get("tf32") else None)
    # the sweep: the built-in rule's pick at each (dtype, size) tune timed, against tune's
    # best correct candidate there; fused attention: tune's first candidate (the built-in
    # tiles, by tune's construction) against its fastest correct one
    cands_all = [r for r in recs if r.get("gr") == "result" and r.get("part") == "sweep" and r.get("bench") == "tune-candidate"]
    sweep_rows, sweep_notes = [], []
    for cmd, dtype in (("f32-rule", "f32"), ("f16-rule", "f16")):
        # the shapes tune timed in this dtype (F16 only where the device has cooperative matrices)
        shapes = sorted({c.get("size") for c in cands_all if c.get("op") == "matmul" and c.get("dtype") == dtype})
        picks = {r.get("m"): r for r in allres("sweep", cmd, bench="matmul")}
        if not shapes and picks:
            sweep_notes.append(f"{dtype}: tune timed no {dtype} candidates (its F16 race runs only with cooperative "
                               f"matrices); the rule's {dtype} picks are in the records, not compared")
        for size in shapes:
            r = picks.get(size, {})
            pool = [c for c in cands_all if c.get("op") == "matmul" and c.get("dtype") == dtype and c.get("size") == size
                    and c.get("correct") and c.get("gflops")]
            b = max(pool, key=lambda c: c["gflops"]) if pool else None
            tiles = "×".join(map(str, r.get("tiles") or [])) or "—"
            sweep_rows.append((f"matmul {dtype} {size}³", f"{r.get('kernel')} [{tiles}] ({r.get('source')})" if r else
                               why("sweep", cmd), r.get("gflops"), "GFLOP/s", cand_label(b) if b else "—",
                               b["gflops"] if b else None, r["gflops"] / b["gflops"] if b and r.get("gflops") else None,
                               len(pool)))
    att = [c for c in cands_all if c.get("op") == "attention"]
    att_ok = [c for c in att if c.get("correct") and c.get("ms")]
    if att:
        b = min(att_ok, key=lambda c: c["ms"]) if att_ok else None
        first = att[0]
        sweep_rows.append((f"fused attention n {first.get('n')}, {first.get('heads')} heads of {first.get('head_dim')}",
                           cand_label(first) + " (tune's first: the built-in tiles)" + ("" if first.get("correct") else ", WRONG"),
                           first.get("ms"), "ms", cand_label(b) if b else "—", b["ms"] if b else None,
                           b["ms"] / first["ms"] if b and first.get("ms") and first.get("correct") else None, len(att_ok)))
    ratios = [x[6] for x in sweep_rows]
    worst = min((x for x in sweep_rows if x[6] is not None), key=lambda x: x[6], default=None)
    if sweep_rows and None not in ratios:
        target("rule", f"the untuned choice against `vkformer tune`'s best, {len(sweep_rows)} shapes (worst: {worst[0]})",
               None, f"{fmt(worst[2], worst[3])} ({worst[1][:90]})", None, f"{fmt(worst[5], worst[3])} ({worst[4][:90]})",
               worst[6])
    else:
        target("rule", "the untuned choice against `vkformer tune`'s best, at tune's shapes", None,
               why("sweep", "f32-rule") if not sweep_rows else f"{ratios.count(None)} of {len(sweep_rows)} shapes unmeasured",
               None, why("sweep", "tune") if not cands_all else "see the sweep below", None)
    w("# vkformer GPU report\n")
    dev = res("info", "info-json")
    try:
        d = dev["devices"][dev["default"]]
        w(f"Device: {d['name']} ({d['type']}, {d['driver_name']} {d['driver_info']}, Vulkan {d['api_version']}); "
          f"cooperative matrix: {'KHR' if d.get('cooperative_matrix') else 'no'}"
          f"{', NV2' if d.get('cooperative_matrix2') else ''}.")
    except (KeyError, IndexError, TypeError):
        w(f"Device: unknown ({why('info', 'info-json')}).")
    w(f"Commit: {rep.get('commit', 'unknown')}. Date: {rep.get('date', '?')}. Build: {rep.get('build', '?')}.")
    if small:
        w("\n**A dry run (--small): tiny sizes on whatever driver ran it. The ratios mean nothing.**")
    elapsed = rep.get("elapsed_s")
    state = "finished" if rep.get("finished") else "did not finish (the figures are those of the last part packed)"
    w(f"\nThe call {state}: {elapsed} s of its {rep.get('deadline_s')} s deadline"
      + (f" (planned {rep.get('plan_total_s')} s)" if rep.get("plan_total_s") else "") + f". {files_note}")
    w("\n## Targets (reported, never asserted by a test)\n")
    w("ratio: how many times the baseline's speed vkformer reaches (GFLOP/s ÷ GFLOP/s, or baseline ms ÷ vkformer ms).\n")
    w("| comparison | vkformer | baseline | ratio | target | verdict |\n|---|---|---|---|---|---|")
    for r in rows:
        w("| " + " | ".join(str(x).replace("|", "/") for x in r) + " |")
    # also measured, no target
    extra = []
    t16r = tps(t16)
    if t16r and tps(v):
        extra.append(f"translation vs Transformers fp16: {tps(v) / t16r:.3g}× ({fmt(tps(v))} vs {fmt(t16r)} target tokens/s)")
    for c, label in (("f16-auto", "fp16 matmul, built-in choice"), ("f16-coopmat", "fp16 matmul, coopmat (KHR)"),
                     ("f16-coopmat2", "fp16 matmul, coopmat2 (NV)")):
        r = res("coopmat", c, bench="matmul")
        if r:
            extra.append(f"{label}: {fmt(r.get('gflops'), 'GFLOP/s')} ({r.get('kernel')}, max rel err {r.get('max_rel_err')})")
    for c, label in (("f32-subgroup", "fp32 matmul, subgroup"),):
        r = res("matmul", c, bench="matmul")
        if r:
            extra.append(f"{label}: {fmt(r.get('gflops'), 'GFLOP/s')}")
    r = res("attention", "fused-scalar", bench="attention")
    if r:
        extra.append(f"fused attention fp16, scalar kernel: {fmt(r.get('ms'), 'ms')}")
    for c, key, tcmd, tb in (("f32-tuned", "fp32", "matmul", "matmul_fp32"), ("f16-tuned", "fp16", "coopmat", "matmul_fp16")):
        r, t = res("tune", c, bench="matmul"), res(tcmd, "torch", bench=tb)
        if r:
            ratio = f", {r['gflops'] / (t['tflops'] * 1e3):.3g}× torch" if r.get("gflops") and t.get("tflops") else ""
            extra.append(f"{key} matmul {r.get('m')}³ with the sweep's tune file: {fmt(r.get('gflops'), 'GFLOP/s')} "
                         f"({r.get('kernel')}, from {r.get('source')}){ratio}")
    tune = res("sweep", "tune")
    if tune:
        extra.append(f"tune winners: matmul {json.dumps(tune.get('matmul'))}, attention {json.dumps(tune.get('attention'))}")
    # validation
    vcount = sum(r.get("validation_lines", 0) for r in recs if r.get("gr") == "command" and r.get("cmd") == "check")
    tests = (suite or {}).get("tests", [])
    vcount += sum(t.get("validation_lines", 0) for t in tests)
    if cmdrec("info", "check") or tests:
        extra.append(f"validation messages (check and the suite, layer on): {vcount}")
    if extra:
        w("\nAlso measured:\n")
        for e in extra:
            w("- " + e)
    # the sweep
    w("\n## Sweep: the built-in rule's picks against `vkformer tune`'s best\n")
    if not sweep_rows:
        w("Nothing to compare: tune: " + why("sweep", "tune") + "; the rule's picks: " + why("sweep", "f32-rule") + ".")
    else:
        w(f"Tune timed {len(cands_all)} candidates ({len([c for c in cands_all if not c.get('correct')])} wrong). "
          "Untuned: `bench matmul` with no tune file (F16: A, B, C F16, as tune's F16 race); the target is "
          "≥ 0.8× the best.\n")
        w("| shape | untuned choice | untuned | tune's best (of correct) | best | ratio | within 20 % |\n|---|---|---|---|---|---|---|")
        for shape, pick, v, u, bl, bv, ratio, nok in sweep_rows:
            verdict = "—" if ratio is None else "dry run" if small else "met" if ratio >= 0.8 else "not met"
            w(f"| {shape} | {pick} | {fmt(v, u)} | {bl} (of {nok}) | {fmt(bv, u)} | "
              f"{'—' if ratio is None else f'{ratio:.3g}×'} | {verdict} |")
    for note_ in sweep_notes:
        w(f"\n{note_}.")
    # the re-run of the H100's open failures
    w("\n## Re-run: what the H100 left open\n")
    w("Two test_lsh failures and test_reliability's context creation after device loss "
      "(VK_ERROR_INCOMPATIBLE_DRIVER), both seen on 2026-11-26 with Debian 12's validation layer.\n")
    rr = allres("rerun", "runner", bench="test")
    if not rr:
        w("No test ran again: " + why("rerun", "runner") + ".")
    for t in rr:
        line = f"- {t.get('name')}: **{t.get('status')}**" + (f" in {t.get('secs')} s" if t.get("secs") else "")
        if t.get("validation_lines"):
            line += f", {t['validation_lines']} validation lines"
        if t.get("name") == "reliability":
            line += (f"; got as far as \"{t['last_stage']}: done\"" if t.get("last_stage") else "; no stage finished")
            line += ("; the device-loss cases finished" if t.get("last_stage") == "device loss" else
                     "; the device-loss cases did not finish")
            inc = [l for l in t.get("fail_lines", []) if "INCOMPATIBLE_DRIVER" in l]
            line += f"; VK_ERROR_INCOMPATIBLE_DRIVER: {'seen' if inc else 'not seen'}"
        w(line)
        for l in t.get("fail_lines", [])[:6]:
            w(f"  - `{l[:200]}`")
    # bench shaders
    w("\n## `bench shaders` on this driver\n")
    sh = [r for r in recs if r.get("gr") == "result" and r.get("part") == "shaders" and r.get("bench") == "shaders"]
    presets = [c.split("-", 1)[1] for c in dict.fromkeys(c.get("cmd") for c in recs if c.get("gr") == "command"
                                                        and c.get("part") == "shaders")]
    if not presets:
        w("No preset listed: " + why("shaders", "shaders-base") + ".")
    else:
        w("| preset | pipelines | with statistics | max registers | spills | code bytes (sum) | below the waves floor | status |\n"
          "|---|---|---|---|---|---|---|---|")
        for pr in presets:
            rs = [r for r in sh if r.get("cmd") == "shaders-" + pr]
            c = cmdrec("shaders", "shaders-" + pr)
            num = lambda k: [r[k] for r in rs if isinstance(r.get(k), (int, float))]
            top = max(rs, key=lambda r: r.get("registers") or -1, default={})
            below = [r["pipeline"] for r in rs if isinstance(r.get("waves"), int) and isinstance(r.get("waves_floor"), int)
                     and r["waves_floor"] and r["waves"] < r["waves_floor"]]
            w(f"| {pr} | {len(rs)} | {len([r for r in rs if r.get('statistics')])} | "
              f"{fmt(top.get('registers'))}{' (' + top['pipeline'] + ')' if top.get('registers') is not None else ''} | "
              f"{sum(num('spills')) if num('spills') else '—'} | {sum(num('code_bytes')) if num('code_bytes') else '—'} | "
              f"{', '.join(below) or '—'} | {c.get('status', 'not run')}"
              f"{': ' + c.get('last_error', '')[:80].replace('|', '/') if c.get('status') not in ('ok', None) else ''} |")
        seen = {}
        for r in sh:
            seen.setdefault(r.get("pipeline"), r)
        if any(r.get("statistics") for r in seen.values()):
            w("\nEach pipeline once (its first preset):\n")
            w("| pipeline | registers | spills | shared bytes | code bytes | instructions | matrix instr. | waves | FLOP/byte | first use |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
            for name, r in seen.items():
                w(f"| {name} | {fmt(r.get('registers'))} | {fmt(r.get('spills'))} | {fmt(r.get('shared_bytes'))} | "
                  f"{fmt(r.get('code_bytes'))} | {fmt(r.get('instructions'))} | {fmt(r.get('matrix_instructions'))} | "
                  f"{fmt(r.get('waves'))} | {fmt(r.get('flops_per_byte'))} | {r.get('preset')}: {r.get('first_use', '')[:60]} |")
    # suite
    w("\n## Suite (validation layer on)\n")
    if not tests:
        w("Not run: " + why("suite", "runner"))
    else:
        by = {}
        for t in tests:
            by.setdefault(t["status"], []).append(t)
        w(f"{suite.get('driver_suite')} suite's tests on {suite.get('icd') or 'the default driver'}, "
          f"{suite.get('jobs')} at a time, budget {suite.get('budget_s')} s, {suite.get('secs')} s used.\n")
        w("| status | tests |\n|---|---|")
        for s, ts in sorted(by.items(), key=lambda kv: ["fail", "timeout", "killed (budget)", "ok", "skipped",
                                                          "not reached (budget)"].index(kv[0])
                            if kv[0] in ["fail", "timeout", "killed (budget)", "ok", "skipped", "not reached (budget)"] else 9):
            w(f"| {s} | " + ", ".join(f"{t['name']}" + (f" ({t['secs']} s)" if t.get("secs") else "") +
                                     (f" [{t['validation_lines']} validation lines]" if t.get("validation_lines") else "")
                                     for t in ts) + " |")
        firsts = [t for t in tests if t.get("first")]
        w(f"\nThe new kernels' tests, run first (names matching `{suite.get('first') or ''}`): " +
          (", ".join(f"{t['name']} {t['status']}" for t in firsts) if firsts else "none matched") + ".")
        nt = [(t["name"], l) for t in tests for l in t.get("not_tested", [])]
        if nt:
            w("\nWhat the tests said they left out on this device (\"not tested\"; the H100 printed \"matmul_subgroup "
              "not tested\" though its subgroups have shuffles):\n")
            for name, l in nt:
                w(f"- {name}: `{l[:200]}`")
        for t in tests:
            if t.get("fail_lines"):
                w(f"\n{t['name']} ({t['status']}), its first failing lines:\n")
                for l in t["fail_lines"][:6]:
                    w(f"- `{l[:200]}`")
    # parts
    w("\n## Parts\n\n| part | planned s | deadline s | used s | commands | failed | status |\n|---|---|---|---|---|---|---|")
    partrec = {}
    for r in recs:
        if r.get("gr") == "part":
            partrec[r["part"]] = r
    for p in rep.get("parts", list(partrec)):
        r = partrec.get(p)
        cmds = [c for c in recs if c.get("gr") == "command" and c.get("part") == p]
        failed = [c for c in cmds if c.get("status") != "ok"]
        if r is None:
            w(f"| {p} | {rep.get('plan', {}).get(p, '?')} | — | — | {len(cmds)} | {len(failed)} | not reached: the call "
              "ended before it (stopped from outside) |")
            continue
        st = r.get("status", "")
        if r.get("note"):
            st += ": " + r["note"]
        w(f"| {p} | {r.get('planned_s')} | {r.get('budget_s')} | {r.get('secs')} | {len(cmds)} | {len(failed)} | "
          f"{st.replace('|', '/')} |")
    bad = [c for c in recs if c.get("gr") == "command" and c.get("status") != "ok"]
    if bad:
        w("\n## Commands that failed, timed out or did not run\n")
        for c in bad:
            w(f"- {c['part']}/{c['cmd']}: {c['status']} (exit {c['rc']}, {c['secs']} s of {c['limit']}): "
              f"{c.get('last_error', '')[:200]}  \n  `{c['argv'][:300]}`")
    # every figure
    w("\n## Every measured record\n\n| part/command | what | figure |\n|---|---|---|")
    for r in recs:
        # the sweep's candidates, the tests and bench shaders' pipelines have their sections above
        if r.get("gr") != "result" or r.get("bench") in ("tune-candidate", "test", "shaders"):
            continue
        b = r.get("engine", r.get("bench", r.get("command", "?")))
        if b == "matmul":
            what, fig = f"{r.get('dtype')} {r.get('m')}×{r.get('n')}×{r.get('k')} {r.get('kernel')}", \
                f"{fmt(r.get('gflops'), 'GFLOP/s')}, {fmt(r.get('ms'), 'ms')}, err {r.get('max_rel_err')}"
        elif b in ("matmul_fp32", "matmul_fp16"):
            what, fig = f"torch {b} {r.get('m')}³ on {r.get('device_name')}" + (" TF32" if r.get("tf32") else ""), \
                r.get("skipped") or f"{fmt(r.get('tflops'), 'TFLOP/s')}, {fmt(r.get('ms'), 'ms')}"
        elif b == "attention" and "variant" in r:
            what, fig = f"{r.get('variant')} {r.get('precision')} {r.get('kernel')} n {r.get('n')}, " \
                f"{r.get('batch')}×{r.get('heads')}×{r.get('head_dim')}", \
                f"{fmt(r.get('ms'), 'ms')}, max abs err {r.get('max_abs_err')}" + (f" ({r['skipped']})" if r.get("skipped") else "")
        elif b == "attention":
            what, fig = f"torch {r.get('impl', '').split(':')[0]} {r.get('dtype')} n {r.get('n')}, " \
                f"{r.get('batch')}×{r.get('heads')}×{r.get('head_dim')}", f"{fmt(r.get('ms'), 'ms')}"
        elif b == "model":
            what, fig = f"{r.get('preset')} b{r.get('batch')} {r.get('src_len')}/{r.get('tgt_len')}", \
                f"forward {fmt(r.get('forward_ms'), 'ms')}, encode {fmt(r.get('encode_ms'), 'ms')}, " \
                f"step {fmt(r.get('step_ms'), 'ms')}"
        elif b == "transformer":
            what, fig = f"torch nn.Transformer {r.get('dtype')} b{r.get('batch')} {r.get('src_len')}/{r.get('tgt_len')}", \
                fmt(r.get("ms"), "ms")
        elif b in ("vkformer", "transformers"):
            what, fig = f"{b} {r.get('dtype', r.get('activations', ''))} batch {r.get('batch')} beam {r.get('beams')} " \
                f"on {r.get('device')}", f"{fmt(r.get('target_tokens_per_s'), 'target tok/s')}, {fmt(r.get('median_ms'), 'ms')}"
        elif b in ("tune", "tune-winners"):
            what, fig = "tune winners", f"matmul {(r.get('matmul') or {}).get('kernel', '—')}, F16 matmuls " \
                f"{(r.get('matmul_coopmat') or {}).get('kernel', '—')}"
        elif b == "info":
            what, fig = "info", f"tuning: {r.get('tuning', {}).get('source')}"
        else:
            what, fig = b, ""
        w(f"| {r['part']}/{r['cmd']} | {what} | {fig} |")
    return o.getvalue()

def cmd_summary(outdir, *more):
    dirs = [outdir] + list(more)
    recs = load(os.path.join(d, "results.jsonl") for d in dirs)
    suite = None
    for d in dirs:
        try:
            suite = json.load(open(os.path.join(d, "suite.json")))
        except (OSError, ValueError):
            pass
    text = summary(recs, suite, f"Merged from {len(dirs)} folders." if more else "")
    open(os.path.join(outdir, "summary.md"), "w").write(text)
    print_targets(text)

def print_targets(text):
    show = False
    for line in text.splitlines():
        if line.startswith("## Targets"):
            show = True
        elif line.startswith("## ") and show:
            break
        if show and line.startswith("|"):
            print(line)

# ------------------------------------------------------------------ pack

def cmd_pack(work, outdir, elapsed, final="0"):
    """OUTDIR from WORK: at most MAX_FILES files (anything else into extra.tar.gz)."""
    def put(name, data):
        tmp = os.path.join(outdir, "." + name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(outdir, name))
    append(work, [{"gr": "report", "elapsed_s": int(elapsed), "finished": final == "1"}])
    recs = load([os.path.join(work, "records.jsonl")])
    put("results.jsonl", open(os.path.join(work, "records.jsonl"), "rb").read())
    suite = None
    sj = os.path.join(work, "suite", "suite.json")
    if os.path.exists(sj):
        put("suite.json", open(sj, "rb").read())
        suite = json.load(open(sj))
    tf = os.path.join(work, "tunefile.json")
    if os.path.exists(tf):
        put("tunefile.json", open(tf, "rb").read())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for dp, dns, fns in os.walk(work):
            dns[:] = sorted(d for d in dns if os.path.join(dp, d) not in (os.path.join(work, "cache"), os.path.join(work, "models"), os.path.join(work, "root")))
            for fn in sorted(fns):
                p = os.path.join(dp, fn)
                if fn == "report.py" or os.path.islink(p) or not os.path.isfile(p):
                    continue
                data = open(p, "rb").read()
                if len(data) > 2 << 20:   # a runaway log: its head and tail
                    data = data[:512 << 10] + b"\n[... %d bytes left out by gpu_report ...]\n" % (len(data) - (1536 << 10)) + data[-(1 << 20):]
                ti = tarfile.TarInfo("gpu-report/" + os.path.relpath(p, work))
                ti.size, ti.mtime = len(data), int(time.time())
                tar.addfile(ti, io.BytesIO(data))
    put("logs.tar.gz", buf.getvalue())
    # the limit: anything else under OUTDIR goes into extra.tar.gz
    def files():
        return sorted(os.path.relpath(os.path.join(dp, f), outdir) for dp, _, fs in os.walk(outdir) for f in fs)
    others = [f for f in files() if f not in OUT_FILES + ("extra.tar.gz", "summary.md")]
    if others:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            ex = os.path.join(outdir, "extra.tar.gz")
            if os.path.exists(ex):
                with tarfile.open(ex) as old:
                    for m in old.getmembers():
                        if m.isfile() and m.name not in others:
                            tar.addfile(m, old.extractfile(m))
            for f in others:
                tar.add(os.path.join(outdir, f), arcname=f)
        put("extra.tar.gz", buf.getvalue())
        for f in others:
            os.remove(os.path.join(outdir, f))
        for dp, dns, _ in sorted(os.walk(outdir), reverse=True):
            if dp != outdir and not os.listdir(dp):
                os.rmdir(dp)
    n = len(files()) + 1 - os.path.exists(os.path.join(outdir, "summary.md"))
    note = f"OUTDIR holds {n} files (limit {MAX_FILES})" + (f"; {len(others)} others packed into extra.tar.gz" if others else "") + "."
    if n > MAX_FILES:
        note += " **Over the limit: some will not come back.**"
    put("summary.md", summary(recs, suite, note).encode())
    print(f"gpu_report: packed {outdir}: {n} files, at {elapsed} s", file=sys.stderr)

if __name__ == "__main__":
    cmds = {"tag": cmd_tag, "event": cmd_event, "suite": cmd_suite, "pack": cmd_pack, "summary": cmd_summary,
            "candidates": cmd_candidates, "sizes": cmd_sizes}
    cmds[sys.argv[1]](*sys.argv[2:])
PY
}

# ------------------------------------------------------------------ main

args=()
for a in "$@"; do
    case $a in
        --fetch) fetch; exit $? ;;
        --prepare) prepare; exit $? ;;
        --plan) print_plan; exit 0 ;;
        --summary) mode=summary ;;
        --small) small=1 ;;
        -h|--help) usage ;;
        -*) echo "gpu_report: unknown option $a" >&2; exit 2 ;;
        *) args+=("$a") ;;
    esac
done
[ ${#args[@]} -ge 1 ] || usage
if [ "${mode:-}" = summary ]; then
    t=$(mktemp "${TMPDIR:-/tmp}/gpu-report-helper.XXXXXX") || exit 1
    write_helper "$t"
    python3 "$t" summary "${args[@]}"
    rc=$?
    rm -f "$t"
    exit $rc
fi
OUTDIR=${args[0]}
parts=()
for a in "${args[@]:1}"; do
    for p in ${a//,/ }; do
        if [ "$p" = all ]; then parts+=("${PLAN_PARTS[@]}")
        elif [[ " ${PLAN_PARTS[*]} " == *" $p "* ]]; then parts+=("$p")
        else echo "gpu_report: unknown part \"$p\" (known: ${PLAN_PARTS[*]} all)" >&2; exit 2
        fi
    done
done
[ ${#parts[@]} -ge 1 ] || parts=("${PLAN_PARTS[@]}")
SECONDS=0 PACK_MS=0
DEADLINE=${GPU_REPORT_DEADLINE:-$PLAN_DEADLINE}
set_sizes
VK=$build/vkformer
mkdir -p "$OUTDIR" || exit 1
OUTDIR=$(cd "$OUTDIR" && pwd)
WORK=${GPU_REPORT_WORK:-$(mktemp -d /tmp/gpu-report.XXXXXX)} || exit 1
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
case $WORK/ in "$OUTDIR"/*) echo "gpu_report: GPU_REPORT_WORK must not be inside OUTDIR" >&2; exit 2 ;; esac
GL=${GPU_REPORT_GL:-$root/.gl} GLROOT=${GPU_REPORT_GL:-$root/.gl}/root
write_helper "$WORK/report.py"
export VKFORMER_CACHE_DIR=${VKFORMER_CACHE_DIR:-$WORK/cache}
mkdir -p "$VKFORMER_CACHE_DIR" "$WORK/models"
unset VKFORMER_VALIDATE   # on only where a part says so (info's check; the suite's tests set it)
ICD=""
TORCH_PY=$(find_torch_python) || TORCH_PY=""
# the first import of torch and transformers on a fresh machine reads gigabytes: warm the
# page cache now, beside info and the suite (16 cores), not inside a timed part's limit
[ -n "$TORCH_PY" ] && [ "$small" != 1 ] && (nice "$TORCH_PY" -c 'import torch, transformers' >/dev/null 2>&1 &)
setup
[ -x "$VK" ] || echo "gpu_report: $VK is missing: build it (ninja -C build) and carry the build folder" >&2
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || cat "$root/.gl/commit" 2>/dev/null || echo unknown)
plan_json=$(for i in "${!PLAN_PARTS[@]}"; do printf '"%s": %s, ' "${PLAN_PARTS[$i]}" "${PLAN_SECS[$i]}"; done)
parts_json=$(printf '"%s", ' "${parts[@]}")
py event "$WORK" gr=report small="$([ "$small" = 1 ] && echo true || echo false)" deadline_s="$DEADLINE" \
    plan_total_s="$PLAN_DEADLINE" timeout_s="$TIMEOUT_S" plan="{${plan_json%, }}" parts="[${parts_json%, }]" \
    commit="\"$commit\"" date="\"$(date -u +%FT%TZ)\"" build="\"$build\"" icd="\"${ICD:-}\"" \
    torch_python="\"${TORCH_PY:-}\"" setup_s="$SECONDS" mm="$MM"
echo "gpu_report: deadline ${DEADLINE}s, parts ${parts[*]}, work $WORK, out $OUTDIR (set-up took ${SECONDS}s)" >&2
for p in "${parts[@]}"; do
    run_part "$p"
done
pack 1
# the logs are in OUTDIR/logs.tar.gz; a folder this script made (the model folders, the
# caches: ~300 MB with the OPUS shapes) goes, one named by GPU_REPORT_WORK stays
[ -z "${GPU_REPORT_WORK:-}" ] && rm -rf "$WORK"
echo "gpu_report: done in ${SECONDS}s of ${DEADLINE}s; $OUTDIR:" >&2
ls -l "$OUTDIR" >&2
python3 - "$OUTDIR/summary.md" <<'EOF'
import sys
show = False
for line in open(sys.argv[1]):
    if line.startswith("## Targets"):
        show = True
    elif line.startswith("## ") and show:
        break
    if show and line.startswith("|"):
        print(line.rstrip())
EOF
exit 0
