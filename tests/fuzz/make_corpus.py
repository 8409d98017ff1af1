#!/usr/bin/python3
"""Writes the seed corpus of tests/fuzz/fuzz_model.c into a directory.

Usage: make_corpus.py DIR [--max-len BYTES]

Seeds, each at most --max-len bytes (default 65536, the fuzzer's -max_len):
  model_*   small valid model files: post-LN and pre-LN, relu and gelu, F32, F16,
            BF16 and mixed dtypes, with and without vocabulary lists, several
            layer counts, the data section in writer order or shuffled with gaps
            and unaligned offsets, header padding or none;
  broken_*  each valid model broken one way: truncated, a header length past the
            end, a wrong dtype / shape / offset, overlapping tensors, a config
            that is not JSON or is missing a key, a tensor missing or extra;
  bad_*     the broken models of tests/gen_bad_models.py (one per loader check);
  st_*      the container test files of tests/gen_safetensors.py (one per
            parser check, plus good files of every dtype).
Standard library only. Files already in DIR are replaced; others are left.
"""
import contextlib
import importlib.util
import io
import json
import os
import random
import struct
import sys
import tempfile

sys.dont_write_bytecode = True  # the generators are imported; write no __pycache__ into tests/
TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def tensor_list(d, ff, vs, vt, le, ld):
    """(name, shape) of every tensor of the model, in state_dict order (docs/file-format.md)."""
    out = [("src_embed.weight", [vs, d]), ("tgt_embed.weight", [vt, d])]

    def attn(p):
        return [(p + "in_proj_weight", [3 * d, d]), (p + "in_proj_bias", [3 * d]),
                (p + "out_proj.weight", [d, d]), (p + "out_proj.bias", [d])]

    def ffn(p):
        return [(p + "linear1.weight", [ff, d]), (p + "linear1.bias", [ff]),
                (p + "linear2.weight", [d, ff]), (p + "linear2.bias", [d])]

    def norms(p, n):
        return [(f"{p}norm{i}.{w}", [d]) for i in range(1, n + 1) for w in ("weight", "bias")]

    for i in range(le):
        p = f"transformer.encoder.layers.{i}."
        out += attn(p + "self_attn.") + ffn(p) + norms(p, 2)
    out += [("transformer.encoder.norm.weight", [d]), ("transformer.encoder.norm.bias", [d])]
    for i in range(ld):
        p = f"transformer.decoder.layers.{i}."
        out += attn(p + "self_attn.") + attn(p + "multihead_attn.") + ffn(p) + norms(p, 3)
    out += [("transformer.decoder.norm.weight", [d]), ("transformer.decoder.norm.bias", [d]),
            ("generator.weight", [vt, d]), ("generator.bias", [vt])]
    return out


# F16 / BF16 bit patterns worth converting: zeros, subnormals, the largest
# values, infinities and NaNs with payloads.
F16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01,
               0xfe01, 0x3555]
BF16_SPECIAL = [0x0000, 0x8000, 0x0001, 0x007f, 0x0080, 0x3f80, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81]


def encode(dtype, n, rng, special):
    if dtype == "F32":
        return struct.pack(f"<{n}f", *[rng.uniform(-0.5, 0.5) for _ in range(n)])
    if dtype == "F16":
        vals = [struct.unpack("<H", struct.pack("<e", rng.uniform(-0.5, 0.5)))[0] for _ in range(n)]
        pool = F16_SPECIAL
    elif dtype == "BF16":
        vals = [struct.unpack("<I", struct.pack("<f", rng.uniform(-0.5, 0.5)))[0] >> 16 for _ in range(n)]
        pool = BF16_SPECIAL
    else:  # any other dtype: only its size matters to the loader, which refuses it
        size = {"I32": 4, "I64": 8, "F64": 8, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}[dtype]
        return bytes(rng.randrange(256) for _ in range(n * size))
    if special:
        for i in range(min(n, len(pool))):
            vals[i] = pool[i]
    return struct.pack(f"<{n}H", *vals)


class Model:
    """A small model: config, tensors and how to lay them out in the file."""

    def __init__(self, d=8, heads=2, ff=12, vs=11, vt=11, le=1, ld=1, max_len=16, activation="relu",
                 norm_first=False, dtype="F32", vocab=False, seed=1, **extra_config):
        self.config = {"d_model": d, "n_heads": heads, "n_encoder_layers": le, "n_decoder_layers": ld,
                       "d_ff": ff, "activation": activation, "norm_first": norm_first, "layer_norm_eps": 1e-5,
                       "src_vocab_size": vs, "tgt_vocab_size": vt, "max_len": max_len, "embed_scale": d ** 0.5,
                       "pad_id": 0, "bos_id": 1, "eos_id": 2}
        if vocab:
            self.config["src_vocab"] = ["<pad>", "<bos>", "<eos>"] + [f"w{i}" for i in range(vs - 3)]
            self.config["tgt_vocab"] = ["<pad>", "<bos>", "<eos>"] + [str(i % 10) for i in range(vt - 3)]
        self.config.update(extra_config)
        self.entries = tensor_list(d, ff, vs, vt, le, ld)
        self.dtype = dtype if callable(dtype) else (lambda name, shape, _d=dtype: _d)
        self.seed = seed

    def blobs(self, special=False):
        rng = random.Random(self.seed)
        out = []
        for name, shape in self.entries:
            n = 1
            for s in shape:
                n *= s
            dt = self.dtype(name, shape)
            out.append((name, dt, shape, encode(dt, n, rng, special)))
        return out

    def write(self, path, *, config=None, shuffle=False, gaps=False, pad=True, compact=False, metadata=None,
              special=False, header_changes=None):
        """config: dict, raw string or None (no key; default: self.config); header_changes:
        a function that edits the header dict last (for broken files)."""
        rng = random.Random(self.seed + 100)
        items = self.blobs(special)
        order = list(range(len(items)))
        if shuffle:
            rng.shuffle(order)
        data = bytearray()
        header = {}
        meta = dict(metadata or {})
        cfg = self.config if config is None else config
        if cfg is not False:
            meta["vkformer.config"] = cfg if isinstance(cfg, str) else json.dumps(cfg)
        if meta:
            header["__metadata__"] = meta
        placed = {}
        for i in order:
            name, dt, shape, raw = items[i]
            if gaps:
                data += bytes(rng.randrange(4))  # gaps of 0..3 bytes: unaligned tensors
            placed[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        # The header lists tensors in state_dict order whatever the data order.
        for name, _, _, _ in items:
            header[name] = placed[name]
        if header_changes:
            header_changes(header)
        text = json.dumps(header, separators=(",", ":") if compact else None).encode()
        if pad:
            text += b" " * (-len(text) % 8)
        blob = struct.pack("<Q", len(text)) + text + bytes(data)
        with open(path, "wb") as f:
            f.write(blob)
        return blob


def load_module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(TESTS, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_generator(name, out):
    """Runs tests/NAME.py OUT (its main() reads sys.argv) quietly."""
    mod = load_module(name)
    saved = sys.argv
    sys.argv = [name, out]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mod.main()
    finally:
        sys.argv = saved


def main():
    args = sys.argv[1:]
    max_len = 65536
    if "--max-len" in args:
        i = args.index("--max-len")
        max_len = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit("usage: make_corpus.py DIR [--max-len BYTES]")
    out = args[0]
    os.makedirs(out, exist_ok=True)
    written = []

    def path(name):
        written.append(name)
        return os.path.join(out, name)

    # ---- valid models
    half_matrices = lambda name, shape: "F16" if len(shape) == 2 else "F32"  # noqa: E731
    models = {
        "post_f32": Model(),
        "post_f16": Model(dtype="F16", seed=2),
        "pre_f32": Model(d=8, heads=4, ff=6, vs=9, vt=13, le=1, ld=2, activation="gelu", norm_first=True,
                         max_len=64, seed=3),
        "pre_f16": Model(d=4, heads=2, ff=8, vs=7, vt=5, le=2, ld=1, activation="gelu", norm_first=True,
                         dtype="F16", seed=4),
        "bf16": Model(d=4, heads=1, ff=4, vs=5, vt=6, dtype="BF16", seed=5),
        "mixed": Model(d=4, heads=2, ff=4, vs=6, vt=6, dtype=half_matrices, seed=6),
        "vocab_f32": Model(vocab=True, seed=7),
        "vocab_f16": Model(d=4, heads=2, ff=4, vs=8, vt=12, vocab=True, dtype="F16", src_split="chars",
                           tgt_join="", norm_first=True, seed=8),
        "tiny": Model(d=1, heads=1, ff=1, vs=3, vt=3, max_len=1, seed=9),
        "deep": Model(d=2, heads=1, ff=2, vs=3, vt=3, le=3, ld=3, seed=10),
    }
    # optional lowrank projections (K, max_len)
    models["lowrank"] = Model(seed=11)
    models["lowrank"].entries += [("lowrank.self_proj", [4, 16]), ("lowrank.cross_proj", [3, 16])]
    valid = {}
    for name, m in models.items():
        valid[name] = m.write(path(f"model_{name}.safetensors"))
    models["post_f32"].write(path("model_post_f32_shuffled.safetensors"), shuffle=True, gaps=True, pad=False)
    models["post_f16"].write(path("model_post_f16_special.safetensors"), special=True, compact=True)
    models["bf16"].write(path("model_bf16_special.safetensors"), special=True, shuffle=True, gaps=True)
    models["pre_f16"].write(path("model_pre_f16_metadata.safetensors"),
                            metadata={"format": "pt", "note": "caf\u00e9 \"quoted\""})
    models["vocab_f32"].write(path("model_vocab_compact.safetensors"), compact=True, pad=False)

    # ---- broken models, each one way
    m = models["post_f32"]
    blob = valid["post_f32"]
    header_len = struct.unpack("<Q", blob[:8])[0]

    def raw(name, data):
        with open(path(f"broken_{name}.safetensors"), "wb") as f:
            f.write(data)

    raw("truncated_data", blob[:-5])
    raw("truncated_header", blob[:8 + header_len // 2])
    raw("length_only", blob[:8])
    raw("short", blob[:5])
    raw("empty", b"")
    raw("length_past_end", struct.pack("<Q", len(blob)) + blob[8:])
    raw("length_huge", struct.pack("<Q", 2 ** 63 + 5) + blob[8:])
    raw("length_zero", struct.pack("<Q", 0) + blob[8:])
    raw("header_nul", blob[:8] + blob[8:8 + header_len].replace(b"F32", b"F\x002", 1) + blob[8 + header_len:])
    raw("trailing_bytes", blob + b"\x00" * 13)

    def edit(name, fn, model=m, **kw):
        model.write(path(f"broken_{name}.safetensors"), header_changes=fn, **kw)

    first = "transformer.encoder.layers.0.linear1.weight"
    def set_field(tensor, field, value):
        return lambda h: h[tensor].__setitem__(field, value)
    edit("dtype_i32", set_field("src_embed.weight", "dtype", "I32"))
    edit("dtype_unknown", set_field("generator.bias", "dtype", "F128"))
    edit("dtype_number", set_field("generator.bias", "dtype", 4))
    edit("shape_rank3", set_field(first, "shape", [12, 8, 1]))
    edit("shape_negative", set_field(first, "shape", [-12, -8]))
    edit("shape_float", set_field(first, "shape", [12.0, 8]))
    edit("shape_huge", set_field(first, "shape", [2 ** 62, 2 ** 62]))
    edit("shape_rank9", set_field("generator.bias", "shape", [1] * 8 + [11]))
    edit("offsets_reversed", lambda h: h[first]["data_offsets"].reverse())
    edit("offsets_past_end", lambda h: h["generator.bias"].__setitem__(
        "data_offsets", [h["generator.bias"]["data_offsets"][0] + 10 ** 6, h["generator.bias"]["data_offsets"][1] + 10 ** 6]))
    edit("offsets_three", lambda h: h[first]["data_offsets"].append(0))
    edit("overlap", lambda h: h["generator.bias"].__setitem__("data_offsets", h["generator.weight"]["data_offsets"][:1] + [
        h["generator.weight"]["data_offsets"][0] + 44]))
    edit("entry_not_object", lambda h: h.__setitem__("generator.bias", [1, 2]))
    edit("missing_dtype", lambda h: h["generator.bias"].pop("dtype"))
    edit("metadata_not_strings", lambda h: h["__metadata__"].__setitem__("n", 1))
    edit("metadata_array", lambda h: h.__setitem__("__metadata__", ["vkformer.config"]))
    edit("tensor_missing", lambda h: h.pop("transformer.decoder.norm.bias"))
    edit("tensor_extra", lambda h: h.__setitem__("extra", {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}))
    edit("empty_tensor", lambda h: h.__setitem__("generator.bias", {"dtype": "F32", "shape": [0, 11],
                                                                    "data_offsets": [4, 4]}))
    edit("scalar", lambda h: h.__setitem__("generator.bias", {"dtype": "F32", "shape": [],
                                                              "data_offsets": h["generator.bias"]["data_offsets"][:1] + [
                                                                  h["generator.bias"]["data_offsets"][0] + 4]}))
    edit("config_not_json", None, config="{\"d_model\": 8,")
    edit("config_array", None, config="[8, 2]")
    edit("config_absent", None, config=False)
    edit("config_empty", None, config="")
    edit("config_duplicate_key", None, config=json.dumps(m.config)[:-1] + ", \"d_model\": 8}")
    for key in ("d_model", "n_heads", "max_len", "activation", "norm_first", "layer_norm_eps", "embed_scale"):
        edit(f"config_no_{key}", None, config={k: v for k, v in m.config.items() if k != key})
    bad_values = {"d_model": 0, "n_heads": 3, "n_encoder_layers": 0, "n_decoder_layers": 2000, "d_ff": 2 ** 21,
                  "src_vocab_size": 2, "tgt_vocab_size": 2 ** 25, "max_len": -1, "pad_id": 11, "bos_id": 2 ** 40,
                  "eos_id": -3, "layer_norm_eps": 1.5, "embed_scale": "1", "activation": "swish",
                  "norm_first": 1, "src_vocab": ["a"], "tgt_vocab": [1] * 11, "src_split": "bytes", "tgt_join": 0}
    for key, value in bad_values.items():
        edit(f"config_bad_{key}", None, config=dict(m.config, **{key: value}))
    edit("config_d_model_16", None, config=dict(m.config, d_model=16))
    edit("config_two_layers", None, config=dict(m.config, n_encoder_layers=2))
    edit("config_nan", None, config=json.dumps(m.config).replace("1e-05", "NaN"))
    edit("config_huge_eps", None, config=json.dumps(m.config).replace("1e-05", "1e999"))
    edit("config_deep", None, config="[" * 3000 + "]" * 3000)

    # ---- the repository's generators: one file per loader and parser check
    with tempfile.TemporaryDirectory() as tmp:
        for gen, prefix in (("gen_bad_models", "bad_"), ("gen_safetensors", "st_")):
            d = os.path.join(tmp, gen)
            run_generator(gen, d)
            for name in sorted(os.listdir(d)):
                src = os.path.join(d, name)
                if not name.endswith(".safetensors") or not os.path.isfile(src) or os.path.islink(src):
                    continue
                with open(src, "rb") as f:
                    data = f.read()
                if len(data) > max_len:
                    continue  # the fuzzer would cut it to max_len anyway
                with open(path(prefix + name), "wb") as f:
                    f.write(data)

    too_long = [n for n in written if os.path.getsize(os.path.join(out, n)) > max_len]
    if too_long:
        sys.exit("make_corpus: seeds longer than %d bytes: %s" % (max_len, ", ".join(too_long)))
    total = sum(os.path.getsize(os.path.join(out, n)) for n in written)
    print("make_corpus: %d seeds, %d bytes, in %s" % (len(written), total, out))


if __name__ == "__main__":
    main()
