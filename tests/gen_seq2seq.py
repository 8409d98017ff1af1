#!/usr/bin/python3
"""Writes random-weight Hugging Face M2M-100, NLLB-200 and mBART-50 folders in the hub's layout.

usage: /usr/bin/python3 tests/gen_seq2seq.py OUT_DIR m2m_100|nllb|mbart [--d-model 32] [--layers 2]
           [--heads 4] [--ffn 64] [--seed 1] [--max-positions 64] [--dtype f32|f16] [--names hub|all]
           [--vocab-size N] [--malformed KIND]

Each folder holds what the facebook/* repositories hold (tokenizer.json aside: tests/test_seq2seq.py
covers it with the folders transformers 5.x save_pretrained writes):
  config.json              the model's keys (model_type m2m_100 or mbart, architectures, d_model, layers,
                           heads, ffn dims, vocab_size, max_position_embeddings, scale_embedding,
                           activation_function, pad/bos/eos/decoder_start ids, tie_word_embeddings);
  generation_config.json   decoder_start_token_id 2, max_length 200 (NLLB's), forced_eos_token_id (mBART's);
  model.safetensors        model.shared.weight, the layers (q/k/v/out_proj, fc1, fc2, the three layer
                           norms), model.{encoder,decoder}.layer_norm, and for mBART
                           model.{encoder,decoder}.embed_positions.weight (max_positions + 2 rows),
                           layernorm_embedding and final_logits_bias; --names all adds the tied aliases
                           (encoder/decoder embed_tokens, lm_head), as older hub files hold them;
  sentencepiece.bpe.model  a tiny BPE SentencePiece model trained here on a mixed-script corpus;
  vocab.json               M2M-100 only: <s> <pad> </s> <unk> then the spm's pieces;
  tokenizer_config.json    tokenizer_class (NllbTokenizer, M2M100Tokenizer, MBart50Tokenizer), src_lang.
vocab_size leaves room past the tokenizer (M2M-100's 8 madeupword rows, a few more elsewhere).

Importable: make_folder(out, family, **options) -> info dict; make_malformed(out, family, kind) -> keywords.
"""
import json
import math
import os
import random
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402

import gen_marian  # noqa: E402
import seq2seq_ref  # noqa: E402

WORDS = ("the house cat dog sees big small tree river walks today mother book reads letter garden sun city "
         "der Haus Katze sieht groß Baum Fluss heute Mutter Buch liest Brief Garten Sonne Stadt "
         "la maison chat voit grand arbre rivière aujourd'hui mère livre lit lettre jardin soleil ville "
         "дом кошка видит большой дерево река сегодня мать книга "
         "家 猫 見る 大きい 木 川 今日 母 本").split()

# KIND -> (what it breaks, keywords of which the CLI's one-line error must contain at least one)
MALFORMED = {
    "no-spm": ("sentencepiece.bpe.model removed", ["sentencepiece.bpe.model"]),
    "no-weights": ("model.safetensors removed", ["model.safetensors"]),
    "missing-final-norm": ("model.decoder.layer_norm.weight removed", ["model.decoder.layer_norm.weight"]),
    "bad-shape": ("fc1 of encoder layer 0 has a wrong shape", ["model.encoder.layers.0.fc1.weight"]),
    "small-vocab": ("vocab_size below the tokenizer's ids", ["vocab_size"]),
    "tied-differ": ("lm_head.weight differs from model.shared.weight", ["lm_head.weight", "differ"]),
    "bad-activation": ("activation_function 7", ["activation_function"]),
    "huge-penalty": ("length_penalty 1e308 in generation_config.json", ["length_penalty", "generation_config"]),
    "bad-src-lang": ("tokenizer_config.json src_lang xx_YY", ["src_lang"]),
}


def corpus(seed, n=600):
    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randint(2, 9))) + r.choice([".", "!", "?", ""]) for _ in range(n)]


def train_bpe(sentences, vocab_size):
    import io
    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=buf, vocab_size=vocab_size,
                                   model_type="bpe", character_coverage=1.0, hard_vocab_limit=False, num_threads=1,
                                   minloglevel=2)
    return buf.getvalue()


def make_folder(out, family, d_model=32, layers=2, heads=4, ffn=64, seed=1, max_positions=64, dtype="f32",
                names="hub", spm_vocab=120, vocab_size=0):
    import sentencepiece as spm
    os.makedirs(out, exist_ok=True)
    proto = train_bpe(corpus(seed), spm_vocab)
    with open(os.path.join(out, "sentencepiece.bpe.model"), "wb") as f:
        f.write(proto)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    n_spm = sp.get_piece_size()
    codes = seq2seq_ref._codes()
    model_type = "mbart" if family == "mbart" else "m2m_100"
    tc = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
          "model_max_length": 1000000000000000019884624838656}
    if family == "m2m_100":
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for i in range(n_spm):
            if not (sp.is_control(i) or sp.is_unknown(i)):
                vocab.setdefault(sp.id_to_piece(i), len(vocab))
        with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False, indent=2)
        V = len(vocab) + len(codes["m2m100"]) + 8          # + M2M-100's 8 madeupword rows
        tc.update({"tokenizer_class": "M2M100Tokenizer", "src_lang": "en", "tgt_lang": "fr", "language_codes": "m2m100",
                   "num_madeup_words": 8})
    elif family == "nllb":
        V = n_spm + 1 + len(codes["nllb"]) + 1 + 3
        tc.update({"tokenizer_class": "NllbTokenizer", "src_lang": "eng_Latn", "tgt_lang": None,
                   "additional_special_tokens": codes["nllb"], "legacy_behaviour": False})
    else:
        V = n_spm + 1 + len(codes["mbart50"]) + 1 + 2
        tc.update({"tokenizer_class": "MBart50Tokenizer", "src_lang": "en_XX", "tgt_lang": None})
    V = max(V, vocab_size)                                 # --vocab-size: a real model's padded vocabulary
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    cfg = {
        "activation_dropout": 0.0, "activation_function": "gelu" if family == "mbart" else "relu",
        "architectures": ["MBartForConditionalGeneration" if family == "mbart" else "M2M100ForConditionalGeneration"],
        "attention_dropout": 0.1, "bos_token_id": 0, "d_model": d_model, "decoder_attention_heads": heads,
        "decoder_ffn_dim": ffn, "decoder_layerdrop": 0.05, "decoder_layers": layers, "decoder_start_token_id": 2,
        "dropout": 0.1, "encoder_attention_heads": heads, "encoder_ffn_dim": ffn, "encoder_layerdrop": 0.05,
        "encoder_layers": layers, "eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": True,
        "max_position_embeddings": max_positions, "model_type": model_type, "pad_token_id": 1,
        "scale_embedding": True, "tie_word_embeddings": True, "torch_dtype": "float32",
        "transformers_version": "4.28.0.dev0", "use_cache": True, "vocab_size": V,
    }
    if family == "mbart":
        cfg.update({"forced_eos_token_id": 2, "normalize_before": True, "add_final_layer_norm": True})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    gen = {"bos_token_id": 0, "decoder_start_token_id": 2, "eos_token_id": 2, "max_length": 200, "pad_token_id": 1,
           "transformers_version": "4.28.0.dev0"}
    if family == "mbart":
        gen["forced_eos_token_id"] = 2
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    w = random_weights(cfg, seed)
    if names == "all":
        for alias in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"):
            w[alias] = w["model.shared.weight"]
    if dtype == "f16":
        w = gen_marian.to_f16(w)
    gen_marian.write_safetensors(os.path.join(out, "model.safetensors"), w)
    return {"vocab_size": V, "config": cfg}


def random_weights(cfg, seed):
    rng = np.random.default_rng(seed)
    d, V = cfg["d_model"], cfg["vocab_size"]
    w = {}

    def lin(prefix, n_out, n_in):
        w[prefix + ".weight"] = (gen_marian.LIN_GAIN * rng.uniform(-1, 1, (n_out, n_in)) / math.sqrt(n_in)).astype(np.float32)
        w[prefix + ".bias"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)

    def ln(prefix):
        w[prefix + ".weight"] = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
        w[prefix + ".bias"] = (0.1 * rng.standard_normal(d)).astype(np.float32)

    emb_std = gen_marian.EMB_STD / math.sqrt(d)
    w["model.shared.weight"] = (emb_std * rng.standard_normal((V, d))).astype(np.float32)
    mbart = cfg["model_type"] == "mbart"
    for side in ("encoder", "decoder"):
        if mbart:
            w["model.%s.embed_positions.weight" % side] = (0.5 * rng.standard_normal(
                (cfg["max_position_embeddings"] + 2, d))).astype(np.float32)
            ln("model.%s.layernorm_embedding" % side)
        for i in range(cfg[side + "_layers"]):
            p = "model.%s.layers.%d." % (side, i)
            for a in ("self_attn",) + (("encoder_attn",) if side == "decoder" else ()):
                for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
                    lin(p + a + "." + proj, d, d)
                ln(p + a + "_layer_norm")
            lin(p + "fc1", cfg[side + "_ffn_dim"], d)
            lin(p + "fc2", d, cfg[side + "_ffn_dim"])
            ln(p + "final_layer_norm")
        ln("model.%s.layer_norm" % side)
    if mbart:
        w["final_logits_bias"] = (0.3 * rng.standard_normal((1, V))).astype(np.float32)
    return w


def make_malformed(out, family, kind):
    make_folder(out, family)
    p = lambda n: os.path.join(out, n)  # noqa: E731

    def edit_json(name, fn):
        with open(p(name)) as f:
            j = json.load(f)
        fn(j)
        with open(p(name), "w") as f:
            json.dump(j, f)

    def edit_weights(fn):
        w = gen_marian.read_safetensors(p("model.safetensors"))
        fn(w)
        gen_marian.write_safetensors(p("model.safetensors"), w)

    if kind == "no-spm":
        os.remove(p("sentencepiece.bpe.model"))
    elif kind == "no-weights":
        os.remove(p("model.safetensors"))
    elif kind == "missing-final-norm":
        edit_weights(lambda w: w.pop("model.decoder.layer_norm.weight"))
    elif kind == "bad-shape":
        edit_weights(lambda w: w.__setitem__("model.encoder.layers.0.fc1.weight",
                                             w["model.encoder.layers.0.fc1.weight"][:-1]))
    elif kind == "small-vocab":
        def small(w):
            w["model.shared.weight"] = w["model.shared.weight"][:40]
            w.pop("final_logits_bias", None)
        edit_weights(small)
        edit_json("config.json", lambda j: j.__setitem__("vocab_size", 40))
    elif kind == "tied-differ":
        edit_weights(lambda w: w.__setitem__("lm_head.weight", w["model.shared.weight"] * 2))
    elif kind == "bad-activation":
        edit_json("config.json", lambda j: j.__setitem__("activation_function", 7))
    elif kind == "huge-penalty":
        edit_json("generation_config.json", lambda j: j.__setitem__("length_penalty", 1e308))
    elif kind == "bad-src-lang":
        edit_json("tokenizer_config.json", lambda j: j.__setitem__("src_lang", "xx_YY"))
    else:
        raise ValueError("unknown malformed kind %r" % kind)
    return MALFORMED[kind][1]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("family", choices=("m2m_100", "nllb", "mbart"))
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-positions", type=int, default=64)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    ap.add_argument("--names", default="hub", choices=("hub", "all"))
    ap.add_argument("--vocab-size", type=int, default=0, help="at least this vocabulary (NLLB-200: 256206)")
    ap.add_argument("--malformed")
    a = ap.parse_args(argv)
    if a.malformed:
        print(" ".join(make_malformed(a.out, a.family, a.malformed)))
    else:
        make_folder(a.out, a.family, a.d_model, a.layers, a.heads, a.ffn, a.seed, a.max_positions, a.dtype, a.names,
                    vocab_size=a.vocab_size)


if __name__ == "__main__":
    main(sys.argv[1:])
