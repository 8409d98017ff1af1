#!/usr/bin/python3
"""Writes malformed tokenizer.json files for tests/test_hftok.c (mode "bad") into a
directory, with a MANIFEST: one line per file, "FILE<TAB>words its one-line message
must hold". Each is a small valid tokenizer broken one way: wrong JSON types,
unknown components, huge or sparse ids, merges that name unknown tokens or loop,
bad regexes and charsmaps, nesting past the limit, truncated or non-JSON text.
And malformed byte-level BPE folders for tokenizer.h's vkf_bpe_open (BART's and
Whisper's slow files, vocab.json + merges.txt + configs, and their tokenizer.json)
under bpe/, with MANIFEST_BPE: "FOLDER<TAB>bart|whisper<TAB>words": merges.txt lines
that are not two tokens, name unknown tokens or are not UTF-8, vocab.json, merges.txt
and tokenizer.json past 256 MiB (sparse files), bad ids and types in every config
file, an unknown Whisper language or task, no <|startoftranscript|>.
Standard library only.

usage: gen_bad_tokenizers.py OUT_DIR
"""
import base64
import copy
import json
import os
import random
import shutil
import struct
import sys


def bpe_base():
    vocab = {"<unk>": 0, "a": 1, "b": 2, "ab": 3, "c": 4, "abc": 5, "▁": 6, "▁a": 7}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<unk>", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<unk>": {"id": "<unk>", "ids": [0], "tokens": ["<unk>"]}}},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": ["a b", "ab c", "▁ a"]},
    }


def unigram_base():
    t = bpe_base()
    t["model"] = {"type": "Unigram", "unk_id": 0, "byte_fallback": False,
                  "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0], ["▁", -1.5]]}
    return t


def bytes_to_unicode():
    """GPT-2's byte -> character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_folder(kind):
    """A small valid byte-level BPE folder: {file name: text}."""
    chars = sorted(bytes_to_unicode().values())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]
    vocab = {}
    if kind == "bart":
        for t in ("<s>", "<pad>", "</s>", "<unk>"):
            vocab[t] = len(vocab)
    for c in chars:
        vocab[c] = len(vocab)
    for a, b in merges:
        vocab[a + b] = len(vocab)
    files = {"merges.txt": "#version: 0.2\n" + "".join("%s %s\n" % m for m in merges)}
    if kind == "bart":
        vocab["<mask>"] = len(vocab)
        files["special_tokens_map.json"] = json.dumps({"mask_token": {"content": "<mask>", "lstrip": True}})
        files["tokenizer_config.json"] = json.dumps({"add_prefix_space": False, "model_max_length": 1024})
    else:
        vocab["<|endoftext|>"] = len(vocab)
        specials = ["<|startoftranscript|>", "<|en|>", "<|zh|>", "<|de|>", "<|translate|>", "<|transcribe|>",
                    "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
        files["added_tokens.json"] = json.dumps({t: len(vocab) + i for i, t in enumerate(specials)})
        files["tokenizer_config.json"] = json.dumps({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                                                     "unk_token": "<|endoftext|>", "language": "en",
                                                     "task": "transcribe", "tokenizer_class": "WhisperTokenizer"})
    files["vocab.json"] = json.dumps(vocab, ensure_ascii=False)
    return files


def bpe_tokenizer_json(kind):
    files = bpe_folder(kind)
    vocab = json.loads(files["vocab.json"])
    merges = [l for l in files["merges.txt"].split("\n")[1:] if l]
    added = [{"id": i, "content": t, "special": True, "normalized": False}
             for t, i in json.loads(files.get("added_tokens.json", "{}")).items()]
    return {"version": "1.0", "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": merges}}


def write_bad_bpe(out):
    """Malformed byte-level BPE folders under out/bpe and out/MANIFEST_BPE."""
    root = os.path.join(out, "bpe")
    os.makedirs(root, exist_ok=True)
    manifest = []

    def folder(name, kind, words, change=None, json_form=False):
        d = os.path.join(root, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        files = bpe_folder(kind)
        if json_form:
            files = {"tokenizer.json": json.dumps(bpe_tokenizer_json(kind), ensure_ascii=False),
                     "tokenizer_config.json": files["tokenizer_config.json"]}
        if change:
            change(files, d)
        for fn, data in files.items():
            if data is None:
                continue
            with open(os.path.join(d, fn), "wb") as f:
                f.write(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
        manifest.append("%s\t%s\t%s" % (name, kind, words))

    def merges_line(k, text):
        def change(files, d):
            lines = files["merges.txt"].split("\n")
            lines[k] = text
            files["merges.txt"] = "\n".join(lines)
        return change

    def edit(fn, f):
        def change(files, d):
            files[fn] = f(files[fn])
        return change

    def edit_json(fn, f):
        def change(files, d):
            j = json.loads(files[fn])
            f(j)
            files[fn] = json.dumps(j, ensure_ascii=False)
        return change

    def sparse(fn, size=300 << 20):
        def change(files, d):
            files[fn] = None
            with open(os.path.join(d, fn), "wb") as f:
                f.truncate(size)
        return change

    def remove(fn):
        return lambda files, d: files.__setitem__(fn, None)

    folder("valid-bart", "bart", "")           # sanity: both valid folders load (words empty: must load)
    folder("valid-whisper", "whisper", "")
    folder("merges-three", "bart", "merges.txt line 3 is not two tokens separated by one space",
           merges_line(2, "Ġ t x"))
    folder("merges-one", "bart", "merges.txt line 2 not two tokens", merges_line(1, "Ġt"))
    folder("merges-empty-line", "bart", "merges.txt line 4 (\"\") not two tokens", merges_line(3, ""))
    folder("merges-double-space", "whisper", "merges.txt line 2 not two tokens", merges_line(1, "Ġ  t"))
    folder("merges-trailing-space", "bart", "merges.txt line 3 not two tokens", merges_line(2, "h e "))
    folder("merges-leading-space", "bart", "merges.txt line 3 not two tokens", merges_line(2, " h e"))
    folder("merges-unknown-left", "bart", "merges.txt line 2: \"zq\" is not in vocab.json", merges_line(1, "zq t"))
    folder("merges-unknown-right", "whisper", "merges.txt line 3: \"qz\" is not in vocab.json",
           merges_line(2, "h qz"))
    folder("merges-merged-unknown", "bart", "merges.txt line 2: the merged token \"tt\" is not in vocab.json",
           merges_line(1, "t t"))
    folder("merges-not-utf8", "bart", "merges.txt line 3 is not UTF-8", merges_line(2, "h\udcff e"))
    folder("merges-huge", "bart", "merges.txt is 314572800 bytes, more than the 268435456 accepted",
           sparse("merges.txt"))
    folder("merges-directory", "whisper", "merges.txt",
           lambda files, d: (files.__setitem__("merges.txt", None), os.makedirs(os.path.join(d, "merges.txt"))))
    folder("no-merges", "bart", "no tokenizer.json, and merges.txt is missing", remove("merges.txt"))
    folder("no-vocab", "whisper", "no tokenizer.json, and vocab.json is missing", remove("vocab.json"))
    folder("vocab-huge", "bart", "vocab.json is 314572800 bytes, more than", sparse("vocab.json"))
    folder("vocab-not-json", "bart", "vocab.json is not valid JSON", edit("vocab.json", lambda t: t[:-7]))
    folder("vocab-not-utf8", "whisper", "vocab.json is not valid JSON",
           edit("vocab.json", lambda t: t.encode("utf-8").replace(b'"in"', b'"i\xffn"')))
    folder("vocab-list", "bart", "vocab.json must hold an object", edit("vocab.json", lambda t: "[1, 2]"))
    folder("vocab-duplicate-key", "bart", "vocab.json is not valid JSON duplicate",
           edit("vocab.json", lambda t: t[:-1] + ', "he": 7}'))
    folder("vocab-id-string", "whisper", "vocab.json not a whole number",
           edit_json("vocab.json", lambda j: j.__setitem__("he", "7")))
    folder("vocab-id-negative", "bart", "vocab.json is -3, outside", edit_json("vocab.json", lambda j: j.__setitem__("in", -3)))
    folder("vocab-id-huge", "bart", "vocab.json outside 0..16777215",
           edit_json("vocab.json", lambda j: j.__setitem__("in", 1 << 40)))
    folder("vocab-sparse", "bart", "vocab.json too sparse", edit_json("vocab.json", lambda j: j.__setitem__("in", 9000000)))
    folder("vocab-same-id", "whisper", "vocab.json both have id 5",
           edit_json("vocab.json", lambda j: (j.__setitem__("!", 5), j.__setitem__("\"", 5))))
    folder("added-not-object", "whisper", "added_tokens.json must hold an object",
           edit("added_tokens.json", lambda t: "[\"<|x|>\"]"))
    folder("added-id-string", "whisper", "added_tokens.json the id of \"<|en|>\" is not a whole number",
           edit_json("added_tokens.json", lambda j: j.__setitem__("<|en|>", "300")))
    folder("added-id-negative", "whisper", "added_tokens.json the id of \"<|zh|>\"",
           edit_json("added_tokens.json", lambda j: j.__setitem__("<|zh|>", -1)))
    folder("config-decoder-key", "whisper", "tokenizer_config.json added_tokens_decoder key \"abc\" is not an id",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("added_tokens_decoder", {"abc": {"content": "x"}})))
    folder("config-decoder-content", "bart", "tokenizer_config.json added_tokens_decoder[300].content must be a string",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("added_tokens_decoder", {"300": {"content": 5}})))
    folder("config-token-number", "bart", "tokenizer_config.json bos_token must be a string or an object",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("bos_token", 5)))
    folder("config-lstrip-string", "bart", "special_tokens_map.json mask_token.lstrip must be true or false",
           edit_json("special_tokens_map.json", lambda j: j["mask_token"].__setitem__("lstrip", "yes")))
    folder("config-prefix-space", "bart", "tokenizer_config.json add_prefix_space must be true or false",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("add_prefix_space", "no")))
    folder("config-extra-not-list", "whisper", "tokenizer_config.json additional_special_tokens must be a list",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("additional_special_tokens", "<|en|>")))
    folder("config-not-json", "bart", "tokenizer_config.json is not valid JSON",
           edit("tokenizer_config.json", lambda t: "{" + t))
    folder("whisper-language", "whisper", "tokenizer_config.json language \"klingon\" is not one of Whisper's",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("language", "klingon")))
    folder("whisper-task", "whisper", "tokenizer_config.json task \"summarize\" is neither",
           edit_json("tokenizer_config.json", lambda j: j.__setitem__("task", "summarize")))
    folder("whisper-no-sot", "whisper", "no <|startoftranscript|>",
           edit_json("added_tokens.json", lambda j: j.pop("<|startoftranscript|>")))
    folder("json-unigram", "bart", "tokenizer.json model.type must be \"BPE\"",
           edit_json("tokenizer.json", lambda j: j["model"].__setitem__("type", "Unigram")), json_form=True)
    folder("json-list", "whisper", "tokenizer.json must hold a JSON object", edit("tokenizer.json", lambda t: "[]"),
           json_form=True)
    folder("json-huge", "bart", "tokenizer.json is 314572800 bytes, more than", sparse("tokenizer.json"), json_form=True)
    folder("json-merge-unknown", "bart", "tokenizer.json model.merges[1] \"zq\" is not in the vocabulary",
           edit_json("tokenizer.json", lambda j: j["model"]["merges"].__setitem__(1, "zq t")), json_form=True)
    folder("json-added-id", "whisper", "tokenizer.json added_tokens[0].id is not a whole number",
           edit_json("tokenizer.json", lambda j: j.__setitem__("added_tokens", [{"id": "x", "content": "<|a|>"}])),
           json_form=True)
    with open(os.path.join(out, "MANIFEST_BPE"), "w", encoding="utf-8") as f:
        f.write("\n".join(manifest) + "\n")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_bad_tokenizers.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = []

    def put(name, words, obj=None, text=None):
        data = text if text is not None else json.dumps(obj, ensure_ascii=False)
        with open(os.path.join(out, name + ".json"), "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        manifest.append("%s.json\t%s" % (name, words))

    def broken(name, words, change, base=bpe_base):
        t = base()
        change(t)
        put(name, words, t)

    good = json.dumps(bpe_base(), ensure_ascii=False)
    put("not-json", "not JSON", text="{\"model\": ")
    put("truncated", "not JSON", text=good[:len(good) // 2])
    put("empty", "not JSON", text="")
    put("binary", "not JSON", text=bytes(range(256)))
    put("deep-arrays", "not JSON", text="[" * 5000 + "]" * 5000)
    put("root-list", "not a JSON object", [1, 2])
    broken("no-model", "model is missing", lambda t: t.pop("model"))
    broken("model-wordpiece", "model.type \"WordPiece\" is not supported",
           lambda t: t["model"].update(type="WordPiece"))
    broken("model-no-type", "model.type is missing", lambda t: t["model"].pop("type"))
    broken("vocab-list", "model.vocab not an object", lambda t: t["model"].update(vocab=[["a", 1]]))
    broken("vocab-id-string", "model.vocab[\"a\"] string", lambda t: t["model"]["vocab"].update(a="1"))
    broken("vocab-id-negative", "model.vocab[\"a\"] outside", lambda t: t["model"]["vocab"].update(a=-1))
    broken("vocab-id-huge", "model.vocab[\"a\"] outside", lambda t: t["model"]["vocab"].update(a=2 ** 40))
    broken("vocab-sparse", "too sparse", lambda t: t["model"]["vocab"].update(a=16000000))
    broken("vocab-same-id", "both have id 2", lambda t: t["model"]["vocab"].update(a=2))
    broken("vocab-token-long", "token of 2000 bytes", lambda t: t["model"]["vocab"].update({"x" * 2000: 8}))
    broken("merge-unknown", "merges[1] \"zz\" not in the vocabulary",
           lambda t: t["model"].update(merges=["a b", "zz c"]))
    broken("merge-result-unknown", "merges[0] merged token \"ca\" not in the vocabulary",
           lambda t: t["model"].update(merges=["c a"]))
    broken("merge-three", "merges[0] two tokens separated by one space",
           lambda t: t["model"].update(merges=["a b c"]))
    broken("merge-two-spaces", "merges[0] two tokens", lambda t: t["model"].update(merges=["a  b"]))
    broken("merge-mixed-forms", "merges[1] where merges[0] is a string",
           lambda t: t["model"].update(merges=["a b", ["ab", "c"]]))
    broken("merge-not-pair", "merges[0] not a pair", lambda t: t["model"].update(merges=[["a", "b", "c"]]))
    broken("merge-cycle", "merges[0] a cycle",
           lambda t: (t["model"]["vocab"].update({"": 9}), t["model"].update(merges=[["", "a"]])))
    broken("merge-short-prefix", "continuing_subword_prefix panics",
           lambda t: t["model"].update(continuing_subword_prefix="##", merges=["a b"]))
    broken("merges-not-list", "model.merges not a list", lambda t: t["model"].update(merges="a b"))
    broken("dropout", "dropout random", lambda t: t["model"].update(dropout=0.1))
    broken("fuse-unk-string", "model.fuse_unk string", lambda t: t["model"].update(fuse_unk="yes"))
    broken("normalizer-unknown", "normalizer.type \"BertNormalizer\" is not supported",
           lambda t: t.update(normalizer={"type": "BertNormalizer"}))
    broken("normalizer-nested-unknown", "normalizer.normalizers[1].type \"Foo\" is not supported",
           lambda t: t["normalizer"]["normalizers"].append({"type": "Foo"}))
    broken("normalizer-type-number", "normalizer.normalizers[0].type number",
           lambda t: t["normalizer"]["normalizers"][0].update(type=3))
    broken("normalizer-type-nul", "normalizer.normalizers[0].type NUL",
           lambda t: t["normalizer"]["normalizers"][0].update(type="NF\u0000C"))
    broken("normalizer-not-object", "normalizer.normalizers[0] not an object",
           lambda t: t["normalizer"].update(normalizers=["NFC"]))
    broken("strip-flag-string", "normalizer.strip_left string, not true or false",
           lambda t: t.update(normalizer={"type": "Strip", "strip_left": "yes", "strip_right": True}))
    broken("replace-bad-regex", "normalizer.pattern.Regex \"(\" does not compile",
           lambda t: t.update(normalizer={"type": "Replace", "pattern": {"Regex": "("}, "content": " "}))
    broken("split-regex-deep", "pattern.Regex does not compile: nest deeper than 32",
           lambda t: t.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(" * 40 + "a" + ")" * 40},
                                             "behavior": "Isolated", "invert": False}))
    broken("replace-no-pattern-kind", "normalizer.pattern neither",
           lambda t: t.update(normalizer={"type": "Replace", "pattern": {"Glob": "*"}, "content": " "}))
    broken("replace-no-content", "normalizer.content is missing",
           lambda t: t.update(normalizer={"type": "Replace", "pattern": {"String": "a"}}))
    broken("precompiled-not-base64", "precompiled_charsmap not base64",
           lambda t: t.update(normalizer={"type": "Precompiled", "precompiled_charsmap": "@@@@"}))
    r = random.Random(3)
    junk = struct.pack("<I", 4096) + bytes(r.randrange(256) for _ in range(4200))
    broken("precompiled-random", "precompiled_charsmap: precompiled charsmap",
           lambda t: t.update(normalizer={"type": "Precompiled",
                                          "precompiled_charsmap": base64.b64encode(junk).decode()}))
    broken("precompiled-truncated", "precompiled charsmap truncated",
           lambda t: t.update(normalizer={"type": "Precompiled",
                                          "precompiled_charsmap": base64.b64encode(junk[:1000]).decode()}))
    broken("sequence-too-long", "normalizer.normalizers 300 items",
           lambda t: t["normalizer"].update(normalizers=[{"type": "NFC"}] * 300))
    deep = {"type": "NFC"}
    for _ in range(20):
        deep = {"type": "Sequence", "normalizers": [deep]}
    broken("sequence-too-deep", "nest deeper than 8", lambda t: t.update(normalizer=deep))
    broken("metaspace-long-replacement", "pre_tokenizer.replacement \"ab\" not one character",
           lambda t: t["pre_tokenizer"].update(replacement="ab"))
    broken("metaspace-scheme", "prepend_scheme \"sometimes\" not always, first or never",
           lambda t: t["pre_tokenizer"].update(prepend_scheme="sometimes"))
    broken("split-behavior", "pre_tokenizer.behavior \"Weird\" not one of",
           lambda t: t.update(pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": "Weird",
                                             "invert": False}))
    broken("split-no-behavior", "pre_tokenizer.behavior is missing",
           lambda t: t.update(pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "invert": False}))
    broken("pretokenizer-bert", "pre_tokenizer.type \"BertPreTokenizer\" is not supported",
           lambda t: t.update(pre_tokenizer={"type": "BertPreTokenizer"}))
    broken("pretokenizers-not-list", "pre_tokenizer.pretokenizers not a list",
           lambda t: t.update(pre_tokenizer={"type": "Sequence", "pretokenizers": {"type": "Whitespace"}}))
    broken("template-unknown-special", "post_processor.single[1].SpecialToken.id \"</s>\" not one of special_tokens",
           lambda t: t["post_processor"]["single"][1]["SpecialToken"].update(id="</s>"))
    broken("template-single-b", "single-sequence template names B",
           lambda t: t["post_processor"]["single"].append({"Sequence": {"id": "B", "type_id": 0}}))
    broken("template-ids-tokens", "has 2 ids but 1 tokens",
           lambda t: t["post_processor"]["special_tokens"]["<unk>"].update(ids=[0, 1]))
    broken("roberta-cls", "post_processor.cls not a [token, id] pair",
           lambda t: t.update(post_processor={"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": "<s>"}))
    broken("postprocessor-unknown", "post_processor.type \"ChatTemplate\" is not supported",
           lambda t: t.update(post_processor={"type": "ChatTemplate"}))
    broken("decoder-wordpiece", "decoder.type \"WordPiece\" is not supported",
           lambda t: t.update(decoder={"type": "WordPiece", "prefix": "##", "cleanup": True}))
    broken("decoder-strip-negative", "decoder.start outside",
           lambda t: t.update(decoder={"type": "Strip", "content": " ", "start": -1, "stop": 0}))
    broken("decoder-nested-unknown", "decoder.decoders[2].type \"CTC\" is not supported",
           lambda t: t.update(decoder={"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "ByteFallback"},
                                                                        {"type": "CTC"}]}))
    broken("added-not-list", "added_tokens is an object, not a list", lambda t: t.update(added_tokens={}))
    broken("added-no-content", "added_tokens[0].content is missing", lambda t: t["added_tokens"][0].pop("content"))
    broken("added-duplicate", "added_tokens[1] \"<unk>\" is an added token already",
           lambda t: t["added_tokens"].append(copy.deepcopy(t["added_tokens"][0])))
    broken("added-long", "added_tokens[1].content 5000 bytes",
           lambda t: t["added_tokens"].append(dict(t["added_tokens"][0], content="x" * 5000)))
    broken("added-empty-normalized", "normalizes to an empty string",
           lambda t: (t.update(normalizer={"type": "Strip", "strip_left": True, "strip_right": True}),
                      t["added_tokens"].append(dict(t["added_tokens"][0], content="  ", normalized=True))))
    broken("added-flag-number", "added_tokens[0].special not true or false",
           lambda t: t["added_tokens"][0].update(special=1))
    broken("truncation-string", "truncation is a string", lambda t: t.update(truncation="longest_first"))
    broken("unigram-item", "model.vocab[1] not a [piece, score] pair",
           lambda t: t["model"]["vocab"].__setitem__(1, ["a"]), unigram_base)
    broken("unigram-score-string", "model.vocab[2] not a [piece, score] pair",
           lambda t: t["model"]["vocab"].__setitem__(2, ["b", "-2"]), unigram_base)
    broken("unigram-unk-id", "model.unk_id 9 is not an id of the 4 pieces",
           lambda t: t["model"].update(unk_id=9), unigram_base)
    broken("unigram-empty", "model.vocab is empty", lambda t: t["model"].update(vocab=[]), unigram_base)
    broken("unigram-piece-long", "model.vocab[4] piece of 1500 bytes",
           lambda t: t["model"]["vocab"].append(["y" * 1500, -3.0]), unigram_base)
    with open(os.path.join(out, "MANIFEST"), "w", encoding="utf-8") as f:
        f.write("\n".join(manifest) + "\n")
    write_bad_bpe(out)


if __name__ == "__main__":
    main()
