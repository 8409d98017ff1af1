"""Which OpenBLAS kernels numpy runs, and a fix for a failed CPU detection.

Debian 12's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from the CPU's model
number. On a CPU it does not know (a virtual machine reporting a newer or a generic
model), it falls back to "Prescott": SSE3 kernels, 4-8x slower than the AVX2 or
AVX-512 ones the same CPU runs. A peer measured that way flatters whatever it is
compared with, so the benchmarks call `choose()` before importing numpy: when the
detected core is such a fallback and the CPU has AVX-512 (or AVX2 with FMA),
OPENBLAS_CORETYPE names SkylakeX (or Haswell) for this process and its children.
A user's OPENBLAS_CORETYPE is kept as given.
"""
import os
import subprocess
import sys

_PROBE = r"""
import ctypes, os, numpy as np
np.ones((64, 64), np.float32) @ np.ones((64, 64), np.float32)
name = "not OpenBLAS"
for line in open("/proc/self/maps"):
    path = line.split()[-1] if len(line.split()) >= 6 else ""
    if "blas" in os.path.basename(path):
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_get_corename"):
            lib.openblas_get_corename.restype = ctypes.c_char_p
            name = lib.openblas_get_corename().decode()
            break
print(name)
"""

# Cores OpenBLAS falls back to when it does not recognise the CPU.
_FALLBACKS = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine",
              "Northwood", "Banias"}


def corename(env=None):
    """The core OpenBLAS picks in a numpy process with this environment."""
    p = subprocess.run([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env)
    return p.stdout.strip() if p.returncode == 0 else "unknown (numpy failed: %s)" % p.stderr.strip()[-200:]


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def choose():
    """Sets OPENBLAS_CORETYPE where detection fell back; returns a line saying what runs."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return "OpenBLAS core %s (OPENBLAS_CORETYPE as given)" % corename()
    detected = corename()
    if detected not in _FALLBACKS:
        return "OpenBLAS core %s (detected)" % detected
    flags = _cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags:
        want = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        want = "Haswell"
    else:
        return "OpenBLAS core %s (detected; the CPU has neither AVX2 nor AVX-512)" % detected
    os.environ["OPENBLAS_CORETYPE"] = want
    return "OpenBLAS core %s (detection gave %s on a CPU with %s: OPENBLAS_CORETYPE=%s set)" % (
        corename(), detected, "AVX-512" if want == "SkylakeX" else "AVX2 and FMA", want)
