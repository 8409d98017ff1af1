#!/usr/bin/python3
"""A PyTorch reference of Hugging Face's T5, mT5 and LongT5 models (T5ForConditionalGeneration,
MT5ForConditionalGeneration, LongT5ForConditionalGeneration), written here from their definitions, on top of
tests/marian_ref.py (whose greedy and beam search, transcribed from transformers 5.12's generate, serve every
family).

Runs under Debian's /usr/bin/python3 (PyTorch 1.13, numpy): no transformers. Held against transformers 5.12.1 by
tools/check_t5_hf.py (run it with ../shared/tools/hf_python.sh).

The model (config.json keys in brackets):
  - one token table (shared.weight) for both stacks, no absolute positions, no embedding scale;
  - pre-norm blocks with T5's norm: w * x / sqrt(mean(x^2) + [layer_norm_epsilon]) (RMSNorm: no mean, no
    bias), final norms on both stacks:
      encoder: x = x + SelfAttn(N(x)); x = x + FFN(N(x))
      decoder: x = x + CausalSelfAttn(N(x)); x = x + CrossAttn(N(x), memory); x = x + FFN(N(x))
  - attention without biases and without 1/sqrt(d) scaling, heads of [d_kv]; scores + position bias + mask;
  - the relative position bias: each stack's first layer's relative_attention_bias (buckets, heads) at the
    bucket of key position minus query position ([relative_attention_num_buckets],
    [relative_attention_max_distance]; bidirectional in the encoder, causal in the decoder, in float32 as
    transformers computes it), added in every layer of the stack; none in cross-attention;
  - FFN [feed_forward_proj]: wo(act(wi(x))) or, "gated-ACT", wo(act(wi_0(x)) * wi_1(x)); "gated-gelu" is GELU
    with the tanh approximation;
  - logits = lm_head(x * d_model**-0.5 when scaled); scaled: [scale_decoder_outputs] if given, else
    [tie_word_embeddings] (t5, longt5; mt5 never); lm_head.weight where the file holds it, else shared.weight.
  - LongT5 ([encoder_attention_type]): the encoder's self-attention in blocks of [local_radius] + 1 tokens,
    each block's queries against its own and the two neighbouring blocks' keys, keys farther than
    local_radius masked (-1e10), the bias of the 3-block relative positions; "transient-global" adds, per
    layer, global keys and values: the layer's k and v of RMSNorm(global_input_layer_norm) of the sums of its
    normed input over blocks of [global_block_size] tokens (a last partial block joining the one before),
    seen by every token with the bias global_relative_attention_bias at (global block - own block).
Generation: generate() with the folder's generation_config.json, the decoder starting from
decoder_start_token_id (config, else pad).
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

ACTS = {"relu": F.relu, "gelu": lambda x: F.gelu(x), "silu": F.silu, "swish": F.silu,
        "gelu_new": marian_ref.ACTIVATIONS["gelu_new"], "gelu_pytorch_tanh": marian_ref.ACTIVATIONS["gelu_new"]}
DEFAULTS = {  # T5Config, MT5Config, LongT5Config defaults of transformers 5.12
    "t5": {"vocab_size": 32128, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "feed_forward_proj": "relu"},
    "mt5": {"vocab_size": 250112, "d_ff": 1024, "num_layers": 8, "num_heads": 6, "feed_forward_proj": "gated-gelu"},
    "longt5": {"vocab_size": 32128, "d_ff": 2048, "num_layers": 6, "num_heads": 8, "feed_forward_proj": "relu"},
}


def bucket(rel, bidirectional, num_buckets, max_distance):
    """T5's relative position bucket of rel = key position - query position (long tensor), in float32."""
    out = torch.zeros_like(rel)
    n = num_buckets
    if bidirectional:
        n //= 2
        out = out + (rel > 0).long() * n
        dist = rel.abs()
    else:
        dist = -torch.min(rel, torch.zeros_like(rel))
    exact = n // 2
    large = exact + (torch.log(dist.float() / exact) / math.log(max_distance / exact) * (n - exact)).long()
    large = torch.min(large, torch.full_like(large, n - 1))
    return out + torch.where(dist < exact, dist, large)


class T5(marian_ref.Marian):
    """Weights (float32) + config of a T5 / mT5 / LongT5 folder."""

    def __init__(self, config, weights):
        c = dict(config)
        self.kind = c["model_type"]
        if self.kind not in DEFAULTS:
            raise ValueError("model_type %r is not t5, mt5 or longt5" % self.kind)
        for k, v in DEFAULTS[self.kind].items():
            c.setdefault(k, v)
        c.setdefault("num_decoder_layers", c["num_layers"])
        self.config = c
        ffp = c["feed_forward_proj"]
        self.gated = ffp.startswith("gated-")
        act = "gelu_new" if ffp == "gated-gelu" else ffp.split("-")[-1]
        self.act = ACTS[act]
        self.d, self.dkv, self.H = c.get("d_model", 512), c.get("d_kv", 64), c["num_heads"]
        self.eps = c.get("layer_norm_epsilon", 1e-6)
        self.nb = c.get("relative_attention_num_buckets", 32)
        self.md = c.get("relative_attention_max_distance", 128)
        self.pad = c.get("pad_token_id", 0)
        eos = c.get("eos_token_id", 1)
        self.eos = eos[0] if isinstance(eos, list) else eos
        self.start = c.get("decoder_start_token_id", self.pad)
        tie = c.get("tie_word_embeddings", True)
        if self.kind == "t5":
            self.scaled = c.get("scale_decoder_outputs", tie is not False)
        else:
            self.scaled = self.kind == "longt5" and tie
        w = dict(weights)
        names = ["shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"]
        tied = self.kind != "longt5" or tie
        base = next(w[n] for n in (names if tied else names[:1]) if n in w)
        self.enc_emb = w.get("encoder.embed_tokens.weight", base)
        self.dec_emb = w.get("decoder.embed_tokens.weight", base)
        self.lm_head = w.get("lm_head.weight", base)
        self.vocab_size = self.lm_head.shape[0]
        self.w = w
        self.local = None
        if self.kind == "longt5":
            self.radius = c.get("local_radius", 127)
            self.gbs = c.get("global_block_size", 16)
            self.local = c.get("encoder_attention_type", "local")
        self.enc_attn = {None: "SelfAttention", "local": "LocalSelfAttention",
                         "transient-global": "TransientGlobalSelfAttention"}[self.local]

    # --- building blocks
    def _norm(self, x, name):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.w[name] * (x * torch.rsqrt(var + self.eps))

    def _proj(self, x, name):
        return F.linear(x, self.w[name])

    def _heads(self, x, name):
        B, T, _ = x.shape
        return self._proj(x, name).view(B, T, self.H, self.dkv).transpose(1, 2)

    def _bias(self, table, q_pos, k_pos, bidirectional):
        """(1, H, len(q_pos), len(k_pos)) bias of positions (long tensors)."""
        b = bucket(k_pos[None, :] - q_pos[:, None], bidirectional, self.nb, self.md)
        return table[b].permute(2, 0, 1)[None]

    def _attend(self, x, kv, prefix, bias, mask):
        """Full attention: x (B, T, d), kv (B, S, d); bias (1, H, T, S) or None; mask additive or None."""
        B, T, _ = x.shape
        q, k, v = self._heads(x, prefix + "q.weight"), self._heads(kv, prefix + "k.weight"), self._heads(kv, prefix + "v.weight")
        s = q @ k.transpose(2, 3)
        if bias is not None:
            s = s + bias
        if mask is not None:
            s = s + mask
        o = torch.softmax(s.float(), dim=-1) @ v
        return self._proj(o.transpose(1, 2).reshape(B, T, self.H * self.dkv), prefix + "o.weight")

    def _ffn(self, x, prefix):
        p = prefix + "DenseReluDense."
        if self.gated:
            h = self.act(self._proj(x, p + "wi_0.weight")) * self._proj(x, p + "wi_1.weight")
        else:
            h = self.act(self._proj(x, p + "wi.weight"))
        return self._proj(h, p + "wo.weight")

    # --- LongT5's encoder attention, in blocks as LongT5 computes it
    def _blocks(self, t, L):
        """(B, T, ...) -> (B, nblocks, L, ...), zero-padded at the end."""
        B, T = t.shape[:2]
        n = -(-T // L)
        pad = n * L - T
        if pad:
            t = torch.cat([t, torch.zeros((B, pad) + tuple(t.shape[2:]), dtype=t.dtype)], dim=1)
        return t.reshape((B, n, L) + tuple(t.shape[2:]))

    def _three(self, t):
        """(B, n, L, ...) -> (B, n, 3L, ...): each block with the one before and after (zeros at the ends)."""
        z = torch.zeros_like(t[:, :1])
        padded = torch.cat([z, t, z], dim=1)
        return torch.cat([padded[:, :-2], padded[:, 1:-1], padded[:, 2:]], dim=2)

    def _global_ids(self, keep):
        """LongT5's fixed global blocks of a (B, T) 0/1 float mask: each token's block (-1 for padding; the
        tokens of a last partial block join the block before) and which of the T // G global blocks are real."""
        B, T = keep.shape
        G = self.gbs
        frac = torch.ones_like(keep) / G
        frac = torch.cumsum(frac, dim=1) - frac
        m = torch.where(keep != 0.0, 1.0, -1000.0).type(keep.dtype)
        ids = torch.floor(m + frac - 1.0).type(keep.dtype)
        ids = torch.where(ids > -1, ids, torch.tensor(-1, dtype=ids.dtype))
        ids = ids * keep + (keep - 1)
        ends = (torch.arange(T) % G) == G - 1
        full = torch.logical_and(ends, ids >= 0).sum(-1).unsqueeze(-1).type(ids.dtype) - 1
        ids = torch.where(ids < full, ids, full)
        n = T // G
        last = ids.max(dim=-1).values.unsqueeze(1) if n > 0 else torch.zeros(B, 1)
        real = torch.where((torch.arange(n).float()[None, :]) <= last, 1, 0)
        return ids.long(), real

    def _local_attention(self, x, prefix, keep, layer0_biases, gnorm):
        """LongT5 local / transient-global self-attention of the normed input x (B, T, d); keep (B, T) bool."""
        B, T, _ = x.shape
        L = self.radius + 1
        q = self._blocks(self._proj(x, prefix + "q.weight").view(B, T, self.H, self.dkv), L)
        k = self._three(self._blocks(self._proj(x, prefix + "k.weight").view(B, T, self.H, self.dkv), L))
        v = self._three(self._blocks(self._proj(x, prefix + "v.weight").view(B, T, self.H, self.dkv), L))
        s = torch.einsum("bnqhd,bnkhd->bnhqk", q, k)
        pos = torch.arange(3 * L)
        rel = pos[None, :] - pos[L:2 * L][:, None]                               # (L, 3L)
        bias = layer0_biases[0][bucket(rel, True, self.nb, self.md)].permute(2, 0, 1)[None, None]  # (1, 1, H, L, 3L)
        kb = self._blocks(keep.float(), L)                                       # (B, n, L)
        allowed = (kb[..., :, None] > 0) & (self._three(kb)[..., None, :] > 0) & (rel.abs() < L)[None, None]
        s = s + bias + torch.where(allowed, 0.0, -1e10)[:, :, None]
        if self.local == "transient-global":
            keepf = keep.float()
            ids, real = self._global_ids(keepf)
            n = real.shape[1]
            onehot = F.one_hot(torch.where(ids >= 0, ids, torch.tensor(n)), n + 1)[:, :, :n].float()  # (B, T, n)
            agg = torch.einsum("btd,btg->bgd", x, onehot)
            agg = self._norm(agg, gnorm)
            gk = self._proj(agg, prefix + "k.weight").view(B, n, self.H, self.dkv)
            gv = self._proj(agg, prefix + "v.weight").view(B, n, self.H, self.dkv)
            nb = q.shape[1]
            gk, gv = gk[:, None].expand(B, nb, n, self.H, self.dkv), gv[:, None].expand(B, nb, n, self.H, self.dkv)
            gs = torch.einsum("bnqhd,bnkhd->bnhqk", q, gk)                        # (B, nb, H, L, n)
            side_ok = keepf[:, :, None] == real[:, None, :].float()                # (B, T, n)
            side_rel = torch.arange(n)[None, None, :] - ids[:, :, None]            # (B, T, n)
            side_bias = layer0_biases[1][bucket(side_rel, True, self.nb, self.md)]  # (B, T, n, H)
            side = side_bias + torch.where(side_ok, 0.0, -1e10)[..., None]
            side = self._blocks(side, L).permute(0, 1, 4, 2, 3)                    # (B, nb, H, L, n)
            s = torch.cat([s, gs + side], dim=-1)
            k = torch.cat([k, gk], dim=2)
            v = torch.cat([v, gv], dim=2)
        p = torch.softmax(s.float(), dim=-1)
        o = torch.einsum("bnhqk,bnkhd->bnqhd", p, v).reshape(B, -1, self.H * self.dkv)[:, :T]
        return self._proj(o, prefix + "o.weight")

    @torch.no_grad()
    def encode(self, src, src_keep=None):
        c = self.config
        B, S = src.shape
        keep = torch.ones(B, S, dtype=torch.bool) if src_keep is None else src_keep
        mask = self._additive(keep)
        x = self.enc_emb[src]
        a = "encoder.block.0.layer.0.%s." % self.enc_attn
        table = self.w[a + "relative_attention_bias.weight"]
        bias = self._bias(table, torch.arange(S), torch.arange(S), True) if not self.local else None
        gtable = self.w.get(a + "global_relative_attention_bias.weight")
        for i in range(c["num_layers"]):
            p = "encoder.block.%d.layer." % i
            h = self._norm(x, p + "0.layer_norm.weight")
            ap = "%s0.%s." % (p, self.enc_attn)
            if self.local:
                x = x + self._local_attention(h, ap, keep, (table, gtable), ap + "global_input_layer_norm.weight")
            else:
                x = x + self._attend(h, h, ap, bias, mask)
            x = x + self._ffn(self._norm(x, p + "1.layer_norm.weight"), p + "1.")
        return self._norm(x, "encoder.final_layer_norm.weight")

    @torch.no_grad()
    def decode(self, memory, tgt, src_keep=None):
        c = self.config
        T = tgt.shape[1]
        x = self.dec_emb[tgt]
        bias = self._bias(self.w["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
                          torch.arange(T), torch.arange(T), False)
        causal = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), diagonal=1)[None, None]
        cross = None if src_keep is None else self._additive(src_keep)
        for i in range(c["num_decoder_layers"]):
            p = "decoder.block.%d.layer." % i
            h = self._norm(x, p + "0.layer_norm.weight")
            x = x + self._attend(h, h, p + "0.SelfAttention.", bias, causal)
            x = x + self._attend(self._norm(x, p + "1.layer_norm.weight"), memory, p + "1.EncDecAttention.", None, cross)
            x = x + self._ffn(self._norm(x, p + "2.layer_norm.weight"), p + "2.")
        x = self._norm(x, "decoder.final_layer_norm.weight")
        if self.scaled:
            x = x * (self.d ** -0.5)
        return F.linear(x, self.lm_head)


def load_folder(path):
    """The model of a folder, generation_config applied by marian_ref's generation."""
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    m = T5(cfg, marian_ref.load_weights(path))
    gc_path = os.path.join(path, "generation_config.json")
    m.generation_config = {"bad_words_ids": []}
    if os.path.exists(gc_path):
        with open(gc_path) as f:
            g = json.load(f)
        m.generation_config.update(g)
        if "decoder_start_token_id" in g:
            m.start = g["decoder_start_token_id"]
    m.forced_bos = None
    m.forced_eos_default = None
    return m


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print("usage: t5_ref.py FOLDER IDS [IDS...]: greedy and beam-4 ids of each comma-separated source", file=sys.stderr)
        sys.exit(2)
    m = load_folder(sys.argv[1])
    for arg in sys.argv[2:]:
        ids = [int(x) for x in arg.split(",")]
        g = marian_ref.greedy(m, ids, 12)
        b, s = marian_ref.beam_search(m, ids, 4, 12)
        print("src %s\n  greedy %s\n  beam4 %s %.5f" % (ids, g, b, s))
