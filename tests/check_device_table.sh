#!/bin/sh
# Every device-level Vulkan function the sources call through a context's table
# (ctx->vk.vkX, vk->vkX) is one that src/runtime/device.c's VKF_DEVICE_FUNCTIONS
# loads: the table is filled by hand (not volkLoadDeviceTable), and an entry it
# leaves NULL would crash at its first call.
# Usage: check_device_table.sh SOURCE_ROOT
set -eu
root=${1:?usage: check_device_table.sh SOURCE_ROOT}
used=$(grep -rhoE '(\.|->)vk(\.|->)?vk[A-Z][A-Za-z0-9]*' "$root/src" | sed 's/.*\(vk[A-Z][A-Za-z0-9]*\)$/\1/' | sort -u)
loaded=$(sed -n '/^#define VKF_DEVICE_FUNCTIONS/,/^$/p' "$root/src/runtime/device.c" | grep -oE 'X\(vk[A-Za-z0-9]+\)' |
    sed 's/X(\(.*\))/\1/' | sort -u)
[ -n "$used" ] || { echo "check_device_table: found no calls through the table in $root/src" >&2; exit 1; }
[ -n "$loaded" ] || { echo "check_device_table: found no VKF_DEVICE_FUNCTIONS list in $root/src/runtime/device.c" >&2; exit 1; }
missing=$(printf '%s\n' "$used" | grep -vxF "$loaded" || true)
if [ -n "$missing" ]; then
    echo "check_device_table: called through the device table but not loaded by VKF_DEVICE_FUNCTIONS:" $missing >&2
    exit 1
fi
echo "check_device_table: $(printf '%s\n' "$used" | wc -l) functions called, all loaded"
