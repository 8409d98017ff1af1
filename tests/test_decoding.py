#!/usr/bin/python3
"""Decoding options of generate and translate, scoring, streaming and sorted batching, against the reference.

usage: /usr/bin/python3 tests/test_decoding.py /path/to/vkformer [--quick] [--verbose]

The reference is tests/decode_ref.py, a PyTorch re-implementation of transformers' generate() (greedy search,
beam search and the logits processors; checked against transformers 5.12.1 by tools/check_decode_hf.py) over
tests/marian_ref.py's MarianMTModel and tools/export_torch.py's nn.Transformer. Models: random Marian folders
(tests/gen_marian.py; opus-mt's generation_config: pad banned, forced eos, renormalised log-probs), one whose
random weights loop on a few tokens and one with a raised eos bias, and a random vkformer file. Random models
repeat themselves, which is where these options matter.
  - `generate --beam K` (1: greedy, 2..4) with --repetition-penalty, --no-repeat-ngram, --suppress,
    --suppress-sequence, --end-token (several), --target-prefix-ids, --min-new, --max-new-factor and
    combinations: the ids (the prefix and the ids after it) equal the reference's, beam scores within 2e-4;
  - `translate --target-prefix TEXT`: the prefix through target.spm, the output text that of the whole
    target (the prefix's ids and the new ones decoded together);
  - `score`: per-token log-probabilities of given targets (text through the tokenizers, or --ids) against
    log_softmax of the reference's teacher-forced logits, within 1e-4; the sum and sum / (length + 1);
  - `--stream`: the streamed stdout equals the output without it (greedy, sampling with a seed; beam search
    prints at the end and says so on stderr);
  - `translate --input FILE --max-batch-tokens N --max-new-factor 0.8`: sorted batches (whose sources end
    at different steps) give every line the output it gets alone, in input order; lines that cannot be translated (invalid UTF-8, too many tokens) are named by line
    number, an empty line stands in their place, exit 1;
  - misuse: a prefix that passes max_len with --max-new, a penalty <= 0, an n-gram of 0, an unknown token,
    --stream with --json or two sources, --max-batch-tokens with TEXT: exit 2; a prefix holding the end
    token: exit 1; each with one line on stderr;
  - a folder whose generation_config.json holds repetition_penalty, no_repeat_ngram_size, suppress_tokens,
    an eos_token_id list and a bad_words_ids entry of several ids: generate applies them by default.
--quick: fewer cases (SwiftShader). Prints "N passed, M failed"; exits 1 on any failure.
"""
import json
import os
import random
import sys
import tempfile

sys.dont_write_bytecode = True
try:
    import torch
    import sentencepiece  # noqa: F401
except ImportError as e:
    print("test_decoding: %s is missing: apt-get install python3-torch python3-sentencepiece (run with "
          "/usr/bin/python3)" % e.name, file=sys.stderr)
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
import decode_ref  # noqa: E402
import export_torch  # noqa: E402
import gen_marian  # noqa: E402
import marian_ref  # noqa: E402
import vkf_testlib as lib  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, run_vkformer  # noqa: E402

SCORE_ATOL = 2e-4
LOGPROB_ATOL = 1e-4


def cli_args(cfg):
    """vkformer options for a decode_ref cfg."""
    a = ["--beam", str(cfg.get("num_beams", 1)), "--max-new", str(cfg["max_new_tokens"])]
    if "length_penalty" in cfg:
        a += ["--length-penalty", repr(cfg["length_penalty"])]
    if cfg.get("early_stopping"):
        a += ["--early-stopping"]
    if "repetition_penalty" in cfg:
        a += ["--repetition-penalty", repr(cfg["repetition_penalty"])]
    if "no_repeat_ngram_size" in cfg:
        a += ["--no-repeat-ngram", str(cfg["no_repeat_ngram_size"])]
    if "suppress_tokens" in cfg:
        a += ["--suppress", ids_arg(cfg["suppress_tokens"])]
    for seq in cfg.get("bad_words_ids", []):
        a += ["--suppress-sequence", ids_arg(seq)]
    for e in cfg.get("eos_token_id", []):
        a += ["--end-token", str(e)]
    if "prefix" in cfg:
        a += ["--target-prefix-ids", ids_arg(cfg["prefix"])]
    if "min_new_tokens" in cfg:
        a += ["--min-new", str(cfg["min_new_tokens"])]
    if "max_new_factor" in cfg:
        a += ["--max-new-factor", repr(cfg["max_new_factor"])]
    return a


def check_generate(label, model, path, src, cfg):
    """`generate --json` against decode_ref: best ids (the prefix and the new ids) and, for beams, the score."""
    what = "%s: generate %s" % (label, " ".join(cli_args(cfg)))
    rc, out, err = run_vkformer(["generate", "--model", path, "--src", ids_arg(src), "--json"] + cli_args(cfg))
    if rc != 0:
        return bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
    rec = json.loads(out.splitlines()[0])
    prefix = list(cfg.get("prefix", []))
    if cfg.get("num_beams", 1) == 1:
        want, want_score = decode_ref.greedy(model, src, cfg), None
    else:
        want, want_score = decode_ref.beam_search(model, src, cfg)[0]
    got = rec["ids"]
    score = rec["hypotheses"][0]["score"]
    if got != prefix + want:
        return bad(what, "ids %s, reference %s" % (got, prefix + want))
    if want_score is not None and (score is None or abs(score - want_score) > SCORE_ATOL):
        return bad(what, "score %s, reference %.6f" % (score, want_score))
    ok("%s -> %s" % (what, got))


def marian_cases(rng, vocab, eos, pad, quick):
    ids = [i for i in range(vocab) if i not in (eos, pad)]
    pick = lambda n: rng.sample(ids, n)  # noqa: E731
    cases = [
        {"repetition_penalty": 1.5}, {"repetition_penalty": 0.8}, {"no_repeat_ngram_size": 2},
        {"no_repeat_ngram_size": 1}, {"suppress_tokens": pick(4)}, {"bad_words_ids": [pick(2), pick(3)]},
        {"eos_token_id": [eos] + pick(2)}, {"prefix": pick(3)},
        {"prefix": pick(2), "repetition_penalty": 1.3, "no_repeat_ngram_size": 3, "min_new_tokens": 2},
        {"eos_token_id": [eos] + pick(1), "suppress_tokens": pick(2), "bad_words_ids": [pick(2)]},
        {"max_new_factor": 1.5},
    ]
    return cases[::3] if quick else cases


def tgt_ids(tok, text):
    """Target text as MarianTokenizer's text_target makes it, without eos: target.spm pieces, vocab.json ids."""
    return [tok.vocab.get(p, tok.unk) for p in tok.tgt.encode_as_pieces(text)]


def check_translate_prefix(label, model, path, tok, text, prefix_text, beams, max_new):
    what = "%s: translate --target-prefix %r --beam %d" % (label, prefix_text, beams)
    args = ["translate", "--model", path, text, "--target-prefix", prefix_text, "--beam", str(beams), "--max-new",
            str(max_new)]
    rc, out, err = run_vkformer(args)
    if rc != 0:
        return bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
    prefix = tgt_ids(tok, prefix_text)
    cfg = {"num_beams": beams, "max_new_tokens": max_new, "prefix": prefix}
    want = decode_ref.generate(model, tok.encode(text), cfg)
    want_text = tok.decode(prefix + want)
    if out.rstrip("\n") != want_text:
        return bad(what, "printed %r, reference %r (ids %s)" % (out, want_text, prefix + want))
    ok("%s -> %r" % (what, want_text))


def check_score(label, model, path, pairs, tmp, ids_mode, tok=None):
    """`score --input` (text pairs, or id pairs with --ids) against decode_ref.score."""
    what = "%s: score --input (%d pairs%s)" % (label, len(pairs), ", --ids" if ids_mode else "")
    f = os.path.join(tmp, "pairs.tsv")
    with open(f, "w", encoding="utf-8") as fh:
        for s, t in pairs:
            fh.write("%s\t%s\n" % ((ids_arg(s), ids_arg(t)) if ids_mode else (s, t)))
    rc, out, err = run_vkformer(["score", "--model", path, "--input", f, "--batch", "2"] + (["--ids"] if ids_mode else []))
    if rc != 0:
        return bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
    lines = out.splitlines()
    if len(lines) != len(pairs):
        return bad(what, "%d lines for %d pairs" % (len(lines), len(pairs)))
    worst = 0.0
    for (s, t), line in zip(pairs, lines):
        if ids_mode:
            src, tgt = list(s) + ([] if s[-1] == model.defaults["eos_token_id"] else [model.defaults["eos_token_id"]]), t
        else:
            src, tgt = tok.encode(s), tgt_ids(tok, t)
        want = decode_ref.score(model, src, tgt)
        total, norm, per = line.split("\t")
        got = [float(x) for x in per.split()]
        if len(got) != len(want):
            return bad(what, "%d log-probabilities for %r, expected %d" % (len(got), t, len(want)))
        d = max(abs(a - b) for a, b in zip(got, want))
        worst = max(worst, d)
        if d > LOGPROB_ATOL or abs(float(total) - sum(want)) > 1e-3 or \
                abs(float(norm) - sum(want) / len(want)) > 1e-3:
            return bad(what, "%r: %s, reference %s (sum %.6f, normalised %.6f)" % (t, line, want, sum(want),
                                                                                  sum(want) / len(want)))
    ok("%s (worst difference %.2g)" % (what, worst))


def check_stream(label, path, args, what_mode):
    what = "%s: --stream equals the output (%s)" % (label, what_mode)
    rc1, plain, e1 = run_vkformer(args)
    rc2, streamed, e2 = run_vkformer(args + ["--stream"])
    if rc1 or rc2:
        return bad(what, "exit %d / %d: %s" % (rc1, rc2, " | ".join(e1[-2:] + e2[-2:])))
    if plain != streamed:
        return bad(what, "without %r, with --stream %r" % (plain, streamed))
    beam = "--beam" in args and args[args.index("--beam") + 1] != "1"
    if beam and not any("at the end" in l for l in e2):
        return bad(what, "beam search does not say it prints at the end: %r" % e2)
    ok("%s: %r" % (what, streamed.strip()))


def check_sorted(label, path, tmp, texts, beams, max_new):
    """translate --input sorted by --max-batch-tokens: each line as alone, input order, bad lines named."""
    what = "%s: translate --input --max-batch-tokens (beam %d, %d lines)" % (label, beams, len(texts))
    f = os.path.join(tmp, "lines.txt")
    with open(f, "wb") as fh:
        for t in texts:
            fh.write(t + b"\n")
    # --max-new-factor: sources of one batch end at different steps (eos forced at each one's own)
    common = ["--beam", str(beams), "--max-new", str(max_new), "--max-new-factor", "0.8"]
    rc, out, err = run_vkformer(["translate", "--model", path, "--input", f, "--max-batch-tokens", "24",
                                 "--progress"] + common)
    bad_lines = [i + 1 for i, t in enumerate(texts) if b"\xff" in t or len(t) > 400]
    if rc != (1 if bad_lines else 0):
        return bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
    got = out.split("\n")[:-1]
    if len(got) != len(texts):
        return bad(what, "%d output lines for %d input lines" % (len(got), len(texts)))
    for n in bad_lines:
        if not any("line %d:" % n in l for l in err) or got[n - 1] != "":
            return bad(what, "line %d is not named on stderr or not empty: %r %r" % (n, got[n - 1], err))
    if not any("sentences" in l and "tokens/s" in l for l in err):
        return bad(what, "no progress line on stderr: %r" % err)
    for i, t in enumerate(texts):
        if i + 1 in bad_lines or not t.strip():
            continue
        rc, alone, e = run_vkformer(["translate", "--model", path, t.decode()] + common)
        if rc or alone.rstrip("\n") != got[i]:
            return bad(what, "line %d: sorted %r, alone %r (exit %d %s)" % (i + 1, got[i], alone, rc, e[-2:]))
    ok("%s: %d lines, lines %s named" % (what, len(texts), bad_lines))


def check_sampling_limits(label, path):
    """Sampling keeps --min-new (no end before it) and the folder's forced eos (the last step ends), with and
    without the processor kernel (--repetition-penalty puts it in the step)."""
    for extra in ([], ["--repetition-penalty", "1.2"]):
        what = "%s: sampling with --min-new 5 and forced eos at --max-new 7%s" % (label, " (processors)" if extra else "")
        lengths = []
        for seed in range(6):
            rc, out, err = run_vkformer(["generate", "--model", path, "--src", "5,9,14", "--temperature", "1.5",
                                         "--seed", str(seed), "--min-new", "5", "--max-new", "7"] + extra)
            if rc != 0:
                return bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
            lengths.append(len(lib.parse_ids(out)))
        if min(lengths) < 5 or max(lengths) > 6:
            bad(what, "lengths %s: each must be 5 or 6 (eos held off for 5 tokens, forced as the 7th)" % lengths)
        else:
            ok("%s: lengths %s" % (what, lengths))


def check_generation_config(tmp, rng):
    """A folder whose generation_config.json holds repetition_penalty, no_repeat_ngram_size, suppress_tokens,
    an eos_token_id list and a bad_words_ids entry of several ids: generate without options applies them."""
    d = os.path.join(tmp, "gen_config")
    gen_marian.make_folder(d, activation="relu", seed=3)
    with open(os.path.join(d, "generation_config.json")) as f:
        gc = json.load(f)
    m = marian_ref.load_folder(d)
    ids = [i for i in range(m.vocab_size) if i not in (m.eos, m.pad)]
    extra = rng.sample(ids, 4)
    gc.update({"repetition_penalty": 1.4, "no_repeat_ngram_size": 2, "suppress_tokens": [extra[0]],
               "eos_token_id": [m.eos, extra[1]], "num_beams": 3,
               "bad_words_ids": gc["bad_words_ids"] + [[extra[2], extra[3]]]})
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(gc, f)
    model = decode_ref.marian(marian_ref.load_folder(d))
    for src in ([5, 9, 14, m.eos], [22, 7, m.eos]):
        what = "generation_config.json's repetition_penalty, no_repeat_ngram_size, suppress_tokens, eos list, " \
               "bad_words_ids as defaults (src %s)" % src
        rc, out, err = run_vkformer(["generate", "--model", d, "--src", ids_arg(src), "--max-new", "9", "--json"])
        if rc != 0:
            bad(what, "exit %d: %s" % (rc, " | ".join(err[-3:])))
            continue
        rec = json.loads(out)
        want, score = decode_ref.beam_search(model, src, {"num_beams": 3, "max_new_tokens": 9,
                                                          "repetition_penalty": 1.4, "no_repeat_ngram_size": 2,
                                                          "suppress_tokens": [extra[0]]})[0]
        if rec["ids"] != want or abs(rec["hypotheses"][0]["score"] - score) > SCORE_ATOL:
            bad(what, "ids %s (%s), reference %s (%.6f)" % (rec["ids"], rec["hypotheses"][0]["score"], want, score))
        else:
            ok("%s -> %s" % (what, want))


def check_misuse(path, marian):
    cases = [
        (["generate", "--model", marian, "--src", "5,6", "--max-new", "60", "--target-prefix-ids", ids_arg(range(3, 13))],
         2, "max_len"),
        (["generate", "--model", path, "--src", "5,6", "--repetition-penalty", "0"], 2, "--repetition-penalty"),
        (["generate", "--model", path, "--src", "5,6", "--repetition-penalty", "-1.5"], 2, "--repetition-penalty"),
        (["generate", "--model", path, "--src", "5,6", "--no-repeat-ngram", "0"], 2, "--no-repeat-ngram"),
        (["translate", "--model", marian, "the house", "--suppress", "\u2581nosuchpiece"], 2, "nosuchpiece"),
        (["translate", "--model", marian, "the house", "--end-token", "\u2581nosuchpiece"], 2, "nosuchpiece"),
        (["generate", "--model", path, "--src", "5,6", "--suppress", "100000"], 2, "--suppress"),
        (["translate", "--model", marian, "the house", "--stream", "--json"], 2, "--stream"),
        (["generate", "--model", path, "--src", "5,6", "--src", "7", "--stream"], 2, "--stream"),
        (["translate", "--model", marian, "the house", "--max-batch-tokens", "10"], 2, "--max-batch-tokens"),
        (["generate", "--model", path, "--src", "5,6", "--max-new-factor", "0"], 2, "--max-new-factor"),
        (["generate", "--model", path, "--src", "5,6", "--target-prefix-ids", "4,2,5"], 1, "end id"),
    ]
    for args, code, needle in cases:
        what = "misuse: %s (exit %d)" % (" ".join(a for a in args[3:]), code)
        rc, out, err = run_vkformer(args)
        if rc != code or len(err) != 1 or needle not in err[0]:
            bad(what, "exit %d, stderr %r" % (rc, err))
        else:
            ok(what)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    lib.VKFORMER = args[0]
    lib.VERBOSE = "--verbose" in sys.argv
    quick = "--quick" in sys.argv
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        folders = [("marian looping", dict(activation="relu", seed=3)),
                   ("marian eos-bias", dict(activation="swish", eos_bias=1.5))]
        if quick:
            folders = folders[:1]
        for label, opts in folders:
            d = os.path.join(tmp, label.replace(" ", "_"))
            gen_marian.make_folder(d, **opts)
            m = marian_ref.load_folder(d)
            model = decode_ref.marian(m)
            tok = marian_ref.Tokenizer(d)
            eos, pad, vocab = m.eos, m.pad, m.vocab_size
            for cfg in marian_cases(rng, vocab, eos, pad, quick):
                for beams in ((1, 3) if quick else (1, 2, 4)):
                    src = [rng.randrange(2, vocab - 1) for _ in range(rng.randrange(2, 8))]
                    src = [t if t != pad else 3 for t in src] + [eos]
                    c = dict(cfg, num_beams=beams, max_new_tokens=rng.choice((6, 11)))
                    if beams > 1:
                        c["length_penalty"] = rng.choice((1.0, 0.6, 2.0))
                        c["early_stopping"] = rng.choice((False, True))
                    check_generate(label, model, d, src, c)
            check_translate_prefix(label, model, d, tok, "the big house sees a dog", "das", 1, 8)
            check_translate_prefix(label, model, d, tok, "the big house sees a dog", "das Haus", 3, 8)
            pairs = [("the house sees a small dog", "das Haus"), ("a dog", ""), ("the big house", "der Hund ist")]
            check_score(label, model, d, pairs, tmp, False, tok)
            check_stream(label, d, ["translate", "--model", d, "the small dog sees the house", "--beam", "1",
                                    "--max-new", "10"], "greedy")
            check_stream(label, d, ["translate", "--model", d, "the small dog sees the house", "--temperature", "2",
                                    "--seed", "5", "--max-new", "10", "--target-prefix", "das"], "sampling, prefix")
            check_stream(label, d, ["translate", "--model", d, "the small dog", "--max-new", "8"], "beam 4")
            check_stream(label, d, ["generate", "--model", d, "--src", "5,9,14", "--beam", "1", "--max-new", "8",
                                    "--repetition-penalty", "1.5"], "generate ids")
            if label == "marian eos-bias" or quick:
                check_sampling_limits(label, d)
            if label == "marian looping":
                marian_path = d
                texts = [b"the dog", b"the big house sees a small dog and the dog sees the house", b"",
                         b"a", b"bad \xff byte", b"the small house", b" ".join([b"house"] * 80),
                         b"dogs see houses and houses see dogs", b"the"]
                check_sorted(label, d, tmp, texts if not quick else texts[:6], 2, 8)
        # a vkformer file: greedy and beam with the options, scoring ids
        path = os.path.join(tmp, "model.safetensors")
        net = export_torch.build_model(export_torch.default_config(tgt_vocab_size=23), seed=4)
        with torch.no_grad():
            net.generator.bias[net.config["eos_id"]] += 0.5
        export_torch.export(net, path)
        model = decode_ref.seq2seq(net.eval())
        c0 = net.config
        for cfg in marian_cases(rng, c0["tgt_vocab_size"], c0["eos_id"], c0["pad_id"], quick):
            for beams in (1, 3):
                src = [rng.randrange(3, c0["src_vocab_size"]) for _ in range(rng.randrange(1, 8))] + [c0["eos_id"]]
                c = dict(cfg, num_beams=beams, max_new_tokens=rng.choice((6, 10)))
                check_generate("vkformer file", model, path, src, c)
        pairs = [([5, 6, 7], [4, 5]), ([9], []), ([3, 4, 12, 8], [7, 7, 7, 9])]
        check_score("vkformer file", model, path, pairs, tmp, True)
        check_generation_config(tmp, rng)
        check_misuse(path, marian_path)
    print("%d passed, %d failed" % (lib.passed, lib.failed))
    return 1 if lib.failed else 0


if __name__ == "__main__":
    sys.exit(main())
