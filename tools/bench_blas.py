#!/usr/bin/python3
"""fp32 matmul: vkformer (through `vkformer bench matmul --json`) against the CPU's
BLAS sgemm (numpy float32 A @ B.T), measured in the same invocation, with the ratio.

Run with Debian's Python and numpy (/usr/bin/python3); numpy uses whichever
libblas.so.3 the alternatives system points at, so install libopenblas0-pthread
(tools/install_packages.sh does for the test set-ups) to compare with OpenBLAS. The
BLAS library actually loaded is read from /proc/self/maps and printed, with the
OpenBLAS core it runs; where OpenBLAS failed to recognise the CPU and fell back to
SSE3 kernels, OPENBLAS_CORETYPE is set to the CPU's AVX2/AVX-512 core
(tools/openblas_core.py).

    /usr/bin/python3 tools/bench_blas.py [--vkformer build/vkformer] [--size 512,1024]
                                         [--repeat 7] [--device D] [--target 0.2]

BLAS is timed before and after vkformer (the median of both sets), so that a load
change on a shared machine shows up in both sides. One JSON object per size on
stdout; the exit status is 0 even when the target is missed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import openblas_core

BLAS_CORE = openblas_core.choose()  # before numpy loads the library

import numpy as np  # noqa: E402


def loaded_blas():
    """Paths of the BLAS libraries mapped into this process."""
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if "blas" in name or "lapack" in name:
                libs.add(os.path.realpath(path))
    return sorted(libs)


def time_blas(size, repeat):
    """Seconds of each of `repeat` float32 A @ B.T of size³ (after one warm-up)."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    b = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    c = np.empty((size, size), np.float32)
    np.matmul(a, b.T, out=c)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.matmul(a, b.T, out=c)
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vkformer", default=os.path.join(os.path.dirname(__file__), "..", "build", "vkformer"))
    ap.add_argument("--size", default="512,1024", help="comma-separated square sizes")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--device", help="vkformer --device")
    ap.add_argument("--target", type=float, default=0.2, help="vkformer / BLAS ratio to reach")
    args = ap.parse_args()
    sizes = [int(s) for s in args.size.split(",")]

    np.matmul(np.ones((8, 8), np.float32), np.ones((8, 8), np.float32))  # load the BLAS
    blas_libs = loaded_blas()
    threads = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or str(os.cpu_count())

    before = {s: time_blas(s, args.repeat) for s in sizes}
    cmd = [args.vkformer, "bench", "matmul", "--size", args.size, "--repeat", str(args.repeat), "--json"]
    if args.device:
        cmd += ["--device", args.device]
    run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr)
        sys.exit(f"bench_blas.py: {' '.join(cmd)} exited {run.returncode}")
    vk = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            vk[j["m"]] = j
    after = {s: time_blas(s, args.repeat) for s in sizes}

    for s in sizes:
        blas_s = statistics.median(before[s] + after[s])
        blas_gflops = 2.0 * s**3 / blas_s / 1e9
        v = vk[s]
        ratio = v["gflops"] / blas_gflops
        print(json.dumps({
            "size": s,
            "blas_gflops": round(blas_gflops, 2),
            "blas_ms": round(blas_s * 1e3, 3),
            "blas_ms_before_after": [round(statistics.median(before[s]) * 1e3, 3),
                                     round(statistics.median(after[s]) * 1e3, 3)],
            "blas": blas_libs,
            "blas_threads": threads,
            "blas_core": BLAS_CORE,
            "vkformer_gflops": v["gflops"],
            "vkformer_ms": v["ms"],
            "vkformer_device": v["device"],
            "ratio": round(ratio, 3),
            "target": args.target,
            "meets_target": ratio >= args.target,
            "repeat": args.repeat,
            "load_average": os.getloadavg()[0],
        }))


if __name__ == "__main__":
    main()
