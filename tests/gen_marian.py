#!/usr/bin/python3
"""Writes random-weight Hugging Face Marian (opus-mt) model folders, in the hub's layout.

usage: /usr/bin/python3 tests/gen_marian.py OUT_DIR [--d-model 32] [--layers 2] [--heads 4] [--ffn 64]
           [--activation swish] [--seed 1] [--max-positions 64] [--dtype f32|f16] [--pad-vocab-to N] [--bin]
           [--no-scale-embedding] [--separate-embeddings] [--names hub|save_pretrained|all]
           [--eos-bias X] [--malformed KIND]

The folder holds what a Helsinki-NLP/opus-mt-* repository holds:
  config.json              every key a real opus-mt config.json has ("model_type": "marian",
                           "architectures": ["MarianMTModel"], generation keys included);
  model.safetensors        the real tensor names (model.shared.weight, model.{encoder,decoder}.
                           embed_positions.weight, model.{encoder,decoder}.layers.{i}.self_attn.
                           {q,k,v,out}_proj.{weight,bias}, self_attn_layer_norm, fc1, fc2,
                           final_layer_norm, decoder encoder_attn + encoder_attn_layer_norm,
                           final_logits_bias (1, V)); --bin writes pytorch_model.bin (torch.save
                           of a state dict whose tied tensors share storage, as old hub files) instead;
  source.spm, target.spm   tiny unigram SentencePiece models trained here from a built-in corpus
                           (an English-like source, a German-like target);
  vocab.json               Marian's joint vocabulary: "</s>" 0, "<unk>" 1, the union of both spm's
                           pieces, "<pad>" last (= pad_token_id = decoder_start_token_id);
  generation_config.json   as opus-mt's (bad_words_ids [[pad]], forced_eos_token_id 0, num_beams 4,
                           max_length 512, renormalize_logits true);
  tokenizer_config.json, special_tokens_map.json.

--names picks which names the (tied) token embedding is stored under:
  hub              model.shared.weight + both embed_positions tables (what hub safetensors hold; default);
  save_pretrained  what transformers 5.12's save_pretrained writes: model.shared.weight only, no positions
                   (unshared: model.encoder.embed_tokens.weight + model.decoder.embed_tokens.weight);
  all              every alias (shared, encoder/decoder embed_tokens, lm_head) and the positions.
--separate-embeddings: share_encoder_decoder_embeddings false (decoder_vocab_size == vocab_size): separate
  encoder and decoder embeddings, lm_head tied to the decoder's.
--pad-vocab-to N: vocab.json (and the embedding) grows to N entries with fake pieces.
--eos-bias X: adds X to final_logits_bias[eos] (hypotheses that end early).
--malformed KIND: a broken folder (see MALFORMED); prints the keyword the CLI's error must name.

Importable: make_folder(out, **options) -> info dict; make_malformed(out, kind, **options) -> keywords.
"""
import io
import json
import math
import os
import random
import struct
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402

import marian_ref  # noqa: E402  (the reference; it imports nothing from this file)

# name -> numpy array as stored; tools/check_marian_hf.py reads the written folders through it
read_safetensors = marian_ref.read_safetensors_arrays

EOS, UNK = "</s>", "<unk>"
PAD = "<pad>"
LIN_GAIN = 2.5   # linear weights uniform(-g, g) / sqrt(fan_in): sublayers that matter next to the residual
EMB_STD = 1.0    # token embedding std after the sqrt(d_model) scaling

# KIND -> (what it breaks, keywords of which the CLI's one-line error must contain at least one)
MALFORMED = {
    "no-config": ("config.json removed", ["config.json"]),
    "no-weights": ("model.safetensors removed", ["model.safetensors", "pytorch_model.bin", "weights"]),
    "no-source-spm": ("source.spm removed", ["source.spm"]),
    "no-target-spm": ("target.spm removed", ["target.spm"]),
    "no-vocab": ("vocab.json removed", ["vocab.json"]),
    "bad-shape": ("model.encoder.layers.0.fc1.weight has a wrong shape", ["model.encoder.layers.0.fc1.weight"]),
    "missing-tensor": ("the last decoder layer lacks encoder_attn.k_proj.weight",
                       ["encoder_attn.k_proj.weight"]),
    "vocab-spm": ("a piece of source.spm is absent from vocab.json", ["vocab.json", "source.spm"]),
    "vocab-size": ("vocab.json has one entry more than config vocab_size", ["vocab"]),
    "bad-activation": ("activation_function 'softsign2'", ["activation", "softsign2"]),
    "bad-model-type": ("model_type 'bart'", ["model_type", "bart", "marian"]),
    "truncated": ("model.safetensors cut in half", ["model.safetensors", "truncated", "short"]),
}

SRC_WORDS = ("the a house cat dog runs sees big small red green blue tree river walks quickly slowly today "
             "yesterday mother father child book reads writes letter garden sun shines rain falls city "
             "street car drives old new friend eats bread water drinks").split()
TGT_WORDS = ("der die das Haus Katze Hund läuft sieht groß klein rot grün blau Baum Fluss geht schnell "
             "langsam heute gestern Mutter Vater Kind Buch liest schreibt Brief Garten Sonne scheint Regen "
             "fällt Stadt Straße Auto fährt alt neu Freund isst Brot Wasser trinkt über schön").split()


def corpus(words, seed, n=400):
    r = random.Random(seed)
    out = []
    for _ in range(n):
        s = " ".join(r.choice(words) for _ in range(r.randint(2, 10)))
        if r.random() < 0.3:
            s += " " + str(r.randint(0, 99))
        out.append(s[0].upper() + s[1:] + r.choice([".", ".", "!", "?", ",", ""]))
    return out


def sample_sentences(seed=5, n=6, target=False):
    """Sentences like those the spm models were trained on (for tokenizer tests)."""
    return corpus(TGT_WORDS if target else SRC_WORDS, seed, n)


def train_spm(sentences, vocab_size):
    import sentencepiece as spm
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=buf, vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   num_threads=1, minloglevel=2)
    return buf.getvalue()


def spm_pieces(proto):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_proto=proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i))]


def build_vocab(src_pieces, tgt_pieces, pad_to=0):
    vocab = {EOS: 0, UNK: 1}
    for p in src_pieces + tgt_pieces:
        if p not in vocab:
            vocab[p] = len(vocab)
    k = 0
    while len(vocab) + 1 < pad_to:
        vocab["▁zzfake%06d" % k] = len(vocab)
        k += 1
    vocab[PAD] = len(vocab)
    return vocab


def make_config(d_model, layers, heads, ffn, activation, vocab_size, max_positions, pad_id, scale_embedding=True,
                share=True, dec_layers=None):
    """A config.json with every key of a real Helsinki-NLP/opus-mt config.json."""
    return {
        "_name_or_path": "vkformer/random-opus-mt",
        "_num_labels": 3,
        "activation_dropout": 0.0,
        "activation_function": activation,
        "add_bias_logits": False,
        "add_final_layer_norm": False,
        "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0,
        "bad_words_ids": [[pad_id]],
        "bos_token_id": 0,
        "classif_dropout": 0.0,
        "classifier_dropout": 0.0,
        "d_model": d_model,
        "decoder_attention_heads": heads,
        "decoder_ffn_dim": ffn,
        "decoder_layerdrop": 0.0,
        "decoder_layers": layers if dec_layers is None else dec_layers,
        "decoder_start_token_id": pad_id,
        "decoder_vocab_size": vocab_size,
        "dropout": 0.1,
        "encoder_attention_heads": heads,
        "encoder_ffn_dim": ffn,
        "encoder_layerdrop": 0.0,
        "encoder_layers": layers,
        "eos_token_id": 0,
        "extra_pos_embeddings": pad_id + 1,
        "forced_eos_token_id": 0,
        "gradient_checkpointing": False,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
        "max_length": 512,
        "max_position_embeddings": max_positions,
        "model_type": "marian",
        "normalize_before": False,
        "normalize_embedding": False,
        "num_beams": 4,
        "num_hidden_layers": layers,
        "pad_token_id": pad_id,
        "scale_embedding": scale_embedding,
        "share_encoder_decoder_embeddings": share,
        "static_position_embeddings": True,
        "torch_dtype": "float32",
        "transformers_version": "4.22.0.dev0",
        "use_cache": True,
        "vocab_size": vocab_size,
    }


def generation_config(pad_id):
    return {"bad_words_ids": [[pad_id]], "bos_token_id": 0, "decoder_start_token_id": pad_id, "eos_token_id": 0,
            "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4, "pad_token_id": pad_id,
            "renormalize_logits": True, "transformers_version": "4.32.0.dev0"}


def random_weights(cfg, seed, eos_bias=0.0):
    """name -> float32 array, in state_dict order; the token embedding(s) once, under their model names."""
    rng = np.random.default_rng(seed)
    d, V = cfg["d_model"], cfg["vocab_size"]
    w = {}

    def lin(prefix, n_out, n_in):
        w[prefix + ".weight"] = (LIN_GAIN * rng.uniform(-1, 1, (n_out, n_in)) / math.sqrt(n_in)).astype(np.float32)
        w[prefix + ".bias"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)

    def ln(prefix):
        w[prefix + ".weight"] = (1.0 + 0.2 * rng.standard_normal(d)).astype(np.float32)
        w[prefix + ".bias"] = (0.1 * rng.standard_normal(d)).astype(np.float32)

    w["final_logits_bias"] = (0.3 * rng.standard_normal((1, cfg["decoder_vocab_size"]))).astype(np.float32)
    w["final_logits_bias"][0, 0] += eos_bias
    emb_std = EMB_STD / math.sqrt(d) if cfg["scale_embedding"] else EMB_STD
    emb = (emb_std * rng.standard_normal((V, d))).astype(np.float32)
    if cfg["share_encoder_decoder_embeddings"]:
        w["model.shared.weight"] = emb
    else:
        w["model.encoder.embed_tokens.weight"] = emb
    pos = marian_ref.sinusoids(cfg["max_position_embeddings"], d).numpy()
    w["model.encoder.embed_positions.weight"] = pos
    for side in ("encoder", "decoder"):
        if side == "decoder":
            if not cfg["share_encoder_decoder_embeddings"]:
                w["model.decoder.embed_tokens.weight"] = (emb_std * rng.standard_normal(
                    (cfg["decoder_vocab_size"], d))).astype(np.float32)
            w["model.decoder.embed_positions.weight"] = pos.copy()
        ffn = cfg[side + "_ffn_dim"]
        for i in range(cfg[side + "_layers"]):
            p = "model.%s.layers.%d." % (side, i)
            for a in ("self_attn",) + (("encoder_attn",) if side == "decoder" else ()):
                for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
                    lin(p + a + "." + proj, d, d)
                ln(p + a + "_layer_norm")
            lin(p + "fc1", ffn, d)
            lin(p + "fc2", d, ffn)
            ln(p + "final_layer_norm")
    return w


def to_f16(w):
    return {k: v.astype(np.float16) for k, v in w.items()}


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> numpy array (float32/float16); data in name order, 8-byte aligned header."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dt = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}[a.dtype]
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    header["__metadata__"] = metadata or {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def shard_folder(path, n):
    """Splits path/model.safetensors into n shards and model.safetensors.index.json, as save_pretrained
    writes a checkpoint past max_shard_size (tensors in name order, each shard a run of them); removes
    model.safetensors. Returns the index's weight_map."""
    w = read_safetensors(os.path.join(path, "model.safetensors"))
    names = sorted(w)
    weight_map, size = {}, 0
    for i in range(n):
        part = names[i * len(names) // n:(i + 1) * len(names) // n]
        shard = "model-%05d-of-%05d.safetensors" % (i + 1, n)
        write_safetensors(os.path.join(path, shard), {k: w[k] for k in part})
        for k in part:
            weight_map[k] = shard
            size += w[k].nbytes
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": size}, "weight_map": weight_map}, f, indent=2)
    os.remove(os.path.join(path, "model.safetensors"))
    return weight_map


def stored_names(w, cfg, names):
    """The tensors as stored: the embedding under the names of the --names layout."""
    out = dict(w)
    share = cfg["share_encoder_decoder_embeddings"]
    if names == "save_pretrained":
        del out["model.encoder.embed_positions.weight"], out["model.decoder.embed_positions.weight"]
    elif names == "all":
        if share:
            out["model.encoder.embed_tokens.weight"] = w["model.shared.weight"]
            out["model.decoder.embed_tokens.weight"] = w["model.shared.weight"]
            out["lm_head.weight"] = w["model.shared.weight"]
        else:
            out["lm_head.weight"] = w["model.decoder.embed_tokens.weight"]
    elif names != "hub":
        raise ValueError("--names: hub, save_pretrained or all")
    return out


def write_bin(path, w, cfg):
    """pytorch_model.bin as transformers 4.x saved it: every alias, tied ones sharing storage."""
    import torch
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}
    share = cfg["share_encoder_decoder_embeddings"]
    sd = {"final_logits_bias": t["final_logits_bias"]}
    enc = t["model.shared.weight"] if share else t["model.encoder.embed_tokens.weight"]
    dec = enc if share else t["model.decoder.embed_tokens.weight"]
    if share:
        sd["model.shared.weight"] = enc
    sd["model.encoder.embed_tokens.weight"] = enc
    for k in t:
        if k.startswith("model.encoder.") and k != "model.encoder.embed_tokens.weight":
            sd[k] = t[k]
    sd["model.decoder.embed_tokens.weight"] = dec
    for k in t:
        if k.startswith("model.decoder.") and k != "model.decoder.embed_tokens.weight":
            sd[k] = t[k]
    sd["lm_head.weight"] = dec
    torch.save(sd, path)


def write_bin_shards(out, w, cfg, n=2):
    """A sharded checkpoint as transformers 4.x saved one past max_shard_size: pytorch_model-0000i-of-0000n.bin
    (tied aliases once: the first name) and pytorch_model.bin.index.json."""
    import torch
    path = os.path.join(out, "pytorch_model.bin")
    write_bin(path, w, cfg)
    sd = torch.load(path, map_location="cpu")
    os.unlink(path)
    seen, names = set(), []
    for k, t in sd.items():
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            names.append(k)
    weight_map = {}
    for i in range(n):
        part = names[i * len(names) // n:(i + 1) * len(names) // n]
        shard = "pytorch_model-%05d-of-%05d.bin" % (i + 1, n)
        torch.save({k: sd[k].clone() for k in part}, os.path.join(out, shard))
        weight_map.update({k: shard for k in part})
    with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


_SPM_CACHE = {}


def build_separate_vocab(pieces):
    """A vocabulary of one side (separate_vocabs): </s> 0, <unk> 1, <pad> 2, then the pieces."""
    vocab = {EOS: 0, UNK: 1, PAD: 2}
    for p in pieces:
        vocab.setdefault(p, len(vocab))
    return vocab


def make_folder(out, d_model=32, layers=2, heads=4, ffn=64, activation="swish", seed=1, max_positions=64,
                dtype="f32", pad_vocab_to=0, binary=False, scale_embedding=True, share=True, names="hub",
                eos_bias=0.0, dec_layers=None, spm_vocab=(90, 110), separate_vocabs=False):
    """Writes the folder; returns {"config", "vocab", "pad"}. separate_vocabs: vocab.json holds the
    source's pieces and target_vocab.json the target's (MarianTokenizer separate_vocabs), the embeddings
    unshared with decoder_vocab_size = len(target_vocab.json)."""
    os.makedirs(out, exist_ok=True)
    key = (seed, spm_vocab)
    if key not in _SPM_CACHE:
        _SPM_CACHE[key] = (train_spm(corpus(SRC_WORDS, 100 + seed), spm_vocab[0]),
                           train_spm(corpus(TGT_WORDS, 200 + seed), spm_vocab[1]))
    src_spm, tgt_spm = _SPM_CACHE[key]
    tvocab = None
    if separate_vocabs:
        vocab, tvocab = build_separate_vocab(spm_pieces(src_spm)), build_separate_vocab(spm_pieces(tgt_spm))
        share = False
    else:
        vocab = build_vocab(spm_pieces(src_spm), spm_pieces(tgt_spm), pad_vocab_to)
    V, pad = len(vocab), vocab[PAD]
    cfg = make_config(d_model, layers, heads, ffn, activation, V, max_positions, pad, scale_embedding, share,
                      dec_layers)
    if tvocab:
        cfg["decoder_vocab_size"] = len(tvocab)
    if dtype == "f16":
        cfg["torch_dtype"] = "float16"
    w = random_weights(cfg, seed, eos_bias)
    if dtype == "f16":
        w = to_f16(w)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(generation_config(pad), f, indent=2)
    with open(os.path.join(out, "source.spm"), "wb") as f:
        f.write(src_spm)
    with open(os.path.join(out, "target.spm"), "wb") as f:
        f.write(tgt_spm)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, indent=2, ensure_ascii=False)
    if tvocab:
        with open(os.path.join(out, "target_vocab.json"), "w", encoding="utf-8") as f:
            json.dump(tvocab, f, indent=2, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": EOS, "model_max_length": 512, "pad_token": PAD, "separate_vocabs": bool(tvocab),
                   "source_lang": "en", "sp_model_kwargs": {}, "special_tokens_map_file": None, "target_lang": "de",
                   "tokenizer_class": "MarianTokenizer", "unk_token": UNK}, f, indent=2)
    with open(os.path.join(out, "special_tokens_map.json"), "w") as f:
        json.dump({"eos_token": EOS, "pad_token": PAD, "unk_token": UNK}, f, indent=2)
    for n in ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if os.path.exists(os.path.join(out, n)):
            os.unlink(os.path.join(out, n))
    if binary == "sharded":
        write_bin_shards(out, w, cfg)
    elif binary:
        write_bin(os.path.join(out, "pytorch_model.bin"), w, cfg)
    else:
        write_safetensors(os.path.join(out, "model.safetensors"), stored_names(w, cfg, names))
    return {"config": cfg, "vocab": vocab, "pad": pad}


def make_malformed(out, kind, **options):
    """A folder broken as KIND says; returns the keywords the CLI's error line must contain (one of)."""
    if kind not in MALFORMED:
        raise ValueError("unknown malformed kind %r (%s)" % (kind, ", ".join(MALFORMED)))
    info = make_folder(out, **options)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    removals = {"no-config": "config.json", "no-weights": "model.safetensors", "no-source-spm": "source.spm",
                "no-target-spm": "target.spm", "no-vocab": "vocab.json"}
    if kind in removals:
        os.unlink(p(removals[kind]))
    elif kind in ("bad-shape", "missing-tensor", "truncated"):
        tensors = read_safetensors(p("model.safetensors"))
        if kind == "bad-shape":
            n = "model.encoder.layers.0.fc1.weight"
            tensors[n] = np.ascontiguousarray(tensors[n][:, :-1])
        elif kind == "missing-tensor":
            del tensors["model.decoder.layers.%d.encoder_attn.k_proj.weight" % (info["config"]["decoder_layers"] - 1)]
        write_safetensors(p("model.safetensors"), tensors)
        if kind == "truncated":
            size = os.path.getsize(p("model.safetensors"))
            with open(p("model.safetensors"), "r+b") as f:
                f.truncate(size // 2)
    elif kind in ("vocab-spm", "vocab-size"):
        vocab = info["vocab"]
        if kind == "vocab-spm":  # rename a real source piece: same size, the piece is gone
            piece = [k for k in vocab if k not in (EOS, UNK, PAD)][3]
            vocab = {("▁notapiece" if k == piece else k): v for k, v in vocab.items()}
        else:
            vocab = dict(vocab)
            vocab["▁extra"] = len(vocab)
        with open(p("vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, indent=2, ensure_ascii=False)
    else:
        cfg = info["config"]
        if kind == "bad-activation":
            cfg["activation_function"] = "softsign2"
        else:
            cfg["model_type"] = "bart"
            cfg["architectures"] = ["BartForConditionalGeneration"]
        with open(p("config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
    return MALFORMED[kind][1]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--decoder-layers", type=int, default=None)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--activation", default="swish")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-positions", type=int, default=64)
    ap.add_argument("--dtype", choices=("f32", "f16"), default="f32")
    ap.add_argument("--pad-vocab-to", type=int, default=0)
    ap.add_argument("--bin", action="store_true")
    ap.add_argument("--no-scale-embedding", action="store_true")
    ap.add_argument("--separate-embeddings", action="store_true")
    ap.add_argument("--names", choices=("hub", "save_pretrained", "all"), default="hub")
    ap.add_argument("--eos-bias", type=float, default=0.0)
    ap.add_argument("--malformed", choices=sorted(MALFORMED))
    a = ap.parse_args(argv)
    opts = dict(d_model=a.d_model, layers=a.layers, dec_layers=a.decoder_layers, heads=a.heads, ffn=a.ffn,
                activation=a.activation, seed=a.seed, max_positions=a.max_positions, dtype=a.dtype,
                pad_vocab_to=a.pad_vocab_to, binary=a.bin, scale_embedding=not a.no_scale_embedding,
                share=not a.separate_embeddings, names=a.names, eos_bias=a.eos_bias)
    if a.malformed:
        print(" | ".join(make_malformed(a.out, a.malformed, **opts)))
    else:
        info = make_folder(a.out, **opts)
        print("%s: vocab %d, pad %d" % (a.out, len(info["vocab"]), info["pad"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
