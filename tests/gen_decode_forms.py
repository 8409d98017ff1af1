#!/usr/bin/python3
"""Tiny hub folders of the multilingual families in each form the hub and transformers 5.12 ship,
for tests/test_decode_forms.py (which decodes generated ids with `vkformer tokenize --decode`) and
tools/make_decode_forms.py (which made tests/data/decode_forms.json with transformers itself).

Each form is the random-weight folder of tests/gen_seq2seq.py (one layer, seed 1) with the special
tokens declared in one of the ways a folder declares them:
  m2m_100-plain        no list of extra special tokens (the language tokens decode as text)
  m2m_100-hub          special_tokens_map.json's additional_special_tokens: every language token, as
                       facebook/m2m100_418M ships it (the language tokens are special)
  m2m_100-config       tokenizer_config.json's additional_special_tokens: the first 50 language tokens
  m2m_100-config-over-map  tokenizer_config.json's extra_special_tokens (5 tokens) beside the hub's map:
                       the config's list wins
  m2m_100-map-extra    special_tokens_map.json's extra_special_tokens (transformers 5.x's key)
  m2m_100-saved        what M2M100Tokenizer.save_pretrained writes in transformers 5.12
                       (tokenizer_config.json with added_tokens_decoder and extra_special_tokens,
                       added_tokens.json), from the hub form
  m2m_100-decoder-over-map  tokenizer_config.json's added_tokens_decoder (one language token, special)
                       beside the hub's map: a saved config, so the map is not read
  nllb-hub, mbart-hub  the slow forms of NLLB-200 and mBART-50 (their language tokens are always special)

usage: /usr/bin/python3 tests/gen_decode_forms.py OUT_DIR   (writes OUT_DIR/FORM for every form)
Importable: make_forms(out) -> {form: folder}.
"""
import json
import os
import shutil
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_seq2seq  # noqa: E402
import seq2seq_ref  # noqa: E402


def _json(path, name, value=None, edit=None):
    p = os.path.join(path, name)
    if edit:
        with open(p) as f:
            value = json.load(f)
        edit(value)
    with open(p, "w") as f:
        json.dump(value, f, indent=2)


def make_forms(out):
    codes = ["__%s__" % c for c in seq2seq_ref._codes()["m2m100"]]
    base = {}
    for family in ("m2m_100", "nllb", "mbart"):
        base[family] = os.path.join(out, "%s-base" % family)
        if not os.path.exists(os.path.join(base[family], "model.safetensors")):
            gen_seq2seq.make_folder(base[family], family, layers=1, seed=1)
    hub_map = {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "pad_token": "<pad>",
               "unk_token": "<unk>", "additional_special_tokens": codes}
    saved_decoder = {}
    vocab_n = len(json.load(open(os.path.join(base["m2m_100"], "vocab.json"))))
    for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"]):
        saved_decoder[str(i)] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                 "single_word": False, "special": True}
    for i, t in enumerate(codes):
        saved_decoder[str(vocab_n + i)] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                           "single_word": False, "special": True}
    forms = {
        "m2m_100-plain": ("m2m_100", []),
        "m2m_100-hub": ("m2m_100", [("special_tokens_map.json", hub_map, None)]),
        "m2m_100-config": ("m2m_100", [("tokenizer_config.json", None,
                                        lambda tc: tc.update({"additional_special_tokens": codes[:50]}))]),
        "m2m_100-config-over-map": ("m2m_100", [("special_tokens_map.json", hub_map, None),
                                                ("tokenizer_config.json", None,
                                                 lambda tc: tc.update({"extra_special_tokens": codes[:5]}))]),
        "m2m_100-map-extra": ("m2m_100", [("special_tokens_map.json", {"extra_special_tokens": codes}, None)]),
        "m2m_100-saved": ("m2m_100", [("tokenizer_config.json", None,
                                       lambda tc: tc.update({"added_tokens_decoder": saved_decoder,
                                                             "extra_special_tokens": codes, "backend": "custom",
                                                             "sep_token": "</s>"})),
                                      ("added_tokens.json", {t: vocab_n + i for i, t in enumerate(codes)}, None)]),
        "m2m_100-decoder-over-map": ("m2m_100", [("special_tokens_map.json", hub_map, None),
                                                 ("tokenizer_config.json", None,
                                                  lambda tc: tc.update({"added_tokens_decoder": {
                                                      str(vocab_n + 16): saved_decoder[str(vocab_n + 16)]}}))]),
        "nllb-hub": ("nllb", []),
        "mbart-hub": ("mbart", []),
    }
    made = {}
    for form, (family, files) in forms.items():
        path = os.path.join(out, form)
        if os.path.exists(path):
            shutil.rmtree(path)
        shutil.copytree(base[family], path)
        for name, value, edit in files:
            _json(path, name, value, edit)
        made[form] = path
    return made


if __name__ == "__main__":
    for form, path in make_forms(sys.argv[1]).items():
        print(form, path)
