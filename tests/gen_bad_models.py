#!/usr/bin/python3
"""Writes a tiny valid vkformer model and broken variants of it into a directory,
with expect.txt: one line per file, "NAME ok" or "NAME error SUBSTRING", where
SUBSTRING must appear in vkformer's one-line error (it names the tensor or key).
Standard library only (no PyTorch), so it runs anywhere the build runs."""
import json
import os
import random
import struct
import sys

D, H, FF, V, L = 8, 2, 12, 11, 1
CONFIG = {"d_model": D, "n_heads": H, "n_encoder_layers": L, "n_decoder_layers": L, "d_ff": FF,
          "activation": "relu", "norm_first": False, "layer_norm_eps": 1e-5, "src_vocab_size": V,
          "tgt_vocab_size": V, "max_len": 16, "embed_scale": 1.0, "pad_id": 0, "bos_id": 1, "eos_id": 2}


def tensors():
    """(name, shape) of every tensor of the module, in state_dict order."""
    out = [("src_embed.weight", [V, D]), ("tgt_embed.weight", [V, D])]
    def attn(p):
        return [(p + "in_proj_weight", [3 * D, D]), (p + "in_proj_bias", [3 * D]),
                (p + "out_proj.weight", [D, D]), (p + "out_proj.bias", [D])]
    def ffn(p):
        return [(p + "linear1.weight", [FF, D]), (p + "linear1.bias", [FF]),
                (p + "linear2.weight", [D, FF]), (p + "linear2.bias", [D])]
    def norms(p, n):
        return [(f"{p}norm{i}.{w}", [D]) for i in range(1, n + 1) for w in ("weight", "bias")]
    for i in range(L):
        p = f"transformer.encoder.layers.{i}."
        out += attn(p + "self_attn.") + ffn(p) + norms(p, 2)
    out += [("transformer.encoder.norm.weight", [D]), ("transformer.encoder.norm.bias", [D])]
    for i in range(L):
        p = f"transformer.decoder.layers.{i}."
        out += attn(p + "self_attn.") + attn(p + "multihead_attn.") + ffn(p) + norms(p, 3)
    out += [("transformer.decoder.norm.weight", [D]), ("transformer.decoder.norm.bias", [D]),
            ("generator.weight", [V, D]), ("generator.bias", [V])]
    return out


def write(path, entries, config, dtype_of=lambda name: "F32"):
    """entries: [(name, shape)]; config: dict or raw string (or None: no key)."""
    rng = random.Random(7)
    header, blobs, offset = {}, [], 0
    for name, shape in entries:
        n = 1
        for s in shape:
            n *= s
        dtype = dtype_of(name)
        raw = struct.pack(f"<{n}f", *[rng.uniform(-0.5, 0.5) for _ in range(n)]) if dtype == "F32" else \
            struct.pack(f"<{n}i", *[1] * n)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if config is not None:
        header["__metadata__"] = {"vkformer.config": config if isinstance(config, str) else json.dumps(config)}
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    good = tensors()
    expect = []

    def case(name, expectation, entries=good, config=CONFIG, **kw):
        write(os.path.join(out, name + ".safetensors"), entries, config, **kw)
        expect.append(f"{name} {expectation}")

    def cfg(**changes):
        c = dict(CONFIG)
        for k, v in changes.items():
            if v is None:
                del c[k]
            else:
                c[k] = v
        return c

    case("good", "ok")
    case("missing_tensor", "error transformer.decoder.layers.0.norm3.bias",
         entries=[e for e in good if e[0] != "transformer.decoder.layers.0.norm3.bias"])
    case("wrong_shape", "error transformer.encoder.layers.0.linear1.weight",
         entries=[(n, [FF, D + 1] if n == "transformer.encoder.layers.0.linear1.weight" else s) for n, s in good])
    case("wrong_rank", "error generator.bias",
         entries=[(n, [1, V] if n == "generator.bias" else s) for n, s in good])
    case("wrong_dtype", "error src_embed.weight", dtype_of=lambda n: "I32" if n == "src_embed.weight" else "F32")
    case("extra_tensor", "error transformer.encoder.layers.1.norm1.weight",
         entries=good + [("transformer.encoder.layers.1.norm1.weight", [D])])
    case("no_config", "error vkformer.config", config=None)
    case("config_not_json", "error vkformer.config", config="{d_model: 8")
    case("config_not_object", "error vkformer.config", config="[1, 2]")
    case("missing_key", "error max_len", config=cfg(max_len=None))
    case("heads_not_dividing", "error n_heads", config=cfg(n_heads=3))
    case("zero_heads", "error n_heads", config=cfg(n_heads=0))
    case("negative_layers", "error n_encoder_layers", config=cfg(n_encoder_layers=-1))
    case("huge_d_model", "error d_model", config=cfg(d_model=2 ** 31))
    case("float_d_ff", "error d_ff", config=cfg(d_ff=12.5))
    case("bad_activation", "error activation", config=cfg(activation="tanh"))
    case("bad_norm_first", "error norm_first", config=cfg(norm_first="yes"))
    case("zero_eps", "error layer_norm_eps", config=cfg(layer_norm_eps=0))
    case("eos_out_of_vocab", "error eos_id", config=cfg(eos_id=V))
    case("vocab_wrong_length", "error src_vocab", config=cfg(src_vocab=["a", "b"], tgt_vocab=["x"] * V))
    case("vocab_not_strings", "error tgt_vocab", config=cfg(src_vocab=["w"] * V, tgt_vocab=[1] * V))
    # Optional lowrank projections: (K, max_len), any K >= 1.
    case("lowrank_projection", "ok", entries=good + [("lowrank.self_proj", [4, 16]), ("lowrank.cross_proj", [16, 16])])
    case("lowrank_wrong_columns", "error lowrank.self_proj", entries=good + [("lowrank.self_proj", [4, 15])])
    case("lowrank_rank_1", "error lowrank.cross_proj", entries=good + [("lowrank.cross_proj", [16])])
    case("lowrank_int", "error lowrank.self_proj", entries=good + [("lowrank.self_proj", [2, 16])],
         dtype_of=lambda n: "I32" if n.startswith("lowrank") else "F32")
    # The config and the tensors disagree: two encoder layers declared, one present.
    case("layers_mismatch", "error transformer.encoder.layers.1", config=cfg(n_encoder_layers=2))
    with open(os.path.join(out, "expect.txt"), "w") as f:
        f.write("\n".join(expect) + "\n")


if __name__ == "__main__":
    main()
