#!/usr/bin/env bash
# Fetches SwiftShader's Vulkan driver once and prints the path of its ICD json.
# It comes from the npm registry's @sparticuz/chromium package, whose
# bin/swiftshader.tar.br (brotli) holds libvk_swiftshader.so and
# vk_swiftshader_icd.json. Only those two files are kept: tests use the system
# Vulkan loader with VK_ICD_FILENAMES pointing at the json, never the
# libvulkan.so.1 that the tarball also carries. Needs npm, brotli and tar.
set -euo pipefail

version=153.0.0
cache=${VKFORMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}
dest=$cache/swiftshader-$version
icd=$dest/vk_swiftshader_icd.json

if [ -f "$icd" ] && [ -f "$dest/libvk_swiftshader.so" ]; then
    echo "$icd"
    exit 0
fi
for tool in npm brotli tar; do
    command -v "$tool" >/dev/null 2>&1 || { echo "fetch_swiftshader: $tool is missing (tools/setup.sh --swiftshader installs it)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch_swiftshader: npm pack @sparticuz/chromium@$version" >&2
(cd "$work" && npm pack --silent "@sparticuz/chromium@$version" >/dev/null)
tarball=$(ls "$work"/sparticuz-chromium-*.tgz)
tar -xzf "$tarball" -C "$work" package/bin/swiftshader.tar.br
mkdir -p "$work/out"
brotli -d -c "$work/package/bin/swiftshader.tar.br" | tar -x -C "$work/out" libvk_swiftshader.so vk_swiftshader_icd.json
mkdir -p "$dest"
# The json names the library relative to itself; keep both side by side.
mv "$work/out/libvk_swiftshader.so" "$work/out/vk_swiftshader_icd.json" "$dest/"
echo "$icd"
