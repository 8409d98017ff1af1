#!/usr/bin/env python3
"""Developer tool: checks tests/decode_ref.py (the tests' reference of generate()'s decoding options) against
the real transformers.

NOT part of the test suite: it needs transformers (>= 5), torch and sentencepiece, e.g.
    ../shared/tools/hf_python.sh tools/check_decode_hf.py [--verbose]
(transformers 5.12.1 + torch 2.14 under Debian unstable's python3.14). Never downloads anything.

On random Marian folders written by tests/gen_marian.make_folder (opus-mt's generation_config: 4 beams, pad
banned, forced eos, renormalised log-probs; some with a raised eos bias so that hypotheses end at several
lengths), for random sources, MarianMTModel.generate() with each option below and with combinations of them,
greedy (num_beams=1) and beam search (num_beams 2..4, length penalties, early stopping), against
decode_ref.greedy / decode_ref.beam_search with the same options: the ids must be equal and beam scores
(sequences_scores) within 1e-4.
  repetition_penalty (1.3, 2.0, 0.7), no_repeat_ngram_size (1, 2, 3), suppress_tokens, bad_words_ids of
  several ids (added to the folder's [[pad]]: generate() replaces the config's list with the one given),
  eos_token_id as a list, decoder_input_ids = [start] + prefix (and max_new_tokens after it),
  forced_bos_token_id, min_new_tokens together with the others; and a folder whose generation_config.json
  holds repetition_penalty, no_repeat_ngram_size, suppress_tokens, an eos_token_id list and a bad_words_ids
  entry of two ids, generate() without arguments against decode_ref given the same.
Also decode_ref.score against log_softmax of the model's teacher-forced logits. Prints the counts and each
mismatch; exits 1 on any mismatch.
"""
import json
import os
import random
import sys
import tempfile
import warnings

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import MarianMTModel  # noqa: E402

import decode_ref  # noqa: E402
import gen_marian  # noqa: E402
import marian_ref  # noqa: E402

transformers.logging.set_verbosity_error()
VERBOSE = "--verbose" in sys.argv
problems = []
counts = {"greedy": 0, "beam": 0, "score": 0}
worst = {"beam score": 0.0, "score": 0.0}


def note(ok, what):
    if not ok:
        problems.append(what)
    if VERBOSE or not ok:
        print(("ok   " if ok else "FAIL ") + what)


def hf_generate(hf, src, cfg, start, pad_bad):
    """generate() with cfg: (ids after the prefix without the final end id, score or None) of the best."""
    kw = {k: v for k, v in cfg.items() if k not in ("prefix",)}
    if "bad_words_ids" in kw:
        kw["bad_words_ids"] = pad_bad + kw["bad_words_ids"]
    prefix = list(cfg.get("prefix") or [])
    dec = torch.tensor([[start] + prefix])
    out = hf.generate(torch.tensor([src]), decoder_input_ids=dec, do_sample=False, return_dict_in_generate=True,
                      output_scores=True, **kw)
    seq = out.sequences[0].tolist()[1 + len(prefix):]
    ends = cfg.get("eos_token_id", hf.generation_config.eos_token_id)
    ends = ends if isinstance(ends, list) else [ends]
    while seq and seq[-1] == hf.generation_config.pad_token_id and hf.generation_config.pad_token_id not in ends:
        seq = seq[:-1]
    if seq and seq[-1] in ends:
        seq = seq[:-1]
    score = float(out.sequences_scores[0]) if getattr(out, "sequences_scores", None) is not None else None
    return seq, score


def option_sets(rng, vocab, eos, pad):
    """The option combinations checked, each a dict of generate() arguments (no num_beams)."""
    ids = [i for i in range(vocab) if i not in (eos, pad)]
    pick = lambda n: rng.sample(ids, n)  # noqa: E731
    sets = [
        {"repetition_penalty": 1.3}, {"repetition_penalty": 2.0}, {"repetition_penalty": 0.7},
        {"no_repeat_ngram_size": 1}, {"no_repeat_ngram_size": 2}, {"no_repeat_ngram_size": 3},
        {"suppress_tokens": pick(5)}, {"suppress_tokens": [eos]},
        {"bad_words_ids": [pick(2), pick(3)]},
        {"eos_token_id": [eos] + pick(2)},
        {"prefix": pick(3)}, {"prefix": pick(1), "repetition_penalty": 1.5},
        {"forced_bos_token_id": pick(1)[0]},
        {"repetition_penalty": 1.4, "no_repeat_ngram_size": 2, "min_new_tokens": 3, "suppress_tokens": pick(3)},
        {"prefix": pick(2), "no_repeat_ngram_size": 2, "eos_token_id": [eos] + pick(1),
         "bad_words_ids": [pick(2)]},
    ]
    return sets


def main():
    rng = random.Random(7)
    folders = [("swish shared", dict(activation="swish", eos_bias=1.5)),
               ("gelu separate", dict(activation="gelu", share=False, seed=2, d_model=24, heads=3, ffn=40,
                                      layers=3, eos_bias=0.5)),
               ("relu looping", dict(activation="relu", seed=3))]
    with tempfile.TemporaryDirectory() as tmp:
        for label, opts in folders:
            d = os.path.join(tmp, label.replace(" ", "_"))
            gen_marian.make_folder(d, **opts)
            hf = MarianMTModel.from_pretrained(d, dtype=torch.float32).eval()
            ref = decode_ref.marian(marian_ref.load_folder(d))
            gc = hf.generation_config
            eos, pad, start = gc.eos_token_id, gc.pad_token_id, gc.decoder_start_token_id
            vocab = hf.config.vocab_size
            pad_bad = gc.bad_words_ids or []
            for case, opts2 in enumerate(option_sets(rng, vocab, eos, pad)):
                for beams, lp, early in ((1, 1.0, False), (2, 1.0, False), (3, 0.6, True), (4, 2.0, False)):
                    src = [rng.randrange(2, vocab - 1) for _ in range(rng.randrange(2, 9))] + [eos]
                    src = [t if t != pad else 3 for t in src[:-1]] + [eos]
                    cfg = dict(opts2, num_beams=beams, max_new_tokens=rng.choice((5, 9, 14)))
                    if beams > 1:
                        cfg.update(length_penalty=lp, early_stopping=early)
                    what = "%s case %d %s" % (label, case, cfg)
                    with torch.no_grad():
                        want, want_score = hf_generate(hf, src, cfg, start, pad_bad)
                    if beams == 1:
                        got = decode_ref.greedy(ref, src, cfg)
                        counts["greedy"] += 1
                        note(got == want, "%s: greedy %s, transformers %s" % (what, got, want))
                    else:
                        got, got_score = decode_ref.beam_search(ref, src, cfg)[0]
                        counts["beam"] += 1
                        # both NaN where every id is -inf at a step (eos suppressed at the forced-eos step)
                        both_nan = got_score != got_score and want_score != want_score
                        diff = 0.0 if both_nan else abs(got_score - want_score)
                        worst["beam score"] = max(worst["beam score"], diff)
                        note(got == want and diff <= 1e-4, "%s: beam %s (%.6f), transformers %s (%.6f)"
                             % (what, got, got_score, want, want_score))
            for _ in range(3):
                src = [rng.randrange(2, vocab - 1) for _ in range(5)] + [eos]
                src = [t if t != pad else 3 for t in src[:-1]] + [eos]
                tgt = [rng.randrange(2, vocab - 1) for _ in range(rng.randrange(0, 7))]
                tgt = [t if t != pad else 3 for t in tgt]
                got = decode_ref.score(ref, src, tgt)
                with torch.no_grad():
                    logits = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([[start] + tgt])).logits
                lp = torch.log_softmax(logits[0].double(), dim=-1)
                want = [float(lp[t, x]) for t, x in enumerate(tgt + [eos])]
                diff = max(abs(a - b) for a, b in zip(got, want))
                worst["score"] = max(worst["score"], diff)
                counts["score"] += 1
                note(len(got) == len(want) and diff <= 1e-4, "%s score %s: %s vs %s" % (label, tgt, got, want))
        # a folder whose generation_config.json holds the new keys: generate() with its defaults
        d = os.path.join(tmp, "gen_config")
        gen_marian.make_folder(d, activation="relu", seed=3)
        gc_path = os.path.join(d, "generation_config.json")
        with open(gc_path) as f:
            gc = json.load(f)
        V = len(json.load(open(os.path.join(d, "vocab.json"))))
        eos, pad = gc["eos_token_id"], gc["pad_token_id"]
        extra = rng.sample([i for i in range(V) if i not in (eos, pad)], 4)
        gc.update({"repetition_penalty": 1.4, "no_repeat_ngram_size": 2, "suppress_tokens": [extra[0]],
                   "eos_token_id": [eos, extra[1]], "num_beams": 3,
                   "bad_words_ids": gc["bad_words_ids"] + [[extra[2], extra[3]]]})
        with open(gc_path, "w") as f:
            json.dump(gc, f)
        hf = MarianMTModel.from_pretrained(d, dtype=torch.float32).eval()
        ref = decode_ref.marian(marian_ref.load_folder(d))
        for beams in (1, 3):
            for _ in range(4):
                src = [rng.randrange(2, V - 1) for _ in range(rng.randrange(2, 9))] + [eos]
                with torch.no_grad():
                    out = hf.generate(torch.tensor([src]), num_beams=beams, max_new_tokens=9,
                                      return_dict_in_generate=True, output_scores=True)
                seq = out.sequences[0].tolist()[1:]
                while seq and seq[-1] == pad:
                    seq.pop()
                if seq and seq[-1] in (eos, extra[1]):
                    seq.pop()
                cfg = {"num_beams": beams, "max_new_tokens": 9, "repetition_penalty": 1.4, "no_repeat_ngram_size": 2,
                       "suppress_tokens": [extra[0]]}
                if beams == 1:
                    got = decode_ref.greedy(ref, src, cfg)
                    counts["greedy"] += 1
                    note(got == seq, "generation_config defaults, greedy: %s, transformers %s" % (got, seq))
                else:
                    got, score = decode_ref.beam_search(ref, src, cfg)[0]
                    counts["beam"] += 1
                    diff = abs(score - float(out.sequences_scores[0]))
                    worst["beam score"] = max(worst["beam score"], diff)
                    note(got == seq and diff <= 1e-4, "generation_config defaults, beam: %s, transformers %s" % (got, seq))
    print("transformers %s, torch %s: %d greedy and %d beam cases, %d scored pairs; %d mismatches; worst beam "
          "score difference %.2g, worst score difference %.2g"
          % (transformers.__version__, torch.__version__, counts["greedy"], counts["beam"], counts["score"],
             len(problems), worst["beam score"], worst["score"]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
