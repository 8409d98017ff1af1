#!/usr/bin/python3
"""The PyTorch side of vkformer's GPU targets: one JSON object per line.

    /usr/bin/python3 tools/bench_torch.py [--device cuda|cpu] [--repeat R] [--small]

Benchmarks (sizes of the full run; --small shrinks every one to a smoke test of a
few seconds on a CPU):
  matmul_fp32   C = A @ B, 4096^3, float32 with TF32 off (true fp32 arithmetic)
  matmul_fp16   the same in float16
  attention     softmax(Q K^T / sqrt(d)) V, float16, batch 4, 16 heads of 64, n 4096:
                torch.nn.functional.scaled_dot_product_attention where this torch has
                it, else the explicit three-step form (said in "impl")
  transformer   nn.Transformer base (d_model 512, 8 heads, 6+6 layers, d_ff 2048),
                float16, eager, batch 8, source and target 512, causal target mask:
                one forward pass (inference mode)
  decode        greedy decoding with the same model plus embeddings (vocabulary 8000)
                and a generator, batch 1, source 64, 64 new tokens, without a KV
                cache (every step re-runs the decoder on the whole prefix): ms per token

GPU times come from CUDA events around each repeat (median of --repeat after a
warm-up); CPU times from time.perf_counter. Where the device cannot run a dtype
(float16 matmul on a CPU in older torch), the line says so and, for attention and the
model, falls back to float32 ("dtype" tells which ran).
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Timer:
    """Median milliseconds of fn() over `repeat` runs after one warm-up."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn, repeat):
        fn()
        self.sync()
        times = []
        for _ in range(repeat):
            if self.cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times), times

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def emit(record):
    print(json.dumps(record), flush=True)


def supports(device, dtype):
    """Whether matmul and softmax run in dtype on device."""
    try:
        x = torch.ones(4, 4, device=device, dtype=dtype)
        torch.softmax(x @ x, dim=-1)
        return True
    except RuntimeError:
        return False


def bench_matmul(timer, device, dtype, n, repeat, base):
    rec = dict(base, bench="matmul_" + ("fp32" if dtype == torch.float32 else "fp16"), m=n, n=n, k=n,
               dtype=str(dtype).replace("torch.", ""))
    if dtype == torch.float32 and device.type == "cuda":
        rec["tf32"] = torch.backends.cuda.matmul.allow_tf32
    if not supports(device, dtype):
        rec["skipped"] = f"{rec['dtype']} matmul is not implemented on {device.type} in torch {torch.__version__}"
        emit(rec)
        return
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    c = torch.empty(n, n, device=device, dtype=dtype)
    ms, all_ms = timer(lambda: torch.matmul(a, b, out=c), repeat)
    rec.update(ms=round(ms, 4), tflops=round(2.0 * n**3 / (ms * 1e-3) / 1e12, 3),
               ms_all=[round(t, 4) for t in all_ms])
    emit(rec)


def usable_dtype(rec, device, dtype):
    """dtype, or float32 where the device cannot run it (said in rec); sets rec["dtype"]."""
    if not supports(device, dtype):
        rec["dtype_note"] = f"{dtype} unsupported on {device.type} in torch {torch.__version__}; float32 used"
        dtype = torch.float32
    rec["dtype"] = str(dtype).replace("torch.", "")
    return dtype


def bench_attention(timer, device, dtype, batch, heads, n, head_dim, repeat, base):
    rec = dict(base, bench="attention", batch=batch, heads=heads, n=n, head_dim=head_dim, causal=False)
    dtype = usable_dtype(rec, device, dtype)
    g = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(batch, heads, n, head_dim, device=device, dtype=dtype, generator=g) for _ in range(3))
    scale = 1.0 / math.sqrt(head_dim)
    if hasattr(F, "scaled_dot_product_attention"):
        rec["impl"] = "torch.nn.functional.scaled_dot_product_attention"
        fn = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    else:
        rec["impl"] = (f"explicit softmax(Q K^T * scale) V: torch {torch.__version__} has no "
                       "scaled_dot_product_attention (scores materialised, not a fused kernel)")
        fn = lambda: torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * scale, dim=-1), v)  # noqa: E731
    with torch.inference_mode():
        ms, all_ms = timer(fn, repeat)
    flops = 4.0 * batch * heads * n * n * head_dim  # QK^T and PV
    rec.update(ms=round(ms, 4), tflops=round(flops / (ms * 1e-3) / 1e12, 3), ms_all=[round(t, 4) for t in all_ms])
    emit(rec)


class Seq2Seq(nn.Module):
    """nn.Transformer with embeddings and a generator, as vkformer's model files."""

    def __init__(self, d_model, heads, layers, d_ff, vocab):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout=0.0, batch_first=True)
        self.generator = nn.Linear(d_model, vocab)
        self.scale = math.sqrt(d_model)

    def encode(self, src):
        return self.transformer.encoder(self.src_embed(src) * self.scale)

    def decode(self, tgt, memory):
        t = tgt.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=tgt.device, dtype=memory.dtype), diagonal=1)
        return self.generator(self.transformer.decoder(self.tgt_embed(tgt) * self.scale, memory, tgt_mask=mask))


def make_model(device, dtype, d_model, heads, layers, d_ff, vocab):
    torch.manual_seed(0)
    return Seq2Seq(d_model, heads, layers, d_ff, vocab).to(device=device, dtype=dtype).eval()


def bench_transformer(timer, device, dtype, cfg, batch, length, repeat, base):
    rec = dict(base, bench="transformer", batch=batch, src_len=length, tgt_len=length, mode="eager", **cfg)
    dtype = usable_dtype(rec, device, dtype)
    model = make_model(device, dtype, **cfg)
    g = torch.Generator(device=device).manual_seed(1)
    src = torch.randn(batch, length, cfg["d_model"], device=device, dtype=dtype, generator=g)
    tgt = torch.randn(batch, length, cfg["d_model"], device=device, dtype=dtype, generator=g)
    mask = torch.triu(torch.full((length, length), float("-inf"), device=device, dtype=dtype), diagonal=1)
    with torch.inference_mode():
        ms, all_ms = timer(lambda: model.transformer(src, tgt, tgt_mask=mask), repeat)
    rec.update(ms=round(ms, 4), ms_all=[round(t, 4) for t in all_ms],
               note="nn.Transformer forward only (embeddings and generator excluded)")
    emit(rec)


def bench_decode(timer, device, dtype, cfg, src_len, new_tokens, repeat, base):
    rec = dict(base, bench="decode", batch=1, src_len=src_len, new_tokens=new_tokens, kv_cache=False, **cfg)
    dtype = usable_dtype(rec, device, dtype)
    model = make_model(device, dtype, **cfg)
    g = torch.Generator(device=device).manual_seed(2)
    src = torch.randint(3, cfg["vocab"], (1, src_len), device=device, generator=g)
    bos = torch.ones(1, 1, dtype=torch.long, device=device)

    def generate():
        memory = model.encode(src)
        tgt = bos
        for _ in range(new_tokens):  # no KV cache: the decoder re-reads the whole prefix
            logits = model.decode(tgt, memory)[:, -1]
            tgt = torch.cat([tgt, logits.argmax(-1, keepdim=True)], dim=1)
        return tgt

    with torch.inference_mode():
        ms, all_ms = timer(generate, repeat)
    rec.update(ms_total=round(ms, 4), ms_per_token=round(ms / new_tokens, 4), ms_all=[round(t, 4) for t in all_ms],
               note="encoder once, then one full decoder pass per token (argmax read on the device)")
    emit(rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per benchmark (default 10; --small 2)")
    ap.add_argument("--small", action="store_true", help="tiny sizes: a smoke run of a few seconds")
    ap.add_argument("--only", help="comma-separated subset of matmul_fp32,matmul_fp16,attention,transformer,decode")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_torch.py: CUDA is not available; use --device cpu")
    repeat = args.repeat or (2 if args.small else 10)
    only = set(args.only.split(",")) if args.only else None

    # True fp32 for the fp32 matmul (TF32 would round inputs to 10-bit mantissas).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)

    base = {"torch": torch.__version__, "device": device.type, "small": args.small, "repeat": repeat,
            "timer": "cuda events" if device.type == "cuda" else "perf_counter",
            "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "threads": torch.get_num_threads()}
    timer = Timer(device)
    if args.small:
        mm_n, att, tf, tf_batch, tf_len, dec_src, dec_new = 256, (1, 2, 128, 64), \
            dict(d_model=64, heads=2, layers=1, d_ff=128, vocab=100), 2, 16, 8, 4
    else:
        mm_n, att, tf, tf_batch, tf_len, dec_src, dec_new = 4096, (4, 16, 4096, 64), \
            dict(d_model=512, heads=8, layers=6, d_ff=2048, vocab=8000), 8, 512, 64, 64

    def want(name):
        return only is None or name in only

    if want("matmul_fp32"):
        bench_matmul(timer, device, torch.float32, mm_n, repeat, base)
    if want("matmul_fp16"):
        bench_matmul(timer, device, torch.float16, mm_n, repeat, base)
    if want("attention"):
        bench_attention(timer, device, torch.float16, *att, repeat, base)
    if want("transformer"):
        bench_transformer(timer, device, torch.float16, tf, tf_batch, tf_len, repeat, base)
    if want("decode"):
        bench_decode(timer, device, torch.float16, tf, dec_src, dec_new, max(1, repeat // 2), base)


if __name__ == "__main__":
    main()
