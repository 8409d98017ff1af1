#!/usr/bin/env python3
"""Writes the golden data of the byte-level BPE tokenizers (GPT-2 style) that BART and Whisper use,
in the folder forms a user meets, and what Hugging Face transformers does with a few thousand texts
through each: tests/test_hftok.c (mode bpe) runs src/tokenizers/tokenizer.h's vkf_bpe_* on the same
folders, and tests/test_seq2seq.py builds BART model folders around the vocabulary.

Runs under the real Hugging Face stack (transformers 5.x, tokenizers 0.23), which a vkformer checkout
does not need:

    /work/shared/tools/hf_python.sh tools/make_bpe_cases.py tests/data/tokenizers

Everything is drawn from a fixed seed. One GPT-2-style vocabulary is trained here with the real
`tokenizers` library (byte-level BPE asked for 6,000 entries, min_frequency 2, on 30,000 lines
generated below: English with contractions, 18 other languages and scripts, emoji, digits, code;
it learns 4,732: the 256 byte characters and 4,476 merges), then laid out as the two families lay
it out:
  BART     <s> <pad> </s> <unk> at 0..3, the BPE tokens after them, <mask> last (as fairseq's
           dictionary places them in facebook/bart-*)
  Whisper  the BPE tokens from 0, <|endoftext|> after them, then (added tokens)
           <|startoftranscript|>, the 100 language tokens <|en|>..<|yue|>, <|translate|>,
           <|transcribe|>, <|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|> and the
           1,501 timestamps <|0.00|>..<|30.00|> (the layout of openai/whisper-large-v3)
Folder forms (each written as NAME.folder.json.xz: {file name: file text}):
  bart_hub        vocab.json + merges.txt + config.json (facebook/bart-large's tokenizer files)
  bart_saved      what BartTokenizer.save_pretrained writes of it: tokenizer.json +
                  tokenizer_config.json
  whisper_hub     vocab.json, merges.txt, added_tokens.json, special_tokens_map.json and a
                  tokenizer_config.json with added_tokens_decoder (openai/whisper-*'s slow files)
  whisper_legacy  the same as transformers 4.2x saved it: no added_tokens_decoder, added_tokens.json
                  up to <|notimestamps|> only (no timestamp tokens), language "german" and task
                  "transcribe" in tokenizer_config.json
  whisper_saved   WhisperTokenizer(language="french", task="translate", predict_timestamps=True)
                  .save_pretrained: tokenizer.json + tokenizer_config.json
  bart_legacy     transformers 4.x's slow files: vocab.json + merges.txt, special_tokens_map.json
                  with <mask> as an AddedToken with lstrip, tokenizer_config.json without
                  added_tokens_decoder
and for each NAME.cases.json.xz: {"name", "vocab_size" (len(tokenizer)), "added": [[content, id,
special], ...], "encode": [[text index, ids, ids with special tokens, decode(ids with special,
skip_special_tokens=False), decode(..., True)], ...], "decode": [[ids, decode(skip=False),
decode(skip=True)], ...]}, all from AutoTokenizer.from_pretrained(folder) (WhisperTokenizer's
decode strips a <|startofprev|> prompt and timestamp text, as it does). A form with "same_as"
(bart_saved, bart_legacy: bart_hub; whisper_legacy, whisper_saved: whisper_hub) holds null for
plain ids equal to its base form's for the same text. Compact forms as
tools/make_tokenizer_cases.py writes them: ids with special tokens as [prefix, suffix] around the
plain ids; a decode equal to the text as 0; the skip=False decode as [prefix, suffix] around the
skip=True one; the skip=True decode equal to the other as 1.
bpe_texts.json.xz holds the texts: tools/make_tokenizer_cases.py's 2,231 and 800 more (English
contractions and their look-alikes, whitespace runs, emoji sequences, numbers, mixed scripts).
"""
import io
import json
import lzma
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_cases as mtc  # noqa: E402  (also wraps RobertaProcessing for transformers 5.12.1)
from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # noqa: E402
import transformers  # noqa: E402
from transformers.models.whisper.tokenization_whisper import LANGUAGES  # noqa: E402

SEED = 20250925
VOCAB = 6000
ENGLISH = ("I you he she it we they don't can't won't isn't aren't wasn't I'm you're we're they've I've "
           "we'll she'll he'd they'd it's that's what's let's o'clock rock'n'roll y'all ma'am "
           "the a an of to in for on with at by from about into over after beneath house river machine "
           "translation speech audio model encoder decoder token number seventeen forty-two quickly "
           "running walked talking Hello World OK USA NASA iPhone McDonald's").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "’s", "’t", "''", "'", "' s", "'x"]


def english(r, n):
    return " ".join(r.choice(ENGLISH) for _ in range(n))


def training_lines(r, n):
    lines = mtc.corpus(r, n // 2)
    for _ in range(n - len(lines)):
        s = english(r, r.randint(3, 14))
        if r.random() < 0.3:
            s = s.capitalize() + r.choice([".", "!", "?", "..."])
        if r.random() < 0.1:
            s += " " + str(r.randint(0, 99999))
        lines.append(s)
    return lines


def extra_texts(r):
    t = []
    for _ in range(250):  # contractions and their look-alikes
        words = [r.choice(ENGLISH) for _ in range(r.randint(1, 6))]
        k = r.randrange(len(words))
        words[k] += r.choice(CONTRACTIONS)
        s = r.choice([" ", "  ", " \t", "\n"]).join(words) if r.random() < 0.3 else " ".join(words)
        t.append(s)
    for _ in range(200):  # whitespace runs around and between words
        s = ""
        for _ in range(r.randint(1, 5)):
            s += "".join(r.choice([" ", " ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009"])
                         for _ in range(r.randint(0, 6)))
            s += r.choice([r.choice(ENGLISH), mtc.rand_word(r), str(r.randint(0, 999)), r.choice(mtc.EMOJI)])
        t.append(s + "".join(r.choice([" ", "\n", "\t"]) for _ in range(r.randint(0, 4))))
    for _ in range(150):  # emoji sequences, flags, skin tones, ZWJ, keycaps
        t.append("".join(r.choice(mtc.EMOJI + ["\u200d", "\ufe0f", "🏻", "🇺", "🇸", " "])
                         for _ in range(r.randint(1, 8))))
    for _ in range(100):  # numbers and punctuation runs
        t.append(r.choice(["", " "]) + str(r.randint(0, 10 ** r.randint(1, 12))) +
                 "".join(r.choice(",.;:!?-()[]'\"") for _ in range(r.randint(0, 4))) + r.choice(["", " ", "th", "%"]))
    for _ in range(100):  # mixtures, and Whisper's special tokens inside text
        parts = [english(r, r.randint(1, 3)), mtc.sentence(r, r.randint(1, 3)), r.choice(mtc.EMOJI),
                 r.choice(["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|fr|>", "<|transcribe|>",
                           "<|notimestamps|>", "<|0.00|>", "<|1.50|>", "<|30.00|>", "<|30.02|>", "<s>", "</s>",
                           "<mask>", "<pad>", "<|", "|>", "<|0.0|>"])]
        r.shuffle(parts)
        t.append(r.choice(["", " "]).join(parts))
    return t


def train_vocab(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=VOCAB, min_frequency=2, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             show_progress=False)
    tok.train_from_iterator(lines, tr)
    m = json.loads(tok.to_str())["model"]
    order = sorted(m["vocab"], key=m["vocab"].get)
    merges = [tuple(x) if isinstance(x, list) else tuple(x.split(" ")) for x in m["merges"]]
    return order, merges


def write_slow(d, vocab, merges):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))


def write_json(d, name, obj):
    with open(os.path.join(d, name), "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)


def whisper_specials():
    return (["<|endoftext|>", "<|startoftranscript|>"] + ["<|%s|>" % c for c in LANGUAGES] +
            ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"])


def build_folders(tmp, order, merges):
    out = {}
    # BART
    bart_vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for t in order:
        bart_vocab[t] = len(bart_vocab)
    bart_vocab["<mask>"] = len(bart_vocab)
    d = os.path.join(tmp, "bart_hub")
    write_slow(d, bart_vocab, merges)
    write_json(d, "config.json", {"model_type": "bart", "architectures": ["BartForConditionalGeneration"]})
    out["bart_hub"] = d
    tok = transformers.AutoTokenizer.from_pretrained(d)
    d = os.path.join(tmp, "bart_saved")
    tok.save_pretrained(d)
    out["bart_saved"] = d
    # as transformers 4.x saved fine-tuned BART folders: special_tokens_map.json with <mask> as an
    # AddedToken (lstrip), tokenizer_config.json without added_tokens_decoder
    d = os.path.join(tmp, "bart_legacy")
    write_slow(d, bart_vocab, merges)
    mask = {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}
    write_json(d, "special_tokens_map.json", {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
                                              "mask_token": mask, "pad_token": "<pad>", "sep_token": "</s>",
                                              "unk_token": "<unk>"})
    write_json(d, "tokenizer_config.json", {"add_prefix_space": False, "errors": "replace",
                                            "model_max_length": 1024, "tokenizer_class": "BartTokenizer",
                                            "trim_offsets": True})
    write_json(d, "config.json", {"model_type": "bart", "architectures": ["BartForConditionalGeneration"]})
    out["bart_legacy"] = d

    # Whisper
    wv = {t: i for i, t in enumerate(order)}
    wv["<|endoftext|>"] = len(wv)
    specials = whisper_specials()
    stamps = ["<|%.2f|>" % (i * 0.02) for i in range(1501)]
    base = len(wv)
    added_ids = {t: base + i for i, t in enumerate(specials[1:] + stamps)}

    def token_entry(content, special):
        return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                "special": special}

    d = os.path.join(tmp, "whisper_hub")
    write_slow(d, wv, merges)
    write_json(d, "added_tokens.json", added_ids)
    eot = {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    write_json(d, "special_tokens_map.json", {"additional_special_tokens": specials, "bos_token": eot,
                                              "eos_token": eot, "pad_token": "<|endoftext|>", "unk_token": eot})
    dec = {str(wv["<|endoftext|>"]): token_entry("<|endoftext|>", True)}
    for t, i in added_ids.items():
        dec[str(i)] = token_entry(t, t in specials)
    write_json(d, "tokenizer_config.json", {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": dec,
        "additional_special_tokens": specials, "bos_token": "<|endoftext|>", "clean_up_tokenization_spaces": True,
        "eos_token": "<|endoftext|>", "errors": "replace", "model_max_length": 1024, "pad_token": "<|endoftext|>",
        "processor_class": "WhisperProcessor", "return_attention_mask": False, "tokenizer_class": "WhisperTokenizer",
        "unk_token": "<|endoftext|>"})
    write_json(d, "config.json", {"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"]})
    out["whisper_hub"] = d

    d = os.path.join(tmp, "whisper_legacy")
    write_slow(d, wv, merges)
    write_json(d, "added_tokens.json", {t: i for t, i in added_ids.items() if t in specials})
    write_json(d, "special_tokens_map.json", {"additional_special_tokens": specials, "bos_token": "<|endoftext|>",
                                              "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                              "unk_token": "<|endoftext|>"})
    write_json(d, "tokenizer_config.json", {
        "add_bos_token": False, "add_prefix_space": False, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "errors": "replace", "language": "german", "task": "transcribe", "model_max_length": 1024,
        "pad_token": "<|endoftext|>", "tokenizer_class": "WhisperTokenizer", "unk_token": "<|endoftext|>"})
    write_json(d, "config.json", {"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"]})
    out["whisper_legacy"] = d

    tok = transformers.AutoTokenizer.from_pretrained(out["whisper_hub"], language="french", task="translate",
                                                     predict_timestamps=True)
    d = os.path.join(tmp, "whisper_saved")
    tok.save_pretrained(d)
    out["whisper_saved"] = d
    return out


def whisper_decode_lists(r, tok, n):
    """Id lists as Whisper generates them: prompts, the prefix, text tokens, timestamps, eot."""
    get = tok.convert_tokens_to_ids
    sot, prev, eot = get("<|startoftranscript|>"), get("<|startofprev|>"), get("<|endoftext|>")
    stamp0 = get("<|0.00|>")
    text_ids = list(range(0, min(5000, tok.vocab_size)))
    out = []
    for _ in range(n):
        ids = []
        if r.random() < 0.3:
            ids += [prev] + [r.choice(text_ids) for _ in range(r.randint(0, 5))]
            if r.random() < 0.2:
                ids.append(r.choice(text_ids))
        if r.random() < 0.8:
            ids += [sot, get("<|%s|>" % r.choice(list(LANGUAGES))), get(r.choice(["<|transcribe|>", "<|translate|>"]))]
            if r.random() < 0.4:
                ids.append(get("<|notimestamps|>"))
        for _ in range(r.randint(0, 4)):
            if stamp0 is not None and stamp0 != tok.unk_token_id and r.random() < 0.6:
                ids.append(stamp0 + r.randint(0, 1500))
            ids += [r.choice(text_ids) for _ in range(r.randint(0, 6))]
        if r.random() < 0.7:
            ids.append(eot)
        out.append(ids)
    return out


BASES = {"bart_saved": "bart_hub", "bart_legacy": "bart_hub", "whisper_legacy": "whisper_hub",
         "whisper_saved": "whisper_hub"}


def compact_against(c, base):
    """Ids without special tokens equal to the base form's for the same text: null (the base's)."""
    c["same_as"] = base["name"]
    for e, b in zip(c["encode"], base["encode"]):
        if e[1] == b[1]:
            e[1] = None
    return c


def cases_for(name, folder, texts):
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    size = len(tok)
    added = [[str(t), i, bool(t.special)] for i, t in sorted(tok.added_tokens_decoder.items())]
    enc = []
    for ti, s in enumerate(texts):
        a = tok(s, add_special_tokens=False)["input_ids"]
        b = tok(s, add_special_tokens=True)["input_ids"]
        d0, d1 = tok.decode(b, skip_special_tokens=False), tok.decode(b, skip_special_tokens=True)
        for k in range(len(b) + 1):
            if b[k:k + len(a)] == a:
                b = [b[:k], b[k + len(a):]]
                break
        enc.append([ti, a, b, mtc.compact_d0(d0, d1, s), 0 if d1 == s else 1 if d1 == d0 else d1])
    r = random.Random(SEED + len(name))
    lists = []
    for _ in range(300):
        m = r.randint(0, 14)
        k = r.random()
        if k < 0.5:
            lists.append([r.randrange(size) for _ in range(m)])
        elif k < 0.8:  # single bytes (cut UTF-8 sequences), e.g. the byte tokens of a 4-byte emoji
            lists.append([r.randrange(260) for _ in range(m)])
        else:  # ids past the vocabulary are skipped
            lists.append([r.randrange(size + 5) for _ in range(m)])
    if name.startswith("whisper"):
        lists += whisper_decode_lists(r, tok, 300)
    dec = [[ids, tok.decode(ids, skip_special_tokens=False), tok.decode(ids, skip_special_tokens=True)]
           for ids in lists]
    return {"name": name, "class": type(tok).__name__, "vocab_size": size, "added": added, "encode": enc,
            "decode": dec}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_bpe_cases.py OUT_DIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    r = random.Random(SEED)
    lines = training_lines(r, 30000)
    texts = mtc.make_texts(random.Random(mtc.SEED)) + extra_texts(r)
    total = 0

    def write(name, obj):
        nonlocal total
        data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        blob = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
        with open(os.path.join(outdir, name + ".xz"), "wb") as f:
            f.write(blob)
        total += len(blob)
        print("%-32s %8d bytes (%d uncompressed)" % (name + ".xz", len(blob), len(data)), file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        order, merges = train_vocab(lines)
        folders = build_folders(tmp, order, merges)
        write("bpe_texts.json", texts)
        results = {}
        for name, d in folders.items():
            files = {}
            for fn in sorted(os.listdir(d)):
                with open(os.path.join(d, fn), encoding="utf-8") as f:
                    files[fn] = f.read()
            write(name + ".folder.json", files)
            c = cases_for(name, d, texts)
            results[name] = json.loads(json.dumps(c))
            if name in BASES:
                c = compact_against(c, results[BASES[name]])
            write(name + ".cases.json", c)
            print("%-16s %s: vocab %d, %d added, %d encodes, %d decodes" % (
                name, c["class"], c["vocab_size"], len(c["added"]), len(c["encode"]), len(c["decode"])),
                file=sys.stderr)
        # the forms of one family against each other (for information: transformers' own agreement)
        for b, a in BASES.items():
            same = sum(x[1] == y[1] for x, y in zip(results[a]["encode"], results[b]["encode"]))
            print("%s and %s: %d of %d texts give the same ids without special tokens" %
                  (a, b, same, len(texts)), file=sys.stderr)
    print("total %d bytes, %d texts" % (total, len(texts)), file=sys.stderr)


if __name__ == "__main__":
    main()
