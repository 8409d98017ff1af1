#!/usr/bin/python3
"""A PyTorch reference of Hugging Face's M2M-100 / NLLB-200, mBART (mBART-50) and BART models and the
first three's tokenizers, written here from their definitions, on top of tests/marian_ref.py (whose greedy and beam
search, transcribed from transformers 5.12's generate, serve every family).

Runs under Debian's /usr/bin/python3 (PyTorch 1.13, numpy, python3-sentencepiece): no transformers.
Held against transformers 5.12.1 by tools/check_seq2seq_hf.py (run it with ../shared/tools/hf_python.sh).

The models (config.json keys in brackets):
  - M2M100ForConditionalGeneration (model_type m2m_100; NLLB-200 too): token embedding shared by
    encoder, decoder and lm_head, times sqrt(d_model) when [scale_embedding]; fairseq's sinusoidal
    positions: half = d/2, rate_j = exp(-j log(10000) / (half - 1)) in float32, sin in channels
    [0, half), cos in [half, 2 half), a zero channel for odd d, the row of [pad_token_id] all zero; a token
    at place t reads row pad + (number of non-pad tokens up to t), a pad token the zero row; pre-LN layers
    (x = x + SelfAttn(LN(x)); x = x + CrossAttn(LN(x)); x = x + FFN(LN(x))) with the stacks' final
    layer_norm; ReLU [activation_function]; no final_logits_bias.
  - MBartForConditionalGeneration (model_type mbart): the same pre-LN layers and final norms, learned
    positions [max_position_embeddings + 2 rows], position p at row p + 2, layernorm_embedding after
    embeddings + positions, GELU, final_logits_bias.
  - BartForConditionalGeneration (model_type bart): post-LN layers (x = LN(x + SelfAttn(x));
    x = LN(x + CrossAttn(x)); x = LN(x + FFN(x))) and no final norms, learned positions at row p + 2 and
    layernorm_embedding as mBART's, GELU, final_logits_bias (zeros when the file lacks it), lm_head tied
    to model.shared unless [tie_word_embeddings] is false. Its byte-level BPE tokenizer is not written
    here: tests/test_seq2seq.py takes BART's ids from transformers' golden cases
    (tools/make_bpe_cases.py).
Generation: generate() with the folder's generation_config.json (decoder_start_token_id, max_length,
forced_eos_token_id, ...) and forced_bos_token_id = the target language token (BART: the folder's
forced_bos_token_id): at the first step every other token is -inf and the forced one 0.

Tokenizers (slow-file conventions; tokenizer.json carries the same ids):
  - NLLB (NllbTokenizer): sentencepiece.bpe.model under fairseq's offset: <s> 0, <pad> 1, </s> 2,
    <unk> 3, spm piece i (i >= 3) -> i + 1, spm's unknown -> 3; the 202 language codes after the pieces
    (n_spm + 1 + k), <mask> after them; source = [src_lang] pieces </s> (legacy_behaviour false);
    decoding skips specials and languages and joins the pieces as tokenizers' Metaspace decoder does
    (what transformers 5.12's NllbTokenizer runs): U+2581 -> space, the first piece's leading one
    dropped, nothing else stripped.
  - mBART-50 (MBart50Tokenizer): the same with mBART-50's 52 codes (en_XX).
  - M2M-100 (M2M100Tokenizer): spm pieces looked up in vocab.json (unknown -> <unk>), languages
    __xx__ after vocab.json's entries; source = [__src__] pieces </s>; decoding skips <s> <pad> </s>
    <unk> but keeps language tokens, as transformers 5.12 does where the folder does not declare them
    special (these folders do not), and decodes through the spm, ends stripped.
"""
import json
import math
import os
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import marian_ref  # noqa: E402

NLLB_CODES = LANGS = None


def _codes():
    global NLLB_CODES, LANGS
    if LANGS is None:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "language_codes.json")) as f:
            LANGS = json.load(f)
    return LANGS


def fairseq_sinusoids(rows, d, pad):
    """M2M100SinusoidalPositionalEmbedding.get_embedding, in float32 like torch."""
    half = d // 2
    emb = math.log(10000) / (half - 1)
    rate = torch.exp(torch.arange(half, dtype=torch.int64).float() * -emb)
    ang = torch.arange(rows, dtype=torch.int64).float().unsqueeze(1) * rate.unsqueeze(0)
    e = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1).view(rows, -1)
    if d % 2 == 1:
        e = torch.cat([e, torch.zeros(rows, 1)], dim=1)
    e[pad, :] = 0
    return e


class Seq2Seq(marian_ref.Marian):
    """M2M-100 / NLLB and mBART: weights (float32) + config; encode/decode as transformers 5.12."""

    def __init__(self, config, weights):
        c = dict(config)
        self.kind = c["model_type"]
        if self.kind not in ("m2m_100", "mbart", "bart"):
            raise ValueError("model_type %r is not m2m_100, mbart or bart" % self.kind)
        self.config = c
        self.act = marian_ref.ACTIVATIONS[c.get("activation_function", "relu" if self.kind == "m2m_100" else "gelu")]
        self.d = c["d_model"]
        self.pad = c.get("pad_token_id", 1)
        self.eos = c.get("eos_token_id", 2)
        start = c.get("decoder_start_token_id")
        self.start = start if start is not None else c.get("bos_token_id", 0)
        self.scale = math.sqrt(self.d) if c.get("scale_embedding", False) else 1.0
        w = dict(weights)
        tie = c.get("tie_word_embeddings", True)
        for n in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight") + (
                ("lm_head.weight",) if tie else ()):
            if n in w:
                emb = w[n]
                break
        else:
            raise KeyError("no token embedding")
        self.enc_emb = self.dec_emb = self.lm_head = emb
        if not tie:
            self.lm_head = w["lm_head.weight"]
        self.post_ln = self.kind == "bart"
        V = emb.shape[0]
        self.vocab_size = V
        self.bias = w["final_logits_bias"].reshape(-1) if "final_logits_bias" in w else torch.zeros(V)
        npos = c["max_position_embeddings"]
        if self.kind == "m2m_100":
            self.pos_table = fairseq_sinusoids(npos + 2, self.d, self.pad)
        else:
            self.enc_pos = w["model.encoder.embed_positions.weight"]
            self.dec_pos = w["model.decoder.embed_positions.weight"]
        self.w = w
        self.layers = (c["encoder_layers"], c["decoder_layers"])

    def _positions(self, ids, side):
        """(B, T, d) position embeddings of ids (long (B, T))."""
        if self.kind == "m2m_100":
            keep = (ids != self.pad).int()
            rows = torch.cumsum(keep, dim=1) * keep + self.pad
            return self.pos_table[rows]
        table = self.enc_pos if side == "encoder" else self.dec_pos
        return table[torch.arange(ids.shape[1]) + 2][None]

    def _embed(self, ids, side):
        x = self.enc_emb[ids] * self.scale + self._positions(ids, side)
        if self.kind in ("mbart", "bart"):
            x = self._ln(x, "model.%s.layernorm_embedding" % side)
        return x

    @torch.no_grad()
    def encode(self, src, src_keep=None):
        c = self.config
        x = self._embed(src, "encoder")
        mask = None if src_keep is None else self._additive(src_keep)
        H = c["encoder_attention_heads"]
        for i in range(c["encoder_layers"]):
            p = "model.encoder.layers.%d." % i
            if self.post_ln:
                x = self._ln(x + self._attn(x, x, p + "self_attn", H, mask), p + "self_attn_layer_norm")
                h = self._lin(self.act(self._lin(x, p + "fc1")), p + "fc2")
                x = self._ln(x + h, p + "final_layer_norm")
                continue
            x = x + self._attn(self._ln(x, p + "self_attn_layer_norm"), self._ln(x, p + "self_attn_layer_norm"),
                               p + "self_attn", H, mask)
            h = self._ln(x, p + "final_layer_norm")
            x = x + self._lin(self.act(self._lin(h, p + "fc1")), p + "fc2")
        return x if self.post_ln else self._ln(x, "model.encoder.layer_norm")

    @torch.no_grad()
    def decode(self, memory, tgt, src_keep=None):
        c = self.config
        T = tgt.shape[1]
        x = self._embed(tgt, "decoder")
        causal = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), diagonal=1)[None, None]
        cross = None if src_keep is None else self._additive(src_keep)
        H = c["decoder_attention_heads"]
        for i in range(c["decoder_layers"]):
            p = "model.decoder.layers.%d." % i
            if self.post_ln:
                x = self._ln(x + self._attn(x, x, p + "self_attn", H, causal), p + "self_attn_layer_norm")
                x = self._ln(x + self._attn(x, memory, p + "encoder_attn", H, cross), p + "encoder_attn_layer_norm")
                h = self._lin(self.act(self._lin(x, p + "fc1")), p + "fc2")
                x = self._ln(x + h, p + "final_layer_norm")
                continue
            h = self._ln(x, p + "self_attn_layer_norm")
            x = x + self._attn(h, h, p + "self_attn", H, causal)
            x = x + self._attn(self._ln(x, p + "encoder_attn_layer_norm"), memory, p + "encoder_attn", H, cross)
            h = self._ln(x, p + "final_layer_norm")
            x = x + self._lin(self.act(self._lin(h, p + "fc1")), p + "fc2")
        if not self.post_ln:
            x = self._ln(x, "model.decoder.layer_norm")
        return F.linear(x, self.lm_head) + self.bias


def load_folder(path, target_lang_id=None):
    """The model of a folder, generation_config applied by marian_ref's generation, the target language
    (a token id) forced as the first generated token."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    m = Seq2Seq(cfg, marian_ref.load_weights(path))
    gc_path = os.path.join(path, "generation_config.json")
    m.generation_config = {"bad_words_ids": []}
    if os.path.exists(gc_path):
        with open(gc_path) as f:
            m.generation_config.update(json.load(f))
    m.forced_bos = target_lang_id if target_lang_id is not None else m.generation_config.get(
        "forced_bos_token_id", cfg.get("forced_bos_token_id") if not os.path.exists(gc_path) else None)
    m.forced_eos_default = None
    return m


class Tokenizer:
    """The slow tokenizers' ids and text (see the module doc)."""

    def __init__(self, folder):
        import sentencepiece as spm
        cfg = {}
        p = os.path.join(folder, "tokenizer_config.json")
        if os.path.exists(p):
            with open(p) as f:
                cfg = json.load(f)
        cls = cfg.get("tokenizer_class", "")
        self.sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, "sentencepiece.bpe.model"))
        n_spm = self.sp.get_piece_size()
        codes = _codes()
        self.vocab = None
        with open(os.path.join(folder, "config.json")) as f:
            model_type = json.load(f)["model_type"]
        if model_type == "m2m_100" and not cls.startswith("Nllb") and os.path.exists(os.path.join(folder, "vocab.json")):
            self.kind = "m2m_100"
            with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
                self.vocab = json.load(f)
            self.inv = {v: k for k, v in self.vocab.items()}
            self.langs = codes["m2m100"]
            base = len(self.vocab)
            self.lang_id = {c: base + i for i, c in enumerate(self.langs)}
            self.unk = self.vocab["<unk>"]
            self.specials = {self.vocab[t] for t in ("<s>", "<pad>", "</s>", "<unk>") if t in self.vocab}
            self.default = cfg.get("src_lang") or "en"
            self.lang_first, self.mask = True, None
        else:
            self.kind = "nllb" if model_type == "m2m_100" else "mbart"
            self.langs = codes["nllb"] if self.kind == "nllb" else codes["mbart50"]
            base = n_spm + 1
            self.lang_id = {c: base + i for i, c in enumerate(self.langs)}
            self.mask = base + len(self.langs)
            self.unk = 3
            self.specials = {0, 1, 2, 3, self.mask}
            self.default = cfg.get("src_lang") or ("eng_Latn" if self.kind == "nllb" else "en_XX")
            self.lang_first = not cfg.get("legacy_behaviour", False)
        self.eos = 2 if self.vocab is None else self.vocab["</s>"]
        self.n_spm = n_spm

    def piece_id(self, p):
        if self.vocab is not None:
            return self.vocab.get(p, self.unk)
        i = self.sp.piece_to_id(p)
        return i + 1 if i > 0 else self.unk

    def encode(self, text, src_lang=None):
        lang = self.lang_id[src_lang or self.default]
        ids = [self.piece_id(p) for p in self.sp.encode_as_pieces(text)]
        return ([lang] + ids + [self.eos]) if self.lang_first else (ids + [self.eos, lang])

    def decode(self, ids):
        langs = {v: k for k, v in self.lang_id.items()}
        pieces = []
        for i in ids:
            if i in self.specials:
                continue
            if i in langs:
                if self.kind == "m2m_100":
                    pieces.append("__%s__" % langs[i])
                continue
            if self.vocab is not None:
                if i in self.inv:
                    pieces.append(self.inv[i])
            elif 4 <= i and i - 1 < self.n_spm:
                pieces.append(self.sp.id_to_piece(i - 1))
        if self.vocab is None:                  # Metaspace: each U+2581 a space, but the first piece's leading one
            text = "".join(pieces)
            return (text[1:] if text.startswith("\u2581") else text).replace("\u2581", " ")
        return self.sp.decode_pieces(pieces).replace("\u2581", " ").strip()


if __name__ == "__main__":
    if len(sys.argv) < 4:
        print("usage: seq2seq_ref.py FOLDER SRC_LANG TGT_LANG [TEXT...]", file=sys.stderr)
        sys.exit(2)
    t = Tokenizer(sys.argv[1])
    m = load_folder(sys.argv[1], t.lang_id[sys.argv[3]])
    for text in sys.argv[4:] or ["hello world"]:
        ids = t.encode(text, sys.argv[2])
        g = marian_ref.greedy(m, ids, 12)
        b, s = marian_ref.beam_search(m, ids, 4, 12)
        print("%s\n  src %s\n  greedy %s %r\n  beam4 %s %.5f %r" % (text, ids, g, t.decode(g), b, s, t.decode(b)))
