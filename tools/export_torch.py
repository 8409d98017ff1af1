#!/usr/bin/python3
"""Writes a PyTorch encoder-decoder Transformer as a vkformer model file.

The model is the module described in docs/file-format.md: src_embed, tgt_embed, an
nn.Transformer (batch_first, dropout 0) and a generator Linear. The file is one
safetensors file whose tensor names are exactly that module's state_dict and whose
__metadata__ holds "vkformer.config", the hyperparameters as a JSON string.

Run with Debian's /usr/bin/python3 (python3-torch). As a script it writes a model
with random weights:

    /usr/bin/python3 tools/export_torch.py --out model.safetensors --d-model 48 \\
        --heads 6 --encoder-layers 2 --decoder-layers 2 --d-ff 100 --src-vocab 37 \\
        --tgt-vocab 37 --activation gelu --norm-first --seed 1 [--dtype f16|int8]

As a module it gives build_model(), export(), forward_logits() and greedy() so
tests and the training script use the same definitions.
"""
import argparse
import json
import math
import struct
import sys

import torch
from torch import nn

CONFIG_KEYS = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "activation",
               "norm_first", "layer_norm_eps", "src_vocab_size", "tgt_vocab_size", "max_len",
               "embed_scale", "pad_id", "bos_id", "eos_id")


class Seq2Seq(nn.Module):
    """The module whose state_dict names the tensors of a vkformer model file."""

    def __init__(self, config):
        super().__init__()
        self.config = dict(config)
        c = self.config
        self.src_embed = nn.Embedding(c["src_vocab_size"], c["d_model"])
        self.tgt_embed = nn.Embedding(c["tgt_vocab_size"], c["d_model"])
        self.transformer = nn.Transformer(
            c["d_model"], c["n_heads"], c["n_encoder_layers"], c["n_decoder_layers"], c["d_ff"],
            dropout=0.0, activation=c["activation"], layer_norm_eps=c["layer_norm_eps"],
            batch_first=True, norm_first=c["norm_first"])
        self.generator = nn.Linear(c["d_model"], c["tgt_vocab_size"])
        self.register_buffer("pe", positional_table(c["max_len"], c["d_model"]), persistent=False)

    def embed(self, embedding, ids):
        # (batch, seq) -> (batch, seq, d_model): embed(ids) * embed_scale + PE(position)
        return embedding(ids) * self.config["embed_scale"] + self.pe[: ids.shape[1]]

    def encode(self, src, src_pad=None):
        return self.transformer.encoder(self.embed(self.src_embed, src), src_key_padding_mask=src_pad)

    def decode(self, memory, tgt, src_pad=None, tgt_pad=None):
        t = tgt.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        out = self.transformer.decoder(self.embed(self.tgt_embed, tgt), memory, tgt_mask=causal,
                                       tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        return self.generator(out)

    def forward(self, src, tgt, src_pad=None, tgt_pad=None):
        # src (batch, S), tgt (batch, T) ids -> logits (batch, T, tgt_vocab_size)
        return self.decode(self.encode(src, src_pad), tgt, src_pad, tgt_pad)


def positional_table(max_len, d):
    """(max_len, d): PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...),
    computed in double and rounded once, as vkformer does."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, d, 2, dtype=torch.float64)
    freq = torch.exp(i2 * (-math.log(10000.0) / d))
    pe = torch.zeros(max_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return pe.float()


def default_config(**overrides):
    c = {"d_model": 48, "n_heads": 6, "n_encoder_layers": 2, "n_decoder_layers": 2, "d_ff": 100,
         "activation": "relu", "norm_first": False, "layer_norm_eps": 1e-5, "src_vocab_size": 37,
         "tgt_vocab_size": 37, "max_len": 128, "embed_scale": 1.0, "pad_id": 0, "bos_id": 1, "eos_id": 2}
    c.update(overrides)
    return c


def build_model(config, seed=0):
    """A Seq2Seq with random weights (seeded), in eval mode."""
    torch.manual_seed(seed)
    model = Seq2Seq(config)
    # Non-trivial LayerNorm parameters, so a loader that swaps gamma and beta fails.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name.endswith("norm3.weight") \
                    or name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            elif "norm" in name and name.endswith(".bias"):
                p.uniform_(-0.2, 0.2)
    return model.eval()


_DTYPES = {torch.float32: ("F32", "<f4"), torch.float16: ("F16", "<f2"), torch.int8: ("I8", "<i1")}


def is_linear_weight(name):
    """The weight matrices that --dtype int8 quantizes (every nn.Linear-style
    matrix: attention in/out projections, FFN, the generator); embeddings, biases
    and norms stay F32."""
    return name.endswith(("in_proj_weight", "out_proj.weight", "linear1.weight", "linear2.weight")) or \
        name == "generator.weight"


def quantize_int8_rows(w):
    """Symmetric per-row int8 as vkf_quantize_int8_rows, in fp32: scale = max|row| /
    127 (0 for an all-zero row), q = w / scale rounded to nearest, halves away from
    zero. Returns (q int8, scale float32), w ~ q * scale[:, None]."""
    w = w.detach().to(torch.float32).cpu()
    scale = w.abs().amax(dim=1) / torch.tensor(127.0, dtype=torch.float32)
    x = w / torch.where(scale > 0, scale, torch.ones_like(scale))[:, None]
    r = torch.round(x)  # halves to even: fix the exact halves below
    half = (x - torch.trunc(x)).abs() == 0.5
    r = torch.where(half, torch.trunc(x) + torch.sign(x), r)
    r = torch.where(scale[:, None] > 0, r.clamp(-127, 127), torch.zeros_like(r))
    return r.to(torch.int8), scale.contiguous()


def write_safetensors(path, tensors, metadata):
    """tensors: ordered {name: contiguous CPU tensor}; metadata: {str: str}."""
    header = {"__metadata__": metadata}
    offset = 0
    blobs = []
    for name, t in tensors.items():
        code, _ = _DTYPES[t.dtype]
        raw = t.contiguous().numpy().tobytes()  # little-endian on every platform PyTorch ships for
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)  # align the data section to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)


def export(model, path, dtype=torch.float32, src_vocab=None, tgt_vocab=None, lowrank=None):
    """Writes model (a Seq2Seq) to path in the vkformer format. lowrank: optional
    {"self": E, "cross": F}, (K, max_len) projections for --attention lowrank:K and
    --cross-attention lowrank:K (written as lowrank.self_proj, lowrank.cross_proj)."""
    if sys.byteorder != "little":
        raise SystemExit("export_torch: this writer assumes a little-endian host")
    config = {k: model.config[k] for k in CONFIG_KEYS}
    if src_vocab is not None:
        config["src_vocab"] = list(src_vocab)
    if tgt_vocab is not None:
        config["tgt_vocab"] = list(tgt_vocab)
    if dtype == torch.int8:
        # weight matrices as I8 with "<name>_scale" F32 (rows); everything else F32
        tensors = {}
        for name, t in model.state_dict().items():
            if is_linear_weight(name):
                tensors[name], tensors[name + "_scale"] = quantize_int8_rows(t)
            else:
                tensors[name] = t.detach().to(torch.float32).cpu()
    else:
        tensors = {name: t.detach().to(dtype).cpu() for name, t in model.state_dict().items()}
    for kind, proj in (lowrank or {}).items():
        tensors[f"lowrank.{kind}_proj"] = proj.detach().to(torch.float32).cpu()
    write_safetensors(path, tensors, {"vkformer.config": json.dumps(config)})


@torch.no_grad()
def forward_logits(model, src, tgt):
    """Logits (len(tgt), tgt_vocab_size) for one source and target id list."""
    return model(torch.tensor([src]), torch.tensor([tgt]))[0]


@torch.no_grad()
def greedy(model, src, max_new):
    """Greedy ids after bos, without bos and without the final eos."""
    c = model.config
    memory = model.encode(torch.tensor([src]))
    out = [c["bos_id"]]
    for _ in range(max_new):
        logits = model.decode(memory, torch.tensor([out]))[0, -1]
        nxt = int(torch.argmax(logits))
        if nxt == c["eos_id"]:
            break
        out.append(nxt)
    return out[1:]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--d-model", type=int, default=48)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--encoder-layers", type=int, default=2)
    p.add_argument("--decoder-layers", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=100)
    p.add_argument("--src-vocab", type=int, default=37)
    p.add_argument("--tgt-vocab", type=int, default=37)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--activation", choices=("relu", "gelu"), default="relu")
    p.add_argument("--norm-first", action="store_true")
    p.add_argument("--eps", type=float, default=1e-5)
    p.add_argument("--embed-scale", type=float, default=None, help="default sqrt(d_model)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=("f32", "f16", "int8"), default="f32",
                   help="int8: weight matrices as I8 with per-row F32 scales (<name>_scale)")
    a = p.parse_args()
    config = default_config(d_model=a.d_model, n_heads=a.heads, n_encoder_layers=a.encoder_layers,
                            n_decoder_layers=a.decoder_layers, d_ff=a.d_ff, activation=a.activation,
                            norm_first=a.norm_first, layer_norm_eps=a.eps, src_vocab_size=a.src_vocab,
                            tgt_vocab_size=a.tgt_vocab, max_len=a.max_len,
                            embed_scale=a.embed_scale if a.embed_scale is not None else math.sqrt(a.d_model))
    model = build_model(config, seed=a.seed)
    export(model, a.out, {"f32": torch.float32, "f16": torch.float16, "int8": torch.int8}[a.dtype])


if __name__ == "__main__":
    main()
