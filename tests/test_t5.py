#!/usr/bin/python3
"""T5, Flan-T5, mT5 and LongT5 folders against the PyTorch reference (tests/t5_ref.py) and transformers 5.12's
tokenization (tests/data/t5/tokenizer.json.xz, made by tools/make_t5_cases.py).

usage: test_t5.py VKFORMER [--quick]

On random-weight folders written by tests/gen_t5.py, in the hub's form and in save_pretrained's:
  - forward logits (teacher forcing, raw ids) within 1e-3 of the reference: t5 v1.0 (ReLU, tied, scaled output),
    Flan-T5 style (gated-gelu, its own lm_head, num_decoder_layers apart), mT5, LongT5 local and
    transient-global; sources up to 300 tokens (every relative distance to 300); f16 files and the tied
    aliases; other bucket settings;
  - greedy and beam-4 generation (translate --json, batched sources of different lengths): ids identical to
    the reference's, the source ids those of transformers' tokenizer, the text the decode of the ids;
    generation_config.json's num_beams and max_new_tokens honoured;
  - tokenization: every golden text (773) and id list (405) as transformers 5.12 encodes and decodes them,
    through spiece.model, a hub-style (legacy) tokenizer.json and the tokenizer.json save_pretrained writes;
  - LongT5: the model's own encoder attention runs by default (local:R, tglobal:R:G), differs from the same
    model forced to dense, and equals it named explicitly;
  - every attention variant that takes T5's relative position bias runs (dense-naive's logits equal dense's),
    lsh and lowrank self-attention are refused with a message, lowrank cross-attention runs;
  - fp16: --precision f16 keeps activations F32: a folder whose FFN outputs pass 65504 (checked on the
    reference) gives finite logits within 1e-3 of the reference on the file's f16 weights; int8 finite;
  - text to text: translate "summarize: ..." prints a line; malformed folders fail with one line.
The device is whatever VK_ICD_FILENAMES selects; the validation layer is on (VKFORMER_VALIDATE=1).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import gen_t5  # noqa: E402
import marian_ref  # noqa: E402
import t5_ref  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, parse_ids  # noqa: E402
import vkf_testlib  # noqa: E402

ATOL = 1e-3


class Run:
    def __init__(self, p):
        self.returncode, self.stdout = p.returncode, p.stdout
        self.stderr = "\n".join(l for l in p.stderr.splitlines() if "WARNING: UNSUPPORTED" not in l)


def run(args, timeout=600, stdin=None):
    env = dict(os.environ, VKFORMER_VALIDATE="1")
    return Run(subprocess.run([vkf_testlib.VKFORMER] + args, capture_output=True, text=True, timeout=timeout,
                              input=stdin, env=env))


def forward(path, src, tgt, tmp, extra=()):
    out = os.path.join(tmp, "logits.npy")
    p = run(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt), "--out", out] + list(extra))
    if p.returncode != 0:
        return None, p.stderr.strip()
    return np.load(out), ""


def check_forward(label, path, ref, rng, tmp, V, quick, extra=(), atol=ATOL):
    worst = 0.0
    shapes = [(1, 1), (7, 5), (40, 13)] + ([] if quick else [(300, 9)])
    for s_len, t_len in shapes:
        src = [int(x) for x in rng.integers(3, V, s_len)]
        tgt = [ref.start] + [int(x) for x in rng.integers(3, V, t_len - 1)]
        if t_len > 3:
            tgt[2] = ref.pad                      # a pad id inside the target is just a token
        got, err = forward(path, src, tgt, tmp, extra)
        if got is None:
            bad("%s forward %dx%d" % (label, s_len, t_len), err)
            return None
        want = marian_ref.forward_logits(ref, src, tgt)
        e = float(np.abs(got - want).max())
        worst = max(worst, e)
        if not np.all(np.isfinite(got)) or e > atol:
            bad("%s forward %dx%d" % (label, s_len, t_len), "max abs diff %.3g" % e)
            return None
    ok("%s forward logits, sources up to %d tokens (worst %.2g)" % (label, shapes[-1][0], worst))
    return worst


def check_generate(label, path, ref, texts, golden):
    """translate --json of texts in one batch: source ids as transformers', greedy / beam-4 ids as the
    reference's, the text the decode of the ids."""
    ids_of = dict(zip(golden["texts"], golden["ids"]))
    for beams in (1, 4):
        p = run(["translate", "--model", path, "--beam", str(beams), "--max-new", "12", "--input", "-", "--json"],
                stdin="\n".join(texts) + "\n")
        if p.returncode != 0:
            bad("%s translate --beam %d" % (label, beams), p.stderr.strip())
            continue
        recs = [json.loads(line) for line in p.stdout.split("\n") if line.strip()]
        dec = run(["tokenize", "--model", path, "--decode", "--input", "-"],
                  stdin="\n".join(ids_arg(r["ids"]) if r["ids"] else "" for r in recs) + "\n")
        decoded = dec.stdout.split("\n")
        for k, (text, r) in enumerate(zip(texts, recs)):
            if r["src"] != ids_of[text]:
                bad("%s source ids of %r" % (label, text), "%s, transformers %s" % (r["src"], ids_of[text]))
                break
            want = marian_ref.greedy(ref, r["src"], 12) if beams == 1 else marian_ref.beam_search(ref, r["src"], beams, 12)[0]
            if r["ids"] != want:
                bad("%s %s of %r" % (label, "greedy" if beams == 1 else "beam", text), "%s, reference %s" % (r["ids"], want))
                break
            if r["ids"] and r["translation"] != decoded[k]:
                bad("%s text of %r" % (label, text), "%r, decode %r" % (r["translation"], decoded[k]))
                break
        else:
            ok("%s translate --beam %d: %d texts in one batch, ids as the reference, sources as transformers" %
               (label, beams, len(texts)))


def check_tokenizer(label, path, golden, quick):
    texts, ids = golden["texts"], golden["ids"]
    if quick:
        texts, ids = texts[:150], ids[:150]
    p = run(["tokenize", "--model", path, "--input", "-"], stdin="\n".join(texts) + "\n")
    if p.returncode != 0:
        bad("%s tokenize" % label, p.stderr.strip())
        return
    for text, want, line in zip(texts, ids, p.stdout.split("\n")):
        if parse_ids(line) != want:
            bad("%s tokenize %r" % (label, text), "%s, transformers %s" % (line, want))
            return
    lists = golden["decode"]
    p = run(["tokenize", "--model", path, "--decode", "--input", "-"], stdin="\n".join(ids_arg(d[0]) for d in lists) + "\n")
    got = p.stdout.split("\n")
    wrong = [(d, g) for d, g in zip(lists, got) if g != d[1]]
    if p.returncode != 0 or wrong:
        bad("%s decode" % label, p.stderr.strip() or "%s: %r, transformers %r" % (wrong[0][0][0], wrong[0][1],
                                                                                wrong[0][0][1]))
        return
    ok("%s tokenizer: %d texts and %d id lists as transformers 5.12" % (label, len(texts), len(lists)))


def legacy_tokenizer_folder(src, out, golden):
    """src's model with the tokenizer.json older converters wrote (hub form of fast tokenizers)."""
    import shutil
    shutil.copytree(src, out)
    os.remove(os.path.join(out, "spiece.model"))
    j = json.loads(golden["saved"])
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}]}
    j["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        j["normalizer"], {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)


def check_variants(label, path, ref, tmp, V, rng, longt5_own=None):
    src = [int(x) for x in rng.integers(3, V, 30)]
    tgt = [ref.start] + [int(x) for x in rng.integers(3, V, 9)]
    base, err = forward(path, src, tgt, tmp)
    if base is None:
        bad("%s forward" % label, err)
        return
    variants = ["dense-naive", "local:4", "strided:2:3", "bigbird:4:1:1", "tglobal:3:4"]
    for variant in variants:
        got, err = forward(path, src, tgt, tmp, ["--attention", variant])
        if got is None:
            bad("%s --attention %s" % (label, variant), err)
        elif not np.all(np.isfinite(got)):
            bad("%s --attention %s" % (label, variant), "non-finite logits")
        elif variant == "dense-naive" and longt5_own is None and float(np.abs(got - base).max()) > 1e-4:
            bad("%s dense-naive against dense" % label, "max abs diff %.3g" % float(np.abs(got - base).max()))
        else:
            ok("%s --attention %s (with the relative position bias)" % (label, variant))
    for variant in ("lsh:2:8", "lowrank:8"):
        p = run(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt), "--out",
                 os.path.join(tmp, "x.npy"), "--attention", variant])
        lines = p.stderr.strip().splitlines()
        if p.returncode == 0 or len(lines) != 1 or "relative position bias" not in lines[0]:
            bad("%s --attention %s refused" % (label, variant), "exit %d, %r" % (p.returncode, p.stderr))
        else:
            ok("%s --attention %s refused: %s" % (label, variant, lines[0][-90:]))
    got, err = forward(path, src, tgt, tmp, ["--cross-attention", "lowrank:64"])
    if got is None or float(np.abs(got - base).max()) > 1e-4:
        bad("%s --cross-attention lowrank:64 (a permutation: dense)" % label, err or "differs")
    else:
        ok("%s --cross-attention lowrank:64 equals dense (T5 has no bias in cross-attention)" % label)


def check_longt5_own(label, path, ref, tmp, V, rng, own):
    """LongT5's own encoder attention by default (its decoder dense); forced dense differs."""
    src = [int(x) for x in rng.integers(3, V, 60)]
    tgt = [ref.start] + [int(x) for x in rng.integers(3, V, 6)]
    want = marian_ref.forward_logits(ref, src, tgt)
    default, e1 = forward(path, src, tgt, tmp)
    dense, e3 = forward(path, src, tgt, tmp, ["--attention", "dense"])
    if default is None or dense is None:
        bad("%s own attention" % label, e1 or e3)
        return
    d_ref, d_dense = float(np.abs(default - want).max()), float(np.abs(default - dense).max())
    if d_ref > ATOL or d_dense < 1e-3:
        bad("%s own attention" % label, "default vs reference %.3g, vs dense %.3g" % (d_ref, d_dense))
    else:
        ok("%s runs its own %s in the encoder by default (= the reference, %.2g); forced dense moves the logits by "
           "%.3g" % (label, own, d_ref, d_dense))
    p = run(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt), "--out",
             os.path.join(tmp, "x.npy"), "--json"])
    used = json.loads(p.stdout.splitlines()[0])["attention_used"] if p.returncode == 0 else None
    if not used or used.get("encoder") != own or used.get("decoder") != "dense":
        bad("%s attention_used" % label, "%s" % used)
    else:
        ok("%s --json attention_used: encoder %s, decoder dense" % (label, own))


def check_f16(path_f16, tmp, rng, info, have_f16):
    """The overflow folder: FFN outputs past fp16's range; --precision f16 and int8 keep them finite."""
    ref = t5_ref.load_folder(path_f16)
    V = info["vocab_size"]
    src = [int(x) for x in rng.integers(3, V, 20)]
    tgt = [ref.start] + [int(x) for x in rng.integers(3, V, 7)]
    # the reference's residual stream passes 65504: the case is real
    biggest = [0.0]
    orig = ref._ffn

    def spy(x, prefix):
        y = orig(x, prefix)
        biggest[0] = max(biggest[0], float(y.abs().max()))
        return y
    ref._ffn = spy
    want = marian_ref.forward_logits(ref, src, tgt)
    ref._ffn = orig
    if biggest[0] <= 65504:
        bad("overflow folder", "its FFN outputs reach only %.3g" % biggest[0])
        return
    if not have_f16:
        p = run(["forward", "--model", path_f16, "--src", ids_arg(src), "--tgt", ids_arg(tgt), "--out",
                 os.path.join(tmp, "x.npy"), "--precision", "f16"])
        if p.returncode != 1 or "16-bit" not in p.stderr:
            bad("--precision f16 without 16-bit storage", "exit %d %r" % (p.returncode, p.stderr))
        else:
            ok("--precision f16 refused on a device without 16-bit storage (the fp16 overflow cases need one): "
               "%s" % p.stderr.strip()[-80:])
        return
    for precision, atol in (("f16", ATOL), ("int8", None)):
        got, err = forward(path_f16, src, tgt, tmp, ["--precision", precision, "--verbose"])
        if got is None:
            bad("overflow folder --precision %s" % precision, err)
            continue
        finite = bool(np.all(np.isfinite(got)))
        e = float(np.abs(got - want).max())
        if not finite or (atol is not None and e > atol):
            bad("overflow folder --precision %s" % precision, "finite %s, max abs diff %.3g" % (finite, e))
        else:
            ok("overflow folder (FFN outputs to %.3g, past fp16's 65504) --precision %s: finite%s" %
               (biggest[0], precision, ", within %.2g of the reference (%.2g)" % (atol, e) if atol else
                " (int8 weights: %.3g from the f16 reference)" % e))
    p = run(["translate", "--model", path_f16, "--precision", "f16", "--beam", "4", "--max-new", "6", "--json",
             "the house is big"])
    if p.returncode != 0:
        bad("overflow folder translate --precision f16", p.stderr.strip())
    else:
        r = json.loads(p.stdout.splitlines()[0])
        want_ids = marian_ref.beam_search(ref, r["src"], 4, 6)[0]
        if r["ids"] != want_ids:
            bad("overflow folder beam search at f16", "%s, reference %s" % (r["ids"], want_ids))
        else:
            ok("overflow folder: beam search at --precision f16 gives the reference's ids")


def check_generation_config(path, tmp, golden):
    """generation_config.json's num_beams and max_new_tokens are the defaults."""
    gc_path = os.path.join(path, "generation_config.json")
    with open(gc_path) as f:
        gc = json.load(f)
    gc.update({"num_beams": 4, "max_new_tokens": 5})
    with open(gc_path, "w") as f:
        json.dump(gc, f)
    ref = t5_ref.load_folder(path)
    text = golden["texts"][0]
    p = run(["translate", "--model", path, "--json", text])
    if p.returncode != 0:
        bad("generation_config.json defaults", p.stderr.strip())
        return
    r = json.loads(p.stdout.splitlines()[0])
    want = marian_ref.beam_search(ref, r["src"], 4, 5)[0]
    if r["ids"] != want:
        bad("generation_config.json num_beams 4, max_new_tokens 5", "%s, reference %s" % (r["ids"], want))
    else:
        ok("generation_config.json num_beams 4 and max_new_tokens 5 are the defaults (%d ids)" % len(r["ids"]))


def check_text(path):
    p = run(["translate", "--model", path, "summarize: the house is big and the cat sees a small dog."])
    if p.returncode != 0 or len(p.stdout.splitlines()) != 1:
        bad("translate summarize:", "exit %d, %r %r" % (p.returncode, p.stdout, p.stderr))
    else:
        ok("translate --model FOLDER \"summarize: ...\": %r" % p.stdout.strip()[:60])


def check_malformed(tmp):
    for kind in gen_t5.MALFORMED:
        path = os.path.join(tmp, "bad-" + kind)
        words = gen_t5.make_malformed(path, kind)
        p = run(["translate", "--model", path, "the house"])
        lines = p.stderr.strip().splitlines()
        if p.returncode < 0 or p.returncode not in (1, 2) or len(lines) != 1 or not any(w in lines[0] for w in words):
            bad("malformed %s" % kind, "exit %d, stderr %r" % (p.returncode, p.stderr))
        else:
            ok("malformed %s: %s" % (kind, lines[0][-100:]))


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    vkf_testlib.VKFORMER = sys.argv[1]
    vkf_testlib.VERBOSE = True          # every check's line: the evidence of what was compared
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(3)
    golden = gen_t5.cases()
    info_p = run(["info", "--json"])
    devices = json.loads(info_p.stdout.splitlines()[0])["devices"] if info_p.returncode == 0 else []
    have_f16 = any(d.get("default") and d.get("storage_16bit") for d in devices)
    # (transformers' generate() masks source tokens equal to pad; vkformer attends to them, as model() does:
    # texts holding "<pad>" are left out of the generation checks, docs/models.md)
    texts = [t for t in golden["texts"][:4] + golden["texts"][20:27] if "<pad>" not in t]
    with tempfile.TemporaryDirectory(prefix="vkf-t5-") as tmp:
        for n, kind in enumerate(gen_t5.KINDS):
            for form in ("hub", "saved"):
                if quick and form == "saved" and kind != "flan":
                    continue
                path = os.path.join(tmp, "%s-%s" % (kind, form))
                info = gen_t5.make_folder(path, kind, form=form, seed=10 * n + (form == "saved"),
                                          dec_layers=3 if kind == "flan" else None)
                label = "%s (%s)" % (kind, form)
                ref = t5_ref.load_folder(path)
                check_forward(label, path, ref, rng, tmp, info["vocab_size"], quick)
                check_generate(label, path, ref, texts, golden)
                if form == "hub":
                    own = {"longt5-local": "local:3", "longt5-tglobal": "tglobal:3:4"}.get(kind)
                    if not quick or kind in ("t5", "longt5-tglobal"):
                        check_variants(label, path, ref, tmp, info["vocab_size"], rng, own)
                    if own:
                        check_longt5_own(label, path, ref, tmp, info["vocab_size"], rng, own)
        # the tokenizer through each folder form
        path = os.path.join(tmp, "t5-hub")
        check_tokenizer("spiece.model", path, golden, quick)
        legacy_tokenizer_folder(path, os.path.join(tmp, "legacy"), golden)
        check_tokenizer("hub tokenizer.json (legacy pipeline)", os.path.join(tmp, "legacy"), golden, quick)
        check_tokenizer("save_pretrained tokenizer.json", os.path.join(tmp, "flan-saved"), golden, quick)
        # f16 files with every tied alias; other buckets; LongT5 at its own sizes
        path = os.path.join(tmp, "aliases-f16")
        info = gen_t5.make_folder(path, "t5", dtype="f16", names="all", seed=77)
        check_forward("t5 (f16 file, tied aliases)", path, t5_ref.load_folder(path), rng, tmp, info["vocab_size"], quick)
        if not quick:
            path = os.path.join(tmp, "longt5-127")
            info = gen_t5.make_folder(path, "longt5-tglobal", radius=127, gblock=16, seed=78, d_model=64, heads=2,
                                      d_kv=32)
            ref = t5_ref.load_folder(path)
            src = [int(x) for x in rng.integers(3, info["vocab_size"], 700)]
            tgt = [0, 5, 6, 7]
            got, err = forward(path, src, tgt, tmp)
            e = float(np.abs(got - marian_ref.forward_logits(ref, src, tgt)).max()) if got is not None else None
            if got is None or e > ATOL:
                bad("longt5-tglobal radius 127, blocks of 16, 700 tokens", err or "max abs diff %.3g" % e)
            else:
                ok("longt5-tglobal radius 127, global blocks of 16 (LongT5's), 700 tokens: max abs diff %.2g" % e)
        # fp16 overflow, generation_config, text to text, malformed folders
        path = os.path.join(tmp, "overflow")
        info = gen_t5.make_folder(path, "flan", dtype="f16", overflow=True, seed=5)
        check_f16(path, tmp, rng, info, have_f16)
        check_generation_config(os.path.join(tmp, "flan-hub"), tmp, golden)
        check_text(os.path.join(tmp, "flan-saved"))
        check_malformed(tmp)
    print("test_t5: %d passed, %d failed" % (vkf_testlib.passed, vkf_testlib.failed))
    sys.exit(1 if vkf_testlib.failed else 0)


if __name__ == "__main__":
    main()
