#!/usr/bin/python3
"""Two builds of vkformer side by side on the three software drivers: each round runs
every case with both, in alternating order, and the table gives each case's median over
the rounds (min-max in brackets) and the kernel each build chose. For "nothing slower on
the software drivers" checks (docs/performance.md); run it on a quiet machine.

usage: /usr/bin/python3 tools/bench_software_ab.py BEFORE/vkformer AFTER/vkformer ROUNDS
(lavapipe 26.2 from tools/fetch_newer.sh lavapipe, SwiftShader from tools/fetch_swiftshader.sh,
at the paths tools/setup.sh puts them)"""
import glob
import json
import os
import statistics
import subprocess
import sys

if len(sys.argv) != 4 or not sys.argv[3].isdigit() or int(sys.argv[3]) < 1:
    raise SystemExit(__doc__)
before, after, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "vkformer")
LVP = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
SWS = sorted(glob.glob(os.path.join(CACHE, "swiftshader-*", "vk_swiftshader_icd.json")))
UNS = os.path.join(CACHE, "lavapipe-unstable")
drivers = {}
if os.path.exists(LVP):
    drivers["lavapipe-22.3"] = ([], {"VK_ICD_FILENAMES": LVP})
if SWS:
    drivers["swiftshader"] = ([], {"VK_ICD_FILENAMES": SWS[-1]})
if os.path.exists(os.path.join(UNS, "run")):
    drivers["lavapipe-26.2"] = ([os.path.join(UNS, "run")], {"VK_ICD_FILENAMES": os.path.join(UNS, "icd.json")})
for name, where in (("lavapipe-22.3", LVP), ("swiftshader", CACHE + "/swiftshader-*"), ("lavapipe-26.2", UNS)):
    if name not in drivers:
        print("bench_software_ab: %s not found (%s): left out" % (name, where), file=sys.stderr)
cases = [
    ("matmul 512 f32", ["bench", "matmul", "--size", "512", "--repeat", "5", "--json"], "gflops"),
    ("matmul 512 f16", ["bench", "matmul", "--size", "512", "--dtype", "f16", "--repeat", "5", "--json"], "gflops"),
    ("matmul 4x2048x1024 f32", ["bench", "matmul", "--m", "4", "--n", "2048", "--k", "1024", "--repeat", "5", "--json"], "gflops"),
    ("attention dense n1024 f32", ["bench", "attention", "--n", "1024", "--variants", "dense", "--repeat", "3", "--json"], "ms"),
    ("attention dense n1024 f16", ["bench", "attention", "--n", "1024", "--variants", "dense", "--precision", "f16", "--repeat", "3", "--json"], "ms"),
    ("matmul 512 f16 coopmat (forced)", ["bench", "matmul", "--size", "512", "--dtype", "f16", "--kernel", "coopmat", "--repeat", "5", "--json"], "gflops"),
    ("attention dense n1024 f16 coopmat (forced)", ["bench", "attention", "--n", "1024", "--variants", "dense", "--precision", "f16", "--kernel", "coopmat", "--repeat", "3", "--json"], "ms"),
]
res = {}
for r in range(rounds):
    for dname, (pre, env) in drivers.items():
        for cname, args, key in cases:
            if "forced" in cname and dname != "lavapipe-26.2": continue
            order = [("before", before), ("after", after)] if r % 2 == 0 else [("after", after), ("before", before)]
            for tag, exe in order:
                e = dict(os.environ); e.update(env)
                p = subprocess.run(pre + [exe] + args, env=e, capture_output=True, text=True)
                if p.returncode != 0:
                    print("not run: %s, %s, %s: %s" % (dname, cname, tag, p.stderr.strip()[-300:]), file=sys.stderr,
                          flush=True)
                    continue
                rec = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")][-1]
                kern = rec.get("kernel")
                if isinstance(rec.get("choice"), dict): kern = rec["choice"].get("kernel", kern)
                res.setdefault((dname, cname, tag), []).append((rec[key], kern))
    print("round %d done, load %s" % (r + 1, open("/proc/loadavg").read().split()[0]), file=sys.stderr, flush=True)
print("| driver | case | kernel before / after | before | after | unit |")
print("|---|---|---|---|---|---|")
for dname in drivers:
    for cname, args, key in cases:
        if "forced" in cname and dname != "lavapipe-26.2": continue
        b = res.get((dname, cname, "before"), []); a = res.get((dname, cname, "after"), [])
        if not b or not a:
            print("| %s | %s | not run (see stderr) | | | |" % (dname, cname))
            continue
        fb = [x for x, _ in b]; fa = [x for x, _ in a]
        print("| %s | %s | %s / %s | %.3g (%.3g–%.3g) | %.3g (%.3g–%.3g) | %s |" % (dname, cname, b[0][1], a[0][1],
              statistics.median(fb), min(fb), max(fb), statistics.median(fa), min(fa), max(fa), "GFLOP/s" if key == "gflops" else "ms"))
