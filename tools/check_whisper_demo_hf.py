#!/usr/bin/env python3
"""Holds the Whisper demo folder (models/whisper-numbers) against the real Hugging Face stack: the
folder loads as transformers loads openai/whisper-* folders, and WhisperForConditionalGeneration
.generate transcribes the held-out clips as tools/eval_whisper_demo.py's reference did.

    HF_PYTHON_BIND=/tmp/whisper-numbers-heldout ../shared/tools/hf_python.sh tools/check_whisper_demo_hf.py \\
        [--model models/whisper-numbers] [--heldout tests/data/whisper_numbers_heldout.tsv] \\
        [--audio /tmp/whisper-numbers-heldout] [--transcripts FILE]

  tokenizer  WhisperTokenizer (AutoTokenizer) from the folder's slow files: its prefix (language and task
             from tokenizer_config.json) and the ids of " 0" .. " 999" equal the training script's
             (" 4" merged, then a byte token per digit);
  features   WhisperFeatureExtractor from preprocessor_config.json (its short window): within 1e-4 of
             tests/whisper_ref.py's on the held-out clips (the extractor computes in float32);
  generate   model.generate(input_features) with language="en", task="transcribe" and, separately,
             with neither (Whisper then detects the language from the first token): exact match of the
             decoded text (skip_special_tokens) with " " + the number, and agreement with the reference
             transcripts of tools/eval_whisper_demo.py --out (--transcripts).
The WAV files are read with Python's wave module (16-bit PCM). Exit 1 on any disagreement.
"""
import argparse
import os
import sys
import wave

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import whisper_ref  # noqa: E402

failures = 0


def report(ok, what):
    global failures
    failures += 0 if ok else 1
    print("%s %s" % ("ok  " if ok else "FAIL", what), flush=True)


def read_pcm16(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise SystemExit("%s: not mono 16-bit PCM" % path)
        rate = w.getframerate()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
    return x, rate


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=os.path.join(ROOT, "models", "whisper-numbers"))
    p.add_argument("--heldout", default=os.path.join(ROOT, "tests", "data", "whisper_numbers_heldout.tsv"))
    p.add_argument("--audio", default="/tmp/whisper-numbers-heldout")
    p.add_argument("--transcripts", help="tools/eval_whisper_demo.py --out FILE")
    p.add_argument("--batch", type=int, default=100)
    a = p.parse_args()
    print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    specs = []
    with open(a.heldout) as f:
        for line in f:
            if not line.startswith("#") and line.strip():
                fields = line.rstrip("\n").split("\t")
                specs.append((fields[0], int(fields[1])))

    tok = transformers.AutoTokenizer.from_pretrained(a.model)
    report(type(tok).__name__.startswith("WhisperTokenizer"), "AutoTokenizer is %s" % type(tok).__name__)
    vocab = {}
    with open(os.path.join(a.model, "vocab.json")) as f:
        import json
        vocab = json.load(f)
    with open(os.path.join(a.model, "added_tokens.json")) as f:
        added = json.load(f)
    prompt = [added[t] for t in ("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>")]
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    bad = []
    for n in range(1000):
        s = str(n)
        want = [vocab["Ġ" + s[0]]] + [vocab[c] for c in s[1:]]
        got = tok(" " + s).input_ids
        if got != prompt + want + [eot] or tok.decode(got, skip_special_tokens=True) != " " + s:
            bad.append((n, got))
    report(not bad, "tokenizer: ' 0' .. ' 999' encode to the prompt %s + the training ids + %d, and decode back%s"
           % (prompt, eot, "" if not bad else ": %d differ, e.g. %r" % (len(bad), bad[:2])))

    proc = transformers.WhisperProcessor.from_pretrained(a.model)
    model = transformers.WhisperForConditionalGeneration.from_pretrained(a.model).eval()
    fe = whisper_ref.extractor_settings(a.model)
    clips = []
    for i, _ in specs:
        x, rate = read_pcm16(os.path.join(a.audio, i + ".wav"))
        if rate != 16000:
            raise SystemExit("%s: %d Hz" % (i, rate))
        clips.append(x)
    feats = proc.feature_extractor(clips, sampling_rate=16000, return_tensors="pt").input_features
    gap = max(float(np.abs(feats[k].numpy() - whisper_ref.log_mel(c, fe)).max()) for k, c in enumerate(clips))
    frames = fe["chunk_length"] * fe["sampling_rate"] // fe["hop_length"]
    report(tuple(feats.shape[1:]) == (fe["feature_size"], frames) and gap < 1e-4,
           "features %s: within %.1e of tests/whisper_ref.py's" % (tuple(feats.shape), gap))

    ref = {}
    if a.transcripts:
        with open(a.transcripts) as f:
            for line in f:
                if not line.startswith("#"):
                    fields = line.rstrip("\n").split("\t")
                    ref[fields[0]] = fields[2]
    for label, kwargs in (("language en, task transcribe", {"language": "en", "task": "transcribe"}),
                          ("language detected", {})):
        texts = []
        with torch.no_grad():
            for lo in range(0, len(clips), a.batch):
                out = model.generate(feats[lo:lo + a.batch], **kwargs)
                texts += proc.batch_decode(out, skip_special_tokens=True)
        right = sum(t == " %d" % n for t, (_, n) in zip(texts, specs))
        print("     generate (%s): %d of %d held-out transcripts right (%.1f%%)" % (
            label, right, len(specs), 100.0 * right / len(specs)))
        if ref:
            differ = [(i, ref[i], t) for t, (i, _) in zip(texts, specs) if ref.get(i) != t]
            report(not differ, "generate (%s) equals the reference's greedy transcript on %d of %d clips%s" % (
                label, len(specs) - len(differ), len(specs), "" if not differ else ", e.g. %r" % differ[:3]))
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
