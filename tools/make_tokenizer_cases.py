#!/usr/bin/env python3
"""Writes the golden data of tests/test_hftok.c: small tokenizer.json files of every
family kind vkformer reads, and what Hugging Face tokenizers does with a few thousand
texts through each (ids with and without special tokens, decodes with and without
skip_special_tokens, random id sequences decoded).

Runs under the real Hugging Face stack (transformers 5.x, tokenizers 0.23,
sentencepiece, protobuf), which a vkformer checkout does not need:

    /work/shared/tools/hf_python.sh tools/make_tokenizer_cases.py tests/data/tokenizers

(any Python with those packages will do). Everything is drawn from a fixed seed;
training sentencepiece or tokenizers again may still give slightly different
vocabularies on another version, which is fine: the cases are written from the same
run as the files. Output, in OUT:
    NAME.json.xz      each tokenizer.json (as save_pretrained wrote it, or as
                      tokenizers' to_str writes the hand-built ones)
    texts.json.xz     the texts, shared by all tokenizers
    NAME.cases.json.xz  {"name", "vocab_size" (highest id + 1), "added": [[content,
                      id, special, id_to_token(id)], ...], "encode": [[text index, ids, ids with
                      special tokens, decode(ids with special, skip=False),
                      decode(..., skip=True)], ...], "decode": [[ids, decode(skip=
                      False), decode(skip=True)], ...]}. Compact forms: ids with
                      special tokens as [prefix, suffix] when they are prefix + ids
                      + suffix; a decode equal to the text as 0; the skip=False
                      decode as [prefix, suffix] around the skip=True one; the
                      skip=True decode equal to the other as 1; null where
                      tokenizers panics (vkformer must fail there).
tests/unpack_tokenizer_cases.py turns them back into plain JSON at build time.

Kinds (see docs/tokenizers.md):
  nllb        sentencepiece BPE (nmt_nfkc) -> NllbTokenizerFast with its 202
              language codes (BPE, Precompiled+Replace, Metaspace, template with
              fra_Latn)
  mbart50     sentencepiece unigram -> MBart50TokenizerFast (Unigram, Precompiled)
  t5          sentencepiece unigram -> T5TokenizerFast (WhitespaceSplit+Metaspace,
              <extra_id_N>)
  bart        byte-level BPE trained with tokenizers -> BartTokenizerFast (ByteLevel,
              RobertaProcessing)
  whisper     the same kind -> WhisperTokenizerFast with Whisper's special tokens
              (<|startoftranscript|>, <|en|>, <|transcribe|>, <|notimestamps|>,
              timestamps <|0.00|>..) and its language/task template
  llama_bf    BPE with byte_fallback (sentencepiece BPE, Prepend+Replace, decoder
              Replace/ByteFallback/Fuse/Strip), hand-built with tokenizers
  wordpiece_bpe  BPE with continuing_subword_prefix and end_of_word_suffix, NFD,
              Lowercase, Strip, Whitespace, BertProcessing, added tokens with
              lstrip/rstrip/single_word/normalized
  unigram_mix Unigram with byte_fallback: NFKC, Lowercase, Replace regex; Split,
              Punctuation, Digits, Metaspace "first"; template with specials
  bpe_splits  char BPE with ignore_merges: NFC, Strip; WhitespaceSplit, Split in
              each behavior and inverted, Metaspace "never" without split
  bytelevel_prefix  byte-level BPE, ByteLevel add_prefix_space and no regex, NFKD,
              Sequence[ByteLevel, Template] post-processing
"""
import base64
import io
import json
import lzma
import os
import random
import sys
import tempfile
import unicodedata

import tokenizers.processors as _procs

# tokenizers 0.23 renamed RobertaProcessing's `cls` argument to `cls_token`;
# transformers 5.12.1 still passes `cls` (BartTokenizer, RobertaTokenizer).
_RobertaProcessing = _procs.RobertaProcessing


def _roberta_processing(*args, cls=None, **kw):
    if cls is not None:
        kw["cls_token"] = cls
    return _RobertaProcessing(*args, **kw)


_procs.RobertaProcessing = _roberta_processing

import sentencepiece as spm  # noqa: E402
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,  # noqa: E402
                        normalizers, pre_tokenizers, processors, trainers)
import transformers  # noqa: E402

SEED = 20240611
# The kinds that stand for a model family get every text; the hand-built kinds half.
FAMILIES = ("nllb", "mbart50", "t5", "bart", "whisper")

# ------------------------------------------------------------------ text material

WORDS = {
    "en": "the of and to in is that it was for on are as with his they be at one have this from or had by "
          "word but what some we can out other were all there when up use your how said an each she which do "
          "their time if will way about many then them write would like so these her long make thing see him "
          "two has look more day could go come did number sound no most people my over know water than call "
          "first who may down side been now find translation machine model language encoder decoder".split(),
    "de": "der die und in den von zu das mit sich des auf für ist im dem nicht ein eine als auch es an werden aus "
          "er hat dass sie nach wird bei einer um am sind noch wie einem über einen so zum war haben nur oder "
          "aber vor zur bis mehr durch man Straße Grüße Bär Äpfel Übermorgen Fußgänger schön größer".split(),
    "fr": "le de un être et à il avoir ne je son que se qui ce dans en du elle au pour pas que vous par sur faire "
          "plus dire me on mon lui nous comme mais pouvoir avec tout y aller voir bien où sans tu ou leur homme "
          "café très élève naïf garçon cœur où déjà".split(),
    "es": "el la de que y a en un ser se no haber por con su para como estar tener le lo todo pero más hacer o "
          "poder decir este ir otro ese si me ya ver porque dar cuando él muy sin vez mucho saber qué año niño "
          "señor mañana".split(),
    "pl": "się nie jest że na do to co jak ale tak za od po już tylko przez gdy może być łódź żółw źdźbło "
          "gęś".split(),
    "tr": "bir ve bu da ne için çok ile gibi daha sonra kadar ama değil ığdır şişe öğrenci güneş".split(),
    "vi": "của và các có được trong là cho những với người không một này đã tiếng Việt nước".split(),
    "ru": "и в не на я быть он с что а по это она этот к но они мы как из у который то за свой весь год от так "
          "о для ты же все тот мочь вы человек такой его сказать только или ещё бы себя один как уже до время "
          "если сам когда другой".split(),
    "el": "και το να του η της με που την σε ο για τα από είναι θα δεν οι στο μου τον λόγος αλφάβητο".split(),
    "ar": "في من على أن إلى التي الذي عن مع هذا هذه كان ما لا كل بعد قد بين أو ذلك اللغة العربية".split(),
    "he": "את של על לא הוא זה עם כל היא אני גם אבל או מה יש".split(),
    "hi": "के है में की और को से का एक पर यह भी नहीं हैं था कि हिन्दी भाषा".split(),
    "th": "ที่ การ และ ใน มี ของ ได้ ไม่ เป็น ว่า ภาษาไทย".split(),
    "ja": "日本語 の テキスト です 東京 は 大きい 都市 私 は 学生 です ひらがな カタカナ".split(),
    "zh": "中文 句子 也 在 这里 我们 测试 分词 机器 翻译 模型".split(),
    "ko": "한국어 문장 도 조금 있습니다 안녕하세요 세계".split(),
    "ka": "ქართული ენა და მსოფლიო".split(),
    "am": "ሰላም ዓለም አማርኛ".split(),
    "hy": "բարև աշխարհ հայերեն".split(),
}
PUNCT = [".", ",", "!", "?", ";", ":", "…", "—", "–", "«", "»", "“", "”", "„", "'", "\"", "(", ")", "¿", "¡",
         "。", "、", "！", "？", "،", "؟", "।"]
EMOJI = ["😀", "😂", "🙂", "🚀", "🌍", "🍕", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧", "🇩🇪", "🇯🇵", "❤️", "✔️", "1️⃣", "🏳️‍🌈", "🤖"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", "\u202f", "\u0085",
          "\x0b", "\x0c", "\u1680", "\ufeff", "\u200d", "\u200c"]
COMPAT = ["ﬁ", "ﬂ", "ﬀ", "Ａ", "ｂ", "１", "２", "①", "②", "Ⅻ", "ⅷ", "㍻", "㎏", "ｶ", "ﾞ", "ｧ", "²", "³", "¹", "⁴", "₂",
          "½", "¼", "℃", "™", "№", "…", "ǅ", "Ǆ", "İ", "ẞ", "ß", "Σ", "ς", "𝐀", "𝕏", "ℌ", "Å", "Ω", "K", "µ", "ﷺ",
          "\ufdfa", "ᴬ", "ﹰ", "㈱", "ｰ", "・", "〜", "～", "＜mask＞"]
COMBINING = ["\u0301", "\u0300", "\u0302", "\u0308", "\u0323", "\u0327", "\u0331", "\u0345", "\u20dd", "\u0f72",
             "\u093f", "\u094d", "\u3099", "\u309a", "\u0338"]
# Code point ranges (all assigned by Unicode 14, which every library here knows).
RANGES = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff),
          (0x900, 0x97f), (0xe00, 0xe5b), (0x10a0, 0x10ff), (0x1100, 0x11ff), (0x1e00, 0x1eff), (0x2000, 0x206f),
          (0x2100, 0x218b), (0x2190, 0x23ff), (0x2460, 0x24ff), (0x3000, 0x30ff), (0x3130, 0x318e),
          (0x3300, 0x33ff), (0x4e00, 0x4fff), (0xac00, 0xadff), (0xfb00, 0xfb06), (0xfe30, 0xfe4f),
          (0xff01, 0xffee), (0x1d400, 0x1d6a5), (0x1f300, 0x1f64f)]
SPECIAL_TEXTS = ["<s>", "</s>", "<unk>", "<pad>", "<mask>", "eng_Latn", "fra_Latn", "deu_Latn", "en_XX", "de_DE",
                 "<extra_id_0>", "<extra_id_7>", "<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>",
                 "<|transcribe|>", "<|translate|>", "<|notimestamps|>", "<|0.00|>", "<|0.02|>", "<|1.00|>",
                 "<0x41>", "<0xFF>", "▁", "▁▁", "Ġ", "Ċ", "##", "</w>", "[CLS]", "[SEP]", "<sep>", "<cls>",
                 "[[", "]]", "hello", "Hello", "<|en", "en|>", "<|", "|>", "</s", "<mask", "eng_Lat"]


def rand_word(r, lang=None):
    lang = lang or r.choice(sorted(WORDS))
    w = r.choice(WORDS[lang])
    if r.random() < 0.1:
        w = w.capitalize()
    if r.random() < 0.03:
        w = w.upper()
    return w


def sentence(r, n=None):
    lang = r.choice(sorted(WORDS))
    n = n or r.randint(2, 12)
    words = [rand_word(r, lang if r.random() < 0.85 else None) for _ in range(n)]
    s = " ".join(words)
    if r.random() < 0.7:
        s += r.choice(PUNCT)
    if r.random() < 0.1:
        s = s[:1].upper() + s[1:]
    return s


def rand_cp(r):
    lo, hi = r.choice(RANGES)
    while True:
        c = chr(r.randint(lo, hi))
        if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
            return c


def corpus(r, n):
    lines = []
    for _ in range(n):
        s = sentence(r)
        k = r.random()
        if k < 0.05:
            s += " " + r.choice(EMOJI)
        elif k < 0.08:
            s = s.replace(" ", r.choice(SPACES[:4]), 1)
        elif k < 0.12:
            s += " " + str(r.randint(0, 100000))
        elif k < 0.14:
            s += " " + "".join(rand_cp(r) for _ in range(r.randint(1, 4)))
        lines.append(s)
    return lines


def make_texts(r):
    t = []
    t += ["", " ", "  ", "\t", "\n", "a", "A", ".", "▁", " a", "a ", "  a  b  ", "\u00a0", "\x00", "a\x00b"]
    t += [sentence(r) for _ in range(550)]
    for _ in range(250):  # whitespace and control characters
        parts = [rand_word(r) if r.random() < 0.6 else "" for _ in range(r.randint(1, 5))]
        s = ""
        for p in parts:
            s += p + "".join(r.choice(SPACES) for _ in range(r.randint(0, 3)))
        if r.random() < 0.3:
            s = r.choice(SPACES) + s
        if r.random() < 0.3:
            s = s.replace(r.choice("aeiou"), chr(r.choice(list(range(0, 32)) + [0x7f] + list(range(0x80, 0xa0)))))
        t.append(s)
    for _ in range(250):  # normalization: compatibility characters, combining marks
        s = ""
        for _ in range(r.randint(1, 6)):
            k = r.random()
            if k < 0.35:
                s += r.choice(COMPAT)
            elif k < 0.7:
                s += (r.choice("aeouyzAEOZnc" + "ᄀ가ぁかカ" + "ก") + "".join(r.choice(COMBINING)
                                                                     for _ in range(r.randint(1, 3))))
            elif k < 0.8:
                s += r.choice(COMBINING)
            else:
                s += " " + rand_word(r)
        t.append(unicodedata.normalize(r.choice(["NFC", "NFD", "NFKD"]), s) if r.random() < 0.3 else s)
    for _ in range(150):  # emoji
        t.append(" ".join(r.choice(EMOJI) + (rand_word(r) if r.random() < 0.5 else "")
                          for _ in range(r.randint(1, 4))))
    for _ in range(300):  # added and special tokens inside text
        parts = []
        for _ in range(r.randint(1, 5)):
            k = r.random()
            if k < 0.45:
                parts.append(r.choice(SPECIAL_TEXTS))
            elif k < 0.85:
                parts.append(rand_word(r))
            else:
                parts.append(r.choice(PUNCT))
        sep = r.choice(["", " ", " ", "  ", "\n", "\t"])
        t.append(sep.join(parts) if r.random() < 0.7 else "".join(p + r.choice(["", " "]) for p in parts))
    for _ in range(200):  # random code points
        t.append("".join(rand_cp(r) for _ in range(r.randint(1, 12))))
    for _ in range(16):  # long words and runs
        k = r.random()
        n = r.choice([50, 120, 300, 700, 1500])
        if k < 0.3:
            t.append(r.choice("aeбж日ก😀 ▁.") * n)
        elif k < 0.6:
            t.append("".join(r.choice("abcdefghijklmnopqrstuvwxyzäöüß") for _ in range(n)))
        elif k < 0.8:
            t.append(" ".join(rand_word(r) for _ in range(n // 6)))
        else:
            t.append("".join(rand_cp(r) for _ in range(n // 3)))
    for _ in range(200):  # digits, punctuation, code, urls
        k = r.random()
        if k < 0.25:
            t.append(str(r.randint(0, 10 ** r.randint(1, 15))) + r.choice(["", ".", ",", " %", "€", "$"]) +
                     str(r.randint(0, 999)))
        elif k < 0.5:
            t.append("https://example.org/" + rand_word(r, "en") + "?q=" + str(r.randint(0, 99)) + "&x=1#a")
        elif k < 0.75:
            t.append(r.choice(["def f(x):\n    return x ** 2", "int main(void) { return 0; }", "a_b = c-d+e*f/g",
                               "{\"k\": [1, 2.5, null]}", "<p>Hello&nbsp;world</p>", "x  =  y   ;  ",
                               "١٢٣ ٤٥٦", "१२३४", "Ⅳ and ⑫ and ²", "3.14159e-10", "--flag=value"]))
        else:
            t.append("".join(r.choice(PUNCT + list("!@#$%^&*()_+-=[]{}|;':\",./<>?`~\\")) for _ in
                             range(r.randint(1, 12))))
    for _ in range(300):  # mixtures
        pieces = [r.choice([sentence(r, r.randint(1, 4)), r.choice(EMOJI), r.choice(SPECIAL_TEXTS), r.choice(COMPAT),
                            r.choice(SPACES), rand_cp(r) * r.randint(1, 3), str(r.randint(0, 9999))])
                  for _ in range(r.randint(2, 6))]
        t.append("".join(pieces) if r.random() < 0.5 else " ".join(pieces))
    return t


# ------------------------------------------------------------------ tokenizers

def train_spm(lines, model_type, vocab_size, **kw):
    m = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=m, model_type=model_type,
                                   vocab_size=vocab_size, hard_vocab_limit=False, minloglevel=2, num_threads=1,
                                   character_coverage=0.995, **kw)
    return m.getvalue()


def small_rules(tmp):
    """A normalization rule file far smaller than nmt_nfkc (whose charsmap, 240 kB,
    only nllb carries): NFKC of the characters the texts use most, a few
    multi-character keys with prefixes that are keys too (the case where tokenizers
    takes the shortest match), and control characters to nothing or a space."""
    rules = {}
    for c in COMPAT + ["".join(chr(x) for x in range(0xff01, 0xff5f))]:
        for ch in c:
            n = unicodedata.normalize("NFKC", ch)
            if n != ch:
                rules[ch] = n
    for base in "aeouAEOUnc":
        for m in ("\u0301", "\u0300", "\u0308", "\u0302"):
            n = unicodedata.normalize("NFC", base + m)
            if len(n) == 1:
                rules[base + m] = n
    for fw in "ａｅｏｚ":
        rules[fw] = unicodedata.normalize("NFKC", fw)
        rules[fw + "\u0301"] = unicodedata.normalize("NFKC", fw + "\u0301")
    for x in list(range(1, 9)) + [0x0b, 0x0e, 0x1f, 0x7f, 0x200b, 0xfeff]:
        rules[chr(x)] = ""
    for x in (0x09, 0x0a, 0x0d, 0xa0, 0x3000, 0x2009, 0x2028):
        rules[chr(x)] = " "
    path = os.path.join(tmp, "rules.tsv")
    with open(path, "w", encoding="utf-8") as f:
        for k, v in sorted(rules.items()):
            f.write("%s\t%s\n" % (" ".join("%X" % ord(c) for c in k), " ".join("%X" % ord(c) for c in v)))
    return path


def saved_json(tok, tmp, name):
    d = os.path.join(tmp, name)
    tok.save_pretrained(d)
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        return f.read()


def folder_with(tmp, name, filename, data):
    d = os.path.join(tmp, name + "_src")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, filename), "wb") as f:
        f.write(data)
    return d


def byte_level_bpe(lines, vocab_size, specials):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    t.train_from_iterator(lines, tr)
    m = json.loads(t.to_str())["model"]
    return m["vocab"], [tuple(x) if isinstance(x, list) else tuple(x.split(" ")) for x in m["merges"]]


def spm_bpe_vocab_merges(model_bytes, tmp):
    from transformers.convert_slow_tokenizer import SentencePieceExtractor
    path = os.path.join(tmp, "bf.model")
    with open(path, "wb") as f:
        f.write(model_bytes)
    kw = SentencePieceExtractor(path).extract(models.BPE)
    return kw["vocab"], [tuple(m) for m in kw["merges"]]


def build_all(tmp, lines):
    out = {}
    # nllb: sentencepiece BPE through NllbTokenizerFast
    d = folder_with(tmp, "nllb", "sentencepiece.bpe.model", train_spm(lines, "bpe", 1000))
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES
    # (a folder with only the .model gets the 202 language codes only when asked)
    nllb = transformers.NllbTokenizerFast.from_pretrained(d, src_lang="fra_Latn",
                                                          additional_special_tokens=FAIRSEQ_LANGUAGE_CODES)
    out["nllb"] = saved_json(nllb, tmp, "nllb")
    # mbart50: sentencepiece unigram through MBart50TokenizerFast
    rules = small_rules(tmp)
    d = folder_with(tmp, "mbart50", "sentencepiece.bpe.model",
                    train_spm(lines, "unigram", 900, normalization_rule_tsv=rules))
    out["mbart50"] = saved_json(transformers.MBart50TokenizerFast.from_pretrained(d, src_lang="de_DE"), tmp, "mbart50")
    # t5: sentencepiece unigram through T5TokenizerFast
    d = folder_with(tmp, "t5", "spiece.model", train_spm(lines, "unigram", 800, normalization_rule_tsv=rules))
    out["t5"] = saved_json(transformers.T5TokenizerFast.from_pretrained(d, extra_ids=20), tmp, "t5")
    # bart / whisper: byte-level BPE trained with tokenizers
    vocab, merges = byte_level_bpe(lines, 1200, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bart = transformers.BartTokenizerFast(vocab=vocab, merges=merges)
    out["bart"] = saved_json(bart, tmp, "bart")
    vocab, merges = byte_level_bpe(lines, 1100, ["<|endoftext|>"])
    wh = transformers.WhisperTokenizerFast(vocab=vocab, merges=merges)
    langs = ["en", "de", "fr", "es", "ru", "zh", "ja", "ar"]
    specials = (["<|startoftranscript|>"] + ["<|%s|>" % x for x in langs] +
                ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
                 "<|notimestamps|>"])
    wh.add_tokens([AddedToken(s, special=True, normalized=False) for s in specials], special_tokens=True)
    wh.add_tokens([AddedToken("<|%.2f|>" % (i * 0.02), special=False, normalized=False) for i in range(51)])
    wh.set_prefix_tokens(language="english", task="transcribe")
    out["whisper"] = saved_json(wh, tmp, "whisper")

    # llama_bf: BPE with byte fallback, hand-built as transformers builds Llama's
    vocab, merges = spm_bpe_vocab_merges(train_spm(lines, "bpe", 700, byte_fallback=True), tmp)
    t = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                   decoders.Strip(" ", 1, 0)])
    t.add_tokens([AddedToken(x, special=True, normalized=False) for x in ("<unk>", "<s>", "</s>")])
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                     special_tokens=[("<s>", t.token_to_id("<s>"))])
    out["llama_bf"] = t.to_str()

    # wordpiece_bpe: prefix and suffix, lower case, BERT processing, added tokens of every kind
    t = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>"))
    t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(), normalizers.Strip()])
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=900, min_frequency=2, show_progress=False,
                                                     continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                                     special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    t.add_tokens([AddedToken("[MASK]", special=True, lstrip=True, normalized=False),
                  AddedToken("hello", single_word=True, normalized=True),
                  AddedToken("<sep>", rstrip=True, normalized=False),
                  AddedToken("[[", lstrip=True, rstrip=True, normalized=True),
                  AddedToken("Ⅻ", normalized=True)])
    t.add_special_tokens(["[CLS]", "[SEP]"])
    t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
    t.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Replace(Regex("##"), ""),
                                   decoders.Fuse(), decoders.Strip(" ", 0, 1)])
    out["wordpiece_bpe"] = t.to_str()

    # unigram_mix: Unigram with byte fallback and a varied pipeline
    sp = spm.SentencePieceProcessor(model_proto=train_spm(lines, "unigram", 700, byte_fallback=True))
    pieces = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    t = Tokenizer(models.Unigram(pieces, unk_id=sp.unk_id(), byte_fallback=True))
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                         normalizers.Replace(Regex(r"\s{2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\d+"), "isolated"), pre_tokenizers.Punctuation("contiguous"),
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Metaspace(prepend_scheme="first")])
    t.decoder = decoders.Metaspace(prepend_scheme="first")
    t.add_tokens([AddedToken("<sep>", special=True, normalized=False),
                  AddedToken("<cls>", special=True, normalized=False, rstrip=True),
                  AddedToken("hello", normalized=True, single_word=True),
                  AddedToken("▁▁", normalized=False)])
    t.post_processor = processors.TemplateProcessing(
        single="<cls> $A <sep>", pair="<cls> $A <sep> $B:1 <sep>:1",
        special_tokens=[("<cls>", t.token_to_id("<cls>")), ("<sep>", t.token_to_id("<sep>"))])
    out["unigram_mix"] = t.to_str()

    # bpe_splits: character BPE, every split behaviour
    t = Tokenizer(models.BPE(unk_token="<unk>", ignore_merges=True))
    t.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Strip(left=False, right=True)])
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Split("-", "merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[,.]"), "merged_with_next"),
        pre_tokenizers.Split(Regex(r"[aeiouy]+"), "contiguous", invert=True),
        pre_tokenizers.Split(Regex(r"\p{Han}|\p{Hiragana}"), "removed"),
        pre_tokenizers.Metaspace(prepend_scheme="never", split=False)])
    t.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=600, min_frequency=2, show_progress=False,
                                                     special_tokens=["<unk>"]))
    t.decoder = decoders.Metaspace(prepend_scheme="never")
    out["bpe_splits"] = t.to_str()

    # bytelevel_prefix: ByteLevel with add_prefix_space and no regex
    vocab, merges = byte_level_bpe(lines, 700, ["<|endoftext|>"])
    t = Tokenizer(models.BPE(vocab, merges))
    t.normalizer = normalizers.NFKD()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)
    t.decoder = decoders.ByteLevel()
    t.add_special_tokens(["<|endoftext|>"])
    t.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=True),
        processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 0)])])
    out["bytelevel_prefix"] = t.to_str()
    return out


# ------------------------------------------------------------------ cases

def decode_cases(r, tok, size, n):
    cases = []
    added = [i for i in range(size) if tok.id_to_token(i) is not None]
    for _ in range(n):
        k = r.random()
        m = r.randint(0, 12)
        if k < 0.6:
            ids = [r.randrange(size) for _ in range(m)]
        elif k < 0.8:  # byte tokens and neighbours
            byte_ids = [tok.token_to_id("<0x%02X>" % b) for b in range(256)]
            byte_ids = [i for i in byte_ids if i is not None] or added
            ids = [r.choice(byte_ids) if r.random() < 0.7 else r.randrange(size) for _ in range(m)]
        else:  # ids past the vocabulary are skipped
            ids = [r.randrange(size + 5) for _ in range(m)]
        cases.append([ids, safe_decode(tok, ids, False), safe_decode(tok, ids, True)])
    return cases


def compact_d0(d0, d1, text):
    """The decode with special tokens: 0 when it is the text, [prefix, suffix] when
    it is prefix + the decode without them + suffix, else itself."""
    if d0 == text:
        return 0
    if d0 is not None and d1 is not None and d1 != d0 and d1 in d0:
        k = d0.index(d1)
        return [d0[:k], d0[k + len(d1):]]
    return d0


def safe_decode(tok, ids, skip):
    """tok.decode, or None where tokenizers panics (a Strip decoder cutting past an
    empty token): vkformer must fail there too."""
    try:
        return tok.decode(ids, skip_special_tokens=skip)
    except BaseException as e:  # pyo3's PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_tokenizer_cases.py OUT_DIR")
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    r = random.Random(SEED)
    lines = corpus(r, 4000)
    texts = make_texts(r)
    with tempfile.TemporaryDirectory() as tmp:
        built = build_all(tmp, lines)
        # transformers' own call on the saved folders gives the same ids as tokenizers
        # on the same tokenizer.json (the cases are tokenizers')
        for name in FAMILIES:
            auto = transformers.AutoTokenizer.from_pretrained(os.path.join(tmp, name))
            tok = Tokenizer.from_str(built[name])
            differ = sum(auto(s, add_special_tokens=sp)["input_ids"] != tok.encode(s, add_special_tokens=sp).ids
                         for s in texts for sp in (False, True))
            print("%-8s transformers %s: %d of %d encodes differ from tokenizers" %
                  (name, type(auto).__name__, differ, 2 * len(texts)), file=sys.stderr)
    total = 0

    def write(name, obj_or_text):
        nonlocal total
        data = obj_or_text if isinstance(obj_or_text, str) else json.dumps(obj_or_text, ensure_ascii=False,
                                                                             separators=(",", ":"))
        blob = lzma.compress(data.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME)
        with open(os.path.join(outdir, name + ".xz"), "wb") as f:
            f.write(blob)
        total += len(blob)
        print("%-28s %8d bytes (%d uncompressed)" % (name + ".xz", len(blob), len(data.encode())), file=sys.stderr)

    write("texts.json", texts)
    for name, text in built.items():
        write(name + ".json", text)
        tok = Tokenizer.from_str(text)
        vocab = tok.get_vocab(with_added_tokens=True)
        size = max(vocab.values()) + 1
        added = [[t.content, i, t.special, tok.id_to_token(i)]
                 for i, t in sorted(tok.get_added_tokens_decoder().items())]
        enc = []
        for ti, s in enumerate(texts):
            if name not in FAMILIES and ti % 2:
                continue  # the hand-built kinds get every other text, to keep the data small
            a = tok.encode(s, add_special_tokens=False).ids
            b = tok.encode(s, add_special_tokens=True).ids
            d0, d1 = safe_decode(tok, b, False), safe_decode(tok, b, True)
            # compact: b as [prefix, suffix] around a when it is; decodes equal to the
            # text as 0, the second equal to the first as 1
            for k in range(len(b) + 1):
                if b[k:k + len(a)] == a:
                    b = [b[:k], b[k + len(a):]]
                    break
            enc.append([ti, a, b, compact_d0(d0, d1, s), 0 if d1 == s else 1 if d1 == d0 else d1])
        dec = decode_cases(random.Random(SEED + len(name)), tok, size, 200)
        write(name + ".cases.json", {"name": name, "vocab_size": size, "added": added, "encode": enc, "decode": dec})
    print("total %d bytes, %d texts, %d tokenizers" % (total, len(texts), len(built)), file=sys.stderr)


if __name__ == "__main__":
    main()
