#!/usr/bin/env bash
# Fetches tools that Debian 12 has only in older versions from a newer Debian suite,
# once, into ~/.cache/vkformer, and prints the folder. The system's apt sources and
# installed packages are never touched: a private apt state names the suite,
# `apt-get download` fetches the packages and their dependency closure by name (no
# version is pinned: unstable keeps none but the newest), and `dpkg-deb -x` unpacks
# them into one folder. Programs there need that suite's glibc, so they run through
# the folder's own ld-linux-x86-64.so.2 with its libraries first: the folder's `run`
# script does that (`FOLDER/run PROGRAM ARGS...`).
#
#   tools/fetch_newer.sh compiler   trixie's glslc, glslang and spirv-tools: they compile
#                                   GL_KHR_cooperative_matrix / GL_NV_cooperative_matrix2
#                                   (FOLDER/bin/glslc is a wrapper usable as a compiler)
#   tools/fetch_newer.sh lavapipe   unstable's Mesa lavapipe (VK_KHR_cooperative_matrix,
#                                   VK_NV_cooperative_matrix2), its Vulkan loader and the
#                                   validation layer of the same suite (FOLDER/icd.json;
#                                   FOLDER/run sets VK_LAYER_PATH to that layer)
#   tools/fetch_newer.sh drm-shim   unstable's Mesa Vulkan drivers with mesa-drm-shim: RADV and NVK
#                                   run on virtual AMD and NVIDIA GPUs whose compilers (ACO, NAK)
#                                   build real pipelines while submissions do nothing
#                                   (FOLDER/radeon_icd.json, FOLDER/nouveau_icd.json, and the
#                                   shims FOLDER/usr/lib/x86_64-linux-gnu/lib*_noop_drm_shim.so;
#                                   tools/vgpu.sh runs a program on one of them)
#   tools/fetch_newer.sh lavapipe-bpo  bookworm-backports' Mesa lavapipe (25.0): one package,
#                                   built for Debian 12's libraries (LLVM 15 included), so it
#                                   runs with the system's loader and layer: FOLDER/icd.json
#                                   only (tools/bench_software.py's 25.0 column)
#
# Environment: VKFORMER_CACHE (default ~/.cache/vkformer). Exit 1 with one line on
# stderr when the archive cannot be reached or a package is missing.
set -euo pipefail

what=${1:-}
case $what in
    compiler) suite=trixie; packages=(glslc glslang-tools spirv-tools) ;;
    lavapipe) suite=unstable; packages=(mesa-vulkan-drivers libvulkan1 vulkan-validationlayers) ;;
    lavapipe-bpo) suite=bookworm-backports; packages=(mesa-vulkan-drivers) ;;
    # One folder of its own, so the shims and the drivers come from one Mesa release.
    drm-shim) suite=unstable; packages=(mesa-drm-shim mesa-vulkan-drivers libvulkan1 vulkan-validationlayers) ;;
    *) echo "usage: fetch_newer.sh compiler|lavapipe|lavapipe-bpo|drm-shim" >&2; exit 2 ;;
esac
cache=${VKFORMER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vkformer}
dest=$cache/$what-$suite
[ "$what" = lavapipe-bpo ] && dest=$cache/lavapipe-bpo
if [ -f "$dest/.complete" ] && { [ -x "$dest/run" ] || [ "$what" = lavapipe-bpo ]; }; then
    echo "$dest"
    exit 0
fi
die() { echo "fetch_newer: $*" >&2; exit 1; }
for tool in apt-get apt-cache dpkg-deb python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing"
done

# The archive the system already uses (deb822 or one-line sources).
mirror=$(sed -n 's#^URIs: *\(\S*/debian\)/\?$#\1#p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n 's#^deb \(\[[^]]*\] \)\?\(\S*/debian\)/\? .*#\2#p' /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$mirror" ] || die "no Debian archive found in the system's apt sources"

state=$cache/apt-$suite
mkdir -p "$state/lists/partial" "$state/archives/partial" "$state/parts" "$state/prefs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" >"$state/sources.list"
apt_opts=(-o Dir::State="$state" -o Dir::State::Lists="$state/lists" -o Dir::State::status=/dev/null
          -o Dir::Cache="$state" -o Dir::Cache::archives="$state/archives"
          -o Dir::Etc::SourceList="$state/sources.list" -o Dir::Etc::SourceParts="$state/parts"
          -o Dir::Etc::Preferences="$state/prefs/none" -o Dir::Etc::PreferencesParts="$state/prefs"
          -o APT::Architecture=amd64 -o APT::Architectures=amd64 -o APT::Sandbox::User=root
          -o Acquire::Retries=3)
# lavapipe's ICD manifest (TMP/icd.json), pointed at the driver unpacked into TMP by
# its final absolute path under DEST; the validation layer's manifest likewise, where
# the unpacked packages hold one (unstable's), and no other layer.
lavapipe_manifests() {
    [ -f "$1/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" ] || die "Debian $suite's mesa-vulkan-drivers has no lavapipe"
    python3 - "$1" "$2" <<'PY'
import glob, json, os, sys
tmp, dest = sys.argv[1], sys.argv[2]
icds = glob.glob(tmp + "/usr/share/vulkan/icd.d/lvp_icd*.json")
if not icds:
    sys.exit("fetch_newer: no lavapipe ICD manifest")
j = json.load(open(icds[0]))
j["ICD"]["library_path"] = dest + "/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so"
json.dump(j, open(tmp + "/icd.json", "w"), indent=1)
for p in glob.glob(tmp + "/usr/share/vulkan/explicit_layer.d/*.json"):
    if "khronos_validation" not in p:
        os.remove(p)
        continue
    j = json.load(open(p))
    j["layer"]["library_path"] = dest + "/usr/lib/x86_64-linux-gnu/" + os.path.basename(j["layer"]["library_path"])
    json.dump(j, open(p, "w"), indent=1)
PY
}

echo "fetch_newer: reading Debian $suite's package lists" >&2
apt-get "${apt_opts[@]}" -qq update >&2 || die "could not read Debian $suite's package lists from $mirror"

if [ "$what" = lavapipe-bpo ]; then
    # A backport is built against Debian 12's libraries: its one package is enough,
    # and the system resolves the rest (checked with ldd below).
    debs=$state/debs
    mkdir -p "$debs"
    (cd "$debs" && apt-get "${apt_opts[@]}" -qq download mesa-vulkan-drivers >&2) ||
        die "could not download mesa-vulkan-drivers from Debian $suite"
    deb=$(ls -t "$debs"/mesa-vulkan-drivers_*.deb | head -n 1)
    tmp=$dest.part
    rm -rf "$tmp"
    mkdir -p "$tmp"
    dpkg-deb -x "$deb" "$tmp"
    lavapipe_manifests "$tmp" "$dest"
    missing=$(ldd "$tmp/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" | sed -n 's/^\s*\(\S*\) => not found/\1/p' | tr '\n' ' ')
    [ -z "$missing" ] || die "Debian $suite's lavapipe needs libraries this system lacks: $missing"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    touch "$dest/.complete"
    echo "$dest"
    exit 0
fi

# The dependency closure, with the suite's C and C++ runtimes (the programs need
# its glibc); not the packages that only matter to an installed system.
closure=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
              --no-breaks --no-replaces --no-enhances "${packages[@]}" libc6 libstdc++6 libgcc-s1 |
          grep -E '^[a-z0-9][a-z0-9.+-]*$' |
          grep -vxE 'debconf|perl-base|perl|dpkg|install-info|libc-bin|base-files|sensible-utils|tzdata|mesa-libgallium-dbg|python3.*|libpython3.*' |
          sort -u) || die "could not resolve the dependencies of ${packages[*]} in Debian $suite"
[ -n "$closure" ] || die "Debian $suite has no ${packages[*]}"
debs=$state/debs
mkdir -p "$debs"
echo "fetch_newer: downloading $(wc -w <<<"$closure") packages from Debian $suite" >&2
(cd "$debs" && apt-get "${apt_opts[@]}" -qq download $closure >&2) ||
    die "could not download ${packages[*]} and their dependencies from Debian $suite"

tmp=$dest.part
rm -rf "$tmp"
mkdir -p "$tmp"
for p in $closure; do
    deb=$(ls -t "$debs/${p}_"*.deb 2>/dev/null | head -n 1)
    [ -n "$deb" ] || die "package $p was not downloaded"
    dpkg-deb -x "$deb" "$tmp"
done
ldso=$(cd "$tmp" && ls usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 usr/lib64/ld-linux-x86-64.so.2 \
           lib64/ld-linux-x86-64.so.2 2>/dev/null | head -n 1) || true
[ -n "$ldso" ] || die "Debian $suite's libc6 has no ld-linux-x86-64.so.2"
libpath=$dest/usr/lib/x86_64-linux-gnu:$dest/lib/x86_64-linux-gnu

if [ "$what" = lavapipe ] || [ "$what" = drm-shim ]; then
    # Only lavapipe's ICD, pointed at the unpacked driver by absolute path; the
    # validation layer's manifest likewise.
    lavapipe_manifests "$tmp" "$dest"
    layer_line="export VK_LAYER_PATH=$dest/usr/share/vulkan/explicit_layer.d"
    if [ "$what" = drm-shim ]; then
        # RADV's and NVK's manifests, by absolute path, beside the shims that give
        # them a device (tools/vgpu.sh).
        for pair in radeon:amdgpu nouveau:nouveau; do
            driver=${pair%%:*} shim=${pair##*:}
            [ -f "$tmp/usr/lib/x86_64-linux-gnu/libvulkan_$driver.so" ] ||
                die "Debian $suite's mesa-vulkan-drivers has no libvulkan_$driver.so"
            [ -f "$tmp/usr/lib/x86_64-linux-gnu/lib${shim}_noop_drm_shim.so" ] ||
                die "Debian $suite's mesa-drm-shim has no lib${shim}_noop_drm_shim.so"
            printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.4.0"}}\n' \
                "$dest/usr/lib/x86_64-linux-gnu/libvulkan_$driver.so" >"$tmp/${driver}_icd.json"
        done
    fi
else
    layer_line=""
fi

cat >"$tmp/run" <<EOF
#!/bin/sh
# Runs a program with Debian $suite's glibc and the libraries unpacked here
# (tools/fetch_newer.sh $what).
$layer_line
exec "$dest/$ldso" --library-path "$libpath" "\$@"
EOF
chmod +x "$tmp/run"
if [ "$what" = compiler ]; then
    mkdir -p "$tmp/bin"
    for tool in glslc spirv-val spirv-dis; do
        printf '#!/bin/sh\nexec "%s/run" "%s/usr/bin/%s" "$@"\n' "$dest" "$dest" "$tool" >"$tmp/bin/$tool"
        chmod +x "$tmp/bin/$tool"
    done
fi
rm -rf "$dest"
mv "$tmp" "$dest"
touch "$dest/.complete"
echo "$dest"
