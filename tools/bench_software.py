#!/usr/bin/python3
"""The software-Vulkan targets of docs/performance.md ("Software Vulkan as a fast fallback"),
measured side by side: each round runs every case on every driver, one after the other, so that
the drivers share the machine's state; the summary takes the best of the rounds per driver and
case, and prints the ratios the targets name.

usage: /usr/bin/python3 tools/bench_software.py [--vkformer build/vkformer] [--rounds 3]
           [--drivers 22.3,26.2[,25.0]] [--only matmul,attention,model] [--json]

Drivers: 22.3 is the system's lavapipe (Debian 12); 26.2 Debian unstable's and 25.0
bookworm-backports', as tools/fetch_newer.sh unpacks them into ~/.cache/vkformer
(lavapipe-unstable: run through its own runner, another glibc; lavapipe-bpo). Cases:
- matmul: `bench matmul` 1024^3 f32 (the built-in choice), beside numpy's float32 A @ B.T
  (OpenBLAS on Debian) timed in this process in the same round, on the CPU's AVX2/AVX-512
  kernels even where OpenBLAS's detection falls back to SSE3 (tools/openblas_core.py);
- attention: `bench attention --n 1024,4096 --variants dense,dense-naive` (8 heads of 64);
- model: `bench model --preset base` at f32 and int8 (forward pass and decode step).
"""
import argparse
import json
import os
import subprocess
import sys
import time

CACHE = os.path.expanduser("~/.cache/vkformer")
DRIVERS = {
    "22.3": (None, "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"),
    "26.2": (os.path.join(CACHE, "lavapipe-unstable", "run"), os.path.join(CACHE, "lavapipe-unstable", "icd.json")),
    "25.0": (None, os.path.join(CACHE, "lavapipe-bpo", "icd.json")),
}


def run(vkformer, driver, args):
    runner, icd = DRIVERS[driver]
    env = dict(os.environ, VK_ICD_FILENAMES=icd, VK_DRIVER_FILES=icd, VKFORMER_TUNE="0")
    cmd = ([runner] if runner else []) + [vkformer] + args + ["--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env)
    if p.returncode:
        raise SystemExit("bench_software: %s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-400:]))
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def blas_gflops(n=1024, repeat=5):
    import numpy as np
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b.T
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        a @ b.T
        best = min(best, time.perf_counter() - t)
    return 2.0 * n ** 3 / best / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vkformer", default="build/vkformer")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--drivers", default="22.3,26.2")
    p.add_argument("--only", default="matmul,attention,model")
    p.add_argument("--json", action="store_true", help="print every record as it comes")
    a = p.parse_args()
    drivers = a.drivers.split(",")
    for d in drivers:
        if d not in DRIVERS:
            p.error("--drivers: %s is not one of %s" % (d, ", ".join(DRIVERS)))
        if not os.path.exists(DRIVERS[d][1]):
            p.error("driver %s: %s is missing (tools/fetch_newer.sh)" % (d, DRIVERS[d][1]))
    only = set(a.only.split(","))
    if "matmul" in only:
        import openblas_core
        print("bench_software: " + openblas_core.choose(), file=sys.stderr, flush=True)
    best = {}    # (driver, case) -> best value (ms: lowest; GFLOP/s: highest)
    names = {}

    def keep(driver, case, value, higher_better=False):
        k = (driver, case)
        if k not in best or (value > best[k] if higher_better else value < best[k]):
            best[k] = value
        if a.json:
            print(json.dumps({"driver": driver, "case": case, "value": value}), flush=True)

    for r in range(a.rounds):
        if "matmul" in only:
            keep("OpenBLAS", "matmul 1024^3 GFLOP/s", blas_gflops(), True)
        for d in drivers:
            if "matmul" in only:
                rec = run(a.vkformer, d, ["bench", "matmul", "--m", "1024", "--n", "1024", "--k", "1024",
                                          "--repeat", "3"])[-1]
                keep(d, "matmul 1024^3 GFLOP/s", rec["gflops"], True)
                names[d] = rec["driver"]
                names[(d, "matmul kernel")] = "%s %s (%s)" % (rec["kernel"], rec["tiles"], rec["source"])
            if "attention" in only:
                for rec in run(a.vkformer, d, ["bench", "attention", "--n", "1024,4096", "--variants",
                                               "dense,dense-naive", "--repeat", "2"]):
                    if rec.get("record") == "case" and rec.get("ms") is not None:
                        keep(d, "attention n=%d %s ms" % (rec["n"], rec["variant"]), rec["ms"])
                        names[d] = rec["driver"]
            if "model" in only:
                for precision in ("f32", "int8"):
                    rec = run(a.vkformer, d, ["bench", "model", "--preset", "base", "--repeat", "3",
                                              "--precision", precision])[-1]
                    keep(d, "base forward %s ms" % precision, rec["forward_ms"])
                    keep(d, "base step %s ms" % precision, rec["step_ms"])
        print("bench_software: round %d of %d done" % (r + 1, a.rounds), file=sys.stderr, flush=True)

    cases = sorted({c for _, c in best})
    cols = [d for d in drivers] + (["OpenBLAS"] if ("OpenBLAS", "matmul 1024^3 GFLOP/s") in best else [])
    print("best of %d rounds, drivers alternated within each round" % a.rounds)
    for d in drivers:
        print("  %s: %s" % (d, names.get(d, "?")) + (", matmul %s" % names[(d, "matmul kernel")]
                                                    if (d, "matmul kernel") in names else ""))
    print("| case | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for c in cases:
        print("| %s | " % c + " | ".join("%.1f" % best[(d, c)] if (d, c) in best else "" for d in cols) + " |")
    print("ratios:")
    for d in drivers:
        m = best.get((d, "matmul 1024^3 GFLOP/s"))
        if m and ("22.3", "matmul 1024^3 GFLOP/s") in best:
            print("  %s matmul / 22.3 matmul: %.2f" % (d, m / best[("22.3", "matmul 1024^3 GFLOP/s")]))
        if m and ("OpenBLAS", "matmul 1024^3 GFLOP/s") in best:
            print("  %s matmul / OpenBLAS: %.2f" % (d, m / best[("OpenBLAS", "matmul 1024^3 GFLOP/s")]))
        for n in (1024, 4096):
            f, nv = best.get((d, "attention n=%d dense ms" % n)), best.get((d, "attention n=%d dense-naive ms" % n))
            if f and nv:
                print("  %s attention n=%d: dense-naive / fused %.2f" % (d, n, nv / f))
        for what in ("forward", "step"):
            f, i = best.get((d, "base %s f32 ms" % what)), best.get((d, "base %s int8 ms" % what))
            if f and i:
                print("  %s base %s: f32 / int8 %.2f" % (d, what, f / i))
    return 0


if __name__ == "__main__":
    sys.exit(main())
