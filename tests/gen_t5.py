#!/usr/bin/python3
"""Writes random-weight Hugging Face T5, Flan-T5, mT5 and LongT5 folders, in the hub's form or in the form
transformers 5.x save_pretrained writes.

usage: /usr/bin/python3 tests/gen_t5.py OUT_DIR KIND [--form hub|saved] [--d-model 32] [--layers 2]
           [--decoder-layers N] [--heads 4] [--d-kv 8] [--ffn 48] [--seed 1] [--dtype f32|f16] [--names hub|all]
           [--radius 3] [--global-block 4] [--vocab-size N] [--overflow] [--malformed KIND]
KIND: t5 (v1.0: ReLU, tied and scaled output), flan (t5 with gated-gelu and its own lm_head), mt5 (gated-gelu,
own lm_head), longt5-local, longt5-tglobal (gated-gelu, local_radius, global_block_size).

The tokenizer is the T5-like SentencePiece model of tests/data/t5/tokenizer.json.xz (tools/make_t5_cases.py
made it and recorded transformers 5.12's ids of it), with 20 extra ids; vocab_size leaves 8 rows past them.
  hub    config.json as the hub's checkpoints have it (t5: no feed_forward_proj, no tie_word_embeddings; flan and
         mt5: feed_forward_proj gated-gelu, tie_word_embeddings false; n_positions, decoder_start_token_id 0),
         generation_config.json {decoder_start_token_id 0, eos 1, pad 0}, model.safetensors with shared.weight,
         lm_head.weight where untied, the layers, and with --names all the tied aliases
         (encoder/decoder.embed_tokens, lm_head) as older files hold them; spiece.model and
         tokenizer_config.json (extra_ids, additional_special_tokens).
  saved  what transformers 5.12 save_pretrained writes: config.json with tie_word_embeddings true (t5 also
         scale_decoder_outputs), dense_act_fn, is_gated_act, dtype, no decoder_start_token_id (t5, longt5);
         generation_config.json from the model config; model.safetensors with shared.weight and lm_head.weight
         where it differs; tokenizer.json (as 5.12 saves it) + tokenizer_config.json, no spiece.model.
--overflow scales the FFNs' wo so that the residual stream passes fp16's 65504 (the case transformers clamps).
Importable: make_folder(out, kind, **options) -> info; make_malformed(out, kind) -> keywords.
"""
import base64
import json
import lzma
import math
import os
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402

import gen_marian  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ("t5", "flan", "mt5", "longt5-local", "longt5-tglobal")
_CASES = None

# KIND -> (what it breaks, keywords of which the CLI's one-line error must contain at least one)
MALFORMED = {
    "no-rel-bias": ("the encoder's relative_attention_bias removed", ["relative_attention_bias"]),
    "bad-ffn-proj": ("feed_forward_proj gated-gelu-x", ["feed_forward_proj"]),
    "bad-activation": ("feed_forward_proj gated-tanh", ["feed_forward_proj"]),
    "wi1-shape": ("decoder block 1's wi_1 has a wrong shape", ["decoder.block.1.layer.2.DenseReluDense.wi_1.weight"]),
    "missing-wo": ("encoder block 0's wo removed", ["encoder.block.0.layer.1.DenseReluDense.wo.weight"]),
    "no-lm-head-untied": ("longt5 with tie_word_embeddings false and no lm_head", ["lm_head.weight"]),
    "bpe-tokenizer": ("tokenizer.json with a BPE model", ["Unigram"]),
    "eos-mismatch": ("eos_token_id 3 while the tokenizer's </s> is 1", ["eos_token_id", "</s>"]),
    "bad-buckets": ("relative_attention_num_buckets 1", ["relative_attention_num_buckets"]),
    "bad-attention-type": ("encoder_attention_type global", ["encoder_attention_type"]),
    "tglobal-no-global-norm": ("a transient-global layer's global_input_layer_norm removed",
                               ["global_input_layer_norm"]),
    "unexpected": ("an extra tensor", ["unexpected", "encoder.block.9.layer.0.SelfAttention.q.weight"]),
    "vocab-small": ("vocab_size below the tokenizer's ids", ["vocab_size"]),
}


def cases():
    """tests/data/t5/tokenizer.json.xz (tools/make_t5_cases.py)."""
    global _CASES
    if _CASES is None:
        with open(os.path.join(HERE, "data", "t5", "tokenizer.json.xz"), "rb") as f:
            _CASES = json.loads(lzma.decompress(f.read()))
    return _CASES


def spm_model():
    return base64.b64decode(cases()["spm"])


def n_spm():
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_proto=spm_model()).get_piece_size()


def make_config(kind, form, d_model, layers, dec_layers, heads, d_kv, ffn, vocab, radius, gblock):
    t5 = kind in ("t5", "flan")
    gated = kind != "t5"
    model_type = "t5" if t5 else "mt5" if kind == "mt5" else "longt5"
    untied = kind in ("flan", "mt5", "longt5-tglobal")
    arch = {"t5": "T5ForConditionalGeneration", "mt5": "MT5ForConditionalGeneration",
            "longt5": "LongT5ForConditionalGeneration"}[model_type]
    cfg = {"architectures": [arch], "d_ff": ffn, "d_kv": d_kv, "d_model": d_model, "dropout_rate": 0.1,
           "eos_token_id": 1, "initializer_factor": 1.0, "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06,
           "model_type": model_type, "num_heads": heads, "num_layers": layers, "pad_token_id": 0,
           "relative_attention_num_buckets": 32, "vocab_size": vocab}
    if dec_layers != layers:
        cfg["num_decoder_layers"] = dec_layers
    if form == "hub":
        cfg.update({"decoder_start_token_id": 0, "n_positions": 512, "output_past": True,
                    "transformers_version": "4.23.1", "torch_dtype": "float32"})
        if gated:
            cfg.update({"feed_forward_proj": "gated-gelu", "relative_attention_max_distance": 128})
        if untied:
            cfg["tie_word_embeddings"] = False
        if model_type == "mt5":
            cfg["tokenizer_class"] = "T5Tokenizer"
    else:
        cfg.update({"classifier_dropout": 0.0, "dense_act_fn": "gelu_new" if gated else "relu", "dtype": "float32",
                    "feed_forward_proj": "gated-gelu" if gated else "relu", "is_decoder": False,
                    "is_gated_act": gated, "relative_attention_max_distance": 128, "tie_word_embeddings": True,
                    "transformers_version": "5.12.1", "use_cache": True})
        if model_type == "t5":
            cfg["scale_decoder_outputs"] = not untied
        if model_type == "mt5":
            cfg.update({"decoder_start_token_id": 0, "bos_token_id": None})
        if model_type == "longt5":
            cfg.update({"bos_token_id": None, "tie_word_embeddings": not untied})
    if model_type == "longt5":
        cfg.update({"encoder_attention_type": "local" if kind == "longt5-local" else "transient-global",
                    "local_radius": radius, "global_block_size": gblock})
    return cfg


def random_weights(cfg, kind, seed, overflow=False):
    """T5's initialisation (its _init_weights), with larger relative biases so that they move the scores."""
    rng = np.random.default_rng(seed)
    d, dkv, H, f, V = cfg["d_model"], cfg["d_kv"], cfg["num_heads"], cfg["d_ff"], cfg["vocab_size"]
    inner = H * dkv
    gated = kind != "t5"
    w = {}

    def normal(name, shape, std):
        w[name] = (std * rng.standard_normal(shape)).astype(np.float32)

    normal("shared.weight", (V, d), 1.0)
    if kind in ("flan", "mt5", "longt5-tglobal"):
        normal("lm_head.weight", (V, d), 0.5)
    tglobal = kind == "longt5-tglobal"
    enc_attn = {"longt5-local": "LocalSelfAttention", "longt5-tglobal": "TransientGlobalSelfAttention"}.get(
        kind, "SelfAttention")
    for side in ("encoder", "decoder"):
        n = cfg["num_layers"] if side == "encoder" else cfg.get("num_decoder_layers", cfg["num_layers"])
        for i in range(n):
            p = "%s.block.%d.layer." % (side, i)
            attns = [("0.", enc_attn if side == "encoder" else "SelfAttention")]
            if side == "decoder":
                attns.append(("1.", "EncDecAttention"))
            for sub, a in attns:
                q = p + sub + a + "."
                normal(q + "q.weight", (inner, d), (d * dkv) ** -0.5 * 2.0)
                normal(q + "k.weight", (inner, d), d ** -0.5)
                normal(q + "v.weight", (inner, d), d ** -0.5)
                normal(q + "o.weight", (d, inner), inner ** -0.5)
                if i == 0 and a != "EncDecAttention":
                    normal(q + "relative_attention_bias.weight", (32, H), 1.0)
                if tglobal and a == enc_attn and side == "encoder":
                    if i == 0:
                        normal(q + "global_relative_attention_bias.weight", (32, H), 1.0)
                    w[q + "global_input_layer_norm.weight"] = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
                w[p + sub + "layer_norm.weight"] = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
            ff = p + ("2." if side == "decoder" else "1.")
            for wi in (("wi_0", "wi_1") if gated else ("wi",)):
                normal(ff + "DenseReluDense." + wi + ".weight", (f, d), d ** -0.5 * 1.5)
            normal(ff + "DenseReluDense.wo.weight", (d, f), f ** -0.5 * (3.0e4 if overflow else 1.0))
            w[ff + "layer_norm.weight"] = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
        w[side + ".final_layer_norm.weight"] = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
    return w


def make_folder(out, kind, form="hub", d_model=32, layers=2, dec_layers=None, heads=4, d_kv=8, ffn=48, seed=1,
                dtype="f32", names="hub", radius=3, gblock=4, vocab_size=0, overflow=False):
    if kind not in KINDS:
        raise ValueError("unknown kind %r" % kind)
    os.makedirs(out, exist_ok=True)
    c = cases()
    extra = c["extra_ids"]
    V = max(n_spm() + extra + 8, vocab_size)
    cfg = make_config(kind, form, d_model, layers, dec_layers or layers, heads, d_kv, ffn, V, radius, gblock)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if form == "hub":
        gen = {"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0, "transformers_version": "4.27.0"}
    else:
        gen = {"_from_model_config": True, "eos_token_id": 1, "output_attentions": False,
               "output_hidden_states": False, "pad_token_id": 0, "transformers_version": "5.12.1", "use_cache": True}
        if cfg["model_type"] == "mt5":
            gen["decoder_start_token_id"] = 0
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    extras = ["<extra_id_%d>" % i for i in range(extra)]
    if form == "hub":
        with open(os.path.join(out, "spiece.model"), "wb") as f:
            f.write(spm_model())
        tc = {"additional_special_tokens": extras, "eos_token": "</s>", "extra_ids": extra, "model_max_length": 512,
              "pad_token": "<pad>", "tokenizer_class": "T5Tokenizer", "unk_token": "<unk>"}
    else:
        with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(c["saved"])
        tc = {"backend": "tokenizers", "eos_token": "</s>", "extra_ids": extra,
              "extra_special_tokens": ["<pad>", "</s>"] + extras,
              "model_max_length": 1000000000000000019884624838656, "pad_token": "<pad>",
              "tokenizer_class": "T5Tokenizer", "unk_id": 2, "unk_token": "<unk>"}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
    w = random_weights(cfg, kind, seed, overflow)
    if names == "all" or (kind == "longt5-tglobal" and cfg.get("tie_word_embeddings") is False):
        # (LongT5 untied: transformers ties nothing, so its files carry every table)
        for alias in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"):
            w[alias] = w["shared.weight"]
        w.setdefault("lm_head.weight", w["shared.weight"])
    if dtype == "f16":
        w = gen_marian.to_f16(w)
    gen_marian.write_safetensors(os.path.join(out, "model.safetensors"), w)
    return {"vocab_size": V, "config": cfg}


def make_malformed(out, kind):
    base = {"no-lm-head-untied": "longt5-tglobal", "bad-attention-type": "longt5-local",
            "tglobal-no-global-norm": "longt5-tglobal"}.get(kind, "flan")
    make_folder(out, base, form="saved" if kind == "bpe-tokenizer" else "hub")
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

    if kind == "no-rel-bias":
        edit_weights(lambda w: w.pop("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"))
    elif kind == "bad-ffn-proj":
        edit_json("config.json", lambda j: j.__setitem__("feed_forward_proj", "gated-gelu-x"))
    elif kind == "bad-activation":
        edit_json("config.json", lambda j: j.__setitem__("feed_forward_proj", "gated-tanh"))
    elif kind == "wi1-shape":
        n = "decoder.block.1.layer.2.DenseReluDense.wi_1.weight"
        edit_weights(lambda w: w.__setitem__(n, w[n][:-1]))
    elif kind == "missing-wo":
        edit_weights(lambda w: w.pop("encoder.block.0.layer.1.DenseReluDense.wo.weight"))
    elif kind == "no-lm-head-untied":
        edit_weights(lambda w: w.pop("lm_head.weight"))
    elif kind == "bpe-tokenizer":
        edit_json("tokenizer.json", lambda j: j.__setitem__("model", {"type": "BPE", "vocab": {"a": 0}, "merges": []}))
    elif kind == "eos-mismatch":
        edit_json("config.json", lambda j: j.__setitem__("eos_token_id", 3))
        edit_json("generation_config.json", lambda j: j.__setitem__("eos_token_id", 3))
    elif kind == "bad-buckets":
        edit_json("config.json", lambda j: j.__setitem__("relative_attention_num_buckets", 1))
    elif kind == "bad-attention-type":
        edit_json("config.json", lambda j: j.__setitem__("encoder_attention_type", "global"))
    elif kind == "tglobal-no-global-norm":
        edit_weights(lambda w: w.pop("encoder.block.1.layer.0.TransientGlobalSelfAttention.global_input_layer_norm.weight"))
    elif kind == "unexpected":
        edit_weights(lambda w: w.__setitem__("encoder.block.9.layer.0.SelfAttention.q.weight", np.zeros((2, 2), np.float32)))
    elif kind == "vocab-small":
        def small(w):
            w["shared.weight"] = w["shared.weight"][:100]
            w["lm_head.weight"] = w["lm_head.weight"][:100]
        edit_weights(small)
        edit_json("config.json", lambda j: j.__setitem__("vocab_size", 100))
    else:
        raise ValueError("unknown malformed kind %r" % kind)
    return MALFORMED[kind][1]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("kind", choices=KINDS)
    ap.add_argument("--form", default="hub", choices=("hub", "saved"))
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--decoder-layers", type=int, default=0)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-kv", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=48)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    ap.add_argument("--names", default="hub", choices=("hub", "all"))
    ap.add_argument("--radius", type=int, default=3)
    ap.add_argument("--global-block", type=int, default=4)
    ap.add_argument("--vocab-size", type=int, default=0)
    ap.add_argument("--overflow", action="store_true")
    ap.add_argument("--malformed")
    a = ap.parse_args(argv)
    if a.malformed:
        print(" ".join(make_malformed(a.out, a.malformed)))
    else:
        make_folder(a.out, a.kind, a.form, a.d_model, a.layers, a.decoder_layers or None, a.heads, a.d_kv, a.ffn,
                    a.seed, a.dtype, a.names, a.radius, a.global_block, a.vocab_size, a.overflow)


if __name__ == "__main__":
    main(sys.argv[1:])
