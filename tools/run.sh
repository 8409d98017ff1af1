#!/usr/bin/env bash
# The quick start's main job: set up and build (tools/setup.sh), then translate
# English number words into digits with the demo model (models/demo.safetensors,
# trained by tools/train_demo.py) on the default Vulkan device: the encoder-decoder
# pass and greedy decoding run on the GPU. Arguments (e.g. --device 1, or your own
# text as "four hundred two") go to vkformer. Then the Whisper demo: espeak-ng says a
# number and a tiny Whisper model (models/whisper-numbers, trained by
# tools/train_whisper_demo.py) transcribes the sound file.
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

# The Whisper demo: espeak-ng says a number from 0 to 99 (VKFORMER_SPOKEN_NUMBER, in words;
# "forty six" was held out of training, and espeak-ng's default speed, 175 words a minute, is not
# one it was trained at) into a 22,050 Hz WAV, which vkformer reads, resamples to 16 kHz and
# transcribes with models/whisper-numbers (docs/audio.md, "Demo").
whisper=$root/models/whisper-numbers
spoken=${VKFORMER_SPOKEN_NUMBER:-"forty six"}
wav=$(mktemp --suffix=.wav)
trap 'rm -f "$wav"' EXIT
espeak-ng -w "$wav" "$spoken"
echo "vkformer transcribe on $device (speech by espeak-ng):"
printf '  "%s" -> %s\n' "$spoken" "$("$vkformer" transcribe --model "$whisper" "${options[@]}" "$wav")"
