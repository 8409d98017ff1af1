#!/usr/bin/env python3
"""Holds tests/seq2seq_ref.py (the tests' reference of M2M-100, NLLB-200, mBART-50 and BART) against the
real Hugging Face transformers, on folders tests/gen_seq2seq.py writes.

usage: ../shared/tools/hf_python.sh tools/check_seq2seq_hf.py [--strings N] [--out DIR]

For each family: the reference's logits against the transformers model's (teacher forcing, pad ids
inside), greedy and beam-4 generate() ids with forced_bos_token_id = the target language, and the
tokenizer on N strings (default 2000: scripts, emoji, whitespace runs, digits, punctuation):
  - M2M-100 and mBART-50: AutoTokenizer on the folder (the slow files transformers 5.x converts), ids
    with src_lang set, and decode(skip_special_tokens=True) of random id lists, equal to the reference;
  - NLLB and mBART-50: transformers 5.x runs these through tokenizer.json (the hub ships one, and
    save_pretrained writes only that); a folder holding only sentencepiece.bpe.model is converted on
    load into a tokenizers model whose segmentation differs from the SentencePiece model's own on some
    strings (and, for NLLB, with <mask> ahead of the 202 language codes, every code one id later than
    fairseq and the hub place it). vkformer reads tokenizer.json where a folder has one (checked against
    transformers' own output by tests/test_seq2seq.py's save_pretrained folders and test_hftok's 19,132
    cases) and the SentencePiece model itself where it has not; the agreement of the two on these
    slow-only folders is printed for information, not checked.
BART (BartForConditionalGeneration, each of gen_seq2seq's tokenizer forms: hub vocab.json + merges.txt,
save_pretrained tokenizer.json, 4.x slow files): logits (teacher forcing, pad inside), generate() greedy
and beam 4 with the folder's generation_config (forced_bos_token_id 0, forced_eos_token_id 2,
early_stopping, no_repeat_ngram_size 3) against the reference on the golden cases' ids, generate() on
random ids, no_repeat_ngram_size 1 to 3 with and without renormalize_logits (hub form), and
AutoTokenizer on the model folder against the golden cases test_seq2seq uses (ids with special tokens
of every text, decode(skip_special_tokens=True) of every id list).
Prints one line per check and a summary; exit 1 on any mismatch.
"""
import argparse
import os
import random
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

# tokenizers 0.23 renamed RobertaProcessing's `cls` to `cls_token`; transformers 5.12.1's RobertaTokenizer
# (BART's) still passes `cls`
import tokenizers.processors as _procs  # noqa: E402
_RobertaProcessing = _procs.RobertaProcessing


def _roberta_processing(*args, cls=None, **kw):
    if cls is not None:
        kw["cls_token"] = cls
    return _RobertaProcessing(*args, **kw)


_procs.RobertaProcessing = _roberta_processing

import gen_seq2seq  # noqa: E402
import marian_ref  # noqa: E402
import seq2seq_ref  # noqa: E402

LANGS = {"m2m_100": ("en", "fr", "__fr__"), "nllb": ("eng_Latn", "fra_Latn", "fra_Latn"),
         "mbart": ("en_XX", "ro_RO", "ro_RO")}
failures = 0


def report(ok, what):
    global failures
    failures += 0 if ok else 1
    print("%s %s" % ("ok  " if ok else "FAIL", what))


def strings(n, seed=9):
    r = random.Random(seed)
    pool = gen_seq2seq.WORDS + ["🙂", "✨", "42", "3.14", "—", "«", "»", "naïve", "Straße", "ﬁ", "①", "Ｆｕｌｌ", "\u00a0"]
    out = []
    for _ in range(n):
        k = r.randint(1, 12)
        s = ""
        for _ in range(k):
            s += r.choice(pool) + r.choice([" ", " ", "  ", "", ", ", ". "])
        out.append(s if r.random() < 0.8 else "  " + s + "   ")
    return out


def check_bart(tmp, rng, AutoModelForSeq2SeqLM, AutoTokenizer):
    import test_seq2seq
    for form in ("hub", "saved", "legacy"):
        path = os.path.join(tmp, "bart-" + form)
        info = gen_seq2seq.make_folder(path, "bart", tokenizer=form, max_positions=1536, seed=7)
        V = info["vocab_size"]
        hf = AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        ref = seq2seq_ref.load_folder(path)
        worst = 0.0
        for s_len, t_len in ((1, 1), (9, 6), (30, 17)):
            src = [int(x) for x in rng.integers(3, V, s_len)]
            tgt = [2] + [int(x) for x in rng.integers(3, V, t_len - 1)]
            if t_len > 3:
                tgt[2] = 1
            with torch.no_grad():
                want = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt])).logits[0].numpy()
            got = marian_ref.forward_logits(ref, src, tgt)
            worst = max(worst, float(np.abs(got - want).max()))
        report(worst < 1e-4, "bart (%s) logits: worst |reference - transformers| %.3g" % (form, worst))
        cases, texts = test_seq2seq.bpe_golden(form)
        sources = [test_seq2seq.with_special(c) for c in cases["encode"] if 2 < len(c[1]) < 40][:15]
        sources += [[int(x) for x in rng.integers(3, V, n)] for n in (1, 5, 17, 33, 60)]
        same = 0
        for src in sources:
            for beams in (1, 4):
                g = hf.generate(input_ids=torch.tensor([src]), num_beams=beams, max_new_tokens=12)[0].tolist()[1:]
                if g and g[-1] == 2:
                    g = g[:-1]
                same += g == test_seq2seq.bart_reference_ids(ref, src, beams, 12)
        report(same == 2 * len(sources), "bart (%s) generate: %d of %d (%d sources, greedy and beam 4, the folder's "
               "forced_bos/forced_eos/early_stopping) identical" % (form, same, 2 * len(sources), len(sources)))
        if form == "hub":
            # no_repeat_ngram_size 1..3, with and without renormalize_logits, on random sources
            same = total = changed = 0
            for n in (1, 2, 3):
                for renorm in (False, True):
                    ref.generation_config.update(no_repeat_ngram_size=n, renormalize_logits=renorm)
                    for src in [[int(x) for x in rng.integers(3, V, k)] for k in (2, 6, 15)]:
                        for beams in (1, 4):
                            g = hf.generate(input_ids=torch.tensor([src]), num_beams=beams, max_new_tokens=14,
                                            no_repeat_ngram_size=n, renormalize_logits=renorm)[0].tolist()[1:]
                            if g and g[-1] == 2:
                                g = g[:-1]
                            mine = test_seq2seq.bart_reference_ids(ref, src, beams, 14)
                            ref.generation_config["no_repeat_ngram_size"] = 0
                            changed += mine != test_seq2seq.bart_reference_ids(ref, src, beams, 14)
                            ref.generation_config["no_repeat_ngram_size"] = n
                            same += g == mine
                            total += 1
            ref.generation_config.update(no_repeat_ngram_size=3, renormalize_logits=False)
            report(same == total, "bart no_repeat_ngram_size 1..3 (renormalize_logits false and true, greedy and beam "
                   "4): %d of %d identical (%d changed by the bans)" % (same, total, changed))
        tok = AutoTokenizer.from_pretrained(path)
        enc_same = sum(tok(texts[c[0]])["input_ids"] == test_seq2seq.with_special(c) for c in cases["encode"])
        dec_same = sum(tok.decode(d[0], skip_special_tokens=True) == d[2] for d in cases["decode"])
        report(enc_same == len(cases["encode"]) and dec_same == len(cases["decode"]),
               "bart (%s) tokenizer %s on the model folder: %d of %d golden encodes, %d of %d decodes" % (
                   form, type(tok).__name__, enc_same, len(cases["encode"]), dec_same, len(cases["decode"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strings", type=int, default=2000)
    ap.add_argument("--out")
    a = ap.parse_args()
    import transformers
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    tmp = a.out or tempfile.mkdtemp(prefix="check-seq2seq-")
    texts = strings(a.strings)
    rng = np.random.default_rng(5)
    for family in ("m2m_100", "nllb", "mbart"):
        path = os.path.join(tmp, family)
        info = gen_seq2seq.make_folder(path, family)
        V = info["vocab_size"]
        src_lang, tgt_lang, tgt_token = LANGS[family]
        hf = AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        ref = seq2seq_ref.load_folder(path)
        worst = 0.0
        for s_len, t_len in ((1, 1), (9, 6), (30, 17)):
            src = [int(x) for x in rng.integers(3, V, s_len)]
            tgt = [2] + [int(x) for x in rng.integers(3, V, t_len - 1)]
            if t_len > 3:
                tgt[2] = 1
            with torch.no_grad():
                want = hf(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([tgt])).logits[0].numpy()
            got = marian_ref.forward_logits(ref, src, tgt)
            worst = max(worst, float(np.abs(got - want).max()))
        report(worst < 1e-4, "%s logits: worst |reference - transformers| %.3g" % (family, worst))
        tok = seq2seq_ref.Tokenizer(path)
        lang_id = tok.lang_id[tgt_lang if family != "m2m_100" else "fr"]
        ref = seq2seq_ref.load_folder(path, lang_id)
        same = 0
        for text in texts[:20]:
            src = tok.encode(text, src_lang)
            for beams in (1, 4):
                g = hf.generate(input_ids=torch.tensor([src]), num_beams=beams, max_new_tokens=12,
                                forced_bos_token_id=lang_id)[0].tolist()[1:]
                if g and g[-1] == 2:
                    g = g[:-1]
                mine = marian_ref.greedy(ref, src, 12) if beams == 1 else marian_ref.beam_search(ref, src, beams, 12)[0]
                same += g == mine
        report(same == 40, "%s generate: %d of 40 (20 sources, greedy and beam 4) identical" % (family, same))
        hft = AutoTokenizer.from_pretrained(path, src_lang=src_lang)
        enc_same = dec_same = 0
        informational = family in ("nllb", "mbart")
        for text in texts:
            want = hft(text).input_ids
            mine = tok.encode(text, src_lang)
            if informational:
                enc_same += hft.convert_ids_to_tokens(want)[1:] == [
                    ("</s>" if i == 2 else tok.sp.id_to_piece(i - 1) if i >= 4 else "<unk>") for i in mine[1:]]
            else:
                enc_same += want == mine
        if informational:
            print("info %s slow files: %d of %d texts give the same pieces as transformers' conversion; language "
                  "id of %s: transformers %d, fairseq/hub %d" % (family, enc_same, len(texts), src_lang,
                                                                hft.convert_tokens_to_ids(src_lang), tok.lang_id[src_lang]))
        else:
            report(enc_same == len(texts), "%s tokenizer: %d of %d texts give the same ids" % (family, enc_same, len(texts)))
            lists = [[int(x) for x in rng.integers(0, len(hft), rng.integers(1, 15))] for _ in range(500)]
            for ids in lists:
                dec_same += hft.decode(ids, skip_special_tokens=True) == tok.decode(ids)
            report(dec_same == len(lists), "%s decode: %d of %d id lists give the same text" % (family, dec_same, len(lists)))
    check_bart(tmp, rng, AutoModelForSeq2SeqLM, AutoTokenizer)
    print("check_seq2seq_hf: %s" % ("every check passed" if not failures else "%d checks failed" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
