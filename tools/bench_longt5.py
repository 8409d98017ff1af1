#!/usr/bin/python3
"""LongT5-local against the same model forced to dense attention, on long inputs: time, memory, output
difference.

usage: /usr/bin/python3 tools/bench_longt5.py [--model DIR] [--kind longt5-local|longt5-tglobal] [--shape base|small]
           [--n 1024,4096,16384] [--tgt-len 8] [--repeat 3] [--warmup-tokens K] [--library build/libvkformer.so]
           [--json]

--model DIR: a LongT5 folder; where DIR does not exist, a random-weight folder is written there once with
tests/gen_t5.py (needs numpy and sentencepiece: Debian's /usr/bin/python3), shaped like google/long-t5-local-base
(--shape base: d_model 768, 12 + 12 layers, 12 heads, d_kv 64, d_ff 2048 gated-gelu, local_radius 127,
global_block_size 16, vocabulary 32,128) or small (d_model 256, 4 + 4 layers, 4 heads of 64, d_ff 1024).
For each n: one random source of n tokens and a target of --tgt-len tokens through vkf_model_forward (encoder,
decoder, generator), with the model's own encoder attention (local:127, or tglobal:127:16) and with --attention
dense, each on its own context, the two alternated run by run (one untimed warm-up each for shader
compilation, then --repeat timed runs): the median and the minimum host time, the context's peak device
memory (in its allocation blocks) and the bytes of its live tensors after the runs (weights and the forward
plan), and the largest absolute difference of the logits (and the share of positions whose argmax agrees).
--warmup-tokens K: the warm-ups run a source of min(K, n) tokens instead of n (at 16,384 tokens a dense
warm-up costs as much as a timed run): the pipelines still compile there, but the first timed run at n then
also builds its forward plan for n tokens (allocation and recording; seconds against minutes of attention).
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


class Case:
    """One attention choice on its own context (so that its peak memory is its own)."""

    def __init__(self, lib_path, model, variant):
        import vkformer
        self.ctx = vkformer.Context(library=lib_path)
        self.m = self.ctx.load(model, precision="f32")
        self.m.set_attention(variant)
        self.used = self.m.attention_used()["encoder"]
        self.times = []

    def run(self, src, tgt, timed):
        t0 = time.perf_counter()
        self.logits = self.m.forward(src, tgt)
        if timed:
            self.times.append((time.perf_counter() - t0) * 1e3)

    def memory(self):
        peak, allocated, tensors = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
        self.ctx._lib.vkf_context_peak_memory(self.ctx._live(), ctypes.byref(peak))
        self.ctx._lib.vkf_context_memory_usage(self.ctx._live(), ctypes.byref(allocated), ctypes.byref(tensors))
        return peak.value, tensors.value

    def close(self):
        self.ctx.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--kind", default="longt5-local", choices=("longt5-local", "longt5-tglobal"))
    ap.add_argument("--shape", default="base", choices=tuple(SHAPES))
    ap.add_argument("--n", default="1024,4096,16384")
    ap.add_argument("--tgt-len", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup-tokens", type=int, default=0)
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
        cases = {"own": Case(a.library, model, None), "dense": Case(a.library, model, "dense")}
        # one untimed warm-up each (pipelines compile), then the two alternated, so that the machine's
        # load falls on both alike
        warm = src if not a.warmup_tokens or a.warmup_tokens >= n else src[:a.warmup_tokens - 1] + [1]
        for r in range(a.repeat + 1):
            for label, c in cases.items():
                print("bench_longt5: n=%d, %s attention, run %d of %d" % (n, label, r, a.repeat), file=sys.stderr,
                      flush=True)
                c.run(src if r > 0 else warm, tgt, r > 0)
        own, dense = cases["own"], cases["dense"]
        med = lambda t: sorted(t)[len(t) // 2]  # noqa: E731
        diff = float(np.abs(own.logits - dense.logits).max())
        agree = float((own.logits.argmax(-1) == dense.logits.argmax(-1)).mean())
        (op, ot), (dp, dt) = own.memory(), dense.memory()
        row = {"n": n, "warmup_tokens": len(warm), "kind": a.kind, "shape": a.shape, "device": own.ctx.device_name, "own_attention": own.used,
               "own_ms": med(own.times), "own_min_ms": min(own.times), "own_runs_ms": own.times,
               "own_peak_bytes": op, "own_tensor_bytes": ot,
               "dense_ms": med(dense.times), "dense_min_ms": min(dense.times), "dense_runs_ms": dense.times,
               "dense_peak_bytes": dp, "dense_tensor_bytes": dt,
               "max_abs_logit_diff": diff, "argmax_agreement": agree,
               "speedup_median": med(dense.times) / med(own.times), "speedup_min": min(dense.times) / min(own.times)}
        for c in cases.values():
            c.close()
        rows.append(row)
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            print("n %6d  %-15s %10.1f ms (min %.1f) %8.1f MiB (tensors %7.1f) | dense %10.1f ms (min %.1f) %8.1f MiB "
                  "(tensors %7.1f) | %.2fx (min %.2fx) | max |logit diff| %.3g, argmax agreement %.2f" %
                  (n, own.used, row["own_ms"], row["own_min_ms"], op / 2**20, ot / 2**20, row["dense_ms"],
                   row["dense_min_ms"], dp / 2**20, dt / 2**20, row["speedup_median"], row["speedup_min"], diff, agree),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
