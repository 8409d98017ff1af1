#!/usr/bin/env python3
"""Golden tokenization data of the T5 family's tests (tests/test_t5.py), made by the real transformers:

usage: ../shared/tools/hf_python.sh tools/make_t5_cases.py [--out tests/data/t5/tokenizer.json.xz]

A T5-like SentencePiece Unigram model is trained here (<pad> 0, </s> 1, <unk> 2, no <s>, nmt_nfkc; the corpus:
the words of tests/gen_seq2seq.py and tests/data/tokenizers/texts.json.xz), and transformers 5.12's
T5Tokenizer reads it from three folders:
  spm     spiece.model + tokenizer_config.json (extra_ids 20): the hub's slow form;
  legacy  tokenizer.json as older converters wrote it (Metaspace add_prefix_space, a normalizer Sequence of
          Precompiled and Replace(" {2,}", " ")) + tokenizer_config.json: the hub's fast form;
  saved   what save_pretrained of the spm folder writes (tokenizer.json + tokenizer_config.json).
The three must give the same ids for every text (checked here: transformers rebuilds T5Tokenizer's pipeline
from any of them). Written, xz-compressed JSON:
  {"transformers": version, "spm": base64 of spiece.model, "extra_ids": 20, "saved": the saved tokenizer.json,
   "texts": [...], "ids": [ids of each text with </s>], "decode": [[ids, decode(skip_special_tokens=True)], ...]}
"""
import argparse
import base64
import io
import json
import lzma
import os
import random
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.dont_write_bytecode = True

EXTRA_IDS = 20
SPECIALS = ["<extra_id_0> the house <extra_id_1>", "summarize: the cat sees a dog</s>", "x</s>y <pad> <unk>",
            "translate English to German: the house is big.", "  leading and trailing  ", "<extra_id_19><extra_id_7>",
            "tabs\tand\u00a0no-break spaces", "ﬁne ① Ｆｕｌｌ ² naïve café", "日本語のテキスト", "emoji 🙂 ✨",
            "<extra_id_20> is no token", "a <s> b", "question: what is it? context: a house."]


def texts():
    import gen_seq2seq  # noqa: E402
    with open(os.path.join(HERE, "..", "tests", "data", "tokenizers", "texts.json.xz"), "rb") as f:
        pool = json.loads(lzma.decompress(f.read()))
    keep = [t for t in pool if t.strip() and not any(c in t for c in "\n\r\0") and len(t) < 400]
    r = random.Random(5)
    return SPECIALS + r.sample(keep, min(700, len(keep))) + gen_seq2seq.corpus(21, 60), keep


def train(corpus):
    import sentencepiece as spm
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=m, model_type="unigram",
                                   vocab_size=1200, hard_vocab_limit=False, minloglevel=2, num_threads=1,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=0.99)
    return m.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "t5", "tokenizer.json.xz"))
    a = ap.parse_args()
    import transformers
    from transformers import AutoTokenizer
    all_texts, pool = texts()
    model = train(pool[:3000] + all_texts)
    tmp = tempfile.mkdtemp(prefix="t5-cases-")
    tc = {"extra_ids": EXTRA_IDS, "tokenizer_class": "T5Tokenizer", "eos_token": "</s>", "unk_token": "<unk>",
          "pad_token": "<pad>", "additional_special_tokens": ["<extra_id_%d>" % i for i in range(EXTRA_IDS)]}
    spm_dir = os.path.join(tmp, "spm")
    os.makedirs(spm_dir)
    with open(os.path.join(spm_dir, "spiece.model"), "wb") as f:
        f.write(model)
    with open(os.path.join(spm_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f)
    tok = AutoTokenizer.from_pretrained(spm_dir)
    saved_dir = os.path.join(tmp, "saved")
    tok.save_pretrained(saved_dir)
    with open(os.path.join(saved_dir, "tokenizer.json"), encoding="utf-8") as f:
        saved = f.read()
    legacy = json.loads(saved)
    legacy["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}]}
    legacy["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    legacy["normalizer"] = {"type": "Sequence", "normalizers": [
        legacy["normalizer"], {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    legacy_dir = os.path.join(tmp, "legacy")
    os.makedirs(legacy_dir)
    with open(os.path.join(legacy_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(legacy, f, ensure_ascii=False)
    with open(os.path.join(legacy_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f)
    toks = {"spm": tok, "saved": AutoTokenizer.from_pretrained(saved_dir),
            "legacy": AutoTokenizer.from_pretrained(legacy_dir)}
    ids = [tok(t).input_ids for t in all_texts]
    for name, t in toks.items():
        other = [t(x).input_ids for x in all_texts]
        bad = [i for i, (p, q) in enumerate(zip(ids, other)) if p != q]
        if bad:
            sys.exit("make_t5_cases: the %s folder tokenizes %r as %s, the spm folder as %s" %
                     (name, all_texts[bad[0]], other[bad[0]], ids[bad[0]]))
    r = random.Random(9)
    V = len(tok)
    lists = [[r.randrange(V + 4) for _ in range(r.randint(1, 14))] for _ in range(400)]
    lists += [[0, 1, 2], [V - 1, V - 2, 5, 1, 0], [1], list(range(3, 30)), [V + 3, 7, V - EXTRA_IDS]]
    decode = [[l, toks["spm"].decode(l, skip_special_tokens=True)] for l in lists]
    for name, t in toks.items():
        for l, text in decode:
            if t.decode(l, skip_special_tokens=True) != text:
                sys.exit("make_t5_cases: the %s folder decodes %s differently" % (name, l))
    out = {"transformers": transformers.__version__, "spm": base64.b64encode(model).decode("ascii"),
           "extra_ids": EXTRA_IDS, "saved": saved, "texts": all_texts, "ids": ids, "decode": decode}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "wb") as f:
        f.write(lzma.compress(json.dumps(out, ensure_ascii=False).encode("utf-8"), preset=9))
    print("make_t5_cases: %d texts, %d id lists, vocabulary %d (transformers %s): %s" %
          (len(all_texts), len(decode), V, transformers.__version__, a.out))


if __name__ == "__main__":
    main()
