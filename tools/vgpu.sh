#!/usr/bin/env bash
# Runs a program on a virtual GPU: Mesa's RADV (AMD) or NVK (NVIDIA) driver over
# Mesa's no-op drm-shim, from Debian unstable (tools/fetch_newer.sh drm-shim, fetched
# on first use). The driver's real compiler (ACO, NAK) builds every pipeline for that
# GPU and reports its statistics; command buffers are accepted and never executed, so
# results are meaningless. VKFORMER_COMPILE_ONLY=1 tells vkformer so: commands that
# would check a result say "compile-only device: result not checked" instead.
#
#   tools/vgpu.sh GPU PROGRAM [ARGS...]
#     GPU: navi31   AMD RDNA3 (RX 7900 XTX)        gfx1201  AMD RDNA4 (RX 9070 XT)
#          strix1   AMD RDNA3.5 (Strix Point APU)  ampere   NVIDIA GA102 (NOUVEAU_CHIPSET 0x172)
#          ada      NVIDIA AD102 (0x192)
#   tools/vgpu.sh --list      the GPU names, one a line
#
# e.g.  tools/vgpu.sh navi31 build/vkformer info
#       tools/vgpu.sh ada build/vkformer bench shaders --preset nllb
# The Vulkan validation layer of the same Debian suite is on VK_LAYER_PATH (the
# program turns it on as usual, VKFORMER_VALIDATE=1). Environment: VKFORMER_DRM_SHIM
# (the folder, else tools/fetch_newer.sh drm-shim fetches it), VKFORMER_CACHE (see
# tools/fetch_newer.sh). Exit 2 on a wrong GPU name, 1 when the drivers cannot be
# fetched, else the program's status.
set -euo pipefail

gpus="navi31 gfx1201 strix1 ampere ada"
usage() { echo "usage: vgpu.sh GPU PROGRAM [ARGS...]   (GPU: ${gpus// /|})" >&2; exit 2; }
[ $# -ge 1 ] || usage
if [ "$1" = --list ]; then
    tr ' ' '\n' <<<"$gpus"
    exit 0
fi
[ $# -ge 2 ] || usage
gpu=$1
shift
case $gpu in
    navi31|gfx1201|strix1) driver=radeon shim=amdgpu ;;
    ampere) driver=nouveau shim=nouveau chipset=0x172 ;;
    ada) driver=nouveau shim=nouveau chipset=0x192 ;;
    *) echo "vgpu: unknown GPU \"$gpu\" (one of: $gpus)" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# VKFORMER_DRM_SHIM names the folder (the tests pass meson's), else it is fetched once.
if [ -n "${VKFORMER_DRM_SHIM:-}" ]; then
    folder=$VKFORMER_DRM_SHIM
    [ -f "$folder/radeon_icd.json" ] || { echo "vgpu: $folder is not a tools/fetch_newer.sh drm-shim folder" >&2; exit 1; }
else
    folder=$("$root/tools/fetch_newer.sh" drm-shim) || { echo "vgpu: Mesa's drm-shim drivers could not be fetched" >&2; exit 1; }
fi
lib=$folder/usr/lib/x86_64-linux-gnu
ldso=$lib/ld-linux-x86-64.so.2
[ -x "$ldso" ] || ldso=$folder/lib64/ld-linux-x86-64.so.2

# Only this driver: no other ICD (the system's lavapipe, SwiftShader) is listed.
export VK_ICD_FILENAMES=$folder/${driver}_icd.json VK_DRIVER_FILES=$folder/${driver}_icd.json
export VK_LAYER_PATH=$folder/usr/share/vulkan/explicit_layer.d
export VKFORMER_COMPILE_ONLY=1 VKFORMER_VGPU=$gpu
if [ "$driver" = radeon ]; then
    export AMDGPU_GPU_ID=$gpu
else
    export NOUVEAU_CHIPSET=$chipset
fi
# The shim fakes /dev/dri and its sysfs entries; its "not implemented" notes are
# noise here unless asked for.
export DRM_SHIM_DEBUG=${DRM_SHIM_DEBUG:-0}

# The program must be an ELF binary: the folder's loader starts it with the shim
# preloaded, and a script's interpreter would be what it started instead.
program=$1
shift
if ! head -c 4 "$program" 2>/dev/null | grep -q 'ELF'; then
    command -v "$program" >/dev/null 2>&1 && program=$(command -v "$program")
    head -c 4 "$program" 2>/dev/null | grep -q 'ELF' ||
        { echo "vgpu: $program is not an ELF program (name the binary, e.g. build/vkformer)" >&2; exit 2; }
fi
exec "$ldso" --library-path "$lib:$folder/lib/x86_64-linux-gnu" --preload "$lib/lib${shim}_noop_drm_shim.so" \
    "$program" "$@"
