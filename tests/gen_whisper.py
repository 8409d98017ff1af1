#!/usr/bin/python3
"""Writes random-weight Hugging Face Whisper folders (WhisperForConditionalGeneration), in the hub's
layout and in the one transformers 5.x save_pretrained writes.

usage: /usr/bin/python3 tests/gen_whisper.py OUT_DIR [--layout hub|save_pretrained] [--d-model 32]
           [--layers 2] [--heads 4] [--ffn 64] [--vocab 300] [--mels 80|128] [--source-positions 100]
           [--target-positions 64] [--chunk-length 2] [--seed 1] [--dtype f32|f16] [--proj-out]
           [--no-positions] [--untied] [--malformed KIND]

  hub              config.json with the keys openai/whisper-* carry (forced_decoder_ids, suppress_tokens,
                   begin_suppress_tokens, max_length, torch_dtype, ...), generation_config.json with the
                   hub's Whisper keys (lang_to_id, task_to_id, no_timestamps_token_id, alignment_heads, ...),
                   preprocessor_config.json with the stored "mel_filters" of older hub files;
  save_pretrained  config.json and generation_config.json as transformers 5.12 writes them, and
                   processor_config.json {"feature_extractor": {...}, "processor_class": "WhisperProcessor"};
  model.safetensors: model.encoder.conv1/conv2, model.encoder.embed_positions.weight (sinusoids plus
  noise, so that a reader that recomputes them is caught; --no-positions leaves it out, as HF then
  initialises it with the sinusoids), the layers (k_proj without bias), the final norms,
  model.decoder.embed_tokens/embed_positions; --proj-out adds proj_out.weight (the tied copy);
  --untied writes a separate proj_out.weight with tie_word_embeddings false.
The tokenizer files are not written (the byte-level BPE tokenizer is tested elsewhere).
chunk_length * 16000 / 160 must be 2 * source positions (the defaults: 2 s, 100 positions);
--chunk-length 30 --source-positions 1500 is the real shape.

Importable: make_folder(out, **options) -> info dict; make_malformed(out, kind) -> keywords.
"""
import json
import math
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402

import gen_marian  # noqa: E402
import marian_ref  # noqa: E402
import whisper_ref  # noqa: E402

# KIND -> (what it breaks, keywords of which the CLI's one-line error must contain at least one)
MALFORMED = {
    "no-extractor": ("preprocessor_config.json removed", ["preprocessor_config.json"]),
    "mels-mismatch": ("feature_size 128 while num_mel_bins is 80", ["feature_size", "num_mel_bins"]),
    "frames-mismatch": ("chunk_length 3 s for 100 source positions", ["max_source_positions", "frames"]),
    "conv-shape": ("conv1.weight of kernel 5", ["model.encoder.conv1.weight"]),
    "no-conv2-bias": ("conv2.bias removed", ["model.encoder.conv2.bias"]),
    "k-bias": ("a k_proj.bias, which Whisper has not", ["k_proj.bias"]),
    "positions-shape": ("encoder embed_positions of 99 rows", ["model.encoder.embed_positions.weight"]),
    "tied-differ": ("proj_out.weight differs from embed_tokens", ["proj_out.weight", "differ"]),
    "dither": ("dither 0.5 in the extractor", ["dither"]),
    "odd-d-model": ("d_model 33", ["d_model"]),
    "bad-extractor-type": ("feature_extractor_type forged with a newline", ["feature_extractor_type"]),
    "no-weights": ("model.safetensors removed", ["model.safetensors"]),
}


def random_weights(cfg, seed, positions=True):
    rng = np.random.default_rng(seed)
    d, ffn, V = cfg["d_model"], cfg["encoder_ffn_dim"], cfg["vocab_size"]
    M, S, T = cfg["num_mel_bins"], cfg["max_source_positions"], cfg["max_target_positions"]
    w = {}

    def arr(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def lin(name, n_out, n_in, bias=True):
        w[name + ".weight"] = arr((n_out, n_in), 1.0 / math.sqrt(n_in))
        if bias:
            w[name + ".bias"] = arr((n_out,), 0.1)

    def ln(name):
        w[name + ".weight"] = (1.0 + rng.standard_normal(d) * 0.1).astype(np.float32)
        w[name + ".bias"] = arr((d,), 0.1)

    w["model.encoder.conv1.weight"] = arr((d, M, 3), 1.0 / math.sqrt(3 * M))
    w["model.encoder.conv1.bias"] = arr((d,), 0.1)
    w["model.encoder.conv2.weight"] = arr((d, d, 3), 1.0 / math.sqrt(3 * d))
    w["model.encoder.conv2.bias"] = arr((d,), 0.1)
    if positions and d % 2:
        w["model.encoder.embed_positions.weight"] = arr((S, d), 0.3)   # (malformed folders: odd d_model)
    elif positions:
        w["model.encoder.embed_positions.weight"] = (whisper_ref.sinusoids(S, d).numpy() + arr((S, d), 0.05))
    w["model.decoder.embed_tokens.weight"] = arr((V, d), 0.5)
    w["model.decoder.embed_positions.weight"] = arr((T, d), 0.2)
    for side, n in (("encoder", cfg["encoder_layers"]), ("decoder", cfg["decoder_layers"])):
        for i in range(n):
            p = "model.%s.layers.%d." % (side, i)
            for a in (("self_attn", "encoder_attn") if side == "decoder" else ("self_attn",)):
                for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    lin(p + a + "." + proj, d, d, bias=proj != "k_proj")
                ln(p + a + "_layer_norm")
            lin(p + "fc1", ffn, d)
            lin(p + "fc2", d, ffn)
            ln(p + "final_layer_norm")
        ln("model.%s.layer_norm" % side)
    return w


def hub_config(d, layers, heads, ffn, V, M, S, T, timestamps=0):
    specials = V - 40   # <|endoftext|>; then <|startoftranscript|>, languages, tasks, notimestamps
    V += timestamps     # timestamp ids after <|notimestamps|> (specials + 33 on): 7 + timestamps of them
    return {
        "_name_or_path": "openai/whisper-random", "activation_dropout": 0.0, "activation_function": "gelu",
        "architectures": ["WhisperForConditionalGeneration"], "attention_dropout": 0.0,
        "begin_suppress_tokens": [5, specials], "bos_token_id": specials, "d_model": d,
        "decoder_attention_heads": heads, "decoder_ffn_dim": ffn, "decoder_layerdrop": 0.0, "decoder_layers": layers,
        "decoder_start_token_id": specials + 1, "dropout": 0.0, "encoder_attention_heads": heads,
        "encoder_ffn_dim": ffn, "encoder_layerdrop": 0.0, "encoder_layers": layers, "eos_token_id": specials,
        "forced_decoder_ids": [[1, specials + 2], [2, specials + 30], [3, specials + 32]], "init_std": 0.02,
        "is_encoder_decoder": True, "max_length": T, "max_source_positions": S, "max_target_positions": T,
        "model_type": "whisper", "num_hidden_layers": layers, "num_mel_bins": M, "pad_token_id": specials,
        "scale_embedding": False, "suppress_tokens": [1, 2, 7, 8, 9, 10, 14, 25], "torch_dtype": "float32",
        "transformers_version": "4.27.0.dev0", "use_cache": True, "vocab_size": V,
    }


def make_folder(out, layout="hub", d_model=32, layers=2, heads=4, ffn=64, vocab=300, mels=80, source_positions=100,
                target_positions=64, chunk_length=2, seed=1, dtype="f32", proj_out=False, positions=True,
                untied=False, timestamps=0, timestamp_bias=0.0):
    """timestamps > 0: that many more ids after the specials, so that <|0.00|> .. (no_timestamps_token_id + 1 on)
    cover a window (chunk_length / 0.02 + 1 of them need chunk_length * 50 - 6), and the save_pretrained form also
    gets the hub's Whisper keys of generation_config.json (lang_to_id, task_to_id, no_timestamps_token_id, as
    transformers saves a hub model); timestamp_bias scales the timestamp rows of the (tied) token embedding, so
    that a random model emits timestamps often and both segment endings (a lone timestamp, a pair) occur."""
    os.makedirs(out, exist_ok=True)
    cfg = hub_config(d_model, layers, heads, ffn, vocab, mels, source_positions, target_positions, timestamps)
    specials = cfg["eos_token_id"]
    if untied:
        cfg["tie_word_embeddings"] = False
    if layout == "save_pretrained":
        for k in ("_name_or_path", "forced_decoder_ids", "max_length", "num_hidden_layers", "torch_dtype"):
            cfg.pop(k)
        cfg.update({"apply_spec_augment": False, "classifier_proj_size": 256, "dtype": "float32",
                    "mask_feature_length": 10, "mask_feature_min_masks": 0, "mask_feature_prob": 0.0,
                    "mask_time_length": 10, "mask_time_min_masks": 2, "mask_time_prob": 0.05,
                    "median_filter_width": 7, "suppress_tokens": None, "tie_word_embeddings": not untied,
                    "transformers_version": "5.12.1", "use_weighted_layer_sum": False})
        gen = {"_from_model_config": True, "begin_suppress_tokens": cfg["begin_suppress_tokens"],
               "bos_token_id": specials, "decoder_start_token_id": specials + 1, "eos_token_id": specials,
               "output_attentions": False, "output_hidden_states": False, "pad_token_id": specials,
               "transformers_version": "5.12.1", "use_cache": True}
        if timestamps:
            # as transformers saves a model loaded from the hub: its own generation config, not the model config's
            # (generate() would rebuild one from config.json where _from_model_config is true, without these keys)
            gen.update({"_from_model_config": False, "is_multilingual": True, "lang_to_id": {"<|en|>": specials + 2, "<|de|>": specials + 3,
                                                                "<|fr|>": specials + 4},
                        "max_initial_timestamp_index": 25, "no_timestamps_token_id": specials + 32,
                        "task_to_id": {"transcribe": specials + 30, "translate": specials + 31},
                        "suppress_tokens": [1, 2, 7, 8, 9, 10, 14, 25], "max_length": target_positions})
    else:
        gen = {"alignment_heads": [[1, 0], [1, 1]], "begin_suppress_tokens": cfg["begin_suppress_tokens"],
               "bos_token_id": specials, "decoder_start_token_id": specials + 1, "eos_token_id": specials,
               "forced_decoder_ids": [[1, None], [2, specials + 30]], "is_multilingual": True,
               "lang_to_id": {"<|en|>": specials + 2, "<|de|>": specials + 3}, "max_initial_timestamp_index": 50,
               "max_length": target_positions, "no_timestamps_token_id": specials + 32, "pad_token_id": specials,
               "prev_sot_token_id": specials + 33, "return_timestamps": False,
               "suppress_tokens": cfg["suppress_tokens"],
               "task_to_id": {"transcribe": specials + 30, "translate": specials + 31},
               "transformers_version": "4.31.0.dev0"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    fe = {"chunk_length": chunk_length, "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": mels,
          "hop_length": 160, "n_fft": 400, "n_samples": chunk_length * 16000, "nb_max_frames": chunk_length * 100,
          "padding_side": "right", "padding_value": 0.0, "return_attention_mask": False, "sampling_rate": 16000}
    if layout == "save_pretrained":
        fe["dither"] = 0.0
        with open(os.path.join(out, "processor_config.json"), "w") as f:
            json.dump({"feature_extractor": fe, "processor_class": "WhisperProcessor"}, f, indent=2)
    else:
        fe["processor_class"] = "WhisperProcessor"
        fe["mel_filters"] = whisper_ref.mel_filters(400, mels, 16000).tolist()
        with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
            json.dump(fe, f)
    w = random_weights(cfg, seed, positions)
    if timestamp_bias:
        e = w["model.decoder.embed_tokens.weight"]
        e[specials + 33:] *= timestamp_bias
    if untied:
        w["proj_out.weight"] = np.random.default_rng(seed + 7).standard_normal((cfg["vocab_size"], d_model)).astype(
            np.float32) * 0.5
    elif proj_out:
        w["proj_out.weight"] = w["model.decoder.embed_tokens.weight"].copy()
    if dtype == "f16":
        w = gen_marian.to_f16(w)
    gen_marian.write_safetensors(os.path.join(out, "model.safetensors"), w)
    return {"path": out, "vocab": cfg["vocab_size"], "specials": specials, "mels": mels, "frames": 2 * source_positions,
            "timestamp_begin": specials + 33 if timestamps else None}


def make_malformed(out, kind):
    """A clean small hub folder with one thing broken; returns the keywords its error must name."""
    make_folder(out, layout="hub", d_model=33 if kind == "odd-d-model" else 32, heads=3 if kind == "odd-d-model" else 4)

    def edit_json(name, fn):
        p = os.path.join(out, name)
        with open(p) as f:
            j = json.load(f)
        fn(j)
        with open(p, "w") as f:
            json.dump(j, f)

    def edit_weights(fn):
        p = os.path.join(out, "model.safetensors")
        w = marian_ref.read_safetensors_arrays(p)
        fn(w)
        gen_marian.write_safetensors(p, w)

    if kind == "no-extractor":
        os.remove(os.path.join(out, "preprocessor_config.json"))
    elif kind == "mels-mismatch":
        edit_json("preprocessor_config.json", lambda j: j.update(feature_size=128))
    elif kind == "frames-mismatch":
        edit_json("preprocessor_config.json", lambda j: j.update(chunk_length=3))
    elif kind == "conv-shape":
        edit_weights(lambda w: w.update({"model.encoder.conv1.weight": np.zeros((32, 80, 5), np.float32)}))
    elif kind == "no-conv2-bias":
        edit_weights(lambda w: w.pop("model.encoder.conv2.bias"))
    elif kind == "k-bias":
        edit_weights(lambda w: w.update({"model.encoder.layers.0.self_attn.k_proj.bias": np.zeros(32, np.float32)}))
    elif kind == "positions-shape":
        edit_weights(lambda w: w.update({"model.encoder.embed_positions.weight": np.zeros((99, 32), np.float32)}))
    elif kind == "tied-differ":
        edit_weights(lambda w: w.update({"proj_out.weight": w["model.decoder.embed_tokens.weight"] + 1.0}))
    elif kind == "dither":
        edit_json("preprocessor_config.json", lambda j: j.update(dither=0.5))
    elif kind == "odd-d-model":
        pass
    elif kind == "bad-extractor-type":
        edit_json("preprocessor_config.json", lambda j: j.update(feature_extractor_type="Evil\nvkformer: OK"))
    elif kind == "no-weights":
        os.remove(os.path.join(out, "model.safetensors"))
    else:
        raise ValueError("unknown kind %r" % kind)
    return MALFORMED[kind][1]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layout", default="hub", choices=("hub", "save_pretrained"))
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=300)
    ap.add_argument("--mels", type=int, default=80)
    ap.add_argument("--source-positions", type=int, default=100)
    ap.add_argument("--target-positions", type=int, default=64)
    ap.add_argument("--chunk-length", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    ap.add_argument("--proj-out", action="store_true")
    ap.add_argument("--no-positions", action="store_true")
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--timestamps", type=int, default=0)
    ap.add_argument("--timestamp-bias", type=float, default=0.0)
    ap.add_argument("--malformed", choices=sorted(MALFORMED))
    a = ap.parse_args(argv)
    if a.malformed:
        print(json.dumps(make_malformed(a.out, a.malformed)))
        return 0
    info = make_folder(a.out, layout=a.layout, d_model=a.d_model, layers=a.layers, heads=a.heads, ffn=a.ffn,
                       vocab=a.vocab, mels=a.mels, source_positions=a.source_positions,
                       target_positions=a.target_positions, chunk_length=a.chunk_length, seed=a.seed, dtype=a.dtype,
                       proj_out=a.proj_out, positions=not a.no_positions, untied=a.untied, timestamps=a.timestamps,
                       timestamp_bias=a.timestamp_bias)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
