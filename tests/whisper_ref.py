#!/usr/bin/python3
"""A reference of Hugging Face's Whisper (WhisperFeatureExtractor and WhisperForConditionalGeneration),
written here from their definitions in numpy (features, float64) and PyTorch (the model, float32).

Runs under Debian's /usr/bin/python3 (PyTorch 1.13, numpy): no transformers. Held against transformers
5.12.1 by tools/check_whisper_hf.py (run it with ../shared/tools/hf_python.sh).

Features (WhisperFeatureExtractor: the folder's preprocessor_config.json, or processor_config.json's
"feature_extractor"): the audio padded with padding_value or cut to chunk_length * sampling_rate samples;
frames as torch.stft(center=True) takes them: reflect padding of n_fft // 2 on each side, frame t =
samples [t hop, t hop + n_fft) times the periodic Hann window, |rfft|^2, the last frame dropped;
mel_filter_bank(num_frequency_bins = n_fft // 2 + 1, feature_size filters, 0 .. 8000 Hz, norm slaney,
mel_scale slaney) applied; log10 of max(x, 1e-10); max(x, x.max() - 8); (x + 4) / 4. In float64 here,
as the extractor's numpy path computes (its torch path is float32: docs/audio.md gives the gaps).

The model (config.json keys in brackets): conv1 = Conv1d([num_mel_bins], d, 3, padding 1) and conv2 =
Conv1d(d, d, 3, stride 2, padding 1), each followed by GELU (erf); + model.encoder.embed_positions.weight
([max_source_positions] rows; transformers initialises it with sinusoids(), computed here when a file
lacks it); pre-LN encoder layers (x + SelfAttn(LN(x)); x + FFN(LN(x)), FFN = fc2(act(fc1))) and
model.encoder.layer_norm. The decoder: embed_tokens(ids) + embed_positions.weight[0 .. T) (no scale: 5.12
never applies embed_scale), pre-LN layers with causal self-attention and cross-attention over the
encoder's output, model.decoder.layer_norm, logits = x @ embed_tokens.T (proj_out tied; proj_out.weight
when [tie_word_embeddings] is false). k_proj has no bias; attention scales q by head_dim ** -0.5.
"""
import json
import math
import os
import sys

sys.dont_write_bytecode = True
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_ref  # noqa: E402

LN_EPS = 1e-5
ACTIVATIONS = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu, "swish": F.silu}


# ------------------------------------------------------------------ features

def extractor_settings(folder):
    """The feature extractor's settings of a folder (dict), as WhisperFeatureExtractor reads them."""
    p = os.path.join(folder, "preprocessor_config.json")
    if os.path.exists(p):
        with open(p) as f:
            fe = json.load(f)
    else:
        with open(os.path.join(folder, "processor_config.json")) as f:
            fe = json.load(f)["feature_extractor"]
    out = {"feature_size": 80, "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400,
           "padding_value": 0.0}
    out.update({k: fe[k] for k in out if k in fe})
    return out


def hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-300) / 1000.0) * (27.0 / np.log(6.4)), 3.0 * f / 200.0)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= 15.0, 1000.0 * np.exp(np.log(6.4) / 27.0 * (m - 15.0)), 200.0 * m / 3.0)


def mel_filters(n_fft, n_mels, sampling_rate, f_min=0.0, f_max=8000.0):
    """(n_fft // 2 + 1, n_mels) Slaney filters with Slaney's area norm, float64."""
    bins = n_fft // 2 + 1
    edges = mel_to_hz(np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2))
    fft_freqs = np.linspace(0, sampling_rate // 2, bins)
    slopes = edges[None, :] - fft_freqs[:, None]
    diff = np.diff(edges)
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    filt = np.maximum(0.0, np.minimum(down, up))
    return filt * (2.0 / (edges[2:n_mels + 2] - edges[:n_mels]))[None, :]


def log_mel(samples, fe):
    """(feature_size, chunk_length * sampling_rate // hop_length) float32 features of the first window."""
    n_samples = fe["chunk_length"] * fe["sampling_rate"]
    n_fft, hop = fe["n_fft"], fe["hop_length"]
    x = np.full(n_samples, fe["padding_value"], dtype=np.float64)
    s = np.asarray(samples, dtype=np.float32)[:n_samples].astype(np.float64)
    x[:len(s)] = s
    x = np.pad(x, n_fft // 2, mode="reflect")
    frames = n_samples // hop
    idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n_fft) / n_fft)
    power = np.abs(np.fft.rfft(x[idx] * window[None, :], axis=1)) ** 2          # (frames, bins)
    mel = power @ mel_filters(n_fft, fe["feature_size"], fe["sampling_rate"])  # (frames, mels)
    logs = np.log10(np.maximum(mel, 1e-10)).T
    logs = np.maximum(logs, logs.max() - 8.0)
    return ((logs + 4.0) / 4.0).astype(np.float32)


# ------------------------------------------------------------------ the model

def sinusoids(length, channels):
    """modeling_whisper.sinusoids in float32."""
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2))
    t = torch.arange(length).view(-1, 1) * inv.view(1, -1)
    return torch.cat([t.sin(), t.cos()], dim=1)


class Whisper:
    """Weights (float32) + config of one folder; encode/decode as WhisperForConditionalGeneration."""

    def __init__(self, config, weights):
        c = dict(config)
        if c.get("model_type") != "whisper":
            raise ValueError("model_type %r is not whisper" % c.get("model_type"))
        self.config = c
        self.d = c["d_model"]
        self.act = ACTIVATIONS[c.get("activation_function", "gelu")]
        self.w = dict(weights)
        S = c.get("max_source_positions", 1500)
        if "model.encoder.embed_positions.weight" not in self.w:
            self.w["model.encoder.embed_positions.weight"] = sinusoids(S, self.d)
        self.emb = self.w["model.decoder.embed_tokens.weight"]
        self.lm_head = self.emb if c.get("tie_word_embeddings", True) else self.w["proj_out.weight"]
        self.pad = c.get("pad_token_id", 50256)
        self.eos = c.get("eos_token_id", 50256)
        self.start = c.get("decoder_start_token_id", 50257)
        self.vocab_size = c["vocab_size"]

    def _lin(self, x, name, bias=True):
        b = self.w.get(name + ".bias") if bias else None
        return F.linear(x, self.w[name + ".weight"], b)

    def _ln(self, x, name):
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], LN_EPS)

    def _attn(self, x, kv, name, heads, mask):
        B, T, d = x.shape
        S = kv.shape[1]
        hd = d // heads
        q = (self._lin(x, name + ".q_proj") * hd ** -0.5).view(B, T, heads, hd).transpose(1, 2)
        k = self._lin(kv, name + ".k_proj", bias=False).view(B, S, heads, hd).transpose(1, 2)
        v = self._lin(kv, name + ".v_proj").view(B, S, heads, hd).transpose(1, 2)
        s = q @ k.transpose(2, 3)
        if mask is not None:
            s = s + mask
        o = torch.softmax(s, dim=-1) @ v
        return self._lin(o.transpose(1, 2).reshape(B, T, d), name + ".out_proj")

    @torch.no_grad()
    def encode(self, features):
        """features (B, mels, frames) float32 -> (B, frames / 2, d)."""
        c = self.config
        f = torch.as_tensor(np.asarray(features, dtype=np.float32))
        x = F.gelu(F.conv1d(f, self.w["model.encoder.conv1.weight"], self.w["model.encoder.conv1.bias"], padding=1))
        x = F.gelu(F.conv1d(x, self.w["model.encoder.conv2.weight"], self.w["model.encoder.conv2.bias"], stride=2,
                            padding=1))
        x = x.permute(0, 2, 1) + self.w["model.encoder.embed_positions.weight"][None]
        H = c["encoder_attention_heads"]
        for i in range(c["encoder_layers"]):
            p = "model.encoder.layers.%d." % i
            h = self._ln(x, p + "self_attn_layer_norm")
            x = x + self._attn(h, h, p + "self_attn", H, None)
            h = self._ln(x, p + "final_layer_norm")
            x = x + self._lin(self.act(self._lin(h, p + "fc1")), p + "fc2")
        return self._ln(x, "model.encoder.layer_norm")

    @torch.no_grad()
    def decode(self, memory, tgt):
        """memory (B, S, d), tgt long (B, T) -> logits (B, T, V)."""
        c = self.config
        T = tgt.shape[1]
        x = self.emb[tgt] + self.w["model.decoder.embed_positions.weight"][:T][None]
        causal = torch.triu(torch.full((T, T), torch.finfo(torch.float32).min), diagonal=1)[None, None]
        H = c["decoder_attention_heads"]
        for i in range(c["decoder_layers"]):
            p = "model.decoder.layers.%d." % i
            h = self._ln(x, p + "self_attn_layer_norm")
            x = x + self._attn(h, h, p + "self_attn", H, causal)
            h = self._ln(x, p + "encoder_attn_layer_norm")
            x = x + self._attn(h, memory, p + "encoder_attn", H, None)
            h = self._ln(x, p + "final_layer_norm")
            x = x + self._lin(self.act(self._lin(h, p + "fc1")), p + "fc2")
        x = self._ln(x, "model.decoder.layer_norm")
        return F.linear(x, self.lm_head)


def load_folder(path):
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    m = Whisper(cfg, marian_ref.load_weights(path))
    m.fe = extractor_settings(path)
    return m


def forward_logits(model, features, tgt_ids):
    """features (mels, frames) of one window, tgt ids list -> logits (T, V) numpy float32."""
    mem = model.encode(np.asarray(features, dtype=np.float32)[None])
    return model.decode(mem, torch.tensor([tgt_ids], dtype=torch.long))[0].numpy()


def forward_audio(model, samples, tgt_ids):
    return forward_logits(model, log_mel(samples, model.fe), tgt_ids)
