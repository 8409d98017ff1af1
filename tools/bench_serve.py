#!/usr/bin/env python3
"""Throughput and latency of `vkformer serve` (issue 37; docs/serving.md).

Closed-loop clients on loopback each send LibreTranslate requests (/translate,
one text each) back to back from one shared list of mixed-length texts (the demo
model's held-out number words, a quarter of them sources whose translations run
to max_len), at 1, 4, 16 and 64 concurrent clients, against three servers:

  continuous   vkformer serve as it ships: requests admitted at every decode-step
               boundary into free slots of the running batch (--max-batch 64)
  wait-batch   the same scheduler with one batch that admits only while it is
               empty (VKFORMER_SERVE_MAX_GROUPS=1, VKFORMER_SCHEDULER_WAIT_BATCH=1):
               arrivals wait until the whole running batch has finished, then go
               in together ("static batching")
  serial       one request at a time (--max-batch 1, one group)

For each: requests/s, generated tokens/s (digits of the answers), p50/p99
latency, and the server's CPU time per request (user + system of its process,
lavapipe's threads included, from /proc): on a machine shared with other jobs
the wall-clock figures move with their load, the CPU time much less. A benchmark, not a test: nothing is asserted; the targets (>= 3x serial
at 16 clients, >= 1.5x wait-batch) are reported as met or not.

With --alternatives N every request asks for N alternatives (LibreTranslate's
field: beam search of N + 1 beams, the n-best), and serial runs --max-batch N + 1
(one beam search at a time).

usage: tools/bench_serve.py [--vkformer build/vkformer] [--model models/demo.safetensors]
                            [--requests 256] [--clients 1,4,16,64] [--forms continuous,wait-batch,serial]
                            [--alternatives N] [--json]
The Vulkan device is the environment's (VK_ICD_FILENAMES, VKFORMER_DEVICE).
"""
import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(vkformer, model, args, env):
    p = subprocess.Popen([vkformer, "serve", "--model", model, "--port", "0"] + args, stderr=subprocess.PIPE,
                         text=True, env=env)
    for line in p.stderr:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
    raise SystemExit("the server did not start")


def texts(n, seed=37):
    base = []
    with open(os.path.join(ROOT, "tests", "data", "demo_heldout.tsv")) as f:
        base = [line.split("\t")[0].strip() for line in f if line.strip()]
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.25:
            out.append(" ".join(["thousand"] * rng.randrange(9, 13)))  # translations of 20..32 tokens
        else:
            out.append(rng.choice(base))
    return out


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (Linux /proc), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def run(url, work, clients, pid=None, alternatives=0):
    """Closed loop: `clients` threads take the next text until the list is used up."""
    lock = threading.Lock()
    nxt = [0]
    lat, tokens, errors = [], [0], [0]

    def client():
        s = requests.Session()
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(work):
                return
            t0 = time.perf_counter()
            body = {"q": work[i], "target": "demo"}
            if alternatives:
                body["alternatives"] = alternatives
            r = s.post(url + "/translate", json=body, timeout=600)
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if r.status_code == 200:
                    tokens[0] += len(r.json()["translatedText"])
                else:
                    errors[0] += 1
    threads = [threading.Thread(target=client) for _ in range(clients)]
    cpu0 = cpu_seconds(pid) if pid else None
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu1 = cpu_seconds(pid) if pid else None
    lat.sort()
    return {"clients": clients, "requests": len(work), "seconds": wall, "req_per_s": len(work) / wall,
            "tokens_per_s": tokens[0] / wall, "p50_ms": 1e3 * statistics.median(lat),
            "p99_ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], "errors": errors[0],
            "cpu_ms_per_req": 1e3 * (cpu1 - cpu0) / len(work) if cpu0 is not None and cpu1 is not None else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vkformer", default=os.path.join(ROOT, "build", "vkformer"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo.safetensors"))
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--forms", default="continuous,wait-batch,serial")
    ap.add_argument("--alternatives", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    counts = [int(c) for c in a.clients.split(",")]
    work = texts(a.requests)
    forms = [("continuous", ["--max-batch", "64"], {}),
             ("wait-batch", ["--max-batch", "64"], {"VKFORMER_SERVE_MAX_GROUPS": "1", "VKFORMER_SCHEDULER_WAIT_BATCH": "1"}),
             ("serial", ["--max-batch", str(a.alternatives + 1)], {"VKFORMER_SERVE_MAX_GROUPS": "1"})]
    forms = [f for f in forms if f[0] in a.forms.split(",")]
    results = {}
    for name, args, extra in forms:
        env = dict(os.environ, **extra)
        p, url = start(a.vkformer, a.model, args, env)
        try:
            run(url, work[:32], 8, alternatives=a.alternatives)  # warm-up: pipelines compiled, plans recorded
            for c in counts:
                r = run(url, work, c, p.pid, a.alternatives)
                results[(name, c)] = r
                if a.json:
                    print(json.dumps(dict(r, form=name)))
                else:
                    print("%-11s %3d clients: %7.1f req/s %8.1f tokens/s  p50 %7.1f ms  p99 %7.1f ms  cpu %6.2f ms/req%s" %
                          (name, c, r["req_per_s"], r["tokens_per_s"], r["p50_ms"], r["p99_ms"],
                           r["cpu_ms_per_req"] if r["cpu_ms_per_req"] is not None else float("nan"),
                           "  (%d errors)" % r["errors"] if r["errors"] else ""), file=sys.stderr)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(60)
    if a.json or len(forms) < 3:
        return 0
    print("| clients | continuous req/s | p50 / p99 ms | wait-batch req/s | p50 / p99 ms | serial req/s | "
          "p50 / p99 ms | vs serial | vs wait-batch |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in counts:
        cont, wb, se = results[("continuous", c)], results[("wait-batch", c)], results[("serial", c)]
        print("| %d | %.1f | %.0f / %.0f | %.1f | %.0f / %.0f | %.1f | %.0f / %.0f | %.2fx | %.2fx |" %
              (c, cont["req_per_s"], cont["p50_ms"], cont["p99_ms"], wb["req_per_s"], wb["p50_ms"], wb["p99_ms"],
               se["req_per_s"], se["p50_ms"], se["p99_ms"], cont["req_per_s"] / se["req_per_s"],
               cont["req_per_s"] / wb["req_per_s"]))
    print("\n| clients | continuous CPU ms/req | wait-batch CPU ms/req | serial CPU ms/req | serial / continuous |")
    print("|---|---|---|---|---|")
    for c in counts:
        cpu = [results[(f, c)]["cpu_ms_per_req"] for f in ("continuous", "wait-batch", "serial")]
        if None in cpu:
            continue
        print("| %d | %.2f | %.2f | %.2f | %.2fx |" % (c, cpu[0], cpu[1], cpu[2], cpu[2] / cpu[0] if cpu[0] else 0))
    if 16 in counts:
        c16 = results[("continuous", 16)]
        x_serial = c16["req_per_s"] / results[("serial", 16)]["req_per_s"]
        x_wait = c16["req_per_s"] / results[("wait-batch", 16)]["req_per_s"]
        print("\ntarget >= 3x serial at 16 clients: %.2fx, %s" % (x_serial, "met" if x_serial >= 3 else "NOT met"))
        print("target >= 1.5x wait-for-the-batch at 16 clients (mixed lengths): %.2fx, %s" %
              (x_wait, "met" if x_wait >= 1.5 else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
