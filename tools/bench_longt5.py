#!/usr/bin/python3
"""LongT5-local against the same model forced to dense attention, on long inputs: time, memory, output
difference.

usage: /usr/bin/python3 tools/bench_longt5.py [--model DIR] [--kind longt5-local|longt5-tglobal] [--shape base|small]
           [--n 1024,4096,16384] [--tgt-len 8] [--repeat 3] [--library build/libvkformer.so] [--json]

--model DIR: a LongT5 folder; where DIR does not exist, a random-weight folder is written there once with
tests/gen_t5.py (needs numpy and sentencepiece: Debian's /usr/bin/python3), shaped like google/long-t5-local-base
(--shape base: d_model 768, 12 + 12 layers, 12 heads, d_kv 64, d_ff 2048 gated-gelu, local_radius 127,
global_block_size 16, vocabulary 32,128) or small (d_model 256, 4 + 4 layers, 4 heads of 64, d_ff 1024).
For each n: one random source of n tokens and a target of --tgt-len tokens through vkf_model_forward (encoder,
decoder, generator), with the model's own encoder attention (local:127, or tglobal:127:16) and with --attention
dense, each in a fresh context: the median host time of --repeat runs after one untimed warm-up (shader
compilation), the context's peak device memory (in its allocation blocks) and the bytes of its live tensors
after the runs (weights and the forward plan), and the largest absolute difference of the logits (and the
share of positions whose argmax agrees).
"""
import argparse
import ctypes
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "python"))

SHAPES = {
    "base": ["--d-model", "768", "--layers", "12", "--heads", "12", "--d-kv", "64", "--ffn", "2048",
             "--radius", "127", "--global-block", "16", "--vocab-size", "32128"],
    "small": ["--d-model", "256", "--layers", "4", "--heads", "4", "--d-kv", "64", "--ffn", "1024",
              "--radius", "127", "--global-block", "16", "--vocab-size", "32128"],
}


def one_case(lib_path, model, variant, src, tgt, repeat):
    """(median ms, runs, peak bytes, logits) of forward with `variant` (None: the model's own) in a fresh context."""
    import numpy as np
    import vkformer
    ctx = vkformer.Context(library=lib_path)
    m = ctx.load(model, precision="f32")
    m.set_attention(variant)
    used = m.attention_used()
    logits = m.forward(src, tgt)                     # warm-up: pipelines compile here
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        logits = m.forward(src, tgt)
        times.append((time.perf_counter() - t0) * 1e3)
    peak, allocated, tensors = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    ctx._lib.vkf_context_peak_memory(ctx._live(), ctypes.byref(peak))
    ctx._lib.vkf_context_memory_usage(ctx._live(), ctypes.byref(allocated), ctypes.byref(tensors))
    name = ctx.device_name
    ctx.close()
    return sorted(times)[len(times) // 2], times, peak.value, np.asarray(logits), used, name, tensors.value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--kind", default="longt5-local", choices=("longt5-local", "longt5-tglobal"))
    ap.add_argument("--shape", default="base", choices=tuple(SHAPES))
    ap.add_argument("--n", default="1024,4096,16384")
    ap.add_argument("--tgt-len", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--library", default=os.path.join(ROOT, "build", "libvkformer.so"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    model = os.path.abspath(a.model or os.path.join(cache, "vkformer", "%s-%s-shape" % (a.kind, a.shape)))
    if not os.path.isfile(os.path.join(model, "model.safetensors")):
        print("bench_longt5: writing a random-weight %s folder (%s shape) to %s" % (a.kind, a.shape, model),
              file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gen_t5.py"), model, a.kind] + SHAPES[a.shape],
                       check=True)
    import numpy as np
    with open(os.path.join(model, "config.json")) as f:
        V = json.load(f)["vocab_size"]
    rng = random.Random(1)
    rows = []
    for n in [int(x) for x in a.n.split(",")]:
        src = [rng.randrange(3, V) for _ in range(n - 1)] + [1]
        tgt = [0] + [rng.randrange(3, V) for _ in range(a.tgt_len - 1)]
        res = {}
        for label, variant in (("own", None), ("dense", "dense")):
            print("bench_longt5: n=%d, %s attention" % (n, label), file=sys.stderr, flush=True)
            res[label] = one_case(a.library, model, variant, src, tgt, a.repeat)
        own, dense = res["own"], res["dense"]
        diff = float(np.abs(own[3] - dense[3]).max())
        agree = float((own[3].argmax(-1) == dense[3].argmax(-1)).mean())
        row = {"n": n, "kind": a.kind, "shape": a.shape, "device": own[5], "own_attention": own[4]["encoder"],
               "own_ms": own[0], "own_runs_ms": own[1], "own_peak_bytes": own[2], "own_tensor_bytes": own[6],
               "dense_ms": dense[0], "dense_runs_ms": dense[1], "dense_peak_bytes": dense[2],
               "dense_tensor_bytes": dense[6],
               "max_abs_logit_diff": diff, "argmax_agreement": agree, "speedup": dense[0] / own[0]}
        rows.append(row)
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            print("n %6d  %-15s %10.1f ms %8.1f MiB (tensors %7.1f) | dense %10.1f ms %8.1f MiB (tensors %7.1f) | "
                  "%.2fx | max |logit diff| %.3g, argmax agreement %.2f" %
                  (n, own[4]["encoder"], own[0], own[2] / 2**20, own[6] / 2**20, dense[0], dense[2] / 2**20,
                   dense[6] / 2**20, dense[0] / own[0], diff, agree), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
