#!/usr/bin/python3
"""A PyTorch reference of Hugging Face's MarianMTModel (opus-mt), written here from its definition.

Runs under Debian's /usr/bin/python3 (PyTorch 1.13, numpy, python3-sentencepiece); needs neither
transformers nor safetensors. Checked against transformers 5.12.1 (tools/check_marian_hf.py).

The model (config.json keys in brackets):
  - token embeddings: one table [vocab_size x d_model] shared by encoder, decoder and lm_head
    (share_encoder_decoder_embeddings true, the default); or separate encoder [vocab_size] and decoder
    [decoder_vocab_size] tables with lm_head tied to the decoder's (tie_word_embeddings true) or its own
    lm_head.weight; multiplied by sqrt(d_model) when scale_embedding;
  - positions: Marian's sinusoid table [max_position_embeddings x d_model], sin in the first half of the
    channels and cos in the second (not interleaved), position p channel pair i at p / 10000**(2i/d);
    added after the scaling; the file's embed_positions tables when present, else computed (float64
    then float32, as transformers);
  - post-LN layers, LayerNorm eps 1e-5, no final encoder/decoder LayerNorm, no embedding LayerNorm:
      encoder: x = LN_sa(x + SelfAttn(x)); x = LN_f(x + fc2(act(fc1(x))))
      decoder: x = LN_sa(x + CausalSelfAttn(x)); x = LN_ca(x + CrossAttn(x, memory)); x = LN_f(x + FFN(x))
    attention: separate q/k/v/out projections with bias, q scaled by head_dim**-0.5 (after its bias);
    act = activation_function: swish/silu, gelu (exact erf), relu, gelu_new/gelu_pytorch_tanh (tanh);
  - logits = lm_head(x) + final_logits_bias (zeros when the file lacks it).
Source padding: generate() masks source positions equal to pad_token_id (when the source holds one), as
transformers' generate() does; forward_logits takes an optional mask (none by default, as model(...)).

Generation follows the hub folder's generation_config.json (opus-mt: bad_words_ids [[pad]],
forced_eos_token_id 0, renormalize_logits true, num_beams 4): max_length = 1 + max_new (the decoder start
counts); at each step the scores go through: pad banned (-inf), then at cur_len == max_length - 1 (cur_len
= ids so far, start included, i.e. the last allowed step) everything but eos is -inf and eos is 0, then
log_softmax (renormalize). Greedy takes the argmax of those; beam search follows transformers 5.12's
_beam_search step for step (log_softmax of the logits first, the processors, running scores, top 2K,
the stopping criteria = eos or max_length, finished scores sum_logprobs / generated_len**length_penalty
with generated_len counting the eos, the early-stop heuristic). Returned ids exclude the decoder start
and the final eos.

Tokenizer (MarianTokenizer semantics): source text -> source.spm pieces -> vocab.json ids (a piece
absent from vocab.json -> <unk>) + eos; a leading ">>xx<<" language code is kept as one token. Decoding
skips the special ids (</s>, <unk>, <pad>), maps ids to vocab.json pieces, decodes them with
target.spm's decode_pieces, replaces U+2581 by a space and strips.
"""
import json
import math
import os
import struct
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LN_EPS = 1e-5
ACTIVATIONS = {
    "swish": F.silu, "silu": F.silu, "relu": F.relu,
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


def sinusoids(n_pos, dim):
    """Marian's positions: sin in the first half of the channels, cos in the second."""
    j = np.arange(dim)
    enc = np.arange(n_pos)[:, None] / np.power(10000.0, 2 * (j // 2) / dim)[None, :]
    out = np.empty((n_pos, dim), dtype=np.float32)
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out[:, :half] = np.sin(enc[:, 0::2])
    out[:, half:] = np.cos(enc[:, 1::2])
    return torch.from_numpy(out)


def read_safetensors_arrays(path):
    """name -> numpy array as stored (float32, float16 or float64; BF16 widened to float32), writable.
    tests/gen_marian.py reads (and rewrites) its files with this too."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        if t["dtype"] == "BF16":
            u = np.frombuffer(data[a:b], dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            dt = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[t["dtype"]]
            arr = np.frombuffer(data[a:b], dtype=dt).copy()
        out[name] = arr.reshape(t["shape"])
    return out


def read_safetensors(path):
    """name -> float32 torch tensor (F32, F16, F64, BF16 files)."""
    return {name: torch.from_numpy(a.astype(np.float32)) for name, a in read_safetensors_arrays(path).items()}


class Marian:
    """Weights (float32) + config of one folder; encode/decode as transformers' MarianMTModel."""

    def __init__(self, config, weights):
        self.config = c = config
        if c.get("model_type", "marian") != "marian":
            raise ValueError("config model_type %r is not marian" % c.get("model_type"))
        act = c.get("activation_function", "gelu")
        if act not in ACTIVATIONS:
            raise ValueError("unsupported activation_function %r" % act)
        self.act = ACTIVATIONS[act]
        self.d = c["d_model"]
        self.pad = c["pad_token_id"]
        self.eos = c["eos_token_id"]
        self.start = c.get("decoder_start_token_id", self.pad)
        self.scale = math.sqrt(self.d) if c.get("scale_embedding", False) else 1.0
        share = c.get("share_encoder_decoder_embeddings", True)
        tie = c.get("tie_word_embeddings", True)
        w = dict(weights)

        def first(*names):
            for n in names:
                if n in w:
                    return w[n]
            raise KeyError("none of %s in the weights" % ", ".join(names))

        if share:
            emb = first("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                        *(("lm_head.weight",) if tie else ()))
            self.enc_emb = self.dec_emb = emb
        else:
            self.enc_emb = first("model.encoder.embed_tokens.weight", "model.shared.weight")
            self.dec_emb = first("model.decoder.embed_tokens.weight", *(("lm_head.weight",) if tie else ()))
        self.lm_head = self.dec_emb if tie else first("lm_head.weight")
        V = self.lm_head.shape[0]
        self.bias = w["final_logits_bias"].reshape(-1) if "final_logits_bias" in w else torch.zeros(V)
        npos = c["max_position_embeddings"]
        self.enc_pos = w.get("model.encoder.embed_positions.weight", sinusoids(npos, self.d))
        self.dec_pos = w.get("model.decoder.embed_positions.weight", sinusoids(npos, self.d))
        self.w = w
        self.vocab_size = V
        for n, t in (("enc_emb", self.enc_emb), ("dec_emb", self.dec_emb), ("lm_head", self.lm_head)):
            if t.shape[1] != self.d:
                raise ValueError("%s has shape %s" % (n, list(t.shape)))
        for side in ("encoder", "decoder"):
            for i in range(c[side + "_layers"]):
                p = "model.%s.layers.%d." % (side, i)
                for a in ("self_attn",) + (("encoder_attn",) if side == "decoder" else ()):
                    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                        self._need(p + a + "." + proj, (self.d, self.d))
                    self._need(p + a + "_layer_norm", None)
                ffn = c[side + "_ffn_dim"]
                self._need(p + "fc1", (ffn, self.d))
                self._need(p + "fc2", (self.d, ffn))
                self._need(p + "final_layer_norm", None)

    def _need(self, prefix, shape):
        for s in ("weight", "bias"):
            n = prefix + "." + s
            if n not in self.w:
                raise KeyError("missing tensor %s" % n)
            want = (shape if s == "weight" else shape[:1]) if shape else (self.d,)
            if tuple(self.w[n].shape) != tuple(want):
                raise ValueError("tensor %s has shape %s, expected %s" % (n, list(self.w[n].shape), list(want)))

    # --- building blocks
    def _lin(self, x, name):
        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def _ln(self, x, name):
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], LN_EPS)

    def _attn(self, x, kv, name, heads, mask):
        """x (B, T, d), kv (B, S, d); mask: additive (B or 1, 1, T or 1, S) or None."""
        B, T, d = x.shape
        S = kv.shape[1]
        hd = d // heads
        q = (self._lin(x, name + ".q_proj") * hd ** -0.5).view(B, T, heads, hd).transpose(1, 2)
        k = self._lin(kv, name + ".k_proj").view(B, S, heads, hd).transpose(1, 2)
        v = self._lin(kv, name + ".v_proj").view(B, S, heads, hd).transpose(1, 2)
        s = q @ k.transpose(2, 3)
        if mask is not None:
            s = s + mask
        o = torch.softmax(s, dim=-1) @ v
        return self._lin(o.transpose(1, 2).reshape(B, T, d), name + ".out_proj")

    @staticmethod
    def _additive(keep):
        """keep: bool (B, S) -> additive mask (B, 1, 1, S)."""
        return torch.where(keep, 0.0, torch.finfo(torch.float32).min)[:, None, None, :]

    @torch.no_grad()
    def encode(self, src, src_keep=None):
        """src: long (B, S) -> memory (B, S, d)."""
        c = self.config
        S = src.shape[1]
        x = self.enc_emb[src] * self.scale + self.enc_pos[:S][None]
        mask = None if src_keep is None else self._additive(src_keep)
        for i in range(c["encoder_layers"]):
            p = "model.encoder.layers.%d." % i
            x = self._ln(x + self._attn(x, x, p + "self_attn", c["encoder_attention_heads"], mask),
                         p + "self_attn_layer_norm")
            h = self._lin(self.act(self._lin(x, p + "fc1")), p + "fc2")
            x = self._ln(x + h, p + "final_layer_norm")
        return x

    @torch.no_grad()
    def decode(self, memory, tgt, src_keep=None):
        """memory (B, S, d), tgt long (B, T) -> logits (B, T, V) float32."""
        c = self.config
        T = tgt.shape[1]
        x = self.dec_emb[tgt] * self.scale + self.dec_pos[:T][None]
        causal = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), diagonal=1)[None, None]
        cross = None if src_keep is None else self._additive(src_keep)
        H = c["decoder_attention_heads"]
        for i in range(c["decoder_layers"]):
            p = "model.decoder.layers.%d." % i
            x = self._ln(x + self._attn(x, x, p + "self_attn", H, causal), p + "self_attn_layer_norm")
            x = self._ln(x + self._attn(x, memory, p + "encoder_attn", H, cross), p + "encoder_attn_layer_norm")
            h = self._lin(self.act(self._lin(x, p + "fc1")), p + "fc2")
            x = self._ln(x + h, p + "final_layer_norm")
        return F.linear(x, self.lm_head) + self.bias


def load_weights(path):
    """The folder's model.safetensors, else pytorch_model.bin, else the shards an index names (safetensors
    or .bin): name -> float32 tensor."""
    def load_bin(bn):
        try:
            return torch.load(bn, map_location="cpu", weights_only=True)
        except TypeError:
            return torch.load(bn, map_location="cpu")
    st = os.path.join(path, "model.safetensors")
    if os.path.exists(st):
        return read_safetensors(st)
    bn = os.path.join(path, "pytorch_model.bin")
    if os.path.exists(bn):
        return {k: v.float() for k, v in load_bin(bn).items()}
    for index, read in (("model.safetensors.index.json", read_safetensors), ("pytorch_model.bin.index.json", load_bin)):
        if os.path.exists(os.path.join(path, index)):
            with open(os.path.join(path, index)) as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
            out = {}
            for name in shards:
                out.update({k: v.float() for k, v in read(os.path.join(path, name)).items()})
            return out
    raise FileNotFoundError("%s: no model.safetensors, pytorch_model.bin or shard index" % path)


def load_folder(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    m = Marian(cfg, load_weights(path))
    gc_path = os.path.join(path, "generation_config.json")
    m.generation_config = {}
    if os.path.exists(gc_path):
        with open(gc_path) as f:
            m.generation_config = json.load(f)
    return m


def forward_logits(model, src_ids, tgt_ids, src_keep=None):
    """(len(tgt_ids), V) float32 numpy logits for one pair; tgt_ids are decoder input ids (start first)."""
    src = torch.tensor([list(src_ids)], dtype=torch.long)
    keep = None if src_keep is None else torch.tensor([list(src_keep)], dtype=torch.bool)
    mem = model.encode(src, keep)
    return model.decode(mem, torch.tensor([list(tgt_ids)], dtype=torch.long), keep)[0].numpy().astype(np.float32)


def _src_mask(model, src_ids):
    """generate()'s attention mask: source positions equal to pad are masked, when the source holds pad."""
    if model.pad in src_ids and model.pad != model.eos:
        return torch.tensor([[i != model.pad for i in src_ids]])
    return None


def _bad_ids(model):
    gc = getattr(model, "generation_config", {}) or {}
    bad = gc.get("bad_words_ids", [[model.pad]])
    return [b[0] for b in (bad or []) if len(b) == 1 and b[0] != model.eos]


def _forced_eos(model):
    gc = getattr(model, "generation_config", {}) or {}
    # opus-mt folders force eos even where only config.json says so (default: eos); other families
    # (tests/seq2seq_ref.py) set forced_eos_default None
    return gc.get("forced_eos_token_id", model.config.get("forced_eos_token_id",
                                                          getattr(model, "forced_eos_default", model.eos)))


def _ngram_bans(model, input_ids, cur_len):
    """NoRepeatNGramLogitsProcessor's banned ids of each row of input_ids (long (rows, >= cur_len)), or
    None when the generation_config has no no_repeat_ngram_size."""
    gc = getattr(model, "generation_config", {}) or {}
    n = gc.get("no_repeat_ngram_size") or 0
    if not n or input_ids is None:
        return None
    out = []
    for row in input_ids[:, :cur_len].tolist():
        banned = []
        if cur_len + 1 >= n:
            prefix = row[cur_len - n + 1:cur_len] if n > 1 else []
            for i in range(cur_len - n + 1):
                if row[i:i + n - 1] == prefix and row[i + n - 1] not in banned:
                    banned.append(row[i + n - 1])
        out.append(banned)
    return out


def process(model, scores, cur_len, max_length, input_ids=None):
    """transformers' logits processors of a generation_config, in order: NoBadWords (pad -> -inf),
    NoRepeatNGram (the rows' input_ids given), ForcedBOS (model.forced_bos at cur_len == 1: every other
    token -inf, it 0), ForcedEOS (at cur_len == max_length - 1), LogitNormalization (renormalize_logits;
    without n-gram bans log_softmax is applied in any case, which changes nothing for the other bans
    of the folders tested here)."""
    scores = scores.clone()
    for b in _bad_ids(model):
        scores[:, b] = -float("inf")
    bans = _ngram_bans(model, input_ids, cur_len)
    for row, ids in enumerate(bans or []):
        if ids:
            scores[row, ids] = -float("inf")
    fb = getattr(model, "forced_bos", None)
    if fb is not None and cur_len == 1:
        scores = torch.full_like(scores, -float("inf"))
        scores[:, fb] = 0.0
    fe = _forced_eos(model)
    if fe is not None and cur_len == max_length - 1:
        scores = torch.full_like(scores, -float("inf"))
        scores[:, fe] = 0.0
    gc = getattr(model, "generation_config", {}) or {}
    if bans is not None and not gc.get("renormalize_logits", False):
        return scores
    return torch.log_softmax(scores, dim=-1)


@torch.no_grad()
def greedy(model, src_ids, max_new):
    """Generated ids (without decoder start and final eos), as generate(num_beams=1, max_new_tokens=max_new)."""
    src = torch.tensor([list(src_ids)], dtype=torch.long)
    keep = _src_mask(model, src_ids)
    mem = model.encode(src, keep)
    seq = [model.start]
    max_length = 1 + max_new
    while len(seq) < max_length:
        logits = model.decode(mem, torch.tensor([seq]), keep)[:, -1].float()
        tok = int(torch.argmax(process(model, logits, len(seq), max_length, torch.tensor([seq])), dim=-1)[0])
        seq.append(tok)
        if tok == model.eos:
            break
    out = seq[1:]
    return out[:-1] if out and out[-1] == model.eos else out


@torch.no_grad()
def beam_search(model, src_ids, num_beams, max_new, length_penalty=1.0, early_stopping=False):
    """(best ids without start/eos, its score), as generate(num_beams=K, max_new_tokens=max_new) of
    transformers 5.12 (_beam_search, batch size 1, transcribed step for step)."""
    K = num_beams
    eos = model.eos
    src = torch.tensor([list(src_ids)], dtype=torch.long)
    keep = _src_mask(model, src_ids)
    mem = model.encode(src, keep)
    memK = mem.expand(K, -1, -1)
    keepK = None if keep is None else keep.expand(K, -1)
    max_length = 1 + max_new
    prompt_len = cur_len = 1
    keep_n = 2 * K                      # max(2, 1 + n_eos) * K with one eos id
    top_mask = torch.arange(keep_n) < K
    running = torch.full((K, max_length), model.pad, dtype=torch.long)
    running[:, 0] = model.start
    seqs = running.clone()
    run_len = torch.full((K,), 1, dtype=torch.long)
    seq_len = run_len.clone()
    run_scores = torch.zeros(K)
    run_scores[1:] = -1e9
    beam_scores = torch.full((K,), -1e9)
    finished = torch.zeros(K, dtype=torch.bool)
    unsatisfied = True
    while True:
        logits = model.decode(memK, running[:, :cur_len], keepK)[:, -1].float()
        V = logits.shape[-1]
        lp = process(model, torch.log_softmax(logits, dim=-1), cur_len, max_length, running)
        lp = (lp + run_scores[:, None]).reshape(-1)
        top_lp, top_idx = torch.topk(lp, keep_n)
        parent, tok = top_idx // V, top_idx % V
        top_seqs = running[parent].clone()
        top_seqs[:, cur_len] = tok
        top_len = torch.full((keep_n,), cur_len + 1, dtype=torch.long)
        hits = (tok == eos) | (cur_len + 1 >= max_length)
        # running beams for the next step: the K best that did not just finish
        trl = top_lp + hits.to(torch.float32) * -1.0e9
        nidx = torch.topk(trl, K)[1]
        running, run_scores = top_seqs[nidx], trl[nidx]
        # finished hypotheses
        just = hits & top_mask
        fl = top_lp / ((cur_len + 1 - prompt_len) ** length_penalty)
        fl = fl + float(bool(finished.all()) and early_stopping is True) * -1.0e9
        fl = fl + float(not unsatisfied) * -1.0e9
        fl = fl + (~just).to(torch.float32) * -1.0e9
        m_seqs = torch.cat([seqs, top_seqs])
        m_scores = torch.cat([beam_scores, fl])
        m_fin = torch.cat([finished, just])
        m_len = torch.cat([seq_len, top_len])
        midx = torch.topk(m_scores, K)[1]
        seqs, beam_scores, finished, seq_len = m_seqs[midx], m_scores[midx], m_fin[midx], m_len[midx]
        cur_len += 1
        if early_stopping == "never" and length_penalty > 0.0:
            best_len = max_length - prompt_len
        else:
            best_len = cur_len - prompt_len
        best_running = run_scores[0] / (best_len ** length_penalty)
        worst = torch.where(finished, beam_scores.min(), torch.tensor(-1.0e9))
        unsatisfied = unsatisfied and bool(torch.any(best_running > worst))
        open_beam = not (bool(finished.all()) and early_stopping is True)
        if not (unsatisfied and open_beam and not bool(hits.all())):
            break
    ids = seqs[0, 1:int(seq_len[0])].tolist()
    if ids and ids[-1] == eos:
        ids = ids[:-1]
    return ids, float(beam_scores[0])


def generate(model, src_ids, max_new, num_beams=None):
    """generate() with the folder's generation_config (num_beams from it unless given)."""
    k = num_beams or (getattr(model, "generation_config", {}) or {}).get("num_beams", 1)
    return greedy(model, src_ids, max_new) if k == 1 else beam_search(model, src_ids, k, max_new)[0]


# --- tokenizer
class Tokenizer:
    SPECIALS = ("</s>", "<unk>", "<pad>")

    def __init__(self, folder):
        import sentencepiece as spm
        with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
            self.vocab = json.load(f)
        # separate_vocabs: the target's ids are target_vocab.json's
        tv = os.path.join(folder, "target_vocab.json")
        self.tvocab = self.vocab
        if os.path.exists(tv):
            with open(tv, encoding="utf-8") as f:
                self.tvocab = json.load(f)
        self.inv = {v: k for k, v in self.tvocab.items()}
        self.src = spm.SentencePieceProcessor(model_file=os.path.join(folder, "source.spm"))
        self.tgt = spm.SentencePieceProcessor(model_file=os.path.join(folder, "target.spm"))
        self.eos = self.vocab["</s>"]
        self.unk = self.vocab["<unk>"]
        self.special_ids = {self.tvocab[s] for s in self.SPECIALS if s in self.tvocab}

    def encode(self, text):
        code = []
        if text.startswith(">>") and text.find("<<") != -1:
            end = text.find("<<")
            code, text = [text[:end + 2]], text[end + 2:]
        pieces = code + self.src.encode_as_pieces(text)
        return [self.vocab.get(p, self.unk) for p in pieces] + [self.eos]

    def decode(self, ids):
        pieces = [self.inv[i] for i in ids if i not in self.special_ids and i in self.inv]
        return self.tgt.decode_pieces(pieces).replace("\u2581", " ").strip()


def translate(model, tok, text, max_new, num_beams=1):
    return tok.decode(generate(model, tok.encode(text), max_new, num_beams))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: marian_ref.py FOLDER [TEXT...]: greedy / beam translations with the reference", file=sys.stderr)
        sys.exit(2)
    m = load_folder(sys.argv[1])
    t = Tokenizer(sys.argv[1])
    for text in sys.argv[2:] or ["The house sees a small dog."]:
        ids = t.encode(text)
        g = greedy(m, ids, 20)
        b, s = beam_search(m, ids, 4, 20)
        print("%s\n  src %s\n  greedy %s %r\n  beam4 %s %.5f %r" % (text, ids, g, t.decode(g), b, s, t.decode(b)))
