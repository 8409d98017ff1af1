#!/usr/bin/python3
"""--precision int8 (weight matrices quantized at load, one fp32 scale per output
channel; embeddings quantized at load with one fp32 scale per row) against PyTorch.

usage: /usr/bin/python3 tests/test_int8.py /path/to/vkformer [--quick] [--verbose]

The Vulkan driver is whatever the caller selects (VK_ICD_FILENAMES / VK_DRIVER_FILES);
VKFORMER_VALIDATE=1 is set for every vkformer run (a validation message fails it).

  - `vkformer forward --precision int8` against PyTorch with the SAME dequantized
    weights (every nn.Linear-style matrix: in_proj, out_proj, linear1/2 and the
    generator, and the src/tgt embeddings, replaced by q * scale per row; scale =
    max|w| / 127 in fp32, q = w / scale rounded to nearest with halves away from
    zero, as vkf_quantize_int8_rows):
    max abs logit error <= 1e-3, on F32 and F16 files;
  - the same runs against the unquantized model: max abs error <= INT8_VS_FP32_ATOL
    (measured, docs/performance.md);
  - greedy ids of `generate --precision int8` against PyTorch's greedy decoding of
    the dequantized model;
  - every attention variant runs with int8 weights (dense-naive and lsh included:
    attention reads activations, never the weights); --precision i8 is a usage
    error (exit 2) naming int8;
  - int8 in the file (export_torch --dtype int8: "<name>" I8 + "<name>_scale" F32)
    with precision auto, int8 and f32 against the dequantized model (<= 1e-3; the
    embeddings, float in the file, dequantized too only for int8), and
    malformed files (missing, wrong-shape, F16 or negative scales, an I8 embedding,
    a stray scale) refused with one line naming the tensor.

Prints "N passed, M failed" and exits 1 on any failure.
"""
import json
import math
import os
import random
import sys
import tempfile
import time

try:
    import torch
except ImportError:
    print("test_int8: PyTorch is missing: apt-get install python3-torch (run this test with /usr/bin/python3)",
          file=sys.stderr)
    sys.exit(1)
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
sys.path.insert(0, HERE)
import export_torch  # noqa: E402
import vkf_testlib as lib  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, quantize_rows, run_vkformer  # noqa: E402

FORWARD_ATOL = 1e-3         # against the same dequantized weights
INT8_VS_FP32_ATOL = 0.15    # against the unquantized model (logits up to ~2): measured 0.011-0.080 (docs/performance.md)
MAX_LEN = 128


def is_linear_weight(name):
    return name.endswith("in_proj_weight") or name.endswith("out_proj.weight") or \
        name.endswith("linear1.weight") or name.endswith("linear2.weight") or name == "generator.weight"


def is_embedding(name):
    return name in ("src_embed.weight", "tgt_embed.weight")


def dequantized(model, embeddings=True):
    """A copy of the model whose weight matrices (and with `embeddings`, the
    embedding tables: --precision int8 quantizes them at load, one scale per token
    row) are q * scale per output row."""
    import copy
    m = copy.deepcopy(model)
    names = []
    with torch.no_grad():
        for name, p in m.named_parameters():
            if not (is_linear_weight(name) or (embeddings and is_embedding(name))):
                continue
            # in_proj of cross-attention is loaded as two matrices (q: rows 0..d, kv:
            # rows d..3d), quantized per row: the same as quantizing the whole matrix
            q, scale = quantize_rows(p)
            p.copy_(torch.from_numpy(q * scale[:, None]))
            names.append(name)
    return m, names


def random_pair(rng, cfg, s, t):
    src = [rng.randrange(cfg["src_vocab_size"]) for _ in range(s)]
    tgt = [cfg["bos_id"]] + [rng.randrange(cfg["tgt_vocab_size"]) for _ in range(t - 1)]
    return src, tgt


def forward(path, src, tgt, out, extra=()):
    rc, _, err = run_vkformer(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt),
                               "--out", out] + list(extra))
    if rc != 0:
        return None, "vkformer forward exited %d: %s" % (rc, " | ".join(err[-5:]))
    return np.load(out, allow_pickle=False), None


def max_err(got, want):
    want = want.detach().cpu().numpy().astype(np.float64)
    if got.shape != want.shape:
        return math.inf
    return float(np.max(np.abs(got.astype(np.float64) - want)))


F16_ACT_ATOL = 1e-2  # F16 activations against fp32 arithmetic on the same weights (as test_parity.py)

CONFIGS = [
    ("post-LN relu d48 h6 ff100 V37 scale=sqrt(d)",
     dict(norm_first=False, activation="relu", embed_scale=math.sqrt(48)), 31),
    ("pre-LN gelu d48 h6 ff100 V37/41 scale=1 eps=1e-6",
     dict(norm_first=True, activation="gelu", tgt_vocab_size=41, embed_scale=1.0, layer_norm_eps=1e-6), 32),
]


def check_model(label, overrides, seed, lengths, rng, tmp, file_dtype, worst):
    cfg = export_torch.default_config(max_len=MAX_LEN)
    cfg.update(overrides)
    model = export_torch.build_model(cfg, seed=seed)
    if file_dtype == torch.float16:
        # the loader quantizes the file's F16 values: the reference starts from them too
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
    deq, names = dequantized(model)
    tag = "F16" if file_dtype == torch.float16 else "F32"
    path = os.path.join(tmp, "int8-%d-%s.safetensors" % (seed, tag))
    export_torch.export(model, path, file_dtype)
    out = os.path.join(tmp, "int8.npy")
    for s, t in lengths:
        src, tgt = random_pair(rng, cfg, s, t)
        what = "int8 %s file %s: forward src %d tgt %d" % (tag, label, s, t)
        got, err = forward(path, src, tgt, out, ["--precision", "int8"])
        if err:
            bad(what, err)
            continue
        e = max_err(got, export_torch.forward_logits(deq, src, tgt))
        if e <= FORWARD_ATOL:
            ok("%s vs dequantized weights (%.2g)" % (what, e))
        else:
            bad(what + " vs dequantized weights", "max abs error %.3g > %.0e" % (e, FORWARD_ATOL))
        # int8 weights with F16 activations (what a GPU with 16-bit storage gets; forced here by
        # VKFORMER_AUTO_PRECISION=f16): the same dequantized model, F16 activation rounding
        os.environ["VKFORMER_AUTO_PRECISION"] = "f16"
        try:
            g16, err16 = forward(path, src, tgt, out, ["--precision", "int8"])
        finally:
            del os.environ["VKFORMER_AUTO_PRECISION"]
        e16 = max_err(g16, export_torch.forward_logits(deq, src, tgt)) if g16 is not None else math.inf
        if e16 <= F16_ACT_ATOL:
            ok("%s, F16 activations, vs dequantized weights (%.2g)" % (what, e16))
        else:
            bad(what + ", F16 activations", err16 or "max abs error %.3g > %.0e" % (e16, F16_ACT_ATOL))
        e32 = max_err(got, export_torch.forward_logits(model, src, tgt))
        worst[0] = max(worst[0], e32)
        print("%s: against the unquantized model %.3g (bound %.2g)" % (what, e32, INT8_VS_FP32_ATOL))
        if 0 < e32 <= INT8_VS_FP32_ATOL:
            ok(what + " vs unquantized")
        else:
            bad(what + " vs unquantized", "max abs error %.3g, expected in (0, %.2g]" % (e32, INT8_VS_FP32_ATOL))
    # greedy decoding (KV cache, decode-shape matmuls) follows PyTorch on the dequantized weights
    for n in (5, 30):
        src = [rng.randrange(cfg["src_vocab_size"]) for _ in range(n)]
        want = export_torch.greedy(deq, src, 12)
        rc, text, err = run_vkformer(["generate", "--model", path, "--src", ids_arg(src), "--max-new", "12",
                                      "--raw-ids", "--precision", "int8"])
        what = "int8 %s file %s: generate src %d" % (tag, label, n)
        got = [int(x) for x in text.strip().split(",")] if rc == 0 and text.strip() else []
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, err))
        elif got != want:
            bad(what, "expected %s\ngot      %s" % (want, got))
        else:
            ok(what)
    return model, deq, path, cfg


def check_variants(model, deq, path, cfg, rng, tmp):
    """Every attention variant runs with int8 weights (attention reads activations)."""
    out = os.path.join(tmp, "var.npy")
    src, tgt = random_pair(rng, cfg, 20, 9)
    want = export_torch.forward_logits(deq, src, tgt)
    for variant, exact in (("dense-naive", True), ("lsh:4:8", False), ("local:4", False), ("lowrank:8", False)):
        what = "int8 --attention %s" % variant
        got, err = forward(path, src, tgt, out, ["--precision", "int8", "--attention", variant])
        if err:
            bad(what, err)
        elif not np.isfinite(got).all():
            bad(what, "non-finite logits")
        elif exact and max_err(got, want) > FORWARD_ATOL:
            bad(what, "max abs error %.3g against the dequantized model" % max_err(got, want))
        else:
            ok(what)
    got, err = forward(path, src, tgt, out, ["--precision", "int8", "--cross-attention", "dense-naive"])
    if err or max_err(got, want) > FORWARD_ATOL:
        bad("int8 --cross-attention dense-naive", err or "max abs error %.3g" % max_err(got, want))
    else:
        ok("int8 --cross-attention dense-naive")
    rc, _, err = run_vkformer(["forward", "--model", path, "--src", "3", "--tgt", "1", "--out", out,
                               "--precision", "i8"])
    if rc == 2 and len(err) == 1 and "int8" in err[0]:
        ok("--precision i8 is a usage error naming int8 (%s)" % err[0])
    else:
        bad("--precision i8", "exit %d, stderr %s" % (rc, err))


def check_file_int8(rng, tmp):
    """Int8 in the file (export_torch --dtype int8: "<name>" I8 + "<name>_scale" F32):
    auto and int8 use it as it is, f32 dequantizes it; malformed scales are refused
    with one line naming the tensor."""
    label, overrides, seed = CONFIGS[1]
    cfg = export_torch.default_config(max_len=MAX_LEN)
    cfg.update(overrides)
    model = export_torch.build_model(cfg, seed=seed + 20)
    deq, _ = dequantized(model)                             # --precision int8: embeddings quantized at load
    deq_file, _ = dequantized(model, embeddings=False)      # auto, f32: the file's I8 matrices, float embeddings
    path = os.path.join(tmp, "file-int8.safetensors")
    export_torch.export(model, path, torch.int8)
    out = os.path.join(tmp, "file.npy")
    src, tgt = random_pair(rng, cfg, 40, 30)
    want_int8, want_file = export_torch.forward_logits(deq, src, tgt), export_torch.forward_logits(deq_file, src, tgt)
    for extra in ([], ["--precision", "int8"], ["--precision", "f32"]):
        what = "int8 file, %s" % (" ".join(extra) or "precision auto")
        want = want_int8 if extra == ["--precision", "int8"] else want_file
        got, err = forward(path, src, tgt, out, extra)
        if err:
            bad(what, err)
        elif max_err(got, want) > FORWARD_ATOL:
            bad(what, "max abs error %.3g > %.0e against the dequantized model" % (max_err(got, want), FORWARD_ATOL))
        else:
            ok("%s (%.2g)" % (what, max_err(got, want)))
    # malformed files
    import collections
    state = collections.OrderedDict()
    for name, t in model.state_dict().items():
        if export_torch.is_linear_weight(name):
            state[name], state[name + "_scale"] = export_torch.quantize_int8_rows(t)
        else:
            state[name] = t.detach().float()
    meta = {"vkformer.config": json.dumps({k: model.config[k] for k in export_torch.CONFIG_KEYS})}
    lin = "transformer.encoder.layers.0.linear1.weight"
    cases = [
        ("missing scales", lambda st: st.pop(lin + "_scale"), lin + "_scale"),
        ("scales of the wrong shape", lambda st: st.__setitem__(lin + "_scale", st[lin + "_scale"][:-1].clone()),
         lin + "_scale"),
        ("F16 scales", lambda st: st.__setitem__(lin + "_scale", st[lin + "_scale"].half()), lin + "_scale"),
        ("a negative scale", lambda st: st[lin + "_scale"].__setitem__(0, -1.0), lin + "_scale"),
        ("an I8 embedding", lambda st: st.__setitem__("src_embed.weight", st["src_embed.weight"].to(torch.int8)),
         "src_embed.weight"),
        ("a stray scale", lambda st: st.__setitem__("src_embed.weight_scale", torch.ones(cfg["src_vocab_size"])),
         "src_embed.weight_scale"),
    ]
    for what, mutate, name in cases:
        st = collections.OrderedDict((k, v.clone()) for k, v in state.items())
        mutate(st)
        bad_path = os.path.join(tmp, "bad-int8.safetensors")
        export_torch.write_safetensors(bad_path, st, meta)
        rc, stdout, err = run_vkformer(["forward", "--model", bad_path, "--src", "3", "--tgt", "1", "--out", out])
        if rc not in (0, 6) and len(err) == 1 and name in err[0] and not stdout:
            ok("int8 file with %s refused: %s" % (what, err[0]))
        else:
            bad("int8 file with " + what, "exit %d, stderr %s" % (rc, err))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) != 1 or any(f not in ("--quick", "--verbose") for f in flags):
        print("usage: %s /path/to/vkformer [--quick] [--verbose]" % sys.argv[0], file=sys.stderr)
        return 2
    VKFORMER = lib.VKFORMER = os.path.abspath(args[0])
    lib.VERBOSE = "--verbose" in flags
    quick = "--quick" in flags
    torch.set_num_threads(1)
    print("vkformer %s, VK_ICD_FILENAMES=%s, torch %s" % (VKFORMER, os.environ.get("VK_ICD_FILENAMES", "(unset)"),
                                                         torch.__version__))
    lengths = [(1, 1), (7, 13), (70, 70)] if quick else [(1, 1), (3, 1), (7, 13), (32, 32), (70, 70)]
    rng = random.Random(815)
    t0 = time.time()
    worst = [0.0]
    with tempfile.TemporaryDirectory(prefix="vkf-int8-") as tmp:
        first = None
        for label, overrides, seed in CONFIGS:
            r = check_model(label, overrides, seed, lengths, rng, tmp, torch.float32, worst)
            first = first or r
        label, overrides, seed = CONFIGS[1]
        check_model(label, overrides, seed + 10, [(1, 1), (70, 70)], rng, tmp, torch.float16, worst)
        check_variants(*first, rng, tmp)
        check_file_int8(rng, tmp)
    print("test_int8: worst error against the unquantized models %.3g" % worst[0])
    print("test_int8: %d passed, %d failed (%.1f s)" % (lib.passed, lib.failed, time.time() - t0))
    return 1 if lib.failed else 0


if __name__ == "__main__":
    sys.exit(main())
