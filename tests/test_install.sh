#!/bin/sh
# The library as a user gets it from `meson install`: installed into a temporary
# destdir, it must hold the header, vkformer.pc and a versioned shared library
# (SONAME libvkformer.so.MAJOR) that exports exactly the functions declared in
# include/vkformer.h (none of the internal vkf_ helpers, none of volk's loader).
# examples/translate.c is compiled against that tree with pkg-config, once with
# the shared library and once with the static one (`pkg-config --static`, which
# must name everything libvkformer.a needs); with --run it also translates with
# both on the Vulkan driver of the environment (VK_ICD_FILENAMES). The installed
# vkformer tool must be built on the shared library's exported API alone. The Python
# package, as meson install puts it into site-packages and as `pip install ./python`
# puts it into a fresh virtual environment, must import and find its library by
# itself; with --run both translate with the demo model.
#
# usage: test_install.sh [--run] MESON BUILD_DIR SOURCE_DIR
# Environment: VKF_TEST_CC (default cc) and VKF_TEST_CFLAGS (the build's
# sanitizer flags, if any) for compiling the example.
# Exits 1 after printing every mismatch, 0 when all checks pass.

set -u

run=0
if [ "${1:-}" = --run ]; then
    run=1
    shift
fi
if [ $# -ne 3 ]; then
    echo "usage: $0 [--run] MESON BUILD_DIR SOURCE_DIR" >&2
    exit 2
fi
MESON=$1
BUILD=$2
SRC=$3
CC=${VKF_TEST_CC:-cc}
CFLAGS=${VKF_TEST_CFLAGS:-}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/vkformer-install.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}
words() { printf '%s\n' "$1" | tr '\n' ' '; }

# ------------------------------------------------------------------ install
# Two of these tests may run at once: one install into the build tree's log at a time.
ROOT=$TMP/root
if ! flock "$BUILD/meson-private/test-install.lock" \
        "$MESON" install -C "$BUILD" --no-rebuild --quiet --destdir "$ROOT" >"$TMP/install.log" 2>&1; then
    cat "$TMP/install.log" >&2
    echo "FAIL: meson install --destdir failed" >&2
    exit 1
fi
PC=$(find "$ROOT" -name vkformer.pc | head -n 1)
HEADER=$(find "$ROOT" -name vkformer.h | head -n 1)
SO=$(find "$ROOT" -name 'libvkformer.so.*.*.*' | head -n 1)
if [ -z "$PC" ] || [ -z "$HEADER" ] || [ -z "$SO" ]; then
    echo "FAIL: the install lacks vkformer.pc, vkformer.h or libvkformer.so.X.Y.Z:" >&2
    (cd "$ROOT" && find . -type f -o -type l) >&2
    exit 1
fi
LIBDIR=$(dirname "$SO")
[ -f "$LIBDIR/libvkformer.a" ] || fail "no libvkformer.a next to $SO"

# ------------------------------------------------------------------ SONAME
version=$(basename "$SO" | sed 's/^libvkformer\.so\.//')
major=${version%%.*}
soname=$(readelf -d "$SO" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[ "$soname" = "libvkformer.so.$major" ] || fail "SONAME is '$soname', expected libvkformer.so.$major"
[ "$(readlink "$LIBDIR/libvkformer.so.$major")" = "libvkformer.so.$version" ] ||
    fail "libvkformer.so.$major does not link to libvkformer.so.$version"
[ -e "$LIBDIR/libvkformer.so" ] || fail "no libvkformer.so (the link-time name)"
grep -q "VKF_VERSION_MAJOR $major\$" "$HEADER" || fail "the header's VKF_VERSION_MAJOR is not $major"

# ------------------------------------------------------------------ exported symbols
# Declared: every vkf_ name followed by '(' in the preprocessed header (comments
# gone; function-pointer typedefs read "(*vkf_x)(" and do not match).
$CC -E -P -x c "$HEADER" 2>"$TMP/cpp.err" | grep -o 'vkf_[A-Za-z0-9_]*[[:space:]]*(' |
    sed 's/[[:space:]]*($//' | sort -u >"$TMP/declared"
[ -s "$TMP/declared" ] || fail "no function declarations found in $HEADER: $(cat "$TMP/cpp.err")"
# Exported: defined dynamic symbols of every kind (functions, data). A sanitizer
# build adds its runtime's own hooks; those are not the library's.
nm -D --defined-only --format=posix "$SO" | awk '{print $1 " " $2}' |
    grep -vE '^(__asan|__ubsan|__sanitizer|__odr_asan|__lsan)' >"$TMP/exported_kinds"
awk '{print $1}' "$TMP/exported_kinds" | sort -u >"$TMP/exported"
extra=$(comm -13 "$TMP/declared" "$TMP/exported")
missing=$(comm -23 "$TMP/declared" "$TMP/exported")
[ -z "$extra" ] || fail "exported but not declared in vkformer.h: $(words "$extra")"
[ -z "$missing" ] || fail "declared in vkformer.h but not exported: $(words "$missing")"
nonfunc=$(awk '$2 != "T" {print $1}' "$TMP/exported_kinds")
[ -z "$nonfunc" ] || fail "exported symbols that are not functions: $(words "$nonfunc")"
volk=$(grep -E '^(volk|vk[A-Z])' "$TMP/exported" || true)
[ -z "$volk" ] || fail "volk's symbols are exported: $(words "$volk")"
[ -n "$extra$missing$nonfunc$volk" ] || echo "exported: $(wc -l <"$TMP/exported") functions, as declared in vkformer.h"

# ------------------------------------------------------------------ pkg-config
PCDIR=$(dirname "$PC")
pc() { PKG_CONFIG_PATH=$PCDIR PKG_CONFIG_SYSROOT_DIR=$ROOT pkg-config "$@" vkformer; }
pc --exists || fail "pkg-config cannot read $PC"
[ "$(pc --modversion)" = "$version" ] || fail "vkformer.pc says version $(pc --modversion), the library $version"
static_libs=$(pc --static --libs)
for want in -ljansson -lm -ldl -pthread; do
    case " $static_libs " in
    *" $want "*) ;;
    *) fail "pkg-config --static --libs vkformer lacks $want: $static_libs" ;;
    esac
done
case " $(pc --libs) " in
*" -ljansson "*) fail "pkg-config --libs vkformer (shared) names jansson: $(pc --libs)" ;;
esac

# ------------------------------------------------------------------ the example
EXAMPLE=$SRC/examples/translate.c
# shellcheck disable=SC2046,SC2086 # the flags are words
if ! $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $CFLAGS "$EXAMPLE" -o "$TMP/translate-shared" \
        $(pc --cflags --libs) 2>"$TMP/cc.err"; then
    fail "examples/translate.c does not build against the installed shared library: $(head -n 8 "$TMP/cc.err")"
fi
# The static library alone (no .so beside it), as `pkg-config --static` links it.
STATIC_ROOT=$TMP/static-root
cp -a "$ROOT" "$STATIC_ROOT"
rm -f "$STATIC_ROOT${LIBDIR#"$ROOT"}"/libvkformer.so*
# shellcheck disable=SC2046,SC2086
if ! $CC -std=c11 -Wall -Wextra -Wpedantic -Werror $CFLAGS "$EXAMPLE" -o "$TMP/translate-static" \
        $(PKG_CONFIG_PATH=$STATIC_ROOT${PCDIR#"$ROOT"} PKG_CONFIG_SYSROOT_DIR=$STATIC_ROOT \
          pkg-config --static --cflags --libs vkformer) 2>"$TMP/cc-static.err"; then
    fail "examples/translate.c does not link the static library with pkg-config --static: $(head -n 8 "$TMP/cc-static.err")"
fi
# The public header in C++ (extern "C", no C-only syntax), where there is a C++ compiler.
if command -v c++ >/dev/null 2>&1; then
    printf '#include <vkformer.h>\nint main() { return vkf_version() == 0; }\n' >"$TMP/cxx.cc"
    # shellcheck disable=SC2046
    c++ -Wall -Wextra -Werror -fsyntax-only $(pc --cflags) "$TMP/cxx.cc" 2>"$TMP/cxx.err" ||
        fail "vkformer.h does not compile as C++: $(head -n 8 "$TMP/cxx.err")"
fi

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p'; }
if [ -f "$TMP/translate-shared" ]; then
    needed "$TMP/translate-shared" | grep -qx "libvkformer.so.$major" ||
        fail "the example does not need libvkformer.so.$major: $(needed "$TMP/translate-shared" | tr '\n' ' ')"
fi
if [ -f "$TMP/translate-static" ]; then
    ! needed "$TMP/translate-static" | grep -q libvkformer ||
        fail "the static example still needs libvkformer.so"
fi

# ------------------------------------------------------------------ the tool
# `vkformer` is built on the public API alone (issue 16): it needs the shared
# library, defines no vkf_ function of its own, and every vkf_ function it calls
# is one the library exports (so a user's program can do whatever it does).
TOOL=$(find "$ROOT" -name vkformer -type f | head -n 1)
if [ -z "$TOOL" ]; then
    fail "the install lacks the vkformer tool"
else
    needed "$TOOL" | grep -qx "libvkformer.so.$major" ||
        fail "the installed vkformer does not use libvkformer.so.$major: $(needed "$TOOL" | tr '\n' ' ')"
    own=$(nm --defined-only "$TOOL" 2>/dev/null | awk '$3 ~ /^vkf_/ {print $3}' | sort -u)
    [ -z "$own" ] || fail "the vkformer tool holds library code of its own (a static link?): $(words "$own")"
    nm -D --undefined-only "$TOOL" | awk '$2 ~ /^vkf_/ {sub(/@.*/, "", $2); print $2}' | sort -u >"$TMP/tool_calls"
    private=$(comm -23 "$TMP/tool_calls" "$TMP/exported")
    [ -z "$private" ] || fail "the vkformer tool calls functions the library does not export: $(words "$private")"
    [ -s "$TMP/tool_calls" ] || fail "the vkformer tool calls no vkf_ function through the shared library"
    [ -n "$own$private" ] || echo "tool: calls $(wc -l <"$TMP/tool_calls") exported functions, nothing else of the library"
fi

# ------------------------------------------------------------------ Python
# The package as Python users get it (docs/python.md), two ways: `meson install` put
# it into site-packages with the library's folder recorded (vkformer/_install.py),
# and `pip install ./python` into a fresh virtual environment (with the system's
# site packages, for numpy) copies the build's libvkformer.so into it. Either way
# `import vkformer` must find that library itself: no sys.path edit, no
# VKFORMER_LIBRARY, no library= argument. --no-index only makes sure pip fetches
# nothing; the package needs nothing from the network to build. Run from $TMP so
# that the current folder holds no vkformer to import.
PY=/usr/bin/python3
ask='import vkformer; print(vkformer.__file__); print(vkformer.library_path())'
SITE=$(find "$ROOT" -type f -path '*-packages/vkformer/__init__.py' | head -n 1)
if [ -z "$SITE" ]; then
    fail "meson install put no vkformer/__init__.py into a site-packages folder"
else
    SITE=$(dirname "$(dirname "$SITE")")
    [ -f "$SITE/vkformer/_install.py" ] || fail "meson install wrote no vkformer/_install.py (the library's folder)"
    [ -f "$SITE/vkformer_dask.py" ] || fail "meson install put no vkformer_dask.py beside the package"
    for f in "$SRC"/python/vkformer/*.py; do
        [ -f "$SITE/vkformer/${f##*/}" ] || fail "meson install left out python/vkformer/${f##*/} (meson.build's list)"
    done
    before=$failures
    if found=$(cd "$TMP" && env -u VKFORMER_LIBRARY PYTHONPATH="$SITE" "$PY" -c "$ask" 2>"$TMP/py.err"); then
        want=$LIBDIR/libvkformer.so.$major
        [ "$(printf '%s\n' "$found" | sed -n 1p)" = "$SITE/vkformer/__init__.py" ] ||
            fail "import vkformer with the installed site-packages imported $(printf '%s\n' "$found" | sed -n 1p)"
        [ "$(printf '%s\n' "$found" | sed -n 2p)" = "$want" ] ||
            fail "the meson-installed package finds '$(printf '%s\n' "$found" | sed -n 2p)', not $want"
        [ "$failures" -ne "$before" ] || echo "python: meson install: $SITE/vkformer, $(printf '%s\n' "$found" | sed -n 2p)"
    else
        fail "the meson-installed package does not import: $(tail -n 3 "$TMP/py.err")"
    fi
fi
VENV=$TMP/venv
before=$failures
if ! "$PY" -m venv --system-site-packages "$VENV" >"$TMP/venv.log" 2>&1; then
    fail "$PY -m venv failed (Debian: python3-venv, which tools/setup.sh installs): $(tail -n 3 "$TMP/venv.log")"
elif ! (cd "$TMP" && VKFORMER_BUILD_DIR=$BUILD "$VENV/bin/pip" install --no-index --no-cache-dir \
        --disable-pip-version-check "$SRC/python") >"$TMP/pip.log" 2>&1; then
    fail "pip install ./python into a fresh venv failed: $(tail -n 5 "$TMP/pip.log")"
elif ! found=$(cd "$TMP" && env -u VKFORMER_LIBRARY "$VENV/bin/python" -c "$ask" 2>"$TMP/py.err"); then
    fail "the pip-installed package does not import: $(tail -n 3 "$TMP/py.err")"
else
    pkg=$(dirname "$(printf '%s\n' "$found" | sed -n 1p)")
    case $pkg in
    "$VENV"/*) ;;
    *) fail "import vkformer in the venv imported $pkg, not the venv's package" ;;
    esac
    [ "$(printf '%s\n' "$found" | sed -n 2p)" = "$pkg/libvkformer.so" ] ||
        fail "the pip-installed package finds '$(printf '%s\n' "$found" | sed -n 2p)', not its own $pkg/libvkformer.so"
    cmp -s "$pkg/libvkformer.so" "$BUILD/libvkformer.so" ||
        fail "the venv's $pkg/libvkformer.so is not the build's libvkformer.so"
    pyversion=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vkformer"))' 2>&1)
    [ "$pyversion" = "$version" ] ||
        fail "the Python package is version '$pyversion' (python/pyproject.toml), the library $version (meson.build)"
    [ "$failures" -ne "$before" ] || echo "python: pip install ./python into a venv: vkformer $pyversion, $pkg/libvkformer.so"
fi

# ------------------------------------------------------------------ running it
if [ "$run" = 1 ]; then
    MODEL=$SRC/models/demo.safetensors
    for kind in shared static; do
        exe=$TMP/translate-$kind
        [ -f "$exe" ] || continue
        out=$(LD_LIBRARY_PATH=$LIBDIR "$exe" "$MODEL" "three hundred forty two" 2>"$TMP/run.err")
        code=$?
        { [ "$code" = 0 ] && [ "$out" = 342 ]; } ||
            fail "$kind example: 'three hundred forty two' gave '$out' (exit $code): $(cat "$TMP/run.err")"
        out=$(LD_LIBRARY_PATH=$LIBDIR "$exe" "$TMP/no-such-model.safetensors" "two" 2>"$TMP/run.err")
        code=$?
        { [ "$code" = 1 ] && [ -z "$out" ] && grep -q "no-such-model.safetensors" "$TMP/run.err"; } ||
            fail "$kind example on a missing model: exit $code, stdout '$out', stderr: $(cat "$TMP/run.err")"
        out=$(LD_LIBRARY_PATH=$LIBDIR "$exe" "$MODEL" "three zillion" 2>"$TMP/run.err")
        code=$?
        { [ "$code" = 1 ] && grep -q "zillion" "$TMP/run.err"; } ||
            fail "$kind example on an unknown word: exit $code, stderr: $(cat "$TMP/run.err")"
    done
    # Both Python installs translate with the demo model, the library found by itself.
    translate='import sys, vkformer
with vkformer.load(sys.argv[1]) as m:
    print(m.translate("three hundred forty two"))'
    if [ -n "$CFLAGS" ]; then
        echo "NOTE: the Python installs are not run: a sanitized libvkformer.so ($CFLAGS) cannot be loaded into an uninstrumented python3"
    else
        if [ -n "${SITE:-}" ]; then
            out=$(cd "$TMP" && env -u VKFORMER_LIBRARY PYTHONPATH="$SITE" "$PY" -c "$translate" "$MODEL" 2>"$TMP/run.err")
            [ "$out" = 342 ] || fail "the meson-installed package translated to '$out': $(tail -n 3 "$TMP/run.err")"
        fi
        if [ -x "$VENV/bin/python" ]; then
            out=$(cd "$TMP" && env -u VKFORMER_LIBRARY "$VENV/bin/python" -c "$translate" "$MODEL" 2>"$TMP/run.err")
            [ "$out" = 342 ] || fail "the pip-installed package translated to '$out': $(tail -n 3 "$TMP/run.err")"
            echo "python: both installs translate 'three hundred forty two' to $out"
        fi
    fi
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
fi
echo "all install checks passed"
