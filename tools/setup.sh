#!/usr/bin/env bash
# Sets vkformer up on Debian 12 and builds it; safe to run again (each step is
# skipped when already done). Run as root, or as a user with sudo.
#
#   tools/setup.sh                 Debian packages + build the tool (build/vkformer)
#   tools/setup.sh --swiftshader   also SwiftShader, PyTorch and Debian unstable's Mesa
#                                  lavapipe (cooperative matrix) and RADV/NVK with drm-shim
#                                  (virtual GPUs, tools/vgpu.sh), and build the tests
#
# Where the system's glslc cannot compile cooperative-matrix shaders (Debian 12's
# glslang 12), Debian trixie's glslc is fetched into the cache by
# tools/fetch_newer.sh and meson builds those kernels with it; a newer system
# (Debian 13, Ubuntu 24.04) uses its own. If a fetch fails, one loud line says so
# and the build goes on without what it would have brought.
#
# Environment: VKFORMER_BUILD_DIR (default: build), VKFORMER_CACHE (where
# SwiftShader is unpacked; default ~/.cache/vkformer).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${VKFORMER_BUILD_DIR:-$root/build}
with_swiftshader=0
for arg in "$@"; do
    case $arg in
        --swiftshader) with_swiftshader=1 ;;
        *) echo "setup.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

# Debian 12 packages: compiler and build tools, the Vulkan headers, volk (Vulkan is
# loaded at run time), glslc (GLSL -> SPIR-V at build time), the validation layer,
# lavapipe (Mesa's CPU Vulkan driver), vulkaninfo, jansson (model-file headers),
# SentencePiece (the tokenizers of Marian models; g++ for its C++ shim), and Oniguruma and
# utf8proc (regexes and Unicode of Hugging Face tokenizer.json files), libsndfile and libsoxr
# (audio files in and resampled, for Whisper; libmp3lame-dev because libsndfile's
# `pkg-config --static` names -lmp3lame, which a static link of libvkformer needs), and
# espeak-ng (tools/run.sh speaks a number for the Whisper demo to transcribe), and
# libmicrohttpd (vkformer serve's HTTP server).
packages=(gcc g++ libc6-dev pkg-config meson ninja-build glslc libvulkan-dev libvulkan-volk-dev libvulkan1
          vulkan-validationlayers mesa-vulkan-drivers vulkan-tools libjansson-dev libsentencepiece-dev libonig-dev
          libutf8proc-dev libsndfile1-dev libsoxr-dev libmp3lame-dev python3 espeak-ng
          libmicrohttpd-dev)
if [ "$with_swiftshader" = 1 ]; then
    # The tests compare whole models with PyTorch (Debian's, run by /usr/bin/python3),
    # the SentencePiece shim with Python's sentencepiece, and draw bench attention's
    # plot with gnuplot; Whisper's tests write sound files with python3-soundfile and speech with espeak-ng.
    # python/vkformer_dask.py is tested on a Dask LocalCluster (dask, distributed; pandas for its dataframes).
    packages+=(brotli ca-certificates python3-torch python3-numpy python3-sentencepiece gnuplot-nox python3-soundfile espeak-ng)
    packages+=(python3-dask python3-distributed python3-pandas)
    # The Python package is tested as users install it: pip install ./python into a venv.
    packages+=(python3-venv)
    # vkformer serve's tests talk to it through curl and Python requests (issue 37).
    packages+=(curl python3-requests)
    command -v npm >/dev/null 2>&1 || packages+=(npm)
fi

"$root/tools/install_packages.sh" setup "${packages[@]}"

meson_args=()
if [ "$with_swiftshader" = 1 ]; then
    icd=$("$root/tools/fetch_swiftshader.sh")
    meson_args+=("-Dswiftshader_icd=$icd")
    # The third test driver: lavapipe from Debian unstable, which offers
    # VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2.
    if unstable=$("$root/tools/fetch_newer.sh" lavapipe); then
        meson_args+=("-Dlavapipe_unstable=$unstable")
    else
        echo "setup: WARNING: could not fetch Mesa lavapipe from Debian unstable; its tests will be reported as skipped" >&2
        meson_args+=("-Dlavapipe_unstable=")
    fi
    # OpenAI's JavaScript client, which vkformer serve's tests talk through (issue 37).
    "$root/tools/fetch_openai_js.sh" >/dev/null ||
        echo "setup: WARNING: could not fetch the npm package openai; the serve-openai tests will be reported as skipped" >&2
    # Virtual AMD and NVIDIA GPUs (tools/vgpu.sh): Debian unstable's RADV and NVK over
    # Mesa's no-op drm-shim; their compilers build every pipeline (the vgpu suite).
    if drm_shim=$("$root/tools/fetch_newer.sh" drm-shim); then
        meson_args+=("-Ddrm_shim=$drm_shim")
    else
        echo "setup: WARNING: could not fetch Mesa drm-shim from Debian unstable; the vgpu test will be reported as skipped" >&2
        meson_args+=("-Ddrm_shim=")
    fi
fi
probe=$root/shaders/probe_coopmat.comp
if ! glslc --target-env=vulkan1.2 -c "$probe" -o /dev/null 2>/dev/null; then
    if compiler=$("$root/tools/fetch_newer.sh" compiler); then
        meson_args+=("-Dcoopmat_glslc=$compiler/bin/glslc")
    else
        echo "setup: WARNING: the system glslc cannot compile cooperative-matrix shaders and a newer one could not be fetched; building without them" >&2
    fi
fi

if [ ! -f "$build_dir/build.ninja" ]; then
    meson setup "$build_dir" "$root" "${meson_args[@]}" >&2
elif [ ${#meson_args[@]} -gt 0 ]; then
    # Reconfigure only when an option changes (meson configure always regenerates).
    current=$(meson introspect --buildoptions "$build_dir" 2>/dev/null |
              python3 -c 'import json,sys; print(" ".join("-D%s=%s" % (o["name"], o["value"]) for o in json.load(sys.stdin) if o["section"] == "user"))' || true)
    for arg in "${meson_args[@]}"; do
        case " $current " in
            *" $arg "*) ;;
            *) meson configure "$build_dir" "${meson_args[@]}" >&2; break ;;
        esac
    done
fi
# The main job needs only the tool; the tests (--swiftshader) build everything,
# including the test models that PyTorch writes.
if [ "$with_swiftshader" = 1 ]; then
    ninja -C "$build_dir" >&2
else
    ninja -C "$build_dir" vkformer >&2
fi
