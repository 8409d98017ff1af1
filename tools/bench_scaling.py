#!/usr/bin/python3
"""Measures the device pool and the Dask path (docs/scaling.md).

  bench_scaling.py pool VKFORMER MODEL INPUT [--batch B] [--repeat R] [--generate] [--max-new N]
      the same file through `translate --input` (or `generate --input` with --generate) on
      device 0 alone, device 1 alone (generate: a pool of that device, for the same
      batches), and pools of both (balanced and any-free dispatch),
      alternated R times; the job's time from --timing (model loading excluded) and the
      command's wall time, medians. Needs both ICDs in VK_ICD_FILENAMES.
  bench_scaling.py overhead LIBVKFORMER.so MODEL INPUT [--device D] [--batch B] [--repeat R]
      the queue's cost per batch: the same batches, one at a time, through vkf_model_generate
      on a plain model and through vkf_pool_submit + vkf_pool_collect on a one-device pool of
      the same device, alternated; the median difference, and the pool's queued_ms
      (submit to start on a free device).
  bench_scaling.py dask LIBVKFORMER.so MODEL INPUT [--workers W] [--partitions P] [--batch B]
                   [--copies C] [--repeat R]
      python/vkformer_dask.py: the texts (INPUT's first column, C times over) in P
      partitions, translated in one process and on LocalClusters of 1 and W worker
      processes (all up at once, warm: after the plugin loaded the model and one run;
      runs alternated), medians; the
      bytes per task (pickled texts in, results out, the plugin once per worker) and the
      weights that never travel.
Prints one JSON line per measurement, then a summary.
"""
import argparse
import ctypes
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.dont_write_bytecode = True


def emit(record):
    print(json.dumps(record), flush=True)


def device_names(vkformer_bin):
    out = subprocess.run([vkformer_bin, "info", "--json"], capture_output=True, text=True, check=True).stdout
    return {r["index"]: (r["name"], r["driver_name"] + " " + r["driver_info"]) for r in map(json.loads, out.splitlines())
            if "index" in r}


# ---------------------------------------------------------------- pool vs each alone


def bench_pool(a):
    names = device_names(a.vkformer)
    cmd = "generate" if a.generate else "translate"
    base = [a.vkformer, cmd, "--model", a.model, "--input", a.input, "--batch", str(a.batch), "--timing"]
    if a.max_new:
        base += ["--max-new", str(a.max_new)]
    # generate decodes its whole input as one batch unless --devices splits it: a device
    # alone is then a pool of that one device, with the same batches
    alone = "--devices" if a.generate else "--device"
    setups = [("device 0 alone", [alone, "0"]), ("device 1 alone", [alone, "1"])]
    if not a.generate:  # the pool's machinery on one device: its threads, no second device
        setups += [("pool of device 1", ["--devices", "1"])]
    setups += [("pool 0,1 balanced", ["--devices", "0,1"]),
              ("pool 0,1 any-free", ["--devices", "0,1", "--pool-dispatch", "any-free"])]
    times = {name: [] for name, _ in setups}
    for r in range(a.repeat):
        for name, extra in setups:
            t0 = time.monotonic()
            p = subprocess.run(base + extra, capture_output=True, text=True)
            wall = time.monotonic() - t0
            if p.returncode != 0:
                sys.exit("%s failed: %s" % (" ".join(base + extra), p.stderr))
            m = re.search(r"(\d+) tokens in ([\d.]+) ms", p.stderr)
            per_device = re.findall(r"timing: device (\d+) \((.*)\): (\d+) batches, (\d+) sources", p.stderr)
            rec = {"bench": "pool", "setup": name, "run": r, "tokens": int(m.group(1)), "job_ms": float(m.group(2)),
                   "command_s": round(wall, 3), "batches": {d: int(b) for d, _, b, _ in per_device}}
            times[name].append(rec)
            emit(rec)
    print("\n%s of %s, --batch %d, %d runs alternated, medians [min-max]. command: the whole run, model loads "
          "included; job: --timing's (after the load: a pool's devices compiled their pipelines in its warm-up "
          "at load, a device alone compiles them in its first batch, inside the job):"
          % (cmd, os.path.basename(a.input), a.batch, a.repeat))
    for d, (n, drv) in sorted(names.items()):
        print("  device %d: %s, %s" % (d, n, drv))
    best_alone = None
    for name, _ in setups:
        jobs = [r["job_ms"] for r in times[name]]
        cmds = [r["command_s"] for r in times[name]]
        job, cmd_s = statistics.median(jobs), statistics.median(cmds)
        toks = times[name][0]["tokens"]
        if name.endswith("alone"):
            best_alone = cmd_s if best_alone is None else min(best_alone, cmd_s)
        ratio = "" if name.endswith("alone") else "  %.2fx the faster device alone" % (best_alone / cmd_s)
        shares = [r["batches"] for r in times[name] if r["batches"]]
        print("  %-18s command %6.2f s [%.2f-%.2f]%s   job %8.1f ms [%.0f-%.0f] %7.1f tokens/s%s" % (
            name, cmd_s, min(cmds), max(cmds), ratio, job, min(jobs), max(jobs), 1e3 * toks / job,
            ("  batches per device " + " ".join(str(x) for x in shares)) if shares else ""))


# ---------------------------------------------------------------- the queue's cost per batch


def bench_overhead(a):
    import numpy as np
    import vkformer
    lib = vkformer._library(a.library)
    lib.vkf_pool_submit.restype = ctypes.c_int
    lib.vkf_pool_submit.argtypes = [ctypes.c_void_p, ctypes.POINTER(vkformer._Sequences),
                                    ctypes.POINTER(vkformer._GenerateOptions), ctypes.POINTER(ctypes.c_uint64)]

    class PoolBatch(ctypes.Structure):
        _fields_ = [("device", ctypes.c_uint32), ("attempts", ctypes.c_uint32), ("queued_ms", ctypes.c_double),
                    ("run_ms", ctypes.c_double), ("stats", ctypes.c_uint8 * 64)]

    lib.vkf_pool_collect.restype = ctypes.c_int
    lib.vkf_pool_collect.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int32),
                                     ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_float),
                                     ctypes.POINTER(PoolBatch)]
    with open(a.input) as f:
        texts = [line.split("\t")[0].rstrip("\n") for line in f]
    model = vkformer.load(a.model, device=a.device, library=a.library)
    pool = vkformer.Pool(a.model, devices=[a.device], library=a.library)
    src = [model.encode(t) for t in texts]
    batches = [vkformer._Batch(src[k:k + a.batch], "source") for k in range(0, len(src), a.batch)]
    max_new = a.max_new or model.config.max_len
    opts = vkformer._GenerateOptions()
    lib.vkf_model_generate_defaults(pool._live(), ctypes.byref(opts))
    opts.max_new = max_new
    out = np.zeros((a.batch, max_new), dtype=np.int32)
    lens = np.zeros(a.batch, dtype=np.uint32)
    out_p, lens_p = out.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), lens.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32))
    direct, pooled, queued = [], [], []
    for r in range(a.repeat):
        for b in batches:
            t0 = time.perf_counter()
            vkformer._check(lib, lib.vkf_model_generate(model._live(), ctypes.byref(b.seq), max_new, out_p, lens_p))
            direct.append(time.perf_counter() - t0)
            ticket = ctypes.c_uint64()
            info = PoolBatch()
            t0 = time.perf_counter()
            vkformer._check(lib, lib.vkf_pool_submit(pool._pool(), ctypes.byref(b.seq), ctypes.byref(opts),
                                                     ctypes.byref(ticket)))
            vkformer._check(lib, lib.vkf_pool_collect(pool._pool(), ticket.value, out_p, lens_p, None,
                                                      ctypes.byref(info)))
            pooled.append(time.perf_counter() - t0)
            queued.append(info.queued_ms)
    d, p, q = statistics.median(direct) * 1e3, statistics.median(pooled) * 1e3, statistics.median(queued)
    emit({"bench": "overhead", "device": pool.devices()[0]["name"], "batches": len(direct), "batch": a.batch,
          "direct_ms": round(d, 4), "pool_ms": round(p, 4), "overhead_ms": round(p - d, 4), "queued_ms": round(q, 4)})
    print("\nqueue cost per batch on %s (%d batches of %d, one at a time, medians): vkf_model_generate %.3f ms, "
          "pool submit+collect %.3f ms: %+.3f ms per batch; submit to start on a free device %.3f ms"
          % (pool.devices()[0]["name"], len(direct), a.batch, d, p, p - d, q))
    pool.close()
    model.close()


# ---------------------------------------------------------------- Dask vs one process


def bench_dask(a):
    import logging

    import dask
    import dask.bag as db
    from distributed import Client, LocalCluster, get_task_stream

    import vkformer_dask
    with open(a.input) as f:
        texts = [line.split("\t")[0].rstrip("\n") for line in f] * a.copies
    bag = db.from_sequence(texts, npartitions=a.partitions)
    parts = [list(p) for p in dask.compute(*bag.to_delayed(), scheduler="sync")]
    options = {"library": a.library}

    local = vkformer_dask.VkformerPlugin(a.model, **options)
    t0 = time.monotonic()
    local.setup()
    load_s = time.monotonic() - t0
    ref = [t for p in parts for t in vkformer_dask.translate_partition(p, batch_size=a.batch)]  # warm

    in_bytes = [len(pickle.dumps(p, protocol=5)) for p in parts]
    out_parts, k = [], 0
    for p in parts:
        out_parts.append(ref[k:k + len(p)])
        k += len(p)
    out_bytes = [len(pickle.dumps(p, protocol=5)) for p in out_parts]
    import cloudpickle
    plugin_bytes = len(cloudpickle.dumps(vkformer_dask.VkformerPlugin(a.model, **options)))
    weights = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(a.model) for f in files) \
        if os.path.isdir(a.model) else os.path.getsize(a.model)

    # one process and clusters of 1 and W worker processes, all up at once, runs alternated
    clusters = {}
    for workers in (1, a.workers):
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               silence_logs=logging.CRITICAL)
        client = Client(cluster, set_as_default=False)
        t0 = time.monotonic()
        vkformer_dask.register(client, a.model, **options)
        register_s = time.monotonic() - t0
        assert client.compute(vkformer_dask.translate_bag(bag, batch_size=a.batch)).result() == ref  # warm
        clusters[workers] = (cluster, client, register_s)
    runs = {"one": [], 1: [], a.workers: []}
    task_ms = {1: [], a.workers: []}
    for _ in range(a.repeat):
        t0 = time.monotonic()
        got = [t for p in parts for t in vkformer_dask.translate_partition(p, batch_size=a.batch)]
        runs["one"].append(time.monotonic() - t0)
        assert got == ref
        for workers, (cluster, client, _) in clusters.items():
            with get_task_stream(client) as ts:
                t0 = time.monotonic()
                got = client.compute(vkformer_dask.translate_bag(bag, batch_size=a.batch)).result()
                runs[workers].append(time.monotonic() - t0)
            assert got == ref
            for t in ts.data:  # the translation tasks (not the bag's from_sequence ones)
                if "translate_partition" not in str(t.get("key")):
                    continue
                for s in t.get("startstops", []):
                    if s["action"] == "compute":
                        task_ms[workers].append((s["stop"] - s["start"]) * 1e3)
    local.teardown()
    emit({"bench": "dask", "setup": "one process", "texts": len(texts), "partitions": len(parts),
          "seconds": [round(x, 3) for x in runs["one"]], "model_load_s": round(load_s, 3)})
    for workers, (cluster, client, register_s) in clusters.items():
        stats = client.run(vkformer_dask.worker_stats)
        emit({"bench": "dask", "setup": "%d worker processes" % workers, "seconds": [round(x, 3) for x in runs[workers]],
              "register_s": round(register_s, 3), "task_compute_ms_median": round(statistics.median(task_ms[workers]), 2),
              "partitions_per_worker": sorted(s["partitions"] for s in stats.values())})
        client.close()
        cluster.close()
    one_s = statistics.median(runs["one"])
    print("\nDask: %d texts in %d partitions, batches of %d; one process and LocalClusters of 1 and %d worker "
          "processes (one thread each), warm, %d runs alternated, medians [min-max]" % (len(texts), len(parts),
                                                                                      a.batch, a.workers, a.repeat))
    print("  one process            %7.3f s [%.3f-%.3f]  (%.1f ms per partition)" % (
        one_s, min(runs["one"]), max(runs["one"]), one_s * 1e3 / len(parts)))
    for w in (1, a.workers):
        m = statistics.median(runs[w])
        idle = (sum(runs[w]) * w - sum(task_ms[w]) / 1e3) * 1e3 / (len(parts) * a.repeat)
        print("  %d worker process%s    %7.3f s [%.3f-%.3f]  %.2fx one process;  a task's compute %.1f ms (median); "
              "time the workers were not computing, per task: %.1f ms"
              % (w, "es" if w > 1 else "  ", m, min(runs[w]), max(runs[w]), one_s / m,
                 statistics.median(task_ms[w]), idle))
    print("  bytes per task: texts in %.0f B (%.1f B per text), results out %.0f B; the plugin %d B once per "
          "worker; weights (%d B) never sent" % (statistics.mean(in_bytes), sum(in_bytes) / len(texts),
                                                 statistics.mean(out_bytes), plugin_bytes, weights))
    emit({"bench": "dask", "bytes_in_per_task": statistics.mean(in_bytes), "bytes_out_per_task": statistics.mean(out_bytes),
          "plugin_bytes": plugin_bytes, "weights_bytes": weights})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("pool")
    p.add_argument("vkformer")
    p.add_argument("model")
    p.add_argument("input")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--generate", action="store_true")
    p.add_argument("--max-new", type=int, default=0)
    o = sub.add_parser("overhead")
    o.add_argument("library")
    o.add_argument("model")
    o.add_argument("input")
    o.add_argument("--device", type=int, default=1)
    o.add_argument("--batch", type=int, default=4)
    o.add_argument("--repeat", type=int, default=3)
    o.add_argument("--max-new", type=int, default=0)
    d = sub.add_parser("dask")
    d.add_argument("library")
    d.add_argument("model")
    d.add_argument("input")
    d.add_argument("--workers", type=int, default=2)
    d.add_argument("--partitions", type=int, default=20)
    d.add_argument("--batch", type=int, default=16)
    d.add_argument("--copies", type=int, default=4)
    d.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    {"pool": bench_pool, "overhead": bench_overhead, "dask": bench_dask}[a.what](a)


if __name__ == "__main__":
    main()
