#!/usr/bin/python3
"""Translation throughput on OPUS-MT shapes: vkformer beside Hugging Face Transformers.

The figure translation users compare: target tokens/s of beam search (beam 4, batch 32)
on a Marian model shaped like Helsinki-NLP/opus-mt-en-de (vocabulary 58101, 6+6
layers, d_model 512, 8 heads, d_ff 2048). CTranslate2 publishes 9.1x Transformers fp32
for that on one GPU. This script runs both engines on the same random-weight folder and
the same random sources, every source decoding exactly --max-new steps (min_new_tokens =
max_new_tokens), and prints tokens/s and the ratio.

usage: /usr/bin/python3 tools/bench_translate.py [--vkformer build/vkformer] [--model DIR] [--family marian|nllb|t5]
           [--precision auto[,f32,f16,int8]]
           [--batch 32] [--beam 4] [--src-len 32] [--max-new 64] [--repeat 3]
           [--device cuda|cpu] [--transformers-dtype fp32[,fp16]] [--transformers-python CMD]
           [--no-transformers] [--json]

--model DIR: a Marian folder; where DIR does not exist, a random-weight folder of OPUS-MT
en-de's shape is written there once with tests/gen_marian.py (~300 MB; needs torch, numpy
and sentencepiece in this Python; default DIR ~/.cache/vkformer/opus-mt-en-de-shape).
--small: a small random folder instead (d_model 64, 2+2 layers), for dry runs.
Transformers runs in this Python when it imports `transformers`; otherwise
--transformers-python CMD runs this script under another interpreter for that half
(e.g. --transformers-python ../shared/tools/hf_python.sh, transformers 5.12 on CPU).
Both halves time the whole generate call on the host clock after one untimed warm-up
run (vkformer: `vkformer bench translate`; Transformers: model.generate with
torch.cuda.synchronize on CUDA), the median of --repeat runs. Transformers uses the
folder's generation_config as vkformer does (4 beams, forced eos, pad banned,
renormalised log-probs), in each dtype of --transformers-dtype (default fp32; fp16 is
the model cast with .half(), one process loads the folder once for all dtypes).
--precision LIST: vkformer's storage precision (`--precision` of the tool; default auto),
comma-separated to run vkformer once per precision, in order, before Transformers.
With --json each engine's line is printed as soon as it is measured (vkformer first,
then Transformers per dtype), so a run stopped by a timeout keeps what it measured.
"""
import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True

OPUS_SHAPE = ["--d-model", "512", "--layers", "6", "--heads", "8", "--ffn", "2048", "--activation", "swish",
              "--max-positions", "512", "--pad-vocab-to", "58101", "--seed", "1"]


# NLLB-200-distilled-600M: d_model 1024, 12 + 12 layers, 16 heads, d_ff 4096, vocabulary 256,206
NLLB_SHAPE = ["--d-model", "1024", "--layers", "12", "--heads", "16", "--ffn", "4096", "--max-positions", "1024",
              "--vocab-size", "256206", "--seed", "1"]

# Flan-T5-base: d_model 768, 12 + 12 layers, 12 heads of d_kv 64, d_ff 2048 gated-gelu, vocabulary 32,128, its
# own lm_head (tests/gen_t5.py flan: the hub's config and files)
T5_SHAPE = ["--d-model", "768", "--layers", "12", "--heads", "12", "--d-kv", "64", "--ffn", "2048",
            "--vocab-size", "32128", "--seed", "1"]

SMALL_SHAPE = ["--d-model", "64", "--layers", "2", "--heads", "4", "--ffn", "128", "--activation", "swish",
               "--max-positions", "64", "--seed", "1"]


def default_model(family="marian"):
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "vkformer", {"marian": "opus-mt-en-de-shape", "nllb": "nllb-200-600m-shape",
                                            "t5": "flan-t5-base-shape"}[family])


def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def make_model(path, small, family="marian"):
    if os.path.isfile(os.path.join(path, "model.safetensors")):
        return
    print("bench_translate: writing a random-weight %s folder to %s" % ("small Marian" if small else
                                                                        "OPUS-MT en-de shaped" if family == "marian"
                                                                        else "Flan-T5-base shaped" if family == "t5"
                                                                        else "NLLB-200-600M shaped", path), file=sys.stderr)
    missing = [m for m in ("torch", "numpy", "sentencepiece") if not _importable(m)]
    if missing:
        sys.exit("bench_translate: writing the folder needs %s in this Python (%s); on Debian: apt-get install "
                 "python3-torch python3-numpy python3-sentencepiece and run /usr/bin/python3"
                 % (", ".join(missing), sys.executable))
    tmp = path + ".partial"
    if os.path.isdir(tmp):
        import shutil
        shutil.rmtree(tmp)
    if family == "nllb":
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gen_seq2seq.py"), tmp, "nllb"] + NLLB_SHAPE,
                       check=True)
    elif family == "t5":
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gen_t5.py"), tmp, "flan"] + T5_SHAPE, check=True)
    else:
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "gen_marian.py"), tmp] +
                       (SMALL_SHAPE if small else OPUS_SHAPE), check=True)
    os.rename(tmp, path)


def sources(model_dir, batch, src_len, seed):
    """batch random sources of src_len ids (the last eos), avoiding the special ids."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    special = {cfg["pad_token_id"], cfg["eos_token_id"], cfg.get("decoder_start_token_id", cfg["pad_token_id"])}
    rng = random.Random(seed)
    out = []
    for _ in range(batch):
        ids = []
        while len(ids) < src_len - 1:
            t = rng.randrange(cfg["vocab_size"])
            if t not in special:
                ids.append(t)
        out.append(ids + [cfg["eos_token_id"]])
    return out


def run_transformers(a):
    """Times the folder's model (AutoModelForSeq2SeqLM).generate on the ids of --ids, once per dtype of
    --transformers-dtype; prints one JSON line per dtype as soon as it is measured."""
    import openblas_core
    blas_core = openblas_core.choose()  # torch on CPU runs OpenBLAS's sgemm: the CPU's own kernels, not SSE3
    import torch
    import transformers
    from transformers import AutoModelForSeq2SeqLM
    with open(a.ids) as f:
        src = [[int(t) for t in line.split(",")] for line in f if line.strip()]
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        torch.set_num_threads(os.cpu_count() or 1)  # every core, as vkformer's CPU drivers use
    model = AutoModelForSeq2SeqLM.from_pretrained(a.model).to(device=device, dtype=torch.float32).eval()
    ids = torch.tensor(src, dtype=torch.long, device=device)
    mask = torch.ones_like(ids)
    kw = dict(max_new_tokens=a.max_new, min_new_tokens=a.max_new)
    if a.beam:
        kw["num_beams"] = a.beam
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (%d threads)" % torch.get_num_threads()
    for dtype in a.transformers_dtype.split(","):
        model = model.to(dtype=torch.float16 if dtype == "fp16" else torch.float32)
        times = []
        steps = None
        with torch.no_grad():
            for r in range(a.repeat + 1):
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = model.generate(input_ids=ids, attention_mask=mask, **kw)
                if device == "cuda":
                    torch.cuda.synchronize()
                if r:
                    times.append((time.perf_counter() - t0) * 1e3)
                steps = out.shape[1] - 1  # without the decoder start token
        med = sorted(times)[len(times) // 2] if len(times) % 2 else sum(sorted(times)[len(times) // 2 - 1:][:2]) / 2
        print(json.dumps({"engine": "transformers", "version": transformers.__version__, "torch": torch.__version__,
                          "device": name, "blas_core": blas_core, "dtype": dtype, "batch": len(src), "beams": model.generation_config.num_beams
                          if not a.beam else a.beam, "steps": steps, "runs_ms": times, "median_ms": med,
                          "target_tokens_per_s": 1e3 * len(src) * steps / med}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vkformer", default=os.path.join(ROOT, "build", "vkformer"))
    p.add_argument("--model")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--beam", type=int, default=0, help="0: the folder's num_beams (opus-mt: 4)")
    p.add_argument("--src-len", type=int, default=32)
    p.add_argument("--max-new", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", help="Transformers' device: cuda or cpu (default: cuda where available)")
    p.add_argument("--transformers-dtype", default="fp32",
                   help="Transformers' dtypes, comma-separated: fp32, fp16 (default fp32)")
    p.add_argument("--transformers-python", help="run the Transformers half under this interpreter command")
    p.add_argument("--precision", default="auto", help="vkformer's precision(s): auto, f32, f16, int8, comma-separated")
    p.add_argument("--no-transformers", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--small", action="store_true", help="a small random Marian folder instead (a dry run)")
    p.add_argument("--family", default="marian", choices=("marian", "nllb", "t5"),
                   help="the folder written when --model is not there: OPUS-MT en-de, NLLB-200-600M or Flan-T5-base "
                        "shaped")
    p.add_argument("--transformers-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ids", help=argparse.SUPPRESS)
    a = p.parse_args()
    for name in ("batch", "src_len", "max_new", "repeat"):
        if getattr(a, name) < 1:
            p.error("--%s must be at least 1" % name.replace("_", "-"))
    if any(x not in ("auto", "f32", "f16", "int8") for x in a.precision.split(",")):
        p.error("--precision takes auto, f32, f16 and int8, comma-separated, not %r" % a.precision)
    if any(d not in ("fp32", "fp16") for d in a.transformers_dtype.split(",")):
        p.error("--transformers-dtype takes fp32 and fp16, comma-separated, not %r" % a.transformers_dtype)
    if a.transformers_only:
        run_transformers(a)
        return 0

    a.model = os.path.abspath(a.model or default_model(a.family) + ("-small" if a.small else ""))
    if os.path.exists(a.model) and not os.path.isdir(a.model):
        p.error("--model %s is not a folder" % a.model)
    make_model(a.model, a.small, a.family)  # a folder that is not there yet is written
    src = sources(a.model, a.batch, a.src_len, a.seed)
    fd, ids_path = tempfile.mkstemp(prefix="vkformer-bench-ids-", suffix=".txt", dir="/tmp")
    with os.fdopen(fd, "w") as f:
        f.write("".join(",".join(map(str, s)) + "\n" for s in src))
    results = []
    try:
        for precision in a.precision.split(","):
            cmd = [a.vkformer, "bench", "translate", "--model", a.model, "--input", ids_path, "--max-new",
                   str(a.max_new), "--repeat", str(a.repeat), "--json", "--precision", precision]
            if a.beam:
                cmd += ["--beam", str(a.beam)]
            print("bench_translate: " + " ".join(map(shlex.quote, cmd)), file=sys.stderr)
            r = subprocess.run(cmd, stdout=subprocess.PIPE, universal_newlines=True)
            if r.returncode:
                print("bench_translate: vkformer exited %d" % r.returncode, file=sys.stderr)
                return 1
            v = json.loads(r.stdout.strip().splitlines()[-1])
            v["engine"] = "vkformer"
            v["precision"] = precision
            results.append(v)
            if a.json:
                print(json.dumps(v), flush=True)
        if not a.no_transformers:
            here = [sys.executable, os.path.abspath(__file__)]
            args = ["--transformers-only", "--model", a.model, "--ids", ids_path, "--max-new", str(a.max_new),
                    "--repeat", str(a.repeat), "--beam", str(a.beam), "--transformers-dtype", a.transformers_dtype] + \
                (["--device", a.device] if a.device else [])
            try:
                import transformers  # noqa: F401
                runner = here
            except ImportError:
                runner = None
            if runner is None and a.transformers_python:
                runner = shlex.split(a.transformers_python) + [os.path.abspath(__file__)]
            if runner is None:
                print("bench_translate: Transformers is not importable here and no --transformers-python was given: "
                      "vkformer alone", file=sys.stderr)
            else:
                env = dict(os.environ)
                env["HF_PYTHON_BIND"] = ":".join(x for x in [env.get("HF_PYTHON_BIND"), a.model, HERE, ROOT] if x)
                print("bench_translate: Transformers: " + " ".join(map(shlex.quote, runner + args)), file=sys.stderr)
                t = subprocess.Popen(runner + args, stdout=subprocess.PIPE, universal_newlines=True, env=env)
                for line in t.stdout:  # one line per dtype, passed on as it comes
                    if line.startswith("{"):
                        results.append(json.loads(line))
                        if a.json:
                            print(json.dumps(results[-1]), flush=True)
                if t.wait():
                    print("bench_translate: the Transformers run exited %d" % t.returncode, file=sys.stderr)
                    return 1
    finally:
        os.unlink(ids_path)
    if a.json:
        return 0
    print("%s (%s): batch %d, %d source tokens, %d target tokens each (min-new = max-new)"
          % ({"marian": "OPUS-MT shapes", "nllb": "NLLB-200-600M shapes", "t5": "Flan-T5-base shapes"}[a.family],
             os.path.basename(a.model), a.batch, a.src_len, a.max_new))
    for res in results:
        print("  %-17s %-45s %9.1f ms  %9.1f target tokens/s" % (
            res["engine"] + " " + (res["dtype"] if res["engine"] == "transformers" else res["precision"]),
            res["device"][:45], res["median_ms"], res["target_tokens_per_s"]))
    mine = [r for r in results if r["engine"] == "vkformer"]
    for res in results:
        if res["engine"] != "transformers":
            continue
        for v in mine:
            print("  vkformer %s / Transformers %s: %.2fx" % (v["precision"], res["dtype"], v["target_tokens_per_s"] /
                                                            res["target_tokens_per_s"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
