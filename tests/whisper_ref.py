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


# ------------------------------------------------------------------ generation (WhisperForConditionalGeneration.generate)
#
# transformers 5.12's generation_whisper.py for one recording (batch 1), at its defaults (temperature None:
# no fallback, condition_on_prev_tokens off, no prompt_ids, no no_speech_threshold):
#   features        up to one window: log_mel (padded); longer: log_mel_long, the whole recording's
#                   (the processor called with truncation=False, padding="longest");
#   prompt          _retrieve_init_tokens (forced_decoder_ids unless a language or task is given; the
#                   language given or found by detect_language; the task; <|notimestamps|> without timestamps);
#   processors      SuppressTokensAtBeginLogitsProcessor (begin_suppress_tokens at the first new token),
#                   SuppressTokensLogitsProcessor (suppress_tokens), WhisperTimeStampLogitsProcessor, in
#                   that order, after generate()'s own (none for these folders);
#   windows         the seek loop with _retrieve_segment's segments and offsets;
#   lengths         _set_max_new_tokens_and_length: max_length + min(T // 2 - 1, len(prompt) - 1), at most T.

TIME_PRECISION = 0.02
FEATURE_PRECISION = 0.01
INPUT_STRIDE = 2

# transformers' LANGUAGES codes, in the order of the language tokens (a few names for the tests)
LANGUAGE_NAMES = {"english": "en", "german": "de", "french": "fr", "spanish": "es", "castilian": "es"}


def log_mel_long(samples, fe):
    """(feature_size, len(samples) // hop_length) float32 features of a whole recording (no padding)."""
    n_fft, hop = fe["n_fft"], fe["hop_length"]
    x = np.asarray(samples, dtype=np.float32).astype(np.float64)
    n = len(x)
    x = np.pad(x, n_fft // 2, mode="reflect")
    frames = n // hop
    idx = np.arange(frames)[:, None] * hop + np.arange(n_fft)[None, :]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n_fft) / n_fft)
    power = np.abs(np.fft.rfft(x[idx] * window[None, :], axis=1)) ** 2
    mel = power @ mel_filters(n_fft, fe["feature_size"], fe["sampling_rate"])
    logs = np.log10(np.maximum(mel, 1e-10)).T
    logs = np.maximum(logs, logs.max() - 8.0)
    return ((logs + 4.0) / 4.0).astype(np.float32)


def generation_config(folder):
    """The folder's generation settings as WhisperForConditionalGeneration.generate reads them."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    p = os.path.join(folder, "generation_config.json")
    g = dict(cfg)
    if os.path.exists(p):
        with open(p) as f:
            g = json.load(f)
    out = {"sot": g.get("decoder_start_token_id", cfg.get("decoder_start_token_id")),
           "eos": g.get("eos_token_id", cfg.get("eos_token_id")),
           "no_timestamps": g.get("no_timestamps_token_id"), "lang_to_id": g.get("lang_to_id"),
           "task_to_id": g.get("task_to_id"), "is_multilingual": g.get("is_multilingual"),
           "forced_decoder_ids": g.get("forced_decoder_ids") or cfg.get("forced_decoder_ids"),
           "begin_suppress": g.get("begin_suppress_tokens"), "suppress": g.get("suppress_tokens"),
           "max_initial": g.get("max_initial_timestamp_index"), "max_length": g.get("max_length") or 20,
           "max_new_tokens": g.get("max_new_tokens"), "num_beams": g.get("num_beams") or 1,
           "length_penalty": g.get("length_penalty", 1.0), "early_stopping": g.get("early_stopping", False),
           "return_timestamps": g.get("return_timestamps") or False, "T": cfg["max_target_positions"]}
    return out


def process(g, input_ids, scores, begin_index, timestamps):
    """The three Whisper processors over scores (K, V) of sequences input_ids (K, n), in generate()'s order."""
    scores = scores.clone()
    n = input_ids.shape[1]
    if g["begin_suppress"] and n == begin_index:
        scores[:, g["begin_suppress"]] = -float("inf")
    if g["suppress"]:
        scores[:, g["suppress"]] = -float("inf")
    if not timestamps:
        return scores
    tb = g["no_timestamps"] + 1
    eos = g["eos"]
    scores[:, g["no_timestamps"]] = -float("inf")
    for k in range(input_ids.shape[0]):
        seq = input_ids[k, begin_index:].tolist()
        last = len(seq) >= 1 and seq[-1] >= tb
        pen = len(seq) < 2 or seq[-2] >= tb
        if last:
            if pen:
                scores[k, tb:] = -float("inf")
            else:
                scores[k, :eos] = -float("inf")
        stamps = [t for t in seq if t >= tb]
        if stamps:
            tl = stamps[-1] if last and not pen else stamps[-1] + 1
            scores[k, tb:tl] = -float("inf")
    if n == begin_index:
        scores[:, :tb] = -float("inf")
        if g["max_initial"] is not None:
            scores[:, tb + g["max_initial"] + 1:] = -float("inf")
    lp = torch.log_softmax(scores.float(), dim=-1)
    for k in range(input_ids.shape[0]):
        if lp[k, tb:].logsumexp(dim=-1) > lp[k, :tb].max():
            scores[k, :tb] = -float("inf")
    return scores


@torch.no_grad()
def _greedy(model, mem, g, prompt, max_new, timestamps):
    seq = list(prompt)
    max_length = len(prompt) + max_new
    while len(seq) < max_length:
        logits = model.decode(mem, torch.tensor([seq]))[:, -1].float()
        tok = int(torch.argmax(process(g, torch.tensor([seq]), logits, len(prompt), timestamps), dim=-1)[0])
        seq.append(tok)
        if tok == g["eos"]:
            break
    out = seq[len(prompt):]
    return out[:-1] if out and out[-1] == g["eos"] else out


@torch.no_grad()
def _beam(model, mem, g, prompt, max_new, timestamps, K):
    """transformers 5.12's _beam_search with a prompt (as marian_ref.beam_search, prefilled)."""
    eos, lpen, early = g["eos"], g["length_penalty"], g["early_stopping"]
    memK = mem.expand(K, -1, -1)
    prompt_len = cur_len = len(prompt)
    max_length = prompt_len + max_new
    keep_n = 2 * K
    top_mask = torch.arange(keep_n) < K
    running = torch.full((K, max_length), eos, dtype=torch.long)
    running[:, :prompt_len] = torch.tensor(prompt)
    seqs = running.clone()
    seq_len = torch.full((K,), prompt_len, dtype=torch.long)
    run_scores = torch.zeros(K)
    run_scores[1:] = -1e9
    beam_scores = torch.full((K,), -1e9)
    finished = torch.zeros(K, dtype=torch.bool)
    unsatisfied = True
    while True:
        logits = model.decode(memK, running[:, :cur_len])[:, -1].float()
        V = logits.shape[-1]
        lp = process(g, running[:, :cur_len], torch.log_softmax(logits, dim=-1), prompt_len, timestamps)
        lp = (lp + run_scores[:, None]).reshape(-1)
        top_lp, top_idx = torch.topk(lp, keep_n)
        parent, tok = top_idx // V, top_idx % V
        top_seqs = running[parent].clone()
        top_seqs[:, cur_len] = tok
        top_len = torch.full((keep_n,), cur_len + 1, dtype=torch.long)
        hits = (tok == eos) | (cur_len + 1 >= max_length)
        trl = top_lp + hits.to(torch.float32) * -1.0e9
        nidx = torch.topk(trl, K)[1]
        running, run_scores = top_seqs[nidx], trl[nidx]
        just = hits & top_mask
        fl = top_lp / ((cur_len + 1 - prompt_len) ** lpen)
        fl = fl + float(bool(finished.all()) and early is True) * -1.0e9
        fl = fl + float(not unsatisfied) * -1.0e9
        fl = fl + (~just).to(torch.float32) * -1.0e9
        m_seqs = torch.cat([seqs, top_seqs])
        m_scores = torch.cat([beam_scores, fl])
        m_fin = torch.cat([finished, just])
        m_len = torch.cat([seq_len, top_len])
        midx = torch.topk(m_scores, K)[1]
        seqs, beam_scores, finished, seq_len = m_seqs[midx], m_scores[midx], m_fin[midx], m_len[midx]
        cur_len += 1
        best_len = cur_len - prompt_len
        best_running = run_scores[0] / (best_len ** lpen)
        worst = torch.where(finished, beam_scores.min(), torch.tensor(-1.0e9))
        unsatisfied = unsatisfied and bool(torch.any(best_running > worst))
        open_beam = not (bool(finished.all()) and early is True)
        if not (unsatisfied and open_beam and not bool(hits.all())):
            break
    ids = seqs[0, prompt_len:int(seq_len[0])].tolist()
    return ids[:-1] if ids and ids[-1] == eos else ids


@torch.no_grad()
def detect_language(model, g, window):
    """detect_language: the argmax over lang_to_id's ids after <|startoftranscript|>."""
    logits = forward_logits(model, window, [g["sot"]])[-1]
    ids = sorted(g["lang_to_id"].values())
    masked = np.full_like(logits, -np.inf)
    masked[ids] = logits[ids]
    return int(np.argmax(masked))


def _window(feats, seek, num, F):
    w = np.zeros((feats.shape[0], F), dtype=np.float32)
    w[:, :num] = feats[:, seek:seek + num]
    return w


def _segments(seq, tb, time_offset, num):
    """_retrieve_segment: [(start, end, tokens)], frames to seek by."""
    ts = [t >= tb for t in seq]
    single = ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(seq) - 1) if ts[i] and ts[i + 1]]
    if cuts:
        segs = []
        if single:
            cuts.append(len(seq))
        else:
            cuts[-1] += 1
        last = 0
        for i, cur in enumerate(cuts):
            is_last = i == len(cuts) - 1
            sl = seq[last:cur]
            end = sl[-1] if not is_last or single else sl[-2]
            segs.append((time_offset + (sl[0] - tb) * TIME_PRECISION, time_offset + (end - tb) * TIME_PRECISION, sl))
            last = cur
        return segs, num if single else (seq[last - 2] - tb) * INPUT_STRIDE
    last_pos = int(num * FEATURE_PRECISION / TIME_PRECISION)
    stamps = [t for t in seq if t >= tb]
    if stamps and stamps[-1] != tb:
        last_pos = stamps[-1] - tb
    return [(time_offset, time_offset + last_pos * TIME_PRECISION, seq)], num


def transcribe(model, folder, samples, language=None, task=None, timestamps=None, beams=None):
    """dict(prompt, language_id, segments [(start, end, ids)], windows) as generate() gives them."""
    g = generation_config(folder)
    fe = model.fe
    window_samples = fe["chunk_length"] * fe["sampling_rate"]
    F = window_samples // fe["hop_length"]
    T = g["T"]
    short = len(samples) <= window_samples
    feats = log_mel(samples, fe) if short else log_mel_long(samples, fe)
    total = feats.shape[1]
    if timestamps is None:
        timestamps = g["return_timestamps"]
    if not short:
        timestamps = True
    if timestamps and g["no_timestamps"] is None:
        raise ValueError("no no_timestamps_token_id")
    if g["is_multilingual"] is False and (language or task):
        raise ValueError("English-only")
    init = [g["sot"]]
    if task is None and language is None and g["forced_decoder_ids"] and g["forced_decoder_ids"][0][0] == 1:
        for i, (k, v) in enumerate(g["forced_decoder_ids"]):
            if k != i + 1:
                break
            init.append(v)
    undefined = len(init) <= 1 or init[1] is None
    lang = None
    if language is not None:
        code = LANGUAGE_NAMES.get(language.lower(), language.lower())
        lang = g["lang_to_id"]["<|%s|>" % code]
    elif g["lang_to_id"] is not None and undefined:
        lang = detect_language(model, g, _window(feats, 0, min(total, F), F))
    if lang is not None:
        if len(init) > 1:
            init[1] = lang
        else:
            init.append(lang)
    tids = list((g["task_to_id"] or {}).values())
    if task is not None:
        tid = g["task_to_id"][task]
        init.append(tid)
        init = [tid if t in tids else t for t in init]
    elif language is not None and g["task_to_id"] is not None:
        if not any(t in init for t in tids):
            init.append(g["task_to_id"]["transcribe"])
    if not timestamps and g["no_timestamps"] is not None and init[-1] != g["no_timestamps"]:
        init.append(g["no_timestamps"])
    elif timestamps and init[-1] == g["no_timestamps"]:
        init = init[:-1]
    init = [t for t in init if t is not None]
    if g["max_new_tokens"]:
        max_new = g["max_new_tokens"]
    else:
        max_new = min(g["max_length"] + min(T // 2 - 1, len(init) - 1), T) - len(init)
    K = beams or g["num_beams"]
    tb = g["no_timestamps"] + 1 if g["no_timestamps"] is not None else model.config["vocab_size"] + 1
    seek, segments, windows = 0, [], 0
    while seek < total:
        num = min(total - seek, F)
        mem = model.encode(_window(feats, seek, num, F)[None])
        seq = (_greedy(model, mem, g, init, max_new, timestamps) if K == 1
               else _beam(model, mem, g, init, max_new, timestamps, K))
        windows += 1
        time_offset = seek * TIME_PRECISION / INPUT_STRIDE
        segs, offset = _segments(seq, tb, time_offset, num)
        segments += segs
        seek += offset
    return {"prompt": init, "language_id": lang if len(init) > 1 else None, "segments": segments, "windows": windows}
