#!/usr/bin/python3
"""Hugging Face Marian (opus-mt) folders through the vkformer CLI, against tests/marian_ref.py.

usage: /usr/bin/python3 tests/test_marian.py /path/to/vkformer [--quick] [--verbose]
       /usr/bin/python3 tests/test_marian.py --self-check [--verbose]

Folders come from tests/gen_marian.py (random weights, hub layout, tiny SentencePiece models);
marian_ref.py is a PyTorch reference of transformers' MarianMTModel + MarianTokenizer + generate()
(checked against transformers 5.12.1 with tools/check_marian_hf.py: logits within 1.4e-5, greedy and
beam ids equal). VKFORMER_VALIDATE=1 is set for every vkformer run; SwiftShader's own
"WARNING: UNSUPPORTED" stderr lines are ignored.

Configs: swish with shared scaled embeddings (hub names, positions in the file); gelu with separate
encoder/decoder embeddings, scale_embedding false, 3 layers, d_model 24 / 3 heads; relu with the names
transformers 5 save_pretrained writes (model.shared.weight only, no positions); an F16 safetensors (all
tied aliases stored; reference on the same F16-rounded weights); a pytorch_model.bin converted by
tools/convert_hf.py. For each:
  - `vkformer forward --model DIR --src IDS --tgt PAD,IDS --out F.npy`: (len(tgt), V) float32 logits,
    max abs error <= 1e-3 against marian_ref.forward_logits, for several source/target lengths;
  - `vkformer generate --model DIR --src IDS --max-new N --beam 1`: ids equal to marian_ref.greedy
    (pad banned, eos forced at the last step, stop at eos; ids without start and final eos); `--beam 4`
    equal to marian_ref.beam_search; without --beam (the folder's generation_config: 4 beams) equal to
    --beam 4.
On the first config also:
  - `vkformer tokenize --model DIR TEXT`: source ids with the final eos, as source.spm pieces looked up in
    vocab.json; `vkformer tokenize --model DIR --decode IDS`: text as target.spm decode_pieces of the
    vocab.json pieces (specials skipped); sentences round trip;
  - `vkformer translate --model DIR --input FILE --batch 3 --beam 1 --max-new 16`: one line per input
    line, equal to the reference's detokenized greedy output of the tokenized line.
On the first three configs (shared and tied, separate and tied, save_pretrained names) also:
  - `vkformer forward --precision int8` (weight matrices and embeddings quantized at load, one fp32 scale
    per row; the tied generator reads the embedding's int8 rows and scales) against marian_ref on the same
    dequantized weights (every 2-D .weight but the positions replaced by q * scale per row, quantized as
    vkf_quantize_int8_rows): max abs error <= 1e-3; greedy ids equal to the reference's on them.
A folder whose embedding passes 128 MiB (vocab 40000 x d_model 1024 = 163840000 bytes, one layer each):
one forward (<= 1e-3) and one greedy generate of 4 tokens. With --quick it is skipped only if its
forward takes more than 60 s (said so in the output).
  - `--attention local:64` and `strided:64:64` (windows covering the sequence: dense attention) against
    the reference; bigbird and lsh run with finite logits; beam search with local:4 runs.
A small folder under VKFORMER_MAX_BINDING=16384: its embedding and tied generator in parts, and a
batch of five sources with 4 beams run in halves; logits and beam ids against the reference; one
--precision int8 forward (int8 parts, each with its rows' scales) against the dequantized reference.
Malformed folders (every gen_marian.MALFORMED kind): `vkformer translate` exits non-zero with exactly
one stderr line naming the problem (one of the kind's keywords).

--self-check runs only the reference's own checks (no vkformer): beam 1 == greedy, greedy's first token
== argmax of the forward's processed logits, converted .bin == safetensors, tokenizer round trips,
malformed folders rejected by the reference loader where it checks them.
Prints "N passed, M failed" and exits 1 on any failure.
"""
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
try:
    import numpy as np
    import torch
except ImportError as e:
    print("test_marian: %s is missing: apt-get install python3-torch python3-numpy (run with /usr/bin/python3)"
          % e.name, file=sys.stderr)
    sys.exit(1)
try:
    import sentencepiece  # noqa: F401
except ImportError:
    print("test_marian: sentencepiece is missing: apt-get install python3-sentencepiece", file=sys.stderr)
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import gen_marian  # noqa: E402
import marian_ref  # noqa: E402
import vkf_testlib as lib  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, parse_ids, run_vkformer  # noqa: E402

FORWARD_ATOL = 1e-3
BIG_QUICK_LIMIT_S = 60

CONFIGS = [
    ("swish shared", dict(activation="swish", eos_bias=1.5, seed=1)),
    ("gelu separate unscaled", dict(activation="gelu", share=False, scale_embedding=False, seed=2, d_model=24,
                                    heads=3, ffn=40, layers=3)),
    ("relu save_pretrained names", dict(activation="relu", names="save_pretrained", seed=3, eos_bias=2.5)),
    ("swish f16", dict(dtype="f16", names="all", seed=4, eos_bias=1.0)),
    ("swish converted bin", dict(binary=True, seed=5, eos_bias=2.0, dec_layers=1)),
    ("swish converted sharded bin", dict(binary="sharded", seed=10, eos_bias=1.0)),
    ("swish separate vocabularies", dict(separate_vocabs=True, seed=6, eos_bias=1.0)),
]


def compare_logits(what, got, want, atol=FORWARD_ATOL):
    if got.dtype != np.float32 or got.shape != want.shape:
        return bad(what, "vkformer wrote dtype %s shape %s, expected float32 %s" % (got.dtype, got.shape, want.shape))
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    if np.isnan(err).any():
        return bad(what, "NaN in the logits")
    idx = np.unravel_index(int(np.argmax(err)), err.shape)
    worst = float(err[idx])
    if worst > atol:
        return bad(what, "max abs error %.3g > %.1g at (row %d, col %d): expected %.9g, got %.9g"
                   % (worst, atol, idx[0], idx[1], want[idx], got[idx]))
    ok("%s (max abs error %.2g)" % (what, worst))


def check_forward(label, model, path, src, tgt, tmp, timeout=300):
    what = "%s: forward src %d tgt %d" % (label, len(src), len(tgt))
    out = os.path.join(tmp, "logits.npy")
    if os.path.exists(out):
        os.unlink(out)
    rc, _, err = run_vkformer(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt),
                               "--out", out], timeout=timeout)
    if rc != 0:
        return bad(what, "vkformer forward exited %d: %s" % (rc, " | ".join(err[-5:])))
    compare_logits(what, np.load(out, allow_pickle=False), marian_ref.forward_logits(model, src, tgt))


def dequantize_rows(w):
    """w as --precision int8 sees it: q * scale per row (lib.quantize_rows), as a float32 tensor."""
    q, scale = lib.quantize_rows(w)
    return torch.from_numpy((q * scale[:, None]).astype(np.float32))


def int8_reference(path):
    """marian_ref's model of the folder with every matrix --precision int8 quantizes (2-D .weight tensors:
    projections, fc1/fc2, embeddings and lm_head; not the positional tables) dequantized per row."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    w = marian_ref.load_weights(path)
    for name, t in list(w.items()):
        if t.dim() == 2 and name.endswith(".weight") and "embed_positions" not in name:
            w[name] = dequantize_rows(t)
    m = marian_ref.Marian(cfg, w)
    m.generation_config = marian_ref.load_folder(path).generation_config
    return m


def check_int8(label, path, tmp, rng, lengths=((1, 1), (12, 7), (40, 33))):
    deq = int8_reference(path)
    out = os.path.join(tmp, "int8.npy")
    for s, t in lengths:
        src, tgt = random_pair(rng, deq, s, t)
        what = "%s: forward --precision int8 src %d tgt %d vs dequantized weights" % (label, s, t)
        if os.path.exists(out):
            os.unlink(out)
        rc, _, err = run_vkformer(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt),
                                   "--out", out, "--precision", "int8"])
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-5:])))
            continue
        compare_logits(what, np.load(out, allow_pickle=False), marian_ref.forward_logits(deq, src, tgt))
    src = random_pair(rng, deq, 15, 1)[0]
    what = "%s: generate --precision int8 --beam 1 src %d" % (label, len(src))
    rc, text, err = run_vkformer(["generate", "--model", path, "--src", ids_arg(src), "--max-new", "12", "--beam",
                                  "1", "--precision", "int8"])
    want = marian_ref.greedy(deq, src, 12)
    got = parse_ids(text.splitlines()[0].split("\t")[0]) if rc == 0 and text.strip() else None
    if rc != 0:
        bad(what, "exit %d: %s" % (rc, " | ".join(err[-5:])))
    elif got != want:
        bad(what, "expected %s\ngot      %s" % (want, got))
    else:
        ok("%s: %s" % (what, want))


def generate_cli(path, src, max_new, beam):
    args = ["generate", "--model", path, "--src", ids_arg(src), "--max-new", str(max_new)]
    if beam is not None:
        args += ["--beam", str(beam)]
    rc, out, err = run_vkformer(args)
    if rc != 0:
        return None, "vkformer %s exited %d: %s" % (" ".join(args[4:]), rc, " | ".join(err[-5:]))
    lines = out.splitlines()
    if len(lines) != 1:
        return None, "expected one line of ids, got %r" % out
    return parse_ids(lines[0].split("\t")[0]), None


def check_generate(label, model, path, src, max_new, beam):
    what = "%s: generate src %d max-new %d beam %d" % (label, len(src), max_new, beam)
    got, err = generate_cli(path, src, max_new, beam)
    if err:
        return bad(what, err)
    if beam == 1:
        want = marian_ref.greedy(model, src, max_new)
    else:
        want = marian_ref.beam_search(model, src, beam, max_new)[0]
    if got != want:
        return bad(what, "expected %s\ngot      %s" % (want, got))
    ok("%s: %s" % (what, want))


def check_default_beam(label, path, src, max_new):
    what = "%s: generate without --beam (generation_config num_beams 4) equals --beam 4" % label
    a, e1 = generate_cli(path, src, max_new, None)
    b, e2 = generate_cli(path, src, max_new, 4)
    if e1 or e2:
        return bad(what, e1 or e2)
    if a != b:
        return bad(what, "default %s, --beam 4 %s" % (a, b))
    ok(what)


def random_pair(rng, model, s, t):
    V, Vs = model.vocab_size, model.enc_emb.shape[0]   # target and source vocabularies (separate_vocabs)
    src = [rng.randrange(2, Vs - 1) for _ in range(s - 1)] + [model.eos]
    tgt = [model.start] + [rng.randrange(0, V - 1) for _ in range(t - 1)]
    return src, tgt


def make(tmp, name, opts):
    path = os.path.join(tmp, name)
    gen_marian.make_folder(path, **opts)
    if opts.get("binary"):
        p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_hf.py"), path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            bad("%s: tools/convert_hf.py" % name, p.stderr.decode())
        for n in os.listdir(path):   # the .bin files go: vkformer and the reference read the conversion
            if n.startswith("pytorch_model"):
                os.unlink(os.path.join(path, n))
    return path


def check_tokenizer(label, path):
    tok = marian_ref.Tokenizer(path)
    texts = gen_marian.sample_sentences(seed=31, n=5) + ["Unknown ZEBRA 42 €!", "  two  spaces ", "x"]
    for text in texts:
        what = "%s: tokenize %r" % (label, text)
        rc, out, err = run_vkformer(["tokenize", "--model", path, text])
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
            continue
        want = tok.encode(text)
        got = parse_ids(out.strip().splitlines()[0] if out.strip() else "")
        if got != want:
            bad(what, "expected %s\ngot      %s" % (want, got))
        else:
            ok("%s: %s" % (what, want))
    rng = random.Random(8)
    pad = tok.vocab["<pad>"]
    cases = [tok.encode(t) for t in gen_marian.sample_sentences(seed=32, n=3)]
    cases += [tok.encode(t) for t in gen_marian.sample_sentences(seed=33, n=2, target=True)]
    cases += [[pad] + [rng.randrange(0, len(tok.tvocab)) for _ in range(10)] + [0]]
    for ids in cases:
        what = "%s: tokenize --decode %s" % (label, ids_arg(ids))
        rc, out, err = run_vkformer(["tokenize", "--model", path, "--decode", ids_arg(ids)])
        want = tok.decode(ids)
        got = out[:-1] if out.endswith("\n") else out
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
        elif got != want:
            bad(what, "expected %r\ngot      %r" % (want, got))
        else:
            ok("%s: %r" % (what, want))


def check_translate(label, model, path, tmp, max_new=16):
    tok = marian_ref.Tokenizer(path)
    lines = gen_marian.sample_sentences(seed=41, n=5)
    inp = os.path.join(tmp, "input.txt")
    with open(inp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    what = "%s: translate --batch 3 --beam 1 --max-new %d of %d lines" % (label, max_new, len(lines))
    rc, out, err = run_vkformer(["translate", "--model", path, "--input", inp, "--batch", "3", "--beam", "1",
                                 "--max-new", str(max_new)])
    if rc != 0:
        return bad(what, "exit %d: %s" % (rc, " | ".join(err[-5:])))
    want = [tok.decode(marian_ref.greedy(model, tok.encode(l), max_new)) for l in lines]
    got = out.split("\n")
    if got and got[-1] == "":
        got = got[:-1]
    if got != want:
        return bad(what, "expected %r\ngot      %r" % (want, got))
    ok(what)


def check_big(tmp, quick):
    label = "vocab 40000 x d_model 1024 (embedding 163840000 bytes)"
    t0 = time.time()
    path = os.path.join(tmp, "big")
    gen_marian.make_folder(path, d_model=1024, layers=1, heads=8, ffn=64, pad_vocab_to=40000, seed=9,
                           max_positions=32)
    model = marian_ref.load_folder(path)
    print("%s: folder and reference ready (%.1f s)" % (label, time.time() - t0))
    src = [5, 17, 33, 0]
    tgt = [model.start, 7, 9]
    t1 = time.time()
    try:
        check_forward(label, model, path, src, tgt, tmp, timeout=BIG_QUICK_LIMIT_S if quick else 600)
    except subprocess.TimeoutExpired:
        if quick:
            print("%s: SKIPPED with --quick: forward took more than %d s" % (label, BIG_QUICK_LIMIT_S))
            return
        return bad(label, "forward timed out")
    print("%s: forward %.1f s" % (label, time.time() - t1))
    check_generate(label, model, path, src, 4, 1)
    shutil.rmtree(path)


def check_attention_variants(label, model, path, tmp, rng):
    """--attention on a Marian folder: local and strided windows wider than the sequence are dense attention,
    so the logits match the reference; bigbird and lsh run (finite logits); beam search with local:4 runs."""
    src, tgt = random_pair(rng, model, 20, 9)
    want = marian_ref.forward_logits(model, src, tgt)
    out = os.path.join(tmp, "variant.npy")
    for variant, exact in (("local:64", True), ("strided:64:64", True), ("bigbird:4:1:1", False), ("lsh:2:8", False)):
        what = "%s: forward --attention %s" % (label, variant)
        if os.path.exists(out):
            os.unlink(out)
        rc, _, err = run_vkformer(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt),
                                   "--out", out, "--attention", variant])
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
            continue
        got = np.load(out, allow_pickle=False)
        if exact:
            compare_logits(what + " (window covers the sequence: dense)", got, want)
        elif got.shape != want.shape or not np.isfinite(got).all():
            bad(what, "shape %s, finite %s" % (got.shape, bool(np.isfinite(got).all())))
        else:
            ok("%s (max difference from dense %.3g)" % (what, float(np.abs(got - want).max())))
    what = "%s: generate --attention local:4 --beam 4" % label
    rc, out_text, err = run_vkformer(["generate", "--model", path, "--src", ids_arg(src), "--max-new", "8", "--beam",
                                      "4", "--attention", "local:4"])
    if rc == 0 and len(out_text.splitlines()) == 1:
        ok(what)
    else:
        bad(what, "exit %d, %d lines: %s" % (rc, len(out_text.splitlines()), " | ".join(err[-3:])))


def check_split(tmp):
    """  - `--attention local:64` and `strided:64:64` (windows covering the sequence: dense attention) against
    the reference; bigbird and lsh run with finite logits; beam search with local:4 runs.
A small folder under VKFORMER_MAX_BINDING=16384: the embedding (>= 150 x 32 floats, >= 19200 bytes) and
    the tied generator are held in parts, and generating five sources with 4 beams needs tensors past the
    limit (cross-attention keys/values of 20 rows), so the batch runs in halves; results must not change."""
    label = "split under VKFORMER_MAX_BINDING=16384"
    path = os.path.join(tmp, "split")
    gen_marian.make_folder(path, d_model=32, layers=2, heads=4, ffn=64, seed=12, max_positions=64,
                           pad_vocab_to=150)
    model = marian_ref.load_folder(path)
    tok = marian_ref.Tokenizer(path)
    os.environ["VKFORMER_MAX_BINDING"] = "16384"
    try:
        rng = random.Random(13)
        for s, t in ((9, 6), (30, 12)):
            src, tgt = random_pair(rng, model, s, t)
            check_forward(label, model, path, src, tgt, tmp)
        check_int8(label, path, tmp, random.Random(14), lengths=((30, 12),))
        texts = gen_marian.sample_sentences(seed=70, n=5)
        srcs = [tok.encode(x)[:11] for x in texts]  # 4 beams of one source of <= 12 tokens fit the limit
        srcs = [x if x[-1] == model.eos else x + [model.eos] for x in srcs]
        inp = os.path.join(tmp, "split_ids.txt")
        with open(inp, "w") as f:
            f.write("".join(ids_arg(x) + "\n" for x in srcs))
        what = "%s: generate --input (5 sources) --beam 4 --max-new 12" % label
        rc, out, err = run_vkformer(["generate", "--model", path, "--input", inp, "--beam", "4", "--max-new", "12",
                                     "--verbose"])
        notes = [l for l in err if "parts" in l or "batches of" in l]
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-5:])))
        elif not any(" parts " in l for l in notes) or not any("batches of" in l for l in notes):
            bad(what, "expected the library to report the embedding in parts and batches run in halves, got %r"
                % notes)
        else:
            got = [parse_ids(l) for l in out.splitlines()]
            want = [marian_ref.beam_search(model, x, 4, 12)[0] for x in srcs]
            if got != want:
                bad(what, "expected %s\ngot      %s" % (want, got))
            else:
                ok("%s (%s)" % (what, "; ".join(n.replace("vkformer: info: ", "") for n in notes[:2])))
    finally:
        del os.environ["VKFORMER_MAX_BINDING"]
    shutil.rmtree(path)


def check_malformed(tmp):
    inp = os.path.join(tmp, "one_line.txt")
    with open(inp, "w") as f:
        f.write("The house sees a dog.\n")
    for kind in sorted(gen_marian.MALFORMED):
        path = os.path.join(tmp, "bad_" + kind)
        keywords = gen_marian.make_malformed(path, kind, layers=1, d_model=16, heads=2, ffn=16)
        what = "malformed %s (%s)" % (kind, gen_marian.MALFORMED[kind][0])
        rc, out, err = run_vkformer(["translate", "--model", path, "--input", inp, "--beam", "1", "--max-new", "4"])
        if rc == 0 or len(err) != 1 or not any(k in err[0] for k in keywords):
            bad(what, "exit %d, stderr %r (want one line naming one of %s)" % (rc, err, keywords))
        else:
            ok("%s: %s" % (what, err[0]))
        shutil.rmtree(path)


def self_check(tmp):
    """The reference against itself and known properties (no vkformer)."""
    rng = random.Random(5)
    for label, opts in CONFIGS:
        path = os.path.join(tmp, label.replace(" ", "_"))
        gen_marian.make_folder(path, **opts)
        if opts.get("binary") is True:
            m_bin = marian_ref.load_folder(path)
            p = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_hf.py"), path],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            os.rename(os.path.join(path, "pytorch_model.bin"), os.path.join(tmp, "saved.bin"))
            m = marian_ref.load_folder(path)
            src, tgt = random_pair(rng, m, 9, 7)
            e = float(np.abs(marian_ref.forward_logits(m, src, tgt) - marian_ref.forward_logits(m_bin, src, tgt)).max())
            (ok if p.returncode == 0 and e == 0.0 else bad)("%s: convert_hf.py output equals the .bin (%g)" % (label, e))
            p2 = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_hf.py"), path],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            lines = p2.stderr.decode().splitlines()
            (ok if p2.returncode == 1 and len(lines) == 1 else bad)("%s: convert_hf.py refuses: %s" % (label, lines))
        m = marian_ref.load_folder(path)
        tok = marian_ref.Tokenizer(path)
        for text in gen_marian.sample_sentences(seed=51, n=3):
            src = tok.encode(text)
            g = marian_ref.greedy(m, src, 10)
            b1 = marian_ref.beam_search(m, src, 1, 10)[0]
            (ok if g == b1 else bad)("%s: beam 1 == greedy (%s / %s)" % (label, g, b1))
            logits = marian_ref.forward_logits(m, src, [m.start] + g)
            steps = [int(torch.argmax(marian_ref.process(m, torch.from_numpy(logits[i:i + 1]), i + 1, 11)))
                     for i in range(len(g))]
            (ok if steps == g else bad)("%s: greedy follows the forward's processed argmax" % label)
            (ok if len(g) <= 9 and m.pad not in g else bad)("%s: greedy <= max_new-1 ids, no pad" % label)
            if not opts.get("separate_vocabs"):   # else source ids are not target ids
                dec = tok.decode(src)
                (ok if dec == text.strip() else bad)("%s: tokenizer round trip %r -> %r" % (label, text, dec))
        for S, T in ((1, 1), (20, 11)):
            src, tgt = random_pair(rng, m, S, T)
            a = marian_ref.forward_logits(m, src, tgt)
            b = marian_ref.forward_logits(m, src, tgt[:max(1, T - 3)])
            e = float(np.abs(a[:b.shape[0]] - b).max())
            (ok if e < 1e-5 else bad)("%s: causal (prefix logits unchanged, %g)" % (label, e))
    for kind in ("bad-shape", "missing-tensor", "bad-activation", "bad-model-type"):
        path = os.path.join(tmp, "bad_" + kind)
        gen_marian.make_malformed(path, kind, layers=1, d_model=16, heads=2, ffn=16)
        try:
            marian_ref.load_folder(path)
            bad("reference rejects malformed %s" % kind)
        except (KeyError, ValueError) as e:
            ok("reference rejects malformed %s: %s" % (kind, e))
    print("test_marian --self-check: %d passed, %d failed" % (lib.passed, lib.failed))
    return 1 if lib.failed else 0


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    flags = [a for a in sys.argv[1:] if a.startswith("--")]
    lib.VERBOSE = "--verbose" in flags
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    if "--self-check" in flags:
        with tempfile.TemporaryDirectory(prefix="vkf-marian-") as tmp:
            return self_check(tmp)
    if len(args) != 1 or any(f not in ("--quick", "--verbose") for f in flags):
        print("usage: %s /path/to/vkformer [--quick] [--verbose] | --self-check" % sys.argv[0], file=sys.stderr)
        return 2
    VKFORMER = lib.VKFORMER = os.path.abspath(args[0])
    quick = "--quick" in flags
    if not os.access(VKFORMER, os.X_OK):
        print("test_marian: %s is not an executable" % VKFORMER, file=sys.stderr)
        return 1
    print("vkformer %s, VK_ICD_FILENAMES=%s, torch %s%s" % (VKFORMER, os.environ.get("VK_ICD_FILENAMES", "(unset)"),
                                                          torch.__version__, ", quick" if quick else ""))
    rng = random.Random(77)
    t0 = time.time()
    lengths = [(1, 1), (12, 7), (64, 64)] if quick else [(1, 1), (3, 5), (12, 7), (33, 40), (64, 64)]
    max_news = (1, 12) if quick else (1, 2, 12, 30)  # the second source: only the next-to-last
    with tempfile.TemporaryDirectory(prefix="vkf-marian-") as tmp:
        for i, (label, opts) in enumerate(CONFIGS):
            path = make(tmp, "m%d" % i, opts)
            model = marian_ref.load_folder(path)
            tok = marian_ref.Tokenizer(path)
            for s, t in lengths:
                src, tgt = random_pair(rng, model, s, t)
                check_forward(label, model, path, src, tgt, tmp)
            texts = gen_marian.sample_sentences(seed=60 + i, n=2)
            for j, text in enumerate(texts):
                src = tok.encode(text)
                for max_new in (max_news if j == 0 else max_news[-2:-1]):
                    check_generate(label, model, path, src, max_new, 1)
                    check_generate(label, model, path, src, max_new, 4)
            if i < 3:
                check_int8(label, path, tmp, random.Random(100 + i))  # its own ids: the others' stay as they were
            if opts.get("separate_vocabs"):
                check_tokenizer(label, path)
                check_translate(label, model, path, tmp)
            if i == 0:
                check_default_beam(label, path, tok.encode(texts[0]), 12)
                check_tokenizer(label, path)
                check_translate(label, model, path, tmp)
                check_attention_variants(label, model, path, tmp, rng)
            shutil.rmtree(path)
            print("%s: done (%.1f s)" % (label, time.time() - t0))
            sys.stdout.flush()
        check_split(tmp)
        print("split: done (%.1f s)" % (time.time() - t0))
        check_malformed(tmp)
        print("malformed folders: done (%.1f s)" % (time.time() - t0))
        check_big(tmp, quick)
    print("test_marian: %d passed, %d failed (%.1f s)" % (lib.passed, lib.failed, time.time() - t0))
    return 1 if lib.failed else 0


if __name__ == "__main__":
    sys.exit(main())
