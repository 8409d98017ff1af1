#!/usr/bin/env bash
# Fetches OpenAI's official JavaScript client library (the npm package `openai`,
# a 4.x release, which runs on Debian 12's Node 18) once into the cache, for
# vkformer serve's tests (tests/test_serve.py talks to the server through it).
# Prints the folder whose node_modules holds it.
#   tools/fetch_openai_js.sh           fetch (npm install) unless already there
#   tools/fetch_openai_js.sh --check   print the folder if it is there, else exit 1
set -euo pipefail

version=4.104.0
cache=${VKFORMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}
dest=$cache/openai-js-$version

if [ -f "$dest/node_modules/openai/package.json" ]; then
    echo "$dest"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "fetch_openai_js: openai@$version is not in $dest (tools/setup.sh --swiftshader fetches it)" >&2
    exit 1
fi
for tool in npm node; do
    command -v "$tool" >/dev/null 2>&1 || { echo "fetch_openai_js: $tool is missing (tools/setup.sh --swiftshader installs npm)" >&2; exit 1; }
done
work=$(mktemp -d "$cache/openai-js.XXXXXX" 2>/dev/null || { mkdir -p "$cache" && mktemp -d "$cache/openai-js.XXXXXX"; })
trap 'rm -rf "$work"' EXIT
echo "fetch_openai_js: npm install openai@$version" >&2
npm install --silent --no-audit --no-fund --prefix "$work" "openai@$version" >/dev/null
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "$dest"
