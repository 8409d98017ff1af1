#!/usr/bin/python3
"""Generated ids decoded as transformers decodes them, in every folder form of the multilingual
families, and generate's one id convention across families.

usage: test_decode_forms.py VKFORMER [-v]

1. Decoding (`tokenize --decode`, the text translate prints): tests/gen_decode_forms.py writes tiny
   M2M-100, NLLB-200 and mBART-50 folders in each form a folder declares its special tokens in (none;
   the hub's special_tokens_map.json with every language token, as facebook/m2m100_418M ships it;
   tokenizer_config.json's additional_special_tokens or extra_special_tokens, which win over the map;
   the map's extra_special_tokens; what M2M100Tokenizer.save_pretrained writes in transformers 5.12;
   a saved config's added_tokens_decoder, beside which the map is not read). Id lists like generated
   targets (decoder start, forced target language, the text, other language tokens, <unk>, <pad>,
   eos) must decode to tests/data/decode_forms.json's texts, which transformers 5.12 itself made of
   the same folders (tools/make_decode_forms.py, run once under ../shared/tools/hf_python.sh; this
   test needs nothing of that stack). First, each folder must be the one those values were made
   from: vkformer's ids of the cases' texts equal the recorded ones.
2. generate's ids (docs/json.md): the ids the model chose after its decoder start, without a forced
   first token (BART's forced bos <s>, the target language of NLLB, M2M-100 and mBART-50) and without
   the final eos, for BART, Marian, T5, M2M-100, NLLB-200 and mBART-50 folders; --json's "sequence"
   holds them after the forced token, "ids" and the plain output without it.
The device is whatever VK_ICD_FILENAMES selects; the validation layer is on (VKFORMER_VALIDATE=1).
"""
import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_decode_forms  # noqa: E402
import gen_marian  # noqa: E402
import gen_seq2seq  # noqa: E402
import gen_t5  # noqa: E402
import vkf_testlib  # noqa: E402
from vkf_testlib import bad, ids_arg, ok, parse_ids, run_vkformer  # noqa: E402

SOURCE = {"m2m_100": ("en", "de"), "nllb": ("eng_Latn", "deu_Latn"), "mbart": ("en_XX", "de_DE")}


def check_form(form, path, expected):
    family = form.split("-")[0]
    src_lang = SOURCE[family][0]
    cases = expected["cases"]
    # the folder is the one the values were made from: the text's ids as recorded
    texts = ["the house sees a big dog", "дом кошка ✨"]     # tools/make_decode_forms.py's CASES
    for text, case in zip(texts, (cases[0], cases[2])):
        rc, out, err = run_vkformer(["tokenize", "--model", path, "--source-lang", src_lang, text])
        if rc != 0:
            bad("%s: tokenize %r" % (form, text), "\n".join(err))
            return
        got = parse_ids(out)[1:-1]            # [source language] pieces [eos]
        want = case["ids"][2:-1]
        if got != want:
            bad("%s: the folder differs from the one tests/data/decode_forms.json was made from" % form,
                "ids of %r: %s, recorded %s (tokens %s)" % (text, got, want, case["tokens"][2:-1]))
            return
    lines = "\n".join(ids_arg(c["ids"]) for c in cases) + "\n"
    p = vkf_testlib_run(["tokenize", "--model", path, "--decode", "-"], lines)
    if p[0] != 0:
        bad("%s: tokenize --decode" % form, "\n".join(p[2]))
        return
    got = p[1].split("\n")[:len(cases)]
    for case, text in zip(cases, got):
        if text != case["text"]:
            bad("%s: %s decoded" % (form, case["ids"]), "vkformer %r\ntransformers %r (tokens %s)" %
                (text, case["text"], case["tokens"]))
        else:
            ok("%s: %s -> %r" % (form, case["ids"], text))


def vkf_testlib_run(args, stdin):
    import subprocess
    env = dict(os.environ, VKFORMER_VALIDATE="1")
    p = subprocess.run([vkf_testlib.VKFORMER] + args, input=stdin.encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=300)
    err = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if "WARNING: UNSUPPORTED" not in l]
    return p.returncode, p.stdout.decode("utf-8"), err


def check_generate(label, path, src, lead, eos, extra=()):
    """generate on one source: plain ids == --json "ids" == "sequence" without the forced lead."""
    args = ["generate", "--model", path, "--src", ids_arg(src), "--max-new", "6"] + list(extra)
    rc, out, err = run_vkformer(args)
    if rc != 0:
        bad("%s: generate" % label, "\n".join(err))
        return
    plain = parse_ids(out.splitlines()[0]) if out.strip() else []
    rc, out, err = run_vkformer(args + ["--json"])
    if rc != 0:
        bad("%s: generate --json" % label, "\n".join(err))
        return
    rec = json.loads(out.splitlines()[0])
    seq, ids = rec.get("sequence"), rec.get("ids")
    if seq is None:
        bad("%s: generate --json has no \"sequence\"" % label, out)
        return
    want = seq[1:] if lead is not None else seq
    if lead is not None and (not seq or seq[0] != lead):
        bad("%s: \"sequence\" %s does not start with the forced token %d" % (label, seq, lead))
    elif ids != want or plain != want or rec["hypotheses"][0]["ids"] != want:
        bad("%s: generate's ids" % label, "plain %s, --json ids %s, hypotheses[0] %s; sequence %s (forced %s)" %
            (plain, ids, rec["hypotheses"][0]["ids"], seq, lead))
    elif eos in want[-1:]:
        bad("%s: generate's ids %s end with eos %d" % (label, want, eos))
    else:
        ok("%s: generate prints %s (sequence %s)" % (label, want, seq))


def main(argv):
    vkf_testlib.VKFORMER = argv[1]
    vkf_testlib.VERBOSE = "-v" in argv
    with open(os.path.join(HERE, "data", "decode_forms.json"), encoding="utf-8") as f:
        data = json.load(f)
    tmp = tempfile.mkdtemp(prefix="vkf_decode_forms.")
    try:
        forms = gen_decode_forms.make_forms(tmp)
        for form, expected in data["forms"].items():
            check_form(form, forms[form], expected)
        # generate: the forced target language left out (its id: the first of a text tokenized with
        # it as the source language, where these families put the language first)
        for form in ("m2m_100-hub", "nllb-hub", "mbart-hub"):
            family = form.split("-")[0]
            rc, out, err = run_vkformer(["tokenize", "--model", forms[form], "--source-lang", SOURCE[family][1], "x"])
            if rc != 0:
                bad("%s: tokenize --source-lang %s" % (form, SOURCE[family][1]), "\n".join(err))
                continue
            src = data["forms"][form]["cases"][0]["ids"][2:]
            check_generate(form, forms[form], src, parse_ids(out)[0], 2, ["--target-lang", SOURCE[family][1]])
        bart = os.path.join(tmp, "bart")
        gen_seq2seq.make_folder(bart, "bart", layers=1)
        check_generate("bart (forced_bos_token_id 0)", bart, [0, 31, 32, 33, 2], 0, 2)
        check_generate("bart greedy (forced_bos_token_id 0)", bart, [0, 31, 32, 33, 2], 0, 2, ["--beam", "1"])
        marian = os.path.join(tmp, "marian")
        gen_marian.make_folder(marian, layers=1)
        check_generate("marian", marian, [5, 6, 7, 0], None, 0)
        t5 = os.path.join(tmp, "t5")
        gen_t5.make_folder(t5, "t5", layers=1)
        check_generate("t5", t5, [5, 6, 7, 1], None, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (vkf_testlib.passed, vkf_testlib.failed))
    return 1 if vkf_testlib.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
