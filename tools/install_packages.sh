#!/usr/bin/env bash
# Installs the Debian packages named as arguments that are not installed yet (as
# root, or through sudo); does nothing when all are there. Used by setup.sh,
# sanitize.sh and fuzz.sh. The first argument is the caller's name, for messages.
set -euo pipefail
who=$1
shift
wanted=("$@")
# The test set-ups (those that want numpy) also get OpenBLAS, so that numpy's
# matmul is OpenBLAS sgemm, the CPU baseline of tools/bench_blas.py (Debian's
# default libblas3 is the slow reference BLAS).
for p in "$@"; do
    [ "$p" = python3-numpy ] && wanted+=(libopenblas0-pthread)
done
missing=()
for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo=sudo
    else
        echo "$who: missing Debian packages: ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi
echo "$who: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >&2
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
