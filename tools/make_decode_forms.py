"""Writes tests/data/decode_forms.json: what transformers' own tokenizers make of generated ids in
each folder form of tests/gen_decode_forms.py, the expected values of tests/test_decode_forms.py.

Run in two steps (the project's tests never need the second's stack):
  /usr/bin/python3 tests/gen_decode_forms.py /tmp/forms
  (cd /tmp/forms && ../shared/tools/hf_python.sh /path/to/tools/make_decode_forms.py /tmp/forms OUT.json)
the second under Debian unstable's transformers 5.12 (../shared/tools/hf_python.sh). For each form
and each id list (a generated target: decoder start, the forced target language, the text's pieces,
other language tokens, <unk>, <pad>, eos), it records the ids, the token each id is
(convert_ids_to_tokens: the test checks the folder it writes has the same ids), and
decode(ids, skip_special_tokens=True).
"""
import json
import sys

import transformers
from transformers import AutoTokenizer

CASES = {  # family: (target language, other languages, texts)
    "m2m_100": ("__de__", ["__fr__", "__zu__", "__af__"], ["the house sees a big dog", "дом кошка ✨"]),
    "nllb": ("deu_Latn", ["fra_Latn", "zul_Latn"], ["the house sees a big dog", "дом кошка ✨"]),
    "mbart": ("de_DE", ["fr_XX", "zh_CN"], ["the house sees a big dog", "дом кошка ✨"]),
}


def main(root, out):
    forms = ["m2m_100-plain", "m2m_100-hub", "m2m_100-config", "m2m_100-config-over-map", "m2m_100-map-extra",
             "m2m_100-saved", "m2m_100-decoder-over-map", "nllb-hub", "mbart-hub"]
    result = {"made_with": "transformers %s (tools/make_decode_forms.py)" % transformers.__version__, "forms": {}}
    for form in forms:
        family = form.split("-")[0]
        tok = AutoTokenizer.from_pretrained("%s/%s" % (root, form))
        lang, others, texts = CASES[family]
        ids = lambda t: tok.convert_tokens_to_ids(t)
        eos, unk, pad = tok.eos_token_id, tok.unk_token_id, tok.pad_token_id
        lists = []
        for i, text in enumerate(texts):
            pieces = tok(text, add_special_tokens=False)["input_ids"]
            lists.append([eos, ids(lang)] + pieces + [eos])
            lists.append([ids(lang)] + pieces[:3] + [ids(others[i % len(others)])] + pieces[3:] + [unk, pad, eos])
        lists.append([ids(o) for o in others] + [eos])
        cases = []
        for l in lists:
            cases.append({"ids": l, "tokens": tok.convert_ids_to_tokens(l),
                          "text": tok.decode(l, skip_special_tokens=True)})
        result["forms"][form] = {"class": type(tok).__name__, "cases": cases}
        print(form, type(tok).__name__, [c["text"] for c in cases])
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
