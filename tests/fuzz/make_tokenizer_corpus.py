#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_tokenizer.c into a directory.

Usage: make_tokenizer_corpus.py DIR [--max-len BYTES]

Seeds, each at most --max-len bytes (default 65536, the fuzzer's -max_len):
  spm_*        SentencePiece models trained here (Debian's python3-sentencepiece):
               unigram and BPE, identity and a small custom normalization (a charsmap
               small enough to fit), user-defined symbols and byte fallback;
  spmcm_*      those models with a random charsmap table in normalizer_spec or
               denormalizer_spec: random bytes, random units under a plausible
               header, the real table with random units or strings changed, cut
               short, or with its size field changed (the crash of issue
               "Untrusted model folders");
  json_*       tokenizer.json files: the small golden ones of tests/data/tokenizers
               (those under --max-len), and hand-written ones that use every
               component the reader knows (BPE and Unigram, each normalizer,
               pre-tokenizer, post-processor and decoder, added tokens of each kind,
               a Precompiled charsmap taken from a trained model);
  jsonbad_*    the malformed files of tests/gen_bad_tokenizers.py;
  bpe_*        byte-level BPE folders of BART and Whisper packed as fuzz_tokenizer.c
               reads them ("BPEB\n" or "BPEW\n", then files "NAME\n..." separated by
               0x1e): gen_bad_tokenizers.py's small valid folders with config
               variations, the golden folders of tools/make_bpe_cases.py cut to their
               first 600 ids, and (bpebad_*) gen_bad_tokenizers.py's malformed folders.
Standard library and sentencepiece only. Files already in DIR are replaced.
"""
import base64
import contextlib
import importlib.util
import io
import json
import lzma
import os
import random
import struct
import sys
import tempfile

import sentencepiece as spm

sys.dont_write_bytecode = True
TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORPUS = [
    "Hello world, this is a small test corpus.",
    "The quick brown fox jumps over the lazy dog.",
    "Der Bär läuft über die Straße und äßt Äpfel.",
    "Le café est très chaud, n'est-ce pas ?",
    "日本語のテキストです。東京は大きい都市です。",
    "Numbers: 1234567890, dates 2024-01-31, prices 9,99 €.",
    "full-width ＡＢＣ and ligature ﬁ, ① ㍻",
]


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def varint(v):
    out = bytearray()
    while True:
        c = v & 0x7f
        v >>= 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def small_rules(tmp):
    rules = {"ﬁ": "fi", "①": "1", "Ａ": "A", "Ｂ": "B", "Ｃ": "C", "㍻": "平成", "e\u0301": "é", "ｅ": "e",
             "ｅ\u0301": "é", "\u200b": "", "\u3000": " ", "\t": " "}
    path = os.path.join(tmp, "rules.tsv")
    with open(path, "w", encoding="utf-8") as f:
        for k, v in sorted(rules.items()):
            f.write("%s\t%s\n" % (" ".join("%X" % ord(c) for c in k), " ".join("%X" % ord(c) for c in v)))
    return path


def train(**opts):
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS * 4), model_writer=m, hard_vocab_limit=False,
                                   minloglevel=2, **opts)
    return m.getvalue()


def main():
    args = sys.argv[1:]
    max_len = 65536
    if "--max-len" in args:
        i = args.index("--max-len")
        max_len = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit("usage: make_tokenizer_corpus.py DIR [--max-len BYTES]")
    out = args[0]
    os.makedirs(out, exist_ok=True)
    count = [0]

    def put(name, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        if len(data) > max_len:
            return
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        count[0] += 1

    charsmap = load("test_charsmap", os.path.join(TESTS, "test_charsmap.py"))
    r = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        rules = small_rules(tmp)
        models = {
            "unigram_rules": train(model_type="unigram", vocab_size=100, normalization_rule_tsv=rules),
            "bpe_identity": train(model_type="bpe", vocab_size=100, normalization_rule_name="identity"),
            "unigram_user_bytes": train(model_type="unigram", vocab_size=400, byte_fallback=True,
                                        normalization_rule_tsv=rules, user_defined_symbols=["<sep>", "Köln"],
                                        control_symbols=["<ctrl>"]),
            "char": train(model_type="char", vocab_size=80, normalization_rule_tsv=rules),
            "word": train(model_type="word", vocab_size=40, normalization_rule_name="identity"),
        }
    for name, model in models.items():
        put("spm_" + name, model)
    base = models["unigram_rules"]
    blob = charsmap.charsmap_of(base)
    units, strings = charsmap.units_of(blob)
    for k in range(60):
        kind = k % 6
        if kind == 0:
            table = bytes(r.randrange(256) for _ in range(r.choice([3, 40, 900, 5000])))
        elif kind == 1:
            n = r.choice([256, 512, 1024])
            table = struct.pack("<I", 4 * n) + bytes(r.randrange(256) for _ in range(4 * n + r.randrange(200)))
        elif kind == 2:
            us = list(units)
            for _ in range(r.randint(1, 8)):
                us[r.randrange(len(us))] = r.getrandbits(32)
            table = struct.pack("<I", len(us) * 4) + struct.pack("<%dI" % len(us), *us) + strings
        elif kind == 3:
            s2 = bytearray(strings)
            for _ in range(r.randint(1, 4)):
                s2[r.randrange(len(s2))] = r.randrange(256)
            table = blob[:4 + len(units) * 4] + bytes(s2)
        elif kind == 4:
            table = blob[:r.randrange(len(blob))]
        else:
            table = struct.pack("<I", r.randrange(len(blob) * 2)) + blob[4:]
        put("spmcm_%02d" % k, charsmap.with_charsmap(base, table, 3 if k % 4 else 5))
    put("spmcm_chain33", charsmap.with_charsmap(base, charsmap.chain_blob(33), 3))
    put("spmcm_chain32", charsmap.with_charsmap(base, charsmap.chain_blob(32), 3))

    # tokenizer.json: the small golden files
    data = os.path.join(TESTS, "data", "tokenizers")
    for name in sorted(os.listdir(data)):
        if (name.endswith(".json.xz") and not name.endswith((".cases.json.xz", ".folder.json.xz")) and
                name not in ("texts.json.xz", "bpe_texts.json.xz")):
            with open(os.path.join(data, name), "rb") as f:
                put("json_" + name[:-8], lzma.decompress(f.read()))
    # hand-written ones over every component
    bad = load("gen_bad_tokenizers", os.path.join(TESTS, "gen_bad_tokenizers.py"))
    pre = [{"type": "Metaspace", "replacement": "▁", "prepend_scheme": s, "split": sp}
           for s in ("always", "first", "never") for sp in (True, False)]
    pre += [{"type": "ByteLevel", "add_prefix_space": a, "trim_offsets": True, "use_regex": u}
            for a in (True, False) for u in (True, False)]
    pre += [{"type": "Whitespace"}, {"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "Digits", "individual_digits": True}]
    pre += [{"type": "Split", "pattern": p, "behavior": b, "invert": i}
            for p, b, i in (({"String": " "}, "Removed", False), ({"Regex": "\\s+"}, "Isolated", True),
                            ({"Regex": "(?<=a)"}, "MergedWithPrevious", False), ({"String": ""}, "MergedWithNext", False),
                            ({"Regex": "[0-9]+|a*"}, "Contiguous", False))]
    norms = [{"type": t} for t in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase")]
    norms += [{"type": "Strip", "strip_left": True, "strip_right": False}, {"type": "Prepend", "prepend": "▁"},
              {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
              {"type": "Replace", "pattern": {"Regex": " {2,}|x*"}, "content": "-"},
              {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()}]
    decs = [{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 1}]
    posts = [{"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
             {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1], "trim_offsets": True,
              "add_prefix_space": True},
             {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}]
    added = [{"id": 50, "content": c, "single_word": sw, "lstrip": ls, "rstrip": rs, "normalized": nz, "special": sp}
             for c, sw, ls, rs, nz, sp in (("<s>", False, False, False, False, True), ("</s>", False, True, True, False, True),
                                            ("hello", True, False, False, True, False), ("Ⅻ", False, False, False, True, False),
                                            ("<mask>", False, True, False, False, True))]
    bytes_vocab = {"<0x%02X>" % b: 100 + b for b in range(256)}
    for k in range(40):
        for base_fn in (bad.bpe_base, bad.unigram_base):
            t = base_fn()
            if base_fn is bad.bpe_base:
                t["model"]["vocab"].update({"<s>": 8, "</s>": 9, " ": 10, "Ġ": 11, "h": 12, "e": 13, "l": 14, "o": 15})
                t["model"]["vocab"].update(bytes_vocab)
                t["model"].update(byte_fallback=bool(k % 2), fuse_unk=bool(k % 3), ignore_merges=bool(k % 5 == 0))
                if k % 7 == 0:
                    t["model"]["merges"] = [m.split(" ") for m in t["model"]["merges"]]
            else:
                t["model"]["vocab"] += [["<s>", 0.0], ["</s>", 0.0], ["▁a", -0.5], ["ab", -1.2]] + \
                    [[p, -5.0] for p in bytes_vocab]
                t["model"]["byte_fallback"] = bool(k % 2)
            t["normalizer"] = {"type": "Sequence", "normalizers": r.sample(norms, r.randint(0, 4))}
            t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": r.sample(pre, r.randint(0, 3))}
            t["decoder"] = {"type": "Sequence", "decoders": r.sample(decs, r.randint(0, 3))}
            t["post_processor"] = r.choice(posts + [t["post_processor"]])
            t["added_tokens"] = t["added_tokens"] + r.sample(added, r.randint(0, 4))
            put("json_%s_%02d" % ("bpe" if base_fn is bad.bpe_base else "unigram", k),
                json.dumps(t, ensure_ascii=bool(k % 2)))
    with tempfile.TemporaryDirectory() as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            sys.argv = ["gen_bad_tokenizers.py", tmp]
            bad.main()
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".json"):
                with open(os.path.join(tmp, name), "rb") as f:
                    put("jsonbad_" + name[:-5], f.read())
    bpe_seeds(put, bad, data, r)
    print("make_tokenizer_corpus: %d seeds in %s" % (count[0], out), file=sys.stderr)


def pack_bpe(kind, files):
    """A byte-level BPE folder as fuzz_tokenizer.c reads it."""
    parts = [n.encode() + b"\n" + (d if isinstance(d, bytes) else d.encode("utf-8", "surrogateescape"))
             for n, d in sorted(files.items())]
    return b"BPE" + (b"W" if kind == "whisper" else b"B") + b"\n" + b"\x1e".join(parts)


def bpe_seeds(put, bad, data, r):
    for kind in ("bart", "whisper"):
        base = bad.bpe_folder(kind)
        put("bpe_%s" % kind, pack_bpe(kind, base))
        put("bpe_%s_json" % kind, pack_bpe(kind, {"tokenizer.json": json.dumps(bad.bpe_tokenizer_json(kind)),
                                                  "tokenizer_config.json": base["tokenizer_config.json"]}))
        for k in range(12):
            files = dict(base)
            tc = json.loads(files["tokenizer_config.json"])
            tc["add_prefix_space"] = bool(k % 2)
            if kind == "whisper":
                tc["language"] = r.choice([None, "en", "German", "castilian", "zh"])
                tc["task"] = r.choice([None, "transcribe", "translate"])
                tc["predict_timestamps"] = bool(k % 3 == 0)
                if k % 4 == 1:
                    added = json.loads(files.pop("added_tokens.json"))
                    tc["added_tokens_decoder"] = {str(i): {"content": t, "special": bool(i % 2), "lstrip": k % 5 == 0}
                                                  for t, i in added.items()}
                    tc["additional_special_tokens"] = list(added)[:3]
            else:
                tc[r.choice(["bos_token", "mask_token", "sep_token"])] = r.choice(
                    ["<s>", "<mask>", {"content": "<mask>", "lstrip": True, "__type": "AddedToken"}, "<new>"])
                if k % 3 == 0:
                    files["added_tokens.json"] = json.dumps({"<extra>": 270, "Ġthe": 5})
            files["tokenizer_config.json"] = json.dumps(tc)
            put("bpe_%s_%02d" % (kind, k), pack_bpe(kind, files))
    # the golden folders, cut to their first 600 ids
    for form in ("bart_hub", "bart_legacy", "bart_saved", "whisper_hub", "whisper_legacy", "whisper_saved"):
        with open(os.path.join(data, form + ".folder.json.xz"), "rb") as f:
            files = json.loads(lzma.decompress(f.read()))
        files.pop("config.json", None)
        keep = lambda v: {t: i for t, i in v.items() if i < 600}  # noqa: E731
        if "tokenizer.json" in files:
            tj = json.loads(files["tokenizer.json"])
            tj["model"]["vocab"] = keep(tj["model"]["vocab"])
            v = tj["model"]["vocab"]
            tj["model"]["merges"] = [m for m in tj["model"]["merges"]
                                     if "".join(m if isinstance(m, list) else m.split(" ")) in v][:400]
            tj["added_tokens"] = tj["added_tokens"][:40]
            files["tokenizer.json"] = json.dumps(tj, ensure_ascii=False)
        if "vocab.json" in files:
            v = keep(json.loads(files["vocab.json"]))
            files["vocab.json"] = json.dumps(v, ensure_ascii=False)
            lines = files["merges.txt"].split("\n")
            files["merges.txt"] = "\n".join([lines[0]] + [l for l in lines[1:] if l.replace(" ", "") in v][:400])
        if "tokenizer_config.json" in files:
            tc = json.loads(files["tokenizer_config.json"])
            if "added_tokens_decoder" in tc:
                tc["added_tokens_decoder"] = dict(list(tc["added_tokens_decoder"].items())[:40])
            files["tokenizer_config.json"] = json.dumps(tc, ensure_ascii=False)
        if "added_tokens.json" in files:
            files["added_tokens.json"] = json.dumps(dict(list(json.loads(files["added_tokens.json"]).items())[:40]))
        put("bpe_golden_" + form, pack_bpe(form.split("_")[0], files))
    with tempfile.TemporaryDirectory() as tmp:
        bad.write_bad_bpe(tmp)
        with open(os.path.join(tmp, "MANIFEST_BPE"), encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 3:
                    continue
                d = os.path.join(tmp, "bpe", parts[0])
                files = {}
                for n in os.listdir(d):
                    p = os.path.join(d, n)
                    if os.path.isfile(p) and os.path.getsize(p) < 65536:
                        with open(p, "rb") as fh:
                            files[n] = fh.read()
                put("bpebad_" + parts[0], pack_bpe(parts[1], files))


if __name__ == "__main__":
    main()
