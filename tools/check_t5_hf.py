#!/usr/bin/env python3
"""Holds tests/t5_ref.py (the tests' reference of T5, Flan-T5, mT5 and LongT5) against the real Hugging Face
transformers, on folders tests/gen_t5.py writes, in the hub's form and in save_pretrained's.

usage: ../shared/tools/hf_python.sh tools/check_t5_hf.py [--out DIR] [--quick]

For each kind (t5 v1.0, flan, mt5, longt5-local, longt5-tglobal) and form (hub, saved):
  - the reference's logits against AutoModelForSeq2SeqLM's (teacher forcing) on sources of 1 to 300 tokens
    (every relative distance up to 300, so every bucket boundary of 32 buckets / 128), batched with padding
    and an attention mask, and with other bucket settings (16 / 20, 64 / 1000);
  - LongT5 also at local_radius 127 and global_block_size 16 (LongT5's own) on 700 tokens, and the local
    model's encoder against the same weights run as plain attention with the window |i - j| <= radius (what
    vkformer runs for it), to show the two are one;
  - greedy and beam-4 generate() ids against the reference's on 10 sources;
  - transformers' save_pretrained of the hub folder against gen_t5's saved form: the config keys that decide
    the model (tie_word_embeddings, scale_decoder_outputs, feed_forward_proj, decoder_start_token_id) and the
    set of tensors written.
Tokenization is checked by tools/make_t5_cases.py (its golden data), not here.
Prints one line per check and a summary; exit 1 on any mismatch.
"""
import argparse
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gen_t5  # noqa: E402
import marian_ref  # noqa: E402
import t5_ref  # noqa: E402

failures = 0


def report(ok, what):
    global failures
    failures += 0 if ok else 1
    print("%s %s" % ("ok  " if ok else "FAIL", what))


def batch_logits(hf, ref, srcs, tgts):
    """Worst |reference - transformers| over a padded batch (attention masks for the sources)."""
    S, T = max(map(len, srcs)), max(map(len, tgts))
    ids = torch.tensor([s + [0] * (S - len(s)) for s in srcs])
    keep = torch.tensor([[1] * len(s) + [0] * (S - len(s)) for s in srcs])
    dec = torch.tensor([t + [0] * (T - len(t)) for t in tgts])
    with torch.no_grad():
        want = hf(input_ids=ids, attention_mask=keep, decoder_input_ids=dec).logits.numpy()
    worst = 0.0
    for b, (s, t) in enumerate(zip(srcs, tgts)):
        got = marian_ref.forward_logits(ref, s, t)
        worst = max(worst, float(np.abs(got - want[b, :len(t)]).max()))
    return worst


def check_folder(path, label, rng, quick, hf_cls):
    info_cfg = json.load(open(os.path.join(path, "config.json")))
    V = info_cfg["vocab_size"]
    hf = hf_cls.from_pretrained(path).eval()
    ref = t5_ref.load_folder(path)
    lengths = [(1, 1), (9, 6), (40, 17), (300, 41)] if not quick else [(1, 1), (9, 6), (130, 20)]
    worst = 0.0
    for s_len, t_len in lengths:
        srcs = [[int(x) for x in rng.integers(3, V, n)] + [1] for n in (s_len, max(1, s_len // 2), max(1, s_len - 3))]
        tgts = [[0] + [int(x) for x in rng.integers(3, V, t_len - 1)] for _ in srcs]
        worst = max(worst, batch_logits(hf, ref, srcs, tgts))
    report(worst < 1e-4, "%s logits (1..300 tokens, padded batches): worst |reference - transformers| %.3g" %
           (label, worst))
    same, cache = 0, True
    for i in range(10):
        src = [int(x) for x in rng.integers(3, V, 3 + 4 * i)] + [1]
        for beams in (1, 4):
            kw = dict(input_ids=torch.tensor([src]), num_beams=beams, max_new_tokens=10, do_sample=False,
                      decoder_start_token_id=ref.start)
            try:
                g = hf.generate(use_cache=cache, **kw)[0].tolist()[1:]
            except IndexError as e:
                # transformers 5.12 sizes the decoder's cache by num_layers: num_decoder_layers past it raises
                print("info %s: generate() with its cache raises IndexError (%s); compared without the cache" %
                      (label, e))
                cache = False
                g = hf.generate(use_cache=False, **kw)[0].tolist()[1:]
            if ref.eos in g:  # (beam search pads a finished sequence after its eos)
                g = g[:g.index(ref.eos)]
            mine = marian_ref.greedy(ref, src, 10) if beams == 1 else marian_ref.beam_search(ref, src, beams, 10)[0]
            same += g == mine
            if g != mine:
                # how close the step that differs was: the top two logits of the reference there
                k = next((j for j in range(min(len(g), len(mine))) if g[j] != mine[j]), min(len(g), len(mine)))
                lg = marian_ref.forward_logits(ref, src, [ref.start] + mine[:k])[-1]
                top = np.sort(lg)[-2:]
                print("info %s: beam %d source %s: transformers %s, reference %s (step %d: the reference's two best "
                      "logits %.6g, %.6g)" % (label, beams, src, g, mine, k, top[1], top[0]))
    report(same == 20, "%s generate: %d of 20 (10 sources, greedy and beam 4) identical" % (label, same))
    return hf


def local_equals_window(path, rng):
    """LongT5-local's encoder (blocks of r + 1, 3-block keys, locality mask) against plain attention with the
    window |i - j| <= r on the same weights and bias: what vkformer's local:r runs."""
    ref = t5_ref.load_folder(path)
    r = ref.radius
    V = ref.vocab_size
    src = torch.tensor([[int(x) for x in rng.integers(3, V, 257)]])
    blocked = ref.encode(src)
    ref.local = None
    ref.enc_attn = "LocalSelfAttention"
    S = src.shape[1]
    pos = torch.arange(S)
    window = torch.where((pos[None, :] - pos[:, None]).abs() <= r, 0.0, float("-inf"))[None, None]
    orig = ref._attend
    ref._attend = lambda x, kv, prefix, bias, mask: orig(x, kv, prefix, bias, window)
    plain = ref.encode(src)
    diff = float((blocked - plain).abs().max())
    report(diff < 1e-5, "longt5-local: the blocked encoder equals window attention |i - j| <= %d (max diff %.3g)" %
           (r, diff))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--kinds", default=",".join(gen_t5.KINDS))
    a = ap.parse_args()
    import transformers
    from transformers import AutoModelForSeq2SeqLM
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    tmp = a.out or tempfile.mkdtemp(prefix="check-t5-")
    rng = np.random.default_rng(11)
    for kind in a.kinds.split(","):
        for form in ("hub", "saved"):
            path = os.path.join(tmp, "%s-%s" % (kind, form))
            gen_t5.make_folder(path, kind, form=form, seed=3 + len(kind), dec_layers=3 if kind == "flan" else None)
            hf = check_folder(path, "%s (%s)" % (kind, form), rng, a.quick, AutoModelForSeq2SeqLM)
            if form == "hub":
                saved = path + "-resaved"
                hf.save_pretrained(saved)
                mine = json.load(open(os.path.join(tmp, "%s-saved" % kind, "config.json"))) if os.path.exists(
                    os.path.join(tmp, "%s-saved" % kind, "config.json")) else None
                theirs = json.load(open(os.path.join(saved, "config.json")))
                from safetensors import safe_open
                with safe_open(os.path.join(saved, "model.safetensors"), "pt") as f:
                    has_head = "lm_head.weight" in f.keys()
                print("info %s: transformers saves tie_word_embeddings %s, scale_decoder_outputs %s, lm_head.weight "
                      "%s, decoder_start_token_id %s" % (kind, theirs.get("tie_word_embeddings"),
                                                         theirs.get("scale_decoder_outputs"),
                                                         "stored" if has_head else "not stored",
                                                         theirs.get("decoder_start_token_id")))
                gen_t5.make_folder(os.path.join(tmp, "%s-saved" % kind), kind, form="saved", seed=1)
                mine = json.load(open(os.path.join(tmp, "%s-saved" % kind, "config.json")))
                keys = ("tie_word_embeddings", "scale_decoder_outputs", "feed_forward_proj", "model_type",
                        "encoder_attention_type")
                report(all(mine.get(k) == theirs.get(k) for k in keys),
                       "%s: gen_t5's saved config agrees with transformers' save on %s" % (kind, ", ".join(keys)))
    # LongT5 at its own sizes, and other bucket settings
    for kind in ("longt5-local", "longt5-tglobal"):
        path = os.path.join(tmp, kind + "-127")
        gen_t5.make_folder(path, kind, radius=127, gblock=16, seed=8)
        hf = AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        ref = t5_ref.load_folder(path)
        V = ref.vocab_size
        srcs = [[int(x) for x in rng.integers(3, V, n)] for n in ((700, 333, 17) if not a.quick else (300, 17))]
        tgts = [[0] + [int(x) for x in rng.integers(3, V, 12)] for _ in srcs]
        w = batch_logits(hf, ref, srcs, tgts)
        report(w < 1e-4, "%s radius 127, global blocks of 16, sources of %s tokens: worst %.3g" %
               (kind, "/".join(str(len(s)) for s in srcs), w))
        if kind == "longt5-local":
            local_equals_window(path, rng)
    for nb, md in ((16, 20), (64, 1000)):
        path = os.path.join(tmp, "t5-buckets-%d-%d" % (nb, md))
        gen_t5.make_folder(path, "t5", seed=9)
        cfg = json.load(open(os.path.join(path, "config.json")))
        cfg.update({"relative_attention_num_buckets": nb, "relative_attention_max_distance": md})
        json.dump(cfg, open(os.path.join(path, "config.json"), "w"))
        w = gen_t5.gen_marian.read_safetensors(os.path.join(path, "model.safetensors"))
        for n in list(w):
            if n.endswith("relative_attention_bias.weight"):
                w[n] = np.random.default_rng(nb).standard_normal((nb, w[n].shape[1])).astype(np.float32)
        gen_t5.gen_marian.write_safetensors(os.path.join(path, "model.safetensors"), w)
        hf = AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        ref = t5_ref.load_folder(path)
        srcs = [[int(x) for x in rng.integers(3, ref.vocab_size, 1200 if not a.quick else 300)]]
        tgts = [[0] + [int(x) for x in rng.integers(3, ref.vocab_size, 30)]]
        err = batch_logits(hf, ref, srcs, tgts)
        report(err < 1e-4, "t5 with %d buckets, max distance %d, %d tokens: worst %.3g" % (nb, md, len(srcs[0]), err))
    print("check_t5_hf: %s" % ("every check passed" if not failures else "%d checks failed" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
