#!/usr/bin/python3
"""Trains the Whisper demo model on the CPU: a tiny WhisperForConditionalGeneration that hears an
English number from 0 to 99 spoken by espeak-ng and writes its digits, as Whisper does (" 42").

Run with Debian's /usr/bin/python3 (python3-torch, python3-soundfile, espeak-ng, libespeak-ng1) after
building vkformer's library (audio is resampled to 16 kHz through the binding, libsoxr, so the
training features are what vkformer computes from such a file):

    /usr/bin/python3 tools/train_whisper_demo.py [--out models/whisper-numbers] [--minutes 20]
        [--library build/libvkformer.so] [--seed 2026] [--threads 1] [--pool-cache FILE.npz]

Speech: espeak-ng (Debian's 1.51) says the number in words ("forty two"; above 100, half the time
the British "three hundred and forty two") with an English accent and a voice variant
(`-v en-us+f3`), a speed in words per minute (`-s`) and a pitch (`-p`); its 22,050 Hz samples are
resampled to 16 kHz and stored as 16-bit samples.

Held out, never trained on:
  numbers  --held-numbers (10) two-word numbers such as "forty seven" (drawn with the seed; every word
           in them is heard in training);
  voices   the accents en-029 and en-us-nyc and the variants m4, f4 and klatt3: a held-out clip has a
           held-out accent, a held-out variant, or both;
  speeds   150, 170, 190 and 215 words per minute (training uses 140, 160, 180, 200, 225, 250).
The held-out set (tests/data/whisper_numbers_heldout.tsv, --heldout) is 600 clips: every clip has a
held-out voice and speed; the even ones say a held-out number. Each line: id, number, the words
spoken, espeak voice, speed, pitch: `espeak-ng -v VOICE -s SPEED -p PITCH WORDS` makes the clip again
(deterministic for a given espeak-ng version).

Training: a pool of --pool clips (default 6000) is synthesized first (by libespeak-ng in this process,
5 times faster than starting the program per clip; the held-out clips by the espeak-ng program, read
by vkformer.read_audio as `vkformer` reads a file); each batch then draws clips from the pool and
changes them: a silence of 0..0.25 s before the speech, a gain of -20..+3 dB (clipped to [-1, 1]),
and on half the clips white noise 20..50 dB below the speech. Features: WhisperFeatureExtractor's
(torch.stft in float32 for the batches; tests/whisper_ref.py's float64 ones, which vkformer equals
bit for bit, for the held-out clips) over a 2 s window: chunk_length 2, 200 frames,
max_source_positions 100. Target: <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|> " 42"
<|endoftext|>, the loss on every position after the first (so the model also predicts <|en|> after
<|startoftranscript|>, which is how Whisper detects the language), plus 0.5 x a CTC loss from the
encoder's frames to the spoken words through a linear head used in training only (not written). AdamW
(lr 1.5e-3, betas 0.9/0.98, weight decay 0.01), 100 warmup steps, then cosine decay over the time left
after the synthesis (--minutes covers the synthesis and the training; --steps N decays over N steps
instead, to repeat a run's step count); batches of 32; gradients clipped at 1.0;
torch.set_num_threads(--threads), 1 by default: the machine is shared. The time-based schedule makes
the result depend on the machine's speed and load: the log says how many steps a run took.
--max-number 999 --chunk-length 3 --held-numbers 100 is the harder task (0..999, a 3 s window).

Written: --out as a Hugging Face Whisper folder (config.json, generation_config.json,
preprocessor_config.json, the byte-level BPE tokenizer's slow files as openai/whisper-* ship them:
vocab.json, merges.txt, added_tokens.json, special_tokens_map.json, tokenizer_config.json; and
model.safetensors, F32), then the held-out accuracy of greedy decoding in PyTorch with
tests/whisper_ref.py on the written folder (exact match of the transcript), and the test data: three
held-out clips as 16 kHz WAV files under --test-dir with the teacher-forced argmax of the reference
(tests/data/whisper_numbers/expected.tsv). tools/eval_whisper_demo.py measures the same through
vkformer, tools/check_whisper_demo_hf.py through Hugging Face transformers.
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import gen_marian  # noqa: E402  (write_safetensors)
import whisper_ref  # noqa: E402

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
        "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]

ACCENTS_TRAIN = ["en", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd"]
ACCENTS_HELD = ["en-029", "en-us-nyc"]
VARIANTS_TRAIN = ["", "m1", "m2", "m3", "m5", "m6", "m7", "f1", "f2", "f3", "f5", "klatt", "klatt2"]
VARIANTS_HELD = ["m4", "f4", "klatt3"]
SPEEDS_TRAIN = [140, 160, 180, 200, 225, 250]
SPEEDS_HELD = [150, 170, 190, 215]
PITCH = (20, 80)

RATE = 16000
CHUNK_SECONDS = 3
WINDOW = CHUNK_SECONDS * RATE
QUIET = 8                               # -72 dBFS in 16-bit samples
MAX_LEAD = int(0.25 * RATE)
MAX_SPEECH = WINDOW - MAX_LEAD          # longer clips are not used (the window would cut them)
HELD_NUMBERS = 100
HELDOUT_CLIPS = 600

# ------------------------------------------------------------------ the tokenizer

LANGS = ["en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi",
         "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la",
         "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy",
         "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be",
         "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
         "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"]


def byte_chars():
    """GPT-2's bytes_to_unicode, in the order of its vocabulary's first 256 ids."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs], dict(zip(bs, (chr(c) for c in cs)))


BYTE_TOKENS, BYTE_CHAR = byte_chars()
SPACE = BYTE_CHAR[ord(" ")]             # "Ġ", id 220 as in GPT-2
MERGES = [(SPACE, str(d)) for d in range(10)]   # " 0" .. " 9": Whisper's text starts with a space
BPE_TOKENS = BYTE_TOKENS + [a + b for a, b in MERGES]
VOCAB = {t: i for i, t in enumerate(BPE_TOKENS)}
SPECIAL_NAMES = (["<|endoftext|>", "<|startoftranscript|>"] + ["<|%s|>" % c for c in LANGS] +
                 ["<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
                  "<|notimestamps|>"])
SPECIAL = {t: len(BPE_TOKENS) + i for i, t in enumerate(SPECIAL_NAMES)}
VOCAB_SIZE = len(BPE_TOKENS) + len(SPECIAL_NAMES)
EOT, SOT = SPECIAL["<|endoftext|>"], SPECIAL["<|startoftranscript|>"]
PROMPT = [SOT, SPECIAL["<|en|>"], SPECIAL["<|transcribe|>"], SPECIAL["<|notimestamps|>"]]
MAX_TARGET = 32
ID_TOKEN = {i: t for t, i in list(VOCAB.items()) + list(SPECIAL.items())}


def text_ids(n):
    """The ids of " 342": the merged space-and-first-digit, then one byte token per digit."""
    s = str(n)
    return [VOCAB[SPACE + s[0]]] + [VOCAB[c] for c in s[1:]]


def ids_text(ids):
    """Byte-level BPE decoding of plain (non-special) ids; None if a special id is among them."""
    inverse = {c: b for b, c in BYTE_CHAR.items()}
    out = bytearray()
    for i in ids:
        if i >= len(BPE_TOKENS):
            return None
        out += bytes(inverse[c] for c in BPE_TOKENS[i])
    return out.decode("utf-8", errors="replace")


def write_tokenizer(out):
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(VOCAB, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join("%s %s\n" % m for m in MERGES))
    with open(os.path.join(out, "added_tokens.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for t, i in SPECIAL.items() if t != "<|endoftext|>"}, f, indent=2)
    eot = {"content": "<|endoftext|>", "lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    with open(os.path.join(out, "special_tokens_map.json"), "w", encoding="utf-8") as f:
        json.dump({"additional_special_tokens": SPECIAL_NAMES, "bos_token": eot, "eos_token": eot,
                   "pad_token": "<|endoftext|>", "unk_token": eot}, f, indent=2)
    decoder = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": True} for t, i in SPECIAL.items()}
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
                   "additional_special_tokens": SPECIAL_NAMES, "bos_token": "<|endoftext|>",
                   "clean_up_tokenization_spaces": True, "eos_token": "<|endoftext|>", "errors": "replace",
                   "language": "english", "model_max_length": 1024, "pad_token": "<|endoftext|>",
                   "predict_timestamps": False, "processor_class": "WhisperProcessor", "return_attention_mask": False,
                   "task": "transcribe", "tokenizer_class": "WhisperTokenizer", "unk_token": "<|endoftext|>"},
                  f, indent=2, ensure_ascii=False)


# ------------------------------------------------------------------ speech

WORDS = ONES + TENS[2:] + ["hundred", "and"]


def word_ids(n, british_and):
    """The spoken words as CTC targets, 1.. (0 is the blank)."""
    return [WORDS.index(w) + 1 for w in below_thousand_words(n, british_and).split()]


def below_thousand_words(n, british_and):
    words = []
    if n >= 100:
        words += [ONES[n // 100], "hundred"]
        n %= 100
        if n and british_and:
            words.append("and")
    if n >= 20:
        words.append(TENS[n // 10])
        n %= 10
    if n > 0 or not words:
        words.append(ONES[n])
    return " ".join(words)


class Speaker:
    """espeak-ng speech at 16 kHz, 16-bit, its quiet tail cut. say(): the espeak-ng program to a
    temporary WAV, read back through vkformer.read_audio (libsoxr), as `vkformer` reads such a file
    (the held-out clips; the TSV gives the command). say_fast(): the same library, libespeak-ng, called
    in this process (no program started per clip: 5 times faster), its samples resampled by
    vkformer.resample (the training pool; its clips are not sample for sample the program's)."""

    def __init__(self, library):
        import vkformer
        self.vkformer = vkformer
        self.library = library
        self.dir = tempfile.mkdtemp(prefix="whisper-numbers-")
        self.path = os.path.join(self.dir, "clip.wav")
        self.lib = None

    @staticmethod
    def _cut(x):
        q = np.clip(np.round(x.astype(np.float64) * 32768.0), -32768, 32767).astype(np.int16)
        loud = np.nonzero(np.abs(q) > QUIET)[0]      # the quiet tail espeak-ng ends with goes
        return q[:loud[-1] + 1] if len(loud) else q[:0]

    def say(self, words, voice, speed, pitch):
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", self.path, words],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        x, rate = self.vkformer.read_audio(self.path, RATE, library=self.library)
        if rate != 22050:
            raise SystemExit("espeak-ng wrote %d Hz, expected 22050" % rate)
        return self._cut(x)

    def say_fast(self, words, voice, speed, pitch):
        import ctypes
        if self.lib is None:
            self.lib = ctypes.CDLL("libespeak-ng.so.1")
            self.rate = self.lib.espeak_Initialize(2, 0, None, 0)       # AUDIO_OUTPUT_SYNCHRONOUS
            if self.rate <= 0:
                raise SystemExit("libespeak-ng: espeak_Initialize failed")
            self.chunks = []

            def take(wav, n, events):
                if n > 0:
                    self.chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
                return 0
            self.callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                                             ctypes.c_void_p)(take)
            self.lib.espeak_SetSynthCallback(self.callback)
        self.chunks.clear()
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise SystemExit("libespeak-ng: no voice %r" % voice)
        self.lib.espeak_SetParameter(1, int(speed), 0)     # espeakRATE
        self.lib.espeak_SetParameter(3, int(pitch), 0)     # espeakPITCH
        text = words.encode()
        # flags espeakENDPAUSE, as the program passes
        if self.lib.espeak_Synth(text, len(text) + 1, 0, 0, 0, 0x1000, None, None) != 0:
            raise SystemExit("libespeak-ng: espeak_Synth failed")
        self.lib.espeak_Synchronize()
        x = np.concatenate(self.chunks).astype(np.float32) / 32768.0 if self.chunks else np.zeros(0, np.float32)
        return self._cut(self.vkformer.resample(x, self.rate, RATE, library=self.library))

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def voice_name(accent, variant):
    return accent + ("+" + variant if variant else "")


MAX_NUMBER = 999


def sample_number(rng, held):
    while True:
        r = rng.random()
        if MAX_NUMBER > 99:
            n = rng.randint(0, 9) if r < 0.15 else rng.randint(10, 99) if r < 0.45 else rng.randint(100, MAX_NUMBER)
        else:
            n = rng.randint(0, 9) if r < 0.2 else rng.randint(10, MAX_NUMBER)
        if n not in held:
            return n


def held_out_numbers(rng):
    """Three-digit numbers; below 100 (--max-number 99) two-digit ones of two words (forty seven), so that
    every word stays in training."""
    if MAX_NUMBER > 99:
        return rng.sample(range(100, MAX_NUMBER + 1), HELD_NUMBERS)
    return rng.sample([n for n in range(21, MAX_NUMBER + 1) if n % 10], HELD_NUMBERS)


def configure(max_number, chunk_seconds, held_numbers):
    global MAX_NUMBER, CHUNK_SECONDS, WINDOW, MAX_SPEECH, HELD_NUMBERS
    MAX_NUMBER, CHUNK_SECONDS, HELD_NUMBERS = max_number, chunk_seconds, held_numbers
    WINDOW = CHUNK_SECONDS * RATE
    MAX_SPEECH = WINDOW - MAX_LEAD
    FE["chunk_length"] = CHUNK_SECONDS


def heldout_specs(rng, held_numbers):
    """HELDOUT_CLIPS (id, number, words, voice, speed, pitch): a held-out voice and speed each; even
    ids say a held-out number (each three times), odd ids a number drawn as for training."""
    held = set(held_numbers)
    specs = []
    for i in range(HELDOUT_CLIPS):
        n = held_numbers[(i // 2) % len(held_numbers)] if i % 2 == 0 else sample_number(rng, held)
        kind = (i // 2) % 3      # held-out accent, held-out variant, both
        accent = rng.choice(ACCENTS_HELD if kind in (0, 2) else ACCENTS_TRAIN)
        variant = rng.choice(VARIANTS_HELD if kind in (1, 2) else VARIANTS_TRAIN)
        words = below_thousand_words(n, rng.random() < 0.5)
        specs.append(("h%03d" % i, n, words, voice_name(accent, variant), rng.choice(SPEEDS_HELD),
                      rng.randint(*PITCH)))
    return specs


def write_wav(path, samples):
    import soundfile
    soundfile.write(path, samples, RATE, subtype="PCM_16")


def read_wav(path):
    import soundfile
    x, rate = soundfile.read(path, dtype="float32")
    if rate != RATE:
        raise SystemExit("%s: %d Hz, expected %d" % (path, rate, RATE))
    return x


# ------------------------------------------------------------------ the model

FE = {"feature_size": 80, "sampling_rate": RATE, "hop_length": 160, "chunk_length": CHUNK_SECONDS, "n_fft": 400,
      "padding_value": 0.0}


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj = nn.Linear(d, d), nn.Linear(d, d, bias=False)
        self.v_proj, self.out_proj = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x, kv, mask=None):
        B, T, d = x.shape
        S, H = kv.shape[1], self.heads
        hd = d // H
        q = (self.q_proj(x) * hd ** -0.5).view(B, T, H, hd).transpose(1, 2)
        k = self.k_proj(kv).view(B, S, H, hd).transpose(1, 2)
        v = self.v_proj(kv).view(B, S, H, hd).transpose(1, 2)
        s = q @ k.transpose(2, 3)
        if mask is not None:
            s = s + mask
        return self.out_proj((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, d))


class Layer(nn.Module):
    def __init__(self, d, heads, ffn, cross):
        super().__init__()
        self.self_attn, self.self_attn_layer_norm = Attention(d, heads), nn.LayerNorm(d)
        if cross:
            self.encoder_attn, self.encoder_attn_layer_norm = Attention(d, heads), nn.LayerNorm(d)
        self.fc1, self.fc2, self.final_layer_norm = nn.Linear(d, ffn), nn.Linear(ffn, d), nn.LayerNorm(d)

    def forward(self, x, memory=None, mask=None):
        h = self.self_attn_layer_norm(x)
        x = x + self.self_attn(h, h, mask)
        if memory is not None:
            h = self.encoder_attn_layer_norm(x)
            x = x + self.encoder_attn(h, memory)
        return x + self.fc2(F.gelu(self.fc1(self.final_layer_norm(x))))


class Encoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.conv1 = nn.Conv1d(c["num_mel_bins"], d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.embed_positions = nn.Embedding(c["max_source_positions"], d)
        with torch.no_grad():
            self.embed_positions.weight.copy_(whisper_ref.sinusoids(c["max_source_positions"], d))
        self.embed_positions.weight.requires_grad_(False)       # as WhisperEncoder
        self.layers = nn.ModuleList(Layer(d, c["encoder_attention_heads"], c["encoder_ffn_dim"], False)
                                    for _ in range(c["encoder_layers"]))
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, f):
        x = F.gelu(self.conv2(F.gelu(self.conv1(f)))).permute(0, 2, 1) + self.embed_positions.weight[None]
        for layer in self.layers:
            x = layer(x)
        return self.layer_norm(x)


class Decoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], d)
        self.embed_positions = nn.Embedding(c["max_target_positions"], d)
        self.layers = nn.ModuleList(Layer(d, c["decoder_attention_heads"], c["decoder_ffn_dim"], True)
                                    for _ in range(c["decoder_layers"]))
        self.layer_norm = nn.LayerNorm(d)

    def forward(self, memory, ids):
        T = ids.shape[1]
        x = self.embed_tokens(ids) + self.embed_positions.weight[:T][None]
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)[None, None]
        for layer in self.layers:
            x = layer(x, memory, mask)
        return self.layer_norm(x) @ self.embed_tokens.weight.T      # proj_out tied


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.encoder, self.decoder = Encoder(c), Decoder(c)


class TinyWhisper(nn.Module):
    """WhisperForConditionalGeneration's layout: state_dict() names are the checkpoint's."""

    def __init__(self, c):
        super().__init__()
        self.model = Model(c)
        # linear and conv layers keep PyTorch's default initialisation (HF's N(0, 0.02) is made for wide
        # models); the embeddings N(0, 1 / d_model)
        d = c["d_model"]
        nn.init.normal_(self.model.decoder.embed_tokens.weight, std=d ** -0.5)
        nn.init.normal_(self.model.decoder.embed_positions.weight, std=d ** -0.5)

    def forward(self, features, ids):
        return self.model.decoder(self.model.encoder(features), ids)


def make_config(d, heads, layers, ffn):
    return {
        "activation_dropout": 0.0, "activation_function": "gelu", "apply_spec_augment": False,
        "architectures": ["WhisperForConditionalGeneration"], "attention_dropout": 0.0,
        "begin_suppress_tokens": [VOCAB[SPACE], EOT], "bos_token_id": EOT, "classifier_proj_size": 256,
        "d_model": d, "decoder_attention_heads": heads, "decoder_ffn_dim": ffn, "decoder_layerdrop": 0.0,
        "decoder_layers": layers, "decoder_start_token_id": SOT, "dropout": 0.0, "encoder_attention_heads": heads,
        "encoder_ffn_dim": ffn, "encoder_layerdrop": 0.0, "encoder_layers": layers, "eos_token_id": EOT,
        "init_std": 0.02, "is_encoder_decoder": True, "max_source_positions": WINDOW // 160 // 2,
        "max_target_positions": MAX_TARGET, "median_filter_width": 7, "model_type": "whisper",
        "num_hidden_layers": layers, "num_mel_bins": 80, "pad_token_id": EOT, "scale_embedding": False,
        "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
        "use_weighted_layer_sum": False, "vocab_size": VOCAB_SIZE,
    }


def suppress_tokens():
    """openai/whisper-*'s list where it is in this vocabulary: the symbol bytes it suppresses (the same
    GPT-2 byte ids) and <|startoftranscript|>, the tasks, <|startoflm|>, <|startofprev|>, <|nospeech|>."""
    symbols = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93]
    return symbols + [SPECIAL[t] for t in ("<|startoftranscript|>", "<|translate|>", "<|transcribe|>",
                                             "<|startoflm|>", "<|startofprev|>", "<|nospeech|>")]


def write_folder(out, model, config):
    os.makedirs(out, exist_ok=True)
    cfg = dict(config, suppress_tokens=suppress_tokens())
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    gen = {"begin_suppress_tokens": config["begin_suppress_tokens"], "bos_token_id": EOT,
           "decoder_start_token_id": SOT, "eos_token_id": EOT,
           # as openai/whisper-*: without language and task, detect the language, then transcribe
           "forced_decoder_ids": [[1, None], [2, SPECIAL["<|transcribe|>"]]], "is_multilingual": True,
           "lang_to_id": {"<|%s|>" % c: SPECIAL["<|%s|>" % c] for c in LANGS}, "max_length": MAX_TARGET,
           "no_timestamps_token_id": SPECIAL["<|notimestamps|>"], "pad_token_id": EOT,
           "prev_sot_token_id": SPECIAL["<|startofprev|>"], "return_timestamps": False,
           "suppress_tokens": suppress_tokens(),
           "task_to_id": {"transcribe": SPECIAL["<|transcribe|>"], "translate": SPECIAL["<|translate|>"]}}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)
    fe = {"chunk_length": CHUNK_SECONDS, "dither": 0.0, "feature_extractor_type": "WhisperFeatureExtractor",
          "feature_size": 80, "hop_length": 160, "n_fft": 400, "n_samples": WINDOW, "nb_max_frames": WINDOW // 160,
          "padding_side": "right", "padding_value": 0.0, "processor_class": "WhisperProcessor",
          "return_attention_mask": False, "sampling_rate": RATE}
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(fe, f, indent=2)
    write_tokenizer(out)
    tensors = {k: v.detach().to(torch.float32).contiguous().numpy() for k, v in model.state_dict().items()}
    gen_marian.write_safetensors(os.path.join(out, "model.safetensors"), tensors)


# ------------------------------------------------------------------ training

def augment(clip, rng):
    """int16 clip -> float32 samples: a lead of silence, a gain, sometimes noise."""
    x = clip.astype(np.float32) / 32768.0
    lead = int(rng.integers(0, MAX_LEAD + 1))
    x = np.concatenate([np.zeros(lead, np.float32), x])
    x *= np.float32(10.0 ** (rng.uniform(-20.0, 3.0) / 20.0))
    if rng.random() < 0.5:
        rms = float(np.sqrt(np.mean(x[lead:] ** 2))) if len(x) > lead else 0.0
        x = x + (rng.standard_normal(len(x)) * rms * 10.0 ** (-rng.uniform(20.0, 50.0) / 20.0)).astype(np.float32)
    return np.clip(x, -1.0, 1.0)


def batch_targets(numbers):
    seqs = [PROMPT + text_ids(n) + [EOT] for n in numbers]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width - 1), EOT, dtype=torch.long)
    labels = torch.full((len(seqs), width - 1), -100, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s) - 1] = torch.tensor(s[:-1])
        labels[i, :len(s) - 1] = torch.tensor(s[1:])
    return ids, labels


def features_of(samples_list):
    """tests/whisper_ref.py's features (float64, as vkformer computes them): the held-out clips."""
    return torch.from_numpy(np.stack([whisper_ref.log_mel(x, FE) for x in samples_list]))


MEL_T = torch.from_numpy(whisper_ref.mel_filters(400, 80, RATE).T.astype(np.float32))     # (80, 201)
HANN = torch.hann_window(400)


def train_features(samples_list):
    """The same features in float32 through torch.stft, a batch at once (WhisperFeatureExtractor's torch
    path; within about 1e-4 of the float64 ones): the training batches."""
    x = torch.zeros(len(samples_list), WINDOW)
    for i, c in enumerate(samples_list):
        c = torch.from_numpy(np.asarray(c[:WINDOW], dtype=np.float32))
        x[i, :len(c)] = c
    x = F.pad(x[:, None], (200, 200), mode="reflect")[:, 0]
    spec = torch.stft(x, 400, 160, window=HANN, center=False, return_complex=True)[..., :-1]
    logs = torch.clamp(MEL_T @ spec.abs() ** 2, min=1e-10).log10()
    logs = torch.maximum(logs, logs.amax(dim=(1, 2), keepdim=True) - 8.0)
    return (logs + 4.0) / 4.0


@torch.no_grad()
def greedy(encode, decode, feats, max_new=8):
    """Batched greedy decoding after the prompt: the text ids of each clip (up to <|endoftext|>)."""
    memory = encode(feats)
    ids = torch.tensor([PROMPT] * feats.shape[0], dtype=torch.long)
    done = torch.zeros(feats.shape[0], dtype=torch.bool)
    for _ in range(max_new):
        nxt = decode(memory, ids)[:, -1].argmax(-1)
        nxt[done] = EOT
        ids = torch.cat([ids, nxt[:, None]], 1)
        done |= nxt == EOT
        if bool(done.all()):
            break
    out = []
    for row in ids[:, len(PROMPT):].tolist():
        out.append(row[:row.index(EOT)] if EOT in row else row)
    return out


def transcripts(encode, decode, feats, batch=100):
    out = []
    for i in range(0, feats.shape[0], batch):
        out += greedy(encode, decode, feats[i:i + batch])
    return [ids_text(ids) for ids in out], out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(ROOT, "models", "whisper-numbers"))
    p.add_argument("--heldout", default=os.path.join(ROOT, "tests", "data", "whisper_numbers_heldout.tsv"))
    p.add_argument("--test-dir", default=os.path.join(ROOT, "tests", "data", "whisper_numbers"))
    p.add_argument("--heldout-audio", default="/tmp/whisper-numbers-heldout",
                   help="where the held-out clips are written as 16 kHz WAV (for tools/eval_whisper_demo.py)")
    p.add_argument("--library", default=os.environ.get("VKFORMER_LIBRARY") or os.path.join(ROOT, "build",
                                                                                             "libvkformer.so"))
    p.add_argument("--minutes", type=float, default=20.0, help="wall-clock budget of synthesis and training")
    p.add_argument("--pool", type=int, default=6000, help="training clips synthesized")
    p.add_argument("--pool-cache", help="an .npz file keeping the synthesized pool: read when it exists (the "
                   "time its synthesis took, as stored, still counts against --minutes), else written")
    p.add_argument("--steps", type=int, default=0, help="schedule length in steps (0: the time budget)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ffn", type=int, default=256)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ctc", type=float, default=0.5, help="weight of the CTC loss on the encoder (0: none)")
    p.add_argument("--bench", action="store_true", help="time 20 training steps on random features and stop")
    p.add_argument("--max-number", type=int, default=99, choices=(99, 999))
    p.add_argument("--chunk-length", type=int, default=2, help="the window in seconds")
    p.add_argument("--held-numbers", type=int, default=10, help="numbers held out")
    a = p.parse_args()
    configure(a.max_number, a.chunk_length, a.held_numbers)

    start = time.time()
    torch.set_num_threads(a.threads)
    # Debian's PyTorch 1.13 (oneDNN) now and then returns garbage for Conv1d's weight gradient on this CPU
    # (the same batch twice: conv1.weight's gradient norm 3.4, then 54131), which wrecked the first runs;
    # PyTorch's own convolution is exact and as fast at these sizes
    torch.backends.mkldnn.enabled = False
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    nrng = np.random.default_rng(a.seed)
    config = make_config(a.d_model, a.heads, a.layers, a.ffn)
    model = TinyWhisper(config)
    n_params = sum(p.numel() for p in model.parameters())
    print("model: %d trained parameters (d_model %d, %d heads, %d+%d layers, ffn %d, vocabulary %d)"
          % (n_params, a.d_model, a.heads, a.layers, a.layers, a.ffn, VOCAB_SIZE), flush=True)
    # training only, not written: CTC over the encoder's frames to the spoken words (faster alignment)
    ctc_head = nn.Linear(a.d_model, len(WORDS) + 1)
    params = [p for p in model.parameters() if p.requires_grad] + (list(ctc_head.parameters()) if a.ctc else [])
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.98), eps=1e-8, weight_decay=0.01)

    def train_step(feats, numbers, ands):
        ids, labels = batch_targets(numbers)
        memory = model.model.encoder(feats)
        logits = model.model.decoder(memory, ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), labels.reshape(-1), ignore_index=-100)
        if a.ctc:
            words = [word_ids(n, b) for n, b in zip(numbers, ands)]
            lp = F.log_softmax(ctc_head(memory), -1).transpose(0, 1)       # (frames, batch, words + blank)
            loss = loss + a.ctc * F.ctc_loss(lp, torch.tensor(sum(words, [])), torch.full((len(words),), lp.shape[0]),
                                             torch.tensor([len(w) for w in words]), zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(loss)

    if a.bench:
        feats = torch.randn(a.batch, 80, WINDOW // 160)
        t0 = time.time()
        for _ in range(3):
            train_features([np.zeros(20000, np.float32)] * a.batch)
        tf = (time.time() - t0) / 3
        t0 = time.time()
        for _ in range(20):
            train_step(feats, [rng.randint(0, 999) for _ in range(a.batch)], [False] * a.batch)
        print("features %.3f s, step %.3f s per batch of %d" % (tf, (time.time() - t0) / 20, a.batch))
        return 0

    # the held-out split
    held_rng = random.Random(a.seed + 1)
    held_numbers = held_out_numbers(held_rng)
    held = set(held_numbers)
    specs = heldout_specs(held_rng, held_numbers)
    os.makedirs(os.path.dirname(os.path.abspath(a.heldout)), exist_ok=True)
    with open(a.heldout, "w") as f:
        f.write("# id\tnumber\twords\tvoice\tspeed\tpitch  (tools/train_whisper_demo.py; espeak-ng -v VOICE -s "
                "SPEED -p PITCH WORDS)\n")
        for s in specs:
            f.write("\t".join(str(v) for v in s) + "\n")

    speaker = Speaker(a.library)
    try:
        os.makedirs(a.heldout_audio, exist_ok=True)
        held_clips = []
        for s in specs:
            q = speaker.say(s[2], s[3], s[4], s[5])
            if len(q) > WINDOW:
                raise SystemExit("held-out clip %s is %.2f s, longer than the window" % (s[0], len(q) / RATE))
            write_wav(os.path.join(a.heldout_audio, s[0] + ".wav"), q)
            held_clips.append(q)
        print("held-out: %d clips (%d numbers held out) in %.0f s" % (len(specs), len(held), time.time() - start),
              flush=True)
        # the training pool
        pool, dropped = [], 0
        if a.pool_cache and os.path.exists(a.pool_cache):
            with np.load(a.pool_cache) as f:
                z = {k: f[k] for k in f.files}
            if (int(z["seed"]), len(z["numbers"]), int(z["max_number"]), int(z["chunk"])) != (
                    a.seed, a.pool, MAX_NUMBER, CHUNK_SECONDS):
                raise SystemExit("%s holds another pool (seed, clips, max number, window: %d %d %d %d)" % (
                    a.pool_cache, int(z["seed"]), len(z["numbers"]), int(z["max_number"]), int(z["chunk"])))
            ends = np.cumsum(z["lengths"])
            samples = z["samples"]
            pool = [(samples[e - k:e], int(n), bool(b))
                    for e, k, n, b in zip(ends, z["lengths"], z["numbers"], z["ands"])]
            dropped = int(z["dropped"])
            start -= float(z["seconds"]) - (time.time() - start)
        while len(pool) < a.pool:
            n = sample_number(rng, held)
            british = rng.random() < 0.5
            q = speaker.say_fast(below_thousand_words(n, british),
                            voice_name(rng.choice(ACCENTS_TRAIN), rng.choice(VARIANTS_TRAIN)),
                            rng.choice(SPEEDS_TRAIN), rng.randint(*PITCH))
            if len(q) > MAX_SPEECH:
                dropped += 1
                continue
            pool.append((q, n, british))
        synth_time = time.time() - start
        if a.pool_cache and not os.path.exists(a.pool_cache):
            np.savez(a.pool_cache, samples=np.concatenate([c[0] for c in pool]), lengths=[len(c[0]) for c in pool],
                     numbers=[c[1] for c in pool], ands=[c[2] for c in pool], seed=a.seed, dropped=dropped,
                     seconds=synth_time, max_number=MAX_NUMBER, chunk=CHUNK_SECONDS)
        print("training pool: %d clips (%d longer than %.2f s dropped), %.1f s of speech, in %.0f s" % (
            len(pool), dropped, MAX_SPEECH / RATE, sum(len(c[0]) for c in pool) / RATE, synth_time), flush=True)
    finally:
        speaker.close()

    held_feats = features_of([c.astype(np.float32) / 32768.0 for c in held_clips])
    budget = a.minutes * 60.0
    model.train()
    step, t_train = 0, time.time()
    train_budget = budget - (t_train - start)
    running, seen = 0.0, 0
    while True:
        # the schedule's progress: by steps with --steps, else by the time left after the synthesis
        # (a busy machine then gets fewer steps, and the decay still ends with the budget)
        progress = step / a.steps if a.steps else (time.time() - t_train) / train_budget
        if progress >= 1.0:
            break
        if time.time() - start > budget:
            print("time budget spent at step %d" % step, flush=True)
            break
        lr = a.lr * min((step + 1) / a.warmup, 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = lr
        chosen = [pool[int(nrng.integers(len(pool)))] for _ in range(a.batch)]
        feats = train_features([augment(c[0], nrng) for c in chosen])
        running += train_step(feats, [c[1] for c in chosen], [c[2] for c in chosen])
        seen += 1
        step += 1
        if step % 100 == 0:
            model.eval()
            texts, _ = transcripts(model.model.encoder, model.model.decoder, held_feats[:200])
            model.train()
            acc = sum(t == " %d" % s[1] for t, s in zip(texts, specs)) / len(texts)
            print("step %5d  %6.0f s  lr %.2e  loss %.4f  held-out (first 200) exact match %.1f%%" % (
                step, time.time() - start, lr, running / seen, 100 * acc), flush=True)
            running, seen = 0.0, 0
    train_time = time.time() - start
    print("trained %d steps of %d clips in %.0f s (synthesis %.0f s, training %.0f s)" % (
        step, a.batch, train_time, synth_time, train_time - synth_time), flush=True)

    write_folder(a.out, model.eval(), config)
    # the written folder through the reference
    ref = whisper_ref.load_folder(a.out)
    assert ref.fe == FE, (ref.fe, FE)
    texts, out_ids = transcripts(ref.encode, ref.decode, held_feats)
    right = [t == " %d" % s[1] for t, s in zip(texts, specs)]
    print("held-out exact match (tests/whisper_ref.py greedy on %s): %d of %d (%.1f%%)" % (
        a.out, sum(right), len(right), 100.0 * sum(right) / len(right)), flush=True)
    for name, pick in (("held-out numbers", lambda i, s: s[1] in held),
                       ("trained numbers", lambda i, s: s[1] not in held),
                       ("held-out accent, trained variant", lambda i, s: (i // 2) % 3 == 0),
                       ("trained accent, held-out variant", lambda i, s: (i // 2) % 3 == 1),
                       ("held-out accent and variant", lambda i, s: (i // 2) % 3 == 2)):
        idx = [i for i, s in enumerate(specs) if pick(i, s)]
        print("  %-34s %d of %d (%.1f%%)" % (name, sum(right[i] for i in idx), len(idx),
                                            100.0 * sum(right[i] for i in idx) / len(idx)))
    for i, s in enumerate(specs):
        if not right[i]:
            print("  wrong: %s %r (%s -s %d -p %d) -> %r" % (s[0], s[2], s[3], s[4], s[5], texts[i]))

    # test data: three held-out clips with the reference's teacher-forced argmax
    os.makedirs(a.test_dir, exist_ok=True)
    for old in os.listdir(a.test_dir):          # an earlier run's clips
        if old.endswith(".wav"):
            os.remove(os.path.join(a.test_dir, old))
    picks = [i for i in range(len(specs)) if right[i]][:3]
    with open(os.path.join(a.test_dir, "expected.tsv"), "w") as f:
        f.write("# file\ttarget ids (prompt, greedy transcript, <|endoftext|>)\targmax of tests/whisper_ref.py's "
                "teacher-forced logits\ttranscript\n")
        for i in picks:
            name = "%s-%d.wav" % (specs[i][0], specs[i][1])
            shutil.copyfile(os.path.join(a.heldout_audio, specs[i][0] + ".wav"), os.path.join(a.test_dir, name))
            tgt = PROMPT + out_ids[i] + [EOT]
            logits = whisper_ref.forward_audio(ref, read_wav(os.path.join(a.test_dir, name)), tgt)
            top2 = np.sort(logits, axis=1)[:, -2:]
            print("  test clip %s: %r, smallest top-1 margin %.2f" % (name, texts[i],
                                                                      float((top2[:, 1] - top2[:, 0]).min())))
            f.write("%s\t%s\t%s\t%s\n" % (name, ",".join(map(str, tgt)), ",".join(map(str, logits.argmax(1))),
                                          texts[i].strip()))
    size = sum(os.path.getsize(os.path.join(a.out, n)) for n in os.listdir(a.out))
    print("wrote %s (%d bytes) in %.0f s in all" % (a.out, size, time.time() - start), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
