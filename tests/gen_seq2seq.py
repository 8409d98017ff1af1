#!/usr/bin/python3
"""Writes random-weight Hugging Face M2M-100, NLLB-200, mBART-50 and BART folders in the hub's layout.

usage: /usr/bin/python3 tests/gen_seq2seq.py OUT_DIR m2m_100|nllb|mbart|bart [--d-model 32] [--layers 2]
           [--heads 4] [--ffn 64] [--seed 1] [--max-positions 64] [--dtype f32|f16] [--names hub|all]
           [--vocab-size N] [--tokenizer hub|saved|legacy] [--malformed KIND]

BART (BartForConditionalGeneration, as facebook/bart-large): config.json with bart-large's keys,
generation_config.json with its defaults (forced_bos_token_id 0, forced_eos_token_id 2,
decoder_start_token_id 2, num_beams 4, early_stopping true, no_repeat_ngram_size 3), model.safetensors (model.shared.weight, learned positions of max_positions + 2
rows, layernorm_embedding, post-LN layers, no final norms, final_logits_bias), and the byte-level BPE
tokenizer of tests/data/tokenizers (tools/make_bpe_cases.py's GPT-2-style vocabulary, made with the
real tokenizers library): --tokenizer hub writes vocab.json + merges.txt, saved the tokenizer.json +
tokenizer_config.json that transformers 5.12 save_pretrained wrote, legacy transformers 4.x's slow
files with special_tokens_map.json.

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
# BART's own (its tokenizer files), with the generic ones above that apply to it
BART_MALFORMED = {
    "no-merges": ("merges.txt removed", ["merges.txt"]),
    "merges-line": ("a merges.txt line of three tokens", ["merges.txt line 3", "two tokens"]),
    "merges-unknown": ("a merge naming a token vocab.json lacks", ["merges.txt line", "not in vocab.json"]),
    "merges-utf8": ("a merges.txt line that is not UTF-8", ["merges.txt line", "UTF-8"]),
    "vocab-list": ("vocab.json holding a list", ["vocab.json"]),
    "vocab-dup-id": ("two vocab.json tokens with one id", ["vocab.json", "id"]),
    "eos-mismatch": ("eos_token_id 5 in config.json and generation_config.json, the tokenizer's </s> is 2",
                     ["eos_token_id 5"]),
    "bad-tokenizer-json": ("tokenizer.json with a Unigram model", ["tokenizer.json", "BPE"]),
    "no-weights": MALFORMED["no-weights"],
    "bad-shape": MALFORMED["bad-shape"],
    "small-vocab": MALFORMED["small-vocab"],
    "tied-differ": MALFORMED["tied-differ"],
    "no-positions": ("model.decoder.embed_positions.weight removed", ["model.decoder.embed_positions.weight"]),
    "pre-ln": ("normalize_before true in config.json", ["normalize_before"]),
}
HERE = os.path.dirname(os.path.abspath(__file__))


def bpe_folder_files(form):
    """{file name: text} of tools/make_bpe_cases.py's BART tokenizer folder `form` (hub, saved, legacy)."""
    import lzma
    with open(os.path.join(HERE, "data", "tokenizers", "bart_%s.folder.json.xz" % form), "rb") as f:
        files = json.loads(lzma.decompress(f.read()))
    files.pop("config.json", None)
    return files


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
                names="hub", spm_vocab=120, vocab_size=0, tokenizer="hub"):
    if family == "bart":
        return make_bart(out, d_model, layers, heads, ffn, seed, max_positions, dtype, names, vocab_size, tokenizer)
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


def make_bart(out, d_model, layers, heads, ffn, seed, max_positions, dtype, names, vocab_size, tokenizer):
    os.makedirs(out, exist_ok=True)
    files = bpe_folder_files(tokenizer)
    for name, text in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write(text)
    if "vocab.json" in files:
        n_tok = len(json.loads(files["vocab.json"]))
    else:
        n_tok = len(json.loads(files["tokenizer.json"])["model"]["vocab"])
    V = max(n_tok, vocab_size)
    cfg = {
        "_name_or_path": "bart-large", "activation_dropout": 0.1, "activation_function": "gelu",
        "add_bias_logits": False, "add_final_layer_norm": False, "architectures": ["BartForConditionalGeneration"],
        "attention_dropout": 0.1, "bos_token_id": 0, "classif_dropout": 0.1, "classifier_dropout": 0.0,
        "d_model": d_model, "decoder_attention_heads": heads, "decoder_ffn_dim": ffn, "decoder_layerdrop": 0.0,
        "decoder_layers": layers, "decoder_start_token_id": 2, "dropout": 0.1, "early_stopping": True,
        "encoder_attention_heads": heads, "encoder_ffn_dim": ffn, "encoder_layerdrop": 0.0, "encoder_layers": layers,
        "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2, "gradient_checkpointing": False,
        "init_std": 0.02, "is_encoder_decoder": True, "max_position_embeddings": max_positions,
        "model_type": "bart", "no_repeat_ngram_size": 3, "normalize_before": False, "normalize_embedding": True,
        "num_beams": 4,
        "num_hidden_layers": layers, "pad_token_id": 1, "scale_embedding": False,
        "transformers_version": "4.26.0.dev0", "use_cache": True, "vocab_size": V,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    gen = {"_from_model_config": True, "bos_token_id": 0, "decoder_start_token_id": 2, "early_stopping": True,
           "eos_token_id": 2, "forced_bos_token_id": 0, "forced_eos_token_id": 2, "no_repeat_ngram_size": 3,
           "num_beams": 4, "pad_token_id": 1, "transformers_version": "4.27.0.dev0"}
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
    mbart = cfg["model_type"] in ("mbart", "bart")
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
        if cfg["model_type"] != "bart":
            ln("model.%s.layer_norm" % side)
    if mbart:
        w["final_logits_bias"] = (0.3 * rng.standard_normal((1, V))).astype(np.float32)
    return w


def make_malformed(out, family, kind):
    if family == "bart":
        return make_bart_malformed(out, kind)
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


def make_bart_malformed(out, kind):
    make_folder(out, "bart", tokenizer="saved" if kind == "bad-tokenizer-json" else "hub")
    p = lambda n: os.path.join(out, n)  # noqa: E731

    def edit_json(name, fn):
        with open(p(name), encoding="utf-8") as f:
            j = json.load(f)
        j = fn(j) or j
        with open(p(name), "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)

    def edit_weights(fn):
        w = gen_marian.read_safetensors(p("model.safetensors"))
        fn(w)
        gen_marian.write_safetensors(p("model.safetensors"), w)

    def edit_merges(fn):
        with open(p("merges.txt"), "rb") as f:
            lines = f.read().split(b"\n")
        fn(lines)
        with open(p("merges.txt"), "wb") as f:
            f.write(b"\n".join(lines))

    if kind == "no-merges":
        os.remove(p("merges.txt"))
    elif kind == "merges-line":
        edit_merges(lambda l: l.__setitem__(2, l[2] + b" x"))
    elif kind == "merges-unknown":
        edit_merges(lambda l: l.__setitem__(5, "zzq\u00e9\u00e9 \u00e9zzq".encode()))
    elif kind == "merges-utf8":
        edit_merges(lambda l: l.__setitem__(4, b"\xff\xfe x"))
    elif kind == "vocab-list":
        edit_json("vocab.json", lambda j: sorted(j))
    elif kind == "vocab-dup-id":
        edit_json("vocab.json", lambda j: j.__setitem__("<unk>", 2))
    elif kind == "eos-mismatch":
        edit_json("config.json", lambda j: j.__setitem__("eos_token_id", 5))
        edit_json("generation_config.json", lambda j: j.update({"eos_token_id": 5}, **(
            {"forced_eos_token_id": 5} if "forced_eos_token_id" in j else {})))
    elif kind == "bad-tokenizer-json":
        edit_json("tokenizer.json", lambda j: j["model"].__setitem__("type", "Unigram"))
    elif kind == "no-weights":
        os.remove(p("model.safetensors"))
    elif kind == "bad-shape":
        edit_weights(lambda w: w.__setitem__("model.encoder.layers.0.fc1.weight",
                                             w["model.encoder.layers.0.fc1.weight"][:-1]))
    elif kind == "small-vocab":
        def small(w):
            w["model.shared.weight"] = w["model.shared.weight"][:40]
            w["final_logits_bias"] = w["final_logits_bias"][:, :40]
        edit_weights(small)
        edit_json("config.json", lambda j: j.__setitem__("vocab_size", 40))
    elif kind == "tied-differ":
        edit_weights(lambda w: w.__setitem__("lm_head.weight", w["model.shared.weight"] * 2))
    elif kind == "no-positions":
        edit_weights(lambda w: w.pop("model.decoder.embed_positions.weight"))
    elif kind == "pre-ln":
        edit_json("config.json", lambda j: j.__setitem__("normalize_before", True))
    else:
        raise ValueError("unknown malformed kind %r" % kind)
    return BART_MALFORMED[kind][1]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("family", choices=("m2m_100", "nllb", "mbart", "bart"))
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-positions", type=int, default=64)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    ap.add_argument("--names", default="hub", choices=("hub", "all"))
    ap.add_argument("--vocab-size", type=int, default=0, help="at least this vocabulary (NLLB-200: 256206)")
    ap.add_argument("--tokenizer", default="hub", choices=("hub", "saved", "legacy"), help="BART's tokenizer files")
    ap.add_argument("--malformed")
    a = ap.parse_args(argv)
    if a.malformed:
        print(" ".join(make_malformed(a.out, a.family, a.malformed)))
    else:
        make_folder(a.out, a.family, a.d_model, a.layers, a.heads, a.ffn, a.seed, a.max_positions, a.dtype, a.names,
                    vocab_size=a.vocab_size, tokenizer=a.tokenizer)


if __name__ == "__main__":
    main(sys.argv[1:])
