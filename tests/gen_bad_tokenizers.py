#!/usr/bin/python3
"""Writes malformed tokenizer.json files for tests/test_hftok.c (mode "bad") into a
directory, with a MANIFEST: one line per file, "FILE<TAB>words its one-line message
must hold". Each is a small valid tokenizer broken one way: wrong JSON types,
unknown components, huge or sparse ids, merges that name unknown tokens or loop,
bad regexes and charsmaps, nesting past the limit, truncated or non-JSON text.
Standard library only.

usage: gen_bad_tokenizers.py OUT_DIR
"""
import base64
import copy
import json
import os
import random
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


if __name__ == "__main__":
    main()
