#!/usr/bin/env bash
# The quick start's main job: set up and build (tools/setup.sh), then on the
# default Vulkan device (or --device / VKFORMER_DEVICE): list the devices, check
# every GPU op against the C reference, and benchmark fp32 matmul.
# Extra arguments (e.g. --device 1) are passed to every vkformer command.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${VKFORMER_BUILD_DIR:-$root/build}
"$root/tools/setup.sh"
vkformer=$build_dir/vkformer
"$vkformer" info "$@"
echo
"$vkformer" check "$@"
echo
"$vkformer" bench matmul --size 256,512,1024 --repeat 5 "$@"
