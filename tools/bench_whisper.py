#!/usr/bin/python3
"""Whisper on 30 s of audio: vkformer beside Hugging Face Transformers fp32 on the same CPU.

usage: /usr/bin/python3 tools/bench_whisper.py [--shape base|small|tiny ...] [--repeat 3] [--library LIB]
           [--transformers-python ../shared/tools/hf_python.sh] [--out DIR] [--json]

For each shape (random weights written once by tests/gen_whisper.py under --out, default
/tmp/vkformer-bench/whisper-SHAPE-shape: whisper-tiny d 384 4+4 layers, base d 512 6+6, small d 768
12+12; 51,865 ids, 80 mels, 1,500 encoder positions, 448 target positions) and one 30 s clip (a
chirp with noise), each engine in a process of its own, one after the other:
  features   the log-mel of the clip (vkformer: Model.audio_features, host; Transformers:
             WhisperFeatureExtractor) — real-time factor = seconds / 30;
  encoder    vkformer: Model.encode_audio minus the features; Transformers: model.model.encoder;
  decoding   greedy decoding of the window with the prompt <|startoftranscript|> <|en|>
             <|transcribe|> <|notimestamps|> (vkformer: Model.transcribe minus features and
             encoder; Transformers: generate(language="en") minus its encoder); a random model runs to
             max_length, so both decode the same number of tokens (printed);
  attention  vkformer's encoder with dense, local:64 and bigbird:64:1:2 self-attention (Transformers:
             dense only);
  memory     the process's peak resident set (VmHWM; on lavapipe the device memory is host memory).
Times are medians of --repeat runs after one warm-up. vkformer runs on the device VK_ICD_FILENAMES
selects (lavapipe for docs/audio.md) with precision f32; Transformers on the CPU in fp32 with
torch.set_num_threads(os.cpu_count()).

docs/audio.md ("Measured") holds its figures for the base and small shapes.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {"tiny": dict(d_model=384, heads=6, layers=4, ffn=1536),
          "base": dict(d_model=512, heads=8, layers=6, ffn=2048),
          "small": dict(d_model=768, heads=12, layers=12, ffn=3072)}
VARIANTS = ("dense", "local:64", "bigbird:64:1:2")


def clip():
    import numpy as np
    rng = np.random.default_rng(5)
    t = np.arange(30 * 16000) / 16000.0
    f = 200 + 150 * np.sin(2 * np.pi * 0.3 * t)
    return (0.3 * np.sin(2 * np.pi * np.cumsum(f) / 16000) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


def timed(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), r


def peak_mb():
    """This process's peak resident set since its exec: VmHWM. (ru_maxrss is not that: Linux carries
    the parent's resident set at fork into it, so after writing a 1 GB folder in the parent both halves
    reported the parent's peak.)"""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def half_vkformer(folder, repeat, library):
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import vkformer
    x = clip()
    out = {"engine": "vkformer"}
    with vkformer.load(folder, precision="f32", library=library) as m:
        out["device"] = m.context.device_name
        feat, _ = timed(lambda: m.audio_features(x), repeat)
        enc = {}
        for v in VARIANTS:
            m.set_attention(v)
            t, _ = timed(lambda: m.encode_audio(x), repeat)
            enc[v] = t - feat
        m.set_attention("dense")
        total, r = timed(lambda: m.transcribe(x, language="en", timestamps=False), repeat)
        out.update(features_s=feat, encoder_s=enc["dense"], encoder_variants_s=enc,
                   decoding_s=total - feat - enc["dense"], tokens=len(r["ids"]), prompt=r["prompt"])
    out["peak_rss_mb"] = peak_mb()
    return out


def half_transformers(folder, repeat):
    import torch
    from transformers import WhisperFeatureExtractor, WhisperForConditionalGeneration
    torch.set_num_threads(os.cpu_count())
    x = clip()
    fe = WhisperFeatureExtractor.from_pretrained(folder)
    model = WhisperForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    out = {"engine": "transformers", "version": __import__("transformers").__version__, "torch": torch.__version__}
    feat, f = timed(lambda: fe(x, sampling_rate=16000, return_tensors="pt").input_features, repeat)
    with torch.no_grad():
        enc, _ = timed(lambda: model.model.encoder(f), repeat)
        total, seq = timed(lambda: model.generate(f, language="en"), repeat)
    out.update(features_s=feat, encoder_s=enc, decoding_s=total - enc, tokens=int(seq.shape[1]) - 4,
               peak_rss_mb=peak_mb())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", action="append", choices=sorted(SHAPES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--library", default=os.path.join(HERE, "..", "build", "libvkformer.so"))
    ap.add_argument("--transformers-python", default=os.path.join(HERE, "..", "..", "shared", "tools",
                                                                    "hf_python.sh"))
    # under /tmp: ../shared/tools/hf_python.sh runs Transformers in a private root that sees /tmp and
    # the checkout, not ~/.cache
    ap.add_argument("--out", default="/tmp/vkformer-bench")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--half", choices=("vkformer", "transformers"), help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.half:
        r = half_vkformer(a.folder, a.repeat, a.library) if a.half == "vkformer" else half_transformers(a.folder,
                                                                                                        a.repeat)
        print(json.dumps(r))
        return 0
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import gen_whisper
    for shape in a.shape or ["base"]:
        folder = os.path.join(a.out, "whisper-%s-shape" % shape)
        if not os.path.exists(os.path.join(folder, "model.safetensors")):
            gen_whisper.make_folder(folder, layout="hub", vocab=51865, source_positions=1500, target_positions=448,
                                    chunk_length=30, seed=31, **SHAPES[shape])
        rows = []
        for half, cmd in (("vkformer", [sys.executable]), ("transformers", [a.transformers_python])):
            p = subprocess.run(cmd + [os.path.abspath(__file__), "--half", half, "--folder", folder, "--repeat",
                                      str(a.repeat), "--library", os.path.abspath(a.library)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode != 0 or not lines:
                sys.exit("%s half failed: %s" % (half, p.stderr[-2000:]))
            r = json.loads(lines[-1])
            r["shape"] = shape
            rows.append(r)
            if a.json:
                print(json.dumps(r), flush=True)
        if not a.json:
            v, h = rows
            print("whisper-%s shape, 30 s clip (real-time factor = seconds / 30; ratio = Transformers / vkformer)"
                  % shape)
            for k in ("features_s", "encoder_s", "decoding_s"):
                print("  %-9s vkformer %.3f s (RTF %.4f)  Transformers %.3f s (RTF %.4f)  ratio %.2f" % (
                    k[:-2], v[k], v[k] / 30, h[k], h[k] / 30, h[k] / v[k] if v[k] > 0 else float("nan")))
            print("  tokens decoded: vkformer %d, Transformers %d; per token vkformer %.1f ms, Transformers %.1f ms, "
                  "ratio %.2f" % (v["tokens"], h["tokens"], 1e3 * v["decoding_s"] / max(v["tokens"], 1),
                                  1e3 * h["decoding_s"] / max(h["tokens"], 1),
                                  (h["decoding_s"] / max(h["tokens"], 1)) / (v["decoding_s"] / max(v["tokens"], 1))))
            for var, t in v["encoder_variants_s"].items():
                print("  vkformer encoder %-15s %.3f s (RTF %.4f)" % (var, t, t / 30))
            print("  peak RSS: vkformer %.0f MB, Transformers %.0f MB" % (v["peak_rss_mb"], h["peak_rss_mb"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
