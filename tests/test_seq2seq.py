#!/usr/bin/python3
"""M2M-100, NLLB-200, mBART-50 and BART folders against the PyTorch reference (tests/seq2seq_ref.py).

usage: test_seq2seq.py VKFORMER [--quick]

For each family, on random-weight hub-layout folders written by tests/gen_seq2seq.py:
  - forward logits (teacher forcing, ids as given, pad ids inside included) within 1e-3 of the
    reference, f32 files and f16 files, the embedding under one name and under every tied alias;
  - greedy and beam-4 generation with the target language forced (translate --json): ids identical;
  - tokenization: `tokenize` ids and `tokenize --decode` text equal the reference tokenizer's on mixed
    strings (scripts, emoji, whitespace runs, unknown characters), with and without --source-lang;
  - every attention variant runs on every family (dense-naive's logits equal dense's);
  - the weights in 3 shards with model.safetensors.index.json give the logits of the one file;
  - misuse: unknown languages and a missing target language are usage errors (exit 2) naming valid
    codes; malformed folders are refused with one line naming the problem (exit 1), never a signal.
BART (check_bart) on folders with each tokenizer form of tools/make_bpe_cases.py (vocab.json +
merges.txt as the hub holds them, transformers 5.12's save_pretrained tokenizer.json, and 4.x's slow
files): logits, `tokenize` ids and `tokenize --decode` text equal to transformers' AutoTokenizer on
the golden texts (the cases of tests/data/tokenizers), `translate` greedy and beam ids with the
folder's generation_config (forced_bos_token_id <s>, forced_eos_token_id, early_stopping) equal to
the reference's on those ids, `generate --raw-ids`, the attention variants, and malformed folders.
The device is whatever VK_ICD_FILENAMES selects; the validation layer is on (VKFORMER_VALIDATE=1).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

import gen_marian  # noqa: E402
import gen_seq2seq  # noqa: E402
import marian_ref  # noqa: E402
import seq2seq_ref  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, parse_ids  # noqa: E402
import vkf_testlib  # noqa: E402

FORWARD_ATOL = 1e-3
LANGS = {"m2m_100": ("en", "fr", "__fr__"), "nllb": ("eng_Latn", "fra_Latn", "fra_Latn"),
         "mbart": ("en_XX", "ro_RO", "ro_RO")}
STRINGS = ["the house sees a big dog", "la maison voit le soleil aujourd'hui", "дом и кошка", "家 猫 見る",
           "  spaces   between  ", "tabs  and   spaces", "emoji 🙂 and ✨", "ümlaut Stadt groß", "x",
           "UNKNOWN zzz qqq 42", "the the the the the the the the"]


def unforced(ids, lead):
    """A reference's generated ids as `generate` prints them (docs/json.md): without the forced first token."""
    return ids[1:] if ids[:1] == [lead] else ids


class Run:
    def __init__(self, p):
        self.returncode, self.stdout = p.returncode, p.stdout
        # SwiftShader prints its own "WARNING: UNSUPPORTED" lines; they are not vkformer's
        self.stderr = "\n".join(l for l in p.stderr.splitlines() if "WARNING: UNSUPPORTED" not in l)


def run(args, timeout=300, stdin=None):
    env = dict(os.environ, VKFORMER_VALIDATE="1")
    return Run(subprocess.run([vkf_testlib.VKFORMER] + args, capture_output=True, text=True, timeout=timeout,
                              input=stdin, env=env))


def forward(path, src, tgt, tmp):
    out = os.path.join(tmp, "logits.npy")
    p = run(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt), "--out", out])
    if p.returncode != 0:
        return None, p.stderr.strip()
    return np.load(out), ""


def check_forward(label, path, ref, rng, tmp, V):
    worst = 0.0
    for s_len, t_len in ((1, 1), (7, 5), (20, 13)):
        src = [int(x) for x in rng.integers(3, V, s_len)]
        tgt = [2] + [int(x) for x in rng.integers(3, V, t_len - 1)]
        if t_len > 3:
            tgt[2] = ref.pad                      # a pad inside the target: fairseq's positions skip it
        if s_len > 3:
            src[1] = ref.pad
        got, err = forward(path, src, tgt, tmp)
        if got is None:
            bad("%s forward %dx%d" % (label, s_len, t_len), err)
            return
        want = marian_ref.forward_logits(ref, src, tgt)
        err = float(np.abs(got - want).max())
        worst = max(worst, err)
        if err > FORWARD_ATOL:
            bad("%s forward %dx%d" % (label, s_len, t_len), "max abs diff %.3g" % err)
            return
    ok("%s forward logits (worst %.2g)" % (label, worst))


def check_generate(label, path, tok, family, texts):
    src_lang, tgt_lang, tgt_token = LANGS[family]
    lang_id = tok.lang_id[tgt_lang if family != "m2m_100" else "fr"]
    ref = seq2seq_ref.load_folder(path, lang_id)
    for beams in (1, 4):
        p = run(["translate", "--model", path, "--source-lang", src_lang, "--target-lang", tgt_lang, "--beam",
                 str(beams), "--max-new", "12", "--input", "-", "--json"], stdin="\n".join(texts) + "\n")
        if p.returncode != 0:
            bad("%s translate --beam %d" % (label, beams), p.stderr.strip())
            continue
        recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        for text, r in zip(texts, recs):
            src = tok.encode(text, src_lang)
            if r["src"] != src:
                bad("%s source ids of %r" % (label, text), "%s, reference %s" % (r["src"], src))
                break
            want = marian_ref.greedy(ref, src, 12) if beams == 1 else marian_ref.beam_search(ref, src, beams, 12)[0]
            if r["ids"] != want:
                bad("%s %s of %r" % (label, "greedy" if beams == 1 else "beam", text), "%s, reference %s" % (r["ids"], want))
                break
            if r["translation"] != tok.decode(want):
                bad("%s text of %r" % (label, text), "%r, reference %r" % (r["translation"], tok.decode(want)))
                break
        else:
            ok("%s translate --beam %d: %d texts, ids and text as the reference" % (label, beams, len(texts)))


def check_tokenizer(label, path, tok, family, rng):
    src_lang = LANGS[family][0]
    texts = STRINGS + ["tabs\tinside\ta line"] + gen_seq2seq.corpus(7, 40)
    for lang_args, lang in (([], None), (["--source-lang", src_lang], src_lang)):
        p = run(["tokenize", "--model", path, "--input", "-"] + lang_args, stdin="\n".join(texts) + "\n")
        if p.returncode != 0:
            bad("%s tokenize %s" % (label, lang_args), p.stderr.strip())
            return
        for text, line in zip(texts, p.stdout.splitlines()):
            want = tok.encode(text, lang)
            if parse_ids(line) != want:
                bad("%s tokenize %r" % (label, text), "%s, reference %s" % (line, want))
                return
    V = len(tok.lang_id) + tok.n_spm
    lists = [[int(x) for x in rng.integers(0, V, rng.integers(1, 12))] for _ in range(30)]
    lists.append(list(tok.lang_id.values())[:5] + [2, 1, 0, 3])
    p = run(["tokenize", "--model", path, "--decode", "--input", "-"], stdin="\n".join(ids_arg(i) for i in lists) + "\n")
    if p.returncode != 0:
        bad("%s tokenize --decode" % label, p.stderr.strip())
        return
    for ids, line in zip(lists, p.stdout.split("\n")):
        if line != tok.decode(ids):
            bad("%s decode %s" % (label, ids), "%r, reference %r" % (line, tok.decode(ids)))
            return
    ok("%s tokenizer: %d texts encoded, %d id lists decoded as the reference" % (label, 2 * len(texts), len(lists)))


def check_variants(label, path, tmp, V, rng):
    src = [int(x) for x in rng.integers(3, V, 30)]
    tgt = [2] + [int(x) for x in rng.integers(3, V, 9)]
    base, err = forward(path, src, tgt, tmp)
    if base is None:
        bad("%s forward" % label, err)
        return
    for variant in ("dense-naive", "local:4", "strided:2:3", "bigbird:4:1:1", "lsh:2:8", "lowrank:8"):
        out = os.path.join(tmp, "v.npy")
        p = run(["forward", "--model", path, "--src", ids_arg(src), "--tgt", ids_arg(tgt), "--out", out,
                 "--attention", variant])
        if p.returncode != 0:
            bad("%s --attention %s" % (label, variant), p.stderr.strip())
            continue
        got = np.load(out)
        if not np.all(np.isfinite(got)):
            bad("%s --attention %s" % (label, variant), "non-finite logits")
        elif variant == "dense-naive" and float(np.abs(got - base).max()) > 1e-4:
            bad("%s dense-naive against dense" % label, "max abs diff %.3g" % float(np.abs(got - base).max()))
        else:
            ok("%s --attention %s" % (label, variant))
    # beam search through lowrank cross-attention: with K past the source length the projection is a
    # permutation, so the ids equal dense attention's
    family = os.path.basename(path).split("-")[0]
    target = ["--target-lang", LANGS[family][1]] if family in LANGS else []
    outs = []
    for cross in ("dense", "lowrank:64", "lowrank:3"):
        p = run(["translate", "--model", path] + target + ["--cross-attention", cross, "--beam", "4",
                 "--max-new", "8", "--json", "the house sees a big dog"])
        if p.returncode != 0:
            bad("%s beam search with --cross-attention %s" % (label, cross), p.stderr.strip())
            return
        outs.append(json.loads(p.stdout.splitlines()[0])["ids"])
    if outs[0] != outs[1]:
        bad("%s beam search: lowrank:64 (a permutation) against dense" % label, "%s against %s" % (outs[1], outs[0]))
    else:
        ok("%s beam search with lowrank cross-attention (K >= length equals dense; K 3 runs)" % label)


def check_sharded(label, path, tmp, V, rng):
    """The folder's weights split into 3 shards with model.safetensors.index.json: the same logits."""
    src = [int(x) for x in rng.integers(3, V, 12)]
    tgt = [2] + [int(x) for x in rng.integers(3, V, 6)]
    base, err = forward(path, src, tgt, tmp)
    sharded = path + "-sharded"
    shutil.copytree(path, sharded)
    gen_marian.shard_folder(sharded, 3)
    got, err2 = forward(sharded, src, tgt, tmp)
    if base is None or got is None:
        bad("%s sharded" % label, err or err2)
    elif not np.array_equal(base, got):
        bad("%s sharded" % label, "max abs diff %.3g against one file" % float(np.abs(got - base).max()))
    else:
        ok("%s in 3 shards with model.safetensors.index.json: logits identical to one file" % label)
    shutil.rmtree(sharded)


def check_misuse(label, path, family):
    src_lang, tgt_lang, _ = LANGS[family]
    cases = [
        (["translate", "--model", path, "the house"], 2, "target language"),
        (["translate", "--model", path, "--target-lang", "xx_Fake", "the house"], 2, "codes"),
        (["translate", "--model", path, "--target-lang", tgt_lang, "--source-lang", "zz", "the house"], 2, "--source-lang"),
    ]
    for args, code, word in cases:
        p = run(args)
        lines = p.stderr.strip().splitlines()
        if p.returncode != code or len(lines) != 1 or word not in lines[0]:
            bad("%s %s" % (label, " ".join(args[3:])), "exit %d, stderr %r" % (p.returncode, p.stderr))
        else:
            ok("%s refuses %s: %s" % (label, " ".join(args[3:-1]), lines[0][:80]))


def check_malformed(tmp):
    for family in ("nllb", "mbart", "m2m_100"):
        for kind in gen_seq2seq.MALFORMED:
            if kind == "bad-src-lang" and family == "m2m_100":
                continue
            path = os.path.join(tmp, "bad-%s-%s" % (family, kind))
            words = gen_seq2seq.make_malformed(path, family, kind)
            target = LANGS[family][1]
            p = run(["translate", "--model", path, "--target-lang", target, "the house"])
            lines = p.stderr.strip().splitlines()
            if p.returncode < 0 or p.returncode not in (1, 2) or len(lines) != 1 or not any(w in lines[0] for w in words):
                bad("%s malformed %s" % (family, kind), "exit %d, stderr %r" % (p.returncode, p.stderr))
            else:
                ok("%s malformed %s: %s" % (family, kind, lines[0][:90]))


def golden(name):
    import lzma
    d = os.path.join(HERE, "data", "tokenizers")
    with open(os.path.join(d, name + ".json.xz"), "rb") as f:
        tok = lzma.decompress(f.read())
    with open(os.path.join(d, name + ".cases.json.xz"), "rb") as f:
        cases = json.loads(lzma.decompress(f.read()))
    with open(os.path.join(d, "texts.json.xz"), "rb") as f:
        texts = json.loads(lzma.decompress(f.read()))
    return tok, cases, texts


def check_saved_form(family, tmp, rng, quick):
    """A folder as transformers 5.x save_pretrained writes it: tokenizer.json (the golden one of
    tests/data/tokenizers, made by transformers 5.12.1's classes) and tokenizer_config.json beside the
    model files, no SentencePiece model. Ids are the tokenizer's, composed with the source language as
    the tokenizer's template composes them; decoding skips special tokens; generation against the
    reference on those ids."""
    name = {"nllb": "nllb", "mbart": "mbart50"}[family]
    src_lang, tgt_lang, _ = LANGS[family]
    tok_json, cases, texts = golden(name)
    path = os.path.join(tmp, "%s-saved" % family)
    info = gen_seq2seq.make_folder(path, family, vocab_size=cases["vocab_size"] + 3, seed=4)
    for n in ("sentencepiece.bpe.model", "vocab.json"):
        if os.path.exists(os.path.join(path, n)):
            os.remove(os.path.join(path, n))
    with open(os.path.join(path, "tokenizer.json"), "wb") as f:
        f.write(tok_json)
    tc = {"backend": "tokenizers", "tokenizer_class": "NllbTokenizer" if family == "nllb" else "MBart50Tokenizer",
          "src_lang": src_lang, "tgt_lang": None, "model_max_length": 1000000000000000019884624838656}
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f)
    label = "%s (save_pretrained form)" % family
    added = {a[0]: a[1] for a in cases["added"]}
    lang = added[src_lang]
    picked = [c for c in cases["encode"] if texts[c[0]].strip() and not any(ch in texts[c[0]] for ch in "\n\r\0")]
    picked = picked[:200] if quick else picked
    p = run(["tokenize", "--model", path, "--source-lang", src_lang, "--input", "-"],
            stdin="\n".join(texts[c[0]] for c in picked) + "\n")
    if p.returncode != 0:
        bad("%s tokenize" % label, p.stderr.strip())
        return
    lines = p.stdout.split("\n")
    for c, line in zip(picked, lines):
        want = [lang] + c[1] + [2]
        if parse_ids(line) != want:
            bad("%s tokenize %r" % (label, texts[c[0]]), "%s, transformers %s" % (line, want))
            return
    ok("%s tokenize: %d texts as transformers 5.12.1 (with --source-lang)" % (label, len(picked)))
    # transformers' decode drops an id past the vocabulary; vkformer refuses it (an id the model cannot
    # give is a caller's mistake): such lists are checked for the refusal
    V = info["vocab_size"]
    outside = [d for d in cases["decode"] if max(d[0], default=0) >= V]
    dec = [d for d in cases["decode"] if max(d[0], default=0) < V]
    dec = dec[:100] if quick else dec
    for d in outside[:2]:
        p = run(["tokenize", "--model", path, "--decode", ids_arg(d[0])])
        lines = p.stderr.strip().splitlines()
        if p.returncode != 1 or len(lines) != 1 or "outside" not in lines[0]:
            bad("%s decode of an id past the vocabulary" % label, "exit %d, stderr %r" % (p.returncode, p.stderr))
        else:
            ok("%s decode of an id past the vocabulary refused: %s" % (label, lines[0][:80]))
    p = run(["tokenize", "--model", path, "--decode", "--input", "-"], stdin="\n".join(ids_arg(d[0]) for d in dec) + "\n")
    got = p.stdout.split("\n")
    wrong = [(d, g) for d, g in zip(dec, got) if "\n" not in d[2] and g != d[2]]
    if p.returncode != 0 or wrong:
        bad("%s decode" % label, p.stderr.strip() or "%s: %r, transformers %r" % (wrong[0][0][0], wrong[0][1], wrong[0][0][2]))
    else:
        ok("%s decode: %d id lists as transformers (skip_special_tokens)" % (label, len(dec)))
    ref = seq2seq_ref.load_folder(path, added[tgt_lang])
    sources = [[lang] + c[1] + [2] for c in picked[:6] if 0 < len(c[1]) < 40]
    for beams in (1, 4):
        args = ["generate", "--model", path, "--target-lang", tgt_lang, "--beam", str(beams), "--max-new", "10",
                "--raw-ids"]
        for s in sources:
            args += ["--src", ids_arg(s)]
        p = run(args)
        outs = [parse_ids(line) for line in p.stdout.strip().split("\n")] if p.returncode == 0 else None
        wants = [unforced(marian_ref.greedy(ref, s, 10) if beams == 1 else marian_ref.beam_search(ref, s, beams, 10)[0],
                          added[tgt_lang]) for s in sources]
        if outs != wants:
            bad("%s generate --beam %d" % (label, beams), p.stderr.strip() or "%s, reference %s" % (outs, wants))
        else:
            ok("%s generate --beam %d: %d sources as the reference" % (label, beams, len(sources)))
    check_forward(label, path, seq2seq_ref.load_folder(path), rng, tmp, info["vocab_size"])


def bpe_golden(form):
    """(cases, texts) of tools/make_bpe_cases.py's BART tokenizer form (hub, saved, legacy), with every
    encode case's plain ids filled in from its base form."""
    import lzma
    d = os.path.join(HERE, "data", "tokenizers")

    def load(name):
        with open(os.path.join(d, name + ".xz"), "rb") as f:
            return json.loads(lzma.decompress(f.read()))
    cases = load("bart_%s.cases.json" % form)
    if cases.get("same_as"):
        base = load(cases["same_as"] + ".cases.json")["encode"]
        for e, b in zip(cases["encode"], base):
            if e[1] is None:
                e[1] = b[1]
    return cases, load("bpe_texts.json")


def with_special(c):
    """The ids with special tokens of an encode case (e[2] as [prefix, suffix] around e[1], or whole)."""
    b = c[2]
    if len(b) == 2 and isinstance(b[0], list):
        return b[0] + c[1] + b[1]
    return b


def bart_reference_ids(ref, src, beams, max_new):
    gc = ref.generation_config
    if beams == 1:
        return marian_ref.greedy(ref, src, max_new)
    return marian_ref.beam_search(ref, src, beams, max_new, gc.get("length_penalty", 1.0),
                                  gc.get("early_stopping", False))[0]


def check_bart(tmp, rng, quick):
    for form, opts in (("hub", {}), ("saved", {"names": "all", "dtype": "f16", "seed": 2}), ("legacy", {"seed": 3})):
        opts["max_positions"] = 1536  # the longest golden text is 1,402 tokens
        path = os.path.join(tmp, "bart-" + form)
        info = gen_seq2seq.make_folder(path, "bart", tokenizer=form, **opts)
        V = info["vocab_size"]
        label = "bart (%s tokenizer%s)" % (form, ", tied aliases, f16" if opts.get("dtype") else "")
        ref = seq2seq_ref.load_folder(path)
        check_forward(label, path, ref, rng, tmp, V)
        cases, texts = bpe_golden(form)
        picked = [c for c in cases["encode"] if texts[c[0]].strip(" \t") and not any(ch in texts[c[0]] for ch in "\n\r\0\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")]
        if quick:
            picked = picked[::6]
        p = run(["tokenize", "--model", path, "--input", "-"], stdin="\n".join(texts[c[0]] for c in picked) + "\n")
        if p.returncode != 0:
            bad("%s tokenize" % label, p.stderr.strip())
            continue
        lines = p.stdout.split("\n")
        wrong = [(c, line) for c, line in zip(picked, lines) if parse_ids(line) != with_special(c)]
        if wrong or len(lines) < len(picked):
            c, line = wrong[0] if wrong else (picked[-1], "(missing)")
            bad("%s tokenize %r" % (label, texts[c[0]]), "%s, transformers %s" % (line, with_special(c)))
        else:
            ok("%s tokenize: %d texts as transformers 5.12.1's AutoTokenizer" % (label, len(picked)))
        dec = [d for d in cases["decode"] if all(i < V for i in d[0]) and not any(ch in d[2] for ch in "\n\r")]
        dec += [[with_special(c), None, texts[c[0]] if c[4] == 0 else c[4]] for c in picked[:300]
                if isinstance(c[4], str) or c[4] == 0]
        dec = [d for d in dec if not any(ch in d[2] for ch in "\n\r\0")]
        p = run(["tokenize", "--model", path, "--decode", "--input", "-"],
                stdin="\n".join(ids_arg(d[0]) for d in dec) + "\n")
        got = p.stdout.split("\n")
        wrong = [(d, g) for d, g in zip(dec, got) if g != d[2]]
        if p.returncode != 0 or wrong or len(got) < len(dec):
            bad("%s decode" % label, p.stderr.strip() or ("%s: %r, transformers %r" % (wrong[0][0][0], wrong[0][1],
                                                                                       wrong[0][0][2]) if wrong else
                                                          "%d lines for %d id lists" % (len(got), len(dec))))
        else:
            ok("%s decode: %d id lists as transformers (skip_special_tokens)" % (label, len(dec)))
        # generation on the golden ids, through translate (text) and generate --raw-ids
        gen_cases = [c for c in picked if 2 < len(c[1]) < 40][:4 if quick else 8]
        for beams in (1, 4):
            p = run(["translate", "--model", path, "--beam", str(beams), "--max-new", "12", "--input", "-", "--json"],
                    stdin="\n".join(texts[c[0]] for c in gen_cases) + "\n")
            recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()] if p.returncode == 0 else []
            if p.returncode != 0 or len(recs) != len(gen_cases):
                bad("%s translate --beam %d" % (label, beams), p.stderr.strip())
                continue
            for c, r in zip(gen_cases, recs):
                src = with_special(c)
                want = bart_reference_ids(ref, src, beams, 12)
                if r["src"] != src or r["ids"] != want:
                    bad("%s translate --beam %d of %r" % (label, beams, texts[c[0]]),
                        "src %s ids %s, reference src %s ids %s" % (r["src"], r["ids"], src, want))
                    break
            else:
                ok("%s translate --beam %d: %d texts, ids as the reference (forced <s>, forced eos)" %
                   (label, beams, len(gen_cases)))
        sources = [[int(x) for x in rng.integers(3, V, n)] for n in (1, 5, 17)]
        args = ["generate", "--model", path, "--beam", "4", "--max-new", "9", "--raw-ids"]
        for src in sources:
            args += ["--src", ids_arg(src)]
        p = run(args)
        outs = [parse_ids(line) for line in p.stdout.strip().split("\n")] if p.returncode == 0 else None
        wants = [unforced(bart_reference_ids(ref, src, 4, 9), 0) for src in sources]
        if outs != wants:
            bad("%s generate --raw-ids --beam 4" % label, p.stderr.strip() or "%s, reference %s" % (outs, wants))
        else:
            ok("%s generate --raw-ids --beam 4: %d sources as the reference" % (label, len(sources)))
        if form == "hub":
            check_bart_misuse(label, path)
            check_ngram(tmp, path, V, rng)
            if not quick:
                check_variants(label, path, tmp, V, rng)
    check_bart_cnn_vocab(tmp)
    for kind in gen_seq2seq.BART_MALFORMED:
        path = os.path.join(tmp, "bad-bart-%s" % kind)
        words = gen_seq2seq.make_malformed(path, "bart", kind)
        p = run(["translate", "--model", path, "the house"])
        lines = p.stderr.strip().splitlines()
        msg = lines[0].split(path + ": ", 1)[-1] if lines else ""     # the words in the message, not the path
        if p.returncode < 0 or p.returncode not in (1, 2) or len(lines) != 1 or not all(w in msg for w in words):
            bad("bart malformed %s" % kind, "exit %d, stderr %r" % (p.returncode, p.stderr))
        else:
            ok("bart malformed %s: %s" % (kind, lines[0][:100]))


def check_ngram(tmp, path, V, rng):
    """no_repeat_ngram_size 1, 2 and 3 through --no-repeat-ngram, greedy and beam 4, on random sources, against
    the reference (NoRepeatNGramLogitsProcessor; beam scores without renormalization, the folder's
    renormalize_logits false), and again with renormalize_logits true (the ban then renormalizes). The bans
    must change some outputs, else the check proves nothing."""
    import shutil
    renorm = os.path.join(tmp, "bart-renorm")
    shutil.rmtree(renorm, ignore_errors=True)
    shutil.copytree(path, renorm)
    with open(os.path.join(renorm, "generation_config.json")) as f:
        gc = json.load(f)
    gc["renormalize_logits"] = True
    with open(os.path.join(renorm, "generation_config.json"), "w") as f:
        json.dump(gc, f)
    sources = [[int(x) for x in rng.integers(3, V, n)] for n in (1, 2, 4, 7, 12, 20)]
    for folder, label in ((path, "bart"), (renorm, "bart (renormalize_logits)")):
        ref = seq2seq_ref.load_folder(folder)
        for n in (1, 2, 3):
            for beams in (1, 4):
                args = ["generate", "--model", folder, "--beam", str(beams), "--max-new", "14", "--raw-ids",
                        "--no-repeat-ngram", str(n)]
                for src in sources:
                    args += ["--src", ids_arg(src)]
                p = run(args)
                outs = [parse_ids(line) for line in p.stdout.strip().split("\n")] if p.returncode == 0 else None
                ref.generation_config["no_repeat_ngram_size"] = n
                wants = [unforced(bart_reference_ids(ref, src, beams, 14), 0) for src in sources]
                ref.generation_config["no_repeat_ngram_size"] = 0
                plain = [unforced(bart_reference_ids(ref, src, beams, 14), 0) for src in sources]
                changed = sum(w != q for w, q in zip(wants, plain))
                what = "%s --no-repeat-ngram %d --beam %d" % (label, n, beams)
                if outs != wants:
                    bad(what, p.stderr.strip() or "%s, reference %s" % (outs, wants))
                elif changed == 0:
                    bad(what, "the bans changed none of %d outputs: the check proves nothing" % len(sources))
                else:
                    ok("%s: %d sources as the reference (%d changed by the bans)" % (what, len(sources), changed))
    # sampling bans before drawing: no output may hold an n-gram twice (the decoder start and the forced
    # <s>, which generate does not print, count), where the same draws without the bans do
    def repeats(outs, n):
        return [o for o in outs if len({tuple(([2, 0] + o)[i:i + n]) for i in range(len(o) + 3 - n)}) != len(o) + 3 - n]
    # the draws without bans: the same folder without its no_repeat_ngram_size (the CLI refuses
    # --no-repeat-ngram 0 as misuse)
    plain_path = path.rstrip("/") + "-no-ngram"
    if not os.path.isdir(plain_path):
        os.mkdir(plain_path)
        for name in os.listdir(path):
            if name != "generation_config.json":
                os.symlink(os.path.join(os.path.abspath(path), name), os.path.join(plain_path, name))
        with open(os.path.join(path, "generation_config.json")) as f:
            gc = json.load(f)
        gc.pop("no_repeat_ngram_size", None)
        with open(os.path.join(plain_path, "generation_config.json"), "w") as f:
            json.dump(gc, f)
    for n, temperature in ((1, "0.3"), (2, "0.05")):
        got = {}
        for m in (n, 0):
            args = ["generate", "--model", path if m else plain_path, "--temperature", temperature, "--seed", "11",
                    "--max-new", "14", "--raw-ids"] + (["--no-repeat-ngram", str(m)] if m else [])
            for src in sources:
                args += ["--src", ids_arg(src)]
            p = run(args)
            got[m] = [parse_ids(line) for line in p.stdout.strip().split("\n")] if p.returncode == 0 else None
        if got[n] is None or got[0] is None:
            bad("bart sampling --no-repeat-ngram %d" % n, p.stderr.strip())
        elif repeats(got[n], n):
            bad("bart sampling --no-repeat-ngram %d" % n, "repeated n-grams in %s" % repeats(got[n], n)[0])
        elif not repeats(got[0], n):
            bad("bart sampling --no-repeat-ngram %d" % n, "no repeats without the bans either: the check proves nothing")
        else:
            ok("bart sampling --no-repeat-ngram %d: no n-gram twice in %d outputs (%d repeat one without)" %
               (n, len(got[n]), len(repeats(got[0], n))))


def check_bart_cnn_vocab(tmp):
    """vocab_size one below the tokenizer (facebook/bart-large-cnn: 50264, its <mask> 50264): the folder
    loads and translates, text holding <mask> fails with one line naming the token and vocab_size."""
    import gen_marian
    path = os.path.join(tmp, "bart-cnn-vocab")
    info = gen_seq2seq.make_folder(path, "bart", seed=5)
    V = info["vocab_size"] - 1
    w = gen_marian.read_safetensors(os.path.join(path, "model.safetensors"))
    w["model.shared.weight"] = w["model.shared.weight"][:V]
    w["final_logits_bias"] = w["final_logits_bias"][:, :V]
    gen_marian.write_safetensors(os.path.join(path, "model.safetensors"), w)
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["vocab_size"] = V
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    ref = seq2seq_ref.load_folder(path)
    p = run(["translate", "--model", path, "--beam", "2", "--max-new", "6", "--json", "the house sees a big dog"])
    rec = json.loads(p.stdout.splitlines()[0]) if p.returncode == 0 and p.stdout.strip() else None
    if not rec or rec["ids"] != bart_reference_ids(ref, rec["src"], 2, 6):
        bad("bart vocab_size below the tokenizer's <mask>: translate", p.stderr.strip() or str(rec))
    else:
        ok("bart vocab_size below the tokenizer's <mask>: loads and translates as the reference")
    p = run(["translate", "--model", path, "a <mask> b"])
    lines = p.stderr.strip().splitlines()
    if p.returncode not in (1, 2) or len(lines) != 1 or "<mask>" not in lines[0] or "vocab_size" not in lines[0]:
        bad("bart text holding a token past vocab_size", "exit %d, stderr %r" % (p.returncode, p.stderr))
    else:
        ok("bart text holding a token past vocab_size: %s" % lines[0][-90:])


def check_bart_misuse(label, path):
    for args, word in ((["--target-lang", "fr_XX"], "language"), (["--source-lang", "en"], "language")):
        p = run(["translate", "--model", path] + args + ["the house"])
        lines = p.stderr.strip().splitlines()
        if p.returncode != 2 or len(lines) != 1 or word not in lines[0]:
            bad("%s %s" % (label, " ".join(args)), "exit %d, stderr %r" % (p.returncode, p.stderr))
        else:
            ok("%s refuses %s: %s" % (label, " ".join(args), lines[0][:80]))


def main():
    if "--only-bart" in sys.argv:
        vkf_testlib.VKFORMER = sys.argv[1]
        with tempfile.TemporaryDirectory(prefix="vkf-seq2seq-") as tmp:
            check_bart(tmp, np.random.default_rng(3), "--quick" in sys.argv)
        print("test_seq2seq: %d passed, %d failed" % (vkf_testlib.passed, vkf_testlib.failed))
        sys.exit(1 if vkf_testlib.failed else 0)
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    vkf_testlib.VKFORMER = sys.argv[1]
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(3)
    texts = STRINGS[:6] + gen_seq2seq.corpus(11, 4 if quick else 10)
    with tempfile.TemporaryDirectory(prefix="vkf-seq2seq-") as tmp:
        for family in ("m2m_100", "nllb", "mbart"):
            for variant, opts in (("hub", {}), ("aliases-f16", {"names": "all", "dtype": "f16", "seed": 2})):
                path = os.path.join(tmp, "%s-%s" % (family, variant))
                info = gen_seq2seq.make_folder(path, family, **opts)
                label = "%s (%s)" % (family, variant)
                tok = seq2seq_ref.Tokenizer(path)
                ref = seq2seq_ref.load_folder(path)
                if opts.get("dtype") == "f16":   # the reference on the file's values
                    ref.w = {k: v for k, v in ref.w.items()}
                check_forward(label, path, ref, rng, tmp, info["vocab_size"])
                if variant == "hub":
                    check_generate(label, path, tok, family, texts)
                    check_tokenizer(label, path, tok, family, rng)
                    check_variants(label, path, tmp, info["vocab_size"], rng)
                    check_misuse(label, path, family)
                    check_sharded(label, path, tmp, info["vocab_size"], rng)
        for family in ("nllb", "mbart"):
            check_saved_form(family, tmp, rng, quick)
        check_malformed(tmp)
        check_bart(tmp, rng, quick)
    print("test_seq2seq: %d passed, %d failed" % (vkf_testlib.passed, vkf_testlib.failed))
    sys.exit(1 if vkf_testlib.failed else 0)


if __name__ == "__main__":
    main()
