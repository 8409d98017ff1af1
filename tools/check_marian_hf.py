#!/usr/bin/env python3
"""Developer tool: checks tests/marian_ref.py and tests/gen_marian.py against the real transformers.

NOT part of the test suite: it needs transformers (>= 5), torch and sentencepiece, e.g.
    ../shared/tools/hf_python.sh tools/check_marian_hf.py [--verbose]
(transformers 5.12.1 + torch 2.14 under Debian unstable's python3.14). Never downloads anything.

For several random folders written by gen_marian.make_folder (shared / separate embeddings, swish / gelu /
relu, scale_embedding on and off, F16, the save_pretrained and all-aliases tensor names, pytorch_model.bin,
a raised eos bias, positions in the file perturbed so that file-vs-computed positions show):
  - MarianMTModel.from_pretrained(folder, dtype=torch.float32) loads it (F16 files: float32 compute on the
    F16-rounded weights, as marian_ref; transformers 5 would otherwise compute in float16) with no missing / unexpected tensors;
  - logits of model(input_ids, decoder_input_ids) vs marian_ref.forward_logits: max abs difference;
  - generate() with the folder's generation_config.json: num_beams=1 and num_beams=4 (and length_penalty /
    early_stopping variants), max_new_tokens in {1, 2, 5, 12}, vs marian_ref.greedy / beam_search: equal ids,
    beam score difference;
  - MarianTokenizer(source.spm, target.spm, vocab.json[, target_vocab.json separate_vocabs]) encode and
    decode(skip_special_tokens=True) vs
    marian_ref.Tokenizer on sentences and on random id lists.
Prints each comparison's worst number and exits 1 on any mismatch.
"""
import os
import random
import sys
import tempfile
import warnings

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MarianMTModel, MarianTokenizer  # noqa: E402

import gen_marian  # noqa: E402
import marian_ref  # noqa: E402

transformers.logging.set_verbosity_error()
VERBOSE = "--verbose" in sys.argv
problems = []


def note(ok, what):
    if not ok:
        problems.append(what)
    if VERBOSE or not ok:
        print(("ok   " if ok else "FAIL ") + what)


CONFIGS = [
    ("swish shared scaled", dict(activation="swish", eos_bias=1.5)),
    ("gelu separate unscaled", dict(activation="gelu", share=False, scale_embedding=False, seed=2, d_model=24,
                                    heads=3, ffn=40, layers=3)),
    ("relu f16", dict(activation="relu", dtype="f16", seed=3)),
    ("swish save_pretrained names", dict(names="save_pretrained", seed=4, eos_bias=2.5)),
    ("gelu all names", dict(activation="gelu", names="all", seed=5, dec_layers=1)),
    ("swish separate all names", dict(share=False, names="all", seed=6)),
    ("swish pytorch_model.bin", dict(binary=True, seed=7, eos_bias=1.0)),
    ("swish perturbed positions", dict(seed=8, eos_bias=2.0)),
    ("swish separate vocabularies", dict(separate_vocabs=True, seed=9, eos_bias=1.0)),
]


def main():
    rng = random.Random(3)
    worst = {"logits": 0.0, "beam score": 0.0}
    counts = {"logits": 0, "greedy": 0, "beam": 0, "encode": 0, "decode": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for label, opts in CONFIGS:
            d = os.path.join(tmp, label.replace(" ", "_"))
            gen_marian.make_folder(d, **opts)
            if label.endswith("perturbed positions"):
                p = os.path.join(d, "model.safetensors")
                t = gen_marian.read_safetensors(p)
                for n in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
                    t[n] = t[n] + np.float32(0.3) * np.random.default_rng(1).standard_normal(t[n].shape, np.float32)
                gen_marian.write_safetensors(p, t)
            hf, info = MarianMTModel.from_pretrained(d, output_loading_info=True, dtype=torch.float32)
            hf.eval()
            bad_keys = {k: v for k, v in info.items() if v and k != "mismatched_keys" or (k == "mismatched_keys" and v)}
            note(not bad_keys, "%s: from_pretrained loading info %s" % (label, bad_keys or "clean"))
            ref = marian_ref.load_folder(d)
            V, Vs = ref.vocab_size, ref.enc_emb.shape[0]  # target and source vocabularies (separate_vocabs)
            pad = ref.pad
            # logits
            for S, T in ((1, 1), (3, 5), (17, 9), (40, 33), (60, 60)):
                src = [rng.randrange(2, Vs - 1) for _ in range(S - 1)] + [0]
                tgt = [pad] + [rng.randrange(0, V - 1) for _ in range(T - 1)]
                with torch.no_grad():
                    a = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt])).logits[0].float().numpy()
                b = marian_ref.forward_logits(ref, src, tgt)
                err = float(np.abs(a - b).max())
                worst["logits"] = max(worst["logits"], err)
                counts["logits"] += 1
                note(err <= 1e-4, "%s: logits src %d tgt %d: max abs diff %.2e" % (label, S, T, err))
            # generation with the folder's generation_config
            separate = os.path.exists(os.path.join(d, "target_vocab.json"))
            hf_beam_ok, hf_beam_error = None, ""
            tok = marian_ref.Tokenizer(d)
            sents = gen_marian.sample_sentences(seed=11, n=3)
            for text in sents:
                src = tok.encode(text)
                for max_new in (1, 2, 5, 12):
                    with torch.no_grad():
                        g = hf.generate(torch.tensor([src]), num_beams=1, max_new_tokens=max_new)[0].tolist()
                    want = marian_ref.greedy(ref, src, max_new)
                    got = g[1:]
                    if got and got[-1] == ref.eos:
                        got = got[:-1]
                    got = [x for x in got if x != pad]
                    counts["greedy"] += 1
                    note(got == want, "%s: greedy max_new %d: hf %s ref %s" % (label, max_new, g, want))
                    for k, lp, early in ((4, 1.0, False), (3, 0.6, True), (5, 2.0, False)):
                        if separate:
                            # transformers 5.12's beam search reshapes the logits with config.vocab_size, the
                            # source vocabulary, and raises for decoder_vocab_size != vocab_size: nothing to
                            # compare against; the reference's beam search is held by tests/test_marian.py.
                            try:
                                with torch.no_grad():
                                    hf.generate(torch.tensor([src]), num_beams=k, max_new_tokens=max_new)
                                hf_beam_ok = True
                            except Exception as e:
                                hf_beam_ok = False
                                hf_beam_error = str(e).splitlines()[0][:120]
                            continue
                        with torch.no_grad():
                            out = hf.generate(torch.tensor([src]), num_beams=k, max_new_tokens=max_new,
                                              length_penalty=lp, early_stopping=early, output_scores=True,
                                              return_dict_in_generate=True)
                        s = out.sequences[0].tolist()
                        hs = float(out.sequences_scores[0])
                        got = s[1:]
                        while got and got[-1] == pad:
                            got = got[:-1]
                        if got and got[-1] == ref.eos:
                            got = got[:-1]
                        wi, ws = marian_ref.beam_search(ref, src, k, max_new, lp, early)
                        counts["beam"] += 1
                        worst["beam score"] = max(worst["beam score"], abs(hs - ws))
                        note(got == wi and abs(hs - ws) <= 1e-4,
                             "%s: beam %d lp %g early %s max_new %d: hf %s (%.6f) ref %s (%.6f)"
                             % (label, k, lp, early, max_new, s, hs, wi, ws))
                # default generate(): the folder's generation_config (num_beams 4)
                if separate:
                    continue
                with torch.no_grad():
                    s = hf.generate(torch.tensor([src]), max_new_tokens=8)[0].tolist()
                got = [x for x in s[1:] if x != pad]
                if got and got[-1] == ref.eos:
                    got = got[:-1]
                note(got == marian_ref.generate(ref, src, 8), "%s: generate() defaults (num_beams %s) %s"
                     % (label, hf.generation_config.num_beams, s))
            if separate:
                print("%s: transformers' beam search on separate vocabularies: %s" %
                      (label, "runs (compare it here now)" if hf_beam_ok else "raises (%s); not compared" % hf_beam_error))
            # tokenizer
            tv = os.path.join(d, "target_vocab.json")
            ht = MarianTokenizer(os.path.join(d, "source.spm"), os.path.join(d, "target.spm"),
                                 os.path.join(d, "vocab.json"),
                                 **(dict(target_vocab_file=tv, separate_vocabs=True) if os.path.exists(tv) else {}))
            texts = (gen_marian.sample_sentences(seed=21, n=8) + gen_marian.sample_sentences(seed=22, n=8, target=True)
                     + ["", "  spaces   around  ", "Unknown ZEBRA 123 €!", ">>de<< The house."])
            for text in texts:
                a = ht(text)["input_ids"]
                b = tok.encode(text)
                counts["encode"] += 1
                note(a == b, "%s: encode %r: hf %s ref %s" % (label, text, a, b))
            for text in gen_marian.sample_sentences(seed=23, n=8, target=True):
                ids = tok.encode(text)  # target-like text through the source spm: mostly known pieces
                for x in (ids, [rng.randrange(0, V) for _ in range(rng.randrange(1, 12))]):
                    a = ht.decode(x, skip_special_tokens=True)
                    b = tok.decode(x)
                    counts["decode"] += 1
                    note(a == b, "%s: decode %s: hf %r ref %r" % (label, x, a, b))
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    print("compared: %s" % ", ".join("%d %s" % (v, k) for k, v in counts.items()))
    print("max abs logits difference %.3e; max beam score difference %.3e" % (worst["logits"], worst["beam score"]))
    print("%d problems" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
