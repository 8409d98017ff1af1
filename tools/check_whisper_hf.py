#!/usr/bin/env python3
"""Holds tests/whisper_ref.py (the tests' reference of Whisper's features and model) against the real
Hugging Face transformers, on signals made here and folders tests/gen_whisper.py writes.

usage: ../shared/tools/hf_python.sh tools/check_whisper_hf.py [--wav FILE ...] [--out DIR] [--full]

  features  WhisperFeatureExtractor (80 and 128 bins, 30 s and 2 s windows) on sines, noise, chirps,
            clicks, silence with a burst, a quiet signal (60 dB down), int16-quantized audio, clips
            shorter and longer than the window, empty audio, and each --wav file (mono float32 at
            16 kHz, e.g. espeak-ng speech resampled by vkformer.read_audio): the reference (float64)
            against the extractor's default path (torch.stft in float32) and its numpy path
            (_np_extract_fbank_features, float64). Bound: 1e-4.
  model     WhisperForConditionalGeneration.from_pretrained on folders in the hub layout and the
            save_pretrained one, 80 and 128 mels, F16 weights, a file without the encoder's
            positions, untied proj_out: logits of the extractor's features with three targets,
            reference against transformers. Bound: 1e-4. --full adds a whisper-tiny shaped folder
            (d 384, 6 heads, 4 + 4 layers, 51865 ids, 1500 positions, 30 s).
  generate  whisper_ref.transcribe (tests' reference of WhisperForConditionalGeneration.generate) against
            generate() itself on folders with timestamp ids (gen_whisper --timestamps 100), both layouts,
            unbiased and with timestamp rows scaled (--timestamp-bias 3: segments end in pairs and in lone
            timestamps, windows seek by the last pair): clips shorter than the window and 2.5 to 4 windows
            long (long-form: the extractor with truncation=False, padding="longest"), greedy and 3 beams,
            with and without timestamps, language detected or given, transcribe and translate: every
            segment's tokens, start and end equal, and the detected language's prompt.
Prints one line per check and a summary; exit 1 on any failure.
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gen_whisper  # noqa: E402
import whisper_ref  # noqa: E402

failures = 0
BOUND = 1e-4


def report(ok, what):
    global failures
    failures += 0 if ok else 1
    print("%s %s" % ("ok  " if ok else "FAIL", what))


def signals(seconds, rng):
    n = int(seconds * 16000)
    t = np.arange(n) / 16000.0
    out = {
        "sine 440 Hz + noise": 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(n),
        "white noise": 0.2 * rng.standard_normal(n),
        "chirp 50..7900 Hz": 0.5 * np.sin(2 * np.pi * (50 * t + (7850 / (2 * max(seconds, 1e-3))) * t * t)),
        "clicks": (np.arange(n) % 1600 == 0).astype(np.float64),
        "silence then a burst": np.where(t > seconds * 0.7, 0.4 * rng.standard_normal(n), 0.0),
        "quiet (-60 dB)": 1e-3 * np.sin(2 * np.pi * 1000 * t) + 1e-4 * rng.standard_normal(n),
        "int16-quantized": np.round(0.25 * np.sin(2 * np.pi * 220 * t) * 32767) / 32768.0,
        "short (0.3 s)": 0.3 * np.sin(2 * np.pi * 300 * t[:4800]),
        "longer than the window": 0.3 * np.sin(2 * np.pi * 500 * np.arange(n + 40000) / 16000.0),
        "empty": np.zeros(0),
        "full scale square": np.sign(np.sin(2 * np.pi * 100 * t)),
    }
    return {k: v.astype(np.float32) for k, v in out.items()}


def check_features(wavs):
    from transformers import WhisperFeatureExtractor
    rng = np.random.default_rng(3)
    for mels, chunk in ((80, 30), (128, 30), (80, 2)):
        fe = WhisperFeatureExtractor(feature_size=mels, chunk_length=chunk)
        settings = {"feature_size": mels, "sampling_rate": 16000, "hop_length": 160, "chunk_length": chunk,
                    "n_fft": 400, "padding_value": 0.0}
        cases = signals(min(chunk, 8), rng)
        for path, x in wavs:
            cases["wav " + os.path.basename(path)] = x
        worst_t = worst_n = 0.0
        for name, x in cases.items():
            mine = whisper_ref.log_mel(x, settings)
            if x.size == 0:
                # the extractor pads an empty clip to a window of silence, as the reference does
                x_in = np.zeros(1, dtype=np.float32)
            else:
                x_in = x
            torch_path = fe(x_in, sampling_rate=16000, return_tensors="np").input_features[0]
            padded = np.zeros(fe.n_samples, dtype=np.float32)
            padded[:min(x_in.size, fe.n_samples)] = x_in[:fe.n_samples]
            numpy_path = fe._np_extract_fbank_features(padded[None], "cpu")[0]
            if x.size == 0:
                mine = whisper_ref.log_mel(np.zeros(1, dtype=np.float32), settings)
            dt, dn = float(np.abs(mine - torch_path).max()), float(np.abs(mine - numpy_path).max())
            worst_t, worst_n = max(worst_t, dt), max(worst_n, dn)
            report(dt <= BOUND and dn <= BOUND, "features %d bins, %d s window, %s: |ref - torch path| %.2g, "
                   "|ref - numpy path| %.2g" % (mels, chunk, name, dt, dn))
        print("     worst over %d signals (%d bins, %d s): torch path %.3g, numpy path %.3g" % (
            len(cases), mels, chunk, worst_t, worst_n))


def check_models(tmp, full):
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration
    rng = np.random.default_rng(11)
    cases = [
        ("hub, 80 mels", dict(layout="hub")),
        ("hub, 80 mels, proj_out stored", dict(layout="hub", proj_out=True, seed=2)),
        ("save_pretrained, 128 mels", dict(layout="save_pretrained", mels=128, seed=3)),
        ("hub, F16 weights", dict(layout="hub", dtype="f16", seed=4)),
        ("hub, no encoder positions in the file", dict(layout="hub", positions=False, seed=5)),
        ("save_pretrained, untied proj_out", dict(layout="save_pretrained", untied=True, seed=6)),
        ("hub, 3 layers, 2 heads, d 48", dict(layout="hub", d_model=48, heads=2, layers=3, ffn=80, seed=7)),
    ]
    if full:
        cases.append(("whisper-tiny shape, 30 s", dict(layout="hub", d_model=384, heads=6, layers=4, ffn=1536,
                                                        vocab=51865, source_positions=1500, target_positions=448,
                                                        chunk_length=30, seed=8)))
    for label, kw in cases:
        path = os.path.join(tmp, label.replace(" ", "_").replace(",", ""))
        info = gen_whisper.make_folder(path, **kw)
        hf = WhisperForConditionalGeneration.from_pretrained(path).eval()
        fe = WhisperFeatureExtractor.from_pretrained(path)
        ref = whisper_ref.load_folder(path)
        seconds = fe.chunk_length
        t = np.arange(int(seconds * 16000 * 0.8)) / 16000.0
        x = (0.3 * np.sin(2 * np.pi * 330 * t) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
        feats = fe(x, sampling_rate=16000, return_tensors="np").input_features
        worst = 0.0
        for T in (1, 5, 17):
            tgt = [info["specials"] + 1] + [int(v) for v in rng.integers(0, info["vocab"], T - 1)]
            with torch.no_grad():
                want = hf(input_features=torch.from_numpy(feats), decoder_input_ids=torch.tensor([tgt])).logits[0].numpy()
            got = whisper_ref.forward_logits(ref, feats[0], tgt)
            worst = max(worst, float(np.abs(got - want).max()))
        report(worst <= BOUND, "model %s: worst |reference - transformers| logits %.3g" % (label, worst))


def check_generation(tmp):
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration
    rng = np.random.default_rng(12)
    clips = []
    for seconds in (1.5, 5.3, 7.9):
        t = np.arange(int(seconds * 16000)) / 16000.0
        f = 200 + 150 * np.sin(2 * np.pi * 0.3 * t)
        clips.append((seconds, (0.3 * np.sin(2 * np.pi * np.cumsum(f) / 16000) +
                                0.05 * rng.standard_normal(t.size)).astype(np.float32)))
    modes = [dict(), dict(timestamps=True), dict(beams=3, timestamps=True), dict(beams=2),
             dict(language="de", task="translate", timestamps=True), dict(task="translate"),
             dict(language="german")]
    same = total = 0
    for layout in ("hub", "save_pretrained"):
        for bias in (0.0, 3.0):
            path = os.path.join(tmp, "gen_%s_%g" % (layout, bias))
            gen_whisper.make_folder(path, layout=layout, timestamps=100, timestamp_bias=bias, seed=21)
            hf = WhisperForConditionalGeneration.from_pretrained(path).eval()
            fe = WhisperFeatureExtractor.from_pretrained(path)
            ref = whisper_ref.load_folder(path)
            for seconds, x in clips:
                long = len(x) > fe.n_samples
                feats = (fe(x, sampling_rate=16000, truncation=False, padding="longest", return_tensors="pt")
                         if long else fe(x, sampling_rate=16000, return_tensors="pt")).input_features
                for mode in modes:
                    if long and mode.get("timestamps") is None:
                        mode = dict(mode, timestamps=None)
                    kw = {"return_segments": True}
                    if mode.get("timestamps") or long:
                        kw["return_timestamps"] = True
                    if mode.get("beams"):
                        kw["num_beams"] = mode["beams"]
                    for k in ("language", "task"):
                        if mode.get(k):
                            kw[k] = mode[k]
                    with torch.no_grad():
                        out = hf.generate(input_features=feats, **kw)
                    want = [(round(float(s["start"]), 6), round(float(s["end"]), 6), [int(v) for v in s["tokens"]])
                            for s in out["segments"][0]]
                    r = whisper_ref.transcribe(ref, path, x, **mode)
                    got = [(round(a, 6), round(b, 6), list(c)) for a, b, c in r["segments"]]
                    total += 1
                    ok = got == want
                    same += ok
                    if not ok:
                        report(False, "generate %s bias %g %.1f s %s: reference %s, transformers %s" % (
                            layout, bias, seconds, mode, got[:3], want[:3]))
    report(same == total, "generate: %d of %d transcriptions identical (segments' tokens, start, end)" % (same, total))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wav", action="append", default=[], help="a .npy of float32 16 kHz samples, or a .wav")
    ap.add_argument("--out")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--generate-only", action="store_true", help="only the generate check")
    a = ap.parse_args()
    import transformers
    print("transformers %s, torch %s, numpy %s" % (transformers.__version__, torch.__version__, np.__version__))
    wavs = []
    for p in a.wav:
        if p.endswith(".npy"):
            wavs.append((p, np.load(p).astype(np.float32)))
        else:
            import wave
            with wave.open(p) as w:
                if w.getframerate() != 16000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
                    sys.exit("%s: give 16 kHz mono 16-bit WAV (or a .npy)" % p)
                wavs.append((p, np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0))
    if not a.generate_only:
        check_features(wavs)
    tmp = a.out or tempfile.mkdtemp(prefix="check-whisper-")
    if not a.generate_only:
        check_models(tmp, a.full)
    check_generation(tmp)
    print("check_whisper_hf: %s" % ("every check passed" if not failures else "%d checks failed" % failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
