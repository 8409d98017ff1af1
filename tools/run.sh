#!/usr/bin/env bash
# The quick start's main job: set up and build (tools/setup.sh), then translate
# English number words into digits with the demo model (models/demo.safetensors,
# trained by tools/train_demo.py) on the default Vulkan device: the encoder-decoder
# pass and greedy decoding run on the GPU. Arguments (e.g. --device 1, or your own
# text as "four hundred two") go to vkformer.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${VKFORMER_BUILD_DIR:-$root/build}
"$root/tools/setup.sh"
vkformer=$build_dir/vkformer
model=$root/models/demo.safetensors

texts=()
options=()
while [ $# -gt 0 ]; do
    case $1 in
        --device) options+=("$1" "$2"); shift 2 ;;
        --*) options+=("$1"); shift ;;
        *) texts+=("$1"); shift ;;
    esac
done
if [ ${#texts[@]} -eq 0 ]; then
    texts=("three hundred forty two thousand seven hundred five" "nineteen" "nine hundred ninety nine thousand nine hundred ninety nine" "twelve thousand")
fi
device=$("$vkformer" info --json "${options[@]}" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["devices"][d["default"]]["name"])')
echo "vkformer translate on $device:"
for text in "${texts[@]}"; do
    printf '  %s -> %s\n' "$text" "$("$vkformer" translate --model "$model" "${options[@]}" "$text")"
done
