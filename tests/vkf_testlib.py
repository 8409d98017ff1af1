"""Helpers shared by the Python tests that drive the vkformer CLI (test_parity.py, test_beam.py,
test_int8.py, test_marian.py).

Module-level state: VKFORMER (the CLI's path) and VERBOSE are set by each test's main(); passed and
failed count the ok() / bad() calls, which the test prints as "N passed, M failed".

The importing test sets sys.dont_write_bytecode = True before importing this module, so that no
__pycache__ lands in the source tree.
"""
import os
import subprocess
import sys

VKFORMER = None   # path of the vkformer CLI
VERBOSE = False   # print every passing check too
passed = 0
failed = 0


def ok(what):
    """Counts a passing check; prints "ok   what" with VERBOSE."""
    global passed
    passed += 1
    if VERBOSE:
        print("ok   %s" % what)


def bad(what, detail=""):
    """Counts a failing check and prints "FAIL what", then the detail indented under it."""
    global failed
    failed += 1
    print("FAIL %s%s" % (what, ("\n     " + detail.replace("\n", "\n     ")) if detail else ""))
    sys.stdout.flush()


def run_vkformer(args, timeout=300):
    """Runs VKFORMER with VKFORMER_VALIDATE=1 (a validation message fails the run, exit 6); returns
    (rc, stdout, stderr lines without SwiftShader's own "WARNING: UNSUPPORTED" lines)."""
    env = dict(os.environ, VKFORMER_VALIDATE="1")
    p = subprocess.run([VKFORMER] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout)
    err = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if "WARNING: UNSUPPORTED" not in l]
    return p.returncode, p.stdout.decode("utf-8", "replace"), err


def ids_arg(ids):
    """Token ids as the CLI's comma-separated list."""
    return ",".join(str(i) for i in ids)


def parse_ids(line):
    """A comma-separated id list (the empty line: no ids)."""
    line = line.strip()
    return [int(x) for x in line.split(",")] if line else []


def quantize_rows(w):
    """vkf_quantize_int8_rows in fp32: (q, scale) as float32 numpy arrays with w ~ q * scale[:, None];
    scale = max|row| / 127, q = w / scale rounded to nearest with halves away from zero (a zero row:
    scale 0, q 0). w: a 2-D torch tensor."""
    import numpy as np
    w = w.detach().float().cpu().numpy().astype(np.float32)
    scale = (np.abs(w).max(axis=1) / np.float32(127)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    x = (w / safe[:, None]).astype(np.float32)
    q = np.trunc(x + np.copysign(np.float32(0.5), x))          # halves away from zero ...
    exact = np.abs(x - np.trunc(x)) != np.float32(0.5)         # ... but x + 0.5 may round up in fp32
    q = np.where(exact, np.round(x), q)                        # non-halves: nearest (np.round is exact there)
    q = np.clip(q, -127, 127)
    q = np.where(scale[:, None] > 0, q, 0).astype(np.float32)
    return q, scale
