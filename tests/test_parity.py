#!/usr/bin/python3
"""Parity of the vkformer CLI with the PyTorch reference module (tools/export_torch.py).

usage: /usr/bin/python3 tests/test_parity.py /path/to/vkformer [--quick] [--verbose]

The Vulkan driver is whatever the caller selects (VK_ICD_FILENAMES / VK_DRIVER_FILES);
VKFORMER_VALIDATE=1 is set here for every vkformer run, so a validation message fails
the run (exit 6).

For each random-weight model (post-LN and pre-LN, relu and gelu, odd sizes, equal and
different vocabularies, embed_scale sqrt(d_model) and 1, several LayerNorm epsilons):
  - `vkformer forward` logits against export_torch.forward_logits for source/target
    lengths from 1 to 70: max abs error <= 1e-3;
  - `vkformer generate --max-new N` against export_torch.greedy: identical ids, for
    sources of lengths 1, 5, 30, 70 and N in (1, 10) (and max_len = 128 on the first
    two models);
  - a model whose generator bias for eos is raised so that greedy decoding stops
    early: vkformer must stop at the same place.
F16 files: logits against PyTorch on the same F16-rounded weights (<= 1e-3) and
against the unrounded fp32 weights (printed; asserted only <= 2e-2: rounding the
weights to F16 moves the logits by ~1e-3, measured 0.7e-3..5e-3); greedy ids against
PyTorch on the rounded weights.
CLI errors: bad ids, too long a source, --max-new past max_len exit non-zero with
exactly one line on stderr (SwiftShader's own "WARNING: UNSUPPORTED" lines ignored);
a non-numeric id list exits 2.

Prints "N passed, M failed" and exits 1 on any failure. --quick runs fewer lengths
(for slow drivers); --verbose also prints every passing check.
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
    print("test_parity: PyTorch is missing: apt-get install python3-torch (run this test with /usr/bin/python3)",
          file=sys.stderr)
    sys.exit(1)
try:
    import numpy as np
except ImportError:
    print("test_parity: numpy is missing: apt-get install python3-numpy", file=sys.stderr)
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
sys.path.insert(0, HERE)
import export_torch  # noqa: E402
import vkf_testlib as lib  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, run_vkformer  # noqa: E402

FORWARD_ATOL = 1e-3
F16_VS_FP32_ATOL = 2e-2     # F16 file against the unrounded fp32 model: weight rounding error
F16_ACT_ATOL = 1e-2         # --precision f16 (F16 activations) against the same F16 weights in fp32
MAX_LEN = 128

def read_npy(path):
    return np.load(path, allow_pickle=False)


def compare_logits(what, got, want, atol):
    """got: numpy (T, V); want: torch (T, V). Returns the max abs error (inf on shape mismatch)."""
    want = want.detach().cpu().numpy().astype(np.float64)
    if got.dtype != np.float32 or got.shape != want.shape:
        bad(what, "vkformer wrote dtype %s shape %s, expected float32 %s" % (got.dtype, got.shape, want.shape))
        return math.inf
    err = np.abs(got.astype(np.float64) - want)
    if np.isnan(err).any():
        idx = np.unravel_index(int(np.argmax(np.isnan(err))), err.shape)
        bad(what, "NaN at index %s: expected %.9g, got %.9g" % (idx, want[idx], got[idx]))
        return math.inf
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    worst = float(err[idx])
    if worst > atol:
        bad(what, "max abs error %.3g > %.1g at index (row %d, col %d): expected %.9g, got %.9g"
            % (worst, atol, idx[0], idx[1], want[idx], got[idx]))
    else:
        ok("%s (max abs error %.2g)" % (what, worst))
    return worst


def forward_cli(model_path, src, tgt, out_path, extra=()):
    rc, out, err = run_vkformer(["forward", "--model", model_path, "--src", ids_arg(src), "--tgt", ids_arg(tgt),
                                 "--out", out_path] + list(extra))
    if rc != 0:
        return None, "vkformer forward exited %d: %s" % (rc, " | ".join(err[-5:]))
    return read_npy(out_path), None


def generate_cli(model_path, src, max_new):
    rc, out, err = run_vkformer(["generate", "--model", model_path, "--src", ids_arg(src), "--max-new", str(max_new),
                                 "--raw-ids"])
    if rc != 0:
        return None, "vkformer generate exited %d: %s" % (rc, " | ".join(err[-5:]))
    lines = out.splitlines()
    if len(lines) != 1:
        return None, "vkformer generate printed %d lines, expected 1: %r" % (len(lines), out[:200])
    line = lines[0].strip()
    try:
        return ([int(x) for x in line.split(",")] if line else []), None
    except ValueError:
        return None, "vkformer generate printed %r, not comma-separated ids" % line


def greedy_diagnosis(model, src, want, got):
    """At the first differing step, the gap between PyTorch's two best logits (a
    near-tie explains a mismatch; anything else is a bug)."""
    n = 0
    while n < min(len(want), len(got)) and want[n] == got[n]:
        n += 1
    c = model.config
    with torch.no_grad():
        memory = model.encode(torch.tensor([src]))
        logits = model.decode(memory, torch.tensor([[c["bos_id"]] + want[:n]]))[0, -1]
    top = torch.topk(logits, 2)
    return ("first difference at step %d (expected %s, got %s); PyTorch's two best logits there: %d %.6g, %d %.6g"
            % (n, want[n] if n < len(want) else "eos", got[n] if n < len(got) else "eos",
               int(top.indices[0]), float(top.values[0]), int(top.indices[1]), float(top.values[1])))


def check_greedy(label, model, path, sources, max_news):
    for src in sources:
        full = export_torch.greedy(model, src, max(max_news))  # greedy(N) is a prefix of greedy(max)
        for n in max_news:
            want = full[:n]
            what = "%s: generate src len %d, --max-new %d" % (label, len(src), n)
            got, err = generate_cli(path, src, n)
            if err:
                bad(what, err)
            elif got != want:
                bad(what, "expected %s\ngot      %s\n%s" % (want, got, greedy_diagnosis(model, src, want, got)))
            else:
                ok("%s (%d ids)" % (what, len(got)))


def random_ids(rng, n, vocab):
    return [rng.randrange(vocab) for _ in range(n)]


def random_pair(rng, cfg, s, t):
    src = random_ids(rng, s, cfg["src_vocab_size"])
    tgt = [cfg["bos_id"]] + random_ids(rng, t - 1, cfg["tgt_vocab_size"])
    return src, tgt


# ------------------------------------------------------------------ configurations

CONFIGS = [
    # (label, overrides, seed)
    ("post-LN relu d48 h6 ff100 V37 scale=sqrt(d)",
     dict(norm_first=False, activation="relu", embed_scale=math.sqrt(48)), 1),
    ("pre-LN gelu d48 h6 ff100 V37/41 scale=1 eps=1e-6",
     dict(norm_first=True, activation="gelu", tgt_vocab_size=41, embed_scale=1.0, layer_norm_eps=1e-6), 2),
    ("post-LN gelu d32 h2 ff100 1enc+3dec V41/37 scale=sqrt(d) eps=1e-3",
     dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=3, norm_first=False, activation="gelu",
          src_vocab_size=41, tgt_vocab_size=37, embed_scale=math.sqrt(32), layer_norm_eps=1e-3), 3),
    ("pre-LN relu d48 h6 ff100 V37 scale=1 3enc+1dec",
     dict(norm_first=True, activation="relu", n_encoder_layers=3, n_decoder_layers=1, embed_scale=1.0), 4),
]

LENGTHS = [(1, 1), (1, 5), (3, 1), (7, 13), (17, 2), (32, 32), (50, 70), (70, 70), (70, 1)]
LENGTHS_QUICK = [(1, 1), (3, 1), (7, 13), (70, 70)]
GEN_SOURCE_LENGTHS = [1, 5, 30, 70]
GEN_SOURCE_LENGTHS_QUICK = [1, 30]


def config_for(overrides):
    c = export_torch.default_config(max_len=MAX_LEN)
    c.update(overrides)
    return c


def check_forward_config(label, model, path, lengths, rng, tmp):
    cfg = model.config
    out = os.path.join(tmp, "logits.npy")
    for s, t in lengths:
        src, tgt = random_pair(rng, cfg, s, t)
        what = "%s: forward src %d tgt %d" % (label, s, t)
        got, err = forward_cli(path, src, tgt, out)
        if err:
            bad(what, err)
            continue
        compare_logits(what, got, export_torch.forward_logits(model, src, tgt), FORWARD_ATOL)


def eos_margins(model, src, steps):
    """Along PyTorch's greedy path: logit[eos] - max(other logits) at each step."""
    c = model.config
    eos = c["eos_id"]
    out = [c["bos_id"]]
    margins = []
    with torch.no_grad():
        memory = model.encode(torch.tensor([src]))
        for _ in range(steps):
            logits = model.decode(memory, torch.tensor([out]))[0, -1].clone()
            e = float(logits[eos])
            logits[eos] = -math.inf
            margins.append(e - float(logits.max()))
            out.append(int(torch.argmax(logits)) if e < float(logits.max()) else eos)
    return margins


def check_eos_stop(tmp, rng):
    """A model whose eos bias is raised so that greedy decoding stops after a few
    ids: raising it by d changes no logit but eos's, so the path is unchanged up to
    the first step whose eos margin exceeds -d. Pick a step j in 3..19 whose margin
    beats every earlier one by >= 0.04 and raise the bias to halfway between, so
    every decision keeps a gap of >= 0.02 (no near-ties)."""
    cfg = config_for(dict(norm_first=False, activation="relu", embed_scale=math.sqrt(48)))
    eos = cfg["eos_id"]
    found = None
    for seed in range(11, 31):
        model = export_torch.build_model(cfg, seed=seed)
        src = random_ids(rng, 9, cfg["src_vocab_size"])
        margins = eos_margins(model, src, 20)
        if max(margins[:3]) >= 0:
            continue
        for j in range(3, 20):
            best_before = max(margins[:j])
            if margins[j] - best_before >= 0.04:
                found = (model, src, j, -(margins[j] + best_before) / 2)
                break
        if found:
            break
    label = "eos model"
    if found is None:
        bad(label, "could not make PyTorch's greedy decoding stop early by raising the eos bias")
        return
    model, src, j, delta = found
    base = float(model.generator.bias[eos])
    with torch.no_grad():
        model.generator.bias[eos] += delta
    found = export_torch.greedy(model, src, 20)
    if len(found) != j:
        bad(label, "PyTorch's greedy decoding gave %d ids, expected to stop after %d" % (len(found), j))
        return
    if int(torch.argmax(export_torch.forward_logits(model, src, [cfg["bos_id"]] + found)[-1])) != eos:
        bad(label, "PyTorch's forward does not pick eos where its greedy decoding stopped")
    path = os.path.join(tmp, "eos.safetensors")
    export_torch.export(model, path)
    print("eos model: PyTorch greedy stops after %d ids (eos bias raised by %.2f)" % (len(found),
          float(model.generator.bias[eos]) - base))
    for n in (len(found), len(found) + 1, 20, MAX_LEN):
        want = export_torch.greedy(model, src, n)
        got, err = generate_cli(path, src, n)
        what = "%s: generate --max-new %d" % (label, n)
        if err:
            bad(what, err)
        elif got != want:
            bad(what, "expected %s\ngot      %s\n%s" % (want, got, greedy_diagnosis(model, src, want, got)))
        else:
            ok("%s (%d ids)" % (what, len(got)))
    # A second source, through another plan shape (whether or not it stops early).
    src2 = random_ids(rng, 4, cfg["src_vocab_size"])
    want = export_torch.greedy(model, src2, MAX_LEN)
    got, err = generate_cli(path, src2, MAX_LEN)
    what = "%s: generate src len 4 --max-new %d (PyTorch gives %d ids)" % (label, MAX_LEN, len(want))
    if err:
        bad(what, err)
    elif got != want:
        bad(what, "expected %s\ngot      %s\n%s" % (want, got, greedy_diagnosis(model, src2, want, got)))
    else:
        ok(what)


def rounded_model(cfg, seed, matrices_only=False):
    """The model of this seed with its parameters rounded to F16 and back: all of
    them, or only the weight matrices and embeddings (2-D). The positional table is
    a buffer, which vkformer computes in F32 itself."""
    model = export_torch.build_model(cfg, seed=seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2 or not matrices_only:
                p.copy_(p.half().float())
    return model


def check_f16(label, overrides, seed, lengths, rng, tmp, atol=None, greedy=True):
    cfg = config_for(overrides)
    model = export_torch.build_model(cfg, seed=seed)
    path = os.path.join(tmp, "f16-%d.safetensors" % seed)
    export_torch.export(model, path, torch.float16)
    rounded = rounded_model(cfg, seed)
    out = os.path.join(tmp, "logits16.npy")
    for s, t in lengths:
        src, tgt = random_pair(rng, cfg, s, t)
        what = "F16 %s: forward src %d tgt %d" % (label, s, t)
        got, err = forward_cli(path, src, tgt, out)
        if err:
            bad(what, err)
            continue
        compare_logits(what + " vs F16-rounded weights", got, export_torch.forward_logits(rounded, src, tgt),
                       FORWARD_ATOL if atol is None else atol)
        want32 = export_torch.forward_logits(model, src, tgt).numpy().astype(np.float64)
        if got.shape == want32.shape:
            e32 = float(np.max(np.abs(got.astype(np.float64) - want32)))
            print("F16 %s: src %d tgt %d: max abs error against the unrounded fp32 model %.3g (bound %.0e)"
                  % (label, s, t, e32, F16_VS_FP32_ATOL))
            if not e32 <= F16_VS_FP32_ATOL:
                bad(what + " vs fp32 weights", "max abs error %.3g > %.0e" % (e32, F16_VS_FP32_ATOL))
            else:
                ok(what + " vs fp32 weights")
    # Greedy decoding of the F16 file follows PyTorch on the rounded weights.
    sources = [random_ids(rng, n, cfg["src_vocab_size"]) for n in (5, 30)]
    if greedy:
        check_greedy("F16 " + label, rounded, path, sources, (10,))


def check_precision(tmp, rng):
    """--precision f16 stores an F32 file's weights as F16 (rounded to nearest even,
    as torch's .half()) and every activation as F16, where the device has 16-bit
    storage, and is refused with a message where it has not; --precision f32
    widens an F16 file everywhere."""
    rc, out, err = run_vkformer(["info", "--json"])
    info = json.loads(out) if rc == 0 else None
    if info is None:
        bad("precision", "vkformer info --json failed")
        return
    has16 = bool(info["devices"][info["default"]].get("storage_16bit"))
    label, overrides, seed = CONFIGS[1]
    cfg = config_for(overrides)
    model = export_torch.build_model(cfg, seed=seed + 40)
    rounded = rounded_model(cfg, seed + 40, matrices_only=True)  # biases and norms stay F32
    path32, path16 = os.path.join(tmp, "p32.safetensors"), os.path.join(tmp, "p16.safetensors")
    export_torch.export(model, path32)
    export_torch.export(model, path16, torch.float16)
    out = os.path.join(tmp, "prec.npy")
    src, tgt = random_pair(rng, cfg, 23, 17)
    got, err = forward_cli(path32, src, tgt, out, ["--precision", "f16"])
    what = "--precision f16 on an F32 file (%s)" % ("16-bit storage" if has16 else "no 16-bit storage")
    if not has16:
        if got is None and "16-bit" in (err or ""):
            ok(what + ": refused")
        else:
            bad(what, "expected a refusal naming 16-bit storage, got %s" % (err or "logits"))
    elif err:
        bad(what, err)
    else:
        # F16 activations round every layer's output (relative 2^-11), so against the
        # same F16 weights the bound is F16_ACT_ATOL, not FORWARD_ATOL
        compare_logits(what + " vs F16-rounded weights", got, export_torch.forward_logits(rounded, src, tgt),
                       F16_ACT_ATOL)
        e32 = float(np.max(np.abs(got - export_torch.forward_logits(model, src, tgt).numpy())))
        print("%s: max abs error against fp32 weights %.3g (bound %.0e)" % (what, e32, F16_VS_FP32_ATOL))
        if 0 < e32 <= F16_VS_FP32_ATOL:  # the rounding shows, within the documented bound
            ok(what + " vs fp32 weights")
        else:
            bad(what + " vs fp32 weights", "max abs error %.3g, expected in (0, %.0e]" % (e32, F16_VS_FP32_ATOL))
    # F16 decode steps (KV cache, decode attention, argmax in F16) follow the F16
    # forward pass: each generated id is the forward logits' argmax at its
    # position, except where the top two logits are within 1e-2 (near-ties that
    # the two F16 paths may round apart).
    if has16:
        rc, out_text, err = run_vkformer(["generate", "--model", path32, "--src", ids_arg(src), "--max-new", "20",
                                          "--precision", "f16", "--raw-ids"])
        ids = [int(x) for x in out_text.split(",")] if rc == 0 and out_text.strip() else []
        what = "--precision f16: generate follows the F16 forward pass"
        if rc != 0:
            bad(what, "generate exited %d: %s" % (rc, err))
        else:
            full_tgt = [cfg["bos_id"]] + ids
            got, ferr = forward_cli(path32, src, full_tgt, out, ["--precision", "f16"])
            if ferr:
                bad(what, ferr)
            else:
                want_next = ids + [cfg["eos_id"]] if len(ids) < 20 else ids
                mismatches = []
                for pos, nxt in enumerate(want_next):
                    row = got[pos]
                    top2 = np.sort(row)[-2:]
                    if int(np.argmax(row)) != nxt and top2[1] - top2[0] >= 1e-2:
                        mismatches.append(pos)
                if mismatches:
                    bad(what, "positions %s: generated %s" % (mismatches, ids))
                else:
                    ok("%s (%d ids)" % (what, len(ids)))
    # --precision f32 of an F16 file (every tensor F16 in the file) is that model widened, on any device
    full = rounded_model(cfg, seed + 40)
    got, err = forward_cli(path16, src, tgt, out, ["--precision", "f32"])
    if err:
        bad("--precision f32 on an F16 file", err)
    else:
        compare_logits("--precision f32 on an F16 file", got, export_torch.forward_logits(full, src, tgt), FORWARD_ATOL)
    rc, out_text, err = run_vkformer(["forward", "--model", path32, "--src", ids_arg(src), "--tgt", ids_arg(tgt),
                                      "--out", out, "--precision", "f8"])
    if rc == 2 and any("precision" in line for line in err):
        ok("--precision f8 is a usage error")
    else:
        bad("--precision f8", "exit %d, expected 2: %s" % (rc, err))


def check_cli_errors(tmp):
    """One model with src vocab 37 and tgt vocab 41."""
    cfg = config_for(dict(tgt_vocab_size=41))
    model = export_torch.build_model(cfg, seed=5)
    path = os.path.join(tmp, "errors.safetensors")
    export_torch.export(model, path)
    out = os.path.join(tmp, "err.npy")
    long_src = ids_arg([3] * (MAX_LEN + 1))
    cases = [
        # (what, args, expected rc or None for any non-zero)
        ("generate: source id == src vocab", ["generate", "--model", path, "--src", "5,37,7"], None),
        ("generate: source id far past vocab", ["generate", "--model", path, "--src", "99999"], None),
        ("generate: negative source id", ["generate", "--model", path, "--src", "5,-3,7"], None),
        ("generate: source longer than max_len", ["generate", "--model", path, "--src", long_src], None),
        ("generate: --max-new past max_len", ["generate", "--model", path, "--src", "5,6", "--max-new",
                                               str(MAX_LEN + 1)], None),
        ("generate: non-numeric ids", ["generate", "--model", path, "--src", "5,x,7"], 2),
        ("generate: empty id in the list", ["generate", "--model", path, "--src", "5,,7"], 2),
        ("forward: source id == src vocab", ["forward", "--model", path, "--src", "37", "--tgt", "1", "--out", out],
         None),
        ("forward: target id == tgt vocab", ["forward", "--model", path, "--src", "3", "--tgt", "1,41", "--out", out],
         None),
        ("forward: negative target id", ["forward", "--model", path, "--src", "3", "--tgt", "1,-1", "--out", out],
         None),
        ("forward: target longer than max_len", ["forward", "--model", path, "--src", "3", "--tgt", long_src,
                                                  "--out", out], None),
        ("forward: non-numeric ids", ["forward", "--model", path, "--src", "3,a", "--tgt", "1", "--out", out], 2),
    ]
    for what, args, want_rc in cases:
        rc, stdout, err = run_vkformer(args)
        problems = []
        if want_rc is None and rc == 0:
            problems.append("exited 0, expected a failure")
        if want_rc is None and rc == 6:
            problems.append("exited 6 (validation messages)")
        if want_rc is not None and rc != want_rc:
            problems.append("exited %d, expected %d" % (rc, want_rc))
        if len(err) != 1:
            problems.append("wrote %d lines to stderr, expected exactly 1" % len(err))
        if stdout:
            problems.append("wrote to stdout: %r" % stdout[:100])
        if problems:
            bad("CLI error: " + what, "; ".join(problems) + "".join("\n  stderr: " + l for l in err[:10]))
        else:
            ok("CLI error: %s (exit %d: %s)" % (what, rc, err[0]))
    # The target vocabulary is larger than the source one: id 40 is a valid target.
    got, e = forward_cli(path, [3], [1, 40], out)
    if e:
        bad("forward: target id 40 (tgt vocab 41, src vocab 37)", e)
    else:
        compare_logits("forward: target id 40 (tgt vocab 41, src vocab 37)", got,
                       export_torch.forward_logits(model, [3], [1, 40]), FORWARD_ATOL)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    if len(args) != 1 or any(f not in ("--quick", "--verbose", "--coopmat") for f in flags):
        print("usage: %s /path/to/vkformer [--quick] [--verbose] [--coopmat]" % sys.argv[0], file=sys.stderr)
        return 2
    VKFORMER = lib.VKFORMER = os.path.abspath(args[0])
    quick = "--quick" in flags
    lib.VERBOSE = "--verbose" in flags
    if not os.access(VKFORMER, os.X_OK):
        print("test_parity: %s is not an executable" % VKFORMER, file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    print("vkformer %s, VK_ICD_FILENAMES=%s, torch %s%s" % (VKFORMER, os.environ.get("VK_ICD_FILENAMES", "(unset)"),
                                                          torch.__version__, ", quick" if quick else ""))
    lengths = LENGTHS_QUICK if quick else LENGTHS
    gen_lengths = GEN_SOURCE_LENGTHS_QUICK if quick else GEN_SOURCE_LENGTHS
    rng = random.Random(1234)
    t0 = time.time()
    if "--coopmat" in flags:
        return main_coopmat(rng, t0)
    with tempfile.TemporaryDirectory(prefix="vkf-parity-") as tmp:
        for i, (label, overrides, seed) in enumerate(CONFIGS):
            cfg = config_for(overrides)
            model = export_torch.build_model(cfg, seed=seed)
            path = os.path.join(tmp, "model%d.safetensors" % i)
            export_torch.export(model, path)
            check_forward_config(label, model, path, lengths, rng, tmp)
            sources = [random_ids(rng, n, cfg["src_vocab_size"]) for n in gen_lengths]
            # Every config decodes short and long sources; --max-new max_len only on
            # the first two (and in --quick on the first) to bound the run time.
            max_news = (1, 10, MAX_LEN) if i < (1 if quick else 2) else (1, 10)
            check_greedy(label, model, path, sources, max_news)
            print("%s: done (%.1f s)" % (label, time.time() - t0))
            sys.stdout.flush()
        check_eos_stop(tmp, rng)
        f16_lengths = [(1, 1), (70, 70)] if quick else [(1, 1), (7, 13), (70, 70)]
        check_f16(CONFIGS[0][0], CONFIGS[0][1], 21, f16_lengths, rng, tmp)
        check_f16(CONFIGS[1][0], CONFIGS[1][1], 22, f16_lengths, rng, tmp)
        check_precision(tmp, rng)
        check_cli_errors(tmp)
    print("test_parity: %d passed, %d failed (%.1f s)" % (lib.passed, lib.failed, time.time() - t0))
    return 1 if lib.failed else 0


def main_coopmat(rng, t0):
    """--coopmat: the models' F16 paths through the cooperative-matrix kernels (run
    with VKFORMER_COOPMAT=everywhere on a CPU driver that has coopmat, where the
    default keeps the scalar kernels). The kernels round every matmul's and fused
    attention's inputs to f16 (activations too), so logits are held to the F16
    activation bound against PyTorch on the same F16-rounded weights; greedy ids
    against PyTorch are left to the scalar runs (near-ties may round apart), and the
    F16 decode steps must still follow the F16 forward pass."""
    rc, out, err = run_vkformer(["info", "--json"])
    info = json.loads(out) if rc == 0 else {}
    if not info.get("coopmat_in_use"):
        bad("coopmat", "vkformer info --json says coopmat_in_use is %s; this mode needs a device with it"
            % info.get("coopmat_in_use"))
    else:
        ok("coopmat is in use on %s" % info["devices"][info["default"]]["name"])
    with tempfile.TemporaryDirectory(prefix="vkf-parity-coopmat-") as tmp:
        check_f16(CONFIGS[0][0], CONFIGS[0][1], 21, [(1, 1), (7, 13), (70, 70)], rng, tmp, atol=F16_ACT_ATOL,
                  greedy=False)
        check_f16(CONFIGS[1][0], CONFIGS[1][1], 22, [(1, 1), (70, 70)], rng, tmp, atol=F16_ACT_ATOL, greedy=False)
        check_precision(tmp, rng)
        # The path really switched: the same F16 model with --no-coopmat (scalar
        # kernels, activations kept in fp32) gives different logits, within the bound.
        # Matmuls with fewer rows than a coopmat tile stay scalar, hence 70 tokens.
        cfg = config_for(CONFIGS[0][1])
        path = os.path.join(tmp, "switch.safetensors")
        export_torch.export(export_torch.build_model(cfg, seed=23), path, torch.float16)
        src, tgt = random_pair(rng, cfg, 70, 70)   # rows past one coopmat tile (32 with NV2)
        on, err_on = forward_cli(path, src, tgt, os.path.join(tmp, "on.npy"))
        off, err_off = forward_cli(path, src, tgt, os.path.join(tmp, "off.npy"), ["--no-coopmat"])
        if err_on or err_off:
            bad("coopmat switch", err_on or err_off)
        else:
            d = float(np.max(np.abs(on.astype(np.float64) - off.astype(np.float64))))
            what = "coopmat against --no-coopmat on an F16 file: max abs difference %.3g" % d
            if 0 < d <= F16_ACT_ATOL:
                ok(what)
            else:
                bad(what, "expected in (0, %.0e]: %s" % (F16_ACT_ATOL, "the kernels did not switch" if d == 0 else "too far"))
    print("test_parity --coopmat: %d passed, %d failed (%.1f s)" % (lib.passed, lib.failed, time.time() - t0))
    return 1 if lib.failed else 0


if __name__ == "__main__":
    sys.exit(main())
