# Helpers shared by the shell tests (sourced, not run): the driver, a temporary
# directory, failure counting and a command runner.

# cli_setup NAME ICD: runs everything on the driver of ICD, sets PYTHON, and makes
# $TMP (removed on exit).
cli_setup() {
    VK_ICD_FILENAMES=$2
    VK_DRIVER_FILES=$2
    export VK_ICD_FILENAMES VK_DRIVER_FILES
    PYTHON=/usr/bin/python3
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
    trap 'rm -rf "$TMP"' EXIT INT TERM
    failures=0
}

fail() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# run EXPECTED_RC COMMAND...: runs the command with stdout in $TMP/out and stderr
# in $TMP/err (minus SwiftShader's own "WARNING: UNSUPPORTED" lines); a different
# exit status is a failure. Sets $rc and $label.
run() {
    expected=$1
    shift
    label="$*"
    "$@" >"$TMP/out" 2>"$TMP/err.raw"
    rc=$?
    grep -v 'WARNING: UNSUPPORTED' "$TMP/err.raw" >"$TMP/err"
    if [ "$rc" -ne "$expected" ]; then
        fail "'$label' exited $rc, expected $expected"
        sed 's/^/    stdout: /' "$TMP/out" | head -n 20 >&2
        sed 's/^/    stderr: /' "$TMP/err" | head -n 20 >&2
    fi
}

# cli_finish NAME: exits 1 if anything failed, else 0 with a summary line.
cli_finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$1: $failures failures" >&2
        exit 1
    fi
    echo "$1: all checks passed"
    exit 0
}
