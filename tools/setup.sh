#!/usr/bin/env bash
# Sets vkformer up on Debian 12 and builds it; safe to run again (each step is
# skipped when already done). Run as root, or as a user with sudo.
#
#   tools/setup.sh                 Debian packages + build the tool (build/vkformer)
#   tools/setup.sh --swiftshader   also SwiftShader and PyTorch, and build the tests
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
# lavapipe (Mesa's CPU Vulkan driver), vulkaninfo, and jansson (model-file headers).
packages=(gcc libc6-dev pkg-config meson ninja-build glslc libvulkan-dev libvulkan-volk-dev libvulkan1
          vulkan-validationlayers mesa-vulkan-drivers vulkan-tools libjansson-dev python3)
if [ "$with_swiftshader" = 1 ]; then
    # The tests compare whole models with PyTorch (Debian's, run by /usr/bin/python3),
    # and draw bench attention's plot with gnuplot.
    packages+=(brotli ca-certificates python3-torch python3-numpy gnuplot-nox)
    command -v npm >/dev/null 2>&1 || packages+=(npm)
fi

"$root/tools/install_packages.sh" setup "${packages[@]}"

meson_args=()
if [ "$with_swiftshader" = 1 ]; then
    icd=$("$root/tools/fetch_swiftshader.sh")
    meson_args+=("-Dswiftshader_icd=$icd")
fi

if [ ! -f "$build_dir/build.ninja" ]; then
    meson setup "$build_dir" "$root" "${meson_args[@]}" >&2
elif [ ${#meson_args[@]} -gt 0 ]; then
    meson configure "$build_dir" "${meson_args[@]}" >&2
fi
# The main job needs only the tool; the tests (--swiftshader) build everything,
# including the test models that PyTorch writes.
if [ "$with_swiftshader" = 1 ]; then
    ninja -C "$build_dir" >&2
else
    ninja -C "$build_dir" vkformer >&2
fi
